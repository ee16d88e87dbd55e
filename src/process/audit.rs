//! Landlock's own denial records (ABI 7), read from the kernel's audit log for
//! [`Command::explain`](crate::Command::explain), when the host may read them.
//!
//! # DESIGN: when, and what is read
//!
//! Landlock reports each denial as an audit record (`AUDIT_LANDLOCK_ACCESS`, with the
//! domain's id, the denied rights as "blockers" and the object: a path, a port, a
//! process), and each domain once, at its first denial (`AUDIT_LANDLOCK_DOMAIN`, with the
//! pid of the process that made it). A process reads them only through the audit netlink
//! socket's read-only multicast group, which needs `CAP_AUDIT_READ` in the initial user
//! namespace and a host whose audit is enabled; they are the records of the whole host.
//! So the tap is opened only with explain on, only where that bind succeeds (a root host:
//! anything else gets `EPERM` and explains from the seccomp view alone, as before), and
//! only then does the setup child ask Landlock to log after `execve`
//! (`LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`; by default Landlock stops logging at the
//! exec that follows `landlock_restrict_self`, which is every one of the sandbox's). The
//! host's audit state is never changed: with audit off nothing is logged and nothing is
//! read. With audit on, the sandbox's denials also reach the host's own audit log
//! (auditd), as every Landlock user's do.
//!
//! Every record of the host passes through the tap; only those of the run's domains are
//! kept, the rest dropped as read. A domain is the run's when the pid that made it is the
//! sandbox's first process (the setup child, then the init: its domain is the command's)
//! or a child of it (the program's process, which enters its own nested domain before its
//! `execve`). The program's process can end, and be reaped by the init, before the
//! tap reads its domain's record (a short program, a busy host), leaving no trace in
//! `/proc`; so every `execve` of the sandbox's processes, a watched call, is noted with
//! the caller's parent while the call waits for its answer ([`super::explain::Execs`]),
//! and a domain is the run's when its maker was seen exec'ing as the init's child. The
//! init's children read when the spawn returns, and a maker's parent when its record
//! arrives, are looked up too; a domain whose maker is none of these is not attributed
//! (its denials are missing from the report, never another run's in it). An access
//! record comes just before its domain's first record, so a few records of not yet known
//! domains wait, bounded, for theirs.
//!
//! The records are written by the kernel, but their paths and names are the program's:
//! the parser ([`parse`]) is strict, total, and fuzzed (`fuzz/fuzz_targets/audit_record.rs`).
//! A report only: nothing here decides anything.

use std::collections::{HashSet, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::denial::{Tally, Wall};

/// `AUDIT_LANDLOCK_ACCESS`: one denial.
const LANDLOCK_ACCESS: u16 = 1423;
/// `AUDIT_LANDLOCK_DOMAIN`: a domain's details at its first denial, and its end.
const LANDLOCK_DOMAIN: u16 = 1424;
/// `AUDIT_NLGRP_READLOG`: the read-only multicast group.
const GROUP_READLOG: u32 = 1;
/// `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (ABI 7): keep logging a domain's denials
/// after the `execve` that follows `landlock_restrict_self`.
pub(crate) const LOG_NEW_EXEC_ON: u32 = 1 << 1;
/// How many access records of not yet known domains wait for their domain's record.
const MAX_WAITING: usize = 64;
/// After the sandbox has ended: how long the tap keeps reading once nothing comes (the
/// kernel's audit thread sends records after the denial returned), and at most.
const DRAIN_IDLE: Duration = Duration::from_millis(30);
const DRAIN_MAX: Duration = Duration::from_millis(500);

/// One Landlock record, as parsed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// A denial: the domain, the rights denied, the object (a path, `host:port`, a pid).
    Access {
        domain: u64,
        blockers: String,
        object: Option<String>,
    },
    /// A domain's first record: who made it.
    Allocated { domain: u64, pid: u32 },
    /// Any other Landlock record (a domain's end).
    Other,
}

