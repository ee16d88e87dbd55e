//! A process's main thread clones its sandboxes by itself, without a spawner thread
//! (`backend/linux/clone.rs`): its sandboxes still die with the process, a worker
//! thread's sandbox still outlives the worker, and the main thread's spawns start no
//! thread. Without libtest's harness (`harness = false` in Cargo.toml): libtest runs every
//! test on a thread of its own, never on the main thread.
#![cfg_attr(not(target_os = "linux"), allow(unused))]

#[cfg(not(target_os = "linux"))]
fn main() {}

#[cfg(target_os = "linux")]
mod common;

#[cfg(target_os = "linux")]
use linux::main;

#[cfg(target_os = "linux")]
mod linux {
    use std::process::Command as StdCommand;
    use std::time::{Duration, Instant};

    use super::common::{self, Feature, host_processes_with, tempdir};
    use stockade::{Policy, Sandbox};

    pub fn main() {
        match std::env::var("STOCKADE_MAIN_THREAD_HOST") {
            Ok(markers) => host(&markers),
            Err(_) => check(),
        }
    }

    /// Spawns and checks, then exits without waiting: the host process of [`check`].
    /// `markers` is `<main>,<worker>`: the sleep argument of each sandbox's program.
    fn host(markers: &str) {
        let (main_marker, worker_marker) = markers.split_once(',').unwrap();
        let ws = tempdir();
        let sb = Sandbox::new(Policy::with_workspace(ws.path())).unwrap();
        let mut from_main = sb.command("sleep").arg(main_marker).spawn().unwrap();
        assert_eq!(
            spawner_threads(),
            0,
            "the main thread's spawn started a thread"
        );
        let sb2 = Sandbox::new(Policy::with_workspace(ws.path())).unwrap();
        let worker_marker = worker_marker.to_string();
        let from_worker = std::thread::spawn(move || {
            let child = sb2.command("sleep").arg(&worker_marker).spawn().unwrap();
            // The worker ends here; its sandbox is the spawner thread's child, not its own.
            std::mem::forget(child);
        });
        from_worker.join().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(from_main.try_wait().unwrap().is_none());
        assert_eq!(host_processes_with(main_marker).len(), 1, "main's sandbox");
        assert_eq!(
            host_processes_with(markers.split_once(',').unwrap().1).len(),
            1,
            "the worker's sandbox outlived the worker"
        );
        println!("both running");
        // `exit` runs no destructor; the sandboxes hold their own binds of `ws`.
        drop(ws);
        std::process::exit(0);
    }

    /// The threads of this process named like the library's spawner threads.
    fn spawner_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.starts_with("stockade-spawn"))
            .count()
    }

    fn check() {
        run_check();
        if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_none() {
            rerun_as_nobody();
        }
        println!("test result: ok. 1 passed; 0 failed (main_thread)");
    }

    fn run_check() {
        // Not `require!`: its skip line names the thread, here `main`.
        if let Some(reason) = Feature::UserNs.missing() {
            assert!(!common::required(Feature::UserNs), "required: {reason}");
            eprintln!("SKIP main_thread: {reason}");
            return;
        }
        let id = format!("{}{}", std::process::id(), line!());
        let markers = format!("1000.{id}1,1000.{id}2");
        let out = StdCommand::new(std::env::current_exe().unwrap())
            .env("STOCKADE_MAIN_THREAD_HOST", &markers)
            .output()
            .unwrap();
        let text = common::output_text(&out);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("both running"), "{text}");
        // The host has exited: every sandbox it spawned, from either thread, ends with it.
        let (a, b) = markers.split_once(',').unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let alive = || host_processes_with(a).len() + host_processes_with(b).len();
        while alive() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(alive(), 0, "a sandbox outlived its host");
    }

    /// The same as uid 65534, as every test binary does when run as root.
    fn rerun_as_nobody() {
        for f in [Feature::Root, Feature::Setpriv] {
            if let Some(reason) = f.missing() {
                assert!(!common::required(f), "the re-run as uid 65534: {reason}");
                // Not `common::skip`: it names the thread, here `main`.
                eprintln!("SKIP main_thread: the re-run as uid 65534: {reason}");
                return;
            }
        }
        let (_dir, exe) = common::world_executable_copy();
        let out = StdCommand::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .args(["--inh-caps=-all", "--bounding-set=-all"])
            .arg(&exe)
            .env("STOCKADE_TEST_AS_NOBODY", "1")
            .env("HOME", "/tmp")
            .env("TMPDIR", "/tmp")
            .current_dir("/tmp")
            .output()
            .unwrap();
        let text = common::output_text(&out);
        assert!(out.status.success(), "as uid 65534: {text}");
        assert!(text.contains("test result: ok"), "as uid 65534: {text}");
    }
}
