//! The session server and each command's supervisor: a warm session's commands, started
//! inside the live sandbox at the cost of two forks and an exec.
//!
//! The server is the starter of a session's sandbox (`start.rs`, `argv[0]` =
//! [`session::SERVE_ARGV0`]): it runs inside every wall of the sandbox, in the program's
//! nested Landlock domain, maps no host memory (the image was exec'd), is not dumpable,
//! and holds nothing but its control socket (fd 0) and `/dev/null` on fds 1 and 2. For
//! each request ([`session`]'s protocol) it forks a *supervisor* and replies with a
//! pidfd of it. The supervisor:
//!
//! 1. enters a fresh Landlock domain nested in the server's, which scopes signals and
//!    abstract unix sockets: every command lives in a domain of its own, which no other
//!    command's domain contains, so that (Landlock's ptrace rule and its scopes) no
//!    command can trace, signal, read the `/proc/PID/{environ,mem,fd}` of, or reach the
//!    abstract sockets of another command, of the server or of the init;
//! 2. becomes a child subreaper with the server's death as its kill request;
//! 3. forks the program's process, which enters one more nested domain (so that it cannot
//!    signal its supervisor either), takes its session, puts its stdio in place, changes
//!    to its directory, closes every other fd and execs the program;
//! 4. supervises it as layer 2's init does (`run.rs`): forwards the host's signals, and
//!    when the program ends kills and reaps every descendant, writes the program's raw wait
//!    status to the command's status pipe and exits; or, when the host asked to keep the
//!    command's background processes ([`session::KEEP_BACKGROUND`]), writes the status
//!    and stays their subreaper until they end, or the server does (its parent-death
//!    signal is the kill request: then it ends them all).
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
    let mut buf = [0u8; session::MAX_REQUEST];
    let mut cmsg = Control([0; CONTROL_SIZE]);
    loop {
        reap_ended();
        let mut iov = sys::IoVec {
            base: buf.as_mut_ptr(),
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
        let n = match sys::recvmsg(control.as_fd(), &mut hdr, c::MSG_CMSG_CLOEXEC) {
            // The host closed its end: the session is over. The init ends what is left.
            Ok(0) => sys::exit_group(0),
            Ok(n) => n,
            Err(c::EINTR) => continue,
            Err(_) => sys::exit_group(run::INIT_FAILED),
        };
        let truncated = hdr.flags & (c::MSG_TRUNC | c::MSG_CTRUNC) != 0;
        let fds = received_fds(&cmsg.0, hdr.controllen);
        let (Some(fds), false) = (fds, truncated) else {
            // Whatever fds came are closed as `fds` drops.
            answer(control.as_fd(), c::EINVAL, None);
            continue;
        };
        let request = buf.get(..n).unwrap_or(&[]);
        // SAFETY: this process has one thread.
        match unsafe { sys::fork() } {
            Ok(0) => {
                drop(control);
                command(request, fds)
            }
            Ok(pid) => {
                drop(fds);
                match sys::pidfd_open(pid) {
                    Ok(pidfd) => answer(control.as_fd(), 0, Some(pidfd.as_fd())),
                    Err(e) => {
                        // Unsupervisable by the host: the supervisor ends its command.
                        let _ = sys::kill(pid, protocol::KILL_REQUEST);
                        answer(control.as_fd(), e, None);
                    }
                }
            }
            Err(e) => {
                drop(fds);
                answer(control.as_fd(), e, None);
            }
        }
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

/// Sends the reply, with `pidfd` when given. A failure means the host is gone; the next
/// `recvmsg` says so.
fn answer(control: BorrowedFd<'_>, errno: i32, pidfd: Option<BorrowedFd<'_>>) {
    let mut record = session::reply(errno);
    let mut iov = sys::IoVec {
        base: record.as_mut_ptr(),
        len: record.len(),
    };
    let mut cmsg = Control([0; CONTROL_SIZE]);
    let mut controllen = 0;
    if let Some(fd) = pidfd {
        let len: u64 = 16 + 4;
        cmsg.0[..8].copy_from_slice(&len.to_ne_bytes());
        cmsg.0[8..12].copy_from_slice(&c::SOL_SOCKET.to_ne_bytes());
        cmsg.0[12..16].copy_from_slice(&c::SCM_RIGHTS.to_ne_bytes());
        cmsg.0[16..20].copy_from_slice(&fd.raw().to_ne_bytes());
        // CMSG_SPACE(4): the data padded to 8.
        controllen = 24;
    }
    let hdr = sys::MsgHdr {
        name: core::ptr::null_mut(),
        namelen: 0,
        iov: &raw mut iov,
        iovlen: 1,
        control: if controllen == 0 {
            core::ptr::null_mut()
        } else {
            cmsg.0.as_mut_ptr()
        },
        controllen,
        flags: 0,
    };
    let _ = sys::sendmsg(control, &hdr, c::MSG_NOSIGNAL);
}

/// The supervisor of one command (a fork of the server). Never returns.
fn command(request: &[u8], fds: [OwnedFd; session::FDS]) -> ! {
    let [stdin, stdout, stderr, status, report] = fds;
    let fail = |step: u32, errno: sys::Errno| -> ! {
        let _ = sys::write(report.as_fd(), &protocol::setup_record(step, errno));
        sys::exit_group(start_failed())
    };
    // The server's stdio (its control socket, closed already, and /dev/null): not the
    // command's.
    // SAFETY: fds 0 to 2 are the server's, which nothing in this fork uses again (the
    // control socket's `OwnedFd` was dropped before the call).
    if let Err(e) = unsafe { sys::close_range(0, 2) } {
        fail(session::step::STDIO, e)
    }
    if let Err(e) = sys::landlock_enter_scoped(SCOPES) {
        fail(session::step::DOMAIN, e)
    }
    let setup = || -> sys::Result<OwnedFd> {
        sys::prctl_set_name(c"stockade-cmd")?;
        sys::prctl_set_child_subreaper()?;
        sys::prctl_set_pdeathsig(protocol::KILL_REQUEST)?;
        sys::signalfd(!0)
    };
    let sfd = match setup() {
        Ok(fd) => fd,
        Err(e) => fail(session::step::DOMAIN, e),
    };
    let Some(req) = session::Request::parse(request) else {
        fail(session::step::REQUEST, c::EINVAL)
    };
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
    // SAFETY: this process has one thread.
    let program = match unsafe { sys::fork() } {
        Ok(0) => {
            drop(sfd);
            drop(status);
            program(&req, &ptrs, [stdin, stdout, stderr], report)
        }
        Ok(pid) => pid,
        Err(e) => fail(session::step::FORK, e),
    };
    drop((stdin, stdout, stderr, report));
    let cfg = Config {
        flags: flag::SUBREAPER | flag::SCOPE_SIGNALS,
        report_fd: -1,
        status_fd: -1,
        init_step: 0,
        go_fd: -1,
        program,
    };
    let background = if req.flags & session::KEEP_BACKGROUND != 0 {
        run::Background::Keep
    } else {
        run::Background::End
    };
    run::supervise(&cfg, sfd.as_fd(), status.as_fd(), program, background)
}

/// The exit code of a command whose program could not be started.
fn start_failed() -> i32 {
    protocol::start::EXEC_FAILED
}

/// The program's process: its own nested domain, session, stdio, directory; then the
/// program. Never returns.
fn program(
    req: &session::Request<'_>,
    ptrs: &[MaybeUninit<*const u8>; session::MAX_STRINGS + 2],
    stdio: [OwnedFd; 3],
    report: OwnedFd,
) -> ! {
    let fail = |step: u32, errno: sys::Errno| -> ! {
        let _ = sys::write(report.as_fd(), &protocol::setup_record(step, errno));
        sys::exit_group(start_failed())
    };
    // A second domain, nested in the supervisor's: the program cannot signal it.
    if let Err(e) = sys::landlock_enter_scoped(SCOPES) {
        fail(session::step::DOMAIN, e)
    }
    if req.flags & session::NEW_SESSION != 0 {
        if let Err(e) = sys::setsid() {
            fail(session::step::SESSION, e)
        }
    }
    if let Err(e) = sys::prctl_set_pdeathsig(protocol::SIGKILL) {
        fail(session::step::DOMAIN, e)
    }
    for (target, fd) in stdio.iter().enumerate() {
        // The received fds are 3 or above (the server held 0 to 2 when they came).
        // SAFETY: fds 0 to 2 are free in this process (the supervisor closed them) and
        // owned by nothing.
        if let Err(e) = unsafe { sys::dup3(fd.as_fd(), target as i32) } {
            fail(session::step::STDIO, e)
        }
    }
    drop(stdio);
    let at = |i: usize| -> *const u8 {
        // SAFETY: the supervisor wrote every slot up to the environment's NULL.
        ptrs.get(i)
            .map_or(core::ptr::null(), |p| unsafe { p.assume_init() })
    };
    // SAFETY: slot 0 points at the directory's first byte in the request, a string the
    // parser found NUL-terminated, alive in this process's copy of the server's buffer.
    let cwd = unsafe { CStr::from_ptr(at(0).cast()) };
    if let Err(e) = sys::chdir(cwd) {
        fail(session::step::CWD, e)
    }
    // Everything but stdio and the report pipe (close-on-exec) goes.
    let r = report.as_fd().raw() as u32;
    // SAFETY: the fds from 3 on are the report pipe (kept) and none other this process
    // owns: stdio's sources were dropped, the signalfd and status pipe too.
    let closed = unsafe { sys::close_range(3, r.saturating_sub(1)) }
        // SAFETY: as above, past the report pipe.
        .and_then(|()| unsafe { sys::close_range(r + 1, u32::MAX) });
    if let Err(e) = closed {
        fail(session::step::STDIO, e)
    }
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
        // `envp` point at initialized, NULL-terminated runs of `ptrs` (the supervisor wrote
        // them), whose strings live in this process's copy of the request.
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
