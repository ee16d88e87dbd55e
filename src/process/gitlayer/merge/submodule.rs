//! The index check of the merge: the program's index is merged back only when it lists no
//! gitlink (submodule) path that the host's index did not (see `index.rs` for why).

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fstat, fstatat};

use super::GitDropReason;
use super::classify::{Kind, kind};
use super::index::{Gitlinks, Malformed, UNSAFE_PATH, gitlinks};
use super::write::open_upper_file;

/// An index (or shared index, or config) larger than this is not read: the check fails.
const MAX_INDEX: u64 = 1 << 30;

/// Whether a name at the top of `.git` is the index or a part of it.
pub(super) fn is_index(name: &[u8]) -> bool {
    name == b"index" || name.starts_with(b"sharedindex.")
}

/// Whether the index that the upper layer `upper` leaves over the host's `.git` (`host`)
/// may replace the host's: `Ok` when its gitlink paths are among the host's index's,
/// else why not. A host index that cannot be read counts as listing none.
pub(super) fn check(upper: &OwnedFd, host: &OwnedFd) -> Result<(), GitDropReason> {
    let unreadable = |m: Malformed| {
        if m == UNSAFE_PATH {
            return GitDropReason::UnsafeIndexPath;
        }
        tracing::debug!(
            why = m.0,
            "stockade: the index a program left cannot be read"
        );
        GitDropReason::UnreadableIndex
    };
    let hash = hash_size(host).map_err(unreadable)?;
    let before = read_view(None, host, hash).unwrap_or_else(|m| {
        tracing::debug!(why = m.0, "stockade: the host's index cannot be read");
        Gitlinks::new()
    });
    let after = read_view(Some(upper), host, hash).map_err(unreadable)?;
    if after.is_subset(&before) {
        Ok(())
    } else {
        Err(GitDropReason::NewSubmodule)
    }
}

/// The gitlink paths of the index of the host's git dir `git` (none when there is no such
/// directory or it has no index).
///
/// # Errors
///
/// Why an index that is there cannot be read (a format this reader does not follow, a
/// path git refuses): which submodules git on the host would enter is then unknown.
pub(in crate::process) fn host_gitlinks(git: &std::path::Path) -> Result<Gitlinks, &'static str> {
    let Ok(host) = super::read::open_beneath_root(git) else {
        return Ok(Gitlinks::new());
    };
    hash_size(&host)
        .and_then(|hash| read_view(None, &host, hash))
        .map_err(|m| m.0)
}

/// The gitlinks of the index seen through `upper` (when given) over `host`. No index:
/// none.
fn read_view(upper: Option<&OwnedFd>, host: &OwnedFd, hash: usize) -> Result<Gitlinks, Malformed> {
    let Some(data) = read(upper, host, OsStr::new("index"))? else {
        return Ok(Gitlinks::new());
    };
    gitlinks(&data, hash, |hex| {
        read(upper, host, OsStr::new(&format!("sharedindex.{hex}")))
    })
}

/// The file `name` of `.git` as seen through `upper` over `host`: the upper layer's file,
/// nothing for a whiteout, else the host's file. `None` when missing.
fn read(
    upper: Option<&OwnedFd>,
    host: &OwnedFd,
    name: &OsStr,
) -> Result<Option<Vec<u8>>, Malformed> {
    if let Some(upper) = upper {
        match fstatat(upper, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => {
                return match kind(&st) {
                    Kind::Whiteout => Ok(None),
                    Kind::File => {
                        let fd = open_upper_file(upper, name)
                            .map_err(|_| Malformed("cannot open the upper file"))?;
                        read_fd(fd).map(Some)
                    }
                    Kind::Dir | Kind::Other => Err(Malformed("not a regular file")),
                };
            }
            Err(Errno::ENOENT) => {}
            Err(_) => return Err(Malformed("cannot stat the upper file")),
        }
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    match openat(host, name, flags, Mode::empty()) {
        Ok(fd) => read_fd(fd).map(Some),
        Err(Errno::ENOENT) => Ok(None),
        Err(_) => Err(Malformed("cannot open the host's file")),
    }
}

/// The contents of a regular file, up to [`MAX_INDEX`].
fn read_fd(fd: OwnedFd) -> Result<Vec<u8>, Malformed> {
    let st = fstat(&fd).map_err(|_| Malformed("cannot stat"))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Malformed("not a regular file"));
    }
    let mut data = Vec::new();
    File::from(fd)
        .take(MAX_INDEX + 1)
        .read_to_end(&mut data)
        .map_err(|_| Malformed("cannot read"))?;
    if data.len() as u64 > MAX_INDEX {
        return Err(Malformed("too large"));
    }
    Ok(data)
}

/// The size of the repository's object names: 32 bytes when the host's `config` sets
/// `extensions.objectFormat = sha256`, 20 without one (or without a config). Git reads
/// this key from the repository's own config, without includes; the program's config
/// is never merged, so the host's is the one git will use.
pub(super) fn hash_size(host: &OwnedFd) -> Result<usize, Malformed> {
    let config = read(None, host, OsStr::new("config"))?.unwrap_or_default();
    match object_format(&config).as_deref() {
        None | Some(b"sha1") => Ok(20),
        Some(b"sha256") => Ok(32),
        Some(_) => Err(Malformed("unknown extensions.objectFormat")),
    }
}

/// The value of `extensions.objectformat` in a git config, lowercased, quotes and
/// comments removed; the last one wins, as in git.
fn object_format(config: &[u8]) -> Option<Vec<u8>> {
    let mut section = Vec::new();
    let mut found = None;
    for line in config.split(|b| *b == b'\n') {
        let mut line = line.trim_ascii();
        if let Some(rest) = line.strip_prefix(b"[") {
            let end = memchr::memchr(b']', rest)?;
            section = rest.get(..end)?.trim_ascii().to_ascii_lowercase();
            line = rest.get(end + 1..)?.trim_ascii();
        }
        let lower = line.to_ascii_lowercase();
        let Some(rest) = lower.strip_prefix(b"objectformat") else {
            continue;
        };
        let Some(value) = rest.trim_ascii_start().strip_prefix(b"=") else {
            continue;
        };
        if section != b"extensions" {
            continue;
        }
        let value = value
            .split(|b| *b == b'#' || *b == b';')
            .next()
            .unwrap_or_default()
            .trim_ascii();
        let value = value
            .strip_prefix(b"\"")
            .and_then(|v| v.strip_suffix(b"\""))
            .unwrap_or(value);
        found = Some(value.to_vec());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_format_is_read_from_the_extensions_section() {
        for (config, want) in [
            ("", None),
            ("[core]\n\tobjectformat = sha256\n", None),
            ("[extensions]\n\tobjectFormat = sha256\n", Some("sha256")),
            (
                "[Extensions]\n\tobjectformat=\"SHA256\" # x\n",
                Some("sha256"),
            ),
            ("[extensions] objectformat = sha1\n", Some("sha1")),
            (
                "[extensions]\nobjectformat = sha256\n[core]\nbare = false\n",
                Some("sha256"),
            ),
        ] {
            assert_eq!(
                object_format(config.as_bytes()).as_deref(),
                want.map(str::as_bytes),
                "{config:?}"
            );
        }
        assert!(is_index(b"index") && is_index(b"sharedindex.abc"));
        assert!(!is_index(b"index.lock") && !is_index(b"HEAD"));
    }
}
