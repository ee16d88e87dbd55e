//! Issue 25 end to end, on the full layer: `network = "allow"` seen from inside the
//! sandbox, with real clients (curl, python's `urllib`, git, pip) against servers this
//! file starts on the host's loopback.
//!
//! # Which address the servers use
//!
//! Inside, `NO_PROXY` is `localhost,127.0.0.1,::1`: a client asked for `127.0.0.1` or
//! `localhost` goes direct, to the sandbox's own loopback, and never to the proxy. The
//! servers therefore listen on `127.0.0.2` (all of 127/8 is loopback on Linux, the host
//! needs no change), which no `NO_PROXY` entry matches, and the policies allow
//! `127.0.0.2` in `allow_domains` and `127.0.0.2/32` (or a wider 127/8) in
//! `allow_private`. Inside the sandbox's network namespace the same address is its own
//! loopback, where nothing listens: a direct connection is refused there, never carried
//! to the host's server. The one portable *name* is `localhost` (in every `/etc/hosts`,
//! no DNS needed; the host's file is not touched): the tests that need a name (a name
//! not on the list, an allowed name resolving to loopback, the wildcard rules) use it
//! with `curl --noproxy ''`, which sends even `localhost` to the proxy.
//!
//! Every server counts the connections it accepts: a refusal is proven by the client's
//! answer (403 naming the host and the policy key, SOCKS5 reply 0x02) *and* by the
//! server seeing nothing.
#![cfg(target_os = "linux")]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Component, Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::Feature;
use stockade::guard::egress::{Decision, Protocol, Refusal};
use stockade::{Layer, Network, Policy, Sandbox, Stdio};

/// The servers' address: loopback, and outside the sandbox's `NO_PROXY`.
const SERVER_IP: &str = "127.0.0.2";
/// An address for a server no policy here lists.
const OTHER_IP: &str = "127.0.0.3";

/// The directories of the sandbox's `PATH` where the tools are looked for (the host's
/// `PATH` may name directories that uid 65534 cannot enter, such as root's pyenv).
const SYSTEM_DIRS: [&str; 3] = ["/usr/local/bin", "/usr/bin", "/bin"];

/// The first executable `name` in [`SYSTEM_DIRS`].
fn tool(name: &str) -> Option<PathBuf> {
    SYSTEM_DIRS
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Skips the test (or fails it when `STOCKADE_TEST_REQUIRE` demands the tool) when a tool
/// is missing, then asks for the full layer's user namespace.
macro_rules! require_tools {
    ($($tool:expr),+) => {
        $(
            if tool($tool).is_none() {
                let reason = format!(
                    "{} not found in {} (CI installs it, see .ci/run)",
                    $tool,
                    SYSTEM_DIRS.join(":")
                );
                assert!(!common::required_name($tool), "required tool missing: {reason}");
                common::skip(module_path!(), &reason);
                return;
            }
        )+
        require!(Feature::UserNs);
    };
}

// ---------------------------------------------------------------------------------------
// Servers on the host.

/// An HTTP/1.1 server on the host: serves the files under `root` (a directory's
/// `index.html`), or `hello from ADDR` for every path without a root; one request per
/// connection. Counts the connections it accepts and keeps each request line.
struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(ip: &str, root: Option<PathBuf>) -> Server {
        let listener = TcpListener::bind((ip, 0)).expect("bind a test server");
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (a, r) = (Arc::clone(&accepted), Arc::clone(&requests));
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                let (r, root) = (Arc::clone(&r), root.clone());
                thread::spawn(move || serve_one(conn, addr, root.as_deref(), &r));
            }
        });
        Server {
            addr,
            accepted,
            requests,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn hello(&self) -> String {
        format!("hello from {}", self.addr)
    }
}

fn serve_one(mut conn: TcpStream, addr: SocketAddr, root: Option<&Path>, log: &Mutex<Vec<String>>) {
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let line = head.lines().next().unwrap_or_default().to_string();
    log.lock().unwrap().push(line.clone());
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    // An absolute-form target, should the proxy forward one as it came.
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or("/");
    let (status, ctype, body) = match root {
        None => (
            "200 OK",
            "text/plain",
            format!("hello from {addr}").into_bytes(),
        ),
        Some(root) => match file_under(root, path) {
            Some((ctype, body)) => ("200 OK", ctype, body),
            None => ("404 Not Found", "text/plain", b"not found\n".to_vec()),
        },
    };
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        let _ = conn.write_all(&body);
    }
    let _ = conn.shutdown(std::net::Shutdown::Write);
}

