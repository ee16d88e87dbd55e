//! The history check of the merge: a ref update is merged only when no tree the program
//! made, reachable from the id it hands to the host, has a gitlink (submodule) at a path
//! that is not one in the host's index.
//!
//! The index check (`submodule.rs`) keeps a new submodule out of the index; but the program
//! can also commit a gitlink into `HEAD` (or a branch, a tag, `refs/stash`, `ORIG_HEAD`,
//! a reflog entry…) with a clean index. Git on the host then brings it into the index at
//! the next `reset --hard`, `stash pop`, `checkout` or `merge`, and `git status` runs git
//! in that checkout, with a config (`core.fsmonitor`) the program wrote.
//!
//! So before anything is merged, every object id that a ref file of the upper layer
//! names (loose refs and reflogs below `refs/` and `logs/`, `packed-refs`, `HEAD`, the
//! `*_HEAD` files, `AUTO_MERGE`) is walked (a changed file of `reftable/`, whose blocks
//! this does not read, is refused): commits to their tree and parents, tags to
//! their object, trees to their subtrees, down to objects the host's object database
//! already has (trusted). The objects walked are the upper layer's, loose or packed
//! (`objects.rs` reads them). A file whose walk finds a new gitlink, or that cannot be
//! walked (an object missing, unreadable, or over the bounds), is not merged: fail closed.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fstatat};

use super::GitDropReason;
use super::classify::{Kind, MAX_DEPTH, Top, kind, top};
use super::index::Gitlinks;
use super::objects::{self, Bad, GITLINK, SUBTREE, Type};
use super::read::{entries, open_dir_at};
use super::write::open_upper_file;

/// A ref file, reflog or `packed-refs` larger than this is not read: its update is refused.
const MAX_REF_FILE: u64 = 64 << 20;
/// At most this many objects are walked per merge.
const MAX_OBJECTS: usize = 1_000_000;
/// At most this many bytes are inflated per merge.
const MAX_INFLATED: usize = 4 << 30;
/// An upper pack (or its index) larger than this is not read.
const MAX_PACK: u64 = 4 << 30;

/// The ref files of the upper layer `upper` that must not be merged into the host's
/// `.git` (`host`, at `git`), by path below `.git`, and why.
pub(super) fn check(upper: &OwnedFd, host: &OwnedFd, git: &Path) -> Vec<(PathBuf, GitDropReason)> {
    // An unknown object format: git on the host refuses the repository itself.
    let hash = super::submodule::hash_size(host).unwrap_or(20);
    // A host index that cannot be read lists no submodule: every gitlink is new.
    let gitlinks = super::submodule::host_gitlinks(git).unwrap_or_default();
    refused(upper, host, hash, &gitlinks)
}

/// The ref files of the upper layer `upper` over the host's `.git` (`host`) that must not
/// be merged, by path below `.git`, and why. `hash`: the size of object ids; `gitlinks`:
/// the host's index's gitlink paths.
pub(super) fn refused(
    upper: &OwnedFd,
    host: &OwnedFd,
    hash: usize,
    gitlinks: &Gitlinks,
) -> Vec<(PathBuf, GitDropReason)> {
    let mut files = Vec::new();
    let mut deleted = Vec::new();
    collect(upper, Path::new(""), 0, &mut files, &mut deleted);
    let mut out = Vec::new();
    // Reftable's blocks are not read: none of its changes are merged, deletions neither
    // (the host's `tables.list` names the tables it has).
    let reftable = |p: &PathBuf| p.starts_with("reftable");
    for d in deleted.iter().filter(|p| reftable(p)) {
        out.push((d.clone(), GitDropReason::UnreadableHistory));
    }
    deleted.retain(|p| !reftable(p));
    if files.is_empty() {
        return out;
    }
    let mut store = Store::open(upper, host, hash);
    let mut done: HashMap<Vec<u8>, Result<(), GitDropReason>> = HashMap::new();
    for (rel, fd) in files {
        let verdict = match read_bounded(fd) {
            _ if rel.starts_with("reftable") => Err(GitDropReason::UnreadableHistory),
            None => Err(GitDropReason::UnreadableHistory),
            Some(data) => ids(&data, hash).into_iter().try_for_each(|id| {
                if let Some(r) = done.get(&id) {
                    return *r;
                }
                let r = store.walk(&id, gitlinks);
                done.insert(id, r);
                r
            }),
        };
        if let Err(reason) = verdict {
            // `pack-refs` moves loose refs into `packed-refs` and deletes them: with
            // `packed-refs` kept out, their deletions are too, or the host would lose them.
            if rel == Path::new("packed-refs") {
                out.extend(deleted.iter().map(|d: &PathBuf| (d.clone(), reason)));
            }
            out.push((rel, reason));
        }
    }
    out
}

