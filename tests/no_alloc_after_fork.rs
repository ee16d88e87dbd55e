//! The child side allocates nothing between `clone` and `execve`.
//!
//! A global allocator records the test process's pid and, when called from any other
//! process, writes a message and exits with status 86 through raw system calls. Every
//! child path is driven through it (setup that succeeds with every kind of step, setup
//! that fails, a program that is not found, the exec of the sandbox's init on both
//! layers), and last, a deliberate allocation in a forked child proves that the trap
//! fires. (The init itself runs no host code: it is a separate image without allocator.)
//! Only that deliberate allocation writes to stderr in a passing run, and its line says
//! that it is the deliberate one; a bare `allocation after fork` is a child path that
//! allocated.
//!
//! Passthrough, layer 2 and the trap's self-check need no user namespace and run on every
//! host, as root and in the re-run as uid 65534; the full layer is its own test behind
//! `require!(UserNs)`. The fork launcher (macOS and the other Unix systems) builds on
//! Linux only inside the library's unit tests, so its own stunt-allocator test lives
//! there (`process::launch_fork::tests::no_allocation_between_fork_and_exec`, with
//! `src/test_alloc.rs`).
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use common::{Feature, tempdir};
use stockade::{Error, Network, Policy, Sandbox, SpawnError};

const TRAPPED: i32 = 86;

static PARENT: AtomicI32 = AtomicI32::new(0);

/// Set around the fork whose child allocates on purpose, to prove the trap fires.
static DELIBERATE: AtomicBool = AtomicBool::new(false);

const DELIBERATE_LINE: &[u8] =
    b"no_alloc_after_fork: the deliberate allocation in a forked child was trapped, as it must be\n";

/// Serializes the tests of this file: while the trap is armed, no other test may fork.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Trap;

