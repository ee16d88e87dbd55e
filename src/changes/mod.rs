//! The change set of a copy-on-write workspace: what a program's runs changed, to
//! review ([`ChangeSet::entries`], [`ChangeSet::diff`]), then apply to the real workspace
//! ([`ChangeSet::apply`]) or throw away ([`ChangeSet::discard`]).
//!
//! # The format
//!
//! A change set is a directory owned by the caller: `stockade-changes.json` (the marker:
//! format version, the workspace, the mode, the start of the first run) and `upper/`, an
//! overlayfs upper directory relative to the workspace root. A file, directory or symlink
//! there is the entry as the program left it; a whiteout (a character device 0:0, or a
//! zero-size file with the xattr `user.overlay.whiteout`) is a deletion; a directory
//! with `user.overlay.opaque` (or `trusted.overlay.opaque`) = `y` replaced the lower
//! one, whose other entries are then deleted. Layer 2's snapshot is turned into the same
//! format after each run, so this module reads `upper/` only. `work/` and `snapshot/`
//! belong to the runs and are removed by [`ChangeSet::discard`].
//!
//! # What is walked
//!
//! The change set, not the workspace: each entry of `upper/` is compared with the
//! workspace entry of the same path (the lower layer) by `fstatat(AT_SYMLINK_NOFOLLOW)`
//! on directory fds, and a file is read only when its size matches the lower's. A
//! workspace of 100 000 files with ten changes costs ten comparisons
//! (`bench/changes_bench.rs`). Nothing is followed: a symlink is an entry of its own,
//! compared by its target text. The walk is bounded ([`MAX_ENTRIES`], a depth of 256).
//!
//! # Apply is a security boundary
//!
//! The change set is the program's work: anything can be in it. See [`ChangeSet::apply`]
//! for what is refused and how the workspace is written.

// The `stat` fields are of other widths on macOS (`st_mode: u16`, `st_dev: i32`): the
// casts that are no-ops on Linux are not elsewhere.
#![allow(clippy::unnecessary_cast)]

mod apply;
mod diff;
mod digest;
mod fs;
use crate::process::names;
mod walk;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, fstat, fstatat};

pub use crate::process::marker::Marker;
pub use apply::{ApplyOptions, ApplyReport, Conflict, ConflictReason, Refusal, RefusalReason};
pub use names::is_git_name;

/// The name of the marker file in a change set directory.
pub const MARKER: &str = "stockade-changes.json";
/// The format version this module reads.
pub const VERSION: u64 = 1;
/// A change set with more entries than this (in `upper/`, or deleted by an opaque
/// directory) is refused as too large.
pub const MAX_ENTRIES: usize = 1_000_000;
/// A change set whose entries' paths are longer than this in all (bytes) is refused as
/// too large: each entry keeps its path, so a program's deep tree of long names (240
/// levels of 255 bytes) once made the host hold over a gigabyte for 20 000 files.
pub const MAX_PATH_BYTES: usize = 64 << 20;
/// The marker is at most this large.
const MARKER_MAX: u64 = 64 << 10;

/// What changed at one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// New: the workspace has nothing at this path.
    Added,
    /// The same kind of entry with other contents (a file's bytes or size, a symlink's
    /// target).
    Modified,
    /// Removed (a whiteout, or an entry of the workspace's directory missing from an
    /// opaque one).
    Deleted,
    /// A file became a directory or a symlink, or the other way round.
    TypeChanged,
    /// The same contents, another mode (overlayfs copies a whole file up on `chmod`).
    ModeChanged,
}

impl ChangeKind {
    /// The lowercase name (`added`, `modified`, `deleted`, `type-changed`,
    /// `mode-changed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Modified => "modified",
            Self::Deleted => "deleted",
            Self::TypeChanged => "type-changed",
            Self::ModeChanged => "mode-changed",
        }
    }
}

/// The kind of file system entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device node (never applied).
    Special,
}

impl EntryType {
    fn of(st: &nix::sys::stat::FileStat) -> Self {
        match fs::ftype(st) {
            libc::S_IFREG => Self::File,
            libc::S_IFDIR => Self::Dir,
            libc::S_IFLNK => Self::Symlink,
            _ => Self::Special,
        }
    }

