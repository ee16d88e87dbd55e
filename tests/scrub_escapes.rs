//! `stockade run --scrub` redacts a secret that the program prints with escape sequences
//! and silent controls between its characters (`s\e[mE\e[mC…`), which a terminal draws as
//! the secret: through pipes, and on a terminal (the program's pseudo-terminal relayed to
//! the caller's). What reaches the caller, once every escape is stripped as a terminal
//! would, does not hold the secret.
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

const SECRET: &str = "tok-Zq8xW3pLm4Nb7Vc2";

/// The separators the program puts between the secret's characters, as Python literals:
/// SGR, cursor, OSC title, hyperlink, DCS, APC, charset, NUL, BEL, SO/SI, DEL, C1 CSI in
/// UTF-8, C1 OSC in UTF-8.
const SEPARATORS: &[&str] = &[
    r"b'\x1b[m'",
    r"b'\x1b[1;31m'",
    r"b'\x1b[K'",
    r"b'\x1b]0;t\x07'",
    r"b'\x1b]8;;https://example.org/\x1b\\'",
    r"b'\x1bP$q m\x1b\\'",
    r"b'\x1b_Gx\x1b\\'",
    r"b'\x1b(B'",
    r"b'\x00'",
    r"b'\x07'",
    r"b'\x0e\x0f'",
    r"b'\x7f'",
    r"b'\xc2\x9b0m'",
    r"b'\xc2\x9d2;t\xc2\x9c'",
];

/// A program that prints, for each separator, a line with the secret (from `$K`) and the
/// separator between every two of its characters, to `target` (`1`: stdout; `tty`:
/// `/dev/tty`), in pieces of 3 bytes with a flush after each, so that the relay reads it
/// in many pieces.
fn script(target: &str) -> String {
    let seps = SEPARATORS.join(", ");
    let out = if target == "tty" {
        "open('/dev/tty', 'wb', buffering=0)"
    } else {
        "sys.stdout.buffer"
    };
    format!(
        "import os, sys, time\n\
         out = {out}\n\
         k = os.environ['K'].encode()\n\
         for sep in [{seps}]:\n\
         \x20   line = b'<' + sep.join(k[i:i + 1] for i in range(len(k))) + b'>\\n'\n\
         \x20   for i in range(0, len(line), 3):\n\
         \x20       out.write(line[i:i + 3])\n\
         \x20       out.flush()\n\
         out.write(b'done\\n')\n\
         out.flush()\n"
    )
}

/// The text a terminal draws: escape sequences, strings and controls other than LF
/// removed (an independent, simple reading of ECMA-48, C1 in UTF-8 included).
fn drawn(raw: &[u8]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| raw.get(i).copied().unwrap_or(0);
    while i < raw.len() {
        let b = raw[i];
        // The C1 introducer in UTF-8 or after ESC: 'X' stands for its 7-bit letter.
        let intro = if b == 0x1b {
            Some((at(i + 1), 2))
        } else if b == 0xc2 && (0x80..=0x9f).contains(&at(i + 1)) {
            Some((at(i + 1) - 0x40, 2))
        } else {
            None
        };
        match intro {
            Some((b'[', n)) => {
                i += n;
                while i < raw.len() && !(0x40..=0x7e).contains(&raw[i]) {
                    i += 1;
                }
                i += 1;
            }
            Some((b']' | b'P' | b'X' | b'^' | b'_', n)) => {
                i += n;
                while i < raw.len() {
                    if raw[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if raw[i] == 0x1b || (raw[i] == 0xc2 && at(i + 1) == 0x9c) {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            Some((_, n)) => {
                i += n;
                while i < raw.len() && (0x20..=0x2f).contains(&raw[i]) {
                    i += 1;
                }
                if b == 0x1b {
                    i += 1;
                }
            }
            None => {
                if b >= 0x20 && b != 0x7f || b == b'\n' {
                    out.push(b);
                }
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn the_test_reads_escapes_as_a_terminal_does() {
    let raw = b"<t\x1b[mo\x1b]0;x\x07k\xc2\x9b1m-\x00!\x1bP$q\x1b\\>\n";
    assert_eq!(drawn(raw), "<tok-!>\n");
}

fn workspace() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("stockade-scrub-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .or_else(|_| {
            tempfile::Builder::new()
                .prefix("stockade-scrub-")
                .tempdir_in("/var/tmp")
        })
        .expect("temp dir outside /tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn stockade(ws: &Path, target: &str) -> StdCommand {
    let mut cmd = StdCommand::new(common::stockade_exe());
    cmd.arg("run")
        .arg("--workspace")
        .arg(ws)
        .args(["--secret-env", &format!("K={SECRET}"), "--scrub", "--"])
        .args(["python3", "-c", &script(target)]);
    cmd
}

/// Every line the program printed arrived, redacted, and holds no secret once drawn.
fn check(raw: &[u8]) {
    let text = drawn(raw);
    assert!(!text.contains(SECRET), "{text}\n{raw:?}");
    let lines = text.lines().filter(|l| *l == "<[REDACTED]>").count();
    assert_eq!(lines, SEPARATORS.len(), "{text}\n{raw:?}");
    assert!(text.contains("done"), "{text}");
}

#[test]
fn escapes_between_a_secrets_characters_do_not_hide_it_from_scrub_through_pipes() {
    require!(Feature::UserNs);
    let ws = workspace();
    let out = stockade(ws.path(), "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check(&out.stdout);
}

/// A pseudo-terminal as the caller's: (master, slave).
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

/// Runs `cmd` on a new terminal (its stdin, stdout and stderr, and its controlling
/// terminal, as a shell's foreground job) and returns all it wrote there.
fn on_terminal(mut cmd: StdCommand) -> Vec<u8> {
    let (mut master, slave) = openpty();
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
    let mut child = cmd.spawn().unwrap();
    drop(slave);
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

#[test]
fn escapes_between_a_secrets_characters_do_not_hide_it_from_scrub_on_a_terminal() {
    require!(Feature::UserNs);
    let ws = workspace();
    // stdout: a pipe relayed to the caller's terminal; /dev/tty: the program's own
    // terminal, whose output is relayed through the same redactor.
    for target in ["1", "tty"] {
        let out = on_terminal(stockade(ws.path(), target));
        check(&out);
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
