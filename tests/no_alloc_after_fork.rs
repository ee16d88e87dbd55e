//! The child side allocates nothing between `clone` and `execve`.
//!
//! A global allocator records the test process's pid and, when called from any other
//! process, writes a message and exits with status 86 through raw system calls. Every
//! child path is driven through it (setup that succeeds with every kind of step, setup
//! that fails, a program that is not found), and last, a deliberate allocation in a forked
//! child proves that the trap fires.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicI32, Ordering};

use common::{Feature, tempdir};
use stockade::{Error, Network, Policy, Sandbox, SpawnError};

const TRAPPED: i32 = 86;

static PARENT: AtomicI32 = AtomicI32::new(0);

/// Serializes the tests of this file: while the trap is armed, no other test may fork.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Trap;

fn check() {
    let parent = PARENT.load(Ordering::Relaxed);
    if parent != 0 && stockade_sys::linux::getpid() != parent {
        let _ = stockade_sys::linux::write(2, b"allocation after fork\n");
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

#[test]
fn no_allocation_between_clone_and_exec() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    require!(Feature::UserNs);
    PARENT.store(stockade_sys::linux::getpid(), Ordering::Relaxed);

    // Every kind of step: binds, symlinks, masks, pins, tmpfs, dev, proc, net, tools.
    let ws = tempdir();
    let tools = tempdir();
    let extra = tempdir();
    std::fs::create_dir_all(ws.path().join("a/data")).unwrap();
    let mut p = Policy::with_workspace(ws.path());
    p.data_dir = Some(ws.path().join("a/data"));
    p.tools_dir = Some(tools.path().to_path_buf());
    p.writable_paths = vec![extra.path().to_path_buf()];
    p.network = Network::None;
    let sb = Sandbox::new(p).unwrap();
    for _ in 0..20 {
        let out = sb.command("sh").args(["-c", "exit 3"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // The exec path that searches PATH and fails.
    let err = sb.command("stockade-no-such-program").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
        "{err}"
    );

    // A failing setup step (the error path writes the record and exits).
    let ws2 = tempdir();
    std::fs::create_dir_all(ws2.path().join("real/data")).unwrap();
    std::os::unix::fs::symlink(ws2.path().join("real"), ws2.path().join("link")).unwrap();
    let mut p = Policy::with_workspace(ws2.path());
    p.data_dir = Some(ws2.path().join("link/data"));
    let sb2 = Sandbox::new(p).unwrap();
    let err = sb2.command("true").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Spawn(SpawnError::Setup { .. })),
        "{err}"
    );

    // Layer 2, chosen on purpose: Landlock and seccomp without namespaces.
    let mut p = Policy::with_workspace(ws.path());
    p.layer = Some(stockade::Layer::Landlock);
    p.network = Network::None;
    let out = Sandbox::new(p)
        .unwrap()
        .command("sh")
        .args(["-c", "exit 4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));

    // Passthrough (mode disabled) takes the same clone path without namespaces.
    let mut p = Policy::with_workspace(ws.path());
    p.mode = stockade::Mode::Disabled;
    let out = Sandbox::new(p).unwrap().command("true").output().unwrap();
    assert!(out.status.success());

    // Last: the trap fires on a deliberate allocation in a forked child.
    // SAFETY: the child only allocates (which the trap turns into exit_group) or exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let v = std::hint::black_box(vec![1u8; 64]);
        stockade_sys::linux::exit_group(i32::from(v[0]));
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    let status = std::process::ExitStatus::from_raw(status);
    assert_eq!(
        status.code(),
        Some(TRAPPED),
        "the trap did not fire: {status:?}"
    );
    PARENT.store(0, Ordering::Relaxed);
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
