//! Nested repositories a run created: found after the run, and made harmless to the
//! host's git.
//!
//! # The hole it closes
//!
//! Git on the host recurses into every repository embedded in the one it runs in
//! (`git add -A`, `git status` and `git commit` look into `vendor/lib/.git`), and runs
//! git there with that repository's config and hooks: `core.fsmonitor`, `core.hooksPath`,
//! filter drivers, `include.path`, hooks. A program that creates `vendor/lib/.git` (a
//! directory, a `gitdir:` file or a symlink) or a bare repository would have the host run
//! its commands. The `.git` layer keeps only the repository that existed at the top of a
//! writable root.
//!
//! # The design
//!
//! At the spawn, every writable root is walked and the identity (device, inode) of each
//! `.git` entry and bare repository in it is noted: those are the host's own, and stay
//! untouched. Once every process of the run has ended, the roots are walked again; each
//! repository not seen at the spawn is the program's, and it is reported
//! ([`Child::nested_repositories`]) and treated so that the host's git can still work in
//! it while running nothing the program chose:
//!
//! - a `.git` directory or a bare repository keeps its objects, refs, index and `HEAD`;
//!   its `config` is set aside (renamed to `stockade-disabled-config`, a name git never
//!   reads) and replaced by one holding only plain allowlisted keys (`config.rs`: the
//!   repository format, `remote.<name>.url`/`fetch`, `branch.<name>.remote`/`merge`);
//!   `config.worktree`, `hooks/`, `commondir`, `worktrees/`, `modules/` and
//!   `objects/info/{alternates,http-alternates}` are set aside the same way;
//! - a `.git` file (`gitdir:`) or symlink can point git anywhere, so it is refused: renamed
//!   to `.git.stockade-refused`, and git then sees a plain directory.
//!
//! The walks never resolve a path the program could have planted: each root is opened
//! with `openat2(RESOLVE_NO_SYMLINKS)`, each directory relative to its parent with
//! `O_NOFOLLOW | O_DIRECTORY`, each entry examined with `fstatat(AT_SYMLINK_NOFOLLOW)`.
//! They are bounded ([`MAX_DEPTH`], [`MAX_ENTRIES`]); what a bound leaves unwalked is
//! reported ([`NestedOutcome::Unchecked`]) and the host must treat it as the program's.

mod config;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[cfg(not(target_os = "linux"))]
use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};

use super::Child;
use crate::plan::{Access, Plan};

/// A repository the program created in a writable root (see
/// [`Child::nested_repositories`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NestedRepository {
    /// The host path of the `.git` entry (`<root>/vendor/lib/.git`), of the bare
    /// repository's directory, or of the directory a bound stopped the walk at.
    pub path: PathBuf,
    /// What was done with it.
    pub outcome: NestedOutcome,
}

/// What stockade did with a nested repository the program created.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NestedOutcome {
    /// A `.git` directory or bare repository: these names in it were set aside (renamed
    /// to `stockade-disabled-<name>`, which git never reads); `config` was replaced by its
    /// allowlisted keys.
    Neutralized {
        /// The names set aside, relative to the git directory (`config`, `hooks`,
        /// `objects/info/alternates`, …).
        set_aside: Vec<String>,
    },
    /// A `.git` file or symlink, which can point git anywhere: renamed to this name
    /// beside it.
    Refused {
        /// The name it now has (`.git.stockade-refused`).
        renamed_to: OsString,
    },
    /// Treating it failed with this errno: git on the host may run what the program
    /// wrote there.
    Failed(i32),
    /// A bound of the walk ([`NestedRepository::MAX_DEPTH`], [`NestedRepository::MAX_ENTRIES`],
    /// [`NestedRepository::MAX_REPORTED`]) was reached
    /// here, or the directory could not be opened (the errno): repositories below it were
    /// not looked for. Treat it as the program's.
    Unchecked(i32),
}

