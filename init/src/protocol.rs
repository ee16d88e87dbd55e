//! What the host and the init say to each other. Both sides compile this file: the host as
//! part of `stockade-init`'s library, the init image by `#[path]` from its own crate root.
//!
//! # Start: argv
//!
//! The host's setup child, once every wall is up, execs the init with this argv (every
//! number in decimal ASCII) and the program's environment:
//!
//! | index | content |
//! | --- | --- |
//! | 0 | [`ARGV0`] |
//! | [`arg::FLAGS`] | bits of [`flag`] |
//! | [`arg::REPORT_FD`] | write end of the setup report pipe (the host reads to EOF) |
//! | [`arg::STATUS_FD`] | write end of the status pipe (one [`STATUS_SIZE`]-byte record) |
//! | [`arg::INIT_STEP`] | step index reported when the init's own setup fails (plus [`CONTROLLING_TERMINAL_STEP_AFTER_INIT`] for the program's terminal, plus [`PROGRAM_STEP_AFTER_INIT`] for the fork and the program's process before its exec) |
//! | [`arg::EXEC_STEP`] | step index reported when the program cannot be exec'd |
//! | [`arg::DOMAIN_FD`] | with [`flag::SHARED_DOMAIN`], the Landlock ruleset the program's process enters; else `0` |
//! | [`arg::RESTRICT_FLAGS`] | the flags of that process's `landlock_restrict_self` |
//! | [`arg::CANDIDATES`] | the number N of candidate paths that follow |
//! | [`arg::FIRST_CANDIDATE`] … | N candidate paths, tried in order as `execvp` does |
//! | then | the program's `argv[0]`, its arguments |
//!
//! Every argument is the host's own, built before `clone`. The init parses numbers and
//! passes the rest to `execve` as it is.
//!
//! # The program's process: a fork of the init
//!
//! Until the init's exec, PID 1 (or layer 2's subreaper) is the setup child, which shares
//! the host's memory and holds the host's pipes. So the program must not run a single
//! instruction before that exec. It cannot, by construction: the init starts the program's
//! process itself, with `fork`, after it has made itself non-dumpable. That process is a
//! copy of this image (no page of the host's memory was ever mapped in it); it takes its
//! session, enters a Landlock domain nested inside the init's (so that it can never trace
//! the init, open its `/proc/1/{mem,fd,environ}`, or, with signals scoped, signal it),
//! takes its terminal, unblocks its signals and execs the program.
//!
//! # While running: signals
//!
//! The host signals the init (a pidfd in the host); the init forwards each signal of
//! [`FORWARDED`] to the program. [`KILL_REQUEST`] asks a subreaper init (layer 2) to end
//! every process of the sandbox; in a PID namespace the host sends `SIGKILL` instead.
//!
//! # End: two pipes
//!
//! - The setup report pipe carries one [`SETUP_RECORD_SIZE`]-byte record when the program
//!   cannot be started (the same record the setup child writes, see
//!   `stockade::backend::report`), and nothing otherwise: the host reads EOF once the
//!   program has been exec'd (the init closes its copy, the program's exec the other).
//! - The status pipe carries one [`STATUS_SIZE`]-byte record with the program's raw wait
//!   status when it has ended and every other process of the sandbox has been killed and
//!   reaped: the host's wait returns there, without waiting for the init's own exit (and
//!   reaps the init later); what must not run beside a live sandbox (the `.git` merge)
//!   waits for the init's exit instead. No record means the init itself was killed
//!   (`SIGKILL` from the host): then the init's own status is the sandbox's. Neither
//!   pipe's write end is ever within the program's reach: the init holds them, and the
//!   program can neither trace the init nor open its `/proc/1/fd`.

use core::ffi::CStr;

/// `argv[0]` of the init, and its name (`comm`) inside.
pub const ARGV0: &CStr = c"stockade-init";

