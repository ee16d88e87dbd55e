//! Policy × host → [`Plan`]: the ordered steps of one sandbox layout, as plain data.
//!
//! Building a plan decides everything: which host paths appear where, in which order, with
//! which access, what is masked. It performs no system call of its own: facts about the
//! host file system come through the [`HostFs`] trait, so tests build plans against a fake
//! host. The Linux backend turns a plan into prepared operations; the child replays them.
//!
//! Mount order is the security property here: later mounts shadow earlier ones. Entries are
//! sorted by depth (parents before children) and, at equal depth, masks after binds, so the
//! data-dir mask always lands on top of the workspace bind that contains it.

mod dev;
mod egress;
mod full;
mod host;
mod layer2;
mod limits;
mod owners;
mod seatbelt;
mod select;
mod step;
mod walls;

use std::path::{Component, Path, PathBuf};

use crate::error::{Conflict, NodeKind, PlanError, errno_of};
use crate::policy::{Layer, Policy};

pub use dev::{DEV_NODES, NULL};
pub use egress::{EgressPlan, Listen, proxy_env};
pub use host::node_kind_of;
// The Linux launcher and process layer name the counts and the init's share.
#[cfg_attr(not(target_os = "linux"), allow(unused_imports))]
pub use limits::{INIT_PROCESSES, Rlimit, USER_COUNTS, processes_bounded_without_cgroup, rlimits};
pub use seatbelt::SbplInput;
/// The overlay part of [`SbplInput`]: read by the macOS profile's code and its tests.
#[cfg_attr(not(any(test, feature = "internals")), allow(unused_imports))]
pub use seatbelt::SbplOverlay;
pub use select::{Degradation, select};
pub use step::Step;
pub use walls::Walls;
// Named by one system's launcher, the tests and `internals` users only.
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use {
    dev::DevNode,
    seatbelt::{private_alias, seatbelt_path},
    select::Selection,
    walls::{
        DEV_FILES, DEV_PTS, FilterOptions, Grant, LandlockRules, PathRule, RulesetSpec, Seen,
        SplitRules,
    },
};

/// What kind of object a host path is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file (or any other non-directory, non-symlink).
    File,
    /// A symbolic link with this target (as read, not resolved).
    Symlink(PathBuf),
}

/// The facts about the host file system that planning needs.
pub trait HostFs {
    /// What `path` is, without following a final symlink; `None` when it does not exist.
    fn kind(&self, path: &Path) -> Option<Kind>;
    /// The canonical form of `path` (all symlinks resolved).
    ///
    /// # Errors
    ///
    /// The I/O error of the failing lookup.
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf>;
    /// The entries of directory `dir` (full paths), unsorted. The default: none.
    fn children(&self, dir: &Path) -> Vec<PathBuf> {
        let _ = dir;
        Vec::new()
    }
    /// The host's directory for temporary files (`$TMPDIR`, else `/tmp`, else `/var/tmp`
    /// or `/usr/tmp` where a minimal image has no `/tmp`), where layer 2 makes each
    /// command's private `TMPDIR`. The default: `/tmp`.
    fn temp_dir(&self) -> PathBuf {
        PathBuf::from("/tmp")
    }
    /// Pathname unix sockets bound on this host. The default: none.
    fn unix_sockets(&self) -> Vec<PathBuf> {
        Vec::new()
    }
    /// Entries beneath `roots` that "others" may not read: files without the `o+r` bit and
    /// directories without `o+rx` (not descended into), symlinks never followed. A root
    /// host reads them inside (the program's uid owns them) unless they are masked. The
    /// default: none.
    fn private_entries(&self, roots: &[PathBuf]) -> Vec<PrivateEntry> {
        let _ = roots;
        Vec::new()
    }
    /// The `(st_dev, st_ino)` of directory `path`, without following a final symlink:
    /// the identity a spawn checks the data dir against. The default: `(0, 0)` for a
    /// directory of [`HostFs::kind`].
    ///
    /// # Errors
    ///
    /// `ENOENT` when it does not exist, `ENOTDIR` when it is not a directory, or the
    /// error of the lookup.
    fn dir_identity(&self, path: &Path) -> std::io::Result<(u64, u64)> {
        match self.kind(path) {
            Some(Kind::Dir) => Ok((0, 0)),
            Some(_) => Err(std::io::Error::from_raw_os_error(libc::ENOTDIR)),
            None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
        }
    }
    /// Whether the directory tree at `root` can be bound idmapped here, so that a root
    /// host's files show as owned by nobody inside (see [`Step::Bind`]'s `idmap`). The
    /// default: no.
    fn idmap(&self, root: &Path) -> bool {
        let _ = root;
        false
    }
    /// Whether this process may read and search the directory `dir` (a workspace it
    /// cannot enter fails at its first hidden name otherwise, naming that instead): the
    /// errno of `access(2)`. The default: it may.
    fn usable(&self, dir: &Path) -> Result<(), crate::error::Errno> {
        let _ = dir;
        Ok(())
    }
    /// Whether "others" may search the directory `dir` (`o+x`; a missing path counts as
    /// searchable). The default: yes.
    fn others_may_enter(&self, dir: &Path) -> bool {
        let _ = dir;
        true
    }
    /// [`HostFs::kind`] and [`HostFs::others_may_enter`] of `path` at once: on a real
    /// host both come from one `lstat`. The default asks each.
    fn kind_and_enterable(&self, path: &Path) -> (Option<Kind>, bool) {
        (self.kind(path), self.others_may_enter(path))
    }
    /// What `path` is, a final symlink not followed, with a device's numbers: the full
    /// layer checks its [`DEV_NODES`] with it. The default: the device each of them must
    /// be (a host with a proper `/dev`), [`NodeKind::Missing`] for any other path.
    fn node(&self, path: &Path) -> NodeKind {
        match DEV_NODES.iter().find(|n| Path::new(n.path) == path) {
            Some(n) => NodeKind::CharDevice {
                major: n.device.0,
                minor: n.device.1,
            },
            None => NodeKind::Missing,
        }
    }
}

