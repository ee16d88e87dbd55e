//! Processes, sessions and signals: exec, exit, pidfds, the session, keyrings, the host name.

use core::ffi::{CStr, c_char, c_int, c_long, c_uint, c_ulong};

use super::{new_fd, p};
use crate::fd::{BorrowedFd, OwnedFd};
use crate::{Errno, Result};

/// `execve(2)`: only returns on failure.
///
/// # Safety
///
/// `argv` and `envp` must each point to a NULL-terminated array of pointers to
/// NUL-terminated strings, all of which stay valid for the duration of the call.
pub unsafe fn execve(path: &CStr, argv: *const *const c_char, envp: *const *const c_char) -> Errno {
    // SAFETY: `path` is a valid C string; the caller guarantees `argv` and `envp`.
    let ret = unsafe { syscall!(libc::SYS_execve, p(path), argv, envp) };
    match ret {
        Err(e) => e,
        Ok(_) => Errno(libc::EINVAL),
    }
}

/// `execveat(2)`: runs the file `dirfd`/`path` (with `AT_EMPTY_PATH` and an empty path, the
/// file `dirfd` itself refers to); only returns on failure.
///
/// # Safety
///
/// `argv` and `envp` must each point to a NULL-terminated array of pointers to
/// NUL-terminated strings, all of which stay valid for the duration of the call.
pub unsafe fn execveat(
    dirfd: BorrowedFd<'_>,
    path: &CStr,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> Errno {
    // SAFETY: `path` is a valid C string and `dirfd` is open for the call; the caller
    // guarantees `argv` and `envp`.
    let ret = unsafe {
        syscall!(
            libc::SYS_execveat,
            dirfd.as_raw_fd(),
            p(path),
            argv,
            envp,
            flags
        )
    };
    match ret {
        Err(e) => e,
        Ok(_) => Errno(libc::EINVAL),
    }
}

/// `exit_group(2)`: ends the calling process without running any user-space code.
pub fn exit_group(code: c_int) -> ! {
    loop {
        // SAFETY: `exit_group` takes an integer and does not return.
        let _ = unsafe { syscall!(libc::SYS_exit_group, code) };
    }
}

/// `getpid(2)`.
pub fn getpid() -> c_int {
    // SAFETY: `getpid` takes no argument and cannot fail.
    unsafe { syscall!(libc::SYS_getpid) }.map_or(0, |v| v as c_int)
}

/// `setsid(2)`: returns the new session id.
pub fn setsid() -> Result<c_int> {
    // SAFETY: `setsid` takes no argument.
    unsafe { syscall!(libc::SYS_setsid) }.map(|v| v as c_int)
}

/// `ioctl(fd, TIOCSCTTY, 0)` (`ioctl_tty(2)`): makes the terminal on `fd` the controlling
/// terminal of the calling session leader. Without stealing (the 0): `EPERM` when the
/// caller is not a session leader or the terminal already belongs to another session.
pub fn ioctl_tiocsctty(fd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: `TIOCSCTTY` takes an integer argument (0: do not steal), which the tty layer
    // does not dereference; `fd` is open for the call. Should `fd` be some other device
    // whose driver reads the number as a pointer request, the pointer is NULL, which
    // `copy_{from,to}_user` refuses with EFAULT: no memory of this process is touched.
    unsafe { syscall!(libc::SYS_ioctl, fd.as_raw_fd(), libc::TIOCSCTTY, 0usize) }.map(drop)
}

/// `pidfd_open(2)`.
pub fn pidfd_open(pid: c_int, flags: c_uint) -> Result<OwnedFd> {
    // SAFETY: `pidfd_open` takes no pointer.
    let fd = unsafe { syscall!(libc::SYS_pidfd_open, pid, flags) }?;
    // SAFETY: `pidfd_open` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
}

/// `pidfd_send_signal(2)` without `siginfo`.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: c_int) -> Result<()> {
    // SAFETY: the `siginfo` pointer is NULL; the other arguments are integers.
    unsafe {
        syscall!(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            0usize,
            0u32
        )
    }
    .map(drop)
}

/// `rt_sigprocmask(2)` with a 64-bit signal set.
pub fn rt_sigprocmask(how: c_int, set: &u64, old: Option<&mut u64>) -> Result<()> {
    let old = old.map_or(0, |o| core::ptr::from_mut(o) as usize);
    // SAFETY: the kernel reads 8 bytes from `set` and writes 8 bytes to `old` when it is
    // not NULL (an exclusive borrow); the size argument is 8.
    unsafe {
        syscall!(
            libc::SYS_rt_sigprocmask,
            how,
            core::ptr::from_ref(set),
            old,
            8usize
        )
    }
    .map(drop)
}

/// Sets the disposition of `sig` to `SIG_DFL` with `rt_sigaction(2)`.
///
/// Setting the default disposition installs no handler, so no code address is handed to
/// the kernel; that is why this wrapper, unlike a general `rt_sigaction`, is safe.
pub fn rt_sigaction_default(sig: c_int) -> Result<()> {
    let act = KernelSigaction::default();
    // SAFETY: the kernel reads one kernel `struct sigaction` from `act` (a local, see the
    // layout test) whose handler is `SIG_DFL`; the old-action pointer is NULL.
    unsafe {
        syscall!(
            libc::SYS_rt_sigaction,
            sig,
            core::ptr::from_ref(&act),
            0usize,
            8usize
        )
    }
    .map(drop)
}

/// The kernel's `struct sigaction` (not glibc's): handler, flags, restorer, mask.
#[repr(C)]
#[derive(Default, Debug)]
pub struct KernelSigaction {
    /// `sa_handler`; 0 is `SIG_DFL`.
    pub handler: usize,
    /// `sa_flags`.
    pub flags: c_ulong,
    /// `sa_restorer`.
    pub restorer: usize,
    /// `sa_mask`, one bit per signal.
    pub mask: u64,
}

/// `keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)`: a new anonymous session keyring, so keys
/// of the old session are out of reach. Returns the keyring's serial number.
pub fn keyctl_join_session_keyring_anonymous() -> Result<c_long> {
    // SAFETY: with a NULL name the kernel reads no string; the rest are unused.
    unsafe {
        syscall!(
            libc::SYS_keyctl,
            libc::KEYCTL_JOIN_SESSION_KEYRING,
            0usize,
            0usize,
            0usize,
            0usize
        )
    }
    .map(|v| v as c_long)
}

/// `sethostname(2)`.
pub fn sethostname(name: &[u8]) -> Result<()> {
    // SAFETY: the kernel reads `name.len()` bytes from `name`, a live slice.
    unsafe { syscall!(libc::SYS_sethostname, name.as_ptr(), name.len()) }.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(core::mem::size_of::<KernelSigaction>(), 32);
    }
}