/// Positions of the arguments.
pub mod arg {
    /// The flags ([`super::flag`]).
    pub const FLAGS: usize = 1;
    /// The setup report pipe's write end.
    pub const REPORT_FD: usize = 2;
    /// The status pipe's write end.
    pub const STATUS_FD: usize = 3;
    /// The step index for a failure of the init's own setup (see
    /// [`super::PROGRAM_STEP_AFTER_INIT`] for the program's process).
    pub const INIT_STEP: usize = 4;
    /// The step index of a failed exec of the program.
    pub const EXEC_STEP: usize = 5;
    /// The shared Landlock layer's ruleset ([`super::flag::SHARED_DOMAIN`]), or `0`.
    pub const DOMAIN_FD: usize = 6;
    /// The flags of the program's process's `landlock_restrict_self`.
    pub const RESTRICT_FLAGS: usize = 7;
    /// The number of candidate paths.
    pub const CANDIDATES: usize = 8;
    /// The first candidate path.
    pub const FIRST_CANDIDATE: usize = 9;
    /// The most candidate paths accepted (more `PATH` directories than any real one has).
    pub const MAX_CANDIDATES: u32 = 4096;
}

/// Exit status of the program's process when the program could not be started (the host
/// has the record).
pub const EXEC_FAILED: i32 = 127;
/// Exit status of the program's process whose init went away before it could start.
pub const ORPHANED: i32 = 125;

/// A warm session's protocol: the image's third role, the *session server*, and what the
/// host and it say over the session's control socket.
///
/// # The server
///
/// A session is a sandbox whose init is told to serve ([`flag::SERVE`]): the program's
/// process, forked by the init as for a program, closes the report pipe (the host's spawn
/// returns) and, instead of exec'ing a program, serves the control socket on its fd 0 (a `SOCK_SEQPACKET` socket whose
/// other end the host holds): it keeps the next commands' supervisors and program's
/// processes forked ahead, the latter blocked on that socket, each to take one request.
///
/// # A request
///
/// One message per command: a [`HEADER_SIZE`](session::HEADER_SIZE)-byte header
/// (native-endian `u32`s: [`REQUEST_MAGIC`](session::REQUEST_MAGIC), flags, the number
/// of candidate paths, of arguments, of environment entries), then as many
/// NUL-terminated strings as the header says plus one, in order: the working directory,
/// the candidate paths (tried as `execvp` does), `argv`, the environment. It carries
/// [`FDS`](session::FDS) fds (`SCM_RIGHTS`): stdin, stdout, stderr, the write end of the
/// command's report pipe, and one end of the command's own reply socket
/// (`SOCK_SEQPACKET`).
///
/// # The reply
///
/// On the command's reply socket, never the control socket: one
/// [`REPLY_SIZE`](session::REPLY_SIZE)-byte record ([`REPLY_MAGIC`](session::REPLY_MAGIC),
/// errno 0) carrying [`REPLY_FDS`](session::REPLY_FDS) fds: a pidfd of the command's
/// supervisor, which the host signals and polls as it does a sandbox's init, and the read
/// end of the command's status pipe, on which the supervisor writes the program's raw
/// wait status as a status record, as the init does. The program's process sends it
/// before anything else, so the host reads the report pipe first (one wake: its EOF says
/// the program runs, or a setup record of [`step`](session::step) why not) and then finds
/// the reply waiting.
pub mod session {
    use core::ffi::CStr;

    /// The name of the session server's process, and the session's program name.
    pub const SERVE_ARGV0: &CStr = c"stockade-serve";
    /// `"STKQ"`, the magic of a request.
    pub const REQUEST_MAGIC: u32 = u32::from_be_bytes(*b"STKQ");
    /// Size of a request's header.
    pub const HEADER_SIZE: usize = 20;
    /// The largest request (header and strings): what one `SOCK_SEQPACKET` message of the
    /// default socket buffer holds, with room to spare.
    pub const MAX_REQUEST: usize = 192 * 1024;
    /// The most strings a request carries (directory, candidates, arguments, environment).
    pub const MAX_STRINGS: usize = 8192;
    /// The fds a request carries: stdin, stdout, stderr, the report pipe's write end and
    /// the reply socket.
    pub const FDS: usize = 5;
    /// The index of the report pipe among a request's fds.
    pub const REPORT: usize = 3;
    /// The fds a reply carries: a pidfd of the command's supervisor and the read end of
    /// the command's status pipe.
    pub const REPLY_FDS: usize = 2;
    /// Request flag: the program starts a session of its own (`setsid`).
    pub const NEW_SESSION: u32 = 1;
    /// Request flag: the processes the program leaves running when it ends live on until
    /// the session closes (the host's opt-in, `Command::keep_background`).
    pub const KEEP_BACKGROUND: u32 = 2;
    /// `"STKP"`, the magic of a reply.
    pub const REPLY_MAGIC: u32 = u32::from_be_bytes(*b"STKP");
    /// Size of a reply.
    pub const REPLY_SIZE: usize = 8;

