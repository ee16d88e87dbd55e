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
/// opens it through a detached read-only copy of its mount ([`null_tree`]), where those
/// calls fail with `EROFS` and reading and writing the device go on. A host without
/// `CAP_SYS_ADMIN` cannot make the copy and opens the node plainly (`SECURITY.md`); any
/// other host cannot change a root-owned node anyway.
///
/// # Errors
///
/// [`SpawnError::Path`] naming the path opened: `/proc/self/fd/N` for the copy, with a
/// note when `/proc` is not mounted (a minimal image): the copy cannot be reopened then,
/// and the node is not opened plainly instead, which would hand a root program the host's
/// node.
pub(super) fn open_null(write: bool) -> Result<OwnedFd, SpawnError> {
    let open = |path: &std::path::Path| {
        std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .open(path)
            .map(OwnedFd::from)
            .map_err(|e| crate::error::errno_of(&e))
    };
    let Some(tree) = null_tree() else {
        let path = std::path::PathBuf::from("/dev/null");
        return open(&path).map_err(|errno| SpawnError::Path {
            what: "set up stdio: open",
            path,
            errno,
            note: None,
        });
    };
    // Reopening through the fd's magic link keeps its mount: the read-only copy.
    let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", tree.as_raw_fd()));
    open(&path).map_err(|errno| SpawnError::Path {
        what: "set up stdio: open /dev/null's read-only copy as",
        path,
        errno,
        note: crate::probe::proc_note(errno as i32),
    })
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

/// Clones the child for `req` and waits until it has exec'd or failed.
///
/// A failure that means the host refuses the layer (namespaces, a fresh `/proc`) comes
/// back as [`StartError::Refused`], so that the caller can fall back.
pub(super) fn start(
    prepared: &Prepared,
    mut req: Request<'_>,
) -> Result<(libc::pid_t, Handle), StartError> {
    super::reap::reap(false);
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
        // (the child grants its own devpts).
        let inside = req.pty.as_ref().map_or([false; 3], |p| p.slots);
        own_terminals(req.stdio, inside)
    } else {
        Vec::new()
    };
    let spec = rules.for_command(req.private_tmp, &terminals);
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
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (parent, child) = socketpair(
            AddressFamily::Unix,
            SockType::Datagram,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| SpawnError::Os {
            call: "socketpair for the pseudo-terminal",
            source: e.into(),
        })?;
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

/// How the setup child starts the program's process and then the sandbox's init.
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
        init::go_pipe()?,
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
    match handle.as_fd().try_clone_to_owned() {
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
/// through a pidfd of its own (which names no other process, ever).
pub(super) fn ender(
    _pid: libc::pid_t,
    handle: &Handle,
    _reaped: Arc<std::sync::Mutex<bool>>,
) -> io::Result<impl FnOnce() + Send + 'static> {
    let killer = handle.killer()?;
    Ok(move || {
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

/// Compiles the plan's walls: the seccomp program, and the Landlock ruleset once, to learn
/// what it enforces here and the access bits of the rules the child adds for its own
/// mounts.
fn compile_walls(
    options: &FilterOptions,
    rules: &LandlockRules,
) -> Result<(Walls, landlock::Status), Error> {
    let filter = seccomp::build(options)?;
    let probe = landlock::build(&rules.spec)?;
    let mut child_rules = Vec::new();
    for (path, grant) in &rules.child_rules {
        let bits = probe.access_bits(*grant, true);
        if bits != 0 {
            child_rules.push((prepare::cstr(path)?, bits));
        }
    }
    let (_, status) = probe.into_parts();
    Ok((
        Walls {
            filter,
            child_rules,
        },
        status,
    ))
}
