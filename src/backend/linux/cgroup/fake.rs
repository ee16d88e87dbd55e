//! An in-memory cgroup v2 hierarchy with the kernel's rules, for the unit tests.
//!
//! It holds what the module's v2 path relies on: a child's `cgroup.controllers` is its
//! parent's `cgroup.subtree_control`; `+ctrl` in `cgroup.subtree_control` fails `ENOENT`
//! when the cgroup does not have `ctrl` and `EBUSY` when it has processes (the root
//! excepted); a controller's files exist only where it is enabled (`ENOENT` otherwise);
//! joining a non-root cgroup that hands out controllers fails `EBUSY`; `rmdir` fails
//! `EBUSY` while the cgroup has processes or children; `cgroup.kill` empties the subtree.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::CgroupFs;

/// Where the fake hierarchy is mounted.
pub const MOUNT: &str = "/sys/fs/cgroup";

/// One cgroup of the fake tree.
#[derive(Debug, Default, Clone)]
pub struct Group {
    /// `cgroup.subtree_control`.
    pub subtree: Vec<String>,
    /// `cgroup.procs`.
    pub procs: Vec<u32>,
    /// Values written to (or preset in) the interface files.
    pub files: BTreeMap<String, String>,
    /// Extended attributes.
    pub xattrs: BTreeMap<String, Vec<u8>>,
    /// Whether this process may write the directory and its files.
    pub writable: bool,
}

/// The fake's whole state.
#[derive(Debug, Default)]
pub struct State {
    /// The cgroups by path (`/`, `/a/b`).
    pub groups: BTreeMap<String, Group>,
    /// The root's controllers (`cgroup.controllers` of `/`).
    pub root_controllers: Vec<String>,
    /// The caller's cgroup.
    pub caller: String,
    /// The pids that run.
    pub alive: BTreeSet<u32>,
    /// Every write, in order: (path, data).
    pub writes: Vec<(PathBuf, String)>,
    /// A v1 host instead: the text of `/proc/self/cgroup` and of `/proc/self/mountinfo`,
    /// and the paths this process may write (the tree itself is not emulated for v1).
    pub v1: Option<(String, String, BTreeSet<PathBuf>)>,
    /// Interface files whose writes fail `EINVAL` (a value the kernel refuses).
    pub refuse: BTreeSet<String>,
    /// `/` is the root of a cgroup namespace (a container's), not the hierarchy's root:
    /// it has `cgroup.type`, and the "no internal processes" rule holds for it.
    pub ns_root: bool,
}

/// The fake hierarchy.
#[derive(Debug, Default)]
pub struct FakeFs {
    /// Its state, for the tests to arrange and inspect.
    pub state: Mutex<State>,
}

/// An errno as an `io::Error`.
fn err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// The cgroup path of directory `dir` (`/sys/fs/cgroup/a` → `/a`).
fn cgroup_of(dir: &Path) -> Option<String> {
    let rel = dir.strip_prefix(MOUNT).ok()?;
    Some(format!("/{}", rel.display()))
}

/// The parent cgroup path of `cg`.
fn parent_of(cg: &str) -> Option<String> {
    match cg.rsplit_once('/')? {
        ("", "") => None,
        ("", _) => Some("/".into()),
        (p, _) => Some(p.into()),
    }
}

/// The default text of interface file `name`.
fn default_text(name: &str) -> &'static str {
    match name {
        "memory.max" | "memory.swap.max" | "pids.max" => "max\n",
        "memory.peak" => "0\n",
        "memory.events" => "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
        "pids.events" => "max 0\n",
        "cpu.max" => "max 100000\n",
        "cpu.stat" => "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
        _ => "",
    }
}

impl State {
    /// A hierarchy with `controllers` at the root and the caller in `caller`; each
    /// cgroup on the way is made (writable by root only: the tests open them up).
    pub fn new(controllers: &[&str], caller: &str) -> State {
        let mut s = State {
            root_controllers: controllers.iter().map(|c| (*c).to_owned()).collect(),
            caller: caller.into(),
            ..State::default()
        };
        s.groups.insert("/".into(), Group::default());
        let mut path = String::new();
        for part in caller.split('/').filter(|p| !p.is_empty()) {
            path = format!("{path}/{part}");
            s.groups.insert(path.clone(), Group::default());
        }
        let me = std::process::id();
        s.groups.get_mut(caller).expect("caller").procs.push(me);
        s.alive.insert(me);
        s
    }