    /// The steps a command's start reports failing (in a setup record's step field).
    pub mod step {
        /// Entering the command's own Landlock domains.
        pub const DOMAIN: u32 = 1;
        /// The request did not parse (the host's bug, never the program's).
        pub const REQUEST: u32 = 2;
        /// The program's `setsid`.
        pub const SESSION: u32 = 3;
        /// Putting the stdio fds in place.
        pub const STDIO: u32 = 4;
        /// `chdir` to the working directory.
        pub const CWD: u32 = 5;
        /// Executing the program.
        pub const EXEC: u32 = 6;
        /// Forking the program's process.
        pub const FORK: u32 = 7;
    }

    /// A request's header, checked against the strings that follow it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Request<'a> {
        /// Bits: [`NEW_SESSION`], [`KEEP_BACKGROUND`].
        pub flags: u32,
        /// The number of candidate paths.
        pub candidates: usize,
        /// The number of arguments (at least one, `argv[0]`).
        pub argc: usize,
        /// The number of environment entries.
        pub envc: usize,
        /// The strings, each with its NUL.
        pub strings: &'a [u8],
    }

    /// The header of a request with these counts.
    pub fn header(flags: u32, candidates: u32, argc: u32, envc: u32) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        let words = [REQUEST_MAGIC, flags, candidates, argc, envc];
        for (chunk, word) in out.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        out
    }

    impl<'a> Request<'a> {
        /// Parses a request: the magic, known flags, counts within bounds, and exactly
        /// the strings the counts say, each NUL-terminated; `None` otherwise.
        pub fn parse(bytes: &'a [u8]) -> Option<Request<'a>> {
            if bytes.len() > MAX_REQUEST {
                return None;
            }
            let (head, strings) = bytes.split_at_checked(HEADER_SIZE)?;
            let word = |i: usize| {
                let w: [u8; 4] = head.get(i * 4..i * 4 + 4)?.try_into().ok()?;
                Some(u32::from_ne_bytes(w))
            };
            if word(0)? != REQUEST_MAGIC {
                return None;
            }
            let flags = word(1)?;
            if flags & !(NEW_SESSION | KEEP_BACKGROUND) != 0 {
                return None;
            }
            let (candidates, argc, envc) =
                (word(2)? as usize, word(3)? as usize, word(4)? as usize);
            let total = 1usize
                .checked_add(candidates)?
                .checked_add(argc)?
                .checked_add(envc)?;
            if argc == 0 || total > MAX_STRINGS {
                return None;
            }
            if strings.last() != Some(&0) {
                return None;
            }
            let nuls = strings.iter().filter(|&&b| b == 0).count();
            (nuls == total).then_some(Request {
                flags,
                candidates,
                argc,
                envc,
                strings,
            })
        }

        /// The number of strings: directory, candidates, arguments, environment.
        pub fn total(&self) -> usize {
            1 + self.candidates + self.argc + self.envc
        }

        /// Calls `f` with the index and the offset in [`Request::strings`] of each string.
        pub fn each_start(&self, mut f: impl FnMut(usize, usize)) {
            let mut start = 0;
            let mut i = 0;
            for (at, &b) in self.strings.iter().enumerate() {
                if b == 0 {
                    f(i, start);
                    i += 1;
                    start = at + 1;
                }
            }
        }
    }

    /// The reply: `errno` 0 when the command started.
    pub fn reply(errno: i32) -> [u8; REPLY_SIZE] {
        let mut out = [0u8; REPLY_SIZE];
        let (magic, value) = out.split_at_mut(4);
        magic.copy_from_slice(&REPLY_MAGIC.to_ne_bytes());
        value.copy_from_slice(&errno.to_ne_bytes());
        out
    }

    /// The errno of a reply (0: started); `None` unless `bytes` is one whole reply with
    /// a non-negative errno.
    pub fn decode_reply(bytes: &[u8]) -> Option<i32> {
        let (magic, value) = bytes.split_first_chunk::<4>()?;
        let value: &[u8; 4] = value.try_into().ok()?;
        let errno = i32::from_ne_bytes(*value);
        (u32::from_ne_bytes(*magic) == REPLY_MAGIC && errno >= 0).then_some(errno)
    }
}

