//! One sandbox's leaf cgroups: the fds to join them, the kill, the usage and limit
//! events, and their removal.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{CgroupFs, Place, Version, failed, proc};

/// What the whole sandbox used so far; `None` where the hierarchy is not there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// The most memory (with swap, where it is accounted) in use at once, in bytes.
    pub peak_memory: Option<u64>,
    /// CPU time in user mode.
    pub user_cpu: Option<Duration>,
    /// CPU time in the kernel.
    pub system_cpu: Option<Duration>,
}

/// How often the limits were hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Events {
    /// Processes the OOM killer killed in the leaf.
    pub oom_kills: u64,
    /// Forks refused because `pids.max` was reached.
    pub process_limit_hits: u64,
}

/// One sandbox's cgroup: one leaf per hierarchy on v1, one on v2. Dropping it removes
/// it, as [`Leaf::remove`] does.
#[derive(Debug)]
pub struct Leaf {
    fs: Arc<dyn CgroupFs>,
    version: Version,
    /// The leaves, in the order they were made.
    pub(super) parts: Vec<Place>,
    /// Each leaf's `cgroup.procs`, open for writing.
    pub(super) procs: Vec<OwnedFd>,
    /// v2: the leaf's directory, `O_PATH`.
    pub(super) dir: Option<OwnedFd>,
    /// Whether the memory limit covers swap too.
    pub(super) swap_included: bool,
}

/// How long [`Leaf::kill_all`] keeps signalling a v1 leaf before it gives up.
const KILL_FOR: Duration = Duration::from_secs(2);
/// How long `rmdir` is retried on `EBUSY` (a process that is still exiting).
const RMDIR_FOR: Duration = Duration::from_millis(200);
/// The pause between two tries.
const PAUSE: Duration = Duration::from_millis(2);

/// The pid of the host that made leaf `name` (`stockade-<pid>-<seq>`).
pub(super) fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("stockade-")?;
    let (pid, seq) = rest.split_once('-')?;
    seq.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// The number after `key` in a `key value` line of `text` (`oom_kill 3`).
pub(super) fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

impl Leaf {
    /// An empty leaf, for [`super::Cgroups`] to fill.
    pub(super) fn new(fs: Arc<dyn CgroupFs>, version: Version) -> Leaf {
        Leaf {
            fs,
            version,
            parts: Vec::new(),
            procs: Vec::new(),
            dir: None,
            swap_included: false,
        }
    }

