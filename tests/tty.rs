//! The caller's terminal and files stay the caller's: `stockade run` on a terminal gives
//! the program a pseudo-terminal of its own (its controlling terminal, with the caller's
//! modes and window size, relayed both ways) and restores the caller's terminal; a file
//! as stdio reaches the program as a pipe. `Command::controlling_terminal`, which the CLI
//! uses, on both layers.
//!
//! The tests play the terminal: they open a pseudo-terminal, start `stockade run` on its
//! slave as the session leader that owns it (as a login shell's job would), type into the
//! master and read what appears there.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command as StdCommand, ExitStatus, Stdio as StdStdio};
use std::time::{Duration, Instant};

use common::Feature;
use rustix::termios::{self, Termios, Winsize};
use stockade::error::Errno;
use stockade::{Error, Layer, Policy, Sandbox, SpawnError, Stdio};

/// The caller's terminal: a pseudo-terminal whose slave is the caller's stdio and whose
/// master is the test.
struct Terminal {
    master: File,
    slave: OwnedFd,
    /// `/dev/pts/N` of the slave.
    path: String,
}

const ROWS: u16 = 40;
const COLS: u16 = 100;

impl Terminal {
    fn new() -> Terminal {
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
        termios::tcsetwinsize(&slave, size(ROWS, COLS)).unwrap();
        let flags = rustix::fs::fcntl_getfl(&master).unwrap();
        rustix::fs::fcntl_setfl(&master, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
        Terminal {
            master: File::from(master),
            slave,
            path: name.into_string().unwrap(),
        }
    }

    /// The caller's terminal modes (compare with [`same`]).
    fn modes(&self) -> Termios {
        termios::tcgetattr(&self.slave).unwrap()
    }

    fn size(&self) -> (u16, u16) {
        let w = termios::tcgetwinsize(&self.slave).unwrap();
        (w.ws_row, w.ws_col)
    }

    /// A copy of the slave for a child's stdio.
    fn stdio(&self) -> StdStdio {
        StdStdio::from(self.slave.try_clone().unwrap())
    }
}

/// Whether two sets of terminal modes are the same (flags, control characters, speeds).
fn same(a: &Termios, b: &Termios) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

fn size(rows: u16, cols: u16) -> Winsize {
    Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// `stockade run --workspace WS [flags] -- program…` on `term` (each of stdin, stdout and
/// stderr, unless `cmd_io` sets them), as the session leader whose controlling terminal it
/// is, the way a shell starts a foreground job.
fn stockade_on(
    term: &Terminal,
    ws: &Path,
    flags: &[&str],
    program: &[&str],
    cmd_io: impl FnOnce(&mut StdCommand),
) -> std::process::Child {
    let mut cmd = StdCommand::new(common::stockade_exe());
    cmd.arg("run")
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .arg("--")
        .args(program)
        .stdin(term.stdio())
        .stdout(term.stdio())
        .stderr(term.stdio());
    cmd_io(&mut cmd);
    // SAFETY: the closure runs in the forked child before exec and only makes two system
    // calls (setsid, ioctl), which allocate nothing and take no lock.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            // The slave is the child's stdin (or stdout), and its session has no terminal.
            let fd = if termios::isatty(rustix::stdio::stdin()) {
                rustix::stdio::stdin()
            } else {
                rustix::stdio::stdout()
            };
            rustix::process::ioctl_tiocsctty(fd)?;
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// What the test does once some text has appeared on the terminal.
#[derive(Clone, Copy)]
enum Act<'a> {
    /// Type these keys.
    Type(&'a [u8]),
    /// Resize the caller's terminal (the kernel signals its foreground group, stockade).
    Resize(u16, u16),
    /// Send this signal to stockade.
    Signal(i32),
}

/// What the terminal showed, how the run ended, and the caller's modes at the first act.
struct Conversation {
    status: ExitStatus,
    /// The output, without carriage returns.
    out: String,
    modes_at_first_act: Option<Termios>,
}

/// Reads the master until `child` has exited (and a moment more, for the last output),
/// doing each `(after, act)` once `after` has appeared. Gives up after 30 s.
fn converse(
    term: &Terminal,
    child: &mut std::process::Child,
    script: &[(&str, Act<'_>)],
) -> Conversation {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let mut next = 0;
    let mut modes_at_first_act = None;
    let end = Instant::now() + Duration::from_secs(30);
    let mut exited: Option<(ExitStatus, Instant)> = None;
    let mut master = &term.master;
    loop {
        match master.read(&mut buf) {
            Ok(n) if n > 0 => out.extend_from_slice(&buf[..n]),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
        if let Some((after, act)) = script.get(next) {
            if String::from_utf8_lossy(&out).contains(after) {
                if next == 0 {
                    modes_at_first_act = Some(term.modes());
                }
                match *act {
                    Act::Type(keys) => type_keys(master, keys, &mut out),
                    Act::Resize(rows, cols) => {
                        termios::tcsetwinsize(&term.master, size(rows, cols)).unwrap()
                    }
                    Act::Signal(sig) => {
                        let pid = rustix::process::Pid::from_child(child);
                        let sig = rustix::process::Signal::from_named_raw(sig).unwrap();
                        rustix::process::kill_process(pid, sig).unwrap();
                    }
                }
                next += 1;
            }
        }
        match exited {
            Some((status, at)) if at.elapsed() > Duration::from_millis(200) => {
                // A non-blocking read of a master waits for input still being passed on,
                // so WouldBlock means everything written has been read.
                while let Ok(n @ 1..) = master.read(&mut buf) {
                    out.extend_from_slice(&buf[..n]);
                }
                return Conversation {
                    status,
                    out: String::from_utf8_lossy(&out).replace('\r', ""),
                    modes_at_first_act,
                };
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
            panic!(
                "timed out; output so far: {:?}",
                String::from_utf8_lossy(&out)
            );
        }
    }
}

/// Writes `keys` to the (non-blocking) master, reading what appears meanwhile into `out`
/// so that neither side waits on the other.
fn type_keys(mut master: &File, mut keys: &[u8], out: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    let end = Instant::now() + Duration::from_secs(30);
    while !keys.is_empty() {
        match master.write(keys) {
            Ok(n) => keys = &keys[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Ok(n) = master.read(&mut buf) {
                    out.extend_from_slice(&buf[..n]);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("typing: {e}"),
        }
        assert!(Instant::now() < end, "typing timed out");
    }
}

/// A workspace outside `/tmp` (the sandbox's own `/tmp` is private and hides mistakes).
fn outside_tmp() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("stockade-tty-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .or_else(|_| {
            tempfile::Builder::new()
                .prefix("stockade-tty-")
                .tempdir_in("/var/tmp")
        })
        .expect("temp dir outside /tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn layer_flag(layer: Layer) -> [&'static str; 4] {
    let name = match layer {
        Layer::Full => "full",
        Layer::Landlock => "landlock",
        _ => "passthrough",
    };
    ["--layer", name, "--fallback", "refuse"]
}

const LAYERS: [Layer; 2] = [Layer::Full, Layer::Landlock];

#[test]
fn the_program_gets_a_terminal_of_its_own_with_the_callers_size() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    for layer in LAYERS {
        let term = Terminal::new();
        // The program's terminal as the kernel names it and as `tty` names it (layer 2:
        // the host's devpts; the full layer: the sandbox's own, where the pseudo-terminal
        // is opened, `/dev/pts/0`), its size, and that it is the program's controlling
        // terminal.
        let script = "echo fd0=$(readlink /proc/self/fd/0); echo tty=$(tty); \
                      echo size=$(stty size); exec 3</dev/tty && echo ctty=yes; exit 3";
        let flags = layer_flag(layer);
        let mut child = stockade_on(&term, ws.path(), &flags, &["sh", "-c", script], |_| {});
        let c = converse(&term, &mut child, &[]);
        let out = &c.out;
        assert_eq!(c.status.code(), Some(3), "{layer}: {out}");
        let fd0 = out
            .lines()
            .find_map(|l| l.strip_prefix("fd0="))
            .unwrap_or_else(|| panic!("{layer}: {out}"));
        assert!(fd0.starts_with("/dev/pts/"), "{layer}: {out}");
        if layer == Layer::Landlock {
            assert_ne!(
                fd0, term.path,
                "{layer}: the program has the caller's terminal: {out}"
            );
        } else {
            assert_eq!(
                fd0, "/dev/pts/0",
                "{layer}: the sandbox's own devpts: {out}"
            );
        }
        assert!(out.contains(&format!("tty={fd0}\n")), "{layer}: {out}");
        assert!(
            out.contains(&format!("size={ROWS} {COLS}\n")),
            "{layer}: {out}"
        );
        assert!(out.contains("ctty=yes\n"), "{layer}: {out}");
    }
}

#[test]
fn the_program_cannot_change_the_callers_terminal() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    // Every way a program changes its terminal: modes, size (which would signal the
    // caller's shell), and the line discipline (denied by seccomp anyway).
    let script = "import fcntl, os, struct, subprocess, termios\n\
                  subprocess.run(['stty', 'cols', '33', 'rows', '11', '-echo', '-icanon', '-isig'])\n\
                  fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack('HHHH', 12, 34, 0, 0))\n\
                  for fd in (0, 1, 2):\n\
                  \x20   try:\n\
                  \x20       fcntl.ioctl(fd, termios.TIOCSETD, struct.pack('i', 2))\n\
                  \x20       print('TIOCSETD OK')\n\
                  \x20   except OSError as e:\n\
                  \x20       print('TIOCSETD', e.errno)\n\
                  size = os.get_terminal_size(1)\n\
                  print('size', size.lines, size.columns)\n";
    for layer in LAYERS {
        let term = Terminal::new();
        let before = term.modes();
        let flags = layer_flag(layer);
        let mut child = stockade_on(&term, ws.path(), &flags, &["python3", "-c", script], |_| {});
        let c = converse(&term, &mut child, &[]);
        let out = &c.out;
        assert!(c.status.success(), "{layer}: {out}");
        // The program changed its own terminal…
        assert!(out.contains("size 12 34"), "{layer}: {out}");
        assert!(!out.contains("TIOCSETD OK"), "{layer}: {out}");
        // …and the caller's is as it was.
        assert_eq!(term.size(), (ROWS, COLS), "{layer}: {out}");
        assert!(
            same(&term.modes(), &before),
            "{layer}: the caller's modes changed: {out}"
        );
    }
}

#[test]
fn typed_input_reaches_the_program_and_the_callers_modes_come_back() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    // The program's terminal starts in the caller's modes (canonical, echo): it echoes
    // the keys and hands over a line at Enter.
    let script = "import sys, termios\n\
                  cooked = termios.tcgetattr(0)[3] & termios.ICANON\n\
                  print('program: cooked' if cooked else 'program: raw')\n\
                  print('ready', flush=True)\n\
                  print('got', input())\n\
                  sys.exit(5)\n";
    for layer in LAYERS {
        let term = Terminal::new();
        let before = term.modes();
        let flags = layer_flag(layer);
        let mut child = stockade_on(&term, ws.path(), &flags, &["python3", "-c", script], |_| {});
        let c = converse(&term, &mut child, &[("ready", Act::Type(b"hello there\r"))]);
        let out = &c.out;
        assert_eq!(c.status.code(), Some(5), "{layer}: {out}");
        assert!(
            out.contains("hello there\ngot hello there\n"),
            "{layer}: {out}"
        );
        assert!(out.contains("program: cooked"), "{layer}: {out}");
        // While the program ran, the caller's terminal was raw: no echo, no line editing.
        let during = c.modes_at_first_act.expect("typed");
        assert!(
            !during.local_modes.contains(termios::LocalModes::ICANON)
                && !during.local_modes.contains(termios::LocalModes::ECHO),
            "{layer}: the caller's terminal was not raw during the run"
        );
        assert!(
            same(&term.modes(), &before),
            "{layer}: the caller's modes were not restored: {out}"
        );
    }
}

#[test]
fn input_typed_before_the_program_reads_is_kept() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    // More than the terminal's queues hold while the program is busy elsewhere: the relay
    // waits for room instead of dropping the rest.
    let keys = vec![b'k'; 200_000];
    let script = "import os, sys, termios, time, tty\n\
                  tty.setraw(0)\n\
                  print('ready', flush=True)\n\
                  time.sleep(1)\n\
                  n = 0\n\
                  while n < 200000:\n\
                  \x20   n += len(os.read(0, 65536))\n\
                  termios.tcsetattr(0, termios.TCSANOW, termios.tcgetattr(1))\n\
                  print('read', n, flush=True)\n";
    for layer in LAYERS {
        let term = Terminal::new();
        let flags = layer_flag(layer);
        let mut child = stockade_on(&term, ws.path(), &flags, &["python3", "-c", script], |_| {});
        let c = converse(&term, &mut child, &[("ready", Act::Type(&keys))]);
        assert!(c.status.success(), "{layer}: {}", c.out);
        assert!(c.out.contains("read 200000"), "{layer}: {}", c.out);
    }
}

#[test]
fn a_resized_caller_resizes_the_programs_terminal() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    // SIGWINCH is blocked and waited for, so that it cannot interrupt the program's own
    // output of `ready`.
    let script = "import os, signal\n\
                  signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGWINCH})\n\
                  print('ready', flush=True)\n\
                  signal.sigwait({signal.SIGWINCH})\n\
                  s = os.get_terminal_size(0)\n\
                  print('winch', s.lines, s.columns, flush=True)\n";
    for layer in LAYERS {
        let term = Terminal::new();
        let flags = layer_flag(layer);
        let mut child = stockade_on(&term, ws.path(), &flags, &["python3", "-c", script], |_| {});
        let c = converse(&term, &mut child, &[("ready", Act::Resize(21, 77))]);
        assert!(c.status.success(), "{layer}: {}", c.out);
        assert!(c.out.contains("winch 21 77"), "{layer}: {}", c.out);
    }
}

#[test]
fn a_terminating_signal_restores_the_callers_terminal() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let term = Terminal::new();
        let before = term.modes();
        let mut child = stockade_on(
            &term,
            ws.path(),
            &[],
            &["sh", "-c", "echo ready; exec sleep 1000"],
            |_| {},
        );
        let c = converse(&term, &mut child, &[("ready", Act::Signal(sig))]);
        let raw = c.modes_at_first_act.expect("signalled");
        assert!(!raw.local_modes.contains(termios::LocalModes::ICANON));
        // stockade died of the signal (or, forwarding it, exited as the program did).
        assert!(
            c.status.signal() == Some(sig) || c.status.code() == Some(128 + sig),
            "{sig}: {:?} {}",
            c.status,
            c.out
        );
        assert!(
            same(&term.modes(), &before),
            "signal {sig}: the caller's modes were not restored"
        );
    }
}

#[test]
fn a_stopped_run_gives_the_terminal_back_until_it_continues() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let term = Terminal::new();
    let before = term.modes();
    let mut child = stockade_on(
        &term,
        ws.path(),
        &[],
        &["sh", "-c", "echo ready; exec sleep 1000"],
        |_| {},
    );
    let pid = rustix::process::Pid::from_child(&child);
    let raw = |t: &Terminal| !t.modes().local_modes.contains(termios::LocalModes::ICANON);
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.chars().next().unwrap()
    };
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let within = |what: &str, f: &mut dyn FnMut() -> bool| {
        let end = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < end, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    within("ready", &mut || {
        if let Ok(n) = (&term.master).read(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).contains("ready")
    });
    assert!(raw(&term));
    let send = |sig| rustix::process::kill_process(pid, sig).unwrap();
    // Stopped: the caller's shell gets the terminal back in its own modes.
    send(rustix::process::Signal::TSTP);
    within("the stop", &mut || state() == 'T');
    assert!(same(&term.modes(), &before), "modes while stopped");
    // Continued in the foreground: raw again.
    send(rustix::process::Signal::CONT);
    within("raw mode again", &mut || raw(&term));
    send(rustix::process::Signal::TERM);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert!(same(&term.modes(), &before), "modes after the run");
}

