//! Parent side: turn a [`Plan`] into operations the child can replay without allocating.
//!
//! Every byte the child touches is computed here, before `clone`: mount source and target
//! paths as `CString`s (with the `/oldroot` and `/newroot` prefixes of the setup's two
//! roots), the directories to create for each mountpoint, the id-map lines, the argv and
//! envp arrays, the candidate paths of the program on the sandbox's `PATH`.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::shared_layer::{Built, SharedLayer};
use crate::error::{Conflict, PlanError, SetupStep};
use crate::plan::{Access, Plan, Step};

mod console;
mod git_link;
pub use console::{Console, InsidePty};
pub use git_link::{GitCheckout, GitLink};

/// Where the host's root sits during setup.
pub const OLD_ROOT: &str = "/oldroot";
/// Where the sandbox's root is assembled during setup.
pub const NEW_ROOT: &str = "/newroot";

/// One operation of the child, 1:1 with a plan step.
#[derive(Debug)]
pub enum Op {
    /// See [`Step::DieWithParent`].
    DieWithParent,
    /// See [`Step::ResetSignals`].
    ResetSignals,
    /// See [`Step::IdMaps`]: the bytes for `uid_map` and `gid_map`.
    IdMaps {
        /// `"uid uid 1\n"`.
        uid_map: Vec<u8>,
        /// `"gid gid 1\n"`.
        gid_map: Vec<u8>,
    },
    /// See [`Step::MountsPrivate`].
    MountsPrivate,
    /// See [`Step::BaseRoot`].
    BaseRoot {
        /// The directory the setup tmpfs is mounted on.
        stage: CString,
    },
    /// A bind from a host path (under `/oldroot`) to a path under `/newroot`.
    Bind {
        /// `/oldroot/<src>`.
        src: CString,
        /// `/newroot/<dst>`.
        dst: CString,
        /// Directories to create first (each ancestor of `dst`, then `dst` for dirs).
        mkdirs: Vec<CString>,
        /// Whether the source is a directory (else an empty file is the mountpoint).
        dir: bool,
        /// Read-only, recursively.
        ro: bool,
        /// For an idmapped bind ([`Step::Bind`]'s `idmap`): the index of the tree the
        /// parent made for this command in [`Exec::trees`]; the child attaches that tree
        /// instead of opening `src`.
        idmap: Option<u16>,
    },
    /// A bind of a path inside a writable root onto itself, opened without symlinks.
    BindBeneath {
        /// `/newroot/<path>`.
        path: CString,
        /// Read-only, recursively.
        ro: bool,
    },
    /// A symlink under `/newroot`.
    Symlink {
        /// The link's target.
        target: CString,
        /// `/newroot/<link>`.
        link: CString,
        /// Ancestors to create.
        mkdirs: Vec<CString>,
    },
    /// A tmpfs under `/newroot`.
    Tmpfs {
        /// `/newroot/<dst>`.
        dst: CString,
        /// Ancestors and `dst` to create.
        mkdirs: Vec<CString>,
        /// Mount data (`size=…,mode=…`).
        data: CString,
    },
    /// The minimal `/dev`.
    Dev {
        /// `(/oldroot/dev/<n>, /newroot/dev/<n>)` for each device node present.
        nodes: Vec<(CString, CString)>,
    },
    /// A fresh `/proc`.
    Proc {
        /// Bind the host's `/proc` read-only when a fresh one is refused.
        fallback: bool,
        /// `(/newroot/proc/sys/user/<name>, value)`: the per-user-namespace counts
        /// ([`crate::plan::USER_COUNTS`]) written into a fresh `/proc` before its `sys` is
        /// made read-only.
        counts: Vec<(CString, Vec<u8>)>,
    },
    /// An empty read-only tmpfs (mode 000) over a directory.
    MaskDir {
        /// `/newroot/<path>`.
        path: CString,
        /// Open `path` without following symlinks (it lies in a writable root).
        beneath: bool,
        /// `(st_dev, st_ino)` the directory must have.
        identity: Option<(u64, u64)>,
    },
    /// An empty read-only file over a file.
    MaskFile {
        /// `/newroot/<path>`.
        path: CString,
        /// It lies in a writable root: attached without following a symlink at the name.
        beneath: bool,
        /// The first mask outside writable roots: it makes the source every such mask is
        /// bound from (set by [`Layout::new`]).
        make_source: bool,
    },
    /// A directory bound onto itself (opened without symlinks).
    Pin {
        /// `/newroot/<path>`.
        path: CString,
    },
    /// See [`Step::HideName`].
    HideName {
        /// `/newroot/<path>`.
        path: CString,
    },
    /// See [`Step::GuardName`].
    GuardName {
        /// `/newroot/<path>`.
        path: CString,
    },
    /// See [`Step::GuardPin`].
    GuardPin {
        /// `/newroot/<path>`.
        path: CString,
    },
    /// See [`Step::GitLayer`]: what this command found there is [`Exec::git`]`[index]`.
    GitLayer {
        /// `/newroot/<root>/.git`.
        path: CString,
        /// Which of the command's [`GitMount`]s belongs to this step; also the tag the
        /// upper layer's fd is sent to the parent with.
        index: u8,
        /// The size of the upper layer's tmpfs, in bytes (an `fsconfig` value).
        size: CString,
        /// Where that tmpfs is attached during setup (`/.git-layer-N` on the setup root):
        /// never below `/newroot`, and detached with the setup root by `pivot_root`.
        at: CString,
        /// `<at>/upper`, the overlay's upper directory.
        upper: CString,
        /// `<at>/work`, the overlay's work directory.
        work: CString,
    },
    /// See [`Step::Overlay`].
    Overlay {
        /// `/oldroot/<workspace>`: the lower layer.
        lower: CString,
        /// `/oldroot/<changes>/upper`.
        upper: CString,
        /// `/oldroot/<changes>/work`.
        work: CString,
        /// `/newroot/<workspace>`: the mountpoint.
        dst: CString,
        /// Directories to create first (each ancestor of `dst`, then `dst`).
        mkdirs: Vec<CString>,
    },
    /// See [`Step::Snapshot`]: the host's work; nothing in the child.
    Snapshot,
    /// See [`Step::PivotRoot`].
    PivotRoot,
    /// See [`Step::RootReadOnly`].
    RootReadOnly,
    /// See [`Step::LoopbackUp`].
    LoopbackUp,
    /// See [`Step::EgressListeners`]: the HTTP and SOCKS5 addresses, tagged 0 and 1 on
    /// the command's egress socket ([`Exec::egress_socket`]).
    EgressListeners {
        /// The HTTP proxy's address inside.
        http: libc::sockaddr_in,
        /// The SOCKS5 proxy's address inside.
        socks: libc::sockaddr_in,
    },
    /// See [`Step::NewSession`].
    NewSession,
    /// See [`Step::NewKeyring`].
    NewKeyring,
    /// See [`Step::DropCapabilities`]: capabilities `0..=last_cap` leave the bounding set,
    /// up to the first one the kernel does not know.
    DropCapabilities {
        /// The highest number tried ([`super::last_cap`]).
        last_cap: u32,
    },
    /// See [`Step::NoNewPrivs`].
    NoNewPrivs,
    /// See [`Step::ResourceLimits`].
    ResourceLimits(Vec<crate::plan::Rlimit>),
    /// See [`Step::LandlockRules`]: the rules are in [`Walls::child_rules`].
    LandlockRules,
    /// See [`Step::Landlock`]: the ruleset fd is in [`Exec::landlock_fd`].
    Landlock,
    /// See [`Step::Seccomp`]: the program is [`Walls::filter`].
    Seccomp,
    /// See [`Step::Exit`].
    Exit,
}

