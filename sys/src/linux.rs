//! Linux system calls, issued directly.
//!
//! Every wrapper is named after its system call and returns `Result<_, Errno>`. None of them
//! touches the thread-local `errno`, takes a lock or allocates, so all of them are
//! async-signal-safe and usable in a `CLONE_VM` child (see the crate docs).
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
//!   `fcntl_setfd`, `ioctl_siocgifflags`, …), with no pointer-sized argument left open;
//! - an fd is passed as a [`BorrowedFd`] (open for the call, by its type) and a new fd comes
//!   back as an [`OwnedFd`], so no safe wrapper acts on an fd its caller does not hold
//!   (I/O safety, as in std). Closing takes an [`OwnedFd`] ([`close`]);
//! - structs that hold an fd or a pointer for the kernel (`landlock_path_beneath_attr`,
//!   `sock_fprog`, `mount_attr`, `msghdr`) are built inside the wrapper from typed
//!   arguments.
//!
//! The rest are `unsafe fn` with a `# Safety` section: [`syscall6`] itself, [`close_raw`],
//! [`close_range`] and [`dup3`] (they close or replace fds by number, which only the caller
//! can know to be its own), and [`execve`] / [`execveat`] (raw pointer arrays).

use core::ffi::{CStr, c_char, c_int, c_long, c_uint, c_ulong};

use crate::fd::{BorrowedFd, OwnedFd};
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
        check(syscall6($nr, args([$($a as usize),*])))
    };
}