/// The caller's terminal on stderr alone (stdin from `/dev/null` and stdout to a pipe or a
/// file: a pipeline's middle, output redirected) is not handed over: stderr is piped and
/// copied through the terminal filter. The program got the caller's terminal itself as
/// fd 2 before (HIGH, from review): it changed the caller's modes and size for good, read
/// what was typed, stopped the terminal's output, and wrote any escape sequence to it
/// (an OSC 52 clipboard write here).
#[test]
fn a_terminal_on_stderr_alone_is_not_handed_over() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let script = "import fcntl, struct, subprocess, sys, termios\n\
                  subprocess.run(['stty', '-echo', '-icanon', 'rows', '5', 'cols', '9'], stdin=2, stderr=subprocess.DEVNULL)\n\
                  try:\n\
                  \x20   fcntl.ioctl(2, termios.TIOCSWINSZ, struct.pack('HHHH', 5, 9, 0, 0))\n\
                  \x20   print('resized', file=sys.stderr)\n\
                  except OSError as e:\n\
                  \x20   print('TIOCSWINSZ', e.errno, file=sys.stderr)\n\
                  sys.stderr.write('X\\x1b]52;c;cHduZWQ=\\x07Y\\n')\n";
    for layer in LAYERS {
        let term = Terminal::new();
        let before = term.modes();
        let mut cmd = StdCommand::new(common::stockade_exe());
        cmd.arg("run")
            .arg("--workspace")
            .arg(ws.path())
            .args(layer_flag(layer))
            .args(["--", "python3", "-c", script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(term.stdio());
        // SAFETY: the closure runs in the forked child before exec and only makes two
        // system calls (setsid, ioctl), which allocate nothing and take no lock.
        unsafe {
            cmd.pre_exec(|| {
                rustix::process::setsid()?;
                rustix::process::ioctl_tiocsctty(rustix::stdio::stderr())?;
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let c = converse(&term, &mut child, &[]);
        let out = &c.out;
        assert!(c.status.success(), "{layer}: {out}");
        assert!(
            out.contains(&format!("TIOCSWINSZ {}", libc::ENOTTY)),
            "{layer}: {out:?}"
        );
        assert!(out.contains("XY"), "{layer}: {out:?}");
        assert!(
            !out.contains("]52"),
            "{layer}: the clipboard write got through: {out:?}"
        );
        assert_eq!(term.size(), (ROWS, COLS), "{layer}: {out}");
        assert!(
            same(&term.modes(), &before),
            "{layer}: the caller's modes changed: {out}"
        );
    }
}

#[test]
fn no_pty_and_keep_session_hand_over_the_callers_terminal() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    for flag in ["--no-pty", "--keep-session"] {
        let term = Terminal::new();
        let mut child = stockade_on(
            &term,
            ws.path(),
            &[flag],
            &["sh", "-c", "echo fd0=$(readlink /proc/self/fd/0)"],
            |_| {},
        );
        let c = converse(&term, &mut child, &[]);
        assert!(c.status.success(), "{flag}: {}", c.out);
        assert!(
            c.out.contains(&format!("fd0={}\n", term.path)),
            "{flag}: {}",
            c.out
        );
    }
}

#[test]
fn a_run_in_the_background_leaves_the_terminal_alone() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let term = Terminal::new();
    let before = term.modes();
    // An interactive shell's background job: its own process group, not the terminal's
    // foreground one. Taking the terminal (raw mode, reading it) would stop it (SIGTTOU,
    // SIGTTIN); it runs to the end and its output appears.
    let script =
        r#""$0" run --workspace "$1" -- sh -c 'sleep 0.5; echo bg-done' & wait $!; echo "job $?""#;
    let mut child = StdCommand::new("bash");
    child
        .args(["-mc", script])
        .arg(common::stockade_exe())
        .arg(ws.path())
        .stdin(term.stdio())
        .stdout(term.stdio())
        .stderr(term.stdio());
    // SAFETY: as in `stockade_on`: two system calls, no allocation, no lock.
    unsafe {
        child.pre_exec(|| {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
            Ok(())
        });
    }
    let mut child = child.spawn().unwrap();
    let c = converse(&term, &mut child, &[]);
    assert!(c.status.success(), "{}", c.out);
    assert!(
        c.out.contains("bg-done\n") && c.out.contains("job 0\n"),
        "{}",
        c.out
    );
    assert!(same(&term.modes(), &before));
}

#[test]
fn scrub_redacts_what_the_program_writes_to_its_terminal() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let term = Terminal::new();
    // Written to stdout (piped and redacted), and to the terminal itself: fd 0 and
    // /dev/tty, which are the program's own terminal, relayed through the redactor.
    let secret = format!("s3cr3t-{}", "x9".repeat(8));
    let kv = format!("K={secret}");
    let mut child = stockade_on(
        &term,
        ws.path(),
        &["--secret-env", &kv, "--scrub"],
        &[
            "sh",
            "-c",
            "echo out $K; echo fd0 $K >&0; echo tty $K > /dev/tty",
        ],
        |_| {},
    );
    let c = converse(&term, &mut child, &[]);
    assert!(c.status.success(), "{}", c.out);
    assert!(!c.out.contains(&secret), "{}", c.out);
    for line in ["out [REDACTED]", "fd0 [REDACTED]", "tty [REDACTED]"] {
        assert!(c.out.contains(line), "{line}: {}", c.out);
    }
}

/// A file with `text`, mode 0640, in `dir` (outside `/tmp`).
fn fixture(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    p
}

fn mode_and_mtime(p: &Path) -> (u32, i64) {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(p).unwrap();
    (md.mode() & 0o7777, md.mtime())
}

#[test]
fn files_as_stdio_cannot_be_changed_through_the_fd() {
    require!(Feature::UserNs);
    let dir = outside_tmp();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    // Through each fd: the mode, the size, the times. Each attempt prints its outcome;
    // what matters is what is left of the caller's files.
    let script = "import os\n\
                  for fd in (0, 1, 2):\n\
                  \x20   for name, f in (('fchmod', lambda: os.fchmod(fd, 0)),\n\
                  \x20                   ('ftruncate', lambda: os.ftruncate(fd, 0)),\n\
                  \x20                   ('utime', lambda: os.utime(fd, (0, 0)))):\n\
                  \x20       try:\n\
                  \x20           f()\n\
                  \x20           print(name, fd, 'OK')\n\
                  \x20       except OSError as e:\n\
                  \x20           print(name, fd, e.errno)\n\
                  print('in:', input())\n\
                  print('normal output', flush=True)\n\
                  os.write(2, b'normal error\\n')\n";
    for layer in LAYERS {
        let input = fixture(dir.path(), "in", "line one\nline two\n");
        let out = fixture(dir.path(), "out", "earlier out\n");
        let err = fixture(dir.path(), "err", "earlier err\n");
        let stamps = [&input, &out, &err].map(|p| mode_and_mtime(p));
        // stdout as with `>>`, stderr as with `>` after what the caller wrote itself.
        let stdin = File::open(&input).unwrap();
        let stdout = std::fs::OpenOptions::new().append(true).open(&out).unwrap();
        let mut stderr = std::fs::OpenOptions::new().write(true).open(&err).unwrap();
        use std::io::Seek;
        stderr.seek(std::io::SeekFrom::End(0)).unwrap();
        let result = StdCommand::new(common::stockade_exe())
            .arg("run")
            .arg("--workspace")
            .arg(&ws)
            .args(layer_flag(layer))
            .args(["--", "python3", "-c", script])
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr)
            .status()
            .unwrap();
        let text = |p: &Path| std::fs::read_to_string(p).unwrap();
        let out_text = text(&out);
        assert!(result.success(), "{layer}: {out_text}{}", text(&err));
        assert!(
            out_text.starts_with("earlier out\n")
                && out_text.ends_with("in: line one\nnormal output\n"),
            "{layer}: {out_text}"
        );
        assert_eq!(text(&err), "earlier err\nnormal error\n", "{layer}");
        assert_eq!(text(&input), "line one\nline two\n", "{layer}");
        for (p, (mode, mtime)) in [&input, &out, &err].into_iter().zip(stamps) {
            let (now_mode, now_mtime) = mode_and_mtime(p);
            assert_eq!(
                now_mode,
                mode,
                "{layer}: {} changed mode: {out_text}",
                p.display()
            );
            assert!(
                now_mtime >= mtime,
                "{layer}: {} went back in time: {out_text}",
                p.display()
            );
        }
    }
}

