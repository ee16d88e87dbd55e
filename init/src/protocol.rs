//! What the host and the init say to each other. Both sides compile this file: the host as
//! part of `stockade-init`'s library, the init image by `#[path]` from its own crate root.
//!
//! # The image's two roles
//!
//! The one image runs as the init (`argv[0]` = [`ARGV0`]) and as the program's *starter*
//! (`argv[0]` = [`start::ARGV0`]): the program's process execs the image as the starter
//! first, so that it leaves the host's memory at once, and the starter execs the program
//! only when the init has told it to go (see [`start`]).
//!
//! # Start: argv
//!
//! The host's setup child starts the program's process first (a `CLONE_VM | CLONE_VFORK`
//! child of its own, which execs the starter), then execs the init with this argv (every
//! number in decimal ASCII) and an empty environment:
//!
//! | index | content |
//! | --- | --- |
//! | 0 | [`ARGV0`] |
//! | [`arg::FLAGS`] | bits of [`flag`] |
//! | [`arg::REPORT_FD`] | write end of the setup report pipe (the host reads to EOF) |
//! | [`arg::STATUS_FD`] | write end of the status pipe (one [`STATUS_SIZE`]-byte record) |
//! | [`arg::INIT_STEP`] | step index reported when the init's own setup fails |
//! | [`arg::GO_FD`] | write end of the go pipe: one byte lets the starter exec the program |
//! | [`arg::PROGRAM`] | pid of the program's process, the init's child |
//!
//! The fixed arguments are the host's own, built before `clone`; the pid is the setup
//! child's, which it writes on its own stack. The init only parses numbers. Nothing of the
//! sandboxed program reaches the init: the init only releases the starter, waits for the
//! program, signals it and reaps.
//!
//! # The go byte: why the program waits for the init
//!
//! Until the init's exec, PID 1 (or layer 2's subreaper) is the setup child, which shares
//! the host's memory and holds the host's pipes; until the init's `PR_SET_DUMPABLE(0)` its
//! `/proc/1/{mem,fd,environ}` are open to processes of its uid. So the program must not run
//! a single instruction before both have happened. The init writes the go byte after
//! both (and after it has closed every fd but its pipes), and the starter execs the
//! program only on that byte: the order holds by construction, not by timing. (The
//! program's process also sits in a Landlock domain nested inside the init's, where
//! Landlock is in force, which on its own keeps it from tracing or opening `/proc/1/…` of
//! the init.)
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
//!   program has been exec'd.
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

/// Positions of the fixed arguments.
pub mod arg {
    /// The flags ([`super::flag`]).
    pub const FLAGS: usize = 1;
    /// The setup report pipe's write end.
    pub const REPORT_FD: usize = 2;
    /// The status pipe's write end.
    pub const STATUS_FD: usize = 3;
    /// The step index for a failure of the init's own setup.
    pub const INIT_STEP: usize = 4;
    /// The go pipe's write end ([`super::start`]).
    pub const GO_FD: usize = 5;
    /// The pid of the program's process.
    pub const PROGRAM: usize = 6;
    /// The number of arguments.
    pub const COUNT: usize = 7;
}

/// The starter: the role the program's process execs the image in before the program.
///
/// Its argv (numbers in decimal ASCII), then the program's own argv; its environment is
/// the program's:
///
/// | index | content |
/// | --- | --- |
/// | 0 | [`ARGV0`](start::ARGV0) |
/// | [`REPORT_FD`](start::REPORT_FD) | write end of the setup report pipe, for a failed exec of the program |
/// | [`GO_FD`](start::GO_FD) | read end of the go pipe |
/// | [`EXEC_STEP`](start::EXEC_STEP) | step index reported when the program cannot be exec'd |
/// | [`CANDIDATES`](start::CANDIDATES) | the number N of candidate paths that follow |
/// | [`FIRST_CANDIDATE`](start::FIRST_CANDIDATE) … | N candidate paths, tried in order as `execvp` does |
/// | then | the program's `argv[0]`, its arguments |
///
/// The starter waits for one byte on the go pipe, closes it, marks the report pipe
/// close-on-exec, unblocks every signal and execs the first candidate that can be
/// executed. EOF instead of the byte means the init is gone: the starter exits with
/// [`ORPHANED`](start::ORPHANED) and runs nothing.
pub mod start {
    use core::ffi::CStr;

