//! Idmapped read-only binds for root hosts.
//!
//! A program started by root runs as uid 0 inside, so the owner bits of every root-owned
//! file on the read-only roots would apply to it: `0600` TLS keys of other services,
//! `/etc/sudoers`, private directories. Walking the roots for such entries and masking each
//! costs some 10⁵ `stat`s per process. Instead, a root host binds each read-only root
//! through an *idmapped* mount whose mapping shows host uid and gid 0 as 65534 (every other
//! id is unmapped and shows as the overflow id): the program is then never the owner nor
//! in the group of anything there, and only the "others" bits apply, which is exactly the
//! rule the walk enforced, at the cost of one `open_tree` and one `mount_setattr` per root
//! and command.
//!
//! The mapping lives in a user namespace made once per process: a child is cloned into a
//! new user namespace (no exec, it only waits for its SIGKILL), its maps are written, its
//! namespace is kept as an fd, and it exits. Only the kernel can make an idmapped mount of a
//! host file system, and only for a caller with `CAP_SYS_ADMIN` in the initial user
//! namespace: the parent makes a fresh detached tree per command ([`tree`]) and the child
//! attaches it in its own mount namespace with `move_mount`.
//!
//! Everything here is parent-side code, before any `clone` of a sandbox.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The id every host id 0 is shown as inside an idmapped bind.
pub(crate) const SHOWN_AS: u32 = 65534;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The user namespace whose mapping idmapped binds use (host 0 → [`SHOWN_AS`]), made on
/// first use; `None` when this process cannot make it (not root, no user namespaces).
pub(crate) fn userns() -> Option<BorrowedFd<'static>> {
    static NS: OnceLock<Option<OwnedFd>> = OnceLock::new();
    NS.get_or_init(|| match make_userns() {
        Ok(fd) => Some(fd),
        Err(e) => {
            tracing::debug!("no idmapped binds: {e}");
            None
        }
    })
    .as_ref()
    .map(|fd| fd.as_fd())
}

/// Trees made by [`supported`] and not used yet, with when they were made: the first
/// command soon after takes them. (Closing a detached tree that was never attached
/// unmounts it, which waits for an RCU grace period: a millisecond or more per tree, so a
/// probe must not throw its tree away.) An older spare is not used: it would show the
/// mounts of its time.
static SPARE: OnceLock<Mutex<HashMap<PathBuf, (Instant, OwnedFd)>>> = OnceLock::new();

/// How long a spare tree is used.
const SPARE_FOR: Duration = Duration::from_secs(2);

/// Which roots took an idmapped tree, per process.
static SEEN: OnceLock<Mutex<HashMap<PathBuf, bool>>> = OnceLock::new();

/// Whether `root` can be bound idmapped here (tried once per root and process, again
/// after a tree of it could not be made; the tree made to find out is kept for the first
/// command).
pub(crate) fn supported(root: &Path) -> bool {
    let seen = SEEN.get_or_init(Mutex::default);
    if let Some(&ok) = seen.lock().unwrap_or_else(|e| e.into_inner()).get(root) {
        return ok;
    }
    let ok = match make_tree(root) {
        Ok(tree) => {
            SPARE
                .get_or_init(Mutex::default)
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(root.to_path_buf(), (Instant::now(), tree));
            true
        }
        Err(e) => {
            tracing::debug!("{} cannot be bound idmapped: {e}", root.display());
            false
        }
    };
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(root.to_path_buf(), ok);
    ok
}

/// A tree of `root` for one command: the spare one [`supported`] made if it is recent,
/// else a new one ([`make_tree`]). When none can be made (a file system that takes no
/// idmapped mount was mounted beneath `root` since), the next plan tries again and falls
/// back to the walk.
///
/// # Errors
///
/// As [`make_tree`].
pub(crate) fn tree(root: &Path) -> io::Result<OwnedFd> {
    let spare = SPARE
        .get()
        .and_then(|s| s.lock().unwrap_or_else(|e| e.into_inner()).remove(root));
    if let Some((made, tree)) = spare {
        if made.elapsed() < SPARE_FOR {
            return Ok(tree);
        }
    }
    make_tree(root).inspect_err(|_| {
        if let Some(seen) = SEEN.get() {
            seen.lock().unwrap_or_else(|e| e.into_inner()).remove(root);
        }
    })
}

