//! The full layer's layout: namespaces, a fresh root of binds and masks, then Landlock
//! and seccomp. [`Plan::full`] collects the layout entries stage by stage (one function
//! each), then orders them (see the module above on why order is the security property)
//! and derives the Landlock grants from the binds.

use std::path::{Path, PathBuf};

use super::{
    Access, Beneath, HostFs, Ids, Kind, Namespaces, Plan, Step, Walls, bind, canonical_workspace,
    depth, dev, existing, existing_dir, inside_path, is_git_name, is_within, mask, namespace_setup,
    no_symlinks, owners,
};
use crate::error::{Conflict, PlanError};
use crate::policy::{Layer, Network, Policy, SYSTEM_ALLOWLIST, WorkspaceMode};

/// A layout entry before ordering.
struct Entry {
    step: Step,
    dst: PathBuf,
    /// 0: binds, symlinks and tmpfs; 1: pins; 2: masks. Masks win over binds of equal depth.
    rank: u8,
}

/// The layout as it is collected, before ordering.
struct Layout {
    entries: Vec<Entry>,
    /// Read-only roots (the system dirs, then the extra read-only paths): where a masked
    /// file or the data dir would be visible.
    ro_roots: Vec<PathBuf>,
    /// The workspace, then each writable directory outside every other writable root.
    writable_roots: Vec<PathBuf>,
}

/// Adds one entry (a free function, so that callers may borrow the layout's other fields
/// meanwhile).
fn push(entries: &mut Vec<Entry>, step: Step, dst: &Path, rank: u8) {
    entries.push(Entry {
        step,
        dst: dst.to_path_buf(),
        rank,
    });
}

impl Plan {
    /// Builds the full-layer layout for `policy` on the host described by `fs` and `ids`.
    ///
    /// # Errors
    ///
    /// [`PlanError`] when a path the policy names does not exist or is unusable, or when
    /// two policy paths conflict (the data dir containing the workspace, say).
    pub fn full(policy: &Policy, fs: &dyn HostFs, ids: Ids) -> Result<Plan, PlanError> {
        let workspace = canonical_workspace(policy, fs)?;
        let mut layout = Layout {
            entries: Vec::new(),
            ro_roots: Vec::new(),
            writable_roots: vec![workspace.clone()],
        };
        system_allowlist(&mut layout, fs);
        resolv_conf(&mut layout, fs);
        // Before the policy's paths: at equal depth the later entry is mounted over the
        // earlier, so a policy that names `/tmp` or `/dev/shm` itself gets the host's.
        private_mounts(&mut layout, policy, fs)?;
        writable_roots(&mut layout, policy, fs)?;
        let tools = extra_read_only(&mut layout, policy, fs)?;
        mask_changes_dir(&mut layout);
        masks_and_hidden_host_entries(&mut layout, policy, fs, ids);
        // The data dir: masked wherever it would be visible, pinned inside writable roots.
        let data_pins = match &policy.data_dir {
            Some(data) => plan_data_dir(data, fs, &mut layout)?,
            None => Vec::new(),
        };
        deny_and_guard_names(&mut layout, policy, &data_pins);
        let entries = order(layout.entries)?;
        let roots = grants(&entries, &workspace);
        let net = policy.network != Network::Full;
        let stage = super::setup_stage(fs, Some(&workspace));
        Ok(Plan {
            layer: Layer::Full,
            namespaces: Namespaces { base: true, net },
            workspace,
            steps: full_steps(policy, ids, stage, entries),
            path: inside_path(tools),
            roots,
            private_tmp: false,
            walls: Walls::default(),
            egress: super::EgressPlan::of(policy, Layer::Full),
        }
        .with_linux_walls(policy))
    }
}

