//! [`Child`]: a running (or finished) sandboxed program: wait, kill, signal.

use std::io::{self, Read};
use std::process::{ExitStatus, Output};
use std::time::{Duration, Instant};

use super::{ChildStderr, ChildStdin, ChildStdout, launch, tmp};

/// A running (or finished) sandboxed program, with `std::process::Child`'s API.
///
/// Like std's, dropping a `Child` neither kills nor reaps it, unless the command asked for
/// it ([`Command::kill_on_drop`](crate::Command::kill_on_drop)). What the program still uses
/// stays until it ends: layer 2's private `TMPDIR` is removed, and the `.git` layers are
/// merged back, from a thread that waits for the program's end.
///
/// # Platform
///
/// Linux: the program dies with the host process (`PR_SET_PDEATHSIG`). macOS and other
/// Unix systems have no such signal: the program outlives a host that exits without
/// killing it.
#[derive(Debug)]
pub struct Child {
    pub(super) pid: libc::pid_t,
    /// The launcher's handle (a pidfd on Linux).
    pub(super) handle: launch::Handle,
    /// The program's own process, as the host sees it.
    pub(super) program: launch::ProgramProcess,
    /// Whether dropping this `Child` unwaited ends the sandbox.
    pub(super) kill_on_drop: bool,
    pub(super) status: Option<ExitStatus>,
    /// Layer 2's private temporary directory, removed once the program has been reaped.
    pub(super) private_tmp: Option<tmp::PrivateTmp>,
    /// The full layer's `.git` layers, merged back once the program has been reaped.
    pub(super) git: launch::GitSession,
    /// The repositories in the writable roots at the spawn; the program's are treated at
    /// the end.
    pub(super) nested: super::nested::Watch,
    /// Its limits: cgroup, wall-time timer, and how it ended.
    pub(super) run: super::limits::Run,
    pub(super) redactor: crate::Redactor,
    /// The program's stdin, when piped.
    pub stdin: Option<ChildStdin>,
    /// The program's stdout, when piped.
    pub stdout: Option<ChildStdout>,
    /// The program's stderr, when piped.
    pub stderr: Option<ChildStderr>,
    /// The master of the program's pseudo-terminal ([`Command::pty`](crate::Command::pty)).
    pub(super) pty: Option<super::Pty>,
    /// With `network = "allow"`: this run's share of the sandbox's egress proxy.
    pub(super) egress: Option<crate::guard::egress::Run>,
    /// With explain on: what the seccomp filter denied, and the watched connects.
    pub(super) explain: Option<super::explain::Run>,
    /// In overlay mode: this run's hold on the change set, and on layer 2 the snapshot's
    /// difference, written into the change set once every process of the sandbox is gone.
    pub(super) snapshot: Option<super::changeset::Run>,
}

impl Child {
    /// The pid, in the host's PID namespace, of the sandbox's first process: its init on
    /// the Linux layers that have one (full and landlock), else the program itself.
    ///
    /// This is the process the host waits for and [`Child::kill`] ends; it stays the
    /// host's child, its number reserved, until it is reaped. It is not the program: for
    /// the program's own pid (a process list, `/proc/<pid>`) see [`Child::program_id`].
    ///
    /// # Platform
    ///
    /// Linux full layer: the init, PID 1 inside the sandbox's PID namespace, where the
    /// program is its child (usually PID 2 there, which is what the program sees as its
    /// own pid, `$$`). Linux landlock layer: the init, a subreaper whose child is the
    /// program (no PID namespace: the program sees its host pid). Passthrough, macOS and
    /// other Unix systems: the program's pid.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// The program's pid as the host sees it (in the host's PID namespace), for hosts that
    /// show process lists: `/proc/<pid>` on the host is the program's. `None` when it
    /// could not be found at the spawn.
    ///
    /// Found once, right after the spawn, and kept: the number names the program only
    /// while it runs. Once the program has ended, its parent (the init) reaps it and the
    /// number may be reused by any process; the host cannot hold it, as it holds
    /// [`Child::id`].
    ///
    /// # Platform
    ///
    /// Linux full and landlock layers: the init's first child, read from
    /// `/proc/<init>/task/<init>/children` (`None` without `/proc`, or when the program
    /// had already ended and been reaped). On the full layer this differs from the pid
    /// the program sees inside, in its own PID namespace. Passthrough, macOS and other
    /// Unix systems: [`Child::id`].
    pub fn program_id(&self) -> Option<u32> {
        self.program.id()
    }

