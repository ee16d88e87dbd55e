//! Linux: the per-command layers, and the merge after the end.
//!
//! # Where the layer lives
//!
//! The upper layer is a tmpfs the child makes for each command (of the policy's
//! `tmp_size`, like `/tmp` inside), attached only on the setup root that `pivot_root`
//! detaches: the program cannot reach it except through the overlay. The child sends its
//! fd to the parent over a socket pair (`SCM_RIGHTS`); the parent reads the upper layer
//! through that fd once the program has ended, and closing it frees the file system.
//! Nothing is written to the host before the merge, nothing is left behind after it, and
//! a host that dies mid-run leaves nothing either. (A host directory as the upper layer
//! costs ten times as much per command: overlayfs checks its upper file system with a
//! dozen journalled operations at each mount.)
//!
//! # How the host is written
//!
//! The upper layer is the program's work: anything can be in it (symlinks, fifos,
//! devices, hard links, names of any kind, directories 40 levels deep, mode 000). So the
//! merge never resolves a path: the host's `.git` is opened with `RESOLVE_NO_SYMLINKS`
//! and its identity checked against the one the layer was made over; every directory
//! below it is opened relative to its parent with `O_NOFOLLOW | O_DIRECTORY`; every entry
//! of the upper layer is examined with `fstatat(AT_SYMLINK_NOFOLLOW)` and opened with
//! `O_NOFOLLOW | O_NONBLOCK`, then checked again on the fd. Files are written under a
//! temporary name created with `O_EXCL | O_NOFOLLOW` and then renamed over their target
//! (refs change atomically, as git's own lock files make them), or linked to it when it
//! must not exist yet (objects). The temporary name of a ref is git's own lock,
//! `<name>.lock`, so the merge and git on the host exclude each other. Modes are kept
//! without the setuid, setgid and sticky bits; times are kept (git's index compares them);
//! packs are synced before they get their names, as git's default `core.fsync` does.
//!
//! # The code
//!
//! This file holds the session (the layers of one command, from the spawn to the merge);
//! `classify` says what is merged and what is dropped, `walk` goes through one upper
//! layer and reports the drops, `read` opens and compares without following symlinks,
//! `write` makes the host's directories and copies files into place, and `submodule`
//! (with `index`, which reads git's index format) keeps an index that gained a submodule
//! out; `history` (with `objects`, which reads git's objects and packs) keeps out a ref
//! update whose new commits bring one; `refs` holds git's rules for ref names, `HEAD`,
//! loose refs, `packed-refs` and the `*_HEAD` files.
//!
//! # Read once
//!
//! Every file the merge checks (the index files, `HEAD`, each loose ref, `packed-refs`,
//! the `*_HEAD` files) is read once into memory, bounded, from one open of the upper
//! file; the check looks at those bytes and the host gets exactly them (`write_bytes`),
//! never a second read of the layer. So even a layer still written during the merge (a
//! forged end of the run) cannot put on the host bytes other than those checked.

mod classify;
pub mod config;
#[cfg(feature = "internals")]
pub mod fuzzing;
mod history;
pub(super) mod index;
pub mod objects;
mod read;
pub(super) mod refs;
pub(super) mod snapshot;
pub(super) mod submodule;
mod walk;
mod write;

#[cfg(test)]
mod tests;

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{GitConfigChange, GitConfigOutcome, GitDrop, GitDropReason, GitUnguarded};
use crate::backend::linux::prepare::GitMount;
use crate::error::{Error, PlanError};
use crate::plan::{Plan, Step};

/// The `.git` layers of one command, one slot per [`Step::GitLayer`] of its plan.
#[derive(Debug, Default)]
pub(in crate::process) struct Session {
    layers: Vec<Option<Layer>>,
    /// The socket pair the child sends each upper layer's fd through: (parent's end,
    /// child's end), until the spawn is over.
    socket: Option<(OwnedFd, OwnedFd)>,
    dropped: Vec<GitDrop>,
    /// The config variables the program changed, merged or dropped.
    config: Vec<GitConfigChange>,
    /// The `.git` links whose targets get no layer in this command.
    unguarded: Vec<GitUnguarded>,
    /// The program's pidfd, for a merge after a `Child` dropped unreaped.
    pidfd: Option<OwnedFd>,
    /// Layer 2: the writable roots' `.git` control files as they were before the run
    /// ([`snapshot`]), put back once every process of the run has ended.
    snapshots: Vec<snapshot::Held>,
    /// What the snapshots of this command may still take, all of them together.
    budget: snapshot::Budget,
    done: bool,
}

