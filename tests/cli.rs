//! The `stockade` binary: exit statuses, error lines, detect and plan.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::process::Command;

use common::{Feature, tempdir};

fn stockade() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stockade"))
}

#[test]
fn run_mirrors_the_program_status() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let run = |args: &[&str]| {
        stockade()
            .arg("run")
            .arg("--workspace")
            .arg(ws.path())
            .arg("--")
            .args(args)
            .output()
            .unwrap()
    };
    assert_eq!(run(&["sh", "-c", "exit 7"]).status.code(), Some(7));
    assert_eq!(run(&["sh", "-c", "echo out"]).stdout, b"out\n");
    // Death by signal N: 128 + N (SIGSEGV from a fault kills even PID 1).
    let out = run(&["python3", "-c", "import ctypes; ctypes.string_at(0)"]);
    assert_eq!(out.status.code(), Some(128 + libc::SIGSEGV));
    let out = run(&["stockade-no-such-program"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("stockade: "));
    // A file that exists inside but is not executable.
    let out = run(&["/etc/hostname"]);
    assert_eq!(
        out.status.code(),
        Some(126),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn setup_failures_exit_125_naming_the_step() {
    require!(Feature::UserNs);
    let ws = tempdir();
    std::fs::create_dir_all(ws.path().join("real/data")).unwrap();
    std::os::unix::fs::symlink(ws.path().join("real"), ws.path().join("link")).unwrap();
    let out = stockade()
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .arg("--data-dir")
        .arg(ws.path().join("link/data"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("stockade: pin ")
            && err.contains("/link: Too many levels of symbolic links"),
        "{err}"
    );
    let out = stockade()
        .args(["run", "--writable", "/nonexistent-stockade", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nonexistent-stockade"));
}

#[test]
fn detect_and_plan_describe_this_host() {
    require!(Feature::UserNs);
    let out = stockade().args(["detect", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["best"], "full");
    assert_eq!(v["capabilities"]["user_namespaces"]["available"], true);
    // On this kind of host every layer is available.
    for layer in v["layers"].as_array().unwrap() {
        assert_eq!(layer["status"]["available"], true, "{layer}");
    }
    let ws = tempdir();
    let out = stockade()
        .arg("plan")
        .arg("--workspace")
        .arg(ws.path())
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps: Vec<String> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert!(
        steps.iter().any(|s| s == "bind read-only /usr"),
        "{steps:?}"
    );
    assert!(steps.iter().any(|s| s == "pivot_root"));
    let out = stockade()
        .args(["plan", "--os", "macos"])
        .arg("--workspace")
        .arg(ws.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("(version 1)"));
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}

#[test]
fn env_and_config_flags() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let out = stockade()
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--env", "GREETING=hi", "--", "sh", "-c", "echo $GREETING"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"hi\n");
    let out = stockade()
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--env", "LD_PRELOAD=/x.so", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("LD_PRELOAD"));
    // A config file: network none, checked from inside.
    let cfg = ws.path().join("policy.toml");
    std::fs::write(&cfg, "network = \"none\"\ntmp_size = \"1MiB\"\n").unwrap();
    let out = stockade()
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .arg("--workspace")
        .arg(ws.path())
        .args([
            "--",
            "sh",
            "-c",
            "ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "lo");
    std::fs::write(&cfg, "netwrok = \"none\"\n").unwrap();
    let out = stockade()
        .arg("plan")
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("netwrok") && err.contains("line 1"), "{err}");
}

#[test]
fn scan_and_scrub() {
    require!(Feature::UserNs);
    use std::io::Write;
    // A token-shaped value built at run time, so that no secret-looking literal is stored.
    let token = format!("ghp_{}", "aB3".repeat(12));
    let mut scan = stockade()
        .arg("scan")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    scan.stdin
        .take()
        .unwrap()
        .write_all(format!("log line {token}\n").as_bytes())
        .unwrap();
    let out = scan.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("github_token") && !text.contains(&token),
        "{text}"
    );
    let out = stockade()
        .arg("scan")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));

    let ws = tempdir();
    let out = stockade()
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args([
            "--passthrough-env",
            "STOCKADE_TEST_TOKEN",
            "--secret-env",
            "K=another-secret-value",
            "--scrub",
            "--",
        ])
        .args([
            "sh",
            "-c",
            "echo $STOCKADE_TEST_TOKEN $K; echo $STOCKADE_TEST_TOKEN >&2; echo $0",
            "ghp_${TAIL}",
        ])
        .env("STOCKADE_TEST_TOKEN", "host-secret-value-1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.starts_with("[REDACTED] [REDACTED]\n"), "{stdout}");
    assert!(
        !stdout.contains("host-secret") && !stderr.contains("host-secret"),
        "{stdout}{stderr}"
    );
    assert!(!stdout.contains("another-secret-value"), "{stdout}");
}
