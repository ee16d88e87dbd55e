//! macOS and the other Unix systems: a child of `fork()` that replays the plan
//! ([`crate::backend::fork`]) and, on macOS, enters the Seatbelt sandbox before `execve`.
//!
//! Same items as `launch_linux`. Builds on Linux for unit tests (unconfined).
//!
//! # Why `fork`
//!
//! `posix_spawn` runs no code of ours in the child, and `sandbox_init` confines the
//! process that calls it, so it has to run in the child: the host is never sandboxed.
//! `fork` copies the host's page tables (slower than Linux's `CLONE_VM` clone for a large
//! host) but gives the child its own memory, `errno` included.
//!
//! # Signals
//!
//! All signals are blocked around `fork`, so no host handler runs in the child before it
//! has reset every disposition; the child unblocks them just before `execve`.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};

use super::{Request, StartError};
use crate::backend::fork::{self, Confine, child, prepare};
use crate::backend::report::{self, Ending};
use crate::error::{Error, SpawnError};
use crate::plan::{Plan, Step};

/// A running program's handle besides its pid: nothing (no pidfds here).
pub(super) type Handle = ();

/// No `.git` layer here: the plans of this launcher have no such step (see
/// [`crate::plan::Step::GitLayer`]).
// On Linux this module is built for its unit tests only, and `Request` there carries the
// Linux session.
#[cfg_attr(target_os = "linux", allow(dead_code))]
#[derive(Debug, Default)]
pub(super) struct GitSession;

#[cfg_attr(target_os = "linux", allow(dead_code))]
impl GitSession {
    pub(super) fn prepare(_plan: &Plan) -> Result<GitSession, Error> {
        Ok(GitSession)
    }

    pub(super) fn snapshot(
        &mut self,
        _plan: &Plan,
        _gits: &[std::path::PathBuf],
    ) -> Result<(), Error> {
        Ok(())
    }

    pub(super) fn snapshot_nested(&mut self, _repos: &[std::path::PathBuf]) -> Result<(), Error> {
        Ok(())
    }

    pub(super) fn started(&mut self, _handle: &Handle) {}

    pub(super) fn finish(&mut self) {}

    pub(super) fn dropped(&self) -> &[super::GitDrop] {
        &[]
    }

    pub(super) fn unguarded(&self) -> &[super::GitUnguarded] {
        &[]
    }

    pub(super) fn config(&self) -> &[super::GitConfigChange] {
        &[]
    }
}

/// What every command of one sandbox shares: the plan (with the Seatbelt profile's input,
/// when it has one).
#[derive(Debug)]
pub(super) struct Prepared {
    plan: Plan,
}

impl Prepared {
    /// Nothing is compiled per sandbox: the profile depends on each command's `TMPDIR`.
    pub(super) fn new(plan: Plan) -> Result<Prepared, Error> {
        Ok(Prepared { plan })
    }

    pub(super) fn plan(&self) -> &Plan {
        &self.plan
    }
}

/// `/dev/null` for the program's stdio ([`super::Stdio::null`]), close-on-exec. (A root
/// host's program could change the node through it: see `SECURITY.md`.)
///
/// # Errors
///
/// [`SpawnError::Path`] naming `/dev/null`.
pub(super) fn open_null(write: bool) -> Result<OwnedFd, SpawnError> {
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|e| SpawnError::Path {
            what: "set up stdio: open",
            path: "/dev/null".into(),
            errno: crate::error::errno_of(&e),
            note: None,
        })
}

