//! The host's side of [`Command::explain`](crate::Command::explain) on Linux: the
//! explained filter's listener, and the thread that answers it.
//!
//! With explain on, the setup child installs the filter in its explained form
//! ([`seccomp::build_explained`]) with a listener and sends the listener here before it
//! execs. One thread per run then answers every notification: it runs the filter the
//! sandbox would have installed without explain on the call's `seccomp_data`
//! ([`seccomp::Explained::answer`]), records the denial, and fails the call with exactly
//! that errno, so the program sees what it would have seen. The record is made before the
//! answer, so once the program has ended its count is complete.
//!
//! With `network = "none"` in a network namespace of its own, `connect` and `sendto` with
//! a destination notify too: the thread reads the address from the program's memory (`process_vm_readv`, at most one
//! `sockaddr_storage`; a report only, since the program may change it after the read)
//! and lets the call run unchanged (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). The namespace,
//! not this thread, refuses a connect that leaves loopback.
//!
//! Every path-taking call notifies too ([`seccomp::path_call`]: `openat`, `execve`, the
//! stat family, `mkdirat`, `unlinkat`, `renameat`, `linkat`, `symlinkat`, `truncate`, the
//! chmod and chown families). The thread reads each path from the program's memory (at
//! most `PATH_MAX` bytes, page by page, then checks that the notification is still
//! pending: a racing program can only falsify its own report), resolves a relative one
//! against the caller's working directory or directory fd (their `/proc/<pid>` links, read
//! from the host), records it when the layout refuses or hides it ([`View::classify`]),
//! and lets the call continue: the kernel decides, never this thread.
//!
//! Landlock's own denials come from the kernel's audit log where the host may read it
//! (a root host with audit enabled, [`super::audit`]); they add what the layout view
//! cannot see (device ioctls, reparenting, signals and tracing across domains, TCP
//! ports), and drop what repeats it.
//!
//! Layer 2's `network = "allow"` uses the same listener with explain off or on
//! ([`Pending::new`]'s `supervise`): every `connect` notifies, and the host makes it on the
//! program's own socket (`pidfd_getfd`), to the address it read and checked: the egress
//! proxy's ports on `127.0.0.1` only (Landlock's TCP rules name ports, not addresses).
//!
//! The thread ends when the sandbox's first process has ended (its pidfd is readable) or
//! no process uses the filter any more, after answering what is pending; dropping the
//! listener then fails any later notification with `ENOSYS` (none can come: every process
//! under the filter is gone).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, mpsc};

use stockade_sys::linux::{self as sys, SeccompListener};

use super::denial::{Denial, Tally, Wall};
use super::fsview::{self, Lexical, View};
use crate::backend::linux::seccomp::{self, Answer, Explained, FilterOptions};
use crate::error::Error;
use sockaddr::{is_loopback, parse_sockaddr};

mod sockaddr;

/// An explained spawn before the start: the socket pair the listener comes back through,
/// and the programs.
pub(super) struct Pending {
    parent: OwnedFd,
    child: OwnedFd,
    programs: Explained,
    options: FilterOptions,
    /// Landlock's audit records, when this host lets the process read them.
    tap: Option<super::audit::Tap>,
    /// Whether the run reports (explain on), or only supervises its connects.
    explain: bool,
    /// Layer 2's `network = "allow"`: the egress proxy's ports on the host's loopback,
    /// the only TCP destinations the host connects the program's sockets to
    /// ([`Answerer::connect`]).
    supervise: Option<Supervise>,
}

/// Layer 2's `network = "allow"`: the egress proxy's ports on the host's loopback, and the
/// set through which the proxy learns which connections the host made for the program
/// (it serves no other: any local process can reach those ports).
pub(super) struct Supervise {
    pub(super) ports: Vec<u16>,
    pub(super) admitted: crate::guard::egress::Admitted,
}

/// The processes seen calling `execve` (or `execveat`), each with its parent and its
/// start time then, in the host's PID namespace: the audit tap's way to know the
/// program's process, which makes its Landlock domain before its `execve` and may have
/// ended, been reaped and left no trace in `/proc` by the time the tap reads its domain's
/// record ([`super::audit`]). Each is read while its call waits for the answer, so the pid
/// names that process: the program's process is in it before the program runs.
#[derive(Clone, Debug, Default)]
pub(crate) struct Execs(Arc<Mutex<Vec<Exec>>>);

/// One process seen exec'ing: its pid, its parent's and its start time (clock ticks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Exec {
    pid: u32,
    parent: u32,
    started: u64,
}

impl Execs {
    /// Notes the caller of `n`, an exec, with its parent and start time, when the
    /// notification is still pending after both were read.
    fn saw(&self, n: &libc::seccomp_notif, listener: &SeccompListener) {
        let Some(stat) = crate::probe::stat::ProcStat::of(n.pid) else {
            return;
        };
        let Ok(parent) = u32::try_from(stat.ppid) else {
            return;
        };
        if sys::seccomp_notif_id_valid(listener, n.id).is_ok() {
            self.note(n.pid, parent, stat.started);
        }
    }

