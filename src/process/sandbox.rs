//! [`Sandbox`]: the policy, the layer chosen for it and the prepared layout, shared by
//! every command made from it; and the choice of that layer ([`Degradation`]).

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::{Command, PlanDescription, launch, tmp};
use crate::error::{Error, PolicyError};
use crate::plan::{self, Degradation, Ids, RealFs};
use crate::policy::{Layer, Mode, Policy};
use crate::probe::Capabilities;

/// A configured sandbox: the policy, the layer it runs on, and the prepared layout. Cheap
/// to clone; clones share the same state, so [`Sandbox::set_policy`] on one is seen by all.
/// Each [`Sandbox::command`] takes the state current at that moment (a lock-free read);
/// a policy change never alters a command already built or running.
///
/// # Choosing the layer: optimistic, with fallback at the first spawn
///
/// Creating a sandbox spawns nothing. It takes the strongest layer the cheap facts allow
/// (Landlock's ABI, seccomp; namespaces and a fresh `/proc` are assumed) and the first
/// spawn is the probe. When the host refuses that spawn's namespaces (the namespace
/// `clone` or the id-map write fails with `EPERM`, `ENOSPC`, `EUSERS` or `EINVAL`) or its
/// fresh `/proc`, the refusal is recorded for the whole process and the policy decides,
/// as it would have at creation: with `fallback = "degrade"` the command is re-planned on
/// the strongest weaker layer allowed (`min_layer`; for `/proc`, the host's `/proc` with
/// `proc_fallback = true`), [`Sandbox::degradation`] says so with the OS reason, a
/// `tracing` warning is emitted, and the spawn is made once more; with
/// `fallback = "refuse"` the spawn returns [`PlanError::LayerUnavailable`](crate::PlanError::LayerUnavailable). Later commands,
/// of this sandbox and of sandboxes created afterwards, start on the weaker layer directly.
/// So until the first spawn, [`Sandbox::layer`] and [`Sandbox::degradation`] report what
/// is assumed, and a policy that no weaker layer can satisfy (a data dir that Landlock
/// cannot hide) fails at that spawn rather than here.
///
/// # Dropping
///
/// A command waited for has ended with everything it started, but on Linux its init may
/// still be tearing the sandbox's namespaces down (see [`Child::wait`](crate::Child::wait)),
/// to be reaped by a later spawn or wait. Dropping the last clone of a `Sandbox` reaps
/// every such init of the process, waiting for those still exiting (a fraction of a
/// millisecond each), so that none is left as a zombie; with `workspace_mode =
/// "overlay"`, it also waits for the change set's close after a run whose program has
/// ended (the overlay's sync of its file system, on a thread of this process), so that
/// the set is whole and removable once the drop returns.
#[derive(Clone, Debug)]
pub struct Sandbox {
    shared: Arc<ArcSwap<Inner>>,
    /// The redactor of the host's known secret values: built once per `set_secrets`,
    /// shared by every child's redactor.
    secrets: Arc<ArcSwap<crate::Redactor>>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // The last clone only: the others' drops block nothing.
        if Arc::strong_count(&self.shared) == 1 {
            launch::reap_earlier(true);
            // A change set whose run's program has ended may still be closing on a
            // thread of this process: over when this returns, so that a caller who
            // removes the set next (`rm -r`, a temporary directory dropped) finds it
            // whole and removable. A run whose program still runs is not waited for.
            let inner = self.current();
            if let (crate::WorkspaceMode::Overlay, Some(dir)) =
                (inner.policy.workspace_mode, &inner.policy.changes_dir)
            {
                super::changeset::settle_here(dir);
            }
        }
    }
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) policy: Policy,
    /// The plan and what the platform's launcher prepared from it.
    pub(super) prepared: launch::Prepared,
    /// The data dir and the `(st_dev, st_ino)` pinned at creation.
    pub(super) data_dir: Option<(PathBuf, (u64, u64))>,
    /// Set when the policy degraded: the layer it wanted and why that one is missing.
    pub(super) degraded: Option<Degradation>,
    /// [`Capabilities::generation`] when this was prepared: a spawn re-plans when spawns
    /// have learned a refusal since.
    pub(super) knowledge: u64,
    /// The directory of this state's own for its commands' `TMPDIR`s, when the plan needs
    /// one ([`plan::Plan::private_tmp_root`]): made at its first command, removed when
    /// this state and every command's `TMPDIR` in it are gone.
    pub(super) tmp_parents: Option<tmp::Parents>,
    /// How the policy's limits hold: whether each command gets a cgroup.
    pub(super) limits: super::limits::Enforcement,
    /// With `network = "allow"`: the egress proxy that serves every command of this
    /// state, each on listeners of its own.
    pub(super) egress: Option<Arc<crate::guard::egress::Proxy>>,
    /// The policy's `[sandbox.leak]` patterns, compiled once: every command's redactor
    /// carries them to the scans of its output.
    pub(super) patterns: crate::guard::leak::HostPatterns,
}

