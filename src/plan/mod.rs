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

use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::error::PlanError;
use crate::policy::{Layer, Network, Policy, SYSTEM_ALLOWLIST};

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
}

/// The real host file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

impl HostFs for RealFs {
    fn kind(&self, path: &Path) -> Option<Kind> {
        let md = std::fs::symlink_metadata(path).ok()?;
        if md.file_type().is_symlink() {
            return std::fs::read_link(path).ok().map(Kind::Symlink);
        }
        Some(if md.is_dir() { Kind::Dir } else { Kind::File })
    }

    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
}

/// Read-only or read-write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read-only (recursively, submounts included).
    ReadOnly,
    /// Read-write.
    ReadWrite,
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

/// One step of the child's setup. Steps run in order; a failing step is reported with its
/// errno and described by its `Display` form (`bind /opt`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Arm `PR_SET_PDEATHSIG` and check that the parent is still alive.
    DieWithParent,
    /// Move the stdio fds into place.
    Stdio,
    /// Close every inherited fd but stdio and the fds passed on purpose.
    CloseFds,
    /// Reset every signal disposition to the default.
    ResetSignals,
    /// Map the caller's uid and gid (one id each) into the new user namespace.
    IdMaps {
        /// The caller's uid, inside and out.
        uid: u32,
        /// The caller's gid, inside and out.
        gid: u32,
    },
    /// Stop mount propagation to and from the host (`MS_REC | MS_SLAVE` on `/`).
    MountsPrivate,
    /// Build an empty root: a tmpfs base, pivot into it, host root kept at `/oldroot`, and
    /// a fresh tmpfs at `/newroot` for the sandbox's tree.
    BaseRoot,
    /// Bind a host path.
    Bind {
        /// Host path.
        src: PathBuf,
        /// Path inside.
        dst: PathBuf,
        /// Access inside.
        access: Access,
        /// Whether the source is a directory.
        dir: bool,
        /// Set when `dst` lies inside a writable root.
        beneath: Option<Beneath>,
    },
    /// Create a symlink inside (for merged-/usr hosts: `/bin -> usr/bin`).
    Symlink {
        /// The link's path inside.
        link: PathBuf,
        /// Its target, as on the host.
        target: PathBuf,
    },
    /// Mount a fresh tmpfs.
    Tmpfs {
        /// Path inside.
        dst: PathBuf,
        /// Size limit in bytes.
        size: u64,
        /// Mode of its root directory.
        mode: u32,
    },
    /// A minimal `/dev`: tmpfs, device nodes bound from the host, a private devpts, shm and
    /// the fd links.
    Dev,
    /// A fresh procfs of the new PID namespace, with `/proc/sys` and friends read-only.
    Proc {
        /// Bind the host's `/proc` read-only if a fresh one cannot be mounted.
        fallback: bool,
    },
    /// Hide a host path: an empty read-only tmpfs with mode 000 over a directory, an empty
    /// read-only file over a file.
    Mask {
        /// Path inside (the same as on the host).
        path: PathBuf,
        /// Whether it is a directory.
        dir: bool,
        /// Set when the path lies inside a writable root.
        beneath: Option<Beneath>,
        /// `(st_dev, st_ino)` the directory must have; checked from the child's own fd.
        identity: Option<(u64, u64)>,
    },
    /// Bind a directory inside a writable root onto itself, so that it becomes a
    /// mountpoint: rename and rmdir refuse it, so the masked data dir below it cannot be
    /// moved out from under its mask.
    Pin {
        /// Path inside.
        path: PathBuf,
        /// The writable root it lies in.
        beneath: Beneath,
    },
    /// Hide one of `deny_names` at the top of a writable root: an existing directory gets
    /// the mode-000 tmpfs, an existing file an unreadable bind; a missing name gets an empty
    /// mode-000 placeholder file (on the host) that is then hidden the same way, so that
    /// it cannot be created inside. A symlink is left alone: what it names lives elsewhere.
    HideName {
        /// Path inside (the same as on the host).
        path: PathBuf,
    },
    /// Keep one of `guard_names` (`.git/hooks`) read-only at the top of a writable root,
    /// when it exists. The directories above it are pinned by [`Step::GuardPin`] steps
    /// at their own depth, before it.
    GuardName {
        /// Path inside.
        path: PathBuf,
    },
    /// Bind a directory above a guarded name onto itself, when it exists, so that it
    /// cannot be renamed away and recreated writable (`.git` above `.git/hooks`).
    GuardPin {
        /// Path inside.
        path: PathBuf,
    },
    /// `pivot_root` into `/newroot` and detach the old root.
    PivotRoot,
    /// Make the root tmpfs read-only (no new top-level entries).
    RootReadOnly,
    /// Bring up `lo` in the new network namespace.
    LoopbackUp,
    /// `setsid()`.
    NewSession,
    /// Join a fresh anonymous session keyring.
    NewKeyring,
    /// Change to the working directory.
    Chdir(PathBuf),
    /// Drop every capability: bounding, ambient, inheritable, permitted, effective.
    DropCapabilities,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// Add Landlock rules for the file systems the child mounted itself (the root, /tmp,
    /// /dev/pts, /dev/shm, /proc): their inodes do not exist before the child creates them.
    LandlockRules,
    /// `landlock_restrict_self` with the ruleset the parent built.
    Landlock,
    /// Install the seccomp filter the parent compiled: the last step before `execve`.
    Seccomp,
    /// macOS: enter the Seatbelt sandbox of the generated SBPL profile (`sandbox_init`),
    /// the last step before `execve`.
    SandboxInit,
    /// Run the program.
    Exec(String),
    /// End the child with status 0 instead of running a program (the kernel probe).
    Exit,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::DieWithParent => f.write_str("prctl(PR_SET_PDEATHSIG)"),
            Step::Stdio => f.write_str("set up stdio"),
            Step::CloseFds => f.write_str("close inherited fds"),
            Step::ResetSignals => f.write_str("reset signal handlers"),
            Step::IdMaps { .. } => f.write_str("write /proc/self/uid_map and gid_map"),
            Step::MountsPrivate => f.write_str("make / a slave mount"),
            Step::BaseRoot => f.write_str("build the new root"),
            Step::Bind {
                src, dst, access, ..
            } => {
                let how = match access {
                    Access::ReadOnly => "bind read-only",
                    Access::ReadWrite => "bind",
                };
                if src == dst {
                    write!(f, "{how} {}", dst.display())
                } else {
                    write!(f, "{how} {} on {}", src.display(), dst.display())
                }
            }
            Step::Symlink { link, target } => {
                write!(f, "symlink {} -> {}", link.display(), target.display())
            }
            Step::Tmpfs { dst, .. } => write!(f, "mount tmpfs {}", dst.display()),
            Step::Dev => f.write_str("set up /dev"),
            Step::Proc { .. } => f.write_str("mount proc /proc"),
            Step::Mask { path, identity, .. } => {
                if identity.is_some() {
                    write!(f, "mask data dir {}", path.display())
                } else {
                    write!(f, "mask {}", path.display())
                }
            }
            Step::Pin { path, .. } => write!(f, "pin {}", path.display()),
            Step::HideName { path } => write!(f, "hide {}", path.display()),
            Step::GuardName { path } => write!(f, "keep {} read-only", path.display()),
            Step::GuardPin { path } => write!(f, "pin {}", path.display()),
            Step::PivotRoot => f.write_str("pivot_root"),
            Step::RootReadOnly => f.write_str("remount / read-only"),
            Step::LoopbackUp => f.write_str("bring up lo"),
            Step::NewSession => f.write_str("setsid"),
            Step::NewKeyring => f.write_str("join a new session keyring"),
            Step::Chdir(p) => write!(f, "chdir {}", p.display()),
            Step::DropCapabilities => f.write_str("drop capabilities"),
            Step::NoNewPrivs => f.write_str("prctl(PR_SET_NO_NEW_PRIVS)"),
            Step::LandlockRules => f.write_str("add Landlock rules for the sandbox's own mounts"),
            Step::Landlock => f.write_str("landlock_restrict_self"),
            Step::Seccomp => f.write_str("install the seccomp filter"),
            Step::SandboxInit => f.write_str("sandbox_init"),
            Step::Exec(p) => write!(f, "exec {p}"),
            Step::Exit => f.write_str("exit"),
        }
    }
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
    /// Host paths visible inside and their access (canonical; the workspace first). The
    /// Landlock ruleset mirrors them.
    pub roots: Vec<(PathBuf, Access)>,
    /// Give each command a fresh private temporary directory on the host (`TMPDIR`), for
    /// layers without a private `/tmp` mount.
    pub private_tmp: bool,
}

