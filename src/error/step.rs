//! [`SetupStep`]: which step of a sandbox's setup failed, as a host matches it and as an
//! error names it.

use std::fmt;
use std::path::{Path, PathBuf};

/// The step of a sandbox's setup that failed
/// ([`SpawnError::Setup`](super::SpawnError::Setup)), with the path it worked on.
/// `Display` is how an error names it: `bind read-only /usr`, `chdir /ws/x`,
/// `mask data dir /ws/.agent`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetupStep {
    /// Arming `PR_SET_PDEATHSIG`.
    DieWithParent,
    /// Moving the stdio fds into place.
    Stdio,
    /// Closing the inherited fds.
    CloseFds,
    /// Resetting the signal dispositions.
    ResetSignals,
    /// Writing the uid and gid maps of the new user namespace.
    IdMaps,
    /// Stopping mount propagation to and from the host.
    MountsPrivate,
    /// Building the empty new root, on a tmpfs mounted on `stage` during the setup.
    BaseRoot {
        /// The host directory the setup tmpfs is mounted on (`/tmp` where it is a
        /// directory).
        stage: PathBuf,
    },
    /// Binding a host path.
    Bind {
        /// The host path.
        source: PathBuf,
        /// The path inside.
        target: PathBuf,
        /// Read-only (recursively).
        read_only: bool,
        /// Idmapped: the host's root-owned files show as owned by nobody inside.
        idmap: bool,
    },
    /// Creating a symlink inside.
    Symlink {
        /// The link's path inside.
        link: PathBuf,
        /// Its target.
        target: PathBuf,
    },
    /// Mounting a tmpfs.
    Tmpfs {
        /// The path inside.
        path: PathBuf,
    },
    /// Setting up the minimal `/dev`.
    Dev,
    /// Mounting a fresh `/proc`.
    Proc,
    /// Masking a path (an empty read-only entry over it).
    Mask {
        /// The path.
        path: PathBuf,
        /// It is the data dir (its identity is checked).
        data_dir: bool,
    },
    /// Pinning a directory (a mount of it onto itself), so that it cannot be moved.
    Pin {
        /// The directory.
        path: PathBuf,
    },
    /// Hiding a `deny_names` entry.
    HideName {
        /// The entry.
        path: PathBuf,
    },
    /// Keeping a `guard_names` entry read-only.
    GuardName {
        /// The entry.
        path: PathBuf,
    },
    /// The copy-on-write layer over a `.git` directory.
    GitLayer {
        /// The `.git` directory.
        path: PathBuf,
    },
    /// Layer 2's snapshot of the workspace in the change set (`workspace_mode =
    /// "overlay"`), made by the host.
    Snapshot {
        /// The workspace.
        workspace: PathBuf,
        /// The change set's directory.
        changes: PathBuf,
    },
    /// Mounting the copy-on-write overlay over the workspace (`workspace_mode =
    /// "overlay"`).
    Overlay {
        /// The workspace.
        path: PathBuf,
        /// The change set's directory.
        changes: PathBuf,
    },
    /// `pivot_root` into the new root.
    PivotRoot,
    /// Remounting the new root read-only.
    RootReadOnly,
    /// Bringing up the loopback interface of the new network namespace.
    LoopbackUp,
    /// Opening the egress proxy's listeners inside (`network = "allow"`).
    EgressListeners {
        /// The HTTP proxy's address inside.
        http: std::net::SocketAddr,
        /// The SOCKS5 proxy's address inside.
        socks: std::net::SocketAddr,
    },
    /// `setsid`.
    NewSession,
    /// Joining a new session keyring.
    NewKeyring,
    /// Changing to the working directory.
    Chdir {
        /// The working directory.
        path: PathBuf,
    },
    /// Making the terminal on a stdio fd the controlling terminal (`TIOCSCTTY`).
    ControllingTerminal {
        /// The stdio fd (0, 1 or 2).
        fd: i32,
    },
    /// Dropping capabilities.
    DropCapabilities,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// Setting the resource limits of `[limits]` (`setrlimit`).
    ResourceLimits,
    /// Joining the command's cgroups (its `memory`, `processes` and `cpu` limits).
    JoinCgroup,
    /// Adding the Landlock rules for the sandbox's own mounts.
    LandlockRules,
    /// `landlock_restrict_self`.
    Landlock,
    /// Installing the seccomp filter.
    Seccomp,
    /// macOS: `sandbox_init`.
    SandboxInit,
    /// Starting the sandbox's init.
    Init,
    /// The init's fork of the program's process, and that process's own set-up before
    /// its exec (its session, its nested Landlock domain).
    ProgramProcess,
    /// Running the program.
    Exec {
        /// The program as given.
        program: String,
    },
    /// The kernel probe's exit instead of a program.
    Exit,
    /// A step number the parent does not know (a malformed report).
    Unknown(u32),
}

