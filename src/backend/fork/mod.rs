//! The fork launcher's backend, for macOS and the other Unix systems: a child made by
//! `fork()` that sets up stdio, its session and signals, on macOS enters the Seatbelt
//! sandbox, and execs.
//!
//! `posix_spawn` cannot run code in the child, and `sandbox_init` has to run there (it
//! confines the calling process: the host itself is never sandboxed). A forked child is a
//! copy of a possibly multithreaded host, so it follows the same rule as the Linux child:
//! [`prepare`] (parent) computes every byte, [`child`] replays and allocates nothing, with
//! `sandbox_init` as the one documented exception. A failure comes back as one
//! fixed-size [`report::Record`].
//!
//! Which confinement the child applies is chosen here, by `#[cfg]` on module lines:
//! macOS uses [`crate::backend::macos`]; elsewhere [`Confine`] is an empty enum, so no
//! plan step can claim a sandbox that is not there. This module also builds on Linux for
//! unit tests (unconfined), so its child path runs in Linux CI.

pub mod child;
pub mod prepare;
pub mod report;

#[cfg(target_os = "macos")]
pub mod seatbelt;
#[cfg(not(target_os = "macos"))]
pub mod unconfined;

#[cfg(target_os = "macos")]
pub use seatbelt as os;
#[cfg(not(target_os = "macos"))]
pub use unconfined as os;

pub use os::Confine;

use std::path::Path;

use crate::plan::{Plan, Step};

/// Index of the per-command steps after the plan's own steps.
pub mod extra {
    /// Moving stdio into place.
    pub const STDIO: u32 = 0;
    /// Closing inherited fds.
    pub const CLOSE_FDS: u32 = 1;
    /// Changing to the working directory.
    pub const CHDIR: u32 = 2;
    /// Running the program.
    pub const EXEC: u32 = 3;
}

/// Describes step `index` of a child that ran `plan` plus the per-command steps.
pub fn describe_step(plan: &Plan, index: u32, cwd: &Path, program: &str) -> String {
    if let Some(step) = plan.steps.get(index as usize) {
        return step.to_string();
    }
    match index.checked_sub(plan.steps.len() as u32) {
        Some(extra::STDIO) => Step::Stdio.to_string(),
        Some(extra::CLOSE_FDS) => Step::CloseFds.to_string(),
        Some(extra::CHDIR) => Step::Chdir(cwd.to_path_buf()).to_string(),
        Some(extra::EXEC) => Step::Exec(program.to_string()).to_string(),
        _ => format!("step {index}"),
    }
}
