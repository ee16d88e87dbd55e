//! The seccomp filter, proven on real processes: each case forks, the child installs the
//! filter and makes one system call, and exits with its errno (0 on success). Every denied
//! call is also made once without the filter (the control), with arguments chosen so that it
//! fails harmlessly with some other errno: a case whose control already returns the errno
//! the filter would return proves nothing, and fails the test.
//!
//! Without root, most of these calls fail the kernel's capability check with `EPERM`
//! before the arguments are looked at. So an unprivileged run makes both halves of each
//! case in a fresh user and mount namespace, where the calls that check capabilities over
//! the caller's own namespaces (the mount family, `unshare`, `setns`) get past that check;
//! the cases whose control still returns `EPERM` there (the calls that need the initial
//! namespace's capabilities: modules, kexec, clocks, reboot, swap, …) cannot be told from
//! the kernel's refusal. They are named in a `SKIP … needs root` line, and fail the test
//! when `STOCKADE_TEST_REQUIRE` lists `root`; the root run proves them all.
#![cfg(target_os = "linux")]

mod common;

use std::ffi::CStr;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};

use stockade::backend::linux::seccomp::{self, Filter, FilterOptions};
use stockade_sys::linux as sys;

/// Every test that forks holds this, so no two forks interleave with each other's waits.
static FORK_MTX: Mutex<()> = Mutex::new(());

fn fork_lock() -> MutexGuard<'static, ()> {
    FORK_MTX.lock().unwrap_or_else(|e| e.into_inner())
}

/// Returns false (after printing `SKIP`) when seccomp filters are unavailable, or panics when
/// `STOCKADE_TEST_REQUIRE` demands them.
fn require_seccomp(test: &str) -> bool {
    match sys::prctl_get_seccomp() {
        Ok(_) => true,
        Err(e) => {
            let reason = format!("prctl(PR_GET_SECCOMP): errno {}", e.raw());
            let required = common::required_name("seccomp");
            assert!(
                !required,
                "{test}: seccomp required but unavailable: {reason}"
            );
            let _ = writeln!(std::io::stderr().lock(), "SKIP {test}: {reason}");
            false
        }
    }
}

/// How a forked child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// `_exit(code)`: the errno of the call, or 0.
    Exit(i32),
    /// Killed by this signal.
    Signal(i32),
}

const OK: Outcome = Outcome::Exit(0);
const EPERM: Outcome = Outcome::Exit(libc::EPERM);

/// Exit codes of the child's own setup, out of the errno range the cases use.
const SETUP_NNP: i32 = 250;
const SETUP_FILTER: i32 = 251;
const SETUP_UNSHARE: i32 = 252;

/// Forks; the child installs `filter` (if any) after `PR_SET_NO_NEW_PRIVS`, runs `body` and
/// exits with its result. Core dumps are off in the child: a kill by seccomp would dump.
fn in_child(filter: Option<&Filter>, body: impl FnOnce() -> i32) -> Outcome {
    let programs: Vec<&[libc::sock_filter]> =
        filter.map(Filter::instructions).into_iter().collect();
    in_child_ns(false, &programs, body)
}

/// Like [`in_child`], installing each program of `programs` in order (the last one installed
/// is the first the kernel runs).
fn in_child_under(programs: &[&[libc::sock_filter]], body: impl FnOnce() -> i32) -> Outcome {
    in_child_ns(false, programs, body)
}

