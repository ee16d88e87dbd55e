//! The unified diff of a change set.

use std::fmt::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::readlinkat;
use similar::{ChangeTag, TextDiff};
use std::time::{Duration, Instant};

/// How long one file's line diff may look for the minimal one.
const FILE_BUDGET: Duration = Duration::from_secs(1);
/// How long a whole [`ChangeSet::diff`] may look for minimal ones.
const DIFF_BUDGET: Duration = Duration::from_secs(20);

use super::fs;
use super::{Change, ChangeKind, ChangeSet, ChangesError, EntryType};
use crate::guard::terminal::{escape_controls, escape_path};

/// Files larger than this are not diffed (named as changed).
const DIFF_MAX: u64 = 16 << 20;

/// One side of a diff.
enum Side {
    None,
    Text(String),
    Binary,
    Large,
    Link(Vec<u8>),
    Dir,
    Special,
}

impl ChangeSet {
    /// The change set as a unified diff: text files line by line (three lines of
    /// context), binary and very large files named as such, symlinks as `-> target`,
    /// directories and special files named; additions from `/dev/null`, deletions to it.
    /// Mode changes are shown as git shows them (`old mode` / `new mode`), with a
    /// content change too, and an added entry's mode (`new mode`).
    ///
    /// # Errors
    ///
    /// [`ChangesError::Read`] when an entry of the change set or the workspace can no
    /// longer be read.
    ///
    /// The line diff of each file is minimal within a second and then coarser (the rest
    /// of the file as removed and added), and after 20 s in all every further
    /// one is coarse at once: a diff's time is bounded, whatever the files (a program that
    /// rewrote every line of a 40 000-line file once made one diff take 150 s).
    pub fn diff(&self) -> Result<String, ChangesError> {
        let mut out = String::new();
        let _granted = fs::Granted::new(&self.upper, &self.locked);
        let end = Instant::now() + DIFF_BUDGET;
        for c in &self.entries {
            self.diff_one(c, &mut out, end)?;
        }
        Ok(out)
    }

    fn diff_one(&self, c: &Change, out: &mut String, end: Instant) -> Result<(), ChangesError> {
        let err = |e: Errno| ChangesError::Read {
            path: c.path.clone(),
            source: fs::io(e),
        };
        let p = escape_path(&c.path);
        let old = match c.kind {
            ChangeKind::Added => Side::None,
            _ => side(&self.workspace, &c.path).map_err(err)?,
        };
        let new = match c.kind {
            ChangeKind::Deleted => Side::None,
            _ => side(&self.upper, &c.path).map_err(err)?,
        };
        let _ = writeln!(out, "diff --stockade a/{p} b/{p} ({})", c.kind.as_str());
        // The modes too, whenever they change (review: a file rewritten and made
        // executable was listed as modified, and an added one's mode never shown).
        let has_mode = matches!(c.entry, EntryType::File | EntryType::Dir);
        match c.kind {
            ChangeKind::Added if has_mode => {
                if let Some(mode) = c.mode {
                    let _ = writeln!(out, "new mode {mode:o}");
                }
            }
            ChangeKind::ModeChanged | ChangeKind::Modified => {
                let old_mode = self.lower_mode(c).unwrap_or(0);
                let new_mode = c.mode.unwrap_or(0);
                if c.kind == ChangeKind::ModeChanged
                    || (has_mode && c.mode.is_some() && old_mode != new_mode)
                {
                    let _ = writeln!(out, "old mode {old_mode:o}");
                    let _ = writeln!(out, "new mode {new_mode:o}");
                }
                if c.kind == ChangeKind::ModeChanged && c.entry != EntryType::File {
                    return Ok(());
                }
            }
            _ => {}
        }
        let a = if matches!(old, Side::None) {
            "/dev/null".to_string()
        } else {
            format!("a/{p}")
        };
        let b = if matches!(new, Side::None) {
            "/dev/null".to_string()
        } else {
            format!("b/{p}")
        };
        let text = |s: &Side| match s {
            Side::None => Some(String::new()),
            Side::Text(t) => Some(t.clone()),
            Side::Link(t) => Some(format!(
                "-> {}\n",
                escape_controls(&String::from_utf8_lossy(t))
            )),
            _ => None,
        };
        match (text(&old), text(&new)) {
            (Some(x), Some(y)) => {
                if x == y {
                    return Ok(());
                }
                let deadline = (Instant::now() + FILE_BUDGET).min(end);
                let d = TextDiff::configure().deadline(deadline).diff_lines(&x, &y);
                write_unified(&d, &a, &b, out);
            }
            _ => {
                let name = |s: &Side| match s {
                    Side::Binary => "binary file",
                    Side::Large => "large file",
                    Side::Dir => "directory",
                    Side::Special => "special file",
                    Side::None => "nothing",
                    Side::Text(_) => "text file",
                    Side::Link(_) => "symlink",
                };
                let _ = writeln!(out, "{} {a} and {} {b} differ", name(&old), name(&new));
            }
        }
        Ok(())
    }

