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

use std::io::{self, Read};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};

use super::Request;
use crate::backend::fork::{self, Confine, child, prepare, report};
use crate::error::{Error, PlanError, SpawnError};
use crate::plan::{Plan, RealFs, Step};
use crate::policy::{Layer, Policy};

/// A running program's handle besides its pid: nothing (no pidfds here).
pub(super) type Handle = ();

/// What every command of one sandbox shares: the plan, and the policy the per-command
/// profile is generated from.
#[derive(Debug)]
pub(super) struct Prepared {
    plan: Plan,
    policy: Policy,
}

/// Refuses up front what this system can never give (on systems without a backend,
/// [`crate::backend::passthrough::check`], naming the system).
pub(super) fn check(policy: &Policy) -> Result<(), PlanError> {
    fork::os::check(policy)
}

/// The plan for `layer`. `PR_SET_PDEATHSIG` has no equivalent here, so the step is left
/// out rather than pretended (see `Child`'s `# Platform`).
pub(super) fn plan(policy: &Policy, layer: Layer) -> Result<Plan, Error> {
    let mut plan = match layer {
        Layer::Full => fork::os::full_plan(policy)?,
        Layer::Passthrough => Plan::passthrough(policy, &RealFs)?,
        Layer::Landlock => {
            return Err(PlanError::LayerUnavailable {
                wanted: Layer::Landlock,
                reason: format!("Landlock is Linux only, not on {}", std::env::consts::OS),
            }
            .into());
        }
    };
    plan.steps.retain(|s| *s != Step::DieWithParent);
    Ok(plan)
}

impl Prepared {
    /// Nothing is compiled per sandbox: the profile depends on each command's `TMPDIR`.
    pub(super) fn new(policy: &Policy, plan: Plan) -> Result<Prepared, Error> {
        Ok(Prepared {
            plan,
            policy: policy.clone(),
        })
    }

    pub(super) fn plan(&self) -> &Plan {
        &self.plan
    }
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

/// Forks the child for `req` and waits until it has exec'd or failed.
pub(super) fn start(prepared: &Prepared, req: Request<'_>) -> Result<(libc::pid_t, Handle), Error> {
    let plan = &prepared.plan;
    let confine = if plan.steps.contains(&Step::SandboxInit) {
        Some(fork::os::confine(&prepared.policy, req.private_tmp)?)
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
        },
        req.stdio,
        report_w.as_raw_fd(),
        req.pass,
        prepare::fd_limit(),
    )?;
    let forked = fork_child(&exec, confine.as_ref());
    // The parent's write end must go before reading, or EOF never comes.
    drop(report_w);
    let pid = forked.map_err(|source| SpawnError::Os {
        call: "fork",
        source,
    })?;
    let mut buf = [0u8; 2 * report::SIZE];
    let len = read_report(report_r, &mut buf)?;
    if len == 0 {
        return Ok((pid, ()));
    }
    // Setup failed: the child has exited or is about to; reap it so no zombie is left.
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    let record = report::Record::from_bytes(buf.get(..len).unwrap_or(&[]))
        .ok_or(SpawnError::Protocol(len))?;
    Err(failure(plan, &record, req.cwd, program).into())
}

/// The typed error for a child's record.
fn failure(plan: &Plan, r: &report::Record, cwd: &std::path::Path, program: String) -> SpawnError {
    if plan.steps.get(r.step as usize) == Some(&Step::SandboxInit) {
        return crate::backend::sbpl::InitError::from_report(r.message()).into();
    }
    let exec_step = plan.steps.len() as u32 + fork::extra::EXEC;
    if r.step == exec_step && r.errno == libc::ENOENT {
        return SpawnError::NotFound { program };
    }
    SpawnError::Setup {
        step: fork::describe_step(plan, r.step, cwd, &program),
        errno: r.errno,
    }
}

/// Reads the report pipe to EOF (or until `buf` is full: more than a record is a protocol
/// error anyway).
fn read_report(read_end: OwnedFd, buf: &mut [u8]) -> Result<usize, SpawnError> {
    let mut file = std::fs::File::from(read_end);
    let mut len = 0;
    while let Some(rest) = buf.get_mut(len..) {
        if rest.is_empty() {
            break;
        }
        match file.read(rest) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(SpawnError::Os {
                    call: "read",
                    source,
                });
            }
        }
    }
    Ok(len)
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

/// `SIGKILL` by pid. The caller only calls this before the program is reaped, so the pid
/// still names it.
pub(super) fn kill(pid: libc::pid_t, _handle: &Handle) -> io::Result<()> {
    Ok(nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )?)
}

/// On Linux these run the fork launcher unconfined: the passthrough path of macOS and the
/// other Unix systems, minus `sandbox_init` (which only macOS can run).
#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::path::Path;

    use super::*;
    use crate::policy::Fallback;

    fn prepared(ws: &Path) -> Prepared {
        let policy = Policy::with_workspace(ws);
        let plan = plan(&policy, Layer::Passthrough).unwrap();
        assert!(!plan.steps.contains(&Step::DieWithParent));
        Prepared::new(&policy, plan).unwrap()
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
            pass: Vec::new(),
            private_tmp: None,
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
    fn failures_come_back_typed() {
        let ws = tempfile::tempdir().unwrap();
        let p = prepared(ws.path());
        let err = start(&p, request("no-such-program-xyz", &[], ws.path())).unwrap_err();
        assert!(
            matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
            "{err}"
        );
        let gone = ws.path().join("gone");
        let err = start(&p, request("true", &[], &gone)).unwrap_err();
        match err {
            Error::Spawn(SpawnError::Setup { step, errno }) => {
                assert_eq!(errno, libc::ENOENT);
                assert!(step.starts_with("chdir "), "{step}");
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_sandbox_init_record_becomes_the_typed_error() {
        let ws = tempfile::tempdir().unwrap();
        let mut plan = prepared(ws.path()).plan().clone();
        plan.steps.push(Step::SandboxInit);
        let mut m = [0u8; report::MESSAGE_LEN];
        m[..10].copy_from_slice(b"bad rule\n\n");
        let r = report::Record::sandbox_init(plan.steps.len() as u32 - 1, m, 10);
        let e = failure(&plan, &r, ws.path(), "sh".into());
        assert_eq!(e.to_string(), "sandbox_init refused the profile: bad rule");
        let r = report::Record::new(plan.steps.len() as u32 + fork::extra::STDIO, libc::EBADF);
        assert_eq!(
            failure(&plan, &r, ws.path(), "sh".into()).to_string(),
            "set up stdio: Bad file descriptor"
        );
    }

    #[test]
    fn no_full_layer_without_a_backend() {
        let refuse = Policy {
            fallback: Fallback::Refuse,
            ..Policy::with_workspace("/tmp")
        };
        let e = check(&refuse).unwrap_err();
        assert!(e.to_string().contains(std::env::consts::OS), "{e}");
        assert!(check(&Policy::with_workspace("/tmp")).is_ok());
        assert!(plan(&refuse, Layer::Full).is_err());
        assert!(plan(&refuse, Layer::Landlock).is_err());
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
