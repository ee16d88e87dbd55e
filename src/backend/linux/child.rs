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
//! nothing. A failing operation writes one fixed-size record ([`super::report`]) naming
//! its index and errno, and the child exits.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::{CStr, c_int, c_uint, c_ulong};

use stockade_sys::Errno;
use stockade_sys::linux as sys;

use super::prepare::{Exec, Layout, Op};
use super::report::Record;

/// Exit status of a child whose setup failed (the parent reads the record, not this).
pub const SETUP_FAILED: c_int = 125;

type R = Result<(), Errno>;

/// Index of the per-command steps after the layout's own steps.
pub mod extra {
    /// Moving stdio into place.
    pub const STDIO: u32 = 0;
    /// Closing inherited fds.
    pub const CLOSE_FDS: u32 = 1;
    /// Changing to the working directory.
    pub const CHDIR: u32 = 2;
    /// Running the program.
    pub const EXEC: u32 = 3;
}

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
    if let Some(cwd) = &exec.cwd {
        if let Err(e) = sys::chdir(cwd) {
            fail(exec, base + extra::CHDIR, e);
        }
    }
    let e = exec_program(exec);
    fail(exec, base + extra::EXEC, e)
}

/// Reports `step` failing with `errno` and exits.
fn fail(exec: &Exec, step: u32, errno: Errno) -> ! {
    let record = Record::new(step, errno.0).to_bytes();
    // One write of 16 bytes to a pipe is atomic; if it fails the parent sees EOF with a
    // dead child and reports a protocol error, which is still not a silent success.
    let _ = sys::write(exec.report.0, &record);
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
        } => {
            make_dirs(mkdirs)?;
            if !*dir {
                create_file(dst)?;
            }
            bind_tree(libc::AT_FDCWD, src, libc::AT_FDCWD, dst, *ro)
        }
        Op::BindBeneath { path, ro } => {
            let fd = open_no_symlinks(path, libc::O_PATH)?;
            let r = bind_tree(fd, c"", fd, c"", *ro);
            let _ = sys::close(fd);
            r
        }
        Op::Symlink {
            target,
            link,
            mkdirs,
        } => {
            make_dirs(mkdirs)?;
            sys::symlinkat(target, libc::AT_FDCWD, link)
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
        Op::Dev { nodes } => dev(nodes),
        Op::Proc { fallback } => proc(*fallback),
        Op::MaskDir {
            path,
            beneath,
            identity,
        } => mask_dir(path, *beneath, *identity),
        Op::MaskFile { path } => bind_tree(
            libc::AT_FDCWD,
            c"/oldroot/dev/null",
            libc::AT_FDCWD,
            path,
            true,
        ),
        Op::Pin { path } => {
            let fd = open_no_symlinks(path, libc::O_PATH | libc::O_DIRECTORY)?;
            let r = bind_tree(fd, c"", fd, c"", false);
            let _ = sys::close(fd);
            r
        }
        Op::HideName { path } => hide_name(path),
        Op::GuardName { path } => bind_if_present(path, libc::O_PATH, true),
        Op::GuardPin { path } => bind_if_present(path, libc::O_PATH | libc::O_DIRECTORY, false),
        Op::PivotRoot => pivot_root(),
        Op::RootReadOnly => set_attr(libc::AT_FDCWD, c"/", 0, libc::MOUNT_ATTR_RDONLY),
        Op::LoopbackUp => loopback_up(),
        Op::NewSession => sys::setsid().map(drop),
        Op::NewKeyring => match sys::keyctl(libc::KEYCTL_JOIN_SESSION_KEYRING as c_int, 0, 0, 0, 0)
        {
            // A kernel without keys has no host keys to hide.
            Ok(_) | Err(Errno(libc::ENOSYS)) => Ok(()),
            Err(e) => Err(e),
        },
        Op::DropCapabilities { last_cap } => drop_capabilities(*last_cap),
        Op::NoNewPrivs => sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).map(drop),
        Op::LandlockRules => match &layout.walls {
            Some(w) => landlock_rules(&w.child_rules, exec.landlock_fd),
            None => Err(Errno(libc::EINVAL)),
        },
        // Needs no_new_privs (set by the step before) and takes effect at once, for this
        // process and everything it execs.
        Op::Landlock => sys::landlock_restrict_self(exec.landlock_fd, 0),
        // The kernel copies the program during the call (`seccomp_prepare_user_filter`), so
        // the parent's buffer only has to outlive it, which CLONE_VFORK guarantees.
        Op::Seccomp => match &layout.walls {
            Some(w) => sys::seccomp_set_mode_filter(0, &w.filter.as_fprog()).map(drop),
            None => Err(Errno(libc::EINVAL)),
        },
        Op::Exit => sys::exit_group(0),
    }
}

