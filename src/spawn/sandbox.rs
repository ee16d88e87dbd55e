//! [`Sandbox`]: the policy, the layer chosen for it and the prepared layout, shared by
//! every command made from it; and the choice of that layer ([`Degradation`]).

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::data_dir::pin_data_dir;
use super::{Command, launch};
use crate::error::{Error, PlanError, PolicyError};
use crate::plan::{Plan, Step};
use crate::policy::{Fallback, Layer, Mode, Policy};
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
/// `fallback = "refuse"` the spawn returns [`PlanError::LayerUnavailable`]. Later commands,
/// of this sandbox and of sandboxes created afterwards, start on the weaker layer directly.
/// So until the first spawn, [`Sandbox::layer`] and [`Sandbox::degradation`] report what
/// is assumed, and a policy that no weaker layer can satisfy (a data dir that Landlock
/// cannot hide) fails at that spawn rather than here.
#[derive(Clone, Debug)]
pub struct Sandbox {
    shared: Arc<ArcSwap<Inner>>,
    /// The redactor of the host's known secret values: built once per `set_secrets`,
    /// shared by every child's redactor.
    secrets: Arc<ArcSwap<crate::Redactor>>,
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
}

/// Why a sandbox runs on a weaker layer than its policy wants (`fallback = "degrade"`),
/// or on the full layer with the host's `/proc` bound read-only instead of a fresh one
/// (`proc_fallback = true`; then `wanted` and `running` are both `full`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Degradation {
    /// The layer the policy wanted.
    pub wanted: Layer,
    /// The layer commands run on instead.
    pub running: Layer,
    /// Why the wanted layer is not available here.
    pub reason: String,
}

impl std::fmt::Display for Degradation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.wanted == self.running {
            write!(
                f,
                "layer `{}` runs with less: {}",
                self.running, self.reason
            )
        } else {
            write!(
                f,
                "layer `{}` is not available ({}); running on layer `{}`",
                self.wanted, self.reason, self.running
            )
        }
    }
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
    /// gets [`PlanError::LayerUnavailable`] naming the system, and the default policy
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

    /// The current plan every command replays (mounts and process steps, in order).
    pub fn plan(&self) -> Plan {
        self.current().prepared.plan().clone()
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
        let mut cmd = Command::new(self.current(), program.as_ref());
        cmd.sandbox = Some(Arc::clone(&self.shared));
        cmd.redactor = crate::Redactor::clone(&self.secrets.load());
        cmd
    }
}

impl Inner {
    pub(super) fn new(policy: Policy) -> Result<Inner, Error> {
        policy.validate()?;
        if policy.workspace.is_none() {
            return Err(PolicyError::NoWorkspace.into());
        }
        launch::check(&policy)?;
        // Read before the facts: a refusal learned in between makes this stale, not wrong.
        let knowledge = Capabilities::generation();
        let caps = Capabilities::assumed();
        let (layer, degraded) = choose_layer(&policy, &caps)?;
        let data_dir = match &policy.data_dir {
            Some(d) if layer != Layer::Passthrough => Some(pin_data_dir(d)?),
            _ => None,
        };
        let mut plan = launch::plan(&policy, layer)?;
        if caps.fresh_proc.available {
            // Assumed, not known: a refused fresh /proc must fail the spawn so that it is
            // learned and the policy decides (proc_fallback). Once it is known refused,
            // the plan keeps the policy's fallback and the degradation says so.
            for step in &mut plan.steps {
                if let Step::Proc { fallback } = step {
                    *fallback = false;
                }
            }
        }
        if let Some((path, id)) = &data_dir {
            for step in &mut plan.steps {
                if let Step::Mask {
                    path: p,
                    dir: true,
                    identity,
                    ..
                } = step
                {
                    if p == path {
                        *identity = Some(*id);
                    }
                }
            }
        }
        let prepared = launch::Prepared::new(&policy, plan)?;
        Ok(Inner {
            policy,
            prepared,
            data_dir,
            degraded,
            knowledge,
        })
    }
}

/// Whether `layer` can run for `policy` here, and why not.
fn layer_status(policy: &Policy, caps: &Capabilities, layer: Layer) -> Result<(), String> {
    let avail = caps.layer(layer);
    if !avail.available {
        return Err(avail.reason.unwrap_or_default());
    }
    if layer == Layer::Full
        && caps.full_mounts_proc()
        && !caps.fresh_proc.available
        && !policy.proc_fallback
    {
        return Err(format!(
            "a fresh /proc cannot be mounted ({}); set proc_fallback = true to bind the host's /proc read-only",
            caps.fresh_proc.reason.as_deref().unwrap_or("unknown")
        ));
    }
    Ok(())
}

/// How far a policy without `min_layer` degrades. On Linux layer 2 exists wherever the
/// full layer does not (Landlock and seccomp are in every supported kernel): a Linux host
/// never drops to passthrough unless its policy says `min_layer = "passthrough"`. Other
/// systems keep passthrough (with a warning), as they have nothing else.
#[cfg(target_os = "linux")]
const DEFAULT_FLOOR: Layer = Layer::Landlock;
#[cfg(not(target_os = "linux"))]
const DEFAULT_FLOOR: Layer = Layer::Passthrough;

