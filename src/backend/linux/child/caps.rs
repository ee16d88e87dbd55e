//! Child side of the privilege steps: a keyring of its own, and every capability set
//! emptied before the walls go up.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use stockade_sys::Errno;
use stockade_sys::linux as sys;

use super::R;

/// Joins a new anonymous session keyring, so that the host's session keys are out of
/// reach. A kernel without keys has no host keys to hide.
pub(super) fn new_keyring() -> R {
    match sys::keyctl_join_session_keyring_anonymous() {
        Ok(_) | Err(Errno(libc::ENOSYS)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Empties every capability set. The bounding set goes first (dropping from it needs
/// `CAP_SETPCAP`, which `capset` then removes), so an `execve` of a file with file
/// capabilities, or as uid 0, cannot bring any back. A caller without `CAP_SETPCAP` (a
/// user on layer 2, whose ambient capabilities still go) keeps its bounding set: with
/// `no_new_privs` no `execve` gains what the empty permitted set lacks.
pub(super) fn drop_capabilities(last_cap: u32) -> R {
    for cap in 0..=last_cap {
        match sys::prctl_capbset_drop(cap) {
            Ok(_) => {}
            Err(Errno(libc::EINVAL | libc::EPERM)) => break,
            Err(e) => return Err(e),
        }
    }
    match sys::prctl_cap_ambient_clear_all() {
        Ok(_) | Err(Errno(libc::EINVAL)) => {}
        Err(e) => return Err(e),
    }
    sys::capset(&[sys::CapUserData::default(); 2])
}
