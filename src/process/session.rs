//! [`Session`]: one live sandbox that runs many commands, each at the cost of a fork and
//! an exec inside it rather than a whole sandbox.
//!
//! # DESIGN: the session is a sandbox whose program serves commands
//!
//! [`Sandbox::session`] spawns an ordinary command of the sandbox, with every wall, the
//! layout and the init as for any command, whose program's process plays the init
//! image's second role: the *session server* (`init/src/session.rs`). It is made exactly
//! as any program's process (the init's fork, in a nested Landlock domain, with its
//! session), and then, instead of exec'ing a program, it serves a `SOCK_SEQPACKET` control
//! socket on its stdin. So the server maps no host memory, is not dumpable, and holds
//! nothing but that socket;
//! everything that ends a sandbox (the init, the kill, the host's death) ends the session
//! with it, and [`Session::close`] is the end of that one command.
//!
//! A command of the session ([`Session::command`] gives the same [`Command`] builder) is
//! resolved on the host as any (environment with its `secret_env`, working directory,
//! program candidates on the plan's `PATH`, stdio) and sent as one message with its stdio,
//! a report pipe and one end of a reply socket of its own (`SCM_RIGHTS`). The server keeps
//! the next two commands forked ahead of their requests, each a *supervisor*, which has
//! entered a fresh Landlock domain nested in the server's (it handles no access right and
//! scopes signals and abstract unix sockets: Landlock ≥ 6), become a child subreaper and
//! made the command's status pipe, and its child, the program's process, which has entered
//! one more nested domain and waits on the control socket. That process takes the
//! request, sends the reply (a pidfd of the supervisor and the status pipe's read end)
//! and execs the program: one wake-up and no fork inside the sandbox on the start's path
//! (the server forks another pair once the program runs). The host waits once, for the report pipe's end (the
//! program runs) or a setup record (a failure to start: not found, a bad directory, which
//! fails the spawn as on a fresh sandbox), then takes the reply, which was sent before.
//! The host's [`Child`](crate::Child) holds the pidfd as it holds a sandbox's init
//! (layer 2's kind, which ends every descendant on a kill request), and reads the
//! program's exact wait status from the status pipe, written by the supervisor once every
//! process the command started has been killed and reaped.
//!
//! Isolation between commands is Landlock's: a process may ptrace (and so read
//! `/proc/PID/{environ,mem,fd}` of, or `pidfd_getfd` from) only processes of its own
//! domain or of domains nested in it; its scopes keep it from signalling, or connecting
//! to the abstract sockets of, processes outside them. Each command's domain is a sibling
//! of every other's, below the server's and the init's, so a command can reach none of
//! them, and none of another command's processes; the server and the supervisors are also
//! not dumpable. What Landlock has no hook for (another process's resource limits,
//! scheduling and I/O priority, where the kernel checks only the uid, and SysV IPC),
//! the seccomp filter refuses: a session's sandbox gets layer 2's
//! [`host_namespaces`](crate::plan::FilterOptions::host_namespaces) filter on the full
//! layer too. A session needs Landlock with scopes (ABI ≥ 6) on a layer with an init
//! (full or landlock): without them [`Sandbox::session`] refuses, rather than run
//! commands that could read each other's secrets.
//!
//! What persists between commands is what the sandbox keeps: the workspace and the
//! writable roots, and the session's `/tmp` (the full layer's own, or on layer 2 the
//! session's private `TMPDIR`, given to every command). Processes do not: a command's
//! background processes end with it, unless the host opted in for that command
//! ([`Command::keep_background`]). Then its supervisor writes the program's status when
//! the program ends, and stays, the subreaper of what is left, until that has ended or
//! the session closes (its parent-death signal, the server's end, is its kill request).
//!
//! # What keeps its meaning per command, and what is the session's
//!
//! - The wall-time limit is per command (the watchdog sends the supervisor its kill
//!   request). The limits made of rlimits (CPU time, file size, open files) hold per
//!   process as always; the cgroup's (memory, processes) hold for the session as a whole,
//!   which includes the server and the next two commands' four processes, waiting forked.
//! - The full layer's `.git` copy-on-write layer is the session's: its merge needs every
//!   writer gone, so it is made and finished once, with the session's own sandbox, at
//!   [`Session::close`]; meanwhile the host's `.git` is not the program's to write.
//!   Overlay mode's change set likewise. Layer 2's `.git` snapshot, the control files of
//!   the host's nested repositories and the check for repositories the program made are
//!   each command's, as for a command of its own sandbox: taken when it starts, and put
//!   back and checked when it ends (its supervisor's exit), so that the host's git
//!   between two commands runs nothing an earlier one planted (review: they were the
//!   session's, at its close). Commands that overlap share the snapshot the first took.
//!   A command that keeps background processes has its checks at the close, when those
//!   have ended.
//! - A command cannot have a pseudo-terminal, a controlling terminal, passed fds or
//!   explain ([`Command::explain`]): its spawn fails with `EOPNOTSUPP` (`Child::denials`
//!   and the leak scan of its output work as for any command, on what the host reads).
//! - `Child::id` is the supervisor's pid in the host's namespace (0 when it had ended
//!   and been reaped before the spawn returned), `Child::program_id`
//!   `None`; the job-control signals (`SIGSTOP`, `SIGTSTP`, `SIGCONT`) are unsupported.
//! - The walls are the ones the session started with: a later `Sandbox::set_policy` or
//!   `set_mode` changes how a command's environment and directory are resolved, not the
//!   live sandbox. With `network = "allow"` the proxy serves the session's sandbox, and
//!   each command gets its variables (`HTTP_PROXY`, …), replacing any of its own.
//! - Commands share the session's PID namespace. On the full layer its `/proc` is
//!   mounted with `hidepid=ptraceable` (`Exec::hide_pids`): a command lists only its own
//!   processes, not another command's pid or `/proc/PID/cmdline`, nor the init's or the
//!   server's. On layer 2 (the host's `/proc`) it can list another's pid and command line
//!   (as `ps` does), but not its environment, memory or fds.

