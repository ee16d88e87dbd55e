//! Applying a change set to the real workspace: a security boundary.
//!
//! The change set is the program's work and may hold anything: symlinks to host paths,
//! FIFOs, devices, setuid files, hard links to files the program could only read, git
//! hooks, names the policy hides. The workspace may have changed since the run started,
//! and may hold symlinks of its own. So:
//! - every workspace directory is opened beneath the workspace fd, following no symlink
//!   (Linux: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV)`;
//!   elsewhere one `openat(O_NOFOLLOW | O_DIRECTORY)` per component): a symlinked
//!   directory in the workspace is never written through;
//! - every entry is then written relative to that fd: a file under a temporary name made
//!   with `O_CREAT | O_EXCL | O_NOFOLLOW`, filled, given its permission bits (never
//!   setuid, setgid or sticky) and times, then renamed over the target; a symlink made
//!   with `symlinkat` (its target is text, never resolved) and renamed the same way;
//! - before it is written, the workspace entry is compared with what the change set
//!   assumes (see [`ConflictReason`]): a difference is a conflict, reported, and the
//!   entry is left alone;
//! - `.git` goes through the `.git` layer's merge (the same code and validation as a
//!   command's layer: objects, refs, the index, `HEAD`, allowlisted config keys), never
//!   a raw copy.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat, renameat};
use nix::sys::stat::{FileStat, Mode, fchmod, fstat, fstatat, futimens};
use nix::sys::time::TimeSpec;
use nix::unistd::{UnlinkatFlags, symlinkat, unlinkat};

use super::fs::{self, MAX_DEPTH, ftype};
use super::names::same_name;
use super::{Change, ChangeKind, ChangeSet, ChangesError, EntryType};
use crate::policy::{DEFAULT_DENY_NAMES, DEFAULT_GUARD_NAMES};

/// What [`ChangeSet::apply`] may write besides the plain entries.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApplyOptions {
    /// Apply entries under a `guard_names` path (`.git/hooks`, `.git/config`). Under
    /// `.git` this only lets them reach the `.git` merge, which still keeps hooks and
    /// non-allowlisted config out.
    pub allow_guarded: bool,
    /// Apply entries with a `deny_names` component (`.env`, `.ssh`, ...).
    pub allow_denied: bool,
    /// The guarded paths, relative to the workspace root (default: the policy's,
    /// [`crate::policy::DEFAULT_GUARD_NAMES`]).
    pub guard_names: Vec<String>,
    /// The denied names, matched against every component of a path (default: the
    /// policy's, [`crate::policy::DEFAULT_DENY_NAMES`]).
    pub deny_names: Vec<String>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            allow_guarded: false,
            allow_denied: false,
            guard_names: DEFAULT_GUARD_NAMES.iter().map(|s| s.to_string()).collect(),
            deny_names: DEFAULT_DENY_NAMES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl ApplyOptions {
    /// The defaults with the name lists of `policy`.
    pub fn from_policy(policy: &crate::Policy) -> Self {
        Self {
            guard_names: policy.guard_names.clone(),
            deny_names: policy.deny_names.clone(),
            ..Self::default()
        }
    }
}

/// Why an entry was not applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// Under a `guard_names` path, without [`ApplyOptions::allow_guarded`].
    Guarded,
    /// A `deny_names` component, without [`ApplyOptions::allow_denied`].
    Denied,
    /// A FIFO, socket or device node.
    Special,
    /// A file with the setuid or setgid bit.
    SetId,
    /// A file with hard links outside the change set.
    HardlinkOutside,
    /// The workspace path to it goes through a symlink, or crosses a mount point.
    SymlinkInPath,
    /// A parent directory was not applied.
    ParentNotApplied,
    /// `.git` itself added, deleted or replaced: only a `.git` directory present on both
    /// sides is merged.
    GitReplaced,
    /// The `.git` merge kept it out.
    Git(crate::GitDropReason),
    /// No `.git` merge on this OS.
    GitUnsupported,
    /// In a repository below the workspace's top: under (or at) a `.git` entry that is
    /// not the workspace's own (a name a case-insensitive or NTFS-like file system takes
    /// for `.git` included, [`is_git_name`](super::is_git_name)), under a directory git
    /// takes for a git directory (`HEAD` with `objects/` and `refs/`, or with
    /// `commondir`; the names of the change set and of the workspace taken together): a
    /// bare repository, or the directory a `.git` file (`gitdir:`) names. Git on the host
    /// run there would run that config's commands and those hooks, and take its `HEAD`,
    /// refs, index and alternates as written: none goes around the `.git` merge.
    Repository,
    /// Under a top-level name that is not `.git` but that a case-insensitive or NTFS-like
    /// file system takes for it (`.GIT`, `.git.`, `git~1`, …,
    /// [`is_git_name`](super::is_git_name)): applied, it would land in the workspace's
    /// real `.git` past the `.git` merge.
    GitAlias,
    /// Under another version-control system's repository data, at any depth:
    /// Mercurial's `.hg`, Jujutsu's `.jj`, Pijul's `.pijul`, Darcs' `_darcs`, or a Fossil
    /// checkout's database (`.fslckout`, `_FOSSIL_`), names compared without case. Their
    /// configs run commands (Mercurial's `[hooks]` in `.hg/hgrc` ran on the host's `hg
    /// status`, found by review; Jujutsu's `ui.pager`, Pijul's hooks, Darcs' `posthook`,
    /// Fossil's `diff-command`), and nothing here validates them as the `.git` merge
    /// validates git's.
    OtherRepository,
}

