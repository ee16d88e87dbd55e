//! Resource limits (`[sandbox.limits]`), proven from inside: the rlimits a program sees,
//! the wall time that ends a whole sandbox, memory and process limits through the cgroup
//! (root here: the v1 hierarchies are root's) or through `RLIMIT_NPROC` in the sandbox's
//! user namespace (any other user), the per-sandbox inotify count, how a run ended and
//! what it used, and the degradation when a limit cannot hold.

#![cfg(target_os = "linux")]

mod common;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use common::Feature;
use stockade::{ByteSize, Layer, Policy, Sandbox, Stdio, Termination};

use common::{LAYERS, is_root, sandbox_on};

#[test]
fn rlimits_inside_are_the_configured_ones() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer, |p| {
            p.limits.open_files = Some(200);
            p.limits.file_size = Some(ByteSize::mib(1));
            p.limits.cpu_time = Some(Duration::from_secs(7));
        });
        let out = sb
            .command("bash")
            .args([
                "-c",
                "ulimit -n; ulimit -Hn; ulimit -f; ulimit -t; ulimit -Ht; ulimit -c",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // bash shows -f in blocks of 1024 bytes; -t's hard limit is one second more, so
        // that SIGXCPU names the cause before the SIGKILL.
        assert_eq!(
            text,
            "200\n200\n1024\n7\n8\n0\n",
            "{layer}: {}",
            common::output_text(&out)
        );
        // A write past file_size: SIGXFSZ, reported as the limit.
        let mut child = sb
            .command("sh")
            .args(["-c", "exec head -c 2000000 /dev/zero > big"])
            .spawn()
            .unwrap();
        let status = child.wait().unwrap();
        assert!(!status.success(), "{layer}");
        assert_eq!(
            child.termination(),
            Some(Termination::FileSize(ByteSize::mib(1))),
            "{layer}"
        );
        let _ = std::fs::remove_file(ws.join("big"));
    }
    // The default: no core dumps, whatever the host allows.
    let sb = sandbox_on(&ws, Layer::Full, |_| {});
    assert_eq!(common::sh_ok(&sb, "ulimit -c"), "0\n");
}

#[test]
fn cpu_time_ends_a_busy_process_with_sigxcpu() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let sb = sandbox_on(&ws, Layer::Full, |p| {
        p.limits.cpu_time = Some(Duration::from_secs(1))
    });
    let mut child = sb
        .command("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGXCPU), "{status:?}");
    assert_eq!(
        child.termination(),
        Some(Termination::CpuTime(Duration::from_secs(1)))
    );
    // The rlimit counts the scheduler's exact runtime; the usage's user and system times
    // are that runtime split by tick samples (`cputime_adjust`), which on a loaded VM
    // (steal time) came to 833 ms at the 1 s limit: most of the second, not all of it.
    let usage = child.usage().unwrap();
    assert!(
        usage.user_cpu + usage.system_cpu >= Duration::from_millis(600),
        "{usage:?}"
    );
}

/// `sleep 60` and a grandchild under `wall_time = "2s"`: ended in 2–3 s, reported, and no
/// process of it is left on the host.
#[test]
fn wall_time_ends_the_whole_sandbox() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let marker = format!("60.{}{}", std::process::id(), layer as u8);
        let sb = sandbox_on(&ws, layer, |p| {
            p.limits.wall_time = Some(Duration::from_secs(2))
        });
        let start = Instant::now();
        let mut child = sb
            .command("sh")
            .args(["-c", &format!("sleep {marker} & sleep {marker}")])
            .spawn()
            .unwrap();
        let status = child.wait().unwrap();
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(3),
            "{layer}: {took:?}"
        );
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{layer}: {status:?}");
        assert_eq!(
            child.termination(),
            Some(Termination::WallTime(Duration::from_secs(2))),
            "{layer}"
        );
        let usage = child.usage().unwrap();
        assert!(usage.wall_time >= Duration::from_secs(2), "{usage:?}");
        assert_eq!(
            common::host_processes_with(&marker),
            Vec::<u32>::new(),
            "{layer}"
        );
    }
    // A run that ends in time is not reported as one that ran out of it.
    let sb = sandbox_on(&ws, Layer::Full, |p| {
        p.limits.wall_time = Some(Duration::from_millis(1500))
    });
    let mut child = sb.command("true").spawn().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(child.termination(), Some(Termination::Exited(0)));
    std::thread::sleep(Duration::from_millis(1600));
}

