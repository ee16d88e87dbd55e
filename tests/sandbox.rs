//! The full layer, proven from inside: each layout row, each process point, and the
//! escapes they exist to stop. Every test runs as the current user; when that is root,
//! `zz_all_tests_pass_as_uid_65534` re-runs the whole file as uid 65534.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Feature, host_processes_with, py_ok, sandbox, sh, sh_ok, tempdir, try_errno};
use stockade::{Error, Network, PlanError, Policy, Sandbox, SetupStep, SpawnError, Stdio};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[test]
fn system_dirs_are_read_only_and_readable() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let out = sh_ok(&sb, "ls /usr/bin/env && head -c 4 /etc/passwd && echo");
    assert!(out.contains("/usr/bin/env"));
    for p in ["/usr/stockade-x", "/etc/stockade-x", "/usr/bin/stockade-x"] {
        let r = py_ok(&sb, &try_errno(&format!("open('{p}', 'w')")));
        assert_eq!(r.trim(), "EROFS", "{p}");
    }
    // The root itself takes no new entries.
    assert_eq!(
        py_ok(&sb, &try_errno("os.mkdir('/newdir')")).trim(),
        "EROFS"
    );
}

#[test]
fn workspace_and_writable_paths_are_writable() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let extra = tempdir();
    let e = extra.path().to_path_buf();
    let sb = sandbox(ws.path(), |p| p.writable_paths = vec![e.clone()]);
    sh_ok(
        &sb,
        &format!(
            "echo a > {0}/f && mkdir {0}/d && echo b > {1}/g",
            ws.path().display(),
            e.display()
        ),
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("f")).unwrap(), "a\n");
    assert_eq!(std::fs::read_to_string(e.join("g")).unwrap(), "b\n");
    // Default cwd and HOME are the workspace.
    let out = sh_ok(&sb, "pwd; echo $HOME");
    let ws_canon = std::fs::canonicalize(ws.path()).unwrap();
    assert_eq!(out, format!("{0}\n{0}\n", ws_canon.display()));
}

#[test]
fn tools_dir_is_read_only_and_first_on_path() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let tools = tempdir();
    let tool = tools.path().join("stockade-hello");
    std::fs::write(&tool, "#!/bin/sh\necho hello from tools\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(tools.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = tools.path().to_path_buf();
    let sb = sandbox(ws.path(), |p| p.tools_dir = Some(t.clone()));
    assert_eq!(sh_ok(&sb, "stockade-hello"), "hello from tools\n");
    let path = sh_ok(&sb, "echo $PATH");
    assert!(path.starts_with(&format!("{}:", t.display())), "{path}");
    let r = py_ok(&sb, &try_errno(&format!("open('{}/x', 'w')", t.display())));
    assert_eq!(r.trim(), "EROFS");
}

#[test]
fn tmp_is_private_and_size_limited() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let marker = tempdir();
    let sb = sandbox(ws.path(), |p| p.tmp_size = stockade::ByteSize::mib(1));
    let out = sh_ok(
        &sb,
        &format!(
            "ls /tmp; test -e {} && echo visible || echo hidden",
            marker.path().display()
        ),
    );
    assert!(out.ends_with("hidden\n"), "{out}");
    let r = py_ok(
        &sb,
        &try_errno("open('/tmp/big', 'wb').write(b'x' * (2 << 20))"),
    );
    assert_eq!(r.trim(), "ENOSPC");
    sh_ok(&sb, "echo ok > /tmp/small && cat /tmp/small");
    // POSIX shared memory (files in /dev/shm) is bounded the same way, and private.
    let r = py_ok(
        &sb,
        &try_errno("open('/dev/shm/big', 'wb').write(b'x' * (2 << 20))"),
    );
    assert_eq!(r.trim(), "ENOSPC");
    let out = sh_ok(
        &sb,
        "echo ok > /dev/shm/small && cat /dev/shm/small && stat -c %a /dev/shm",
    );
    assert_eq!(out, "ok\n1777\n");
}

