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
    /// macOS: the Seatbelt sandbox (`sandbox_init` with a generated SBPL profile), which
    /// is the `full` layer there.
    pub sandbox: Availability,
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
                sandbox = caps.sandbox.available,
                "stockade probed the kernel"
            );
            caps
        })
    }

    /// Whether `layer` can run here, and why not.
    pub fn layer(&self, layer: Layer) -> Availability {
        match layer {
            Layer::Passthrough => Availability::yes(),
            Layer::Full => self.full_backend().clone(),
            Layer::Landlock => {
                if !self.landlock.available {
                    self.landlock.clone()
                } else {
                    self.seccomp.clone()
                }
            }
        }
    }

    /// What the `full` layer is made of on this OS: the Seatbelt sandbox on macOS, user
    /// namespaces (with mounts, Landlock and seccomp) elsewhere.
    fn full_backend(&self) -> &Availability {
        if self.os == "macos" {
            &self.sandbox
        } else {
            &self.user_namespaces
        }
    }

    /// Whether the `full` layer mounts a fresh `/proc` (namespaces do; Seatbelt does not).
    pub(crate) fn full_mounts_proc(&self) -> bool {
        self.os != "macos"
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
        sandbox: Availability::no("sandbox_init is macOS only"),
    }
}

#[cfg(not(target_os = "linux"))]
fn probe_now() -> Capabilities {
    let os = std::env::consts::OS;
    let linux_only = |what: &str| Availability::no(format!("{what} is Linux only, not on {os}"));
    Capabilities {
        os,
        user_namespaces: linux_only("user namespaces"),
        fresh_proc: linux_only("a fresh /proc of a PID namespace"),
        landlock: linux_only("Landlock (a Linux security module)"),
        landlock_abi: 0,
        seccomp: linux_only("seccomp"),
        sandbox: sandbox_availability(),
    }
}

/// The Seatbelt sandbox is part of every macOS (`libsystem_sandbox` in `libSystem`); a
/// profile it refuses comes back from the spawn as `SpawnError::SandboxInit`.
#[cfg(target_os = "macos")]
fn sandbox_availability() -> Availability {
    Availability::yes()
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn sandbox_availability() -> Availability {
    Availability::no(format!(
        "sandbox_init is macOS only; stockade has no containment backend for {}",
        std::env::consts::OS
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(os: &'static str) -> Capabilities {
        Capabilities {
            os,
            user_namespaces: Availability::no("userns reason"),
            fresh_proc: Availability::no("proc reason"),
            landlock: Availability::no("landlock reason"),
            landlock_abi: 0,
            seccomp: Availability::no("seccomp reason"),
            sandbox: Availability::yes(),
        }
    }

    #[test]
    fn full_is_seatbelt_on_macos_and_namespaces_elsewhere() {
        let mac = caps("macos");
        assert!(mac.layer(Layer::Full).available);
        assert!(!mac.full_mounts_proc());
        assert_eq!(mac.best_layer(), Layer::Full);
        assert_eq!(
            mac.layer(Layer::Landlock).reason.as_deref(),
            Some("landlock reason")
        );
        let linux = caps("linux");
        assert_eq!(
            linux.layer(Layer::Full).reason.as_deref(),
            Some("userns reason")
        );
        assert!(linux.full_mounts_proc());
        assert_eq!(linux.best_layer(), Layer::Passthrough);
    }
}
