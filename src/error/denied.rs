//! [`Unhidable`]: why a `deny_names` entry that exists cannot be hidden, and the
//! [`SpawnError::DeniedName`](super::SpawnError::DeniedName) a spawn returns for it.

use std::fmt;
use std::path::{Path, PathBuf};

use super::SpawnError;

/// Why a `deny_names` entry at the top of a writable root cannot be hidden, as
/// [`SpawnError::DeniedName`] reports it. Covering the name with an empty entry hides
/// what the name holds only when the name is the one way to it; for these two kinds it is
/// not, so the command is refused instead of run with the secret in reach.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unhidable {
    /// A symbolic link, with its target as read (not resolved) when the parent could
    /// still read it. What it names stays readable under its own name, and following a
    /// link the program may have planted could reach anything (`/etc/shadow`, a file the
    /// host reads), so it is neither covered nor followed.
    Symlink(Option<PathBuf>),
    /// A file with more than one hard link (the count, when the parent could still read
    /// it). Its other names, which a program can plant in one run, show whatever the user
    /// writes into it before the next.
    HardLinks(Option<u64>),
}

impl Unhidable {
    /// What the user can do about it, for the error's message.
    fn remedy(&self, path: &Path) -> String {
        match self {
            Unhidable::Symlink(_) => "put the file itself there (or remove the link)".to_string(),
            Unhidable::HardLinks(_) => format!(
                "remove its other names (`find / -xdev -samefile {}` lists them) or replace it with a copy",
                path.display()
            ),
        }
    }
}

impl fmt::Display for Unhidable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The target is the program's text: quoted, with control characters escaped,
            // so it cannot forge a line or send escapes to a terminal or log.
            Unhidable::Symlink(Some(t)) => write!(f, "it is a symbolic link (to {t:?})"),
            Unhidable::Symlink(None) => f.write_str("it is a symbolic link"),
            Unhidable::HardLinks(Some(n)) => write!(f, "it has {n} hard links"),
            Unhidable::HardLinks(None) => f.write_str("it has more than one hard link"),
        }
    }
}

/// The message of [`SpawnError::DeniedName`].
pub(super) fn message(path: &Path, reason: &Unhidable) -> String {
    format!(
        "the denied name {} cannot be hidden: {reason}; {}",
        path.display(),
        reason.remedy(path)
    )
}

/// The error for a hiding step that failed with `errno` on `path`, when the errno is one
/// of the refusals of the child's hiding step (`ELOOP`: a symlink; `EMLINK`: a file with
/// more than one hard link). The target or link count is read again here, for the message
/// only: the child's check on the fd it was about to cover is the one that refused.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn refusal(path: &Path, errno: i32) -> Option<SpawnError> {
    let reason = match errno {
        libc::ELOOP => Unhidable::Symlink(std::fs::read_link(path).ok()),
        libc::EMLINK => Unhidable::HardLinks(nlink(path)),
        _ => return None,
    };
    Some(SpawnError::DeniedName {
        path: path.to_path_buf(),
        reason,
    })
}

#[cfg(unix)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn nlink(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| m.nlink())
        .filter(|&n| n > 1)
}

#[cfg(not(unix))]
fn nlink(_: &Path) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_path_the_kind_and_the_remedy() {
        let e = SpawnError::DeniedName {
            path: "/ws/.env".into(),
            reason: Unhidable::Symlink(Some("config/prod.env".into())),
        };
        assert_eq!(
            e.to_string(),
            "the denied name /ws/.env cannot be hidden: it is a symbolic link (to \"config/prod.env\"); put the file itself there (or remove the link)"
        );
        let planted = Unhidable::Symlink(Some("x\n\u{1b}]52;c;eA==\u{7}\u{202e}".into()));
        let text = planted.to_string();
        assert!(
            !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{text:?}"
        );
        let e = SpawnError::DeniedName {
            path: "/ws/.env".into(),
            reason: Unhidable::HardLinks(Some(2)),
        };
        assert_eq!(
            e.to_string(),
            "the denied name /ws/.env cannot be hidden: it has 2 hard links; remove its other names (`find / -xdev -samefile /ws/.env` lists them) or replace it with a copy"
        );
        assert!(refusal(Path::new("/ws/.env"), libc::ENOENT).is_none());
        assert!(matches!(
            refusal(Path::new("/nonexistent-stockade/.env"), libc::ELOOP),
            Some(SpawnError::DeniedName {
                reason: Unhidable::Symlink(None),
                ..
            })
        ));
    }
}
