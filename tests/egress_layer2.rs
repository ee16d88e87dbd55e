//! `network = "allow"` on layer 2 (Landlock and seccomp, no namespaces), proven from inside:
//! the program shares the host's network, and its only route out is TCP to the egress
//! proxy's ports on the host's loopback. seccomp refuses every socket but TCP and unix ones
//! (UDP, ICMP, raw, packet, netlink, SCTP, MPTCP), and TCP Fast Open's implicit connect,
//! which Landlock does not see; Landlock (ABI ≥ 4) refuses every TCP connect but to those
//! ports, and every bind. Each refusal is checked against a control run of the same
//! program on layer 2 with `network = "full"`, where it succeeds or fails otherwise; the
//! proxy's two ports, picked at each spawn, reach the proxy and through it an allowed
//! server, and are the program's own run's alone.
//!
//! Every test runs as root and, through `zz_all_tests_pass_as_uid_65534`, as uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::Ordering;

use common::{output_text, tempdir};
use stockade::{Capabilities, Layer, Network, Sandbox, Stdio};

/// The Landlock ABI that brings TCP rules.
const TCP_ABI: u32 = 4;

/// A layer-2 sandbox over `ws` with `network`, or `None` (after printing `SKIP`) when the
/// kernel's Landlock cannot keep `network = "allow"` to the proxy (ABI < 4); fails instead
/// when `STOCKADE_TEST_REQUIRE` demands Landlock.
fn layer2(test: &str, ws: &Path, network: Network) -> Option<Sandbox> {
    let caps = Capabilities::probe();
    if !caps.landlock.available || caps.landlock_abi < TCP_ABI {
        let reason = format!(
            "landlock ABI {} < {TCP_ABI} ({})",
            caps.landlock_abi,
            caps.landlock.reason.as_deref().unwrap_or("available")
        );
        assert!(
            !common::required_name("landlock"),
            "{test}: {reason}, and STOCKADE_TEST_REQUIRE demands landlock"
        );
        let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {reason}");
        return None;
    }
    let sb = common::sandbox(ws, |p| {
        p.layer = Some(Layer::Landlock);
        p.network = network;
    });
    assert_eq!(sb.layer(), Layer::Landlock);
    Some(sb)
}

/// Runs the python3 `code` inside with `args`; every line it prints is `name result`
/// (`OK` or an errno name). Returns them by name.
fn probe(sb: &Sandbox, code: &str, args: &[String]) -> BTreeMap<String, String> {
    let out = sb
        .command("python3")
        .arg("-c")
        .arg(format!("{PRELUDE}{code}"))
        .args(args)
        .output()
        .expect("spawn python3");
    assert!(
        out.status.success(),
        "python3 failed: {}",
        output_text(&out)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `t(name, f)` prints `name OK` when `f()` returns, else `name ERRNO`.
const PRELUDE: &str = r#"
import errno, socket, sys
def t(name, f):
    try:
        r = f()
        if isinstance(r, socket.socket):
            r.close()
        print(name, 'OK')
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, str(e.errno)))
    sys.stdout.flush()
"#;

/// One socket of each kind the walls decide on.
const SOCKETS: &str = r#"
S = socket
t('tcp', lambda: S.socket(S.AF_INET, S.SOCK_STREAM))
t('tcp_proto', lambda: S.socket(S.AF_INET, S.SOCK_STREAM, S.IPPROTO_TCP))
t('tcp6_nonblock', lambda: S.socket(S.AF_INET6, S.SOCK_STREAM | S.SOCK_NONBLOCK))
t('unix_stream', lambda: S.socket(S.AF_UNIX, S.SOCK_STREAM))
t('unix_dgram', lambda: S.socket(S.AF_UNIX, S.SOCK_DGRAM))
t('unix_pair', lambda: S.socketpair(S.AF_UNIX, S.SOCK_STREAM)[0])
t('udp', lambda: S.socket(S.AF_INET, S.SOCK_DGRAM))
t('udp6', lambda: S.socket(S.AF_INET6, S.SOCK_DGRAM, S.IPPROTO_UDP))
t('icmp', lambda: S.socket(S.AF_INET, S.SOCK_DGRAM, S.IPPROTO_ICMP))
t('raw', lambda: S.socket(S.AF_INET, S.SOCK_RAW, S.IPPROTO_ICMP))
t('packet', lambda: S.socket(S.AF_PACKET, S.SOCK_RAW, 0))
t('netlink', lambda: S.socket(S.AF_NETLINK, S.SOCK_RAW, 0))
t('sctp', lambda: S.socket(S.AF_INET, S.SOCK_STREAM, 132))
t('sctp_seqpacket', lambda: S.socket(S.AF_INET, S.SOCK_SEQPACKET, 132))
t('mptcp', lambda: S.socket(S.AF_INET, S.SOCK_STREAM, 262))
t('mptcp6', lambda: S.socket(S.AF_INET6, S.SOCK_STREAM, 262))
"#;