/// The system allowlist: read-only binds, symlinks kept as symlinks.
fn system_allowlist(layout: &mut Layout, fs: &dyn HostFs) {
    for sys in SYSTEM_ALLOWLIST {
        let p = Path::new(sys);
        match fs.kind(p) {
            Some(Kind::Dir) => {
                push(
                    &mut layout.entries,
                    bind(p, p, Access::ReadOnly, true, None),
                    p,
                    0,
                );
                layout.ro_roots.push(p.to_path_buf());
            }
            Some(Kind::Symlink(target)) => push(
                &mut layout.entries,
                Step::Symlink {
                    link: p.to_path_buf(),
                    target,
                },
                p,
                0,
            ),
            _ => {}
        }
    }
}

/// The resolver configuration, when /etc/resolv.conf points outside the allowlist
/// (typically into /run). Nothing else of /run is bound: a read-only bind does not stop
/// connect() on the host's service sockets.
fn resolv_conf(layout: &mut Layout, fs: &dyn HostFs) {
    let conf = Path::new("/etc/resolv.conf");
    let Some(Kind::Symlink(_)) = fs.kind(conf) else {
        return;
    };
    let Ok(target) = fs.canonicalize(conf) else {
        return;
    };
    if !layout.ro_roots.iter().any(|r| is_within(&target, r)) {
        let dir = matches!(fs.kind(&target), Some(Kind::Dir));
        let step = bind(&target, &target, Access::ReadOnly, dir, None);
        push(&mut layout.entries, step, &target, 0);
    }
}

/// Writable roots: the workspace, then each writable path outside every other one
/// (parents first). A writable path inside another writable root is writable already and
/// is not bound again, so no symlink planted there can redirect a bind.
fn writable_roots(layout: &mut Layout, policy: &Policy, fs: &dyn HostFs) -> Result<(), PlanError> {
    let workspace = layout.writable_roots[0].clone();
    let step = match super::changes_dir(policy, fs, &workspace)? {
        Some(changes) => Step::Overlay {
            path: workspace.clone(),
            changes,
        },
        None => bind(&workspace, &workspace, Access::ReadWrite, true, None),
    };
    push(&mut layout.entries, step, &workspace, 0);
    let mut writable = Vec::new();
    for p in &policy.writable_paths {
        if is_within(p, &workspace) {
            // Writable already, and not bound again; but a path that is or passes through
            // a symlink (which the program may have planted) does not name what the
            // caller asked for, here as anywhere.
            no_symlinks(fs, "writable_paths", p)?;
            continue;
        }
        writable.push(existing(fs, "writable_paths", p)?);
    }
    writable.sort_by_key(|p| depth(p));
    for canon in writable {
        // Inside another root, or listed twice (or two spellings of one path): one root,
        // or its guard steps would run twice and the second pins would bind over the
        // first guards.
        if layout.writable_roots.iter().any(|r| is_within(&canon, r)) {
            continue;
        }
        let dir = matches!(fs.kind(&canon), Some(Kind::Dir));
        push(
            &mut layout.entries,
            bind(&canon, &canon, Access::ReadWrite, dir, None),
            &canon,
            0,
        );
        if dir {
            layout.writable_roots.push(canon);
        }
    }
    Ok(())
}

/// In overlay mode, the change set where a read-only root would show it (`/opt/changes`,
/// say): masked, so that only the overlay shows its contents.
fn mask_changes_dir(layout: &mut Layout) {
    let changes = layout.entries.iter().find_map(|e| match &e.step {
        Step::Overlay { changes, .. } => Some(changes.clone()),
        _ => None,
    });
    if let Some(c) = changes {
        if layout.ro_roots.iter().any(|r| is_within(&c, r)) {
            push(&mut layout.entries, mask(&c, true, None, None), &c, 2);
        }
    }
}

