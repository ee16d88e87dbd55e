//! Inits whose command has been waited for, reaped once they have exited.
//!
//! [`Child::wait`](super::Child::wait) returns at the init's status record: by then the
//! program and every other process of the sandbox have been killed and reaped, and only
//! the init's own exit is left, which in a PID namespace tears the namespaces down (~0.3
//! ms: unmounting the sandbox's trees, an RCU grace period). The host does not wait for
//! that. The init stays the host's child until reaped, so its pidfd goes into this list,
//! and every later spawn and wait reaps what has exited meanwhile, without blocking; the
//! last clone of a [`Sandbox`](crate::Sandbox) being dropped waits for them all. So at most the inits of
//! the commands waited for since the last spawn or wait linger, as zombies, for a
//! fraction of a millisecond each.
//!
//! The list holds pidfds, never pids: a pid the host reaped by itself (a `waitpid(-1)`
//! elsewhere in the process) could name another process by now; its pidfd still names
//! the init, and reaping it then reports `ECHILD`, which drops it from the list.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

use super::limits::RusageSlot;

/// An init to reap, and where its `rusage` goes (its run's [`super::limits::Run`]).
type Pending = (OwnedFd, RusageSlot);

static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());

/// Reaps `pidfd`'s process later ([`reap`]): a child of this process that has ended, or
/// is ending, on its own. Its `rusage` lands in `slot`.
pub(super) fn later(pidfd: OwnedFd, slot: RusageSlot) {
    let mut list = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|p| !reaped(p, false));
    list.push((pidfd, slot));
}

/// Reaps every init in the list that has exited; with `block`, waits for each (outside
/// the list's lock, so that spawns and waits of other threads go on meanwhile).
pub(super) fn reap(block: bool) {
    let mut list = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    if list.is_empty() {
        return;
    }
    if block {
        let all = std::mem::take(&mut *list);
        drop(list);
        for p in &all {
            reaped(p, true);
        }
    } else {
        list.retain(|p| !reaped(p, false));
    }
}

/// Whether the process of `pending` is reaped now (or was reaped by someone else).
fn reaped(pending: &Pending, block: bool) -> bool {
    let (pidfd, slot) = pending;
    reap_into(pidfd.as_fd(), slot, block)
}

/// Reaps the process of `pidfd` if it has exited (with `block`, once it has) and stores
/// its `rusage` in `slot`: true when it is reaped now, or was reaped by someone else.
/// The slot's lock is held across the reap, so that whoever finds the slot empty after
/// a failed reap knows nobody will fill it.
pub(super) fn reap_into(
    pidfd: std::os::fd::BorrowedFd<'_>,
    slot: &RusageSlot,
    block: bool,
) -> bool {
    let mut options = libc::WEXITED;
    if !block {
        options |= libc::WNOHANG;
    }
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        match stockade_sys::linux::waitid_pidfd_rusage(pidfd.into(), options) {
            Ok(None) => return false,
            Ok(Some(usage)) => {
                *slot = Some(usage);
                return true;
            }
            Err(stockade_sys::Errno(libc::EINTR)) => {}
            // ECHILD: reaped elsewhere. Anything else cannot be retried usefully.
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exited_child_is_reaped_and_a_running_one_waits() {
        let mut running = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, running.id(), 0) };
        assert!(raw >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
        // SAFETY: pidfd_open returned a new fd that nothing else owns.
        let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw as i32) };
        let p = (fd, RusageSlot::default());
        assert!(!reaped(&p, false), "a running child is not reaped");
        assert!(p.1.lock().unwrap().is_none());
        assert!(reaped(&p, true), "waits for it");
        assert!(p.1.lock().unwrap().is_some(), "its rusage is kept");
        // Reaped already: ECHILD, which counts as reaped (std's own wait now fails).
        assert!(reaped(&p, false));
        assert!(running.try_wait().is_err());
    }
}
