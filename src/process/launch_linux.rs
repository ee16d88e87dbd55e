//! Linux: the plan replayed by a child of stockade's own `clone` ([`super::clone`],
//! [`crate::backend::linux`]).
//!
//! This module and `launch_fork` offer the same items (`Prepared`, `Handle`,
//! `pipe_cloexec`, `start`, `kill`); `process/mod.rs` picks one with `#[cfg]` on
//! its `mod` and `use` lines and is otherwise the same on every Unix.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use super::{Child, Request, Sandbox, StartError};
use crate::backend::linux::{
    self as backend, init, landlock,
    prepare::{self, Exec, ExecSpec, Layout, Walls},
    seccomp,
};
use crate::backend::report;
use crate::error::{Errno, Error, SpawnError};
use crate::plan::{FilterOptions, LandlockRules, Plan, Step};
use crate::policy::Layer;

/// A running sandbox's handle besides its pid: a pidfd of its init (or of the program, in
/// passthrough) and the init's status pipe.
pub(super) type Handle = backend::init::Handle;

/// A command's copy-on-write layers over `.git` (full layer).
pub(super) use super::gitlayer::merge::Session as GitSession;

/// What every command of one sandbox shares: the prepared layout and, when the plan has
/// Landlock, what the ruleset enforces here (each command builds its own ruleset from the
/// plan's rules: the child adds rules to it).
#[derive(Debug)]
pub(super) struct Prepared {
    layout: Arc<Layout>,
    landlock: Option<landlock::Status>,
}

