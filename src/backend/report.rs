//! The setup report: how every launcher's child tells its parent "step N failed with
//! errno E", and how the parent tells that apart from "the program was exec'd" and from
//! "the child died on the way".
//!
//! # Protocol
//!
//! Before `clone`/`fork` the parent makes an `O_CLOEXEC` pipe. The child either execs
//! (the kernel closes its write end: the parent reads EOF, zero bytes) or writes exactly
//! one [`Record`] in one `write(2)` ([`send`]) and exits. On the wire a record is a
//! 16-byte header of native-endian words (magic [`MAGIC`], step, errno, message length)
//! followed by exactly that many message bytes (only macOS's `sandbox_init` sends one, at
//! most [`MESSAGE_LEN`]). At most [`MAX_SIZE`] bytes, below `PIPE_BUF` on every system
//! (512 on macOS, the POSIX minimum), so the one write is atomic. The sandbox's init
//! (`stockade_init::protocol::setup_record`) writes the same 16-byte header, from its own
//! image.
//!
//! The parent reads to EOF ([`await_exec`]): one whole record is decoded; anything else
//! is [`SpawnError::Protocol`]. It names the step from its own copy of the plan
//! ([`describe_step`]), so the child never builds a string.
//!
//! # EOF: exec, or death
//!
//! EOF comes when the last write end closes: at `execve` (close-on-exec) or when the
//! child exits (exit closes every fd). A child killed before it exec'd (`SIGKILL`, a
//! seccomp kill, a fault) or that exits without writing the record (the write failed)
//! gives the same zero bytes as a successful exec, and the child's wait status cannot
//! tell them apart either: a program that is exec'd and killed at once ends the same way.
//! Nor can "is it still alive?" tell: an exiting process closes its fds before it becomes
//! a zombie, so a child that is dying may look alive just after EOF.
//!
//! So the parent asks the kernel whether the child ever exec'd, which survives its death:
//! on Linux the task flag `PF_FORKNOEXEC` ("forked but didn't exec"), set by `fork` and
//! `clone` and cleared by `execve` before it closes the close-on-exec fds, and kept in
//! the zombie (`/proc/PID/stat`, field 9). EOF with the flag still set means the child's
//! copy closed at exit: the parent waits for it and reports [`Ending::Died`] with its
//! status. The pid cannot name another process meanwhile: it is the parent's own unreaped
//! child. Where the kernel does not say (no `/proc` mounted; other systems, see
//! [`exec_happened`]), EOF counts as exec, as it always did.
//!
//! With the sandbox's init, the direct child is the init: its exec is what is checked
//! here. The init's own fork of the program reports its failures on the same pipe; a
//! program process that dies silently before its exec shows as the program's status.

use std::io::Read;
use std::os::fd::{OwnedFd, RawFd};
use std::path::Path;
use std::process::ExitStatus;

use crate::error::{SetupStep, SpawnError};
use crate::plan::Plan;

/// `"STKD"`: marks a record, so that stray bytes are a protocol error and not a step.
pub const MAGIC: u32 = u32::from_be_bytes(*b"STKD");

/// The size of a record's header: magic, step, errno, message length.
pub const HEADER: usize = 16;

/// The most message bytes a record carries (`sandbox_init`'s, `macos::REPORT_LEN`).
pub const MESSAGE_LEN: usize = 256;

/// The largest record on the wire.
pub const MAX_SIZE: usize = HEADER + MESSAGE_LEN;

// The init writes the same header from its own image.
const _: () = assert!(HEADER == stockade_init::protocol::SETUP_RECORD_SIZE);
const _: () = assert!(MAGIC == stockade_init::protocol::SETUP_MAGIC);
// 512 is macOS's PIPE_BUF and POSIX's minimum: one write of a record is atomic.
const _: () = assert!(MAX_SIZE <= 512);

