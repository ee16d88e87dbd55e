//! Unix systems without a containment backend (FreeBSD, OpenBSD, …): passthrough only.
//! Built on Linux too, for the fork launcher's unit tests.

use std::path::Path;

use crate::backend::passthrough;
use crate::backend::report::MESSAGE_LEN;
use crate::error::{Error, PlanError};
use crate::plan::Plan;
use crate::policy::{Layer, Policy};

/// No confinement exists here: the type has no values, so no child can be handed one.
#[derive(Debug)]
pub enum Confine {}

/// Refuses a policy that demands containment, naming this system.
///
/// # Errors
///
/// [`passthrough::check`]'s error.
pub fn check(policy: &Policy) -> Result<(), PlanError> {
    passthrough::check(policy, std::env::consts::OS)
}

/// There is no full layer here.
///
/// # Errors
///
/// Always [`PlanError::LayerUnavailable`] naming this system.
pub fn full_plan(_policy: &Policy) -> Result<Plan, Error> {
    Err(passthrough::unsupported(Layer::Full, std::env::consts::OS).into())
}

/// There is nothing to prepare.
///
/// # Errors
///
/// Always [`PlanError::LayerUnavailable`] naming this system.
pub fn confine(_policy: &Policy, _tmpdir: Option<&Path>) -> Result<Confine, Error> {
    Err(passthrough::unsupported(Layer::Full, std::env::consts::OS).into())
}

/// Never called: there is no `Confine` value to call it with.
pub fn confine_in_child(c: &Confine, _message: &mut [u8; MESSAGE_LEN]) -> Result<(), usize> {
    match *c {}
}
