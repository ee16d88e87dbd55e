//! The `.git` layer: what a sandboxed program may leave in a repository's metadata.
//!
//! # The hole it closes
//!
//! Git on the host runs commands that `.git` names: hooks, `core.fsmonitor`,
//! `core.hooksPath`, `core.sshCommand`, filter drivers, and more, all from config. Keeping
//! `.git/hooks` and `.git/config` read-only is not enough: a program redirects the host's
//! git to a config and hooks it controls through `.git/commondir`, `.git/config.worktree`
//! (read when the host enables `extensions.worktreeConfig`), `.git/worktrees/<name>/…`
//! (read by git in a linked worktree), `.git/modules/<name>/…` (read by git in a
//! submodule, and by `git status` in the superproject), or a hooks directory the
//! repository did not have; `objects/info/alternates` feeds it objects from elsewhere.
//!
//! # The design
//!
//! On the full layer `.git` is seen through a copy-on-write overlay, made per command in
//! the sandbox's user namespace ([`crate::plan::Step::GitLayer`]): everything git does
//! inside works, `git commit` included, and its writes land in an upper layer: a tmpfs of
//! the command's own that the program reaches only through the overlay, and that the
//! parent holds by fd. When the program has ended (every process of its PID namespace is
//! gone, so the layer is no longer written), the parent merges back what is data to git
//! and cannot make it run anything:
//!
//! - the object database: `objects/` except `objects/info/` (alternates, commit-graph);
//!   files are only ever added, never replaced or deleted (a name git already has keeps
//!   the host's content). Objects are not verified: their integrity is the program's, as
//!   the history it writes is (SECURITY.md);
//! - refs and reflogs: `refs/`, `logs/`, `reftable/`, `packed-refs`, with deletions
//!   (a branch deleted inside is deleted on the host);
//! - `HEAD`, `index` (and split-index `sharedindex.*` files), the `*_HEAD` files
//!   (`ORIG_HEAD`, `FETCH_HEAD`, `MERGE_HEAD`, …), the `*_EDITMSG` messages, and the
//!   merge-state messages `MERGE_MSG`, `MERGE_MODE`, `SQUASH_MSG`, `AUTO_MERGE`.
//!
//! Each of these files that git reads as refs is held to git's own rules before it lands
//! (`merge/refs.rs`): `HEAD` and each loose ref are an object id of the host's hash or a
//! symbolic ref to a valid name under `refs/`, `packed-refs` and the `*_HEAD` files are in
//! git's format; replacement refs (`refs/replace/`) never land. Each file the merge checks
//! is read once, and exactly the bytes checked are written.
//!
//! Of `config`, only an allowlist of variables merges (`merge/config.rs`): `user.name`,
//! `user.email`, `remote.<name>.url|pushurl|fetch` and `branch.<name>.remote|merge`, each
//! value held to its rule, the program's file read once by a strict parser of git's
//! grammar, the host's rewritten under its `config.lock` with every other byte kept; each
//! changed variable is listed by [`Child::git_config`].
//!
//! Every other change is dropped and reported ([`Child::git_dropped`], and a `tracing`
//! warning each): the rest of config, hooks, `commondir`, `config.worktree`, `info/`, `worktrees/`,
//! `modules/`, an unfinished rebase's todo list (whose `exec` lines git would run), lock
//! files of an interrupted git, and anything that is not a regular file or directory.
//!
//! A `.git` symlink or `gitdir:` file is pinned, and the directory it names is layered the
//! same way when it lies inside the same writable root (see `target.rs`); any other target
//! is reported ([`Child::git_unguarded`]).
//!
//! Git on the host also runs git in every submodule checkout its index lists, with the git
//! dir the checkout's `.git` names. So the index is merged back only when it lists no
//! submodule path the host's did not (`merge/submodule.rs`, reading git's index format in
//! `merge/index.rs`), and the checkouts the host's index lists are kept from change for
//! the run (`checkouts.rs`).
//!
//! # Layer 2
//!
//! Without namespaces there is no overlay, and Landlock cannot keep part of a writable
//! workspace read-only: the program writes the host's `.git` itself. So the control files
//! (config, `config.worktree`, `commondir`, `gitdir`, hooks, `info/`, alternates, the same
//! in every git dir under `worktrees/` and `modules/`, a `.git` symlink or `gitdir:` file
//! and the directory it names inside the root) are snapshotted before each command and put
//! back once the init has exited, every process of the run with it
//! (`merge/snapshot.rs`); each restoration is reported ([`GitDropReason::Restored`]).
//! Objects, refs, the index and `HEAD` are the program's to write, as on the full layer.
//! Host git run while the command runs sees the program's changes (SECURITY.md).

