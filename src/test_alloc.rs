//! The unit tests' global allocator: the stunt allocator of `tests/no_alloc_after_fork.rs`,
//! for the launchers that only the library's own tests reach (the fork launcher builds on
//! Linux under `cfg(test)` only, so no integration test can drive it).
//!
//! Inert until [`arm`]: then a call from any process but the armed one writes a line and
//! exits with [`TRAPPED`] through async-signal-safe calls. Every test process runs many
//! tests in parallel, and some fork children of their own, so a test that arms the trap
//! runs alone in a re-run of the test binary (see the fork launcher's
//! `no_allocation_between_fork_and_exec`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Exit status of a process trapped allocating.
pub const TRAPPED: i32 = 86;

/// The line of the deliberate allocation, which proves that the trap fires.
pub const DELIBERATE_LINE: &[u8] =
    b"test_alloc: the deliberate allocation in a forked child was trapped, as it must be\n";

static PARENT: AtomicI32 = AtomicI32::new(0);
static DELIBERATE: AtomicBool = AtomicBool::new(false);

/// Traps allocations in every process but this one, until [`disarm`].
pub fn arm() {
    // SAFETY: getpid takes no arguments and cannot fail.
    PARENT.store(unsafe { libc::getpid() }, Ordering::Relaxed);
}

/// Stops trapping.
pub fn disarm() {
    PARENT.store(0, Ordering::Relaxed);
}

/// Forks a child that allocates on purpose and returns its wait status.
pub fn deliberate_allocation_status() -> std::process::ExitStatus {
    DELIBERATE.store(true, Ordering::Relaxed);
    // SAFETY: the child only allocates (which the trap turns into _exit) or exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let v = std::hint::black_box(vec![1u8; 64]);
        // SAFETY: _exit ends the process at once.
        unsafe { libc::_exit(i32::from(v[0])) };
    }
    let mut status = 0;
    // SAFETY: `pid` is this test's child; `status` is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    DELIBERATE.store(false, Ordering::Relaxed);
    assert_eq!(r, pid);
    std::os::unix::process::ExitStatusExt::from_raw(status)
}

fn check() {
    let parent = PARENT.load(Ordering::Relaxed);
    // SAFETY: getpid takes no arguments, cannot fail and allocates nothing.
    if parent != 0 && unsafe { libc::getpid() } != parent {
        let line: &[u8] = if DELIBERATE.load(Ordering::Relaxed) {
            DELIBERATE_LINE
        } else {
            b"allocation after fork\n"
        };
        // SAFETY: `line` is a live static slice; write only reads it.
        let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        // SAFETY: _exit ends the process at once; it is async-signal-safe.
        unsafe { libc::_exit(TRAPPED) };
    }
}

struct Trap;

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
