//! `stockade run` passes the signals it receives on to the sandboxed program, and exits
//! with the program's status.
//!
//! The forwarded signals and `SIGCHLD` are blocked from the start of `run`, before anything
//! starts a thread (the library's spawner threads inherit the mask of the thread that
//! starts them), so none of them can end or interrupt the CLI. After the spawn, one loop
//! waits for them: `SIGCHLD` means the sandbox may have ended (`try_wait`), any other is
//! handed to [`Child::signal`], which delivers it through the sandbox's init.
//!
//! While the program has a pseudo-terminal of its own ([`crate::relay`]), `SIGWINCH` is
//! not forwarded: the caller's new size is copied to the program's terminal, whose kernel
//! signals the program's foreground process group. `SIGCONT` also puts the caller's
//! terminal back in raw mode (when stockade is in its foreground), and `SIGTSTP` restores
//! the caller's modes before stockade stops.
//!
//! With `keep_session` the program shares the terminal's foreground process group with
//! the CLI, so a `^C` typed there reaches it directly: the kernel sends such a signal to
//! the whole group, with `si_code == SI_KERNEL`. Forwarding it as well would deliver it
//! twice; the CLI skips those (Linux, where the code is known).

use std::io;
use std::process::ExitStatus;

use nix::sys::signal::{SigSet, Signal};
use stockade::Child;

use crate::relay::Running;

/// The signals passed on to the program as they are (`run`, and a session's client to
/// its command). `run` also relays `SIGWINCH` (to a terminal of the program's own) and
/// handles `SIGTSTP` itself.
pub const FORWARDED: [Signal; 7] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGCONT,
];

/// The forwarded signals, blocked in this thread and every thread it starts from now on.
pub struct Signals {
    set: SigSet,
}

impl Signals {
    /// Blocks the forwarded signals and `SIGCHLD`. Call before anything starts a thread.
    pub fn block() -> Signals {
        let mut set = SigSet::empty();
        for sig in FORWARDED
            .into_iter()
            .chain([Signal::SIGWINCH, Signal::SIGCHLD, Signal::SIGTSTP])
        {
            set.add(sig);
        }
        // Cannot fail for a valid set; if it did, the signals would act as before (end
        // the CLI), which the sandbox survives only until PR_SET_PDEATHSIG ends it.
        let _ = set.thread_block();
        Signals { set }
    }

    /// Waits for `child`, forwarding every signal received meanwhile; `keep_session`: the
    /// program is in the terminal's foreground process group, with the CLI; `stdio`: the
    /// relay of its stdio.
    ///
    /// # Errors
    ///
    /// The errors of waiting for the child or reading the signals.
    #[cfg(target_os = "linux")]
    pub fn wait(
        &self,
        child: &mut Child,
        keep_session: bool,
        stdio: &Running,
    ) -> io::Result<ExitStatus> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use nix::sys::signalfd::{SfdFlags, SignalFd};
        use std::os::fd::AsFd;
        let fd = SignalFd::with_flags(&self.set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)?;
        loop {
            // The program's status comes on `wait_fd` (the init's status pipe), before the
            // init's own exit and its SIGCHLD; the signals on the signalfd. A sandbox that
            // has ended already leaves `wait_fd` readable: the poll comes first, and the
            // signalfd is read only when it has something.
            let mut fds = [
                PollFd::new(fd.as_fd(), PollFlags::POLLIN),
                PollFd::new(child.wait_fd(), PollFlags::POLLIN),
            ];
            let signalled = match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => fds[0].revents().is_none_or(|r| !r.is_empty()),
                Err(nix::Error::EINTR) => true,
                Err(e) => return Err(e.into()),
            };
            if fds[1].revents().is_some_and(|r| !r.is_empty()) {
                // The program has ended: the caller's terminal gets its modes back now,
                // before `try_wait`'s checks of what the run left (the nested
                // repositories' walk, the `.git` merge), which a program can stretch to
                // seconds (review: the terminal stayed raw, ^C echoed nothing meanwhile).
                // The relay's input thread reads no more from here: what the caller types
                // meanwhile stays in the terminal for the shell.
                stdio.end();
            }
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if !signalled {
                continue;
            }
            let info = match fd.read_signal() {
                Ok(Some(info)) => info,
                Ok(None) | Err(nix::Error::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let sig = info.ssi_signo as i32;
            if !terminal(sig, stdio) {
                continue;
            }
            if sig == libc::SIGCHLD || (keep_session && info.ssi_code == libc::SI_KERNEL) {
                continue;
            }
            // The sandbox may be ending at this moment; its status is what counts.
            let _ = child.signal(sig);
        }
    }

    /// Waits for `child`, forwarding every signal received meanwhile.
    ///
    /// # Errors
    ///
    /// The errors of waiting for the child or for the signals.
    #[cfg(not(target_os = "linux"))]
    pub fn wait(
        &self,
        child: &mut Child,
        _keep_session: bool,
        stdio: &Running,
    ) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            let sig = self.set.wait()?;
            if terminal(sig as i32, stdio) && sig != Signal::SIGCHLD {
                let _ = child.signal(sig as i32);
            }
        }
    }
}

/// What the caller's terminal makes of `sig`; whether it is still forwarded. `SIGTSTP`
/// (not forwarded) stops stockade, with the caller's modes restored while it is stopped.
fn terminal(sig: i32, stdio: &Running) -> bool {
    match sig {
        libc::SIGWINCH if stdio.has_terminal() => {
            stdio.resize();
            false
        }
        libc::SIGCONT => {
            stdio.refresh();
            true
        }
        libc::SIGTSTP => {
            stdio.restore();
            // SIGTSTP is blocked; SIGSTOP stops as its default action would have.
            let _ = nix::sys::signal::raise(Signal::SIGSTOP);
            false
        }
        _ => true,
    }
}
