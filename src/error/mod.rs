//! Public errors: one enum per layer of the flow, behind one [`Error`].

use std::io;
use std::net::IpAddr;
use std::path::PathBuf;

pub use conflict::Conflict;
pub use denied::Unhidable;
/// The errno type of every error here (nix's): match on it, `Errno::ENOENT`.
pub use nix::errno::Errno;
pub use node::NodeKind;
pub use step::SetupStep;

mod conflict;
pub(crate) mod denied;
mod node;
mod step;

use crate::policy::Layer;
pub use crate::policy::{AllowError, PatternError, PatternProblem, PolicyError};

/// The text of an errno without std's ` (os error N)` suffix: `No such file or directory`.
///
/// The text is the C library's (`strerror`), so a few errnos read differently on a musl
/// build (`ELOOP`: `Symbolic link loop`, not glibc's `Too many levels of symbolic links`);
/// the symbolic name that [`os_reason`] puts first is the same everywhere.
pub fn strerror(errno: i32) -> String {
    let text = io::Error::from_raw_os_error(errno).to_string();
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// The symbolic name of an errno (`ENOENT`), for the errors a sandbox setup or a path
/// lookup can meet; `None` for the others.
///
/// The values come from `libc` for the target, so the table holds on every OS (macOS
/// numbers several of these differently from Linux).
pub fn errno_name(errno: i32) -> Option<&'static str> {
    const NAMES: &[(i32, &str)] = &[
        (libc::EPERM, "EPERM"),
        (libc::ENOENT, "ENOENT"),
        (libc::ESRCH, "ESRCH"),
        (libc::EINTR, "EINTR"),
        (libc::EIO, "EIO"),
        (libc::ENXIO, "ENXIO"),
        (libc::E2BIG, "E2BIG"),
        (libc::ENOEXEC, "ENOEXEC"),
        (libc::EBADF, "EBADF"),
        (libc::ECHILD, "ECHILD"),
        (libc::EAGAIN, "EAGAIN"),
        (libc::ENOMEM, "ENOMEM"),
        (libc::EACCES, "EACCES"),
        (libc::EFAULT, "EFAULT"),
        (libc::EBUSY, "EBUSY"),
        (libc::EEXIST, "EEXIST"),
        (libc::EXDEV, "EXDEV"),
        (libc::ENODEV, "ENODEV"),
        (libc::ENOTDIR, "ENOTDIR"),
        (libc::EISDIR, "EISDIR"),
        (libc::EINVAL, "EINVAL"),
        (libc::ENFILE, "ENFILE"),
        (libc::EMFILE, "EMFILE"),
        (libc::ENOTTY, "ENOTTY"),
        (libc::ETXTBSY, "ETXTBSY"),
        (libc::EFBIG, "EFBIG"),
        (libc::ENOSPC, "ENOSPC"),
        (libc::ESPIPE, "ESPIPE"),
        (libc::EROFS, "EROFS"),
        (libc::EMLINK, "EMLINK"),
        (libc::EPIPE, "EPIPE"),
        (libc::ERANGE, "ERANGE"),
        (libc::EDEADLK, "EDEADLK"),
        (libc::ENAMETOOLONG, "ENAMETOOLONG"),
        (libc::ENOSYS, "ENOSYS"),
        (libc::ENOTEMPTY, "ENOTEMPTY"),
        (libc::ELOOP, "ELOOP"),
        (libc::EOVERFLOW, "EOVERFLOW"),
        (libc::EOPNOTSUPP, "EOPNOTSUPP"),
        (libc::ENOTSUP, "ENOTSUP"),
        (libc::EADDRINUSE, "EADDRINUSE"),
        (libc::EADDRNOTAVAIL, "EADDRNOTAVAIL"),
        (libc::ENETUNREACH, "ENETUNREACH"),
        (libc::ECONNREFUSED, "ECONNREFUSED"),
        (libc::ECONNRESET, "ECONNRESET"),
        (libc::ETIMEDOUT, "ETIMEDOUT"),
        (libc::EHOSTUNREACH, "EHOSTUNREACH"),
        (libc::EDQUOT, "EDQUOT"),
        (libc::ESTALE, "ESTALE"),
        (libc::ECANCELED, "ECANCELED"),
        (libc::EOWNERDEAD, "EOWNERDEAD"),
    ];
    // First match wins: where two names share a value (Linux: ENOTSUP is EOPNOTSUPP), the
    // one the kernel documents for the calls stockade makes comes first.
    NAMES
        .iter()
        .find(|(n, _)| *n == errno)
        .map(|(_, name)| *name)
}

