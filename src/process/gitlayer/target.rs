//! Linux: what a writable root's `.git` names, found per command before the spawn.
//!
//! # A `.git` that is a symlink or a file
//!
//! Git follows a `.git` symlink, and a `.git` file that says `gitdir: <path>` (linked
//! worktrees, submodules, `git init --separate-git-dir`), to the repository metadata. When
//! that metadata lies in the same writable root, it is as much the program's to rewrite as
//! a `.git` directory would be, so it gets the same copy-on-write layer and the same merge.
//! What it names is taken as the metadata only when the kernel reaches it, from the link's
//! directory (or from `/` for an absolute path), without following any further symlink
//! (`openat2(RESOLVE_NO_SYMLINKS)`), and it is a directory strictly below the root:
//!
//! - inside: the child layers it (checked against the identity seen here), pins every
//!   directory the link's path passes through below the root, and pins the link itself
//!   (bound read-only onto itself: a mountpoint cannot be removed, renamed or replaced),
//!   so that the host's git finds after the run what the layer protected. A target that
//!   holds a path the plan masks (the data dir) cannot be layered, since the mask checks
//!   the identity of the host's directory: it is bound read-only instead.
//! - outside the root, the root itself, or not reachable that way (a symlink on the way,
//!   missing, not a directory): no layer, reported ([`GitUnguarded`], a `tracing` warning).
//!   The link is still pinned; what it names is as writable inside as the rest of the
//!   layout makes it, which for a path outside every writable root is not at all.
//!
//! A target hidden by the plan (under a masked or denied name) or kept read-only by it
//! (under a `read_only` path) needs no layer and is not reported.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};

use super::{GitUnguarded, GitUnguardedReason};
use crate::backend::linux::prepare::GitLink;
use crate::error::PlanError;
use crate::plan::{Access, Plan, Step};

/// What a command does about one writable root's `.git`.
#[derive(Debug)]
pub(in crate::process) enum Found {
    /// Nothing to layer: missing, not a directory, a file git would not read, or what it
    /// names is hidden or read-only already.
    Nothing,
    /// A directory to layer (or, through a link, to keep read-only).
    Layer(Target),
    /// A link whose target runs without the layer, reported.
    Unguarded(GitUnguarded),
}

/// The repository metadata a `.git` names.
#[derive(Debug)]
pub(in crate::process) struct Target {
    /// The directory, without symlinks (`<root>/.git` itself, or what the link names).
    pub(in crate::process) dir: PathBuf,
    /// Its `(st_dev, st_ino)`.
    pub(in crate::process) identity: (u64, u64),
    /// Its permission bits, with the owner's access.
    pub(in crate::process) mode: u32,
    /// When `.git` is a symlink or a `gitdir:` file.
    pub(in crate::process) link: Option<Link>,
}

/// A `.git` symlink or file that names a directory inside its root.
#[derive(Debug)]
pub(in crate::process) struct Link {
    /// `(st_dev, st_ino)` of the symlink or file.
    identity: (u64, u64),
    /// The directories the link's path passes through strictly between the root and the
    /// target, parents first.
    pins: Vec<PathBuf>,
    /// Whether the target is layered (else bound read-only).
    pub(in crate::process) layer: bool,
}

impl Link {
    /// What the child needs to pin the link and reach `target`.
    ///
    /// # Errors
    ///
    /// [`PlanError::Nul`] for a path with a NUL byte.
    pub(in crate::process) fn prepare(&self, target: &Path) -> Result<GitLink, PlanError> {
        GitLink::new(self.identity, target, &self.pins, self.layer)
    }
}

