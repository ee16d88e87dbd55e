//! [`Step`]: one operation of the child's setup, and how a failing one is named.

use std::fmt;
use std::path::PathBuf;

use super::{Access, Beneath};
use crate::error::SetupStep;

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
    /// Stop mount propagation to and from the host (`MS_REC | MS_PRIVATE` on `/`).
    MountsPrivate,
    /// Build an empty root: a tmpfs base mounted on `stage`, pivot into it, host root kept
    /// at `/oldroot`, and a fresh tmpfs at `/newroot` for the sandbox's tree.
    BaseRoot {
        /// An existing directory of the host that the setup tmpfs is mounted on, in the
        /// child's private mount namespace (so the host's own stays untouched), until
        /// `pivot_root` moves that tmpfs to `/` and shows the host's directory again under
        /// `/oldroot` (chosen by the plan: `/tmp` where it is a directory, else another
        /// directory every image has).
        stage: PathBuf,
    },
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
        /// A root host's read-only bind through an idmapped mount that shows host uid and
        /// gid 0 as 65534 (made by the parent per command): the program, root inside, is
        /// then never the owner or in the group of what it reads there, so "others"
        /// permissions apply to it as to any user (see [`HostFs::idmap`](super::HostFs::idmap)).
        idmap: bool,
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
    /// A minimal `/dev`: tmpfs, device nodes bound from the host, a private devpts and the
    /// fd links (`/dev/shm` is a [`Step::Tmpfs`] of its own).
    Dev {
        /// The host's device nodes bound there (the same paths inside): those of
        /// [`super::DEV_NODES`] the host has, each checked to be its device.
        nodes: Vec<PathBuf>,
    },
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
    /// Hide one of `deny_names` at the top of a writable root, when it exists: an existing
    /// directory is covered by an empty read-only directory, an existing file (any
    /// non-directory) by an empty read-only regular file, so `cat .env` reads nothing while
    /// `ls`, `git status` and `git add -A` keep working. A missing name is left missing:
    /// nothing is created on the host, and the program may create it (nothing can hide
    /// what is not there yet). A symlink, or a file with more than one hard link, cannot
    /// be hidden by covering the name (what it names, or its other names, stay
    /// readable): the step fails and the spawn returns
    /// [`SpawnError::DeniedName`](crate::error::SpawnError::DeniedName).
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
    /// Show a writable root's `.git` through a copy-on-write layer (the full layer's answer
    /// to `guard_names` under `.git`). Per command, when `.git` is a directory: an
    /// overlay whose lower layer is that directory and whose upper layer is a fresh tmpfs
    /// of the command's own, never mounted where the program can reach it, and handed to
    /// the parent. After the program's end the parent merges back the object database,
    /// refs, reflogs, `packed-refs`, `index`, `HEAD` and the `*_HEAD` / `*_EDITMSG` files;
    /// every other change (config, hooks, `commondir`, `worktrees/`, `modules/`,
    /// `objects/info/`, …) is dropped and reported. A `.git` symlink or file (a linked
    /// worktree, a submodule) is bound read-only onto itself, and the directory it names
    /// gets the layer when it lies inside the same root and is reached without a further
    /// symlink (else the spawn reports it); a missing `.git` is left alone (nothing to
    /// protect: what the program creates there is its own).
    GitLayer {
        /// `<root>/.git`, the same path inside.
        path: PathBuf,
        /// Size limit of the upper layer in bytes (the policy's `tmp_size`).
        size: u64,
    },
    /// Show the workspace through a copy-on-write overlay (`workspace_mode = "overlay"`),
    /// in place of its read-write bind: the lower layer is the real workspace (read-only),
    /// the upper and work directories are `<changes>/upper` and `<changes>/work`, mounted
    /// with `userxattr` (whiteouts and opaque markers in `user.overlay.*`). The host makes
    /// the change set at the first run; the program never sees `changes` itself.
    Overlay {
        /// The canonical workspace: the lower layer and the mountpoint (the same path
        /// inside).
        path: PathBuf,
        /// The change set's directory (canonical parent, not a symlink).
        changes: PathBuf,
    },
    /// The answer of layer 2, passthrough and macOS to `workspace_mode = "overlay"` (no
    /// overlay mount there), done by the host before the program starts (the child does
    /// nothing for it): the workspace copied into
    /// `<changes>/snapshot` at the first run (reflinks where the file system has them,
    /// `copy_file_range` otherwise; symlinks as symlinks, modes and times kept), which is
    /// the program's workspace (the plan's [`Plan::workspace`](super::Plan::workspace), its
    /// Landlock grant or Seatbelt write root); after each run the difference
    /// snapshot-vs-workspace is written into `<changes>/upper` in the overlay format.
    Snapshot {
        /// The real workspace.
        workspace: PathBuf,
        /// The change set's directory.
        changes: PathBuf,
        /// The policy's `snapshot_max`, in bytes: a larger workspace is refused.
        max: u64,
        /// Entries of the workspace never copied nor compared, relative to it: the data
        /// dir (when inside) and the `deny_names`.
        skip: Vec<PathBuf>,
    },
    /// `pivot_root` into `/newroot` and detach the old root.
    PivotRoot,
    /// Make the root tmpfs read-only (no new top-level entries).
    RootReadOnly,
    /// Bring up `lo` in the new network namespace.
    LoopbackUp,
    /// Open the egress proxy's listening sockets on the new namespace's loopback (TCP,
    /// backlog 128) and pass them to the host over the command's socket (`SCM_RIGHTS`);
    /// the child closes its own copies before `execve` (`network = "allow"`).
    EgressListeners {
        /// The HTTP proxy's address inside.
        http: std::net::SocketAddr,
        /// The SOCKS5 proxy's address inside.
        socks: std::net::SocketAddr,
    },
    /// `setsid()`.
    NewSession,
    /// Join a fresh anonymous session keyring.
    NewKeyring,
    /// Change to the working directory.
    Chdir(PathBuf),
    /// Make the terminal on this stdio fd (0, 1 or 2) the controlling terminal of the
    /// program's new session (`ioctl(fd, TIOCSCTTY, 0)`), for a command that asked for it
    /// (`Command::controlling_terminal`).
    ControllingTerminal(i32),
    /// Drop every capability: bounding, ambient, inheritable, permitted, effective.
    DropCapabilities,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// Set these resource limits, soft and hard, each no higher than the hard limit
    /// inherited (the policy's `[limits]`: `cpu_time`, `open_files`, `file_size`,
    /// `core_dumps`, and `processes` where `RLIMIT_NPROC` bounds the sandbox alone).
    ResourceLimits(Vec<super::Rlimit>),
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
    #[cfg_attr(not(any(target_os = "linux", feature = "internals")), allow(dead_code))]
    Exit,
}