impl NestedRepository {
    /// Directories deeper than this below a writable root are not walked.
    pub const MAX_DEPTH: usize = 64;
    /// At most this many directory entries are examined per walk of all writable roots.
    pub const MAX_ENTRIES: usize = 2_000_000;
    /// At most this many nested repositories are treated and listed per run.
    pub const MAX_REPORTED: usize = 1000;
}

const MAX_DEPTH: usize = NestedRepository::MAX_DEPTH;
const MAX_ENTRIES: usize = NestedRepository::MAX_ENTRIES;
const MAX_REPORTED: usize = NestedRepository::MAX_REPORTED;

impl fmt::Display for NestedRepository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.outcome {
            NestedOutcome::Neutralized { set_aside } => write!(
                f,
                "nested repository {path} created by the program: set aside {} (git runs nothing from it)",
                set_aside.join(", ")
            ),
            NestedOutcome::Refused { renamed_to } => write!(
                f,
                "nested repository link {path} created by the program: renamed to {} (git does not follow it)",
                Path::new(renamed_to).display()
            ),
            NestedOutcome::Failed(errno) => write!(
                f,
                "nested repository {path} created by the program could not be neutralized: {}; do not run git in or above it",
                crate::error::strerror(*errno)
            ),
            NestedOutcome::Unchecked(errno) => write!(
                f,
                "{path}: not searched for nested repositories ({}); do not run git in or above it",
                if *errno == libc::E2BIG {
                    "a bound of the walk was reached".to_owned()
                } else {
                    crate::error::strerror(*errno).to_string()
                }
            ),
        }
    }
}

impl Child {
    /// The repositories the program created in the writable roots (the workspace and the
    /// writable paths), and what was done with each so that git on the host runs nothing
    /// the program chose; known once the program has been waited for ([`Child::wait`],
    /// [`Child::try_wait`] returning a status, [`Child::wait_with_output`]). Each is also
    /// logged as a `tracing` warning.
    ///
    /// A `.git` directory or bare repository keeps its history, refs and index, with its
    /// config reduced to plain keys and its hooks and redirections set aside
    /// ([`NestedOutcome::Neutralized`]); a `.git` file or symlink is renamed
    /// ([`NestedOutcome::Refused`]). Repositories that existed when the command started
    /// are the host's and are left alone. An [`NestedOutcome::Unchecked`] or
    /// [`NestedOutcome::Failed`] entry means part of a root may hold a repository of the
    /// program's: run no git there.
    ///
    /// # Platform
    ///
    /// Linux, every layer; macOS and other Unix systems: the same walk and treatment once
    /// the program has been waited for (a `Child` dropped unreaped is not checked there).
    pub fn nested_repositories(&self) -> &[NestedRepository] {
        &self.nested.found
    }
}

/// The nested repositories of one command: the host's at the spawn, the program's after.
#[derive(Debug, Default)]
pub(super) struct Watch {
    roots: Vec<PathBuf>,
    /// The identity of each repository at the spawn, and where it was.
    known: HashMap<(u64, u64), PathBuf>,
    /// The host's repositories below the roots' top level at the spawn (host paths of
    /// their `.git` entries and bare repository directories), whose control files are
    /// snapshotted and put back after the run (`gitlayer::merge::Session::snapshot_nested`).
    host: Vec<PathBuf>,
    found: Vec<NestedRepository>,
    pidfd: Option<OwnedFd>,
    done: bool,
}

