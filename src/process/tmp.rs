//! Layer 2's (and macOS's) private `TMPDIR`: one fresh directory per command, standing in
//! for the private `/tmp` the full layer mounts.
//!
//! The directory lives exactly as long as the program: [`Child`](super::Child) removes it
//! when it reaps the program. A `Child` dropped unreaped (std allows it) hands the
//! directory to a thread of its own that waits for the program's end without reaping it
//! (the pidfd on Linux, `waitid(WNOWAIT)` elsewhere) and removes it then, as the `.git`
//! layer does with its merge. If the host process exits first, that thread dies with it
//! and the directory stays behind (under the host's temporary directory, named
//! `stockade-tmp-*`): removing it earlier would pull it from under a program that still
//! writes there. On Linux the next host of the same user removes it (see below).
//!
//! # The sandbox's directory (a root host's layer 2)
//!
//! Where the plan splits its Landlock rules ([`crate::plan::SplitRules`]), the commands
//! share a layer that must grant, whole, a directory holding every command's `TMPDIR`
//! (each command's own layer narrows it). That directory is not the host's temporary
//! directory, beneath which a host may bind-mount a read-only root (Landlock follows
//! mounts: the root's private files would show), but one of the sandbox's own in it:
//! [`Parents`] makes it at the sandbox's first spawn, not at [`Sandbox::new`](crate::Sandbox::new)
//! (which writes nothing to the host, and whose policy may never run a command), as
//! `stockade-sandbox-*` with `mkdir` of a random name, mode `0700` (never through an entry
//! planted under that name: `mkdir` fails on any existing entry, a symlink included, and
//! another name is tried), and checks that it is a directory the caller owns that no one
//! else may enter. The sandbox and each [`PrivateTmp`] made in it hold it ([`Arc`]); the
//! last one to go removes it, after its `TMPDIR`, so a command that outlives its sandbox
//! keeps it. Before each command the sandbox checks that its path still names the inode
//! it made (a cleaner of old files may have removed it), else it makes a new one.
//!
//! # What a host that is gone left
//!
//! On Linux each of these directories is locked by the process that uses it, and the
//! first `TMPDIR` a process makes starts a sweep that removes the unlocked ones its user's
//! gone hosts left (`sweep`). Elsewhere a sandbox may outlive its host (no parent-death
//! signal), so nothing is swept there.

use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tempfile::TempDir;

use super::launch;
use crate::error::SpawnError;

#[cfg(target_os = "linux")]
mod sweep;

/// Elsewhere a sandbox may outlive its host, so no directory is swept, and none is locked.
#[cfg(not(target_os = "linux"))]
mod sweep {
    #[derive(Debug)]
    pub(super) struct Hold;

    impl Hold {
        pub(super) fn keep(self) {}
    }

    pub(super) enum Claim {
        Held(Hold),
        #[allow(dead_code)]
        Lost,
        #[allow(dead_code)]
        Failed(std::io::Error),
    }

    pub(super) fn claim(_: &std::path::Path) -> Claim {
        Claim::Held(Hold)
    }

    pub(super) fn start(_: &std::path::Path) {}
}

use sweep::{Claim, Hold};

/// How many fresh names a maker tries when sweeps of other processes take the ones it
/// made (`sweep`'s window between `mkdir` and the lock: one in a million would be many).
const ATTEMPTS: usize = 8;

/// A command's private temporary directory and, when the plan needs one, the sandbox's
/// directory it lies in ([`Parents`]). Dropped, it removes the tree, then lets go of the
/// sandbox's directory.
#[derive(Debug)]
pub(super) struct PrivateTmp {
    // Declared first: dropped (and removed) before its lock and the parent let go.
    dir: TempDir,
    hold: Hold,
    parent: Option<Arc<Parent>>,
}

impl PrivateTmp {
    /// The `TMPDIR`.
    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The sandbox's directory that holds it, when the plan needs one.
    pub(super) fn parent(&self) -> Option<&Path> {
        self.parent.as_deref().map(Parent::path)
    }
}

