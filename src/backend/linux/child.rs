//! Child side: replay the prepared operations, then exec. Runs between `clone` and
//! `execve`.
//!
//! # The hazard
//!
//! This code runs in a child created with `CLONE_VM | CLONE_VFORK`: it shares the host's
//! memory, including every heap lock and the TLS block of the thread that cloned it, while
//! the host's other threads keep running. So, until `execve`:
//!
//! - no allocation and no free (the allocator's locks may be held by another thread, and
//!   its state is the host's);
//! - no lock of any kind, no `tracing`, no formatting, no panics (a panic formats);
//! - no libc call that writes `errno`: that is the cloning thread's TLS slot. Every system
//!   call goes through `stockade_sys::linux`, which returns the kernel's error directly;
//! - only the prepared operations and this function's own stack are touched.
//!
//! The parent computed every byte used here ([`super::prepare`]); this module decides
//! nothing. A failing operation writes one fixed-size record ([`crate::backend::report`]) naming
//! its index and errno, and the child exits.
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

use super::prepare::{Exec, GitMount, Layout, Op};
use crate::backend::report::{self, Record};

mod console;
mod git_link;

/// Exit status of a child whose setup failed (the parent reads the record, not this).
pub const SETUP_FAILED: c_int = 125;

type R = Result<(), Errno>;

/// Index of the per-command steps after the layout's own steps.
pub use crate::backend::report::extra;

/// Replays `layout`, then sets up and runs the command described by `exec`. Never returns.
pub fn run(layout: &Layout, exec: &Exec) -> ! {
    let base = layout.ops.len() as u32;
    if let Err(e) = stdio(exec) {
        fail(exec, base + extra::STDIO, e);
    }
    if let Err(e) = close_fds(exec) {
        fail(exec, base + extra::CLOSE_FDS, e);
    }
    for (index, op) in layout.ops.iter().enumerate() {
        if let Err(e) = apply(op, layout, exec) {
            fail(exec, index as u32, e);
        }
    }
    // After `setsid` (a layout op): only a session leader without a controlling terminal
    // may take one. The seccomp filter, installed by then, allows TIOCSCTTY; the fd was
    // opened before Landlock, so its ioctls are not restricted either. (With an init, the
    // program's own process takes it, after its own `setsid`: the parent sets this only
    // for a program exec'd here.)
    if exec.controlling_terminal >= 0 {
        // SAFETY: the terminal is one of 0, 1, 2, which `stdio` has just put in place and
        // `close_fds` kept.
        let fd = unsafe { BorrowedFd::borrow_raw(exec.controlling_terminal) };
        if let Err(e) = sys::ioctl_tiocsctty(fd) {
            fail(exec, base + extra::CONTROLLING_TERMINAL, e);
        }
    }
    if let Some(cwd) = &exec.cwd {
        if let Err(e) = sys::chdir(cwd) {
            fail(exec, base + extra::CHDIR, e);
        }
    }
    if let Some(init) = &exec.init {
        let e = exec_init(init, exec);
        fail(exec, base + extra::INIT, e)
    }
    let e = exec_program(exec);
    fail(exec, base + extra::EXEC, e)
}

/// Reports `step` failing with `errno` and exits.
fn fail(exec: &Exec, step: u32, errno: Errno) -> ! {
    // One write of 16 bytes to a pipe is atomic; if it fails the parent sees EOF from a
    // child that never exec'd, which is still not a silent success.
    report::send(exec.report.0, &Record::new(step, errno.0));
    sys::exit_group(SETUP_FAILED)
}

