//! The egress proxy's cost on loopback, side by side with a direct connection.
//!
//! ```text
//! cargo run --release --example egress_bench [-- GIB [CONNECTIONS]]
//! ```
//!
//! A local HTTP server thread answers `GET /bytes/N` with N bytes (a 1 MiB buffer written
//! over and over). Two figures, each direct and through a [`Proxy`] run (`serve_run`):
//!
//! - **Throughput**: a download of GIB GiB (default 1), direct, through a `CONNECT` tunnel
//!   and as a plain HTTP forward request; rounds interleaved, the best of 3 per way.
//!   Goal: ≥ 0.8× direct.
//! - **Added latency**: a new connection, the request, and the first byte of the answer
//!   (for `CONNECT`, the `CONNECT` and the `GET` written at once, the first byte after the
//!   proxy's 200), median of CONNECTIONS (default 400) per way, interleaved; the proxy's
//!   figure minus the direct one. Goal: ≤ 1 ms.
//!
//! It prints figures and asserts nothing about time.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use stockade::guard::egress::{Allowlist, Cidr, Egress, Proxy};

const HOST: &str = "bench.test";

/// Serves `GET /bytes/N` on a thread per connection.
fn server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { continue };
            thread::spawn(move || {
                let _ = answer(s);
            });
        }
    });
    addr
}

fn answer(mut s: TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut head = Vec::new();
    let mut b = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut b)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&b[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let n: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.rsplit('/').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"
    )?;
    let buf = vec![0x5a_u8; 1 << 20];
    let mut left = n;
    while left > 0 {
        let k = left.min(buf.len() as u64) as usize;
        s.write_all(&buf[..k])?;
        left -= k as u64;
    }
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Way {
    Direct,
    Connect,
    Forward,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Direct => "direct",
            Way::Connect => "proxy, CONNECT tunnel",
            Way::Forward => "proxy, HTTP forward",
        }
    }
}

/// Opens a connection for `GET /bytes/n` the given way; the stream positioned at the
/// start of the server's answer (the proxy's 200 to `CONNECT` read off).
fn open(way: Way, server: SocketAddr, http: SocketAddr, n: u64) -> TcpStream {
    let port = server.port();
    let (to, request) = match way {
        Way::Direct => (
            server,
            format!("GET /bytes/{n} HTTP/1.1\r\nHost: x\r\n\r\n"),
        ),
        Way::Connect => (
            http,
            format!(
                "CONNECT {HOST}:{port} HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\nGET /bytes/{n} HTTP/1.1\r\nHost: x\r\n\r\n"
            ),
        ),
        Way::Forward => (
            http,
            format!("GET http://{HOST}:{port}/bytes/{n} HTTP/1.1\r\nHost: x\r\n\r\n"),
        ),
    };
    let mut s = TcpStream::connect(to).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    if let Way::Connect = way {
        let expect = b"HTTP/1.1 200 Connection established\r\n\r\n";
        let mut head = vec![0u8; expect.len()];
        s.read_exact(&mut head).unwrap();
        assert_eq!(head, expect);
    }
    s
}

/// The CPU time this process has used (all its threads: server, proxy, client).
fn cpu() -> Duration {
    let u = getrusage(UsageWho::RUSAGE_SELF).unwrap();
    let t =
        |tv: nix::sys::time::TimeVal| Duration::new(tv.tv_sec() as u64, tv.tv_usec() as u32 * 1000);
    t(u.user_time()) + t(u.system_time())
}

/// Downloads `n` bytes; the bytes per second, from the connect to the last byte, and the
/// CPU seconds used per second.
fn download(way: Way, server: SocketAddr, http: SocketAddr, n: u64) -> (f64, f64) {
    let cpu0 = cpu();
    let start = Instant::now();
    let mut s = open(way, server, http, n);
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let k = s.read(&mut buf).unwrap();
        if k == 0 {
            break;
        }
        total += k as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = (cpu() - cpu0).as_secs_f64();
    assert!(total > n, "{} got {total} of {n}", way.name());
    (n as f64 / secs, cpu / secs)
}

/// Connect, request, first byte of the answer.
fn first_byte(way: Way, server: SocketAddr, http: SocketAddr) -> Duration {
    let start = Instant::now();
    let mut s = open(way, server, http, 1);
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    let t = start.elapsed();
    assert_eq!(b[0], b'H');
    t
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let gib: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let conns: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(400);
    let bytes = (gib * f64::from(1u32 << 30)) as u64;

    let server = server();
    let egress = Egress::new(
        Allowlist::parse(&[HOST.to_string()]).unwrap(),
        Cidr::parse_all(&["127.0.0.1/32".to_string()]).unwrap(),
    )
    .with_resolver(|_, _| -> io::Result<Vec<IpAddr>> { Ok(vec!["127.0.0.1".parse().unwrap()]) });
    let proxy = Proxy::new(egress).with_max_connections(1024);
    let run = proxy
        .serve_run(
            TcpListener::bind("127.0.0.1:0").unwrap(),
            TcpListener::bind("127.0.0.1:0").unwrap(),
            None,
        )
        .unwrap();
    let http = run.http_addr();
    let ways = [Way::Direct, Way::Connect, Way::Forward];

    println!("throughput: {gib} GiB download on loopback, best of 3 rounds (interleaved)");
    let mut best = [0f64; 3];
    for round in 0..3 {
        for (i, way) in ways.iter().enumerate() {
            let (r, load) = download(*way, server, http, bytes);
            println!(
                "  round {round}: {:<22} {:>7.2} GB/s  {:>5.2} CPU s per GiB",
                way.name(),
                r / 1e9,
                load * f64::from(1u32 << 30) / r
            );
            best[i] = best[i].max(r);
        }
    }
    for (i, way) in ways.iter().enumerate() {
        println!(
            "  {:<22} {:>7.2} GB/s  {:.2}x direct",
            way.name(),
            best[i] / 1e9,
            best[i] / best[0]
        );
    }

    println!("latency: connect + request + first byte, median of {conns} (interleaved)");
    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..10 {
        for way in ways {
            first_byte(way, server, http);
        }
    }
    for _ in 0..conns {
        for (i, way) in ways.iter().enumerate() {
            times[i].push(first_byte(*way, server, http));
        }
    }
    let direct = median(&mut times[0]);
    for (i, way) in ways.iter().enumerate() {
        let m = median(&mut times[i]);
        let p90 = times[i][times[i].len() * 9 / 10];
        println!(
            "  {:<22} median {:>8.1} µs  p90 {:>8.1} µs  added {:>+8.1} µs",
            way.name(),
            m.as_secs_f64() * 1e6,
            p90.as_secs_f64() * 1e6,
            (m.as_secs_f64() - direct.as_secs_f64()) * 1e6
        );
    }
    drop(run);
}