/// The second and third walls, prepared in the parent.
#[derive(Debug)]
pub struct Walls {
    /// The compiled seccomp program.
    pub filter: super::seccomp::Filter,
    /// `(path inside, LANDLOCK_ACCESS_FS_* bits)` for the mounts the child creates itself.
    pub child_rules: Vec<(CString, u64)>,
}

/// The prepared layout of a sandbox: shared by every command it spawns.
#[derive(Debug)]
pub struct Layout {
    /// The plan the operations come from (for error messages).
    pub plan: Plan,
    /// One operation per plan step.
    pub ops: Vec<Op>,
    /// Landlock rules for the child's own mounts and the seccomp program, when the plan
    /// has those steps.
    pub walls: Option<Walls>,
    /// The host paths of the idmapped binds, in the order of their `idmap` indices: the
    /// parent makes one tree of each per command ([`Exec::trees`]).
    pub idmapped: Vec<PathBuf>,
    /// The Landlock layer every command shares when the plan splits its rules
    /// ([`crate::plan::SplitRules`]): built by the first command, reused while current.
    pub shared_landlock: Option<SharedLayer>,
}

/// Converts a path to a `CString`.
///
/// # Errors
///
/// [`PlanError::Nul`] when the path contains a NUL byte.
pub fn cstr(p: &Path) -> Result<CString, PlanError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| PlanError::Nul(p.to_path_buf()))
}

fn under(prefix: &str, p: &Path) -> PathBuf {
    let mut out = PathBuf::from(prefix);
    out.push(p.strip_prefix("/").unwrap_or(p));
    out
}

/// `/newroot/a`, `/newroot/a/b`, … up to `p` (inclusive when `last`).
fn mkdirs(p: &Path, last: bool) -> Result<Vec<CString>, PlanError> {
    let mut out = Vec::new();
    let mut cur = PathBuf::from(NEW_ROOT);
    let comps: Vec<_> = p.strip_prefix("/").unwrap_or(p).components().collect();
    let n = if last {
        comps.len()
    } else {
        comps.len().saturating_sub(1)
    };
    for c in comps.iter().take(n) {
        cur.push(c);
        out.push(cstr(&cur)?);
    }
    Ok(out)
}