/// The ref files of the upper directory `dir` (`rel` below `.git`), opened, and the
/// deleted ones (whiteouts) below `refs/`.
fn collect(
    dir: &OwnedFd,
    rel: &Path,
    depth: usize,
    out: &mut Vec<(PathBuf, OwnedFd)>,
    deleted: &mut Vec<PathBuf>,
) {
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(list) = entries(dir) else {
        return;
    };
    for (name, st) in list {
        let bytes = name.as_bytes();
        if depth == 0 {
            let wanted = match top(bytes) {
                Top::Area(_) => bytes == b"refs" || bytes == b"logs" || bytes == b"reftable",
                Top::Head => true,
                Top::File => {
                    bytes == b"packed-refs" || bytes == b"AUTO_MERGE" || bytes.ends_with(b"_HEAD")
                }
                Top::Other => false,
            };
            if !wanted {
                continue;
            }
        }
        let path = rel.join(&name);
        match kind(&st) {
            Kind::Dir => {
                if let Ok(d) = open_dir_at(dir, &name) {
                    collect(&d, &path, depth + 1, out, deleted);
                }
            }
            Kind::File if !bytes.ends_with(b".lock") => {
                if let Ok(fd) = open_upper_file(dir, &name) {
                    out.push((path, fd));
                }
            }
            Kind::Whiteout if path.starts_with("refs") || path.starts_with("reftable") => {
                deleted.push(path)
            }
            _ => {}
        }
    }
}

fn read_bounded(fd: OwnedFd) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    File::from(fd)
        .take(MAX_REF_FILE + 1)
        .read_to_end(&mut data)
        .ok()?;
    (data.len() as u64 <= MAX_REF_FILE).then_some(data)
}

/// The object ids a ref file names: on each line, the first two words that are full
/// object ids (a ref, `ref: …` naming none; a `packed-refs` line and its `^` peeled line;
/// a reflog line's old and new ids; `FETCH_HEAD`'s lines). The null id is none.
pub fn ids(data: &[u8], hash: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        let line = line.strip_prefix(b"^").unwrap_or(line);
        for word in line
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
            .take(2)
        {
            if let Some(id) = objects::hex_id(word, hash) {
                if id.iter().any(|b| *b != 0) {
                    out.push(id);
                }
            }
        }
    }
    out
}

/// One upper pack: its index, and the pack once read.
struct Pack {
    dir: OsString,
    name: OsString,
    idx: Vec<u8>,
    pack: Option<Result<Vec<u8>, ()>>,
}

/// The object databases: the host's (trusted) and the upper layer's (walked).
struct Store {
    hash: usize,
    host_objects: Option<OwnedFd>,
    host_idx: Vec<File>,
    upper_objects: Option<OwnedFd>,
    upper_packs: Vec<Pack>,
    walked: usize,
    budget: usize,
}

