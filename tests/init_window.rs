//! The init window: from the program's first instruction, no process it can see, signal,
//! trace or open under `/proc` maps the host's memory, holds a host fd or is dumpable.
//!
//! The program is a freestanding static one (`tests/programs/init_window.c`: no C library,
//! no loader, its first system calls at once), run hundreds of times as the command
//! itself on each layer, with `allow_ptrace` on: it tries `PTRACE_SEIZE` on PID 1 (layer
//! 2: its parent, the init) and to open its `/proc/PID/{mem,maps,environ,fd/N}`. Before
//! the program waited for the init, it won some of these races in 5–50 % of runs (PID 1
//! was still the setup child, in the host's memory, dumpable, holding the host's pipes).
//! Workspaces live in /var/tmp, outside the sandbox's private /tmp.
#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use common::{Feature, sandbox};
use stockade::{Layer, Sandbox};

/// Runs per layer.
const RUNS: usize = 300;

/// A workspace outside /tmp, with the racing program built into it.
fn workspace_with_program() -> (tempfile::TempDir, PathBuf) {
    let ws = tempfile::Builder::new()
        .prefix("stockade-init-window-")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp");
    let exe = ws.path().join("init_window");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/init_window.c");
    let out = StdCommand::new("cc")
        .args([
            "-nostdlib",
            "-static",
            "-ffreestanding",
            "-fno-stack-protector",
            "-O1",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (ws, exe)
}

/// The program's line, checked: every door refused with the errno that says why (`EPERM`
/// for the trace; `EACCES` for the `/proc` files; for each fd `EACCES`, or `ENOENT` where
/// the init holds no such fd), and at least one fd refused as such (the status pipe is
/// always open: a door that was tried, not one that was missing).
fn check(line: &str, context: &str) {
    let field = |name: &str| -> &str {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("{context}: no {name} in {line:?}"))
    };
    let eperm = -libc::EPERM;
    let eacces = -libc::EACCES;
    assert_eq!(field("seize"), eperm.to_string(), "{context}: {line}");
    for f in ["mem", "maps", "environ"] {
        assert_eq!(field(f), eacces.to_string(), "{context}: {f} in {line}");
    }
    let fds: Vec<i32> = field("fd")
        .split(',')
        .map(|v| v.parse().expect("fd result"))
        .collect();
    assert_eq!(fds.len(), 16, "{context}: {line}");
    assert!(
        fds.iter().all(|&e| e == eacces || e == -libc::ENOENT),
        "{context}: an fd of the init was opened or failed otherwise: {line}"
    );
    assert!(
        fds.contains(&eacces),
        "{context}: no fd was refused: {line}"
    );
}

/// The racing program's runs on `sb`, aimed at `target` ("1" or "ppid").
fn race(sb: &Sandbox, exe: &Path, target: &str, context: &str) {
    for run in 0..RUNS {
        let out = sb
            .command(exe)
            .arg(target)
            .output()
            .unwrap_or_else(|e| panic!("{context}: run {run}: {e}"));
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{context}: run {run} of {RUNS}: {} {line}",
            out.status
        );
        check(line.trim(), &format!("{context}: run {run} of {RUNS}"));
    }
}

#[test]
fn from_its_first_instruction_the_program_cannot_reach_pid_1_on_the_full_layer() {
    require!(Feature::UserNs);
    require!(Feature::Cc);
    let (ws, exe) = workspace_with_program();
    let sb = sandbox(ws.path(), |p| p.allow_ptrace = true);
    race(&sb, &exe, "1", "full layer");
}

#[test]
fn from_its_first_instruction_the_program_cannot_reach_its_init_on_layer_2() {
    require!(Feature::Cc);
    let (ws, exe) = workspace_with_program();
    let sb = sandbox(ws.path(), |p| {
        p.allow_ptrace = true;
        p.layer = Some(Layer::Landlock);
    });
    assert_eq!(sb.layer(), Layer::Landlock);
    race(&sb, &exe, "ppid", "layer 2");
}

/// The same through the CLI, whose whole environment (and `--secret-env` values) the
/// host process holds: a third of the runs, on each layer.
#[test]
fn through_the_cli_the_program_cannot_reach_the_init_either() {
    require!(Feature::UserNs);
    require!(Feature::Cc);
    let (ws, exe) = workspace_with_program();
    for (layer, target) in [("full", "1"), ("landlock", "ppid")] {
        for run in 0..RUNS / 3 {
            let out = StdCommand::new(common::stockade_exe())
                .arg("run")
                .arg("--workspace")
                .arg(ws.path())
                .args(["--layer", layer, "--fallback", "refuse", "--allow-ptrace"])
                .args([
                    "--secret-env",
                    "STOCKADE_TEST_SECRET=s3cr3t-init-window",
                    "--",
                ])
                .arg(&exe)
                .arg(target)
                .output()
                .expect("run stockade");
            let line = String::from_utf8_lossy(&out.stdout);
            let context = format!("CLI, {layer}: run {run}");
            assert!(out.status.success(), "{context}: {} {line}", out.status);
            check(line.trim(), &context);
        }
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
