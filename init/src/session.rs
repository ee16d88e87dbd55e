//! The session server and each command's supervisor: a warm session's commands, started
//! inside the live sandbox at the cost of an exec.
//!
//! The server is the program's process of a session's sandbox (`program.rs`, with
//! [`flag::SERVE`]): a fork of the init, it runs inside every wall of the sandbox, in the
//! program's nested Landlock domain, maps no host memory (the image was exec'd), is not
//! dumpable,
//! and holds nothing but its control socket (fd 0), `/dev/null` on fds 1 and 2 and the
//! commands' Landlock ruleset. It keeps the next commands ([`AHEAD`] of them) forked
//! ahead: for each a *supervisor* and its child, the command's program's process, both
//! set up as far as a command can be before its request is known, the latter blocked on
//! the control socket. Such a process takes one request ([`session`]'s protocol) and
//! execs the program: a command's start wakes one process of the session, which forks
//! none. Its exec closes the last write end of its pair's pipe, which wakes the server
//! to fork another pair once the program runs.
//!
//! 1. The supervisor enters a fresh Landlock domain nested in the server's, which scopes
//!    signals and abstract unix sockets: every command lives in a domain of its own,
//!    which no other command's domain contains, so that (Landlock's ptrace rule and its
//!    scopes) no command can trace, signal, read the `/proc/PID/{environ,mem,fd}` of, or
//!    reach the abstract sockets of another command, of the server or of the init. It
//!    becomes a child subreaper with the server's death as its kill request, opens a
//!    pidfd of itself and the command's status pipe, and forks the program's process.
//! 2. The program's process enters one more nested domain (so that it cannot signal its
//!    supervisor either) and waits for a request. With it, it sends the host the
//!    supervisor's pidfd and the status pipe's read end on the command's reply socket,
//!    takes its session, puts its stdio in place (over the control socket), changes to
//!    its directory, marks every other fd close-on-exec and execs the program. Before the
//!    request it holds nothing of any command; after it, nothing of the next.
//! 3. The supervisor supervises it as layer 2's init does (`run.rs`): forwards the host's
//!    signals, and when the program ends kills and reaps every descendant, writes the
//!    program's raw wait status to the status pipe and exits; or, when the host asked to
//!    keep the command's background processes ([`session::KEEP_BACKGROUND`], which the
//!    program's process passes on as one byte on a pipe before its exec), writes the
//!    status and stays their subreaper until they end, or the server does (its
//!    parent-death signal is the kill request: then it ends them all).
//!
//! Nothing here can reach the host's memory: the server and its forks are copies of this
//! `no_std` image, exec'd from the sealed memfd. The request's bytes come from the host;
//! they are parsed all the same ([`session::Request::parse`]) and a bad one is refused.

use core::ffi::CStr;
use core::mem::MaybeUninit;

use crate::protocol::{self, Config, flag, session};
use crate::run;
use crate::sys::{self, BorrowedFd, OwnedFd, c};

/// The scopes of each command's domains.
const SCOPES: u64 = c::LANDLOCK_SCOPE_SIGNAL | c::LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;

/// Space for the `SCM_RIGHTS` control message of a request: a `cmsghdr` (16 bytes) and
/// twice the fds expected, so that a message with more is seen (and refused) whole.
const CONTROL_SIZE: usize = 16 + 4 * session::FDS * 2;

/// How many commands wait forked ahead: one for the next request, one for a request
/// made while that one starts (another thread's).
const AHEAD: usize = 2;

/// The byte a pair writes to the server when it has taken a request.
const TAKEN: u8 = b'T';
/// The byte a pair writes to the server when the host has closed the session.
const ENDED: u8 = b'E';

/// The control buffer, aligned as a `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; CONTROL_SIZE]);

