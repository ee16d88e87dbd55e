//! Child side of a `.git` symlink or `gitdir:` file (see
//! `crate::process::gitlayer::target`): pin it, and layer the directory it names inside its
//! writable root.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use stockade_sys::linux as sys;
use stockade_sys::{BorrowedFd, Errno};

use super::R;
use super::git_layer::layer_fd;
use super::mounts::{bind_tree, open_no_symlinks};
use crate::backend::linux::prepare::{GitMount, Op};

/// `fd` is `<root>/.git`, a symlink or a regular file, opened without following it. It is
/// bound read-only onto itself first, whatever it names: a mountpoint cannot be removed,
/// renamed or replaced, and a file's `gitdir:` cannot be rewritten, so the program cannot
/// point the host's git at metadata of its own. Then, when the parent found it naming a
/// directory inside the root (`mount.link`, with this link's identity), the directories
/// on the way are pinned and the directory gets the layer (or, if so prepared, a
/// read-only bind). A link or directory replaced since the parent looked is not
/// followed; the run goes on.
pub(super) fn follow(
    op: &Op,
    fd: BorrowedFd<'_>,
    mount: Option<&GitMount>,
    socket: BorrowedFd<'_>,
) -> R {
    bind_tree(fd, c"", fd, c"", true)?;
    let Some((m, link)) = mount.and_then(|m| m.link.as_ref().map(|l| (m, l))) else {
        return Ok(());
    };
    // SAFETY: `libc::stat` is plain old data; all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    sys::fstat(fd, &mut st)?;
    if (st.st_dev, st.st_ino) != link.identity {
        return Ok(());
    }
    for pin in &link.pins {
        let dir = match open_no_symlinks(pin, libc::O_PATH | libc::O_DIRECTORY) {
            Ok(dir) => dir,
            Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let r = bind_tree(dir.as_fd(), c"", dir.as_fd(), c"", false);
        let _ = sys::close(dir);
        r?;
    }
    let dir = match open_no_symlinks(&link.target, libc::O_PATH | libc::O_DIRECTORY) {
        Ok(dir) => dir,
        Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => return Ok(()),
        Err(e) => return Err(e),
    };
    // Without a layer, `layer_fd` binds the directory read-only.
    let layer = if link.layer { Some(m) } else { None };
    let r = layer_fd(op, dir.as_fd(), layer, socket);
    let _ = sys::close(dir);
    r
}

/// Keeps the submodule checkouts the host's index lists from change (see
/// `crate::process::gitlayer::checkouts`): each directory on the way is bound onto itself
/// (a mountpoint cannot be renamed or removed), then the guarded path read-only onto
/// itself. Git on the host runs git in each checkout with the git dir its `.git` names;
/// read-only, the program can neither point that elsewhere nor write the config there. A
/// path gone or replaced by a symlink since the parent looked is left alone: the parent
/// saw it, and nothing else can have changed it before the program starts but the host.
pub(super) fn guard_checkouts(m: &GitMount) -> R {
    'checkout: for c in &m.checkouts {
        for pin in &c.pins {
            let dir = match open_no_symlinks(pin, libc::O_PATH | libc::O_DIRECTORY) {
                Ok(dir) => dir,
                Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => continue 'checkout,
                Err(e) => return Err(e),
            };
            let r = bind_tree(dir.as_fd(), c"", dir.as_fd(), c"", false);
            let _ = sys::close(dir);
            r?;
        }
        let fd = match open_no_symlinks(&c.guard, libc::O_PATH | libc::O_NOFOLLOW) {
            Ok(fd) => fd,
            Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => continue,
            Err(e) => return Err(e),
        };
        let r = bind_tree(fd.as_fd(), c"", fd.as_fd(), c"", true);
        let _ = sys::close(fd);
        r?;
    }
    Ok(())
}