/// Parses the text of one record (`audit(1795758059.487:83): domain=105e1370c …`).
/// `None` for text that is not a well-formed Landlock record of `kind`.
pub(crate) fn parse(kind: u16, text: &[u8]) -> Option<Record> {
    // The header: `audit(SECONDS.MILLIS:SERIAL): `.
    let rest = text.strip_prefix(b"audit(")?;
    let close = rest.iter().position(|&b| b == b')')?;
    let (stamp, rest) = rest.split_at(close);
    if stamp.is_empty()
        || !stamp
            .iter()
            .all(|b| b.is_ascii_digit() || b"..:".contains(b))
    {
        return None;
    }
    let rest = rest.strip_prefix(b"): ")?;
    let fields = fields(rest)?;
    let get = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| *key == k.as_bytes())
            .map(|(_, v)| v.as_slice())
    };
    let domain = u64::from_str_radix(std::str::from_utf8(get("domain")?).ok()?, 16).ok()?;
    match kind {
        LANDLOCK_ACCESS => {
            let blockers = std::str::from_utf8(get("blockers")?).ok()?;
            if blockers.is_empty()
                || !blockers
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b"._,".contains(&b))
            {
                return None;
            }
            let object = if let Some(p) = get("path") {
                Some(String::from_utf8_lossy(p).into_owned())
            } else if let (Some(addr), Some(port)) = (get("daddr"), get("dest")) {
                Some(format!(
                    "{}:{}",
                    String::from_utf8_lossy(addr),
                    String::from_utf8_lossy(port)
                ))
            } else if let Some(port) = get("src") {
                Some(format!("port {}", String::from_utf8_lossy(port)))
            } else {
                get("opid").map(|p| format!("pid {}", String::from_utf8_lossy(p)))
            };
            Some(Record::Access {
                domain,
                blockers: blockers.to_owned(),
                object,
            })
        }
        LANDLOCK_DOMAIN => {
            if get("status") != Some(b"allocated") {
                return Some(Record::Other);
            }
            let pid = std::str::from_utf8(get("pid")?).ok()?.parse().ok()?;
            Some(Record::Allocated { domain, pid })
        }
        _ => None,
    }
}

/// The `key=value` fields of a record, values decoded: `"quoted"` as is (audit quotes a
/// string only when it has no space, quote or control byte), a bare all-hex value of a
/// key that holds strings (`path`, `comm`, `exe`, `ocomm`) hex-decoded (how audit writes
/// such strings otherwise), anything else as is. `None` for malformed text.
fn fields(text: &[u8]) -> Option<Vec<(&[u8], Vec<u8>)>> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        while let Some(r) = rest.strip_prefix(b" ") {
            rest = r;
        }
        if rest.is_empty() {
            return Some(out);
        }
        let eq = rest.iter().position(|&b| b == b'=')?;
        let key = &rest[..eq];
        if key.is_empty() || !key.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
            return None;
        }
        rest = &rest[eq + 1..];
        let value = if let Some(r) = rest.strip_prefix(b"\"") {
            let end = r.iter().position(|&b| b == b'"')?;
            rest = &r[end + 1..];
            if !rest.is_empty() && !rest.starts_with(b" ") {
                return None;
            }
            r[..end].to_vec()
        } else {
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            let raw = &rest[..end];
            rest = &rest[end..];
            let stringy = matches!(key, b"path" | b"comm" | b"exe" | b"ocomm" | b"name");
            if stringy
                && raw.len().is_multiple_of(2)
                && !raw.is_empty()
                && raw.iter().all(u8::is_ascii_hexdigit)
            {
                hex_decode(raw)?
            } else {
                raw.to_vec()
            }
        };
        out.push((key, value));
    }
}

