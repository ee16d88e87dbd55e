//! `Command::explain`: real programs run with explain on report each distinct denial once,
//! with its count and hint; a clean run reports nothing; and the program's own output and
//! exit status are those of the same run with explain off.

#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use common::{Feature, LAYERS};
use stockade::{Denial, Layer, Network, Sandbox, Stdio, Wall};

/// Runs `prog args` with explain `on`: (exit status, stdout, stderr, denials).
fn run(
    sb: &Sandbox,
    on: bool,
    prog: &str,
    args: &[&str],
) -> (ExitStatus, String, String, Vec<Denial>) {
    let mut child = sb
        .command(prog)
        .args(args)
        .explain(on)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (mut out, mut err) = (String::new(), String::new());
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| se.read_to_string(&mut err).unwrap());
        so.read_to_string(&mut out).unwrap();
    });
    let status = child.wait().expect("wait");
    (status, out, err, child.denials())
}

fn sandbox(ws: &Path, layer: Layer, network: Network) -> Sandbox {
    common::sandbox_on(ws, layer, |p| p.network = network)
}

/// The layers this machine gives (full needs user namespaces: without them the full
/// layer's half is skipped, said on stderr, or fails under `STOCKADE_TEST_REQUIRE`).
fn layers() -> Vec<Layer> {
    if let Some(reason) = Feature::UserNs.missing() {
        assert!(!common::required(Feature::UserNs), "full layer: {reason}");
        common::skip("explain", &format!("the full layer: {reason}"));
        return vec![Layer::Landlock];
    }
    LAYERS.to_vec()
}

/// Python that calls `ptrace(PTRACE_ATTACH, 1)` `n` times and prints the errnos seen.
fn ptrace_loop(n: u32) -> String {
    format!(
        "import ctypes, collections\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         seen = collections.Counter()\n\
         for _ in range({n}):\n    \
             libc.ptrace(16, 1, 0, 0)\n    \
             seen[ctypes.get_errno()] += 1\n\
         print(dict(seen))"
    )
}

#[test]
fn a_denied_ptrace_is_reported_once_with_its_count_and_hint() {
    let ws = common::tempdir();
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        let (status, out, err, denials) = run(&sb, true, "python3", &["-c", &ptrace_loop(3)]);
        assert!(status.success(), "{layer:?}: {out}{err}");
        assert_eq!(out.trim(), "{1: 3}", "{layer:?}: EPERM three times");
        assert_eq!(
            denials,
            [Denial {
                wall: Wall::Seccomp,
                operation: "ptrace(PTRACE_ATTACH)".into(),
                target: None,
                count: 3,
                hint: "allow_ptrace = true".into(),
            }],
            "{layer:?}"
        );
    }
}

#[test]
fn strace_without_allow_ptrace_is_explained() {
    require!(Feature::Strace);
    let ws = common::tempdir();
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        let off = run(&sb, false, "strace", &["true"]);
        let on = run(&sb, true, "strace", &["true"]);
        assert_eq!(
            (off.0, &off.1),
            (on.0, &on.1),
            "{layer:?}: same status and output"
        );
        assert!(!on.0.success(), "{layer:?}: strace cannot trace: {}", on.2);
        assert!(!on.3.is_empty(), "{layer:?}: nothing reported");
        for d in &on.3 {
            assert_eq!(d.wall, Wall::Seccomp, "{d}");
            assert!(d.operation.starts_with("ptrace(PTRACE_"), "{d}");
            assert_eq!(d.hint, "allow_ptrace = true", "{d}");
            assert!(d.count >= 1);
        }
        assert!(off.3.is_empty(), "explain off reports nothing");
    }
}

