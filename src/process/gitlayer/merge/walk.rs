//! The walk over one upper layer: each entry merged or dropped, and every drop reported
//! (the first [`GitDrop::MAX_REPORTED`], then a count).

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::stat::{FileStat, fstat};

use super::classify::{Area, Kind, MAX_DEPTH, R, Top, failed, kind, temporary, top};
use super::history;
use super::read::{
    entries, is_opaque, open_beneath_root, open_dir_at, open_upper_dir, read_host, unchanged,
};
use super::refs::{self, RefFile};
use super::submodule::{self, Load};
use super::write::{host_dir, load, remove, write_bytes, write_file};
use super::{GitConfigChange, GitDrop, GitDropReason, Layer};

impl Layer {
    pub(super) fn merge(&self) -> (Vec<GitDrop>, Vec<GitConfigChange>) {
        let Some(upper) = &self.upper else {
            return (Vec::new(), Vec::new());
        };
        let mut m = Merge {
            git: self.git.clone(),
            dropped: Vec::new(),
            more: 0,
            refused: Vec::new(),
            config: Vec::new(),
            keep_out: Vec::new(),
        };
        if let Err(e) = m.run(self, upper) {
            m.drop(Path::new(""), e);
        }
        if m.more > 0 {
            m.dropped.push(GitDrop {
                path: self.git.clone(),
                reason: GitDropReason::More(m.more),
            });
        }
        (m.dropped, m.config)
    }
}

/// Merges an upper directory of a `.git` that is not a command's layer (a change set's
/// `upper/.git`, [`crate::changes`]) into the host's `.git` at `git`, by the same walk and
/// with the same validation as a layer's merge. `identity` is the host `.git`'s (device,
/// inode) as the caller opened it: a `.git` replaced since is not written. The paths
/// `keep_out` (relative to `.git`, with what is below them) are left out without a drop:
/// the caller reports them.
pub(super) fn merge_dir(
    git: &Path,
    identity: (u64, u64),
    upper: &OwnedFd,
    keep_out: Vec<PathBuf>,
) -> (Vec<GitDrop>, Vec<GitConfigChange>) {
    let mut m = Merge {
        git: git.to_path_buf(),
        dropped: Vec::new(),
        more: 0,
        refused: Vec::new(),
        config: Vec::new(),
        keep_out,
    };
    if let Err(e) = m.run_upper(git, identity, upper) {
        m.drop(Path::new(""), e);
    }
    if m.more > 0 {
        m.dropped.push(GitDrop {
            path: git.to_path_buf(),
            reason: GitDropReason::More(m.more),
        });
    }
    (m.dropped, m.config)
}

/// One merge into one host `.git`.
pub(super) struct Merge {
    git: PathBuf,
    dropped: Vec<GitDrop>,
    more: usize,
    /// The ref files whose history has a new submodule or cannot be read (`history.rs`).
    refused: Vec<(PathBuf, GitDropReason)>,
    /// The config variables the program changed, merged or dropped (`config.rs`).
    config: Vec<GitConfigChange>,
    /// Paths below `.git` left out without a drop ([`merge_dir`]'s caller reports them).
    keep_out: Vec<PathBuf>,
}

impl Merge {
    fn kept_out(&self, rel: &Path) -> bool {
        self.keep_out.iter().any(|k| rel.starts_with(k))
    }

    fn drop(&mut self, rel: &Path, reason: GitDropReason) {
        if self.dropped.len() < GitDrop::MAX_REPORTED {
            let path = if rel.as_os_str().is_empty() {
                self.git.clone()
            } else {
                self.git.join(rel)
            };
            self.dropped.push(GitDrop { path, reason });
        } else {
            self.more += 1;
        }
    }

    fn run(&mut self, layer: &Layer, fs: &OwnedFd) -> R {
        let upper = open_dir_at(fs, OsStr::new("upper")).map_err(failed)?;
        self.run_upper(&layer.git, layer.identity, &upper)
    }