use std::fmt;
use std::path::PathBuf;

use super::Child;

#[cfg(target_os = "linux")]
pub(super) mod checkouts;
#[cfg(target_os = "linux")]
pub(super) mod merge;
#[cfg(target_os = "linux")]
pub(super) mod target;

/// A change a sandboxed program made under a repository's `.git` that was not merged
/// back to the host (see [`Child::git_dropped`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitDrop {
    /// The host path the change was made to (`<workspace>/.git/config`).
    pub path: PathBuf,
    /// Why it stayed out.
    pub reason: GitDropReason,
}

/// Why a change under `.git` was not merged back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GitDropReason {
    /// Outside what is merged back: config, hooks, `commondir`, `config.worktree`,
    /// `info/`, `worktrees/`, `modules/`, `objects/info/`, an unfinished rebase; also the
    /// deletion of `HEAD` or of a whole `objects/`, `refs/` or `logs/`.
    NotMerged,
    /// Not a regular file or a directory: a symlink, a fifo, a socket or a device.
    NotAFile,
    /// A lock or temporary file that an interrupted git left behind.
    Temporary,
    /// A deletion or a rewrite in the object database: objects are only ever added (a
    /// name the host has keeps the host's content).
    ObjectChange,
    /// Git on the host held the lock of this file (`<file>.lock` existed) at merge time.
    Locked,
    /// The host's `.git` was not the directory the layer was made over when the run
    /// ended (replaced, or made a symlink): nothing was merged into it.
    Replaced,
    /// The index (or a split index's `sharedindex.*` file): it lists a submodule (a
    /// gitlink entry) at a path the host's index did not. Git on the host would run git in
    /// that checkout, with a config and hooks the program wrote, at the next `git status`;
    /// the host keeps its index.
    NewSubmodule,
    /// The index (or a split index's `sharedindex.*` file): it cannot be read (an index
    /// version or format this check does not know, or not one at all), so whether it lists
    /// a new submodule is unknown; the host keeps its index.
    UnreadableIndex,
    /// The index (or a split index's `sharedindex.*` file): an entry's path is one git
    /// itself refuses (`..`, `.git` in any case, an absolute path, a symlinked
    /// `.gitmodules`). `git restore` on the host would write that entry outside the
    /// workspace or into `.git`; the host keeps its index.
    UnsafeIndexPath,
    /// A replacement ref (`refs/replace/…`, its reflog `logs/refs/replace/…`, or such a
    /// line of `packed-refs`): git on the host would read other content for an object
    /// (`git show v1:a`) while `git fsck` passes. Never merged.
    ReplaceRef,
    /// `HEAD`, a loose ref, `packed-refs` or a `*_HEAD` file whose name or content git's
    /// own rules refuse (a `HEAD` that is no ref makes git on the host walk up to an
    /// enclosing repository): the host keeps its own.
    InvalidRef,
    /// Larger than the merge reads of a file it checks (the index, a ref file).
    TooLarge,
    /// A ref, `packed-refs`, `HEAD`, a `*_HEAD` file, `AUTO_MERGE` or a reflog: an id it
    /// names reaches a new tree with a gitlink (submodule) at a path that is not one in the
    /// host's index. A later `git reset --hard`, `stash pop`, `checkout` or `merge` on the
    /// host would bring it into the index, and `git status` would run git in that checkout
    /// with a config the program wrote; the host keeps its ref.
    NewSubmoduleInHistory,
    /// A ref file as [`GitDropReason::NewSubmoduleInHistory`]: an object it reaches that
    /// the host does not have cannot be found or read (or is beyond the check's bounds),
    /// so whether it brings a new submodule is unknown; the host keeps its ref.
    UnreadableHistory,
    /// Layer 2 (no `.git` layer): the program changed, made or removed this control file
    /// or directory (config, hooks, `commondir`, `info/`, `worktrees/`, `modules/`,
    /// alternates, a `gitdir:` file); after the run it was put back as it was before.
    Restored,
    /// `config`: this many changed variables (set, changed or removed) were outside the
    /// allowlist merged back, or had a value its rule refuses; each is listed by
    /// [`Child::git_config`]. The allowlisted ones merged.
    ConfigKeys(usize),
    /// `config`: the program's config (or the host's) is not plainly git's config syntax
    /// (a control byte, a legacy `[section.sub]` header, an unknown escape, an unterminated
    /// quote, a key before any section, …) or is larger than the merge reads: none of its
    /// changes merged.
    UnreadableConfig,
    /// Merging it (or, on layer 2, putting it back) failed with this errno.
    Failed(i32),
    /// This many more changes, not listed: at most [`GitDrop::MAX_REPORTED`] are, per
    /// repository.
    More(usize),
}