/// The host facts a plan depends on besides the file system.
#[derive(Clone, Copy, Debug)]
pub struct Ids {
    /// The caller's effective uid.
    pub uid: u32,
    /// The caller's effective gid.
    pub gid: u32,
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

/// Files under `/dev` bound from the host.
pub const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Whether `inner` is `outer` or lies below it (lexically).
pub fn is_within(inner: &Path, outer: &Path) -> bool {
    inner.starts_with(outer)
}

fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// A layout entry before ordering.
struct Entry {
    step: Step,
    dst: PathBuf,
    /// 0: binds, symlinks and tmpfs; 1: pins; 2: masks. Masks win over binds of equal depth.
    rank: u8,
}

impl Plan {
    /// Builds the full-layer layout for `policy` on the host described by `fs` and `ids`.
    ///
    /// # Errors
    ///
    /// [`PlanError`] when a path the policy names does not exist or is unusable, or when
    /// two policy paths conflict (the data dir containing the workspace, say).
    pub fn full(policy: &Policy, fs: &dyn HostFs, ids: Ids) -> Result<Plan, PlanError> {
        let workspace = canonical_workspace(policy, fs)?;
        let mut entries: Vec<Entry> = Vec::new();
        let mut push = |step: Step, dst: &Path, rank: u8| {
            entries.push(Entry {
                step,
                dst: dst.to_path_buf(),
                rank,
            })
        };

        // System allowlist: read-only binds, symlinks kept as symlinks.
        let mut ro_roots: Vec<PathBuf> = Vec::new();
        for sys in SYSTEM_ALLOWLIST {
            let p = Path::new(sys);
            match fs.kind(p) {
                Some(Kind::Dir) => {
                    push(bind(p, p, Access::ReadOnly, true, None), p, 0);
                    ro_roots.push(p.to_path_buf());
                }
                Some(Kind::Symlink(target)) => push(
                    Step::Symlink {
                        link: p.to_path_buf(),
                        target,
                    },
                    p,
                    0,
                ),
                _ => {}
            }
        }

        // The resolver configuration, when /etc/resolv.conf points outside the allowlist
        // (typically into /run). Nothing else of /run is bound: a read-only bind does not
        // stop connect() on the host's service sockets.
        if let Some(Kind::Symlink(_)) = fs.kind(Path::new("/etc/resolv.conf")) {
            if let Ok(target) = fs.canonicalize(Path::new("/etc/resolv.conf")) {
                if !ro_roots.iter().any(|r| is_within(&target, r)) {
                    let dir = matches!(fs.kind(&target), Some(Kind::Dir));
                    push(
                        bind(&target, &target, Access::ReadOnly, dir, None),
                        &target,
                        0,
                    );
                }
            }
        }

        let mut roots: Vec<(PathBuf, Access)> = vec![(workspace.clone(), Access::ReadWrite)];
        roots.extend(ro_roots.iter().map(|r| (r.clone(), Access::ReadOnly)));

        // Extra read-only paths and the tools dir.
        let mut extra_ro = Vec::new();
        for p in &policy.read_only {
            extra_ro.push(("read_only", p.clone()));
        }
        let mut tools = None;
        if let Some(t) = &policy.tools_dir {
            extra_ro.push(("tools_dir", t.clone()));
        }
        for (key, p) in extra_ro {
            let canon = existing(fs, key, &p)?;
            let dir = matches!(fs.kind(&canon), Some(Kind::Dir));
            if key == "tools_dir" {
                tools = Some(canon.clone());
            }
            let beneath = is_within(&canon, &workspace).then(|| Beneath {
                root: workspace.clone(),
            });
            if beneath.is_none() {
                roots.push((canon.clone(), Access::ReadOnly));
            }
            push(
                bind(&canon, &canon, Access::ReadOnly, dir, beneath),
                &canon,
                0,
            );
        }

        // Writable roots: the workspace, then each writable path outside it. A writable
        // path inside the workspace is already writable and is not bound again, so no
        // symlink planted there can redirect a bind.
        push(
            bind(&workspace, &workspace, Access::ReadWrite, true, None),
            &workspace,
            0,
        );
        let mut writable_roots = vec![workspace.clone()];
        for p in &policy.writable_paths {
            if is_within(p, &workspace) {
                continue;
            }
            let canon = existing(fs, "writable_paths", p)?;
            // Listed twice (or two spellings of one path): one root, or its guard steps
            // would run twice and the second pins would bind over the first guards.
            if is_within(&canon, &workspace) || writable_roots.contains(&canon) {
                continue;
            }
            let dir = matches!(fs.kind(&canon), Some(Kind::Dir));
            push(
                bind(&canon, &canon, Access::ReadWrite, dir, None),
                &canon,
                0,
            );
            if dir {
                writable_roots.push(canon);
            }
        }

        // Private /tmp, minimal /dev, fresh /proc.
        push(
            Step::Tmpfs {
                dst: "/tmp".into(),
                size: policy.tmp_size.bytes(),
                mode: 0o1777,
            },
            Path::new("/tmp"),
            0,
        );
        push(Step::Dev, Path::new("/dev"), 0);
        push(
            Step::Proc {
                fallback: policy.proc_fallback,
            },
            Path::new("/proc"),
            0,
        );

        // Everything bound read-only: the system dirs and the extra read-only paths (a
        // data dir or masked file below `read_only` or the tools dir is visible too).
        let ro_roots: Vec<PathBuf> = roots
            .iter()
            .filter(|(_, a)| *a == Access::ReadOnly)
            .map(|(p, _)| p.clone())
            .collect();

        // Masked host files (shadow, host keys), when present and visible.
        for m in &policy.masked {
            let visible = ro_roots.iter().any(|r| is_within(m, r));
            match fs.kind(m) {
                Some(Kind::Dir) if visible => push(mask(m, true, None, None), m, 2),
                Some(Kind::File) if visible => push(mask(m, false, None, None), m, 2),
                _ => {}
            }
        }

        // The data dir: masked wherever it would be visible, pinned inside writable roots.
        let mut data_pins = Vec::new();
        if let Some(data) = &policy.data_dir {
            data_pins = plan_data_dir(data, fs, &workspace, &writable_roots, &ro_roots, &mut push)?;
        }

        // deny_names and guard_names at the top of each writable root.
        for root in &writable_roots {
            for name in &policy.deny_names {
                let path = root.join(name);
                push(Step::HideName { path: path.clone() }, &path, 2);
            }
            // Directories the data dir's steps pin already are not bound again (that bind
            // would land after, and over, the deeper pins).
            let mut pinned: Vec<PathBuf> = data_pins.clone();
            for name in &policy.guard_names {
                // Under a hidden name there is nothing to guard, and pinning its parents
                // would bind over the hiding mount and uncover it.
                if policy
                    .deny_names
                    .iter()
                    .any(|d| Path::new(name).starts_with(d))
                {
                    continue;
                }
                let path = root.join(name);
                let mut cur = root.clone();
                let comps: Vec<_> = Path::new(name).components().collect();
                for c in comps.iter().take(comps.len().saturating_sub(1)) {
                    cur.push(c);
                    if !pinned.contains(&cur) {
                        pinned.push(cur.clone());
                        // At its own depth: a pin sorted by the guarded path's depth
                        // could land over a deeper bind made in between.
                        push(Step::GuardPin { path: cur.clone() }, &cur, 1);
                    }
                }
                push(Step::GuardName { path: path.clone() }, &path, 2);
            }
        }

        // Nothing may uncover a mask: guards at or under a hidden path are dropped (there
        // is nothing to guard there), and a bind strictly under one is a policy conflict.
        let masks: Vec<PathBuf> = entries
            .iter()
            .filter_map(|e| match &e.step {
                Step::Mask { path, .. } | Step::HideName { path } => Some(path.clone()),
                _ => None,
            })
            .collect();
        entries.retain(|e| match &e.step {
            Step::GuardName { path } | Step::GuardPin { path } => {
                !masks.iter().any(|m| path.starts_with(m))
            }
            _ => true,
        });
        for e in &entries {
            if let Step::Bind { dst, .. } = &e.step {
                if let Some(m) = masks.iter().find(|m| dst != *m && dst.starts_with(m)) {
                    return Err(PlanError::Conflict(format!(
                        "{} would be bound inside the hidden path {}",
                        dst.display(),
                        m.display()
                    )));
                }
            }
        }

        // Parents before children; at equal depth binds, then pins, then masks.
        entries.sort_by_key(|e| (depth(&e.dst), e.rank));

        let mut steps = vec![
            Step::DieWithParent,
            Step::ResetSignals,
            Step::IdMaps {
                uid: ids.uid,
                gid: ids.gid,
            },
            Step::MountsPrivate,
            Step::BaseRoot,
        ];
        steps.extend(entries.into_iter().map(|e| e.step));
        steps.push(Step::PivotRoot);
        steps.push(Step::RootReadOnly);
        let net = policy.network == Network::None;
        if net {
            steps.push(Step::LoopbackUp);
        }
        if !policy.keep_session {
            steps.push(Step::NewSession);
        }
        steps.push(Step::NewKeyring);
        steps.push(Step::DropCapabilities);
        steps.push(Step::NoNewPrivs);
        steps.push(Step::LandlockRules);
        steps.push(Step::Landlock);
        steps.push(Step::Seccomp);

        Ok(Plan {
            layer: Layer::Full,
            namespaces: Namespaces { base: true, net },
            workspace,
            steps,
            path: inside_path(tools),
            roots,
            private_tmp: false,
        })
    }

