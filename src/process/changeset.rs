//! The host's side of `workspace_mode = "overlay"` at each spawn: the change set's
//! directory made (or checked) before the child mounts it (see
//! [`Step::Overlay`](crate::plan::Step::Overlay)).
//!
//! `<changes_dir>` (mode 0700, the caller's, never a symlink) holds `upper/` and `work/`
//! (the overlay's) and `stockade-changes.json`, written atomically by the first run:
//! `{"version":1,"workspace":"/canonical/ws","mode":"overlay","started_ns":N}`, `N` the
//! first run's start in `CLOCK_REALTIME` nanoseconds. A later run checks the version and
//! the workspace, and sees the earlier runs' writes through the same `upper/`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::{Conflict, Errno, Error, PlanError};
use crate::plan::{Plan, Step};

/// The marker's name in a change set.
pub(crate) const MARKER: &str = "stockade-changes.json";
/// The change set format this code writes.
pub(crate) const VERSION: u64 = 1;

/// Makes or checks the change set of `plan`'s [`Step::Overlay`] or [`Step::Snapshot`],
/// when it has one; for a snapshot, makes it at the first run and returns what writes
/// the difference into `upper/` after the run.
///
/// # Errors
///
/// [`PlanError::Path`] (key `changes_dir`) when the directory cannot be made, is a
/// symlink, not a directory, or not the caller's; [`Conflict::NotThisChangeSet`] when it
/// holds another workspace's change set or another format;
/// [`Conflict::SnapshotTooLarge`] for a workspace larger than `snapshot_max`.
pub(crate) fn prepare(plan: &Plan) -> Result<Option<Run>, Error> {
    for step in &plan.steps {
        match step {
            Step::Overlay { path, changes } => {
                let lock = ready(path, changes, "overlay")?;
                return Ok(Some(Run { lock, after: None }));
            }
            Step::Snapshot {
                workspace,
                changes,
                max,
                skip,
            } => {
                let lock = ready(workspace, changes, "snapshot")?;
                let after = super::snapshot::before(workspace, changes, *max, skip)?;
                return Ok(Some(Run {
                    lock,
                    after: Some(after),
                }));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// One run's hold on its change set: an exclusive `flock` on the directory, so that a
/// second run on the same set at the same time is refused
/// ([`Conflict::ChangeSetInUse`]) rather than sharing an upper directory (which
/// overlayfs leaves undefined) or racing layer 2's difference; and layer 2's work after
/// the run.
#[derive(Debug)]
pub(crate) struct Run {
    /// Released when this is dropped: after the sandbox is gone, or with a `Child`
    /// dropped unwaited.
    #[allow(dead_code)]
    lock: Held,
    after: Option<super::snapshot::After>,
}

impl Run {
    /// After the program: layer 2's difference written when every process of the
    /// sandbox is gone (`gone`), then the lock released.
    pub(crate) fn finish(self, gone: bool) {
        match self.after {
            Some(after) if gone => after.finish(),
            Some(_) => tracing::warn!(
                "the sandbox's processes outlived the wait: the snapshot's difference is \
                 written into the change set at the next run's end"
            ),
            None => {}
        }
    }
}

pub(super) fn path_error(dir: &Path, e: &io::Error) -> Error {
    PlanError::Path {
        key: "changes_dir",
        path: dir.to_path_buf(),
        errno: crate::error::errno_of(e),
    }
    .into()
}

fn refuse(dir: &Path, errno: Errno) -> Error {
    PlanError::Path {
        key: "changes_dir",
        path: dir.to_path_buf(),
        errno,
    }
    .into()
}

/// `dir` made when missing (its parent exists), then checked: a directory (not a
/// symlink) the caller owns, with no access for others; `upper/` (with the workspace's
/// mode, which its root shows) and `work/` inside; the marker written or matched.
fn ready(workspace: &Path, dir: &Path, mode: &str) -> Result<Held, Error> {
    let started = now_ns();
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(path_error(dir, &e)),
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| path_error(dir, &e))?;
    if meta.file_type().is_symlink() {
        return Err(refuse(dir, Errno::ELOOP));
    }
    if !meta.is_dir() {
        return Err(refuse(dir, Errno::ENOTDIR));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid || meta.mode() & 0o077 != 0 {
        return Err(refuse(dir, Errno::EPERM));
    }

    let ws_mode = fs::metadata(workspace)
        .map_err(|e| path_error(workspace, &e))?
        .mode()
        & 0o7777;
    let subs: &[(&str, u32)] = if mode == "overlay" {
        &[("upper", ws_mode), ("work", 0o700)]
    } else {
        &[("upper", ws_mode)]
    };
    for &(name, mode) in subs {
        let sub = dir.join(name);
        match fs::DirBuilder::new().mode(0o700).create(&sub) {
            Ok(()) => {
                fs::set_permissions(&sub, fs::Permissions::from_mode(mode))
                    .map_err(|e| path_error(&sub, &e))?;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(path_error(&sub, &e)),
        }
        let m = fs::symlink_metadata(&sub).map_err(|e| path_error(&sub, &e))?;
        if !m.is_dir() {
            return Err(refuse(&sub, Errno::ENOTDIR));
        }
    }
    // In this process first: the marker's check below opens and closes the marker, which
    // would drop another run's record lock on it.
    let held = claim(dir)?;
    marker(workspace, dir, started, mode)?;
    lock_marker(held)
}

/// The change set's directory held for this run: in this process through a registry of
/// the directories in use, across processes through a POSIX record lock on its marker
/// (`F_SETLK`: not inherited by a `fork`, so a child some other thread forks meanwhile
/// cannot keep it; released when the process ends, or when it closes any fd of the
/// marker, which only this module opens while a run lasts).
fn claim(dir: &Path) -> Result<Held, Error> {
    let in_use = || -> Error {
        PlanError::Conflict(Conflict::ChangeSetInUse {
            dir: dir.to_path_buf(),
        })
        .into()
    };
    {
        let mut held = HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !held.insert(dir.to_path_buf()) {
            return Err(in_use());
        }
    }
    Ok(Held {
        dir: dir.to_path_buf(),
        file: None,
    })
}

/// The cross-process half of [`claim`], once the marker exists.
fn lock_marker(mut held: Held) -> Result<Held, Error> {
    use std::os::fd::AsRawFd;
    let dir = held.dir.clone();
    let dir = dir.as_path();
    // The marker, the one file of the set that is never replaced after the first run.
    let marker = dir.join(MARKER);
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&marker)
        .map_err(|e| path_error(&marker, &e))?;
    // SAFETY: `flock` is plain old data; all-zero bytes are a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: `fl` is valid for reads for the call; `f` is open.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) };
    if r != 0 {
        let e = io::Error::last_os_error();
        if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) {
            return Err(PlanError::Conflict(Conflict::ChangeSetInUse {
                dir: dir.to_path_buf(),
            })
            .into());
        }
        return Err(path_error(&marker, &e));
    }
    held.file = Some(f);
    Ok(held)
}

/// The change sets this process runs on now.
static HELD: std::sync::Mutex<std::collections::BTreeSet<std::path::PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A change set held by a run (see [`lock`]); released on drop.
#[derive(Debug)]
pub(crate) struct Held {
    dir: std::path::PathBuf,
    #[allow(dead_code)]
    file: Option<fs::File>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.remove(&self.dir);
    }
}

/// The marker written (temp + rename) at the first run, checked at later ones.
fn marker(workspace: &Path, dir: &Path, started: u64, mode: &str) -> Result<(), Error> {
    let path = dir.join(MARKER);
    let ws =
        json_string(workspace).ok_or_else(|| not_this(dir, "the workspace path is not UTF-8"))?;
    match fs::read(&path) {
        Ok(bytes) => {
            let m = super::marker::parse(&bytes)
                .map_err(|why| not_this(dir, &format!("its marker: {why}")))?;
            if m.version != VERSION {
                return Err(not_this(
                    dir,
                    &format!("format version {}, not {VERSION}", m.version),
                ));
            }
            if m.workspace != workspace {
                return Err(not_this(
                    dir,
                    &format!(
                        "a change set of another workspace ({}; this one is {})",
                        m.workspace.display(),
                        workspace.display()
                    ),
                ));
            }
            if m.mode != mode {
                return Err(not_this(
                    dir,
                    &format!(
                        "a change set of mode {} (made on another layer), not {mode}",
                        m.mode
                    ),
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let body = format!(
                "{{\"version\":{VERSION},\"workspace\":{ws},\"mode\":\"{mode}\",\"started_ns\":{started}}}\n"
            );
            let tmp = dir.join(format!(".{MARKER}.{}", std::process::id()));
            let write = || -> io::Result<()> {
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)?;
                f.write_all(body.as_bytes())?;
                f.sync_all()?;
                fs::rename(&tmp, &path)
            };
            write().map_err(|e| {
                let _ = fs::remove_file(&tmp);
                path_error(&path, &e)
            })
        }
        Err(e) => Err(path_error(&path, &e)),
    }
}

fn not_this(dir: &Path, reason: &str) -> Error {
    PlanError::Conflict(Conflict::NotThisChangeSet {
        dir: dir.to_path_buf(),
        reason: reason.to_string(),
    })
    .into()
}

/// `CLOCK_REALTIME` in nanoseconds.
fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `p` as a JSON string, quotes included; `None` when it is not UTF-8.
fn json_string(p: &Path) -> Option<String> {
    let s = p.to_str()?;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(
            json_string(Path::new("/a\"b\\c\nd")).unwrap(),
            "\"/a\\\"b\\\\c\\u000ad\""
        );
    }
}
