//! Linux system calls, issued directly.
//!
//! Every wrapper is named after its system call and returns `Result<_, Errno>`. None of them
//! touches the thread-local `errno`, takes a lock or allocates, so all of them are
//! async-signal-safe and usable in a `CLONE_VM` child (see the crate docs).
//!
//! Wrappers whose arguments are all checked by the type system (`&CStr`, `&[u8]`, plain
//! integers, references to `#[repr(C)]` values) are safe functions. Wrappers that take raw
//! pointer arrays (`execve`) or whose effect on the address space cannot be described by a
//! type (`rt_sigaction`) are `unsafe fn` with a `# Safety` section.

use core::ffi::{CStr, c_char, c_int, c_long, c_uint, c_ulong, c_void};

use crate::{Errno, Result};

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

/// Issues a system call whose pointer arguments (if any) were checked by the caller.
macro_rules! sys {
    ($nr:expr $(, $a:expr)* $(,)?) => {{
        let mut args = [0usize; 6];
        let vals: &[usize] = &[$($a as usize),*];
        let mut i = 0;
        while i < vals.len() {
            args[i] = vals[i];
            i += 1;
        }
        // SAFETY: each call site passes arguments that are valid for this system call:
        // pointers come from references or `&CStr` that outlive the call, and the kernel
        // only reads or writes within the sizes it is given.
        check(unsafe { syscall6($nr, args) })
    }};
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

/// `write(2)`: returns the number of bytes written.
pub fn write(fd: c_int, buf: &[u8]) -> Result<usize> {
    sys!(libc::SYS_write, fd, buf.as_ptr(), buf.len())
}

/// `read(2)`: returns the number of bytes read.
pub fn read(fd: c_int, buf: &mut [u8]) -> Result<usize> {
    sys!(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len())
}

/// `close(2)`.
pub fn close(fd: c_int) -> Result<()> {
    sys!(libc::SYS_close, fd).map(drop)
}

/// `close_range(2)`: closes (or, with `CLOSE_RANGE_CLOEXEC`, marks) fds `first..=last`.
pub fn close_range(first: c_uint, last: c_uint, flags: c_uint) -> Result<()> {
    sys!(libc::SYS_close_range, first, last, flags).map(drop)
}

/// `dup3(2)`.
pub fn dup3(old: c_int, new: c_int, flags: c_int) -> Result<c_int> {
    sys!(libc::SYS_dup3, old, new, flags).map(|fd| fd as c_int)
}

/// `fcntl(2)` with an integer argument (`F_SETFD`, `F_GETFD`, `F_DUPFD_CLOEXEC`, …).
pub fn fcntl(fd: c_int, cmd: c_int, arg: c_int) -> Result<c_int> {
    sys!(libc::SYS_fcntl, fd, cmd, arg).map(|v| v as c_int)
}

/// `openat(2)`: returns the new fd.
pub fn openat(dirfd: c_int, path: &CStr, flags: c_int, mode: c_uint) -> Result<c_int> {
    sys!(libc::SYS_openat, dirfd, p(path), flags, mode).map(|fd| fd as c_int)
}

/// `openat2(2)`: returns the new fd.
pub fn openat2(dirfd: c_int, path: &CStr, how: &open_how) -> Result<c_int> {
    sys!(
        libc::SYS_openat2,
        dirfd,
        p(path),
        core::ptr::from_ref(how),
        core::mem::size_of::<open_how>()
    )
    .map(|fd| fd as c_int)
}

/// An `open_how` for [`openat2`] (libc's struct is non-exhaustive).
pub fn open_how(flags: u64, mode: u64, resolve: u64) -> open_how {
    // SAFETY: `open_how` is three integers; all-zero bytes are a valid value.
    let mut how: open_how = unsafe { core::mem::zeroed() };
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    how
}

/// `mkdirat(2)`.
pub fn mkdirat(dirfd: c_int, path: &CStr, mode: c_uint) -> Result<()> {
    sys!(libc::SYS_mkdirat, dirfd, p(path), mode).map(drop)
}

/// `symlinkat(2)`: creates `linkpath` (relative to `dirfd`) pointing at `target`.
pub fn symlinkat(target: &CStr, dirfd: c_int, linkpath: &CStr) -> Result<()> {
    sys!(libc::SYS_symlinkat, p(target), dirfd, p(linkpath)).map(drop)
}

/// `fstat(2)` into `st`.
pub fn fstat(fd: c_int, st: &mut libc::stat) -> Result<()> {
    sys!(libc::SYS_fstat, fd, core::ptr::from_mut(st)).map(drop)
}

/// `mount(2)`.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: c_ulong,
    data: Option<&CStr>,
) -> Result<()> {
    sys!(
        libc::SYS_mount,
        op(source),
        p(target),
        op(fstype),
        flags,
        op(data)
    )
    .map(drop)
}

