//! The proxy's threads: one accept thread per run (its listeners, a wake socket and the
//! fd that ends it, polled together), one thread per connection (see [`super::relay`]),
//! at most [`Proxy::with_max_connections`] connections per run and
//! [`Proxy::with_max_total_connections`] for the whole proxy.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::http::{self, Body, Chunked, Request};
use super::relay::{Upload, relay};
use super::socks5::{self, Parse, Socks5Error};
use super::{Egress, Refusal};

/// The decisions kept for [`Proxy::decisions`]; older ones are dropped first.
const MAX_DECISIONS: usize = 10_000;

/// How a connection reached the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// An absolute-form HTTP request, forwarded.
    Http,
    /// HTTP `CONNECT`.
    Connect,
    /// SOCKS5 `CONNECT`.
    Socks5,
}

/// One decision of the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// How the program asked.
    pub protocol: Protocol,
    /// The host as the program named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The checked addresses when allowed; empty when refused.
    pub addrs: Vec<SocketAddr>,
    /// Why it was refused; `None` when allowed.
    pub refusal: Option<Refusal>,
}

impl Decision {
    /// Whether the connection was allowed.
    pub fn allowed(&self) -> bool {
        self.refusal.is_none()
    }
}

/// Timeouts and bounds, copied into each run when it starts.
#[derive(Clone, Copy, Debug)]
struct Limits {
    head_timeout: Duration,
    connect_timeout: Duration,
    idle_timeout: Duration,
    max_connections: usize,
}

/// What the proxy's runs share: the policy, the global decision list and the global
/// connection count.
struct Shared {
    egress: Egress,
    decisions: Mutex<VecDeque<Decision>>,
    /// Connections being served, all runs together.
    active: AtomicUsize,
    /// The most connections served at once, all runs together.
    max_active: AtomicUsize,
}

/// The egress proxy: serves sandbox runs' HTTP and SOCKS5 listeners under one [`Egress`]
/// policy.
///
/// Each run ([`Proxy::serve_run`]) has a thread that accepts on its listeners and one thread
/// per connection; a [`Run`] ends its listeners and its connections together.
pub struct Proxy {
    shared: Arc<Shared>,
    limits: Limits,
    /// The runs of [`Proxy::serve_http`] and [`Proxy::serve_socks5`], ended on drop.
    listeners: Mutex<Vec<Run>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("egress", &self.shared.egress)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// A proxy deciding by `egress`: 10 s to read a request head, 10 s to connect, 5 min
    /// of idleness before a connection is closed, at most 64 connections at once per run
    /// and 256 for the whole proxy.
    pub fn new(egress: Egress) -> Proxy {
        Proxy {
            shared: Arc::new(Shared {
                egress,
                decisions: Mutex::new(VecDeque::new()),
                active: AtomicUsize::new(0),
                max_active: AtomicUsize::new(256),
            }),
            limits: Limits {
                head_timeout: Duration::from_secs(10),
                connect_timeout: Duration::from_secs(10),
                idle_timeout: Duration::from_secs(300),
                max_connections: 64,
            },
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// The whole time a client has to send its request head (HTTP) or greeting and request
    /// (SOCKS5), from its connection on; then it is closed. For runs served after.
    pub fn with_head_timeout(mut self, timeout: Duration) -> Proxy {
        self.limits.head_timeout = timeout;
        self
    }

    /// The time to connect to an allowed address. For runs served after.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Proxy {
        self.limits.connect_timeout = timeout;
        self
    }

    /// How long a connection may stay idle once its bytes flow (a tunnel, a forwarded
    /// request's body and answer): after that long with no byte either way, both sides are
    /// closed, so that a silent upstream or client does not hold a thread forever. For
    /// runs served after.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Proxy {
        self.limits.idle_timeout = timeout;
        self
    }

    /// The most connections served at once per run (both its listeners together); more
    /// are closed on accept. For runs served after.
    pub fn with_max_connections(mut self, max: usize) -> Proxy {
        self.limits.max_connections = max;
        self
    }

    /// The most connections served at once by the whole proxy, all runs together (each
    /// takes a thread and two 256 KiB buffers, resident as far as bytes pass through them);
    /// more are closed on accept, with a warning.
    pub fn with_max_total_connections(self, max: usize) -> Proxy {
        self.shared.max_active.store(max, Ordering::SeqCst);
        self
    }

