//! Any valid policy over any (fake) host yields a plan whose invariants hold:
//!
//! - parents are mounted before children (no mount lands below a later one);
//! - masks come after the binds they shadow (a later bind at or above a mask would
//!   uncover what it hides);
//! - only the workspace and the writable paths are bound read-write, and the Landlock
//!   roots and the ruleset built from them (`Plan::walls`) grant write nowhere else;
//! - the data dir is masked wherever a bind would make it visible, and layer 2 refuses
//!   a data dir beneath one of its roots;
//! - a root host's layer 2, whose Landlock rules are split in a shared and a per-command
//!   layer, grants under both layers exactly what the rules grant in one ruleset.
//!
//! The input drives `arbitrary`: a small file system of directories, files and symlinks
//! over a tiny alphabet of names (so that paths collide), and a policy over the same
//! paths. No real file system is touched.

#![no_main]

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use stockade::Policy;
use stockade::plan::{
    Access, Grant, HostFs, Ids, Kind, Plan, PrivateEntry, RulesetSpec, Step,
};

const NAMES: &[&str] = &[
    "ws", "a", "data", "etc", "usr", "shadow", "bin", "tmp", "srv", ".git", "hooks", "x",
];

struct Fake(BTreeMap<PathBuf, Kind>);

impl HostFs for Fake {
    fn kind(&self, path: &Path) -> Option<Kind> {
        self.0.get(path).cloned()
    }
    fn children(&self, dir: &Path) -> Vec<PathBuf> {
        self.0
            .keys()
            .filter(|k| k.parent() == Some(dir))
            .cloned()
            .collect()
    }
    /// Entries named `x` beneath the roots are private (for a root host).
    fn private_entries(&self, roots: &[PathBuf]) -> Vec<PrivateEntry> {
        self.0
            .iter()
            .filter(|(p, k)| {
                p.file_name() == Some("x".as_ref())
                    && !matches!(k, Kind::Symlink(_))
                    && roots.iter().any(|r| p.starts_with(r))
            })
            .map(|(p, k)| PrivateEntry {
                path: p.clone(),
                dir: *k == Kind::Dir,
            })
            .collect()
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        let enoent = || std::io::Error::from_raw_os_error(libc::ENOENT);
        let mut todo: Vec<PathBuf> = path
            .components()
            .rev()
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect();
        let mut cur = PathBuf::from("/");
        let mut hops = 0;
        while let Some(c) = todo.pop() {
            match c.components().next() {
                Some(Component::RootDir) => cur = PathBuf::from("/"),
                Some(Component::ParentDir) => {
                    cur.pop();
                }
                Some(Component::Normal(n)) => {
                    let next = cur.join(n);
                    match self.0.get(&next) {
                        None => return Err(enoent()),
                        Some(Kind::Symlink(t)) => {
                            hops += 1;
                            if hops > 40 {
                                return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
                            }
                            todo.extend(t.components().rev().map(|c| PathBuf::from(c.as_os_str())));
                        }
                        Some(Kind::File) if !todo.is_empty() => {
                            return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR));
                        }
                        Some(_) => cur = next,
                    }
                }
                _ => {}
            }
        }
        Ok(cur)
    }
}

fn path(u: &mut Unstructured<'_>) -> Result<PathBuf> {
    let mut p = PathBuf::from("/");
    for _ in 0..u.int_in_range(1..=4)? {
        p.push(u.choose(NAMES)?);
    }
    Ok(p)
}

