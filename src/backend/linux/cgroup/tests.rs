//! The module's rules against the fake v2 hierarchy ([`super::fake`]).

use std::path::Path;
use std::sync::Arc;

use super::fake::{FakeFs, MOUNT, State};
use super::*;

const ALL: &[&str] = &["cpu", "memory", "pids"];

/// A fake with `state` and what discover makes of it.
fn discover(state: State) -> (Arc<FakeFs>, Result<Cgroups, String>) {
    let fake = Arc::new(FakeFs::new(state));
    let found = Cgroups::discover_with(fake.clone());
    (fake, found)
}

/// The directory of cgroup `cg`.
fn dir(cg: &str) -> PathBuf {
    Path::new(MOUNT).join(cg.trim_start_matches('/'))
}

/// The directory of the leaf's (only) part, as a cgroup path.
fn leaf_cgroup(leaf: &Leaf) -> String {
    let d = leaf.dirs()[0].to_owned();
    format!("/{}", d.strip_prefix(MOUNT).unwrap().display())
}

const LIMITS: Wanted = Wanted {
    memory: Some(64 << 20),
    processes: Some(16),
    cpu: Some(0.5),
};

/// The caller in a delegated sub-group: `app.service/supervisor`, the service marked.
fn delegated_subgroup(xattr: &str) -> State {
    let mut s = State::new(ALL, "/system.slice/app.service/supervisor");
    s.group("/system.slice").subtree = ALL.iter().map(|c| (*c).to_owned()).collect();
    s.group("/").subtree = ALL.iter().map(|c| (*c).to_owned()).collect();
    let app = s.group("/system.slice/app.service");
    app.writable = true;
    app.xattrs.insert(xattr.into(), b"1".to_vec());
    s.group("/system.slice/app.service/supervisor").writable = true;
    s
}

#[test]
fn in_the_root_cgroup_the_leaves_go_under_the_root() {
    let mut s = State::new(ALL, "/");
    s.group("/").writable = true;
    let (fake, found) = discover(s);
    let cg = found.unwrap();
    assert_eq!(cg.version(), Version::V2);
    let leaf = cg.create(&LIMITS).unwrap();
    let name = leaf_cgroup(&leaf);
    let owner = name.strip_prefix('/').and_then(leaf::owner);
    assert_eq!(owner, Some(std::process::id()), "{name}");
    // The root may hold processes and hand out controllers at once.
    let on = fake.lock().group("/").subtree.clone();
    for c in ["memory", "pids", "cpu"] {
        assert!(on.iter().any(|o| o == c), "{c} not enabled: {on:?}");
    }
    assert!(leaf.dir_fd().is_some());
    assert_eq!(leaf.join_fds().len(), 1);
}

#[test]
fn a_caller_whose_cgroup_already_hands_out_controllers_is_the_base() {
    let mut s = State::new(ALL, "/host");
    s.group("/").subtree = ALL.iter().map(|c| (*c).to_owned()).collect();
    let host = s.group("/host");
    host.writable = true;
    host.subtree = vec!["memory".into(), "pids".into()];
    let (_fake, found) = discover(s);
    let leaf = found.unwrap().create(&Wanted {
        processes: Some(3),
        ..Wanted::default()
    });
    assert!(leaf_cgroup(&leaf.unwrap()).starts_with("/host/stockade-"));
}

#[test]
fn a_delegated_subgroup_puts_the_leaves_beside_it_and_enables_the_controllers() {
    for xattr in ["trusted.delegate", "user.delegate"] {
        let (fake, found) = discover(delegated_subgroup(xattr));
        let cg = found.unwrap_or_else(|e| panic!("{xattr}: {e}"));
        cg.check(&LIMITS).unwrap();
        let leaf = cg.create(&LIMITS).unwrap();
        let name = leaf_cgroup(&leaf);
        assert!(
            name.starts_with("/system.slice/app.service/stockade-"),
            "{name}"
        );
        let mut s = fake.lock();
        let mut on = s.group("/system.slice/app.service").subtree.clone();
        on.sort();
        assert_eq!(on, ["cpu", "memory", "pids"]);
        // The caller stayed where it was: the base holds no process.
        assert!(s.group("/system.slice/app.service").procs.is_empty());
    }
}

