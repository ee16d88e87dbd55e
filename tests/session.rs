//! Warm sessions: many commands in one live sandbox ([`stockade::Session`]).
//!
//! Every isolation claim is shown from inside: a command tries the escape against another
//! command (or the session's init) and the test asserts the errno, and that the allowed
//! thing (the shared workspace, the shared /tmp) still works. Both layers, as root and as
//! uid 65534 (`session_as_nobody`).
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use common::{LAYERS, sandbox_on};

use stockade::{Layer, Session, Stdio};

/// A workspace outside /tmp.
fn workspace() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-session-test-")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp")
}

/// A session on `layer` over `ws`, or `None` (after a SKIP line) when this host cannot
/// run one (no Landlock scopes).
fn session(ws: &Path, layer: Layer, f: impl FnOnce(&mut stockade::Policy)) -> Option<Session> {
    let sb = sandbox_on(ws, layer, f);
    match sb.session() {
        Ok(s) => Some(s),
        Err(stockade::Error::Spawn(e)) if e.errno().map(|e| e as i32) == Some(libc::EOPNOTSUPP) => {
            common::skip("session", &format!("{layer:?}: {e}"));
            None
        }
        Err(e) => panic!("{layer:?}: session: {e}"),
    }
}

fn sh(s: &Session, script: &str) -> std::process::Output {
    s.command("sh").args(["-c", script]).output().unwrap()
}

fn sh_ok(s: &Session, script: &str) -> String {
    let out = sh(s, script);
    assert!(
        out.status.success(),
        "{script}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn commands_share_the_workspace_and_tmp() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        sh_ok(&s, "echo one > w.txt; echo two > \"${TMPDIR:-/tmp}/t.txt\"");
        let out = sh_ok(&s, "cat w.txt \"${TMPDIR:-/tmp}/t.txt\"");
        assert_eq!(out, "one\ntwo\n", "{layer:?}");
        assert_eq!(
            std::fs::read_to_string(ws.path().join("w.txt")).unwrap(),
            "one\n"
        );
        s.close().unwrap();
    }
}

#[test]
fn exit_statuses_are_exact() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        for code in [0, 1, 7, 255] {
            let st = s
                .command("sh")
                .args(["-c", &format!("exit {code}")])
                .status()
                .unwrap();
            assert_eq!(st.code(), Some(code), "{layer:?}");
        }
        for sig in [libc::SIGTERM, libc::SIGKILL, libc::SIGSEGV] {
            let st = sh(&s, &format!("kill -{sig} $$")).status;
            assert_eq!(st.signal(), Some(sig), "{layer:?}: {st:?}");
        }
        let st = sh(&s, "kill -ABRT $$").status;
        assert_eq!(st.signal(), Some(libc::SIGABRT), "{layer:?}");
        let e = s.command("no-such-program-here").status().unwrap_err();
        assert!(
            matches!(
                e,
                stockade::Error::Spawn(stockade::SpawnError::NotFound { .. })
            ),
            "{e}"
        );
        let e = s.command("true").current_dir("nope").status().unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        // The session still serves.
        assert!(s.command("true").status().unwrap().success());
    }
}

/// What a command (B) can do to the process `pid`: `kill -0`, read its command line, open
/// its environ and mem, read its fds' links, `PTRACE_ATTACH`; each `ok` or the errno's
/// name. Then the same against B's supervisor, the session's server and the init, every
/// other process the server started and their children (A's supervisor and A, and the
/// next commands' supervisors and program's processes, waiting forked for a request that
/// may carry secrets), and against B's own child.
///
/// On layer 2 (the host's `/proc`) the others are found through `/proc`; on the full
/// layer the session's `/proc` hides them (`hidepid=ptraceable`), so they are found by
/// signalling every pid of the session's PID namespace (`kill -0`: `EPERM`, not `ESRCH`),
/// and the probe prints the pids its `/proc` lists (`listing`), then its own and its
/// child's.
const PROBE: &str = r#"
import ctypes, errno, os, subprocess, sys
def attempt(out, name, f):
    try:
        f()
        out.append(name + ":ok")
    except OSError as e:
        out.append(name + ":" + errno.errorcode[e.errno])