fn hex_decode(hex: &[u8]) -> Option<Vec<u8>> {
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    hex.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// The report's operation and hint for the denied rights `blockers` on `object`.
pub(crate) fn describe(
    blockers: &str,
    object: Option<&str>,
    init_pid: u32,
) -> (String, Option<String>, String) {
    let first = blockers.split(',').next().unwrap_or(blockers);
    let target = match (first, object) {
        ("scope.signal" | "ptrace", Some(o)) if o == format!("pid {init_pid}") => {
            Some("the sandbox's init".to_owned())
        }
        (_, o) => o.map(str::to_owned),
    };
    let hint = match first {
        "fs.execute" | "fs.read_file" | "fs.read_dir" => {
            "not readable in the sandbox: add it to read_only (or writable)"
        }
        "fs.write_file" | "fs.truncate" | "fs.remove_dir" | "fs.remove_file" | "fs.make_dir"
        | "fs.make_reg" | "fs.make_sym" | "fs.make_fifo" | "fs.make_sock" => {
            "not writable in the sandbox: add it (or the directory) to writable"
        }
        "fs.make_char" | "fs.make_block" => "device nodes are never created (by design)",
        "fs.refer" => "moving between directories with different rules (by design)",
        "fs.ioctl_dev" => "device ioctl outside the sandbox's own devices (by design)",
        "net.connect_tcp" => {
            "TCP only to the egress proxy: use network = \"allow\" with allow_domains"
        }
        "net.bind_tcp" => "binding TCP ports is not allowed on this layer (by design)",
        "ptrace" => "tracing a process outside the program's own (by design)",
        "scope.signal" => "signalling a process outside the program's own (by design)",
        "scope.abstract_unix_socket" => "abstract UNIX sockets outside the sandbox (by design)",
        _ => "denied by Landlock",
    };
    (blockers.to_owned(), target, hint.to_owned())
}

/// `AUDIT_GET`: the audit state's request and reply.
const AUDIT_GET: u16 = 1000;
/// `AUDIT_FAIL_PANIC`: the kernel panics when it cannot log a record (its backlog full).
const AUDIT_FAIL_PANIC: u32 = 2;

/// The host's audit state, as far as the tap's decision needs it (`struct audit_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Status {
    /// 0 off, 1 on, 2 on and locked.
    pub(crate) enabled: u32,
    /// What the kernel does when it cannot log: 0 nothing, 1 printk, 2 panic.
    pub(crate) failure: u32,
    /// Records per second, 0 for no limit.
    pub(crate) rate_limit: u32,
}

/// Asks the kernel for its audit state (`AUDIT_GET`, which needs `CAP_AUDIT_CONTROL`:
/// the same root host that may open the tap). `None` when it does not answer within
/// 200 ms or refuses.
fn status() -> Option<Status> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::socket::{MsgFlags, recv, send};
    let socket = audit_socket()?;
    // A bare `nlmsghdr`: length, type, flags (NLM_F_REQUEST), sequence, port (the kernel).
    let mut request = [0u8; 16];
    request[0..4].copy_from_slice(&16u32.to_ne_bytes());
    request[4..6].copy_from_slice(&AUDIT_GET.to_ne_bytes());
    request[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    request[8..12].copy_from_slice(&1u32.to_ne_bytes());
    send(socket.as_raw_fd(), &request, MsgFlags::empty()).ok()?;
    let deadline = Instant::now() + Duration::from_millis(200);
    let mut buf = [0u8; 512];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        let mut fds = [PollFd::new(socket.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::try_from(left).ok()?) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        }
        let n = match recv(socket.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => continue,
            Err(_) => return None,
        };
        let reply = buf.get(..n)?;
        let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
        if kind == libc::NLMSG_ERROR as u16 {
            return None;
        }
        if kind != AUDIT_GET {
            continue;
        }
        let field = |i: usize| -> Option<u32> {
            let at = 16 + 4 * i;
            Some(u32::from_ne_bytes(reply.get(at..at + 4)?.try_into().ok()?))
        };
        // `struct audit_status`: mask, enabled, failure, pid, rate_limit, …
        return Some(Status {
            enabled: field(1)?,
            failure: field(2)?,
            rate_limit: field(4)?,
        });
    }
}

/// A new audit netlink socket, non-blocking.
fn audit_socket() -> Option<OwnedFd> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockProtocol, SockType, socket};
    socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        SockProtocol::NetlinkAudit,
    )
    .ok()
}

/// The tap, open before the spawn: the netlink socket, subscribed.
pub(crate) struct Tap {
    socket: OwnedFd,
}

impl Tap {
    /// Subscribes to the audit log's Landlock records, when this host lets this process:
    /// `None` otherwise (not root in the initial namespaces, no audit in the kernel, a
    /// Landlock older than ABI 7), which is not an error.
    pub(crate) fn open() -> Option<Tap> {
        use nix::sys::socket::{NetlinkAddr, bind};
        if crate::probe::landlock_abi().ok()? < 7 {
            return None;
        }
        // Logging past the exec lets the program put records into the host's audit log
        // at will: not where a flood of them would end in a kernel panic.
        match status() {
            Some(s) if s.failure != AUDIT_FAIL_PANIC => {}
            other => {
                tracing::debug!(
                    status = ?other,
                    "explain: the host's audit fails by panicking (or its state is unknown); the seccomp view alone"
                );
                return None;
            }
        }
        let socket = audit_socket()?;
        match bind(socket.as_raw_fd(), &NetlinkAddr::new(0, GROUP_READLOG)) {
            Ok(()) => Some(Tap { socket }),
            Err(e) => {
                tracing::debug!(
                    errno = e as i32,
                    "explain: Landlock's audit records are not readable here; the seccomp view alone"
                );
                None
            }
        }
    }

