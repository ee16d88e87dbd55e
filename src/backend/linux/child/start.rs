//! Child side of a command with an init: start the program's process, then exec the init
//! ([`init`](crate::backend::linux::init), DESIGN). Runs in the setup child, after every
//! wall is up; the program's process runs here too until it execs the starter, under the
//! same rules ([`super`]): it shares the host's memory.
//!
//! # The order, and why it holds by construction
//!
//! 1. The program's process (a `CLONE_VM | CLONE_VFORK` child on the spare end of this
//!    child's stack) arms its parent-death signal, takes its session, enters a Landlock
//!    domain nested inside this child's (where Landlock is in force), takes its terminal,
//!    and execs the init image as the *starter* (`stockade_init::protocol::start`): it has
//!    left the host's memory before this child runs again (CLONE_VFORK).
//! 2. This child execs the init. The init makes itself non-dumpable, closes every fd but
//!    its pipes and only then writes the go byte that the starter waits for.
//! 3. The starter execs the program.
//!
//! So at the program's first instruction PID 1 (layer 2: its parent, the init) maps no
//! host memory, is not dumpable and holds no fd but its own pipes, whatever the scheduler
//! does; and the nested domain alone already keeps the program from tracing it or opening
//! its `/proc/1/{mem,fd,environ}` (a Landlock domain may not trace its parent domain's
//! processes), on every Landlock ABI. The cost is the starter's exec, which overlaps the
//! init's, and the wait for the init's go.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::{c_char, c_int, c_void};
use std::os::fd::AsRawFd;

use stockade_init::protocol::{self, flag};
use stockade_sys::linux as sys;
use stockade_sys::{BorrowedFd, Errno};

use super::R;
use crate::backend::linux::init::Launch;
use crate::backend::linux::prepare::Exec;
use crate::backend::report::{self, Record};

/// Exit status of the program's process when the program could not be started (the host
/// has the record).
const EXEC_FAILED: c_int = protocol::start::EXEC_FAILED;
/// Exit status of the program's process whose parent is gone before it could start.
const ORPHANED: c_int = protocol::start::ORPHANED;

/// What the program's process reads from the setup child's frame.
struct Start<'a> {
    exec: &'a Exec,
    init: &'a Launch,
    /// The setup child's pid, which the program's process checks is still its parent.
    init_pid: c_int,
}

/// Starts the program's process on `stack_top` (a `CLONE_VM | CLONE_VFORK` child, which
/// returns here once it has exec'd the program or failed), then execs the init with that
/// process's pid. Returns only when a step of its own fails, with the errno, for the
/// init's step. A failure of the program's process is reported by that process (the init
/// then reaps it and reports its status 127).
///
/// `stack_top`: the 16-byte aligned top of memory that nothing uses until the program's
/// process has exec'd, below this child's own frames (the spare end of its stack).
pub(super) fn program_then_init(init: &Launch, exec: &Exec, stack_top: *mut u8) -> Errno {
    if init.flags & flag::SUBREAPER != 0 {
        // Before the program's process exists, so that no orphan of it can be re-parented
        // past the init: its descendants come back to this process, which the init is.
        if let Err(e) = sys::prctl_set_child_subreaper() {
            return e;
        }
        // From here the host's death asks the init to end everything. Signals are blocked
        // (since before `clone`), so the request waits, queued, for the init's signalfd.
        if let Err(e) = sys::prctl_set_pdeathsig(protocol::KILL_REQUEST) {
            return e;
        }
    }
    let start = Start {
        exec,
        init,
        init_pid: sys::getpid(),
    };
    let arg = core::ptr::from_ref(&start).cast_mut().cast::<c_void>();
    // SAFETY: `stack_top` is memory nobody uses until this returns (the caller's
    // guarantee, from `clone.rs`); `program_entry` follows this module's rules (raw system
    // calls, no allocation, no lock, no TLS) and reads only `start`, alive in this frame,
    // which CLONE_VFORK keeps suspended until the program's process has exec'd or ended.
    let pid = match unsafe { sys::clone_vm_vfork(stack_top, program_entry, arg) } {
        Ok(pid) => pid,
        Err(e) => return e,
    };
    let e = exec_init(init, pid);
    if init.flags & flag::SUBREAPER != 0 {
        // The spawn fails, but the program has been exec'd (an init that cannot be
        // exec'd: a security module refusing memfds, memory). On layer 2 nothing else
        // ends it: kill it, and its process group, before this child exits. (In a PID
        // namespace this child's exit kills every process of it.) The program is at best
        // in its loader by now; see SECURITY.md.
        end_program(pid);
    }
    e
}

