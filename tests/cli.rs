//! The `stockade` binary: exit statuses, error lines, detect and plan.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{Feature, tempdir};
use stockade::error::NodeKind;
use stockade::{Error, Fallback, Layer, PlanError, Policy, Sandbox, Stdio};

fn stockade() -> Command {
    Command::new(common::stockade_exe())
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
        err.starts_with("stockade: data_dir ") && err.contains("/link is a symbolic link"),
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
        // As root, " (root-owned shown as nobody)" follows: an idmapped bind.
        steps.iter().any(|s| s
            .strip_prefix("bind read-only /usr")
            .is_some_and(|r| { r.is_empty() || r == " (root-owned shown as nobody)" })),
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

/// `plan --os macos` with the allow mode: the proxy's ports, picked per spawn, print as
/// placeholders, which are not ports; the other modes have none.
#[test]
fn plan_os_macos_shows_the_allow_modes_ports_as_placeholders() {
    let ws = tempdir();
    let plan = |flags: &[&str]| {
        let out = stockade()
            .args(["plan", "--os", "macos", "--workspace"])
            .arg(ws.path())
            .args(flags)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let allow = plan(&["--network", "allow", "--allow-domain", "github.com"]);
    let placeholders = [
        "(remote tcp4 \"localhost:<HTTP proxy port, per spawn>\")",
        "(remote tcp4 \"localhost:<SOCKS5 proxy port, per spawn>\")",
    ];
    for p in placeholders {
        assert_eq!(allow.matches(p).count(), 1, "{allow}");
    }
    assert_eq!(allow.matches("(allow network-").count(), 1, "{allow}");
    for network in ["none", "full"] {
        let text = plan(&["--network", network]);
        assert!(!text.contains("per spawn"), "{text}");
        assert!(!text.contains("tcp4"), "{text}");
    }
}

#[test]
fn overlay_flag_shows_in_the_plan_makes_nothing_and_keeps_the_workspace() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let c = outside_tmp();
    let changes = c.path().join("set");
    let plan = |flags: &[&str]| {
        let out = stockade()
            .args(["plan", "--workspace"])
            .arg(ws.path())
            .arg("--overlay")
            .arg(&changes)
            .args(flags)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let full = plan(&[]);
    assert!(
        full.contains("overlay ") && full.contains("writes kept in the change set"),
        "{full}"
    );
    let layer2 = plan(&["--layer", "landlock", "--min-layer", "landlock"]);
    assert!(layer2.contains("run on a snapshot of"), "{layer2}");
    // A plan makes nothing.
    assert!(!changes.exists());
    let out = stockade()
        .args(["run", "--workspace"])
        .arg(ws.path())
        .arg("--overlay")
        .arg(&changes)
        .args(["--", "sh", "-c", "echo hi > made; cat made"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"hi\n", "{out:?}");
    assert!(!ws.path().join("made").exists());
    assert_eq!(std::fs::read(changes.join("upper/made")).unwrap(), b"hi\n");
    // `discard` takes the whole set away, the overlay's `work/work` (mode 000) too, so
    // that nothing is left behind as an unprivileged user either.
    let out = stockade().arg("discard").arg(&changes).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!changes.exists());
    // A run that deletes a file (overlayfs then keeps a whiteout in `work/work`) leaves,
    // once `run` has exited, a set its owner removes with a plain `rm -r`.
    std::fs::write(ws.path().join("old"), "old").unwrap();
    let out = stockade()
        .args(["run", "--workspace"])
        .arg(ws.path())
        .arg("--overlay")
        .arg(&changes)
        .args(["--", "rm", "old"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(ws.path().join("old").exists());
    assert!(!changes.join("work/work").exists());
    std::fs::remove_dir_all(&changes).unwrap();
    // Inside the workspace: refused before anything runs.
    let out = stockade()
        .args(["run", "--workspace"])
        .arg(ws.path())
        .arg("--overlay")
        .arg(ws.path().join("set"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("overlaps workspace"),
        "{out:?}"
    );
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
    // The program is looked up in its own PATH, as std does: 127 when it is not there.
    let out = stockade()
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--env", "PATH=/nonexistent", "--", "ls"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    // A variable without `=` is a usage error, like any other malformed argument; a
    // --secret-env value is not echoed.
    for (flag, value) in [
        ("--env", "NOEQ"),
        ("--env", "=x"),
        ("--secret-env", "tok-123"),
        ("--secret-env", "=tok-123"),
    ] {
        let out = stockade()
            .arg("run")
            .arg("--workspace")
            .arg(ws.path())
            .args([flag, value, "--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains("expected NAME=VALUE"), "{stderr}");
        assert_eq!(stderr.contains(value), flag == "--env", "{stderr}");
    }
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

/// `stockade scan --pattern NAME=REGEX` and a config's `[sandbox.leak] patterns`: the
/// host's secret is found raw and hex-encoded and named in `--json`; a bad pattern is a
/// usage error naming the problem and its position; `run --scrub` reports the policy's
/// pattern in the program's output.
#[test]
fn scan_and_run_with_host_patterns() {
    use std::io::Write;
    let secret = format!("acme_{}", "k3y9".repeat(8));
    let hexed: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
    let input = format!("raw {secret}\nhex {hexed}\n");
    let scan = |args: &[&str]| {
        let mut c = stockade()
            .arg("scan")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A usage error exits before reading: the pipe may be closed already.
        let _ = c.stdin.take().unwrap().write_all(input.as_bytes());
        c.wait_with_output().unwrap()
    };
    let out = scan(&["--json", "--pattern", "acme_key=acme_[a-z0-9]{32}"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(&secret), "{text}");
    let found: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let named: Vec<(&str, &str)> = found
        .iter()
        .map(|f| {
            (
                f["pattern"].as_str().unwrap(),
                f["encoding"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(named, [("acme_key", "raw"), ("acme_key", "hex")]);
    assert_eq!(found[0]["fingerprint"], found[1]["fingerprint"]);
    // Without the pattern: clean.
    assert_eq!(scan(&[]).status.code(), Some(0));
    // Bad patterns: usage errors with the reason.
    for (arg, want) in [
        (
            "acme_key=acme_([a-z]",
            "regex error at character 6 (byte 5): unclosed group",
        ),
        ("github_token=ghx_[a-z]{9}", "built-in"),
        ("Acme=x+", "a-z, 0-9 and _"),
        ("acme", "not NAME=REGEX"),
    ] {
        let out = scan(&["--pattern", arg]);
        assert_eq!(out.status.code(), Some(2), "{arg}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{arg}: {err}");
    }
    // The config's patterns.
    let dir = tempdir();
    let config = dir.path().join("stockade.toml");
    std::fs::write(
        &config,
        "[sandbox]\nnetwork = \"none\"\n\n[sandbox.leak]\npatterns = [{ name = \"acme_key\", regex = \"acme_[a-z0-9]{32}\" }]\n",
    )
    .unwrap();
    let out = scan(&["--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", common::output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("acme_key raw 4..41"));
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[sandbox.leak]\npatterns = [\n  { name = \"acme_key\", regex = \"acme_(\" },\n]\n",
    )
    .unwrap();
    let out = scan(&["--config", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 3, column 3")
            && err.contains("sandbox.leak.patterns[0]")
            && err.contains("unclosed group"),
        "{err}"
    );

    // `run --scrub` with the config: the program's output is reported, the secret is not;
    // `plan` lists the patterns.
    require!(Feature::UserNs);
    let ws = tempdir();
    let plan = |json: bool| {
        let mut c = stockade();
        c.arg("plan")
            .arg("--config")
            .arg(&config)
            .arg("--workspace")
            .arg(ws.path());
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", common::output_text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(
        plan(false).contains("leak pattern: acme_key = acme_[a-z0-9]{32}\n"),
        "{}",
        plan(false)
    );
    let v: serde_json::Value = serde_json::from_str(&plan(true)).unwrap();
    assert_eq!(
        v["leak_patterns"],
        serde_json::json!([{ "name": "acme_key", "regex": "acme_[a-z0-9]{32}" }])
    );
    let out = stockade()
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--scrub", "--", "sh", "-c"])
        .arg(format!("echo 'key {secret}'"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("acme_key") && !err.contains(&secret), "{err}");
}

#[test]
fn scan_and_scrub() {
    require!(Feature::UserNs);
    use std::io::Write;
    // A token-shaped value built at run time, so that no secret-looking literal is stored.
    let token = format!("ghp_{}2gEblC", "aB3".repeat(10));
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
            // From stockade's own environment: off its command line.
            "--secret-env",
            "STOCKADE_TEST_FROM_ENV",
            "--scrub",
            "--",
        ])
        .args([
            "sh",
            "-c",
            "echo $STOCKADE_TEST_TOKEN $K $STOCKADE_TEST_FROM_ENV; echo $STOCKADE_TEST_TOKEN >&2; echo $0",
            "ghp_${TAIL}",
        ])
        .env("STOCKADE_TEST_TOKEN", "host-secret-value-1")
        .env("STOCKADE_TEST_FROM_ENV", "third-secret-value")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.starts_with("[REDACTED] [REDACTED] [REDACTED]\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("third-secret"), "{stdout}");
    assert!(
        !stdout.contains("host-secret") && !stderr.contains("host-secret"),
        "{stdout}{stderr}"
    );
    assert!(!stdout.contains("another-secret-value"), "{stdout}");
}

/// A temp dir outside `/tmp` (the sandbox's own `/tmp` is private and hides mistakes):
/// under the crate's target dir, or `/var/tmp` for a user who cannot write there.
fn outside_tmp() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("stockade-cli-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .or_else(|_| {
            tempfile::Builder::new()
                .prefix("stockade-cli-")
                .tempdir_in("/var/tmp")
        })
        .expect("temp dir outside /tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Polls `f` every 20 ms for up to `secs` seconds; whether it became true.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() > end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Starts `stockade run [flags] -- python3 -c 'sleep' MARKER` from an intermediate `sh`
/// (the caller) and returns the caller, stockade's pid and the marker once the sandboxed
/// program is running.
fn run_under_a_caller(ws: &std::path::Path, flags: &[&str]) -> (std::process::Child, u32, String) {
    use std::io::BufRead;
    let marker = format!(
        "stockade-caller-test-{}-{}",
        std::process::id(),
        flags.len()
    );
    let mut caller = Command::new("sh")
        .arg("-c")
        .arg(r#"exe=$1; shift; "$exe" "$@" & echo $!; wait"#)
        .arg("sh")
        .arg(common::stockade_exe())
        .arg("run")
        .arg("--workspace")
        .arg(ws)
        .args(flags)
        .args(["--", "python3", "-c", "import time; time.sleep(1000)"])
        .arg(&marker)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(caller.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let cli: u32 = line.trim().parse().unwrap();
    // The caller's and stockade's command lines carry the marker too: wait for python.
    assert!(
        eventually(20, || !sandboxed(&marker).is_empty()),
        "the sandboxed program never started"
    );
    (caller, cli, marker)
}

/// The sandboxed `python3 … MARKER` processes on the host.
fn sandboxed(marker: &str) -> Vec<u32> {
    common::host_processes(|cmd| cmd.starts_with("python3 ") && cmd.contains(marker))
}

fn alive(pid: u32) -> bool {
    // A zombie (Z) or a dying process (X) has exited; its status line says so.
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| {
            !s.lines()
                .any(|l| l.starts_with("State:") && (l.contains('Z') || l.contains('X')))
        })
        .unwrap_or(false)
}

#[test]
fn run_dies_with_its_caller() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let (mut caller, cli, marker) = run_under_a_caller(ws.path(), &[]);
    caller.kill().unwrap();
    caller.wait().unwrap();
    let gone = eventually(10, || sandboxed(&marker).is_empty());
    let left = sandboxed(&marker);
    // stockade may still be tearing down when its sandbox is gone.
    let cli_alive = !eventually(10, || !alive(cli));
    if cli_alive {
        kill_stockade(cli, &marker);
    }
    assert!(
        gone,
        "the sandboxed program outlived the caller of `stockade run`: {left:?}"
    );
    assert!(!cli_alive, "stockade outlived its caller");
}

/// SIGKILLs stockade (pid `cli`) if that pid still runs the command carrying `marker`.
fn kill_stockade(cli: u32, marker: &str) {
    let cmdline = std::fs::read(format!("/proc/{cli}/cmdline")).unwrap_or_default();
    if String::from_utf8_lossy(&cmdline).contains(marker) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(cli as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[test]
fn no_die_with_parent_outlives_the_caller() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let (mut caller, cli, marker) = run_under_a_caller(ws.path(), &["--no-die-with-parent"]);
    caller.kill().unwrap();
    caller.wait().unwrap();
    // Give a parent-death signal time to be delivered, then look again.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let left = sandboxed(&marker);
    let cli_alive = alive(cli);
    // Clean up before asserting: killing stockade itself still ends the sandbox.
    if cli_alive {
        kill_stockade(cli, &marker);
    }
    let gone = eventually(10, || sandboxed(&marker).is_empty());
    assert!(cli_alive, "stockade died with its caller");
    assert!(!left.is_empty(), "the sandbox died with stockade's caller");
    assert!(gone, "the sandbox outlived stockade itself");
}

/// `stockade run` reaps the sandbox's init before it exits, even though its wait returned
/// at the init's status record: a caller that is a child subreaper (or PID 1 of a
/// container) and reaps only its own children must not inherit a zombie per run.
#[test]
fn run_leaves_no_zombie_to_a_subreaper_caller() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let script = r#"
import ctypes, os, subprocess, sys
assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
exe, ws = sys.argv[1], sys.argv[2]
for layer in ("full", "landlock"):
    for _ in range(5):
        subprocess.run([exe, "run", "--workspace", ws, "--layer", layer,
                        "--min-layer", "landlock", "--", "true"], check=True)
me = str(os.getpid())
kids = []
for p in os.listdir("/proc"):
    try:
        stat = open(f"/proc/{p}/stat").read()
    except OSError:
        continue
    fields = stat.rsplit(") ", 1)[1].split()
    if fields[1] == me:
        kids.append(p + " " + stat.split(" (", 1)[1].split(")")[0] + " " + fields[0])
print(len(kids), kids)
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(common::stockade_exe())
        .arg(ws.path())
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("0 "),
        "children left to the caller: {text}"
    );
}

#[test]
fn unknown_flag_before_the_program_is_a_usage_error() {
    let ws = outside_tmp();
    let out = stockade()
        .args(["run", "--wrkspace"])
        .arg(ws.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'--wrkspace'"), "{err}");
    assert!(
        err.contains("a similar argument exists: '--workspace'"),
        "{err}"
    );
    // The same for `plan`, and for a flag of the run itself.
    let out = stockade()
        .args(["run", "--scrubb", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'--scrub'"));
}

#[test]
fn arguments_from_the_program_on_pass_verbatim() {
    require!(Feature::UserNs);
    let ws = outside_tmp();
    let script = r#"printf '[%s]' "$@""#;
    let run = |pre: &[&str]| {
        let out = stockade()
            .arg("run")
            .arg("--workspace")
            .arg(ws.path())
            .args(pre)
            .args(["sh", "-c", script, "sh"])
            .args(["-la", "--workspace", "/x", "--", "--wrkspace", "-"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let want = "[-la][--workspace][/x][--][--wrkspace][-]";
    assert_eq!(run(&["--"]), want);
    assert_eq!(run(&[]), want);
    // A program whose name starts with `-` is reachable after `--`.
    let out = stockade()
        .arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--", "-stockade-dash"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn detect_columns_line_up() {
    let out = stockade().arg("detect").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut starts = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        // Labels have single spaces inside ("user namespaces"); two or more end them.
        let gap = line
            .find("  ")
            .unwrap_or_else(|| panic!("no column gap in {line:?}\n{text}"));
        let value = gap + line[gap..].len() - line[gap..].trim_start().len();
        starts.push((value, line));
    }
    assert!(starts.len() >= 10, "{text}");
    let first = starts[0].0;
    for (start, line) in &starts {
        assert_eq!(*start, first, "misaligned: {line:?}\n{text}");
    }
}

/// A relative path flag is taken from the current directory as the shell would take it:
/// `..` that leads it walks up (`--writable ../shared` from a sibling works); a `..`
/// further in is refused, as in a config.
#[test]
fn relative_path_flags_start_from_the_current_directory() {
    let top = outside_tmp();
    let (ws, shared) = (top.path().join("ws"), top.path().join("shared"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&shared).unwrap();
    let run = |flags: &[&str]| {
        stockade()
            .current_dir(&ws)
            .arg("run")
            .args(flags)
            .args(["--", "sh", "-c", "touch ../shared/made && echo ok"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&["--writable", "../shared"]);
    assert!(out.status.success(), "{out:?}");
    assert!(shared.join("made").exists());
    std::fs::remove_file(shared.join("made")).unwrap();
    let out = run(&["--writable", "./../shared/../shared"]);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("without `..`"),
        "{out:?}"
    );
    assert!(!shared.join("made").exists());
}

#[test]
fn path_errors_name_the_path_and_the_errno() {
    use std::path::Path;
    require!(Feature::UserNs);
    let dir = outside_tmp();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let missing = dir.path().join("missing");
    let config = dir.path().join("policy.toml");
    // `run` and `plan` with `--workspace ws` (unless given) and `flag path` exit 125 with
    // exactly `stockade: want`.
    let fails = |flag: &str, path: &Path, want: String| {
        for sub in ["run", "plan"] {
            let mut cmd = stockade();
            cmd.arg(sub);
            if flag != "--workspace" {
                cmd.arg("--workspace").arg(&ws);
            }
            cmd.arg(flag).arg(path);
            if sub == "run" {
                cmd.args(["--", "true"]);
            }
            let out = cmd.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(125), "{sub} {flag} {path:?}: {err}");
            assert_eq!(err, format!("stockade: {want}\n"), "{sub} {flag} {path:?}");
        }
    };
    let enoent = "ENOENT (No such file or directory)";
    let enotdir = "ENOTDIR (Not a directory)";
    let m = missing.display();
    let f = file.display();
    fails("--workspace", &missing, format!("workspace {m}: {enoent}"));
    fails("--workspace", &file, format!("workspace {f}: {enotdir}"));
    for (flag, key) in [
        ("--writable", "writable_paths"),
        ("--read-only", "read_only"),
        ("--tools-dir", "tools_dir"),
        ("--data-dir", "data_dir"),
    ] {
        fails(flag, &missing, format!("{key} {m}: {enoent}"));
    }
    fails("--data-dir", &file, format!("data_dir {f}: {enotdir}"));
    // The same path from a config file, and a config file that is not there.
    let toml = format!("[sandbox]\nwritable_paths = [{:?}]\n", missing);
    std::fs::write(&config, toml).unwrap();
    fails("--config", &config, format!("writable_paths {m}: {enoent}"));
    fails("--config", &missing, format!("config {m}: {enoent}"));
    // Nothing was created on the way.
    assert!(!missing.exists());
    // Without root, a directory the caller cannot search: EACCES, named.
    if !nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        let shut = dir.path().join("shut");
        std::fs::create_dir(&shut).unwrap();
        std::fs::set_permissions(&shut, std::fs::Permissions::from_mode(0o000)).unwrap();
        let inner = shut.join("x");
        let result = std::panic::catch_unwind(|| {
            let want = format!(
                "writable_paths {}: EACCES (Permission denied)",
                inner.display()
            );
            fails("--writable", &inner, want)
        });
        std::fs::set_permissions(&shut, std::fs::Permissions::from_mode(0o755)).unwrap();
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn config_policy_is_its_sandbox_table_agents_sandbox_or_top_level() {
    require!(Feature::UserNs);
    let dir = outside_tmp();
    let config = dir.path().join("host.toml");
    let plan = |text: &str| {
        std::fs::write(&config, text).unwrap();
        stockade()
            .arg("plan")
            .arg("--json")
            .arg("--config")
            .arg(&config)
            .arg("--workspace")
            .arg(dir.path())
            .output()
            .unwrap()
    };
    for text in [
        "network = \"none\"\n",
        "[sandbox]\nnetwork = \"none\"\n",
        "name = \"host\"\n[agents]\nmodel = \"m\"\n[agents.sandbox]\nnetwork = \"none\"\n",
    ] {
        let out = plan(text);
        assert!(
            out.status.success(),
            "{text:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["namespaces"]["net"], true, "{text:?}: {v}");
    }
    let out = plan("network = \"none\"\n[sandbox]\nmode = \"enabled\"\n");
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "stockade: config {}: the config has a policy in more than one place: \
             [sandbox] and top-level keys (network); keep one\n",
            config.display()
        )
    );
    // A misspelt key in the nested table is named with its table, line and column.
    let out = plan("[sandbox]\nnetwork = \"none\"\nnetwrok = \"none\"\n");
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at line 3, column 1 (key `sandbox.netwrok`)"),
        "{err}"
    );
}

/// `unshare` arguments for a private mount namespace: as root plainly, as another user in
/// a user namespace of its own (which may mount there).
fn private_mount_ns() -> &'static [&'static str] {
    if nix::unistd::geteuid().is_root() {
        &["-m", "--propagation", "private"]
    } else {
        &["-Urm", "--propagation", "private"]
    }
}

/// Runs `program` with `args` in a private mount namespace after the shell `setup`
/// (given the fixture directory as `$1`).
fn in_private_mount_ns(setup: &str, dir: &Path, program: &Path, args: &[&str]) -> Output {
    Command::new("unshare")
        .args(private_mount_ns())
        .args([
            "sh",
            "-c",
            &format!("{setup} && shift && exec \"$@\""),
            "sh",
        ])
        .arg(dir)
        .arg(program)
        .args(args)
        .output()
        .unwrap()
}

/// A host whose `/dev/null` is a regular file (a minimal image, a broken container): it
/// was bound as `/dev/null` inside and over `/etc/shadow`, so the program read that file
/// at both places; a host with an empty `/dev` failed with `mask /etc/shadow: ENOENT`.
/// Both are refused before anything runs, naming `/dev/null` and what it is.
#[test]
fn a_dev_null_that_is_no_null_device_is_refused_by_name() {
    require!(Feature::UserNs);
    let (_w, ws) = common::var_tempdir();
    let (_d, dir) = common::var_tempdir();
    let posing = "a regular file posing as /dev/null\n";
    std::fs::write(dir.join("null"), posing).unwrap();
    let ws_arg = ws.to_str().unwrap();
    let run = [
        "run",
        "--workspace",
        ws_arg,
        "--layer",
        "full",
        "--fallback",
        "refuse",
        "--",
        "cat",
        "/dev/null",
        "/etc/shadow",
    ];
    let cases = [
        (
            r#"mount --bind "$1/null" /dev/null"#,
            "stockade: /dev/null is a regular file, not the character device 1:3",
        ),
        (
            "mount -t tmpfs none /dev",
            "stockade: /dev/null is missing on this host; the sandbox needs it",
        ),
    ];
    for (setup, said) in cases {
        let out = in_private_mount_ns(setup, &dir, &common::stockade_exe(), &run);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{setup}: {err}");
        assert!(err.starts_with(said), "{setup}: {err}");
        assert!(out.stdout.is_empty(), "{setup}: {out:?}");
    }
    assert_eq!(std::fs::read_to_string(dir.join("null")).unwrap(), posing);
    // Stdio::null() on layer 2 (whose /dev is the host's) and a full-layer sandbox, from
    // this test binary in such a namespace.
    let exe = std::env::current_exe().unwrap();
    let inner = [
        "--exact",
        "dev_null_inner_a_regular_file_there_is_no_null_device",
        "--nocapture",
    ];
    let out = Command::new("unshare")
        .args(private_mount_ns())
        .args([
            "sh",
            "-c",
            r#"mount --bind "$1/null" /dev/null && shift && exec "$@""#,
        ])
        .args(["sh"])
        .arg(&dir)
        .arg("env")
        .arg(format!("STOCKADE_TEST_FAKE_NULL={}", ws.display()))
        .arg(&exe)
        .args(inner)
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("checked a fake /dev/null"), "{text}");
    assert_eq!(std::fs::read_to_string(dir.join("null")).unwrap(), posing);
}

/// The inner half of the test above: runs only where that test set it up.
#[test]
fn dev_null_inner_a_regular_file_there_is_no_null_device() {
    let Some(ws) = std::env::var_os("STOCKADE_TEST_FAKE_NULL") else {
        return;
    };
    let ws = Path::new(&ws);
    let is_fake_null = |e: &Error| {
        matches!(e, Error::Plan(PlanError::DeviceNode { path, found: NodeKind::File, .. })
            if path == Path::new("/dev/null"))
    };
    let mut full = Policy::with_workspace(ws);
    full.layer = Some(Layer::Full);
    full.fallback = Fallback::Refuse;
    let err = Sandbox::new(full).unwrap_err();
    assert!(is_fake_null(&err), "{err:?}");
    let mut two = Policy::with_workspace(ws);
    two.layer = Some(Layer::Landlock);
    two.fallback = Fallback::Refuse;
    let sb = Sandbox::new(two).unwrap();
    for stream in 0..3 {
        let mut cmd = sb.command("cat");
        match stream {
            0 => cmd.stdin(Stdio::null()),
            1 => cmd.stdout(Stdio::null()),
            _ => cmd.stderr(Stdio::null()),
        };
        let err = cmd.status().unwrap_err();
        assert!(is_fake_null(&err), "{stream}: {err:?}");
    }
    println!("checked a fake /dev/null");
}

/// `stockade plan` with `network = "allow"` from flags, from a config and from both:
/// the allowlist, the private ranges and where the proxy listens, in text and in JSON.
#[test]
fn plan_shows_the_egress_side_of_network_allow() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let plan = |args: &[&str]| {
        let out = stockade()
            .arg("plan")
            .arg("--workspace")
            .arg(ws.path())
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            out.status.code(),
            stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let json = |args: &[&str]| {
        let (code, stdout, stderr) = plan(&[&["--json"], args].concat());
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()
    };
    let flags = [
        "--network",
        "allow",
        "--allow-domain",
        "github.com",
        "--allow-domain",
        "*.githubusercontent.com",
        "--allow-private",
        "10.0.0.0/8",
    ];

    // The full layer: the listeners are on the sandbox's own loopback.
    let (code, text, stderr) = plan(&flags);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "layer: full", "{text}");
    assert_eq!(
        lines[2..5],
        [
            "allow_domains: github.com, *.githubusercontent.com",
            "allow_private: 10.0.0.0/8",
            "egress proxy: 127.0.0.1:3128 (HTTP), 127.0.0.1:1080 (SOCKS5) inside the \
             sandbox's network namespace",
        ],
        "{text}"
    );
    assert!(
        text.contains(
            "  open the egress proxy's listeners 127.0.0.1:3128 (HTTP) and 127.0.0.1:1080 (SOCKS5)\n"
        ),
        "{text}"
    );
    let v = json(&flags);
    assert_eq!(
        v["egress"],
        serde_json::json!({
            "allow_domains": ["github.com", "*.githubusercontent.com"],
            "allow_private": ["10.0.0.0/8"],
            "listen": {"kind": "inside", "http": "127.0.0.1:3128", "socks": "127.0.0.1:1080"},
        }),
        "{v}"
    );
    assert_eq!(v["namespaces"]["net"], true, "{v}");

    // Layer 2: on the host's loopback, no network namespace.
    let l2 = [&flags[..], &["--layer", "landlock"]].concat();
    let (code, text, stderr) = plan(&l2);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        text.contains("\negress proxy: the host's loopback, ports picked at each spawn\n"),
        "{text}"
    );
    let v = json(&l2);
    assert_eq!(v["layer"], "landlock", "{v}");
    assert_eq!(
        v["egress"]["listen"],
        serde_json::json!({"kind": "host_loopback"}),
        "{v}"
    );
    assert_eq!(v["namespaces"]["net"], false, "{v}");

    // A config says allow; the flags add to its lists, after its own entries.
    let dir = tempdir();
    let config = dir.path().join("host.toml");
    std::fs::write(
        &config,
        "[sandbox]\nnetwork = \"allow\"\nallow_domains = [\"pypi.org:443\"]\n\
         allow_private = [\"127.0.0.1/32\"]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let v = json(&["--config", config]);
    assert_eq!(
        v["egress"]["allow_domains"],
        serde_json::json!(["pypi.org:443"])
    );
    let v = json(&[
        "--config",
        config,
        "--allow-domain",
        "[2001:db8::1]:22",
        "--allow-private",
        "::1/128",
    ]);
    assert_eq!(
        (&v["egress"]["allow_domains"], &v["egress"]["allow_private"]),
        (
            &serde_json::json!(["pypi.org:443", "[2001:db8::1]:22"]),
            &serde_json::json!(["127.0.0.1/32", "::1/128"])
        ),
        "{v}"
    );
    // An empty allowlist allows nothing, and says so.
    let (code, text, _) = plan(&["--network", "allow"]);
    assert_eq!(code, Some(0));
    assert!(
        text.contains(
            "\nallow_domains: (none: every connection is refused)\nallow_private: (none)\n"
        ),
        "{text}"
    );

    // The other modes have no egress side.
    for mode in ["none", "full"] {
        let (code, text, _) = plan(&["--network", mode]);
        assert_eq!(code, Some(0));
        assert!(
            !text.contains("egress") && !text.contains("allow_"),
            "{text}"
        );
        assert_eq!(
            json(&["--network", mode])["egress"],
            serde_json::Value::Null
        );
    }

    // The lists without the allow mode are refused, naming the flag and the entry; so is
    // a --network that leaves a config's lists without it.
    let refused = |args: &[&str], want: &str| {
        let (code, _, stderr) = plan(args);
        assert_eq!(code, Some(125), "{args:?}: {stderr}");
        assert_eq!(stderr, format!("stockade: {want}\n"), "{args:?}");
    };
    refused(
        &["--allow-domain", "github.com"],
        "--allow-domain github.com: needs --network allow (the default network is \"full\")",
    );
    refused(
        &["--network", "none", "--allow-private", "10.0.0.0/8"],
        "--allow-private 10.0.0.0/8: needs --network allow (--network is \"none\")",
    );
    std::fs::write(dir.path().join("none.toml"), "network = \"none\"\n").unwrap();
    let none = dir.path().join("none.toml");
    refused(
        &[
            "--config",
            none.to_str().unwrap(),
            "--allow-domain",
            "github.com",
        ],
        "--allow-domain github.com: needs --network allow (the config's network is \"none\")",
    );
    refused(
        &["--config", config, "--network", "full"],
        "--network full: the config's allow_domains applies only with network = \"allow\"",
    );

    // An entry that does not parse is a usage error naming the flag and the entry.
    for (flag, entry, why) in [
        (
            "--allow-domain",
            "a..b",
            "not a domain name or an IP address",
        ),
        (
            "--allow-domain",
            "*.*.a",
            "a wildcard is allowed only as a leading '*.'",
        ),
        (
            "--allow-domain",
            "github.com:0",
            "the port must be a number from 1 to 65535",
        ),
        (
            "--allow-domain",
            "github.com:22:1",
            "with a port, write [address]:port",
        ),
        ("--allow-private", "10.0.0.1/8", "not a CIDR"),
        ("--allow-private", "10.0.0.0", "not a CIDR"),
    ] {
        let (code, _, stderr) = plan(&["--network", "allow", flag, entry]);
        assert_eq!(code, Some(2), "{flag} {entry}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid value '{entry}' for '{flag} <"))
                && stderr.contains(&format!("{entry:?}"))
                && stderr.contains(why),
            "{flag} {entry}: {stderr}"
        );
    }

    // `--help` lists the three modes.
    let out = stockade().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for mode in ["- none:", "- allow:", "- full:"] {
        assert!(help.contains(mode), "{help}");
    }
}