#[test]
fn output_to_a_file_lands_at_the_callers_offset() {
    require!(Feature::UserNs);
    let dir = outside_tmp();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let file = dir.path().join("log");
    for (redirect, want) in [
        (">", "earlier\nprogram\nerror\nlater\n"),
        (">>", "old\nearlier\nprogram\nerror\nlater\n"),
    ] {
        std::fs::write(&file, "old\n").unwrap();
        let script = format!(
            r#"{{ echo earlier; "$0" run --workspace "$1" -- sh -c 'echo program; echo error >&2'; echo later; }} {redirect} "$2" 2>&1"#
        );
        let status = StdCommand::new("sh")
            .args(["-c", &script])
            .arg(common::stockade_exe())
            .arg(&ws)
            .arg(&file)
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), want, "{redirect}");
    }
}

#[test]
fn root_only_dev_null_as_stdio_stays_the_hosts() {
    require!(Feature::UserNs);
    require!(Feature::Root);
    use std::os::unix::fs::MetadataExt;
    let ws = outside_tmp();
    // A root caller owns /dev/null, and the program's uid is the caller's: through an fd
    // of the host's /dev/null it could chmod it for the whole host. The mode given is the
    // one /dev/null has, so that a failure of this test does no harm; the change time
    // says whether the call reached the host's node.
    let null = std::fs::metadata("/dev/null").unwrap();
    let script = "import os\n\
                  for fd in (0, 1, 2):\n\
                  \x20   try:\n\
                  \x20       os.fchmod(fd, 0o666)\n\
                  \x20   except OSError as e:\n\
                  \x20       print(fd, e.errno)\n";
    let out = StdCommand::new(common::stockade_exe())
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "python3", "-c", script])
        .stdin(File::open("/dev/null").unwrap())
        .stdout(File::create("/dev/null").unwrap())
        .stderr(File::create("/dev/null").unwrap())
        .status()
        .unwrap();
    assert!(out.success());
    let after = std::fs::metadata("/dev/null").unwrap();
    assert_eq!(after.mode(), null.mode());
    assert_eq!(
        (after.ctime(), after.ctime_nsec()),
        (null.ctime(), null.ctime_nsec()),
        "the program changed the host's /dev/null through its stdio"
    );
}