#[test]
fn dev_is_minimal_and_works() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let out = sh_ok(&sb, "ls /dev | tr '\\n' ' '");
    assert_eq!(
        out.trim(),
        "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero"
    );
    sh_ok(
        &sb,
        "echo x > /dev/null && head -c 8 /dev/urandom | wc -c && head -c 4 /dev/zero | wc -c && echo y > /dev/shm/f",
    );
    py_ok(
        &sb,
        "import os; m, s = os.openpty(); os.write(s, b'hi'); assert os.read(m, 2) == b'hi'",
    );
    // No host disks or kernel interfaces.
    for p in ["/dev/vda", "/dev/kmsg", "/dev/mem", "/dev/kvm"] {
        assert_eq!(
            py_ok(&sb, &try_errno(&format!("open('{p}')"))).trim(),
            "ENOENT",
            "{p}"
        );
    }
}

#[test]
fn proc_is_fresh_and_its_knobs_read_only() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let out = py_ok(
        &sb,
        "import os; print(os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))",
    );
    // The init (PID 1) and the program, its child.
    assert_eq!(
        out.trim(),
        "2 [1, 2]",
        "only the init and the program are visible"
    );
    let r = py_ok(
        &sb,
        &try_errno("open('/proc/sys/kernel/hostname', 'w').write('x')"),
    );
    assert_eq!(r.trim(), "EROFS");
    let r = py_ok(
        &sb,
        &try_errno("open('/proc/sysrq-trigger', 'w').write('x')"),
    );
    // Absent when the kernel has no magic SysRq.
    assert!(matches!(r.trim(), "EROFS" | "EACCES" | "ENOENT"), "{r}");
}

#[test]
fn host_paths_outside_the_layout_are_absent() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    for p in [
        "/root", "/home", "/var", "/srv", "/mnt", "/work", "/run", "/sys", "/boot",
    ] {
        assert_eq!(
            py_ok(&sb, &try_errno(&format!("os.listdir('{p}')"))).trim(),
            "ENOENT",
            "{p}"
        );
    }
}

#[test]
fn shadow_and_host_keys_are_masked() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    // Readable on this host for root; masked inside for everyone.
    let r = py_ok(
        &sb,
        &try_errno("assert open('/etc/shadow','rb').read() == b''"),
    );
    assert!(matches!(r.trim(), "EACCES" | "OK"), "{r}");
    assert!(!sh(&sb, "grep -q root /etc/shadow").status.success());
}

#[test]
fn data_dir_under_the_workspace_is_masked_and_pinned() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let data = ws.path().join("agent/data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("secret"), "s3cret").unwrap();
    let d = data.clone();
    let sb = sandbox(ws.path(), |p| p.data_dir = Some(d.clone()));
    let w = std::fs::canonicalize(ws.path()).unwrap();
    let w = w.display();
    let checks = [
        (format!("os.listdir('{w}/agent/data')"), "EACCES"),
        (format!("open('{w}/agent/data/secret')"), "EACCES"),
        (format!("open('{w}/agent/data/new', 'w')"), "EACCES"),
        (
            format!("os.rename('{w}/agent/data', '{w}/moved')"),
            "EBUSY|EXDEV",
        ),
        (
            format!("os.rename('{w}/agent', '{w}/moved')"),
            "EBUSY|EXDEV",
        ),
        (format!("os.rmdir('{w}/agent/data')"), "EBUSY"),
        (format!("os.rmdir('{w}/agent')"), "EBUSY|ENOTEMPTY"),
    ];
    for (expr, want) in checks {
        let r = py_ok(&sb, &try_errno(&expr));
        assert!(want.split('|').any(|w| w == r.trim()), "{expr}: {r}");
    }
    // A symlink swap of the directory above: the name is a mountpoint, unlink refuses.
    let r = py_ok(
        &sb,
        &try_errno(&format!(
            "os.rename('{w}/agent', '{w}/a2'); os.symlink('/tmp', '{w}/agent')"
        )),
    );
    assert!(matches!(r.trim(), "EBUSY" | "EXDEV"), "{r}");
    // The rest of the workspace stays writable.
    sh_ok(
        &sb,
        &format!("echo ok > {w}/agent/other && cat {w}/agent/other"),
    );
    assert_eq!(
        std::fs::read_to_string(data.join("secret")).unwrap(),
        "s3cret"
    );
}

