//! [`Conflict`]: why a policy, or a plan, cannot be realized as asked, as data a host can
//! match on.

use std::path::PathBuf;

use super::SetupStep;

/// Why a plan cannot be made or carried out ([`PlanError::Conflict`](super::PlanError::Conflict)).
///
/// The first variants are conditions a host causes through its policy: each names the
/// paths involved, so that a host can say which setting to change. The others are plans a
/// launcher cannot replay (a plan made for another system or layer); a host meets them
/// only through a bug of stockade, and they carry the step or the system involved.
///
/// `Display` is the message of the condition; paths are printed as they are.
///
/// ```
/// use stockade::error::Conflict;
///
/// let c = Conflict::BindBeneathHidden {
///     bind: "/ws/.agent/cache".into(),
///     hidden: "/ws/.agent".into(),
/// };
/// assert_eq!(
///     c.to_string(),
///     "/ws/.agent/cache would be bound inside the hidden path /ws/.agent"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Conflict {
    /// The policy names no workspace, and every plan starts from one.
    #[error("the policy has no workspace")]
    NoWorkspace,
    /// The workspace resolves to `/`: the program would be given the whole host to write.
    #[error("the workspace cannot be /")]
    WorkspaceIsRoot,
    /// `workspace_mode = "overlay"` on a system where stockade cannot keep the writes
    /// apart: not Linux (an overlay mount on the full layer, a snapshot elsewhere) nor
    /// macOS (a snapshot). The change set's format marks deletions and replaced
    /// directories with extended attributes, which stockade writes on those two only; the
    /// program would write into the real workspace, so the sandbox is refused instead.
    #[error(
        "workspace_mode = \"overlay\" runs on Linux and macOS only (an overlay mount or a snapshot of the workspace); this sandbox runs on the {layer} layer on {os}"
    )]
    OverlayNeedsFullLayer {
        /// The layer the sandbox runs on.
        layer: crate::policy::Layer,
        /// The operating system.
        os: String,
    },
    /// `changes_dir`, resolved, lies inside (or holds) the workspace, a writable path or
    /// the data dir.
    #[error(
        "changes_dir {} overlaps {key} {}: the change set must lie outside the workspace, the writable paths and the data dir",
        changes_dir.display(),
        path.display()
    )]
    ChangesDirOverlaps {
        /// The key of the other path.
        key: &'static str,
        /// That path, resolved.
        path: PathBuf,
        /// The change set's directory, resolved.
        changes_dir: PathBuf,
    },
    /// Layer 2 in overlay mode copies the workspace into the change set at the first run:
    /// this one's regular files add up to more than the policy's `snapshot_max`.
    #[error(
        "the workspace {} holds {size} bytes, more than snapshot_max ({max} bytes): layer 2 runs overlay mode on a snapshot of the workspace; raise snapshot_max, or run on the full layer (an overlay mount, no copy)",
        workspace.display()
    )]
    SnapshotTooLarge {
        /// The workspace.
        workspace: PathBuf,
        /// Its regular files' total size in bytes (the data dir and `deny_names` left out).
        size: u64,
        /// `snapshot_max` in bytes.
        max: u64,
    },
    /// Another run on the same change set has not ended: two runs at once would share the
    /// overlay's upper directory (undefined) or race layer 2's difference.
    #[error("changes_dir {}: another run on this change set has not ended; runs on one change set take turns", dir.display())]
    ChangeSetInUse {
        /// The change set's directory.
        dir: PathBuf,
    },
    /// `changes_dir` holds something that is not a change set of this workspace (another
    /// workspace's, another format version, a file that is not a marker).
    #[error("changes_dir {}: {reason}", dir.display())]
    NotThisChangeSet {
        /// The change set's directory.
        dir: PathBuf,
        /// What does not match.
        reason: String,
    },
    /// The data dir contains a writable root (the workspace or a `writable_paths` entry):
    /// masking the data dir would hide that root too.
    #[error(
        "data_dir {} contains the writable path {}",
        data_dir.display(),
        writable.display()
    )]
    DataDirContainsWritable {
        /// The data dir, resolved.
        data_dir: PathBuf,
        /// The writable root inside it.
        writable: PathBuf,
    },
    /// A path the full layer hides (the data dir, a masked entry) lies inside a `.git`
    /// directory that the full layer shows through a copy-on-write layer (`guard_names`
    /// under `.git`): the mask would sit on the layer, where its identity cannot be checked
    /// and from where changes are merged back.
    #[error(
        "{} would be hidden inside {}, which the full layer shows through a copy-on-write layer (guard_names under .git); move it out of the repository metadata",
        hidden.display(),
        git.display()
    )]
    HiddenInsideGitLayer {
        /// The hidden path.
        hidden: PathBuf,
        /// The `.git` directory with the copy-on-write layer.
        git: PathBuf,
    },
    /// A bound path (a `read_only` or `writable_paths` entry, a tool dir, …) lies strictly
    /// beneath a path the full layer hides: binding it would uncover part of the hidden
    /// path.
    #[error(
        "{} would be bound inside the hidden path {}",
        bind.display(),
        hidden.display()
    )]
    BindBeneathHidden {
        /// The path that would be bound (inside the sandbox).
        bind: PathBuf,
        /// The hidden path above it.
        hidden: PathBuf,
    },
    /// Layer 2 (Landlock without namespaces) cannot hide a path that lies beneath a path
    /// its ruleset must allow: Landlock cannot deny a directory beneath an allowed one.
    /// The full layer can; or the path can be moved out.
    #[error(
        "layer `landlock` cannot hide {key} {} beneath {}: Landlock cannot deny a directory beneath an allowed one (use the full layer, or move it out)",
        path.display(),
        allowed.display()
    )]
    LandlockCannotHide {
        /// The policy key of the hidden path (`data_dir`).
        key: &'static str,
        /// The path to hide.
        path: PathBuf,
        /// The allowed path above it (the workspace, a `writable_paths` entry, …).
        allowed: PathBuf,
    },
    /// A plan step that the fork launcher (macOS and other systems) cannot replay: the
    /// namespaces, mounts, Landlock and seccomp steps are Linux's.
    #[error("step `{step}` cannot run in a forked child on {os}")]
    NotInForkedChild {
        /// The step.
        step: SetupStep,
        /// The system (`std::env::consts::OS`).
        os: &'static str,
    },
    /// A plan asks for a sandbox (`sandbox_init`) on a system where stockade has no
    /// containment backend.
    #[error("step `sandbox_init` cannot run on {os}")]
    NoSandboxBackend {
        /// The system (`std::env::consts::OS`).
        os: &'static str,
    },
    /// A macOS plan (or a `sandbox_init` step) without the Seatbelt profile's input.
    #[error("a sandbox_init step without the profile's input")]
    NoProfileInput,
    /// A per-command step (the working directory, the program, …) inside a plan given to
    /// a Linux layout, which prepares only the steps every command shares.
    #[error("step `{step}` cannot be part of a layout")]
    NotInLayout {
        /// The step.
        step: SetupStep,
    },
    /// A macOS step (`sandbox_init`) inside a plan given to a Linux layout.
    #[error("step `{step}` is macOS only")]
    MacosOnly {
        /// The step.
        step: SetupStep,
    },
    /// A step that a Linux layout numbers itself (the `.git` copy-on-write layers) reached
    /// the per-step preparation.
    #[error("step `{step}` is numbered by the layout")]
    NumberedByLayout {
        /// The step.
        step: SetupStep,
    },
    /// A Landlock or seccomp step in a plan given to a layout without its prepared walls.
    #[error("step `{step}` has nothing prepared")]
    NothingPrepared {
        /// The step.
        step: SetupStep,
    },
    /// More idmapped binds than a layout can number (65 536).
    #[error("too many idmapped binds")]
    TooManyIdmappedBinds,
    /// More writable roots with a `.git` copy-on-write layer than a layout can number (255).
    #[error("more than 255 writable roots with a .git layer")]
    TooManyGitLayers,
    /// An egress listener's address inside the sandbox is not IPv4 (the plan puts them on
    /// `127.0.0.1`).
    #[error("the egress listener address {addr} is not IPv4")]
    NotIpv4 {
        /// The address.
        addr: std::net::SocketAddr,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{PlanError, Report};

    #[test]
    fn messages_stay_word_for_word() {
        let p = PathBuf::from;
        let cases = [
            (Conflict::NoWorkspace, "the policy has no workspace"),
            (Conflict::WorkspaceIsRoot, "the workspace cannot be /"),
            (
                Conflict::DataDirContainsWritable {
                    data_dir: p("/ws"),
                    writable: p("/ws/a"),
                },
                "data_dir /ws contains the writable path /ws/a",
            ),
            (
                Conflict::HiddenInsideGitLayer {
                    hidden: p("/ws/.git/d"),
                    git: p("/ws/.git"),
                },
                "/ws/.git/d would be hidden inside /ws/.git, which the full layer shows through a copy-on-write layer (guard_names under .git); move it out of the repository metadata",
            ),
            (
                Conflict::BindBeneathHidden {
                    bind: p("/d/x"),
                    hidden: p("/d"),
                },
                "/d/x would be bound inside the hidden path /d",
            ),
            (
                Conflict::LandlockCannotHide {
                    key: "data_dir",
                    path: p("/ws/d"),
                    allowed: p("/ws"),
                },
                "layer `landlock` cannot hide data_dir /ws/d beneath /ws: Landlock cannot deny a directory beneath an allowed one (use the full layer, or move it out)",
            ),
            (
                Conflict::NotInForkedChild {
                    step: SetupStep::PivotRoot,
                    os: "macos",
                },
                "step `pivot_root` cannot run in a forked child on macos",
            ),
            (
                Conflict::NoSandboxBackend { os: "freebsd" },
                "step `sandbox_init` cannot run on freebsd",
            ),
            (
                Conflict::NotInLayout {
                    step: SetupStep::Chdir { path: p("/ws") },
                },
                "step `chdir /ws` cannot be part of a layout",
            ),
            (
                Conflict::MacosOnly {
                    step: SetupStep::SandboxInit,
                },
                "step `sandbox_init` is macOS only",
            ),
            (
                Conflict::NumberedByLayout {
                    step: SetupStep::GitLayer {
                        path: p("/ws/.git"),
                    },
                },
                "step `copy-on-write layer over /ws/.git` is numbered by the layout",
            ),
            (
                Conflict::NothingPrepared {
                    step: SetupStep::Seccomp,
                },
                "step `install the seccomp filter` has nothing prepared",
            ),
            (Conflict::TooManyIdmappedBinds, "too many idmapped binds"),
            (
                Conflict::TooManyGitLayers,
                "more than 255 writable roots with a .git layer",
            ),
        ];
        for (conflict, text) in cases {
            assert_eq!(conflict.to_string(), text);
            // Through `PlanError` and `Report`: the same line, once.
            let e = PlanError::Conflict(conflict.clone());
            assert_eq!(e.to_string(), text);
            assert_eq!(Report(&e).to_string(), text);
            assert!(matches!(e, PlanError::Conflict(c) if c == conflict));
        }
    }
}
