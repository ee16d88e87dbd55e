//! The second and third walls, proven from inside: every seccomp denial with its errno on
//! the full layer, ptrace allowed on request, and layer 2 (Landlock + seccomp without
//! namespaces) on a host whose user namespaces are denied.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Command as StdCommand;

use common::{Feature, py_ok, sandbox, sh_ok, tempdir, try_errno};
use stockade::{Error, Layer, Network, Policy, Sandbox};

/// (name, x86_64 syscall number, arguments, expected errno). Arguments are harmless
/// values: without the filter each call fails with some other errno or succeeds.
#[cfg(target_arch = "x86_64")]
const DENIED: &[(&str, i64, &[i64], &str)] = &[
    ("ptrace", 101, &[16, 1], "EPERM"),
    ("process_vm_readv", 310, &[1, 0, 0, 0, 0, 0], "EPERM"),
    ("process_vm_writev", 311, &[1, 0, 0, 0, 0, 0], "EPERM"),
    ("kexec_load", 246, &[0, 0, 0, 0], "EPERM"),
    ("kexec_file_load", 320, &[-1, -1, 0, 0, 0], "EPERM"),
    ("init_module", 175, &[0, 0, 0], "EPERM"),
    ("finit_module", 313, &[-1, 0, 0], "EPERM"),
    ("delete_module", 176, &[0, 0], "EPERM"),
    ("bpf", 321, &[0, 0, 0], "EPERM"),
    ("perf_event_open", 298, &[0, 0, -1, -1, 0], "EPERM"),
    ("userfaultfd", 323, &[0], "EPERM"),
    ("keyctl", 250, &[0, -3, 0], "EPERM"),
    ("add_key", 248, &[0, 0, 0, 0, 0], "EPERM"),
    ("request_key", 249, &[0, 0, 0, 0], "EPERM"),
    ("mount", 165, &[0, 0, 0, 0, 0], "EPERM"),
    ("umount2", 166, &[0, 0], "EPERM"),
    ("pivot_root", 155, &[0, 0], "EPERM"),
    ("open_tree", 428, &[-1, 0, 0], "EPERM"),
    ("move_mount", 429, &[-1, 0, -1, 0, 0], "EPERM"),
    ("fsopen", 430, &[0, 0], "EPERM"),
    ("fsconfig", 431, &[-1, 0, 0, 0, 0], "EPERM"),
    ("fsmount", 432, &[-1, 0, 0], "EPERM"),
    ("fspick", 433, &[-1, 0, 0], "EPERM"),
    ("mount_setattr", 442, &[-1, 0, 0, 0, 0], "EPERM"),
    ("unshare", 272, &[0x10000000], "EPERM"),
    ("setns", 308, &[-1, 0], "EPERM"),
    ("clone_newuser", 56, &[0x10000000 | 17, 0, 0, 0, 0], "EPERM"),
    ("clone3", 435, &[0, 0], "ENOSYS"),
    ("reboot", 169, &[0, 0, 0, 0], "EPERM"),
    ("swapon", 167, &[0, 0], "EPERM"),
    ("swapoff", 168, &[0], "EPERM"),
    ("acct", 163, &[0], "EPERM"),
    ("quotactl", 179, &[0, 0, 0, 0], "EPERM"),
    ("settimeofday", 164, &[0, 0], "EPERM"),
    ("clock_settime", 227, &[0, 0], "EPERM"),
    ("clock_adjtime", 305, &[0, 0], "EPERM"),
    ("adjtimex", 159, &[0], "EPERM"),
    ("open_by_handle_at", 304, &[-1, 0, 0], "EPERM"),
    ("name_to_handle_at", 303, &[-1, 0, 0, 0, 0], "EPERM"),
    ("iopl", 172, &[3], "EPERM"),
    ("ioperm", 173, &[0, 1, 1], "EPERM"),
    ("ioctl_tiocsti", 16, &[0, 0x5412, 0], "EPERM"),
    ("ioctl_tioclinux", 16, &[0, 0x541C, 0], "EPERM"),
    ("io_uring_setup", 425, &[1, 0], "EPERM"),
    ("io_uring_enter", 426, &[-1, 0, 0, 0, 0, 0], "EPERM"),
    ("io_uring_register", 427, &[-1, 0, 0, 0], "EPERM"),
    ("socket_vsock", 41, &[40, 1, 0], "EPERM"),
];