/// `umount2(2)`.
pub fn umount2(target: &CStr, flags: c_int) -> Result<()> {
    sys!(libc::SYS_umount2, p(target), flags).map(drop)
}

/// `pivot_root(2)`.
pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> Result<()> {
    sys!(libc::SYS_pivot_root, p(new_root), p(put_old)).map(drop)
}

/// `mount_setattr(2)`: changes mount attributes of the mount at `dirfd`/`path`.
pub fn mount_setattr(dirfd: c_int, path: &CStr, flags: c_uint, attr: &mount_attr) -> Result<()> {
    sys!(
        libc::SYS_mount_setattr,
        dirfd,
        p(path),
        flags,
        core::ptr::from_ref(attr),
        core::mem::size_of::<mount_attr>()
    )
    .map(drop)
}

/// `open_tree(2)`: an fd for the mount at `dirfd`/`path` (with `OPEN_TREE_CLONE`, a
/// detached copy of it, like a bind that is not attached yet).
pub fn open_tree(dirfd: c_int, path: &CStr, flags: c_uint) -> Result<c_int> {
    sys!(libc::SYS_open_tree, dirfd, p(path), flags).map(|fd| fd as c_int)
}

/// `move_mount(2)`.
pub fn move_mount(
    from_dirfd: c_int,
    from_path: &CStr,
    to_dirfd: c_int,
    to_path: &CStr,
    flags: c_uint,
) -> Result<()> {
    sys!(
        libc::SYS_move_mount,
        from_dirfd,
        p(from_path),
        to_dirfd,
        p(to_path),
        flags
    )
    .map(drop)
}

/// `fsopen(2)`: a file system context for `fstype`.
pub fn fsopen(fstype: &CStr, flags: c_uint) -> Result<c_int> {
    sys!(libc::SYS_fsopen, p(fstype), flags).map(|fd| fd as c_int)
}

/// `fsconfig(2)` with `FSCONFIG_SET_STRING`.
pub fn fsconfig_set_string(fsfd: c_int, key: &CStr, value: &CStr) -> Result<()> {
    sys!(libc::SYS_fsconfig, fsfd, 1u32, p(key), p(value), 0usize).map(drop)
}

/// `fsconfig(2)` with `FSCONFIG_CMD_CREATE`.
pub fn fsconfig_create(fsfd: c_int) -> Result<()> {
    sys!(libc::SYS_fsconfig, fsfd, 6u32, 0usize, 0usize, 0usize).map(drop)
}

/// `fsmount(2)`: a detached mount of the created context, with `MOUNT_ATTR_*` flags.
pub fn fsmount(fsfd: c_int, flags: c_uint, attr_flags: c_uint) -> Result<c_int> {
    sys!(libc::SYS_fsmount, fsfd, flags, attr_flags).map(|fd| fd as c_int)
}

/// `chdir(2)`.
pub fn chdir(path: &CStr) -> Result<()> {
    sys!(libc::SYS_chdir, p(path)).map(drop)
}

/// `fchdir(2)`.
pub fn fchdir(fd: c_int) -> Result<()> {
    sys!(libc::SYS_fchdir, fd).map(drop)
}

/// `prctl(2)` with integer arguments.
pub fn prctl(option: c_int, a2: c_ulong, a3: c_ulong, a4: c_ulong, a5: c_ulong) -> Result<c_int> {
    sys!(libc::SYS_prctl, option, a2, a3, a4, a5).map(|v| v as c_int)
}

/// `setsid(2)`: returns the new session id.
pub fn setsid() -> Result<c_int> {
    sys!(libc::SYS_setsid).map(|v| v as c_int)
}

/// `getpid(2)`.
pub fn getpid() -> c_int {
    sys!(libc::SYS_getpid).map_or(0, |v| v as c_int)
}

/// `keyctl(2)` with integer arguments.
pub fn keyctl(op: c_int, a2: c_ulong, a3: c_ulong, a4: c_ulong, a5: c_ulong) -> Result<c_long> {
    sys!(libc::SYS_keyctl, op, a2, a3, a4, a5).map(|v| v as c_long)
}

