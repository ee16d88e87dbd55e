//! Layer 2's answer to `guard_names` under `.git`: a snapshot of each writable root's
//! `.git` control files before the run, restored after it.
//!
//! Layer 2 has no namespaces, so no copy-on-write layer: the program writes the host's
//! `.git` itself. What git would run or follow from there is snapshotted before the
//! program starts: `config`, `config.worktree`, `commondir`, `gitdir`, `hooks/`,
//! `info/`, the legacy remotes `remotes/` and `branches/`, and an unfinished rebase's or
//! sequencer's state `rebase-merge/`, `rebase-apply/`, `sequencer/` (whole trees),
//! `objects/info/alternates` and `objects/info/http-alternates`, the same names in every
//! directory under `worktrees/` and `modules/`, a `.git` that is a `gitdir:` file, and
//! the names at the top of `.git`. Once every process of the run has ended (the init's
//! pidfd is readable: the init, a child subreaper, has killed and reaped every descendant
//! before it exits), each of them is compared with the snapshot and put back: a changed
//! file is rewritten with the snapshot's bytes and mode, a removed one recreated, a new
//! one removed, a directory under `worktrees/` or `modules/` the host did not have
//! removed whole, and so is anything new at the top of `.git` that is no data of git's
//! (what the full layer merges: objects, refs, logs, the index, `HEAD`, the state files;
//! not a bare repository planted there, nor a lock). Each restoration is a [`GitDrop`]
//! with [`GitDropReason::Restored`].
//!
//! The host is written as the merge writes it: the root is opened with
//! `RESOLVE_NO_SYMLINKS`, every directory below it relative to its parent with
//! `O_NOFOLLOW | O_DIRECTORY`, nothing is ever followed (a `hooks/` the program made a
//! symlink to anywhere is removed, not entered), a fifo is never opened for reading
//! without `O_NONBLOCK`, and files are written under a temporary name made with
//! `O_EXCL | O_NOFOLLOW`, then renamed into place.
//!
//! The snapshot is bounded ([`MAX_ENTRIES`], [`MAX_BYTES`]): a `.git` whose control files
//! exceed it is refused at spawn ([`SpawnError::Path`] with `E2BIG`), never run
//! unguarded.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat, renameat};
use nix::sys::stat::{Mode, fchmod, fstat, fstatat};
use nix::unistd::{UnlinkatFlags, symlinkat, unlinkat};

use super::classify;
use super::read::{entries, open_beneath_root, open_dir_at};
use super::write::remove;
use super::{GitConfigChange, GitDrop, GitDropReason};
use crate::error::SpawnError;

/// At most this many entries (files, directories, symlinks) are snapshotted per run.
pub(in crate::process) const MAX_ENTRIES: usize = 20_000;
/// At most this many bytes of file contents are snapshotted per run.
pub(in crate::process) const MAX_BYTES: usize = 32 << 20;
/// Directories nested deeper than this under `.git` are not snapshotted (refused).
const MAX_DEPTH: usize = 16;

/// The names git reads commands, paths or other repositories from, in every git dir:
/// besides the config, hooks and links, the legacy remotes (`remotes/<name>` and
/// `branches/<name>` name a remote's URL when the config has none: a bare repository
/// planted inside `.git` then ran its hooks on the host's `git push origin`, found by
/// review) and the state of an unfinished rebase, cherry-pick or revert (a todo list's
/// `exec` lines run on the host's `--continue`).
const CONTROL: &[&str] = &[
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
    "hooks",
    "info",
    "remotes",
    "branches",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
];
/// The same under `objects/info/`.
const ALTERNATES: &[&str] = &["alternates", "http-alternates"];
/// The directories that hold further git dirs (linked worktrees', submodules').
const NESTED: &[&str] = &["worktrees", "modules"];
/// Inside a nested git dir: the data directories not searched for further git dirs.
const DATA: &[&str] = &[
    "objects", "refs", "logs", "hooks", "info", "lfs", "rr-cache",
];

