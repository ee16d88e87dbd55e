//! Linux: the per-command layers, and the merge after the end.
//!
//! # Where the layer lives
//!
//! The upper layer is a tmpfs the child makes for each command (of the policy's
//! `tmp_size`, like `/tmp` inside), attached only on the setup root that `pivot_root`
//! detaches: the program cannot reach it except through the overlay. The child sends its
//! fd to the parent over a socket pair (`SCM_RIGHTS`); the parent reads the upper layer
//! through that fd once the program has ended, and closing it frees the file system.
//! Nothing is written to the host before the merge, nothing is left behind after it, and
//! a host that dies mid-run leaves nothing either. (A host directory as the upper layer
//! costs ten times as much per command: overlayfs checks its upper file system with a
//! dozen journalled operations at each mount.)
//!
//! # How the host is written
//!
//! The upper layer is the program's work: anything can be in it (symlinks, fifos,
//! devices, hard links, names of any kind, directories 40 levels deep, mode 000). So the
//! merge never resolves a path: the host's `.git` is opened with `RESOLVE_NO_SYMLINKS`
//! and its identity checked against the one the layer was made over; every directory
//! below it is opened relative to its parent with `O_NOFOLLOW | O_DIRECTORY`; every entry
//! of the upper layer is examined with `fstatat(AT_SYMLINK_NOFOLLOW)` and opened with
//! `O_NOFOLLOW | O_NONBLOCK`, then checked again on the fd. Files are written under a
//! temporary name created with `O_EXCL | O_NOFOLLOW` and then renamed over their target
//! (refs change atomically, as git's own lock files make them), or linked to it when it
//! must not exist yet (objects). The temporary name of a ref is git's own lock,
//! `<name>.lock`, so the merge and git on the host exclude each other. Modes are kept
//! without the setuid, setgid and sticky bits; times are kept (git's index compares them);
//! packs are synced before they get their names, as git's default `core.fsync` does.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2, renameat};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, fchmod, fchmodat, fstat, fstatat, futimens};
use nix::sys::time::TimeSpec;
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};

use super::{GitDrop, GitDropReason, GitUnguarded};
use crate::backend::linux::prepare::GitMount;
use crate::error::{Error, PlanError, SpawnError};
use crate::plan::{Plan, Step};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};

/// Where a path of the upper layer lies, for what may be merged back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Area {
    /// `objects/` (not `objects/info/`): only additions are taken.
    Objects,
    /// `refs/`, `logs/`, `reftable/`: files replaced, deletions applied.
    Refs,
}

/// What a name at the top of `.git` is, for the merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Top {
    /// The root directory of an area.
    Area(Area),
    /// A file merged back, whose deletion is applied too.
    File,
    /// `HEAD`: merged back; never deleted (a `.git` without it is no repository, and git
    /// on the host would look further up for one).
    Head,
    /// Anything else: dropped.
    Other,
}

/// Classifies a name at the top of `.git`.
fn top(name: &[u8]) -> Top {
    /// `[A-Z_]+<suffix>`, as git names its state files.
    fn state(name: &[u8], suffix: &[u8]) -> bool {
        name.len() > suffix.len()
            && name.ends_with(suffix)
            && name.iter().all(|b| b.is_ascii_uppercase() || *b == b'_')
    }
    match name {
        b"objects" => Top::Area(Area::Objects),
        b"refs" | b"logs" | b"reftable" => Top::Area(Area::Refs),
        b"HEAD" => Top::Head,
        b"index" | b"packed-refs" | b"MERGE_MSG" | b"MERGE_MODE" | b"SQUASH_MSG"
        | b"AUTO_MERGE" => Top::File,
        n if state(n, b"_HEAD") || state(n, b"_EDITMSG") => Top::File,
        n if n.starts_with(b"sharedindex.") && !n.ends_with(b".lock") => Top::File,
        _ => Top::Other,
    }
}

/// Whether a file name in `area` (or at the top, `None`) is a lock or temporary file of
/// git's (or of the merge itself): never merged.
fn temporary(name: &[u8], area: Option<Area>) -> bool {
    name.ends_with(b".lock") || (area == Some(Area::Objects) && name.starts_with(b"tmp_"))
}