    /// Notes `pid`, a child of `parent` started at `started`, seen exec'ing.
    pub(crate) fn note(&self, pid: u32, parent: u32, started: u64) {
        let e = Exec {
            pid,
            parent,
            started,
        };
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: the processes a run execs are many only for a program that loops on
        // `execve`; the program's process is among the first.
        if list.len() < MAX_EXECS && !list.contains(&e) {
            list.push(e);
        }
    }

    /// Whether `pid` was seen exec'ing as a child of `parent`, and is that process still
    /// or gone: a process of that pid alive now with another start time is another
    /// process (the number reused, perhaps by another run's), not the one seen.
    pub(crate) fn child_of(&self, pid: u32, parent: u32) -> bool {
        let seen: Vec<u64> = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| e.pid == pid && e.parent == parent)
            .map(|e| e.started)
            .collect();
        if seen.is_empty() {
            return false;
        }
        match crate::probe::stat::ProcStat::of(pid) {
            Some(now) => seen.contains(&now.started),
            None => true,
        }
    }
}

/// How many execs [`Execs`] keeps.
const MAX_EXECS: usize = 256;

impl Pending {
    /// The explained programs for `options` (the path-taking calls watched), and a new
    /// socket pair; `watch_connect` as for [`seccomp::build_explained`]; with `landlock`
    /// (the layer has Landlock walls), the audit tap where the host can open one.
    /// Without `explain`, only `supervise`: the run reports nothing and watches no path;
    /// its `connect`s notify and the host makes them ([`Answerer::connect`]).
    pub(super) fn new(
        options: FilterOptions,
        watch_connect: bool,
        landlock: bool,
        explain: bool,
        supervise: Option<Supervise>,
    ) -> Result<Pending, Error> {
        let programs = if supervise.is_some() {
            seccomp::build_supervised(&options, explain)?
        } else {
            seccomp::build_explained(&options, watch_connect, explain)?
        };
        let (parent, child) =
            crate::backend::linux::fd_channel("socketpair for the seccomp listener")?;
        let tap = if landlock && explain {
            super::audit::Tap::open()
        } else {
            None
        };
        Ok(Pending {
            parent,
            child,
            programs,
            options,
            tap,
            explain,
            supervise,
        })
    }

    /// What the setup child installs, where it sends the listener, and the flags of its
    /// `landlock_restrict_self` calls.
    pub(super) fn child(&self) -> (seccomp::Filter, RawFd, u32) {
        let log = if self.tap.is_some() {
            super::audit::LOG_NEW_EXEC_ON
        } else {
            0
        };
        (self.programs.notify.clone(), self.child.as_raw_fd(), log)
    }

    /// Before the spawn (the program's own `execve` notifies, and the spawn waits for
    /// it): starts the thread that receives the listener the child sends before it execs
    /// and answers it, classifying paths against `view`, until the pidfd
    /// [`Serving::started`] hands it is readable. When the spawn fails, dropping the
    /// [`Serving`] closes the child's end of the socket, and the thread ends.
    pub(super) fn serve(self, view: View) -> io::Result<Serving> {
        let Pending {
            parent,
            child,
            programs,
            options,
            tap,
            explain,
            supervise,
        } = self;
        let tally = Arc::new(Mutex::new(Tally::default()));
        let deferred = Arc::new(Mutex::new(Deferred::default()));
        let execs = Execs::default();
        let (until_tx, until_rx) = mpsc::channel();
        let t = Arc::clone(&tally);
        let d = Arc::clone(&deferred);
        let answer_view = view.clone();
        let e = tap.as_ref().map(|_| execs.clone());
        // Detached: it ends with the sandbox, and what it records is counted before the
        // call it answers returns.
        std::thread::Builder::new()
            .name("stockade-explain".into())
            .spawn(move || {
                let Some((listener, until)) = wait_listener(&parent, &until_rx) else {
                    // No listener (the spawn failed): the child's execve, if it got that
                    // far, fails with ENOSYS once the listener in flight is dropped.
                    return;
                };
                drop(parent);
                Answerer {
                    listener,
                    programs,
                    options,
                    tally: t,
                    execs: e,
                    supervise,
                    view: answer_view,
                    deferred: d,
                    paths: [const { Vec::new() }; 2],
                    bases: [const { Vec::new() }; 2],
                    resolved: Vec::with_capacity(libc::PATH_MAX as usize),
                    watchdog: std::sync::OnceLock::new(),
                }
                .serve(until, &until_rx);
            })?;
        Ok(Serving {
            _child: child,
            until: until_tx,
            tap,
            execs,
            run: Run {
                tally,
                deferred,
                view,
                drained: None,
                explain,
            },
        })
    }
}

/// An explained spawn under way: the child's end of the socket (held until the spawn has
/// returned) and the way to hand the answering thread the sandbox's pidfd.
pub(super) struct Serving {
    _child: OwnedFd,
    until: mpsc::Sender<Option<OwnedFd>>,
    tap: Option<super::audit::Tap>,
    execs: Execs,
    run: Run,
}