/// Bits of the flags argument. The init acts on [`flag::SUBREAPER`]; the others tell the
/// host's setup child how to start the program's process (they travel with the init's
/// flags so that one value describes the start).
pub mod flag {
    /// The program starts a session of its own (`setsid`); unset with `keep_session`.
    pub const NEW_SESSION: u32 = 1;
    /// No PID namespace (layer 2): the init is a child subreaper and, when the program
    /// ends, kills and reaps every descendant left.
    pub const SUBREAPER: u32 = 2;
    /// Put the program into a nested Landlock domain that scopes signals (ABI >= 6), so
    /// that it cannot signal the init (layer 2, where the init is not PID 1).
    pub const SCOPE_SIGNALS: u32 = 4;
    /// Two bits: 0, or 1 + the stdio fd (0, 1 or 2) whose terminal the program takes as
    /// its controlling terminal after its `setsid` (`TIOCSCTTY`); see
    /// [`terminal`] and [`controlling_terminal`].
    pub const CONTROLLING_TERMINAL: u32 = 0b11 << CONTROLLING_TERMINAL_SHIFT;
    /// The position of [`CONTROLLING_TERMINAL`]'s bits.
    pub const CONTROLLING_TERMINAL_SHIFT: u32 = 3;
    /// The program's process enters a nested Landlock domain the init makes for it (the
    /// command is under Landlock): one that handles creating block devices and
    /// reparenting, granted beneath `/` (only block devices on ABI 1, which has no
    /// reparenting right), scoping signals with [`SCOPE_SIGNALS`].
    pub const NEST: u32 = 1 << 5;
    /// The program's process enters the shared Landlock layer whose ruleset
    /// [`super::arg::DOMAIN_FD`] names, as its nested domain (instead of [`NEST`]'s).
    pub const SHARED_DOMAIN: u32 = 1 << 6;
    /// A session: the program's process serves the session's control socket
    /// ([`super::session`]) instead of exec'ing a program.
    pub const SERVE: u32 = 1 << 7;
    /// Every defined bit.
    pub const ALL: u32 = NEW_SESSION
        | SUBREAPER
        | SCOPE_SIGNALS
        | CONTROLLING_TERMINAL
        | NEST
        | SHARED_DOMAIN
        | SERVE;

    /// The bits that ask for the terminal on stdio fd `fd` (0, 1 or 2) as the program's
    /// controlling terminal.
    pub const fn controlling_terminal(fd: u32) -> u32 {
        ((fd + 1) << CONTROLLING_TERMINAL_SHIFT) & CONTROLLING_TERMINAL
    }

    /// The stdio fd whose terminal the program takes as its controlling terminal, as
    /// `flags` say ([`controlling_terminal`]'s inverse).
    pub const fn terminal(flags: u32) -> Option<i32> {
        match (flags & CONTROLLING_TERMINAL) >> CONTROLLING_TERMINAL_SHIFT {
            0 => None,
            v => Some(v as i32 - 1),
        }
    }
}

/// A failed `TIOCSCTTY` in the program's process is reported as the init's own step
/// ([`arg::INIT_STEP`]) plus this.
pub const CONTROLLING_TERMINAL_STEP_AFTER_INIT: u32 = 1;
/// A failed fork of the program's process, or a failure of that process before its
/// exec (its session, its nested domain), is reported as the init's own step plus this.
pub const PROGRAM_STEP_AFTER_INIT: u32 = 3;

/// `SIGHUP`.
pub const SIGHUP: i32 = 1;
/// `SIGINT`.
pub const SIGINT: i32 = 2;
/// `SIGQUIT`.
pub const SIGQUIT: i32 = 3;
/// `SIGKILL`.
pub const SIGKILL: i32 = 9;
/// `SIGUSR1`.
pub const SIGUSR1: i32 = 10;
/// `SIGUSR2`.
pub const SIGUSR2: i32 = 12;
/// `SIGTERM`.
pub const SIGTERM: i32 = 15;
/// `SIGCHLD`.
pub const SIGCHLD: i32 = 17;
/// `SIGCONT`.
pub const SIGCONT: i32 = 18;
/// `SIGWINCH`.
pub const SIGWINCH: i32 = 28;

/// The signals the init forwards to the program: the ones a host, a terminal or a
/// service manager sends to stop, interrupt, reload or resize a program. (Numbers of the
/// generic Linux ABI, the same on x86_64 and aarch64.)
pub const FORWARDED: [i32; 8] = [
    SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT,
];

