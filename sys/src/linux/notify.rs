//! Seccomp user notification: installing a filter with a listener, and the listener's
//! ioctls (receive a notification, answer it, check that it is still pending), with the
//! one read of the notifying process's memory a report needs (`process_vm_readv`).

use core::ffi::c_uint;

use super::new_fd;
use crate::Result;
use crate::fd::{BorrowedFd, OwnedFd};

/// A seccomp notification listener: an fd that only `seccomp(SECCOMP_SET_MODE_FILTER,
/// SECCOMP_FILTER_FLAG_NEW_LISTENER, …)` makes. The ioctls below are safe on it because
/// the type says which driver answers them: a request number means what the file's driver
/// makes of it, and on a listener the kernel reads and writes exactly the structs named.
#[derive(Debug)]
pub struct SeccompListener(OwnedFd);

impl SeccompListener {
    /// Takes `fd` as a listener.
    ///
    /// # Safety
    ///
    /// `fd` is a seccomp notification listener (it came from
    /// [`seccomp_set_mode_filter_listener`], possibly through `SCM_RIGHTS` from a process
    /// that made it): the listener's ioctls pass pointers that another driver could read
    /// or write with a different meaning.
    pub unsafe fn from_fd(fd: OwnedFd) -> Self {
        SeccompListener(fd)
    }

    /// The listener's fd, for `poll` and for sending it to another process.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// The fd, given up.
    pub fn into_fd(self) -> OwnedFd {
        self.0
    }
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER | flags, prog)`: as
/// [`seccomp_set_mode_filter`](super::seccomp_set_mode_filter), and the new filter's
/// listener, which the caller then owns (close-on-exec, as the kernel makes it).
///
/// # Safety
///
/// As for [`seccomp_set_mode_filter`](super::seccomp_set_mode_filter). Besides, every call
/// the filter answers with `SECCOMP_RET_USER_NOTIF` waits until a holder of the listener
/// answers it (or the last copy of the listener is closed, which fails the call with
/// `ENOSYS`): the caller makes no such call itself before the listener reaches whoever
/// answers, and that answerer's results must be as sound as those of the filter.
pub unsafe fn seccomp_set_mode_filter_listener(
    flags: c_uint,
    filter: &[libc::sock_filter],
) -> Result<SeccompListener> {
    let flags = flags | libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as c_uint;
    // SAFETY: the caller's guarantee, passed on (see `# Safety`).
    let fd = unsafe { super::seccomp_set_mode_filter(flags, filter) }?;
    // SAFETY: with `SECCOMP_FILTER_FLAG_NEW_LISTENER` a successful call returns the new
    // listener's fd, installed in this process's table for the caller alone.
    let fd = unsafe { new_fd(fd as usize) };
    Ok(SeccompListener(fd))
}

/// `seccomp(SECCOMP_GET_NOTIF_SIZES)`: the sizes of `struct seccomp_notif`,
/// `struct seccomp_notif_resp` and `struct seccomp_data` of the running kernel.
pub fn seccomp_notif_sizes() -> Result<libc::seccomp_notif_sizes> {
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: the kernel writes one `struct seccomp_notif_sizes` to `sizes`, a live local
    // of that type; the call has no other effect.
    unsafe {
        syscall!(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            core::ptr::from_mut(&mut sizes)
        )
    }?;
    Ok(sizes)
}

/// `ioctl(SECCOMP_IOCTL_NOTIF_RECV)`: waits for the next notification and returns it.
/// `ENOENT`: the process that notified ended before it was read (ask again).
pub fn seccomp_notif_recv(listener: &SeccompListener) -> Result<libc::seccomp_notif> {
    // The kernel refuses a buffer that is not all zero (`EINVAL`).
    let mut notif = libc::seccomp_notif {
        id: 0,
        pid: 0,
        flags: 0,
        data: libc::seccomp_data {
            nr: 0,
            arch: 0,
            instruction_pointer: 0,
            args: [0; 6],
        },
    };
    // SAFETY: `listener` is a seccomp listener (by its type), whose RECV ioctl writes one
    // `struct seccomp_notif` (the size the request number encodes) to `notif`, a live
    // local of that type.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            listener.as_fd().as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            core::ptr::from_mut(&mut notif)
        )
    }?;
    Ok(notif)
}

/// `ioctl(SECCOMP_IOCTL_NOTIF_SEND)`: answers notification `resp.id`. With `resp.flags`
/// 0 the call returns `resp.val` or fails with `-resp.error`; with
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (and `val` and `error` 0) the kernel runs it.
/// `ENOENT`: that notification is no longer pending (its process ended, or a signal
/// interrupted the call).
pub fn seccomp_notif_send(
    listener: &SeccompListener,
    resp: &libc::seccomp_notif_resp,
) -> Result<()> {
    // SAFETY: `listener` is a seccomp listener (by its type), whose SEND ioctl reads one
    // `struct seccomp_notif_resp` from `resp`, a live shared borrow of that type.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            listener.as_fd().as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            core::ptr::from_ref(resp)
        )
    }
    .map(drop)
}

/// `ioctl(SECCOMP_IOCTL_NOTIF_ID_VALID)`: whether notification `id` is still pending, so
/// that what was read from its process's memory since it was received is that process's
/// (its pid was not reused). `ENOENT` when it is not.
pub fn seccomp_notif_id_valid(listener: &SeccompListener, id: u64) -> Result<()> {
    // SAFETY: `listener` is a seccomp listener (by its type), whose ID_VALID ioctl reads
    // one `u64` from `id`, a live local.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            listener.as_fd().as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            core::ptr::from_ref(&id)
        )
    }
    .map(drop)
}

/// `process_vm_readv(2)` of one range: copies up to `buf.len()` bytes at `addr` in process
/// `pid`'s memory to `buf`, and returns how many were copied (fewer at an unmapped page).
/// The kernel checks a ptrace read access to `pid` (`EPERM` without one); nothing of the
/// other process is changed.
pub fn process_vm_readv(pid: libc::pid_t, addr: u64, buf: &mut [u8]) -> Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the kernel writes at most `buf.len()` bytes to `buf` (a live exclusive
    // borrow) through `local`, and reads `local` and `remote` (live locals, one entry
    // each). `remote` points into the other process, never into this one.
    unsafe {
        syscall!(
            libc::SYS_process_vm_readv,
            pid,
            core::ptr::from_ref(&local),
            1,
            core::ptr::from_ref(&remote),
            1,
            0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Errno;

    /// The structs this module passes match the running kernel's.
    #[test]
    fn notification_structs_match_the_kernel() {
        let sizes = seccomp_notif_sizes().expect("SECCOMP_GET_NOTIF_SIZES");
        assert_eq!(
            usize::from(sizes.seccomp_notif),
            core::mem::size_of::<libc::seccomp_notif>()
        );
        assert_eq!(
            usize::from(sizes.seccomp_notif_resp),
            core::mem::size_of::<libc::seccomp_notif_resp>()
        );
        assert_eq!(
            usize::from(sizes.seccomp_data),
            core::mem::size_of::<libc::seccomp_data>()
        );
    }

    #[test]
    fn process_vm_readv_reads_own_memory() {
        let src = *b"stockade";
        let mut dst = [0u8; 8];
        let pid = super::super::getpid();
        let n = process_vm_readv(pid, src.as_ptr() as u64, &mut dst).unwrap();
        assert_eq!((n, dst), (8, src));
        // An unmapped address: EFAULT, nothing written.
        let mut none = [0u8; 4];
        assert_eq!(
            process_vm_readv(pid, 8, &mut none),
            Err(Errno(libc::EFAULT))
        );
    }
}