impl GitDrop {
    /// At most this many dropped changes are listed per repository and run; the rest are
    /// counted in one [`GitDropReason::More`].
    pub const MAX_REPORTED: usize = 1000;
}

impl fmt::Display for GitDropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GitDropReason::NotMerged => f.write_str("not merged back (only objects, refs, reflogs, index, HEAD and the *_HEAD and message files are)"),
            GitDropReason::NotAFile => f.write_str("not a regular file or directory"),
            GitDropReason::Temporary => f.write_str("a lock or temporary file"),
            GitDropReason::ObjectChange => f.write_str(
                "a deletion or rewrite in the object database (objects are only added)",
            ),
            GitDropReason::Locked => f.write_str("locked by git on the host"),
            GitDropReason::Replaced => {
                f.write_str("the host's .git was replaced during the run; nothing merged")
            }
            GitDropReason::NewSubmodule => f.write_str(
                "the index lists a submodule the host's index did not (git on the host would run the program's config in its checkout); the host's index is kept",
            ),
            GitDropReason::UnreadableIndex => f.write_str(
                "the index cannot be read to check it for new submodules; the host's index is kept",
            ),
            GitDropReason::UnsafeIndexPath => f.write_str(
                "the index lists a path git refuses (.., .git, absolute): git restore on the host would write outside the workspace or into .git; the host's index is kept",
            ),
            GitDropReason::ReplaceRef => f.write_str(
                "a replacement ref (refs/replace/): git on the host would show other content for an object; never merged",
            ),
            GitDropReason::InvalidRef => f.write_str(
                "a ref, HEAD or packed-refs that git's rules refuse (name or content); the host keeps its own",
            ),
            GitDropReason::TooLarge => {
                f.write_str("larger than the merge reads to check it; the host keeps its own")
            }
            GitDropReason::NewSubmoduleInHistory => f.write_str(
                "a commit it names brings a submodule the host's index does not list (a later checkout would run the program's config in it); the host keeps its ref",
            ),
            GitDropReason::UnreadableHistory => f.write_str(
                "an object it names cannot be read to check it for new submodules; the host keeps its ref",
            ),
            GitDropReason::Restored => f.write_str(
                "changed during the run (layer 2 has no .git layer); put back as it was before",
            ),
            GitDropReason::ConfigKeys(n) => write!(
                f,
                "{n} config changes not merged back (outside user.name, user.email, remote.<name>.url|pushurl|fetch and branch.<name>.remote|merge, or a value those refuse)"
            ),
            GitDropReason::UnreadableConfig => f.write_str(
                "a config that is not plainly git's syntax, or too large; none of its changes merged",
            ),
            GitDropReason::Failed(errno) => {
                write!(f, "merge failed: {}", crate::error::strerror(*errno))
            }
            GitDropReason::More(n) => write!(f, "{n} more changes, not listed"),
        }
    }
}

impl fmt::Display for GitDrop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// A variable the program set, changed or removed in a repository's `.git/config`, and
/// whether it was merged back (see [`Child::git_config`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitConfigChange {
    /// The host's config file (`<workspace>/.git/config`).
    pub path: PathBuf,
    /// The variable as `git config` names it (`remote.origin.url`, `user.name`); bytes that
    /// are not UTF-8 are shown as U+FFFD.
    pub name: String,
    /// Whether it merged, and if not, why.
    pub outcome: GitConfigOutcome,
}

/// What became of a change to `.git/config`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GitConfigOutcome {
    /// Merged into the host's config: set, changed or removed there as the program left it.
    Merged,
    /// Not on the allowlist (`core.*`, `alias.*`, `include.path`, `credential.*`, …):
    /// dropped.
    NotAllowed,
    /// On the allowlist, but a value (or the remote's or branch's name) fails its rule (a
    /// URL with a transport helper, `file://`, a local path or a leading `-`; a refspec
    /// outside `refs/remotes/<name>/`; a control character): dropped.
    InvalidValue,
}

