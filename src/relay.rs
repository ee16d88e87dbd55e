//! The program's stdio as `stockade run` hands it over, and the relay between it and the
//! caller's.
//!
//! # Why the program never gets the caller's terminal or files
//!
//! An fd is more than a stream. Through the caller's terminal the program could resize it
//! (`TIOCSWINSZ`, which signals the caller's shell), change its modes (`stty -echo`, a
//! dead keyboard after the run), read what is typed after the run, or take it over as a
//! controlling terminal; through a file it could `ftruncate` it, `fchmod` it, change its
//! times, or lock it (for a root caller, the same holds for a device such as `/dev/null`:
//! the program's uid owns it). So `stockade run` hands the program only streams that lead
//! nowhere else:
//!
//! - **A terminal** (stdin or stdout is one): the program gets a pseudo-terminal of its
//!   own, as `ssh -t` and `docker run -t` give one. Its slave
//!   is the program's stdin, stdout and stderr wherever the caller's are terminals, and
//!   the program's controlling terminal (in its own session), so `^C`, `^Z`, `/dev/tty`,
//!   job control and `SIGWINCH` work inside as on any terminal. It is the library's
//!   (`Command::pty_like`): on the full layer it comes from the sandbox's own devpts and
//!   is `/dev/pts/0` inside, elsewhere from the host's `/dev/ptmx`. The slave starts with
//!   the caller's modes and window size; while the program runs the caller's terminal is in
//!   raw mode (when stdin is the terminal and `stockade` is in its foreground) and every
//!   byte typed goes to the program, which echoes and interprets it on its own terminal.
//!   The window size is copied again on every `SIGWINCH`. The caller's modes are restored
//!   when the run ends, however it ends (the program's exit, also after a forwarded
//!   `SIGTERM`, `SIGINT`, `SIGHUP` or `SIGQUIT`; an error), and while stockade is stopped
//!   (`SIGTSTP`; raw mode again when it is continued in the foreground).
//! - **`/dev/null`**: the program gets one of its own (`Stdio::null()`, which a root
//!   host's program cannot change either), and nothing is copied.
//! - **A file** (anything else the program could change through the fd: a regular file,
//!   a device that is not a terminal, a named FIFO, a directory): the program gets a pipe,
//!   and `stockade` copies between it and its own fd. Output is written through the
//!   caller's open file description, so it lands where the program's own writes would
//!   have: at the caller's offset, or at the end with `>>`. Input is read from it in the
//!   same way; `stockade` reads ahead of the program, so after a run that stopped reading
//!   early the caller's offset may lie further on than the program read.
//! - **A pipe or a socket**: handed over as it is; through it the program reaches only
//!   the stream.
//!
//! `--no-pty` keeps the caller's terminal as the program's stdio (files are still piped),
//! and so does `--keep-session`: a program that stays in the caller's session keeps the
//! caller's terminal as its controlling terminal, so a pseudo-terminal could be bypassed
//! through `/dev/tty` anyway.
//!
//! # What reaches the caller's terminal
//!
//! Output copied to one of the caller's fds that is a terminal (the pseudo-terminal's
//! output, and with `--scrub` the piped stdout and stderr) goes through a
//! [`TerminalFilter`]: escape sequences that write the clipboard (OSC 52) or make the
//! terminal answer with text the program could choose (title reports, DECRQSS,
//! XTGETTCAP, colour queries, …) are dropped; colours, cursor movement, erase, scroll
//! regions, the alternate screen, bracketed paste and mouse modes, titles and hyperlinks
//! pass. An answer lands in the terminal's input, which after the run is the caller's
//! shell. With `--scrub` the filtered stream is then redacted. Output to a file or a pipe
//! is not filtered, and with `--no-pty` or `--keep-session` the program writes to the
//! caller's terminal itself.
//!
//! # Threads and signals
//!
//! One thread copies every output stream (the pseudo-terminal's master and the pipes of
//! stdout and stderr) to the caller's fds in a `poll` loop; when the program has ended it
//! drains what is buffered and stops. A second thread copies the caller's stdin to the
//! program (blocking reads of the caller's terminal or file, blocking writes to the
//! master or pipe) and is left behind when the process exits.
//!
//! Signals are `crate::forward`'s: it forwards the terminating ones to the program, so
//! that the run ends through the program and [`Running::finish`] restores the terminal,
//! calls [`Running::resize`] on `SIGWINCH` (the program then gets its `SIGWINCH` from its
//! own terminal), [`Running::refresh`] on `SIGCONT`, and [`Running::restore`] before
//! stockade stops on `SIGTSTP`. Dropping a [`Running`] restores the terminal as well (an
//! error, a panic that unwinds).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use rustix::fs::FileType;
use rustix::termios::{self, OptionalActions, Termios};
use stockade::guard::terminal::TerminalFilter;
use stockade::{Child, Command, Finding, RedactingWriter, Stdio};

