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