/// Takes ownership of the fd a successful call returned.
#[inline(always)]
fn owned(ret: usize) -> OwnedFd {
    // SAFETY: `ret` is the non-negative result of a call that creates a new fd (`openat`,
    // `socket`, `fsopen`, …): the kernel just installed it in this process's table and no
    // one else has its number yet.
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

/// `openat(2)`: opens `path` relative to `dirfd` (or [`CWD`]).
pub fn openat(dirfd: BorrowedFd<'_>, path: &CStr, flags: c_int, mode: c_uint) -> Result<OwnedFd> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    unsafe { syscall!(libc::SYS_openat, dirfd.as_raw_fd(), p(path), flags, mode) }.map(owned)
}

/// `openat2(2)`: opens `path` relative to `dirfd` (or [`CWD`]) as `how` says.
pub fn openat2(dirfd: BorrowedFd<'_>, path: &CStr, how: &open_how) -> Result<OwnedFd> {
    // SAFETY: the kernel reads `path` up to its NUL and `size_of::<open_how>()` bytes from
    // `how`, a live `open_how`; it writes neither.
    unsafe {
        syscall!(
            libc::SYS_openat2,
            dirfd.as_raw_fd(),
            p(path),
            core::ptr::from_ref(how),
            core::mem::size_of::<open_how>()
        )
    }
    .map(owned)
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
pub fn mkdirat(dirfd: BorrowedFd<'_>, path: &CStr, mode: c_uint) -> Result<()> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    unsafe { syscall!(libc::SYS_mkdirat, dirfd.as_raw_fd(), p(path), mode) }.map(drop)
}

/// `fchmodat(2)` without flags (symlinks are followed; use it on what is known to be a
/// directory or file).
pub fn fchmodat(dirfd: BorrowedFd<'_>, path: &CStr, mode: c_uint) -> Result<()> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    unsafe { syscall!(libc::SYS_fchmodat, dirfd.as_raw_fd(), p(path), mode) }.map(drop)
}

/// `symlinkat(2)`: creates `linkpath` (relative to `dirfd`) pointing at `target`.
pub fn symlinkat(target: &CStr, dirfd: BorrowedFd<'_>, linkpath: &CStr) -> Result<()> {
    // SAFETY: the kernel reads `target` and `linkpath` up to their NULs; both outlive the
    // call.
    unsafe {
        syscall!(
            libc::SYS_symlinkat,
            p(target),
            dirfd.as_raw_fd(),
            p(linkpath)
        )
    }
    .map(drop)
}

/// `fstat(2)` into `st`.
pub fn fstat(fd: BorrowedFd<'_>, st: &mut libc::stat) -> Result<()> {
    // SAFETY: the kernel writes one `struct stat` into `st`, an exclusive borrow of a
    // `libc::stat` (whose layout is the kernel's on this target); every bit pattern is a
    // valid value of its integer fields.
    unsafe { syscall!(libc::SYS_fstat, fd.as_raw_fd(), core::ptr::from_mut(st)) }.map(drop)
}

/// `mount(2)`.
///
/// `data` is a string of options: this wrapper serves the file systems that take text
/// (tmpfs, proc, devpts, bind mounts without data), not the few that take a binary struct.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: c_ulong,
    data: Option<&CStr>,
) -> Result<()> {
    // SAFETY: every pointer is NULL or a live `&CStr`. The kernel reads the strings, and
    // only reads: it copies `data` with `copy_mount_options`, which stops at the first
    // unreadable byte and never writes to user memory.
    unsafe {
        syscall!(
            libc::SYS_mount,
            op(source),
            p(target),
            op(fstype),
            flags,
            op(data)
        )
    }
    .map(drop)
}

/// `umount2(2)`.
pub fn umount2(target: &CStr, flags: c_int) -> Result<()> {
    // SAFETY: the kernel reads `target` up to its NUL; it outlives the call.
    unsafe { syscall!(libc::SYS_umount2, p(target), flags) }.map(drop)
}

/// `pivot_root(2)`.
pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> Result<()> {
    // SAFETY: the kernel reads both paths up to their NULs; both outlive the call.
    unsafe { syscall!(libc::SYS_pivot_root, p(new_root), p(put_old)) }.map(drop)
}

/// `mount_setattr(2)`: sets `attr_set` and clears `attr_clr` (`MOUNT_ATTR_*`) on the mount
/// at `dirfd`/`path`, and sets its propagation (`MS_PRIVATE`, …, or 0 to leave it).
///
/// `MOUNT_ATTR_IDMAP` is refused with `EINVAL`: it makes the kernel use an fd number from
/// the struct (`userns_fd`), which this wrapper does not take.
pub fn mount_setattr(
    dirfd: BorrowedFd<'_>,
    path: &CStr,
    flags: c_uint,
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
) -> Result<()> {
    if (attr_set | attr_clr) & libc::MOUNT_ATTR_IDMAP != 0 {
        return Err(Errno(libc::EINVAL));
    }
    let attr = mount_attr {
        attr_set,
        attr_clr,
        propagation,
        userns_fd: 0,
    };
    // SAFETY: the kernel reads `path` up to its NUL and `size_of::<mount_attr>()` bytes
    // from `attr`, a local that outlives the call; without `MOUNT_ATTR_IDMAP` it ignores
    // `userns_fd`.
    unsafe {
        syscall!(
            libc::SYS_mount_setattr,
            dirfd.as_raw_fd(),
            p(path),
            flags,
            core::ptr::from_ref(&attr),
            core::mem::size_of::<mount_attr>()
        )
    }
    .map(drop)
}

/// `open_tree(2)`: an fd for the mount at `dirfd`/`path` (with `OPEN_TREE_CLONE`, a
/// detached copy of it, like a bind that is not attached yet).
pub fn open_tree(dirfd: BorrowedFd<'_>, path: &CStr, flags: c_uint) -> Result<OwnedFd> {
    // SAFETY: the kernel reads `path` up to its NUL; it outlives the call.
    unsafe { syscall!(libc::SYS_open_tree, dirfd.as_raw_fd(), p(path), flags) }.map(owned)
}

/// `move_mount(2)`.
pub fn move_mount(
    from_dirfd: BorrowedFd<'_>,
    from_path: &CStr,
    to_dirfd: BorrowedFd<'_>,
    to_path: &CStr,
    flags: c_uint,
) -> Result<()> {
    // SAFETY: the kernel reads both paths up to their NULs; both outlive the call.
    unsafe {
        syscall!(
            libc::SYS_move_mount,
            from_dirfd.as_raw_fd(),
            p(from_path),
            to_dirfd.as_raw_fd(),
            p(to_path),
            flags
        )
    }
    .map(drop)
}

/// `fsopen(2)`: a file system context for `fstype`.
pub fn fsopen(fstype: &CStr, flags: c_uint) -> Result<OwnedFd> {
    // SAFETY: the kernel reads `fstype` up to its NUL; it outlives the call.
    unsafe { syscall!(libc::SYS_fsopen, p(fstype), flags) }.map(owned)
}

/// `fsconfig(2)` with `FSCONFIG_SET_STRING`.
pub fn fsconfig_set_string(fsfd: BorrowedFd<'_>, key: &CStr, value: &CStr) -> Result<()> {
    // SAFETY: with `FSCONFIG_SET_STRING` the kernel reads `key` and `value` as strings up
    // to their NULs (and ignores `aux`); both outlive the call.
    unsafe {
        syscall!(
            libc::SYS_fsconfig,
            fsfd.as_raw_fd(),
            libc::FSCONFIG_SET_STRING,
            p(key),
            p(value),
            0usize
        )
    }
    .map(drop)
}

/// `fsconfig(2)` with `FSCONFIG_SET_FLAG`: a parameter without a value (`userxattr`).
pub fn fsconfig_set_flag(fsfd: BorrowedFd<'_>, key: &CStr) -> Result<()> {
    // SAFETY: with `FSCONFIG_SET_FLAG` the kernel reads only `key`, up to its NUL; the
    // value must be NULL and `aux` 0.
    unsafe {
        syscall!(
            libc::SYS_fsconfig,
            fsfd.as_raw_fd(),
            libc::FSCONFIG_SET_FLAG,
            p(key),
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `fsconfig(2)` with `FSCONFIG_CMD_CREATE`.
pub fn fsconfig_create(fsfd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: `FSCONFIG_CMD_CREATE` takes no pointer (key and value must be NULL).
    unsafe {
        syscall!(
            libc::SYS_fsconfig,
            fsfd.as_raw_fd(),
            libc::FSCONFIG_CMD_CREATE,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `fsmount(2)`: a detached mount of the created context, with `MOUNT_ATTR_*` flags.
pub fn fsmount(fsfd: BorrowedFd<'_>, flags: c_uint, attr_flags: c_uint) -> Result<OwnedFd> {
    // SAFETY: `fsmount` takes no pointer.
    unsafe { syscall!(libc::SYS_fsmount, fsfd.as_raw_fd(), flags, attr_flags) }.map(owned)
}

/// `fgetxattr(2)`: reads the extended attribute `name` of `fd` into `buf`, returns its
/// length.
pub fn fgetxattr(fd: BorrowedFd<'_>, name: &CStr, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the kernel reads `name` up to its NUL and writes at most `buf.len()` bytes
    // into `buf`, which this call borrows exclusively.
    unsafe {
        syscall!(
            libc::SYS_fgetxattr,
            fd.as_raw_fd(),
            p(name),
            buf.as_mut_ptr(),
            buf.len()
        )
    }
}

/// `chdir(2)`.
pub fn chdir(path: &CStr) -> Result<()> {
    // SAFETY: the kernel reads `path` up to its NUL; it outlives the call.
    unsafe { syscall!(libc::SYS_chdir, p(path)) }.map(drop)
}

/// `fchdir(2)`.
pub fn fchdir(fd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: `fchdir` takes no pointer.
    unsafe { syscall!(libc::SYS_fchdir, fd.as_raw_fd()) }.map(drop)
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`: `execve` can no longer grant privileges (setuid bits,
/// file capabilities); required before an unprivileged seccomp filter or Landlock.
pub fn prctl_set_no_new_privs() -> Result<()> {
    // SAFETY: `PR_SET_NO_NEW_PRIVS` takes integers only (and requires 0 in the rest).
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_SET_NO_NEW_PRIVS,
            1usize,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: `sig` is sent to this process when the thread that
/// created it ends (0 disarms it).
pub fn prctl_set_pdeathsig(sig: c_int) -> Result<()> {
    // SAFETY: `PR_SET_PDEATHSIG` takes the signal number as an integer, not a pointer.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG,
            sig,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_SET_DUMPABLE, on)`: whether the process may dump core and be ptrace-attached
/// by its own user.
pub fn prctl_set_dumpable(on: bool) -> Result<()> {
    // SAFETY: `PR_SET_DUMPABLE` takes 0 or 1 as an integer.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_SET_DUMPABLE,
            usize::from(on),
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_GET_SECCOMP)`: 0 (no seccomp), 2 (filter mode); `EINVAL` without seccomp.
pub fn prctl_get_seccomp() -> Result<c_int> {
    // SAFETY: `PR_GET_SECCOMP` returns its answer and reads no argument.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_GET_SECCOMP,
            0usize,
            0usize,
            0usize,
            0usize
        )
    }
    .map(|v| v as c_int)
}

/// `prctl(PR_CAPBSET_DROP, cap)`: drops `cap` from the bounding set (`EINVAL` past the
/// kernel's last capability).
pub fn prctl_capbset_drop(cap: u32) -> Result<()> {
    // SAFETY: `PR_CAPBSET_DROP` takes the capability number as an integer.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_CAPBSET_DROP,
            cap,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`: empties the ambient set.
pub fn prctl_cap_ambient_clear_all() -> Result<()> {
    // SAFETY: `PR_CAP_AMBIENT_CLEAR_ALL` takes integers only (0 in the rest).
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
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
    // SAFETY: `TIOCSCTTY` takes an integer argument (0: do not steal), which the kernel
    // does not dereference; `fd` is open for the call.
    unsafe { syscall!(libc::SYS_ioctl, fd.as_raw_fd(), libc::TIOCSCTTY, 0usize) }.map(drop)
}

/// `getpid(2)`.
pub fn getpid() -> c_int {
    // SAFETY: `getpid` takes no argument and cannot fail.
    unsafe { syscall!(libc::SYS_getpid) }.map_or(0, |v| v as c_int)
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

/// `socket(2)`.
pub fn socket(domain: c_int, ty: c_int, protocol: c_int) -> Result<OwnedFd> {
    // SAFETY: `socket` takes no pointer.
    unsafe { syscall!(libc::SYS_socket, domain, ty, protocol) }.map(owned)
}

/// A control message carrying one fd (`SCM_RIGHTS`): `CMSG_SPACE(sizeof(int))` bytes,
/// laid out as the kernel reads them (`cmsghdr`, then the fd at `CMSG_DATA`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CmsgFd {
    /// `cmsg_len`, `cmsg_level`, `cmsg_type`.
    pub hdr: libc::cmsghdr,
    /// The fd.
    pub fd: c_int,
    /// Padding up to `CMSG_SPACE`.
    pub pad: c_int,
}

/// `sendmsg(2)` of one byte, `tag`, with `fd` attached (`SCM_RIGHTS`): the receiver gets
/// its own fd for the same open file. Nothing is allocated: the message lives on the stack.
pub fn send_fd(sock: BorrowedFd<'_>, tag: u8, fd: BorrowedFd<'_>) -> Result<()> {
    let mut byte = [tag];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: `cmsghdr` is plain old data; all-zero bytes are a valid value (some targets
    // have private padding fields, so it cannot be built field by field).
    let mut hdr: libc::cmsghdr = unsafe { core::mem::zeroed() };
    hdr.cmsg_len = core::mem::size_of::<libc::cmsghdr>() + core::mem::size_of::<c_int>();
    hdr.cmsg_level = libc::SOL_SOCKET;
    hdr.cmsg_type = libc::SCM_RIGHTS;
    let mut cmsg = CmsgFd {
        hdr,
        fd: fd.as_raw_fd(),
        pad: 0,
    };
    // SAFETY: as above, for `msghdr`.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = core::ptr::from_mut(&mut iov);
    msg.msg_iovlen = 1;
    msg.msg_control = core::ptr::from_mut(&mut cmsg).cast();
    msg.msg_controllen = core::mem::size_of::<CmsgFd>();
    // SAFETY: `msg` points to `iov` (one entry, one byte in `byte`) and to `cmsg`
    // (`msg_controllen` bytes); all are locals that outlive the call, and `sendmsg` only
    // reads them. The kernel takes its own reference to `fd`'s file, which `fd` keeps open
    // for the call.
    unsafe {
        syscall!(
            libc::SYS_sendmsg,
            sock.as_raw_fd(),
            core::ptr::from_ref(&msg),
            libc::MSG_NOSIGNAL
        )
    }
    .map(drop)
}

/// `ioctl(fd, SIOCGIFFLAGS, ifr)`: reads the flags of the interface named in `ifr.name`
/// into `ifr.flags`.
pub fn ioctl_siocgifflags(fd: BorrowedFd<'_>, ifr: &mut IfreqFlags) -> Result<()> {
    // SAFETY: for `SIOCGIFFLAGS` the kernel copies one `struct ifreq` (40 bytes, the size
    // of `IfreqFlags`, see the layout test) in and out of `ifr`, an exclusive borrow; it
    // NUL-terminates the name itself and writes only an `i16` into `flags`.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            fd.as_raw_fd(),
            SIOCGIFFLAGS,
            core::ptr::from_mut(ifr)
        )
    }
    .map(drop)
}

/// `ioctl(fd, SIOCSIFFLAGS, ifr)`: sets the flags of the interface named in `ifr.name`.
pub fn ioctl_siocsifflags(fd: BorrowedFd<'_>, ifr: &IfreqFlags) -> Result<()> {
    // SAFETY: for `SIOCSIFFLAGS` the kernel only reads one `struct ifreq` (40 bytes, the
    // size of `IfreqFlags`) from `ifr`, a live shared borrow.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            fd.as_raw_fd(),
            SIOCSIFFLAGS,
            core::ptr::from_ref(ifr)
        )
    }
    .map(drop)
}

/// `landlock_restrict_self(2)`: enforces the ruleset on this thread (and what it execs).
pub fn landlock_restrict_self(ruleset: BorrowedFd<'_>, flags: c_uint) -> Result<()> {
    // SAFETY: `landlock_restrict_self` takes no pointer.
    unsafe { syscall!(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), flags) }.map(drop)
}

/// `landlock_add_rule(2)` with `LANDLOCK_RULE_PATH_BENEATH`: grants `allowed_access`
/// (`LANDLOCK_ACCESS_FS_*`) beneath the file or directory `parent` (an `O_PATH` fd).
pub fn landlock_add_rule_path_beneath(
    ruleset: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    allowed_access: u64,
) -> Result<()> {
    let attr = LandlockPathBeneathAttr {
        allowed_access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: the kernel reads one `landlock_path_beneath_attr` (12 packed bytes, see the
    // layout test) from `attr`, a local that outlives the call; the fd in it is `parent`,
    // open for the call.
    unsafe {
        syscall!(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            1u32, // LANDLOCK_RULE_PATH_BENEATH
            core::ptr::from_ref(&attr),
            0u32
        )
    }
    .map(drop)
}

/// `struct landlock_path_beneath_attr` (packed, as in the UAPI header).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
struct LandlockPathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `landlock_create_ruleset(2)` with `LANDLOCK_CREATE_RULESET_VERSION`: the ABI version.
pub fn landlock_abi_version() -> Result<c_int> {
    // SAFETY: with `LANDLOCK_CREATE_RULESET_VERSION` the attribute pointer must be NULL
    // and its size 0: the kernel reads nothing.
    unsafe {
        syscall!(
            libc::SYS_landlock_create_ruleset,
            0usize,
            0usize,
            1u32 // LANDLOCK_CREATE_RULESET_VERSION
        )
    }
    .map(|v| v as c_int)
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)` for the BPF program `filter`. Returns
/// the call's result (a listener fd only with `SECCOMP_FILTER_FLAG_NEW_LISTENER`, which
/// the caller then owns).
///
/// A program longer than `u16::MAX` instructions fails with `EINVAL`, as the kernel's own
/// limit (`BPF_MAXINSNS`, 4096) would.
pub fn seccomp_set_mode_filter(flags: c_uint, filter: &[libc::sock_filter]) -> Result<c_int> {
    let len = u16::try_from(filter.len()).map_err(|_| Errno(libc::EINVAL))?;
    let prog = libc::sock_fprog {
        len,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points to `len` instructions in `filter`, a live slice. The kernel
    // only reads them, and copies them before returning (`copy_from_user` in
    // `seccomp_prepare_user_filter`), so a borrow for the call suffices.
    unsafe {
        syscall!(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            core::ptr::from_ref(&prog)
        )
    }
    .map(|v| v as c_int)
}

/// `capset(2)` of this thread with `_LINUX_CAPABILITY_VERSION_3`: `data` holds the low and
/// the high 32 bits of each set.
pub fn capset(data: &[CapUserData; 2]) -> Result<()> {
    // A local header: the kernel writes its preferred version back into the header when it
    // rejects the one given, so the header must be memory this call owns.
    let mut header = CapUserHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: the kernel reads (and on a version mismatch writes) the header, a local it
    // may write, and reads two `__user_cap_data_struct`s from `data` (version 3 uses two).
    unsafe {
        syscall!(
            libc::SYS_capset,
            core::ptr::from_mut(&mut header),
            data.as_ptr()
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

/// `pidfd_open(2)`.
pub fn pidfd_open(pid: c_int, flags: c_uint) -> Result<OwnedFd> {
    // SAFETY: `pidfd_open` takes no pointer.
    unsafe { syscall!(libc::SYS_pidfd_open, pid, flags) }.map(owned)
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

/// `struct __user_cap_header_struct`; [`capset`] builds it.
#[repr(C)]
#[derive(Debug)]
struct CapUserHeader {
    /// `_LINUX_CAPABILITY_VERSION_3`.
    version: u32,
    /// 0 for the calling thread.
    pid: c_int,
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
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

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
const SIOCGIFFLAGS: c_ulong = 0x8913;
/// `SIOCSIFFLAGS`.
const SIOCSIFFLAGS: c_ulong = 0x8914;

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ends of a fresh `pipe2(O_CLOEXEC)`, owned.
    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0 as c_int; 2];
        // SAFETY: `fds` has room for the two fds pipe2 writes.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: pipe2 just created this fd; nothing else owns it.
        let r = unsafe { OwnedFd::from_raw_fd(fds[0]) };
        // SAFETY: as above.
        let w = unsafe { OwnedFd::from_raw_fd(fds[1]) };
        (r, w)
    }

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
        assert_eq!(core::mem::size_of::<BorrowedFd<'_>>(), 4);
        assert_eq!(core::mem::size_of::<OwnedFd>(), 4);
        let int = core::mem::size_of::<c_int>() as u32;
        // SAFETY: CMSG_SPACE is arithmetic on its argument.
        let space = unsafe { libc::CMSG_SPACE(int) };
        // SAFETY: CMSG_LEN is arithmetic on its argument.
        let len = unsafe { libc::CMSG_LEN(int) };
        assert_eq!(core::mem::size_of::<CmsgFd>(), space as usize);
        assert_eq!(core::mem::offset_of!(CmsgFd, fd), len as usize - 4);
    }

    #[test]
    fn errors_come_back_as_errno() {
        let bad = c"/nonexistent-stockade-sys-test";
        assert_eq!(chdir(bad), Err(Errno(libc::ENOENT)));
        // SAFETY: -1 is no fd, so closing it cannot affect any owner.
        assert_eq!(unsafe { close_raw(-1) }, Err(Errno(libc::EBADF)));
        assert!(getpid() > 0);
    }

    #[test]
    fn an_fd_sent_arrives_as_the_same_file() {
        let mut sv = [0 as c_int; 2];
        // SAFETY: `sv` has room for the two fds socketpair writes.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                0,
                sv.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0);
        // SAFETY: socketpair just created this fd; nothing else owns it.
        let s0 = unsafe { OwnedFd::from_raw_fd(sv[0]) };
        // SAFETY: as above.
        let s1 = unsafe { OwnedFd::from_raw_fd(sv[1]) };
        let (pr, pw) = pipe();
        send_fd(s0.as_fd(), 7, pw.as_fd()).unwrap();
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cmsg = [0u64; 4];
        // SAFETY: `msghdr` is plain old data; all-zero bytes are a valid value.
        let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
        msg.msg_iov = core::ptr::from_mut(&mut iov);
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = core::mem::size_of_val(&cmsg);
        // SAFETY: `msg` points to live buffers of the sizes it states.
        assert_eq!(unsafe { libc::recvmsg(s1.as_raw_fd(), &mut msg, 0) }, 1);
        assert_eq!(byte[0], 7);
        // SAFETY: `msg.msg_control` points to `cmsg`, which the kernel filled.
        let first = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        assert!(!first.is_null());
        // SAFETY: `first` is the SCM_RIGHTS header the kernel wrote in `cmsg`.
        let data = unsafe { libc::CMSG_DATA(first) };
        // SAFETY: the header carries one fd at `data`, inside `cmsg`; it may be unaligned.
        let got: c_int = unsafe { data.cast::<c_int>().read_unaligned() };
        // SAFETY: the kernel installed `got` for this receive; nothing else owns it.
        let got = unsafe { OwnedFd::from_raw_fd(got) };
        assert_eq!(write(got.as_fd(), b"x"), Ok(1));
        let mut buf = [0u8; 1];
        assert_eq!(read(pr.as_fd(), &mut buf), Ok(1));
        for fd in [s0, s1, pr, pw, got] {
            close(fd).unwrap();
        }
    }

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
        let (r, w) = pipe();
        let raw = w.as_raw_fd();
        drop(w);
        // SAFETY: `raw` was closed by the drop; F_GETFD on it only asks, and the number is
        // not reused in between (this test opens nothing else).
        let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
        assert_eq!(fcntl_getfd(borrowed), Err(Errno(libc::EBADF)));
        // The write end is gone: the reader sees EOF.
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
    fn an_idmapped_mount_attribute_is_refused_before_the_kernel() {
        let r = mount_setattr(CWD, c"/", 0, libc::MOUNT_ATTR_IDMAP, 0, 0);
        assert_eq!(r, Err(Errno(libc::EINVAL)));
    }

    #[test]
    fn an_oversized_seccomp_program_is_refused() {
        let insn = libc::sock_filter {
            code: 0,
            jt: 0,
            jf: 0,
            k: 0,
        };
        let long = [insn; 65_536];
        assert_eq!(seccomp_set_mode_filter(0, &long), Err(Errno(libc::EINVAL)));
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
