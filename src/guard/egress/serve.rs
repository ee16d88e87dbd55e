//! The proxy's threads: one accept thread per listener, one thread (two while copying) per
//! connection, at most [`Proxy::with_max_connections`] connections per listener.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::http::{self, Request};
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

/// Timeouts and bounds, copied into each listener's thread when it starts.
#[derive(Clone, Copy, Debug)]
struct Limits {
    head_timeout: Duration,
    connect_timeout: Duration,
    max_connections: usize,
}

struct Shared {
    egress: Egress,
    decisions: Mutex<VecDeque<Decision>>,
    stop: AtomicBool,
}

/// The egress proxy: serves HTTP and SOCKS5 listeners under one [`Egress`] policy until
/// it is dropped.
pub struct Proxy {
    shared: Arc<Shared>,
    limits: Limits,
    accepts: Mutex<Vec<JoinHandle<()>>>,
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
    /// A proxy deciding by `egress`: 10 s to read a request head, 10 s to connect, at most
    /// 64 connections at once per listener.
    pub fn new(egress: Egress) -> Proxy {
        Proxy {
            shared: Arc::new(Shared {
                egress,
                decisions: Mutex::new(VecDeque::new()),
                stop: AtomicBool::new(false),
            }),
            limits: Limits {
                head_timeout: Duration::from_secs(10),
                connect_timeout: Duration::from_secs(10),
                max_connections: 64,
            },
            accepts: Mutex::new(Vec::new()),
        }
    }

    /// The whole time a client has to send its request head (HTTP) or greeting and request
    /// (SOCKS5), from its connection on; then it is closed. For listeners served after.
    pub fn with_head_timeout(mut self, timeout: Duration) -> Proxy {
        self.limits.head_timeout = timeout;
        self
    }

    /// The time to connect to an allowed address. For listeners served after.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Proxy {
        self.limits.connect_timeout = timeout;
        self
    }

    /// The most connections served at once per listener; more are closed on accept.
    pub fn with_max_connections(mut self, max: usize) -> Proxy {
        self.limits.max_connections = max;
        self
    }

    /// Serves HTTP proxy requests (absolute-form and `CONNECT`) on `listener` from a
    /// thread of its own, and returns its address.
    ///
    /// # Errors
    ///
    /// The listener's address or mode cannot be read or set, or the thread not started.
    pub fn serve_http(&self, listener: TcpListener) -> io::Result<SocketAddr> {
        self.serve(listener, Protocol::Http)
    }

    /// Serves SOCKS5 (no authentication, `CONNECT`) on `listener`, as
    /// [`Proxy::serve_http`].
    ///
    /// # Errors
    ///
    /// As [`Proxy::serve_http`].
    pub fn serve_socks5(&self, listener: TcpListener) -> io::Result<SocketAddr> {
        self.serve(listener, Protocol::Socks5)
    }

    /// The decisions so far, oldest first (the newest 10 000).
    pub fn decisions(&self) -> Vec<Decision> {
        let d = self
            .shared
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        d.iter().cloned().collect()
    }

    fn serve(&self, listener: TcpListener, protocol: Protocol) -> io::Result<SocketAddr> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let shared = Arc::clone(&self.shared);
        let limits = self.limits;
        let handle = thread::Builder::new()
            .name("stockade-egress".into())
            .spawn(move || accept_loop(&listener, &shared, limits, protocol))?;
        self.accepts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
        Ok(addr)
    }
}

impl Drop for Proxy {
    /// Stops accepting and closes the listeners (within 100 ms); connections already
    /// served run to their end.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let handles =
            std::mem::take(&mut *self.accepts.lock().unwrap_or_else(PoisonError::into_inner));
        for h in handles {
            let _ = h.join();
        }
    }
}