#[test]
fn the_v2_limits_are_written_with_exact_values() {
    let (fake, found) = discover(delegated_subgroup("trusted.delegate"));
    let leaf = found.unwrap().create(&LIMITS).unwrap();
    assert!(leaf.swap_included());
    let cg = leaf_cgroup(&leaf);
    let mut s = fake.lock();
    let files = s.group(&cg).files.clone();
    assert_eq!(files["memory.max"], (64u64 << 20).to_string());
    assert_eq!(files["memory.swap.max"], "0");
    assert_eq!(files["pids.max"], "16");
    assert_eq!(files["cpu.max"], "50000 100000");
    drop(s);
    // The quota has a floor of 1 ms per period.
    assert_eq!(cpu_quota(0.001), 1000);
    assert_eq!(cpu_quota(1.5), 150_000);
    assert_eq!(cpu_quota(f64::NAN), 1000);
}

#[test]
fn a_caller_with_processes_and_no_delegated_parent_is_refused_with_the_setup() {
    // Delegate=yes without DelegateSubgroup=: the caller's own cgroup is ours but holds
    // the caller, so it cannot hand out controllers.
    let mut s = State::new(ALL, "/system.slice/app.service");
    s.group("/system.slice/app.service").writable = true;
    let (_fake, found) = discover(s);
    let why = found.unwrap_err();
    assert!(why.contains("not delegated"), "{why}");
    assert!(
        why.contains("Delegate=yes") && why.contains("DelegateSubgroup=supervisor"),
        "{why}"
    );
    // A writable parent without the marker is not a delegation either.
    let mut s = delegated_subgroup("trusted.delegate");
    s.group("/system.slice/app.service").xattrs.clear();
    assert!(discover(s).1.unwrap_err().contains("Delegate=yes"));
    // Nor a marked parent this user cannot write.
    let mut s = delegated_subgroup("user.delegate");
    s.group("/system.slice/app.service").writable = false;
    assert!(discover(s).1.unwrap_err().contains("not delegated"));
    // A root cgroup this user cannot write.
    assert!(
        discover(State::new(ALL, "/"))
            .1
            .unwrap_err()
            .contains("not delegated")
    );
}

#[test]
fn a_controller_the_parent_did_not_delegate_is_named_by_check_and_create_fails_clearly() {
    let mut s = delegated_subgroup("trusted.delegate");
    s.group("/system.slice").subtree = vec!["memory".into()];
    let (_fake, found) = discover(s);
    let cg = found.unwrap();
    cg.check(&Wanted {
        memory: Some(1 << 20),
        ..Wanted::default()
    })
    .unwrap();
    let why = cg.check(&LIMITS).unwrap_err();
    assert!(why.contains("pids controller is not delegated"), "{why}");
    let err = cg.create(&LIMITS).unwrap_err().to_string();
    assert!(err.contains("cgroup.subtree_control"), "{err}");
    assert!(err.contains("os error 2"), "{err}");
}

#[test]
fn kill_all_writes_cgroup_kill_and_remove_rmdirs_the_leaf() {
    let (fake, found) = discover(delegated_subgroup("trusted.delegate"));
    let leaf = found.unwrap().create(&LIMITS).unwrap();
    let cg = leaf_cgroup(&leaf);
    {
        let mut s = fake.lock();
        s.group(&cg).procs = vec![4001, 4002];
        s.alive.extend([4001, 4002]);
    }
    leaf.kill_all().unwrap();
    {
        let s = fake.lock();
        let kill = dir(&cg).join("cgroup.kill");
        assert!(s.writes.iter().any(|(p, d)| *p == kill && d == "1"));
        assert!(!s.alive.contains(&4001) && !s.alive.contains(&4002));
    }
    fake.lock().group(&cg).procs = vec![4003];
    fake.lock().alive.insert(4003);
    leaf.remove();
    let s = fake.lock();
    assert!(
        !s.groups.contains_key(&cg),
        "leaf left: {:?}",
        s.groups.keys()
    );
    assert!(!s.alive.contains(&4003), "remove did not kill the leftover");
}

