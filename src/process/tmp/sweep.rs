//! What hosts that are gone left in the temporary directory: found and removed by the next
//! host of the same user.
//!
//! # The leftover
//!
//! A command's private `TMPDIR` (`stockade-tmp-*`) and the sandbox's directory holding the
//! `TMPDIR`s (`stockade-sandbox-*`) are removed by the host that made them, when the
//! program ends. A host killed with `SIGKILL` (or one that exits while an unreaped
//! command runs) cannot: its directories stay in the host's temporary directory. On Linux
//! the sandbox dies with its host (`PR_SET_PDEATHSIG`, the plan's `DieWithParent`), so
//! once the host is gone nothing uses them.
//!
//! # Who still uses a directory: a lock
//!
//! The host that makes a directory takes an exclusive `flock` on it ([`Hold`]) and keeps
//! it until the directory is removed; the kernel lets go of it when the process ends,
//! however it ends. The lock belongs to the open file, so it holds against a second open
//! in the same process too. A directory whose lock can be taken belongs to no running
//! host.
//!
//! The first private `TMPDIR` a process makes in a temporary directory starts a sweep of
//! it ([`start`]), on a thread of its own so the spawn does not wait for a large tree to
//! go. For each entry named as stockade names them that is a directory (never through a
//! symlink), owned by this user and closed to everyone else, the sweep tries the lock
//! without waiting; when it gets it, and the name still names that directory, the
//! directory goes (`rmtree`: no symlink followed, no recursion). A sandbox's
//! directory is swept in the same way, entry by entry, and removed only once empty: a
//! `TMPDIR` left on purpose (a program whose end could not be watched) keeps its lock
//! until its host exits.
//!
//! # The window between `mkdir` and the lock
//!
//! A directory exists, unlocked, from its `mkdir` until its maker's `flock`. A sweep that
//! takes the lock in between would remove a directory that is about to be used, so the
//! maker checks what it got ([`claim`]): if the lock is taken, a sweep holds it; if the
//! lock is had but the directory has no link left, a sweep has removed it. Either way the
//! maker leaves that name to the sweep and makes another. A sweep holds the lock until
//! the directory is gone, so no third case exists.
//!
//! Only a temporary directory on a local file system is swept (tmpfs, ext4, xfs, btrfs,
//! f2fs, overlayfs): a lock shows a running host only to processes of the same kernel, and
//! a directory shared with other machines or a VM (NFS, SMB, 9p, virtiofs) may hold the
//! live directories of hosts there. Where a directory cannot be locked, it is not
//! swept either: on such a file system the maker goes on without a lock; on a swept one the
//! spawn fails with the error. Directories made by a stockade that took no lock (before
//! this module) look unused and are removed.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::sys::statfs;

/// The prefix of a command's private `TMPDIR`.
pub(super) const TMP_PREFIX: &str = "stockade-tmp-";
/// The prefix of a sandbox's directory for its commands' `TMPDIR`s.
pub(super) const SANDBOX_PREFIX: &str = "stockade-sandbox-";

/// The lock that says this process still uses a directory it made: held until the
/// directory is removed (dropped after it), or forever ([`Hold::keep`]). The open file
/// holds the lock, and closing it (its last copy: a forked child's copy keeps it) lets go;
/// nothing ever unlocks it explicitly, which would let go for every copy.
#[derive(Debug)]
pub(super) struct Hold(
    // Only kept, never read.
    #[allow(dead_code)] Option<File>,
);

impl Hold {
    /// Keeps the lock until the process exits: the directory is left in place on
    /// purpose while a program may still use it.
    pub(super) fn keep(self) {
        std::mem::forget(self);
    }
}

/// What the maker of a fresh directory got.
#[derive(Debug)]
pub(super) enum Claim {
    /// The directory is this process's.
    Held(Hold),
    /// A sweep took it between its `mkdir` and the lock: make another.
    Lost,
    /// It could not be opened or locked: the error, for the spawn to fail with (the
    /// maker removes the directory).
    Failed(std::io::Error),
}

/// Takes the lock on `path`, a directory this process has just made (see the module
/// docs).
pub(super) fn claim(path: &Path) -> Claim {
    match open_dir(path) {
        Ok(file) => claim_open(file),
        // Made 0700 by this process a moment ago: only a sweep that removed it since
        // makes it disappear.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Claim::Lost,
        Err(e) => Claim::Failed(e),
    }
}

