//! stockade: OS-level containment for a host's worker subprocesses, from plain syscalls.
//!
//! Agent hosts run `shell` and `exec` tools that a model controls. Filtering command strings
//! fails; the kernel has to enforce the boundary. stockade is the library a host links
//! instead of shelling out to `bwrap`: no helper binary, no setuid, no daemon.
//!
//! # The one flow
//!
//! ```text
//! Policy (serde/TOML)  ──►  Sandbox::new(policy)  ──►  sandbox.command("sh")      ──►  stockade::Command
//!   what may be seen         cheap facts, no probe;      builds a Plan: every path,      std's builder API; spawn()
//!   and written               the first spawn is it      CString, BPF program and        returns a Child with a pidfd
//!                                                         ruleset computed up front
//!                                                                 │
//!                                                                 ▼  in the child, allocation-free:
//!                                      namespaces → id maps → mounts → pivot_root → setsid →
//!                                      caps drop → no_new_privs → Landlock → seccomp → exec
//! ```
//!
//! ```no_run
//! use stockade::{Policy, Sandbox, Stdio};
//!
//! let sandbox = Sandbox::new(Policy::with_workspace("/srv/agent/workspace"))?;
//! let mut cmd = sandbox.command("sh");
//! cmd.arg("-c").arg("npm test").stdout(Stdio::piped());
//! let out = cmd.spawn()?.wait_with_output()?;
//! println!("{}", String::from_utf8_lossy(&out.stdout));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layers, strongest first
//!
//! 1. `full`: user, mount, pid, ipc and uts namespaces (net with `network = "none"`, and
//!    with `"allow"`, whose only way out is the host's egress proxy: `docs/NETWORK.md`), a
//!    new root with bubblewrap's layout, then Landlock and seccomp.
//! 2. `landlock`: Landlock and seccomp without namespaces, for hosts that deny user
//!    namespaces.
//! 3. `passthrough`: a clean environment only.
//!
//! [`Sandbox::capabilities`] says which layers this kernel offers and why not. A policy
//! chooses to degrade (the default, with a `tracing` warning) or to refuse; stockade never
//! runs weaker in silence. See `SECURITY.md` for what each layer stops.
//!
//! # Platforms
//!
//! | OS | `full` | `landlock` | `passthrough` | spawned by |
//! | --- | --- | --- | --- | --- |
//! | Linux | namespaces + mounts + Landlock + seccomp | Landlock + seccomp | clean env | stockade's own `clone` |
//! | macOS | a generated SBPL profile, `sandbox_init` in the child | unavailable (Linux only) | clean env | `fork` |
//! | other Unix | unavailable (refused or degraded, naming the OS) | unavailable | clean env | `fork` |
//!
//! [`Capabilities::sandbox`] reports the macOS sandbox; on macOS it is what
//! `Capabilities::layer(Layer::Full)` returns. [`Sandbox::landlock_status`] and
//! [`Child::pidfd`] exist on Linux only.
//!
//! # Multithreaded hosts
//!
//! The child between `clone` and `execve` shares the host's memory (`CLONE_VM`), so it may
//! only replay a plan the parent computed: it never allocates, takes a lock or logs, and it
//! makes system calls directly, without touching `errno`. A test with a trapping global
//! allocator holds this. Spawning is safe from any number of threads at once.
//!
//! # PID 1: the embedded init
//!
//! The program is not PID 1. PID 1 of the sandbox is `stockade-init`, a static `no_std`
//! ELF of a few KiB built from this project's own source (the `stockade-init` crate) when
//! stockade is built, carried in the library as bytes, written once per process to a
//! sealed memfd and exec'd from it at the end of the setup, after every wall is up: it has
//! the program's seccomp filter, Landlock domain, `no_new_privs` and no capability, and no
//! page of the host's memory (no helper binary, no fork of the host). It does tini's job:
//!
//! - it starts the program as its child, in a session of its own (unless `keep_session`);
//! - it forwards `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2`, `SIGWINCH`
//!   and `SIGCONT` ([`Child::signal`], and `stockade run` for the signals it receives), so
//!   programs see the kernel's ordinary signal rules: `kill -TERM $$` ends a shell,
//!   `abort()` ends with `SIGABRT`;
//! - it reaps every orphan, so no zombie piles up;
//! - when the program ends it reports the program's exact wait status, which
//!   [`Child::wait`] returns (exit code, or signal and core flag), and exits; the kernel
//!   then ends every process left in the PID namespace. [`Child::kill`] ends the whole
//!   sandbox at once.
//!
//! On the `landlock` layer (no PID namespace) the same init runs as a child subreaper and,
//! when the program ends, is killed or the host dies, kills and reaps every descendant: a
//! double-forked daemon does not outlive the command. There the program also runs in a
//! nested Landlock domain that may not signal the init (Landlock ABI 6). In passthrough
//! there is no init: the program is the host's direct child, as with std.
//!
//! # Repositories in the workspace
//!
//! Git on the host runs commands that a repository's `.git` names (hooks, `core.fsmonitor`,
//! and through `commondir`, `config.worktree`, `worktrees/` or `modules/`, a config
//! elsewhere). On the full layer each writable root's `.git` is seen through a
//! copy-on-write layer per command: git works inside, and when the program has ended only
//! the object database, refs, reflogs, the index, `HEAD` and git's `*_HEAD` and message
//! files reach the host, and of `.git/config` only an allowlist (`user.name`,
//! `user.email`, `remote.<name>.url|pushurl|fetch` with plain URLs, `branch.<name>.remote|merge`,
//! each value checked, listed by [`Child::git_config`]); every other change is dropped and
//! reported by [`Child::git_dropped`] (a host should relay both to its agent or user: a
//! `git config` that worked inside is otherwise silently gone in the next command), as is an index that lists a submodule the host's did not (git on
//! the host runs git in every submodule checkout), a ref, `HEAD` or `packed-refs` that
//! git's own rules refuse, and any replacement ref (`refs/replace/`). A `.git` symlink or `gitdir:` file is
//! followed into the same root (and pinned); one naming metadata elsewhere is reported by
//! [`Child::git_unguarded`]. The `.git` of each submodule checkout the host's index lists
//! is kept read-only. Layer 2 cannot do this (see `SECURITY.md`).
//!
//! # Test strategy
//!
//! Containment claims are proven from inside the sandbox: the tests try each escape, assert
//! the errno, and assert that the allowed thing still works. They run as root (re-running
//! themselves as uid 65534) and as an unprivileged user, where the tests that need root
//! print `SKIP … needs root`; `STOCKADE_TEST_REQUIRE=all` turns a skip for a missing kernel
//! feature into a failure, `all,root` any skip.
//!
//! # What is public
//!
//! What a host needs: [`Sandbox`], [`Command`], [`Child`], [`Stdio`], the [`Policy`] and
//! its parts, [`Capabilities`] (for `stockade detect`), [`Sandbox::plan`]'s
//! [`PlanDescription`] and [`macos_profile`] (for `stockade plan`), the in-process guards
//! and the errors ([`error`]). The stages in between (the plan, the probe, the backends)
//! are internal; the `internals` cargo feature makes them public for the crate's own
//! tests, examples and fuzz targets. It is unstable and a host never needs it.
//!
//! # MSRV
//!
//! Rust 1.87 (edition 2024).