    /// Builds layer 2: Landlock and seccomp without namespaces, for hosts that deny user
    /// namespaces. The host's file system stays in place; the ruleset grants the same
    /// roots as the full layout and nothing else, and each command gets a private
    /// temporary directory instead of `/tmp`.
    ///
    /// # Errors
    ///
    /// As [`Plan::full`], and [`PlanError::Conflict`] when the data dir (or a masked path)
    /// lies beneath a path the ruleset must allow: Landlock cannot deny a directory
    /// beneath an allowed one, so this layer cannot hide it.
    pub fn landlock(policy: &Policy, fs: &dyn HostFs, ids: Ids) -> Result<Plan, PlanError> {
        let workspace = canonical_workspace(policy, fs)?;
        let mut roots: Vec<(PathBuf, Access)> = vec![(workspace.clone(), Access::ReadWrite)];
        for sys in SYSTEM_ALLOWLIST {
            if let Some(Kind::Dir) = fs.kind(Path::new(sys)) {
                roots.push((PathBuf::from(sys), Access::ReadOnly));
            }
        }
        if let Ok(target) = fs.canonicalize(Path::new("/etc/resolv.conf")) {
            if !roots.iter().any(|(r, _)| is_within(&target, r)) {
                roots.push((target, Access::ReadOnly));
            }
        }
        for p in &policy.read_only {
            roots.push((existing(fs, "read_only", p)?, Access::ReadOnly));
        }
        roots.extend(tools_dir(policy, fs)?.map(|t| (t, Access::ReadOnly)));
        for p in &policy.writable_paths {
            if is_within(p, &workspace) {
                continue;
            }
            roots.push((existing(fs, "writable_paths", p)?, Access::ReadWrite));
        }
        let hidden = policy.data_dir.iter().map(|d| ("data_dir", d));
        for (key, path) in hidden {
            if let Some((root, _)) = roots.iter().find(|(r, _)| is_within(path, r)) {
                return Err(PlanError::Conflict(format!(
                    "layer `landlock` cannot hide {key} {} beneath {}: Landlock cannot deny a directory beneath an allowed one (use the full layer, or move it out)",
                    path.display(),
                    root.display()
                )));
            }
        }
        let tools = tools_dir(policy, fs)?;
        let mut steps = hygiene_steps(policy);
        steps.push(Step::NewKeyring);
        // Without a user namespace only a privileged host has capabilities to drop (and
        // only it may drop them from the bounding set).
        if ids.uid == 0 {
            steps.push(Step::DropCapabilities);
        }
        steps.extend([Step::NoNewPrivs, Step::Landlock, Step::Seccomp]);
        Ok(Plan {
            layer: Layer::Landlock,
            namespaces: Namespaces::default(),
            workspace,
            steps,
            path: inside_path(tools),
            roots,
            private_tmp: true,
        })
    }