fn apply(op: &Op, layout: &Layout, exec: &Exec) -> R {
    match op {
        Op::DieWithParent => die_with_parent(exec),
        Op::ResetSignals => reset_signals(),
        Op::IdMaps { uid_map, gid_map } => id_maps(uid_map, gid_map),
        // MS_PRIVATE, recursively: nothing mounted here reaches the host, and nothing the
        // host mounts later appears inside.
        Op::MountsPrivate => sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None),
        Op::BaseRoot => base_root(),
        Op::Bind {
            src,
            dst,
            mkdirs,
            dir,
            ro,
            idmap,
        } => {
            make_dirs(mkdirs)?;
            if !*dir {
                create_file(dst)?;
            }
            if let Some(index) = idmap {
                // The parent made this tree for this command (read-only, nosuid, nodev,
                // idmapped); attaching it is all that is left.
                let tree = exec
                    .trees
                    .get(usize::from(*index))
                    .ok_or(Errno(libc::EBADF))?;
                // SAFETY: `exec.trees` owns this fd for the whole setup (the parent waits
                // for the exec before dropping `exec`), and `close_fds` kept it open.
                let tree = unsafe { BorrowedFd::borrow_raw(std::os::fd::AsRawFd::as_raw_fd(tree)) };
                return sys::move_mount(tree, c"", CWD, dst, libc::MOVE_MOUNT_F_EMPTY_PATH);
            }
            // The source is opened without following any symlink: the plan refused
            // symlinked paths, and one planted since then fails with ELOOP instead of
            // binding what it names.
            let fd = open_no_symlinks(src, libc::O_PATH)?;
            let r = bind_tree(fd.as_fd(), c"", CWD, dst, *ro);
            let _ = sys::close(fd);
            r
        }
        Op::BindBeneath { path, ro } => {
            let fd = open_no_symlinks(path, libc::O_PATH)?;
            let r = bind_tree(fd.as_fd(), c"", fd.as_fd(), c"", *ro);
            let _ = sys::close(fd);
            r
        }
        Op::Symlink {
            target,
            link,
            mkdirs,
        } => {
            make_dirs(mkdirs)?;
            sys::symlinkat(target, CWD, link)
        }
        Op::Tmpfs { dst, mkdirs, data } => {
            make_dirs(mkdirs)?;
            sys::mount(
                Some(c"tmpfs"),
                dst,
                Some(c"tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(data),
            )
        }
        Op::Dev { nodes } => dev(nodes).and_then(|()| console::bind(exec.console.as_ref())),
        Op::Proc { fallback } => proc(*fallback),
        Op::MaskDir {
            path,
            beneath,
            identity,
        } => mask_dir(path, *beneath, *identity),
        Op::MaskFile { path } => bind_tree(CWD, c"/oldroot/dev/null", CWD, path, true),
        Op::Pin { path } => {
            let fd = open_no_symlinks(path, libc::O_PATH | libc::O_DIRECTORY)?;
            let r = bind_tree(fd.as_fd(), c"", fd.as_fd(), c"", false);
            let _ = sys::close(fd);
            r
        }
        Op::HideName { path } => hide_name(path),
        Op::GuardName { path } => bind_if_present(path, libc::O_PATH, true),
        Op::GuardPin { path } => bind_if_present(path, libc::O_PATH | libc::O_DIRECTORY, false),
        Op::GitLayer { path, index, .. } => {
            let mount = exec.git.get(usize::from(*index)).and_then(Option::as_ref);
            // SAFETY: the parent keeps the git socket open in `exec` until this child has
            // exec'd or exited, and `close_fds` keeps it (it is in `exec.keep`).
            let socket = unsafe { BorrowedFd::borrow_raw(exec.git_socket) };
            git_layer(op, path, mount, socket)
        }
        Op::PivotRoot => pivot_root(),
        Op::RootReadOnly => set_attr(CWD, c"/", 0, libc::MOUNT_ATTR_RDONLY),
        Op::LoopbackUp => loopback_up(),
        Op::NewSession => sys::setsid().map(drop),
        Op::NewKeyring => match sys::keyctl_join_session_keyring_anonymous() {
            // A kernel without keys has no host keys to hide.
            Ok(_) | Err(Errno(libc::ENOSYS)) => Ok(()),
            Err(e) => Err(e),
        },
        Op::DropCapabilities { last_cap } => drop_capabilities(*last_cap),
        Op::NoNewPrivs => sys::prctl_set_no_new_privs(),
        Op::LandlockRules => match &layout.walls {
            Some(w) => landlock_rules(&w.child_rules, landlock_fd(exec)),
            None => Err(Errno(libc::EINVAL)),
        },
        // Needs no_new_privs (set by the step before) and takes effect at once, for this
        // process and everything it execs.
        Op::Landlock => sys::landlock_restrict_self(landlock_fd(exec), 0),
        // The kernel copies the program during the call (`seccomp_prepare_user_filter`), so
        // the parent's buffer only has to outlive it, which CLONE_VFORK guarantees.
        Op::Seccomp => match &layout.walls {
            Some(w) => {
                // SAFETY: stockade's filter answers only with ALLOW, KILL_PROCESS and ERRNO
                // of EPERM or ENOSYS (`seccomp::build`): no call reports a success that did
                // not happen.
                unsafe { sys::seccomp_set_mode_filter(0, w.filter.instructions()) }.map(drop)
            }
            None => Err(Errno(libc::EINVAL)),
        },
        Op::Exit => sys::exit_group(0),
    }
}