#[test]
fn root_only_stdio_null_is_not_the_hosts_to_change() {
    require!(Feature::UserNs);
    require!(Feature::Root);
    use std::os::unix::fs::MetadataExt;
    let ws = outside_tmp();
    // `Stdio::null()`, which `output()` gives stdin: for a root host the program owns the
    // node behind the fd. Mode as it is, so that a failure does no harm; the change time
    // tells whether a call reached the host's node.
    let code = "import os\n\
                for fd in (0, 1, 2):\n\
                \x20   for f in (lambda: os.fchmod(fd, 0o666), lambda: os.utime(fd)):\n\
                \x20       try:\n\
                \x20           f()\n\
                \x20       except OSError as e:\n\
                \x20           assert e.errno == 30, e\n\
                os.write(1, b'written')\n\
                print(len(os.read(0, 10)))\n";
    for layer in LAYERS {
        let before = std::fs::metadata("/dev/null").unwrap();
        let sb = Sandbox::new(Policy {
            layer: Some(layer),
            fallback: stockade::Fallback::Refuse,
            ..Policy::with_workspace(ws.path())
        })
        .unwrap();
        let out = sb
            .command("python3")
            .args(["-c", code])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{layer}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let after = std::fs::metadata("/dev/null").unwrap();
        assert_eq!(
            (after.mode(), after.ctime(), after.ctime_nsec()),
            (before.mode(), before.ctime(), before.ctime_nsec()),
            "{layer}: the program changed the host's /dev/null"
        );
    }
}

