//! Shared test helpers: honest skips, sandboxes over temp dirs, running shell snippets.
//!
//! # Skips, and when a skip is a failure
//!
//! A test that needs something this host or this run lacks calls [`require!`]: it prints
//! `SKIP <test>: <reason>` on stderr and returns. `STOCKADE_TEST_REQUIRE` turns skips into
//! failures, for the features it names (a comma list):
//!
//! - `all`: every kernel feature and tool (`userns`, `landlock`, `seccomp`, `setpriv`,
//!   `strace`, `cc`). A machine of the kind CI runs on has them all, whoever runs the suite.
//! - `root`: running as root. It is a property of the run, not of the machine, so `all`
//!   does not include it: it must be listed (`STOCKADE_TEST_REQUIRE=all,root`).
//!
//! So `cargo test` as an ordinary user runs every test that needs no privilege and prints
//! `SKIP <test>: needs root …` for the others (the `root_only_*` tests, the re-run of each
//! binary as uid 65534, the cases of `seccomp_self` that only root can tell from the
//! kernel's own `EPERM`); with `STOCKADE_TEST_REQUIRE=all` it still fails on a missing
//! kernel feature. CI runs the suite twice (`.ci/run`): as root with `all,root`, where
//! nothing may skip, and as an unprivileged user with `all`, where only the root-only
//! tests skip. The re-run as uid 65534 passes the outer list on without `root`.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use stockade::{Capabilities, Policy, Sandbox};

pub mod git;

/// A kernel feature or privilege a test needs.
#[derive(Clone, Copy, Debug)]
pub enum Feature {
    /// User namespaces that can map ids and mount.
    UserNs,
    /// Running as root.
    Root,
    /// The `setpriv` tool, to drop to another uid.
    Setpriv,
    /// The `strace` tool, to count the system calls of a run.
    Strace,
    /// A C compiler (`cc`), to build freestanding test programs.
    Cc,
}

impl Feature {
    fn name(self) -> &'static str {
        match self {
            Feature::UserNs => "userns",
            Feature::Root => "root",
            Feature::Setpriv => "setpriv",
            Feature::Strace => "strace",
            Feature::Cc => "cc",
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
                .then(|| "needs root (run `cargo test` as root for the privileged half)".into()),
            Feature::Setpriv => (!Path::new("/usr/bin/setpriv").exists())
                .then(|| "setpriv not found (apt-get install util-linux)".into()),
            Feature::Strace => (!Path::new("/usr/bin/strace").exists())
                .then(|| "strace not found (apt-get install strace)".into()),
            Feature::Cc => (!Path::new("/usr/bin/cc").exists())
                .then(|| "cc not found (apt-get install gcc)".into()),
        }
    }
}

/// Whether `STOCKADE_TEST_REQUIRE` demands `f` (see the module docs).
pub fn required(f: Feature) -> bool {
    required_name(f.name())
}

/// Whether `STOCKADE_TEST_REQUIRE` demands the feature `name` (`userns`, `landlock`,
/// `seccomp`, `setpriv`, `strace`, `cc`, or `root`, which `all` leaves out).
pub fn required_name(name: &str) -> bool {
    let list = std::env::var("STOCKADE_TEST_REQUIRE").unwrap_or_default();
    demands(&list, name)
}

/// Whether the comma list `list` demands `name`: named, or `all` for anything but `root`.
fn demands(list: &str, name: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|x| x == name || (x == "all" && name != "root"))
}

/// The list for the re-run as uid 65534: the outer one without `root`.
fn without_root(list: &str) -> String {
    list.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty() && *x != "root")
        .collect::<Vec<_>>()
        .join(",")
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

/// A finished process's stdout then stderr, as text (for assertion messages).
pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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

/// The `stockade` binary under test: the copy the uid-65534 re-run made (the build's own
/// may sit under a directory that user cannot enter, such as root's home), else cargo's.
pub fn stockade_exe() -> PathBuf {
    if let Some(p) = std::env::var_os("STOCKADE_TEST_EXE") {
        return PathBuf::from(p);
    }
    match option_env!("CARGO_BIN_EXE_stockade") {
        Some(bin) => PathBuf::from(bin),
        None => panic!("the stockade binary is built only with the cli feature"),
    }
}

