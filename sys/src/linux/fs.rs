//! Paths and files: opening, creating, inspecting, and the working directory.

use core::ffi::{CStr, c_int, c_uint};

use libc::open_how;

use super::{new_fd, p};
use crate::Result;
use crate::fd::{BorrowedFd, OwnedFd};

/// `openat(2)`: opens `path` relative to `dirfd` (or [`CWD`](crate::fd::CWD)).
pub fn openat(dirfd: BorrowedFd<'_>, path: &CStr, flags: c_int, mode: c_uint) -> Result<OwnedFd> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    let fd = unsafe { syscall!(libc::SYS_openat, dirfd.as_raw_fd(), p(path), flags, mode) }?;
    // SAFETY: `openat` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
}

/// `openat2(2)`: opens `path` relative to `dirfd` (or [`CWD`](crate::fd::CWD)) as `how` says.
pub fn openat2(dirfd: BorrowedFd<'_>, path: &CStr, how: &open_how) -> Result<OwnedFd> {
    // SAFETY: the kernel reads `path` up to its NUL and `size_of::<open_how>()` bytes from
    // `how`, a live `open_how`; it writes neither.
    let fd = unsafe {
        syscall!(
            libc::SYS_openat2,
            dirfd.as_raw_fd(),
            p(path),
            core::ptr::from_ref(how),
            core::mem::size_of::<open_how>()
        )
    }?;
    // SAFETY: `openat2` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
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

/// `mknodat(2)`. With `S_IFREG` in `mode` it makes an empty regular file and needs no
/// privilege: one system call where `openat(O_CREAT)` and `close` take two.
pub fn mknodat(dirfd: BorrowedFd<'_>, path: &CStr, mode: c_uint, dev: u64) -> Result<()> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    unsafe { syscall!(libc::SYS_mknodat, dirfd.as_raw_fd(), p(path), mode, dev) }.map(drop)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(core::mem::size_of::<open_how>(), 24);
        // `fstat` hands the kernel a `libc::stat` to fill: it must be the kernel's
        // `struct stat` for this architecture (x86_64's own, or the generic one).
        #[cfg(target_arch = "x86_64")]
        assert_eq!(core::mem::size_of::<libc::stat>(), 144);
        #[cfg(target_arch = "aarch64")]
        assert_eq!(core::mem::size_of::<libc::stat>(), 128);
    }
}

/// `readlinkat(AT_FDCWD, path, buf)`: copies the target of the symlink `path` to `buf`
/// (not NUL-terminated, truncated to `buf.len()`) and returns its length.
pub fn readlink(path: &CStr, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the kernel reads `path` up to its NUL and writes at most `buf.len()` bytes
    // to `buf`, a live exclusive borrow; both outlive the call.
    unsafe {
        syscall!(
            libc::SYS_readlinkat,
            libc::AT_FDCWD,
            p(path),
            buf.as_mut_ptr(),
            buf.len()
        )
    }
}

#[cfg(test)]
mod readlink_tests {
    use super::*;
    use crate::Errno;

    #[test]
    fn readlink_reads_a_link_and_truncates_to_the_buffer() {
        let mut buf = [0u8; 64];
        let n = readlink(c"/proc/self/root", &mut buf).unwrap();
        assert_eq!(buf.get(..n), Some(&b"/"[..]));
        let mut short = [0u8; 2];
        // `/proc/self/exe` names a longer path: cut to the buffer.
        assert_eq!(readlink(c"/proc/self/exe", &mut short), Ok(2));
        assert_eq!(short.first(), Some(&b'/'));
        assert_eq!(readlink(c"/", &mut buf), Err(Errno(libc::EINVAL)));
    }
}
