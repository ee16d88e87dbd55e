//! The tools dir listing, for a host's dashboard.
//!
//! The tools dir (`tools_dir` in the policy) is bound read-only into the sandbox and put first
//! on `PATH`. [`tools_listing`] says what is in it: every regular file with an execute bit,
//! and every symbolic link.
//!
//! Symbolic links are listed, marked [`ToolKind::Symlink`], with the link's own size and time,
//! and never followed: following one could stat a file outside the dir (a host path the
//! dashboard would then describe) or loop. Whether a link works inside the sandbox depends on
//! its target being visible there, which only the sandbox can tell.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// What kind of entry a [`ToolEntry`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    /// A regular file with at least one execute bit.
    File,
    /// A symbolic link, not followed.
    Symlink,
}

/// One entry of the tools dir.
///
/// Serializes as `{"name": "rg", "size": 4812345, "modified": 1767225600, "kind": "file"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolEntry {
    /// The file name. A name that is not UTF-8 is shown with U+FFFD in place of the bad
    /// bytes.
    pub name: String,
    /// The size in bytes (for a link: the length of its target path).
    pub size: u64,
    /// The last modification, in whole seconds since the Unix epoch (negative before 1970).
    pub modified: i64,
    /// A regular file or a link.
    pub kind: ToolKind,
}

/// Lists the executables in `dir`, sorted by name: regular files with an execute bit, and
/// symbolic links (not followed). Directories, other files and special files are left out.
///
/// # Errors
///
/// The error of reading `dir` (it does not exist, is not a directory, cannot be read), or
/// of inspecting an entry, except an entry that vanished while the listing ran, which is
/// left out.
///
/// # Platform
///
/// Unix: the execute bit is the mode's `0o111`.
pub fn tools_listing(dir: &Path) -> io::Result<Vec<ToolEntry>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        // `DirEntry::metadata` is `lstat`: it does not follow a link.
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let file_type = meta.file_type();
        let kind = if file_type.is_symlink() {
            ToolKind::Symlink
        } else if file_type.is_file() && meta.permissions().mode() & 0o111 != 0 {
            ToolKind::File
        } else {
            continue;
        };
        out.push(ToolEntry {
            name: entry.file_name().to_string_lossy().into_owned(),
            size: meta.len(),
            modified: epoch_seconds(meta.modified()?),
            kind,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Whole seconds between the epoch and `t`, negative before it, saturating.
fn epoch_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_secs()).map_or(i64::MIN, |s| -s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn epoch_seconds_before_and_after_1970() {
        assert_eq!(epoch_seconds(UNIX_EPOCH + Duration::from_secs(90)), 90);
        assert_eq!(epoch_seconds(UNIX_EPOCH - Duration::from_secs(90)), -90);
        assert_eq!(epoch_seconds(UNIX_EPOCH), 0);
    }

    #[test]
    fn entries_serialize_with_lowercase_kind() {
        let e = ToolEntry {
            name: "rg".into(),
            size: 3,
            modified: 1_767_225_600,
            kind: ToolKind::Symlink,
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"name":"rg","size":3,"modified":1767225600,"kind":"symlink"}"#
        );
    }
}
