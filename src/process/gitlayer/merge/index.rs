//! The gitlink entries of a git index: just enough of git's index format to list the
//! submodule paths (mode `0o160000`) that git on the host would recurse into, and to
//! refuse an index whose entry paths git itself would refuse ([`checkout_safe`]).
//!
//! # Why
//!
//! `git status`, `diff` and `commit` on the host run git in every submodule checkout the
//! index lists, with the config and hooks that the checkout's own `.git` names. The
//! index is merged back, and the checkout lies in the workspace, which the program
//! writes: an index that gained a gitlink entry lets the program's config run on the
//! host. So the merge lists the gitlinks of the index before and after the run, and keeps
//! the host's index when the program added one.
//!
//! # What is read
//!
//! Index versions 2, 3 and 4 (prefix-compressed paths), extended flags, and the split
//! index (the `link` extension: entries in a `sharedindex.<oid>` file, some deleted or
//! replaced per two EWAH bitmaps), as git's `read-cache.c` and `split-index.c` read them.
//! The input is the program's: every read is bounds-checked, and anything this parser
//! does not take as git would (truncated, unknown version, a malformed path or bitmap) is
//! an error, which the merge takes as "do not merge the index". The trailing checksum is
//! not verified, and git does not verify it either outside `git fsck`: every entry
//! counts as git would read it.

use std::collections::{BTreeMap, BTreeSet};

use path::checkout_safe;

/// Why an index could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed(pub(super) &'static str);

type R<T> = Result<T, Malformed>;

/// The gitlink paths of an index.
pub(in crate::process) type Gitlinks = BTreeSet<Vec<u8>>;

/// One entry: its path, stage, and whether it is a gitlink.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: Vec<u8>,
    stage: u8,
    gitlink: bool,
    mode: u32,
}

/// The `link` extension of a split index.
#[derive(Debug, Default)]
struct Link {
    /// The shared index's object name (all zeros: no shared index).
    base: Vec<u8>,
    /// The delete and replace bitmaps, not yet read (see [`bitmaps`]).
    bitmaps: Vec<u8>,
}

#[derive(Debug)]
struct Parsed {
    entries: Vec<Entry>,
    link: Option<Link>,
}

/// A bounds-checked reader over the index bytes.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(Malformed("length overflow"))?;
        let s = self.data.get(self.pos..end).ok_or(Malformed("truncated"))?;
        self.pos = end;
        Ok(s)
    }

    fn u16(&mut self) -> R<u16> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> R<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> R<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    /// Git's variable-length integer of index v4 (`decode_varint`).
    fn varint(&mut self) -> R<usize> {
        let mut c = self.take(1)?[0];
        let mut val = usize::from(c & 0x7f);
        while c & 0x80 != 0 {
            c = self.take(1)?[0];
            val = val
                .checked_add(1)
                .and_then(|v| v.checked_mul(128))
                .and_then(|v| v.checked_add(usize::from(c & 0x7f)))
                .ok_or(Malformed("varint overflow"))?;
        }
        Ok(val)
    }

    /// The bytes up to the next NUL (not included), and the NUL consumed.
    fn cstr(&mut self) -> R<&'a [u8]> {
        let rest = self.data.get(self.pos..).ok_or(Malformed("truncated"))?;
        let n = memchr::memchr(0, rest).ok_or(Malformed("unterminated path"))?;
        let s = self.take(n)?;
        self.take(1)?;
        Ok(s)
    }
}

const GITLINK: u32 = 0o160000;

/// An entry path that git itself refuses (see [`checkout_safe`]).
pub(super) const UNSAFE_PATH: Malformed = Malformed("a path git refuses to check out");

