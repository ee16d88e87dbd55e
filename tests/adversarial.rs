//! The escapes that broke other sandboxes, one test per class, each tried from inside a
//! full-layer sandbox (the default policy over a temp workspace) with the errno asserted,
//! next to a control showing that the allowed counterpart works, or that the same attempt
//! succeeds outside the sandbox, so that no test passes by accident. Where two walls stop
//! an attempt, a comment names the one that answers first.
//!
//! Every test runs as the current user; as root, `zz_all_tests_pass_as_uid_65534` re-runs
//! the file as uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Feature, py_ok, sandbox, sh, tempdir};
use stockade::error::Errno;
use stockade::{Error, Network, PlanError, Policy, Sandbox, SpawnError, Stdio};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Python prelude for the probes: a libc handle and `chk`, which turns a negative return
/// into an `OSError` with the call's errno.
const PRELUDE: &str = "import os, errno, socket, ctypes, fcntl, termios, time, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def chk(r):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
";

/// A python program that runs each one-line statement and prints `OK` or the errno name,
/// one line each.
fn probe_source(setup: &str, exprs: &[String]) -> String {
    let mut src = format!("{PRELUDE}{setup}\n");
    for e in exprs {
        src.push_str(&format!(
            "try:\n    {e}\n    print('OK')\nexcept OSError as x:\n    print(errno.errorcode.get(x.errno, x.errno))\n"
        ));
    }
    src
}

/// Runs the probe inside; one result per statement.
fn errnos(sb: &Sandbox, setup: &str, exprs: &[String]) -> Vec<String> {
    let out = py_ok(sb, &probe_source(setup, exprs));
    let got: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(got.len(), exprs.len(), "{out}");
    got
}

/// Runs a python program on the host (the control) and returns its stdout.
fn host_py(code: &str) -> String {
    let out = StdCommand::new("/usr/bin/python3")
        .arg("-c")
        .arg(code)
        .output()
        .expect("python3 on the host");
    assert!(
        out.status.success(),
        "host python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

const TIOCSTI_HELPER: &str = "STOCKADE_TEST_TIOCSTI_HELPER";

/// CVE-2017-5226: a sandbox that shares the host's terminal (and, with `keep_session`,
/// its session, so the terminal is its controlling tty) pushes characters into the
/// terminal's input queue with TIOCSTI; the host's shell runs them after the sandbox
/// exits. The helper below makes a real controlling terminal in a new session, shows that
/// TIOCSTI works there outside the sandbox, and that the seccomp filter refuses it inside.
#[test]
fn cve_2017_5226_tiocsti_on_a_shared_controlling_terminal_is_denied() {
    require!(Feature::UserNs);
    if std::env::var_os(TIOCSTI_HELPER).is_some() {
        return;
    }
    let out = StdCommand::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tiocsti_helper",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(TIOCSTI_HELPER, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.split_once(&format!("{k}=")).map(|(_, v)| v))
            .unwrap_or_else(|| panic!("no {k} in {text}"))
            .trim()
            .to_string()
    };
    // The control: outside, in the same session, TIOCSTI works (since 6.2 only when
    // dev.tty.legacy_tiocsti=1 or with CAP_SYS_ADMIN; EIO otherwise).
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .map_or(true, |v| v.trim() == "1");
    let want_host = if legacy || is_root() { "OK" } else { "EIO" };
    assert_eq!(field("host"), want_host, "{text}");
    // Inside, the pty really is the controlling terminal (/dev/tty opens it) ...
    assert_eq!(field("ctty"), "OK", "{text}");
    // ... TIOCSTI is refused by seccomp (the kernel would allow it, see the control) ...
    assert_eq!(field("tiocsti"), "EPERM", "{text}");
    // ... and other terminal ioctls still work.
    assert_eq!(field("tiocgwinsz"), "OK", "{text}");
}

/// The inside half of the TIOCSTI test: a new session with a pty as controlling terminal.
#[test]
fn tiocsti_helper() {
    if std::env::var_os(TIOCSTI_HELPER).is_none() {
        return;
    }
    nix::unistd::setsid().unwrap();
    let (mut m, mut s) = (-1, -1);
    // SAFETY: openpty writes two fds to the out-pointers; name, termios and winsize are null.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: openpty just returned this fd; nothing else owns it.
    let _master = unsafe { OwnedFd::from_raw_fd(m) };
    // SAFETY: as above.
    let slave = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: TIOCSCTTY on a valid tty fd with an integer argument.
    let r = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSCTTY, 0) };
    assert_eq!(r, 0, "TIOCSCTTY");
    let sti = "fcntl.ioctl(0, termios.TIOCSTI, b'x')".to_string();
    let host = StdCommand::new("/usr/bin/python3")
        .arg("-c")
        .arg(probe_source("", std::slice::from_ref(&sti)))
        .stdin(std::process::Stdio::from(slave.try_clone().unwrap()))
        .output()
        .unwrap();
    println!("host={}", String::from_utf8_lossy(&host.stdout).trim());
    let ws = tempdir();
    let sb = sandbox(ws.path(), |p| p.keep_session = true);
    println!();
    let code = probe_source(
        "",
        &[
            "os.close(os.open('/dev/tty', os.O_RDWR))".to_string(),
            sti,
            "fcntl.ioctl(0, termios.TIOCGWINSZ, b'\\0' * 8)".to_string(),
        ],
    );
    let out = sb
        .command("python3")
        .arg("-c")
        .arg(code)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = String::from_utf8_lossy(&out.stdout);
    let got: Vec<&str> = got.lines().collect();
    println!("ctty={}", got[0]);
    println!("tiocsti={}", got[1]);
    println!("tiocgwinsz={}", got[2]);
    // Exit before the pty closes: the hangup would signal this session leader. The
    // fixture goes first (`exit` runs no destructor).
    drop(ws);
    std::process::exit(0);
}