/// Decrements a listener's connection count when a connection's thread ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, limits: Limits, protocol: Protocol) {
    let active = Arc::new(AtomicUsize::new(0));
    while !shared.stop.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(100u16)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "egress proxy: poll failed; listener closed");
                return;
            }
        }
        let conn = match listener.accept() {
            Ok((conn, _)) => conn,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                // EMFILE and the like: back off instead of spinning.
                tracing::warn!(error = %e, "egress proxy: accept failed");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if active.load(Ordering::SeqCst) >= limits.max_connections {
            tracing::warn!("egress proxy: too many connections; one closed");
            continue;
        }
        active.fetch_add(1, Ordering::SeqCst);
        let slot = Slot(Arc::clone(&active));
        let shared = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name("stockade-egress-conn".into())
            .spawn(move || {
                let _slot = slot;
                if conn.set_nonblocking(false).is_err() {
                    return;
                }
                let _ = conn.set_nodelay(true);
                match protocol {
                    Protocol::Socks5 => serve_socks5(conn, &shared, limits),
                    _ => serve_http(conn, &shared, limits),
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "egress proxy: no thread for a connection");
        }
    }
}

/// Why reading a request stopped.
enum ReadFail {
    Timeout,
    TooLarge,
    Closed,
}

/// Reads once more into `buf`, waiting until `deadline` at most.
fn read_more(conn: &mut TcpStream, buf: &mut Vec<u8>, deadline: Instant) -> Result<(), ReadFail> {
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

fn decide(
    shared: &Shared,
    protocol: Protocol,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, Refusal> {
    let result = shared.egress.decide(host, port);
    match &result {
        Ok(addrs) => tracing::info!(?protocol, host, port, ?addrs, "egress allowed"),
        Err(r) => tracing::warn!(?protocol, host, port, refusal = %r, "egress refused"),
    }
    let mut d = shared
        .decisions
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if d.len() == MAX_DECISIONS {
        d.pop_front();
    }
    d.push_back(Decision {
        protocol,
        host: host.chars().take(255).collect(),
        port,
        addrs: result.clone().unwrap_or_default(),
        refusal: result.clone().err(),
    });
    result
}

fn connect(addrs: &[SocketAddr], timeout: Duration) -> Option<TcpStream> {
    addrs.iter().find_map(|a| {
        let s = TcpStream::connect_timeout(a, timeout).ok()?;
        let _ = s.set_nodelay(true);
        Some(s)
    })
}

/// Answers an HTTP error and closes, reading (bounded) what the client still sends so
/// that the close does not reset the answer away.
fn respond(mut conn: TcpStream, code: u16, reason: &str, body: &str) {
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body.as_bytes());
    let _ = conn.shutdown(Shutdown::Write);
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut sink = Vec::new();
    while sink.len() < 64 * 1024 && read_more(&mut conn, &mut sink, deadline).is_ok() {}
}

fn refusal_body(host: &str, port: u16, r: &Refusal) -> String {
    match r.policy_key() {
        Some(key) => format!(
            "stockade egress proxy: {host} port {port} refused: {r}.\nTo allow it, add it to the sandbox policy's {key}.\n"
        ),
        None => format!("stockade egress proxy: {host} port {port} refused: {r}.\n"),
    }
}

fn serve_http(mut conn: TcpStream, shared: &Shared, limits: Limits) {
    let deadline = Instant::now() + limits.head_timeout;
    let mut buf = Vec::new();
    let n = loop {
        if let Some(n) = http::head_len(&buf) {
            break n;
        }
        let fail = if buf.len() > http::MAX_HEAD {
            Err(ReadFail::TooLarge)
        } else {
            read_more(&mut conn, &mut buf, deadline)
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
    let addrs = match decide(shared, protocol, &host, port) {
        Ok(a) => a,
        Err(r) => return respond(conn, 403, "Forbidden", &refusal_body(&host, port, &r)),
    };
    let Some(mut up) = connect(&addrs, limits.connect_timeout) else {
        return respond(
            conn,
            502,
            "Bad Gateway",
            &format!("cannot connect to {host} port {port}\n"),
        );
    };
    let rest = &buf[n..];
    match request {
        Request::Connect { .. } => {
            if conn
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_err()
                || up.write_all(rest).is_err()
            {
                return;
            }
            tunnel(conn, up, None);
        }
        Request::Forward(f) => {
            let first = rest
                .len()
                .min(usize::try_from(f.body_len).unwrap_or(usize::MAX));
            if up.write_all(&f.head).is_err() || up.write_all(&rest[..first]).is_err() {
                return;
            }
            tunnel(conn, up, Some(f.body_len - first as u64));
        }
    }
}

/// Copies both ways until each side is done. With `body`, at most that many more bytes go
/// from the client upstream (the rest of one request's body: nothing after it is sent),
/// and both connections close once the upstream answer ends.
fn tunnel(client: TcpStream, up: TcpStream, body: Option<u64>) {
    let (Ok(c2), Ok(u2)) = (client.try_clone(), up.try_clone()) else {
        return;
    };
    let upload = thread::Builder::new()
        .name("stockade-egress-copy".into())
        .spawn(move || {
            let _ = match body {
                Some(n) => io::copy(&mut (&c2).take(n), &mut &u2),
                None => io::copy(&mut &c2, &mut &u2),
            };
            if body.is_none() {
                let _ = u2.shutdown(Shutdown::Write);
            }
        });
    let _ = io::copy(&mut &up, &mut &client);
    let _ = client.shutdown(Shutdown::Write);
    if body.is_some() {
        let _ = client.shutdown(Shutdown::Both);
        let _ = up.shutdown(Shutdown::Both);
    }
    if let Ok(t) = upload {
        let _ = t.join();
    }
}

fn serve_socks5(mut conn: TcpStream, shared: &Shared, limits: Limits) {
    let deadline = Instant::now() + limits.head_timeout;
    let mut buf = Vec::new();
    let (no_auth, used) = loop {
        match socks5::parse_greeting(&buf) {
            Ok(Parse::Done(a, n)) => break (a, n),
            Ok(Parse::Incomplete) if buf.len() < socks5::MAX_GREETING => {
                if read_more(&mut conn, &mut buf, deadline).is_err() {
                    return;
                }
            }
            _ => return,
        }
    };
    if !no_auth {
        let _ = conn.write_all(&[5, 0xff]);
        return;
    }
    if conn.write_all(&[5, 0]).is_err() {
        return;
    }
    buf.drain(..used);
    let (req, used) = loop {
        match socks5::parse_request(&buf) {
            Ok(Parse::Done(r, n)) => break (r, n),
            Ok(Parse::Incomplete) if buf.len() < socks5::MAX_REQUEST => {
                if read_more(&mut conn, &mut buf, deadline).is_err() {
                    return;
                }
            }
            Err(Socks5Error::AddressType) => {
                let _ = conn.write_all(&socks5::reply(socks5::ADDRESS_TYPE_NOT_SUPPORTED));
                return;
            }
            _ => {
                let _ = conn.write_all(&socks5::reply(0x01));
                return;
            }
        }
    };
    if req.command != socks5::CONNECT {
        let _ = conn.write_all(&socks5::reply(socks5::COMMAND_NOT_SUPPORTED));
        return;
    }
    let _ = conn.set_read_timeout(None);
    let addrs = match decide(shared, Protocol::Socks5, &req.host, req.port) {
        Ok(a) => a,
        Err(r) => {
            let code = match r {
                Refusal::Resolve { .. } | Refusal::NoAddress { .. } => socks5::HOST_UNREACHABLE,
                _ => socks5::NOT_ALLOWED,
            };
            let _ = conn.write_all(&socks5::reply(code));
            return;
        }
    };
    let Some(mut up) = connect(&addrs, limits.connect_timeout) else {
        let _ = conn.write_all(&socks5::reply(socks5::HOST_UNREACHABLE));
        return;
    };
    if conn.write_all(&socks5::reply(socks5::SUCCEEDED)).is_err()
        || up.write_all(&buf[used..]).is_err()
    {
        return;
    }
    tunnel(conn, up, None);
}