    /// Reads the records until `until` (a pidfd of the sandbox's first process, pid
    /// `init_pid`) is readable and the kernel has sent what was left, on a thread of its
    /// own, counting the run's denials into `tally`.
    pub(crate) fn serve(
        self,
        init_pid: u32,
        until: Option<OwnedFd>,
        tally: Arc<Mutex<Tally>>,
        execs: super::explain::Execs,
    ) -> io::Result<Drained> {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let d = Arc::clone(&done);
        // The program's process, read now, while it waits for the init's go or has just
        // started: its domain's record may come after it has exited.
        let mut makers: HashSet<u32> = children_of(init_pid).into_iter().collect();
        makers.insert(init_pid);
        std::thread::Builder::new()
            .name("stockade-audit".into())
            .spawn(move || {
                Reader {
                    socket: self.socket,
                    init_pid,
                    makers,
                    execs,
                    tally,
                    ours: HashSet::new(),
                    theirs: HashSet::new(),
                    waiting: VecDeque::new(),
                    lost: false,
                }
                .run(until);
                let (m, c) = &*d;
                *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
                c.notify_all();
            })?;
        Ok(Drained { done })
    }
}

/// The tap's end: set once it has read what the kernel sent after the sandbox ended.
#[derive(Clone, Debug)]
pub(crate) struct Drained {
    done: Arc<(Mutex<bool>, Condvar)>,
}

impl Drained {
    /// Waits (at most a second) until the tap has read the last records.
    pub(crate) fn wait(&self) {
        let (m, c) = &*self.done;
        let g = m.lock().unwrap_or_else(|e| e.into_inner());
        let _ = c.wait_timeout_while(g, Duration::from_secs(1), |done| !*done);
    }
}

struct Reader {
    socket: OwnedFd,
    init_pid: u32,
    /// The run's processes known to make its domains: the init and the program's process.
    makers: HashSet<u32>,
    /// The sandbox's processes seen exec'ing, with their parents: the program's process
    /// even when it ended and was reaped before its domain's record was read.
    execs: super::explain::Execs,
    tally: Arc<Mutex<Tally>>,
    /// The run's domains, and those known not to be.
    ours: HashSet<u64>,
    theirs: HashSet<u64>,
    /// Access records of domains not yet known.
    waiting: VecDeque<(u64, String, Option<String>)>,
    /// Whether the kernel dropped records for this reader.
    lost: bool,
}

/// The netlink messages of datagram `d`: each one's type and its text (without the
/// header, and without a NUL at its end, which records do not have but are allowed). Stops
/// at the first message whose length is shorter than its header or longer than what is
/// left (fuzz target `audit_record`).
pub(crate) fn frames(mut d: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let header = d.get(..16)?;
        let len = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let kind = u16::from_ne_bytes([header[4], header[5]]);
        let text = d.get(16..len)?;
        let text = text.strip_suffix(b"\0").unwrap_or(text);
        let next = len.checked_add(3).map_or(usize::MAX, |n| n & !3);
        d = d.get(next..).unwrap_or(&[]);
        Some((kind, text))
    })
}

/// The report's entry when the kernel dropped audit records before the tap read them.
const LOST: &str = "(the kernel dropped audit records: Landlock's denials are incomplete)";