impl Watch {
    /// Notes the repositories in `plan`'s writable roots (the directories among its
    /// read-write roots, a root inside another walked once).
    /// Without `enabled` (the policy's `check_nested_repositories`), or on the
    /// passthrough layer, walks nothing: a program without walls can write the host's
    /// own git config (`~/.gitconfig`), so treating its repositories would protect
    /// nothing and only change the user's clones.
    pub(super) fn start(plan: &Plan, enabled: bool) -> Watch {
        if !enabled || plan.layer == crate::policy::Layer::Passthrough {
            return Watch::default();
        }
        let mut roots: Vec<PathBuf> = plan
            .roots
            .iter()
            .filter(|(_, a)| *a == Access::ReadWrite)
            .map(|(p, _)| p.clone())
            .collect();
        roots.sort();
        roots.dedup();
        let all = roots.clone();
        roots.retain(|r| !all.iter().any(|o| o != r && r.starts_with(o)));
        let mut known = HashMap::new();
        let mut host = Vec::new();
        let mut walk = Walk::default();
        for root in &roots {
            walk.root(root, &mut |_, _, path, st| {
                known.insert(identity(st), path.to_path_buf());
                // A root's own `.git` has the full layer's `.git` layer or layer 2's
                // snapshot already.
                if path.parent() != Some(root.as_path())
                    || path.file_name() != Some(OsStr::new(".git"))
                {
                    host.push(path.to_path_buf());
                }
            });
        }
        Watch {
            roots,
            known,
            host,
            found: Vec::new(),
            pidfd: None,
            done: false,
        }
    }

    /// The host's nested repositories found at the spawn (see [`Watch::start`]).
    pub(super) fn host_repositories(&self) -> &[PathBuf] {
        &self.host
    }

    /// Keeps a pidfd of the sandbox, so that a `Child` dropped unreaped is still
    /// checked when the sandbox is gone.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn started(&mut self, handle: &impl AsFd) {
        self.pidfd = super::launch::dup_cloexec(handle.as_fd()).ok();
    }

    /// Walks the roots again once every process of the run has ended, and treats each
    /// repository that was not there at the spawn.
    pub(super) fn finish(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        // Only once the sandbox is gone (the init's exit, not its record): nothing writes
        // the roots then. Should the end not be awaitable, the roots are still checked:
        // setting a repository's config aside is the safe side.
        if let Some(pidfd) = self.pidfd.take() {
            let _ = wait_for_exit(&pidfd);
        }
        self.found = check(&self.roots, &self.known);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        let (roots, known) = (
            std::mem::take(&mut self.roots),
            std::mem::take(&mut self.known),
        );
        // A `Child` dropped unreaped: check once the sandbox is gone, from a thread.
        let spawned = std::thread::Builder::new()
            .name("stockade-nested".into())
            .spawn(move || {
                wait_for_exit(&pidfd);
                check(&roots, &known);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "stockade: cannot start the thread that checks a dropped command's writable roots for nested repositories");
        }
    }
}

#[cfg(target_os = "linux")]
use super::gitlayer::merge::wait_for_exit;

/// Waits for the program's end (no pidfd here: the watch never holds one).
#[cfg(not(target_os = "linux"))]
fn wait_for_exit(_pidfd: &OwnedFd) -> bool {
    true
}

/// `(st_dev, st_ino)`, whose types differ between systems.
#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn identity(st: &FileStat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// Walks `roots` and treats every repository that is not one of `known` at its own
/// path: a new one, and a host's the program moved (renamed it, or a directory above it),
/// whose control files the restore by path did not reach (review: a host-known `.git`
/// edited and renamed to `tools/.git` kept the program's `core.fsmonitor`, and host git run
/// there ran it). Setting a moved host repository's config aside is the safe side: the
/// host's own config is kept beside it, under `stockade-disabled-config`.
fn check(roots: &[PathBuf], known: &HashMap<(u64, u64), PathBuf>) -> Vec<NestedRepository> {
    let mut found = Vec::new();
    let mut walk = Walk::default();
    for root in roots {
        walk.root(root, &mut |dir, name, path, st| {
            if known.get(&identity(st)).is_some_and(|at| at == path) {
                return;
            }
            if found.len() >= MAX_REPORTED {
                if found.len() == MAX_REPORTED {
                    found.push(NestedRepository {
                        path: path.to_owned(),
                        outcome: NestedOutcome::Unchecked(libc::E2BIG),
                    });
                }
                return;
            }
            found.push(NestedRepository {
                path: path.to_owned(),
                outcome: treat(dir, name, st),
            });
        });
    }
    found.extend(walk.unchecked);
    for n in &found {
        tracing::warn!("stockade: {n}");
    }
    found
}