/// How `stockade run` hands over the program's stdio.
pub struct Options {
    /// A pseudo-terminal where the caller's stdin or stdout is a terminal (else the
    /// program gets the caller's terminal, as with `--no-pty` or `--keep-session`).
    pub pty: bool,
    /// Redact the program's output (`--scrub`): stdout and stderr are always piped, and
    /// the pseudo-terminal carries stdin only.
    pub scrub: bool,
}

/// What one of the caller's stdio fds is, as far as the program is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Terminal,
    /// An anonymous pipe or a socket: nothing behind it but the stream.
    Channel,
    /// `/dev/null`: the program gets its own ([`Stdio::null`], which a root host's program
    /// cannot change either), and nothing is copied.
    Null,
    /// Something the program could change through the fd.
    File,
    /// Not open.
    Closed,
}

pub(crate) fn kind(fd: BorrowedFd<'_>) -> Kind {
    kind_by(
        rustix::fs::fstat(fd).ok(),
        || termios::isatty(fd),
        || anonymous_pipe(fd),
    )
}

/// [`kind`] from the fd's `fstat` (`None`: not open) and, asked only where they can
/// matter, whether it is a terminal and whether a FIFO is an anonymous pipe.
///
/// Only a character device is asked whether it is a terminal (`isatty`, a `TIOCGWINSZ`):
/// a terminal's fd is always one (a tty driver's node, `/dev/ptmx`, a devpts slave), so a
/// pipe, socket or file is known to be none from its `fstat` alone, the one call each
/// stream needs anyway. Nor is `/dev/null` asked (the memory driver's null device is no
/// terminal): its device number, from the same `fstat`, tells.
fn kind_by(
    st: Option<rustix::fs::Stat>,
    isatty: impl FnOnce() -> bool,
    anonymous: impl FnOnce() -> bool,
) -> Kind {
    let Some(st) = st else {
        return Kind::Closed;
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::CharacterDevice if is_null(&st) => Kind::Null,
        FileType::CharacterDevice if isatty() => Kind::Terminal,
        FileType::Socket => Kind::Channel,
        FileType::Fifo if anonymous() => Kind::Channel,
        _ => Kind::File,
    }
}

/// Whether a character device is the system's `/dev/null` (whose `stat` is taken once, not
/// once per stdio slot).
fn is_null(dev: &rustix::fs::Stat) -> bool {
    static NULL: std::sync::OnceLock<Option<rustix::fs::Stat>> = std::sync::OnceLock::new();
    NULL.get_or_init(|| {
        rustix::fs::stat("/dev/null")
            .ok()
            .filter(|null| FileType::from_raw_mode(null.st_mode) == FileType::CharacterDevice)
    })
    .as_ref()
    .is_some_and(|null| null.st_rdev == dev.st_rdev)
}

/// `PIPEFS_MAGIC`: the file system of anonymous pipes. A named FIFO lives on the file
/// system of its directory, where `fchmod` changes its node.
const PIPEFS_MAGIC: u64 = 0x5049_5045;

/// Whether a FIFO is an anonymous pipe. Where `fstatfs` does not tell (other systems),
/// every FIFO counts as a pipe.
fn anonymous_pipe(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstatfs(fd).map_or(true, |s| s.f_type as u64 == PIPEFS_MAGIC)
}