#[test]
fn unshare_of_a_user_namespace_is_explained() {
    let ws = common::tempdir();
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        let (status, out, err, denials) = run(&sb, true, "unshare", &["-U", "true"]);
        assert!(!status.success(), "{layer:?}: {out}{err}");
        assert!(err.contains("Operation not permitted"), "{layer:?}: {err}");
        assert_eq!(denials.len(), 1, "{layer:?}: {denials:?}");
        assert_eq!(denials[0].wall, Wall::Seccomp);
        assert_eq!(denials[0].operation, "unshare(CLONE_NEWUSER)");
        assert_eq!(denials[0].hint, "never allowed (by design)");
        assert_eq!(denials[0].count, 1);
    }
}

#[test]
fn a_connect_with_network_none_names_the_address() {
    let ws = common::tempdir();
    let code = "import socket, errno\n\
                for a in [('140.82.112.3', 443), ('140.82.112.3', 443), ('127.0.0.1', 9)]:\n    \
                    try:\n        socket.socket().connect(a); print('OK')\n    \
                    except OSError as e: print(errno.errorcode[e.errno])";
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        let off = run(&sb, false, "python3", &["-c", code]);
        let (status, out, err, denials) = run(&sb, true, "python3", &["-c", code]);
        assert_eq!(
            (off.0, &off.1),
            (status, &out),
            "{layer:?}: same result: {err}"
        );
        assert!(status.success(), "{layer:?}: {out}{err}");
        let hint = "network = \"none\": use \"allow\" with allow_domains";
        assert_eq!(denials.len(), 1, "{layer:?}: {denials:?}");
        let d = &denials[0];
        assert_eq!((d.wall, d.hint.as_str()), (Wall::Network, hint), "{d}");
        match layer {
            // A namespace of its own: the connect runs and fails there, loopback works.
            Layer::Full => {
                assert_eq!(out, "ENETUNREACH\nENETUNREACH\nECONNREFUSED\n");
                assert_eq!(d.operation, "connect");
                assert_eq!(d.target.as_deref(), Some("140.82.112.3:443"));
                assert_eq!(d.count, 2);
            }
            // The filter refuses the socket itself.
            _ => {
                assert_eq!(out, "EPERM\nEPERM\nEPERM\n");
                assert_eq!(d.operation, "socket(AF_INET, SOCK_STREAM)");
                assert_eq!(d.count, 3);
            }
        }
    }
}

/// A UDP datagram to an address off the loopback (`sendto` with a destination) is
/// reported like a connect; one to the loopback, or on a connected socket, is not.
#[test]
fn a_udp_sendto_with_network_none_names_the_address() {
    require!(Feature::UserNs);
    let ws = common::tempdir();
    let code = "import socket, errno\n\
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                for a in [('8.8.8.8', 53), ('127.0.0.1', 9)]:\n    \
                    try:\n        s.sendto(b'x', a); print('OK')\n    \
                    except OSError as e: print(errno.errorcode[e.errno])\n\
                s.connect(('127.0.0.1', 9)); s.send(b'y'); print('sent')";
    let sb = sandbox(ws.path(), Layer::Full, Network::None);
    let off = run(&sb, false, "python3", &["-c", code]);
    let (status, out, err, denials) = run(&sb, true, "python3", &["-c", code]);
    assert_eq!((off.0, &off.1), (status, &out), "{err}");
    assert_eq!(out, "ENETUNREACH\nOK\nsent\n", "{err}");
    assert_eq!(denials.len(), 1, "{denials:?}");
    assert_eq!(denials[0].operation, "sendto");
    assert_eq!(denials[0].target.as_deref(), Some("8.8.8.8:53"));
    assert_eq!(denials[0].wall, Wall::Network);
}

