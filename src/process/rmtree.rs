//! Removing a tree that a sandboxed program may have written: without recursion, with at
//! most three fds open, never through a symlink.
//!
//! `std::fs::remove_dir_all` recurses once per directory level on its thread's stack and
//! keeps an fd open per level. A program that leaves a chain of directories some ten
//! thousand deep in its `TMPDIR` (one `mkdir` each) would overflow the stack of the host
//! that removes it, which aborts the whole host process, or run it out of fds.
//!
//! Here the walk holds only the directory it is in and the identities (`st_dev`, `st_ino`)
//! of the directories above it (16 bytes a level). In each directory it unlinks what is not
//! a directory and tries `rmdir` on each subdirectory; one that is not empty is entered
//! (`openat(O_NOFOLLOW | O_DIRECTORY)`). An emptied directory is left through `..`, which
//! must be the directory noted on the way down: a tree moved while it is removed stops the
//! removal with an error instead of leading it elsewhere. The directory left is then found
//! again by the next listing of its parent, empty now, and removed.
//!
//! A program may also take its own rights away (`chmod 000` on a directory of its
//! `TMPDIR`, which on layer 2 and for an unprivileged host is the host user's own): a
//! directory that cannot be opened, or in which an entry cannot be removed, for
//! `EACCES`, is given back `0700` once (`fchmodat` without following a symlink, or
//! `fchmod` of the fd already open) and tried again, as `rm -rf` does. A root host does
//! not meet it (its rights override the modes).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fstat, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// Removes `path` and everything beneath it, as `std::fs::remove_dir_all` does (a symlink
/// or a file at `path` is itself removed, nothing is followed), without its recursion
/// (see the module docs).
///
/// # Errors
///
/// The first error met (`NotFound` when `path` does not exist); an `Other` error when a
/// directory was moved while the tree was removed. What was removed before stays removed.
pub(crate) fn remove_tree(path: &Path) -> io::Result<()> {
    let root = match open_dir_or_open_up(None, path.as_os_str()) {
        Ok(fd) => fd,
        // A symlink or a file: itself.
        Err(Errno::ELOOP | Errno::ENOTDIR) => return std::fs::remove_file(path),
        Err(e) => return Err(e.into()),
    };
    let root_id = identity(root.as_fd())?;
    empty(root, root_id)?;
    // The root itself, if its name still names it.
    let now = std::fs::symlink_metadata(path)?;
    if (now.dev(), now.ino()) != root_id {
        return Err(moved());
    }
    std::fs::remove_dir(path)
}

/// Empties the directory `root` (identity `root_id`).
fn empty(root: OwnedFd, root_id: (u64, u64)) -> io::Result<()> {
    let mut buf = vec![0u8; 32 * 1024];
    // The identities from the root down to `cur`, `cur`'s last.
    let mut ids = vec![root_id];
    let mut cur = root;
    loop {
        match next_full_subdir(cur.as_fd(), &mut buf)? {
            Some(child) => {
                ids.push(identity(child.as_fd())?);
                cur = child;
            }
            None => {
                // `cur` is empty: back up to its parent, which lists it again.
                if ids.len() == 1 {
                    return Ok(());
                }
                ids.pop();
                let parent = openat(
                    cur.as_fd(),
                    "..",
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )?;
                if Some(&identity(parent.as_fd())?) != ids.last() {
                    return Err(moved());
                }
                cur = parent;
            }
        }
    }
}

