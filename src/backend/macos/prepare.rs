//! Parent side: everything the child will need, computed before the fork.

use std::ffi::{CStr, CString};
use std::path::PathBuf;

use crate::backend::sbpl::{self, SbplError, SbplInput};
use crate::policy::Policy;

/// The profile for one spawn, ready for [`super::apply_in_child`].
#[derive(Clone, Debug)]
pub struct Prepared {
    profile: CString,
}

impl Prepared {
    /// Generates the profile for `policy`, with every path resolved by
    /// [`sbpl::canonicalize`] and `tmpdir` as the per-run `TMPDIR`.
    ///
    /// # Errors
    ///
    /// An [`SbplError`] for a path the profile cannot hold.
    pub fn new(policy: &Policy, tmpdir: Option<PathBuf>) -> Result<Self, SbplError> {
        let mut input = SbplInput::from_policy(policy, sbpl::canonicalize)?;
        input.tmpdir = tmpdir.map(|t| sbpl::canonicalize(&t));
        Self::from_input(&input)
    }

    /// Generates the profile for an input built by the caller.
    ///
    /// # Errors
    ///
    /// As [`sbpl::profile`].
    pub fn from_input(input: &SbplInput) -> Result<Self, SbplError> {
        Ok(Prepared {
            profile: sbpl::profile_cstring(input)?,
        })
    }

    /// The profile text.
    pub fn profile(&self) -> &CStr {
        &self.profile
    }
}
