//! The path guard on arbitrary bytes: it never panics, and a path it accepts lies under the
//! workspace, passes through no symbolic link, has no `..`, names no denied entry and, for a
//! write, no protected one.
//!
//! The workspace holds directories, a file, a link to outside, a link loop and `.git`, so
//! the fuzzer can reach each refusal from the seed corpus.

#![no_main]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stockade::{PathGuard, Policy};

struct Fixture {
    _dir: tempfile::TempDir,
    guard: PathGuard,
    policy: Policy,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        for d in [ws.join("a/b"), ws.join(".git/hooks"), outside.clone()] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(ws.join("a/f"), "x").expect("write");
        std::fs::write(ws.join("SOUL.md"), "x").expect("write");
        std::fs::write(outside.join("secret"), "x").expect("write");
        symlink(&outside, ws.join("out")).expect("symlink");
        symlink("a", ws.join("a-link")).expect("symlink");
        symlink("loop", ws.join("loop")).expect("symlink");
        let policy = Policy::default();
        let guard = PathGuard::new(&ws, &policy).expect("guard");
        Fixture {
            _dir: dir,
            guard,
            policy,
        }
    })
}

fn same(a: &OsStr, b: &str) -> bool {
    a.as_bytes().eq_ignore_ascii_case(b.as_bytes())
        || a.to_str()
            .is_some_and(|a| a.to_lowercase() == b.to_lowercase())
}

fn check_accepted(f: &Fixture, input: &Path, got: &Path, write: bool) {
    let ws = f.guard.workspace();
    let rel = got
        .strip_prefix(ws)
        .unwrap_or_else(|_| panic!("{input:?} accepted as {got:?}, outside {ws:?}"));
    let mut walk = PathBuf::from(ws);
    for c in rel.components() {
        let Component::Normal(name) = c else {
            panic!("{input:?} accepted as {got:?}, with component {c:?}");
        };
        let mut denied = f
            .policy
            .deny_names
            .iter()
            .map(String::as_str)
            .chain([".git"]);
        assert!(
            !denied.any(|d| same(name, d)),
            "{input:?} accepted with denied {name:?}"
        );
        if write {
            let mut protected = f.policy.protected.iter();
            assert!(
                !protected.any(|p| same(name, p)),
                "{input:?} write to protected {name:?}"
            );
        }
        walk.push(name);
        if let Ok(meta) = walk.symlink_metadata() {
            assert!(
                !meta.file_type().is_symlink(),
                "{input:?} accepted through link {walk:?}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let input = Path::new(OsStr::from_bytes(data));
    if let Ok(got) = f.guard.check_read(input) {
        check_accepted(f, input, &got, false);
    }
    if let Ok(got) = f.guard.check_write(input) {
        check_accepted(f, input, &got, true);
    }
    // Absolute spellings reach the prefix logic.
    let absolute = f.guard.workspace().join(input);
    if let Ok(got) = f.guard.check_list(&absolute) {
        check_accepted(f, &absolute, &got, false);
    }
    // The exec check must not panic on any argument; in an accepted one no white-space
    // separated word has a denied path component.
    let arg = OsStr::from_bytes(data);
    if f.guard.check_exec("sh", [arg], Path::new(".")).is_ok() {
        for word in data.split(u8::is_ascii_whitespace) {
            for name in word.split(|b| *b == b'/').map(OsStr::from_bytes) {
                let mut denied = f
                    .policy
                    .deny_names
                    .iter()
                    .map(String::as_str)
                    .chain([".git"]);
                assert!(
                    !denied.any(|d| same(name, d)),
                    "{arg:?} accepted with {name:?}"
                );
            }
        }
    }
});
