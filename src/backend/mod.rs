//! Backends: turn a policy into what the OS enforces.
//!
//! This is the only module that fans out on `target_os`. The SBPL generator is plain text
//! and builds everywhere, so Linux CI tests it; the modules that call into an OS are
//! declared for that OS only. Which layer runs, and what each wall allows, the plan has
//! decided: a backend compiles and applies it.
//!
//! | OS | module |
//! | --- | --- |
//! | Linux | `linux`: namespaces, mounts, Landlock, seccomp |
//! | macOS | `macos`: a generated SBPL profile applied with `sandbox_init`, in a child of `fork` (`fork`) |
//! | elsewhere | a clean environment only (the passthrough plan), in a child of `fork` (`fork`) |
//!
//! `fork` also builds on Linux under `cfg(test)`, unconfined, so that its child path
//! runs in Linux CI. Both launchers' children speak one protocol to their parent:
//! [`report`].

#[cfg(any(test, not(target_os = "linux")))]
pub mod fork;
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;
#[cfg(unix)]
pub(crate) mod program;
#[cfg(unix)]
pub mod report;
pub mod sbpl;

use crate::probe::Capabilities;

impl Capabilities {
    /// Probes the kernel; the result is cached for the life of the process.
    ///
    /// On Linux this spawns a probe child into new namespaces (through the same launcher
    /// as a sandbox, so what it finds is what a spawn meets); elsewhere the cheap facts are
    /// the probe. [`Sandbox::new`](crate::Sandbox::new) never calls it: a sandbox starts
    /// from the cheap facts, and its first spawn is the probe (see
    /// [Choosing the layer](crate::Sandbox#choosing-the-layer-optimistic-with-fallback-at-the-first-spawn)).
    pub fn probe() -> &'static Capabilities {
        crate::probe::probed_or_init(full_probe)
    }
}

/// The cheap facts and what a namespace child finds.
#[cfg(target_os = "linux")]
fn full_probe(cheap: Capabilities) -> Capabilities {
    let (user_namespaces, fresh_proc, found) = linux::probe_namespaces();
    let mut causes = cheap.causes.clone();
    causes.extend(found.into_iter().filter(|c| !cheap.causes.contains(c)));
    Capabilities {
        user_namespaces,
        fresh_proc,
        causes,
        ..cheap
    }
}

/// Nothing here needs a probe child: the cheap facts are the probe.
#[cfg(not(target_os = "linux"))]
fn full_probe(cheap: Capabilities) -> Capabilities {
    cheap
}