impl fmt::Display for GitConfigChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.outcome {
            GitConfigOutcome::Merged => "merged back",
            GitConfigOutcome::NotAllowed => "dropped (not on the allowlist)",
            GitConfigOutcome::InvalidValue => "dropped (a value its rule refuses)",
        };
        write!(f, "{}: {}: {what}", self.path.display(), self.name)
    }
}

/// A writable root's `.git` that is a symlink or a `gitdir:` file whose repository
/// metadata a command runs without the `.git` layer on, or the `.git` of a submodule
/// checkout that the run cannot keep from change (see [`Child::git_unguarded`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitUnguarded {
    /// `<root>/.git`, or `<root>/<submodule>/.git`.
    pub path: PathBuf,
    /// What it names, as an absolute path (a relative one joined to the root).
    pub target: PathBuf,
    /// Why it gets no layer.
    pub reason: GitUnguardedReason,
}

/// Why the repository metadata a `.git` symlink or file names gets no `.git` layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GitUnguardedReason {
    /// A directory outside the writable root: it is as writable inside as the rest of the
    /// layout makes it, which for a path outside every writable root is not at all (a
    /// linked worktree's git dir in its main repository, say).
    Outside,
    /// The writable root itself.
    Root,
    /// Not reachable without following a further symlink, or nothing git can use there:
    /// the errno of opening it (`ELOOP`, `ENOENT`, `ENOTDIR`, …). If the program creates
    /// it, the host's git may later use what the program wrote.
    Unresolved(i32),
    /// A submodule checkout that the host's index lists, whose directory (`target`), or
    /// what its `.git` names (`target`), cannot be opened without following symlinks: the
    /// errno (`ENOENT` for a submodule whose directory is missing). The program may make
    /// it, with a `.git` of its own, and git on the host then runs git there. `ENOSPC`:
    /// one past the number of checkouts guarded per repository (256).
    Submodule(i32),
    /// The host's index (`path`) cannot be read (a format stockade's reader does not
    /// follow, such as a sparse index or one with an entry offset table, or a path git
    /// refuses): which submodule checkouts git on the host would enter is unknown, so none
    /// is guarded.
    UnreadableIndex,
}

impl fmt::Display for GitUnguarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (path, target) = (self.path.display(), self.target.display());
        match self.reason {
            GitUnguardedReason::Outside => write!(
                f,
                "{path} names {target}, outside its writable root: no .git layer on it in this run"
            ),
            GitUnguardedReason::Root => write!(
                f,
                "{path} names its writable root {target}: no .git layer on it in this run"
            ),
            GitUnguardedReason::Unresolved(errno) => write!(
                f,
                "{path} names {target}, which cannot be opened as a directory without following symlinks: {}; no .git layer on it in this run",
                crate::error::strerror(errno)
            ),
            GitUnguardedReason::Submodule(libc::ENOSPC) => write!(
                f,
                "submodule checkout {path}: not guarded (more submodules than stockade guards per repository); the program may change it, and git on the host would use it"
            ),
            GitUnguardedReason::UnreadableIndex => write!(
                f,
                "{path} cannot be read: the submodule checkouts it may list are not guarded; the program may change them, and git on the host would use them"
            ),
            GitUnguardedReason::Submodule(errno) => write!(
                f,
                "submodule checkout {path}: {target} cannot be opened without following symlinks: {}; the program may make it, and git on the host would use it",
                crate::error::strerror(errno)
            ),
        }
    }
}

impl Child {
    /// The writable roots' `.git` symlinks and `gitdir:` files whose repository metadata
    /// this command runs without the `.git` layer on, and the submodule checkouts (listed
    /// by the host's index) that it cannot keep from change, known from the spawn on. Each
    /// is also logged as a `tracing` warning. The link or file itself is kept from change
    /// (bound read-only onto itself) either way; what it names is layered like a `.git`
    /// directory when it is a directory inside the same writable root, reached without
    /// following any further symlink.
    ///
    /// # Platform
    ///
    /// Linux, full layer and layer 2 (whose snapshot follows a `.git` link the same way):
    /// elsewhere this is always empty.
    pub fn git_unguarded(&self) -> &[GitUnguarded] {
        self.git.unguarded()
    }

