//! The init itself: tini's job, and the program's start.
//!
//! The host's setup child execs this image as the init once every wall is up. It:
//!
//! 1. Sets up: names itself, becomes non-dumpable, blocks every signal and opens a
//!    signalfd for them, marks the host's pipes close-on-exec; on layer 2 becomes a
//!    child subreaper and makes the host's death a request to end the sandbox
//!    ([`protocol::KILL_REQUEST`]).
//! 2. Forks the program's process (`program.rs`), which becomes the program: so the
//!    program's first instruction comes after this exec and this setup by construction.
//!    Then clears its own arguments but `argv[0]` and its environment (the program's,
//!    which it was exec'd with), and closes everything but the status pipe and the
//!    signalfd (stdio, passed fds and the shared Landlock layer belong to the program's
//!    process, which has its own copies), the report pipe last: the host reads its EOF
//!    once the program's exec has closed the other copy.
//! 3. Loops on the signalfd: `SIGCHLD` reaps every child that has ended (orphans included);
//!    a signal of [`protocol::FORWARDED`] goes to the program, unless the kernel sent it to
//!    a whole process group (a terminal's `^C` with `keep_session`), which the program is
//!    in and has received already; [`protocol::KILL_REQUEST`] on layer 2 ends everything.
//! 4. When the program has ended: kill and reap every other process left (on layer 2 the
//!    init's descendants, in a PID namespace every process of it); write the program's raw
//!    wait status to the status pipe; exit. The host's wait returns at the record, so
//!    nothing of the sandbox runs any more then; the namespaces' teardown in this
//!    process's exit goes on without the host waiting for it (what must not run beside a
//!    live sandbox, the `.git` merge, waits for this exit).
//!
//! Signals stay blocked in the init from before its exec (the setup child blocks them all
//! around `clone` and never unblocks them), so no signal can end it before the signalfd
//! exists: the kernel queues what arrives meanwhile, a host's `SIGTERM` to forward, and
//! the signalfd hands it over.

use core::ffi::CStr;

use crate::program;
use crate::protocol::{self, Config, flag};
use crate::sys::{self, BorrowedFd, OwnedFd, c};

/// Exit status of an init that could not start the program (the host has the record).
pub const INIT_FAILED: i32 = 125;

/// The process's arguments, as the kernel laid them out on the stack.
pub struct Args {
    argc: usize,
    argv: *const *const u8,
}

impl Args {
    /// The arguments at `argv`.
    ///
    /// # Safety
    ///
    /// `argv` must point to `argc` pointers to NUL-terminated strings followed by a NULL,
    /// then the environment's pointers and a NULL, all valid and unchanged for the rest of
    /// the process's life (but for [`Args::clear`]): the kernel's initial stack of the
    /// process.
    pub unsafe fn new(argc: usize, argv: *const *const u8) -> Args {
        Args { argc, argv }
    }

    /// The number of arguments.
    pub fn argc(&self) -> usize {
        self.argc
    }

    /// Argument `i` as the kernel's pointer (NULL past the end).
    pub fn ptr(&self, i: usize) -> *const u8 {
        if i >= self.argc {
            return core::ptr::null();
        }
        // SAFETY: `i < argc`, so this is `argv[i]`, inside the array `new`'s caller vouched
        // for.
        unsafe { *self.argv.wrapping_add(i) }
    }

    /// The argv array from argument `i` on: a NULL-terminated array of pointers, as
    /// `execve` takes it (`i <= argc`: the terminating NULL is `argv[argc]`).
    pub fn from(&self, i: usize) -> *const *const u8 {
        self.argv.wrapping_add(i.min(self.argc))
    }