pub mod error;
pub mod guard;
pub mod policy;

pub use error::{
    AllowError, Error, GuardError, LandlockBuildError, PlanError, PolicyError, SeccompBuildError,
    SetupStep, SpawnError,
};
pub use guard::leak::{
    Encoding, Finding, Fingerprint, HostPatterns, StreamScanner, scan, scan_stream, scan_with,
};
pub use guard::path::PathGuard;
pub use guard::redact::{RedactingWriter, Redactor};
pub use guard::tools::tools_listing;
pub use guard::url::validate_url;
pub use policy::{ByteSize, Fallback, Layer, Mode, Network, Policy, WorkspaceMode};
// The internal stages of the flow: public only with the unstable `internals` feature, for
// the crate's own tests, examples, benchmarks and fuzz targets.
#[cfg(feature = "internals")]
pub mod backend;
#[cfg(not(feature = "internals"))]
pub(crate) mod backend;
#[cfg(unix)]
pub mod changes;
#[cfg(feature = "internals")]
pub mod plan;
#[cfg(not(feature = "internals"))]
pub(crate) mod plan;
#[cfg(feature = "internals")]
pub mod probe;
#[cfg(not(feature = "internals"))]
pub(crate) mod probe;
#[cfg(unix)]
mod process;
#[cfg(all(test, unix))]
mod test_alloc;
/// The parser of Landlock's audit records, for the fuzz targets (unstable `internals`
/// feature).
#[cfg(all(feature = "internals", target_os = "linux"))]
#[doc(hidden)]
pub use process::audit_fuzzing;
/// The resolution and classification of the paths an explained program names, for the
/// fuzz targets (unstable `internals` feature).
#[cfg(all(feature = "internals", target_os = "linux"))]
#[doc(hidden)]
pub use process::fsview_fuzzing;
/// The `.git` merge's parsers of the bytes a program leaves in `.git`, for the fuzz
/// targets (unstable `internals` feature).
#[cfg(all(feature = "internals", target_os = "linux"))]
pub use process::git_fuzzing;

/// What a sandbox's Landlock ruleset enforces on this kernel
/// ([`Sandbox::landlock_status`]).
#[cfg(target_os = "linux")]
pub use backend::linux::landlock::Status as LandlockStatus;
#[cfg(unix)]
pub use changes::{
    ApplyOptions, ApplyReport, Change, ChangeKind, ChangeSet, ChangesError, EntryType,
};
pub use probe::{Availability, Capabilities, Cause, Feature};
#[cfg(target_os = "linux")]
pub use process::Session;
#[cfg(all(feature = "internals", target_os = "linux"))]
#[doc(hidden)]
pub use process::gitobjects;
#[cfg(unix)]
pub use process::{
    Child, ChildStderr, ChildStdin, ChildStdout, Command, DEFAULT_MAX_LINE, Degradation, Denial,
    GitConfigChange, GitConfigOutcome, GitDrop, GitDropReason, GitUnguarded, GitUnguardedReason,
    Line, LineEnd, LineStream, NestedOutcome, NestedRepository, PlanDescription, PlanEgress,
    PlanListen, PlanNamespaces, Pty, Sandbox, Stdio, Termination, Usage, Wall, cgroup_limits,
    macos_profile,
};