    /// The changes the program made under a repository's `.git` that were not merged back
    /// to the host. A host should relay them (and [`Child::git_config`]) to the agent or
    /// user that drives the program: what `git config`, `git remote add` or a hook install
    /// did inside is otherwise silently gone in the next command. Known once the program
    /// has been waited for ([`Child::wait`],
    /// [`Child::try_wait`] returning a status, [`Child::wait_with_output`]). Each is also
    /// logged as a `tracing` warning. Empty when nothing was dropped, and before the end.
    ///
    /// A `Child` dropped without waiting still merges when the program ends (from a
    /// thread of its own), and its drops are only logged. If the host process exits first,
    /// the program dies with it (`PR_SET_PDEATHSIG`) and its changes under `.git` are lost
    /// (nothing is left behind: the layer lived in memory).
    ///
    /// # Platform
    ///
    /// Linux, full layer; and layer 2, which cannot keep `.git` apart during the run: its
    /// control files are put back after it, each listed as [`GitDropReason::Restored`]
    /// (see SECURITY.md). Elsewhere this is always empty.
    pub fn git_dropped(&self) -> &[GitDrop] {
        self.git.dropped()
    }

    /// The variables the program set, changed or removed in a repository's `.git/config`,
    /// each merged back or dropped, known when [`Child::git_dropped`] is. A host should
    /// relay the dropped ones (and [`Child::git_dropped`]) to the program's user or agent:
    /// otherwise a `git config` or `git remote add` that "worked" inside is gone in the
    /// next command, without a word.
    ///
    /// Merged back, on the full layer, are only `user.name`, `user.email`,
    /// `remote.<name>.url`, `remote.<name>.pushurl`, `remote.<name>.fetch`,
    /// `branch.<name>.remote` and `branch.<name>.merge`, each value checked (plain
    /// `https://`, `ssh://`, `git://` or scp-like URLs; refspecs into
    /// `refs/remotes/<name>/`; names git's ref rules take). See SECURITY.md.
    ///
    /// # Platform
    ///
    /// Linux: the full layer, and layer 2, whose snapshot puts the config back with the
    /// same allowlisted changes merged in (any other change: [`GitDropReason::Restored`]).
    /// Elsewhere it is always empty.
    pub fn git_config(&self) -> &[GitConfigChange] {
        self.git.config()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unguarded_links_read_plainly() {
        let u = GitUnguarded {
            path: "/ws/.git".into(),
            target: "/ws/gone".into(),
            reason: GitUnguardedReason::Unresolved(libc::ENOENT),
        };
        assert_eq!(
            u.to_string(),
            "/ws/.git names /ws/gone, which cannot be opened as a directory without following symlinks: No such file or directory; no .git layer on it in this run"
        );
        let at = |target: &str, reason| GitUnguarded {
            path: "/ws/.git".into(),
            target: target.into(),
            reason,
        };
        assert_eq!(
            at("/main/.git/worktrees/ws", GitUnguardedReason::Outside).to_string(),
            "/ws/.git names /main/.git/worktrees/ws, outside its writable root: no .git layer on it in this run"
        );
        assert_eq!(
            at("/ws", GitUnguardedReason::Root).to_string(),
            "/ws/.git names its writable root /ws: no .git layer on it in this run"
        );
        let sub = GitUnguarded {
            path: "/ws/sub/.git".into(),
            target: "/ws/sub".into(),
            reason: GitUnguardedReason::Submodule(libc::ENOENT),
        };
        assert_eq!(
            sub.to_string(),
            "submodule checkout /ws/sub/.git: /ws/sub cannot be opened without following symlinks: No such file or directory; the program may make it, and git on the host would use it"
        );
    }

    #[test]
    fn reasons_read_plainly() {
        let d = GitDrop {
            path: "/ws/.git/config".into(),
            reason: GitDropReason::Failed(libc::ENOSPC),
        };
        assert_eq!(
            d.to_string(),
            "/ws/.git/config: merge failed: No space left on device"
        );
        assert_eq!(
            GitDropReason::More(3).to_string(),
            "3 more changes, not listed"
        );
        for (reason, starts) in [
            (
                GitDropReason::ReplaceRef,
                "a replacement ref (refs/replace/)",
            ),
            (
                GitDropReason::InvalidRef,
                "a ref, HEAD or packed-refs that git's rules refuse",
            ),
            (
                GitDropReason::TooLarge,
                "larger than the merge reads to check it",
            ),
        ] {
            assert!(reason.to_string().starts_with(starts), "{reason:?}");
        }
    }
}
