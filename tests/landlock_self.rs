//! The Landlock ruleset, proven on real processes: the ruleset is built in the parent, a
//! forked child restricts itself with the raw `landlock_restrict_self` wrapper (the path the
//! spawn code takes) and tries each operation; its errnos come back through a pipe. Every
//! case also runs in an unrestricted child (the control), where the denied operations must
//! succeed: a denial the control shares proves nothing.
#![cfg(target_os = "linux")]

mod common;

use std::ffi::{CStr, CString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use stockade::LandlockBuildError;
use stockade::backend::linux::landlock::{self, Grant, Prepared, RulesetSpec};
use stockade_sys::linux as sys;

/// Every test that forks holds this.
static FORK_MTX: Mutex<()> = Mutex::new(());

fn fork_lock() -> MutexGuard<'static, ()> {
    FORK_MTX.lock().unwrap_or_else(|e| e.into_inner())
}

/// Returns false (after printing `SKIP`) when the kernel's Landlock ABI is below `min`, or
/// panics when `STOCKADE_TEST_REQUIRE` demands Landlock.
fn require_landlock_abi(test: &str, min: i32) -> bool {
    let abi = sys::landlock_abi_version().unwrap_or(0);
    if abi >= min {
        return true;
    }
    let required = common::required_name("landlock");
    assert!(
        !required,
        "{test}: landlock ABI {abi} < {min}, and STOCKADE_TEST_REQUIRE demands it"
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIP {test}: landlock ABI {abi} < {min}"
    );
    false
}

/// The errno of the last libc call (no allocation: a raw OS error is stored inline).
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

/// 0 when a libc call returned non-negative, else its errno.
fn check(ret: libc::c_int) -> i32 {
    if ret >= 0 { 0 } else { errno() }
}

/// A named operation the child performs; it returns 0 or an errno.
type Op<'a> = (&'static str, &'a dyn Fn() -> i32);

/// Restricts with `prctl(PR_SET_NO_NEW_PRIVS)` + `landlock_restrict_self`, as the spawn
/// path does; returns the errno on failure.
fn restrict(prepared: &Prepared) -> Result<(), i32> {
    sys::prctl_set_no_new_privs().map_err(|e| e.raw())?;
    // SAFETY: `prepared` owns the ruleset fd and outlives this borrow.
    let ruleset = unsafe { stockade_sys::BorrowedFd::borrow_raw(prepared.raw_fd()) };
    sys::landlock_restrict_self(ruleset, 0).map_err(|e| e.raw())
}