/// The command's Landlock ruleset fd (only asked for when the plan has walls, so it is open).
fn landlock_fd(exec: &Exec) -> BorrowedFd<'_> {
    // SAFETY: the parent keeps the ruleset fd open in `exec` until this child has exec'd or
    // exited, and `close_fds` keeps it. With no walls it is -1 and no step asks for it; a
    // call on -1 fails with EBADF and touches nothing.
    unsafe { BorrowedFd::borrow_raw(exec.landlock_fd) }
}

/// Dup the prepared stdio fds onto 0, 1 and 2. The parent made sure that no source fd is
/// itself 0, 1 or 2 unless it is already in place.
fn stdio(exec: &Exec) -> R {
    for (target, &src) in (0..).zip(&exec.stdio) {
        if src < 0 {
            continue;
        }
        // SAFETY: the parent keeps each prepared stdio fd open in `exec` until this child
        // has exec'd or exited.
        let src_fd = unsafe { BorrowedFd::borrow_raw(src) };
        if src == target {
            // Already in place: only clear close-on-exec.
            sys::fcntl_setfd(src_fd, 0)?;
        } else {
            // SAFETY: 0, 1 and 2 of this child are its own copies (not shared with the
            // host: no CLONE_FILES), and replacing them is the point; no source is one of
            // them unless it is already in place (handled above).
            unsafe { sys::dup3(src_fd, target, 0) }?;
        }
    }
    for &fd in &exec.pass {
        // SAFETY: the parent keeps each passed fd open in `exec` until this child has
        // exec'd or exited.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        sys::fcntl_setfd(fd, 0)?;
    }
    Ok(())
}

/// Close every fd from 3 up, except the ones in `exec.keep` (sorted).
fn close_fds(exec: &Exec) -> R {
    let mut first: c_uint = 3;
    for &keep in &exec.keep {
        let keep = keep as c_uint;
        if keep > first {
            // SAFETY: this child's fd table is its own copy (no CLONE_FILES); the fds it
            // still needs are the ones in `keep` and 0-2, and nothing else in it will use
            // the others before `execve`.
            unsafe { sys::close_range(first, keep - 1, 0) }?;
        }
        if keep >= first {
            first = keep + 1;
        }
    }
    // SAFETY: as above: nothing past the last kept fd is used by this child again.
    unsafe { sys::close_range(first, c_uint::MAX, 0) }
}

/// `PR_SET_PDEATHSIG` follows the parent *thread*; stockade clones from a thread that lives
/// as long as the host process (see `spawn`). The check after arming closes the window in
/// which the host died before the signal was armed: in a new PID namespace `getppid()` is
/// always 0, so instead the report pipe tells, since its read end lives only in the host
/// (the child closed its copy in `close_fds`). A pipe whose readers are all gone polls
/// `POLLERR` on its write end.
fn die_with_parent(exec: &Exec) -> R {
    sys::prctl_set_pdeathsig(libc::SIGKILL)?;
    // SAFETY: the parent keeps the report pipe's write end open in `exec` until this child
    // has exec'd or exited, and `close_fds` keeps it.
    let report = unsafe { BorrowedFd::borrow_raw(exec.report.0) };
    let revents = sys::poll_now(report, 0)?;
    if revents & libc::POLLERR != 0 {
        sys::exit_group(SETUP_FAILED);
    }
    Ok(())
}

