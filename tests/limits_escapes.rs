//! Attacks on the resource limits (issue 23): a hostile program that tries to raise or
//! leave its limits, to outlive its wall time or to make the host's report lie, and a
//! careful host that checks what the limits machinery leaves behind (timers, fds, cgroup
//! leaves). Each test fails on a hole and passes while the limit holds. Root runs every
//! test (with the cgroup); the re-run as uid 65534 runs them without one.

#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Feature;
use stockade::{ByteSize, Layer, Sandbox, Stdio, Termination};

use common::{LAYERS, is_root, sandbox_on};

/// Runs python `code` inside; returns stdout (whatever the status) and the child.
fn py(sb: &Sandbox, code: &str) -> (String, stockade::Child) {
    let mut child = sb
        .command("python3")
        .args(["-c", code])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::read_stdout(&mut child);
    child.wait().unwrap();
    (out, child)
}

/// Python that tries every way to raise or leave the limits from inside and prints
/// `<attempt> <OK|errno>` per line, then `cgroup-after <lines>` of `/proc/self/cgroup`.
const RAISE_OR_LEAVE: &str = r#"
import os, resource, errno, ctypes
libc = ctypes.CDLL(None, use_errno=True)
def t(name, f):
    try:
        f()
        print(name, "OK", flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno), flush=True)
    except ValueError as e:
        print(name, "refused:", e, flush=True)
def w(path, data):
    def f():
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)
    return f
def c(name, r):
    def f():
        if r() != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    return f
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
t("raise-nofile", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (hard + 1, hard + 1)))
t("prlimit-self-nofile", lambda: resource.prlimit(os.getpid(), resource.RLIMIT_NOFILE, (hard + 1, hard + 1)))
ns, nh = resource.getrlimit(resource.RLIMIT_NPROC)
if nh != resource.RLIM_INFINITY:
    t("raise-nproc", lambda: resource.setrlimit(resource.RLIMIT_NPROC, (nh + 100, nh + 100)))
t("inotify-max", w("/proc/sys/user/max_inotify_instances", "100000"))
t("inotify-watches", w("/proc/sys/user/max_inotify_watches", "10000000"))
before = open("/proc/self/cgroup").read()
for line in before.splitlines():
    _, ctrl, path = line.split(":", 2)
    if ctrl not in ("memory", "pids", "cpu,cpuacct", "cpu", "cpuacct"):
        continue
    leaf = "/sys/fs/cgroup/" + ctrl + path
    parent = os.path.dirname(leaf)
    for f, v in (("memory.limit_in_bytes", "-1"), ("memory.memsw.limit_in_bytes", "-1"),
                 ("pids.max", "max"), ("cpu.cfs_quota_us", "-1")):
        t(ctrl + "-leaf-" + f, w(leaf + "/" + f, v))
    t(ctrl + "-to-parent", w(parent + "/cgroup.procs", str(os.getpid())))
    t(ctrl + "-to-root", w("/sys/fs/cgroup/" + ctrl + "/cgroup.procs", str(os.getpid())))
    t(ctrl + "-mkdir", lambda: os.mkdir(leaf + "/sub"))
t("unshare-user", c("unshare", lambda: libc.unshare(0x10000000)))
t("unshare-cgroup", c("unshare", lambda: libc.unshare(0x02000000)))
mnt = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cgmnt").encode()
os.makedirs(mnt, exist_ok=True)
t("mount-cgroup", c("mount", lambda: libc.mount(b"cgroup", mnt, b"cgroup", 0, b"memory")))
t("mount-cgroup2", c("mount", lambda: libc.mount(b"cgroup2", mnt, b"cgroup2", 0, None)))
after = open("/proc/self/cgroup").read()
print("cgroup-same", before == after, flush=True)
"#;