def tries(pid):
    out = []
    attempt(out, "kill", lambda: os.kill(pid, 0))
    attempt(out, "cmdline", lambda: open("/proc/%d/cmdline" % pid, "rb").read())
    attempt(out, "environ", lambda: open("/proc/%d/environ" % pid, "rb").read())
    attempt(out, "mem", lambda: open("/proc/%d/mem" % pid, "rb"))
    # The fd numbers may be listed (the directory is the owner's); what they are may not.
    # An fd that closes between the listing and its readlink (its own child's, at its
    # exec) is gone, not refused: skipped.
    def links():
        for n in os.listdir("/proc/%d/fd" % pid):
            try:
                os.readlink("/proc/%d/fd/%s" % (pid, n))
            except FileNotFoundError:
                pass
    attempt(out, "fd", links)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, 0, 0) == 0:
        out.append("ptrace:ok")
        os.waitpid(pid, 0x40000000)
        libc.ptrace(17, pid, 0, 0)
    else:
        out.append("ptrace:" + errno.errorcode[ctypes.get_errno()])
    return " ".join(out) + " " + sched(pid)
# What a command can change of the process `pid` (0: itself): its limits, its nice value,
# its CPU affinity, its I/O priority (each set to what the caller has: a no-op where allowed).
def sched(pid):
    out = []
    import resource
    attempt(out, "prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE, resource.getrlimit(resource.RLIMIT_FSIZE)))
    attempt(out, "nice", lambda: os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0)))
    attempt(out, "affinity", lambda: os.sched_setaffinity(pid, os.sched_getaffinity(0)))
    libc = ctypes.CDLL(None, use_errno=True)
    def ioprio():
        if libc.syscall(251, 1, pid, (2 << 13) | 4) != 0:
            raise OSError(ctypes.get_errno(), "ioprio_set")
    attempt(out, "ioprio", ioprio)
    def shm():
        if libc.shmget(0, 4096, 0o1600) < 0:
            raise OSError(ctypes.get_errno(), "shmget")
    if pid == 0:
        attempt(out, "shmget", shm)
    return " ".join(out)
