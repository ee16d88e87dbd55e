//! Mounts: the classic `mount(2)` family and the new mount API (`open_tree`, `fsopen`, …).

use core::ffi::{CStr, c_int, c_uint, c_ulong};

use libc::mount_attr;

use super::{new_fd, op, p};
use crate::fd::{BorrowedFd, OwnedFd};
use crate::{Errno, Result};

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
    let fd = unsafe { syscall!(libc::SYS_open_tree, dirfd.as_raw_fd(), p(path), flags) }?;
    // SAFETY: `open_tree` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
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
    let fd = unsafe { syscall!(libc::SYS_fsopen, p(fstype), flags) }?;
    // SAFETY: `fsopen` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
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
    let fd = unsafe { syscall!(libc::SYS_fsmount, fsfd.as_raw_fd(), flags, attr_flags) }?;
    // SAFETY: `fsmount` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fd::CWD;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(core::mem::size_of::<mount_attr>(), 32);
    }

    #[test]
    fn an_idmapped_mount_attribute_is_refused_before_the_kernel() {
        let r = mount_setattr(CWD, c"/", 0, libc::MOUNT_ATTR_IDMAP, 0, 0);
        assert_eq!(r, Err(Errno(libc::EINVAL)));
    }
}