/// A python program that makes each call and prints `name errno-name` per line.
#[cfg(target_arch = "x86_64")]
fn syscall_probe(calls: &[(&str, i64, &[i64], &str)]) -> String {
    let mut src = String::from(
        "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n",
    );
    for (name, nr, args, _) in calls {
        let args: Vec<String> = args.iter().map(|a| format!("ctypes.c_long({a})")).collect();
        src.push_str(&format!(
            "r = libc.syscall(ctypes.c_long({nr}), {})\nprint('{name}', 'OK' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))\n",
            args.join(", ")
        ));
    }
    src
}

#[cfg(target_arch = "x86_64")]
#[test]
fn every_listed_call_is_denied_inside_the_full_layer() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let out = py_ok(&sb, &syscall_probe(DENIED));
    let got: Vec<(&str, &str)> = out.lines().filter_map(|l| l.split_once(' ')).collect();
    assert_eq!(got.len(), DENIED.len(), "{out}");
    for ((name, _, _, want), (gname, errno)) in DENIED.iter().zip(&got) {
        assert_eq!(name, gname);
        assert_eq!(errno, want, "{name}");
    }
}

#[test]
fn ordinary_programs_still_work_under_the_filters() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    // Wait (boundedly) until the background child has exec'd `sleep` before listing.
    let ps = sh_ok(
        &sb,
        "sleep 5 & for i in $(seq 500); do ps -e -o comm= | grep -qx sleep && break; done; ps -e -o pid=,comm=; kill $!",
    );
    assert!(ps.contains("sleep") && ps.contains("ps"), "{ps}");
    py_ok(
        &sb,
        "import threading, subprocess\nts = [threading.Thread(target=lambda: subprocess.run(['true'], check=True)) for _ in range(4)]\n[t.start() for t in ts]; [t.join() for t in ts]",
    );
    sh_ok(
        &sb,
        "printf 'int main(void){return 0;}' > t.c && cc -pthread -o t t.c && ./t",
    );
    sh_ok(
        &sb,
        "git init -q r && git -C r status >/dev/null && ls / >/dev/null && ls /tmp /proc/self >/dev/null",
    );
    let status = sb.landlock_status().expect("landlock active");
    assert!(status.refer() && status.signals_scoped() && status.abstract_unix_scoped());
}

