//! The system calls the init makes, issued directly.
//!
//! The init image is built by a bare `rustc` call with nothing but `core` (no `libc` crate,
//! no C library), so this module carries its own syscall numbers and constants, and its
//! unit tests check each one against the `libc` crate on the machine that runs them.
//! Every wrapper returns the kernel's `-errno` as `Err`; none keeps state, so any of them
//! may be called in a forked child.

use core::ffi::CStr;

/// An errno value.
pub type Errno = i32;
/// A raw result: the non-negative return value, or the errno.
pub type Result<T> = core::result::Result<T, Errno>;

/// System call numbers.
#[cfg(target_arch = "x86_64")]
pub mod nr {
    #![allow(missing_docs)]
    pub const READ: usize = 0;
    pub const WRITE: usize = 1;
    pub const CLOSE: usize = 3;
    pub const RT_SIGPROCMASK: usize = 14;
    pub const IOCTL: usize = 16;
    pub const GETPID: usize = 39;
    pub const CLONE: usize = 56;
    pub const EXECVE: usize = 59;
    pub const WAIT4: usize = 61;
    pub const KILL: usize = 62;
    pub const FCNTL: usize = 72;
    pub const GETPPID: usize = 110;
    pub const SETSID: usize = 112;
    pub const PRCTL: usize = 157;
    pub const EXIT_GROUP: usize = 231;
    pub const OPENAT: usize = 257;
    pub const SIGNALFD4: usize = 289;
    pub const CLOSE_RANGE: usize = 436;
    pub const LANDLOCK_CREATE_RULESET: usize = 444;
    pub const LANDLOCK_RESTRICT_SELF: usize = 446;
}