fn fake(u: &mut Unstructured<'_>) -> Result<Fake> {
    let mut m = BTreeMap::new();
    for d in ["/usr", "/etc", "/ws", "/tmp"] {
        m.insert(PathBuf::from(d), Kind::Dir);
    }
    m.insert("/etc/shadow".into(), Kind::File);
    for _ in 0..u.int_in_range(0..=12)? {
        let p = path(u)?;
        let kind = match u.int_in_range(0..=2)? {
            0 => Kind::Dir,
            1 => Kind::File,
            _ if u.arbitrary()? => Kind::Symlink(path(u)?),
            _ => Kind::Symlink(PathBuf::from(u.choose(NAMES)?)),
        };
        m.insert(p, kind);
    }
    // Every ancestor of an entry is a directory, or the entry is unreachable: drop it.
    let entries: Vec<PathBuf> = m.keys().cloned().collect();
    for p in entries {
        let reachable = p
            .ancestors()
            .skip(1)
            .filter(|a| *a != Path::new("/"))
            .all(|a| matches!(m.get(a), None | Some(Kind::Dir)));
        if !reachable {
            m.remove(&p);
            continue;
        }
        for a in p.ancestors().skip(1).filter(|a| *a != Path::new("/")) {
            m.entry(a.to_path_buf()).or_insert(Kind::Dir);
        }
    }
    Ok(Fake(m))
}

fn policy(u: &mut Unstructured<'_>) -> Result<Policy> {
    let mut p = Policy::with_workspace(if u.arbitrary()? {
        PathBuf::from("/ws")
    } else {
        path(u)?
    });
    let paths = |u: &mut Unstructured<'_>| -> Result<Vec<PathBuf>> {
        (0..u.int_in_range(0..=2)?).map(|_| path(u)).collect()
    };
    p.writable_paths = paths(u)?;
    p.read_only = paths(u)?;
    if u.arbitrary()? {
        p.masked.extend(paths(u)?);
    }
    p.data_dir = u.arbitrary::<bool>()?.then(|| path(u)).transpose()?;
    p.tools_dir = u.arbitrary::<bool>()?.then(|| path(u)).transpose()?;
    if u.arbitrary()? {
        p.deny_names = vec![u.choose(NAMES)?.to_string()];
    }
    if u.arbitrary()? {
        p.guard_names = vec![format!("{}/{}", u.choose(NAMES)?, u.choose(NAMES)?)];
    }
    p.network = if u.arbitrary()? {
        stockade::Network::None
    } else {
        stockade::Network::Full
    };
    p.keep_session = u.arbitrary()?;
    Ok(p)
}

/// The mount destinations of a step.
fn mounts(s: &Step) -> Vec<(PathBuf, bool)> {
    match s {
        Step::Bind { dst, .. } | Step::Tmpfs { dst, .. } => vec![(dst.clone(), false)],
        Step::Symlink { link, .. } => vec![(link.clone(), false)],
        Step::Pin { path, .. }
        | Step::GuardPin { path }
        | Step::GuardName { path }
        | Step::GitLayer { path, .. } => vec![(path.clone(), false)],
        Step::Dev { .. } => vec![("/dev".into(), false)],
        Step::Proc { .. } => vec![("/proc".into(), false)],
        Step::Mask { path, .. } | Step::HideName { path } => vec![(path.clone(), true)],
        _ => Vec::new(),
    }
}

