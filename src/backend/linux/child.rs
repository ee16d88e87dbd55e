//! Child side: replay the prepared operations, then exec. Runs between `clone` and
//! `execve`.
//!
//! # The hazard
//!
//! This code runs in a child created with `CLONE_VM | CLONE_VFORK`: it shares the host's
//! memory, including every heap lock and the TLS block of the thread that cloned it, while
//! the host's other threads keep running. So, until `execve`:
//!
//! - no allocation and no free (the allocator's locks may be held by another thread, and
//!   its state is the host's);
//! - no lock of any kind, no `tracing`, no formatting, no panics (a panic formats);
//! - no libc call that writes `errno`: that is the cloning thread's TLS slot. Every system
//!   call goes through `stockade_sys::linux`, which returns the kernel's error directly;
//! - only the prepared operations and this function's own stack are touched.
//!
//! The parent computed every byte used here ([`super::prepare`]); this module decides
//! nothing. A failing operation writes one fixed-size record ([`crate::backend::report`]) naming
//! its index and errno, and the child exits.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::{CStr, c_int};

use stockade_sys::linux as sys;
use stockade_sys::linux::CWD;
use stockade_sys::{BorrowedFd, Errno};

use self::exec::{close_fds, controlling_terminal, exec_program, stdio};
use super::prepare::{Exec, Layout, Op};
use crate::backend::report::{self, Record};

mod caps;
mod console;
mod exec;
mod git_layer;
mod git_link;
mod mounts;
mod overlay;
mod start;
mod walls;

/// Exit status of a child whose setup failed (the parent reads the record, not this).
pub const SETUP_FAILED: c_int = 125;

type R = Result<(), Errno>;

/// Index of the per-command steps after the layout's own steps.
pub use crate::backend::report::extra;

/// Replays `layout`, then sets up and runs the command described by `exec`. Never returns.
pub fn run(layout: &Layout, exec: &Exec) -> ! {
    let base = layout.ops.len() as u32;
    // First: every process of the sandbox, and every page it touches, is the cgroup's.
    if let Err(e) = join_cgroups(exec) {
        fail(exec, base + extra::CGROUP, e);
    }
    if let Err(e) = stdio(exec) {
        fail(exec, base + extra::STDIO, e);
    }
    if let Err(e) = close_fds(exec) {
        fail(exec, base + extra::CLOSE_FDS, e);
    }
    for (index, op) in layout.ops.iter().enumerate() {
        if let Err(e) = apply(op, layout, exec) {
            fail(exec, index as u32, e);
        }
    }
    // After `setsid` (a layout op): only a session leader without a controlling terminal
    // may take one. The seccomp filter, installed by then, allows TIOCSCTTY; the fd was
    // opened before Landlock, so its ioctls are not restricted either. (With an init, the
    // program's own process takes it, after its own `setsid` (the init's `program.rs`):
    // the parent sets this only for a program exec'd here.)
    if let Err(e) = controlling_terminal(exec) {
        fail(exec, base + extra::CONTROLLING_TERMINAL, e);
    }
    if let Some(cwd) = &exec.cwd {
        if let Err(e) = sys::chdir(cwd) {
            fail(exec, base + extra::CHDIR, e);
        }
    }
    if let Some(init) = &exec.init {
        let e = start::exec_init(init, exec);
        fail(exec, base + extra::INIT, e)
    }
    let e = exec_program(exec);
    fail(exec, base + extra::EXEC, e)
}

