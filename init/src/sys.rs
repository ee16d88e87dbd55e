//! The system calls the init makes, issued directly.
//!
//! # Why the init does not use `stockade-sys`
//!
//! The library's wrappers live in the `stockade-sys` crate, which is `no_std` too, and the
//! init would gladly share them. It cannot link that crate: its image is compiled by one
//! bare `rustc` call in `build.rs` (see there), which has `core` and nothing else. A build
//! script is given neither the source nor the compiled library of any dependency (cargo
//! has not necessarily built them when the script runs, and their file names carry hashes),
//! and `stockade-sys` needs the `libc` crate from the registry for its numbers and structs;
//! `libc` in turn needs its own build script's settings. Getting them would take a second
//! `cargo` (`cargo metadata`, a nested build) or a guess at the registry's layout on disk,
//! both of which the plain `cargo build` route excludes. Including `stockade-sys`'s files
//! by `#[path]` would still need `libc`, and would put files outside this package into its
//! build, which `cargo package` does not ship.
//!
//! So the init keeps this one small set, written to the same rules as `stockade-sys`:
//! syscall numbers and constants of its own, each checked against `libc` by the unit tests
//! below; fds as [`OwnedFd`] and [`BorrowedFd`] (I/O safety), so that no safe wrapper acts
//! on a raw fd number; an `unsafe fn` with a `# Safety` section wherever the caller must
//! vouch for something ([`close_range`], [`fork`], [`execve`]); one `unsafe` block per
//! call with its own `// SAFETY:` comment. Every wrapper returns the kernel's `-errno` as
//! `Err`; none keeps state, allocates or touches `errno`, so any of them may be called in
//! a forked child.

use core::ffi::CStr;
use core::marker::PhantomData;

/// An errno value.
pub type Errno = i32;
/// A raw result: the non-negative return value, or the errno.
pub type Result<T> = core::result::Result<T, Errno>;

/// An fd borrowed for `'fd`: it stays open at least that long (std's `BorrowedFd`, for
/// `core`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BorrowedFd<'fd> {
    fd: i32,
    _borrow: PhantomData<&'fd OwnedFd>,
}

impl BorrowedFd<'_> {
    /// Borrows `fd`.
    ///
    /// # Safety
    ///
    /// `fd` is open, and stays open (not closed, not replaced) for all of `'fd`.
    pub const unsafe fn borrow_raw(fd: i32) -> Self {
        Self {
            fd,
            _borrow: PhantomData,
        }
    }

    /// The fd number; the caller must not close it.
    pub const fn raw(self) -> i32 {
        self.fd
    }
}

/// An open fd that this value alone owns; closed when dropped (std's `OwnedFd`, for
/// `core`).
#[derive(Debug, PartialEq, Eq)]
pub struct OwnedFd {
    fd: i32,
}

impl OwnedFd {
    /// Takes ownership of `fd`.
    ///
    /// # Safety
    ///
    /// `fd` is open and nothing else in the process owns it or uses its number once this
    /// value is dropped.
    pub const unsafe fn from_raw(fd: i32) -> Self {
        Self { fd }
    }

    /// Borrows the fd for as long as `self` lives.
    pub const fn as_fd(&self) -> BorrowedFd<'_> {
        BorrowedFd {
            fd: self.fd,
            _borrow: PhantomData,
        }
    }
}

/// System call numbers.
#[cfg(target_arch = "x86_64")]
pub mod nr {
    #![allow(missing_docs)]
    pub const READ: usize = 0;
    pub const WRITE: usize = 1;
    pub const CLOSE: usize = 3;
    pub const RT_SIGPROCMASK: usize = 14;
    pub const RT_SIGTIMEDWAIT: usize = 128;
    pub const WAIT4: usize = 61;
    pub const KILL: usize = 62;
    pub const FCNTL: usize = 72;
    pub const EXECVE: usize = 59;
    pub const GETPPID: usize = 110;
    pub const PRCTL: usize = 157;
    pub const EXIT_GROUP: usize = 231;
    pub const OPENAT: usize = 257;
    pub const SIGNALFD4: usize = 289;
    pub const CLOSE_RANGE: usize = 436;
    pub const CLONE: usize = 56;
    pub const DUP3: usize = 292;
    pub const CHDIR: usize = 80;
    pub const SETSID: usize = 112;
    pub const SENDMSG: usize = 46;
    pub const RECVMSG: usize = 47;
    pub const PIDFD_OPEN: usize = 434;
    pub const LANDLOCK_CREATE_RULESET: usize = 444;
    pub const LANDLOCK_RESTRICT_SELF: usize = 446;
    pub const GETPID: usize = 39;
    pub const PIPE2: usize = 293;
    pub const PPOLL: usize = 271;
    pub const PTRACE: usize = 101;
    pub const IOCTL: usize = 16;
    pub const LANDLOCK_ADD_RULE: usize = 445;
}