/// Extra read-only paths and the tools dir. Inside a writable root they are opened beneath
/// it, without following symlinks, and bound onto themselves. Returns the canonical tools
/// dir.
fn extra_read_only(
    layout: &mut Layout,
    policy: &Policy,
    fs: &dyn HostFs,
) -> Result<Option<PathBuf>, PlanError> {
    let mut extra_ro = Vec::new();
    for p in &policy.read_only {
        extra_ro.push(("read_only", p.clone()));
    }
    let mut tools = None;
    if let Some(t) = &policy.tools_dir {
        extra_ro.push(("tools_dir", t.clone()));
    }
    for (key, p) in extra_ro {
        let canon = if key == "tools_dir" {
            existing_dir(fs, key, &p)?
        } else {
            existing(fs, key, &p)?
        };
        let dir = matches!(fs.kind(&canon), Some(Kind::Dir));
        if key == "tools_dir" {
            tools = Some(canon.clone());
        }
        let beneath = layout
            .writable_roots
            .iter()
            .filter(|r| is_within(&canon, r))
            .max_by_key(|r| depth(r))
            .map(|r| Beneath { root: r.clone() });
        if beneath.is_none() {
            layout.ro_roots.push(canon.clone());
        }
        push(
            &mut layout.entries,
            bind(&canon, &canon, Access::ReadOnly, dir, beneath),
            &canon,
            0,
        );
    }
    Ok(tools)
}

/// Private /tmp, minimal /dev (the host's device nodes checked) with a private /dev/shm,
/// fresh /proc.
fn private_mounts(layout: &mut Layout, policy: &Policy, fs: &dyn HostFs) -> Result<(), PlanError> {
    let tmpfs = Step::Tmpfs {
        dst: "/tmp".into(),
        size: policy.tmp_size.bytes(),
        mode: 0o1777,
    };
    push(&mut layout.entries, tmpfs, Path::new("/tmp"), 0);
    push(
        &mut layout.entries,
        dev::dev_step(fs)?,
        Path::new("/dev"),
        0,
    );
    // POSIX shared memory is files too: bounded like /tmp, not by half the host's memory.
    let shm = Step::Tmpfs {
        dst: "/dev/shm".into(),
        size: policy.tmp_size.bytes(),
        mode: 0o1777,
    };
    push(&mut layout.entries, shm, Path::new("/dev/shm"), 0);
    let proc = Step::Proc {
        fallback: policy.proc_fallback,
    };
    push(&mut layout.entries, proc, Path::new("/proc"), 0);
    Ok(())
}

/// Masked host files (shadow, host keys), when present and visible; then the host's unix
/// sockets and, for a root host, the entries "others" may not read: its read-only roots
/// are bound idmapped where they can be ([`owners`]), the others walked for those
/// entries.
fn masks_and_hidden_host_entries(layout: &mut Layout, policy: &Policy, fs: &dyn HostFs, ids: Ids) {
    let needed = owners::needed_paths(policy, &layout.writable_roots);
    let idmapped = owners::idmapped_roots(&layout.ro_roots, &needed, fs, ids);
    owners::mark(layout.entries.iter_mut().map(|e| &mut e.step), &idmapped);
    for m in &policy.masked {
        let visible = layout.ro_roots.iter().any(|r| is_within(m, r))
            && !owners::unreachable(fs, &idmapped, m);
        match fs.kind(m) {
            Some(Kind::Dir) if visible => {
                push(&mut layout.entries, mask(m, true, None, None), m, 2)
            }
            Some(Kind::File) if visible => {
                push(&mut layout.entries, mask(m, false, None, None), m, 2)
            }
            _ => {}
        }
    }
    for (path, dir) in hidden_host_entries(policy, fs, ids, &layout.ro_roots, &idmapped) {
        push(&mut layout.entries, mask(&path, dir, None, None), &path, 2);
    }
}

