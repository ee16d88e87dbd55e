//! `Command::pty`: a pseudo-terminal of the library's own for the program, proven from
//! inside on the full layer and on layer 2 (as root, and as uid 65534 through the re-run):
//! its size, its name (`tty`, `ttyname()`, `/dev/tty`; never `/dev/console`), `SIGWINCH`
//! after `Pty::resize`, an editor driven through it, and explicit stdio left alone.

#![cfg(target_os = "linux")]

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use common::Feature;
use stockade::{Child, Layer, Policy, Pty, Sandbox, Stdio};

/// The layers a test runs on here: full, and landlock (a root host names it on purpose).
use common::LAYERS;

fn sandbox_on(ws: &Path, layer: Layer) -> Sandbox {
    common::sandbox_on(ws, layer, |_| {})
}

/// Everything the program writes to its terminal until every process of the sandbox has
/// closed it, and its exit status. A watchdog ends a program that hangs.
fn run(mut child: Child) -> (String, std::process::ExitStatus) {
    let pty = child.take_pty().expect("the child has a pty");
    let reader = std::thread::spawn(move || read_all(&pty));
    let status = wait_or_kill(&mut child, Duration::from_secs(20));
    let text = reader.join().unwrap();
    (text, status)
}

fn read_all(pty: &Pty) -> String {
    let mut out = Vec::new();
    let mut r = pty;
    r.read_to_end(&mut out).expect("read the pty");
    String::from_utf8_lossy(&out).replace("\r\n", "\n")
}

fn wait_or_kill(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("the program did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads from the pty until `want` has appeared; returns what was read.
fn read_until(pty: &Pty, want: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let mut r = pty;
    while !String::from_utf8_lossy(&seen).contains(want) {
        let n = r.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the terminal ended before {want:?}: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// `stty size` prints the size asked for; `test -t` holds on every stream; the terminal's
/// name is a `/dev/pts` one (the sandbox's own `/dev/pts/0` on the full layer, whose
/// `/dev` is its own), the kernel's name agrees, and `/dev/console` is not it.
#[test]
fn stty_size_and_the_terminals_name() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer);
        let script = "stty size; tty; readlink /proc/self/fd/0; \
                      test -t 0 && test -t 1 && test -t 2 && echo all-terminals; \
                      test -e /dev/console && echo console-exists; \
                      echo via-tty > /dev/tty";
        let child = sb
            .command("sh")
            .args(["-c", script])
            .pty(33, 101)
            .spawn()
            .unwrap();
        let (text, status) = run(child);
        assert!(status.success(), "{layer}: {status:?} {text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"33 101"), "{layer}: {text}");
        let name = lines.get(1).copied().unwrap_or_default();
        assert!(name.starts_with("/dev/pts/"), "{layer}: tty says {text}");
        assert_ne!(name, "/dev/console", "{layer}");
        assert_eq!(lines.get(2).copied(), Some(name), "{layer}: {text}");
        if layer == Layer::Full {
            assert_eq!(name, "/dev/pts/0", "the sandbox's own devpts: {text}");
            // No host terminal is bound into the sandbox's `/dev`.
            assert!(!text.contains("console-exists"), "{layer}: {text}");
        }
        assert!(text.contains("all-terminals\n"), "{layer}: {text}");
        assert!(text.contains("via-tty\n"), "{layer}: /dev/tty: {text}");
    }
}

/// Python's `os.ttyname` (the C library's `ttyname()`) names stdin; `/dev/tty`, the
/// controlling terminal, opens the same terminal, whose foreground group is the program's.
#[test]
fn python_ttyname_works() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let code = "import os\n\
                print(os.ttyname(0))\n\
                fd = os.open('/dev/tty', os.O_RDWR)\n\
                print(os.get_terminal_size(fd) == os.get_terminal_size(0) == (80, 24))\n\
                print(os.tcgetpgrp(fd) == os.getpgrp())\n";
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer);
        let child = sb
            .command("python3")
            .args(["-c", code])
            .pty(24, 80)
            .spawn()
            .unwrap();
        let (text, status) = run(child);
        assert!(status.success(), "{layer}: {status:?} {text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{layer}: {text}");
        assert!(lines[0].starts_with("/dev/pts/"), "{layer}: {text}");
        assert_eq!(
            lines[1], "True",
            "{layer}: /dev/tty is the terminal of 24x80"
        );
        assert_eq!(lines[2], "True", "{layer}: in the terminal's foreground");
    }
}

/// After `Pty::resize` the program, waiting for `SIGWINCH`, reads the new size.
#[test]
fn resize_signals_the_program_the_new_size() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    // `SIGWINCH` blocked before "ready" and taken with `sigwait`: a handler and
    // `signal.pause()` lose a signal that comes between the handler's check and the pause
    // (the test then hung, seen once under load).
    let code = "import os, signal\n\
                signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGWINCH])\n\
                os.write(1, b'ready\\n')\n\
                signal.sigwait([signal.SIGWINCH])\n\
                c, r = os.get_terminal_size(0)\n\
                os.write(1, f'winch {r} {c}\\n'.encode())\n";
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer);
        let mut child = sb
            .command("python3")
            .args(["-c", code])
            .pty(24, 80)
            .spawn()
            .unwrap();
        let pty = child.take_pty().unwrap();
        assert_eq!(pty.size().unwrap(), (24, 80), "{layer}");
        read_until(&pty, "ready");
        pty.resize(40, 132).unwrap();
        assert_eq!(pty.size().unwrap(), (40, 132), "{layer}");
        read_until(&pty, "winch 40 132");
        let status = wait_or_kill(&mut child, Duration::from_secs(20));
        assert!(status.success(), "{layer}: {status:?}");
    }
}

