//! `stockade session --socket PATH` serves one warm session ([`stockade::Session`]) on a
//! unix socket; `stockade run --session PATH -- PROGRAM…` runs one command in it. A script
//! then pays for the sandbox once, as a host of the library does.
//!
//! # The socket, and who may use it
//!
//! The server makes the socket `0600` in a directory that only its user can write: the
//! socket's parent must be a directory (not a symbolic link) that the caller owns and
//! neither its group nor others can write, else `session` refuses to start. The socket
//! appears under its name only once it listens (bound under a temporary name, then
//! renamed without replacing anything), and a name that exists is refused. The client
//! checks the same of the directory, that the socket is a socket (not a symbolic link)
//! owned by the caller's effective uid, and after connecting that the server's
//! `SO_PEERCRED` uid is the caller's. The server checks the client's `SO_PEERCRED` uid and
//! closes the connection of any other user without reading it, closes that of a process
//! of the session's own sandbox likewise, and refuses (telling it so on its stderr) a
//! client under more seccomp filters than the server: a program in any sandbox of
//! stockade's, which runs as the user too, and reaches the socket where its directory is
//! in its view (layer 2 reaches every pathname socket). Each end so takes the other only
//! when it runs under no more filters than itself, as a client and a server started side
//! by side do. The socket's directory must still be kept out of other sandboxes' views.
//!
//! # One command per connection
//!
//! The client sends one request ([`crate::session_wire`]) with the command's stdin,
//! stdout and stderr (`SCM_RIGHTS`): its own pipes and sockets, and for a terminal, a
//! file, a device or `/dev/null` a pipe that it copies ([`Streams`]; output bound for a
//! terminal through a [`TerminalFilter`](stockade::guard::terminal::TerminalFilter), as `run`'s pseudo-terminal relay does; with
//! `--no-pty`, the terminal itself, as `run --no-pty` hands it over). The server starts the command in the session on a thread of its
//! own, so clients are served concurrently, and replies once with how it ended; the
//! client exits as `run` does (the code, or 128+N for signal N; 127, 126 or 125 when it did
//! not start, with the error on its stderr; 124 at the session's `wall_time`, which holds
//! per command). The signals `run` forwards, the client passes on as records; a client
//! that goes away (killed, or its connection closed) ends its command and every process
//! of it. At most [`MAX_CLIENTS`] are served at once (one more is dropped unread), and a
//! client that sends no request within [`REQUEST_DEADLINE`] of its connect is dropped:
//! clients that connect and wait hold a bounded number of threads, for a bounded time.
//!
//! # The end
//!
//! `SIGINT`, `SIGTERM` and `SIGHUP` end the server: it stops accepting, removes the
//! socket, ends every running command (each client gets its command's status: killed),
//! closes the session and exits with 128+N. No client holds that end: the server waits
//! a bounded time for the clients' threads before and after it closes the session, and
//! its error lines to a client's stderr never block (a client may hand it a pipe it
//! filled and never reads). If the server dies any other way (`SIGKILL`),
//! the library's sandbox dies with it (its init's parent-death signal), and a *janitor*
//! removes the socket: a small process the server starts before the session (this binary
//! again, in a process group of its own, so that a `^C` at the terminal does not end it
//! first), which waits for the end of a pipe that only the server holds and then unlinks
//! the socket, if the name still holds the very socket the server made. So nothing of a
//! session is left on the host after its server. The other way round, a session's
//! sandbox that ends first (killed from outside) ends its server: it stops accepting,
//! removes the socket, ends what is left and exits with 125.

use std::ffi::{OsStr, OsString};
use std::io::{IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};
use stockade::error::Report;
use stockade::{Error, Session, SpawnError};

use crate::session_wire::{self as wire, Reply, Request};
use crate::{PolicyArgs, exit_code, fail, fail_with, is_exec_failure};

/// The signals that end the server.
const ENDING: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// The signals a client passes on to its command: those `run` forwards, but `SIGWINCH`
/// (a session's command has no terminal of its own to resize).
use crate::forward::FORWARDED;

/// How often a command's thread looks at its client's connection (a record, or gone)
/// and at the server's end, while it waits for the command.
const TICK: Duration = Duration::from_millis(50);

/// How long a client has, once connected, to send its request: one that says nothing is
/// dropped then, and holds its thread no longer.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// How many clients are served at once, each on a thread of its own: a client beyond
/// them is dropped unread (its `run` says the session refused it), so that clients that
/// connect and wait cannot make the server take threads without bound.
const MAX_CLIENTS: usize = 128;

/// At most this many lines about refused or dropped clients per [`SAID_WINDOW`]; the rest
/// are counted and the count said once the window has passed. A command of the session
/// that loops on `connect` is refused each time, and would otherwise fill the server's
/// log (18 MB in 25 s, as tried).
const SAID_PER_WINDOW: u32 = 20;
const SAID_WINDOW: Duration = Duration::from_secs(10);

/// The window's start, the lines said in it and the lines held back since the last count.
static SAID: std::sync::Mutex<Option<(std::time::Instant, u32, u64)>> = std::sync::Mutex::new(None);

/// Says `line` about a client on the server's stderr, within [`SAID_PER_WINDOW`].
fn say_client(line: std::fmt::Arguments<'_>) {
    let now = std::time::Instant::now();
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    let (start, shown, held) = said.get_or_insert((now, 0, 0));
    if now.duration_since(*start) >= SAID_WINDOW {
        if *held > 0 {
            eprintln!(
                "stockade: session: {held} more lines about refused or dropped clients not shown"
            );
        }
        (*start, *shown, *held) = (now, 0, 0);
    }
    if *shown < SAID_PER_WINDOW {
        *shown += 1;
        eprintln!("stockade: session: {line}");
    } else {
        *held += 1;
    }
}

/// The directory of a session's socket, held open, and the socket's name in it.
struct Place {
    dir: OwnedFd,
    /// The directory's path, as given (made absolute), for messages and the janitor.
    path: PathBuf,
    name: OsString,
}

