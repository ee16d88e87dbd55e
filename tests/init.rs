//! The sandbox's init: PID 1 of the full layer, child subreaper of layer 2.
//!
//! Each claim is shown from inside the sandbox (what the program sees) or from the host
//! (what is left after the run), on both layers where it applies, through the library and
//! through the CLI. Workspaces live in /var/tmp, outside the sandbox's private /tmp.
// Spawns through Linux-only paths (namespaces, pidfds, /proc).
#![cfg(target_os = "linux")]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command as StdCommand, ExitStatus, Stdio as StdStdio};
use std::time::{Duration, Instant};

use common::{Feature, host_processes_with, sandbox, sh, sh_ok};
use stockade::{Error, Layer, Sandbox, SpawnError, Stdio};

/// A workspace outside /tmp.
fn workspace() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-init-test-")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp")
}

/// The full layer and layer 2 over `ws`.
fn layers(ws: &Path) -> [(Layer, Sandbox); 2] {
    [
        (Layer::Full, sandbox(ws, |_| {})),
        (
            Layer::Landlock,
            sandbox(ws, |p| p.layer = Some(Layer::Landlock)),
        ),
    ]
}

fn layer_arg(layer: Layer) -> &'static str {
    match layer {
        Layer::Full => "full",
        Layer::Landlock => "landlock",
        _ => "passthrough",
    }
}

/// `stockade run --workspace ws --layer <layer> -- args…`, not started yet.
fn cli(ws: &Path, layer: Layer, args: &[&str]) -> StdCommand {
    let mut c = StdCommand::new(common::stockade_exe());
    c.arg("run")
        .arg("--workspace")
        .arg(ws)
        .args(["--layer", layer_arg(layer), "--fallback", "refuse", "--"])
        .args(args);
    c
}

/// A marker unique to this test run, to find processes on the host by command line.
fn marker(line: u32) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("1000.{}{line}{nanos}", std::process::id())
}

