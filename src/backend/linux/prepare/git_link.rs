//! Parent side of a `.git` symlink or `gitdir:` file that names repository metadata inside
//! its writable root (see `crate::process::gitlayer::target`): what the child pins and where
//! it finds the directory to layer.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use super::{NEW_ROOT, cstr, under};
use crate::error::PlanError;

/// A `.git` symlink or file whose target the child layers (or keeps read-only).
#[derive(Debug)]
pub struct GitLink {
    /// `(st_dev, st_ino)` of the symlink or file: one found with another identity is
    /// pinned but not followed.
    pub identity: (u64, u64),
    /// `/newroot/<dir>`: the directory it names, a path without symlinks or `..`.
    pub target: CString,
    /// `/newroot/<dir>` for each directory its path passes through strictly between the
    /// root and the target, parents first: bound onto themselves, so that none can be
    /// renamed away and the link made to name another directory.
    pub pins: Vec<CString>,
    /// Layer the target; else bind it read-only.
    pub layer: bool,
}

impl GitLink {
    /// The link with `identity` naming `target`, through `pins` (host paths, the same
    /// inside).
    ///
    /// # Errors
    ///
    /// [`PlanError::Nul`] when a path contains a NUL byte.
    pub fn new(
        identity: (u64, u64),
        target: &Path,
        pins: &[PathBuf],
        layer: bool,
    ) -> Result<Self, PlanError> {
        Ok(GitLink {
            identity,
            target: cstr(&under(NEW_ROOT, target))?,
            pins: pins
                .iter()
                .map(|p| cstr(&under(NEW_ROOT, p)))
                .collect::<Result<_, _>>()?,
            layer,
        })
    }
}

/// A submodule checkout that the host's index lists under a layered `.git`'s worktree
/// (see `crate::process::gitlayer::checkouts`): the directories on its path pinned, then
/// its `.git` (or what that names inside the root, or the checkout itself when it has no
/// `.git`) bound read-only onto itself.
#[derive(Debug)]
pub struct GitCheckout {
    /// `/newroot/<dir>` for each directory between the root and `guard`, parents first:
    /// bound onto themselves, so that none can be renamed away.
    pub pins: Vec<CString>,
    /// `/newroot/<path>`: bound read-only onto itself (recursively for a directory).
    pub guard: CString,
}

impl GitCheckout {
    /// The checkout guard for `guard` through `pins` (host paths, the same inside).
    ///
    /// # Errors
    ///
    /// [`PlanError::Nul`] when a path contains a NUL byte.
    pub fn new(pins: &[PathBuf], guard: &Path) -> Result<Self, PlanError> {
        Ok(GitCheckout {
            pins: pins
                .iter()
                .map(|p| cstr(&under(NEW_ROOT, p)))
                .collect::<Result<_, _>>()?,
            guard: cstr(&under(NEW_ROOT, guard))?,
        })
    }
}