/// One walk of all roots: the entries it has examined, and the directories it left.
#[derive(Default)]
struct Walk {
    entries: usize,
    unchecked: Vec<NestedRepository>,
    /// The buffer the listings share.
    buf: Vec<u8>,
}

/// What a walk reports: the directory holding the repository, its name there, its host
/// path, and its `lstat`.
type Visit<'a> = dyn FnMut(BorrowedFd<'_>, &OsStr, &Path, &FileStat) + 'a;

impl Walk {
    fn root(&mut self, root: &Path, visit: &mut Visit<'_>) {
        match open_root(root) {
            Ok(fd) => self.dir(None, fd, root, 0, visit),
            // A writable path that is a file, or gone (a program on layer 2 may remove
            // one): nothing there can hold a repository.
            Err(Errno::ENOTDIR | Errno::ENOENT) => {}
            Err(e) => self.unchecked(root, e as i32),
        }
    }

    fn unchecked(&mut self, path: &Path, errno: i32) {
        if self.unchecked.len() < MAX_REPORTED {
            self.unchecked.push(NestedRepository {
                path: path.to_owned(),
                outcome: NestedOutcome::Unchecked(errno),
            });
        }
    }

    /// Visits the repositories in directory `fd` (host path `path`, `name` in `parent`
    /// below a root) and below.
    fn dir(
        &mut self,
        parent: Option<(BorrowedFd<'_>, &OsStr)>,
        fd: OwnedFd,
        path: &Path,
        depth: usize,
        visit: &mut Visit<'_>,
    ) {
        let mut subdirs: Vec<OsString> = Vec::new();
        let mut git_dir = super::names::GitDirectory::default();
        let mut stop = None;
        let mut buf = std::mem::take(&mut self.buf);
        let listed = list(&fd, &mut buf, &mut |name, is_dir| {
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                stop = Some(libc::E2BIG);
                return false;
            }
            // Compared without case (no copy of an ASCII name): a file system that folds
            // case takes `HEAD` for `head` (git asks for the names it knows and gets
            // whichever is there). No Unicode fold reaches the letters of `.git`; git's
            // directory names go through the rule the apply of a change set uses too.
            let n = name.as_bytes();
            if n.eq_ignore_ascii_case(b".git") {
                if let Ok(st) = fstatat(&fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    visit(fd.as_fd(), name, &path.join(name), &st);
                }
                return true;
            }
            git_dir.note(name);
            let is_dir = is_dir.unwrap_or_else(|| {
                fstatat(&fd, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| {
                    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
                })
            });
            if is_dir {
                subdirs.push(name.to_owned());
            }
            true
        });
        self.buf = buf;
        if let Some(errno) = listed.err().or(stop) {
            return self.unchecked(path, errno);
        }
        // A directory with HEAD, objects/ and refs/ is one git takes as a (bare)
        // repository when run inside it, and so is one with HEAD and a `commondir` file,
        // whose objects, refs, config and hooks are where `commondir` points (git's
        // `is_git_directory`): report it (its `commondir` is then set aside), and do not
        // look into it.
        if git_dir.is_repository() {
            if let Some((pfd, name)) = parent {
                if let Ok(st) = fstatat(pfd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    visit(pfd, name, path, &st);
                }
                return;
            }
            // A root made one: git run anywhere below the root finds it on its way up
            // (a bare repository is looked for at each level, `safe.bareRepository`'s
            // default `all`), before any `.git` higher up. It is reached through its
            // parent, as any other, and its subdirectories are still walked.
            let (Some(up), Some(name)) = (path.parent(), path.file_name()) else {
                return self.unchecked(path, libc::EINVAL);
            };
            match open_root(up) {
                Ok(pfd) => {
                    if let Ok(st) = fstatat(&pfd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                        visit(pfd.as_fd(), name, path, &st);
                    }
                }
                Err(e) => return self.unchecked(path, e as i32),
            }
        }
        if depth >= MAX_DEPTH {
            if !subdirs.is_empty() {
                self.unchecked(path, libc::E2BIG);
            }
            return;
        }
        for name in subdirs {
            let child = path.join(&name);
            match openat(
                &fd,
                name.as_os_str(),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(sub) => self.dir(
                    Some((fd.as_fd(), name.as_os_str())),
                    sub,
                    &child,
                    depth + 1,
                    visit,
                ),
                // Replaced since the listing (the sandbox is gone: by the host itself).
                Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => {}
                Err(e) => self.unchecked(&child, e as i32),
            }
        }
    }
}

