//! The shared Landlock layer of a split ruleset ([`SplitRules`]): built once per sandbox,
//! checked before each command, rebuilt when it may be stale.
//!
//! # Why
//!
//! Layer 2 on a root host grants the read-only roots entry by entry around every private
//! entry: hundreds of rules (286 on the machine of `bench/README.md`). Opening, stating,
//! adding and closing each of them for every command cost 1.1–1.6 ms per spawn there. A ruleset fd is a kernel
//! object that any number of children may enter with `landlock_restrict_self` (each gets
//! a domain of its own), so the entry-by-entry part is built once and shared; each command
//! still builds its own small layer (its `TMPDIR`, its terminals), and the child enters
//! both ([`SplitRules`] says why the two together grant exactly the plan's rules).
//!
//! # Staleness, and why it can only deny
//!
//! Rules name inodes, not paths. Rebuilding per command re-resolved each path, so a file
//! replaced by rename (`/etc/passwd` after `useradd`) was granted again to the next
//! command; a cached layer still names the old inode. Under a directory the layer lists,
//! an inode it does not name is denied (every right is handled), so a stale layer denies
//! what is new. It keeps granting what it named, though: a granted file moved elsewhere
//! and made private stays readable until the next check sees its directory change (and on
//! NFS or FUSE, whose attribute caches may hide a change for a while, until they show it),
//! the same as a file made private after the walk. To keep granting what a fresh
//! build grants, the layer is rebuilt whenever a path it names may resolve to another
//! inode now, checked before each command with one `stat` per watched path:
//!
//! - each directory granted entry by entry ([`SplitRules::listed`]): its `st_dev`,
//!   `st_ino`, `st_mtime` and `st_ctime` (nanoseconds). Creating, removing or renaming an
//!   entry in it changes its times, and replacing the directory itself changes its inode.
//!   Its entries (the other rules of the entry-by-entry grants) need no check of their own.
//! - every other path of the layer (the workspace, writable paths, read-only roots
//!   granted whole, devices, `/proc`, `/dev/pts`): its `st_dev` and `st_ino`, the inode a
//!   fresh build would name. A path that does not exist is recorded as such: if it
//!   appears, the layer is rebuilt to name it.
//! - the sandbox's directory for its commands' `TMPDIR`s, which the caller names at each
//!   command ([`SharedLayer::current`]): its path and inode. A sandbox that had to make a
//!   new one (the old one was removed beneath it) gets a layer that names the new one.
//!
//! # The temporary directory
//!
//! Each command's `TMPDIR` must lie beneath a directory this layer grants read-write (the
//! command's own layer then narrows the grant to its `TMPDIR`). That directory is the
//! sandbox's own, made `0700` in the host's temporary directory by the process layer, not
//! the host's temporary directory itself: Landlock follows mounts, so a read-only root
//! that the host bind-mounts beneath a directory granted here would show its private
//! entries to the commands (their own layer grants the read-only roots whole). Nothing but
//! the sandbox's commands' `TMPDIR`s lies in the sandbox's directory.
//!
//! A change within the file system's timestamp granularity of the build could leave a
//! directory's times unchanged (git's "racy" index entries). So the stamps are taken
//! before the paths are opened, and a build during which some listed directory had
//! changed less than [`RACY`] before is not trusted: the next command builds again, until
//! one build sees every listed directory settled. On this machine some 15 listed
//! directories and 15 other paths: about 25 µs per command.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::landlock;
use crate::error::LandlockBuildError;
use crate::plan::SplitRules;

/// How long a listed directory must have been unchanged when the layer is built for the
/// build to be trusted: the coarsest timestamp granularity of a file system the host may
/// have under its read-only roots (FAT's 2 s; ext4, XFS, Btrfs and tmpfs stamp nanoseconds
/// from a clock that ticks every few milliseconds). A change after the build is stamped at
/// least its time less the granularity, so later than a time older than that.
pub const RACY: Duration = Duration::from_secs(2);

/// What identifies a watched path: its inode and, for a listed directory, its times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    /// `(st_mtime, st_mtime_nsec, st_ctime, st_ctime_nsec)`, zero when not compared.
    times: [i64; 4],
}