impl Sandbox {
    /// Checks the policy, chooses the layer and prepares the layout. Spawns nothing: see
    /// [Choosing the layer](Sandbox#choosing-the-layer-optimistic-with-fallback-at-the-first-spawn).
    ///
    /// Nothing is written to the host. The data dir, when set, must exist (a missing one
    /// is an error: the program could create it under a writable root and fill it for the
    /// host to trust later); its identity is pinned: a spawn refuses to run if the
    /// directory was replaced.
    ///
    /// # Errors
    ///
    /// [`Error::Policy`] for an invalid policy, [`Error::Plan`] when a path is unusable or
    /// the wanted layer is known to be unavailable (the cheap facts, or a spawn of this
    /// process already refused) and the policy refuses to degrade.
    ///
    /// # Platform
    ///
    /// Linux: the full layer (namespaces, mounts, Landlock, seccomp), the landlock layer
    /// or passthrough. macOS: the full layer is a Seatbelt profile (`sandbox_init`), or
    /// passthrough. Other Unix systems: passthrough only; a policy that refuses to degrade
    /// gets [`PlanError::LayerUnavailable`](crate::PlanError::LayerUnavailable) naming the system, and the default policy
    /// degrades with a `tracing` warning.
    pub fn new(policy: Policy) -> Result<Sandbox, Error> {
        Ok(Sandbox {
            shared: Arc::new(ArcSwap::from_pointee(Inner::new(policy)?)),
            secrets: Arc::new(ArcSwap::from_pointee(crate::Redactor::default())),
        })
    }

    /// Replaces the host's known secret values (its secret store). Every command spawned
    /// from now on gets a [`Child::redactor`](crate::Child::redactor) that redacts them, and the values of its own
    /// [`Command::secret_env`] variables. The redactor is built here, once, and shared.
    /// (The redactor's host patterns come from the policy's `[sandbox.leak]` table, as
    /// current when each command is made.)
    pub fn set_secrets<I, S>(&self, secrets: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        self.secrets.store(Arc::new(crate::Redactor::new(secrets)));
    }

    /// Replaces the policy for every command created from now on, without a restart.
    /// The new policy is checked and prepared completely before it takes effect; on error
    /// the old one stays.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::new`].
    pub fn set_policy(&self, policy: Policy) -> Result<(), Error> {
        let inner = Inner::new(policy)?;
        self.shared.store(Arc::new(inner));
        Ok(())
    }

    /// Switches between `enabled` and `disabled` (passthrough with a clean environment)
    /// for commands created from now on.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::new`].
    pub fn set_mode(&self, mode: Mode) -> Result<(), Error> {
        let mut policy = self.policy();
        policy.mode = mode;
        self.set_policy(policy)
    }

    pub(super) fn current(&self) -> Arc<Inner> {
        self.shared.load_full()
    }