/// A host entry that "others" may not read (see [`HostFs::private_entries`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PrivateEntry {
    /// Its host path.
    pub path: PathBuf,
    /// Whether it is a directory.
    pub dir: bool,
}

/// The real host file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

impl RealFs {
    /// The [`Kind`] of `path`, whose `lstat` gave `md`.
    fn kind_of(path: &Path, md: &std::fs::Metadata) -> Option<Kind> {
        if md.file_type().is_symlink() {
            return std::fs::read_link(path).ok().map(Kind::Symlink);
        }
        Some(if md.is_dir() { Kind::Dir } else { Kind::File })
    }

    /// [`HostFs::others_may_enter`] from the `lstat` of the path (`None`: it failed).
    fn enterable(md: Option<&std::fs::Metadata>) -> bool {
        use std::os::unix::fs::PermissionsExt;
        md.is_none_or(|m| m.permissions().mode() & 0o001 != 0)
    }
}

impl HostFs for RealFs {
    fn kind(&self, path: &Path) -> Option<Kind> {
        let md = std::fs::symlink_metadata(path).ok()?;
        Self::kind_of(path, &md)
    }

    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }

    fn children(&self, dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect()
    }

    fn temp_dir(&self) -> PathBuf {
        host::temp_dir()
    }

    fn unix_sockets(&self) -> Vec<PathBuf> {
        host::unix_sockets()
    }

    fn private_entries(&self, roots: &[PathBuf]) -> Vec<PrivateEntry> {
        host::private_entries(roots)
    }

    fn dir_identity(&self, path: &Path) -> std::io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let md = std::fs::symlink_metadata(path)?;
        if !md.is_dir() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        Ok((md.dev(), md.ino()))
    }

    #[cfg(target_os = "linux")]
    fn idmap(&self, root: &Path) -> bool {
        crate::probe::idmap::supported(root)
    }

    fn usable(&self, dir: &Path) -> Result<(), crate::error::Errno> {
        use nix::unistd::AccessFlags;
        nix::unistd::access(dir, AccessFlags::R_OK | AccessFlags::X_OK)
    }

    fn others_may_enter(&self, dir: &Path) -> bool {
        Self::enterable(std::fs::symlink_metadata(dir).ok().as_ref())
    }

    fn kind_and_enterable(&self, path: &Path) -> (Option<Kind>, bool) {
        let md = std::fs::symlink_metadata(path).ok();
        let kind = md.as_ref().and_then(|md| Self::kind_of(path, md));
        (kind, Self::enterable(md.as_ref()))
    }

    fn node(&self, path: &Path) -> NodeKind {
        match std::fs::symlink_metadata(path) {
            Ok(md) if md.file_type().is_symlink() => {
                NodeKind::Symlink(std::fs::read_link(path).unwrap_or_default())
            }
            Ok(md) => host::node_kind(&md),
            Err(_) => NodeKind::Missing,
        }
    }
}