use std::ffi::{OsStr, OsString};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use stockade_init::protocol::{self, session as wire};

use super::{Child, Command, Sandbox, Stdio, launch};
use crate::backend::linux::init;
use crate::error::{Errno, Error, SpawnError};
use crate::plan::{Plan, Step};
use crate::policy::Layer;

/// A live sandbox that runs many commands ([`Sandbox::session`]).
///
/// Dropping it ends every command still running and the sandbox, as
/// [`Session::close`] does.
///
/// Its fd ([`AsFd`]) is a pidfd of the session's sandbox (its first process): readable
/// (`POLLIN`) once the sandbox has ended, whether closed or died (killed from outside,
/// say), after which every command fails to start. A server of the session polls it to
/// stop serving a sandbox that is gone.
#[derive(Debug)]
pub struct Session {
    sandbox: Sandbox,
    link: Arc<Link>,
    /// The server's sandbox: its init's `Child`.
    server: Option<Child>,
}

impl AsFd for Session {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.link.sandbox.as_fd()
    }
}

/// The host's end of a session's control socket, shared by its commands.
#[derive(Debug)]
pub(super) struct Link {
    /// `None` once the session is closed.
    control: Mutex<Option<OwnedFd>>,
    /// A duplicate of the session's pidfd (its sandbox's first process; the server's
    /// `Child` goes at the close): readable once the sandbox has ended.
    sandbox: OwnedFd,
    /// Layer 2: the session's private `TMPDIR`, every command's.
    tmpdir: Option<OsString>,
    /// `network = "allow"`: the variables that lead to the session's egress proxy
    /// (`HTTP_PROXY`, …), every command's.
    proxy_env: Vec<(OsString, OsString)>,
    /// The `.git` snapshots and nested-repository watches of the commands that keep
    /// background processes: checked at the close, when those have ended.
    at_close: Mutex<Vec<(super::launch::GitSession, super::nested::Watch)>>,
}