    /// With `network = "allow"`: the egress proxy's decisions for every command of the
    /// current policy, oldest first (the newest 10 000); each command's own are
    /// [`Child::egress_decisions`](crate::Child::egress_decisions). Empty for other network
    /// modes.
    pub fn egress_decisions(&self) -> Vec<crate::guard::egress::Decision> {
        self.shared
            .load()
            .egress
            .as_ref()
            .map(|p| p.decisions())
            .unwrap_or_default()
    }

    /// What the kernel allows, as probed by [`Capabilities::probe`] (which spawns a probe
    /// child the first time it is called in a process). The layer a sandbox runs on is
    /// [`Sandbox::layer`]; why it is weaker than wanted is [`Sandbox::degradation`].
    pub fn capabilities(&self) -> &'static Capabilities {
        Capabilities::probe()
    }

    /// The current policy.
    pub fn policy(&self) -> Policy {
        self.current().policy.clone()
    }

    /// The current plan every command replays (mounts and process steps, in order), with
    /// the policy's leak patterns, as a printable and serializable description; before the first spawn, the plan of the
    /// layer assumed (see [`Sandbox`]).
    pub fn plan(&self) -> PlanDescription {
        let inner = self.current();
        let mut plan = PlanDescription::new(inner.prepared.plan());
        plan.leak_patterns = inner.patterns.patterns().to_vec();
        plan
    }

    /// Set when the sandbox runs on a weaker layer than its policy wants, and why. Before
    /// the first spawn this reflects what is assumed (see [`Sandbox`]).
    pub fn degradation(&self) -> Option<Degradation> {
        self.current().degraded.clone()
    }

    /// The layer commands currently run on; before the first spawn, the layer assumed
    /// (see [`Sandbox`]).
    pub fn layer(&self) -> Layer {
        self.current().prepared.plan().layer
    }

    /// A command that runs `program` in this sandbox, with the policy current now;
    /// `program` is looked up on the sandbox's `PATH` unless it contains a slash.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let inner = self.current();
        let patterns = inner.patterns.clone();
        let mut cmd = Command::new(inner, program.as_ref());
        cmd.sandbox = Some(Arc::clone(&self.shared));
        cmd.redactor = crate::Redactor::clone(&self.secrets.load()).with_patterns(patterns);
        cmd
    }
}

impl Inner {
    pub(super) fn new(policy: Policy) -> Result<Inner, Error> {
        policy.validate()?;
        if policy.workspace.is_none() {
            return Err(PolicyError::NoWorkspace.into());
        }
        let patterns = crate::guard::leak::HostPatterns::from_policy(&policy.leak)
            .map_err(PolicyError::from)?;
        // Read before the facts: a refusal learned in between makes this stale, not wrong.
        let knowledge = Capabilities::generation();
        let caps = Capabilities::assumed();
        let ids = Ids::of_caller();
        let selection = plan::select(&policy, &caps, &RealFs, ids)?;
        let (limits, unenforced) = super::limits::Enforcement::decide(&policy, &selection.plan)?;
        let degraded = degraded_with(selection.degradation, &selection.plan, unenforced);
        let tmp_parents = selection.plan.private_tmp_root().map(tmp::Parents::new);
        let egress = super::egress::proxy(&selection.plan)?;
        let prepared = launch::Prepared::new(selection.plan)?;
        Ok(Inner {
            egress,
            patterns,
            tmp_parents,
            policy,
            prepared,
            data_dir: selection.data_dir,
            degraded,
            knowledge,
            limits,
        })
    }
}

/// The layer's degradation, with the limits that will not hold (`unenforced`) added to its
/// reason; or a degradation of the layer it runs on for those limits alone.
fn degraded_with(
    layer: Option<Degradation>,
    plan: &plan::Plan,
    unenforced: Option<String>,
) -> Option<Degradation> {
    match (layer, unenforced) {
        (layer, None) => layer,
        (Some(mut d), Some(limits)) => {
            d.reason = format!("{}; also, {limits}", d.reason);
            Some(d)
        }
        (None, Some(limits)) => Some(Degradation {
            wanted: plan.layer,
            running: plan.layer,
            reason: limits,
        }),
    }
}