/// As [`in_child_under`]; with `userns` the child first enters a new user and mount
/// namespace (before the filters, which deny `unshare`).
fn in_child_ns(
    userns: bool,
    programs: &[&[libc::sock_filter]],
    body: impl FnOnce() -> i32,
) -> Outcome {
    let _guard = fork_lock();
    // SAFETY: the child only makes system calls and runs `body`, which the tests keep to
    // system calls (the thread test allocates: glibc's fork resets the allocator's locks in
    // the child), then exits without returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `no_core` is a valid rlimit that outlives the call.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
        let new_ns = (libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as usize;
        if userns && errno_of(libc::SYS_unshare, [new_ns, 0, 0, 0, 0, 0]) != 0 {
            sys::exit_group(SETUP_UNSHARE);
        }
        if !programs.is_empty() && sys::prctl_set_no_new_privs().is_err() {
            sys::exit_group(SETUP_NNP);
        }
        for program in programs {
            // SAFETY: the programs of these tests answer with ALLOW, KILL_PROCESS or ERRNO
            // of a non-zero errno (stockade's filter, the EXDEV marker): no call reports a
            // success it did not have. The child only runs `body` and exits.
            if unsafe { sys::seccomp_set_mode_filter(0, program) }.is_err() {
                sys::exit_group(SETUP_FILTER);
            }
        }
        sys::exit_group(body());
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
    if libc::WIFSIGNALED(status) {
        Outcome::Signal(libc::WTERMSIG(status))
    } else {
        Outcome::Exit(libc::WEXITSTATUS(status))
    }
}

/// Issues system call `nr` and returns its errno, or 0 on success.
fn errno_of(nr: libc::c_long, args: [usize; 6]) -> i32 {
    // SAFETY: the cases pass NULL, small integers or pointers to live statics and locals;
    // the kernel validates user pointers and fails with EFAULT, so no argument can make it
    // write into memory that Rust owns except where a case means it to.
    let ret = unsafe { sys::syscall6(nr, args) };
    if (-4095..0).contains(&ret) {
        i32::try_from(-ret).unwrap_or(i32::MAX)
    } else {
        0
    }
}

fn cstr(s: &'static CStr) -> usize {
    s.as_ptr() as usize
}

/// One denied system call with harmless arguments.
struct Case {
    name: &'static str,
    nr: libc::c_long,
    args: [usize; 6],
}

fn case(name: &'static str, nr: libc::c_long, args: [usize; 6]) -> Case {
    Case { name, nr, args }
}

/// Runs `cases` with and without `filter`: with it, each must end as `want`; without it,
/// each must end otherwise (else the case cannot tell the filter from the kernel). Without
/// root, both runs are made in a new user and mount namespace, and a case whose control
/// still ends as `want` is reported as needing root (see the module docs).
fn check_cases(test: &str, filter: &Filter, cases: &[Case], want: Outcome) {
    let root = nix::unistd::geteuid().is_root();
    // Where user namespaces are denied, the unprivileged run proves fewer cases.
    let userns = !root && in_child_ns(true, &[], || 0) == OK;
    let mut failures = Vec::new();
    let mut need_root = Vec::new();
    for c in cases {
        let control = in_child_ns(userns, &[], || errno_of(c.nr, c.args));
        let filtered = in_child_ns(userns, &[filter.instructions()], || errno_of(c.nr, c.args));
        if control == want && root {
            failures.push(format!("{}: control run already gives {control:?}", c.name));
        } else if control == want {
            need_root.push(c.name);
        }
        if filtered != want {
            failures.push(format!("{}: filtered {filtered:?}, want {want:?}", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if !need_root.is_empty() {
        let what = match want {
            Outcome::Exit(e) => std::io::Error::from_raw_os_error(e).to_string(),
            Outcome::Signal(s) => format!("signal {s}"),
        };
        let reason = format!(
            "needs root: without it the kernel itself refuses {} ({what}), so the filter's refusal cannot be told apart (the other {} cases are proven)",
            need_root.join(", "),
            cases.len() - need_root.len()
        );
        assert!(!common::required_name("root"), "{test}: {reason}");
        let _ = writeln!(std::io::stderr().lock(), "SKIP {test} (in part): {reason}");
    }
}

fn default_filter() -> Filter {
    seccomp::build(&FilterOptions::default()).expect("build the filter")
}

const NOWHERE: &CStr = c"/nonexistent-stockade-seccomp-test";

#[test]
fn listed_calls_fail_with_eperm() {
    if !require_seccomp("listed_calls_fail_with_eperm") {
        return;
    }
    let filter = default_filter();
    let bad = usize::MAX; // an invalid flag word or fd
    let ebadf = usize::MAX; // fd -1
    #[rustfmt::skip]
    let cases = [
        case("ptrace", libc::SYS_ptrace, [libc::PTRACE_TRACEME as usize, 0, 0, 0, 0, 0]),
        case("process_vm_readv", libc::SYS_process_vm_readv, [sys::getpid() as usize, 0, 0, 0, 0, 0]),
        case("process_vm_writev", libc::SYS_process_vm_writev, [sys::getpid() as usize, 0, 0, 0, 0, 0]),
        case("kexec_load", libc::SYS_kexec_load, [0, 0, 0, bad, 0, 0]),
        case("kexec_file_load", libc::SYS_kexec_file_load, [ebadf, ebadf, 0, 0, bad, 0]),
        case("init_module", libc::SYS_init_module, [0, 0, 0, 0, 0, 0]),
        case("finit_module", libc::SYS_finit_module, [ebadf, cstr(c""), 0, 0, 0, 0]),
        case("delete_module", libc::SYS_delete_module, [cstr(c"stockade_no_such_module"), 0, 0, 0, 0, 0]),
        case("bpf", libc::SYS_bpf, [0xffff, 0, 0, 0, 0, 0]),
        case("perf_event_open", libc::SYS_perf_event_open, [0, 0, ebadf, ebadf, 0, 0]),
        case("userfaultfd", libc::SYS_userfaultfd, [0xffff, 0, 0, 0, 0, 0]),
        case("keyctl", libc::SYS_keyctl, [0xffff, 0, 0, 0, 0, 0]),
        case("add_key", libc::SYS_add_key, [0, 0, 0, 0, 0, 0]),
        case("request_key", libc::SYS_request_key, [0, 0, 0, 0, 0, 0]),
        case("mount", libc::SYS_mount, [0, 0, 0, 0, 0, 0]),
        case("umount2", libc::SYS_umount2, [cstr(NOWHERE), 0, 0, 0, 0, 0]),
        case("pivot_root", libc::SYS_pivot_root, [0, 0, 0, 0, 0, 0]),
        case("move_mount", libc::SYS_move_mount, [ebadf, cstr(NOWHERE), ebadf, cstr(NOWHERE), 0, 0]),
        case("open_tree", libc::SYS_open_tree, [ebadf, cstr(NOWHERE), 0, 0, 0, 0]),
        case("open_tree_attr", 467, [ebadf, cstr(NOWHERE), 0, 0, 0, 0]),
        case("fsopen", libc::SYS_fsopen, [cstr(c"stockade-no-such-fs"), 0, 0, 0, 0, 0]),
        case("fsmount", libc::SYS_fsmount, [ebadf, 0, 0, 0, 0, 0]),
        case("fsconfig", libc::SYS_fsconfig, [ebadf, 0, 0, 0, 0, 0]),
        case("fspick", libc::SYS_fspick, [ebadf, cstr(NOWHERE), 0, 0, 0, 0]),
        case("mount_setattr", libc::SYS_mount_setattr, [ebadf, cstr(NOWHERE), 0, 0, 0, 0]),
        case("unshare", libc::SYS_unshare, [0, 0, 0, 0, 0, 0]),
        case("setns", libc::SYS_setns, [ebadf, 0, 0, 0, 0, 0]),
        case("reboot", libc::SYS_reboot, [0, 0, 0, 0, 0, 0]),
        case("swapon", libc::SYS_swapon, [0, 0, 0, 0, 0, 0]),
        case("swapoff", libc::SYS_swapoff, [0, 0, 0, 0, 0, 0]),
        case("acct", libc::SYS_acct, [cstr(c"/nonexistent-stockade-seccomp-test/acct"), 0, 0, 0, 0, 0]),
        case("quotactl", libc::SYS_quotactl, [0, 0, 0, 0, 0, 0]),
        case("quotactl_fd", libc::SYS_quotactl_fd, [ebadf, 0, 0, 0, 0, 0]),
        case("settimeofday", libc::SYS_settimeofday, [1, 0, 0, 0, 0, 0]),
        case("clock_settime", libc::SYS_clock_settime, [libc::CLOCK_REALTIME as usize, 0, 0, 0, 0, 0]),
        case("clock_adjtime", libc::SYS_clock_adjtime, [libc::CLOCK_REALTIME as usize, 0, 0, 0, 0, 0]),
        case("adjtimex", libc::SYS_adjtimex, [0, 0, 0, 0, 0, 0]),
        case("open_by_handle_at", libc::SYS_open_by_handle_at, [ebadf, 0, 0, 0, 0, 0]),
        case("name_to_handle_at", libc::SYS_name_to_handle_at, [ebadf, 0, 0, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        case("iopl", libc::SYS_iopl, [4, 0, 0, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        case("ioperm", libc::SYS_ioperm, [0, 0, 0, 0, 0, 0]),
        case("io_uring_setup", libc::SYS_io_uring_setup, [0, 0, 0, 0, 0, 0]),
        case("io_uring_enter", libc::SYS_io_uring_enter, [ebadf, 0, 0, 0, 0, 0]),
        case("io_uring_register", libc::SYS_io_uring_register, [ebadf, 0, 0, 0, 0, 0]),
        // Invalid flags: EINVAL (ENOSYS without NUMA).
        case("move_pages", libc::SYS_move_pages, [0, 0, 0, 0, 0, bad]),
        // old_nodes at address 1: EFAULT (ENOSYS without NUMA).
        case("migrate_pages", libc::SYS_migrate_pages, [0, 64, 1, 1, 0, 0]),
        // NUMA memory policy, invalid flags or mode: EINVAL (ENOSYS without NUMA).
        case("mbind", libc::SYS_mbind, [0, 0, 0, 0, 0, bad]),
        case("set_mempolicy", libc::SYS_set_mempolicy, [0xffff, 0, 0, 0, 0, 0]),
        case("get_mempolicy", libc::SYS_get_mempolicy, [0, 0, 0, 0, bad, 0]),
        case("set_mempolicy_home_node", libc::SYS_set_mempolicy_home_node, [0, 0, 0, bad, 0, 0]),
        // FAN_REPORT_FID (allowed without privilege) plus an unknown flag: EINVAL.
        case("fanotify_init", libc::SYS_fanotify_init, [0x200 | 0x4000_0000, 0, 0, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        case("modify_ldt", libc::SYS_modify_ldt, [0xff, 0, 0, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        case("uselib", libc::SYS_uselib, [cstr(NOWHERE), 0, 0, 0, 0, 0]),
        case("kcmp", libc::SYS_kcmp, [sys::getpid() as usize, sys::getpid() as usize, 0xff, 0, 0, 0]),
        case("pidfd_getfd", libc::SYS_pidfd_getfd, [ebadf, 0, 0, 0, 0, 0]),
        case("process_madvise", libc::SYS_process_madvise, [ebadf, 0, 0, 0, 0, 0]),
    ];
    check_cases("listed_calls_fail_with_eperm", &filter, &cases, EPERM);
}

#[test]
fn syslog_is_denied() {
    if !require_seccomp("syslog_is_denied") {
        return;
    }
    let filter = default_filter();
    // SYSLOG_ACTION_SIZE_BUFFER: harmless, and allowed to root even with dmesg_restrict.
    let size = || errno_of(libc::SYS_syslog, [10, 0, 0, 0, 0, 0]);
    assert_eq!(in_child(Some(&filter), size), EPERM);
    if nix::unistd::geteuid().is_root() {
        assert_eq!(in_child(None, size), OK);
    }
}

#[test]
fn clone_with_any_namespace_flag_is_denied() {
    if !require_seccomp("clone_with_any_namespace_flag_is_denied") {
        return;
    }
    let filter = default_filter();
    // CLONE_SIGHAND without CLONE_VM makes the kernel refuse with EINVAL before it creates
    // anything, so the control run cannot spawn a process or a namespace.
    let flags = [
        ("CLONE_NEWNS", libc::CLONE_NEWNS),
        ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP),
        ("CLONE_NEWUTS", libc::CLONE_NEWUTS),
        ("CLONE_NEWIPC", libc::CLONE_NEWIPC),
        ("CLONE_NEWUSER", libc::CLONE_NEWUSER),
        ("CLONE_NEWPID", libc::CLONE_NEWPID),
        ("CLONE_NEWNET", libc::CLONE_NEWNET),
    ];
    let cases: Vec<Case> = flags
        .iter()
        .map(|&(name, f)| {
            let word = (f | libc::CLONE_SIGHAND) as u32 as usize;
            case(name, libc::SYS_clone, [word, 0, 0, 0, 0, 0])
        })
        .collect();
    check_cases(
        "clone_with_any_namespace_flag_is_denied",
        &filter,
        &cases,
        EPERM,
    );

    // The same invalid combination without a namespace flag passes the filter (EINVAL).
    let plain = libc::CLONE_SIGHAND as u32 as usize;
    let out = in_child(Some(&filter), || {
        errno_of(libc::SYS_clone, [plain, 0, 0, 0, 0, 0])
    });
    assert_eq!(out, Outcome::Exit(libc::EINVAL));
}

#[test]
fn clone3_fails_with_enosys_and_threads_still_start() {
    if !require_seccomp("clone3_fails_with_enosys_and_threads_still_start") {
        return;
    }
    let filter = default_filter();
    // A NULL clone_args of size 0: EINVAL from the kernel, ENOSYS from the filter.
    let cases = [case("clone3", libc::SYS_clone3, [0, 0, 0, 0, 0, 0])];
    check_cases(
        "clone3_fails_with_enosys_and_threads_still_start",
        &filter,
        &cases,
        Outcome::Exit(libc::ENOSYS),
    );

    // pthread_create tries clone3, gets ENOSYS and falls back to clone without CLONE_NEW*.
    let out = in_child(Some(&filter), || match std::thread::spawn(|| 42).join() {
        Ok(42) => 0,
        _ => 99,
    });
    assert_eq!(out, OK);
}

#[test]
fn ordinary_calls_still_work() {
    if !require_seccomp("ordinary_calls_still_work") {
        return;
    }
    let filter = default_filter();
    let dir = tempfile::tempdir().unwrap();
    let path =
        std::ffi::CString::new(dir.path().join("f").into_os_string().into_encoded_bytes()).unwrap();

    let out = in_child(Some(&filter), || {
        if sys::getpid() <= 0 {
            return 90;
        }
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC;
        let Ok(fd) = sys::openat(sys::CWD, &path, flags, 0o600) else {
            return 91;
        };
        if sys::write(fd.as_fd(), b"stockade") != Ok(8) {
            return 92;
        }
        let Ok(fd2) = sys::openat(sys::CWD, &path, libc::O_RDONLY, 0) else {
            return 93;
        };
        let mut buf = [0u8; 16];
        if sys::read(fd2.as_fd(), &mut buf) != Ok(8) || &buf[..8] != b"stockade" {
            return 94;
        }
        0
    });
    assert_eq!(out, OK);

    // TIOCGWINSZ on a real terminal (a pty master) passes the ioctl rule.
    let ptmx = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/ptmx")
        .unwrap();
    let fd = ptmx.as_raw_fd() as usize;
    let out = in_child(Some(&filter), || {
        let mut ws = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let p = std::ptr::from_mut(&mut ws) as usize;
        errno_of(libc::SYS_ioctl, [fd, libc::TIOCGWINSZ as usize, p, 0, 0, 0])
    });
    assert_eq!(out, OK);
}

#[test]
fn terminal_injection_ioctls_are_denied_even_with_high_bits() {
    if !require_seccomp("terminal_injection_ioctls_are_denied_even_with_high_bits") {
        return;
    }
    let filter = default_filter();
    // On /dev/null both ioctls fail harmlessly with ENOTTY in the control run.
    let null = std::fs::File::open("/dev/null").unwrap();
    let fd = null.as_raw_fd() as usize;
    let byte = c"x".as_ptr() as usize;
    let sti = libc::TIOCSTI as usize;
    let linux = libc::TIOCLINUX as usize;
    // The kernel takes `unsigned int cmd`, so these are still TIOCSTI to it.
    let high = 0xdead_beef_0000_0000usize;
    let cases = [
        case("TIOCSTI", libc::SYS_ioctl, [fd, sti, byte, 0, 0, 0]),
        case(
            "TIOCSTI|high",
            libc::SYS_ioctl,
            [fd, sti | high, byte, 0, 0, 0],
        ),
        case("TIOCLINUX", libc::SYS_ioctl, [fd, linux, byte, 0, 0, 0]),
        case(
            "TIOCLINUX|high",
            libc::SYS_ioctl,
            [fd, linux | high, byte, 0, 0, 0],
        ),
    ];
    check_cases(
        "terminal_injection_ioctls_are_denied_even_with_high_bits",
        &filter,
        &cases,
        EPERM,
    );
    for c in &cases {
        assert_eq!(
            in_child(None, || errno_of(c.nr, c.args)),
            Outcome::Exit(libc::ENOTTY)
        );
    }
}

fn socket_errno(family: libc::c_int) -> i32 {
    match sys::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) {
        Ok(_) => 0,
        Err(e) => e.raw(),
    }
}

fn socket_dgram_errno(family: libc::c_int) -> i32 {
    match sys::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) {
        Ok(_) => 0,
        Err(e) => e.raw(),
    }
}

#[test]
fn vsock_is_denied_inet_and_unix_are_allowed() {
    if !require_seccomp("vsock_is_denied_inet_and_unix_are_allowed") {
        return;
    }
    let filter = default_filter();
    let vsock = in_child(Some(&filter), || socket_errno(libc::AF_VSOCK));
    assert_eq!(vsock, EPERM);
    assert_ne!(in_child(None, || socket_errno(libc::AF_VSOCK)), EPERM);
    for family in [libc::AF_INET, libc::AF_INET6, libc::AF_UNIX] {
        assert_eq!(
            in_child(Some(&filter), || socket_errno(family)),
            OK,
            "family {family}"
        );
    }
    let netlink = in_child(Some(&filter), || socket_dgram_errno(libc::AF_NETLINK));
    assert_eq!(netlink, OK);
}

#[test]
fn deny_network_allows_only_unix_sockets() {
    if !require_seccomp("deny_network_allows_only_unix_sockets") {
        return;
    }
    let opts = FilterOptions {
        deny_network: true,
        ..FilterOptions::default()
    };
    let filter = seccomp::build(&opts).unwrap();
    for family in [libc::AF_INET, libc::AF_INET6, libc::AF_VSOCK] {
        assert_eq!(
            in_child(Some(&filter), || socket_errno(family)),
            EPERM,
            "family {family}"
        );
    }
    for family in [libc::AF_INET, libc::AF_INET6] {
        assert_eq!(
            in_child(None, || socket_errno(family)),
            OK,
            "control, family {family}"
        );
    }
    let netlink = in_child(Some(&filter), || socket_dgram_errno(libc::AF_NETLINK));
    assert_eq!(netlink, EPERM);
    assert_eq!(in_child(None, || socket_dgram_errno(libc::AF_NETLINK)), OK);
    assert_eq!(in_child(Some(&filter), || socket_errno(libc::AF_UNIX)), OK);
    assert_eq!(
        in_child(Some(&filter), || socket_dgram_errno(libc::AF_UNIX)),
        OK
    );
}

/// `process_vm_readv` of 8 bytes of the caller's own memory: 0 on success.
fn read_own_memory() -> i32 {
    let src = [7u8; 8];
    let mut dst = [0u8; 8];
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: src.as_ptr().cast_mut().cast(),
        iov_len: src.len(),
    };
    let pid = sys::getpid() as usize;
    let l = std::ptr::from_ref(&local) as usize;
    let r = std::ptr::from_ref(&remote) as usize;
    match errno_of(libc::SYS_process_vm_readv, [pid, l, 1, r, 1, 0]) {
        0 if dst == src => 0,
        0 => 98,
        e => e,
    }
}

#[test]
fn allow_ptrace_lifts_ptrace_and_process_vm_denials() {
    if !require_seccomp("allow_ptrace_lifts_ptrace_and_process_vm_denials") {
        return;
    }
    let strict = default_filter();
    let lenient = seccomp::build(&FilterOptions {
        allow_ptrace: true,
        ..FilterOptions::default()
    })
    .unwrap();
    let traceme = || {
        errno_of(
            libc::SYS_ptrace,
            [libc::PTRACE_TRACEME as usize, 0, 0, 0, 0, 0],
        )
    };
    assert_eq!(in_child(Some(&strict), traceme), EPERM);
    assert_eq!(in_child(Some(&lenient), traceme), OK);
    assert_eq!(in_child(Some(&strict), read_own_memory), EPERM);
    assert_eq!(in_child(Some(&lenient), read_own_memory), OK);
    // Everything else stays denied.
    let mount = || errno_of(libc::SYS_mount, [0; 6]);
    assert_eq!(in_child(Some(&lenient), mount), EPERM);
}

/// `getpid` through the i386 entry point (`int 0x80`, number 20): 0 on success.
#[cfg(target_arch = "x86_64")]
fn i386_getpid() -> i32 {
    let ret: i64;
    // SAFETY: `int 0x80` with eax = 20 is i386 getpid, which takes no arguments and touches
    // no memory; the kernel preserves every register but rax on this entry, and r8-r11 are
    // declared clobbered for kernels that zeroed them.
    unsafe {
        core::arch::asm!(
            "int 0x80",
            inlateout("rax") 20i64 => ret,
            lateout("r8") _, lateout("r9") _, lateout("r10") _, lateout("r11") _,
            options(nostack),
        );
    }
    if ret > 0 {
        0
    } else {
        i32::try_from(-ret).unwrap_or(97)
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn i386_syscalls_kill_the_process() {
    if !require_seccomp("i386_syscalls_kill_the_process") {
        return;
    }
    let filter = default_filter();
    assert_eq!(
        in_child(Some(&filter), i386_getpid),
        Outcome::Signal(libc::SIGSYS)
    );
    // Without the filter the call works (ia32 emulation) or fails some other way; it is
    // never a SIGSYS kill, which only seccomp produces.
    assert_ne!(in_child(None, i386_getpid), Outcome::Signal(libc::SIGSYS));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn x32_syscalls_kill_the_process() {
    if !require_seccomp("x32_syscalls_kill_the_process") {
        return;
    }
    let filter = default_filter();
    let x32_getpid = || errno_of(0x4000_0000 | libc::SYS_getpid, [0; 6]);
    assert_eq!(
        in_child(Some(&filter), x32_getpid),
        Outcome::Signal(libc::SIGSYS)
    );
    assert_ne!(in_child(None, x32_getpid), Outcome::Signal(libc::SIGSYS));
    // The native getpid next to it is untouched.
    let getpid = || errno_of(libc::SYS_getpid, [0; 6]);
    assert_eq!(in_child(Some(&filter), getpid), OK);
}

/// A tracer skips a call by writing −1 as its number; programs probe with `syscall(-1)`.
/// Either way the kernel answers `ENOSYS`: the filter lets −1 through instead of killing.
#[test]
fn syscall_minus_one_fails_with_enosys_instead_of_a_kill() {
    if !require_seccomp("syscall_minus_one_fails_with_enosys_instead_of_a_kill") {
        return;
    }
    let minus_one = || errno_of(-1, [0; 6]);
    assert_eq!(in_child(None, minus_one), Outcome::Exit(libc::ENOSYS));
    for allow_ptrace in [false, true] {
        let filter = seccomp::build(&FilterOptions {
            allow_ptrace,
            ..FilterOptions::default()
        })
        .unwrap();
        assert_eq!(
            in_child(Some(&filter), minus_one),
            Outcome::Exit(libc::ENOSYS),
            "allow_ptrace {allow_ptrace}"
        );
    }
}

/// A one-rule filter that fails each of `marked` with `EXDEV` and allows the rest. Stacked
/// under stockade's filter it shows who decided: the kernel runs the newest filter first and
/// keeps, of equally ranked answers, the first one, so `EXDEV` comes out only when stockade's
/// filter allowed the call.
fn marker(marked: &[u32]) -> Vec<libc::sock_filter> {
    let ins = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: u16::try_from(code).unwrap(),
        jt,
        jf,
        k,
    };
    let mut p = vec![ins(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0)];
    for (i, &nr) in marked.iter().enumerate() {
        // On a match, jump over the remaining compares and the "allow" to the EXDEV return.
        let to_exdev = u8::try_from(marked.len() - i).unwrap();
        p.push(ins(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            to_exdev,
            0,
            nr,
        ));
    }
    p.push(ins(
        libc::BPF_RET | libc::BPF_K,
        0,
        0,
        libc::SECCOMP_RET_ALLOW,
    ));
    p.push(ins(
        libc::BPF_RET | libc::BPF_K,
        0,
        0,
        libc::SECCOMP_RET_ERRNO | libc::EXDEV as u32,
    ));
    p
}

/// On this kernel a number above `KNOWN_MAX` fails with `ENOSYS` with or without the filter;
/// the marker filter underneath shows that stockade's filter, not the kernel, answered.
#[test]
fn calls_newer_than_the_known_ones_fail_with_enosys_from_the_filter() {
    if !require_seccomp("calls_newer_than_the_known_ones_fail_with_enosys_from_the_filter") {
        return;
    }
    let filter = default_filter();
    let newer = [
        seccomp::KNOWN_MAX + 1,
        seccomp::KNOWN_MAX + 2,
        1000,
        0x3fff_ffff,
    ];
    let getppid = u32::try_from(libc::SYS_getppid).unwrap();
    let mut marked = newer.to_vec();
    marked.push(getppid);
    let marker = marker(&marked);
    let under: [&[libc::sock_filter]; 1] = [&marker];
    let both: [&[libc::sock_filter]; 2] = [&marker, filter.instructions()];
    for nr in newer {
        let call = || errno_of(libc::c_long::from(nr), [0; 6]);
        assert_eq!(in_child_under(&under, call), Outcome::Exit(libc::EXDEV));
        assert_eq!(
            in_child_under(&both, call),
            Outcome::Exit(libc::ENOSYS),
            "{nr}"
        );
    }
    // The method: a call stockade allows comes out as the marker's answer.
    let call = || errno_of(libc::SYS_getppid, [0; 6]);
    assert_eq!(in_child_under(&both, call), Outcome::Exit(libc::EXDEV));
}

#[test]
fn personality_allows_only_the_listed_personas() {
    if !require_seccomp("personality_allows_only_the_listed_personas") {
        return;
    }
    let filter = default_filter();
    // Without the filter each of these succeeds (in the forked child only).
    let cases = [
        case(
            "ADDR_NO_RANDOMIZE",
            libc::SYS_personality,
            [0x004_0000, 0, 0, 0, 0, 0],
        ),
        case(
            "READ_IMPLIES_EXEC",
            libc::SYS_personality,
            [0x040_0000, 0, 0, 0, 0, 0],
        ),
        case(
            "PER_LINUX32|ADDR_NO_RANDOMIZE",
            libc::SYS_personality,
            [0x004_0008, 0, 0, 0, 0, 0],
        ),
        case(
            "ADDR_LIMIT_3GB",
            libc::SYS_personality,
            [0x800_0000, 0, 0, 0, 0, 0],
        ),
    ];
    check_cases(
        "personality_allows_only_the_listed_personas",
        &filter,
        &cases,
        EPERM,
    );
    for persona in [0xffff_ffffusize, 0, 0x8, 0x2_0000, 0x2_0008] {
        let set = || errno_of(libc::SYS_personality, [persona, 0, 0, 0, 0, 0]);
        assert_eq!(in_child(Some(&filter), set), OK, "{persona:#x}");
    }
}

/// A C string of `p`.
fn c_path(p: &std::path::Path) -> std::ffi::CString {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
}

/// The mode of `p`'s inode, file type bits dropped.
fn mode_of(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn setuid_and_setgid_bits_cannot_be_set() {
    if !require_seccomp("setuid_and_setgid_bits_cannot_be_set") {
        return;
    }
    let filter = default_filter();
    // Outside /tmp, as users' workspaces are.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let file = d.join("f");
    std::fs::write(&file, "x").unwrap();
    let f = c_path(&file);
    let fd = std::fs::File::open(&file).unwrap();
    let fdn = fd.as_raw_fd() as usize;
    let dirfd = std::fs::File::open(d).unwrap();
    let dfd = dirfd.as_raw_fd() as usize;
    let names: Vec<std::ffi::CString> = (0..8).map(|i| c_path(&d.join(format!("n{i}")))).collect();
    let p = |s: &std::ffi::CString| s.as_ptr() as usize;
    let cwd = libc::AT_FDCWD as usize;
    let creat = (libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC) as usize;
    let tmpfile = (libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC) as usize;
    let reg = libc::S_IFREG as usize;
    #[rustfmt::skip]
    let cases = [
        case("fchmod 4755", libc::SYS_fchmod, [fdn, 0o4755, 0, 0, 0, 0]),
        case("fchmodat 2755", libc::SYS_fchmodat, [cwd, p(&f), 0o2755, 0, 0, 0]),
        case("fchmodat2 6755", 452, [cwd, p(&f), 0o6755, 0, 0, 0]),
        case("fchmodat2 u+s, high bits", 452, [cwd, p(&f), 0xffff_0000_0000_4755, 0, 0, 0]),
        case("openat O_CREAT 4755", libc::SYS_openat, [cwd, p(&names[0]), creat, 0o4755, 0, 0]),
        case("openat O_TMPFILE 2755", libc::SYS_openat, [dfd, cstr(c"."), tmpfile, 0o2755, 0, 0]),
        case("mknodat S_IFREG|2755", libc::SYS_mknodat, [cwd, p(&names[1]), reg | 0o2755, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        case("chmod 4755", libc::SYS_chmod, [p(&f), 0o4755, 0, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        case("creat 4755", libc::SYS_creat, [p(&names[2]), 0o4755, 0, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        case("open O_CREAT 6755", libc::SYS_open, [p(&names[3]), creat, 0o6755, 0, 0, 0]),
        #[cfg(target_arch = "x86_64")]
        case("mknod S_IFREG|4755", libc::SYS_mknod, [p(&names[4]), reg | 0o4755, 0, 0, 0, 0]),
    ];
    check_cases(
        "setuid_and_setgid_bits_cannot_be_set",
        &filter,
        &cases,
        EPERM,
    );
    // The controls made set-id files; under the filter nothing could.
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    for name in &names[..5] {
        let _ = std::fs::remove_file(std::path::Path::new(name.to_str().unwrap()));
    }

    // What stays allowed: ordinary modes, the sticky bit, modes an open without O_CREAT
    // ignores, and mkdir (the kernel drops set-id bits from its mode itself).
    let allowed = [
        case(
            "fchmodat 755",
            libc::SYS_fchmodat,
            [cwd, p(&f), 0o755, 0, 0, 0],
        ),
        case("fchmod 1777", libc::SYS_fchmod, [fdn, 0o1777, 0, 0, 0, 0]),
        case(
            "openat O_RDONLY 4755",
            libc::SYS_openat,
            [cwd, p(&f), 0, 0o4755, 0, 0],
        ),
        case(
            "openat O_CREAT 644",
            libc::SYS_openat,
            [cwd, p(&names[5]), creat, 0o644, 0, 0],
        ),
        case(
            "mkdirat 2755",
            libc::SYS_mkdirat,
            [cwd, p(&names[6]), 0o2755, 0, 0, 0],
        ),
    ];
    for c in &allowed {
        assert_eq!(
            in_child(Some(&filter), || errno_of(c.nr, c.args)),
            OK,
            "{}",
            c.name
        );
    }
    assert_eq!(mode_of(&file), 0o1777);
    let made = std::path::Path::new(names[6].to_str().unwrap());
    assert_eq!(mode_of(made) & 0o6000, 0, "mkdir kept a set-id bit");
}

#[test]
fn openat2_fails_with_enosys() {
    if !require_seccomp("openat2_fails_with_enosys") {
        return;
    }
    let filter = default_filter();
    // A NULL open_how of size 0: EINVAL from the kernel.
    let cases = [case(
        "openat2",
        libc::SYS_openat2,
        [libc::AT_FDCWD as usize, cstr(NOWHERE), 0, 0, 0, 0],
    )];
    check_cases(
        "openat2_fails_with_enosys",
        &filter,
        &cases,
        Outcome::Exit(libc::ENOSYS),
    );
}

#[test]
fn tiocsetd_is_denied_even_with_high_bits() {
    if !require_seccomp("tiocsetd_is_denied_even_with_high_bits") {
        return;
    }
    let filter = default_filter();
    let null = std::fs::File::open("/dev/null").unwrap();
    let fd = null.as_raw_fd() as usize;
    let n_tty = 0i32;
    let ldisc = std::ptr::from_ref(&n_tty) as usize;
    let setd = libc::TIOCSETD as usize;
    let cases = [
        case("TIOCSETD", libc::SYS_ioctl, [fd, setd, ldisc, 0, 0, 0]),
        case(
            "TIOCSETD|high",
            libc::SYS_ioctl,
            [fd, setd | 0xdead_beef_0000_0000, ldisc, 0, 0, 0],
        ),
    ];
    check_cases(
        "tiocsetd_is_denied_even_with_high_bits",
        &filter,
        &cases,
        EPERM,
    );
    // On a real terminal (a pty), the control would switch the line discipline.
    let ptmx = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/ptmx")
        .unwrap();
    let fd = ptmx.as_raw_fd() as usize;
    let setd_pty = || errno_of(libc::SYS_ioctl, [fd, setd, ldisc, 0, 0, 0]);
    assert_eq!(in_child(Some(&filter), setd_pty), EPERM);
    assert_eq!(in_child(None, setd_pty), OK);
}

fn socketpair_errno(family: libc::c_int) -> i32 {
    let mut sv = [-1i32; 2];
    let ty = (libc::SOCK_STREAM | libc::SOCK_CLOEXEC) as usize;
    let out = sv.as_mut_ptr() as usize;
    errno_of(libc::SYS_socketpair, [family as usize, ty, 0, out, 0, 0])
}

#[test]
fn socketpair_follows_the_socket_family_rule() {
    if !require_seccomp("socketpair_follows_the_socket_family_rule") {
        return;
    }
    let filter = default_filter();
    let vsock = || socketpair_errno(libc::AF_VSOCK);
    assert_eq!(in_child(Some(&filter), vsock), EPERM);
    assert_ne!(in_child(None, vsock), EPERM);
    let unix = || socketpair_errno(libc::AF_UNIX);
    assert_eq!(in_child(Some(&filter), unix), OK);

    let no_net = seccomp::build(&FilterOptions {
        deny_network: true,
        ..FilterOptions::default()
    })
    .unwrap();
    for family in [
        libc::AF_INET,
        libc::AF_INET6,
        libc::AF_NETLINK,
        libc::AF_VSOCK,
    ] {
        let pair = || socketpair_errno(family);
        assert_eq!(in_child(Some(&no_net), pair), EPERM, "family {family}");
        assert_ne!(in_child(None, pair), EPERM, "control, family {family}");
    }
    assert_eq!(in_child(Some(&no_net), unix), OK);
}

#[test]
fn allow_ptrace_lifts_the_rest_of_the_ptrace_family() {
    if !require_seccomp("allow_ptrace_lifts_the_rest_of_the_ptrace_family") {
        return;
    }
    let strict = default_filter();
    let lenient = seccomp::build(&FilterOptions {
        allow_ptrace: true,
        ..FilterOptions::default()
    })
    .unwrap();
    // KCMP_FILE of fd 0 against itself: 0 (equal).
    let kcmp = || {
        let me = sys::getpid() as usize;
        errno_of(libc::SYS_kcmp, [me, me, 0, 0, 0, 0])
    };
    // Copy our own fd 0 through a pidfd.
    let getfd = || match sys::pidfd_open(sys::getpid(), 0) {
        Ok(pidfd) => errno_of(
            libc::SYS_pidfd_getfd,
            [pidfd.as_raw_fd() as usize, 0, 0, 0, 0, 0],
        ),
        Err(e) => 100 + e.raw(),
    };
    // MADV_COLD over no range of our own memory: 0.
    let madvise = || match sys::pidfd_open(sys::getpid(), 0) {
        Ok(pidfd) => errno_of(
            libc::SYS_process_madvise,
            [pidfd.as_raw_fd() as usize, 0, 0, 20, 0, 0],
        ),
        Err(e) => 100 + e.raw(),
    };
    for (name, call) in [
        ("kcmp", &kcmp as &dyn Fn() -> i32),
        ("pidfd_getfd", &getfd),
        ("process_madvise", &madvise),
    ] {
        assert_eq!(in_child(Some(&strict), call), EPERM, "{name}");
        assert_eq!(in_child(Some(&lenient), call), OK, "{name}");
    }
}

/// The filter of layer 2, where the program shares the host's PID and IPC namespaces.
fn layer_two_filter() -> Filter {
    seccomp::build(&FilterOptions {
        host_namespaces: true,
        ..FilterOptions::default()
    })
    .unwrap()
}

#[test]
fn layer_two_pid_calls_reach_only_the_caller() {
    if !require_seccomp("layer_two_pid_calls_reach_only_the_caller") {
        return;
    }
    let filter = layer_two_filter();
    // The target is this test process, the forked child's parent. Every control sets what
    // is already set, so the test process keeps its priority, affinity and scheduling.
    let host = std::process::id() as usize;
    // SAFETY: getpriority has no memory arguments.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, host as libc::id_t) };
    // SAFETY: `mask` is a valid cpu_set_t of the size passed.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: as above; the kernel writes at most `size` bytes.
    let r = unsafe { libc::sched_getaffinity(host as libc::pid_t, size, &mut mask) };
    assert_eq!(r, 0);
    let mask_p = std::ptr::from_ref(&mask) as usize;
    // SAFETY: ioprio_get has no memory arguments.
    let ioprio = unsafe { libc::syscall(libc::SYS_ioprio_get, 1, host) };
    assert!(ioprio >= 0);
    // Zeroed, not a struct literal: musl's `sched_param` has more fields than glibc's
    // (the SCHED_SPORADIC ones), all of which the kernel ignores.
    // SAFETY: `sched_param` is plain old data; all-zero bytes are a valid value
    // (priority 0, as SCHED_OTHER requires).
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    let param_p = std::ptr::from_ref(&param) as usize;
    let mut old = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let old_p = std::ptr::from_mut(&mut old) as usize;
    let nofile = libc::RLIMIT_NOFILE as usize;
    let nice_u = nice as isize as usize;
    let other = libc::SCHED_OTHER as usize;
    let io = ioprio as usize;
    #[rustfmt::skip]
    let cases = [
        case("setpriority(host)", libc::SYS_setpriority, [0, host, nice_u, 0, 0, 0]),
        // PRIO_USER of a uid with no process: ESRCH without the filter. (With who 0 the
        // control would renice every process of this user on the host; the BPF unit test
        // covers that form.)
        case("setpriority(PRIO_USER)", libc::SYS_setpriority, [2, 0x7fff_fff0, 0, 0, 0, 0]),
        case("prlimit64(host) read", libc::SYS_prlimit64, [host, nofile, 0, old_p, 0, 0]),
        case("sched_setaffinity(host)", libc::SYS_sched_setaffinity, [host, size, mask_p, 0, 0, 0]),
        case("sched_setscheduler(host)", libc::SYS_sched_setscheduler, [host, other, param_p, 0, 0, 0]),
        case("sched_setparam(host)", libc::SYS_sched_setparam, [host, param_p, 0, 0, 0, 0]),
        case("sched_setattr(host)", libc::SYS_sched_setattr, [host, 0, 0, 0, 0, 0]),
        case("ioprio_set(host)", libc::SYS_ioprio_set, [1, host, io, 0, 0, 0]),
    ];
    check_cases(
        "layer_two_pid_calls_reach_only_the_caller",
        &filter,
        &cases,
        EPERM,
    );
    // The same calls on the caller itself (0) work.
    #[rustfmt::skip]
    let own = [
        case("setpriority(0)", libc::SYS_setpriority, [0, 0, nice_u, 0, 0, 0]),
        case("prlimit64(0)", libc::SYS_prlimit64, [0, nofile, 0, old_p, 0, 0]),
        case("sched_setaffinity(0)", libc::SYS_sched_setaffinity, [0, size, mask_p, 0, 0, 0]),
        case("sched_setscheduler(0)", libc::SYS_sched_setscheduler, [0, other, param_p, 0, 0, 0]),
        case("sched_setparam(0)", libc::SYS_sched_setparam, [0, param_p, 0, 0, 0, 0]),
        case("ioprio_set(0)", libc::SYS_ioprio_set, [1, 0, io, 0, 0, 0]),
    ];
    for c in &own {
        assert_eq!(
            in_child(Some(&filter), || errno_of(c.nr, c.args)),
            OK,
            "{}",
            c.name
        );
    }
    // The full layer's filter leaves them to the PID namespace.
    let full = default_filter();
    let c = &cases[0];
    assert_eq!(in_child(Some(&full), || errno_of(c.nr, c.args)), OK);
}

#[test]
fn layer_two_denies_sysv_ipc_and_message_queues() {
    if !require_seccomp("layer_two_denies_sysv_ipc_and_message_queues") {
        return;
    }
    let filter = layer_two_filter();
    // Keys and names that do not exist and no IPC_CREAT: every control fails harmlessly
    // (ENOENT, EINVAL, EBADF) and creates nothing in the host's IPC namespace.
    let key = 0x5354_4b44usize;
    let bad = usize::MAX;
    let name = cstr(c"/stockade-no-such-queue");
    #[rustfmt::skip]
    let cases = [
        case("msgget", libc::SYS_msgget, [key, 0, 0, 0, 0, 0]),
        case("msgsnd", libc::SYS_msgsnd, [bad, 0, 0, 0, 0, 0]),
        case("msgrcv", libc::SYS_msgrcv, [bad, 0, 0, 0, 0, 0]),
        case("msgctl", libc::SYS_msgctl, [bad, libc::IPC_STAT as usize, 0, 0, 0, 0]),
        case("semget", libc::SYS_semget, [key, 1, 0, 0, 0, 0]),
        case("semop", libc::SYS_semop, [bad, 0, 0, 0, 0, 0]),
        case("semtimedop", libc::SYS_semtimedop, [bad, 0, 0, 0, 0, 0]),
        case("semctl", libc::SYS_semctl, [bad, 0, libc::IPC_STAT as usize, 0, 0, 0]),
        case("shmget", libc::SYS_shmget, [key, 4096, 0, 0, 0, 0]),
        case("shmat", libc::SYS_shmat, [bad, 0, 0, 0, 0, 0]),
        case("shmdt", libc::SYS_shmdt, [1, 0, 0, 0, 0, 0]),
        case("shmctl", libc::SYS_shmctl, [bad, libc::IPC_STAT as usize, 0, 0, 0, 0]),
        case("mq_open", libc::SYS_mq_open, [name + 1, libc::O_RDONLY as usize, 0, 0, 0, 0]),
        case("mq_unlink", libc::SYS_mq_unlink, [name + 1, 0, 0, 0, 0, 0]),
        case("mq_timedsend", libc::SYS_mq_timedsend, [bad, 0, 0, 0, 0, 0]),
        case("mq_timedreceive", libc::SYS_mq_timedreceive, [bad, 0, 0, 0, 0, 0]),
        case("mq_notify", libc::SYS_mq_notify, [bad, 0, 0, 0, 0, 0]),
        case("mq_getsetattr", libc::SYS_mq_getsetattr, [bad, 0, 0, 0, 0, 0]),
    ];
    check_cases(
        "layer_two_denies_sysv_ipc_and_message_queues",
        &filter,
        &cases,
        EPERM,
    );
    // The full layer has an IPC namespace of its own: there the kernel answers.
    let full = default_filter();
    for c in &cases {
        let control = in_child(None, || errno_of(c.nr, c.args));
        let filtered = in_child(Some(&full), || errno_of(c.nr, c.args));
        assert_eq!(filtered, control, "{}", c.name);
    }
}

/// `socket(family, ty, protocol)` by number: 0 on success (the fd is left to the child's
/// exit), else the errno.
fn socket3_errno(family: libc::c_int, ty: libc::c_int, protocol: libc::c_int) -> i32 {
    let arg = |x: libc::c_int| x as u32 as usize;
    errno_of(
        libc::SYS_socket,
        [arg(family), arg(ty), arg(protocol), 0, 0, 0],
    )
}

/// `network = "allow"` on layer 2: only TCP and unix sockets open. Each refusal is also made
/// without the filter, where it succeeds or fails with another errno.
#[test]
fn inet_stream_only_opens_tcp_and_unix_sockets_only() {
    if !require_seccomp("inet_stream_only_opens_tcp_and_unix_sockets_only") {
        return;
    }
    let filter = seccomp::build(&FilterOptions {
        inet_stream_only: true,
        host_namespaces: true,
        ..FilterOptions::default()
    })
    .unwrap();
    let (stream, cloexec, nonblock) = (libc::SOCK_STREAM, libc::SOCK_CLOEXEC, libc::SOCK_NONBLOCK);
    let (inet, inet6) = (libc::AF_INET, libc::AF_INET6);
    for (family, ty, protocol) in [
        (inet, stream, 0),
        (inet, stream | cloexec | nonblock, libc::IPPROTO_TCP),
        (inet6, stream | nonblock, 0),
        (libc::AF_UNIX, stream, 0),
        (libc::AF_UNIX, libc::SOCK_DGRAM | cloexec, 0),
    ] {
        let open = || socket3_errno(family, ty, protocol);
        assert_eq!(
            in_child(Some(&filter), open),
            OK,
            "{family} {ty:#x} {protocol}"
        );
    }
    for (family, ty, protocol) in [
        (inet, libc::SOCK_DGRAM, 0),
        (inet6, libc::SOCK_DGRAM | cloexec, libc::IPPROTO_UDP),
        (inet, stream, libc::IPPROTO_SCTP),
        (inet6, stream, libc::IPPROTO_MPTCP),
        // A bit beside the two creation flags: the kernel's EINVAL without the filter.
        (inet, stream | 0x10_0000, 0),
        (libc::AF_NETLINK, libc::SOCK_DGRAM, 0),
        (libc::AF_VSOCK, stream, 0),
    ] {
        let open = || socket3_errno(family, ty, protocol);
        let what = format!("{family} {ty:#x} {protocol}");
        assert_eq!(in_child(Some(&filter), open), EPERM, "{what}");
        assert_ne!(in_child(None, open), EPERM, "control, {what}");
    }
    // socketpair has the same three arguments and the same rule.
    let udp_pair = || {
        let mut sv = [-1i32; 2];
        let out = sv.as_mut_ptr() as usize;
        errno_of(
            libc::SYS_socketpair,
            [inet as usize, libc::SOCK_DGRAM as usize, 0, out, 0, 0],
        )
    };
    assert_eq!(in_child(Some(&filter), udp_pair), EPERM);
    assert_ne!(in_child(None, udp_pair), EPERM);
}