    /// Serves one sandbox run's two listeners, HTTP proxy requests (absolute-form and
    /// `CONNECT`) on `http` and SOCKS5 on `socks`, from one thread of the run's own, until
    /// the run ends.
    ///
    /// The run ends at the first of:
    /// - `until` becoming readable: a pidfd (`pidfd_open(2)`) of the sandbox's init or of the
    ///   program, readable once that process has exited; any fd whose readability means
    ///   the run is over works (a pipe's read end whose write end the program holds);
    /// - [`Run::end`];
    /// - the drop of the last clone of the returned [`Run`] (so a run never outlives
    ///   its handle: keep a clone for as long as the program may connect).
    ///
    /// The end closes both listeners and every connection of the run still open, both
    /// ways, client and upstream sides. Dropping the [`Proxy`] does not end its runs.
    ///
    /// # Errors
    ///
    /// A listener's address or mode cannot be read or set, or the thread not started.
    pub fn serve_run(
        &self,
        http: TcpListener,
        socks: TcpListener,
        until: Option<OwnedFd>,
    ) -> io::Result<Run> {
        self.start(
            vec![(http, Protocol::Http), (socks, Protocol::Socks5)],
            until,
            None,
        )
    }

    /// [`Proxy::serve_run`] for listeners any local process can reach (the host's
    /// loopback): a connection is served only when its peer address was
    /// [`Admitted::admit`]ted (by whoever made the sandboxed program's connects), waited
    /// for at most a second; any other is closed unserved and logged.
    ///
    /// # Errors
    ///
    /// As [`Proxy::serve_run`].
    pub fn serve_run_admitted(
        &self,
        http: TcpListener,
        socks: TcpListener,
        until: Option<OwnedFd>,
        admitted: Admitted,
    ) -> io::Result<Run> {
        self.start(
            vec![(http, Protocol::Http), (socks, Protocol::Socks5)],
            until,
            Some(admitted),
        )
    }

    /// Serves HTTP proxy requests (absolute-form and `CONNECT`) on `listener` from a
    /// thread of its own until the proxy is dropped, and returns its address.
    ///
    /// # Errors
    ///
    /// The listener's address or mode cannot be read or set, or the thread not started.
    pub fn serve_http(&self, listener: TcpListener) -> io::Result<SocketAddr> {
        self.serve_one(listener, Protocol::Http)
    }

    /// Serves SOCKS5 (no authentication, `CONNECT`) on `listener`, as
    /// [`Proxy::serve_http`].
    ///
    /// # Errors
    ///
    /// As [`Proxy::serve_http`].
    pub fn serve_socks5(&self, listener: TcpListener) -> io::Result<SocketAddr> {
        self.serve_one(listener, Protocol::Socks5)
    }

    /// The decisions so far, of every run, oldest first (the newest 10 000).
    pub fn decisions(&self) -> Vec<Decision> {
        lock(&self.shared.decisions).iter().cloned().collect()
    }

    fn serve_one(&self, listener: TcpListener, protocol: Protocol) -> io::Result<SocketAddr> {
        let addr = listener.local_addr()?;
        let run = self.start(vec![(listener, protocol)], None, None)?;
        lock(&self.listeners).push(run);
        Ok(addr)
    }

    fn start(
        &self,
        listeners: Vec<(TcpListener, Protocol)>,
        until: Option<OwnedFd>,
        admitted: Option<Admitted>,
    ) -> io::Result<Run> {
        let mut addrs = Vec::with_capacity(listeners.len());
        for (l, protocol) in &listeners {
            l.set_nonblocking(true)?;
            addrs.push((l.local_addr()?, *protocol));
        }
        let (wake_rx, wake_tx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let state = Arc::new(RunState {
            shared: Arc::clone(&self.shared),
            limits: self.limits,
            decisions: Mutex::new(VecDeque::new()),
            conns: Mutex::new(Conns::default()),
            active: AtomicUsize::new(0),
            admitted,
        });
        let s = Arc::clone(&state);
        let bounded = until.is_some();
        let accept = thread::Builder::new()
            .name("stockade-egress".into())
            .spawn(move || accept_loop(&listeners, &wake_rx, until.as_ref(), &s))?;
        Ok(Run(Arc::new(RunHandle {
            state,
            addrs,
            wake: wake_tx,
            accept: Mutex::new(Some(accept)),
            bounded,
        })))
    }
}

impl Drop for Proxy {
    /// Ends the listeners of [`Proxy::serve_http`] and [`Proxy::serve_socks5`] as
    /// [`Run::end`] does (their connections too); runs of [`Proxy::serve_run`] go on.
    fn drop(&mut self) {
        for run in std::mem::take(&mut *lock(&self.listeners)) {
            run.end();
        }
    }
}

/// One sandbox run's share of the proxy (see [`Proxy::serve_run`]): its listeners'
/// addresses, its decisions, and the way to end it. Cheap to clone; the run ends when the
/// last clone is dropped.
#[derive(Clone)]
pub struct Run(Arc<RunHandle>);

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("addrs", &self.0.addrs)
            .field("ended", &self.ended())
            .finish_non_exhaustive()
    }
}