/// The CLI: exit status 124 and the limit named, as `timeout(1)` does.
#[test]
fn cli_wall_time_exits_124() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let json = ws.join("stats.json");
    let start = Instant::now();
    let out = std::process::Command::new(common::stockade_exe())
        .args([
            "run",
            "--no-pty",
            "--wall-time",
            "2s",
            "--stats",
            "--stats-json",
        ])
        .arg(&json)
        .arg("--workspace")
        .arg(&ws)
        .args(["--", "sleep", "60"])
        .output()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(
        stderr.contains("stockade: wall time 2s reached"),
        "{stderr}"
    );
    assert!(stderr.contains("stockade: wall 2."), "{stderr}");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(stats["termination"], "wall_time", "{stats}");
    assert!(stats["wall_time_s"].as_f64().unwrap() >= 2.0, "{stats}");
}

/// Memory: a program allocating four times its limit is killed by the OOM killer and the
/// run says so; the host goes on. Needs the cgroup, which here only root may use.
#[test]
fn root_only_memory_limit_kills_and_says_so() {
    require!(Feature::Root);
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer, |p| p.limits.memory = Some(ByteSize::mib(64)));
        assert_eq!(sb.degradation(), None, "{layer}");
        let mut child = sb
            .command("python3")
            .args(["-c", "b = bytearray(256 << 20); print('survived')"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.wait().unwrap();
        assert!(!out.success(), "{layer}: {out:?}");
        assert_eq!(
            child.termination(),
            Some(Termination::Memory(ByteSize::mib(64))),
            "{layer}"
        );
        let usage = child.usage().unwrap();
        assert!(
            usage.from_cgroup && usage.oom_kills >= 1,
            "{layer}: {usage:?}"
        );
        let peak = usage.peak_memory.unwrap();
        assert!(peak <= 65 << 20, "{layer}: peak {peak}");
        // Under the limit, the same program runs.
        let ok = common::py_ok(&sb, "b = bytearray(16 << 20); print('fine')");
        assert_eq!(ok, "fine\n");
    }
}

/// A fork bomb under `processes = 64` is contained (fork fails at the limit) and the run
/// still ends at its wall time, leaving nothing behind.
#[test]
fn fork_bomb_is_contained_and_ends_at_wall_time() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    // Without root the cgroup is not ours: RLIMIT_NPROC in the sandbox's own user
    // namespace bounds the full layer.
    let layers: &[Layer] = if is_root() { &LAYERS } else { &[Layer::Full] };
    for &layer in layers {
        let marker = format!("bomb{}{}", std::process::id(), layer as u8);
        let sb = sandbox_on(&ws, layer, |p| {
            p.limits.processes = Some(64);
            p.limits.wall_time = Some(Duration::from_secs(3));
        });
        assert_eq!(sb.degradation(), None, "{layer}");
        let script = format!(
            "bomb() {{ bomb & bomb & wait; }}; (exec -a {marker} sh -c 'sleep 30') & bomb 2>/dev/null"
        );
        let start = Instant::now();
        let mut child = sb.command("bash").args(["-c", &script]).spawn().unwrap();
        // While it runs, the host's own processes still fork.
        std::thread::sleep(Duration::from_millis(1500));
        let n = common::host_processes(|c| c.starts_with("bash -c bomb")).len();
        assert!(n <= 64, "{layer}: {n} processes of the bomb");
        assert!(
            std::process::Command::new("true")
                .status()
                .unwrap()
                .success()
        );
        child.wait().unwrap();
        assert!(start.elapsed() < Duration::from_secs(4), "{layer}");
        assert_eq!(
            child.termination(),
            Some(Termination::WallTime(Duration::from_secs(3))),
            "{layer}"
        );
        if is_root() {
            assert!(child.usage().unwrap().process_limit_hits > 0, "{layer}");
        }
        assert_eq!(
            common::host_processes_with(&marker),
            Vec::<u32>::new(),
            "{layer}"
        );
    }
}