impl Serving {
    /// After a successful spawn: the thread answers until `until` (a pidfd of the
    /// sandbox's first process, `pid`) is readable; the audit tap, when there is one,
    /// reads Landlock's records of the run's domains until then.
    pub(super) fn started(self, until: Option<OwnedFd>, pid: libc::pid_t) -> Run {
        let Serving {
            _child,
            until: tx,
            tap,
            execs,
            mut run,
        } = self;
        if let Some(tap) = tap {
            let own = until.as_ref().and_then(|u| u.try_clone().ok());
            match tap.serve(pid as u32, own, Arc::clone(&run.tally), execs) {
                Ok(drained) => run.drained = Some(drained),
                Err(e) => {
                    tracing::debug!(error = %e, "explain: no thread for Landlock's audit records")
                }
            }
        }
        // A thread that ended already has nothing to wait for.
        let _ = tx.send(until);
        run
    }
}

/// One explained run: its denials so far.
#[derive(Debug)]
pub(crate) struct Run {
    tally: Arc<Mutex<Tally>>,
    /// The paths left to the host's file system, classified by [`Run::denials`].
    deferred: Arc<Mutex<Deferred>>,
    /// The layout they are classified against.
    view: View,
    /// The audit tap's end, when there is one.
    drained: Option<super::audit::Drained>,
    /// Whether the run reports; else it only supervised its connects.
    explain: bool,
}

impl Run {
    /// The denials so far, merged; once the run has `ended`, after the audit tap has read
    /// the kernel's last records. Landlock's entries that repeat the layout's are left out.
    pub(crate) fn denials(&self, ended: bool) -> Vec<Denial> {
        if !self.explain {
            return Vec::new();
        }
        if let (true, Some(d)) = (ended, &self.drained) {
            d.wait();
        }
        self.classify_deferred();
        let list = self.tally.lock().unwrap_or_else(|e| e.into_inner()).list();
        super::audit::dedup(list)
    }

    /// Classifies the paths the answering thread left to the host's file system, here on
    /// the caller's thread: the program never waits on these lookups. The list is taken
    /// whole first, so the answering thread never waits on them either.
    fn classify_deferred(&self) {
        let taken = std::mem::take(&mut *self.deferred.lock().unwrap_or_else(|e| e.into_inner()));
        let exists = |p: &[u8]| {
            use std::os::unix::ffi::OsStrExt;
            std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(p)).is_ok()
        };
        let overflow = taken.overflow;
        let found: Vec<_> = taken
            .in_order()
            .iter()
            .filter_map(|(seq, path, u, flags, count)| {
                let (wall, hint) = self.view.classify(path, *u, *flags, &exists)?;
                let target = String::from_utf8_lossy(path).into_owned();
                Some((*seq, wall, fsview::verb(*u, *flags), target, hint, *count))
            })
            .collect();
        let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        for (seq, wall, op, target, hint, count) in found {
            tally.add_seen(seq, wall, op.to_owned(), Some(target), &hint, count);
        }
        if overflow > 0 {
            tally.add_n(
                Wall::Layout,
                Deferred::OVERFLOW.to_owned(),
                None,
                "",
                overflow,
            );
        }
    }
}

/// The paths of watched calls that the policy alone does not settle, each (with its use
/// and the open flags that matter) with when it was first seen ([`Tally::next_seq`]) and
/// how many calls named it; at most [`Deferred::MAX`] distinct ones, each path held once.
#[derive(Debug, Default)]
struct Deferred {
    paths: std::collections::HashMap<(Vec<u8>, seccomp::Use, u64), (u64, u64)>,
    /// The calls past [`Deferred::MAX`] distinct paths.
    overflow: u64,
}

impl Deferred {
    /// Distinct paths kept for the report (each at most `PATH_MAX` bytes: 16 MiB at most).
    const MAX: usize = 4096;
    /// The report's entry for the calls past [`Deferred::MAX`].
    const OVERFLOW: &'static str = "(more distinct paths, not classified)";

    /// Counts a call of use `u` on `path`, seen at `seq`.
    fn add(&mut self, seq: u64, path: &[u8], u: seccomp::Use, flags: u64) {
        // Only the access mode, O_CREAT and O_TRUNC change a classification.
        let flags = flags & (0o3 | libc::O_CREAT | libc::O_TRUNC) as u64;
        let full = self.paths.len() >= Self::MAX;
        match self.paths.get_mut(&(path.to_vec(), u, flags)) {
            Some((_, count)) => *count += 1,
            None if full => self.overflow += 1,
            None => {
                self.paths.insert((path.to_vec(), u, flags), (seq, 1));
            }
        }
    }

    /// The entries in the order first seen.
    fn in_order(self) -> Vec<(u64, Vec<u8>, seccomp::Use, u64, u64)> {
        let mut v: Vec<_> = self
            .paths
            .into_iter()
            .map(|((path, u, flags), (seq, count))| (seq, path, u, flags, count))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }
}

/// The thread's state.
struct Answerer {
    listener: SeccompListener,
    programs: Explained,
    options: FilterOptions,
    tally: Arc<Mutex<Tally>>,
    /// With the audit tap: the callers of `execve` seen, for the tap's attribution.
    execs: Option<Execs>,
    /// The proxy's ports, when the host makes the program's `connect`s.
    supervise: Option<Supervise>,
    /// The layout, for the paths of watched calls.
    view: View,
    /// The paths whose report depends on the host's file system, for [`Run::denials`].
    deferred: Arc<Mutex<Deferred>>,
    /// The paths of one call as read (at most two), reused.
    paths: [Vec<u8>; 2],
    /// The directories they are relative to, reused.
    bases: [Vec<u8>; 2],
    /// One path resolved, reused.
    resolved: Vec<u8>,
    /// Bounds the connects the host makes for the program ([`Answerer::connect`]), started
    /// at the first.
    watchdog: std::sync::OnceLock<Option<Watchdog>>,
}