impl Sandbox {
    /// Starts a warm session: the sandbox with every wall and its init, and a server
    /// inside it that starts each [`Session::command`] with one fork and exec (see the
    /// module's design notes in the source).
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] with `EOPNOTSUPP` when the layer has no init (passthrough) or
    /// Landlock cannot scope signals here (ABI < 6): commands could not be kept apart.
    /// Otherwise as [`Command::spawn`].
    pub fn session(&self) -> Result<Session, Error> {
        let inner = self.current();
        let plan = inner.prepared.plan();
        let scoped = self
            .landlock_status()
            .as_ref()
            .is_some_and(crate::backend::linux::landlock::Status::signals_scoped);
        if plan.layer == Layer::Passthrough || !scoped {
            return Err(SpawnError::Os {
                call: "start a session (needs the full or landlock layer and Landlock ABI \
                       6 or later, which keeps its commands apart)",
                source: io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            }
            .into());
        }
        let (host, server) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| SpawnError::Os {
            call: "socketpair (session control)",
            source: e.into(),
        })?;
        let mut cmd = self.command(wire::SERVE_ARGV0.to_str().unwrap_or("stockade-serve"));
        cmd.serve = true;
        cmd.stdin(Stdio::from(server))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let server = cmd.spawn()?;
        let tmpdir = server
            .private_tmp
            .as_ref()
            .map(|t| t.path().as_os_str().to_owned());
        // The proxy serves the session's sandbox, and so every command in it: its
        // listeners (inside the sandbox's namespace, or on the host's loopback where the
        // host makes and admits each connect of the sandbox's processes).
        let proxy_env = server
            .egress
            .as_ref()
            .map(|run| crate::plan::proxy_env(run.http_addr(), run.socks_addr()))
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let ended =
            super::launch::dup_cloexec(server.handle.as_fd()).map_err(|e| SpawnError::Os {
                call: "dup (the session's pidfd)",
                source: e,
            })?;
        Ok(Session {
            sandbox: self.clone(),
            link: Arc::new(Link {
                sandbox: ended,
                control: Mutex::new(Some(host)),
                tmpdir,
                proxy_env,
                at_close: Mutex::new(Vec::new()),
            }),
            server: Some(server),
        })
    }
}