/// CVE-2019-5736 (runc): the contained program reopens its own binary, or the launcher's,
/// through `/proc/self/exe` for writing and replaces it. Inside, the program's binary is
/// on a read-only bind, the launcher (this test binary) is not in the layout at all, and
/// PID 1's binary is the init's sealed memfd behind a non-dumpable process.
#[test]
fn cve_2019_5736_the_binary_behind_proc_self_exe_cannot_be_overwritten() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let w = canon(ws.path());
    let sb = sandbox(&w, |_| {});
    let launcher = std::env::current_exe().unwrap();
    assert!(launcher.exists());
    let got = errnos(
        &sb,
        "",
        &[
            "open('/proc/self/exe', 'rb').read(4) == b'\\x7fELF' or sys.exit(3)".into(),
            format!("open('{}/x', 'wb').write(b'x')", w.display()),
            "open('/proc/self/exe', 'r+b')".into(),
            "os.open('/proc/self/exe', os.O_WRONLY | os.O_TRUNC)".into(),
            "open('/proc/1/exe', 'r+b')".into(),
            format!("os.stat('{}')", launcher.display()),
            format!("os.stat('{}')", launcher.parent().unwrap().display()),
        ],
    );
    // Controls: the binary is readable and the workspace writable.
    assert_eq!(got[0], "OK");
    assert_eq!(got[1], "OK");
    // The program's binary lives under /usr, a read-only bind. With O_TRUNC, open takes
    // write access to the mount before anything else: EROFS for every uid. Without it the
    // permission check comes first: uid 65534 may not write the root-owned 0755 file
    // (EACCES), and neither may root inside, for whom a root host binds /usr idmapped
    // (host root's files show as nobody's, so only "others" bits apply). Landlock, which
    // denies writes under /usr too, would answer last.
    let first = "EACCES";
    // `/proc/1/exe` is the init's: a non-dumpable process, whose exe link the program may
    // not even open (EACCES); behind it, the memfd is sealed against writes.
    let want = [first, "EROFS", "EACCES"];
    assert_eq!(&got[2..5], want, "{got:?}");
    // The launcher is not in the layout.
    assert_eq!(got[5], "ENOENT");
    assert_eq!(got[6], "ENOENT");
}

/// CVE-2024-21626 (runc): a host directory fd leaked into the container (and a working
/// directory resolved through `/proc/self/fd/N`) gives a path to the host's tree. Only
/// stdio and fds passed on purpose survive, and the working directory is in the workspace.
#[test]
fn cve_2024_21626_no_host_fd_or_cwd_leaks_in() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let w = canon(ws.path());
    let outside = tempdir();
    std::fs::write(outside.path().join("host-marker"), "h").unwrap();
    // A non-CLOEXEC directory fd, as a careless host leaves behind, at a number no
    // process inside would reuse by chance.
    let dir = nix::fcntl::open(
        outside.path(),
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    let leaked = nix::fcntl::fcntl(&dir, nix::fcntl::FcntlArg::F_DUPFD(300)).unwrap();
    // SAFETY: F_DUPFD just returned this fd; nothing else owns it.
    let leaked = unsafe { OwnedFd::from_raw_fd(leaked) };
    let n = leaked.as_raw_fd();
    // The same directory passed on purpose: the control that the probe sees fds at all.
    let passed = nix::fcntl::fcntl(&dir, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(320)).unwrap();
    // SAFETY: as above.
    let passed = unsafe { OwnedFd::from_raw_fd(passed) };
    let p = passed.as_raw_fd();
    let sb = sandbox(&w, |_| {});
    let code = probe_source(
        "",
        &[
            format!("os.stat('/proc/self/fd/{n}')"),
            format!("os.listdir('/proc/self/fd/{n}')"),
            format!("os.fstat({n})"),
            format!("'host-marker' in os.listdir({p}) or sys.exit(3)"),
            format!(
                "os.readlink('/proc/self/cwd') == '{}' or sys.exit(3)",
                w.display()
            ),
            format!("os.getcwd() == '{}' or sys.exit(3)", w.display()),
        ],
    );
    let out = sb
        .command("python3")
        .arg("-c")
        .arg(code)
        .pass_fd(passed)
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{got}");
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(got, ["ENOENT", "ENOENT", "EBADF", "OK", "OK", "OK"]);
    // A working directory outside the workspace is refused before anything runs.
    let err = sb
        .command("true")
        .current_dir(outside.path())
        .spawn()
        .unwrap_err();
    assert!(
        matches!(err, Error::Plan(PlanError::CwdOutsideWorkspace { .. })),
        "{err}"
    );
    drop(leaked);
}