impl Layout {
    /// Prepares every operation of `plan`.
    ///
    /// # Errors
    ///
    /// [`PlanError::Nul`] when a path contains a NUL byte.
    /// [`Conflict::NothingPrepared`] when the plan has Landlock or seccomp steps but no
    /// `walls`; another [`Conflict`] for a step a layout cannot hold, or more idmapped
    /// binds or `.git` layers than it can number.
    pub fn new(plan: Plan, last_cap: u32, walls: Option<Walls>) -> Result<Self, PlanError> {
        let mut ops = Vec::with_capacity(plan.steps.len());
        let mut git_layers: u8 = 0;
        let mut idmapped = Vec::new();
        for step in &plan.steps {
            let op = match step {
                Step::Bind {
                    src,
                    idmap: true,
                    beneath: None,
                    ..
                } => {
                    let index = u16::try_from(idmapped.len())
                        .map_err(|_| PlanError::Conflict(Conflict::TooManyIdmappedBinds))?;
                    idmapped.push(src.clone());
                    match prepare_step(step, last_cap)? {
                        Op::Bind {
                            src,
                            dst,
                            mkdirs,
                            dir,
                            ro,
                            ..
                        } => Op::Bind {
                            src,
                            dst,
                            mkdirs,
                            dir,
                            ro,
                            idmap: Some(index),
                        },
                        other => other,
                    }
                }
                Step::GitLayer { path, size } => {
                    let index = git_layers;
                    // One per writable root: a tag of one byte is plenty, and a plan with
                    // more is refused rather than mislabelled.
                    git_layers = git_layers
                        .checked_add(1)
                        .ok_or(PlanError::Conflict(Conflict::TooManyGitLayers))?;
                    let at = PathBuf::from(format!("/.git-layer-{index}"));
                    Op::GitLayer {
                        path: cstr(&under(NEW_ROOT, path))?,
                        index,
                        size: CString::new(size.to_string())
                            .map_err(|_| PlanError::Nul(path.clone()))?,
                        upper: cstr(&at.join("upper"))?,
                        work: cstr(&at.join("work"))?,
                        at: cstr(&at)?,
                    }
                }
                _ => prepare_step(step, last_cap)?,
            };
            if matches!(op, Op::LandlockRules | Op::Landlock | Op::Seccomp) && walls.is_none() {
                return Err(PlanError::Conflict(Conflict::NothingPrepared {
                    step: SetupStep::from(step),
                }));
            }
            ops.push(op);
        }
        skip_made_dirs(&mut ops);
        // A file mask inside a writable root (a host socket or private entry of a root
        // host there, a `masked` path) is attached as the plan's masks beneath one are,
        // without following a symlink at its name: a run could have made it one since.
        let writable: Vec<PathBuf> = plan
            .roots
            .iter()
            .filter(|(_, a)| *a == Access::ReadWrite)
            .map(|(p, _)| under(NEW_ROOT, p))
            .collect();
        for op in &mut ops {
            if let Op::MaskFile { path, beneath, .. } = op {
                let p = Path::new(std::ffi::OsStr::from_bytes(path.as_bytes()));
                *beneath |= writable.iter().any(|w| p.starts_with(w));
            }
        }
        if let Some(Op::MaskFile { make_source, .. }) = ops
            .iter_mut()
            .find(|op| matches!(op, Op::MaskFile { beneath: false, .. }))
        {
            *make_source = true;
        }
        let shared_landlock = plan
            .walls
            .landlock
            .as_ref()
            .and_then(|l| l.split.as_ref())
            .map(SharedLayer::new);
        Ok(Layout {
            plan,
            ops,
            walls,
            idmapped,
            shared_landlock,
        })
    }
}

/// Drops from each operation's `mkdirs` the directories that an earlier operation made
/// and that are still there: without this every bind below `/tmp` or `/dev` tried its
/// ancestors again and got `EEXIST`, one system call each (two per writable path with a
/// shared parent). A directory made earlier is gone from view once something is mounted
/// on one of its ancestors, so every mount drops what lies strictly below its mountpoint
/// from the list; an operation not modelled here mounts nothing or creates no directory.
/// Only the steps before `pivot_root` run under `/newroot`, so the walk stops there.
fn skip_made_dirs(ops: &mut [Op]) {
    fn take(mkdirs: &mut Vec<CString>, made: &mut Vec<CString>) {
        mkdirs.retain(|d| !made.contains(d));
        made.extend(mkdirs.iter().cloned());
    }
    /// Forgets what a mount on `at` hides.
    fn mounted(at: &CStr, made: &mut Vec<CString>) {
        let at = at.to_bytes();
        made.retain(|d| {
            let d = d.to_bytes();
            !(d.len() > at.len() && d.starts_with(at) && d.get(at.len()) == Some(&b'/'))
        });
    }
    let mut made: Vec<CString> = Vec::new();
    for op in ops {
        match op {
            Op::BaseRoot { .. } => made.clear(),
            Op::Bind { mkdirs, dst, .. }
            | Op::Tmpfs { mkdirs, dst, .. }
            | Op::Overlay { mkdirs, dst, .. } => {
                take(mkdirs, &mut made);
                mounted(dst, &mut made);
            }
            Op::Symlink { mkdirs, .. } => take(mkdirs, &mut made),
            // `child::mounts::dev` and `proc` make their mountpoints themselves.
            Op::Dev { .. } => {
                let dev = c"/newroot/dev";
                mounted(dev, &mut made);
                made.extend([dev.to_owned(), c"/newroot/dev/pts".to_owned()]);
            }
            Op::Proc { .. } => {
                let proc = c"/newroot/proc";
                mounted(proc, &mut made);
                made.push(proc.to_owned());
            }
            Op::BindBeneath { path, .. }
            | Op::MaskDir { path, .. }
            | Op::MaskFile { path, .. }
            | Op::Pin { path }
            | Op::HideName { path }
            | Op::GuardName { path }
            | Op::GuardPin { path }
            | Op::GitLayer { path, .. } => mounted(path, &mut made),
            Op::PivotRoot => return,
            _ => {}
        }
    }
}