/// A close-on-exec pipe. macOS has no `pipe2`: the flag is set right after `pipe`, as std
/// does there; a concurrent `fork` + `exec` in another thread of the host could inherit
/// the pipe in between (it would then only delay EOF until that program exits).
pub(super) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let (r, w) = nix::unistd::pipe()?;
    fcntl(&r, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    fcntl(&w, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok((r, w))
}

/// A close-on-exec duplicate of `fd` numbered 3 or above (std's `try_clone_to_owned`).
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(in crate::process) fn dup_cloexec(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<OwnedFd> {
    fd.try_clone_to_owned()
}

/// Forks the child for `req` and waits until it has exec'd or failed.
pub(super) fn start(
    prepared: &Prepared,
    req: Request<'_>,
) -> Result<(libc::pid_t, Handle), StartError> {
    let plan = &prepared.plan;
    let confine = if plan.steps.contains(&Step::SandboxInit) {
        Some(fork::os::confine(plan, req.private_tmp, &req.egress_ports)?)
    } else {
        None
    };
    let (report_r, report_w) = pipe_cloexec().map_err(|source| SpawnError::Os {
        call: "pipe",
        source,
    })?;
    let program = req.program.to_string_lossy().into_owned();
    let exec = prepare::Exec::new(
        plan,
        prepare::ExecSpec {
            program: req.program,
            args: req.args,
            env: req.env,
            cwd: req.cwd,
            controlling_terminal: req.controlling_terminal,
        },
        req.stdio,
        report_w.as_raw_fd(),
        req.pass,
        prepare::fd_limit(),
    )?;
    match fork_and_await(&exec, confine.as_ref(), (report_r, report_w))? {
        (pid, Ending::Exec) => Ok((pid, ())),
        (_, Ending::Failed(record)) => {
            let ctty = req.controlling_terminal.unwrap_or(-1);
            Err(Error::from(failure(plan, &record, req.cwd, program, ctty)).into())
        }
        (_, Ending::Died(status)) => Err(Error::from(SpawnError::DiedBeforeExec { status }).into()),
    }
}

/// Forks the child for `exec` and reads its report ([`report::await_exec`]).
fn fork_and_await(
    exec: &prepare::Exec,
    confine: Option<&Confine>,
    (report_r, report_w): (OwnedFd, OwnedFd),
) -> Result<(libc::pid_t, Ending), SpawnError> {
    let forked = fork_child(exec, confine);
    // The parent's write end must go before reading, or EOF never comes.
    drop(report_w);
    let pid = forked.map_err(|source| SpawnError::Os {
        call: "fork",
        source,
    })?;
    Ok((pid, report::await_exec(report_r, pid)?))
}

/// The typed error for a child's record.
fn failure(
    plan: &Plan,
    r: &report::Record,
    cwd: &std::path::Path,
    program: String,
    controlling_terminal: i32,
) -> SpawnError {
    if plan.steps.get(r.step as usize) == Some(&Step::SandboxInit) {
        return crate::error::InitError::from_report(r.message()).into();
    }
    let exec_step = plan.steps.len() as u32 + fork::extra::EXEC;
    if r.step == exec_step && r.errno == libc::ENOENT {
        return SpawnError::NotFound { program };
    }
    SpawnError::Setup {
        step: report::describe_step(plan, r.step, Some(cwd), &program, controlling_terminal),
        errno: crate::error::Errno::from_raw(r.errno),
    }
}

/// The one `fork` call: with every signal blocked, so that the child runs no host handler
/// before it has reset them.
fn fork_child(exec: &prepare::Exec, confine: Option<&Confine>) -> io::Result<libc::pid_t> {
    let mut all = MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `all` is a valid place for a sigset_t; sigfillset initializes it.
    unsafe { libc::sigfillset(all.as_mut_ptr()) };
    // SAFETY: `all` was initialized above; `old` receives the current mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old.as_mut_ptr()) };
    // SAFETY: the child runs only `child::run`, which replays `exec` (its own copy of the
    // parent's memory) with async-signal-safe calls and ends in execve or _exit; it never
    // returns here. The parent continues normally.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        child::run(exec, confine);
    }
    let err = io::Error::last_os_error();
    // SAFETY: `old` was initialized by the pthread_sigmask call above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    if pid < 0 {
        return Err(err);
    }
    Ok(pid)
}

/// The program has been reaped when its status is known: nothing is left to wait for.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(super) fn wait_gone(_handle: &Handle) -> bool {
    true
}

/// No init here: the program's own wait status is its status.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(super) fn early_status(
    _handle: &mut Handle,
    _block: bool,
    _rusage: &super::limits::RusageSlot,
) -> Option<std::process::ExitStatus> {
    None
}

/// No init here: the program was reaped with its `rusage` by the wait.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(super) fn reap_now(_handle: &Handle, _slot: &super::limits::RusageSlot) {}

