//! The data dir's identity, pinned when a sandbox is prepared and checked at each spawn.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::PlanError;

/// The data dir's identity, pinned: a spawn refuses to run if the directory was replaced.
/// It must exist: stockade never writes to the host, and a data dir missing under a
/// writable root could be created (and filled) by the program for the host to trust later.
pub(super) fn pin_data_dir(d: &Path) -> Result<(PathBuf, (u64, u64)), PlanError> {
    use std::os::unix::fs::MetadataExt;
    let err = |source| PlanError::Path {
        key: "data_dir",
        path: d.to_path_buf(),
        source,
    };
    let md = std::fs::symlink_metadata(d).map_err(err)?;
    if !md.is_dir() {
        return Err(err(io::Error::from_raw_os_error(libc::ENOTDIR)));
    }
    Ok((d.to_path_buf(), (md.dev(), md.ino())))
}

/// Refuses a spawn when the data dir is no longer the directory pinned at creation.
pub(super) fn check_data_dir(path: &Path, id: (u64, u64)) -> Result<(), PlanError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.is_dir() && (md.dev(), md.ino()) == id => Ok(()),
        _ => Err(PlanError::DataDirChanged(path.to_path_buf())),
    }
}