/// From inside, on both layers: no rlimit goes up, no per-user-namespace count is
/// rewritten, no cgroup file of the sandbox or its parent is written, no cgroup is made or
/// mounted, the program stays in its cgroup; and the limits still hold afterwards.
#[test]
fn the_program_cannot_raise_or_leave_its_limits() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer, |p| {
            p.limits.open_files = Some(64);
            p.limits.processes = Some(16);
            if is_root() {
                p.limits.memory = Some(ByteSize::mib(64));
                p.limits.cpu = Some(0.5);
            }
        });
        let (out, child) = py(&sb, RAISE_OR_LEAVE);
        assert_eq!(child.termination(), Some(Termination::Exited(0)), "{out}");
        assert!(out.contains("cgroup-same True"), "{layer}: {out}");
        assert!(out.contains("raise-nofile "), "{layer}: {out}");
        if is_root() {
            // The cgroup's files were tried (their path came from /proc/self/cgroup).
            assert!(out.contains("memory-to-parent "), "{layer}: {out}");
        }
        let holes: Vec<&str> = out.lines().filter(|l| l.ends_with(" OK")).collect();
        assert_eq!(holes, Vec::<&str>::new(), "{layer}: {out}");
        if is_root() {
            // After all that, the memory limit still kills.
            let (out, child) = py(
                &sb,
                "b = bytearray(256 << 20); b[::4096] = b'x' * len(b[::4096]); print('survived')",
            );
            assert!(!out.contains("survived"), "{layer}: {out}");
            assert_eq!(
                child.termination(),
                Some(Termination::Memory(ByteSize::mib(64))),
                "{layer}"
            );
        }
    }
}

/// The counts that bound the full layer without a cgroup (`RLIMIT_NPROC` in the
/// sandbox's user namespace, the cgroup's `pids.max` with one) count threads too, and a
/// nested user namespace (which would start a fresh count) cannot be made.
#[test]
fn threads_count_against_the_process_limit() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let layers: &[Layer] = if is_root() { &LAYERS } else { &[Layer::Full] };
    for &layer in layers {
        let sb = sandbox_on(&ws, layer, |p| {
            p.limits.processes = Some(16);
            p.limits.wall_time = Some(Duration::from_secs(20));
        });
        assert_eq!(sb.degradation(), None, "{layer}");
        let code = "import threading, time, os\n\
                    ev = threading.Event()\n\
                    n = 0\n\
                    try:\n\
                    \x20   for _ in range(200):\n\
                    \x20       threading.Thread(target=ev.wait, daemon=True).start(); n += 1\n\
                    except RuntimeError:\n\
                    \x20   pass\n\
                    kids = 0\n\
                    try:\n\
                    \x20   for _ in range(200):\n\
                    \x20       if os.fork() == 0:\n\
                    \x20           time.sleep(5); os._exit(0)\n\
                    \x20       kids += 1\n\
                    except OSError:\n\
                    \x20   pass\n\
                    print(n, kids, flush=True)\n\
                    ev.set()\n\
                    os._exit(0)\n";
        let (out, _child) = py(&sb, code);
        let nums: Vec<u64> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
        assert_eq!(nums.len(), 2, "{layer}: {out}");
        // 16 for the program: itself, its threads and its children together.
        assert!(
            nums[0] < 16,
            "{layer}: {} threads under processes = 16",
            nums[0]
        );
        assert!(
            nums[0] + nums[1] < 16,
            "{layer}: {} threads and {} processes under processes = 16",
            nums[0],
            nums[1]
        );
    }
}

/// Layer 2 has no PID namespace: a daemon that leaves the program's tree (double fork,
/// `setsid`) must still end at the wall time, and at the program's own end; and on both
/// layers nothing of it is left on the host when the wait returns.
#[test]
fn a_daemon_that_left_the_tree_ends_with_the_sandbox() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        for (i, wall) in [Some(Duration::from_secs(2)), None].into_iter().enumerate() {
            let rest = format!("{}x{}x{i}", std::process::id(), layer as u8);
            let marker = format!("escd{rest}");
            let sb = sandbox_on(&ws, layer, |p| p.limits.wall_time = wall);
            // The daemon: its parent exits, it makes a session of its own, closes the
            // program's stdio, ignores the signals it may, and sleeps.
            let script = format!(
                "( setsid bash -c 'trap \"\" HUP TERM INT; m=escd; exec -a ${{m}}{rest} sleep 30' \
                 </dev/null >/dev/null 2>&1 & ) ; {}",
                if wall.is_some() { "sleep 30" } else { "exit 0" }
            );
            let start = Instant::now();
            let mut child = sb.command("bash").args(["-c", &script]).spawn().unwrap();
            child.wait().unwrap();
            assert!(start.elapsed() < Duration::from_secs(4), "{layer}");
            let left = common::host_processes_with(&marker);
            assert_eq!(left, Vec::<u32>::new(), "{layer} wall {wall:?}");
        }
    }
}