    /// The lowercase name (`file`, `dir`, `symlink`, `special`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Dir => "dir",
            Self::Symlink => "symlink",
            Self::Special => "special",
        }
    }
}

/// One change of a change set.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Change {
    /// The path relative to the workspace root.
    pub path: PathBuf,
    /// What changed.
    pub kind: ChangeKind,
    /// The entry's type after the change (for [`ChangeKind::Deleted`]: before it).
    pub entry: EntryType,
    /// The size after the change (files and symlinks); for a deletion, the size of what
    /// was deleted; `None` for a directory.
    pub size: Option<u64>,
    /// The permission bits after the change (`st_mode & 0o7777`); `None` for a deletion.
    pub mode: Option<u32>,
    /// A symlink's target after the change.
    pub target: Option<PathBuf>,
    /// The workspace entry this change was made over, as the walk saw it.
    pub(crate) lower: Option<Lower>,
    /// A regular file with hard links that are not in the change set.
    pub(crate) linked_outside: bool,
    /// The (device, inode) of a regular file with more than one link.
    pub(crate) hardlink: Option<(u64, u64)>,
    /// The change set's own entry as the walk saw it (a file's, a symlink's, a
    /// whiteout's): its inode and change time, which `apply` requires unchanged, so that
    /// what it writes is what was listed and diffed.
    pub(crate) seen: Option<Seen>,
}

/// An entry's inode and change time (seconds, nanoseconds).
pub(crate) type Seen = (u64, i64, i64);

/// The [`Seen`] of `st`.
pub(crate) fn seen(st: &nix::sys::stat::FileStat) -> Seen {
    #[allow(clippy::unnecessary_cast)]
    (
        st.st_ino as u64,
        st.st_ctime as i64,
        st.st_ctime_nsec as i64,
    )
}

/// What the workspace had at a changed path when the change set was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lower {
    pub(crate) entry: EntryType,
    pub(crate) size: u64,
    pub(crate) ino: u64,
}