/// Without a cgroup of its own, a memory limit cannot hold: the sandbox says so (degrade)
/// or refuses (`fallback = "refuse"`), naming cgroup delegation. Run as uid 65534: as
/// root here the cgroup is usable.
#[test]
fn without_delegation_memory_limits_degrade_or_refuse() {
    require!(Feature::UserNs);
    if is_root() {
        require!(Feature::Setpriv);
        // The CLI as that user: it warns, or refuses with 125.
        let (dir, exe) = common::world_executable_copy();
        let _ = exe;
        let cli = dir.path().join("stockade");
        std::fs::copy(common::stockade_exe(), &cli).unwrap();
        let run = |extra: &[&str]| {
            std::process::Command::new("setpriv")
                .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
                .arg(&cli)
                .args([
                    "run",
                    "--no-pty",
                    "--workspace",
                    "/tmp",
                    "--memory",
                    "64MiB",
                ])
                .args(extra)
                .args(["--", "true"])
                .current_dir("/tmp")
                .output()
                .unwrap()
        };
        let out = run(&[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains("memory 64MiB") && stderr.contains("not enforced"),
            "{stderr}"
        );
        assert!(stderr.contains("delegat"), "{stderr}");
        let out = run(&["--fallback", "refuse"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{stderr}");
        assert!(
            stderr.contains("cannot be enforced") && stderr.contains("delegat"),
            "{stderr}"
        );
        return;
    }
    let (_d, ws) = common::var_tempdir();
    let sb = sandbox_on(&ws, Layer::Full, |p| {
        p.limits.memory = Some(ByteSize::mib(64))
    });
    let d = sb.degradation().expect("a degradation");
    assert!(d.reason.contains("memory 64MiB"), "{d}");
    let mut p = Policy::with_workspace(&ws);
    p.limits.memory = Some(ByteSize::mib(64));
    p.fallback = stockade::Fallback::Refuse;
    let err = Sandbox::new(p).unwrap_err();
    assert!(
        matches!(
            err,
            stockade::Error::Plan(stockade::PlanError::LimitsUnavailable { .. })
        ),
        "{err}"
    );
    // `processes` alone holds on the full layer without a cgroup: no degradation.
    let sb = sandbox_on(&ws, Layer::Full, |p| p.limits.processes = Some(8));
    assert_eq!(sb.degradation(), None);
    // But not on layer 2, where RLIMIT_NPROC would count every process of the user.
    let sb = sandbox_on(&ws, Layer::Landlock, |p| p.limits.processes = Some(8));
    assert!(
        sb.degradation()
            .is_some_and(|d| d.reason.contains("processes 8"))
    );
}

/// A program that opens inotify instances in a loop takes at most the sandbox's share
/// (32), and the host user's own watchers keep working.
#[test]
fn an_inotify_loop_leaves_the_hosts_watchers_working() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let sb = sandbox_on(&ws, Layer::Full, |_| {});
    let code = "import ctypes, sys, time\n\
                libc = ctypes.CDLL(None, use_errno=True)\n\
                fds = []\n\
                while len(fds) < 100000:\n\
                \x20   fd = libc.inotify_init()\n\
                \x20   if fd < 0: break\n\
                \x20   fds.append(fd)\n\
                print(len(fds), ctypes.get_errno(), flush=True)\n\
                time.sleep(3)\n";
    let mut child = sb
        .command("python3")
        .args(["-c", code])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, format!("32 {}\n", libc::EMFILE));
    // While the sandbox holds its 32, the host opens its own.
    // SAFETY: inotify_init1 takes flags and returns a new fd or -1.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    assert!(
        fd >= 0,
        "the host's inotify: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `fd` is the fd just opened, owned here.
    unsafe { libc::close(fd) };
    child.kill().unwrap();
    child.wait().unwrap();
}

/// What a run used: CPU time and peak memory, from the cgroup (root) or the init's
/// rusage.
#[test]
fn usage_is_reported() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer, |_| {});
        let mut child = sb
            .command("python3")
            .args([
                "-c",
                "b = bytearray(48 << 20)\nfor i in range(3000000): pass",
            ])
            .spawn()
            .unwrap();
        assert!(child.wait().unwrap().success());
        let u = child.usage().unwrap();
        assert!(u.user_cpu > Duration::from_millis(20), "{layer}: {u:?}");
        assert!(u.peak_memory.unwrap() >= 48 << 20, "{layer}: {u:?}");
        assert!(u.wall_time >= u.user_cpu / 2, "{layer}: {u:?}");
        assert_eq!(child.termination(), Some(Termination::Exited(0)));
    }
}

/// Every test above, as uid 65534 (limits without a cgroup).
#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