/// The sandbox's own directory for its commands' `TMPDIR`s: removed when the last holder
/// lets go, if its path still names it (see the module docs).
#[derive(Debug)]
pub(super) struct Parent {
    path: PathBuf,
    /// `(st_dev, st_ino)` when it was made.
    id: (u64, u64),
    /// Its lock: a field, so dropped after `Drop::drop` has removed it.
    #[allow(dead_code)]
    hold: Hold,
}

impl Parent {
    /// Makes the directory in `root`.
    fn create(root: &Path) -> Result<Parent, SpawnError> {
        let os = |source| SpawnError::Os {
            call: "create the sandbox's directory for its commands' TMPDIRs",
            source,
        };
        let mut claimed = None;
        for _ in 0..ATTEMPTS {
            let path = tempfile::Builder::new()
                .prefix("stockade-sandbox-")
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir_in(root)
                .map_err(|e| SpawnError::Path {
                    what: "create the sandbox's directory for its commands' TMPDIRs in",
                    path: root.to_path_buf(),
                    errno: errno_in(&e, root),
                    note: None,
                })?
                .keep();
            match sweep::claim(&path) {
                Claim::Held(hold) => {
                    claimed = Some((path, hold));
                    break;
                }
                // The sweep that took it removes it.
                Claim::Lost => {}
                Claim::Failed(e) => {
                    let _ = std::fs::remove_dir(&path);
                    return Err(os(e));
                }
            }
        }
        let (path, hold) = claimed.ok_or_else(|| os(taken()))?;
        let md = std::fs::symlink_metadata(&path).map_err(os)?;
        let parent = Parent {
            path,
            id: (md.dev(), md.ino()),
            hold,
        };
        // `mkdir` made it (no planted entry): it is ours. Anything else, and it is left
        // alone (the drop checks the inode again, which is still this one).
        let euid = nix::unistd::geteuid().as_raw();
        if !md.is_dir() || md.uid() != euid || md.mode() & 0o077 != 0 {
            return Err(os(std::io::Error::other(format!(
                "{} is not a private directory of uid {euid} after mkdir",
                parent.path.display()
            ))));
        }
        Ok(parent)
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Its path still names the directory made (not removed, not replaced).
    fn is_current(&self) -> bool {
        std::fs::symlink_metadata(&self.path)
            .is_ok_and(|md| md.is_dir() && (md.dev(), md.ino()) == self.id)
    }
}

impl Drop for Parent {
    fn drop(&mut self) {
        if !self.is_current() {
            return;
        }
        // Only when empty: what is left in it is a `TMPDIR` left on purpose (a program
        // whose end could not be watched), which a warning named already.
        if let Err(e) = std::fs::remove_dir(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e, "stockade: the sandbox's directory for its commands' TMPDIRs is left in place");
            }
        }
    }
}

/// Where a sandbox makes its commands' `TMPDIR`s when its plan needs a directory of the
/// sandbox's own ([`crate::plan::Plan::private_tmp_root`]): made at the first command,
/// kept while it is current.
#[derive(Debug)]
pub(super) struct Parents {
    /// The host's temporary directory (canonical) as the plan found it.
    root: PathBuf,
    current: Mutex<Option<Arc<Parent>>>,
}

impl Parents {
    pub(super) fn new(root: &Path) -> Parents {
        Parents {
            root: root.to_path_buf(),
            current: Mutex::new(None),
        }
    }

    /// The sandbox's directory, made now when there is none or its path no longer names
    /// it.
    fn get(&self) -> Result<Arc<Parent>, SpawnError> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(parent) = current.as_ref().filter(|p| p.is_current()) {
            return Ok(Arc::clone(parent));
        }
        let parent = Arc::new(Parent::create(&self.root)?);
        *current = Some(Arc::clone(&parent));
        Ok(parent)
    }
}