    /// Argument `i`, without its NUL.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.argc {
            return None;
        }
        let slot = self.argv.wrapping_add(i);
        // SAFETY: `i < argc`, so `slot` is `&argv[i]`, inside the array that `new`'s caller
        // vouched for.
        let p = unsafe { *slot };
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is `argv[i]`, a NUL-terminated string that lives as long as `self`.
        let s = unsafe { CStr::from_ptr(p.cast()) };
        Some(s.to_bytes())
    }

    /// The environment array, which follows argv's NULL on the initial stack.
    pub fn envp(&self) -> *const *const u8 {
        self.argv.wrapping_add(self.argc.wrapping_add(1))
    }

    /// Overwrites every argument but `argv[0]`, and every environment string, with NULs,
    /// in place on the initial stack, so that the init's command line
    /// (`/proc/<pid>/cmdline`, `ps`, `pgrep -f`) shows its name alone rather than the
    /// program's arguments a second time, and its memory keeps no copy of the program's
    /// environment (its `secret_env` values) for as long as the sandbox lives.
    ///
    /// Call only after the config has been parsed and the program's process forked: no
    /// reference into the strings is alive then, and that process has its own copy.
    fn clear(&self) {
        for i in 1..self.argc {
            // SAFETY: `i < argc`, so this is `argv[i]` (see `get`).
            let arg = unsafe { *self.argv.wrapping_add(i) };
            if arg.is_null() {
                break;
            }
            // SAFETY: as the caller's guarantee says, and `arg` is an argument string.
            unsafe { zero(arg.cast_mut()) };
        }
        let mut slot = self.envp();
        loop {
            // SAFETY: `slot` is within the kernel's NULL-terminated environment array
            // (`new`'s guarantee): it starts at its first entry and stops at its NULL.
            let var = unsafe { *slot };
            if var.is_null() {
                return;
            }
            // SAFETY: as the caller's guarantee says, and `var` is an environment string.
            unsafe { zero(var.cast_mut()) };
            slot = slot.wrapping_add(1);
        }
    }
}

/// Overwrites the string at `at` with NULs, up to its own NUL.
///
/// # Safety
///
/// `at` must be a NUL-terminated string on this process's own writable initial stack,
/// into which no reference is alive.
unsafe fn zero(mut at: *mut u8) {
    // SAFETY: `at` stays within the string: it starts at its first byte and stops at its
    // NUL, which is never overwritten.
    while unsafe { at.read_volatile() } != 0 {
        // SAFETY: the caller's guarantee: the string is writable and unborrowed.
        unsafe { at.write_volatile(0) };
        at = at.wrapping_add(1);
    }
}

/// The pipes the host hands to the init, named in its arguments.
struct Pipes {
    /// Setup failures go here (a [`protocol::setup_record`]); EOF means "exec'd".
    report: OwnedFd,
    /// The program's wait status goes here at the end.
    status: OwnedFd,
}

/// Runs the init. Never returns.
pub fn main(args: &Args) -> ! {
    let Some(cfg) = Config::parse(args.argc, |i| args.get(i)) else {
        sys::exit_group(INIT_FAILED)
    };
    // SAFETY: the host opens the report pipe's write end for the init, keeps it open
    // across its exec and names it in the arguments (`protocol::arg`); nothing else in this
    // process has heard of it.
    let report = unsafe { OwnedFd::from_raw(cfg.report_fd) };
    // SAFETY: as for `report`, the status pipe, which is another fd (the parser checks).
    let status = unsafe { OwnedFd::from_raw(cfg.status_fd) };
    let pipes = Pipes { report, status };
    let report = pipes.report.as_fd();
    // Nothing runs yet but this process: a failure here ends the spawn.
    let sfd = match setup(&cfg, &pipes) {
        Ok(fd) => fd,
        Err(e) => fail(report, cfg.init_step, e, INIT_FAILED),
    };
    let inherited = program::Inherited {
        report: report.raw(),
        status: pipes.status.as_fd().raw(),
        signals: sfd.as_fd().raw(),
    };
    let init_pid = sys::getpid();
    // SAFETY: the init has one thread.
    let program = match unsafe { sys::fork() } {
        // SAFETY: the kernel's environment array (`args` is the initial stack's), which
        // this process has not cleared; `inherited` names this process's own fds.
        Ok(0) => unsafe { program::main(&cfg, args, args.envp(), init_pid, &inherited) },
        Ok(pid) => pid,
        Err(e) => {
            let step = cfg.init_step + protocol::PROGRAM_STEP_AFTER_INIT;
            fail(report, step, e, INIT_FAILED)
        }
    };
    args.clear();
    if let Err(e) = keep_only(&pipes, sfd.as_fd()) {
        // The program runs, but the host would wait for an EOF that never comes.
        fail_running(&cfg, program, report, e);
    }
    // The host reads EOF on the report pipe once every copy is closed: this one (the
    // program's process closes its own at the program's exec).
    let Pipes { report, status } = pipes;
    let _ = sys::close(report);
    supervise(&cfg, sfd.as_fd(), status.as_fd(), program, || {
        Background::End
    })
}