impl Layout {
    /// This command's idmapped trees, one per [`Layout::idmapped`] path: a mount can be
    /// attached once, so each command gets its own.
    ///
    /// # Errors
    ///
    /// The kernel's error for the first tree that cannot be made.
    pub fn trees(&self) -> std::io::Result<Vec<std::os::fd::OwnedFd>> {
        self.idmapped
            .iter()
            .map(|p| crate::probe::idmap::tree(p))
            .collect()
    }
}

/// An IPv4 address as the kernel reads it; the egress listeners are on the IPv4 loopback.
fn sockaddr_in(addr: std::net::SocketAddr) -> Result<libc::sockaddr_in, PlanError> {
    let std::net::SocketAddr::V4(v4) = addr else {
        return Err(PlanError::Conflict(crate::error::Conflict::NotIpv4 {
            addr,
        }));
    };
    Ok(libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(v4.ip().octets()),
        },
        sin_zero: [0; 8],
    })
}

/// The child's operation for one layout step (the `.git` layers and idmapped binds are
/// numbered by [`Layout::new`]). Steps without a path map 1:1; binds, tmpfs, `/dev` and
/// masks have a helper each.
fn prepare_step(step: &Step, last_cap: u32) -> Result<Op, PlanError> {
    Ok(match step {
        Step::DieWithParent => Op::DieWithParent,
        Step::ResetSignals => Op::ResetSignals,
        Step::IdMaps { uid, gid } => Op::IdMaps {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        },
        Step::MountsPrivate => Op::MountsPrivate,
        Step::BaseRoot { stage } => Op::BaseRoot {
            stage: cstr(stage)?,
        },
        Step::Bind {
            src,
            dst,
            access,
            dir,
            beneath,
            ..
        } => prepare_bind(src, dst, *access, *dir, beneath.is_some())?,
        Step::Symlink { link, target } => Op::Symlink {
            target: cstr(target)?,
            link: inside(link)?,
            mkdirs: mkdirs(link, false)?,
        },
        Step::Tmpfs { dst, size, mode } => prepare_tmpfs(dst, *size, *mode)?,
        Step::Dev { nodes } => prepare_dev(nodes)?,
        Step::Proc { fallback } => Op::Proc {
            fallback: *fallback,
            counts: crate::plan::USER_COUNTS
                .iter()
                .map(|(name, value)| {
                    let path = format!("{NEW_ROOT}/proc/sys/user/{name}");
                    let path = CString::new(path).expect("a constant name has no NUL");
                    (path, value.to_string().into_bytes())
                })
                .collect(),
        },
        Step::Mask {
            path,
            dir,
            beneath,
            identity,
        } => prepare_mask(path, *dir, beneath.is_some(), *identity)?,
        Step::Pin { path, .. } => Op::Pin {
            path: inside(path)?,
        },
        Step::HideName { path } => Op::HideName {
            path: inside(path)?,
        },
        Step::GuardName { path } => Op::GuardName {
            path: inside(path)?,
        },
        Step::GuardPin { path } => Op::GuardPin {
            path: inside(path)?,
        },
        Step::Overlay { path, changes } => Op::Overlay {
            lower: cstr(&under(OLD_ROOT, path))?,
            upper: cstr(&under(OLD_ROOT, &changes.join("upper")))?,
            work: cstr(&under(OLD_ROOT, &changes.join("work")))?,
            dst: inside(path)?,
            mkdirs: mkdirs(path, true)?,
        },
        Step::Snapshot { .. } => Op::Snapshot,
        Step::PivotRoot => Op::PivotRoot,
        Step::RootReadOnly => Op::RootReadOnly,
        Step::LoopbackUp => Op::LoopbackUp,
        Step::EgressListeners { http, socks } => Op::EgressListeners {
            http: sockaddr_in(*http)?,
            socks: sockaddr_in(*socks)?,
        },
        Step::NewSession => Op::NewSession,
        Step::NewKeyring => Op::NewKeyring,
        Step::DropCapabilities => Op::DropCapabilities { last_cap },
        Step::NoNewPrivs => Op::NoNewPrivs,
        Step::ResourceLimits(limits) => Op::ResourceLimits(limits.clone()),
        Step::LandlockRules => Op::LandlockRules,
        Step::Landlock => Op::Landlock,
        Step::Seccomp => Op::Seccomp,
        Step::Exit => Op::Exit,
        Step::GitLayer { .. }
        | Step::SandboxInit
        | Step::Stdio
        | Step::CloseFds
        | Step::Chdir(_)
        | Step::ControllingTerminal(_)
        | Step::Exec(_) => return Err(not_in_layout(step)),
    })
}

/// `/newroot/<p>`, the path `p` inside during setup.
fn inside(p: &Path) -> Result<CString, PlanError> {
    cstr(&under(NEW_ROOT, p))
}

/// A bind from the host (its source under `/oldroot`), or, inside a writable root
/// (`beneath`), of the path onto itself.
fn prepare_bind(
    src: &Path,
    dst: &Path,
    access: Access,
    dir: bool,
    beneath: bool,
) -> Result<Op, PlanError> {
    let ro = access != Access::ReadWrite;
    Ok(if beneath {
        Op::BindBeneath {
            path: inside(dst)?,
            ro,
        }
    } else {
        Op::Bind {
            src: cstr(&under(OLD_ROOT, src))?,
            dst: inside(dst)?,
            mkdirs: mkdirs(dst, dir)?,
            dir,
            ro,
            idmap: None,
        }
    })
}