/// Forks; the child restricts itself with `ruleset` (if any), runs `ops` in order and sends
/// their results back. Returns one errno (0 = success) per op.
fn run_ops(ruleset: Option<&Prepared>, ops: &[Op<'_>]) -> Vec<i32> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two fds pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 just returned this fd, owned by nothing else.
    let rx = unsafe { OwnedFd::from_raw_fd(fds[0]) };
    // SAFETY: as above, for the write end.
    let tx = unsafe { OwnedFd::from_raw_fd(fds[1]) };
    let mut results = vec![0i32; ops.len()];
    let _guard = fork_lock();
    // SAFETY: the child runs only the ops (system calls on data built before the fork) and
    // raw wrappers, then exits without returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        if let Some(prepared) = ruleset {
            if let Err(e) = restrict(prepared) {
                sys::exit_group(100 + e.min(100));
            }
        }
        for (slot, (_, op)) in results.iter_mut().zip(ops) {
            *slot = op();
        }
        let bytes: Vec<u8> = results.iter().flat_map(|r| r.to_ne_bytes()).collect();
        let ok = sys::write(tx.as_fd().into(), &bytes) == Ok(bytes.len());
        sys::exit_group(if ok { 0 } else { 99 });
    }
    drop(tx);
    let mut bytes = Vec::new();
    std::fs::File::from(rx).read_to_end(&mut bytes).unwrap();
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: wait status {status:#x}"
    );
    assert_eq!(bytes.len(), ops.len() * 4);
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs `ops` restricted and unrestricted and compares both with the expectations:
/// `(name, restricted, control)`.
fn expect(ruleset: &Prepared, ops: &[Op<'_>], want: &[(i32, i32)]) {
    assert_eq!(ops.len(), want.len());
    let restricted = run_ops(Some(ruleset), ops);
    let control = run_ops(None, ops);
    let mut failures = Vec::new();
    for (i, (name, _)) in ops.iter().enumerate() {
        let (want_r, want_c) = want[i];
        if restricted[i] != want_r {
            failures.push(format!(
                "{name}: restricted errno {}, want {want_r}",
                restricted[i]
            ));
        }
        if control[i] != want_c {
            failures.push(format!(
                "{name}: control errno {}, want {want_c}",
                control[i]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

fn open_errno(path: &CStr, flags: libc::c_int) -> i32 {
    match sys::openat(sys::CWD, path, flags | libc::O_CLOEXEC, 0o600) {
        Ok(fd) => {
            let _ = sys::close(fd);
            0
        }
        Err(e) => e.raw(),
    }
}

/// Reads a directory's first entries: 0 when at least one entry came back.
fn list_errno(path: &CStr) -> i32 {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let fd = match sys::openat(sys::CWD, path, flags, 0) {
        Ok(fd) => fd,
        Err(e) => return e.raw(),
    };
    let mut buf = [0u8; 4096];
    let args = [
        fd.as_raw_fd() as usize,
        buf.as_mut_ptr() as usize,
        buf.len(),
        0,
        0,
        0,
    ];
    // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`, which outlives the call.
    let n = unsafe { sys::syscall6(libc::SYS_getdents64, args) };
    let _ = sys::close(fd);
    match n {
        n if n > 0 => 0,
        0 => -2,
        n => i32::try_from(-n).unwrap_or(-1),
    }
}

/// A temp tree under the target dir (which, unlike some /tmp mounts, allows exec):
/// `ro/data`, `rw1/`, `rw2/`, `outside/secret`.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        for d in ["ro", "rw1", "rw2", "outside"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("ro/data"), "ro").unwrap();
        std::fs::write(dir.path().join("outside/secret"), "secret").unwrap();
        Tree { dir }
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }

    fn spec(&self) -> RulesetSpec {
        RulesetSpec::new(self.path("rw1"))
            .with(self.path("ro"), Grant::ReadExec)
            .with(self.path("rw2"), Grant::ReadWrite)
            .with("/", Grant::ListDir)
            .with("/dev/null", Grant::Device)
    }
}

#[test]
fn file_system_access_follows_the_spec() {
    if !require_landlock_abi("file_system_access_follows_the_spec", 3) {
        return;
    }
    let tree = Tree::new();
    let prepared = landlock::build(&tree.spec()).unwrap();
    let ro_data = c(&tree.path("ro/data"));
    let ro_new = c(&tree.path("ro/new"));
    let rw1_file = c(&tree.path("rw1/file"));
    let rw2_file = c(&tree.path("rw2/file"));
    let secret = c(&tree.path("outside/secret"));
    let wr = libc::O_WRONLY | libc::O_CREAT;
    let rename = || {
        // SAFETY: both paths are NUL-terminated strings that outlive the call.
        check(unsafe {
            libc::renameat(
                libc::AT_FDCWD,
                rw1_file.as_ptr(),
                libc::AT_FDCWD,
                rw2_file.as_ptr(),
            )
        })
    };
    let ops: [Op<'_>; 10] = [
        ("read ro/data", &|| open_errno(&ro_data, libc::O_RDONLY)),
        ("create ro/new", &|| open_errno(&ro_new, wr)),
        ("open ro/data for writing", &|| {
            open_errno(&ro_data, libc::O_WRONLY)
        }),
        ("create rw1/file", &|| open_errno(&rw1_file, wr)),
        ("rename rw1/file to rw2/file (Refer)", &rename),
        ("read outside/secret", &|| {
            open_errno(&secret, libc::O_RDONLY)
        }),
        ("list /", &|| list_errno(c"/")),
        ("read /etc/passwd (dir not listed)", &|| {
            open_errno(c"/etc/passwd", libc::O_RDONLY)
        }),
        ("> /dev/null (O_WRONLY | O_TRUNC)", &|| {
            open_errno(c"/dev/null", libc::O_WRONLY | libc::O_TRUNC)
        }),
        ("read /proc/self/status (no rule)", &|| {
            open_errno(c"/proc/self/status", libc::O_RDONLY)
        }),
    ];
    let want = [
        (0, 0),
        (libc::EACCES, 0),
        (libc::EACCES, 0),
        (0, 0),
        (0, 0),
        (libc::EACCES, 0),
        (0, 0),
        (libc::EACCES, 0),
        (0, 0),
        (libc::EACCES, 0),
    ];
    // The control run's files stay behind from the restricted run; the rename then replaces.
    expect(&prepared, &ops, &want);
}

#[test]
fn programs_run_from_writable_and_read_exec_roots_only() {
    if !require_landlock_abi("programs_run_from_writable_and_read_exec_roots_only", 1) {
        return;
    }
    let tree = Tree::new();
    for d in ["rw1", "ro", "outside"] {
        std::fs::copy("/usr/bin/true", tree.path(d).join("true")).unwrap();
    }
    let mut spec = tree.spec();
    for p in stockade::policy::SYSTEM_ALLOWLIST {
        spec = spec.with(*p, Grant::ReadExec);
    }
    let prepared = landlock::build(&spec).unwrap();
    for (dir, want) in [("rw1", 0), ("ro", 0), ("outside", libc::EACCES)] {
        let prog = c(&tree.path(dir).join("true"));
        let argv = [prog.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        let exec = || {
            // SAFETY: `prog` is a NUL-terminated path and `argv`/`envp` NULL-terminated arrays
            // of pointers to live strings; on success the process image is replaced and
            // `true` exits 0, on failure execve returns and we report its errno.
            unsafe { libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
            errno()
        };
        // On success the child becomes `true`, which writes nothing back: the pipe reads
        // empty and the wait status is 0. Run the exec as the only op and read the status.
        assert_eq!(exec_status(Some(&prepared), &exec), want, "exec from {dir}");
        assert_eq!(exec_status(None, &exec), 0, "control exec from {dir}");
    }
}

/// Forks; the child restricts itself and runs `op`, exiting with its result: the exit
/// status of the exec'd program, or the errno of a failed exec.
fn exec_status(ruleset: Option<&Prepared>, op: &dyn Fn() -> i32) -> i32 {
    let _guard = fork_lock();
    // SAFETY: the child restricts itself, calls execve (or exits with its errno).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        if let Some(prepared) = ruleset {
            if let Err(e) = restrict(prepared) {
                sys::exit_group(100 + e.min(100));
            }
        }
        sys::exit_group(op());
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "wait status {status:#x}");
    libc::WEXITSTATUS(status)
}

/// An abstract unix address `\0stockade-<pid>-<tag>` and its length.
fn abstract_addr(tag: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = format!("stockade-{}-{tag}", std::process::id());
    for (dst, src) in addr.sun_path[1..].iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    (addr, libc::socklen_t::try_from(len).unwrap())
}

fn unix_socket() -> libc::c_int {
    // SAFETY: plain socket(2) call with constant arguments.
    unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) }
}

fn connect_unix(addr: &(libc::sockaddr_un, libc::socklen_t)) -> i32 {
    let fd = unix_socket();
    if fd < 0 {
        return errno();
    }
    // SAFETY: `addr.0` is a valid sockaddr_un of length `addr.1`, alive for the call.
    let r = check(unsafe { libc::connect(fd, std::ptr::from_ref(&addr.0).cast(), addr.1) });
    // SAFETY: `fd` is the socket this function created above; nothing else owns it.
    let _ = unsafe { sys::close_raw(fd) };
    r
}

fn listen_unix(addr: &(libc::sockaddr_un, libc::socklen_t)) -> Result<libc::c_int, i32> {
    let fd = unix_socket();
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `addr.0` is a valid sockaddr_un of length `addr.1`, alive for the call.
    if unsafe { libc::bind(fd, std::ptr::from_ref(&addr.0).cast(), addr.1) } < 0 {
        return Err(errno());
    }
    // SAFETY: `fd` is a bound socket we own.
    if unsafe { libc::listen(fd, 4) } < 0 {
        return Err(errno());
    }
    Ok(fd)
}

#[test]
fn abstract_unix_sockets_are_scoped_to_the_sandbox() {
    if !require_landlock_abi("abstract_unix_sockets_are_scoped_to_the_sandbox", 6) {
        return;
    }
    let tree = Tree::new();
    let prepared = landlock::build(&tree.spec()).unwrap();
    assert!(prepared.status().abstract_unix_scoped());
    let outside = abstract_addr("outside");
    let listener = listen_unix(&outside).expect("listen outside");
    // The restricted and the control child run one after the other, and an abstract name
    // is released when its last socket closes, so both can bind the same name.
    let inside_addr = abstract_addr("inside");
    let inside = || {
        let addr = &inside_addr;
        let fd = match listen_unix(addr) {
            Ok(fd) => fd,
            Err(e) => return 1000 + e,
        };
        let r = connect_unix(addr);
        // SAFETY: `fd` is the socket `listen_unix` created for this closure alone.
        let _ = unsafe { sys::close_raw(fd) };
        r
    };
    let ops: [Op<'_>; 2] = [
        ("connect to an abstract socket bound outside", &|| {
            connect_unix(&outside)
        }),
        ("connect to an abstract socket bound inside", &inside),
    ];
    expect(&prepared, &ops, &[(libc::EPERM, 0), (0, 0)]);
    // SAFETY: `listener` is the socket this test created above; nothing else owns it.
    let _ = unsafe { sys::close_raw(listener) };
}

#[test]
fn signals_are_scoped_to_the_sandbox() {
    if !require_landlock_abi("signals_are_scoped_to_the_sandbox", 6) {
        return;
    }
    let tree = Tree::new();
    let prepared = landlock::build(&tree.spec()).unwrap();
    assert!(prepared.status().signals_scoped());
    let parent = std::process::id() as libc::pid_t;
    let kill_parent = || {
        // SAFETY: signal 0 only checks permission; the parent is this test process.
        check(unsafe { libc::kill(parent, 0) })
    };
    let kill_own_child = || {
        // SAFETY: the grandchild only pauses until killed; it inherits the domain.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: pause has no preconditions.
            unsafe { libc::pause() };
            sys::exit_group(0);
        }
        if pid < 0 {
            return 1000 + errno();
        }
        // SAFETY: `pid` is our own child, in the same domain.
        let r = check(unsafe { libc::kill(pid, libc::SIGKILL) });
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer; `pid` is our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        r
    };
    let ops: [Op<'_>; 2] = [
        ("kill(parent outside the sandbox, 0)", &kill_parent),
        ("kill(own child inside the sandbox)", &kill_own_child),
    ];
    expect(&prepared, &ops, &[(libc::EPERM, 0), (0, 0)]);
}

fn tcp(
    op: &dyn Fn(libc::c_int, *const libc::sockaddr, libc::socklen_t) -> libc::c_int,
    port: u16,
) -> i32 {
    // SAFETY: plain socket(2) call with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return 1000 + errno();
    }
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let r = check(op(fd, std::ptr::from_ref(&addr).cast(), len));
    // SAFETY: `fd` is the socket this function created above; nothing else owns it.
    let _ = unsafe { sys::close_raw(fd) };
    r
}

