//! The walk over `upper/`: each entry classified against the workspace entry of the
//! same path, through directory fds, following no symlink.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, readlinkat};
use nix::sys::stat::{FileStat, fstatat};

use super::fs::{self, MAX_DEPTH, ftype};
use super::{Change, ChangeKind, ChangesError, EntryType, Links, Locked, Lower, MAX_ENTRIES};

/// Classifies every entry of `upper` against `workspace`.
/// Classifies every entry of `upper` against `workspace`; returns the changes and the
/// upper directories without owner access (`chmod 000` in the merged view), each with
/// its mode, parents first.
pub(super) fn walk(
    upper: &OwnedFd,
    workspace: &OwnedFd,
) -> Result<(Vec<Change>, Locked), ChangesError> {
    let mut w = Walk {
        out: Vec::new(),
        links: Links::new(),
        seen: 0,
        path_bytes: 0,
        locked: Vec::new(),
    };
    w.dir(upper, Some(workspace), Path::new(""), 0, false)?;
    // A regular file with more links than the change set holds shares its inode with a
    // file outside it (a hard link the program made to a host file it could read).
    for c in &mut w.out {
        if let Some(key) = c.hardlink {
            if let Some((nlink, seen)) = w.links.get(&key) {
                c.linked_outside = *nlink > *seen as u64;
            }
        }
    }
    Ok((w.out, w.locked))
}

struct Walk {
    out: Vec<Change>,
    links: Links,
    seen: usize,
    /// The bytes of the paths of the entries listed so far ([`super::MAX_PATH_BYTES`]).
    path_bytes: usize,
    locked: Locked,
}

/// Whether an upper entry is a whiteout: a character device 0:0, or a zero-size regular
/// file carrying `user.overlay.whiteout` (overlayfs with `userxattr`).
fn is_whiteout(dir: &OwnedFd, name: &OsStr, st: &FileStat) -> bool {
    match ftype(st) {
        libc::S_IFCHR => st.st_rdev == 0,
        libc::S_IFREG if st.st_size == 0 => fs::open_file_at(dir, name)
            .is_ok_and(|fd| fs::has_xattr(&fd, c"user.overlay.whiteout", true)),
        _ => false,
    }
}

/// Whether an upper directory is opaque (made anew over the workspace's).
fn is_opaque(dir: &OwnedFd) -> bool {
    fs::has_xattr(dir, c"user.overlay.opaque", false)
        || fs::has_xattr(dir, c"trusted.overlay.opaque", false)
}

impl Walk {
    fn too_large(rel: &Path) -> ChangesError {
        ChangesError::TooLarge {
            path: rel.to_path_buf(),
        }
    }

    fn read_err(rel: &Path, e: Errno) -> ChangesError {
        if e == Errno::E2BIG {
            return Self::too_large(rel);
        }
        ChangesError::Read {
            path: rel.to_path_buf(),
            source: fs::io(e),
        }
    }

    fn push(&mut self, c: Change) -> Result<(), ChangesError> {
        if self.out.len() >= MAX_ENTRIES {
            return Err(Self::too_large(&c.path));
        }
        self.out.push(c);
        Ok(())
    }