/// A tmpfs with its size limit and root mode as mount data.
fn prepare_tmpfs(dst: &Path, size: u64, mode: u32) -> Result<Op, PlanError> {
    Ok(Op::Tmpfs {
        dst: inside(dst)?,
        mkdirs: mkdirs(dst, true)?,
        data: CString::new(format!("size={size},mode={mode:o}"))
            .map_err(|_| PlanError::Nul(dst.to_path_buf()))?,
    })
}

/// `/dev`, with the host's device nodes the plan checked ([`Step::Dev`]).
fn prepare_dev(nodes: &[PathBuf]) -> Result<Op, PlanError> {
    let nodes = nodes
        .iter()
        .map(|host| Ok((cstr(&under(OLD_ROOT, host))?, inside(host)?)))
        .collect::<Result<_, PlanError>>()?;
    Ok(Op::Dev { nodes })
}

/// A mask: an empty read-only tmpfs over a directory (checked against `identity` and
/// opened without symlinks when `beneath` a writable root), `/dev/null` over a file.
fn prepare_mask(
    path: &Path,
    dir: bool,
    beneath: bool,
    identity: Option<(u64, u64)>,
) -> Result<Op, PlanError> {
    let path = inside(path)?;
    Ok(if dir {
        Op::MaskDir {
            path,
            beneath,
            identity,
        }
    } else {
        Op::MaskFile {
            path,
            beneath,
            make_source: false,
        }
    })
}

/// Why `step` has no operation of its own in a layout.
fn not_in_layout(step: &Step) -> PlanError {
    let step = SetupStep::from(step);
    PlanError::Conflict(match step {
        // Numbered in order by `Layout::new`.
        SetupStep::GitLayer { .. } => Conflict::NumberedByLayout { step },
        // The Seatbelt step belongs to macOS plans, never to a Linux layout.
        SetupStep::SandboxInit => Conflict::MacosOnly { step },
        // Per-command steps are prepared by `Exec::new`, never in a layout.
        _ => Conflict::NotInLayout { step },
    })
}

/// One command's copy-on-write layer over a `.git` directory (see [`Step::GitLayer`]),
/// as the parent found that directory.
#[derive(Debug)]
pub struct GitMount {
    /// `(st_dev, st_ino)` of the `.git` directory; a directory found there by the child
    /// with another identity is bound read-only instead.
    pub identity: (u64, u64),
    /// Its permission bits, given to the upper layer's root (the program sees the same).
    pub mode: u32,
    /// `/newroot/<root>/.git/objects/pack/<name>.pack`, each pack file the host had:
    /// bound read-only onto itself on the layer.
    pub packs: Vec<CString>,
    /// When `.git` is a symlink or a `gitdir:` file naming this directory.
    pub link: Option<GitLink>,
    /// The submodule checkouts the host's index lists, kept from change after the layer
    /// stands.
    pub checkouts: Vec<GitCheckout>,
}

impl GitMount {
    /// The layer for the `.git` directory with `identity` and `mode`, whose pack files
    /// are `packs` (host paths, the same inside).
    ///
    /// # Errors
    ///
    /// [`PlanError::Nul`] when a path contains a NUL byte.
    pub fn new(identity: (u64, u64), mode: u32, packs: &[PathBuf]) -> Result<Self, PlanError> {
        Ok(GitMount {
            identity,
            mode,
            packs: packs
                .iter()
                .map(|p| cstr(&under(NEW_ROOT, p)))
                .collect::<Result<_, _>>()?,
            link: None,
            checkouts: Vec::new(),
        })
    }

    /// The same layer, reached through `link`.
    pub fn with_link(self, link: Option<GitLink>) -> Self {
        GitMount { link, ..self }
    }

    /// The same layer, with these submodule checkouts kept from change.
    pub fn with_checkouts(self, checkouts: Vec<GitCheckout>) -> Self {
        GitMount { checkouts, ..self }
    }
}