/// Finds what `git` (`<root>/.git`, a step of `plan`) is and names.
pub(in crate::process) fn find(plan: &Plan, git: &Path) -> Found {
    let Ok(md) = std::fs::symlink_metadata(git) else {
        return Found::Nothing;
    };
    if md.is_dir() {
        return Found::Layer(Target {
            dir: git.to_path_buf(),
            identity: (md.dev(), md.ino()),
            mode: md.mode() & 0o777 | 0o700,
            link: None,
        });
    }
    let written = if md.file_type().is_symlink() {
        match std::fs::read_link(git) {
            Ok(t) => t,
            Err(_) => return Found::Nothing,
        }
    } else if md.is_file() {
        match gitdir(git) {
            Some(t) => t,
            None => return Found::Nothing,
        }
    } else {
        return Found::Nothing;
    };
    let (Some(root), true) = (git.parent(), git.is_absolute()) else {
        return Found::Nothing;
    };
    let named = root.join(&written);
    let unguarded = |target: PathBuf, reason| {
        Found::Unguarded(GitUnguarded {
            path: git.to_path_buf(),
            target,
            reason,
        })
    };
    let (dir, st, visited) = match resolve(&named) {
        Ok(r) => r,
        Err(e) => return unguarded(named, GitUnguardedReason::Unresolved(e as i32)),
    };
    if dir == root {
        return unguarded(dir, GitUnguardedReason::Root);
    }
    if !dir.starts_with(root) {
        return unguarded(dir, GitUnguardedReason::Outside);
    }
    let layer = match covered(plan, root, &dir) {
        Cover::Hidden | Cover::ReadOnly => return Found::Nothing,
        Cover::HoldsMask => false,
        Cover::None => true,
    };
    let mut pins: Vec<PathBuf> = visited
        .into_iter()
        .filter(|p| p.starts_with(root) && p != root && *p != dir)
        .collect();
    // Component-wise order puts parents first.
    pins.sort();
    pins.dedup();
    Found::Layer(Target {
        identity: (st.st_dev, st.st_ino),
        mode: st.st_mode & 0o777 | 0o700,
        dir,
        link: Some(Link {
            identity: (md.dev(), md.ino()),
            pins,
            layer,
        }),
    })
}

/// The path of a `gitdir: <path>` file, read as git reads it (the prefix, then the rest
/// without trailing line ends), or `None` for a file git would not take. Relative paths
/// are relative to the file's directory, as git takes them.
pub(super) fn gitdir(file: &Path) -> Option<PathBuf> {
    /// Git's `.git` files are one line; a larger one is not read.
    const MAX: u64 = 4096;
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(nix::fcntl::AT_FDCWD, file, how).ok()?;
    let mut text = Vec::new();
    std::fs::File::from(fd)
        .take(MAX + 1)
        .read_to_end(&mut text)
        .ok()?;
    if text.len() as u64 > MAX {
        return None;
    }
    gitdir_path(&text).map(|path| PathBuf::from(std::ffi::OsStr::from_bytes(path)))
}

/// The path of a `gitdir:` file's bytes `text` (a program may have written them): after
/// the prefix, without trailing line ends; `None` for text git would not take.
pub(crate) fn gitdir_path(text: &[u8]) -> Option<&[u8]> {
    let mut path = text.strip_prefix(b"gitdir: ")?;
    while let Some(rest) = path
        .strip_suffix(b"\n")
        .or_else(|| path.strip_suffix(b"\r"))
    {
        path = rest;
    }
    (!path.is_empty()).then_some(path)
}

/// Opens the absolute path `named` as a directory without following any symlink, and
/// returns the path it reached (lexically normal: with no symlink on the way, `..` is the
/// real parent), its `stat`, and every directory the path passed through.
pub(super) fn resolve(
    named: &Path,
) -> Result<(PathBuf, nix::sys::stat::FileStat, Vec<PathBuf>), Errno> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(nix::fcntl::AT_FDCWD, named, how)?;
    let st = nix::sys::stat::fstat(&fd)?;
    let mut cur = PathBuf::from("/");
    let mut visited = Vec::new();
    for c in named.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => cur = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                cur.pop();
                visited.push(cur.clone());
            }
            Component::Normal(n) => {
                cur.push(n);
                visited.push(cur.clone());
            }
        }
    }
    Ok((cur, st, visited))
}

/// How the plan already treats a target directory.
#[derive(Debug, PartialEq, Eq)]
enum Cover {
    None,
    /// Under a mask or a hidden name: not reachable inside.
    Hidden,
    /// Under a read-only bind.
    ReadOnly,
    /// Holds a masked path (the data dir), whose mask checks the host's identity.
    HoldsMask,
}

