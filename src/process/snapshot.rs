//! The change set of `workspace_mode = "overlay"` without overlayfs (layer 2, passthrough,
//! macOS; see [`Step::Snapshot`](crate::plan::Step::Snapshot)): the workspace copied into
//! `<changes>/snapshot` at the first run, the program run there, and after each run the
//! difference snapshot-vs-workspace written into `<changes>/upper` in the overlay format,
//! so that the change set reads the same whichever layer made it.
//!
//! On layer 2 nothing of the sandbox runs while the difference is written (it waits for
//! the init's exit, which ends them all). In passthrough and on macOS there is no init:
//! it waits for the program's exit, and a process the program left running may still
//! change the snapshot (the next run's end writes the difference again). Files are opened
//! without following a symlink in their last component, a snapshot replaced by a symlink
//! is refused, and setuid and setgid bits are never copied (nor compared).
//!
//! The copy clones each regular file (Linux: `ioctl(FICLONE)`; macOS: `clonefile(2)`)
//! where the file system can, and copies it (`copy_file_range`, through `std::io::copy`) otherwise; symlinks stay
//! symlinks; modes and modification times are kept; FIFOs, sockets and devices are left
//! out (and out of the comparison). `upper/` is rebuilt whole after each run (a new tree,
//! renamed over the old one), so it is always the difference of the snapshot as the last
//! run left it against the workspace as it is now.
//!
//! A file whose size, mode and modification time match the workspace's is taken as
//! unchanged only while its change time is older than `<changes>/snapshot.stamp`, made
//! right after the snapshot: a program that edits a file and puts back its modification
//! time (`touch -d`, `utimensat`) cannot put back its change time, so that file's bytes
//! are compared (see `same_contents`).
//!
//! In `upper/`: a new or changed entry as the program left it; a deleted one as a
//! whiteout (a character device 0:0 for root, else an empty file with the
//! `user.overlay.whiteout` attribute); a directory that replaced a non-directory marked
//! opaque (`user.overlay.opaque` = `y`); a directory present in both only when something
//! below it (or its mode) differs.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Conflict, Error, PlanError};

/// The deepest a snapshot's walks go (the workspace, the snapshot, the difference), as
/// `changes/`'s: each level is a frame of their recursion, and a chain of directories some
/// 2 000 deep (one `mkdir` each, by a program in its snapshot) overflowed the 2 MiB stack
/// of the host thread that wrote the difference, which aborted the host. Deeper is an
/// error: the snapshot is refused, or the difference is not written (and logged; the
/// snapshot keeps the program's work).
const MAX_DEPTH: usize = 256;

