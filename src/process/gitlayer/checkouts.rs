//! Linux: the submodule checkouts of a layered repository, kept from change per command.
//!
//! # Why
//!
//! Git on the host runs git in every submodule checkout its index lists (`git status`,
//! `diff`, `commit`), with the git dir that the checkout's own `<path>/.git` names and the
//! config and hooks there. The checkout lies in the writable root: a program that
//! rewrites `<path>/.git` (or, for an uninitialized submodule, creates it) points the
//! host's git at a config of its own. The merge keeps gitlink entries the host did not
//! have out of its index (`merge/submodule.rs`); this keeps the existing ones.
//!
//! # What is kept
//!
//! For each gitlink path of the host's index (read when the command is prepared), below
//! the worktree of a layered `.git`, reached from the root without a symlink:
//!
//! - `<path>/.git` a directory: bound read-only onto itself, recursively;
//! - `<path>/.git` a `gitdir:` file or a symlink: bound read-only onto itself; what it
//!   names is covered by the layer when it lies in the layered git dir (the usual
//!   `.git/modules/<name>`), bound read-only when it is another directory in the root,
//!   and reported ([`GitUnguarded`]) when it cannot be reached without a symlink;
//! - no `<path>/.git` (a submodule not checked out, normally an empty directory): the
//!   directory `<path>` read-only, so that no `.git` appears there.
//!
//! The directories on the way are pinned (bound onto themselves), so that none can be
//! renamed and another put in its place. Git inside can still read the submodules, not
//! commit in them. Not covered: a gitlink path whose directory is missing or reached
//! through a symlink (reported), and submodules of submodules.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::merge::submodule::host_gitlinks;
use super::target::{gitdir, resolve};
use super::{GitUnguarded, GitUnguardedReason};
use crate::backend::linux::prepare::GitCheckout;
use crate::error::PlanError;

/// At most this many checkouts are guarded per repository (each costs mounts).
const MAX: usize = 256;

/// One guarded path and the directories leading to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::process) struct Checkout {
    pins: Vec<PathBuf>,
    guard: PathBuf,
}

impl Checkout {
    /// What the child needs.
    ///
    /// # Errors
    ///
    /// [`PlanError::Nul`] for a path with a NUL byte.
    pub(in crate::process) fn prepare(&self) -> Result<GitCheckout, PlanError> {
        GitCheckout::new(&self.pins, &self.guard)
    }
}

/// The checkouts to guard for the worktree `root` of the git dir `git` (layered), and the
/// ones that cannot be guarded, reported.
pub(in crate::process) fn find(root: &Path, git: &Path) -> (Vec<Checkout>, Vec<GitUnguarded>) {
    let mut out = Vec::new();
    let mut unguarded = Vec::new();
    let links = host_gitlinks(git).unwrap_or_else(|why| {
        tracing::debug!(why, "stockade: the host's index cannot be read");
        unguarded.push(GitUnguarded {
            path: git.join("index"),
            target: git.to_path_buf(),
            reason: GitUnguardedReason::UnreadableIndex,
        });
        Default::default()
    });
    for path in links {
        let rel = Path::new(std::ffi::OsStr::from_bytes(&path));
        // Git refuses paths with `..`, `.` or a leading `/` in an index; so does this.
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            continue;
        }
        if out.len() >= MAX {
            // Reported like any checkout that cannot be guarded (ENOSPC: no room left).
            let dir = root.join(rel);
            unguarded.push(GitUnguarded {
                path: dir.join(".git"),
                target: dir,
                reason: GitUnguardedReason::Submodule(libc::ENOSPC),
            });
            continue;
        }
        if let Err(u) = checkout(root, git, &root.join(rel), &mut out) {
            unguarded.push(u);
        }
    }
    (out, unguarded)
}