#[test]
fn a_replaced_data_dir_is_refused() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let data = ws.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = data.clone();
    let sb = sandbox(ws.path(), |p| p.data_dir = Some(d.clone()));
    sh_ok(&sb, "true");
    std::fs::rename(&data, ws.path().join("old")).unwrap();
    std::fs::create_dir(&data).unwrap();
    let err = sb.command("true").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Plan(PlanError::DataDirChanged(_))),
        "{err}"
    );
}

#[test]
fn a_symlink_on_the_way_to_the_data_dir_fails_the_spawn_with_a_typed_error() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let target = ws.path().join("real");
    std::fs::create_dir_all(target.join("data")).unwrap();
    std::os::unix::fs::symlink(&target, ws.path().join("link")).unwrap();
    let d = ws.path().join("link/data");
    // Configured through a symlink: refused when the sandbox is made.
    let mut p = stockade::Policy::with_workspace(ws.path());
    p.data_dir = Some(d.clone());
    match stockade::Sandbox::new(p) {
        Err(Error::Plan(PlanError::Symlink { key, link, .. })) => {
            assert_eq!(key, "data_dir");
            assert_eq!(link, ws.path().join("link"));
        }
        other => panic!("unexpected {other:?}"),
    }
    // Planted after the sandbox was made: the spawn fails, typed.
    std::fs::remove_file(ws.path().join("link")).unwrap();
    std::fs::remove_dir_all(&target).unwrap();
    std::fs::create_dir_all(&d).unwrap();
    let sb = sandbox(ws.path(), |p| p.data_dir = Some(d.clone()));
    // The same data dir (same inode), now reached through a link.
    std::fs::rename(ws.path().join("link"), &target).unwrap();
    std::os::unix::fs::symlink(&target, ws.path().join("link")).unwrap();
    let err = sb.command("true").spawn().unwrap_err();
    match &err {
        Error::Spawn(SpawnError::Setup { step, errno }) => {
            // The first directory on the way that is a symlink refuses to be pinned.
            assert!(
                matches!(
                    step,
                    SetupStep::Pin { .. } | SetupStep::Mask { data_dir: true, .. }
                ),
                "{step}"
            );
            let path = step.path().expect("the step's path");
            assert!(path.to_string_lossy().contains("/link"), "{step}");
            assert_eq!(*errno, stockade::error::Errno::ELOOP);
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err.to_string().contains(common::ELOOP_TEXT), "{err}");
}

#[test]
fn a_writable_path_planted_as_a_symlink_is_not_followed() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let outside = tempdir();
    std::fs::write(outside.path().join("f"), "host").unwrap();
    let e = ws.path().join("evil");
    std::fs::create_dir(&e).unwrap();
    let sb = sandbox(ws.path(), |p| p.writable_paths = vec![e.clone()]);
    // Replaced by a link after the sandbox was made (as a program can between runs).
    std::fs::remove_dir(&e).unwrap();
    std::os::unix::fs::symlink(outside.path(), &e).unwrap();
    let w = std::fs::canonicalize(ws.path()).unwrap();
    let r = py_ok(
        &sb,
        &try_errno(&format!("open('{}/evil/f', 'w').write('x')", w.display())),
    );
    assert_eq!(r.trim(), "ENOENT");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f")).unwrap(),
        "host"
    );
    // A new sandbox refuses the policy outright, as for a path outside the workspace.
    let mut p = Policy::with_workspace(ws.path());
    p.writable_paths = vec![e.clone()];
    assert!(
        matches!(Sandbox::new(p), Err(Error::Plan(PlanError::Symlink { link, .. })) if link == e)
    );
}

#[test]
fn pid_namespace_hides_and_protects_host_processes() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let me = std::process::id();
    // The host pid does not exist inside; neither does its environment or memory.
    assert_eq!(
        py_ok(&sb, &try_errno(&format!("os.kill({me}, 0)"))).trim(),
        "ESRCH"
    );
    assert_eq!(
        py_ok(&sb, &try_errno(&format!("open('/proc/{me}/environ')"))).trim(),
        "ENOENT"
    );
    // PID 1 is the embedded init (exec'd from a memfd, not a fork holding the host's
    // memory), and the program is its child.
    let out = py_ok(
        &sb,
        "import os; print(open('/proc/1/cmdline','rb').read().split(b'\\0')[0].decode(), os.getppid())",
    );
    assert_eq!(out.trim(), "stockade-init 1", "{out}");
}

