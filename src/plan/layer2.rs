//! Layer 2 (Landlock and seccomp without namespaces), the passthrough plan and the macOS
//! Seatbelt plan: the layers that leave the host's file system in place.

use std::path::{Path, PathBuf};

use super::walls::{DEV_PTS, SplitRules};
use super::{
    Access, HostFs, Ids, Kind, Namespaces, Plan, Step, Walls, canonical_workspace, existing,
    existing_dir, inside_path, is_within, no_symlinks,
};
use crate::error::{Conflict, PlanError};
use crate::policy::{Layer, Policy, SYSTEM_ALLOWLIST};

impl Plan {
    /// Builds layer 2: Landlock and seccomp without namespaces, for hosts that deny user
    /// namespaces. The host's file system stays in place; the ruleset grants the same
    /// roots as the full layout and nothing else, and each command gets a private
    /// temporary directory instead of `/tmp`.
    ///
    /// # Errors
    ///
    /// As [`Plan::full`], and [`Conflict::LandlockCannotHide`] when the data dir lies
    /// beneath a path the ruleset must allow: Landlock cannot deny a directory beneath an
    /// allowed one, so this layer cannot hide it.
    pub fn landlock(policy: &Policy, fs: &dyn HostFs, ids: Ids) -> Result<Plan, PlanError> {
        let real = canonical_workspace(policy, fs)?;
        // In overlay mode the program works on a snapshot in the change set.
        let snapshot = snapshot_step(policy, fs, &real)?;
        let workspace = match &snapshot {
            Some(Step::Snapshot { changes, .. }) => changes.join("snapshot"),
            _ => real,
        };
        let mut roots: Vec<(PathBuf, Access)> = vec![(workspace.clone(), Access::ReadWrite)];
        for sys in SYSTEM_ALLOWLIST {
            if let Some(Kind::Dir) = fs.kind(Path::new(sys)) {
                roots.push((PathBuf::from(sys), Access::ReadOnly));
            }
        }
        if let Ok(target) = fs.canonicalize(Path::new("/etc/resolv.conf")) {
            if !roots.iter().any(|(r, _)| is_within(&target, r)) {
                roots.push((target, Access::ReadOnly));
            }
        }
        for p in &policy.read_only {
            roots.push((existing(fs, "read_only", p)?, Access::ReadOnly));
        }
        roots.extend(tools_dir(policy, fs)?.map(|t| (t, Access::ReadOnly)));
        for p in &policy.writable_paths {
            if is_within(p, &workspace) {
                // Granted with the workspace; refused, as elsewhere, through a symlink.
                no_symlinks(fs, "writable_paths", p)?;
                continue;
            }
            roots.push((existing(fs, "writable_paths", p)?, Access::ReadWrite));
        }
        let whole = roots.clone();
        if ids.uid == 0 {
            roots = grant_around_hidden(roots, policy, fs);
        }
        // The change set is the host's: beneath an allowed root the program could read it.
        let changes = match &snapshot {
            Some(Step::Snapshot { changes, .. }) => Some(changes),
            _ => None,
        };
        if let Some(c) = changes {
            if let Some((root, _)) = roots.iter().skip(1).find(|(r, _)| is_within(c, r)) {
                return Err(PlanError::Conflict(Conflict::LandlockCannotHide {
                    key: "changes_dir",
                    path: c.clone(),
                    allowed: root.clone(),
                }));
            }
        }
        let hidden = policy.data_dir.iter().map(|d| ("data_dir", d));
        for (key, path) in hidden {
            no_symlinks(fs, key, path)?;
            if let Some((root, _)) = roots.iter().find(|(r, _)| is_within(path, r)) {
                return Err(PlanError::Conflict(Conflict::LandlockCannotHide {
                    key,
                    path: path.clone(),
                    allowed: root.clone(),
                }));
            }
        }
        let tools = tools_dir(policy, fs)?;
        let mut steps: Vec<Step> = snapshot.into_iter().collect();
        steps.extend(hygiene_steps(policy));
        steps.push(Step::NewKeyring);
        // Without a user namespace the program would keep the host's capabilities: root's,
        // or the ambient ones a service manager gives a user (`CAP_FOWNER` would let it
        // chmod any file it names). Emptying them needs no privilege.
        steps.push(Step::DropCapabilities);
        steps.extend([Step::NoNewPrivs, Step::Landlock, Step::Seccomp]);
        Ok(Plan {
            layer: Layer::Landlock,
            namespaces: Namespaces::default(),
            workspace,
            steps,
            path: inside_path(tools),
            roots,
            private_tmp: true,
            walls: Walls::default(),
            egress: super::EgressPlan::of(policy, Layer::Landlock),
        }
        .with_linux_walls(policy)
        .with_split_walls(policy, &whole, fs))
    }