/// The per-command part: stdio, fds to keep, working directory, program, argv, envp.
#[derive(Debug)]
pub struct Exec {
    /// Source fd for 0, 1 and 2, or -1 to inherit the host's.
    pub stdio: [RawFd; 3],
    /// Sorted fds ≥ 3 that survive `CloseFds` (the report pipe and passed fds).
    pub keep: Vec<RawFd>,
    /// Passed fds whose close-on-exec flag the child clears.
    pub pass: Vec<RawFd>,
    /// The report pipe: write end (the child's) and read end (the parent's).
    pub report: (RawFd, RawFd),
    /// This command's Landlock ruleset, or -1.
    pub landlock_fd: RawFd,
    /// The sandbox's shared Landlock layer, entered after [`Exec::landlock_fd`] when the
    /// plan splits its rules ([`Layout::shared_landlock`]); held open until the child has
    /// exec'd.
    pub shared_landlock: Option<Arc<Built>>,
    /// The working directory, or `None` to stay where the layout left it.
    pub cwd: Option<CString>,
    /// The stdio fd (0, 1 or 2) whose terminal becomes the controlling terminal, or -1.
    pub controlling_terminal: RawFd,
    /// The program, argv and envp as C arrays.
    pub(crate) program: crate::backend::program::Program,
    /// The init the setup child execs, which forks the program's process, when the layer
    /// has one ([`super::init`]).
    pub init: Option<super::init::Launch>,
    /// One entry per [`Op::GitLayer`] of the layout, in order: this command's layer, or
    /// `None` when `.git` was not a directory when the command was prepared.
    pub git: Vec<Option<GitMount>>,
    /// The child's end of the socket that carries each upper layer's fd to the parent,
    /// or -1.
    pub git_socket: RawFd,
    /// This command's idmapped trees, one per [`Layout::idmapped`] path (detached mounts
    /// the child attaches; close-on-exec, kept through `CloseFds`).
    pub trees: Vec<std::os::fd::OwnedFd>,
    /// The program's terminal, bound onto `/dev/console` by the [`Op::Dev`] step so that
    /// it has a name inside ([`Console`]).
    pub console: Option<Console>,
    /// A pseudo-terminal to open from the sandbox's own devpts in the [`Op::Dev`] step
    /// ([`InsidePty`]), instead of a host terminal.
    pub pty: Option<InsidePty>,
    /// `cgroup.procs` of each of the command's cgroups (write-only, close-on-exec, opened
    /// by the host): the child writes `0`, itself, to each before anything else, so that
    /// every process of the sandbox is born in them.
    pub cgroup: Vec<RawFd>,
    /// The child's end of the socket the egress proxy's listeners go to the parent
    /// through ([`Op::EgressListeners`]), or -1.
    pub egress_socket: RawFd,
    /// The child's end of the socket the overlay's mount fd goes to the parent through
    /// ([`Op::Overlay`]), or -1.
    pub overlay_socket: RawFd,
    /// With explain on: the explained filter that [`Op::Seccomp`] installs instead of the
    /// layout's, and where its listener goes.
    pub explain: Option<ExplainFilter>,
    /// A session's sandbox: its fresh `/proc` shows each process only the processes it
    /// may ptrace (`hidepid=ptraceable`), so that a command, in a Landlock domain of its
    /// own, sees neither another command nor the init and the server
    /// ([`crate::Session`]).
    pub hide_pids: bool,
    /// A session's sandbox: the filter [`Op::Seccomp`] installs instead of the layout's,
    /// compiled with [`FilterOptions::host_namespaces`](crate::plan::FilterOptions): the
    /// commands of a session share one PID and IPC namespace, so no command may change
    /// another's resource limits, scheduling or I/O priority, or reach its SysV IPC
    /// objects.
    pub session_filter: Option<super::seccomp::Filter>,
}

/// The seccomp filter of a command with explain on
/// ([`crate::backend::linux::seccomp::build_explained`]): installed with a listener, which
/// the child sends to the parent on `socket` (tag 0) and closes.
#[derive(Debug)]
pub struct ExplainFilter {
    /// The explained program.
    pub filter: super::seccomp::Filter,
    /// The child's end of the socket pair (close-on-exec), kept through `CloseFds`.
    pub socket: RawFd,
    /// The flags of every `landlock_restrict_self` of the setup: 0, or
    /// `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` when the host reads Landlock's audit
    /// records (`process::audit`).
    pub landlock_log: u32,
}

/// What a command asks for, before preparation.
#[derive(Debug, Default)]
pub struct ExecSpec<'a> {
    /// The program as given.
    pub program: &'a OsStr,
    /// `argv[0]` and the arguments.
    pub args: Vec<OsString>,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// `PATH` directories to search when `program` has no slash.
    pub path: &'a [PathBuf],
    /// The working directory.
    pub cwd: Option<PathBuf>,
    /// The stdio fd (0, 1 or 2) whose terminal becomes the controlling terminal of the
    /// new session ([`crate::plan::Step::ControllingTerminal`]).
    pub controlling_terminal: Option<RawFd>,
}

impl Exec {
    /// Prepares argv, envp and the program candidates.
    ///
    /// # Errors
    ///
    /// [`PlanError::NulInArgument`] when a string contains a NUL byte.
    pub fn new(
        spec: ExecSpec<'_>,
        stdio: [RawFd; 3],
        report: (RawFd, RawFd),
        landlock_fd: RawFd,
        pass: Vec<RawFd>,
    ) -> Result<Self, PlanError> {
        let program =
            crate::backend::program::Program::new(spec.program, spec.args, spec.env, spec.path)?;
        let mut keep: Vec<RawFd> = pass.iter().copied().filter(|&fd| fd > 2).collect();
        keep.push(report.0);
        if landlock_fd >= 0 {
            keep.push(landlock_fd);
        }
        keep.sort_unstable();
        keep.dedup();
        Ok(Exec {
            stdio,
            keep,
            pass,
            report,
            landlock_fd,
            shared_landlock: None,
            cwd: spec.cwd.as_deref().map(cstr).transpose()?,
            controlling_terminal: spec.controlling_terminal.unwrap_or(-1),
            program,
            init: None,
            git: Vec::new(),
            git_socket: -1,
            trees: Vec::new(),
            console: None,
            pty: None,
            cgroup: Vec::new(),
            egress_socket: -1,
            overlay_socket: -1,
            explain: None,
            hide_pids: false,
            session_filter: None,
        })
    }

    /// Execs the init of `launch`, which forks the program's process: the image fd and
    /// the status pipe's write end survive the setup's `CloseFds`. The init's argv is made
    /// by [`Exec::finish_init`], once the command's Landlock layers are known.
    pub fn set_init(&mut self, launch: super::init::Launch) {
        self.keep.extend([launch.image_fd, launch.status_fd]);
        self.keep.sort_unstable();
        self.keep.dedup();
        self.init = Some(launch);
    }