/// Reports the init's own step failing with `errno` while the program already runs, and
/// ends the sandbox: in a PID namespace this exit kills every process of it; on layer 2
/// the init first kills and reaps every descendant (the program would die with it, by its
/// parent-death signal, but not what it started).
fn fail_running(cfg: &Config, program: i32, report: BorrowedFd<'_>, errno: sys::Errno) -> ! {
    if cfg.has(flag::SUBREAPER) {
        end_all(cfg, program, &mut None);
    }
    fail(report, cfg.init_step, errno, INIT_FAILED)
}

/// Reports `step` failing with `errno` on the report pipe and exits with `code`.
fn fail(report: BorrowedFd<'_>, step: u32, errno: sys::Errno, code: i32) -> ! {
    let _ = sys::write(report, &protocol::setup_record(step, errno));
    sys::exit_group(code)
}

/// Step 1. Returns the signalfd.
fn setup(cfg: &Config, pipes: &Pipes) -> sys::Result<OwnedFd> {
    sys::prctl_set_name(protocol::ARGV0)?;
    // Non-dumpable: nothing inside can ptrace the init or read its /proc files (memory,
    // environment, fds), whatever the seccomp filter's ptrace setting.
    sys::prctl_set_dumpable(false)?;
    // Already blocked since before the exec; set here so that the init does not depend on it.
    sys::set_sigmask(!0)?;
    let sfd = sys::signalfd(!0)?;
    sys::fcntl_setfd(pipes.report.as_fd(), c::FD_CLOEXEC)?;
    sys::fcntl_setfd(pipes.status.as_fd(), c::FD_CLOEXEC)?;
    if cfg.has(flag::SUBREAPER) {
        // Before the program's process exists, so that no orphan of it can be re-parented
        // past the init.
        sys::prctl_set_child_subreaper()?;
        // Until here the parent-death signal was the setup child's SIGKILL, armed while the
        // host was alive; from here the host's death asks this init to end everything,
        // which SIGKILL would prevent. No moment is left uncovered.
        sys::prctl_set_pdeathsig(protocol::KILL_REQUEST)?;
    }
    Ok(sfd)
}

/// Closes every fd but the two pipes and the signalfd (the report pipe follows in `main`,
/// once nothing can fail any more that the report pipe would have to carry).
fn keep_only(pipes: &Pipes, sfd: BorrowedFd<'_>) -> sys::Result<()> {
    let keep = sorted([
        pipes.report.as_fd().raw(),
        pipes.status.as_fd().raw(),
        sfd.raw(),
    ]);
    let mut first = 0u32;
    for fd in keep {
        // Open fds are never negative.
        let fd = fd as u32;
        if fd > first {
            // SAFETY: the fds kept are the init's only owned ones; every other fd is one
            // the host passed for the program (stdio, passed fds, the shared Landlock
            // layer), which the program's process, forked before, holds in its own table.
            // Nothing in the init uses them again.
            unsafe { sys::close_range(first, fd - 1) }?;
        }
        first = fd.saturating_add(1);
    }
    // SAFETY: as above, for the fds past the highest one kept.
    unsafe { sys::close_range(first, u32::MAX) }
}

