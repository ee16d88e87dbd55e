//! Child side of the mount steps: the setup root, binds, tmpfs, `/dev`, `/proc`, the
//! masks and guards inside writable roots, and `pivot_root`. Each mountpoint and source
//! is a path the parent prepared; paths inside a writable root are opened without
//! following symlinks and mounted through their fds.
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
use stockade_sys::{BorrowedFd, Errno, OwnedFd};

use super::R;

/// `MS_PRIVATE`, recursively: nothing mounted here reaches the host, and nothing the host
/// mounts later appears inside.
pub(super) fn make_private() -> R {
    sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)
}

/// The empty regular file on the setup tmpfs that hides an existing denied file.
const EMPTY_FILE: &CStr = c"/empty";

/// A tmpfs on `stage` (an existing directory the plan chose: `/tmp`, else `/dev`, …)
/// becomes the root, the host's root moves to `/oldroot`, and a second tmpfs at `/newroot`
/// receives the sandbox's tree. The mount namespace is private by now
/// ([`make_private`]), so the mount on `stage` never reaches the host; `pivot_root` moves
/// the tmpfs away from `stage`, so sources stay reachable under `/oldroot` with their host
/// paths, even the ones below `stage`, until [`pivot_root`] detaches it all. The setup
/// tmpfs also holds [`EMPTY_FILE`].
pub(super) fn base_root(stage: &CStr) -> R {
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    sys::mount(
        Some(c"tmpfs"),
        stage,
        Some(c"tmpfs"),
        flags,
        Some(c"mode=0755,size=1m"),
    )?;
    sys::chdir(stage)?;
    sys::mkdirat(CWD, c"newroot", 0o755)?;
    sys::mkdirat(CWD, c"oldroot", 0o755)?;
    sys::mknodat(CWD, c"empty", libc::S_IFREG | 0o444, 0)?;
    sys::pivot_root(c".", c"oldroot")?;
    sys::chdir(c"/")?;
    sys::mount(
        Some(c"tmpfs"),
        c"/newroot",
        Some(c"tmpfs"),
        flags,
        Some(c"mode=0755"),
    )
}

