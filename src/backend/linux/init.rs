//! The host side of the sandbox's init: its image in a sealed memfd, the argv that
//! configures it, and the exit status it reports.
//!
//! # Why an init, and why this one
//!
//! A PID namespace's first process gets the kernel's PID-1 rules: signals it has no handler
//! for are dropped (`kill -TERM $$` in `sh` does nothing, a host's SIGTERM is ignored,
//! `abort()` cannot end it with SIGABRT), and every orphan of the namespace becomes its
//! child, to be reaped or left as a zombie. Ordinary programs are not written for that, so
//! the program must not be PID 1. Something else must be, and it must not be a fork of the
//! host: a copy of the host's memory (secrets, keys, heap) would sit inside the sandbox.
//!
//! So PID 1 is `stockade-init` (the `init/` crate): a static `no_std` ELF of a few KiB,
//! built from this project's source at build time, carried in the library as bytes
//! ([`stockade_init::IMAGE`]), written once per host process to a memfd that is then sealed
//! against every change ([`image_fd`]), and exec'd by the setup child with
//! `execveat(memfd, "", AT_EMPTY_PATH)` as the last step of the setup. After that exec no
//! page of the host's memory is mapped inside: `/proc/1/maps` shows the memfd, a stack and
//! the vDSO. The init does tini's job: forward signals, reap orphans, report the program's
//! exact wait status, exit (see `init/src/run.rs`).
//!
//! # DESIGN: the init forks the program's process
//!
//! The program's process is a fork of the init: the setup child execs the init as its
//! last step and starts nothing itself; the init makes itself non-dumpable, forks, and
//! its child takes its session, enters a Landlock domain nested inside the init's, takes
//! its terminal and execs the program (`init/src/program.rs`).
//!
//! The order is the point (DESIGN's "doors back to the host"). Until its exec the setup
//! child shares the host's memory, is dumpable and holds the host's pipes; a program that
//! ran before it had become the init could read the host's memory through `/proc/1/mem`,
//! write a forged status record through `/proc/1/fd/N`, or (with `allow_ptrace`) trace PID
//! 1 and rewrite the host's memory. A first design exec'd the program first and the init
//! second, to overlap the two execs, and lost that race in up to half of the runs of a
//! freestanding program (`tests/init_window.rs`). A second one started the program's
//! process from the setup child (a `CLONE_VM` child that exec'd this image as a
//! "starter" and waited for the init's go byte): safe, but an extra exec, an extra clone
//! of the setup child and a wake-up on every spawn. Now the program's process cannot
//! exist before the init does, so there is nothing to wait for: its first instruction
//! comes after the init's exec and setup by construction, in a process that never mapped
//! a page of the host's memory. The nested domain alone would already keep the program
//! from tracing the init or opening its `/proc` files.
//! Nothing runs outside the walls in between: the init is exec'd after every wall is up,
//! and its fork inherits them. Signals are blocked in the setup child from before `clone`
//! to the init's signalfd (and in the program's process until the program's exec), so
//! what the host sends meanwhile waits, queued, for the init to forward it.
//!
//! On layer 2 there is no PID namespace: the same init runs as a child subreaper and, when
//! the program ends (or the host asks, or dies), kills and reaps every descendant, so a
//! double-forked daemon does not outlive the command. Passthrough has no init: nothing is
//! contained there, and the program is the host's direct child as with std.
//!
//! # DESIGN: the walls go up before the init's exec, not inside the init
//!
//! The setup child applies every wall (capabilities dropped, `no_new_privs`,
//! `landlock_restrict_self`, the seccomp filter) and only then execs the init, which
//! inherits all of them, as does the program's process it forks. The
//! alternative, exec the init first and let it apply Landlock and seccomp itself, would
//! put the BPF program and the ruleset fd into the init's protocol and give the init, a
//! process inside the sandbox, a window without walls. In this order the init is under exactly the program's
//! domain by construction: the same seccomp filter, the same Landlock domain, no
//! capability, `no_new_privs`. (One exception, a narrower program: on layer 2 a root
//! host's shared Landlock layer is entered by the program's process alone, so that its
//! hundreds of rules are copied once per command; the init stays under the command's own
//! layer, see `child/walls.rs`.) Both walls let the exec of the memfd through, and that is
//! sound:
//!
//! - seccomp does not filter `execveat`;
//! - Landlock's execute right is checked on the file being executed, and a memfd lives on
//!   the kernel's internal shmem mount, which Landlock lets through like other internal
//!   file systems (nsfs, pipefs): a process under any Landlock domain may execute a memfd
//!   it holds. The image fd is close-on-exec, so the init does not hold it, and the
//!   program never gets it.
//!
//! The test `the_init_is_under_the_programs_walls` (tests/init.rs) checks from inside that
//! PID 1 reports `Seccomp: 2`, `NoNewPrivs: 1` and no capability, and that the program,
//! its child, is confined by Landlock. The program's own domain is nested one level deeper
//! (`init/src/program.rs`), so that it can never trace the init or open its `/proc` files.
//!
//! # The image fd
//!
//! `MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC`, then `F_SEAL_SEAL | F_SEAL_SHRINK |
//! F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_EXEC`: nobody, the host included, can change the
//! image or its mode once sealed (runc's answer to CVE-2019-5736; the init is also
//! non-dumpable, so `/proc/1/exe` is closed to the program). A host with
//! `vm.memfd_noexec = 2` forbids executable memfds; spawning then fails with an error
//! naming the call.