/// When running as root: re-runs this test binary as uid/gid 65534 with the libtest
/// `filter` arguments (and without the `root_only_*` tests, which need root and ran in the
/// outer run), and asserts that every selected test passed there too.
pub fn rerun_as_nobody(filter: &[&str]) {
    for f in [Feature::Root, Feature::Setpriv] {
        if let Some(reason) = f.missing() {
            assert!(!required(f), "the re-run as uid 65534: {reason}");
            skip(
                module_path!(),
                &format!("the re-run as uid 65534: {reason}"),
            );
            return;
        }
    }
    let (dir, exe) = world_executable_copy();
    // The CLI under test, where that user can run it.
    let cli = option_env!("CARGO_BIN_EXE_stockade").map(|bin| {
        use std::os::unix::fs::PermissionsExt;
        let copy = dir.path().join("stockade");
        std::fs::copy(bin, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        copy
    });
    let mut setpriv = std::process::Command::new("setpriv");
    if let Some(cli) = &cli {
        setpriv.env("STOCKADE_TEST_EXE", cli);
    }
    let out = setpriv
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
        // Tests that need root (named `root_only_*`) ran in the outer, privileged run; so
        // did those that use the caller's Rust toolchain (`callers_toolchain_*`), which
        // lives in a home uid 65534 cannot read (CI's unprivileged pass runs them with
        // that user's own toolchain).
        .args(["--skip", "root_only_", "--skip", "callers_toolchain_"])
        .args(["--test-threads", "2"])
        .env("HOME", "/tmp")
        .env("TMPDIR", "/tmp")
        .env("STOCKADE_TEST_AS_NOBODY", "1")
        // The privileged half ran as root already; as nobody only it may skip.
        .env(
            "STOCKADE_TEST_REQUIRE",
            without_root(&std::env::var("STOCKADE_TEST_REQUIRE").unwrap_or_default()),
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

/// The rules of `STOCKADE_TEST_REQUIRE`, checked in every test binary that includes this
/// module.
#[test]
fn common_require_list_rules() {
    assert!(demands("all", "userns") && demands("all", "strace"));
    assert!(!demands("all", "root"), "`all` must not demand root");
    assert!(demands("all,root", "root") && demands("userns, root", "root"));
    assert!(!demands("", "userns") && !demands("landlock", "userns"));
    assert_eq!(without_root("all,root"), "all");
    assert_eq!(without_root("root"), "");
    assert_eq!(without_root("userns, root ,seccomp"), "userns,seccomp");
}

/// The C library's text for `ELOOP`, as std's `io::Error` and stockade's errors render it
/// (both take it from `strerror`): glibc and musl word it differently.
pub const ELOOP_TEXT: &str = if cfg!(target_env = "musl") {
    "Symbolic link loop"
} else {
    "Too many levels of symbolic links"
};

/// A fresh directory under `/var/tmp` and its canonical path: outside the host's `/tmp`,
/// so the sandbox's private `/tmp` cannot stand in for a grant or a bind that is missing.
pub fn var_tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("stockade-test-")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp");
    let path = std::fs::canonicalize(dir.path()).unwrap();
    assert!(!path.starts_with("/tmp"), "{}", path.display());
    (dir, path)
}

/// A new pty pair: (master, slave, the slave's path).
pub fn openpty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd, PathBuf) {
    use std::os::fd::FromRawFd;
    let (mut m, mut s) = (-1, -1);
    // SAFETY: openpty writes two fds to the out-pointers; name, termios and winsize are null.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: openpty just returned this fd; nothing else owns it.
    let master = unsafe { std::os::fd::OwnedFd::from_raw_fd(m) };
    // SAFETY: as above.
    let slave = unsafe { std::os::fd::OwnedFd::from_raw_fd(s) };
    let path = std::fs::read_link(format!("/proc/self/fd/{s}")).unwrap();
    (master, slave, path)
}

/// The layers most tests run on: full, and landlock (named on purpose, with
/// `min_layer = landlock`, which a root host needs).
pub const LAYERS: [stockade::Layer; 2] = [stockade::Layer::Full, stockade::Layer::Landlock];

/// A sandbox on `layer` (landlock accepted as the weakest), workspace `ws`, with `f`
/// applied to the policy.
pub fn sandbox_on(ws: &Path, layer: stockade::Layer, f: impl FnOnce(&mut Policy)) -> Sandbox {
    sandbox(ws, |p| {
        p.layer = Some(layer);
        p.min_layer = Some(stockade::Layer::Landlock);
        f(p);
    })
}

/// Whether this test runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// All of a child's piped stdout (taken from it), as text.
pub fn read_stdout(child: &mut stockade::Child) -> String {
    use std::io::Read;
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout piped")
        .read_to_string(&mut out)
        .expect("read stdout");
    out
}

/// A test HTTP server on `127.0.0.2` (loopback, but outside a sandboxed program's
/// `NO_PROXY`) that answers `body` to every request, one connection at a time; returns its
/// port and the count of connections it accepted.
pub fn http_server(body: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Read;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&count);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, count)
}

/// overlayfs's `f_type` (`OVERLAYFS_SUPER_MAGIC`).
pub const OVERLAY_MAGIC: i64 = 0x794c_7630;

/// The fds of this process that are an overlay mount holding the entry `name` at its
/// root, each with whether it is close-on-exec: the overlay's mount the host keeps after
/// a run (`workspace_mode = "overlay"`). Test only: the library never resolves a name
/// through that fd; a test does, to tell its own run's overlay from another test's.
pub fn overlay_pins(name: &str) -> Vec<(i32, bool)> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(name).unwrap();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(fd) = std::str::from_utf8(e.file_name().as_bytes())
            .ok()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: `statfs` is plain old data; all-zero bytes are a valid value.
        let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `sfs` is writable for the call; a closed or reused fd only fails or
        // answers for another file, which the checks below tell apart.
        if unsafe { libc::fstatfs(fd, &mut sfs) } != 0 {
            continue;
        }
        // `f_type` is an `i64` on 64-bit glibc, an `i32` or `u32` elsewhere.
        #[allow(clippy::unnecessary_cast, clippy::cast_lossless)]
        if sfs.f_type as i64 != OVERLAY_MAGIC {
            continue;
        }
        // SAFETY: as above, for `stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `name` is NUL-terminated and `st` writable for the call.
        let r = unsafe { libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if r != 0 {
            continue;
        }
        // SAFETY: F_GETFD reads the fd's flags and has no other effect.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        out.push((fd, flags >= 0 && flags & libc::FD_CLOEXEC != 0));
    }
    out
}
