//! Child side of the second and third walls: the Landlock rules for the child's own
//! mounts, the Landlock ruleset itself, and the seccomp filter, all prepared by the parent
//! ([`Walls`]).
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::{c_int, c_uint};
use std::ffi::CString;

use stockade_sys::linux as sys;
use stockade_sys::linux::CWD;
use stockade_sys::{BorrowedFd, Errno, OwnedFd};

use super::R;
use crate::backend::linux::prepare::{Exec, ExplainFilter, Walls};
use crate::backend::linux::seccomp::Filter;

/// The command's Landlock ruleset fd (only asked for when the plan has walls, so it is open).
fn landlock_fd(exec: &Exec) -> BorrowedFd<'_> {
    // SAFETY: the parent keeps the ruleset fd open in `exec` until this child has exec'd or
    // exited, and `close_fds` keeps it. With no walls it is -1 and no step asks for it; a
    // call on -1 fails with EBADF and touches nothing.
    unsafe { BorrowedFd::borrow_raw(exec.landlock_fd) }
}

/// Rules for the file systems this child mounted itself (their inodes did not exist when
/// the parent built the ruleset). Paths are the sandbox's own mountpoints, after
/// `pivot_root`.
pub(super) fn landlock_rules(walls: Option<&Walls>, exec: &Exec) -> R {
    match walls {
        Some(w) => add_rules(&w.child_rules, landlock_fd(exec)),
        None => Err(Errno(libc::EINVAL)),
    }
}

/// Adds one rule per path. Each path's fd stays open until the rules are added, and then
/// every run of consecutive numbers among them closes in one `close_range` (they fill the
/// gaps between the kept fds, lowest first: a few runs, not one `close` per rule).
fn add_rules(rules: &[(CString, u64)], ruleset: BorrowedFd<'_>) -> R {
    let mut held = Held::default();
    let mut r = Ok(());
    for (path, bits) in rules {
        let fd = match sys::openat(CWD, path, libc::O_PATH | libc::O_CLOEXEC, 0) {
            Ok(fd) => fd,
            Err(e) => {
                r = Err(e);
                break;
            }
        };
        r = sys::landlock_add_rule_path_beneath(ruleset, fd.as_fd(), *bits);
        if let Err(fd) = held.keep(fd) {
            let _ = sys::close(fd);
        }
        if r.is_err() {
            break;
        }
    }
    held.close();
    r
}

/// The rule paths' fds, by number, until [`Held::close`]: no allocation after the clone.
#[derive(Default)]
struct Held {
    fds: [c_int; 16],
    len: usize,
}

impl Held {
    /// Takes `fd` to close later, or gives it back when full.
    fn keep(&mut self, fd: OwnedFd) -> Result<(), OwnedFd> {
        match self.fds.get_mut(self.len) {
            Some(slot) => {
                *slot = fd.into_raw_fd();
                self.len += 1;
                Ok(())
            }
            None => Err(fd),
        }
    }

    /// Closes every fd held, one `close_range` per run of consecutive numbers.
    fn close(mut self) {
        let fds = self.fds.get_mut(..self.len).unwrap_or_default();
        fds.sort_unstable();
        let mut i = 0;
        while let Some(&first) = fds.get(i) {
            let mut last = first;
            i += 1;
            while fds.get(i) == Some(&(last + 1)) {
                last += 1;
                i += 1;
            }
            // SAFETY: every number in `first..=last` is an fd this function opened and
            // gave up ownership of (`into_raw_fd`), none closed yet: the run holds only them.
            let _ = unsafe { sys::close_range(first as c_uint, last as c_uint, 0) };
        }
    }
}

/// Restricts this process with the command's ruleset. Needs no_new_privs (set by the step
/// before) and takes effect at once, for this process and everything it execs.
///
/// The sandbox's shared layer, when there is one, is not entered here but by the
/// program's process alone (the init's fork, `init/src/program.rs`; without an init,
/// [`shared_landlock`]), so that the kernel copies its hundreds
/// of rules once per command (each `landlock_restrict_self` copies the rules of the domain
/// so far into a new one); its scoping then also keeps the program from signalling the
/// init, which stays under the command's layer only.
pub(super) fn landlock(exec: &Exec) -> R {
    sys::landlock_restrict_self(landlock_fd(exec), log_flags(exec))?;
    if exec.init.is_none() {
        // No program's process of its own (no init): this process is the program.
        shared_landlock(exec)?;
    }
    Ok(())
}

/// Enters the sandbox's shared Landlock layer, when the command has one and no init: this
/// process is the program's, on top of the command's layer ([`landlock`]). A right is
/// then granted only where both grant it.
fn shared_landlock(exec: &Exec) -> R {
    let Some(shared) = &exec.shared_landlock else {
        return Ok(());
    };
    // SAFETY: `exec` holds the shared layer (an `Arc` the parent keeps until the setup
    // child has exec'd or exited), so its fd is open, and `close_fds` keeps it.
    let fd = unsafe { BorrowedFd::borrow_raw(shared.raw_fd()) };
    sys::landlock_restrict_self(fd, log_flags(exec))
}

/// The flags of each `landlock_restrict_self`: 0, or with explain on where the host reads
/// Landlock's audit records, the flag that keeps them coming after `execve`
/// ([`ExplainFilter::landlock_log`](crate::backend::linux::prepare::ExplainFilter)).
pub(super) fn log_flags(exec: &Exec) -> u32 {
    exec.explain.as_ref().map_or(0, |e| e.landlock_log)
}

/// Installs the seccomp filter. The kernel copies the program during the call
/// (`seccomp_prepare_user_filter`), so the parent's buffer only has to outlive it, which
/// CLONE_VFORK guarantees.
pub(super) fn seccomp(filter: Option<&Filter>) -> R {
    match filter {
        Some(f) => {
            // SAFETY: stockade's filter answers only with ALLOW, KILL_PROCESS and ERRNO
            // of EPERM or ENOSYS (`seccomp::build`): no call reports a success that did
            // not happen.
            unsafe { sys::seccomp_set_mode_filter(0, f.instructions()) }.map(drop)
        }
        None => Err(Errno(libc::EINVAL)),
    }
}

/// Installs the explained filter with a listener, sends the listener to the parent and
/// closes this child's copy, so that after `execve` only the host holds it.
///
/// Nothing after this step until the program's `execve` (the controlling terminal,
/// `chdir`, the init's exec, setup and fork, the program's process's session, domain and
/// terminal) is a call the filter denies: such a call would wait for an answer that the
/// host, itself waiting for the exec, gives only after the spawn.
pub(super) fn seccomp_explained(explain: &ExplainFilter) -> R {
    // SAFETY: the explained filter answers with ALLOW, KILL_PROCESS, ERRNO of ENOSYS, and
    // USER_NOTIF, which the host answers with the errno the filter without explain would
    // have returned (EPERM or ENOSYS), by letting a watched call run, or (layer 2's
    // `network = "allow"`) with the result of a `connect` it made itself on the caller's
    // own socket: no call reports a success that did not happen. No call of this child
    // waits on the listener before the host has it (see above).
    let listener =
        unsafe { sys::seccomp_set_mode_filter_listener(0, explain.filter.instructions()) }?;
    // SAFETY: the parent keeps its copy of the socket's child end open in `exec` until
    // this child has exec'd or exited, and `close_fds` keeps it.
    let socket = unsafe { BorrowedFd::borrow_raw(explain.socket) };
    let r = sys::send_fd(socket, 0, listener.as_fd());
    let _ = sys::close(listener.into_fd());
    r
}