impl Answerer {
    fn serve(mut self, until: Option<Option<OwnedFd>>, until_rx: &mpsc::Receiver<Option<OwnedFd>>) {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        // Until the spawn has returned, the pidfd is not known yet: poll with a timeout
        // and look for it in between.
        let known = until.is_some();
        let mut until: Option<OwnedFd> = until.flatten();
        let mut known = known;
        loop {
            if !known {
                match until_rx.try_recv() {
                    Ok(u) => (until, known) = (u, true),
                    Err(mpsc::TryRecvError::Empty) => {}
                    Err(mpsc::TryRecvError::Disconnected) => known = true,
                }
            }
            let timeout = if known {
                PollTimeout::NONE
            } else {
                PollTimeout::from(20u8)
            };
            let (ready, hup, over) = {
                let first = || PollFd::new(self.listener.as_fd().into(), PollFlags::POLLIN);
                let mut both = [first(), first()];
                if let Some(u) = &until {
                    both[1] = PollFd::new(u.as_fd(), PollFlags::POLLIN);
                }
                let fds = both
                    .get_mut(..1 + usize::from(until.is_some()))
                    .unwrap_or_default();
                match poll(fds, timeout) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => return,
                }
                let ev = |i: usize| {
                    fds.get(i)
                        .and_then(PollFd::revents)
                        .unwrap_or(PollFlags::empty())
                };
                let l = ev(0);
                (
                    l.contains(PollFlags::POLLIN),
                    l.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL),
                    !ev(1).is_empty(),
                )
            };
            if ready && !self.answer_one() {
                return;
            }
            if over || (hup && !ready) {
                // Answer what is still pending, then stop.
                while sys::poll_now(self.listener.as_fd(), libc::POLLIN)
                    .is_ok_and(|r| r & libc::POLLIN != 0)
                    && self.answer_one()
                {}
                return;
            }
        }
    }

    /// Receives one notification, records it and answers it. False when the listener
    /// fails otherwise than for a caller that is gone (then the thread stops rather than
    /// spin, and the listener's close fails the pending calls with `ENOSYS`).
    fn answer_one(&mut self) -> bool {
        let n = match sys::seccomp_notif_recv(&self.listener) {
            Ok(n) => n,
            // The caller ended (or was interrupted) before it was read.
            Err(stockade_sys::Errno(libc::ENOENT | libc::EINTR)) => return true,
            Err(_) => return false,
        };
        let mut resp = libc::seccomp_notif_resp {
            id: n.id,
            val: 0,
            error: 0,
            flags: 0,
        };
        match self.programs.answer(&n.data) {
            Answer::Deny(errno) => {
                let d = seccomp::describe(&n.data, &self.options);
                let wall = if d.network {
                    Wall::Network
                } else {
                    Wall::Seccomp
                };
                self.record(wall, d.operation, None, &d.hint);
                resp.error = -errno;
            }
            Answer::Continue => {
                if let Some(call) = seccomp::path_call(n.data.nr.into()) {
                    if let (Some(execs), Some(seccomp::Use::Exec)) =
                        (&self.execs, call.paths.first().map(|a| a.use_))
                    {
                        execs.saw(&n, &self.listener);
                    }
                    self.paths_of(&n, call);
                    resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
                    let _ = sys::seccomp_notif_send(&self.listener, &resp);
                    return true;
                }
                if n.data.nr as i64 == libc::SYS_listen {
                    match self.listen(&n) {
                        // Made here: its result.
                        Ok(()) => {}
                        Err(errno) => {
                            if errno == libc::EACCES {
                                self.record(Wall::Network, "listen".to_owned(), None, NO_LISTENER);
                            }
                            resp.error = -errno;
                        }
                    }
                    let _ = sys::seccomp_notif_send(&self.listener, &resp);
                    return true;
                }
                let (op, at) = if n.data.nr as i64 == libc::SYS_sendto {
                    ("sendto", 4)
                } else {
                    ("connect", 1)
                };
                if at == 1 && self.supervise.is_some() {
                    match self.connect(&n) {
                        Made::Continue => {
                            resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
                        }
                        Made::Done(Ok(())) => {}
                        Made::Done(Err(errno)) => resp.error = -errno,
                        Made::Refused(addr) => {
                            self.record(
                                Wall::Network,
                                op.to_owned(),
                                addr.map(|a| a.to_string()),
                                NOT_THE_PROXY,
                            );
                            resp.error = -libc::EACCES;
                        }
                        Made::NotIp => {
                            self.record(Wall::Network, op.to_owned(), None, NOT_IP);
                            resp.error = -libc::EACCES;
                        }
                    }
                    let _ = sys::seccomp_notif_send(&self.listener, &resp);
                    return true;
                }
                if let Some(addr) = self.address(&n, at) {
                    if !is_loopback(&addr) {
                        self.record(
                            Wall::Network,
                            op.to_owned(),
                            Some(addr.to_string()),
                            seccomp::NETWORK_NONE,
                        );
                    }
                }
                resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
            }
        }
        // ENOENT: the caller is gone or was interrupted; nothing to answer.
        let _ = sys::seccomp_notif_send(&self.listener, &resp);
        true
    }

    /// Reads, resolves and classifies the paths of watched call `call`, and records those
    /// the layout refuses or hides.
    fn paths_of(&mut self, n: &libc::seccomp_notif, call: &seccomp::PathCall) {
        let pid = n.pid as libc::pid_t;
        let mut relative = [false; 2];
        let mut read = 0;
        let args = call.paths.iter().zip(&mut self.paths).zip(&mut self.bases);
        for (((arg, buf), base), rel) in args.zip(&mut relative) {
            let Some(&ptr) = n.data.args.get(usize::from(arg.path)) else {
                return;
            };
            match read_path(pid, ptr, buf) {
                Ok(()) if !buf.is_empty() => {}
                Err(Unread::Denied) => return self.unreadable(n),
                // `AT_EMPTY_PATH` (glibc's `fstat`), a bad pointer: no path to report.
                Ok(()) | Err(Unread::Other) => return,
            }
            if buf.first() != Some(&b'/') {
                let fd = arg
                    .dirfd
                    .and_then(|i| n.data.args.get(usize::from(i)))
                    .map_or(libc::AT_FDCWD, |&a| a as u32 as i32);
                match dir_of(pid, fd, base) {
                    Ok(()) => {}
                    Err(Unread::Denied) => return self.unreadable(n),
                    Err(Unread::Other) => return,
                }
                *rel = true;
            }
            read += 1;
        }
        // The pid and the memory read were the caller's only while it is still pending.
        if sys::seccomp_notif_id_valid(&self.listener, n.id).is_err() {
            return;
        }
        for i in 0..read {
            let (Some(arg), Some(rel)) = (call.paths.get(i), self.paths.get(i)) else {
                continue;
            };
            let base = match (relative.get(i), self.bases.get(i)) {
                (Some(true), Some(b)) => b.as_slice(),
                _ => b"/",
            };
            fsview::resolve(base, rel, &mut self.resolved);
            let flags = match arg.use_ {
                seccomp::Use::Open { flags } => n.data.args.get(usize::from(flags)).copied(),
                _ => None,
            }
            .unwrap_or(0);
            // Nothing on the host's file system is looked at here (see `View::lexical`):
            // what the policy alone cannot settle waits for the report.
            match self.view.lexical(&self.resolved, arg.use_, flags) {
                Lexical::Clean => {}
                Lexical::Refused(wall, hint) => {
                    let target = String::from_utf8_lossy(&self.resolved).into_owned();
                    let op = fsview::verb(arg.use_, flags).to_owned();
                    self.record(wall, op, Some(target), &hint);
                }
                Lexical::Host => {
                    let seq = self
                        .tally
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .next_seq();
                    self.deferred.lock().unwrap_or_else(|e| e.into_inner()).add(
                        seq,
                        &self.resolved,
                        arg.use_,
                        flags,
                    );
                }
            }
        }
    }

    /// Counts a watched call whose path the host may not read (layer 2: a program that
    /// made itself not dumpable keeps the host's `process_vm_readv` and `/proc` links
    /// out), so that the report says its paths are missing instead of saying nothing.
    fn unreadable(&self, n: &libc::seccomp_notif) {
        if sys::seccomp_notif_id_valid(&self.listener, n.id).is_ok() {
            self.record(Wall::Layout, UNREADABLE.to_owned(), None, UNREADABLE_HINT);
        }
    }

    fn record(&self, wall: Wall, operation: String, target: Option<String>, hint: &str) {
        self.tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(wall, operation, target, hint);
    }

    /// Layer 2's `network = "allow"`: makes the program's `connect` in the host, on its own
    /// socket, to the address the host read and checked, so that the program cannot
    /// change it after the check. A socket of another family than IPv4 or IPv6 (a UNIX
    /// one: its family is fixed, whatever address it is given) continues unchanged. An
    /// IPv4 or IPv6 one is connected only to the egress proxy's ports on `127.0.0.1`
    /// (or its IPv4-mapped IPv6 form), which Landlock grants too; anything else is
    /// refused with `EACCES`, Landlock's errno for a connect it denies.
    fn connect(&self, n: &libc::seccomp_notif) -> Made {
        let Some(Supervise { ports, admitted }) = &self.supervise else {
            return Made::Continue;
        };
        let (socket, family) = match self.caller_socket(n) {
            Ok(s) => s,
            // Not a descriptor of the caller's, or no longer pending: as the kernel says.
            Err(e @ (libc::EBADF | libc::EINTR)) => return Made::Done(Err(e)),
            // The caller made itself untraceable (or is gone): refused.
            Err(_) => return Made::Refused(None),
        };
        match family {
            Some(libc::AF_INET | libc::AF_INET6) => {}
            // Not an IP socket, now: refused, never let through. The kernel would look the
            // descriptor up again after the answer, and another thread of the caller can
            // have put an IP socket at that number by then (`dup2`), whose connect then
            // meets Landlock alone (the proxy's port numbers on any address).
            Some(_) => return Made::NotIp,
            // Not a socket: the kernel's own answer.
            None => return Made::Done(Err(libc::ENOTSOCK)),
        }
        let Some(addr) = self.address(n, 1) else {
            return Made::Refused(None);
        };
        let to_proxy = ports.contains(&addr.port())
            && match addr.ip() {
                std::net::IpAddr::V4(v4) => v4 == Ipv4Addr::LOCALHOST,
                std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped() == Some(Ipv4Addr::LOCALHOST),
            };
        if !to_proxy {
            return Made::Refused(Some(addr));
        }
        // Bounded: the program sets its socket's options (`SO_BINDTODEVICE` sends even a
        // loopback connect out of another interface, `TCP_SYNCNT` retries for hours), and
        // a connect that never ends would hold this thread, the listener and the socket
        // long after the run. Without a watchdog (no thread), refused.
        let Some(watchdog) = self.watchdog.get_or_init(|| Watchdog::start().ok()) else {
            return Made::Done(Err(libc::EAGAIN));
        };
        let made = watchdog.bounded(socket.as_raw_fd(), || connect_to(socket.as_raw_fd(), addr));
        if matches!(made, Ok(()) | Err(libc::EINPROGRESS)) {
            // The proxy serves this connection only: its source, bound by the connect (the
            // kernel's choice of port, which it shares with other destinations: an explicit
            // bind here would hold a port of the host's for each socket the program keeps,
            // and review exhausted the host's ephemeral ports that way). The proxy holds a
            // connection whose admission has not come yet, without serving it.
            match local_addr(&socket) {
                Some(local) => admitted.admit(local),
                None => return Made::Done(Err(libc::EACCES)),
            }
        }
        Made::Done(made)
    }

    /// Layer 2's `network = "allow"`: every `listen` is refused with `EACCES`, and none is
    /// made here. An IPv4 or IPv6 socket: Landlock refuses every TCP bind there, so such a
    /// socket is unbound, and `listen` would bind it to an ephemeral port on every address
    /// by itself. A unix one: the kernel records the credentials of the process that
    /// makes the `listen` as the listener's (`SO_PEERCRED`, `SO_PEERPIDFD`), so a listen
    /// the host made for the program would show the host's to every client, which a
    /// client's check of its server (the session CLI's, for one) would trust: review found
    /// a program posing as a session server that way, receiving a real client's secrets
    /// and stdio. And nothing in the sandbox could connect to it (unix `connect`s are
    /// refused here), so it would serve only processes outside. Not let through either:
    /// the kernel would look the descriptor up again, and another thread can have put an
    /// unbound TCP socket at that number by then. The caller's other errors as the kernel
    /// gives them.
    fn listen(&self, n: &libc::seccomp_notif) -> Result<(), i32> {
        match self.caller_socket(n) {
            Ok((_, Some(_))) => Err(libc::EACCES),
            Ok((_, None)) => Err(libc::ENOTSOCK),
            Err(e @ (libc::EBADF | libc::EINTR)) => Err(e),
            Err(_) => Err(libc::EACCES),
        }
    }

    /// The socket of a watched call (its argument 0) duplicated from the caller
    /// (`pidfd_getfd`), and its address family (`None`: not a socket), while the call is
    /// still pending. `Err(EBADF)`: no such descriptor; `Err(EINTR)`: no longer pending;
    /// another errno: the caller cannot be reached (untraceable, gone).
    fn caller_socket(
        &self,
        n: &libc::seccomp_notif,
    ) -> Result<(stockade_sys::OwnedFd, Option<i32>), i32> {
        let pid = n.pid as libc::pid_t;
        let fd = n.data.args[0] as u32 as i32;
        // The calling thread's own pidfd, so that the descriptor is looked up in its own
        // table (which `unshare(CLONE_FILES)` may have made another than its group
        // leader's); a kernel before 6.9 has no thread pidfds, and then a thread other
        // than the leader is refused (`EINVAL`), as before.
        let pidfd = match sys::pidfd_open(pid, sys::PIDFD_THREAD) {
            Err(stockade_sys::Errno(libc::EINVAL)) => sys::pidfd_open(pid, 0),
            r => r,
        };
        let socket = pidfd
            .and_then(|p| sys::pidfd_getfd(p.as_fd(), fd))
            .map_err(|stockade_sys::Errno(e)| e)?;
        // The pid named the caller, and its fd table, only while it is pending.
        if sys::seccomp_notif_id_valid(&self.listener, n.id).is_err() {
            return Err(libc::EINTR);
        }
        let family = domain_of(&socket);
        Ok((socket, family))
    }

    /// The IPv4 or IPv6 address of a watched call, whose arguments `at` and `at + 1` are
    /// the address and its length (`connect`: 1, `sendto`: 4), read from the caller's
    /// memory while its notification is still pending.
    fn address(&self, n: &libc::seccomp_notif, at: usize) -> Option<SocketAddr> {
        let ptr = *n.data.args.get(at)?;
        let len = *n.data.args.get(at + 1)? as u32 as usize;
        let mut buf = [0u8; 28];
        let want = len.min(buf.len());
        let got = sys::process_vm_readv(n.pid as libc::pid_t, ptr, buf.get_mut(..want)?).ok()?;
        // The pid named the caller only while the notification is pending.
        sys::seccomp_notif_id_valid(&self.listener, n.id).ok()?;
        parse_sockaddr(buf.get(..got)?)
    }
}