use std::ffi::{CString, c_char};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::OnceLock;

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use stockade_init::protocol::{self, flag};

use crate::error::SpawnError;
use crate::plan::{Plan, Step};
use crate::policy::Layer;

pub use stockade_init::protocol::KILL_REQUEST;

/// The flags for the init of a command of `plan`, or `None` when the layer runs the
/// program without an init (passthrough).
///
/// `scoped_signals`: the Landlock ruleset scopes signals (ABI >= 6). On layer 2 the
/// program then enters a nested domain that cannot signal the init.
/// `controlling_terminal`: the stdio fd whose terminal the program takes as its controlling
/// terminal, after its `setsid`.
pub fn flags(
    plan: &Plan,
    scoped_signals: bool,
    controlling_terminal: Option<RawFd>,
) -> Option<u32> {
    let mut flags = 0;
    match plan.layer {
        Layer::Full => {}
        Layer::Landlock => {
            flags |= flag::SUBREAPER;
            if scoped_signals {
                flags |= flag::SCOPE_SIGNALS;
            }
        }
        Layer::Passthrough => return None,
    }
    if plan.steps.contains(&Step::NewSession) {
        flags |= flag::NEW_SESSION;
    }
    if let Some(fd) = controlling_terminal {
        // 0, 1 or 2 (`terminal_among`); anything else would not fit the two bits.
        flags |= flag::controlling_terminal(fd.clamp(0, 2) as u32);
    }
    Some(flags)
}

