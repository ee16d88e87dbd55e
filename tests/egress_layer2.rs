//! `network = "allow"` on layer 2 (Landlock and seccomp, no namespaces), proven from inside:
//! the program shares the host's network, and its only route out is TCP to the egress
//! proxy's ports on the host's loopback. seccomp refuses every socket but TCP and unix ones
//! (UDP, ICMP, raw, packet, netlink, SCTP, MPTCP), and TCP Fast Open's implicit connect,
//! which Landlock does not see; Landlock (ABI ≥ 4) refuses every TCP connect but to those
//! ports, and every bind. Each refusal is checked against a control run of the same
//! program on layer 2 with `network = "full"`, where it succeeds or fails otherwise.
//!
//! Every test runs as root and, through `zz_all_tests_pass_as_uid_65534`, as uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;

use common::{output_text, tempdir};
use stockade::{Capabilities, Layer, Network, Sandbox};

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

/// The run as uid 65534 (root only; a no-op otherwise).
#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
