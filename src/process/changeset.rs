//! The host's side of `workspace_mode = "overlay"` at each spawn: the change set's
//! directory made (or checked) before the child mounts it (see
//! [`Step::Overlay`](crate::plan::Step::Overlay)).
//!
//! `<changes_dir>` (mode 0700, the caller's, never a symlink) holds `upper/` and `work/`
//! (the overlay's) and `stockade-changes.json`, written by the first run (linked into
//! place: whole or absent; made durable at that run's end, see [`Held::make_durable`]):
//! `{"version":1,"workspace":"/canonical/ws","mode":"overlay","started_ns":N}`, `N` the
//! first run's start in `CLOCK_REALTIME` nanoseconds. A later run checks the version and
//! the workspace, and sees the earlier runs' writes through the same `upper/`.
//!
//! # The overlay's last reference (full layer)
//!
//! When the overlay's superblock goes, overlayfs syncs its upper file system
//! (`ovl_sync_fs`: on ext4 a journal commit, 4–33 ms under load). Left to the sandbox,
//! that happens in its init's `exit`, before the pidfd the host waits on is signalled.
//! So the setup child sends the host the overlay's mount fd ([`Run::overlay_socket`]),
//! the host keeps it ([`Run::pin`]) and, once the program's status is known, a thread
//! of its own waits for the sandbox's end, closes the fd (the sync runs there) and only
//! then lets the change set go. Meanwhile the set is *closing*: a later run on it, and
//! [`settle`] (`ChangeSet::open`), wait for that instead of being refused. The fd is an
//! `O_PATH` mount of a tree the program wrote: the host never resolves a path through
//! it, and it is close-on-exec (received with `MSG_CMSG_CLOEXEC`), so no later child
//! inherits it.

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
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
                // The datagram pair the overlay's mount fd comes back through.
                let (parent, child) = std::os::unix::net::UnixDatagram::pair()
                    .map_err(|e| path_error(changes, &e))?;
                return Ok(Some(Run {
                    lock: Some(lock),
                    after: None,
                    channel: Some((parent.into(), child.into())),
                    pin: None,
                }));
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
                    lock: Some(lock),
                    after: Some(after),
                    channel: None,
                    pin: None,
                }));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// One run's hold on its change set ([`Held`]), so that a second run on the same set at
/// the same time is refused ([`Conflict::ChangeSetInUse`]) rather than sharing an upper
/// directory (which overlayfs leaves undefined) or racing layer 2's difference, and one
/// that comes while this run's sandbox is going waits for it; layer 2's work after the
/// run; on the full layer the overlay's mount fd (see the module's docs).
#[derive(Debug)]
pub(crate) struct Run {
    /// The overlay's mount, as the setup child sent it: never a path's start, only
    /// closed. (Fields drop in order: the pin before the lock.)
    pin: Option<OwnedFd>,
    /// The overlay's channel until the spawn is over: (host's end, child's end).
    channel: Option<(OwnedFd, OwnedFd)>,
    after: Option<super::snapshot::After>,
    /// Released when this is dropped, after the pin: after the sandbox is gone, or with
    /// a `Child` dropped unwaited.
    lock: Option<Held>,
}