/// The signal that asks a subreaper init to end the whole sandbox: `SIGRTMAX` (64), which
/// no forwarded signal uses. The init also arms it as its parent-death signal, so that a
/// host that dies takes the sandbox with it.
pub const KILL_REQUEST: i32 = 64;

/// `si_code` of a signal the kernel sent on its own: the terminal's `^C`, `^\`, hangup
/// and window-size signals go to the terminal's foreground process group this way. A
/// program in that group (`keep_session`) has received it already, so it is not forwarded
/// a second time.
pub const SI_KERNEL: i32 = 0x80;

/// Whether the init forwards `sig`, sent with `code` (`si_code`), to the program.
pub fn forwards(sig: i32, code: i32) -> bool {
    code != SI_KERNEL && FORWARDED.contains(&sig)
}

/// `"STKD"`, the magic of a setup record (shared with the setup child's report).
pub const SETUP_MAGIC: u32 = u32::from_be_bytes(*b"STKD");
/// Size of a setup record: magic, step, errno, reserved (native-endian `u32`s).
pub const SETUP_RECORD_SIZE: usize = 16;

/// The setup record for `step` failing with `errno`.
pub fn setup_record(step: u32, errno: i32) -> [u8; SETUP_RECORD_SIZE] {
    let mut out = [0u8; SETUP_RECORD_SIZE];
    let words = [SETUP_MAGIC, step, errno as u32, 0];
    for (chunk, word) in out.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    out
}

/// `"STKS"`, the magic of a status record.
pub const STATUS_MAGIC: u32 = u32::from_be_bytes(*b"STKS");
/// Size of a status record: magic, raw wait status (native-endian).
pub const STATUS_SIZE: usize = 8;

/// The status record for the program's raw wait status.
pub fn status_record(status: i32) -> [u8; STATUS_SIZE] {
    let mut out = [0u8; STATUS_SIZE];
    let (magic, value) = out.split_at_mut(4);
    magic.copy_from_slice(&STATUS_MAGIC.to_ne_bytes());
    value.copy_from_slice(&status.to_ne_bytes());
    out
}

/// The raw wait status in a status record; `None` unless `bytes` is one whole record.
pub fn decode_status(bytes: &[u8]) -> Option<i32> {
    let (magic, value) = bytes.split_first_chunk::<4>()?;
    let value: &[u8; 4] = value.try_into().ok()?;
    (u32::from_ne_bytes(*magic) == STATUS_MAGIC).then_some(i32::from_ne_bytes(*value))
}

/// The exit code that mirrors a wait status, as a shell reports it: the code, or 128+N for
/// signal N.
pub fn exit_code(status: i32) -> i32 {
    let sig = status & 0x7f;
    if sig == 0 {
        (status >> 8) & 0xff
    } else {
        128 + sig
    }
}

/// Parses a decimal `u32` (no sign, no spaces, at least one digit, no overflow).
pub fn parse_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() {
        return None;
    }
    let mut v: u32 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u32::from(b - b'0'))?;
    }
    Some(v)
}

/// Writes `v` in decimal into `buf`; returns the digits.
pub fn format_u32(v: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        if let Some(slot) = buf.get_mut(i) {
            *slot = b'0' + (v % 10) as u8;
        }
        v /= 10;
        if v == 0 || i == 0 {
            break;
        }
    }
    buf.get(i..).unwrap_or(&[])
}

/// The init's settings, parsed from its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Bits of [`flag`].
    pub flags: u32,
    /// The setup report pipe's write end.
    pub report_fd: i32,
    /// The status pipe's write end.
    pub status_fd: i32,
    /// Step index of the init's own setup ([`PROGRAM_STEP_AFTER_INIT`] and
    /// [`CONTROLLING_TERMINAL_STEP_AFTER_INIT`] after it: the program's process).
    pub init_step: u32,
    /// Step index of a failed exec of the program.
    pub exec_step: u32,
    /// The shared Landlock layer's ruleset with [`flag::SHARED_DOMAIN`], else `None`.
    pub domain_fd: Option<i32>,
    /// The flags of the program's process's `landlock_restrict_self`.
    pub restrict_flags: u32,
    /// The number of candidate paths, from [`arg::FIRST_CANDIDATE`].
    pub candidates: usize,
}

