//! The second and third walls, proven from inside: every seccomp denial with its errno on
//! the full layer, ptrace allowed on request, and layer 2 (Landlock + seccomp without
//! namespaces) on a host whose user namespaces are denied.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::Command as StdCommand;

use common::{Feature, py_ok, sandbox, sh, sh_ok, tempdir, try_errno};
use stockade::error::Conflict;
use stockade::{Error, Layer, Network, PlanError, Policy, Sandbox};

/// (name, x86_64 syscall number, arguments, expected errno). Arguments are harmless
/// values: without the filter each call fails with some other errno or succeeds.
#[cfg(target_arch = "x86_64")]
const DENIED: &[(&str, i64, &[i64], &str)] = &[
    ("ptrace", 101, &[16, 1], "EPERM"),
    ("process_vm_readv", 310, &[1, 0, 0, 0, 0, 0], "EPERM"),
    ("process_vm_writev", 311, &[1, 0, 0, 0, 0, 0], "EPERM"),
    ("kexec_load", 246, &[0, 0, 0, 0], "EPERM"),
    ("kexec_file_load", 320, &[-1, -1, 0, 0, 0], "EPERM"),
    ("init_module", 175, &[0, 0, 0], "EPERM"),
    ("finit_module", 313, &[-1, 0, 0], "EPERM"),
    ("delete_module", 176, &[0, 0], "EPERM"),
    ("bpf", 321, &[0, 0, 0], "EPERM"),
    ("perf_event_open", 298, &[0, 0, -1, -1, 0], "EPERM"),
    ("userfaultfd", 323, &[0], "EPERM"),
    ("keyctl", 250, &[0, -3, 0], "EPERM"),
    ("add_key", 248, &[0, 0, 0, 0, 0], "EPERM"),
    ("request_key", 249, &[0, 0, 0, 0], "EPERM"),
    ("mount", 165, &[0, 0, 0, 0, 0], "EPERM"),
    ("umount2", 166, &[0, 0], "EPERM"),
    ("pivot_root", 155, &[0, 0], "EPERM"),
    ("open_tree", 428, &[-1, 0, 0], "EPERM"),
    ("move_mount", 429, &[-1, 0, -1, 0, 0], "EPERM"),
    ("fsopen", 430, &[0, 0], "EPERM"),
    ("fsconfig", 431, &[-1, 0, 0, 0, 0], "EPERM"),
    ("fsmount", 432, &[-1, 0, 0], "EPERM"),
    ("fspick", 433, &[-1, 0, 0], "EPERM"),
    ("mount_setattr", 442, &[-1, 0, 0, 0, 0], "EPERM"),
    ("unshare", 272, &[0x10000000], "EPERM"),
    ("setns", 308, &[-1, 0], "EPERM"),
    ("clone_newuser", 56, &[0x10000000 | 17, 0, 0, 0, 0], "EPERM"),
    ("clone3", 435, &[0, 0], "ENOSYS"),
    ("reboot", 169, &[0, 0, 0, 0], "EPERM"),
    ("swapon", 167, &[0, 0], "EPERM"),
    ("swapoff", 168, &[0], "EPERM"),
    ("acct", 163, &[0], "EPERM"),
    ("quotactl", 179, &[0, 0, 0, 0], "EPERM"),
    ("settimeofday", 164, &[0, 0], "EPERM"),
    ("clock_settime", 227, &[0, 0], "EPERM"),
    ("clock_adjtime", 305, &[0, 0], "EPERM"),
    ("adjtimex", 159, &[0], "EPERM"),
    ("open_by_handle_at", 304, &[-1, 0, 0], "EPERM"),
    ("name_to_handle_at", 303, &[-1, 0, 0, 0, 0], "EPERM"),
    ("iopl", 172, &[3], "EPERM"),
    ("ioperm", 173, &[0, 1, 1], "EPERM"),
    ("ioctl_tiocsti", 16, &[0, 0x5412, 0], "EPERM"),
    ("ioctl_tioclinux", 16, &[0, 0x541C, 0], "EPERM"),
    ("io_uring_setup", 425, &[1, 0], "EPERM"),
    ("io_uring_enter", 426, &[-1, 0, 0, 0, 0, 0], "EPERM"),
    ("io_uring_register", 427, &[-1, 0, 0, 0], "EPERM"),
    ("socket_vsock", 41, &[40, 1, 0], "EPERM"),
    ("socketpair_vsock", 53, &[40, 1, 0, 0], "EPERM"),
    ("syslog", 103, &[10, 0, 0], "EPERM"),
    ("modify_ldt", 154, &[0xff, 0, 0], "EPERM"),
    ("uselib", 134, &[0], "EPERM"),
    ("move_pages", 279, &[0, 0, 0, 0, 0, -1], "EPERM"),
    ("migrate_pages", 256, &[0, 64, 1, 1], "EPERM"),
    ("mbind", 237, &[0, 0, 0, 0, 0, -1], "EPERM"),
    ("set_mempolicy", 238, &[0xffff, 0, 0], "EPERM"),
    ("get_mempolicy", 239, &[0, 0, 0, 0, 0], "EPERM"),
    ("set_mempolicy_home_node", 450, &[0, 0, 0, -1], "EPERM"),
    ("fanotify_init", 300, &[0x4000_0200, 0], "EPERM"),
    ("kcmp", 312, &[0, 0, 0xff, 0, 0], "EPERM"),
    ("pidfd_getfd", 438, &[-1, 0, 0], "EPERM"),
    ("process_madvise", 440, &[-1, 0, 0, 0, 0], "EPERM"),
    ("personality_addr_no_randomize", 135, &[0x0040000], "EPERM"),
    ("personality_read_implies_exec", 135, &[0x0400000], "EPERM"),
    ("personality_query", 135, &[0xffffffff], "OK"),
    ("ioctl_tiocsetd", 16, &[0, 0x5423, 0], "EPERM"),
    // Set-id modes, on a NULL path: EFAULT if the filter let them through.
    ("chmod_setuid", 90, &[0, 0o4755], "EPERM"),
    ("fchmodat_setgid", 268, &[-100, 0, 0o2755], "EPERM"),
    ("fchmodat2_setuid", 452, &[-100, 0, 0o4755, 0], "EPERM"),
    (
        "openat_creat_setuid",
        257,
        &[-100, 0, 0o101, 0o4755],
        "EPERM",
    ),
    ("mknod_setgid", 133, &[0, 0o102755, 0], "EPERM"),
    ("openat2", 437, &[-100, 0, 0, 0], "ENOSYS"),
    // Newer than the known calls, and the number a tracer writes to skip a call.
    ("newer_than_known", 470, &[], "ENOSYS"),
    ("minus_one", -1, &[], "ENOSYS"),
];

