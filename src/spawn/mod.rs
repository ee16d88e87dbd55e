//! The host-facing API: [`Sandbox`], [`Command`], [`Child`], mirroring `std::process`.
//!
//! A host ports its code by creating the command from a sandbox instead of with
//! `std::process::Command::new`, and by taking [`Stdio`] from this crate: everything else
//! (args, env, current_dir, spawn / output / status, wait, kill, piped handles) reads the
//! same. Exit statuses and outputs are std's own types.

// The launcher is the one part that differs between systems; both modules offer the
// same items (see `launch_linux`). Linux clones and replays its plan; macOS and the other
// Unix systems fork, and on macOS the child enters the Seatbelt sandbox before `execve`.
// The fork launcher also builds on Linux for unit tests, which run it there without
// `sandbox_init`.
#[cfg(target_os = "linux")]
pub(crate) mod clone;
mod env;
#[cfg(any(test, not(target_os = "linux")))]
mod launch_fork;
#[cfg(target_os = "linux")]
mod launch_linux;
mod stdio;

#[cfg(not(target_os = "linux"))]
use launch_fork as launch;
#[cfg(target_os = "linux")]
use launch_linux as launch;

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output};
use std::sync::Arc;

use arc_swap::ArcSwap;

pub use stdio::{ChildStderr, ChildStdin, ChildStdout, Stdio};

use crate::error::{Error, PlanError, PolicyError, SpawnError};
use crate::plan::{Plan, Step};
use crate::policy::{Fallback, Layer, Mode, Policy};
use crate::probe::Capabilities;

/// A configured sandbox: the policy, the probed kernel, and the prepared layout. Cheap to
/// clone; clones share the same state, so [`Sandbox::set_policy`] on one is seen by all.
/// Each [`Sandbox::command`] takes the state current at that moment (a lock-free read);
/// a policy change never alters a command already built or running.
#[derive(Clone, Debug)]
pub struct Sandbox {
    shared: Arc<ArcSwap<Inner>>,
    /// The host's known secret values, redacted from output by every child's redactor.
    secrets: Arc<ArcSwap<Vec<Vec<u8>>>>,
}

#[derive(Debug)]
struct Inner {
    policy: Policy,
    /// The plan and what the platform's launcher prepared from it.
    prepared: launch::Prepared,
    /// The data dir and the `(st_dev, st_ino)` pinned at creation.
    data_dir: Option<(PathBuf, (u64, u64))>,
    /// Set when the policy degraded: the layer it wanted and why that one is missing.
    degraded: Option<Degradation>,
}

/// Why a sandbox runs on a weaker layer than its policy wants (`fallback = "degrade"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Degradation {
    /// The layer the policy wanted.
    pub wanted: Layer,
    /// The layer commands run on instead.
    pub running: Layer,
    /// Why the wanted layer is not available here.
    pub reason: String,
}

impl Sandbox {
    /// Probes the kernel (once per process), checks the policy and prepares the layout.
    ///
    /// The data dir, when set, is created if missing (mode 0700) so that no sandboxed run
    /// can plant something at its path first, and its identity is pinned: a spawn refuses
    /// to run if the directory was replaced.
    ///
    /// # Errors
    ///
    /// [`Error::Policy`] for an invalid policy, [`Error::Plan`] when a path is unusable or
    /// the wanted layer is not available and the policy refuses to degrade.
    ///
    /// # Platform
    ///
    /// Linux: the full layer (namespaces, mounts, Landlock, seccomp), the landlock layer
    /// or passthrough. macOS: the full layer is a Seatbelt profile (`sandbox_init`), or
    /// passthrough. Other Unix systems: passthrough only; a policy that refuses to degrade
    /// gets [`PlanError::LayerUnavailable`] naming the system, and the default policy
    /// degrades with a `tracing` warning.
    pub fn new(policy: Policy) -> Result<Sandbox, Error> {
        Ok(Sandbox {
            shared: Arc::new(ArcSwap::from_pointee(Inner::new(policy)?)),
            secrets: Arc::new(ArcSwap::from_pointee(Vec::new())),
        })
    }

    /// Replaces the host's known secret values (its secret store). Every command spawned
    /// from now on gets a [`Child::redactor`] that redacts them, and the values of its own
    /// [`Command::secret_env`] variables.
    pub fn set_secrets<I, S>(&self, secrets: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let v: Vec<Vec<u8>> = secrets.into_iter().map(|s| s.as_ref().to_vec()).collect();
        self.secrets.store(Arc::new(v));
    }