impl Reader {
    fn run(mut self, until: Option<OwnedFd>) {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut buf = vec![0u8; 16 * 1024];
        let mut ended: Option<Instant> = None;
        loop {
            let timeout = match ended {
                Some(_) => PollTimeout::from(DRAIN_IDLE.as_millis() as u16),
                None => PollTimeout::NONE,
            };
            let mut fds = vec![PollFd::new(self.socket.as_fd(), PollFlags::POLLIN)];
            if let (None, Some(u)) = (ended, &until) {
                fds.push(PollFd::new(u.as_fd(), PollFlags::POLLIN));
            }
            let n = match poll(&mut fds, timeout) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            };
            let sandbox_over = fds
                .get(1)
                .and_then(PollFd::revents)
                .is_some_and(|r| !r.is_empty());
            let readable = fds[0].revents().is_some_and(|r| !r.is_empty());
            drop(fds);
            if sandbox_over && ended.is_none() {
                ended = Some(Instant::now());
            }
            if readable {
                self.read_all(&mut buf);
            } else if n == 0 && ended.is_some() {
                return;
            }
            if ended.is_some_and(|t| t.elapsed() > DRAIN_MAX) {
                return;
            }
            if until.is_none() && ended.is_none() {
                // No pidfd to wait for: the sandbox's end is not observable; drain what
                // is there and stop.
                ended = Some(Instant::now());
            }
        }
    }

    /// Reads every datagram ready now.
    fn read_all(&mut self, buf: &mut [u8]) {
        loop {
            match nix::sys::socket::recv(
                self.socket.as_raw_fd(),
                buf,
                nix::sys::socket::MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(0) => return,
                Ok(n) => self.datagram(&buf[..n]),
                Err(nix::errno::Errno::EINTR) => {}
                // The kernel dropped records for this reader (a flood): the report says
                // it misses some, and reading goes on.
                Err(nix::errno::Errno::ENOBUFS) => {
                    if !self.lost {
                        self.lost = true;
                        self.tally.lock().unwrap_or_else(|e| e.into_inner()).add(
                            Wall::Landlock,
                            LOST.to_owned(),
                            None,
                            "",
                        );
                    }
                }
                // EAGAIN: nothing more now.
                Err(_) => return,
            }
        }
    }

    /// One datagram: netlink messages, each one record.
    fn datagram(&mut self, d: &[u8]) {
        for (kind, text) in frames(d) {
            if kind == LANDLOCK_ACCESS || kind == LANDLOCK_DOMAIN {
                if let Some(r) = parse(kind, text) {
                    self.record(r);
                }
            }
        }
    }

    fn record(&mut self, r: Record) {
        match r {
            Record::Access {
                domain,
                blockers,
                object,
            } => {
                if self.ours.contains(&domain) {
                    self.count(&blockers, object.as_deref());
                } else if !self.theirs.contains(&domain) {
                    if self.waiting.len() >= MAX_WAITING {
                        self.waiting.pop_front();
                    }
                    self.waiting.push_back((domain, blockers, object));
                }
            }
            Record::Allocated { domain, pid } => {
                let ours = self.makers.contains(&pid)
                    || self.execs.child_of(pid, self.init_pid)
                    || parent_of(pid) == Some(self.init_pid);
                if ours {
                    self.ours.insert(domain);
                } else {
                    self.theirs.insert(domain);
                }
                let waiting = std::mem::take(&mut self.waiting);
                for (d, b, o) in waiting {
                    if d != domain {
                        self.waiting.push_back((d, b, o));
                    } else if ours {
                        self.count(&b, o.as_deref());
                    }
                }
            }
            Record::Other => {}
        }
    }

    fn count(&self, blockers: &str, object: Option<&str>) {
        let (op, target, hint) = describe(blockers, object, self.init_pid);
        self.tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(Wall::Landlock, op, target, &hint);
    }
}

/// The children of `pid` (`/proc/<pid>/task/<pid>/children`), while it lives.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The parent of `pid`, while it lives.
pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    crate::probe::stat::ProcStat::of(pid).and_then(|s| u32::try_from(s.ppid).ok())
}