/// A detached, recursive, read-only, `nosuid`, `nodev` copy of the mount tree at `root`,
/// idmapped so that host id 0 shows as [`SHOWN_AS`]; the child attaches it with
/// `move_mount`. `root` is opened without following symlinks.
///
/// # Errors
///
/// No user namespace for the mapping ([`userns`]), or the kernel's error: `EINVAL` when a
/// file system under `root` does not support idmapped mounts.
fn make_tree(root: &Path) -> io::Result<OwnedFd> {
    let ns = userns().ok_or_else(|| io::Error::from_raw_os_error(libc::EPERM))?;
    let path = CString::new(root.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // Opened without following any symlink on the way, as every bind source is: a
    // symlink planted in place of a component of a `read_only` path fails with ELOOP
    // instead of binding what it names.
    // SAFETY: `open_how` is plain integers, for which all zeroes is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    let dir = stockade_sys::linux::openat2(stockade_sys::linux::CWD, &path, &how)
        .map_err(|e| io::Error::from_raw_os_error(e.0))?;
    // SAFETY: `into_raw_fd` hands over the only owner of this open fd.
    let dir = unsafe { OwnedFd::from_raw_fd(dir.into_raw_fd()) };
    let flags = libc::OPEN_TREE_CLONE
        | libc::OPEN_TREE_CLOEXEC
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: open_tree reads the empty path (a static C string) and acts on `dir`, an fd
    // we own.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, dir.as_raw_fd(), c"".as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel has just returned this fd to us; nothing else owns it.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let attr = MountAttr {
        attr_set: libc::MOUNT_ATTR_IDMAP
            | libc::MOUNT_ATTR_RDONLY
            | libc::MOUNT_ATTR_NOSUID
            | libc::MOUNT_ATTR_NODEV,
        attr_clr: 0,
        propagation: 0,
        userns_fd: ns.as_raw_fd() as u64,
    };
    let at = (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint;
    // SAFETY: the kernel reads the empty path and `size_of::<MountAttr>()` bytes of `attr`,
    // both alive for the call; `userns_fd` names the open namespace fd `ns`, which lives as
    // long as the process.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            at,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(tree)
}

/// The mapping children once killed, until each is reaped ([`reap_holder`]): a pidfd of
/// it and the stack it ran on, which must not be freed before. (One per process, made at
/// the first [`userns`]; the tests make more.)
static HOLDERS: Mutex<Vec<(OwnedFd, Vec<u8>)>> = Mutex::new(Vec::new());

/// Makes the mapping's user namespace: clones a child into a new user namespace, writes
/// its maps from here, keeps an fd of its namespace and kills the child.
///
/// The child is not waited for here. Its death needs it to run once more, and on a busy
/// machine the scheduler may run it milliseconds later (a 48 ms wait for it was seen at
/// load 12, in a first `Sandbox::new` that otherwise took 0.5 ms). It is reaped later
/// through its pidfd ([`reap_holder`], from every spawn and wait, and blocking when the
/// last `Sandbox` is dropped); its stack is kept until then.
fn make_userns() -> io::Result<OwnedFd> {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    // The child shares this process's memory and fd table (no page tables to copy, which
    // for a large host would cost milliseconds) and runs `hold` on a stack of its own. No
    // exit signal: the host's SIGCHLD handling never sees it; it is reaped with
    // `__WCLONE`, through the pidfd `CLONE_PIDFD` makes.
    let mut stack = vec![0u8; 64 * 1024];
    let top = stack.as_mut_ptr_range().end.cast::<libc::c_void>();
    let flags = libc::CLONE_VM | libc::CLONE_FILES | libc::CLONE_NEWUSER | libc::CLONE_PIDFD;
    let mut pidfd: libc::c_int = -1;
    // Every signal blocked across the clone: the child inherits the mask, so no handler of
    // the host ever runs on its stack (only SIGKILL, which cannot be blocked, reaches it).
    let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `all` is a valid place for a sigset_t; sigfillset initializes it.
    unsafe { libc::sigfillset(all.as_mut_ptr()) };
    // SAFETY: `all` is initialized; `old` is a valid place the call initializes.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old.as_mut_ptr()) };
    // SAFETY: `top` is the end of a 64 KiB buffer that is freed only after the child has
    // been reaped (it moves to `HOLDERS` below, or is forgotten), and x86_64/aarch64 stacks
    // grow down from it. `hold` makes only errno-free raw system calls on its own stack,
    // touches no fd and ignores its (null) argument, with every signal but SIGKILL
    // blocked, so sharing memory and the fd table with every other thread of the host is
    // safe. With `CLONE_PIDFD` the kernel writes the pidfd to `pidfd`, a local that
    // outlives the call.
    let pid = unsafe {
        libc::clone(
            hold,
            top,
            flags,
            std::ptr::null_mut(),
            std::ptr::from_mut(&mut pidfd),
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: `old` was initialized by the pthread_sigmask call above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    if pid < 0 {
        return Err(clone_error);
    }
    // SAFETY: the kernel returned this pidfd to us through `CLONE_PIDFD` (-1 stays when it
    // did not); nothing else owns it.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    let result = (|| {
        let map = format!("0 {SHOWN_AS} 1\n");
        let proc = |name: &str| CString::new(format!("/proc/{pid}/{name}"));
        write_file(&proc("uid_map")?, map.as_bytes())?;
        write_file(&proc("setgroups")?, b"deny")?;
        write_file(&proc("gid_map")?, map.as_bytes())?;
        open(&proc("ns/user")?, libc::O_RDONLY, 0)
    })();
    // SAFETY: signals our own child, by the pid clone returned; it has not been reaped.
    let killed = unsafe { libc::kill(pid, libc::SIGKILL) } == 0;
    match pidfd.filter(|_| killed) {
        Some(pidfd) => HOLDERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((pidfd, stack)),
        // No pidfd (a kernel without CLONE_PIDFD would have refused the clone), or a child
        // that may live on: the stack can never be known free, so it is never freed, and
        // nothing waits for the child (it ends with this process, `PR_SET_PDEATHSIG`).
        None => std::mem::forget(stack),
    }
    result
}

/// `path` opened with `flags | O_CLOEXEC` (and `mode`, for `O_CREAT`), retried on `EINTR`
/// as std's `File::open` is. Through the raw `openat` of `stockade_sys`: musl's `open`
/// adds an `fcntl(F_SETFD)` after every `O_CLOEXEC` open (for kernels older than 2.6.23).
fn open(path: &std::ffi::CStr, flags: libc::c_int, mode: libc::c_uint) -> io::Result<OwnedFd> {
    use stockade_sys::linux as sys;
    loop {
        match sys::openat(sys::CWD, path, flags | libc::O_CLOEXEC, mode) {
            Ok(fd) => return Ok(fd.into()),
            Err(stockade_sys::Errno(libc::EINTR)) => {}
            Err(e) => return Err(io::Error::from_raw_os_error(e.0)),
        }
    }
}

/// `std::fs::write(path, bytes)` in its own calls: opened as `File::create` opens
/// (`O_WRONLY | O_CREAT | O_TRUNC`, mode 0666, close-on-exec; see [`open`]), then all of
/// `bytes` written as `write_all` writes them (again after `EINTR` or a short write; a
/// write of 0 bytes is `WriteZero`). The kernel takes an id map in one `write` or refuses
/// it.
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
    std::fs::File::from(open(path, flags, 0o666)?).write_all(bytes)
}