impl Store {
    fn open(upper: &OwnedFd, host: &OwnedFd, hash: usize) -> Store {
        let host_objects = open_dir_at(host, OsStr::new("objects")).ok();
        let mut host_idx = Vec::new();
        if let Some(pack) = host_objects
            .as_ref()
            .and_then(|o| open_dir_at(o, OsStr::new("pack")).ok())
        {
            for (name, st) in entries(&pack).unwrap_or_default() {
                if matches!(kind(&st), Kind::File) && name.as_bytes().ends_with(b".idx") {
                    // (Not `open_upper_file`: the host's files are never made readable.)
                    let flags =
                        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
                    if let Ok(fd) = openat(&pack, name.as_os_str(), flags, Mode::empty()) {
                        host_idx.push(File::from(fd));
                    }
                }
            }
        }
        let upper_objects = open_dir_at(upper, OsStr::new("objects")).ok();
        let mut upper_packs = Vec::new();
        if let Some(pack) = upper_objects
            .as_ref()
            .and_then(|o| open_dir_at(o, OsStr::new("pack")).ok())
        {
            for (name, st) in entries(&pack).unwrap_or_default() {
                let Some(stem) = name.as_bytes().strip_suffix(b".idx") else {
                    continue;
                };
                if !matches!(kind(&st), Kind::File) || st.st_size as u64 > MAX_PACK {
                    continue;
                }
                let Some(idx) = open_upper_file(&pack, &name).ok().and_then(|fd| {
                    let mut d = Vec::new();
                    File::from(fd).take(MAX_PACK).read_to_end(&mut d).ok()?;
                    Some(d)
                }) else {
                    continue;
                };
                let mut pack_name = stem.to_vec();
                pack_name.extend_from_slice(b".pack");
                upper_packs.push(Pack {
                    dir: OsString::from("pack"),
                    name: OsStr::from_bytes(&pack_name).to_owned(),
                    idx,
                    pack: None,
                });
            }
        }
        Store {
            hash,
            host_objects,
            host_idx,
            upper_objects,
            upper_packs,
            walked: 0,
            budget: MAX_INFLATED,
        }
    }

