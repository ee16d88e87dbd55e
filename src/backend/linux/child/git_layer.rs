//! Child side of a writable root's `.git` (see `Step::GitLayer`): this command's
//! copy-on-write layer (an overlay whose upper layer is a tmpfs handed to the parent), or
//! a read-only bind where the layer cannot be had.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::{CStr, c_int, c_uint};

use stockade_sys::linux as sys;
use stockade_sys::linux::CWD;
use stockade_sys::{BorrowedFd, Errno, OwnedFd};

use super::R;
use super::git_link;
use super::mounts::{bind_tree, open_no_symlinks};
use crate::backend::linux::prepare::{Exec, GitMount, Op};

/// The [`Op::GitLayer`] step with `index`: this command's [`GitMount`] for it (if `.git`
/// was a directory when the command was prepared) and the socket its upper layer goes to
/// the parent through.
pub(super) fn apply(op: &Op, path: &CStr, index: u8, exec: &Exec) -> R {
    let mount = exec.git.get(usize::from(index)).and_then(Option::as_ref);
    // SAFETY: the parent keeps the git socket open in `exec` until this child has
    // exec'd or exited, and `close_fds` keeps it (it is in `exec.keep`).
    let socket = unsafe { BorrowedFd::borrow_raw(exec.git_socket) };
    layer_path(op, path, mount, socket)?;
    // After the layer: the checkouts' guards lie outside `.git`, in the root.
    mount.map_or(Ok(()), git_link::guard_checkouts)
}

/// The repository metadata of a writable root (see `Step::GitLayer`), opened without
/// following symlinks. A directory with the identity the parent saw gets this command's
/// copy-on-write layer; any other directory there (replaced since, or found where the
/// parent saw none) is bound read-only, which is safe and keeps the run going. A `.git`
/// symlink or file (a linked worktree, a submodule) is pinned, and what it names inside
/// the root layered, by [`git_link::follow`]. Missing, or anything else: nothing to
/// protect, nothing is created.
fn layer_path(op: &Op, path: &CStr, mount: Option<&GitMount>, socket: BorrowedFd<'_>) -> R {
    let fd = match open_no_symlinks(path, libc::O_PATH | libc::O_NOFOLLOW) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let r = layer_fd(op, fd.as_fd(), mount, socket);
    let _ = sys::close(fd);
    r
}

pub(super) fn layer_fd(
    op: &Op,
    fd: BorrowedFd<'_>,
    mount: Option<&GitMount>,
    socket: BorrowedFd<'_>,
) -> R {
    // SAFETY: `libc::stat` is plain old data; all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    sys::fstat(fd, &mut st)?;
    match (st.st_mode & libc::S_IFMT, mount) {
        (libc::S_IFDIR, Some(m)) if (st.st_dev, st.st_ino) == m.identity => {
            let Op::GitLayer { index, .. } = op else {
                return Err(Errno(libc::EINVAL));
            };
            let upper = upper_layer(op, m)?;
            let r = match overlay(op, fd, m) {
                // The parent merges only a layer it receives.
                Ok(true) => sys::send_fd(socket, *index, upper.as_fd()),
                // No overlayfs in this kernel: `.git` is read-only for this run, which
                // keeps it safe; the parent, receiving no layer, says so.
                Ok(false) => bind_tree(fd, c"", fd, c"", true),
                Err(e) => Err(e),
            };
            let _ = sys::close(upper);
            r
        }
        (libc::S_IFDIR, _) => bind_tree(fd, c"", fd, c"", true),
        (libc::S_IFREG | libc::S_IFLNK, _) => git_link::follow(op, fd, mount, socket),
        _ => Ok(()),
    }
}

/// The upper layer: a fresh tmpfs of the policy's `tmp_size` with `upper/` and `work/`,
/// attached at `/.git-layer-N` on the setup root (the overlay wants its layers by path;
/// `pivot_root` detaches it with the setup root, so the program never sees it). Returns
/// its fd, which goes to the parent once the overlay stands: the parent reads the upper
/// layer after the program has ended and then lets the file system go, so nothing is
/// written to the host until the merge.
fn upper_layer(op: &Op, m: &GitMount) -> Result<OwnedFd, Errno> {
    let Op::GitLayer { size, at, .. } = op else {
        return Err(Errno(libc::EINVAL));
    };
    let fs = sys::fsopen(c"tmpfs", libc::FSOPEN_CLOEXEC)?;
    let r = upper_fs(fs.as_fd(), size);
    let _ = sys::close(fs);
    let mnt = r?;
    match upper_dirs(mnt.as_fd(), m.mode, at) {
        Ok(()) => Ok(mnt),
        Err(e) => {
            let _ = sys::close(mnt);
            Err(e)
        }
    }
}

fn upper_fs(fs: BorrowedFd<'_>, size: &CStr) -> Result<OwnedFd, Errno> {
    sys::fsconfig_set_string(fs, c"size", size)?;
    sys::fsconfig_set_string(fs, c"mode", c"700")?;
    sys::fsconfig_create(fs)?;
    let attrs = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC;
    sys::fsmount(fs, libc::FSMOUNT_CLOEXEC, attrs as c_uint)
}

