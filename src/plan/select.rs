//! Choosing the layer and building its plan: the one place that decides which layer runs,
//! from the policy and what the host allows ([`Capabilities`]), and says why when it is
//! weaker than wanted ([`Degradation`]).
//!
//! [`select`] is what a sandbox calls: it chooses the layer, pins the data dir, builds the
//! plan of that layer for this OS and sets what the host facts decide in it (a fresh
//! `/proc` assumed or refused, the data dir's identity).

use std::path::PathBuf;

use super::{HostFs, Ids, Plan, Step};
use crate::error::PlanError;
use crate::policy::{Fallback, Layer, Mode, Network, Policy};
use crate::probe::Capabilities;

/// A plan chosen for a policy on this host.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The plan of the chosen layer.
    pub plan: Plan,
    /// Set when the layer is weaker than the policy wants, or runs with less.
    pub degradation: Option<Degradation>,
    /// The data dir and the `(st_dev, st_ino)` pinned now: a spawn refuses to run when
    /// the directory was replaced since.
    pub data_dir: Option<(PathBuf, (u64, u64))>,
}

/// Chooses the layer for `policy` on a host with `caps`, and builds its plan.
///
/// The plan of a layer depends on the OS (`caps.os`): the full layer is namespaces and
/// mounts on Linux, a Seatbelt profile on macOS, and missing elsewhere; `PR_SET_PDEATHSIG`
/// is Linux's only. The data dir, when set, must exist (a missing one is an error: the
/// program could create it under a writable root and fill it for the host to trust later).
/// Until the host is known to refuse a fresh `/proc` (`caps.fresh_proc`), the plan asks
/// for one without the policy's fallback, so that a refusal fails the spawn and is learned.
///
/// # Errors
///
/// [`PlanError::LayerUnavailable`] when no layer the policy accepts is available, and the
/// errors of the layer's plan ([`Plan::full`], [`Plan::landlock`], …).
pub fn select(
    policy: &Policy,
    caps: &Capabilities,
    fs: &dyn HostFs,
    ids: Ids,
) -> Result<Selection, PlanError> {
    let memo = super::Memo::new(fs);
    let fs: &dyn HostFs = &memo;
    if !matches!(caps.os, "linux" | "macos") {
        check(policy, caps.os)?;
    }
    let (layer, degradation) = choose_layer(policy, caps, ids.host_root)?;
    let data_dir = match &policy.data_dir {
        Some(d) if layer != Layer::Passthrough => Some((d.clone(), pin(fs, d)?)),
        _ => None,
    };
    let mut plan = Plan::for_layer(policy, layer, caps.os, fs, ids)?;
    // What this plan's own lookups saw at the Landlock rules' paths: the backend's status
    // need not `stat` them again at `Sandbox::new`.
    if let Some(rules) = &mut plan.walls.landlock {
        rules.note_seen(|p| memo.seen(p));
    }
    if caps.fresh_proc.available {
        // Assumed, not known: a refused fresh /proc must fail the spawn so that it is
        // learned and the policy decides (proc_fallback). Once it is known refused, the
        // plan keeps the policy's fallback and the degradation says so.
        for step in &mut plan.steps {
            if let Step::Proc { fallback } = step {
                *fallback = false;
            }
        }
    }
    // On the overlay the directory shows the overlay's device, not the host's: the host
    // checks the identity at each spawn (`check_data_dir`), and the lower layer is
    // read-only inside.
    let overlay = plan.steps.iter().find_map(|s| match s {
        Step::Overlay { path, .. } => Some(path.clone()),
        _ => None,
    });
    if let Some((path, id)) = &data_dir {
        for step in &mut plan.steps {
            if let Step::Mask {
                path: p,
                dir: true,
                identity,
                ..
            } = step
            {
                if p == path && !overlay.as_ref().is_some_and(|o| p.starts_with(o)) {
                    *identity = Some(*id);
                }
            }
        }
    }
    Ok(Selection {
        plan,
        degradation,
        data_dir,
    })
}