struct RunHandle {
    state: Arc<RunState>,
    addrs: Vec<(SocketAddr, Protocol)>,
    /// Written once to wake the accept thread when the run ends.
    wake: UnixStream,
    accept: Mutex<Option<JoinHandle<()>>>,
    /// Whether an `until` fd ends the run by itself.
    bounded: bool,
}

/// Runs let go of by [`Run::detach`] that have not ended yet.
static DETACHED: Mutex<Vec<Run>> = Mutex::new(Vec::new());

impl Drop for RunHandle {
    fn drop(&mut self) {
        self.end();
    }
}

impl RunHandle {
    fn end(&self) {
        self.state.end();
        // Held while joining, so that a second caller returns only once the listeners
        // are closed too.
        let mut accept = lock(&self.accept);
        if let Some(t) = accept.take() {
            let _ = (&self.wake).write(&[1]);
            let _ = t.join();
        }
    }
}

impl Run {
    /// The address of the run's HTTP listener (of the only listener of a
    /// [`Proxy::serve_socks5`] run).
    pub fn http_addr(&self) -> SocketAddr {
        self.addr(Protocol::Http)
    }

    /// The address of the run's SOCKS5 listener (of the only listener of a
    /// [`Proxy::serve_http`] run).
    pub fn socks_addr(&self) -> SocketAddr {
        self.addr(Protocol::Socks5)
    }

    fn addr(&self, protocol: Protocol) -> SocketAddr {
        let a = &self.0.addrs;
        a.iter()
            .find(|(_, p)| *p == protocol)
            .or(a.first())
            .map(|(a, _)| *a)
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// This run's decisions, oldest first (the newest 10 000).
    pub fn decisions(&self) -> Vec<Decision> {
        lock(&self.0.state.decisions).iter().cloned().collect()
    }

    /// Whether the run has ended (by [`Run::end`] or its `until` fd).
    pub fn ended(&self) -> bool {
        lock(&self.0.state.conns).ended
    }

    /// Ends the run: stops accepting on its listeners and closes them, and shuts down
    /// (both ways) every connection of the run still open, client and upstream sides.
    /// When it returns, a connection to either listener is refused. Idempotent.
    pub fn end(&self) {
        self.0.end();
    }

    /// Lets the run go on without this handle until its `until` fd ends it: for a
    /// program still running whose host-side handle goes away (a `Child` dropped without
    /// waiting). Its clones elsewhere keep working. A run without an `until` fd would
    /// never end, so it is ended here instead. Detached runs that have ended are released
    /// at the next detach.
    pub fn detach(self) {
        if !self.0.bounded {
            return self.end();
        }
        let mut held = lock(&DETACHED);
        held.retain(|r| !r.ended());
        held.push(self);
    }
}

/// A run's state, shared by its accept thread and its connections' threads.
struct RunState {
    shared: Arc<Shared>,
    limits: Limits,
    decisions: Mutex<VecDeque<Decision>>,
    conns: Mutex<Conns>,
    /// The run's connections being served.
    active: AtomicUsize,
    /// The peers it may serve, when not every peer ([`Proxy::serve_run_admitted`]).
    admitted: Option<Admitted>,
}

/// The peer addresses a run's proxy serves ([`Proxy::serve_run_admitted`]): each admitted
/// once, by the code that made the connection, and taken by the connection it names. A
/// connection accepted before its admission waits for it in the accept loop, without a
/// place of the run or a thread (`Pending`), so that other local processes cannot fill
/// the run's places (layer 2's listeners are on the host's loopback).
/// Cheap to clone (one shared set); bounded (the oldest of 4096 unclaimed go first) and
/// short-lived: an admission not taken within five seconds goes (its connection was
/// closed unserved, over the run's limit), so that no later connection that happens to
/// get the same source port is served by it.
#[derive(Clone, Debug, Default)]
pub struct Admitted(Arc<Mutex<Admissions>>);

/// The admissions not taken yet, each with when it came.
type Admissions = VecDeque<(SocketAddr, std::time::Instant)>;

impl Admitted {
    /// The most unclaimed admissions kept.
    const MAX: usize = 4096;
    /// How long an admission waits to be taken: its connection's accept follows its
    /// connect by microseconds (the accept loop holds a connection a second at most).
    const LIFE: Duration = Duration::from_secs(5);