/// A [`HostFs`] that answers [`HostFs::kind`] and [`HostFs::others_may_enter`] once per
/// path: one plan asks about the same ancestors many times (`/etc` a dozen times on a root
/// host, once per private entry below it and once per configured path through it), one
/// `statx` each. A path's kind comes with its "others" bit ([`HostFs::kind_and_enterable`],
/// the same `lstat`): a root host asks both of each read-only root (`/usr`, `/etc`,
/// `/opt`), the second right after the first. It lives for one
/// [`select`] call, which takes microseconds; every other question goes to `inner`.
pub(crate) struct Memo<'a> {
    inner: &'a dyn HostFs,
    kinds: std::cell::RefCell<std::collections::HashMap<PathBuf, Option<Kind>>>,
    enterable: std::cell::RefCell<std::collections::HashMap<PathBuf, bool>>,
    nodes: std::cell::RefCell<std::collections::HashMap<PathBuf, NodeKind>>,
}

impl<'a> Memo<'a> {
    pub(crate) fn new(inner: &'a dyn HostFs) -> Self {
        Memo {
            inner,
            kinds: std::cell::RefCell::default(),
            enterable: std::cell::RefCell::default(),
            nodes: std::cell::RefCell::default(),
        }
    }

    /// What this plan's lookups found at `path` (a final symlink not followed), when they
    /// looked and found neither a symlink nor nothing ([`walls::RulesetSpec::seen`]).
    pub(crate) fn seen(&self, path: &Path) -> Option<Seen> {
        if let Some(node) = self.nodes.borrow().get(path) {
            return match node {
                NodeKind::Dir => Some(Seen::Dir),
                NodeKind::CharDevice { .. } => Some(Seen::CharDevice),
                NodeKind::Missing | NodeKind::Symlink(_) => None,
                _ => Some(Seen::NotDir),
            };
        }
        match self.kinds.borrow().get(path)? {
            Some(Kind::Dir) => Some(Seen::Dir),
            Some(Kind::File) => Some(Seen::NotDir),
            Some(Kind::Symlink(_)) | None => None,
        }
    }
}

impl HostFs for Memo<'_> {
    fn kind(&self, path: &Path) -> Option<Kind> {
        if let Some(kind) = self.kinds.borrow().get(path) {
            return kind.clone();
        }
        let (kind, enterable) = self.inner.kind_and_enterable(path);
        self.kinds
            .borrow_mut()
            .insert(path.to_path_buf(), kind.clone());
        // An answer already given stays the answer for this plan.
        self.enterable
            .borrow_mut()
            .entry(path.to_path_buf())
            .or_insert(enterable);
        kind
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.inner.canonicalize(path)
    }
    fn children(&self, dir: &Path) -> Vec<PathBuf> {
        self.inner.children(dir)
    }
    fn temp_dir(&self) -> PathBuf {
        self.inner.temp_dir()
    }
    fn unix_sockets(&self) -> Vec<PathBuf> {
        self.inner.unix_sockets()
    }
    fn private_entries(&self, roots: &[PathBuf]) -> Vec<PrivateEntry> {
        self.inner.private_entries(roots)
    }
    fn dir_identity(&self, path: &Path) -> std::io::Result<(u64, u64)> {
        self.inner.dir_identity(path)
    }
    fn idmap(&self, root: &Path) -> bool {
        self.inner.idmap(root)
    }
    fn usable(&self, dir: &Path) -> Result<(), crate::error::Errno> {
        self.inner.usable(dir)
    }
    fn kind_and_enterable(&self, path: &Path) -> (Option<Kind>, bool) {
        (self.kind(path), self.others_may_enter(path))
    }
    fn others_may_enter(&self, dir: &Path) -> bool {
        if let Some(&may) = self.enterable.borrow().get(dir) {
            return may;
        }
        let may = self.inner.others_may_enter(dir);
        self.enterable.borrow_mut().insert(dir.to_path_buf(), may);
        may
    }
    fn node(&self, path: &Path) -> NodeKind {
        // Kept, not reused: the plan asks once per node, the Landlock rules then learn
        // from it what the node is ([`Memo::seen`]).
        let node = self.inner.node(path);
        self.nodes
            .borrow_mut()
            .insert(path.to_path_buf(), node.clone());
        node
    }
}