/// The caller's fds 0, 1 and 2.
pub(crate) fn caller_fds() -> [BorrowedFd<'static>; 3] {
    [
        rustix::stdio::stdin(),
        rustix::stdio::stdout(),
        rustix::stdio::stderr(),
    ]
}

/// A close-on-exec duplicate of the caller's fd `i`: it shares the caller's open file
/// description (offset, `O_APPEND`), so reads and writes through it are the caller's own.
fn dup_caller(i: usize) -> io::Result<File> {
    let fd = caller_fds()[i];
    Ok(File::from(rustix::io::fcntl_dupfd_cloexec(fd, 3)?))
}

/// The major numbers of a pseudo-terminal's slave side: opening one again names the same
/// terminal (unlike `/dev/tty`, or `/dev/ptmx`, which makes a new one).
pub(crate) const PTY_SLAVE_MAJORS: std::ops::RangeInclusive<u32> = 136..=143;

/// The caller's terminal (stdin) for the input thread: opened again, non-blocking, so
/// that the thread's reads never wait and the shell's own open file description keeps
/// its flags; `(file, true)`. Where it cannot be opened again (no `/proc`, a terminal
/// the caller may not open), a duplicate of stdin, whose reads may wait: `(file, false)`.
///
/// Only a pseudo-terminal's slave (majors 136–143) or a terminal line (major 4) is
/// opened again: opening one names the same terminal. Opening `/dev/tty` (major 5) again
/// names the caller's controlling terminal of the moment, and a pty master makes a new
/// pair.
fn terminal_reader() -> io::Result<(File, bool)> {
    use rustix::fs::{Mode, OFlags};
    let reopens = rustix::fs::fstat(caller_fds()[0]).is_ok_and(|st| {
        let major = rustix::fs::major(st.st_rdev);
        major == 4 || PTY_SLAVE_MAJORS.contains(&major)
    });
    if !reopens {
        return Ok((dup_caller(0)?, false));
    }
    let again = rustix::fs::open(
        "/proc/self/fd/0",
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    );
    match again {
        // The same terminal, not whatever the path names now.
        Ok(fd) if same_file(fd.as_fd(), caller_fds()[0]) => Ok((File::from(fd), true)),
        _ => Ok((dup_caller(0)?, false)),
    }
}

/// Whether two fds name the same file.
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    match (rustix::fs::fstat(a), rustix::fs::fstat(b)) {
        (Ok(a), Ok(b)) => (a.st_dev, a.st_ino, a.st_rdev) == (b.st_dev, b.st_ino, b.st_rdev),
        _ => false,
    }
}

/// The stdio plan of one run, made before the spawn.
pub struct Relay {
    pty: Option<Pty>,
    /// Which of the program's fds 0, 1, 2 are pipes relayed to or from the caller's.
    piped: [bool; 3],
    /// Which of the caller's fds 0, 1, 2 are terminals: output copied there is filtered.
    terminals: [bool; 3],
    scrub: bool,
}

struct Pty {
    /// The caller's terminal: its fd (0 or 1), whose modes and size the program's copies.
    terminal: usize,
    /// The caller's fd that the program's terminal output goes to (1, 2, or 0).
    output: usize,
    /// Whether the caller's stdin is that terminal: keystrokes are relayed.
    input: bool,
    /// The caller's modes before the run.
    saved: Termios,
}