impl Run {
    /// The child's end of the socket the overlay's mount fd goes to the host through
    /// (close-on-exec), or -1 (layer 2; or after [`Run::pin`]).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn overlay_socket(&self) -> RawFd {
        self.channel
            .as_ref()
            .map_or(-1, |(_, child)| child.as_raw_fd())
    }

    /// After a successful spawn: the overlay's mount fd the setup child sent before it
    /// exec'd, kept until the sandbox is gone. With none (a child that could not send
    /// it), the overlay's sync runs in the init's exit, as without this.
    #[cfg(target_os = "linux")]
    pub(crate) fn pin(&mut self) {
        let Some((parent, child)) = self.channel.take() else {
            return;
        };
        drop(child);
        match crate::backend::linux::recv_fds(&parent) {
            Ok(fds) => {
                self.pin = fds
                    .into_iter()
                    .find_map(|(tag, fd)| (tag == 0).then_some(fd))
            }
            Err(e) => tracing::debug!(error = %e, "stockade: no overlay mount fd from the sandbox"),
        }
    }

    /// Whether this is the full layer's overlay (no snapshot to write after the run).
    pub(crate) fn is_overlay(&self) -> bool {
        self.after.is_none()
    }

    /// The program has ended: from now on a later run on this change set, and
    /// [`settle`], wait for this one to [`finish`](Run::finish) instead of being refused.
    pub(crate) fn closing(&self) {
        if let Some(lock) = &self.lock {
            lock.closing();
        }
    }

    /// After the program: layer 2's difference written when every process of the
    /// sandbox is gone (`gone`); then the overlay's mount closed (its superblock goes
    /// here, with the sync of the change set's file system), then the lock released.
    pub(crate) fn finish(mut self, gone: bool) {
        let overlay = self.is_overlay();
        match self.after.take() {
            Some(after) if gone => after.finish(),
            Some(_) => tracing::warn!(
                "the sandbox's processes outlived the wait: the snapshot's difference is \
                 written into the change set at the next run's end"
            ),
            None => {}
        }
        #[cfg(test)]
        if let (Some(_), Some(lock)) = (&self.pin, &self.lock) {
            tests::gate(lock.id);
        }
        drop(self.pin.take());
        // The overlay is gone with its last reference: its scratch directory, which
        // overlayfs leaves without any permission (mode 000, so that a caller without
        // `CAP_DAC_OVERRIDE` could not `rm -r` the change set), goes too; the next mount
        // makes it again.
        if gone && overlay {
            if let Some(lock) = &self.lock {
                remove_scratch(&lock.dir.join("work"));
            }
        }
        drop(self.lock.take());
    }
}