/// Directories deeper than this below `.git` are not merged (git nests refs a few levels).
const MAX_DEPTH: usize = 32;

/// The `.git` layers of one command, one slot per [`Step::GitLayer`] of its plan.
#[derive(Debug, Default)]
pub(in crate::spawn) struct Session {
    layers: Vec<Option<Layer>>,
    /// The socket pair the child sends each upper layer's fd through: (parent's end,
    /// child's end), until the spawn is over.
    socket: Option<(OwnedFd, OwnedFd)>,
    dropped: Vec<GitDrop>,
    /// The `.git` links whose targets get no layer in this command.
    unguarded: Vec<GitUnguarded>,
    /// The program's pidfd, for a merge after a `Child` dropped unreaped.
    pidfd: Option<OwnedFd>,
    done: bool,
}

/// One layer: the host's `.git` as the parent found it, and, once the child has made
/// it, the upper layer's file system.
#[derive(Debug)]
struct Layer {
    git: PathBuf,
    identity: (u64, u64),
    mode: u32,
    /// The pack files the host had (read-only on the layer, see `freeze_pack` in the
    /// child).
    packs: Vec<PathBuf>,
    /// The `.git` symlink or file that names `git`, when it is not `.git` itself.
    link: Option<super::target::Link>,
    upper: Option<OwnedFd>,
}

impl Session {
    /// Notes each `.git` directory of `plan`'s [`Step::GitLayer`] steps (identity, mode,
    /// pack files), or the directory a `.git` symlink or `gitdir:` file names inside its
    /// root ([`super::target`]), and makes the socket pair their upper layers will come
    /// back through. Anything else gets no layer (the child pins a `.git` symlink or file
    /// itself). Without any layer this makes no system call beyond the `lstat`s.
    ///
    /// # Errors
    ///
    /// [`SpawnError::Os`] when the socket pair cannot be made.
    pub(in crate::spawn) fn prepare(plan: &Plan) -> Result<Session, Error> {
        let mut session = Session::default();
        for step in &plan.steps {
            let Step::GitLayer { path, .. } = step else {
                continue;
            };
            // A `.git` symlink or `gitdir:` file is followed into its root (`target`).
            let layer = match super::target::find(plan, path) {
                super::target::Found::Layer(t) => Some(Layer {
                    packs: packs(&t.dir),
                    git: t.dir,
                    identity: t.identity,
                    mode: t.mode,
                    link: t.link,
                    upper: None,
                }),
                super::target::Found::Nothing => None,
                super::target::Found::Unguarded(u) => {
                    tracing::warn!("stockade: {u}");
                    session.unguarded.push(u);
                    None
                }
            };
            session.layers.push(layer);
        }
        if session.layers.iter().any(Option::is_some) {
            let pair = socketpair(
                AddressFamily::Unix,
                SockType::Datagram,
                None,
                SockFlag::SOCK_CLOEXEC,
            )
            .map_err(|e| SpawnError::Os {
                call: "socketpair for the .git layer",
                source: e.into(),
            })?;
            session.socket = Some(pair);
        }
        Ok(session)
    }