    /// Walks the upper directory `upper` (`rel` below the root) over the workspace
    /// directory `lower` (`None` where the workspace has none: everything is added).
    /// `opaque`: an ancestor is opaque, so this directory hides the workspace's too
    /// (overlayfs marks only the top of a directory made anew; what is made below it
    /// needs no mark, since the lookup stops at the opaque one).
    fn dir(
        &mut self,
        upper: &OwnedFd,
        lower: Option<&OwnedFd>,
        rel: &Path,
        depth: usize,
        opaque: bool,
    ) -> Result<(), ChangesError> {
        if depth >= MAX_DEPTH {
            return Err(Self::too_large(rel));
        }
        let opaque = opaque || is_opaque(upper);
        let list = fs::entries(upper, MAX_ENTRIES).map_err(|e| Self::read_err(rel, e))?;
        self.seen += list.len();
        if self.seen > MAX_ENTRIES {
            return Err(Self::too_large(rel));
        }
        for (name, st) in &list {
            let path = rel.join(name);
            self.path_bytes += path.as_os_str().len();
            if self.path_bytes > super::MAX_PATH_BYTES {
                return Err(Self::too_large(rel));
            }
            let low = match lower {
                Some(l) => match fstatat(l, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(s) => Some(s),
                    Err(Errno::ENOENT) => None,
                    Err(e) => return Err(Self::read_err(&path, e)),
                },
                None => None,
            };
            self.entry(upper, lower, name, st, low.as_ref(), path, depth, opaque)?;
        }
        // An opaque directory over a workspace directory: what the workspace has here
        // and the change set does not was deleted.
        if let Some(lower) = lower {
            if opaque {
                let have: std::collections::HashSet<&OsStr> =
                    list.iter().map(|(n, _)| n.as_os_str()).collect();
                let lower_list =
                    fs::entries(lower, MAX_ENTRIES).map_err(|e| Self::read_err(rel, e))?;
                for (name, st) in lower_list {
                    if have.contains(name.as_os_str()) {
                        continue;
                    }
                    self.push(deleted(rel.join(&name), &st))?;
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn entry(
        &mut self,
        upper: &OwnedFd,
        lower: Option<&OwnedFd>,
        name: &OsStr,
        st: &FileStat,
        low: Option<&FileStat>,
        path: PathBuf,
        depth: usize,
        opaque: bool,
    ) -> Result<(), ChangesError> {
        if is_whiteout(upper, name, st) {
            // A whiteout over nothing (an entry made and deleted in the change set) is
            // no change.
            return match low {
                Some(l) => self.push(Change {
                    seen: Some(super::seen(st)),
                    ..deleted(path, l)
                }),
                None => Ok(()),
            };
        }
        let entry = EntryType::of(st);
        let lower_entry = low.map(EntryType::of);
        let mode = st.st_mode as u32 & 0o7777;
        if entry == EntryType::File && st.st_nlink > 1 {
            let e = self
                .links
                .entry((st.st_dev as u64, st.st_ino as u64))
                .or_insert((st.st_nlink as u64, 0));
            e.1 += 1;
        }
        let kind = match (lower_entry, low) {
            (None, _) | (_, None) => Some(ChangeKind::Added),
            (Some(l), Some(_)) if l != entry => Some(ChangeKind::TypeChanged),
            (Some(_), Some(l)) => {
                let same_mode = l.st_mode as u32 & 0o7777 == mode;
                match entry {
                    EntryType::Dir => (!same_mode).then_some(ChangeKind::ModeChanged),
                    EntryType::File => {
                        let same = st.st_size == l.st_size
                            && same_file(upper, lower, name)
                                .map_err(|e| Self::read_err(&path, e))?;
                        match (same, same_mode) {
                            (false, _) => Some(ChangeKind::Modified),
                            (true, false) => Some(ChangeKind::ModeChanged),
                            (true, true) => None,
                        }
                    }
                    EntryType::Symlink => {
                        let a = readlinkat(upper, name).map_err(|e| Self::read_err(&path, e))?;
                        let b = lower
                            .map(|l| readlinkat(l, name))
                            .transpose()
                            .map_err(|e| Self::read_err(&path, e))?;
                        (Some(a) != b).then_some(ChangeKind::Modified)
                    }
                    // A FIFO or device over one: always listed (and never applied).
                    EntryType::Special => Some(ChangeKind::Modified),
                }
            }
        };
        let target = if entry == EntryType::Symlink {
            Some(PathBuf::from(
                readlinkat(upper, name).map_err(|e| Self::read_err(&path, e))?,
            ))
        } else {
            None
        };
        if let Some(kind) = kind {
            let size = match entry {
                EntryType::Dir => None,
                EntryType::Symlink => target
                    .as_ref()
                    .map(|t| t.as_os_str().as_bytes().len() as u64),
                _ => Some(st.st_size as u64),
            };
            let hardlink = (entry == EntryType::File && st.st_nlink > 1)
                .then_some((st.st_dev as u64, st.st_ino as u64));
            self.push(Change {
                path: path.clone(),
                kind,
                entry,
                size,
                mode: Some(mode),
                target,
                lower: low.map(lower_of),
                linked_outside: false,
                hardlink,
                // A directory's change time moves with the walk's own grant of access.
                seen: (entry != EntryType::Dir).then(|| super::seen(st)),
            })?;
        }
        if entry == EntryType::Dir {
            // A directory the program took its owner's access from is opened with that
            // access granted for the walk, then given its mode back.
            let locked = st.st_mode as u32 & 0o700 != 0o700;
            if locked {
                fs::grant(upper, name, mode).map_err(|e| Self::read_err(&path, e))?;
                self.locked.push((path.clone(), mode));
            }
            let sub = fs::open_dir_at(upper, name).map_err(|e| Self::read_err(&path, e));
            // Below a directory that replaced a non-directory (or is new), everything is
            // added.
            let lower_sub = match (lower, lower_entry) {
                (Some(l), Some(EntryType::Dir)) => fs::open_dir_at(l, name)
                    .map(Some)
                    .map_err(|e| Self::read_err(&path, e)),
                _ => Ok(None),
            };
            let r = sub.and_then(|sub| {
                let lower_sub = lower_sub?;
                self.dir(&sub, lower_sub.as_ref(), &path, depth + 1, opaque)
            });
            if locked {
                fs::chmod_at(upper, name, mode).map_err(|e| Self::read_err(&path, e))?;
            }
            r?;
        }
        Ok(())
    }
}

/// Whether the upper and lower files `name` hold the same bytes.
fn same_file(upper: &OwnedFd, lower: Option<&OwnedFd>, name: &OsStr) -> Result<bool, Errno> {
    let Some(lower) = lower else {
        return Ok(false);
    };
    let a = fs::open_file_at(upper, name)?;
    let b = fs::open_file_at(lower, name)?;
    fs::same_contents(a, b)
}

fn lower_of(st: &FileStat) -> Lower {
    Lower {
        entry: EntryType::of(st),
        size: st.st_size as u64,
        ino: st.st_ino as u64,
    }
}

/// A deletion of the workspace entry `st` at `path`.
fn deleted(path: PathBuf, st: &FileStat) -> Change {
    let entry = EntryType::of(st);
    Change {
        path,
        kind: ChangeKind::Deleted,
        entry,
        size: (entry != EntryType::Dir).then_some(st.st_size as u64),
        mode: None,
        target: None,
        lower: Some(lower_of(st)),
        linked_outside: false,
        seen: None,
        hardlink: None,
    }
}