/// Creates the command's private temporary directory in the sandbox's own directory made
/// by `parents`, when the plan needs one, else in the host's temporary directory, and
/// points `TMPDIR` in `env` at it.
pub(super) fn create(
    env: &mut Vec<(OsString, OsString)>,
    parents: Option<&Parents>,
) -> Result<PrivateTmp, SpawnError> {
    let parent = parents.map(Parents::get).transpose()?;
    // Not `tempdir()`: `std::env::temp_dir` is `/tmp` without `$TMPDIR`, which a minimal
    // image may lack. The plan's view of the host finds the same directory.
    let host_tmp = match parents {
        Some(parents) => parents.root.clone(),
        None => crate::plan::HostFs::temp_dir(&crate::plan::RealFs),
    };
    sweep::start(&host_tmp);
    let root = match &parent {
        Some(parent) => parent.path().to_path_buf(),
        None => host_tmp,
    };
    let mut builder = tempfile::Builder::new();
    // 0700: tempfile's default follows the umask (0755), which would let every user of
    // the host list and read what the program leaves in its temporary files.
    builder
        .prefix("stockade-tmp-")
        .permissions(std::fs::Permissions::from_mode(0o700));
    let mut claimed = None;
    for _ in 0..ATTEMPTS {
        let dir = builder.tempdir_in(&root).map_err(|e| SpawnError::Path {
            what: "create the private tmp dir in",
            errno: errno_in(&e, &root),
            path: root.clone(),
            note: None,
        })?;
        match sweep::claim(dir.path()) {
            Claim::Held(hold) => {
                claimed = Some((dir, hold));
                break;
            }
            // The sweep that took it removes it.
            Claim::Lost => drop(dir.keep()),
            // `TempDir`'s drop removes it (empty).
            Claim::Failed(source) => {
                return Err(SpawnError::Os {
                    call: "lock the private tmp dir",
                    source,
                });
            }
        }
    }
    let (dir, hold) = claimed.ok_or_else(|| SpawnError::Os {
        call: "create the private tmp dir",
        source: taken(),
    })?;
    env.retain(|(k, _)| k != "TMPDIR");
    env.push(("TMPDIR".into(), dir.path().as_os_str().to_owned()));
    Ok(PrivateTmp { dir, hold, parent })
}

/// Every name made was taken by other processes' sweeps.
fn taken() -> std::io::Error {
    std::io::Error::other(format!(
        "{ATTEMPTS} directories made in a row were taken by sweeps of other processes"
    ))
}

/// The errno of `tempfile`'s failure to make a directory in `dir`. Its error wraps the
/// OS error with the path and keeps only its kind, so the errno comes from `access(2)` on
/// `dir` (`ENOENT`, `ENOTDIR`, `EACCES`, `EROFS`: the usual causes), else from the kind.
fn errno_in(e: &std::io::Error, dir: &Path) -> crate::error::Errno {
    use crate::error::Errno;
    use nix::unistd::AccessFlags;
    if let Some(errno) = e.raw_os_error() {
        return Errno::from_raw(errno);
    }
    match nix::unistd::access(dir, AccessFlags::W_OK | AccessFlags::X_OK) {
        Err(errno) => errno,
        Ok(()) => match e.kind() {
            std::io::ErrorKind::AlreadyExists => Errno::EEXIST,
            std::io::ErrorKind::StorageFull => Errno::ENOSPC,
            _ => Errno::EIO,
        },
    }
}

/// Removes `tmp` now: with one `rmdir` when the program left it empty (the common case,
/// a third of the cost of walking it), else with everything in it (`rmtree`); then lets go
/// of its lock and of the sandbox's directory (which the last holder removes).
// Elsewhere `Hold` holds nothing, so dropping it does nothing.
#[cfg_attr(not(target_os = "linux"), allow(clippy::drop_non_drop))]
pub(super) fn remove(tmp: PrivateTmp) {
    let PrivateTmp { dir, hold, parent } = tmp;
    // `TempDir` must not remove a directory made under that name since.
    let path = dir.keep();
    if std::fs::remove_dir(&path).is_err() {
        // What the program left: removed without recursion (a deep chain of directories
        // would overflow the stack of `remove_dir_all`, `TempDir`'s drop).
        if let Err(e) = super::rmtree::remove_tree(&path) {
            tracing::warn!(path = %path.display(), error = %e, "stockade: a command's private tmp dir is left in place");
        }
    }
    // Its lock only once it is gone.
    drop(hold);
    drop(parent);
}