    /// Makes the init's argv (with an init): the program's process enters the shared
    /// Landlock layer when the command has one, else, under Landlock, a domain the init
    /// makes; either nested inside the init's. Call after the last `set_*`, before the
    /// spawn.
    pub fn finish_init(&mut self) {
        use super::init::Domain;
        let Some(init) = self.init.as_mut() else {
            return;
        };
        let domain = match (&self.shared_landlock, self.landlock_fd) {
            (Some(layer), _) => Domain::Shared(layer.raw_fd()),
            (None, fd) if fd >= 0 => Domain::Nest,
            (None, _) => Domain::None,
        };
        let restrict_flags = self.explain.as_ref().map_or(0, |e| e.landlock_log);
        init.finish(&self.program, domain, restrict_flags);
    }

    /// Enters the sandbox's shared Landlock layer `layer` after this command's own; its fd
    /// survives `CloseFds`.
    pub fn set_shared_landlock(&mut self, layer: Arc<Built>) {
        self.keep.push(layer.raw_fd());
        self.keep.sort_unstable();
        self.keep.dedup();
        self.shared_landlock = Some(layer);
    }

    /// Sets this command's idmapped trees ([`Layout::idmapped`], in order), which survive
    /// `CloseFds`.
    pub fn set_trees(&mut self, trees: Vec<std::os::fd::OwnedFd>) {
        use std::os::fd::AsRawFd;
        self.keep.extend(trees.iter().map(AsRawFd::as_raw_fd));
        self.keep.sort_unstable();
        self.keep.dedup();
        self.trees = trees;
    }

    /// Sets the pseudo-terminal the child opens inside ([`InsidePty`]); its socket
    /// survives `CloseFds` (it is close-on-exec).
    pub fn set_pty(&mut self, pty: InsidePty) {
        self.keep.push(pty.socket);
        self.keep.sort_unstable();
        self.keep.dedup();
        self.pty = Some(pty);
    }

    /// Sets the socket the egress proxy's listeners are sent through
    /// ([`Op::EgressListeners`]), which survives `CloseFds` (it is close-on-exec).
    pub fn set_egress_socket(&mut self, socket: RawFd) {
        self.keep.push(socket);
        self.keep.sort_unstable();
        self.keep.dedup();
        self.egress_socket = socket;
    }

    /// Sets the socket the overlay's mount fd is sent through ([`Op::Overlay`]), which
    /// survives `CloseFds` (it is close-on-exec).
    pub fn set_overlay_socket(&mut self, socket: RawFd) {
        self.keep.push(socket);
        self.keep.sort_unstable();
        self.keep.dedup();
        self.overlay_socket = socket;
    }

    /// Installs `explain`'s filter instead of the layout's; its socket survives
    /// `CloseFds` (it is close-on-exec).
    pub fn set_explain(&mut self, explain: ExplainFilter) {
        self.keep.push(explain.socket);
        self.keep.sort_unstable();
        self.keep.dedup();
        self.explain = Some(explain);
    }