    fn lower_mode(&self, c: &Change) -> Option<u32> {
        let parent = c.path.parent()?;
        let name = c.path.file_name()?;
        let dir = fs::open_beneath(&self.workspace, parent).ok()?;
        nix::sys::stat::fstatat(&dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| st.st_mode as u32 & 0o7777)
    }
}

/// `d` as a unified diff (three lines of context) under the header `--- a` / `+++ b`,
/// each line of the files shown with [`shown_line`]: a file's content is the program's,
/// and a line with a carriage return, an escape sequence or a bidirectional override
/// once redrew what the reviewer's terminal showed (a `curl … | sh` line hidden behind
/// `\r\x1b[2K`, and `apply --expect` then applied what was never seen).
fn write_unified<'a>(d: &'a TextDiff<'a, 'a, 'a, str>, a: &str, b: &str, out: &mut String) {
    let mut udiff = d.unified_diff();
    udiff.context_radius(3);
    let mut header = false;
    for hunk in udiff.iter_hunks() {
        if !header {
            let _ = writeln!(out, "--- {a}\n+++ {b}");
            header = true;
        }
        let _ = writeln!(out, "{}", hunk.header());
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
                ChangeTag::Equal => ' ',
            };
            let line = change.value();
            let line = line.strip_suffix('\n').unwrap_or(line);
            let _ = writeln!(out, "{sign}{}", shown_line(line));
            if change.missing_newline() {
                let _ = writeln!(out, "\\ No newline at end of file");
            }
        }
    }
}

/// A line of a file as the diff shows it: its control characters but the tab, and the
/// characters that reorder or draw nothing, escaped ([`escape_controls`]).
fn shown_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for (i, piece) in line.split('\t').enumerate() {
        if i > 0 {
            out.push('\t');
        }
        out.push_str(&escape_controls(piece));
    }
    out
}

/// Reads the entry `rel` beneath `root` for the diff, following no symlink.
fn side(root: &OwnedFd, rel: &Path) -> Result<Side, Errno> {
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(Errno::EINVAL);
    };
    let dir = fs::open_beneath(root, parent)?;
    let st = match nix::sys::stat::fstatat(&dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Ok(Side::None),
        Err(e) => return Err(e),
    };
    Ok(match fs::ftype(&st) {
        libc::S_IFDIR => Side::Dir,
        libc::S_IFLNK => Side::Link(readlinkat(&dir, name)?.as_bytes().to_vec()),
        libc::S_IFREG if st.st_size as u64 > DIFF_MAX => Side::Large,
        libc::S_IFREG => {
            let data = fs::read_bounded(fs::open_file_at(&dir, name)?, DIFF_MAX)?;
            if data.contains(&0) {
                Side::Binary
            } else {
                match String::from_utf8(data) {
                    Ok(t) => Side::Text(t),
                    Err(_) => Side::Binary,
                }
            }
        }
        _ => Side::Special,
    })
}