/// Serves the control socket on fd 0 until the host closes it. Never returns.
pub fn serve() -> ! {
    // SAFETY: fd 0 is the control socket the host gave the session's program as its
    // stdin; nothing else in this process uses it.
    let control = unsafe { OwnedFd::from_raw(0) };
    let _ = sys::prctl_set_dumpable(false);
    let _ = sys::prctl_set_name(c"stockade-serve");
    // Made once: every `landlock_restrict_self` with it makes a new domain, so each
    // command's are its own all the same.
    let ruleset = sys::landlock_scoped_ruleset(SCOPES);
    let ruleset = ruleset.as_ref().map(OwnedFd::as_fd).map_err(|e| *e);
    // The read ends of the pairs' pipes, `None` where a pair is to be forked.
    let mut ahead: [Option<OwnedFd>; AHEAD] = Default::default();
    // A pair ended without taking a request (killed): none is forked again in its place
    // until another takes a request, so that pairs that cannot live do not make this
    // loop spin; with none left, the next request fails rather than wait.
    let mut stalled = false;
    loop {
        reap_ended();
        let mut failed = None;
        for slot in ahead.iter_mut().filter(|s| s.is_none()) {
            if stalled {
                break;
            }
            match fork_pair(&control, ruleset) {
                Ok(taken) => *slot = Some(taken),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if ahead.iter().all(Option::is_none) {
            fail_one(control.as_fd(), failed.unwrap_or(c::ECHILD));
            stalled = false;
            continue;
        }
        // No event asked: only the pipe's end (`POLLHUP`, every write end closed) wakes
        // the server, not the byte before it. A pair's program's process holds the last
        // write end until its exec closes it, so the next pair is forked once the
        // program runs, rather than while its process still has to exec it.
        let mut polled = ahead.each_ref().map(|s| sys::PollFd {
            fd: s.as_ref().map_or(-1, |fd| fd.as_fd().raw()),
            events: 0,
            revents: 0,
        });
        if sys::ppoll(&mut polled).is_err() {
            continue;
        }
        for (slot, p) in ahead.iter_mut().zip(polled) {
            let Some(taken) = slot.as_ref().filter(|_| p.revents != 0) else {
                continue;
            };
            let mut byte = [0u8; 1];
            let n = sys::read(taken.as_fd(), &mut byte);
            match (n, byte[0]) {
                (Ok(1), TAKEN) => stalled = false,
                // The host closed its end: the session is over. The init ends what is
                // left.
                (Ok(1), ENDED) => sys::exit_group(0),
                (Err(c::EINTR), _) => continue,
                _ => stalled = true,
            }
            *slot = None;
        }
    }
}

/// Forks one pair ahead: a supervisor, which forks its program's process, which waits
/// for a request. Returns the read end of the pipe on which the latter says it took one.
fn fork_pair(control: &OwnedFd, ruleset: sys::Result<BorrowedFd<'_>>) -> sys::Result<OwnedFd> {
    let (taken_r, taken_w) = sys::pipe(0)?;
    // SAFETY: this process has one thread.
    match unsafe { sys::fork() }? {
        0 => {
            drop(taken_r);
            // The other pairs' pipes' read ends are close-on-exec: the program's process
            // execs, the supervisor never reads them.
            // SAFETY: fd 0 is the control socket, which this fork takes over from the
            // server's `OwnedFd` (left unused here: this never returns).
            let control = unsafe { OwnedFd::from_raw(control.as_fd().raw()) };
            supervisor(control, taken_w, ruleset)
        }
        _ => Ok(taken_r),
    }
}

/// Reaps every supervisor that has ended (they are the server's only children).
fn reap_ended() {
    while let Ok((pid, _)) = sys::wait4(-1, c::WNOHANG | c::WALL) {
        if pid == 0 {
            return;
        }
    }
}

/// Takes one request and fails it with `errno` (at the fork step): the server could not
/// give it a supervisor. Exits when the host has closed the session.
fn fail_one(control: BorrowedFd<'_>, errno: sys::Errno) {
    let mut buf = [MaybeUninit::uninit(); 64];
    let mut cmsg = Control([0; CONTROL_SIZE]);
    match receive(control, &mut buf, &mut cmsg, false) {
        Received::Ended => sys::exit_group(0),
        Received::Failed => sys::exit_group(run::INIT_FAILED),
        Received::Bad => {}
        Received::Request(_, fds) => {
            let _ = sys::write(
                fds[session::REPORT].as_fd(),
                &protocol::setup_record(session::step::FORK, errno),
            );
        }
    }
}

/// What one `recvmsg` on the control socket gave.
enum Received<'a> {
    /// A request's bytes with its fds.
    Request(&'a [u8], [OwnedFd; session::FDS]),
    /// A message without exactly its fds, or truncated: whatever came is closed.
    Bad,
    /// The host closed its end.
    Ended,
    /// The socket failed.
    Failed,
}

/// Receives one message from the control socket into `buf` (retried on `EINTR`). The
/// buffer need not be initialized: the kernel writes what the message holds, and only
/// that is read.
fn receive<'a>(
    control: BorrowedFd<'_>,
    buf: &'a mut [MaybeUninit<u8>],
    cmsg: &mut Control,
    bytes_read: bool,
) -> Received<'a> {
    loop {
        let mut iov = sys::IoVec {
            base: buf.as_mut_ptr().cast::<u8>(),
            len: buf.len(),
        };
        let mut hdr = sys::MsgHdr {
            name: core::ptr::null_mut(),
            namelen: 0,
            iov: &raw mut iov,
            iovlen: 1,
            control: cmsg.0.as_mut_ptr(),
            controllen: CONTROL_SIZE,
            flags: 0,
        };
        let n = match sys::recvmsg(control, &mut hdr, c::MSG_CMSG_CLOEXEC) {
            Ok(0) => return Received::Ended,
            Ok(n) => n,
            Err(c::EINTR) => continue,
            Err(_) => return Received::Failed,
        };
        // A request only failed (`bytes_read` false) is not read: its bytes may be cut
        // off (`MSG_TRUNC`), never its fds.
        let cut = if bytes_read {
            c::MSG_TRUNC | c::MSG_CTRUNC
        } else {
            c::MSG_CTRUNC
        };
        let truncated = hdr.flags & cut != 0;
        // Whatever fds came are closed as they drop.
        let n = n.min(buf.len());
        // SAFETY: `recvmsg` wrote the message's `n` bytes (no more than the buffer's
        // length) at the buffer's start; they are initialized `u8`s, borrowed for as long
        // as the buffer is.
        let bytes = unsafe { core::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
        return match (received_fds(&cmsg.0, hdr.controllen), truncated) {
            (Some(fds), false) => Received::Request(bytes, fds),
            _ => Received::Bad,
        };
    }
}

/// The fds of the request's one `SCM_RIGHTS` message, exactly [`session::FDS`] of them;
/// `None` (every fd received closed) otherwise.
fn received_fds(control: &[u8; CONTROL_SIZE], len: usize) -> Option<[OwnedFd; session::FDS]> {
    let word = |at: usize, n: usize| -> Option<u64> {
        let bytes = control.get(at..at + n)?;
        let mut w = [0u8; 8];
        w.get_mut(..n)?.copy_from_slice(bytes);
        Some(u64::from_ne_bytes(w))
    };
    let len = len.min(CONTROL_SIZE);
    // `struct cmsghdr`: cmsg_len (size_t), cmsg_level (int), cmsg_type (int), data.
    let mut fds: [Option<OwnedFd>; session::FDS * 2] = Default::default();
    let mut count = 0;
    let mut ok = len >= 16;
    if ok {
        let cmsg_len = word(0, 8).unwrap_or(0) as usize;
        let level = word(8, 4).unwrap_or(0) as i32;
        let kind = word(12, 4).unwrap_or(0) as i32;
        let data = cmsg_len.saturating_sub(16).min(len.saturating_sub(16));
        ok = level == c::SOL_SOCKET && kind == c::SCM_RIGHTS;
        if level == c::SOL_SOCKET && kind == c::SCM_RIGHTS {
            // Every fd the kernel installed is taken, so that none leaks, whatever else
            // is wrong with the message.
            for i in 0..data / 4 {
                let fd = word(16 + 4 * i, 4).unwrap_or(0) as u32 as i32;
                if let Some(slot) = fds.get_mut(count) {
                    // SAFETY: the kernel installed this fd in the process for this
                    // message; nothing else has seen its number.
                    *slot = Some(unsafe { OwnedFd::from_raw(fd) });
                    count += 1;
                }
            }
        }
    }
    if !ok || count != session::FDS {
        return None;
    }
    let mut it = fds.into_iter().flatten();
    let mut take = || it.next();
    Some([take()?, take()?, take()?, take()?, take()?])
}

/// Sends the host the command's reply on its reply socket: a started record, `pidfd`
/// (the supervisor's) and `status` (the status pipe's read end). A failure means the
/// host is gone (or will see no reply and fail the spawn); the command runs on,
/// supervised, either way.
fn answer(reply: BorrowedFd<'_>, pidfd: BorrowedFd<'_>, status: BorrowedFd<'_>) {
    let mut record = session::reply(0);
    let mut iov = sys::IoVec {
        base: record.as_mut_ptr(),
        len: record.len(),
    };
    let mut cmsg = Control([0; CONTROL_SIZE]);
    let len: u64 = 16 + 4 * session::REPLY_FDS as u64;
    cmsg.0[..8].copy_from_slice(&len.to_ne_bytes());
    cmsg.0[8..12].copy_from_slice(&c::SOL_SOCKET.to_ne_bytes());
    cmsg.0[12..16].copy_from_slice(&c::SCM_RIGHTS.to_ne_bytes());
    cmsg.0[16..20].copy_from_slice(&pidfd.raw().to_ne_bytes());
    cmsg.0[20..24].copy_from_slice(&status.raw().to_ne_bytes());
    let hdr = sys::MsgHdr {
        name: core::ptr::null_mut(),
        namelen: 0,
        iov: &raw mut iov,
        iovlen: 1,
        control: cmsg.0.as_mut_ptr(),
        // CMSG_SPACE(8): the data, a multiple of 8 already.
        controllen: 24,
        flags: 0,
    };
    let _ = sys::sendmsg(reply, &hdr, c::MSG_NOSIGNAL);
}

/// One supervisor (a fork of the server), set up and with its program's process forked
/// ahead of its request; then that command's. Never returns.
fn supervisor(control: OwnedFd, taken: OwnedFd, ruleset: sys::Result<BorrowedFd<'_>>) -> ! {
    let domain = |e| (session::step::DOMAIN, e);
    let setup = || {
        let ruleset = ruleset.map_err(domain)?;
        sys::landlock_restrict_self(ruleset, 0).map_err(domain)?;
        sys::prctl_set_name(c"stockade-cmd").map_err(domain)?;
        sys::prctl_set_child_subreaper().map_err(domain)?;
        // Blocked, as every signal (the server's mask): read from the signalfd once this
        // supervises its program, which it then ends.
        sys::prctl_set_pdeathsig(protocol::KILL_REQUEST).map_err(domain)?;
        let sfd = sys::signalfd(!0).map_err(domain)?;
        let fork = |e| (session::step::FORK, e);
        let pidfd = sys::pidfd_open(sys::getpid()).map_err(fork)?;
        let status = sys::pipe(c::O_NONBLOCK).map_err(fork)?;
        // The program's process writes one byte here before its exec when the host asked
        // to keep the command's background processes (the request is its, not this
        // process's); read when the program has ended, which is after that exec.
        let keep = sys::pipe(c::O_NONBLOCK).map_err(fork)?;
        Ok::<_, (u32, sys::Errno)>((sfd, pidfd, status, keep, ruleset))
    };
    let (sfd, pidfd, (status_r, status_w), (keep_r, keep_w), ruleset) = match setup() {
        Ok(made) => made,
        Err((step, e)) => refuse(control.as_fd(), taken.as_fd(), step, e),
    };
    let supervisor = sys::getpid();
    // SAFETY: this process has one thread.
    let program = match unsafe { sys::fork() } {
        Ok(0) => {
            drop((sfd, status_w, keep_r));
            program(
                control,
                taken,
                (pidfd, supervisor),
                (status_r, keep_w),
                ruleset,
            )
        }
        Ok(pid) => pid,
        Err(e) => refuse(control.as_fd(), taken.as_fd(), session::step::FORK, e),
    };
    // The request goes to the program's process, the status pipe's read end and this
    // process's pidfd to the host through it; this process holds none of them.
    drop((control, taken, pidfd, status_r, keep_w));
    let cfg = Config {
        flags: flag::SUBREAPER | flag::SCOPE_SIGNALS,
        report_fd: -1,
        status_fd: -1,
        init_step: 0,
        exec_step: 0,
        domain_fd: None,
        restrict_flags: 0,
        candidates: 0,
    };
    // Asked once the program has ended: its process wrote the byte before its exec, or
    // never will (it failed, or the host did not ask).
    let background = || {
        let mut byte = [0u8; 1];
        match sys::read(keep_r.as_fd(), &mut byte) {
            Ok(1) if byte[0] == KEEP => run::Background::Keep,
            _ => run::Background::End,
        }
    };
    run::supervise(&cfg, sfd.as_fd(), status_w.as_fd(), program, background)
}

/// The byte a command's program's process writes to its supervisor before its exec when
/// the host asked to keep its background processes ([`session::KEEP_BACKGROUND`]).
const KEEP: u8 = b'k';

/// Takes one request and fails it at `step` with `errno` (a supervisor that could not be
/// set up, or fork its program's process), then exits.
fn refuse(control: BorrowedFd<'_>, taken: BorrowedFd<'_>, step: u32, errno: sys::Errno) -> ! {
    let mut buf = [MaybeUninit::uninit(); 64];
    let mut cmsg = Control([0; CONTROL_SIZE]);
    match receive(control, &mut buf, &mut cmsg, false) {
        Received::Ended => {
            let _ = sys::write(taken, &[ENDED]);
            sys::exit_group(0)
        }
        Received::Failed => sys::exit_group(run::INIT_FAILED),
        Received::Bad => {
            let _ = sys::write(taken, &[TAKEN]);
            sys::exit_group(run::INIT_FAILED)
        }
        Received::Request(_, fds) => {
            let _ = sys::write(taken, &[TAKEN]);
            let _ = sys::write(
                fds[session::REPORT].as_fd(),
                &protocol::setup_record(step, errno),
            );
            sys::exit_group(start_failed())
        }
    }
}

/// The exit code of a command whose program could not be started.
fn start_failed() -> i32 {
    protocol::EXEC_FAILED
}

/// The program's process (a fork of its supervisor): its own nested domain, then, with
/// its request, the reply, its session, stdio, directory; then the program. Never
/// returns.
fn program(
    control: OwnedFd,
    taken: OwnedFd,
    (pidfd, supervisor): (OwnedFd, i32),
    (status, keep): (OwnedFd, OwnedFd),
    ruleset: BorrowedFd<'_>,
) -> ! {
    // Before the request. A second domain, nested in the supervisor's: the program
    // cannot signal it.
    let setup = sys::landlock_restrict_self(ruleset, 0)
        .and_then(|()| sys::prctl_set_pdeathsig(protocol::SIGKILL));
    // A supervisor that died before the death signal was armed (killed: the OOM killer,
    // say) would leave this process to run a command that nothing supervises or ends:
    // it goes before taking a request (the server sees its pair end without one).
    if sys::getppid() != supervisor {
        sys::exit_group(run::INIT_FAILED)
    }
    // Not zeroed: no page is touched beyond those the request fills.
    let mut buf = [MaybeUninit::<u8>::uninit(); session::MAX_REQUEST];
    let mut cmsg = Control([0; CONTROL_SIZE]);
    let (request, fds) = match receive(control.as_fd(), &mut buf, &mut cmsg, true) {
        Received::Request(bytes, fds) => (bytes, fds),
        Received::Ended => {
            let _ = sys::write(taken.as_fd(), &[ENDED]);
            sys::exit_group(0)
        }
        // A bad request, closed as it came (so the host sees no reply): the server
        // forks the next pair.
        Received::Bad => {
            let _ = sys::write(taken.as_fd(), &[TAKEN]);
            sys::exit_group(run::INIT_FAILED)
        }
        // A failed socket: the server's own read of it fails too, and ends the session.
        Received::Failed => sys::exit_group(run::INIT_FAILED),
    };
    // The request is this process's (the server reads it once this process's exec or
    // exit ends the pipe, and forks another pair).
    let _ = sys::write(taken.as_fd(), &[TAKEN]);
    let [stdin, stdout, stderr, report, reply] = fds;
    // First, so that the host has the supervisor to wait for whatever happens next.
    answer(reply.as_fd(), pidfd.as_fd(), status.as_fd());
    // Close-on-exec, as every fd of this process from 3 on (received with
    // `MSG_CMSG_CLOEXEC`, or made with it): closed at exec with the rest (below); the
    // control socket (fd 0) is replaced by the program's stdin.
    core::mem::forget((control, taken, pidfd, status, reply));
    let fail = |step: u32, errno: sys::Errno| -> ! {
        let _ = sys::write(report.as_fd(), &protocol::setup_record(step, errno));
        sys::exit_group(start_failed())
    };
    if let Err(e) = setup {
        fail(session::step::DOMAIN, e)
    }
    let Some(req) = session::Request::parse(request) else {
        fail(session::step::REQUEST, c::EINVAL)
    };
    // Before the exec, so that the supervisor finds it once the program has ended.
    if req.flags & session::KEEP_BACKGROUND != 0 {
        let _ = sys::write(keep.as_fd(), &[KEEP]);
    }
    drop(keep);
    // Pointers to the strings, in order: directory, candidates, argv, NULL, environment,
    // NULL. Left uninitialized (no page is touched beyond those written).
    let mut ptrs = [const { MaybeUninit::<*const u8>::uninit() }; session::MAX_STRINGS + 2];
    let base = req.strings.as_ptr();
    let argv_at = 1 + req.candidates;
    let env_at = argv_at + req.argc + 1;
    req.each_start(|i, at| {
        let slot = if i < env_at - 1 { i } else { i + 1 };
        if let Some(p) = ptrs.get_mut(slot) {
            p.write(base.wrapping_add(at));
        }
    });
    if let Some(p) = ptrs.get_mut(env_at - 1) {
        p.write(core::ptr::null());
    }
    if let Some(p) = ptrs.get_mut(env_at + req.envc) {
        p.write(core::ptr::null());
    }
    if req.flags & session::NEW_SESSION != 0 {
        if let Err(e) = sys::setsid() {
            fail(session::step::SESSION, e)
        }
    }
    let stdio = [stdin, stdout, stderr];
    for (target, fd) in stdio.iter().enumerate() {
        // The received fds are 3 or above (0 to 2 were taken when they came).
        // SAFETY: fds 0 to 2 are the control socket and `/dev/null`, whose owners were
        // forgotten (above) or are the server's, which this process does not use: owned
        // by nothing here.
        if let Err(e) = unsafe { sys::dup3(fd.as_fd(), target as i32) } {
            fail(session::step::STDIO, e)
        }
    }
    // Their numbers from 3 on close at exec, with every other fd (below).
    core::mem::forget(stdio);
    let at = |i: usize| -> *const u8 {
        // SAFETY: every slot up to the environment's NULL was written above.
        ptrs.get(i)
            .map_or(core::ptr::null(), |p| unsafe { p.assume_init() })
    };
    // SAFETY: slot 0 points at the directory's first byte in the request, a string the
    // parser found NUL-terminated, alive in `buf` (which nothing writes again) until exec.
    let cwd = unsafe { CStr::from_ptr(at(0).cast()) };
    if let Err(e) = sys::chdir(cwd) {
        fail(session::step::CWD, e)
    }
    // Everything but stdio closes at exec: the report pipe (its EOF tells the host that
    // the program runs), stdio's sources, the supervisor's fds and any other, all made or
    // received close-on-exec already, and so marked again here whatever they are.
    if let Err(e) = sys::close_range_at_exec(3) {
        fail(session::step::STDIO, e)
    }
    // Signals that came while this process waited forked ahead were not this command's:
    // with `keep_session` it sat in the caller's process group, where a terminal's `^C`
    // or a `kill` of the group meant for an earlier command reached it too, and would
    // end this program the moment its signals were unblocked.
    sys::discard_pending_signals();
    if let Err(e) = sys::set_sigmask(0) {
        fail(session::step::EXEC, e)
    }
    let argv_at = 1 + req.candidates;
    let argv = ptrs.as_ptr().wrapping_add(argv_at).cast::<*const u8>();
    let envp = ptrs
        .as_ptr()
        .wrapping_add(argv_at + req.argc + 1)
        .cast::<*const u8>();
    let mut seen = c::ENOENT;
    for i in 1..argv_at {
        // SAFETY: slot `i` is a candidate path, NUL-terminated in the request; `argv` and
        // `envp` point at initialized, NULL-terminated runs of `ptrs` (written above),
        // whose strings live in `buf`.
        let e = unsafe { sys::execve(at(i), argv, envp) };
        match e {
            c::ENOENT | c::ENOTDIR | c::ESTALE => {}
            c::EACCES | c::EPERM | c::ENOEXEC => seen = e,
            _ => {
                seen = e;
                break;
            }
        }
    }
    fail(session::step::EXEC, seen)
}