    /// What the child needs: one entry per [`Step::GitLayer`], and its end of the socket
    /// (-1 without any layer).
    ///
    /// # Errors
    ///
    /// [`PlanError::Nul`] for a path with a NUL byte.
    pub(in crate::spawn) fn mounts(&self) -> Result<(Vec<Option<GitMount>>, RawFd), PlanError> {
        let mounts = self
            .layers
            .iter()
            .map(|l| {
                l.as_ref()
                    .map(|l| {
                        let link = l.link.as_ref().map(|k| k.prepare(&l.git)).transpose()?;
                        Ok(GitMount::new(l.identity, l.mode, &l.packs)?.with_link(link))
                    })
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        let socket = self
            .socket
            .as_ref()
            .map_or(-1, |(_, child)| child.as_raw_fd());
        Ok((mounts, socket))
    }

    /// After a successful spawn: takes the upper layers the child made (it sent them
    /// before `execve`, so they wait in the socket), and keeps a pidfd of the program so
    /// that a `Child` dropped unreaped still merges when the program ends.
    pub(in crate::spawn) fn started(&mut self, handle: &crate::backend::linux::init::Handle) {
        let Some((parent, _child)) = self.socket.take() else {
            return;
        };
        match crate::backend::linux::recv_fds(&parent) {
            Ok(fds) => {
                for (tag, fd) in fds {
                    if let Some(Some(layer)) = self.layers.get_mut(usize::from(tag)) {
                        layer.upper = Some(fd);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "stockade: the .git layers of a command could not be received; its changes under .git will be lost");
            }
        }
        // (A link's target kept read-only on purpose sends none.)
        let missing = |l: &&Layer| l.upper.is_none() && l.link.as_ref().is_none_or(|k| k.layer);
        for layer in self.layers.iter().flatten().filter(missing) {
            tracing::warn!(git = %layer.git.display(), "stockade: no copy-on-write layer over this .git in this run (no overlayfs in this kernel, or .git replaced since the spawn was prepared): it was read-only");
        }
        if self.layers.iter().flatten().any(|l| l.upper.is_some()) {
            self.pidfd = std::os::fd::AsFd::as_fd(handle).try_clone_to_owned().ok();
        }
    }

    /// Merges every layer back; called once the program has been reaped. Closing the
    /// layers frees their file systems.
    pub(in crate::spawn) fn finish(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.pidfd = None;
        self.dropped = finish_layers(std::mem::take(&mut self.layers));
    }

    /// The changes left out by [`Session::finish`].
    pub(in crate::spawn) fn dropped(&self) -> &[GitDrop] {
        &self.dropped
    }

    /// The `.git` links whose targets got no layer.
    pub(in crate::spawn) fn unguarded(&self) -> &[GitUnguarded] {
        &self.unguarded
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.done || !self.layers.iter().flatten().any(|l| l.upper.is_some()) {
            return;
        }
        let layers = std::mem::take(&mut self.layers);
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        // A `Child` dropped without being reaped (std allows it): the program may still
        // run and write its layer. Merge once it has ended, from a thread of its own.
        let spawned = std::thread::Builder::new()
            .name("stockade-git-merge".into())
            .spawn(move || {
                wait_for_exit(&pidfd);
                finish_layers(layers);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "stockade: cannot start the thread that merges a dropped command's .git layer; its changes are lost");
        }
    }
}

/// The pack files of a host `.git` (regular files named `*.pack`, symlinks left out).
fn packs(git: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(git.join("objects/pack"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name().as_bytes().ends_with(b".pack") && e.file_type().is_ok_and(|t| t.is_file())
        })
        .map(|e| e.path())
        .collect()
}

/// Polls the pidfd until the program has exited. With its PID namespace gone, nothing
/// writes the layer any more: the kernel kills and reaps every other process of the
/// namespace before PID 1's exit is reported.
pub(in crate::spawn) fn wait_for_exit(pidfd: &OwnedFd) {
    loop {
        let mut fds = [nix::poll::PollFd::new(
            pidfd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            _ => return,
        }
    }
}

/// Merges each layer, logs each drop, returns the drops. The layers (and their file
/// systems) go when this returns.
fn finish_layers(layers: Vec<Option<Layer>>) -> Vec<GitDrop> {
    let mut dropped = Vec::new();
    for layer in layers.into_iter().flatten() {
        let drops = layer.merge();
        for d in &drops {
            tracing::warn!(path = %d.path.display(), reason = %d.reason, "stockade: a change under .git was not merged back to the host");
        }
        dropped.extend(drops);
    }
    dropped
}

impl Layer {
    fn merge(&self) -> Vec<GitDrop> {
        let Some(upper) = &self.upper else {
            return Vec::new();
        };
        let mut m = Merge {
            git: self.git.clone(),
            dropped: Vec::new(),
            more: 0,
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
        m.dropped
    }
}

/// What kind of entry the upper layer holds.
enum Kind {
    Dir,
    File,
    /// An overlayfs whiteout (a character device 0:0): the program deleted the entry.
    Whiteout,
    Other,
}

fn kind(st: &FileStat) -> Kind {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File,
        libc::S_IFCHR if st.st_rdev == 0 => Kind::Whiteout,
        _ => Kind::Other,
    }
}

/// The failure of one entry: its errno.
type R<T = ()> = Result<T, GitDropReason>;

fn failed(e: Errno) -> GitDropReason {
    GitDropReason::Failed(e as i32)
}

/// One merge into one host `.git`.
struct Merge {
    git: PathBuf,
    dropped: Vec<GitDrop>,
    more: usize,
}

impl Merge {
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
        let host = match open_beneath_root(&layer.git) {
            Ok(fd) => fd,
            Err(Errno::ENOENT | Errno::ELOOP | Errno::ENOTDIR) => {
                return Err(GitDropReason::Replaced);
            }
            Err(e) => return Err(failed(e)),
        };
        let st = fstat(&host).map_err(failed)?;
        if (st.st_dev, st.st_ino) != layer.identity {
            return Err(GitDropReason::Replaced);
        }
        // In git's own order: objects before the refs that name them, refs before `HEAD`
        // and the index, so that git on the host never sees a name without its object.
        let mut list = entries(&upper).map_err(failed)?;
        list.sort_by_key(|(name, _)| match top(name.as_bytes()) {
            Top::Area(Area::Objects) => 0,
            Top::Area(Area::Refs) => 1,
            _ if name == "packed-refs" => 1,
            _ => 2,
        });
        for (name, st) in list {
            let rel = PathBuf::from(&name);
            let r = self.top_entry(&upper, &host, &name, &st, &rel);
            if let Err(reason) = r {
                self.drop(&rel, reason);
            }
        }
        Ok(())
    }

    fn top_entry(
        &mut self,
        upper: &OwnedFd,
        host: &OwnedFd,
        name: &OsStr,
        st: &FileStat,
        rel: &Path,
    ) -> R {
        let class = top(name.as_bytes());
        match (kind(st), class) {
            (Kind::Other, _) => Err(GitDropReason::NotAFile),
            (Kind::File, _) if temporary(name.as_bytes(), None) => Err(GitDropReason::Temporary),
            (Kind::Dir, Top::Area(area)) => {
                let u = open_upper_dir(upper, name, st).map_err(failed)?;
                let h = host_dir(host, name, st, area).map_err(failed)?;
                self.dir(&u, &h, rel, area, 1);
                Ok(())
            }
            (Kind::File, Top::File | Top::Head) => write_file(upper, host, name, None).map(drop),
            (Kind::Whiteout, Top::File) => remove(host, name, 0).map_err(failed),
            (Kind::Dir, _) => {
                self.drop_tree(upper, Some(host), name, st, rel, 0);
                Ok(())
            }
            (Kind::File, _) if unchanged(upper, Some(host), name) => Ok(()),
            (Kind::File | Kind::Whiteout, _) => Err(GitDropReason::NotMerged),
        }
    }

    /// Merges the upper directory `upper` into the host directory `host` (`rel` below
    /// `.git`, in `area`, `depth` levels down).
    fn dir(&mut self, upper: &OwnedFd, host: &OwnedFd, rel: &Path, area: Area, depth: usize) {
        let list = match entries(upper) {
            Ok(l) => l,
            Err(e) => return self.drop(rel, failed(e)),
        };
        for (name, st) in &list {
            let rel = rel.join(name);
            let r = self.entry(upper, host, name, st, &rel, area, depth);
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
    ) -> R {
        // `objects/info/`: alternates (objects from elsewhere), commit-graph chains.
        if area == Area::Objects && depth == 1 && name == "info" {
            return match kind(st) {
                Kind::Dir => {
                    self.drop_tree(upper, Some(host), name, st, rel, depth);
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
                self.dir(&u, &h, rel, area, depth + 1);
                Ok(())
            }
            Kind::File if temporary(name.as_bytes(), Some(area)) => Err(GitDropReason::Temporary),
            Kind::File => write_file(upper, host, name, Some(area)).map(drop),
        }
    }

    /// Reports every change in a dropped directory of the upper layer (`host`: the host's
    /// directory that holds the same name, when there is one). A file identical to the
    /// host's (git rewrites `config` on `git branch -D` even when nothing changes) is no
    /// change. A new empty directory, or one too deep, is reported itself.
    fn drop_tree(
        &mut self,
        upper: &OwnedFd,
        host: Option<&OwnedFd>,
        name: &OsStr,
        st: &FileStat,
        rel: &Path,
        depth: usize,
    ) {
        if depth >= MAX_DEPTH {
            return self.drop(rel, GitDropReason::NotMerged);
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
            return self.drop(rel, GitDropReason::NotMerged);
        }
        for (n, s) in &list {
            let rel = rel.join(n);
            match kind(s) {
                Kind::Dir => self.drop_tree(&dir, host.as_ref(), n, s, &rel, depth + 1),
                Kind::Other => self.drop(&rel, GitDropReason::NotAFile),
                Kind::File if temporary(n.as_bytes(), None) => {
                    self.drop(&rel, GitDropReason::Temporary)
                }
                Kind::File if unchanged(&dir, host.as_ref(), n) => {}
                Kind::File | Kind::Whiteout => self.drop(&rel, GitDropReason::NotMerged),
            }
        }
    }
}

/// Files larger than this are taken as changed without comparing them.
const COMPARE_MAX: i64 = 1 << 20;

/// Whether the upper file `name` has the same mode and contents as the host's regular
/// file of that name under `host`: a copy-up or rewrite that changed nothing.
fn unchanged(upper: &OwnedFd, host: Option<&OwnedFd>, name: &OsStr) -> bool {
    let Some(host) = host else {
        return false;
    };
    let (Ok(u), Ok(h)) = (
        fstatat(upper, name, AtFlags::AT_SYMLINK_NOFOLLOW),
        fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW),
    ) else {
        return false;
    };
    let regular = |st: &FileStat| st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if !regular(&u) || !regular(&h) || u.st_mode != h.st_mode || u.st_size != h.st_size {
        return false;
    }
    if u.st_size > COMPARE_MAX {
        return false;
    }
    let read = |dir: &OwnedFd| -> Option<Vec<u8>> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = openat(dir, name, flags, Mode::empty()).ok()?;
        let mut data = Vec::new();
        io::Read::read_to_end(
            &mut io::Read::take(File::from(fd), COMPARE_MAX as u64 + 1),
            &mut data,
        )
        .ok()?;
        Some(data)
    };
    matches!((read(upper), read(host)), (Some(a), Some(b)) if a == b)
}

/// Opens an absolute path as a directory without following any symlink on the way.
fn open_beneath_root(path: &Path) -> Result<OwnedFd, Errno> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    openat2(nix::fcntl::AT_FDCWD, path, how)
}

fn open_dir_at(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Opens a directory of the upper layer, first giving its owner access if the program
/// took it away (`mkdir -m 000`): the layer is ours to read, and about to be removed.
fn open_upper_dir(upper: &OwnedFd, name: &OsStr, st: &FileStat) -> Result<OwnedFd, Errno> {
    if st.st_mode & 0o700 != 0o700 {
        fchmodat(
            upper,
            name,
            Mode::from_bits_truncate((st.st_mode & 0o777 | 0o700) as libc::mode_t),
            FchmodatFlags::FollowSymlink,
        )?;
    }
    open_dir_at(upper, name)
}

/// The entries of a directory (not `.`, `..`), each with its `lstat`, sorted by name.
fn entries(dir: &OwnedFd) -> Result<Vec<(OsString, FileStat)>, Errno> {
    // A new open file description of its own: reading it moves no offset of `dir`'s.
    let mut d = nix::dir::Dir::openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut out = Vec::new();
    for e in d.iter() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name).to_os_string();
        let st = fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        out.push((name, st));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Whether overlayfs marked an upper directory opaque (made anew over a deleted one).
fn is_opaque(dir: &OwnedFd) -> bool {
    let mut buf = [0u8; 2];
    matches!(
        stockade_sys::linux::fgetxattr(dir.as_fd().into(), c"user.overlay.opaque", &mut buf),
        Ok(1) if buf[0] == b'y'
    )
}

/// The host directory `name` under `host`, made (with the layer's mode, owner access
/// kept) if missing. In a refs area a non-directory there is replaced (the program made a
/// branch `a` into a directory `a/`); in the object database it is an error.
fn host_dir(host: &OwnedFd, name: &OsStr, st: &FileStat, area: Area) -> Result<OwnedFd, Errno> {
    match fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(h) if h.st_mode & libc::S_IFMT == libc::S_IFDIR => {}
        Ok(_) if area == Area::Refs => {
            unlinkat(host, name, UnlinkatFlags::NoRemoveDir)?;
            mkdir(host, name, st)?;
        }
        Ok(_) => return Err(Errno::ENOTDIR),
        Err(Errno::ENOENT) => mkdir(host, name, st)?,
        Err(e) => return Err(e),
    }
    open_dir_at(host, name)
}

fn mkdir(host: &OwnedFd, name: &OsStr, st: &FileStat) -> Result<(), Errno> {
    let mode = Mode::from_bits_truncate((st.st_mode & 0o777 | 0o700) as libc::mode_t);
    match nix::sys::stat::mkdirat(host, name, mode) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes the host entry `name` (recursively for a directory). Missing is fine.
fn remove(host: &OwnedFd, name: &OsStr, depth: usize) -> Result<(), Errno> {
    match fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e),
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            if depth >= MAX_DEPTH {
                return Err(Errno::ELOOP);
            }
            let dir = open_dir_at(host, name)?;
            for (n, _) in entries(&dir)? {
                remove(&dir, &n, depth + 1)?;
            }
            unlinkat(host, name, UnlinkatFlags::RemoveDir)
        }
        Ok(_) => unlinkat(host, name, UnlinkatFlags::NoRemoveDir),
    }
}