/// The snapshots of the commands running now, by `.git` path, with how many hold each:
/// a command that starts while another one runs on the same `.git` shares the first one's
/// snapshot (taken before either program could write), so that its restore never puts
/// back what the first program wrote.
static ACTIVE: Mutex<BTreeMap<PathBuf, (Arc<Snapshot>, usize)>> = Mutex::new(BTreeMap::new());

/// A command's hold on the snapshot of one `.git` ([`ACTIVE`]); released when dropped.
#[derive(Debug)]
pub(in crate::process) struct Held(Arc<Snapshot>);

impl Held {
    /// The snapshot of `git` that this command restores: the one a command running on the
    /// same `.git` already holds, else a new one ([`Snapshot::take`]).
    ///
    /// # Errors
    ///
    /// As [`Snapshot::take`].
    pub(in crate::process) fn take(git: &Path, budget: &mut Budget) -> Result<Held, SpawnError> {
        let mut active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((snap, n)) = active.get_mut(git) {
            *n += 1;
            return Ok(Held(Arc::clone(snap)));
        }
        let snap = Arc::new(Snapshot::take(git, budget)?);
        active.insert(git.to_path_buf(), (Arc::clone(&snap), 1));
        Ok(Held(snap))
    }

    /// Puts back what the run changed ([`Snapshot::restore`]), then releases the hold.
    pub(in crate::process) fn restore(self) -> (Vec<GitDrop>, Vec<GitConfigChange>) {
        self.0.restore()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, n)) = active.get_mut(&self.0.git) {
            *n -= 1;
            if *n == 0 {
                active.remove(&self.0.git);
            }
        }
    }
}

/// What was at a path before the run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Missing,
    File {
        mode: u32,
        data: Vec<u8>,
    },
    Link(OsString),
    Dir {
        mode: u32,
        entries: BTreeMap<OsString, Node>,
    },
    /// A fifo, socket or device: kept as it is found, only its kind compared.
    Other(u32),
}

/// What the snapshots of one run may still take: every snapshot a command takes (its
/// roots' `.git` and the nested repositories the host has) shares one, so that memory
/// stays bounded however many repositories there are.
#[derive(Clone, Debug)]
pub(in crate::process) struct Budget {
    entries: usize,
    bytes: usize,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::per_run()
    }
}

impl Budget {
    /// A run's: [`MAX_ENTRIES`] entries and [`MAX_BYTES`] bytes.
    pub(in crate::process) fn per_run() -> Budget {
        Budget {
            entries: MAX_ENTRIES,
            bytes: MAX_BYTES,
        }
    }

    fn take(&mut self, bytes: usize) -> Result<(), Errno> {
        self.entries = self.entries.checked_sub(1).ok_or(Errno::E2BIG)?;
        self.bytes = self.bytes.checked_sub(bytes).ok_or(Errno::E2BIG)?;
        Ok(())
    }
}

/// One writable root's `.git`, as it was before the run.
#[derive(Debug)]
pub(in crate::process) struct Snapshot {
    /// `<root>/.git`.
    git: PathBuf,
    /// The `.git` entry itself: a directory is described by `files`, a `gitdir:` file or
    /// symlink is kept whole here, and a missing one is left to the program.
    top: Top,
}

#[derive(Debug)]
enum Top {
    Missing,
    /// A `.git` directory: the control paths (relative to it) and what was there, and the
    /// directories under `worktrees/` and `modules/` that existed.
    Dir {
        files: BTreeMap<PathBuf, Node>,
        nested: BTreeSet<PathBuf>,
        /// The names at its top.
        names: BTreeSet<OsString>,
        /// Its `HEAD` when the host's `.git` was what git takes for a repository (a valid
        /// `HEAD`, `objects/` and `refs/` directories), else `None`.
        repository: Option<Node>,
    },
    /// A `.git` file or symlink.
    Entry(Node),
}