fn check_full(policy: &Policy, fs: &Fake, plan: &Plan) {
    let seq: Vec<(usize, PathBuf, bool)> = plan
        .steps
        .iter()
        .enumerate()
        .flat_map(|(i, s)| mounts(s).into_iter().map(move |(p, m)| (i, p, m)))
        .collect();
    for (k, (i, later, later_mask)) in seq.iter().enumerate() {
        for (j, earlier, earlier_mask) in &seq[..k] {
            if j == i {
                continue;
            }
            assert!(
                !(earlier != later && earlier.starts_with(later)),
                "{} mounted after its child {}\n{:#?}",
                later.display(),
                earlier.display(),
                plan.steps
            );
            assert!(
                !(*earlier_mask && !later_mask && earlier.starts_with(later)),
                "mask {} uncovered by the later mount {}\n{:#?}",
                earlier.display(),
                later.display(),
                plan.steps
            );
        }
    }
    // The `.git` layer: only at the top of a writable root, only when a guard name under
    // `.git` asks for it, and then no read-only bind guards anything in that `.git` (it
    // would land on the layer, or pin the directory the layer is mounted on).
    let git_guards = policy.guard_names.iter().any(|n| stockade::plan::is_git_name(n));
    let layers: Vec<&PathBuf> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::GitLayer { path, .. } => Some(path),
            _ => None,
        })
        .collect();
    for path in &layers {
        assert!(git_guards, "a .git layer without a guard name under .git");
        let root = path.parent().unwrap();
        assert!(
            path.ends_with(".git")
                && plan.steps.iter().any(|b| matches!(b, Step::Bind { dst, access: Access::ReadWrite, .. } if dst == root)),
            "{} layered outside a writable root\n{:#?}",
            path.display(),
            plan.steps
        );
    }
    for s in &plan.steps {
        if let Step::GuardName { path } | Step::GuardPin { path } = s {
            assert!(
                !layers.iter().any(|l| path.starts_with(l)),
                "{} guarded by a bind inside a .git layer\n{:#?}",
                path.display(),
                plan.steps
            );
        }
    }
    // Writable: the workspace and the writable paths, nothing else.
    let mut allowed = vec![plan.workspace.clone()];
    allowed.extend(
        policy
            .writable_paths
            .iter()
            .filter_map(|p| fs.canonicalize(p).ok()),
    );
    for s in &plan.steps {
        if let Step::Bind {
            src,
            dst,
            access: Access::ReadWrite,
            ..
        } = s
        {
            assert!(
                src == dst && allowed.contains(dst),
                "{} bound writable",
                dst.display()
            );
        }
    }
    for (root, access) in &plan.roots {
        if *access == Access::ReadWrite {
            assert!(allowed.contains(root), "{} a writable root", root.display());
        }
    }
    check_walls(plan, &allowed);
    // Every bind by path has its Landlock grant, with its own access: the grants are
    // derived from the mounts (a writable path once had none).
    for s in &plan.steps {
        if let Step::Bind {
            dst,
            access,
            beneath: None,
            ..
        } = s
        {
            assert!(
                // Its own access, or read-write where a writable bind of the same path
                // (a workspace that is a system directory) lands on top of it.
                plan.roots
                    .iter()
                    .any(|(r, a)| r == dst && (a == access || *a == Access::ReadWrite)),
                "{} bound without its grant",
                dst.display()
            );
        }
    }
    // The data dir: its content, which lives at its canonical path, is masked wherever
    // a bind makes it visible. Inside a writable root the mask goes on the lexical path,
    // which the child opens without following symlinks (a data dir that is a symlink
    // there fails the spawn with ELOOP instead of being resolved).
    if let Some(d) = &policy.data_dir {
        let covered = |x: &PathBuf| {
            plan.steps
                .iter()
                .any(|s| matches!(s, Step::Mask { path, dir: true, .. } if x.starts_with(path)))
        };
        let visible = |x: &PathBuf| {
            plan.steps
                .iter()
                .any(|s| matches!(s, Step::Bind { dst, dir: true, .. } if x.starts_with(dst)))
        };
        let inside_rw = allowed.iter().any(|r| d.starts_with(r));
        let target = fs.canonicalize(d).unwrap_or_else(|_| d.clone());
        if inside_rw {
            assert!(
                covered(d),
                "data dir {} in a writable root and not masked ({policy:?})\n{:#?}",
                d.display(),
                plan.steps
            );
        } else if visible(&target) {
            assert!(
                covered(&target),
                "data dir {} (at {}) visible and not masked ({policy:?})\n{:#?}",
                d.display(),
                target.display(),
                plan.steps
            );
        }
    }
}

/// The ruleset the backend builds from the plan (`Plan::walls`) grants write only to the
/// workspace and the writable paths, as the roots do.
fn check_walls(plan: &Plan, allowed: &[PathBuf]) {
    let spec = &plan.walls.landlock.as_ref().expect("Landlock rules").spec;
    assert_eq!(spec.workspace, plan.workspace);
    for rule in &spec.rules {
        if rule.grant == Grant::ReadWrite {
            assert!(
                allowed.contains(&rule.path),
                "{} granted write",
                rule.path.display()
            );
        }
    }
}

