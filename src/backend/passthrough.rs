//! Platforms without a containment backend: the program runs with a sanitized
//! environment and nothing else, and says so.
//!
//! This backend never pretends. When the policy demands containment, [`check`] refuses with
//! an error that names the platform; otherwise the plan records the `passthrough` layer so
//! that `Sandbox::capabilities()` reports it. The environment rules themselves are shared
//! with the other backends.

use crate::error::PlanError;
use crate::policy::{Fallback, Layer, Mode, Policy};

/// The error for a policy that demands more than `platform` can give.
///
/// `wanted` is the layer the policy asked for; `platform` is an OS name such as
/// `std::env::consts::OS`.
pub fn unsupported(wanted: Layer, platform: &str) -> PlanError {
    PlanError::LayerUnavailable {
        wanted,
        reason: format!(
            "stockade has no containment backend for {platform}; only environment sanitization is available"
        ),
    }
}

/// Checks whether `policy` may run as passthrough on `platform`.
///
/// A policy accepts passthrough when containment is disabled, when it asks for the
/// `passthrough` layer, or when it degrades (`fallback = "degrade"`) and its `min_layer`
/// (if any) is `passthrough`.
///
/// # Errors
///
/// [`PlanError::LayerUnavailable`] naming `platform` and the layer the policy wanted.
pub fn check(policy: &Policy, platform: &str) -> Result<(), PlanError> {
    if policy.mode == Mode::Disabled {
        return Ok(());
    }
    let wanted = policy.layer.unwrap_or(Layer::Full);
    if wanted == Layer::Passthrough {
        return Ok(());
    }
    let floor = policy.min_layer.unwrap_or(Layer::Passthrough);
    if policy.fallback == Fallback::Refuse || floor < Layer::Passthrough {
        return Err(unsupported(wanted, platform));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_degrades_to_passthrough() {
        assert!(check(&Policy::default(), "freebsd").is_ok());
    }

    #[test]
    fn refusing_policies_get_an_error_naming_the_platform() {
        let policy = Policy {
            fallback: Fallback::Refuse,
            ..Policy::default()
        };
        let err = check(&policy, "freebsd").unwrap_err();
        assert_eq!(
            err.to_string(),
            "containment layer `full` is not available: stockade has no containment backend \
             for freebsd; only environment sanitization is available"
        );
    }

    #[test]
    fn a_minimum_layer_above_passthrough_is_refused() {
        let policy = Policy {
            min_layer: Some(Layer::Landlock),
            ..Policy::default()
        };
        assert!(matches!(
            check(&policy, "openbsd"),
            Err(PlanError::LayerUnavailable {
                wanted: Layer::Full,
                ..
            })
        ));
    }

    #[test]
    fn asking_for_passthrough_or_disabling_is_accepted() {
        let asked = Policy {
            layer: Some(Layer::Passthrough),
            fallback: Fallback::Refuse,
            ..Policy::default()
        };
        assert!(check(&asked, "freebsd").is_ok());
        let disabled = Policy {
            mode: Mode::Disabled,
            fallback: Fallback::Refuse,
            ..Policy::default()
        };
        assert!(check(&disabled, "freebsd").is_ok());
    }
}