#[test]
fn root_only_device_nodes_inside_cannot_be_changed() {
    require!(Feature::UserNs);
    require!(Feature::Root);
    use std::os::unix::fs::MetadataExt;
    let ws = outside_tmp();
    // The full layer's /dev/null, /dev/zero, /dev/tty, … are the host's inodes; for a root
    // host the program's uid owns them. The mode given is the one they have, so that a
    // failure of this test does no harm; the change time says whether a call reached
    // the host's node. Reading and writing the devices goes on.
    let nodes = ["/dev/null", "/dev/zero", "/dev/full", "/dev/urandom"];
    let before: Vec<_> = nodes
        .iter()
        .map(|n| std::fs::metadata(n).unwrap().ctime_nsec())
        .collect();
    let script = "for n in null zero full urandom; do \
                  chmod 666 /dev/$n 2>/dev/null; echo chmod $n $?; \
                  touch /dev/$n 2>/dev/null; echo touch $n $?; done; \
                  echo x > /dev/null && head -c 3 /dev/zero | od -An -tx1";
    let out = StdCommand::new(common::stockade_exe())
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for n in ["null", "zero", "full", "urandom"] {
        assert!(text.contains(&format!("chmod {n} 1\n")), "{text}");
        assert!(text.contains(&format!("touch {n} 1\n")), "{text}");
    }
    assert!(text.ends_with(" 00 00 00\n"), "{text}");
    let after: Vec<_> = nodes
        .iter()
        .map(|n| std::fs::metadata(n).unwrap().ctime_nsec())
        .collect();
    assert_eq!(before, after, "a device node of the host changed: {text}");
}

