//! Child side: runs between `fork` and `execve`. Replays the prepared operations and
//! execs; decides nothing.
//!
//! # The hazard
//!
//! `fork` copies a possibly multithreaded host into a process with one thread. Locks that
//! other threads held stay locked forever in the copy (the allocator's among them), so
//! until `execve` this code makes only async-signal-safe calls: no allocation, no lock, no
//! `tracing`, no formatting, no panic. It reads `errno` right after each failing call
//! (the child has its own copy of it, unlike Linux's `CLONE_VM` child).
//!
//! The one exception is `sandbox_init` on macOS (the `SandboxInit` step): Apple's profile
//! compiler runs in this process and allocates. See [`crate::backend::macos::child`] and
//! `SECURITY.md`.
//!
//! # Order
//!
//! stdio first (nothing after it may clobber 0, 1, 2), then the plan's steps (signal
//! dispositions, `setsid`, `sandbox_init`), then the controlling terminal when the command
//! asked for one (it needs the new session), then closing every other fd, `chdir`, and
//! last unblocking signals and `execve`. The fds close after `sandbox_init` so that
//! Apple's library code keeps whatever descriptors it opened itself while it runs; no
//! foreign code runs between it and the close.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::c_int;
use core::mem::MaybeUninit;

use super::os::confine_in_child;
use super::prepare::{Exec, Op};
use super::{Confine, extra};
use crate::backend::report::{self, MESSAGE_LEN, Record};

/// Exit status of a child whose setup failed (the parent reads the record, not this).
pub const SETUP_FAILED: c_int = 125;

fn errno() -> i32 {
    nix::errno::Errno::last_raw()
}

/// Sets `resource`'s soft and hard limit, each no higher than the inherited hard limit
/// (async-signal-safe: `getrlimit` and `setrlimit` are plain system calls).
fn set_rlimit(resource: i32, soft: u64, hard: u64) -> Result<(), i32> {
    let mut old = MaybeUninit::<libc::rlimit>::uninit();
    // The resource's C type differs between systems (`c_int`, glibc's enum); the plan's
    // numbers come from the same `libc` constants.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    let res = resource as _;
    // SAFETY: `old` is a writable `rlimit` that lives across the call.
    if unsafe { libc::getrlimit(res, old.as_mut_ptr()) } < 0 {
        return Err(errno());
    }
    // SAFETY: `getrlimit` succeeded and filled `old`.
    let inherited = unsafe { old.assume_init() }.rlim_max;
    let new = libc::rlimit {
        rlim_cur: (soft as libc::rlim_t).min(inherited),
        rlim_max: (hard as libc::rlim_t).min(inherited),
    };
    // SAFETY: `new` is an initialized `rlimit` the call only reads.
    if unsafe { libc::setrlimit(res, &new) } < 0 {
        return Err(errno());
    }
    Ok(())
}

/// Replays `exec` and runs the program. Never returns. `confine` is the prepared sandbox
/// for the `SandboxInit` step (`None` when the plan has none).
pub fn run(exec: &Exec, confine: Option<&Confine>) -> ! {
    let base = exec.ops.len() as u32;
    if let Err(e) = stdio(exec) {
        fail(exec, Record::new(base + extra::STDIO, e));
    }
    for (index, op) in exec.ops.iter().enumerate() {
        let step = index as u32;
        match op {
            Op::ResetSignals => reset_signals(),
            // The host made the snapshot before the fork.
            Op::Snapshot => {}
            Op::NewSession => {
                // SAFETY: setsid takes no arguments; a forked child is never a group
                // leader, so it succeeds unless the system refuses.
                if unsafe { libc::setsid() } < 0 {
                    fail(exec, Record::new(step, errno()));
                }
            }
            Op::ResourceLimits { list, len } => {
                for &(resource, soft, hard) in list.iter().take(*len) {
                    if let Err(e) = set_rlimit(resource, soft, hard) {
                        fail(exec, Record::new(step, e));
                    }
                }
            }
            Op::SandboxInit => {
                let Some(c) = confine else {
                    // A plan step without its prepared profile: refuse rather than run
                    // unconfined.
                    fail(exec, Record::new(step, libc::EINVAL));
                };
                let mut message = [0u8; MESSAGE_LEN];
                if let Err(len) = confine_in_child(c, &mut message) {
                    fail(exec, Record::with_message(step, message, len));
                }
            }
        }
    }
    // After `setsid` (a plan step): only a session leader without a controlling terminal
    // may take one.
    if exec.controlling_terminal >= 0 {
        // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal) and touches no
        // memory; an fd that is not a terminal only fails with ENOTTY.
        if unsafe { libc::ioctl(exec.controlling_terminal, libc::TIOCSCTTY as _, 0) } < 0 {
            fail(
                exec,
                Record::new(base + extra::CONTROLLING_TERMINAL, errno()),
            );
        }
    }
    close_fds(exec);
    // SAFETY: `exec.cwd` is a NUL-terminated string owned by `exec`, which the parent
    // keeps alive (this process has its own copy of it after fork).
    if unsafe { libc::chdir(exec.cwd.as_ptr()) } != 0 {
        fail(exec, Record::new(base + extra::CHDIR, errno()));
    }
    let e = exec_program(exec);
    fail(exec, Record::new(base + extra::EXEC, e))
}