/// What layer 2 adds to [`DENIED`], and the new rules again, with arguments that are
/// harmless even if the filter let a call through: there the program runs on the host.
#[cfg(target_arch = "x86_64")]
const DENIED_LAYER_TWO: &[(&str, i64, &[i64], &str)] = &[
    ("msgget", 68, &[0x5354_4b44, 0], "EPERM"),
    ("msgctl", 71, &[-1, 2, 0], "EPERM"),
    ("semget", 64, &[0x5354_4b44, 1, 0], "EPERM"),
    ("semop", 65, &[-1, 0, 0], "EPERM"),
    ("semctl", 66, &[-1, 0, 2], "EPERM"),
    ("semtimedop", 220, &[-1, 0, 0, 0], "EPERM"),
    ("shmget", 29, &[0x5354_4b44, 4096, 0], "EPERM"),
    ("shmat", 30, &[-1, 0, 0], "EPERM"),
    ("shmdt", 67, &[1], "EPERM"),
    ("shmctl", 31, &[-1, 2, 0], "EPERM"),
    ("msgsnd", 69, &[-1, 0, 0, 0], "EPERM"),
    ("msgrcv", 70, &[-1, 0, 0, 0, 0], "EPERM"),
    ("mq_unlink", 241, &[0], "EPERM"),
    ("mq_timedsend", 242, &[-1, 0, 0, 0, 0], "EPERM"),
    ("mq_getsetattr", 245, &[-1, 0, 0], "EPERM"),
    ("sched_setattr_pid1", 314, &[1, 0, 0], "EPERM"),
    ("prlimit64_pid1_read", 302, &[1, 7, 0, 0], "EPERM"),
    ("prlimit64_self_read", 302, &[0, 7, 0, 0], "OK"),
    ("socketpair_vsock", 53, &[40, 1, 0, 0], "EPERM"),
    ("syslog", 103, &[10, 0, 0], "EPERM"),
    ("modify_ldt", 154, &[0xff, 0, 0], "EPERM"),
    ("move_pages", 279, &[0, 0, 0, 0, 0, -1], "EPERM"),
    ("migrate_pages", 256, &[0, 64, 1, 1], "EPERM"),
    ("mbind", 237, &[0, 0, 0, 0, 0, -1], "EPERM"),
    ("set_mempolicy", 238, &[0xffff, 0, 0], "EPERM"),
    ("get_mempolicy", 239, &[0, 0, 0, 0, 0], "EPERM"),
    ("set_mempolicy_home_node", 450, &[0, 0, 0, -1], "EPERM"),
    ("fanotify_init", 300, &[0x4000_0200, 0], "EPERM"),
    ("kcmp", 312, &[0, 0, 0xff, 0, 0], "EPERM"),
    ("pidfd_getfd", 438, &[-1, 0, 0], "EPERM"),
    ("process_madvise", 440, &[-1, 0, 0, 0, 0], "EPERM"),
    ("personality_read_implies_exec", 135, &[0x0400000], "EPERM"),
    ("ioctl_tiocsetd", 16, &[0, 0x5423, 0], "EPERM"),
    ("ioctl_tiocsti", 16, &[0, 0x5412, 0], "EPERM"),
    ("fchmodat2_setuid", 452, &[-100, 0, 0o4755, 0], "EPERM"),
    (
        "openat_creat_setuid",
        257,
        &[-100, 0, 0o101, 0o4755],
        "EPERM",
    ),
    ("openat2", 437, &[-100, 0, 0, 0], "ENOSYS"),
    ("newer_than_known", 470, &[], "ENOSYS"),
    ("minus_one", -1, &[], "ENOSYS"),
];

/// A python program that makes each call and prints `name errno-name` per line.
#[cfg(target_arch = "x86_64")]
fn syscall_probe(calls: &[(&str, i64, &[i64], &str)]) -> String {
    let mut src = String::from(
        "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n",
    );
    for (name, nr, args, _) in calls {
        let args: Vec<String> = args.iter().map(|a| format!("ctypes.c_long({a})")).collect();
        src.push_str(&format!(
            "r = libc.syscall(ctypes.c_long({nr}), {})\nprint('{name}', 'OK' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))\n",
            args.join(", ")
        ));
    }
    src
}

#[cfg(target_arch = "x86_64")]
#[test]
fn every_listed_call_is_denied_inside_the_full_layer() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    assert_probe(&sb, DENIED);
}

/// Runs [`syscall_probe`] of `calls` in `sb` and asserts each answer.
#[cfg(target_arch = "x86_64")]
fn assert_probe(sb: &Sandbox, calls: &[(&str, i64, &[i64], &str)]) {
    let out = py_ok(sb, &syscall_probe(calls));
    let got: Vec<(&str, &str)> = out.lines().filter_map(|l| l.split_once(' ')).collect();
    assert_eq!(got.len(), calls.len(), "{out}");
    for ((name, _, _, want), (gname, errno)) in calls.iter().zip(&got) {
        assert_eq!(name, gname);
        assert_eq!(errno, want, "{name}");
    }
}

#[cfg(target_arch = "x86_64")]
/// A file renamed or linked into another directory of the workspace (what rustc does with
/// each `.rmeta`, `mv` between directories, git's packs): the program's own nested
/// Landlock domain must grant reparenting, which every domain denies unless a rule grants
/// it (`EXDEV` before, on the full layer).
#[test]
fn files_move_between_directories_of_the_workspace_on_every_layer() {
    require!(Feature::UserNs);
    for layer in common::LAYERS {
        let (_keep, ws) = common::var_tempdir();
        let sb = common::sandbox_on(&ws, layer, |_| {});
        let code = format!(
            "import os\nw = {ws:?}\nos.makedirs(w + '/a/deep'); os.makedirs(w + '/b')\n\
             open(w + '/a/deep/x', 'w').write('1')\n\
             os.rename(w + '/a/deep/x', w + '/b/x')\n\
             os.link(w + '/b/x', w + '/a/y')\n\
             os.rename(w + '/a/deep', w + '/b/deep')\n\
             print(sorted(os.listdir(w + '/b')), open(w + '/a/y').read())",
            ws = ws.display().to_string()
        );
        assert_eq!(py_ok(&sb, &code).trim(), "['deep', 'x'] 1", "{layer}");
    }
}

#[test]
fn every_listed_call_is_denied_on_layer_two() {
    let ws = fixture_dir();
    let sb = sandbox(ws.path(), |p| p.layer = Some(Layer::Landlock));
    assert_eq!(sb.layer(), Layer::Landlock);
    assert_probe(&sb, DENIED_LAYER_TWO);
}

/// A directory outside /tmp, as users' workspaces are (inside the sandbox /tmp is a
/// private tmpfs, which would hide mistakes).
fn fixture_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-walls-")
        .tempdir_in("/var/tmp")
        .expect("a fixture dir under /var/tmp")
}

/// Both Linux layers, each with a policy edited by `f`.
fn both_layers(ws: &Path, f: impl Fn(&mut Policy)) -> Vec<(Layer, Sandbox)> {
    [Layer::Full, Layer::Landlock]
        .into_iter()
        .map(|layer| {
            let sb = sandbox(ws, |p| {
                p.layer = Some(layer);
                f(p);
            });
            assert_eq!(sb.layer(), layer);
            (layer, sb)
        })
        .collect()
}

fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn setuid_and_setgid_bits_cannot_be_set_in_either_layer() {
    require!(Feature::UserNs);
    let ws = fixture_dir();
    // A file outside every root: Landlock does not govern metadata, seccomp does.
    let outside = fixture_dir();
    let host_file = outside.path().join("host");
    std::fs::write(&host_file, "h").unwrap();
    let w = std::fs::canonicalize(ws.path()).unwrap();
    for (layer, sb) in both_layers(ws.path(), |_| {}) {
        let out = sh(
            &sb,
            &format!(
                "cd {w} && rm -rf f d n t && touch f && mkdir d && \
                 chmod u+s f; echo u+s=$?; chmod g+s d; echo g+s=$?; chmod 4755 f; echo 4755=$?; \
                 install -m 4755 /bin/true t; echo install=$?; \
                 chmod 755 f; echo 755=$?; chmod 1777 d; echo sticky=$?",
                w = w.display()
            ),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stdout, "u+s=1\ng+s=1\n4755=1\ninstall=1\n755=0\nsticky=0\n",
            "{layer:?}: {stderr}"
        );
        assert!(stderr.contains("Operation not permitted"), "{stderr}");
        assert_eq!(mode_of(&w.join("f")), 0o755, "{layer:?}");
        assert_eq!(mode_of(&w.join("d")) & 0o6000, 0, "{layer:?}");
        let created = py_ok(
            &sb,
            &try_errno(&format!(
                "os.open('{}/n', os.O_CREAT | os.O_WRONLY, 0o4755)",
                w.display()
            )),
        );
        assert_eq!(created.trim(), "EPERM", "{layer:?}");
        assert!(!w.join("n").exists());
        let plain = py_ok(
            &sb,
            &try_errno(&format!(
                "os.open('{}/n', os.O_CREAT | os.O_WRONLY, 0o755)",
                w.display()
            )),
        );
        assert_eq!(plain.trim(), "OK", "{layer:?}");
        if layer == Layer::Landlock {
            let r = py_ok(
                &sb,
                &try_errno(&format!("os.chmod('{}', 0o4755)", host_file.display())),
            );
            assert_eq!(r.trim(), "EPERM");
            assert_eq!(mode_of(&host_file) & 0o6000, 0);
        }
    }
}

#[test]
fn tracers_can_skip_calls_and_syscall_minus_one_is_enosys() {
    require!(Feature::UserNs);
    let ws = fixture_dir();
    for (layer, sb) in both_layers(ws.path(), |p| p.allow_ptrace = true) {
        // strace skips uname by setting its number to -1 and returns EPERM itself.
        let out = sb
            .command("strace")
            .args([
                "-o",
                "/dev/null",
                "-e",
                "inject=uname:error=EPERM",
                "uname",
                "-s",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{layer:?}: {:?} {stderr}",
            out.status
        );
        assert!(stderr.contains("Operation not permitted"), "{stderr}");
        let out = sb
            .command("strace")
            .args(["-f", "-o", "/dev/null", "uname", "-s"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{layer:?}: {:?}", out.status);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "Linux\n");
        let r = py_ok(
            &sb,
            "import ctypes, errno\nl = ctypes.CDLL(None, use_errno=True)\nl.syscall.restype = ctypes.c_long\nr = l.syscall(ctypes.c_long(-1))\nprint(r, errno.errorcode[ctypes.get_errno()])",
        );
        assert_eq!(r.trim(), "-1 ENOSYS", "{layer:?}");
    }
}

#[test]
fn only_the_listed_personas_can_be_set() {
    require!(Feature::UserNs);
    let ws = fixture_dir();
    for (layer, sb) in both_layers(ws.path(), |_| {}) {
        let out = sh(&sb, "setarch -R true");
        assert!(!out.status.success(), "{layer:?}: setarch -R worked");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(sh_ok(&sb, "linux32 uname -m"), "i686\n", "{layer:?}");
        assert!(sh_ok(&sb, "setarch --uname-2.6 uname -r").starts_with("2.6."));
        let r = py_ok(
            &sb,
            "import ctypes\nl = ctypes.CDLL(None, use_errno=True)\nfor p in (0xffffffff, 0x0040000, 0x0400000, 0x0):\n    r = l.personality(ctypes.c_ulong(p))\n    print(hex(p), r, ctypes.get_errno())",
        );
        assert_eq!(
            r, "0xffffffff 0 0\n0x40000 -1 1\n0x400000 -1 1\n0x0 0 1\n",
            "{layer:?}"
        );
    }
}

#[test]
fn terminal_line_discipline_and_injection_are_denied_on_a_pty() {
    require!(Feature::UserNs);
    let ws = fixture_dir();
    for (layer, sb) in both_layers(ws.path(), |_| {}) {
        // The program's own terminal: a pty the host hands it as stdin (layer 2 grants a
        // program no other pty).
        let (_master, slave, _) = common::openpty();
        let out = sb
            .command("python3")
            .arg("-c")
            .arg(
                "import errno, fcntl, struct, termios\n\
                 def t(req, arg):\n\
                 \x20   try:\n\
                 \x20       fcntl.ioctl(0, req, arg); return 'OK'\n\
                 \x20   except OSError as e:\n\
                 \x20       return errno.errorcode[e.errno]\n\
                 print(t(termios.TIOCGWINSZ, b'\\0' * 8), t(termios.TIOCSETD, struct.pack('i', 0)), t(termios.TIOCSTI, b'x'))",
            )
            .stdin(stockade::Stdio::from(slave))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "OK EPERM EPERM\n",
            "{layer:?}: TIOCGWINSZ, TIOCSETD, TIOCSTI"
        );
    }
}

/// Python that forks a child holding a pipe and tries the ptrace family on it: prints
/// `pidfd_getfd <errno or OK>` and `kcmp <errno or OK>`.
fn sibling_fd_probe() -> String {
    format!(
        "import ctypes, errno, os, time
l = ctypes.CDLL(None, use_errno=True)
l.syscall.restype = ctypes.c_long
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
pidfd = os.pidfd_open(pid)
def res(v):
    return 'OK' if v >= 0 else errno.errorcode[ctypes.get_errno()]
print('pidfd_getfd', res(l.syscall({getfd}, pidfd, w, 0)))
print('kcmp', res(l.syscall({kcmp}, os.getpid(), pid, 0, w, w)))
os.kill(pid, 9)
os.waitpid(pid, 0)",
        getfd = libc::SYS_pidfd_getfd,
        kcmp = libc::SYS_kcmp,
    )
}

#[test]
fn a_siblings_fds_need_allow_ptrace() {
    require!(Feature::UserNs);
    let ws = fixture_dir();
    for (layer, sb) in both_layers(ws.path(), |_| {}) {
        let out = py_ok(&sb, &sibling_fd_probe());
        assert_eq!(out, "pidfd_getfd EPERM\nkcmp EPERM\n", "{layer:?}");
    }
    for (layer, sb) in both_layers(ws.path(), |p| p.allow_ptrace = true) {
        let out = py_ok(&sb, &sibling_fd_probe());
        assert_eq!(out, "pidfd_getfd OK\nkcmp OK\n", "{layer:?}");
    }
}

/// Python run on layer 2 against `host` (a process of the host, same user): every call
/// sets what is already set, so even without the filter it changes nothing.
fn host_process_probe(host: u32) -> String {
    format!(
        "import ctypes, errno, os, resource
l = ctypes.CDLL(None, use_errno=True)
l.syscall.restype = ctypes.c_long
H = {host}
def t(name, f):
    try:
        f()
        print(name, 'OK')
    except OSError as e:
        print(name, errno.errorcode[e.errno])
def ioprio_set(pid):
    cur = l.syscall({ioprio_get}, 1, pid)
    if l.syscall({ioprio_set}, 1, pid, cur) < 0:
        raise OSError(ctypes.get_errno(), 'ioprio_set')
t('setpriority', lambda: os.setpriority(os.PRIO_PROCESS, H, os.getpriority(os.PRIO_PROCESS, H)))
t('prlimit', lambda: resource.prlimit(H, resource.RLIMIT_NOFILE))
t('sched_setaffinity', lambda: os.sched_setaffinity(H, os.sched_getaffinity(H)))
t('sched_setscheduler', lambda: os.sched_setscheduler(H, os.SCHED_OTHER, os.sched_param(0)))
t('sched_setparam', lambda: os.sched_setparam(H, os.sched_param(0)))
t('ioprio_set', lambda: ioprio_set(H))
t('own_setpriority', lambda: os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0)))
t('own_nice', lambda: os.nice(1))
t('own_prlimit', lambda: resource.prlimit(0, resource.RLIMIT_NOFILE))
t('own_setrlimit', lambda: resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)))
t('own_sched_setaffinity', lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
t('own_sched_setscheduler', lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0)))
t('own_ioprio_set', lambda: ioprio_set(0))",
        ioprio_get = libc::SYS_ioprio_get,
        ioprio_set = libc::SYS_ioprio_set,
    )
}

