//! macOS: the full layer is the Seatbelt profile of [`crate::backend::macos`], generated
//! from the plan's input ([`crate::plan::Walls::sbpl`]).

use std::path::Path;

use crate::backend::macos;
use crate::backend::report::MESSAGE_LEN;
use crate::error::{Conflict, Error, PlanError};
use crate::plan::{Plan, RealFs, seatbelt_path};

/// The prepared profile.
pub type Confine = macos::Prepared;

/// Generates the profile for one command: the plan's input with its private `TMPDIR` and,
/// with `network = "allow"`, the ports its egress proxy listens on (the host's loopback).
///
/// # Errors
///
/// [`Conflict::NoProfileInput`] for a plan without the profile's input, [`Error::Profile`] when
/// a path cannot be written into the profile or the proxy's ports do not fit the policy's
/// network (none for `allow`, some for another mode), [`SpawnError::DeniedName`](crate::error::SpawnError::DeniedName) for a denied name
/// the profile cannot hide (`crate::backend::sbpl::check_denied_names`).
pub fn confine(plan: &Plan, tmpdir: Option<&Path>, proxy_ports: &[u16]) -> Result<Confine, Error> {
    let mut input = plan
        .walls
        .sbpl
        .clone()
        .ok_or(PlanError::Conflict(Conflict::NoProfileInput))?;
    input.tmpdir = tmpdir.map(|t| seatbelt_path(&RealFs, t));
    input.proxy_ports = proxy_ports.to_vec();
    // Per spawn: a program can plant a link under a denied name between two commands.
    crate::backend::sbpl::check_denied_names(&input)?;
    Ok(macos::Prepared::from_input(&input)?)
}

/// Child side: `sandbox_init` (see [`macos::apply_in_child`]). The report buffer's type
/// pins `MESSAGE_LEN` to `macos::REPORT_LEN`.
pub fn confine_in_child(c: &Confine, message: &mut [u8; MESSAGE_LEN]) -> Result<(), usize> {
    macos::apply_in_child(c, message)
}