impl Snapshot {
    /// Snapshots `git`: `<root>/.git`, or the directory a `.git` symlink or `gitdir:` file
    /// names inside the root (a canonical path, reached without a symlink).
    ///
    /// # Errors
    ///
    /// [`SpawnError::Path`]: `E2BIG` when the control files exceed [`MAX_ENTRIES`] or
    /// [`MAX_BYTES`], or the errno of reading them.
    pub(in crate::process) fn take(
        git: &Path,
        budget: &mut Budget,
    ) -> Result<Snapshot, SpawnError> {
        let err = |errno| {
            SpawnError::Path {
            what: "snapshot the git control files of",
            path: git.to_path_buf(),
            errno,
            note: (errno == Errno::E2BIG).then_some(
                "more than 20000 entries or 32 MiB in config, hooks, info, worktrees and modules of the run's repositories together",
            ),
        }
        };
        let (Some(root), Some(name)) = (git.parent(), git.file_name()) else {
            return Err(err(Errno::EINVAL));
        };
        let root = match open_beneath_root(root) {
            Ok(fd) => fd,
            // A writable path that is a file, or gone: no `.git` under it.
            Err(Errno::ENOTDIR | Errno::ENOENT) => {
                return Ok(Snapshot {
                    git: git.to_path_buf(),
                    top: Top::Missing,
                });
            }
            Err(e) => return Err(err(e)),
        };
        let st = fstatat(&root, name, AtFlags::AT_SYMLINK_NOFOLLOW);
        let top = match st {
            Err(Errno::ENOENT) => Top::Missing,
            Err(e) => return Err(err(e)),
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
                let dir = open_dir_at(&root, name).map_err(err)?;
                let mut files = BTreeMap::new();
                let mut nested = BTreeSet::new();
                for key in keys(&dir, &mut nested).map_err(err)? {
                    let node = if is_top(&key) {
                        // `worktrees/`, `modules/`: a directory is described by `nested`
                        // and the control files found in it, not read whole.
                        match fstatat(&dir, key.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
                                Node::Other(libc::S_IFDIR)
                            }
                            _ => read_path(&dir, &key, budget).map_err(err)?,
                        }
                    } else {
                        read_path(&dir, &key, budget).map_err(err)?
                    };
                    files.insert(key, node);
                }
                let head = read_node(&dir, OsStr::new("HEAD"), budget, 0).map_err(err)?;
                let repository = (valid_head(&head)
                    && ["objects", "refs"].iter().all(|d| is_dir(&dir, d)))
                .then_some(head);
                let names = entries(&dir)
                    .map_err(err)?
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect();
                Top::Dir {
                    files,
                    nested,
                    names,
                    repository,
                }
            }
            Ok(_) => Top::Entry(read_node(&root, name, budget, 0).map_err(err)?),
        };
        Ok(Snapshot {
            git: git.to_path_buf(),
            top,
        })
    }

    /// Puts back what the run changed; returns each restoration (or failure), and each
    /// variable the program changed in the top `config`: its allowlisted changes stay
    /// (`config.rs`, as on the full layer), the rest is put back.
    pub(in crate::process) fn restore(&self) -> (Vec<GitDrop>, Vec<GitConfigChange>) {
        let mut config = Vec::new();
        let out = self.restore_into(&mut config);
        (out, config)
    }

    fn restore_into(&self, config: &mut Vec<GitConfigChange>) -> Vec<GitDrop> {
        let mut out = Vec::new();
        let report = |out: &mut Vec<GitDrop>, rel: &Path, reason| {
            let path = if rel.as_os_str().is_empty() {
                self.git.clone()
            } else {
                self.git.join(rel)
            };
            out.push(GitDrop { path, reason });
        };
        let (Some(root), Some(git)) = (self.git.parent(), self.git.file_name()) else {
            return out;
        };
        if matches!(self.top, Top::Missing) {
            // What the program makes there is its own, as on the full layer.
            return out;
        }
        let root = match open_beneath_root(root) {
            Ok(fd) => fd,
            Err(e) => {
                report(&mut out, Path::new(""), GitDropReason::Failed(e as i32));
                return out;
            }
        };
        match &self.top {
            Top::Missing => {}
            Top::Entry(node) => {
                if let Err(e) = put_back(&root, git, node, Path::new(""), &mut |p, r| {
                    report(&mut out, p, r)
                }) {
                    report(&mut out, Path::new(""), GitDropReason::Failed(e as i32));
                }
            }
            Top::Dir {
                files,
                nested,
                names,
                repository,
            } => {
                let dir = match open_dir_at(&root, git) {
                    Ok(d) => d,
                    Err(e) => {
                        // A `.git` made a symlink, file or fifo: the host's git would follow
                        // it. Removed; the directory itself cannot be brought back here.
                        let st = fstatat(&root, git, AtFlags::AT_SYMLINK_NOFOLLOW);
                        if st.is_ok_and(|s| s.st_mode & libc::S_IFMT != libc::S_IFDIR) {
                            let r = unlinkat(&root, git, UnlinkatFlags::NoRemoveDir);
                            report(&mut out, Path::new(""), GitDropReason::Replaced);
                            if let Err(e) = r {
                                report(&mut out, Path::new(""), GitDropReason::Failed(e as i32));
                            }
                        } else if e == nix::errno::Errno::ENOENT {
                            // Gone: the program removed it, or it made a `.git` file that
                            // the nested-repository check set aside (`process::nested`).
                            report(&mut out, Path::new(""), GitDropReason::Replaced);
                        } else {
                            report(&mut out, Path::new(""), GitDropReason::Failed(e as i32));
                        }
                        return out;
                    }
                };
                // Directories under `worktrees/` and `modules/` the host did not have go
                // whole, before the control files of those it had are compared.
                for top in NESTED {
                    if let Ok(fd) = open_dir_at(&dir, OsStr::new(top)) {
                        prune(&fd, Path::new(top), nested, &mut |p, r| {
                            report(&mut out, p, r)
                        });
                    }
                }
                // At the top, what the run added that is no data of git's (as the full
                // layer merges it: objects, refs, logs, the index, `HEAD` and the state
                // files) goes whole: a bare repository planted there, a lock left behind,
                // whatever a later git may read.
                added_at_top(&dir, names, &mut |p, r| report(&mut out, p, r));
                for (key, node) in files {
                    let (Some(parent), Some(name)) = (key.parent(), key.file_name()) else {
                        continue;
                    };
                    let parent_fd = match open_rel(&dir, parent) {
                        Ok(fd) => fd,
                        // Its directory is gone (or not a directory any more): nothing
                        // there for git to read unless it was there before.
                        Err(_) if *node == Node::Missing => continue,
                        Err(e) => {
                            report(&mut out, key, GitDropReason::Failed(e as i32));
                            continue;
                        }
                    };
                    let kept;
                    let node = match node {
                        Node::File { mode, data } if key == Path::new("config") => {
                            match self.config(&parent_fd, data, config) {
                                Some(text) => {
                                    kept = Node::File {
                                        mode: *mode,
                                        data: text,
                                    };
                                    &kept
                                }
                                None => node,
                            }
                        }
                        _ => node,
                    };
                    if let Err(e) = put_back(&parent_fd, name, node, key, &mut |p, r| {
                        report(&mut out, p, r)
                    }) {
                        report(&mut out, key, GitDropReason::Failed(e as i32));
                    }
                }
                if let Some(head) = repository {
                    still_a_repository(&dir, head, &mut |p, r| report(&mut out, p, r));
                }
            }
        }
        out
    }
}