/// The data dir's identity. It must be a directory, named without a symlink (one there is
/// refused by name, as in every plan, rather than as "not a directory").
fn pin(fs: &dyn HostFs, d: &std::path::Path) -> Result<(u64, u64), PlanError> {
    super::no_symlinks(fs, "data_dir", d)?;
    fs.dir_identity(d).map_err(|e| PlanError::Path {
        key: "data_dir",
        path: d.to_path_buf(),
        errno: crate::error::errno_of(&e),
    })
}

impl Plan {
    /// The plan of `layer` on `os`.
    ///
    /// # Errors
    ///
    /// [`PlanError::LayerUnavailable`] for a layer `os` does not have, and the errors of
    /// that layer's plan.
    pub fn for_layer(
        policy: &Policy,
        layer: Layer,
        os: &str,
        fs: &dyn HostFs,
        ids: Ids,
    ) -> Result<Plan, PlanError> {
        // Without an overlay mount (layer 2, passthrough, macOS) overlay mode runs on a
        // snapshot, whose difference needs the overlay's whiteouts and opaque marks:
        // xattrs that only Linux and macOS are written and read here.
        if policy.workspace_mode == crate::policy::WorkspaceMode::Overlay
            && !matches!(os, "linux" | "macos")
        {
            return Err(PlanError::Conflict(
                crate::error::Conflict::OverlayNeedsFullLayer {
                    layer,
                    os: os.to_string(),
                },
            ));
        }
        let mut plan = match (layer, os) {
            (Layer::Passthrough, _) => Plan::passthrough(policy, fs)?,
            (Layer::Full, "linux") => Plan::full(policy, fs, ids)?,
            (Layer::Landlock, "linux") => Plan::landlock(policy, fs, ids)?,
            (Layer::Full, "macos") => Plan::seatbelt(policy, fs)?,
            (Layer::Landlock, _) => {
                return Err(PlanError::LayerUnavailable {
                    wanted: Layer::Landlock,
                    reason: format!("Landlock is Linux only, not on {os}"),
                });
            }
            (Layer::Full, _) => return Err(unsupported(Layer::Full, os)),
        };
        // PR_SET_PDEATHSIG has no equivalent elsewhere, so the step is left out rather
        // than pretended (see `Child`'s `# Platform`).
        if os != "linux" {
            plan.steps.retain(|s| *s != Step::DieWithParent);
        }
        Ok(plan)
    }
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

/// The Landlock ABI that brings TCP bind and connect rules.
const LANDLOCK_TCP_ABI: u32 = 4;

/// Whether `layer` can run for `policy` here, and why not.
///
/// Layer 2 with `network = "allow"` needs Landlock's TCP rules (ABI 4): there the program
/// shares the host's network, seccomp lets it open TCP sockets, and only Landlock keeps
/// their connects to the egress proxy's ports. Without them the layer would run with the
/// network open, so it is unavailable for that policy.
fn layer_status(policy: &Policy, caps: &Capabilities, layer: Layer) -> Result<(), String> {
    let avail = caps.layer(layer);
    if !avail.available {
        return Err(format!(
            "{}{}",
            avail.reason.unwrap_or_default(),
            caps.remedies(layer)
        ));
    }
    if layer == Layer::Landlock
        && policy.network == Network::Allow
        && caps.landlock_abi < LANDLOCK_TCP_ABI
    {
        return Err(format!(
            "network = \"allow\" on layer `{layer}` needs Landlock ABI {LANDLOCK_TCP_ABI} for TCP rules; the kernel has {}",
            caps.landlock_abi
        ));
    }
    if layer == Layer::Full
        && caps.full_mounts_proc()
        && !caps.fresh_proc.available
        && !policy.proc_fallback
    {
        // A recognized cause's remedy names proc_fallback among its own.
        let remedies = caps.remedies(layer);
        let fix = if remedies.is_empty() {
            "; set proc_fallback = true to bind the host's /proc read-only"
        } else {
            &remedies
        };
        return Err(format!(
            "a fresh /proc cannot be mounted ({}){fix}",
            caps.fresh_proc.reason.as_deref().unwrap_or("unknown"),
        ));
    }
    Ok(())
}

/// How far a policy without `min_layer` degrades. On Linux layer 2 exists wherever the
/// full layer does not (Landlock and seccomp are in every supported kernel): a Linux host
/// never drops to passthrough unless its policy says `min_layer = "passthrough"`, and a
/// root host does not drop at all unless its policy says how far ([`ROOT_FLOOR`]). Other
/// systems keep passthrough (with a warning), as they have nothing else.
fn default_floor(caps: &Capabilities, root: bool) -> Layer {
    match caps.os {
        "linux" if root => Layer::Full,
        "linux" => Layer::Landlock,
        _ => Layer::Passthrough,
    }
}

/// Why a root host without `min_layer` does not degrade to layer 2.
const ROOT_FLOOR: &str = "a root host does not degrade to layer `landlock` unless its policy says min_layer = \"landlock\" (stockade run --min-layer landlock) or layer = \"landlock\": there the program runs as root without namespaces and can change the mode, ACLs and times of every root-owned file it can name, /etc included (Landlock does not govern metadata)";

/// The layer to run on: the one the policy wants (default: full), or, when it is missing
/// and the policy degrades, the strongest weaker one that is available and not below
/// `min_layer`. Degrading is logged as a warning; it is never silent.
///
/// `root`: whether the caller is root over the host's root-owned files
/// ([`super::Ids::host_root`]; see [`default_floor`]).
pub fn choose_layer(
    policy: &Policy,
    caps: &Capabilities,
    root: bool,
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
    let floor = policy
        .min_layer
        .unwrap_or_else(|| default_floor(caps, root));
    if floor == Layer::Full && policy.min_layer.is_none() && caps.os == "linux" {
        return Err(unavailable(format!("{reason}; {ROOT_FLOOR}")));
    }
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

/// The error for a policy that demands more than `platform` can give.
///
/// `wanted` is the layer the policy asked for; `platform` is an OS name such as
/// `std::env::consts::OS`.
pub fn unsupported(wanted: Layer, platform: &str) -> PlanError {
    PlanError::LayerUnavailable {
        wanted,
        reason: format!(
            "stockade has no containment backend for {platform}; only environment sanitization is available"
        ),
    }
}

/// Checks whether `policy` may run as passthrough on `platform`, a system without a
/// containment backend.
///
/// A policy accepts passthrough when containment is disabled, when it asks for the
/// `passthrough` layer, or when it degrades (`fallback = "degrade"`) and its `min_layer`
/// (if any) is `passthrough`.
///
/// # Errors
///
/// [`PlanError::LayerUnavailable`] naming `platform` and the layer the policy wanted.
fn check(policy: &Policy, platform: &str) -> Result<(), PlanError> {
    if policy.mode == Mode::Disabled {
        return Ok(());
    }
    let wanted = policy.layer.unwrap_or(Layer::Full);
    if wanted == Layer::Passthrough {
        return Ok(());
    }
    let floor = policy.min_layer.unwrap_or(Layer::Passthrough);
    if policy.fallback == Fallback::Refuse || floor < Layer::Passthrough {
        return Err(unsupported(wanted, platform));
    }
    Ok(())
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
            causes: Vec::new(),
        }
    }