#[test]
fn exit_codes_and_signals_are_mirrored() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    assert_eq!(sh(&sb, "exit 42").status.code(), Some(42));
    let out = sb
        .command("python3")
        .args(["-c", "import ctypes; ctypes.string_at(0)"])
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{:?}", out.status);
}

#[test]
fn kill_ends_everything_inside() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let marker = format!("1000.{}{}", std::process::id(), line!());
    let mut child = sb
        .command("sh")
        .arg("-c")
        .arg(format!(
            "sleep {marker} & sleep {marker} & echo started; wait"
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 8];
    child.stdout.as_mut().unwrap().read_exact(&mut buf).unwrap();
    let sleeps = || common::host_processes(|cmd| cmd.starts_with(&format!("sleep {marker}")));
    let deadline = Instant::now() + Duration::from_secs(5);
    while sleeps().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sleeps().len(), 2);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sleeps().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(sleeps().is_empty(), "processes survived kill");
}

#[test]
fn a_short_lived_spawning_thread_does_not_kill_the_sandbox() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let mut child = std::thread::spawn(move || sb.command("sleep").arg("30").spawn().unwrap())
        .join()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "sandbox died with its spawning thread"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn the_sandbox_dies_with_the_host_process() {
    require!(Feature::UserNs);
    let marker = format!("1000.{}{}", std::process::id(), line!());
    // A host process that spawns a sandbox and exits at once without waiting.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_spawn_and_exit", "--nocapture"])
        .env("STOCKADE_TEST_HELPER_MARKER", &marker)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !host_processes_with(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        host_processes_with(&marker).is_empty(),
        "sandbox outlived its host"
    );
}

/// Not a test of its own: the host process of `the_sandbox_dies_with_the_host_process`.
#[test]
fn helper_spawn_and_exit() {
    let Ok(marker) = std::env::var("STOCKADE_TEST_HELPER_MARKER") else {
        return;
    };
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let mut child = sb.command("sleep").arg(&marker).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(child.try_wait().unwrap().is_none());
    assert_eq!(host_processes_with(&marker).len(), 1);
    // `exit` runs no destructor; the sandbox holds its own bind of the workspace.
    drop(ws);
    std::process::exit(0);
}

#[test]
fn session_no_new_privs_and_capabilities() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let status = sh_ok(&sb, "grep -E '^(Cap|NoNewPrivs)' /proc/self/status");
    for line in status.lines() {
        let (k, v) = line.split_once(':').unwrap();
        let want = if k == "NoNewPrivs" {
            "1"
        } else {
            "0000000000000000"
        };
        assert_eq!(v.trim(), want, "{k}");
    }
    // A new session: the program leads it.
    let stat = sh_ok(&sb, "exec cat /proc/self/stat");
    let pid = stat.split_whitespace().next().unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(fields[3], pid, "session id: {stat}");
    let sb = sandbox(ws.path(), |p| p.keep_session = true);
    let stat = sh_ok(&sb, "exec cat /proc/self/stat");
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let pid = stat.split_whitespace().next().unwrap();
    assert_ne!(fields[3], pid, "keep_session: {stat}");
}

#[test]
fn root_only_no_dac_override_over_host_files() {
    require!(Feature::UserNs);
    require!(Feature::Root);
    let ws = tempdir();
    let f = ws.path().join("theirs");
    std::fs::write(&f, "private").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    nix::unistd::chown(
        &f,
        Some(nix::unistd::Uid::from_raw(12345)),
        Some(nix::unistd::Gid::from_raw(12345)),
    )
    .unwrap();
    let sb = sandbox(ws.path(), |_| {});
    let w = std::fs::canonicalize(ws.path()).unwrap();
    assert_eq!(sh_ok(&sb, "id -u").trim(), "0");
    let r = py_ok(
        &sb,
        &try_errno(&format!("open('{}/theirs').read()", w.display())),
    );
    assert_eq!(r.trim(), "EACCES");
    let r = py_ok(
        &sb,
        &try_errno(&format!("os.chown('{}/theirs', 0, 0)", w.display())),
    );
    assert_eq!(r.trim(), "EPERM");
}