/// Kills the program's process and its process group, and reaps the process.
fn end_program(pid: c_int) {
    let _ = sys::kill(pid, libc::SIGKILL);
    let _ = sys::kill(-pid, libc::SIGKILL);
    while let Err(Errno(libc::EINTR)) = sys::wait4(pid, libc::__WALL) {}
}

/// The program's process: its session, parent-death signal, nested domain and terminal,
/// then the starter, which execs the program on the init's go. Never returns.
extern "C" fn program_entry(arg: *mut c_void) -> ! {
    // SAFETY: `arg` is the `Start` of `program_then_init`, whose frame CLONE_VFORK keeps
    // alive until this process execs or ends.
    let start = unsafe { &*arg.cast::<Start<'_>>() };
    let (exec, steps) = (start.exec, start.init.steps);
    if let Err(e) = prepare(start) {
        fail(exec, steps.init, e);
    }
    // After its `setsid`: the program's session, not the init's, gets the terminal, so
    // that the terminal's signals (`^C`, `^Z`, the hangup) reach the program's foreground
    // process group and never the init.
    if let Some(fd) = flag::terminal(start.init.flags) {
        // SAFETY: the flag names one of 0, 1, 2, which `stdio` put in place and this
        // process inherited; nothing closes them before its exec.
        let tty = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Err(e) = sys::ioctl_tiocsctty(tty) {
            fail(
                exec,
                steps.init + protocol::CONTROLLING_TERMINAL_STEP_AFTER_INIT,
                e,
            );
        }
    }
    let e = exec_starter(start);
    fail(exec, steps.init, e)
}

fn prepare(start: &Start<'_>) -> R {
    // First: the program dies with the init (layer 2 has no namespace to end it). If the
    // setup child is already gone (killed: CLONE_VFORK's wait ends with it, and the host
    // then keeps the memory this process still uses, `clone.rs`), its parent is someone
    // else: stop here.
    sys::prctl_set_pdeathsig(libc::SIGKILL)?;
    if sys::getppid() != start.init_pid {
        sys::exit_group(ORPHANED);
    }
    let flags = start.init.flags;
    if flags & flag::NEW_SESSION != 0 {
        sys::setsid()?;
    }
    nest(start.exec, flags)
}

/// Puts the program's process into a Landlock domain nested inside the one the setup child
/// (and so the init) is in, whenever the command is under Landlock: a process may trace, or
/// open `/proc/PID/{mem,fd,environ,…}` of, only processes of its own domain or of domains
/// nested in it, so the program can never reach the init (nor, on layer 2, the setup child
/// or the host), whatever the seccomp filter's ptrace setting. The sandbox's shared layer,
/// when the command has one, is that domain. Else, a domain that restricts nothing new:
/// it handles creating block devices and reparenting (`REFER`, which every Landlock domain
/// denies unless a rule grants it, so that a domain handling block devices alone would
/// fail every rename into another directory with `EXDEV`) and grants both beneath `/` (on
/// ABI 6 and later with the signal scope that keeps the program from signalling the init
/// on layer 2, `flag::SCOPE_SIGNALS`). On ABI 1, which has no `REFER`, block devices alone
/// (reparenting is denied by every domain there, the command's too).
fn nest(exec: &Exec, flags: u32) -> R {
    if super::walls::shared_landlock(exec)? || exec.landlock_fd < 0 {
        return Ok(());
    }
    let scoped = if flags & flag::SCOPE_SIGNALS != 0 {
        sys::LANDLOCK_SCOPE_SIGNAL
    } else {
        0
    };
    let mut rights = sys::LANDLOCK_ACCESS_FS_MAKE_BLOCK | sys::LANDLOCK_ACCESS_FS_REFER;
    let ruleset = match sys::landlock_create_ruleset(rights, scoped) {
        Ok(fd) => fd,
        // ABI 1: no REFER to handle.
        Err(Errno(libc::EINVAL)) => {
            rights = sys::LANDLOCK_ACCESS_FS_MAKE_BLOCK;
            sys::landlock_create_ruleset(rights, scoped)?
        }
        Err(e) => return Err(e),
    };
    let r = grant_root(ruleset.as_fd(), rights)
        .and_then(|()| sys::landlock_restrict_self(ruleset.as_fd(), super::walls::log_flags(exec)));
    let _ = sys::close(ruleset);
    r
}

/// Grants `rights` beneath `/` in `ruleset`.
fn grant_root(ruleset: BorrowedFd<'_>, rights: u64) -> R {
    let root = sys::openat(
        sys::CWD,
        c"/",
        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        0,
    )?;
    let r = sys::landlock_add_rule_path_beneath(ruleset, root.as_fd(), rights);
    let _ = sys::close(root);
    r
}

/// Execs the init image as the starter ([`protocol::start`]), with the program's
/// environment; the report pipe and the go pipe's read end survive this one exec (the
/// starter takes care of both). Signals stay blocked, as since before `clone`: the starter
/// unblocks them right before the program's exec. Returns only on failure.
fn exec_starter(start: &Start<'_>) -> Errno {
    let (Some(starter), init) = (&start.exec.starter, start.init) else {
        return Errno(libc::EINVAL);
    };
    for fd in [init.report_fd, init.go.0.as_raw_fd()] {
        // SAFETY: the parent keeps the report pipe and the go pipe open in `exec` until the
        // setup child has exec'd or exited, `close_fds` keeps them, and this process's fd
        // table is its own (no CLONE_FILES): the flag changes here only.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Err(e) = sys::fcntl_setfd(fd, 0) {
            return e;
        }
    }
    // SAFETY: the sealed memfd is held open for the process's life (`init::image_fd`), and
    // `close_fds` keeps it.
    let image = unsafe { BorrowedFd::borrow_raw(init.image_fd) };
    // SAFETY: `starter.argv` and the program's `envp` are NULL-terminated arrays of
    // pointers into `CString`s owned by `exec` (the starter's own and the program's), kept
    // alive by the parent until the setup child has exec'd, which CLONE_VFORK holds back
    // until this exec.
    unsafe {
        sys::execveat(
            image,
            c"",
            starter.argv.as_ptr(),
            start.exec.program.envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    }
}

/// Reports `step` failing with `errno` from the program's process and ends it.
fn fail(exec: &Exec, step: u32, errno: Errno) -> ! {
    report::send(exec.report.0, &Record::new(step, errno.0));
    sys::exit_group(EXEC_FAILED)
}

/// Execs the init from its sealed memfd, naming the program's process `pid`. The report,
/// status and go pipes must survive this one exec (the program's process, started before,
/// has its own fd table): the init marks them close-on-exec again first thing.
/// Signals stay blocked: the init inherits the mask, so none can end it before it has its
/// signalfd. Its environment is empty: it needs none.
fn exec_init(init: &Launch, pid: c_int) -> Errno {
    for fd in [init.report_fd, init.status_fd, init.go.1.as_raw_fd()] {
        // SAFETY: the parent keeps the init's report, status and go fds open in `init`
        // until this child has exec'd or exited, and `close_fds` keeps them.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Err(e) = sys::fcntl_setfd(fd, 0) {
            return e;
        }
    }
    let mut pid_buf = [0u8; 11];
    let argv = init.argv(pid, &mut pid_buf);
    let envp: [*const c_char; 1] = [core::ptr::null()];
    // SAFETY: the sealed memfd is held open for the process's life (`init::image_fd`), and
    // `close_fds` keeps it.
    let image = unsafe { BorrowedFd::borrow_raw(init.image_fd) };
    // SAFETY: `argv` is a NULL-terminated array of pointers into `CString`s owned by
    // `init` (kept alive by the parent until this child has exec'd, CLONE_VFORK) and into
    // `pid_buf`, a NUL-terminated local; `envp` is a NULL-terminated local.
    unsafe {
        sys::execveat(
            image,
            c"",
            argv.as_ptr(),
            envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    }
}