/// Removes `work/work`, overlayfs's scratch directory, from the change set's `work`
/// directory, once no overlay uses it. overlayfs leaves it mode 000 and, after a run that
/// deleted a file, not empty: it keeps one shared whiteout there to link new ones from.
/// Only a directory is touched (`lstat`: never a symlink's target; the directory it is in
/// is the caller's, mode 0700, and unreachable from inside a sandbox, where the change
/// set is seen only through the overlay); its mode is given back to its owner and
/// `remove_dir_all` (which never follows a symlink) empties it. A failure leaves it as it
/// is: the next mount cleans it.
fn remove_scratch(work: &Path) {
    let scratch = work.join("work");
    match fs::symlink_metadata(&scratch) {
        Ok(m) if m.is_dir() => {}
        _ => return,
    }
    if fs::set_permissions(&scratch, fs::Permissions::from_mode(0o700)).is_ok() {
        let _ = fs::remove_dir_all(&scratch);
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
    let mut made_upper = false;
    for &(name, mode) in subs {
        let sub = dir.join(name);
        match fs::DirBuilder::new().mode(0o700).create(&sub) {
            Ok(()) => {
                made_upper |= name == "upper";
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
    let mut held = claim(dir, (meta.dev(), meta.ino()))?;
    held.made_marker = marker(workspace, dir, started, mode, made_upper)?;
    lock_marker(held)
}

/// A change set's identity: its directory's device and inode.
pub(crate) type Id = (u64, u64);

/// Where a run on a change set is, in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Its program runs: a second run is refused.
    Running,
    /// Its program has ended; its sandbox is going and its overlay closing: a second
    /// run, and [`settle`], wait.
    Closing,
}

/// The change sets this process runs on now.
static HELD: std::sync::Mutex<std::collections::BTreeMap<Id, State>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Signalled when an entry of [`HELD`] goes.
static TURN: std::sync::Condvar = std::sync::Condvar::new();

fn registry() -> std::sync::MutexGuard<'static, std::collections::BTreeMap<Id, State>> {
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `F_WRLCK` and `F_UNLCK` as `flock::l_type` (an `int` constant on Linux, a `short` one
/// on macOS).
const WRITE: libc::c_short = libc::F_WRLCK as libc::c_short;
const UNLOCK: libc::c_short = libc::F_UNLCK as libc::c_short;

/// The marker's byte a run holds while its program runs: a run that finds it held is
/// refused.
const RUNNING: libc::off_t = 0;
/// The marker's byte a run holds until its sandbox is gone and its overlay closed: a run
/// that finds it held (and [`RUNNING`] free) waits.
const CLOSING: libc::off_t = 1;

fn in_use(dir: &Path) -> Error {
    PlanError::Conflict(Conflict::ChangeSetInUse {
        dir: dir.to_path_buf(),
    })
    .into()
}

/// The change set's directory held for this run: in this process through a registry of
/// the change sets in use (by identity), across processes through POSIX record locks on
/// two bytes of its marker ([`RUNNING`], [`CLOSING`]; `F_SETLK`: not inherited by a
/// `fork`, so a child some other thread forks meanwhile cannot keep them; released when
/// the process ends, or when it closes any fd of the marker, which only this module opens
/// while a run lasts). A set whose run is closing ([`Run::closing`]) is waited for; one
/// whose program runs is refused.
fn claim(dir: &Path, id: Id) -> Result<Held, Error> {
    let mut held = registry();
    loop {
        match held.get(&id) {
            None => break,
            Some(State::Running) => return Err(in_use(dir)),
            Some(State::Closing) => {
                held = TURN
                    .wait(held)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
    }
    held.insert(id, State::Running);
    Ok(Held {
        id,
        dir: dir.to_path_buf(),
        file: None,
        made_marker: false,
    })
}

/// The change set at `dir` held for `ChangeSet::apply` as a run holds it ([`claim`],
/// [`lock_marker`]): no run starts on it, in this process or another, until the hold goes
/// (a run that tries is refused, `Conflict::ChangeSetInUse`); a run whose program runs
/// refuses the hold (`Err`), one that is closing is waited for.
pub(crate) fn hold_for_apply(dir: &Path) -> Result<Held, Error> {
    let m = fs::symlink_metadata(dir).map_err(|e| path_error(dir, &e))?;
    lock_marker(claim(dir, (m.dev(), m.ino()))?)
}

/// The cross-process half of [`claim`], once the marker exists: [`RUNNING`] taken (or
/// the run refused), then [`CLOSING`] waited for.
fn lock_marker(mut held: Held) -> Result<Held, Error> {
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
    match record_lock(f.as_fd(), WRITE, RUNNING, false) {
        Ok(()) => {}
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => {
            return Err(in_use(dir));
        }
        Err(e) => return Err(path_error(&marker, &e)),
    }
    // Another process's run on this set may still be closing: its turn ends with that.
    record_lock(f.as_fd(), WRITE, CLOSING, true).map_err(|e| path_error(&marker, &e))?;
    held.file = Some(f);
    Ok(held)
}

/// A POSIX record lock of `kind` (`F_WRLCK`, `F_RDLCK`, `F_UNLCK`) on byte `byte` of
/// `fd`'s file; with `wait`, `F_SETLKW` (retried on `EINTR`).
fn record_lock(
    fd: std::os::fd::BorrowedFd<'_>,
    kind: libc::c_short,
    byte: libc::off_t,
    wait: bool,
) -> io::Result<()> {
    let fl = flock(kind, byte);
    let cmd = if wait { libc::F_SETLKW } else { libc::F_SETLK };
    loop {
        // SAFETY: `fl` is valid for reads for the call; `fd` is open for its borrow.
        let r = unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &fl) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether another process holds a lock on byte `byte` of `fd`'s file that a write lock
/// would conflict with (`F_GETLK`, which changes no lock); `false` when it cannot tell.
fn locked_elsewhere(fd: std::os::fd::BorrowedFd<'_>, byte: libc::off_t) -> bool {
    let mut fl = flock(WRITE, byte);
    // SAFETY: `fl` is valid for reads and writes for the call; `fd` is open for its
    // borrow.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETLK, &mut fl) };
    r == 0 && fl.l_type != UNLOCK
}

fn flock(kind: libc::c_short, byte: libc::off_t) -> libc::flock {
    // SAFETY: `flock` is plain old data; all-zero bytes are a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = byte;
    fl.l_len = 1;
    fl
}

/// Returns once no run on the change set `id` (whose marker `marker` is open) is
/// closing: in this process (waiting for its [`Run::finish`]), and in another one (its
/// [`CLOSING`] byte held while [`RUNNING`] is free; polled with `F_GETLK`, which cannot
/// disturb this process's own locks, every millisecond, for at most ten seconds). A run
/// whose program still runs is not waited for.
pub(crate) fn settle(id: Id, marker: std::os::fd::BorrowedFd<'_>) {
    {
        let mut held = registry();
        loop {
            match held.get(&id) {
                Some(State::Closing) => {
                    held = TURN
                        .wait(held)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                Some(State::Running) => return,
                None => break,
            }
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while locked_elsewhere(marker, CLOSING)
        && !locked_elsewhere(marker, RUNNING)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Whether a run on the change set `id` (whose marker `marker` is open) has a program
/// running now: in this process, or in another one (its [`RUNNING`] byte held).
pub(crate) fn running(id: Id, marker: std::os::fd::BorrowedFd<'_>) -> bool {
    registry().get(&id) == Some(&State::Running) || locked_elsewhere(marker, RUNNING)
}

/// Returns once no run of this process on the change set at `dir` is closing (a running
/// one is not waited for), or after ten seconds with a warning (a stuck file system);
/// at once when `dir` is gone. For a `Sandbox`'s drop.
pub(crate) fn settle_here(dir: &Path) {
    let Ok(m) = fs::symlink_metadata(dir) else {
        return;
    };
    let id = (m.dev(), m.ino());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut held = registry();
    while held.get(&id) == Some(&State::Closing) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            tracing::warn!(dir = %dir.display(), "stockade: the change set's close is still going after 10 s; not waited for");
            return;
        }
        held = TURN
            .wait_timeout(held, left)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

/// Marker fds that [`MarkerFd`] could not close yet (a run of this process held their
/// change set): closed by that run's [`Held`] when it goes. Locked only with [`HELD`]'s
/// lock held, so that a run is never let in between a look at the registry and a close.
static PARKED: std::sync::Mutex<Vec<(Id, std::os::fd::OwnedFd)>> =
    std::sync::Mutex::new(Vec::new());

fn parked() -> std::sync::MutexGuard<'static, Vec<(Id, std::os::fd::OwnedFd)>> {
    PARKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An fd of a change set's marker opened outside any run (`ChangeSet::open`). POSIX
/// record locks are the process's: closing *any* fd of the marker drops every one this
/// process holds on it, a run's hold included (which would let another host process's
/// run in beside it). So this fd is not closed while a run of this process holds the set:
/// it is parked, and closed by that run's [`Held`] as it goes (when the run's own close
/// releases the locks anyway).
#[derive(Debug)]
pub(crate) struct MarkerFd {
    id: Id,
    fd: Option<std::os::fd::OwnedFd>,
}

impl MarkerFd {
    /// `fd`, an open marker of the change set `id`.
    pub(crate) fn new(id: Id, fd: std::os::fd::OwnedFd) -> MarkerFd {
        MarkerFd { id, fd: Some(fd) }
    }

    /// The marker, as a file to read from (never to close: see the type's docs).
    pub(crate) fn file(&self) -> Option<&std::os::fd::OwnedFd> {
        self.fd.as_ref()
    }
}

impl Drop for MarkerFd {
    fn drop(&mut self) {
        let Some(fd) = self.fd.take() else {
            return;
        };
        let held = registry();
        if held.contains_key(&self.id) {
            parked().push((self.id, fd));
        } else {
            // Closed with the registry held: no run of this process takes its locks
            // between the look and the close.
            drop(fd);
        }
        drop(held);
    }
}

/// A change set held by a run (see [`claim`]); released on drop.
#[derive(Debug)]
pub(crate) struct Held {
    id: Id,
    dir: std::path::PathBuf,
    file: Option<fs::File>,
    /// This run wrote the marker (the set's first run): it is made durable when the
    /// hold goes ([`Held::make_durable`]), off the spawn's path.
    made_marker: bool,
}

impl Held {
    /// When the hold of the run that made the marker goes (after the run, on the full
    /// layer on the host's background thread; or at once when its spawn failed or another
    /// process's run had the set): the marker, written without `fsync` at the spawn (a
    /// journal commit, 0.8–1.3 ms on ext4, was most of a fresh change set's cost), and its
    /// directory entry are made durable, through the marker's own fd (closing another one
    /// would drop this run's locks). Until then a host crash can leave the marker empty,
    /// which a later run and `ChangeSet::open` refuse, or missing, which they refuse too
    /// once the set holds anything ([`marker`]): a crashed first run's set is never taken
    /// as a fresh one.
    fn make_durable(&self) {
        if !self.made_marker {
            return;
        }
        if let Some(f) = &self.file {
            let _ = f.sync_all();
        }
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
    }

    /// The run's program has ended: a later run waits for this hold's end rather than
    /// being refused (in this process through the registry, elsewhere through
    /// [`RUNNING`], let go here).
    fn closing(&self) {
        if let Some(s) = registry().get_mut(&self.id) {
            *s = State::Closing;
        }
        if let Some(f) = &self.file {
            let _ = record_lock(f.as_fd(), UNLOCK, RUNNING, false);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.make_durable();
        // The marker first: closing it drops every record lock this process holds on it,
        // which must not take a later run's that the registry has let in.
        drop(self.file.take());
        let mut held = registry();
        held.remove(&self.id);
        // The marker fds `ChangeSet::open` left while this run held the set: no lock of
        // this process is on the marker now, and none can be taken while `held` is.
        parked().retain(|(id, _)| *id != self.id);
        drop(held);
        TURN.notify_all();
    }
}

/// The marker written at the first run (a temp file linked into place), checked at later
/// ones. Returns whether it was written now: it is not `fsync`ed here but when the run's
/// hold goes ([`Held::make_durable`]). A set a host crash left with an empty marker, or
/// with none beside a non-empty `upper/` or layer 2's snapshot, is refused, never taken
/// as a fresh set (a workspace edited since the crashed run's start would not be a
/// conflict then). `made_upper`: `upper/` was made just now (empty, and perhaps, with the
/// workspace's mode, not readable by its owner).
fn marker(
    workspace: &Path,
    dir: &Path,
    started: u64,
    mode: &str,
    made_upper: bool,
) -> Result<bool, Error> {
    let path = dir.join(MARKER);
    let ws =
        json_string(workspace).ok_or_else(|| not_this(dir, "the workspace path is not UTF-8"))?;
    let read = || -> io::Result<Vec<u8>> {
        let mut f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut f, &mut bytes)?;
        Ok(bytes)
    };
    match read() {
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
            Ok(false)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Used before (a crashed first run: what the overlay wrote in `upper/`, layer
            // 2's snapshot), never fresh.
            let upper = dir.join("upper");
            let used = (!made_upper
                && fs::read_dir(&upper)
                    .map_err(|e| path_error(&upper, &e))?
                    .next()
                    .is_some())
                || ["snapshot", "snapshot.stamp"]
                    .iter()
                    .any(|n| fs::symlink_metadata(dir.join(n)).is_ok());
            if used {
                return Err(not_this(
                    dir,
                    "it was used but its marker is missing (did the host stop before the \
                     change set's first run ended?): review it by hand, then remove it",
                ));
            }
            let body = format!(
                "{{\"version\":{VERSION},\"workspace\":{ws},\"mode\":\"{mode}\",\"started_ns\":{started}}}\n"
            );
            // A name no other process uses (pids repeat across PID namespaces).
            let tmp = dir.join(format!(".{MARKER}.{}.{}", std::process::id(), now_ns()));
            // Linked into place, not renamed: a link never replaces a marker another
            // process made meanwhile (whose run holds its locks on that file).
            let write = || -> io::Result<()> {
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)?;
                f.write_all(body.as_bytes())
            };
            let linked = write().map(|()| fs::hard_link(&tmp, &path));
            let _ = fs::remove_file(&tmp);
            match linked {
                Ok(Ok(())) => Ok(true),
                // Another process's first run made it meanwhile: checked as any, once (a
                // name that stays neither readable nor free, a dangling symlink, is an
                // error, not a loop).
                Ok(Err(e)) if e.kind() == io::ErrorKind::AlreadyExists => match read() {
                    Ok(_) => marker(workspace, dir, started, mode, false),
                    Err(e) => Err(path_error(&path, &e)),
                },
                Ok(Err(e)) | Err(e) => Err(path_error(&path, &e)),
            }
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
    use std::ffi::CStr;

    /// Change sets whose overlay's close ([`Run::finish`]) waits until the test that
    /// gated them lets it go.
    static GATED: std::sync::Mutex<std::collections::BTreeSet<Id>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    static UNGATED: std::sync::Condvar = std::sync::Condvar::new();

    fn gated() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<Id>> {
        GATED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Called by [`Run::finish`] before it closes a pinned overlay.
    pub(super) fn gate(id: Id) {
        let mut g = gated();
        while g.contains(&id) {
            g = UNGATED
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// The fds of this process that are an overlay mount holding `name` at its root
    /// (a test resolves the name through the fd to tell its run's overlay from another
    /// test's; the library never does).
    fn pins(name: &CStr) -> Vec<RawFd> {
        let mut out = Vec::new();
        for e in fs::read_dir("/proc/self/fd").unwrap().flatten() {
            let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()) else {
                continue;
            };
            // SAFETY: `statfs` is plain old data; all-zero bytes are a valid value.
            let mut sfs: libc::statfs = unsafe { std::mem::zeroed() };
            // SAFETY: `sfs` is writable for the call; a closed fd only fails.
            if unsafe { libc::fstatfs(fd, &mut sfs) } != 0 || sfs.f_type != 0x794c_7630 {
                continue;
            }
            // SAFETY: as above, for `stat`.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: `name` is NUL-terminated and `st` writable for the call.
            let r = unsafe { libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
            if r == 0 {
                out.push(fd);
            }
        }
        out
    }

    #[test]
    fn a_run_on_a_closing_change_set_waits_for_the_overlays_close_and_sees_its_writes() {
        use crate::{Layer, Policy, Sandbox, WorkspaceMode};
        let test = "a_run_on_a_closing_change_set_waits_for_the_overlays_close_and_sees_its_writes";
        if !crate::Capabilities::probe().user_namespaces.available {
            let required = std::env::var("STOCKADE_TEST_REQUIRE")
                .is_ok_and(|v| v.split(',').any(|f| f == "all" || f == "userns"));
            assert!(!required, "{test}: required feature userns missing");
            eprintln!("SKIP {test}: no user namespace");
            return;
        }
        // On ext4 (/var/tmp), where the overlay's last reference costs a sync.
        let base = tempfile::Builder::new()
            .prefix("stockade-test-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let root = fs::canonicalize(base.path()).unwrap();
        let ws = root.join("ws");
        fs::create_dir(&ws).unwrap();
        let changes = root.join("set");
        fs::DirBuilder::new().mode(0o700).create(&changes).unwrap();
        let meta = fs::metadata(&changes).unwrap();
        let id = (meta.dev(), meta.ino());
        let mut p = Policy::with_workspace(&ws);
        p.layer = Some(Layer::Full);
        p.min_layer = Some(Layer::Landlock);
        p.workspace_mode = WorkspaceMode::Overlay;
        p.changes_dir = Some(changes.clone());
        let sb = Sandbox::new(p).unwrap();
        assert_eq!(sb.layer(), Layer::Full);
        // The first run's close is held at the gate until this test opens it.
        gated().insert(id);
        let st = sb
            .command("sh")
            .args(["-c", "echo one > first"])
            .status()
            .unwrap();
        assert!(st.success());
        // The wait has returned: the host holds the overlay, close-on-exec.
        let held = pins(c"first");
        assert_eq!(held.len(), 1, "{held:?}");
        // SAFETY: F_GETFD reads the fd's flags and has no other effect.
        let flags = unsafe { libc::fcntl(held[0], libc::F_GETFD) };
        assert!(flags >= 0 && flags & libc::FD_CLOEXEC != 0, "{flags}");
        // A second run on the change set (and `ChangeSet::open`) waits, not refused (the
        // open is refused after the wait if the second run's program is in by then).
        let (tx, rx) = std::sync::mpsc::channel();
        let second = sb.clone();
        let t = std::thread::spawn(move || {
            let _ = tx.send(second.command("cat").arg("first").output());
        });
        let (otx, orx) = std::sync::mpsc::channel();
        let dir = changes.clone();
        let o = std::thread::spawn(move || {
            let _ = otx.send(crate::ChangeSet::open(&dir).map(|s| s.entries().len()));
        });
        let pause = std::time::Duration::from_millis(400);
        assert!(
            rx.recv_timeout(pause).is_err(),
            "the second run did not wait"
        );
        assert!(orx.try_recv().is_err(), "ChangeSet::open did not wait");
        assert_eq!(pins(c"first").len(), 1);
        {
            gated().remove(&id);
            UNGATED.notify_all();
        }
        let long = std::time::Duration::from_secs(60);
        let out = rx.recv_timeout(long).unwrap().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"one\n");
        match orx.recv_timeout(long).unwrap() {
            Ok(n) => assert_eq!(n, 1),
            // The second run's program got in first: a set is not reviewed while a
            // program writes it.
            Err(crate::ChangesError::Busy { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        t.join().unwrap();
        o.join().unwrap();
        // Both runs over: nothing of either overlay is left in this process.
        crate::ChangeSet::open(&changes).unwrap();
        assert_eq!(pins(c"first"), Vec::<RawFd>::new());
        assert!(registry().get(&id).is_none());
    }

    /// `ChangeSet::apply` holds the set as a run does: a run meanwhile is refused, and
    /// runs again once the hold is gone.
    #[test]
    fn an_apply_holds_the_change_set_against_runs() {
        use crate::{Policy, Sandbox, WorkspaceMode};
        let base = tempfile::Builder::new()
            .prefix("stockade-test-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let root = fs::canonicalize(base.path()).unwrap();
        let ws = root.join("ws");
        fs::create_dir(&ws).unwrap();
        let changes = root.join("set");
        let mut p = Policy::with_workspace(&ws);
        p.workspace_mode = WorkspaceMode::Overlay;
        p.changes_dir = Some(changes.clone());
        let sb = Sandbox::new(p).unwrap();
        let run = || sb.command("sh").args(["-c", "echo x > f"]).status();
        assert!(run().unwrap().success());
        crate::process::changeset::settle_here(&changes);
        let hold = hold_for_apply(&changes).unwrap();
        match run() {
            Err(Error::Plan(PlanError::Conflict(Conflict::ChangeSetInUse { dir }))) => {
                assert_eq!(dir, changes);
            }
            other => panic!("a run during an apply: {other:?}"),
        }
        drop(hold);
        assert!(run().unwrap().success());
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(
            json_string(Path::new("/a\"b\\c\nd")).unwrap(),
            "\"/a\\\"b\\\\c\\u000ad\""
        );
    }
}