    /// Which interface this leaf uses.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn version(&self) -> Version {
        self.version
    }

    /// `cgroup.procs` of every leaf, open `O_WRONLY | O_CLOEXEC` in this process. The
    /// setup child writes `b"0"` (itself) to each as its first step; they stay open until
    /// the leaf is removed.
    pub fn join_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// v2: the leaf's directory, `O_PATH | O_DIRECTORY`, for `CLONE_INTO_CGROUP`; `None`
    /// on v1.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn dir_fd(&self) -> Option<BorrowedFd<'_>> {
        self.dir.as_ref().map(AsFd::as_fd)
    }

    /// The leaves' directories.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn dirs(&self) -> Vec<&std::path::Path> {
        self.parts.iter().map(|p| p.dir.as_path()).collect()
    }

    /// Whether the memory limit covers memory and swap together (v1 with swap
    /// accounting, v2 with `memory.swap.max`); without it swap is not limited.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn swap_included(&self) -> bool {
        self.swap_included
    }

    /// The leaf of the hierarchy with `controller` (v2: the one leaf).
    fn part(&self, controller: &str) -> Option<&Place> {
        match self.version {
            Version::V2 => self.parts.first(),
            Version::V1 => self
                .parts
                .iter()
                .find(|p| p.controllers.iter().any(|c| c == controller)),
        }
    }

    /// The number read from `file` of the leaf of `controller`.
    fn number(&self, controller: &str, file: &str) -> Option<u64> {
        let p = self.part(controller)?;
        self.fs.read(&p.dir.join(file)).ok()?.trim().parse().ok()
    }

    /// The `key` field of `file` of the leaf of `controller`.
    fn keyed(&self, controller: &str, file: &str, key: &str) -> Option<u64> {
        let p = self.part(controller)?;
        field(&self.fs.read(&p.dir.join(file)).ok()?, key)
    }

    /// The memory peak, user and system CPU time of the whole sandbox so far.
    pub fn usage(&self) -> Usage {
        match self.version {
            Version::V1 => {
                let peak = if self.swap_included {
                    "memory.memsw.max_usage_in_bytes"
                } else {
                    "memory.max_usage_in_bytes"
                };
                // `cpuacct.usage_user` and `usage_sys` are sampled at the tick and can miss
                // half of the time of busy processes (seen here: 0.8 s of 1.8 s);
                // `cpuacct.usage` is the scheduler's exact total. So the total is that,
                // split as the samples split it (as the kernel does for a task's times).
                let ns = |f| self.number("cpuacct", f);
                let (user, sys) = split_total(
                    ns("cpuacct.usage"),
                    ns("cpuacct.usage_user"),
                    ns("cpuacct.usage_sys"),
                );
                Usage {
                    peak_memory: self.number("memory", peak),
                    user_cpu: user.map(Duration::from_nanos),
                    system_cpu: sys.map(Duration::from_nanos),
                }
            }
            Version::V2 => {
                let us = |k| self.keyed("cpu", "cpu.stat", k).map(Duration::from_micros);
                Usage {
                    peak_memory: self.number("memory", "memory.peak"),
                    user_cpu: us("user_usec"),
                    system_cpu: us("system_usec"),
                }
            }
        }
    }

    /// The OOM kills and the forks refused by the process limit so far.
    pub fn events(&self) -> Events {
        let oom = match self.version {
            Version::V1 => self.keyed("memory", "memory.oom_control", "oom_kill"),
            Version::V2 => self.keyed("memory", "memory.events", "oom_kill"),
        };
        Events {
            oom_kills: oom.unwrap_or(0),
            process_limit_hits: self.keyed("pids", "pids.events", "max").unwrap_or(0),
        }
    }

    /// Kills every process in the leaf. v2 writes `cgroup.kill`; v1 (and a v2 kernel
    /// without `cgroup.kill`) reads `cgroup.procs` of each leaf, pins each pid with a
    /// pidfd, checks in `/proc/<pid>/cgroup` that it is still in the leaf and signals it
    /// through the pidfd (so a reused pid is never hit), until every leaf is empty.
    ///
    /// # Errors
    ///
    /// A read or signal that failed, or `EBUSY` when a leaf still has processes after
    /// two seconds of tries.
    pub fn kill_all(&self) -> io::Result<()> {
        if self.version == Version::V2 {
            if let Some(p) = self.parts.first() {
                let kill = p.dir.join("cgroup.kill");
                match self.fs.write(&kill, b"1") {
                    Ok(()) => return self.wait_empty(),
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(failed("write \"1\" to", &kill, &e)),
                }
            }
        }
        let start = Instant::now();
        loop {
            let mut left = false;
            for p in &self.parts {
                for pid in self.pids(p)? {
                    left = true;
                    let still_in = || {
                        self.fs.pid_cgroup(pid).is_ok_and(|t| {
                            proc::is_member(&t, &p.controllers, std::path::Path::new(&p.cgroup))
                        })
                    };
                    self.fs
                        .kill_pinned(pid, &still_in)
                        .map_err(|e| failed(&format!("kill {pid} in"), &p.dir, &e))?;
                }
            }
            if !left {
                return Ok(());
            }
            if start.elapsed() > KILL_FOR {
                return Err(self.busy());
            }
            std::thread::sleep(PAUSE);
        }
    }

    /// Waits (briefly) until no leaf lists a process.
    fn wait_empty(&self) -> io::Result<()> {
        let start = Instant::now();
        loop {
            let mut left = false;
            for p in &self.parts {
                left |= !self.pids(p)?.is_empty();
            }
            if !left {
                return Ok(());
            }
            if start.elapsed() > KILL_FOR {
                return Err(self.busy());
            }
            std::thread::sleep(PAUSE);
        }
    }

    /// The error of a leaf that would not empty.
    fn busy(&self) -> io::Error {
        let dir = self
            .parts
            .first()
            .map(|p| p.dir.clone())
            .unwrap_or_default();
        failed(
            "kill every process in",
            &dir,
            &io::Error::from_raw_os_error(libc::EBUSY),
        )
    }

    /// The pids in leaf `p` (a leaf already gone has none).
    fn pids(&self, p: &Place) -> io::Result<Vec<u32>> {
        let path = p.dir.join("cgroup.procs");
        match self.fs.read(&path) {
            Ok(t) => Ok(t
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(Vec::new()),
            Err(e) => Err(failed("read", &path, &e)),
        }
    }

    /// Kills what is left, then removes every leaf, retrying on `EBUSY` (a process still
    /// exiting); a leaf that still cannot be removed gets one more kill and try, and is
    /// then left with a warning. Never panics.
    pub fn remove(mut self) {
        self.teardown();
    }

    /// [`Leaf::remove`]'s work; a second call does nothing.
    fn teardown(&mut self) {
        if self.parts.is_empty() {
            return;
        }
        self.procs.clear();
        self.dir = None;
        if let Err(e) = self.kill_all() {
            tracing::debug!("before removing the cgroup: {e}");
        }
        let mut left: Vec<Place> = std::mem::take(&mut self.parts)
            .into_iter()
            .rev()
            .filter_map(|p| self.rmdir(&p).err().map(|_| p))
            .collect();
        if left.is_empty() {
            return;
        }
        self.parts = std::mem::take(&mut left);
        let _ = self.kill_all();
        for p in std::mem::take(&mut self.parts) {
            if let Err(e) = self.rmdir(&p) {
                tracing::warn!("stockade left the cgroup {} behind: {e}", p.dir.display());
            }
        }
    }

    /// `rmdir` of leaf `p`, retried on `EBUSY` for [`RMDIR_FOR`]; a leaf already gone
    /// counts as removed.
    fn rmdir(&self, p: &Place) -> io::Result<()> {
        let start = Instant::now();
        loop {
            match self.fs.rmdir(&p.dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < RMDIR_FOR => {
                    std::thread::sleep(PAUSE);
                }
                Err(e) => return Err(failed("rmdir", &p.dir, &e)),
            }
        }
    }
}

