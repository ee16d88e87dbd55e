//! Probe the kernel once: which containment layers can this host provide, and why not.
//!
//! The user-namespace probe does not stop at `unshare` succeeding (on some distributions it
//! does and mounting then fails): it spawns a real child through the same code path as a
//! sandbox, which maps its ids, builds a root, binds a tree read-only and mounts a fresh
//! `/proc`, then exits. Tests use this same probe to decide whether to skip.

use std::sync::OnceLock;

use serde::Serialize;

use crate::policy::Layer;

/// Whether one feature is usable, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Availability {
    /// Usable.
    pub available: bool,
    /// Why not (the failing call and its error), when unavailable.
    pub reason: Option<String>,
}

impl Availability {
    /// Usable.
    pub fn yes() -> Self {
        Availability {
            available: true,
            reason: None,
        }
    }

    /// Not usable, because of `reason`.
    pub fn no(reason: impl Into<String>) -> Self {
        Availability {
            available: false,
            reason: Some(reason.into()),
        }
    }
}

/// What this kernel allows, as found by [`Capabilities::probe`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// The operating system stockade was built for.
    pub os: &'static str,
    /// User namespaces that can map ids and mount (with mount, pid, ipc, uts).
    pub user_namespaces: Availability,
    /// A fresh procfs can be mounted in a new PID namespace (nested containers refuse it).
    pub fresh_proc: Availability,
    /// Landlock, with the ABI version in the reason when unavailable.
    pub landlock: Availability,
    /// The Landlock ABI version (0 when unavailable).
    pub landlock_abi: u32,
    /// seccomp filters.
    pub seccomp: Availability,
}

impl Capabilities {
    /// Probes the kernel; the result is cached for the life of the process.
    pub fn probe() -> &'static Capabilities {
        static CAPS: OnceLock<Capabilities> = OnceLock::new();
        CAPS.get_or_init(|| {
            let caps = probe_now();
            tracing::info!(
                user_namespaces = caps.user_namespaces.available,
                fresh_proc = caps.fresh_proc.available,
                landlock_abi = caps.landlock_abi,
                seccomp = caps.seccomp.available,
                "stockade probed the kernel"
            );
            caps
        })
    }

    /// Whether `layer` can run here, and why not.
    pub fn layer(&self, layer: Layer) -> Availability {
        match layer {
            Layer::Passthrough => Availability::yes(),
            Layer::Full => self.user_namespaces.clone(),
            Layer::Landlock => {
                if !self.landlock.available {
                    self.landlock.clone()
                } else {
                    self.seccomp.clone()
                }
            }
        }
    }

    /// The strongest layer available.
    pub fn best_layer(&self) -> Layer {
        [Layer::Full, Layer::Landlock]
            .into_iter()
            .find(|l| self.layer(*l).available)
            .unwrap_or(Layer::Passthrough)
    }
}

#[cfg(target_os = "linux")]
fn probe_now() -> Capabilities {
    let (user_namespaces, fresh_proc) = crate::backend::linux::probe_namespaces();
    let landlock_abi = stockade_sys::linux::landlock_abi_version()
        .unwrap_or(0)
        .max(0) as u32;
    let landlock = match stockade_sys::linux::landlock_abi_version() {
        Ok(v) if v >= 1 => Availability::yes(),
        Ok(v) => Availability::no(format!("landlock ABI {v}")),
        Err(e) => Availability::no(format!(
            "landlock_create_ruleset: {}",
            crate::error::strerror(e.0)
        )),
    };
    let seccomp = match stockade_sys::linux::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) {
        Ok(_) => Availability::yes(),
        Err(e) => Availability::no(format!(
            "prctl(PR_GET_SECCOMP): {}",
            crate::error::strerror(e.0)
        )),
    };
    Capabilities {
        os: "linux",
        user_namespaces,
        fresh_proc,
        landlock,
        landlock_abi,
        seccomp,
    }
}

#[cfg(not(target_os = "linux"))]
fn probe_now() -> Capabilities {
    let no = || Availability::no(format!("not available on {}", std::env::consts::OS));
    Capabilities {
        os: std::env::consts::OS,
        user_namespaces: no(),
        fresh_proc: no(),
        landlock: no(),
        landlock_abi: 0,
        seccomp: no(),
    }
}
