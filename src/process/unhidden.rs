//! [`Sandbox::unhidden_names`]: the denied names a layer leaves readable, so that a host
//! (and the CLI's warning) can say so instead of implying that `deny_names` holds.

use std::path::PathBuf;

use super::Sandbox;
use crate::policy::Layer;

impl Sandbox {
    /// The `deny_names` entries that exist now at the top of the workspace and of each
    /// writable path and that commands on the current layer can read, in policy order.
    ///
    /// Layer 2 and passthrough hide none of them: a Landlock rule grants a whole subtree,
    /// with no exceptions beneath it, so every existing entry is listed, whatever its
    /// kind (a symbolic link or a hard-linked file as much as a plain one). The full layer
    /// lists none: it covers each one, or refuses the spawn with
    /// [`SpawnError::DeniedName`](crate::error::SpawnError::DeniedName) when it cannot
    /// (a symbolic link, a file with more than one hard link). The list is read when
    /// called; a program can create a name during a run (nothing hides what is not there
    /// yet). In overlay mode (`workspace_mode = "overlay"`) layer 2 runs on a snapshot of
    /// the workspace that leaves them out, so the workspace's are not listed.
    ///
    /// # Platform
    ///
    /// Linux as above. macOS (the Seatbelt profile denies each name's path, and
    /// refuses a name it cannot hide as the full layer does) and other systems use the
    /// same rule for their layer: full lists none, the others list every existing entry.
    pub fn unhidden_names(&self) -> Vec<PathBuf> {
        if self.layer() == Layer::Full {
            return Vec::new();
        }
        let policy = self.policy();
        let mut roots: Vec<PathBuf> = Vec::new();
        // In overlay mode layer 2 runs on a snapshot that leaves them out.
        let snapshot = policy.workspace_mode == crate::policy::WorkspaceMode::Overlay;
        let workspace = policy.workspace.iter().filter(|_| !snapshot);
        for root in workspace.chain(&policy.writable_paths) {
            let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
        let mut out = Vec::new();
        for root in &roots {
            for name in &policy.deny_names {
                let path = root.join(name);
                if std::fs::symlink_metadata(&path).is_ok() && !out.contains(&path) {
                    out.push(path);
                }
            }
        }
        out
    }
}
