//! [`LineStream`] on a real program's pipes: hold mode withholds a line with a planted
//! token before the host sees it (the token written in two parts with a pause between),
//! pass mode yields it with its finding, and the output cap stops `yes`: on the full layer
//! and in `mode = "disabled"`, as root and as uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Feature, tempdir};
use stockade::{Child, Fingerprint, Line, LineEnd, Mode, Policy, Sandbox, Stdio};

/// The modes a test runs in: enabled (the strongest layer here) and disabled.
const MODES: [Mode; 2] = [Mode::Enabled, Mode::Disabled];

fn sandbox_in(ws: &Path, mode: Mode) -> Sandbox {
    common::sandbox(ws, |p: &mut Policy| p.mode = mode)
}

/// A GitHub token the scanner finds, in two halves, built at run time so that no scanner
/// flags this file.
fn token_halves() -> (String, String) {
    (
        format!("ghp_{}", "A1b2C3d4E5f6G7h8"),
        "I9j0K1l2M3n4O50Zb5Hm".to_string(),
    )
}

/// `one`, then `token <first half>`, a pause, `<second half> end`, then `two`: the token
/// reaches the pipe in two writes.
fn planted(sb: &Sandbox) -> Child {
    let (a, b) = token_halves();
    sb.command("sh")
        .args([
            "-c",
            r#"echo one; printf 'token %s' "$A"; sleep 0.3; printf '%s end\n' "$B"; echo two"#,
        ])
        .env("A", a)
        .env("B", b)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn")
}

#[test]
fn hold_withholds_a_planted_token_before_it_is_yielded() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let (a, b) = token_halves();
    let token = format!("{a}{b}");
    for mode in MODES {
        let sb = sandbox_in(ws.path(), mode);
        let mut child = planted(&sb);
        let lines: Vec<Line> = child
            .stdout_lines()
            .unwrap()
            .hold(true)
            .collect::<std::io::Result<_>>()
            .unwrap();
        assert!(child.wait().unwrap().success(), "{mode:?}");
        for l in &lines {
            let text = String::from_utf8_lossy(&l.bytes);
            assert!(!text.contains(&a) && !text.contains(&b), "{mode:?}: {text}");
        }
        let summary: Vec<(&[u8], bool, usize)> = lines
            .iter()
            .map(|l| (l.bytes.as_slice(), l.held, l.findings.len()))
            .collect();
        assert_eq!(
            summary,
            [
                (&b"one\n"[..], false, 0),
                (b"", true, 1),
                (b"two\n", false, 0)
            ],
            "{mode:?}"
        );
        let f = &lines[1].findings[0];
        assert_eq!(f.pattern, "github_token", "{mode:?}");
        assert_eq!(f.fingerprint, Fingerprint::of(token.as_bytes()), "{mode:?}");
        assert_eq!(f.range, 6..6 + token.len(), "{mode:?}");
        assert_eq!(lines[1].end, LineEnd::Newline);
    }
}

#[test]
fn pass_yields_the_planted_line_with_its_finding_beside() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let (a, b) = token_halves();
    for mode in MODES {
        let sb = sandbox_in(ws.path(), mode);
        let mut child = planted(&sb);
        let lines: Vec<Line> = child
            .stdout_lines()
            .unwrap()
            .collect::<std::io::Result<_>>()
            .unwrap();
        child.wait().unwrap();
        assert_eq!(lines.len(), 3, "{mode:?}: {lines:?}");
        assert_eq!(lines[1].bytes, format!("token {a}{b} end\n").as_bytes());
        assert!(!lines[1].held);
        assert_eq!(lines[1].findings.len(), 1, "{mode:?}");
        assert!(lines[0].findings.is_empty() && lines[2].findings.is_empty());
    }
}