/// As [`claim`], the directory already open.
fn claim_open(file: File) -> Claim {
    match lock(&file) {
        Ok(()) => match file.metadata() {
            Ok(md) if md.nlink() > 0 => Claim::Held(Hold(Some(file))),
            // Removed by a sweep that has let go since.
            Ok(_) => Claim::Lost,
            Err(e) => Claim::Failed(e),
        },
        Err(Errno::EWOULDBLOCK) => Claim::Lost,
        // Where nothing is swept, a directory needs no lock (some network file systems
        // have none: `ENOLCK`).
        Err(_) if !sweepable(&file) => Claim::Held(Hold(None)),
        Err(e) => Claim::Failed(e.into()),
    }
}

/// `flock(LOCK_EX | LOCK_NB)` on `file`.
fn lock(file: &File) -> Result<(), Errno> {
    // SAFETY: `flock` takes an fd and flags and touches no memory; `file` keeps the fd
    // open for the call.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    Errno::result(r).map(drop)
}

/// Whether the directory `dir` is on a local file system, the only kind swept: a lock
/// shows a running host only to processes of the same kernel, and a temporary directory
/// shared with other machines or a VM (NFS, SMB, 9p, virtiofs and other FUSE file
/// systems) may hold the live directories of hosts there.
fn sweepable(dir: &File) -> bool {
    // The magic numbers of `statfs(2)` (nix leaves some out on musl): tmpfs, ext2/3/4, xfs,
    // btrfs, f2fs, overlayfs.
    const LOCAL: &[u64] = &[
        0x0102_1994,
        0xEF53,
        0x5846_5342,
        0x9123_683E,
        0xF2F5_2010,
        0x794C_7630,
    ];
    #[allow(clippy::unnecessary_cast)] // `f_type`'s type differs between libcs
    statfs::fstatfs(dir).is_ok_and(|st| LOCAL.contains(&(st.filesystem_type().0 as u64)))
}

/// Starts a sweep of `root` on a thread of its own, once per process and directory.
pub(super) fn start(root: &Path) {
    static SWEPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        if swept.iter().any(|p| p == root) {
            return;
        }
        swept.push(root.to_path_buf());
    }
    let root = root.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("stockade-tmp-sweep".into())
        .spawn(move || {
            let removed = sweep(&root, true);
            if removed > 0 {
                tracing::debug!(root = %root.display(), removed, "stockade: removed the temporary directories of hosts that are gone");
            }
        });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "stockade: no thread to sweep the temporary directory");
    }
}

/// Removes what hosts that are gone left in `dir` (the host's temporary directory when
/// `top`, else a sandbox's directory); returns how many directories went.
pub(super) fn sweep(dir: &Path, top: bool) -> usize {
    if top && !open_dir(dir).is_ok_and(|d| sweepable(&d)) {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let euid = nix::unistd::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let sandbox = top && name.as_bytes().starts_with(SANDBOX_PREFIX.as_bytes());
        if !sandbox && !name.as_bytes().starts_with(TMP_PREFIX.as_bytes()) {
            continue;
        }
        let path = entry.path();
        // `O_NOFOLLOW | O_DIRECTORY`: a symlink or a file under that name is not ours.
        let Ok(file) = open_dir(&path) else { continue };
        let Ok(md) = file.metadata() else { continue };
        if md.uid() != euid || md.mode() & 0o077 != 0 {
            continue;
        }
        // Held: its host still runs.
        if lock(&file).is_err() {
            continue;
        }
        // Still that directory under that name (not removed and made again meanwhile).
        let same = std::fs::symlink_metadata(&path)
            .is_ok_and(|now| (now.dev(), now.ino()) == (md.dev(), md.ino()));
        if !same {
            continue;
        }
        if sandbox {
            removed += sweep(&path, false);
            // Only when empty: a `TMPDIR` left on purpose is still held.
            if std::fs::remove_dir(&path).is_ok() {
                removed += 1;
            }
        } else if crate::process::rmtree::remove_tree(&path).is_ok() {
            removed += 1;
        }
        // The lock goes only now, with the directory gone.
        drop(file);
    }
    removed
}