def ppid(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("PPid:"):
            return int(line.split()[1])
def exists(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
a = int(sys.argv[1])
sup = os.getppid()
targets = [("a", a), ("supervisor", sup)]
if sys.argv[2] == "full":
    targets.append(("init", 1))
    named = {a, sup, 1, os.getpid()}
    targets += [("other", p) for p in range(2, 5000) if p not in named and exists(p)]
else:
    server = ppid(sup)
    targets += [("server", server), ("init", ppid(server))]
    def children(of):
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    if ppid(int(d)) == of:
                        out.append(int(d))
                except OSError:
                    pass
        return out
    for s in children(server):
        if s != sup:
            targets += [("other", s)] + [("other", p) for p in children(s)]
for name, pid in targets:
    print(name, tries(pid))
# The allowed thing: its own child.
child = subprocess.Popen(["sleep", "30"])
listed = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
print("listing", " ".join(map(str, listed)), "self", os.getpid(), "child", child.pid)
print("own", tries(child.pid))
print("self", sched(0))
child.kill()
"#;

#[test]
fn a_command_cannot_reach_another_command_nor_the_session() {
    for layer in LAYERS {
        // The full layer's `/proc` shows a command only its own processes; layer 2's, the
        // host's, shows every process and its command line (not its environment).
        // Nor change another's limits, scheduling or I/O priority: the commands share a
        // PID namespace (the full layer's, or the host's) and a uid, which is all the
        // kernel checks for those (a command once set another's `RLIMIT_FSIZE` to 0).
        let denied = if layer == Layer::Full {
            "kill:EPERM cmdline:ENOENT environ:ENOENT mem:ENOENT fd:ENOENT ptrace:EPERM \
             prlimit:EPERM nice:EPERM affinity:EPERM ioprio:EPERM"
        } else {
            "kill:EPERM cmdline:ok environ:EACCES mem:EACCES fd:EACCES ptrace:EPERM \
             prlimit:EPERM nice:EPERM affinity:EPERM ioprio:EPERM"
        };
        let ws = workspace();
        // ptrace allowed by the filter: Landlock alone must keep the commands apart.
        let Some(s) = session(ws.path(), layer, |p| p.allow_ptrace = true) else {
            continue;
        };
        let mut a = s
            .command("sh")
            .args(["-c", "echo $$ > a.pid; exec sleep 60"])
            .secret_env("SESSION_SECRET", "hunter2-session-secret")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid_file = ws.path().join("a.pid");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let pid = loop {
            if let Some(p) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
            {
                break p;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{layer:?}: A never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let out = s
            .command("python3")
            .args([
                "-c",
                PROBE,
                &pid.to_string(),
                &format!("{layer:?}").to_lowercase(),
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{layer:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let named: &[&str] = if layer == Layer::Full {
            &["a", "supervisor", "init"]
        } else {
            &["a", "supervisor", "server", "init"]
        };
        for who in named {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{who} ")))
                .unwrap();
            assert_eq!(line, format!("{who} {denied}"), "{layer:?}:\n{text}");
        }
        // Layer 2: A's supervisor and A, and at least one command waiting forked ahead
        // (its supervisor and its program's process). The full layer: those and the
        // server.
        let others: Vec<&str> = text.lines().filter(|l| l.starts_with("other ")).collect();
        assert!(others.len() >= 4, "{layer:?}:\n{text}");
        for line in others {
            assert_eq!(line, format!("other {denied}"), "{layer:?}:\n{text}");
        }
        // What the command's `/proc` lists: on the full layer itself and its child, no
        // more; on layer 2 every process, A included.
        let listing: Vec<&str> = text
            .lines()
            .find_map(|l| l.strip_prefix("listing "))
            .unwrap()
            .split(' ')
            .collect();
        let (listed, own) = listing.split_at(listing.len() - 4);
        let (me, child) = (own[1], own[3]);
        if layer == Layer::Full {
            let mut mine = vec![me.parse::<u32>().unwrap(), child.parse().unwrap()];
            mine.sort_unstable();
            let listed: Vec<u32> = listed.iter().map(|p| p.parse().unwrap()).collect();
            assert_eq!(listed, mine, "{layer:?}:\n{text}");
        } else {
            assert!(
                listed.contains(&pid.to_string().as_str()),
                "{layer:?}:\n{text}"
            );
        }
        let own = text.lines().find(|l| l.starts_with("own ")).unwrap();
        // Its own child, by pid: the filter cannot know a command's pids, so the calls
        // that change another process name the caller alone (pid 0), as on layer 2.
        assert_eq!(
            own,
            "own kill:ok cmdline:ok environ:ok mem:ok fd:ok ptrace:ok \
             prlimit:EPERM nice:EPERM affinity:EPERM ioprio:EPERM",
            "{layer:?}"
        );
        // Itself: allowed; no SysV IPC object, which every command could reach.
        let me = text.lines().find(|l| l.starts_with("self ")).unwrap();
        assert_eq!(
            me, "self prlimit:ok nice:ok affinity:ok ioprio:ok shmget:EPERM",
            "{layer:?}"
        );
        // A's secret is in A alone.
        let env = sh_ok(&s, "env");
        assert!(
            !env.contains("hunter2") && !env.contains("SESSION_SECRET"),
            "{layer:?}"
        );
        a.kill().unwrap();
        assert_eq!(a.wait().unwrap().signal(), Some(libc::SIGKILL), "{layer:?}");
        s.close().unwrap();
    }
}

#[test]
fn background_processes_end_with_their_command() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        // A plain background job and a double-forked, setsid daemon.
        sh_ok(
            &s,
            "sleep 1000 & echo $! > bg.pid; setsid sh -c 'sleep 1000 & echo $! > daemon.pid' \
             </dev/null >/dev/null 2>&1 & wait $!; while [ ! -s daemon.pid ]; do :; done",
        );
        for f in ["bg.pid", "daemon.pid"] {
            let pid = std::fs::read_to_string(ws.path().join(f)).unwrap();
            // Gone (ESRCH), not merely out of reach (EPERM).
            let out = sh(&s, &format!("kill -0 {} 2>&1", pid.trim()));
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(!out.status.success(), "{layer:?}: {f} still runs");
            assert!(text.contains("No such process"), "{layer:?}: {f}: {text}");
        }
        s.close().unwrap();
    }
}

#[test]
fn kept_background_processes_live_until_close() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        let marker = format!("stockade-session-keep-{}-{layer:?}", std::process::id());
        // The program ends at once; its job and a double-forked, setsid daemon stay.
        let script = format!(
            "(exec -a {marker} sleep 1000) </dev/null >/dev/null 2>&1 & echo $! > bg.pid; \
             setsid bash -c '(exec -a {marker} sleep 1000) & echo $! > daemon.pid' \
             </dev/null >/dev/null 2>&1 & wait $!; while [ ! -s daemon.pid ]; do :; done; exit 3"
        );
        let status = s
            .command("bash")
            .args(["-c", &script])
            .keep_background(true)
            .status()
            .unwrap();
        // The status is the program's, when the program ends.
        assert_eq!(status.code(), Some(3), "{layer:?}");
        // Both live on. (Looked for a while: a process in the middle of its `exec`
        // shows an empty command line for an instant.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while common::host_processes_with(&marker).len() != 2
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(common::host_processes_with(&marker).len(), 2, "{layer:?}");
        // Still there for a later command (which cannot signal them: their command's
        // domain is not its own) …
        for f in ["bg.pid", "daemon.pid"] {
            let pid = std::fs::read_to_string(ws.path().join(f)).unwrap();
            let out = sh(&s, &format!("kill -0 {} 2>&1", pid.trim()));
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(!out.status.success(), "{layer:?}: {f}: {text}");
            assert!(
                text.contains("Operation not permitted"),
                "{layer:?}: {f}: {text}"
            );
        }
        // A command's own background job, not kept, ends with it (`$TMPDIR`: the
        // session's /tmp on both layers).
        sh_ok(
            &s,
            "(sleep 0.3; echo late > \"${TMPDIR:-/tmp}/late\") </dev/null >/dev/null 2>&1 &",
        );
        assert_eq!(common::host_processes_with(&marker).len(), 2, "{layer:?}");
        // Kept for that command only: the next one's background job ended with it.
        std::thread::sleep(std::time::Duration::from_millis(600));
        let out = sh(&s, "cat \"${TMPDIR:-/tmp}/late\" 2>&1");
        assert!(!out.status.success(), "{layer:?}: not kept, still ran");
        let kept = s
            .command("sh")
            .args([
                "-c",
                "(sleep 0.3; echo late > \"${TMPDIR:-/tmp}/late\") </dev/null >/dev/null 2>&1 &",
            ])
            .keep_background(true)
            .status()
            .unwrap();
        assert!(kept.success(), "{layer:?}");
        std::thread::sleep(std::time::Duration::from_millis(600));
        assert_eq!(
            sh_ok(&s, "cat \"${TMPDIR:-/tmp}/late\""),
            "late\n",
            "{layer:?}"
        );
        // `close` ends them.
        s.close().unwrap();
        assert_eq!(
            common::host_processes_with(&marker),
            Vec::<u32>::new(),
            "{layer:?}"
        );
    }
}

#[test]
fn keep_background_is_refused_outside_a_session() {
    let ws = workspace();
    let sb = sandbox_on(ws.path(), Layer::Landlock, |_| {});
    let err = sb
        .command("true")
        .keep_background(true)
        .status()
        .expect_err("keep_background without a session");
    let text = err.to_string();
    assert!(text.contains("only a session's command"), "{text}");
    assert!(
        matches!(&err, stockade::Error::Spawn(e) if e.errno().map(|e| e as i32) == Some(libc::EINVAL)),
        "{err:?}"
    );
    // The same command without it runs.
    assert!(sb.command("true").status().unwrap().success());
}

#[test]
fn close_leaves_no_process() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        let marker = format!("stockade-session-close-{}-{layer:?}", std::process::id());
        let script = format!("exec -a {marker} sleep 1000");
        let mut running: Vec<_> = (0..3)
            .map(|_| s.command("bash").args(["-c", &script]).spawn().unwrap())
            .collect();
        // A background job of a command still running, too.
        let mut bg = s
            .command("bash")
            .args(["-c", &format!("(exec -a {marker} sleep 1000) & wait")])
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while common::host_processes_with(&marker).len() < 4 {
            assert!(
                std::time::Instant::now() < deadline,
                "{layer:?}: not started"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        s.close().unwrap();
        assert_eq!(
            common::host_processes_with(&marker),
            Vec::<u32>::new(),
            "{layer:?}"
        );
        for c in running.iter_mut().chain([&mut bg]) {
            assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGKILL), "{layer:?}");
        }
    }
}

#[test]
fn a_closed_session_refuses_commands_and_signals_reach_the_program() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        let mut c = s
            .command("sh")
            .args([
                "-c",
                "trap 'exit 42' TERM; echo ready; while :; do sleep 0.01; done",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(c.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line, "ready\n");
        c.signal(libc::SIGTERM).unwrap();
        assert_eq!(c.wait().unwrap().code(), Some(42), "{layer:?}");
        let cmd = s.command("true");
        drop(s);
        let mut cmd = cmd;
        assert!(cmd.status().is_err(), "{layer:?}");
    }
}

/// A session's fd is a pidfd of its sandbox: not readable while it lives, readable once it
/// has died (here: killed through that very fd), after which commands fail to start.
#[test]
fn the_sessions_fd_tells_when_its_sandbox_has_ended() {
    use std::os::fd::{AsFd, AsRawFd};
    let readable = |s: &Session, ms: i32| {
        let mut p = libc::pollfd {
            fd: s.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the call's duration.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        n == 1 && p.revents & libc::POLLIN != 0
    };
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            return;
        };
        assert_eq!(sh_ok(&s, "echo ok"), "ok\n");
        assert!(!readable(&s, 50), "{layer:?}: readable while alive");
        // SAFETY: pidfd_send_signal with a pidfd this test holds, no siginfo, no flags.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                s.as_fd().as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        assert_eq!(r, 0, "{layer:?}");
        assert!(
            readable(&s, 10_000),
            "{layer:?}: not readable after its end"
        );
        let r = s.command("true").status();
        assert!(
            r.is_err(),
            "{layer:?}: a command started in a dead session: {r:?}"
        );
    }
}