impl Snapshot {
    /// The top `config` to put back: the snapshot's (`before`) with the allowlisted
    /// changes of the program's file (read once, bounded, never through a symlink) merged
    /// in, each changed variable listed in `changes`; `None` (the snapshot's, whole) when
    /// nothing merges or either file is refused.
    fn config(
        &self,
        dir: &OwnedFd,
        before: &[u8],
        changes: &mut Vec<GitConfigChange>,
    ) -> Option<Vec<u8>> {
        let now = super::read::read_host(dir, OsStr::new("config"), super::config::MAX_CONFIG)?;
        if now == before {
            return None;
        }
        let merged = super::config::merge(before, &now).ok()?;
        let path = self.git.join("config");
        changes.extend(merged.changes.iter().map(|c| GitConfigChange {
            path: path.clone(),
            name: String::from_utf8_lossy(&c.name).into_owned(),
            outcome: c.outcome.public(),
        }));
        merged.text
    }
}

/// `worktrees` or `modules` itself.
fn is_top(p: &Path) -> bool {
    NESTED.iter().any(|n| p == Path::new(n))
}

/// Opens the directory `rel` (components, no symlink followed) under `dir`.
fn open_rel(dir: &OwnedFd, rel: &Path) -> Result<OwnedFd, Errno> {
    let mut cur = dir.try_clone().map_err(|_| Errno::EMFILE)?;
    for c in rel.components() {
        cur = open_dir_at(&cur, c.as_os_str())?;
    }
    Ok(cur)
}