/// The command's own `secret_env` value is redacted by the stream (the child's
/// redactor), and a redacted value is no finding.
#[test]
fn the_childs_redactor_redacts_the_stream() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let secret = format!("s3cr3t-{}", "value-0042");
    for mode in MODES {
        let sb = sandbox_in(ws.path(), mode);
        let mut child = sb
            .command("sh")
            .args(["-c", r#"printf 'pw=%s\n' "$PW""#])
            .secret_env("PW", &secret)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines: Vec<Line> = child
            .stdout_lines()
            .unwrap()
            .hold(true)
            .collect::<std::io::Result<_>>()
            .unwrap();
        child.wait().unwrap();
        assert_eq!(lines.len(), 1, "{mode:?}");
        assert_eq!(lines[0].bytes, b"pw=[REDACTED]\n", "{mode:?}");
        assert!(!lines[0].held && lines[0].findings.is_empty());
    }
}

/// The policy's `[sandbox.leak]` patterns reach every command's output scan: a host
/// secret the program prints raw and base64-encoded is found on its lines (and held), and
/// the child's redactor reports it too; a sandbox without the pattern finds nothing.
#[test]
fn a_host_pattern_of_the_policy_finds_the_programs_secret() {
    require!(Feature::UserNs);
    let ws = tempdir();
    // `acme_` and 32 characters of `[a-z0-9]`, built at run time.
    let secret = format!("acme_{}", "q7x2m4pz9kd3lwb0".repeat(2));
    let script =
        r#"echo one; printf 'key %s\n' "$K"; printf '%s' "$K" | base64 -w0; echo; echo two"#;
    for mode in MODES {
        let sb = common::sandbox(ws.path(), |p: &mut Policy| {
            p.mode = mode;
            p.leak.patterns = vec![stockade::policy::HostPattern::new(
                "acme_key",
                "acme_[a-z0-9]{32}",
            )];
        });
        assert_eq!(sb.plan().leak_patterns.len(), 1);
        let mut child = sb
            .command("sh")
            .args(["-c", script])
            .env("K", &secret)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        assert_eq!(child.redactor().patterns().len(), 1, "{mode:?}");
        let lines: Vec<Line> = child
            .stdout_lines()
            .unwrap()
            .hold(true)
            .collect::<std::io::Result<_>>()
            .unwrap();
        assert!(child.wait().unwrap().success(), "{mode:?}");
        let summary: Vec<(bool, Vec<(String, stockade::Encoding)>)> = lines
            .iter()
            .map(|l| {
                let found = l.findings.iter();
                (
                    l.held,
                    found.map(|f| (f.pattern.to_string(), f.encoding)).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (false, vec![]),
                (true, vec![("acme_key".into(), stockade::Encoding::Raw)]),
                (true, vec![("acme_key".into(), stockade::Encoding::Base64)]),
                (false, vec![]),
            ],
            "{mode:?}"
        );
        let fp = Fingerprint::of(secret.as_bytes());
        assert!(lines[1].findings[0].fingerprint == fp && lines[2].findings[0].fingerprint == fp);
        let (_, found) = child.redactor().scrub(format!("x {secret}").as_bytes());
        assert_eq!(found.len(), 1, "{mode:?}");

        // Without the pattern, the same output is clean.
        let plain = sandbox_in(ws.path(), mode);
        let mut child = plain
            .command("sh")
            .args(["-c", script])
            .env("K", &secret)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines: Vec<Line> = child
            .stdout_lines()
            .unwrap()
            .collect::<std::io::Result<_>>()
            .unwrap();
        child.wait().unwrap();
        assert!(
            lines.iter().all(|l| l.findings.is_empty()),
            "{mode:?}: {lines:?}"
        );
    }
}

/// Waits for `child` at most 30 s (then kills it and fails).
fn wait_bounded(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("{what}: the program still runs after the stream closed its pipe");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_output_cap_stops_yes() {
    require!(Feature::UserNs);
    const CAP: u64 = 1 << 20;
    let ws = tempdir();
    for mode in MODES {
        let sb = sandbox_in(ws.path(), mode);
        let mut child = sb.command("yes").stdout(Stdio::piped()).spawn().unwrap();
        let mut stream = child.stdout_lines().unwrap().max_output(CAP);
        let mut yielded = 0u64;
        let mut last = None;
        for line in &mut stream {
            let line = line.unwrap();
            yielded += line.bytes.len() as u64;
            last = Some(line.end);
        }
        assert!(stream.capped(), "{mode:?}");
        assert_eq!(last, Some(LineEnd::Capped), "{mode:?}");
        assert_eq!(yielded, CAP, "{mode:?}: every byte up to the cap, no more");
        assert!(stream.bytes_read() <= CAP, "{mode:?}");
        drop(stream);
        let status = wait_bounded(&mut child, &format!("{mode:?}"));
        // `yes` dies of SIGPIPE, or (with SIGPIPE ignored) exits with its write error;
        // never killed by anyone else.
        assert!(
            status.signal() == Some(libc::SIGPIPE) || status.code() == Some(1),
            "{mode:?}: {status}"
        );
    }
}

/// Exactly the cap is not past it: the stream ends normally and says so.
#[test]
fn output_of_exactly_the_cap_is_not_capped() {
    require!(Feature::UserNs);
    let ws = tempdir();
    for mode in MODES {
        let sb = sandbox_in(ws.path(), mode);
        let mut child = sb
            .command("sh")
            .args(["-c", "printf 'abc\\ndef\\n'"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stream = child.stdout_lines().unwrap().max_output(8);
        let lines: Vec<Line> = (&mut stream).collect::<std::io::Result<_>>().unwrap();
        assert!(!stream.capped(), "{mode:?}");
        assert_eq!(lines.len(), 2, "{mode:?}: {lines:?}");
        assert!(child.wait().unwrap().success());
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
