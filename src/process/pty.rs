//! [`Pty`]: the host's side of a pseudo-terminal that [`Command::pty`](crate::Command::pty)
//! gives the program, and how the host opens one where the sandbox has no devpts of its own.
//!
//! # Where the pseudo-terminal comes from
//!
//! - **Full layer** (Linux, a `/dev` and devpts of the sandbox's own): the setup child
//!   opens it from the sandbox's devpts, after mounting it and before `pivot_root`, and
//!   sends the master to the host (`backend::linux::prepare::InsidePty`). Inside, the
//!   program's terminal is `/dev/pts/0` by the kernel's own name: `tty`,
//!   `readlink /proc/self/fd/0`, `ttyname()` (glibc and musl, which trusts only the
//!   kernel's name) and `/dev/tty` agree, as on any terminal. Nothing of the host's devpts
//!   is bound inside.
//! - **Landlock layer, passthrough, macOS**: the host opens it on its own `/dev/ptmx`; the
//!   program sees the host's name, `/dev/pts/N`, which is the host's `/dev` it sees anyway
//!   (layer 2 grants the program that one terminal, none of the caller's others).
//!
//! Either way the master stays with the host (close-on-exec), and the program's stdio
//! streams that the caller did not set explicitly are the slave.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// The host's side of the program's pseudo-terminal ([`Command::pty`](crate::Command::pty)):
/// its master. What is written to it is the program's input, as if typed (the terminal's
/// modes apply: echo, `^C`); what is read from it is the program's output to the terminal.
///
/// Read and write it from two threads at once through `&Pty` (both [`Read`] and [`Write`]
/// are implemented for it) or a [`Pty::try_clone`]. A read returns `Ok(0)` once every
/// process of the sandbox has closed the terminal (the kernel says `EIO` then). Dropping
/// the last copy hangs the terminal up: the program's session gets `SIGHUP`.
#[derive(Debug)]
pub struct Pty {
    master: File,
}

impl Pty {
    pub(super) fn new(master: OwnedFd) -> Pty {
        Pty {
            master: File::from(master),
        }
    }

    /// Sets the terminal's window size (`TIOCSWINSZ` on the master): the kernel sends
    /// `SIGWINCH` to the program's foreground process group when the size changed.
    ///
    /// # Errors
    ///
    /// The error of the `ioctl`.
    pub fn resize(&self, rows: u16, cols: u16) -> io::Result<()> {
        set_size(self.master.as_fd(), winsize(rows, cols))
    }

    /// The terminal's window size, `(rows, cols)` (`TIOCGWINSZ` on the master).
    ///
    /// # Errors
    ///
    /// The error of the `ioctl`.
    pub fn size(&self) -> io::Result<(u16, u16)> {
        size_of(self.master.as_fd())
    }

    /// Another handle to the same master (`dup`, close-on-exec).
    ///
    /// # Errors
    ///
    /// The error of `fcntl(F_DUPFD_CLOEXEC)`.
    pub fn try_clone(&self) -> io::Result<Pty> {
        Ok(Pty {
            master: self.master.try_clone()?,
        })
    }
}

/// A read of the master: `EIO` (the slave is closed everywhere) is the end of the stream.
fn read_master(mut master: &File, buf: &mut [u8]) -> io::Result<usize> {
    match master.read(buf) {
        Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(0),
        other => other,
    }
}

impl Read for Pty {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_master(&self.master, buf)
    }
}

impl Read for &Pty {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_master(&self.master, buf)
    }
}

impl Write for Pty {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.master.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &Pty {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&self.master).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsFd for Pty {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.master.as_fd()
    }
}

impl AsRawFd for Pty {
    fn as_raw_fd(&self) -> RawFd {
        self.master.as_raw_fd()
    }
}

impl From<Pty> for OwnedFd {
    fn from(p: Pty) -> OwnedFd {
        p.master.into()
    }
}

