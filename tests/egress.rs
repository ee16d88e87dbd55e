//! The egress proxy (`guard::egress::Proxy`) against real local servers on 127.0.0.1: a
//! fake resolver maps the test names to 127.0.0.1, and `allow_private = ["127.0.0.1/32"]`
//! lets allowed names reach them.
#![cfg(unix)]

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use stockade::guard::egress::{Allowlist, Cidr, Egress, Protocol, Proxy, Refusal, Run};

/// A local upstream that counts its connections and keeps what each one sent.
struct Upstream {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

/// An HTTP server: reads a head (and anything more within 300 ms), answers `hello`.
fn http_server() -> Upstream {
    server(|mut s, received| {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        received.lock().unwrap().push(buf);
        let _ =
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    })
}

/// A TCP echo server.
fn echo_server() -> Upstream {
    server(|s, _| {
        let _ = io::copy(&mut &s, &mut &s);
    })
}

fn server(handle: fn(TcpStream, &Mutex<Vec<Vec<u8>>>)) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(Mutex::new(Vec::new()));
    let (a, r) = (Arc::clone(&accepted), Arc::clone(&received));
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(s) = s else { continue };
            a.fetch_add(1, Ordering::SeqCst);
            let r = Arc::clone(&r);
            thread::spawn(move || handle(s, &r));
        }
    });
    Upstream {
        addr,
        accepted,
        received,
    }
}

fn egress(allow: &[String], private: &[&str]) -> Egress {
    let private: Vec<String> = private.iter().map(|s| s.to_string()).collect();
    Egress::new(
        Allowlist::parse(allow).unwrap(),
        Cidr::parse_all(&private).unwrap(),
    )
    .with_resolver(|name, _| -> io::Result<Vec<IpAddr>> {
        match name {
            "metadata.test" => Ok(vec!["169.254.169.254".parse().unwrap()]),
            n if n.ends_with(".test") => Ok(vec!["127.0.0.1".parse().unwrap()]),
            _ => Err(io::Error::new(io::ErrorKind::NotFound, "unknown test name")),
        }
    })
}

/// A proxy with an HTTP and a SOCKS5 listener.
fn proxy(allow: &[String], private: &[&str]) -> (Proxy, SocketAddr, SocketAddr) {
    let p = Proxy::new(egress(allow, private)).with_head_timeout(Duration::from_millis(500));
    let http = p
        .serve_http(TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let socks = p
        .serve_socks5(TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    (p, http, socks)
}

const LOCAL: &[&str] = &["127.0.0.1/32"];

/// Sends `request` to the proxy and reads the answer to its end.
fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get(proxy: SocketAddr, url: &str) -> String {
    exchange(
        proxy,
        format!("GET {url} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic eDp5\r\n\r\n")
            .as_bytes(),
    )
}

/// Opens a CONNECT tunnel; the answer's head, and the stream when it is 200.
fn connect(proxy: SocketAddr, target: &str) -> (String, TcpStream) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap_or(0) == 1 {
        head.push(b[0]);
    }
    (String::from_utf8_lossy(&head).into_owned(), s)
}

/// A SOCKS5 CONNECT to a domain; the reply code.
fn socks(proxy: SocketAddr, host: &str, port: u16) -> (u8, TcpStream) {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut r = [0u8; 2];
    s.read_exact(&mut r).unwrap();
    assert_eq!(r, [5, 0]);
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).unwrap();
    (reply[1], s)
}

fn echoes(mut s: TcpStream) {
    s.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"ping");
}