/// Writes `0` (the writer) to each `cgroup.procs` fd the host opened. The kernel checks
/// the permission against the credentials the fd was opened with (since Linux 5.16 on
/// both cgroup versions), so this works from the new user namespace.
fn join_cgroups(exec: &Exec) -> R {
    for &fd in &exec.cgroup {
        // SAFETY: the host keeps the fds of `exec.cgroup` open until this child has exec'd
        // or exited.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        match sys::write(fd, b"0") {
            Ok(1) => {}
            Ok(_) => return Err(Errno(libc::EIO)),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reports `step` failing with `errno` and exits.
fn fail(exec: &Exec, step: u32, errno: Errno) -> ! {
    // One write of 16 bytes to a pipe is atomic; if it fails the parent sees EOF from a
    // child that never exec'd, which is still not a silent success.
    report::send(exec.report.0, &Record::new(step, errno.0));
    sys::exit_group(SETUP_FAILED)
}

/// Replays one layout operation; each one's setup is in the helper it names.
fn apply(op: &Op, layout: &Layout, exec: &Exec) -> R {
    match op {
        Op::DieWithParent => die_with_parent(exec),
        Op::ResetSignals => reset_signals(),
        Op::IdMaps { uid_map, gid_map } => id_maps(uid_map, gid_map),
        Op::MountsPrivate => mounts::make_private(),
        Op::BaseRoot { stage } => mounts::base_root(stage),
        Op::Bind {
            src,
            dst,
            mkdirs,
            dir,
            ro,
            idmap,
        } => mounts::bind(src, dst, mkdirs, *dir, *ro, *idmap, &exec.trees),
        Op::BindBeneath { path, ro } => mounts::bind_beneath(path, *ro),
        Op::Symlink {
            target,
            link,
            mkdirs,
        } => mounts::symlink(target, link, mkdirs),
        Op::Tmpfs { dst, mkdirs, data } => mounts::tmpfs(dst, mkdirs, data),
        // The program's terminal as `/dev/console` needs the new `/dev` and the host's
        // devpts, still under `/oldroot`; a pseudo-terminal of its own, the new devpts.
        Op::Dev { nodes } => {
            mounts::dev(nodes)?;
            if let Some(pty) = &exec.pty {
                console::open_pty(pty)?;
            }
            console::bind(exec.console.as_ref())
        }
        Op::Proc { fallback, counts } => mounts::proc(*fallback, counts, exec.hide_pids),
        Op::MaskDir {
            path,
            beneath,
            identity,
        } => mounts::mask_dir(path, *beneath, *identity),
        Op::MaskFile {
            path,
            beneath,
            make_source,
        } => mounts::mask_file(path, *beneath, *make_source),
        Op::Pin { path } => mounts::pin(path),
        Op::HideName { path } => mounts::hide_name(path),
        Op::GuardName { path } => mounts::bind_if_present(path, libc::O_PATH, true),
        Op::GuardPin { path } => {
            mounts::bind_if_present(path, libc::O_PATH | libc::O_DIRECTORY, false)
        }
        Op::GitLayer { path, index, .. } => git_layer::apply(op, path, *index, exec),
        Op::Overlay {
            lower,
            upper,
            work,
            dst,
            mkdirs,
        } => overlay::mount(lower, upper, work, dst, mkdirs, exec.overlay_socket),
        Op::Snapshot => Ok(()),
        Op::PivotRoot => mounts::pivot_root(),
        Op::RootReadOnly => mounts::root_read_only(),
        Op::LoopbackUp => loopback_up(),
        Op::EgressListeners { http, socks } => {
            egress_listener(exec, 0, http)?;
            egress_listener(exec, 1, socks)
        }
        Op::NewSession => sys::setsid().map(drop),
        Op::NewKeyring => caps::new_keyring(),
        Op::DropCapabilities { last_cap } => caps::drop_capabilities(*last_cap),
        Op::NoNewPrivs => sys::prctl_set_no_new_privs(),
        Op::ResourceLimits(list) => resource_limits(list),
        Op::LandlockRules => walls::landlock_rules(layout.walls.as_ref(), exec),
        Op::Landlock => walls::landlock(exec),
        Op::Seccomp => match (&exec.explain, &exec.session_filter) {
            (Some(explain), _) => walls::seccomp_explained(explain),
            (None, Some(filter)) => walls::seccomp(Some(filter)),
            (None, None) => walls::seccomp(layout.walls.as_ref().map(|w| &w.filter)),
        },
        Op::Exit => sys::exit_group(0),
    }
}

/// `PR_SET_PDEATHSIG` follows the parent *thread*; stockade clones from a thread that lives
/// as long as the host process (see `spawn`). The check after arming closes the window in
/// which the host died before the signal was armed: in a new PID namespace `getppid()` is
/// always 0, so instead the report pipe tells, since its read end lives only in the host
/// (the child closed its copy in `close_fds`). A pipe whose readers are all gone polls
/// `POLLERR` on its write end.
fn die_with_parent(exec: &Exec) -> R {
    sys::prctl_set_pdeathsig(libc::SIGKILL)?;
    // SAFETY: the parent keeps the report pipe's write end open in `exec` until this child
    // has exec'd or exited, and `close_fds` keeps it.
    let report = unsafe { BorrowedFd::borrow_raw(exec.report.0) };
    let revents = sys::poll_now(report, 0)?;
    if revents & libc::POLLERR != 0 {
        sys::exit_group(SETUP_FAILED);
    }
    Ok(())
}

/// Every disposition back to `SIG_DFL`: a signal arriving before `execve` must not run a
/// host handler on the host's memory, and a signal the host ignores must not stay ignored
/// in the program (`SIG_IGN` survives `execve`). Signals stay blocked (the parent blocked
/// them all around `clone`) until just before `execve`.
///
/// Only the signals whose disposition is not the default are reset: the kernel lists them
/// in this child's own `/proc/self/status` (`SigIgn`, `SigCgt`). The list is this child's,
/// not the host's: without `CLONE_SIGHAND` the child got a copy of the host's handler
/// table at `clone`, which no host thread can change any more, so nothing is missed
/// however the host changes its handlers meanwhile. A host sets a handful (Rust's
/// `SIGPIPE` and stack-overflow handlers, glibc's two internal signals), so this is about
/// ten system calls instead of 62. Where the file cannot be read or parsed (no `/proc`,
/// an odd format), every signal is reset, as before.
fn reset_signals() -> R {
    let mask = non_default_signals().unwrap_or(u64::MAX);
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP || mask & (1 << (sig - 1)) == 0 {
            continue;
        }
        sys::rt_sigaction_default(sig)?;
    }
    Ok(())
}

/// The signals whose disposition is ignored or caught, as the bit mask of
/// `/proc/self/status` (bit `n - 1` for signal `n`); `None` when the file cannot be read
/// or either line is missing from what one read returns.
///
/// One read, not a read to EOF: procfs makes the whole file at the first read and the
/// masks need only their two lines, each a key and exactly 16 hex digits. A file cut
/// short before them leaves a line or digits missing, and the caller then resets
/// everything.
fn non_default_signals() -> Option<u64> {
    // `status` is about 1.5 KiB; a very long `Groups:` line may push the masks out of
    // the buffer, and then the caller resets everything.
    let mut buf = [0u8; 4096];
    let fd = sys::openat(
        CWD,
        c"/proc/self/status",
        libc::O_RDONLY | libc::O_CLOEXEC,
        0,
    )
    .ok()?;
    let read = loop {
        match sys::read(fd.as_fd(), &mut buf) {
            Err(Errno(libc::EINTR)) => {}
            r => break r,
        }
    };
    let _ = sys::close(fd);
    let text = buf.get(..read.ok()?)?;
    Some(status_mask(text, b"\nSigIgn:\t")? | status_mask(text, b"\nSigCgt:\t")?)
}

/// The 16 hex digits after `key` in `text`.
fn status_mask(text: &[u8], key: &[u8]) -> Option<u64> {
    let at = text.windows(key.len()).position(|w| w == key)? + key.len();
    let digits = text.get(at..at + 16)?;
    let mut mask = 0u64;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => return None,
        };
        mask = mask << 4 | u64::from(v);
    }
    Some(mask)
}