/// The errno of an I/O error: its OS error, or `EIO` for one that has none.
pub fn errno_of(e: &io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// An errno as people read it: its name, then its text, `ENOENT (No such file or
/// directory)`, or its number when the name is not known (`errno 133 (…)`). Every error
/// of this crate that carries an errno prints it so, after the step or key and the path:
/// `bind /opt: ENOENT (No such file or directory)`.
pub fn os_reason(errno: i32) -> String {
    match errno_name(errno) {
        Some(name) => format!("{name} ({})", strerror(errno)),
        None => format!("errno {errno} ({})", strerror(errno)),
    }
}

/// An error and every cause under it on one line, `workspace /srv/ws: ENOENT (No such file
/// or directory)`: what the `stockade` command prints, and what a host can print.
///
/// Each error of the chain is written after `: `. An [`io::Error`] that carries an errno is
/// written as [`os_reason`] renders it, without std's `(os error N)`.
///
/// ```
/// let e = stockade::Error::from(stockade::PlanError::Path {
///     key: "workspace",
///     path: "/nonexistent-dir".into(),
///     errno: stockade::error::Errno::ENOENT,
/// });
/// assert_eq!(
///     stockade::error::Report(&e).to_string(),
///     "workspace /nonexistent-dir: ENOENT (No such file or directory)"
/// );
/// let e = std::io::Error::from_raw_os_error(libc::EACCES);
/// assert_eq!(
///     stockade::error::Report(&e).to_string(),
///     "EACCES (Permission denied)"
/// );
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Report<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut next = Some(self.0);
        let mut first = true;
        while let Some(e) = next {
            if !first {
                f.write_str(": ")?;
            }
            first = false;
            match e
                .downcast_ref::<io::Error>()
                .and_then(io::Error::raw_os_error)
            {
                Some(errno) => f.write_str(&os_reason(errno))?,
                None => write!(f, "{e}")?,
            }
            next = e.source();
        }
        Ok(())
    }
}