    #[test]
    fn a_refused_layer_says_its_cause_and_remedy_in_the_error_and_the_warning() {
        let cause = |feature| crate::probe::Cause {
            id: "max-user-namespaces",
            feature,
            summary: "user.max_user_namespaces = 0".into(),
            remedy: "raise user.max_user_namespaces".into(),
        };
        let caps = Capabilities {
            causes: vec![cause(crate::probe::Feature::UserNamespaces)],
            ..linux(false, false)
        };
        let mut refuse = Policy::with_workspace("/ws");
        refuse.fallback = Fallback::Refuse;
        let err = choose_layer(&refuse, &caps, false).unwrap_err().to_string();
        assert!(
            err.contains("ENOSPC; to fix: raise user.max_user_namespaces"),
            "{err}"
        );
        let (layer, d) = choose_layer(&Policy::with_workspace("/ws"), &caps, false).unwrap();
        assert_eq!(layer, Layer::Landlock);
        let d = d.unwrap().to_string();
        assert!(d.contains("to fix: raise user.max_user_namespaces"), "{d}");
        // A cause of another feature is not this layer's remedy.
        let caps = Capabilities {
            causes: vec![cause(crate::probe::Feature::Landlock)],
            ..linux(false, false)
        };
        let err = choose_layer(&refuse, &caps, false).unwrap_err().to_string();
        assert!(!err.contains("to fix"), "{err}");
        // A fresh /proc refused: the cause's remedy instead of the generic advice.
        let generic = "set proc_fallback = true to bind the host's /proc read-only";
        let err = choose_layer(&refuse, &linux(true, false), false)
            .unwrap_err()
            .to_string();
        assert!(err.ends_with(generic), "{err}");
        let masked = crate::probe::Cause {
            remedy: "set proc_fallback = true, or unmask /proc".into(),
            ..cause(crate::probe::Feature::FreshProc)
        };
        let caps = Capabilities {
            causes: vec![masked],
            ..linux(true, false)
        };
        let err = choose_layer(&refuse, &caps, false).unwrap_err().to_string();
        assert!(
            err.ends_with("; to fix: set proc_fallback = true, or unmask /proc")
                && !err.contains(generic),
            "{err}"
        );
    }

