//! 200 sandboxes from 8 threads at once: all succeed, nothing is left behind. Its own
//! binary, so that no other test's children or fds disturb the counts.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use common::{Feature, sandbox, sh_ok, tempdir};

#[test]
fn many_threads_spawn_at_once_and_leave_nothing_behind() {
    require!(Feature::UserNs);
    let ws = tempdir();
    // Warm up what a process keeps for all its sandboxes (the spawner threads, the init's
    // image), then count with no sandbox alive: the one below must leave nothing, its
    // commands' inits included, once it is dropped.
    sh_ok(&sandbox(ws.path(), |_| {}), "true");
    let fds_before = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let mounts_before = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let sb = sandbox(ws.path(), |_| {});
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let sb = sb.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    let out = sb.command("sh").args(["-c", "echo ok"]).output().unwrap();
                    assert_eq!(out.stdout, b"ok\n");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    drop(sb);
    assert_eq!(
        std::fs::read_dir("/proc/self/fd").unwrap().count(),
        fds_before,
        "fd leak"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
        mounts_before
    );
    // No zombie or other child left: this process has no children at all.
    let r = nix::sys::wait::waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
    assert!(matches!(r, Err(nix::errno::Errno::ECHILD)), "{r:?}");

    // The same as uid 65534, after the counts above (sequential: no stray children).
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_none() {
        common::rerun_as_nobody(&[
            "--exact",
            "many_threads_spawn_at_once_and_leave_nothing_behind",
        ]);
    }
}