/// Shocker (Docker 0.11): `open_by_handle_at` opens any inode of a file system by handle,
/// bypassing the mount layout. The handle here is real: the host takes it from a file
/// outside the workspace on the same file system, which the host (as root) can reopen.
#[test]
fn shocker_open_by_handle_at_is_denied() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let outside = tempdir();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "shocker-secret").unwrap();
    assert_eq!(
        std::fs::metadata(ws.path()).unwrap().dev(),
        std::fs::metadata(&secret).unwrap().dev(),
        "the workspace and the target must share a file system"
    );
    let handle_code = "
class FH(ctypes.Structure):
    _fields_ = [('n', ctypes.c_uint), ('t', ctypes.c_int), ('h', ctypes.c_ubyte * 128)]
def reopen(mount_dir, t, hexh):
    b = bytes.fromhex(hexh)
    fh = FH(len(b), t)
    ctypes.memmove(fh.h, b, len(b))
    mfd = os.open(mount_dir, os.O_RDONLY | os.O_DIRECTORY)
    fd = chk(libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDONLY))
    print('READ', os.read(fd, 64).decode())
";
    let take = format!(
        "{PRELUDE}{handle_code}
fh = FH(128)
mnt = ctypes.c_int()
chk(libc.name_to_handle_at(-100, b'{}', ctypes.byref(fh), ctypes.byref(mnt), 0))
print(fh.t, bytes(fh.h[:fh.n]).hex())
",
        secret.display()
    );
    let handle = host_py(&take);
    let (t, hexh) = handle.trim().split_once(' ').unwrap();
    let reopen = |dir: &Path| {
        format!(
            "{PRELUDE}{handle_code}
try:
    reopen('{}', {t}, '{hexh}')
except OSError as x:
    print(errno.errorcode.get(x.errno, x.errno))
",
            dir.display()
        )
    };
    // The control: on the host, root (CAP_DAC_READ_SEARCH) reopens the file by handle.
    let host = host_py(&reopen(outside.path()));
    let want = if is_root() {
        "READ shocker-secret"
    } else {
        "EPERM"
    };
    assert_eq!(host.trim(), want);
    // Inside, with the workspace (same file system) as the mount fd: seccomp answers
    // first; without it the call would still need CAP_DAC_READ_SEARCH in the initial user
    // namespace, which no sandboxed process has.
    let sb = sandbox(ws.path(), |_| {});
    assert_eq!(py_ok(&sb, &reopen(&canon(ws.path()))).trim(), "EPERM");
}

const SECRET: &str = "s3cret-data-dir";

fn renameat2_exchange(a: &CString, b: &CString) -> i32 {
    // The raw syscall, not `libc::renameat2`: the musl that Rust's musl target bundles has
    // no `renameat2` wrapper, so the test would not link there.
    // SAFETY: two valid NUL-terminated paths relative to AT_FDCWD; no memory is retained.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    r as i32
}

/// Swaps `a` and `b` in a tight loop until stopped; leaves them as they started.
fn swapper(a: &Path, b: &Path) -> (Arc<AtomicBool>, std::thread::JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (a, b) = (
        CString::new(a.as_os_str().as_encoded_bytes()).unwrap(),
        CString::new(b.as_os_str().as_encoded_bytes()).unwrap(),
    );
    let s = Arc::clone(&stop);
    let h = std::thread::spawn(move || {
        let mut n = 0u64;
        while !s.load(Ordering::Relaxed) || n % 2 == 1 {
            assert_eq!(renameat2_exchange(&a, &b), 0);
            n += 1;
        }
        n
    });
    (stop, h)
}