#[test]
fn dropping_a_leaf_removes_it() {
    let (fake, found) = discover(delegated_subgroup("trusted.delegate"));
    let cg = {
        let leaf = found.unwrap().create(&Wanted::default()).unwrap();
        leaf_cgroup(&leaf)
    };
    assert!(!fake.lock().groups.contains_key(&cg));
}

#[test]
fn a_failed_create_leaves_no_directory() {
    let mut s = delegated_subgroup("trusted.delegate");
    // The kernel refuses the CPU limit (as it does a quota above the parent's), after
    // the leaf was made and its memory and pids limits written.
    s.refuse.insert("cpu.max".into());
    let (fake, found) = discover(s);
    let cg = found.unwrap();
    let err = cg.create(&LIMITS).unwrap_err().to_string();
    assert!(
        err.starts_with("write \"50000 100000\" to /sys/fs/cgroup/"),
        "{err}"
    );
    assert!(err.contains("/cpu.max: Invalid argument"), "{err}");
    let s = fake.lock();
    assert!(s.writes.iter().any(|(p, _)| p.ends_with("pids.max")));
    assert!(
        !s.groups.keys().any(|k| k.contains("stockade-")),
        "{:?}",
        s.groups.keys()
    );
}

#[test]
fn stale_leaves_of_dead_hosts_are_removed_and_others_kept() {
    let mut s = delegated_subgroup("trusted.delegate");
    let base = "/system.slice/app.service";
    let me = std::process::id();
    for name in [
        "stockade-999999-0",
        "stockade-999999-7",
        "stockade-4242-1",
        "other",
        "stockade-x-1",
    ] {
        let g = fake::Group {
            writable: true,
            ..fake::Group::default()
        };
        s.groups.insert(format!("{base}/{name}"), g);
    }
    s.groups
        .insert(format!("{base}/stockade-{me}-99"), fake::Group::default());
    s.alive.insert(4242);
    let (fake, found) = discover(s);
    found.unwrap();
    let s = fake.lock();
    let left: std::collections::BTreeSet<String> = s
        .groups
        .keys()
        .filter_map(|k| k.strip_prefix(&format!("{base}/")).map(str::to_owned))
        .collect();
    let want = ["other", "stockade-4242-1", "stockade-x-1", "supervisor"]
        .into_iter()
        .map(str::to_owned)
        .chain([format!("stockade-{me}-99")])
        .collect();
    assert_eq!(left, want);
}

#[test]
fn usage_and_events_read_the_v2_files() {
    let (fake, found) = discover(delegated_subgroup("trusted.delegate"));
    let leaf = found.unwrap().create(&LIMITS).unwrap();
    let cg = leaf_cgroup(&leaf);
    {
        let mut s = fake.lock();
        let f = &mut s.group(&cg).files;
        f.insert("memory.peak".into(), "123456\n".into());
        f.insert(
            "cpu.stat".into(),
            "usage_usec 9\nuser_usec 7000\nsystem_usec 2\n".into(),
        );
        f.insert(
            "memory.events".into(),
            "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n".into(),
        );
        f.insert("pids.events".into(), "max 5\n".into());
    }
    let u = leaf.usage();
    assert_eq!(u.peak_memory, Some(123_456));
    assert_eq!(u.user_cpu, Some(std::time::Duration::from_millis(7)));
    assert_eq!(u.system_cpu, Some(std::time::Duration::from_micros(2)));
    assert_eq!(
        leaf.events(),
        Events {
            oom_kills: 2,
            process_limit_hits: 5
        }
    );
}

