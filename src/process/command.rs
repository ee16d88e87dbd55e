//! [`Command`]: the builder with `std::process::Command`'s API, and one spawn attempt
//! (with the fallback to a weaker layer when the host refuses the first).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::data_dir::check_data_dir;
use super::sandbox::Inner;
use super::{Child, ChildStderr, ChildStdin, ChildStdout, Stdio, env, launch, stdio, tmp};
use crate::error::{Error, PlanError, SpawnError};
use crate::plan::{Plan, Step};
use crate::policy::Layer;
use crate::probe::{Capabilities, Refusal};

/// What one start attempt yields: the sandbox's first process and everything the
/// command's run holds besides it, moved into its [`Child`].
struct Started {
    pid: libc::pid_t,
    handle: launch::Handle,
    private_tmp: Option<tmp::PrivateTmp>,
    git: launch::GitSession,
    nested: super::nested::Watch,
    run: super::limits::Run,
    program: launch::ProgramProcess,
    /// The master of the program's pseudo-terminal.
    master: Option<OwnedFd>,
    egress: Option<crate::guard::egress::Run>,
    explain: Option<super::explain::Run>,
    snapshot: Option<super::changeset::Run>,
}

/// A sandboxed process builder, with `std::process::Command`'s API.
///
/// Its `Debug` output shows the program, the arguments and the names of the variables
/// set, never their values (some are secrets).
pub struct Command {
    inner: Arc<Inner>,
    /// The sandbox's shared state, which a fallback at spawn updates for later commands.
    pub(super) sandbox: Option<Arc<ArcSwap<Inner>>>,
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    env_clear: bool,
    cwd: Option<PathBuf>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
    /// Shared with the copies `spawn_async` makes: a passed fd keeps its number, so it
    /// cannot be duplicated, and stays open while any copy spawns with it.
    pass: Vec<Arc<OwnedFd>>,
    /// Whether the program takes the terminal among its stdio as its controlling terminal.
    controlling_terminal: bool,
    /// Whether dropping the `Child` ends the sandbox.
    kill_on_drop: bool,
    /// A session's command: its background processes live on until the session closes
    /// ([`Command::keep_background`]).
    keep_background: bool,
    /// Whether the run reports what the sandbox denied ([`Command::explain`]).
    explain: bool,
    /// A pseudo-terminal of this size `(rows, cols)` for the program ([`Command::pty`]).
    pty: Option<(u16, u16)>,
    /// Its modes, when given ([`Command::pty_like`]).
    pty_modes: Option<super::pty::Modes>,
    /// The names and values of this command's `secret_env` variables.
    secrets: Vec<(OsString, Vec<u8>)>,
    /// The sandbox's redactor of the host's secrets (shared, not rebuilt per command).
    pub(super) redactor: crate::Redactor,
    /// A session's command: started by the session's server, inside its live sandbox.
    #[cfg(target_os = "linux")]
    pub(super) session: Option<Arc<super::session::Link>>,
    /// The session's own command: its program is the session server.
    pub(super) serve: bool,
}