/// Names for the merge's own temporary object files, unique within the process.
static TEMP: AtomicU64 = AtomicU64::new(0);

/// Copies the upper file `name` into `host`. In the object database a name the host has
/// already keeps the host's file, and a new one appears at once, whole (written under a
/// temporary name, then linked); elsewhere the file is written as `<name>.lock` and
/// renamed over the host's (a directory there, in a refs area, is removed first). Returns
/// whether the host changed.
fn write_file(upper: &OwnedFd, host: &OwnedFd, name: &OsStr, area: Option<Area>) -> R<bool> {
    let objects = area == Some(Area::Objects);
    if objects && fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok() {
        // Git copies an object it writes again only to refresh its time (a copy-up);
        // anything else is a rewrite.
        return if unchanged(upper, Some(host), name) {
            Ok(false)
        } else {
            Err(GitDropReason::ObjectChange)
        };
    }
    let src = open_upper_file(upper, name)?;
    let st = fstat(&src).map_err(failed)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(GitDropReason::NotAFile);
    }
    let tmp: OsString = if objects {
        let n = TEMP.fetch_add(1, Ordering::Relaxed);
        format!("tmp_stockade_{}_{n}", std::process::id()).into()
    } else {
        let mut t = name.to_os_string();
        t.push(".lock");
        t
    };
    let dst = match openat(
        host,
        tmp.as_os_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    ) {
        Ok(fd) => fd,
        Err(Errno::EEXIST) if !objects => return Err(GitDropReason::Locked),
        Err(e) => return Err(failed(e)),
    };
    // What git itself syncs by default (`core.fsync`: packs and their metadata, not loose
    // objects, refs or the index, which journalling file systems order on their own).
    let sync = objects && (name.as_bytes().starts_with(b"pack-") || name == "multi-pack-index");
    let r = fill(src, dst, &st, sync).and_then(|()| {
        if objects {
            publish_object(host, &tmp, name)
        } else {
            replace(host, &tmp, name, area)
        }
    });
    if r.is_err() || objects {
        let _ = unlinkat(host, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    r.map(|()| true).map_err(failed)
}

/// Opens a regular file of the upper layer for reading (owner read access given back if
/// the program removed it), never following a symlink or blocking on a fifo.
fn open_upper_file(upper: &OwnedFd, name: &OsStr) -> R<OwnedFd> {
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    match openat(upper, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::EACCES) => {
            let st = fstatat(upper, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(failed)?;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(GitDropReason::NotAFile);
            }
            fchmodat(
                upper,
                name,
                Mode::from_bits_truncate((st.st_mode & 0o777 | 0o400) as libc::mode_t),
                FchmodatFlags::FollowSymlink,
            )
            .map_err(failed)?;
            openat(upper, name, flags, Mode::empty()).map_err(failed)
        }
        Err(Errno::ELOOP) => Err(GitDropReason::NotAFile),
        Err(e) => Err(failed(e)),
    }
}