/// Read-only or read-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read-only (recursively, submounts included).
    ReadOnly,
    /// Read-write.
    ReadWrite,
    /// List directories only (names, no contents): in layer 2, the directory above
    /// entries granted one by one around a hidden entry. Never a bind's access.
    ListDir,
}

/// A path inside a writable root, opened by the child without following any symlink.
///
/// A sandboxed program can plant symlinks in its writable roots between runs; a mount
/// whose target is resolved by path could then be redirected. The child opens `path` with
/// `openat2(RESOLVE_NO_SYMLINKS)` inside the new root and mounts on the resulting fd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beneath {
    /// The writable root (a host path, bound at the same place inside).
    pub root: PathBuf,
}

/// The namespaces a plan creates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Namespaces {
    /// user, mount, pid, ipc and uts.
    pub base: bool,
    /// A private network namespace.
    pub net: bool,
}

/// The layout steps for one sandbox: everything but the per-command steps (stdio, working
/// directory, program), which the spawn path adds around them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The layer this plan realizes.
    pub layer: Layer,
    /// Namespaces to create.
    pub namespaces: Namespaces,
    /// The canonical workspace (the same path inside).
    pub workspace: PathBuf,
    /// The layout steps, in order.
    pub steps: Vec<Step>,
    /// Directories on `PATH` inside, in order (the tools dir first).
    pub path: Vec<PathBuf>,
    /// Host paths visible inside and their access (canonical; the workspace first): the
    /// Landlock grants. In the full layer they are derived from the plan's own
    /// [`Step::Bind`] steps, one source of truth; in layer 2 they are the whole view.
    pub roots: Vec<(PathBuf, Access)>,
    /// Give each command a fresh private temporary directory on the host (`TMPDIR`), for
    /// layers without a private `/tmp` mount.
    pub private_tmp: bool,
    /// The walls besides the layout: Landlock grants, seccomp options, the Seatbelt
    /// profile's input. The backend compiles them; it decides nothing.
    pub walls: Walls,
    /// With `network = "allow"`: the egress proxy's allowlist and where it listens.
    pub egress: Option<EgressPlan>,
}

/// The host facts a plan depends on besides the file system.
#[derive(Clone, Copy, Debug)]
pub struct Ids {
    /// The caller's effective uid.
    pub uid: u32,
    /// The caller's effective gid.
    pub gid: u32,
    /// Whether the caller is root over the host's root-owned files: its effective uid is
    /// 0 and its user namespace maps 0 to its parent's 0 (true for root on the host, false
    /// for the root of an `unshare -Ur` namespace, whose files outside are the invoking
    /// user's).
    pub host_root: bool,
}

impl Ids {
    /// The calling process's ids.
    pub fn of_caller() -> Ids {
        let uid = nix::unistd::geteuid().as_raw();
        Ids {
            uid,
            gid: nix::unistd::getegid().as_raw(),
            host_root: uid == 0 && host::uid_zero_maps_to_zero(),
        }
    }
}

/// `PATH` inside the sandbox after the tools dir.
pub const SYSTEM_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Whether a `guard_names` entry names the repository metadata (`.git` or below it),
/// which the full layer protects with [`Step::GitLayer`].
pub fn is_git_name(name: &str) -> bool {
    name == ".git" || name.starts_with(".git/")
}

/// Whether `inner` is `outer` or lies below it (lexically).
pub fn is_within(inner: &Path, outer: &Path) -> bool {
    inner.starts_with(outer)
}

impl Plan {
    /// The plan of the namespace probe ([`Capabilities::probe`](crate::Capabilities::probe)):
    /// map the ids, build a root, bind the host's root read-only, mount a fresh `/proc`,
    /// then exit instead of exec. Returns the plan and the index of its `/proc` step, whose
    /// failure alone means "namespaces work, a fresh `/proc` does not".
    // Plain data, built on every system; only Linux's backend runs it.
    #[cfg_attr(not(any(target_os = "linux", feature = "internals")), allow(dead_code))]
    pub fn namespace_probe(ids: Ids, fs: &dyn HostFs) -> (Plan, u32) {
        let mut steps = namespace_setup(ids, setup_stage(fs, None));
        steps.push(bind(
            Path::new("/"),
            Path::new("/probe"),
            Access::ReadOnly,
            true,
            None,
        ));
        let proc_step = steps.len() as u32;
        steps.push(Step::Proc { fallback: false });
        steps.push(Step::Exit);
        let plan = Plan {
            layer: Layer::Full,
            namespaces: Namespaces {
                base: true,
                net: false,
            },
            workspace: "/".into(),
            steps,
            path: Vec::new(),
            roots: Vec::new(),
            private_tmp: false,
            walls: Walls::default(),
            egress: None,
        };
        (plan, proc_step)
    }
}

fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// The first steps of every plan with namespaces: die with the parent, reset signals,
/// map the ids, stop mount propagation, build an empty root on a tmpfs mounted on `stage`
/// ([`setup_stage`]).
fn namespace_setup(ids: Ids, stage: PathBuf) -> Vec<Step> {
    vec![
        Step::DieWithParent,
        Step::ResetSignals,
        Step::IdMaps {
            uid: ids.uid,
            gid: ids.gid,
        },
        Step::MountsPrivate,
        Step::BaseRoot { stage },
    ]
}

/// Where the child mounts its setup tmpfs ([`Step::BaseRoot`]): the first of these that
/// is a directory (not a symlink) on the host, then `workspace`. The mount happens in the
/// child's own mount namespace, made private (`MS_REC | MS_PRIVATE`) the step before, so
/// the host never sees it; `pivot_root` then moves the tmpfs to `/`, and the directory's
/// own contents show again under `/oldroot` (sources below it stay bindable). A minimal
/// image may lack `/tmp` (a `FROM scratch` container) or have a file there; a container
/// runtime always makes `/dev` and `/proc`.
const SETUP_STAGES: &[&str] = &["/tmp", "/dev", "/proc", "/run", "/mnt"];

/// The directory for [`Step::BaseRoot`] on the host `fs` (see [`SETUP_STAGES`]); `/tmp`
/// when none is one, so that the failing step names it.
pub(crate) fn setup_stage(fs: &dyn HostFs, workspace: Option<&Path>) -> PathBuf {
    SETUP_STAGES
        .iter()
        .map(Path::new)
        .chain(workspace)
        .find(|p| fs.kind(p) == Some(Kind::Dir))
        .unwrap_or(Path::new("/tmp"))
        .to_path_buf()
}

fn inside_path(tools: Option<PathBuf>) -> Vec<PathBuf> {
    tools
        .into_iter()
        .chain(SYSTEM_PATH.iter().map(PathBuf::from))
        .collect()
}

fn bind(src: &Path, dst: &Path, access: Access, dir: bool, beneath: Option<Beneath>) -> Step {
    Step::Bind {
        src: src.to_path_buf(),
        dst: dst.to_path_buf(),
        access,
        dir,
        beneath,
        idmap: false,
    }
}

fn mask(path: &Path, dir: bool, beneath: Option<Beneath>, identity: Option<(u64, u64)>) -> Step {
    Step::Mask {
        path: path.to_path_buf(),
        dir,
        beneath,
        identity,
    }
}

fn canonical_workspace(policy: &Policy, fs: &dyn HostFs) -> Result<PathBuf, PlanError> {
    let ws = policy
        .workspace
        .as_deref()
        .ok_or(PlanError::Conflict(Conflict::NoWorkspace))?;
    let canon = existing(fs, "workspace", ws)?;
    if !matches!(fs.kind(&canon), Some(Kind::Dir)) {
        return Err(PlanError::Path {
            key: "workspace",
            path: ws.to_path_buf(),
            errno: crate::error::Errno::ENOTDIR,
        });
    }
    if canon == Path::new("/") {
        return Err(PlanError::Conflict(Conflict::WorkspaceIsRoot));
    }
    fs.usable(&canon).map_err(|errno| PlanError::Path {
        key: "workspace",
        path: ws.to_path_buf(),
        errno,
    })?;
    Ok(canon)
}