/// What [`Answerer::connect`] did with a program's `connect`.
enum Made {
    /// Let it run: not an IP socket.
    Continue,
    /// Made in the host: its result.
    Done(Result<(), i32>),
    /// Refused: not to the proxy (the address, when one could be read).
    Refused(Option<SocketAddr>),
    /// Refused: not an IPv4 or IPv6 socket (a unix socket's connect).
    NotIp,
}

/// How long a connect the host makes for the program may take: to the proxy on the
/// loopback it takes microseconds; only a socket the program sent elsewhere (its options)
/// or a proxy that does not accept waits.
const CONNECT_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

/// Ends a connect the host makes for the program that outlasts [`CONNECT_BOUND`]: a
/// thread of its own (one per run, from its first connect) that `shutdown`s the socket,
/// which aborts a connect still sending its SYNs (the connect then fails, and the program
/// gets that error). The socket's number is shut down only while the connect holds it:
/// the slot is cleared, under the lock the shutdown takes, before the socket is closed.
struct Watchdog {
    shared: Arc<(Mutex<Watch>, std::sync::Condvar)>,
}

#[derive(Default)]
struct Watch {
    /// The socket of the connect under way, and when it is to end.
    connecting: Option<(RawFd, std::time::Instant)>,
    /// The run's answering thread is done: the watchdog ends.
    closed: bool,
}

