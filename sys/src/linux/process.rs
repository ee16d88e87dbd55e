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

/// `gettid(2)`: the calling thread's id.
///
/// A raw system call, never libc's `gettid`: std declares that symbol weak (it probes for
/// it at run time), and under fat LTO a static musl link may merge our strong reference
/// into std's weak one, leaving the symbol unresolved and the call jumping to address 0.
pub fn gettid() -> c_int {
    // SAFETY: `gettid` takes no argument and cannot fail.
    unsafe { syscall!(libc::SYS_gettid) }.map_or(0, |v| v as c_int)
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

/// `ioctl(fd, TIOCSPTLCK, &0)` (`ioctl_tty(2)`, what `unlockpt(3)` does): unlocks the
/// slave of the pseudo-terminal master `fd`, so that it can be opened.
///
/// # Safety
///
/// `fd` is a pseudo-terminal master (opened from a `ptmx`). Another driver may give the
/// request number another meaning and write through the pointer, which points to a
/// read-only `int` here.
pub unsafe fn ioctl_tiocsptlck_unlock(fd: BorrowedFd<'_>) -> Result<()> {
    let unlock: c_int = 0;
    // SAFETY: the caller guarantees that `fd` is a pseudo-terminal master, whose driver
    // reads one `int` from the pointer; `unlock` lives on this stack for the call.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            fd.as_raw_fd(),
            libc::TIOCSPTLCK,
            core::ptr::from_ref(&unlock)
        )
    }
    .map(drop)
}

/// `ioctl(fd, TIOCGPTPEER, flags)` (`ioctl_tty(2)`, Linux 4.13): opens the slave of the
/// pseudo-terminal master `fd` with `flags` (`O_RDWR | O_NOCTTY | O_CLOEXEC`), without
/// a path: the slave found is the master's own, whatever is mounted where.
///
/// # Safety
///
/// `fd` is a pseudo-terminal master (opened from a `ptmx`): for another driver the
/// request number may mean something else, with `flags` read as a pointer.
pub unsafe fn ioctl_tiocgptpeer(fd: BorrowedFd<'_>, flags: c_int) -> Result<OwnedFd> {
    // SAFETY: the caller guarantees that `fd` is a pseudo-terminal master, whose driver
    // reads `flags` as an integer.
    let slave = unsafe { syscall!(libc::SYS_ioctl, fd.as_raw_fd(), libc::TIOCGPTPEER, flags) }?;
    // SAFETY: `TIOCGPTPEER` succeeded, so `slave` is the new fd it installed in this
    // process's table; no one else has its number.
    Ok(unsafe { new_fd(slave) })
}

/// `ioctl(fd, TIOCSWINSZ, size)` (`ioctl_tty(2)`): sets the window size of the terminal
/// `fd` (on a pseudo-terminal master: of its slave). The kernel sends `SIGWINCH` to the
/// terminal's foreground process group when the size changed.
///
/// # Safety
///
/// `fd` is a terminal. Another driver may give the request number another meaning and
/// write through the pointer, which points to a read-only `winsize` here.
pub unsafe fn ioctl_tiocswinsz(fd: BorrowedFd<'_>, size: &libc::winsize) -> Result<()> {
    // SAFETY: the caller guarantees that `fd` is a terminal, whose driver reads one
    // `winsize` from the pointer; `size` is borrowed for the call.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            fd.as_raw_fd(),
            libc::TIOCSWINSZ,
            core::ptr::from_ref(size)
        )
    }
    .map(drop)
}

/// `ioctl(fd, TCSETS2, modes)` (`ioctl_tty(2)`, what `tcsetattr(fd, TCSANOW, …)` does,
/// in the kernel's own layout): sets the modes of the terminal `fd`.
///
/// # Safety
///
/// `fd` is a terminal. Another driver may give the request number another meaning and
/// write through the pointer, which points to a read-only `termios2` here.
pub unsafe fn ioctl_tcsets2(fd: BorrowedFd<'_>, modes: &libc::termios2) -> Result<()> {
    // SAFETY: the caller guarantees that `fd` is a terminal, whose driver reads one
    // `termios2` from the pointer; `modes` is borrowed for the call.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            fd.as_raw_fd(),
            libc::TCSETS2,
            core::ptr::from_ref(modes)
        )
    }
    .map(drop)
}