#[test]
fn uid_and_gid_inside_are_the_callers() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let out = sh_ok(&sb, "id -u; id -g");
    let want = format!("{}\n{}\n", nix::unistd::geteuid(), nix::unistd::getegid());
    assert_eq!(out, want);
}

#[test]
fn inherited_fds_are_closed_and_passed_ones_kept() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    // A host fd without close-on-exec: the kind a careless host leaks.
    // High numbers, so that they cannot be confused with the program's own fds.
    let file = std::fs::File::open("/etc/hostname").unwrap();
    let leaked =
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_DUPFD(200 + line!() as i32)).unwrap();
    let (r, mut w) = std::io::pipe().unwrap();
    w.write_all(b"passed").unwrap();
    drop(w);
    let high = nix::fcntl::fcntl(
        &r,
        nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(300 + line!() as i32),
    )
    .unwrap();
    // SAFETY: F_DUPFD_CLOEXEC returned a new fd that nothing else owns.
    let passed: std::os::fd::OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(high) };
    let passed_no = high;
    let out = sb
        .command("python3")
        .args(["-c", &format!("import os; print(sorted(int(x) for x in os.listdir('/proc/self/fd'))); print(os.read({passed_no}, 16).decode())")])
        .pass_fd(passed)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let leaked_no = leaked;
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = text.lines().next().unwrap();
    assert!(
        !first.contains(&format!(" {leaked_no},")) && !first.contains(&format!(" {leaked_no}]")),
        "{first}"
    );
    assert!(first.contains(&passed_no.to_string()), "{first}");
    assert_eq!(text.lines().nth(1), Some("passed"));
    nix::unistd::close(leaked).unwrap();
}

#[test]
fn environment_is_clean() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |p| {
        p.passthrough_env = vec!["PATH_IS_NOT_THIS".into()]
    });
    let out = sb.command("env").env("MINE", "1").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut names: Vec<&str> = text.lines().map(|l| l.split('=').next().unwrap()).collect();
    names.sort();
    let allowed = [
        "HOME", "LANG", "LOGNAME", "MINE", "PATH", "TERM", "TMPDIR", "USER",
    ];
    for n in &names {
        assert!(allowed.contains(n), "unexpected variable {n} in {text}");
    }
    assert!(names.contains(&"MINE") && names.contains(&"PATH"));
    let err = sb
        .command("env")
        .env("LD_PRELOAD", "/x.so")
        .spawn()
        .unwrap_err();
    assert!(
        matches!(err, Error::Plan(PlanError::DangerousEnv(_))),
        "{err}"
    );
}

#[test]
fn keyring_is_fresh() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    // KEYCTL_GET_KEYRING_ID(KEY_SPEC_SESSION_KEYRING, create=1)
    // SAFETY: keyctl with integer arguments only.
    let host = unsafe { libc::syscall(libc::SYS_keyctl, 0, -3, 1) };
    let inside = py_ok(
        &sb,
        "import ctypes; l = ctypes.CDLL(None, use_errno=True); print(l.syscall(250, 0, -3, 1))",
    );
    assert!(host > 0);
    assert_ne!(
        inside.trim(),
        host.to_string(),
        "the host's session keyring is visible"
    );
}

