//! The `tokio` feature: async wait on the pidfd and async pipes.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]
#![cfg(feature = "tokio")]

mod common;

use common::{Feature, sandbox, tempdir};
use stockade::Stdio;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn async_wait_and_pipes() {
    require!(Feature::UserNs);
    runtime().block_on(async {
        let ws = tempdir();
        let sb = sandbox(ws.path(), |_| {});
        let mut child = sb
            .command("sh")
            .args(["-c", "tr a-z A-Z; exit 5"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap().into_async().unwrap();
        let mut stdout = child.stdout.take().unwrap().into_async().unwrap();
        stdin.write_all(b"async").await.unwrap();
        drop(stdin);
        let mut out = String::new();
        stdout.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "ASYNC");
        let status = child.wait_async().await.unwrap();
        assert_eq!(status.code(), Some(5));
    });
}

/// A killed sandbox writes no status record: the status pipe ends empty, and the wait
/// goes on on the pidfd (no busy loop on the ended pipe, no hang), on both layers.
#[test]
fn async_wait_of_a_killed_sandbox() {
    require!(Feature::UserNs);
    runtime().block_on(async {
        let ws = tempdir();
        for layer in [stockade::Layer::Full, stockade::Layer::Landlock] {
            let sb = sandbox(ws.path(), |p| {
                p.layer = Some(layer);
                p.min_layer = Some(stockade::Layer::Landlock);
            });
            let mut child = sb.command("sleep").arg("100").spawn().unwrap();
            child.kill().unwrap();
            let status =
                tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_async())
                    .await
                    .expect("wait_async hangs")
                    .unwrap();
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&status),
                Some(libc::SIGKILL),
                "{layer:?}: {status}"
            );
        }
    });
}

/// `wait_timeout_async`: `None` on time (the program runs on), then the exact status, on
/// every layer and in passthrough; a wait cancelled at its timeout loses no status (the
/// program ends while the first wait is being dropped, and a later wait still reports it).
#[test]
fn wait_timeout_async_returns_none_on_time_and_the_exact_status_otherwise() {
    use std::time::{Duration, Instant};
    require!(Feature::UserNs);
    runtime().block_on(async {
        let ws = tempdir();
        for setup in ["full", "landlock", "disabled"] {
            let sb = sandbox(ws.path(), |p| match setup {
                "full" => p.layer = Some(stockade::Layer::Full),
                "landlock" => {
                    p.layer = Some(stockade::Layer::Landlock);
                    p.min_layer = Some(stockade::Layer::Landlock);
                }
                _ => p.mode = stockade::Mode::Disabled,
            });
            let mut child = sb
                .command("sh")
                .args(["-c", "sleep 0.6; exit 7"])
                .spawn()
                .unwrap();
            let start = Instant::now();
            let early = child
                .wait_timeout_async(Duration::from_millis(100))
                .await
                .unwrap();
            let waited = start.elapsed();
            assert_eq!(early, None, "{setup}");
            assert!(
                waited >= Duration::from_millis(100) && waited < Duration::from_millis(500),
                "{setup}: {waited:?}"
            );
            let status = child
                .wait_timeout_async(Duration::from_secs(20))
                .await
                .unwrap();
            assert_eq!(status.and_then(|s| s.code()), Some(7), "{setup}");

            // A wait dropped by an outer timeout, the program ending meanwhile: the next
            // wait has its status.
            let mut child = sb
                .command("sh")
                .args(["-c", "sleep 0.2; exit 3"])
                .spawn()
                .unwrap();
            let cancelled =
                tokio::time::timeout(Duration::from_millis(50), child.wait_async()).await;
            assert!(cancelled.is_err(), "{setup}");
            tokio::time::sleep(Duration::from_millis(400)).await;
            let status = child.wait_timeout_async(Duration::ZERO).await.unwrap();
            assert_eq!(status.and_then(|s| s.code()), Some(3), "{setup}");
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
