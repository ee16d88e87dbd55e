//! Linux system calls, issued directly.
//!
//! Every wrapper is named after its system call and returns `Result<_, Errno>`. None of them
//! touches the thread-local `errno`, takes a lock or allocates, so all of them are
//! async-signal-safe and usable in a `CLONE_VM` child (see the crate docs).
//!
//! This module holds the raw layer ([`syscall6`] and the helpers every wrapper shares); the
//! wrappers live in private submodules by subject and are re-exported here, so every path
//! is `stockade_sys::linux::NAME`:
//!
//! | submodule | calls |
//! | --- | --- |
//! | `io` | `read`, `write`, `close`, `close_range`, `dup3`, `fcntl` (`F_DUPFD_CLOEXEC`, `F_SETFD`, `F_GETFD`), `ppoll` |
//! | `fs` | `openat`, `openat2`, `mkdirat`, `fchmodat`, `symlinkat`, `fstat`, `chdir`, … |
//! | `mount` | `mount`, `pivot_root`, `mount_setattr`, `open_tree`, `fsopen`, `fsmount`, … |
//! | `process` | `execve`, `exit_group`, `setsid`, pidfds, signal mask, `keyctl`, … |
//! | `security` | `prctl` flags, `capset`, Landlock, seccomp |
//! | `net` | `socket`, fd passing (`sendmsg` with `SCM_RIGHTS`), interface flags |
//! | `notify` | seccomp user notification: a filter's listener and its ioctls, `process_vm_readv` |
//!
//! # Which wrappers are safe
//!
//! A safe wrapper is sound for every argument its types admit:
//!
//! - memory the kernel reads or writes is passed as a reference or slice (`&CStr`, `&[u8]`,
//!   `&mut libc::stat`), and the wrapper passes the matching length; no wrapper forwards a
//!   caller's integer that the kernel would dereference. Calls whose arguments select what
//!   the kernel dereferences (`prctl`, `keyctl`, `fcntl`, `ioctl`) are offered only for the
//!   fixed commands stockade uses, each as its own function (`prctl_set_no_new_privs`,
//!   `fcntl_setfd`, `ioctl_siocgifflags`, …), with no pointer-sized argument left open. An
//!   ioctl that passes a pointer first checks the kind of file (`ioctl_siocgifflags`
//!   requires a socket), since a request number means what the file's driver makes of it;
//! - an fd is passed as a [`BorrowedFd`](crate::BorrowedFd) (open for the call, by its
//!   type) and a new fd comes back as an [`OwnedFd`], so no safe wrapper acts on an fd its
//!   caller does not hold (I/O safety, as in std). Closing takes an [`OwnedFd`] ([`close`]);
//! - structs that hold an fd or a pointer for the kernel (`landlock_path_beneath_attr`,
//!   `sock_fprog`, `mount_attr`, `msghdr`) are built inside the wrapper from typed
//!   arguments;
//! - what a call changes in the process can make later calls fail, or end the process,
//!   but never make a later call report a success that did not happen (Landlock,
//!   capabilities, `no_new_privs`, the signal mask, mounts, default signal dispositions).
//!
//! The rest are `unsafe fn` with a `# Safety` section: [`syscall6`] itself, [`close_raw`],
//! [`close_range`] and [`dup3`] (they close or replace fds by number, which only the caller
//! can know to be its own), [`execve`] / [`execveat`] (raw pointer arrays), and
//! [`seccomp_set_mode_filter`] (a filter decides what every later call returns, success
//! included).

use core::ffi::{CStr, c_int, c_long};

use crate::fd::OwnedFd;
use crate::{Errno, Result};

pub use crate::fd::CWD;
pub use libc::{mount_attr, open_how};

/// Issues system call `nr` with six arguments and returns the raw kernel result.
///
/// # Safety
///
/// The arguments must be valid for system call `nr`: every pointer argument must point to
/// memory of the size and lifetime the call requires.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn syscall6(nr: c_long, args: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller guarantees that the arguments are valid for `nr`. The `syscall`
    // instruction clobbers rcx and r11 and returns in rax; nothing else is touched.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Issues system call `nr` with six arguments and returns the raw kernel result.