/// The sealed memfd holding the init image, created on first use and kept for the life of
/// the process (close-on-exec: no program the host runs inherits it).
///
/// # Errors
///
/// [`SpawnError::Os`] naming the call that failed (`memfd_create`, the write, the seals).
pub fn image_fd() -> Result<RawFd, SpawnError> {
    static MEMFD: OnceLock<Result<OwnedFd, (&'static str, i32)>> = OnceLock::new();
    match MEMFD.get_or_init(create_image_fd) {
        Ok(fd) => Ok(fd.as_raw_fd()),
        Err((call, errno)) => Err(SpawnError::Os {
            call,
            source: io::Error::from_raw_os_error(*errno),
        }),
    }
}

fn create_image_fd() -> Result<OwnedFd, (&'static str, i32)> {
    let errno = |e: nix::Error| e as i32;
    let base = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING;
    // MFD_EXEC (Linux 6.3) says "executable" explicitly, which `vm.memfd_noexec = 1` asks
    // for; older kernels do not know the flag (EINVAL) and make every memfd executable.
    let exec = MFdFlags::from_bits_retain(libc::MFD_EXEC);
    let fd = match memfd_create(c"stockade-init", base | exec) {
        Err(nix::Error::EINVAL) => memfd_create(c"stockade-init", base),
        r => r,
    }
    .map_err(|e| ("memfd_create(stockade-init, MFD_EXEC)", errno(e)))?;
    let fd = above_stdio(fd).map_err(|e| ("fcntl(F_DUPFD_CLOEXEC)", errno(e)))?;
    let mut file = File::from(fd);
    file.write_all(stockade_init::IMAGE).map_err(|e| {
        (
            "write the init image",
            e.raw_os_error().unwrap_or(libc::EIO),
        )
    })?;
    let fd = OwnedFd::from(file);
    let seals = SealFlag::F_SEAL_SEAL
        | SealFlag::F_SEAL_SHRINK
        | SealFlag::F_SEAL_GROW
        | SealFlag::F_SEAL_WRITE;
    // F_SEAL_EXEC (Linux 6.3) also freezes the mode bits; older kernels refuse it (EINVAL).
    let exec_seal = SealFlag::from_bits_retain(libc::F_SEAL_EXEC);
    match fcntl(&fd, FcntlArg::F_ADD_SEALS(seals | exec_seal)) {
        Err(nix::Error::EINVAL) => fcntl(&fd, FcntlArg::F_ADD_SEALS(seals)),
        r => r,
    }
    .map_err(|e| ("fcntl(F_ADD_SEALS)", errno(e)))?;
    Ok(fd)
}

/// `fd` itself when it is 3 or above, else a close-on-exec duplicate that is (std's
/// `try_clone` duplicates with `F_DUPFD_CLOEXEC` from 3): the setup child puts stdio on 0,
/// 1 and 2 and would overwrite a kept fd there.
pub fn above_stdio(fd: OwnedFd) -> nix::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    let dup = fd
        .try_clone()
        .map_err(|e| nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EBADF)))?;
    if dup.as_raw_fd() > 2 {
        Ok(dup)
    } else {
        Err(nix::Error::EBADF)
    }
}

/// The status pipe: (read end for the host, write end for the init), both close-on-exec
/// and non-blocking, the write end above the stdio fds.
///
/// # Errors
///
/// [`SpawnError::Os`] when `pipe2` or `fcntl` fails.
pub fn status_pipe() -> Result<(OwnedFd, OwnedFd), SpawnError> {
    let os = |e: nix::Error| SpawnError::Os {
        call: "pipe2 (init status)",
        source: e.into(),
    };
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
        .map_err(os)?;
    Ok((r, above_stdio(w).map_err(os)?))
}

/// How the setup child execs the init: the image fd, the pipe ends the init inherits, the
/// flags, and the init's whole argv ([`protocol`]'s table), built before `clone`.
#[derive(Debug)]
pub struct Launch {
    /// The sealed memfd ([`image_fd`]).
    pub image_fd: RawFd,
    /// The setup report pipe's write end.
    pub report_fd: RawFd,
    /// The status pipe's write end.
    pub status_fd: RawFd,
    /// Bits of [`flag`]: how the program's process starts, and whether the init is a
    /// subreaper.
    pub flags: u32,
    /// The step indices of the program's start.
    pub steps: Steps,
    /// Backing storage of the init's own arguments: read through `argv` only.
    header: Vec<CString>,
    /// The NULL-terminated argv (made by `Launch::finish`): pointers into `header` and
    /// into the program's strings; empty until then.
    pub argv: Vec<*const c_char>,
}

// SAFETY: the pointers in `argv` point into `header` (owned here) and into the `CString`s
// of the `Program` that the same `Exec` owns; their heap buffers do not move when the
// values do and are never mutated, and the setup child reads them while the owning thread
// keeps both alive (as for `Program`).
unsafe impl Send for Launch {}

/// The Landlock domain the program's process enters, nested inside the init's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// None: the command is not under Landlock.
    None,
    /// A domain the init makes that restricts nothing new ([`flag::NEST`]).
    Nest,
    /// The sandbox's shared Landlock layer, this ruleset ([`flag::SHARED_DOMAIN`]).
    Shared(RawFd),
}

/// Step indices of the program's start.
#[derive(Clone, Copy, Debug)]
pub struct Steps {
    /// A failure of the init's own setup (and of its exec);
    /// [`protocol::CONTROLLING_TERMINAL_STEP_AFTER_INIT`] after it: the program's
    /// `TIOCSCTTY`; [`protocol::PROGRAM_STEP_AFTER_INIT`] after it: the init's fork and
    /// the program's process before its exec.
    pub init: u32,
    /// A failure to execute the program.
    pub exec: u32,
}