/// One layer: the host's `.git` as the parent found it, and, once the child has made
/// it, the upper layer's file system.
#[derive(Debug)]
struct Layer {
    git: PathBuf,
    identity: (u64, u64),
    mode: u32,
    /// The pack files the host had (read-only on the layer, see `freeze_pack` in the
    /// child).
    packs: Vec<PathBuf>,
    /// The `.git` symlink or file that names `git`, when it is not `.git` itself.
    link: Option<super::target::Link>,
    /// The submodule checkouts of the host's index, kept from change ([`super::checkouts`]).
    checkouts: Vec<super::checkouts::Checkout>,
    upper: Option<OwnedFd>,
}

impl Session {
    /// Notes each `.git` directory of `plan`'s [`Step::GitLayer`] steps (identity, mode,
    /// pack files), or the directory a `.git` symlink or `gitdir:` file names inside its
    /// root ([`super::target`]), and makes the socket pair their upper layers will come
    /// back through. Anything else gets no layer (the child pins a `.git` symlink or file
    /// itself). Without any layer this makes no system call beyond the `lstat`s.
    ///
    /// # Errors
    ///
    /// [`SpawnError::Os`] when the socket pair cannot be made.
    pub(in crate::process) fn prepare(plan: &Plan) -> Result<Session, Error> {
        let mut session = Session::default();
        for step in &plan.steps {
            let Step::GitLayer { path, .. } = step else {
                continue;
            };
            // A `.git` symlink or `gitdir:` file is followed into its root (`target`).
            let layer = match super::target::find(plan, path) {
                super::target::Found::Layer(t) => {
                    let root = path.parent().unwrap_or(path);
                    let (checkouts, unguarded) = super::checkouts::find(root, &t.dir);
                    for u in unguarded {
                        tracing::warn!("stockade: {u}");
                        session.unguarded.push(u);
                    }
                    Some(Layer {
                        packs: packs(&t.dir),
                        git: t.dir,
                        identity: t.identity,
                        mode: t.mode,
                        link: t.link,
                        checkouts,
                        upper: None,
                    })
                }
                super::target::Found::Nothing => None,
                super::target::Found::Unguarded(u) => {
                    tracing::warn!("stockade: {u}");
                    session.unguarded.push(u);
                    None
                }
            };
            session.layers.push(layer);
        }
        if session.layers.iter().any(Option::is_some) {
            let pair = crate::backend::linux::fd_channel("socketpair for the .git layer")?;
            session.socket = Some(pair);
        }
        Ok(session)
    }