impl Prepared {
    /// Compiles the plan's walls (seccomp, Landlock) and prepares its layout.
    pub(super) fn new(plan: Plan) -> Result<Prepared, Error> {
        let (walls, landlock) = match (&plan.walls.seccomp, &plan.walls.landlock) {
            (Some(options), Some(rules)) => {
                // Layer 2 in overlay mode: the snapshot, the workspace's grant, is made at
                // the first run; until then the probe learns the same from the workspace
                // it is copied from.
                let snapshot_source = plan.steps.iter().find_map(|s| match s {
                    crate::plan::Step::Snapshot { workspace, .. } => Some(workspace),
                    _ => None,
                });
                let probe_rules;
                let rules = match snapshot_source {
                    Some(ws) if !rules.spec.workspace.exists() => {
                        let mut r = rules.clone();
                        r.spec.workspace = ws.clone();
                        probe_rules = r;
                        &probe_rules
                    }
                    _ => rules,
                };
                let (walls, status) = compile_walls(options, rules)?;
                (Some(walls), Some(status))
            }
            _ => (None, None),
        };
        if plan.layer == Layer::Landlock
            && !landlock
                .as_ref()
                .is_some_and(landlock::Status::signals_scoped)
        {
            warn_leftovers_survive();
        }
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
/// opens it in a detached read-only copy of the mounts of `/dev` ([`dev_tree`]), where
/// those calls fail with `EROFS` and reading and writing the device go on. A host without
/// `CAP_SYS_ADMIN` cannot make the copy and opens the node plainly (`SECURITY.md`); any
/// other host cannot change a root-owned node anyway.
///
/// The copy is of the directory, not of the node: an `O_PATH` fd of a copied node could
/// only be reopened through `/proc/self/fd`, which a minimal image does not have, while
/// `null` is opened beneath the copied directory with `openat2`, `/proc` or not.
///
/// # Errors
///
/// [`SpawnError::Path`] naming the path opened (`/dev/null`, in the copy for a root
/// host). A `/dev/null` that is a symbolic link is not followed out of the copy
/// (`ELOOP`), and the node is not opened plainly instead, which would hand a root program
/// the host's node.
pub(super) fn open_null(write: bool) -> Result<OwnedFd, SpawnError> {
    let path = std::path::PathBuf::from("/dev/null");
    let Some(dev) = dev_tree() else {
        return std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .open(&path)
            .map(OwnedFd::from)
            .map_err(|e| SpawnError::Path {
                what: "set up stdio: open",
                path,
                errno: crate::error::errno_of(&e),
                note: None,
            });
    };
    let access = if write {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    };
    // Beneath the copy, and no symlink, so the file opened is on the read-only copy.
    let how = stockade_sys::linux::open_how(
        (access | libc::O_CLOEXEC | libc::O_NOCTTY) as u64,
        0,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    );
    stockade_sys::linux::openat2(dev.as_fd().into(), c"null", &how)
        .map(OwnedFd::from)
        .map_err(|e| SpawnError::Path {
            what: "set up stdio: open, in the read-only copy of /dev,",
            path,
            errno: crate::error::Errno::from_raw(e.raw()),
            note: None,
        })
}

/// For a root host: a directory fd of a detached read-only copy of `/dev` and the mounts
/// under it (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`, `mount_setattr(MOUNT_ATTR_RDONLY)`;
/// recursive, since `/dev/null` itself may be a bind mount, as container runtimes make
/// it), made once per process and kept, so that each null stdio costs one `openat2`.
/// `None` for other hosts, or when the copy cannot be made (with a `tracing` warning).
fn dev_tree() -> Option<&'static OwnedFd> {
    use stockade_sys::linux as sys;
    static TREE: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    TREE.get_or_init(|| {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let copy = || -> Result<OwnedFd, stockade_sys::Errno> {
            let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as u32;
            let tree = sys::open_tree(sys::CWD, c"/dev", flags)?;
            let at = (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as u32;
            sys::mount_setattr(tree.as_fd(), c"", at, libc::MOUNT_ATTR_RDONLY, 0, 0)?;
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

/// Layer 2 ends what a program left running (a daemon it detached, `setsid`, a double
/// fork) through the init's list of children, `/proc/thread-self/children`, or, when that
/// cannot be read, with a `kill(-1)` confined by Landlock's signal scope (ABI 6). When the
/// scope is missing too, such processes outlive the run (still under the sandbox's
/// walls): say so, once per process.
fn warn_leftovers_survive() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if std::fs::File::open("/proc/thread-self/children").is_ok() {
        return;
    }
    WARNED.call_once(|| {
        tracing::warn!(
            "stockade: layer 2 cannot end what a program leaves running: \
             /proc/thread-self/children is not readable (no /proc, or a kernel without \
             CONFIG_PROC_CHILDREN) and Landlock does not scope signals (ABI < 6)"
        );
    });
}

/// A close-on-exec pipe, atomically (`pipe2`).
pub(super) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// A close-on-exec duplicate of `fd` numbered 3 or above, as std's `try_clone_to_owned`
/// makes it (`F_DUPFD_CLOEXEC` from 3), in one system call: musl's `fcntl` follows that
/// command with an `F_SETFD` for kernels older than 2.6.24.
pub(in crate::process) fn dup_cloexec(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    stockade_sys::linux::fcntl_dupfd_cloexec(fd.into(), 3)
        .map(OwnedFd::from)
        .map_err(|e| io::Error::from_raw_os_error(e.0))
}

/// Clones the child for `req` and waits until it has exec'd or failed.
///
/// A failure that means the host refuses the layer (namespaces, a fresh `/proc`) comes
/// back as [`StartError::Refused`], so that the caller can fall back.
pub(super) fn start(
    prepared: &Prepared,
    mut req: Request<'_>,
) -> Result<(libc::pid_t, Handle), StartError> {
    reap_earlier(false);
    let plan = &prepared.layout.plan;
    let ruleset = command_ruleset(plan, &req)?;
    let tmp_parent = req.private_tmp_parent;
    let landlock_fd = ruleset.as_ref().map_or(-1, landlock::Prepared::raw_fd);
    let (report_r, report_w) = backend::report_pipe()?;
    let scoped = prepared
        .landlock
        .as_ref()
        .is_some_and(landlock::Status::signals_scoped);
    let init_flags = init::flags(plan, scoped, req.controlling_terminal);
    let status_pipe = init_flags.map(|_| init::status_pipe()).transpose()?;
    // A `/dev` of the sandbox's own hides the host's name of the program's terminal; a
    // pseudo-terminal of the sandbox's own devpts has its own name there.
    let console = console(&req)
        .filter(|_| req.pty.is_none() && plan.steps.iter().any(|s| matches!(s, Step::Dev { .. })));
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
    if let (Some(flags), Some((_, status_w))) = (init_flags, &status_pipe) {
        exec.set_init(init_launch(plan, report_w.as_raw_fd(), status_w, flags)?);
        if req.serve {
            if let Some(init) = exec.init.as_mut() {
                init.serve();
            }
            exec.hide_pids = true;
            // Its commands share the sandbox's PID and IPC namespaces, as a program on
            // layer 2 shares the host's: the calls that reach another process's limits,
            // scheduling or SysV IPC objects name the caller alone (the same filter as
            // layer 2's, on the full layer too).
            if let Some(options) = &plan.walls.seccomp {
                let options = FilterOptions {
                    host_namespaces: true,
                    ..*options
                };
                exec.session_filter = Some(seccomp::build(&options)?);
            }
        }
    }
    let (mounts, socket) = req.git.mounts()?;
    exec.set_git(mounts, socket);
    exec.set_trees(prepared.layout.trees().map_err(|source| SpawnError::Os {
        call: "open_tree and mount_setattr (an idmapped bind)",
        source,
    })?);
    exec.console = console;
    if let Some(pty) = req.pty.take() {
        exec.set_pty(pty);
    }
    exec.cgroup = req.cgroup;
    if req.egress_socket >= 0 {
        exec.set_egress_socket(req.egress_socket);
    }
    if req.overlay_socket >= 0 {
        exec.set_overlay_socket(req.overlay_socket);
    }
    if let Some((filter, socket, landlock_log)) = req.explain.take() {
        exec.set_explain(prepare::ExplainFilter {
            filter,
            socket,
            landlock_log,
        });
    }
    let outcome = clone_and_await(&prepared.layout, exec, (report_r, report_w), tmp_parent)?;
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
            let ctty = req.controlling_terminal.unwrap_or(-1);
            Err(setup_failure(
                plan,
                (req.program, req.cwd, ctty),
                step,
                errno,
            ))
        }
    }
}

/// The command's own Landlock ruleset, from the plan's rules
/// ([`LandlockRules::for_command`]): its private `TMPDIR` and, where the plan says so, its
/// terminals.
fn command_ruleset(
    plan: &Plan,
    req: &Request<'_>,
) -> Result<Option<landlock::Prepared>, StartError> {
    let Some(rules) = &plan.walls.landlock else {
        return Ok(None);
    };
    let terminals = if rules.own_terminals {
        // The slots of a pseudo-terminal from the sandbox's devpts hold no host terminal
        // (the child grants its own devpts), nor do the pipes and null devices the spawn
        // made ([`super::Stdio::makes_no_terminal`]).
        let inside = req.pty.as_ref().map_or([false; 3], |p| p.slots);
        let skip = [0, 1, 2].map(|i| inside[i] || req.not_terminals[i]);
        own_terminals(req.stdio, skip)
    } else {
        Vec::new()
    };
    let mut spec = rules.for_command(req.private_tmp, &terminals);
    // Layer 2's `network = "allow"`: TCP to the egress proxy's ports on the host's
    // loopback, nothing else.
    spec.connect_tcp.clone_from(&req.egress_ports);
    Ok(Some(landlock::build(&spec).map_err(Error::from)?))
}

/// A pseudo-terminal that the setup child opens from the sandbox's own devpts
/// ([`prepare::InsidePty`]): the socket pair its master comes back through.
pub(super) struct InsidePty {
    parent: OwnedFd,
    child: OwnedFd,
    slots: [bool; 3],
    size: libc::winsize,
    modes: Option<libc::termios2>,
}

impl InsidePty {
    /// A new socket pair for `req`.
    pub(super) fn new(req: &super::command::PtyRequest) -> Result<InsidePty, Error> {
        let (parent, child) = backend::fd_channel("socketpair for the pseudo-terminal")?;
        Ok(InsidePty {
            parent,
            child,
            slots: req.slots,
            size: req.size,
            modes: req.modes,
        })
    }

    /// What the child needs (its end of the pair stays open here until the spawn is over).
    pub(super) fn child(&self) -> prepare::InsidePty {
        prepare::InsidePty {
            socket: self.child.as_raw_fd(),
            slots: self.slots,
            size: self.size,
            modes: self.modes,
        }
    }

    /// After a successful spawn: the master the child sent before it exec'd.
    pub(super) fn receive(self) -> io::Result<OwnedFd> {
        drop(self.child);
        backend::recv_fds(&self.parent)?
            .into_iter()
            .find_map(|(tag, fd)| (tag == 0).then_some(fd))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMSG))
    }
}

/// The program's terminal, to be bound onto `/dev/console` inside: the source fd of the
/// stdio slot the command's terminal is on (or the host's own fd there).
fn console(req: &Request<'_>) -> Option<backend::prepare::Console> {
    req.terminal
        .and_then(|i| {
            req.stdio
                .get(i as usize)
                .map(|&fd| if fd < 0 { i } else { fd })
        })
        .and_then(backend::prepare::Console::of)
}

/// How the setup child execs the sandbox's init, which forks the program's process.
fn init_launch(
    plan: &Plan,
    report_w: std::os::fd::RawFd,
    status_w: &OwnedFd,
    flags: u32,
) -> Result<init::Launch, StartError> {
    let base = plan.steps.len() as u32;
    Ok(init::Launch::new(
        init::image_fd()?,
        report_w,
        status_w.as_raw_fd(),
        flags,
        init::Steps {
            init: base + backend::child::extra::INIT,
            exec: base + backend::child::extra::EXEC,
        },
    ))
}

/// [`backend::start`], with a refused namespace `clone` told apart as a refusal.
fn clone_and_await(
    layout: &Arc<Layout>,
    exec: Exec,
    report: (OwnedFd, OwnedFd),
    tmp_parent: Option<&std::path::Path>,
) -> Result<backend::Outcome, StartError> {
    match backend::start(layout, exec, report, tmp_parent) {
        Err(SpawnError::Os {
            call: "clone",
            source,
        }) => Err(
            match backend::clone_refusal(layout.plan.namespaces, &source) {
                Some(r) => StartError::Refused(r),
                None => SpawnError::Os {
                    call: "clone",
                    source,
                }
                .into(),
            },
        ),
        other => Ok(other?),
    }
}

/// The error for step `step` failing with `errno` in the child of `command` (program,
/// working directory, controlling terminal's fd or -1): a refusal of the layer, the
/// program not found, or the step and its errno.
fn setup_failure(
    plan: &Plan,
    (program, cwd, ctty): (&std::ffi::OsStr, &std::path::Path, i32),
    step: u32,
    errno: i32,
) -> StartError {
    let refused = plan.steps.get(step as usize);
    if let Some(r) = refused.and_then(|s| backend::step_refusal(s, errno)) {
        return StartError::Refused(r);
    }
    if let Some(Step::HideName { path }) = refused {
        if let Some(e) = crate::error::denied::refusal(path, errno) {
            return Error::from(e).into();
        }
    }
    let program = program.to_string_lossy().into_owned();
    let exec_step = plan.steps.len() as u32 + backend::child::extra::EXEC;
    if step == exec_step && errno == libc::ENOENT {
        return Error::from(SpawnError::NotFound { program }).into();
    }
    Error::from(SpawnError::Setup {
        step: report::describe_step(plan, step, Some(cwd), &program, ctty),
        errno: Errno::from_raw(errno),
    })
    .into()
}

/// The `/dev/pts/N` terminals among the program's stdio (a source fd, or the host's own
/// 0, 1, 2 where it inherits them).
/// The `skip` slots are left out.
fn own_terminals(stdio: [std::os::fd::RawFd; 3], skip: [bool; 3]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for (i, fd) in stdio.into_iter().enumerate() {
        if skip.get(i).copied().unwrap_or(false) {
            continue;
        }
        let fd = if fd < 0 { i as i32 } else { fd };
        // An `fstat` first: a pipe, file or socket is no terminal, and the `readlink`
        // through procfs costs some ten times as much.
        if !is_pty_slave(fd) {
            continue;
        }
        if let Ok(p) = std::fs::read_link(format!("/proc/self/fd/{fd}")) {
            if p.starts_with("/dev/pts/") && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Whether `fd` is a pseudo-terminal's slave side (a character device of the major
/// numbers the kernel gives them, 136 to 143).
fn is_pty_slave(fd: std::os::fd::RawFd) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a writable place for one `struct stat`; any fd number is allowed (a
    // closed one gives EBADF), and nothing else is touched.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: fstat succeeded, so it filled in `st`.
    let st = unsafe { st.assume_init() };
    st.st_mode & libc::S_IFMT == libc::S_IFCHR && (136..=143).contains(&libc::major(st.st_rdev))
}

/// A pidfd of the sandbox's first process (its init, or the program in passthrough) for
/// the egress proxy's run, which ends when it is readable.
pub(super) fn until_fd(handle: &Handle) -> Option<OwnedFd> {
    dup_cloexec(handle.as_fd()).ok()
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

/// The program's exit status from the init's status record, without waiting for the
/// init's own end ([`Handle::early_status`]); the init is then reaped later
/// ([`super::reap`]). `None`: not yet (without `block`), or no record will come.
pub(super) fn early_status(
    handle: &mut Handle,
    block: bool,
    rusage: &super::limits::RusageSlot,
) -> Option<std::process::ExitStatus> {
    let status = handle.early_status(block)?;
    match dup_cloexec(handle.as_fd()) {
        Ok(pidfd) => super::reap::later(pidfd, Arc::clone(rusage)),
        // Without a second pidfd, wait for the init here, as before the record existed.
        Err(_) => {
            super::reap::reap_into(handle.as_fd(), rusage, true);
        }
    }
    Some(status)
}

/// Reaps the init of `handle` once it has exited, its `rusage` into `slot`, unless the
/// reaper of inits waited for ([`super::reap`]) has done so.
pub(super) fn reap_now(handle: &Handle, slot: &super::limits::RusageSlot) {
    if slot.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
        return;
    }
    super::reap::reap_into(handle.as_fd(), slot, true);
}

/// How the watchdog ends this sandbox when its wall time is up: the init's own kill,
/// through a pidfd of its own (which names no other process, ever). In passthrough
/// (`program`: the program leads its own group there) its process group first, as
/// [`Child::kill`] does, under the lock that the wait takes to reap the program: while
/// the lock shows it unreaped, its pid is its group's id and no other's
/// ([`ProgramProcess::kill_group`]).
pub(super) fn ender(
    pid: libc::pid_t,
    handle: &Handle,
    reaped: Arc<std::sync::Mutex<bool>>,
    program: &ProgramProcess,
) -> io::Result<impl FnOnce() + Send + 'static> {
    let killer = handle.killer()?;
    let group = program.passthrough && program.leads_group;
    Ok(move || {
        if group {
            let reaped = reaped.lock().unwrap_or_else(|e| e.into_inner());
            if !*reaped {
                let _ = stockade_sys::linux::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = killer.kill();
    })
}

/// Blocks until the sandbox of `handle` is gone: its init (or, in passthrough, the
/// program) has exited. False when that cannot be awaited.
pub(super) fn wait_gone(handle: &Handle) -> bool {
    init::wait_exited(handle.as_fd())
}

/// Reaps the inits of earlier commands that have exited since ([`super::reap`]); with
/// `block`, waits for them.
pub(super) fn reap_earlier(block: bool) {
    super::reap::reap(block);
    // And a root host's idmap child, killed at its first `Sandbox::new` and not waited
    // for there ([`crate::probe::idmap`]).
    crate::probe::idmap::reap_holder(block);
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
        self.current().prepared.landlock.clone()
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

    /// An fd that becomes readable when [`Child::try_wait`] has news: the init's status
    /// pipe while it may still carry the program's status (which the init writes before its
    /// own exit, see [`Child::wait`]), else [`Child::pidfd`]. For event loops (`poll`,
    /// `epoll`): after a `try_wait` that returned `None`, ask again, since the fd may have
    /// changed (a pipe that ended without a status stays readable).
    ///
    /// # Platform
    ///
    /// Linux only.
    pub fn wait_fd(&self) -> BorrowedFd<'_> {
        self.handle
            .status_fd()
            .unwrap_or_else(|| self.handle.as_fd())
    }
}

/// Compiles the plan's walls: the seccomp program, and the Landlock ruleset's status (what
/// it enforces here, without making one: each command builds its own) for the access bits
/// of the rules the child adds for its own mounts.
fn compile_walls(
    options: &FilterOptions,
    rules: &LandlockRules,
) -> Result<(Walls, landlock::Status), Error> {
    let filter = seccomp::build(options)?;
    let status = landlock::status(&rules.spec)?;
    let mut child_rules = Vec::new();
    for (path, grant) in &rules.child_rules {
        // Every child rule names a directory the child mounted, but a device node bound
        // into its `/dev` (a rule per node when a policy path lies under `/dev`): the
        // kernel refuses directory rights on a file.
        let node = crate::plan::DEV_NODES
            .iter()
            .any(|n| path == std::path::Path::new(n.path));
        let bits = status.access_bits(*grant, !node);
        if bits != 0 {
            child_rules.push((prepare::cstr(path)?, bits));
        }
    }
    Ok((
        Walls {
            filter,
            child_rules,
        },
        status,
    ))
}

/// The program's own process as the host sees it ([`Child::program_id`]), found once
/// right after the spawn.
#[derive(Debug)]
pub(super) struct ProgramProcess {
    /// Its pid in the host's PID namespace.
    pid: Option<libc::pid_t>,
    /// A pidfd of it: names that process, and its process group, even after the number
    /// is reused.
    pidfd: Option<OwnedFd>,
    /// It leads its own process group (the plan's `NewSession` step).
    leads_group: bool,
    /// No init: the program is the host's own child.
    passthrough: bool,
    /// A session's command: the host holds its supervisor, not a sandbox's init.
    session: bool,
}

impl ProgramProcess {
    /// The program of the sandbox whose first process is `pid` (`handle`): that process
    /// itself in passthrough, else the init's first child.
    ///
    /// The init's children are read from `/proc/<init>/task/<init>/children` (the setup
    /// child, whose thread became the init, cloned the program's process before its
    /// exec, and spawn returns after that exec). The kernel lists children oldest first,
    /// and orphans the init adopts later come after: the first entry is the program. It
    /// is checked again after `pidfd_open`, so that a program that ended and was reaped
    /// in between (its number free for reuse) is not taken for another process.
    pub(super) fn find(
        pid: libc::pid_t,
        handle: &Handle,
        passthrough: bool,
        leads_group: bool,
    ) -> ProgramProcess {
        if passthrough {
            return ProgramProcess {
                pid: Some(pid),
                pidfd: dup_cloexec(handle.as_fd()).ok(),
                leads_group,
                passthrough,
                session: false,
            };
        }
        // The first entry is all that is needed: one read (an orphan's entry cut at the
        // buffer's end comes after it).
        let first_child = || {
            let list =
                crate::probe::read_first(format!("/proc/{pid}/task/{pid}/children"), 64).ok()?;
            let first = list.split(|b| *b == b' ').next()?;
            std::str::from_utf8(first).ok()?.parse::<libc::pid_t>().ok()
        };
        let found = first_child().and_then(|child| {
            let fd = stockade_sys::linux::pidfd_open(child, 0).ok()?;
            (first_child() == Some(child)).then(|| (child, OwnedFd::from(fd)))
        });
        ProgramProcess {
            pid: found.as_ref().map(|(p, _)| *p),
            pidfd: found.map(|(_, fd)| fd),
            leads_group,
            passthrough,
            session: false,
        }
    }

    /// A program whose process the host does not know (a session's command).
    pub(super) fn unknown(leads_group: bool) -> ProgramProcess {
        ProgramProcess {
            pid: None,
            pidfd: None,
            leads_group,
            passthrough: false,
            session: true,
        }
    }

    /// Whether this is a session's command.
    pub(super) fn in_session(&self) -> bool {
        self.session
    }

    /// Its pid in the host's PID namespace, when it was found.
    pub(super) fn id(&self) -> Option<u32> {
        self.pid.map(|p| p as u32)
    }

    /// Sends `sig` to the program's process group (to the program alone when it does not
    /// lead one), from the host.
    ///
    /// Through the program's pidfd with `PIDFD_SIGNAL_PROCESS_GROUP` (Linux 6.9): the
    /// pidfd holds the group's `struct pid`, so the signal cannot reach a group of a
    /// reused number. Older kernels: `kill(-pid)` once a poll of the pidfd has shown the
    /// program still running; a program that ends, is reaped by the init and has its pid
    /// reused by a new group leader between the poll and the `kill` would be missed for
    /// that group, a window of a few instructions.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::Unsupported`] when the program's process was not found at the
    /// spawn (no `/proc`); the error of `pidfd_send_signal` or `kill`. None when the
    /// group has ended.
    pub(super) fn signal_group(&self, sig: libc::c_int) -> io::Result<()> {
        use stockade_sys::linux as sys;
        let (Some(pid), Some(pidfd)) = (self.pid, &self.pidfd) else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the program's process was not found at the spawn (is /proc mounted?)",
            ));
        };
        let flags = if self.leads_group {
            sys::PIDFD_SIGNAL_PROCESS_GROUP
        } else {
            0
        };
        let r = match sys::pidfd_send_signal_flags(pidfd.as_fd().into(), sig, flags) {
            Err(stockade_sys::Errno(libc::EINVAL)) if flags != 0 => {
                if init::exited(pidfd.as_fd()) {
                    return Ok(());
                }
                sys::kill(-pid, sig)
            }
            r => r,
        };
        match r {
            Ok(()) | Err(stockade_sys::Errno(libc::ESRCH)) => Ok(()),
            Err(e) => Err(io::Error::from_raw_os_error(e.0)),
        }
    }

    /// Ends the program's process group in passthrough, where nothing else contains what
    /// the program started (elsewhere the init does, and this does nothing). `pid` is the
    /// host's own child, the program.
    ///
    /// Why `kill(-pid)` cannot reach another group: the caller has not reaped the
    /// program (its `Child` holds no status, and only the `Child`'s own wait, which needs
    /// `&mut`, reaps it in passthrough). An unreaped process, even a zombie, keeps its
    /// `struct pid` attached as the pid and group id of that process (the kernel detaches
    /// it in `release_task`, at the reap), so the number `pid` names this group and no
    /// new process can be given it. The group is this program's from its `setsid` before
    /// its exec, so that the signal reaches the program and every descendant that stayed
    /// in its group, and only them.
    pub(super) fn kill_group(&self, pid: libc::pid_t) -> io::Result<()> {
        if !(self.passthrough && self.leads_group) {
            return Ok(());
        }
        match stockade_sys::linux::kill(-pid, libc::SIGKILL) {
            Ok(()) | Err(stockade_sys::Errno(libc::ESRCH)) => Ok(()),
            Err(e) => Err(io::Error::from_raw_os_error(e.0)),
        }
    }
}

/// Waits until [`Child::wait_fd`] is readable or `timeout` has passed: news for
/// `try_wait`, or none yet.
pub(super) fn await_news(handle: &Handle, timeout: std::time::Duration) -> io::Result<()> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let fd = handle.status_fd().unwrap_or_else(|| handle.as_fd());
    let ms = timeout.as_millis().saturating_add(1).min(i32::MAX as u128) as i32;
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match poll(
        &mut fds,
        PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
    ) {
        Ok(_) | Err(nix::Error::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Reaps the sandbox's first process later ([`super::reap`]), for a `Child` dropped after
/// its kill: its pidfd names it even once reaped by someone else.
pub(super) fn reap_later(_pid: libc::pid_t, handle: &Handle, rusage: &super::limits::RusageSlot) {
    if let Ok(pidfd) = dup_cloexec(handle.as_fd()) {
        super::reap::later(pidfd, Arc::clone(rusage));
    }
}
