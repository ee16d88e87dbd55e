//! The CLI pair: `stockade session --socket PATH` serves a warm session, `stockade run
//! --session PATH -- PROGRAM…` runs one command in it. End to end with real tools, on both
//! layers, as root and as uid 65534 (`cli_session_as_nobody`); the socket's checks from
//! both ends; nothing left on the host after the server, however it ends.
#![cfg(target_os = "linux")]

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{LAYERS, is_root, tempdir};
use stockade::Layer;

fn stockade() -> Command {
    Command::new(common::stockade_exe())
}

/// A server of a session over `ws` on `layer`, its socket at `dir/s`, its stderr in
/// `dir/server.err`.
struct Server {
    child: Child,
    socket: PathBuf,
    err: PathBuf,
    /// The server's `TMPDIR`, where layer 2 makes the session's private one: a server
    /// killed with `SIGKILL` cannot remove it, and this goes with the test.
    _tmp: tempfile::TempDir,
}

impl Server {
    /// Starts it and waits until its socket is there (it appears once it listens), or
    /// returns `None` after a SKIP line when this host cannot run a session.
    fn start(dir: &Path, ws: &Path, layer: Layer) -> Option<Server> {
        let socket = dir.join("s");
        let err = dir.join(format!("server-{layer:?}.err"));
        let tmp = tempdir();
        let mut cmd = stockade();
        cmd.args(["session", "--socket"])
            .arg(&socket)
            .arg("--workspace")
            .arg(ws)
            .env("TMPDIR", tmp.path());
        match layer {
            Layer::Full => cmd.args(["--layer", "full"]),
            _ => cmd.args(["--layer", "landlock", "--min-layer", "landlock"]),
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let mut server = Server {
            child,
            socket,
            err,
            _tmp: tmp,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !server.socket.exists() {
            if let Some(status) = server.child.try_wait().unwrap() {
                let text = server.stderr();
                if text.contains("Landlock ABI") {
                    common::skip("cli_session", &format!("{layer:?}: {text}"));
                    return None;
                }
                panic!("{layer:?}: the server ended: {status:?}: {text}");
            }
            assert!(Instant::now() < deadline, "{layer:?}: no socket");
            std::thread::sleep(Duration::from_millis(5));
        }
        Some(server)
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// `run --session` with `args` (flags, then the program).
    fn run(&self, args: &[&str]) -> Output {
        self.run_cmd(args).output().unwrap()
    }

    fn run_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = stockade();
        cmd.arg("run").arg("--session").arg(&self.socket).args(args);
        cmd
    }

    fn sh(&self, script: &str) -> Output {
        self.run(&["--", "sh", "-c", script])
    }

    /// Ends the server with `signal` and returns its exit status.
    fn end(mut self, signal: i32) -> std::process::ExitStatus {
        // SAFETY: kill takes a pid and a signal number; the pid is our unreaped child's.
        let r = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(r, 0);
        self.child.wait().unwrap()
    }
}

/// A server still running when its test ends (it failed, or never ended it): killed, so
/// that no test leaves a server behind (its sandbox and its socket go with it).
impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits up to 10 s for `f` to hold.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A private directory (0700, this user's) for a socket.
fn socket_dir() -> tempfile::TempDir {
    let d = tempdir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

#[test]
fn the_pair_runs_commands_in_one_live_sandbox() {
    for layer in LAYERS {
        let (dir, ws) = (socket_dir(), tempdir());
        let Some(server) = Server::start(dir.path(), ws.path(), layer) else {
            return;
        };
        // The workspace and /tmp persist from one command to the next.
        // (`$TMPDIR`: `/tmp` on the full layer, the session's private one on layer 2.)
        let t = format!("stockade-cli-session-{}", std::process::id());
        let out = server.sh(&format!(
            "echo one > file; echo two > ${{TMPDIR:-/tmp}}/{t}; exit 7"
        ));
        assert_eq!(
            out.status.code(),
            Some(7),
            "{layer:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(ws.path().join("file")).unwrap(),
            "one\n"
        );
        let out = server.sh(&format!("cat file ${{TMPDIR:-/tmp}}/{t}"));
        assert_eq!(
            text(&out.stdout),
            "one\ntwo\n",
            "{layer:?}: {}",
            text(&out.stderr)
        );
        assert!(out.status.success());
        // The session's /tmp is its own, not the host's.
        assert!(!Path::new("/tmp").join(&t).exists(), "{layer:?}");
        // Exact statuses: codes, 128+N for signal N, 127 not found, 126 not executable.
        assert_eq!(server.sh("exit 0").status.code(), Some(0));
        assert_eq!(server.sh("exit 255").status.code(), Some(255));
        assert_eq!(
            server.sh("kill -SEGV $$").status.code(),
            Some(128 + libc::SIGSEGV)
        );
        assert_eq!(
            server.sh("kill -KILL $$").status.code(),
            Some(128 + libc::SIGKILL)
        );
        let out = server.run(&["--", "stockade-no-such-program"]);
        assert_eq!(out.status.code(), Some(127), "{layer:?}");
        assert!(
            text(&out.stderr).starts_with("stockade: "),
            "{}",
            text(&out.stderr)
        );
        let out = server.run(&["--", "/etc/hostname"]);
        assert_eq!(
            out.status.code(),
            Some(126),
            "{layer:?}: {}",
            text(&out.stderr)
        );
        // The caller's own stdio, cwd and variables (plain and secret) as with `run`.
        std::fs::create_dir(ws.path().join("sub")).unwrap();
        let mut child = server
            .run_cmd(&[
                "--cwd",
                "sub",
                "--env",
                "A=1",
                "--secret-env",
                "S=hidden",
                "--",
                "sh",
                "-c",
                "pwd; echo $A $S; cat; echo err >&2",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"from stdin\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            text(&out.stdout),
            format!(
                "{}\n1 hidden\nfrom stdin\n",
                ws.path().join("sub").display()
            ),
            "{layer:?}"
        );
        assert_eq!(text(&out.stderr), "err\n");
        // A file of the caller's reaches the command as a pipe, copied, as with `run`:
        // the program cannot truncate or chmod it through the fd. The output written last
        // is there when the client exits.
        let (input, output) = (dir.path().join("in"), dir.path().join("out"));
        std::fs::write(&input, "file input\n").unwrap();
        let status = server
            .run_cmd(&[
                "--",
                "sh",
                "-c",
                "cat; readlink /proc/self/fd/0 /proc/self/fd/1; head -c 300000 /dev/zero | tr '\\0' x; echo; echo last",
            ])
            .stdin(std::fs::File::open(&input).unwrap())
            .stdout(std::fs::File::create(&output).unwrap())
            .status()
            .unwrap();
        assert!(status.success(), "{layer:?}");
        let got = std::fs::read_to_string(&output).unwrap();
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines[0], "file input", "{layer:?}");
        assert!(
            lines[1].starts_with("pipe:[") && lines[2].starts_with("pipe:["),
            "{got:.200}"
        );
        assert_eq!(lines[3].len(), 300000);
        assert_eq!(lines[4..], ["last"], "{layer:?}");
        // The caller's /dev/null is relayed too: a root host's program could change the
        // host's node through the fd (reads still end at once).
        let out = server
            .run_cmd(&[
                "--",
                "sh",
                "-c",
                "readlink /proc/self/fd/0 /proc/self/fd/1; cat; echo nowhere >&2",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{layer:?}");
        let got = text(&out.stdout);
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines.len(), 2, "{layer:?}: {got}");
        assert!(lines[0].starts_with("pipe:["), "{layer:?}: {got}");
        // The caller's pipe is handed over as it is.
        assert!(
            lines[1].starts_with("pipe:[") && lines[0] != lines[1],
            "{layer:?}: {got}"
        );
        // Clients are served at once, not in turn: the first waits for the second.
        let waiting = server
            .run_cmd(&[
                "--",
                "sh",
                "-c",
                "while [ ! -e go ]; do sleep 0.01; done; exit 5",
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(server.sh("touch go").status.success());
        assert_eq!(waiting.wait_with_output().unwrap().status.code(), Some(5));
        // The signals `run` forwards reach the command.
        let mut trapped = server
            .run_cmd(&[
                "--",
                "sh",
                "-c",
                "trap 'exit 42' TERM; touch ready; while :; do sleep 0.01; done",
            ])
            .spawn()
            .unwrap();
        eventually("ready", || ws.path().join("ready").exists());
        // SAFETY: kill takes a pid and a signal number; the pid is our unreaped child's.
        assert_eq!(unsafe { libc::kill(trapped.id() as i32, libc::SIGTERM) }, 0);
        assert_eq!(trapped.wait().unwrap().code(), Some(42), "{layer:?}");
        // SIGTERM ends the server: 128+15, the socket gone.
        let status = server.end(libc::SIGTERM);
        assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{layer:?}");
        assert!(!dir.path().join("s").exists(), "{layer:?}");
    }
}

#[test]
fn the_wall_time_holds_per_command_and_a_silent_client_does_not_hold_the_end() {
    if !Path::new("/usr/bin/python3").exists() {
        common::skip("silent client", "no /usr/bin/python3");
        return;
    }
    let (dir, ws) = (socket_dir(), tempdir());
    let socket = dir.path().join("s");
    let mut server = stockade()
        .args([
            "session",
            "--wall-time",
            "1s",
            "--layer",
            "landlock",
            "--min-layer",
        ])
        .args(["landlock", "--socket"])
        .arg(&socket)
        .arg("--workspace")
        .arg(ws.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually("socket", || socket.exists());
    let run = |script: &str| {
        stockade()
            .arg("run")
            .arg("--session")
            .arg(&socket)
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap()
    };
    // Each command has its second: two of 0.6 s each run to their end.
    for _ in 0..2 {
        assert_eq!(run("sleep 0.6; exit 3").status.code(), Some(3));
    }
    let started = Instant::now();
    let out = run("sleep 5");
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("wall"), "{}", text(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(4));
    // A client that connects and says nothing: the server still ends at once.
    let raw = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import socket, sys, time\n\
             s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n\
             s.connect(sys.argv[1]); print('connected', flush=True); time.sleep(30)",
        ])
        .arg(&socket)
        .stdout(Stdio::piped())
        .spawn();
    let mut raw = raw.unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(raw.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "connected\n");
    // SAFETY: kill takes a pid and a signal number; the pid is our unreaped child's.
    assert_eq!(unsafe { libc::kill(server.id() as i32, libc::SIGHUP) }, 0);
    let started = Instant::now();
    let status = server.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGHUP));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!socket.exists());
    raw.kill().unwrap();
    raw.wait().unwrap();
}

#[test]
fn flags_that_make_no_sense_in_a_session_are_refused() {
    let dir = socket_dir();
    let socket = dir.path().join("s");
    for flags in [
        &["--workspace", "/tmp"][..],
        &["--scrub"],
        &["--stats"],
        &["--explain"],
        &["--network", "none"],
        &["--wall-time", "5s"],
    ] {
        let out = stockade()
            .arg("run")
            .arg("--session")
            .arg(&socket)
            .args(flags)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("{} cannot be used with --session", flags[0])),
            "{err}"
        );
    }
    let out = stockade()
        .args(["run", "--keep-background", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--keep-background needs --session"));
}

#[test]
fn a_socket_not_in_a_private_directory_or_not_ours_is_refused() {
    let ws = tempdir();
    // A world-writable directory (/tmp itself, and one of our own made so), a group-
    // writable one, a symbolic link to a private one, and a private one reached through a
    // symbolic link further up (which a program could have planted in its workspace, to
    // point it at a directory of its own later: such a path was once taken).
    let open = tempdir();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let group = tempdir();
    std::fs::set_permissions(group.path(), std::fs::Permissions::from_mode(0o770)).unwrap();
    let private = socket_dir();
    let link = tempdir();
    std::os::unix::fs::symlink(private.path(), link.path().join("d")).unwrap();
    let real = socket_dir();
    std::fs::create_dir(real.path().join("sub")).unwrap();
    std::fs::set_permissions(
        real.path().join("sub"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    std::os::unix::fs::symlink(real.path(), link.path().join("up")).unwrap();
    let name = format!("stockade-test-{}.sock", std::process::id());
    for (socket, why) in [
        (
            Path::new("/tmp").join(&name),
            "writable by its group or others",
        ),
        (open.path().join("s"), "writable by its group or others"),
        (group.path().join("s"), "writable by its group or others"),
        (link.path().join("d/s"), "passes through a symbolic link"),
        (
            link.path().join("up/sub/s"),
            "passes through a symbolic link",
        ),
    ] {
        let out = stockade()
            .args(["session", "--socket"])
            .arg(&socket)
            .arg("--workspace")
            .arg(ws.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{}", socket.display());
        assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
        assert!(!socket.exists(), "{}", socket.display());
        // The client refuses the same places.
        let out = stockade()
            .arg("run")
            .arg("--session")
            .arg(&socket)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125));
        assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
    }
    // A name that exists is never replaced.
    std::fs::write(private.path().join("taken"), "x").unwrap();
    let out = stockade()
        .args(["session", "--socket"])
        .arg(private.path().join("taken"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("exists"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(private.path().join("taken")).unwrap(),
        "x"
    );
    // The client: a symbolic link to a real session's socket, and a file that is not a
    // socket.
    let Some(server) = Server::start(private.path(), ws.path(), Layer::Landlock) else {
        return;
    };
    std::os::unix::fs::symlink(&server.socket, private.path().join("alias")).unwrap();
    for (name, why) in [("alias", "is a symbolic link"), ("taken", "not a socket")] {
        let out = stockade()
            .arg("run")
            .arg("--session")
            .arg(private.path().join(name))
            .args(["--", "touch", "ran"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125));
        assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
    }
    assert!(!ws.path().join("ran").exists());
    // The real one works.
    assert!(server.run(&["--", "touch", "ran"]).status.success());
    assert!(ws.path().join("ran").exists());
    server.end(libc::SIGINT);
}

/// A sandboxed program that can write where a caller puts a session's socket (its own
/// workspace here; another session's, say) serves a socket of its own there, as the
/// user's uid, in a directory the user owns: every check of the place passes. The client
/// refuses that server by its seccomp filters, one more than its own, before it sends
/// anything (its secrets, its stdio).
#[test]
fn a_server_inside_a_sandbox_is_not_taken_for_a_session() {
    const FAKE: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1] + "/s")
s.listen(1)
c, _ = s.accept()
data = c.recv(1 << 17)
if data:
    open(sys.argv[1] + "/got-a-request", "w").write(str(len(data)))
"#;
    for layer in [Layer::Full, Layer::Landlock] {
        let ws = socket_dir();
        let tmp = tempdir();
        let mut fake = stockade();
        fake.args(["run", "--workspace"]).arg(ws.path());
        match layer {
            Layer::Full => fake.args(["--layer", "full"]),
            _ => fake.args(["--layer", "landlock", "--min-layer", "landlock"]),
        };
        let mut fake = fake
            .args(["--", "python3", "-c", FAKE])
            .arg(ws.path())
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let socket = ws.path().join("s");
        eventually(&format!("{layer:?}: the fake server listens"), || {
            socket.exists()
        });
        let out = stockade()
            .arg("run")
            .arg("--session")
            .arg(&socket)
            .args(["--secret-env", "TOKEN=s3cret-value", "--", "true"])
            .output()
            .unwrap();
        let _ = fake.kill();
        let _ = fake.wait();
        assert_eq!(
            out.status.code(),
            Some(125),
            "{layer:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("seccomp filters"),
            "{layer:?}: {}",
            text(&out.stderr)
        );
        assert!(
            !ws.path().join("got-a-request").exists(),
            "{layer:?}: the fake server got the request"
        );
    }
}

/// Host processes whose command line contains `marker`, after waiting for them to go.
fn gone(marker: &str) {
    eventually(&format!("processes of {marker} left"), || {
        common::host_processes_with(marker).is_empty()
    });
}

#[test]
fn killing_the_server_or_a_client_leaves_nothing() {
    for layer in LAYERS {
        let (dir, ws) = (socket_dir(), tempdir());
        let Some(server) = Server::start(dir.path(), ws.path(), layer) else {
            return;
        };
        let marker = format!("{}.{}", 900 + std::process::id() % 97, layer as u32);
        // A client that goes away mid-command ends its command.
        let mut client = server
            .run_cmd(&[
                "--",
                "sh",
                "-c",
                &format!("touch started; exec sleep {marker}"),
            ])
            .spawn()
            .unwrap();
        eventually("started", || ws.path().join("started").exists());
        eventually("sleeping", || {
            !common::host_processes_with(&marker).is_empty()
        });
        client.kill().unwrap();
        client.wait().unwrap();
        gone(&marker);
        // Kept background processes, a command still running, and then the server killed.
        let out = server.run(&[
            "--keep-background",
            "--",
            "sh",
            "-c",
            &format!("sleep {marker} </dev/null >/dev/null 2>&1 &"),
        ]);
        assert!(out.status.success(), "{layer:?}: {}", text(&out.stderr));
        assert_eq!(common::host_processes_with(&marker).len(), 1, "{layer:?}");
        let running = server
            .run_cmd(&["--", "sleep", &marker])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The kept process, the running command, and its client (whose command line
        // names it too).
        eventually("three", || common::host_processes_with(&marker).len() == 3);
        let socket = server.socket.clone();
        let status = server.end(libc::SIGKILL);
        assert_eq!(status.signal_number(), Some(libc::SIGKILL));
        // The client learns that its session has ended.
        let out = running.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{layer:?}");
        assert!(text(&out.stderr).contains("ended"), "{}", text(&out.stderr));
        // No process of the session (nor the janitor, whose command line names the
        // directory), no socket.
        gone(&marker);
        gone(&dir.path().display().to_string());
        eventually("socket removed", || !socket.exists());
    }
}

/// A command of the session runs as the caller's uid. Layer 2 reaches every pathname
/// socket (Landlock does not govern `connect`), so a command there connects to its own
/// server: the server refuses it, as it refuses every process that descends from the
/// session's sandbox (it could otherwise start commands that outlive it, with its stdio).
/// The full layer shows it no socket outside its roots. A client outside is served. And a
/// socket in a root the commands can write (where one could replace it with its own) is
/// refused before the session starts, on both layers.
#[test]
fn a_command_of_the_session_cannot_become_its_client() {
    const CONNECT_LOOP: &str = r#"
import socket, sys
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(sys.argv[1])
        s.recv(1)
    except OSError:
        pass
    s.close()
"#;
    for layer in LAYERS {
        let ws = tempdir();
        // Inside the workspace: refused.
        let inside = ws.path().join("sockets");
        std::fs::create_dir(&inside).unwrap();
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o700)).unwrap();
        let out = stockade()
            .args(["session", "--socket"])
            .arg(inside.join("s"))
            .arg("--workspace")
            .arg(ws.path())
            .args(["--layer", "landlock", "--min-layer", "landlock"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("which the session's commands can write"),
            "{}",
            text(&out.stderr)
        );
        assert!(!inside.join("s").exists());

        let dir = socket_dir();
        let Some(server) = Server::start(dir.path(), ws.path(), layer) else {
            return;
        };
        let script = ws.path().join("client.py");
        std::fs::write(&script, RAW_CLIENT).unwrap();
        let socket = server.socket.to_str().unwrap().to_owned();
        let out = server.run(&[
            "--",
            "python3",
            script.to_str().unwrap(),
            &socket,
            "from-inside",
        ]);
        assert!(!ws.path().join("from-inside").exists(), "{layer:?}");
        if layer == Layer::Landlock {
            assert_eq!(
                text(&out.stdout).trim(),
                "no reply",
                "{layer:?}: {}",
                text(&out.stderr)
            );
            assert!(
                server
                    .stderr()
                    .contains("a process of the session's own sandbox"),
                "{layer:?}: {}",
                server.stderr()
            );
            // A command that loops on `connect` is refused each time, and the server says
            // so at most 20 times in 10 s (each line once filled its log: 18 MB in 25 s).
            let out = server.run(&["--", "python3", "-c", CONNECT_LOOP, &socket]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            let refused = || {
                server
                    .stderr()
                    .lines()
                    .filter(|l| l.contains("refused a client"))
                    .count()
            };
            eventually("the refusals said", || refused() >= 20);
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(refused(), 20, "{}", server.stderr());
        } else {
            assert!(!out.status.success(), "{layer:?}: {}", text(&out.stdout));
        }
        // The same client from outside is served.
        let out = Command::new("python3")
            .arg(&script)
            .arg(&socket)
            .arg("from-outside")
            .output()
            .unwrap();
        assert!(
            text(&out.stdout).starts_with("reply"),
            "{layer:?}: {}",
            text(&out.stderr)
        );
        eventually("from-outside", || ws.path().join("from-outside").exists());
        assert_eq!(
            server.end(libc::SIGTERM).code(),
            Some(128 + libc::SIGTERM),
            "{layer:?}"
        );
    }
}

/// A background process a command leaves running (`--keep-background`) and that goes on
/// writing to the command's output does not keep the client copying: the client copies
/// what the command's output held when the command ended, and exits with its status. The
/// client's stdout is a FIFO that the test drains slowly, so that the kept writer (`yes`)
/// keeps the command's pipe full: a client that copied until the pipe was empty would
/// never exit.
#[test]
fn a_kept_writer_does_not_hold_the_client() {
    use std::io::Read;
    let (dir, ws) = (socket_dir(), tempdir());
    let Some(server) = Server::start(dir.path(), ws.path(), Layer::Landlock) else {
        return;
    };
    let fifo = dir.path().join("out");
    let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path and creates a FIFO; nothing else.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::File::open(&fifo).unwrap();
            let mut first = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match f.read(&mut buf) {
                    Ok(0) | Err(_) => return first,
                    Ok(n) => {
                        if first.len() < 6 {
                            first.extend_from_slice(&buf[..n.min(6 - first.len())]);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let out = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let mut client = server
        .run_cmd(&[
            "--keep-background",
            "--",
            "sh",
            "-c",
            "echo first; yes later & sleep 0.2; exit 3",
        ])
        .stdout(out)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(st) = client.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = client.kill();
            let _ = client.wait();
            let _ = server.end(libc::SIGTERM);
            panic!("the client went on copying the kept writer's output");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(3));
    assert_eq!(reader.join().unwrap(), b"first\n");
    assert_eq!(server.end(libc::SIGTERM).code(), Some(128 + libc::SIGTERM));
}

/// The janitor removes its server's socket when the server ends without removing it
/// (killed), and leaves the name alone when the server said it removed the socket itself:
/// by then another server's socket may hold the name, and on a tmpfs the same inode
/// number, which the janitor's identity check alone could not tell apart.
#[test]
fn the_janitor_leaves_a_socket_its_server_removed() {
    use std::os::unix::fs::MetadataExt;
    for told in [false, true] {
        let dir = socket_dir();
        let socket = dir.path().join("s");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let (d, s) = (
            std::fs::metadata(dir.path()).unwrap(),
            std::fs::symlink_metadata(&socket).unwrap(),
        );
        let mut janitor = stockade()
            .arg("__session-janitor")
            .arg(dir.path())
            .arg(format!("{}:{}", d.dev(), d.ino()))
            .arg("s")
            .arg(format!("{}:{}", s.dev(), s.ino()))
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut to = janitor.stdin.take().unwrap();
        if told {
            to.write_all(b"r").unwrap();
        }
        drop(to);
        assert!(janitor.wait().unwrap().success());
        assert_eq!(socket.exists(), told, "told: {told}");
    }
}

/// Clients that connect and say nothing hold a bounded number of the server's threads for
/// a bounded time: beyond 128 at once a client is dropped unread, and each is dropped 5 s
/// after its connect; the server serves on.
#[test]
fn idle_clients_are_bounded_in_number_and_time() {
    if !Path::new("/usr/bin/python3").exists() {
        common::skip("idle clients", "no /usr/bin/python3");
        return;
    }
    let (dir, ws) = (socket_dir(), tempdir());
    let Some(server) = Server::start(dir.path(), ws.path(), Layer::Landlock) else {
        return;
    };
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import socket, sys, time\n\
             def connect():\n\
             \x20   s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n\
             \x20   s.connect(sys.argv[1])\n\
             \x20   return s\n\
             start = time.monotonic()\n\
             idle = [connect() for _ in range(128)]\n\
             extra = connect()\n\
             extra.settimeout(4)\n\
             t = time.monotonic()\n\
             print('extra', extra.recv(100), round(time.monotonic() - t, 1))\n\
             idle[0].settimeout(30)\n\
             print('first', idle[0].recv(100), round(time.monotonic() - start))\n\
             print('last', idle[-1].recv(100))\n",
        ])
        .arg(&server.socket)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    // The 129th: closed at once, unread.
    assert!(lines[0].starts_with("extra b'' "), "{stdout}");
    let waited: f64 = lines[0].rsplit(' ').next().unwrap().parse().unwrap();
    assert!(waited < 3.0, "{stdout}");
    // The first: closed at its deadline (not at once, not never).
    let first: Vec<&str> = lines[1].split(' ').collect();
    assert_eq!(first[1], "b''", "{stdout}");
    let secs: u64 = first[2].parse().unwrap();
    assert!((4..=20).contains(&secs), "{stdout}");
    assert_eq!(lines[2], "last b''", "{stdout}");
    let err = server.stderr();
    assert!(err.contains("128 are served already"), "{err}");
    assert!(err.contains("sent no request in 5 s"), "{err}");
    // And it serves.
    let out = server.sh("echo served");
    assert_eq!(text(&out.stdout), "served\n", "{}", text(&out.stderr));
    assert_eq!(server.end(libc::SIGTERM).code(), Some(128 + libc::SIGTERM));
}

/// Like `run`, a server ends with the process that started it (a script that started it
/// in the background, say), closing its session as for `SIGTERM`: its sandbox and its
/// socket go with it. With `--no-die-with-parent` it serves on.
#[test]
fn a_server_dies_with_its_caller_unless_told_not_to() {
    // A session needs Landlock scopes: without them, say so and stop here.
    let (probe_dir, probe_ws) = (socket_dir(), tempdir());
    match Server::start(probe_dir.path(), probe_ws.path(), Layer::Landlock) {
        Some(s) => assert_eq!(s.end(libc::SIGTERM).code(), Some(128 + libc::SIGTERM)),
        None => return,
    }
    for keep in [false, true] {
        let (dir, ws, tmp) = (socket_dir(), tempdir(), tempdir());
        let socket = dir.path().join("s");
        // The caller: a shell that starts the server in the background, prints its pid
        // and waits for a line on its stdin. (The server's TMPDIR, where layer 2 makes
        // the session's, is the test's: a server killed cannot remove it.)
        let mut caller = Command::new("sh")
            .env("TMPDIR", tmp.path())
            .arg("-c")
            .arg(
                "\"$0\" session --socket \"$1\" --workspace \"$2\" --layer landlock \
                 --min-layer landlock $3 </dev/null >/dev/null 2>&1 & echo $!; read x; true",
            )
            .arg(common::stockade_exe())
            .arg(&socket)
            .arg(ws.path())
            .arg(if keep { "--no-die-with-parent" } else { "" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(caller.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let pid: i32 = line.trim().parse().unwrap();
        eventually("the socket", || socket.exists());
        // SAFETY: kill with signal 0 only checks that the process exists.
        let alive = || unsafe { libc::kill(pid, 0) } == 0;
        assert!(alive());
        // The caller ends.
        drop(caller.stdin.take());
        assert!(caller.wait().unwrap().success());
        if keep {
            std::thread::sleep(Duration::from_millis(500));
            assert!(
                alive(),
                "--no-die-with-parent: the server ended with its caller"
            );
            assert!(socket.exists());
            let out = stockade()
                .arg("run")
                .arg("--session")
                .arg(&socket)
                .args(["--", "echo", "served"])
                .output()
                .unwrap();
            assert_eq!(text(&out.stdout), "served\n", "{}", text(&out.stderr));
            // SAFETY: kill takes a pid and a signal number; the pid is the server's,
            // checked alive above (reparented, not our child: no reuse while it lives).
            assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        }
        // Ended (it was the shell's child; reaped by whoever adopted it), and nothing of
        // it is left: its socket is removed.
        eventually("the server's end", || !alive() || is_zombie(pid));
        eventually("the socket's removal", || !socket.exists());
    }
}

/// Whether `pid` is a zombie (ended, not yet reaped by its adopter).
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('Z')))
        .unwrap_or(false)
}

/// A session's sandbox killed from outside (its init, the server's child) ends its
/// server: it does not go on accepting clients whose every command would fail.
#[test]
fn a_server_whose_sandbox_died_ends_too() {
    for layer in LAYERS {
        let (dir, ws) = (socket_dir(), tempdir());
        let Some(mut server) = Server::start(dir.path(), ws.path(), layer) else {
            return;
        };
        let out = server.sh("echo ok");
        assert_eq!(
            text(&out.stdout),
            "ok\n",
            "{layer:?}: {}",
            text(&out.stderr)
        );
        let inits = children_named(server.child.id(), "stockade-init");
        assert_eq!(inits.len(), 1, "{layer:?}: {inits:?}");
        // SAFETY: kill takes a pid and a signal number; the pid is the server's child's,
        // which the server has not reaped (it is alive: listed just now).
        let r = unsafe { libc::kill(inits[0], libc::SIGKILL) };
        assert_eq!(r, 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{layer:?}: the server still runs"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.code(), Some(125), "{layer:?}: {}", server.stderr());
        assert!(
            server.stderr().contains("sandbox ended"),
            "{}",
            server.stderr()
        );
        assert!(!server.socket.exists(), "{layer:?}: socket left");
    }
}

/// The pids of `pid`'s children whose command name is `name`.
fn children_named(pid: u32, name: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let children =
            std::fs::read_to_string(task.unwrap().path().join("children")).unwrap_or_default();
        for child in children.split_whitespace() {
            let comm = std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
            if comm.trim() == name {
                found.push(child.parse().unwrap());
            }
        }
    }
    found
}

trait SignalNumber {
    fn signal_number(&self) -> Option<i32>;
}

impl SignalNumber for std::process::ExitStatus {
    fn signal_number(&self) -> Option<i32> {
        std::os::unix::process::ExitStatusExt::signal(self)
    }
}

/// A raw client in Python: sends a valid request for `touch NAME` with its own stdio, and
/// prints `reply N` (the reply's length) or `no reply`.
const RAW_CLIENT: &str = r#"
import os, socket, struct, sys
path, name = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
strings = [b"touch", name.encode()]
head = struct.pack("=5I", int.from_bytes(b"STCQ", "big"), 0, len(strings), 0, 0)
req = head + b"".join(x + b"\0" for x in strings)
try:
    socket.send_fds(s, [req], [0, 1, 2])
    r = s.recv(13)
except OSError:
    r = b""
print("reply %d" % len(r) if r else "no reply")
"#;

#[test]
fn root_only_a_client_of_another_uid_is_refused() {
    if !is_root() {
        common::skip("root_only_a_client_of_another_uid_is_refused", "needs root");
        return;
    }
    if !Path::new("/usr/bin/setpriv").exists() || !Path::new("/usr/bin/python3").exists() {
        common::skip(
            "root_only_a_client_of_another_uid_is_refused",
            "setpriv, python3",
        );
        return;
    }
    let (dir, ws) = (tempdir(), tempdir());
    // Root's directory, readable by all but writable by root only: the server accepts it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let Some(server) = Server::start(dir.path(), ws.path(), Layer::Full) else {
        return;
    };
    // A directory of another user's, private to that user: refused to root too.
    let theirs = tempdir();
    std::os::unix::fs::chown(theirs.path(), Some(65534), Some(65534)).unwrap();
    let out = stockade()
        .args(["session", "--socket"])
        .arg(theirs.path().join("s"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("owned by uid 65534"),
        "{}",
        text(&out.stderr)
    );
    assert!(!theirs.path().join("s").exists());
    let script = dir.path().join("client.py");
    std::fs::write(&script, RAW_CLIENT).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    // 0600: uid 65534 cannot even connect.
    let as_nobody = |args: &[&std::ffi::OsStr]| {
        Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .args(args)
            .current_dir("/")
            .output()
            .unwrap()
    };
    let py = |name: &str| -> Vec<std::ffi::OsString> {
        vec![
            "/usr/bin/python3".into(),
            script.clone().into(),
            server.socket.clone().into(),
            name.into(),
        ]
    };
    let args = py("by-nobody");
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let out = as_nobody(&refs);
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    // Opened to all by mistake: the server still serves only root, and `run --session`
    // of uid 65534 refuses a socket that is not its own.
    std::fs::set_permissions(&server.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = as_nobody(&refs);
    assert_eq!(
        text(&out.stdout).trim(),
        "no reply",
        "{}",
        text(&out.stderr)
    );
    assert!(!ws.path().join("by-nobody").exists());
    assert!(
        server.stderr().contains("refused a client of uid 65534"),
        "{}",
        server.stderr()
    );
    let exe = tempdir();
    std::fs::set_permissions(exe.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cli = exe.path().join("stockade");
    std::fs::copy(common::stockade_exe(), &cli).unwrap();
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run_args: Vec<std::ffi::OsString> = vec![
        cli.into(),
        "run".into(),
        "--session".into(),
        server.socket.clone().into(),
        "--".into(),
        "touch".into(),
        "by-nobody".into(),
    ];
    let refs: Vec<&std::ffi::OsStr> = run_args.iter().map(|a| a.as_os_str()).collect();
    let out = as_nobody(&refs);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("owned by uid 0"),
        "{}",
        text(&out.stderr)
    );
    assert!(!ws.path().join("by-nobody").exists());
    // The same raw client as root is served.
    let out = Command::new("/usr/bin/python3")
        .args(&py("by-root")[1..])
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout).trim(),
        "reply 12",
        "{}",
        text(&out.stderr)
    );
    assert!(ws.path().join("by-root").exists());
    // A socket of another user's, to root's client: refused too.
    let out = server.run(&["--", "true"]);
    assert!(out.status.success());
    std::os::unix::fs::chown(&server.socket, Some(65534), None).unwrap();
    let out = server.run(&["--", "touch", "after-chown"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("owned by uid 65534"),
        "{}",
        text(&out.stderr)
    );
    assert!(!ws.path().join("after-chown").exists());
    server.end(libc::SIGTERM);
}

#[test]
fn cli_session_as_nobody() {
    common::rerun_as_nobody(&["--skip", "cli_session_as_nobody"]);
}

/// A raw client that prints `ready`, waits for the socket to appear, sends `touch NAME`
/// with its own stdio, and prints `reply N` or `no reply`. It runs inside another sandbox,
/// whose full layer masks the pathname sockets bound when it starts: the server starts
/// once it is ready, and its socket is one made later, which a read-only bind shows.
const WAITING_CLIENT: &str = r#"
import os, socket, struct, sys, time
path, name = sys.argv[1], sys.argv[2]
print("ready", flush=True)
for _ in range(400):
    if os.path.exists(path):
        break
    time.sleep(0.05)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
strings = [b"touch", name.encode()]
head = struct.pack("=5I", int.from_bytes(b"STCQ", "big"), 0, len(strings), 0, 0)
req = head + b"".join(x + b"\0" for x in strings)
try:
    socket.send_fds(s, [req], [0, 1, 2])
    r = s.recv(13)
except OSError:
    r = b""
print("reply %d" % len(r) if r else "no reply", flush=True)
"#;

/// A program inside another sandbox of the same user (its own workspace, which may not
/// be the session's) reaches the session's socket: layer 2's Landlock does not govern
/// `connect` to a pathname socket, and the full layer shows a socket made later in a
/// directory it binds read-only. It is not of the session's sandbox, so the ancestry check
/// lets it through; the server refuses it by its seccomp filters, more than its own, and
/// tells it so, and its command does not run (it would write the session's workspace,
/// which its own sandbox may not).
#[test]
fn a_client_inside_another_sandbox_is_refused() {
    if !Path::new("/usr/bin/python3").exists() {
        common::skip(
            "a_client_inside_another_sandbox_is_refused",
            "no /usr/bin/python3",
        );
        return;
    }
    for layer in LAYERS {
        let (dir, ws, theirs, tmp) = (socket_dir(), tempdir(), tempdir(), tempdir());
        let mut other = stockade();
        other.args(["run", "--workspace"]).arg(theirs.path());
        match layer {
            Layer::Full => other.args(["--layer", "full"]),
            _ => other.args(["--layer", "landlock", "--min-layer", "landlock"]),
        };
        let socket = dir.path().join("s");
        let mut other = other
            .arg("--read-only")
            .arg(dir.path())
            .args(["--", "python3", "-c", WAITING_CLIENT])
            .arg(&socket)
            .arg("from-another-sandbox")
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        let mut lines = std::io::BufReader::new(other.stdout.take().unwrap());
        std::io::BufRead::read_line(&mut lines, &mut ready).unwrap();
        let server = if ready == "ready\n" {
            Server::start(dir.path(), ws.path(), layer)
        } else {
            None
        };
        let Some(server) = server else {
            let _ = other.kill();
            let _ = other.wait();
            assert_eq!(
                ready, "ready\n",
                "{layer:?}: the sandboxed client did not start"
            );
            return;
        };
        let out = other.wait_with_output().unwrap();
        let mut stdout = String::new();
        std::io::Read::read_to_string(&mut lines, &mut stdout).unwrap();
        let stderr = text(&out.stderr);
        assert!(
            !ws.path().join("from-another-sandbox").exists(),
            "{layer:?}: a sandboxed client ran a command in the session: {stdout} {stderr}"
        );
        assert!(
            stdout.starts_with("reply") || stdout.starts_with("no reply"),
            "{layer:?}: the client did not connect: {stdout} {stderr}\nserver: {}",
            server.stderr()
        );
        assert!(
            stderr.contains("a sandboxed program may not use a session"),
            "{layer:?}: {stdout} {stderr}\nserver: {}",
            server.stderr()
        );
        assert!(
            server.stderr().contains("seccomp filters"),
            "{layer:?}: {}",
            server.stderr()
        );
        // The same client beside the server is served.
        let out = Command::new("/usr/bin/python3")
            .args(["-c", WAITING_CLIENT])
            .arg(&socket)
            .arg("from-the-host")
            .output()
            .unwrap();
        assert_eq!(
            text(&out.stdout).lines().last(),
            Some("reply 12"),
            "{layer:?}: {}",
            text(&out.stderr)
        );
        assert!(ws.path().join("from-the-host").exists(), "{layer:?}");
        server.end(libc::SIGTERM);
    }
}

/// A raw client whose stderr is a pipe it filled and never reads: it asks for a program
/// that does not exist, so the server has an error line to write there. It prints
/// `reply N` or `no reply` (after 3 s), then stays, holding the pipe, until killed.
const FULL_STDERR_CLIENT: &str = r#"
import os, socket, struct, sys, time
r, w = os.pipe()
os.set_blocking(w, False)
try:
    while True:
        os.write(w, b"x" * 65536)
except BlockingIOError:
    pass
# Blocking again: the server must not rely on the client's file description's flags.
os.set_blocking(w, True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
strings = [b"/no/such/program"]
head = struct.pack("=5I", int.from_bytes(b"STCQ", "big"), 0, len(strings), 0, 0)
req = head + b"".join(x + b"\0" for x in strings)
socket.send_fds(s, [req], [0, 1, w])
s.settimeout(3)
try:
    r = s.recv(13)
except OSError:
    r = b""
print("reply %d" % len(r) if r else "no reply", flush=True)
time.sleep(120)
"#;

/// A client can hand the server a stderr that takes no more bytes (a pipe it filled and
/// never reads). The server's error line for it is dropped after a short wait, not
/// written with a blocking write that never returns; and an ending signal ends the server
/// at once, its session closed and a background process kept in it gone, however its
/// clients' threads fare. Before, the client's thread blocked in the write, and the
/// server, waiting for it, never closed the session.
#[test]
fn a_client_with_a_full_stderr_does_not_hold_the_server() {
    if !Path::new("/usr/bin/python3").exists() {
        common::skip(
            "a_client_with_a_full_stderr_does_not_hold_the_server",
            "no /usr/bin/python3",
        );
        return;
    }
    for layer in LAYERS {
        let (dir, ws) = (socket_dir(), tempdir());
        let Some(mut server) = Server::start(dir.path(), ws.path(), layer) else {
            return;
        };
        let marker = format!("{}.{}", 700 + std::process::id() % 97, layer as u32);
        let out = server.run(&[
            "--keep-background",
            "--",
            "sh",
            "-c",
            &format!("sleep {marker} </dev/null >/dev/null 2>&1 &"),
        ]);
        assert!(out.status.success(), "{layer:?}: {}", text(&out.stderr));
        assert_eq!(common::host_processes_with(&marker).len(), 1, "{layer:?}");
        let mut client = Command::new("/usr/bin/python3")
            .args(["-c", FULL_STDERR_CLIENT])
            .arg(&server.socket)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(client.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        // SAFETY: kill takes a pid and a signal number; the pid is our unreaped child's.
        let r = unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
        assert_eq!(r, 0);
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let _ = client.kill();
        let _ = client.wait();
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(128 + libc::SIGTERM),
            "{layer:?}: the server did not end within 5 s of SIGTERM: {}",
            server.stderr()
        );
        assert!(
            common::host_processes_with(&marker).is_empty(),
            "{layer:?}: a kept background process outlived its server"
        );
        assert_eq!(line.trim(), "reply 12", "{layer:?}: {}", server.stderr());
    }
}