    /// An empty set.
    pub fn new() -> Admitted {
        Admitted::default()
    }

    /// Admits one connection from `peer` (the connecting socket's own address; an
    /// IPv4-mapped IPv6 one is its IPv4 address, as the IPv4 listener sees it).
    pub fn admit(&self, peer: SocketAddr) {
        let peer = unmapped(peer);
        let mut q = lock(&self.0);
        let now = std::time::Instant::now();
        q.retain(|(_, at)| now.duration_since(*at) < Self::LIFE);
        if q.len() >= Self::MAX {
            q.pop_front();
        }
        q.push_back((peer, now));
    }

    /// Takes the admission of `peer` if it has come: whether it had.
    fn take(&self, peer: SocketAddr) -> bool {
        let peer = unmapped(peer);
        let mut q = lock(&self.0);
        let now = std::time::Instant::now();
        q.retain(|(_, at)| now.duration_since(*at) < Self::LIFE);
        match q.iter().position(|(a, _)| *a == peer) {
            Some(i) => {
                q.remove(i);
                true
            }
            None => false,
        }
    }
}

/// `addr` with an IPv4-mapped IPv6 address written as the IPv4 address.
fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::from((v4, a.port())),
            None => addr,
        },
        v4 => v4,
    }
}

/// The sockets of a run's open connections, to shut down when it ends.
#[derive(Default)]
struct Conns {
    ended: bool,
    next: u64,
    open: HashMap<u64, Arc<TcpStream>>,
}