    /// The host's side of the program's pseudo-terminal ([`Command::pty`](crate::Command::pty)):
    /// read the program's terminal output from it, write its input to it, resize it.
    /// `None` without one, or once taken.
    pub fn pty(&self) -> Option<&super::Pty> {
        self.pty.as_ref()
    }

    /// Takes the pseudo-terminal's master out of the `Child`, to move it to another
    /// thread (as [`Child::stdout`] is taken). [`Child::wait`] does not close it: drop it
    /// once the output is read (the program's session gets `SIGHUP` if it still runs).
    pub fn take_pty(&mut self) -> Option<super::Pty> {
        self.pty.take()
    }

    /// A redactor for this program's output: the host's secrets ([`Sandbox::set_secrets`](crate::Sandbox::set_secrets))
    /// and the values of the command's [`Command::secret_env`](crate::Command::secret_env) variables. Wrap an output
    /// pipe in a [`crate::RedactingWriter`] with it, or call
    /// [`Redactor::redact`](crate::Redactor::redact) on captured output.
    pub fn redactor(&self) -> &crate::Redactor {
        &self.redactor
    }

    /// Ends the whole sandbox: the program and every process it started. [`Child::wait`]
    /// then reports `SIGKILL`.
    ///
    /// # Errors
    ///
    /// The error of `pidfd_send_signal` (Linux) or `kill` (elsewhere); none when the
    /// sandbox has already been reaped. Until it is reaped its pid cannot be reused, so
    /// the signal cannot reach another process.
    ///
    /// # Platform
    ///
    /// Linux full layer: `SIGKILL` to the init, PID 1 of the sandbox's PID namespace; the
    /// kernel kills every process of the namespace with it. Linux landlock layer: a kill
    /// request to the init, a child subreaper, which kills and reaps every descendant of
    /// the program before it exits. Passthrough, macOS and other Unix systems: `SIGKILL` to
    /// the program's process group (the program leads its own session and group unless the
    /// policy sets `keep_session`), then to the program. Nothing contains the program
    /// there: a descendant that left the group (`setsid`, `setpgid`, a daemon's double
    /// fork) escapes, and with `keep_session` only the program itself is killed. With a
    /// cgroup (Linux, limits that need one), every process in it is killed as well
    /// (`cgroup.kill`), wherever it moved its session or group.
    pub fn kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        self.end()
    }

    /// Ends the unreaped sandbox: the program's group in passthrough first, while the
    /// program, not reaped (its status is unknown, and a reap needs `&mut self`), still
    /// holds its number; then the sandbox's own kill; then its cgroup, if any.
    fn end(&self) -> io::Result<()> {
        let group = self.program.kill_group(self.pid);
        let r = launch::kill(self.pid, &self.handle);
        self.run.kill_all();
        r.and(group)
    }

    /// How the program ended, and whether one of its [limits](crate::policy::Limits)
    /// ended it (wall time, memory, processes, CPU time, file size); `None` until it has
    /// been waited for.
    ///
    /// ```no_run
    /// # let sandbox = stockade::Sandbox::new(stockade::Policy::with_workspace("/tmp")).unwrap();
    /// let mut child = sandbox.command("make").spawn().unwrap();
    /// child.wait().unwrap();
    /// if let Some(t) = child.termination().filter(|t| t.by_limit()) {
    ///     eprintln!("stopped: {t}"); // "wall time 10m reached"
    /// }
    /// ```
    pub fn termination(&self) -> Option<super::Termination> {
        self.run.termination()
    }

    /// What the whole sandbox used: wall time, user and system CPU time, peak memory, and
    /// the limit events of its cgroup; `None` until the program has been waited for.
    ///
    /// Waits for the sandbox's last process (its init) to be gone, which
    /// [`Child::wait`] does not (see there): a fraction of a millisecond.
    ///
    /// # Platform
    ///
    /// With a cgroup (Linux, `memory`, `processes` or `cpu` set and a cgroup the host may
    /// use): the cgroup's figures, peak memory of the whole sandbox at once. Otherwise the
    /// `rusage` of the init (Linux full and landlock layers), which counts every process
    /// of the sandbox, or of the program (elsewhere: the program and the children it
    /// waited for); peak memory is then the largest resident set of any one process.
    pub fn usage(&mut self) -> Option<super::Usage> {
        self.status?;
        launch::reap_now(&self.handle, &self.run.rusage);
        self.run.usage()
    }

    /// Delivers signal `sig` to the program.
    ///
    /// `sig` is one of `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2`,
    /// `SIGWINCH` (the signals the init forwards), `SIGSTOP`, `SIGTSTP`, `SIGCONT` (job
    /// control: pause and resume the sandbox), or `SIGKILL`, which ends the whole sandbox
    /// as [`Child::kill`] does. The program's handlers run as usual: a program that traps
    /// `SIGTERM` may exit with a code of its own, one that does not dies of it and
    /// [`Child::wait`] reports the signal.
    ///
    /// `SIGSTOP` pauses the program and every process of its process group, `SIGCONT`
    /// resumes them. `SIGTSTP` reaches the same processes, but only a handler acts on it
    /// (an editor's, which suspends itself cleanly): the program's group is alone in its
    /// session, an orphaned group for the kernel, which discards a `SIGTSTP` whose action
    /// would be the default stop. The host sends these to the program's process group
    /// itself, not through the init, which keeps running and answering. A process that left the
    /// program's group (`setsid`, `setpgid`, a daemon's double fork) is not paused; with
    /// the policy's `keep_session` the program has no group of its own and is signalled
    /// alone.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] for any other signal; the error of
    /// `pidfd_send_signal` (Linux) or `kill` (elsewhere). None when the sandbox has
    /// already been reaped. [`io::ErrorKind::Unsupported`] for the job-control signals
    /// when the program's process was not found at the spawn ([`Child::program_id`] is
    /// `None`).
    ///
    /// # Platform
    ///
    /// Linux full and landlock layers: sent to the sandbox's init, which forwards it to the
    /// program (the program's own children are the program's business, as under a shell);
    /// the job-control signals go from the host to the program's process group (with a
    /// pidfd of the program, which cannot name a reused number on Linux 6.9 and later).
    /// Passthrough, macOS and other Unix systems: sent to the program directly, the
    /// job-control signals to its process group.
    pub fn signal(&self, sig: i32) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        if sig == libc::SIGKILL {
            return self.end();
        }
        if matches!(sig, libc::SIGSTOP | libc::SIGTSTP | libc::SIGCONT) {
            return self.program.signal_group(sig);
        }
        if !stockade_init::protocol::FORWARDED.contains(&sig) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "signal {sig} is not delivered to sandboxed programs (SIGTERM, SIGINT, \
                     SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGSTOP, SIGTSTP, SIGCONT \
                     are; SIGKILL ends the sandbox)"
                ),
            ));
        }
        launch::signal(self.pid, &self.handle, sig)
    }

    /// Waits for the program to exit. Closes stdin first, as std does.
    ///
    /// # Errors
    ///
    /// The error of `waitpid`.
    ///
    /// # Platform
    ///
    /// Linux full and landlock layers: returns when the sandbox's init reports the
    /// program's status, which it does once the program has ended and every other process
    /// of the sandbox has been killed and reaped: nothing the program started runs any
    /// more (on layer 2 the init finds them in `/proc/thread-self/children`, or without it
    /// kills every process of its Landlock domain, which needs ABI 6; with neither it kills
    /// the program and reaps what has ended, and descendants that detached may outlive the
    /// wait: see `SECURITY.md`). The init's own exit,
    /// which on the full layer tears the namespaces down (~0.3 ms), is not waited for: the
    /// init is reaped by a later spawn or wait, or when the last clone of a
    /// [`Sandbox`](crate::Sandbox) is dropped. Until then the sandbox's mount namespace may
    /// still hold its bind mounts of host file systems, so a device the host unmounts right
    /// after the wait may still be busy for that long. In overlay mode
    /// (`workspace_mode = "overlay"`) on the full layer, the overlay's last reference is
    /// the host's and is dropped after the init's exit on a thread of its own (overlayfs
    /// syncs the change set's file system then); the change set stays held until that is
    /// done, and a later run on it, or [`ChangeSet::open`](crate::ChangeSet::open), waits
    /// for it. Elsewhere: `waitpid` of the program.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        if let Some(s) = self.status {
            return Ok(s);
        }
        let s = self
            .waitpid(0)?
            .ok_or_else(|| io::Error::other("waitpid returned no status"))?;
        Ok(s)
    }

    /// With `network = "allow"`: every decision the egress proxy made for this run so far,
    /// oldest first: each name or address the program asked for, how (HTTP, `CONNECT`,
    /// SOCKS5), the addresses connected to when allowed, and the refusal otherwise. Empty
    /// for other network modes.
    pub fn egress_decisions(&self) -> Vec<crate::guard::egress::Decision> {
        self.egress
            .as_ref()
            .map(crate::guard::egress::Run::decisions)
            .unwrap_or_default()
    }

    /// What the sandbox denied the program, one entry per distinct operation with its
    /// count, the wall that denied it and the policy change that would allow it
    /// ([`Denial`](crate::Denial)), oldest first. With
    /// [`Command::explain`](crate::Command::explain) on: every system call the seccomp
    /// filter refused, every path the layout refused or hid and, with `network = "none"`,
    /// every `connect` to an address off the sandbox's loopback. With `network = "allow"`: the egress proxy's refusals, explain
    /// or not.
    ///
    /// Complete for the program's own calls once [`Child::wait`] has returned (each is
    /// counted before the call returns to the program); while it runs, the denials so
    /// far.
    ///
    /// # Platform
    ///
    /// Linux, layers with a seccomp filter (full and landlock). Elsewhere, and in
    /// passthrough, only the egress proxy's refusals.
    pub fn denials(&self) -> Vec<crate::Denial> {
        let mut out = self
            .explain
            .as_ref()
            .map(|r| r.denials(self.status.is_some()))
            .unwrap_or_default();
        out.extend(super::denial::from_egress(&self.egress_decisions()));
        out
    }

    /// Waits for the program to exit for at most `timeout`: `Ok(None)` when it is still
    /// running then, else its exit status (the same as [`Child::wait`]'s, with the same
    /// guarantees). Closes stdin first, as [`Child::wait`] does. The program is not
    /// killed on the timeout: call [`Child::kill`] for that.
    ///
    /// # Errors
    ///
    /// The error of `poll` or `waitpid`.
    ///
    /// # Platform
    ///
    /// Linux: polls [`Child::wait_fd`]. Elsewhere: [`Child::try_wait`] every few
    /// milliseconds.
    pub fn wait_timeout(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        drop(self.stdin.take());
        let Some(deadline) = Instant::now().checked_add(timeout) else {
            return self.wait().map(Some);
        };
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(Some(s));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            launch::await_news(&self.handle, left)?;
        }
    }

    /// The exit status if the program has exited, without blocking.
    ///
    /// # Errors
    ///
    /// The error of `waitpid`.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        self.waitpid(libc::WNOHANG)
    }

    fn waitpid(&mut self, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
        launch::reap_earlier(false);
        // The init's record: the program and every process of the sandbox are gone; the
        // init's own exit is left, reaped later.
        let block = flags & libc::WNOHANG == 0;
        #[cfg(target_os = "linux")]
        if self.program.in_session() {
            // A session's command: its supervisor is not the host's child (the session's
            // server reaps it). No record yet, or none will come (the supervisor was
            // killed with the session: the command's processes died with it, as a
            // sandbox killed whole).
            if let Some(s) = self.handle.early_status(block) {
                return Ok(Some(self.ended(s)));
            }
            if self.handle.status_fd().is_some() {
                return Ok(None);
            }
            launch::wait_gone(&self.handle);
            let s = std::os::unix::process::ExitStatusExt::from_raw(libc::SIGKILL);
            return Ok(Some(self.ended(s)));
        }
        if let Some(s) = launch::early_status(&mut self.handle, block, &self.run.rusage) {
            return Ok(Some(self.ended(s)));
        }
        // Wait without reaping, then reap under the lock the wall-time watchdog takes
        // to signal the pid: it never signals a pid reused after the reap.
        loop {
            // SAFETY: an all-zero `siginfo_t` is a valid value of this plain C struct.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let options = libc::WEXITED | libc::WNOWAIT | (flags & libc::WNOHANG);
            // SAFETY: `info` is a valid out-pointer; `self.pid` is our unreaped child.
            let r =
                unsafe { libc::waitid(libc::P_PID, self.pid as libc::id_t, &mut info, options) };
            if r == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        let reaped = std::sync::Arc::clone(&self.run.reaped);
        let mut reaped = reaped.lock().unwrap_or_else(|e| e.into_inner());
        let mut status: libc::c_int = 0;
        // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: `status` and `usage` are valid out-pointers; `self.pid` is our
            // unreaped child.
            let r = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == 0 {
                // Not exited after all (only without `WNOHANG` would waitid have waited).
                return Ok(None);
            }
            if r > 0 {
                *reaped = true;
                drop(reaped);
                *self.run.rusage.lock().unwrap_or_else(|e| e.into_inner()) = Some(usage);
                let s = launch::exit_status(&self.handle, status);
                return Ok(Some(self.ended(s)));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Records the program's status `s`, then cleans up after the sandbox once it is gone.
    ///
    /// The status may come from the init's record, written when the program and every
    /// other process have been reaped; what reads or removes what the program wrote (the
    /// private `TMPDIR`, the `.git` layers) waits for the init's own exit as well, never
    /// trusting a record alone (`launch::wait_gone`).
    fn ended(&mut self, s: ExitStatus) -> ExitStatus {
        self.status = Some(s);
        // Every process of the sandbox is gone: nothing connects to its listeners any more.
        if let Some(run) = &self.egress {
            run.end();
        }
        // A cgroup to read and remove, a timer to stop: after every process is gone.
        let gone = self.run.needs_finish() && launch::wait_gone(&self.handle);
        self.run.finish(s, gone);
        if let Some(dir) = self.private_tmp.take() {
            if launch::wait_gone(&self.handle) {
                tmp::remove(dir);
            } else {
                tmp::remove_after_exit(dir, self.pid, &self.handle);
            }
        }
        // Both wait for the init's exit themselves: every process of its namespace is gone
        // then, and nothing writes the writable roots or the `.git` layers any more.
        // First the repositories the program made in the writable roots are found and
        // neutralized, then the `.git` layers are merged and layer 2's `.git` control files
        // put back (a put-back `.git` file is a new inode, which the nested check would
        // otherwise take for one the program made).
        self.nested.finish();
        self.git.finish();
        if let Some(run) = self.snapshot.take() {
            if run.is_overlay() {
                // The full layer's overlay: the program has ended, so a later run on the
                // change set waits for this one rather than being refused; the sandbox's
                // end and the overlay's last reference (its sync of the change set's
                // file system) are waited for on a thread of their own, off this caller's
                // path, and the change set is released after them.
                run.closing();
                let later = tmp::after_exit(self.pid, &self.handle, "stockade-overlay", run, {
                    |run, gone| run.finish(gone)
                });
                if let Err(run) = later {
                    run.finish(launch::wait_gone(&self.handle));
                }
            } else {
                run.finish(launch::wait_gone(&self.handle));
            }
        }
        s
    }

    /// Waits for the program and collects its piped stdout and stderr.
    ///
    /// # Errors
    ///
    /// I/O errors from reading the pipes or waiting.
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let err_reader = self.stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                e.read_to_end(&mut buf).map(|_| buf)
            })
        });
        let mut stdout = Vec::new();
        if let Some(mut o) = self.stdout.take() {
            o.read_to_end(&mut stdout)?;
        }
        let stderr = match err_reader {
            Some(h) => h
                .join()
                .map_err(|_| io::Error::other("stderr reader panicked"))??,
            None => Vec::new(),
        };
        let status = self.wait()?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // Unwaited, the proxy's run goes on until the sandbox's first process ends (its
        // pidfd tells the proxy); reaped, it has ended already.
        if let Some(run) = self.egress.take() {
            if self.status.is_none() && !self.kill_on_drop {
                run.detach();
            } else {
                run.end();
            }
        }
        if self.kill_on_drop && self.status.is_none() {
            let _ = self.kill();
            launch::reap_later(self.pid, &self.handle, &self.run.rusage);
        }
        // Reaped: `waitpid` has removed the directory already. Unreaped: the program may
        // still run and use it.
        if self.status.is_none() {
            if let Some(dir) = self.private_tmp.take() {
                tmp::remove_after_exit(dir, self.pid, &self.handle);
            }
            // The change set stays this run's (no other run mounts it) until its sandbox
            // has ended, and layer 2's difference is written then.
            if let Some(run) = self.snapshot.take() {
                let held = tmp::after_exit(
                    self.pid,
                    &self.handle,
                    "stockade-changes",
                    run,
                    |run, gone| run.finish(gone),
                );
                if let Err(run) = held {
                    // No way to wait: the next run finds the lock held by nobody only
                    // once this process lets go of it here; say so.
                    tracing::warn!(
                        "stockade: cannot wait for a dropped command's end; its change set is released now"
                    );
                    run.finish(false);
                }
            }
            // Its cgroup stays while it runs (its limits with it), then goes.
            #[cfg(target_os = "linux")]
            self.run
                .detach(super::launch::dup_cloexec(std::os::fd::AsFd::as_fd(
                    &self.handle,
                )));
        }
    }
}