/// The layer to run on: the one the policy wants (default: full), or, when it is missing
/// and the policy degrades, the strongest weaker one that is available and not below
/// `min_layer`. Degrading is logged as a warning; it is never silent.
fn choose_layer(
    policy: &Policy,
    caps: &Capabilities,
) -> Result<(Layer, Option<Degradation>), PlanError> {
    if policy.mode == Mode::Disabled {
        return Ok((Layer::Passthrough, None));
    }
    let wanted = policy.layer.unwrap_or(Layer::Full);
    let reason = match layer_status(policy, caps, wanted) {
        Ok(())
            if wanted == Layer::Full && caps.full_mounts_proc() && !caps.fresh_proc.available =>
        {
            // Allowed by the policy (proc_fallback), and said: the host's /proc shows the
            // host's processes.
            let reason = format!(
                "a fresh /proc cannot be mounted ({}); the host's /proc is bound read-only (proc_fallback)",
                caps.fresh_proc.reason.as_deref().unwrap_or("unknown")
            );
            tracing::warn!(%reason, "stockade: the full layer runs with the host's /proc");
            let d = Degradation {
                wanted,
                running: wanted,
                reason,
            };
            return Ok((wanted, Some(d)));
        }
        Ok(()) => return Ok((wanted, None)),
        Err(r) => r,
    };
    let unavailable = |reason: String| PlanError::LayerUnavailable { wanted, reason };
    if policy.fallback == Fallback::Refuse {
        return Err(unavailable(reason));
    }
    let floor = policy.min_layer.unwrap_or(DEFAULT_FLOOR);
    for layer in [Layer::Landlock, Layer::Passthrough] {
        if layer <= wanted || layer > floor {
            continue;
        }
        if layer_status(policy, caps, layer).is_ok() {
            tracing::warn!(%wanted, chosen = %layer, %reason, "stockade: degrading to a weaker containment layer");
            let d = Degradation {
                wanted,
                running: layer,
                reason,
            };
            return Ok((layer, Some(d)));
        }
    }
    Err(unavailable(format!(
        "{reason}; no layer down to `{floor}` is available"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(userns: bool, fresh_proc: bool) -> Capabilities {
        use crate::probe::Availability;
        let yes_no = |ok: bool, why: &str| {
            if ok {
                Availability::yes()
            } else {
                Availability::no(why)
            }
        };
        Capabilities {
            os: "linux",
            user_namespaces: yes_no(userns, "clone(CLONE_NEWUSER…): ENOSPC"),
            fresh_proc: yes_no(fresh_proc, "mount proc /proc: EPERM"),
            landlock: Availability::yes(),
            landlock_abi: 7,
            seccomp: Availability::yes(),
            sandbox: Availability::no("macOS only"),
        }
    }

    #[test]
    fn the_policy_decides_what_a_refusal_means() {
        let p = Policy::with_workspace("/ws");
        assert_eq!(
            choose_layer(&p, &linux(true, true)).unwrap(),
            (Layer::Full, None)
        );
        // Namespaces refused: layer 2, with the reason.
        let (layer, d) = choose_layer(&p, &linux(false, false)).unwrap();
        let d = d.unwrap();
        assert_eq!(
            (layer, d.wanted, d.running),
            (Layer::Landlock, Layer::Full, Layer::Landlock)
        );
        assert!(d.reason.contains("ENOSPC"), "{}", d.reason);
        assert_eq!(
            d.to_string(),
            "layer `full` is not available (clone(CLONE_NEWUSER…): ENOSPC); running on layer `landlock`"
        );
        // A fresh /proc refused: layer 2 by default, the full layer with the host's /proc
        // when the policy allows it, and that is said too.
        let (layer, d) = choose_layer(&p, &linux(true, false)).unwrap();
        assert_eq!(layer, Layer::Landlock);
        assert!(d.unwrap().reason.contains("proc_fallback"));
        let mut pf = p.clone();
        pf.proc_fallback = true;
        let (layer, d) = choose_layer(&pf, &linux(true, false)).unwrap();
        let d = d.expect("the host's /proc is a degradation");
        assert_eq!(
            (layer, d.wanted, d.running),
            (Layer::Full, Layer::Full, Layer::Full)
        );
        assert!(d.reason.contains("mount proc /proc: EPERM"), "{}", d.reason);
        assert!(
            d.to_string().starts_with("layer `full` runs with less: "),
            "{d}"
        );
        // Refuse: the typed error with the reason.
        let mut refuse = p.clone();
        refuse.fallback = Fallback::Refuse;
        let err = choose_layer(&refuse, &linux(false, false)).unwrap_err();
        assert!(matches!(
            err,
            PlanError::LayerUnavailable {
                wanted: Layer::Full,
                ..
            }
        ));
        assert!(err.to_string().contains("ENOSPC"), "{err}");
        // A floor above what is left.
        let mut floor = p;
        floor.min_layer = Some(Layer::Full);
        assert!(choose_layer(&floor, &linux(false, false)).is_err());
    }

    #[test]
    fn linux_degrades_to_passthrough_only_when_the_policy_says_so() {
        let mut caps = linux(false, true);
        caps.landlock = crate::probe::Availability::no("landlock_create_ruleset: ENOSYS");
        let mut p = Policy::with_workspace("/ws");
        let err = choose_layer(&p, &caps).unwrap_err();
        assert!(
            err.to_string().contains("no layer down to `landlock`"),
            "{err}"
        );
        p.min_layer = Some(Layer::Passthrough);
        assert_eq!(choose_layer(&p, &caps).unwrap().0, Layer::Passthrough);
    }

    #[test]
    fn disabled_mode_is_passthrough() {
        let mut p = Policy::with_workspace("/tmp");
        p.mode = Mode::Disabled;
        assert_eq!(
            choose_layer(&p, Capabilities::probe()).unwrap().0,
            Layer::Passthrough
        );
    }
}
