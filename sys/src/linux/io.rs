//! File descriptors and plain I/O: reading, writing, closing, duplicating, fd flags, polling.

use core::ffi::{c_int, c_uint};

use super::new_fd;
use crate::Result;
use crate::fd::{BorrowedFd, OwnedFd};

/// `write(2)`: returns the number of bytes written.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize> {
    // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`, a live shared slice.
    unsafe { syscall!(libc::SYS_write, fd.as_raw_fd(), buf.as_ptr(), buf.len()) }
}

/// `read(2)`: returns the number of bytes read.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, which this call
    // borrows exclusively; any bytes are valid `u8`s.
    unsafe { syscall!(libc::SYS_read, fd.as_raw_fd(), buf.as_mut_ptr(), buf.len()) }
}

/// `close(2)`: closes `fd` and reports the kernel's answer, which dropping the [`OwnedFd`]
/// would discard. The fd is gone either way (Linux never keeps it open on error).
pub fn close(fd: OwnedFd) -> Result<()> {
    // SAFETY: `into_raw_fd` hands over sole ownership of the open fd, and the number is
    // not used again.
    unsafe { close_raw(fd.into_raw_fd()) }
}

/// `close(2)` of a raw fd number, for the child that closes fds it holds only as numbers
/// (the prepared plan's copies) without an owning value.
///
/// # Safety
///
/// The caller owns `fd` (nothing else will use the number, or close it, afterwards): closing
/// an fd that another part of the process owns lets the number be reused under it.
pub unsafe fn close_raw(fd: c_int) -> Result<()> {
    // SAFETY: `close` takes no pointer; the caller guarantees that it owns `fd`.
    unsafe { syscall!(libc::SYS_close, fd) }.map(drop)
}

/// `close_range(2)`: closes (or, with `CLOSE_RANGE_CLOEXEC`, marks close-on-exec) every fd
/// in `first..=last`.
///
/// # Safety
///
/// Every open fd in the range belongs to the caller, or is held by nothing that will use it
/// again before the process execs or exits. In practice: call it only in a child between
/// fork/clone and `execve`, or in a process whose every other fd owner is gone.
pub unsafe fn close_range(first: c_uint, last: c_uint, flags: c_uint) -> Result<()> {
    // SAFETY: `close_range` takes no pointer; the caller guarantees that no fd in the
    // range is used by anyone after this.
    unsafe { syscall!(libc::SYS_close_range, first, last, flags) }.map(drop)
}

