//! The fork launcher's backend, for macOS and the other Unix systems: a child made by
//! `fork()` that sets up stdio, its session and signals, on macOS enters the Seatbelt
//! sandbox, and execs.
//!
//! `posix_spawn` cannot run code in the child, and `sandbox_init` has to run there (it
//! confines the calling process: the host itself is never sandboxed). A forked child is a
//! copy of a possibly multithreaded host, so it follows the same rule as the Linux child:
//! [`prepare`] (parent) computes every byte, [`child`] replays and allocates nothing, with
//! `sandbox_init` as the one documented exception. A failure comes back as one
//! [`crate::backend::report::Record`], the protocol every launcher shares.
//!
//! Which confinement the child applies is chosen here, by `#[cfg]` on module lines:
//! macOS uses [`crate::backend::macos`]; elsewhere [`Confine`] is an empty enum, so no
//! plan step can claim a sandbox that is not there. This module also builds on Linux for
//! unit tests (unconfined), so its child path runs in Linux CI.

pub mod child;
pub mod prepare;

#[cfg(target_os = "macos")]
pub mod seatbelt;
#[cfg(not(target_os = "macos"))]
pub mod unconfined;

#[cfg(target_os = "macos")]
pub use seatbelt as os;
#[cfg(not(target_os = "macos"))]
pub use unconfined as os;

pub use os::Confine;

/// Index of the per-command steps after the plan's own steps (`INIT` is Linux's only).
pub use crate::backend::report::extra;