/// Opens the directory `path` itself (not through a symlink) for its lock.
fn open_dir(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(root: &Path, name: &str) -> PathBuf {
        let p = root.join(name);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        p
    }

    #[test]
    fn a_held_directory_stays_and_a_free_one_goes() {
        let root = tempfile::tempdir().unwrap();
        let live = made(root.path(), "stockade-tmp-live");
        let gone = made(root.path(), "stockade-tmp-gone");
        std::fs::write(gone.join("left"), b"x").unwrap();
        let Claim::Held(hold) = claim(&live) else {
            panic!("a fresh directory is claimed")
        };
        assert_eq!(sweep(root.path(), true), 1);
        assert!(live.is_dir(), "a held directory was removed");
        assert!(!gone.exists(), "a free directory stayed");
        drop(hold);
        assert_eq!(sweep(root.path(), true), 1);
        assert!(!live.exists());
    }

    #[test]
    fn a_directory_left_on_purpose_stays_locked_until_the_process_exits() {
        let root = tempfile::tempdir().unwrap();
        let left = made(root.path(), "stockade-tmp-left");
        let Claim::Held(hold) = claim(&left) else {
            panic!("a fresh directory is claimed")
        };
        // What `tmp::leave` does with a directory whose program may still run.
        hold.keep();
        assert_eq!(sweep(root.path(), true), 0);
        assert!(left.is_dir());
        // Its lock is this process's until it exits: another open cannot take it.
        let other = open_dir(&left).unwrap();
        assert_eq!(lock(&other), Err(Errno::EWOULDBLOCK));
        std::fs::remove_dir(&left).unwrap();
    }

    #[test]
    fn what_is_not_ours_stays() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"x").unwrap();
        // A symlink under our name, a file, an open directory, another name.
        std::os::unix::fs::symlink(outside.path(), root.path().join("stockade-tmp-link")).unwrap();
        std::fs::write(root.path().join("stockade-tmp-file"), b"x").unwrap();
        let open = root.path().join("stockade-tmp-open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        made(root.path(), "not-stockade-tmp-x");
        // A sandbox's directory inside a sandbox's directory is not one.
        let parent = made(root.path(), "stockade-sandbox-p");
        let nested = made(&parent, "stockade-sandbox-q");
        assert_eq!(sweep(root.path(), true), 0);
        assert!(outside.path().join("keep").exists());
        assert!(root.path().join("stockade-tmp-link").is_symlink());
        assert!(root.path().join("stockade-tmp-file").is_file());
        assert!(open.is_dir());
        assert!(root.path().join("not-stockade-tmp-x").is_dir());
        assert!(nested.is_dir() && parent.is_dir());
    }

    #[test]
    fn a_sandbox_directory_goes_once_its_tmpdirs_are_free() {
        let root = tempfile::tempdir().unwrap();
        let parent = made(root.path(), "stockade-sandbox-p");
        let kept = made(&parent, "stockade-tmp-kept");
        let free = made(&parent, "stockade-tmp-free");
        let Claim::Held(hold) = claim(&kept) else {
            panic!("a fresh directory is claimed")
        };
        assert_eq!(sweep(root.path(), true), 1);
        assert!(!free.exists());
        assert!(kept.is_dir() && parent.is_dir());
        drop(hold);
        assert_eq!(sweep(root.path(), true), 2);
        assert!(!parent.exists());
    }

    #[test]
    fn a_maker_that_a_sweep_got_first_makes_another() {
        let root = tempfile::tempdir().unwrap();
        // A sweep holds it: the maker's lock is refused.
        let held = made(root.path(), "stockade-tmp-held");
        let sweeping = open_dir(&held).unwrap();
        lock(&sweeping).unwrap();
        assert!(matches!(claim(&held), Claim::Lost));
        drop(sweeping);
        // Let go: the maker gets it.
        assert!(matches!(claim(&held), Claim::Held(Hold(Some(_)))));
        // A sweep removed it and let go: the maker gets the lock of a directory with no
        // link left.
        let removed = made(root.path(), "stockade-tmp-removed");
        let file = open_dir(&removed).unwrap();
        std::fs::remove_dir(&removed).unwrap();
        assert!(matches!(claim_open(file), Claim::Lost));
        assert!(matches!(claim(&removed), Claim::Lost));
        // And one nobody touched is the maker's.
        let fresh = made(root.path(), "stockade-tmp-fresh");
        assert!(matches!(claim(&fresh), Claim::Held(Hold(Some(_)))));
    }
}