/// The values in ascending order (an insertion sort, without `sort`, which would bring
/// its machinery into the image).
fn sorted<const N: usize>(mut v: [i32; N]) -> [i32; N] {
    for i in 1..N {
        let mut j = i;
        while j > 0 {
            let (Some(&a), Some(&b)) = (v.get(j - 1), v.get(j)) else {
                break;
            };
            if a <= b {
                break;
            }
            v.swap(j - 1, j);
            j -= 1;
        }
    }
    v
}

/// What becomes of the processes the program leaves running when it ends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Background {
    /// They are killed and reaped before the status is written (every sandbox's init,
    /// and a session's command by default).
    End,
    /// A session's command whose host opted in (`session::KEEP_BACKGROUND`): the status
    /// is written when the program ends, and they live on until they end or the kill
    /// request comes ([`linger`]).
    Keep,
}

/// Step 3. Never returns. (A session's command supervisor runs it too: `session.rs`.)
pub(crate) fn supervise(
    cfg: &Config,
    sfd: BorrowedFd<'_>,
    status_fd: BorrowedFd<'_>,
    program: i32,
    background: impl Fn() -> Background,
) -> ! {
    let mut status: Option<i32> = None;
    let mut info = [0u8; c::SIGINFO_SIZE];
    loop {
        match sys::read(sfd, &mut info) {
            Ok(c::SIGINFO_SIZE) => {}
            Err(c::EINTR) => continue,
            // Cannot happen with a valid signalfd. Without signals, still wait for the
            // program rather than leave it unsupervised.
            _ => {
                let st = wait_for(program);
                finish(cfg, status_fd, program, st, Children::Unknown)
            }
        }
        let (signo, code) = siginfo(&info);
        let mut children = Children::Unknown;
        if signo == protocol::SIGCHLD {
            children = reap(program, &mut status);
        } else if signo == protocol::KILL_REQUEST && cfg.has(flag::SUBREAPER) {
            end_all(cfg, program, &mut status);
        } else if status.is_none() && protocol::forwards(signo, code) {
            // Not reaped yet, so the pid still names the program.
            let _ = sys::kill(program, signo);
        }
        if let Some(st) = status {
            if children != Children::None && background() == Background::Keep {
                let _ = sys::write(status_fd, &protocol::status_record(st));
                linger(cfg, sfd, program, st)
            }
            finish(cfg, status_fd, program, st, children)
        }
    }
}

/// A kept command's supervisor after its program has ended and its status is written:
/// the subreaper of what the program left, until none of it is left (then it exits) or
/// the kill request comes (the server's end, through the parent-death signal, or the
/// host's kill): then it ends them all. Other signals are not forwarded: the program,
/// which they were for, has ended. Never returns.
fn linger(cfg: &Config, sfd: BorrowedFd<'_>, program: i32, status: i32) -> ! {
    let mut info = [0u8; c::SIGINFO_SIZE];
    let mut st = Some(status);
    loop {
        match sys::read(sfd, &mut info) {
            Ok(c::SIGINFO_SIZE) => {}
            Err(c::EINTR) => continue,
            // Cannot happen with a valid signalfd; without one nothing would tell this
            // process to end them, so they end now.
            _ => {
                end_all(cfg, program, &mut st);
                sys::exit_group(protocol::exit_code(status))
            }
        }
        let (signo, _) = siginfo(&info);
        if signo == protocol::SIGCHLD && reap(program, &mut st) == Children::None {
            sys::exit_group(protocol::exit_code(status))
        }
        if signo == protocol::KILL_REQUEST {
            end_all(cfg, program, &mut st);
            sys::exit_group(protocol::exit_code(status))
        }
    }
}

/// What the init knows of its children.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Children {
    /// `wait4` said there are none (`ECHILD`). A subreaper without children has no
    /// descendants either (every descendant whose parent ends becomes its child), and none
    /// can appear: the init forks nothing but the program's process, at its start.
    None,
    /// There may be some.
    Unknown,
}

/// `ssi_signo` and `ssi_code` of a `struct signalfd_siginfo`.
fn siginfo(info: &[u8; c::SIGINFO_SIZE]) -> (i32, i32) {
    let word = |at: usize| {
        let mut w = [0u8; 4];
        if let Some(src) = info.get(at..at + 4) {
            w.copy_from_slice(src);
        }
        i32::from_ne_bytes(w)
    };
    (word(0), word(8))
}