/// `E2BIG` when `rel` (a path below a walk's root) is too deep for it, as the other
/// bounded walks report a bound.
fn too_deep(rel: &Path) -> io::Result<()> {
    if rel.components().count() >= MAX_DEPTH {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    Ok(())
}

/// What runs after the program: the difference written into `upper/`.
#[derive(Debug)]
pub(crate) struct After {
    workspace: PathBuf,
    changes: PathBuf,
    skip: Vec<PathBuf>,
}

/// The snapshot made at the first run (when `<changes>/snapshot` is missing): refused when
/// the workspace's regular files add up to more than `max` bytes.
///
/// # Errors
///
/// [`Conflict::SnapshotTooLarge`]; [`PlanError::Path`] (key `changes_dir`) when the copy
/// fails.
pub(crate) fn before(
    workspace: &Path,
    changes: &Path,
    max: u64,
    skip: &[PathBuf],
) -> Result<After, Error> {
    let snap = changes.join("snapshot");
    let after = After {
        workspace: workspace.to_path_buf(),
        changes: changes.to_path_buf(),
        skip: skip.to_vec(),
    };
    match fs::symlink_metadata(&snap) {
        Ok(m) if m.is_dir() => return Ok(after),
        Ok(_) => {
            return Err(super::changeset::path_error(
                &snap,
                &io::Error::from_raw_os_error(libc::ENOTDIR),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(super::changeset::path_error(&snap, &e)),
    }
    let size = measure(workspace, Path::new(""), skip)
        .map_err(|e| super::changeset::path_error(workspace, &e))?;
    if size > max {
        return Err(PlanError::Conflict(Conflict::SnapshotTooLarge {
            workspace: workspace.to_path_buf(),
            size,
            max,
        })
        .into());
    }
    let tmp = changes.join(format!(".snapshot.{}", std::process::id()));
    // The stamp after the snapshot is complete: a set whose stamp is missing (a host that
    // died in between) compares bytes instead of trusting modification times.
    let stamp = changes.join(STAMP);
    let _ = fs::remove_file(&stamp);
    let made =
        copy_tree(workspace, &tmp, Path::new(""), skip).and_then(|()| fs::rename(&tmp, &snap));
    if let Err(e) = made {
        let _ = super::rmtree::remove_tree(&tmp);
        return Err(super::changeset::path_error(&snap, &e));
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&stamp)
        .map_err(|e| super::changeset::path_error(&stamp, &e))?;
    Ok(after)
}

impl After {
    /// Writes the difference into `upper/` (a new tree renamed over the old). A failure
    /// is logged: the snapshot keeps the program's work, and the next run's end writes
    /// the difference again.
    ///
    /// The failure is also left in the change set as [`STALE`] (its text, the error),
    /// which [`crate::ChangeSet::stale`] reads and `changes` and `apply` say: a host that
    /// does not read the log would otherwise review an earlier run's `upper/` as the
    /// latest. A difference written removes it.
    pub(super) fn finish(self) {
        let stale = self.changes.join(STALE);
        match self.write_upper() {
            Ok(()) => {
                let _ = fs::remove_file(&stale);
            }
            Err(e) => {
                tracing::warn!(
                    changes = %self.changes.display(),
                    error = %e,
                    "could not write the snapshot's difference into the change set's upper/; \
                     the next run writes it again"
                );
                let _ = fs::remove_file(&stale);
                let _ = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&stale)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, e.to_string().as_bytes()));
            }
        }
    }

    fn write_upper(&self) -> io::Result<()> {
        let snap = self.changes.join("snapshot");
        let upper = self.changes.join("upper");
        let new = self.changes.join(format!(".upper.{}", std::process::id()));
        let _ = super::rmtree::remove_tree(&new);
        let root = fs::symlink_metadata(&snap)?;
        if !root.is_dir() {
            // Not followed: a snapshot replaced by a symlink would lead the difference
            // elsewhere.
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        let root_mode = root.mode() & KEPT_MODE;
        fs::DirBuilder::new().mode(0o700).create(&new)?;
        let ctx = Diff {
            skip: &self.skip,
            stamp: stamp_of(&self.changes),
        };
        let r = diff_dir(&snap, &self.workspace, &new, Path::new(""), &ctx)
            .and_then(|_| fs::set_permissions(&new, fs::Permissions::from_mode(root_mode)));
        if let Err(e) = r {
            let _ = super::rmtree::remove_tree(&new);
            return Err(e);
        }
        // `renameat2(RENAME_EXCHANGE)` would be atomic; the old tree goes after a plain
        // swap through a third name instead, which leaves `upper/` missing for a moment
        // only if this process dies in between (the next run makes it again).
        let old = self
            .changes
            .join(format!(".upper-old.{}", std::process::id()));
        match fs::rename(&upper, &old) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                let _ = super::rmtree::remove_tree(&new);
                return Err(e);
            }
        }
        fs::rename(&new, &upper)?;
        let _ = super::rmtree::remove_tree(&old);
        Ok(())
    }
}

/// What a difference compares with: the skipped entries and the snapshot's stamp.
struct Diff<'a> {
    skip: &'a [PathBuf],
    /// The change time of [`STAMP`], when it is there.
    stamp: Option<(i64, i64)>,
}

/// The file, in the change set, made right after the snapshot: its change time is later
/// than every snapshot file's that was not touched since (see [`same_contents`]). Outside
/// `snapshot/`, where the program cannot remake it (on layer 2 and macOS it cannot reach
/// the change set but its snapshot).
const STAMP: &str = "snapshot.stamp";
/// In the change set, when the last run's difference could not be written into `upper/`:
/// the error's text.
pub(crate) const STALE: &str = "upper.stale";