/// System call numbers (the generic table).
#[cfg(target_arch = "aarch64")]
pub mod nr {
    #![allow(missing_docs)]
    pub const FCNTL: usize = 25;
    pub const IOCTL: usize = 29;
    pub const OPENAT: usize = 56;
    pub const CLOSE: usize = 57;
    pub const READ: usize = 63;
    pub const WRITE: usize = 64;
    pub const SIGNALFD4: usize = 74;
    pub const EXIT_GROUP: usize = 94;
    pub const KILL: usize = 129;
    pub const RT_SIGPROCMASK: usize = 135;
    pub const SETSID: usize = 157;
    pub const PRCTL: usize = 167;
    pub const GETPID: usize = 172;
    pub const GETPPID: usize = 173;
    pub const CLONE: usize = 220;
    pub const EXECVE: usize = 221;
    pub const WAIT4: usize = 260;
    pub const CLOSE_RANGE: usize = 436;
    pub const LANDLOCK_CREATE_RULESET: usize = 444;
    pub const LANDLOCK_RESTRICT_SELF: usize = 446;
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the stockade init issues raw system calls on x86_64 and aarch64 only");

/// Constants of the generic Linux ABI (the same on x86_64 and aarch64).
pub mod c {
    #![allow(missing_docs)]
    pub const ENOENT: i32 = 2;
    pub const EINTR: i32 = 4;
    pub const EPERM: i32 = 1;
    pub const EACCES: i32 = 13;
    pub const ENOTDIR: i32 = 20;
    pub const ENOEXEC: i32 = 8;
    pub const ECHILD: i32 = 10;
    pub const ESTALE: i32 = 116;
    pub const EINVAL: i32 = 22;
    pub const SIG_SETMASK: usize = 2;
    pub const SFD_CLOEXEC: usize = 0o2000000;
    pub const O_RDONLY: usize = 0;
    pub const O_CLOEXEC: usize = 0o2000000;
    pub const AT_FDCWD: isize = -100;
    pub const F_SETFD: usize = 2;
    pub const FD_CLOEXEC: usize = 1;
    pub const WNOHANG: usize = 1;
    pub const WALL: usize = 0x4000_0000;
    pub const PR_SET_PDEATHSIG: usize = 1;
    pub const PR_SET_DUMPABLE: usize = 4;
    pub const PR_SET_NAME: usize = 15;
    pub const PR_SET_CHILD_SUBREAPER: usize = 36;
    pub const TIOCSCTTY: usize = 0x540E;
    /// `LANDLOCK_SCOPE_SIGNAL` (`include/uapi/linux/landlock.h`, ABI 6).
    pub const LANDLOCK_SCOPE_SIGNAL: u64 = 1 << 1;
    /// `sizeof(struct signalfd_siginfo)`.
    pub const SIGINFO_SIZE: usize = 128;
}

/// Issues system call `nr` and returns the raw kernel result.
///
/// # Safety
///
/// The arguments must be valid for system call `nr`: every pointer must point to memory of
/// the size and lifetime the call requires.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn syscall(nr: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller guarantees that the arguments are valid for `nr`. `syscall`
    // clobbers rcx and r11 and returns in rax; nothing else changes.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Issues system call `nr` and returns the raw kernel result.
///
/// # Safety
///
/// The arguments must be valid for system call `nr`: every pointer must point to memory of
/// the size and lifetime the call requires.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn syscall(nr: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller guarantees that the arguments are valid for `nr`. `svc 0` takes
    // the number in x8 and the arguments in x0-x5, and returns in x0.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") a[0] => ret,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

fn check(ret: isize) -> Result<usize> {
    if (-4095..0).contains(&ret) {
        Err(-ret as i32)
    } else {
        Ok(ret as usize)
    }
}

/// A system call whose arguments are plain integers or pointers the wrapper derived from
/// references that outlive the call.
macro_rules! sys {
    ($nr:expr $(, $a:expr)* $(,)?) => {{
        let mut args = [0usize; 6];
        for (slot, v) in args.iter_mut().zip([$($a as usize),*]) {
            *slot = v;
        }
        // SAFETY: every call site passes integers, or pointers taken from references and
        // `&CStr`s that live until the call returns; the kernel reads or writes only within
        // the lengths passed with them.
        check(unsafe { syscall($nr, args) })
    }};
}

/// `read(2)`.
pub fn read(fd: i32, buf: &mut [u8]) -> Result<usize> {
    sys!(nr::READ, fd, buf.as_mut_ptr(), buf.len())
}

/// `write(2)`.
pub fn write(fd: i32, buf: &[u8]) -> Result<usize> {
    sys!(nr::WRITE, fd, buf.as_ptr(), buf.len())
}

/// `close(2)`.
pub fn close(fd: i32) -> Result<()> {
    sys!(nr::CLOSE, fd).map(drop)
}

/// `close_range(2)` of `first..=last`.
pub fn close_range(first: u32, last: u32) -> Result<()> {
    sys!(nr::CLOSE_RANGE, first, last, 0usize).map(drop)
}

/// `fcntl(fd, F_SETFD, flags)`.
pub fn set_fd_flags(fd: i32, flags: usize) -> Result<()> {
    sys!(nr::FCNTL, fd, c::F_SETFD, flags).map(drop)
}

/// `openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC)`.
pub fn open_read(path: &CStr) -> Result<i32> {
    sys!(
        nr::OPENAT,
        c::AT_FDCWD,
        path.as_ptr(),
        c::O_RDONLY | c::O_CLOEXEC,
        0usize
    )
    .map(|fd| fd as i32)
}

/// `prctl(2)` with integer arguments.
pub fn prctl(option: usize, arg: usize) -> Result<usize> {
    sys!(nr::PRCTL, option, arg, 0usize, 0usize, 0usize)
}

/// `prctl(PR_SET_NAME, name)`.
pub fn set_name(name: &CStr) -> Result<()> {
    sys!(
        nr::PRCTL,
        c::PR_SET_NAME,
        name.as_ptr(),
        0usize,
        0usize,
        0usize
    )
    .map(drop)
}

/// `rt_sigprocmask(SIG_SETMASK, set, NULL)` with a 64-bit set.
pub fn set_sigmask(set: u64) -> Result<()> {
    sys!(
        nr::RT_SIGPROCMASK,
        c::SIG_SETMASK,
        core::ptr::from_ref(&set),
        0usize,
        8usize
    )
    .map(drop)
}

/// `signalfd4(-1, set, SFD_CLOEXEC)`: a new signalfd for the (blocked) signals in `set`.
pub fn signalfd(set: u64) -> Result<i32> {
    sys!(
        nr::SIGNALFD4,
        -1isize,
        core::ptr::from_ref(&set),
        8usize,
        c::SFD_CLOEXEC
    )
    .map(|fd| fd as i32)
}

/// `fork()`, as `clone(SIGCHLD)` without a new stack: 0 in the child, the child's pid in
/// the parent. The child gets a copy of this process's memory, as with `fork(3)`.
pub fn fork() -> Result<i32> {
    sys!(
        nr::CLONE,
        crate::protocol::SIGCHLD,
        0usize,
        0usize,
        0usize,
        0usize
    )
    .map(|p| p as i32)
}

/// `execve(2)` of `path` with argv and envp arrays; returns only on failure.
///
/// # Safety
///
/// `argv` and `envp` must each point to a NULL-terminated array of pointers to
/// NUL-terminated strings that stay valid for the duration of the call.
pub unsafe fn execve(path: *const u8, argv: *const *const u8, envp: *const *const u8) -> Errno {
    // SAFETY: the caller guarantees all three pointers; the kernel only reads them.
    let ret = unsafe {
        syscall(
            nr::EXECVE,
            [path as usize, argv as usize, envp as usize, 0, 0, 0],
        )
    };
    match check(ret) {
        Err(e) => e,
        Ok(_) => c::EINVAL,
    }
}

/// `wait4(pid, &status, options, NULL)`: the pid and its raw wait status; pid 0 with
/// `WNOHANG` when no child has changed state.
pub fn wait4(pid: i32, options: usize) -> Result<(i32, i32)> {
    let mut status: i32 = 0;
    let r = sys!(
        nr::WAIT4,
        pid as isize,
        core::ptr::from_mut(&mut status),
        options,
        0usize
    )?;
    Ok((r as i32, status))
}

/// `kill(2)`.
pub fn kill(pid: i32, sig: i32) -> Result<()> {
    sys!(nr::KILL, pid as isize, sig as isize).map(drop)
}

/// `setsid(2)`.
pub fn setsid() -> Result<()> {
    sys!(nr::SETSID).map(drop)
}

/// `ioctl(fd, TIOCSCTTY, 0)`: the terminal on `fd` becomes the controlling terminal of
/// the calling session leader (without stealing it from another session).
pub fn ioctl_tiocsctty(fd: i32) -> Result<()> {
    sys!(nr::IOCTL, fd as isize, c::TIOCSCTTY, 0usize).map(drop)
}

/// `getpid(2)`.
pub fn getpid() -> i32 {
    sys!(nr::GETPID).map_or(0, |p| p as i32)
}

/// `getppid(2)`.
pub fn getppid() -> i32 {
    sys!(nr::GETPPID).map_or(0, |p| p as i32)
}

/// `struct landlock_ruleset_attr` (ABI 6 layout).
#[repr(C)]
#[derive(Debug, Default)]
pub struct LandlockRulesetAttr {
    /// `handled_access_fs`.
    pub handled_access_fs: u64,
    /// `handled_access_net`.
    pub handled_access_net: u64,
    /// `scoped`.
    pub scoped: u64,
}

/// `landlock_create_ruleset(attr, sizeof attr, 0)`.
pub fn landlock_create_ruleset(attr: &LandlockRulesetAttr) -> Result<i32> {
    sys!(
        nr::LANDLOCK_CREATE_RULESET,
        core::ptr::from_ref(attr),
        core::mem::size_of::<LandlockRulesetAttr>(),
        0usize
    )
    .map(|fd| fd as i32)
}

/// `landlock_restrict_self(fd, 0)`.
pub fn landlock_restrict_self(fd: i32) -> Result<()> {
    sys!(nr::LANDLOCK_RESTRICT_SELF, fd, 0usize).map(drop)
}

/// `exit_group(2)`.
pub fn exit_group(code: i32) -> ! {
    loop {
        let _ = sys!(nr::EXIT_GROUP, code as isize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_match_the_kernel() {
        let pairs: [(usize, libc::c_long); 20] = [
            (nr::READ, libc::SYS_read),
            (nr::IOCTL, libc::SYS_ioctl),
            (nr::WRITE, libc::SYS_write),
            (nr::CLOSE, libc::SYS_close),
            (nr::RT_SIGPROCMASK, libc::SYS_rt_sigprocmask),
            (nr::GETPID, libc::SYS_getpid),
            (nr::CLONE, libc::SYS_clone),
            (nr::EXECVE, libc::SYS_execve),
            (nr::WAIT4, libc::SYS_wait4),
            (nr::KILL, libc::SYS_kill),
            (nr::FCNTL, libc::SYS_fcntl),
            (nr::GETPPID, libc::SYS_getppid),
            (nr::SETSID, libc::SYS_setsid),
            (nr::PRCTL, libc::SYS_prctl),
            (nr::EXIT_GROUP, libc::SYS_exit_group),
            (nr::OPENAT, libc::SYS_openat),
            (nr::SIGNALFD4, libc::SYS_signalfd4),
            (nr::CLOSE_RANGE, libc::SYS_close_range),
            (
                nr::LANDLOCK_CREATE_RULESET,
                libc::SYS_landlock_create_ruleset,
            ),
            (nr::LANDLOCK_RESTRICT_SELF, libc::SYS_landlock_restrict_self),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours as libc::c_long, theirs);
        }
    }

    #[test]
    fn constants_match_the_kernel() {
        assert_eq!(c::ENOENT, libc::ENOENT);
        assert_eq!(c::EINTR, libc::EINTR);
        assert_eq!(c::EPERM, libc::EPERM);
        assert_eq!(c::EACCES, libc::EACCES);
        assert_eq!(c::ENOTDIR, libc::ENOTDIR);
        assert_eq!(c::ENOEXEC, libc::ENOEXEC);
        assert_eq!(c::ECHILD, libc::ECHILD);
        assert_eq!(c::ESTALE, libc::ESTALE);
        assert_eq!(c::EINVAL, libc::EINVAL);
        assert_eq!(c::SIG_SETMASK as i32, libc::SIG_SETMASK);
        assert_eq!(c::SFD_CLOEXEC as i32, libc::SFD_CLOEXEC);
        assert_eq!(c::O_RDONLY as i32, libc::O_RDONLY);
        assert_eq!(c::O_CLOEXEC as i32, libc::O_CLOEXEC);
        assert_eq!(c::AT_FDCWD as i32, libc::AT_FDCWD);
        assert_eq!(c::F_SETFD as i32, libc::F_SETFD);
        assert_eq!(c::FD_CLOEXEC as i32, libc::FD_CLOEXEC);
        assert_eq!(c::WNOHANG as i32, libc::WNOHANG);
        assert_eq!(c::WALL as i32, libc::__WALL);
        assert_eq!(c::PR_SET_PDEATHSIG as i32, libc::PR_SET_PDEATHSIG);
        assert_eq!(c::PR_SET_DUMPABLE as i32, libc::PR_SET_DUMPABLE);
        assert_eq!(c::PR_SET_NAME as i32, libc::PR_SET_NAME);
        assert_eq!(
            c::PR_SET_CHILD_SUBREAPER as i32,
            libc::PR_SET_CHILD_SUBREAPER
        );
        assert_eq!(c::TIOCSCTTY as libc::Ioctl, libc::TIOCSCTTY);
        assert_eq!(
            c::SIGINFO_SIZE,
            core::mem::size_of::<libc::signalfd_siginfo>()
        );
        assert_eq!(core::mem::size_of::<LandlockRulesetAttr>(), 24);
    }

    #[test]
    fn calls_reach_the_kernel() {
        assert!(getpid() > 0);
        assert_eq!(close(-1), Err(libc::EBADF));
        assert_eq!(open_read(c"/nonexistent-stockade-init"), Err(libc::ENOENT));
        assert!(matches!(
            wait4(-1, c::WNOHANG),
            Ok((0, _)) | Err(libc::ECHILD)
        ));
    }
}