/// Runs `python3 -c code` in `sb` with the slave of `term` as stdin, stdout and stderr,
/// `controlling_terminal` as given, and returns the status and what appeared.
fn python_on(sb: &Sandbox, term: &Terminal, controlling: bool, code: &str) -> (ExitStatus, String) {
    program_on(sb, term, controlling, &["python3", "-c", code])
}

/// Runs `argv` in `sb` as [`python_on`] runs Python.
fn program_on(
    sb: &Sandbox,
    term: &Terminal,
    controlling: bool,
    argv: &[&str],
) -> (ExitStatus, String) {
    let slave = || Stdio::from(term.slave.try_clone().unwrap());
    let mut child = sb
        .command(argv[0])
        .args(&argv[1..])
        .stdin(slave())
        .stdout(slave())
        .stderr(slave())
        .controlling_terminal(controlling)
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let mut master = &term.master;
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    (status, String::from_utf8_lossy(&out).replace('\r', ""))
}

/// The full layer's devpts is its own, so the host's name of a terminal the program gets
/// from the host (`/dev/pts/N`) leads nowhere inside; such a terminal (a library caller
/// that passes its pty, with or without making it the controlling terminal) is bound onto
/// `/dev/console`, where `ttyname()` finds it. `stockade run` opens the program's
/// pseudo-terminal from the sandbox's devpts (`Command::pty_like`): it is `/dev/pts/0`
/// there, and nothing is bound. The caller's other terminals stay out of reach.
#[test]
fn the_programs_terminal_has_a_name_inside_and_no_other_host_terminal_is_there() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    // Another terminal of the caller's, open meanwhile. Not the host's `/dev/pts/0`: that
    // name exists inside as the sandbox's own first pty (`stockade run`'s), so a check by
    // name would find the program's own terminal (and `cat` would wait on it).
    let mut spare = Vec::new();
    let other = loop {
        let t = Terminal::new();
        if t.path != "/dev/pts/0" {
            break t;
        }
        spare.push(t);
    };
    let script = format!(
        "t=$(tty) && echo tty=$t; test -t 0 && echo t0; echo size=$(stty size); \
         [ \"$t\" -ef /proc/self/fd/0 ] && echo same; echo reopened > \"$t\"; \
         echo pts=$(ls /dev/pts); test -e {o} || echo other-absent; \
         cat {o} </dev/null 2>/dev/null || echo other-unreachable",
        o = other.path
    );
    let check = |how: &str, out: &str| {
        let (tty, pts) = if how == "stockade run" {
            ("tty=/dev/pts/0", "pts=0 ptmx")
        } else {
            ("tty=/dev/console", "pts=ptmx")
        };
        for line in [
            tty,
            "t0",
            &format!("size={ROWS} {COLS}"),
            "same",
            "reopened",
            pts,
            "other-absent",
            "other-unreachable",
        ] {
            assert!(out.contains(&format!("{line}\n")), "{how}: {line}: {out}");
        }
    };
    let term = Terminal::new();
    let flags = layer_flag(Layer::Full);
    let mut child = stockade_on(&term, ws.path(), &flags, &["sh", "-c", &script], |_| {});
    let c = converse(&term, &mut child, &[]);
    assert!(c.status.success(), "stockade run: {}", c.out);
    check("stockade run", &c.out);
    let sb = Sandbox::new(Policy {
        layer: Some(Layer::Full),
        fallback: stockade::Fallback::Refuse,
        ..Policy::with_workspace(ws.path())
    })
    .unwrap();
    for controlling in [true, false] {
        let term = Terminal::new();
        let (status, out) = program_on(&sb, &term, controlling, &["sh", "-c", &script]);
        assert!(status.success(), "library: {out}");
        check(&format!("library, controlling {controlling}"), &out);
    }
    // Without a terminal among its stdio, there is no console.
    let out = sb
        .command("sh")
        .args(["-c", "test -e /dev/console || echo none"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "none\n");
}

