//! The cgroup module (`backend::linux::cgroup`, issue 23) against the real kernel: this
//! machine's v1 hierarchies, as root. Children join a leaf the way the setup child will,
//! by writing `0` to the join fds (here from std's `pre_exec`).
//!
//! The tests named `root_only_*` need root (they make cgroups); as root,
//! `zz_all_tests_pass_as_uid_65534` re-runs the rest as uid 65534, where
//! `an_unprivileged_caller_is_told_about_delegation` checks that a user without a
//! delegated cgroup gets a reason, not a leaf. The tests take one lock: they share this
//! process's pid, which names the leaves.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::Feature;
use stockade::backend::linux::cgroup::{Cgroups, Leaf, RealFs, Version, Wanted};

const LIMITS: Wanted = Wanted {
    memory: Some(64 << 20),
    processes: Some(16),
    cpu: Some(0.5),
};

/// One test at a time: the leaves of this process all carry its pid.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes `0` ("the writer") to the join fd `fd`, in the forked child.
fn join(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: `fd` is a join fd of the leaf, which the parent keeps open until after the
    // spawn; fork copied it into this child's table, where nothing closes it before exec.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    nix::unistd::write(fd, b"0")?;
    Ok(())
}

/// Copies `fd` to `to` without close-on-exec, in the forked child, for the program to
/// inherit.
fn inherit(fd: std::os::fd::RawFd, to: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: dup2 takes no pointer; `fd` is open (as in `join`), and `to` is a number
    // above stdio that nothing in this child uses, so replacing it closes nothing in use.
    if unsafe { libc::dup2(fd, to) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Starts `sh -c script` inside `leaf`.
fn spawn_in(leaf: &Leaf, script: &str) -> Child {
    let fds = leaf.join_fds();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]);
    // SAFETY: the closure runs between fork and exec and makes only write(2) calls on fds
    // it was given (no allocation: the Vec was built before, errors are OS errors).
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                join(*fd)?;
            }
            Ok(())
        })
    };
    cmd.spawn().expect("spawn sh in the leaf")
}

/// The text of control file `name` in `dir`, trimmed.
fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()))
        .trim()
        .to_owned()
}

/// The leaf's directory in the hierarchy mounted at `.../<controller>`.
fn dir_for(leaf: &Leaf, controller: &str) -> PathBuf {
    leaf.dirs()
        .into_iter()
        .find(|d| d.starts_with(format!("/sys/fs/cgroup/{controller}")))
        .unwrap_or_else(|| panic!("no {controller} leaf in {:?}", leaf.dirs()))
        .to_owned()
}