#[test]
fn only_tcp_and_unix_sockets_open() {
    let ws = tempdir();
    let Some(allow) = layer2("only_tcp_and_unix_sockets_open", ws.path(), Network::Allow) else {
        return;
    };
    let full = layer2("only_tcp_and_unix_sockets_open", ws.path(), Network::Full).unwrap();
    let got = probe(&allow, SOCKETS, &[]);
    let control = probe(&full, SOCKETS, &[]);
    for name in [
        "tcp",
        "tcp_proto",
        "tcp6_nonblock",
        "unix_stream",
        "unix_dgram",
        "unix_pair",
    ] {
        assert_eq!(got[name], "OK", "{name}: {got:?}");
    }
    for name in [
        "udp",
        "udp6",
        "icmp",
        "raw",
        "packet",
        "netlink",
        "sctp",
        "sctp_seqpacket",
        "mptcp",
        "mptcp6",
    ] {
        assert_eq!(got[name], "EPERM", "{name}: {got:?}");
    }
    // The control: the same program with the network shared opens UDP and netlink
    // sockets, and the protocols the kernel lacks fail with their own errno. (Raw and
    // packet sockets need CAP_NET_RAW, which no program keeps: the kernel's EPERM there.)
    for name in ["tcp", "udp", "udp6", "netlink", "unix_dgram"] {
        assert_eq!(control[name], "OK", "control {name}: {control:?}");
    }
    for name in ["sctp", "sctp_seqpacket", "mptcp", "mptcp6"] {
        assert_ne!(control[name], "EPERM", "control {name}: {control:?}");
    }
}

/// TCP from inside to a listener of the host's that is not the proxy's, four ways, and
/// binds of every kind.
const TCP: &str = r#"
S = socket
port = int(sys.argv[1])
def connect(fam, addr, fastopen=False):
    s = S.socket(fam, S.SOCK_STREAM)
    # A timeout makes the socket non-blocking, where a Fast Open send returns EINPROGRESS
    # with its SYN already out; blocking, it returns once connected.
    if not fastopen:
        s.settimeout(10)
    try:
        if fastopen:
            s.sendto(b'x', S.MSG_FASTOPEN, addr)
        else:
            s.connect(addr)
    finally:
        s.close()