/// Landlock's entries that repeat what the layout view already reported (the same path,
/// or its directory for a creation), dropped: the layout's entry names the policy key.
pub(crate) fn dedup(list: Vec<super::denial::Denial>) -> Vec<super::denial::Denial> {
    let mut layout = HashSet::new();
    for d in &list {
        if matches!(d.wall, Wall::Layout | Wall::Masked) {
            if let Some(t) = &d.target {
                layout.insert(t.clone());
                if let Some(parent) = std::path::Path::new(t).parent() {
                    layout.insert(parent.to_string_lossy().into_owned());
                }
            }
        }
    }
    list.into_iter()
        .filter(|d| {
            d.wall != Wall::Landlock || !d.target.as_ref().is_some_and(|t| layout.contains(t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's audit state is read where the tap may be opened (root in the initial
    /// namespaces), and not elsewhere; the tap is never opened where a record the
    /// program causes could end in a panic.
    #[test]
    fn the_audit_state_is_read_by_root_alone() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let in_init_ns = std::fs::read_to_string("/proc/self/uid_map")
            .is_ok_and(|m| m.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"]);
        match status() {
            Some(s) => {
                assert!(root && in_init_ns, "read without the right: {s:?}");
                assert!(s.enabled <= 2 && s.failure <= 2, "{s:?}");
                if s.failure == AUDIT_FAIL_PANIC {
                    assert!(Tap::open().is_none());
                }
            }
            None => assert!(!root || !in_init_ns, "root could not read the audit state"),
        }
    }

    #[test]
    fn an_access_record_of_a_path_parses() {
        let r = parse(
            LANDLOCK_ACCESS,
            br#"audit(1795758059.487:83): domain=105e1370c blockers=fs.make_reg path="/tmp/aud" dev="vda" ino=10043393"#,
        );
        assert_eq!(
            r,
            Some(Record::Access {
                domain: 0x105e1370c,
                blockers: "fs.make_reg".into(),
                object: Some("/tmp/aud".into()),
            })
        );
    }

    #[test]
    fn a_hex_path_is_decoded_and_a_quote_inside_does_not_end_it() {
        // "/tmp/sp ace\"q" as audit writes an untrusted string with a space or quote.
        let hex: String = b"/tmp/sp ace\"q"
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        let text = format!(
            "audit(1.2:3): domain=a blockers=fs.write_file,fs.truncate path={hex} dev=\"vda\" ino=1"
        );
        let r = parse(LANDLOCK_ACCESS, text.as_bytes()).unwrap();
        assert_eq!(
            r,
            Record::Access {
                domain: 0xa,
                blockers: "fs.write_file,fs.truncate".into(),
                object: Some("/tmp/sp ace\"q".into()),
            }
        );
    }

    #[test]
    fn signal_and_network_objects() {
        let r = parse(
            LANDLOCK_ACCESS,
            br#"audit(1.2:3): domain=b blockers=scope.signal opid=4242 ocomm="sleep""#,
        );
        assert!(matches!(r, Some(Record::Access { object: Some(o), .. }) if o == "pid 4242"));
        let (op, target, hint) = describe("scope.signal", Some("pid 7"), 7);
        assert_eq!(op, "scope.signal");
        assert_eq!(target.as_deref(), Some("the sandbox's init"));
        assert!(hint.contains("by design"));
        let r = parse(
            LANDLOCK_ACCESS,
            br#"audit(1.2:3): domain=b blockers=net.connect_tcp daddr=10.0.0.1 dest=80"#,
        );
        assert!(matches!(r, Some(Record::Access { object: Some(o), .. }) if o == "10.0.0.1:80"));
    }

    #[test]
    fn a_domain_record_names_its_maker() {
        let r = parse(
            LANDLOCK_DOMAIN,
            br#"audit(1795758059.487:83): domain=105e1370c status=allocated mode=enforcing pid=29586 uid=0 exe="/tmp/aud/ll" comm="ll""#,
        );
        assert_eq!(
            r,
            Some(Record::Allocated {
                domain: 0x105e1370c,
                pid: 29586
            })
        );
        let r = parse(
            LANDLOCK_DOMAIN,
            b"audit(1.2:85): domain=105e1370c status=deallocated denials=1",
        );
        assert_eq!(r, Some(Record::Other));
    }

    #[test]
    fn malformed_records_are_refused() {
        for bad in [
            &b""[..],
            b"audit(1.2:3) domain=a blockers=x",
            b"audit(): domain=a blockers=fs.x",
            b"audit(1.2:3): domain=zz blockers=fs.x",
            b"audit(1.2:3): domain=a blockers=FS X",
            b"audit(1.2:3): domain=a blockers=fs.x path=\"unterminated",
            b"audit(1.2:3): domain=a blockers=fs.x path=\"a\"b",
            b"audit(1.2:3): domain=a =x",
            b"audit(1.2:3): blockers=fs.x",
        ] {
            assert_eq!(
                parse(LANDLOCK_ACCESS, bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse(1300, b"audit(1.2:3): domain=a blockers=fs.x"), None);
    }

    /// A reader for a run whose init is `init` (its only maker known at the start), on a
    /// socket nothing is sent to (the tests hand it records themselves).
    fn reader(init: u32, execs: super::super::explain::Execs, tally: &Arc<Mutex<Tally>>) -> Reader {
        let (a, _b) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::Datagram,
            None,
            nix::sys::socket::SockFlag::empty(),
        )
        .unwrap();
        Reader {
            socket: a,
            init_pid: init,
            makers: HashSet::from([init]),
            execs,
            tally: Arc::clone(tally),
            ours: HashSet::new(),
            theirs: HashSet::new(),
            waiting: VecDeque::new(),
            lost: false,
        }
    }

    #[test]
    fn records_of_other_domains_are_dropped_and_ours_kept() {
        let tally = Arc::new(Mutex::new(Tally::default()));
        let me = std::process::id();
        let mut r = reader(me, Default::default(), &tally);
        let msg = |kind: u16, text: &str| {
            let mut m = Vec::new();
            m.extend_from_slice(&((16 + text.len()) as u32).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(&[0; 10]);
            m.extend_from_slice(text.as_bytes());
            while m.len() % 4 != 0 {
                m.push(0);
            }
            m
        };
        // Ours: made by this process (the "init" here); then another host process's (pid 1).
        let mut d = msg(
            LANDLOCK_ACCESS,
            "audit(1.2:3): domain=a blockers=fs.ioctl_dev path=\"/dev/x\"",
        );
        d.extend(msg(
            LANDLOCK_DOMAIN,
            &format!("audit(1.2:3): domain=a status=allocated mode=enforcing pid={me} uid=0"),
        ));
        d.extend(msg(
            LANDLOCK_ACCESS,
            "audit(1.2:4): domain=b blockers=fs.read_file path=\"/secret\"",
        ));
        d.extend(msg(
            LANDLOCK_DOMAIN,
            "audit(1.2:4): domain=b status=allocated mode=enforcing pid=1 uid=0",
        ));
        d.extend(msg(
            LANDLOCK_ACCESS,
            "audit(1.2:5): domain=a blockers=fs.ioctl_dev path=\"/dev/x\"",
        ));
        d.extend(msg(
            LANDLOCK_ACCESS,
            "audit(1.2:6): domain=b blockers=fs.read_file path=\"/secret\"",
        ));
        r.datagram(&d);
        let l = tally.lock().unwrap().list();
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!(l[0].operation, "fs.ioctl_dev");
        assert_eq!(l[0].target.as_deref(), Some("/dev/x"));
        assert_eq!(l[0].count, 2);
        assert!(r.waiting.is_empty());
    }

    #[test]
    fn a_domain_whose_maker_was_seen_exec_ing_is_ours_after_it_is_gone() {
        let tally = Arc::new(Mutex::new(Tally::default()));
        let me = std::process::id();
        // Two processes that ended and were reaped: no trace of them in /proc.
        let gone = || {
            let mut c = std::process::Command::new("true").spawn().unwrap();
            let pid = c.id();
            c.wait().unwrap();
            pid
        };
        let (ours, theirs) = (gone(), gone());
        assert_eq!(parent_of(ours), None);
        let execs = super::super::explain::Execs::default();
        execs.note(ours, me, 1);
        // Seen exec'ing, but another process's child.
        execs.note(theirs, 1, 1);
        // Seen exec'ing as the init's child, but its number names another process now
        // (this one, started at another time): not the one seen.
        let reused = std::process::id();
        execs.note(reused, me, 1);
        assert!(!execs.child_of(reused, me));
        let mut r = reader(me, execs, &tally);
        for (domain, pid) in [("c", ours), ("d", theirs)] {
            r.record(
                parse(
                    LANDLOCK_ACCESS,
                    format!(
                        "audit(1.2:3): domain={domain} blockers=scope.signal opid=7 ocomm=\"x\""
                    )
                    .as_bytes(),
                )
                .unwrap(),
            );
            r.record(
                parse(
                    LANDLOCK_DOMAIN,
                    format!(
                        "audit(1.2:3): domain={domain} status=allocated mode=enforcing pid={pid} uid=0"
                    )
                    .as_bytes(),
                )
                .unwrap(),
            );
        }
        let l = tally.lock().unwrap().list();
        assert_eq!(l.len(), 1, "the seen child's domain only: {l:?}");
        assert_eq!(l[0].operation, "scope.signal");
        assert!(r.ours.contains(&0xc) && r.theirs.contains(&0xd));
        assert!(r.waiting.is_empty());
    }
}
