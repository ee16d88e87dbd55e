//! Git's object formats, read from bytes: loose objects, trees, commits, tags, pack index
//! files (version 2), pack entries and their deltas. Pure functions over what a program
//! wrote, for the history check of the merge (`history.rs`); every size read from a field
//! is checked against a bound before anything is allocated for it, and nothing recurses.

use std::fmt;

/// The largest object (inflated, or rebuilt from its deltas) that is read: a larger one
/// fails the check.
pub const MAX_OBJECT: usize = 64 << 20;

/// The longest chain of deltas followed to rebuild one packed object (git's `gc
/// --aggressive` makes chains of 50; `repack --depth` allows up to 4095).
pub const MAX_DELTA_DEPTH: usize = 4096;

/// Why bytes are not the object they should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bad(pub &'static str);

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The four kinds of object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// A commit: a tree, parents.
    Commit,
    /// A tree: names, modes and object ids.
    Tree,
    /// A blob: a file's contents.
    Blob,
    /// An annotated tag: one object.
    Tag,
}

/// A tree entry's mode for a gitlink (a submodule's commit).
pub const GITLINK: u32 = 0o160000;
/// A tree entry's mode for a subtree.
pub const SUBTREE: u32 = 0o40000;

/// Inflates the zlib stream at the start of `data` (bytes after its end are ignored),
/// giving at most `limit` bytes; a stream that gives more fails.
///
/// # Errors
///
/// Not a zlib stream, truncated, or larger than `limit`.
pub fn inflate(data: &[u8], limit: usize) -> Result<Vec<u8>, Bad> {
    miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(data, limit).map_err(|e| {
        match e.status {
            miniz_oxide::inflate::TINFLStatus::HasMoreOutput => Bad("object too large"),
            _ => Bad("not a zlib stream"),
        }
    })
}

/// A loose object file (`objects/xx/yyyy…`): its type and contents.
///
/// # Errors
///
/// Not zlib, an unknown type, a size that is not the contents', or over [`MAX_OBJECT`].
pub fn loose(file: &[u8]) -> Result<(Type, Vec<u8>), Bad> {
    let data = inflate(file, MAX_OBJECT + 32)?;
    let nul = memchr::memchr(0, &data).ok_or(Bad("no object header"))?;
    let header = data.get(..nul).ok_or(Bad("no object header"))?;
    let space = memchr::memchr(b' ', header).ok_or(Bad("no object header"))?;
    let kind = match header.get(..space) {
        Some(b"commit") => Type::Commit,
        Some(b"tree") => Type::Tree,
        Some(b"blob") => Type::Blob,
        Some(b"tag") => Type::Tag,
        _ => return Err(Bad("unknown object type")),
    };
    let size = decimal(header.get(space + 1..).unwrap_or_default())?;
    let body = data.get(nul + 1..).unwrap_or_default();
    if size != body.len() || size > MAX_OBJECT {
        return Err(Bad("object size mismatch"));
    }
    Ok((kind, body.to_vec()))
}

fn decimal(digits: &[u8]) -> Result<usize, Bad> {
    if digits.is_empty() || digits.len() > 12 || (digits.len() > 1 && digits[0] == b'0') {
        return Err(Bad("bad decimal size"));
    }
    digits.iter().try_fold(0usize, |n, d| {
        if d.is_ascii_digit() {
            Ok(n * 10 + usize::from(d - b'0'))
        } else {
            Err(Bad("bad decimal size"))
        }
    })
}

/// One entry of a tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The mode, from its octal digits.
    pub mode: u32,
    /// The name (no `/`, not empty).
    pub name: &'a [u8],
    /// The object id (`hash` bytes).
    pub id: &'a [u8],
}

/// The entries of a tree object's contents, for object ids of `hash` bytes.
///
/// # Errors
///
/// A mode that is not octal, an empty name or one with a `/`, a truncated entry.
pub fn tree(body: &[u8], hash: usize) -> Result<Vec<Entry<'_>>, Bad> {
    let mut entries = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let space = memchr::memchr(b' ', rest).ok_or(Bad("tree entry without a mode"))?;
        let digits = rest.get(..space).unwrap_or_default();
        if digits.is_empty() || digits.len() > 7 {
            return Err(Bad("bad tree entry mode"));
        }
        let mut mode = 0u32;
        for d in digits {
            if !(b'0'..=b'7').contains(d) {
                return Err(Bad("bad tree entry mode"));
            }
            mode = mode * 8 + u32::from(d - b'0');
        }
        rest = rest.get(space + 1..).unwrap_or_default();
        let nul = memchr::memchr(0, rest).ok_or(Bad("tree entry without a name"))?;
        let name = rest.get(..nul).unwrap_or_default();
        if name.is_empty() || name.contains(&b'/') {
            return Err(Bad("bad tree entry name"));
        }
        let id = rest
            .get(nul + 1..nul + 1 + hash)
            .ok_or(Bad("truncated tree entry"))?;
        rest = rest.get(nul + 1 + hash..).unwrap_or_default();
        entries.push(Entry { mode, name, id });
    }
    Ok(entries)
}