#[test]
fn host_sockets_are_unreachable() {
    require!(Feature::UserNs);
    let dir = if is_root() {
        Path::new("/run").to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let path = dir.join(format!("stockade-test-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let r = py_ok(
        &sb,
        &try_errno(&format!(
            "s = socket.socket(socket.AF_UNIX); s.connect('{}')",
            path.display()
        )),
    );
    assert_eq!(r.trim(), "ENOENT");
    drop(listener);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn network_none_keeps_a_private_loopback() {
    require!(Feature::UserNs);
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let ws = tempdir();
    let sb = sandbox(ws.path(), |p| p.network = Network::None);
    let code = format!(
        "import socket, errno\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\nc = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.send(b'x'); assert a.recv(1) == b'x'\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('reached host')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])"
    );
    assert_eq!(py_ok(&sb, &code).trim(), "ECONNREFUSED");
}

#[test]
fn real_programs_work_inside() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let out = sh_ok(
        &sb,
        "echo a b c | tr ' ' '\\n' | sort -r | (read x; echo \"[$x]\"); echo $( (echo sub) )",
    );
    assert_eq!(out, "[c]\nsub\n");
    assert_eq!(
        py_ok(
            &sb,
            "import threading; t = threading.Thread(target=print, args=('t',)); t.start(); t.join()"
        ),
        "t\n"
    );
    sh_ok(
        &sb,
        "git init -q repo && cd repo && git config user.email a@b && git config user.name t && echo x > f && git add f && git commit -qm m && git log --oneline | wc -l",
    );
    assert!(ws.path().join("repo/.git").is_dir());
    sh_ok(
        &sb,
        "printf 'int main(void){return 7;}' > m.c && cc -o m m.c && ./m; test $? = 7",
    );
    assert!(ws.path().join("m").exists());
}

#[test]
fn working_directory_must_be_under_the_workspace() {
    require!(Feature::UserNs);
    let ws = tempdir();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let sb = sandbox(ws.path(), |_| {});
    let out = sb.command("pwd").current_dir("sub").output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .ends_with("/sub")
    );
    let err = sb.command("pwd").current_dir("/etc").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Plan(PlanError::CwdOutsideWorkspace { .. })),
        "{err}"
    );
    let err = sb.command("pwd").current_dir("../..").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Plan(PlanError::CwdOutsideWorkspace { .. })),
        "{err}"
    );
}

#[test]
fn missing_program_is_not_found() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let err = sb.command("stockade-no-such-program").spawn().unwrap_err();
    assert!(
        matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
        "{err}"
    );
    // A program that exists on the host but outside the layout is not found either.
    let err = sb
        .command(std::env::current_exe().unwrap())
        .spawn()
        .unwrap_err();
    assert!(
        matches!(err, Error::Spawn(SpawnError::NotFound { .. })),
        "{err}"
    );
}

#[test]
fn pipes_work_both_ways() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let mut child = sb
        .command("tr")
        .arg("a-z")
        .arg("A-Z")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.stdout, b"HELLO");
}

#[test]
fn capabilities_report_this_kernel() {
    require!(Feature::UserNs);
    let caps = stockade::Capabilities::probe();
    assert!(caps.user_namespaces.available);
    assert!(caps.fresh_proc.available);
    assert_eq!(caps.best_layer(), stockade::Layer::Full);
    let ws = tempdir();
    assert_eq!(sandbox(ws.path(), |_| {}).degradation(), None);
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}

#[test]
fn root_only_submounts_of_the_allowlist_stay_read_only() {
    require!(Feature::UserNs);
    require!(Feature::Root);
    // A writable host mount below an allowlisted directory, for the length of the test.
    let dir = Path::new("/opt").join(format!("stockade-submount-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &dir,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=1m"),
    )
    .unwrap();
    std::fs::write(dir.join("f"), "host").unwrap();
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let r = py_ok(
        &sb,
        &try_errno(&format!("open('{}/f', 'w')", dir.display())),
    );
    let seen = py_ok(&sb, &format!("print(open('{}/f').read())", dir.display()));
    nix::mount::umount(&dir).unwrap();
    std::fs::remove_dir(&dir).unwrap();
    assert_eq!(r.trim(), "EROFS");
    assert_eq!(seen.trim(), "host");
}