#[test]
fn layer_two_cannot_change_host_processes_limits_or_scheduling() {
    let ws = fixture_dir();
    let sb = sandbox(ws.path(), |p| p.layer = Some(Layer::Landlock));
    assert_eq!(sb.layer(), Layer::Landlock);
    let out = py_ok(&sb, &host_process_probe(std::process::id()));
    assert_eq!(
        out,
        "setpriority EPERM\nprlimit EPERM\nsched_setaffinity EPERM\nsched_setscheduler EPERM\n\
         sched_setparam EPERM\nioprio_set EPERM\nown_setpriority OK\nown_nice OK\nown_prlimit OK\n\
         own_setrlimit OK\nown_sched_setaffinity OK\nown_sched_setscheduler OK\nown_ioprio_set OK\n"
    );
    // The tools that take these calls run their command as themselves (pid 0).
    sh_ok(
        &sb,
        "nice -n 5 true && ionice -c 3 true && taskset -c 0 true && prlimit --nofile=512 true \
         && chrt -b 0 true && ulimit -n 256",
    );
}

/// Python that makes one SysV message queue, semaphore set and shared memory segment and one
/// POSIX message queue, removing each at once: prints `name OK` or `name <errno>`.
fn ipc_probe() -> String {
    let mq = format!("/stockade-walls-{}", std::process::id());
    format!(
        "import ctypes, errno, os
l = ctypes.CDLL(None, use_errno=True)
def res(name, v, rm):
    if v >= 0:
        rm(v)
        print(name, 'OK')
    else:
        print(name, errno.errorcode[ctypes.get_errno()])
res('msgget', l.msgget(0, 0o1600), lambda q: l.msgctl(q, 0, None))
res('semget', l.semget(0, 1, 0o1600), lambda s: l.semctl(s, 0, 0))
res('shmget', l.shmget(0, 4096, 0o1600), lambda m: l.shmctl(m, 0, None))
res('mq_open', l.mq_open(b'{mq}', os.O_CREAT | os.O_RDWR, 0o600, None), lambda q: l.mq_unlink(b'{mq}'))"
    )
}

fn host_ipc_objects() -> String {
    [
        "/proc/sysvipc/msg",
        "/proc/sysvipc/sem",
        "/proc/sysvipc/shm",
    ]
    .iter()
    .map(|p| std::fs::read_to_string(p).unwrap_or_default())
    .collect()
}

#[test]
fn sysv_ipc_and_message_queues_are_private_on_the_full_layer_and_denied_on_layer_two() {
    require!(Feature::UserNs);
    let ws = fixture_dir();
    let before = host_ipc_objects();
    for (layer, sb) in both_layers(ws.path(), |_| {}) {
        let out = py_ok(&sb, &ipc_probe());
        // On the full layer seccomp leaves message queues to the IPC namespace, but their
        // file system lies outside every Landlock grant: creating one is EACCES there.
        let want = match layer {
            Layer::Full => "msgget OK\nsemget OK\nshmget OK\nmq_open EACCES\n",
            _ => "msgget EPERM\nsemget EPERM\nshmget EPERM\nmq_open EPERM\n",
        };
        assert_eq!(out, want, "{layer:?}");
        if layer == Layer::Full {
            // Inside the IPC namespace, and gone with it.
            let id = sh_ok(&sb, "ipcmk -Q && ipcs -q | grep -c 0x");
            assert!(id.ends_with("1\n"), "{id}");
        }
    }
    assert_eq!(host_ipc_objects(), before, "the host's IPC objects changed");
}

#[test]
fn ordinary_programs_still_work_on_layer_two() {
    let ws = fixture_dir();
    let sb = sandbox(ws.path(), |p| p.layer = Some(Layer::Landlock));
    assert_eq!(sb.layer(), Layer::Landlock);
    let w = std::fs::canonicalize(ws.path()).unwrap();
    let out = sh_ok(
        &sb,
        &format!(
            "cd {} && printf 'all: t\\nt: t.c\\n\\tcc -pthread -o t t.c\\n' > Makefile && \
             printf 'int main(void){{return 0;}}' > t.c && make -s -j2 && ./t && \
             git init -q r && cd r && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && \
             git log --oneline | wc -l && node -e 'console.log(1+1)' && \
             python3 -c 'import threading, subprocess; ts = [threading.Thread(target=lambda: subprocess.run([\"true\"], check=True)) for _ in range(4)]; [t.start() for t in ts]; [t.join() for t in ts]; print(\"py\")'",
            w.display()
        ),
    );
    assert_eq!(out, "1\n2\npy\n");
}

