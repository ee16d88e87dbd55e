//! Parent side: everything the child will need, computed before the fork.

use std::ffi::{CStr, CString};

use crate::backend::sbpl::{self, SbplError, SbplInput};

/// The profile for one spawn, ready for [`super::apply_in_child`].
#[derive(Clone, Debug)]
pub struct Prepared {
    profile: CString,
}

impl Prepared {
    /// Generates the profile for `input` (the plan's, with the command's `TMPDIR`).
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