#[test]
fn controlling_terminal_makes_the_terminal_the_programs_own() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    // `/dev/tty` opens the program's controlling terminal (what is written there appears
    // on the test's master), and the terminal's foreground process group is the
    // program's (for any other terminal tcgetpgrp fails with ENOTTY).
    let code = "import os\n\
                try:\n\
                \x20   fd = os.open('/dev/tty', os.O_WRONLY)\n\
                \x20   os.write(fd, b'through dev/tty\\n')\n\
                except OSError as e:\n\
                \x20   print('dev/tty', e.errno)\n\
                try:\n\
                \x20   print('foreground', os.tcgetpgrp(0) == os.getpgrp())\n\
                except OSError as e:\n\
                \x20   print('foreground', e.errno)\n";
    for layer in LAYERS {
        let sb = Sandbox::new(Policy {
            layer: Some(layer),
            fallback: stockade::Fallback::Refuse,
            ..Policy::with_workspace(ws.path())
        })
        .unwrap();
        let term = Terminal::new();
        let (status, out) = python_on(&sb, &term, true, code);
        assert!(status.success(), "{layer}: {out}");
        assert_eq!(out, "through dev/tty\nforeground True\n", "{layer}");
        // Without it, the program's new session has no controlling terminal.
        let term = Terminal::new();
        let (status, out) = python_on(&sb, &term, false, code);
        assert!(status.success(), "{layer}: {out}");
        assert_eq!(
            out,
            format!("dev/tty {}\nforeground {}\n", libc::ENXIO, libc::ENOTTY),
            "{layer}"
        );
    }
}