    /// Replaces the policy for every command created from now on, without a restart.
    /// The new policy is checked and prepared completely before it takes effect; on error
    /// the old one stays.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::new`].
    pub fn set_policy(&self, policy: Policy) -> Result<(), Error> {
        let inner = Inner::new(policy)?;
        self.shared.store(Arc::new(inner));
        Ok(())
    }

    /// Switches between `enabled` and `disabled` (passthrough with a clean environment)
    /// for commands created from now on.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::new`].
    pub fn set_mode(&self, mode: Mode) -> Result<(), Error> {
        let mut policy = self.policy();
        policy.mode = mode;
        self.set_policy(policy)
    }

    fn current(&self) -> Arc<Inner> {
        self.shared.load_full()
    }

    /// What the kernel allows, as probed.
    pub fn capabilities(&self) -> &'static Capabilities {
        Capabilities::probe()
    }

    /// The current policy.
    pub fn policy(&self) -> Policy {
        self.current().policy.clone()
    }

    /// The current plan every command replays (mounts and process steps, in order).
    pub fn plan(&self) -> Plan {
        self.current().prepared.plan().clone()
    }

    /// Set when the sandbox runs on a weaker layer than its policy wants, and why.
    pub fn degradation(&self) -> Option<Degradation> {
        self.current().degraded.clone()
    }

    /// The layer commands currently run on.
    pub fn layer(&self) -> Layer {
        self.current().prepared.plan().layer
    }

    /// A command that runs `program` in this sandbox, with the policy current now;
    /// `program` is looked up on the sandbox's `PATH` unless it contains a slash.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(self.current(), program.as_ref());
        cmd.secrets = self.secrets.load_full().as_ref().clone();
        cmd
    }
}

impl Inner {
    fn new(policy: Policy) -> Result<Inner, Error> {
        policy.validate()?;
        if policy.workspace.is_none() {
            return Err(PolicyError::NoWorkspace.into());
        }
        launch::check(&policy)?;
        let caps = Capabilities::probe();
        let (layer, degraded) = choose_layer(&policy, caps)?;
        let data_dir = match &policy.data_dir {
            Some(d) if layer != Layer::Passthrough => {
                Some(pin_data_dir(d, &writable_roots(&policy))?)
            }
            _ => None,
        };
        let mut plan = launch::plan(&policy, layer)?;
        if let Some((path, id)) = &data_dir {
            for step in &mut plan.steps {
                if let Step::Mask {
                    path: p,
                    dir: true,
                    identity,
                    ..
                } = step
                {
                    if p == path {
                        *identity = Some(*id);
                    }
                }
            }
        }
        let prepared = launch::Prepared::new(&policy, plan)?;
        Ok(Inner {
            policy,
            prepared,
            data_dir,
            degraded,
        })
    }
}

/// Whether `layer` can run for `policy` here, and why not.
fn layer_status(policy: &Policy, caps: &Capabilities, layer: Layer) -> Result<(), String> {
    let avail = caps.layer(layer);
    if !avail.available {
        return Err(avail.reason.unwrap_or_default());
    }
    if layer == Layer::Full
        && caps.full_mounts_proc()
        && !caps.fresh_proc.available
        && !policy.proc_fallback
    {
        return Err(format!(
            "a fresh /proc cannot be mounted ({}); set proc_fallback = true to bind the host's /proc read-only",
            caps.fresh_proc.reason.as_deref().unwrap_or("unknown")
        ));
    }
    if layer == Layer::Full && caps.full_mounts_proc() && !caps.fresh_proc.available {
        // Allowed by the policy, and said: the host's /proc shows the host's processes.
        tracing::warn!(
            reason = caps.fresh_proc.reason.as_deref().unwrap_or("unknown"),
            "stockade: a fresh /proc cannot be mounted; binding the host's /proc read-only (proc_fallback)"
        );
    }
    Ok(())
}

