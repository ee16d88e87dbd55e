//! The `deny_names` a Seatbelt profile cannot hide, checked before each spawn.
//!
//! Seatbelt matches the path of the resolved vnode. A `deny` for `/ws/.env` therefore
//! never sees a read through a `.env` that is a symbolic link (the vnode is the target's,
//! `/ws/config/prod.env`, which the workspace's `allow` covers), and a file with several
//! hard links is as readable through its other names as the rule for this one is strict.
//! As on Linux's full layer, such a name refuses the spawn
//! ([`SpawnError::DeniedName`]); nothing is resolved or followed. Plain Rust over
//! `std::fs`, so Linux CI tests the check that macOS runs.
//!
//! The check is made by the parent before it forks: unlike Linux's check on the fd the
//! setup covers, a process of another run that swaps the name between this check and
//! `sandbox_init` is not seen (SECURITY.md, macOS).

use std::path::Path;

use super::SbplInput;
use crate::error::SpawnError;
use crate::error::Unhidable;

/// The first denied name at the top of the workspace or a writable path of `input` that
/// the profile cannot hide, as the error the spawn returns.
///
/// # Errors
///
/// [`SpawnError::DeniedName`] for a symbolic link or a non-directory with more than one
/// hard link. A missing name, or one that cannot be examined, is left to the profile.
pub fn check_denied_names(input: &SbplInput) -> Result<(), SpawnError> {
    for root in std::iter::once(&input.workspace).chain(&input.writable) {
        for name in &input.deny_names {
            let path = root.join(name);
            if let Some(reason) = unhidable(&path) {
                return Err(SpawnError::DeniedName { path, reason });
            }
        }
    }
    Ok(())
}

fn unhidable(path: &Path) -> Option<Unhidable> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        return Some(Unhidable::Symlink(std::fs::read_link(path).ok()));
    }
    if meta.is_dir() {
        return None;
    }
    let links = links(&meta);
    (links > 1).then_some(Unhidable::HardLinks(Some(links)))
}

#[cfg(unix)]
fn links(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::nlink(meta)
}

#[cfg(not(unix))]
fn links(_: &std::fs::Metadata) -> u64 {
    1
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::policy::Network;

    fn input(ws: &Path, writable: &Path) -> SbplInput {
        SbplInput {
            workspace: ws.to_path_buf(),
            writable: vec![writable.to_path_buf()],
            read_only: vec![],
            tools_dir: None,
            data_dir: None,
            masked: vec![],
            deny_names: vec![".env".into(), ".ssh".into(), "id_rsa".into()],
            guard_names: vec![],
            tmpdir: None,
            overlay: None,
            network: Network::Full,
            proxy_ports: Vec::new(),
        }
    }

    #[test]
    fn symlinks_and_hard_links_are_refused_and_plain_names_pass() {
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let (w, o) = (ws.path(), other.path());
        let inp = input(w, o);
        // Missing, a plain file, a directory (link count 2 or more): hidden by the profile.
        assert!(check_denied_names(&inp).is_ok());
        std::fs::write(w.join(".env"), "s").unwrap();
        std::fs::create_dir_all(w.join(".ssh/sub")).unwrap();
        assert!(check_denied_names(&inp).is_ok());
        // A symbolic link, in a writable path too.
        std::os::unix::fs::symlink("x/prod.env", o.join("id_rsa")).unwrap();
        match check_denied_names(&inp) {
            Err(SpawnError::DeniedName { path, reason }) => {
                assert_eq!(path, o.join("id_rsa"));
                assert_eq!(reason, Unhidable::Symlink(Some("x/prod.env".into())));
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_file(o.join("id_rsa")).unwrap();
        // A second name for `.env`.
        std::fs::hard_link(w.join(".env"), w.join("notes.txt")).unwrap();
        match check_denied_names(&inp) {
            Err(SpawnError::DeniedName { path, reason }) => {
                assert_eq!(path, w.join(".env"));
                assert_eq!(reason, Unhidable::HardLinks(Some(2)));
            }
            other => panic!("{other:?}"),
        }
    }
}