/// Every disposition back to `SIG_DFL`: a signal arriving before `execve` must not run a
/// host handler on the host's memory. Signals stay blocked (the parent blocked them all
/// around `clone`) until just before `execve`.
fn reset_signals() -> R {
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        sys::rt_sigaction_default(sig)?;
    }
    Ok(())
}

fn write_file(path: &CStr, data: &[u8]) -> R {
    let fd = sys::openat(CWD, path, libc::O_WRONLY | libc::O_CLOEXEC, 0)?;
    let r = sys::write(fd.as_fd(), data);
    let _ = sys::close(fd);
    match r {
        Ok(n) if n == data.len() => Ok(()),
        Ok(_) => Err(Errno(libc::EIO)),
        Err(e) => Err(e),
    }
}

/// One id each: the caller's own. An unprivileged process may write exactly this map for
/// itself once `setgroups` is denied.
fn id_maps(uid_map: &[u8], gid_map: &[u8]) -> R {
    match write_file(c"/proc/self/setgroups", b"deny") {
        Ok(()) | Err(Errno(libc::ENOENT)) => {}
        Err(e) => return Err(e),
    }
    write_file(c"/proc/self/uid_map", uid_map)?;
    write_file(c"/proc/self/gid_map", gid_map)
}

/// The empty regular file on the setup tmpfs that hides an existing denied file.
const EMPTY_FILE: &CStr = c"/empty";