fn check() {
    let parent = PARENT.load(Ordering::Relaxed);
    if parent != 0 && stockade_sys::linux::getpid() != parent {
        let line: &[u8] = if DELIBERATE.load(Ordering::Relaxed) {
            DELIBERATE_LINE
        } else {
            b"allocation after fork\n"
        };
        // SAFETY: fd 2 stays open for the whole test process; this only writes to it.
        let stderr = unsafe { stockade_sys::BorrowedFd::borrow_raw(2) };
        let _ = stockade_sys::linux::write(stderr, line);
        stockade_sys::linux::exit_group(TRAPPED);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, after
// a check that allocates nothing.
unsafe impl GlobalAlloc for Trap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check();
        // SAFETY: forwarded as received; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        check();
        // SAFETY: forwarded as received; `ptr` came from `System` via `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check();
        // SAFETY: forwarded as received; `ptr` came from `System` via `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Trap = Trap;

/// Passthrough, layer 2 and the trap's own check need no user namespace: they run first,
/// whatever the host allows, and in the unprivileged re-run too.
#[test]
fn no_allocation_between_clone_and_exec() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    PARENT.store(stockade_sys::linux::getpid(), Ordering::Relaxed);
    let ws = tempdir();

    // Passthrough (mode disabled) takes the clone path without namespaces.
    let mut p = Policy::with_workspace(ws.path());
    p.mode = stockade::Mode::Disabled;
    let passthrough = Sandbox::new(p).unwrap();
    let out = passthrough.command("true").output().unwrap();
    assert!(out.status.success());
    let err = passthrough
        .command("stockade-no-such-program")
        .spawn()
        .unwrap_err();
    assert!(
        matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
        "{err}"
    );
    // Without an init the setup child takes the controlling terminal; the step failing
    // (no terminal) writes its record.
    let (_master, slave, _) = common::openpty();
    let out = passthrough
        .command("sh")
        .args(["-c", "exit 5"])
        .stdin(stockade::Stdio::from(slave))
        .controlling_terminal(true)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let err = passthrough
        .command("true")
        .controlling_terminal(true)
        .output()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Spawn(SpawnError::Setup {
                errno: stockade::error::Errno::ENOTTY,
                ..
            })
        ),
        "{err}"
    );

    // Layer 2, chosen on purpose: Landlock and seccomp without namespaces.
    let mut p = Policy::with_workspace(ws.path());
    p.layer = Some(stockade::Layer::Landlock);
    p.network = Network::None;
    let layer2 = Sandbox::new(p).unwrap();
    let out = layer2
        .command("sh")
        .args(["-c", "exit 4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    // Explain: the explained filter installed with a listener, which the child sends.
    let mut child = layer2
        .command("unshare")
        .args(["-U", "true"])
        .explain(true)
        .stderr(stockade::Stdio::null())
        .spawn()
        .unwrap();
    assert!(!child.wait().unwrap().success());
    assert_eq!(child.denials().len(), 1);
    init_paths(&layer2);

    trap_fires();
    PARENT.store(0, Ordering::Relaxed);
}

/// The full layer: every kind of step, a failing one, and the init's paths.
#[test]
fn no_allocation_between_clone_and_exec_in_the_full_layer() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    require!(Feature::UserNs);
    PARENT.store(stockade_sys::linux::getpid(), Ordering::Relaxed);

    // Every kind of step: binds, symlinks, masks, pins, tmpfs, dev, proc, net, tools.
    let ws = tempdir();
    let tools = tempdir();
    let extra = tempdir();
    std::fs::create_dir_all(ws.path().join("a/data")).unwrap();
    // The .git layer (an overlay, and a pack bound read-only on it) and a .git file.
    std::fs::create_dir_all(ws.path().join(".git/objects/pack")).unwrap();
    std::fs::write(ws.path().join(".git/objects/pack/pack-0.pack"), "").unwrap();
    std::fs::write(extra.path().join(".git"), "gitdir: /nowhere\n").unwrap();
    // A submodule checkout the index lists: the directories on the way pinned, its `.git`
    // file bound read-only.
    let scratch = tempdir();
    let git = std::process::Command::new("git")
        .arg("-C")
        .arg(scratch.path())
        .arg("init")
        .arg("-q")
        .status()
        .unwrap();
    assert!(git.success());
    let git = std::process::Command::new("git")
        .arg("-C")
        .arg(scratch.path())
        .args(["update-index", "--add", "--cacheinfo"])
        .arg("160000,0123456789abcdef0123456789abcdef01234567,deps/sub")
        .env("GIT_INDEX_FILE", ws.path().join(".git/index"))
        .status()
        .unwrap();
    assert!(git.success());
    std::fs::create_dir_all(ws.path().join("deps/sub")).unwrap();
    std::fs::write(ws.path().join("deps/sub/.git"), "gitdir: ../../.git/x\n").unwrap();
    // A `.git` symlink into its root: the link and the directory between pinned, the
    // target layered.
    let linked = tempdir();
    std::fs::create_dir_all(linked.path().join("sub/real/objects/pack")).unwrap();
    std::os::unix::fs::symlink("sub/real", linked.path().join(".git")).unwrap();
    let mut p = Policy::with_workspace(ws.path());
    p.data_dir = Some(ws.path().join("a/data"));
    p.tools_dir = Some(tools.path().to_path_buf());
    p.writable_paths = vec![extra.path().to_path_buf(), linked.path().to_path_buf()];
    p.network = Network::None;
    // Limits: rlimits, RLIMIT_NPROC (not root) or the cgroup's join (root), the inotify
    // counts of the fresh /proc.
    p.limits.open_files = Some(512);
    p.limits.cpu_time = Some(std::time::Duration::from_secs(60));
    p.limits.processes = Some(100);
    p.limits.wall_time = Some(std::time::Duration::from_secs(60));
    if nix::unistd::geteuid().is_root() {
        p.limits.memory = Some(stockade::ByteSize::mib(1024));
        p.limits.cpu = Some(1.5);
    }
    let sb = Sandbox::new(p).unwrap();
    assert_eq!(sb.degradation(), None);
    for _ in 0..20 {
        let out = sb.command("sh").args(["-c", "exit 3"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Explain, on the full layer.
    let mut child = sb
        .command("unshare")
        .args(["-U", "true"])
        .explain(true)
        .stderr(stockade::Stdio::null())
        .spawn()
        .unwrap();
    assert!(!child.wait().unwrap().success());
    assert_eq!(child.denials().len(), 1);

    // A terminal as stdio: bound onto /dev/console.
    let (_master, slave, _) = common::openpty();
    let out = sb
        .command("sh")
        .args(["-c", "test -c /dev/console && exit 6"])
        .stdin(stockade::Stdio::from(slave))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));

    // `Command::pty`: the child opens it from the sandbox's devpts and sends the master.
    let mut child = sb
        .command("sh")
        .args(["-c", "test -t 0 && exit 7"])
        .pty(24, 80)
        .spawn()
        .unwrap();
    assert!(child.pty().is_some());
    assert_eq!(child.wait().unwrap().code(), Some(7));

    // The exec path that searches PATH and fails.
    let err = sb.command("stockade-no-such-program").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
        "{err}"
    );

    // A failing setup step (the error path writes the record and exits): a writable path
    // replaced by a symlink after the sandbox was made fails its bind with ELOOP.
    let ws2 = tempdir();
    let shared = tempdir();
    let w = shared.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let mut p = Policy::with_workspace(ws2.path());
    p.writable_paths = vec![w.clone()];
    let sb2 = Sandbox::new(p).unwrap();
    std::fs::rename(&w, shared.path().join("real")).unwrap();
    std::os::unix::fs::symlink(shared.path().join("real"), &w).unwrap();
    let err = sb2.command("true").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Spawn(SpawnError::Setup { .. })),
        "{err}"
    );

    init_paths(&sb);
    PARENT.store(0, Ordering::Relaxed);
}