    /// Layer 2's answer to `guard_names` under `.git` (the full layer's
    /// [`Step::GitLayer`]): `<root>/.git` for each writable root, whose control files
    /// (config, hooks, `commondir`, `info/`, `worktrees/`, `modules/`, alternates) are
    /// snapshotted before each command and put back after it. Empty on other layers, and
    /// when no guard name lies under `.git`.
    pub fn git_snapshots(&self, policy: &Policy) -> Vec<PathBuf> {
        if self.layer != Layer::Landlock
            || !policy.guard_names.iter().any(|n| super::is_git_name(n))
        {
            return Vec::new();
        }
        self.roots
            .iter()
            .filter(|(_, a)| *a == Access::ReadWrite)
            .map(|(r, _)| r.join(".git"))
            .collect()
    }

    /// Layer 2 whose read-only roots were granted entry by entry (`whole`: the roots
    /// before that): its Landlock rules in two layers ([`SplitRules`]), so that the
    /// entry-by-entry part is built once per sandbox. Unchanged when nothing was granted
    /// entry by entry, when the host's temporary directory cannot be resolved, or when a
    /// read-only root overlaps it or `/dev/pts` (the layers would then grant more than the
    /// rules: see [`SplitRules`]).
    fn with_split_walls(
        mut self,
        policy: &Policy,
        whole: &[(PathBuf, Access)],
        fs: &dyn HostFs,
    ) -> Plan {
        if self.roots.as_slice() == whole {
            return self;
        }
        let Ok(tmp_root) = fs.canonicalize(&fs.temp_dir()) else {
            return self;
        };
        let overlaps = |a: &Path, b: &Path| is_within(a, b) || is_within(b, a);
        let overlapped = whole
            .iter()
            .filter(|(_, a)| *a == Access::ReadOnly)
            .any(|(r, _)| overlaps(r, &tmp_root) || overlaps(r, Path::new(DEV_PTS)));
        if overlapped {
            return self;
        }
        let Some(rules) = &self.walls.landlock else {
            return self;
        };
        let split = SplitRules::new(policy, &self, whole, tmp_root, rules.own_terminals);
        if let Some(rules) = &mut self.walls.landlock {
            rules.split = Some(split);
        }
        self
    }

    /// The passthrough plan: no namespaces, no mounts; only the process hygiene steps.
    ///
    /// # Errors
    ///
    /// [`PlanError`] when the workspace is missing.
    pub fn passthrough(policy: &Policy, fs: &dyn HostFs) -> Result<Plan, PlanError> {
        let real = canonical_workspace(policy, fs)?;
        // In overlay mode the program's working directory is the snapshot, as on layer 2.
        let snapshot = snapshot_step(policy, fs, &real)?;
        let workspace = match &snapshot {
            Some(Step::Snapshot { changes, .. }) => changes.join("snapshot"),
            _ => real,
        };
        let tools = tools_dir(policy, fs)?;
        let mut steps: Vec<Step> = snapshot.into_iter().collect();
        steps.extend(hygiene_steps(policy));
        Ok(Plan {
            layer: Layer::Passthrough,
            namespaces: Namespaces::default(),
            workspace: workspace.clone(),
            steps,
            path: inside_path(tools),
            roots: vec![(workspace, Access::ReadWrite)],
            private_tmp: false,
            walls: Walls::default(),
            egress: super::EgressPlan::of(policy, Layer::Passthrough),
        })
    }
}