/// A command the server cannot fork a supervisor for (the session's process limit taken
/// by kept background processes) fails with the fork's own error, not as if the session
/// had ended: the server fails the request without reading it whole.
#[test]
fn a_command_the_server_cannot_fork_for_fails_with_the_forks_error() {
    for layer in LAYERS {
        let ws = workspace();
        // Layer 2 without a cgroup (an unprivileged host here) cannot hold the limit and
        // says so (RLIMIT_NPROC would count every process of the user): nothing to fail.
        let sb = sandbox_on(ws.path(), layer, |p| p.limits.processes = Some(10));
        if layer == Layer::Landlock && sb.degradation().is_some() {
            continue;
        }
        assert_eq!(sb.degradation(), None, "{layer:?}");
        let Some(s) = session(ws.path(), layer, |p| p.limits.processes = Some(10)) else {
            return;
        };
        let mut failed = None;
        for i in 0..12 {
            // A long request (arguments the server does not read when it only fails it).
            let r = s
                .command("sh")
                .args(["-c", "sleep 1000 </dev/null >/dev/null 2>&1 & true", "x"])
                .arg("y".repeat(200 + i))
                .keep_background(true)
                .status();
            if let Err(e) = r {
                failed = Some(e.to_string());
                break;
            }
        }
        let Some(e) = failed else {
            panic!("{layer:?}: every command started under the process limit");
        };
        assert!(
            !e.contains("has ended, or refused"),
            "{layer:?}: the fork's error was lost: {e}"
        );
        assert!(e.contains("EAGAIN"), "{layer:?}: {e}");
        s.close().unwrap();
    }
}