#[test]
fn a_clean_run_reports_nothing() {
    let ws = common::tempdir();
    std::fs::write(ws.path().join("f"), "x").unwrap();
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        for (prog, args) in [
            ("true", &[][..]),
            ("ls", &["-la", "."][..]),
            ("sh", &["-c", "ls | wc -l; cat f"][..]),
            // Reads of the system, writes into the workspace and the temporary directory.
            (
                "sh",
                &[
                    "-c",
                    "ls /usr >/dev/null && cat f && echo y > g && mkdir -p d/e && mv g d/h \
                     && rm -r d && t=${TMPDIR:-/tmp}/t && echo t > $t && cat $t && rm $t",
                ][..],
            ),
        ] {
            let (status, out, err, denials) = run(&sb, true, prog, args);
            assert!(status.success(), "{layer:?} {prog}: {out}{err}");
            assert!(denials.is_empty(), "{layer:?} {prog}: {denials:?}");
        }
    }
}

/// The layout's denials: a read outside it, a write to a system path, the data dir, a
/// `.git/hooks` write; each once, with its count and hint, and the program's output and
/// status the same as with explain off.
#[test]
fn file_system_denials_are_reported_once_with_their_hint() {
    let ws = common::tempdir();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    std::fs::write(ws.path().join(".env"), "SECRET=1\n").unwrap();
    let ws_canon = std::fs::canonicalize(ws.path()).unwrap();
    let (_out_dir, outside) = common::var_tempdir();
    std::fs::write(outside.join("x"), "secret").unwrap();
    let (_data_dir, data) = common::var_tempdir();
    std::fs::write(data.join("key"), "k").unwrap();
    let script = format!(
        "cat {o}/x; cat {o}/x; echo w > /usr/stockade-explain; cat {d}/key; \
         echo h > .git/hooks/pre-commit; cat .env >/dev/null; echo done",
        o = outside.display(),
        d = data.display()
    );
    for layer in layers() {
        let sb = common::sandbox_on(ws.path(), layer, |p| {
            p.network = Network::None;
            p.data_dir = Some(data.clone());
        });
        let off = run(&sb, false, "sh", &["-c", &script]);
        let on = run(&sb, true, "sh", &["-c", &script]);
        assert_eq!((off.0, &off.1, &off.2), (on.0, &on.1, &on.2), "{layer:?}");
        assert_eq!(on.1, "done\n", "{layer:?}: {}", on.2);
        assert!(off.3.is_empty(), "explain off reports nothing");
        let got: Vec<(Wall, &str, String, u64, &str)> =
            on.3.iter()
                .map(|d| {
                    let t = d.target.clone().unwrap_or_default();
                    (d.wall, d.operation.as_str(), t, d.count, d.hint.as_str())
                })
                .collect();
        let read_only = format!(
            "not in the sandbox: read_only = [\"{}\"]",
            outside.display()
        );
        let mut want = vec![
            (
                Wall::Layout,
                "read",
                format!("{}/x", outside.display()),
                2,
                read_only.as_str(),
            ),
            (
                Wall::Layout,
                "write",
                "/usr/stockade-explain".into(),
                1,
                "read-only system path (never writable)",
            ),
            (
                Wall::Masked,
                "read",
                format!("{}/key", data.display()),
                1,
                "the data dir is hidden (by design)",
            ),
            (
                Wall::Layout,
                "write",
                format!(
                    "{}/.git/hooks/pre-commit",
                    std::fs::canonicalize(ws.path()).unwrap().display()
                ),
                1,
                "guarded by guard_names",
            ),
        ];
        // The full layer covers `deny_names` (an empty file reads); layer 2 cannot hide
        // a name inside the workspace.
        if layer == Layer::Full {
            want.push((
                Wall::Masked,
                "read",
                format!("{}/.env", ws_canon.display()),
                1,
                "hidden by deny_names",
            ));
        }
        assert_eq!(got, want, "{layer:?}");
    }
}