/// Index of the per-command steps after the plan's own steps.
pub mod extra {
    /// Moving stdio into place.
    pub const STDIO: u32 = 0;
    /// Closing inherited fds.
    pub const CLOSE_FDS: u32 = 1;
    /// Changing to the working directory.
    pub const CHDIR: u32 = 2;
    /// Running the program.
    pub const EXEC: u32 = 3;
    /// Starting the sandbox's init (its exec in the setup child, its own setup inside
    /// it). Linux only.
    pub const INIT: u32 = 4;
    /// Taking the terminal on a stdio fd as the program's controlling terminal
    /// ([`crate::plan::Step::ControllingTerminal`]): in the setup child, or in the init's
    /// fork of the program, which reports it as the step after [`INIT`].
    pub const CONTROLLING_TERMINAL: u32 = 5;
    /// Joining the command's cgroups (Linux only).
    pub const CGROUP: u32 = 6;
    /// The init's fork of the program's process, and that process's set-up before its
    /// exec, reported as the step [`PROGRAM_PROCESS`] after [`INIT`]. Linux only.
    pub const PROGRAM_PROCESS: u32 = 7;
}

// The init reports a failed TIOCSCTTY as its own step + 1, its fork and the program's
// process's set-up as its own step + 3.
const _: () = assert!(
    extra::CONTROLLING_TERMINAL
        == extra::INIT + stockade_init::protocol::CONTROLLING_TERMINAL_STEP_AFTER_INIT
);
const _: () = assert!(
    extra::PROGRAM_PROCESS == extra::INIT + stockade_init::protocol::PROGRAM_STEP_AFTER_INIT
);

/// One setup failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Index of the failing step (the plan's steps, then the per-command ones).
    pub step: u32,
    /// The errno the step saw (0 for `sandbox_init`, which reports a message instead).
    pub errno: i32,
    /// How many bytes of `message` are used (at most [`MESSAGE_LEN`]).
    len: u32,
    /// `sandbox_init`'s message, not NUL-terminated.
    message: [u8; MESSAGE_LEN],
}

impl Record {
    /// The record for `step` failing with `errno`.
    pub const fn new(step: u32, errno: i32) -> Self {
        Record {
            step,
            errno,
            len: 0,
            message: [0; MESSAGE_LEN],
        }
    }

    /// The record for `sandbox_init` (step `step`) refusing the profile with the first
    /// `len` bytes of `message`. Only macOS's child sends one.
    #[cfg_attr(not(any(target_os = "macos", feature = "internals")), allow(dead_code))]
    pub const fn with_message(step: u32, message: [u8; MESSAGE_LEN], len: usize) -> Self {
        let len = if len > MESSAGE_LEN { MESSAGE_LEN } else { len };
        Record {
            step,
            errno: 0,
            len: len as u32,
            message,
        }
    }

    /// The used part of the message.
    pub fn message(&self) -> &[u8] {
        self.message.get(..self.len as usize).unwrap_or(&[])
    }

    /// Writes the wire bytes into `out` and returns how many. Allocation-free and without
    /// indexing: the child calls it.
    pub fn encode(&self, out: &mut [u8; MAX_SIZE]) -> usize {
        let words = [MAGIC, self.step, self.errno as u32, self.len];
        let header = words.iter().flat_map(|w| w.to_ne_bytes());
        for (dst, src) in out
            .iter_mut()
            .zip(header.chain(self.message().iter().copied()))
        {
            *dst = src;
        }
        HEADER + self.message().len()
    }

    /// Decodes wire bytes; `None` unless they form one whole record: the magic, and
    /// exactly as many message bytes as the header says.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let word = |i: usize| {
            let b: [u8; 4] = bytes.get(i..i + 4)?.try_into().ok()?;
            Some(u32::from_ne_bytes(b))
        };
        let (magic, len) = (word(0)?, word(12)? as usize);
        if magic != MAGIC || len > MESSAGE_LEN || bytes.len() != HEADER + len {
            return None;
        }
        let mut message = [0u8; MESSAGE_LEN];
        message
            .get_mut(..len)?
            .copy_from_slice(bytes.get(HEADER..)?);
        Some(Record {
            step: word(4)?,
            errno: word(8)? as i32,
            len: len as u32,
            message,
        })
    }
}