    /// Sets this command's `.git` layers and the socket their upper layers are sent
    /// through, which survives `CloseFds` (it is close-on-exec).
    pub fn set_git(&mut self, mounts: Vec<Option<GitMount>>, socket: RawFd) {
        self.git = mounts;
        self.git_socket = socket;
        if socket >= 0 {
            self.keep.push(socket);
            self.keep.sort_unstable();
            self.keep.dedup();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mkdirs_lists_each_ancestor_under_newroot() {
        let dirs = mkdirs(Path::new("/work/main/ws"), true).unwrap();
        let dirs: Vec<_> = dirs.iter().map(|c| c.to_str().unwrap()).collect();
        assert_eq!(
            dirs,
            [
                "/newroot/work",
                "/newroot/work/main",
                "/newroot/work/main/ws"
            ]
        );
        assert_eq!(
            mkdirs(Path::new("/etc/resolv.conf"), false).unwrap().len(),
            1
        );
    }

    #[test]
    fn a_directory_is_made_once_until_a_mount_hides_it() {
        let step =
            |p: &str| prepare_bind(Path::new(p), Path::new(p), Access::ReadWrite, true, false);
        let mut ops = vec![
            Op::BaseRoot {
                stage: c"/tmp".into(),
            },
            prepare_tmpfs(Path::new("/tmp"), 1 << 20, 0o1777).unwrap(),
            step("/tmp/a/ws").unwrap(),
            step("/tmp/a/w2").unwrap(),
            Op::Dev { nodes: Vec::new() },
            prepare_tmpfs(Path::new("/dev/shm"), 1 << 20, 0o1777).unwrap(),
            // A mount on /tmp/a hides what was made below it: /tmp/a/ws again.
            step("/tmp/a").unwrap(),
            step("/tmp/a/ws/x").unwrap(),
            Op::PivotRoot,
            step("/tmp/a/w3").unwrap(),
        ];
        skip_made_dirs(&mut ops);
        let dirs: Vec<Vec<&str>> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Bind { mkdirs, .. } | Op::Tmpfs { mkdirs, .. } => {
                    Some(mkdirs.iter().map(|c| c.to_str().unwrap()).collect())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            dirs,
            [
                vec!["/newroot/tmp"],
                vec!["/newroot/tmp/a", "/newroot/tmp/a/ws"],
                vec!["/newroot/tmp/a/w2"],
                vec!["/newroot/dev/shm"],
                vec![],
                vec!["/newroot/tmp/a/ws", "/newroot/tmp/a/ws/x"],
                // After pivot_root nothing is skipped.
                vec!["/newroot/tmp", "/newroot/tmp/a", "/newroot/tmp/a/w3"],
            ]
        );
    }

    #[test]
    fn exec_builds_null_terminated_arrays_and_candidates() {
        let path = [PathBuf::from("/usr/bin"), PathBuf::from("/bin")];
        let e = Exec::new(
            ExecSpec {
                program: OsStr::new("sh"),
                args: vec!["sh".into(), "-c".into()],
                env: vec![("A".into(), "b".into())],
                path: &path,
                cwd: None,
                controlling_terminal: None,
            },
            [-1; 3],
            (9, 8),
            -1,
            vec![5],
        )
        .unwrap();
        assert_eq!(e.program.candidates[0].to_str().unwrap(), "/usr/bin/sh");
        assert_eq!(e.program.argv.len(), 3);
        assert!(e.program.argv[2].is_null());
        assert_eq!(e.program.envp.len(), 2);
        assert_eq!(e.keep, vec![5, 9]);
    }

    /// File masks outside writable roots are bound from the one source the first makes;
    /// one inside a writable root (a root host's private entry there, say) is attached
    /// without following a symlink at its name, whatever its step says.
    #[test]
    fn file_masks_share_a_source_outside_writable_roots_only() {
        let mask = |path: &str, beneath| Step::Mask {
            path: path.into(),
            dir: false,
            beneath,
            identity: None,
        };
        let plan = Plan {
            layer: crate::policy::Layer::Full,
            namespaces: crate::plan::Namespaces::default(),
            workspace: "/ws".into(),
            steps: vec![
                mask("/ws/secret.sock", None),
                mask("/etc/shadow", None),
                mask("/etc/gshadow", None),
            ],
            path: Vec::new(),
            roots: vec![
                ("/ws".into(), Access::ReadWrite),
                ("/etc".into(), Access::ReadOnly),
            ],
            private_tmp: false,
            walls: Default::default(),
            egress: None,
        };
        let layout = Layout::new(plan, 40, None).unwrap();
        let masks: Vec<_> = layout
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::MaskFile {
                    path,
                    beneath,
                    make_source,
                } => Some((path.to_str().unwrap(), *beneath, *make_source)),
                _ => None,
            })
            .collect();
        assert_eq!(
            masks,
            [
                ("/newroot/ws/secret.sock", true, false),
                ("/newroot/etc/shadow", false, true),
                ("/newroot/etc/gshadow", false, false),
            ]
        );
    }

    #[test]
    fn git_layers_are_numbered_and_their_socket_survives_close_fds() {
        let plan = Plan {
            layer: crate::policy::Layer::Full,
            namespaces: crate::plan::Namespaces::default(),
            workspace: "/ws".into(),
            steps: vec![
                Step::GitLayer {
                    path: "/ws/.git".into(),
                    size: 1 << 20,
                },
                Step::GitLayer {
                    path: "/srv/.git".into(),
                    size: 1 << 20,
                },
            ],
            path: Vec::new(),
            roots: Vec::new(),
            private_tmp: false,
            walls: Default::default(),
            egress: None,
        };
        let layout = Layout::new(plan, 40, None).unwrap();
        let layers: Vec<_> = layout
            .ops
            .iter()
            .map(|op| match op {
                Op::GitLayer {
                    path,
                    index,
                    size,
                    at,
                    upper,
                    work,
                } => (
                    path.to_str().unwrap(),
                    *index,
                    size.to_str().unwrap(),
                    at.to_str().unwrap(),
                    upper.to_str().unwrap(),
                    work.to_str().unwrap(),
                ),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            layers,
            [
                (
                    "/newroot/ws/.git",
                    0,
                    "1048576",
                    "/.git-layer-0",
                    "/.git-layer-0/upper",
                    "/.git-layer-0/work"
                ),
                (
                    "/newroot/srv/.git",
                    1,
                    "1048576",
                    "/.git-layer-1",
                    "/.git-layer-1/upper",
                    "/.git-layer-1/work"
                ),
            ]
        );
        let mut e = Exec::new(ExecSpec::default(), [-1; 3], (9, 8), -1, vec![]).unwrap();
        let m = GitMount::new(
            (1, 2),
            0o755,
            &[PathBuf::from("/ws/.git/objects/pack/p.pack")],
        )
        .unwrap();
        assert_eq!(
            m.packs[0].to_str().unwrap(),
            "/newroot/ws/.git/objects/pack/p.pack"
        );
        e.set_git(vec![Some(m), None], 4);
        assert_eq!(e.keep, vec![4, 9]);
        assert_eq!(e.git_socket, 4);
    }

    #[test]
    fn nul_and_bad_names_are_refused() {
        let spec = |env: Vec<(OsString, OsString)>| ExecSpec {
            program: OsStr::new("sh"),
            args: vec![],
            env,
            path: &[],
            cwd: None,
            controlling_terminal: None,
        };
        assert!(
            Exec::new(
                spec(vec![("A=B".into(), "c".into())]),
                [-1; 3],
                (3, 4),
                -1,
                vec![]
            )
            .is_err()
        );
        assert!(
            Exec::new(
                spec(vec![("A".into(), "c\0".into())]),
                [-1; 3],
                (3, 4),
                -1,
                vec![]
            )
            .is_err()
        );
    }
}
