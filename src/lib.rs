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
//!   what may be seen         probes the kernel once      builds a Plan: every path,      std's builder API; spawn()
//!   and written               (Capabilities report)      CString, BPF program and        returns a Child with a pidfd
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
//! 1. `full`: user, mount, pid, ipc and uts namespaces (net with `network = "none"`), a
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
//! # PID 1
//!
//! The program runs as PID 1 of its PID namespace, as under Docker by default: no process
//! of stockade's stays inside (a forked helper would hold the host's memory and
//! environment). PID 1 receives only the signals it installed handlers for, apart from
//! `SIGKILL` and `SIGSTOP`, so [`Child::kill`] ends it and, with it, every process in the
//! namespace. Orphans are re-parented to the program; shells reap them, other programs may
//! leave zombies until they exit.
//!
//! # Test strategy
//!
//! Containment claims are proven from inside the sandbox: the tests try each escape, assert
//! the errno, and assert that the allowed thing still works. They run as root and as an
//! unprivileged user; `STOCKADE_TEST_REQUIRE=all` turns every skip into a failure.
//!
//! # MSRV
//!
//! Rust 1.85 (edition 2024).

pub mod error;
pub mod guard;
pub mod policy;

pub use error::{
    Error, GuardError, LandlockBuildError, PlanError, PolicyError, SeccompBuildError, SpawnError,
};
pub use guard::leak::{Encoding, Finding, Fingerprint, StreamScanner, scan, scan_stream};
pub use guard::path::PathGuard;
pub use guard::redact::{RedactingWriter, Redactor};
pub use guard::tools::tools_listing;
pub use guard::url::validate_url;
pub use policy::{ByteSize, Fallback, Layer, Mode, Network, Policy};
pub mod backend;
pub mod plan;
pub mod probe;
#[cfg(unix)]
mod spawn;

pub use probe::{Availability, Capabilities};
#[cfg(unix)]
pub use spawn::{
    Child, ChildStderr, ChildStdin, ChildStdout, Command, Degradation, Sandbox, Stdio,
};