/// `vi -es` runs a script on the terminal, non-interactively, and writes its file; the
/// text it inserts comes from the host through the terminal's input.
#[test]
fn vi_runs_a_script_on_the_pty() {
    require!(Feature::UserNs);
    assert!(
        Path::new("/usr/bin/vi").exists(),
        "vi not found (apt-get install vim-tiny)"
    );
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let _ = std::fs::remove_file(ws.join("out.txt"));
        let sb = sandbox_on(&ws, layer);
        let mut child = sb
            .command("vi")
            .args(["-es", "-u", "NONE", "-i", "NONE"])
            .pty(24, 80)
            .spawn()
            .unwrap();
        // Ex commands, read from the terminal as typed.
        let mut pty = child.take_pty().unwrap();
        pty.write_all(b"call setline(1, ['written by vi', 'on ' . (has('unix') ? 'unix' : '?')])\nwrite out.txt\nquit\n")
            .unwrap();
        let reader = std::thread::spawn(move || read_all(&pty));
        let status = wait_or_kill(&mut child, Duration::from_secs(20));
        let text = reader.join().unwrap();
        assert!(status.success(), "{layer}: {status:?} {text}");
        assert_eq!(
            std::fs::read_to_string(ws.join("out.txt")).unwrap(),
            "written by vi\non unix\n",
            "{layer}: {text}"
        );
    }
}

/// Streams set explicitly keep their setting: stdout piped, stdin and stderr the terminal.
#[test]
fn explicit_stdio_stays_as_set() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer);
        let mut child = sb
            .command("sh")
            .args([
                "-c",
                "test -t 0 && echo in-terminal; test -t 1 || echo out-pipe; \
                 test -t 2 && echo err-terminal >&2",
            ])
            .stdout(Stdio::piped())
            .pty(24, 80)
            .spawn()
            .unwrap();
        let out = common::read_stdout(&mut child);
        let (text, status) = run(child);
        assert!(status.success(), "{layer}: {status:?}");
        assert_eq!(out, "in-terminal\nout-pipe\n", "{layer}");
        assert_eq!(text, "err-terminal\n", "{layer}");
    }
    // All three set: no stream is left for the terminal.
    let sb = sandbox_on(&ws, Layer::Full);
    let e = sb
        .command("true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .pty(24, 80)
        .spawn()
        .unwrap_err();
    assert!(e.to_string().contains("pseudo-terminal"), "{e}");
}

/// `pty_like` starts the terminal with another terminal's size and modes (here `-echo`
/// and 17 by 70), before the program runs.
#[test]
fn pty_like_copies_the_size_and_modes() {
    require!(Feature::UserNs);
    use std::os::fd::AsRawFd;
    let (_d, ws) = common::var_tempdir();
    let (_master, slave, _) = common::openpty();
    let size = libc::winsize {
        ws_row: 17,
        ws_col: 70,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: `slave` is a terminal; `size` is a valid `winsize` borrowed for the call.
    let r = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    assert_eq!(r, 0);
    // SAFETY: all-zero bytes are a valid `termios`.
    let mut modes: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `modes` is a valid out-pointer.
    assert_eq!(unsafe { libc::tcgetattr(slave.as_raw_fd(), &mut modes) }, 0);
    modes.c_lflag &= !libc::ECHO;
    // SAFETY: `modes` is a valid `termios`, borrowed for the call.
    let r = unsafe { libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &modes) };
    assert_eq!(r, 0);
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer);
        let child = sb
            .command("sh")
            .args(["-c", "stty size; stty -a | grep -o -- '-echo '"])
            .pty_like(&slave)
            .unwrap()
            .spawn()
            .unwrap();
        let (text, status) = run(child);
        assert!(status.success(), "{layer}: {status:?} {text}");
        assert_eq!(text, "17 70\n-echo \n", "{layer}");
    }
    // Not a terminal: ENOTTY, before any spawn.
    let sb = sandbox_on(&ws, Layer::Full);
    let (r, _w) = std::io::pipe().unwrap();
    let e = sb.command("true").pty_like(&r).map(drop).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTTY));
}

/// Passthrough (`min_layer = "passthrough"`): the host's pseudo-terminal, still the
/// program's controlling terminal, of the size asked for.
#[test]
fn passthrough_gets_the_same_terminal() {
    let (_d, ws) = common::var_tempdir();
    let sb = common::sandbox(&ws, |p: &mut Policy| {
        p.layer = Some(Layer::Passthrough);
        p.min_layer = Some(Layer::Passthrough);
    });
    let child = sb
        .command("sh")
        .args(["-c", "stty size; tty; echo via-tty > /dev/tty"])
        .pty(21, 61)
        .spawn()
        .unwrap();
    let (text, status) = run(child);
    assert!(status.success(), "{status:?} {text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"21 61"), "{text}");
    assert!(
        lines.get(1).is_some_and(|l| l.starts_with("/dev/pts/")),
        "{text}"
    );
    assert_eq!(lines.get(2), Some(&"via-tty"), "{text}");
}

/// Without `pty` a child has none.
#[test]
fn no_pty_unless_asked() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let sb = sandbox_on(&ws, Layer::Full);
    let mut child = sb.command("true").spawn().unwrap();
    assert!(child.pty().is_none());
    assert!(child.wait().unwrap().success());
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