#[test]
fn allowed_name_through_http_forward_connect_and_socks5() {
    let web = http_server();
    let echo = echo_server();
    let (p, http, socks5) = proxy(&["allowed.test".into()], LOCAL);
    let answer = get(
        http,
        &format!("http://Allowed.TEST:{}/a?b", web.addr.port()),
    );
    assert!(
        answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("hello"),
        "{answer}"
    );
    let seen = String::from_utf8(web.received.lock().unwrap()[0].clone()).unwrap();
    assert!(seen.starts_with("GET /a?b HTTP/1.1\r\n"), "{seen}");
    assert!(
        seen.contains(&format!("Host: allowed.test:{}\r\n", web.addr.port())),
        "{seen}"
    );
    assert!(
        seen.contains("Connection: close\r\n") && !seen.contains("Proxy-"),
        "{seen}"
    );
    let (head, s) = connect(http, &format!("allowed.test:{}", echo.addr.port()));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    echoes(s);
    let (code, s) = socks(socks5, "allowed.test", echo.addr.port());
    assert_eq!(code, 0);
    echoes(s);
    let d = p.decisions();
    assert_eq!(d.len(), 3);
    assert!(
        d.iter()
            .all(|d| d.allowed() && d.addrs == vec![SocketAddr::new(d.addrs[0].ip(), d.port)])
    );
    assert_eq!(
        d.iter().map(|d| d.protocol).collect::<Vec<_>>(),
        [Protocol::Http, Protocol::Connect, Protocol::Socks5]
    );
}

#[test]
fn unlisted_name_is_refused_and_the_server_sees_nothing() {
    let web = http_server();
    let (p, http, socks5) = proxy(&["allowed.test".into()], LOCAL);
    let port = web.addr.port();
    let answer = get(http, &format!("http://other.test:{port}/"));
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(
        answer.contains("other.test") && answer.contains("allow_domains"),
        "{answer}"
    );
    let (head, _) = connect(http, &format!("other.test:{port}"));
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(socks(socks5, "other.test", port).0, 0x02);
    // The server's own address is not on the list either.
    assert!(get(http, &format!("http://127.0.0.1:{port}/")).starts_with("HTTP/1.1 403"));
    thread::sleep(Duration::from_millis(100));
    assert_eq!(web.accepted.load(Ordering::SeqCst), 0);
    assert!(
        p.decisions()
            .iter()
            .all(|d| matches!(d.refusal, Some(Refusal::NotListed { .. })))
    );
}

#[test]
fn allowed_name_resolving_to_loopback_needs_allow_private() {
    let web = http_server();
    let (p, http, socks5) = proxy(&["allowed.test".into()], &[]);
    let answer = get(http, &format!("http://allowed.test:{}/", web.addr.port()));
    assert!(
        answer.starts_with("HTTP/1.1 403") && answer.contains("allow_private"),
        "{answer}"
    );
    assert_eq!(socks(socks5, "allowed.test", web.addr.port()).0, 0x02);
    assert_eq!(web.accepted.load(Ordering::SeqCst), 0);
    assert!(matches!(
        p.decisions()[0].refusal,
        Some(Refusal::Forbidden { .. })
    ));
}

#[test]
fn metadata_is_always_refused() {
    let allow: Vec<String> = [
        "metadata.google.internal",
        "metadata.test",
        "169.254.169.254",
    ]
    .map(String::from)
    .to_vec();
    let (p, http, socks5) = proxy(&allow, &["169.254.0.0/16", "127.0.0.1/32"]);
    for url in [
        "http://metadata.google.internal/",
        "http://METADATA.google.internal./",
        "http://metadata.test/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
    ] {
        let answer = get(http, url);
        assert!(answer.starts_with("HTTP/1.1 403"), "{url}: {answer}");
    }
    assert_eq!(socks(socks5, "metadata.google.internal", 80).0, 0x02);
    let refusals: Vec<_> = p.decisions().into_iter().map(|d| d.refusal).collect();
    assert!(matches!(refusals[0], Some(Refusal::Metadata { .. })));
    assert!(refusals.iter().all(Option::is_some));
}

