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
//! writes there.

use std::ffi::OsString;
use std::path::Path;

use tempfile::TempDir;

use super::launch;
use crate::error::SpawnError;

/// Creates the command's private temporary directory in `root` (the plan's, when its
/// Landlock layers depend on where it is: [`crate::plan::Plan::private_tmp_root`]) or else
/// in the host's temporary directory, and points `TMPDIR` in `env` at it.
pub(super) fn create(
    env: &mut Vec<(OsString, OsString)>,
    root: Option<&Path>,
) -> Result<TempDir, SpawnError> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("stockade-tmp-");
    let dir = match root {
        Some(root) => builder.tempdir_in(root),
        None => builder.tempdir(),
    }
    .map_err(|source| SpawnError::Os {
        call: "create the private tmp dir",
        source,
    })?;
    env.retain(|(k, _)| k != "TMPDIR");
    env.push(("TMPDIR".into(), dir.path().as_os_str().to_owned()));
    Ok(dir)
}

/// Removes `dir` now: with one `rmdir` when the program left it empty (the common case,
/// a third of the cost of walking it), else with everything in it.
pub(super) fn remove(dir: TempDir) {
    if std::fs::remove_dir(dir.path()).is_ok() {
        // Gone: `TempDir` must not remove a directory made under that name since.
        let _ = dir.keep();
    }
    // Else `TempDir`'s drop removes the tree.
}

/// Removes `dir` once the unreaped program `pid` (whose launcher handle is `handle`) has
/// ended, from a thread of its own. When no thread can be started, or the end cannot be
/// watched, the directory is left in place: a stray directory is better than a program
/// whose files vanish.
pub(super) fn remove_after_exit(dir: TempDir, pid: libc::pid_t, handle: &launch::Handle) {
    let Some(watch) = exit_watch(pid, handle) else {
        leave(dir, "cannot watch for the program's end");
        return;
    };
    let (tx, rx) = std::sync::mpsc::channel::<TempDir>();
    let spawned = std::thread::Builder::new()
        .name("stockade-tmp-remove".into())
        .spawn(move || {
            let Ok(dir) = rx.recv() else { return };
            watch.wait();
            remove(dir);
        });
    match spawned {
        Ok(_) => {
            // The thread owns the directory from here; it cannot fail to receive it.
            let _ = tx.send(dir);
        }
        Err(e) => leave(dir, &e.to_string()),
    }
}

/// Keeps `dir` on the host, with a warning that names it.
fn leave(dir: TempDir, why: &str) {
    let path = dir.keep();
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
    fn wait(&self) {
        super::gitlayer::merge::wait_for_exit(&self.0);
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
    fn wait(&self) {
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
                return;
            }
        }
    }
}