/// Child side: writes `record` to the report pipe's write end `fd` in one `write(2)`.
/// Allocation-free; on Linux it goes through `stockade_sys` and leaves `errno` alone (a
/// `CLONE_VM` child shares the cloning thread's). If the write fails the parent sees EOF
/// from a child that never exec'd: [`Ending::Died`], still not a success.
pub fn send(fd: RawFd, record: &Record) {
    let mut buf = [0u8; MAX_SIZE];
    let len = record.encode(&mut buf);
    raw::write(fd, buf.get(..len).unwrap_or(&buf));
}

#[cfg(target_os = "linux")]
mod raw {
    pub(super) fn write(fd: std::os::fd::RawFd, bytes: &[u8]) {
        // SAFETY: the callers pass the report pipe's write end, which the parent keeps open
        // until this child has exec'd or exited (and `close_fds` keeps); a bad number only
        // makes the write fail with EBADF.
        let fd = unsafe { stockade_sys::BorrowedFd::borrow_raw(fd) };
        let _ = stockade_sys::linux::write(fd, bytes);
    }
}

#[cfg(not(target_os = "linux"))]
mod raw {
    pub(super) fn write(fd: std::os::fd::RawFd, bytes: &[u8]) {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes; the kernel only reads
        // it. Called in a forked child, which has its own `errno`.
        let _ = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    }
}

/// How a child ended its setup.
#[derive(Debug)]
pub enum Ending {
    /// The child exec'd (EOF, and the kernel says it exec'd or cannot say).
    Exec,
    /// Step `record.step` failed; the child has been reaped.
    Failed(Box<Record>),
    /// The child ended without a record and without exec (killed, or it exited on its
    /// own); it has been reaped, this is its status.
    Died(ExitStatus),
}

/// Parent side: reads the report pipe to EOF (retrying on `EINTR`) and decides how child
/// `pid` ended its setup (see the module docs). A child that did not exec is reaped.
///
/// The parent's own write end must be closed before, or EOF never comes.
///
/// # Errors
///
/// [`SpawnError::Os`] when `read` or `waitpid` fails, [`SpawnError::Protocol`] when the
/// bytes are not one whole record.
pub fn await_exec(read_end: OwnedFd, pid: libc::pid_t) -> Result<Ending, SpawnError> {
    // Room for more than one record: extra bytes are a protocol error, not ignored.
    let mut buf = [0u8; 2 * MAX_SIZE];
    let len = read_to_eof(read_end, &mut buf)?;
    if len == 0 {
        if exec_happened(pid) != Some(false) {
            return Ok(Ending::Exec);
        }
        return Ok(Ending::Died(reap(pid)?));
    }
    // Setup failed: the child has exited or is about to; reap it so no zombie is left.
    reap(pid)?;
    match Record::decode(buf.get(..len).unwrap_or(&[])) {
        Some(r) => Ok(Ending::Failed(Box::new(r))),
        None => Err(SpawnError::Protocol(len)),
    }
}

/// Reads `read_end` until EOF or until `buf` is full.
fn read_to_eof(read_end: OwnedFd, buf: &mut [u8]) -> Result<usize, SpawnError> {
    let mut file = std::fs::File::from(read_end);
    let mut len = 0;
    while let Some(rest) = buf.get_mut(len..) {
        if rest.is_empty() {
            break;
        }
        match file.read(rest) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(SpawnError::Os {
                    call: "read",
                    source,
                });
            }
        }
    }
    Ok(len)
}

/// Waits for child `pid` (retrying on `EINTR`) and returns its status.
fn reap(pid: libc::pid_t) -> Result<ExitStatus, SpawnError> {
    let mut raw = 0;
    loop {
        // SAFETY: `raw` is a valid out-pointer; `pid` is this process's unreaped child.
        let r = unsafe { libc::waitpid(pid, &mut raw, 0) };
        if r == pid {
            return Ok(std::os::unix::process::ExitStatusExt::from_raw(raw));
        }
        let source = std::io::Error::last_os_error();
        if source.kind() != std::io::ErrorKind::Interrupted {
            return Err(SpawnError::Os {
                call: "waitpid",
                source,
            });
        }
    }
}