/// Copies `src` into `dst` (and, with `sync`, makes the data durable before the file gets
/// its name), then gives `dst` the source's mode (without setuid, setgid and sticky bits)
/// and times.
fn fill(src: OwnedFd, dst: OwnedFd, st: &FileStat, sync: bool) -> Result<(), Errno> {
    let (mut src, mut dst) = (File::from(src), File::from(dst));
    let errno = |e: io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
    io::copy(&mut src, &mut dst).map_err(errno)?;
    if sync {
        dst.sync_data().map_err(errno)?;
    }
    fchmod(
        &dst,
        Mode::from_bits_truncate((st.st_mode & 0o777) as libc::mode_t),
    )?;
    futimens(
        &dst,
        &TimeSpec::new(st.st_atime, st.st_atime_nsec),
        &TimeSpec::new(st.st_mtime, st.st_mtime_nsec),
    )
}

/// Makes the written object `tmp` appear as `name` unless the host has that name by now:
/// `link` fails on an existing name. File systems without hard links get a rename.
fn publish_object(host: &OwnedFd, tmp: &OsStr, name: &OsStr) -> Result<(), Errno> {
    match linkat(host, tmp, host, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(Errno::EPERM | Errno::EOPNOTSUPP | Errno::EMLINK) => renameat(host, tmp, host, name),
        Err(e) => Err(e),
    }
}

