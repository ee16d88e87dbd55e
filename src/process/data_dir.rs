//! The data dir's identity, pinned when a sandbox is prepared (`plan::select`) and checked
//! at each spawn.

use std::path::Path;

use crate::error::PlanError;

/// Refuses a spawn when the data dir is no longer the directory pinned at creation.
pub(super) fn check_data_dir(path: &Path, id: (u64, u64)) -> Result<(), PlanError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.is_dir() && (md.dev(), md.ino()) == id => Ok(()),
        _ => Err(PlanError::DataDirChanged(path.to_path_buf())),
    }
}