/// The object id a header line `<key> <hex>` names, if this line is one.
fn header_id(line: &[u8], key: &[u8], hash: usize) -> Option<Result<Vec<u8>, Bad>> {
    let rest = line.strip_prefix(key)?.strip_prefix(b" ")?;
    Some(hex_id(rest, hash).ok_or(Bad("bad object id in a header")))
}

/// `hex` (exactly `2 * hash` hex digits, any case) as an object id.
pub fn hex_id(hex: &[u8], hash: usize) -> Option<Vec<u8>> {
    if hex.len() != 2 * hash {
        return None;
    }
    hex::decode(hex).ok()
}

/// A commit's tree and parents, as git reads them: `tree` on the first line, then its
/// `parent` lines.
///
/// # Errors
///
/// No `tree` line first, or an id that is not one.
pub fn commit(body: &[u8], hash: usize) -> Result<(Vec<u8>, Vec<Vec<u8>>), Bad> {
    let mut lines = body.split(|b| *b == b'\n');
    let tree = lines
        .next()
        .and_then(|l| header_id(l, b"tree", hash))
        .ok_or(Bad("commit without a tree"))??;
    let mut parents = Vec::new();
    for line in lines {
        match header_id(line, b"parent", hash) {
            Some(id) => parents.push(id?),
            None => break,
        }
    }
    Ok((tree, parents))
}

/// The object an annotated tag names (its `object` line, the first).
///
/// # Errors
///
/// No `object` line first, or an id that is not one.
pub fn tag(body: &[u8], hash: usize) -> Result<Vec<u8>, Bad> {
    body.split(|b| *b == b'\n')
        .next()
        .and_then(|l| header_id(l, b"object", hash))
        .ok_or(Bad("tag without an object"))?
}

/// Where the object `id` lies in the pack of the index (version 2) read through `read`
/// (`read(offset, buf)` fills `buf` from the index file at `offset`, false past its end).
/// `None`: not in this pack.
///
/// # Errors
///
/// Not an index of version 2, or one whose tables contradict each other.
pub fn idx_find(
    read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
    hash: usize,
    id: &[u8],
) -> Result<Option<u64>, Bad> {
    let bad = Bad("bad pack index");
    let mut header = [0u8; 8];
    if !read(0, &mut header) || header != [0xff, b't', b'O', b'c', 0, 0, 0, 2] {
        return Err(bad);
    }
    let first = *id.first().ok_or(bad)?;
    let word = |read: &mut dyn FnMut(u64, &mut [u8]) -> bool, at: u64| {
        let mut w = [0u8; 4];
        read(at, &mut w).then(|| u32::from_be_bytes(w)).ok_or(bad)
    };
    let total = u64::from(word(read, 8 + 255 * 4)?);
    let lo = if first == 0 {
        0
    } else {
        u64::from(word(read, 8 + (u64::from(first) - 1) * 4)?)
    };
    let hi = u64::from(word(read, 8 + u64::from(first) * 4)?);
    if lo > hi || hi > total {
        return Err(bad);
    }
    let names = 8 + 256 * 4;
    let hash64 = hash as u64;
    let (mut lo, mut hi) = (lo, hi);
    let mut name = vec![0u8; hash];
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if !read(names + mid * hash64, &mut name) {
            return Err(bad);
        }
        match name.as_slice().cmp(id) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => {
                let offsets = names + total * hash64 + total * 4;
                let small = word(read, offsets + mid * 4)?;
                if small & 0x8000_0000 == 0 {
                    return Ok(Some(u64::from(small)));
                }
                let large = offsets + total * 4 + u64::from(small & 0x7fff_ffff) * 8;
                let mut big = [0u8; 8];
                if !read(large, &mut big) {
                    return Err(bad);
                }
                return Ok(Some(u64::from_be_bytes(big)));
            }
        }
    }
    Ok(None)
}

