//! One run's limits on the host's side: its cgroup (Linux, where the host may use one), its
//! wall-time timer, and at its end how it ended ([`Termination`]) and what it used
//! ([`Usage`]).
//!
//! The child's own limits (rlimits, the per-user-namespace counts) are plan steps; what is
//! here needs the host: a cgroup is made before the clone and joined by the setup child as
//! its first step, the timer runs on the host's watchdog thread, and the figures are read
//! once every process of the sandbox is gone.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::policy::{ByteSize, Limits, ShownDuration};

use super::watchdog;

/// How a run ended, and whether one of its limits ended it ([`Child::termination`](crate::Child::termination)).
///
/// [`Child::wait`](crate::Child::wait) keeps std's `ExitStatus`: a limit that kills shows there as
/// `SIGKILL` (or `SIGXCPU`, `SIGXFSZ`), and this says which limit it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Termination {
    /// The program exited with this code.
    Exited(i32),
    /// The program died of this signal, not for a limit.
    Signaled(i32),
    /// `wall_time` passed: every process of the sandbox was killed.
    WallTime(Duration),
    /// The sandbox reached its `memory` limit and the kernel's OOM killer ended a process
    /// of it, and the run did not succeed.
    Memory(ByteSize),
    /// `fork` failed at the `processes` limit during the run, and the run did not succeed.
    Processes(u64),
    /// A process used up its `cpu_time` (`SIGXCPU`).
    CpuTime(Duration),
    /// A process wrote past `file_size` (`SIGXFSZ`).
    FileSize(ByteSize),
}

impl Termination {
    /// Whether a limit ended the run.
    pub fn by_limit(&self) -> bool {
        !matches!(self, Termination::Exited(_) | Termination::Signaled(_))
    }
}

impl fmt::Display for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Termination::Exited(code) => write!(f, "exited with {code}"),
            Termination::Signaled(sig) => write!(f, "killed by signal {sig}"),
            Termination::WallTime(d) => write!(f, "wall time {} reached", ShownDuration(*d)),
            Termination::Memory(m) => write!(f, "memory limit {m} reached"),
            Termination::Processes(n) => write!(f, "process limit {n} reached"),
            Termination::CpuTime(d) => write!(f, "CPU time limit {} reached", ShownDuration(*d)),
            Termination::FileSize(s) => write!(f, "file size limit {s} reached"),
        }
    }
}

/// What a whole run used ([`Child::usage`](crate::Child::usage)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// From the spawn until a wait saw the sandbox's end ([`Child::wait`](crate::Child::wait),
    /// `try_wait`): a host that waits late counts its own delay too.
    pub wall_time: Duration,
    /// User CPU time of every process of the sandbox.
    pub user_cpu: Duration,
    /// System CPU time of every process of the sandbox.
    pub system_cpu: Duration,
    /// Peak memory in bytes: of the whole sandbox at once with a cgroup
    /// ([`Usage::from_cgroup`]), else the largest resident set of any one process.
    pub peak_memory: Option<u64>,
    /// Processes the kernel's OOM killer ended (cgroup only; 0 without one).
    pub oom_kills: u64,
    /// Times `fork` failed at the `processes` limit (cgroup only; 0 without one).
    pub process_limit_hits: u64,
    /// The figures are the sandbox's cgroup's (else the init's `rusage`, which counts
    /// every process reaped by a wait in the sandbox: a lower bound, since a process the
    /// kernel reaps by itself, its parent ignoring `SIGCHLD`, adds nothing, so a program
    /// can hide CPU time from it).
    pub from_cgroup: bool,
}

/// One run's limits, from its spawn to its end.
#[derive(Debug)]
pub(super) struct Run {
    started: Instant,
    limits: Limits,
    timer: Option<watchdog::Timer>,
    #[cfg(target_os = "linux")]
    leaf: Option<crate::backend::linux::cgroup::Leaf>,
    /// The init's `rusage`, stored by whoever reaps it (the wait, or the reaper of
    /// inits waited for: `reap.rs`).
    pub(super) rusage: RusageSlot,
    /// Set, under its lock, when the program's own pid is reaped (no init: passthrough
    /// elsewhere than Linux), so that the watchdog never signals a reused pid.
    pub(super) reaped: Arc<Mutex<bool>>,
    end: Option<(Termination, Usage)>,
}

/// Where the `rusage` of a reaped init lands.
pub(super) type RusageSlot = Arc<Mutex<Option<libc::rusage>>>;

