//! Linux: the plan replayed by a child of stockade's own `clone` ([`super::clone`],
//! [`crate::backend::linux`]).
//!
//! This module and `launch_fork` offer the same items (`check`, `plan`, `Prepared`,
//! `Handle`, `pipe_cloexec`, `start`, `kill`); `spawn/mod.rs` picks one with `#[cfg]` on
//! its `mod` and `use` lines and is otherwise the same on every Unix.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use super::{Child, Request, Sandbox};
use crate::backend::linux::{
    self as backend, landlock,
    prepare::{Exec, ExecSpec, Layout, Walls},
    seccomp,
};
use crate::error::{Error, PlanError, SpawnError};
use crate::plan::{Access, Ids, Plan, RealFs, Step};
use crate::policy::{Layer, Policy};

/// A running program's handle besides its pid: a pidfd.
pub(super) type Handle = OwnedFd;

/// What every command of one sandbox shares: the prepared layout and, when the layer has
/// one, the Landlock ruleset spec (built anew per command: the child adds rules).
#[derive(Debug)]
pub(super) struct Prepared {
    layout: Arc<Layout>,
    landlock: Option<(landlock::RulesetSpec, landlock::Status)>,
}

/// Nothing to refuse before the probe: every layer exists on Linux.
pub(super) fn check(_policy: &Policy) -> Result<(), PlanError> {
    Ok(())
}

/// The plan for `layer`.
pub(super) fn plan(policy: &Policy, layer: Layer) -> Result<Plan, Error> {
    let ids = Ids {
        uid: nix::unistd::geteuid().as_raw(),
        gid: nix::unistd::getegid().as_raw(),
    };
    Ok(match layer {
        Layer::Full => Plan::full(policy, &RealFs, ids)?,
        Layer::Landlock => Plan::landlock(policy, &RealFs, ids)?,
        Layer::Passthrough => Plan::passthrough(policy, &RealFs)?,
    })
}

impl Prepared {
    /// Compiles the walls (seccomp, Landlock) and prepares the layout of `plan`.
    pub(super) fn new(policy: &Policy, plan: Plan) -> Result<Prepared, Error> {
        let (walls, landlock) = if plan.steps.contains(&Step::Seccomp) {
            let (walls, spec, status) = build_walls(policy, &plan)?;
            (Some(walls), Some((spec, status)))
        } else {
            (None, None)
        };
        let layout = Arc::new(Layout::new(plan, backend::last_cap(), walls)?);
        Ok(Prepared { layout, landlock })
    }

    pub(super) fn plan(&self) -> &Plan {
        &self.layout.plan
    }
}

/// A close-on-exec pipe, atomically (`pipe2`).
pub(super) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// Clones the child for `req` and waits until it has exec'd or failed.
pub(super) fn start(prepared: &Prepared, req: Request<'_>) -> Result<(libc::pid_t, Handle), Error> {
    let plan = &prepared.layout.plan;
    // A ruleset of its own per command: the child adds rules for the mounts it makes.
    let ruleset = match &prepared.landlock {
        Some((spec, _)) => {
            let mut spec = spec.clone();
            if let Some(dir) = req.private_tmp {
                spec = spec.with(dir, landlock::Grant::ReadWrite);
            }
            Some(landlock::build(&spec)?)
        }
        None => None,
    };
    let landlock_fd = ruleset.as_ref().map_or(-1, landlock::Prepared::raw_fd);
    let (report_r, report_w) = backend::report_pipe()?;
    let spec = ExecSpec {
        program: req.program,
        args: req.args,
        env: req.env,
        path: &plan.path,
        cwd: Some(req.cwd.to_path_buf()),
    };
    let exec = Exec::new(
        spec,
        req.stdio,
        (report_w.as_raw_fd(), report_r.as_raw_fd()),
        landlock_fd,
        req.pass,
    )?;
    let outcome = backend::start(&prepared.layout, exec, (report_r, report_w))?;
    drop(ruleset);
    match outcome {
        backend::Outcome::Running { pid, pidfd } => Ok((pid, pidfd)),
        backend::Outcome::Failed { step, errno } => {
            let program = req.program.to_string_lossy().into_owned();
            let exec_step = plan.steps.len() as u32 + backend::child::extra::EXEC;
            if step == exec_step && errno == libc::ENOENT {
                return Err(SpawnError::NotFound { program }.into());
            }
            Err(SpawnError::Setup {
                step: backend::describe_step(plan, step, Some(req.cwd), &program),
                errno,
            }
            .into())
        }
    }
}

/// `SIGKILL` through the pidfd, which cannot name a recycled pid.
pub(super) fn kill(_pid: libc::pid_t, pidfd: &Handle) -> io::Result<()> {
    stockade_sys::linux::pidfd_send_signal(pidfd.as_raw_fd(), libc::SIGKILL)
        .map_err(|e| io::Error::from_raw_os_error(e.0))
}

impl Sandbox {
    /// What the Landlock ruleset enforces (ABI, handled rights, scopes), when the current
    /// layer has one.
    ///
    /// # Platform
    ///
    /// Linux only: Landlock is a Linux security module.
    pub fn landlock_status(&self) -> Option<landlock::Status> {
        self.current()
            .prepared
            .landlock
            .as_ref()
            .map(|(_, s)| s.clone())
    }
}

impl Child {
    /// A pidfd for the program: pollable for exit, usable with `pidfd_send_signal`.
    ///
    /// # Platform
    ///
    /// Linux only (pidfds are a Linux interface).
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.handle.as_fd()
    }
}

/// The seccomp program, the Landlock spec (and what it enforces here) and the rules for
/// the child's own mounts.
fn build_walls(
    policy: &Policy,
    plan: &Plan,
) -> Result<(Walls, landlock::RulesetSpec, landlock::Status), Error> {
    let filter = seccomp::build(&seccomp::FilterOptions::for_policy(
        policy,
        plan.namespaces.net,
    ))?;
    let full = plan.layer == Layer::Full;
    let mut spec = landlock::RulesetSpec::new(plan.workspace.clone());
    for (path, access) in plan.roots.iter().skip(1) {
        let grant = match access {
            Access::ReadOnly => landlock::Grant::ReadExec,
            Access::ReadWrite => landlock::Grant::ReadWrite,
        };
        spec = spec.with(path, grant);
    }
    for dev in landlock::DEV_FILES {
        // In the full layer /dev/ptmx and /dev/pts are the child's own devpts (below).
        if full && (dev.ends_with("ptmx") || dev.ends_with("pts")) {
            continue;
        }
        spec = spec.with(*dev, landlock::Grant::Device);
    }
    if !full {
        spec = spec.with("/proc", landlock::Grant::Read);
    }
    spec.deny_tcp = !full && policy.network == crate::Network::None;
    let probe = landlock::build(&spec)?;
    let mut child_rules = Vec::new();
    if full {
        for (path, grant) in [
            (c"/", landlock::Grant::ListDir),
            (c"/tmp", landlock::Grant::ReadWrite),
            (c"/dev/shm", landlock::Grant::ReadWrite),
            (c"/dev/pts", landlock::Grant::Device),
            (c"/proc", landlock::Grant::Read),
        ] {
            let bits = probe.access_bits(grant, true);
            if bits != 0 {
                child_rules.push((path.to_owned(), bits));
            }
        }
    }
    let (_, status) = probe.into_parts();
    Ok((
        Walls {
            filter,
            child_rules,
        },
        spec,
        status,
    ))
}
