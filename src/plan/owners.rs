//! Which read-only roots a root host binds idmapped (see [`Step::Bind`]'s `idmap`), and
//! what that makes unreachable.
//!
//! Through an idmapped root, a program that is root inside gets only the "others"
//! permissions of every entry: a directory "others" may not search is closed to it, and so
//! is everything below. A root is therefore bound idmapped only when no path the policy
//! needs inside it (a workspace, a writable, read-only or tools path, the data dir) lies
//! beneath such a directory; the other roots fall back to the walk that masks each private
//! entry ([`HostFs::private_entries`]). A mask beneath such a directory of an idmapped
//! root is left out: nothing can reach the path it would cover, and the child could not
//! reach it to mount either.

use std::path::{Path, PathBuf};

use super::{Access, HostFs, Ids, Kind, Step, is_within};
use crate::policy::Policy;

/// The roots among `ro_roots` to bind idmapped: none unless the host is root; each a
/// directory "others" may search, on a file system that takes idmapped mounts, with no
/// needed path beneath a closed directory.
pub(super) fn idmapped_roots(
    ro_roots: &[PathBuf],
    needed: &[PathBuf],
    fs: &dyn HostFs,
    ids: Ids,
) -> Vec<PathBuf> {
    if ids.uid != 0 {
        return Vec::new();
    }
    ro_roots
        .iter()
        .filter(|r| matches!(fs.kind(r), Some(Kind::Dir)) && fs.others_may_enter(r))
        .filter(|r| !needed.iter().any(|n| closed_between(fs, r, n)))
        .filter(|r| fs.idmap(r))
        .cloned()
        .collect()
}

/// The paths a root host's policy needs to reach: its workspace and writable roots, the
/// read-only and tools paths, and the data dir (which is masked where it shows).
pub(super) fn needed_paths(policy: &Policy, writable_roots: &[PathBuf]) -> Vec<PathBuf> {
    writable_roots
        .iter()
        .chain(&policy.writable_paths)
        .chain(&policy.read_only)
        .chain(&policy.tools_dir)
        .chain(&policy.data_dir)
        .cloned()
        .collect()
}

/// Whether a directory from `root` (inclusive) down to `path`'s parent is closed to
/// "others" (`path` strictly inside `root`).
pub(super) fn closed_between(fs: &dyn HostFs, root: &Path, path: &Path) -> bool {
    if path == root || !is_within(path, root) {
        return false;
    }
    path.ancestors()
        .skip(1)
        .take_while(|a| is_within(a, root))
        .any(|a| !fs.others_may_enter(a))
}

/// Whether a mask at `path` is pointless and unmountable: beneath a closed directory of
/// an idmapped root.
pub(super) fn unreachable(fs: &dyn HostFs, idmapped: &[PathBuf], path: &Path) -> bool {
    idmapped.iter().any(|r| closed_between(fs, r, path))
}

/// Marks the read-only binds of `idmapped` roots.
pub(super) fn mark<'a>(steps: impl Iterator<Item = &'a mut Step>, idmapped: &[PathBuf]) {
    for step in steps {
        // Read-only binds only: a writable root at the same path (a workspace of `/opt`)
        // keeps its own, writable bind.
        if let Step::Bind {
            dst,
            access: Access::ReadOnly,
            beneath: None,
            idmap,
            ..
        } = step
        {
            if idmapped.contains(dst) {
                *idmap = true;
            }
        }
    }
}
