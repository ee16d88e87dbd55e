//! Parent side: everything the forked child touches, computed before `fork`.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{Conflict, PlanError, SetupStep};
use crate::plan::{Plan, Step};

/// Highest fd the child closes when the fd limit is unlimited or huge: a loop of `close`
/// calls has to end somewhere (see [`fd_limit`]).
pub const MAX_FD_LIMIT: RawFd = 1 << 20;

/// One operation of the child, 1:1 with a plan step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// See [`Step::ResetSignals`].
    ResetSignals,
    /// See [`Step::NewSession`].
    NewSession,
    /// See [`Step::SandboxInit`].
    SandboxInit,
    /// See [`Step::Snapshot`]: the host's work before the fork; nothing in the child.
    Snapshot,
    /// See [`Step::ResourceLimits`]: the first `len` `(RLIMIT_*, soft, hard)` of `list`.
    ResourceLimits {
        /// The limits.
        list: [(i32, u64, u64); MAX_RLIMITS],
        /// How many of `list` are used.
        len: usize,
    },
}

/// The most rlimits one [`Step::ResourceLimits`] sets (the policy has five).
pub const MAX_RLIMITS: usize = 8;

/// What a command asks for, before preparation.
#[derive(Debug)]
pub struct ExecSpec<'a> {
    /// The program as given.
    pub program: &'a OsStr,
    /// argv[0] and the arguments.
    pub args: Vec<OsString>,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// The working directory.
    pub cwd: &'a Path,
    /// The stdio fd (0, 1 or 2) whose terminal becomes the controlling terminal of the
    /// new session ([`Step::ControllingTerminal`]).
    pub controlling_terminal: Option<RawFd>,
}

/// One command, ready for [`super::child::run`].
#[derive(Debug)]
pub struct Exec {
    /// One operation per plan step.
    pub ops: Vec<Op>,
    /// Source fd (≥ 3) for 0, 1 and 2, or -1 to inherit the host's.
    pub stdio: [RawFd; 3],
    /// Sorted fds ≥ 3 that survive `CloseFds` (the report pipe and passed fds).
    pub keep: Vec<RawFd>,
    /// Passed fds whose close-on-exec flag the child clears.
    pub pass: Vec<RawFd>,
    /// The report pipe's write end (close-on-exec).
    pub report: RawFd,
    /// The child closes every fd in `3..fd_limit` that is not in `keep`.
    pub fd_limit: RawFd,
    /// The working directory.
    pub cwd: CString,
    /// The stdio fd (0, 1 or 2) whose terminal becomes the controlling terminal, or -1.
    pub controlling_terminal: RawFd,
    /// The program, argv and envp as C arrays.
    pub(crate) program: crate::backend::program::Program,
}

/// The end of the child's close loop: the soft `RLIMIT_NOFILE` (no fd at or above it can
/// be opened), at most [`MAX_FD_LIMIT`].
///
/// macOS has no `close_range` or `closefrom`, and listing `/dev/fd` allocates; a loop of
/// `close` (async-signal-safe, `EBADF` ignored) is what remains. An fd above the limit
/// exists only if the host lowered its limit after opening it, and fds that std and
/// stockade open are close-on-exec anyway: this loop is for fds a host opened without it.
pub fn fd_limit() -> RawFd {
    match nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE) {
        Ok((soft, _)) => RawFd::try_from(soft).map_or(MAX_FD_LIMIT, |s| s.min(MAX_FD_LIMIT)),
        Err(_) => MAX_FD_LIMIT,
    }
}

impl Exec {
    /// Prepares the operations of `plan`, argv, envp and the program candidates.
    ///
    /// # Errors
    ///
    /// [`Conflict::NotInForkedChild`] for a plan step the fork launcher cannot replay
    /// (namespaces, mounts, Landlock, seccomp: those are Linux's); [`PlanError::NulInArgument`] or
    /// [`PlanError::Nul`] for a string with a NUL byte.
    pub fn new(
        plan: &Plan,
        spec: ExecSpec<'_>,
        stdio: [RawFd; 3],
        report: RawFd,
        pass: Vec<RawFd>,
        fd_limit: RawFd,
    ) -> Result<Self, PlanError> {
        let ops = plan
            .steps
            .iter()
            .map(|step| match step {
                Step::ResetSignals => Ok(Op::ResetSignals),
                Step::NewSession => Ok(Op::NewSession),
                Step::SandboxInit => Ok(Op::SandboxInit),
                Step::Snapshot { .. } => Ok(Op::Snapshot),
                Step::ResourceLimits(limits) if limits.len() <= MAX_RLIMITS => {
                    let mut list = [(0, 0, 0); MAX_RLIMITS];
                    for (slot, l) in list.iter_mut().zip(limits) {
                        *slot = (l.resource, l.soft, l.hard);
                    }
                    Ok(Op::ResourceLimits {
                        list,
                        len: limits.len(),
                    })
                }
                other => Err(PlanError::Conflict(Conflict::NotInForkedChild {
                    step: SetupStep::from(other),
                    os: std::env::consts::OS,
                })),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let program =
            crate::backend::program::Program::new(spec.program, spec.args, spec.env, &plan.path)?;
        let mut keep: Vec<RawFd> = pass.iter().copied().filter(|&fd| fd > 2).collect();
        keep.push(report);
        keep.sort_unstable();
        keep.dedup();
        let cwd = CString::new(spec.cwd.as_os_str().as_bytes())
            .map_err(|_| PlanError::Nul(PathBuf::from(spec.cwd)))?;
        Ok(Exec {
            ops,
            stdio,
            keep,
            pass,
            report,
            fd_limit,
            cwd,
            controlling_terminal: spec.controlling_terminal.unwrap_or(-1),
            program,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Namespaces;
    use crate::policy::Layer;

    fn plan(steps: Vec<Step>) -> Plan {
        Plan {
            layer: Layer::Passthrough,
            namespaces: Namespaces::default(),
            workspace: "/ws".into(),
            steps,
            path: vec!["/usr/bin".into(), "/bin".into()],
            roots: vec![],
            private_tmp: false,
            walls: Default::default(),
            egress: None,
        }
    }

    fn spec() -> ExecSpec<'static> {
        ExecSpec {
            program: OsStr::new("sh"),
            args: vec!["sh".into()],
            env: vec![("A".into(), "b".into())],
            cwd: Path::new("/ws"),
            controlling_terminal: None,
        }
    }

    #[test]
    fn steps_map_to_ops_and_arrays_are_terminated() {
        let p = plan(vec![
            Step::ResetSignals,
            Step::NewSession,
            Step::SandboxInit,
        ]);
        let e = Exec::new(&p, spec(), [-1; 3], 9, vec![5, 1], 100).unwrap();
        assert_eq!(e.ops, [Op::ResetSignals, Op::NewSession, Op::SandboxInit]);
        assert_eq!(e.program.candidates[1].to_str().unwrap(), "/bin/sh");
        assert!(e.program.argv[1].is_null() && e.program.envp[1].is_null());
        assert_eq!(e.keep, [5, 9]);
    }

    #[test]
    fn linux_steps_are_refused() {
        let p = plan(vec![Step::DieWithParent]);
        assert!(Exec::new(&p, spec(), [-1; 3], 9, vec![], 100).is_err());
        let p = plan(vec![Step::PivotRoot]);
        assert!(Exec::new(&p, spec(), [-1; 3], 9, vec![], 100).is_err());
    }

    #[test]
    fn the_fd_limit_is_bounded() {
        let l = fd_limit();
        assert!(l > 2 && l <= MAX_FD_LIMIT, "{l}");
    }
}