/// A program that makes itself not dumpable keeps a non-root host from reading its
/// memory on layer 2 (`process_vm_readv` needs ptrace access): its file-system denials
/// cannot be listed, and the report says so instead of saying nothing. A root host still
/// reads them. (On the full layer the host owns the sandbox's user namespace and reads
/// them either way.)
#[test]
fn a_program_that_is_not_dumpable_cannot_empty_the_report() {
    let ws = common::tempdir();
    let code = "import ctypes\n\
                ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n\
                try:\n    open('/usr/stockade-explain-nodump', 'w')\n\
                except OSError as e:\n    print(e.errno)\n";
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        let (status, out, err, denials) = run(&sb, true, "python3", &["-c", code]);
        assert!(status.success(), "{layer:?}: {out}{err}");
        assert!(["13", "30"].contains(&out.trim()), "{layer:?}: {out}");
        let listed = denials
            .iter()
            .any(|d| d.target.as_deref() == Some("/usr/stockade-explain-nodump"));
        let unreadable = denials
            .iter()
            .find(|d| d.operation.contains("the host may not read"));
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if layer == Layer::Landlock && !root {
            assert!(!listed, "{denials:?}");
            let u = unreadable.unwrap_or_else(|| panic!("nothing said: {denials:?}"));
            assert_eq!(u.wall, Wall::Layout);
            assert!(u.count >= 1, "{u:?}");
        } else {
            assert!(listed, "{layer:?}, root {root}: {denials:?}");
            assert!(unreadable.is_none(), "{layer:?}: {denials:?}");
        }
    }
}

/// Each call the filter refuses, with the errno python sees: the same with explain on
/// and off; `clone3`'s `ENOSYS` (libc's fallback) is no denial. (x86_64 numbers.)
#[cfg(target_arch = "x86_64")]
#[test]
fn the_program_sees_the_same_errnos_and_status() {
    let ws = common::tempdir();
    let code = r#"
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    e = ctypes.get_errno() if r < 0 else 0
    print(name, r, errno.errorcode.get(e, e))
call("ptrace", 101, 16, 1, 0, 0)
call("unshare", 272, 0x10000000)
call("bpf", 321, 0, 0, 0)
call("clone3", 435, 0, 0)
call("new", 470, 0)
call("ioctl", 16, 0, 0x5412, 0)
call("socket_vsock", 41, 40, 1, 0)
call("personality", 135, 0x0040000)
call("mount", 165, 0, 0, 0, 0, 0)
call("keyctl", 250, 0, 0, 0)
os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o644))
call("chmod_setuid", 90, b"f", 0o4755)
import sys; sys.stdout.flush(); os._exit(7)
"#;
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        let off = run(&sb, false, "python3", &["-c", code]);
        let on = run(&sb, true, "python3", &["-c", code]);
        assert_eq!(off.0.code(), Some(7), "{layer:?}: {}{}", off.1, off.2);
        assert_eq!((off.0, &off.1, &off.2), (on.0, &on.1, &on.2), "{layer:?}");
        assert!(on.1.contains("ptrace -1 EPERM\n"), "{}", on.1);
        assert!(on.1.contains("clone3 -1 ENOSYS\n"), "{}", on.1);
        assert!(on.1.contains("new -1 ENOSYS\n"), "{}", on.1);
        let ops: Vec<&str> = on.3.iter().map(|d| d.operation.as_str()).collect();
        assert_eq!(
            ops,
            [
                "ptrace(PTRACE_ATTACH)",
                "unshare(CLONE_NEWUSER)",
                "bpf",
                "syscall 470",
                "ioctl(TIOCSTI)",
                "socket(AF_VSOCK, SOCK_STREAM)",
                "personality(0x40000)",
                "mount",
                "keyctl",
                "chmod(mode 04755)",
            ],
            "{layer:?}: {:#?}",
            on.3
        );
        assert!(
            on.3.iter().all(|d| d.count == 1 && d.wall == Wall::Seccomp),
            "{:#?}",
            on.3
        );
    }
}

/// Many denials: each answered, each counted, in a bounded time.
#[test]
fn ten_thousand_denials_are_counted_exactly() {
    let ws = common::tempdir();
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        let t = Instant::now();
        let (status, out, err, denials) = run(&sb, true, "python3", &["-c", &ptrace_loop(10_000)]);
        assert!(status.success(), "{layer:?}: {out}{err}");
        assert_eq!(out.trim(), "{1: 10000}");
        assert_eq!(denials.len(), 1, "{denials:?}");
        assert_eq!(denials[0].count, 10_000);
        assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    }
}