/// What the full layer masks beneath the read-only roots besides `policy.masked`:
///
/// - every pathname unix socket bound on the host (a read-only bind does not stop
///   `connect()`), unless the policy names it in `read_only` or `writable_paths`;
/// - for a root host (whose uid owns them inside), every entry "others" may not read:
///   TLS keys of other services, `/etc/shadow` and its kin, private directories. An entry
///   the policy names, or one above a path the policy binds, is left alone.
///
/// Entries `policy.masked` already covers are not repeated.
fn hidden_host_entries(
    policy: &Policy,
    fs: &dyn HostFs,
    ids: Ids,
    ro_roots: &[PathBuf],
    idmapped: &[PathBuf],
) -> Vec<(PathBuf, bool)> {
    let named: Vec<&PathBuf> = policy
        .read_only
        .iter()
        .chain(&policy.writable_paths)
        .chain(&policy.tools_dir)
        .collect();
    let visible = |p: &Path| ro_roots.iter().any(|r| is_within(p, r));
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    let mut take = |p: PathBuf, dir: bool| {
        let covered = policy.masked.iter().any(|m| is_within(&p, m))
            || out.iter().any(|(o, _)| is_within(&p, o));
        let named = named.iter().any(|n| is_within(n, &p));
        let unreachable = owners::unreachable(fs, idmapped, &p);
        if visible(&p) && !covered && !named && !unreachable {
            out.push((p, dir));
        }
    };
    // Only a socket beneath a read-only root is looked at (one `lstat` each): the host
    // may have many elsewhere, which `take` would refuse anyway.
    for sock in fs.unix_sockets().into_iter().filter(|s| visible(s)) {
        if let Some(Kind::File) = fs.kind(&sock) {
            take(sock, false);
        }
    }
    if ids.uid == 0 {
        let walked: Vec<PathBuf> = ro_roots
            .iter()
            .filter(|r| !idmapped.contains(r))
            .cloned()
            .collect();
        for e in fs.private_entries(&walked) {
            take(e.path, e.dir);
        }
    }
    out
}

/// The data dir's steps: a mask wherever it would be visible and, inside a writable root,
/// pins on every directory between the root and it. Returns the pinned directories.
fn plan_data_dir(
    data: &Path,
    fs: &dyn HostFs,
    layout: &mut Layout,
) -> Result<Vec<PathBuf>, PlanError> {
    no_symlinks(fs, "data_dir", data)?;
    // The data dir is a directory (`Sandbox::new` requires it); anything else there
    // cannot be masked as one.
    if let Some(Kind::File) = fs.kind(data) {
        return Err(PlanError::Path {
            key: "data_dir",
            path: data.to_path_buf(),
            errno: crate::error::Errno::ENOTDIR,
        });
    }
    let writable_roots = &layout.writable_roots;
    // Inside a writable root the path is taken lexically and resolved by the child
    // without following symlinks; elsewhere the host path is trusted and canonicalized.
    let (path, root) = match writable_roots.iter().find(|r| is_within(data, r)) {
        Some(r) => (data.to_path_buf(), Some(r.clone())),
        None => {
            // A host path that resolves into a writable root (a symlink the host made) is
            // masked there, as if it had been named so.
            let canon = existing(fs, "data_dir", data)?;
            let r = writable_roots
                .iter()
                .find(|r| is_within(&canon, r))
                .cloned();
            (canon, r)
        }
    };
    // The workspace is the first writable root.
    if let Some(r) = writable_roots.iter().find(|r| is_within(r, &path)) {
        return Err(PlanError::Conflict(Conflict::DataDirContainsWritable {
            data_dir: path,
            writable: r.clone(),
        }));
    }
    let mut pins = Vec::new();
    match root {
        Some(root) => {
            let beneath = Beneath { root: root.clone() };
            // Every directory between the root and the data dir becomes a mountpoint.
            let mut p = root.clone();
            let rel = path.strip_prefix(&root).unwrap_or(Path::new(""));
            let comps: Vec<_> = rel.components().collect();
            for c in comps.iter().take(comps.len().saturating_sub(1)) {
                p.push(c);
                pins.push(p.clone());
                let pin = Step::Pin {
                    path: p.clone(),
                    beneath: beneath.clone(),
                };
                push(&mut layout.entries, pin, &p, 1);
            }
            let step = mask(&path, true, Some(beneath), None);
            push(&mut layout.entries, step, &path, 2);
        }
        None if layout.ro_roots.iter().any(|r| is_within(&path, r)) => {
            push(&mut layout.entries, mask(&path, true, None, None), &path, 2)
        }
        // Not under any bound path: invisible inside already.
        None => {}
    }
    Ok(pins)
}