impl Session {
    /// A command to run in this session: the same builder as [`Sandbox::command`], whose
    /// `spawn`, `output` and `status` start the program inside the live sandbox.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = self.sandbox.command(program);
        cmd.session = Some(Arc::clone(&self.link));
        cmd
    }

    /// The host's process id of the session's sandbox's first process (its init): every
    /// process of the session, its commands' included, descends from it (on layer 2 it is
    /// their subreaper; on the full layer their PID namespace's init). 0 once closed.
    pub fn id(&self) -> u32 {
        self.server.as_ref().map_or(0, Child::id)
    }

    /// Ends every command still running and the session's sandbox, and waits until
    /// nothing of it is left. Returns the server's exit status (0 when it ended because
    /// the session was closed).
    ///
    /// # Errors
    ///
    /// The error of waiting for the sandbox.
    pub fn close(mut self) -> io::Result<std::process::ExitStatus> {
        self.end()
    }

    fn end(&mut self) -> io::Result<std::process::ExitStatus> {
        // The server reads EOF and exits; its init then ends every process of the sandbox
        // (and each supervisor, on its parent's death, its command first).
        drop(
            self.link
                .control
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let Some(mut server) = self.server.take() else {
            return Ok(std::process::ExitStatus::default());
        };
        let status = server.wait()?;
        // Gone, not only reported: nothing of the session runs after `close`.
        launch::wait_gone(&server.handle);
        // What the commands that kept background processes left: checked now that none
        // of them runs (each waits for its supervisor's exit), as a command's own checks
        // are at its end (each restoration and neutralized repository is logged).
        let kept =
            std::mem::take(&mut *self.link.at_close.lock().unwrap_or_else(|e| e.into_inner()));
        for (mut git, mut nested) in kept {
            nested.finish();
            git.finish();
        }
        Ok(status)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// Whether the process of `pidfd` has ended (the pidfd is readable), without waiting.
fn ended(pidfd: std::os::fd::BorrowedFd<'_>) -> bool {
    let mut fds = [nix::poll::PollFd::new(pidfd, nix::poll::PollFlags::POLLIN)];
    matches!(
        nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO),
        Ok(1)
    )
}

impl Link {
    /// Keeps the `.git` snapshots and the nested-repository watch of a command that keeps
    /// background processes, to be checked at the session's close.
    pub(super) fn check_at_close(
        &self,
        git: super::launch::GitSession,
        nested: super::nested::Watch,
    ) {
        self.at_close
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((git, nested));
    }

    /// Layer 2: the session's `TMPDIR` replaces the command's.
    pub(super) fn set_env(&self, env: &mut Vec<(OsString, OsString)>) {
        if let Some(dir) = &self.tmpdir {
            env.retain(|(k, _)| k != "TMPDIR");
            env.push(("TMPDIR".into(), dir.clone()));
        }
        env.retain(|(k, _)| !self.proxy_env.iter().any(|(n, _)| n == k));
        env.extend(self.proxy_env.iter().cloned());
    }

    /// Starts one command: sends the request, waits until the program has been exec'd
    /// (the report pipe's EOF) or has failed to start (a record), then takes the reply
    /// (the supervisor's pidfd, the status pipe). Returns the supervisor's pid in the
    /// host's namespace and its handle.
    pub(super) fn spawn(
        &self,
        plan: &Plan,
        (program, args, env, cwd): (&OsStr, &[OsString], &[(OsString, OsString)], &Path),
        stdio: [RawFd; 3],
        keep_background: bool,
    ) -> Result<(libc::pid_t, init::Handle), Error> {
        // Checks every string as a fresh sandbox's spawn does, and finds the candidates.
        let prepared = crate::backend::program::Program::new(
            program,
            args.to_vec(),
            env.to_vec(),
            &plan.path,
        )?;
        let candidates = &prepared.candidates;
        let mut flags = 0;
        if plan.steps.contains(&Step::NewSession) {
            flags |= wire::NEW_SESSION;
        }
        if keep_background {
            flags |= wire::KEEP_BACKGROUND;
        }
        let request = encode(flags, cwd, candidates, args, env)?;
        let os = |call: &'static str| {
            move |e: nix::Error| SpawnError::Os {
                call,
                source: e.into(),
            }
        };
        let (report_r, report_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(os("pipe2 (report)"))?;
        let (reply_r, reply_w) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(os("socketpair (session reply)"))?;
        // -1: the host's own fd of that number, as a fresh sandbox inherits it.
        let stdio: [RawFd; 3] = [0, 1, 2].map(|i| if stdio[i] < 0 { i as RawFd } else { stdio[i] });
        let fds = [
            stdio[0],
            stdio[1],
            stdio[2],
            report_w.as_raw_fd(),
            reply_w.as_raw_fd(),
        ];
        {
            let control = self.control.lock().unwrap_or_else(|e| e.into_inner());
            let Some(control) = control.as_ref() else {
                return Err(SpawnError::Os {
                    call: "start a command in a closed session",
                    source: io::Error::from_raw_os_error(libc::ESHUTDOWN),
                }
                .into());
            };
            // A sandbox known to have ended (killed from outside) starts nothing: on
            // layer 2 a command waiting ahead could otherwise still take the request in
            // the instant before its parent-death signal reaches it, only to be killed.
            if ended(self.sandbox.as_fd()) {
                return Err(SpawnError::Os {
                    call: "start a command in a session whose sandbox has ended",
                    source: io::Error::from_raw_os_error(libc::ESHUTDOWN),
                }
                .into());
            }
            let cmsg = [ControlMessage::ScmRights(&fds)];
            let iov = [IoSlice::new(&request)];
            sendmsg::<()>(
                control.as_raw_fd(),
                &iov,
                &cmsg,
                MsgFlags::MSG_NOSIGNAL,
                None,
            )
            .map_err(os("sendmsg (session request)"))?;
        }
        drop((report_w, reply_w));
        // The answer about the program's start: EOF once it has exec'd (or once the
        // request was dropped unserved: the session ended, or refused it). The one wait
        // of the start: the program's process sends the reply before its exec closes its
        // end of the report pipe, so the reply is waiting by now when there is one (and
        // the reply socket's end, closed at the same exec, says so when there is none).
        let mut record = [0u8; protocol::SETUP_RECORD_SIZE + 1];
        let n = read_all(report_r.as_fd(), &mut record);
        let reply = receive_reply(reply_r.as_fd());
        if let Some(r) = crate::backend::report::Record::decode(record.get(..n).unwrap_or(&[])) {
            let (step, errno) = (r.step, r.errno);
            // The supervisor ends (the status pipe says how, and is not needed): await its
            // end. (Without a reply, the program's process failed before it had the
            // request's fds: the supervisor could not be set up, and ends.)
            if let Ok((pidfd, ..)) = reply {
                let _ = init::wait_exited(pidfd.as_fd());
            }
            return Err(start_failure(program, cwd, step, errno));
        }
        let (pidfd, pid, status_r) = reply?;
        let handle = init::Handle::new(pidfd, Some(status_r), Some(protocol::flag::SUBREAPER));
        Ok((pid, handle))
    }
}

/// The error of a failed start, as a fresh sandbox reports it.
fn start_failure(program: &OsStr, cwd: &Path, step: u32, errno: i32) -> Error {
    let program = program.to_string_lossy().into_owned();
    if step == wire::step::EXEC && errno == libc::ENOENT {
        return SpawnError::NotFound { program }.into();
    }
    use crate::error::SetupStep;
    let what = match step {
        wire::step::DOMAIN => SetupStep::Landlock,
        wire::step::SESSION => SetupStep::NewSession,
        wire::step::STDIO => SetupStep::Stdio,
        wire::step::CWD => SetupStep::Chdir {
            path: cwd.to_path_buf(),
        },
        wire::step::EXEC => SetupStep::Exec { program },
        wire::step::FORK => SetupStep::Init,
        _ => SetupStep::Unknown(step),
    };
    SpawnError::Setup {
        step: what,
        errno: Errno::from_raw(errno),
    }
    .into()
}

/// Reads until EOF or `buf` is full; the count read (errors end the read).
fn read_all(fd: std::os::fd::BorrowedFd<'_>, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match nix::unistd::read(fd, buf.get_mut(n..).unwrap_or(&mut [])) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(nix::Error::EINTR) => {}
            Err(_) => break,
        }
    }
    n
}