/// The name length field of an entry's flags: this value means "longer, count to NUL".
const NAMEMASK: usize = 0x0fff;
const EXTENDED: u16 = 0x4000;
/// The extended flags git knows (intent-to-add, skip-worktree); others make git refuse
/// the index.
const EXTENDED_KNOWN: u16 = 0x6000;
/// More entries than this (git's own limit is the memory of the host) is not an index.
const MAX_ENTRIES: u32 = 1 << 26;
/// A longer path than this is not read (sixteen times `PATH_MAX`; git itself can store
/// such paths but no checkout can have them).
const MAX_PATH: usize = 1 << 16;
/// All paths of one index together: beyond this the index is not read (not merged). A
/// version 4 index can grow each path from the previous one by a byte, so without this
/// bound a file of a few MiB asks for memory and copying quadratic in its size.
const MAX_PATH_BYTES: usize = 256 << 20;

/// Parses the index `data` written with object names of `hash` bytes.
fn parse(data: &[u8], hash: usize) -> R<Parsed> {
    let body_len = data
        .len()
        .checked_sub(hash)
        .ok_or(Malformed("shorter than its checksum"))?;
    let body = data.get(..body_len).ok_or(Malformed("truncated"))?;
    let mut c = Cursor { data: body, pos: 0 };
    if c.take(4)? != b"DIRC" {
        return Err(Malformed("not an index (signature)"));
    }
    let version = c.u32()?;
    if !(2..=4).contains(&version) {
        return Err(Malformed("unknown index version"));
    }
    let count = c.u32()?;
    if count > MAX_ENTRIES {
        return Err(Malformed("too many entries"));
    }
    let mut entries = Vec::new();
    let mut previous: Vec<u8> = Vec::new();
    let mut path_bytes: usize = 0;
    for _ in 0..count {
        let e = entry(&mut c, hash, version == 4, &previous)?;
        path_bytes = path_bytes.saturating_add(e.path.len());
        if path_bytes > MAX_PATH_BYTES {
            return Err(Malformed("paths too large"));
        }
        previous.clone_from(&e.path);
        entries.push(e);
    }
    let mut link = None;
    // Extensions, each `<4-byte signature><be32 size><data>`, up to the checksum.
    while c.pos < body.len() {
        let sig = c.take(4)?;
        let size = usize::try_from(c.u32()?).map_err(|_| Malformed("extension size"))?;
        let ext = c.take(size)?;
        // The entry offset table (with its end-of-entries marker) lets a threaded git read
        // entries from offsets of the writer's choosing, where this sequential reader
        // would not look; a sparse index hides entries in directory entries. Neither is
        // read: such an index is not merged.
        if sig == b"EOIE" || sig == b"IEOT" || sig == b"sdir" {
            return Err(Malformed("an extension this reader does not follow"));
        }
        if sig == b"link" {
            if link.is_some() {
                return Err(Malformed("two link extensions"));
            }
            link = Some(link_extension(ext, hash)?);
        } else if !sig.first().is_some_and(u8::is_ascii_uppercase) {
            // Git refuses an index with a required extension it does not know.
            return Err(Malformed("unknown required extension"));
        }
    }
    Ok(Parsed { entries, link })
}