/// Calls `each` with the name of every entry of the directory `fd` but `.` and `..`, and
/// whether it is a directory (`None`: the file system does not say), until `each` returns
/// `false`; `Err(errno)` when the listing fails. One `getdents64` per 32 KiB of entries,
/// and nothing else: a walk lists every directory of every writable root twice per
/// command.
#[cfg(target_os = "linux")]
fn list(
    fd: &OwnedFd,
    buf: &mut Vec<u8>,
    each: &mut dyn FnMut(&OsStr, Option<bool>) -> bool,
) -> Result<(), i32> {
    if buf.is_empty() {
        buf.resize(32 * 1024, 0);
    }
    loop {
        let n = stockade_sys::linux::getdents64(fd.as_fd().into(), buf).map_err(|e| e.raw())?;
        if n == 0 {
            return Ok(());
        }
        let mut records = stockade_sys::linux::dirents(buf.get(..n).unwrap_or_default());
        for (kind, name) in records.by_ref() {
            if name == b"." || name == b".." {
                continue;
            }
            let is_dir = match kind {
                libc::DT_DIR => Some(true),
                libc::DT_UNKNOWN => None,
                _ => Some(false),
            };
            if !each(OsStr::from_bytes(name), is_dir) {
                return Ok(());
            }
        }
        // A record that does not fit (the kernel writes none): the entries after it would
        // go unseen.
        if records.leftover() != 0 {
            return Err(libc::EIO);
        }
    }
}

/// As on Linux, through `readdir` of a duplicate of `fd`.
#[cfg(not(target_os = "linux"))]
fn list(
    fd: &OwnedFd,
    _buf: &mut Vec<u8>,
    each: &mut dyn FnMut(&OsStr, Option<bool>) -> bool,
) -> Result<(), i32> {
    let dup = fd
        .try_clone()
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    let mut dir = Dir::from_fd(dup).map_err(|e| e as i32)?;
    for entry in dir.iter() {
        let entry = entry.map_err(|_| libc::EIO)?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = entry.file_type().map(|t| t == Type::Directory);
        if !each(name, is_dir) {
            return Ok(());
        }
    }
    Ok(())
}