/// Reaps the mapping child that [`make_userns`] killed, if it has exited (with `block`,
/// once it has), and frees its stack. Nothing to do when there is none or it is reaped.
pub(crate) fn reap_holder(block: bool) {
    let mut holders = HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
    if holders.is_empty() {
        return;
    }
    let mut options = libc::WEXITED | libc::__WCLONE;
    if !block {
        options |= libc::WNOHANG;
    }
    holders.retain_mut(|(pidfd, stack)| {
        loop {
            match stockade_sys::linux::waitid_pidfd_rusage(pidfd.as_fd().into(), options) {
                Ok(None) => return true,
                // Reaped now, or (ECHILD) by someone else, a `waitpid(-1, __WALL)` of the
                // host's: either way it is gone and its stack free.
                Ok(Some(_)) | Err(stockade_sys::Errno(libc::ECHILD)) => return false,
                Err(stockade_sys::Errno(libc::EINTR)) => {}
                // Nothing else can be retried usefully; the stack is never freed.
                Err(_) => {
                    std::mem::forget(std::mem::take(stack));
                    return false;
                }
            }
        }
    });
}

/// The mapping child: ends with its parent (`PR_SET_PDEATHSIG`), else waits, with every
/// signal blocked, for the `SIGKILL` of its parent. Runs on its own stack in the parent's
/// memory (`CLONE_VM`): no allocation, no errno (the `sys` calls return the kernel's error
/// directly), and no fd (the table is shared: a number it held could be closed and reused
/// by the host at any time).
extern "C" fn hold(_: *mut libc::c_void) -> libc::c_int {
    let _ = stockade_sys::linux::prctl_set_pdeathsig(libc::SIGKILL);
    loop {
        let _ = stockade_sys::linux::wait_for_signal();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_hosts_idmapped_tree_shows_root_files_as_nobody() {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            assert!(userns().is_none());
            assert!(!supported(Path::new("/usr")));
            return;
        }
        // Root without user namespaces (a restricted container) has none; CI on this
        // kind of machine has them and says so with STOCKADE_TEST_REQUIRE.
        if userns().is_none() {
            let required = std::env::var("STOCKADE_TEST_REQUIRE").is_ok_and(|v| !v.is_empty());
            assert!(
                !required,
                "root without a user namespace for idmapped binds"
            );
            eprintln!(
                "SKIP a_root_hosts_idmapped_tree_shows_root_files_as_nobody: no user namespace"
            );
            return;
        }
        let t = tree(Path::new("/usr")).expect("an idmapped /usr");
        // SAFETY: `libc::stat` is plain integers, for which all zeroes is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstatat with an empty path on the tree fd we own writes one `stat` into
        // the local `st`.
        let r = unsafe { libc::fstatat(t.as_raw_fd(), c"".as_ptr(), &mut st, libc::AT_EMPTY_PATH) };
        assert_eq!(r, 0);
        assert_eq!((st.st_uid, st.st_gid), (SHOWN_AS, SHOWN_AS));
        assert!(supported(Path::new("/usr")));
    }

    #[test]
    fn the_mapping_child_is_not_waited_for_and_is_reaped_later() {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            let required = std::env::var("STOCKADE_TEST_REQUIRE")
                .is_ok_and(|v| v.split(',').any(|f| f.trim() == "root"));
            assert!(
                !required,
                "the_mapping_child_is_not_waited_for_and_is_reaped_later: needs root"
            );
            eprintln!("SKIP the_mapping_child_is_not_waited_for_and_is_reaped_later: not root");
            return;
        }
        let Ok(ns) = make_userns() else {
            let required = std::env::var("STOCKADE_TEST_REQUIRE").is_ok_and(|v| !v.is_empty());
            assert!(
                !required,
                "root without a user namespace for idmapped binds"
            );
            eprintln!(
                "SKIP the_mapping_child_is_not_waited_for_and_is_reaped_later: no user namespace"
            );
            return;
        };
        // Its pidfd, a second one: the child is listed, killed but not reaped yet.
        let pidfd = {
            let holders = HOLDERS.lock().unwrap();
            let (fd, _) = holders.last().expect("the killed child, kept to reap");
            fd.try_clone().unwrap()
        };
        drop(ns);
        let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
        // Not reaped by `make_userns`: still this process's child (running or a zombie).
        // SAFETY: as below; WNOWAIT leaves the child as it is.
        let r = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                info.as_mut_ptr(),
                libc::WEXITED | libc::__WCLONE | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
        reap_holder(true);
        // Reaped: no child is left behind the pidfd (unreaped, this waitid would reap it
        // and return 0).
        // SAFETY: waitid writes one siginfo_t into `info`, a local; the other arguments
        // are integers and our own open pidfd.
        let r = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                info.as_mut_ptr(),
                libc::WEXITED | libc::__WCLONE | libc::WNOHANG,
            )
        };
        assert_eq!(
            (r, std::io::Error::last_os_error().raw_os_error()),
            (-1, Some(libc::ECHILD))
        );
    }
}
