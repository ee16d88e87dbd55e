//! The handoff of `network = "allow"` on the full layer: the setup child opens the egress
//! proxy's listeners inside the sandbox's network namespace and passes them to the host,
//! keeping no copy. What a program inside can do with the two ports (take them over,
//! accept on them, find them among its fds) is tried here; the proxy's decisions are
//! tried in `egress_sandbox.rs` and `egress.rs`.

#![cfg(target_os = "linux")]

mod common;

use common::{Feature, py_ok, sandbox_on, sh_ok, var_tempdir};
use stockade::{Layer, Network, Stdio};

fn allow_sandbox(ws: &std::path::Path, entries: &[&str]) -> stockade::Sandbox {
    sandbox_on(ws, Layer::Full, |p| {
        p.network = Network::Allow;
        p.allow_domains = entries.iter().map(|s| s.to_string()).collect();
        p.allow_private = vec!["127.0.0.0/8".into()];
    })
}

#[test]
fn the_listeners_are_the_hosts_alone_and_the_proxy_is_the_way_out() {
    require!(Feature::UserNs);
    let (_keep, ws) = var_tempdir();
    let (port, count) = common::http_server("through the proxy");
    let sb = allow_sandbox(&ws, &["127.0.0.2"]);
    // Its variables lead to the listeners inside.
    let env = sh_ok(&sb, "echo $HTTP_PROXY $https_proxy $ALL_PROXY $NO_PROXY");
    assert_eq!(
        env.trim(),
        "http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:1080 localhost,127.0.0.1,::1"
    );
    // The program holds no copy of a listener: no socket among its fds but what it made.
    let fds = sh_ok(&sb, "ls -l /proc/self/fd/ | grep -c socket || true");
    assert_eq!(fds.trim(), "0", "a listener leaked into the program");
    // It cannot take the ports over (they are bound, by the host's sockets), and a
    // socket of its own that connects there reaches the host's proxy, which answers.
    let code = format!(
        "{}\n{}\n{}",
        common::try_errno("socket.socket().bind(('127.0.0.1', 3128))"),
        common::try_errno("socket.socket().bind(('127.0.0.1', 1080))"),
        format_args!(
            "import socket\ns = socket.create_connection(('127.0.0.1', 3128))\n\
             s.sendall(b'GET http://127.0.0.2:{port}/ HTTP/1.1\\r\\nHost: 127.0.0.2:{port}\\r\\n\\r\\n')\n\
             print(s.makefile('rb').read().split(b'\\r\\n\\r\\n', 1)[1].decode())"
        )
    );
    let out = py_ok(&sb, &code);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["EADDRINUSE", "EADDRINUSE", "through the proxy"],
        "{out}"
    );
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Without the proxy there is no route: the namespace has only its loopback.
    let direct = py_ok(
        &sb,
        &common::try_errno(&format!(
            "socket.create_connection(('127.0.0.2', {port}), timeout=5)"
        )),
    );
    assert_eq!(
        direct.trim(),
        "ECONNREFUSED",
        "direct TCP reached something"
    );
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn each_run_gets_its_own_listeners_and_records_its_own_decisions() {
    require!(Feature::UserNs);
    let (_keep, ws) = var_tempdir();
    let (port, _) = common::http_server("ok");
    let sb = allow_sandbox(&ws, &["127.0.0.2"]);
    let run = |url: String| {
        let mut child = sb
            .command("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &url])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let code = common::read_stdout(&mut child);
        child.wait().unwrap();
        (code, child.egress_decisions())
    };
    let (code, decisions) = run(format!("http://127.0.0.2:{port}/"));
    assert_eq!(code, "200");
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(decisions[0].allowed() && decisions[0].host == "127.0.0.2");
    let (code, decisions) = run(format!("http://127.0.0.3:{port}/"));
    assert_eq!(code, "403");
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(!decisions[0].allowed() && decisions[0].host == "127.0.0.3");
}

#[test]
fn as_nobody() {
    common::rerun_as_nobody(&["the_", "each_", "a_child_"]);
}

#[test]
fn a_child_dropped_unwaited_keeps_its_route_out_until_it_ends() {
    require!(Feature::UserNs);
    let (_keep, ws) = var_tempdir();
    let (port, count) = common::http_server("still there");
    let sb = allow_sandbox(&ws, &["127.0.0.2"]);
    let out = ws.join("out");
    // The program waits for its go file, then asks through the proxy.
    let script = format!(
        "while [ ! -e go ]; do sleep 0.02; done; curl -s http://127.0.0.2:{port}/ > out.tmp; mv out.tmp out"
    );
    let child = sb.command("sh").args(["-c", &script]).spawn().unwrap();
    drop(child);
    std::fs::write(ws.join("go"), "").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !out.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::read_to_string(&out).unwrap_or_default(),
        "still there"
    );
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
}