impl Command {
    pub(super) fn new(inner: Arc<Inner>, program: &OsStr) -> Command {
        Command {
            inner,
            sandbox: None,
            program: program.to_owned(),
            args: vec![program.to_owned()],
            env: Vec::new(),
            env_clear: false,
            cwd: None,
            stdin: None,
            stdout: None,
            stderr: None,
            pass: Vec::new(),
            controlling_terminal: false,
            kill_on_drop: false,
            keep_background: false,
            explain: false,
            pty: None,
            pty_modes: None,
            secrets: Vec::new(),
            redactor: crate::Redactor::default(),
            #[cfg(target_os = "linux")]
            session: None,
            serve: false,
        }
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self.arg(a);
        }
        self
    }

    /// Sets a variable for the program, on top of the sandbox's clean environment.
    /// Variables that change how programs load code (`LD_PRELOAD`, …) are refused at spawn.
    pub fn env(&mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> &mut Command {
        self.env
            .push((key.as_ref().to_owned(), Some(val.as_ref().to_owned())));
        self
    }

    /// Sets a variable that holds a secret for this command only: the program receives
    /// it, and its value is registered with this command's [`Child::redactor`], so that the
    /// host can scrub it from the output. Never logged.
    ///
    /// A value shorter than [`MIN_SECRET_ENV_LEN`](crate::guard::redact::MIN_SECRET_ENV_LEN)
    /// (4) bytes makes [`spawn`](Command::spawn) fail with
    /// [`PlanError::SecretTooShort`]; one of 4 to 7 bytes is redacted (every occurrence of
    /// those bytes in the output), with a `tracing` warning that names the variable.
    pub fn secret_env(&mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> &mut Command {
        self.secrets.push((
            key.as_ref().to_owned(),
            val.as_ref().as_encoded_bytes().to_vec(),
        ));
        self.env(key, val)
    }

    /// Sets several variables.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    /// Removes a variable from the program's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Starts from an empty environment instead of the sandbox's clean one. (The host's
    /// environment is never inherited either way.)
    pub fn env_clear(&mut self) -> &mut Command {
        self.env.clear();
        self.env_clear = true;
        self
    }

    /// The working directory: it must resolve under the workspace. Relative paths are
    /// taken from the workspace. Default: the workspace.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// The program's standard input (default: inherited; [`Command::output`]: null).
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.stdin = Some(cfg.into());
        self
    }

    /// The program's standard output (default: inherited; [`Command::output`]: piped).
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.stdout = Some(cfg.into());
        self
    }

    /// The program's standard error (default: inherited; [`Command::output`]: piped).
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.stderr = Some(cfg.into());
        self
    }

    /// Passes `fd` to the program under the same number. Every other inherited fd but
    /// stdio is closed in the child.
    pub fn pass_fd(&mut self, fd: impl Into<OwnedFd>) -> &mut Command {
        self.pass.push(Arc::new(fd.into()));
        self
    }

    /// Makes the terminal among the program's stdin, stdout and stderr (the first that is
    /// one) its controlling terminal, in the new session the sandbox starts it in
    /// (`ioctl(fd, TIOCSCTTY, 0)` after `setsid`): `/dev/tty` then opens it, and the
    /// terminal's signals (`^C`, `^Z`, `SIGWINCH`, the hangup) reach the program's
    /// foreground process group. Default: off (a new session has no controlling terminal).
    ///
    /// Give the program a terminal of its own, a pseudo-terminal whose master the host
    /// keeps and relays (as `stockade run` does): never the host's own terminal, which the
    /// program could then resize, reconfigure and read from.
    ///
    /// # Errors
    ///
    /// The spawn fails with [`SpawnError::Setup`] naming the step (`make the terminal on
    /// stdin the controlling terminal (TIOCSCTTY)`) and the errno: `ENOTTY` when no stdio
    /// stream is a terminal, `EPERM` when the policy keeps the host's session
    /// (`keep_session`: the program is not a session leader) or the terminal already is
    /// another session's controlling terminal.
    ///
    /// # Platform
    ///
    /// With the sandbox's init (Linux, full layer and layer 2) the program's own process
    /// takes the terminal after its `setsid`, so that the init never receives the
    /// terminal's signals; in passthrough and on other systems the launcher's child does.
    pub fn controlling_terminal(&mut self, on: bool) -> &mut Command {
        self.controlling_terminal = on;
        self
    }

    /// Whether dropping the [`Child`] ends the program and every process it started, as
    /// [`Child::kill`] does, when it has not been waited for. Default: off, as with std
    /// (a dropped `Child` runs on); tokio's `Command::kill_on_drop` is the model. For a
    /// host that drops the `Child` of a cancelled task or timed-out call.
    ///
    /// The ended sandbox's first process (its init, or the program in passthrough) is
    /// reaped later, by a later spawn or wait of this process, or when the last clone
    /// of the [`Sandbox`](crate::Sandbox) is dropped.
    ///
    /// # Platform
    ///
    /// As [`Child::kill`]: the whole sandbox on the Linux full and landlock layers, the
    /// program's process group in passthrough and on other systems (a process that left
    /// the group escapes), and with a cgroup every process in it.
    pub fn kill_on_drop(&mut self, on: bool) -> &mut Command {
        self.kill_on_drop = on;
        self
    }

    /// A session's command ([`Session::command`](crate::Session::command)): with `keep`,
    /// the processes the program leaves running when it ends (`cmd &`, a daemon that
    /// double-forks) live on until the session closes, instead of ending with it. The
    /// command's status still comes when the program itself ends; those processes stay
    /// in the command's own Landlock domain (no other command can signal or trace them),
    /// keep the command's stdio open (so a host that reads its output to the end, as
    /// [`Command::output`] does, waits for them too: give them their own), and end at
    /// [`Session::close`](crate::Session::close), or with the session's sandbox.
    /// [`Child::kill`] before the program ends still ends them all. Default: off.
    ///
    /// # Errors
    ///
    /// The spawn of a command that is not a session's fails with `EINVAL`: a fresh
    /// sandbox ends with its program, and everything in it.
    pub fn keep_background(&mut self, keep: bool) -> &mut Command {
        self.keep_background = keep;
        self
    }

    /// Reports what the sandbox denies the program: with `on`, the run's
    /// [`Child::denials`] lists each distinct system call the seccomp filter refused (with
    /// the arguments that decided it, a count and the policy change that would allow it)
    /// and, with `network = "none"`, each `connect` off the sandbox's loopback, and each
    /// path the layout does not show, keeps read-only, masks or guards (wall
    /// [`Layout`](crate::Wall::Layout) or [`Masked`](crate::Wall::Masked), the path as
    /// `target`). Default: off.
    ///
    /// The program sees exactly what it would see without explain: the filter's denials
    /// notify the host ([`SECCOMP_RET_USER_NOTIF`](https://man7.org/linux/man-pages/man2/seccomp_unotify.2.html)),
    /// which answers each with the errno the filter would have returned, and the
    /// path-taking calls (`openat`, `execve`, the stat family, `mkdirat`, `unlinkat`,
    /// `renameat`, `linkat`, `symlinkat`, `truncate`, the chmod and chown families) notify
    /// and continue unchanged (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the host reads the path
    /// for the report and decides nothing). Each denied or path-taking call then costs a
    /// round trip to a thread of the host (some microseconds: a `grep -r` or a compiler
    /// runs noticeably slower); other calls cost nothing more. Off, the spawn and the
    /// filter are those of a command without this call.
    ///
    /// A program that installs a seccomp filter with a listener of its own gets `EBUSY`
    /// under explain (the kernel allows one listener per chain of filters).
    ///
    /// Landlock's own denials (wall [`Landlock`](crate::Wall::Landlock): a signal or a
    /// `ptrace` to a process outside the program's domain, a device `ioctl`, a move
    /// between directories with different rules, a TCP port) are read from the kernel's
    /// audit log where this process may (Landlock ABI 7, `CAP_AUDIT_READ`: a root host,
    /// and audit enabled on the host, which stockade never switches on), and only the
    /// run's own; one that repeats a layout entry is left out. The sandbox's Landlock
    /// denials then also reach the host's own audit log, as any Landlock user's do.
    /// Elsewhere the report comes from the seccomp view alone.
    ///
    /// # Platform
    ///
    /// Linux, on the layers with a seccomp filter (full and landlock). Elsewhere, and in
    /// passthrough, there is nothing to explain: [`Child::denials`] lists only the egress
    /// proxy's refusals.
    pub fn explain(&mut self, on: bool) -> &mut Command {
        self.explain = on;
        self
    }

    /// Gives the program a pseudo-terminal of its own, of `rows` by `cols`: its slave is
    /// the program's stdin, stdout and stderr and its controlling terminal (as with
    /// [`Command::controlling_terminal`]), and [`Child::pty`] holds the master, which stays
    /// with the host (close-on-exec). `tty`, `stty`, `/dev/tty`, job control, `^C` and
    /// `SIGWINCH` ([`Pty::resize`](crate::Pty::resize)) then work inside as on any
    /// terminal, so that `vi`, `python3 -i` or `less` run as they would for a user.
    ///
    /// A stream set explicitly ([`Command::stdin`], [`Command::stdout`],
    /// [`Command::stderr`]) keeps its setting, so that output can be piped while input
    /// comes from the terminal; the slave goes to the others. Each spawn opens a new
    /// pseudo-terminal.
    ///
    /// # Errors
    ///
    /// The spawn fails with [`SpawnError::Os`] when all three streams are set explicitly
    /// (no stream is left for the terminal: `EINVAL`), or when the pseudo-terminal cannot
    /// be opened (`open a pseudo-terminal`, and the errno; on the full layer, the step
    /// that makes `/dev` names the errno).
    ///
    /// # Platform
    ///
    /// Linux full layer: the pseudo-terminal comes from the sandbox's own devpts, so
    /// inside it is `/dev/pts/0`, the kernel's own name (`tty`, `ttyname()`, also musl's).
    /// Landlock layer, passthrough, macOS and other Unix systems: from the host's
    /// `/dev/ptmx`; the program sees the host's name `/dev/pts/N` (layer 2 grants it that
    /// terminal and none of the host's others).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::io::{Read, Write};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let sandbox = stockade::Sandbox::new(stockade::Policy::with_workspace("/srv/ws"))?;
    /// let mut child = sandbox.command("python3").arg("-i").pty(24, 80).spawn()?;
    /// let pty = child.take_pty().expect("asked for");
    /// (&pty).write_all(b"print(6 * 7)\nexit()\n")?;
    /// pty.resize(50, 132)?; // the program gets SIGWINCH
    /// let mut screen = Vec::new();
    /// (&pty).read_to_end(&mut screen)?; // ends when the program's side is closed
    /// child.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn pty(&mut self, rows: u16, cols: u16) -> &mut Command {
        self.pty = Some((rows, cols));
        self
    }

    /// [`Command::pty`] with the modes and window size of `terminal`, read now: for a host
    /// that relays its own terminal to the program, as `ssh -t` and `stockade run` do.
    /// The pseudo-terminal starts with them before the program runs, so nothing the
    /// program sets is overwritten later; the host then puts its own terminal in raw mode
    /// and copies its window size on `SIGWINCH` with [`Pty::resize`](crate::Pty::resize).
    ///
    /// # Errors
    ///
    /// `ENOTTY` when `terminal` is not a terminal; the error of reading its modes or size.
    pub fn pty_like(&mut self, terminal: impl std::os::fd::AsFd) -> io::Result<&mut Command> {
        let fd = terminal.as_fd();
        let modes = super::pty::modes_of(fd)?;
        let (rows, cols) = super::pty::size_of(fd)?;
        self.pty_modes = Some(modes);
        Ok(self.pty(rows, cols))
    }

    /// The program, as given.
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments after the program.
    pub fn get_args(&self) -> impl Iterator<Item = &OsStr> {
        self.args.iter().skip(1).map(OsString::as_os_str)
    }

    /// The layer this command runs on (its first spawn may fall back: see [`Sandbox`](crate::Sandbox)).
    pub fn layer(&self) -> Layer {
        self.inner.prepared.plan().layer
    }

    /// The environment the program will receive.
    ///
    /// # Errors
    ///
    /// [`PlanError::DangerousEnv`] for a refused variable.
    pub fn resolved_env(&self) -> Result<Vec<(OsString, OsString)>, PlanError> {
        let inner = &self.inner;
        env::build(
            &inner.policy,
            inner.prepared.plan(),
            self.env_clear,
            &self.env,
            &mut std::env::vars_os(),
        )
    }

    /// The working directory the program will start in (canonical, under the workspace).
    ///
    /// # Errors
    ///
    /// [`PlanError::CwdOutsideWorkspace`] or [`PlanError::Path`].
    pub fn resolved_cwd(&self) -> Result<PathBuf, PlanError> {
        let ws = &self.inner.prepared.plan().workspace;
        let Some(cwd) = &self.cwd else {
            return Ok(ws.clone());
        };
        let joined = ws.join(cwd);
        let canon = std::fs::canonicalize(&joined).map_err(|e| PlanError::Path {
            key: "current_dir",
            path: joined.clone(),
            errno: crate::error::errno_of(&e),
        })?;
        if !canon.starts_with(ws) {
            return Err(PlanError::CwdOutsideWorkspace {
                cwd: cwd.clone(),
                workspace: ws.clone(),
            });
        }
        Ok(canon)
    }

    /// Spawns the program in the sandbox.
    ///
    /// # Errors
    ///
    /// [`Error::Plan`] for a bad working directory, a refused variable, a `secret_env`
    /// value too short to redact ([`PlanError::SecretTooShort`]) or a replaced data dir; [`Error::Spawn`] when a setup step fails in the child (the error names the
    /// step, the path and the errno) or the program is not found.
    pub fn spawn(&mut self) -> Result<Child, Error> {
        self.spawn_with(Stdio::inherit, Stdio::inherit)
    }

    fn spawn_with(
        &mut self,
        def_in: fn() -> Stdio,
        def_out: fn() -> Stdio,
    ) -> Result<Child, Error> {
        if self.inner.knowledge != Capabilities::generation() {
            // A spawn of this process was refused since this command's state was
            // prepared: start on the layer the policy falls back to.
            self.replan()?;
        }
        if let Some((path, id)) = &self.inner.data_dir {
            check_data_dir(path, *id)?;
        }
        check_secret_lengths(&self.secrets)?;
        // Like std, the command keeps its stdio settings: it can be spawned again. With a
        // pseudo-terminal, the streams not set explicitly are its slave, made per attempt
        // in `start` (the layer decides where it comes from): none here.
        let slots = [
            self.stdin.is_none(),
            self.stdout.is_none(),
            self.stderr.is_none(),
        ];
        let slave = |i: usize| self.pty.is_some() && slots[i];
        // The streams whose fd the spawn makes and knows to be no terminal (a pipe, the
        // checked null device): nothing asks those fds again.
        let made = |s: &Option<Stdio>, def: fn() -> Stdio| {
            s.as_ref()
                .map_or_else(|| def().makes_no_terminal(), Stdio::makes_no_terminal)
        };
        let not_terminals = [
            !slave(0) && made(&self.stdin, def_in),
            !slave(1) && made(&self.stdout, def_out),
            !slave(2) && made(&self.stderr, def_out),
        ];
        let none = || Ok((None, None));
        let (stdin_child, stdin_parent) = match &self.stdin {
            _ if slave(0) => none(),
            Some(s) => s.setup(true),
            None => def_in().setup(true),
        }?;
        let (stdout_child, stdout_parent) = match &self.stdout {
            _ if slave(1) => none(),
            Some(s) => s.setup(false),
            None => def_out().setup(false),
        }?;
        let (stderr_child, stderr_parent) = match &self.stderr {
            _ if slave(2) => none(),
            Some(s) => s.setup(false),
            None => def_out().setup(false),
        }?;
        let stdio_fds = [
            stdio::raw(&stdin_child),
            stdio::raw(&stdout_child),
            stdio::raw(&stderr_child),
        ];
        let pty = self.pty.map(|(rows, cols)| PtyRequest {
            slots,
            size: super::pty::winsize(rows, cols),
            modes: self.pty_modes,
        });
        let (terminal, ctty) = match &pty {
            // The slave is the program's controlling terminal, on its first stream.
            Some(p) => {
                let first = p.first().ok_or_else(|| SpawnError::Os {
                    call: "give the pseudo-terminal to stdin, stdout or stderr (all three \
                           are set explicitly)",
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                })?;
                (Some(first), Some(first))
            }
            None => {
                let terminal = {
                    use std::os::fd::AsFd;
                    terminal_among(
                        [
                            stdin_child.as_ref().map(AsFd::as_fd),
                            stdout_child.as_ref().map(AsFd::as_fd),
                            stderr_child.as_ref().map(AsFd::as_fd),
                        ],
                        not_terminals,
                    )
                };
                // Without a terminal, taking one on stdin fails with `ENOTTY`, which names
                // the problem.
                (
                    terminal,
                    self.controlling_terminal.then(|| terminal.unwrap_or(0)),
                )
            }
        };
        let pty = pty.as_ref();
        let stdio_fds = (stdio_fds, not_terminals);
        let started = match self.start(stdio_fds, ctty, terminal, pty) {
            Err(StartError::Refused(refusal)) => {
                // The host refused this layer: learn it, re-plan per the policy (which
                // may refuse), and try once more on the layer chosen now.
                Capabilities::learn(&refusal);
                self.replan()
                    .and_then(|()| match self.start(stdio_fds, ctty, terminal, pty) {
                        Ok(started) => Ok(started),
                        Err(StartError::Failed(e)) => Err(e),
                        // The weaker layer has no namespaces (or binds the host's /proc), so
                        // it cannot be refused the same way; if it is, say so, do not loop.
                        Err(StartError::Refused(r)) => Err(PlanError::LayerUnavailable {
                            wanted: self.inner.prepared.plan().layer,
                            reason: r.to_string(),
                        }
                        .into()),
                    })
            }
            Err(StartError::Failed(e)) => Err(e),
            Ok(started) => Ok(started),
        };
        // The child's ends of the pipes close here, in the parent.
        drop((stdin_child, stdout_child, stderr_child));
        let Started {
            pid,
            handle,
            private_tmp,
            git,
            nested,
            run,
            program,
            master,
            egress,
            explain,
            snapshot,
        } = started?;
        Ok(Child {
            pid,
            handle,
            program,
            kill_on_drop: self.kill_on_drop,
            run,
            status: None,
            redactor: self
                .redactor
                .with_env_secrets(self.secrets.iter().map(|(_, v)| v)),
            private_tmp,
            git,
            nested,
            stdin: stdin_parent.map(ChildStdin::from),
            stdout: stdout_parent.map(ChildStdout::from),
            stderr: stderr_parent.map(ChildStderr::from),
            pty: master.map(super::pty::Pty::new),
            egress,
            explain,
            snapshot,
        })
    }

    /// One attempt to start the program on this command's current state. `stdio`: the
    /// source fds of 0, 1 and 2 (-1 to inherit), and which of them are known to be no
    /// terminal.
    fn start(
        &self,
        (mut stdio, not_terminals): ([RawFd; 3], [bool; 3]),
        controlling_terminal: Option<RawFd>,
        terminal: Option<RawFd>,
        pty: Option<&PtyRequest>,
    ) -> Result<Started, StartError> {
        #[cfg(target_os = "linux")]
        if let Some(link) = &self.session {
            return self.start_in_session(link, stdio, controlling_terminal, pty);
        }
        if self.keep_background {
            return Err(Error::from(SpawnError::Os {
                call: "keep a command's background processes (only a session's command \
                       can: Session::command; a fresh sandbox ends with its program)",
                source: io::Error::from_raw_os_error(libc::EINVAL),
            })
            .into());
        }
        let inner = &self.inner;
        let plan = inner.prepared.plan();
        // `workspace_mode = "overlay"`: the change set (and layer 2's snapshot, which is
        // the working directory's workspace then), made at the first run.
        #[allow(unused_mut)]
        let mut snapshot = super::changeset::prepare(plan)?;
        let mut env = self.resolved_env()?;
        let cwd = self.resolved_cwd()?;
        // `network = "allow"`: the proxy's listeners, and the variables that lead to them.
        let egress = super::egress::Pending::new(plan)?;
        if let Some(e) = &egress {
            e.set_env(&mut env);
        }
        warn_unguarded(plan);
        // Explain: the filter in its explained form, and the socket its listener comes
        // back through.
        #[cfg(target_os = "linux")]
        // Layer 2's `network = "allow"` (no network namespace): the host makes the
        // program's connects, to the proxy's ports only (Landlock's rules name ports, not
        // addresses), through the same listener.
        #[cfg(target_os = "linux")]
        let supervise = match &egress {
            Some(e) if !plan.namespaces.net && plan.walls.seccomp.is_some() => {
                Some(super::explain::Supervise {
                    ports: e.ports(),
                    admitted: crate::guard::egress::Admitted::new(),
                })
            }
            _ => None,
        };
        // The proxy serves only the connections the host made for the program.
        #[cfg(target_os = "linux")]
        let admitted = supervise.as_ref().map(|s| s.admitted.clone());
        #[cfg(not(target_os = "linux"))]
        let admitted = None;
        #[cfg(target_os = "linux")]
        let explain = match (self.explain || supervise.is_some(), &plan.walls.seccomp) {
            (true, Some(options)) => {
                let watch =
                    inner.policy.network == crate::policy::Network::None && plan.namespaces.net;
                let landlock = plan.walls.landlock.is_some();
                Some(super::explain::Pending::new(
                    *options,
                    watch,
                    landlock,
                    self.explain,
                    supervise,
                )?)
            }
            _ => None,
        };
        // Layer 2: a private temporary directory per command stands in for /tmp.
        let private_tmp = if plan.private_tmp {
            Some(tmp::create(&mut env, inner.tmp_parents.as_ref())?)
        } else {
            None
        };
        // The full layer: a copy-on-write layer over each writable root's `.git`.
        let mut git = launch::GitSession::prepare(plan)?;
        // A session's own sandbox leaves the rest to each of its commands
        // (`start_in_session`), taken when the command starts and checked when it ends.
        let per_run = !self.serve;
        #[allow(unused_mut)]
        let mut nested = if per_run {
            host_checks(plan, &inner.policy, &mut git)?
        } else {
            super::nested::Watch::default()
        };
        let pass: Vec<RawFd> = self.pass.iter().map(|fd| fd.as_raw_fd()).collect();
        // Its cgroup, when the limits need one: joined by the setup child first.
        let mut run = inner.limits.run()?;
        // The pseudo-terminal: from the sandbox's own devpts where the layer mounts one
        // (the full layer's `/dev`), else from the host's.
        let own_devpts = plan.steps.iter().any(|s| matches!(s, Step::Dev { .. }));
        let mut master = None;
        let mut _slave = None;
        #[cfg(target_os = "linux")]
        let mut inside = None;
        match pty {
            #[cfg(target_os = "linux")]
            Some(p) if own_devpts => inside = Some(launch::InsidePty::new(p)?),
            Some(p) => {
                let (m, s) = super::pty::open_host(p.size, p.modes.as_ref()).map_err(|source| {
                    SpawnError::Os {
                        call: "open a pseudo-terminal (/dev/ptmx)",
                        source,
                    }
                })?;
                for (fd, _) in stdio.iter_mut().zip(p.slots).filter(|(_, on)| *on) {
                    *fd = s.as_raw_fd();
                }
                master = Some(m);
                // Held until the program has it; the host's copy closes at the return.
                _slave = Some(s);
            }
            None => {}
        }
        #[cfg(not(target_os = "linux"))]
        let _ = own_devpts;
        // Explain: the answering thread starts before the spawn, which waits for the
        // program's `execve`, a watched call.
        #[cfg(target_os = "linux")]
        let explain_child = explain.as_ref().map(super::explain::Pending::child);
        #[cfg(target_os = "linux")]
        let explain = match explain {
            Some(p) => {
                let data_dir = inner.data_dir.as_ref().map(|(d, _)| d.as_path());
                let tmp = private_tmp.as_ref().map(tmp::PrivateTmp::path);
                let view = super::fsview::View::new(plan, &inner.policy, data_dir, tmp);
                Some(p.serve(view).map_err(|source| SpawnError::Os {
                    call: "start the thread that answers the seccomp listener",
                    source,
                })?)
            }
            None => None,
        };
        let req = Request {
            program: &self.program,
            args: self.args.clone(),
            env,
            cwd: &cwd,
            stdio,
            not_terminals,
            pass,
            controlling_terminal,
            terminal,
            private_tmp: private_tmp.as_ref().map(tmp::PrivateTmp::path),
            private_tmp_parent: private_tmp.as_ref().and_then(tmp::PrivateTmp::parent),
            git: &git,
            #[cfg(target_os = "linux")]
            cgroup: run.join_fds(),
            #[cfg(target_os = "linux")]
            pty: inside.as_ref().map(launch::InsidePty::child),
            egress_ports: egress.as_ref().map_or_else(Vec::new, |e| e.ports()),
            #[cfg(target_os = "linux")]
            egress_socket: egress.as_ref().map_or(-1, |e| e.child_socket()),
            #[cfg(target_os = "linux")]
            overlay_socket: snapshot
                .as_ref()
                .map_or(-1, super::changeset::Run::overlay_socket),
            #[cfg(target_os = "linux")]
            explain: explain_child,
            serve: self.serve,
        };
        let (pid, handle) = launch::start(&inner.prepared, req)?;
        // The overlay's mount, sent before the child exec'd: it waits in the socket.
        #[cfg(target_os = "linux")]
        if let Some(run) = snapshot.as_mut() {
            run.pin();
        }
        // First, before anything waits on the program: its denied calls wait for answers.
        #[cfg(target_os = "linux")]
        let explain = explain.map(|s| s.started(launch::until_fd(&handle), pid));
        #[cfg(not(target_os = "linux"))]
        let explain = None;
        // The listeners, served until the sandbox's first process has ended.
        let egress = match (egress, &inner.egress) {
            (Some(pending), Some(proxy)) => {
                match pending.serve(proxy, launch::until_fd(&handle), admitted) {
                    Ok(run) => Some(run),
                    Err(source) => {
                        let _ = launch::kill(pid, &handle);
                        run.kill_all();
                        return Err(SpawnError::Os {
                            call: "serve the egress proxy's listeners",
                            source,
                        }
                        .into());
                    }
                }
            }
            (Some(_), None) => {
                let _ = launch::kill(pid, &handle);
                run.kill_all();
                return Err(SpawnError::Os {
                    call: "serve the egress proxy's listeners (the sandbox has no proxy)",
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                }
                .into());
            }
            (None, _) => None,
        };
        // The child sent the master before it exec'd: it waits in the socket.
        #[cfg(target_os = "linux")]
        if let Some(inside) = inside {
            match inside.receive() {
                Ok(m) => master = Some(m),
                Err(source) => {
                    let _ = launch::kill(pid, &handle);
                    run.kill_all();
                    return Err(SpawnError::Os {
                        call: "receive the pseudo-terminal's master from the sandbox",
                        source,
                    }
                    .into());
                }
            }
        }
        let program = launch::ProgramProcess::find(
            pid,
            &handle,
            plan.layer == Layer::Passthrough,
            plan.steps.contains(&Step::NewSession),
        );
        // A session's own sandbox has no deadline: `wall_time` is each command's. Without
        // a deadline no ender is made (it holds a second pidfd of the init).
        let armed = if self.serve || !run.has_wall_time() {
            Ok(())
        } else {
            launch::ender(pid, &handle, Arc::clone(&run.reaped), &program)
                .and_then(|end| run.started(end))
        };
        if let Err(source) = armed {
            // A limit that cannot be armed is not silently dropped: end the sandbox.
            let _ = launch::kill(pid, &handle);
            run.kill_all();
            return Err(SpawnError::Os {
                call: "arm the wall-time limit",
                source,
            }
            .into());
        }
        git.started(&handle);
        #[cfg(target_os = "linux")]
        nested.started(&handle);
        Ok(Started {
            pid,
            handle,
            private_tmp,
            git,
            nested,
            run,
            program,
            master,
            egress,
            explain,
            snapshot,
        })
    }

    /// One start in the live sandbox of the session `link` ([`super::session`]).
    #[cfg(target_os = "linux")]
    fn start_in_session(
        &self,
        link: &super::session::Link,
        stdio: [RawFd; 3],
        controlling_terminal: Option<RawFd>,
        pty: Option<&PtyRequest>,
    ) -> Result<Started, StartError> {
        if pty.is_some() || controlling_terminal.is_some() || !self.pass.is_empty() || self.explain
        {
            return Err(Error::from(SpawnError::Os {
                call: "start a session's command with a pseudo-terminal, a controlling \
                       terminal, passed fds or explain (a session's commands have none)",
                source: io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            })
            .into());
        }
        let plan = self.inner.prepared.plan();
        let mut env = self.resolved_env()?;
        let cwd = self.resolved_cwd()?;
        link.set_env(&mut env);
        // As for a command of its own sandbox: layer 2's `.git` control files and those of
        // the host's nested repositories are put back, and the repositories the command
        // made are neutralized, once it has ended (its supervisor's exit: every process of
        // the command is gone). Review: they were the session's, checked at its close
        // only, and the host's git between two commands ran what an earlier one planted.
        // A command that keeps background processes is checked at the session's close.
        let mut git = launch::GitSession::default();
        let mut nested = host_checks(plan, &self.inner.policy, &mut git)?;
        let (pid, handle) = link.spawn(
            plan,
            (&self.program, &self.args, &env, &cwd),
            stdio,
            self.keep_background,
        )?;
        git.started(&handle);
        nested.started(&handle);
        if self.keep_background {
            link.check_at_close(git, nested);
            git = launch::GitSession::default();
            nested = super::nested::Watch::default();
        }
        let program = launch::ProgramProcess::unknown(plan.steps.contains(&Step::NewSession));
        // The wall-time limit, per command: the watchdog sends the supervisor its kill
        // request. The cgroup's limits are the session's.
        let mut run = super::limits::Run::new(&self.inner.policy.limits, None);
        // The watchdog's own pidfd only when there is a limit to watch (`started` arms
        // nothing without one).
        if self.inner.policy.limits.wall_time.is_some() {
            let ender = launch::ender(pid, &handle, Arc::clone(&run.reaped), &program);
            if let Err(source) = ender.and_then(|end| run.started(end)) {
                let _ = launch::kill(pid, &handle);
                return Err(Error::from(SpawnError::Os {
                    call: "arm the wall-time limit",
                    source,
                })
                .into());
            }
        }
        Ok(Started {
            pid,
            handle,
            private_tmp: None,
            git,
            nested,
            run,
            program,
            master: None,
            egress: None,
            explain: None,
            snapshot: None,
        })
    }

    /// A copy of this command that owns everything it needs, to be spawned on another
    /// thread (`Command::spawn_async`): the stdio fds given with [`Stdio::from`] are
    /// duplicated, the passed fds shared, the rest cloned (a few small allocations and
    /// `dup`s, no syscall of the spawn itself).
    ///
    /// Every field is listed, so that a new one cannot be forgotten here.
    #[cfg_attr(not(all(feature = "tokio", target_os = "linux")), allow(dead_code))]
    pub(super) fn try_clone(&self) -> io::Result<Command> {
        let stdio = |s: &Option<Stdio>| s.as_ref().map(Stdio::try_clone).transpose();
        Ok(Command {
            inner: Arc::clone(&self.inner),
            sandbox: self.sandbox.clone(),
            program: self.program.clone(),
            args: self.args.clone(),
            env: self.env.clone(),
            env_clear: self.env_clear,
            cwd: self.cwd.clone(),
            stdin: stdio(&self.stdin)?,
            stdout: stdio(&self.stdout)?,
            stderr: stdio(&self.stderr)?,
            pass: self.pass.clone(),
            controlling_terminal: self.controlling_terminal,
            kill_on_drop: self.kill_on_drop,
            keep_background: self.keep_background,
            explain: self.explain,
            pty: self.pty,
            pty_modes: self.pty_modes,
            secrets: self.secrets.clone(),
            redactor: self.redactor.clone(),
            #[cfg(target_os = "linux")]
            session: self.session.clone(),
            serve: self.serve,
        })
    }

    /// Prepares this command's policy again from what the process knows now, and makes
    /// the result the sandbox's state for later commands, unless the sandbox's policy was
    /// replaced in the meantime.
    fn replan(&mut self) -> Result<(), Error> {
        let next = Arc::new(Inner::new(self.inner.policy.clone())?);
        if let Some(shared) = &self.sandbox {
            shared.compare_and_swap(&self.inner, Arc::clone(&next));
        }
        self.inner = next;
        Ok(())
    }

    /// Spawns the program and waits for it, with stdio inherited.
    ///
    /// # Errors
    ///
    /// As [`Command::spawn`], plus I/O errors from waiting.
    pub fn status(&mut self) -> Result<ExitStatus, Error> {
        let mut child = self.spawn_with(Stdio::inherit, Stdio::inherit)?;
        child.wait().map_err(|source| {
            SpawnError::Os {
                call: "waitpid",
                source,
            }
            .into()
        })
    }

    /// Spawns the program with stdin null and stdout/stderr captured (unless set), and
    /// waits for it.
    ///
    /// # Errors
    ///
    /// As [`Command::spawn`], plus I/O errors from reading or waiting.
    pub fn output(&mut self) -> Result<Output, Error> {
        let child = self.spawn_with(Stdio::null, Stdio::piped)?;
        child.wait_with_output().map_err(|source| {
            SpawnError::Os {
                call: "wait_with_output",
                source,
            }
            .into()
        })
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&OsStr> = self.env.iter().map(|(k, _)| k.as_os_str()).collect();
        f.debug_struct("Command")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env_names", &names)
            .field("env_clear", &self.env_clear)
            .field("cwd", &self.cwd)
            .field("secrets", &self.secrets.len())
            .field("layer", &self.layer())
            .finish_non_exhaustive()
    }
}