/// With `keep_session` the session's processes stay in the host's process group, the
/// commands waiting forked ahead too: a signal sent to the group before a command is
/// requested (a terminal's `^C`, a `kill` of the group, meant for an earlier command)
/// must not end the next command's program the moment it is unblocked.
#[test]
fn a_signal_to_the_group_before_a_command_does_not_end_it() {
    for layer in LAYERS {
        let ws = workspace();
        let mut host = std::process::Command::new(std::env::current_exe().unwrap());
        host.args(["--exact", "helper_keep_session_host", "--nocapture"])
            .env("STOCKADE_TEST_HELPER_WORKSPACE", ws.path())
            .env("STOCKADE_TEST_HELPER_LAYER", format!("{layer:?}"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        std::os::unix::process::CommandExt::process_group(&mut host, 0);
        let mut host = host.spawn().unwrap();
        let mut out = std::io::BufReader::new(host.stdout.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("READY") {
            line.clear();
            let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
            if n == 0 {
                break;
            }
        }
        if !line.starts_with("READY") {
            // No session on this host (the helper printed its SKIP line).
            assert!(host.wait().unwrap().success());
            return;
        }
        // SAFETY: kill takes a process group id and a signal number; the group is the
        // helper's own (made for it above).
        let r = unsafe { libc::kill(-(host.id() as i32), libc::SIGUSR1) };
        assert_eq!(r, 0);
        std::thread::sleep(std::time::Duration::from_millis(200));
        std::io::Write::write_all(host.stdin.as_mut().unwrap(), b"go\n").unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        let status = host.wait().unwrap();
        assert!(status.success(), "{layer:?}: {status:?}: {rest}");
        assert!(rest.contains("alive"), "{layer:?}: {rest}");
        assert!(rest.contains("status 0"), "{layer:?}: {rest}");
    }
}

/// Not a test of its own: the host of `a_signal_to_the_group_before_a_command_does_not_end_it`,
/// in a process group of its own, where it ignores `SIGUSR1` (the sandbox's processes
/// get the default back).
#[test]
fn helper_keep_session_host() {
    let (Some(ws), Ok(layer)) = (
        std::env::var_os("STOCKADE_TEST_HELPER_WORKSPACE"),
        std::env::var("STOCKADE_TEST_HELPER_LAYER"),
    ) else {
        return;
    };
    // SAFETY: setting a signal's disposition to SIG_IGN; no handler runs.
    unsafe { libc::signal(libc::SIGUSR1, libc::SIG_IGN) };
    let layer = if layer == "Full" {
        Layer::Full
    } else {
        Layer::Landlock
    };
    let Some(s) = session(Path::new(&ws), layer, |p| p.keep_session = true) else {
        return;
    };
    // Two commands waiting forked ahead once this one has run.
    assert_eq!(sh_ok(&s, "echo first"), "first\n");
    std::thread::sleep(std::time::Duration::from_millis(100));
    println!("READY");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let out = sh(&s, "sleep 0.1; echo alive");
    println!(
        "{} status {}",
        String::from_utf8_lossy(&out.stdout).trim(),
        out.status.code().map_or_else(
            || format!("signal {:?}", out.status.signal()),
            |c| c.to_string()
        )
    );
    s.close().unwrap();
}

#[test]
fn concurrent_commands_from_many_threads() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        std::thread::scope(|scope| {
            for t in 0..4 {
                let s = &s;
                scope.spawn(move || {
                    for i in 0..20 {
                        let code = (t * 20 + i) % 256;
                        let out = s
                            .command("sh")
                            .args(["-c", &format!("echo {t}-{i}; exit {code}")])
                            .output()
                            .unwrap();
                        assert_eq!(out.status.code(), Some(code));
                        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{t}-{i}\n"));
                    }
                });
            }
        });
        s.close().unwrap();
    }
}

/// With `network = "allow"` the session's egress proxy serves every command: each gets
/// the proxy variables and reaches an allowed server through it, and nothing else.
#[test]
fn network_allow_commands_go_through_the_sessions_proxy() {
    let (port, count) = common::http_server("through the session");
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |p| {
            p.network = stockade::Network::Allow;
            p.allow_domains = vec!["127.0.0.2".into()];
            p.allow_private = vec!["127.0.0.0/8".into()];
        }) else {
            continue;
        };
        let before = count.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..2 {
            let code = format!(
                "import os, urllib.request\n\
                 assert os.environ['HTTP_PROXY'].startswith('http://127.0.0.1:'), os.environ\n\
                 print(urllib.request.urlopen('http://127.0.0.2:{port}/', timeout=10).read().decode())"
            );
            let out = s.command("python3").args(["-c", &code]).output().unwrap();
            assert!(
                out.status.success(),
                "{layer:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                "through the session"
            );
        }
        // An unlisted name is refused by the proxy, and a direct connect has no way out.
        let refused = sh(
            &s,
            "python3 -c \"import urllib.request as u\ntry:\n u.urlopen('http://example.invalid/', timeout=10)\nexcept Exception as e: print(type(e).__name__, getattr(e, 'code', ''))\"",
        );
        assert!(
            String::from_utf8_lossy(&refused.stdout).contains("HTTPError 403"),
            "{layer:?}: {}",
            String::from_utf8_lossy(&refused.stdout)
        );
        assert_eq!(
            count.load(std::sync::atomic::Ordering::SeqCst) - before,
            2,
            "{layer:?}: two requests reached the server"
        );
        s.close().unwrap();
    }
}