/// A process that keeps changing its pid (forks a child, exits; the child does the same)
/// is always one step ahead of a kill that reads a list of pids and then signals them: it
/// must still end at the wall time, and at the program's own end.
#[test]
fn a_process_that_keeps_changing_its_pid_ends_with_the_sandbox() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        for wall in [Some(Duration::from_secs(2)), None] {
            let marker = format!(
                "migr{}x{}x{}",
                std::process::id(),
                layer as u8,
                wall.is_some()
            );
            let sb = sandbox_on(&ws, layer, |p| {
                p.limits.wall_time = wall;
                p.limits.processes = Some(32);
            });
            let script = if wall.is_some() {
                "f() { f & exit; }; f & sleep 30"
            } else {
                "f() { f & exit; }; f & sleep 0.5; exit 0"
            };
            let start = Instant::now();
            let mut child = sb
                .command("bash")
                .args(["-c", script, &marker])
                .spawn()
                .unwrap();
            child.wait().unwrap();
            let took = start.elapsed();
            let left = common::host_processes_with(&marker);
            for &pid in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            assert_eq!(left, Vec::<u32>::new(), "{layer} wall {wall:?}");
            assert!(
                took < Duration::from_secs(4),
                "{layer} wall {wall:?}: {took:?}"
            );
            if wall.is_some() {
                assert_eq!(
                    child.termination(),
                    Some(Termination::WallTime(Duration::from_secs(2))),
                    "{layer}"
                );
            }
        }
    }
}

/// Like std's, dropping a `Child` neither kills nor reaps it (`Child`'s docs): with a
/// cgroup too. Its limits hold meanwhile, and its leaf goes once it has ended.
#[test]
fn root_only_a_dropped_child_runs_on_under_its_limits() {
    require!(Feature::Root);
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let done = ws.join(format!("done-{}", layer as u8));
        let cg = ws.join(format!("cgroup-{}", layer as u8));
        let sb = sandbox_on(&ws, layer, |p| p.limits.memory = Some(ByteSize::mib(64)));
        let script = format!(
            "cat /proc/self/cgroup > {0}.tmp; mv {0}.tmp {0}; sleep 1; \
             python3 -c 'b = bytearray(256 << 20)' 2>/dev/null; echo $? > {1}.tmp; mv {1}.tmp {1}",
            cg.display(),
            done.display()
        );
        let child = sb.command("sh").args(["-c", &script]).spawn().unwrap();
        let start = Instant::now();
        while !cg.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{layer}: no start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let start = Instant::now();
        drop(child);
        let dropped_in = start.elapsed();
        let leaf = std::fs::read_to_string(&cg)
            .unwrap()
            .lines()
            .find_map(|l| l.split_once(":memory:").map(|(_, p)| p))
            .map(|p| PathBuf::from(format!("/sys/fs/cgroup/memory{p}")))
            .expect("a memory cgroup");
        assert!(
            leaf.exists(),
            "{layer}: {} gone at the drop",
            leaf.display()
        );
        let start = Instant::now();
        while !done.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{layer}: the program of a dropped Child was killed (drop took {dropped_in:?})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        let code = std::fs::read_to_string(&done).unwrap();
        assert_ne!(
            code.trim(),
            "0",
            "{layer}: 256MiB under 64MiB after the drop"
        );
        // The sandbox has ended: its leaf goes.
        let start = Instant::now();
        while leaf.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{layer}: {} left after the dropped Child ended",
                leaf.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The report is the host's, not the program's: an exit code of 137 is not an OOM kill,
/// a `SIGKILL` the program sends itself is not one either, and its own `SIGXCPU` without
/// a `cpu_time` limit is a plain signal.
#[test]
fn the_program_cannot_fake_a_limit() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer, |p| {
            if is_root() {
                p.limits.memory = Some(ByteSize::mib(64));
            }
            p.limits.processes = Some(16);
            p.limits.wall_time = Some(Duration::from_secs(30));
        });
        for (script, want) in [
            ("exit 137", Termination::Exited(137)),
            ("exit 124", Termination::Exited(124)),
            ("kill -KILL $$", Termination::Signaled(libc::SIGKILL)),
            ("kill -XCPU $$", Termination::Signaled(libc::SIGXCPU)),
            ("kill -XFSZ $$", Termination::Signaled(libc::SIGXFSZ)),
        ] {
            let mut child = sb.command("sh").args(["-c", script]).spawn().unwrap();
            child.wait().unwrap();
            assert_eq!(child.termination(), Some(want), "{layer}: {script}");
            let u = child.usage().unwrap();
            assert_eq!((u.oom_kills, u.process_limit_hits), (0, 0), "{layer}");
        }
    }
}