/// Waits until a host process carries `marker` (the daemon has started), up to 10 s.
fn wait_for_process(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while host_processes_with(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no process with {marker} started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `sh -c script` with its stdin piped, started.
fn sh_reading_stdin(sb: &Sandbox, script: &str) -> stockade::Child {
    sb.command("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads lines from `out` until one equals `want`.
fn wait_for_line(out: &mut impl BufRead, want: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "EOF before {want:?}");
        if line.trim() == want {
            return;
        }
    }
}

#[test]
fn a_program_that_kills_itself_dies_of_that_signal() {
    require!(Feature::UserNs);
    let ws = workspace();
    for (layer, sb) in layers(ws.path()) {
        let s = sh(&sb, "kill -9 $$").status;
        assert_eq!(s.signal(), Some(libc::SIGKILL), "{layer}: {s:?}");
        let s = sh(&sb, "kill -TERM $$").status;
        assert_eq!(s.signal(), Some(libc::SIGTERM), "{layer}: {s:?}");
        let code = |script: &str| {
            cli(ws.path(), layer, &["sh", "-c", script])
                .output()
                .unwrap()
                .status
                .code()
        };
        assert_eq!(code("kill -9 $$"), Some(137), "{layer}");
        assert_eq!(code("kill -TERM $$"), Some(143), "{layer}");
        assert_eq!(code("exit 3"), Some(3), "{layer}");
    }
}

/// A program that asks to be traced (`PTRACE_TRACEME`, allowed with `allow_ptrace`) makes
/// its parent, the init (or a session command's supervisor), its tracer, and its next
/// signal or `execve` a ptrace stop the init sees. The init lets it go on as if untraced:
/// the stop's signal is delivered (`SIGUSR1` ends it), a traced `execve`'s `SIGTRAP` is
/// not. It took each stop for the program's end: the library reported a status no ended
/// process has ("stopped by SIGUSR1") and the CLI "a malformed reply from the session".
#[test]
fn a_program_that_asks_its_init_to_trace_it_ends_as_it_would_untraced() {
    require!(Feature::UserNs);
    const TRACEME: &str = "import ctypes, os, signal, sys\n\
        assert ctypes.CDLL(None).ptrace(0, 0, 0, 0) == 0\n\
        if sys.argv[1] == 'signal': os.kill(os.getpid(), signal.SIGUSR1); os._exit(1)\n\
        os.execv('/bin/sh', ['sh', '-c', 'exit 7'])\n";
    let ws = workspace();
    for layer in [Layer::Full, Layer::Landlock] {
        let sb = common::sandbox_on(ws.path(), layer, |p| p.allow_ptrace = true);
        let session = sb.session().unwrap();
        for way in ["command", "session command"] {
            let command = |arg: &str| {
                let mut c = if way == "command" {
                    sb.command("python3")
                } else {
                    session.command("python3")
                };
                c.args(["-c", TRACEME, arg]);
                c
            };
            let s = command("signal").status().unwrap();
            assert_eq!(s.signal(), Some(libc::SIGUSR1), "{layer} {way}: {s:?}");
            assert_eq!(s.stopped_signal(), None, "{layer} {way}: {s:?}");
            let s = command("exec").status().unwrap();
            assert_eq!(s.code(), Some(7), "{layer} {way}: {s:?}");
        }
        let code = StdCommand::new(common::stockade_exe())
            .arg("run")
            .arg("--workspace")
            .arg(ws.path())
            .args([
                "--layer",
                layer_arg(layer),
                "--fallback",
                "refuse",
                "--allow-ptrace",
            ])
            .args(["--", "python3", "-c", TRACEME, "exec"])
            .output()
            .unwrap()
            .status
            .code();
        assert_eq!(code, Some(7), "{layer}: the CLI");
    }
}

#[test]
fn abort_is_sigabrt_with_the_core_flag_the_kernel_reports() {
    require!(Feature::UserNs);
    let ws = workspace();
    // Core dumps as far as the hard limit allows, so that the flag can be true.
    let rlimit = "import os, resource\nh = resource.getrlimit(resource.RLIMIT_CORE)[1]\nresource.setrlimit(resource.RLIMIT_CORE, (h, h))\n";
    for (layer, sb) in layers(ws.path()) {
        // What the kernel reports for an abort in the same place, to a parent that waits.
        let kernel = common::py_ok(
            &sb,
            &format!(
                "{rlimit}pid = os.fork()\nif pid == 0:\n    os.abort()\n_, st = os.waitpid(pid, 0)\nprint(os.WTERMSIG(st), int(os.WCOREDUMP(st)))"
            ),
        );
        let (sig, core) = kernel.trim().split_once(' ').unwrap();
        assert_eq!(sig, "6", "{layer}: {kernel}");
        let out = sb
            .command("python3")
            .arg("-c")
            .arg(format!("{rlimit}os.abort()"))
            .output()
            .unwrap();
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{layer}: {out:?}");
        assert_eq!(
            out.status.core_dumped(),
            core == "1",
            "{layer}: core flag differs from the kernel's"
        );
        let out = cli(
            ws.path(),
            layer,
            &["python3", "-c", "import os; os.abort()"],
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(134), "{layer}: {out:?}");
    }
}

#[test]
fn child_signal_ends_a_sleep_and_reaches_a_trap() {
    require!(Feature::UserNs);
    let ws = workspace();
    for (layer, sb) in layers(ws.path()) {
        let mut child = sb.command("sleep").arg("1000").spawn().unwrap();
        child.signal(libc::SIGTERM).unwrap();
        let s = child.wait().unwrap();
        assert_eq!(s.signal(), Some(libc::SIGTERM), "{layer}: {s:?}");

        for (sig, name, code) in [(libc::SIGTERM, "TERM", 42), (libc::SIGUSR1, "USR1", 43)] {
            let mut child = sb
                .command("sh")
                .arg("-c")
                .arg(format!(
                    "trap 'exit {code}' {name}; echo ready; sleep 1000 & wait"
                ))
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            wait_for_line(&mut out, "ready");
            child.signal(sig).unwrap();
            let s = child.wait().unwrap();
            assert_eq!(s.code(), Some(code), "{layer} {name}: {s:?}");
        }
    }
}

#[test]
fn child_signal_refuses_what_the_init_does_not_forward() {
    require!(Feature::UserNs);
    let ws = workspace();
    let sb = sandbox(ws.path(), |_| {});
    let mut child = sb.command("sleep").arg("1000").spawn().unwrap();
    // (SIGSTOP, SIGTSTP and SIGCONT go to the program's group: tests/lifetime.rs.)
    for sig in [libc::SIGTTIN, libc::SIGSEGV, 0, 65] {
        let e = child.signal(sig).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{sig}");
    }
    // SIGKILL ends the sandbox, as kill() does.
    child.signal(libc::SIGKILL).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    // A reaped sandbox takes any signal quietly.
    child.signal(libc::SIGTERM).unwrap();
}

/// Starts `stockade run` with `script`, waits for its `ready`, sends `sig` to the CLI.
fn cli_signalled(ws: &Path, layer: Layer, script: &str, sig: libc::c_int) -> ExitStatus {
    let mut c = cli(ws, layer, &["sh", "-c", script])
        .stdout(StdStdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    wait_for_line(&mut out, "ready");
    // SAFETY: `c` is our unreaped child, so its pid names it.
    assert_eq!(unsafe { libc::kill(c.id() as libc::pid_t, sig) }, 0);
    c.wait().unwrap()
}

#[test]
fn signals_sent_to_stockade_run_reach_the_program() {
    require!(Feature::UserNs);
    let ws = workspace();
    for layer in [Layer::Full, Layer::Landlock] {
        let s = cli_signalled(
            ws.path(),
            layer,
            "echo ready; exec sleep 1000",
            libc::SIGTERM,
        );
        assert_eq!(s.code(), Some(143), "{layer}: {s:?}");
        let s = cli_signalled(
            ws.path(),
            layer,
            "trap 'exit 42' TERM; echo ready; sleep 1000 & wait",
            libc::SIGTERM,
        );
        assert_eq!(s.code(), Some(42), "{layer}: {s:?}");
        let s = cli_signalled(
            ws.path(),
            layer,
            "echo ready; exec sleep 1000",
            libc::SIGINT,
        );
        assert_eq!(s.code(), Some(130), "{layer}: {s:?}");
        let s = cli_signalled(
            ws.path(),
            layer,
            "trap 'exit 44' HUP; echo ready; sleep 1000 & wait",
            libc::SIGHUP,
        );
        assert_eq!(s.code(), Some(44), "{layer}: {s:?}");
    }
}

/// `^C` typed on the terminal of `stockade run` reaches the program exactly once: through
/// the CLI and the init when the program has a session of its own, directly (and only
/// directly) with `--keep-session`, where the kernel signals the whole foreground process
/// group, the CLI and the init included.
#[test]
fn a_terminal_interrupt_reaches_the_program_once() {
    require!(Feature::UserNs);
    let ws = workspace();
    // The host side: a pseudo-terminal whose foreground job is `stockade run`.
    let driver = r#"
import os, pty, sys, time
argv = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out = b""
def read_until(token, limit=20):
    global out
    deadline = time.time() + limit
    while token not in out:
        if time.time() > deadline:
            sys.exit("timed out waiting for %r in %r" % (token, out))
        try:
            out += os.read(fd, 1024)
        except OSError:
            break
read_until(b"ready")
os.write(fd, b"\x03")
read_until(b"done")
_, status = os.waitpid(pid, 0)
print(out.decode(errors="replace").replace(chr(13), ""))
print("status", os.waitstatus_to_exitcode(status))
"#;
    // The program counts every SIGINT it receives for a second (blocked and dequeued one
    // by one, so that a second delivery is seen unless it coincides with the first).
    let program = "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\nprint('ready', flush=True)\nn = 0\nend = time.time() + 1\nwhile time.time() < end:\n    if signal.sigtimedwait({signal.SIGINT}, 0.05):\n        n += 1\nprint('INTS', n)\nprint('done', flush=True)";
    for layer in [Layer::Full, Layer::Landlock] {
        for keep in [false, true] {
            let mut args = vec![
                common::stockade_exe().display().to_string(),
                "run".into(),
                "--workspace".into(),
                ws.path().display().to_string(),
                "--layer".into(),
                layer_arg(layer).into(),
                "--fallback".into(),
                "refuse".into(),
            ];
            if keep {
                args.push("--keep-session".into());
            }
            args.extend(["--".into(), "python3".into(), "-c".into(), program.into()]);
            let out = StdCommand::new("/usr/bin/python3")
                .arg("-c")
                .arg(driver)
                .args(&args)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{layer} keep={keep}: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(text.contains("INTS 1\n"), "{layer} keep={keep}: {text}");
            assert!(text.contains("status 0"), "{layer} keep={keep}: {text}");
        }
    }
}

#[test]
fn a_hundred_orphans_are_adopted_by_the_init_and_reaped() {
    require!(Feature::UserNs);
    let ws = workspace();
    // Each grandchild outlives its parent, so it is re-parented; it reports its pid and
    // its new parent, then exits. Python reaps only its own children, so a grandchild
    // whose /proc entry stays (a zombie) is one whoever adopted it did not reap. (Its
    // report arrives before it is a zombie, so the pids are watched until they are gone,
    // not counted once: a count taken at one instant missed the last one's exit.)
    let script = r#"
import os, time
init = os.getppid()
r, w = os.pipe()
for _ in range(100):
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            time.sleep(0.05)
            os.write(w, b"%d %d\n" % (os.getpid(), os.getppid()))
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
os.close(w)
lines = [l.split() for l in open(r).read().splitlines()]
assert len(lines) == 100, lines
assert {p for _, p in lines} == {str(init)}, (init, lines)
def left():
    return [p for p, _ in lines if os.path.exists('/proc/' + p)]
deadline = time.time() + 5
while left() and time.time() < deadline:
    time.sleep(0.05)
print(len(left()))
"#;
    for (layer, sb) in layers(ws.path()) {
        let out = common::py_ok(&sb, script);
        assert_eq!(out.trim(), "0", "{layer}: zombies left");
    }
}

/// `wait` returns at the init's status record, before the init's own exit: by then every
/// process the program left behind must be dead and reaped, or it could still act on the
/// host after `wait` (the kernel would kill it only once the init's exit gets there). A
/// pidfd on a background process, taken while it runs, must be readable (exited) the
/// moment `wait` returns.
#[test]
fn nothing_the_program_started_is_alive_when_wait_returns() {
    require!(Feature::UserNs);
    let ws = workspace();
    for (layer, sb) in layers(ws.path()) {
        let m = marker(line!());
        let mut child = sh_reading_stdin(&sb, &format!("sleep {m} & read x; exit 3"));
        // The sleep, not the shell whose command line holds the marker too.
        let sleep = |cmd: &str| cmd.starts_with("sleep ") && cmd.contains(&m);
        let deadline = Instant::now() + Duration::from_secs(10);
        let pids = loop {
            let pids = common::host_processes(sleep);
            if !pids.is_empty() || Instant::now() > deadline {
                break pids;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(pids.len(), 1, "{layer}: {pids:?}");
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pids[0], 0) };
        assert!(raw >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: pidfd_open returned a new fd that nothing else owns.
        let pidfd =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw as i32) };
        drop(child.stdin.take());
        assert_eq!(child.wait().unwrap().code(), Some(3), "{layer}");
        let mut pfd = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&pidfd),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        assert_eq!(n, 1, "{layer}: the background process outlived wait()");
    }
}

#[test]
fn a_double_forked_daemon_does_not_survive_the_run() {
    require!(Feature::UserNs);
    let ws = workspace();
    for (layer, sb) in layers(ws.path()) {
        // The program detaches a daemon (new session, re-parented), then exits when told.
        let m = marker(line!());
        let mut child = sh_reading_stdin(&sb, &format!("(setsid sleep {m} &); read x; exit 0"));
        wait_for_process(&m);
        drop(child.stdin.take());
        assert_eq!(child.wait().unwrap().code(), Some(0), "{layer}");
        assert_eq!(
            host_processes_with(&m),
            Vec::<u32>::new(),
            "{layer}: the daemon outlived the run"
        );

        // Child::kill ends the daemon too, not only the program.
        let m = marker(line!());
        let mut child = sb
            .command("sh")
            .arg("-c")
            .arg(format!("(setsid sleep {m} &); exec sleep 1000"))
            .spawn()
            .unwrap();
        wait_for_process(&m);
        child.kill().unwrap();
        assert_eq!(
            child.wait().unwrap().signal(),
            Some(libc::SIGKILL),
            "{layer}"
        );
        assert_eq!(
            host_processes_with(&m),
            Vec::<u32>::new(),
            "{layer}: the daemon outlived kill()"
        );

        // Through the CLI.
        let m = marker(line!());
        let script = format!("(setsid sleep {m} &); sleep 0.3");
        let out = cli(ws.path(), layer, &["sh", "-c", &script])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{layer}: {out:?}");
        assert_eq!(
            host_processes_with(&m),
            Vec::<u32>::new(),
            "{layer}: the daemon outlived stockade run"
        );
    }
}

/// Runs `stockade` (a `cli` command) in a private mount namespace after the shell commands
/// `setup` (root only: `unshare -m`), with `$VICTIM` set to `victim`, stdin an empty pipe
/// (a root host's own `/dev/null` for the program would be reopened through `/proc`).
fn in_private_mount_ns(
    setup: &str,
    stockade: &StdCommand,
    victim: Option<&Path>,
) -> std::process::Output {
    let mut run = StdCommand::new("unshare");
    run.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!("{setup} && exec \"$@\""))
        .arg("sh")
        .arg(stockade.get_program())
        .args(stockade.get_args())
        .stdin(StdStdio::piped())
        .stdout(StdStdio::piped())
        .stderr(StdStdio::piped());
    if let Some(v) = victim {
        run.env("VICTIM", v);
    }
    let mut run = run.spawn().unwrap();
    drop(run.stdin.take());
    run.wait_with_output().unwrap()
}