impl Run {
    /// A run of `limits` starting now, in `leaf` when there is one.
    #[cfg(target_os = "linux")]
    pub(super) fn new(limits: &Limits, leaf: Option<crate::backend::linux::cgroup::Leaf>) -> Run {
        Run {
            started: Instant::now(),
            limits: limits.clone(),
            timer: None,
            leaf,
            rusage: Arc::default(),
            reaped: Arc::default(),
            end: None,
        }
    }

    /// A run of `limits` starting now.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn new(limits: &Limits) -> Run {
        Run {
            started: Instant::now(),
            limits: limits.clone(),
            timer: None,
            rusage: Arc::default(),
            reaped: Arc::default(),
            end: None,
        }
    }

    /// The fds of `cgroup.procs` of the run's cgroup, which the setup child writes its
    /// own pid to first.
    #[cfg(target_os = "linux")]
    pub(super) fn join_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.leaf.as_ref().map(|l| l.join_fds()).unwrap_or_default()
    }

    /// Whether the run has a wall-time limit, for which [`Run::started`] arms the watchdog.
    pub(super) fn has_wall_time(&self) -> bool {
        self.limits.wall_time.is_some()
    }

    /// Arms the wall-time limit, if any, with `end` as the way to end the sandbox.
    ///
    /// # Errors
    ///
    /// The error of starting the watchdog's thread.
    pub(super) fn started(&mut self, end: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let Some(limit) = self.limits.wall_time else {
            return Ok(());
        };
        // Only the init's kill, which sends and returns: the one watchdog thread serves
        // every sandbox, so it must not wait for one to empty. What the kill cannot reach
        // (layer 2's processes that left the program's tree) the cgroup's `kill_all`
        // ends when the run is finished or its cgroup removed.
        self.timer = Some(watchdog::arm(self.started, limit, Box::new(end))?);
        Ok(())
    }

    /// Ends every process of the run's cgroup, if it has one (after the init's kill).
    pub(super) fn kill_all(&self) {
        #[cfg(target_os = "linux")]
        if let Some(leaf) = &self.leaf {
            let _ = leaf.kill_all();
        }
    }

    /// Whether the run still needs its sandbox's end to be awaited by [`Run::finish`]
    /// (a cgroup to read and remove, a timer to stop).
    pub(super) fn needs_finish(&self) -> bool {
        #[cfg(target_os = "linux")]
        if self.leaf.is_some() {
            return true;
        }
        self.timer.is_some()
    }

    /// Records the run's end, once every process of the sandbox is gone (`gone`: that
    /// could be awaited): stops the timer, reads the cgroup's figures and removes it,
    /// and tells how the run ended from `status`.
    pub(super) fn finish(&mut self, status: std::process::ExitStatus, gone: bool) {
        use std::os::unix::process::ExitStatusExt;
        if self.end.is_some() {
            return;
        }
        let wall_time = self.started.elapsed();
        if let Some(t) = &self.timer {
            t.disarm();
        }
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut usage = Usage {
            wall_time,
            ..Usage::default()
        };
        #[cfg(target_os = "linux")]
        if let Some(leaf) = self.leaf.take() {
            if !gone {
                let _ = leaf.kill_all();
            }
            let u = leaf.usage();
            let e = leaf.events();
            usage.user_cpu = u.user_cpu.unwrap_or_default();
            usage.system_cpu = u.system_cpu.unwrap_or_default();
            usage.peak_memory = u.peak_memory;
            usage.oom_kills = e.oom_kills;
            usage.process_limit_hits = e.process_limit_hits;
            usage.from_cgroup = true;
            leaf.remove();
        }
        let _ = gone;
        let failed = status.code() != Some(0);
        let l = &self.limits;
        // A timer that fired after the program had ended on its own (a host that waits
        // late: the watchdog's kill then reaches a sandbox already gone) did not end it:
        // only a run that died of the watchdog's `SIGKILL` ran out of its time.
        let killed = status.signal() == Some(libc::SIGKILL);
        let termination = if killed && self.timer.as_ref().is_some_and(watchdog::Timer::fired) {
            Termination::WallTime(
                self.timer
                    .as_ref()
                    .map_or(wall_time, watchdog::Timer::limit),
            )
        } else if let (true, true, Some(m)) = (failed, usage.oom_kills > 0, l.memory) {
            Termination::Memory(m)
        } else if let (true, true, Some(n)) = (failed, usage.process_limit_hits > 0, l.processes) {
            Termination::Processes(n)
        } else {
            match (status.code(), status.signal()) {
                (Some(code), _) => Termination::Exited(code),
                (None, Some(libc::SIGXCPU)) if l.cpu_time.is_some() => {
                    Termination::CpuTime(l.cpu_time.unwrap_or_default())
                }
                (None, Some(libc::SIGXFSZ)) if l.file_size.is_some() => {
                    Termination::FileSize(l.file_size.unwrap_or(ByteSize(0)))
                }
                (None, Some(sig)) => Termination::Signaled(sig),
                (None, None) => Termination::Signaled(0),
            }
        };
        self.end = Some((termination, usage));
    }

    /// The host dropped the run's `Child` before waiting: the program runs on (as
    /// std's), and so its cgroup must stay, with its limits, until the sandbox has ended
    /// (`pidfd`: its init's, a duplicate), then go. A thread waits for that; without one
    /// (the thread cannot start) the cgroup goes now, and every process in it with it.
    #[cfg(target_os = "linux")]
    pub(super) fn detach(&mut self, pidfd: std::io::Result<std::os::fd::OwnedFd>) {
        let Some(leaf) = self.leaf.take() else {
            return;
        };
        let Ok(pidfd) = pidfd else {
            tracing::warn!("stockade: a dropped command's cgroup cannot outlive it: ending it");
            return leaf.remove();
        };
        let (tx, rx) = std::sync::mpsc::channel::<crate::backend::linux::cgroup::Leaf>();
        let spawned = std::thread::Builder::new()
            .name("stockade-cgroup-remove".into())
            .spawn(move || {
                let Ok(leaf) = rx.recv() else { return };
                let _ = crate::backend::linux::init::wait_exited(std::os::fd::AsFd::as_fd(&pidfd));
                leaf.remove();
            });
        match spawned {
            // The thread owns the cgroup from here; it cannot fail to receive it.
            Ok(_) => {
                let _ = tx.send(leaf);
            }
            Err(e) => {
                tracing::warn!(
                    "stockade: a dropped command's cgroup cannot outlive it ({e}): ending it"
                );
                leaf.remove();
            }
        }
    }

    /// How the run ended, once [`Run::finish`] has recorded it.
    pub(super) fn termination(&self) -> Option<Termination> {
        self.end.map(|(t, _)| t)
    }

    /// What the run used, once [`Run::finish`] has recorded it; without a cgroup, the CPU
    /// time and peak memory come from the init's `rusage` when it has been reaped.
    pub(super) fn usage(&self) -> Option<Usage> {
        let (_, mut usage) = self.end?;
        if !usage.from_cgroup {
            let slot = self.rusage.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(r) = slot.as_ref() {
                usage.user_cpu = timeval(r.ru_utime);
                usage.system_cpu = timeval(r.ru_stime);
                usage.peak_memory = Some(maxrss_bytes(r.ru_maxrss));
            }
        }
        Some(usage)
    }
}

fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

/// `ru_maxrss` in bytes: kibibytes on Linux, bytes on macOS.
fn maxrss_bytes(v: libc::c_long) -> u64 {
    let v = v.max(0) as u64;
    if cfg!(target_os = "macos") {
        v
    } else {
        v * 1024
    }
}

/// What a prepared policy's limits need from the host, decided once when the sandbox's
/// state is made ([`super::sandbox`]): whether its commands get a cgroup.
#[derive(Debug, Default)]
pub(super) struct Enforcement {
    /// The cgroup hierarchies each command gets a leaf in, when the policy has limits of
    /// the whole sandbox and the host may use cgroups.
    #[cfg(target_os = "linux")]
    cgroups: Option<&'static crate::backend::linux::cgroup::Cgroups>,
    limits: Limits,
}

/// The whole-sandbox limits of `l` that `unbounded` leaves without a wall, as the policy
/// writes them: `memory 2GiB, cpu 1.5`.
fn listed(l: &Limits, processes: bool) -> String {
    let mut out = Vec::new();
    if let Some(m) = l.memory {
        out.push(format!("memory {m}"));
    }
    if let (true, Some(n)) = (processes, l.processes) {
        out.push(format!("processes {n}"));
    }
    if let Some(c) = l.cpu {
        out.push(format!("cpu {c}"));
    }
    out.join(", ")
}