/// Whether a spawn failure is one of the typed refusals a swap may cause.
fn typed_swap_refusal(err: &Error) -> bool {
    match err {
        Error::Plan(PlanError::DataDirChanged(_)) => true,
        Error::Spawn(SpawnError::Setup { step, errno }) => {
            [Errno::ELOOP, Errno::ESTALE, Errno::ENOENT].contains(errno)
                && step
                    .path()
                    .is_some_and(|p| p.to_string_lossy().contains("/agent"))
        }
        _ => false,
    }
}

/// Symlink and rename swaps on a mount target during setup (the bubblewrap and runc
/// mount-target races): while a thread swaps `ws/agent` between the real directory and
/// a symlink to `/etc`, every spawn of a sandbox whose data dir is `ws/agent/data` either
/// fails with a typed error or runs with the data dir masked; the secret never shows, and
/// nothing is mounted over `/etc`. Then `Sandbox::new` itself races the swap (with a
/// symlink to a scratch dir standing in for `/etc`): it must not create the data dir
/// through the symlink.
#[test]
fn symlink_and_rename_swaps_during_setup_never_expose_the_data_dir() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let w = canon(ws.path());
    let agent = w.join("agent");
    let data = agent.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("secret"), SECRET).unwrap();
    let link = w.join("agent-swap");
    std::os::unix::fs::symlink("/etc", &link).unwrap();
    assert!(!Path::new("/etc/data").exists());
    let script = format!(
        "cat {0}/agent/data/secret {0}/agent-swap/data/secret; ls {0}/agent/data {0}/agent-swap/data; \
         test -r /etc/passwd && echo etc-ok; grep -c ' /etc/data ' /proc/self/mountinfo",
        w.display()
    );
    // The control: without a data dir the same script reads the secret.
    let open = sandbox(&w, |_| {});
    let out = String::from_utf8_lossy(&sh(&open, &script).stdout).into_owned();
    assert!(out.contains(SECRET), "{out}");

    let d = data.clone();
    let sb = sandbox(&w, |p| p.data_dir = Some(d.clone()));
    let (stop, h) = swapper(&agent, &link);
    let (mut ran, mut refused) = (0, 0);
    for _ in 0..50 {
        match sb.command("sh").arg("-c").arg(&script).output() {
            Ok(out) => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(!stdout.contains(SECRET), "the data dir leaked: {stdout}");
                assert!(stdout.contains("etc-ok\n0\n"), "{stdout}");
                ran += 1;
            }
            Err(e) => {
                assert!(typed_swap_refusal(&e), "untyped failure: {e:?}");
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = h.join().unwrap();
    assert!(swaps > 0 && ran + refused == 50);
    assert!(!Path::new("/etc/data").exists(), "created through the swap");
    // A run once the swapping stops masks the data dir as always.
    let out = sh(&sb, &script);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(SECRET));

    // Sandbox::new (which creates a missing data dir) during the swap.
    let scratch = tempdir();
    let link2 = w.join("agent-swap2");
    std::os::unix::fs::symlink(scratch.path(), &link2).unwrap();
    std::fs::remove_file(data.join("secret")).unwrap();
    std::fs::remove_dir(&data).unwrap();
    let (stop, h) = swapper(&agent, &link2);
    for _ in 0..50 {
        let mut p = Policy::with_workspace(&w);
        p.data_dir = Some(data.clone());
        match Sandbox::new(p) {
            Ok(sb) => {
                if let Err(e) = sb.command("true").output() {
                    assert!(typed_swap_refusal(&e), "untyped failure: {e:?}");
                }
            }
            // Creating the data dir met the symlink (ELOOP), pinning it met the
            // symlink's missing target (ENOENT), or the symlink itself on its path.
            Err(Error::Plan(PlanError::Path { key, .. } | PlanError::Symlink { key, .. })) => {
                assert_eq!(key, "data_dir")
            }
            Err(e) => panic!("untyped failure: {e:?}"),
        }
        let _ = std::fs::remove_dir(&data);
    }
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    assert!(
        !scratch.path().join("data").exists(),
        "Sandbox::new created the data dir through a symlink"
    );
}

