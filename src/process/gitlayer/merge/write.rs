//! Writing the host's `.git`: directories made or replaced, entries removed, files copied
//! under a temporary name and then linked (objects) or renamed (everything else) into place.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, fchmod, fchmodat, fstat, fstatat, futimens};
use nix::sys::time::TimeSpec;
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};

use super::GitDropReason;
use super::classify::{Area, MAX_DEPTH, R, failed};
use super::read::{entries, open_dir_at, unchanged};

/// The host directory `name` under `host`, made (with the layer's mode, owner access
/// kept) if missing. In a refs area a non-directory there is replaced (the program made a
/// branch `a` into a directory `a/`); in the object database it is an error.
pub(super) fn host_dir(
    host: &OwnedFd,
    name: &OsStr,
    st: &FileStat,
    area: Area,
) -> Result<OwnedFd, Errno> {
    match fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(h) if h.st_mode & libc::S_IFMT == libc::S_IFDIR => {}
        Ok(_) if area == Area::Refs => {
            unlinkat(host, name, UnlinkatFlags::NoRemoveDir)?;
            mkdir(host, name, st)?;
        }
        Ok(_) => return Err(Errno::ENOTDIR),
        Err(Errno::ENOENT) => mkdir(host, name, st)?,
        Err(e) => return Err(e),
    }
    open_dir_at(host, name)
}

/// Makes the host directory `name` with the layer's mode, owner access kept and no write
/// for others; group write only where the host's parent has it (a repository shared with
/// `core.sharedRepository = group`): a program's `chmod 777` on a new refs directory
/// does not reach the host.
pub(super) fn mkdir(host: &OwnedFd, name: &OsStr, st: &FileStat) -> Result<(), Errno> {
    let group_write = nix::sys::stat::fstat(host).map_or(0, |p| p.st_mode & 0o020);
    let mode = st.st_mode & (0o755 | group_write) | 0o700;
    let mode = Mode::from_bits_truncate(mode as libc::mode_t);
    match nix::sys::stat::mkdirat(host, name, mode) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes the host entry `name` (recursively for a directory). Missing is fine.
pub(super) fn remove(host: &OwnedFd, name: &OsStr, depth: usize) -> Result<(), Errno> {
    match fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e),
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            if depth >= MAX_DEPTH {
                return Err(Errno::ELOOP);
            }
            let dir = open_dir_at(host, name)?;
            for (n, _) in entries(&dir)? {
                remove(&dir, &n, depth + 1)?;
            }
            unlinkat(host, name, UnlinkatFlags::RemoveDir)
        }
        Ok(_) => unlinkat(host, name, UnlinkatFlags::NoRemoveDir),
    }
}

/// Names for the merge's own temporary object files, unique within the process.
pub(super) static TEMP: AtomicU64 = AtomicU64::new(0);