#[test]
fn leaf_names_parse_back_to_their_host_pid() {
    assert_eq!(leaf::owner("stockade-123-4"), Some(123));
    assert_eq!(leaf::owner("stockade-123"), None);
    assert_eq!(leaf::owner("stockade-123-x"), None);
    assert_eq!(leaf::owner("other-123-4"), None);
    assert_eq!(
        leaf::field("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"),
        Some(3)
    );
}

/// A v1 host: memory under `/ctr` (a container's part of the hierarchy), pids, and cpu
/// co-mounted with cpuacct; the unified hierarchy without controllers. `writable` are
/// the directories (with their `cgroup.procs`) this user may write.
fn v1_host(writable: &[&str]) -> State {
    let cgroup = "5:pids:/\n4:memory:/ctr/job\n2:cpu,cpuacct:/\n0::/\n";
    let mountinfo = "\
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /ctr /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";
    let mut paths = std::collections::BTreeSet::new();
    for w in writable {
        paths.insert(PathBuf::from(w));
        paths.insert(Path::new(w).join("cgroup.procs"));
    }
    let mut s = State::new(&[], "/");
    s.v1 = Some((cgroup.into(), mountinfo.into(), paths));
    s
}

const V1_DIRS: [&str; 3] = [
    "/sys/fs/cgroup/memory/job",
    "/sys/fs/cgroup/pids",
    "/sys/fs/cgroup/cpu,cpuacct",
];

#[test]
fn v1_hierarchies_are_found_under_the_mounts_root_and_co_mounted_cpu_counts_once() {
    let (_fake, found) = discover(v1_host(&V1_DIRS));
    let cg = found.unwrap();
    assert_eq!(cg.version(), Version::V1);
    cg.check(&LIMITS).unwrap();
    let Layout::V1(found) = &cg.layout else {
        panic!("not v1")
    };
    let place = |c: &str| {
        found
            .iter()
            .find(|(h, _)| *h == c)
            .unwrap()
            .1
            .clone()
            .unwrap()
    };
    assert_eq!(place("memory").dir, Path::new("/sys/fs/cgroup/memory/job"));
    assert_eq!(place("memory").cgroup, "/ctr/job");
    assert_eq!(place("cpu"), place("cpuacct"));
}

#[test]
fn a_v1_hierarchy_that_is_not_delegated_is_named_by_check() {
    let (_fake, found) = discover(v1_host(&V1_DIRS[1..]));
    let cg = found.unwrap();
    cg.check(&Wanted {
        processes: Some(3),
        cpu: Some(1.0),
        ..Wanted::default()
    })
    .unwrap();
    let why = cg.check(&LIMITS).unwrap_err();
    let uid = nix::unistd::geteuid();
    assert_eq!(
        why,
        format!(
            "cgroup v1 memory hierarchy: /sys/fs/cgroup/memory/job is not writable by uid \
             {uid} (not delegated)"
        )
    );
    let err = cg.create(&LIMITS).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
}

#[test]
fn a_v1_host_with_no_hierarchy_of_ours_gets_v1s_reason_not_the_empty_unified_ones() {
    let why = discover(v1_host(&[])).1.unwrap_err();
    assert!(why.starts_with("cgroup v1 memory hierarchy: "), "{why}");
    assert!(why.contains("not delegated"), "{why}");
    // A cgroup outside the part of the hierarchy that is mounted.
    let mut s = v1_host(&V1_DIRS);
    if let Some((text, _, _)) = &mut s.v1 {
        *text = text.replace("/ctr/job", "/elsewhere");
    }
    let (_f, found) = discover(s);
    let why = found.unwrap().check(&LIMITS).unwrap_err();
    assert!(
        why.contains("/elsewhere is not under the part mounted at"),
        "{why}"
    );
}

