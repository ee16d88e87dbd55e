//! Child side of `workspace_mode = "overlay"` (see `Step::Overlay`): the workspace shown
//! through an overlay whose lower layer is the real workspace and whose upper and work
//! directories are the change set's, all three opened without following symlinks and
//! named to the overlay by their fds' magic links (a symlink planted in the workspace or
//! the change set cannot redirect a layer). Once attached, the mount's fd goes to the
//! parent, which holds the overlay's last reference: its superblock, and overlayfs's sync
//! of the change set's file system with it, go when the host closes that fd, off the
//! path of the host's wait (`process/changeset.rs`), not in the init's exit.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::{CStr, c_int, c_uint};
use std::ffi::CString;

use stockade_sys::linux as sys;
use stockade_sys::linux::CWD;
use stockade_sys::{BorrowedFd, OwnedFd};

use super::R;
use super::git_layer::{FD_PATH_LEN, fd_path};
use super::mounts::{make_dirs, open_no_symlinks};

/// Mounts the overlay on `dst` (made first, with its ancestors, on the new root) and
/// sends its mount fd on `socket` (tag 0) when that is not -1.
pub(super) fn mount(
    lower: &CStr,
    upper: &CStr,
    work: &CStr,
    dst: &CStr,
    mkdirs: &[CString],
    socket: c_int,
) -> R {
    let flags = libc::O_PATH | libc::O_DIRECTORY;
    let lower = open_no_symlinks(lower, flags)?;
    let r = with_lower(lower.as_fd(), (upper, work), dst, mkdirs, socket);
    let _ = sys::close(lower);
    r
}

fn with_lower(
    lower: BorrowedFd<'_>,
    (upper, work): (&CStr, &CStr),
    dst: &CStr,
    mkdirs: &[CString],
    socket: c_int,
) -> R {
    let flags = libc::O_PATH | libc::O_DIRECTORY;
    let upper = open_no_symlinks(upper, flags)?;
    let r = match open_no_symlinks(work, flags) {
        Ok(work) => {
            let r = layers(lower, (upper.as_fd(), work.as_fd()), dst, mkdirs, socket);
            let _ = sys::close(work);
            r
        }
        Err(e) => Err(e),
    };
    let _ = sys::close(upper);
    r
}

fn layers(
    lower: BorrowedFd<'_>,
    (upper, work): (BorrowedFd<'_>, BorrowedFd<'_>),
    dst: &CStr,
    mkdirs: &[CString],
    socket: c_int,
) -> R {
    let mut lower_buf = [0u8; FD_PATH_LEN];
    let mut upper_buf = [0u8; FD_PATH_LEN];
    let mut work_buf = [0u8; FD_PATH_LEN];
    let lowerdir = fd_path(&mut lower_buf, lower.as_raw_fd())?;
    let upperdir = fd_path(&mut upper_buf, upper.as_raw_fd())?;
    let workdir = fd_path(&mut work_buf, work.as_raw_fd())?;
    make_dirs(mkdirs)?;
    let fs = sys::fsopen(c"overlay", libc::FSOPEN_CLOEXEC)?;
    let r = configure(fs.as_fd(), lowerdir, upperdir, workdir);
    let mnt = match r {
        Ok(()) => {
            let attrs = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
            sys::fsmount(fs.as_fd(), libc::FSMOUNT_CLOEXEC, attrs as c_uint)
        }
        Err(e) => Err(e),
    };
    let _ = sys::close(fs);
    attach(mnt?, dst, socket)
}

/// `userxattr`: whiteouts and opaque markers in `user.overlay.*`, which a user namespace
/// may write; `index` and `metacopy` off so that the upper layer holds whole files, the
/// change set's format.
fn configure(fs: BorrowedFd<'_>, lowerdir: &CStr, upperdir: &CStr, workdir: &CStr) -> R {
    sys::fsconfig_set_string(fs, c"lowerdir", lowerdir)?;
    sys::fsconfig_set_string(fs, c"upperdir", upperdir)?;
    sys::fsconfig_set_string(fs, c"workdir", workdir)?;
    sys::fsconfig_set_flag(fs, c"userxattr")?;
    sys::fsconfig_set_string(fs, c"index", c"off")?;
    sys::fsconfig_set_string(fs, c"metacopy", c"off")?;
    sys::fsconfig_create(fs)
}

/// Attaches `mnt` on `dst`, then sends it on `socket`. This child's copy is closed here,
/// before anything of the program runs (it is close-on-exec besides), so that only the
/// host holds the mount afterwards. A send that fails leaves the overlay to the sandbox
/// alone (its sync then runs in the init's exit), which keeps every guarantee: the run
/// goes on.
fn attach(mnt: OwnedFd, dst: &CStr, socket: c_int) -> R {
    let r = sys::move_mount(mnt.as_fd(), c"", CWD, dst, libc::MOVE_MOUNT_F_EMPTY_PATH);
    if r.is_ok() && socket >= 0 {
        // SAFETY: the parent keeps its copy of the socket's child end open in the
        // changeset's run until this child has exec'd or exited, and `close_fds` keeps it
        // (it is in `exec.keep`).
        let socket = unsafe { BorrowedFd::borrow_raw(socket) };
        let _ = sys::send_fd(socket, 0, mnt.as_fd());
    }
    let _ = sys::close(mnt);
    r
}