    /// The group at `cg`.
    pub fn group(&mut self, cg: &str) -> &mut Group {
        self.groups.get_mut(cg).expect("no such fake cgroup")
    }

    /// `cgroup.controllers` of `cg`.
    fn controllers(&self, cg: &str) -> Vec<String> {
        match parent_of(cg) {
            None => self.root_controllers.clone(),
            Some(p) => self
                .groups
                .get(&p)
                .map(|g| g.subtree.clone())
                .unwrap_or_default(),
        }
    }

    /// Whether interface file `name` exists in `cg`.
    fn exists(&self, cg: &str, name: &str) -> bool {
        if name.starts_with("cgroup.") || name == "cpu.stat" {
            if name == "cgroup.type" {
                return cg != "/" || self.ns_root;
            }
            return matches!(
                name,
                "cgroup.procs" | "cgroup.controllers" | "cgroup.subtree_control" | "cgroup.kill"
            ) || name == "cpu.stat";
        }
        let ctrl = name.split('.').next().unwrap_or("");
        parent_of(cg).is_some() && self.controllers(cg).iter().any(|c| c == ctrl)
    }

    /// The (group, file name) of `path`, checked to exist.
    fn locate(&self, path: &Path) -> io::Result<(String, String)> {
        let dir = path.parent().ok_or_else(|| err(libc::ENOENT))?;
        let name = path.file_name().ok_or_else(|| err(libc::ENOENT))?;
        let name = name.to_string_lossy().into_owned();
        let cg = cgroup_of(dir).ok_or_else(|| err(libc::ENOENT))?;
        if !self.groups.contains_key(&cg) || !self.exists(&cg, &name) {
            return Err(err(libc::ENOENT));
        }
        Ok((cg, name))
    }

    /// The cgroups at or below `cg`.
    fn subtree_of(&self, cg: &str) -> Vec<String> {
        let prefix = if cg == "/" {
            "/".to_owned()
        } else {
            format!("{cg}/")
        };
        self.groups
            .keys()
            .filter(|k| *k == cg || k.starts_with(&prefix))
            .cloned()
            .collect()
    }
}

impl FakeFs {
    /// A fake over `state`.
    pub fn new(state: State) -> FakeFs {
        FakeFs {
            state: Mutex::new(state),
        }
    }

    /// Its state, locked.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake cgroup state")
    }
}