    /// `argv[0]` of the starter.
    pub const ARGV0: &CStr = c"stockade-start";
    /// The report pipe's write end.
    pub const REPORT_FD: usize = 1;
    /// The go pipe's read end.
    pub const GO_FD: usize = 2;
    /// The step index of a failed exec of the program.
    pub const EXEC_STEP: usize = 3;
    /// The number of candidate paths.
    pub const CANDIDATES: usize = 4;
    /// The first candidate path.
    pub const FIRST_CANDIDATE: usize = 5;
    /// The most candidate paths accepted (more `PATH` directories than any real one has).
    pub const MAX_CANDIDATES: u32 = 4096;
    /// Exit status when the program could not be exec'd (the host has the record).
    pub const EXEC_FAILED: i32 = 127;
    /// Exit status when the init went away before it said go.
    pub const ORPHANED: i32 = 125;

    /// The starter's settings, parsed from its arguments.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Config {
        /// The setup report pipe's write end.
        pub report_fd: i32,
        /// The go pipe's read end.
        pub go_fd: i32,
        /// Step index of a failed exec.
        pub exec_step: u32,
        /// The number of candidate paths, from [`FIRST_CANDIDATE`].
        pub candidates: usize,
        /// `argv[0]` was [`super::session::SERVE_ARGV0`]: serve a session instead of
        /// exec'ing a program.
        pub serve: bool,
    }

    impl Config {
        /// Parses the arguments; `arg(i)` returns argument `i` without its NUL. The
        /// program's `argv[0]` must follow the candidates; `None` otherwise.
        pub fn parse<'a>(argc: usize, arg: impl Fn(usize) -> Option<&'a [u8]>) -> Option<Config> {
            let num = |i| arg(i).and_then(super::parse_u32);
            let fd = |i| num(i).and_then(|v| i32::try_from(v).ok());
            let serve = arg(0)? == super::session::SERVE_ARGV0.to_bytes();
            if arg(0)? != ARGV0.to_bytes() && !serve {
                return None;
            }
            let n = num(CANDIDATES).filter(|&n| n <= MAX_CANDIDATES)? as usize;
            let program = FIRST_CANDIDATE.checked_add(n)?;
            if argc <= program {
                return None;
            }
            let (report_fd, go_fd) = (fd(REPORT_FD)?, fd(GO_FD)?);
            if report_fd == go_fd {
                return None;
            }
            Some(Config {
                report_fd,
                go_fd,
                exec_step: num(EXEC_STEP)?,
                candidates: n,
                serve,
            })
        }

        /// The index of the program's `argv[0]` in the starter's argv.
        pub fn program_argv(&self) -> usize {
            FIRST_CANDIDATE + self.candidates
        }
    }
}

/// A warm session's protocol: the image's third role, the *session server*, and what the
/// host and it say over the session's control socket.
///
/// # The server
///
/// A session is a sandbox whose program is this image, started as the starter is but
/// with `argv[0]` = [`SERVE_ARGV0`](session::SERVE_ARGV0): after the init's go byte the
/// starter closes the report pipe (the host's spawn returns) and, instead of exec'ing a
/// program, serves the control socket on its fd 0 (a `SOCK_SEQPACKET` socket whose
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

    /// `argv[0]` of the starter when it becomes the session server.
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
    /// Every defined bit.
    pub const ALL: u32 = NEW_SESSION | SUBREAPER | SCOPE_SIGNALS | CONTROLLING_TERMINAL;

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
/// ([`arg::INIT_STEP`]) plus this (by the host's setup child, which starts that process).
pub const CONTROLLING_TERMINAL_STEP_AFTER_INIT: u32 = 1;

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
    /// Step index of the init's own setup.
    pub init_step: u32,
    /// The go pipe's write end.
    pub go_fd: i32,
    /// The program's process (a pid, never 0).
    pub program: i32,
}