/// The change time of the change set's [`STAMP`]; `None` when it is not a regular file.
fn stamp_of(changes: &Path) -> Option<(i64, i64)> {
    let m = fs::symlink_metadata(changes.join(STAMP)).ok()?;
    m.is_file().then(|| (m.ctime(), m.ctime_nsec()))
}

/// The permission bits copied: setuid and setgid never (a root host would otherwise make
/// root-owned setuid copies of what the program or the workspace holds), nor compared.
const KEPT_MODE: u32 = 0o1777;

/// Opens a regular file for reading without following a symlink in its last component.
fn open_nofollow(p: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
}

/// Whether `rel` is one of the skipped entries.
fn skipped(rel: &Path, skip: &[PathBuf]) -> bool {
    skip.iter().any(|s| s == rel)
}

/// The regular files' sizes under `root/rel`, skipped entries left out.
fn measure(root: &Path, rel: &Path, skip: &[PathBuf]) -> io::Result<u64> {
    too_deep(rel)?;
    let mut total = 0u64;
    for e in fs::read_dir(root.join(rel))? {
        let e = e?;
        let r = rel.join(e.file_name());
        if skipped(&r, skip) {
            continue;
        }
        let m = e.metadata()?;
        if m.is_dir() {
            total = total.saturating_add(measure(root, &r, skip)?);
        } else if m.is_file() {
            total = total.saturating_add(m.len());
        }
    }
    Ok(total)
}

/// The kinds the snapshot keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
}

fn kind(m: &fs::Metadata) -> Option<Kind> {
    let t = m.file_type();
    if t.is_dir() {
        Some(Kind::Dir)
    } else if t.is_file() {
        Some(Kind::File)
    } else if t.is_symlink() {
        Some(Kind::Symlink)
    } else {
        None
    }
}

fn lstat(p: &Path) -> io::Result<Option<fs::Metadata>> {
    match fs::symlink_metadata(p) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Copies the tree `src/rel` to `dst` (which must not exist).
fn copy_tree(src_root: &Path, dst: &Path, rel: &Path, skip: &[PathBuf]) -> io::Result<()> {
    too_deep(rel)?;
    let src = src_root.join(rel);
    let m = fs::symlink_metadata(&src)?;
    fs::DirBuilder::new().mode(0o700).create(dst)?;
    for e in fs::read_dir(&src)? {
        let e = e?;
        let r = rel.join(e.file_name());
        if skipped(&r, skip) {
            continue;
        }
        copy_entry(
            &src_root.join(&r),
            &dst.join(e.file_name()),
            src_root,
            &r,
            skip,
        )?;
    }
    finish_meta(dst, &m)
}

/// Copies one entry (a directory with all below it).
fn copy_entry(
    src: &Path,
    dst: &Path,
    src_root: &Path,
    rel: &Path,
    skip: &[PathBuf],
) -> io::Result<()> {
    let m = fs::symlink_metadata(src)?;
    match kind(&m) {
        Some(Kind::Dir) => copy_tree(src_root, dst, rel, skip),
        Some(Kind::File) => {
            copy_file(src, dst)?;
            finish_meta(dst, &m)
        }
        Some(Kind::Symlink) => {
            std::os::unix::fs::symlink(fs::read_link(src)?, dst)?;
            set_times(dst, &m)
        }
        None => Ok(()),
    }
}

/// A clone of `src` where the file system shares extents (Linux: `ioctl(FICLONE)`; macOS:
/// `clonefile(2)` on APFS), else a copy (`copy_file_range` on Linux, through
/// `std::io::copy`). The caller sets the mode and times afterwards ([`finish_meta`]).
fn copy_file(src: &Path, dst: &Path) -> io::Result<()> {
    #[cfg(target_os = "macos")]
    if clonefile(src, dst)? {
        return Ok(());
    }
    let mut from = open_nofollow(src)?;
    let mut to = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)?;
    if !ficlone(&from, &to) {
        io::copy(&mut from, &mut to)?;
    }
    Ok(())
}