/// A host that waits late (the program ended long before its deadline, the host looked
/// after it) must not be told the wall time ended the run.
#[test]
fn a_late_wait_is_not_a_wall_time_kill() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer, |p| {
            p.limits.wall_time = Some(Duration::from_millis(500))
        });
        let mut child = sb.command("true").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let status = child.wait().unwrap();
        assert!(status.success(), "{layer}: {status:?}");
        assert_eq!(
            child.termination(),
            Some(Termination::Exited(0)),
            "{layer}: the program exited 0 well within its wall time"
        );
    }
}

/// Python: two children burn 0.8 s of CPU each at once, then are waited for (`wait`)
/// or, with `ign`, reaped by the kernel (`SIGCHLD` ignored); prints the CPU time the
/// children used as they measured it.
const TWO_BURNERS: &str = r#"
import os, signal, time, sys
if sys.argv[1] == "ign":
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
r, w = os.pipe()
for _ in range(2):
    if os.fork() == 0:
        os.close(r)
        t = time.process_time()
        while time.process_time() - t < 0.8:
            pass
        os._exit(0)
os.close(w)
os.read(r, 1)
if sys.argv[1] != "ign":
    for _ in range(2):
        os.wait()
"#;

fn burn(sb: &Sandbox, mode: &str) -> stockade::Usage {
    let mut child = sb
        .command("python3")
        .args(["-c", TWO_BURNERS, mode])
        .spawn()
        .unwrap();
    assert!(child.wait().unwrap().success());
    child.usage().unwrap()
}

/// The CPU time of a run is what its processes used: 1.6 s for two children that each
/// burnt 0.8 s, with the cgroup (root) or the init's `rusage` (uid 65534).
#[test]
fn usage_counts_every_cpu_second() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in LAYERS {
        let sb = sandbox_on(&ws, layer, |p| {
            if is_root() {
                p.limits.memory = Some(ByteSize::mib(1024));
            }
        });
        let u = burn(&sb, "wait");
        assert_eq!(u.from_cgroup, is_root(), "{layer}");
        let cpu = u.user_cpu + u.system_cpu;
        assert!(cpu >= Duration::from_millis(1500), "{layer}: {u:?}");
    }
}

/// `stockade run --stats-json FILE` writes FILE after the run: when FILE is in the
/// workspace, the program may have replaced it with a symlink to any file of the host
/// user (for a root host, `/etc/shadow`). The host must not write through it.
#[test]
fn the_stats_file_is_not_written_through_a_link_the_program_planted() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let (_v, victims) = common::var_tempdir();
    for layer in ["full", "landlock"] {
        let victim = victims.join(format!("precious-{layer}"));
        std::fs::write(&victim, "precious\n").unwrap();
        let json = ws.join(format!("stats-{layer}.json"));
        let out = std::process::Command::new(common::stockade_exe())
            .args([
                "run",
                "--no-pty",
                "--layer",
                layer,
                "--min-layer",
                "landlock",
            ])
            .arg("--stats-json")
            .arg(&json)
            .arg("--workspace")
            .arg(&ws)
            .args(["--", "sh", "-c"])
            .arg(format!(
                "rm -f {0}; ln -s {1} {0}",
                json.display(),
                victim.display()
            ))
            .output()
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious\n",
            "{layer}: the host wrote its stats through the program's symlink: {}",
            common::output_text(&out)
        );
        // The host says it could not write the stats where asked.
        assert_eq!(
            out.status.code(),
            Some(125),
            "{}",
            common::output_text(&out)
        );
        let _ = std::fs::remove_file(&json);
    }
}

/// This process's open fds.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Timers of runs that ended hold nothing: 150 runs with a long wall time, each waited
/// for, leave no fd (each armed timer holds a pidfd until it is dropped) and no thread
/// per run.
#[test]
fn ended_runs_leave_no_timer_fd() {
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    let sb = sandbox_on(&ws, Layer::Full, |p| {
        p.limits.wall_time = Some(Duration::from_secs(3600))
    });
    // Warm up (the watchdog's thread, the probe's fds).
    let mut child = sb.command("true").spawn().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let before = open_fds();
    for _ in 0..150 {
        let mut child = sb.command("true").spawn().unwrap();
        assert!(child.wait().unwrap().success());
    }
    // The watchdog drops disarmed timers when it wakes: at once.
    std::thread::sleep(Duration::from_millis(200));
    let after = open_fds();
    // Other tests of this binary run beside this one and open fds of their own; a leak
    // here is one fd per run.
    assert!(
        after < before + 60,
        "{before} fds before 150 timed runs, {after} after"
    );
}