impl Config {
    /// Parses the arguments; `arg(i)` returns argument `i` without its NUL. Exactly
    /// [`arg::COUNT`] of them (`argc`), with three different fds, or `None`.
    pub fn parse<'a>(argc: usize, arg: impl Fn(usize) -> Option<&'a [u8]>) -> Option<Config> {
        let num = |i| arg(i).and_then(parse_u32);
        let positive = |i| num(i).and_then(|v| i32::try_from(v).ok());
        let flags = num(arg::FLAGS)?;
        if argc != arg::COUNT || flags & !flag::ALL != 0 || arg(0)? != ARGV0.to_bytes() {
            return None;
        }
        let program = positive(arg::PROGRAM).filter(|&pid| pid > 0)?;
        let (report_fd, status_fd, go_fd) = (
            positive(arg::REPORT_FD)?,
            positive(arg::STATUS_FD)?,
            positive(arg::GO_FD)?,
        );
        // Three fds, three owners: one number twice is not what the host sends.
        if report_fd == status_fd || go_fd == report_fd || go_fd == status_fd {
            return None;
        }
        Some(Config {
            flags,
            report_fd,
            status_fd,
            init_step: num(arg::INIT_STEP)?,
            go_fd,
            program,
        })
    }

    /// Whether `bit` of [`flag`] is set.
    pub fn has(&self, bit: u32) -> bool {
        self.flags & bit != 0
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
    fn config_parses_the_fixed_arguments() {
        let a = ["stockade-init", "3", "5", "6", "40", "7", "2"];
        let c = Config::parse(a.len(), argv(&a)).unwrap();
        assert_eq!(
            c,
            Config {
                flags: 3,
                report_fd: 5,
                status_fd: 6,
                init_step: 40,
                go_fd: 7,
                program: 2,
            }
        );
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
        // Unknown flags, another argv[0], pid 0, one fd twice (the fuzz target `records`
        // found the parser taking that), a missing or an extra argument: refused.
        for (i, v) in [
            (1, "64"),
            (0, "init"),
            (6, "0"),
            (6, "-2"),
            (6, ""),
            (5, "x"),
            (3, "5"),
            (5, "5"),
            (5, "6"),
        ] {
            let mut b = a;
            b[i] = v;
            assert_eq!(Config::parse(b.len(), argv(&b)), None, "{i}: {v:?}");
        }
        assert_eq!(Config::parse(6, argv(&a[..6])), None);
        let b = ["stockade-init", "3", "5", "6", "40", "7", "2", "sh"];
        assert_eq!(Config::parse(b.len(), argv(&b)), None);
    }

    #[test]
    fn the_starter_parses_its_arguments() {
        let a = [
            "stockade-start",
            "5",
            "6",
            "41",
            "2",
            "/bin/sh",
            "/usr/bin/sh",
            "sh",
            "-c",
            "x",
        ];
        let c = start::Config::parse(a.len(), argv(&a)).unwrap();
        assert_eq!(
            c,
            start::Config {
                report_fd: 5,
                go_fd: 6,
                exec_step: 41,
                candidates: 2,
                serve: false,
            }
        );
        let mut served = a;
        served[0] = "stockade-serve";
        assert!(start::Config::parse(a.len(), argv(&served)).unwrap().serve);
        assert_eq!(a[c.program_argv()], "sh");
        // No candidate is allowed (a program that is not found): argv[0] must still follow.
        let b = ["stockade-start", "5", "6", "41", "0", "sh"];
        assert_eq!(
            start::Config::parse(b.len(), argv(&b))
                .unwrap()
                .program_argv(),
            5
        );
        // The program's argv[0] missing, a count past the arguments, a huge count, the
        // init's argv[0], one fd for both pipes: refused.
        assert_eq!(start::Config::parse(5, argv(&b[..5])), None);
        let c = ["stockade-start", "5", "6", "41", "3", "/bin/sh", "sh"];
        assert_eq!(start::Config::parse(c.len(), argv(&c)), None);
        let d = ["stockade-start", "5", "6", "41", "4294967295", "sh"];
        assert_eq!(start::Config::parse(d.len(), argv(&d)), None);
        let e = ["stockade-init", "5", "6", "41", "0", "sh"];
        assert_eq!(start::Config::parse(e.len(), argv(&e)), None);
        let f = ["stockade-start", "5", "5", "41", "0", "sh"];
        assert_eq!(start::Config::parse(f.len(), argv(&f)), None);
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