/// The pids listed in every leaf.
fn members(leaf: &Leaf) -> Vec<String> {
    leaf.dirs()
        .into_iter()
        .flat_map(|d| {
            std::fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The cgroups as root sees them here.
fn cgroups() -> Cgroups {
    Cgroups::discover().expect("discover as root")
}

#[test]
fn root_only_discover_finds_this_machines_v1_hierarchies() {
    require!(Feature::Root);
    let _l = serial();
    let cg = cgroups();
    assert_eq!(cg.version(), Version::V1);
    cg.check(&LIMITS).unwrap();
}

#[test]
fn root_only_a_leaf_gets_exactly_the_limits_asked() {
    require!(Feature::Root);
    let _l = serial();
    let leaf = cgroups().create(&LIMITS).unwrap();
    let mem = dir_for(&leaf, "memory");
    let name = mem.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!("stockade-{}-", std::process::id())),
        "{name}"
    );
    assert_eq!(read(&mem, "memory.limit_in_bytes"), "67108864");
    assert!(leaf.swap_included());
    assert_eq!(read(&mem, "memory.memsw.limit_in_bytes"), "67108864");
    assert!(read(&mem, "memory.oom_control").contains("oom_kill_disable 0"));
    assert_eq!(read(&dir_for(&leaf, "pids"), "pids.max"), "16");
    let cpu = dir_for(&leaf, "cpu/");
    assert_eq!(read(&cpu, "cpu.cfs_period_us"), "100000");
    assert_eq!(read(&cpu, "cpu.cfs_quota_us"), "50000");
    // cpuacct has its own hierarchy here; its leaf is made for the usage.
    dir_for(&leaf, "cpuacct");
    assert_eq!(leaf.join_fds().len(), leaf.dirs().len());
    assert!(leaf.dir_fd().is_none());
    let dirs: Vec<PathBuf> = leaf.dirs().into_iter().map(Path::to_owned).collect();
    leaf.remove();
    for d in dirs {
        assert!(!d.exists(), "{} left", d.display());
    }
}

#[test]
fn root_only_a_program_over_its_memory_limit_is_oom_killed_and_counted() {
    require!(Feature::Root);
    let _l = serial();
    let leaf = cgroups().create(&LIMITS).unwrap();
    // 256 MiB of bytes written (not a zero-filled mapping): every page is touched.
    let mut child = spawn_in(&leaf, "exec python3 -c \"b = b'x' * (256 << 20)\"");
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    let events = leaf.events();
    assert!(events.oom_kills >= 1, "{events:?}");
    let peak = leaf.usage().peak_memory.unwrap();
    assert!(peak > 32 << 20 && peak <= 64 << 20, "peak {peak}");
}

#[test]
fn root_only_a_fork_loop_hits_the_process_limit_and_kill_all_empties_the_leaf() {
    require!(Feature::Root);
    let _l = serial();
    let leaf = cgroups().create(&LIMITS).unwrap();
    let mut child = spawn_in(&leaf, "for i in $(seq 100); do sleep 5 & done; wait");
    let start = Instant::now();
    while leaf.events().process_limit_hits == 0 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(leaf.events().process_limit_hits >= 1, "{:?}", leaf.events());
    let pids = dir_for(&leaf, "pids");
    assert!(read(&pids, "pids.peak").parse::<u64>().unwrap() <= 16);
    let start = Instant::now();
    leaf.kill_all().unwrap();
    while !members(&leaf).is_empty() && start.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(members(&leaf), Vec::<String>::new());
    assert!(start.elapsed() < Duration::from_secs(1));
    let _ = child.wait();
}

/// As the setup child will: a process in new user and PID namespaces joins every leaf by
/// writing `0` to `cgroup.procs` fds that its parent opened (here inherited as fds 10…, which bash can name and dash cannot).
#[test]
fn root_only_a_process_in_new_user_and_pid_namespaces_joins_through_its_parents_fds() {
    require!(Feature::Root);
    require!(Feature::UserNs);
    let _l = serial();
    let leaf = cgroups().create(&LIMITS).unwrap();
    let fds = leaf.join_fds();
    let script: String = (0..fds.len())
        .map(|i| format!("echo 0 >&{} && ", 10 + i))
        .collect();
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--pid", "--fork", "bash", "-c"])
        .arg(format!("{script}cat /proc/self/cgroup"));
    // SAFETY: the closure runs between fork and exec and makes only dup2(2) calls on the
    // leaf's fds, which the parent keeps open (no allocation: the Vec was built before).
    unsafe {
        cmd.pre_exec(move || {
            for (to, fd) in (10..).zip(&fds) {
                inherit(*fd, to)?;
            }
            Ok(())
        })
    };
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for d in leaf.dirs() {
        let name = d.file_name().unwrap().to_string_lossy();
        let hierarchy = d
            .strip_prefix("/sys/fs/cgroup")
            .unwrap()
            .iter()
            .next()
            .unwrap();
        let hierarchy = hierarchy.to_string_lossy();
        assert!(
            text.lines()
                .any(|l| l.split(':').nth(1) == Some(&*hierarchy) && l.ends_with(&*name)),
            "not in {}: {text}",
            d.display()
        );
    }
}

#[test]
fn root_only_usage_reports_the_cpu_time_of_a_busy_loop() {
    require!(Feature::Root);
    let _l = serial();
    let leaf = cgroups().create(&Wanted::default()).unwrap();
    let before = leaf.usage();
    assert_eq!(before.user_cpu, Some(Duration::ZERO));
    let mut child = spawn_in(
        &leaf,
        "exec python3 -c 'import time\nt = time.time()\nwhile time.time() - t < 0.3: pass'",
    );
    assert!(child.wait().unwrap().success());
    let usage = leaf.usage();
    let user = usage.user_cpu.unwrap();
    assert!(user > Duration::from_millis(50), "{usage:?}");
    assert!(usage.system_cpu.is_some(), "{usage:?}");
    assert!(usage.peak_memory.unwrap() > 0, "{usage:?}");
}

#[test]
fn root_only_two_hundred_leaves_leave_no_directory_behind() {
    require!(Feature::Root);
    let _l = serial();
    let cg = cgroups();
    let mut parents = Vec::new();
    for i in 0..200 {
        let leaf = cg.create(&LIMITS).unwrap();
        if parents.is_empty() {
            parents = leaf
                .dirs()
                .iter()
                .map(|d| d.parent().unwrap().to_owned())
                .collect();
        }
        if i % 50 == 0 {
            // Some with a process that is still there at the removal.
            let mut child = spawn_in(&leaf, "exec sleep 5");
            leaf.remove();
            let _ = child.wait();
        } else if i % 2 == 0 {
            drop(leaf);
        } else {
            leaf.remove();
        }
    }
    let mine = format!("stockade-{}-", std::process::id());
    for p in &parents {
        for e in std::fs::read_dir(p).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with(&mine), "{}/{name} left", p.display());
        }
    }
}