/// `sethostname(2)`.
pub fn sethostname(name: &[u8]) -> Result<()> {
    sys!(libc::SYS_sethostname, name.as_ptr(), name.len()).map(drop)
}

/// `poll(2)` (as `ppoll` with a zero or NULL timeout).
pub fn poll_now(fds: &mut [libc::pollfd]) -> Result<usize> {
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    sys!(
        libc::SYS_ppoll,
        fds.as_mut_ptr(),
        fds.len(),
        core::ptr::from_ref(&zero),
        0usize,
        0usize
    )
}

/// `socket(2)`.
pub fn socket(domain: c_int, ty: c_int, protocol: c_int) -> Result<c_int> {
    sys!(libc::SYS_socket, domain, ty, protocol).map(|fd| fd as c_int)
}

/// `ioctl(2)` with a request that reads and writes a `struct ifreq`.
pub fn ioctl_ifreq(fd: c_int, request: c_ulong, ifr: &mut IfreqFlags) -> Result<()> {
    sys!(libc::SYS_ioctl, fd, request, core::ptr::from_mut(ifr)).map(drop)
}

/// `landlock_restrict_self(2)`.
pub fn landlock_restrict_self(ruleset_fd: c_int, flags: c_uint) -> Result<()> {
    sys!(libc::SYS_landlock_restrict_self, ruleset_fd, flags).map(drop)
}

/// `landlock_add_rule(2)` with `LANDLOCK_RULE_PATH_BENEATH`.
pub fn landlock_add_rule_path_beneath(
    ruleset_fd: c_int,
    attr: &LandlockPathBeneathAttr,
) -> Result<()> {
    sys!(
        libc::SYS_landlock_add_rule,
        ruleset_fd,
        1u32,
        core::ptr::from_ref(attr),
        0u32
    )
    .map(drop)
}

/// `struct landlock_path_beneath_attr` (packed, as in the UAPI header).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
pub struct LandlockPathBeneathAttr {
    /// `LANDLOCK_ACCESS_FS_*` bits granted beneath `parent_fd`.
    pub allowed_access: u64,
    /// An `O_PATH` fd of the directory or file.
    pub parent_fd: i32,
}