#[test]
fn allow_ptrace_lets_strace_work_inside_only() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let out = sb
        .command("strace")
        .args(["-f", "-o", "/dev/null", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "strace worked without allow_ptrace");
    let sb = sandbox(ws.path(), |p| p.allow_ptrace = true);
    let out = sb
        .command("strace")
        .args(["-f", "-o", "/dev/null", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Processes outside stay out of reach: not even visible.
    let me = std::process::id();
    let r = py_ok(&sb, &try_errno(&format!("open('/proc/{me}/mem')")));
    assert_eq!(r.trim(), "ENOENT");
}

#[test]
fn layer_two_on_a_host_that_denies_user_namespaces() {
    require!(Feature::UserNs);
    if std::env::var_os("STOCKADE_TEST_LAYER2_INNER").is_some() {
        return;
    }
    // A user namespace whose own limit for nested user namespaces is 0: inside it,
    // creating one fails with ENOSPC, as on hosts that restrict them.
    run_inner(
        "-Ur",
        "echo 0 > /proc/sys/user/max_user_namespaces",
        "layer_two_inner",
        "STOCKADE_TEST_LAYER2_INNER",
    );
}

/// The inside half of `layer_two_on_a_host_that_denies_user_namespaces`.
#[test]
fn layer_two_inner() {
    if std::env::var_os("STOCKADE_TEST_LAYER2_INNER").is_none() {
        return;
    }
    let caps = stockade::Capabilities::probe();
    assert!(!caps.user_namespaces.available);
    let why = caps.user_namespaces.reason.clone().unwrap();
    assert!(why.contains("No space left on device"), "{why}");
    assert_eq!(caps.best_layer(), Layer::Landlock);
    // detect says why layer 1 is not available.
    let detect = StdCommand::new(env!("CARGO_BIN_EXE_stockade"))
        .args(["detect", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&detect.stdout).unwrap();
    assert_eq!(v["best"], "landlock");
    assert!(
        v["layers"][0]["status"]["reason"]
            .as_str()
            .unwrap()
            .contains("No space left")
    );

    let ws = tempdir();
    let outside = tempdir();
    let data = tempdir();
    std::fs::write(data.path().join("secret"), "s").unwrap();
    std::fs::write(outside.path().join("f"), "host").unwrap();
    let mut p = Policy::with_workspace(ws.path());
    p.data_dir = Some(data.path().to_path_buf());
    p.network = Network::None;
    // Refusing to degrade is an error that names the missing layer.
    let mut refuse = p.clone();
    refuse.fallback = stockade::Fallback::Refuse;
    let err = Sandbox::new(refuse).unwrap_err();
    assert!(err.to_string().contains("`full` is not available"), "{err}");
    // A minimum layer above what is left is refused too.
    let mut floor = p.clone();
    floor.min_layer = Some(Layer::Full);
    assert!(Sandbox::new(floor).is_err());
    // A data dir under the workspace cannot be hidden by Landlock: an error says so.
    let mut under = p.clone();
    under.data_dir = Some(ws.path().join("data"));
    std::fs::create_dir_all(ws.path().join("data")).unwrap();
    match Sandbox::new(under) {
        Err(Error::Plan(e)) => assert!(e.to_string().contains("cannot hide data_dir"), "{e}"),
        other => panic!("expected a plan error, got {other:?}"),
    }

    let sb = Sandbox::new(p).unwrap();
    assert_eq!(sb.layer(), Layer::Landlock);
    assert!(
        sb.degradation()
            .unwrap()
            .reason
            .contains("No space left on device")
    );
    // The workspace and the private TMPDIR are writable; nothing else is.
    let w = std::fs::canonicalize(ws.path()).unwrap();
    sh_ok(
        &sb,
        &format!("echo ok > {}/f && echo ok > \"$TMPDIR/f\"", w.display()),
    );
    for (expr, want) in [
        (
            format!("open('{}/f', 'w')", outside.path().display()),
            "EACCES",
        ),
        (format!("open('{}/f')", outside.path().display()), "EACCES"),
        ("open('/etc/stockade-x', 'w')".to_string(), "EACCES"),
        ("open('/tmp/stockade-x', 'w')".to_string(), "EACCES"),
        (format!("os.listdir('{}')", data.path().display()), "EACCES"),
        (
            format!("open('{}/secret')", data.path().display()),
            "EACCES",
        ),
    ] {
        assert_eq!(py_ok(&sb, &try_errno(&expr)).trim(), want, "{expr}");
    }
    // A host process cannot be signalled.
    let mut host = StdCommand::new("sleep").arg("30").spawn().unwrap();
    let r = py_ok(&sb, &try_errno(&format!("os.kill({}, 15)", host.id())));
    assert_eq!(r.trim(), "EPERM");
    assert!(host.try_wait().unwrap().is_none());
    host.kill().unwrap();
    host.wait().unwrap();
    // A host abstract unix socket cannot be reached.
    let name = format!("stockade-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let r = py_ok(
        &sb,
        &try_errno(&format!(
            "s = socket.socket(socket.AF_UNIX); s.connect('\\0{name}')"
        )),
    );
    assert_eq!(r.trim(), "EPERM");
    drop(listener);
    // TCP with network none: no socket to begin with, and Landlock denies connect too.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let r = py_ok(
        &sb,
        &try_errno(&format!(
            "socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        )),
    );
    assert!(matches!(r.trim(), "EPERM" | "EACCES"), "{r}");
    // Ordinary programs run.
    let out = sh_ok(&sb, "echo a | tr a b; python3 -c 'print(1)'");
    assert_eq!(out, "b\n1\n");
    let mut buf = String::new();
    let mut child = sb
        .command("sh")
        .args(["-c", "echo $TMPDIR"])
        .stdout(stockade::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut buf)
        .unwrap();
    child.wait().unwrap();
    let tmp = buf.trim().to_string();
    assert!(tmp.contains("stockade-tmp-"), "{tmp}");
    assert!(
        !Path::new(&tmp).exists(),
        "the private tmp dir outlived the command"
    );
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some()
        || std::env::var_os("STOCKADE_TEST_LAYER2_INNER").is_some()
        || std::env::var_os("STOCKADE_TEST_PROC_INNER").is_some()
    {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}

#[test]
fn proc_fallback_in_a_nested_container() {
    require!(Feature::UserNs);
    if std::env::var_os("STOCKADE_TEST_PROC_INNER").is_some() {
        return;
    }
    // A mount over a file in /proc, as container runtimes make (/proc/kcore, /proc/kmsg):
    // the kernel then refuses a fresh procfs in any user namespace below.
    run_inner(
        "-Urm",
        "mount --bind /dev/null /proc/kmsg",
        "proc_fallback_inner",
        "STOCKADE_TEST_PROC_INNER",
    );
}

/// The inside half of `proc_fallback_in_a_nested_container`.
#[test]
fn proc_fallback_inner() {
    if std::env::var_os("STOCKADE_TEST_PROC_INNER").is_none() {
        return;
    }
    let caps = stockade::Capabilities::probe();
    assert!(caps.user_namespaces.available);
    assert!(!caps.fresh_proc.available);
    let ws = tempdir();
    let mut p = Policy::with_workspace(ws.path());
    p.fallback = stockade::Fallback::Refuse;
    let err = Sandbox::new(p.clone()).unwrap_err();
    assert!(err.to_string().contains("proc_fallback"), "{err}");
    // Degrading by default: layer 2.
    let mut degrade = p.clone();
    degrade.fallback = stockade::Fallback::Degrade;
    let sb = Sandbox::new(degrade).unwrap();
    assert_eq!(sb.layer(), Layer::Landlock);
    let d = sb.degradation().expect("degradation is data");
    assert_eq!((d.wanted, d.running), (Layer::Full, Layer::Landlock));
    assert!(d.reason.contains("fresh /proc"), "{}", d.reason);
    // Allowed by the policy: the full layer with the host's /proc, read-only.
    p.proc_fallback = true;
    let sb = Sandbox::new(p).unwrap();
    assert_eq!(sb.layer(), Layer::Full);
    let r = py_ok(
        &sb,
        &try_errno("open('/proc/sys/kernel/hostname', 'w').write('x')"),
    );
    assert_eq!(r.trim(), "EROFS");
    let r = py_ok(&sb, &try_errno("open('/proc/self/status').read()"));
    assert_eq!(r.trim(), "OK");
}

/// Runs the test `inner` of this binary in a new user namespace made by `unshare
/// unshare_flags`, after `setup` (a shell command) ran there, with `marker` set, and
/// asserts that it passed.
fn run_inner(unshare_flags: &str, setup: &str, inner: &str, marker: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = StdCommand::new("unshare")
        .args([unshare_flags, "sh", "-c"])
        .arg(format!(
            "{setup} && exec \"$0\" --exact {inner} --nocapture --test-threads 1"
        ))
        .arg(&exe)
        .env(marker, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}