/// The layer to run on: the one the policy wants (default: full), or, when it is missing
/// and the policy degrades, the strongest weaker one that is available and not below
/// `min_layer`. Degrading is logged as a warning; it is never silent.
fn choose_layer(
    policy: &Policy,
    caps: &Capabilities,
) -> Result<(Layer, Option<Degradation>), PlanError> {
    if policy.mode == Mode::Disabled {
        return Ok((Layer::Passthrough, None));
    }
    let wanted = policy.layer.unwrap_or(Layer::Full);
    let reason = match layer_status(policy, caps, wanted) {
        Ok(()) => return Ok((wanted, None)),
        Err(r) => r,
    };
    let unavailable = |reason: String| PlanError::LayerUnavailable { wanted, reason };
    if policy.fallback == Fallback::Refuse {
        return Err(unavailable(reason));
    }
    let floor = policy.min_layer.unwrap_or(Layer::Passthrough);
    for layer in [Layer::Landlock, Layer::Passthrough] {
        if layer <= wanted || layer > floor {
            continue;
        }
        if layer_status(policy, caps, layer).is_ok() {
            tracing::warn!(%wanted, chosen = %layer, %reason, "stockade: degrading to a weaker containment layer");
            let d = Degradation {
                wanted,
                running: layer,
                reason,
            };
            return Ok((layer, Some(d)));
        }
    }
    Err(unavailable(format!(
        "{reason}; no layer down to `{floor}` is available"
    )))
}

/// The canonical workspace and writable paths: roots the sandboxed program can plant
/// symlinks in.
fn writable_roots(policy: &Policy) -> Vec<PathBuf> {
    policy
        .workspace
        .iter()
        .chain(&policy.writable_paths)
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

/// Creates the missing directories of `rel` below `root` (mode 0700), opening each one
/// with `O_NOFOLLOW`: a symlink planted on the way fails with ELOOP instead of being
/// followed out of the root.
fn create_beneath(root: &Path, rel: &Path) -> io::Result<()> {
    use nix::fcntl::{OFlag, open, openat};
    use nix::sys::stat::{Mode, mkdirat};
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir = open(root, flags, Mode::empty())?;
    for c in rel.components() {
        let std::path::Component::Normal(name) = c else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        match mkdirat(&dir, name, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        dir = openat(&dir, name, flags, Mode::empty())?;
    }
    Ok(())
}

fn pin_data_dir(d: &Path, roots: &[PathBuf]) -> Result<(PathBuf, (u64, u64)), PlanError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let err = |source| PlanError::Path {
        key: "data_dir",
        path: d.to_path_buf(),
        source,
    };
    let beneath = roots
        .iter()
        .filter_map(|r| Some((r, d.strip_prefix(r).ok()?)))
        .max_by_key(|(r, _)| r.as_os_str().len());
    if std::fs::symlink_metadata(d).is_err() {
        // Inside a writable root the program may have planted symlinks: never create
        // through them (a host running as root would create the directory anywhere).
        if let Some((root, rel)) = beneath {
            create_beneath(root, rel).map_err(err)?;
        }
    }
    if std::fs::symlink_metadata(d).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .map_err(err)?;
    }
    let md = std::fs::symlink_metadata(d).map_err(err)?;
    if !md.is_dir() {
        return Err(err(io::Error::from_raw_os_error(libc::ENOTDIR)));
    }
    Ok((d.to_path_buf(), (md.dev(), md.ino())))
}

/// A sandboxed process builder, with `std::process::Command`'s API.
///
/// Its `Debug` output shows the program, the arguments and the names of the variables
/// set, never their values (some are secrets).
pub struct Command {
    inner: Arc<Inner>,
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    env_clear: bool,
    cwd: Option<PathBuf>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
    pass: Vec<OwnedFd>,
    /// Secret values this command's output must not show (the host's and `secret_env`'s).
    secrets: Vec<Vec<u8>>,
}