/// Lists `dir` from its start, as many times as it takes: unlinks each entry that is not
/// a directory, removes each empty subdirectory, and returns the first subdirectory that
/// is not empty, opened, or `None` once a listing finds `dir` empty. (Entries removed while
/// a listing goes on may make it skip others, hence the next listing.)
fn next_full_subdir(dir: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<OwnedFd>> {
    loop {
        nix::unistd::lseek(dir, 0, nix::unistd::Whence::SeekSet)?;
        let mut removed_any = false;
        loop {
            let n = stockade_sys::linux::getdents64(dir.into(), buf)
                .map_err(|e| io::Error::from_raw_os_error(e.raw()))?;
            if n == 0 {
                break;
            }
            let mut records = stockade_sys::linux::dirents(buf.get(..n).unwrap_or_default());
            for (kind, name) in records.by_ref() {
                if name == b"." || name == b".." {
                    continue;
                }
                let name = std::ffi::OsStr::from_bytes(name);
                let is_dir = match kind {
                    libc::DT_DIR => true,
                    libc::DT_UNKNOWN => fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
                    _ => false,
                };
                if !is_dir {
                    match unlinkat_or_open_up(dir, name, UnlinkatFlags::NoRemoveDir) {
                        Ok(()) | Err(Errno::ENOENT) => {
                            removed_any = true;
                            continue;
                        }
                        // A directory after all: as one, below.
                        Err(Errno::EISDIR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                match unlinkat_or_open_up(dir, name, UnlinkatFlags::RemoveDir) {
                    Ok(()) | Err(Errno::ENOENT) => removed_any = true,
                    Err(Errno::ENOTEMPTY | Errno::EEXIST) => {
                        match open_dir_or_open_up(Some(dir), name) {
                            Ok(child) => return Ok(Some(child)),
                            Err(Errno::ENOENT) => removed_any = true,
                            // Replaced by a file or a symlink since.
                            Err(Errno::ELOOP | Errno::ENOTDIR) => {
                                unlink_file(dir, name)?;
                                removed_any = true;
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    // Replaced by a file or a symlink since the listing.
                    Err(Errno::ENOTDIR) => {
                        unlink_file(dir, name)?;
                        removed_any = true;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            // A record that does not fit (the kernel writes none).
            if records.leftover() != 0 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
        }
        if !removed_any {
            return Ok(None);
        }
    }
}

/// Unlinks the non-directory `name` in `dir`, gone already counting as done.
fn unlink_file(dir: BorrowedFd<'_>, name: &std::ffi::OsStr) -> io::Result<()> {
    match unlinkat_or_open_up(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `unlinkat(dir, name, how)`; after `EACCES` (no write or search right on `dir`, which the
/// program took away), once more with `dir` given `0700` through its fd.
fn unlinkat_or_open_up(
    dir: BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    how: UnlinkatFlags,
) -> Result<(), Errno> {
    match unlinkat(dir, name, how) {
        Err(Errno::EACCES) => {
            nix::sys::stat::fchmod(dir, Mode::S_IRWXU)?;
            unlinkat(dir, name, how)
        }
        r => r,
    }
}

/// [`open_dir`]; after `EACCES` (no read or search right on it, which the program took
/// away), once more with the directory given `0700`, the mode changed without following
/// a symlink (`AT_SYMLINK_NOFOLLOW`: the kernel's `fchmodat2`, or the C library's own
/// `O_PATH` way, which refuses a symlink).
fn open_dir_or_open_up(
    dir: Option<BorrowedFd<'_>>,
    name: &std::ffi::OsStr,
) -> Result<OwnedFd, Errno> {
    match open_dir(dir, name) {
        Err(Errno::EACCES) => {
            let at = dir.unwrap_or(nix::fcntl::AT_FDCWD);
            nix::sys::stat::fchmodat(
                at,
                name,
                Mode::S_IRWXU,
                nix::sys::stat::FchmodatFlags::NoFollowSymlink,
            )?;
            open_dir(dir, name)
        }
        r => r,
    }
}

/// Opens the directory `name` (relative to `dir`, or the current directory) itself, never
/// through a symlink.
fn open_dir(dir: Option<BorrowedFd<'_>>, name: &std::ffi::OsStr) -> Result<OwnedFd, Errno> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match dir {
        Some(dir) => openat(dir, name, flags, Mode::empty()),
        None => nix::fcntl::open(name, flags, Mode::empty()),
    }
}

/// `(st_dev, st_ino)` of `fd`.
fn identity(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = fstat(fd)?;
    #[allow(clippy::unnecessary_cast)] // `st_dev` is `u64` here, not everywhere
    Ok((st.st_dev as u64, st.st_ino))
}

fn moved() -> io::Error {
    io::Error::other("a directory was moved while its tree was removed")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread with a small stack: a removal that recursed per level would
    /// overflow it long before the depths used here.
    fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn a_chain_deeper_than_any_stack_goes_with_three_fds() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("deep");
        std::fs::create_dir(&root).unwrap();
        // 20 000 levels, made relative to each other (no path is that long).
        let mut cur = open_dir(None, root.as_os_str()).unwrap();
        for i in 0..20_000 {
            nix::sys::stat::mkdirat(cur.as_fd(), "d", Mode::from_bits_truncate(0o700)).unwrap();
            if i % 1000 == 0 {
                std::fs::write(
                    format!("/proc/self/fd/{}/f", std::os::fd::AsRawFd::as_raw_fd(&cur)),
                    b"x",
                )
                .unwrap();
            }
            cur = open_dir(Some(cur.as_fd()), std::ffi::OsStr::new("d")).unwrap();
        }
        drop(cur);
        let fds_before = std::fs::read_dir("/proc/self/fd").unwrap().count();
        let r = on_small_stack(move || remove_tree(&root).map(|()| root));
        let root = r.unwrap();
        assert!(!root.exists());
        assert!(std::fs::read_dir("/proc/self/fd").unwrap().count() <= fds_before + 1);
    }

    #[test]
    fn nothing_outside_is_followed_and_every_kind_goes() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"x").unwrap();
        let root = d.path().join("tree");
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::create_dir_all(root.join("empty/also")).unwrap();
        std::fs::write(root.join("a/f"), b"x").unwrap();
        std::fs::write(root.join("a/b/c/g"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("a/b/link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("keep"), root.join("flink")).unwrap();
        nix::unistd::mkfifo(&root.join("a/fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(root.join("a/b/sock")).unwrap();
        let r = on_small_stack({
            let root = root.clone();
            move || remove_tree(&root)
        });
        r.unwrap();
        assert!(!root.exists());
        assert!(outside.path().join("keep").exists());
        // A symlink at the path is removed, not followed.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        remove_tree(&link).unwrap();
        assert!(link.symlink_metadata().is_err());
        assert!(outside.path().join("keep").exists());
        // A missing path is NotFound, as with `remove_dir_all`.
        assert_eq!(
            remove_tree(&d.path().join("none")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