/// How the watchdog ends this program when its wall time is up: `SIGKILL` to its process
/// group (it leads one, after its `setsid`) and to itself, under the lock that the wait
/// takes to reap it, so that the pid still names it.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(super) fn ender(
    pid: libc::pid_t,
    _handle: &Handle,
    reaped: std::sync::Arc<std::sync::Mutex<bool>>,
    _program: &ProgramProcess,
) -> io::Result<impl FnOnce() + Send + 'static> {
    Ok(move || {
        let reaped = reaped.lock().unwrap_or_else(|e| e.into_inner());
        if !*reaped {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(-pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    })
}

/// No init here, so none to reap later.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(super) fn reap_earlier(_block: bool) {}

#[cfg_attr(target_os = "linux", allow(dead_code))]
/// No pidfd here: the egress proxy's run ends when the program is reaped
/// ([`crate::Child::wait`]) or when the sandbox's proxy is dropped.
pub(super) fn until_fd(_handle: &Handle) -> Option<std::os::fd::OwnedFd> {
    None
}

/// `SIGKILL` by pid. The caller only calls this before the program is reaped, so the pid
/// still names it.
pub(super) fn kill(pid: libc::pid_t, _handle: &Handle) -> io::Result<()> {
    Ok(nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )?)
}

/// Delivers `sig` to the program, which is the direct child here (no init).
pub(super) fn signal(pid: libc::pid_t, _handle: &Handle, sig: libc::c_int) -> io::Result<()> {
    let sig = nix::sys::signal::Signal::try_from(sig)?;
    Ok(nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        sig,
    )?)
}

/// The program's own process: the host's direct child here (no init).
#[cfg_attr(target_os = "linux", allow(dead_code))]
#[derive(Debug)]
pub(super) struct ProgramProcess {
    pid: libc::pid_t,
    /// It leads its own process group (the plan's `NewSession` step).
    leads_group: bool,
}

#[cfg_attr(target_os = "linux", allow(dead_code))]
impl ProgramProcess {
    /// The program started as `pid`: that process itself.
    pub(super) fn find(
        pid: libc::pid_t,
        _handle: &Handle,
        _passthrough: bool,
        leads_group: bool,
    ) -> ProgramProcess {
        ProgramProcess { pid, leads_group }
    }

    /// Its pid.
    pub(super) fn id(&self) -> Option<u32> {
        Some(self.pid as u32)
    }