/// [`idx_find`] over an index held in memory.
///
/// # Errors
///
/// As [`idx_find`].
pub fn idx_find_in(idx: &[u8], hash: usize, id: &[u8]) -> Result<Option<u64>, Bad> {
    idx_find(
        &mut |at, buf| {
            let Ok(at) = usize::try_from(at) else {
                return false;
            };
            match idx.get(at..at.saturating_add(buf.len())) {
                Some(s) if s.len() == buf.len() => {
                    buf.copy_from_slice(s);
                    true
                }
                _ => false,
            }
        },
        hash,
        id,
    )
}

/// One pack entry's header: its type number, declared size, and where its data starts.
fn entry_header(pack: &[u8], at: usize) -> Result<(u8, usize, usize), Bad> {
    let bad = Bad("bad pack entry header");
    let mut pos = at;
    let mut b = *pack.get(pos).ok_or(bad)?;
    pos += 1;
    let kind = (b >> 4) & 7;
    let mut size = u64::from(b & 0x0f);
    let mut shift = 4;
    while b & 0x80 != 0 {
        b = *pack.get(pos).ok_or(bad)?;
        pos += 1;
        if shift > 56 {
            return Err(bad);
        }
        size |= u64::from(b & 0x7f) << shift;
        shift += 7;
    }
    let size = usize::try_from(size).map_err(|_| bad)?;
    if size > MAX_OBJECT {
        return Err(Bad("object too large"));
    }
    Ok((kind, size, pos))
}

/// The object at `offset` in `pack` (a whole pack file), rebuilt from its deltas:
/// `find(id)` gives the offset of a `REF_DELTA` base in the same pack. `budget` is the
/// number of bytes that may still be inflated; it is decreased.
///
/// # Errors
///
/// A header, zlib stream or delta that is not one, a base not in the pack, a chain longer
/// than [`MAX_DELTA_DEPTH`], an object over [`MAX_OBJECT`], or the budget spent.
pub fn pack_object(
    pack: &[u8],
    offset: u64,
    hash: usize,
    find: &mut dyn FnMut(&[u8]) -> Option<u64>,
    budget: &mut usize,
) -> Result<(Type, Vec<u8>), Bad> {
    let take = |data: &[u8], size: usize, budget: &mut usize| -> Result<Vec<u8>, Bad> {
        if size > *budget {
            return Err(Bad("inflate budget spent"));
        }
        let out = inflate(data, size)?;
        if out.len() != size {
            return Err(Bad("pack entry size mismatch"));
        }
        *budget -= size;
        Ok(out)
    };
    if pack.get(..4) != Some(b"PACK") {
        return Err(Bad("not a pack"));
    }
    let end = pack.len().checked_sub(hash).ok_or(Bad("truncated pack"))?;
    let body = pack.get(..end).ok_or(Bad("truncated pack"))?;
    let mut at = usize::try_from(offset).map_err(|_| Bad("bad pack offset"))?;
    // The deltas from the object asked for down to its base: (data start, size).
    let mut chain: Vec<(usize, usize)> = Vec::new();
    let (kind, base) = loop {
        if at < 12 || at >= body.len() {
            return Err(Bad("bad pack offset"));
        }
        let (kind, size, data) = entry_header(body, at)?;
        match kind {
            1..=4 => {
                let rest = body.get(data..).unwrap_or_default();
                break (kind, take(rest, size, budget)?);
            }
            6 => {
                let bad = Bad("bad delta offset");
                let mut pos = data;
                let mut b = *body.get(pos).ok_or(bad)?;
                pos += 1;
                let mut back = u64::from(b & 0x7f);
                while b & 0x80 != 0 {
                    b = *body.get(pos).ok_or(bad)?;
                    pos += 1;
                    back = back
                        .checked_add(1)
                        .and_then(|n| n.checked_mul(128))
                        .ok_or(bad)?
                        | u64::from(b & 0x7f);
                }
                let back = usize::try_from(back).map_err(|_| bad)?;
                chain.push((pos, size));
                at = at.checked_sub(back).filter(|_| back > 0).ok_or(bad)?;
            }
            7 => {
                let id = body
                    .get(data..data + hash)
                    .ok_or(Bad("truncated delta base"))?;
                chain.push((data + hash, size));
                let base = find(id).ok_or(Bad("delta base not in the pack"))?;
                at = usize::try_from(base).map_err(|_| Bad("bad pack offset"))?;
            }
            _ => return Err(Bad("unknown pack entry type")),
        }
        if chain.len() > MAX_DELTA_DEPTH {
            return Err(Bad("delta chain too long"));
        }
    };
    let mut object = base;
    for &(data, size) in chain.iter().rev() {
        let delta = take(body.get(data..).unwrap_or_default(), size, budget)?;
        object = apply_delta(&object, &delta)?;
    }
    let kind = match kind {
        1 => Type::Commit,
        2 => Type::Tree,
        3 => Type::Blob,
        _ => Type::Tag,
    };
    Ok((kind, object))
}