pub(super) fn write_file(path: &CStr, data: &[u8]) -> R {
    let fd = sys::openat(CWD, path, libc::O_WRONLY | libc::O_CLOEXEC, 0)?;
    let r = sys::write(fd.as_fd(), data);
    let _ = sys::close(fd);
    match r {
        Ok(n) if n == data.len() => Ok(()),
        Ok(_) => Err(Errno(libc::EIO)),
        Err(e) => Err(e),
    }
}

/// One id each: the caller's own. An unprivileged process may write exactly this map for
/// itself once `setgroups` is denied.
fn id_maps(uid_map: &[u8], gid_map: &[u8]) -> R {
    match write_file(c"/proc/self/setgroups", b"deny") {
        Ok(()) | Err(Errno(libc::ENOENT)) => {}
        Err(e) => return Err(e),
    }
    write_file(c"/proc/self/uid_map", uid_map)?;
    write_file(c"/proc/self/gid_map", gid_map)
}

/// Each limit, no higher than the hard limit inherited.
fn resource_limits(list: &[crate::plan::Rlimit]) -> R {
    for l in list {
        let (_, inherited) = sys::getrlimit(l.resource)?;
        sys::setrlimit(l.resource, l.soft.min(inherited), l.hard.min(inherited))?;
    }
    Ok(())
}

