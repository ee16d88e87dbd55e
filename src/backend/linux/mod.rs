//! The Linux backend: the plan replayed by a child of stockade's own `clone`.
//!
//! [`prepare`] runs in the parent and computes every byte, including the Landlock ruleset
//! fd ([`landlock`]) and the seccomp BPF program ([`seccomp`]); [`child`] runs between
//! `clone` and `execve` and only replays; [`report`] is the record a failing child sends
//! back. The last steps before `execve` are, in this order: `PR_SET_NO_NEW_PRIVS`,
//! `landlock_restrict_self`, `seccomp(SECCOMP_SET_MODE_FILTER)`.

pub mod child;
pub mod landlock;
pub mod prepare;
pub mod report;
pub mod seccomp;

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use crate::error::SpawnError;
use crate::plan::{Access, Namespaces, Plan, Step};
use crate::policy::Layer;
use crate::probe::Availability;
use prepare::{Exec, ExecSpec, Layout};

/// `clone` flags for the namespaces of a plan.
pub fn clone_flags(ns: Namespaces) -> libc::c_int {
    let mut flags = 0;
    if ns.base {
        flags |= libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
    }
    if ns.net {
        flags |= libc::CLONE_NEWNET;
    }
    flags
}

/// How a started child ended its setup.
#[derive(Debug)]
pub enum Outcome {
    /// The program is running.
    Running {
        /// Its pid (in the host's PID namespace).
        pid: libc::pid_t,
        /// A pidfd for it.
        pidfd: OwnedFd,
    },
    /// Step `step` failed with `errno`; the child has been reaped.
    Failed {
        /// Index of the failing step (layout steps first, then the per-command ones).
        step: u32,
        /// The errno.
        errno: i32,
    },
}

/// A close-on-exec pipe for the child's report: (read end, write end).
///
/// # Errors
///
/// [`SpawnError::Os`] when `pipe2` fails.
pub fn report_pipe() -> Result<(OwnedFd, OwnedFd), SpawnError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| SpawnError::Os {
        call: "pipe2",
        source: e.into(),
    })
}

/// Clones a child that replays `layout` and then `exec`, and reads its report.
///
/// # Errors
///
/// [`SpawnError::Os`] when `clone` fails, [`SpawnError::Protocol`] on a malformed report.
pub fn start(
    layout: &Arc<Layout>,
    exec: Exec,
    report: (OwnedFd, OwnedFd),
) -> Result<Outcome, SpawnError> {
    let flags = clone_flags(layout.plan.namespaces);
    let (read_end, write_end) = report;
    let launched = crate::spawn::clone::launch(Arc::clone(layout), exec, flags);
    // The child has exec'd or exited (CLONE_VFORK); the parent's write end must go before
    // reading, or EOF never comes.
    drop(write_end);
    let (pid, pidfd) = launched?;
    let mut buf = [0u8; 2 * report::SIZE];
    let mut len = 0;
    let mut file = std::fs::File::from(read_end);
    while let Some(rest) = buf.get_mut(len..) {
        if rest.is_empty() {
            break;
        }
        match file.read(rest) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(SpawnError::Os {
                    call: "read",
                    source: e,
                });
            }
        }
    }
    if len == 0 {
        return Ok(Outcome::Running { pid, pidfd });
    }
    // Setup failed: the child has exited; reap it so that no zombie is left.
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    drop(pidfd);
    match report::Record::from_bytes(buf.get(..len).unwrap_or(&[])) {
        Some(r) => Ok(Outcome::Failed {
            step: r.step,
            errno: r.errno,
        }),
        None => Err(SpawnError::Protocol(len)),
    }
}

/// Describes step `index` of a child that ran `plan` plus the per-command steps.
pub fn describe_step(plan: &Plan, index: u32, cwd: Option<&Path>, program: &str) -> String {
    let base = plan.steps.len() as u32;
    if let Some(step) = plan.steps.get(index as usize) {
        return step.to_string();
    }
    match index.checked_sub(base) {
        Some(child::extra::STDIO) => Step::Stdio.to_string(),
        Some(child::extra::CLOSE_FDS) => Step::CloseFds.to_string(),
        Some(child::extra::CHDIR) => {
            Step::Chdir(cwd.unwrap_or(Path::new("?")).to_path_buf()).to_string()
        }
        Some(child::extra::EXEC) => Step::Exec(program.to_string()).to_string(),
        _ => format!("step {index}"),
    }
}

/// Reads `/proc/sys/kernel/cap_last_cap` (the highest capability this kernel knows).
pub fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// The user-namespace probe: a real child maps its ids, builds a root, binds a tree
/// read-only, then mounts a fresh `/proc`. Returns (user namespaces, fresh proc).
pub fn probe_namespaces() -> (Availability, Availability) {
    let mut steps = vec![
        Step::DieWithParent,
        Step::ResetSignals,
        Step::IdMaps {
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
        },
        Step::MountsPrivate,
        Step::BaseRoot,
        Step::Bind {
            src: "/".into(),
            dst: "/probe".into(),
            access: Access::ReadOnly,
            dir: true,
            beneath: None,
        },
    ];
    let proc_index = steps.len() as u32;
    steps.push(Step::Proc { fallback: false });
    steps.push(Step::Exit);
    let plan = Plan {
        layer: Layer::Full,
        namespaces: Namespaces {
            base: true,
            net: false,
        },
        workspace: "/".into(),
        steps,
        path: Vec::new(),
        roots: Vec::new(),
        private_tmp: false,
    };
    let layout = match Layout::new(plan, last_cap(), None) {
        Ok(l) => Arc::new(l),
        Err(e) => {
            return (
                Availability::no(e.to_string()),
                Availability::no("not probed"),
            );
        }
    };
    let result = report_pipe().and_then(|(r, w)| {
        let spec = ExecSpec {
            program: "".as_ref(),
            ..ExecSpec::default()
        };
        let exec = Exec::new(
            spec,
            [-1; 3],
            (w.as_raw_fd(), r.as_raw_fd()),
            -1,
            Vec::new(),
        )
        .map_err(|e| SpawnError::Os {
            call: "prepare probe",
            source: std::io::Error::other(e.to_string()),
        })?;
        start(&layout, exec, (r, w))
    });
    match result {
        Ok(Outcome::Running { pid, .. }) => {
            let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
            match status {
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => {
                    (Availability::yes(), Availability::yes())
                }
                other => (
                    Availability::no(format!("probe child ended with {other:?}")),
                    Availability::no("not probed"),
                ),
            }
        }
        Ok(Outcome::Failed { step, errno }) => {
            let what = format!(
                "{}: {}",
                describe_step(&layout.plan, step, None, ""),
                crate::error::strerror(errno)
            );
            if step == proc_index {
                (Availability::yes(), Availability::no(what))
            } else {
                (
                    Availability::no(what),
                    Availability::no("user namespaces unavailable"),
                )
            }
        }
        Err(SpawnError::Os { call, source }) => {
            let hint = if source.raw_os_error() == Some(libc::EPERM)
                || source.raw_os_error() == Some(libc::ENOSPC)
            {
                " (user namespaces restricted: kernel.apparmor_restrict_unprivileged_userns=1, user.max_user_namespaces=0, or a seccomp profile?)"
            } else {
                ""
            };
            (
                Availability::no(format!(
                    "{call}(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID): {source}{hint}"
                )),
                Availability::no("user namespaces unavailable"),
            )
        }
        Err(e) => (
            Availability::no(e.to_string()),
            Availability::no("not probed"),
        ),
    }
}