/// The host's git between two commands of a session runs nothing the earlier one planted:
/// a repository it made in the workspace is neutralized, and on layer 2 its change to
/// `.git/config` put back, when its wait returns, as after a command of its own sandbox
/// (review: both waited for the session's close, and the host's `git add -A` and `git
/// status` ran the planted `core.fsmonitor`). A command that keeps background processes
/// is checked at the close, once they have ended.
#[test]
fn host_git_between_commands_runs_nothing_a_command_planted() {
    for layer in LAYERS {
        let repo = common::git::Repo::new();
        let ws = &repo.ws;
        let Some(s) = session(ws, layer, |_| {}) else {
            return;
        };
        let mark = repo.marker();
        let fsmonitor = format!("touch {}; false", mark.display());
        let plant = |dir: &str| {
            format!(
                "set -e; mkdir -p {dir} && cd {dir} && git init -q && echo x > x && git add x && \
                 git -c user.name=a -c user.email=a@a commit -qm s && \
                 git config core.fsmonitor '{fsmonitor}'"
            )
        };
        sh_ok(&s, &plant("sub"));
        if layer == Layer::Landlock {
            sh_ok(&s, &format!("git config core.fsmonitor '{fsmonitor}'"));
        }
        for args in [
            &["add", "-A"][..],
            &["status"],
            &["commit", "-qm", "host"],
            &["status"],
        ] {
            let _ = common::git::git_out(ws, args);
            repo.assert_no_marker(&format!("{layer:?}: host git {args:?} between commands"));
        }
        assert!(
            ws.join("sub/.git/stockade-disabled-config").exists(),
            "{layer:?}: the repository the command made is not neutralized"
        );
        // Kept background processes plant after their command's wait: checked at the
        // close, once they have ended.
        let mut kept = s
            .command("sh")
            .args([
                "-c",
                &format!("(sleep 0.5; {}) >/dev/null 2>&1 &", plant("late")),
            ])
            .keep_background(true)
            .spawn()
            .unwrap();
        assert!(kept.wait().unwrap().success());
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !ws.join("late/.git/config").exists() {
            assert!(
                std::time::Instant::now() < end,
                "{layer:?}: the kept process made nothing"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        s.close().unwrap();
        for args in [&["add", "-A"][..], &["status"]] {
            let _ = common::git::git_out(ws, args);
            repo.assert_no_marker(&format!("{layer:?}: host git {args:?} after the close"));
        }
        assert!(
            ws.join("late/.git/stockade-disabled-config").exists(),
            "{layer:?}: the repository the kept process made is not neutralized"
        );
    }
}

#[test]
fn session_as_nobody() {
    common::rerun_as_nobody(&["--skip", "session_as_nobody"]);
}

/// From its first instruction, a session's program cannot reach its supervisor (which
/// holds the command's status pipe) nor PID 1: the freestanding racing program of
/// `tests/init_window.rs` (no C library, its first system calls at once) tries
/// `PTRACE_SEIZE` and opening `/proc/PID/{mem,maps,environ,fd/N}` of its parent, and on
/// the full layer of PID 1, 300 times per layer, with `allow_ptrace` on.
#[test]
fn from_its_first_instruction_a_command_cannot_reach_its_supervisor() {
    require!(common::Feature::Cc);
    const RUNS: usize = 300;
    for layer in LAYERS {
        let ws = workspace();
        let exe = ws.path().join("init_window");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/init_window.c");
        let out = std::process::Command::new("cc")
            .args([
                "-nostdlib",
                "-static",
                "-ffreestanding",
                "-fno-stack-protector",
                "-O1",
                "-o",
            ])
            .arg(&exe)
            .arg(&src)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let Some(s) = session(ws.path(), layer, |p| p.allow_ptrace = true) else {
            continue;
        };
        let targets: &[&str] = if layer == Layer::Full {
            &["ppid", "1"]
        } else {
            &["ppid"]
        };
        for target in targets {
            for run in 0..RUNS {
                let out = s.command(&exe).arg(target).output().unwrap();
                let line = String::from_utf8_lossy(&out.stdout);
                let context = format!("{layer:?} {target} run {run}");
                assert!(out.status.success(), "{context}: {} {line}", out.status);
                check_refused(line.trim(), layer, &context);
            }
        }
        s.close().unwrap();
    }
}

/// The racing program's line: every door refused: `EPERM` for the trace; on layer 2
/// `EACCES` for the `/proc` files (each fd `EACCES` or `ENOENT`, at least one refused as
/// such); on the full layer, whose session `/proc` lists no process of another domain,
/// `ENOENT` for every one.
fn check_refused(line: &str, layer: Layer, context: &str) {
    let field = |name: &str| -> &str {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("{context}: no {name} in {line:?}"))
    };
    assert_eq!(
        field("seize"),
        (-libc::EPERM).to_string(),
        "{context}: {line}"
    );
    let refused = if layer == Layer::Full {
        -libc::ENOENT
    } else {
        -libc::EACCES
    };
    for f in ["mem", "maps", "environ"] {
        assert_eq!(field(f), refused.to_string(), "{context}: {line}");
    }
    let fds: Vec<i32> = field("fd").split(',').map(|v| v.parse().unwrap()).collect();
    assert_eq!(fds.len(), 16, "{context}: {line}");
    assert!(
        fds.iter()
            .all(|&e| e == -libc::EACCES || e == -libc::ENOENT),
        "{context}: {line}"
    );
    assert!(fds.contains(&refused), "{context}: {line}");
}

/// `wall_time` is each command's: the session outlives it, and a command that overruns it
/// is ended with everything it started.
#[test]
fn wall_time_is_per_command() {
    use std::time::{Duration, Instant};
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |p| {
            p.limits.wall_time = Some(Duration::from_millis(800));
        }) else {
            continue;
        };
        // Three commands inside the limit, over more than the limit in all.
        for _ in 0..3 {
            assert!(
                s.command("sleep").arg("0.4").status().unwrap().success(),
                "{layer:?}"
            );
        }
        let t = Instant::now();
        let mut c = s
            .command("sh")
            .args(["-c", "sleep 1000 & echo $! > bg.pid; sleep 1000"])
            .spawn()
            .unwrap();
        let st = c.wait().unwrap();
        assert_eq!(st.signal(), Some(libc::SIGKILL), "{layer:?}");
        assert!(t.elapsed() < Duration::from_secs(20), "{layer:?}");
        assert!(
            matches!(c.termination(), Some(stockade::Termination::WallTime(_))),
            "{layer:?}: {:?}",
            c.termination()
        );
        let pid = std::fs::read_to_string(ws.path().join("bg.pid")).unwrap();
        let out = sh(&s, &format!("kill -0 {} 2>&1", pid.trim()));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("No such process"),
            "{layer:?}"
        );
        s.close().unwrap();
    }
}