impl std::fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Guarded => f.write_str("under a guarded path (--allow-guarded to apply)"),
            Self::Denied => f.write_str("a denied name (--allow-denied to apply)"),
            Self::Special => f.write_str("a FIFO, socket or device node"),
            Self::SetId => f.write_str("a setuid or setgid file"),
            Self::HardlinkOutside => f.write_str("a hard link to a file outside the change set"),
            Self::SymlinkInPath => {
                f.write_str("the workspace path goes through a symlink or a mount point")
            }
            Self::ParentNotApplied => f.write_str("its parent directory was not applied"),
            Self::GitReplaced => f.write_str(".git itself added, deleted or replaced"),
            Self::Git(r) => write!(f, "kept out by the .git merge: {r}"),
            Self::GitUnsupported => f.write_str("no .git merge on this OS"),
            Self::GitAlias => f.write_str(
                "a name a case-insensitive or NTFS-like file system takes for .git",
            ),
            Self::Repository => f.write_str(
                "in a repository below the workspace's top (git there would run its config and hooks)",
            ),
            Self::OtherRepository => f.write_str(
                "in another version-control system's repository data (.hg, .jj, .pijul, _darcs, Fossil's checkout database: their configs run commands)",
            ),
        }
    }
}

/// An entry not applied, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// The path relative to the workspace.
    pub path: PathBuf,
    /// Why.
    pub reason: RefusalReason,
}

/// How the workspace differs from what a change assumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConflictReason {
    /// The workspace entry changed (its ctime) at or after the start of the first run.
    ChangedSinceStart,
    /// The change adds an entry the workspace has by now.
    Appeared,
    /// The change modifies or deletes an entry the workspace no longer has.
    Disappeared,
    /// The workspace entry is of another type, another size or another inode than the
    /// one the change was made over.
    Replaced,
    /// The change set's own entry changed since it was opened (a run wrote it after the
    /// review): not what was listed and diffed, so not applied.
    ChangedSinceOpened,
}

impl std::fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ChangedSinceStart => "changed in the workspace since the run started",
            Self::Appeared => "appeared in the workspace since the run started",
            Self::Disappeared => "gone from the workspace since the run started",
            Self::Replaced => "replaced in the workspace since the run started",
            Self::ChangedSinceOpened => "changed in the change set since it was opened",
        })
    }
}

/// An entry left alone because the workspace changed under it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Conflict {
    /// The path relative to the workspace.
    pub path: PathBuf,
    /// How.
    pub reason: ConflictReason,
}

/// An entry whose write failed: it may be partly applied (a directory made, its mode not
/// set); every other entry is in exactly one list of the report.
#[derive(Debug)]
#[non_exhaustive]
pub struct Failure {
    /// The path relative to the workspace.
    pub path: PathBuf,
    /// The cause.
    pub error: io::Error,
}

/// What [`ChangeSet::apply`] did, entry by entry.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ApplyReport {
    /// The entries that landed in the workspace, in the order they did.
    pub applied: Vec<PathBuf>,
    /// The entries refused.
    pub refused: Vec<Refusal>,
    /// The entries left alone because of a conflict.
    pub conflicts: Vec<Conflict>,
    /// The entries whose write failed.
    pub failed: Vec<Failure>,
    /// The `.git/config` variables the program changed, merged or not.
    pub git_config: Vec<crate::GitConfigChange>,
}

impl ApplyReport {
    /// Whether every entry was applied.
    pub fn is_complete(&self) -> bool {
        self.refused.is_empty() && self.conflicts.is_empty() && self.failed.is_empty()
    }
}

/// One entry's outcome.
enum Outcome {
    Applied,
    Refused(RefusalReason),
    Conflict(ConflictReason),
    Failed(Errno),
    /// A directory's mode change: reported once the mode is set, after every entry.
    Deferred,
}