impl Launch {
    /// The launch of the init; [`Launch::finish`] makes its argv.
    pub(crate) fn new(
        image_fd: RawFd,
        report_fd: RawFd,
        status_fd: RawFd,
        flags: u32,
        steps: Steps,
    ) -> Self {
        Launch {
            image_fd,
            report_fd,
            status_fd,
            flags,
            steps,
            header: Vec::new(),
            argv: Vec::new(),
        }
    }

    /// Makes the program's process the session server ([`protocol::session`]) instead of
    /// the program.
    pub(crate) fn serve(&mut self) {
        self.flags |= flag::SERVE;
    }

    /// Makes the init's argv: the program's process enters `domain`, with
    /// `restrict_flags` for its `landlock_restrict_self`, and execs `program`.
    pub(crate) fn finish(
        &mut self,
        program: &crate::backend::program::Program,
        domain: Domain,
        restrict_flags: u32,
    ) {
        let (bit, domain_fd) = match domain {
            Domain::None => (0, 0),
            Domain::Nest => (flag::NEST, 0),
            Domain::Shared(fd) => (flag::SHARED_DOMAIN, fd),
        };
        self.flags = self.flags & !(flag::NEST | flag::SHARED_DOMAIN) | bit;
        // Decimal digits never contain a NUL byte.
        let num = |v: i64| CString::new(v.to_string()).unwrap_or_default();
        self.header = vec![
            protocol::ARGV0.to_owned(),
            num(self.flags.into()),
            num(self.report_fd.into()),
            num(self.status_fd.into()),
            num(self.steps.init.into()),
            num(self.steps.exec.into()),
            num(domain_fd.into()),
            num(restrict_flags.into()),
            num(program.candidates.len() as i64),
        ];
        let mut argv: Vec<*const c_char> = self.header.iter().map(|s| s.as_ptr()).collect();
        argv.extend(program.candidates.iter().map(|s| s.as_ptr()));
        // The program's argv, its NULL included.
        argv.extend_from_slice(&program.argv);
        self.argv = argv;
    }
}

/// Blocks until the process of `pidfd` has exited (a zombie, or reaped since), without
/// reaping it. For a sandbox's init this is the sandbox's end: a PID namespace's init is
/// reported exited only once the kernel has killed and reaped every other process of the
/// namespace, and layer 2's init exits only after it has ended every descendant it could
/// find. False when the pidfd cannot be polled (then nothing may treat the sandbox as
/// gone).
pub fn wait_exited(pidfd: BorrowedFd<'_>) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    loop {
        let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(n) if n > 0 => {
                let revents = fds[0].revents().unwrap_or(PollFlags::empty());
                if revents.contains(PollFlags::POLLNVAL) {
                    return false;
                }
                if revents.intersects(PollFlags::POLLIN | PollFlags::POLLHUP) {
                    return true;
                }
            }
            Ok(_) | Err(nix::Error::EINTR) => {}
            // Out of memory for the poll table: try again shortly.
            Err(nix::Error::ENOMEM) => std::thread::sleep(std::time::Duration::from_millis(1)),
            Err(_) => return false,
        }
    }
}

/// Whether the process of `pidfd` has exited (a poll without waiting). A pidfd that
/// cannot be polled counts as exited: nothing may then be signalled through its number.
pub fn exited(pidfd: BorrowedFd<'_>) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => false,
        Ok(_) => true,
        Err(_) => true,
    }
}

/// A running sandbox's handle: the pidfd of its first process (the init, or the program
/// itself in passthrough) and, with an init, the status pipe.
#[derive(Debug)]
pub struct Handle {
    pidfd: OwnedFd,
    /// The status pipe's read end, when an init reports the program's status.
    status: Option<OwnedFd>,
    /// What ends the sandbox: `SIGKILL` to a PID namespace's init (the kernel then kills
    /// the namespace) or to a program without init; [`KILL_REQUEST`] to a subreaper init,
    /// which kills every descendant itself.
    kill_signal: libc::c_int,
}