/// Hard links to files outside the workspace (the attacker links `/etc/passwd` or a
/// masked file into its workspace, then the host or a later run writes through it):
/// every path outside the workspace is on another mount inside, so `link` fails with
/// EXDEV before any permission check; links inside the workspace work.
#[test]
fn hard_links_to_files_outside_the_workspace_fail() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let w = canon(ws.path());
    std::fs::create_dir_all(w.join("agent/data")).unwrap();
    std::fs::write(w.join("agent/data/secret"), SECRET).unwrap();
    std::fs::write(w.join("mine"), "m").unwrap();
    let d = w.join("agent/data");
    let sb = sandbox(&w, |p| p.data_dir = Some(d.clone()));
    let w = w.display();
    let got = errnos(
        &sb,
        "",
        &[
            format!("os.link('{w}/mine', '{w}/mine2')"),
            format!("os.link('/etc/passwd', '{w}/pw')"),
            format!("os.link('/usr/bin/python3', '{w}/py')"),
            format!(
                "fd = os.open('/etc/passwd', os.O_RDONLY); os.link(f'/proc/self/fd/{{fd}}', '{w}/pw2')"
            ),
            format!("os.link('{w}/agent/data/secret', '{w}/s')"),
        ],
    );
    assert_eq!(got, ["OK", "EXDEV", "EXDEV", "EXDEV", "EACCES"]);
    assert!(!Path::new(&format!("{w}/pw")).exists());
    assert_eq!(
        std::fs::metadata(format!("{w}/mine")).unwrap().nlink(),
        2,
        "the control link exists on the host"
    );
}

/// `/proc/1/root`, `/proc/self/root` and `/proc/<host pid>/root` (escapes through a host
/// process's root): PID 1 is the sandbox's init, which the program may not look into
/// (non-dumpable: EACCES); the program's own root is the sandbox's; host pids do not exist.
#[test]
fn proc_pid_root_leads_nowhere_outside() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let me = std::process::id();
    let host_root: Vec<String> = std::fs::read_dir("/")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(host_root.iter().any(|n| n == "root"));
    let out = py_ok(
        &sb,
        &format!(
            "{}\nprint(' '.join(sorted(os.listdir('/proc/self/root'))))\nprint(os.readlink('/proc/self/root'))",
            probe_source(
                "",
                &[
                    "sorted(os.listdir('/proc/self/root')) == sorted(os.listdir('/')) or sys.exit(3)"
                        .into(),
                    format!("os.listdir('/proc/{me}/root')"),
                    format!("os.readlink('/proc/{me}/root')"),
                    "os.listdir('/proc/self/root/root')".into(),
                    "os.listdir('/proc/self/root/proc/self/root/work')".into(),
                    "os.listdir('/proc/1/root')".into(),
                    "os.readlink('/proc/1/root')".into(),
                ]
            )
        ),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..7],
        [
            "OK", "ENOENT", "ENOENT", "ENOENT", "ENOENT", "EACCES", "EACCES"
        ]
    );
    let inside: Vec<&str> = lines[7].split(' ').collect();
    assert!(inside.contains(&"usr") && inside.contains(&"tmp"), "{out}");
    for absent in ["root", "work", "home", "var", "run"] {
        assert!(!inside.contains(&absent), "{absent} visible: {out}");
    }
    assert_eq!(lines[8], "/");
}

/// Writes to `/proc/sys` and `/sys` (kernel knobs shared with the host): `/proc/sys` is
/// read-only (EROFS, the mount flag answers before the missing capabilities would), `/sys`
/// is absent; reading works.
#[test]
fn proc_sys_and_sys_are_not_writable() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let got = errnos(
        &sb,
        "",
        &[
            "open('/proc/sys/kernel/ostype').read() == 'Linux\\n' or sys.exit(3)".into(),
            "open('/proc/sys/kernel/hostname', 'w').write('x')".into(),
            "open('/proc/sys/vm/drop_caches', 'w').write('3')".into(),
            "open('/proc/sys/kernel/panic', 'w').write('1')".into(),
            "open('/proc/sys/net/ipv4/ip_forward', 'w').write('1')".into(),
            "open('/sys/kernel/uevent_helper', 'w').write('/tmp/x')".into(),
            "os.listdir('/sys')".into(),
            "open('/proc/irq/default_smp_affinity', 'w').write('1')".into(),
            // Each kernel-knob tree of the fresh /proc (those this kernel has) is a mount of
            // its own, read-only, nosuid and nodev.
            "all(not os.path.exists(p) or any(l.split()[4] == p and {'ro', 'nosuid', 'nodev'} <= set(l.split()[5].split(',')) for l in open('/proc/self/mountinfo')) for p in ('/proc/sys', '/proc/irq', '/proc/bus', '/proc/fs')) or sys.exit(3)".into(),
        ],
    );
    assert_eq!(
        got,
        [
            "OK", "EROFS", "EROFS", "EROFS", "EROFS", "ENOENT", "ENOENT", "EROFS", "OK"
        ]
    );
}

/// core_pattern (the classic container escape: a `|/path` handler runs as root on the
/// host at the next crash): readable, the host's own value, and not writable.
#[test]
fn core_pattern_is_read_only() {
    require!(Feature::UserNs);
    let host = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let got = errnos(
        &sb,
        "",
        &[
            format!("open('/proc/sys/kernel/core_pattern').read() == {host:?} or sys.exit(3)"),
            "open('/proc/sys/kernel/core_pattern', 'w').write('|/tmp/x')".into(),
            "open('/proc/sys/kernel/core_uses_pid', 'w').write('1')".into(),
        ],
    );
    assert_eq!(got, ["OK", "EROFS", "EROFS"]);
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(),
        host
    );
}