/// Receives the command's reply from its reply socket: exactly one record saying
/// started, with exactly two fds, a pidfd and a pipe's read end. Anything else is an
/// error (and every fd received is closed); no reply at all (the socket's EOF) means the
/// request was not served: the session has ended, or it refused the request. Returns the
/// supervisor's pidfd, the pid it names in the host's namespace (0 once reaped) and the
/// status pipe.
fn receive_reply(
    reply: std::os::fd::BorrowedFd<'_>,
) -> Result<(OwnedFd, libc::pid_t, OwnedFd), Error> {
    let bad = |what: &str| SpawnError::Os {
        call: "receive the session supervisor's reply",
        source: io::Error::new(io::ErrorKind::InvalidData, what.to_owned()),
    };
    let mut buf = [0u8; wire::REPLY_SIZE + 1];
    let mut space = nix::cmsg_space!([RawFd; wire::REPLY_FDS + 1]);
    let (n, flags, mut fds) = loop {
        let mut iov = [IoSliceMut::new(&mut buf)];
        match recvmsg::<()>(
            reply.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for c in msg.cmsgs().into_iter().flatten() {
                    if let ControlMessageOwned::ScmRights(list) = c {
                        // SAFETY: the kernel installed these fds for this message; nothing
                        // else in the process has their numbers.
                        fds.extend(
                            list.into_iter()
                                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                        );
                    }
                }
                break (msg.bytes, msg.flags, fds);
            }
            Err(nix::Error::EINTR) => {}
            Err(e) => {
                return Err(SpawnError::Os {
                    call: "recvmsg (session reply)",
                    source: e.into(),
                }
                .into());
            }
        }
    };
    if n == 0 {
        return Err(SpawnError::Os {
            call: "start a command in the session (it has ended, or refused the request)",
            source: io::Error::from_raw_os_error(libc::ESHUTDOWN),
        }
        .into());
    }
    if flags.intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC) {
        return Err(bad("truncated").into());
    }
    let errno =
        wire::decode_reply(buf.get(..n).unwrap_or(&[])).ok_or_else(|| bad("not a reply"))?;
    if errno != 0 {
        return Err(bad("not a started reply").into());
    }
    let (Some(status), Some(pidfd), true) = (fds.pop(), fds.pop(), fds.is_empty()) else {
        return Err(bad("not two fds").into());
    };
    let Some(pid) = pidfd_field(&pidfd) else {
        return Err(bad("not a pidfd").into());
    };
    let readable_pipe = nix::sys::stat::fstat(status.as_fd())
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO)
        && nix::fcntl::fcntl(status.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
            .is_ok_and(|fl| fl & libc::O_ACCMODE == libc::O_RDONLY && fl & libc::O_NONBLOCK != 0);
    if !readable_pipe {
        return Err(bad("not a non-blocking pipe's read end").into());
    }
    Ok((pidfd, pid.max(0), status))
}