/// The control paths of the git dir `dir` (relative to it): its own, and those of every
/// directory under `worktrees/` and `modules/` (each of which is recorded in `nested`).
fn keys(dir: &OwnedFd, nested: &mut BTreeSet<PathBuf>) -> Result<Vec<PathBuf>, Errno> {
    let mut out = Vec::new();
    let mut gitdirs = vec![PathBuf::new()];
    for top in NESTED {
        out.push(PathBuf::from(top));
        let Ok(fd) = open_dir_at(dir, OsStr::new(top)) else {
            continue;
        };
        find_nested(&fd, Path::new(top), 1, nested, &mut gitdirs)?;
    }
    for g in gitdirs {
        for name in CONTROL {
            out.push(g.join(name));
        }
        for name in ALTERNATES {
            out.push(g.join("objects/info").join(name));
        }
    }
    Ok(out)
}

/// Every directory under `fd` (at `rel`), not entering the data directories of a git dir.
fn find_nested(
    fd: &OwnedFd,
    rel: &Path,
    depth: usize,
    nested: &mut BTreeSet<PathBuf>,
    gitdirs: &mut Vec<PathBuf>,
) -> Result<(), Errno> {
    if depth > MAX_DEPTH || nested.len() > MAX_ENTRIES {
        return Err(Errno::E2BIG);
    }
    for (name, st) in entries(fd)? {
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            continue;
        }
        if DATA.iter().any(|d| name.as_bytes() == d.as_bytes()) {
            continue;
        }
        let here = rel.join(&name);
        nested.insert(here.clone());
        gitdirs.push(here.clone());
        if let Ok(sub) = open_dir_at(fd, &name) {
            find_nested(&sub, &here, depth + 1, nested, gitdirs)?;
        }
    }
    Ok(())
}

/// Removes each directory under `fd` (at `rel`) that is not in `nested` (the host did not
/// have it), whole; enters those it had.
fn prune(
    fd: &OwnedFd,
    rel: &Path,
    nested: &BTreeSet<PathBuf>,
    report: &mut dyn FnMut(&Path, GitDropReason),
) {
    let Ok(list) = entries(fd) else {
        report(rel, GitDropReason::Failed(libc::EIO));
        return;
    };
    for (name, st) in list {
        // A symlink goes too: git would follow it to a git dir anywhere.
        let kind = st.st_mode & libc::S_IFMT;
        if kind != libc::S_IFLNK
            && (kind != libc::S_IFDIR || DATA.iter().any(|d| name.as_bytes() == d.as_bytes()))
        {
            continue;
        }
        let here = rel.join(&name);
        if nested.contains(&here) {
            if let Ok(sub) = open_dir_at(fd, &name) {
                prune(&sub, &here, nested, report);
            }
            continue;
        }
        match remove(fd, &name, 0) {
            Ok(()) => report(&here, GitDropReason::Restored),
            Err(e) => report(&here, GitDropReason::Failed(e as i32)),
        }
    }
}