/// A process the program leaves behind makes denied calls after the program has
/// exited: the wait returns, and the sandbox's end ends the answering.
#[test]
fn denials_after_the_program_exits_do_not_hang() {
    let ws = common::tempdir();
    let code = ptrace_loop(1_000_000);
    for layer in layers() {
        let sb = sandbox(ws.path(), layer, Network::None);
        let t = Instant::now();
        let script = format!("python3 -c '{code}' >/dev/null 2>&1 & sleep 0.3; exit 3");
        let (status, _, err, denials) = run(&sb, true, "sh", &["-c", &script]);
        assert_eq!(status.code(), Some(3), "{layer:?}: {err}");
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        assert_eq!(denials.len(), 1, "{layer:?}: {denials:?}");
        assert!(denials[0].count > 0);
        // The sandbox goes on working.
        let (status, ..) = run(&sb, true, "true", &[]);
        assert!(status.success());
    }
}

/// `network = "allow"`: the egress proxy's refusal is a network denial naming the host
/// and the key that would allow it.
#[test]
fn an_egress_refusal_is_a_network_denial() {
    let ws = common::tempdir();
    let code = "import urllib.request\n\
                try:\n    urllib.request.urlopen('http://not-listed.example/', timeout=10)\n\
                except Exception as e: print(type(e).__name__, getattr(e, 'code', ''))";
    for layer in layers() {
        let sb = common::sandbox_on(ws.path(), layer, |p| {
            p.network = Network::Allow;
            p.allow_domains = vec!["example.com".into()];
        });
        let (status, out, err, denials) = run(&sb, true, "python3", &["-c", code]);
        assert!(status.success(), "{layer:?}: {out}{err}");
        assert_eq!(out.trim(), "HTTPError 403", "{layer:?}: {err}");
        assert_eq!(denials.len(), 1, "{layer:?}: {denials:?}");
        let d = &denials[0];
        assert_eq!(d.wall, Wall::Network);
        assert_eq!(d.target.as_deref(), Some("not-listed.example:80"));
        assert!(d.hint.ends_with("add it to allow_domains"), "{d}");
    }
}

/// Explain as the CLI prints and writes it.
#[test]
fn the_cli_prints_and_writes_the_denials() {
    let ws = common::tempdir();
    let json = ws.path().join("denials.json");
    let out = std::process::Command::new(common::stockade_exe())
        .current_dir(ws.path())
        .args([
            "run",
            "--no-pty",
            "--network",
            "none",
            "--explain",
            "--explain-json",
        ])
        .arg(&json)
        .args(["--", "unshare", "-U", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("seccomp "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("unshare(CLONE_NEWUSER)"), "{line}");
    assert!(line.ends_with("→ never allowed (by design)"), "{line}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(
        v,
        serde_json::json!([{
            "wall": "seccomp",
            "operation": "unshare(CLONE_NEWUSER)",
            "target": null,
            "count": 1,
            "hint": "never allowed (by design)",
        }])
    );
}

/// A clean run says so; a layer without a filter says it has nothing to report.
#[test]
fn the_cli_says_when_there_is_nothing_to_report() {
    let ws = common::tempdir();
    for (layer, want) in [
        ("landlock", "stockade: explain: nothing denied"),
        (
            "passthrough",
            "stockade: explain: nothing to report on this layer",
        ),
    ] {
        let out = std::process::Command::new(common::stockade_exe())
            .current_dir(ws.path())
            .args([
                "run",
                "--no-pty",
                "--layer",
                layer,
                "--min-layer",
                "passthrough",
            ])
            .args(["--explain", "--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{layer}: {err}");
        assert_eq!(err.trim_end(), want, "{layer}");
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