/// One entry, as git's `create_from_disk` reads it.
fn entry(c: &mut Cursor<'_>, hash: usize, v4: bool, previous: &[u8]) -> R<Entry> {
    let start = c.pos;
    // ctime, mtime (8 bytes each), dev, ino.
    c.take(24)?;
    let mode = c.u32()?;
    // uid, gid, size, object name.
    c.take(12)?;
    c.take(hash)?;
    let flags = c.u16()?;
    if flags & EXTENDED != 0 && c.u16()? & !EXTENDED_KNOWN != 0 {
        return Err(Malformed("unknown extended flags"));
    }
    let len = usize::from(flags) & NAMEMASK;
    let stage = ((flags >> 12) & 3) as u8;
    let path = if v4 {
        let strip = c.varint()?;
        let copy = previous
            .len()
            .checked_sub(strip)
            .ok_or(Malformed("path prefix longer than the previous path"))?;
        let suffix = c.cstr()?;
        if copy.saturating_add(suffix.len()) > MAX_PATH {
            return Err(Malformed("path too long"));
        }
        let prefix = previous.get(..copy).ok_or(Malformed("path prefix"))?;
        if len != NAMEMASK && copy.checked_add(suffix.len()) != Some(len) {
            return Err(Malformed("path length"));
        }
        [prefix, suffix].concat()
    } else {
        let path = if len == NAMEMASK {
            c.cstr()?.to_vec()
        } else {
            let p = c.take(len)?.to_vec();
            if p.contains(&0) || c.take(1)? != [0] {
                return Err(Malformed("path length"));
            }
            p
        };
        // Padded with NULs to a multiple of 8 bytes: 1 to 8 of them in all.
        let end = start
            .checked_add(((c.pos - 1 - start) + 8) & !7)
            .ok_or(Malformed("length overflow"))?;
        let pad = c.take(end - c.pos)?;
        if pad.iter().any(|b| *b != 0) {
            return Err(Malformed("padding"));
        }
        path
    };
    if len == NAMEMASK && path.len() < NAMEMASK {
        return Err(Malformed("path length"));
    }
    if path.len() > MAX_PATH {
        return Err(Malformed("path too long"));
    }
    // Empty only as a split index's replacement entry, which keeps its base's path; the
    // callers refuse it anywhere else.
    if !path.is_empty() && !checkout_safe(&path, mode) {
        return Err(UNSAFE_PATH);
    }
    Ok(Entry {
        path,
        stage,
        gitlink: mode & 0o170000 == GITLINK,
        mode,
    })
}

/// The `link` extension: the shared index's name, then (optionally) the delete and the
/// replace bitmaps, read once the shared index's entry count bounds them.
fn link_extension(ext: &[u8], hash: usize) -> R<Link> {
    let base = ext
        .get(..hash)
        .ok_or(Malformed("link extension truncated"))?;
    let bitmaps = ext
        .get(hash..)
        .ok_or(Malformed("link extension truncated"))?;
    Ok(Link {
        base: base.to_vec(),
        bitmaps: bitmaps.to_vec(),
    })
}

/// The delete and replace bitmaps of a `link` extension, for a shared index of `count`
/// entries.
fn bitmaps(data: &[u8], count: usize) -> R<(Vec<usize>, Vec<usize>)> {
    if data.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut c = Cursor { data, pos: 0 };
    let delete = ewah(&mut c, count)?;
    let replace = ewah(&mut c, count)?;
    if c.pos != data.len() {
        return Err(Malformed("link extension size"));
    }
    Ok((delete, replace))
}

/// The set bits of an EWAH bitmap (git's `ewah/ewah_io.c`), ascending. A set bit at
/// `limit` or beyond (git: "exceeds base index size") is an error, and no run may reach
/// further than one word past it, so what a small bitmap claims stays bounded.
fn ewah(c: &mut Cursor<'_>, limit: usize) -> R<Vec<usize>> {
    // The bit count: `limit` bounds what matters.
    c.u32()?;
    let words = usize::try_from(c.u32()?).map_err(|_| Malformed("bitmap size"))?;
    let mut buffer = Vec::new();
    if words > c.data.len() / 8 {
        return Err(Malformed("bitmap truncated"));
    }
    for _ in 0..words {
        buffer.push(c.u64()?);
    }
    // The position of the last run-length word: not needed to read.
    c.u32()?;
    let mut set = Vec::new();
    let mut pos: usize = 0;
    let mut i = 0;
    let advance = |pos: usize, n: usize| -> R<usize> {
        pos.checked_add(n)
            .filter(|p| *p <= limit.saturating_add(64))
            .ok_or(Malformed("bitmap longer than its size"))
    };
    while let Some(&rlw) = buffer.get(i) {
        i += 1;
        let run = usize::try_from((rlw >> 1) & 0xffff_ffff)
            .ok()
            .and_then(|r| r.checked_mul(64))
            .ok_or(Malformed("bitmap run"))?;
        let literals = usize::try_from(rlw >> 33).map_err(|_| Malformed("bitmap run"))?;
        let end = advance(pos, run)?;
        if rlw & 1 != 0 {
            set.extend(pos..end);
        }
        pos = end;
        for _ in 0..literals {
            let w = *buffer.get(i).ok_or(Malformed("bitmap truncated"))?;
            i += 1;
            let end = advance(pos, 64)?;
            set.extend((0..64).filter(|b| w & (1u64 << b) != 0).map(|b| pos + b));
            pos = end;
        }
    }
    if set.last().is_some_and(|p| *p >= limit) {
        return Err(Malformed("bitmap bit beyond its size"));
    }
    Ok(set)
}