/// The init's path: the setup child execs the embedded init from its memfd, and the init
/// starts the program. Its exec failures, and a program's death by signal, come back
/// through the init.
fn init_paths(sb: &Sandbox) {
    let out = sb
        .command("sh")
        .args(["-c", "cat /proc/$PPID/comm; kill -TERM $$"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"stockade-init\n");
    assert_eq!(out.status.signal(), Some(libc::SIGTERM));
    let err = sb.command("stockade-no-such-program").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
        "{err}"
    );
}

/// Last: the trap fires on a deliberate allocation in a forked child.
fn trap_fires() {
    DELIBERATE.store(true, Ordering::Relaxed);
    // SAFETY: the child only allocates (which the trap turns into exit_group) or exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let v = std::hint::black_box(vec![1u8; 64]);
        stockade_sys::linux::exit_group(i32::from(v[0]));
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    DELIBERATE.store(false, Ordering::Relaxed);
    let status = std::process::ExitStatus::from_raw(status);
    assert_eq!(
        status.code(),
        Some(TRAPPED),
        "the trap did not fire: {status:?}"
    );
    PARENT.store(0, Ordering::Relaxed);
}

/// A passing run's stderr holds no bare `allocation after fork` (which would read as a
/// failure), only the deliberate allocation's own line.
#[test]
fn a_passing_run_reports_only_the_deliberate_trap() {
    if std::env::var_os("STOCKADE_TEST_TRAP_OUTPUT").is_some() {
        return;
    }
    // The child is forked by std: not while the other test has the trap armed.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "no_allocation_between_clone_and_exec",
            "--nocapture",
        ])
        .env("STOCKADE_TEST_TRAP_OUTPUT", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    let deliberate = String::from_utf8_lossy(DELIBERATE_LINE);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines, [deliberate.trim_end()], "{stderr}");
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