/// Names for the temporary files, unique within the process.
static TEMP: AtomicU64 = AtomicU64::new(0);

fn temp_name() -> OsString {
    let n = TEMP.fetch_add(1, Ordering::Relaxed);
    format!(".stockade-apply-{}-{n}~", std::process::id()).into()
}

/// A directory whose mode and times are set once its entries are written.
struct Fixup {
    path: PathBuf,
    mode: u32,
    times: (TimeSpec, TimeSpec),
    /// A mode change alone: reported applied once the mode is set.
    report: bool,
}

impl ChangeSet {
    /// Writes the change set into the workspace, entry by entry, and reports each
    /// entry's outcome. Refused: FIFOs, sockets and devices, setuid/setgid files, files
    /// hard-linked outside the change set, paths under `guard_names` or with a
    /// `deny_names` component (unless `opts` allows them), anything the workspace
    /// reaches through a symlink, and the children of a directory that was not applied.
    /// A workspace entry that changed since the run started is a conflict and is left
    /// alone. `.git` is merged by the `.git` layer's merge. See the module docs for how
    /// each entry is written.
    ///
    /// # Errors
    ///
    /// [`ChangesError::Workspace`] when the workspace path no longer names the directory
    /// opened by [`ChangeSet::open`]. A failure of one entry is not an error: it is in
    /// [`ApplyReport::failed`], and [`ApplyReport::applied`] lists exactly the entries
    /// that landed.
    ///
    /// # Platform
    ///
    /// Linux and macOS; `.git` merges on Linux only (elsewhere its entries are refused).
    pub fn apply(&self, opts: &ApplyOptions) -> Result<ApplyReport, ChangesError> {
        let now =
            super::open_workspace(&self.marker.workspace).map_err(|e| ChangesError::Workspace {
                path: self.marker.workspace.clone(),
                source: fs::io(e),
            })?;
        let (a, b) = (fstat(&now), fstat(&self.workspace));
        if !matches!((a, b), (Ok(a), Ok(b)) if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)) {
            return Err(ChangesError::Workspace {
                path: self.marker.workspace.clone(),
                source: io::Error::from_raw_os_error(libc::ESTALE),
            });
        }
        // No run may write `upper/` while it is applied: the set is held as a run holds
        // it. What a run wrote between the open and this hold (a review and an apply being
        // two steps) is found by walking `upper/` again: a set that is not the one opened
        // (and so reviewed, its digest compared) is not applied at all.
        let _hold = crate::process::changeset::hold_for_apply(&self.dir).map_err(|_| {
            ChangesError::Busy {
                path: self.dir.clone(),
            }
        })?;
        // Layer 2 writes a new `upper/` into place after a run: the one opened must still
        // be the set's.
        let current = fstatat(&self.dir_fd, "upper", AtFlags::AT_SYMLINK_NOFOLLOW).ok();
        let opened = fstat(&self.upper).ok();
        let replaced = match (current, opened) {
            (Some(c), Some(o)) => (c.st_dev, c.st_ino) != (o.st_dev, o.st_ino),
            _ => true,
        };
        let (now, _) = super::walk::walk(&self.upper, &self.workspace)?;
        if replaced || !same_upper(&self.entries, &now) {
            return Err(ChangesError::Changed {
                path: self.dir.clone(),
            });
        }
        let granted = fs::Granted::new(&self.upper, &self.locked);
        let mut report = ApplyReport::default();
        let mut skipped: HashSet<PathBuf> = HashSet::new();
        let mut fixups: Vec<Fixup> = Vec::new();
        let mut git: Vec<&Change> = Vec::new();
        let mut repositories = GitDirs::default();
        for c in &self.entries {
            if c.path.starts_with(".git") {
                git.push(c);
                continue;
            }
            let outcome = self.one(c, opts, &skipped, &mut fixups, &mut repositories);
            match outcome {
                Outcome::Deferred => {}
                Outcome::Applied => report.applied.push(c.path.clone()),
                Outcome::Refused(reason) => report.refused.push(Refusal {
                    path: c.path.clone(),
                    reason,
                }),
                Outcome::Conflict(reason) => report.conflicts.push(Conflict {
                    path: c.path.clone(),
                    reason,
                }),
                Outcome::Failed(e) => report.failed.push(Failure {
                    path: c.path.clone(),
                    error: fs::io(e),
                }),
            }
            if !matches!(outcome, Outcome::Applied | Outcome::Deferred) && c.entry == EntryType::Dir
            {
                skipped.insert(c.path.clone());
            }
        }
        // Directories last, deepest first: their modes (a directory without write access
        // takes no entries) and times (each entry written changed them).
        for f in fixups.iter().rev() {
            match self.fixup(f) {
                Ok(()) if f.report => report.applied.push(f.path.clone()),
                Ok(()) => {}
                Err(e) => report.failed.push(Failure {
                    path: f.path.clone(),
                    error: fs::io(e),
                }),
            }
        }
        self.apply_git(&git, opts, &mut report);
        drop(granted);
        Ok(report)
    }

    fn one(
        &self,
        c: &Change,
        opts: &ApplyOptions,
        skipped: &HashSet<PathBuf>,
        fixups: &mut Vec<Fixup>,
        repositories: &mut GitDirs,
    ) -> Outcome {
        if let Some(r) = names(&c.path, opts) {
            return Outcome::Refused(r);
        }
        // The top's own `.git` went to the merge; a name taken for it must not go around.
        if c.path.iter().next().is_some_and(super::is_git_name) {
            return Outcome::Refused(RefusalReason::GitAlias);
        }
        if repositories.holds(&c.path, &self.upper, &self.workspace) {
            return Outcome::Refused(RefusalReason::Repository);
        }
        if c.path.iter().any(other_repository_name) {
            return Outcome::Refused(RefusalReason::OtherRepository);
        }
        if c.path.ancestors().skip(1).any(|a| skipped.contains(a)) {
            return Outcome::Refused(RefusalReason::ParentNotApplied);
        }
        if c.kind != ChangeKind::Deleted {
            if c.entry == EntryType::Special {
                return Outcome::Refused(RefusalReason::Special);
            }
            if c.entry == EntryType::File && c.mode.unwrap_or(0) & 0o6000 != 0 {
                return Outcome::Refused(RefusalReason::SetId);
            }
            if c.linked_outside {
                return Outcome::Refused(RefusalReason::HardlinkOutside);
            }
        }
        let (Some(parent), Some(name)) = (c.path.parent(), c.path.file_name()) else {
            return Outcome::Failed(Errno::EINVAL);
        };
        let ws = match fs::open_beneath(&self.workspace, parent) {
            Ok(fd) => fd,
            Err(Errno::ELOOP | Errno::EXDEV | Errno::ENOTDIR) => {
                return Outcome::Refused(RefusalReason::SymlinkInPath);
            }
            Err(Errno::ENOENT) => return Outcome::Conflict(ConflictReason::Disappeared),
            Err(e) => return Outcome::Failed(e),
        };
        if let Some(r) = self.conflict(c, &ws, name) {
            return Outcome::Conflict(r);
        }
        if !self.unchanged(c, parent, name) {
            return Outcome::Conflict(ConflictReason::ChangedSinceOpened);
        }
        let r = match (c.kind, c.entry) {
            (ChangeKind::Deleted, _) => fs::remove_tree(&ws, name, 0),
            (_, EntryType::File) => self.write_file(c, parent, &ws, name),
            (_, EntryType::Symlink) => self.write_symlink(c, parent, &ws, name),
            (ChangeKind::ModeChanged, EntryType::Dir) => {
                return match self.dir_fixup(c, parent, name, true) {
                    Ok(f) => {
                        fixups.push(f);
                        Outcome::Deferred
                    }
                    Err(e) => Outcome::Failed(e),
                };
            }
            (_, EntryType::Dir) => {
                let r = fs::remove_tree(&ws, name, 0).and_then(|()| {
                    nix::sys::stat::mkdirat(&ws, name, Mode::from_bits_truncate(0o700))
                });
                match r.and_then(|()| self.dir_fixup(c, parent, name, false)) {
                    Ok(f) => {
                        fixups.push(f);
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            (_, EntryType::Special) => return Outcome::Refused(RefusalReason::Special),
        };
        match r {
            Ok(()) => Outcome::Applied,
            Err(Errno::ELOOP) => Outcome::Refused(RefusalReason::SymlinkInPath),
            Err(Errno::ESTALE) => Outcome::Conflict(ConflictReason::ChangedSinceOpened),
            Err(e) => Outcome::Failed(e),
        }
    }

    /// Whether the change set's entry for `c` is still the one the walk saw (`c.seen`).
    fn unchanged(&self, c: &Change, parent: &Path, name: &OsStr) -> bool {
        let Some(seen) = c.seen else {
            return true;
        };
        let Ok(up) = fs::open_beneath(&self.upper, parent) else {
            return false;
        };
        fstatat(&up, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| super::seen(&st) == seen)
    }

    /// How the workspace entry `name` of `ws` differs from what `c` was made over.
    fn conflict(&self, c: &Change, ws: &OwnedFd, name: &OsStr) -> Option<ConflictReason> {
        let cur = fstatat(ws, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok();
        match (c.lower, cur) {
            (None, Some(_)) => Some(ConflictReason::Appeared),
            (None, None) => None,
            (Some(_), None) => Some(ConflictReason::Disappeared),
            (Some(l), Some(st)) => {
                if super::EntryType::of(&st) != l.entry
                    || st.st_ino as u64 != l.ino
                    || (l.entry != EntryType::Dir && st.st_size as u64 != l.size)
                {
                    return Some(ConflictReason::Replaced);
                }
                if self.changed_since(&st) {
                    return Some(ConflictReason::ChangedSinceStart);
                }
                // A directory about to be removed or replaced: anything in it changed
                // since the start is a conflict too.
                let removes = matches!(c.kind, ChangeKind::Deleted | ChangeKind::TypeChanged);
                if removes && l.entry == EntryType::Dir && self.tree_changed(ws, name, 0) {
                    return Some(ConflictReason::ChangedSinceStart);
                }
                None
            }
        }
    }

    fn changed_since(&self, st: &FileStat) -> bool {
        let ctime = (st.st_ctime as i128) * 1_000_000_000 + st.st_ctime_nsec as i128;
        ctime >= self.marker.started_ns as i128
    }

    /// Whether anything in the workspace directory `name` of `dir` changed since the
    /// start (or cannot be read: no removal of what was not seen).
    fn tree_changed(&self, dir: &OwnedFd, name: &OsStr, depth: usize) -> bool {
        if depth >= MAX_DEPTH {
            return true;
        }
        let Ok(sub) = fs::open_dir_at(dir, name) else {
            return true;
        };
        let Ok(list) = fs::entries(&sub, super::MAX_ENTRIES) else {
            return true;
        };
        list.iter().any(|(n, st)| {
            self.changed_since(st)
                || (ftype(st) == libc::S_IFDIR && self.tree_changed(&sub, n, depth + 1))
        })
    }

    /// Copies the change set's file into the workspace under a temporary name, then
    /// renames it over `name` (a directory there, for a type change, is removed first).
    fn write_file(
        &self,
        c: &Change,
        parent: &Path,
        ws: &OwnedFd,
        name: &OsStr,
    ) -> Result<(), Errno> {
        let up = fs::open_beneath(&self.upper, parent)?;
        let src = fs::open_file_at(&up, name)?;
        let st = fstat(&src)?;
        // Checked again on the fd: the change set may have changed since the walk.
        as_seen(c, &st)?;
        if ftype(&st) != libc::S_IFREG
            || st.st_mode & 0o6000 != 0
            || (st.st_nlink > 1 && c.hardlink.is_none())
        {
            return Err(Errno::EPERM);
        }
        let tmp = temp_name();
        let dst = openat(
            ws,
            tmp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        let mode = landing_mode(st.st_mode as u32, fstat(ws).map_or(0, |d| d.st_mode as u32));
        let r = fill(src, dst, &st, mode).and_then(|()| replace(ws, &tmp, name));
        if r.is_err() {
            let _ = unlinkat(ws, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        r
    }

    /// Makes the change set's symlink in the workspace (its target is never resolved).
    fn write_symlink(
        &self,
        c: &Change,
        parent: &Path,
        ws: &OwnedFd,
        name: &OsStr,
    ) -> Result<(), Errno> {
        let up = fs::open_beneath(&self.upper, parent)?;
        let target = readlinkat(&up, name)?;
        // The link read is the one the walk saw: the same inode and change time after the
        // read (a link is never changed in place, only replaced).
        as_seen(c, &fstatat(&up, name, AtFlags::AT_SYMLINK_NOFOLLOW)?)?;
        let tmp = temp_name();
        symlinkat(target.as_os_str(), ws, tmp.as_os_str())?;
        let r = replace(ws, &tmp, name);
        if r.is_err() {
            let _ = unlinkat(ws, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        r
    }

    /// The final mode and times of the directory `c`, from the change set.
    fn dir_fixup(
        &self,
        c: &Change,
        parent: &Path,
        name: &OsStr,
        report: bool,
    ) -> Result<Fixup, Errno> {
        let up = fs::open_beneath(&self.upper, parent)?;
        let st = fstatat(&up, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
        let parent_mode = fs::open_beneath(&self.workspace, parent)
            .and_then(|d| fstat(&d))
            .map_or(0, |d| d.st_mode as u32);
        Ok(Fixup {
            path: c.path.clone(),
            // The walk's: the directory may be opened up for this apply (`Granted`).
            mode: landing_mode(c.mode.unwrap_or(0o755), parent_mode),
            times: (
                TimeSpec::new(st.st_atime, st.st_atime_nsec),
                TimeSpec::new(st.st_mtime, st.st_mtime_nsec),
            ),
            report,
        })
    }

    fn fixup(&self, f: &Fixup) -> Result<(), Errno> {
        let dir = fs::open_beneath(&self.workspace, &f.path)?;
        fchmod(&dir, Mode::from_bits_truncate(f.mode as libc::mode_t))?;
        futimens(&dir, &f.times.0, &f.times.1)
    }

    /// `.git`: the guarded entries refused (unless allowed), the rest through the `.git`
    /// layer's merge, whose drops are refusals.
    fn apply_git(&self, git: &[&Change], opts: &ApplyOptions, report: &mut ApplyReport) {
        if git.is_empty() {
            return;
        }
        let mut merged = Vec::new();
        let mut keep_out = Vec::new();
        // `.git` itself replaced: nothing under it goes (each entry in exactly one list).
        if git
            .iter()
            .any(|c| c.path == Path::new(".git") && c.kind != ChangeKind::ModeChanged)
        {
            for c in git {
                report.refused.push(Refusal {
                    path: c.path.clone(),
                    reason: if c.path == Path::new(".git") {
                        RefusalReason::GitReplaced
                    } else {
                        RefusalReason::ParentNotApplied
                    },
                });
            }
            return;
        }
        for c in git {
            match names(&c.path, opts) {
                Some(reason) => {
                    if let Ok(rel) = c.path.strip_prefix(".git") {
                        keep_out.push(rel.to_path_buf());
                    }
                    report.refused.push(Refusal {
                        path: c.path.clone(),
                        reason,
                    });
                }
                None => merged.push(*c),
            }
        }
        self.merge_git(&merged, keep_out, report);
    }

    #[cfg(target_os = "linux")]
    fn merge_git(&self, merged: &[&Change], keep_out: Vec<PathBuf>, report: &mut ApplyReport) {
        if merged.is_empty() {
            return;
        }
        let upper = match fs::open_beneath(&self.upper, Path::new(".git")) {
            Ok(fd) => fd,
            Err(e) => {
                for c in merged {
                    report.failed.push(Failure {
                        path: c.path.clone(),
                        error: fs::io(e),
                    });
                }
                return;
            }
        };
        let git = self.marker.workspace.join(".git");
        let (drops, config) = match crate::process::merge_git_upper(&upper, &git, keep_out) {
            Ok(r) => r,
            Err(e) => {
                for c in merged {
                    report.failed.push(Failure {
                        path: c.path.clone(),
                        error: fs::io(e),
                    });
                }
                return;
            }
        };
        report.git_config = config;
        let already: HashSet<PathBuf> = report.refused.iter().map(|r| r.path.clone()).collect();
        let mut dropped: Vec<PathBuf> = Vec::new();
        for d in drops {
            let rel = d
                .path
                .strip_prefix(&self.marker.workspace)
                .map_or_else(|_| d.path.clone(), Path::to_path_buf);
            dropped.push(rel.clone());
            if !already.contains(&rel) {
                report.refused.push(Refusal {
                    path: rel,
                    reason: RefusalReason::Git(d.reason),
                });
            }
        }
        for c in merged {
            // A drop of the entry itself or of a directory holding it.
            let out = dropped.iter().any(|d| c.path.starts_with(d));
            if out || c.path == Path::new(".git") {
                continue;
            }
            // A drop inside a directory entry: the directory landed, not all of it; but a
            // directory of what is not merged (`worktrees/`, say) whose files were all
            // dropped did not land at all (review: it was listed as applied).
            let missing = c.kind != ChangeKind::Deleted
                && c.entry == EntryType::Dir
                && fs::open_beneath(&self.workspace, &c.path).is_err();
            if missing {
                report.refused.push(Refusal {
                    path: c.path.clone(),
                    reason: RefusalReason::Git(crate::GitDropReason::NotMerged),
                });
            } else {
                report.applied.push(c.path.clone());
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn merge_git(&self, merged: &[&Change], _keep_out: Vec<PathBuf>, report: &mut ApplyReport) {
        for c in merged {
            report.refused.push(Refusal {
                path: c.path.clone(),
                reason: RefusalReason::GitUnsupported,
            });
        }
    }
}

/// Whether a second walk of `upper/` (`now`) found the change set the first one
/// (`then`) did, the workspace side aside: the host may edit the workspace meanwhile,
/// which changes what the walk lists around an entry (its kind, a directory that now
/// differs from the workspace's) and is a conflict of that entry, found when it is
/// applied. What a run can change is in `upper/` and shows here: every file, symlink and
/// whiteout (new, gone, or another inode or change time: a rewrite), the facts of each
/// (mode, target, hard links), the mode of a directory listed by both, and the deletions
/// an opaque directory makes (a directory made opaque by a run lists new ones; one the
/// host adds beneath an opaque directory does too, which refuses the apply: the set is
/// then opened again).
fn same_upper(then: &[Change], now: &[Change]) -> bool {
    let facts = |c: &Change| {
        (
            c.seen,
            c.mode,
            c.target.clone(),
            c.hardlink,
            c.linked_outside,
        )
    };
    let index = |list: &[Change]| -> HashMap<PathBuf, Change> {
        list.iter().map(|c| (c.path.clone(), c.clone())).collect()
    };
    let (old, new) = (index(then), index(now));
    // An entry the walk knows by an inode: the same on both sides, or not there at all.
    let seen_same = |a: &HashMap<PathBuf, Change>, b: &HashMap<PathBuf, Change>| {
        a.values()
            .filter(|c| c.seen.is_some())
            .all(|c| b.get(&c.path).is_some_and(|d| facts(c) == facts(d)))
    };
    if !seen_same(&old, &new) || !seen_same(&new, &old) {
        return false;
    }
    // Directories on both sides keep their modes. (A directory listed only now, which a
    // workspace edit also makes, is applied only through the entries that were opened:
    // a new empty one, or its mode, does not land.)
    let dirs_same = old.values().all(|c| {
        c.seen.is_some()
            || c.kind == ChangeKind::Deleted
            || new
                .get(&c.path)
                .is_none_or(|d| d.kind == ChangeKind::Deleted || d.mode == c.mode)
    });
    // Deletions without an inode of their own (an opaque directory's): none new.
    let no_new_deletions = new
        .values()
        .filter(|c| c.seen.is_none() && c.kind == ChangeKind::Deleted)
        .all(|c| old.contains_key(&c.path));
    dirs_same && no_new_deletions
}

/// Which directories of the workspace git takes for a git directory, each looked at once
/// per apply ([`RefusalReason::Repository`]).
#[derive(Default)]
struct GitDirs(HashMap<PathBuf, bool>);

impl GitDirs {
    /// Whether `rel` is in a repository below the workspace's top: a `.git` component past
    /// the first (the top's own `.git` goes through the merge), a `commondir` anywhere, or
    /// any directory above it that git takes for a git directory, with the names of both
    /// sides together (the change set's and the workspace's: what the apply leaves there).
    /// So nothing is written into a repository's control files, refs, objects or index
    /// past the `.git` merge: a nested bare repository, a `gitdir:` link's target, a git
    /// directory split between the two sides. (In place, after a run, the
    /// nested-repository check sets such files aside; a change set's are not applied.)
    fn holds(&mut self, rel: &Path, upper: &OwnedFd, workspace: &OwnedFd) -> bool {
        let parts: Vec<&OsStr> = rel.iter().collect();
        if parts.iter().skip(1).any(|c| super::is_git_name(c)) {
            return true;
        }
        // A `commondir` file makes a directory with a `HEAD` a repository whose objects,
        // refs, config and hooks are in the directory it names (git's
        // `is_git_directory`): none is applied, wherever it is.
        if parts.iter().any(|c| same_name(c, "commondir")) {
            return true;
        }
        (0..parts.len()).any(|i| {
            let dir: PathBuf = parts.iter().take(i).collect();
            *self
                .0
                .entry(dir)
                .or_insert_with_key(|dir| git_directory(&[upper, workspace], dir))
        })
    }
}

/// Whether `dir` (beneath each of `roots`, no symlink followed), its names on every side
/// taken together, is what git takes for a git directory ([`super::names::GitDirectory`],
/// the nested-repository walk's rule too).
fn git_directory(roots: &[&OwnedFd], dir: &Path) -> bool {
    let mut git = super::names::GitDirectory::default();
    for root in roots {
        let Ok(d) = fs::open_beneath(root, dir) else {
            continue;
        };
        let Ok(names) = fs::entries(&d, super::MAX_ENTRIES) else {
            // Unreadable: taken for one, so that nothing is applied beneath it on a guess.
            return true;
        };
        for (name, _) in &names {
            git.note(name);
        }
    }
    git.is_repository()
}

/// `ESTALE` when `st`, the change set's entry for `c` now, is not the one the walk saw.
fn as_seen(c: &Change, st: &FileStat) -> Result<(), Errno> {
    match c.seen {
        Some(s) if s != super::seen(st) => Err(Errno::ESTALE),
        _ => Ok(()),
    }
}

/// The refusal the name lists give `rel`. Names are compared without case
/// ([`super::names::same_name`]): on a file system that folds case, `.ENV` is `.env`.
fn names(rel: &Path, opts: &ApplyOptions) -> Option<RefusalReason> {
    if !opts.allow_denied
        && rel.components().any(|c| {
            opts.deny_names
                .iter()
                .any(|d| super::names::same_name(c.as_os_str(), d))
        })
    {
        return Some(RefusalReason::Denied);
    }
    if !opts.allow_guarded && opts.guard_names.iter().any(|g| under_guard(rel, g)) {
        return Some(RefusalReason::Guarded);
    }
    None
}

/// Whether `rel` is `guard` or beneath it, component by component, without case.
fn under_guard(rel: &Path, guard: &str) -> bool {
    let mut parts = rel.iter();
    Path::new(guard).iter().all(|g| {
        parts
            .next()
            .is_some_and(|c| super::names::same_name(c, &g.to_string_lossy()))
    })
}

/// The permission bits an entry of mode `mode` lands with in a workspace directory of
/// mode `parent`: never setuid, setgid, sticky or writable by others, and writable by the
/// group only where that directory is (a workspace made under umask 002), as the `.git`
/// merge does (review: a program's `chmod 666` and `mkdir -m 777` landed as they were,
/// for any user of the host to change the workspace's files).
fn landing_mode(mode: u32, parent: u32) -> u32 {
    let group = if parent & 0o020 != 0 { 0o020 } else { 0 };
    mode & (0o755 | group)
}

/// Copies `src` into `dst` and gives it the permission bits `mode` and the source's
/// times.
fn fill(src: OwnedFd, dst: OwnedFd, st: &FileStat, mode: u32) -> Result<(), Errno> {
    let (mut src, mut dst) = (File::from(src), File::from(dst));
    if !copy_sparse(&src, &dst, st.st_size as u64)? {
        io::copy(&mut src, &mut dst)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    }
    fchmod(&dst, Mode::from_bits_truncate(mode as libc::mode_t))?;
    futimens(
        &dst,
        &TimeSpec::new(st.st_atime, st.st_atime_nsec),
        &TimeSpec::new(st.st_mtime, st.st_mtime_nsec),
    )
}

/// Copies the `len` bytes of `src` into the empty `dst` with the same holes: only the
/// data `SEEK_DATA` and `SEEK_HOLE` find is written, and the length set at the end
/// (review: a program's `truncate -s 3G`, 16 KiB in the change set, took 3.1 GB of the
/// host's disk once applied). `Ok(false)` when the file system cannot tell its holes
/// (the caller copies it whole).
#[cfg(target_os = "linux")]
fn copy_sparse(src: &File, dst: &File, len: u64) -> Result<bool, Errno> {
    use nix::unistd::{Whence, lseek};
    use std::os::unix::fs::FileExt;
    let end = i64::try_from(len).map_err(|_| Errno::EFBIG)?;
    let mut at = 0i64;
    let mut buf = vec![0u8; 1 << 16];
    while at < end {
        let data = match lseek(src, at, Whence::SeekData) {
            Ok(d) => d,
            // No data after `at`: the rest is a hole.
            Err(Errno::ENXIO) => break,
            Err(Errno::EINVAL) if at == 0 => return Ok(false),
            Err(e) => return Err(e),
        };
        let hole = lseek(src, data, Whence::SeekHole)?.min(end);
        let mut pos = data;
        while pos < hole {
            let want = usize::try_from(hole - pos).map_or(buf.len(), |n| n.min(buf.len()));
            let n = src
                .read_at(&mut buf[..want], pos as u64)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
            if n == 0 {
                // Shorter than it said: what was read is what lands.
                break;
            }
            dst.write_all_at(&buf[..n], pos as u64)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
            pos += n as i64;
        }
        at = hole;
    }
    dst.set_len(len)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    Ok(true)
}

/// Elsewhere the file is copied whole.
#[cfg(not(target_os = "linux"))]
fn copy_sparse(_src: &File, _dst: &File, _len: u64) -> Result<bool, Errno> {
    Ok(false)
}

/// Renames `tmp` over `name` in `ws`; a directory at `name` (a type change) is removed
/// first.
fn replace(ws: &OwnedFd, tmp: &OsStr, name: &OsStr) -> Result<(), Errno> {
    if let Ok(st) = fstatat(ws, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        if ftype(&st) == libc::S_IFDIR {
            fs::remove_tree(ws, name, 0)?;
        }
    }
    renameat(ws, tmp, ws, name)
}

/// Whether `name` (a path component) is another version-control system's repository data
/// ([`RefusalReason::OtherRepository`]), whatever its case.
fn other_repository_name(name: &std::ffi::OsStr) -> bool {
    [".hg", ".jj", ".pijul", "_darcs", ".fslckout", "_FOSSIL_"]
        .iter()
        .any(|n| name.as_encoded_bytes().eq_ignore_ascii_case(n.as_bytes()))
}