impl RunState {
    /// Marks the run ended and shuts down every socket registered so far; later
    /// registrations fail.
    fn end(&self) {
        let open = {
            let mut c = lock(&self.conns);
            c.ended = true;
            std::mem::take(&mut c.open)
        };
        for s in open.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Registers a socket of the run, to be shut down when the run ends; `None` (and the
    /// socket shut down) when it has ended already.
    fn register(self: &Arc<Self>, s: &Arc<TcpStream>) -> Option<Registered> {
        let mut c = lock(&self.conns);
        if c.ended {
            drop(c);
            let _ = s.shutdown(Shutdown::Both);
            return None;
        }
        let id = c.next;
        c.next += 1;
        c.open.insert(id, Arc::clone(s));
        Some(Registered {
            run: Arc::clone(self),
            id,
        })
    }
}

/// A socket's place in its run's registry, left on drop.
struct Registered {
    run: Arc<RunState>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.run.conns).open.remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A connection's place in its run's and the proxy's counts, left when its thread ends.
struct Slot(Arc<RunState>);

impl Slot {
    /// Takes a place, or `None` when the run or the proxy is full.
    fn take(run: &Arc<RunState>) -> Option<Slot> {
        let shared = &run.shared;
        let max_total = shared.max_active.load(Ordering::SeqCst);
        if shared.active.fetch_add(1, Ordering::SeqCst) >= max_total {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                max = max_total,
                "egress proxy: too many connections for the whole proxy; one closed"
            );
            return None;
        }
        let max = run.limits.max_connections;
        if run.active.fetch_add(1, Ordering::SeqCst) >= max {
            run.active.fetch_sub(1, Ordering::SeqCst);
            shared.active.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(
                max,
                "egress proxy: too many connections for one run; one closed"
            );
            return None;
        }
        Some(Slot(Arc::clone(run)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        self.0.shared.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The run's accept thread: polls its listeners, the wake socket and `until`, and starts
/// a thread per accepted connection.
fn accept_loop(
    listeners: &[(TcpListener, Protocol)],
    wake: &UnixStream,
    until: Option<&OwnedFd>,
    run: &Arc<RunState>,
) {
    let mut pending = Pending::default();
    loop {
        let mut fds: Vec<PollFd> = listeners
            .iter()
            .map(|(l, _)| PollFd::new(l.as_fd(), PollFlags::POLLIN))
            .collect();
        fds.push(PollFd::new(wake.as_fd(), PollFlags::POLLIN));
        if let Some(u) = until {
            fds.push(PollFd::new(u.as_fd(), PollFlags::POLLIN));
        }
        // Connections waiting for their admission are looked at again every few ms.
        let timeout = if pending.0.is_empty() {
            PollTimeout::NONE
        } else {
            PollTimeout::from(Pending::RECHECK_MS)
        };
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(e) => {
                tracing::error!(error = %e, "egress proxy: poll failed; run ended");
                run.end();
                return;
            }
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        let n = listeners.len();
        if ready(&fds[n]) || lock(&run.conns).ended {
            return;
        }
        if fds.get(n + 1).is_some_and(ready) {
            tracing::debug!("egress proxy: the run's process exited; run ended");
            run.end();
            return;
        }
        let accepting: Vec<bool> = fds[..n].iter().map(ready).collect();
        drop(fds);
        pending.recheck(run);
        for ((l, protocol), go) in listeners.iter().zip(accepting) {
            if go {
                accept_one(l, *protocol, run, &mut pending);
            }
        }
    }
}

/// The accepted connections of a run with admissions ([`Proxy::serve_run_admitted`])
/// whose admission has not come yet: the host admits a connection it made for the
/// program right after its `connect` returns, which may be after the accept. Held by the
/// accept loop itself, without a place of the run or a thread, at most [`Pending::MAX`]
/// (the oldest closed first) and [`Pending::WAIT`] each: other local processes that
/// connect to layer 2's listeners on the host's loopback can neither fill the run's
/// places nor keep the program's own connection from being served, which is admitted
/// within microseconds of its accept.
#[derive(Default)]
struct Pending(VecDeque<(TcpStream, Protocol, Instant)>);

impl Pending {
    const MAX: usize = 256;
    const WAIT: Duration = Duration::from_secs(1);
    const RECHECK_MS: u8 = 5;

    /// Starts those admitted now, and closes those past [`Pending::WAIT`].
    fn recheck(&mut self, run: &Arc<RunState>) {
        let Some(admitted) = &run.admitted else {
            return;
        };
        let now = Instant::now();
        let waiting = std::mem::take(&mut self.0);
        for (conn, protocol, since) in waiting {
            if conn.peer_addr().is_ok_and(|p| admitted.take(p)) {
                start(conn, protocol, run);
            } else if now.duration_since(since) < Self::WAIT {
                self.0.push_back((conn, protocol, since));
            } else {
                tracing::debug!(
                    peer = ?conn.peer_addr().ok(),
                    "egress proxy: a connection not made by the sandboxed program; closed unserved"
                );
            }
        }
    }

    /// Holds `conn` until its admission comes, closing the oldest held when full.
    fn hold(&mut self, conn: TcpStream, protocol: Protocol) {
        if self.0.len() >= Self::MAX {
            self.0.pop_front();
        }
        self.0.push_back((conn, protocol, Instant::now()));
    }
}

fn accept_one(
    listener: &TcpListener,
    protocol: Protocol,
    run: &Arc<RunState>,
    pending: &mut Pending,
) {
    let conn = match listener.accept() {
        Ok((conn, _)) => conn,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
        Err(e) => {
            // EMFILE and the like: back off instead of spinning.
            tracing::warn!(error = %e, "egress proxy: accept failed");
            thread::sleep(Duration::from_millis(10));
            return;
        }
    };
    if let Some(admitted) = &run.admitted {
        if !conn.peer_addr().is_ok_and(|p| admitted.take(p)) {
            pending.hold(conn, protocol);
            return;
        }
    }
    start(conn, protocol, run);
}

/// Serves an accepted (and, where the run has admissions, admitted) connection on a
/// thread of its own, in one of the run's places; closed unserved when the run or the
/// proxy is full.
fn start(conn: TcpStream, protocol: Protocol, run: &Arc<RunState>) {
    let Some(slot) = Slot::take(run) else {
        // Over the run's limit: closed unserved.
        return;
    };
    let run = Arc::clone(run);
    let spawned = thread::Builder::new()
        .name("stockade-egress-conn".into())
        .spawn(move || {
            let _slot = slot;
            if conn.set_nonblocking(false).is_err() {
                return;
            }
            let _ = conn.set_nodelay(true);
            let conn = Arc::new(conn);
            let Some(_reg) = run.register(&conn) else {
                return;
            };
            match protocol {
                Protocol::Socks5 => serve_socks5(&conn, &run),
                _ => serve_http(&conn, &run),
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "egress proxy: no thread for a connection");
    }
}

/// Why reading a request stopped.
enum ReadFail {
    Timeout,
    TooLarge,
    Closed,
}

/// Reads once more into `buf`, waiting until `deadline` at most.
fn read_more(mut conn: &TcpStream, buf: &mut Vec<u8>, deadline: Instant) -> Result<(), ReadFail> {
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadFail::Timeout);
        }
        conn.set_read_timeout(Some(left))
            .map_err(|_| ReadFail::Closed)?;
        match conn.read(&mut chunk) {
            Ok(0) => return Err(ReadFail::Closed),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ReadFail::Timeout);
            }
            Err(_) => return Err(ReadFail::Closed),
        }
    }
}

/// Decides a connection and records the decision in the proxy's and the run's lists.
fn decide(
    run: &RunState,
    protocol: Protocol,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, Refusal> {
    let result = run.shared.egress.decide(host, port);
    match &result {
        Ok(addrs) => tracing::info!(?protocol, host, port, ?addrs, "egress allowed"),
        Err(r) => tracing::warn!(?protocol, host, port, refusal = %r, "egress refused"),
    }
    let decision = Decision {
        protocol,
        host: super::shown_host(host),
        port,
        addrs: result.clone().unwrap_or_default(),
        refusal: result.clone().err(),
    };
    for list in [&run.shared.decisions, &run.decisions] {
        let mut d = lock(list);
        if d.len() == MAX_DECISIONS {
            d.pop_front();
        }
        d.push_back(decision.clone());
    }
    result
}

/// Connects to the first of `addrs` that answers, as a socket of the run, all of them
/// within one connect timeout: a name of many unreachable addresses does not hold the
/// connection's thread for a timeout each, nor past the run's end.
fn connect(addrs: &[SocketAddr], run: &Arc<RunState>) -> Option<(Arc<TcpStream>, Registered)> {
    let deadline = Instant::now() + run.limits.connect_timeout;
    let s = addrs.iter().find_map(|a| {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())?;
        if lock(&run.conns).ended {
            return None;
        }
        TcpStream::connect_timeout(a, left).ok()
    })?;
    let _ = s.set_nodelay(true);
    let s = Arc::new(s);
    let reg = run.register(&s)?;
    Some((s, reg))
}

/// Answers an HTTP error and closes, reading (bounded) what the client still sends so
/// that the close does not reset the answer away.
fn respond(mut conn: &TcpStream, code: u16, reason: &str, body: &str) {
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body.as_bytes());
    let _ = conn.shutdown(Shutdown::Write);
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut sink = Vec::new();
    while sink.len() < 64 * 1024 && read_more(conn, &mut sink, deadline).is_ok() {}
}

