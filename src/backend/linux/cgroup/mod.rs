//! A leaf cgroup per sandbox: memory (swap included), process and CPU limits, the kill of
//! the whole sandbox, its usage and the limits it hit.
//!
//! [`Cgroups::discover`] reads `/proc/self/cgroup` and `/proc/self/mountinfo` once and
//! decides which hierarchies this process may use; [`Cgroups::create`] makes a [`Leaf`]
//! named `stockade-<host pid>-<seq>`, writes its limits and opens the `cgroup.procs` fds
//! that the setup child writes `0` ("the writer") to as its first step, before the program
//! runs; [`Leaf::remove`] (or its drop) kills what is left and removes it. Every kernel-facing
//! step goes through [`CgroupFs`], so the v2 rules are tested against an in-memory tree
//! and both versions share everything above it.
//!
//! # cgroup v1
//!
//! Where the controllers are v1 hierarchies (`/sys/fs/cgroup/memory`, `…/pids`, `…/cpu`,
//! `…/cpuacct`, or `cpu,cpuacct` co-mounted), there is one leaf per hierarchy needed, under
//! the caller's own cgroup of that hierarchy (its path from `/proc/self/cgroup`, placed
//! under the mount's `root` field, so that a cgroup namespace or a partial mount maps
//! right). A hierarchy is usable ("delegated") when this process may create a directory in
//! its cgroup there and write that cgroup's `cgroup.procs`; root usually can. The memory
//! and cpuacct leaves are made whenever their hierarchy is usable, for [`Leaf::usage`];
//! pids and cpu only for a limit. Memory: `memory.limit_in_bytes`, then
//! `memory.memsw.limit_in_bytes` to the same value (the kernel refuses a memsw limit below
//! the memory one, so memory goes first); without the memsw files (swap accounting off)
//! only memory is set and [`Leaf::swap_included`] says so. The OOM killer stays on.
//!
//! # cgroup v2 and the "no internal processes" rule
//!
//! A non-root v2 cgroup cannot both hold processes and hand controllers to its children.
//! The caller sits in its own cgroup, so its leaves go under a *base*:
//!
//! - the caller's own cgroup, when it is the root cgroup, or when its
//!   `cgroup.subtree_control` already has controllers on (a host that arranged it);
//! - else the caller's cgroup's *parent*, when the caller sits in a delegated sub-group:
//!   systemd's `DelegateSubgroup=` puts the main process in `app.service/supervisor`, and
//!   `app.service` is ours. The parent must be writable and carry systemd's delegation
//!   marker (the xattr `trusted.delegate` or `user.delegate` = `1`). The leaves are then
//!   siblings of `supervisor`, and the controllers are enabled in the base's
//!   `cgroup.subtree_control` when they are not on yet.
//!
//! Anything else is not delegated, and [`Cgroups::discover`] says how to set a host up.
//! For a systemd service:
//!
//! ```ini
//! [Service]
//! Delegate=yes
//! DelegateSubgroup=supervisor
//! ```
//!
//! or for a one-off command, `systemd-run [--user] -p Delegate=yes -p
//! DelegateSubgroup=supervisor <host>`. A scope with `Delegate=yes` alone does not do: it
//! puts the caller in the delegated cgroup itself, which then cannot hand out
//! controllers.
//!
//! v2 limits: `memory.max` and `memory.swap.max = 0` (memory and swap together stay
//! within the limit), `pids.max`, `cpu.max = "<quota> 100000"`. The kill is `cgroup.kill`.
//!
//! # Stale leaves
//!
//! A host killed with `SIGKILL` leaves its leaves behind. [`Cgroups::discover`] removes
//! every `stockade-<pid>-*` under the bases whose `<pid>` no longer runs, once per process,
//! and those named after its own pid when it has made no leaf yet (an earlier host with
//! the same pid, as a restarted container's often has); a name still taken is skipped.
//! A leaf whose host pid was reused by an unrelated process stays until that one ends.
//! A pid is looked up in this process's PID namespace: a host sharing the cgroup from
//! another PID namespace is not seen and its empty leaves may be removed (ones with
//! processes are refused by the kernel with `EBUSY`).

mod fs;
mod leaf;
mod proc;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

