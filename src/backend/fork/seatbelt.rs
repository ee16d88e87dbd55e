//! macOS: the full layer is the Seatbelt profile of [`crate::backend::macos`].

use std::path::Path;

use crate::backend::macos;
use crate::backend::report::MESSAGE_LEN;
use crate::error::{Error, PlanError};
use crate::plan::{Plan, RealFs};
use crate::policy::Policy;

/// The prepared profile.
pub type Confine = macos::Prepared;

/// Every layer macOS offers is decided by the probe; nothing to refuse up front.
///
/// # Errors
///
/// None.
pub fn check(_policy: &Policy) -> Result<(), PlanError> {
    Ok(())
}

/// The plan of the full layer: passthrough's steps, then `sandbox_init`.
///
/// # Errors
///
/// As [`Plan::seatbelt`].
pub fn full_plan(policy: &Policy) -> Result<Plan, Error> {
    Ok(Plan::seatbelt(policy, &RealFs)?)
}

/// Generates the profile for one command, with its private `TMPDIR`.
///
/// # Errors
///
/// [`Error::Profile`] when a path cannot be written into the profile.
pub fn confine(policy: &Policy, tmpdir: Option<&Path>) -> Result<Confine, Error> {
    Ok(macos::Prepared::new(policy, tmpdir.map(Path::to_path_buf))?)
}

/// Child side: `sandbox_init` (see [`macos::apply_in_child`]). The report buffer's type
/// pins `MESSAGE_LEN` to `macos::REPORT_LEN`.
pub fn confine_in_child(c: &Confine, message: &mut [u8; MESSAGE_LEN]) -> Result<(), usize> {
    macos::apply_in_child(c, message)
}