impl Handle {
    /// A handle for a process started with `flags` (`None`: no init).
    pub fn new(pidfd: OwnedFd, status: Option<OwnedFd>, flags: Option<u32>) -> Handle {
        let subreaper = flags.is_some_and(|f| f & flag::SUBREAPER != 0);
        Handle {
            pidfd,
            status: if flags.is_some() { status } else { None },
            kill_signal: if subreaper {
                KILL_REQUEST
            } else {
                libc::SIGKILL
            },
        }
    }

    /// Ends the whole sandbox.
    ///
    /// # Errors
    ///
    /// The error of `pidfd_send_signal`.
    pub fn kill(&self) -> io::Result<()> {
        self.send(self.kill_signal)
    }

    /// Sends `sig` to the init (which forwards it) or to the program without an init.
    /// The caller checked that `sig` is one of the forwarded signals (`FORWARDED`).
    ///
    /// # Errors
    ///
    /// The error of `pidfd_send_signal`.
    pub fn signal(&self, sig: libc::c_int) -> io::Result<()> {
        self.send(sig)
    }

    /// A second handle that can only end the sandbox, for another thread to keep
    /// (the wall-time watchdog).
    ///
    /// # Errors
    ///
    /// The error of duplicating the pidfd.
    pub fn killer(&self) -> io::Result<Handle> {
        Ok(Handle {
            pidfd: self.pidfd.try_clone()?,
            status: None,
            kill_signal: self.kill_signal,
        })
    }

    fn send(&self, sig: libc::c_int) -> io::Result<()> {
        stockade_sys::linux::pidfd_send_signal(self.pidfd.as_fd().into(), sig)
            .map_err(|e| io::Error::from_raw_os_error(e.0))
    }

    /// The program's exit status from the init's status record, before the init itself has
    /// ended: the init writes it once the program has ended and every other process of the
    /// sandbox has been killed and reaped, then exits (in a PID namespace the namespaces'
    /// teardown takes ~0.3 ms more, which the host need not wait for).
    ///
    /// `block`: wait until the record or the pipe's end. `None`: not yet (only without
    /// `block`), or no record will come (no init, or it was killed before writing one:
    /// then its own wait status is the sandbox's, see [`Handle::exit_status`]).
    pub fn early_status(&mut self, block: bool) -> Option<ExitStatus> {
        let fd = self.status.as_ref()?;
        if block {
            let mut pfd = [nix::poll::PollFd::new(
                fd.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            while let Err(nix::Error::EINTR) =
                nix::poll::poll(&mut pfd, nix::poll::PollTimeout::NONE)
            {}
        }
        let mut buf = [0u8; protocol::STATUS_SIZE + 1];
        match nix::unistd::read(fd, &mut buf) {
            Err(nix::Error::EAGAIN | nix::Error::EINTR) => None,
            Ok(n) => {
                // A record, or the end of the pipe without one: either way the pipe has
                // nothing more to say, and the init's wait status decides from here.
                self.status = None;
                protocol::decode_status(buf.get(..n)?).map(ExitStatus::from_raw)
            }
            Err(_) => {
                self.status = None;
                None
            }
        }
    }

    /// The status pipe while it may still carry the record: readable once
    /// [`Handle::early_status`] has something to say.
    pub fn status_fd(&self) -> Option<BorrowedFd<'_>> {
        self.status.as_ref().map(AsFd::as_fd)
    }

    /// The program's exit status, given the raw wait status of the process this handle
    /// names: the init's record when it wrote one, else that process's own status (an init
    /// killed by [`Handle::kill`] ends with `SIGKILL`, as a program would).
    pub fn exit_status(&self, raw: libc::c_int) -> ExitStatus {
        let reported = self.status.as_ref().and_then(|fd| {
            let mut buf = [0u8; protocol::STATUS_SIZE + 1];
            let n = nix::unistd::read(fd, &mut buf).ok()?;
            protocol::decode_status(buf.get(..n)?)
        });
        ExitStatus::from_raw(reported.unwrap_or(raw))
    }
}

impl AsFd for Handle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }
}