impl Place {
    /// Opens the parent of `socket` without following a symbolic link anywhere in its path
    /// (`RESOLVE_NO_SYMLINKS`) and checks it: a directory that this user owns and no one
    /// else can write. A link on the way could be one a sandboxed program planted in its
    /// workspace and can point elsewhere later: at a directory of its own, where its own
    /// socket would take the client's request (secrets, stdio) as the session's.
    fn open(socket: &Path) -> Result<Place, String> {
        let shown = socket.display();
        let Some(name) = socket.file_name() else {
            return Err(format!("{shown}: names no file"));
        };
        let parent = match socket.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let path = crate::absolute(parent).map_err(|e| format!("{shown}: {}", Report(&e)))?;
        let at =
            |e: &(dyn std::error::Error + 'static)| format!("{}: {}", path.display(), Report(e));
        // Not `O_NOFOLLOW`, which would answer a link at the end with `ENOTDIR`:
        // `RESOLVE_NO_SYMLINKS` refuses a link anywhere with `ELOOP`.
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = match rustix::fs::openat2(
            rustix::fs::CWD,
            &path,
            flags,
            Mode::empty(),
            rustix::fs::ResolveFlags::NO_SYMLINKS,
        ) {
            Ok(dir) => dir,
            Err(rustix::io::Errno::LOOP) => {
                let real = std::fs::canonicalize(&path)
                    .map(|r| format!(" (its real path is {})", r.display()))
                    .unwrap_or_default();
                return Err(format!(
                    "{}: passes through a symbolic link{real}; a session's socket needs a \
                     path without one",
                    path.display()
                ));
            }
            Err(e) => return Err(at(&std::io::Error::from(e))),
        };
        let st = rustix::fs::fstat(&dir).map_err(|e| at(&std::io::Error::from(e)))?;
        let euid = rustix::process::geteuid().as_raw();
        if st.st_mode & 0o022 != 0 {
            return Err(format!(
                "{}: writable by its group or others (mode {:o}): a session's socket needs a \
                 directory only you can write",
                path.display(),
                st.st_mode & 0o7777
            ));
        }
        if st.st_uid != euid {
            return Err(format!(
                "{}: owned by uid {}, not by this user (uid {euid}): a session's socket needs \
                 a directory only you can write",
                path.display(),
                st.st_uid
            ));
        }
        Ok(Place {
            dir,
            path,
            name: name.to_owned(),
        })
    }

    /// The address of `name` in the directory, through the open directory (so the checked
    /// directory is the one used, whatever its path names meanwhile).
    fn address(&self, name: &OsStr) -> Result<SocketAddrUnix, String> {
        let mut p = format!("/proc/self/fd/{}/", self.dir.as_raw_fd()).into_bytes();
        p.extend_from_slice(name.as_bytes());
        SocketAddrUnix::new(p.as_slice()).map_err(|e| {
            format!(
                "{}: {} (a socket's name is at most 90 bytes or so)",
                Path::new(name).display(),
                Report(&std::io::Error::from(e))
            )
        })
    }

    /// The socket's (device, inode), without following a symbolic link.
    fn identity(&self, name: &OsStr) -> rustix::io::Result<(u64, u64, rustix::fs::Stat)> {
        let st = rustix::fs::statat(&self.dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
        Ok((st.st_dev, st.st_ino, st))
    }

    /// Removes the socket, if its name still holds the socket `(dev, ino)`.
    fn remove(&self, id: (u64, u64)) {
        if let Ok((dev, ino, _)) = self.identity(&self.name) {
            if (dev, ino) == id {
                let _ = rustix::fs::unlinkat(&self.dir, self.name.as_os_str(), AtFlags::empty());
            }
        }
    }
}

/// `stockade session --socket PATH`: serves a session until a signal ends it.
pub fn serve(args: &PolicyArgs, socket: &Path) -> ExitCode {
    // Before any thread starts: the ending signals wait for the signal thread.
    let mut ending = SigSet::empty();
    for s in ENDING {
        ending.add(s);
    }
    if let Err(e) = ending.thread_block() {
        return fail(125, format_args!("block signals: {}", Report(&e)));
    }
    let place = match Place::open(socket) {
        Ok(p) => p,
        Err(e) => return fail(125, format_args!("session --socket {e}")),
    };
    let (listener, id) = match listen(&place) {
        Ok(l) => l,
        Err(e) => return fail(125, format_args!("session --socket {e}")),
    };
    // The socket goes when this process ends, however it ends.
    let janitor = match janitor(&place, id) {
        Ok(j) => j,
        Err(e) => {
            place.remove(id);
            return fail(
                125,
                format_args!("session: start the janitor: {}", Report(&e)),
            );
        }
    };
    let code = serve_on(args, (&place, id), &listener, (&ending, &janitor));
    removed(&place, id, &janitor);
    code
}

/// Removes the socket and tells the janitor so (before this process ends, which is when
/// it acts; the session's close, which may take a while, comes after), which then leaves
/// the name alone: another server may take it meanwhile, and its socket the same inode
/// number (a tmpfs reuses them), and that one is not this one's to remove.
fn removed(place: &Place, id: (u64, u64), janitor: &OwnedFd) {
    place.remove(id);
    let _ = rustix::io::write(janitor, &[REMOVED]);
}

/// The byte a server writes to its janitor once it has removed its socket itself.
const REMOVED: u8 = b'r';

/// Binds the socket under a temporary name, `0600`, listens, and gives it its name
/// (refusing to replace anything there). Returns it and its (device, inode).
fn listen(place: &Place) -> Result<(OwnedFd, (u64, u64)), String> {
    let shown = place.path.join(&place.name);
    let shown = shown.display();
    let io = |e: rustix::io::Errno| Report(&std::io::Error::from(e)).to_string();
    if place.identity(&place.name).is_ok() {
        return Err(format!(
            "{shown}: exists (a session's socket names a new file; remove it if no server \
             uses it)"
        ));
    }
    let mut temp = OsString::from(".");
    temp.push(&place.name);
    temp.push(format!(".{}.new", std::process::id()));
    let listener = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("{shown}: socket: {}", io(e)))?;
    let addr = place.address(&temp)?;
    // No moment at which others may connect: made 0600 (the umask of this thread, which
    // is the only one yet), then checked.
    let old = rustix::process::umask(Mode::from_raw_mode(0o177));
    let bound = rustix::net::bind(&listener, &addr);
    rustix::process::umask(old);
    bound.map_err(|e| format!("{shown}: bind: {}", io(e)))?;
    let undo = |msg: String| {
        let _ = rustix::fs::unlinkat(&place.dir, temp.as_os_str(), AtFlags::empty());
        msg
    };
    let euid = rustix::process::geteuid().as_raw();
    match place.identity(&temp) {
        Ok((_, _, st))
            if FileType::from_raw_mode(st.st_mode) == FileType::Socket
                && st.st_mode & 0o7777 == 0o600
                && st.st_uid == euid => {}
        Ok((_, _, st)) => {
            return Err(undo(format!(
                "{shown}: made with mode {:o}, uid {}: not 0600 and this user's",
                st.st_mode & 0o7777,
                st.st_uid
            )));
        }
        Err(e) => return Err(undo(format!("{shown}: {}", io(e)))),
    }
    rustix::net::listen(&listener, 64).map_err(|e| undo(format!("{shown}: listen: {}", io(e))))?;
    rustix::fs::renameat_with(
        &place.dir,
        temp.as_os_str(),
        &place.dir,
        place.name.as_os_str(),
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .map_err(|e| undo(format!("{shown}: {}", io(e))))?;
    let (dev, ino, _) = place
        .identity(&place.name)
        .map_err(|e| format!("{shown}: {}", io(e)))?;
    Ok((listener, (dev, ino)))
}

/// Starts the janitor: this binary's hidden `__session-janitor`, which removes the socket
/// once the pipe it reads reaches its end, that is once this process (the only holder of
/// the write end, close-on-exec) has ended. Returns the write end.
fn janitor(place: &Place, id: (u64, u64)) -> std::io::Result<OwnedFd> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let dir = rustix::fs::fstat(&place.dir)?;
    std::process::Command::new("/proc/self/exe")
        .arg("__session-janitor")
        .arg(&place.path)
        .arg(format!("{}:{}", dir.st_dev, dir.st_ino))
        .arg(&place.name)
        .arg(format!("{}:{}", id.0, id.1))
        .stdin(std::process::Stdio::from(r))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()?;
    Ok(w)
}

/// The hidden `__session-janitor DIR DEV:INO NAME DEV:INO`: waits for the end of stdin,
/// then removes `NAME` in `DIR` if both still are what the server made, unless the server
/// said it removed the socket itself ([`REMOVED`]).
pub fn janitor_main(dir: &Path, dir_id: &str, name: &OsStr, id: &str) -> ExitCode {
    let mut all = SigSet::empty();
    for s in ENDING.into_iter().chain([Signal::SIGQUIT]) {
        all.add(s);
    }
    let _ = all.thread_block();
    let parse = |s: &str| -> Option<(u64, u64)> {
        let (a, b) = s.split_once(':')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let (Some(dir_id), Some(id)) = (parse(dir_id), parse(id)) else {
        return ExitCode::from(2);
    };
    let mut buf = [0u8; 64];
    let mut removed = false;
    loop {
        match rustix::io::read(std::io::stdin().as_fd(), &mut buf) {
            Ok(0) => break,
            Ok(n) => removed |= buf.get(..n).is_some_and(|b| b.contains(&REMOVED)),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    if removed {
        return ExitCode::SUCCESS;
    }
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(dir, flags, Mode::empty()) else {
        return ExitCode::SUCCESS;
    };
    match rustix::fs::fstat(&fd) {
        Ok(st) if (st.st_dev, st.st_ino) == dir_id => {}
        _ => return ExitCode::SUCCESS,
    }
    let place = Place {
        dir: fd,
        path: dir.to_path_buf(),
        name: name.to_owned(),
    };
    place.remove(id);
    ExitCode::SUCCESS
}

/// Starts the session and serves the listener until an ending signal.
fn serve_on(
    args: &PolicyArgs,
    (place, id): (&Place, (u64, u64)),
    listener: &OwnedFd,
    (ending, janitor): (&SigSet, &OwnedFd),
) -> ExitCode {
    let sandbox = match args.sandbox() {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Some(root) = writable_inside(&sandbox.policy(), &place.path) {
        return fail(
            125,
            format_args!(
                "session --socket {}: inside {}, which the session's commands can write: \
                 one could replace the socket with its own and serve the next clients; \
                 choose a directory outside the workspace and the writable paths",
                place.path.display(),
                root.display()
            ),
        );
    }
    let session = sandbox.session();
    crate::warn_degraded(&sandbox);
    crate::warn_unhidden(&sandbox);
    let session = match session {
        Ok(s) => s,
        Err(e) => return fail_with(125, &e),
    };
    let (wake_r, wake_w) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => return fail(125, format_args!("pipe: {}", Report(&e))),
    };
    let signo = std::sync::Arc::new(AtomicI32::new(0));
    {
        let (signo, ending) = (std::sync::Arc::clone(&signo), *ending);
        std::thread::spawn(move || {
            if let Ok(sig) = ending.wait() {
                signo.store(sig as i32, Ordering::SeqCst);
            }
            let _ = rustix::io::write(&wake_w, b"x");
        });
    }
    // The session's pidfd, for the loop's poll: the session itself is the clients'.
    let sandbox_ended = match session.as_fd().try_clone_to_owned() {
        Ok(fd) => fd,
        Err(e) => return fail(125, format_args!("dup: {}", Report(&e))),
    };
    let served = std::sync::Arc::new(Served {
        sandbox: session.id(),
        session: std::sync::Mutex::new(Some(session)),
        stop: AtomicBool::new(false),
        clients: AtomicUsize::new(0),
    });
    let failed = accept_until_the_end(&served, listener, &wake_r, &sandbox_ended);
    // New clients are refused from now on (the socket goes); running commands end.
    removed(place, id, janitor);
    let closed = served.end();
    if let Some(e) = failed {
        return fail(125, format_args!("session: {e}"));
    }
    if let Err(e) = closed {
        return fail(125, format_args!("session: close: {}", Report(&e)));
    }
    let sig = signo.load(Ordering::SeqCst);
    ExitCode::from(128u8.wrapping_add(sig as u8))
}

/// Serves the listener, each client on a thread of its own, until an ending signal
/// (`wake` readable) or the end of the session's sandbox (`sandbox_ended` readable).
/// Returns why it stopped when that is a failure.
fn accept_until_the_end(
    served: &std::sync::Arc<Served>,
    listener: &OwnedFd,
    wake: &OwnedFd,
    sandbox_ended: &OwnedFd,
) -> Option<String> {
    loop {
        let mut fds = [
            rustix::event::PollFd::new(listener, rustix::event::PollFlags::IN),
            rustix::event::PollFd::new(wake, rustix::event::PollFlags::IN),
            // The session's sandbox: readable once it has ended (killed from outside,
            // say), when no command could start any more.
            rustix::event::PollFd::new(sandbox_ended, rustix::event::PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Some(format!("poll: {}", Report(&std::io::Error::from(e)))),
        }
        if !fds[1].revents().is_empty() {
            return None;
        }
        if !fds[2].revents().is_empty() {
            return Some("the session's sandbox ended".to_string());
        }
        if fds[0].revents().is_empty() {
            continue;
        }
        match rustix::net::accept_with(listener, SocketFlags::CLOEXEC) {
            Ok(conn) => serve_client(served, conn),
            // A client that went away before it was accepted, or no fds left for a
            // moment: the others go on being served.
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Starts a thread for the client of `conn`, if there is room for one more.
fn serve_client(served: &std::sync::Arc<Served>, conn: OwnedFd) {
    if served.clients.load(Ordering::SeqCst) >= MAX_CLIENTS {
        say_client(format_args!(
            "refused a client: {MAX_CLIENTS} are served already"
        ));
        return;
    }
    let slot = Slot::take(served);
    // No thread to be had (a limit): that client is dropped (its `run` says the session
    // refused it; the slot goes back with the closure), and the server goes on.
    let spawned = std::thread::Builder::new().spawn(move || {
        // Held until the thread ends, a panic included.
        let slot = slot;
        client(&slot.0, conn);
    });
    if let Err(e) = spawned {
        eprintln!("stockade: session: no thread for a client: {}", Report(&e));
    }
}

/// How long the server's end waits for its clients' threads, first to end their commands
/// and reply before the session closes, then to reply once it has.
const CLIENTS_GRACE: Duration = Duration::from_secs(2);

/// What the server's loop and its clients' threads share. The session is held here,
/// not borrowed by a thread scope, so that the server's end does not depend on any
/// client's thread: one that a client kept busy (in a write to its stderr, say) once held
/// the scope, and with it the session, its sandbox and every kept background process,
/// open after `SIGTERM`.
struct Served {
    /// The session; `None` once the server's end has closed it.
    session: std::sync::Mutex<Option<Session>>,
    /// The host's pid of the session's sandbox's first process (`Session::id`).
    sandbox: u32,
    /// Set at the server's end: clients waiting for a request stop, and running
    /// commands are killed.
    stop: AtomicBool,
    /// The clients being served, each on a thread of its own.
    clients: AtomicUsize,
}

impl Served {
    /// A command of the session; `None` once it is closed.
    fn command(&self, program: &OsStr) -> Option<stockade::Command> {
        let session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        session.as_ref().map(|s| s.command(program))
    }

    /// The server's end: tells the clients' threads to kill their commands and gives
    /// them [`CLIENTS_GRACE`] to reply, then closes the session whatever they do (which
    /// ends every process of it, kept ones included), and gives them as long again to
    /// reply. A thread still running then is left behind: the process exits without it.
    fn end(&self) -> std::io::Result<std::process::ExitStatus> {
        self.stop.store(true, Ordering::SeqCst);
        self.wait_for_clients(CLIENTS_GRACE);
        let session = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let closed = session.map_or(Ok(std::process::ExitStatus::default()), Session::close);
        self.wait_for_clients(CLIENTS_GRACE);
        closed
    }

    /// Waits until no client is served, or `limit` has passed.
    fn wait_for_clients(&self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        while self.clients.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// One of the [`MAX_CLIENTS`] places, given back when dropped (the client's thread ends,
/// however it ends).
struct Slot(std::sync::Arc<Served>);

impl Slot {
    fn take(served: &std::sync::Arc<Served>) -> Slot {
        served.clients.fetch_add(1, Ordering::SeqCst);
        Slot(std::sync::Arc::clone(served))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one connection: checks its user, reads its one request, runs the command and
/// replies how it ended.
fn client(served: &Served, conn: OwnedFd) {
    match admit(&conn, served.sandbox) {
        Admission::Served => {}
        Admission::Dropped => return,
        Admission::Told(why) => return tell_refused(&conn, &served.stop, &why),
    }
    let Some((request, [stdin, stdout, stderr])) = receive(&conn, &served.stop) else {
        return;
    };
    let outlet = Outlet::of(&stderr);
    let mut say = |line: &dyn std::fmt::Display| {
        if let Some(o) = outlet.as_ref() {
            o.say(format!("stockade: {line}\n").as_bytes());
        }
    };
    let reply = run_request(served, &request, [stdin, stdout, stderr], &conn, &mut say);
    let _ = rustix::net::send(&conn, &reply.encode(), SendFlags::NOSIGNAL);
}

/// Whether a connection is served.
enum Admission {
    Served,
    /// Closed unread (another user's, or a process of the session's own sandbox).
    Dropped,
    /// Refused, and the client is told why on its stderr.
    Told(String),
}

/// Whether the client of `conn` is served: this user's, not of the session's own sandbox
/// (whose first process is `sandbox`), and under no more seccomp filters than this
/// server (not in any sandbox of stockade's).
fn admit(conn: &OwnedFd, sandbox: u32) -> Admission {
    let euid = rustix::process::geteuid();
    let peer = match rustix::net::sockopt::socket_peercred(conn) {
        Ok(peer) => peer,
        Err(e) => {
            say_client(format_args!(
                "a client's credentials: {}",
                Report(&std::io::Error::from(e))
            ));
            return Admission::Dropped;
        }
    };
    let pid = peer.pid.as_raw_nonzero().get();
    if peer.uid != euid {
        say_client(format_args!(
            "refused a client of uid {} (pid {pid}): not this user's",
            peer.uid.as_raw(),
        ));
        return Admission::Dropped;
    }
    // Pinned for both checks: each must be of the process that connected.
    let pidfd = peer_pidfd(conn);
    // The same uid is not enough: the session's own commands run as this user too, and
    // Landlock does not govern `connect` to a pathname socket (layer 2 reaches every one;
    // the full layer one in a writable root). A command that got in could start commands
    // that outlive it (`--keep-background`) with its stdio, the caller's terminal
    // perhaps. So a client must not descend from the session's sandbox.
    if let Some(why) = refused_peer(pidfd.as_ref(), pid, sandbox) {
        say_client(format_args!("refused a client (pid {pid}): {why}"));
        return Admission::Dropped;
    }
    // Nor from any other sandbox of this user's: a program there reaches the socket the
    // same way (on the full layer, when the socket's directory is bound into its view),
    // and would run commands with the session's policy (write a workspace its own
    // sandbox may not) that outlive its sandbox.
    match confined_client(pidfd.as_ref(), pid) {
        None => Admission::Served,
        Some(Refusal::Ended) => {
            say_client(format_args!("dropped a client (pid {pid}): it has ended"));
            Admission::Dropped
        }
        Some(Refusal::Why(why)) => {
            say_client(format_args!("refused a client (pid {pid}): {why}"));
            Admission::Told(why)
        }
    }
}

/// Why a client is refused by [`confined_client`].
enum Refusal {
    /// It ended before it was checked.
    Ended,
    /// What to tell it.
    Why(String),
}

/// Why the client (pid `pid`, pinned by `pidfd`) is refused: it runs under more seccomp
/// filters than this server, as every program in a sandbox of stockade's does (one more
/// than the host that started it, on either layer), or its count cannot be read. The
/// client's `confined_server` check, the other way round: a real client is the caller's
/// own `run --session`, under no more filters than the server started beside it.
fn confined_client(pidfd: Option<&OwnedFd>, pid: i32) -> Option<Refusal> {
    match peer_filters(pidfd, pid) {
        Filters::NotMore => None,
        Filters::Ended => Some(Refusal::Ended),
        Filters::Unreadable => Some(Refusal::Why(format!(
            "the client's seccomp filters (pid {pid}) cannot be read, so it may run inside \
             a sandbox; a sandboxed program may not use a session"
        ))),
        Filters::More { theirs, own } => Some(Refusal::Why(format!(
            "the client runs inside a sandbox ({theirs} seccomp filters, more than this \
             server's {own}); a sandboxed program may not use a session"
        ))),
    }
}

/// Tells a refused client why, on the stderr of its request (read for that alone, within
/// [`REQUEST_DEADLINE`]; nothing of it runs), and replies 125, as for a command that did
/// not start.
fn tell_refused(conn: &OwnedFd, stop: &AtomicBool, why: &str) {
    let Some((_, [_, _, stderr])) = receive(conn, stop) else {
        return;
    };
    if let Some(o) = Outlet::of(&stderr) {
        o.say(format!("stockade: refused: {why}\n").as_bytes());
    }
    let _ = rustix::net::send(conn, &Reply::Code(125).encode(), SendFlags::NOSIGNAL);
}

/// How long an error line for a client's stderr may wait for room there, in all: the
/// line is dropped then.
const SAY_DEADLINE: Duration = Duration::from_millis(250);

/// A client's stderr, written without ever blocking the server's thread. A client chooses
/// that fd: a pipe it filled and never reads would hold a blocking write, and the
/// client's thread with it, for ever. The client's own file description is shared (with
/// the client, and the command), so its flags are left alone: a socket is written with
/// `MSG_DONTWAIT`, a pipe or a terminal through a description of this server's own,
/// opened again through `/proc/self/fd` with `O_NONBLOCK`; anything else (a regular
/// file, which the real client never sends, whose write can wait on its file system) is
/// not written.
enum Outlet {
    Socket(OwnedFd),
    Reopened(OwnedFd),
}

impl Outlet {
    /// The outlet for `fd`; `None` when it is none of those kinds or not open for writing.
    fn of(fd: &OwnedFd) -> Option<Outlet> {
        let st = rustix::fs::fstat(fd).ok()?;
        let kind = FileType::from_raw_mode(st.st_mode);
        if kind == FileType::Socket {
            return fd.try_clone().ok().map(Outlet::Socket);
        }
        // Of the character devices, a pseudo-terminal's slave alone (majors 136 to 143):
        // opening a device again runs its open in this server, and some give the opener
        // something of its own, not the client's (review: `/dev/tty` opened this server's
        // controlling terminal, where a refused client's lines then appeared; `/dev/ptmx`
        // makes a new terminal at every open).
        let pts = kind == FileType::CharacterDevice
            && crate::relay::PTY_SLAVE_MAJORS.contains(&rustix::fs::major(st.st_rdev));
        if kind != FileType::Fifo && !pts {
            return None;
        }
        // Only a description the client opened for writing (not a read end, not an
        // `O_PATH` fd) is opened again for writing.
        let access = rustix::fs::fcntl_getfl(fd).ok()? & (OFlags::RWMODE | OFlags::PATH);
        if access != OFlags::WRONLY && access != OFlags::RDWR {
            return None;
        }
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let flags = OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let again = rustix::fs::open(path, flags, Mode::empty()).ok()?;
        // Still the same file (the open went through this process's own fd table, but a
        // device's open may hand out another).
        let st2 = rustix::fs::fstat(&again).ok()?;
        ((st2.st_dev, st2.st_ino) == (st.st_dev, st.st_ino)).then_some(Outlet::Reopened(again))
    }

    /// One write that does not wait.
    fn write(&self, bytes: &[u8]) -> rustix::io::Result<usize> {
        match self {
            Outlet::Socket(fd) => {
                rustix::net::send(fd, bytes, SendFlags::DONTWAIT | SendFlags::NOSIGNAL)
            }
            Outlet::Reopened(fd) => rustix::io::write(fd, bytes),
        }
    }

    /// Writes `line` as far as it goes within [`SAY_DEADLINE`]; the rest is dropped.
    fn say(&self, line: &[u8]) {
        let deadline = std::time::Instant::now() + SAY_DEADLINE;
        let mut left = line;
        while !left.is_empty() {
            match self.write(left) {
                Ok(0) => return,
                Ok(n) => left = left.get(n..).unwrap_or(&[]),
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    if !self.room_before(deadline) {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// Waits for room to write, until `deadline`: whether to try again (room, or a
    /// signal that cut the wait short).
    fn room_before(&self, deadline: std::time::Instant) -> bool {
        let (Outlet::Socket(fd) | Outlet::Reopened(fd)) = self;
        let wait = deadline.saturating_duration_since(std::time::Instant::now());
        if wait.is_zero() {
            return false;
        }
        let Ok(wait) = rustix::event::Timespec::try_from(wait) else {
            return false;
        };
        let mut fds = [rustix::event::PollFd::new(
            fd,
            rustix::event::PollFlags::OUT,
        )];
        match rustix::event::poll(&mut fds, Some(&wait)) {
            Ok(n) => n > 0,
            Err(e) => e == rustix::io::Errno::INTR,
        }
    }
}

/// The root of `policy` writable inside the sandbox (the workspace or a writable path)
/// that holds `dir`, compared canonically; `None` when none does.
fn writable_inside(policy: &stockade::Policy, dir: &Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(dir).ok()?;
    // No workspace named: the working directory is the workspace.
    let workspace = policy
        .workspace
        .clone()
        .or_else(|| std::env::current_dir().ok());
    workspace
        .into_iter()
        .chain(policy.writable_paths.iter().cloned())
        .find(|root| std::fs::canonicalize(root).is_ok_and(|r| dir.starts_with(r)))
}

/// Why the client whose pid (at its `connect`) is `pid` is refused: it descends from the
/// session's sandbox, whose first process is `sandbox`, or it has ended, or its ancestry
/// cannot be read. The client is pinned by its pidfd (`SO_PEERPIDFD`, `pidfd`) and must
/// still be alive once its ancestry has been walked: its pid
/// is then its own, not a reused one. Its ancestors are walked through `/proc`; one that
/// ends meanwhile leaves its children to the sandbox's subreaper init or namespace init,
/// still above them, so a process of the sandbox cannot step out of the walk. An ancestor
/// that ended between the read of its child's parent and the read of its own could have
/// left its pid to a new process elsewhere: each parent must have started no later than
/// its child (`/proc/PID/stat`'s start time), else the walk stops and the client is
/// refused (it may connect again).
fn refused_peer(pidfd: Option<&OwnedFd>, pid: i32, sandbox: u32) -> Option<&'static str> {
    let sandbox = i32::try_from(sandbox).unwrap_or(0);
    let mut p = pid;
    let Some((mut parent, mut started)) = stat_of(p) else {
        return Some("its ancestry cannot be read");
    };
    // At most this many ancestors (a deeper chain is not a normal client's).
    for _ in 0..4096 {
        if sandbox > 0 && p == sandbox {
            return Some("a process of the session's own sandbox");
        }
        if p <= 1 {
            // The host's init (or above this PID namespace): not the sandbox's.
            return (!alive(pidfd)).then_some("it has ended");
        }
        let Some((grandparent, parent_started)) = stat_of(parent) else {
            return Some("its ancestry cannot be read");
        };
        if parent_started > started {
            return Some("its ancestry changed while it was read");
        }
        (p, parent, started) = (parent, grandparent, parent_started);
    }
    Some("its ancestry is too deep")
}

/// Whether the process of `pidfd` has not ended (a pidfd is readable once it has); true
/// without one (a kernel without `SO_PEERPIDFD`, where the pid alone is checked).
fn alive(pidfd: Option<&OwnedFd>) -> bool {
    pidfd.is_none_or(|fd| {
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        matches!(
            rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())),
            Ok(0)
        )
    })
}

/// A pidfd of `conn`'s peer (`SO_PEERPIDFD`, Linux 6.5); `None` where the kernel has none.
fn peer_pidfd(conn: &OwnedFd) -> Option<OwnedFd> {
    const SO_PEERPIDFD: libc::c_int = 77;
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` and `len` are valid for writes for the call and `len` is `fd`'s size;
    // `conn` is open for its borrow.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&raw mut fd).cast(),
            &mut len,
        )
    };
    if r != 0 || fd < 0 {
        return None;
    }
    // SAFETY: the kernel just made `fd` for this process (close-on-exec); nothing else
    // owns it.
    Some(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// The parent's pid of `pid` and when `pid` started, from one read of `/proc/PID/stat`.
fn stat_of(pid: i32) -> Option<(i32, u64)> {
    let s = crate::proc_stat::ProcStat::of(u32::try_from(pid).ok()?)?;
    Some((s.ppid, s.started))
}

/// Receives the one request of a connection and its three fds; `None` (after a line on
/// the server's stderr, and with every fd received closed) for anything else.
fn receive(conn: &OwnedFd, stop: &AtomicBool) -> Option<(Request, [OwnedFd; wire::FDS])> {
    // A client that connects and sends nothing holds no more than its thread, and not
    // the server's end, and that for `REQUEST_DEADLINE` at most.
    let tick = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: TICK.as_nanos() as i64,
    };
    let deadline = std::time::Instant::now() + REQUEST_DEADLINE;
    loop {
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        if std::time::Instant::now() >= deadline {
            say_client(format_args!(
                "dropped a client that sent no request in {} s",
                REQUEST_DEADLINE.as_secs()
            ));
            return None;
        }
        let mut fds = [rustix::event::PollFd::new(
            conn,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&tick)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {}
            Ok(_) => break,
            Err(_) => return None,
        }
    }
    let mut buf = vec![0u8; wire::MAX_REQUEST + 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2 * wire::FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = loop {
        match rustix::net::recvmsg(
            conn,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(m) => break m,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    };
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(list) = m {
            fds.extend(list);
        }
    }
    if msg.bytes == 0 {
        return None;
    }
    let truncated = msg
        .flags
        .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC);
    let request = buf.get(..msg.bytes).and_then(Request::parse);
    let fds: Option<[OwnedFd; wire::FDS]> = fds.try_into().ok();
    match (request, fds, truncated) {
        (Some(r), Some(fds), false) => Some((r, fds)),
        _ => {
            say_client(format_args!("refused a malformed request"));
            None
        }
    }
}

/// Starts the request's command in the session and waits for it, watching the client's
/// connection meanwhile. Returns the reply.
fn run_request(
    served: &Served,
    request: &Request,
    [stdin, stdout, stderr]: [OwnedFd; wire::FDS],
    conn: &OwnedFd,
    say: &mut dyn FnMut(&dyn std::fmt::Display),
) -> Reply {
    let os = |b: &[u8]| OsString::from_vec(b.to_vec());
    let Some((program, args)) = request.argv.split_first() else {
        return Reply::Code(125);
    };
    let stop = &served.stop;
    // Closed already: the server is ending.
    let Some(mut cmd) = served.command(&os(program)) else {
        return Reply::Code(125);
    };
    cmd.args(args.iter().map(|a| os(a)));
    if let Some(cwd) = &request.cwd {
        cmd.current_dir(os(cwd));
    }
    for (k, v) in &request.env {
        cmd.env(os(k), os(v));
    }
    for (k, v) in &request.secret_env {
        cmd.secret_env(os(k), os(v));
    }
    cmd.keep_background(request.keep_background)
        .stdin(stockade::Stdio::from(stdin))
        .stdout(stockade::Stdio::from(stdout))
        .stderr(stockade::Stdio::from(stderr));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            say(&Report(&e));
            return Reply::Code(spawn_code(&e));
        }
    };
    drop(cmd);
    let mut connected = true;
    let status = loop {
        match child.wait_timeout(TICK) {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => {
                say(&format_args!("wait: {}", Report(&e)));
                let _ = child.kill();
                return Reply::Code(125);
            }
        }
        if stop.load(Ordering::SeqCst) {
            let _ = child.kill();
        }
        if connected {
            match from_client(conn) {
                FromClient::Nothing => {}
                FromClient::Signal(sig) => {
                    let _ = child.signal(sig);
                }
                // Gone, or speaking out of turn: its command ends.
                FromClient::Gone | FromClient::Malformed => {
                    connected = false;
                    let _ = child.kill();
                }
            }
        }
    };
    let termination = child.termination();
    if let Some(t) = termination.filter(stockade::Termination::by_limit) {
        say(&t);
        if matches!(t, stockade::Termination::WallTime(_)) {
            return Reply::Code(124);
        }
    }
    Reply::Status(status.into_raw())
}

/// What a client's connection holds while its command runs.
enum FromClient {
    Nothing,
    Signal(i32),
    Gone,
    Malformed,
}

/// Reads one record from the client without waiting.
fn from_client(conn: &OwnedFd) -> FromClient {
    let mut fds = [rustix::event::PollFd::new(
        conn,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match rustix::event::poll(&mut fds, Some(&zero)) {
        Ok(0) | Err(rustix::io::Errno::INTR) => return FromClient::Nothing,
        Ok(_) => {}
        Err(_) => return FromClient::Gone,
    }
    // One byte more than a record, so that a longer message is seen (and refused); any
    // fd sent along is closed by the kernel (no room for it).
    let mut buf = [0u8; wire::SIGNAL_SIZE + 1];
    match rustix::net::recv(conn, &mut buf, RecvFlags::DONTWAIT) {
        Ok((0, _)) => FromClient::Gone,
        Ok((n, _)) => {
            let forwarded = |s: i32| FORWARDED.iter().any(|f| *f as i32 == s);
            match buf.get(..n).and_then(wire::signal::decode) {
                Some(s) if forwarded(s) => FromClient::Signal(s),
                _ => FromClient::Malformed,
            }
        }
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => FromClient::Nothing,
        Err(_) => FromClient::Gone,
    }
}

/// The exit code of a failed start, as `run` gives it.
fn spawn_code(e: &Error) -> u8 {
    match e {
        Error::Spawn(SpawnError::NotFound { .. }) => 127,
        Error::Spawn(e @ SpawnError::Setup { .. }) if is_exec_failure(e) => 126,
        _ => 125,
    }
}

/// `stockade run --session PATH`: one command in the session served at `socket`.
pub fn run_in(
    socket: &Path,
    cwd: Option<PathBuf>,
    (env, secret_env): (crate::Vars, crate::Vars),
    (keep_background, raw_terminal): (bool, bool),
    program: &[OsString],
) -> ExitCode {
    // Before any thread starts: the forwarded signals wait for the forwarding thread.
    let mut forwarded = SigSet::empty();
    for s in FORWARDED {
        forwarded.add(s);
    }
    if let Err(e) = forwarded.thread_block() {
        return fail(125, format_args!("block signals: {}", Report(&e)));
    }
    let bytes = |s: &OsStr| s.as_bytes().to_vec();
    let var = |(k, v): &(String, OsString)| (k.as_bytes().to_vec(), bytes(v));
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let stdio = match Streams::new(&done, raw_terminal) {
        Ok(s) => s,
        Err(e) => return fail(125, format_args!("--session: stdio: {}", Report(&e))),
    };
    let request = Request {
        keep_background,
        cwd: cwd.map(|c| bytes(c.as_os_str())),
        argv: program.iter().map(|a| bytes(a)).collect(),
        env: env.iter().map(var).collect(),
        secret_env: secret_env.iter().map(var).collect(),
    };
    let Some(request) = request.encode() else {
        return fail(
            125,
            format_args!(
                "--session: the command does not fit one request (at most {} strings, {} \
                 bytes, no NUL, no empty program)",
                wire::MAX_STRINGS,
                wire::MAX_REQUEST
            ),
        );
    };
    let conn = match connect(socket) {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => return fail(125, format_args!("--session {e}")),
    };
    let fds: Vec<BorrowedFd<'_>> = stdio.fds.iter().map(|f| f.as_fd()).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(wire::FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    if let Err(e) = rustix::net::sendmsg(
        conn.as_fd(),
        &[IoSlice::new(&request)],
        &mut control,
        SendFlags::NOSIGNAL,
    ) {
        return fail(
            125,
            format_args!(
                "--session: send the command: {}",
                Report(&std::io::Error::from(e))
            ),
        );
    }
    {
        let conn = std::sync::Arc::clone(&conn);
        std::thread::spawn(move || {
            while let Ok(sig) = forwarded.wait() {
                let record = wire::signal::encode(sig as i32);
                if rustix::net::send(conn.as_fd(), &record, SendFlags::NOSIGNAL).is_err() {
                    return;
                }
            }
        });
    }
    let mut buf = [0u8; wire::REPLY_SIZE + 1];
    let n = loop {
        match rustix::net::recv(conn.as_fd(), &mut buf, RecvFlags::empty()) {
            Ok((n, _)) => break n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                return fail(
                    125,
                    format_args!("--session: the reply: {}", Report(&std::io::Error::from(e))),
                );
            }
        }
    };
    // What the command wrote to a file of the caller's is in the pipes by now; what a
    // kept background process writes later is not copied.
    drop(fds);
    stdio.finish(&done);
    match buf.get(..n).and_then(Reply::decode) {
        Some(Reply::Status(raw)) => exit_code(std::process::ExitStatus::from_raw(raw)),
        Some(Reply::Code(c)) => ExitCode::from(c),
        None if n == 0 => fail(
            125,
            format_args!(
                "--session {}: the session ended before the command did (or refused it)",
                socket.display()
            ),
        ),
        None => fail(125, "--session: a malformed reply from the session"),
    }
}

/// Connects to the session's socket after checking it is this user's (its directory, its
/// owner, and the server's uid).
fn connect(socket: &Path) -> Result<OwnedFd, String> {
    let place = Place::open(socket)?;
    let shown = socket.display();
    let euid = rustix::process::geteuid().as_raw();
    let io = |e: rustix::io::Errno| Report(&std::io::Error::from(e)).to_string();
    let (_, _, st) = place
        .identity(&place.name)
        .map_err(|e| format!("{shown}: {}", io(e)))?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Socket => {}
        FileType::Symlink => return Err(format!("{shown}: is a symbolic link, not a socket")),
        _ => return Err(format!("{shown}: not a socket")),
    }
    if st.st_uid != euid {
        return Err(format!(
            "{shown}: owned by uid {}, not by this user (uid {euid}): not your session",
            st.st_uid
        ));
    }
    let conn = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("{shown}: socket: {}", io(e)))?;
    let addr = place.address(&place.name)?;
    rustix::net::connect(&conn, &addr).map_err(|e| format!("{shown}: connect: {}", io(e)))?;
    let peer = rustix::net::sockopt::socket_peercred(&conn)
        .map_err(|e| format!("{shown}: the server's credentials: {}", io(e)))?;
    if peer.uid.as_raw() != euid {
        return Err(format!(
            "{shown}: served by uid {}, not by this user (uid {euid}): not your session",
            peer.uid.as_raw()
        ));
    }
    if let Some(why) = confined_server(&conn, peer.pid.as_raw_nonzero().get()) {
        return Err(format!("{shown}: {why}: not your session's server"));
    }
    Ok(conn)
}

/// Why the server at the other end of `conn` (pid `pid` at its `listen`) is not taken
/// for a session's: it runs under more seccomp filters than this client. Every sandboxed
/// program of stockade's (either layer) runs under one more filter than the host that
/// started it, and runs as this user: one that could write where the caller put the
/// socket (another session's workspace, say) could serve its own socket there and take
/// the requests, secrets and stdio included. A real server is the caller's own
/// `stockade session`, under no more filters than a client started beside it. (The
/// server checks its clients the same way: `confined_client`.)
fn confined_server(conn: &OwnedFd, pid: i32) -> Option<String> {
    let pidfd = peer_pidfd(conn);
    match peer_filters(pidfd.as_ref(), pid) {
        Filters::NotMore => None,
        Filters::Ended => Some("the server ended while it was checked".to_string()),
        Filters::Unreadable => Some(format!("the server (pid {pid}) cannot be checked")),
        Filters::More { theirs, own } => Some(format!(
            "served by a process under {theirs} seccomp filters, more than this one's {own} \
             (a sandboxed program)"
        )),
    }
}

/// How the seccomp filters of a peer compare with this process's own.
enum Filters {
    /// No more than this process's; or this process has no count to compare with (no
    /// `/proc`, Linux < 5.9), when nothing is checked.
    NotMore,
    /// More than this process's.
    More { theirs: u64, own: u64 },
    /// The peer's count cannot be read.
    Unreadable,
    /// The peer has ended: its pid may be another process's by now.
    Ended,
}

/// The seccomp filters of the peer whose pid (at its `connect` or `listen`) is `pid`,
/// pinned by `pidfd`, against this process's. The count is `/proc/PID/status`'s
/// `Seccomp_filters` (Linux 5.9), read by pid and taken only if the pidfd shows the peer
/// alive after the read: the pid was then its own, not a reused one, when it was read.
/// Without a pidfd (Linux < 6.5) the pid alone is read.
fn peer_filters(pidfd: Option<&OwnedFd>, pid: i32) -> Filters {
    let filters = |pid: &str| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status_filters(&status)
    };
    // No count of its own (no `/proc`, an older kernel): nothing to compare with.
    let Some(own) = filters("self") else {
        return Filters::NotMore;
    };
    let theirs = filters(&pid.to_string());
    match theirs {
        _ if !alive(pidfd) => Filters::Ended,
        None => Filters::Unreadable,
        Some(theirs) if theirs > own => Filters::More { theirs, own },
        Some(_) => Filters::NotMore,
    }
}

/// The `Seccomp_filters` count of a `/proc/PID/status` text.
fn status_filters(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp_filters:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The command's stdio, from the caller's own: a pipe or a socket itself; for anything
/// else (a terminal, a regular file, a device, `/dev/null`, a named FIFO, or a closed fd)
/// a pipe that this process copies to or from the caller's, as `run` does (`relay`), so
/// that the program cannot truncate, `chmod` or otherwise change it through the fd. A
/// session's command has no pseudo-terminal: output bound for the caller's terminal is
/// copied through the terminal filter (the escape sequences that write its clipboard or
/// make it answer are dropped, as `run`'s pseudo-terminal relay does), and input from it
/// copied, so that the program cannot reconfigure the caller's terminal or type into it.
/// With `--no-pty` (`raw_terminal`) the terminal itself is handed over, as `run
/// --no-pty` does.
struct Streams {
    /// What is sent for fds 0, 1 and 2.
    fds: Vec<OwnedFd>,
    /// The threads that copy the command's output to the caller's files.
    outputs: Vec<std::thread::JoinHandle<()>>,
}

impl Streams {
    fn new(done: &std::sync::Arc<AtomicBool>, raw_terminal: bool) -> std::io::Result<Streams> {
        use crate::relay::Kind;
        let mut s = Streams {
            fds: Vec::new(),
            outputs: Vec::new(),
        };
        for (i, fd) in crate::relay::caller_fds().into_iter().enumerate() {
            let kind = crate::relay::kind(fd);
            let terminal = kind == Kind::Terminal;
            if kind == Kind::Channel || (terminal && raw_terminal) {
                s.fds.push(rustix::io::fcntl_dupfd_cloexec(fd, 3)?);
                continue;
            }
            // A closed fd reads as empty and writes to nowhere.
            let caller: Option<std::fs::File> = match kind {
                Kind::Closed => None,
                _ => Some(rustix::io::fcntl_dupfd_cloexec(fd, 3)?.into()),
            };
            let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
            if i == 0 {
                s.fds.push(r);
                if let Some(caller) = caller {
                    std::thread::spawn(move || copy_input(caller, w, terminal));
                }
            } else {
                s.fds.push(w);
                let done = std::sync::Arc::clone(done);
                let to: Box<dyn Write + Send> = match caller {
                    Some(f) if terminal => crate::relay::filtered_terminal(f),
                    Some(f) => Box::new(f),
                    None => Box::new(std::io::sink()),
                };
                s.outputs
                    .push(std::thread::spawn(move || copy_output(r, to, &done)));
            }
        }
        Ok(s)
    }

    /// Once the command has ended: copies what is left in the output pipes.
    fn finish(self, done: &AtomicBool) {
        drop(self.fds);
        done.store(true, Ordering::SeqCst);
        for t in self.outputs {
            let _ = t.join();
        }
    }
}

/// Copies the caller's stdin into the command's pipe until either ends. From a terminal,
/// only while this process is in its foreground process group (or it is not this
/// process's controlling terminal): a read from the background would stop the client
/// (`SIGTTIN`), and with it the copying of the command's output (`stockade run --session
/// S -- make >log &`).
fn copy_input(mut from: std::fs::File, to: OwnedFd, terminal: bool) {
    let mut to = std::fs::File::from(to);
    if !terminal {
        let _ = std::io::copy(&mut from, &mut to);
        return;
    }
    let foreground = |f: &std::fs::File| {
        rustix::termios::tcgetpgrp(f).map_or(true, |p| p == rustix::process::getpgrp())
    };
    let tick = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: TICK.as_nanos() as i64,
    };
    let mut buf = [0u8; 4096];
    loop {
        if !foreground(&from) {
            std::thread::sleep(TICK);
            continue;
        }
        // Waited for with `poll`, which a background process may do: only the read
        // would stop it.
        let mut fds = [rustix::event::PollFd::new(
            &from,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&tick)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(_) => return,
        }
        if !foreground(&from) {
            continue;
        }
        match std::io::Read::read(&mut from, &mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(buf.get(..n).unwrap_or(&[])).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Copies the command's output pipe to the caller's file: until its end, or, once `done`
/// (the command has ended), what the pipe holds at that moment and no more. A background
/// process the command left running (`--keep-background`) may hold the pipe and go on
/// writing: what it writes after its command's end is not copied, and the client does
/// not wait for it.
fn copy_output(from: OwnedFd, mut to: Box<dyn Write + Send>, done: &AtomicBool) {
    let mut buf = vec![0u8; 64 * 1024];
    // Once the command has ended: the bytes still to copy.
    let mut left: Option<usize> = None;
    loop {
        if left.is_none() && done.load(Ordering::SeqCst) {
            // FIONREAD: what the pipe holds now (0 when it cannot tell: nothing more).
            let held = rustix::io::ioctl_fionread(&from).unwrap_or(0);
            left = Some(usize::try_from(held).unwrap_or(usize::MAX));
        }
        if left == Some(0) {
            return;
        }
        let wait = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: if left.is_some() {
                0
            } else {
                TICK.as_nanos() as i64
            },
        };
        let mut fds = [rustix::event::PollFd::new(
            &from,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&wait)) {
            Ok(0) if left.is_some() => return,
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(_) => return,
        }
        let room = left.map_or(buf.len(), |l| l.min(buf.len()));
        match rustix::io::read(&from, buf.get_mut(..room).unwrap_or(&mut [])) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(buf.get(..n).unwrap_or(&[])).is_err() {
                    return;
                }
                if let Some(l) = left.as_mut() {
                    *l = l.saturating_sub(n);
                }
            }
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's stderr is written only when it is a socket, a pipe's write end or a
    /// pseudo-terminal's slave: never a device whose open gives this server something of
    /// its own (`/dev/tty`: its controlling terminal; `/dev/ptmx`: a new terminal), nor a
    /// read end.
    #[test]
    fn only_a_socket_a_pipe_or_a_pty_slave_is_written() {
        use rustix::pty::OpenptFlags;
        let open = |path: &str| {
            rustix::fs::open(
                path,
                OFlags::WRONLY | OFlags::NOCTTY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap()
        };
        let ptmx = open("/dev/ptmx");
        assert!(Outlet::of(&ptmx).is_none(), "/dev/ptmx");
        assert!(Outlet::of(&open("/dev/null")).is_none(), "/dev/null");
        if let Ok(tty) = rustix::fs::open(
            "/dev/tty",
            OFlags::WRONLY | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            assert!(Outlet::of(&tty).is_none(), "/dev/tty");
        }
        let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        rustix::pty::grantpt(&master).unwrap();
        rustix::pty::unlockpt(&master).unwrap();
        let name = rustix::pty::ptsname(&master, Vec::new()).unwrap();
        let slave = rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        assert!(
            matches!(Outlet::of(&slave), Some(Outlet::Reopened(_))),
            "a pty slave"
        );
        let (r, w) = nix::unistd::pipe().unwrap();
        assert!(
            matches!(Outlet::of(&w), Some(Outlet::Reopened(_))),
            "a pipe"
        );
        assert!(Outlet::of(&r).is_none(), "a read end");
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(matches!(
            Outlet::of(&OwnedFd::from(a)),
            Some(Outlet::Socket(_))
        ));
    }

    #[test]
    fn seccomp_filters_are_read_from_the_status_text() {
        let status = "Name:\tx\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t3\nSpeculation_Store_Bypass:\tx\n";
        assert_eq!(status_filters(status), Some(3));
        assert_eq!(status_filters("Seccomp:\t0\n"), None);
        assert_eq!(status_filters("Seccomp_filters:\tmany\n"), None);
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(status_filters(&own).is_some(), "{own}");
    }
}