/// Adds the guards of the checkout `dir` to `out`; what cannot be guarded is the error
/// (after the guards that can).
fn checkout(
    root: &Path,
    git: &Path,
    dir: &Path,
    out: &mut Vec<Checkout>,
) -> Result<(), GitUnguarded> {
    let dot_git = dir.join(".git");
    let unresolved = |target: &Path, e: nix::errno::Errno| GitUnguarded {
        path: dot_git.clone(),
        target: target.to_path_buf(),
        reason: GitUnguardedReason::Submodule(e as i32),
    };
    let (dir, _, visited) = resolve(dir).map_err(|e| unresolved(dir, e))?;
    let pins = pins(root, &visited, &dir);
    let Ok(md) = std::fs::symlink_metadata(&dot_git) else {
        // Not checked out: the directory itself, so that no `.git` appears in it.
        out.push(Checkout { pins, guard: dir });
        return Ok(());
    };
    let mut with_dir = pins;
    with_dir.push(dir.clone());
    out.push(Checkout {
        pins: with_dir,
        guard: dot_git.clone(),
    });
    let written = if md.file_type().is_symlink() {
        std::fs::read_link(&dot_git).ok()
    } else if md.is_file() {
        gitdir(&dot_git)
    } else {
        return Ok(());
    };
    let Some(written) = written else {
        return Ok(());
    };
    let named = dir.join(written);
    let (target, _, visited) = resolve(&named).map_err(|e| unresolved(&named, e))?;
    if target.starts_with(git) || !target.starts_with(root) || target == root {
        // In the layer (merged without config or hooks), or outside the root (as
        // writable as the layout makes it, like a top `.git` link's target).
        return Ok(());
    }
    out.push(Checkout {
        pins: self::pins(root, &visited, &target),
        guard: target,
    });
    Ok(())
}

/// The directories of `visited` strictly between `root` and `end`, parents first.
fn pins(root: &Path, visited: &[PathBuf], end: &Path) -> Vec<PathBuf> {
    let mut pins: Vec<PathBuf> = visited
        .iter()
        .filter(|p| p.starts_with(root) && *p != root && *p != end && end.starts_with(p))
        .cloned()
        .collect();
    pins.sort();
    pins.dedup();
    pins
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_WORK_TREE")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    #[test]
    fn each_kind_of_checkout_gets_its_guard() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        git(&root, &["init", "-q"]);
        let sha = "0123456789abcdef0123456789abcdef01234567";
        for p in [
            "a/dir", "a/file", "empty", "missing", "inside", "link", "nowhere",
        ] {
            let info = format!("160000,{sha},{p}");
            git(&root, &["update-index", "--add", "--cacheinfo", &info]);
        }
        std::fs::create_dir_all(root.join("a/dir/.git")).unwrap();
        std::fs::create_dir_all(root.join("a/file")).unwrap();
        std::fs::create_dir_all(root.join(".git/modules/f")).unwrap();
        std::fs::write(root.join("a/file/.git"), "gitdir: ../../.git/modules/f\n").unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::create_dir_all(root.join("inside")).unwrap();
        std::fs::create_dir_all(root.join("store/m")).unwrap();
        std::fs::write(root.join("inside/.git"), "gitdir: ../store/m\n").unwrap();
        std::os::unix::fs::symlink("empty", root.join("link")).unwrap();
        std::fs::create_dir_all(root.join("nowhere")).unwrap();
        std::fs::write(root.join("nowhere/.git"), "gitdir: ../gone\n").unwrap();
        let (found, unguarded) = find(&root, &root.join(".git"));
        let c = |pins: &[&str], guard: &str| Checkout {
            pins: pins.iter().map(|p| root.join(p)).collect(),
            guard: root.join(guard),
        };
        assert_eq!(
            found,
            [
                c(&["a", "a/dir"], "a/dir/.git"),
                c(&["a", "a/file"], "a/file/.git"),
                c(&[], "empty"),
                c(&["inside"], "inside/.git"),
                c(&["store"], "store/m"),
                // Its `.git` names nothing: kept, and reported.
                c(&["nowhere"], "nowhere/.git"),
            ]
        );
        let reasons: Vec<_> = unguarded
            .iter()
            .map(|u| (u.path.clone(), u.reason))
            .collect();
        assert_eq!(
            reasons,
            [
                (
                    root.join("link/.git"),
                    GitUnguardedReason::Submodule(libc::ELOOP)
                ),
                (
                    root.join("missing/.git"),
                    GitUnguardedReason::Submodule(libc::ENOENT)
                ),
                (
                    root.join("nowhere/.git"),
                    GitUnguardedReason::Submodule(libc::ENOENT)
                ),
            ]
        );
    }
}
