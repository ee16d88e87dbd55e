//! Linux: the plan replayed by a child of stockade's own `clone` ([`super::clone`],
//! [`crate::backend::linux`]).
//!
//! This module and `launch_fork` offer the same items (`check`, `plan`, `Prepared`,
//! `Handle`, `pipe_cloexec`, `start`, `kill`); `spawn/mod.rs` picks one with `#[cfg]` on
//! its `mod` and `use` lines and is otherwise the same on every Unix.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use super::{Child, Request, Sandbox, StartError};
use crate::backend::linux::{
    self as backend, init, landlock,
    prepare::{Exec, ExecSpec, Layout, Walls},
    seccomp,
};
use crate::backend::report;
use crate::error::{Error, PlanError, SpawnError};
use crate::plan::{Access, Ids, Plan, RealFs, Step};
use crate::policy::{Layer, Policy};

/// A running sandbox's handle besides its pid: a pidfd of its init (or of the program, in
/// passthrough) and the init's status pipe.
pub(super) type Handle = backend::init::Handle;

/// A command's copy-on-write layers over `.git` (full layer).
pub(super) use super::gitlayer::merge::Session as GitSession;

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

/// `/dev/null` for the program's stdio ([`super::Stdio::null`]), close-on-exec.
///
/// The node is the host's, and when the host runs as root the program's uid owns it
/// (the full layer maps the caller's uid; layer 2 keeps it): through a plain fd the
/// program could `fchmod` or `futimens` the host's `/dev/null`. A root host therefore
/// opens it through a detached read-only copy of its mount ([`null_tree`]), where those
/// calls fail with `EROFS` and reading and writing the device go on. A host without
/// `CAP_SYS_ADMIN` cannot make the copy and opens the node plainly (`SECURITY.md`); any
/// other host cannot change a root-owned node anyway.
pub(super) fn open_null(write: bool) -> io::Result<OwnedFd> {
    let path = match null_tree() {
        // Reopening through the fd's magic link keeps its mount: the read-only copy.
        Some(tree) => format!("/proc/self/fd/{}", tree.as_raw_fd()),
        None => "/dev/null".to_string(),
    };
    Ok(std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .open(path)?
        .into())
}

/// For a root host: an `O_PATH` fd of `/dev/null` on a detached read-only copy of its
/// mount (`open_tree(OPEN_TREE_CLONE)`, `mount_setattr(MOUNT_ATTR_RDONLY)`), made once per
/// process (some 25 µs) and kept, so that each null stdio costs one `open`. `None` for
/// other hosts, or when the copy cannot be made (with a `tracing` warning).
fn null_tree() -> Option<&'static OwnedFd> {
    use stockade_sys::linux as sys;
    static TREE: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    TREE.get_or_init(|| {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let copy = || -> Result<OwnedFd, stockade_sys::Errno> {
            let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC;
            let tree = sys::open_tree(sys::CWD, c"/dev/null", flags)?;
            let empty = libc::AT_EMPTY_PATH as u32;
            sys::mount_setattr(tree.as_fd(), c"", empty, libc::MOUNT_ATTR_RDONLY, 0, 0)?;
            Ok(tree.into())
        };
        copy()
            .inspect_err(|e| {
                tracing::warn!(
                    "stockade: /dev/null for stdio: no read-only copy of its mount ({}); a \
                     program given Stdio::null() can change the host's /dev/null",
                    crate::error::errno_name(e.0).unwrap_or("?")
                )
            })
            .ok()
    })
    .as_ref()
}

