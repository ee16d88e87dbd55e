//! Reading `/proc/self/cgroup` and `/proc/self/mountinfo`: which cgroup the caller is in,
//! per hierarchy, and where that cgroup's directory is mounted. Plain text in, plain data
//! out.

use std::path::{Path, PathBuf};

/// One line of `/proc/<pid>/cgroup`: `id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The v1 controllers of the hierarchy (`["cpu", "cpuacct"]`); empty for v2's `0::`
    /// line and for named hierarchies (`name=systemd` is kept as it is).
    pub controllers: Vec<String>,
    /// Whether this is the v2 line (`0::/path`).
    pub unified: bool,
    /// The cgroup's path, relative to the cgroup namespace's root (`/process_api/x`).
    pub path: String,
}

/// Parses `/proc/<pid>/cgroup`.
pub fn memberships(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let id = parts.next()?;
            let ctrls = parts.next()?;
            let path = parts.next()?;
            Some(Membership {
                controllers: ctrls
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                unified: id == "0" && ctrls.is_empty(),
                path: path.to_owned(),
            })
        })
        .collect()
}

/// A cgroup mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// `cgroup` (v1) or `cgroup2`.
    pub v2: bool,
    /// The cgroup this mount shows at its mount point (the mountinfo `root` field): `/`,
    /// or a sub-cgroup when a container was given only part of the hierarchy.
    pub root: String,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// The v1 super options that are controllers (`cpu`, `cpuacct`, `name=systemd`).
    pub controllers: Vec<String>,
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let oct = b.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (c, oct) {
            (b'\\', Some(v)) => {
                out.push(v);
                i += 4;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The super options that are not controllers.
const NOT_CONTROLLERS: &[&str] = &["rw", "ro", "noprefix", "clone_children", "xattr"];

/// Parses the cgroup mounts of `/proc/self/mountinfo`.
pub fn mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let head: Vec<&str> = head.split(' ').collect();
            let mut tail = tail.split(' ');
            let fstype = tail.next()?;
            let _source = tail.next()?;
            let options = tail.next().unwrap_or("");
            let v2 = match fstype {
                "cgroup" => false,
                "cgroup2" => true,
                _ => return None,
            };
            let controllers = if v2 {
                Vec::new()
            } else {
                options
                    .split(',')
                    .filter(|o| {
                        !NOT_CONTROLLERS.contains(o)
                            && !o.starts_with("release_agent=")
                            && !o.is_empty()
                    })
                    .map(str::to_owned)
                    .collect()
            };
            Some(Mount {
                v2,
                root: unescape(head.get(3)?),
                mount_point: PathBuf::from(unescape(head.get(4)?)),
                controllers,
            })
        })
        .collect()
}

/// The directory of cgroup `path` under `mount`, `None` when the mount does not show it
/// (the cgroup lies outside the part of the hierarchy mounted there).
pub fn dir_of(mount: &Mount, path: &str) -> Option<PathBuf> {
    let rel = if mount.root == "/" {
        path.strip_prefix('/').unwrap_or(path)
    } else {
        let rest = path.strip_prefix(mount.root.as_str())?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest.strip_prefix('/').unwrap_or(rest)
    };
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if rel.is_empty() {
        mount.mount_point.clone()
    } else {
        mount.mount_point.join(rel)
    })
}

/// Whether `/proc/<pid>/cgroup` (`text`) puts the process in cgroup `cgroup` (a path as
/// that file shows it) of the hierarchy with `controllers` (the unified one when empty).
pub fn is_member(text: &str, controllers: &[String], cgroup: &Path) -> bool {
    memberships(text).iter().any(|m| {
        let same = if controllers.is_empty() {
            m.unified
        } else {
            m.controllers == controllers
        };
        same && Path::new(&m.path) == cgroup
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 /ctr /sys/fs/cgroup/my\\040memory rw,relatime shared:5 - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,release_agent=/x,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
";

    #[test]
    fn mountinfo_gives_each_cgroup_mount_its_controllers_root_and_mount_point() {
        let m = mounts(MOUNTINFO);
        assert_eq!(m.len(), 6);
        assert_eq!(m[0].controllers, ["cpu"]);
        assert_eq!(m[2].root, "/ctr");
        assert_eq!(m[2].mount_point, Path::new("/sys/fs/cgroup/my memory"));
        assert_eq!(m[3].controllers, ["cpu", "cpuacct"]);
        assert_eq!(m[4].controllers, ["name=systemd"]);
        assert!(m[5].v2 && m[5].controllers.is_empty());
    }

    #[test]
    fn proc_cgroup_lines_split_into_controllers_and_path() {
        let text = "4:memory:/process_api/43d\n2:cpu,cpuacct:/\n0::/user.slice/a:b\n";
        let m = memberships(text);
        assert_eq!(m[0].controllers, ["memory"]);
        assert_eq!(m[0].path, "/process_api/43d");
        assert_eq!(m[1].controllers, ["cpu", "cpuacct"]);
        assert!(m[2].unified && m[2].path == "/user.slice/a:b");
    }

    #[test]
    fn a_cgroup_path_maps_under_the_mounts_root_or_not_at_all() {
        let m = mounts(MOUNTINFO);
        assert_eq!(
            dir_of(&m[0], "/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu/a/b"))
        );
        assert_eq!(
            dir_of(&m[0], "/"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu"))
        );
        assert_eq!(
            dir_of(&m[2], "/ctr/x"),
            Some(PathBuf::from("/sys/fs/cgroup/my memory/x"))
        );
        assert_eq!(
            dir_of(&m[2], "/ctr"),
            Some(PathBuf::from("/sys/fs/cgroup/my memory"))
        );
        assert_eq!(dir_of(&m[2], "/ctrl"), None);
        assert_eq!(dir_of(&m[2], "/other"), None);
        assert_eq!(dir_of(&m[0], "/../x"), None);
    }

    #[test]
    fn membership_matches_the_hierarchy_and_the_exact_path() {
        let text = "4:memory:/a/stockade-1-0\n2:cpu,cpuacct:/b\n0::/c\n";
        let mem = vec!["memory".to_owned()];
        assert!(is_member(text, &mem, Path::new("/a/stockade-1-0")));
        assert!(!is_member(text, &mem, Path::new("/a")));
        assert!(is_member(text, &[], Path::new("/c")));
        let cpu = vec!["cpu".to_owned()];
        assert!(!is_member(text, &cpu, Path::new("/b")));
    }
}
