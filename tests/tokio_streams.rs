//! The `tokio` feature's spawn and line stream: `Command::spawn_async` (its future owns
//! what it needs: it outlives the command, passed fds included) and
//! `LineStream::next_line` on the async pipes (hold mode withholds a planted token before
//! it is yielded; the output cap stops `yes`), on the full layer and in `mode =
//! "disabled"`, as root and as uid 65534.
//!
//! CI runs it with `cargo test --features tokio --test tokio_streams`; without the feature
//! it compiles to nothing.
#![cfg(target_os = "linux")]
#![cfg(feature = "tokio")]

mod common;

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

use common::{Feature, tempdir};
use stockade::{Fingerprint, LineEnd, LineStream, Mode, Policy, Sandbox, Stdio};

const MODES: [Mode; 2] = [Mode::Enabled, Mode::Disabled];

fn sandbox_in(ws: &Path, mode: Mode) -> Sandbox {
    common::sandbox(ws, |p: &mut Policy| p.mode = mode)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn spawn_async_runs_the_program_as_spawn_does() {
    require!(Feature::UserNs);
    let ws = tempdir();
    runtime().block_on(async {
        for mode in MODES {
            let sb = sandbox_in(ws.path(), mode);
            let mut cmd = sb.command("sh");
            cmd.args(["-c", "echo out; exit 7"]).stdout(Stdio::piped());
            // The future is 'static and Send: it runs as a task of its own.
            let task = tokio::spawn(cmd.spawn_async());
            let mut child = task.await.unwrap().expect("spawn_async");
            let mut out = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            assert_eq!(out, "out\n", "{mode:?}");
            assert_eq!(
                child.wait_async().await.unwrap().code(),
                Some(7),
                "{mode:?}"
            );
            // The command is left as it was: it spawns again, the same way.
            let child = cmd.spawn_async().await.unwrap();
            let output = child.wait_with_output().unwrap();
            assert_eq!(output.stdout, b"out\n", "{mode:?}");
            assert_eq!(output.status.code(), Some(7), "{mode:?}");
        }
    });
}

#[test]
fn spawn_async_reports_the_spawns_error() {
    require!(Feature::UserNs);
    let ws = tempdir();
    runtime().block_on(async {
        for mode in MODES {
            let sb = sandbox_in(ws.path(), mode);
            let sync = sb.command("no-such-program-here").spawn().unwrap_err();
            let not_async = sb
                .command("no-such-program-here")
                .spawn_async()
                .await
                .unwrap_err();
            assert_eq!(not_async.to_string(), sync.to_string(), "{mode:?}");
        }
    });
}

/// The command is dropped before the spawn runs: the spawn still has its stdio and its
/// passed fd, under the same number.
#[test]
fn spawn_async_outlives_its_command() {
    require!(Feature::UserNs);
    let ws = tempdir();
    runtime().block_on(async {
        for mode in MODES {
            let sb = sandbox_in(ws.path(), mode);
            let (mut r, w) = std::io::pipe().unwrap();
            let n = w.as_raw_fd();
            let fut = {
                let mut cmd = sb.command("python3");
                cmd.args(["-c", &format!("import os; os.write({n}, b'passed\\n')")])
                    .pass_fd(std::os::fd::OwnedFd::from(w));
                cmd.spawn_async()
            };
            let mut child = fut.await.unwrap();
            assert!(child.wait_async().await.unwrap().success(), "{mode:?}");
            let mut got = String::new();
            r.read_to_string(&mut got).unwrap();
            assert_eq!(got, "passed\n", "{mode:?}");
        }
    });
}

#[test]
fn next_line_holds_a_planted_token_before_it_is_yielded() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let (a, b) = (
        format!("ghp_{}", "A1b2C3d4E5f6G7h8"),
        "I9j0K1l2M3n4O50Zb5Hm".to_string(),
    );
    let token = format!("{a}{b}");
    runtime().block_on(async {
        for mode in MODES {
            let sb = sandbox_in(ws.path(), mode);
            let mut child = sb
                .command("sh")
                .args([
                    "-c",
                    r#"echo one; printf 'token %s' "$A"; sleep 0.3; printf '%s end\n' "$B"; echo two"#,
                ])
                .env("A", &a)
                .env("B", &b)
                .stdout(Stdio::piped())
                .spawn_async()
                .await
                .unwrap();
            let pipe = child.stdout.take().unwrap().into_async().unwrap();
            let mut lines = LineStream::new(pipe, child.redactor().clone()).hold(true);
            let mut got = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                got.push(line);
            }
            assert!(child.wait_async().await.unwrap().success());
            let summary: Vec<(&[u8], bool, usize)> = got
                .iter()
                .map(|l| (l.bytes.as_slice(), l.held, l.findings.len()))
                .collect();
            assert_eq!(
                summary,
                [(&b"one\n"[..], false, 0), (b"", true, 1), (b"two\n", false, 0)],
                "{mode:?}"
            );
            assert_eq!(got[1].findings[0].fingerprint, Fingerprint::of(token.as_bytes()));
        }
    });
}

#[test]
fn next_line_cap_stops_yes() {
    require!(Feature::UserNs);
    const CAP: u64 = 1 << 20;
    let ws = tempdir();
    runtime().block_on(async {
        for mode in MODES {
            let sb = sandbox_in(ws.path(), mode);
            let mut child = sb
                .command("yes")
                .stdout(Stdio::piped())
                .spawn_async()
                .await
                .unwrap();
            let pipe = child.stdout.take().unwrap().into_async().unwrap();
            let mut lines = LineStream::new(pipe, child.redactor().clone()).max_output(CAP);
            let (mut yielded, mut last) = (0u64, None);
            while let Some(line) = lines.next_line().await.unwrap() {
                yielded += line.bytes.len() as u64;
                last = Some(line.end);
            }
            assert!(lines.capped(), "{mode:?}");
            assert_eq!(last, Some(LineEnd::Capped), "{mode:?}");
            assert_eq!(yielded, CAP, "{mode:?}");
            let status = tokio::time::timeout(Duration::from_secs(30), child.wait_async())
                .await
                .expect("yes still runs after the stream closed its pipe")
                .unwrap();
            assert!(
                status.signal() == Some(libc::SIGPIPE) || status.code() == Some(1),
                "{mode:?}: {status}"
            );
        }
    });
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