/// A close-on-exec pipe, atomically (`pipe2`).
pub(super) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// Clones the child for `req` and waits until it has exec'd or failed.
///
/// A failure that means the host refuses the layer (namespaces, a fresh `/proc`) comes
/// back as [`StartError::Refused`], so that the caller can fall back.
pub(super) fn start(
    prepared: &Prepared,
    req: Request<'_>,
) -> Result<(libc::pid_t, Handle), StartError> {
    let plan = &prepared.layout.plan;
    // A ruleset of its own per command: the child adds rules for the mounts it makes.
    let ruleset = match &prepared.landlock {
        Some((spec, _)) => {
            let mut spec = spec.clone();
            if let Some(dir) = req.private_tmp {
                spec = spec.with(dir, landlock::Grant::ReadWrite);
            }
            // Without a devpts of its own, the program gets its own terminal and no other
            // of the caller's ptys. (On the full layer the host's devpts is not there, and
            // the grant is for the terminal bound onto `/dev/console`, the same inode.)
            for tty in own_terminals(req.stdio) {
                spec = spec.with(tty, landlock::Grant::Device);
            }
            Some(landlock::build(&spec)?)
        }
        None => None,
    };
    let landlock_fd = ruleset.as_ref().map_or(-1, landlock::Prepared::raw_fd);
    let (report_r, report_w) = backend::report_pipe()?;
    let scoped = prepared
        .landlock
        .as_ref()
        .is_some_and(|(_, status)| status.signals_scoped());
    let init_flags = init::flags(plan, scoped, req.controlling_terminal);
    let status_pipe = init_flags.map(|_| init::status_pipe()).transpose()?;
    let spec = ExecSpec {
        program: req.program,
        args: req.args,
        env: req.env,
        path: &plan.path,
        cwd: Some(req.cwd.to_path_buf()),
        // With an init the program's process takes the terminal (after its own setsid);
        // without one (passthrough) the setup child, which becomes the program.
        controlling_terminal: req.controlling_terminal.filter(|_| init_flags.is_none()),
    };
    let mut exec = Exec::new(
        spec,
        req.stdio,
        (report_w.as_raw_fd(), report_r.as_raw_fd()),
        landlock_fd,
        req.pass,
    )?;
    let base = plan.steps.len() as u32;
    let exec_step = base + backend::child::extra::EXEC;
    if let (Some(flags), Some((_, status_w))) = (init_flags, &status_pipe) {
        let launch = init::Launch::new(
            &exec.program,
            init::image_fd()?,
            report_w.as_raw_fd(),
            status_w.as_raw_fd(),
            flags,
            init::Steps {
                init: base + backend::child::extra::INIT,
                exec: exec_step,
            },
        );
        exec.set_init(launch);
    }
    let (mounts, socket) = req.git.mounts()?;
    exec.set_git(mounts, socket);
    exec.set_trees(prepared.layout.trees().map_err(|source| SpawnError::Os {
        call: "open_tree",
        source,
    })?);
    // A `/dev` of the sandbox's own hides the host's name of the program's terminal.
    if plan.steps.contains(&Step::Dev) {
        exec.console = req
            .terminal
            .and_then(|i| {
                req.stdio
                    .get(i as usize)
                    .map(|&fd| if fd < 0 { i } else { fd })
            })
            .and_then(backend::prepare::Console::of);
    }
    let outcome = match backend::start(&prepared.layout, exec, (report_r, report_w)) {
        Err(SpawnError::Os {
            call: "clone",
            source,
        }) => {
            return Err(match backend::clone_refusal(plan.namespaces, &source) {
                Some(r) => StartError::Refused(r),
                None => SpawnError::Os {
                    call: "clone",
                    source,
                }
                .into(),
            });
        }
        other => other?,
    };
    drop(ruleset);
    // The init holds the status pipe's write end now; the parent keeps the read end only.
    let status_r = status_pipe.map(|(r, _)| r);
    match outcome {
        backend::Outcome::Running { pid, pidfd } => {
            Ok((pid, init::Handle::new(pidfd, status_r, init_flags)))
        }
        backend::Outcome::Died(status) => {
            Err(Error::from(SpawnError::DiedBeforeExec { status }).into())
        }
        backend::Outcome::Failed { step, errno } => {
            let refused = plan.steps.get(step as usize);
            if let Some(r) = refused.and_then(|s| backend::step_refusal(s, errno)) {
                return Err(StartError::Refused(r));
            }
            let program = req.program.to_string_lossy().into_owned();
            if step == exec_step && errno == libc::ENOENT {
                return Err(Error::from(SpawnError::NotFound { program }).into());
            }
            Err(Error::from(SpawnError::Setup {
                step: report::describe_step(
                    plan,
                    step,
                    Some(req.cwd),
                    &program,
                    req.controlling_terminal.unwrap_or(-1),
                ),
                errno,
            })
            .into())
        }
    }
}

/// The `/dev/pts/N` terminals among the program's stdio (a source fd, or the host's own
/// 0, 1, 2 where it inherits them).
fn own_terminals(stdio: [std::os::fd::RawFd; 3]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for (i, fd) in stdio.into_iter().enumerate() {
        let fd = if fd < 0 { i as i32 } else { fd };
        if let Ok(p) = std::fs::read_link(format!("/proc/self/fd/{fd}")) {
            if p.starts_with("/dev/pts/") && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Ends the sandbox through the pidfd, which cannot name a recycled pid: `SIGKILL` to a
/// PID namespace's init or to a program without init, the init's kill request on layer 2.
pub(super) fn kill(_pid: libc::pid_t, handle: &Handle) -> io::Result<()> {
    handle.kill()
}

/// Delivers `sig` (one of the forwarded signals) to the program, through its init.
pub(super) fn signal(_pid: libc::pid_t, handle: &Handle, sig: libc::c_int) -> io::Result<()> {
    handle.signal(sig)
}

/// The program's exit status, from the init's report when there is one.
pub(super) fn exit_status(handle: &Handle, raw: libc::c_int) -> std::process::ExitStatus {
    handle.exit_status(raw)
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
    /// A pidfd for the sandbox's first process: its init (or the program itself in
    /// passthrough). Pollable for the end of the sandbox; a signal sent to it with
    /// `pidfd_send_signal` reaches the init, which forwards the signals of
    /// [`Child::signal`] to the program.
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
    let filter = seccomp::build(&seccomp::FilterOptions::for_policy(policy, plan.namespaces))?;
    let full = plan.layer == Layer::Full;
    let mut spec = landlock::RulesetSpec::new(plan.workspace.clone());
    for (path, access) in plan.roots.iter().skip(1) {
        let grant = match access {
            Access::ReadOnly => landlock::Grant::ReadExec,
            Access::ReadWrite => landlock::Grant::ReadWrite,
            Access::ListDir => landlock::Grant::ListDir,
        };
        spec = spec.with(path, grant);
    }
    for dev in landlock::DEV_FILES {
        // In the full layer /dev/ptmx and /dev/pts are the child's own devpts (below). In
        // layer 2 /dev/pts holds the caller's other terminals: only the program's own
        // are granted, per command (`own_terminals`).
        if dev.ends_with("pts") || (full && dev.ends_with("ptmx")) {
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