fn upper_dirs(mnt: BorrowedFd<'_>, mode: u32, at: &CStr) -> R {
    sys::mkdirat(mnt, c"upper", 0o700)?;
    // Exactly the mode of the `.git` it covers (mkdir's is filtered by the umask).
    sys::fchmodat(mnt, c"upper", mode)?;
    sys::mkdirat(mnt, c"work", 0o700)?;
    sys::mkdirat(CWD, at, 0o700)?;
    sys::move_mount(mnt, c"", CWD, at, libc::MOVE_MOUNT_F_EMPTY_PATH)
}

/// Room for `/oldroot/proc/self/fd/` and the digits of any fd, with the NUL.
pub(super) const FD_PATH_LEN: usize = 40;

/// `/oldroot/proc/self/fd/<fd>`: a magic link to exactly the directory behind `fd`, for
/// the overlay option that takes a path. Resolving it cannot be redirected by a symlink
/// planted in the workspace, unlike the directory's own path. (Overlayfs takes layers as
/// fds only from Linux 6.13 on; this form works from 5.11, where unprivileged overlay
/// mounts began.) The host's procfs still sits under `/oldroot` before `pivot_root`.
pub(super) fn fd_path(buf: &mut [u8; FD_PATH_LEN], fd: c_int) -> Result<&CStr, Errno> {
    const PREFIX: &[u8] = b"/oldroot/proc/self/fd/";
    let mut digits = [0u8; 10];
    let mut n = u32::try_from(fd).map_err(|_| Errno(libc::EBADF))?;
    let mut len = 0;
    for d in digits.iter_mut() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
        if n == 0 {
            break;
        }
    }
    let bytes = PREFIX
        .iter()
        .chain(digits.iter().take(len).rev())
        .copied()
        .chain(core::iter::once(0));
    for (slot, b) in buf.iter_mut().zip(bytes) {
        *slot = b;
    }
    CStr::from_bytes_until_nul(buf).map_err(|_| Errno(libc::ENAMETOOLONG))
}

/// An overlay over the directory `lower`, with the upper layer made by [`upper_layer`],
/// mounted onto `lower` itself; then the host's packs are frozen on it. `userxattr` keeps
/// its whiteouts and opaque markers in the `user.` namespace, which a user namespace may
/// write (and which is what makes the mount possible unprivileged); `index` and
/// `metacopy` are off so that the upper layer holds whole files the parent can merge
/// back. `nosuid`, `nodev` like every writable mount. `Ok(false)`: this kernel has no
/// overlayfs.
fn overlay(op: &Op, lower: BorrowedFd<'_>, m: &GitMount) -> Result<bool, Errno> {
    let Op::GitLayer { upper, work, .. } = op else {
        return Err(Errno(libc::EINVAL));
    };
    let mut buf = [0u8; FD_PATH_LEN];
    let lowerdir = fd_path(&mut buf, lower.as_raw_fd())?;
    let fs = match sys::fsopen(c"overlay", libc::FSOPEN_CLOEXEC) {
        Ok(fs) => fs,
        Err(Errno(libc::ENODEV)) => return Ok(false),
        Err(e) => return Err(e),
    };
    let r = overlay_fs(fs.as_fd(), lowerdir, upper, work, lower);
    let _ = sys::close(fs);
    r?;
    m.packs.iter().try_for_each(|p| freeze_pack(p))?;
    Ok(true)
}

fn overlay_fs(
    fs: BorrowedFd<'_>,
    lowerdir: &CStr,
    upper: &CStr,
    work: &CStr,
    target: BorrowedFd<'_>,
) -> R {
    sys::fsconfig_set_string(fs, c"lowerdir", lowerdir)?;
    sys::fsconfig_set_string(fs, c"upperdir", upper)?;
    sys::fsconfig_set_string(fs, c"workdir", work)?;
    sys::fsconfig_set_flag(fs, c"userxattr")?;
    sys::fsconfig_set_string(fs, c"index", c"off")?;
    sys::fsconfig_set_string(fs, c"metacopy", c"off")?;
    sys::fsconfig_create(fs)?;
    let attrs = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
    let mnt = sys::fsmount(fs, libc::FSMOUNT_CLOEXEC, attrs as c_uint)?;
    let flags = libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH;
    let r = sys::move_mount(mnt.as_fd(), c"", target, c"", flags);
    let _ = sys::close(mnt);
    r
}

/// Binds a pack file of the layer read-only onto itself. Git refreshes the time of a pack
/// whenever it writes an object the pack already holds (`utime`), and on an overlay that
/// copies the whole pack up (gigabytes, for a large repository). Read-only, the refresh
/// fails and git writes the object loose instead, which is what it does on a read-only
/// object store; new packs are still written. A pack gone since the parent looked, or a
/// symlink, is left alone.
fn freeze_pack(path: &CStr) -> R {
    let fd = match open_no_symlinks(path, libc::O_PATH) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT | libc::ELOOP)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let r = bind_tree(fd.as_fd(), c"", fd.as_fd(), c"", true);
    let _ = sys::close(fd);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_paths_name_the_fd_under_the_old_roots_proc() {
        let mut buf = [0u8; FD_PATH_LEN];
        for (fd, want) in [
            (0, c"/oldroot/proc/self/fd/0"),
            (7, c"/oldroot/proc/self/fd/7"),
            (1234, c"/oldroot/proc/self/fd/1234"),
            (i32::MAX, c"/oldroot/proc/self/fd/2147483647"),
        ] {
            assert_eq!(fd_path(&mut buf, fd), Ok(want));
        }
        assert_eq!(fd_path(&mut buf, -1), Err(Errno(libc::EBADF)));
    }
}