#[test]
fn wildcard_and_port_rules() {
    let web = http_server();
    let port = web.addr.port();
    let allow = vec!["*.wild.test".to_string(), format!("exact.test:{port}")];
    let (_p, http, socks5) = proxy(&allow, LOCAL);
    let ok = |u: &str| get(http, u).starts_with("HTTP/1.1 200");
    assert!(ok(&format!("http://a.wild.test:{port}/")));
    assert!(ok(&format!("http://b.a.wild.test:{port}/")));
    assert!(!ok(&format!("http://wild.test:{port}/")));
    assert!(!ok(&format!("http://awild.test:{port}/")));
    assert!(ok(&format!("http://exact.test:{port}/")));
    assert!(!ok(&format!("http://x.exact.test:{port}/")));
    // Another port of an entry with a port: refused, by CONNECT and SOCKS5 too.
    let other = if port == 65535 { 1 } else { port + 1 };
    assert!(!ok(&format!("http://exact.test:{other}/")));
    assert!(
        connect(http, &format!("exact.test:{other}"))
            .0
            .starts_with("HTTP/1.1 403")
    );
    assert_eq!(socks(socks5, "exact.test", other).0, 0x02);
    assert_eq!(socks(socks5, "exact.test", port).0, 0x00);
    // The SOCKS5 reply comes once the connection is made, maybe before the server's
    // thread has counted it.
    let start = Instant::now();
    while web.accepted.load(Ordering::SeqCst) < 4 && start.elapsed() < Duration::from_secs(2) {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(web.accepted.load(Ordering::SeqCst), 4);
}

#[test]
fn malformed_oversized_and_smuggling_heads_get_400_and_close() {
    let web = http_server();
    let (_p, http, _) = proxy(&["allowed.test".into()], LOCAL);
    let url = format!("http://allowed.test:{}/", web.addr.port());
    let heads = [
        format!("POST {url} HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"),
        format!("POST {url} HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n"),
        format!("GET {url} HTTP/1.1\r\nX: a\r\n folded\r\n\r\n"),
        format!("GET {url} HTTP/1.1\nX: a\r\n\r\n"),
        format!("GET {url} HTTP/1.1\r\nX: a\rb\r\n\r\n"),
        format!("GET {url} HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20 * 1024)),
        format!("GET {url} HTTP/1.1\r\n{}\r\n", "X: a\r\n".repeat(200)),
        "\x16\x03\x01\x02\x00\x01\x00\x01\x7f\x03\x03\r\n\r\n".to_string(),
        "CONNECT allowed.test HTTP/1.1\r\n\r\n".to_string(),
    ];
    for head in heads {
        let answer = exchange(http, head.as_bytes());
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "{:?}: {answer}",
            &head[..40.min(head.len())]
        );
    }
    assert!(exchange(http, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").starts_with("HTTP/1.1 501"));
    assert!(exchange(http, b"GET allowed.test:80 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    assert_eq!(web.accepted.load(Ordering::SeqCst), 0);
}

#[test]
fn slow_client_is_timed_out() {
    let (_p, http, socks5) = proxy(&["allowed.test".into()], LOCAL);
    let start = Instant::now();
    let mut s = TcpStream::connect(http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET http://allowed.test/ HTTP/1.1\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
    assert!(start.elapsed() < Duration::from_secs(3));
    // A SOCKS5 client that stops after its greeting is closed too.
    let mut s = TcpStream::connect(socks5).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[5, 1, 0, 5, 1]).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert_eq!(out, [5, 0]);
    assert!(start.elapsed() < Duration::from_secs(4));
}

#[test]
fn a_second_request_on_the_connection_is_not_forwarded() {
    let web = http_server();
    let (_p, http, _) = proxy(&["allowed.test".into(), "second.test".into()], LOCAL);
    let port = web.addr.port();
    let two = format!(
        "POST http://allowed.test:{port}/one HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET http://second.test:{port}/two HTTP/1.1\r\n\r\nGET /three HTTP/1.1\r\n\r\n"
    );
    let answer = exchange(http, two.as_bytes());
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"),
        "{answer}"
    );
    thread::sleep(Duration::from_millis(100));
    assert_eq!(web.accepted.load(Ordering::SeqCst), 1);
    let seen = String::from_utf8(web.received.lock().unwrap()[0].clone()).unwrap();
    assert!(
        seen.starts_with("POST /one HTTP/1.1\r\n") && seen.ends_with("\r\n\r\nabc"),
        "{seen:?}"
    );
}

#[test]
fn dropping_the_proxy_closes_its_listeners() {
    let (p, http, _) = proxy(&["allowed.test".into()], LOCAL);
    drop(p);
    thread::sleep(Duration::from_millis(50));
    assert!(TcpStream::connect(http).is_err());
}

/// A server that accepts and then never sends nor closes (it keeps its sockets).
fn silent_server() -> Upstream {
    server(|s, _| {
        let mut b = [0u8; 1024];
        let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
        while matches!((&s).read(&mut b), Ok(n) if n > 0) {}
    })
}

fn run(p: &Proxy, until: Option<std::os::fd::OwnedFd>) -> Run {
    p.serve_run(
        TcpListener::bind("127.0.0.1:0").unwrap(),
        TcpListener::bind("127.0.0.1:0").unwrap(),
        until,
    )
    .unwrap()
}

/// Reads until the peer closes; how long that took, or `None` after `limit`.
fn closed_within(mut s: &TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                return Some(start.elapsed());
            }
            Err(_) => return None,
        }
    }
}

#[cfg(target_os = "linux")]
fn refused_within(addr: SocketAddr, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if TcpStream::connect(addr).is_err() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn run_end_closes_listeners_and_a_tunnel_to_a_silent_upstream() {
    let quiet = silent_server();
    let p = Proxy::new(egress(&["allowed.test".into()], LOCAL));
    let r = run(&p, None);
    let target = format!("allowed.test:{}", quiet.addr.port());
    let (head, tunnel) = connect(r.http_addr(), &target);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (code, socks_tunnel) = socks(r.socks_addr(), "allowed.test", quiet.addr.port());
    assert_eq!(code, 0);
    assert_eq!(r.decisions().len(), 2);
    assert_eq!(p.decisions().len(), 2);
    // Both tunnels are open and idle: nothing comes back within 200 ms.
    assert_eq!(closed_within(&tunnel, Duration::from_millis(200)), None);
    let other = r.clone();
    assert!(!other.ended());
    r.end();
    assert!(other.ended());
    assert!(closed_within(&tunnel, Duration::from_secs(2)).is_some());
    assert!(closed_within(&socks_tunnel, Duration::from_secs(2)).is_some());
    assert!(TcpStream::connect(r.http_addr()).is_err());
    assert!(TcpStream::connect(r.socks_addr()).is_err());
    r.end();
    // A second run of the same proxy is not affected, and keeps its own decisions.
    let r2 = run(&p, None);
    let (code, _s) = socks(r2.socks_addr(), "allowed.test", quiet.addr.port());
    assert_eq!(code, 0);
    assert_eq!(r2.decisions().len(), 1);
    assert_eq!(p.decisions().len(), 3);
    // Dropping the last handle ends the run.
    let addr = r2.http_addr();
    drop(r2);
    assert!(TcpStream::connect(addr).is_err());
}

#[cfg(target_os = "linux")]
#[test]
fn the_exit_of_the_runs_process_ends_it() {
    let quiet = silent_server();
    let p = Proxy::new(egress(&["allowed.test".into()], LOCAL));
    let mut child = std::process::Command::new("sleep")
        .arg("0.5")
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    let pidfd = stockade_sys::linux::pidfd_open(pid, 0).unwrap();
    let r = run(&p, Some(pidfd.into()));
    let (head, tunnel) = connect(
        r.http_addr(),
        &format!("allowed.test:{}", quiet.addr.port()),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(TcpStream::connect(r.socks_addr()).is_ok());
    assert!(!r.ended());
    child.wait().unwrap();
    assert!(closed_within(&tunnel, Duration::from_secs(3)).is_some());
    assert!(refused_within(r.http_addr(), Duration::from_secs(3)));
    assert!(refused_within(r.socks_addr(), Duration::from_secs(3)));
    assert!(r.ended());
}

#[test]
fn a_slowloris_head_gets_408_within_the_head_timeout() {
    let (_p, http, _) = proxy(&["allowed.test".into()], LOCAL);
    let mut s = TcpStream::connect(http).unwrap();
    let start = Instant::now();
    // One byte every 50 ms: each read succeeds, the head never ends.
    let head = b"GET http://allowed.test/ HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut answered = false;
    for b in head {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            answered = true;
            break;
        }
        thread::sleep(Duration::from_millis(50));
        if start.elapsed() > Duration::from_secs(2) {
            break;
        }
    }
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 408"), "{answered} {out}");
    // The head timeout is 500 ms; the answer came before the drip would have ended.
    assert!(start.elapsed() < Duration::from_millis(2500));
}

#[test]
fn an_idle_tunnel_is_closed_after_the_idle_timeout() {
    let quiet = silent_server();
    let echo = echo_server();
    let p = Proxy::new(egress(&["allowed.test".into()], LOCAL))
        .with_idle_timeout(Duration::from_millis(400));
    let r = run(&p, None);
    let (head, tunnel) = connect(
        r.http_addr(),
        &format!("allowed.test:{}", quiet.addr.port()),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let start = Instant::now();
    let closed = closed_within(&tunnel, Duration::from_secs(5)).expect("the idle tunnel closes");
    assert!(closed >= Duration::from_millis(300), "{closed:?}");
    // A tunnel that moves a byte more often than that stays open.
    let (code, mut busy) = socks(r.socks_addr(), "allowed.test", echo.addr.port());
    assert_eq!(code, 0);
    while start.elapsed() < closed + Duration::from_millis(1200) {
        busy.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        busy.read_exact(&mut b).unwrap();
        thread::sleep(Duration::from_millis(100));
    }
    assert!(closed_within(&busy, Duration::from_secs(5)).is_some());
}

#[test]
fn the_global_cap_refuses_one_connection_more() {
    let p = Proxy::new(egress(&["allowed.test".into()], LOCAL))
        .with_head_timeout(Duration::from_secs(10))
        .with_max_connections(5)
        .with_max_total_connections(3);
    let (a, b) = (run(&p, None), run(&p, None));
    // Three connections waiting in their heads: the proxy is full, each run is not.
    let held: Vec<TcpStream> = [a.http_addr(), a.socks_addr(), b.http_addr()]
        .into_iter()
        .map(|addr| TcpStream::connect(addr).unwrap())
        .collect();
    thread::sleep(Duration::from_millis(200));
    for s in &held {
        assert_eq!(closed_within(s, Duration::from_millis(100)), None);
    }
    let fourth = TcpStream::connect(b.socks_addr()).unwrap();
    assert!(closed_within(&fourth, Duration::from_secs(2)).is_some());
    // Once a run ends, its places are free again.
    a.end();
    thread::sleep(Duration::from_millis(200));
    let again = TcpStream::connect(b.socks_addr()).unwrap();
    assert_eq!(closed_within(&again, Duration::from_millis(300)), None);
    drop(held);
}

#[test]
fn a_chunked_post_arrives_byte_exact_and_nothing_after_it() {
    let web = http_server();
    let port = web.addr.port();
    let (p, http, _) = proxy(&["allowed.test".into(), "second.test".into()], LOCAL);
    let head = format!(
        "POST http://allowed.test:{port}/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\nProxy-Authorization: Basic eDp5\r\n\r\n"
    );
    let body: &[u8] =
        b"5;name=\"a b\"\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Sum: 1\r\n\r\n";
    let after: &[u8] = b"GET http://second.test/ HTTP/1.1\r\n\r\n0\r\n\r\n";
    let mut s = TcpStream::connect(http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The head with the first bytes of the body, then the rest in pieces.
    s.write_all(&[head.as_bytes(), &body[..7]].concat())
        .unwrap();
    for piece in body[7..].chunks(9) {
        thread::sleep(Duration::from_millis(20));
        s.write_all(piece).unwrap();
    }
    s.write_all(after).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"),
        "{answer}"
    );
    thread::sleep(Duration::from_millis(100));
    assert_eq!(web.accepted.load(Ordering::SeqCst), 1);
    let seen = web.received.lock().unwrap()[0].clone();
    let expected = [
        format!("POST /up HTTP/1.1\r\nHost: allowed.test:{port}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").as_bytes(),
        body,
    ]
    .concat();
    assert_eq!(
        String::from_utf8_lossy(&seen),
        String::from_utf8_lossy(&expected)
    );
    assert_eq!(p.decisions().len(), 1);
}

#[test]
fn a_malformed_chunked_body_stops_at_the_bad_byte() {
    let web = http_server();
    let port = web.addr.port();
    let (_p, http, _) = proxy(&["allowed.test".into()], LOCAL);
    let url = format!("http://allowed.test:{port}/");
    // Malformed within the bytes that come with the head: 400, and upstream sees nothing.
    let answer = exchange(
        http,
        format!(
            "POST {url} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n"
        )
        .as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(web.accepted.load(Ordering::SeqCst), 0);
    // Malformed later: upstream gets the framing up to the chunk before, then the close.
    let mut s = TcpStream::connect(http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("POST {url} HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").as_bytes())
        .unwrap();
    thread::sleep(Duration::from_millis(100));
    s.write_all(b"3\r\nabc\r\n").unwrap();
    thread::sleep(Duration::from_millis(100));
    s.write_all(b"3\nGET http://allowed.test/smuggled HTTP/1.1\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    thread::sleep(Duration::from_millis(400));
    let seen = String::from_utf8_lossy(&web.received.lock().unwrap()[0]).into_owned();
    assert!(seen.ends_with("\r\n\r\n3\r\nabc\r\n"), "{seen:?}");
    assert!(!seen.contains("smuggled"), "{seen:?}");
}

#[test]
fn a_run_is_send_sync_and_clone() {
    fn check<T: Send + Sync + Clone + 'static>() {}
    check::<Run>();
}

/// A listener that never completes a connect: its accept queue is filled by connections
/// never accepted (until one times out), so the kernel drops every further SYN.
fn black_hole() -> (TcpListener, Vec<TcpStream>, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fill = Vec::new();
    while fill.len() < 1024 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => fill.push(s),
            Err(_) => break,
        }
    }
    assert!(fill.len() < 1024, "the accept queue never filled");
    (listener, fill, addr.port())
}

/// The addresses of an allowed name are tried within one connect timeout in all: a name
/// of many addresses that never answer (here four) is answered 502 after about one
/// timeout, not one per address, and does not hold the connection's thread past the run
/// (found by review).
#[test]
fn the_addresses_of_a_name_share_one_connect_timeout() {
    let (_hole, _fill, port) = black_hole();
    let e = Egress::new(
        Allowlist::parse(&["many.test".into()]).unwrap(),
        Cidr::parse_all(&["127.0.0.1/32".to_string()]).unwrap(),
    )
    .with_resolver(|_, _| -> io::Result<Vec<IpAddr>> { Ok(vec!["127.0.0.1".parse().unwrap(); 4]) });
    let p = Proxy::new(e).with_connect_timeout(Duration::from_millis(700));
    let http = p
        .serve_http(TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let start = Instant::now();
    let request = format!("CONNECT many.test:{port} HTTP/1.1\r\nHost: many.test\r\n\r\n");
    let out = exchange(http, request.as_bytes());
    let took = start.elapsed();
    assert!(out.starts_with("HTTP/1.1 502"), "{out}");
    // One timeout in all (0.7 s), far from four (2.8 s).
    assert!(took < Duration::from_millis(2000), "{took:?}");
}