/// Any error stockade returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The policy is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The policy cannot be turned into a plan on this host.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Spawning the sandboxed program failed.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The Landlock ruleset could not be built.
    #[error(transparent)]
    Landlock(#[from] LandlockBuildError),
    /// The seccomp filter could not be compiled.
    #[error(transparent)]
    Seccomp(#[from] SeccompBuildError),
    /// An in-process guard (path, command arguments, URL) refused its input.
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// The macOS sandbox profile could not be generated from the policy.
    #[error(transparent)]
    Profile(#[from] SbplError),
}

/// The policy cannot be realized on this host.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A path named by the policy cannot be used, and why:
    /// `workspace /srv/ws: ENOENT (No such file or directory)`.
    #[error("{key} {}: {}", path.display(), os_reason(*errno as i32))]
    Path {
        /// The policy key (`workspace`, `writable_paths`, …).
        key: &'static str,
        /// The path.
        path: PathBuf,
        /// Why (`ENOENT`: it does not exist; `ENOTDIR`: it is not a directory; …).
        errno: Errno,
    },
    /// A configured path is, or passes through, a symbolic link: stockade follows none
    /// (a program could have planted it in a writable root between runs).
    #[error(
        "{key} {}: {} is a symbolic link (to {}); configured paths must not contain symlinks, give the real path",
        path.display(), link.display(), target.display()
    )]
    Symlink {
        /// The policy key (`workspace`, `writable_paths`, …).
        key: &'static str,
        /// The configured path.
        path: PathBuf,
        /// The component that is a symlink.
        link: PathBuf,
        /// Where it points (as read, not resolved).
        target: PathBuf,
    },
    /// A device node the full layer binds from the host's `/dev` is not the device its
    /// name says (`/dev/null is a regular file, not the character device 1:3`), or
    /// `/dev/null`, which masks and [`Stdio::null`](crate::Stdio::null) use, is missing.
    /// No node is followed through a symlink.
    #[error("{}", node::device_node(path, *wanted, found))]
    DeviceNode {
        /// The host path (`/dev/null`).
        path: PathBuf,
        /// The character device it must be: `(major, minor)`.
        wanted: (u32, u32),
        /// What it is instead.
        found: NodeKind,
    },
    /// A path contains a NUL byte.
    #[error("path {0:?} contains a NUL byte")]
    Nul(PathBuf),
    /// The working directory is not under the workspace.
    #[error("working directory {cwd:?} is not under the workspace {workspace:?}")]
    CwdOutsideWorkspace {
        /// The requested working directory.
        cwd: PathBuf,
        /// The workspace.
        workspace: PathBuf,
    },
    /// The wanted containment layer is not available and the policy refuses to degrade.
    #[error("containment layer `{wanted}` is not available: {reason}")]
    LayerUnavailable {
        /// The layer the policy wants.
        wanted: Layer,
        /// What the probe found.
        reason: String,
    },
    /// Resource limits of the policy cannot be enforced here (no cgroup the host may use)
    /// and the policy refuses to degrade (`fallback = "refuse"`).
    #[error("limits {limits} cannot be enforced here: {reason}")]
    LimitsUnavailable {
        /// The limits that would not hold (`memory 2GiB, cpu 1.5`).
        limits: String,
        /// Why (what cgroup delegation is missing).
        reason: String,
    },
    /// The data dir is not the directory the sandbox pinned when it was created.
    #[error("data dir {0:?} was replaced since the sandbox was created; refusing to spawn")]
    DataDirChanged(PathBuf),
    /// The policy asks for something the plan cannot give (a workspace at `/`, a path
    /// both bound and hidden, a data dir that layer 2 cannot hide, …), or a launcher was
    /// given a plan it cannot replay: which one, and the paths involved, are in the
    /// [`Conflict`]. Printed as the conflict's own message.
    #[error(transparent)]
    Conflict(Conflict),
    /// An argument or environment string contains a NUL byte.
    #[error("{what} contains a NUL byte")]
    NulInArgument {
        /// `argument`, `program`, `environment variable NAME`.
        what: String,
    },
    /// A variable the program must not receive (LD_PRELOAD, …) was set on the command.
    #[error("environment variable {0} is not allowed for sandboxed commands")]
    DangerousEnv(String),
    /// A [`Command::secret_env`](crate::Command::secret_env) value is shorter than
    /// [`MIN_SECRET_ENV_LEN`](crate::guard::redact::MIN_SECRET_ENV_LEN) bytes: it could not
    /// be redacted without replacing common text, so the command is not run.
    #[error(
        "secret_env {name}: its value has {len} bytes, fewer than the {min} a redacted \
         secret needs (pass it with env() if it is not a secret)"
    )]
    SecretTooShort {
        /// The variable's name.
        name: String,
        /// The value's length in bytes.
        len: usize,
        /// The shortest value accepted.
        min: usize,
    },
    /// The program is looked up in more `PATH` directories than the sandbox's start
    /// takes: the command is not run (rather than fail later without a word).
    #[error(
        "program {program:?}: PATH names {count} directories to look it up in, more than \
         the {max} a sandboxed command's start takes"
    )]
    TooManyCandidates {
        /// The program's name.
        program: String,
        /// The directories `PATH` names (empty ones skipped).
        count: usize,
        /// The most taken.
        max: usize,
    },
}

/// Spawning failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// A step of the child's setup failed; the message names the step, its path and the
    /// errno (`bind /opt: ENOENT (No such file or directory)`).
    #[error("{step}: {}", os_reason(*errno as i32))]
    Setup {
        /// The step, with its path ([`SetupStep::path`]).
        step: SetupStep,
        /// The errno the child saw.
        errno: Errno,
    },
    /// A `deny_names` entry at the top of a writable root exists and cannot be hidden (a
    /// symbolic link, or a file with more than one hard link), so the command was not
    /// run; the message says how to fix it.
    #[error("{}", denied::message(path, reason))]
    DeniedName {
        /// The entry (its path inside, the same as on the host).
        path: PathBuf,
        /// Why it cannot be hidden.
        reason: Unhidable,
    },
    /// The program was not found on the sandbox's `PATH`.
    #[error("{program}: command not found in the sandbox")]
    NotFound {
        /// The program as given.
        program: String,
    },
    /// A parent-side system call failed (pipe, clone, pidfd_open, …).
    #[error("{call} failed")]
    Os {
        /// The call.
        call: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A parent-side operation on a host path failed, named with the path:
    /// `create the private tmp dir in /tmp: ENOENT (No such file or directory)`, followed
    /// by what the error means where stockade can tell (`(/proc is not mounted)`).
    #[error(
        "{what} {}: {}{}",
        path.display(),
        os_reason(*errno as i32),
        note.map(|n| format!(" ({n})")).unwrap_or_default()
    )]
    Path {
        /// What was done (`create the private tmp dir in`).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The errno.
        errno: Errno,
        /// What the error means here, when known.
        note: Option<&'static str>,
    },
    /// The child ended during its setup, before running the program, without reporting
    /// a step (killed by a signal, or it exited on its own): the program never ran.
    #[error("the sandbox's setup ended before the program ran ({status})")]
    DiedBeforeExec {
        /// The child's wait status.
        status: std::process::ExitStatus,
    },
    /// The child wrote something that is not a valid report record.
    #[error("malformed setup report from the child ({0} bytes)")]
    Protocol(usize),
    /// macOS: `sandbox_init` refused the generated profile in the child; the error carries
    /// the profile compiler's message.
    #[error(transparent)]
    SandboxInit(#[from] InitError),
}