/// Removes each entry at the top of `dir` (a `.git`) that is not in `before` and is no
/// data of git's ([`classify::top`], locks included), nor a control or nested name (put
/// back by the snapshot itself).
fn added_at_top(
    dir: &OwnedFd,
    before: &BTreeSet<OsString>,
    report: &mut dyn FnMut(&Path, GitDropReason),
) {
    let Ok(list) = entries(dir) else {
        report(Path::new(""), GitDropReason::Failed(libc::EIO));
        return;
    };
    for (name, st) in list {
        let bytes = name.as_bytes();
        let kind = st.st_mode & libc::S_IFMT;
        // Only files and directories: host git writes the top's state files and the
        // reflogs with a plain `open`, which follows a link (review: `logs/HEAD` made a
        // link to a file outside had the host's `git checkout` append a line the program
        // chose to it).
        let plain = kind == libc::S_IFREG || kind == libc::S_IFDIR;
        if plain && bytes == b"logs" {
            if let Ok(logs) = open_dir_at(dir, &name) {
                links_below(&logs, Path::new("logs"), 0, report);
            }
        }
        let kept = plain
            && (before.contains(&name)
                || CONTROL.iter().chain(NESTED).any(|c| c.as_bytes() == bytes)
                // git's own state: a shallow clone's list, a bisection's.
                || bytes == b"shallow"
                || bytes.starts_with(b"BISECT_")
                || (classify::top(bytes) != classify::Top::Other
                    && !classify::temporary(bytes, None)));
        if kept {
            continue;
        }
        match remove(dir, &name, 0) {
            Ok(()) => report(Path::new(&name), GitDropReason::Restored),
            Err(e) => report(Path::new(&name), GitDropReason::Failed(e as i32)),
        }
    }
}

/// Removes every entry under `dir` (`rel` below `.git`) that is neither a file nor a
/// directory: git appends to the reflogs through a plain `open`.
fn links_below(
    dir: &OwnedFd,
    rel: &Path,
    depth: usize,
    report: &mut dyn FnMut(&Path, GitDropReason),
) {
    let Ok(list) = entries(dir) else {
        return;
    };
    for (name, st) in list {
        let kind = st.st_mode & libc::S_IFMT;
        let here = rel.join(&name);
        if kind == libc::S_IFDIR {
            match open_dir_at(dir, &name) {
                Ok(sub) if depth < MAX_DEPTH => links_below(&sub, &here, depth + 1, report),
                _ => report(&here, GitDropReason::Failed(libc::ELOOP)),
            }
        } else if kind != libc::S_IFREG {
            match unlinkat(dir, name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) => report(&here, GitDropReason::Restored),
                Err(e) => report(&here, GitDropReason::Failed(e as i32)),
            }
        }
    }
}

/// What is at `rel` under `dir` (a missing directory on the way: missing).
fn read_path(dir: &OwnedFd, rel: &Path, budget: &mut Budget) -> Result<Node, Errno> {
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(Errno::EINVAL);
    };
    match open_rel(dir, parent) {
        Ok(p) => read_node(&p, name, budget, 0),
        Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => Ok(Node::Missing),
        Err(e) => Err(e),
    }
}

/// What `name` under `dir` is, read without following a symlink or blocking on a fifo.
fn read_node(
    dir: &OwnedFd,
    name: &OsStr,
    budget: &mut Budget,
    depth: usize,
) -> Result<Node, Errno> {
    if depth > MAX_DEPTH {
        return Err(Errno::E2BIG);
    }
    let st = match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Ok(Node::Missing),
        Err(e) => return Err(e),
    };
    let mode = st.st_mode & 0o7777;
    Ok(match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => {
            let size = usize::try_from(st.st_size).map_err(|_| Errno::E2BIG)?;
            budget.take(size)?;
            let fd = open_file(dir, name)?;
            let mut data = Vec::with_capacity(size);
            std::fs::File::from(fd)
                .take(budget.bytes as u64 + size as u64 + 1)
                .read_to_end(&mut data)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
            if data.len() > size {
                budget.take(data.len() - size)?;
                budget.entries += 1;
            }
            Node::File { mode, data }
        }
        libc::S_IFLNK => {
            budget.take(0)?;
            Node::Link(readlinkat(dir, name)?)
        }
        libc::S_IFDIR => {
            budget.take(0)?;
            let sub = open_dir_at(dir, name)?;
            let mut children = BTreeMap::new();
            for (n, _) in entries(&sub)? {
                let node = read_node(&sub, &n, budget, depth + 1)?;
                children.insert(n, node);
            }
            Node::Dir {
                mode,
                entries: children,
            }
        }
        kind => {
            budget.take(0)?;
            Node::Other(kind)
        }
    })
}