    #[test]
    fn the_policy_decides_what_a_refusal_means() {
        let p = Policy::with_workspace("/ws");
        assert_eq!(
            choose_layer(&p, &linux(true, true), false).unwrap(),
            (Layer::Full, None)
        );
        // Namespaces refused: layer 2, with the reason.
        let (layer, d) = choose_layer(&p, &linux(false, false), false).unwrap();
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
        let (layer, d) = choose_layer(&p, &linux(true, false), false).unwrap();
        assert_eq!(layer, Layer::Landlock);
        assert!(d.unwrap().reason.contains("proc_fallback"));
        let mut pf = p.clone();
        pf.proc_fallback = true;
        let (layer, d) = choose_layer(&pf, &linux(true, false), false).unwrap();
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
        let err = choose_layer(&refuse, &linux(false, false), false).unwrap_err();
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
        assert!(choose_layer(&floor, &linux(false, false), false).is_err());
    }

    #[test]
    fn linux_degrades_to_passthrough_only_when_the_policy_says_so() {
        let mut caps = linux(false, true);
        caps.landlock = crate::probe::Availability::no("landlock_create_ruleset: ENOSYS");
        let mut p = Policy::with_workspace("/ws");
        let err = choose_layer(&p, &caps, false).unwrap_err();
        assert!(
            err.to_string().contains("no layer down to `landlock`"),
            "{err}"
        );
        p.min_layer = Some(Layer::Passthrough);
        assert_eq!(
            choose_layer(&p, &caps, false).unwrap().0,
            Layer::Passthrough
        );
    }

    /// A root host on layer 2 runs the program as root without namespaces: it can chmod
    /// every root-owned file it names. Without a `min_layer` of the policy's own, a root
    /// host refuses rather than degrade, saying why and how to accept it.
    #[test]
    fn a_root_host_degrades_to_layer_two_only_when_the_policy_says_so() {
        let mut p = Policy::with_workspace("/ws");
        let err = choose_layer(&p, &linux(false, false), true).unwrap_err();
        assert!(matches!(
            err,
            PlanError::LayerUnavailable {
                wanted: Layer::Full,
                ..
            }
        ));
        let shown = err.to_string();
        assert!(shown.contains("ENOSPC"), "{shown}");
        assert!(shown.contains("min_layer = \"landlock\""), "{shown}");
        // The full layer itself is unaffected.
        assert_eq!(
            choose_layer(&p, &linux(true, true), true).unwrap(),
            (Layer::Full, None)
        );
        // Said by the policy: a floor, or the layer itself.
        p.min_layer = Some(Layer::Landlock);
        let (layer, d) = choose_layer(&p, &linux(false, false), true).unwrap();
        assert_eq!(
            (layer, d.map(|d| d.running)),
            (Layer::Landlock, Some(Layer::Landlock))
        );
        let mut chosen = Policy::with_workspace("/ws");
        chosen.layer = Some(Layer::Landlock);
        assert_eq!(
            choose_layer(&chosen, &linux(false, false), true).unwrap(),
            (Layer::Landlock, None)
        );
    }

