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

/// Overlay mode on the full layer: the host's hold on the overlay's mount goes after an
/// async wait, and after a run dropped unwaited, as after a blocking wait.
#[test]
fn the_overlays_mount_is_released_after_an_async_wait_and_a_dropped_run() {
    require!(Feature::UserNs);
    runtime().block_on(async {
        let (_w, ws) = common::var_tempdir();
        let (_c, cdir) = common::var_tempdir();
        let changes = cdir.join("set");
        let name = format!("async-pin-{}", std::process::id());
        let sb = sandbox(&ws, |p| {
            p.layer = Some(stockade::Layer::Full);
            p.min_layer = Some(stockade::Layer::Landlock);
            p.workspace_mode = stockade::WorkspaceMode::Overlay;
            p.changes_dir = Some(changes.clone());
        });
        assert_eq!(sb.layer(), stockade::Layer::Full);
        let mut child = sb
            .command("sh")
            .args(["-c", &format!("echo a > {name}; cat > /dev/null")])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        // The write is in before the host looks: the change set's upper/ has it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !changes.join("upper").join(&name).exists() {
            assert!(std::time::Instant::now() < deadline, "no write");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(common::overlay_pins(&name).len(), 1);
        drop(child.stdin.take());
        assert!(child.wait_async().await.unwrap().success());
        stockade::ChangeSet::open(&changes).unwrap();
        assert_eq!(common::overlay_pins(&name), Vec::new());
        // Dropped unwaited: the hold lasts while the program runs, and goes after.
        let mut child = sb
            .command("sh")
            .args(["-c", &format!("cat {name} > /dev/null; cat > /dev/null")])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        assert_eq!(common::overlay_pins(&name).len(), 1);
        let stdin = child.stdin.take();
        drop(child);
        drop(stdin);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !common::overlay_pins(&name).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the dropped run's overlay is held"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // The dropped run's end is noted on a thread of the library's: until then the set
        // is still in use (`Busy`), as for any run whose program runs.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            match stockade::ChangeSet::open(&changes) {
                Ok(_) => break,
                Err(stockade::ChangesError::Busy { .. })
                    if std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(e) => panic!("{e}"),
            }
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