///
/// # Safety
///
/// The arguments must be valid for system call `nr`: every pointer argument must point to
/// memory of the size and lifetime the call requires.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub unsafe fn syscall6(nr: c_long, args: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller guarantees that the arguments are valid for `nr`. `svc 0` takes
    // the number in x8, arguments in x0-x5, and returns in x0.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") args[0] => ret,
            in("x1") args[1],
            in("x2") args[2],
            in("x3") args[3],
            in("x4") args[4],
            in("x5") args[5],
            options(nostack),
        );
    }
    ret
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("stockade-sys issues raw system calls on x86_64 and aarch64 only");

/// Turns a raw kernel return value into `Ok(value)` or `Err(errno)`.
#[inline(always)]
fn check(ret: isize) -> Result<usize> {
    if (-4095..0).contains(&ret) {
        Err(Errno(-ret as i32))
    } else {
        Ok(ret as usize)
    }
}

/// Places up to six arguments in the array [`syscall6`] takes; the rest are 0.
#[inline(always)]
const fn args<const N: usize>(vals: [usize; N]) -> [usize; 6] {
    let mut all = [0usize; 6];
    let mut i = 0;
    while i < N {
        all[i] = vals[i];
        i += 1;
    }
    all
}

/// Expands to `check(syscall6(nr, [args…]))`. It contains the one unsafe operation of the
/// wrapper that uses it, so every use sits in that wrapper's own `unsafe` block, under a
/// `// SAFETY:` comment that names why these arguments are valid for this call.
macro_rules! syscall {
    ($nr:expr $(, $a:expr)* $(,)?) => {
        $crate::linux::check($crate::linux::syscall6($nr, $crate::linux::args([$($a as usize),*])))
    };
}

/// Takes ownership of the fd that a successful fd-creating call returned.
///
/// # Safety
///
/// `ret` is the return value of a call that just succeeded and whose result is a new fd
/// (`openat`, `socket`, `fsopen`, …): the kernel installed it in this process's table for
/// this call, so nothing else owns its number.
#[inline(always)]
unsafe fn new_fd(ret: usize) -> OwnedFd {
    // SAFETY: the caller guarantees that `ret` is a new fd that nothing else owns, which is
    // `from_raw_fd`'s contract.
    unsafe { OwnedFd::from_raw_fd(ret as c_int) }
}

/// Converts a `&CStr` into the pointer the kernel expects.
#[inline(always)]
fn p(s: &CStr) -> usize {
    s.as_ptr() as usize
}

/// Converts an optional `&CStr` into a pointer, NULL for `None`.
#[inline(always)]
fn op(s: Option<&CStr>) -> usize {
    s.map_or(0, p)
}

mod fs;
mod io;
mod mount;
mod net;
mod notify;
mod process;
mod security;

pub use fs::*;
pub use io::*;
pub use mount::*;
pub use net::*;
pub use notify::*;
pub use process::*;
pub use security::*;
/// Helpers shared by the modules' unit tests.
#[cfg(test)]
mod test_util {
    use core::ffi::c_int;

    use crate::fd::OwnedFd;

    /// Two ends of a fresh `pipe2(O_CLOEXEC)`, owned.
    pub(super) fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0 as c_int; 2];
        // SAFETY: `fds` has room for the two fds pipe2 writes.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: pipe2 just created this fd; nothing else owns it.
        let r = unsafe { OwnedFd::from_raw_fd(fds[0]) };
        // SAFETY: as above.
        let w = unsafe { OwnedFd::from_raw_fd(fds[1]) };
        (r, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fd::BorrowedFd;

    #[test]
    fn fd_types_are_one_int() {
        assert_eq!(core::mem::size_of::<BorrowedFd<'_>>(), 4);
        assert_eq!(core::mem::size_of::<OwnedFd>(), 4);
    }

    #[test]
    fn errors_come_back_as_errno() {
        let bad = c"/nonexistent-stockade-sys-test";
        assert_eq!(chdir(bad), Err(Errno(libc::ENOENT)));
        // SAFETY: -1 is no fd, so closing it cannot affect any owner.
        assert_eq!(unsafe { close_raw(-1) }, Err(Errno(libc::EBADF)));
        assert!(getpid() > 0);
    }
}
