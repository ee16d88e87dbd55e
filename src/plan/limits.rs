//! The limits a plan applies in the child: per-process rlimits and the per-user-namespace
//! counts of the full layer.
//!
//! A sandbox's whole-sandbox limits (memory, processes, CPU) are a cgroup's, which the
//! process layer makes per command (the backend's `cgroup` module); what the child
//! itself sets is here, plain data like every step.

use crate::policy::{Layer, Policy};

use super::Ids;

/// One resource limit the child sets for itself (and so for the init and the program),
/// never above the hard limit it inherited (raising one needs a privilege the sandbox
/// has not got, and a lower host limit is the stricter one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rlimit {
    /// `RLIMIT_*`.
    pub resource: i32,
    /// The soft limit.
    pub soft: u64,
    /// The hard limit: the soft one, but for `RLIMIT_CPU`, one second more, so that the
    /// kernel's `SIGXCPU` at the soft limit names the cause before its `SIGKILL` (at a
    /// shared limit only the `SIGKILL` comes).
    pub hard: u64,
}

/// The per-user-namespace counts the full layer's setup child writes into its own user
/// namespace's `/proc/sys/user/` (a new namespace starts at `INT_MAX`, bounded only by its
/// parents'): charged to every level up to the host user's, so without them one sandbox
/// can take all of the host user's inotify instances (128 by default) and break the
/// host's own file watchers. With them it takes at most this many.
pub const USER_COUNTS: &[(&str, u32)] =
    &[("max_inotify_instances", 32), ("max_inotify_watches", 8192)];

/// The processes the sandbox's own setup adds to the program's count: its init.
pub const INIT_PROCESSES: u64 = 1;

/// The rlimits `policy` asks for; with `nproc`, `RLIMIT_NPROC` for `processes` as well
/// (see [`processes_bounded_without_cgroup`]).
// `RLIMIT_*` are `u32` in glibc's `libc` and `c_int` in musl's: the casts are not
// redundant everywhere.
#[allow(clippy::unnecessary_cast)]
pub fn rlimits(policy: &Policy, nproc: bool) -> Vec<Rlimit> {
    let l = &policy.limits;
    let mut out = Vec::new();
    let mut push = |resource: u32, value: Option<u64>| {
        if let Some(value) = value {
            let cpu = resource == libc::RLIMIT_CPU as u32;
            out.push(Rlimit {
                resource: resource as i32,
                soft: value,
                hard: if cpu { value.saturating_add(1) } else { value },
            });
        }
    };
    push(
        libc::RLIMIT_CPU as u32,
        l.cpu_time
            .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0)),
    );
    push(libc::RLIMIT_NOFILE as u32, l.open_files);
    push(libc::RLIMIT_FSIZE as u32, l.file_size.map(|s| s.bytes()));
    push(libc::RLIMIT_CORE as u32, (!l.core_dumps).then_some(0));
    if nproc {
        push(
            libc::RLIMIT_NPROC as u32,
            l.processes.map(|n| n.saturating_add(INIT_PROCESSES)),
        );
    }
    out
}

/// Whether the plan of `layer` for a caller with `ids` bounds `processes` by itself,
/// without a cgroup: `RLIMIT_NPROC` stands in for `processes` only on the full layer of a
/// host that is not root. Since Linux 5.14 it counts the processes of the caller's uid
/// *in its own user namespace*, so it bounds the sandbox alone; without a user namespace
/// it would count every process of the host user, and for root (global uid 0) the kernel
/// never applies it.
pub fn processes_bounded_without_cgroup(layer: Layer, ids: Ids) -> bool {
    layer == Layer::Full && !ids.host_root
}