pub(super) fn make_dirs(dirs: &[CString]) -> R {
    for d in dirs {
        match sys::mkdirat(CWD, d, 0o755) {
            Ok(()) | Err(Errno(libc::EEXIST)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// An empty file to mount on, unless something is there already (a socket or a device
/// under a directory bound before: opening that could fail or have effects). `mknodat`
/// makes it without opening it: one system call, not an open and a close.
pub(super) fn create_file(path: &CStr) -> R {
    match sys::mknodat(CWD, path, libc::S_IFREG | 0o644, 0) {
        Ok(()) | Err(Errno(libc::EEXIST)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Opens a path under `/newroot` without following any symlink, so that a link planted in
/// a writable root cannot redirect a mount.
pub(super) fn open_no_symlinks(path: &CStr, flags: c_int) -> Result<OwnedFd, Errno> {
    let how = sys::open_how(
        (flags | libc::O_CLOEXEC) as u64,
        0,
        libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    );
    sys::openat2(CWD, path, &how)
}

fn set_attr(dirfd: BorrowedFd<'_>, path: &CStr, flags: c_uint, attr_set: u64) -> R {
    sys::mount_setattr(dirfd, path, flags, attr_set, 0, 0)
}

/// Bind `src` onto `dst` through a detached copy: the copy is made read-only (and nosuid,
/// nodev), recursively, before it is attached, so the mount is never visible writable.
/// Setting flags never clears the ones the source mount has locked (nosuid, noexec, …).
/// An empty path with a real dirfd names the fd itself (`AT_EMPTY_PATH`).
pub(super) fn bind_tree(
    src_fd: BorrowedFd<'_>,
    src: &CStr,
    dst_fd: BorrowedFd<'_>,
    dst: &CStr,
    ro: bool,
) -> R {
    let mut flags =
        libc::OPEN_TREE_CLONE | libc::O_CLOEXEC as c_uint | libc::AT_RECURSIVE as c_uint;
    if src.is_empty() {
        flags |= libc::AT_EMPTY_PATH as c_uint;
    }
    let tree = sys::open_tree(src_fd, src, flags)?;
    let mut attr = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
    if ro {
        attr |= libc::MOUNT_ATTR_RDONLY;
    }
    let setattr_flags = (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as c_uint;
    let mut r = set_attr(tree.as_fd(), c"", setattr_flags, attr);
    if r.is_ok() {
        let mut mflags = libc::MOVE_MOUNT_F_EMPTY_PATH;
        if dst.is_empty() {
            mflags |= libc::MOVE_MOUNT_T_EMPTY_PATH;
        }
        r = sys::move_mount(tree.as_fd(), c"", dst_fd, dst, mflags);
    }
    let _ = sys::close(tree);
    r
}

/// A bind from a host path (`Op::Bind`): the mountpoint is made first (its ancestors, then
/// `dst` itself or an empty file), then the source is attached onto it. For an idmapped
/// bind (`idmap`) the source is the command's own tree in `trees`.
pub(super) fn bind(
    src: &CStr,
    dst: &CStr,
    mkdirs: &[CString],
    dir: bool,
    ro: bool,
    idmap: Option<u16>,
    trees: &[std::os::fd::OwnedFd],
) -> R {
    make_dirs(mkdirs)?;
    if !dir {
        create_file(dst)?;
    }
    if let Some(index) = idmap {
        // The parent made this tree for this command (read-only, nosuid, nodev,
        // idmapped); attaching it is all that is left.
        let tree = trees.get(usize::from(index)).ok_or(Errno(libc::EBADF))?;
        // SAFETY: `exec.trees` owns this fd for the whole setup (the parent waits
        // for the exec before dropping `exec`), and `close_fds` kept it open.
        let tree = unsafe { BorrowedFd::borrow_raw(std::os::fd::AsRawFd::as_raw_fd(tree)) };
        return sys::move_mount(tree, c"", CWD, dst, libc::MOVE_MOUNT_F_EMPTY_PATH);
    }
    // The source is opened without following any symlink: the plan refused
    // symlinked paths, and one planted since then fails with ELOOP instead of
    // binding what it names.
    let fd = open_no_symlinks(src, libc::O_PATH)?;
    let r = bind_tree(fd.as_fd(), c"", CWD, dst, ro);
    let _ = sys::close(fd);
    r
}

/// A path inside a writable root bound onto itself (`Op::BindBeneath`), opened without
/// symlinks.
pub(super) fn bind_beneath(path: &CStr, ro: bool) -> R {
    let fd = open_no_symlinks(path, libc::O_PATH)?;
    let r = bind_tree(fd.as_fd(), c"", fd.as_fd(), c"", ro);
    let _ = sys::close(fd);
    r
}

/// A directory inside a writable root bound onto itself (`Op::Pin`), so that it becomes a
/// mountpoint that rename and rmdir refuse.
pub(super) fn pin(path: &CStr) -> R {
    let fd = open_no_symlinks(path, libc::O_PATH | libc::O_DIRECTORY)?;
    let r = bind_tree(fd.as_fd(), c"", fd.as_fd(), c"", false);
    let _ = sys::close(fd);
    r
}

/// A symlink under `/newroot`, after its ancestors.
pub(super) fn symlink(target: &CStr, link: &CStr, mkdirs: &[CString]) -> R {
    make_dirs(mkdirs)?;
    sys::symlinkat(target, CWD, link)
}

/// A fresh tmpfs under `/newroot` (nosuid, nodev), after its ancestors and itself.
pub(super) fn tmpfs(dst: &CStr, mkdirs: &[CString], data: &CStr) -> R {
    make_dirs(mkdirs)?;
    sys::mount(
        Some(c"tmpfs"),
        dst,
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(data),
    )
}

/// The setup root's read-only, nosuid, nodev bind of `/dev/null` that the file masks
/// outside writable roots are bound from ([`mask_file`]); detached with the setup root.
const MASK_SOURCE: &CStr = c"/mask";

/// An existing file masked by `/dev/null`, read-only (`Op::MaskFile`).
///
/// Inside a writable root (`beneath`) the mask is a detached copy attached through
/// `move_mount`, which does not follow a symlink planted at the name. Elsewhere (the host's
/// system files in the read-only binds) each mask is one `mount(MS_BIND)` of
/// [`MASK_SOURCE`], which the first such mask makes (`make_source`): a bind keeps its
/// source mount's flags, so it is read-only, nosuid and nodev from the start. Four masks
/// cost 7 calls instead of 16.
pub(super) fn mask_file(path: &CStr, beneath: bool, make_source: bool) -> R {
    if beneath {
        return bind_tree(CWD, c"/oldroot/dev/null", CWD, path, true);
    }
    if make_source {
        sys::mknodat(CWD, MASK_SOURCE, libc::S_IFREG | 0o444, 0)?;
        sys::mount(
            Some(c"/oldroot/dev/null"),
            MASK_SOURCE,
            None,
            libc::MS_BIND,
            None,
        )?;
        let attr = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
        set_attr(CWD, MASK_SOURCE, 0, attr)?;
    }
    sys::mount(Some(MASK_SOURCE), path, None, libc::MS_BIND, None)
}

/// The sandbox's root read-only (`Op::RootReadOnly`), after `pivot_root`; the mounts
/// below it keep their own flags.
pub(super) fn root_read_only() -> R {
    set_attr(CWD, c"/", 0, libc::MOUNT_ATTR_RDONLY)
}

/// tmpfs, the device nodes bound from the host, a private devpts with its ptmx, and the
/// fd links (`/dev/shm` is a tmpfs step of its own).
pub(super) fn dev(nodes: &[(CString, CString)]) -> R {
    match sys::mkdirat(CWD, c"/newroot/dev", 0o755) {
        Ok(()) | Err(Errno(libc::EEXIST)) => {}
        Err(e) => return Err(e),
    }
    sys::mount(
        Some(c"tmpfs"),
        c"/newroot/dev",
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(c"mode=0755,size=64k"),
    )?;
    for (src, dst) in nodes {
        create_file(dst)?;
        sys::mount(Some(src), dst, None, libc::MS_BIND, None)?;
    }
    // The nodes are the host's own inodes, and the program's uid is the caller's: for a
    // root host, `chmod 000 /dev/null` would change the host's. A read-only mount refuses
    // every change to the node (EROFS) while reads and writes of the device itself go on.
    // One recursive call makes every node's bind read-only (the tmpfs too, whose own mount
    // is then made writable again, alone): two calls, not one per node. Nothing else is
    // mounted below `/dev` yet.
    if !nodes.is_empty() {
        let recursive = libc::AT_RECURSIVE as c_uint;
        set_attr(CWD, c"/newroot/dev", recursive, libc::MOUNT_ATTR_RDONLY)?;
        sys::mount_setattr(CWD, c"/newroot/dev", 0, 0, libc::MOUNT_ATTR_RDONLY, 0)?;
    }
    sys::mkdirat(CWD, c"/newroot/dev/pts", 0o755)?;
    sys::mount(
        Some(c"devpts"),
        c"/newroot/dev/pts",
        Some(c"devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(c"newinstance,ptmxmode=0666,mode=620"),
    )?;
    sys::symlinkat(c"pts/ptmx", CWD, c"/newroot/dev/ptmx")?;
    // `/dev/shm` is a tmpfs step of its own, sized like `/tmp`.
    sys::symlinkat(c"/proc/self/fd", CWD, c"/newroot/dev/fd")?;
    sys::symlinkat(c"/proc/self/fd/0", CWD, c"/newroot/dev/stdin")?;
    sys::symlinkat(c"/proc/self/fd/1", CWD, c"/newroot/dev/stdout")?;
    sys::symlinkat(c"/proc/self/fd/2", CWD, c"/newroot/dev/stderr")
}

/// A procfs of the new PID namespace; the kernel knobs under it read-only.
/// With a fresh `/proc`, `counts` are written into its `sys/user/` first: they are this
/// child's user namespace's own maxima (the kernel picks the table of the writer's
/// namespace, and the namespace's root holds `CAP_SYS_RESOURCE` in it until the
/// capabilities are dropped). The host's `/proc` of the fallback is bound read-only and
/// left as it is: its counts are the host user's.
/// With `hide_pids` (a session's sandbox) the fresh `/proc` lists only the processes the
/// reader may ptrace (`hidepid=ptraceable`): Landlock's ptrace rule then hides every
/// process outside the reader's domain and the domains nested in it. The fallback, the
/// host's own `/proc` bound, cannot hide anything.
pub(super) fn proc(fallback: bool, counts: &[(std::ffi::CString, Vec<u8>)], hide_pids: bool) -> R {
    match sys::mkdirat(CWD, c"/newroot/proc", 0o555) {
        Ok(()) | Err(Errno(libc::EEXIST)) => {}
        Err(e) => return Err(e),
    }
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let data = if hide_pids {
        Some(c"hidepid=ptraceable")
    } else {
        None
    };
    match sys::mount(Some(c"proc"), c"/newroot/proc", Some(c"proc"), flags, data) {
        Ok(()) => {
            for (path, value) in counts {
                super::write_file(path, value)?;
            }
        }
        Err(_) if fallback => {
            return bind_tree(CWD, c"/oldroot/proc", CWD, c"/newroot/proc", true);
        }
        Err(e) => return Err(e),
    }
    for sub in [
        c"/newroot/proc/sys",
        c"/newroot/proc/sysrq-trigger",
        c"/newroot/proc/irq",
        c"/newroot/proc/bus",
        c"/newroot/proc/fs",
    ] {
        match read_only_in_place(sub) {
            Ok(()) | Err(Errno(libc::ENOENT)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `path` of the procfs this child has just mounted bound onto itself, then made read-only
/// (and nosuid, nodev), recursively: two calls where [`bind_tree`]'s detached copy takes
/// four. The bind is writable between the two, which nothing can use: the mount namespace
/// is this child's alone until it execs, and the procfs is its own.
fn read_only_in_place(path: &CStr) -> R {
    sys::mount(Some(path), path, None, libc::MS_BIND | libc::MS_REC, None)?;
    let attr = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
    set_attr(CWD, path, libc::AT_RECURSIVE as c_uint, attr)
}

/// An empty, read-only tmpfs with mode 000: no listing, no reads, no writes. Inside a
/// writable root the directory is opened without symlinks and its identity checked, and
/// the mask is attached to that fd, not to a path that could change in between.
pub(super) fn mask_dir(path: &CStr, beneath: bool, identity: Option<(u64, u64)>) -> R {
    if !beneath {
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        return sys::mount(
            Some(c"tmpfs"),
            path,
            Some(c"tmpfs"),
            flags,
            Some(c"size=4k,mode=000"),
        );
    }
    let target = open_no_symlinks(path, libc::O_PATH | libc::O_DIRECTORY)?;
    let r = mask_fd(target.as_fd(), identity, c"000");
    let _ = sys::close(target);
    r
}

fn mask_fd(target: BorrowedFd<'_>, identity: Option<(u64, u64)>, mode: &CStr) -> R {
    if let Some((dev, ino)) = identity {
        // SAFETY: `libc::stat` is plain old data; all-zero bytes are a valid value.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        sys::fstat(target, &mut st)?;
        if st.st_dev != dev || st.st_ino != ino {
            return Err(Errno(libc::ESTALE));
        }
    }
    let fs = sys::fsopen(c"tmpfs", libc::FSOPEN_CLOEXEC)?;
    let r = mask_fs(fs.as_fd(), target, mode);
    let _ = sys::close(fs);
    r
}

fn mask_fs(fs: BorrowedFd<'_>, target: BorrowedFd<'_>, mode: &CStr) -> R {
    sys::fsconfig_set_string(fs, c"mode", mode)?;
    sys::fsconfig_set_string(fs, c"size", c"4k")?;
    sys::fsconfig_create(fs)?;
    let attrs = libc::MOUNT_ATTR_RDONLY
        | libc::MOUNT_ATTR_NOSUID
        | libc::MOUNT_ATTR_NODEV
        | libc::MOUNT_ATTR_NOEXEC;
    let mnt = sys::fsmount(fs, libc::FSMOUNT_CLOEXEC, attrs as c_uint)?;
    let flags = libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH;
    let r = sys::move_mount(mnt.as_fd(), c"", target, c"", flags);
    let _ = sys::close(mnt);
    r
}

/// Hides a name at the top of a writable root (see `Step::HideName`): an existing entry is
/// covered by an empty read-only entry of the same kind; a missing one is left missing
/// (nothing is created on the host).
///
/// Two kinds of entry cannot be hidden by covering the name, and fail the step instead, so
/// the command does not run: a symbolic link (`ELOOP`: covering the link would leave what
/// it names readable under that name, and following a link the program may have planted
/// could name anything, `/etc/shadow` or a file the host reads), and a regular file with
/// more than one hard link (`EMLINK`: its other names, which a program can plant in one
/// run, show what the user writes into it before the next). The check is made here, on the
/// fd that is covered, so no swap between a check in the parent and the mount can slip a
/// link past it.
pub(super) fn hide_name(path: &CStr) -> R {
    let fd = match open_no_symlinks(path, libc::O_PATH) {
        Ok(fd) => fd,
        // The root's own path has no symlink (the parent made those directories), so
        // `ELOOP` means that the name itself is one.
        Err(Errno(libc::ENOENT | libc::ENOTDIR)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let r = hide_fd(fd.as_fd());
    let _ = sys::close(fd);
    r
}

fn hide_fd(fd: BorrowedFd<'_>) -> R {
    // SAFETY: `libc::stat` is plain old data; all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    sys::fstat(fd, &mut st)?;
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        // An empty directory that can be listed: `ls` and `git status` see nothing there.
        mask_fd(fd, None, c"555")
    } else if st.st_nlink > 1 {
        Err(Errno(libc::EMLINK))
    } else {
        // An empty regular file (made by `base_root` on the setup tmpfs): `cat` reads
        // nothing, and git sees an ordinary file.
        bind_tree(CWD, EMPTY_FILE, fd, c"", true)
    }
}

/// Binds `path` onto itself (read-only when `ro`) when it exists, opened without symlinks:
/// the guard steps, which protect names that a workspace may or may not have.
pub(super) fn bind_if_present(path: &CStr, flags: c_int, ro: bool) -> R {
    let fd = match open_no_symlinks(path, flags) {
        Ok(fd) => fd,
        // Missing, under a `.git` that is a file (a worktree or submodule checkout), or
        // reached through a symlink (which may name anything; it is not followed): nothing
        // to guard here, and nothing is created. The parent warns about the last case.
        Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let r = bind_tree(fd.as_fd(), c"", fd.as_fd(), c"", ro);
    let _ = sys::close(fd);
    r
}

/// Into the assembled tree: with both arguments ".", the old root ends up stacked on the
/// new one at "/", where a lazy unmount detaches it, and the host's root with it.
pub(super) fn pivot_root() -> R {
    sys::chdir(c"/newroot")?;
    sys::pivot_root(c".", c".")?;
    sys::umount2(c".", libc::MNT_DETACH)?;
    sys::chdir(c"/")
}
