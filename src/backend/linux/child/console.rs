//! Child side of the program's terminal as `/dev/console` (see
//! [`crate::backend::linux::prepare::Console`] on why). Part of the `/dev` step, before
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
use crate::backend::linux::prepare::Console;

const CONSOLE: &CStr = c"/newroot/dev/console";

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