#[test]
fn root_only_discovery_removes_the_leaves_of_dead_hosts_only() {
    require!(Feature::Root);
    let _l = serial();
    let cg = cgroups();
    // A pid that no longer runs, and one that always does.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let leaf = cg.create(&Wanted::default()).unwrap();
    let parents: Vec<PathBuf> = leaf
        .dirs()
        .iter()
        .map(|d| d.parent().unwrap().to_owned())
        .collect();
    drop(leaf);
    let stale: Vec<PathBuf> = parents
        .iter()
        .map(|p| p.join(format!("stockade-{dead}-0")))
        .collect();
    let live: Vec<PathBuf> = parents.iter().map(|p| p.join("stockade-1-0")).collect();
    for d in stale.iter().chain(&live) {
        std::fs::create_dir(d).unwrap();
    }
    // `discover` works once per process; `discover_with` every time.
    Cgroups::discover_with(Arc::new(RealFs)).unwrap();
    for d in &stale {
        assert!(!d.exists(), "{} left", d.display());
    }
    for d in &live {
        assert!(d.exists(), "{} removed", d.display());
        std::fs::remove_dir(d).unwrap();
    }
}

#[test]
fn an_unprivileged_caller_is_told_about_delegation() {
    if nix::unistd::geteuid().is_root() {
        // As root it runs in `zz_all_tests_pass_as_uid_65534`, as that user.
        return;
    }
    let _l = serial();
    match Cgroups::discover() {
        Err(why) => {
            assert!(why.contains("delegated"), "{why}");
            assert!(why.contains(&nix::unistd::geteuid().to_string()), "{why}");
            // Where the controllers are v1 hierarchies (as here), the reason is v1's, not
            // the unified hierarchy's (which has none of them).
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
            if own.lines().any(|l| l.split(':').nth(1) == Some("memory")) {
                assert!(why.starts_with("cgroup v1 memory hierarchy: "), "{why}");
            }
        }
        // A user that has a delegated cgroup here: then it must work.
        Ok(cg) => {
            let leaf = cg.create(&Wanted::default()).unwrap();
            let dirs: Vec<PathBuf> = leaf.dirs().into_iter().map(Path::to_owned).collect();
            leaf.remove();
            assert!(dirs.iter().all(|d| !d.exists()));
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