    /// Merges the upper directory `upper` into the host's `.git` at `git`, which must
    /// still be the directory of identity `identity` (device, inode).
    fn run_upper(&mut self, git: &Path, identity: (u64, u64), upper: &OwnedFd) -> R {
        let host = match open_beneath_root(git) {
            Ok(fd) => fd,
            Err(Errno::ENOENT | Errno::ELOOP | Errno::ENOTDIR) => {
                return Err(GitDropReason::Replaced);
            }
            Err(e) => return Err(failed(e)),
        };
        let st = fstat(&host).map_err(failed)?;
        if (st.st_dev, st.st_ino) != identity {
            return Err(GitDropReason::Replaced);
        }
        // In git's own order: objects before the refs that name them, refs before `HEAD`
        // and the index, so that git on the host never sees a name without its object.
        let mut list = entries(upper).map_err(failed)?;
        list.sort_by_key(|(name, _)| match top(name.as_bytes()) {
            Top::Area(Area::Objects) => 0,
            Top::Area(Area::Refs) => 1,
            _ if name == "packed-refs" => 1,
            _ => 2,
        });
        // Every file the merge checks is read once, checked, and exactly those bytes are
        // written: nothing is opened on the layer again after its check. An index that
        // lists a submodule the host's did not stays out, with its shared index files
        // (`submodule.rs`); everything else still merges.
        let loaded = submodule::load(upper, &list);
        let index = if loaded.is_empty() {
            Ok(())
        } else {
            submodule::check(&loaded, &host)
        };
        // Refs are checked against the host's object format (its config: the program's
        // is never merged).
        let hash = submodule::hash_size(&host).ok();
        // Before any object is merged (the walk trusts what the host has): the ref files
        // whose new ids reach a new submodule stay out (`history.rs`).
        self.refused = history::check(upper, &host, git);
        for (name, st) in list {
            let rel = PathBuf::from(&name);
            if self.kept_out(&rel) {
                continue;
            }
            let r = match (loaded.get(&name), &index) {
                (Some(Load::Refused(reason)), _) | (Some(_), Err(reason)) => Err(*reason),
                (Some(Load::Bytes(data, st)), Ok(())) => self
                    .history(&rel)
                    .and_then(|()| write_bytes(&host, &name, data, st, None).map(drop)),
                (Some(Load::Gone), Ok(())) => remove(&host, &name, 0).map_err(failed),
                (None, _) => self.top_entry(upper, &host, &name, &st, &rel, hash),
            };
            if let Err(reason) = r {
                self.drop(&rel, reason);
            }
        }
        Ok(())
    }

    /// `Err` for a ref file the history check refused.
    fn history(&self, rel: &Path) -> R {
        match self.refused.iter().find(|(p, _)| p == rel) {
            Some((_, reason)) => Err(*reason),
            None => Ok(()),
        }
    }

    fn top_entry(
        &mut self,
        upper: &OwnedFd,
        host: &OwnedFd,
        name: &OsStr,
        st: &FileStat,
        rel: &Path,
        hash: Option<usize>,
    ) -> R {
        self.history(rel)?;
        let class = top(name.as_bytes());
        match (kind(st), class) {
            (Kind::Other, _) => Err(GitDropReason::NotAFile),
            (Kind::File, _) if temporary(name.as_bytes(), None) => Err(GitDropReason::Temporary),
            (Kind::Dir, Top::Area(area)) => {
                let u = open_upper_dir(upper, name, st).map_err(failed)?;
                let h = host_dir(host, name, st, area).map_err(failed)?;
                self.dir(&u, &h, rel, area, 1, hash);
                Ok(())
            }
            (Kind::File, Top::File | Top::Head) => match RefFile::of(name.as_bytes()) {
                Some(file) => checked_top(upper, host, name, file, hash),
                None => write_file(upper, host, name, None).map(drop),
            },
            (Kind::Whiteout, Top::File) => remove(host, name, 0).map_err(failed),
            // `config`: its allowlisted changes, checked (`config.rs`).
            (Kind::File, Top::Other) if name == "config" && !unchanged(upper, Some(host), name) => {
                let (changes, r) = super::config::merge_file(upper, host, &self.git.join(name));
                let refused = changes
                    .iter()
                    .filter(|c| c.outcome != super::GitConfigOutcome::Merged)
                    .count();
                self.config.extend(changes);
                r?;
                if refused > 0 {
                    return Err(GitDropReason::ConfigKeys(refused));
                }
                Ok(())
            }
            (Kind::Dir, _) => {
                self.drop_tree(
                    upper,
                    Some(host),
                    name,
                    st,
                    rel,
                    0,
                    GitDropReason::NotMerged,
                );
                Ok(())
            }
            (Kind::File, _) if unchanged(upper, Some(host), name) => Ok(()),
            (Kind::File | Kind::Whiteout, _) => Err(GitDropReason::NotMerged),
        }
    }

