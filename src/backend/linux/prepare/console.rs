//! Parent side of the program's terminal inside (full layer): a host terminal bound onto
//! `/dev/console`, or a pseudo-terminal of the sandbox's own devpts ([`InsidePty`]).
//!
//! # Why the terminal is bound there
//!
//! The full layer gives the sandbox a devpts of its own, so a terminal the program gets
//! from the host (a library caller's `Stdio::from` a pty, or `--no-pty` in a terminal) has
//! no name inside: `/proc/self/fd/0` says `/dev/pts/N` of the host's devpts, which is not
//! mounted there, and `ttyname()` (`tty`, `ssh`, `gpg`'s `GPG_TTY`, editors that reopen
//! their terminal) fails. The child binds that terminal's node onto `/dev/console` in the
//! sandbox's `/dev`, as container runtimes give a container its console: glibc's
//! `ttyname()`, finding no match at the name the kernel gives, looks through `/dev/pts`
//! and `/dev` for a node with the fd's device and inode, and finds the bind.
//!
//! A pseudo-terminal stockade opens itself (`Command::pty`, `Command::pty_like`, and so
//! `stockade run`'s) needs no bind: the child opens it from the sandbox's own devpts
//! ([`InsidePty`]), where it has the kernel's own name, `/dev/pts/0`, which also satisfies
//! C libraries that only trust that name (musl). The bind here is for a terminal the host
//! opened and passes as stdio: that one cannot come from the sandbox's devpts without a
//! relay of its own, and its modes, size and foreground group would no longer be the
//! caller's. The bind is the same terminal, with no copy.
//!
//! The node is found by its host path under the child's copy of the host's mounts
//! (`open_tree` clones only mounts of the caller's own mount namespace, so the fd the
//! parent holds cannot be cloned directly), and bound only if it is the very node of the
//! program's fd: same device, inode and device number. Nothing else of the host's devpts
//! becomes visible: the caller's other terminals stay out of reach.

use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::{OLD_ROOT, cstr, under};

/// The program's terminal, to be bound onto `/dev/console` inside.
#[derive(Debug)]
pub struct Console {
    /// `/oldroot/<path>`: the host path the kernel gives the terminal's fd.
    pub path: CString,
    /// `(st_dev, st_ino, st_rdev)` of the terminal: a node found at `path` with another
    /// identity is not bound.
    pub identity: (u64, u64, u64),
}

impl Console {
    /// The terminal open as `fd` (the program's stdio: the caller checked that it is a
    /// terminal), when the host path the kernel gives it leads back to it; else `None`.
    pub fn of(fd: RawFd) -> Option<Console> {
        let md = std::fs::metadata(format!("/proc/self/fd/{fd}")).ok()?;
        let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
        let identity = (md.dev(), md.ino(), md.rdev());
        let named = std::fs::symlink_metadata(&path).ok();
        let same = named.is_some_and(|n| {
            n.file_type().is_char_device() && (n.dev(), n.ino(), n.rdev()) == identity
        });
        if !md.file_type().is_char_device() || !path.is_absolute() || !same {
            tracing::debug!(fd, path = %path.display(), "stockade: the program's terminal has no host path that leads back to it; it stays nameless inside");
            return None;
        }
        Some(Console {
            path: cstr(&under(OLD_ROOT, Path::new(&path))).ok()?,
            identity,
        })
    }
}

/// A pseudo-terminal the child opens from the sandbox's own devpts (`Command::pty` on the
/// full layer), so that inside it is `/dev/pts/0` by the kernel's own name, not a bind of a
/// host terminal. The child unlocks it, sets its size, puts its slave on the stdio slots
/// named here and sends the master to the parent through `socket` (tag 0), all before
/// `pivot_root`. No host terminal is bound onto `/dev/console` then.
#[derive(Debug)]
pub struct InsidePty {
    /// The child's end of a close-on-exec datagram socket pair; the parent holds the
    /// other and receives the master from it once the child has exec'd.
    pub socket: RawFd,
    /// Which of the program's fds 0, 1 and 2 become the slave.
    pub slots: [bool; 3],
    /// The window size, set on the master before the program starts.
    pub size: libc::winsize,
    /// The terminal's modes, when the caller gave some (`Command::pty_like`); else the
    /// kernel's defaults for a new pseudo-terminal.
    pub modes: Option<libc::termios2>,
}