    /// `sig` to the program's process group (to the program alone when it leads none).
    /// The caller has not reaped the program, so its pid still names its group (see
    /// [`ProgramProcess::kill_group`]).
    pub(super) fn signal_group(&self, sig: libc::c_int) -> io::Result<()> {
        let target = if self.leads_group {
            -self.pid
        } else {
            self.pid
        };
        let sig = nix::sys::signal::Signal::try_from(sig)?;
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(target), sig) {
            Ok(()) | Err(nix::Error::ESRCH) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// `SIGKILL` to the program's process group. `pid` is the program, not reaped yet by
    /// the caller: an unreaped process (a zombie too) keeps its number as its group's id,
    /// so no other group can have it.
    pub(super) fn kill_group(&self, pid: libc::pid_t) -> io::Result<()> {
        if !self.leads_group {
            return Ok(());
        }
        match nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(-pid),
            nix::sys::signal::Signal::SIGKILL,
        ) {
            Ok(()) | Err(nix::Error::ESRCH) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Reaps the killed program of a dropped `Child` from a thread of its own (no pidfds
/// here): the thread is the only one left that reaps `pid`.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(super) fn reap_later(pid: libc::pid_t, _handle: &Handle, _rusage: &super::limits::RusageSlot) {
    let _ = std::thread::Builder::new()
        .name("stockade-reap".into())
        .spawn(move || nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None));
}

#[cfg_attr(target_os = "linux", allow(dead_code))]
/// No pollable fd here: waits a few milliseconds (at most `timeout`) before the next
/// `try_wait`.
pub(super) fn await_news(_handle: &Handle, timeout: std::time::Duration) -> io::Result<()> {
    std::thread::sleep(timeout.min(std::time::Duration::from_millis(5)));
    Ok(())
}

/// The program's exit status: its own wait status (no init here).
pub(super) fn exit_status(_handle: &Handle, raw: libc::c_int) -> std::process::ExitStatus {
    std::os::unix::process::ExitStatusExt::from_raw(raw)
}

/// On Linux these run the fork launcher unconfined: the passthrough path of macOS and the
/// other Unix systems, minus `sandbox_init` (which only macOS can run).
#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::path::Path;

    use super::*;
    use crate::plan::{Ids, RealFs};
    use crate::policy::{Layer, Policy};

    /// The passthrough plan of a system that forks (here: as on macOS).
    fn prepared(ws: &Path) -> Prepared {
        let policy = Policy::with_workspace(ws);
        let ids = Ids {
            uid: 0,
            gid: 0,
            host_root: true,
        };
        let plan = Plan::for_layer(&policy, Layer::Passthrough, "macos", &RealFs, ids).unwrap();
        assert!(!plan.steps.contains(&Step::DieWithParent));
        Prepared::new(plan).unwrap()
    }

    fn request<'a>(program: &'a str, args: &[&str], cwd: &'a Path) -> Request<'a> {
        Request {
            program: OsStr::new(program),
            args: std::iter::once(program)
                .chain(args.iter().copied())
                .map(Into::into)
                .collect(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd,
            stdio: [-1; 3],
            not_terminals: [false; 3],
            pass: Vec::new(),
            controlling_terminal: None,
            terminal: None,
            private_tmp: None,
            private_tmp_parent: None,
            git: Box::leak(Box::default()),
            #[cfg(target_os = "linux")]
            cgroup: Vec::new(),
            #[cfg(target_os = "linux")]
            pty: None,
            egress_ports: Vec::new(),
            #[cfg(target_os = "linux")]
            egress_socket: -1,
            #[cfg(target_os = "linux")]
            overlay_socket: -1,
            #[cfg(target_os = "linux")]
            explain: None,
            serve: false,
        }
    }

    fn wait(pid: libc::pid_t) -> Option<i32> {
        match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {
            Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => Some(code),
            _ => None,
        }
    }

    #[test]
    fn runs_the_program_in_its_working_directory_and_session() {
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let script = "test \"$(pwd -P)\" = \"$0\" && test \"$(ps -o sid= -p $$ | tr -d ' ')\" = $$";
        let cwd = std::fs::canonicalize(ws.path()).unwrap();
        let cwd_s = cwd.to_str().unwrap().to_string();
        let (pid, ()) = start(&p, request("sh", &["-c", script, &cwd_s], &cwd)).unwrap();
        assert_eq!(wait(pid), Some(0));
    }

    #[test]
    fn overlay_mode_runs_the_forked_program_on_the_snapshot() {
        // macOS's path minus `sandbox_init`: the host makes the snapshot, the forked child
        // replays the plan (the snapshot step is the host's) and works there; the
        // difference lands in `upper/`, the real workspace stays as it was.
        let ws = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::write(ws.join("f"), "host\n").unwrap();
        let c = tempfile::tempdir().unwrap();
        let changes = std::fs::canonicalize(c.path()).unwrap().join("set");
        let mut policy = Policy::with_workspace(&ws);
        policy.workspace_mode = crate::policy::WorkspaceMode::Overlay;
        policy.changes_dir = Some(changes.clone());
        let ids = Ids {
            uid: 0,
            gid: 0,
            host_root: true,
        };
        let plan = Plan::for_layer(&policy, Layer::Passthrough, "macos", &RealFs, ids).unwrap();
        let p = Prepared::new(plan).unwrap();
        let run = super::super::changeset::prepare(&p.plan).unwrap().unwrap();
        let cwd = p.plan.workspace.clone();
        assert_eq!(cwd, changes.join("snapshot"));
        let (pid, ()) = start(
            &p,
            request("sh", &["-c", "echo mine > f; echo n > new"], &cwd),
        )
        .unwrap();
        assert_eq!(wait(pid), Some(0));
        run.finish(wait_gone(&()));
        assert_eq!(std::fs::read(ws.join("f")).unwrap(), b"host\n");
        assert!(!ws.join("new").exists());
        assert_eq!(std::fs::read(changes.join("upper/f")).unwrap(), b"mine\n");
        assert_eq!(std::fs::read(changes.join("upper/new")).unwrap(), b"n\n");
    }

    #[test]
    fn the_terminal_on_stdio_becomes_the_controlling_terminal_on_request() {
        use std::os::fd::AsRawFd;
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes two fds to the out-pointers; name, termios and winsize
        // are null.
        let r = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(r, 0, "openpty");
        use std::os::fd::FromRawFd;
        // SAFETY: openpty just returned this fd; nothing else owns it.
        let _master = unsafe { OwnedFd::from_raw_fd(master) };
        // SAFETY: as above.
        let slave = unsafe { OwnedFd::from_raw_fd(slave) };
        // `/dev/tty` opens only for a process with a controlling terminal.
        let mut req = request("sh", &["-c", "exec 3</dev/tty"], ws.path());
        req.stdio = [slave.as_raw_fd(), -1, -1];
        req.controlling_terminal = Some(0);
        let (pid, ()) = start(&p, req).unwrap();
        assert_eq!(wait(pid), Some(0));
        let quiet = std::fs::File::create("/dev/null").unwrap();
        let mut req = request("sh", &["-c", "exec 3</dev/tty"], ws.path());
        req.stdio = [slave.as_raw_fd(), -1, quiet.as_raw_fd()];
        let (pid, ()) = start(&p, req).unwrap();
        assert_ne!(wait(pid), Some(0));
        // A stdio fd that is no terminal: the step and its errno.
        let mut req = request("true", &[], ws.path());
        req.controlling_terminal = Some(0);
        let null = std::fs::File::open("/dev/null").unwrap();
        req.stdio = [null.as_raw_fd(), -1, -1];
        match start(&p, req) {
            Err(StartError::Failed(Error::Spawn(SpawnError::Setup { step, errno }))) => {
                assert_eq!(errno, crate::error::Errno::ENOTTY);
                assert_eq!(step, crate::error::SetupStep::ControllingTerminal { fd: 0 });
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn open_null_reads_nothing_and_takes_every_write() {
        let mut r = std::fs::File::from(open_null(false).unwrap());
        let mut buf = [0u8; 4];
        assert_eq!(std::io::Read::read(&mut r, &mut buf).unwrap(), 0);
        let mut w = std::fs::File::from(open_null(true).unwrap());
        assert_eq!(std::io::Write::write(&mut w, b"abc").unwrap(), 3);
    }

    #[test]
    fn kill_ends_the_program() {
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let (pid, handle) = start(&p, request("sleep", &["30"], ws.path())).unwrap();
        kill(pid, &handle).unwrap();
        let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None).unwrap();
        assert!(
            matches!(
                status,
                nix::sys::wait::WaitStatus::Signaled(_, nix::sys::signal::Signal::SIGKILL, _)
            ),
            "{status:?}"
        );
    }

    #[test]
    fn signal_reaches_the_program_and_the_status_is_its_own() {
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let (pid, handle) = start(&p, request("sleep", &["30"], ws.path())).unwrap();
        signal(pid, &handle, libc::SIGTERM).unwrap();
        let mut raw = 0;
        // SAFETY: `pid` is this test's unreaped child; `raw` is a valid out-pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut raw, 0) }, pid);
        let status = exit_status(&handle, raw);
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGTERM)
        );
    }

    #[test]
    fn failures_come_back_typed() {
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let failed = |e| match e {
            StartError::Failed(e) => e,
            other => panic!("{other:?}"),
        };
        let err = failed(start(&p, request("no-such-program-xyz", &[], ws.path())).unwrap_err());
        assert!(
            matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
            "{err}"
        );
        let gone = ws.path().join("gone");
        let err = failed(start(&p, request("true", &[], &gone)).unwrap_err());
        match err {
            Error::Spawn(SpawnError::Setup { step, errno }) => {
                assert_eq!(errno, crate::error::Errno::ENOENT);
                assert_eq!(step.path(), Some(gone.as_path()), "{step}");
                assert!(
                    matches!(step, crate::error::SetupStep::Chdir { .. }),
                    "{step}"
                );
            }
            other => panic!("{other}"),
        }
    }

    /// A child that exits without its record and without exec (its record's write fails:
    /// its report fd is the pipe's read end) is `Died`, never running.
    #[test]
    fn a_child_that_exits_without_its_record_is_died_not_running() {
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let (r, w) = pipe_cloexec().unwrap();
        let gone = ws.path().join("gone");
        let req = request("true", &[], &gone);
        let spec = prepare::ExecSpec {
            program: req.program,
            args: req.args,
            env: req.env,
            cwd: req.cwd,
            controlling_terminal: None,
        };
        let exec = prepare::Exec::new(p.plan(), spec, [-1; 3], r.as_raw_fd(), vec![], 64);
        match fork_and_await(&exec.unwrap(), None, (r, w)).unwrap() {
            (_, Ending::Died(status)) => assert_eq!(status.code(), Some(child::SETUP_FAILED)),
            (_, other) => panic!("{other:?}"),
        }
    }

    /// A program that is exec'd and killed at once is running (then killed), not an error.
    #[test]
    fn a_program_killed_right_after_exec_is_not_a_setup_error() {
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let (pid, _) = start(&p, request("sh", &["-c", "kill -KILL $$"], ws.path())).unwrap();
        let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None).unwrap();
        assert!(
            matches!(
                status,
                nix::sys::wait::WaitStatus::Signaled(_, nix::sys::signal::Signal::SIGKILL, _)
            ),
            "{status:?}"
        );
    }

    /// The fork child allocates nothing between `fork` and `execve`, on every path (a
    /// program that runs, one that is not found, a failing step, a child that exits
    /// without its record), and the trap fires on a deliberate allocation. The trap is
    /// process-wide, so this test re-runs itself alone in a child of the test binary.
    #[test]
    fn no_allocation_between_fork_and_exec() {
        const INNER: &str = "STOCKADE_TEST_FORK_TRAP";
        let name = concat!(module_path!(), "::no_allocation_between_fork_and_exec");
        let name = name.strip_prefix("stockade::").unwrap();
        if std::env::var_os(INNER).is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--nocapture", "--test-threads", "1"])
                .env(INNER, "1")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{stderr}");
            assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
            let deliberate = String::from_utf8_lossy(crate::test_alloc::DELIBERATE_LINE);
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines, [deliberate.trim_end()], "{stderr}");
            return;
        }
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let gone = ws.path().join("gone");
        crate::test_alloc::arm();
        for _ in 0..10 {
            let (pid, ()) = start(&p, request("sh", &["-c", "exit 3"], ws.path())).unwrap();
            assert_eq!(wait(pid), Some(3));
        }
        let not_found = start(&p, request("no-such-program-xyz", &[], ws.path()));
        let chdir = start(&p, request("true", &[], &gone));
        let (r, w) = pipe_cloexec().unwrap();
        let req = request("true", &[], &gone);
        let spec = prepare::ExecSpec {
            program: req.program,
            args: req.args,
            env: req.env,
            cwd: req.cwd,
            controlling_terminal: None,
        };
        let exec = prepare::Exec::new(p.plan(), spec, [-1; 3], r.as_raw_fd(), vec![], 64);
        let died = fork_and_await(&exec.unwrap(), None, (r, w));
        let deliberate = crate::test_alloc::deliberate_allocation_status();
        crate::test_alloc::disarm();
        let failed = |e| match e {
            Err(StartError::Failed(e)) => e,
            other => panic!("{other:?}"),
        };
        assert!(matches!(
            failed(not_found),
            Error::Spawn(SpawnError::NotFound { .. })
        ));
        assert!(matches!(
            failed(chdir),
            Error::Spawn(SpawnError::Setup { .. })
        ));
        match died.unwrap() {
            (_, Ending::Died(status)) => assert_eq!(status.code(), Some(child::SETUP_FAILED)),
            (_, other) => panic!("{other:?}"),
        }
        assert_eq!(deliberate.code(), Some(crate::test_alloc::TRAPPED));
    }

    #[test]
    fn a_sandbox_init_record_becomes_the_typed_error() {
        let ws = tempfile::tempdir().unwrap();
        let mut plan = prepared(ws.path()).plan().clone();
        plan.steps.push(Step::SandboxInit);
        let mut m = [0u8; report::MESSAGE_LEN];
        m[..10].copy_from_slice(b"bad rule\n\n");
        let r = report::Record::with_message(plan.steps.len() as u32 - 1, m, 10);
        let e = failure(&plan, &r, ws.path(), "sh".into(), -1);
        assert_eq!(e.to_string(), "sandbox_init refused the profile: bad rule");
        let r = report::Record::new(plan.steps.len() as u32 + fork::extra::STDIO, libc::EBADF);
        assert_eq!(
            failure(&plan, &r, ws.path(), "sh".into(), -1).to_string(),
            "set up stdio: EBADF (Bad file descriptor)"
        );
    }

    #[test]
    fn the_report_pipe_is_close_on_exec() {
        let (r, w) = pipe_cloexec().unwrap();
        for fd in [&r, &w] {
            let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).unwrap();
            assert_ne!(flags & libc::FD_CLOEXEC, 0);
        }
    }
}
