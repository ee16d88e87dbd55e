//! `stockade run` on a terminal: the escape sequences that write the caller's clipboard or
//! make the caller's terminal answer (an answer lands in its input: after the run, the
//! caller's shell) never reach it; colours, cursor movement and titles do. The program
//! writes them in pieces of 3 bytes, so that the relay reads every sequence split.
//!
//! The test plays the caller's terminal: a pseudo-terminal whose slave is `stockade`'s
//! stdio and controlling terminal, and whose master the test reads.
#![cfg(target_os = "linux")]

mod common;

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use common::Feature;

/// What the program prints, as a Python bytes literal, in order.
const KEPT: &[(&str, &[u8])] = &[
    (r"b'\x1b[1;31mred\x1b[m'", b"\x1b[1;31mred\x1b[m"),
    (r"b'\x1b[38;5;208mo\x1b[0m'", b"\x1b[38;5;208mo\x1b[0m"),
    (
        r"b'\x1b[2;5H\x1b[K\x1b[?25l\x1b[?25h'",
        b"\x1b[2;5H\x1b[K\x1b[?25l\x1b[?25h",
    ),
    (r"b'\x1b[?1049h\x1b[?1049l'", b"\x1b[?1049h\x1b[?1049l"),
    (r"b'\x1b[?2004h\x1b[?2004l'", b"\x1b[?2004h\x1b[?2004l"),
    (r"b'\x1b]2;a title\x07'", b"\x1b]2;a title\x07"),
    (
        r"b'\x1b]8;;https://example.org/\x1b\\link\x1b]8;;\x1b\\'",
        b"\x1b]8;;https://example.org/\x1b\\link\x1b]8;;\x1b\\",
    ),
];

/// Each with a marker that must not reach the terminal.
const DROPPED: &[(&str, &[u8])] = &[
    (r"b'\x1b]52;c;cm0gLXJmIH4K\x07'", b"cm0gLXJmIH4K"),
    (r"b'\x1b]52;p;cm0gLXJmIH4K\x1b\\'", b"52;p"),
    (r"b'\xc2\x9d52;c;Y2xpcDI=\xc2\x9c'", b"Y2xpcDI="),
    (r"b'\x1bP$qm\x1b\\'", b"$qm"),
    (r"b'\x1bP+q544e\x1b\\'", b"+q544e"),
    (r"b'\x1b[21t\x1b[20t'", b"0t"),
    (r"b'\x1b[>c\x1b[=c'", b"c\x1b"),
    (r"b'\x1b]11;?\x07\x1b]4;1;?\x07'", b";?"),
    (r"b'\x1b[?2004$p'", b"$p"),
    (r"b'\x1b]50;?\x07'", b"50;"),
    (r"b'\x1bZ\x05'", b"\x1bZ"),
    (r"b'\x05'", b"\x05"),
];

/// A program that prints every sequence, each after a line `--`, to `target` (`1`:
/// stdout, `tty`: `/dev/tty`), 3 bytes at a time.
fn script(target: &str) -> String {
    let all: Vec<&str> = KEPT.iter().chain(DROPPED).map(|(p, _)| *p).collect();
    let out = if target == "tty" {
        "open('/dev/tty', 'wb', buffering=0)"
    } else {
        "sys.stdout.buffer"
    };
    format!(
        "import sys\n\
         out = {out}\n\
         data = b''.join(b'--' + s for s in [{}]) + b'--end\\n'\n\
         for i in range(0, len(data), 3):\n\
         \x20   out.write(data[i:i + 3])\n\
         \x20   out.flush()\n",
        all.join(", ")
    )
}

fn workspace() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("stockade-filter-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .or_else(|_| {
            tempfile::Builder::new()
                .prefix("stockade-filter-")
                .tempdir_in("/var/tmp")
        })
        .expect("temp dir outside /tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn stockade(ws: &Path, flags: &[&str], target: &str) -> StdCommand {
    let mut cmd = StdCommand::new(common::stockade_exe());
    cmd.arg("run")
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .arg("--")
        .args(["python3", "-c", &script(target)]);
    cmd
}