/// A path whose change makes the layer stale.
#[derive(Debug)]
struct Watched {
    path: PathBuf,
    /// A directory granted entry by entry: its times count, not only its inode.
    listed: bool,
}

impl Watched {
    /// The path's stamp now; `None` when it cannot be stated (it does not exist).
    fn stamp(&self) -> Option<Stamp> {
        let md = std::fs::metadata(&self.path).ok()?;
        let times = if self.listed {
            [md.mtime(), md.mtime_nsec(), md.ctime(), md.ctime_nsec()]
        } else {
            [0; 4]
        };
        Some(Stamp {
            dev: md.dev(),
            ino: md.ino(),
            times,
        })
    }
}

/// One build of the shared layer.
#[derive(Debug)]
pub struct Built {
    fd: OwnedFd,
    /// One per [`SharedLayer`] watched path, in order, taken before the build.
    stamps: Vec<Option<Stamp>>,
    /// The sandbox's directory for the `TMPDIR`s that this build grants, and its stamp.
    tmp_parent: Watched,
    tmp_parent_stamp: Option<Stamp>,
    /// Some listed directory changed within [`RACY`] of the build: never reused.
    racy: bool,
}

impl Built {
    /// The ruleset fd, for `landlock_restrict_self` in the child (close-on-exec; open while
    /// this `Built` lives).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The shared layer of one sandbox and its latest build.
#[derive(Debug)]
pub struct SharedLayer {
    split: SplitRules,
    watched: Vec<Watched>,
    latest: Mutex<Option<Arc<Built>>>,
}

std::thread_local! {
    /// Builds made on this thread (the spawning one: [`SharedLayer::current`] runs there).
    static BUILDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many shared layers this thread has built: for tests and benchmarks, which spawn
/// from one thread and compare the count before and after.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn builds_on_this_thread() -> u64 {
    BUILDS.with(std::cell::Cell::get)
}

impl SharedLayer {
    /// The layer of `split`, not built yet (the first command builds it).
    pub fn new(split: &SplitRules) -> SharedLayer {
        let listed = |p: &Path| split.listed.iter().any(|d| d == p);
        let mut watched: Vec<Watched> = split
            .listed
            .iter()
            .map(|d| Watched {
                path: d.clone(),
                listed: true,
            })
            .collect();
        let paths = std::iter::once(&split.shared.workspace)
            .chain(split.shared.rules.iter().map(|r| &r.path));
        for path in paths {
            // An entry of a listed directory changes that directory's times.
            if listed(path) || path.parent().is_some_and(listed) {
                continue;
            }
            if !watched.iter().any(|w| w.path == *path) {
                watched.push(Watched {
                    path: path.clone(),
                    listed: false,
                });
            }
        }
        SharedLayer {
            split: split.clone(),
            watched,
            latest: Mutex::new(None),
        }
    }