/// In overlay mode, the change set's directory: its parent canonical (it must exist), the
/// directory itself not a symlink nor anything but a directory when present, and apart
/// from the workspace, the writable paths and the data dir once resolved (the policy
/// compared them as written).
pub(super) fn changes_dir(
    policy: &Policy,
    fs: &dyn HostFs,
    workspace: &Path,
) -> Result<Option<PathBuf>, PlanError> {
    let (crate::policy::WorkspaceMode::Overlay, Some(dir)) =
        (policy.workspace_mode, &policy.changes_dir)
    else {
        return Ok(None);
    };
    let path_error = |errno| PlanError::Path {
        key: "changes_dir",
        path: dir.clone(),
        errno,
    };
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(path_error(crate::error::Errno::EINVAL));
    };
    let changes = existing(fs, "changes_dir", parent)?.join(name);
    match fs.kind(&changes) {
        None | Some(Kind::Dir) => {}
        Some(Kind::Symlink(_)) => return Err(path_error(crate::error::Errno::ELOOP)),
        Some(_) => return Err(path_error(crate::error::Errno::ENOTDIR)),
    }
    let others = std::iter::once(("workspace", workspace.to_path_buf()))
        .chain(
            policy
                .writable_paths
                .iter()
                .filter_map(|p| Some(("writable_paths", fs.canonicalize(p).ok()?))),
        )
        .chain(
            policy
                .data_dir
                .iter()
                .filter_map(|p| Some(("data_dir", fs.canonicalize(p).ok()?))),
        );
    for (key, other) in others {
        if is_within(&changes, &other) || is_within(&other, &changes) {
            return Err(PlanError::Conflict(
                crate::error::Conflict::ChangesDirOverlaps {
                    key,
                    path: other,
                    changes_dir: changes,
                },
            ));
        }
    }
    Ok(Some(changes))
}

/// Refuses a configured path that is, or passes through, a symbolic link. A sandboxed
/// program can replace a directory in its writable roots with a symlink between runs
/// (`rm -r models && ln -s /host/dir models`); a path that followed it would bind whatever
/// the link names. The child binds with `RESOLVE_NO_SYMLINKS` as well, which closes the
/// race between this check and the mount.
fn no_symlinks(fs: &dyn HostFs, key: &'static str, p: &Path) -> Result<(), PlanError> {
    symlink_free(fs, key, p).map(|_| ())
}

/// As [`no_symlinks`], and whether the walk saw every prefix of `p` exist (none missing,
/// none unreadable as a link).
fn symlink_free(fs: &dyn HostFs, key: &'static str, p: &Path) -> Result<bool, PlanError> {
    let mut prefix = PathBuf::new();
    for c in p.components() {
        prefix.push(c);
        // The root is no symlink, whatever `fs` says of it (a `HostFs` that knows nothing
        // of `/` must not end the walk before its first real component).
        if c == std::path::Component::RootDir {
            continue;
        }
        match fs.kind(&prefix) {
            Some(Kind::Symlink(target)) => {
                return Err(PlanError::Symlink {
                    key,
                    path: p.to_path_buf(),
                    link: prefix,
                    target,
                });
            }
            Some(_) => {}
            None => return Ok(false),
        }
    }
    Ok(true)
}

/// Whether `p` is absolute and names each step plainly: no `.` or `..`, no empty name
/// (`//`, a trailing `/`). Such a path whose every prefix exists and is no symlink is its
/// own canonical form.
fn lexically_canonical(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Some(rest) = p.as_os_str().as_bytes().strip_prefix(b"/") else {
        return false;
    };
    rest.is_empty()
        || rest
            .split(|&b| b == b'/')
            .all(|name| !matches!(name, b"" | b"." | b".."))
}

/// The canonical form of a configured path that must exist and contain no symlink.
///
/// The walk of [`no_symlinks`] has looked at every prefix without following it; when it
/// saw each one exist and `p` is [`lexically_canonical`], nothing is left to resolve and
/// `p` is returned as it is: `realpath` would only `readlink` every prefix again to learn
/// the same (a prefix replaced by a symlink since is not followed here, where `realpath`
/// would follow it; the child binds with `RESOLVE_NO_SYMLINKS` either way). Anything else
/// goes to [`HostFs::canonicalize`], whose error is the path's.
fn existing(fs: &dyn HostFs, key: &'static str, p: &Path) -> Result<PathBuf, PlanError> {
    if symlink_free(fs, key, p)? && lexically_canonical(p) {
        return Ok(p.to_path_buf());
    }
    fs.canonicalize(p).map_err(|e| PlanError::Path {
        key,
        path: p.to_path_buf(),
        errno: errno_of(&e),
    })
}

/// As [`existing`], for a key that names a directory (`tools_dir`): anything else there
/// is `ENOTDIR`, as for the workspace and the data dir.
fn existing_dir(fs: &dyn HostFs, key: &'static str, p: &Path) -> Result<PathBuf, PlanError> {
    let canon = existing(fs, key, p)?;
    if !matches!(fs.kind(&canon), Some(Kind::Dir)) {
        return Err(PlanError::Path {
            key,
            path: p.to_path_buf(),
            errno: crate::error::Errno::ENOTDIR,
        });
    }
    Ok(canon)
}

#[cfg(test)]
mod tests;