fn openpty() -> (File, OwnedFd) {
    use rustix::pty::OpenptFlags;
    let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    rustix::pty::grantpt(&master).unwrap();
    rustix::pty::unlockpt(&master).unwrap();
    let name = rustix::pty::ptsname(&master, Vec::new()).unwrap();
    let slave = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let flags = rustix::fs::fcntl_getfl(&master).unwrap();
    rustix::fs::fcntl_setfl(&master, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    (File::from(master), slave)
}

/// Runs `cmd` on a new terminal (stdin, stdout, stderr and controlling terminal, as a
/// shell's foreground job) and returns what appeared there, without carriage returns.
fn on_terminal(cmd: StdCommand) -> Vec<u8> {
    let (mut master, mut child) = spawn_on_terminal(cmd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let end = Instant::now() + Duration::from_secs(60);
    let mut exited = None;
    loop {
        match master.read(&mut buf) {
            Ok(n) if n > 0 => out.extend_from_slice(&buf[..n]),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
        match exited {
            Some((status, at)) if Instant::now() > at + Duration::from_millis(200) => {
                while let Ok(n @ 1..) = master.read(&mut buf) {
                    out.extend_from_slice(&buf[..n]);
                }
                let status: std::process::ExitStatus = status;
                // Reaped already (try_wait); this only returns its status again.
                let _ = child.wait();
                assert!(status.success(), "{}", String::from_utf8_lossy(&out));
                out.retain(|&b| b != b'\r');
                return out;
            }
            Some(_) => {}
            None => {
                if let Some(s) = child.try_wait().unwrap() {
                    exited = Some((s, Instant::now()));
                }
            }
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out: {}", String::from_utf8_lossy(&out));
        }
    }
}

/// Starts `cmd` on a new terminal (stdin, stdout, stderr and controlling terminal, as a
/// shell's foreground job): its master side (non-blocking) and the child.
fn spawn_on_terminal(cmd: StdCommand) -> (File, std::process::Child) {
    let (master, _, child) = spawn_on_terminal_keeping(cmd);
    (master, child)
}

/// [`spawn_on_terminal`], and the test's own fd of the terminal's slave side, which
/// reads what nobody else has read of the terminal's input.
fn spawn_on_terminal_keeping(mut cmd: StdCommand) -> (File, OwnedFd, std::process::Child) {
    let (master, slave) = openpty();
    cmd.stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave.try_clone().unwrap());
    // SAFETY: the closure runs in the forked child before exec and only makes two system
    // calls (setsid, ioctl), which allocate nothing and take no lock.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    (master, slave, child)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The terminal got every kept sequence whole and none of the dropped ones.
fn check(out: &[u8]) {
    let shown = String::from_utf8_lossy(out);
    let mut want = Vec::new();
    for (_, kept) in KEPT {
        assert!(contains(out, kept), "{kept:?} missing: {shown:?}");
        want.extend_from_slice(b"--");
        want.extend_from_slice(kept);
    }
    for (_, marker) in DROPPED {
        assert!(
            !contains(out, marker),
            "{marker:?} reached the terminal: {shown:?}"
        );
        want.extend_from_slice(b"--");
    }
    want.extend_from_slice(b"--end\n");
    assert!(contains(out, &want), "{shown:?}");
}

#[test]
fn the_callers_terminal_gets_colours_and_titles_but_no_clipboard_write_or_request() {
    require!(Feature::UserNs);
    let ws = workspace();
    // The program's own terminal (stdout is the slave), and /dev/tty.
    for target in ["1", "tty"] {
        check(&on_terminal(stockade(ws.path(), &[], target)));
    }
}

#[test]
fn with_scrub_the_piped_output_bound_for_a_terminal_is_filtered_too() {
    require!(Feature::UserNs);
    let ws = workspace();
    for target in ["1", "tty"] {
        check(&on_terminal(stockade(ws.path(), &["--scrub"], target)));
    }
}

/// Output to a pipe is no terminal's: it is passed as the program wrote it.
#[test]
fn output_to_a_pipe_is_not_filtered() {
    require!(Feature::UserNs);
    let ws = workspace();
    let out = stockade(ws.path(), &[], "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (_, marker) in DROPPED {
        assert!(contains(&out.stdout, marker), "{marker:?}");
    }
}

/// `run --session`: a session's command has no pseudo-terminal, and yet never writes to
/// the caller's terminal itself: its output is copied through the same filter, its stdin
/// and stdout are pipes (the program cannot reconfigure the caller's terminal). With
/// `--no-pty` the terminal itself is handed over, unfiltered, as `run --no-pty` does.
#[test]
fn a_session_commands_output_bound_for_a_terminal_is_filtered() {
    use std::os::unix::fs::PermissionsExt;
    require!(Feature::UserNs);
    let ws = workspace();
    let dir = tempfile::Builder::new()
        .prefix("stockade-filter-socket-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.path().join("s");
    let mut server = Kill(
        StdCommand::new(common::stockade_exe())
            .args(["session", "--socket"])
            .arg(&socket)
            .arg("--workspace")
            .arg(ws.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let server = &mut server.0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        if let Some(st) = server.try_wait().unwrap() {
            let mut err = String::new();
            server
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            if err.contains("Landlock ABI") {
                common::skip("session filter", &err);
                return;
            }
            panic!("the server ended: {st:?}: {err}");
        }
        assert!(Instant::now() < deadline, "no socket");
        std::thread::sleep(Duration::from_millis(5));
    }
    let run = |flags: &[&str], args: &[&str]| {
        let mut cmd = StdCommand::new(common::stockade_exe());
        cmd.arg("run")
            .arg("--session")
            .arg(&socket)
            .args(flags)
            .arg("--")
            .args(args);
        cmd
    };
    check(&on_terminal(run(&[], &["python3", "-c", &script("1")])));
    let ttys = on_terminal(run(
        &[],
        &[
            "python3",
            "-c",
            "import os; print('ttys', os.isatty(0), os.isatty(1), os.isatty(2))",
        ],
    ));
    assert!(
        contains(&ttys, b"ttys False False False"),
        "{}",
        String::from_utf8_lossy(&ttys)
    );
    // A client in the background of its terminal (a job of its own process group, not
    // the foreground one) does not read the terminal, which would stop it (`SIGTTIN`)
    // with its command's output uncopied; it runs to its end.
    let background = on_terminal({
        let mut cmd = StdCommand::new("python3");
        cmd.args([
            "-c",
            "import os, subprocess, sys\n\
             p = subprocess.Popen(sys.argv[1:], preexec_fn=lambda: os.setpgid(0, 0))\n\
             try:\n\
             \x20   print('client-exit', p.wait(timeout=15), flush=True)\n\
             except subprocess.TimeoutExpired:\n\
             \x20   print('client-stuck', flush=True)\n\
             \x20   p.kill()\n",
        ])
        .arg(common::stockade_exe())
        .args(["run", "--session"])
        .arg(&socket)
        .args(["--", "sh", "-c", "echo from-background"]);
        cmd
    });
    let shown = String::from_utf8_lossy(&background);
    assert!(contains(&background, b"from-background"), "{shown}");
    assert!(contains(&background, b"client-exit 0"), "{shown}");
    // The opt-in: the terminal itself, and what the program writes reaches it as written.
    let raw = on_terminal(run(&["--no-pty"], &["python3", "-c", &script("1")]));
    assert!(
        contains(&raw, b"cm0gLXJmIH4K"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    let ttys = on_terminal(run(
        &["--no-pty"],
        &[
            "python3",
            "-c",
            "import os; print('ttys', os.isatty(0), os.isatty(1))",
        ],
    ));
    assert!(
        contains(&ttys, b"ttys True True"),
        "{}",
        String::from_utf8_lossy(&ttys)
    );
    // SAFETY: kill takes a pid and a signal number; the pid is our unreaped child's.
    assert_eq!(unsafe { libc::kill(server.id() as i32, libc::SIGTERM) }, 0);
    assert_eq!(server.wait().unwrap().code(), Some(128 + libc::SIGTERM));
}

/// A server killed when its test ends without ending it (a failed assertion).
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A program that ends with the caller's terminal in modes of its own (mouse reports,
/// bracketed paste, the cursor hidden, hidden text, line-drawing characters) leaves none
/// of them: the relay writes what turns them back after its last output. A program that
/// put its modes back itself gets nothing added.
#[test]
fn modes_a_program_leaves_on_are_turned_back_after_it() {
    require!(Feature::UserNs);
    let ws = workspace();
    let program = |print: &str| {
        let mut cmd = StdCommand::new(common::stockade_exe());
        cmd.arg("run")
            .arg("--workspace")
            .arg(ws.path())
            .args(["--", "python3", "-c"])
            .arg(format!(
                "import sys; sys.stdout.buffer.write({print}); sys.stdout.flush()"
            ));
        cmd
    };
    let left = r"b'left\x1b[?1000;1006h\x1b[?2004h\x1b[?25l\x1b[8m\x1b(0'";
    let out = on_terminal(program(left));
    let end = b"left\x1b[?1000;1006h\x1b[?2004h\x1b[?25l\x1b[8m\x1b(0\
\x1b[?1000;1006;2004l\x1b[?25h\x1b[m\x1b(B";
    assert!(
        contains(&out, end),
        "{}",
        String::from_utf8_lossy(&out).escape_debug()
    );
    let put_back = r"b'back\x1b[?1000h\x1b[?25l\x1b[1m\x1b[?1000l\x1b[?25h\x1b[m.'";
    let out = on_terminal(program(put_back));
    assert!(
        out.ends_with(b"back\x1b[?1000h\x1b[?25l\x1b[1m\x1b[?1000l\x1b[?25h\x1b[m."),
        "{}",
        String::from_utf8_lossy(&out).escape_debug()
    );
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}

/// A shell's `fg` of a run started in the background sends no `SIGCONT` (the job is
/// running): the relay still finds itself in the foreground, sets raw mode and relays the
/// keys (review: they never reached the program, and only ^C got out).
#[test]
fn keys_reach_a_run_brought_to_the_foreground_without_a_sigcont() {
    if !Path::new("/bin/bash").exists() {
        common::skip(
            "keys_reach_a_run_brought_to_the_foreground_without_a_sigcont",
            "needs bash",
        );
        return;
    }
    let ws = workspace();
    let script = format!(
        "{} run --workspace {} -- sh -c 'read l; echo got-$l' & sleep 1; fg %1",
        common::stockade_exe().display(),
        ws.path().display()
    );
    let mut cmd = StdCommand::new("/bin/bash");
    // `-m`: job control, as in an interactive shell (the job has a process group of its
    // own, and `fg` hands it the terminal).
    cmd.args(["-m", "-c", &script]);
    let (mut master, mut child) = spawn_on_terminal(cmd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    let mut typed = false;
    let status = loop {
        while let Ok(n @ 1..) = master.read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        if !typed && start.elapsed() > Duration::from_millis(2500) {
            std::io::Write::write_all(&mut master, b"hello\n").unwrap();
            typed = true;
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no end: {}", String::from_utf8_lossy(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    while let Ok(n @ 1..) = master.read(&mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    assert!(status.success(), "{}", String::from_utf8_lossy(&out));
    assert!(
        contains(&out, b"got-hello"),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

/// The caller's terminal gets its modes back as soon as the program has ended, before
/// the checks of what the run left (here the walk of 80 000 directories for nested
/// repositories, which takes the CLI a second or more after the program's exit): from
/// review, the terminal stayed raw through them and typed keys echoed nothing.
#[test]
fn the_callers_terminal_is_restored_before_the_checks_after_the_run() {
    let ws = workspace();
    let mut cmd = StdCommand::new(common::stockade_exe());
    cmd.arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "sh", "-c"])
        .arg("mkdir d && cd d && seq 1 80000 | xargs mkdir && echo MARK-DONE");
    let (mut master, slave, mut child) = spawn_on_terminal_keeping(cmd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let end = Instant::now() + Duration::from_secs(120);
    let mut done_at = None;
    let mut cooked_while_running = false;
    let mut raw_before = false;
    let status = loop {
        while let Ok(n @ 1..) = master.read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        if done_at.is_none() && contains(&out, b"MARK-DONE") {
            done_at = Some(Instant::now());
        }
        let canonical = rustix::termios::tcgetattr(&master)
            .is_ok_and(|t| t.local_modes.contains(rustix::termios::LocalModes::ICANON));
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if done_at.is_some() && canonical && !cooked_while_running {
            cooked_while_running = true;
            // The caller types the shell's next command while the CLI checks the run.
            std::io::Write::write_all(&mut master, b"typed-during-the-checks\n").unwrap();
        }
        if done_at.is_none() && !canonical {
            raw_before = true;
        }
        assert!(
            Instant::now() < end,
            "timed out: {}",
            String::from_utf8_lossy(&out)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{}", String::from_utf8_lossy(&out));
    assert!(
        raw_before,
        "the terminal was never raw while the program ran"
    );
    let after = done_at.expect("the program's mark").elapsed();
    assert!(
        after > Duration::from_millis(300),
        "the checks after the run took {after:?}: too short to tell (more directories)"
    );
    assert!(
        cooked_while_running,
        "the terminal stayed raw until the CLI ended ({after:?} after the program)"
    );
    // What was typed then is still the terminal's, for the shell: the relay read none
    // of it for the program's terminal.
    let flags = rustix::fs::fcntl_getfl(&slave).unwrap();
    rustix::fs::fcntl_setfl(&slave, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    let mut left = [0u8; 64];
    let n = rustix::io::read(&slave, &mut left).unwrap_or(0);
    assert_eq!(
        String::from_utf8_lossy(&left[..n]),
        "typed-during-the-checks\n",
        "the line typed during the checks went elsewhere"
    );
}