impl CgroupFs for FakeFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        let s = self.lock();
        let (cg, name) = s.locate(path)?;
        let g = &s.groups[&cg];
        Ok(match name.as_str() {
            "cgroup.controllers" => s.controllers(&cg).join(" ") + "\n",
            "cgroup.subtree_control" => g.subtree.join(" ") + "\n",
            "cgroup.procs" => g.procs.iter().map(|p| format!("{p}\n")).collect(),
            "cgroup.kill" => return Err(err(libc::EINVAL)),
            "cgroup.type" => "domain\n".into(),
            other => g
                .files
                .get(other)
                .cloned()
                .unwrap_or_else(|| default_text(other).into()),
        })
    }

    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let mut s = self.lock();
        let (cg, name) = s.locate(path)?;
        if !s.groups[&cg].writable {
            return Err(err(libc::EACCES));
        }
        let text = String::from_utf8_lossy(data).into_owned();
        s.writes.push((path.to_owned(), text.clone()));
        if s.refuse.contains(&name) {
            return Err(err(libc::EINVAL));
        }
        let is_root = cg == "/" && !s.ns_root;
        match name.as_str() {
            "cgroup.subtree_control" => {
                for tok in text.split_whitespace() {
                    let (on, c) = match tok.split_at(1) {
                        ("+", c) => (true, c),
                        ("-", c) => (false, c),
                        _ => return Err(err(libc::EINVAL)),
                    };
                    if !s.controllers(&cg).iter().any(|h| h == c) {
                        return Err(err(libc::ENOENT));
                    }
                    let g = s.group(&cg);
                    if on && !is_root && !g.procs.is_empty() {
                        return Err(err(libc::EBUSY));
                    }
                    g.subtree.retain(|h| h != c);
                    if on {
                        g.subtree.push(c.to_owned());
                    }
                }
            }
            "cgroup.procs" => {
                let pid: u32 = text.trim().parse().map_err(|_| err(libc::EINVAL))?;
                if !is_root && !s.groups[&cg].subtree.is_empty() {
                    return Err(err(libc::EBUSY));
                }
                for g in s.groups.values_mut() {
                    g.procs.retain(|p| *p != pid);
                }
                s.group(&cg).procs.push(pid);
            }
            "cgroup.kill" => {
                for sub in s.subtree_of(&cg) {
                    let killed = std::mem::take(&mut s.group(&sub).procs);
                    for p in killed {
                        s.alive.remove(&p);
                    }
                }
            }
            "cgroup.controllers" | "cgroup.events" => return Err(err(libc::EACCES)),
            other => {
                s.group(&cg).files.insert(other.to_owned(), text);
            }
        }
        Ok(())
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let cg = cgroup_of(path).ok_or_else(|| err(libc::ENOENT))?;
        let parent = parent_of(&cg).ok_or_else(|| err(libc::EEXIST))?;
        let Some(p) = s.groups.get(&parent) else {
            return Err(err(libc::ENOENT));
        };
        if !p.writable {
            return Err(err(libc::EACCES));
        }
        if s.groups.contains_key(&cg) {
            return Err(err(libc::EEXIST));
        }
        let g = Group {
            writable: true,
            ..Group::default()
        };
        s.groups.insert(cg, g);
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let cg = cgroup_of(path).ok_or_else(|| err(libc::ENOENT))?;
        let Some(g) = s.groups.get(&cg) else {
            return Err(err(libc::ENOENT));
        };
        if !g.procs.is_empty() || s.subtree_of(&cg).len() > 1 {
            return Err(err(libc::EBUSY));
        }
        s.groups.remove(&cg);
        Ok(())
    }

    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>> {
        let s = self.lock();
        let cg = cgroup_of(path).ok_or_else(|| err(libc::ENOENT))?;
        if !s.groups.contains_key(&cg) {
            return Err(err(libc::ENOENT));
        }
        Ok(s.groups
            .keys()
            .filter(|k| parent_of(k).as_deref() == Some(cg.as_str()))
            .filter_map(|k| k.rsplit('/').next().map(str::to_owned))
            .collect())
    }

    fn open_write(&self, path: &Path) -> io::Result<OwnedFd> {
        self.lock().locate(path)?;
        let f = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        Ok(OwnedFd::from(f))
    }

    fn open_dir(&self, path: &Path) -> io::Result<OwnedFd> {
        let s = self.lock();
        let cg = cgroup_of(path).ok_or_else(|| err(libc::ENOENT))?;
        if !s.groups.contains_key(&cg) {
            return Err(err(libc::ENOENT));
        }
        Ok(OwnedFd::from(std::fs::File::open("/")?))
    }

    fn writable(&self, path: &Path) -> bool {
        let s = self.lock();
        if let Some((_, _, writable)) = &s.v1 {
            return writable.contains(path);
        }
        let dir = match cgroup_of(path) {
            Some(cg) if s.groups.contains_key(&cg) => cg,
            _ => match path.parent().and_then(cgroup_of) {
                Some(cg) => cg,
                None => return false,
            },
        };
        s.groups.get(&dir).is_some_and(|g| g.writable)
    }

    fn getxattr(&self, path: &Path, name: &str) -> Option<Vec<u8>> {
        let s = self.lock();
        s.groups.get(&cgroup_of(path)?)?.xattrs.get(name).cloned()
    }

    fn self_cgroup(&self) -> io::Result<String> {
        if let Some((text, _, _)) = &self.lock().v1 {
            return Ok(text.clone());
        }
        Ok(format!("0::{}\n", self.lock().caller))
    }

    fn mountinfo(&self) -> io::Result<String> {
        if let Some((_, text, _)) = &self.lock().v1 {
            return Ok(text.clone());
        }
        Ok(format!(
            "30 23 0:26 / {MOUNT} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
        ))
    }

    fn pid_cgroup(&self, pid: u32) -> io::Result<String> {
        let s = self.lock();
        s.groups
            .iter()
            .find(|(_, g)| g.procs.contains(&pid))
            .map(|(cg, _)| format!("0::{cg}\n"))
            .ok_or_else(|| err(libc::ENOENT))
    }

    fn pid_alive(&self, pid: u32) -> bool {
        self.lock().alive.contains(&pid)
    }

    fn kill_pinned(&self, pid: u32, still_in: &dyn Fn() -> bool) -> io::Result<bool> {
        if !self.pid_alive(pid) || !still_in() {
            return Ok(false);
        }
        let mut s = self.lock();
        for g in s.groups.values_mut() {
            g.procs.retain(|p| *p != pid);
        }
        s.alive.remove(&pid);
        Ok(true)
    }
}