/// `root` is the writable root: a read-only bind above it (`/opt` over a workspace in
/// `/opt`) is shadowed by the root's own bind.
fn covered(plan: &Plan, root: &Path, dir: &Path) -> Cover {
    let mut cover = Cover::None;
    for step in &plan.steps {
        match step {
            Step::Mask { path, .. } | Step::HideName { path } if dir.starts_with(path) => {
                return Cover::Hidden;
            }
            Step::Bind {
                dst,
                access: Access::ReadOnly,
                ..
            } if dir.starts_with(dst) && dst.starts_with(root) => cover = Cover::ReadOnly,
            Step::Mask { path, .. } if path.starts_with(dir) && cover == Cover::None => {
                cover = Cover::HoldsMask;
            }
            _ => {}
        }
    }
    cover
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: Vec<Step>) -> Plan {
        Plan {
            layer: crate::policy::Layer::Full,
            namespaces: crate::plan::Namespaces::default(),
            workspace: "/ws".into(),
            steps,
            path: Vec::new(),
            roots: Vec::new(),
            private_tmp: false,
            walls: Default::default(),
            egress: None,
        }
    }

    #[test]
    fn gitdir_files_are_read_as_git_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join(".git");
        for (text, want) in [
            ("gitdir: /a/b\n", Some("/a/b")),
            ("gitdir: rel/x\r\n", Some("rel/x")),
            ("gitdir: ../.git/modules/m", Some("../.git/modules/m")),
            ("gitdir:/a\n", None),
            ("gitdir: \n", None),
            ("ref: refs/heads/main\n", None),
        ] {
            std::fs::write(&f, text).unwrap();
            assert_eq!(gitdir(&f), want.map(PathBuf::from), "{text:?}");
        }
        std::fs::write(&f, format!("gitdir: /{}\n", "a".repeat(5000))).unwrap();
        assert_eq!(gitdir(&f), None);
    }

    #[test]
    fn targets_resolve_without_symlinks_and_list_what_they_pass() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("c")).unwrap();
        let (dir_, _, visited) = resolve(&root.join("a/b/../../c")).unwrap();
        assert_eq!(dir_, root.join("c"));
        assert!(visited.contains(&root.join("a/b")) && visited.contains(&root.join("a")));
        std::os::unix::fs::symlink("c", root.join("l")).unwrap();
        assert_eq!(resolve(&root.join("l")).unwrap_err(), Errno::ELOOP);
        assert_eq!(resolve(&root.join("nope")).unwrap_err(), Errno::ENOENT);
    }

    #[test]
    fn a_link_is_followed_only_to_a_directory_strictly_inside_its_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let out = tempfile::tempdir().unwrap();
        let out = out.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("sub/real")).unwrap();
        std::fs::create_dir_all(root.join("data")).unwrap();
        let git = root.join(".git");
        let link = |target: &Path| {
            let _ = std::fs::remove_file(&git);
            std::os::unix::fs::symlink(target, &git).unwrap();
        };
        let p = plan(Vec::new());
        link(Path::new("sub/real"));
        match find(&p, &git) {
            Found::Layer(t) => {
                assert_eq!(t.dir, root.join("sub/real"));
                let l = t.link.unwrap();
                assert_eq!(l.pins, [root.join("sub")]);
                assert!(l.layer);
            }
            other => panic!("{other:?}"),
        }
        // Absolute and through `..`: the same directory.
        link(&root.join("sub/../sub/real"));
        assert!(matches!(find(&p, &git), Found::Layer(t) if t.dir == root.join("sub/real")));
        for (target, reason) in [
            (out.clone(), GitUnguardedReason::Outside),
            (root.join("sub/.."), GitUnguardedReason::Root),
            (
                root.join("missing"),
                GitUnguardedReason::Unresolved(libc::ENOENT),
            ),
        ] {
            link(&target);
            match find(&p, &git) {
                Found::Unguarded(u) => assert_eq!(u.reason, reason, "{}", target.display()),
                other => panic!("{}: {other:?}", target.display()),
            }
        }
        // A gitdir file, relative to its directory.
        std::fs::remove_file(&git).unwrap();
        std::fs::write(&git, "gitdir: sub/real\n").unwrap();
        assert!(matches!(find(&p, &git), Found::Layer(t) if t.link.is_some()));
        // What the plan hides or keeps read-only needs nothing; a target holding the data
        // dir's mask is bound read-only.
        let mask = |path: PathBuf| Step::Mask {
            path,
            dir: true,
            beneath: None,
            identity: Some((1, 2)),
        };
        let hidden = plan(vec![mask(root.join("sub"))]);
        assert!(matches!(find(&hidden, &git), Found::Nothing));
        let holds = plan(vec![mask(root.join("sub/real/data"))]);
        assert!(
            matches!(find(&holds, &git), Found::Layer(t) if t.link.as_ref().is_some_and(|l| !l.layer))
        );
        let ro = plan(vec![Step::Bind {
            src: root.join("sub"),
            dst: root.join("sub"),
            access: Access::ReadOnly,
            dir: true,
            beneath: None,
            idmap: false,
        }]);
        assert!(matches!(find(&ro, &git), Found::Nothing));
    }
}