/// Reports `record` and exits, without running the host's `atexit` handlers or flushing
/// its stdio buffers (`_exit`).
fn fail(exec: &Exec, record: Record) -> ! {
    // `exec.report` is the report pipe's write end, kept open by `close_fds`. If the
    // write fails the parent sees EOF from a child that never exec'd, not a success.
    report::send(exec.report, &record);
    // SAFETY: `_exit` ends the process at once; it is async-signal-safe.
    unsafe { libc::_exit(SETUP_FAILED) }
}

/// dup2 the prepared stdio fds onto 0, 1 and 2 (dup2 clears close-on-exec on the copy),
/// and clear close-on-exec on the fds passed on purpose.
fn stdio(exec: &Exec) -> Result<(), i32> {
    for (target, &src) in (0..).zip(&exec.stdio) {
        if src < 0 {
            continue;
        }
        // SAFETY: `src` is an open fd the parent passed (≥ 3, so it is not a target);
        // `target` is 0, 1 or 2. dup2 touches no memory.
        if unsafe { libc::dup2(src, target) } < 0 {
            return Err(errno());
        }
    }
    for &fd in &exec.pass {
        // SAFETY: F_SETFD with 0 changes only the descriptor flags of `fd`.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// Closes every fd in `3..exec.fd_limit` except those in `exec.keep` (sorted). `EBADF`
/// from a number that is not open is the common case and is ignored; `close` is
/// async-signal-safe, which `closefrom` on macOS would not be (it does not exist) and
/// reading `/dev/fd` is not (`opendir` allocates).
fn close_fds(exec: &Exec) {
    let mut keep = exec.keep.iter().copied().peekable();
    for fd in 3..exec.fd_limit {
        while keep.next_if(|&k| k < fd).is_some() {}
        if keep.next_if_eq(&fd).is_some() {
            continue;
        }
        // SAFETY: `fd` is not one this child still needs (stdio is below 3, the report
        // pipe and passed fds are in `keep`); closing an fd number that is not open only
        // returns EBADF.
        let _ = unsafe { libc::close(fd) };
    }
}

/// Every disposition back to the default: a signal arriving before `execve` must not run
/// a host handler (the parent blocked all signals around `fork`; they stay blocked until
/// [`exec_program`]). Numbers the system does not have, and `SIGKILL`/`SIGSTOP`, fail with
/// `EINVAL`, which is ignored.
fn reset_signals() {
    for sig in 1..65 {
        // SAFETY: `signal` with SIG_DFL installs no handler and touches no memory of
        // ours; it is async-signal-safe.
        let _ = unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

/// Unblocks signals (their handlers are the defaults by now) and tries each candidate
/// path, as `execvp` does: a missing file moves on, a permission error is remembered.
fn exec_program(exec: &Exec) -> i32 {
    let mut empty = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `empty` is a valid place for a sigset_t; sigemptyset initializes it.
    unsafe { libc::sigemptyset(empty.as_mut_ptr()) };
    // SAFETY: `empty` was initialized just above; no old mask is requested.
    if unsafe { libc::sigprocmask(libc::SIG_SETMASK, empty.as_ptr(), core::ptr::null_mut()) } != 0 {
        return errno();
    }
    let mut seen = libc::ENOENT;
    for candidate in &exec.program.candidates {
        // SAFETY: `candidate` is NUL-terminated; `argv` and `envp` are NULL-terminated
        // arrays of pointers into `CString`s owned by `exec`, all alive in this process
        // (its own copy after fork) until execve replaces it.
        unsafe {
            libc::execve(
                candidate.as_ptr(),
                exec.program.argv.as_ptr(),
                exec.program.envp.as_ptr(),
            )
        };
        let e = errno();
        match e {
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE => {}
            libc::EACCES | libc::EPERM | libc::ENOEXEC => seen = e,
            _ => return e,
        }
    }
    seen
}