#[test]
fn deny_names_are_hidden_and_guard_names_kept_from_the_host() {
    // Missing names are neither created nor hidden: `tests/real_use.rs`.
    require!(Feature::UserNs);
    let ws = tempdir();
    let w = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::write(w.join(".env"), "API_KEY=host-secret").unwrap();
    std::fs::create_dir(w.join(".ssh")).unwrap();
    std::fs::write(w.join(".ssh/id_ed25519"), "key").unwrap();
    let git = |args: &[&str]| {
        let s = std::process::Command::new("git")
            .arg("-C")
            .arg(&w)
            .args(args)
            .output()
            .unwrap();
        assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    };
    git(&["init", "-q"]);
    git(&["config", "user.email", "a@b"]);
    git(&["config", "user.name", "host"]);
    let config = std::fs::read(w.join(".git/config")).unwrap();
    let sb = sandbox(ws.path(), |_| {});
    let wd = w.display();
    // Existing names read as empty entries of their kind.
    assert_eq!(
        py_ok(
            &sb,
            &format!("import os; print(repr(open('{wd}/.env').read()), os.listdir('{wd}/.ssh'))")
        ),
        "'' []\n"
    );
    let checks = [
        (format!("open('{wd}/.env', 'a')"), "EACCES"),
        (format!("open('{wd}/.ssh/id_ed25519')"), "ENOENT"),
        (format!("open('{wd}/.ssh/x', 'w')"), "EROFS"),
        (format!("os.unlink('{wd}/.env')"), "EBUSY"),
        (format!("os.rename('{wd}/.ssh', '{wd}/x')"), "EBUSY"),
        // Hooks and config are written on the run's own copy-on-write layer (they never
        // reach the host: `tests/git_layer.rs`), and .git cannot be swapped for a new one.
        (format!("open('{wd}/.git/hooks/pre-commit', 'w')"), "OK"),
        (format!("open('{wd}/.git/config', 'a').write('#')"), "OK"),
        (format!("os.rename('{wd}/.git', '{wd}/git2')"), "EBUSY"),
    ];
    for (expr, want) in checks {
        assert_eq!(py_ok(&sb, &try_errno(&expr)).trim(), want, "{expr}");
    }
    assert!(!w.join(".git/hooks/pre-commit").exists());
    assert_eq!(std::fs::read(w.join(".git/config")).unwrap(), config);
    // Ordinary git work goes on.
    sh_ok(
        &sb,
        "echo x > f && git add f && git commit -qm inside && git log --oneline | wc -l",
    );
    assert_eq!(
        std::fs::read_to_string(w.join(".env")).unwrap(),
        "API_KEY=host-secret"
    );
}

#[test]
fn mode_switches_at_runtime_while_other_threads_spawn() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (sb, stop) = (sb.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = [0usize; 2];
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let out = sb
                        .command("sh")
                        .args(["-c", "echo $PPID"])
                        .output()
                        .unwrap();
                    let text = String::from_utf8_lossy(&out.stdout);
                    let pid: u32 = text.trim().parse().unwrap_or_else(|_| {
                        panic!(
                            "{:?} {text:?} {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr)
                        )
                    });
                    seen[usize::from(pid != 1)] += 1;
                }
                seen
            })
        })
        .collect();
    for i in 0..20 {
        let mode = if i % 2 == 0 {
            stockade::Mode::Disabled
        } else {
            stockade::Mode::Enabled
        };
        sb.set_mode(mode).unwrap();
        std::thread::sleep(Duration::from_millis(15));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = [0usize; 2];
    for w in workers {
        let s = w.join().unwrap();
        total[0] += s[0];
        total[1] += s[1];
    }
    assert!(total[0] > 0 && total[1] > 0, "both modes ran: {total:?}");
    // On the full layer the program is the child of the sandbox's init, PID 1.
    sb.set_mode(stockade::Mode::Disabled).unwrap();
    assert_ne!(sh_ok(&sb, "echo $PPID").trim(), "1");
    assert_eq!(sb.layer(), stockade::Layer::Passthrough);
    sb.set_mode(stockade::Mode::Enabled).unwrap();
    assert_eq!(sh_ok(&sb, "echo $PPID").trim(), "1");
    // A bad policy is refused and the old one stays.
    let mut bad = sb.policy();
    bad.writable_paths = vec!["/nonexistent-stockade".into()];
    assert!(sb.set_policy(bad).is_err());
    assert_eq!(sh_ok(&sb, "echo $PPID").trim(), "1");
}

#[test]
fn secret_env_reaches_only_its_command_and_is_redacted() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    sb.set_secrets(["host-store-secret-1"]);
    let mut child = sb
        .command("sh")
        .args(["-c", "echo $API_KEY; echo host-store-secret-1"])
        .secret_env("API_KEY", "per-command-secret")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let redactor = child.redactor().clone();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.wait().unwrap();
    assert_eq!(out, b"per-command-secret\nhost-store-secret-1\n");
    assert_eq!(&*redactor.redact(&out), b"[REDACTED]\n[REDACTED]\n");
    // The next command does not see it.
    assert_eq!(sh_ok(&sb, "echo \"[$API_KEY]\""), "[]\n");
    // Debug output never shows a secret value.
    let mut cmd = sb.command("true");
    cmd.secret_env("API_KEY", "per-command-secret");
    assert!(!format!("{cmd:?}").contains("per-command-secret"));
}
