//! The macOS plan's wall: the input of its Seatbelt profile, with every path as macOS's
//! kernel sees it.
//!
//! The profile text itself is the backend's (`backend::sbpl`); what goes into it is
//! decided here, from the policy and the host, like every other wall
//! ([`super::Walls`]).

use std::path::{Path, PathBuf};

use super::{HostFs, Plan};
use crate::error::SbplError;
use crate::policy::{Network, Policy};

/// Everything the profile depends on, with paths already canonicalized.
///
/// [`Plan::seatbelt`] builds it with [`SbplInput::from_policy`]; the fields are public so
/// that the per-run `TMPDIR` can be set and tests can build inputs directly. The backend's
/// profile generator (`backend::sbpl::profile`) checks every path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SbplInput {
    /// Read-write.
    pub workspace: PathBuf,
    /// Read-write.
    pub writable: Vec<PathBuf>,
    /// Read-only.
    pub read_only: Vec<PathBuf>,
    /// Read-only.
    pub tools_dir: Option<PathBuf>,
    /// No read, no write, even under a writable root.
    pub data_dir: Option<PathBuf>,
    /// Further files or directories with no read and no write (`Policy::masked`).
    pub masked: Vec<PathBuf>,
    /// Names hidden at the top of the workspace and each writable path.
    pub deny_names: Vec<String>,
    /// Names kept read-only at the top of the workspace and each writable path.
    pub guard_names: Vec<String>,
    /// The per-run `TMPDIR`: read-write.
    pub tmpdir: Option<PathBuf>,
    /// Whether IP networking is allowed.
    pub network: Network,
    /// `workspace_mode = "overlay"`: the real workspace and the change set, which the
    /// profile keeps from the program; [`SbplInput::workspace`] is then the snapshot in
    /// the change set. `None` in direct mode.
    pub overlay: Option<SbplOverlay>,
    /// With `network = "allow"`: the egress proxy's ports on the host's loopback, the only
    /// TCP the program may open (set per run, like [`SbplInput::tmpdir`]). Empty in a plan
    /// and for the other modes; the profile a spawn applies refuses `allow` without them
    /// and the other modes with them.
    pub proxy_ports: Vec<u16>,
}

/// What overlay mode keeps from the program on macOS, where it works on a snapshot of the
/// workspace in the change set ([`Step::Snapshot`](super::Step::Snapshot)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SbplOverlay {
    /// The real workspace: no write (it stays as it was until the host applies the
    /// change set), read only where another root allows it.
    pub real_workspace: PathBuf,
    /// The change set's directory: no read and no write but in its `snapshot/`, even
    /// under a writable root such as `/private/tmp` (its `upper/` and marker are the
    /// host's).
    pub changes: PathBuf,
}

impl SbplInput {
    /// Takes the paths of `policy` through `canonicalize` ([`seatbelt_path`] for the
    /// host's view; [`private_alias`] alone for a profile independent of any host).
    /// `tmpdir` starts empty.
    ///
    /// # Errors
    ///
    /// [`SbplError::NoWorkspace`] when the policy has no workspace.
    // For tests and `internals` users; the plan builds its input with `with_workspace`.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn from_policy(
        policy: &Policy,
        canonicalize: impl Fn(&Path) -> PathBuf,
    ) -> Result<Self, SbplError> {
        let workspace = policy.workspace.as_deref().ok_or(SbplError::NoWorkspace)?;
        Ok(Self::with_workspace(policy, workspace, canonicalize))
    }

    fn with_workspace(
        policy: &Policy,
        workspace: &Path,
        canonicalize: impl Fn(&Path) -> PathBuf,
    ) -> Self {
        let all = |paths: &[PathBuf]| paths.iter().map(|p| canonicalize(p)).collect();
        SbplInput {
            workspace: canonicalize(workspace),
            writable: all(&policy.writable_paths),
            read_only: all(&policy.read_only),
            tools_dir: policy.tools_dir.as_deref().map(&canonicalize),
            data_dir: policy.data_dir.as_deref().map(&canonicalize),
            masked: all(&policy.masked),
            deny_names: policy.deny_names.clone(),
            guard_names: policy.guard_names.clone(),
            tmpdir: None,
            network: policy.network,
            overlay: None,
            proxy_ports: Vec::new(),
        }
    }
}

/// Maps the root symlinks of macOS to their targets, without touching the file system:
/// `/tmp` → `/private/tmp`, `/var` → `/private/var`, `/etc` → `/private/etc`.
///
/// Other paths are returned unchanged.
pub fn private_alias(path: &Path) -> PathBuf {
    for alias in ["/tmp", "/var", "/etc"] {
        if let Ok(rest) = path.strip_prefix(alias) {
            return Path::new("/private")
                .join(alias.trim_start_matches('/'))
                .join(rest);
        }
    }
    path.to_path_buf()
}

/// Resolves `path` as the kernel will see it: the canonical form (through `fs`) of its
/// longest existing prefix, the rest appended, then [`private_alias`] for what could not be
/// resolved (a `/tmp/...` path that does not exist yet).
pub fn seatbelt_path(fs: &dyn HostFs, path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut base = path;
    loop {
        if let Ok(resolved) = fs.canonicalize(base) {
            let mut out = resolved;
            out.extend(rest.iter().rev());
            return private_alias(&out);
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                base = parent;
            }
            _ => return private_alias(path),
        }
    }
}

impl Plan {
    /// This plan with the Seatbelt profile's input of `policy`, each path resolved on `fs`
    /// ([`seatbelt_path`]).
    pub(super) fn with_seatbelt_walls(mut self, policy: &Policy, fs: &dyn HostFs) -> Plan {
        let mut input =
            SbplInput::with_workspace(policy, &self.workspace, |p| seatbelt_path(fs, p));
        input.overlay = self.steps.iter().find_map(|s| match s {
            super::Step::Snapshot {
                workspace, changes, ..
            } => Some(SbplOverlay {
                real_workspace: seatbelt_path(fs, workspace),
                changes: seatbelt_path(fs, changes),
            }),
            _ => None,
        });
        self.walls.sbpl = Some(input);
        self
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::plan::RealFs;

    #[test]
    fn private_alias_maps_the_root_symlinks() {
        assert_eq!(
            private_alias(Path::new("/tmp/x")),
            Path::new("/private/tmp/x")
        );
        assert_eq!(private_alias(Path::new("/var")), Path::new("/private/var"));
        assert_eq!(
            private_alias(Path::new("/etc/hosts")),
            Path::new("/private/etc/hosts")
        );
        assert_eq!(
            private_alias(Path::new("/variable")),
            Path::new("/variable")
        );
        assert_eq!(private_alias(Path::new("/Users/a")), Path::new("/Users/a"));
    }

    #[test]
    fn seatbelt_path_resolves_the_existing_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let real = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir(real.join("real")).unwrap();
        std::os::unix::fs::symlink(real.join("real"), real.join("link")).unwrap();
        assert_eq!(
            seatbelt_path(&RealFs, &real.join("link/new/file")),
            // On Linux the temporary directory is under /tmp, which the alias then maps.
            private_alias(&real.join("real/new/file"))
        );
        assert_eq!(
            seatbelt_path(&RealFs, Path::new("/tmp/stockade-none/x")),
            private_alias(&fs::canonicalize("/tmp").unwrap().join("stockade-none/x"))
        );
    }
}