/// `deny_names` and `guard_names` at the top of each writable root. Guard names under
/// `.git` select the `.git` layer instead of read-only binds: with `hooks` and `config`
/// merely read-only, a program redirects git through `commondir`, `config.worktree`,
/// `worktrees/`, `modules/`, `objects/info/alternates` or a hooks dir that did not exist,
/// and the host's next `git status` runs its command.
///
/// In overlay mode the workspace's own `.git` gets no layer: the whole workspace is
/// copy-on-write already, and `apply` merges its `.git` changes with the layer's rules.
fn deny_and_guard_names(layout: &mut Layout, policy: &Policy, data_pins: &[PathBuf]) {
    let (git_guards, guards): (Vec<&String>, Vec<&String>) =
        policy.guard_names.iter().partition(|n| is_git_name(n));
    let overlay = policy.workspace_mode == WorkspaceMode::Overlay;
    let entries = &mut layout.entries;
    for (i, root) in layout.writable_roots.iter().enumerate() {
        let git_guards: &[&String] = if overlay && i == 0 { &[] } else { &git_guards };
        for name in &policy.deny_names {
            let path = root.join(name);
            push(entries, Step::HideName { path: path.clone() }, &path, 2);
        }
        if !git_guards.is_empty() {
            let path = root.join(".git");
            // After the root's bind and the data dir's pins at this depth.
            let step = Step::GitLayer {
                path: path.clone(),
                size: policy.tmp_size.bytes(),
            };
            push(entries, step, &path, 2);
        }
        // Directories the data dir's steps pin already are not bound again (that bind
        // would land after, and over, the deeper pins).
        let mut pinned: Vec<PathBuf> = data_pins.to_vec();
        for name in &guards {
            // Under a hidden name there is nothing to guard, and pinning its parents
            // would bind over the hiding mount and uncover it.
            if policy
                .deny_names
                .iter()
                .any(|d| Path::new(name).starts_with(d))
            {
                continue;
            }
            let path = root.join(name);
            let mut cur = root.clone();
            let comps: Vec<_> = Path::new(name).components().collect();
            for c in comps.iter().take(comps.len().saturating_sub(1)) {
                cur.push(c);
                if !pinned.contains(&cur) {
                    pinned.push(cur.clone());
                    // At its own depth: a pin sorted by the guarded path's depth could
                    // land over a deeper bind made in between.
                    push(entries, Step::GuardPin { path: cur.clone() }, &cur, 1);
                }
            }
            push(entries, Step::GuardName { path: path.clone() }, &path, 2);
        }
    }
}

/// Drops the guards that would uncover a mask or a read-only `.git`, refuses the
/// conflicts nothing can resolve, then orders the entries: parents before children; at
/// equal depth binds, then pins, then masks.
fn order(mut entries: Vec<Entry>) -> Result<Vec<Entry>, PlanError> {
    // Nothing may uncover a mask: guards at or under a hidden path are dropped (there is
    // nothing to guard there), and a bind strictly under one is a policy conflict.
    let masks: Vec<PathBuf> = entries
        .iter()
        .filter_map(|e| match &e.step {
            Step::Mask { path, .. } | Step::HideName { path } => Some(path.clone()),
            _ => None,
        })
        .collect();
    entries.retain(|e| match &e.step {
        Step::GuardName { path } | Step::GuardPin { path } | Step::GitLayer { path, .. } => {
            !masks.iter().any(|m| path.starts_with(m))
        }
        _ => true,
    });
    drop_git_layers_under_read_only(&mut entries);
    refuse_conflicts(&entries, &masks)?;
    entries.sort_by_key(|e| (depth(&e.dst), e.rank));
    Ok(entries)
}