impl Command {
    fn new(inner: Arc<Inner>, program: &OsStr) -> Command {
        Command {
            inner,
            program: program.to_owned(),
            args: vec![program.to_owned()],
            env: Vec::new(),
            env_clear: false,
            cwd: None,
            stdin: None,
            stdout: None,
            stderr: None,
            pass: Vec::new(),
            secrets: Vec::new(),
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
    pub fn secret_env(&mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> &mut Command {
        self.secrets.push(val.as_ref().as_encoded_bytes().to_vec());
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
        self.pass.push(fd.into());
        self
    }

    /// The program, as given.
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments after the program.
    pub fn get_args(&self) -> impl Iterator<Item = &OsStr> {
        self.args.iter().skip(1).map(OsString::as_os_str)
    }

    /// The layer this command runs on.
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
        let canon = std::fs::canonicalize(&joined).map_err(|source| PlanError::Path {
            key: "current_dir",
            path: joined.clone(),
            source,
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
    /// [`Error::Plan`] for a bad working directory, a refused variable or a replaced data
    /// dir; [`Error::Spawn`] when a setup step fails in the child (the error names the
    /// step, the path and the errno) or the program is not found.
    pub fn spawn(&mut self) -> Result<Child, Error> {
        self.spawn_with(Stdio::inherit, Stdio::inherit)
    }

    fn spawn_with(
        &mut self,
        def_in: fn() -> Stdio,
        def_out: fn() -> Stdio,
    ) -> Result<Child, Error> {
        let inner = Arc::clone(&self.inner);
        if let Some((path, id)) = &inner.data_dir {
            check_data_dir(path, *id)?;
        }
        let mut env = self.resolved_env()?;
        let cwd = self.resolved_cwd()?;
        let plan = inner.prepared.plan();

        let (stdin_child, stdin_parent) = self
            .stdin
            .take()
            .unwrap_or_else(def_in)
            .setup(true)
            .map_err(stdio_err)?;
        let (stdout_child, stdout_parent) = self
            .stdout
            .take()
            .unwrap_or_else(def_out)
            .setup(false)
            .map_err(stdio_err)?;
        let (stderr_child, stderr_parent) = self
            .stderr
            .take()
            .unwrap_or_else(def_out)
            .setup(false)
            .map_err(stdio_err)?;
        let stdio_fds = [
            stdio::raw(&stdin_child),
            stdio::raw(&stdout_child),
            stdio::raw(&stderr_child),
        ];
        // Layer 2: a private temporary directory per command stands in for /tmp.
        let private_tmp = if plan.private_tmp {
            let dir = tempfile::Builder::new()
                .prefix("stockade-tmp-")
                .tempdir()
                .map_err(|source| SpawnError::Os {
                    call: "create the private tmp dir",
                    source,
                })?;
            env.retain(|(k, _)| k != "TMPDIR");
            env.push(("TMPDIR".into(), dir.path().as_os_str().to_owned()));
            Some(dir)
        } else {
            None
        };
        let pass: Vec<RawFd> = self.pass.iter().map(AsRawFd::as_raw_fd).collect();
        let req = Request {
            program: &self.program,
            args: self.args.clone(),
            env,
            cwd: &cwd,
            stdio: stdio_fds,
            pass,
            private_tmp: private_tmp.as_ref().map(tempfile::TempDir::path),
        };
        let started = launch::start(&inner.prepared, req);
        // The child's ends of the pipes close here, in the parent.
        drop((stdin_child, stdout_child, stderr_child));
        let (pid, handle) = started?;
        Ok(Child {
            pid,
            handle,
            status: None,
            redactor: crate::Redactor::new(&self.secrets),
            private_tmp,
            stdin: stdin_parent.map(ChildStdin::from),
            stdout: stdout_parent.map(ChildStdout::from),
            stderr: stderr_parent.map(ChildStderr::from),
        })
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

/// One command, as the platform's launcher receives it: everything resolved and checked.
struct Request<'a> {
    program: &'a OsStr,
    /// argv, argv[0] first.
    args: Vec<OsString>,
    /// The complete environment.
    env: Vec<(OsString, OsString)>,
    /// The working directory (canonical, under the workspace).
    cwd: &'a Path,
    /// Source fds (≥ 3) for 0, 1 and 2, or -1 to inherit the host's.
    stdio: [RawFd; 3],
    /// Fds passed on purpose.
    pass: Vec<RawFd>,
    /// The per-command temporary directory, when the layer has one.
    private_tmp: Option<&'a Path>,
}

fn stdio_err(source: io::Error) -> SpawnError {
    SpawnError::Os {
        call: "set up stdio",
        source,
    }
}

fn check_data_dir(path: &Path, id: (u64, u64)) -> Result<(), PlanError> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.is_dir() && (md.dev(), md.ino()) == id => Ok(()),
        _ => Err(PlanError::DataDirChanged(path.to_path_buf())),
    }
}

/// A running (or finished) sandboxed program, with `std::process::Child`'s API.
///
/// Like std's, dropping a `Child` neither kills nor reaps it.
///
/// # Platform
///
/// Linux: the program dies with the host process (`PR_SET_PDEATHSIG`). macOS and other
/// Unix systems have no such signal: the program outlives a host that exits without
/// killing it.
#[derive(Debug)]
pub struct Child {
    pid: libc::pid_t,
    /// The launcher's handle (a pidfd on Linux).
    handle: launch::Handle,
    status: Option<ExitStatus>,
    /// Layer 2's private temporary directory, removed once the program has been reaped.
    private_tmp: Option<tempfile::TempDir>,
    redactor: crate::Redactor,
    /// The program's stdin, when piped.
    pub stdin: Option<ChildStdin>,
    /// The program's stdout, when piped.
    pub stdout: Option<ChildStdout>,
    /// The program's stderr, when piped.
    pub stderr: Option<ChildStderr>,
}

impl Child {
    /// The program's pid in the host's PID namespace. (Inside, it is 1 on the full layer.)
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// A redactor for this program's output: the host's secrets ([`Sandbox::set_secrets`])
    /// and the values of the command's [`Command::secret_env`] variables. Wrap an output
    /// pipe in a [`crate::RedactingWriter`] with it, or call
    /// [`Redactor::redact`](crate::Redactor::redact) on captured output.
    pub fn redactor(&self) -> &crate::Redactor {
        &self.redactor
    }

    /// Sends `SIGKILL`. On the full layer the program is PID 1 of its namespace, so every
    /// process inside dies with it.
    ///
    /// # Errors
    ///
    /// The error of `pidfd_send_signal` (Linux) or `kill` (elsewhere); none when the
    /// program has already been reaped. Until it is reaped its pid cannot be reused, so
    /// the signal cannot reach another process.
    pub fn kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        launch::kill(self.pid, &self.handle)
    }

    /// Waits for the program to exit. Closes stdin first, as std does.
    ///
    /// # Errors
    ///
    /// The error of `waitpid`.
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
        let mut status: libc::c_int = 0;
        loop {
            // SAFETY: `status` is a valid out-pointer; `self.pid` is our unreaped child.
            let r = unsafe { libc::waitpid(self.pid, &mut status, flags) };
            if r == 0 {
                return Ok(None);
            }
            if r > 0 {
                let s = ExitStatus::from_raw(status);
                self.status = Some(s);
                drop(self.private_tmp.take());
                return Ok(Some(s));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_mode_is_passthrough() {
        let mut p = Policy::with_workspace("/tmp");
        p.mode = Mode::Disabled;
        assert_eq!(
            choose_layer(&p, Capabilities::probe()).unwrap().0,
            Layer::Passthrough
        );
    }
}

/// Async waiting and pipes, with the `tokio` feature: the pidfd and the pipes are
/// registered with tokio's reactor, so no thread blocks.
///
/// Linux only: the wait is driven by the pidfd.
#[cfg(all(feature = "tokio", target_os = "linux"))]
mod asynchronous {
    use std::io;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::process::ExitStatus;

    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;
    use tokio::net::unix::pipe;

    use super::{Child, ChildStderr, ChildStdin, ChildStdout};

    impl Child {
        /// Waits for the program without blocking a thread: the pidfd becomes readable
        /// when the program exits.
        ///
        /// # Errors
        ///
        /// Registration with tokio or `waitpid` failed.
        pub async fn wait_async(&mut self) -> io::Result<ExitStatus> {
            drop(self.stdin.take());
            if let Some(s) = self.status {
                return Ok(s);
            }
            // SAFETY: the registered fd is the pidfd `self.handle`, which stays open for as long as
            // `fd` lives (until this function returns): nothing here closes or replaces it.
            let fd = unsafe {
                AsyncFd::register_with_interest(self.handle.as_raw_fd(), Interest::READABLE)?
            };
            loop {
                let mut guard = fd.readable().await?;
                if let Some(s) = self.try_wait()? {
                    return Ok(s);
                }
                guard.clear_ready();
            }
        }
    }

    fn nonblocking(fd: &OwnedFd) -> io::Result<()> {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
        fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        Ok(())
    }

    impl ChildStdin {
        /// This pipe as a tokio writer.
        ///
        /// # Errors
        ///
        /// Registration with tokio failed.
        pub fn into_async(self) -> io::Result<pipe::Sender> {
            let fd: OwnedFd = self.into();
            nonblocking(&fd)?;
            pipe::Sender::from_owned_fd(fd)
        }
    }

    impl ChildStdout {
        /// This pipe as a tokio reader.
        ///
        /// # Errors
        ///
        /// Registration with tokio failed.
        pub fn into_async(self) -> io::Result<pipe::Receiver> {
            let fd: OwnedFd = self.into();
            nonblocking(&fd)?;
            pipe::Receiver::from_owned_fd(fd)
        }
    }

    impl ChildStderr {
        /// This pipe as a tokio reader.
        ///
        /// # Errors
        ///
        /// Registration with tokio failed.
        pub fn into_async(self) -> io::Result<pipe::Receiver> {
            let fd: OwnedFd = self.into();
            nonblocking(&fd)?;
            pipe::Receiver::from_owned_fd(fd)
        }
    }
}