/// Whether `to` is now a clone of `from` (the file system shares their extents).
#[cfg(target_os = "linux")]
fn ficlone(from: &fs::File, to: &fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: both fds are open for the call's length (the `File`s are borrowed); FICLONE
    // takes the source fd as its argument and writes nothing to user memory.
    unsafe { libc::ioctl(to.as_raw_fd(), libc::FICLONE, from.as_raw_fd()) == 0 }
}

/// Elsewhere the clone is made by path before the copy (macOS) or not at all.
#[cfg(not(target_os = "linux"))]
fn ficlone(_from: &fs::File, _to: &fs::File) -> bool {
    false
}

/// `clonefile(src, dst, CLONE_NOFOLLOW | CLONE_NOOWNERCOPY)`: whether `dst` was made as a
/// clone. `false` where the file system cannot clone (not APFS: `ENOTSUP`, or across
/// volumes: `EXDEV`), for the caller to copy instead; other errors are returned.
#[cfg(target_os = "macos")]
fn clonefile(src: &Path, dst: &Path) -> io::Result<bool> {
    /// `<sys/clonefile.h>`: do not follow a symlink at `src`; do not copy its owner.
    const CLONE_NOFOLLOW: u32 = 0x0001;
    const CLONE_NOOWNERCOPY: u32 = 0x0002;
    let s = CString::new(src.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let d = CString::new(dst.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: both strings are NUL-terminated and live across the call.
    let r = unsafe { libc::clonefile(s.as_ptr(), d.as_ptr(), CLONE_NOFOLLOW | CLONE_NOOWNERCOPY) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOTSUP | libc::EXDEV) => Ok(false),
        _ => Err(e),
    }
}

/// Mode and times of `m` on `p` (a directory after its entries: they change its mtime).
fn finish_meta(p: &Path, m: &fs::Metadata) -> io::Result<()> {
    fs::set_permissions(p, fs::Permissions::from_mode(m.mode() & KEPT_MODE))?;
    set_times(p, m)
}

/// Access and modification times of `m` on `p`, not following a symlink.
fn set_times(p: &Path, m: &fs::Metadata) -> io::Result<()> {
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let times = [
        libc::timespec {
            tv_sec: m.atime(),
            tv_nsec: m.atime_nsec(),
        },
        libc::timespec {
            tv_sec: m.mtime(),
            tv_nsec: m.mtime_nsec(),
        },
    ];
    // SAFETY: `c` is NUL-terminated and `times` holds two timespecs, both live across the
    // call.
    let r = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes into `out` (an existing directory) the difference of `snap/rel` against
/// `ws/rel`. Returns whether anything was written.
fn diff_dir(
    snap_root: &Path,
    ws_root: &Path,
    out: &Path,
    rel: &Path,
    ctx: &Diff<'_>,
) -> io::Result<bool> {
    too_deep(rel)?;
    let skip = ctx.skip;
    let snap = snap_root.join(rel);
    let ws = ws_root.join(rel);
    let mut names = std::collections::BTreeSet::new();
    for e in fs::read_dir(&snap)? {
        names.insert(e?.file_name());
    }
    if let Ok(rd) = fs::read_dir(&ws) {
        for e in rd {
            names.insert(e?.file_name());
        }
    }
    let mut any = false;
    for name in names {
        let r = rel.join(&name);
        if skipped(&r, skip) {
            continue;
        }
        let s = lstat(&snap.join(&name))?.filter(|m| kind(m).is_some());
        let w = lstat(&ws.join(&name))?.filter(|m| kind(m).is_some());
        let dst = out.join(&name);
        match (s, w) {
            (None, None) => {}
            (None, Some(_)) => {
                whiteout(&dst)?;
                any = true;
            }
            (Some(_), None) => {
                copy_entry(&snap.join(&name), &dst, snap_root, &r, skip)?;
                any = true;
            }
            (Some(sm), Some(wm)) => {
                any |= diff_entry(snap_root, ws_root, &dst, &r, (&sm, &wm), ctx)?;
            }
        }
    }
    Ok(any)
}

/// One entry present on both sides.
fn diff_entry(
    snap_root: &Path,
    ws_root: &Path,
    dst: &Path,
    rel: &Path,
    (sm, wm): (&fs::Metadata, &fs::Metadata),
    ctx: &Diff<'_>,
) -> io::Result<bool> {
    let skip = ctx.skip;
    let src = snap_root.join(rel);
    let (sk, wk) = (kind(sm), kind(wm));
    if sk == Some(Kind::Dir) && wk == Some(Kind::Dir) {
        fs::DirBuilder::new().mode(0o700).create(dst)?;
        let below = diff_dir(snap_root, ws_root, dst, rel, ctx)?;
        let mode_changed = sm.mode() & KEPT_MODE != wm.mode() & KEPT_MODE;
        if below || mode_changed {
            finish_meta(dst, sm)?;
            return Ok(true);
        }
        fs::remove_dir(dst)?;
        return Ok(false);
    }
    if sk != wk {
        copy_entry(&src, dst, snap_root, rel, skip)?;
        if sk == Some(Kind::Dir) {
            set_xattr(dst, "user.overlay.opaque", b"y")?;
        }
        return Ok(true);
    }
    let same = match sk {
        Some(Kind::Symlink) => fs::read_link(&src)? == fs::read_link(ws_root.join(rel))?,
        _ => {
            sm.mode() & KEPT_MODE == wm.mode() & KEPT_MODE
                && sm.len() == wm.len()
                && same_contents(sm, wm, &src, &ws_root.join(rel), ctx.stamp)?
        }
    };
    if same {
        return Ok(false);
    }
    copy_entry(&src, dst, snap_root, rel, skip)?;
    Ok(true)
}

/// Equal contents. The same modification time (to the nanosecond) is taken as unchanged,
/// as `git status` and `rsync` do, only for a snapshot file untouched since the snapshot
/// was made: one whose change time (`st_ctime`, which no unprivileged call sets: every
/// write, `chmod` or `utimensat` moves it to the present) is older than the stamp's. A
/// program that writes a file and puts its old modification time back has moved its
/// change time past the stamp, so its bytes are compared. Without a stamp the bytes
/// are always compared.
fn same_contents(
    sm: &fs::Metadata,
    wm: &fs::Metadata,
    a: &Path,
    b: &Path,
    stamp: Option<(i64, i64)>,
) -> io::Result<bool> {
    let untouched = stamp.is_some_and(|t| (sm.ctime(), sm.ctime_nsec()) < t);
    if untouched && (sm.mtime(), sm.mtime_nsec()) == (wm.mtime(), wm.mtime_nsec()) {
        return Ok(true);
    }
    use std::io::Read;
    let (mut fa, mut fb) = (open_nofollow(a)?, open_nofollow(b)?);
    let mut ba = vec![0u8; 64 * 1024];
    let mut bb = vec![0u8; 64 * 1024];
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(fb.read(&mut bb[..1])? == 0);
        }
        let mut got = 0;
        while got < n {
            let m = fb.read(&mut bb[got..n])?;
            if m == 0 {
                return Ok(false);
            }
            got += m;
        }
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// A whiteout at `p`: a character device 0:0 where the caller may make one (root), else
/// an empty file with `user.overlay.whiteout` (overlayfs's `userxattr` form).
fn whiteout(p: &Path) -> io::Result<()> {
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is NUL-terminated and lives across the call.
    let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, 0) };
    if r == 0 {
        return Ok(());
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)?;
    set_xattr(p, "user.overlay.whiteout", b"")
}

/// Overlay mode runs on Linux and macOS only (the plan refuses it elsewhere).
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn set_xattr(_: &Path, _: &str, _: &[u8]) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// macOS: `setxattr(2)` at offset 0 with `XATTR_NOFOLLOW`, the change set's marks under
/// the same names as on Linux (`crate::changes` reads them there too).
#[cfg(target_os = "macos")]
fn set_xattr(p: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let n = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: both strings are NUL-terminated, `value` is readable for its length; all
    // live across the call.
    let r = unsafe {
        libc::setxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
            libc::XATTR_NOFOLLOW,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(target_os = "linux")]
fn set_xattr(p: &Path, name: &str, value: &[u8]) -> io::Result<()> {
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let n = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: both strings are NUL-terminated, `value` is readable for its length; all
    // live across the call.
    let r = unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