    /// Layer 2 keeps `network = "allow"` to the proxy with Landlock's TCP rules alone: a
    /// kernel without them (ABI < 4) makes the layer unavailable for that policy, and the
    /// policy's fallback decides (degrade as far as its floor, or refuse), with the reason.
    #[test]
    fn network_allow_on_layer_two_needs_landlock_tcp_rules() {
        let abi = |n: u32| Capabilities {
            landlock_abi: n,
            ..linux(false, false)
        };
        let reason = "network = \"allow\" on layer `landlock` needs Landlock ABI 4 for TCP rules; the kernel has 3";
        let mut p = Policy::with_workspace("/ws");
        p.network = Network::Allow;
        p.layer = Some(Layer::Landlock);
        assert_eq!(
            choose_layer(&p, &abi(4), false).unwrap(),
            (Layer::Landlock, None)
        );
        assert_eq!(
            choose_layer(&p, &abi(7), true).unwrap(),
            (Layer::Landlock, None)
        );
        // The default floor of a user host is layer 2 itself: refused, saying why.
        let err = choose_layer(&p, &abi(3), false).unwrap_err();
        assert!(matches!(
            err,
            PlanError::LayerUnavailable {
                wanted: Layer::Landlock,
                ..
            }
        ));
        assert!(err.to_string().contains(reason), "{err}");
        assert!(
            err.to_string().contains("no layer down to `landlock`"),
            "{err}"
        );
        // Refused outright when the policy refuses.
        let mut refuse = p.clone();
        refuse.fallback = Fallback::Refuse;
        let err = choose_layer(&refuse, &abi(3), false).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("containment layer `landlock` is not available: {reason}")
        );
        // Degraded when the policy accepts passthrough, and said.
        let mut low = p.clone();
        low.min_layer = Some(Layer::Passthrough);
        let (layer, d) = choose_layer(&low, &abi(3), false).unwrap();
        let d = d.expect("a degradation");
        assert_eq!(
            (layer, d.wanted, d.running),
            (Layer::Passthrough, Layer::Landlock, Layer::Passthrough)
        );
        assert_eq!(d.reason, reason);
        // From the full layer: layer 2 is no place to fall to, so the floor decides.
        let mut full = Policy::with_workspace("/ws");
        full.network = Network::Allow;
        let err = choose_layer(&full, &abi(3), false).unwrap_err();
        assert!(err.to_string().contains("ENOSPC"), "{err}");
        full.min_layer = Some(Layer::Passthrough);
        assert_eq!(
            choose_layer(&full, &abi(3), false).unwrap().0,
            Layer::Passthrough
        );
        assert_eq!(
            choose_layer(&full, &abi(4), false).unwrap().0,
            Layer::Landlock
        );
        // The full layer has its own network namespace: no TCP rule needed.
        let caps = Capabilities {
            landlock_abi: 3,
            ..linux(true, true)
        };
        assert_eq!(
            choose_layer(&full, &caps, false).unwrap(),
            (Layer::Full, None)
        );
        // Other network modes do not need them on layer 2 (seccomp refuses every inet
        // socket with "none").
        for network in [Network::None, Network::Full] {
            let mut other = p.clone();
            other.network = network;
            assert_eq!(
                choose_layer(&other, &abi(1), false).unwrap(),
                (Layer::Landlock, None)
            );
        }
    }

    #[test]
    fn disabled_mode_is_passthrough() {
        let mut p = Policy::with_workspace("/tmp");
        p.mode = Mode::Disabled;
        assert_eq!(
            choose_layer(&p, &linux(true, true), false).unwrap().0,
            Layer::Passthrough
        );
    }

    #[test]
    fn the_default_policy_degrades_to_passthrough() {
        assert!(check(&Policy::default(), "freebsd").is_ok());
    }

    #[test]
    fn refusing_policies_get_an_error_naming_the_platform() {
        let policy = Policy {
            fallback: Fallback::Refuse,
            ..Policy::default()
        };
        let err = check(&policy, "freebsd").unwrap_err();
        assert_eq!(
            err.to_string(),
            "containment layer `full` is not available: stockade has no containment backend \
             for freebsd; only environment sanitization is available"
        );
    }

    #[test]
    fn a_minimum_layer_above_passthrough_is_refused() {
        let policy = Policy {
            min_layer: Some(Layer::Landlock),
            ..Policy::default()
        };
        assert!(matches!(
            check(&policy, "openbsd"),
            Err(PlanError::LayerUnavailable {
                wanted: Layer::Full,
                ..
            })
        ));
    }

    #[test]
    fn asking_for_passthrough_or_disabling_is_accepted() {
        let asked = Policy {
            layer: Some(Layer::Passthrough),
            fallback: Fallback::Refuse,
            ..Policy::default()
        };
        assert!(check(&asked, "freebsd").is_ok());
        let disabled = Policy {
            mode: Mode::Disabled,
            fallback: Fallback::Refuse,
            ..Policy::default()
        };
        assert!(check(&disabled, "freebsd").is_ok());
    }

    /// A host of directories (the root, the workspace, the data dir in it and `/usr`) and a
    /// symlink `/ws/link` to `/etc`.
    struct Host;

    impl HostFs for Host {
        fn kind(&self, p: &std::path::Path) -> Option<crate::plan::Kind> {
            if p == std::path::Path::new("/ws/link") {
                return Some(crate::plan::Kind::Symlink("/etc".into()));
            }
            ["/", "/ws", "/ws/data", "/usr"]
                .iter()
                .any(|d| p == std::path::Path::new(d))
                .then_some(crate::plan::Kind::Dir)
        }
        fn canonicalize(&self, p: &std::path::Path) -> std::io::Result<PathBuf> {
            match self.kind(p) {
                Some(_) => Ok(p.to_path_buf()),
                None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
            }
        }
        fn dir_identity(&self, p: &std::path::Path) -> std::io::Result<(u64, u64)> {
            self.canonicalize(p).map(|_| (7, 42))
        }
    }

    const IDS: Ids = Ids {
        uid: 1000,
        gid: 1000,
        host_root: false,
    };

    #[test]
    fn select_pins_the_data_dir_into_its_mask() {
        let mut p = Policy::with_workspace("/ws");
        p.data_dir = Some("/ws/data".into());
        let s = select(&p, &linux(true, true), &Host, IDS).unwrap();
        assert_eq!(s.plan.layer, Layer::Full);
        assert_eq!(s.data_dir, Some((PathBuf::from("/ws/data"), (7, 42))));
        assert!(s.plan.steps.iter().any(|step| matches!(
            step,
            Step::Mask { path, identity: Some((7, 42)), .. } if path == std::path::Path::new("/ws/data")
        )));
        // A data dir that does not exist is an error, never created.
        p.data_dir = Some("/ws/gone".into());
        let err = select(&p, &linux(true, true), &Host, IDS).unwrap_err();
        assert!(
            matches!(
                err,
                PlanError::Path {
                    key: "data_dir",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_data_dir_through_a_symlink_is_refused_as_a_symlink_on_every_layer() {
        // Pinning it looked at the link itself: `ENOTDIR`, not the link named.
        for layer in [Layer::Full, Layer::Landlock] {
            for d in ["/ws/link", "/ws/link/data"] {
                let mut p = Policy::with_workspace("/ws");
                p.layer = Some(layer);
                p.data_dir = Some(d.into());
                let err = select(&p, &linux(true, true), &Host, IDS).unwrap_err();
                assert!(
                    matches!(&err, PlanError::Symlink { key: "data_dir", link, .. }
                        if link == std::path::Path::new("/ws/link")),
                    "{layer} {d}: {err:?}"
                );
            }
        }
    }

    #[test]
    fn the_landlock_rules_carry_what_the_plan_saw_at_their_paths() {
        use crate::plan::Seen;
        use std::path::Path;
        for layer in [Layer::Full, Layer::Landlock] {
            let mut p = Policy::with_workspace("/ws");
            p.layer = Some(layer);
            let s = select(&p, &linux(true, true), &Host, IDS).unwrap();
            let rules = s.plan.walls.landlock.as_ref().unwrap();
            let spec = &rules.spec;
            assert_eq!(spec.seen_at(Path::new("/ws")), Some(Seen::Dir), "{layer}");
            assert_eq!(spec.seen_at(Path::new("/usr")), Some(Seen::Dir), "{layer}");
            // Missing here: looked at at `Sandbox::new` and at each spawn.
            assert_eq!(spec.seen_at(Path::new("/etc")), None, "{layer}");
            // No host rule names a device node: the full layer grants its own `/dev`
            // from the child (whose nodes the plan checked, each the device it must be),
            // and layer 2 does not look at them.
            assert_eq!(spec.seen_at(Path::new("/dev/null")), None, "{layer}");
            let child = &rules.child_rules;
            let dev = child
                .iter()
                .any(|(p, g)| p == Path::new("/dev") && *g == crate::plan::Grant::Device);
            assert_eq!(dev, layer == Layer::Full, "{layer}: {child:?}");
        }
        // A plan built without `select` saw nothing it kept.
        let p = Policy::with_workspace("/ws");
        let plan = Plan::full(&p, &Host, IDS).unwrap();
        assert!(plan.walls.landlock.unwrap().spec.seen.is_empty());
    }

    #[test]
    fn a_fresh_proc_is_asked_for_until_it_is_known_refused() {
        let mut p = Policy::with_workspace("/ws");
        p.proc_fallback = true;
        let proc_fallback = |caps: &Capabilities| {
            let s = select(&p, caps, &Host, IDS).unwrap();
            s.plan.steps.iter().find_map(|step| match step {
                Step::Proc { fallback } => Some(*fallback),
                _ => None,
            })
        };
        assert_eq!(proc_fallback(&linux(true, true)), Some(false));
        assert_eq!(proc_fallback(&linux(true, false)), Some(true));
    }

    #[test]
    fn the_plan_of_a_layer_depends_on_the_os() {
        let p = Policy::with_workspace("/ws");
        let mac = Plan::for_layer(&p, Layer::Full, "macos", &Host, IDS).unwrap();
        assert!(mac.steps.contains(&Step::SandboxInit) && mac.walls.sbpl.is_some());
        assert!(!mac.steps.contains(&Step::DieWithParent));
        let linux = Plan::for_layer(&p, Layer::Full, "linux", &Host, IDS).unwrap();
        assert!(linux.steps.contains(&Step::PivotRoot) && linux.walls.landlock.is_some());
        assert!(Plan::for_layer(&p, Layer::Full, "freebsd", &Host, IDS).is_err());
        assert!(Plan::for_layer(&p, Layer::Landlock, "macos", &Host, IDS).is_err());
        let bsd = Plan::for_layer(&p, Layer::Passthrough, "freebsd", &Host, IDS).unwrap();
        assert!(!bsd.steps.contains(&Step::DieWithParent));
    }

    #[test]
    fn without_a_backend_a_refusing_policy_is_refused_by_name() {
        let caps = Capabilities {
            os: "freebsd",
            ..linux(false, false)
        };
        let mut refuse = Policy::with_workspace("/ws");
        refuse.fallback = Fallback::Refuse;
        let err = select(&refuse, &caps, &Host, IDS).unwrap_err();
        assert!(err.to_string().contains("freebsd"), "{err}");
        let caps = Capabilities {
            landlock: crate::probe::Availability::no("Linux only"),
            ..caps
        };
        let s = select(&Policy::with_workspace("/ws"), &caps, &Host, IDS).unwrap();
        assert_eq!(s.plan.layer, Layer::Passthrough);
        assert!(s.degradation.is_some());
    }
}