/// User and system time from an exact `total` and sampled `user` and `sys`: the total
/// split in the samples' proportion (all user time when nothing was sampled); the samples
/// alone without a total.
fn split_total(
    total: Option<u64>,
    user: Option<u64>,
    sys: Option<u64>,
) -> (Option<u64>, Option<u64>) {
    let Some(total) = total else {
        return (user, sys);
    };
    let (u, s) = (u128::from(user.unwrap_or(0)), u128::from(sys.unwrap_or(0)));
    if u + s == 0 {
        return (Some(total), Some(0));
    }
    // At most `total`: the quotient of total * u by at least u.
    let user = (u128::from(total) * u / (u + s)) as u64;
    (Some(user), Some(total - user))
}

impl Drop for Leaf {
    fn drop(&mut self) {
        self.teardown();
    }
}

#[cfg(test)]
mod split_tests {
    use super::split_total;

    #[test]
    fn the_exact_total_is_split_as_the_samples_are() {
        assert_eq!(
            split_total(Some(1800), Some(400), Some(400)),
            (Some(900), Some(900))
        );
        assert_eq!(
            split_total(Some(1000), Some(0), Some(0)),
            (Some(1000), Some(0))
        );
        assert_eq!(split_total(None, Some(3), Some(4)), (Some(3), Some(4)));
        // No overflow at the extremes, and the parts add up.
        let (u, s) = split_total(Some(u64::MAX), Some(u64::MAX), Some(1));
        assert_eq!(u.unwrap().checked_add(s.unwrap()), Some(u64::MAX));
        let (u, s) = split_total(Some(10), Some(1), Some(2));
        assert_eq!(u.unwrap() + s.unwrap(), 10);
    }
}
