//! Child side of the per-command steps around the layout: stdio and the fd table before
//! it, the controlling terminal after it, then the `execve` of the program (by the setup
//! child itself without an init; with one, the init's fork execs it, `init/src/program.rs`).
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::c_uint;

use stockade_sys::linux as sys;
use stockade_sys::{BorrowedFd, Errno};

use super::R;
use crate::backend::linux::prepare::Exec;

/// Dup the prepared stdio fds onto 0, 1 and 2. The parent made sure that no source fd is
/// itself 0, 1 or 2 unless it is already in place.
pub(super) fn stdio(exec: &Exec) -> R {
    for (target, &src) in (0..).zip(&exec.stdio) {
        if src < 0 {
            continue;
        }
        // SAFETY: the parent keeps each prepared stdio fd open in `exec` until this child
        // has exec'd or exited.
        let src_fd = unsafe { BorrowedFd::borrow_raw(src) };
        if src == target {
            // Already in place: only clear close-on-exec.
            sys::fcntl_setfd(src_fd, 0)?;
        } else {
            // SAFETY: 0, 1 and 2 of this child are its own copies (not shared with the
            // host: no CLONE_FILES), and replacing them is the point; no source is one of
            // them unless it is already in place (handled above).
            unsafe { sys::dup3(src_fd, target, 0) }?;
        }
    }
    for &fd in &exec.pass {
        // SAFETY: the parent keeps each passed fd open in `exec` until this child has
        // exec'd or exited.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        sys::fcntl_setfd(fd, 0)?;
    }
    Ok(())
}

/// Close every fd from 3 up, except the ones in `exec.keep` (sorted).
pub(super) fn close_fds(exec: &Exec) -> R {
    let mut first: c_uint = 3;
    for &keep in &exec.keep {
        let keep = keep as c_uint;
        if keep > first {
            // SAFETY: this child's fd table is its own copy (no CLONE_FILES); the fds it
            // still needs are the ones in `keep` and 0-2, and nothing else in it will use
            // the others before `execve`.
            unsafe { sys::close_range(first, keep - 1, 0) }?;
        }
        if keep >= first {
            first = keep + 1;
        }
    }
    // SAFETY: as above: nothing past the last kept fd is used by this child again.
    unsafe { sys::close_range(first, c_uint::MAX, 0) }
}

/// Makes `exec.controlling_terminal`, when set, the session's controlling terminal.
pub(super) fn controlling_terminal(exec: &Exec) -> R {
    if exec.controlling_terminal < 0 {
        return Ok(());
    }
    // SAFETY: the terminal is one of 0, 1, 2, which `stdio` has just put in place and
    // `close_fds` kept.
    let fd = unsafe { BorrowedFd::borrow_raw(exec.controlling_terminal) };
    sys::ioctl_tiocsctty(fd)
}

/// Unblocks signals (their handlers are the defaults by now) and tries each candidate
/// path, as `execvp` does: a missing file moves on, a permission error is remembered.
pub(super) fn exec_program(exec: &Exec) -> Errno {
    if let Err(e) = sys::rt_sigprocmask(libc::SIG_SETMASK, &0, None) {
        return e;
    }
    let mut seen = Errno(libc::ENOENT);
    for candidate in &exec.program.candidates {
        // SAFETY: `argv` and `envp` are NULL-terminated arrays of pointers into `CString`s
        // owned by `exec`, which the parent keeps alive until this child has exec'd or
        // exited (the parent thread is suspended by CLONE_VFORK until then).
        let e = unsafe {
            sys::execve(
                candidate,
                exec.program.argv.as_ptr(),
                exec.program.envp.as_ptr(),
            )
        };
        match e.0 {
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE => {}
            libc::EACCES | libc::EPERM | libc::ENOEXEC => seen = e,
            _ => return e,
        }
    }
    seen
}
