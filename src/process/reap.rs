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

use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};

static PENDING: Mutex<Vec<OwnedFd>> = Mutex::new(Vec::new());

/// Reaps `pidfd`'s process later ([`reap`]): a child of this process that has ended, or
/// is ending, on its own.
pub(super) fn later(pidfd: OwnedFd) {
    let mut list = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|fd| !reaped(fd, false));
    list.push(pidfd);
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
        for fd in &all {
            reaped(fd, true);
        }
    } else {
        list.retain(|fd| !reaped(fd, false));
    }
}

/// Whether `pidfd`'s process is reaped now (or was reaped by someone else).
fn reaped(pidfd: &OwnedFd, block: bool) -> bool {
    let mut flags = WaitPidFlag::WEXITED;
    if !block {
        flags |= WaitPidFlag::WNOHANG;
    }
    loop {
        match waitid(Id::PIDFd(pidfd.as_fd()), flags) {
            Ok(WaitStatus::StillAlive) => return false,
            Ok(_) => return true,
            Err(nix::Error::EINTR) => {}
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
        assert!(!reaped(&fd, false), "a running child is not reaped");
        assert!(reaped(&fd, true), "waits for it");
        // Reaped already: ECHILD, which counts as reaped (std's own wait now fails).
        assert!(reaped(&fd, false));
        assert!(running.try_wait().is_err());
    }
}