/// Removes `dir` once the unreaped program `pid` (whose launcher handle is `handle`) has
/// ended, from a thread of its own. When no thread can be started, or the end cannot be
/// watched, the directory is left in place (and so is the sandbox's directory holding
/// it): a stray directory is better than a program whose files vanish.
pub(super) fn remove_after_exit(dir: PrivateTmp, pid: libc::pid_t, handle: &launch::Handle) {
    if let Err(dir) = after_exit(pid, handle, "stockade-tmp-remove", dir, |dir, gone| {
        if gone {
            remove(dir);
        } else {
            leave(dir, "cannot wait for the program's end");
        }
    }) {
        leave(dir, "cannot watch for the program's end");
    }
}

/// Hands `value` to `f` on a thread of its own once the sandbox whose first process is
/// `pid` (with `handle`) has exited, with whether the wait succeeded; `Err(value)` back
/// when no thread or no watch could be made.
pub(super) fn after_exit<T: Send + 'static>(
    pid: libc::pid_t,
    handle: &launch::Handle,
    name: &str,
    value: T,
    f: impl FnOnce(T, bool) + Send + 'static,
) -> Result<(), T> {
    let Some(watch) = exit_watch(pid, handle) else {
        return Err(value);
    };
    let (tx, rx) = std::sync::mpsc::channel::<T>();
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let Ok(value) = rx.recv() else { return };
            let gone = watch.wait();
            f(value, gone);
        });
    match spawned {
        // The thread owns the value from here; it cannot fail to receive it.
        Ok(_) => {
            let _ = tx.send(value);
            Ok(())
        }
        Err(e) => {
            tracing::warn!(error = %e, "stockade: no thread to wait for the sandbox's end");
            Err(value)
        }
    }
}

/// Keeps `tmp` on the host, with a warning that names it.
fn leave(tmp: PrivateTmp, why: &str) {
    let PrivateTmp { dir, hold, parent } = tmp;
    let path = dir.keep();
    // Its program may still use it: locked until this process exits (then the program,
    // which dies with it on Linux, is gone, and a sweep may take it).
    hold.keep();
    // Not empty now: it stays (its drop says so).
    drop(parent);
    tracing::warn!(path = %path.display(), why, "stockade: a dropped command's private tmp dir is left in place");
}

/// A way to wait for a program's end without reaping it: a duplicate of its pidfd.
#[cfg(target_os = "linux")]
struct ExitWatch(std::os::fd::OwnedFd);

#[cfg(target_os = "linux")]
fn exit_watch(_pid: libc::pid_t, handle: &launch::Handle) -> Option<ExitWatch> {
    std::os::fd::AsFd::as_fd(handle)
        .try_clone_to_owned()
        .ok()
        .map(ExitWatch)
}

#[cfg(target_os = "linux")]
impl ExitWatch {
    /// Returns once the sandbox's first process (its init) has exited. The init ends
    /// every descendant of the program before it exits, so nothing uses the directory
    /// after this.
    fn wait(&self) -> bool {
        crate::backend::linux::init::wait_exited(std::os::fd::AsFd::as_fd(&self.0))
    }
}

/// A way to wait for a program's end without reaping it: its pid, which stays ours (and
/// cannot be reused) until someone reaps it.
#[cfg(not(target_os = "linux"))]
struct ExitWatch(libc::pid_t);

#[cfg(not(target_os = "linux"))]
fn exit_watch(pid: libc::pid_t, _handle: &launch::Handle) -> Option<ExitWatch> {
    Some(ExitWatch(pid))
}

#[cfg(not(target_os = "linux"))]
impl ExitWatch {
    /// Returns once the program has exited (left a zombie for its reaper), or once
    /// someone else has reaped it (`ECHILD`): either way it has ended.
    fn wait(&self) -> bool {
        loop {
            // SAFETY: all-zero is a valid `siginfo_t` (plain integers and pointers the
            // kernel fills in).
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `info` is a valid out-pointer for the duration of the call; WNOWAIT
            // leaves the child unreaped, so its pid stays valid for its owner.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    self.0 as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return true;
            }
        }
    }
}