impl AsRawFd for Handle {
    fn as_raw_fd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `wait_exited` returns only once the process has exited (it is a zombie then, not
    /// reaped), and at once for one that has.
    #[test]
    fn wait_exited_returns_once_the_process_has_exited() {
        use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
        use std::os::fd::FromRawFd;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read x; exit 7"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id(), 0) };
        assert!(raw >= 0, "{}", io::Error::last_os_error());
        // SAFETY: the fd was just returned by pidfd_open, and nothing else owns it.
        let pidfd = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
        let exited = || {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            matches!(
                waitid(Id::PIDFd(pidfd.as_fd()), flags),
                Ok(WaitStatus::Exited(_, 7))
            )
        };
        assert!(!exited());
        let closer = std::thread::spawn({
            let stdin = child.stdin.take();
            move || {
                std::thread::sleep(std::time::Duration::from_millis(100));
                drop(stdin);
            }
        });
        assert!(wait_exited(pidfd.as_fd()));
        assert!(exited(), "wait_exited returned before the exit");
        assert!(wait_exited(pidfd.as_fd()));
        closer.join().unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(7));
    }
    use std::ffi::CStr;

    #[test]
    fn the_image_is_a_small_static_elf() {
        let img = stockade_init::IMAGE;
        assert!(img.starts_with(b"\x7fELF"));
        assert_eq!(img[16], 2, "ET_EXEC");
        assert!(img.len() < 16 * 1024, "{} bytes", img.len());
    }

    #[test]
    fn the_image_fd_is_sealed() {
        let fd = image_fd().unwrap();
        assert!(fd > 2);
        // SAFETY: the memfd stays open for the life of the process.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let seals = SealFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GET_SEALS).unwrap());
        assert!(seals.contains(
            SealFlag::F_SEAL_SEAL
                | SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_SHRINK
        ));
        assert_eq!(
            nix::unistd::write(fd, b"x"),
            Err(nix::Error::EPERM),
            "a sealed image cannot be written"
        );
        let flags = fcntl(fd, FcntlArg::F_GETFD).unwrap();
        assert_ne!(flags & libc::FD_CLOEXEC, 0);
    }

    #[test]
    fn the_argv_carries_the_arguments_the_candidates_then_the_programs_argv() {
        let program = crate::backend::program::Program::new(
            std::ffi::OsStr::new("prog"),
            vec!["prog".into(), "-x".into()],
            vec![("PATH".into(), "/a:/b".into())],
            &[],
        )
        .unwrap();
        let mut l = Launch::new(9, 5, 6, 3, Steps { init: 41, exec: 40 });
        let text = |l: &Launch| -> Vec<String> {
            assert!(l.argv.last().unwrap().is_null());
            l.argv[..l.argv.len() - 1]
                .iter()
                // SAFETY: every pointer but the last points into a live CString of `l` or
                // `program`.
                .map(|&p| unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned())
                .collect()
        };
        l.finish(&program, Domain::Nest, 0);
        let args = text(&l);
        let nest = (3 | flag::NEST).to_string();
        assert_eq!(
            args,
            [
                "stockade-init",
                &nest,
                "5",
                "6",
                "41",
                "40",
                "0",
                "0",
                "2",
                "/a/prog",
                "/b/prog",
                "prog",
                "-x"
            ]
        );
        let parse = |args: &[String]| {
            protocol::Config::parse(args.len(), |i| args.get(i).map(|s| s.as_bytes())).unwrap()
        };
        let c = parse(&args);
        assert_eq!(
            (c.report_fd, c.status_fd, c.init_step, c.exec_step),
            (5, 6, 41, 40)
        );
        assert!(c.has(flag::NEST) && c.domain_fd.is_none());
        assert_eq!(args[c.program_argv()], "prog");
        // Finished again (the shared layer, a session): one domain, the flags kept.
        l.serve();
        l.finish(&program, Domain::Shared(12), 2);
        let c = parse(&text(&l));
        assert_eq!((c.domain_fd, c.restrict_flags), (Some(12), 2));
        assert!(!c.has(flag::NEST) && c.has(flag::SERVE) && c.has(flag::SUBREAPER));
        l.finish(&program, Domain::None, 0);
        let c = parse(&text(&l));
        assert!(!c.has(flag::NEST) && !c.has(flag::SHARED_DOMAIN) && c.domain_fd.is_none());
    }
}