/// Why one attempt to start a command failed.
#[derive(Debug)]
pub(crate) enum StartError {
    /// The host refused the layer (namespaces, a fresh `/proc`): the spawn falls back per
    /// the policy. Only the Linux launcher returns it.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Refused(Refusal),
    /// Any other error, returned to the caller as is.
    Failed(Error),
}

impl<E> From<E> for StartError
where
    Error: From<E>,
{
    fn from(e: E) -> Self {
        StartError::Failed(Error::from(e))
    }
}

/// One command, as the platform's launcher receives it: everything resolved and checked.
pub(super) struct Request<'a> {
    pub(super) program: &'a OsStr,
    /// argv, argv[0] first.
    pub(super) args: Vec<OsString>,
    /// The complete environment.
    pub(super) env: Vec<(OsString, OsString)>,
    /// The working directory (canonical, under the workspace).
    pub(super) cwd: &'a Path,
    /// Source fds (≥ 3) for 0, 1 and 2, or -1 to inherit the host's.
    pub(super) stdio: [RawFd; 3],
    /// The slots of `stdio` known to be no terminal ([`Stdio::makes_no_terminal`]): no
    /// call asks their fds again.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) not_terminals: [bool; 3],
    /// Fds passed on purpose.
    pub(super) pass: Vec<RawFd>,
    /// The stdio fd (0, 1 or 2) whose terminal becomes the program's controlling terminal.
    pub(super) controlling_terminal: Option<RawFd>,
    /// The first of the program's fds 0, 1 and 2 that is a terminal (the controlling
    /// terminal, when it has one), to be given a name inside where the layer hides the
    /// host's.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) terminal: Option<RawFd>,
    /// The per-command temporary directory, when the layer has one.
    pub(super) private_tmp: Option<&'a Path>,
    /// The sandbox's directory that holds it, when the plan needs one
    /// ([`crate::plan::Plan::private_tmp_root`]).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) private_tmp_parent: Option<&'a Path>,
    /// The command's `.git` layers, when the plan has any (only Linux plans do).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) git: &'a launch::GitSession,
    /// `cgroup.procs` of the command's cgroup, for the setup child to join (Linux).
    #[cfg(target_os = "linux")]
    pub(super) cgroup: Vec<RawFd>,
    /// A pseudo-terminal the setup child opens from the sandbox's devpts (full layer).
    #[cfg(target_os = "linux")]
    pub(super) pty: Option<crate::backend::linux::prepare::InsidePty>,
    /// With `network = "allow"` on the host's loopback (layer 2, macOS): the egress
    /// proxy's ports, the only TCP the walls let the program connect to.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(super) egress_ports: Vec<u16>,
    /// With `network = "allow"` on the full layer: the child's end of the socket the
    /// setup child sends the proxy's listeners through, or -1.
    #[cfg(target_os = "linux")]
    pub(super) egress_socket: RawFd,
    /// In overlay mode on the full layer: the child's end of the socket the setup child
    /// sends the overlay's mount fd through, or -1.
    #[cfg(target_os = "linux")]
    pub(super) overlay_socket: RawFd,
    /// With explain on: the explained filter and the child's end of the socket its
    /// listener goes back through.
    #[cfg(target_os = "linux")]
    /// And the flags of `landlock_restrict_self` (Landlock's audit records, when read).
    pub(super) explain: Option<(crate::backend::linux::seccomp::Filter, RawFd, u32)>,
    /// The program is the session server ([`super::session`]).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) serve: bool,
}