/// Mounting, remounting read-write and unmounting a mask from inside: seccomp refuses the
/// mount calls (EPERM) before the kernel's own check (no CAP_SYS_ADMIN left) would; the
/// layout stays as it was.
#[test]
fn mount_remount_and_umount_from_inside_are_denied() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let w = canon(ws.path());
    let sb = sandbox(&w, |_| {});
    let usr_ro = "any(l.split()[4] == '/usr' and 'ro' in l.split()[5].split(',') for l in open('/proc/self/mountinfo')) or sys.exit(3)";
    let got = errnos(
        &sb,
        "",
        &[
            usr_ro.into(),
            // MS_REMOUNT | MS_BIND: read-write again.
            "chk(libc.mount(b'none', b'/usr', None, 0x20 | 0x1000, None))".into(),
            "chk(libc.mount(b'/usr', b'/usr', None, 0x20, None))".into(),
            "chk(libc.mount(b'tmpfs', b'/etc', b'tmpfs', 0, None))".into(),
            // Unmounting a mask would reveal what it hides.
            "chk(libc.umount2(b'/etc/shadow', 2))".into(),
            "chk(libc.umount2(b'/proc', 2))".into(),
            usr_ro.into(),
            "open('/usr/stockade-x', 'w')".into(),
            format!("open('{}/x', 'w').write('x')", w.display()),
        ],
    );
    assert_eq!(
        got,
        [
            "OK", "EPERM", "EPERM", "EPERM", "EPERM", "EPERM", "OK", "EROFS", "OK"
        ]
    );
}

/// A nested user namespace, to hold a full capability set again (and with it mount,
/// the kernel's namespaced attack surface): refused by seccomp (EPERM); on the host the
/// same call works.
#[test]
fn nested_user_namespaces_are_denied() {
    require!(Feature::UserNs);
    let host = StdCommand::new("unshare")
        .args(["-Ur", "true"])
        .status()
        .unwrap();
    assert!(host.success(), "the control: unshare -Ur works on the host");
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let got = errnos(
        &sb,
        "import subprocess",
        &[
            // CLONE_NEWUSER
            "chk(libc.unshare(0x10000000))".into(),
            "chk(libc.unshare(0x10000000 | 0x00020000))".into(),
            // unshare(1) reports with its exit status and message: turned into an errno.
            "r = subprocess.run(['unshare', '-Ur', 'true'], stderr=subprocess.PIPE)\n    if r.returncode: raise OSError(errno.EPERM if b'Operation not permitted' in r.stderr else errno.EIO, '')"
                .into(),
            "l = [x for x in open('/proc/self/status') if x.startswith('CapEff')][0]; l.split()[1] == '0000000000000000' or sys.exit(3)".into(),
        ],
    );
    assert_eq!(got, ["EPERM", "EPERM", "EPERM", "OK"]);
}

/// ptrace of the parent (the launcher, a host process holding secrets): the launcher is
/// not in the PID namespace (the program's parent is the init, PID 1, whose parent is 0);
/// ptrace is refused by seccomp; with `allow_ptrace` the host pid still does not exist
/// (ESRCH), the init cannot be traced (non-dumpable: EPERM), while tracing a process of the
/// program's inside works.
#[test]
fn ptrace_of_the_parent_is_impossible() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let me = std::process::id();
    let attach = format!("chk(libc.ptrace(16, {me}, 0, 0))");
    let sb = sandbox(ws.path(), |_| {});
    let got = errnos(
        &sb,
        "",
        &[
            "os.getppid() == 1 or sys.exit(3)".into(),
            "[l for l in open('/proc/1/status') if l.startswith('PPid:')] == ['PPid:\\t0\\n'] or sys.exit(3)".into(),
            attach.clone(),
        ],
    );
    assert_eq!(got, ["OK", "OK", "EPERM"]);
    let sb = sandbox(ws.path(), |p| p.allow_ptrace = true);
    let got = errnos(
        &sb,
        "",
        &[
            attach,
            "pid = os.fork() or os._exit(time.sleep(30) or 0); chk(libc.ptrace(16, pid, 0, 0)); os.kill(pid, 9); os.waitpid(pid, 0)".into(),
            // The init is non-dumpable: not even a tracer allowed by the filter gets in.
            "chk(libc.ptrace(16, 1, 0, 0))".into(),
        ],
    );
    // ESRCH: the PID namespace answers (Landlock's scoping would refuse a process outside
    // the sandbox's domain too).
    assert_eq!(got, ["ESRCH", "OK", "EPERM"]);
}