pub use fs::{CgroupFs, RealFs};
// `Events` and `Usage` are named by `internals` users and the tests.
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use leaf::{Events, Leaf, Usage};

/// What a sandbox asks of the cgroup controllers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Wanted {
    /// The memory limit in bytes, swap included.
    pub memory: Option<u64>,
    /// The most processes (and threads) at once.
    pub processes: Option<u64>,
    /// The CPU bandwidth, in cores.
    pub cpu: Option<f64>,
}

impl Wanted {
    /// The controllers these limits need, by their kernel names.
    fn controllers(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.memory.is_some() {
            out.push("memory");
        }
        if self.processes.is_some() {
            out.push("pids");
        }
        if self.cpu.is_some() {
            out.push("cpu");
        }
        out
    }
}

/// The CFS period stockade sets, in microseconds.
const CPU_PERIOD_US: u64 = 100_000;
/// The smallest quota stockade sets, in microseconds (the kernel's floor is 1 ms).
const CPU_MIN_QUOTA_US: u64 = 1_000;

/// The CPU quota per [`CPU_PERIOD_US`] for `cores`.
fn cpu_quota(cores: f64) -> u64 {
    let q = (cores * CPU_PERIOD_US as f64).round();
    if q.is_finite() && q > CPU_MIN_QUOTA_US as f64 {
        // In range: a finite positive value below u64::MAX for any sane core count.
        q.min(u64::MAX as f64) as u64
    } else {
        CPU_MIN_QUOTA_US
    }
}

/// Which cgroup interface the leaves use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Per-controller hierarchies.
    V1,
    /// The unified hierarchy.
    V2,
}

/// The file a v1 leaf is joined through: `tasks`, not `cgroup.procs`. The setup child is
/// a process of one thread (a `CLONE_VM` child without `CLONE_THREAD`), so moving that
/// thread moves the process; and the kernel moves the writer's own thread (`0`) without
/// the global `cgroup_threadgroup_rwsem` write lock that a `cgroup.procs` write takes,
/// whose RCU grace period costs 5–20 ms on a host that has not moved a process for some
/// tens of milliseconds (measured here: 0.08 ms through `tasks`, 6.5–21 ms through
/// `cgroup.procs`, 100 ms apart). v2 has no such file for a domain cgroup.
const V1_JOIN: &str = "tasks";

/// A cgroup directory this process found: in which hierarchy, under which path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    /// The v1 hierarchy's controllers as `/proc/<pid>/cgroup` lists them; empty on v2.
    controllers: Vec<String>,
    /// The cgroup's path as `/proc/<pid>/cgroup` shows it.
    cgroup: String,
    /// Its directory.
    dir: PathBuf,
}

impl Place {
    /// The child `name` of this cgroup.
    fn child(&self, name: &str) -> Place {
        let cgroup = if self.cgroup == "/" {
            format!("/{name}")
        } else {
            format!("{}/{name}", self.cgroup)
        };
        Place {
            controllers: self.controllers.clone(),
            cgroup,
            dir: self.dir.join(name),
        }
    }
}