/// What [`Command::pty`] asks for at one spawn.
pub(super) struct PtyRequest {
    /// Which of the program's fds 0, 1 and 2 are the slave.
    pub(super) slots: [bool; 3],
    /// The window size.
    pub(super) size: libc::winsize,
    /// The modes, when given.
    pub(super) modes: Option<super::pty::Modes>,
}

impl PtyRequest {
    /// The first stream that is the slave: the one the program takes as its controlling
    /// terminal.
    fn first(&self) -> Option<RawFd> {
        (0..).zip(self.slots).find(|(_, on)| *on).map(|(i, _)| i)
    }
}

/// The first of the program's fds 0, 1 and 2 that will be a terminal (its source fd, or
/// the host's own where it inherits that). The `not_terminals` slots are known to be
/// none and are not asked.
fn terminal_among(
    sources: [Option<std::os::fd::BorrowedFd<'_>>; 3],
    not_terminals: [bool; 3],
) -> Option<RawFd> {
    use std::os::fd::AsFd;
    let (stdin, stdout, stderr) = (io::stdin(), io::stdout(), io::stderr());
    let host = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()];
    let fds = [0, 1, 2].map(|i| sources[i].unwrap_or(host[i]));
    first_terminal(fds, not_terminals, |fd| {
        nix::unistd::isatty(fd).unwrap_or(false)
    })
}