impl SetupStep {
    /// The path the step worked on, when it has one (inside the sandbox for mounts, the
    /// link for a symlink, the working directory for `chdir`).
    pub fn path(&self) -> Option<&Path> {
        match self {
            SetupStep::Bind { target: path, .. }
            | SetupStep::Symlink { link: path, .. }
            | SetupStep::Tmpfs { path }
            | SetupStep::Mask { path, .. }
            | SetupStep::Pin { path }
            | SetupStep::HideName { path }
            | SetupStep::GuardName { path }
            | SetupStep::GitLayer { path }
            | SetupStep::Overlay { path, .. }
            | SetupStep::Chdir { path }
            | SetupStep::BaseRoot { stage: path } => Some(path),
            _ => None,
        }
    }
}

impl fmt::Display for SetupStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupStep::DieWithParent => f.write_str("prctl(PR_SET_PDEATHSIG)"),
            SetupStep::Stdio => f.write_str("set up stdio"),
            SetupStep::CloseFds => f.write_str("close inherited fds"),
            SetupStep::ResetSignals => f.write_str("reset signal handlers"),
            SetupStep::IdMaps => f.write_str("write /proc/self/uid_map and gid_map"),
            SetupStep::MountsPrivate => f.write_str("make / a private mount"),
            SetupStep::BaseRoot { stage } => {
                write!(f, "build the new root on a tmpfs at {}", stage.display())
            }
            SetupStep::Bind {
                source,
                target,
                read_only,
                idmap,
            } => {
                let how = if *read_only { "bind read-only" } else { "bind" };
                if source == target {
                    write!(f, "{how} {}", target.display())?;
                } else {
                    write!(f, "{how} {} on {}", source.display(), target.display())?;
                }
                if *idmap {
                    f.write_str(" (root-owned shown as nobody)")?;
                }
                Ok(())
            }
            SetupStep::Symlink { link, target } => {
                write!(f, "symlink {} -> {}", link.display(), target.display())
            }
            SetupStep::Tmpfs { path } => write!(f, "mount tmpfs {}", path.display()),
            SetupStep::Dev => f.write_str("set up /dev"),
            SetupStep::Proc => f.write_str("mount proc /proc"),
            SetupStep::Mask { path, data_dir } => {
                let what = if *data_dir { "mask data dir" } else { "mask" };
                write!(f, "{what} {}", path.display())
            }
            SetupStep::Pin { path } => write!(f, "pin {}", path.display()),
            SetupStep::HideName { path } => write!(f, "hide {}", path.display()),
            SetupStep::GuardName { path } => write!(f, "keep {} read-only", path.display()),
            SetupStep::GitLayer { path } => {
                write!(f, "copy-on-write layer over {}", path.display())
            }
            SetupStep::Overlay { path, changes } => write!(
                f,
                "overlay {} (writes kept in the change set {})",
                path.display(),
                changes.display()
            ),
            SetupStep::Snapshot { workspace, changes } => write!(
                f,
                "run on a snapshot of {} in {}/snapshot (the difference kept in the change set)",
                workspace.display(),
                changes.display()
            ),
            SetupStep::PivotRoot => f.write_str("pivot_root"),
            SetupStep::RootReadOnly => f.write_str("remount / read-only"),
            SetupStep::LoopbackUp => f.write_str("bring up lo"),
            SetupStep::EgressListeners { http, socks } => write!(
                f,
                "open the egress proxy's listeners {http} (HTTP) and {socks} (SOCKS5)"
            ),
            SetupStep::NewSession => f.write_str("setsid"),
            SetupStep::NewKeyring => f.write_str("join a new session keyring"),
            SetupStep::Chdir { path } => write!(f, "chdir {}", path.display()),
            SetupStep::ControllingTerminal { fd } => {
                let name = match fd {
                    0 => "stdin",
                    1 => "stdout",
                    2 => "stderr",
                    _ => "stdio",
                };
                write!(
                    f,
                    "make the terminal on {name} the controlling terminal (TIOCSCTTY)"
                )
            }
            SetupStep::DropCapabilities => f.write_str("drop capabilities"),
            SetupStep::NoNewPrivs => f.write_str("prctl(PR_SET_NO_NEW_PRIVS)"),
            SetupStep::ResourceLimits => f.write_str("set resource limits (setrlimit)"),
            SetupStep::JoinCgroup => f.write_str("join the sandbox's cgroup"),
            SetupStep::LandlockRules => {
                f.write_str("add Landlock rules for the sandbox's own mounts")
            }
            SetupStep::Landlock => f.write_str("landlock_restrict_self"),
            SetupStep::Seccomp => f.write_str("install the seccomp filter"),
            SetupStep::SandboxInit => f.write_str("sandbox_init"),
            SetupStep::Init => f.write_str("start the sandbox's init"),
            SetupStep::ProgramProcess => {
                f.write_str("start the program's process (fork, session, nested domain)")
            }
            SetupStep::Exec { program } => write!(f, "exec {program}"),
            SetupStep::Exit => f.write_str("exit"),
            SetupStep::Unknown(n) => write!(f, "step {n}"),
        }
    }
}