/// Renames the lock file `tmp` over `name`. In a refs area a directory there (the program
/// made a directory `a/` into a branch `a`) is removed first.
fn replace(host: &OwnedFd, tmp: &OsStr, name: &OsStr, area: Option<Area>) -> Result<(), Errno> {
    if area == Some(Area::Refs) {
        if let Ok(h) = fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            if h.st_mode & libc::S_IFMT == libc::S_IFDIR {
                remove(host, name, 0)?;
            }
        }
    }
    renameat(host, tmp, host, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_data_names_at_the_top_are_merged() {
        for (name, want) in [
            ("objects", Top::Area(Area::Objects)),
            ("refs", Top::Area(Area::Refs)),
            ("logs", Top::Area(Area::Refs)),
            ("reftable", Top::Area(Area::Refs)),
            ("HEAD", Top::Head),
            ("index", Top::File),
            ("packed-refs", Top::File),
            ("ORIG_HEAD", Top::File),
            ("FETCH_HEAD", Top::File),
            ("CHERRY_PICK_HEAD", Top::File),
            ("COMMIT_EDITMSG", Top::File),
            ("TAG_EDITMSG", Top::File),
            ("MERGE_MSG", Top::File),
            ("sharedindex.0123abcd", Top::File),
        ] {
            assert_eq!(top(name.as_bytes()), want, "{name}");
        }
        for name in [
            "config",
            "config.worktree",
            "commondir",
            "hooks",
            "info",
            "worktrees",
            "modules",
            "description",
            "rebase-merge",
            "rebase-apply",
            "sequencer",
            "branches",
            "remotes",
            "shallow",
            "gitdir",
            "_HEAD",
            "evil_HEAD",
            "HEAD.lock",
            "sharedindex.x.lock",
            "lfs",
        ] {
            assert_eq!(top(name.as_bytes()), Top::Other, "{name}");
        }
    }

    #[test]
    fn locks_and_temporary_objects_are_never_merged() {
        assert!(temporary(b"index.lock", None));
        assert!(temporary(b"main.lock", Some(Area::Refs)));
        assert!(temporary(b"tmp_obj_a1b2c3", Some(Area::Objects)));
        assert!(!temporary(b"tmp_branch", Some(Area::Refs)));
        assert!(!temporary(b"0123456789abcdef", Some(Area::Objects)));
    }
}