/// Dup the prepared stdio fds onto 0, 1 and 2. The parent made sure that no source fd is
/// itself 0, 1 or 2 unless it is already in place.
fn stdio(exec: &Exec) -> R {
    for (target, &src) in (0..).zip(&exec.stdio) {
        if src == target {
            // Already in place: only clear close-on-exec.
            sys::fcntl(src, libc::F_SETFD, 0)?;
        } else if src >= 0 {
            sys::dup3(src, target, 0)?;
        }
    }
    for &fd in &exec.pass {
        sys::fcntl(fd, libc::F_SETFD, 0)?;
    }
    Ok(())
}

/// Close every fd from 3 up, except the ones in `exec.keep` (sorted).
fn close_fds(exec: &Exec) -> R {
    let mut first: c_uint = 3;
    for &keep in &exec.keep {
        let keep = keep as c_uint;
        if keep > first {
            sys::close_range(first, keep - 1, 0)?;
        }
        if keep >= first {
            first = keep + 1;
        }
    }
    sys::close_range(first, c_uint::MAX, 0)
}

/// `PR_SET_PDEATHSIG` follows the parent *thread*; stockade clones from a thread that lives
/// as long as the host process (see `spawn`). The check after arming closes the window in
/// which the host died before the signal was armed: in a new PID namespace `getppid()` is
/// always 0, so instead the report pipe tells, since its read end lives only in the host
/// (the child closed its copy in `close_fds`). A pipe whose readers are all gone polls
/// `POLLERR` on its write end.
fn die_with_parent(exec: &Exec) -> R {
    sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as c_ulong, 0, 0, 0)?;
    let mut fds = [libc::pollfd {
        fd: exec.report.0,
        events: 0,
        revents: 0,
    }];
    sys::poll_now(&mut fds)?;
    let [fd] = fds;
    if fd.revents & libc::POLLERR != 0 {
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
    let fd = sys::openat(libc::AT_FDCWD, path, libc::O_WRONLY | libc::O_CLOEXEC, 0)?;
    let r = sys::write(fd, data);
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

/// A tmpfs on `/tmp` becomes the root, the host's root moves to `/oldroot`, and a second
/// tmpfs at `/newroot` receives the sandbox's tree. Sources stay reachable under
/// `/oldroot` with their host paths, even the ones below the host's `/tmp`, until
/// [`pivot_root`] detaches it all.
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
    sys::mkdirat(libc::AT_FDCWD, c"newroot", 0o755)?;
    sys::mkdirat(libc::AT_FDCWD, c"oldroot", 0o755)?;
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
        match sys::mkdirat(libc::AT_FDCWD, d, 0o755) {
            Ok(()) | Err(Errno(libc::EEXIST)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn create_file(path: &CStr) -> R {
    let flags = libc::O_RDONLY | libc::O_CREAT | libc::O_CLOEXEC | libc::O_NOCTTY;
    let fd = sys::openat(libc::AT_FDCWD, path, flags, 0o644)?;
    sys::close(fd)
}

/// Opens a path under `/newroot` without following any symlink, so that a link planted in
/// a writable root cannot redirect a mount.
fn open_no_symlinks(path: &CStr, flags: c_int) -> Result<c_int, Errno> {
    let how = sys::open_how(
        (flags | libc::O_CLOEXEC) as u64,
        0,
        libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    );
    sys::openat2(libc::AT_FDCWD, path, &how)
}

fn set_attr(dirfd: c_int, path: &CStr, flags: c_uint, attr_set: u64) -> R {
    let attr = sys::mount_attr {
        attr_set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    sys::mount_setattr(dirfd, path, flags, &attr)
}

/// Bind `src` onto `dst` through a detached copy: the copy is made read-only (and nosuid,
/// nodev), recursively, before it is attached, so the mount is never visible writable.
/// Setting flags never clears the ones the source mount has locked (nosuid, noexec, …).
/// An empty path with a real dirfd names the fd itself (`AT_EMPTY_PATH`).
fn bind_tree(src_fd: c_int, src: &CStr, dst_fd: c_int, dst: &CStr, ro: bool) -> R {
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
    let mut r = set_attr(tree, c"", setattr_flags, attr);
    if r.is_ok() {
        let mut mflags = libc::MOVE_MOUNT_F_EMPTY_PATH;
        if dst.is_empty() {
            mflags |= libc::MOVE_MOUNT_T_EMPTY_PATH;
        }
        r = sys::move_mount(tree, c"", dst_fd, dst, mflags);
    }
    let _ = sys::close(tree);
    r
}

/// tmpfs, the device nodes bound from the host, a private devpts with its ptmx, shm, and
/// the fd links.
fn dev(nodes: &[(std::ffi::CString, std::ffi::CString)]) -> R {
    match sys::mkdirat(libc::AT_FDCWD, c"/newroot/dev", 0o755) {
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
    sys::mkdirat(libc::AT_FDCWD, c"/newroot/dev/pts", 0o755)?;
    sys::mount(
        Some(c"devpts"),
        c"/newroot/dev/pts",
        Some(c"devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(c"newinstance,ptmxmode=0666,mode=620"),
    )?;
    sys::symlinkat(c"pts/ptmx", libc::AT_FDCWD, c"/newroot/dev/ptmx")?;
    sys::mkdirat(libc::AT_FDCWD, c"/newroot/dev/shm", 0o755)?;
    sys::mount(
        Some(c"tmpfs"),
        c"/newroot/dev/shm",
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(c"mode=1777"),
    )?;
    sys::symlinkat(c"/proc/self/fd", libc::AT_FDCWD, c"/newroot/dev/fd")?;
    sys::symlinkat(c"/proc/self/fd/0", libc::AT_FDCWD, c"/newroot/dev/stdin")?;
    sys::symlinkat(c"/proc/self/fd/1", libc::AT_FDCWD, c"/newroot/dev/stdout")?;
    sys::symlinkat(c"/proc/self/fd/2", libc::AT_FDCWD, c"/newroot/dev/stderr")
}

/// A procfs of the new PID namespace; the kernel knobs under it read-only.
fn proc(fallback: bool) -> R {
    match sys::mkdirat(libc::AT_FDCWD, c"/newroot/proc", 0o555) {
        Ok(()) | Err(Errno(libc::EEXIST)) => {}
        Err(e) => return Err(e),
    }
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    match sys::mount(Some(c"proc"), c"/newroot/proc", Some(c"proc"), flags, None) {
        Ok(()) => {}
        Err(_) if fallback => {
            return bind_tree(
                libc::AT_FDCWD,
                c"/oldroot/proc",
                libc::AT_FDCWD,
                c"/newroot/proc",
                true,
            );
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
        match bind_tree(libc::AT_FDCWD, sub, libc::AT_FDCWD, sub, true) {
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
    let r = mask_fd(target, identity);
    let _ = sys::close(target);
    r
}

fn mask_fd(target: c_int, identity: Option<(u64, u64)>) -> R {
    if let Some((dev, ino)) = identity {
        // SAFETY: `libc::stat` is plain old data; all-zero bytes are a valid value.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        sys::fstat(target, &mut st)?;
        if st.st_dev != dev || st.st_ino != ino {
            return Err(Errno(libc::ESTALE));
        }
    }
    let fs = sys::fsopen(c"tmpfs", libc::FSOPEN_CLOEXEC)?;
    let r = mask_fs(fs, target);
    let _ = sys::close(fs);
    r
}

fn mask_fs(fs: c_int, target: c_int) -> R {
    sys::fsconfig_set_string(fs, c"mode", c"000")?;
    sys::fsconfig_set_string(fs, c"size", c"4k")?;
    sys::fsconfig_create(fs)?;
    let attrs = libc::MOUNT_ATTR_RDONLY
        | libc::MOUNT_ATTR_NOSUID
        | libc::MOUNT_ATTR_NODEV
        | libc::MOUNT_ATTR_NOEXEC;
    let mnt = sys::fsmount(fs, libc::FSMOUNT_CLOEXEC, attrs as c_uint)?;
    let flags = libc::MOVE_MOUNT_F_EMPTY_PATH | libc::MOVE_MOUNT_T_EMPTY_PATH;
    let r = sys::move_mount(mnt, c"", target, c"", flags);
    let _ = sys::close(mnt);
    r
}

/// Hides a name at the top of a writable root (see `Step::HideName`).
fn hide_name(path: &CStr) -> R {
    let fd = match open_no_symlinks(path, libc::O_PATH) {
        Ok(fd) => fd,
        // A symlink: what it names lives elsewhere, under that path's own rules.
        Err(Errno(libc::ELOOP)) => return Ok(()),
        Err(Errno(libc::ENOENT)) => {
            // O_EXCL | O_NOFOLLOW: a name that appears meanwhile is not followed.
            let flags =
                libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_WRONLY | libc::O_CLOEXEC;
            match sys::openat(libc::AT_FDCWD, path, flags, 0) {
                Ok(created) => {
                    let _ = sys::close(created);
                }
                // Created meanwhile (by a concurrent spawn of the same sandbox, say): hide
                // whatever is there now, as for a name that existed from the start.
                Err(Errno(libc::EEXIST)) => {}
                Err(e) => return Err(e),
            }
            match open_no_symlinks(path, libc::O_PATH) {
                Ok(fd) => fd,
                Err(Errno(libc::ELOOP)) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let r = hide_fd(fd);
    let _ = sys::close(fd);
    r
}

fn hide_fd(fd: c_int) -> R {
    // SAFETY: `libc::stat` is plain old data; all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    sys::fstat(fd, &mut st)?;
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        mask_fd(fd, None)
    } else {
        // The host's /dev/null on a nodev mount: every open fails with EACCES.
        bind_tree(libc::AT_FDCWD, c"/oldroot/dev/null", fd, c"", true)
    }
}

/// Binds `path` onto itself (read-only when `ro`) when it exists, opened without symlinks:
/// the guard steps, which protect names that a workspace may or may not have.
fn bind_if_present(path: &CStr, flags: c_int, ro: bool) -> R {
    let fd = match open_no_symlinks(path, flags) {
        Ok(fd) => fd,
        Err(Errno(libc::ENOENT)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let r = bind_tree(fd, c"", fd, c"", ro);
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
    let mut r = sys::ioctl_ifreq(fd, sys::SIOCGIFFLAGS, &mut ifr);
    if r.is_ok() {
        ifr.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as i16;
        r = sys::ioctl_ifreq(fd, sys::SIOCSIFFLAGS, &mut ifr);
    }
    let _ = sys::close(fd);
    r
}

/// Empties every capability set. The bounding set goes first (dropping from it needs
/// `CAP_SETPCAP`, which `capset` then removes), so an `execve` of a file with file
/// capabilities, or as uid 0, cannot bring any back.
fn drop_capabilities(last_cap: u32) -> R {
    for cap in 0..=last_cap {
        match sys::prctl(libc::PR_CAPBSET_DROP, cap as c_ulong, 0, 0, 0) {
            Ok(_) => {}
            Err(Errno(libc::EINVAL)) => break,
            Err(e) => return Err(e),
        }
    }
    match sys::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as c_ulong,
        0,
        0,
        0,
    ) {
        Ok(_) | Err(Errno(libc::EINVAL)) => {}
        Err(e) => return Err(e),
    }
    let header = sys::CapUserHeader {
        version: sys::LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    sys::capset(&header, &[sys::CapUserData::default(); 2])
}

/// Rules for the file systems this child mounted itself (their inodes did not exist when
/// the parent built the ruleset). Paths are the sandbox's own mountpoints, after
/// `pivot_root`.
fn landlock_rules(rules: &[(std::ffi::CString, u64)], ruleset: c_int) -> R {
    for (path, bits) in rules {
        let fd = sys::openat(libc::AT_FDCWD, path, libc::O_PATH | libc::O_CLOEXEC, 0)?;
        let attr = sys::LandlockPathBeneathAttr {
            allowed_access: *bits,
            parent_fd: fd,
        };
        let r = sys::landlock_add_rule_path_beneath(ruleset, &attr);
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
