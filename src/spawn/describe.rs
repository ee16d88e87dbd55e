//! What a host or the CLI may print about a sandbox without running it: the macOS profile
//! a policy gets ([`macos_profile`]).

use crate::backend::sbpl;
use crate::error::{Error, PlanError};
use crate::plan::{Plan, RealFs};
use crate::policy::Policy;

/// The Seatbelt (SBPL) profile that macOS's backend applies for `policy`, generated on any
/// OS: the plan of macOS's full layer ([`Sandbox`](crate::Sandbox) on macOS), its paths
/// resolved on this host as macOS would see them (`/tmp` is `/private/tmp`), without the
/// per-command `TMPDIR` a spawn adds.
///
/// # Errors
///
/// [`Error::Policy`] for an invalid policy, [`Error::Plan`] when its workspace is unusable,
/// [`Error::Profile`] when a path cannot be written into a profile.
pub fn macos_profile(policy: &Policy) -> Result<String, Error> {
    policy.validate()?;
    let plan = Plan::seatbelt(policy, &RealFs)?;
    let input = plan
        .walls
        .sbpl
        .ok_or_else(|| PlanError::Conflict("the macOS plan has no profile".into()))?;
    Ok(sbpl::profile(&input)?)
}