/// The leaves of this host's cgroups in the v1 hierarchies, named `stockade-<pid>-*`.
fn leaves_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("stockade-{pid}-");
    let mut out = Vec::new();
    for h in ["memory", "pids", "cpu", "cpuacct", "cpu,cpuacct"] {
        walk(&Path::new("/sys/fs/cgroup").join(h), 5, &mut |p| {
            if p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            {
                out.push(p.to_path_buf());
            }
        });
    }
    out
}

fn walk(dir: &Path, depth: u32, f: &mut dyn FnMut(&Path)) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            f(&e.path());
            if depth > 0 {
                walk(&e.path(), depth - 1, f);
            }
        }
    }
}

fn cli(ws: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(common::stockade_exe());
    c.args(["run", "--no-pty", "--memory", "128MiB", "--processes", "10"])
        .arg("--workspace")
        .arg(ws);
    c
}

/// A spawn that fails (no such program; a program that is a directory) removes the cgroup
/// it made. Each CLI run is its own process, so its leaves are named by its pid.
#[test]
fn root_only_a_failed_spawn_leaves_no_cgroup() {
    require!(Feature::Root);
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    for layer in ["full", "landlock"] {
        for program in ["no-such-program-xyz", "/etc", "/etc/hostname"] {
            let run = cli(&ws)
                .args(["--layer", layer, "--min-layer", "landlock", "--", program])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let pid = run.id();
            let out = run.wait_with_output().unwrap();
            assert!(!out.status.success(), "{}", common::output_text(&out));
            // The CLI is gone; leaves named by its pid would be its leak.
            assert_eq!(leaves_of(pid), Vec::<PathBuf>::new(), "{layer} {program}");
        }
    }
    // The same in this process, where a leak stays visible: the leaves of this pid must
    // not grow with failed spawns (other tests' leaves come and go; a leak stays).
    let sb = sandbox_on(&ws, Layer::Full, |p| {
        p.limits.memory = Some(ByteSize::mib(128))
    });
    for _ in 0..20 {
        assert!(sb.command("no-such-program-xyz").spawn().is_err());
        assert!(sb.command("/etc").spawn().is_err());
    }
    let start = Instant::now();
    loop {
        let n = leaves_of(std::process::id()).len();
        // Other running tests may hold up to a few leaves each (4 hierarchies).
        if n <= 16 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{n} leaves of this process after 40 failed spawns"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A host killed with `SIGKILL` leaves its leaves; the next host's discovery removes
/// them (their owner's pid no longer runs), and its sandbox died with it.
#[test]
fn root_only_stale_leaves_of_a_killed_host_are_removed() {
    require!(Feature::Root);
    require!(Feature::UserNs);
    let (_d, ws) = common::var_tempdir();
    // The killed host's TMPDIR: on layer 2 its command's private one is made there, and a
    // host killed with `SIGKILL` cannot remove it (`src/process/tmp.rs`); it goes with
    // the test.
    let (_t, tmp) = common::var_tempdir();
    for layer in ["full", "landlock"] {
        let marker = format!("stale{}{layer}", std::process::id());
        let mut host = cli(&ws)
            .env("TMPDIR", &tmp)
            .args(["--layer", layer, "--min-layer", "landlock", "--"])
            // The marker is put together inside, so that the CLI's own command line, which
            // has the script, does not carry it.
            .args([
                "bash",
                "-c",
                &format!(
                    "m=stale; exec -a ${{m}}{}{layer} sleep 30",
                    std::process::id()
                ),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = host.id();
        let start = Instant::now();
        while common::host_processes_with(&marker).is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{layer}: no start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let stale = leaves_of(pid);
        assert!(!stale.is_empty(), "{layer}: the run has no leaf");
        host.kill().unwrap();
        host.wait().unwrap();
        // The sandbox dies with its host.
        let start = Instant::now();
        while !common::host_processes_with(&marker).is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{layer}: the sandbox outlived its killed host"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // (Another test's CLI, starting meanwhile, may have removed them already.)
        // The next host removes them.
        let out = cli(&ws).args(["--", "true"]).output().unwrap();
        assert!(out.status.success(), "{}", common::output_text(&out));
        let left: Vec<_> = stale.iter().filter(|p| p.exists()).collect();
        assert!(left.is_empty(), "{layer}: stale leaves left: {left:?}");
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