fn connect(fd: libc::c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> libc::c_int {
    // SAFETY: `addr` points to a sockaddr_in of `len` bytes on the caller's stack.
    unsafe { libc::connect(fd, addr, len) }
}

fn bind(fd: libc::c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> libc::c_int {
    // SAFETY: `addr` points to a sockaddr_in of `len` bytes on the caller's stack.
    unsafe { libc::bind(fd, addr, len) }
}

#[test]
fn tcp_is_denied_when_the_spec_asks() {
    if !require_landlock_abi("tcp_is_denied_when_the_spec_asks", 4) {
        return;
    }
    let tree = Tree::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ops: [Op<'_>; 2] = [
        ("connect 127.0.0.1 listener outside", &|| {
            tcp(&connect, port)
        }),
        ("bind 127.0.0.1:0", &|| tcp(&bind, 0)),
    ];

    let mut spec = tree.spec();
    spec.deny_tcp = true;
    let denied = landlock::build(&spec).unwrap();
    assert!(denied.status().tcp_denied());
    expect(&denied, &ops, &[(libc::EACCES, 0), (libc::EACCES, 0)]);

    let allowed = landlock::build(&tree.spec()).unwrap();
    assert!(!allowed.status().tcp_denied());
    expect(&allowed, &ops, &[(0, 0), (0, 0)]);
}

/// `network = "allow"` on layer 2: TCP denied but connects to the egress proxy's ports.
/// A listener on another port stays out of reach, and nothing binds, not even the allowed
/// port (no bind rule).
#[test]
fn tcp_connects_only_to_the_ports_the_spec_names() {
    if !require_landlock_abi("tcp_connects_only_to_the_ports_the_spec_names", 4) {
        return;
    }
    let tree = Tree::new();
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (proxy_port, other_port) = (
        proxy.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let ops: [Op<'_>; 4] = [
        ("connect 127.0.0.1 to the allowed port", &|| {
            tcp(&connect, proxy_port)
        }),
        ("connect 127.0.0.1 to another listener", &|| {
            tcp(&connect, other_port)
        }),
        ("bind 127.0.0.1:0", &|| tcp(&bind, 0)),
        // In use: the control fails with EADDRINUSE; Landlock refuses before.
        ("bind 127.0.0.1 the allowed port", &|| {
            tcp(&bind, proxy_port)
        }),
    ];

    let mut spec = tree.spec();
    spec.deny_tcp = true;
    spec.connect_tcp = vec![proxy_port];
    let prepared = landlock::build(&spec).unwrap();
    let st = prepared.status();
    assert!(st.tcp_denied());
    assert_eq!(st.connect_tcp, [proxy_port]);
    expect(
        &prepared,
        &ops,
        &[
            (0, 0),
            (libc::EACCES, 0),
            (libc::EACCES, 0),
            (libc::EACCES, libc::EADDRINUSE),
        ],
    );

    // Without TCP denied the ports add nothing: every port is open.
    let mut open = tree.spec();
    open.connect_tcp = vec![proxy_port];
    let prepared = landlock::build(&open).unwrap();
    assert!(!prepared.status().tcp_denied());
    assert!(prepared.status().connect_tcp.is_empty());
    expect(
        &prepared,
        &ops,
        &[(0, 0), (0, 0), (0, 0), (libc::EADDRINUSE, libc::EADDRINUSE)],
    );
}

/// What a port rule cannot do: it names a port, not an address. A listener of anyone's on
/// the allowed port at another address (here 127.0.0.2, standing for any host the program
/// can route to) is as reachable as the proxy. Layer 2's `network = "allow"` therefore
/// keeps the program to the proxy only as long as nothing it can reach listens on the
/// proxy's port (SECURITY.md).
#[test]
fn a_port_rule_names_no_address() {
    if !require_landlock_abi("a_port_rule_names_no_address", 4) {
        return;
    }
    let tree = Tree::new();
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = proxy.local_addr().unwrap().port();
    let Ok(elsewhere) = std::net::TcpListener::bind(("127.0.0.2", port)) else {
        // The port is taken at 127.0.0.2 by someone else: nothing to show this time.
        common::skip("a_port_rule_names_no_address", "port taken at 127.0.0.2");
        return;
    };
    let connect_elsewhere = || {
        // SAFETY: plain socket(2) call with constant arguments.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return 1000 + errno();
        }
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::new(127, 0, 0, 2)).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let r = check(connect(fd, std::ptr::from_ref(&addr).cast(), len));
        // SAFETY: `fd` is the socket made above; nothing else owns it.
        let _ = unsafe { sys::close_raw(fd) };
        r
    };
    let ops: [Op<'_>; 1] = [("connect 127.0.0.2 on the allowed port", &connect_elsewhere)];
    let mut spec = tree.spec();
    spec.deny_tcp = true;
    spec.connect_tcp = vec![port];
    let prepared = landlock::build(&spec).unwrap();
    expect(&prepared, &ops, &[(0, 0)]);
    drop(elsewhere);
}

#[test]
fn status_reports_exactly_what_is_enforced() {
    if !require_landlock_abi("status_reports_exactly_what_is_enforced", 1) {
        return;
    }
    use ::landlock::{ABI, Access, AccessFs};
    let kernel = sys::landlock_abi_version().unwrap();
    let tree = Tree::new();
    let mut spec = tree.spec();
    spec.deny_tcp = true;
    let prepared = landlock::build(&spec).unwrap();
    let st = prepared.status();
    assert_eq!(st.kernel_abi, kernel);
    assert_eq!(st.abi, ABI::from(kernel).min(landlock::TESTED_ABI));
    assert_eq!(st.handled_fs, AccessFs::from_all(st.abi));
    assert_eq!(st.refer(), kernel >= 2);
    assert_eq!(st.handled_fs.contains(AccessFs::Truncate), kernel >= 3);
    assert_eq!(st.tcp_denied(), kernel >= 4);
    assert_eq!(st.handled_fs.contains(AccessFs::IoctlDev), kernel >= 5);
    assert_eq!(st.signals_scoped(), kernel >= 6);
    assert_eq!(st.abstract_unix_scoped(), kernel >= 6);
    assert!(st.skipped.is_empty(), "{:?}", st.skipped);
    // Bits for rules the child adds itself follow the same negotiation.
    let rw = prepared.access_bits(Grant::ReadWrite, true);
    assert_eq!(rw, AccessFs::from_all(st.abi).bits());
    assert_eq!(prepared.access_bits(Grant::ListDir, false), 0);

    let mut quiet = tree.spec();
    quiet.scope = false;
    let st = landlock::build(&quiet).unwrap().status().clone();
    assert!(st.handled_net.is_empty() && st.scoped.is_empty());
}

#[test]
fn missing_paths_are_skipped_but_a_missing_workspace_is_an_error() {
    if !require_landlock_abi(
        "missing_paths_are_skipped_but_a_missing_workspace_is_an_error",
        1,
    ) {
        return;
    }
    let tree = Tree::new();
    let gone = tree.path("gone");
    let under_file = tree.path("ro/data/below");
    let spec = tree
        .spec()
        .with(&gone, Grant::ReadWrite)
        .with(&under_file, Grant::ReadExec);
    let prepared = landlock::build(&spec).unwrap();
    assert_eq!(prepared.status().skipped, vec![gone.clone(), under_file]);
    // The status alone (what `Sandbox::new` reads, no ruleset made) says the same, with
    // the same access bits.
    let status = landlock::status(&spec).unwrap();
    assert_eq!(&status, prepared.status());
    for grant in [
        Grant::ReadWrite,
        Grant::ReadExec,
        Grant::ListDir,
        Grant::Device,
    ] {
        for dir in [true, false] {
            assert_eq!(
                status.access_bits(grant, dir),
                prepared.access_bits(grant, dir)
            );
        }
    }

    let err = landlock::status(&RulesetSpec::new(&gone)).unwrap_err();
    assert!(
        matches!(&err, LandlockBuildError::Workspace { path, .. } if *path == gone),
        "{err:?}"
    );
    let err = landlock::build(&RulesetSpec::new(&gone)).unwrap_err();
    assert!(
        matches!(&err, LandlockBuildError::Workspace { path, source }
            if *path == gone && source.raw_os_error() == Some(libc::ENOENT)),
        "{err:?}"
    );
}