/// Opens a root (a canonical host path) as a directory without following any symlink.
#[cfg(target_os = "linux")]
fn open_root(root: &Path) -> Result<OwnedFd, Errno> {
    let path = std::ffi::CString::new(root.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let how = stockade_sys::linux::open_how(
        (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        0,
        libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    );
    stockade_sys::linux::openat2(stockade_sys::fd::CWD, &path, &how)
        .map(OwnedFd::from)
        .map_err(|e| Errno::from_raw(e.raw()))
}

/// Opens a root (a canonical host path) as a directory, its last component not followed
/// if it is a symlink (no `openat2` here).
#[cfg(not(target_os = "linux"))]
fn open_root(root: &Path) -> Result<OwnedFd, Errno> {
    nix::fcntl::open(
        root,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// The names in a git directory that can make git run a program or read config, hooks
/// or objects from elsewhere: set aside.
const SET_ASIDE: &[&str] = &[
    "config",
    "config.worktree",
    "hooks",
    "commondir",
    "worktrees",
    "modules",
    "objects/info/alternates",
    "objects/info/http-alternates",
];

/// Treats the repository `name` in `dir`, whose `lstat` is `st`.
fn treat(dir: BorrowedFd<'_>, name: &OsStr, st: &FileStat) -> NestedOutcome {
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFDIR {
        // A `gitdir:` file or a symlink: git would follow it.
        let mut to = name.to_owned();
        to.push(".stockade-refused");
        return match set_aside(dir, name, &to) {
            Ok(to) => NestedOutcome::Refused { renamed_to: to },
            Err(e) => NestedOutcome::Failed(e as i32),
        };
    }
    let git = match openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(g) => g,
        Err(e) => return NestedOutcome::Failed(e as i32),
    };
    match neutralize(&git) {
        Ok(set_aside) => NestedOutcome::Neutralized { set_aside },
        Err(e) => NestedOutcome::Failed(e as i32),
    }
}

/// Sets aside every [`SET_ASIDE`] name in the git directory `git` and writes the
/// allowlisted config in place of its config.
fn neutralize(git: &OwnedFd) -> Result<Vec<String>, Errno> {
    let mut done = Vec::new();
    for rel in SET_ASIDE {
        let (parent, name) = match rel.rsplit_once('/') {
            Some((p, n)) => (Some(p), n),
            None => (None, *rel),
        };
        let pfd = match parent {
            None => git.try_clone().map_err(|_| Errno::EMFILE)?,
            Some(p) => match open_below(git, p) {
                Ok(fd) => fd,
                Err(Errno::ENOENT) => continue,
                // objects/ or objects/info as a symlink or file: git refuses or ignores
                // it; alternates cannot be read through it.
                Err(Errno::ENOTDIR | Errno::ELOOP) => continue,
                Err(e) => return Err(e),
            },
        };
        let st = match fstatat(&pfd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(e),
        };
        let mut text = Vec::new();
        if *rel == "config"
            && SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
        {
            let fd = openat(
                &pfd,
                name,
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            std::fs::File::from(fd)
                .take(config::MAX_CONFIG as u64 + 1)
                .read_to_end(&mut text)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        }
        let aside = format!("stockade-disabled-{name}");
        set_aside(pfd.as_fd(), OsStr::new(name), OsStr::new(&aside))?;
        done.push((*rel).to_owned());
        if *rel == "config" {
            let fd = openat(
                &pfd,
                "config",
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o644),
            )?;
            std::fs::File::from(fd)
                .write_all(&config::filter(&text))
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        }
    }
    Ok(done)
}

/// Opens the directory `rel` (plain names separated by `/`) below `dir` without
/// following symlinks.
fn open_below(dir: &OwnedFd, rel: &str) -> Result<OwnedFd, Errno> {
    let mut fd = dir.try_clone().map_err(|_| Errno::EMFILE)?;
    for part in rel.split('/') {
        fd = openat(
            &fd,
            part,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
    }
    Ok(fd)
}

/// Renames `name` in `dir` to `to`, or to `to.1` … `to.99` when that exists; never over
/// an existing entry. Returns the name used.
fn set_aside(dir: BorrowedFd<'_>, name: &OsStr, to: &OsStr) -> Result<OsString, Errno> {
    for n in 0..100 {
        let mut target = to.to_owned();
        if n > 0 {
            target.push(format!(".{n}"));
        }
        match fstatat(dir, target.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Err(Errno::ENOENT) => {}
            Ok(_) => continue,
            Err(e) => return Err(e),
        }
        renameat(dir, name, dir, target.as_os_str())?;
        return Ok(target);
    }
    Err(Errno::EEXIST)
}