/// Whether `head` is a `HEAD` git accepts (`refs::loose`: `ref: <valid name>` or an
/// object id, of either hash), so that git takes its directory for a repository.
fn valid_head(head: &Node) -> bool {
    match head {
        Node::File { data, .. } => [20, 32]
            .iter()
            .any(|hash| super::refs::loose(data, *hash).is_ok()),
        _ => false,
    }
}

fn is_dir(dir: &OwnedFd, name: &str) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// Keeps the host's `.git` a repository in git's eyes after the run (git's
/// `is_git_directory`): a `HEAD` git does not accept (garbage, removed, a directory or a
/// link) is put back to the snapshot's (`head`), and an `objects/` or `refs/` that is no
/// directory any more is made an empty one again. Otherwise host git, finding no
/// repository there, walks up and takes an enclosing repository for this one, where a
/// `git reset --hard` or `git clean` destroys work outside the workspace. What the
/// program removed from `objects/` and `refs/` stays removed.
fn still_a_repository(dir: &OwnedFd, head: &Node, report: &mut dyn FnMut(&Path, GitDropReason)) {
    let name = OsStr::new("HEAD");
    let mut budget = Budget {
        entries: 1,
        bytes: 4096,
    };
    let now = read_node(dir, name, &mut budget, 0).unwrap_or(Node::Missing);
    if !valid_head(&now) {
        if let Err(e) = put_back(dir, name, head, Path::new("HEAD"), report) {
            report(Path::new("HEAD"), GitDropReason::Failed(e as i32));
        }
    }
    for d in ["objects", "refs"] {
        if is_dir(dir, d) {
            continue;
        }
        let r = remove(dir, OsStr::new(d), 0)
            .and_then(|()| nix::sys::stat::mkdirat(dir, d, Mode::from_bits_truncate(0o755)));
        let reason = match r {
            Ok(()) => GitDropReason::Restored,
            Err(e) => GitDropReason::Failed(e as i32),
        };
        report(Path::new(d), reason);
    }
}

fn open_file(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Whether `name` under `dir` is what `node` describes (never reading more than that).
fn same(dir: &OwnedFd, name: &OsStr, node: &Node, depth: usize) -> bool {
    let st = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW);
    match (node, st) {
        (Node::Missing, Err(Errno::ENOENT)) => true,
        (Node::Missing, _) | (_, Err(_)) => false,
        (Node::File { mode, data }, Ok(st)) => {
            if st.st_mode & libc::S_IFMT != libc::S_IFREG
                || st.st_mode & 0o7777 != *mode
                || st.st_size as u64 != data.len() as u64
            {
                return false;
            }
            let Ok(fd) = open_file(dir, name) else {
                return false;
            };
            let mut now = Vec::with_capacity(data.len());
            std::fs::File::from(fd)
                .take(data.len() as u64 + 1)
                .read_to_end(&mut now)
                .is_ok_and(|_| now == *data)
        }
        (Node::Link(target), Ok(st)) => {
            st.st_mode & libc::S_IFMT == libc::S_IFLNK
                && readlinkat(dir, name).is_ok_and(|t| t == *target)
        }
        (Node::Other(kind), Ok(st)) => st.st_mode & libc::S_IFMT == *kind,
        (
            Node::Dir {
                mode,
                entries: kids,
            },
            Ok(st),
        ) => {
            if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_mode & 0o7777 != *mode {
                return false;
            }
            if depth > MAX_DEPTH {
                return false;
            }
            let Ok(sub) = open_dir_at(dir, name) else {
                return false;
            };
            let Ok(now) = entries(&sub) else {
                return false;
            };
            now.len() == kids.len()
                && now.iter().all(|(n, _)| kids.contains_key(n))
                && kids.iter().all(|(n, k)| same(&sub, n, k, depth + 1))
        }
    }
}