/// Killing a host process: host pids do not exist inside (ESRCH), and `kill(-1)` from PID
/// 1 reaches only the sandbox's own processes.
#[test]
fn kill_of_a_host_pid_is_impossible() {
    require!(Feature::UserNs);
    let mut host = StdCommand::new("sleep").arg("30").spawn().unwrap();
    let hp = host.id();
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let got = errnos(
        &sb,
        "import subprocess",
        &[
            format!("os.kill({hp}, 9)"),
            format!("os.pidfd_open({hp})"),
            "p = subprocess.Popen(['sleep', '30']); os.kill(-1, 9); p.wait() == -9 or sys.exit(3)"
                .into(),
        ],
    );
    assert_eq!(got, ["ESRCH", "ESRCH", "OK"]);
    assert!(host.try_wait().unwrap().is_none(), "a host process died");
    host.kill().unwrap();
    host.wait().unwrap();
}

/// Reading the host user's keyring (tokens, Kerberos tickets): keyctl, add_key and
/// request_key are refused by seccomp (EPERM); the sandbox's session keyring is fresh and
/// its user namespace has a keyring register of its own, the second wall. The host reads
/// its key (the control).
#[test]
fn keyring_reads_are_denied() {
    require!(Feature::UserNs);
    let desc = CString::new(format!("stockade-test-{}", std::process::id())).unwrap();
    let payload = b"keyring-secret";
    // SAFETY: add_key with valid NUL-terminated strings and a payload of the given length.
    let id = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            c"user".as_ptr(),
            desc.as_ptr(),
            payload.as_ptr(),
            payload.len(),
            -4i32, // KEY_SPEC_USER_KEYRING
        )
    };
    assert!(id > 0, "add_key: {}", std::io::Error::last_os_error());
    let mut buf = [0u8; 64];
    // SAFETY: KEYCTL_READ into a buffer of the given length.
    let n = unsafe { libc::syscall(libc::SYS_keyctl, 11, id, buf.as_mut_ptr(), buf.len()) };
    assert_eq!(
        &buf[..n.max(0) as usize],
        payload,
        "the control: the host reads its key"
    );
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let got = errnos(
        &sb,
        "buf = ctypes.create_string_buffer(64)",
        &[
            format!("chk(libc.syscall(250, 11, {id}, buf, 64))"),
            // KEYCTL_GET_KEYRING_ID(KEY_SPEC_USER_KEYRING)
            "chk(libc.syscall(250, 0, -4, 0))".into(),
            format!(
                "chk(libc.syscall(249, b'user', b'{}', None, 0))",
                desc.to_str().unwrap()
            ),
            "chk(libc.syscall(248, b'user', b'x', b'y', 1, -3))".into(),
        ],
    );
    // SAFETY: KEYCTL_INVALIDATE with an integer key id.
    unsafe { libc::syscall(libc::SYS_keyctl, 21, id) };
    assert_eq!(got, ["EPERM", "EPERM", "EPERM", "EPERM"]);
}

