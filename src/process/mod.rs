//! The host-facing API: [`Sandbox`], [`Command`], [`Child`], mirroring `std::process`.
//!
//! A host ports its code by creating the command from a sandbox instead of with
//! `std::process::Command::new`, and by taking [`Stdio`] from this crate: everything else
//! (args, env, current_dir, spawn / output / status, wait, kill, piped handles) reads the
//! same. Exit statuses and outputs are std's own types.
//!
//! The files follow one command's life: [`Sandbox`] (`sandbox.rs`: the policy, the layer
//! chosen for it, the prepared plan), [`Command`] (`command.rs`: the builder and one spawn
//! attempt, with the data dir's pin checked (`data_dir.rs`) and layer 2's private
//! `TMPDIR` made (`tmp.rs`)), the platform's launcher, then [`Child`] (`child.rs`: wait,
//! kill, signal; `asynchronous.rs` with the `tokio` feature), and `stream.rs`: its output
//! as redacted, scanned lines ([`LineStream`]).

#[cfg(all(feature = "tokio", target_os = "linux"))]
mod asynchronous;
#[cfg(target_os = "linux")]
pub(crate) mod audit;
pub(crate) mod changeset;
mod child;
mod command;
mod data_dir;
mod denial;
mod describe;
#[cfg(unix)]
mod egress;
mod env;
#[cfg(target_os = "linux")]
mod explain;
#[cfg(target_os = "linux")]
mod fsview;
/// Elsewhere no filter notifies: an explained run has nothing of its own to report.
#[cfg(not(target_os = "linux"))]
mod explain {
    /// An explained run (never made here).
    #[derive(Debug)]
    pub(crate) enum Run {}
    impl Run {
        pub(crate) fn denials(&self, _ended: bool) -> Vec<super::Denial> {
            match *self {}
        }
    }
}
mod gitlayer;
#[cfg(target_os = "linux")]
pub(crate) use gitlayer::merge::merge_git_upper;
mod limits;
/// The change set's marker file, which the runs write and `crate::changes` reads.
pub(crate) mod marker;
pub(crate) mod names;
mod nested;
mod pty;
#[cfg(target_os = "linux")]
mod rmtree;
mod sandbox;
#[cfg(target_os = "linux")]
mod session;
pub(crate) mod snapshot;
mod stdio;
mod stream;
/// Elsewhere: std's removal (recursive).
#[cfg(not(target_os = "linux"))]
mod rmtree {
    pub(crate) fn remove_tree(path: &std::path::Path) -> std::io::Result<()> {
        std::fs::remove_dir_all(path)
    }
}
mod tmp;
mod unhidden;
mod watchdog;

// The launcher is the one part that differs between systems; both modules offer the
// same items (see `launch_linux`). Linux clones and replays its plan; macOS and the other
// Unix systems fork, and on macOS the child enters the Seatbelt sandbox before `execve`.
// The fork launcher also builds on Linux for unit tests, which run it there without
// `sandbox_init`.
#[cfg(any(test, not(target_os = "linux")))]
mod launch_fork;
#[cfg(target_os = "linux")]
mod launch_linux;
#[cfg(target_os = "linux")]
mod reap;

#[cfg(not(target_os = "linux"))]
use launch_fork as launch;
#[cfg(target_os = "linux")]
use launch_linux as launch;

pub use crate::plan::Degradation;
pub use child::Child;
pub use command::Command;
pub use denial::{Denial, Wall};
pub use describe::{PlanDescription, PlanEgress, PlanListen, PlanNamespaces, macos_profile};
/// The lexical resolution and classification of explained paths (for fuzzing).
#[cfg(all(feature = "internals", target_os = "linux"))]
#[doc(hidden)]
pub use fsview::fuzzing as fsview_fuzzing;
#[cfg(all(feature = "internals", target_os = "linux"))]
pub use gitlayer::merge::fuzzing as git_fuzzing;
/// Git's object formats as the merge of the `.git` layer reads them (for fuzzing).
#[cfg(all(feature = "internals", target_os = "linux"))]
#[doc(hidden)]
pub use gitlayer::merge::objects as gitobjects;
/// The parser of Landlock's audit records (for fuzzing).
#[cfg(all(feature = "internals", target_os = "linux"))]
#[doc(hidden)]
pub mod audit_fuzzing {
    /// Parses one record of netlink type `kind` and describes it as a report would;
    /// whether it parsed. Never panics.
    /// Splits a netlink datagram into its messages as the tap does, and parses each of
    /// the Landlock ones: how many messages it held. Never panics.
    pub fn datagram(d: &[u8]) -> usize {
        let mut n = 0;
        for (kind, text) in super::audit::frames(d) {
            n += 1;
            let _ = parse(kind, text);
        }
        n
    }

    pub fn parse(kind: u16, text: &[u8]) -> bool {
        match super::audit::parse(kind, text) {
            Some(super::audit::Record::Access {
                blockers, object, ..
            }) => {
                let _ = super::audit::describe(&blockers, object.as_deref(), 1);
                true
            }
            Some(_) => true,
            None => false,
        }
    }
}
pub use gitlayer::{
    GitConfigChange, GitConfigOutcome, GitDrop, GitDropReason, GitUnguarded, GitUnguardedReason,
};
pub use limits::{Termination, Usage, cgroup_limits};
pub use nested::{NestedOutcome, NestedRepository};
pub use pty::Pty;
pub use sandbox::Sandbox;
#[cfg(target_os = "linux")]
pub use session::Session;
pub use stdio::{ChildStderr, ChildStdin, ChildStdout, Stdio};
pub use stream::{DEFAULT_MAX_LINE, Line, LineEnd, LineStream};

use command::Request;
pub(crate) use command::StartError;