/// Makes `name` under `dir` what `node` describes, reporting each path put back (`rel`,
/// relative to `.git`) through `report`.
fn put_back(
    dir: &OwnedFd,
    name: &OsStr,
    node: &Node,
    rel: &Path,
    report: &mut dyn FnMut(&Path, GitDropReason),
) -> Result<(), Errno> {
    if same(dir, name, node, 0) {
        return Ok(());
    }
    match node {
        Node::Missing => remove(dir, name, 0)?,
        Node::Other(libc::S_IFDIR) => {
            // `worktrees/` or `modules/`, made something else: a directory again.
            remove(dir, name, 0)?;
            nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(0o755))?;
        }
        Node::Other(_) => {
            // Not recreated (a fifo or socket the host had in hooks/); what the program put
            // there instead is removed.
            remove(dir, name, 0)?;
        }
        Node::File { mode, data } => write_file(dir, name, *mode, data)?,
        Node::Link(target) => {
            remove(dir, name, 0)?;
            symlinkat(target.as_os_str(), dir, name)?;
        }
        Node::Dir {
            mode,
            entries: kids,
        } => {
            let st = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW);
            if !st.is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFDIR) {
                remove(dir, name, 0)?;
                nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(0o700))?;
                report(rel, GitDropReason::Restored);
            }
            // A directory (checked above; every process of the run is gone, so it stays
            // one): its mode first, so that one the program made unreadable is entered.
            let now = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
            if now.st_mode & 0o7777 != *mode {
                nix::sys::stat::fchmodat(
                    dir,
                    name,
                    Mode::from_bits_truncate(*mode as libc::mode_t),
                    nix::sys::stat::FchmodatFlags::FollowSymlink,
                )?;
                report(rel, GitDropReason::Restored);
            }
            let sub = open_dir_at(dir, name)?;
            if fstat(&sub)?.st_mode & libc::S_IFMT != libc::S_IFDIR {
                return Err(Errno::ENOTDIR);
            }
            for (n, _) in entries(&sub)? {
                if !kids.contains_key(&n) {
                    remove(&sub, &n, 0)?;
                    report(&rel.join(&n), GitDropReason::Restored);
                }
            }
            for (n, k) in kids {
                let child = rel.join(n);
                if let Err(e) = put_back(&sub, n, k, &child, report) {
                    report(&child, GitDropReason::Failed(e as i32));
                }
            }
            return Ok(());
        }
    }
    report(rel, GitDropReason::Restored);
    Ok(())
}

/// Writes `data` as `name` under `dir` with `mode`: under a temporary name made with
/// `O_EXCL | O_NOFOLLOW`, then renamed over what is there (a directory there removed
/// first).
fn write_file(dir: &OwnedFd, name: &OsStr, mode: u32, data: &[u8]) -> Result<(), Errno> {
    let mut tmp = OsString::from(".stockade-restore-");
    tmp.push(std::process::id().to_string());
    tmp.push("-");
    tmp.push(name);
    let _ = unlinkat(dir, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    let fd = openat(
        dir,
        tmp.as_os_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )?;
    let r = (|| {
        let mut f = std::fs::File::from(fd);
        f.write_all(data)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        fchmod(&f, Mode::from_bits_truncate(mode as libc::mode_t))?;
        if fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFDIR)
        {
            remove(dir, name, 0)?;
        }
        renameat(dir, tmp.as_os_str(), dir, name)
    })();
    if r.is_err() {
        let _ = unlinkat(dir, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    r
}