/// The gitlink paths of the index `data` (object names of `hash` bytes). `shared` gives
/// the contents of `sharedindex.<hex>` for a split index (`None`: missing).
pub(super) fn gitlinks(
    data: &[u8],
    hash: usize,
    shared: impl FnOnce(&str) -> R<Option<Vec<u8>>>,
) -> R<Gitlinks> {
    let index = parse(data, hash)?;
    let link = match index.link {
        Some(l) if l.base.iter().any(|b| *b != 0) => l,
        _ => {
            if index.entries.iter().any(|e| e.path.is_empty()) {
                return Err(Malformed("an entry without a path"));
            }
            let paths = index.entries.into_iter().filter(|e| e.gitlink);
            return Ok(paths.map(|e| e.path).collect());
        }
    };
    let name = hex::encode(&link.base);
    let base_data = shared(&name)?.ok_or(Malformed("shared index missing"))?;
    let base = parse(&base_data, hash)?;
    if base.link.is_some() {
        return Err(Malformed("shared index with a link extension"));
    }
    let (delete, replace) = bitmaps(&link.bitmaps, base.entries.len())?;
    split(base.entries, index.entries, &delete, &replace)
}

/// The entries of a split index, merged as git's `merge_base_index` does: the first
/// entries of the split file replace the base entries the replace bitmap names (keeping
/// their paths), the delete bitmap removes base entries, and the rest are added, a stage
/// 0 entry replacing every stage of its path.
fn split(base: Vec<Entry>, own: Vec<Entry>, delete: &[usize], replace: &[usize]) -> R<Gitlinks> {
    if replace.len() > own.len() {
        return Err(Malformed("more replacements than entries"));
    }
    let (replacements, added) = own.split_at(replace.len());
    let deleted: BTreeSet<usize> = delete.iter().copied().collect();
    let mut final_: BTreeMap<Vec<u8>, BTreeMap<u8, bool>> = BTreeMap::new();
    let count = base.len();
    if deleted.last().is_some_and(|d| *d >= count) {
        return Err(Malformed("bitmap position beyond the shared index"));
    }
    let mut replaced = replace.iter().zip(replacements).peekable();
    for (i, e) in base.into_iter().enumerate() {
        let (stage, gitlink) = match replaced.peek() {
            Some((pos, r)) if **pos == i => {
                if !r.path.is_empty() {
                    return Err(Malformed("a replacement entry with a path"));
                }
                if deleted.contains(&i) {
                    return Err(Malformed("an entry both replaced and deleted"));
                }
                // The replacement keeps the base's path with a mode of its own: a
                // `.gitmodules` made a symlink this way is refused as if written so.
                if !checkout_safe(&e.path, r.mode) {
                    return Err(UNSAFE_PATH);
                }
                let v = (r.stage, r.gitlink);
                replaced.next();
                v
            }
            _ if deleted.contains(&i) => continue,
            _ => (e.stage, e.gitlink),
        };
        final_.entry(e.path).or_default().insert(stage, gitlink);
    }
    // A replacement left over names a position beyond the base's entries.
    if replaced.next().is_some() {
        return Err(Malformed("bitmap position beyond the shared index"));
    }
    for e in added {
        if e.path.is_empty() {
            return Err(Malformed("an added entry without a path"));
        }
        let stages = final_.entry(e.path.clone()).or_default();
        if e.stage == 0 {
            stages.clear();
        }
        stages.insert(e.stage, e.gitlink);
    }
    Ok(final_
        .into_iter()
        .filter(|(_, s)| s.values().any(|g| *g))
        .map(|(p, _)| p)
        .collect())
}

pub(super) mod path;

#[cfg(test)]
mod tests;