/// The content type and bytes of the file `path` names under `root`.
fn file_under(root: &Path, path: &str) -> Option<(&'static str, Vec<u8>)> {
    let rel = Path::new(path.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let mut file = root.join(rel);
    if file.is_dir() {
        file = file.join("index.html");
    }
    let ctype = match file.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html",
        _ => "application/octet-stream",
    };
    Some((ctype, std::fs::read(file).ok()?))
}

/// A TLS server on the host (python's `ssl`, `openssl`'s self-signed certificate for
/// `IP:127.0.0.2`, whose PEM the clients inside get as `ca.pem` in the workspace):
/// answers `hello tls` to one request per connection. Killed on drop.
struct TlsServer {
    port: u16,
    process: std::process::Child,
}

impl TlsServer {
    fn start(fixtures: &Path, ws: &Path) -> TlsServer {
        let (cert, key) = (fixtures.join("cert.pem"), fixtures.join("key.pem"));
        let out = std::process::Command::new(tool("openssl").unwrap())
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=stockade test"])
            .args(["-addext", &format!("subjectAltName=IP:{SERVER_IP}")])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl: {}",
            common::output_text(&out)
        );
        std::fs::copy(&cert, ws.join("ca.pem")).unwrap();
        let script = fixtures.join("tls_server.py");
        std::fs::write(
            &script,
            format!(
                r#"import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain({cert:?}, {key:?})
s = socket.socket()
s.bind(({SERVER_IP:?}, 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    try:
        c.settimeout(10)
        t = ctx.wrap_socket(c, server_side=True)
        head = b""
        while b"\r\n\r\n" not in head:
            d = t.recv(4096)
            if not d:
                break
            head += d
        t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nhello tls")
        t.close()
    except Exception as e:
        print("tls server:", e, file=sys.stderr, flush=True)
        c.close()
"#
            ),
        )
        .unwrap();
        let mut process = std::process::Command::new(tool("python3").unwrap())
            .arg(&script)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the TLS server");
        let mut line = String::new();
        BufReader::new(process.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the TLS server's port");
        TlsServer { port, process }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A UDP socket on the host that counts the datagrams it receives.
fn udp_server() -> UdpSocket {
    let s = UdpSocket::bind((SERVER_IP, 0)).unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

fn datagrams(s: &UdpSocket) -> usize {
    let mut buf = [0u8; 512];
    std::iter::from_fn(|| s.recv(&mut buf).ok()).count()
}

// ---------------------------------------------------------------------------------------
// Runs inside.

/// A workspace (under `/var/tmp`, outside the host's `/tmp`) and a fixtures directory
/// beside it that the sandbox does not see.
struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    fixtures: PathBuf,
}

fn dirs() -> Dirs {
    let (root, path) = common::var_tempdir();
    let (ws, fixtures) = (path.join("ws"), path.join("fixtures"));
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&fixtures).unwrap();
    Dirs {
        _root: root,
        ws,
        fixtures,
    }
}

/// A sandbox on the full layer with `network = "allow"`.
fn sandbox(ws: &Path, allow: &[String], private: &[&str]) -> Sandbox {
    Sandbox::new(Policy {
        network: Network::Allow,
        allow_domains: allow.to_vec(),
        allow_private: private.iter().map(|s| s.to_string()).collect(),
        layer: Some(Layer::Full),
        ..Policy::with_workspace(ws)
    })
    .expect("sandbox")
}

/// What one run inside printed (stdout and stderr together) and the proxy decided.
struct Run {
    status: ExitStatus,
    out: String,
    /// The decisions the sandbox's proxy made during the run
    /// ([`Sandbox::egress_decisions`], the part added since the spawn).
    decisions: Vec<Decision>,
    /// The run's own list ([`stockade::Child::egress_decisions`]).
    own: Vec<Decision>,
}

/// Runs `sh -c script` in `sb`, in the workspace.
fn run_in(sb: &Sandbox, ws: &Path, script: &str) -> Run {
    let before = sb.egress_decisions().len();
    let mut child = sb
        .command("sh")
        .arg("-c")
        .arg(format!("exec 2>&1\n{script}"))
        .current_dir(ws)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = common::read_stdout(&mut child);
    let status = child.wait().expect("wait");
    // The sandbox's list holds every run's decisions; this run is the only one running.
    let all = sb.egress_decisions();
    Run {
        status,
        out,
        decisions: all[before.min(all.len())..].to_vec(),
        own: child.egress_decisions(),
    }
}

fn run(ws: &Path, allow: &[String], private: &[&str], script: &str) -> Run {
    run_in(&sandbox(ws, allow, private), ws, script)
}

impl Run {
    /// Asserts the script succeeded and printed every one of `lines` as a whole line.
    fn has_lines(&self, lines: &[&str]) {
        assert!(
            self.status.success(),
            "script failed: {:?}\n{}",
            self.status,
            self.out
        );
        for l in lines {
            assert!(
                self.out.lines().any(|x| x == *l),
                "no line {l:?} in:\n{}\ndecisions: {:#?}",
                self.out,
                self.decisions
            );
        }
    }

    /// The decisions as (protocol, host, port, outcome).
    fn summary(&self) -> Vec<(Protocol, String, u16, &'static str)> {
        self.decisions
            .iter()
            .map(|d| (d.protocol, d.host.clone(), d.port, outcome(d)))
            .collect()
    }
}

/// A decision's outcome as a word: `allowed`, or the kind of refusal.
fn outcome(d: &Decision) -> &'static str {
    match &d.refusal {
        None => "allowed",
        Some(Refusal::NotListed { .. }) => "not listed",
        Some(Refusal::Forbidden { .. }) => "forbidden",
        Some(Refusal::Resolve { .. }) => "resolve",
        Some(Refusal::Metadata { .. }) => "metadata",
        Some(_) => "other refusal",
    }
}

fn d(
    protocol: Protocol,
    host: &str,
    port: u16,
    outcome: &'static str,
) -> (Protocol, String, u16, &'static str) {
    (protocol, host.to_string(), port, outcome)
}

/// curl as the scripts call it: quiet but with errors, bounded in time, and the exit code
/// printed after the output on its own line.
const CURL: &str = "curl -sS --max-time 10";

/// A python3 client of the SOCKS5 proxy named by `ALL_PROXY` that asks for `argv[1]`
/// port `argv[2]` (as a domain name) and prints `socks reply N`.
const SOCKS_PY: &str = r#"import os, socket, struct, sys
host, port = os.environ["ALL_PROXY"].split("://")[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"\x05\x01\x00")
assert s.recv(2) == b"\x05\x00"
name = sys.argv[1].encode()
s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack(">H", int(sys.argv[2])))
print("socks reply", s.recv(10)[1])
"#;

// ---------------------------------------------------------------------------------------
// The tests.

/// curl through the HTTP proxy (a forwarded `http://` request), through `CONNECT`
/// (`https://`, the certificate checked against the server's own), and through SOCKS5,
/// both with `--socks5-hostname` and by `ALL_PROXY` alone; the environment names the
/// proxies.
#[test]
fn curl_reaches_an_allowed_address_over_http_connect_and_socks() {
    require_tools!("curl", "python3", "openssl");
    let dirs = dirs();
    let http = Server::start(SERVER_IP, None);
    let tls = TlsServer::start(&dirs.fixtures, &dirs.ws);
    let (p, t) = (http.port(), tls.port);
    let r = run(
        &dirs.ws,
        &[SERVER_IP.into()],
        &["127.0.0.2/32"],
        &format!(
            r#"echo "env $HTTP_PROXY $HTTPS_PROXY $ALL_PROXY $NO_PROXY"
echo "env $http_proxy $https_proxy $all_proxy $no_proxy $NODE_USE_ENV_PROXY"
echo "http $({CURL} http://{SERVER_IP}:{p}/hello)"
echo "https $({CURL} --cacert ca.pem https://{SERVER_IP}:{t}/)"
echo "socks $({CURL} --socks5-hostname "${{ALL_PROXY#socks5h://}}" http://{SERVER_IP}:{p}/hello)"
echo "all_proxy $(env -u HTTP_PROXY -u http_proxy {CURL} http://{SERVER_IP}:{p}/hello)"
"#
        ),
    );
    let hello = http.hello();
    r.has_lines(&[
        "env http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:1080 localhost,127.0.0.1,::1",
        "env http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:1080 localhost,127.0.0.1,::1 1",
        &format!("http {hello}"),
        "https hello tls",
        &format!("socks {hello}"),
        &format!("all_proxy {hello}"),
    ]);
    assert_eq!(http.accepted(), 3, "{:?}", http.requests.lock().unwrap());
    assert_eq!(
        r.summary(),
        [
            d(Protocol::Http, SERVER_IP, p, "allowed"),
            d(Protocol::Connect, SERVER_IP, t, "allowed"),
            d(Protocol::Socks5, SERVER_IP, p, "allowed"),
            d(Protocol::Socks5, SERVER_IP, p, "allowed"),
        ]
    );
}

/// python's `urllib` reads the proxy variables: `http://` forwarded, `https://` through
/// `CONNECT` with the certificate checked.
#[test]
fn python_urllib_uses_the_proxy() {
    require_tools!("python3", "openssl");
    let dirs = dirs();
    let http = Server::start(SERVER_IP, None);
    let tls = TlsServer::start(&dirs.fixtures, &dirs.ws);
    let (p, t) = (http.port(), tls.port);
    std::fs::write(
        dirs.ws.join("get.py"),
        format!(
            r#"import ssl, urllib.request as u
print("http", u.urlopen("http://{SERVER_IP}:{p}/hello", timeout=10).read().decode())
ctx = ssl.create_default_context(cafile="ca.pem")
print("https", u.urlopen("https://{SERVER_IP}:{t}/", timeout=10, context=ctx).read().decode())
"#
        ),
    )
    .unwrap();
    let r = run(
        &dirs.ws,
        &[SERVER_IP.into()],
        &["127.0.0.2/32"],
        "python3 get.py",
    );
    r.has_lines(&[&format!("http {}", http.hello()), "https hello tls"]);
    assert_eq!(http.accepted(), 1);
    assert_eq!(
        r.summary(),
        [
            d(Protocol::Http, SERVER_IP, p, "allowed"),
            d(Protocol::Connect, SERVER_IP, t, "allowed"),
        ]
    );
}

/// Runs `git` on the host for the fixtures, with no system or global configuration.
fn host_git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new(tool("git").unwrap())
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        common::output_text(&out)
    );
}

/// `git clone http://…` from a dumb-HTTP server (a bare repository after
/// `git update-server-info`, served as files): git finds the proxy in `http_proxy`.
#[test]
fn git_clones_over_http_through_the_proxy() {
    require_tools!("git");
    let dirs = dirs();
    let (src, www) = (dirs.fixtures.join("src"), dirs.fixtures.join("www"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&www).unwrap();
    host_git(&src, &["init", "-q"]);
    std::fs::write(src.join("README.md"), "cloned through the egress proxy\n").unwrap();
    host_git(&src, &["add", "README.md"]);
    host_git(&src, &["commit", "-q", "-m", "first"]);
    host_git(&www, &["clone", "-q", "--bare", "../src", "repo.git"]);
    host_git(&www.join("repo.git"), &["update-server-info"]);
    let server = Server::start(SERVER_IP, Some(www));
    let p = server.port();
    let r = run(
        &dirs.ws,
        &[format!("{SERVER_IP}:{p}")],
        &["127.0.0.2/32"],
        &format!(
            "git clone -q http://{SERVER_IP}:{p}/repo.git out && cat out/README.md && git -C out log --format='log %s'"
        ),
    );
    r.has_lines(&["cloned through the egress proxy", "log first"]);
    assert!(
        server.accepted() >= 2,
        "{:?}",
        server.requests.lock().unwrap()
    );
    assert_eq!(server.accepted(), r.decisions.len());
    assert!(
        r.decisions.iter().all(|x| x.allowed()
            && x.protocol == Protocol::Http
            && x.host == SERVER_IP
            && x.port == p),
        "{:#?}",
        r.decisions
    );
}

/// Builds a one-file wheel (`stockade_probe` 0.1) and a PEP 503 simple index for it
/// under `www` (`/simple/stockade-probe/` links to `/files/…whl` with its sha256).
fn pip_index(www: &Path) {
    let script = format!(
        r#"import base64, hashlib, os, zipfile
www = {www:?}
files = {{
    "stockade_probe/__init__.py": b"MARK = 1\n",
    "stockade_probe-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: stockade-probe\nVersion: 0.1\n",
    "stockade_probe-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: stockade-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}}
def digest(b):
    return base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
record = "".join(f"{{p}},sha256={{digest(b)}},{{len(b)}}\n" for p, b in files.items())
record += "stockade_probe-0.1.dist-info/RECORD,,\n"
files["stockade_probe-0.1.dist-info/RECORD"] = record.encode()
os.makedirs(f"{{www}}/files")
os.makedirs(f"{{www}}/simple/stockade-probe")
whl = "stockade_probe-0.1-py3-none-any.whl"
with zipfile.ZipFile(f"{{www}}/files/{{whl}}", "w") as z:
    for p, b in files.items():
        z.writestr(p, b)
sha = hashlib.sha256(open(f"{{www}}/files/{{whl}}", "rb").read()).hexdigest()
with open(f"{{www}}/simple/index.html", "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="stockade-probe/">stockade-probe</a></body></html>\n')
with open(f"{{www}}/simple/stockade-probe/index.html", "w") as f:
    f.write(f'<!DOCTYPE html><html><body><a href="../../files/{{whl}}#sha256={{sha}}">{{whl}}</a></body></html>\n')
"#
    );
    let out = std::process::Command::new(tool("python3").unwrap())
        .arg("-c")
        .arg(script)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "the wheel: {}",
        common::output_text(&out)
    );
}

/// `pip download --index-url http://…/simple/` from a local PEP 503 index: pip (requests)
/// finds the proxy in the environment and gets the index page and the wheel.
#[test]
fn pip_downloads_from_an_index_through_the_proxy() {
    require_tools!("python3", "pip3");
    let dirs = dirs();
    let www = dirs.fixtures.join("www");
    pip_index(&www);
    let server = Server::start(SERVER_IP, Some(www.clone()));
    let p = server.port();
    let r = run(
        &dirs.ws,
        &[format!("{SERVER_IP}:{p}")],
        &["127.0.0.2/32"],
        &format!(
            "pip3 download --no-deps --no-cache-dir --disable-pip-version-check --no-input \
             --index-url http://{SERVER_IP}:{p}/simple/ --trusted-host {SERVER_IP}:{p} \
             -d dl stockade-probe==0.1 && echo downloaded"
        ),
    );
    r.has_lines(&["downloaded"]);
    let whl = "stockade_probe-0.1-py3-none-any.whl";
    assert_eq!(
        std::fs::read(dirs.ws.join("dl").join(whl)).unwrap(),
        std::fs::read(www.join("files").join(whl)).unwrap()
    );
    let requests = server.requests.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .any(|l| l.contains("/simple/stockade-probe/"))
            && requests
                .iter()
                .any(|l| l.contains(&format!("/files/{whl}"))),
        "{requests:?}"
    );
    assert!(
        r.decisions.iter().all(Decision::allowed),
        "{:#?}",
        r.decisions
    );
}

/// A host not on the list: HTTP gets 403 naming the host and `allow_domains`, `CONNECT`
/// gets 403, SOCKS5 gets reply 0x02 (curl: exit 97); the server is never reached, while
/// the listed server still answers in the same run.
#[test]
fn a_host_not_on_the_list_is_refused_and_never_reached() {
    require_tools!("curl", "python3");
    let dirs = dirs();
    let listed = Server::start(SERVER_IP, None);
    let unlisted = Server::start(OTHER_IP, None);
    let by_name = Server::start("127.0.0.1", None);
    let (l, u, n) = (listed.port(), unlisted.port(), by_name.port());
    std::fs::write(dirs.ws.join("socks.py"), SOCKS_PY).unwrap();
    let r = run(
        &dirs.ws,
        &[format!("{SERVER_IP}:{l}")],
        &["127.0.0.0/8", "::1/128"],
        &format!(
            r#"{CURL} -i http://{OTHER_IP}:{u}/hello; echo "rc=$?"
{CURL} -p http://{OTHER_IP}:{u}/hello; echo "rc=$?"
{CURL} --socks5-hostname "${{ALL_PROXY#socks5h://}}" http://{OTHER_IP}:{u}/hello; echo "rc=$?"
python3 socks.py {OTHER_IP} {u}
python3 socks.py localhost {n}
{CURL} --noproxy '' http://localhost:{n}/hello; echo "rc=$?"
echo "listed $({CURL} http://{SERVER_IP}:{l}/hello)"
"#
        ),
    );
    r.has_lines(&[
        "HTTP/1.1 403 Forbidden",
        &format!(
            "stockade egress proxy: {OTHER_IP} port {u} refused: {OTHER_IP} port {u} is not in allow_domains."
        ),
        "To allow it, add it to the sandbox policy's allow_domains.",
        // curl -p: the tunnel's 403 (exit 56); SOCKS5: reply 2 (exit 97).
        "rc=56",
        "rc=97",
        "socks reply 2",
        &format!(
            "stockade egress proxy: localhost port {n} refused: localhost port {n} is not in allow_domains."
        ),
        &format!("listed {}", listed.hello()),
    ]);
    assert_eq!(r.out.matches("socks reply 2").count(), 2, "{}", r.out);
    assert_eq!(unlisted.accepted(), 0);
    assert_eq!(by_name.accepted(), 0);
    assert_eq!(listed.accepted(), 1);
    assert_eq!(
        r.summary(),
        [
            d(Protocol::Http, OTHER_IP, u, "not listed"),
            d(Protocol::Connect, OTHER_IP, u, "not listed"),
            d(Protocol::Socks5, OTHER_IP, u, "not listed"),
            d(Protocol::Socks5, OTHER_IP, u, "not listed"),
            d(Protocol::Socks5, "localhost", n, "not listed"),
            d(Protocol::Http, "localhost", n, "not listed"),
            d(Protocol::Http, SERVER_IP, l, "allowed"),
        ]
    );
}

/// Names and addresses on the list that resolve to loopback are refused unless
/// `allow_private` covers the address: with it empty, and with it naming another
/// address; the refusal names `allow_private`, and the server sees nothing.
#[test]
fn an_allowed_name_resolving_to_loopback_is_refused() {
    require_tools!("curl", "python3");
    let dirs = dirs();
    let ip = Server::start(SERVER_IP, None);
    let name = Server::start("127.0.0.1", None);
    let (p, n) = (ip.port(), name.port());
    std::fs::write(dirs.ws.join("socks.py"), SOCKS_PY).unwrap();
    let allow = [SERVER_IP.to_string(), "localhost".into()];
    let script = format!(
        r#"{CURL} http://{SERVER_IP}:{p}/hello; echo "rc=$?"
{CURL} --noproxy '' http://localhost:{n}/hello; echo "rc=$?"
{CURL} -p http://{SERVER_IP}:{p}/hello; echo "rc=$?"
python3 socks.py {SERVER_IP} {p}
python3 socks.py localhost {n}
"#
    );
    for private in [&[][..], &["127.0.0.3/32"][..]] {
        let r = run(&dirs.ws, &allow, private, &script);
        r.has_lines(&[
            &format!(
                "stockade egress proxy: {SERVER_IP} port {p} refused: {SERVER_IP} resolves to the non-public address {SERVER_IP}, outside allow_private."
            ),
            "To allow it, add it to the sandbox policy's allow_private.",
            "rc=56",
        ]);
        assert!(
            r.out.lines().any(|l| l.starts_with(&format!(
                "stockade egress proxy: localhost port {n} refused: localhost resolves to the non-public address"
            ))),
            "{}",
            r.out
        );
        assert_eq!(r.out.matches("socks reply 2").count(), 2, "{}", r.out);
        assert_eq!(
            r.summary(),
            [
                d(Protocol::Http, SERVER_IP, p, "forbidden"),
                d(Protocol::Http, "localhost", n, "forbidden"),
                d(Protocol::Connect, SERVER_IP, p, "forbidden"),
                d(Protocol::Socks5, SERVER_IP, p, "forbidden"),
                d(Protocol::Socks5, "localhost", n, "forbidden"),
            ],
            "allow_private = {private:?}"
        );
    }
    assert_eq!(ip.accepted(), 0);
    assert_eq!(name.accepted(), 0);
    // With the loopback in allow_private, the same name reaches its server; a metadata
    // address stays refused even when listed and inside allow_private.
    let r = run(
        &dirs.ws,
        &[allow[0].clone(), allow[1].clone(), "169.254.169.254".into()],
        &["127.0.0.0/8", "::1/128", "169.254.0.0/16"],
        &format!(
            r#"echo "name $({CURL} --noproxy '' http://localhost:{n}/hello)"
{CURL} http://169.254.169.254/latest/meta-data/; echo "rc=$?"
"#
        ),
    );
    r.has_lines(&[
        &format!("name {}", name.hello()),
        "stockade egress proxy: 169.254.169.254 port 80 refused: 169.254.169.254 is a cloud metadata endpoint.",
    ]);
    assert_eq!(name.accepted(), 1);
    assert_eq!(
        r.summary(),
        [
            d(Protocol::Http, "localhost", n, "allowed"),
            d(Protocol::Http, "169.254.169.254", 80, "metadata"),
        ]
    );
}

/// The proxy is the only way out: the namespace has only `lo`, a direct connection to the
/// server's address lands on the sandbox's own loopback (refused), other addresses have
/// no route, and UDP reaches nothing outside (the host's UDP socket and TCP server see
/// nothing), while the same server answers through the proxy.
#[test]
fn nothing_leaves_but_through_the_proxy() {
    require_tools!("curl", "python3");
    let dirs = dirs();
    let server = Server::start(SERVER_IP, None);
    let udp = udp_server();
    let (p, u) = (server.port(), udp.local_addr().unwrap().port());
    std::fs::write(
        dirs.ws.join("direct.py"),
        format!(
            r#"import errno, socket
def attempt(label, f):
    try:
        f()
        print(label, "OK")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
def tcp(family, addr):
    socket.socket(family, socket.SOCK_STREAM).connect(addr)
def udp(family, addr):
    socket.socket(family, socket.SOCK_DGRAM).sendto(b"x", addr)
print("interfaces", [n for _, n in socket.if_nameindex()])
attempt("tcp server", lambda: tcp(socket.AF_INET, ({SERVER_IP:?}, {p})))
attempt("tcp public", lambda: tcp(socket.AF_INET, ("192.0.2.1", 80)))
attempt("tcp private", lambda: tcp(socket.AF_INET, ("10.0.0.1", 80)))
attempt("tcp6 public", lambda: tcp(socket.AF_INET6, ("2001:db8::1", 80)))
attempt("udp dns", lambda: udp(socket.AF_INET, ("8.8.8.8", 53)))
attempt("udp private", lambda: udp(socket.AF_INET, ("10.0.0.1", 53)))
attempt("udp6 dns", lambda: udp(socket.AF_INET6, ("2001:4860:4860::8888", 53)))
attempt("udp server", lambda: udp(socket.AF_INET, ({SERVER_IP:?}, {u})))
"#
        ),
    )
    .unwrap();
    let r = run(
        &dirs.ws,
        &[SERVER_IP.into()],
        &["127.0.0.2/32"],
        &format!(
            r#"{CURL} --noproxy '*' http://{SERVER_IP}:{p}/hello; rc=$?; echo; echo "direct rc=$rc"
python3 direct.py
echo "proxied $({CURL} http://{SERVER_IP}:{p}/hello)"
"#
        ),
    );
    r.has_lines(&[
        "direct rc=7",
        "interfaces ['lo']",
        "tcp server ECONNREFUSED",
        "tcp public ENETUNREACH",
        "tcp private ENETUNREACH",
        "udp dns ENETUNREACH",
        "udp private ENETUNREACH",
        &format!("proxied {}", server.hello()),
    ]);
    // IPv6: no route either (or no IPv6 at all in a kernel built without it).
    for label in ["tcp6 public", "udp6 dns"] {
        assert!(
            [" ENETUNREACH", " EAFNOSUPPORT"]
                .iter()
                .any(|e| r.out.lines().any(|l| l == format!("{label}{e}"))),
            "{label}: {}",
            r.out
        );
    }
    // UDP to the server's address stays on the sandbox's own loopback: whatever the
    // kernel answers there, the host's socket gets nothing.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(datagrams(&udp), 0);
    assert_eq!(server.accepted(), 1, "only the proxied request");
    assert_eq!(r.summary(), [d(Protocol::Http, SERVER_IP, p, "allowed")]);
}

/// `*.localhost` allows names below `localhost` (in any case, with a trailing dot), not
/// `localhost` itself; `IP:PORT` allows that port only, over HTTP, `CONNECT` and SOCKS5
/// alike, and that address only as written (not its IPv4-mapped IPv6 form).
#[test]
fn wildcard_and_port_rules_hold() {
    require_tools!("curl", "python3");
    let dirs = dirs();
    let a = Server::start(SERVER_IP, None);
    let b = Server::start(SERVER_IP, None);
    let by_name = Server::start("127.0.0.1", None);
    let (pa, pb, n) = (a.port(), b.port(), by_name.port());
    std::fs::write(dirs.ws.join("socks.py"), SOCKS_PY).unwrap();
    let r = run(
        &dirs.ws,
        &[format!("{SERVER_IP}:{pa}"), "*.localhost".into()],
        &["127.0.0.0/8", "::1/128"],
        &format!(
            r#"echo "a $({CURL} http://{SERVER_IP}:{pa}/hello)"
echo "b $({CURL} http://{SERVER_IP}:{pb}/hello)"
{CURL} -p http://{SERVER_IP}:{pb}/hello; echo "rc=$?"
python3 socks.py {SERVER_IP} {pb}
{CURL} --noproxy '' http://localhost:{n}/hello; echo "rc=$?"
{CURL} --noproxy '' http://sub.localhost:{n}/hello; echo "rc=$?"
{CURL} -g "http://[::ffff:{SERVER_IP}]:{pa}/hello"; echo "rc=$?"
{CURL} --noproxy '' http://Sub.LocalHost.:{n}/hello; echo "rc=$?"
"#
        ),
    );
    r.has_lines(&[
        &format!("a {}", a.hello()),
        &format!(
            "b stockade egress proxy: {SERVER_IP} port {pb} refused: {SERVER_IP} port {pb} is not in allow_domains."
        ),
        "rc=56",
        "socks reply 2",
        &format!(
            "stockade egress proxy: localhost port {n} refused: localhost port {n} is not in allow_domains."
        ),
    ]);
    assert_eq!(a.accepted(), 1);
    assert_eq!(b.accepted(), 0);
    let summary = r.summary();
    assert_eq!(
        summary[..5],
        [
            d(Protocol::Http, SERVER_IP, pa, "allowed"),
            d(Protocol::Http, SERVER_IP, pb, "not listed"),
            d(Protocol::Connect, SERVER_IP, pb, "not listed"),
            d(Protocol::Socks5, SERVER_IP, pb, "not listed"),
            d(Protocol::Http, "localhost", n, "not listed"),
        ]
    );
    // The IPv4-mapped spelling of the listed address is another address to the list:
    // refused, not served behind the entry's back.
    assert_eq!(
        summary[6],
        d(
            Protocol::Http,
            &format!("::ffff:{SERVER_IP}"),
            pa,
            "not listed"
        ),
        "{}",
        r.out
    );
    // `sub.localhost` (curl lowercases `Sub.LocalHost.`, the trailing dot stays) passes
    // the list; whether it then resolves depends on the host's resolver (glibc's files
    // and DNS do not know it, systemd's nss-myhostname maps it to the loopback): refused
    // for that reason, or served, never "not listed".
    assert_eq!(summary.len(), 8, "{summary:#?}\n{}", r.out);
    let mut served = 0;
    for (i, host) in [(5, "sub.localhost"), (7, "sub.localhost.")] {
        let sub = &r.decisions[i];
        assert_eq!(
            (sub.protocol, sub.host.as_str(), sub.port),
            (Protocol::Http, host, n)
        );
        match outcome(sub) {
            "allowed" => served += 1,
            "resolve" => {}
            other => panic!("{host}: {other}: {sub:?}"),
        }
    }
    assert_eq!(by_name.accepted(), served);
}

/// `Child::egress_decisions` lists what the run asked for, in order, each allowed with
/// its checked address or refused with its reason; a second run of the same sandbox has
/// its own list.
#[test]
fn the_run_records_its_decisions() {
    require_tools!("curl");
    let dirs = dirs();
    let a = Server::start(SERVER_IP, None);
    let b = Server::start(SERVER_IP, None);
    let (pa, pb) = (a.port(), b.port());
    let sb = sandbox(&dirs.ws, &[format!("{SERVER_IP}:{pa}")], &["127.0.0.2/32"]);
    let r = run_in(
        &sb,
        &dirs.ws,
        &format!(
            r#"{CURL} http://{SERVER_IP}:{pa}/hello; echo
{CURL} -p http://{SERVER_IP}:{pa}/hello; echo
{CURL} --socks5-hostname "${{ALL_PROXY#socks5h://}}" http://{SERVER_IP}:{pa}/hello; echo
{CURL} http://{OTHER_IP}:{pa}/hello; echo
{CURL} --socks5-hostname "${{ALL_PROXY#socks5h://}}" http://name.invalid:80/; echo
{CURL} -p http://{SERVER_IP}:{pb}/hello; echo
true
"#
        ),
    );
    assert!(r.status.success(), "{}", r.out);
    assert_eq!(r.out.matches(&a.hello()).count(), 3, "{}", r.out);
    assert_eq!(
        r.summary(),
        [
            d(Protocol::Http, SERVER_IP, pa, "allowed"),
            d(Protocol::Connect, SERVER_IP, pa, "allowed"),
            d(Protocol::Socks5, SERVER_IP, pa, "allowed"),
            d(Protocol::Http, OTHER_IP, pa, "not listed"),
            d(Protocol::Socks5, "name.invalid", 80, "not listed"),
            d(Protocol::Connect, SERVER_IP, pb, "not listed"),
        ]
    );
    let checked: SocketAddr = (SERVER_IP.parse::<IpAddr>().unwrap(), pa).into();
    for x in &r.decisions[..3] {
        assert_eq!(x.addrs, [checked]);
        assert!(x.allowed());
    }
    for x in &r.decisions[3..] {
        assert!(x.addrs.is_empty() && !x.allowed(), "{x:?}");
    }
    assert_eq!(
        r.decisions[3].refusal,
        Some(Refusal::NotListed {
            host: OTHER_IP.into(),
            port: pa
        })
    );
    assert_eq!((a.accepted(), b.accepted()), (3, 0));
    assert_eq!(r.own, r.decisions, "Child::egress_decisions");
    // The next run of the same sandbox: its own decisions only.
    let again = run_in(
        &sb,
        &dirs.ws,
        &format!("{CURL} http://{SERVER_IP}:{pa}/hello"),
    );
    assert!(again.status.success(), "{}", again.out);
    assert_eq!(
        again.summary(),
        [d(Protocol::Http, SERVER_IP, pa, "allowed")]
    );
    assert_eq!(again.own, again.decisions, "Child::egress_decisions");
    assert_eq!(sb.egress_decisions().len(), 7);
    // Two runs at once: each child lists what it asked for, not the other's.
    let spawn = |url: String| {
        sb.command("curl")
            .args(["-sS", "--max-time", "10", &url])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn")
    };
    let mut one = spawn(format!("http://{SERVER_IP}:{pa}/one"));
    let mut two = spawn(format!("http://{OTHER_IP}:{pb}/two"));
    assert_eq!(common::read_stdout(&mut one), a.hello());
    assert!(one.wait().unwrap().success());
    assert!(common::read_stdout(&mut two).contains("is not in allow_domains"));
    assert!(two.wait().unwrap().success());
    let own = |c: &stockade::Child| {
        c.egress_decisions()
            .iter()
            .map(|x| (x.protocol, x.host.clone(), x.port, outcome(x)))
            .collect::<Vec<_>>()
    };
    assert_eq!(own(&one), [d(Protocol::Http, SERVER_IP, pa, "allowed")]);
    assert_eq!(own(&two), [d(Protocol::Http, OTHER_IP, pb, "not listed")]);
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