/// System call numbers (the generic table).
#[cfg(target_arch = "aarch64")]
pub mod nr {
    #![allow(missing_docs)]
    pub const FCNTL: usize = 25;
    pub const OPENAT: usize = 56;
    pub const CLOSE: usize = 57;
    pub const READ: usize = 63;
    pub const WRITE: usize = 64;
    pub const SIGNALFD4: usize = 74;
    pub const EXIT_GROUP: usize = 94;
    pub const EXECVE: usize = 221;
    pub const KILL: usize = 129;
    pub const RT_SIGPROCMASK: usize = 135;
    pub const RT_SIGTIMEDWAIT: usize = 137;
    pub const PRCTL: usize = 167;
    pub const GETPPID: usize = 173;
    pub const WAIT4: usize = 260;
    pub const CLOSE_RANGE: usize = 436;
    pub const CLONE: usize = 220;
    pub const DUP3: usize = 24;
    pub const CHDIR: usize = 49;
    pub const SETSID: usize = 157;
    pub const SENDMSG: usize = 211;
    pub const RECVMSG: usize = 212;
    pub const PIDFD_OPEN: usize = 434;
    pub const LANDLOCK_CREATE_RULESET: usize = 444;
    pub const LANDLOCK_RESTRICT_SELF: usize = 446;
    pub const GETPID: usize = 172;
    pub const PIPE2: usize = 59;
    pub const PPOLL: usize = 73;
    pub const PTRACE: usize = 117;
    pub const IOCTL: usize = 29;
    pub const LANDLOCK_ADD_RULE: usize = 445;
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the stockade init issues raw system calls on x86_64 and aarch64 only");

/// Constants of the generic Linux ABI (the same on x86_64 and aarch64).
pub mod c {
    #![allow(missing_docs)]
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EINTR: i32 = 4;
    pub const ENOEXEC: i32 = 8;
    pub const ECHILD: i32 = 10;
    pub const EACCES: i32 = 13;
    pub const ENOTDIR: i32 = 20;
    pub const ESTALE: i32 = 116;
    pub const SIG_SETMASK: usize = 2;
    pub const SFD_CLOEXEC: usize = 0o2000000;
    pub const O_RDONLY: usize = 0;
    pub const O_CLOEXEC: usize = 0o2000000;
    pub const CLOSE_RANGE_CLOEXEC: usize = 1 << 2;
    pub const O_NONBLOCK: usize = 0o4000;
    pub const POLLIN: i16 = 1;
    pub const AT_FDCWD: isize = -100;
    pub const F_SETFD: usize = 2;
    pub const FD_CLOEXEC: usize = 1;
    pub const WNOHANG: usize = 1;
    pub const WALL: usize = 0x4000_0000;
    pub const PR_SET_PDEATHSIG: usize = 1;
    pub const PR_SET_DUMPABLE: usize = 4;
    pub const PR_SET_NAME: usize = 15;
    pub const PR_SET_CHILD_SUBREAPER: usize = 36;
    /// `sizeof(struct signalfd_siginfo)`.
    pub const SIGINFO_SIZE: usize = 128;
    pub const EINVAL: i32 = 22;
    pub const E2BIG: i32 = 7;
    pub const ESRCH: i32 = 3;
    pub const SIGCHLD: usize = 17;
    pub const SIGTRAP: i32 = 5;
    pub const PTRACE_DETACH: usize = 17;
    pub const SOL_SOCKET: i32 = 1;
    pub const SCM_RIGHTS: i32 = 1;
    pub const MSG_TRUNC: i32 = 0x20;
    pub const MSG_CTRUNC: i32 = 0x8;
    pub const MSG_CMSG_CLOEXEC: usize = 0x4000_0000;
    pub const MSG_NOSIGNAL: usize = 0x4000;
    /// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET`.
    pub const LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1;
    /// `LANDLOCK_SCOPE_SIGNAL`.
    pub const LANDLOCK_SCOPE_SIGNAL: u64 = 2;
    /// `LANDLOCK_ACCESS_FS_MAKE_BLOCK`.
    pub const LANDLOCK_ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;
    /// `LANDLOCK_ACCESS_FS_REFER` (ABI 2).
    pub const LANDLOCK_ACCESS_FS_REFER: u64 = 1 << 13;
    /// `LANDLOCK_RULE_PATH_BENEATH`.
    pub const LANDLOCK_RULE_PATH_BENEATH: usize = 1;
    pub const O_PATH: usize = 0o10000000;
    pub const TIOCSCTTY: usize = 0x540E;
}

/// `struct msghdr` (64-bit).
#[repr(C)]
pub struct MsgHdr {
    pub name: *mut u8,
    pub namelen: u32,
    pub iov: *mut IoVec,
    pub iovlen: usize,
    pub control: *mut u8,
    pub controllen: usize,
    pub flags: i32,
}

/// `struct iovec`.
#[repr(C)]
pub struct IoVec {
    pub base: *mut u8,
    pub len: usize,
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

/// Turns a raw kernel return value into `Ok(value)` or `Err(errno)`.
fn check(ret: isize) -> Result<usize> {
    if (-4095..0).contains(&ret) {
        Err(-ret as i32)
    } else {
        Ok(ret as usize)
    }
}

/// Places up to six arguments in the array [`syscall`] takes; the rest are 0.
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

/// Expands to `check(syscall(nr, [args…]))`: the one unsafe operation of the wrapper that
/// uses it, inside that wrapper's own `unsafe` block under a `// SAFETY:` comment that
/// names why these arguments are valid for this call.
macro_rules! syscall {
    ($nr:expr $(, $a:expr)* $(,)?) => {
        check(syscall($nr, args([$($a as usize),*])))
    };
}

impl Drop for OwnedFd {
    fn drop(&mut self) {
        // SAFETY: `close` takes no pointer; `self` owns the fd and is going away, so no one
        // uses the number afterwards. An error (EINTR, EIO) is lost, as with std.
        let _ = unsafe { syscall!(nr::CLOSE, self.fd) };
    }
}

/// Takes ownership of the fd that a successful fd-creating call returned.
///
/// # Safety
///
/// `ret` is the return value of a call that just succeeded and whose result is a new fd:
/// the kernel installed it for this call, so nothing else owns its number.
unsafe fn new_fd(ret: usize) -> OwnedFd {
    // SAFETY: the caller guarantees that `ret` is a new fd that nothing else owns.
    unsafe { OwnedFd::from_raw(ret as i32) }
}

/// `read(2)`.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, an exclusive borrow;
    // any bytes are valid `u8`s.
    unsafe { syscall!(nr::READ, fd.raw(), buf.as_mut_ptr(), buf.len()) }
}

/// `write(2)`.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize> {
    // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`, a live shared slice.
    unsafe { syscall!(nr::WRITE, fd.raw(), buf.as_ptr(), buf.len()) }
}