/// A host without `/proc` (a minimal container image): layer 2's init cannot read its list
/// of children, and ends what the program left running with a `kill(-1)` that Landlock's
/// signal scope confines to the command's own processes. The run happens in a private
/// mount namespace whose `/proc` is an empty tmpfs; the host's processes around it (this
/// test among them, same uid) must survive, the daemon must not.
#[test]
fn root_only_layer_2_ends_a_daemon_on_a_host_without_proc() {
    require!(Feature::Root);
    let ws = workspace();
    let m = marker(line!());
    // Stdin a pipe: a root host's own /dev/null for the program is opened through /proc.
    // The daemon holds none of the run's pipes, so a surviving one fails the test instead
    // of keeping its output open.
    let script = format!("(setsid sleep {m} </dev/null >/dev/null 2>&1 &); sleep 0.3; echo ran");
    // A host process of the same uid, outside every Landlock domain.
    let mut witness = StdCommand::new("sleep").arg("100").spawn().unwrap();
    let stockade = cli(ws.path(), Layer::Landlock, &["sh", "-c", &script]);
    let out = in_private_mount_ns("mount -t tmpfs none /proc", &stockade, None);
    assert!(out.status.success() && out.stdout == b"ran\n", "{out:?}");
    let left = host_processes_with(&m);
    for pid in &left {
        // SAFETY: kill takes two integers; the pid is the daemon's, found by its marker.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    assert_eq!(left, Vec::<u32>::new(), "the daemon outlived the run");
    // Everything else of the host lives on: the kill stayed in the command's domain.
    assert_eq!(
        witness.try_wait().unwrap(),
        None,
        "the host's own sleep was killed"
    );
    witness.kill().unwrap();
    witness.wait().unwrap();
}

/// Layer 2 grants the program its device nodes by path: a `/dev/tty` that is a symlink to
/// a host file (a host whose `/dev` is not what it should be) must not grant that file.
/// The run happens in a private mount namespace with a `/dev` of three real nodes and such
/// a symlink; the program appends to the file by its own path, which no rule grants.
#[test]
fn root_only_layer_2_grants_no_file_through_a_symlink_at_a_device_name() {
    require!(Feature::Root);
    let ws = workspace();
    let outside = workspace();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "orig\n").unwrap();
    let script = format!("echo INJECTED >> {}", victim.display());
    let stockade = cli(ws.path(), Layer::Landlock, &["sh", "-c", &script]);
    let setup = r#"d=$(mktemp -d /var/tmp/stockade-dev-XXXXXX) && mount -t tmpfs none "$d" &&
for n in null zero urandom; do touch "$d/$n" && mount --bind /dev/$n "$d/$n"; done &&
ln -s "$VICTIM" "$d/tty" && mount --move "$d" /dev && rmdir "$d""#;
    let out = in_private_mount_ns(setup, &stockade, Some(&victim));
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "orig\n",
        "{out:?}"
    );
    assert_ne!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn a_layer_2_sandbox_ends_with_its_host_daemons_included() {
    require!(Feature::UserNs);
    let m = marker(line!());
    // The workspace belongs to this test, which outlives the helper (which exits at once,
    // without running destructors); so does its temporary directory, where the command's
    // TMPDIR, which its exit leaves behind, is made.
    let ws = workspace();
    let tmp = workspace();
    let out = StdCommand::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_spawn_a_daemon_and_exit", "--nocapture"])
        .env("STOCKADE_TEST_HELPER_MARKER", &m)
        .env("STOCKADE_TEST_HELPER_WORKSPACE", ws.path())
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !host_processes_with(&m).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        host_processes_with(&m),
        Vec::<u32>::new(),
        "the daemon outlived its host"
    );
}