impl SpawnError {
    /// The errno of a failure that has one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            SpawnError::Setup { errno, .. } => Some(*errno),
            SpawnError::NotFound { .. } => Some(Errno::ENOENT),
            SpawnError::Path { errno, .. } => Some(*errno),
            SpawnError::Os { source, .. } => source.raw_os_error().map(Errno::from_raw),
            _ => None,
        }
    }
}

/// What an in-process guard refused, and why.
///
/// The path guard ([`crate::PathGuard`]) and the URL guard ([`crate::validate_url`]) return
/// these. Each variant names the refused input; none carries a catch-all string.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// The path resolves outside the workspace (`..`, or an absolute path elsewhere).
    #[error("{path:?} is outside the workspace")]
    OutsideWorkspace {
        /// The path as given.
        path: PathBuf,
    },
    /// A component of the path is a symbolic link; the guard follows none.
    #[error("{path:?} is a symbolic link")]
    Symlink {
        /// The path up to and including the link.
        path: PathBuf,
    },
    /// The path names a denied entry (`.git`, `.env`, `.ssh`, …) at some depth.
    #[error("{path:?} contains the denied name {name:?}")]
    DeniedName {
        /// The path as given.
        path: PathBuf,
        /// The `deny_names` entry it matched.
        name: String,
    },
    /// A command argument (or the program) names a denied entry.
    #[error("argument {arg:?} names the denied name {name:?}")]
    DeniedArgument {
        /// The argument, lossily converted to UTF-8.
        arg: String,
        /// The `deny_names` entry it matched.
        name: String,
    },
    /// The path names a protected file, and the access is a write.
    #[error("{path:?} is protected from writes ({name:?})")]
    Protected {
        /// The path as given.
        path: PathBuf,
        /// The `protected` entry it matched (case-insensitively).
        name: String,
    },
    /// The path contains a NUL byte.
    #[error("{path:?} contains a NUL byte")]
    Nul {
        /// The path as given.
        path: PathBuf,
    },
    /// The path contains a line break (`\n` or `\r`), which splits log lines and
    /// line-oriented tool output.
    #[error("{path:?} contains a line break")]
    Newline {
        /// The path as given.
        path: PathBuf,
    },
    /// The path uses `..` after a component that does not exist, so it cannot be resolved.
    #[error("{path:?} uses `..` below a component that does not exist")]
    DotDotInMissing {
        /// The path as given.
        path: PathBuf,
    },
    /// A component of the path could not be inspected (permission denied, not a
    /// directory, …), or the workspace itself cannot be resolved.
    #[error("cannot inspect {path:?}")]
    Inspect {
        /// The path that failed.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The text is not a URL.
    #[error("{url:?} is not a valid URL")]
    InvalidUrl {
        /// The text as given.
        url: String,
        /// The parser's reason.
        #[source]
        source: url::ParseError,
    },
    /// The URL's scheme is not `http` or `https`.
    #[error("URL scheme {scheme:?} is not allowed (only http and https)")]
    Scheme {
        /// The scheme.
        scheme: String,
    },
    /// The URL carries a user name or password.
    #[error("URLs with credentials (user:password@) are not allowed")]
    Userinfo,
    /// The URL names a cloud metadata endpoint.
    #[error("{host:?} is a cloud metadata endpoint")]
    Metadata {
        /// The host as written in the URL.
        host: String,
    },
    /// The host is, or resolves to, a private, loopback, link-local, shared, multicast,
    /// broadcast, reserved or unspecified address.
    #[error("{host:?} resolves to the forbidden address {addr}")]
    ForbiddenAddress {
        /// The host as written in the URL.
        host: String,
        /// The forbidden address.
        addr: IpAddr,
    },
    /// Resolving the host name failed.
    #[error("cannot resolve {host:?}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's error.
        #[source]
        source: io::Error,
    },
    /// The host name resolved to no address at all.
    #[error("{host:?} resolves to no address")]
    NoAddress {
        /// The host name.
        host: String,
    },
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Spawn(SpawnError::NotFound { .. }) => io::ErrorKind::NotFound,
            Error::Spawn(SpawnError::DeniedName { .. }) => io::ErrorKind::PermissionDenied,
            Error::Spawn(s) => match s.errno() {
                Some(errno) => io::Error::from(errno).kind(),
                None => io::ErrorKind::Other,
            },
            Error::Guard(GuardError::Inspect { source, .. }) => source.kind(),
            Error::Guard(GuardError::Resolve { source, .. }) => source.kind(),
            Error::Guard(_) => io::ErrorKind::PermissionDenied,
            _ => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, e)
    }
}