/// `close(2)`, reporting the kernel's answer that dropping the [`OwnedFd`] would discard.
pub fn close(fd: OwnedFd) -> Result<()> {
    let raw = fd.fd;
    core::mem::forget(fd);
    // SAFETY: `close` takes no pointer; `fd` owned `raw` and was given up above, so this
    // call is the one close of it.
    unsafe { syscall!(nr::CLOSE, raw) }.map(drop)
}

/// `close_range(2)` of `first..=last`.
///
/// # Safety
///
/// No fd in the range is owned by anything in the process that will use it again (an
/// [`OwnedFd`] in the range would later act on a closed, perhaps reused, number).
pub unsafe fn close_range(first: u32, last: u32) -> Result<()> {
    // SAFETY: `close_range` takes no pointer; the caller guarantees that no fd in the range
    // is used by anyone after this.
    unsafe { syscall!(nr::CLOSE_RANGE, first, last, 0usize) }.map(drop)
}

/// `close_range(first, ~0, CLOSE_RANGE_CLOEXEC)`: every fd from `first` on closes at the
/// next `execve` (none now, so no owner of one is affected before that).
pub fn close_range_at_exec(first: u32) -> Result<()> {
    // SAFETY: `close_range` takes no pointer; with `CLOSE_RANGE_CLOEXEC` it only sets the
    // close-on-exec flag of the fds in the range.
    unsafe { syscall!(nr::CLOSE_RANGE, first, u32::MAX, c::CLOSE_RANGE_CLOEXEC) }.map(drop)
}