    /// The passthrough plan: no namespaces, no mounts; only the process hygiene steps.
    ///
    /// # Errors
    ///
    /// [`PlanError`] when the workspace is missing.
    pub fn passthrough(policy: &Policy, fs: &dyn HostFs) -> Result<Plan, PlanError> {
        let workspace = canonical_workspace(policy, fs)?;
        let tools = tools_dir(policy, fs)?;
        let steps = hygiene_steps(policy);
        Ok(Plan {
            layer: Layer::Passthrough,
            namespaces: Namespaces::default(),
            workspace: workspace.clone(),
            steps,
            path: inside_path(tools),
            roots: vec![(workspace, Access::ReadWrite)],
            private_tmp: false,
        })
    }
}

/// The canonical tools dir, when the policy has one.
fn tools_dir(policy: &Policy, fs: &dyn HostFs) -> Result<Option<PathBuf>, PlanError> {
    policy
        .tools_dir
        .as_deref()
        .map(|t| existing(fs, "tools_dir", t))
        .transpose()
}

/// The process steps every layer starts with: die with the host, default signal
/// dispositions, a new session unless the policy keeps the host's.
fn hygiene_steps(policy: &Policy) -> Vec<Step> {
    let mut steps = vec![Step::DieWithParent, Step::ResetSignals];
    if !policy.keep_session {
        steps.push(Step::NewSession);
    }
    steps
}

impl Plan {
    /// The macOS full layer: the host's file system seen through a Seatbelt profile
    /// (`backend::sbpl`), entered with `sandbox_init` just before `execve`. No mounts and
    /// no namespaces; the plan's steps are the forked child's own, in order. A per-run
    /// `TMPDIR` (`private_tmp`) is the one writable temporary directory besides
    /// `/private/tmp`.
    ///
    /// # Errors
    ///
    /// As [`Plan::passthrough`].
    pub fn seatbelt(policy: &Policy, fs: &dyn HostFs) -> Result<Plan, PlanError> {
        let mut plan = Plan::passthrough(policy, fs)?;
        plan.layer = Layer::Full;
        plan.steps.push(Step::SandboxInit);
        plan.private_tmp = true;
        Ok(plan)
    }
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
        .ok_or(PlanError::Conflict("the policy has no workspace".into()))?;
    let canon = existing(fs, "workspace", ws)?;
    if !matches!(fs.kind(&canon), Some(Kind::Dir)) {
        return Err(PlanError::Path {
            key: "workspace",
            path: ws.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
        });
    }
    if canon == Path::new("/") {
        return Err(PlanError::Conflict("the workspace cannot be /".into()));
    }
    Ok(canon)
}

fn existing(fs: &dyn HostFs, key: &'static str, p: &Path) -> Result<PathBuf, PlanError> {
    fs.canonicalize(p).map_err(|source| PlanError::Path {
        key,
        path: p.to_path_buf(),
        source,
    })
}

fn plan_data_dir(
    data: &Path,
    fs: &dyn HostFs,
    workspace: &Path,
    writable_roots: &[PathBuf],
    ro_roots: &[PathBuf],
    push: &mut impl FnMut(Step, &Path, u8),
) -> Result<Vec<PathBuf>, PlanError> {
    // The data dir is a directory (`Sandbox::new` creates it when missing); anything else
    // there cannot be masked as one.
    if let Some(Kind::File) = fs.kind(data) {
        return Err(PlanError::Path {
            key: "data_dir",
            path: data.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
        });
    }
    // Inside a writable root the path is taken lexically and resolved by the child
    // without following symlinks; elsewhere the host path is trusted and canonicalized.
    let (path, root) = match writable_roots.iter().find(|r| is_within(data, r)) {
        Some(r) => (data.to_path_buf(), Some(r)),
        None => {
            // A host path that resolves into a writable root (a symlink the host made) is
            // masked there, as if it had been named so.
            let canon = existing(fs, "data_dir", data)?;
            let r = writable_roots.iter().find(|r| is_within(&canon, r));
            (canon, r)
        }
    };
    for r in writable_roots
        .iter()
        .chain(std::iter::once(&workspace.to_path_buf()))
    {
        if is_within(r, &path) {
            return Err(PlanError::Conflict(format!(
                "data_dir {} contains the writable path {}",
                path.display(),
                r.display()
            )));
        }
    }
    let mut pins = Vec::new();
    match root {
        Some(root) => {
            let beneath = Beneath { root: root.clone() };
            // Every directory between the root and the data dir becomes a mountpoint.
            let mut p = root.clone();
            let rel = path.strip_prefix(root).unwrap_or(Path::new(""));
            let comps: Vec<_> = rel.components().collect();
            for c in comps.iter().take(comps.len().saturating_sub(1)) {
                p.push(c);
                pins.push(p.clone());
                push(
                    Step::Pin {
                        path: p.clone(),
                        beneath: beneath.clone(),
                    },
                    &p,
                    1,
                );
            }
            push(mask(&path, true, Some(beneath), None), &path, 2);
        }
        None if ro_roots.iter().any(|r| is_within(&path, r)) => {
            push(mask(&path, true, None, None), &path, 2)
        }
        // Not under any bound path: invisible inside already.
        None => {}
    }
    Ok(pins)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A fake host: path -> kind; canonicalize resolves only listed symlinks at the top.
    struct Fake(BTreeMap<PathBuf, Kind>);

    impl Fake {
        fn new() -> Self {
            let mut m = BTreeMap::new();
            for d in [
                "/usr",
                "/etc",
                "/opt",
                "/ws",
                "/ws/a",
                "/ws/a/data",
                "/srv/shared",
            ] {
                m.insert(PathBuf::from(d), Kind::Dir);
            }
            m.insert("/bin".into(), Kind::Symlink("usr/bin".into()));
            m.insert("/etc/shadow".into(), Kind::File);
            Fake(m)
        }
    }

    impl HostFs for Fake {
        fn kind(&self, path: &Path) -> Option<Kind> {
            self.0.get(path).cloned()
        }
        fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
            match self.0.get(path) {
                Some(_) => Ok(path.to_path_buf()),
                None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
            }
        }
    }

