use super::*;
use crate::error::NodeKind;
use crate::policy::Network;
use std::collections::BTreeMap;

/// A fake host: path -> kind; canonicalize resolves only listed symlinks at the top.
struct Fake(BTreeMap<PathBuf, Kind>);

impl Fake {
    fn new() -> Self {
        let mut m = BTreeMap::new();
        for d in [
            "/",
            "/usr",
            "/etc",
            "/opt",
            "/ws",
            "/ws/a",
            "/ws/a/data",
            "/srv/shared",
        ] {
            m.insert(PathBuf::from(d), Kind::Dir);
        }
        m.insert("/bin".into(), Kind::Symlink("usr/bin".into()));
        m.insert("/etc/shadow".into(), Kind::File);
        Fake(m)
    }
}

impl HostFs for Fake {
    fn kind(&self, path: &Path) -> Option<Kind> {
        self.0.get(path).cloned()
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        match self.0.get(path) {
            Some(_) => Ok(path.to_path_buf()),
            None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
        }
    }
}

const IDS: Ids = Ids {
    uid: 1000,
    gid: 1000,
    host_root: false,
};

fn position(plan: &Plan, f: impl Fn(&Step) -> bool) -> usize {
    plan.steps.iter().position(f).expect("step present")
}

#[test]
fn data_dir_mask_comes_after_the_workspace_bind_and_its_pins() {
    let mut p = Policy::with_workspace("/ws");
    p.data_dir = Some("/ws/a/data".into());
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    let ws = position(
        &plan,
        |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/ws")),
    );
    let pin = position(
        &plan,
        |s| matches!(s, Step::Pin { path, .. } if path == Path::new("/ws/a")),
    );
    let mask = position(
        &plan,
        |s| matches!(s, Step::Mask { path, .. } if path == Path::new("/ws/a/data")),
    );
    assert!(ws < pin && pin < mask, "{:#?}", plan.steps);
    assert!(matches!(
        &plan.steps[mask],
        Step::Mask {
            beneath: Some(_),
            ..
        }
    ));
}

#[test]
fn guard_pins_come_before_deeper_binds() {
    // Found by the `plan` fuzz target: a guard's pin of /tmp/tmp/tmp sorted by the
    // guarded path's depth landed over the deeper read-only bind below it.
    let mut fake = Fake::new();
    for d in ["/tmp/tmp", "/tmp/tmp/tmp", "/tmp/tmp/tmp/tmp"] {
        fake.0.insert(PathBuf::from(d), Kind::Dir);
    }
    let mut p = Policy::with_workspace("/ws");
    p.writable_paths = vec!["/tmp/tmp".into()];
    p.read_only = vec!["/tmp/tmp/tmp/tmp".into()];
    p.guard_names = vec!["tmp/tmp".into()];
    let plan = Plan::full(&p, &fake, IDS).unwrap();
    let pin = position(
        &plan,
        |s| matches!(s, Step::GuardPin { path } if path == Path::new("/tmp/tmp/tmp")),
    );
    let ro = position(
        &plan,
        |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/tmp/tmp/tmp/tmp")),
    );
    assert!(pin < ro, "{:#?}", plan.steps);
}

#[test]
fn nothing_uncovers_a_mask() {
    // Found by the `plan` fuzz target: a guard name at the data dir re-bound it.
    let mut fake = Fake::new();
    fake.0.insert("/srv/shared/g".into(), Kind::Dir);
    fake.0.insert("/srv/shared/g/x".into(), Kind::Dir);
    let mut p = Policy::with_workspace("/ws");
    p.writable_paths = vec!["/srv/shared".into()];
    p.data_dir = Some("/srv/shared/g".into());
    p.guard_names = vec!["g".into(), "g/x".into()];
    let plan = Plan::full(&p, &fake, IDS).unwrap();
    assert!(
        !plan.steps.iter().any(|s| matches!(s, Step::GuardName { path } | Step::GuardPin { path } if path.starts_with("/srv/shared/g"))),
        "{:#?}",
        plan.steps
    );
    p.read_only = vec!["/srv/shared/g/x".into()];
    let err = Plan::full(&p, &fake, IDS).unwrap_err();
    assert!(err.to_string().contains("inside the hidden path"), "{err}");
    assert!(
        matches!(&err, PlanError::Conflict(Conflict::BindBeneathHidden { bind, hidden })
            if bind == Path::new("/srv/shared/g/x") && hidden == Path::new("/srv/shared/g")),
        "{err:?}"
    );
}

#[test]
fn parents_are_mounted_before_children() {
    let mut p = Policy::with_workspace("/ws");
    p.writable_paths = vec!["/srv/shared".into()];
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    let mut seen: Vec<PathBuf> = Vec::new();
    for s in &plan.steps {
        let dst = match s {
            Step::Bind { dst, .. } | Step::Tmpfs { dst, .. } => dst.clone(),
            Step::Mask { path, .. }
            | Step::Pin { path, .. }
            | Step::GuardPin { path }
            | Step::GuardName { path }
            | Step::GitLayer { path, .. }
            | Step::HideName { path } => path.clone(),
            _ => continue,
        };
        assert!(
            !seen
                .iter()
                .any(|earlier| earlier != &dst && is_within(earlier, &dst)),
            "{} mounted after a child of it",
            dst.display()
        );
        seen.push(dst);
    }
}

#[test]
fn symlinked_system_dirs_stay_symlinks_and_shadow_is_masked() {
    let plan = Plan::full(&Policy::with_workspace("/ws"), &Fake::new(), IDS).unwrap();
    assert!(plan.steps.contains(&Step::Symlink {
        link: "/bin".into(),
        target: "usr/bin".into()
    }));
    let etc = position(
        &plan,
        |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/etc")),
    );
    let shadow = position(
        &plan,
        |s| matches!(s, Step::Mask { path, .. } if path == Path::new("/etc/shadow")),
    );
    assert!(etc < shadow);
}