impl Relay {
    /// Decides, for each of the caller's stdio fds, what the program gets, and sets up
    /// `cmd` accordingly: the slave of a pseudo-terminal ([`Command::pty_like`], which the
    /// spawn opens), a pipe, or the caller's own fd.
    ///
    /// # Errors
    ///
    /// Reading the caller's terminal failed.
    pub fn attach(cmd: &mut Command, opts: &Options) -> io::Result<Relay> {
        let fds = caller_fds();
        let kinds = fds.map(kind);
        let gets_slave = |i: usize| kinds[i] == Kind::Terminal && !(opts.scrub && i > 0);
        let want_pty = opts.pty
            && (kinds[0] == Kind::Terminal || kinds[1] == Kind::Terminal)
            && (0..3).any(gets_slave);
        let pty = if want_pty {
            let terminal = if kinds[0] == Kind::Terminal { 0 } else { 1 };
            let output = [1, 2, 0]
                .into_iter()
                .find(|&i| kinds[i] == Kind::Terminal && (i == 0 || !opts.scrub))
                .unwrap_or(terminal);
            let saved = termios::tcgetattr(fds[terminal])?;
            // The slave goes to every stream not set here; it starts with the caller's
            // modes and size, and is the program's controlling terminal.
            cmd.pty_like(fds[terminal])?;
            Some(Pty {
                terminal,
                output,
                input: kinds[0] == Kind::Terminal,
                saved,
            })
        } else {
            None
        };
        let mut piped = [false; 3];
        for (i, p) in piped.iter_mut().enumerate() {
            let slave = pty.is_some() && gets_slave(i);
            // A terminal the pseudo-terminal does not stand for (stderr on the caller's
            // terminal while stdin and stdout are not: a pipeline's middle, output to a
            // file) is piped and copied through the filter too, never handed over: the
            // program would get the caller's terminal itself (its modes, size, input and
            // every escape sequence), which only `--no-pty` and `--keep-session` give.
            let terminal_left = opts.pty && pty.is_none() && kinds[i] == Kind::Terminal && i > 0;
            *p = !slave && (kinds[i] == Kind::File || (opts.scrub && i > 0) || terminal_left);
            // With a pseudo-terminal every stream not set explicitly is its slave: a
            // pipe or socket is handed over as a copy of the caller's fd, and a closed
            // one becomes `/dev/null`.
            let set = if slave || *p {
                None
            } else if kinds[i] == Kind::Null || (pty.is_some() && kinds[i] == Kind::Closed) {
                Some(Stdio::null())
            } else if pty.is_some() {
                Some(Stdio::from(dup_caller(i)?))
            } else {
                None
            };
            if let Some(s) = set {
                match i {
                    0 => cmd.stdin(s),
                    1 => cmd.stdout(s),
                    _ => cmd.stderr(s),
                };
            }
        }
        if piped[0] {
            cmd.stdin(Stdio::piped());
        }
        if piped[1] {
            cmd.stdout(Stdio::piped());
        }
        if piped[2] {
            cmd.stderr(Stdio::piped());
        }
        Ok(Relay {
            pty,
            piped,
            terminals: kinds.map(|k| k == Kind::Terminal),
            scrub: opts.scrub,
        })
    }

    /// Starts relaying for `child`, spawned from `cmd` (dropped here: the command holds
    /// the fds it hands over, and a stream counts as closed only when every copy is).
    /// Takes the pseudo-terminal's master from `child`. Puts the caller's terminal in raw
    /// mode when its keystrokes go to the program and `stockade` is in its foreground.
    ///
    /// # Errors
    ///
    /// Duplicating the caller's fds or starting a thread failed.
    pub fn start(self, cmd: Command, child: &mut Child) -> io::Result<Running> {
        drop(cmd);
        let redactor = self.scrub.then(|| child.redactor().clone());
        // Output bound for a terminal is filtered first, then redacted: the redactor
        // then sees the sequences in the form the terminal gets them.
        let terminals = self.terminals;
        let writer = |i: usize| -> io::Result<Box<dyn Finish>> {
            let f = dup_caller(i)?;
            let to: Box<dyn Finish> = match &redactor {
                Some(r) => Box::new(RedactingWriter::new(r.clone(), f)),
                None => Box::new(Plain(f)),
            };
            Ok(if terminals[i] {
                Box::new(Filtered::new(to))
            } else {
                to
            })
        };
        let mut outputs: Vec<Output> = Vec::new();
        if let Some(o) = child.stdout.take() {
            outputs.push(Output::new(o.into(), writer(1)?)?);
        }
        if let Some(e) = child.stderr.take() {
            outputs.push(Output::new(e.into(), writer(2)?)?);
        }
        let terminal = match self.pty {
            Some(pty) => {
                let master = child
                    .take_pty()
                    .ok_or_else(|| io::Error::other("the program has no pseudo-terminal"))?;
                let master = File::from(OwnedFd::from(master));
                outputs.push(Output::new(
                    master.try_clone()?.into(),
                    writer(pty.output)?,
                )?);
                let t = Arc::new(Terminal {
                    fd: pty.terminal,
                    master,
                    saved: pty.saved,
                    input: pty.input,
                    state: Mutex::new(Mode::default()),
                    changed: Condvar::new(),
                });
                if t.input {
                    let (t2, (from, nonblocking)) = (Arc::clone(&t), terminal_reader()?);
                    let to = t.master.try_clone()?;
                    spawn("stockade-input", move || {
                        copy_input(from, to, Some((&t2, nonblocking)));
                    })?;
                }
                Some(t)
            }
            None => None,
        };
        if self.piped[0] {
            if let Some(to) = child.stdin.take() {
                let (from, to) = (dup_caller(0)?, File::from(OwnedFd::from(to)));
                spawn("stockade-input", move || copy_input(from, to, None))?;
            }
        }
        let mut running = Running {
            terminal,
            pump: None,
            wake: None,
        };
        // Raw mode before any output is copied (the program's first lines appear as the
        // rest will), and once `running` exists: from here on its drop restores the modes.
        running.refresh();
        if !outputs.is_empty() {
            let (wake_r, wake_w) = std::io::pipe()?;
            running.wake = Some(wake_w.into());
            let wake_r = OwnedFd::from(wake_r);
            running.pump = Some(spawn("stockade-output", move || pump(outputs, wake_r))?);
        }
        Ok(running)
    }
}

fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
}

/// The caller's terminal while the program has a pseudo-terminal.
struct Terminal {
    /// The caller's fd (0 or 1) of the terminal.
    fd: usize,
    master: File,
    saved: Termios,
    /// Whether keystrokes are relayed (the caller's stdin is this terminal).
    input: bool,
    /// What stockade has made of the terminal's modes.
    state: Mutex<Mode>,
    /// Signalled when the terminal becomes raw or the program has ended: the input
    /// thread reads only while raw, and ends with the program.
    changed: Condvar,
}

/// The caller's terminal as stockade has set it.
#[derive(Default)]
struct Mode {
    /// Raw mode is set (by stockade, not yet restored).
    raw: bool,
    /// Restored for a stop (`SIGTSTP`) and not continued since: only `SIGCONT` makes it
    /// raw again.
    suspended: bool,
    /// The program has ended: the modes stay restored, nothing more is read.
    ended: bool,
}

/// How often the input thread looks whether stockade came to the foreground without a
/// `SIGCONT` (a shell's `fg` of a job that was running in the background sends none).
const FOREGROUND_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

impl Terminal {
    fn caller(&self) -> BorrowedFd<'static> {
        caller_fds()[self.fd]
    }

    /// Whether stockade may use the terminal now: it is in the terminal's foreground
    /// process group, or the terminal is not its controlling terminal (no job control
    /// applies). Reading or changing the terminal from the background would stop stockade
    /// (`SIGTTIN`, `SIGTTOU`), and change the modes under the shell that owns it.
    fn foreground(&self) -> bool {
        termios::tcgetpgrp(self.caller()).map_or(true, |p| p == rustix::process::getpgrp())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mode> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts the terminal in raw mode (again), after a start or a `SIGCONT`, when
    /// keystrokes go to the program, stockade is in the foreground and the program runs.
    fn refresh(&self) {
        let mut state = self.lock();
        state.suspended = false;
        self.make_raw(&mut state);
    }

    /// Raw mode, unless it is set already, the program has ended, stockade is stopped or
    /// not in the foreground, or keystrokes do not go to the program.
    fn make_raw(&self, state: &mut Mode) {
        if state.raw || state.ended || state.suspended || !self.input || !self.foreground() {
            return;
        }
        let mut raw = self.saved.clone();
        raw.make_raw();
        if termios::tcsetattr(self.caller(), OptionalActions::Now, &raw).is_ok() {
            state.raw = true;
            self.changed.notify_all();
        }
    }

    /// Restores the caller's modes, if stockade changed them: for a stop (`SIGTSTP`),
    /// until [`Terminal::refresh`].
    fn restore(&self) {
        let mut state = self.lock();
        state.suspended = true;
        self.restore_locked(&mut state);
    }

    /// Restores the caller's modes for good: the program has ended.
    fn end(&self) {
        let mut state = self.lock();
        state.ended = true;
        self.restore_locked(&mut state);
        self.changed.notify_all();
    }

    fn restore_locked(&self, state: &mut Mode) {
        if state.raw {
            let _ = termios::tcsetattr(self.caller(), OptionalActions::Now, &self.saved);
            state.raw = false;
        }
    }

    /// Blocks until the terminal is in raw mode (true) or the program has ended
    /// (false). Meanwhile, every [`FOREGROUND_CHECK`], sets raw mode when stockade has
    /// come to the foreground without a `SIGCONT` (`fg` of a running background job).
    fn wait_raw(&self) -> bool {
        let mut state = self.lock();
        loop {
            if state.ended {
                return false;
            }
            if state.raw {
                return true;
            }
            state = self
                .changed
                .wait_timeout(state, FOREGROUND_CHECK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            self.make_raw(&mut state);
        }
    }

    /// Waits for raw mode and for input, then reads what is there, the mode checked under
    /// its lock: with a non-blocking `from` ([`terminal_reader`]), a read of the caller's
    /// terminal is never in progress once [`Terminal::end`] (or `restore`) has returned,
    /// so what the caller types after it (the shell's next command, typed while the CLI
    /// checks what the run left) stays in the terminal for the shell, and none of it goes
    /// to the program's terminal. A blocking `from` (no `/proc`, or a terminal that
    /// cannot be opened again) is read after the lock is let go, so that a read that
    /// waits (another reader of the terminal took the input) never holds up a restore:
    /// then a read already waiting when the modes are restored still takes the next
    /// input for the program. `None`: nothing was read; `Some(0)`: the program has
    /// ended.
    fn read_raw(
        &self,
        from: &mut File,
        buf: &mut [u8],
        nonblocking: bool,
    ) -> io::Result<Option<usize>> {
        use rustix::event::{PollFd, PollFlags, poll};
        if !self.wait_raw() {
            // The program has ended: what is typed from here is the shell's.
            return Ok(Some(0));
        }
        let mut fds = [PollFd::new(&*from, PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let state = self.lock();
        if !state.raw {
            return Ok(None);
        }
        if !nonblocking {
            drop(state);
            return from.read(buf).map(Some);
        }
        // Never waits: the lock is held for the copy of what is there only.
        match from.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            r => r.map(Some),
        }
    }

    /// Copies the caller's window size to the program's terminal; the kernel signals
    /// `SIGWINCH` to the program's foreground process group when it changed.
    fn resize(&self) {
        if let Ok(size) = termios::tcgetwinsize(self.caller()) {
            let _ = termios::tcsetwinsize(&self.master, size);
        }
    }
}

/// Copies the caller's stdin to the program until either side ends. With a terminal,
/// reads only while it is in raw mode (stockade in the foreground); `true` with it: `from`
/// is non-blocking ([`terminal_reader`]).
fn copy_input(mut from: File, mut to: File, terminal: Option<(&Terminal, bool)>) {
    let mut buf = [0u8; 4096];
    loop {
        let read = match terminal {
            Some((t, nonblocking)) => t.read_raw(&mut from, &mut buf, nonblocking),
            None => from.read(&mut buf).map(Some),
        };
        let n = match read {
            Ok(Some(0)) => return,
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if write_all(&mut to, &buf[..n]).is_err() {
            return;
        }
    }
}

/// `write_all` that also waits out `EAGAIN`: the master's open file description is
/// shared with the output thread's copy, which is non-blocking, and a program that does
/// not read its input fills the terminal's input queue.
fn write_all(to: &mut File, mut buf: &[u8]) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    while !buf.is_empty() {
        match to.write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut fds = [PollFd::new(&*to, PollFlags::OUT)];
                match poll(&mut fds, None) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A writer without redaction, with the same `finish` as a redacting one.
struct Plain(File);

impl Write for Plain {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Output bound for the caller's terminal: the escape sequences that write its clipboard
/// or make it answer are dropped on the way (`stockade::guard::terminal` has the lists).
/// What the filter holds back at the stream's end (an unfinished sequence) is settled by
/// [`Finish::finish_stream`], or when it is dropped.
struct Filtered {
    filter: TerminalFilter,
    buf: Vec<u8>,
    /// `None` once the stream is finished.
    to: Option<Box<dyn Finish>>,
}

impl Filtered {
    fn new(to: Box<dyn Finish>) -> Filtered {
        Filtered {
            filter: TerminalFilter::new(),
            buf: Vec::new(),
            to: Some(to),
        }
    }

    /// Writes what the filter held back, then what puts back the terminal's modes the
    /// program left changed (`TerminalFilter::restore`): the stream's end.
    fn settle(&mut self) -> Option<Box<dyn Finish>> {
        let mut to = self.to.take()?;
        self.buf.clear();
        self.filter.finish(&mut self.buf);
        self.filter.restore(&mut self.buf);
        let _ = to.write_all(&self.buf);
        Some(to)
    }
}

/// A writer to the caller's terminal `to` ([`Filtered`]), for a session's client
/// (`session_cli`), whose stream ends when the writer is dropped.
#[cfg(target_os = "linux")]
pub(crate) fn filtered_terminal(to: File) -> Box<dyn Write + Send> {
    Box::new(Filtered::new(Box::new(Plain(to))))
}

impl Write for Filtered {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let Some(to) = self.to.as_mut() else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        self.buf.clear();
        self.filter.push(data, &mut self.buf);
        to.write_all(&self.buf)?;
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.to.as_mut().map_or(Ok(()), |to| to.flush())
    }
}

impl Finish for Filtered {
    fn finish_stream(mut self: Box<Self>) -> Vec<Finding> {
        self.settle()
            .map(|to| to.finish_stream())
            .unwrap_or_default()
    }
}

impl Drop for Filtered {
    fn drop(&mut self) {
        let _ = self.settle();
    }
}

/// The end of an output stream: what the redacting writer found, if it is one.
trait Finish: Write + Send {
    fn finish_stream(self: Box<Self>) -> Vec<Finding>;
}

impl Finish for Plain {
    fn finish_stream(self: Box<Self>) -> Vec<Finding> {
        Vec::new()
    }
}

impl Finish for RedactingWriter<File> {
    fn finish_stream(self: Box<Self>) -> Vec<Finding> {
        (*self)
            .finish()
            .map(|(_, findings)| findings)
            .unwrap_or_default()
    }
}

/// One output stream of the program: its end here (non-blocking) and the caller's fd.
struct Output {
    from: File,
    to: Box<dyn Finish>,
    /// Set once writing to the caller failed: the rest is read and dropped, so that the
    /// program never blocks on a full pipe.
    broken: bool,
}

impl Output {
    /// `from` is one of stockade's own ends (a pipe, the master), so making it
    /// non-blocking changes nothing for the caller or the program.
    fn new(from: OwnedFd, to: Box<dyn Finish>) -> io::Result<Output> {
        let flags = rustix::fs::fcntl_getfl(&from)?;
        rustix::fs::fcntl_setfl(&from, flags | rustix::fs::OFlags::NONBLOCK)?;
        Ok(Output {
            from: File::from(from),
            to,
            broken: false,
        })
    }

    /// Copies what can be read now (one read, or until nothing is left). `false` once the
    /// stream has ended: EOF from a pipe, `EIO` from a master whose slave is closed
    /// everywhere.
    fn copy(&mut self, buf: &mut [u8], until_empty: bool) -> bool {
        loop {
            match self.from.read(buf) {
                Ok(0) => return false,
                Ok(n) => {
                    if !self.broken && self.to.write_all(&buf[..n]).is_err() {
                        self.broken = true;
                    }
                    if !until_empty {
                        return true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
    }
}

/// Copies every output stream to the caller until each has ended, or until `wake` says
/// the program has ended: then whatever is buffered is copied and the rest is left (a
/// process that outlives the program on layer 2 may hold a stream open forever).
fn pump(mut outputs: Vec<Output>, wake: OwnedFd) -> Vec<Finding> {
    use rustix::event::{PollFd, PollFlags, poll};
    let mut buf = vec![0u8; 64 * 1024];
    let mut open: Vec<usize> = (0..outputs.len()).collect();
    let mut woken = false;
    while !open.is_empty() && !woken {
        let mut ready = Vec::with_capacity(open.len());
        {
            let mut fds: Vec<PollFd<'_>> = open
                .iter()
                .map(|&i| PollFd::new(&outputs[i].from, PollFlags::IN))
                .collect();
            fds.push(PollFd::new(&wake, PollFlags::IN));
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
            woken = !fds[open.len()].revents().is_empty();
            for (k, fd) in fds[..open.len()].iter().enumerate() {
                if !fd.revents().is_empty() {
                    ready.push(open[k]);
                }
            }
        }
        for i in ready {
            if !outputs[i].copy(&mut buf, false) {
                open.retain(|&j| j != i);
            }
        }
    }
    for &i in &open {
        outputs[i].copy(&mut buf, true);
    }
    outputs
        .into_iter()
        .flat_map(|o| o.to.finish_stream())
        .collect()
}

/// A run whose stdio is being relayed.
pub struct Running {
    terminal: Option<Arc<Terminal>>,
    pump: Option<JoinHandle<Vec<Finding>>>,
    /// Dropped when the program has ended: the output thread then drains and stops.
    wake: Option<OwnedFd>,
}

impl Running {
    /// Whether the program has a pseudo-terminal of its own.
    pub fn has_terminal(&self) -> bool {
        self.terminal.is_some()
    }

    /// Copies the caller's window size to the program's terminal (on `SIGWINCH`).
    pub fn resize(&self) {
        if let Some(t) = &self.terminal {
            t.resize();
        }
    }

    /// Sets raw mode again when stockade is in the terminal's foreground (on `SIGCONT`).
    pub fn refresh(&self) {
        if let Some(t) = &self.terminal {
            t.refresh();
        }
    }

    /// Restores the caller's modes (before stockade stops: `SIGTSTP`); [`Running::refresh`]
    /// sets raw mode again.
    pub fn restore(&self) {
        if let Some(t) = &self.terminal {
            t.restore();
        }
    }

    /// Restores the caller's modes for good once the program has ended: nothing more is
    /// read from the caller's terminal, and raw mode is not set again.
    pub fn end(&self) {
        if let Some(t) = &self.terminal {
            t.end();
        }
    }

    /// After the program has ended: copies its remaining output, restores the caller's
    /// terminal, and returns what the redacting writers found (`--scrub`).
    pub fn finish(mut self) -> Vec<Finding> {
        drop(self.wake.take());
        let findings = self
            .pump
            .take()
            .map(|p| p.join().unwrap_or_default())
            .unwrap_or_default();
        self.end();
        findings
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn only_a_character_device_is_asked_whether_it_is_a_terminal() {
        let never = || -> bool { panic!("asked isatty of a stream that is no device") };
        let stat = |f: &dyn std::os::fd::AsFd| rustix::fs::fstat(f).ok();
        // A file, a pipe, a socket: the `fstat` alone tells.
        let file = tempfile::tempfile().unwrap();
        assert_eq!(kind_by(stat(&file), never, || true), Kind::File);
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert_eq!(kind_by(stat(&r), never, || true), Kind::Channel);
        assert_eq!(kind_by(stat(&r), never, || false), Kind::File);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(kind_by(stat(&a), never, || true), Kind::Channel);
        assert_eq!(kind_by(None, never, never), Kind::Closed);
        // `/dev/null` is known from its device number; another character device is
        // asked: a terminal, else a file.
        let null = std::fs::File::open("/dev/null").unwrap();
        let asked = || -> bool { panic!("asked isatty of /dev/null") };
        assert_eq!(kind_by(stat(&null), asked, never), Kind::Null);
        let zero = std::fs::File::open("/dev/zero").unwrap();
        assert_eq!(kind_by(stat(&zero), || true, never), Kind::Terminal);
        assert_eq!(kind_by(stat(&zero), || false, never), Kind::File);
        // And `kind` itself agrees on real fds.
        assert_eq!(kind(null.as_fd()), Kind::Null);
        assert_eq!(kind(file.as_fd()), Kind::File);
        assert_eq!(kind(r.as_fd()), Kind::Channel);
    }
}
