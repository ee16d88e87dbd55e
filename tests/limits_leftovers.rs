//! No cgroup directory is left behind by stockade: after 200 runs of the library, and
//! after runs of the CLI. Alone in its binary, so that no other test's live cgroup is
//! counted.

#![cfg(target_os = "linux")]

mod common;

use std::path::Path;

use common::Feature;
use stockade::{ByteSize, Layer};

/// No cgroup directory is left after 200 runs.
#[test]
fn root_only_no_cgroup_is_left_after_200_runs() {
    require!(Feature::Root);
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let sb = common::sandbox(&ws, |p| {
        p.layer = Some(Layer::Full);
        p.limits.memory = Some(ByteSize::mib(256));
        p.limits.processes = Some(32);
        p.limits.cpu = Some(1.0);
    });
    for _ in 0..200 {
        let mut child = sb.command("true").spawn().unwrap();
        assert!(child.wait().unwrap().success());
    }
    drop(sb);
    let mine = format!("stockade-{}-", std::process::id());
    let mut left = Vec::new();
    for h in ["memory", "pids", "cpu", "cpuacct"] {
        for entry in walk(Path::new("/sys/fs/cgroup").join(h).as_path(), 4) {
            if entry
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&mine))
            {
                left.push(entry);
            }
        }
    }
    assert_eq!(left, Vec::<std::path::PathBuf>::new());
}

fn walk(dir: &Path, depth: u32) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(e.path());
            if depth > 0 {
                out.extend(walk(&e.path(), depth - 1));
            }
        }
    }
    out
}

/// The CLI's runs, each its own process: nothing left either, even when the run ends at
/// its wall time.
#[test]
fn root_only_no_cgroup_is_left_by_the_cli() {
    require!(Feature::Root);
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let before = stockade_leaves();
    for args in [
        &["--", "true"][..],
        &["--wall-time", "1s", "--", "sleep", "5"],
    ] {
        for _ in 0..5 {
            let out = std::process::Command::new(common::stockade_exe())
                .args([
                    "run",
                    "--no-pty",
                    "--memory",
                    "128MiB",
                    "--processes",
                    "10",
                    "--workspace",
                ])
                .arg(&ws)
                .args(args)
                .output()
                .unwrap();
            assert!(
                matches!(out.status.code(), Some(0 | 124)),
                "{}",
                common::output_text(&out)
            );
        }
    }
    let after = stockade_leaves();
    // Leaves of this process are the library test's (it runs beside this one).
    let own = format!("stockade-{}-", std::process::id());
    let new: Vec<_> = after
        .iter()
        .filter(|p| !before.contains(p))
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&own))
        })
        .collect();
    assert!(new.is_empty(), "{new:?}");
}

fn stockade_leaves() -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for h in ["memory", "pids", "cpu", "cpuacct"] {
        for entry in walk(Path::new("/sys/fs/cgroup").join(h).as_path(), 4) {
            if entry
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("stockade-"))
            {
                out.push(entry);
            }
        }
    }
    out
}