/// Whether child `pid` has exec'd since it was forked, by the kernel's word: `Some(false)`
/// only when the kernel says it has not. `None` when it cannot say.
///
/// # Platform
///
/// Linux: `PF_FORKNOEXEC` in `/proc/PID/stat`, kept in the zombie. Elsewhere: `None`
/// (macOS's `proc_pidinfo` flag `PROC_FLAG_EXEC` is the equivalent, not used yet).
pub fn exec_happened(pid: libc::pid_t) -> Option<bool> {
    evidence::exec_happened(pid)
}

#[cfg(target_os = "linux")]
mod evidence {
    use crate::probe::stat::ProcStat;

    /// `PF_FORKNOEXEC` (`include/linux/sched.h`): forked but didn't exec. Kept in a
    /// zombie's line.
    const PF_FORKNOEXEC: u64 = 0x40;

    pub(super) fn exec_happened(pid: libc::pid_t) -> Option<bool> {
        // One read: the kernel makes the whole line for it (see `ProcStat::of`).
        let stat = crate::probe::read_first(format!("/proc/{pid}/stat"), 1024).ok()?;
        ProcStat::parse(&stat).map(|s| s.flags & PF_FORKNOEXEC == 0)
    }
}

#[cfg(not(target_os = "linux"))]
mod evidence {
    pub(super) fn exec_happened(_pid: libc::pid_t) -> Option<bool> {
        None
    }
}