impl Config {
    /// Parses the arguments; `arg(i)` returns argument `i` without its NUL. `None` unless
    /// the fixed arguments are well formed, the fds differ (report, status and the domain
    /// ruleset: three owners), no unknown flag or both domains are asked for, and the
    /// program's `argv[0]` follows the candidates.
    pub fn parse<'a>(argc: usize, arg: impl Fn(usize) -> Option<&'a [u8]>) -> Option<Config> {
        let num = |i| arg(i).and_then(parse_u32);
        let fd = |i| num(i).and_then(|v| i32::try_from(v).ok());
        let flags = num(arg::FLAGS)?;
        if flags & !flag::ALL != 0
            || flags & (flag::NEST | flag::SHARED_DOMAIN) == flag::NEST | flag::SHARED_DOMAIN
            || arg(0)? != ARGV0.to_bytes()
        {
            return None;
        }
        let n = num(arg::CANDIDATES).filter(|&n| n <= arg::MAX_CANDIDATES)? as usize;
        if argc <= arg::FIRST_CANDIDATE.checked_add(n)? {
            return None;
        }
        let (report_fd, status_fd) = (fd(arg::REPORT_FD)?, fd(arg::STATUS_FD)?);
        let domain = fd(arg::DOMAIN_FD)?;
        let domain_fd = if flags & flag::SHARED_DOMAIN != 0 {
            if domain == report_fd || domain == status_fd {
                return None;
            }
            Some(domain)
        } else if domain == 0 {
            None
        } else {
            return None;
        };
        // Two pipes, two owners: one number twice is not what the host sends.
        if report_fd == status_fd {
            return None;
        }
        Some(Config {
            flags,
            report_fd,
            status_fd,
            init_step: num(arg::INIT_STEP)?,
            exec_step: num(arg::EXEC_STEP)?,
            domain_fd,
            restrict_flags: num(arg::RESTRICT_FLAGS)?,
            candidates: n,
        })
    }

    /// Whether `bit` of [`flag`] is set.
    pub fn has(&self, bit: u32) -> bool {
        self.flags & bit != 0
    }

    /// The index of the program's `argv[0]` among the arguments.
    pub fn program_argv(&self) -> usize {
        arg::FIRST_CANDIDATE + self.candidates
    }
}

/// Calls `f` with each pid in the text of `/proc/<pid>/task/<tid>/children` (decimal
/// numbers separated by spaces), fed in chunks that may split a number: `carry` holds the
/// digits of a number cut at the end of the previous chunk; pass `last` for the final
/// chunk (or an empty one at EOF).
pub fn each_pid(chunk: &[u8], carry: &mut u32, last: bool, mut f: impl FnMut(i32)) {
    let mut digits = *carry;
    let mut any = digits != 0;
    for &b in chunk {
        if b.is_ascii_digit() {
            digits = digits
                .saturating_mul(10)
                .saturating_add(u32::from(b - b'0'));
            any = true;
        } else {
            if any {
                emit(digits, &mut f);
            }
            digits = 0;
            any = false;
        }
    }
    if last {
        if any {
            emit(digits, &mut f);
        }
        *carry = 0;
    } else {
        *carry = digits;
    }
}

