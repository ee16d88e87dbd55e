//! Unix systems without a containment backend (FreeBSD, OpenBSD, …): passthrough only
//! (the plan never has a `sandbox_init` step here). Built on Linux too, for the fork
//! launcher's unit tests.

use std::path::Path;

use crate::backend::report::MESSAGE_LEN;
use crate::error::{Conflict, Error, PlanError};
use crate::plan::Plan;

/// No confinement exists here: the type has no values, so no child can be handed one.
#[derive(Debug)]
pub enum Confine {}

/// There is nothing to prepare: a plan that asks for a sandbox here is refused.
///
/// # Errors
///
/// Always [`Conflict::NoSandboxBackend`] naming this system.
pub fn confine(
    _plan: &Plan,
    _tmpdir: Option<&Path>,
    _proxy_ports: &[u16],
) -> Result<Confine, Error> {
    Err(PlanError::Conflict(Conflict::NoSandboxBackend {
        os: std::env::consts::OS,
    })
    .into())
}

/// Never called: there is no `Confine` value to call it with.
pub fn confine_in_child(c: &Confine, _message: &mut [u8; MESSAGE_LEN]) -> Result<(), usize> {
    match *c {}
}