/// The `tokio` feature: a session's commands spawn and wait without blocking a worker.
#[cfg(feature = "tokio")]
#[test]
fn async_spawn_and_wait_in_a_session() {
    use tokio::io::AsyncReadExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        rt.block_on(async {
            let mut child = s
                .command("sh")
                .args(["-c", "echo async; exit 9"])
                .stdout(Stdio::piped())
                .spawn_async()
                .await
                .unwrap();
            let mut out = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .into_async()
                .unwrap()
                .read_to_string(&mut out)
                .await
                .unwrap();
            assert_eq!(out, "async\n", "{layer:?}");
            assert_eq!(
                child.wait_async().await.unwrap().code(),
                Some(9),
                "{layer:?}"
            );
        });
        s.close().unwrap();
    }
}

#[test]
fn an_overlay_sessions_change_set_is_held_while_it_lives_and_released_at_close() {
    require!(common::Feature::UserNs);
    let ws = workspace();
    let c = workspace();
    let changes = c.path().join("set");
    let name = format!("session-pin-{}", std::process::id());
    let Some(s) = session(ws.path(), Layer::Full, |p| {
        p.workspace_mode = stockade::WorkspaceMode::Overlay;
        p.changes_dir = Some(changes.clone());
    }) else {
        return;
    };
    sh_ok(&s, &format!("echo s > {name}"));
    assert_eq!(sh_ok(&s, &format!("cat {name}")), "s\n");
    assert!(!ws.path().join(&name).exists());
    // While the session lives, the host holds its overlay's mount, close-on-exec.
    let pins = common::overlay_pins(&name);
    assert_eq!(pins.len(), 1, "{pins:?}");
    assert!(pins[0].1, "{pins:?}");
    s.close().unwrap();
    // Opened right after the close: waits for the overlay's last reference to go.
    let set = stockade::ChangeSet::open(&changes).unwrap();
    assert!(
        set.entries().iter().any(|e| e.path == Path::new(&name)),
        "{:?}",
        set.entries()
    );
    assert_eq!(common::overlay_pins(&name), Vec::new());
}