/// `workspace_mode = "overlay"` without an overlay mount (layer 2, passthrough, macOS):
/// the [`Step::Snapshot`] of the canonical workspace `real` into the change set, which
/// leaves out the data dir (when inside) and the `deny_names`. `None` in direct mode.
fn snapshot_step(policy: &Policy, fs: &dyn HostFs, real: &Path) -> Result<Option<Step>, PlanError> {
    Ok(super::changes_dir(policy, fs, real)?.map(|changes| {
        let skip = policy
            .data_dir
            .iter()
            .filter_map(|d| d.strip_prefix(real).ok())
            .map(Path::to_path_buf)
            .chain(policy.deny_names.iter().map(PathBuf::from))
            .collect();
        Step::Snapshot {
            workspace: real.to_path_buf(),
            changes,
            max: policy.snapshot_max.bytes(),
            skip,
        }
    }))
}

/// The canonical tools dir, when the policy has one.
fn tools_dir(policy: &Policy, fs: &dyn HostFs) -> Result<Option<PathBuf>, PlanError> {
    policy
        .tools_dir
        .as_deref()
        .map(|t| existing_dir(fs, "tools_dir", t))
        .transpose()
}

/// The process steps every layer starts with: die with the host, default signal
/// dispositions, a new session unless the policy keeps the host's.
fn hygiene_steps(policy: &Policy) -> Vec<Step> {
    let mut steps = vec![Step::DieWithParent, Step::ResetSignals];
    if !policy.keep_session {
        steps.push(Step::NewSession);
    }
    let limits = super::rlimits(policy, false);
    if !limits.is_empty() {
        steps.push(Step::ResourceLimits(limits));
    }
    steps
}

impl Plan {
    /// The macOS full layer: the host's file system seen through a Seatbelt profile
    /// (`backend::sbpl`), entered with `sandbox_init` just before `execve`. No mounts and
    /// no namespaces; the plan's steps are the forked child's own, in order. A per-run
    /// `TMPDIR` (`private_tmp`) is the one writable temporary directory besides
    /// `/private/tmp`.
    ///
    /// # Errors
    ///
    /// As [`Plan::passthrough`].
    pub fn seatbelt(policy: &Policy, fs: &dyn HostFs) -> Result<Plan, PlanError> {
        let mut plan = Plan::passthrough(policy, fs)?;
        plan.layer = Layer::Full;
        plan.steps.push(Step::SandboxInit);
        plan.private_tmp = true;
        Ok(plan.with_seatbelt_walls(policy, fs))
    }
}

/// Layer 2 for a root host: Landlock cannot deny beneath an allowed directory, so a
/// read-only root that holds a hidden entry (`policy.masked`, or one "others" may not
/// read) is granted entry by entry instead: the directory itself may be listed, each entry
/// but the hidden ones is granted, recursively around deeper ones. Symlinks are not
/// granted (a rule would name their target); reaching through one is checked at its
/// target.
fn grant_around_hidden(
    roots: Vec<(PathBuf, Access)>,
    policy: &Policy,
    fs: &dyn HostFs,
) -> Vec<(PathBuf, Access)> {
    let ro: Vec<PathBuf> = roots
        .iter()
        .filter(|(_, a)| *a == Access::ReadOnly)
        .map(|(p, _)| p.clone())
        .collect();
    let mut hidden: Vec<PathBuf> = fs
        .private_entries(&ro)
        .into_iter()
        .map(|e| e.path)
        .collect();
    hidden.extend(
        policy
            .masked
            .iter()
            .filter(|m| fs.kind(m).is_some())
            .cloned(),
    );
    let mut out = Vec::new();
    for (root, access) in roots {
        if access == Access::ReadOnly {
            around(&root, &hidden, fs, &mut out);
        } else {
            out.push((root, access));
        }
    }
    out
}

fn around(dir: &Path, hidden: &[PathBuf], fs: &dyn HostFs, out: &mut Vec<(PathBuf, Access)>) {
    if hidden.iter().any(|h| h == dir) {
        return;
    }
    if !hidden.iter().any(|h| is_within(h, dir)) {
        out.push((dir.to_path_buf(), Access::ReadOnly));
        return;
    }
    out.push((dir.to_path_buf(), Access::ListDir));
    for child in fs.children(dir) {
        match fs.kind(&child) {
            Some(Kind::Dir) => around(&child, hidden, fs, out),
            Some(Kind::File) if !hidden.contains(&child) => {
                out.push((child, Access::ReadOnly));
            }
            _ => {}
        }
    }
}