fn refusal_body(host: &str, port: u16, r: &Refusal) -> String {
    match r.policy_key() {
        Some(key) => format!(
            "stockade egress proxy: {host} port {port} refused: {r}.\nTo allow it, add it to the sandbox policy's {key}.\n"
        ),
        None => format!("stockade egress proxy: {host} port {port} refused: {r}.\n"),
    }
}

fn serve_http(conn: &Arc<TcpStream>, run: &Arc<RunState>) {
    let deadline = Instant::now() + run.limits.head_timeout;
    let mut buf = Vec::new();
    let mut scanned = 0;
    let n = loop {
        if let Some(n) = http::head_len_after(&buf, scanned) {
            break n;
        }
        scanned = buf.len();
        let fail = if buf.len() > http::MAX_HEAD {
            Err(ReadFail::TooLarge)
        } else {
            read_more(conn, &mut buf, deadline)
        };
        match fail {
            Ok(()) => {}
            Err(ReadFail::Timeout) => {
                return respond(conn, 408, "Request Timeout", "request head timed out\n");
            }
            Err(ReadFail::TooLarge) => {
                return respond(conn, 400, "Bad Request", "the request head is too large\n");
            }
            Err(ReadFail::Closed) => return,
        }
    };
    let request = match http::parse_head(&buf[..n]) {
        Ok(r) => r,
        Err(e) => {
            let (code, reason) = e.status();
            tracing::debug!(code, why = e.reason(), "egress proxy: request refused");
            return respond(conn, code, reason, &format!("{}\n", e.reason()));
        }
    };
    let _ = conn.set_read_timeout(None);
    let (protocol, host, port) = match &request {
        Request::Connect { host, port } => (Protocol::Connect, host.clone(), *port),
        Request::Forward(f) => (Protocol::Http, f.host.clone(), f.port),
    };
    let rest = &buf[n..];
    // A forward request's body: what came with the head goes through the same count or
    // framing as the rest, before anything is decided or connected.
    let mut upload = match &request {
        Request::Connect { .. } => Upload::All,
        Request::Forward(f) => match f.body {
            Body::Length(n) => Upload::Length(n),
            Body::Chunked => Upload::Chunked(Chunked::new()),
        },
    };
    let Ok(first) = upload.admit(rest) else {
        return respond(conn, 400, "Bad Request", "a malformed chunked body\n");
    };
    let addrs = match decide(run, protocol, &host, port) {
        Ok(a) => a,
        Err(r) => return respond(conn, 403, "Forbidden", &refusal_body(&host, port, &r)),
    };
    let Some((up, _reg)) = connect(&addrs, run) else {
        return respond(
            conn,
            502,
            "Bad Gateway",
            &format!("cannot connect to {host} port {port}\n"),
        );
    };
    match request {
        Request::Connect { .. } => {
            if (&**conn)
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_err()
                || (&*up).write_all(rest).is_err()
            {
                return;
            }
        }
        Request::Forward(f) => {
            if (&*up).write_all(&f.head).is_err() || (&*up).write_all(&rest[..first]).is_err() {
                return;
            }
        }
    }
    relay(conn, &up, upload, run.limits.idle_timeout);
}