impl From<&Step> for SetupStep {
    fn from(step: &Step) -> SetupStep {
        match step {
            Step::DieWithParent => SetupStep::DieWithParent,
            Step::Stdio => SetupStep::Stdio,
            Step::CloseFds => SetupStep::CloseFds,
            Step::ResetSignals => SetupStep::ResetSignals,
            Step::IdMaps { .. } => SetupStep::IdMaps,
            Step::MountsPrivate => SetupStep::MountsPrivate,
            Step::BaseRoot { stage } => SetupStep::BaseRoot {
                stage: stage.clone(),
            },
            Step::Bind {
                src,
                dst,
                access,
                idmap,
                ..
            } => SetupStep::Bind {
                source: src.clone(),
                target: dst.clone(),
                read_only: *access != Access::ReadWrite,
                idmap: *idmap,
            },
            Step::Symlink { link, target } => SetupStep::Symlink {
                link: link.clone(),
                target: target.clone(),
            },
            Step::Tmpfs { dst, .. } => SetupStep::Tmpfs { path: dst.clone() },
            Step::Dev { .. } => SetupStep::Dev,
            Step::Proc { .. } => SetupStep::Proc,
            Step::Mask { path, identity, .. } => SetupStep::Mask {
                path: path.clone(),
                data_dir: identity.is_some(),
            },
            Step::Pin { path, .. } | Step::GuardPin { path } => {
                SetupStep::Pin { path: path.clone() }
            }
            Step::HideName { path } => SetupStep::HideName { path: path.clone() },
            Step::GuardName { path } => SetupStep::GuardName { path: path.clone() },
            Step::GitLayer { path, .. } => SetupStep::GitLayer { path: path.clone() },
            Step::Overlay { path, changes } => SetupStep::Overlay {
                path: path.clone(),
                changes: changes.clone(),
            },
            Step::Snapshot {
                workspace, changes, ..
            } => SetupStep::Snapshot {
                workspace: workspace.clone(),
                changes: changes.clone(),
            },
            Step::PivotRoot => SetupStep::PivotRoot,
            Step::RootReadOnly => SetupStep::RootReadOnly,
            Step::LoopbackUp => SetupStep::LoopbackUp,
            Step::EgressListeners { http, socks } => SetupStep::EgressListeners {
                http: *http,
                socks: *socks,
            },
            Step::NewSession => SetupStep::NewSession,
            Step::NewKeyring => SetupStep::NewKeyring,
            Step::Chdir(p) => SetupStep::Chdir { path: p.clone() },
            Step::ControllingTerminal(fd) => SetupStep::ControllingTerminal { fd: *fd },
            Step::DropCapabilities => SetupStep::DropCapabilities,
            Step::NoNewPrivs => SetupStep::NoNewPrivs,
            Step::ResourceLimits(_) => SetupStep::ResourceLimits,
            Step::LandlockRules => SetupStep::LandlockRules,
            Step::Landlock => SetupStep::Landlock,
            Step::Seccomp => SetupStep::Seccomp,
            Step::SandboxInit => SetupStep::SandboxInit,
            Step::Exec(p) => SetupStep::Exec { program: p.clone() },
            Step::Exit => SetupStep::Exit,
        }
    }
}

/// A step is named as the error of its failure names it ([`SetupStep`]'s `Display`).
impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        SetupStep::from(self).fmt(f)
    }
}
