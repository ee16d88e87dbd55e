//! The program's process: forked by the init after its setup, it becomes the program.
//!
//! It is a copy of this image, so no page of the host's memory was ever mapped in it,
//! and its parent, the init, is already non-dumpable when it starts: the program's first
//! instruction comes after the init's exec by construction (`protocol`'s "The program's
//! process"). Before its exec it:
//!
//! 1. arms its parent-death signal (`SIGKILL`: the program dies with the init; on layer 2
//!    there is no namespace to end it) and stops if the init is already gone;
//! 2. takes its own session ([`flag::NEW_SESSION`]);
//! 3. enters a Landlock domain nested inside the init's ([`flag::NEST`], or the shared
//!    layer, [`flag::SHARED_DOMAIN`]), so that it can never trace the init or open its
//!    `/proc` files, and with signals scoped ([`flag::SCOPE_SIGNALS`]) cannot signal it;
//! 4. takes its terminal, after its `setsid`: the program's session, not the init's, gets
//!    it, so that the terminal's signals (`^C`, `^Z`, the hangup) reach the program's
//!    foreground process group and never the init;
//! 5. unblocks every signal and execs the first candidate path that can be executed, as
//!    `execvp` does. The report pipe is close-on-exec: its end tells the host the program
//!    runs; a failure is a setup record on it.
//!
//! A session ([`flag::SERVE`]) serves its control socket after step 4 instead
//! (`session.rs`).
//!
//! Signals stay blocked from the init (and, before it, the setup child) until right
//! before the program's exec, so none ends this process before then but `SIGKILL`.

use crate::protocol::{self, Config, flag};
use crate::run::Args;
use crate::sys::{self, BorrowedFd, OwnedFd, c};

/// The init's own fds, which the program's process inherited: it closes the status pipe
/// and the signalfd first thing, the report pipe when it serves (a program's exec closes
/// that one: it is close-on-exec).
pub struct Inherited {
    /// The report pipe's write end.
    pub report: i32,
    /// The status pipe's write end.
    pub status: i32,
    /// The init's signalfd.
    pub signals: i32,
}

/// Runs the program's process. Never returns.
///
/// # Safety
///
/// `envp` must be the process's NULL-terminated environment array as the kernel laid it
/// out (valid for the process's life, and not cleared in this process), and `fds` the
/// init's own fds, open in this process and used by nothing else here.
pub unsafe fn main(
    cfg: &Config,
    args: &Args,
    envp: *const *const u8,
    init_pid: i32,
    fds: &Inherited,
) -> ! {
    for fd in [fds.status, fds.signals] {
        // SAFETY: the init's fds, which nothing in this process uses (the caller's
        // guarantee).
        let _ = sys::close(unsafe { OwnedFd::from_raw(fd) });
    }
    // SAFETY: the report pipe's write end is open in this process (the caller's
    // guarantee) until the program's exec or this process's end.
    let report = unsafe { BorrowedFd::borrow_raw(fds.report) };
    let own_step = cfg.init_step + protocol::PROGRAM_STEP_AFTER_INIT;
    if let Err(e) = prepare(cfg, init_pid) {
        fail(report, own_step, e)
    }
    if let Some(fd) = flag::terminal(cfg.flags) {
        // SAFETY: the flag names one of 0, 1, 2, which the setup child put in place and
        // this process inherited; nothing closes them before its exec.
        let tty = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Err(e) = sys::ioctl_tiocsctty(tty) {
            let step = cfg.init_step + protocol::CONTROLLING_TERMINAL_STEP_AFTER_INIT;
            fail(report, step, e)
        }
    }
    if cfg.has(flag::SERVE) {
        // SAFETY: the init's fd, which nothing in this process uses from here (the
        // caller's guarantee; `report`'s borrow is not used again).
        let _ = sys::close(unsafe { OwnedFd::from_raw(fds.report) });
        crate::session::serve()
    }
    let errno = exec(args, cfg, envp);
    fail(report, cfg.exec_step, errno)
}