fn serve_socks5(conn: &Arc<TcpStream>, run: &Arc<RunState>) {
    let mut w: &TcpStream = conn;
    let deadline = Instant::now() + run.limits.head_timeout;
    let mut buf = Vec::new();
    let (no_auth, used) = loop {
        match socks5::parse_greeting(&buf) {
            Ok(Parse::Done(a, n)) => break (a, n),
            Ok(Parse::Incomplete) if buf.len() < socks5::MAX_GREETING => {
                if read_more(conn, &mut buf, deadline).is_err() {
                    return;
                }
            }
            _ => return,
        }
    };
    if !no_auth {
        let _ = w.write_all(&[5, 0xff]);
        return;
    }
    if w.write_all(&[5, 0]).is_err() {
        return;
    }
    buf.drain(..used);
    let (req, used) = loop {
        match socks5::parse_request(&buf) {
            Ok(Parse::Done(r, n)) => break (r, n),
            Ok(Parse::Incomplete) if buf.len() < socks5::MAX_REQUEST => {
                if read_more(conn, &mut buf, deadline).is_err() {
                    return;
                }
            }
            Err(Socks5Error::AddressType) => {
                let _ = w.write_all(&socks5::reply(socks5::ADDRESS_TYPE_NOT_SUPPORTED));
                return;
            }
            _ => {
                let _ = w.write_all(&socks5::reply(0x01));
                return;
            }
        }
    };
    if req.command != socks5::CONNECT {
        let _ = w.write_all(&socks5::reply(socks5::COMMAND_NOT_SUPPORTED));
        return;
    }
    let _ = conn.set_read_timeout(None);
    let addrs = match decide(run, Protocol::Socks5, &req.host, req.port) {
        Ok(a) => a,
        Err(r) => {
            let code = match r {
                Refusal::Resolve { .. } | Refusal::NoAddress { .. } => socks5::HOST_UNREACHABLE,
                _ => socks5::NOT_ALLOWED,
            };
            let _ = w.write_all(&socks5::reply(code));
            return;
        }
    };
    let Some((up, _reg)) = connect(&addrs, run) else {
        let _ = w.write_all(&socks5::reply(socks5::HOST_UNREACHABLE));
        return;
    };
    if w.write_all(&socks5::reply(socks5::SUCCEEDED)).is_err()
        || (&*up).write_all(&buf[used..]).is_err()
    {
        return;
    }
    relay(conn, &up, Upload::All, run.limits.idle_timeout);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An admission is taken once, by its own peer; one not taken within its life goes,
    /// so a later connection from the same source port is not served by it.
    #[test]
    fn an_admission_is_taken_once_and_expires_untaken() {
        let a = Admitted::new();
        let (p, q): (SocketAddr, SocketAddr) = (
            "127.0.0.1:40001".parse().unwrap(),
            "127.0.0.1:40002".parse().unwrap(),
        );
        a.admit(p);
        assert!(!a.take(q));
        assert!(a.take(p));
        assert!(!a.take(p), "taken twice");
        a.admit(q);
        std::thread::sleep(Admitted::LIFE + Duration::from_millis(100));
        assert!(!a.take(q), "an admission outlived its life");
        // An IPv6 socket's mapped source is the IPv4 peer the listener sees.
        a.admit("[::ffff:127.0.0.1]:40003".parse().unwrap());
        assert!(a.take("127.0.0.1:40003".parse().unwrap()));
    }

    /// A connection to a run's proxy made with its admission, as layer 2's host makes the
    /// sandboxed program's (source bound, admitted, then connected).
    #[cfg(target_os = "linux")]
    fn admitted_connect(admitted: &Admitted, to: SocketAddr) -> TcpStream {
        use std::os::fd::{AsRawFd, FromRawFd};
        let sin = |addr: std::net::SocketAddrV4| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: addr.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(addr.ip().octets()),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: socket has no memory preconditions.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "{}", io::Error::last_os_error());
        // SAFETY: `fd` is a new descriptor this function owns from here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut local = sin("127.0.0.1:0".parse().unwrap());
        // SAFETY: `local` is a `sockaddr_in` of `len` bytes, valid for the call.
        let r = unsafe { libc::bind(fd.as_raw_fd(), std::ptr::from_ref(&local).cast(), len) };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        let mut got = len;
        // SAFETY: `local` and `got` are valid for writes, `got` is `local`'s size.
        let r = unsafe {
            libc::getsockname(
                fd.as_raw_fd(),
                std::ptr::from_mut(&mut local).cast(),
                &mut got,
            )
        };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        admitted.admit(SocketAddr::from((
            [127, 0, 0, 1],
            u16::from_be(local.sin_port),
        )));
        let SocketAddr::V4(to) = to else {
            panic!("{to}")
        };
        let peer = sin(to);
        // SAFETY: `peer` is a `sockaddr_in` of `len` bytes, valid for the call.
        let r = unsafe { libc::connect(fd.as_raw_fd(), std::ptr::from_ref(&peer).cast(), len) };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        TcpStream::from(fd)
    }

    /// Layer 2's listeners are on the host's loopback: other local processes can connect
    /// to them. A flood of such connections, held open, waits without taking any of the
    /// run's 64 places and is closed after a second, so the sandboxed program's own
    /// connections are still served, admitted before or after their accept (before, each
    /// unadmitted connection held a place for up to a second while it waited for an
    /// admission, and the program's was closed unserved).
    #[cfg(target_os = "linux")]
    #[test]
    fn connections_without_an_admission_take_no_place_of_the_run() {
        let proxy = Proxy::new(Egress::new(
            crate::policy::Allowlist::parse(&[]).unwrap(),
            Vec::new(),
        ));
        let http = TcpListener::bind("127.0.0.1:0").unwrap();
        let socks = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = http.local_addr().unwrap();
        let admitted = Admitted::new();
        let run = proxy
            .serve_run_admitted(http, socks, None, admitted.clone())
            .unwrap();
        let flood: Vec<TcpStream> = (0..100).map(|_| TcpStream::connect(to).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(100));
        // Admitted after its connect (and so, here, after its accept): still served.
        let mut late = TcpStream::connect(to).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        admitted.admit(late.local_addr().unwrap());
        late.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        late.write_all(b"GET http://example.invalid/ HTTP/1.1\r\nHost: example.invalid\r\n\r\n")
            .unwrap();
        let mut answer = [0u8; 12];
        late.read_exact(&mut answer).unwrap();
        assert_eq!(
            &answer, b"HTTP/1.1 403",
            "a connection admitted late was not served"
        );
        let mut ours = admitted_connect(&admitted, to);
        ours.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        ours.write_all(b"GET http://example.invalid/ HTTP/1.1\r\nHost: example.invalid\r\n\r\n")
            .unwrap();
        let mut answer = [0u8; 12];
        ours.read_exact(&mut answer).unwrap();
        assert_eq!(
            &answer, b"HTTP/1.1 403",
            "the program's connection was not served"
        );
        for mut f in flood {
            f.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut b = [0u8; 1];
            assert!(
                matches!(f.read(&mut b), Ok(0) | Err(_)),
                "an unadmitted connection was served"
            );
        }
        run.end();
    }
}