def fastopen_connect(addr):
    s = S.socket(S.AF_INET, S.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.setsockopt(S.IPPROTO_TCP, 30, 1)
        s.connect(addr)
        s.send(b'x')
    finally:
        s.close()
def bind(fam, addr):
    s = S.socket(fam, S.SOCK_STREAM)
    try:
        s.bind(addr)
    finally:
        s.close()
t('connect', lambda: connect(S.AF_INET, ('127.0.0.1', port)))
t('connect_any_addr', lambda: connect(S.AF_INET, ('0.0.0.0', port)))
t('connect6_mapped', lambda: connect(S.AF_INET6, ('::ffff:127.0.0.1', port)))
t('fastopen_sendto', lambda: connect(S.AF_INET, ('127.0.0.1', port), fastopen=True))
t('fastopen_connect', lambda: fastopen_connect(('127.0.0.1', port)))
t('bind_any_port', lambda: bind(S.AF_INET, ('127.0.0.1', 0)))
t('bind_port', lambda: bind(S.AF_INET, ('127.0.0.1', port + 1 if port < 65535 else port - 1)))
t('bind6', lambda: bind(S.AF_INET6, ('::1', 0)))
"#;

#[test]
fn tcp_reaches_no_host_listener_and_binds_nothing() {
    let ws = tempdir();
    let test = "tcp_reaches_no_host_listener_and_binds_nothing";
    let Some(allow) = layer2(test, ws.path(), Network::Allow) else {
        return;
    };
    let full = layer2(test, ws.path(), Network::Full).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let args = [port.to_string()];
    let got = probe(&allow, TCP, &args);
    for name in [
        "connect",
        "connect_any_addr",
        "connect6_mapped",
        "fastopen_connect",
        "bind_any_port",
        "bind_port",
        "bind6",
    ] {
        assert_eq!(got[name], "EACCES", "{name}: {got:?}");
    }
    // Landlock does not see the connect that sendto(MSG_FASTOPEN) makes (landlock-lsm/
    // linux#41): seccomp refuses the flag.
    assert_eq!(got["fastopen_sendto"], "EPERM", "{got:?}");

    // The control reaches the listener every way, and binds.
    let control = probe(&full, TCP, &args);
    for name in [
        "connect",
        "connect_any_addr",
        "connect6_mapped",
        "fastopen_sendto",
        "fastopen_connect",
        "bind_any_port",
        "bind6",
    ] {
        assert_eq!(control[name], "OK", "control {name}: {control:?}");
    }
    drop(listener);
}

/// Inside a layer-2 sandbox with the proxy wired: the ports from the program's own
/// `HTTP_PROXY` and `ALL_PROXY`, a request through each, the server straight, and binds on
/// the proxy's ports.
const THROUGH: &str = r#"
import os
S = socket
target = sys.argv[1]
host, port = target.split(':')
http = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
socks = int(os.environ['ALL_PROXY'].rsplit(':', 1)[1])
print('env', os.environ['HTTP_PROXY'].rsplit(':', 1)[0], os.environ['ALL_PROXY'].rsplit(':', 1)[0])
def body_of(s):
    return s.makefile('rb').read().split(b'\r\n\r\n', 1)[1].decode()
def get_via_http():
    s = S.create_connection(('127.0.0.1', http), timeout=10)
    s.sendall(('GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n' % (target, target)).encode())
    print('http_body', body_of(s))
    s.close()
def get_via_socks():
    s = S.create_connection(('127.0.0.1', socks), timeout=10)
    s.sendall(b'\x05\x01\x00')
    assert s.recv(2) == b'\x05\x00'
    h = host.encode()
    s.sendall(b'\x05\x01\x00\x03' + bytes([len(h)]) + h + int(port).to_bytes(2, 'big'))
    reply = s.recv(10)
    print('socks_reply', reply[1])
    s.sendall(('GET / HTTP/1.1\r\nHost: %s\r\n\r\n' % target).encode())
    print('socks_body', body_of(s))
    s.close()
def direct():
    s = S.create_connection((host, int(port)), timeout=10)
    s.close()
def bind(p):
    s = S.socket()
    try:
        s.bind(('127.0.0.1', p))
    finally:
        s.close()
t('http', get_via_http)
t('socks', get_via_socks)
t('direct', direct)
t('bind_http', lambda: bind(http))
t('bind_socks', lambda: bind(socks))
"#;

#[test]
fn the_proxys_ports_are_the_only_way_out() {
    let ws = tempdir();
    let test = "the_proxys_ports_are_the_only_way_out";
    let Some(_) = layer2(test, ws.path(), Network::Allow) else {
        return;
    };
    let (port, count) = common::http_server("through the proxy");
    let sb = common::sandbox(ws.path(), |p| {
        p.layer = Some(Layer::Landlock);
        p.network = Network::Allow;
        p.allow_domains = vec!["127.0.0.2".into()];
        p.allow_private = vec!["127.0.0.0/8".into()];
    });
    let got = probe(&sb, THROUGH, &[format!("127.0.0.2:{port}")]);
    // The proxy listens on the host's loopback, where the program connects.
    assert_eq!(
        got["env"], "http://127.0.0.1 socks5h://127.0.0.1",
        "{got:?}"
    );
    assert_eq!(got["http_body"], "through the proxy", "{got:?}");
    assert_eq!(got["socks_reply"], "0", "{got:?}");
    assert_eq!(got["socks_body"], "through the proxy", "{got:?}");
    assert_eq!((got["http"].as_str(), got["socks"].as_str()), ("OK", "OK"));
    // The server itself is a host listener like any other: out of reach but through the
    // proxy, which reached it twice.
    assert_eq!(got["direct"], "EACCES", "{got:?}");
    assert_eq!(count.load(Ordering::SeqCst), 2);
    // No bind rule, not even on the proxy's own ports (EADDRINUSE without Landlock).
    assert_eq!(got["bind_http"], "EACCES", "{got:?}");
    assert_eq!(got["bind_socks"], "EACCES", "{got:?}");
}

/// The ports are picked at each spawn and each command's ruleset names its own: a program
/// cannot reach another run's proxy (which would record its requests as that run's).
#[test]
fn a_program_reaches_only_its_own_runs_proxy() {
    let ws = tempdir();
    let test = "a_program_reaches_only_its_own_runs_proxy";
    let Some(sb) = layer2(test, ws.path(), Network::Allow) else {
        return;
    };
    let mut first = sb
        .command("sh")
        .args(["-c", "echo $HTTP_PROXY $ALL_PROXY; exec sleep 60"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(first.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ports: Vec<String> = line
        .split_whitespace()
        .map(|url| url.rsplit(':').next().unwrap().to_string())
        .collect();
    assert_eq!(ports.len(), 2, "{line}");
    let code = r#"
import os
own = [int(os.environ[v].rsplit(':', 1)[1]) for v in ('HTTP_PROXY', 'ALL_PROXY')]
for i, p in enumerate(sys.argv[1:]):
    assert int(p) not in own, (p, own)
    t('other_%d' % i, lambda: socket.create_connection(('127.0.0.1', int(p)), timeout=10))
for i, p in enumerate(own):
    t('own_%d' % i, lambda: socket.create_connection(('127.0.0.1', p), timeout=10))
"#;
    let got = probe(&sb, code, &ports);
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(
        (got["other_0"].as_str(), got["other_1"].as_str()),
        ("EACCES", "EACCES"),
        "{got:?}"
    );
    assert_eq!(
        (got["own_0"].as_str(), got["own_1"].as_str()),
        ("OK", "OK"),
        "{got:?}"
    );
}

/// The run as uid 65534 (root only; a no-op otherwise).
#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