    const IDS: Ids = Ids {
        uid: 1000,
        gid: 1000,
    };

    fn position(plan: &Plan, f: impl Fn(&Step) -> bool) -> usize {
        plan.steps.iter().position(f).expect("step present")
    }

    #[test]
    fn data_dir_mask_comes_after_the_workspace_bind_and_its_pins() {
        let mut p = Policy::with_workspace("/ws");
        p.data_dir = Some("/ws/a/data".into());
        let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
        let ws = position(
            &plan,
            |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/ws")),
        );
        let pin = position(
            &plan,
            |s| matches!(s, Step::Pin { path, .. } if path == Path::new("/ws/a")),
        );
        let mask = position(
            &plan,
            |s| matches!(s, Step::Mask { path, .. } if path == Path::new("/ws/a/data")),
        );
        assert!(ws < pin && pin < mask, "{:#?}", plan.steps);
        assert!(matches!(
            &plan.steps[mask],
            Step::Mask {
                beneath: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn guard_pins_come_before_deeper_binds() {
        // Found by the `plan` fuzz target: a guard's pin of /tmp/tmp/tmp sorted by the
        // guarded path's depth landed over the deeper read-only bind below it.
        let mut fake = Fake::new();
        for d in ["/tmp/tmp", "/tmp/tmp/tmp", "/tmp/tmp/tmp/tmp"] {
            fake.0.insert(PathBuf::from(d), Kind::Dir);
        }
        let mut p = Policy::with_workspace("/ws");
        p.writable_paths = vec!["/tmp/tmp".into()];
        p.read_only = vec!["/tmp/tmp/tmp/tmp".into()];
        p.guard_names = vec!["tmp/tmp".into()];
        let plan = Plan::full(&p, &fake, IDS).unwrap();
        let pin = position(
            &plan,
            |s| matches!(s, Step::GuardPin { path } if path == Path::new("/tmp/tmp/tmp")),
        );
        let ro = position(
            &plan,
            |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/tmp/tmp/tmp/tmp")),
        );
        assert!(pin < ro, "{:#?}", plan.steps);
    }

    #[test]
    fn nothing_uncovers_a_mask() {
        // Found by the `plan` fuzz target: a guard name at the data dir re-bound it.
        let mut fake = Fake::new();
        fake.0.insert("/srv/shared/g".into(), Kind::Dir);
        fake.0.insert("/srv/shared/g/x".into(), Kind::Dir);
        let mut p = Policy::with_workspace("/ws");
        p.writable_paths = vec!["/srv/shared".into()];
        p.data_dir = Some("/srv/shared/g".into());
        p.guard_names = vec!["g".into(), "g/x".into()];
        let plan = Plan::full(&p, &fake, IDS).unwrap();
        assert!(
            !plan.steps.iter().any(|s| matches!(s, Step::GuardName { path } | Step::GuardPin { path } if path.starts_with("/srv/shared/g"))),
            "{:#?}",
            plan.steps
        );
        p.read_only = vec!["/srv/shared/g/x".into()];
        let err = Plan::full(&p, &fake, IDS).unwrap_err();
        assert!(err.to_string().contains("inside the hidden path"), "{err}");
    }

    #[test]
    fn parents_are_mounted_before_children() {
        let mut p = Policy::with_workspace("/ws");
        p.writable_paths = vec!["/srv/shared".into()];
        let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
        let mut seen: Vec<PathBuf> = Vec::new();
        for s in &plan.steps {
            let dst = match s {
                Step::Bind { dst, .. } | Step::Tmpfs { dst, .. } => dst.clone(),
                Step::Mask { path, .. }
                | Step::Pin { path, .. }
                | Step::GuardPin { path }
                | Step::GuardName { path }
                | Step::HideName { path } => path.clone(),
                _ => continue,
            };
            assert!(
                !seen
                    .iter()
                    .any(|earlier| earlier != &dst && is_within(earlier, &dst)),
                "{} mounted after a child of it",
                dst.display()
            );
            seen.push(dst);
        }
    }

    #[test]
    fn symlinked_system_dirs_stay_symlinks_and_shadow_is_masked() {
        let plan = Plan::full(&Policy::with_workspace("/ws"), &Fake::new(), IDS).unwrap();
        assert!(plan.steps.contains(&Step::Symlink {
            link: "/bin".into(),
            target: "usr/bin".into()
        }));
        let etc = position(
            &plan,
            |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/etc")),
        );
        let shadow = position(
            &plan,
            |s| matches!(s, Step::Mask { path, .. } if path == Path::new("/etc/shadow")),
        );
        assert!(etc < shadow);
    }

    #[test]
    fn writable_paths_inside_the_workspace_are_not_bound_again() {
        let mut p = Policy::with_workspace("/ws");
        p.writable_paths = vec!["/ws/a".into()];
        let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
        assert!(
            !plan
                .steps
                .iter()
                .any(|s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/ws/a")))
        );
    }

    #[test]
    fn a_data_dir_containing_the_workspace_is_refused() {
        let mut p = Policy::with_workspace("/ws/a");
        p.data_dir = Some("/ws".into());
        let err = Plan::full(&p, &Fake::new(), IDS).unwrap_err();
        assert!(err.to_string().contains("contains"), "{err}");
    }

    #[test]
    fn missing_paths_are_named_in_the_error() {
        let mut p = Policy::with_workspace("/ws");
        p.writable_paths = vec!["/nope".into()];
        let err = Plan::full(&p, &Fake::new(), IDS).unwrap_err();
        assert!(err.to_string().contains("/nope"), "{err}");
        assert!(Plan::full(&Policy::default(), &Fake::new(), IDS).is_err());
    }

    #[test]
    fn layer_two_refuses_a_data_dir_it_cannot_hide() {
        let mut p = Policy::with_workspace("/ws");
        p.data_dir = Some("/ws/a/data".into());
        let err = Plan::landlock(&p, &Fake::new(), IDS).unwrap_err();
        assert!(err.to_string().contains("cannot hide data_dir"), "{err}");
        p.data_dir = Some("/srv/shared".into());
        let plan = Plan::landlock(&p, &Fake::new(), IDS).unwrap();
        assert!(plan.private_tmp);
        assert!(
            plan.roots
                .contains(&(PathBuf::from("/usr"), Access::ReadOnly))
        );
        assert_eq!(plan.steps.last(), Some(&Step::Seccomp));
    }

    #[test]
    fn a_guard_name_under_a_denied_name_does_not_uncover_it() {
        let mut p = Policy::with_workspace("/ws");
        p.deny_names = vec![".git".into()];
        let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
        assert!(plan.steps.contains(&Step::HideName {
            path: "/ws/.git".into()
        }));
        assert!(
            !plan
                .steps
                .iter()
                .any(|s| matches!(s, Step::GuardName { .. })),
            "{:#?}",
            plan.steps
        );
    }

    #[test]
    fn a_data_dir_below_a_read_only_path_is_masked() {
        let mut p = Policy::with_workspace("/ws");
        p.read_only = vec!["/srv/shared".into()];
        p.data_dir = Some("/srv/shared".into());
        let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
        let bind = position(
            &plan,
            |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/srv/shared")),
        );
        let mask = position(
            &plan,
            |s| matches!(s, Step::Mask { path, .. } if path == Path::new("/srv/shared")),
        );
        assert!(bind < mask, "{:#?}", plan.steps);
    }

    #[test]
    fn network_none_adds_loopback_and_a_net_namespace() {
        let mut p = Policy::with_workspace("/ws");
        p.network = Network::None;
        let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
        assert!(plan.namespaces.net);
        assert!(plan.steps.contains(&Step::LoopbackUp));
    }
}