/// The index of the first of `fds` that `isatty` calls a terminal, not asking the
/// `not_terminals` slots.
fn first_terminal<F: Copy>(
    fds: [F; 3],
    not_terminals: [bool; 3],
    mut isatty: impl FnMut(F) -> bool,
) -> Option<RawFd> {
    (0..3)
        .zip(fds.into_iter().zip(not_terminals))
        .find(|(_, (fd, known))| !known && isatty(*fd))
        .map(|(target, _)| target)
}

/// Says when a guarded name or a directory above it is a symlink: the child does not
/// follow it, so that run goes on without the guard on what it names. (A `.git` symlink
/// is followed into its root, or reported, by the `.git` layer: [`Child::git_unguarded`].)
fn warn_unguarded(plan: &Plan) {
    for step in &plan.steps {
        if let Step::GuardName { path } | Step::GuardPin { path } = step {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                tracing::warn!(
                    path = %path.display(),
                    "stockade: a guarded path is a symlink; it is not followed and not guarded in this run"
                );
            }
        }
    }
}

/// Refuses a `secret_env` value too short to redact, and warns about one that is redacted
/// although it is shorter than a host secret may be: every occurrence of its bytes in the
/// output is replaced, which may hit unrelated text, and that shows where they were.
fn check_secret_lengths(secrets: &[(OsString, Vec<u8>)]) -> Result<(), PlanError> {
    use crate::guard::redact::{MIN_SECRET_ENV_LEN, MIN_SECRET_LEN};
    for (name, value) in secrets {
        if value.len() < MIN_SECRET_ENV_LEN {
            return Err(PlanError::SecretTooShort {
                name: name.to_string_lossy().into_owned(),
                len: value.len(),
                min: MIN_SECRET_ENV_LEN,
            });
        }
        if value.len() < MIN_SECRET_LEN {
            tracing::warn!(
                variable = %name.to_string_lossy(),
                len = value.len(),
                "stockade: a short secret_env value is redacted wherever its bytes appear in the output"
            );
        }
    }
    Ok(())
}