    /// Layer 2: snapshots the control files of each `.git` in `gits`
    /// ([`Plan::git_snapshots`]), to be put back after the run ([`snapshot`]).
    ///
    /// # Errors
    ///
    /// [`SpawnError::Path`] naming the `.git`: `E2BIG` when its control files exceed the
    /// snapshot's bounds, or the errno of reading them.
    /// A `.git` symlink or `gitdir:` file is restored itself, and the directory it names
    /// is snapshotted too when it lies inside the same root and is reached without a
    /// further symlink ([`super::target`]); any other target is reported
    /// ([`Child::git_unguarded`](crate::Child::git_unguarded)).
    pub(in crate::process) fn snapshot(
        &mut self,
        plan: &Plan,
        gits: &[PathBuf],
    ) -> Result<(), Error> {
        for git in gits {
            self.snapshots
                .push(snapshot::Held::take(git, &mut self.budget)?);
            match super::target::find(plan, git) {
                super::target::Found::Layer(t) if t.link.is_some() => {
                    self.snapshots
                        .push(snapshot::Held::take(&t.dir, &mut self.budget)?);
                }
                super::target::Found::Unguarded(u) => {
                    tracing::warn!("stockade: {u}");
                    self.unguarded.push(u);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Snapshots the control files of the repositories already nested in the writable
    /// roots (`process::nested`: their `.git` directories, `.git` files or symlinks, and
    /// bare repositories), to be put back after the run like layer 2's top `.git`, on
    /// every layer: only a root's top `.git` gets a layer, so the program could otherwise
    /// rewrite `vendor/lib/.git/config` for the host's next `git add -A && git status`.
    /// All the snapshots of one run share one budget ([`snapshot::MAX_BYTES`],
    /// [`snapshot::MAX_ENTRIES`]); past it the spawn is refused, naming the repository.
    /// (Review: the budget was per repository, and 60 repositories of 31 MiB hard-linked
    /// `info/` files, which cost no disk, held 1.9 GB of the host's memory for the run.
    /// Treating the repositories past it as the program's instead let a program's own
    /// repositories, made in an earlier run, take the budget and have the host's own
    /// neutralized at every run.)
    ///
    /// # Errors
    ///
    /// [`SpawnError::Path`] as [`snapshot::Held::take`].
    pub(in crate::process) fn snapshot_nested(&mut self, repos: &[PathBuf]) -> Result<(), Error> {
        for repo in repos {
            self.snapshots
                .push(snapshot::Held::take(repo, &mut self.budget)?);
        }
        Ok(())
    }

    /// What the child needs: one entry per [`Step::GitLayer`], and its end of the socket
    /// (-1 without any layer).
    ///
    /// # Errors
    ///
    /// [`PlanError::Nul`] for a path with a NUL byte.
    pub(in crate::process) fn mounts(&self) -> Result<(Vec<Option<GitMount>>, RawFd), PlanError> {
        let mounts = self
            .layers
            .iter()
            .map(|l| {
                l.as_ref()
                    .map(|l| {
                        let link = l.link.as_ref().map(|k| k.prepare(&l.git)).transpose()?;
                        let checkouts = l
                            .checkouts
                            .iter()
                            .map(|c| c.prepare())
                            .collect::<Result<_, _>>()?;
                        Ok(GitMount::new(l.identity, l.mode, &l.packs)?
                            .with_link(link)
                            .with_checkouts(checkouts))
                    })
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        let socket = self
            .socket
            .as_ref()
            .map_or(-1, |(_, child)| child.as_raw_fd());
        Ok((mounts, socket))
    }

    /// After a successful spawn: takes the upper layers the child made (it sent them
    /// before `execve`, so they wait in the socket), and keeps a pidfd of the program so
    /// that a `Child` dropped unreaped still merges when the program ends.
    pub(in crate::process) fn started(&mut self, handle: &crate::backend::linux::init::Handle) {
        if !self.snapshots.is_empty() {
            // Layer 2: the restore waits for the init's exit.
            self.pidfd = crate::process::launch::dup_cloexec(std::os::fd::AsFd::as_fd(handle)).ok();
        }
        let Some((parent, _child)) = self.socket.take() else {
            return;
        };
        match crate::backend::linux::recv_fds(&parent) {
            Ok(fds) => {
                for (tag, fd) in fds {
                    if let Some(Some(layer)) = self.layers.get_mut(usize::from(tag)) {
                        layer.upper = Some(fd);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "stockade: the .git layers of a command could not be received; its changes under .git will be lost");
            }
        }
        // (A link's target kept read-only on purpose sends none.)
        let missing = |l: &&Layer| l.upper.is_none() && l.link.as_ref().is_none_or(|k| k.layer);
        for layer in self.layers.iter().flatten().filter(missing) {
            tracing::warn!(git = %layer.git.display(), "stockade: no copy-on-write layer over this .git in this run (no overlayfs in this kernel, or .git replaced since the spawn was prepared): it was read-only");
        }
        if self.layers.iter().flatten().any(|l| l.upper.is_some()) {
            self.pidfd = crate::process::launch::dup_cloexec(std::os::fd::AsFd::as_fd(handle)).ok();
        }
    }

    /// Merges every layer back; called once the program has been reaped. Closing the
    /// layers frees their file systems.
    pub(in crate::process) fn finish(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        // Never at the init's record alone: only once the init has exited (in a PID
        // namespace, its exit waits for every other process of it; on layer 2 the init
        // exits after it has killed and reaped every descendant), so that nothing of the
        // sandbox writes the layers, or `.git`, while they are read.
        let gone = self.pidfd.take().is_none_or(|pidfd| wait_for_exit(&pidfd));
        if gone {
            (self.dropped, self.config) = finish_layers(std::mem::take(&mut self.layers));
        } else {
            tracing::warn!(
                "stockade: the end of a sandbox could not be awaited; its changes under .git are not merged back"
            );
            self.layers.clear();
        }
        if !self.snapshots.is_empty() {
            // Layer 2: put back even when the end could not be awaited (what is put back
            // is the host's own).
            let (dropped, config) = restore(std::mem::take(&mut self.snapshots));
            self.dropped.extend(dropped);
            self.config.extend(config);
        }
    }

    /// The changes left out by [`Session::finish`].
    pub(in crate::process) fn dropped(&self) -> &[GitDrop] {
        &self.dropped
    }

    /// The config variables changed by the program, merged or dropped.
    pub(in crate::process) fn config(&self) -> &[GitConfigChange] {
        &self.config
    }

    /// The `.git` links whose targets got no layer.
    pub(in crate::process) fn unguarded(&self) -> &[GitUnguarded] {
        &self.unguarded
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.done
            || (!self.layers.iter().flatten().any(|l| l.upper.is_some())
                && self.snapshots.is_empty())
        {
            return;
        }
        let layers = std::mem::take(&mut self.layers);
        let snapshots = std::mem::take(&mut self.snapshots);
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        // A `Child` dropped without being reaped (std allows it): the program may still
        // run and write its layer. Merge once it has ended, from a thread of its own.
        let spawned = std::thread::Builder::new()
            .name("stockade-git-merge".into())
            .spawn(move || {
                if wait_for_exit(&pidfd) {
                    finish_layers(layers);
                }
                restore(snapshots);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "stockade: cannot start the thread that merges a dropped command's .git layer; its changes are lost");
        }
    }
}

/// The pack files of a host `.git` (regular files named `*.pack`, symlinks left out).
fn packs(git: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(git.join("objects/pack"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name().as_bytes().ends_with(b".pack") && e.file_type().is_ok_and(|t| t.is_file())
        })
        .map(|e| e.path())
        .collect()
}

/// Polls the pidfd until the program has exited. With its PID namespace gone, nothing
/// writes the layer any more: the kernel kills and reaps every other process of the
/// namespace before PID 1's exit is reported.
pub(in crate::process) fn wait_for_exit(pidfd: &OwnedFd) -> bool {
    crate::backend::linux::init::wait_exited(pidfd.as_fd())
}

/// Layer 2: puts back each snapshot, logs each restoration, returns them with the config
/// variables the program changed (the allowlisted ones kept).
fn restore(snapshots: Vec<snapshot::Held>) -> (Vec<GitDrop>, Vec<GitConfigChange>) {
    let mut restored = Vec::new();
    let mut config = Vec::new();
    for s in snapshots {
        let (drops, changes) = s.restore();
        for d in drops {
            tracing::warn!(path = %d.path.display(), reason = %d.reason, "stockade: a change under .git was undone (layer 2)");
            restored.push(d);
        }
        log_config(&changes);
        config.extend(changes);
    }
    (restored, config)
}

/// Logs each config change, merged or dropped.
fn log_config(changes: &[GitConfigChange]) {
    for c in changes {
        if c.outcome == GitConfigOutcome::Merged {
            tracing::info!(path = %c.path.display(), name = %c.name, "stockade: a config change was merged back to the host");
        } else {
            tracing::warn!(path = %c.path.display(), name = %c.name, outcome = ?c.outcome, "stockade: a config change was not merged back to the host");
        }
    }
}

/// Merges a change set's `upper/.git` (read through the directory fd `upper`) into the
/// host's `.git` at `git`, by the walk and the validation of a command's layer: objects
/// added, refs, reflogs, the index, `HEAD` and git's state files checked and written,
/// the allowlisted config changes merged, everything else (hooks, the rest of `config`,
/// `info/`, anything not a file) dropped and reported. Never a raw copy.
///
/// The paths `keep_out` (relative to `.git`: the caller's refusals, such as guarded
/// names it was not allowed to apply) are left out, and not reported as drops.
///
/// # Errors
///
/// The errno of opening the host's `.git` (without following a symlink) or of its `fstat`.
pub(crate) fn merge_git_upper(
    upper: &OwnedFd,
    git: &Path,
    keep_out: Vec<PathBuf>,
) -> Result<(Vec<GitDrop>, Vec<GitConfigChange>), nix::errno::Errno> {
    let host = read::open_beneath_root(git)?;
    let st = nix::sys::stat::fstat(&host)?;
    Ok(walk::merge_dir(
        git,
        (st.st_dev, st.st_ino),
        upper,
        keep_out,
    ))
}

/// Merges each layer, logs each drop and config change, returns the drops and the config
/// changes. The layers (and their file systems) go when this returns.
fn finish_layers(layers: Vec<Option<Layer>>) -> (Vec<GitDrop>, Vec<GitConfigChange>) {
    let mut dropped = Vec::new();
    let mut config = Vec::new();
    for layer in layers.into_iter().flatten() {
        let (drops, changes) = layer.merge();
        for d in &drops {
            tracing::warn!(path = %d.path.display(), reason = %d.reason, "stockade: a change under .git was not merged back to the host");
        }
        log_config(&changes);
        dropped.extend(drops);
        config.extend(changes);
    }
    (dropped, config)
}