/// Setuid binaries of the host (`passwd`, `su`, `mount` are on the read-only system
/// dirs): with `no_new_privs` the exec grants nothing: the effective uid stays the
/// caller's and no capability appears. The control runs the same probe on the host.
#[test]
fn setuid_binaries_gain_nothing() {
    require!(Feature::UserNs);
    let bin = ["/usr/bin/passwd", "/usr/bin/su", "/usr/bin/chfn"]
        .into_iter()
        .find(|b| std::fs::metadata(b).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o4000 != 0));
    let Some(bin) = bin else {
        // Not a skip of the sandbox: there is nothing setuid to run.
        panic!("no setuid-root binary among passwd, su, chfn on this host");
    };
    let name = Path::new(bin).file_name().unwrap().to_str().unwrap();
    // Spawns the binary with stdin on an open pipe (it waits for a password), waits for
    // the exec (comm changes), prints `euid CapEff`, kills it.
    let probe = format!(
        "{PRELUDE}
r, w = os.pipe()
null = os.open('/dev/null', os.O_RDWR)
pid = os.posix_spawn('{bin}', ['{bin}'], {{'LC_ALL': 'C'}},
    file_actions=[(os.POSIX_SPAWN_DUP2, r, 0), (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
st = {{}}
for _ in range(500):
    st = dict(l.split(':', 1) for l in open(f'/proc/{{pid}}/status'))
    if st['Name'].strip() == '{name}':
        break
    time.sleep(0.01)
print(st['Uid'].split()[1], st['CapEff'].strip())
os.kill(pid, 9)
os.waitpid(pid, 0)
"
    );
    let me = nix::unistd::geteuid().as_raw().to_string();
    let host = host_py(&probe);
    let (h_euid, h_cap) = host.trim().split_once(' ').unwrap();
    // The control: outside, the exec does raise privilege.
    assert!(
        h_euid == "0" && (h_euid != me || h_cap != "0000000000000000"),
        "{host}"
    );
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let inside = py_ok(&sb, &probe);
    assert_eq!(inside.trim(), format!("{me} 0000000000000000"));
}

/// Abstract unix sockets of the host (X11, D-Bus, containerd-shim listened on them, and a
/// mount namespace does not hide them): Landlock's scoping refuses connect with EPERM
/// when the sandbox shares the host's network namespace; with `network = "none"` the
/// abstract namespace is another one (ECONNREFUSED). Sockets of the sandbox's own work.
#[test]
fn abstract_unix_sockets_of_the_host_are_unreachable() {
    require!(Feature::UserNs);
    let name = format!("stockade-adv-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = UnixListener::bind_addr(&addr).unwrap();
    let connect =
        format!("s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect('\\0{name}')");
    let own = "l = socket.socket(socket.AF_UNIX); l.bind('\\0stockade-inner'); l.listen(); c = socket.socket(socket.AF_UNIX); c.connect('\\0stockade-inner')";
    let host = host_py(&probe_source("", std::slice::from_ref(&connect)));
    assert_eq!(host.trim(), "OK", "the control: the host connects");
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    assert_eq!(
        errnos(&sb, "", &[connect.clone(), own.into()]),
        ["EPERM", "OK"]
    );
    let sb = sandbox(ws.path(), |p| p.network = Network::None);
    assert_eq!(
        errnos(&sb, "", &[connect, own.into()]),
        ["ECONNREFUSED", "OK"]
    );
}

/// Netlink: route sockets stay allowed (programs list interfaces), but with
/// `network = "none"` they describe only the private namespace's loopback, and with the
/// host's network changing links is refused (no CAP_NET_ADMIN over the host's namespace;
/// seccomp does not filter netlink).
#[test]
fn netlink_sees_only_loopback_and_changes_nothing() {
    require!(Feature::UserNs);
    let host = host_py("import socket; print(' '.join(n for _, n in socket.if_nameindex()))");
    assert!(
        host.split_whitespace().any(|n| n != "lo"),
        "the control needs a host interface besides lo: {host}"
    );
    let ws = tempdir();
    let sb = sandbox(ws.path(), |p| p.network = Network::None);
    let got = errnos(
        &sb,
        "",
        &[
            "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)".into(),
            "[n for _, n in socket.if_nameindex()] == ['lo'] or sys.exit(3)".into(),
        ],
    );
    assert_eq!(got, ["OK", "OK"]);
    let link = format!("stkd{}", std::process::id() % 100_000);
    let sb = sandbox(ws.path(), |_| {});
    let out = sh(&sb, &format!("ip link add {link} type dummy"));
    let exists = Path::new("/sys/class/net").join(&link).exists();
    if exists {
        let _ = StdCommand::new("ip").args(["link", "del", &link]).status();
    }
    assert!(!exists, "a link was created on the host");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Reading the host's links works on the shared network.
    let names = py_ok(
        &sb,
        "import socket; print(' '.join(n for _, n in socket.if_nameindex()))",
    );
    assert_eq!(names.trim(), host.trim());
}

/// Raw and packet sockets (spoofing, sniffing the host's traffic): EPERM, no CAP_NET_RAW
/// (seccomp lets the call through: the kernel's capability check answers). Ordinary TCP
/// over loopback works; as root on the host, the same raw socket opens (the control).
#[test]
fn raw_sockets_are_denied() {
    require!(Feature::UserNs);
    let raw = [
        "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)".to_string(),
        "socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)".to_string(),
        "socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)".to_string(),
    ];
    let host = host_py(&probe_source("", &raw));
    let want = if is_root() { "OK" } else { "EPERM" };
    assert!(host.lines().all(|l| l == want), "{host}");
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let connect = format!("socket.create_connection(('127.0.0.1', {port}), timeout=5)");
    let ws = tempdir();
    for net in [Network::Full, Network::None] {
        let sb = sandbox(ws.path(), |p| p.network = net);
        let mut exprs = raw.to_vec();
        exprs.push(connect.clone());
        let got = errnos(&sb, "", &exprs);
        // With network none the connect fails (a private loopback): ECONNREFUSED.
        let tcp_want = if net == Network::Full {
            "OK"
        } else {
            "ECONNREFUSED"
        };
        assert_eq!(got, ["EPERM", "EPERM", "EPERM", tcp_want], "{net:?}");
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some()
        || std::env::var_os(TIOCSTI_HELPER).is_some()
    {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