/// `fcntl(fd, F_SETFD, flags)`.
pub fn fcntl_setfd(fd: BorrowedFd<'_>, flags: usize) -> Result<()> {
    // SAFETY: with `F_SETFD` the third argument is an integer, never a pointer.
    unsafe { syscall!(nr::FCNTL, fd.raw(), c::F_SETFD, flags) }.map(drop)
}

/// `openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC)`.
pub fn open_read(path: &CStr) -> Result<OwnedFd> {
    let flags = c::O_RDONLY | c::O_CLOEXEC;
    // SAFETY: the kernel reads `path` up to its NUL; it outlives the call.
    let fd = unsafe { syscall!(nr::OPENAT, c::AT_FDCWD, path.as_ptr(), flags, 0usize) }?;
    // SAFETY: `openat` succeeded, so `fd` is the new fd it installed; no one else has it.
    Ok(unsafe { new_fd(fd) })
}

/// `openat(AT_FDCWD, path, O_PATH | O_CLOEXEC)`.
pub fn open_path(path: &CStr) -> Result<OwnedFd> {
    let flags = c::O_PATH | c::O_CLOEXEC;
    // SAFETY: the kernel reads `path` up to its NUL; it outlives the call.
    let fd = unsafe { syscall!(nr::OPENAT, c::AT_FDCWD, path.as_ptr(), flags, 0usize) }?;
    // SAFETY: `openat` succeeded, so `fd` is the new fd it installed; no one else has it.
    Ok(unsafe { new_fd(fd) })
}

/// `ioctl(fd, TIOCSCTTY, 0)`: the terminal of `fd` becomes the caller's controlling
/// terminal (the caller leads a session without one).
pub fn ioctl_tiocsctty(fd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: `TIOCSCTTY` takes an integer (0: do not steal), not a pointer.
    unsafe { syscall!(nr::IOCTL, fd.raw(), c::TIOCSCTTY, 0usize) }.map(drop)
}