/// Whether `st`, a status `wait4` gave for `pid`, is a stop, not an end; a stop is let go.
///
/// The init waits without `WUNTRACED`, so a stop reaches it only as the tracer of a child
/// that asked to be traced (`PTRACE_TRACEME`, with `allow_ptrace`: the init's domain is
/// the parent of the child's, so Landlock lets it). Taken for an end, it would report a
/// status no ended process has ("stopped by SIGUSR1") and kill the command. Instead the
/// init detaches from the child, which goes on as if nobody had traced it: the signal of
/// the stop is delivered, except the `SIGTRAP` that a traced `execve` sends (an untraced
/// process never gets it).
fn stopped(pid: i32, st: i32) -> bool {
    // WIFSTOPPED; WIFCONTINUED (never asked for, never let through either).
    if st & 0xff != 0x7f && st != 0xffff {
        return false;
    }
    if st & 0xff == 0x7f {
        let sig = (st >> 8) & 0xff;
        let _ = sys::ptrace_detach(pid, if sig == c::SIGTRAP { 0 } else { sig });
    }
    true
}

/// Reaps every child that has ended; records the program's status when it is one of them.
/// Returns whether children are left.
fn reap(program: i32, status: &mut Option<i32>) -> Children {
    loop {
        match sys::wait4(-1, c::WNOHANG | c::WALL) {
            Ok((0, _)) => return Children::Unknown,
            Ok((pid, st)) if stopped(pid, st) => {}
            Ok((pid, st)) => {
                if pid == program {
                    *status = Some(st);
                }
            }
            Err(c::EINTR) => {}
            Err(c::ECHILD) => return Children::None,
            Err(_) => return Children::Unknown,
        }
    }
}

/// Waits (blocking) until the program has ended, reaping whatever else ends first.
fn wait_for(program: i32) -> i32 {
    loop {
        match sys::wait4(-1, c::WALL) {
            Ok((pid, st)) if stopped(pid, st) => {}
            Ok((pid, st)) if pid == program => return st,
            Ok(_) | Err(c::EINTR) => {}
            Err(_) => return protocol::SIGKILL,
        }
    }
}