/// What one run's end checks on the host, taken before it starts: layer 2's snapshot of
/// each writable root's `.git` control files (put back after), and the repositories in
/// the writable roots now, which are the host's (theirs are put back after the run, on
/// every layer; any other found then is the program's, and neutralized).
fn host_checks(
    plan: &Plan,
    policy: &crate::policy::Policy,
    git: &mut launch::GitSession,
) -> Result<super::nested::Watch, Error> {
    git.snapshot(plan, &plan.git_snapshots(policy))?;
    let nested = super::nested::Watch::start(plan, policy.check_nested_repositories);
    git.snapshot_nested(nested.host_repositories())?;
    Ok(nested)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streams_known_to_be_no_terminal_are_not_asked() {
        let mut asked = Vec::new();
        let first = first_terminal([0, 1, 2], [true, false, true], |fd| {
            asked.push(fd);
            fd == 1
        });
        assert_eq!((first, asked), (Some(1), vec![1]));
        let never = |_| -> bool { panic!("asked a stream known to be no terminal") };
        assert_eq!(first_terminal([0, 1, 2], [true; 3], never), None);
        // The first terminal wins; the ones after it are not asked.
        let mut asked = Vec::new();
        let first = first_terminal([0, 1, 2], [false; 3], |fd| {
            asked.push(fd);
            true
        });
        assert_eq!((first, asked), (Some(0), vec![0]));
    }
}
