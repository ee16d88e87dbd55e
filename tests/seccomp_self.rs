//! The seccomp filter, proven on real processes: each case forks, the child installs the
//! filter and makes one system call, and exits with its errno (0 on success). Every denied
//! call is also made once without the filter (the control), with arguments chosen so that it
//! fails harmlessly with some other errno: a case whose control already returns the errno
//! the filter would return proves nothing, and fails the test.
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
    match sys::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) {
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

/// Forks; the child installs `filter` (if any) after `PR_SET_NO_NEW_PRIVS`, runs `body` and
/// exits with its result. Core dumps are off in the child: a kill by seccomp would dump.
fn in_child(filter: Option<&Filter>, body: impl FnOnce() -> i32) -> Outcome {
    let fprog = filter.map(Filter::as_fprog);
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
        if let Some(fprog) = &fprog {
            if sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).is_err() {
                sys::exit_group(SETUP_NNP);
            }
            if sys::seccomp_set_mode_filter(0, fprog).is_err() {
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
/// each must end otherwise (else the case cannot tell the filter from the kernel).
fn check_cases(filter: &Filter, cases: &[Case], want: Outcome) {
    let mut failures = Vec::new();
    for c in cases {
        let control = in_child(None, || errno_of(c.nr, c.args));
        let filtered = in_child(Some(filter), || errno_of(c.nr, c.args));
        if control == want {
            failures.push(format!("{}: control run already gives {control:?}", c.name));
        }
        if filtered != want {
            failures.push(format!("{}: filtered {filtered:?}, want {want:?}", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
    ];
    check_cases(&filter, &cases, EPERM);
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
    check_cases(&filter, &cases, EPERM);

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
    check_cases(&filter, &cases, Outcome::Exit(libc::ENOSYS));

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
        let Ok(fd) = sys::openat(libc::AT_FDCWD, &path, flags, 0o600) else {
            return 91;
        };
        if sys::write(fd, b"stockade") != Ok(8) {
            return 92;
        }
        let Ok(fd2) = sys::openat(libc::AT_FDCWD, &path, libc::O_RDONLY, 0) else {
            return 93;
        };
        let mut buf = [0u8; 16];
        if sys::read(fd2, &mut buf) != Ok(8) || &buf[..8] != b"stockade" {
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
    check_cases(&filter, &cases, EPERM);
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