#[test]
fn controlling_terminal_failures_name_the_step_and_the_errno() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let step = |e: Error| match e {
        Error::Spawn(SpawnError::Setup { step, errno }) => (step.to_string(), errno),
        other => panic!("{other}"),
    };
    for layer in LAYERS {
        let policy = Policy {
            layer: Some(layer),
            fallback: stockade::Fallback::Refuse,
            ..Policy::with_workspace(ws.path())
        };
        // No terminal among the program's stdio.
        let sb = Sandbox::new(policy.clone()).unwrap();
        let err = sb
            .command("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .controlling_terminal(true)
            .spawn()
            .unwrap_err();
        assert_eq!(
            step(err),
            (
                "make the terminal on stdin the controlling terminal (TIOCSCTTY)".into(),
                Errno::ENOTTY
            ),
            "{layer}"
        );
        // The host's session kept: the program is no session leader.
        let sb = Sandbox::new(Policy {
            keep_session: true,
            ..policy
        })
        .unwrap();
        let term = Terminal::new();
        let err = sb
            .command("true")
            .stdin(Stdio::null())
            .stdout(Stdio::from(term.slave.try_clone().unwrap()))
            .controlling_terminal(true)
            .spawn()
            .unwrap_err();
        assert_eq!(
            step(err),
            (
                "make the terminal on stdout the controlling terminal (TIOCSCTTY)".into(),
                Errno::EPERM
            ),
            "{layer}"
        );
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