/// An error opening or reading a change set.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChangesError {
    /// A path of the change set could not be opened or read.
    #[error("open {}", path.display())]
    Open {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A run on the change set has a program running: it is reviewed, applied or
    /// discarded once that run has ended.
    #[error("{}: a run on this change set is still going; review it once it has ended", path.display())]
    Busy {
        /// The change set.
        path: PathBuf,
    },
    /// A run wrote the change set after it was opened (between a review and
    /// [`ChangeSet::apply`]): nothing is applied; open and review it again.
    #[error("{}: a run changed this change set since it was opened; nothing applied (open and review it again)", path.display())]
    Changed {
        /// The change set.
        path: PathBuf,
    },
    /// The directory, its marker or its `upper/` is a symlink.
    #[error("{} is a symlink", path.display())]
    Symlink {
        /// The path.
        path: PathBuf,
    },
    /// The change set directory belongs to another user.
    #[error("{} is owned by uid {owner}, not by the caller (uid {uid})", path.display())]
    NotOwned {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The caller's effective uid.
        uid: u32,
    },
    /// The marker is malformed.
    #[error("{}: {reason}", path.display())]
    Marker {
        /// The marker file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
    /// The marker's format version is not [`VERSION`].
    #[error("change set format version {found} is not supported (this is version {VERSION})")]
    Version {
        /// The version found.
        found: u64,
    },
    /// The marker's workspace is missing, not absolute, or not a directory.
    #[error("workspace {}", path.display())]
    Workspace {
        /// The workspace.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The change set has more than [`MAX_ENTRIES`] entries, paths longer than
    /// [`MAX_PATH_BYTES`] in all, or is deeper than 256.
    #[error("change set too large or too deep at {}", path.display())]
    TooLarge {
        /// The path (relative to the workspace) where the limit was reached.
        path: PathBuf,
    },
    /// An entry of `upper/` or of the workspace could not be read.
    #[error("read {}", path.display())]
    Read {
        /// The path relative to the workspace.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Removing the change set failed.
    #[error("remove {}", path.display())]
    Remove {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// An opened, validated and classified change set.
#[derive(Debug)]
pub struct ChangeSet {
    dir: PathBuf,
    marker: Marker,
    dir_fd: OwnedFd,
    upper: OwnedFd,
    workspace: OwnedFd,
    entries: Vec<Change>,
    /// The upper directories without owner access, with their modes, parents first.
    locked: Locked,
    /// Why `upper/` is not the last run's ([`ChangeSet::stale`]).
    stale: Option<String>,
}

impl ChangeSet {
    /// Opens the change set directory `dir`: checks that it, its marker and its `upper/`
    /// are what they claim (not symlinks; the directory owned by the caller; the marker
    /// of version 1 naming an existing directory) and classifies every entry of
    /// `upper/` against the workspace.
    ///
    /// # Errors
    ///
    /// [`ChangesError`]: the directory, marker or `upper/` cannot be opened or is a
    /// symlink, the directory is another user's, the marker is malformed or of another
    /// version, the workspace is gone, an entry cannot be read, or the change set is
    /// larger than [`MAX_ENTRIES`].
    ///
    /// # Platform
    ///
    /// Linux and macOS (elsewhere on Unix the overlay's xattr marks, opaque directories
    /// and the xattr whiteout, are not read).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, ChangesError> {
        let (dir, dir_fd, marker) = Self::checked(dir.as_ref())?;
        if marker.version != VERSION {
            return Err(ChangesError::Version {
                found: marker.version,
            });
        }
        if !marker.workspace.is_absolute() {
            return Err(ChangesError::Workspace {
                path: marker.workspace,
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let workspace = open_workspace(&marker.workspace).map_err(|e| ChangesError::Workspace {
            path: marker.workspace.clone(),
            source: fs::io(e),
        })?;
        let upper_path = dir.join("upper");
        let upper = match fstatat(&dir_fd, "upper", AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if fs::ftype(&st) == libc::S_IFLNK => {
                return Err(ChangesError::Symlink { path: upper_path });
            }
            _ => fs::open_dir_at(&dir_fd, OsStr::new("upper")).map_err(|e| ChangesError::Open {
                path: upper_path.clone(),
                source: fs::io(e),
            })?,
        };
        let (entries, locked) = walk::walk(&upper, &workspace)?;
        let stale = fs::open_file_at(&dir_fd, OsStr::new(crate::process::snapshot::STALE))
            .ok()
            .and_then(|f| fs::read_bounded_at(&f, 4096).ok())
            .map(|t| String::from_utf8_lossy(&t).into_owned());
        Ok(Self {
            dir,
            marker,
            dir_fd,
            upper,
            workspace,
            entries,
            locked,
            stale,
        })
    }

    /// Removes the change set directory `dir` without reading what it holds: for a set
    /// that [`ChangeSet::open`] refuses as too large or too deep (a program can make it
    /// so), or whose workspace is gone. The same checks as `open` come first (not a
    /// symlink, the caller's, a marker that parses, no run's program running), so that it
    /// never removes a directory that is not a change set. Nothing in it is followed, and
    /// a tree of any depth goes.
    ///
    /// # Errors
    ///
    /// As [`ChangeSet::open`]'s checks; [`ChangesError::Remove`] when an entry cannot be
    /// removed.
    pub fn discard_dir(dir: impl AsRef<Path>) -> Result<(), ChangesError> {
        let (dir, dir_fd, _) = Self::checked(dir.as_ref())?;
        remove_set(&dir, &dir_fd)
    }

    /// The checks of [`ChangeSet::open`] before its walk: the directory (opened, not a
    /// symlink, the caller's) and its marker (a regular file that parses), once no run on
    /// the set is closing and none has its program running.
    fn checked(dir: &Path) -> Result<(PathBuf, OwnedFd, Marker), ChangesError> {
        let dir = dir.to_path_buf();
        let open_err = |path: &Path, e: Errno| match e {
            Errno::ELOOP => ChangesError::Symlink {
                path: path.to_path_buf(),
            },
            e => ChangesError::Open {
                path: path.to_path_buf(),
                source: fs::io(e),
            },
        };
        let dir_fd = nix::fcntl::open(
            &dir,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            // `O_DIRECTORY | O_NOFOLLOW` on a symlink: ENOTDIR on Linux.
            Errno::ENOTDIR if is_symlink(&dir) => ChangesError::Symlink { path: dir.clone() },
            e => open_err(&dir, e),
        })?;
        let st = fstat(&dir_fd).map_err(|e| open_err(&dir, e))?;
        let uid = nix::unistd::geteuid().as_raw();
        if st.st_uid != uid {
            return Err(ChangesError::NotOwned {
                path: dir,
                owner: st.st_uid,
                uid,
            });
        }
        let marker_path = dir.join(MARKER);
        let marker = {
            let fd = fs::open_file_at(&dir_fd, OsStr::new(MARKER))
                .map_err(|e| open_err(&marker_path, e))?;
            let mst = fstat(&fd).map_err(|e| open_err(&marker_path, e))?;
            // A run on this change set whose program has ended may still be closing (its
            // sandbox going, its overlay's last reference in this or another host
            // process): what it wrote is complete once that is over.
            // `st_dev` is a `u64` on Linux, an `i32` on macOS (as std's `dev()` casts it).
            #[allow(clippy::unnecessary_cast)]
            let id = (st.st_dev as u64, st.st_ino);
            // Never closed while a run of this process holds the set (its record locks
            // would go with the close): see `MarkerFd`.
            let fd = crate::process::changeset::MarkerFd::new(id, fd);
            let Some(file) = fd.file() else {
                return Err(open_err(&marker_path, Errno::EBADF));
            };
            crate::process::changeset::settle(id, std::os::fd::AsFd::as_fd(file));
            // A program that still runs writes `upper/` while it is read: what a review
            // shows would not be what is applied, and the walk's own changes to `upper/`
            // (the modes it lends a locked directory) would race the program's.
            if crate::process::changeset::running(id, std::os::fd::AsFd::as_fd(file)) {
                return Err(ChangesError::Busy { path: dir });
            }
            if fs::ftype(&mst) != libc::S_IFREG {
                return Err(ChangesError::Marker {
                    path: marker_path,
                    reason: "not a regular file",
                });
            }
            let text =
                fs::read_bounded_at(file, MARKER_MAX).map_err(|e| open_err(&marker_path, e))?;
            crate::process::marker::parse(&text).map_err(|reason| ChangesError::Marker {
                path: marker_path.clone(),
                reason,
            })?
        };
        Ok((dir, dir_fd, marker))
    }

    /// The change set's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The marker's metadata.
    pub fn marker(&self) -> &Marker {
        &self.marker
    }

    /// Set when `upper/` is not what the last run left (layer 2, passthrough and macOS,
    /// which run on a snapshot and write its difference into `upper/` after each run): that
    /// difference could not be written (a tree deeper than 256 levels, a full disk), so
    /// the entries are an earlier run's and the snapshot holds the program's latest work.
    /// The text is the error's. The next run that can write the difference clears it.
    pub fn stale(&self) -> Option<&str> {
        self.stale.as_deref()
    }

    /// The changes, parents before their children, each directory's entries by name.
    pub fn entries(&self) -> &[Change] {
        &self.entries
    }

    /// Removes the change set directory and everything in it (`upper/`, `work/`,
    /// `snapshot/`, the marker), following no symlink: a symlink inside is removed, not
    /// its target.
    ///
    /// # Errors
    ///
    /// [`ChangesError::Remove`] with the first entry that could not be removed.
    pub fn discard(self) -> Result<(), ChangesError> {
        remove_set(&self.dir, &self.dir_fd)
    }
}

/// Removes the change set `dir` (opened and checked as `dir_fd`): its contents through the
/// fd, whatever their depth, then the directory itself by name, if it is still the same
/// directory.
fn remove_set(dir: &Path, dir_fd: &OwnedFd) -> Result<(), ChangesError> {
    let remove_err = |e: Errno| ChangesError::Remove {
        path: dir.to_path_buf(),
        source: fs::io(e),
    };
    for (name, _) in fs::entries(dir_fd, usize::MAX).map_err(remove_err)? {
        fs::remove_all(dir_fd, &name).map_err(|e| ChangesError::Remove {
            path: dir.join(&name),
            source: fs::io(e),
        })?;
    }
    let mine = fstat(dir_fd).map_err(remove_err)?;
    match std::fs::symlink_metadata(dir) {
        Ok(m) if std::os::unix::fs::MetadataExt::ino(&m) == mine.st_ino && m.is_dir() => {
            std::fs::remove_dir(dir).map_err(|e| ChangesError::Remove {
                path: dir.to_path_buf(),
                source: e,
            })
        }
        _ => Ok(()),
    }
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Opens the workspace directory, following no symlink on the way (its path is
/// canonical).
#[cfg(target_os = "linux")]
fn open_workspace(path: &Path) -> Result<OwnedFd, Errno> {
    use nix::fcntl::{OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    openat2(nix::fcntl::AT_FDCWD, path, how)
}

/// Opens the workspace directory, each component with `O_NOFOLLOW` (its path is
/// canonical).
#[cfg(not(target_os = "linux"))]
fn open_workspace(path: &Path) -> Result<OwnedFd, Errno> {
    let root = nix::fcntl::open(
        "/",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let rel = path.strip_prefix("/").map_err(|_| Errno::EINVAL)?;
    fs::open_beneath(&root, rel)
}

/// The upper directories without owner access (`chmod 000` in the merged view), each
/// with its mode, parents first.
pub(crate) type Locked = Vec<(PathBuf, u32)>;

/// Counts, per (device, inode), the links a walk saw of the regular files with more
/// than one.
pub(crate) type Links = HashMap<(u64, u64), (u64, usize)>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The public error variants' shapes and messages (lowercase, no trailing period, the
    /// cause in `source()` and not in the message).
    #[test]
    fn errors_render_their_step_and_keep_the_cause_as_source() {
        use std::error::Error as _;
        let p = PathBuf::from("/s");
        let eio = || io::Error::from_raw_os_error(libc::EIO);
        let cases: Vec<(ChangesError, &str, bool)> = vec![
            (
                ChangesError::Open {
                    path: p.clone(),
                    source: eio(),
                },
                "open /s",
                true,
            ),
            (
                ChangesError::Symlink { path: p.clone() },
                "/s is a symlink",
                false,
            ),
            (
                ChangesError::Changed { path: p.clone() },
                "/s: a run changed this change set since it was opened; nothing applied (open and review it again)",
                false,
            ),
            (
                ChangesError::Busy { path: p.clone() },
                "/s: a run on this change set is still going; review it once it has ended",
                false,
            ),
            (
                ChangesError::NotOwned {
                    path: p.clone(),
                    owner: 1,
                    uid: 2,
                },
                "/s is owned by uid 1, not by the caller (uid 2)",
                false,
            ),
            (
                ChangesError::Marker {
                    path: p.clone(),
                    reason: "no `version`",
                },
                "/s: no `version`",
                false,
            ),
            (
                ChangesError::Version { found: 2 },
                "change set format version 2 is not supported (this is version 1)",
                false,
            ),
            (
                ChangesError::Workspace {
                    path: p.clone(),
                    source: eio(),
                },
                "workspace /s",
                true,
            ),
            (
                ChangesError::TooLarge { path: p.clone() },
                "change set too large or too deep at /s",
                false,
            ),
            (
                ChangesError::Read {
                    path: p.clone(),
                    source: eio(),
                },
                "read /s",
                true,
            ),
            (
                ChangesError::Remove {
                    path: p,
                    source: eio(),
                },
                "remove /s",
                true,
            ),
        ];
        for (e, text, source) in cases {
            assert_eq!(e.to_string(), text);
            assert_eq!(e.source().is_some(), source, "{e}");
        }
    }

    /// The walk lends a locked directory of `upper/` its owner's access and gives its mode
    /// back: never through a symlink the program put in its place meanwhile (the host
    /// file's mode was set once), and never a set-id or sticky bit.
    #[test]
    fn modes_are_never_set_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let host = d.path().join("host-file");
        std::fs::write(&host, "x").unwrap();
        std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&host, d.path().join("d")).unwrap();
        let dir = std::fs::File::open(d.path()).unwrap();
        assert!(fs::chmod_at(&dir, OsStr::new("d"), 0o577).is_err());
        assert!(fs::grant(&dir, OsStr::new("d"), 0o077).is_err());
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&host), 0o644);
        std::fs::create_dir(d.path().join("real")).unwrap();
        fs::chmod_at(&dir, OsStr::new("real"), 0o3577).unwrap();
        assert_eq!(mode(&d.path().join("real")), 0o577);
        fs::grant(&dir, OsStr::new("real"), 0o077).unwrap();
        assert_eq!(mode(&d.path().join("real")), 0o777);
    }
}
