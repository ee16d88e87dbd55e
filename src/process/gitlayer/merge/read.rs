//! Reading the upper layer and the host's `.git` without following a symlink: opening
//! directories, listing them, and comparing a file with the host's.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, fchmodat, fstatat};

/// Files larger than this are taken as changed without comparing them.
pub(super) const COMPARE_MAX: i64 = 1 << 20;

/// Whether the upper file `name` has the same mode and contents as the host's regular
/// file of that name under `host`: a copy-up or rewrite that changed nothing.
pub(super) fn unchanged(upper: &OwnedFd, host: Option<&OwnedFd>, name: &OsStr) -> bool {
    let Some(host) = host else {
        return false;
    };
    let (Ok(u), Ok(h)) = (
        fstatat(upper, name, AtFlags::AT_SYMLINK_NOFOLLOW),
        fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW),
    ) else {
        return false;
    };
    let regular = |st: &FileStat| st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if !regular(&u) || !regular(&h) || u.st_mode != h.st_mode || u.st_size != h.st_size {
        return false;
    }
    if u.st_size > COMPARE_MAX {
        return false;
    }
    let read = |dir: &OwnedFd| -> Option<Vec<u8>> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = openat(dir, name, flags, Mode::empty()).ok()?;
        let mut data = Vec::new();
        io::Read::read_to_end(
            &mut io::Read::take(File::from(fd), COMPARE_MAX as u64 + 1),
            &mut data,
        )
        .ok()?;
        Some(data)
    };
    matches!((read(upper), read(host)), (Some(a), Some(b)) if a == b)
}

/// The host's regular file `name` under `host`, when it has at most `max` bytes.
pub(super) fn read_host(host: &OwnedFd, name: &OsStr, max: usize) -> Option<Vec<u8>> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = openat(host, name, flags, Mode::empty()).ok()?;
    let st = nix::sys::stat::fstat(&fd).ok()?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    bounded(fd, max).ok()
}

/// Why a file of the upper layer was not read into memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unread {
    /// Longer than the bound.
    TooLarge,
    /// Reading failed with this errno.
    Failed(Errno),
}

/// Reads `fd` to its end, refusing more than `max` bytes: never allocates more than what
/// was read (plus the vector's doubling), whatever size the file claims.
pub(super) fn bounded(fd: OwnedFd, max: usize) -> Result<Vec<u8>, Unread> {
    let mut data = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    io::Read::read_to_end(&mut io::Read::take(File::from(fd), limit), &mut data)
        .map_err(|e| Unread::Failed(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))?;
    if data.len() > max {
        return Err(Unread::TooLarge);
    }
    Ok(data)
}

/// Opens an absolute path as a directory without following any symlink on the way.
pub(super) fn open_beneath_root(path: &Path) -> Result<OwnedFd, Errno> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    openat2(nix::fcntl::AT_FDCWD, path, how)
}

pub(super) fn open_dir_at(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Opens a directory of the upper layer, first giving its owner access if the program
/// took it away (`mkdir -m 000`): the layer is ours to read, and about to be removed.
pub(super) fn open_upper_dir(
    upper: &OwnedFd,
    name: &OsStr,
    st: &FileStat,
) -> Result<OwnedFd, Errno> {
    if st.st_mode & 0o700 != 0o700 {
        fchmodat(
            upper,
            name,
            Mode::from_bits_truncate((st.st_mode & 0o777 | 0o700) as libc::mode_t),
            FchmodatFlags::FollowSymlink,
        )?;
    }
    open_dir_at(upper, name)
}

/// The entries of a directory (not `.`, `..`), each with its `lstat`, sorted by name.
pub(super) fn entries(dir: &OwnedFd) -> Result<Vec<(OsString, FileStat)>, Errno> {
    // A new open file description of its own: reading it moves no offset of `dir`'s.
    let mut d = nix::dir::Dir::openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut out = Vec::new();
    for e in d.iter() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name).to_os_string();
        let st = fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        out.push((name, st));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Whether overlayfs marked an upper directory opaque (made anew over a deleted one).
pub(super) fn is_opaque(dir: &OwnedFd) -> bool {
    let mut buf = [0u8; 2];
    matches!(
        stockade_sys::linux::fgetxattr(dir.as_fd().into(), c"user.overlay.opaque", &mut buf),
        Ok(1) if buf[0] == b'y'
    )
}