/// Steps 1 to 3.
fn prepare(cfg: &Config, init_pid: i32) -> sys::Result<()> {
    sys::prctl_set_pdeathsig(protocol::SIGKILL)?;
    if sys::getppid() != init_pid {
        sys::exit_group(protocol::ORPHANED)
    }
    if !cfg.has(flag::SERVE) {
        // Dumpable again, as the program is from its exec on, for the calls before it (the
        // nested domain's `open` of `/`, the exec of each candidate): with explain on, the
        // host reads their paths from this process's memory, a fork of the non-dumpable
        // init. That memory holds this image and the program's own arguments and
        // environment; the fds left are the program's own and the report pipe. Nothing
        // else runs in the init's domain or below it yet, and the init is not reachable
        // through this process. (The session server stays non-dumpable: it lives on.)
        sys::prctl_set_dumpable(true)?;
    }
    if cfg.has(flag::NEW_SESSION) {
        sys::setsid()?;
    }
    if let Some(fd) = cfg.domain_fd {
        // SAFETY: the host names the shared layer's ruleset in the arguments and keeps it
        // open across the init's exec; the init's fork left this process its own copy,
        // which nothing else here uses.
        let shared = unsafe { OwnedFd::from_raw(fd) };
        let r = sys::landlock_restrict_self(shared.as_fd(), cfg.restrict_flags);
        let _ = sys::close(shared);
        return r;
    }
    if cfg.has(flag::NEST) {
        return nest(cfg);
    }
    Ok(())
}

/// Enters a new domain nested in the init's that restricts nothing new: it handles
/// creating block devices and reparenting (`REFER`, which every Landlock domain denies
/// unless a rule grants it, so that a domain handling block devices alone would fail
/// every rename into another directory with `EXDEV`) and grants both beneath `/`; on
/// ABI 6 and later, when asked, it scopes signals. On ABI 1, which has no `REFER`, block
/// devices alone (reparenting is denied by every domain there, the command's too).
fn nest(cfg: &Config) -> sys::Result<()> {
    let scoped = if cfg.has(flag::SCOPE_SIGNALS) {
        c::LANDLOCK_SCOPE_SIGNAL
    } else {
        0
    };
    let mut rights = c::LANDLOCK_ACCESS_FS_MAKE_BLOCK | c::LANDLOCK_ACCESS_FS_REFER;
    let ruleset = match sys::landlock_ruleset(rights, scoped) {
        Ok(fd) => fd,
        Err(c::EINVAL) => {
            rights = c::LANDLOCK_ACCESS_FS_MAKE_BLOCK;
            sys::landlock_ruleset(rights, scoped)?
        }
        Err(e) => return Err(e),
    };
    let root = sys::open_path(c"/")?;
    let r = sys::landlock_add_rule_path_beneath(ruleset.as_fd(), root.as_fd(), rights)
        .and_then(|()| sys::landlock_restrict_self(ruleset.as_fd(), cfg.restrict_flags));
    let _ = sys::close(root);
    let _ = sys::close(ruleset);
    r
}

/// Reports `step` failing with `errno` and ends this process.
fn fail(report: BorrowedFd<'_>, step: u32, errno: sys::Errno) -> ! {
    let _ = sys::write(report, &protocol::setup_record(step, errno));
    sys::exit_group(protocol::EXEC_FAILED)
}

/// Unblocks every signal and tries each candidate path, as `execvp` does: a missing file
/// moves on, a permission error is remembered. Returns the errno to report.
fn exec(args: &Args, cfg: &Config, envp: *const *const u8) -> sys::Errno {
    if let Err(e) = sys::set_sigmask(0) {
        return e;
    }
    let argv = args.from(cfg.program_argv());
    let mut seen = c::ENOENT;
    for i in protocol::arg::FIRST_CANDIDATE..cfg.program_argv() {
        let path = args.ptr(i);
        if path.is_null() {
            break;
        }
        // SAFETY: `path` is argument `i`, a NUL-terminated string on the initial stack;
        // `argv` is the tail of the kernel's NULL-terminated argv array from the program's
        // `argv[0]` on, and `envp` the kernel's environment array (the caller's guarantee).
        let e = unsafe { sys::execve(path, argv, envp) };
        match e {
            c::ENOENT | c::ENOTDIR | c::ESTALE => {}
            c::EACCES | c::EPERM | c::ENOEXEC => seen = e,
            _ => return e,
        }
    }
    seen
}