/// `PIDFD_THREAD` of `<linux/pidfd.h>` (Linux 6.9, `O_EXCL`): a pidfd of the thread
/// `pid`, not of its thread group (older kernels refuse it with `EINVAL`).
pub const PIDFD_THREAD: c_uint = libc::O_EXCL as c_uint;

/// `pidfd_open(2)`.
pub fn pidfd_open(pid: c_int, flags: c_uint) -> Result<OwnedFd> {
    // SAFETY: `pidfd_open` takes no pointer.
    let fd = unsafe { syscall!(libc::SYS_pidfd_open, pid, flags) }?;
    // SAFETY: `pidfd_open` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
}

/// `pidfd_getfd(2)`: a duplicate, in this process, of fd `target` of the process `pidfd`
/// refers to (close-on-exec; the same open file description). Needs ptrace access
/// (`PTRACE_MODE_ATTACH_REALCREDS`) to that process.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, target: c_int) -> Result<OwnedFd> {
    // SAFETY: `pidfd_getfd` takes no pointer; `flags` must be 0.
    let fd = unsafe { syscall!(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0u32) }?;
    // SAFETY: `pidfd_getfd` succeeded, so `fd` is the new fd it installed in this
    // process's table; no one else has its number.
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

/// `pidfd_send_signal(2)` without `siginfo`, with `flags`: `PIDFD_SIGNAL_PROCESS_GROUP`
/// (Linux 6.9; older kernels refuse any flag with `EINVAL`) sends `sig` to the process
/// group whose id is the pidfd's pid. The pidfd holds the kernel's `struct pid`, so a pid
/// number reused meanwhile is never reached.
pub fn pidfd_send_signal_flags(pidfd: BorrowedFd<'_>, sig: c_int, flags: c_uint) -> Result<()> {
    // SAFETY: the `siginfo` pointer is NULL; the other arguments are integers.
    unsafe {
        syscall!(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            0usize,
            flags
        )
    }
    .map(drop)
}

/// `PIDFD_SIGNAL_PROCESS_GROUP` of `<linux/pidfd.h>` (not in `libc` yet).
pub const PIDFD_SIGNAL_PROCESS_GROUP: c_uint = 1 << 2;

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

/// `kill(2)`: `sig` to `pid` (a negative `pid`: to that process group).
pub fn kill(pid: c_int, sig: c_int) -> Result<()> {
    // SAFETY: `kill` takes two integers.
    unsafe { syscall!(libc::SYS_kill, pid as isize, sig) }.map(drop)
}

/// `wait4(pid, &status, options, NULL)`: the pid reaped and its raw wait status.
pub fn wait4(pid: c_int, options: c_int) -> Result<(c_int, c_int)> {
    let mut status: c_int = 0;
    let st = core::ptr::from_mut(&mut status);
    // SAFETY: the kernel writes one `int` to `st`, a local; the rusage pointer is NULL.
    let r = unsafe { syscall!(libc::SYS_wait4, pid as isize, st, options, 0usize) }?;
    Ok((r as c_int, status))
}

/// `getppid(2)`.
pub fn getppid() -> c_int {
    // SAFETY: `getppid` takes no argument and cannot fail.
    unsafe { syscall!(libc::SYS_getppid) }.map_or(0, |v| v as c_int)
}

/// The entry of a child made by [`clone_vm_vfork`]: called with the `arg` given there, on
/// the child's own stack. It must end the child (`execve`, `exit_group`); it cannot return.
pub type VforkEntry = extern "C" fn(arg: *mut core::ffi::c_void) -> !;