/// `dup3(2)`: makes `new` a copy of `old`, closing whatever `new` was first. Returns `new`.
///
/// # Safety
///
/// `new` is either not open or owned by the caller, who accepts that the file it referred
/// to is closed and replaced: no other part of the process may still use the number `new`
/// for its old file. The returned fd is the caller's to close (or to leave to `execve`).
pub unsafe fn dup3(old: BorrowedFd<'_>, new: c_int, flags: c_int) -> Result<c_int> {
    // SAFETY: `dup3` takes no pointer; `old` is open for the call (its type), and the caller
    // owns `new`, the one fd this call may close.
    unsafe { syscall!(libc::SYS_dup3, old.as_raw_fd(), new, flags) }.map(|fd| fd as c_int)
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)`: a close-on-exec duplicate of `fd`, numbered `min`
/// or above (the lowest free number there). Unlike musl's `fcntl`, which follows a
/// successful `F_DUPFD_CLOEXEC` with an `F_SETFD` for kernels older than 2.6.24, this is
/// one system call: the flag is set atomically by the kernel.
pub fn fcntl_dupfd_cloexec(fd: BorrowedFd<'_>, min: c_int) -> Result<OwnedFd> {
    // SAFETY: with `F_DUPFD_CLOEXEC` the third argument is an integer, never a pointer;
    // `fd` is open for the call (its type).
    let dup = unsafe { syscall!(libc::SYS_fcntl, fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) }?;
    // SAFETY: the call succeeded, so `dup` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(dup) })
}

/// `fcntl(fd, F_SETFD, flags)`: sets the fd flags (`FD_CLOEXEC`, or 0 to keep `fd` across
/// `execve`).
pub fn fcntl_setfd(fd: BorrowedFd<'_>, flags: c_int) -> Result<()> {
    // SAFETY: with `F_SETFD` the third argument is an integer, never a pointer.
    unsafe { syscall!(libc::SYS_fcntl, fd.as_raw_fd(), libc::F_SETFD, flags) }.map(drop)
}

/// `fcntl(fd, F_GETFD)`: the fd flags (`FD_CLOEXEC`).
pub fn fcntl_getfd(fd: BorrowedFd<'_>) -> Result<c_int> {
    // SAFETY: `F_GETFD` takes no third argument.
    unsafe { syscall!(libc::SYS_fcntl, fd.as_raw_fd(), libc::F_GETFD, 0usize) }.map(|v| v as c_int)
}

/// `ppoll(2)` of no fds, no timeout and the caller's signal mask: blocks until a signal
/// is delivered to a handler (`EINTR`), or for good when every signal is blocked (only
/// `SIGKILL` then ends the caller). Returns that error.
pub fn wait_for_signal() -> crate::Errno {
    // SAFETY: no fds (a NULL array of length 0), no timeout and no signal mask: the kernel
    // reads and writes no memory of the caller.
    match unsafe { syscall!(libc::SYS_ppoll, 0usize, 0usize, 0usize, 0usize, 0usize) } {
        Ok(_) => crate::Errno(libc::EINTR),
        Err(e) => e,
    }
}

/// `ppoll(2)` of one fd with a zero timeout: the events of `events` (plus `POLLERR`,
/// `POLLHUP`, `POLLNVAL`) that `fd` has now.
pub fn poll_now(fd: BorrowedFd<'_>, events: i16) -> Result<i16> {
    let mut fds = [libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    }];
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the kernel reads and writes one `pollfd` in `fds` (length 1) and reads
    // `zero`; both are locals that outlive the call. The signal mask pointer is NULL.
    unsafe {
        syscall!(
            libc::SYS_ppoll,
            fds.as_mut_ptr(),
            fds.len(),
            core::ptr::from_ref(&zero),
            0usize,
            0usize
        )
    }?;
    let [fd] = fds;
    Ok(fd.revents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::test_util::pipe;

    #[test]
    fn read_write_round_trip_through_a_pipe() {
        let (r, w) = pipe();
        assert_eq!(write(w.as_fd(), b"abc"), Ok(3));
        let mut buf = [0u8; 8];
        assert_eq!(read(r.as_fd(), &mut buf), Ok(3));
        assert_eq!(&buf[..3], b"abc");
        close(r).unwrap();
        close(w).unwrap();
    }

    #[test]
    fn dropping_an_owned_fd_closes_it() {
        // The write end's only descriptor: once it is closed, the read end hangs up. (Its
        // number is no witness: the tests running beside this one may reuse it at once.)
        let (r, w) = pipe();
        assert_eq!(poll_now(r.as_fd(), libc::POLLIN), Ok(0));
        drop(w);
        assert_eq!(poll_now(r.as_fd(), libc::POLLIN), Ok(libc::POLLHUP));
        let mut buf = [0u8; 1];
        assert_eq!(read(r.as_fd(), &mut buf), Ok(0));
    }

    #[test]
    fn fd_flags_are_set_and_read_back() {
        let (r, _w) = pipe();
        assert_eq!(fcntl_getfd(r.as_fd()), Ok(libc::FD_CLOEXEC));
        fcntl_setfd(r.as_fd(), 0).unwrap();
        assert_eq!(fcntl_getfd(r.as_fd()), Ok(0));
    }

    #[test]
    fn a_dup_is_close_on_exec_at_or_above_its_minimum_and_shares_the_file() {
        let (r, w) = pipe();
        let dup = fcntl_dupfd_cloexec(w.as_fd(), 100).unwrap();
        assert!(dup.as_raw_fd() >= 100, "{}", dup.as_raw_fd());
        assert_eq!(fcntl_getfd(dup.as_fd()), Ok(libc::FD_CLOEXEC));
        // The same pipe: written through the copy, read from the original's reader.
        assert_eq!(write(dup.as_fd(), b"x"), Ok(1));
        let mut buf = [0u8; 1];
        assert_eq!(read(r.as_fd(), &mut buf), Ok(1));
        // A bad minimum is the kernel's EINVAL, not a new fd.
        assert_eq!(
            fcntl_dupfd_cloexec(w.as_fd(), -1),
            Err(crate::Errno(libc::EINVAL))
        );
    }

    #[test]
    fn poll_now_reports_a_pipe_whose_readers_are_gone() {
        let (r, w) = pipe();
        assert_eq!(poll_now(w.as_fd(), 0), Ok(0));
        drop(r);
        let revents = poll_now(w.as_fd(), 0).unwrap();
        assert_ne!(revents & libc::POLLERR, 0);
    }
}
