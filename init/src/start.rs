//! The starter: the program's process between the host's memory and the program.
//!
//! The host's setup child starts the program's process (a `CLONE_VM | CLONE_VFORK` child,
//! which must leave the host's memory before the setup child may go on) and that process
//! execs this image at once, as the starter, before the init exists. The starter waits for
//! the init's go byte ([`protocol::start`]), then execs the program: so the program's
//! first instruction runs after the init has left the host's memory, made itself
//! non-dumpable and closed every fd but its pipes, whatever the scheduler does.
//!
//! Everything the program's start needs that is not a plain exec (its session, its
//! parent-death signal, its nested Landlock domain, its terminal) the program's process
//! did before this exec; all of it survives exec. Signals are still blocked, as the setup
//! child blocked them around `clone`: the starter unblocks them right before the program's
//! exec, so no signal ends it while it waits, except `SIGKILL` (the parent-death signal:
//! a setup child or init that dies takes the starter with it).

use crate::protocol::{self, start};
use crate::run::Args;
use crate::sys::{self, BorrowedFd, OwnedFd, c};

/// Runs the starter with its arguments and the program's environment. Never returns.
///
/// # Safety
///
/// `envp` must be the process's NULL-terminated environment array as the kernel laid it
/// out (valid for the process's life).
pub unsafe fn main(args: &Args, envp: *const *const u8) -> ! {
    let Some(cfg) = start::Config::parse(args.argc(), |i| args.get(i)) else {
        sys::exit_group(start::EXEC_FAILED)
    };
    // SAFETY: the host names the report pipe's write end in the arguments and keeps it open
    // across this exec (the program's process cleared its close-on-exec flag); nothing else
    // in this process uses it.
    let report = unsafe { BorrowedFd::borrow_raw(cfg.report_fd) };
    // SAFETY: as for `report`, the go pipe's read end, another fd (the parser checks), which
    // this process alone uses from here.
    let go = unsafe { OwnedFd::from_raw(cfg.go_fd) };
    if !wait_for_go(go.as_fd()) {
        sys::exit_group(start::ORPHANED)
    }
    // Neither pipe end may reach the program: the go pipe is closed, the report pipe closes
    // at the program's exec (its EOF tells the host that the program runs).
    let _ = sys::close(go);
    if cfg.serve {
        // A session: no program; the host's spawn returns at the report pipe's EOF.
        // SAFETY: the report pipe's number is this process's alone (see above) and the
        // borrow of it is not used again.
        let _ = sys::close(unsafe { OwnedFd::from_raw(cfg.report_fd) });
        crate::session::serve()
    }
    let errno = match sys::fcntl_setfd(report, c::FD_CLOEXEC) {
        Ok(()) => exec(args, &cfg, envp),
        Err(e) => e,
    };
    let _ = sys::write(report, &protocol::setup_record(cfg.exec_step, errno));
    sys::exit_group(start::EXEC_FAILED)
}

/// Waits for the init's one byte. False when the pipe ends without it (the init is gone)
/// or cannot be read.
fn wait_for_go(go: BorrowedFd<'_>) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match sys::read(go, &mut byte) {
            Ok(1) => return true,
            Err(c::EINTR) => {}
            _ => return false,
        }
    }
}

/// Unblocks every signal and tries each candidate path, as `execvp` does: a missing file
/// moves on, a permission error is remembered. Returns the errno to report.
fn exec(args: &Args, cfg: &start::Config, envp: *const *const u8) -> sys::Errno {
    if let Err(e) = sys::set_sigmask(0) {
        return e;
    }
    let argv = args.from(cfg.program_argv());
    let mut seen = c::ENOENT;
    for i in start::FIRST_CANDIDATE..cfg.program_argv() {
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