/// `clone(CLONE_VM | CLONE_VFORK | SIGCHLD)` with a stack of the caller's: the child runs
/// `entry(arg)` on `stack_top` while the caller stays suspended, and this returns the
/// child's pid once the child has exec'd or ended (what `posix_spawn` does).
///
/// A raw `clone` cannot run Rust code on a new stack by itself: the child returns from
/// the system call with its stack pointer at `stack_top` and no frame, so this call is a
/// few instructions of assembly that, in the child, clear the frame pointer and call
/// `entry`. In the caller, it is a plain system call.
///
/// # Safety
///
/// - `stack_top` is the 16-byte aligned top of writable memory that nothing uses until
///   this returns, large enough for `entry`'s frames (nothing catches an overflow unless
///   the memory below has a guard page);
/// - `entry` follows the rules of a child that shares the caller's memory until it
///   execs: no allocation, no lock, no `errno` or other thread-local state, nothing the
///   caller relies on written except through `arg`; and `arg` is valid for what `entry`
///   does with it until this returns.
pub unsafe fn clone_vm_vfork(
    stack_top: *mut u8,
    entry: VforkEntry,
    arg: *mut core::ffi::c_void,
) -> Result<c_int> {
    let flags = (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as usize;
    let ret: isize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller guarantees the stack and the entry. In the caller the block is one
    // `syscall` (rax, rcx and r11 change; the kernel keeps every other register, r12 and
    // r13 included). In the child (rax = 0) the stack pointer is `stack_top`: the frame
    // pointer is cleared, `call` pushes the return address (so `entry` starts with the
    // stack 8 bytes off 16, as the ABI wants) and `entry` never returns (`ud2` if it did).
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone as isize => ret,
            in("rdi") flags,
            in("rsi") stack_top,
            in("rdx") 0usize,
            in("r10") 0usize,
            in("r8") 0usize,
            in("r12") entry,
            in("r13") arg,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above. In the caller the block is one `svc 0` (x0 changes; the kernel keeps
    // every other register, x9 and x10 included). In the child (x0 = 0) the stack pointer
    // is `stack_top`: frame pointer and link register are cleared, `entry` is called with
    // `arg` and never returns (`brk` if it did).
    unsafe {
        core::arch::asm!(
            "svc 0",
            "cbnz x0, 2f",
            "mov x29, xzr",
            "mov x30, xzr",
            "mov x0, x10",
            "blr x9",
            "brk #1",
            "2:",
            in("x8") libc::SYS_clone,
            inlateout("x0") flags => ret,
            in("x1") stack_top,
            in("x2") 0usize,
            in("x3") 0usize,
            in("x4") 0usize,
            in("x9") entry,
            in("x10") arg,
            options(nostack),
        );
    }
    super::check(ret).map(|pid| pid as c_int)
}

/// `prlimit64(0, resource, NULL, &old)` (`getrlimit(2)`): the caller's soft and hard limit
/// of `resource`.
pub fn getrlimit(resource: c_int) -> Result<(u64, u64)> {
    let mut old = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let out = core::ptr::from_mut(&mut old);
    // SAFETY: pid 0 is the caller; the new-limit pointer is NULL (nothing is read) and
    // `out` points to a writable `rlimit64` that lives across the call.
    unsafe { syscall!(libc::SYS_prlimit64, 0, resource, 0usize, out) }?;
    Ok((old.rlim_cur, old.rlim_max))
}

/// `prlimit64(0, resource, &new, NULL)` (`setrlimit(2)`): sets the caller's soft and hard
/// limit of `resource`. Raising a hard limit needs `CAP_SYS_RESOURCE` (`EPERM`).
pub fn setrlimit(resource: c_int, soft: u64, hard: u64) -> Result<()> {
    let new = libc::rlimit64 {
        rlim_cur: soft,
        rlim_max: hard,
    };
    let arg = core::ptr::from_ref(&new);
    // SAFETY: pid 0 is the caller; `arg` points to an initialized `rlimit64` that lives
    // across the call and that the kernel only reads; the old-limit pointer is NULL.
    unsafe { syscall!(libc::SYS_prlimit64, 0, resource, arg, 0usize) }.map(drop)
}

/// `waitid(P_PIDFD, pidfd, &info, options, &usage)`: waits for the process of `pidfd`
/// (`WEXITED` and more in `options`; `WNOHANG`: returns `Ok(None)` when it has not changed
/// state) and returns the resources it and its reaped descendants used (`RUSAGE_BOTH`).
/// With `WNOWAIT` the process stays a zombie.
pub fn waitid_pidfd_rusage(pidfd: BorrowedFd<'_>, options: c_int) -> Result<Option<libc::rusage>> {
    // SAFETY: an all-zero `siginfo_t` and `rusage` are valid values of these plain C
    // structs (integers and unions of integers).
    let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
    // SAFETY: as above.
    let mut usage: libc::rusage = unsafe { core::mem::zeroed() };
    let (ip, up) = (
        core::ptr::from_mut(&mut info),
        core::ptr::from_mut(&mut usage),
    );
    // SAFETY: the kernel writes one `siginfo_t` to `ip` and one `rusage` to `up`, both
    // locals that live across the call; the other arguments are integers.
    unsafe {
        syscall!(
            libc::SYS_waitid,
            libc::P_PIDFD,
            pidfd.as_raw_fd(),
            ip,
            options,
            up
        )
    }?;
    // With WNOHANG and no change, the kernel leaves `si_pid` 0.
    // SAFETY: `si_pid` is read from the siginfo the kernel filled (or left zeroed).
    let pid = unsafe { info.si_pid() };
    Ok((pid != 0).then_some(usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(core::mem::size_of::<KernelSigaction>(), 32);
    }

    /// What the child of `the_vfork_child_runs_on_its_stack_and_the_caller_waits` writes.
    struct Shared {
        /// The child's stack pointer region: set to the address of a local of `entry`.
        local_at: core::sync::atomic::AtomicUsize,
        /// The child's `getppid()`.
        ppid: core::sync::atomic::AtomicI32,
    }

    extern "C" fn entry(arg: *mut core::ffi::c_void) -> ! {
        use core::sync::atomic::Ordering::SeqCst;
        // SAFETY: `arg` is the `Shared` of the test below, alive until `clone_vm_vfork`
        // returns there, which is after this child has ended.
        let shared = unsafe { &*arg.cast::<Shared>() };
        let local = 0u8;
        shared
            .local_at
            .store(core::ptr::from_ref(&local) as usize, SeqCst);
        shared.ppid.store(getppid(), SeqCst);
        exit_group(7)
    }

    #[test]
    fn the_vfork_child_runs_on_its_stack_and_the_caller_waits() {
        use core::sync::atomic::Ordering::SeqCst;
        let shared = Shared {
            local_at: 0.into(),
            ppid: 0.into(),
        };
        let mut stack = [0u128; 2048];
        let range = stack.as_ptr_range();
        let (lo, hi) = (range.start as usize, range.end as usize);
        // SAFETY: the stack is a live, 16-byte aligned local (u128) used by nothing else
        // until the call returns; `entry` makes raw system calls only and writes nothing
        // but `shared`, which outlives the call.
        let pid = unsafe {
            clone_vm_vfork(
                stack.as_mut_ptr_range().end.cast(),
                entry,
                core::ptr::from_ref(&shared).cast_mut().cast(),
            )
        }
        .unwrap();
        // CLONE_VFORK: the child has ended by now, so what it wrote is there.
        let at = shared.local_at.load(SeqCst);
        assert!(
            lo < at && at < hi,
            "child local at {at:#x}, stack {lo:#x}..{hi:#x}"
        );
        assert_eq!(shared.ppid.load(SeqCst), getpid());
        let mut status = 0;
        // SAFETY: `status` is a valid place for the status; `pid` is this process's child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7,
            "{status:#x}"
        );
    }
}