/// `landlock_create_ruleset(2)` with `LANDLOCK_CREATE_RULESET_VERSION`: the ABI version.
pub fn landlock_abi_version() -> Result<c_int> {
    sys!(libc::SYS_landlock_create_ruleset, 0usize, 0usize, 1u32).map(|v| v as c_int)
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)`.
pub fn seccomp_set_mode_filter(flags: c_uint, prog: &libc::sock_fprog) -> Result<c_int> {
    // The kernel copies `prog.filter[..prog.len]` before returning (`copy_from_user` in
    // `seccomp_prepare_user_filter`), so a borrow for the duration of the call suffices.
    // The caller built `prog` from a slice, so `filter` points to `len` instructions.
    sys!(
        libc::SYS_seccomp,
        libc::SECCOMP_SET_MODE_FILTER,
        flags,
        core::ptr::from_ref(prog)
    )
    .map(|v| v as c_int)
}

/// `capset(2)` with `_LINUX_CAPABILITY_VERSION_3`.
pub fn capset(header: &CapUserHeader, data: &[CapUserData; 2]) -> Result<()> {
    sys!(libc::SYS_capset, core::ptr::from_ref(header), data.as_ptr()).map(drop)
}

/// `rt_sigprocmask(2)` with a 64-bit signal set.
pub fn rt_sigprocmask(how: c_int, set: &u64, old: Option<&mut u64>) -> Result<()> {
    let old = old.map_or(0, |o| core::ptr::from_mut(o) as usize);
    sys!(
        libc::SYS_rt_sigprocmask,
        how,
        core::ptr::from_ref(set),
        old,
        8usize
    )
    .map(drop)
}

/// Sets the disposition of `sig` to `SIG_DFL` with `rt_sigaction(2)`.
///
/// Setting the default disposition installs no handler, so no code address is handed to
/// the kernel; that is why this wrapper, unlike a general `rt_sigaction`, is safe.
pub fn rt_sigaction_default(sig: c_int) -> Result<()> {
    let act = KernelSigaction::default();
    sys!(
        libc::SYS_rt_sigaction,
        sig,
        core::ptr::from_ref(&act),
        0usize,
        8usize
    )
    .map(drop)
}

/// `execve(2)`: only returns on failure.
///
/// # Safety
///
/// `argv` and `envp` must each point to a NULL-terminated array of pointers to
/// NUL-terminated strings, all of which stay valid for the duration of the call.
pub unsafe fn execve(path: &CStr, argv: *const *const c_char, envp: *const *const c_char) -> Errno {
    // SAFETY: `path` is a valid C string; the caller guarantees `argv` and `envp`.
    let ret = unsafe {
        syscall6(
            libc::SYS_execve,
            [p(path), argv as usize, envp as usize, 0, 0, 0],
        )
    };
    match check(ret) {
        Err(e) => e,
        Ok(_) => Errno(libc::EINVAL),
    }
}

/// `exit_group(2)`: ends the calling process without running any user-space code.
pub fn exit_group(code: c_int) -> ! {
    loop {
        let _ = sys!(libc::SYS_exit_group, code);
    }
}

/// `pidfd_open(2)`.
pub fn pidfd_open(pid: c_int, flags: c_uint) -> Result<c_int> {
    sys!(libc::SYS_pidfd_open, pid, flags).map(|fd| fd as c_int)
}

/// `pidfd_send_signal(2)` without `siginfo`.
pub fn pidfd_send_signal(pidfd: c_int, sig: c_int) -> Result<()> {
    sys!(libc::SYS_pidfd_send_signal, pidfd, sig, 0usize, 0u32).map(drop)
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

/// `struct __user_cap_header_struct`.
#[repr(C)]
#[derive(Debug)]
pub struct CapUserHeader {
    /// `_LINUX_CAPABILITY_VERSION_3`.
    pub version: u32,
    /// 0 for the calling thread.
    pub pid: c_int,
}

/// `struct __user_cap_data_struct`: one 32-bit word of each set.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct CapUserData {
    /// Effective set.
    pub effective: u32,
    /// Permitted set.
    pub permitted: u32,
    /// Inheritable set.
    pub inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
pub const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct ifreq` as used by `SIOCGIFFLAGS`/`SIOCSIFFLAGS`: a name and a flags word.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IfreqFlags {
    /// Interface name, NUL-terminated.
    pub name: [u8; 16],
    /// `ifr_flags`.
    pub flags: i16,
    /// The rest of the `ifr_ifru` union.
    pub pad: [u8; 22],
}

/// `SIOCGIFFLAGS`.
pub const SIOCGIFFLAGS: c_ulong = 0x8913;
/// `SIOCSIFFLAGS`.
pub const SIOCSIFFLAGS: c_ulong = 0x8914;
/// `LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF` and friends are not used; 0 is the default.
pub const LANDLOCK_RESTRICT_SELF_DEFAULT: c_uint = 0;

/// An untyped pointer, for callers that build `sock_fprog` values.
pub type VoidPtr = *const c_void;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(core::mem::size_of::<KernelSigaction>(), 32);
        assert_eq!(core::mem::size_of::<CapUserHeader>(), 8);
        assert_eq!(core::mem::size_of::<CapUserData>(), 12);
        assert_eq!(core::mem::size_of::<IfreqFlags>(), 40);
        assert_eq!(core::mem::offset_of!(IfreqFlags, flags), 16);
        assert_eq!(core::mem::size_of::<mount_attr>(), 32);
        assert_eq!(core::mem::size_of::<open_how>(), 24);
        assert_eq!(core::mem::size_of::<LandlockPathBeneathAttr>(), 12);
    }

    #[test]
    fn errors_come_back_as_errno() {
        let bad = c"/nonexistent-stockade-sys-test";
        assert_eq!(chdir(bad), Err(Errno(libc::ENOENT)));
        assert_eq!(close(-1), Err(Errno(libc::EBADF)));
        assert!(getpid() > 0);
    }

    #[test]
    fn read_write_round_trip_through_a_pipe() {
        let mut fds = [0 as c_int; 2];
        // SAFETY: `fds` has room for the two fds pipe2 writes.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        assert_eq!(write(fds[1], b"abc"), Ok(3));
        let mut buf = [0u8; 8];
        assert_eq!(read(fds[0], &mut buf), Ok(3));
        assert_eq!(&buf[..3], b"abc");
        close(fds[0]).unwrap();
        close(fds[1]).unwrap();
    }
}