    /// Merges the upper directory `upper` into the host directory `host` (`rel` below
    /// `.git`, in `area`, `depth` levels down).
    fn dir(
        &mut self,
        upper: &OwnedFd,
        host: &OwnedFd,
        rel: &Path,
        area: Area,
        depth: usize,
        hash: Option<usize>,
    ) {
        let list = match entries(upper) {
            Ok(l) => l,
            Err(e) => return self.drop(rel, failed(e)),
        };
        for (name, st) in &list {
            let rel = rel.join(name);
            if self.kept_out(&rel) {
                continue;
            }
            let r = self.entry(upper, host, name, st, &rel, area, depth, hash);
            if let Err(reason) = r {
                self.drop(&rel, reason);
            }
        }
        // An opaque directory: the program removed it and made it anew, so what the host
        // has here and the layer does not was deleted.
        if is_opaque(upper) {
            let kept: Vec<&OsString> = list.iter().map(|(n, _)| n).collect();
            let host_list = match entries(host) {
                Ok(l) => l,
                Err(e) => return self.drop(rel, failed(e)),
            };
            for (name, _) in host_list {
                if kept.contains(&&name) || name.as_bytes().ends_with(b".lock") {
                    continue;
                }
                let rel = rel.join(&name);
                let r = match area {
                    Area::Objects => Err(GitDropReason::ObjectChange),
                    Area::Refs => remove(host, &name, depth).map_err(failed),
                };
                if let Err(reason) = r {
                    self.drop(&rel, reason);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn entry(
        &mut self,
        upper: &OwnedFd,
        host: &OwnedFd,
        name: &OsStr,
        st: &FileStat,
        rel: &Path,
        area: Area,
        depth: usize,
        hash: Option<usize>,
    ) -> R {
        self.history(rel)?;
        // Replacement refs and their reflogs: never merged, whatever they hold (a
        // deletion included: the host's own stay as they are).
        if area == Area::Refs
            && (under_ci(rel, "refs/replace") || under_ci(rel, "logs/refs/replace"))
        {
            return match kind(st) {
                Kind::Dir => {
                    self.drop_tree(
                        upper,
                        Some(host),
                        name,
                        st,
                        rel,
                        depth,
                        GitDropReason::ReplaceRef,
                    );
                    Ok(())
                }
                Kind::File if unchanged(upper, Some(host), name) => Ok(()),
                _ => Err(GitDropReason::ReplaceRef),
            };
        }
        // A loose ref's name: each directory and file under `refs/` is a component git
        // would take.
        if area == Area::Refs
            && rel.starts_with("refs")
            && !matches!(kind(st), Kind::Whiteout)
            && !(matches!(kind(st), Kind::File) && temporary(name.as_bytes(), Some(area)))
            && refs::component(name.as_bytes()).is_err()
        {
            return match kind(st) {
                Kind::Dir => {
                    self.drop_tree(
                        upper,
                        Some(host),
                        name,
                        st,
                        rel,
                        depth,
                        GitDropReason::InvalidRef,
                    );
                    Ok(())
                }
                _ => Err(GitDropReason::InvalidRef),
            };
        }
        // `objects/info/`: alternates (objects from elsewhere), commit-graph chains.
        if area == Area::Objects && depth == 1 && name.eq_ignore_ascii_case("info") {
            return match kind(st) {
                Kind::Dir => {
                    self.drop_tree(
                        upper,
                        Some(host),
                        name,
                        st,
                        rel,
                        depth,
                        GitDropReason::NotMerged,
                    );
                    Ok(())
                }
                Kind::Other => Err(GitDropReason::NotAFile),
                Kind::File if unchanged(upper, Some(host), name) => Ok(()),
                _ => Err(GitDropReason::NotMerged),
            };
        }
        match kind(st) {
            Kind::Other => Err(GitDropReason::NotAFile),
            Kind::Whiteout => match area {
                Area::Objects => Err(GitDropReason::ObjectChange),
                Area::Refs => remove(host, name, depth).map_err(failed),
            },
            Kind::Dir if depth >= MAX_DEPTH => Err(GitDropReason::NotMerged),
            Kind::Dir => {
                let u = open_upper_dir(upper, name, st).map_err(failed)?;
                let h = host_dir(host, name, st, area).map_err(failed)?;
                self.dir(&u, &h, rel, area, depth + 1, hash);
                Ok(())
            }
            Kind::File if temporary(name.as_bytes(), Some(area)) => Err(GitDropReason::Temporary),
            // A loose ref: read once, checked (`<oid>` or `ref: <name>`), those bytes written.
            Kind::File if area == Area::Refs && rel.starts_with("refs") => {
                let (data, st) = load(upper, name, MAX_REF)?;
                refs::refname(&ref_name(rel)).map_err(|_| GitDropReason::InvalidRef)?;
                let hash = hash.ok_or(GitDropReason::InvalidRef)?;
                refs::loose(&data, hash).map_err(|_| GitDropReason::InvalidRef)?;
                write_bytes(host, name, &data, &st, Some(area)).map(drop)
            }
            Kind::File => write_file(upper, host, name, Some(area)).map(drop),
        }
    }

    /// Reports every change in a dropped directory of the upper layer (`host`: the host's
    /// directory that holds the same name, when there is one). A file identical to the
    /// host's (git rewrites `config` on `git branch -D` even when nothing changes) is no
    /// change. A new empty directory, or one too deep, is reported itself.
    #[allow(clippy::too_many_arguments)]
    fn drop_tree(
        &mut self,
        upper: &OwnedFd,
        host: Option<&OwnedFd>,
        name: &OsStr,
        st: &FileStat,
        rel: &Path,
        depth: usize,
        reason: GitDropReason,
    ) {
        if depth >= MAX_DEPTH {
            return self.drop(rel, reason);
        }
        let dir = match open_upper_dir(upper, name, st) {
            Ok(d) => d,
            Err(e) => return self.drop(rel, failed(e)),
        };
        let host = host.and_then(|h| open_dir_at(h, name).ok());
        let list = match entries(&dir) {
            Ok(l) => l,
            Err(e) => return self.drop(rel, failed(e)),
        };
        if list.is_empty() && host.is_none() {
            return self.drop(rel, reason);
        }
        for (n, s) in &list {
            let rel = rel.join(n);
            match kind(s) {
                Kind::Dir => self.drop_tree(&dir, host.as_ref(), n, s, &rel, depth + 1, reason),
                Kind::Other => self.drop(&rel, GitDropReason::NotAFile),
                Kind::File if temporary(n.as_bytes(), None) => {
                    self.drop(&rel, GitDropReason::Temporary)
                }
                Kind::File if unchanged(&dir, host.as_ref(), n) => {}
                Kind::File | Kind::Whiteout => self.drop(&rel, reason),
            }
        }
    }
}

/// A loose ref, `HEAD` or `*_HEAD` file larger than this is not read: git writes one
/// object id or one symbolic ref (`MERGE_HEAD`: one id per merged head).
const MAX_REF: usize = 1 << 20;
/// `packed-refs` and `FETCH_HEAD` list every ref of a repository or a fetch.
const MAX_REF_LIST: usize = 256 << 20;

/// The ref name of the path `rel` below `.git` (`refs/heads/main`).
fn ref_name(rel: &Path) -> Vec<u8> {
    rel.as_os_str().as_bytes().to_vec()
}

/// `HEAD`, `packed-refs` or a `*_HEAD` file of the upper layer: read once, checked by
/// git's rules for its kind ([`refs`]), and exactly those bytes written. `packed-refs`
/// goes without the replacement refs the host's does not have. Bytes equal to the host's
/// file are no change (a repository of the reftable format keeps a `HEAD` that names no
/// valid ref on purpose).
fn checked_top(
    upper: &OwnedFd,
    host: &OwnedFd,
    name: &OsStr,
    file: RefFile,
    hash: Option<usize>,
) -> R {
    let max = match file {
        RefFile::Packed | RefFile::FetchHead => MAX_REF_LIST,
        _ => MAX_REF,
    };
    let (data, st) = load(upper, name, max)?;
    let host_data = read_host(host, name, max);
    if host_data.as_deref() == Some(&data[..]) {
        return write_bytes(host, name, &data, &st, None).map(drop);
    }
    let hash = hash.ok_or(GitDropReason::InvalidRef)?;
    refs::check_top(file, &data, hash).map_err(|_| GitDropReason::InvalidRef)?;
    if file == RefFile::Packed {
        let host_data = host_data.unwrap_or_default();
        if let Some(kept) = refs::without_new_replacements(&data, &host_data) {
            write_bytes(host, name, &kept, &st, None)?;
            return Err(GitDropReason::ReplaceRef);
        }
    }
    write_bytes(host, name, &data, &st, None).map(drop)
}

/// Whether `rel` is `prefix` or beneath it, the components compared without ASCII case:
/// on a file system that folds case, `refs/REPLACE/x` is `refs/replace/x`.
fn under_ci(rel: &Path, prefix: &str) -> bool {
    let mut parts = rel.iter();
    Path::new(prefix)
        .iter()
        .all(|p| parts.next().is_some_and(|c| c.eq_ignore_ascii_case(p)))
}