#[test]
fn a_leaf_named_after_this_pid_is_stale_only_before_this_process_made_one() {
    let mut s = delegated_subgroup("trusted.delegate");
    s.alive.insert(4242);
    let (_fake, found) = discover(s);
    let cg = found.unwrap();
    let me = std::process::id();
    let own = format!("stockade-{me}-3");
    assert!(cg.stale(&own, me, true));
    assert!(!cg.stale(&own, me, false));
    assert!(cg.stale("stockade-999999-0", me, false));
    assert!(!cg.stale("stockade-4242-0", me, true));
    assert!(!cg.stale("unrelated", me, true));
}

#[test]
fn a_name_left_by_an_earlier_host_is_skipped() {
    let mut s = delegated_subgroup("trusted.delegate");
    let me = std::process::id();
    // Not fresh: the discovery must leave this pid's leaves alone here.
    SEQ.fetch_add(1, Ordering::Relaxed);
    let next = SEQ.load(Ordering::Relaxed);
    // Taken names for the next few sequence numbers (other tests may take some).
    for seq in next..next + 4 {
        s.groups.insert(
            format!("/system.slice/app.service/stockade-{me}-{seq}"),
            fake::Group::default(),
        );
    }
    let (fake, found) = discover(s);
    let leaf = found.unwrap().create(&LIMITS).unwrap();
    let seq: u64 = leaf_cgroup(&leaf)
        .rsplit('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(seq >= next + 4 || seq < next, "{seq}");
    // The taken ones are untouched.
    assert!(
        fake.lock()
            .groups
            .contains_key(&format!("/system.slice/app.service/stockade-{me}-{next}"))
    );
}

/// The fake holds the kernel's rules that the tests above rely on.
#[test]
fn the_fake_refuses_what_the_kernel_refuses() {
    let mut s = State::new(ALL, "/a/b");
    s.group("/").subtree = vec!["memory".into()];
    s.group("/a").writable = true;
    s.group("/a/b").writable = true;
    let fake = FakeFs::new(s);
    let errno = |r: io::Result<()>| r.unwrap_err().raw_os_error();
    let control = |cg: &str| dir(cg).join("cgroup.subtree_control");
    // /a does not have pids (the root did not enable it), nor /a/b memory (/a did not).
    assert_eq!(
        errno(fake.write(&control("/a"), b"+pids")),
        Some(libc::ENOENT)
    );
    assert_eq!(
        errno(fake.write(&control("/a/b"), b"+memory")),
        Some(libc::ENOENT)
    );
    fake.write(&control("/a"), b"+memory").unwrap();
    // /a/b has memory now but holds this process: it cannot hand it out.
    assert_eq!(
        errno(fake.write(&control("/a/b"), b"+memory")),
        Some(libc::EBUSY)
    );
    // Now /a hands out memory: no process may join it, and /a/b has memory's files.
    let procs = dir("/a").join("cgroup.procs");
    assert_eq!(errno(fake.write(&procs, b"0")), Some(libc::EBUSY));
    fake.read(&dir("/a/b").join("memory.max")).unwrap();
    assert_eq!(
        fake.read(&dir("/a/b").join("pids.max"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENOENT)
    );
    assert_eq!(errno(fake.rmdir(&dir("/a/b"))), Some(libc::EBUSY));
    assert_eq!(errno(fake.rmdir(&dir("/a"))), Some(libc::EBUSY));
}

#[test]
fn the_root_of_a_cgroup_namespace_with_processes_is_not_taken_for_the_root() {
    // A container with a private cgroup namespace: `/` is its own cgroup, with `cgroup.type`
    // and its processes; enabling controllers there would fail EBUSY at every spawn.
    let mut s = State::new(ALL, "/");
    s.ns_root = true;
    s.group("/").writable = true;
    let (_fake, found) = discover(s);
    let err = found.unwrap_err();
    assert!(err.contains("root of its cgroup namespace"), "{err}");
}