impl Watchdog {
    fn start() -> io::Result<Watchdog> {
        let shared = Arc::new((Mutex::new(Watch::default()), std::sync::Condvar::new()));
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("stockade-connect".into())
            .spawn(move || watch(&s))?;
        Ok(Watchdog { shared })
    }

    /// Runs `connect`, a connect of the socket `fd`, which stays open meanwhile, within
    /// [`CONNECT_BOUND`].
    fn bounded<T>(&self, fd: RawFd, connect: impl FnOnce() -> T) -> T {
        let (m, c) = &*self.shared;
        m.lock().unwrap_or_else(|e| e.into_inner()).connecting =
            Some((fd, std::time::Instant::now() + CONNECT_BOUND));
        c.notify_all();
        let r = connect();
        m.lock().unwrap_or_else(|e| e.into_inner()).connecting = None;
        r
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (m, c) = &*self.shared;
        m.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        c.notify_all();
    }
}

/// The watchdog's thread.
fn watch(shared: &(Mutex<Watch>, std::sync::Condvar)) {
    let (m, c) = shared;
    let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if w.closed {
            return;
        }
        w = match w.connecting {
            None => c.wait(w).unwrap_or_else(|e| e.into_inner()),
            Some((fd, end)) => {
                let now = std::time::Instant::now();
                if now >= end {
                    // Under the lock: the connect still holds `fd` open.
                    let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both);
                    w.connecting = None;
                    w
                } else {
                    c.wait_timeout(w, end - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            }
        };
    }
}