    /// Whether the host's object database has `id` (loose, or in one of its packs).
    fn host_has(&self, id: &[u8]) -> bool {
        let hex = hex::encode(id);
        if let Some(objects) = &self.host_objects {
            let path = format!("{}/{}", &hex[..2], &hex[2..]);
            if fstatat(objects, path.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
            {
                return true;
            }
        }
        self.host_idx.iter().any(|f| {
            let mut read = |at: u64, buf: &mut [u8]| f.read_exact_at(buf, at).is_ok();
            matches!(objects::idx_find(&mut read, self.hash, id), Ok(Some(_)))
        })
    }

    /// Every copy of `id` the upper layer holds (loose, and in each pack that lists it),
    /// read; none when it has no copy.
    fn upper_copies(&mut self, id: &[u8]) -> Result<Vec<(Type, Vec<u8>)>, Bad> {
        let mut copies = Vec::new();
        let hex = hex::encode(id);
        if let Some(objects) = &self.upper_objects {
            // A whiteout (git deleted the loose objects it packed), a symlink or anything
            // else the merge does not copy is no copy.
            let dir = match fstatat(objects, &hex[..2], AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if matches!(kind(&st), Kind::Dir) => {
                    open_dir_at(objects, OsStr::new(&hex[..2]))
                }
                Ok(_) => Err(Errno::ENOENT),
                Err(e) => Err(e),
            };
            let file = |dir: &OwnedFd| match fstatat(dir, &hex[2..], AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if matches!(kind(&st), Kind::File) => {
                    open_upper_file(dir, OsStr::new(&hex[2..]))
                }
                Ok(_) => Err(GitDropReason::Failed(Errno::ENOENT as i32)),
                Err(e) => Err(GitDropReason::Failed(e as i32)),
            };
            match dir {
                Ok(dir) => match file(&dir) {
                    Ok(fd) => {
                        let mut data = Vec::new();
                        File::from(fd)
                            .take(objects::MAX_OBJECT as u64 + 1)
                            .read_to_end(&mut data)
                            .map_err(|_| Bad("cannot read a loose object"))?;
                        if data.len() > objects::MAX_OBJECT {
                            return Err(Bad("object too large"));
                        }
                        copies.push(objects::loose(&data)?);
                    }
                    Err(GitDropReason::Failed(e)) if e == Errno::ENOENT as i32 => {}
                    Err(_) => return Err(Bad("cannot open a loose object")),
                },
                Err(Errno::ENOENT) => {}
                Err(_) => return Err(Bad("cannot open a loose object directory")),
            }
        }
        let hash = self.hash;
        for i in 0..self.upper_packs.len() {
            let Some(offset) = objects::idx_find_in(&self.upper_packs[i].idx, hash, id)? else {
                continue;
            };
            let p = &mut self.upper_packs[i];
            if p.pack.is_none() {
                p.pack = Some(read_pack(self.upper_objects.as_ref(), &p.dir, &p.name));
            }
            let Some(Ok(pack)) = &p.pack else {
                return Err(Bad("cannot read a pack"));
            };
            let idx = &p.idx;
            let mut find = |base: &[u8]| objects::idx_find_in(idx, hash, base).ok().flatten();
            copies.push(objects::pack_object(
                pack,
                offset,
                hash,
                &mut find,
                &mut self.budget,
            )?);
        }
        Ok(copies)
    }

    /// Walks what `root` reaches in the upper layer: `Err` when a tree has a gitlink at a
    /// path not in `gitlinks`, or an object cannot be read.
    fn walk(&mut self, root: &[u8], gitlinks: &Gitlinks) -> Result<(), GitDropReason> {
        let unreadable = |b: Bad| {
            tracing::debug!(why = b.0, "stockade: an object a ref names cannot be read");
            GitDropReason::UnreadableHistory
        };
        // (id, the path of the tree below the work tree, or None for a commit or tag)
        let mut stack: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![(root.to_vec(), None)];
        let mut seen: HashSet<(Vec<u8>, Option<Vec<u8>>)> = HashSet::new();
        while let Some((id, path)) = stack.pop() {
            if !seen.insert((id.clone(), path.clone())) || self.host_has(&id) {
                continue;
            }
            self.walked += 1;
            if self.walked > MAX_OBJECTS {
                return Err(unreadable(Bad("too many objects")));
            }
            let copies = self.upper_copies(&id).map_err(unreadable)?;
            if copies.is_empty() {
                return Err(unreadable(Bad("object missing")));
            }
            for (kind, body) in copies {
                match (kind, &path) {
                    (Type::Commit, None) => {
                        let (tree, parents) =
                            objects::commit(&body, self.hash).map_err(unreadable)?;
                        stack.push((tree, Some(Vec::new())));
                        stack.extend(parents.into_iter().map(|p| (p, None)));
                    }
                    (Type::Tag, None) => {
                        let object = objects::tag(&body, self.hash).map_err(unreadable)?;
                        stack.push((object, None));
                    }
                    (Type::Tree, Some(prefix)) => {
                        for e in objects::tree(&body, self.hash).map_err(unreadable)? {
                            let mut p = prefix.clone();
                            if !p.is_empty() {
                                p.push(b'/');
                            }
                            p.extend_from_slice(e.name);
                            if e.mode == GITLINK && !gitlinks.contains(&p) {
                                return Err(GitDropReason::NewSubmoduleInHistory);
                            }
                            if e.mode == SUBTREE {
                                stack.push((e.id.to_vec(), Some(p)));
                            }
                        }
                    }
                    (Type::Tree, None) => {
                        // A ref (or tag) naming a tree: `git read-tree`/`checkout <ref> -- .`
                        // put it at the top.
                        stack.push((id.clone(), Some(Vec::new())));
                    }
                    (Type::Blob, _) => {}
                    (_, Some(_)) => return Err(unreadable(Bad("not a tree where one should be"))),
                }
            }
        }
        Ok(())
    }
}

fn read_pack(objects: Option<&OwnedFd>, dir: &OsStr, name: &OsStr) -> Result<Vec<u8>, ()> {
    let dir = open_dir_at(objects.ok_or(())?, dir).map_err(drop)?;
    let fd = open_upper_file(&dir, name).map_err(drop)?;
    let mut data = Vec::new();
    File::from(fd)
        .take(MAX_PACK + 1)
        .read_to_end(&mut data)
        .map_err(drop)?;
    if data.len() as u64 > MAX_PACK {
        return Err(());
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_a_ref_file_names_are_found() {
        let a = "0123456789abcdef0123456789abcdef01234567";
        let b = "89ABCDEF0123456789abcdef0123456789abcdef";
        let zero = "0".repeat(40);
        let text = format!(
            "{a}\nref: refs/heads/main\n# pack-refs with: peeled\n{b} refs/tags/v1\n^{a}\n\
             {zero} {b} inside <i@x> 1 +0000\tcommit: x\n{a}\t\tbranch 'x' of y\n{a}x\n"
        );
        let hex: Vec<String> = ids(text.as_bytes(), 20).iter().map(hex::encode).collect();
        let (a, b) = (a.to_string(), b.to_ascii_lowercase());
        assert_eq!(hex, [&a, &b, &a, &b, &a].map(String::clone));
        assert!(ids(a.as_bytes(), 32).is_empty() && ids(b"", 20).is_empty());
    }
}