/// A boxed error from a dependency whose own error type exists only on some platforms
/// (the `landlock` crate, the seccomp generator); boxing keeps the public enums free of `cfg`.
pub type BoxedSource = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Building the Landlock ruleset in the parent failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LandlockBuildError {
    /// The kernel has no usable Landlock (`ENOSYS`: not built in; `EOPNOTSUPP`: disabled at
    /// boot). The layers that need Landlock are unavailable.
    #[error("landlock is not available: {}", os_reason(*errno as i32))]
    Unsupported {
        /// The errno of `landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION)`.
        errno: Errno,
    },
    /// `landlock_create_ruleset` (or the crate's compatibility check before it) failed.
    #[error("landlock_create_ruleset failed")]
    CreateRuleset(#[source] BoxedSource),
    /// A path of the ruleset could not be opened (for a reason other than not existing).
    #[error("open {} for a landlock rule", path.display())]
    OpenPath {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The workspace does not exist or cannot be opened; unlike other paths it is required.
    #[error("workspace {} cannot be opened for a landlock rule", path.display())]
    Workspace {
        /// The workspace path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// `landlock_add_rule` failed for a path.
    #[error("landlock_add_rule {} failed", path.display())]
    AddRule {
        /// The path of the rule.
        path: PathBuf,
        /// Why.
        #[source]
        source: BoxedSource,
    },
    /// `landlock_add_rule` failed for a TCP port (a connect rule).
    #[error("landlock_add_rule for TCP port {port} failed")]
    AddPortRule {
        /// The port of the rule.
        port: u16,
        /// Why.
        #[source]
        source: BoxedSource,
    },
    /// The ruleset was to deny TCP but to some ports, and the kernel's Landlock cannot deny
    /// TCP (ABI < 4): no port rule would hold.
    #[error("TCP rules need Landlock ABI 4; the kernel has {kernel_abi}")]
    TcpUnsupported {
        /// The ABI version the kernel reports.
        kernel_abi: i32,
    },
}

/// Compiling the seccomp filter in the parent failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompBuildError {
    /// The seccomp generator could not encode the program (a bug, not a host property).
    #[error("compile the seccomp filter")]
    CompileFilter(#[source] BoxedSource),
    /// The compiled program is longer than a `sock_fprog` can describe (`BPF_MAXINSNS`).
    #[error("the seccomp filter has {0} instructions, more than the kernel accepts")]
    TooLong(usize),
}

/// The macOS sandbox profile could not be generated from the policy.
///
/// Messages name the policy key; paths are printed with `{:?}`, so a hostile path cannot
/// forge a line of a log either.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SbplError {
    /// The policy names no workspace.
    #[error("the policy has no workspace")]
    NoWorkspace,
    /// A path is relative or contains `..`.
    #[error("{key}: {path:?} must be an absolute path without `..`")]
    NotAbsolute {
        /// The policy key.
        key: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// A name that should be relative to a writable root is not.
    #[error("{key}: {name:?} must be a relative path without `..`")]
    BadName {
        /// The policy key (`deny_names`, `guard_names`).
        key: &'static str,
        /// The name.
        name: String,
    },
    /// A path is not valid UTF-8.
    #[error("{key}: {path:?} is not valid UTF-8")]
    NotUtf8 {
        /// The policy key.
        key: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// A path contains a control character (newline, NUL, …).
    #[error("{key}: {path:?} contains a control character")]
    ControlCharacter {
        /// The policy key.
        key: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// A path is longer than macOS's `PATH_MAX` (1024 bytes).
    #[error("{key}: a path of {len} bytes is longer than {max}")]
    TooLong {
        /// The policy key.
        key: &'static str,
        /// The length of the path in bytes.
        len: usize,
        /// The longest path accepted (macOS's `PATH_MAX`).
        max: usize,
    },
    /// The profile would hold more path filters than one profile may (512).
    #[error("the profile needs {count} path rules, more than {max}")]
    TooManyRules {
        /// How many path filters the policy needs.
        count: usize,
        /// The most path filters one profile may hold.
        max: usize,
    },
    /// `network = "allow"` without the egress proxy's ports. Each spawn sets the ports its
    /// proxy listens on; a profile without them would give the program no route, and a
    /// printed plan's placeholders are never accepted in their place.
    #[error("network = \"allow\" needs the egress proxy's ports, and none was given")]
    NoProxyPort,
    /// Port 0 among the egress proxy's ports: no listener has it.
    #[error("network = \"allow\": port 0 is not a port the egress proxy listens on")]
    ProxyPortZero,
    /// Egress proxy ports for a profile whose network is `none` or `full`: the caller
    /// mixed up two runs or two policies, and no profile is better than a guessed one.
    #[error("egress proxy ports were given for a profile whose network is not \"allow\"")]
    ProxyPortsWithoutAllow,
}

/// The error message of `sandbox_init(3)`, decoded from the child's report.
///
/// The message comes from Apple's profile compiler in the child; it is truncated to the
/// report's size and decoded lossily.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sandbox_init refused the profile: {message}")]
pub struct InitError {
    /// The compiler's message (for example `unbound variable: file-map-executable`).
    pub message: String,
}

impl InitError {
    /// Decodes the bytes the child copied into its fixed-size report.
    pub fn from_report(bytes: &[u8]) -> Self {
        InitError {
            message: String::from_utf8_lossy(bytes).trim_end().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_error_names_step_and_errno() {
        let e = SpawnError::Setup {
            step: SetupStep::Bind {
                source: "/opt".into(),
                target: "/opt".into(),
                read_only: true,
                idmap: false,
            },
            errno: Errno::ENOENT,
        };
        assert_eq!(
            e.to_string(),
            "bind read-only /opt: ENOENT (No such file or directory)"
        );
        assert_eq!(e.errno(), Some(Errno::ENOENT));
        // Matchable: the step, its path and the errno.
        assert!(matches!(
            &e,
            SpawnError::Setup {
                step: SetupStep::Bind {
                    read_only: true,
                    ..
                },
                errno: Errno::ENOENT
            }
        ));
        match &e {
            SpawnError::Setup { step, .. } => {
                assert_eq!(step.path(), Some(std::path::Path::new("/opt")))
            }
            _ => unreachable!(),
        }
        let chdir = SetupStep::Chdir {
            path: "/ws/x".into(),
        };
        assert_eq!(chdir.to_string(), "chdir /ws/x");
        assert_eq!(SetupStep::Unknown(9).path(), None);
    }

    #[test]
    fn a_path_error_names_the_path_the_errno_and_the_note() {
        let e = SpawnError::Path {
            what: "create the private tmp dir in",
            path: "/tmp".into(),
            errno: Errno::ENOENT,
            note: None,
        };
        assert_eq!(
            Report(&e).to_string(),
            "create the private tmp dir in /tmp: ENOENT (No such file or directory)"
        );
        assert_eq!(e.errno(), Some(Errno::ENOENT));
        let e = SpawnError::Path {
            what: "set up stdio: open /dev/null's read-only copy as",
            path: "/proc/self/fd/5".into(),
            errno: Errno::ENOENT,
            note: Some("/proc is not mounted"),
        };
        assert_eq!(
            e.to_string(),
            "set up stdio: open /dev/null's read-only copy as /proc/self/fd/5: ENOENT (No such \
             file or directory) (/proc is not mounted)"
        );
    }

    #[test]
    fn errno_names_and_reasons() {
        assert_eq!(errno_name(libc::ENOENT), Some("ENOENT"));
        assert_eq!(errno_name(libc::EACCES), Some("EACCES"));
        assert_eq!(errno_name(libc::ELOOP), Some("ELOOP"));
        assert_eq!(errno_name(libc::EOPNOTSUPP), Some("EOPNOTSUPP"));
        assert_eq!(errno_name(0), None);
        assert_eq!(
            os_reason(libc::ENOTDIR),
            "ENOTDIR (Not a directory)",
            "the name, then the text without std's suffix"
        );
        // Outside the table: the number, never a made-up name.
        assert_eq!(errno_name(4000), None);
        assert!(
            os_reason(4000).starts_with("errno 4000 ("),
            "{}",
            os_reason(4000)
        );
    }

    #[test]
    fn report_names_the_path_and_the_os_reason_once() {
        let e = Error::from(PlanError::Path {
            key: "writable_paths",
            path: "/srv/shared".into(),
            errno: Errno::EACCES,
        });
        let line = "writable_paths /srv/shared: EACCES (Permission denied)";
        assert_eq!(Report(&e).to_string(), line);
        assert_eq!(e.to_string(), line);
        // An io::Error source is written the same way.
        let e = LandlockBuildError::OpenPath {
            path: "/srv/x".into(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(
            Report(&e).to_string(),
            "open /srv/x for a landlock rule: EACCES (Permission denied)"
        );
        // An error without a source is its own line; an io::Error without an errno keeps
        // its text.
        let e = PlanError::Conflict(Conflict::WorkspaceIsRoot);
        assert_eq!(Report(&e).to_string(), "the workspace cannot be /");
        let e = GuardError::Inspect {
            path: "/w/x".into(),
            source: io::Error::other("boom"),
        };
        assert_eq!(Report(&e).to_string(), r#"cannot inspect "/w/x": boom"#);
    }

    #[test]
    fn sandbox_init_error_shows_the_compiler_message_once() {
        let e = Error::from(SpawnError::from(InitError::from_report(
            b"unbound variable: x",
        )));
        assert_eq!(
            e.to_string(),
            "sandbox_init refused the profile: unbound variable: x"
        );
        assert!(std::error::Error::source(&e).is_none());
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::Other);
    }

    #[test]
    fn public_variants_keep_their_shape() {
        // Constructing every variant pins the public shape (fields and names).
        let _ = Error::Policy(PolicyError::NoWorkspace);
        let _ = PolicyError::AmbiguousConfig { places: Vec::new() };
        let _ = PolicyError::LeakPattern(PatternError::TooMany { count: 0 });
        let _ = PatternError::SetTooBig { count: 0, limit: 0 };
        for problem in [
            PatternProblem::Name,
            PatternProblem::Builtin,
            PatternProblem::TooLong { len: 0 },
            PatternProblem::MatchesEmpty,
            PatternProblem::TooBig { limit: 0 },
        ] {
            let _ = PatternError::Pattern {
                index: 0,
                name: String::new(),
                problem,
            };
        }
        let e = PatternError::Pattern {
            index: 2,
            name: "acme_key".into(),
            problem: PatternProblem::Syntax {
                message: "unclosed group".into(),
                offset: 5,
                character: 6,
            },
        };
        assert_eq!(
            e.to_string(),
            "leak.patterns[2] \"acme_key\": regex error at character 6 (byte 5): unclosed group"
        );
        let _ = PolicyError::RelativePath {
            key: "k",
            path: PathBuf::new(),
        };
        let _ = PlanError::CwdOutsideWorkspace {
            cwd: PathBuf::new(),
            workspace: PathBuf::new(),
        };
        let _ = PlanError::LayerUnavailable {
            wanted: Layer::Full,
            reason: String::new(),
        };
        let e = PlanError::LimitsUnavailable {
            limits: "memory 2GiB".into(),
            reason: "no cgroup".into(),
        };
        assert_eq!(
            e.to_string(),
            "limits memory 2GiB cannot be enforced here: no cgroup"
        );
        let e = PlanError::DeviceNode {
            path: PathBuf::from("/dev/null"),
            wanted: (1, 3),
            found: NodeKind::File,
        };
        assert_eq!(
            e.to_string(),
            "/dev/null is a regular file, not the character device 1:3"
        );
        let e = PlanError::DeviceNode {
            path: PathBuf::from("/dev/null"),
            wanted: (1, 3),
            found: NodeKind::Missing,
        };
        assert_eq!(
            e.to_string(),
            "/dev/null is missing on this host; the sandbox needs it (the character device 1:3)"
        );
        for k in [
            NodeKind::Symlink(PathBuf::new()),
            NodeKind::Dir,
            NodeKind::CharDevice { major: 1, minor: 5 },
            NodeKind::BlockDevice { major: 8, minor: 0 },
            NodeKind::Fifo,
            NodeKind::Socket,
        ] {
            assert!(!k.to_string().is_empty());
        }
        let _ = SpawnError::NotFound {
            program: String::new(),
        };
        let _ = SpawnError::Protocol(3);
        let _ = SpawnError::DeniedName {
            path: PathBuf::new(),
            reason: Unhidable::HardLinks(None),
        };
        for u in [Unhidable::Symlink(None), Unhidable::HardLinks(Some(3))] {
            assert!(!u.to_string().is_empty());
        }
        let _ = SpawnError::Path {
            what: "w",
            path: PathBuf::new(),
            errno: Errno::ENOENT,
            note: None,
        };
        let _ = SpawnError::DiedBeforeExec {
            status: std::process::ExitStatus::default(),
        };
        let _ = SpawnError::SandboxInit(InitError {
            message: String::new(),
        });
        let _ = Error::Profile(SbplError::NoWorkspace);
        for e in [
            SbplError::NoProxyPort,
            SbplError::ProxyPortZero,
            SbplError::ProxyPortsWithoutAllow,
        ] {
            assert!(e.to_string().contains("\"allow\""), "{e}");
        }
        let _ = PolicyError::Toml {
            key: None,
            line: Some(1),
            column: Some(1),
            message: String::new(),
        };
    }

    #[test]
    fn guard_variants_keep_their_shape() {
        let p = PathBuf::new;
        let s = String::new;
        let _ = Error::Guard(GuardError::Userinfo);
        let _ = GuardError::OutsideWorkspace { path: p() };
        let _ = GuardError::Symlink { path: p() };
        let _ = GuardError::DeniedName {
            path: p(),
            name: s(),
        };
        let _ = GuardError::DeniedArgument {
            arg: s(),
            name: s(),
        };
        let _ = GuardError::Protected {
            path: p(),
            name: s(),
        };
        let _ = GuardError::Nul { path: p() };
        let _ = GuardError::Newline { path: p() };
        let _ = GuardError::DotDotInMissing { path: p() };
        let _ = GuardError::Inspect {
            path: p(),
            source: io::Error::other("x"),
        };
        let _ = GuardError::InvalidUrl {
            url: s(),
            source: url::ParseError::EmptyHost,
        };
        let _ = GuardError::Scheme { scheme: s() };
        let _ = GuardError::Metadata { host: s() };
        let _ = GuardError::ForbiddenAddress {
            host: s(),
            addr: IpAddr::from([127, 0, 0, 1]),
        };
        let _ = GuardError::Resolve {
            host: s(),
            source: io::Error::other("x"),
        };
        let _ = GuardError::NoAddress { host: s() };
    }

    #[test]
    fn guard_errors_render_the_cause_once() {
        use std::error::Error as _;
        let e = GuardError::Inspect {
            path: "/w/x".into(),
            source: io::Error::other("boom"),
        };
        assert_eq!(e.to_string(), r#"cannot inspect "/w/x""#);
        assert_eq!(e.source().unwrap().to_string(), "boom");
        let e = Error::from(GuardError::ForbiddenAddress {
            host: "h".into(),
            addr: IpAddr::from([10, 0, 0, 1]),
        });
        assert_eq!(
            e.to_string(),
            r#""h" resolves to the forbidden address 10.0.0.1"#
        );
    }

    #[test]
    fn build_error_variants_keep_their_shape() {
        let _ = LandlockBuildError::Unsupported {
            errno: Errno::ENOSYS,
        };
        let _ = LandlockBuildError::OpenPath {
            path: PathBuf::new(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        let _ = LandlockBuildError::Workspace {
            path: PathBuf::new(),
            source: io::Error::from_raw_os_error(libc::ENOENT),
        };
        let _ = LandlockBuildError::AddRule {
            path: PathBuf::new(),
            source: "x".into(),
        };
        let _ = LandlockBuildError::CreateRuleset("x".into());
        let e = LandlockBuildError::AddPortRule {
            port: 3128,
            source: "x".into(),
        };
        assert_eq!(e.to_string(), "landlock_add_rule for TCP port 3128 failed");
        let e = LandlockBuildError::TcpUnsupported { kernel_abi: 3 };
        assert_eq!(
            e.to_string(),
            "TCP rules need Landlock ABI 4; the kernel has 3"
        );
        let _ = SeccompBuildError::CompileFilter("x".into());
        let _ = SeccompBuildError::TooLong(5000);
    }

    #[test]
    fn build_errors_render_without_repeating_the_source() {
        let e = LandlockBuildError::Unsupported {
            errno: Errno::EOPNOTSUPP,
        };
        // The text in parentheses is the C library's `strerror`, which words this errno
        // differently on glibc and musl.
        let text = if cfg!(target_env = "musl") {
            "Not supported"
        } else {
            "Operation not supported"
        };
        assert_eq!(
            e.to_string(),
            format!("landlock is not available: EOPNOTSUPP ({text})")
        );
        let e = LandlockBuildError::Workspace {
            path: PathBuf::from("/ws"),
            source: io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert_eq!(
            e.to_string(),
            "workspace /ws cannot be opened for a landlock rule"
        );
        assert!(std::error::Error::source(&e).is_some());
    }
}