/// Layer 2: kills every descendant and reaps it, until the init has no child left. A
/// killed process's own children are re-parented to the init (a subreaper) and appear in
/// its list on the next round; so nothing the program started survives, however it
/// detached (double fork, `setsid`).
///
/// When the init's Landlock domain scopes signals ([`domain_confines_kill`]), each round
/// is one `kill(-1, SIGKILL)`: that reaches exactly the processes of this command, at
/// every depth at once (a fork bomb's whole tree, not one generation per round). Else
/// the list is `/proc/thread-self/children`; without it (no `/proc` mounted, as in a
/// minimal container image, or a kernel without `CONFIG_PROC_CHILDREN`) what has ended
/// is reaped and the rest left, rather than block on a process that lives on (the host
/// warns of it: `launch_linux::warn_leftovers_survive`).
fn end_all(cfg: &Config, program: i32, status: &mut Option<i32>) {
    if status.is_none() {
        // Not reaped yet: the pid still names the program.
        let _ = sys::kill(program, protocol::SIGKILL);
    }
    let scoped = domain_confines_kill(cfg);
    loop {
        if scoped {
            // ESRCH or EPERM alone: nothing of this command is left to signal; the wait
            // below then says so too.
            let _ = sys::kill(-1, protocol::SIGKILL);
        } else if !kill_children() {
            let _ = reap(program, status);
            return;
        }
        match sys::wait4(-1, c::WALL) {
            Ok((pid, st)) if stopped(pid, st) => {}
            Ok((pid, st)) => {
                if pid == program && status.is_none() {
                    *status = Some(st);
                }
            }
            Err(c::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// In a PID namespace: kills every process of the namespace but the init
/// (`kill(-1, SIGKILL)` from its PID 1) and reaps them, until the init has no child left.
/// A process forked while the first signal went round is caught by the next round: each
/// round kills again before it waits, and every process whose parent dies becomes the
/// init's child.
fn end_namespace() {
    loop {
        // ESRCH: nothing left to signal; the wait below then says so too.
        let _ = sys::kill(-1, protocol::SIGKILL);
        match sys::wait4(-1, c::WALL) {
            Ok(_) | Err(c::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// Whether a `kill(-1)` of the init reaches only the processes of this command: its
/// Landlock domain scopes signals (`LANDLOCK_SCOPE_SIGNAL`, ABI 6), so it can signal
/// processes of its own domain and of the domains nested in it, and no other. The init is
/// the only process of its domain, and every process of the command is in a nested one
/// (the program's process enters one before its exec, `program.rs`, and a domain is
/// inherited and never left). The host's flag says the ruleset asked for the scope; the
/// proof that it is in force is that the host, outside every domain, cannot be signalled
/// (the host runs as the init's uid, or is root: nothing else refuses the signal).
fn domain_confines_kill(cfg: &Config) -> bool {
    cfg.has(flag::SCOPE_SIGNALS) && sys::kill(sys::getppid(), 0) == Err(c::EPERM)
}

/// Sends `SIGKILL` to every child of the init, from `/proc/thread-self/children` (the init
/// has one thread). Returns false when the list cannot be read.
fn kill_children() -> bool {
    let Ok(fd) = sys::open_read(c"/proc/thread-self/children") else {
        return false;
    };
    let kill = |pid: i32| {
        let _ = sys::kill(pid, protocol::SIGKILL);
    };
    let mut buf = [0u8; 512];
    let mut carry = 0;
    loop {
        match sys::read(fd.as_fd(), &mut buf) {
            Ok(0) => {
                protocol::each_pid(&[], &mut carry, true, kill);
                break;
            }
            Ok(n) => protocol::each_pid(buf.get(..n).unwrap_or(&[]), &mut carry, false, kill),
            Err(c::EINTR) => {}
            Err(_) => break,
        }
    }
    let _ = sys::close(fd);
    true
}

/// Step 4. Never returns. `children`: what the last reaping found (with none left, there
/// is nothing to kill, and no need to read the list of children).
///
/// Every other process of the sandbox is killed and reaped before the status record is
/// written: the host returns from its wait at the record, while this process's exit (in
/// a PID namespace, the teardown of the namespaces, ~0.3 ms) goes on, so nothing the
/// program started may still run then.
fn finish(
    cfg: &Config,
    status_fd: BorrowedFd<'_>,
    program: i32,
    status: i32,
    children: Children,
) -> ! {
    if children != Children::None {
        if cfg.has(flag::SUBREAPER) {
            let mut st = Some(status);
            end_all(cfg, program, &mut st);
        } else {
            end_namespace();
        }
    }
    let _ = sys::write(status_fd, &protocol::status_record(status));
    sys::exit_group(protocol::exit_code(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_fds_sort() {
        for v in [
            [1, 2, 3],
            [1, 3, 2],
            [2, 1, 3],
            [2, 3, 1],
            [3, 1, 2],
            [3, 2, 1],
        ] {
            assert_eq!(sorted(v), [1, 2, 3]);
        }
        assert_eq!(sorted([5, 0, 5]), [0, 5, 5]);
        assert_eq!(sorted([9, 4, 7, 1]), [1, 4, 7, 9]);
        assert_eq!(sorted([3, 3, 0, 3]), [0, 3, 3, 3]);
    }

    #[test]
    fn siginfo_reads_signo_and_code() {
        let mut info = [0u8; c::SIGINFO_SIZE];
        info[..4].copy_from_slice(&15u32.to_ne_bytes());
        info[8..12].copy_from_slice(&protocol::SI_KERNEL.to_ne_bytes());
        assert_eq!(siginfo(&info), (15, protocol::SI_KERNEL));
        assert_eq!(
            core::mem::offset_of!(libc::signalfd_siginfo, ssi_code),
            8,
            "ssi_code offset"
        );
    }
}