/// Describes step `index` of a child that ran `plan` and then the per-command steps
/// ([`extra`]), as the error shows it (`bind /opt`, `chdir /ws/x`);
/// `controlling_terminal` is the command's stdio fd for that step, or -1.
pub fn describe_step(
    plan: &Plan,
    index: u32,
    cwd: Option<&Path>,
    program: &str,
    controlling_terminal: i32,
) -> SetupStep {
    if let Some(step) = plan.steps.get(index as usize) {
        return SetupStep::from(step);
    }
    match index.checked_sub(plan.steps.len() as u32) {
        Some(extra::STDIO) => SetupStep::Stdio,
        Some(extra::CLOSE_FDS) => SetupStep::CloseFds,
        Some(extra::CHDIR) => SetupStep::Chdir {
            path: cwd.unwrap_or(Path::new("?")).to_path_buf(),
        },
        Some(extra::EXEC) => SetupStep::Exec {
            program: program.to_string(),
        },
        Some(extra::INIT) => SetupStep::Init,
        Some(extra::CONTROLLING_TERMINAL) => SetupStep::ControllingTerminal {
            fd: controlling_terminal,
        },
        Some(extra::CGROUP) => SetupStep::JoinCgroup,
        Some(extra::PROGRAM_PROCESS) => SetupStep::ProgramProcess,
        _ => SetupStep::Unknown(index),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(r: &Record) -> Vec<u8> {
        let mut buf = [0u8; MAX_SIZE];
        let n = r.encode(&mut buf);
        buf[..n].to_vec()
    }

    #[test]
    fn errno_records_are_the_16_byte_header_and_round_trip() {
        let r = Record::new(7, libc::ENOENT);
        let bytes = wire(&r);
        assert_eq!(bytes.len(), HEADER);
        assert_eq!(Record::decode(&bytes), Some(r));
        assert_eq!(Record::decode(&bytes).unwrap().message(), b"");
    }

    #[test]
    fn the_inits_records_decode_as_ours() {
        let bytes = stockade_init::protocol::setup_record(5, libc::EACCES);
        assert_eq!(Record::decode(&bytes), Some(Record::new(5, libc::EACCES)));
    }

    #[test]
    fn message_records_carry_exactly_their_message() {
        let mut m = [0u8; MESSAGE_LEN];
        m[..11].copy_from_slice(b"bad profile");
        let r = Record::with_message(2, m, 11);
        let bytes = wire(&r);
        assert_eq!(bytes.len(), HEADER + 11);
        let back = Record::decode(&bytes).unwrap();
        assert_eq!((back.step, back.message()), (2, &b"bad profile"[..]));
        assert_eq!(
            Record::with_message(2, m, 9999).message().len(),
            MESSAGE_LEN
        );
        assert_eq!(wire(&Record::with_message(2, m, 9999)).len(), MAX_SIZE);
    }

    #[test]
    fn malformed_bytes_are_refused() {
        let r = wire(&Record::new(1, 2));
        assert_eq!(Record::decode(&r[..HEADER - 1]), None);
        assert_eq!(Record::decode(&[0u8; HEADER]), None);
        // Two records, or a record with a byte more or less than it says.
        assert_eq!(Record::decode(&[r.clone(), r.clone()].concat()), None);
        let mut long = r.clone();
        long[12..16].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(Record::decode(&long), None);
        long.extend_from_slice(b"abc");
        assert!(Record::decode(&long).is_some());
        long[12..16].copy_from_slice(&(MESSAGE_LEN as u32 + 1).to_ne_bytes());
        assert_eq!(Record::decode(&long), None);
    }

    #[test]
    fn the_extra_steps_are_named() {
        let plan = Plan {
            layer: crate::policy::Layer::Passthrough,
            namespaces: crate::plan::Namespaces::default(),
            workspace: "/ws".into(),
            steps: vec![crate::plan::Step::NewSession],
            path: vec![],
            roots: vec![],
            private_tmp: false,
            walls: Default::default(),
            egress: None,
        };
        let d = |i| describe_step(&plan, i, Some(Path::new("/ws/x")), "prog", 1);
        assert_eq!(d(0), SetupStep::NewSession);
        assert_eq!(d(1 + extra::STDIO), SetupStep::Stdio);
        assert_eq!(d(1 + extra::CHDIR).to_string(), "chdir /ws/x");
        assert_eq!(d(1 + extra::CHDIR).path(), Some(Path::new("/ws/x")));
        assert_eq!(d(1 + extra::EXEC).to_string(), "exec prog");
        assert_eq!(d(1 + extra::INIT).to_string(), "start the sandbox's init");
        assert_eq!(d(1 + extra::PROGRAM_PROCESS), SetupStep::ProgramProcess);
        assert_eq!(
            d(1 + extra::CONTROLLING_TERMINAL).to_string(),
            "make the terminal on stdout the controlling terminal (TIOCSCTTY)"
        );
        assert_eq!(d(99), SetupStep::Unknown(99));
    }

    /// A child that exec'd and then died at once is told apart from one that died before
    /// exec: the kernel's flag survives in the zombie, and only exec clears it.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_kernel_says_whether_a_dead_child_had_exec_d() {
        use std::os::unix::process::ExitStatusExt;
        // Exec'd, then killed by SIGKILL at once.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "kill -KILL $$"])
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        wait_zombie(pid);
        assert_eq!(exec_happened(pid), Some(true));
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        // Killed without exec: a fork that waits to be killed.
        // SAFETY: the child only calls pause(2) in a loop (async-signal-safe) until killed.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            loop {
                // SAFETY: pause takes no arguments.
                unsafe { libc::pause() };
            }
        }
        // SAFETY: `pid` is this test's child.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
        wait_zombie(pid);
        assert_eq!(exec_happened(pid), Some(false));
        assert_eq!(reap(pid).unwrap().signal(), Some(libc::SIGKILL));
    }

    #[cfg(target_os = "linux")]
    fn wait_zombie(pid: libc::pid_t) {
        let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
        let flags = libc::WEXITED | libc::WNOWAIT;
        // SAFETY: `info` is a valid out-pointer; `pid` is this test's unreaped child and
        // WNOWAIT leaves it a zombie.
        let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, info.as_mut_ptr(), flags) };
        assert_eq!(r, 0);
    }
}