#[test]
fn writable_paths_inside_the_workspace_are_not_bound_again() {
    let mut p = Policy::with_workspace("/ws");
    p.writable_paths = vec!["/ws/a".into()];
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    assert!(
        !plan
            .steps
            .iter()
            .any(|s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/ws/a")))
    );
}

/// A fake host with unix sockets and private entries.
struct Hostile(Fake);

impl HostFs for Hostile {
    fn kind(&self, path: &Path) -> Option<Kind> {
        self.0.kind(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.0.canonicalize(path)
    }
    fn children(&self, dir: &Path) -> Vec<PathBuf> {
        (self.0)
            .0
            .keys()
            .filter(|k| k.parent() == Some(dir))
            .cloned()
            .collect()
    }
    fn unix_sockets(&self) -> Vec<PathBuf> {
        ["/opt/svc/s.sock", "/opt/named.sock", "/run/x.sock"]
            .map(PathBuf::from)
            .to_vec()
    }
    fn private_entries(&self, roots: &[PathBuf]) -> Vec<PrivateEntry> {
        [
            ("/etc/tls/key.pem", false),
            ("/opt/app", true),
            ("/etc/shadow", false),
            ("/srv/ro/secret", false),
        ]
        .into_iter()
        .map(|(p, dir)| PrivateEntry {
            path: p.into(),
            dir,
        })
        .filter(|e| roots.iter().any(|r| e.path.starts_with(r)))
        .collect()
    }
}

const ROOT: Ids = Ids {
    uid: 0,
    gid: 0,
    host_root: true,
};

fn hostile() -> Hostile {
    let mut f = Fake::new();
    for d in [
        "/opt/svc",
        "/etc/tls",
        "/opt/app",
        "/opt/app/models",
        "/run",
    ] {
        f.0.insert(d.into(), Kind::Dir);
    }
    for x in [
        "/opt/svc/s.sock",
        "/opt/named.sock",
        "/run/x.sock",
        "/etc/tls/key.pem",
        "/etc/tls/ca.pem",
        "/etc/hosts",
    ] {
        f.0.insert(x.into(), Kind::File);
    }
    Hostile(f)
}

/// The paths `pick` takes from the plan's steps, in order.
fn paths(plan: &Plan, pick: impl Fn(&Step) -> Option<&PathBuf>) -> Vec<PathBuf> {
    plan.steps.iter().filter_map(pick).cloned().collect()
}

fn masks(plan: &Plan) -> Vec<PathBuf> {
    paths(plan, |s| match s {
        Step::Mask { path, .. } => Some(path),
        _ => None,
    })
}

#[test]
fn host_sockets_under_the_allowlist_are_masked_unless_named() {
    let mut p = Policy::with_workspace("/ws");
    p.read_only = vec!["/opt/named.sock".into()];
    let plan = Plan::full(&p, &hostile(), IDS).unwrap();
    let m = masks(&plan);
    assert!(m.contains(&"/opt/svc/s.sock".into()), "{m:?}");
    assert!(!m.contains(&"/opt/named.sock".into()), "{m:?}");
    // Not bound at all: nothing to mask.
    assert!(!m.contains(&"/run/x.sock".into()), "{m:?}");
    // A user host has no private entries masked (it reads only what it may).
    assert!(!m.contains(&"/etc/tls/key.pem".into()), "{m:?}");
}

#[test]
fn a_root_host_masks_what_others_may_not_read_except_around_named_paths() {
    let mut p = Policy::with_workspace("/ws");
    let plan = Plan::full(&p, &hostile(), ROOT).unwrap();
    let m = masks(&plan);
    assert!(m.contains(&"/etc/tls/key.pem".into()), "{m:?}");
    assert!(m.contains(&"/opt/app".into()), "{m:?}");
    // Once only, though `masked` lists it too.
    assert_eq!(
        m.iter().filter(|x| *x == Path::new("/etc/shadow")).count(),
        1
    );
    // The policy binds a path below a private dir: that dir is left alone.
    p.read_only = vec!["/opt/app/models".into()];
    let m = masks(&Plan::full(&p, &hostile(), ROOT).unwrap());
    assert!(!m.contains(&"/opt/app".into()), "{m:?}");
    assert!(m.contains(&"/etc/tls/key.pem".into()), "{m:?}");
}

/// The hostile host where every root takes idmapped binds and `/opt/app` is closed to
/// "others".
struct Idmapping(Hostile);

impl HostFs for Idmapping {
    fn kind(&self, path: &Path) -> Option<Kind> {
        self.0.kind(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.0.canonicalize(path)
    }
    fn unix_sockets(&self) -> Vec<PathBuf> {
        let mut s = self.0.unix_sockets();
        s.push("/opt/app/inner.sock".into());
        s
    }
    fn private_entries(&self, roots: &[PathBuf]) -> Vec<PrivateEntry> {
        self.0.private_entries(roots)
    }
    fn idmap(&self, _root: &Path) -> bool {
        true
    }
    fn others_may_enter(&self, dir: &Path) -> bool {
        dir != Path::new("/opt/app")
    }
}

fn idmapped(plan: &Plan) -> Vec<PathBuf> {
    paths(plan, |s| match s {
        Step::Bind {
            dst, idmap: true, ..
        } => Some(dst),
        _ => None,
    })
}

#[test]
fn a_root_host_binds_read_only_roots_idmapped_instead_of_walking_them() {
    let mut host = hostile();
    host.0.0.insert("/opt/app/inner.sock".into(), Kind::File);
    let host = Idmapping(host);
    let p = Policy::with_workspace("/ws");
    let plan = Plan::full(&p, &host, ROOT).unwrap();
    let ids = idmapped(&plan);
    assert!(
        ids.contains(&"/etc".into()) && ids.contains(&"/opt".into()),
        "{ids:?}"
    );
    let m = masks(&plan);
    // Nothing walked: the private entries are closed by "others" permissions alone.
    assert!(!m.contains(&"/etc/tls/key.pem".into()), "{m:?}");
    assert!(!m.contains(&"/opt/app".into()), "{m:?}");
    // Sockets are still masked (connect needs only write permission on a socket, which
    // most have for others), except beneath a closed directory: unreachable, and the
    // child could not reach it to mount either.
    assert!(m.contains(&"/opt/svc/s.sock".into()), "{m:?}");
    assert!(!m.contains(&"/opt/app/inner.sock".into()), "{m:?}");
    // The default masks stay (reachable ones).
    assert!(m.contains(&"/etc/shadow".into()), "{m:?}");

    // A path the policy needs beneath a closed directory: that root is walked instead
    // (the program must reach it), the others stay idmapped.
    let mut p = Policy::with_workspace("/ws");
    p.read_only = vec!["/opt/app/models".into()];
    let plan = Plan::full(&p, &host, ROOT).unwrap();
    let ids = idmapped(&plan);
    assert!(!ids.contains(&"/opt".into()), "{ids:?}");
    assert!(ids.contains(&"/etc".into()), "{ids:?}");
    let m = masks(&plan);
    assert!(!m.contains(&"/opt/app".into()), "{m:?}");
    assert!(!m.contains(&"/etc/tls/key.pem".into()), "{m:?}");

    // A writable root at a system root's path keeps a writable bind of its own.
    let plan = Plan::full(&Policy::with_workspace("/opt"), &host, ROOT).unwrap();
    let opt = |access: Access, idmap: bool| {
        plan.steps.iter().any(|s| {
            matches!(s, Step::Bind { dst, access: a, idmap: i, .. }
                if dst == Path::new("/opt") && *a == access && *i == idmap)
        })
    };
    assert!(opt(Access::ReadOnly, true) && opt(Access::ReadWrite, false));
    assert!(!opt(Access::ReadWrite, true));

    // A user host: nothing idmapped.
    let user = Ids {
        uid: 1000,
        gid: 1000,
        host_root: false,
    };
    assert!(idmapped(&Plan::full(&Policy::with_workspace("/ws"), &host, user).unwrap()).is_empty());
}

#[test]
fn layer_two_for_a_root_host_grants_around_hidden_entries() {
    let p = Policy::with_workspace("/ws");
    let plan = Plan::landlock(&p, &hostile(), ROOT).unwrap();
    let has = |x: &str, a: Access| plan.roots.contains(&(PathBuf::from(x), a));
    assert!(has("/etc", Access::ListDir));
    assert!(has("/etc/tls", Access::ListDir));
    assert!(has("/etc/tls/ca.pem", Access::ReadOnly));
    assert!(has("/etc/hosts", Access::ReadOnly));
    assert!(has("/usr", Access::ReadOnly));
    for (r, _) in plan.roots.iter().filter(|(_, a)| *a != Access::ListDir) {
        for hidden in ["/etc/tls/key.pem", "/etc/shadow", "/opt/app"] {
            assert!(
                !Path::new(hidden).starts_with(r),
                "{} grants {hidden}",
                r.display()
            );
        }
    }
    // A user host keeps whole-directory grants.
    let plan = Plan::landlock(&p, &hostile(), IDS).unwrap();
    assert!(plan.roots.contains(&("/etc".into(), Access::ReadOnly)));
}

/// The rights a ruleset grants at `path` (its rules on `path` and every directory above
/// it, and the workspace's), in a model of Landlock's: read, list, execute, write, ioctl.
fn rights(spec: &RulesetSpec, path: &Path) -> u8 {
    const R: u8 = 1;
    const L: u8 = 2;
    const X: u8 = 4;
    const W: u8 = 8;
    const I: u8 = 16;
    let bits = |g: Grant| match g {
        Grant::ReadExec => R | L | X,
        Grant::Read => R | L,
        Grant::ReadWrite => R | L | X | W | I,
        Grant::Device => R | L | W | I,
        Grant::ListDir => L,
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

/// The hostile host with a temporary directory and `/dev/pts`.
fn hostile_with_tmp() -> Hostile {
    let mut h = hostile();
    for d in ["/tmp", "/dev", "/dev/pts", "/srv/ro", "/opt/svc/deep"] {
        h.0.0.insert(d.into(), Kind::Dir);
    }
    for f in ["/srv/ro/secret", "/srv/ro/public"] {
        h.0.0.insert(f.into(), Kind::File);
    }
    h
}

/// The sandbox's own directory for its commands' `TMPDIR`s, in the probes.
const TMP_PARENT: &str = "/tmp/stockade-sandbox-p";

/// Asserts that a command of `plan` (its `TMPDIR` `/tmp/stockade-sandbox-p/stockade-tmp-a`,
/// its terminal `/dev/pts/3`) gets the same rights at each of `paths` under the split
/// layers as under the plan's rules in one ruleset.
fn assert_split_is_exact(plan: &Plan, paths: &[&str]) {
    let rules = plan.walls.landlock.as_ref().unwrap();
    let split = split_of(plan);
    let shared = split.shared_with(Path::new(TMP_PARENT));
    let (tmp, tty) = (
        Path::new("/tmp/stockade-sandbox-p/stockade-tmp-a"),
        PathBuf::from("/dev/pts/3"),
    );
    let exact = rules
        .spec
        .clone()
        .with(tmp, Grant::ReadWrite)
        .with(&tty, Grant::Device);
    let command = rules.for_command(Some(tmp), std::slice::from_ref(&tty));
    for path in paths.iter().map(Path::new) {
        assert_eq!(
            rights(&command, path) & rights(&shared, path),
            rights(&exact, path),
            "{}",
            path.display()
        );
    }
}

/// What a program may try on the hostile host: private entries, entries made later,
/// other commands' `TMPDIR`s and terminals, paths next to the granted ones.
const PROBES: &[&str] = &[
    "/etc",
    "/etc/hosts",
    "/etc/shadow",
    "/etc/added-later",
    "/etc/tls",
    "/etc/tls/ca.pem",
    "/etc/tls/key.pem",
    "/opt",
    "/opt/app",
    "/opt/app/models/m",
    "/opt/app/other",
    "/opt/svc/s.sock",
    "/opt/svc/x",
    "/opt/named.sock",
    "/usr/bin/sh",
    "/ws/src/main.rs",
    "/ws/a/data/x",
    "/srv/shared/x",
    "/srv/other",
    "/tmp/stockade-sandbox-p/stockade-tmp-a/f",
    "/tmp/stockade-sandbox-p/stockade-tmp-b/f",
    "/tmp/stockade-sandbox-p/x",
    "/tmp/stockade-sandbox-q/stockade-tmp-c/f",
    "/tmp/x",
    "/dev/pts/3",
    "/dev/pts/4",
    "/dev/null",
    "/dev/shm/x",
    "/proc/1/status",
    "/root/.ssh/id_ed25519",
    "/",
];

/// The two Landlock layers of a layer-2 plan that has them.
fn split_of(plan: &Plan) -> &SplitRules {
    let rules = plan.walls.landlock.as_ref().expect("landlock rules");
    rules.split.as_ref().expect("split")
}

#[test]
fn layer_two_for_a_root_host_splits_its_rules_into_two_layers_that_grant_exactly_them() {
    let mut p = Policy::with_workspace("/ws");
    p.writable_paths = vec!["/srv/shared".into()];
    let plan = Plan::landlock(&p, &hostile_with_tmp(), ROOT).unwrap();
    let rules = plan.walls.landlock.as_ref().unwrap();
    let split = rules.split.as_ref().expect("split");
    assert_eq!(split.tmp_root, Path::new("/tmp"));
    assert_eq!(plan.private_tmp_root(), Some(Path::new("/tmp")));
    let listed: Vec<&str> = split.listed.iter().map(|p| p.to_str().unwrap()).collect();
    assert_eq!(listed, ["/etc", "/etc/tls", "/opt"]);
    // The shared layer: the one ruleset's own rules (within the roots granted entry by
    // entry and elsewhere), and the sandbox's own directory in the temporary directory
    // and `/dev/pts` whole for the commands' TMPDIRs and terminals.
    // Never a wider directory: a host bind mount beneath one would reach a private file
    // through it, past the entry-by-entry rules. Paths only. Not the temporary directory
    // itself either: a host may bind a read-only root beneath it.
    let with_parent = split.shared_with(Path::new(TMP_PARENT));
    let shared = |path: &str, grant: Grant| {
        with_parent.rules.contains(&PathRule {
            path: path.into(),
            grant,
        })
    };
    assert!(shared("/etc/tls/ca.pem", Grant::ReadExec) && shared("/opt", Grant::ListDir));
    assert!(shared(TMP_PARENT, Grant::ReadWrite));
    assert!(
        !split
            .shared
            .rules
            .iter()
            .any(|r| r.path.starts_with("/tmp"))
    );
    for rule in &with_parent.rules {
        // Besides: the sandbox's directory, and `/dev/pts` for the commands' terminals
        // (devpts holds no directory a bind mount could sit beneath).
        let single = rules.spec.rules.contains(rule)
            || rule.path == Path::new(TMP_PARENT)
            || *rule
                == PathRule {
                    path: "/dev/pts".into(),
                    grant: Grant::Device,
                };
        assert!(single, "{rule:?} is not a rule of the single ruleset");
    }
    for wider in ["/srv", "/dev", "/var", "/tmp", "/"] {
        assert!(
            !with_parent.rules.iter().any(|r| r.path == Path::new(wider)),
            "{wider}"
        );
    }
    assert!(split.shared.scope && !split.shared.deny_tcp);
    // The command's layer: a few rules, the read-only roots whole.
    assert!(split.command.rules.len() < rules.spec.rules.len());
    assert!(split.command.scope);
    assert_split_is_exact(&plan, PROBES);
    // A writable path and a read-only one within roots granted entry by entry.
    p.writable_paths.push("/opt/svc".into());
    p.read_only = vec!["/opt/app/models".into()];
    let plan = Plan::landlock(&p, &hostile_with_tmp(), ROOT).unwrap();
    assert_split_is_exact(&plan, PROBES);
    // A root granted entry by entry next to a writable path: the shared layer grants the
    // writable path itself, not their common parent.
    p.read_only = vec!["/srv/ro".into()];
    let plan = Plan::landlock(&p, &hostile_with_tmp(), ROOT).unwrap();
    let split = split_of(&plan);
    assert!(split.listed.contains(&PathBuf::from("/srv/ro")));
    assert!(
        !split
            .shared
            .rules
            .iter()
            .any(|r| r.path == Path::new("/srv"))
    );
    let mut probes = PROBES.to_vec();
    probes.extend([
        "/srv/ro",
        "/srv/ro/secret",
        "/srv/ro/public",
        "/srv/ro/later",
    ]);
    assert_split_is_exact(&plan, &probes);
    // The workspace within a root granted entry by entry (found by the fuzz target `plan`).
    let p = Policy::with_workspace("/opt/svc/deep");
    let plan = Plan::landlock(&p, &hostile_with_tmp(), ROOT).unwrap();
    let split = split_of(&plan);
    assert_eq!(split.shared.workspace, Path::new("/opt/svc/deep"));
    let mut probes = PROBES.to_vec();
    probes.extend(["/opt/svc/deep/f", "/opt/svc/other"]);
    assert_split_is_exact(&plan, &probes);
}

#[test]
fn layer_two_keeps_one_layer_where_two_would_grant_more() {
    let root = |p: &Policy| {
        let plan = Plan::landlock(p, &hostile_with_tmp(), ROOT).unwrap();
        plan.walls.landlock.unwrap().split
    };
    let p = Policy::with_workspace("/ws");
    assert!(root(&p).is_some());
    // A read-only root that holds the temporary directory or `/dev/pts`, or lies in it:
    // the command's layer grants it whole where the shared layer grants all of /tmp.
    for ro in ["/tmp", "/dev", "/dev/pts"] {
        let mut p = p.clone();
        p.read_only = vec![ro.into()];
        assert_eq!(root(&p), None, "{ro}");
    }
    // No temporary directory to fix; a user host (nothing granted entry by entry).
    assert!(
        Plan::landlock(&p, &hostile(), ROOT)
            .unwrap()
            .walls
            .landlock
            .unwrap()
            .split
            .is_none()
    );
    let plan = Plan::landlock(&p, &hostile_with_tmp(), IDS).unwrap();
    assert_eq!(plan.private_tmp_root(), None);
    assert!(plan.walls.landlock.unwrap().split.is_none());
}

#[test]
fn every_bind_by_path_has_a_grant_with_its_access() {
    let mut p = Policy::with_workspace("/ws/a");
    p.writable_paths = vec!["/srv/shared".into()];
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    assert_eq!(plan.roots[0], (PathBuf::from("/ws/a"), Access::ReadWrite));
    assert!(
        plan.roots
            .contains(&(PathBuf::from("/srv/shared"), Access::ReadWrite))
    );
    for s in &plan.steps {
        if let Step::Bind {
            dst,
            access,
            beneath: None,
            ..
        } = s
        {
            assert!(plan.roots.contains(&(dst.clone(), *access)), "{s}");
        }
    }
    // The ruleset the backend builds is these grants: the workspace, then each root with
    // the grant of its access.
    let spec = &plan.walls.landlock.as_ref().expect("Landlock rules").spec;
    assert_eq!(spec.workspace, plan.roots[0].0);
    for (path, access) in &plan.roots[1..] {
        let rule = crate::plan::PathRule {
            path: path.clone(),
            grant: crate::plan::Grant::from(*access),
        };
        assert!(spec.rules.contains(&rule), "{rule:?}");
    }
}

#[test]
fn a_data_dir_containing_the_workspace_is_refused() {
    let mut p = Policy::with_workspace("/ws/a");
    p.data_dir = Some("/ws".into());
    let err = Plan::full(&p, &Fake::new(), IDS).unwrap_err();
    assert!(err.to_string().contains("contains"), "{err}");
    assert!(
        matches!(&err, PlanError::Conflict(Conflict::DataDirContainsWritable { data_dir, writable })
            if data_dir == Path::new("/ws") && writable == Path::new("/ws/a")),
        "{err:?}"
    );
}

#[test]
fn missing_paths_are_named_in_the_error() {
    let mut p = Policy::with_workspace("/ws");
    p.writable_paths = vec!["/nope".into()];
    let err = Plan::full(&p, &Fake::new(), IDS).unwrap_err();
    assert!(err.to_string().contains("/nope"), "{err}");
    assert!(Plan::full(&Policy::default(), &Fake::new(), IDS).is_err());
}

/// A program can plant `sub -> /etc` in its workspace for the next run: a policy path that
/// is or passes through it is refused as it is outside the workspace, on both layers (a
/// writable path there was once skipped in silence, the caller getting nothing bound).
/// Also over a `HostFs` that does not list `/`: the check once stopped there, before the
/// first real component, and let every such path through (the plan fuzz target's host).
#[test]
fn configured_paths_through_a_symlink_in_the_workspace_are_refused_on_both_layers() {
    for listed_root in [true, false] {
        let mut fs = Fake::new();
        fs.0.insert("/ws/sub".into(), Kind::Symlink("/etc".into()));
        if !listed_root {
            fs.0.remove(Path::new("/"));
        }
        refused_through_the_symlink(&fs);
    }
}

fn refused_through_the_symlink(fs: &Fake) {
    type Set = fn(&mut Policy, PathBuf);
    let cases: [(&str, Set); 4] = [
        ("writable_paths", |p, v| p.writable_paths = vec![v]),
        ("read_only", |p, v| p.read_only = vec![v]),
        ("tools_dir", |p, v| p.tools_dir = Some(v)),
        ("data_dir", |p, v| p.data_dir = Some(v)),
    ];
    type Build = fn(&Policy, &dyn HostFs, Ids) -> Result<Plan, PlanError>;
    let layers: [(&str, Build); 2] = [("full", Plan::full), ("landlock", Plan::landlock)];
    for (layer, build) in layers {
        for via in ["/ws/sub", "/ws/sub/x"] {
            for (key, set) in cases {
                let mut p = Policy::with_workspace("/ws");
                set(&mut p, via.into());
                let err = build(&p, fs, IDS).unwrap_err();
                assert!(
                    matches!(&err, PlanError::Symlink { key: k, path, link, target }
                        if k == &key && path == Path::new(via) && link == Path::new("/ws/sub")
                            && target == Path::new("/etc")),
                    "{layer} {key} {via}: {err:?}"
                );
            }
        }
    }
}

#[test]
fn layer_two_refuses_a_data_dir_it_cannot_hide() {
    let mut p = Policy::with_workspace("/ws");
    p.data_dir = Some("/ws/a/data".into());
    let err = Plan::landlock(&p, &Fake::new(), IDS).unwrap_err();
    assert!(err.to_string().contains("cannot hide data_dir"), "{err}");
    assert!(
        matches!(&err, PlanError::Conflict(Conflict::LandlockCannotHide { key: "data_dir", path, allowed })
            if path == Path::new("/ws/a/data") && allowed == Path::new("/ws")),
        "{err:?}"
    );
    p.data_dir = Some("/srv/shared".into());
    let plan = Plan::landlock(&p, &Fake::new(), IDS).unwrap();
    assert!(plan.private_tmp);
    assert!(
        plan.roots
            .contains(&(PathBuf::from("/usr"), Access::ReadOnly))
    );
    assert_eq!(plan.steps.last(), Some(&Step::Seccomp));
}

#[test]
fn a_guard_name_under_a_denied_name_does_not_uncover_it() {
    let mut p = Policy::with_workspace("/ws");
    p.deny_names = vec![".git".into()];
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    assert!(plan.steps.contains(&Step::HideName {
        path: "/ws/.git".into()
    }));
    assert!(
        !plan
            .steps
            .iter()
            .any(|s| matches!(s, Step::GuardName { .. } | Step::GitLayer { .. })),
        "{:#?}",
        plan.steps
    );
}

fn git_layers(plan: &Plan) -> Vec<PathBuf> {
    paths(plan, |s| match s {
        Step::GitLayer { path, .. } => Some(path),
        _ => None,
    })
}

#[test]
fn git_guard_names_become_one_git_layer_per_writable_root() {
    let mut p = Policy::with_workspace("/ws");
    p.writable_paths = vec!["/srv/shared".into()];
    p.guard_names.push("build/out".into());
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    assert_eq!(
        git_layers(&plan),
        [PathBuf::from("/ws/.git"), PathBuf::from("/srv/shared/.git")]
    );
    for root in ["/ws", "/srv/shared"] {
        let bind = position(
            &plan,
            |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new(root)),
        );
        let layer = position(
            &plan,
            |s| matches!(s, Step::GitLayer { path, .. } if *path == Path::new(root).join(".git")),
        );
        assert!(bind < layer, "{:#?}", plan.steps);
    }
    // The `.git` names are the layer's now; the others stay read-only binds.
    assert!(
        !plan.steps.iter().any(|s| matches!(
            s,
            Step::GuardName { path } | Step::GuardPin { path } if path.ends_with(".git") || path.parent().is_some_and(|p| p.ends_with(".git"))
        )),
        "{:#?}",
        plan.steps
    );
    assert!(plan.steps.contains(&Step::GuardName {
        path: "/ws/build/out".into()
    }));
    p.guard_names = vec!["build/out".into()];
    assert!(git_layers(&Plan::full(&p, &Fake::new(), IDS).unwrap()).is_empty());
    // Layer 2 has no layer to offer (see SECURITY.md).
    p.guard_names = vec![".git/hooks".into()];
    assert!(git_layers(&Plan::landlock(&p, &Fake::new(), IDS).unwrap()).is_empty());
}

#[test]
fn a_read_only_git_is_not_layered_and_a_data_dir_inside_it_is_refused() {
    let mut fake = Fake::new();
    fake.0.insert("/ws/.git".into(), Kind::Dir);
    fake.0.insert("/ws/.git/data".into(), Kind::Dir);
    let mut p = Policy::with_workspace("/ws");
    p.read_only = vec!["/ws/.git".into()];
    let plan = Plan::full(&p, &fake, IDS).unwrap();
    assert!(git_layers(&plan).is_empty(), "{:#?}", plan.steps);
    p.read_only = vec!["/ws/.git/data".into()];
    assert_eq!(
        git_layers(&Plan::full(&p, &fake, IDS).unwrap()),
        [PathBuf::from("/ws/.git")]
    );
    p.read_only = Vec::new();
    p.data_dir = Some("/ws/.git/data".into());
    let err = Plan::full(&p, &fake, IDS).unwrap_err();
    assert!(err.to_string().contains("copy-on-write"), "{err}");
    assert!(
        matches!(&err, PlanError::Conflict(Conflict::HiddenInsideGitLayer { hidden, git })
            if hidden == Path::new("/ws/.git/data") && git == Path::new("/ws/.git")),
        "{err:?}"
    );
}

#[test]
fn conflicts_a_host_meets_are_matchable() {
    // A host matches which conflict its policy has, and finds the paths in it.
    let mut fake = Fake::new();
    fake.0.insert("/".into(), Kind::Dir);
    let root = Policy::with_workspace("/");
    for plan in [Plan::full, Plan::landlock] {
        assert!(matches!(
            plan(&root, &fake, IDS),
            Err(PlanError::Conflict(Conflict::WorkspaceIsRoot))
        ));
        assert!(matches!(
            plan(&Policy::default(), &fake, IDS),
            Err(PlanError::Conflict(Conflict::NoWorkspace))
        ));
    }
    // A read-only bind beneath the data dir would uncover part of it.
    let mut p = Policy::with_workspace("/ws");
    p.data_dir = Some("/ws/a".into());
    p.read_only = vec!["/ws/a/data".into()];
    match Plan::full(&p, &fake, IDS) {
        Err(PlanError::Conflict(Conflict::BindBeneathHidden { bind, hidden })) => {
            assert_eq!(
                (bind.as_path(), hidden.as_path()),
                (Path::new("/ws/a/data"), Path::new("/ws/a"))
            );
        }
        other => panic!("expected BindBeneathHidden, got {other:?}"),
    }
    // Layer 2 with the data dir under the workspace: the full layer can hide it, layer 2
    // cannot, and says beneath which allowed path it lies.
    p.read_only = Vec::new();
    assert!(Plan::full(&p, &fake, IDS).is_ok());
    match Plan::landlock(&p, &fake, IDS) {
        Err(PlanError::Conflict(Conflict::LandlockCannotHide { key, path, allowed })) => {
            assert_eq!(key, "data_dir");
            assert_eq!(
                (path.as_path(), allowed.as_path()),
                (Path::new("/ws/a"), Path::new("/ws"))
            );
        }
        other => panic!("expected LandlockCannotHide, got {other:?}"),
    }
}

#[test]
fn a_data_dir_below_a_read_only_path_is_masked() {
    let mut p = Policy::with_workspace("/ws");
    p.read_only = vec!["/srv/shared".into()];
    p.data_dir = Some("/srv/shared".into());
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    let bind = position(
        &plan,
        |s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/srv/shared")),
    );
    let mask = position(
        &plan,
        |s| matches!(s, Step::Mask { path, .. } if path == Path::new("/srv/shared")),
    );
    assert!(bind < mask, "{:#?}", plan.steps);
}

#[test]
fn network_none_adds_loopback_and_a_net_namespace() {
    let mut p = Policy::with_workspace("/ws");
    p.network = Network::None;
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    assert!(plan.namespaces.net);
    assert!(plan.steps.contains(&Step::LoopbackUp));
}

#[test]
fn network_allow_listens_inside_on_the_full_layer_and_walls_tcp_on_layer_2() {
    let mut p = Policy::with_workspace("/ws");
    p.network = Network::Allow;
    p.allow_domains = vec!["github.com".into()];
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    assert!(plan.namespaces.net);
    let up = position(&plan, |s| *s == Step::LoopbackUp);
    let listen = position(&plan, |s| matches!(s, Step::EgressListeners { .. }));
    assert_eq!(listen, up + 1, "{:#?}", plan.steps);
    assert!(matches!(
        plan.egress.as_ref().map(|e| e.listen),
        Some(super::Listen::Inside { .. })
    ));
    // The full layer's namespace holds nothing but the listeners: no TCP rule, no filter.
    let seccomp = plan.walls.seccomp.unwrap();
    assert!(!seccomp.deny_network && !seccomp.inet_stream_only);
    assert!(!plan.walls.landlock.as_ref().unwrap().spec.deny_tcp);

    let l2 = Plan::landlock(&p, &Fake::new(), IDS).unwrap();
    assert!(!l2.namespaces.net);
    assert!(
        !l2.steps
            .iter()
            .any(|s| matches!(s, Step::EgressListeners { .. }))
    );
    assert_eq!(
        l2.egress.as_ref().map(|e| e.listen),
        Some(super::Listen::HostLoopback)
    );
    let seccomp = l2.walls.seccomp.unwrap();
    assert!(seccomp.inet_stream_only && !seccomp.deny_network);
    assert!(l2.walls.landlock.as_ref().unwrap().spec.deny_tcp);

    p.network = Network::None;
    p.allow_domains.clear();
    let none = Plan::full(&p, &Fake::new(), IDS).unwrap();
    assert!(none.egress.is_none());
    assert!(
        !none
            .steps
            .iter()
            .any(|s| matches!(s, Step::EgressListeners { .. }))
    );
}

/// A tools dir that is not a directory is `ENOTDIR` on both layers, as the workspace and
/// the data dir are, not a read-only bind of a file that the PATH entry then misses.
#[test]
fn a_tools_dir_that_is_no_directory_is_refused() {
    let mut p = Policy::with_workspace("/ws");
    p.tools_dir = Some("/etc/shadow".into());
    for err in [
        Plan::full(&p, &Fake::new(), IDS).unwrap_err(),
        Plan::landlock(&p, &Fake::new(), IDS).unwrap_err(),
    ] {
        assert!(
            matches!(&err, PlanError::Path { key: "tools_dir", path, errno }
                if path == Path::new("/etc/shadow") && *errno == crate::error::Errno::ENOTDIR),
            "{err:?}"
        );
    }
    p.tools_dir = Some("/opt".into());
    assert!(Plan::full(&p, &Fake::new(), IDS).is_ok());
    assert!(Plan::landlock(&p, &Fake::new(), IDS).is_ok());
}

/// The private `/tmp` and `/dev/shm` come before the policy's own paths of equal depth:
/// a policy that names `/tmp` or `/dev/shm` gets the host's, bound over the private one,
/// not hidden beneath it.
#[test]
fn a_policy_path_at_a_private_mount_is_mounted_over_it() {
    let mut fake = Fake::new();
    for d in ["/tmp", "/dev", "/dev/shm"] {
        fake.0.insert(d.into(), Kind::Dir);
    }
    fn private(dst: &'static str) -> impl Fn(&Step) -> bool {
        move |s: &Step| matches!(s, Step::Tmpfs { dst: d, .. } if d == Path::new(dst))
    }
    fn bound(dst: &'static str) -> impl Fn(&Step) -> bool {
        move |s: &Step| matches!(s, Step::Bind { dst: d, .. } if d == Path::new(dst))
    }
    for named in ["/tmp", "/dev/shm"] {
        let mut p = Policy::with_workspace("/ws");
        p.writable_paths = vec![named.into()];
        let plan = Plan::full(&p, &fake, IDS).unwrap();
        assert!(
            position(&plan, private(named)) < position(&plan, bound(named)),
            "{named}: {:#?}",
            plan.steps
        );
        p.writable_paths.clear();
        p.read_only = vec![named.into()];
        let plan = Plan::full(&p, &fake, IDS).unwrap();
        assert!(
            position(&plan, private(named)) < position(&plan, bound(named)),
            "{named}"
        );
    }
}

/// A host whose `/dev` holds `nodes` (every other device node missing).
struct Devs(Fake, BTreeMap<PathBuf, NodeKind>);

impl Devs {
    /// The proper devices, with `changes` applied (`None` removes the node).
    fn with(changes: &[(&str, Option<NodeKind>)]) -> Devs {
        let mut nodes: BTreeMap<PathBuf, NodeKind> = DEV_NODES
            .iter()
            .map(|n| {
                let (major, minor) = n.device;
                (PathBuf::from(n.path), NodeKind::CharDevice { major, minor })
            })
            .collect();
        for (path, kind) in changes {
            match kind {
                Some(k) => nodes.insert(PathBuf::from(path), k.clone()),
                None => nodes.remove(Path::new(path)),
            };
        }
        Devs(Fake::new(), nodes)
    }
}

impl HostFs for Devs {
    fn kind(&self, path: &Path) -> Option<Kind> {
        self.0.kind(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.0.canonicalize(path)
    }
    fn node(&self, path: &Path) -> NodeKind {
        self.1.get(path).cloned().unwrap_or(NodeKind::Missing)
    }
}

fn dev_nodes(plan: &Plan) -> Vec<PathBuf> {
    plan.steps
        .iter()
        .find_map(|s| match s {
            Step::Dev { nodes } => Some(nodes.clone()),
            _ => None,
        })
        .expect("a /dev step")
}

/// The full layer binds the host's device nodes, and `/dev/null` is what its masks bind
/// over `/etc/shadow`: each node must be its character device (a regular file at
/// `/dev/null` was bound there and over every masked file, an empty `/dev` failed the
/// spawn naming `/etc/shadow`). A missing node other than `/dev/null` is left out.
#[test]
fn device_nodes_must_be_their_devices_and_only_null_is_required() {
    let p = Policy::with_workspace("/ws");
    let all: Vec<PathBuf> = DEV_NODES.iter().map(|n| PathBuf::from(n.path)).collect();
    let plan = Plan::full(&p, &Devs::with(&[]), IDS).unwrap();
    assert_eq!(dev_nodes(&plan), all);
    // A container's /dev without tty, full and random: left out, as on the host.
    let minimal = Devs::with(&[
        ("/dev/tty", None),
        ("/dev/full", None),
        ("/dev/random", None),
    ]);
    let plan = Plan::full(&p, &minimal, IDS).unwrap();
    assert_eq!(
        dev_nodes(&plan),
        ["/dev/null", "/dev/zero", "/dev/urandom"].map(PathBuf::from)
    );
    let refused: [(&str, NodeKind); 8] = [
        ("/dev/null", NodeKind::Missing),
        ("/dev/null", NodeKind::File),
        ("/dev/null", NodeKind::Symlink("/dev/zero".into())),
        ("/dev/null", NodeKind::CharDevice { major: 1, minor: 5 }),
        ("/dev/null", NodeKind::BlockDevice { major: 1, minor: 3 }),
        ("/dev/urandom", NodeKind::File),
        ("/dev/zero", NodeKind::Fifo),
        ("/dev/tty", NodeKind::Dir),
    ];
    for (path, found) in refused {
        let kind = (found != NodeKind::Missing).then(|| found.clone());
        let host = Devs::with(&[(path, kind)]);
        let err = Plan::full(&p, &host, IDS).unwrap_err();
        let wanted = DEV_NODES.iter().find(|n| n.path == path).unwrap().device;
        assert!(
            matches!(&err, PlanError::DeviceNode { path: p, wanted: w, found: f }
                if p == Path::new(path) && *w == wanted && *f == found),
            "{path} as {found}: {err:?}"
        );
        assert!(err.to_string().starts_with(path), "{err}");
    }
    // Layer 2 binds nothing: its /dev is the host's own.
    let host = Devs::with(&[("/dev/null", None)]);
    assert!(Plan::landlock(&p, &host, IDS).is_ok());
}

/// The setup root is staged on `/tmp` where it is a directory, else on another directory
/// the host has (a `FROM scratch` image has no `/tmp`), else on the workspace.
#[test]
fn the_setup_root_is_staged_on_an_existing_directory() {
    let stage = |fake: &Fake| -> PathBuf {
        let plan = Plan::full(&Policy::with_workspace("/ws"), fake, IDS).unwrap();
        match plan
            .steps
            .iter()
            .find(|s| matches!(s, Step::BaseRoot { .. }))
        {
            Some(Step::BaseRoot { stage }) => stage.clone(),
            _ => panic!("no BaseRoot step"),
        }
    };
    let mut fake = Fake::new();
    // Fake::new has none of the candidates: the workspace, the one directory there is.
    assert_eq!(stage(&fake), Path::new("/ws"));
    fake.0.insert("/proc".into(), Kind::Dir);
    assert_eq!(stage(&fake), Path::new("/proc"));
    fake.0.insert("/dev".into(), Kind::Dir);
    assert_eq!(stage(&fake), Path::new("/dev"));
    // A file or a symlink at /tmp is passed over.
    fake.0.insert("/tmp".into(), Kind::File);
    assert_eq!(stage(&fake), Path::new("/dev"));
    fake.0
        .insert("/tmp".into(), Kind::Symlink("/var/tmp".into()));
    assert_eq!(stage(&fake), Path::new("/dev"));
    fake.0.insert("/tmp".into(), Kind::Dir);
    assert_eq!(stage(&fake), Path::new("/tmp"));
    // The probe has no workspace: /tmp, named by the failing step, when nothing exists.
    let (probe, _) = Plan::namespace_probe(IDS, &Fake(BTreeMap::new()));
    assert!(probe.steps.contains(&Step::BaseRoot {
        stage: "/tmp".into()
    }));
    let named = crate::error::SetupStep::from(&Step::BaseRoot {
        stage: "/dev".into(),
    });
    assert_eq!(named.path(), Some(Path::new("/dev")));
    assert_eq!(named.to_string(), "build the new root on a tmpfs at /dev");
}

#[test]
#[allow(clippy::unnecessary_cast)] // `RLIMIT_*` are `u32` on glibc, `c_int` elsewhere.
fn rlimits_are_planned_and_nproc_only_where_it_bounds_the_sandbox() {
    let mut p = Policy::with_workspace("/ws");
    p.limits.processes = Some(10);
    p.limits.open_files = Some(64);
    let root = Ids {
        uid: 0,
        gid: 0,
        host_root: true,
    };
    let limits = |plan: &Plan| -> Vec<Rlimit> {
        plan.steps
            .iter()
            .find_map(|s| match s {
                Step::ResourceLimits(l) => Some(l.clone()),
                _ => None,
            })
            .unwrap_or_default()
    };
    // The full layer of a user: RLIMIT_NPROC counts in its own user namespace (+1: the
    // init), set after the child's Landlock rules (whose fds it holds together) and
    // before the seccomp filter.
    let full = Plan::full(&p, &Fake::new(), IDS).unwrap();
    assert!(full.bounds_processes());
    let l = limits(&full);
    assert!(l.contains(&Rlimit {
        resource: libc::RLIMIT_NPROC as i32,
        soft: 11,
        hard: 11
    }));
    let at = position(&full, |s| matches!(s, Step::ResourceLimits(_)));
    assert!(at > position(&full, |s| matches!(s, Step::LandlockRules)));
    assert!(at < position(&full, |s| matches!(s, Step::Seccomp)));
    // Root: the kernel never applies RLIMIT_NPROC to global uid 0.
    assert!(
        !Plan::full(&p, &Fake::new(), root)
            .unwrap()
            .bounds_processes()
    );
    // No user namespace: it would count every process of the user.
    for layer in [Layer::Landlock, Layer::Passthrough] {
        let plan = Plan::for_layer(&p, layer, "linux", &Fake::new(), IDS).unwrap();
        assert!(!plan.bounds_processes(), "{layer}");
        assert!(
            limits(&plan)
                .iter()
                .any(|r| r.resource == libc::RLIMIT_NOFILE as i32)
        );
    }
    // macOS's full layer is a Seatbelt profile: no user namespace either.
    let mac = Plan::for_layer(&p, Layer::Full, "macos", &Fake::new(), IDS).unwrap();
    assert!(!mac.bounds_processes());
    // Core dumps off by default, as the only default limit.
    let plain = Plan::full(&Policy::with_workspace("/ws"), &Fake::new(), IDS).unwrap();
    assert_eq!(
        limits(&plain),
        vec![Rlimit {
            resource: libc::RLIMIT_CORE as i32,
            soft: 0,
            hard: 0
        }]
    );
}

fn overlay_policy() -> Policy {
    let mut p = Policy::with_workspace("/ws");
    p.workspace_mode = crate::policy::WorkspaceMode::Overlay;
    p.changes_dir = Some("/srv/changes".into());
    p
}

#[test]
fn overlay_mode_mounts_the_workspace_over_the_change_set_and_layers_no_root_git() {
    let mut fs = Fake::new();
    fs.0.insert("/srv".into(), Kind::Dir);
    let mut p = overlay_policy();
    p.writable_paths = vec!["/srv/shared".into()];
    p.data_dir = Some("/ws/a/data".into());
    let plan = Plan::full(&p, &fs, IDS).unwrap();
    // The overlay stands where the workspace's bind stood, before its pins and masks.
    let overlay = Step::Overlay {
        path: "/ws".into(),
        changes: "/srv/changes".into(),
    };
    let at = position(&plan, |s| *s == overlay);
    assert!(
        !plan
            .steps
            .iter()
            .any(|s| matches!(s, Step::Bind { dst, .. } if dst == Path::new("/ws"))),
        "{:#?}",
        plan.steps
    );
    let mask = position(
        &plan,
        |s| matches!(s, Step::Mask { path, .. } if path == Path::new("/ws/a/data")),
    );
    let hide = position(
        &plan,
        |s| matches!(s, Step::HideName { path } if path == Path::new("/ws/.env")),
    );
    assert!(at < mask && at < hide, "{:#?}", plan.steps);
    // The workspace's `.git` is the overlay's; another root's keeps its layer.
    assert_eq!(git_layers(&plan), [PathBuf::from("/srv/shared/.git")]);
    // Its inodes are the child's: the child grants them.
    let walls = plan.walls.landlock.as_ref().unwrap();
    assert!(
        walls
            .child_rules
            .contains(&(PathBuf::from("/ws"), super::walls::Grant::ReadWrite)),
        "{:#?}",
        walls.child_rules
    );
}

#[test]
fn overlay_mode_refuses_a_symlinked_changes_dir_and_one_without_its_parent() {
    let mut fs = Fake::new();
    // A symlink (here into the workspace) is refused, whatever it names.
    fs.0.insert("/srv".into(), Kind::Dir);
    fs.0.insert("/srv/changes".into(), Kind::Symlink("/ws/c".into()));
    let err = Plan::full(&overlay_policy(), &fs, IDS).unwrap_err();
    assert!(err.to_string().contains("changes_dir"), "{err}");
    // Its parent missing: refused, nothing made.
    let err = Plan::full(&overlay_policy(), &Fake::new(), IDS).unwrap_err();
    assert!(
        matches!(
            &err,
            PlanError::Path {
                key: "changes_dir",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn overlay_mode_on_layer_2_runs_on_the_snapshot_leaving_out_the_data_dir_and_denied_names() {
    let mut fs = Fake::new();
    fs.0.insert("/srv".into(), Kind::Dir);
    let mut p = overlay_policy();
    p.data_dir = Some("/ws/a/data".into());
    // Landlock cannot hide a data dir inside the workspace; on the snapshot it is absent.
    let plan = Plan::landlock(&p, &fs, IDS).unwrap();
    assert_eq!(plan.workspace, Path::new("/srv/changes/snapshot"));
    assert_eq!(
        plan.roots[0],
        (PathBuf::from("/srv/changes/snapshot"), Access::ReadWrite)
    );
    assert!(!plan.roots.iter().any(|(r, _)| r == Path::new("/ws")));
    let Step::Snapshot {
        workspace, skip, ..
    } = &plan.steps[0]
    else {
        panic!("{:#?}", plan.steps);
    };
    assert_eq!(workspace, Path::new("/ws"));
    assert!(skip.contains(&PathBuf::from("a/data")) && skip.contains(&PathBuf::from(".env")));
}

#[test]
fn overlay_mode_in_passthrough_and_on_macos_runs_on_the_snapshot() {
    let mut fs = Fake::new();
    fs.0.insert("/srv".into(), Kind::Dir);
    let mut p = overlay_policy();
    p.data_dir = Some("/ws/a/data".into());
    for plan in [
        Plan::passthrough(&p, &fs).unwrap(),
        Plan::seatbelt(&p, &fs).unwrap(),
    ] {
        assert_eq!(plan.workspace, Path::new("/srv/changes/snapshot"));
        assert_eq!(
            plan.roots,
            vec![(PathBuf::from("/srv/changes/snapshot"), Access::ReadWrite)]
        );
        let Step::Snapshot {
            workspace, skip, ..
        } = &plan.steps[0]
        else {
            panic!("{:#?}", plan.steps);
        };
        assert_eq!(workspace, Path::new("/ws"));
        assert!(skip.contains(&PathBuf::from("a/data")));
    }
    // The profile writes the snapshot, keeps the real workspace and closes the change set.
    let sbpl = Plan::seatbelt(&p, &fs).unwrap().walls.sbpl.unwrap();
    assert_eq!(sbpl.workspace, Path::new("/srv/changes/snapshot"));
    let overlay = sbpl.overlay.unwrap();
    assert_eq!(overlay.real_workspace, Path::new("/ws"));
    assert_eq!(overlay.changes, Path::new("/srv/changes"));
    // Direct mode: no snapshot, no overlay rules.
    let direct = Policy::with_workspace("/ws");
    let plan = Plan::seatbelt(&direct, &fs).unwrap();
    assert!(
        !plan
            .steps
            .iter()
            .any(|s| matches!(s, Step::Snapshot { .. }))
    );
    assert_eq!(plan.walls.sbpl.unwrap().overlay, None);
    // Only where stockade writes the change set's xattrs.
    for os in ["linux", "macos"] {
        Plan::for_layer(&p, Layer::Passthrough, os, &fs, IDS).unwrap();
    }
    let err = Plan::for_layer(&p, Layer::Passthrough, "freebsd", &fs, IDS).unwrap_err();
    assert!(
        matches!(
            err,
            PlanError::Conflict(crate::error::Conflict::OverlayNeedsFullLayer { .. })
        ),
        "{err}"
    );
}

#[test]
fn a_change_set_under_a_read_only_root_is_masked_on_the_full_layer_and_refused_on_layer_2() {
    let mut p = Policy::with_workspace("/ws");
    p.workspace_mode = crate::policy::WorkspaceMode::Overlay;
    p.changes_dir = Some("/opt/changes".into());
    let plan = Plan::full(&p, &Fake::new(), IDS).unwrap();
    let overlay = position(&plan, |s| matches!(s, Step::Overlay { .. }));
    let mask = position(
        &plan,
        |s| matches!(s, Step::Mask { path, .. } if path == Path::new("/opt/changes")),
    );
    assert!(overlay < mask, "{:#?}", plan.steps);
    let err = Plan::landlock(&p, &Fake::new(), IDS).unwrap_err();
    assert!(
        matches!(
            &err,
            PlanError::Conflict(crate::error::Conflict::LandlockCannotHide {
                key: "changes_dir",
                ..
            })
        ),
        "{err}"
    );
}

#[test]
fn a_plain_absolute_path_is_lexically_canonical_and_nothing_else_is() {
    for p in ["/", "/ws", "/var/tmp/ws", "/a/.b/c..", "/a/...", "/a b/c"] {
        assert!(lexically_canonical(Path::new(p)), "{p}");
    }
    for p in [
        "", "ws", "./ws", "//", "//ws", "/ws/", "/ws//a", "/ws/.", "/ws/./a", "/ws/..", "/ws/../a",
        "/.", "/..",
    ] {
        assert!(!lexically_canonical(Path::new(p)), "{p}");
    }
}

/// A [`Fake`] host that counts its `canonicalize` calls.
struct Counting(Fake, std::cell::Cell<u32>);

impl HostFs for Counting {
    fn kind(&self, path: &Path) -> Option<Kind> {
        self.0.kind(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.1.set(self.1.get() + 1);
        self.0.canonicalize(path)
    }
}

#[test]
fn a_path_seen_whole_without_a_symlink_is_not_canonicalized_again() {
    let fs = Counting(Fake::new(), std::cell::Cell::new(0));
    let canon = |p: &str| {
        fs.1.set(0);
        let r = existing(&fs, "workspace", Path::new(p));
        (r, fs.1.get())
    };
    // Every prefix seen, nothing to resolve: the path itself, no `realpath`.
    assert_eq!(canon("/ws/a").0.unwrap(), Path::new("/ws/a"));
    assert_eq!(canon("/ws/a").1, 0);
    assert_eq!(canon("/etc/shadow").1, 0);
    // A prefix not seen (missing here), or a name to resolve: canonicalized as before,
    // with its error.
    let (r, n) = canon("/ws/missing");
    assert!(matches!(
        r,
        Err(PlanError::Path {
            errno: crate::error::Errno::ENOENT,
            ..
        })
    ));
    assert_eq!(n, 1);
    assert_eq!(canon("/srv/shared").1, 1);
    for p in ["/ws/a/", "/ws//a", "/ws/./a", "/ws/a/../a"] {
        assert_eq!(canon(p).1, 1, "{p}");
    }
    // A symlink is refused before either.
    let (r, n) = canon("/bin/sh");
    assert!(matches!(r, Err(PlanError::Symlink { .. })), "{r:?}");
    assert_eq!(n, 0);
}

/// A [`Fake`] host that counts the `lstat`s a real host would make: one per question,
/// and one for [`HostFs::kind_and_enterable`]'s two answers.
struct Lstats(Fake, std::cell::Cell<u32>);

impl HostFs for Lstats {
    fn kind(&self, path: &Path) -> Option<Kind> {
        self.1.set(self.1.get() + 1);
        self.0.kind(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.0.canonicalize(path)
    }
    fn others_may_enter(&self, dir: &Path) -> bool {
        self.1.set(self.1.get() + 1);
        dir != Path::new("/etc")
    }
    fn kind_and_enterable(&self, path: &Path) -> (Option<Kind>, bool) {
        self.1.set(self.1.get() + 1);
        (self.0.kind(path), path != Path::new("/etc"))
    }
}

#[test]
fn the_memo_learns_a_paths_others_bit_with_its_kind() {
    let fs = Lstats(Fake::new(), std::cell::Cell::new(0));
    let memo = Memo::new(&fs);
    assert_eq!(memo.kind(Path::new("/etc")), Some(Kind::Dir));
    assert!(!memo.others_may_enter(Path::new("/etc")));
    assert_eq!(memo.kind(Path::new("/usr")), Some(Kind::Dir));
    assert!(memo.others_may_enter(Path::new("/usr")));
    assert_eq!(fs.1.get(), 2, "one lstat per path");
    // A path asked for its bit alone first keeps that answer.
    assert!(memo.others_may_enter(Path::new("/opt")));
    assert_eq!(memo.kind(Path::new("/opt")), Some(Kind::Dir));
    assert!(memo.others_may_enter(Path::new("/opt")));
    assert_eq!(fs.1.get(), 4);
}

#[test]
fn the_real_hosts_kind_and_others_bit_from_one_lstat_are_those_of_two() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let open = d.path().join("open");
    let closed = d.path().join("closed");
    for (dir, mode) in [(&open, 0o755), (&closed, 0o750)] {
        std::fs::create_dir(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let file = d.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink("closed", &link).unwrap();
    let gone = d.path().join("gone");
    for p in [&open, &closed, &file, &link, &gone] {
        assert_eq!(
            RealFs.kind_and_enterable(p),
            (RealFs.kind(p), RealFs.others_may_enter(p)),
            "{}",
            p.display()
        );
    }
    assert!(!RealFs.kind_and_enterable(&closed).1);
    assert_eq!(
        RealFs.kind_and_enterable(&link).0,
        Some(Kind::Symlink("closed".into()))
    );
}

/// A [`Fake`] host whose `/dev/tty` is a symlink.
struct TtyLink(Fake);

impl HostFs for TtyLink {
    fn kind(&self, path: &Path) -> Option<Kind> {
        self.0.kind(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.0.canonicalize(path)
    }
    fn node(&self, path: &Path) -> NodeKind {
        match path == Path::new("/dev/tty") {
            true => NodeKind::Symlink("pts/0".into()),
            false => self.0.node(path),
        }
    }
}

#[test]
fn the_memo_says_what_it_saw_only_where_it_saw_a_node() {
    let fake = TtyLink(Fake::new());
    let memo = Memo::new(&fake);
    for p in ["/usr", "/etc/shadow", "/bin", "/gone"] {
        memo.kind(Path::new(p));
    }
    for p in ["/dev/null", "/dev/tty", "/dev/gone"] {
        memo.node(Path::new(p));
    }
    let seen = |p: &str| memo.seen(Path::new(p));
    assert_eq!(seen("/usr"), Some(Seen::Dir));
    assert_eq!(seen("/etc/shadow"), Some(Seen::NotDir));
    assert_eq!(seen("/dev/null"), Some(Seen::CharDevice));
    // A symlink (its target unseen), nothing, or a path not asked about: nothing seen.
    for p in ["/bin", "/gone", "/dev/gone", "/etc", "/dev/tty"] {
        assert_eq!(seen(p), None, "{p}");
    }
}

/// The full layer's child grants its own `/dev` with one device rule while only its nodes
/// are there; a policy path under `/dev` (here a read-only directory, whose FIFOs a device
/// grant would open for writing) makes it one rule per node instead.
#[test]
fn the_childs_dev_rule_is_per_node_when_a_path_of_the_policy_lies_under_dev() {
    let mut fs = Fake::new();
    for d in ["/dev", "/dev/rc"] {
        fs.0.insert(d.into(), Kind::Dir);
    }
    let child = |p: &Policy| {
        let plan = Plan::full(p, &fs, IDS).unwrap();
        let rules = plan.walls.landlock.unwrap().child_rules;
        rules
            .into_iter()
            .filter(|(_, g)| *g == Grant::Device)
            .map(|(p, _)| p)
            .collect::<Vec<_>>()
    };
    let p = Policy::with_workspace("/ws");
    assert_eq!(child(&p), [PathBuf::from("/dev/pts"), "/dev".into()]);
    let mut p = Policy::with_workspace("/ws");
    p.read_only = vec!["/dev/rc".into()];
    let mut nodes = vec![PathBuf::from("/dev/pts")];
    nodes.extend(DEV_NODES.iter().map(|n| PathBuf::from(n.path)));
    assert_eq!(child(&p), nodes);
}
