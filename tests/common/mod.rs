//! Shared test helpers: honest skips, sandboxes over temp dirs, running shell snippets.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use stockade::{Capabilities, Policy, Sandbox};

/// A kernel feature or privilege a test needs.
#[derive(Clone, Copy, Debug)]
pub enum Feature {
    /// User namespaces that can map ids and mount.
    UserNs,
    /// Running as root.
    Root,
    /// The `setpriv` tool, to drop to another uid.
    Setpriv,
}

impl Feature {
    fn name(self) -> &'static str {
        match self {
            Feature::UserNs => "userns",
            Feature::Root => "root",
            Feature::Setpriv => "setpriv",
        }
    }

    /// `None` when available, else the reason.
    pub fn missing(self) -> Option<String> {
        match self {
            Feature::UserNs => {
                let caps = Capabilities::probe();
                (!caps.user_namespaces.available)
                    .then(|| caps.user_namespaces.reason.clone().unwrap_or_default())
            }
            Feature::Root => (!nix::unistd::geteuid().is_root())
                .then(|| "not root (run `cargo test` as root for the privileged half)".into()),
            Feature::Setpriv => (!Path::new("/usr/bin/setpriv").exists())
                .then(|| "setpriv not found (apt-get install util-linux)".into()),
        }
    }
}

/// Whether `STOCKADE_TEST_REQUIRE` (all, or a comma list) demands `f`.
pub fn required(f: Feature) -> bool {
    required_name(f.name())
}

/// Whether `STOCKADE_TEST_REQUIRE` (all, or a comma list) demands the feature `name`
/// (`userns`, `root`, `setpriv`, `landlock`, `seccomp`).
pub fn required_name(name: &str) -> bool {
    match std::env::var("STOCKADE_TEST_REQUIRE") {
        Ok(v) => v.split(',').any(|x| x.trim() == "all" || x.trim() == name),
        Err(_) => false,
    }
}

/// Returns from the test with `SKIP <test>: <reason>` on stderr when `feature` is missing,
/// or fails it when `STOCKADE_TEST_REQUIRE` demands the feature.
#[macro_export]
macro_rules! require {
    ($f:expr) => {
        if let Some(reason) = $f.missing() {
            if $crate::common::required($f) {
                panic!("required feature {:?} missing: {}", $f, reason);
            }
            $crate::common::skip(module_path!(), &reason);
            return;
        }
    };
}

/// Prints the skip line, uncaptured by libtest.
pub fn skip(test: &str, reason: &str) {
    let name = std::thread::current().name().unwrap_or(test).to_string();
    let _ = writeln!(std::io::stderr().lock(), "SKIP {name}: {reason}");
}

/// A temp dir that the current user owns (mode 0755), removed on drop.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-test-")
        .tempdir()
        .expect("tempdir")
}

/// A sandbox whose workspace is `ws`, with `f` applied to the policy.
pub fn sandbox(ws: &Path, f: impl FnOnce(&mut Policy)) -> Sandbox {
    let mut p = Policy::with_workspace(ws);
    f(&mut p);
    Sandbox::new(p).expect("sandbox")
}

/// Runs `sh -c script` inside and returns its output.
pub fn sh(sb: &Sandbox, script: &str) -> Output {
    sb.command("sh")
        .arg("-c")
        .arg(script)
        .output()
        .expect("spawn")
}

/// Runs `sh -c script`, asserts success, returns stdout.
pub fn sh_ok(sb: &Sandbox, script: &str) -> String {
    let out = sh(sb, script);
    assert!(
        out.status.success(),
        "script failed ({:?}): {script}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a python3 snippet inside; asserts success; returns stdout.
pub fn py_ok(sb: &Sandbox, code: &str) -> String {
    let out = sb
        .command("python3")
        .arg("-c")
        .arg(code)
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "python failed ({:?}): {code}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Python source that tries `expr` and prints the errno name, or `OK`.
pub fn try_errno(expr: &str) -> String {
    format!(
        "import os, errno, socket\ntry:\n    {expr}\n    print('OK')\nexcept OSError as e:\n    print(errno.errorcode.get(e.errno, e.errno))"
    )
}

/// Host processes whose command line contains `marker`.
pub fn host_processes_with(marker: &str) -> Vec<u32> {
    host_processes(|cmd| cmd.contains(marker))
}

/// Host processes whose command line (NULs as spaces) matches `f`.
pub fn host_processes(f: impl Fn(&str) -> bool) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if f(&cmd) {
            out.push(pid);
        }
    }
    out
}

/// A copy of the current test binary that any user can run, in a fresh temp dir.
pub fn world_executable_copy() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = std::env::current_exe().unwrap();
    let copy = dir.path().join(exe.file_name().unwrap());
    std::fs::copy(&exe, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, copy)
}

/// When running as root: re-runs this test binary as uid/gid 65534 with the libtest
/// `filter` arguments (and without the `root_only_*` tests, which need root and ran in the
/// outer run), and asserts that every selected test passed there too.
pub fn rerun_as_nobody(filter: &[&str]) {
    require!(Feature::Root);
    require!(Feature::Setpriv);
    let (_dir, exe) = world_executable_copy();
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(&exe)
        .args(filter)
        // Tests that need root (named `root_only_*`) ran in the outer, privileged run.
        .args(["--skip", "root_only_", "--test-threads", "2"])
        .env("HOME", "/tmp")
        .env("TMPDIR", "/tmp")
        .env("STOCKADE_TEST_AS_NOBODY", "1")
        // The privileged half ran as root already; as nobody only it may skip.
        .env(
            "STOCKADE_TEST_REQUIRE",
            if std::env::var_os("STOCKADE_TEST_REQUIRE").is_some() {
                "all"
            } else {
                ""
            },
        )
        .current_dir("/tmp")
        .output()
        .expect("run setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = writeln!(
        std::io::stderr().lock(),
        "--- as uid 65534 ---\n{stdout}\n{stderr}"
    );
    assert!(
        out.status.success(),
        "tests failed as uid 65534:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("test result: ok"), "{stdout}");
    assert!(
        !stdout.contains(" 0 passed"),
        "ran no test as uid 65534: {stdout}"
    );
}