/// The `Pid:` field of a pidfd's fdinfo: the pid in this process's namespace, -1 once the
/// process has been reaped (a fast command's supervisor may be, by the server, before
/// the host looks); `None` for an fd that is not a pidfd.
fn pidfd_field(fd: &OwnedFd) -> Option<libc::pid_t> {
    use std::io::Read;
    let mut file = std::fs::File::open(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    // A pidfd's fdinfo is a few short lines; more than this is not one.
    let mut buf = [0u8; 1024];
    let mut n = 0;
    while n < buf.len() {
        match file.read(buf.get_mut(n..).unwrap_or(&mut [])) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let info = std::str::from_utf8(buf.get(..n).unwrap_or(&[])).ok()?;
    let line = info.lines().find_map(|l| l.strip_prefix("Pid:"))?;
    line.trim().parse().ok()
}

/// The request's bytes ([`wire`]'s format).
fn encode(
    flags: u32,
    cwd: &Path,
    candidates: &[std::ffi::CString],
    args: &[OsString],
    env: &[(OsString, OsString)],
) -> Result<Vec<u8>, Error> {
    let too_big = || SpawnError::Os {
        call: "send the command to the session (too many or too long arguments and \
               variables for one request)",
        source: io::Error::from_raw_os_error(libc::E2BIG),
    };
    let total = 1 + candidates.len() + args.len() + env.len();
    let count = |n: usize| u32::try_from(n).map_err(|_| too_big());
    if total > wire::MAX_STRINGS {
        return Err(too_big().into());
    }
    let mut out = Vec::with_capacity(4096);
    out.extend_from_slice(&wire::header(
        flags,
        count(candidates.len())?,
        count(args.len())?,
        count(env.len())?,
    ));
    let nul = |s: &[u8]| -> Result<(), Error> {
        if s.contains(&0) {
            return Err(crate::error::PlanError::NulInArgument {
                what: "working directory".into(),
            }
            .into());
        }
        Ok(())
    };
    let push = |s: &[u8], out: &mut Vec<u8>| -> Result<(), Error> {
        nul(s)?;
        out.extend_from_slice(s);
        out.push(0);
        Ok(())
    };
    push(cwd.as_os_str().as_bytes(), &mut out)?;
    for c in candidates {
        push(c.as_bytes(), &mut out)?;
    }
    for a in args {
        push(a.as_bytes(), &mut out)?;
    }
    for (k, v) in env {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        push(&kv, &mut out)?;
    }
    if out.len() > wire::MAX_REQUEST {
        return Err(too_big().into());
    }
    Ok(out)
}