/// Not a test of its own: the host of `a_layer_2_sandbox_ends_with_its_host_daemons_included`.
#[test]
fn helper_spawn_a_daemon_and_exit() {
    let (Ok(m), Some(ws)) = (
        std::env::var("STOCKADE_TEST_HELPER_MARKER"),
        std::env::var_os("STOCKADE_TEST_HELPER_WORKSPACE"),
    ) else {
        return;
    };
    let sb = sandbox(Path::new(&ws), |p| p.layer = Some(Layer::Landlock));
    let _child = sb
        .command("sh")
        .arg("-c")
        .arg(format!("(setsid sleep {m} &); exec sleep {m}"))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while host_processes_with(&m).len() < 2 {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::process::exit(0);
}

#[test]
fn ps_inside_shows_the_init_as_pid_1_and_the_program_as_its_child() {
    require!(Feature::UserNs);
    let ws = workspace();
    let sb = sandbox(ws.path(), |_| {});
    let out = sh_ok(&sb, "echo $$; ps -eo pid=,ppid=,comm=");
    let mut lines = out.lines();
    let me = lines.next().unwrap().trim().to_string();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert!(
        rows.contains(&vec!["1", "0", "stockade-init"]),
        "PID 1 is not the init:\n{out}"
    );
    assert!(
        rows.contains(&vec![me.as_str(), "1", "sh"]),
        "the program is not the init's child:\n{out}"
    );
    // Nothing else but the program's own processes: the init started nothing of its own.
    assert!(
        rows.iter().all(|r| r[0] == "1" || r[0] == me || r[1] == me),
        "{out}"
    );
    // The program leads a session of its own (keep_session unset).
    let stat = sh_ok(&sb, "cat /proc/self/stat; echo; echo $$");
    let (stat, pid) = stat.trim().rsplit_once('\n').unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(fields[3], pid.trim(), "session id: {stat}");
}

#[test]
fn the_init_maps_no_host_memory() {
    require!(Feature::UserNs);
    let ws = workspace();
    let sb = sandbox(ws.path(), |_| {});
    let mut child = sb
        .command("sh")
        .arg("-c")
        .arg("cat /proc/1/maps; echo rc=$?; readlink /proc/1/exe; echo rc=$?; read x; exit 0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // From the host, which owns the sandbox's user namespace: every mapping of PID 1.
    let init = child.id();
    let maps = std::fs::read_to_string(format!("/proc/{init}/maps")).unwrap();
    let exe = std::fs::read_link(format!("/proc/{init}/exe")).unwrap();
    drop(child.stdin.take());
    let mut inside = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut inside).unwrap();
    assert!(child.wait().unwrap().success());

    assert!(
        exe.to_string_lossy().starts_with("/memfd:stockade-init"),
        "{exe:?}"
    );
    let host_exe = std::env::current_exe().unwrap();
    let host_name = host_exe.file_name().unwrap().to_string_lossy();
    for line in maps.lines() {
        let path = line.split_whitespace().nth(5).unwrap_or("");
        assert!(
            path.is_empty()
                || path.starts_with("/memfd:stockade-init")
                || ["[stack]", "[vvar]", "[vvar_vclock]", "[vdso]", "[vsyscall]"].contains(&path),
            "unexpected mapping in the init: {line}\n{maps}"
        );
        assert!(!line.contains(&*host_name), "host binary mapped: {line}");
    }
    assert!(maps.lines().count() < 16, "{maps}");
    // From inside, the init is closed: non-dumpable, so neither its maps nor its exe link.
    assert_eq!(inside.matches("rc=1").count(), 2, "{inside}");
}

/// The init is exec'd with the program's arguments and environment (its fork execs the
/// program with them) and clears its own copies once that fork exists: for as long as
/// the sandbox lives, its memory holds no `secret_env` value and its command line is its
/// name alone. Read from the host, which owns the sandbox's user namespace and so may
/// read the non-dumpable init's files, once the spawn has returned (the init clears both
/// before it closes the report pipe the spawn waits on). Returns the init's command line
/// and, as root, its environment (a non-dumpable process's `environ` belongs to root).
fn init_strings_while_running(root: bool) -> (Vec<u8>, Option<Vec<u8>>) {
    let ws = workspace();
    let sb = sandbox(ws.path(), |_| {});
    let mut child = sb
        .command("sh")
        .arg("-c")
        .arg("read x; exit 0")
        .arg("an-argument-for-the-program-alone")
        .env("STOCKADE_TEST_PLAIN", "a-plain-value-for-the-program")
        .secret_env("STOCKADE_TEST_SECRET", "a-secret-value-for-the-program")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let init = child.id();
    let cmdline = std::fs::read(format!("/proc/{init}/cmdline")).unwrap();
    let environ = root.then(|| std::fs::read(format!("/proc/{init}/environ")).unwrap());
    let comm = std::fs::read_to_string(format!("/proc/{init}/comm")).unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert_eq!(comm.trim_end(), "stockade-init");
    (cmdline, environ)
}

fn shown(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace('\0', " ")
}

#[test]
fn the_init_keeps_no_copy_of_the_programs_arguments() {
    require!(Feature::UserNs);
    let (cmdline, _) = init_strings_while_running(false);
    assert!(
        cmdline.starts_with(b"stockade-init\0") && cmdline[14..].iter().all(|&b| b == 0),
        "the init's command line: {}",
        shown(&cmdline)
    );
}

#[test]
fn the_init_keeps_no_copy_of_the_programs_environment() {
    require!(Feature::UserNs);
    require!(Feature::Root);
    let (_, environ) = init_strings_while_running(true);
    let environ = environ.unwrap();
    assert!(
        !environ.is_empty() && environ.iter().all(|&b| b == 0),
        "the init's environment: {}",
        shown(&environ)
    );
}

#[test]
fn the_init_is_under_the_programs_walls() {
    require!(Feature::UserNs);
    let ws = workspace();
    let fields = "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters):'";
    for (layer, sb) in layers(ws.path()) {
        let init = if layer == Layer::Full { "1" } else { "$PPID" };
        let out = sh_ok(
            &sb,
            &format!(
                "{fields} /proc/{init}/status; echo --; {fields} /proc/self/status; echo --; \
                 grep -E '^Name:' /proc/{init}/status; \
                 kill -0 {init} 2>/dev/null; echo signal-init=$?; \
                 touch /usr/stockade-x 2>/dev/null; echo write-usr=$?; \
                 touch ok; echo write-ws=$?"
            ),
        );
        let parts: Vec<&str> = out.split("--\n").collect();
        assert_eq!(parts.len(), 3, "{out}");
        // The init's seccomp, no_new_privs and capability lines equal the program's.
        assert_eq!(
            parts[0], parts[1],
            "{layer}: init and program differ:\n{out}"
        );
        for line in parts[0].lines() {
            let (k, v) = line.split_once(':').unwrap();
            let want = match k {
                "NoNewPrivs" => "1",
                "Seccomp" => "2",
                "Seccomp_filters" => "1",
                // Without a user namespace only a privileged host may drop the bounding
                // set; an unprivileged one keeps its own (with no capability to use).
                "CapBnd" if layer == Layer::Landlock && !nix::unistd::geteuid().is_root() => {
                    continue;
                }
                _ => "0000000000000000",
            };
            assert_eq!(v.trim(), want, "{layer}: {k}\n{out}");
        }
        assert!(parts[2].contains("stockade-init"), "{layer}: {out}");
        // Landlock scopes signals to the domain: on the full layer the program may signal
        // PID 1, which is therefore inside its domain; on layer 2 the program runs in a
        // nested domain and may not signal the init at all.
        let signal = if layer == Layer::Full { "0" } else { "1" };
        assert!(
            parts[2].contains(&format!("signal-init={signal}")),
            "{layer}: {out}"
        );
        assert!(parts[2].contains("write-usr=1"), "{layer}: {out}");
        assert!(parts[2].contains("write-ws=0"), "{layer}: {out}");
    }
}

#[test]
fn failures_to_start_the_program_stay_typed() {
    require!(Feature::UserNs);
    let ws = workspace();
    // A file without execute permission: EACCES.
    let not_exec = ws.path().join("not-executable");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    for (layer, sb) in layers(ws.path()) {
        let err = sb.command("stockade-no-such-program").spawn().unwrap_err();
        assert!(
            matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
            "{layer}: {err}"
        );
        let err = sb.command(&not_exec).spawn().unwrap_err();
        match &err {
            Error::Spawn(SpawnError::Setup { step, errno }) => {
                let program = not_exec.display().to_string();
                assert_eq!(*step, stockade::SetupStep::Exec { program }, "{layer}");
                assert_eq!(*errno, stockade::error::Errno::EACCES, "{layer}");
            }
            other => panic!("{layer}: {other}"),
        }
        let code = |args: &[&str]| cli(ws.path(), layer, args).output().unwrap().status.code();
        assert_eq!(code(&["stockade-no-such-program"]), Some(127), "{layer}");
        assert_eq!(code(&[not_exec.to_str().unwrap()]), Some(126), "{layer}");
    }
}

/// A `Child` dropped unreaped (std allows it) must not take the layer-2 program's private
/// `TMPDIR` with it: the program still runs and writes there. The directory goes once the
/// program has ended.
#[test]
fn a_dropped_layer_2_child_keeps_its_tmpdir_until_the_program_ends() {
    use nix::sys::wait::{Id, WaitPidFlag, waitid, waitpid};
    let ws = workspace();
    let sb = sandbox(ws.path(), |p| p.layer = Some(Layer::Landlock));
    let out_path = ws.path().join("out");
    let out = std::fs::File::create(&out_path).unwrap();
    let child = sb
        .command("sh")
        .arg("-c")
        .arg(r#"echo "$TMPDIR"; sleep 0.5; echo x > "$TMPDIR/f" && cat "$TMPDIR/f""#)
        .stdout(Stdio::from(out))
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    drop(child);
    // Wait for the sandbox's end without reaping it (the Child is gone; its pid is still
    // ours until reaped).
    let status = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT).unwrap();
    let written = std::fs::read_to_string(&out_path).unwrap();
    let (tmpdir, rest) = written.split_once('\n').unwrap();
    assert!(tmpdir.contains("stockade-tmp-"), "{written}");
    assert_eq!(rest, "x\n", "the program lost its TMPDIR: {written}");
    assert!(
        matches!(status, nix::sys::wait::WaitStatus::Exited(_, 0)),
        "{status:?}: {written}"
    );
    // The directory goes once the program has ended.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Path::new(tmpdir).exists() {
        assert!(Instant::now() < deadline, "{tmpdir} left behind");
        std::thread::sleep(Duration::from_millis(10));
    }
    waitpid(pid, None).unwrap();
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