/// The hierarchies found, per version.
#[derive(Debug, Clone)]
enum Layout {
    /// For each controller stockade uses (`memory`, `pids`, `cpu`, `cpuacct`): its
    /// hierarchy's place, or why it cannot be used.
    V1(Vec<(&'static str, Result<Place, String>)>),
    /// The base the leaves go under.
    V2(Place),
}

/// The cgroup hierarchies this process may use, discovered once.
#[derive(Debug, Clone)]
pub struct Cgroups {
    fs: Arc<dyn CgroupFs>,
    layout: Layout,
}

/// The v1 controllers stockade uses: the three limits and cpuacct for the CPU usage.
const V1_CONTROLLERS: [&str; 4] = ["memory", "pids", "cpu", "cpuacct"];

/// The next leaf's sequence number in this process.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// An error that names the step and the path, keeping the kind of `cause`.
pub(crate) fn failed(op: &str, path: &Path, cause: &io::Error) -> io::Error {
    io::Error::new(cause.kind(), format!("{op} {}: {cause}", path.display()))
}

/// The uid this process acts as, for the reasons.
fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The systemd setup a v2 host needs, for the reasons.
const V2_SETUP: &str = "run the host in a systemd unit with `Delegate=yes` and \
     `DelegateSubgroup=supervisor` (its leaves then go beside `supervisor`), or in the root cgroup";

impl Cgroups {
    /// Discovers the hierarchies from `/proc/self/cgroup` and `/proc/self/mountinfo`, once
    /// per process (later calls return the first answer), and removes the stale leaves
    /// of dead hosts.
    ///
    /// # Errors
    ///
    /// A one-line reason when no hierarchy is usable: not mounted, or not delegated to
    /// this user, naming what is missing.
    pub fn discover() -> Result<Cgroups, String> {
        static FOUND: OnceLock<Result<Cgroups, String>> = OnceLock::new();
        FOUND
            .get_or_init(|| Cgroups::discover_with(Arc::new(RealFs)))
            .clone()
    }

    /// [`Cgroups::discover`] through `fs`, every time.
    ///
    /// # Errors
    ///
    /// As [`Cgroups::discover`].
    pub fn discover_with(fs: Arc<dyn CgroupFs>) -> Result<Cgroups, String> {
        let cgroup_text = fs
            .self_cgroup()
            .map_err(|e| format!("read /proc/self/cgroup: {e}"))?;
        let mountinfo = fs
            .mountinfo()
            .map_err(|e| format!("read /proc/self/mountinfo: {e}"))?;
        let members = proc::memberships(&cgroup_text);
        let mounts = proc::mounts(&mountinfo);
        let v1 = discover_v1(fs.as_ref(), &members, &mounts);
        // Where a limit's controller is a v1 hierarchy, v2 cannot have it (a controller
        // is in one hierarchy at a time): the answer is v1's.
        let limits_v1 = |(c, _): &&(&str, Result<Place, String>)| *c != "cpuacct";
        let layout = if v1.iter().filter(limits_v1).any(|(_, r)| r.is_ok()) {
            Layout::V1(v1)
        } else if let Some((_, Err(why))) = v1.iter().find(limits_v1) {
            return Err(why.clone());
        } else if let Some(base) = discover_v2(fs.as_ref(), &members, &mounts)? {
            Layout::V2(base)
        } else {
            return Err("no cgroup hierarchy is mounted (neither v1 nor v2 in \
                        /proc/self/mountinfo)"
                .into());
        };
        let found = Cgroups { fs, layout };
        found.remove_stale(SEQ.load(Ordering::Relaxed) == 0);
        Ok(found)
    }

    /// Which interface the leaves use.
    pub fn version(&self) -> Version {
        match self.layout {
            Layout::V1(_) => Version::V1,
            Layout::V2(_) => Version::V2,
        }
    }

    /// The v1 place of `controller`, or why there is none.
    fn v1_place(&self, controller: &str) -> Option<&Result<Place, String>> {
        match &self.layout {
            Layout::V1(found) => found.iter().find(|(c, _)| *c == controller).map(|(_, r)| r),
            Layout::V2(_) => None,
        }
    }

    /// Whether this host can enforce every limit of `wanted`.
    ///
    /// # Errors
    ///
    /// The reason for the first controller it cannot.
    pub fn check(&self, wanted: &Wanted) -> Result<(), String> {
        match &self.layout {
            Layout::V1(_) => {
                for c in wanted.controllers() {
                    match self.v1_place(c) {
                        Some(Ok(_)) => {}
                        Some(Err(why)) => return Err(why.clone()),
                        None => return Err(format!("cgroup v1 {c} hierarchy: not mounted")),
                    }
                }
                Ok(())
            }
            Layout::V2(base) => {
                let path = base.dir.join("cgroup.controllers");
                let have = self
                    .fs
                    .read(&path)
                    .map_err(|e| format!("cgroup v2: read {}: {e}", path.display()))?;
                for c in wanted.controllers() {
                    if !have.split_whitespace().any(|h| h == c) {
                        return Err(format!(
                            "cgroup v2: the {c} controller is not delegated to {} (not in \
                             its cgroup.controllers: `{}`)",
                            base.dir.display(),
                            have.trim()
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// Creates the leaf of one sandbox (v1: one per hierarchy needed; v2: one, under the
    /// base), writes the limits of `wanted` and opens the fds to join it.
    ///
    /// # Errors
    ///
    /// The first step that failed, with its path; the directories made so far are
    /// removed.
    pub fn create(&self, wanted: &Wanted) -> io::Result<Leaf> {
        let mut tries = 0;
        loop {
            let name = format!(
                "stockade-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            );
            let made = match &self.layout {
                Layout::V1(_) => self.create_v1(&name, wanted),
                Layout::V2(base) => self.create_v2(base, &name, wanted),
            };
            // A name taken by a leaf that outlived its host (one whose cleanup failed)
            // is skipped; the partial leaf was removed when it dropped.
            match made {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
                made => return made,
            }
        }
    }

    /// The v1 leaves: one per hierarchy of a wanted controller, plus memory and cpuacct
    /// for the usage.
    fn create_v1(&self, name: &str, wanted: &Wanted) -> io::Result<Leaf> {
        let mut leaf = Leaf::new(Arc::clone(&self.fs), Version::V1);
        let needed = wanted.controllers();
        for c in V1_CONTROLLERS {
            let asked = needed.contains(&c);
            if !asked && c != "memory" && c != "cpuacct" {
                continue;
            }
            let place = match self.v1_place(c) {
                Some(Ok(p)) => p,
                _ if !asked => continue,
                Some(Err(why)) => {
                    return Err(io::Error::new(io::ErrorKind::PermissionDenied, why.clone()));
                }
                None => {
                    let why = format!("cgroup v1 {c} hierarchy: not mounted");
                    return Err(io::Error::new(io::ErrorKind::NotFound, why));
                }
            };
            if leaf
                .parts
                .iter()
                .any(|p| p.controllers == place.controllers)
            {
                continue;
            }
            let part = place.child(name);
            self.fs
                .mkdir(&part.dir)
                .map_err(|e| failed("mkdir", &part.dir, &e))?;
            leaf.parts.push(part);
        }
        for part in leaf.parts.clone() {
            let has = |c: &str| part.controllers.iter().any(|h| h == c);
            if has("memory") {
                self.limit_memory_v1(&mut leaf, &part, wanted.memory)?;
            }
            if let (true, Some(n)) = (has("pids"), wanted.processes) {
                self.put(&part.dir.join("pids.max"), n.to_string())?;
            }
            if let (true, Some(cores)) = (has("cpu"), wanted.cpu) {
                self.put(
                    &part.dir.join("cpu.cfs_period_us"),
                    CPU_PERIOD_US.to_string(),
                )?;
                self.put(
                    &part.dir.join("cpu.cfs_quota_us"),
                    cpu_quota(cores).to_string(),
                )?;
            }
            leaf.procs.push(self.open_join(&part, V1_JOIN)?);
        }
        Ok(leaf)
    }

    /// The v1 memory leaf: the OOM killer on, and the limit on memory and, where swap is
    /// accounted, on memory and swap together.
    fn limit_memory_v1(&self, leaf: &mut Leaf, part: &Place, limit: Option<u64>) -> io::Result<()> {
        let oom = part.dir.join("memory.oom_control");
        // A new memory cgroup inherits `oom_kill_disable` from its parent.
        if let Ok(text) = self.fs.read(&oom) {
            if leaf::field(&text, "oom_kill_disable") == Some(1) {
                self.put(&oom, "0".into())?;
            }
        }
        let memsw = part.dir.join("memory.memsw.limit_in_bytes");
        leaf.swap_included = self.fs.read(&memsw).is_ok();
        if let Some(bytes) = limit {
            // memsw may not go below limit_in_bytes: memory first.
            self.put(&part.dir.join("memory.limit_in_bytes"), bytes.to_string())?;
            if leaf.swap_included {
                self.put(&memsw, bytes.to_string())?;
            }
        }
        Ok(())
    }

    /// The v2 leaf under `base`, with the controllers it needs enabled in the base.
    fn create_v2(&self, base: &Place, name: &str, wanted: &Wanted) -> io::Result<Leaf> {
        let mut leaf = Leaf::new(Arc::clone(&self.fs), Version::V2);
        let available = self
            .fs
            .read(&base.dir.join("cgroup.controllers"))
            .unwrap_or_default();
        let mut enable: Vec<&str> = wanted.controllers();
        if !enable.contains(&"memory") && available.split_whitespace().any(|c| c == "memory") {
            enable.push("memory");
        }
        let control = base.dir.join("cgroup.subtree_control");
        let on = self
            .fs
            .read(&control)
            .map_err(|e| failed("read", &control, &e))?;
        let missing: Vec<String> = enable
            .iter()
            .filter(|c| !on.split_whitespace().any(|o| o == **c))
            .map(|c| format!("+{c}"))
            .collect();
        if !missing.is_empty() {
            self.put(&control, missing.join(" "))?;
        }
        let part = base.child(name);
        self.fs
            .mkdir(&part.dir)
            .map_err(|e| failed("mkdir", &part.dir, &e))?;
        leaf.parts.push(part.clone());
        let swap = part.dir.join("memory.swap.max");
        leaf.swap_included = self.fs.read(&swap).is_ok();
        if let Some(bytes) = wanted.memory {
            self.put(&part.dir.join("memory.max"), bytes.to_string())?;
            if leaf.swap_included {
                self.put(&swap, "0".into())?;
            }
        }
        if let Some(n) = wanted.processes {
            self.put(&part.dir.join("pids.max"), n.to_string())?;
        }
        if let Some(cores) = wanted.cpu {
            self.put(
                &part.dir.join("cpu.max"),
                format!("{} {CPU_PERIOD_US}", cpu_quota(cores)),
            )?;
        }
        leaf.procs.push(self.open_join(&part, "cgroup.procs")?);
        leaf.dir = Some(
            self.fs
                .open_dir(&part.dir)
                .map_err(|e| failed("open", &part.dir, &e))?,
        );
        Ok(leaf)
    }

    /// The join fd of leaf `part`: its `file` (`tasks` on v1, `cgroup.procs` on v2), open
    /// for writing.
    fn open_join(&self, part: &Place, file: &str) -> io::Result<std::os::fd::OwnedFd> {
        let procs = part.dir.join(file);
        self.fs
            .open_write(&procs)
            .map_err(|e| failed("open", &procs, &e))
    }

    /// Writes `value` to the control file `path`.
    fn put(&self, path: &Path, value: String) -> io::Result<()> {
        self.fs
            .write(path, value.as_bytes())
            .map_err(|e| failed(&format!("write {value:?} to"), path, &e))
    }

    /// Removes the leaves of hosts that no longer run. `fresh`: this process has made no
    /// leaf yet, so one named after its own pid is an earlier process's with the same pid
    /// (a restarted container's host often gets the same small pid).
    fn remove_stale(&self, fresh: bool) {
        let bases: Vec<Place> = match &self.layout {
            Layout::V1(found) => {
                let mut out: Vec<Place> = Vec::new();
                for p in found.iter().filter_map(|(_, r)| r.as_ref().ok()) {
                    if !out.contains(p) {
                        out.push(p.clone());
                    }
                }
                out
            }
            Layout::V2(base) => vec![base.clone()],
        };
        let me = std::process::id();
        for base in bases {
            let Ok(names) = self.fs.subdirs(&base.dir) else {
                continue;
            };
            for name in names {
                if !self.stale(&name, me, fresh) {
                    continue;
                }
                let mut stale = Leaf::new(Arc::clone(&self.fs), self.version());
                stale.parts.push(base.child(&name));
                tracing::debug!(
                    "removing the stale cgroup {}",
                    base.dir.join(&name).display()
                );
                stale.remove();
            }
        }
    }
}

impl Cgroups {
    /// Whether leaf `name` is stale: its host pid no longer runs, or it is this
    /// process's (`me`) and this process has made no leaf yet (`fresh`).
    fn stale(&self, name: &str, me: u32, fresh: bool) -> bool {
        match leaf::owner(name) {
            Some(pid) if pid == me => fresh,
            Some(pid) => !self.fs.pid_alive(pid),
            None => false,
        }
    }
}

/// The v1 hierarchies of the controllers stockade uses, each usable or not.
fn discover_v1(
    fs: &dyn CgroupFs,
    members: &[proc::Membership],
    mounts: &[proc::Mount],
) -> Vec<(&'static str, Result<Place, String>)> {
    let mut out = Vec::new();
    for c in V1_CONTROLLERS {
        let Some(m) = members
            .iter()
            .find(|m| m.controllers.iter().any(|h| h == c))
        else {
            continue;
        };
        let Some(mount) = mounts
            .iter()
            .find(|mt| !mt.v2 && mt.controllers.iter().any(|h| h == c))
        else {
            out.push((c, Err(format!("cgroup v1 {c} hierarchy: not mounted"))));
            continue;
        };
        let Some(dir) = proc::dir_of(mount, &m.path) else {
            out.push((
                c,
                Err(format!(
                    "cgroup v1 {c} hierarchy: the caller's cgroup {} is not under the part \
                     mounted at {} ({})",
                    m.path,
                    mount.mount_point.display(),
                    mount.root
                )),
            ));
            continue;
        };
        let procs = dir.join("cgroup.procs");
        let place = if !fs.writable(&dir) || !fs.writable(&procs) {
            Err(format!(
                "cgroup v1 {c} hierarchy: {} is not writable by uid {} (not delegated)",
                dir.display(),
                euid()
            ))
        } else {
            Ok(Place {
                controllers: m.controllers.clone(),
                cgroup: m.path.clone(),
                dir,
            })
        };
        out.push((c, place));
    }
    out
}

/// The v2 base, `None` when there is no unified hierarchy at all.
///
/// # Errors
///
/// Why the unified hierarchy is not ours, with the setup that would make it so.
fn discover_v2(
    fs: &dyn CgroupFs,
    members: &[proc::Membership],
    mounts: &[proc::Mount],
) -> Result<Option<Place>, String> {
    let (Some(m), Some(mount)) = (
        members.iter().find(|m| m.unified),
        mounts.iter().find(|m| m.v2),
    ) else {
        return Ok(None);
    };
    let Some(dir) = proc::dir_of(mount, &m.path) else {
        return Err(format!(
            "cgroup v2: the caller's cgroup {} is not under the part mounted at {}",
            m.path,
            mount.mount_point.display()
        ));
    };
    let own = Place {
        controllers: Vec::new(),
        cgroup: m.path.clone(),
        dir,
    };
    let writable =
        |p: &Place| fs.writable(&p.dir) && fs.writable(&p.dir.join("cgroup.subtree_control"));
    let arranged = || {
        fs.read(&own.dir.join("cgroup.subtree_control"))
            .is_ok_and(|s| !s.trim().is_empty())
    };
    // The hierarchy's own root has no `cgroup.type`; the root of a cgroup namespace (a
    // container's view) has one, and holds its processes like any other cgroup.
    let true_root = m.path == "/" && fs.read(&own.dir.join("cgroup.type")).is_err();
    if (true_root || arranged()) && writable(&own) {
        return Ok(Some(own));
    }
    let parent_path = match m.path.rsplit_once('/') {
        Some(("", _)) => "/".to_owned(),
        Some((p, _)) => p.to_owned(),
        None => "/".to_owned(),
    };
    let marked = |p: &Path| {
        ["trusted.delegate", "user.delegate"]
            .iter()
            .any(|x| fs.getxattr(p, x).as_deref() == Some(b"1"))
    };
    if m.path != "/" {
        if let Some(pdir) = proc::dir_of(mount, &parent_path) {
            let parent = Place {
                controllers: Vec::new(),
                cgroup: parent_path.clone(),
                dir: pdir,
            };
            if writable(&parent) && marked(&parent.dir) {
                return Ok(Some(parent));
            }
        }
    }
    if true_root {
        return Err(format!(
            "cgroup v2: the root cgroup {} is not writable by uid {} (not delegated); {V2_SETUP}",
            own.dir.display(),
            euid()
        ));
    }
    if m.path == "/" {
        return Err(format!(
            "cgroup v2: the caller's cgroup is the root of its cgroup namespace (a \
             container's), holds the caller and hands out no controllers, so its leaves \
             could not get any; move the caller into a sub-group and enable the controllers \
             in {}'s cgroup.subtree_control, or {V2_SETUP}",
            own.dir.display()
        ));
    }
    Err(format!(
        "cgroup v2: the caller's cgroup {} is not delegated (it holds the caller, and its \
         parent {} is not a delegated cgroup writable by uid {}); {V2_SETUP}",
        m.path,
        parent_path,
        euid()
    ))
}