/// The hint of a connect on a socket other than TCP that [`Answerer::connect`] refused.
const NOT_IP: &str = "network = \"allow\" on layer 2: only TCP through the egress proxy; a unix socket's connect is refused";

/// The hint of a connect that [`Answerer::connect`] refused.
const NOT_THE_PROXY: &str = "network = \"allow\": only through the egress proxy (HTTP_PROXY, ALL_PROXY); add the host to allow_domains";

/// `connect(2)` of `fd` to `addr`: its errno on failure (`EINPROGRESS` for a
/// non-blocking socket, as the program would have seen).
fn connect_to(fd: RawFd, addr: SocketAddr) -> Result<(), i32> {
    let (storage, len) = sockaddr_of(addr);
    // SAFETY: `storage` holds a socket address of `len` bytes, valid for the call.
    let r = unsafe { libc::connect(fd, std::ptr::from_ref(&storage).cast(), len) };
    zero_or_errno(r)
}

/// A libc call's result `r`: `Ok` for 0, else the errno it left.
fn zero_or_errno(r: libc::c_int) -> Result<(), i32> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}

/// `addr` as the kernel's socket address, and its length.
fn sockaddr_of(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero `sockaddr_storage` is a valid value (plain integers).
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in`.
            unsafe {
                std::ptr::from_mut(&mut storage)
                    .cast::<libc::sockaddr_in>()
                    .write(sin)
            };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in6`.
            unsafe {
                std::ptr::from_mut(&mut storage)
                    .cast::<libc::sockaddr_in6>()
                    .write(sin6)
            };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The hint of a `listen` that [`Answerer::listen`] refused.
const NO_LISTENER: &str = "network = \"allow\" on layer 2: no listener (by design)";

/// The local address of an IPv4 or IPv6 `socket` (`getsockname`).
fn local_addr(socket: &stockade_sys::OwnedFd) -> Option<SocketAddr> {
    // SAFETY: an all-zero `sockaddr_storage` is a valid value (plain integers).
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` and `len` are valid for writes and `len` is `storage`'s size.
    let r = unsafe {
        libc::getsockname(
            socket.as_raw_fd(),
            std::ptr::from_mut(&mut storage).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return None;
    }
    // SAFETY: `sockaddr_storage` is plain bytes of at least `len`, which the kernel wrote.
    let bytes = unsafe {
        std::slice::from_raw_parts(std::ptr::from_ref(&storage).cast::<u8>(), len as usize)
    };
    parse_sockaddr(bytes)
}

/// The address family of `socket` (`SO_DOMAIN`).
fn domain_of(socket: &stockade_sys::OwnedFd) -> Option<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes and `len` is `v`'s size.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            std::ptr::from_mut(&mut v).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

/// Waits for the listener on `parent`, and for the spawn's end: the listener, and the
/// pidfd when the spawn has returned already (`Some`). `None` when the spawn failed
/// (the sender is gone) or what came is no listener.
fn wait_listener(
    parent: &OwnedFd,
    until_rx: &mpsc::Receiver<Option<OwnedFd>>,
) -> Option<(SeccompListener, Option<Option<OwnedFd>>)> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut until = None;
    loop {
        let mut fds = [PollFd::new(parent.as_fd(), PollFlags::POLLIN)];
        let ready = match poll(&mut fds, PollTimeout::from(20u8)) {
            Ok(n) => n > 0,
            Err(nix::errno::Errno::EINTR) => false,
            Err(_) => return None,
        };
        // After a successful spawn the listener is queued: the child sent it before its
        // exec.
        if ready || until.is_some() {
            let listener = crate::backend::linux::recv_listener(parent).ok()?;
            return Some((listener, until));
        }
        match until_rx.try_recv() {
            Ok(u) => until = Some(u),
            Err(mpsc::TryRecvError::Empty) => {}
            Err(mpsc::TryRecvError::Disconnected) => return None,
        }
    }
}

/// Reads the NUL-terminated path at `addr` in process `pid` into `buf` (cleared first),
/// page by page so that a path ending just before an unmapped page is read whole; `None`
/// when it cannot be read or is longer than `PATH_MAX`.
fn read_path(pid: libc::pid_t, addr: u64, buf: &mut Vec<u8>) -> Result<(), Unread> {
    const PAGE: u64 = 4096;
    let max = libc::PATH_MAX as usize;
    buf.clear();
    buf.resize(max, 0);
    let mut at = 0usize;
    while at < max {
        let here = addr.checked_add(at as u64).ok_or(Unread::Other)?;
        let chunk = ((PAGE - here % PAGE) as usize).min(max - at);
        let dst = buf.get_mut(at..at + chunk).ok_or(Unread::Other)?;
        let got = sys::process_vm_readv(pid, here, dst).map_err(Unread::from)?;
        let read = dst.get(..got).ok_or(Unread::Other)?;
        if let Some(end) = read.iter().position(|&b| b == 0) {
            buf.truncate(at + end);
            return Ok(());
        }
        if got < chunk {
            return Err(Unread::Other);
        }
        at += chunk;
    }
    Err(Unread::Other)
}

/// Why a path of a watched call was not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unread {
    /// The host may not read the program's memory or `/proc` links (`EPERM`, `EACCES`).
    Denied,
    /// No path there (a bad pointer, no terminating NUL within `PATH_MAX`, not a
    /// directory path), or the caller is gone.
    Other,
}

impl From<stockade_sys::Errno> for Unread {
    fn from(e: stockade_sys::Errno) -> Unread {
        match e.0 {
            libc::EPERM | libc::EACCES => Unread::Denied,
            _ => Unread::Other,
        }
    }
}

/// The report's entry for watched calls whose paths the host may not read.
const UNREADABLE: &str = "(file-system calls the host may not read: the program is not dumpable)";
/// Its hint.
const UNREADABLE_HINT: &str = "their denials are not listed";

/// The path of the directory `fd` (`AT_FDCWD`: the working directory) of process `pid`,
/// from its `/proc` link as the host reads it, into `out` (reused: no allocation once it
/// has grown to `PATH_MAX`).
fn dir_of(pid: libc::pid_t, fd: i32, out: &mut Vec<u8>) -> Result<(), Unread> {
    use std::io::Write;
    let mut link = [0u8; 48];
    let len = {
        let mut w = &mut link[..];
        if fd == libc::AT_FDCWD {
            write!(w, "/proc/{pid}/cwd\0")
        } else {
            write!(w, "/proc/{pid}/fd/{fd}\0")
        }
        .map_err(|_| Unread::Other)?;
        48 - w.len()
    };
    let link = link.get(..len).ok_or(Unread::Other)?;
    let link = std::ffi::CStr::from_bytes_with_nul(link).map_err(|_| Unread::Other)?;
    out.resize(libc::PATH_MAX as usize, 0);
    let n = sys::readlink(link, out).map_err(Unread::from)?;
    if n >= out.len() {
        return Err(Unread::Other);
    }
    out.truncate(n);
    // Not a path (`pipe:[…]`; a deleted directory's ` (deleted)` is left as is).
    if out.first() == Some(&b'/') {
        Ok(())
    } else {
        Err(Unread::Other)
    }
}