/// A read-only bind at or above a root's `.git`, inside that root, keeps it read-only
/// already: a layer over it would make it writable again.
fn drop_git_layers_under_read_only(entries: &mut Vec<Entry>) {
    let read_only: Vec<PathBuf> = entries
        .iter()
        .filter_map(|e| match &e.step {
            Step::Bind {
                dst,
                access: Access::ReadOnly,
                ..
            } => Some(dst.clone()),
            _ => None,
        })
        .collect();
    entries.retain(|e| match &e.step {
        Step::GitLayer { path, .. } => {
            let root = path.parent().unwrap_or(path);
            !read_only
                .iter()
                .any(|r| path.starts_with(r) && r.starts_with(root))
        }
        _ => true,
    });
}

/// Refuses a mask inside a layered `.git` and a bind strictly under a mask.
fn refuse_conflicts(entries: &[Entry], masks: &[PathBuf]) -> Result<(), PlanError> {
    // The data dir inside a layered `.git` would be masked on the layer, where its
    // identity cannot be checked, and its contents would be merged back from there.
    for e in entries {
        if let Step::GitLayer { path, .. } = &e.step {
            if let Some(m) = masks.iter().find(|m| *m != path && m.starts_with(path)) {
                return Err(PlanError::Conflict(Conflict::HiddenInsideGitLayer {
                    hidden: m.clone(),
                    git: path.clone(),
                }));
            }
        }
    }
    for e in entries {
        if let Step::Bind { dst, .. } = &e.step {
            if let Some(m) = masks.iter().find(|m| dst != *m && dst.starts_with(m)) {
                return Err(PlanError::Conflict(Conflict::BindBeneathHidden {
                    bind: dst.clone(),
                    hidden: m.clone(),
                }));
            }
        }
    }
    Ok(())
}

/// The Landlock grants come from the binds themselves, so that nothing mounted can lack
/// its grant (a writable path outside /tmp once did): every host path bound by path, with
/// its access. Binds beneath a writable root are covered by that root.
fn grants(entries: &[Entry], workspace: &Path) -> Vec<(PathBuf, Access)> {
    let mut roots: Vec<(PathBuf, Access)> = vec![(workspace.to_path_buf(), Access::ReadWrite)];
    for e in entries {
        if let Step::Bind {
            dst,
            access,
            beneath: None,
            ..
        } = &e.step
        {
            if *dst != workspace && !roots.iter().any(|(r, a)| r == dst && a == access) {
                roots.push((dst.clone(), *access));
            }
        }
    }
    roots
}

/// The whole step list: namespace setup, the ordered layout, then the process steps.
fn full_steps(policy: &Policy, ids: Ids, stage: PathBuf, entries: Vec<Entry>) -> Vec<Step> {
    let mut steps = namespace_setup(ids, stage);
    steps.extend(entries.into_iter().map(|e| e.step));
    steps.push(Step::PivotRoot);
    steps.push(Step::RootReadOnly);
    if policy.network != Network::Full {
        steps.push(Step::LoopbackUp);
    }
    if let Some(super::Listen::Inside { http, socks }) =
        super::EgressPlan::of(policy, Layer::Full).map(|e| e.listen)
    {
        steps.push(Step::EgressListeners { http, socks });
    }
    if !policy.keep_session {
        steps.push(Step::NewSession);
    }
    let nproc = super::processes_bounded_without_cgroup(Layer::Full, ids);
    let limits = super::rlimits(policy, nproc);
    steps.push(Step::NewKeyring);
    steps.extend([
        Step::DropCapabilities,
        Step::NoNewPrivs,
        Step::LandlockRules,
        Step::Landlock,
    ]);
    // After the Landlock rules, which hold an fd per rule until the last is added (one
    // `close_range` per run of them): an `open_files` limit of a few fds then never meets
    // them. Lowering a limit needs no capability.
    if !limits.is_empty() {
        steps.push(Step::ResourceLimits(limits));
    }
    steps.push(Step::Seccomp);
    steps
}
