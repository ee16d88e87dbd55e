//! File-descriptor helpers for the change set: opening beneath a directory without
//! following a symlink, listing a directory with `lstat`s, reading bounded, the
//! overlay's xattr marks, and removing a tree without following a symlink.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, fchmodat, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// Directories deeper than this are not walked, removed or applied.
pub(super) const MAX_DEPTH: usize = 256;

/// The file type bits of an `lstat`.
pub(super) fn ftype(st: &FileStat) -> libc::mode_t {
    st.st_mode as libc::mode_t & libc::S_IFMT
}

/// `io::Error` of an errno.
pub(super) fn io(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// Opens the directory `name` of `dir` without following a symlink.
pub(super) fn open_dir_at(dir: &impl AsFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the file `name` of `dir` for reading without following a symlink and without
/// blocking on a FIFO.
pub(super) fn open_file_at(dir: &impl AsFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the directory `rel` (relative, made of plain names) beneath `dir`, following no
/// symlink on the way and never leaving `dir`.
///
/// Linux: one `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`. Elsewhere: each component
/// opened relative to the one before with `O_NOFOLLOW | O_DIRECTORY`.
pub(super) fn open_beneath(dir: &impl AsFd, rel: &Path) -> Result<OwnedFd, Errno> {
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(Errno::EINVAL);
    }
    if rel.as_os_str().is_empty() {
        return open_dir_at(dir, OsStr::new("."));
    }
    beneath(dir, rel)
}

#[cfg(target_os = "linux")]
fn beneath(dir: &impl AsFd, rel: &Path) -> Result<OwnedFd, Errno> {
    use nix::fcntl::{OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS
                | ResolveFlag::RESOLVE_NO_XDEV,
        );
    openat2(dir.as_fd(), rel, how)
}

#[cfg(not(target_os = "linux"))]
fn beneath(dir: &impl AsFd, rel: &Path) -> Result<OwnedFd, Errno> {
    let mut fd = open_dir_at(dir, OsStr::new("."))?;
    for c in rel.components() {
        fd = open_dir_at(&fd, c.as_os_str())?;
    }
    Ok(fd)
}

/// The entries of a directory (not `.`, `..`), each with its `lstat`, sorted by name;
/// `Err(E2BIG)` past `max` entries.
pub(super) fn entries(dir: &impl AsFd, max: usize) -> Result<Vec<(OsString, FileStat)>, Errno> {
    // A new open file description: reading it moves no offset of `dir`'s.
    let mut d = nix::dir::Dir::openat(
        dir.as_fd(),
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
        if out.len() >= max {
            return Err(Errno::E2BIG);
        }
        let name = OsStr::from_bytes(name).to_os_string();
        let st = fstatat(dir.as_fd(), name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        out.push((name, st));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Reads at most `max` bytes of `fd`; `Err(EFBIG)` when it holds more.
pub(super) fn read_bounded(fd: OwnedFd, max: u64) -> Result<Vec<u8>, Errno> {
    let mut data = Vec::new();
    File::from(fd)
        .take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    if data.len() as u64 > max {
        return Err(Errno::EFBIG);
    }
    Ok(data)
}

/// As [`read_bounded`], from the start of `fd`'s file with `pread` (the fd is borrowed:
/// neither its offset nor its life is touched).
pub(super) fn read_bounded_at(fd: &OwnedFd, max: u64) -> Result<Vec<u8>, Errno> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match nix::sys::uio::pread(fd, &mut buf, data.len() as libc::off_t) {
            Ok(0) => return Ok(data),
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if data.len() as u64 > max {
                    return Err(Errno::EFBIG);
                }
            }
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Whether the two open regular files hold the same bytes (their sizes already equal).
pub(super) fn same_contents(a: OwnedFd, b: OwnedFd) -> Result<bool, Errno> {
    let (mut a, mut b) = (File::from(a), File::from(b));
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    let err = |e: io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
    loop {
        let n = fill(&mut a, &mut x).map_err(err)?;
        let m = fill(&mut b, &mut y).map_err(err)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Reads until `buf` is full or the end of the file.
fn fill(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Whether the open file `fd` carries the xattr `name` with the value `y` (an opaque
/// directory) or, with `any`, with any value (a whiteout's `user.overlay.whiteout`).
#[cfg(target_os = "linux")]
pub(super) fn has_xattr(fd: &impl AsFd, name: &std::ffi::CStr, any: bool) -> bool {
    let mut buf = [0u8; 2];
    match stockade_sys::linux::fgetxattr(fd.as_fd().into(), name, &mut buf) {
        Ok(n) if any => n <= buf.len(),
        Ok(1) => buf[0] == b'y',
        Err(stockade_sys::Errno(libc::ERANGE)) => any,
        _ => false,
    }
}

/// macOS: as on Linux (a layer 2 snapshot's whiteouts can take the xattr form there,
/// where a character device needs root).
#[cfg(target_os = "macos")]
pub(super) fn has_xattr(fd: &impl AsFd, name: &std::ffi::CStr, any: bool) -> bool {
    let mut buf = [0u8; 2];
    match stockade_sys::macos::fgetxattr(fd.as_fd().into(), name, &mut buf) {
        Ok(n) if any => n <= buf.len(),
        Ok(1) => buf[0] == b'y',
        Err(stockade_sys::Errno(libc::ERANGE)) => any,
        _ => false,
    }
}

/// Without a binding for the OS's xattr calls, no entry carries the overlay's marks:
/// change sets made there use the character-device whiteout.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(super) fn has_xattr(_fd: &impl AsFd, _name: &std::ffi::CStr, _any: bool) -> bool {
    false
}

/// Removes `name` of `dir` (recursively for a directory) without following a symlink.
/// Missing is fine. For the workspace: no access is ever lent, and a tree deeper than
/// [`MAX_DEPTH`] is an error (`ELOOP`); the change set's own go with [`remove_all`].
pub(super) fn remove_tree(dir: &OwnedFd, name: &OsStr, depth: usize) -> Result<(), Errno> {
    let Some(_) = directory_or_unlink(dir, name)? else {
        return Ok(());
    };
    if depth >= MAX_DEPTH {
        return Err(Errno::ELOOP);
    }
    let sub = open_dir_at(dir, name)?;
    for (n, _) in entries(&sub, usize::MAX)? {
        remove_tree(&sub, &n, depth + 1)?;
    }
    match unlinkat(dir, name, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The `lstat` of `name` of `dir` when it is a directory; anything else there is unlinked
/// (`None`), and nothing there is `None` too.
fn directory_or_unlink(dir: &OwnedFd, name: &OsStr) -> Result<Option<FileStat>, Errno> {
    let st = match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
        Ok(st) => st,
    };
    if ftype(&st) == libc::S_IFDIR {
        return Ok(Some(st));
    }
    match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes `name` of `top` (the change set's directory) whatever its depth, following no
/// symlink and giving a directory without owner access that access first. A directory
/// [`MAX_DEPTH`] levels down is moved up into `top` under a name of its own and removed
/// in turn, so that no walk goes deeper and a chain of any length goes (a program's
/// 300-level chain once made a change set that `discard` could not remove).
pub(super) fn remove_all(top: &OwnedFd, name: &OsStr) -> Result<(), Errno> {
    let mut queue = vec![name.to_owned()];
    let mut moved = 0u64;
    while let Some(n) = queue.pop() {
        remove_deep(top, top, &n, 0, &mut queue, &mut moved)?;
    }
    Ok(())
}

fn remove_deep(
    top: &OwnedFd,
    dir: &OwnedFd,
    name: &OsStr,
    depth: usize,
    queue: &mut Vec<OsString>,
    moved: &mut u64,
) -> Result<(), Errno> {
    let Some(st) = directory_or_unlink(dir, name)? else {
        return Ok(());
    };
    if st.st_mode & 0o700 != 0o700 {
        grant(dir, name, st.st_mode as u32)?;
    }
    if depth >= MAX_DEPTH {
        loop {
            *moved += 1;
            let up = OsString::from(format!(
                ".stockade-discard-{}-{}",
                std::process::id(),
                *moved
            ));
            if fstatat(top, up.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).is_ok() {
                continue;
            }
            nix::fcntl::renameat(dir, name, top, up.as_os_str())?;
            queue.push(up);
            return Ok(());
        }
    }
    let sub = open_dir_at(dir, name)?;
    for (n, _) in entries(&sub, usize::MAX)? {
        remove_deep(top, &sub, &n, depth + 1, queue, moved)?;
    }
    match unlinkat(dir, name, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sets the permission bits (`mode & 0o777`: never a set-id or sticky bit) of the entry
/// `name` of `dir` (the change set's: the caller's), never through a symlink: `name` was
/// a directory at the caller's `lstat`, but a program writing the set meanwhile could
/// have made it a symlink to any host file, whose mode the host would then set (a run
/// still going when a review began once did; `ChangeSet::open` now refuses that, and
/// this holds whatever runs). A symlink there fails (`EOPNOTSUPP`), and what is under
/// it then fails to be read, and says so.
pub(super) fn chmod_at(dir: &impl AsFd, name: &OsStr, mode: u32) -> Result<(), Errno> {
    fchmodat(
        dir.as_fd(),
        name,
        Mode::from_bits_truncate((mode & 0o777) as libc::mode_t),
        FchmodatFlags::NoFollowSymlink,
    )
}

/// Gives the owner access to the directory `name` of `dir` whose mode is `mode`.
pub(super) fn grant(dir: &impl AsFd, name: &OsStr, mode: u32) -> Result<(), Errno> {
    chmod_at(dir, name, mode | 0o700)
}

/// The upper directories without owner access, opened up while a change set is read
/// (`diff`, `apply`) and given their modes back on drop.
pub(super) struct Granted<'a> {
    upper: &'a OwnedFd,
    done: Vec<&'a (std::path::PathBuf, u32)>,
}

impl<'a> Granted<'a> {
    /// Grants access to each of `locked` (parents first). A directory that cannot be
    /// opened up stays as it is: what is under it then fails to be read, and says so.
    pub(super) fn new(upper: &'a OwnedFd, locked: &'a [(std::path::PathBuf, u32)]) -> Self {
        let mut done = Vec::new();
        for l in locked {
            let (Some(parent), Some(name)) = (l.0.parent(), l.0.file_name()) else {
                continue;
            };
            if let Ok(p) = open_beneath(upper, parent) {
                if grant(&p, name, l.1).is_ok() {
                    done.push(l);
                }
            }
        }
        Self { upper, done }
    }
}

impl Drop for Granted<'_> {
    fn drop(&mut self) {
        for l in self.done.iter().rev() {
            let (Some(parent), Some(name)) = (l.0.parent(), l.0.file_name()) else {
                continue;
            };
            if let Ok(p) = open_beneath(self.upper, parent) {
                let _ = chmod_at(&p, name, l.1);
            }
        }
    }
}
