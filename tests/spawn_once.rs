//! A sandbox probes nothing when it is created: one run of the CLI, and one spawn of the
//! library, make exactly one namespace `clone` (counted with `strace`), and the CLI starts
//! no thread. Its own binary, so
//! that no other test's probe or spawns are counted.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::process::Command as StdCommand;

use common::{Feature, tempdir};
use stockade::{Layer, Policy, Sandbox};

/// Runs `cmd` under `strace -f` for the process-creating calls, asserts that it succeeded
/// and returns (its trace, its stdout and stderr).
fn strace(cmd: &mut StdCommand) -> (String, String) {
    let dir = tempdir();
    let file = dir.path().join("trace");
    let out = StdCommand::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=clone,clone3,unshare,fork,vfork",
            "-o",
        ])
        .arg(&file)
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .output()
        .expect("run strace");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{}: {text}", out.status);
    (
        std::fs::read_to_string(&file).expect("read the trace"),
        text,
    )
}

/// The calls in `trace` that create a sandbox's namespaces (a user and a mount namespace).
fn namespace_clones(trace: &str) -> Vec<&str> {
    trace
        .lines()
        .filter(|l| l.contains("CLONE_NEWUSER") || l.contains("unshare("))
        .filter(|l| l.contains("CLONE_NEWNS"))
        .collect()
}

/// The other user-namespace clones in `trace`: a root host makes one per process, a
/// child that only holds the mapping of its idmapped binds (`probe/idmap.rs`) and exits;
/// anyone else none.
fn mapping_clones(trace: &str) -> Vec<&str> {
    trace
        .lines()
        .filter(|l| l.contains("CLONE_NEWUSER") || l.contains("unshare("))
        .filter(|l| !l.contains("CLONE_NEWNS"))
        .collect()
}

fn expected_mapping_clones() -> usize {
    usize::from(nix::unistd::geteuid().is_root())
}

#[test]
fn one_cli_run_makes_one_namespace_clone() {
    require!(Feature::UserNs);
    require!(Feature::Strace);
    let ws = tempdir();
    let (trace, _) = strace(
        StdCommand::new(common::stockade_exe())
            .arg("run")
            .arg("--workspace")
            .arg(ws.path())
            .args(["--", "true"]),
    );
    let clones = namespace_clones(&trace);
    assert_eq!(clones.len(), 1, "{trace}");
    assert_eq!(
        mapping_clones(&trace).len(),
        expected_mapping_clones(),
        "{trace}"
    );
    // The CLI spawns from its main thread: no spawner thread, no walker threads, no
    // hand-over between threads (about 0.1 ms and two wake-ups per run).
    let threads: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("CLONE_THREAD"))
        .collect();
    assert!(threads.is_empty(), "{trace}");
}

/// A root host's run does not walk the read-only roots for private entries (some 10⁵
/// `stat`s): they are bound idmapped, so "others" permissions apply inside. The controls:
/// a root-only file under the allowlist stays unreadable, a public one readable.
#[test]
fn root_only_a_run_reads_no_directory_tree_and_keeps_private_files_private() {
    require!(Feature::UserNs);
    require!(Feature::Strace);
    require!(Feature::Root);
    let ws = tempdir();
    let dir = tempdir();
    let file = dir.path().join("trace");
    let out = StdCommand::new("strace")
        .args([
            "-f",
            "-qq",
            "-c",
            "-e",
            "trace=getdents64,newfstatat,statx,lstat,stat",
            "-o",
        ])
        .arg(&file)
        .arg(common::stockade_exe())
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args([
            "--",
            "sh",
            "-c",
            "cat /etc/shadow; echo $?; head -c 4 /etc/passwd; echo",
        ])
        .output()
        .expect("run strace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["1", "root"],
        "{stdout}"
    );
    // `strace -c`: "% time seconds usecs/call calls errors syscall", then a total line.
    let summary = std::fs::read_to_string(&file).unwrap();
    let total: u64 = summary
        .lines()
        .filter(|l| l.contains("total"))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
        .sum();
    assert!(
        total < 2_000,
        "{total} directory reads and stats:\n{summary}"
    );
}

#[test]
fn sandbox_new_clones_nothing_and_each_spawn_clones_once() {
    require!(Feature::UserNs);
    require!(Feature::Strace);
    let ws = tempdir();
    let exe = std::env::current_exe().unwrap();
    let (trace, out) = strace(
        StdCommand::new(exe)
            .args(["--exact", "three_spawns_inner", "--nocapture"])
            .env("STOCKADE_TEST_THREE_SPAWNS", ws.path()),
    );
    assert!(out.contains("1 passed"), "{out}");
    let clones = namespace_clones(&trace);
    assert_eq!(clones.len(), 3, "{trace}");
    assert_eq!(
        mapping_clones(&trace).len(),
        expected_mapping_clones(),
        "{trace}"
    );
}

/// The traced half of `sandbox_new_clones_nothing_and_each_spawn_clones_once`: two
/// sandboxes, three spawns, one after the other.
#[test]
fn three_spawns_inner() {
    let Some(ws) = std::env::var_os("STOCKADE_TEST_THREE_SPAWNS") else {
        return;
    };
    let a = Sandbox::new(Policy::with_workspace(&ws)).unwrap();
    let b = Sandbox::new(Policy::with_workspace(&ws)).unwrap();
    assert_eq!((a.layer(), b.layer()), (Layer::Full, Layer::Full));
    for sb in [&a, &a, &b] {
        assert!(sb.command("true").status().unwrap().success());
    }
    // One spawn at a time needs one spawner thread, not the whole pool.
    let spawners = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("stockade-spawn"))
        .count();
    assert_eq!(spawners, 1);
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some()
        || std::env::var_os("STOCKADE_TEST_THREE_SPAWNS").is_some()
    {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