/// A `winsize` of `rows` and `cols` (no pixel sizes).
pub(super) fn winsize(rows: u16, cols: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// The window size of the terminal `fd`, `(rows, cols)`.
pub(super) fn size_of(fd: BorrowedFd<'_>) -> io::Result<(u16, u16)> {
    if !std::io::IsTerminal::is_terminal(&fd) {
        return Err(io::Error::from_raw_os_error(libc::ENOTTY));
    }
    let mut ws = winsize(0, 0);
    // SAFETY: `fd` is a terminal (checked above, and borrowed for the call), whose driver
    // writes one `winsize` through the pointer; `ws` is a local that outlives the call.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TIOCGWINSZ,
            std::ptr::from_mut(&mut ws),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((ws.ws_row, ws.ws_col))
}

fn set_size(fd: BorrowedFd<'_>, ws: libc::winsize) -> io::Result<()> {
    // SAFETY: `fd` is a terminal (a master this module opened or received), whose driver
    // reads one `winsize` through the pointer; `ws` is a local that outlives the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, std::ptr::from_ref(&ws)) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A terminal's modes, in the form the kernel takes them: `termios2` on Linux (the setup
/// child sets them with one `ioctl`, no C library), `termios` elsewhere.
#[cfg(target_os = "linux")]
pub(crate) type Modes = libc::termios2;
/// A terminal's modes, in the form the kernel takes them: `termios2` on Linux (the setup
/// child sets them with one `ioctl`, no C library), `termios` elsewhere.
#[cfg(not(target_os = "linux"))]
pub(crate) type Modes = libc::termios;

/// The modes of the terminal `fd` (`TCGETS2`).
#[cfg(target_os = "linux")]
pub(super) fn modes_of(fd: BorrowedFd<'_>) -> io::Result<Modes> {
    // SAFETY: `termios2` is integers and arrays of them: all-zero bytes are a valid value.
    let mut modes: Modes = unsafe { std::mem::zeroed() };
    if !std::io::IsTerminal::is_terminal(&fd) {
        return Err(io::Error::from_raw_os_error(libc::ENOTTY));
    }
    // SAFETY: `fd` is a terminal (checked above, and borrowed for the call), whose driver
    // writes one `termios2` through the pointer, to `modes`, a local that outlives it.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TCGETS2,
            std::ptr::from_mut(&mut modes),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(modes)
}

/// The modes of the terminal `fd` (`tcgetattr`).
#[cfg(not(target_os = "linux"))]
pub(super) fn modes_of(fd: BorrowedFd<'_>) -> io::Result<Modes> {
    // SAFETY: `termios` is integers and arrays of them: all-zero bytes are a valid value.
    let mut modes: Modes = unsafe { std::mem::zeroed() };
    // SAFETY: `modes` is a valid out-pointer for one `termios`.
    if unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut modes) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(modes)
}

/// Sets the modes of the terminal `fd` (a slave this module opened).
#[cfg(target_os = "linux")]
fn set_modes(fd: BorrowedFd<'_>, modes: &Modes) -> io::Result<()> {
    // SAFETY: `fd` is a pseudo-terminal's slave, whose driver reads one `termios2` through
    // the pointer; `modes` is borrowed for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TCSETS2, std::ptr::from_ref(modes)) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the modes of the terminal `fd` (a slave this module opened).
#[cfg(not(target_os = "linux"))]
fn set_modes(fd: BorrowedFd<'_>, modes: &Modes) -> io::Result<()> {
    // SAFETY: `modes` is a valid `termios`, borrowed for the call.
    if unsafe { libc::tcsetattr(fd.as_raw_fd(), libc::TCSANOW, modes) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A new pseudo-terminal of the host's `/dev/ptmx`, of `size`: (master, slave), both
/// close-on-exec and numbered 3 or above (a slave becomes a stdio source). The slave is
/// opened with `O_NOCTTY`: it becomes the program's controlling terminal, never the
/// host's.
///
/// # Errors
///
/// The errno of the step that failed; the caller names it.
pub(super) fn open_host(
    size: libc::winsize,
    modes: Option<&Modes>,
) -> io::Result<(OwnedFd, OwnedFd)> {
    use std::os::unix::fs::OpenOptionsExt;
    // std opens with `O_CLOEXEC`: no fork of another thread inherits the master.
    let master: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/ptmx")?
        .into();
    let master = super::stdio::above_stdio(master)?;
    // SAFETY: `master` is open; `grantpt` only changes its slave's owner and mode (a no-op
    // on Linux's devpts).
    if unsafe { libc::grantpt(master.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `master` is open; `unlockpt` takes no pointer.
    if unsafe { libc::unlockpt(master.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    set_size(master.as_fd(), size)?;
    let slave = super::stdio::above_stdio(open_slave(master.as_fd())?)?;
    if let Some(m) = modes {
        set_modes(slave.as_fd(), m)?;
    }
    Ok((master, slave))
}

/// The slave of `master` (`TIOCGPTPEER`: by the master itself, no path to race on).
#[cfg(target_os = "linux")]
fn open_slave(master: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: `master` was opened from `/dev/ptmx` by `open_host`: a pseudo-terminal
    // master, whose driver reads `flags` as an integer (no pointer).
    let slave = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) };
    if slave < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `TIOCGPTPEER` succeeded: `slave` is a new fd of this process that nothing
    // else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(slave) })
}

/// The slave of `master`, by the name `TIOCPTYGNAME` gives (macOS).
#[cfg(not(target_os = "linux"))]
fn open_slave(master: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: `TIOCPTYGNAME` writes at most 128 bytes, a NUL-terminated path, into the
    // buffer, which is 128 bytes and outlives the call; `master` is a pseudo-terminal master.
    let r = unsafe {
        libc::ioctl(
            master.as_raw_fd(),
            libc::c_ulong::from(libc::TIOCPTYGNAME),
            name.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel wrote a NUL-terminated string into `name`.
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
    Ok(std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)?
        .into())
}