/// `prctl(PR_SET_NAME, name)`: the thread's name (`comm`, 15 bytes at most).
pub fn prctl_set_name(name: &CStr) -> Result<()> {
    // SAFETY: the kernel reads `name` up to its NUL, and never more than 15 bytes; `name`
    // outlives the call.
    unsafe {
        syscall!(
            nr::PRCTL,
            c::PR_SET_NAME,
            name.as_ptr(),
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_SET_DUMPABLE, on)`.
pub fn prctl_set_dumpable(on: bool) -> Result<()> {
    let on = usize::from(on);
    // SAFETY: `PR_SET_DUMPABLE` takes 0 or 1 as an integer.
    unsafe { syscall!(nr::PRCTL, c::PR_SET_DUMPABLE, on, 0usize, 0usize, 0usize) }.map(drop)
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: `sig` when the parent thread ends (0 disarms it).
pub fn prctl_set_pdeathsig(sig: i32) -> Result<()> {
    // SAFETY: `PR_SET_PDEATHSIG` takes the signal number as an integer, not a pointer.
    unsafe { syscall!(nr::PRCTL, c::PR_SET_PDEATHSIG, sig, 0usize, 0usize, 0usize) }.map(drop)
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphaned descendants are re-parented to this process.
pub fn prctl_set_child_subreaper() -> Result<()> {
    // SAFETY: `PR_SET_CHILD_SUBREAPER` takes an integer flag.
    unsafe {
        syscall!(
            nr::PRCTL,
            c::PR_SET_CHILD_SUBREAPER,
            1usize,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `rt_sigprocmask(SIG_SETMASK, set, NULL)` with a 64-bit set.
pub fn set_sigmask(set: u64) -> Result<()> {
    let set = core::ptr::from_ref(&set);
    // SAFETY: the kernel reads 8 bytes (the size argument) from `set`, a local; the
    // old-mask pointer is NULL.
    unsafe { syscall!(nr::RT_SIGPROCMASK, c::SIG_SETMASK, set, 0usize, 8usize) }.map(drop)
}

/// Takes every pending signal (all of them blocked) off the queues of this thread and
/// its process, discarding them: `rt_sigtimedwait` with a zero timeout until none is left.
pub fn discard_pending_signals() {
    let all: u64 = !0;
    // A `struct timespec` of zero: return at once when nothing is pending.
    let zero = [0i64; 2];
    // Standard signals are pending once each; queued real-time ones are bounded by
    // `RLIMIT_SIGPENDING`, and so is this loop.
    for _ in 0..4096 {
        // SAFETY: the kernel reads 8 bytes (the size argument) from `all` and a
        // `timespec` (two longs) from `zero`, both locals alive for the call; the
        // `siginfo` pointer is NULL (not written).
        let taken = unsafe {
            syscall!(
                nr::RT_SIGTIMEDWAIT,
                core::ptr::from_ref(&all),
                0usize,
                core::ptr::from_ref(&zero),
                8usize
            )
        };
        if taken.is_err() {
            return;
        }
    }
}

/// `signalfd4(-1, set, SFD_CLOEXEC)`: a new signalfd for the (blocked) signals in `set`.
pub fn signalfd(set: u64) -> Result<OwnedFd> {
    let set = core::ptr::from_ref(&set);
    // SAFETY: the kernel reads 8 bytes (the size argument) from `set`, a local.
    let fd = unsafe { syscall!(nr::SIGNALFD4, -1isize, set, 8usize, c::SFD_CLOEXEC) }?;
    // SAFETY: `signalfd4(-1, …)` succeeded, so `fd` is the new fd it installed.
    Ok(unsafe { new_fd(fd) })
}

/// `wait4(pid, &status, options, NULL)`: the pid and its raw wait status; pid 0 with
/// `WNOHANG` when no child has changed state.
pub fn wait4(pid: i32, options: usize) -> Result<(i32, i32)> {
    let mut status: i32 = 0;
    let st = core::ptr::from_mut(&mut status);
    // SAFETY: the kernel writes one `int` to `st`, a local; the rusage pointer is NULL.
    let r = unsafe { syscall!(nr::WAIT4, pid as isize, st, options, 0usize) }?;
    Ok((r as i32, status))
}

/// `ptrace(PTRACE_DETACH, pid, 0, sig)`: lets go of a tracee of this process that is in
/// a ptrace stop, resuming it with `sig` delivered (0: none).
pub fn ptrace_detach(pid: i32, sig: i32) -> Result<()> {
    // SAFETY: `PTRACE_DETACH` takes a pid and a signal number; the address is unused
    // (0) and the data argument is the signal, read as an integer.
    unsafe {
        syscall!(
            nr::PTRACE,
            c::PTRACE_DETACH,
            pid as isize,
            0usize,
            sig as isize
        )
    }
    .map(drop)
}

/// `kill(2)`.
pub fn kill(pid: i32, sig: i32) -> Result<()> {
    // SAFETY: `kill` takes two integers.
    unsafe { syscall!(nr::KILL, pid as isize, sig as isize) }.map(drop)
}

/// `getppid(2)`.
pub fn getppid() -> i32 {
    // SAFETY: `getppid` takes no argument and cannot fail.
    let r = unsafe { syscall!(nr::GETPPID) };
    r.unwrap_or(0) as i32
}

/// `execve(2)`. Returns only on failure, with the errno.
///
/// # Safety
///
/// `argv` and `envp` must be NULL-terminated arrays of pointers to NUL-terminated strings,
/// all valid for the call (the kernel copies them before it replaces the process).
pub unsafe fn execve(path: *const u8, argv: *const *const u8, envp: *const *const u8) -> Errno {
    // SAFETY: `path` is a NUL-terminated string and `argv`, `envp` NULL-terminated arrays
    // of them, valid for the call (the caller's guarantee); the kernel only reads them.
    match unsafe { syscall!(nr::EXECVE, path, argv, envp) } {
        Ok(_) => c::ENOEXEC,
        Err(e) => e,
    }
}

/// `fork(2)`, as `clone(SIGCHLD)`: `Ok(0)` in the child, the child's pid in the parent.
///
/// # Safety
///
/// The process has one thread (the init and its forks have): the child is a copy of it
/// whose every lock and buffer is in a consistent state.
pub unsafe fn fork() -> Result<i32> {
    // SAFETY: `clone` with only an exit signal and no stack, tids or tls takes no pointer:
    // it copies the calling (single-threaded, the caller's guarantee) process.
    unsafe { syscall!(nr::CLONE, c::SIGCHLD, 0usize, 0usize, 0usize, 0usize) }.map(|p| p as i32)
}

/// `dup3(old, new, 0)`: `new` becomes a copy of `old`, without close-on-exec.
///
/// # Safety
///
/// Nothing in the process owns `new` (it is replaced).
pub unsafe fn dup3(old: BorrowedFd<'_>, new: i32) -> Result<()> {
    // SAFETY: `dup3` takes no pointer; the caller guarantees that nobody owns `new`.
    unsafe { syscall!(nr::DUP3, old.raw(), new, 0usize) }.map(drop)
}

/// `chdir(2)`.
pub fn chdir(path: &CStr) -> Result<()> {
    // SAFETY: `path` is a NUL-terminated string that lives across the call.
    unsafe { syscall!(nr::CHDIR, path.as_ptr()) }.map(drop)
}

/// `setsid(2)`.
pub fn setsid() -> Result<()> {
    // SAFETY: `setsid` takes no argument.
    unsafe { syscall!(nr::SETSID) }.map(drop)
}

/// `recvmsg(2)` with `hdr`.
pub fn recvmsg(fd: BorrowedFd<'_>, hdr: &mut MsgHdr, flags: usize) -> Result<usize> {
    // SAFETY: `hdr` is an exclusive borrow of a `msghdr` whose buffers the caller made
    // from exclusive borrows that outlive the call; the kernel writes within their lengths.
    unsafe { syscall!(nr::RECVMSG, fd.raw(), core::ptr::from_mut(hdr), flags) }
}

/// `sendmsg(2)` with `hdr`.
pub fn sendmsg(fd: BorrowedFd<'_>, hdr: &MsgHdr, flags: usize) -> Result<usize> {
    // SAFETY: `hdr` is a `msghdr` whose buffers the caller made from borrows that outlive
    // the call; the kernel only reads them.
    unsafe { syscall!(nr::SENDMSG, fd.raw(), core::ptr::from_ref(hdr), flags) }
}

/// `pidfd_open(pid, 0)`.
pub fn pidfd_open(pid: i32) -> Result<OwnedFd> {
    // SAFETY: `pidfd_open` takes no pointer.
    let fd = unsafe { syscall!(nr::PIDFD_OPEN, pid as isize, 0usize) }?;
    // SAFETY: the call succeeded and returned a new fd.
    Ok(unsafe { new_fd(fd) })
}

/// A Landlock ruleset that handles no access right and scopes `scoped`
/// (`LANDLOCK_SCOPE_*`): each [`landlock_restrict_self`] with it enters one more domain,
/// a new one every call, nested in the caller's.
pub fn landlock_scoped_ruleset(scoped: u64) -> Result<OwnedFd> {
    landlock_ruleset(0, scoped)
}

/// A Landlock ruleset that handles the file-system rights `handled_fs` and scopes
/// `scoped`. The attribute is passed whole (24 bytes); a kernel that knows a shorter one
/// takes it when the fields it does not know are zero.
pub fn landlock_ruleset(handled_fs: u64, scoped: u64) -> Result<OwnedFd> {
    // `struct landlock_ruleset_attr`: handled_access_fs, handled_access_net, scoped.
    let attr: [u64; 3] = [handled_fs, 0, scoped];
    // SAFETY: `attr` is a live `landlock_ruleset_attr` of the size passed; the kernel
    // only reads it.
    let fd = unsafe {
        syscall!(
            nr::LANDLOCK_CREATE_RULESET,
            attr.as_ptr(),
            core::mem::size_of_val(&attr),
            0usize
        )
    }?;
    // SAFETY: the call succeeded and returned a new fd.
    Ok(unsafe { new_fd(fd) })
}

/// `landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, {allowed, parent}, 0)`.
pub fn landlock_add_rule_path_beneath(
    ruleset: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    allowed: u64,
) -> Result<()> {
    // `struct landlock_path_beneath_attr`, packed: allowed_access (u64), parent_fd (s32).
    let mut attr = [0u8; 12];
    let (access, fd) = attr.split_at_mut(8);
    access.copy_from_slice(&allowed.to_ne_bytes());
    fd.copy_from_slice(&parent.raw().to_ne_bytes());
    // SAFETY: `attr` is a live, packed `landlock_path_beneath_attr` (12 bytes); the
    // kernel only reads it.
    unsafe {
        syscall!(
            nr::LANDLOCK_ADD_RULE,
            ruleset.raw(),
            c::LANDLOCK_RULE_PATH_BENEATH,
            attr.as_ptr(),
            0usize
        )
    }
    .map(drop)
}

/// `landlock_restrict_self(ruleset, flags)`: the calling thread enters a new domain made
/// of its current one and `ruleset`. Needs `no_new_privs`.
pub fn landlock_restrict_self(ruleset: BorrowedFd<'_>, flags: u32) -> Result<()> {
    // SAFETY: `landlock_restrict_self` takes no pointer.
    unsafe { syscall!(nr::LANDLOCK_RESTRICT_SELF, ruleset.raw(), flags as usize) }.map(drop)
}

/// `struct pollfd`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PollFd {
    /// The fd (negative: ignored).
    pub fd: i32,
    /// The events asked for.
    pub events: i16,
    /// The events that happened.
    pub revents: i16,
}

/// `ppoll(fds, n, NULL, NULL)`: waits without a timeout until one of `fds` has news; the
/// number of those that have.
pub fn ppoll(fds: &mut [PollFd]) -> Result<usize> {
    // SAFETY: the kernel reads and writes `fds.len()` `pollfd`s at `fds`, an exclusive
    // borrow of that many; the timeout and mask pointers are NULL.
    unsafe {
        syscall!(
            nr::PPOLL,
            fds.as_mut_ptr(),
            fds.len(),
            0usize,
            0usize,
            8usize
        )
    }
}

/// `getpid(2)`.
pub fn getpid() -> i32 {
    // SAFETY: `getpid` takes no argument and cannot fail.
    let r = unsafe { syscall!(nr::GETPID) };
    r.unwrap_or(0) as i32
}

/// `pipe2(fds, O_CLOEXEC | extra)`: the read end and the write end.
pub fn pipe(extra: usize) -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1i32; 2];
    // SAFETY: the kernel writes two `int`s to `fds`, a local of that size.
    unsafe { syscall!(nr::PIPE2, fds.as_mut_ptr(), c::O_CLOEXEC | extra) }?;
    // SAFETY: the call succeeded: both are new fds it installed, owned by nothing else.
    let read = unsafe { new_fd(fds[0] as usize) };
    // SAFETY: as above.
    let write = unsafe { new_fd(fds[1] as usize) };
    Ok((read, write))
}

/// `exit_group(2)`.
pub fn exit_group(code: i32) -> ! {
    loop {
        // SAFETY: `exit_group` takes an integer and does not return.
        let _ = unsafe { syscall!(nr::EXIT_GROUP, code as isize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_match_the_kernel() {
        let pairs: [(usize, libc::c_long); 30] = [
            (nr::IOCTL, libc::SYS_ioctl),
            (nr::LANDLOCK_ADD_RULE, libc::SYS_landlock_add_rule),
            (nr::PPOLL, libc::SYS_ppoll),
            (nr::GETPID, libc::SYS_getpid),
            (nr::PIPE2, libc::SYS_pipe2),
            (nr::CLONE, libc::SYS_clone),
            (nr::DUP3, libc::SYS_dup3),
            (nr::CHDIR, libc::SYS_chdir),
            (nr::SETSID, libc::SYS_setsid),
            (nr::SENDMSG, libc::SYS_sendmsg),
            (nr::RECVMSG, libc::SYS_recvmsg),
            (nr::PIDFD_OPEN, libc::SYS_pidfd_open),
            (
                nr::LANDLOCK_CREATE_RULESET,
                libc::SYS_landlock_create_ruleset,
            ),
            (nr::LANDLOCK_RESTRICT_SELF, libc::SYS_landlock_restrict_self),
            (nr::EXECVE, libc::SYS_execve),
            (nr::READ, libc::SYS_read),
            (nr::WRITE, libc::SYS_write),
            (nr::CLOSE, libc::SYS_close),
            (nr::RT_SIGPROCMASK, libc::SYS_rt_sigprocmask),
            (nr::RT_SIGTIMEDWAIT, libc::SYS_rt_sigtimedwait),
            (nr::WAIT4, libc::SYS_wait4),
            (nr::KILL, libc::SYS_kill),
            (nr::PTRACE, libc::SYS_ptrace),
            (nr::GETPPID, libc::SYS_getppid),
            (nr::FCNTL, libc::SYS_fcntl),
            (nr::PRCTL, libc::SYS_prctl),
            (nr::EXIT_GROUP, libc::SYS_exit_group),
            (nr::OPENAT, libc::SYS_openat),
            (nr::SIGNALFD4, libc::SYS_signalfd4),
            (nr::CLOSE_RANGE, libc::SYS_close_range),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours as libc::c_long, theirs);
        }
    }

    #[test]
    fn constants_match_the_kernel() {
        assert_eq!(c::EINTR, libc::EINTR);
        assert_eq!(c::ECHILD, libc::ECHILD);
        for (ours, theirs) in [
            (c::ENOENT, libc::ENOENT),
            (c::ENOEXEC, libc::ENOEXEC),
            (c::EACCES, libc::EACCES),
            (c::ENOTDIR, libc::ENOTDIR),
            (c::ESTALE, libc::ESTALE),
        ] {
            assert_eq!(ours, theirs);
        }
        assert_eq!(c::SIG_SETMASK as i32, libc::SIG_SETMASK);
        assert_eq!(c::O_PATH as i32, libc::O_PATH);
        assert_eq!(c::TIOCSCTTY as libc::Ioctl, libc::TIOCSCTTY);

        assert_eq!(c::SFD_CLOEXEC as i32, libc::SFD_CLOEXEC);
        assert_eq!(c::O_RDONLY as i32, libc::O_RDONLY);
        assert_eq!(c::O_CLOEXEC as i32, libc::O_CLOEXEC);
        assert_eq!(c::CLOSE_RANGE_CLOEXEC as u32, libc::CLOSE_RANGE_CLOEXEC);
        assert_eq!(c::O_NONBLOCK as i32, libc::O_NONBLOCK);
        assert_eq!(c::POLLIN, libc::POLLIN);
        assert_eq!(size_of::<PollFd>(), size_of::<libc::pollfd>());
        assert_eq!(c::AT_FDCWD as i32, libc::AT_FDCWD);
        assert_eq!(c::F_SETFD as i32, libc::F_SETFD);
        assert_eq!(c::FD_CLOEXEC as i32, libc::FD_CLOEXEC);
        assert_eq!(c::WNOHANG as i32, libc::WNOHANG);
        assert_eq!(c::EINVAL, libc::EINVAL);
        assert_eq!(c::E2BIG, libc::E2BIG);
        assert_eq!(c::ESRCH, libc::ESRCH);
        assert_eq!(c::SIGCHLD as i32, libc::SIGCHLD);
        assert_eq!(c::SOL_SOCKET, libc::SOL_SOCKET);
        assert_eq!(c::SCM_RIGHTS, libc::SCM_RIGHTS);
        assert_eq!(c::MSG_TRUNC, libc::MSG_TRUNC);
        assert_eq!(c::MSG_CTRUNC, libc::MSG_CTRUNC);
        assert_eq!(c::MSG_CMSG_CLOEXEC as i32, libc::MSG_CMSG_CLOEXEC);
        assert_eq!(c::MSG_NOSIGNAL as i32, libc::MSG_NOSIGNAL);
        assert_eq!(
            core::mem::size_of::<MsgHdr>(),
            core::mem::size_of::<libc::msghdr>()
        );
        assert_eq!(
            core::mem::offset_of!(MsgHdr, flags),
            core::mem::offset_of!(libc::msghdr, msg_flags)
        );
        assert_eq!(c::WALL as i32, libc::__WALL);
        assert_eq!(c::PR_SET_PDEATHSIG as i32, libc::PR_SET_PDEATHSIG);
        assert_eq!(c::PR_SET_DUMPABLE as i32, libc::PR_SET_DUMPABLE);
        assert_eq!(c::SIGTRAP, libc::SIGTRAP);
        assert_eq!(c::PTRACE_DETACH as i64, libc::PTRACE_DETACH as i64);
        assert_eq!(c::PR_SET_NAME as i32, libc::PR_SET_NAME);
        assert_eq!(
            c::PR_SET_CHILD_SUBREAPER as i32,
            libc::PR_SET_CHILD_SUBREAPER
        );
        assert_eq!(
            c::SIGINFO_SIZE,
            core::mem::size_of::<libc::signalfd_siginfo>()
        );
    }

    #[test]
    fn calls_reach_the_kernel() {
        assert_eq!(
            open_read(c"/nonexistent-stockade-init").map(drop),
            Err(libc::ENOENT)
        );
        assert!(matches!(
            wait4(-1, c::WNOHANG),
            Ok((0, _)) | Err(libc::ECHILD)
        ));
    }

    #[test]
    fn owned_fds_are_read_and_closed() {
        let fd = open_read(c"/proc/self/stat").unwrap();
        let mut buf = [0u8; 8];
        assert!(read(fd.as_fd(), &mut buf).unwrap() > 0);
        fcntl_setfd(fd.as_fd(), c::FD_CLOEXEC).unwrap();
        assert_eq!(close(fd), Ok(()));
        assert_eq!(signalfd(0).map(close), Ok(Ok(())));
    }
}
