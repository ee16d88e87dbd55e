//! Child side of the program's terminal inside: a host terminal bound onto `/dev/console`
//! (see [`crate::backend::linux::prepare::Console`] on why), or a pseudo-terminal of the
//! sandbox's own devpts ([`InsidePty`], `Command::pty`). Part of the `/dev` step, before
//! `pivot_root`, while the host's devpts is still reachable under `/oldroot`.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::{CStr, c_uint};

use stockade_sys::linux as sys;
use stockade_sys::linux::CWD;
use stockade_sys::{BorrowedFd, Errno};

use super::R;
use super::mounts::{create_file, open_no_symlinks};
use crate::backend::linux::prepare::{Console, InsidePty};

const CONSOLE: &CStr = c"/newroot/dev/console";
/// The multiplexer of the devpts that `mounts::dev` has just mounted.
const PTMX: &CStr = c"/newroot/dev/pts/ptmx";

/// Opens a pseudo-terminal from the sandbox's devpts: its slave replaces the stdio slots
/// `pty.slots` (put in place by `stdio` before the layout ran), its master goes to the
/// parent. Its name inside is the kernel's own, `/dev/pts/0`: `tty`, `ttyname()` (glibc and
/// musl alike) and `/dev/tty` work as on any pseudo-terminal.
pub(super) fn open_pty(pty: &InsidePty) -> R {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    let master = sys::openat(CWD, PTMX, flags, 0)?;
    let r = pty_to_stdio(master.as_fd(), pty);
    let _ = sys::close(master);
    r
}

fn pty_to_stdio(master: BorrowedFd<'_>, pty: &InsidePty) -> R {
    // SAFETY: `master` was opened from devpts' `ptmx` just now: a pseudo-terminal master.
    unsafe { sys::ioctl_tiocsptlck_unlock(master) }?;
    // Before the program can run: its first `stty size` sees the size asked for.
    // SAFETY: as above, `master` is a pseudo-terminal master, so a terminal.
    unsafe { sys::ioctl_tiocswinsz(master, &pty.size) }?;
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: as above.
    let slave = unsafe { sys::ioctl_tiocgptpeer(master, flags) }?;
    let mut r = match &pty.modes {
        // SAFETY: `slave` is the slave of a pseudo-terminal, a terminal.
        Some(modes) => unsafe { sys::ioctl_tcsets2(slave.as_fd(), modes) },
        None => Ok(()),
    };
    for (target, _) in (0..).zip(pty.slots).filter(|(_, on)| *on) {
        if r.is_err() {
            break;
        }
        // SAFETY: 0, 1 and 2 of this child are its own copies (no CLONE_FILES), which
        // `stdio` set up for the program and which are to be replaced by the slave here;
        // nothing in this child uses their old files again.
        r = unsafe { sys::dup3(slave.as_fd(), target, 0) }.map(drop);
    }
    let _ = sys::close(slave);
    r?;
    // SAFETY: the parent keeps its copy of the socket's child end open in `exec` until
    // this child has exec'd or exited, and `close_fds` keeps it.
    let socket = unsafe { BorrowedFd::borrow_raw(pty.socket) };
    sys::send_fd(socket, 0, master)
}

/// Binds the program's terminal onto `/dev/console`. A terminal whose host path no longer
/// leads to it (closed and its number reused since the parent looked) stays nameless: the
/// run goes on as before this existed.
pub(super) fn bind(console: Option<&Console>) -> R {
    let Some(c) = console else {
        return Ok(());
    };
    let fd = match open_no_symlinks(&c.path, libc::O_PATH) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EACCES)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let r = bind_fd(fd.as_fd(), c.identity);
    let _ = sys::close(fd);
    r
}

fn bind_fd(fd: BorrowedFd<'_>, identity: (u64, u64, u64)) -> R {
    // SAFETY: `libc::stat` is plain old data; all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    sys::fstat(fd, &mut st)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFCHR || (st.st_dev, st.st_ino, st.st_rdev) != identity
    {
        return Ok(());
    }
    create_file(CONSOLE)?;
    let flags = libc::OPEN_TREE_CLONE
        | libc::O_CLOEXEC as c_uint
        | libc::AT_RECURSIVE as c_uint
        | libc::AT_EMPTY_PATH as c_uint;
    let tree = sys::open_tree(fd, c"", flags)?;
    // Not `nodev` (unlike every other bind): the node is a terminal to open, like the
    // host's device nodes in `/dev`. Read-only: its mode and times cannot be changed
    // through this path.
    let attr = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NOEXEC;
    let empty = (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as c_uint;
    let mut r = sys::mount_setattr(tree.as_fd(), c"", empty, attr, 0, 0);
    if r.is_ok() {
        r = sys::move_mount(
            tree.as_fd(),
            c"",
            CWD,
            CONSOLE,
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        );
    }
    let _ = sys::close(tree);
    r
}