fn emit(v: u32, f: &mut impl FnMut(i32)) {
    // Pid 0 and out-of-range values are never children; never signal them (kill(0, …)
    // would reach the whole process group).
    if let Ok(pid) = i32::try_from(v) {
        if pid > 0 {
            f(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    // Linux's numbers: the image runs on Linux only (macOS numbers differ).
    #[cfg(target_os = "linux")]
    #[test]
    fn signal_numbers_match_the_kernel() {
        assert_eq!(SIGHUP, libc::SIGHUP);
        assert_eq!(SIGINT, libc::SIGINT);
        assert_eq!(SIGQUIT, libc::SIGQUIT);
        assert_eq!(SIGKILL, libc::SIGKILL);
        assert_eq!(SIGUSR1, libc::SIGUSR1);
        assert_eq!(SIGUSR2, libc::SIGUSR2);
        assert_eq!(SIGTERM, libc::SIGTERM);
        assert_eq!(SIGCHLD, libc::SIGCHLD);
        assert_eq!(SIGCONT, libc::SIGCONT);
        assert_eq!(SIGWINCH, libc::SIGWINCH);
        assert_eq!(SI_KERNEL, libc::SI_KERNEL);
        // SIGRTMAX of the kernel (glibc's SIGRTMAX() is the same number).
        assert_eq!(KILL_REQUEST, 64);
        assert!(!FORWARDED.contains(&KILL_REQUEST));
        assert!(!FORWARDED.contains(&SIGKILL));
        assert!(!FORWARDED.contains(&SIGCHLD));
    }

    #[test]
    fn records_round_trip() {
        for st in [0, 3 << 8, 9, 6 | 0x80, 0x7f00 | 0x7f] {
            assert_eq!(decode_status(&status_record(st)), Some(st));
        }
        assert_eq!(decode_status(&[0; 8]), None);
        assert_eq!(decode_status(&status_record(1)[..7]), None);
        let r = setup_record(7, 2);
        assert_eq!(&r[..4], &SETUP_MAGIC.to_ne_bytes());
        assert_eq!(&r[4..8], &7u32.to_ne_bytes());
        assert_eq!(&r[8..12], &2i32.to_ne_bytes());
        assert_eq!(&r[12..], &[0; 4]);
    }

    #[test]
    fn exit_codes_mirror_the_shell() {
        assert_eq!(exit_code(0), 0);
        assert_eq!(exit_code(42 << 8), 42);
        assert_eq!(exit_code(9), 137);
        assert_eq!(exit_code(6 | 0x80), 134);
        assert_eq!(exit_code(15), 143);
    }

    #[test]
    fn numbers_parse_and_format() {
        assert_eq!(parse_u32(b"0"), Some(0));
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), None);
        assert_eq!(parse_u32(b""), None);
        assert_eq!(parse_u32(b"-1"), None);
        assert_eq!(parse_u32(b"1 "), None);
        let mut buf = [0u8; 10];
        for v in [0, 7, 10, 12345, u32::MAX] {
            let s = format_u32(v, &mut buf);
            assert_eq!(parse_u32(s), Some(v));
            assert_eq!(s, std::format!("{v}").as_bytes());
        }
    }

    fn argv(list: &[&str]) -> impl Fn(usize) -> Option<&'static [u8]> {
        let owned: Vec<&'static [u8]> = list
            .iter()
            .map(|s| &*std::boxed::Box::leak(std::string::String::from(*s).into_boxed_str()))
            .map(str::as_bytes)
            .collect();
        move |i| owned.get(i).copied()
    }

    #[test]
    fn config_parses_its_arguments() {
        let a = [
            "stockade-init",
            "3",
            "5",
            "6",
            "40",
            "41",
            "0",
            "0",
            "2",
            "/bin/sh",
            "/usr/bin/sh",
            "sh",
            "-c",
            "x",
        ];
        let c = Config::parse(a.len(), argv(&a)).unwrap();
        assert_eq!(
            c,
            Config {
                flags: 3,
                report_fd: 5,
                status_fd: 6,
                init_step: 40,
                exec_step: 41,
                domain_fd: None,
                restrict_flags: 0,
                candidates: 2,
            }
        );
        assert_eq!(a[c.program_argv()], "sh");
        assert!(c.has(flag::NEW_SESSION) && c.has(flag::SUBREAPER));
        assert!(!c.has(flag::SCOPE_SIGNALS));
        assert_eq!(flag::terminal(c.flags), None);
        // The controlling terminal's fd, 0 to 2, in two bits.
        for fd in 0..3 {
            let bits = 3 | flag::controlling_terminal(fd);
            let flags = std::format!("{bits}");
            let mut b = a;
            b[1] = &flags;
            let c = Config::parse(b.len(), argv(&b)).unwrap();
            assert_eq!(flag::terminal(c.flags), Some(fd as i32));
            assert!(c.has(flag::NEW_SESSION) && !c.has(flag::SCOPE_SIGNALS));
        }
        // The shared layer's ruleset is named only with its flag.
        let shared = std::format!("{}", flag::SHARED_DOMAIN);
        let mut b = a;
        b[1] = &shared;
        b[6] = "9";
        b[7] = "2";
        let c = Config::parse(b.len(), argv(&b)).unwrap();
        assert_eq!((c.domain_fd, c.restrict_flags), (Some(9), 2));
        // No candidate is allowed (a program that is not found): argv[0] must still follow.
        let mut b = a;
        b[8] = "0";
        assert_eq!(Config::parse(10, argv(&b)).unwrap().program_argv(), 9);
        // Unknown flags, both domains, another argv[0], one fd twice (the fuzz target
        // `records` found the parser taking that), a domain fd without its flag or on a
        // pipe's number, a count past the arguments or huge, no program: refused.
        let both = std::format!("{}", flag::NEST | flag::SHARED_DOMAIN);
        for (i, v) in [
            (1, "256"),
            (1, both.as_str()),
            (0, "init"),
            (0, "stockade-start"),
            (3, "5"),
            (2, "-2"),
            (2, ""),
            (5, "x"),
            (6, "7"),
            (8, "5"),
            (8, "4294967295"),
        ] {
            let mut b = a;
            b[i] = v;
            assert_eq!(Config::parse(b.len(), argv(&b)), None, "{i}: {v:?}");
        }
        for on in ["5", "6"] {
            let mut b = a;
            b[1] = &shared;
            b[6] = on;
            assert_eq!(Config::parse(b.len(), argv(&b)), None, "domain on {on}");
        }
        assert_eq!(Config::parse(11, argv(&a[..11])), None);
    }

    #[test]
    fn children_lists_parse_across_chunks() {
        let text = b"12 3456 789 ";
        for cut in 0..=text.len() {
            let mut got = Vec::new();
            let mut carry = 0;
            each_pid(&text[..cut], &mut carry, false, |p| got.push(p));
            each_pid(&text[cut..], &mut carry, true, |p| got.push(p));
            assert_eq!(got, [12, 3456, 789], "cut at {cut}");
        }
        let mut got = Vec::new();
        let mut carry = 0;
        each_pid(b"0 4294967295 7", &mut carry, true, |p| got.push(p));
        assert_eq!(got, [7]);
    }

    #[test]
    fn session_requests_parse_only_whole() {
        use session::*;
        let mut req = std::vec::Vec::new();
        req.extend_from_slice(&header(NEW_SESSION, 1, 2, 1));
        req.extend_from_slice(b"/w\0/bin/sh\0sh\0-c\0A=1\0");
        let r = Request::parse(&req).unwrap();
        assert_eq!(
            (r.flags, r.candidates, r.argc, r.envc, r.total()),
            (1, 1, 2, 1, 5)
        );
        let mut starts = std::vec::Vec::new();
        r.each_start(|i, at| starts.push((i, at)));
        assert_eq!(starts, [(0, 0), (1, 3), (2, 11), (3, 14), (4, 17)]);
        // One string short or long, no final NUL, another magic, unknown flags, no argv[0]:
        // refused.
        assert_eq!(Request::parse(&req[..req.len() - 4]), None);
        let mut longer = req.clone();
        longer.extend_from_slice(b"B\0");
        assert_eq!(Request::parse(&longer), None);
        assert_eq!(Request::parse(&req[..req.len() - 1]), None);
        let mut bad = req.clone();
        bad[0] ^= 1;
        assert_eq!(Request::parse(&bad), None);
        let mut flags = req.clone();
        flags[4] = 4;
        assert_eq!(Request::parse(&flags), None);
        // The known flags: the program's own session, and kept background processes.
        flags[4] = (NEW_SESSION | KEEP_BACKGROUND) as u8;
        assert_eq!(Request::parse(&flags).map(|r| r.flags), Some(3));
        let mut none = std::vec::Vec::new();
        none.extend_from_slice(&header(0, 0, 0, 0));
        none.extend_from_slice(b"/\0");
        assert_eq!(Request::parse(&none), None);
        let mut huge = std::vec::Vec::new();
        huge.extend_from_slice(&header(0, u32::MAX, u32::MAX, 2));
        huge.extend_from_slice(b"/\0");
        assert_eq!(Request::parse(&huge), None);
        assert_eq!(decode_reply(&reply(0)), Some(0));
        assert_eq!(decode_reply(&reply(12)), Some(12));
        assert_eq!(decode_reply(&reply(-1)), None);
        assert_eq!(decode_reply(&reply(0)[..7]), None);
        assert_eq!(decode_reply(&status_record(0)), None);
    }

    #[test]
    fn terminal_signals_are_not_forwarded_twice() {
        assert!(forwards(SIGTERM, 0));
        assert!(forwards(SIGINT, -6));
        assert!(!forwards(SIGINT, SI_KERNEL));
        assert!(!forwards(SIGCHLD, 0));
        assert!(!forwards(KILL_REQUEST, 0));
    }
}