fn check_landlock(policy: &Policy, fs: &Fake, plan: &Plan) {
    if let Some(d) = &policy.data_dir {
        for (root, _) in &plan.roots {
            assert!(
                !d.starts_with(root),
                "layer 2 allows {} over the data dir",
                root.display()
            );
        }
    }
    let mut allowed = vec![plan.workspace.clone()];
    allowed.extend(
        policy
            .writable_paths
            .iter()
            .filter_map(|p| fs.canonicalize(p).ok()),
    );
    for (root, access) in &plan.roots {
        if *access == Access::ReadWrite {
            assert!(allowed.contains(root), "{} a writable root", root.display());
        }
    }
    check_walls(plan, &allowed);
}

/// The rights a ruleset grants at `path` (its rules on `path` and every directory above
/// it, and the workspace's), in a model of Landlock's: read, list, execute, write, ioctl.
fn rights(spec: &RulesetSpec, path: &Path) -> u8 {
    let bits = |g: Grant| match g {
        Grant::ReadExec => 0b00111,
        Grant::Read => 0b00011,
        Grant::ReadWrite => 0b11111,
        Grant::Device => 0b11011,
        Grant::ListDir => 0b00010,
        _ => unreachable!("a grant the model does not know"),
    };
    let mut all = if path.starts_with(&spec.workspace) {
        bits(Grant::ReadWrite)
    } else {
        0
    };
    for rule in spec.rules.iter().filter(|r| path.starts_with(&r.path)) {
        all |= bits(rule.grant);
    }
    all
}

/// A root host's layer 2 split in two Landlock layers grants, at every path of the host
/// and beside them, exactly what its rules and a command's own grant in one ruleset.
fn check_split(fs: &Fake, plan: &Plan) {
    let rules = plan.walls.landlock.as_ref().expect("Landlock rules");
    let Some(split) = &rules.split else {
        return;
    };
    // The sandbox's own directory in the temporary directory holds the commands' TMPDIRs.
    let parent = split.tmp_root.join("stockade-sandbox-p");
    let shared = split.shared_with(&parent);
    let tmp = parent.join("stockade-tmp-a");
    let tty = PathBuf::from("/dev/pts/3");
    let exact = rules
        .spec
        .clone()
        .with(&tmp, Grant::ReadWrite)
        .with(&tty, Grant::Device);
    let command = rules.for_command(Some(&tmp), std::slice::from_ref(&tty));
    let mut probes: Vec<PathBuf> = fs.0.keys().cloned().collect();
    probes.extend(fs.0.keys().map(|k| k.join("later")));
    probes.extend(
        ["/", "/dev/pts/4", "/dev/null", "/proc/1/mem"]
            .map(PathBuf::from)
            .into_iter()
            .chain([
                tmp.join("f"),
                parent.join("stockade-tmp-b/f"),
                split.tmp_root.join("x"),
                tty,
            ]),
    );
    for path in &probes {
        assert_eq!(
            rights(&command, path) & rights(&shared, path),
            rights(&exact, path),
            "{} ({plan:#?})",
            path.display()
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let (Ok(fs), Ok(policy)) = (fake(&mut u), policy(&mut u)) else {
        return;
    };
    if policy.validate().is_err() {
        return;
    }
    let ids = Ids {
        uid: 1000,
        gid: 1000,
        host_root: false,
    };
    if let Ok(plan) = Plan::full(&policy, &fs, ids) {
        check_full(&policy, &fs, &plan);
    }
    if let Ok(plan) = Plan::landlock(&policy, &fs, ids) {
        check_landlock(&policy, &fs, &plan);
    }
    let root = Ids {
        uid: 0,
        gid: 0,
        host_root: true,
    };
    if let Ok(plan) = Plan::landlock(&policy, &fs, root) {
        check_landlock(&policy, &fs, &plan);
        check_split(&fs, &plan);
    }
});