/// Opens a listening TCP socket on `addr` (the new namespace's loopback) and sends it to
/// the parent tagged `tag`; this child's copy is closed at once, so that after `execve`
/// only the host holds it.
fn egress_listener(exec: &Exec, tag: u8, addr: &libc::sockaddr_in) -> R {
    if exec.egress_socket < 0 {
        return Err(Errno(libc::EBADF));
    }
    let fd = sys::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)?;
    let mut r = sys::bind_inet(fd.as_fd(), addr);
    if r.is_ok() {
        r = sys::listen(fd.as_fd(), 128);
    }
    if r.is_ok() {
        // SAFETY: the parent keeps its copy of the socket's child end open in `exec` until
        // this child has exec'd or exited, and `close_fds` keeps it.
        let socket = unsafe { BorrowedFd::borrow_raw(exec.egress_socket) };
        r = sys::send_fd(socket, tag, fd.as_fd());
    }
    let _ = sys::close(fd);
    r
}

/// `lo` up in the new network namespace; already up is fine.
fn loopback_up() -> R {
    let fd = sys::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)?;
    let mut ifr = sys::IfreqFlags {
        name: [0; 16],
        flags: 0,
        pad: [0; 22],
    };
    if let Some(name) = ifr.name.get_mut(..2) {
        name.copy_from_slice(b"lo");
    }
    let mut r = sys::ioctl_siocgifflags(fd.as_fd(), &mut ifr);
    if r.is_ok() {
        ifr.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as i16;
        r = sys::ioctl_siocsifflags(fd.as_fd(), &ifr);
    }
    let _ = sys::close(fd);
    r
}

#[cfg(test)]
mod tests {
    use super::status_mask;

    #[test]
    fn status_masks_are_read_from_their_own_line() {
        let text = b"Name:\tx\nSigQ:\t0/1\nSigPnd:\t0000000000000001\nSigBlk:\t0000000000000000\n\
SigIgn:\t0000000000001000\nSigCgt:\t8000000180000a00\nCapInh:\t0000000000000000\n";
        assert_eq!(status_mask(text, b"\nSigIgn:\t"), Some(0x1000));
        assert_eq!(
            status_mask(text, b"\nSigCgt:\t"),
            Some(0x8000_0001_8000_0a00)
        );
        assert_eq!(status_mask(text, b"\nShdPnd:\t"), None);
        // Cut short or not hex: unknown, so the caller resets everything.
        assert_eq!(status_mask(b"\nSigIgn:\t00010", b"\nSigIgn:\t"), None);
        assert_eq!(
            status_mask(b"\nSigIgn:\t000000000000000G\n", b"\nSigIgn:\t"),
            None
        );
    }
}