impl Enforcement {
    /// Decides how `policy`'s limits hold on `plan`'s layer.
    /// `Ok` with a reason when some of them will not (the sandbox runs degraded, which
    /// [`Sandbox::degradation`](crate::Sandbox::degradation) lists).
    ///
    /// # Errors
    ///
    /// [`PlanError::LimitsUnavailable`](crate::PlanError::LimitsUnavailable) when some
    /// would not hold and the policy refuses to degrade.
    pub(super) fn decide(
        policy: &crate::Policy,
        plan: &crate::plan::Plan,
    ) -> Result<(Enforcement, Option<String>), crate::error::PlanError> {
        let limits = policy.limits.clone();
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut enforcement = Enforcement {
            limits: limits.clone(),
            #[cfg(target_os = "linux")]
            cgroups: None,
        };
        if !limits.wants_cgroup() {
            return Ok((enforcement, None));
        }
        #[cfg(target_os = "linux")]
        let reason = match cgroups(&limits) {
            Ok(c) => {
                enforcement.cgroups = Some(c);
                return Ok((enforcement, None));
            }
            Err(reason) => reason,
        };
        #[cfg(not(target_os = "linux"))]
        let reason = no_cgroups();
        let unbounded = listed(&limits, !plan.bounds_processes());
        if unbounded.is_empty() {
            return Ok((enforcement, None));
        }
        if policy.fallback == crate::Fallback::Refuse {
            return Err(crate::error::PlanError::LimitsUnavailable {
                limits: unbounded,
                reason,
            });
        }
        let (noun, verb) = if unbounded.contains(',') {
            ("limits", "are")
        } else {
            ("limit", "is")
        };
        let message = format!("{noun} {unbounded} {verb} not enforced: {reason}");
        tracing::warn!("stockade: {message}");
        Ok((enforcement, Some(message)))
    }

    /// A run of these limits starting now: with a cgroup of its own when the sandbox
    /// has them.
    ///
    /// # Errors
    ///
    /// [`SpawnError::Os`](crate::SpawnError::Os) when the cgroup cannot be made.
    pub(super) fn run(&self) -> Result<Run, crate::error::SpawnError> {
        #[cfg(target_os = "linux")]
        {
            let leaf = match self.cgroups {
                Some(c) => {
                    let l = &self.limits;
                    let wanted = crate::backend::linux::cgroup::Wanted {
                        memory: l.memory.map(ByteSize::bytes),
                        processes: l
                            .processes
                            .map(|n| n.saturating_add(crate::plan::INIT_PROCESSES)),
                        cpu: l.cpu,
                    };
                    let leaf =
                        c.create(&wanted)
                            .map_err(|source| crate::error::SpawnError::Os {
                                call: "make the sandbox's cgroup",
                                source,
                            })?;
                    Some(leaf)
                }
                None => None,
            };
            Ok(Run::new(&self.limits, leaf))
        }
        #[cfg(not(target_os = "linux"))]
        Ok(Run::new(&self.limits))
    }
}

/// Whether this process's sandboxes can hold their whole-sandbox limits (`memory`,
/// `processes`, `cpu`) through a cgroup of their own, each one on its own: for `stockade
/// detect`. `processes` holds on the full layer of a host that is not root without one
/// (see [`Limits::processes`]).
pub fn cgroup_limits() -> [(&'static str, crate::Availability); 3] {
    let probe = |memory: bool, processes: bool, cpu: bool| {
        let l = Limits {
            memory: memory.then_some(ByteSize(1 << 30)),
            processes: processes.then_some(64),
            cpu: cpu.then_some(1.0),
            ..Limits::default()
        };
        #[cfg(target_os = "linux")]
        let r = cgroups(&l).map(drop);
        #[cfg(not(target_os = "linux"))]
        let r = {
            let _ = l;
            Err::<(), String>(no_cgroups())
        };
        match r {
            Ok(()) => crate::Availability::yes(),
            Err(reason) => crate::Availability::no(reason),
        }
    };
    [
        ("memory", probe(true, false, false)),
        ("processes", probe(false, true, false)),
        ("cpu", probe(false, false, true)),
    ]
}

/// The cgroups this process may use for `limits`, discovered once per process; else why
/// not.
#[cfg(target_os = "linux")]
fn cgroups(limits: &Limits) -> Result<&'static crate::backend::linux::cgroup::Cgroups, String> {
    use crate::backend::linux::cgroup::{Cgroups, Wanted};
    static FOUND: std::sync::OnceLock<Result<Cgroups, String>> = std::sync::OnceLock::new();
    let c = FOUND
        .get_or_init(Cgroups::discover)
        .as_ref()
        .map_err(Clone::clone)?;
    c.check(&Wanted {
        memory: limits.memory.map(ByteSize::bytes),
        processes: limits.processes,
        cpu: limits.cpu,
    })?;
    Ok(c)
}

/// Why there are no cgroups here.
#[cfg(not(target_os = "linux"))]
fn no_cgroups() -> String {
    format!(
        "limits of a whole sandbox need Linux cgroups, which {} has not got",
        std::env::consts::OS
    )
}