#[test]
fn ordinary_programs_still_work_under_the_filters() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    // Wait (boundedly) until the background child has exec'd `sleep` before listing.
    let ps = sh_ok(
        &sb,
        "sleep 5 & for i in $(seq 500); do ps -e -o comm= | grep -qx sleep && break; done; ps -e -o pid=,comm=; kill $!",
    );
    assert!(ps.contains("sleep") && ps.contains("ps"), "{ps}");
    py_ok(
        &sb,
        "import threading, subprocess\nts = [threading.Thread(target=lambda: subprocess.run(['true'], check=True)) for _ in range(4)]\n[t.start() for t in ts]; [t.join() for t in ts]",
    );
    sh_ok(
        &sb,
        "printf 'int main(void){return 0;}' > t.c && cc -pthread -o t t.c && ./t",
    );
    sh_ok(
        &sb,
        "git init -q r && git -C r status >/dev/null && ls / >/dev/null && ls /tmp /proc/self >/dev/null",
    );
    let status = sb.landlock_status().expect("landlock active");
    assert!(status.refer() && status.signals_scoped() && status.abstract_unix_scoped());
}

#[test]
fn allow_ptrace_lets_strace_work_inside_only() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let sb = sandbox(ws.path(), |_| {});
    let out = sb
        .command("strace")
        .args(["-f", "-o", "/dev/null", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "strace worked without allow_ptrace");
    let sb = sandbox(ws.path(), |p| p.allow_ptrace = true);
    let out = sb
        .command("strace")
        .args(["-f", "-o", "/dev/null", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Processes outside stay out of reach: not even visible.
    let me = std::process::id();
    let r = py_ok(&sb, &try_errno(&format!("open('/proc/{me}/mem')")));
    assert_eq!(r.trim(), "ENOENT");
}

#[test]
fn layer_two_on_a_host_that_denies_user_namespaces() {
    require!(Feature::UserNs);
    if std::env::var_os("STOCKADE_TEST_LAYER2_INNER").is_some() {
        return;
    }
    // A user namespace whose own limit for nested user namespaces is 0: inside it,
    // creating one fails with ENOSPC, as on hosts that restrict them. Each scenario is a
    // fresh process, so that its first spawn is the one that finds out.
    for scenario in ["degrade", "refuse", "cli", "root"] {
        run_inner(
            "-Ur",
            "echo 0 > /proc/sys/user/max_user_namespaces",
            "layer_two_inner",
            ("STOCKADE_TEST_LAYER2_INNER", scenario),
        );
    }
}

/// The inside half of `layer_two_on_a_host_that_denies_user_namespaces`, one scenario per
/// process (`STOCKADE_TEST_LAYER2_INNER`).
#[test]
fn layer_two_inner() {
    let Ok(scenario) = std::env::var("STOCKADE_TEST_LAYER2_INNER") else {
        return;
    };
    let ws = tempdir();
    let outside = tempdir();
    let data = tempdir();
    std::fs::write(data.path().join("secret"), "s").unwrap();
    std::fs::write(outside.path().join("f"), "host").unwrap();
    let mut p = Policy::with_workspace(ws.path());
    p.data_dir = Some(data.path().to_path_buf());
    p.network = Network::None;
    match scenario.as_str() {
        "degrade" => {
            if host_root() {
                p.min_layer = Some(Layer::Landlock);
            }
            layer_two_degrades_at_the_first_spawn(p, ws.path(), outside.path(), data.path())
        }
        "root" => root_refuses_layer_two_unless_told(&p),
        "refuse" => layer_two_refused(p),
        "cli" => layer_two_from_the_cli(ws.path()),
        other => panic!("unknown scenario {other}"),
    }
}

/// Whether this process is root over the host's root-owned files: `unshare -Ur` run by
/// root maps 0 to 0, run by anyone else maps 0 to them.
fn host_root() -> bool {
    nix::unistd::geteuid().is_root()
        && std::fs::read_to_string("/proc/self/uid_map")
            .unwrap()
            .split_whitespace()
            .take(2)
            .eq(["0", "0"])
}

/// A root host without namespaces would run the program as root on layer 2, where it can
/// chmod every root-owned file it names: without a `min_layer` of the policy's own, the
/// spawn refuses, saying so and how to accept it, and changes nothing.
fn root_refuses_layer_two_unless_told(p: &Policy) {
    if !host_root() {
        // `unshare -Ur` by anyone else: its root owns nothing of the host's, and the
        // default floor is layer 2 (the "degrade" scenario).
        return;
    }
    let sb = Sandbox::new(p.clone()).unwrap();
    match sb.command("true").status() {
        Err(Error::Plan(e @ PlanError::LayerUnavailable { .. })) => {
            let e = e.to_string();
            assert!(e.contains("No space left on device"), "{e}");
            assert!(e.contains("min_layer = \"landlock\""), "{e}");
        }
        other => panic!("expected LayerUnavailable, got {other:?}"),
    }
}

/// Nothing is probed when the sandbox is created; the first spawn finds the refusal,
/// degrades per the policy, says why, and runs on layer 2.
fn layer_two_degrades_at_the_first_spawn(p: Policy, ws: &Path, outside: &Path, data: &Path) {
    let sb = Sandbox::new(p.clone()).unwrap();
    assert_eq!(sb.layer(), Layer::Full, "full is assumed until a spawn");
    assert_eq!(sb.degradation(), None);
    // A data dir under the workspace, which the full layer hides and Landlock cannot.
    let mut under = p.clone();
    under.data_dir = Some(ws.join("data"));
    std::fs::create_dir_all(ws.join("data")).unwrap();
    let under_sb = Sandbox::new(under.clone()).unwrap();

    // The first spawn is refused (ENOSPC), falls back and runs.
    let w = std::fs::canonicalize(ws).unwrap();
    sh_ok(
        &sb,
        &format!("echo ok > {}/f && echo ok > \"$TMPDIR/f\"", w.display()),
    );
    assert_eq!(sb.layer(), Layer::Landlock);
    let d = sb.degradation().expect("degradation is data");
    assert_eq!((d.wanted, d.running), (Layer::Full, Layer::Landlock));
    assert!(d.reason.contains("No space left on device"), "{}", d.reason);
    assert!(d.reason.contains("clone(CLONE_NEWUSER"), "{}", d.reason);
    // Known now, for the whole process: a new sandbox starts on layer 2 directly.
    let again = Sandbox::new(p.clone()).unwrap();
    assert_eq!(again.layer(), Layer::Landlock);
    assert_eq!(again.degradation(), Some(d));
    // The sandbox made before the refusal was learned re-plans at its spawn; Landlock
    // cannot hide a data dir under the workspace: an error says so, and no program runs.
    // The host matches the conflict, and finds the data dir and the allowed path above it.
    let cannot_hide = |e: &PlanError| {
        assert!(e.to_string().contains("cannot hide data_dir"), "{e}");
        assert!(
            matches!(e, PlanError::Conflict(Conflict::LandlockCannotHide { key: "data_dir", path, allowed })
                if path.ends_with("data") && path.starts_with(allowed)),
            "{e:?}"
        );
    };
    match under_sb.command("true").status() {
        Err(Error::Plan(e)) => cannot_hide(&e),
        other => panic!("expected a plan error, got {other:?}"),
    }
    match Sandbox::new(under) {
        Err(Error::Plan(e)) => cannot_hide(&e),
        other => panic!("expected a plan error, got {other:?}"),
    }

    // The workspace and the private TMPDIR are writable (above); nothing else is.
    for (expr, want) in [
        (format!("open('{}/f', 'w')", outside.display()), "EACCES"),
        (format!("open('{}/f')", outside.display()), "EACCES"),
        ("open('/etc/stockade-x', 'w')".to_string(), "EACCES"),
        ("open('/tmp/stockade-x', 'w')".to_string(), "EACCES"),
        (format!("os.listdir('{}')", data.display()), "EACCES"),
        (format!("open('{}/secret')", data.display()), "EACCES"),
    ] {
        assert_eq!(py_ok(&sb, &try_errno(&expr)).trim(), want, "{expr}");
    }
    // A host process cannot be signalled.
    let mut host = StdCommand::new("sleep").arg("30").spawn().unwrap();
    let r = py_ok(&sb, &try_errno(&format!("os.kill({}, 15)", host.id())));
    assert_eq!(r.trim(), "EPERM");
    assert!(host.try_wait().unwrap().is_none());
    host.kill().unwrap();
    host.wait().unwrap();
    // A host abstract unix socket cannot be reached.
    let name = format!("stockade-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let r = py_ok(
        &sb,
        &try_errno(&format!(
            "s = socket.socket(socket.AF_UNIX); s.connect('\\0{name}')"
        )),
    );
    assert_eq!(r.trim(), "EPERM");
    drop(listener);
    // TCP with network none: no socket to begin with, and Landlock denies connect too.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let r = py_ok(
        &sb,
        &try_errno(&format!(
            "socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        )),
    );
    assert!(matches!(r.trim(), "EPERM" | "EACCES"), "{r}");
    // Ordinary programs run.
    let out = sh_ok(&sb, "echo a | tr a b; python3 -c 'print(1)'");
    assert_eq!(out, "b\n1\n");
    let mut buf = String::new();
    let mut child = sb
        .command("sh")
        .args(["-c", "echo $TMPDIR"])
        .stdout(stockade::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut buf)
        .unwrap();
    child.wait().unwrap();
    let tmp = buf.trim().to_string();
    assert!(tmp.contains("stockade-tmp-"), "{tmp}");
    assert!(
        !Path::new(&tmp).exists(),
        "the private tmp dir outlived the command"
    );

    // The full probe (for `detect`) agrees, and says why layer 1 is not available.
    let caps = stockade::Capabilities::probe();
    assert!(!caps.user_namespaces.available);
    let why = caps.user_namespaces.reason.clone().unwrap();
    assert!(why.contains("No space left on device"), "{why}");
    assert_eq!(caps.best_layer(), Layer::Landlock);
    let detect = StdCommand::new(common::stockade_exe())
        .args(["detect", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&detect.stdout).unwrap();
    assert_eq!(v["best"], "landlock");
    assert!(
        v["layers"][0]["status"]["reason"]
            .as_str()
            .unwrap()
            .contains("No space left")
    );
}

/// `fallback = "refuse"`: the first spawn returns the typed error with the OS reason;
/// once the refusal is known, creating such a sandbox fails at once.
fn layer_two_refused(p: Policy) {
    let mut refuse = p.clone();
    refuse.fallback = stockade::Fallback::Refuse;
    let sb = Sandbox::new(refuse.clone()).unwrap();
    match sb.command("true").status() {
        Err(Error::Plan(e @ PlanError::LayerUnavailable { .. })) => {
            let e = e.to_string();
            assert!(e.contains("`full` is not available"), "{e}");
            assert!(e.contains("No space left on device"), "{e}");
        }
        other => panic!("expected LayerUnavailable, got {other:?}"),
    }
    let err = Sandbox::new(refuse).unwrap_err();
    assert!(err.to_string().contains("`full` is not available"), "{err}");
    // A minimum layer above what is left is refused too.
    let mut floor = p;
    floor.min_layer = Some(Layer::Full);
    assert!(Sandbox::new(floor).is_err());
}

/// The CLI degrades at its one spawn and says so on stderr; with `--fallback refuse` it
/// exits 125 naming the missing layer and the OS reason.
fn layer_two_from_the_cli(ws: &Path) {
    let cli = |extra: &[&str]| {
        StdCommand::new(common::stockade_exe())
            .arg("run")
            .arg("--workspace")
            .arg(ws)
            .args(extra)
            .args(["--", "sh", "-c", "echo ran"])
            .output()
            .unwrap()
    };
    // A root caller says how far it degrades (see `root_refuses_layer_two_unless_told`).
    let floor: &[&str] = if host_root() {
        let out = cli(&[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{stderr}");
        assert!(out.stdout.is_empty());
        assert!(stderr.contains("--min-layer landlock"), "{stderr}");
        &["--min-layer", "landlock"]
    } else {
        &[]
    };
    let out = cli(floor);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert!(
        stderr.contains("warning") && stderr.contains("No space left on device"),
        "{stderr}"
    );
    assert!(stderr.contains("running on layer `landlock`"), "{stderr}");
    let out = cli(&["--fallback", "refuse"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("`full` is not available") && stderr.contains("No space left"),
        "{stderr}"
    );
}

/// Without a user namespace the program would keep what capabilities its caller has: a
/// user's ambient ones too (a service manager's `AmbientCapabilities=`), with which
/// `CAP_FOWNER` chmods any file it names. Layer 2 empties every set it may (a user cannot
/// drop from its bounding set; `no_new_privs` keeps an `execve` from using it).
#[test]
fn root_only_layer_two_drops_the_callers_ambient_capabilities() {
    require!(Feature::Root);
    require!(Feature::Setpriv);
    let (_d, ws) = common::var_tempdir();
    nix::unistd::chown(&ws, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let caps = |cmd: &[&str]| {
        let out = StdCommand::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .args(["--inh-caps", "+fowner", "--ambient-caps", "+fowner"])
            .args(cmd)
            .current_dir(&ws)
            .output()
            .unwrap();
        let text = common::output_text(&out);
        assert!(out.status.success(), "{text}");
        text.lines()
            .filter_map(|l| l.split_once(":\t"))
            .filter(|(k, _)| ["CapInh", "CapPrm", "CapEff", "CapAmb"].contains(k))
            .map(|(k, v)| (k.to_string(), u64::from_str_radix(v.trim(), 16).unwrap()))
            .collect::<Vec<_>>()
    };
    // The control: the caller itself holds CAP_FOWNER (bit 3) in every set.
    let outside = caps(&["grep", "^Cap", "/proc/self/status"]);
    assert_eq!(outside.len(), 4, "{outside:?}");
    assert!(outside.iter().all(|(_, v)| *v == 1 << 3), "{outside:?}");
    // A copy uid 65534 can run (the build may sit under root's home).
    let bin = common::tempdir();
    let exe = bin.path().join("stockade");
    std::fs::copy(common::stockade_exe(), &exe).unwrap();
    let ws_arg = ws.to_str().unwrap();
    for layer in ["landlock", "full"] {
        let inside = caps(&[
            exe.to_str().unwrap(),
            "run",
            "--workspace",
            ws_arg,
            "--layer",
            layer,
            "--",
            "grep",
            "^Cap",
            "/proc/self/status",
        ]);
        assert_eq!(inside.len(), 4, "{layer}: {inside:?}");
        assert!(inside.iter().all(|(_, v)| *v == 0), "{layer}: {inside:?}");
    }
}

/// Landlock follows mounts: a file reached through a host bind mount of a read-only root
/// is allowed by any layer that grants a directory above the mount. A root host's layer 2
/// grants its read-only roots entry by entry around private files, in a layer shared by
/// its commands; that layer must grant no directory wider than the one ruleset it stands
/// for, or a bind of `/etc` beside the workspace would show `/etc/shadow` through it.
#[test]
fn root_only_layer_two_reads_no_private_file_through_a_host_bind_mount() {
    require!(Feature::Root);
    let (_d, top) = common::var_tempdir();
    let (ws, etc) = (top.join("ws"), top.join("etc-bind"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&etc).unwrap();
    let inside = format!(
        "for f in /etc/shadow {e}/shadow {e}/passwd; do head -c1 $f >/dev/null 2>&1; echo $?; done",
        e = etc.display()
    );
    let out = run_with_etc_bound_at(&etc, &ws, &inside, None);
    let text = common::output_text(&out);
    assert!(out.status.success(), "{text}");
    // Private through either path; a public file through the bind still readable.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n1\n0\n", "{text}");
}

/// The same bind, beneath the host's temporary directory, where each command's `TMPDIR` is
/// made: the layer a root host's commands share grants only the sandbox's own directory
/// there (which holds their `TMPDIR`s), so `/etc/shadow` stays out of reach through the
/// bind, while the command's own `TMPDIR` stays writable. And the run leaves the
/// temporary directory as it found it.
#[test]
fn root_only_layer_two_reads_no_private_file_through_a_bind_beneath_the_temporary_directory() {
    require!(Feature::Root);
    let (_d, top) = common::var_tempdir();
    let (ws, tmp) = (top.join("ws"), top.join("tmp"));
    let etc = tmp.join("etc-bind");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&etc).unwrap();
    let inside = format!(
        "for f in {e}/shadow /etc/shadow; do head -c1 $f >/dev/null 2>&1; echo $?; done; \
         echo x > \"$TMPDIR/mine\" && cat \"$TMPDIR/mine\"; \
         case $TMPDIR in {t}/*/*) echo nested;; esac",
        e = etc.display(),
        t = tmp.display()
    );
    let out = run_with_etc_bound_at(&etc, &ws, &inside, Some(&tmp));
    let text = common::output_text(&out);
    assert!(out.status.success(), "{text}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1\n1\nx\nnested\n",
        "{text}"
    );
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["etc-bind"], "the run left {left:?} behind");
}

extern "C" fn host_handler(_: libc::c_int) {}

/// The host's signal dispositions never reach the program: neither a handler (which would
/// run on the host's memory if the signal came before `execve`) nor an ignored signal
/// (`SIG_IGN` survives `execve`). The setup child resets only the dispositions that its
/// own `/proc/self/status` lists as not the default, so this sets some the host would not
/// (a real-time signal, one the kernel ignores by default) besides the usual ones.
#[test]
fn the_hosts_signal_dispositions_never_reach_the_program() {
    // Harmless for the other tests of this process: nobody sends these.
    let ignored = [libc::SIGUSR2, libc::SIGTTOU, libc::SIGRTMIN() + 10, 64];
    let caught = [libc::SIGURG, libc::SIGWINCH, libc::SIGRTMIN() + 11];
    for sig in ignored {
        // SAFETY: SIG_IGN for a signal nothing in this test process relies on.
        assert_ne!(unsafe { libc::signal(sig, libc::SIG_IGN) }, libc::SIG_ERR);
    }
    for sig in caught {
        // SAFETY: a handler that does nothing, for a signal nothing in this process sends.
        let old = unsafe { libc::signal(sig, host_handler as *const () as libc::sighandler_t) };
        assert_ne!(old, libc::SIG_ERR);
    }
    // The control: the host's own status lists them.
    let host = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |text: &str, key: &str| {
        let line = text.lines().find(|l| l.starts_with(key)).unwrap();
        u64::from_str_radix(line.split_once(":\t").unwrap().1.trim(), 16).unwrap()
    };
    for sig in ignored {
        assert_ne!(field(&host, "SigIgn") & 1 << (sig - 1), 0, "{sig}\n{host}");
    }
    for sig in caught {
        assert_ne!(field(&host, "SigCgt") & 1 << (sig - 1), 0, "{sig}\n{host}");
    }
    let dir = tempdir();
    let mut sandboxes = both_layers(dir.path(), |_| {});
    sandboxes.push((
        Layer::Passthrough,
        sandbox(dir.path(), |p| p.mode = stockade::Mode::Disabled),
    ));
    for (layer, sb) in sandboxes {
        let out = sb.command("cat").arg("/proc/self/status").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{layer}: {text}");
        assert_eq!(field(&text, "SigIgn"), 0, "{layer}: {text}");
        assert_eq!(field(&text, "SigCgt"), 0, "{layer}: {text}");
        assert_eq!(field(&text, "SigBlk"), 0, "{layer}: {text}");
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some()
        || std::env::var_os("STOCKADE_TEST_LAYER2_INNER").is_some()
        || std::env::var_os("STOCKADE_TEST_PROC_INNER").is_some()
    {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}

#[test]
fn proc_fallback_in_a_nested_container() {
    require!(Feature::UserNs);
    if std::env::var_os("STOCKADE_TEST_PROC_INNER").is_some() {
        return;
    }
    // A mount over a file in /proc, as container runtimes make (/proc/kcore, /proc/kmsg):
    // the kernel then refuses a fresh procfs in any user namespace below. Each scenario is
    // a fresh process, so that its first spawn is the one that finds out.
    for scenario in ["refuse", "degrade", "proc_fallback"] {
        run_inner(
            "-Urm",
            "mount --bind /dev/null /proc/kmsg",
            "proc_fallback_inner",
            ("STOCKADE_TEST_PROC_INNER", scenario),
        );
    }
}

/// The inside half of `proc_fallback_in_a_nested_container`, one scenario per process
/// (`STOCKADE_TEST_PROC_INNER`).
#[test]
fn proc_fallback_inner() {
    let Ok(scenario) = std::env::var("STOCKADE_TEST_PROC_INNER") else {
        return;
    };
    let ws = tempdir();
    let mut p = Policy::with_workspace(ws.path());
    let sb = match scenario.as_str() {
        "refuse" => {
            p.fallback = stockade::Fallback::Refuse;
            let sb = Sandbox::new(p.clone()).unwrap();
            let err = sb.command("true").status().unwrap_err();
            let e = err.to_string();
            assert!(
                e.contains("proc_fallback") && e.contains("mount proc /proc"),
                "{e}"
            );
            // Known now: creating the sandbox fails at once.
            let err = Sandbox::new(p).unwrap_err();
            assert!(err.to_string().contains("proc_fallback"), "{err}");
            let caps = stockade::Capabilities::probe();
            assert!(caps.user_namespaces.available);
            assert!(!caps.fresh_proc.available);
            return;
        }
        "degrade" => {
            // Degrading by default: layer 2, found at the first spawn (a root host says
            // how far, see `root_refuses_layer_two_unless_told`).
            if host_root() {
                p.min_layer = Some(Layer::Landlock);
            }
            let sb = Sandbox::new(p).unwrap();
            assert_eq!(sb.layer(), Layer::Full);
            py_ok(&sb, "print(1)");
            assert_eq!(sb.layer(), Layer::Landlock);
            let d = sb.degradation().expect("degradation is data");
            assert_eq!((d.wanted, d.running), (Layer::Full, Layer::Landlock));
            assert!(d.reason.contains("fresh /proc"), "{}", d.reason);
            assert!(d.reason.contains("mount proc /proc"), "{}", d.reason);
            return;
        }
        "proc_fallback" => {
            // Allowed by the policy: the full layer with the host's /proc, read-only.
            p.proc_fallback = true;
            let sb = Sandbox::new(p).unwrap();
            assert_eq!(sb.degradation(), None, "nothing is known before a spawn");
            sb
        }
        other => panic!("unknown scenario {other}"),
    };
    let r = py_ok(
        &sb,
        &try_errno("open('/proc/sys/kernel/hostname', 'w').write('x')"),
    );
    assert_eq!(r.trim(), "EROFS");
    assert_eq!(sb.layer(), Layer::Full);
    let d = sb.degradation().expect("the host's /proc is said");
    assert_eq!((d.wanted, d.running), (Layer::Full, Layer::Full));
    assert!(
        d.reason.contains("mount proc /proc") && d.reason.contains("proc_fallback"),
        "{}",
        d.reason
    );
    let r = py_ok(&sb, &try_errno("open('/proc/self/status').read()"));
    assert_eq!(r.trim(), "OK");
}

/// Runs the test `inner` of this binary in a new user namespace made by `unshare
/// unshare_flags`, after `setup` (a shell command) ran there, with the variable `marker`
/// set to its value, and asserts that it passed.
fn run_inner(unshare_flags: &str, setup: &str, inner: &str, marker: (&str, &str)) {
    let exe = std::env::current_exe().unwrap();
    let out = StdCommand::new("unshare")
        .args([unshare_flags, "sh", "-c"])
        .arg(format!(
            "{setup} && exec \"$0\" --exact {inner} --nocapture --test-threads 1"
        ))
        .arg(&exe)
        .env(marker.0, marker.1)
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(out.status.success(), "{}: {text}", marker.1);
    assert!(text.contains("1 passed"), "{}: {text}", marker.1);
}

/// `stockade run --layer landlock -- sh -c inside` over `ws`, with the host's `/etc` bound
/// at `etc` in a mount namespace of the test's own (as a host's bind would be), and
/// `TMPDIR` set to `tmp` when given.
fn run_with_etc_bound_at(
    etc: &Path,
    ws: &Path,
    inside: &str,
    tmp: Option<&Path>,
) -> std::process::Output {
    let mut cmd = StdCommand::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount --bind /etc {etc} && exec \"$0\" run --workspace {ws} --layer landlock \
             --min-layer landlock -- sh -c \"$1\"",
            etc = etc.display(),
            ws = ws.display()
        ))
        .arg(common::stockade_exe())
        .arg(inside);
    if let Some(tmp) = tmp {
        cmd.env("TMPDIR", tmp);
    }
    cmd.output().unwrap()
}

/// NUMA-aware programs run unbound: they ask the kernel for the memory policy, take the
/// `EPERM` as "no NUMA" and carry on. A C program in the style of libnuma's
/// `numa_available()` on both layers, and `numactl` itself where it is installed.
#[test]
fn numa_aware_programs_run_unbound_on_both_layers() {
    require!(Feature::UserNs);
    let ws = fixture_dir();
    std::fs::write(
        ws.path().join("numa.c"),
        "#include <errno.h>\n#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\n#include <sys/syscall.h>\n\
         int main(void) {\n\
           int mode = -1;\n\
           if (syscall(SYS_get_mempolicy, &mode, 0, 0, 0, 0) == 0) printf(\"policy %d\\n\", mode);\n\
           else printf(\"unbound (%s)\\n\", strerror(errno));\n\
           long sum = 0; for (int i = 0; i < 1000; i++) sum += i;\n\
           printf(\"%ld\\n\", sum);\n\
           return 0;\n\
         }\n",
    )
    .unwrap();
    let numactl = Path::new("/usr/bin/numactl").exists();
    if !numactl {
        assert!(
            !common::required_name("numactl"),
            "numactl not installed (apt-get install numactl), and STOCKADE_TEST_REQUIRE demands it"
        );
        common::skip(
            "numa_aware_programs_run_unbound_on_both_layers",
            "numactl not installed (apt-get install numactl): only the C program runs",
        );
    }
    let w = std::fs::canonicalize(ws.path()).unwrap();
    for (layer, sb) in both_layers(&w, |_| {}) {
        let out = sh_ok(
            &sb,
            &format!("cd {} && cc -o numa numa.c && ./numa", w.display()),
        );
        assert_eq!(
            out, "unbound (Operation not permitted)\n499500\n",
            "{layer:?}"
        );
        if numactl {
            let out = sh(&sb, "numactl --show 2>/dev/null; echo rc=$?");
            let text = common::output_text(&out);
            // It warns about each refused query and shows the default policy.
            assert!(
                text.contains("policy: default") && text.ends_with("rc=0\n"),
                "{layer:?}: {text}"
            );
        }
    }
}

/// A read-only directory of the policy under `/dev` keeps its own access on the full
/// layer: its FIFO opens for reading but not for writing (`EACCES`, Landlock), although
/// the sandbox's own device nodes stay writable. One device rule on the whole of the
/// sandbox's `/dev` covered such a directory too, and a program wrote into a host FIFO
/// it was given to read (found by review of stop 26's cut). Root only: `/dev` is root's.
#[test]
fn root_only_a_read_only_fifo_under_dev_is_not_opened_for_writing() {
    require!(Feature::UserNs);
    require!(Feature::Root);
    let dir = tempfile::Builder::new()
        .prefix("stockade-test-")
        .tempdir_in("/dev")
        .expect("a directory under /dev");
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    let ws = fixture_dir();
    let sb = sandbox(ws.path(), |p| {
        p.layer = Some(Layer::Full);
        p.read_only = vec![dir.path().to_path_buf()];
    });
    let code = format!(
        "import os\nf = {f:?}\n\
         r = os.open(f, os.O_RDONLY | os.O_NONBLOCK)\n\
         try:\n    os.open(f, os.O_WRONLY | os.O_NONBLOCK); print('opened')\n\
         except OSError as e: print(os.strerror(e.errno))\n\
         open('/dev/null', 'w').write('x'); print('null ok')",
        f = fifo.display().to_string()
    );
    assert_eq!(py_ok(&sb, &code).trim(), "Permission denied\nnull ok");
}