/// A tmpfs on `/tmp` becomes the root, the host's root moves to `/oldroot`, and a second
/// tmpfs at `/newroot` receives the sandbox's tree. Sources stay reachable under
/// `/oldroot` with their host paths, even the ones below the host's `/tmp`, until
/// [`pivot_root`] detaches it all. The setup tmpfs also holds [`EMPTY_FILE`].
fn base_root() -> R {
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    sys::mount(
        Some(c"tmpfs"),
        c"/tmp",
        Some(c"tmpfs"),
        flags,
        Some(c"mode=0755,size=1m"),
    )?;
    sys::chdir(c"/tmp")?;
    sys::mkdirat(CWD, c"newroot", 0o755)?;
    sys::mkdirat(CWD, c"oldroot", 0o755)?;
    let fd = sys::openat(
        CWD,
        c"empty",
        libc::O_RDONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
        0o444,
    )?;
    sys::close(fd)?;
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

fn make_dirs(dirs: &[std::ffi::CString]) -> R {
    for d in dirs {
        match sys::mkdirat(CWD, d, 0o755) {
            Ok(()) | Err(Errno(libc::EEXIST)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// An empty file to mount on, unless something is there already (a socket or a device
/// under a directory bound before: opening that could fail or have effects).
fn create_file(path: &CStr) -> R {
    let flags = libc::O_RDONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOCTTY;
    match sys::openat(CWD, path, flags, 0o644) {
        Ok(fd) => sys::close(fd),
        Err(Errno(libc::EEXIST)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Opens a path under `/newroot` without following any symlink, so that a link planted in
/// a writable root cannot redirect a mount.
fn open_no_symlinks(path: &CStr, flags: c_int) -> Result<OwnedFd, Errno> {
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
fn bind_tree(
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

/// tmpfs, the device nodes bound from the host, a private devpts with its ptmx, shm, and
/// the fd links.
fn dev(nodes: &[(std::ffi::CString, std::ffi::CString)]) -> R {
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
        // The nodes are the host's own inodes, and the program's uid is the caller's: for
        // a root host, `chmod 000 /dev/null` would change the host's. A read-only mount
        // refuses every change to the node (EROFS) while reads and writes of the device
        // itself go on.
        set_attr(CWD, dst, 0, libc::MOUNT_ATTR_RDONLY)?;
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
    sys::mkdirat(CWD, c"/newroot/dev/shm", 0o755)?;
    sys::mount(
        Some(c"tmpfs"),
        c"/newroot/dev/shm",
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(c"mode=1777"),
    )?;
    sys::symlinkat(c"/proc/self/fd", CWD, c"/newroot/dev/fd")?;
    sys::symlinkat(c"/proc/self/fd/0", CWD, c"/newroot/dev/stdin")?;
    sys::symlinkat(c"/proc/self/fd/1", CWD, c"/newroot/dev/stdout")?;
    sys::symlinkat(c"/proc/self/fd/2", CWD, c"/newroot/dev/stderr")
}

/// A procfs of the new PID namespace; the kernel knobs under it read-only.
fn proc(fallback: bool) -> R {
    match sys::mkdirat(CWD, c"/newroot/proc", 0o555) {
        Ok(()) | Err(Errno(libc::EEXIST)) => {}
        Err(e) => return Err(e),
    }
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    match sys::mount(Some(c"proc"), c"/newroot/proc", Some(c"proc"), flags, None) {
        Ok(()) => {}
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
        match bind_tree(CWD, sub, CWD, sub, true) {
            Ok(()) | Err(Errno(libc::ENOENT)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// An empty, read-only tmpfs with mode 000: no listing, no reads, no writes. Inside a
/// writable root the directory is opened without symlinks and its identity checked, and
/// the mask is attached to that fd, not to a path that could change in between.
fn mask_dir(path: &CStr, beneath: bool, identity: Option<(u64, u64)>) -> R {
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
/// (nothing is created on the host), and a symlink is left alone: what it names lives
/// elsewhere, under that path's own rules.
fn hide_name(path: &CStr) -> R {
    let fd = match open_no_symlinks(path, libc::O_PATH) {
        Ok(fd) => fd,
        Err(Errno(libc::ELOOP | libc::ENOENT | libc::ENOTDIR)) => return Ok(()),
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
    } else {
        // An empty regular file (made by `base_root` on the setup tmpfs): `cat` reads
        // nothing, and git sees an ordinary file.
        bind_tree(CWD, EMPTY_FILE, fd, c"", true)
    }
}

/// Binds `path` onto itself (read-only when `ro`) when it exists, opened without symlinks:
/// the guard steps, which protect names that a workspace may or may not have.
fn bind_if_present(path: &CStr, flags: c_int, ro: bool) -> R {
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

/// The repository metadata of a writable root (see `Step::GitLayer`), opened without
/// following symlinks. A directory with the identity the parent saw gets this command's
/// copy-on-write layer; any other directory there (replaced since, or found where the
/// parent saw none) is bound read-only, which is safe and keeps the run going. A `.git`
/// symlink or file (a linked worktree, a submodule) is pinned, and what it names inside
/// the root layered, by [`git_link::follow`]. Missing, or anything else: nothing to
/// protect, nothing is created.
fn git_layer(op: &Op, path: &CStr, mount: Option<&GitMount>, socket: BorrowedFd<'_>) -> R {
    let fd = match open_no_symlinks(path, libc::O_PATH | libc::O_NOFOLLOW) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let r = git_layer_fd(op, fd.as_fd(), mount, socket);
    let _ = sys::close(fd);
    r
}

fn git_layer_fd(
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
const FD_PATH_LEN: usize = 40;

/// `/oldroot/proc/self/fd/<fd>`: a magic link to exactly the directory behind `fd`, for
/// the overlay option that takes a path. Resolving it cannot be redirected by a symlink
/// planted in the workspace, unlike the directory's own path. (Overlayfs takes layers as
/// fds only from Linux 6.13 on; this form works from 5.11, where unprivileged overlay
/// mounts began.) The host's procfs still sits under `/oldroot` before `pivot_root`.
fn fd_path(buf: &mut [u8; FD_PATH_LEN], fd: c_int) -> Result<&CStr, Errno> {
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

/// Into the assembled tree: with both arguments ".", the old root ends up stacked on the
/// new one at "/", where a lazy unmount detaches it, and the host's root with it.
fn pivot_root() -> R {
    sys::chdir(c"/newroot")?;
    sys::pivot_root(c".", c".")?;
    sys::umount2(c".", libc::MNT_DETACH)?;
    sys::chdir(c"/")
}

/// `lo` up in the new network namespace; already up is fine.
fn loopback_up() -> R {
    let fd = sys::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)?;
    let mut ifr = sys::IfreqFlags {
        name: [0; 16],
        flags: 0,
        pad: [0; 22],
    };
    if let Some(name) = ifr.name.get_mut(..2) {
        name.copy_from_slice(b"lo");
    }
    let mut r = sys::ioctl_siocgifflags(fd.as_fd(), &mut ifr);
    if r.is_ok() {
        ifr.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as i16;
        r = sys::ioctl_siocsifflags(fd.as_fd(), &ifr);
    }
    let _ = sys::close(fd);
    r
}

/// Empties every capability set. The bounding set goes first (dropping from it needs
/// `CAP_SETPCAP`, which `capset` then removes), so an `execve` of a file with file
/// capabilities, or as uid 0, cannot bring any back.
fn drop_capabilities(last_cap: u32) -> R {
    for cap in 0..=last_cap {
        match sys::prctl_capbset_drop(cap) {
            Ok(_) => {}
            Err(Errno(libc::EINVAL)) => break,
            Err(e) => return Err(e),
        }
    }
    match sys::prctl_cap_ambient_clear_all() {
        Ok(_) | Err(Errno(libc::EINVAL)) => {}
        Err(e) => return Err(e),
    }
    sys::capset(&[sys::CapUserData::default(); 2])
}

/// Rules for the file systems this child mounted itself (their inodes did not exist when
/// the parent built the ruleset). Paths are the sandbox's own mountpoints, after
/// `pivot_root`.
fn landlock_rules(rules: &[(std::ffi::CString, u64)], ruleset: BorrowedFd<'_>) -> R {
    for (path, bits) in rules {
        let fd = sys::openat(CWD, path, libc::O_PATH | libc::O_CLOEXEC, 0)?;
        let r = sys::landlock_add_rule_path_beneath(ruleset, fd.as_fd(), *bits);
        let _ = sys::close(fd);
        r?;
    }
    Ok(())
}

/// Unblocks signals (their handlers are the defaults by now) and tries each candidate
/// path, as `execvp` does: a missing file moves on, a permission error is remembered.
fn exec_program(exec: &Exec) -> Errno {
    if let Err(e) = sys::rt_sigprocmask(libc::SIG_SETMASK, &0, None) {
        return e;
    }
    let mut seen = Errno(libc::ENOENT);
    for candidate in &exec.program.candidates {
        // SAFETY: `argv` and `envp` are NULL-terminated arrays of pointers into `CString`s
        // owned by `exec`, which the parent keeps alive until this child has exec'd or
        // exited (the parent thread is suspended by CLONE_VFORK until then).
        let e = unsafe {
            sys::execve(
                candidate,
                exec.program.argv.as_ptr(),
                exec.program.envp.as_ptr(),
            )
        };
        match e.0 {
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE => {}
            libc::EACCES | libc::EPERM | libc::ENOEXEC => seen = e,
            _ => return e,
        }
    }
    seen
}

/// Execs the sandbox's init from its sealed memfd, after every wall is up (see
/// `super::init`, DESIGN). The report and status pipes must survive this one exec: the
/// init marks them close-on-exec again first thing. Signals stay blocked: the init
/// inherits the mask, so none can end it before it has its signalfd, and it unblocks them
/// only in the program's process.
fn exec_init(init: &super::init::Launch, exec: &Exec) -> Errno {
    for fd in [init.report_fd, init.status_fd] {
        // SAFETY: the parent keeps the init's report and status fds open in `init` until
        // this child has exec'd or exited, and `close_fds` keeps them.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Err(e) = sys::fcntl_setfd(fd, 0) {
            return e;
        }
    }
    // SAFETY: the sealed memfd is held open for the process's life (`init::image_fd`), and
    // `close_fds` keeps it.
    let image = unsafe { BorrowedFd::borrow_raw(init.image_fd) };
    // SAFETY: `init.argv` is a NULL-terminated array of pointers into `CString`s owned by
    // `init` and `exec.program`, and `envp` likewise into `exec.program`; the parent keeps
    // `exec` alive until this child has exec'd or exited (CLONE_VFORK).
    unsafe {
        sys::execveat(
            image,
            c"",
            init.argv.as_ptr(),
            exec.program.envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    }
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