fn varint(data: &[u8], pos: &mut usize) -> Result<usize, Bad> {
    let bad = Bad("bad delta size");
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let b = *data.get(*pos).ok_or(bad)?;
        *pos += 1;
        if shift > 56 {
            return Err(bad);
        }
        n |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return usize::try_from(n).map_err(|_| bad);
        }
    }
}

/// The object a git delta makes of `base`.
///
/// # Errors
///
/// A base of another size than the delta's, a result over [`MAX_OBJECT`] or of another
/// size than declared, a copy out of the base, a truncated or zero instruction.
pub fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, Bad> {
    let mut pos = 0;
    if varint(delta, &mut pos)? != base.len() {
        return Err(Bad("delta base size mismatch"));
    }
    let size = varint(delta, &mut pos)?;
    if size > MAX_OBJECT {
        return Err(Bad("object too large"));
    }
    let mut out = Vec::with_capacity(size);
    let bad = Bad("bad delta instruction");
    while let Some(&op) = delta.get(pos) {
        pos += 1;
        if op & 0x80 != 0 {
            let mut arg = |bits: u8, shift: u32, v: &mut usize| -> Result<(), Bad> {
                if op & bits != 0 {
                    *v |= usize::from(*delta.get(pos).ok_or(bad)?) << shift;
                    pos += 1;
                }
                Ok(())
            };
            let (mut off, mut len) = (0usize, 0usize);
            arg(0x01, 0, &mut off)?;
            arg(0x02, 8, &mut off)?;
            arg(0x04, 16, &mut off)?;
            arg(0x08, 24, &mut off)?;
            arg(0x10, 0, &mut len)?;
            arg(0x20, 8, &mut len)?;
            arg(0x40, 16, &mut len)?;
            if len == 0 {
                len = 0x10000;
            }
            let piece = base.get(off..off.checked_add(len).ok_or(bad)?).ok_or(bad)?;
            if out.len() + piece.len() > size {
                return Err(Bad("delta result larger than declared"));
            }
            out.extend_from_slice(piece);
        } else if op != 0 {
            let piece = delta.get(pos..pos + usize::from(op)).ok_or(bad)?;
            pos += usize::from(op);
            if out.len() + piece.len() > size {
                return Err(Bad("delta result larger than declared"));
            }
            out.extend_from_slice(piece);
        } else {
            return Err(bad);
        }
    }
    if out.len() != size {
        return Err(Bad("delta result size mismatch"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        out.stdout
    }

    fn id(dir: &Path, rev: &str) -> Vec<u8> {
        let out = git(dir, &["rev-parse", rev]);
        hex::decode(out.trim_ascii()).unwrap()
    }

    /// A repository with a few commits of related trees (so that `gc` makes deltas) and a
    /// gitlink.
    fn repo() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        git(d, &["init", "-q"]);
        std::fs::create_dir(d.join("sub")).unwrap();
        for round in 0..6 {
            for i in 0..40 {
                let text = format!("file {i}\n{}\nround {round}\n", "line\n".repeat(50 + i));
                std::fs::write(d.join(format!("sub/f{i}")), text).unwrap();
            }
            git(d, &["add", "."]);
            git(d, &["commit", "-q", "-m", &format!("round {round}")]);
        }
        let head = hex::encode(id(d, "HEAD"));
        git(
            d,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{head},link"),
            ],
        );
        git(d, &["commit", "-q", "-m", "gitlink"]);
        git(d, &["tag", "-a", "-m", "tag", "v1"]);
        t
    }

    fn object_of(d: &Path, id: &[u8]) -> (Type, Vec<u8>) {
        let hex = hex::encode(id);
        let kind = git(d, &["cat-file", "-t", &hex]);
        let body = git(d, &["cat-file", kind.trim_ascii().to_str_lossy(), &hex]);
        let kind = match kind.trim_ascii() {
            b"commit" => Type::Commit,
            b"tree" => Type::Tree,
            b"blob" => Type::Blob,
            _ => Type::Tag,
        };
        (kind, body)
    }

    trait Lossy {
        fn to_str_lossy(&self) -> &str;
    }
    impl Lossy for [u8] {
        fn to_str_lossy(&self) -> &str {
            std::str::from_utf8(self).unwrap()
        }
    }

    #[test]
    fn loose_objects_written_by_git_read_as_git_reads_them() {
        let t = repo();
        let d = t.path();
        let head = id(d, "HEAD");
        let hex = hex::encode(&head);
        let file =
            std::fs::read(d.join(format!(".git/objects/{}/{}", &hex[..2], &hex[2..]))).unwrap();
        let (kind, body) = loose(&file).unwrap();
        assert_eq!((kind, body.clone()), object_of(d, &head));
        let (tree_id, parents) = commit(&body, 20).unwrap();
        assert_eq!(tree_id, id(d, "HEAD^{tree}"));
        assert_eq!(parents, vec![id(d, "HEAD~1")]);
        let hex = hex::encode(&tree_id);
        let file =
            std::fs::read(d.join(format!(".git/objects/{}/{}", &hex[..2], &hex[2..]))).unwrap();
        let (kind, body) = loose(&file).unwrap();
        assert_eq!(kind, Type::Tree);
        let entries = tree(&body, 20).unwrap();
        let link = entries.iter().find(|e| e.name == b"link").unwrap();
        assert_eq!((link.mode, link.id), (GITLINK, head_parent(d).as_slice()));
        let sub = entries.iter().find(|e| e.name == b"sub").unwrap();
        assert_eq!(sub.mode, SUBTREE);
        let tag_id = id(d, "v1");
        let (kind, body) = object_of(d, &tag_id);
        assert_eq!((kind, tag(&body, 20).unwrap()), (Type::Tag, head));
        // Every truncation and a flipped header fail, none panics.
        for n in 0..file.len() {
            assert!(loose(&file[..n]).is_err());
        }
        for n in 0..body.len() {
            let _ = tree(&body[..n], 20);
        }
    }

    fn head_parent(d: &Path) -> Vec<u8> {
        id(d, "HEAD~1")
    }

    #[test]
    fn packed_objects_and_their_deltas_read_as_git_reads_them() {
        let t = repo();
        let d = t.path();
        git(d, &["gc", "-q", "--aggressive"]);
        let packs: Vec<_> = std::fs::read_dir(d.join(".git/objects/pack"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "idx"))
            .collect();
        assert_eq!(packs.len(), 1);
        let idx = std::fs::read(&packs[0]).unwrap();
        let pack = std::fs::read(packs[0].with_extension("pack")).unwrap();
        let listing = git(d, &["verify-pack", "-v", packs[0].to_str().unwrap()]);
        let mut deltas = 0;
        let mut checked = 0;
        for line in listing.split(|b| *b == b'\n') {
            let words: Vec<&[u8]> = line
                .split(|b| *b == b' ')
                .filter(|w| !w.is_empty())
                .collect();
            if words.len() < 5 || words[0].len() != 40 {
                continue;
            }
            let oid = hex::decode(words[0]).unwrap();
            let offset: u64 = words[4].to_str_lossy().parse().unwrap();
            assert_eq!(idx_find_in(&idx, 20, &oid).unwrap(), Some(offset));
            let mut budget = usize::MAX;
            let mut find = |base: &[u8]| idx_find_in(&idx, 20, base).ok().flatten();
            let got = pack_object(&pack, offset, 20, &mut find, &mut budget).unwrap();
            assert_eq!(got, object_of(d, &oid));
            deltas += usize::from(words.len() > 6);
            checked += 1;
        }
        assert!(deltas > 10 && checked > 200, "{deltas} deltas of {checked}");
        assert_eq!(idx_find_in(&idx, 20, &[0xab; 20]).unwrap(), None);
        // A budget too small fails; truncated indexes and packs fail without a panic.
        let head = id(d, "HEAD");
        let at = idx_find_in(&idx, 20, &head).unwrap().unwrap();
        let mut none = |_: &[u8]| None;
        assert!(pack_object(&pack, at, 20, &mut none, &mut 10).is_err());
        for n in (0..idx.len()).step_by(97) {
            let _ = idx_find_in(&idx[..n], 20, &head);
        }
        for n in (0..pack.len()).step_by(997) {
            let _ = pack_object(&pack[..n], at, 20, &mut none, &mut usize::MAX.clone());
        }
    }

    #[test]
    fn deltas_are_bounded() {
        // base size 3, result 5: copy 3 from 0, insert "de".
        assert_eq!(
            apply_delta(b"abc", &[3, 5, 0x91, 0, 3, 2, b'd', b'e']).unwrap(),
            b"abcde"
        );
        assert!(apply_delta(b"abc", &[4, 5]).is_err());
        assert!(apply_delta(b"abc", &[3, 2, 0x91, 0, 3]).is_err());
        assert!(apply_delta(b"abc", &[3, 5, 0x91, 1, 3]).is_err());
        assert!(apply_delta(b"abc", &[3, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
        assert!(apply_delta(b"abc", &[3, 1, 0]).is_err());
    }
}