    /// The layer for the next command, whose `TMPDIR` lies in `tmp_parent` (the sandbox's
    /// own directory in [`SplitRules::tmp_root`]): the latest build if it was made for
    /// that directory and every watched path is as it was then, else a new one. A failed
    /// build leaves the latest one in place, and the next command builds again.
    ///
    /// # Errors
    ///
    /// As [`landlock::build`].
    pub fn current(&self, tmp_parent: &Path) -> Result<Arc<Built>, LandlockBuildError> {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(built) = latest {
            if !built.racy
                && built.tmp_parent.path == tmp_parent
                && built.tmp_parent.stamp() == built.tmp_parent_stamp
                && self.unchanged(&built.stamps)
            {
                return Ok(built);
            }
        }
        let built = Arc::new(self.build(tmp_parent)?);
        *self.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&built));
        Ok(built)
    }

    fn unchanged(&self, stamps: &[Option<Stamp>]) -> bool {
        self.watched
            .iter()
            .zip(stamps)
            .all(|(w, old)| w.stamp() == *old)
    }

    /// Stamps every watched path, then builds the ruleset: a change after a stamp shows at
    /// the next check.
    fn build(&self, tmp_parent: &Path) -> Result<Built, LandlockBuildError> {
        let start = SystemTime::now();
        let stamps: Vec<Option<Stamp>> = self.watched.iter().map(Watched::stamp).collect();
        let tmp_parent = Watched {
            path: tmp_parent.to_path_buf(),
            listed: false,
        };
        let tmp_parent_stamp = tmp_parent.stamp();
        let settled = start
            .checked_sub(RACY)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or((i64::MIN, 0), |d| {
                (
                    i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                    i64::from(d.subsec_nanos()),
                )
            });
        let racy = self.watched.iter().zip(&stamps).any(|(w, s)| {
            w.listed
                && s.is_some_and(|s| {
                    (s.times[0], s.times[1]) >= settled || (s.times[2], s.times[3]) >= settled
                })
        });
        let (fd, _) = landlock::build(&self.split.shared_with(&tmp_parent.path))?.into_parts();
        // Kept for the sandbox's life: never as 0, 1 or 2 (when the host had a standard
        // stream closed), where a command's stdio step would replace it before its
        // `landlock_restrict_self`.
        let fd = if fd.as_raw_fd() <= 2 {
            nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3))
                .map(|raw| {
                    // SAFETY: F_DUPFD_CLOEXEC returned a new descriptor that nothing else
                    // owns.
                    unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) }
                })
                .map_err(|e| LandlockBuildError::CreateRuleset(Box::new(std::io::Error::from(e))))?
        } else {
            fd
        };
        BUILDS.with(|b| b.set(b.get() + 1));
        Ok(Built {
            fd,
            stamps,
            tmp_parent,
            tmp_parent_stamp,
            racy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Grant, RulesetSpec};

    fn layer(root: &Path) -> SharedLayer {
        let listed = root.join("listed");
        let spec = RulesetSpec::new(root.join("ws"))
            .with(&listed, Grant::ListDir)
            .with(listed.join("a"), Grant::ReadExec)
            .with(root.join("whole"), Grant::ReadExec);
        SharedLayer::new(&SplitRules {
            shared: spec.clone(),
            listed: vec![listed],
            command: spec,
            tmp_root: root.to_path_buf(),
        })
    }

    #[test]
    fn watches_listed_dirs_and_paths_outside_them_once() {
        let l = layer(Path::new("/r"));
        let w: Vec<(&Path, bool)> = l
            .watched
            .iter()
            .map(|w| (w.path.as_path(), w.listed))
            .collect();
        assert_eq!(
            w,
            [
                (Path::new("/r/listed"), true),
                (Path::new("/r/ws"), false),
                (Path::new("/r/whole"), false),
            ]
        );
    }

    #[test]
    fn stamps_tell_a_replaced_entry_and_a_replaced_path() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        for d in ["ws", "listed", "whole"] {
            std::fs::create_dir(r.join(d)).unwrap();
        }
        std::fs::write(r.join("listed/a"), "a").unwrap();
        let l = layer(r);
        let stamps: Vec<_> = l.watched.iter().map(Watched::stamp).collect();
        assert!(l.unchanged(&stamps));
        // A rename over an entry of a listed directory: its times change (nanoseconds,
        // here within the same coarse tick at worst: then the build would be racy).
        std::thread::sleep(Duration::from_millis(50));
        std::fs::write(r.join("listed/b"), "b").unwrap();
        std::fs::rename(r.join("listed/b"), r.join("listed/a")).unwrap();
        assert!(!l.unchanged(&stamps));
        let stamps: Vec<_> = l.watched.iter().map(Watched::stamp).collect();
        // A path granted whole, replaced: another inode.
        std::fs::rename(r.join("whole"), r.join("old")).unwrap();
        std::fs::create_dir(r.join("whole")).unwrap();
        assert!(!l.unchanged(&stamps));
        let stamps: Vec<_> = l.watched.iter().map(Watched::stamp).collect();
        // A missing path that appears.
        std::fs::remove_dir(r.join("whole")).unwrap();
        let gone: Vec<_> = l.watched.iter().map(Watched::stamp).collect();
        assert_ne!(gone, stamps);
        assert_eq!(gone[2], None);
        std::fs::create_dir(r.join("whole")).unwrap();
        assert!(!l.unchanged(&gone));
    }
}