/// Copies the upper file `name` into `host`. In the object database a name the host has
/// already keeps the host's file, and a new one appears at once, whole (written under a
/// temporary name, then linked); elsewhere the file is written as `<name>.lock` and
/// renamed over the host's (a directory there, in a refs area, is removed first). Returns
/// whether the host changed.
pub(super) fn write_file(
    upper: &OwnedFd,
    host: &OwnedFd,
    name: &OsStr,
    area: Option<Area>,
) -> R<bool> {
    let objects = area == Some(Area::Objects);
    if objects && fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok() {
        // Git copies an object it writes again only to refresh its time (a copy-up);
        // anything else is a rewrite.
        return if unchanged(upper, Some(host), name) {
            Ok(false)
        } else {
            Err(GitDropReason::ObjectChange)
        };
    }
    let src = open_upper_file(upper, name)?;
    let st = fstat(&src).map_err(failed)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(GitDropReason::NotAFile);
    }
    let tmp: OsString = if objects {
        let n = TEMP.fetch_add(1, Ordering::Relaxed);
        format!("tmp_stockade_{}_{n}", std::process::id()).into()
    } else {
        let mut t = name.to_os_string();
        t.push(".lock");
        t
    };
    let dst = match openat(
        host,
        tmp.as_os_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    ) {
        Ok(fd) => fd,
        Err(Errno::EEXIST) if !objects => return Err(GitDropReason::Locked),
        Err(e) => return Err(failed(e)),
    };
    // What git itself syncs by default (`core.fsync`: packs and their metadata, not loose
    // objects, refs or the index, which journalling file systems order on their own).
    let sync = objects && (name.as_bytes().starts_with(b"pack-") || name == "multi-pack-index");
    let r = fill(src, dst, host, &st, sync).and_then(|()| {
        if objects {
            publish_object(host, &tmp, name)
        } else {
            replace(host, &tmp, name, area)
        }
    });
    if r.is_err() || objects {
        let _ = unlinkat(host, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    r.map(|()| true).map_err(failed)
}

/// Writes `data`, the bytes of the upper file `name` that the merge read once and checked,
/// into `host` as `<name>.lock`, renamed over the host's file (never an object), with the
/// mode and times of `st`, the upper file's `fstat` at that read. Returns whether the host
/// changed: bytes equal to the host's file of the same mode are left as they are.
pub(super) fn write_bytes(
    host: &OwnedFd,
    name: &OsStr,
    data: &[u8],
    st: &FileStat,
    area: Option<Area>,
) -> R<bool> {
    if same_as_host(host, name, data, st) {
        return Ok(false);
    }
    let mut tmp = name.to_os_string();
    tmp.push(".lock");
    let dst = match openat(
        host,
        tmp.as_os_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    ) {
        Ok(fd) => fd,
        Err(Errno::EEXIST) => return Err(GitDropReason::Locked),
        Err(e) => return Err(failed(e)),
    };
    let mut dst = File::from(dst);
    let r = io::Write::write_all(&mut dst, data)
        .map_err(errno)
        .and_then(|()| finish(&dst, host, st))
        .and_then(|()| replace(host, &tmp, name, area));
    if r.is_err() {
        let _ = unlinkat(host, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    r.map(|()| true).map_err(failed)
}

/// Whether the host's regular file `name` has `data` and the mode of `st` already.
fn same_as_host(host: &OwnedFd, name: &OsStr, data: &[u8], st: &FileStat) -> bool {
    let Ok(h) = fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
        return false;
    };
    if h.st_mode != st.st_mode || usize::try_from(h.st_size).ok() != Some(data.len()) {
        return false;
    }
    super::read::read_host(host, name, data.len()).is_some_and(|h| h == data)
}

/// Reads the regular file `name` of the upper layer once, whole, refusing more than `max`
/// bytes: the bytes the merge checks and then writes, and the `fstat` of the same open
/// (whose mode and times the host's copy gets).
pub(super) fn load(upper: &OwnedFd, name: &OsStr, max: usize) -> R<(Vec<u8>, FileStat)> {
    let fd = open_upper_file(upper, name)?;
    let st = fstat(&fd).map_err(failed)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(GitDropReason::NotAFile);
    }
    match super::read::bounded(fd, max) {
        Ok(data) => Ok((data, st)),
        Err(super::read::Unread::TooLarge) => Err(GitDropReason::TooLarge),
        Err(super::read::Unread::Failed(e)) => Err(failed(e)),
    }
}

/// Opens a regular file of the upper layer for reading (owner read access given back if
/// the program removed it), never following a symlink or blocking on a fifo.
pub(super) fn open_upper_file(upper: &OwnedFd, name: &OsStr) -> R<OwnedFd> {
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    match openat(upper, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::EACCES) => {
            let st = fstatat(upper, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(failed)?;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(GitDropReason::NotAFile);
            }
            fchmodat(
                upper,
                name,
                Mode::from_bits_truncate((st.st_mode & 0o777 | 0o400) as libc::mode_t),
                FchmodatFlags::FollowSymlink,
            )
            .map_err(failed)?;
            openat(upper, name, flags, Mode::empty()).map_err(failed)
        }
        Err(Errno::ELOOP) => Err(GitDropReason::NotAFile),
        Err(e) => Err(failed(e)),
    }
}

/// Copies `src` into `dst` (and, with `sync`, makes the data durable before the file gets
/// its name), then gives `dst` the source's mode (without setuid, setgid and sticky bits,
/// without write for others, and with write for group only where `dir`, the host
/// directory it lands in, has it: a `core.sharedRepository = group` repository, whose
/// reflogs other members append to) and times.
pub(super) fn fill(
    src: OwnedFd,
    dst: OwnedFd,
    dir: &OwnedFd,
    st: &FileStat,
    sync: bool,
) -> Result<(), Errno> {
    let (mut src, mut dst) = (File::from(src), File::from(dst));
    io::copy(&mut src, &mut dst).map_err(errno)?;
    if sync {
        dst.sync_data().map_err(errno)?;
    }
    finish(&dst, dir, st)
}

fn errno(e: io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// Gives the written file `dst` the source's mode and times (see [`fill`]).
fn finish(dst: &File, dir: &OwnedFd, st: &FileStat) -> Result<(), Errno> {
    let group_write = nix::sys::stat::fstat(dir).map_or(0, |d| d.st_mode & 0o020);
    fchmod(
        dst,
        Mode::from_bits_truncate((st.st_mode & (0o755 | group_write)) as libc::mode_t),
    )?;
    futimens(
        dst,
        &TimeSpec::new(st.st_atime, st.st_atime_nsec),
        &TimeSpec::new(st.st_mtime, st.st_mtime_nsec),
    )
}

/// Makes the written object `tmp` appear as `name` unless the host has that name by now:
/// `link` fails on an existing name. File systems without hard links get a rename.
pub(super) fn publish_object(host: &OwnedFd, tmp: &OsStr, name: &OsStr) -> Result<(), Errno> {
    match linkat(host, tmp, host, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(Errno::EPERM | Errno::EOPNOTSUPP | Errno::EMLINK) => renameat(host, tmp, host, name),
        Err(e) => Err(e),
    }
}

/// Renames the lock file `tmp` over `name`. In a refs area a directory there (the program
/// made a directory `a/` into a branch `a`) is removed first.
pub(super) fn replace(
    host: &OwnedFd,
    tmp: &OsStr,
    name: &OsStr,
    area: Option<Area>,
) -> Result<(), Errno> {
    if area == Some(Area::Refs) {
        if let Ok(h) = fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            if h.st_mode & libc::S_IFMT == libc::S_IFDIR {
                remove(host, name, 0)?;
            }
        }
    }
    renameat(host, tmp, host, name)
}
