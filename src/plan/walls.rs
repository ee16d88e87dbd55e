//! The walls besides the layout, as plain data: the Landlock grants and the seccomp
//! program's options (Linux), the input of the Seatbelt profile (macOS).
//!
//! The plan decides them; the backend only compiles them (`backend::linux::landlock::build`
//! opens the paths and fills the ruleset, `backend::linux::seccomp::build` emits the BPF,
//! `backend::sbpl::profile` writes the profile text). So the tests that check the grants
//! check the function production uses: [`Plan::full`] and [`Plan::landlock`] fill
//! [`Plan::walls`] through [`Walls::linux`].

use std::path::{Path, PathBuf};

use super::{Access, Namespaces, Plan, SbplInput};
use crate::policy::{Layer, Network, Policy};

/// The device files a program needs, read and write (and their ioctls).
pub const DEV_FILES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// What a Landlock rule grants beneath its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Grant {
    /// Read files, list directories, execute: the read-only allowlist and the tools dir.
    ReadExec,
    /// Read files and list directories, no execute: `/proc`.
    Read,
    /// Every handled right, `Refer` included (renames across writable roots), `Execute` too
    /// (a compiler writing into the workspace then runs its output).
    ReadWrite,
    /// Open for reading and writing, device ioctls (ABI >= 5), and list (for `/dev/pts`):
    /// the device files. No `Truncate`: the kernel ignores `O_TRUNC` on anything but a
    /// regular file, so `> /dev/null` needs only `WriteFile`.
    Device,
    /// List the directory (and, as every Landlock rule, the directories beneath it).
    ListDir,
}

impl From<Access> for Grant {
    fn from(access: Access) -> Grant {
        match access {
            Access::ReadOnly => Grant::ReadExec,
            Access::ReadWrite => Grant::ReadWrite,
            Access::ListDir => Grant::ListDir,
        }
    }
}

/// One path and what it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRule {
    /// The host path (symlinks are followed).
    pub path: PathBuf,
    /// The rights beneath it.
    pub grant: Grant,
}

/// What the plan's own `lstat` of a rule's path found there, when that was neither a
/// symlink nor nothing: then a `stat` of the path, which follows a final symlink only,
/// would have found the same object ([`RulesetSpec::seen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A directory.
    Dir,
    /// A character device (the plan checks the device nodes it binds).
    CharDevice,
    /// Neither a directory nor a symlink: a regular file, or a device the plan did not
    /// tell apart.
    NotDir,
}

/// What a Landlock ruleset allows. Everything not granted here is denied for every handled
/// right.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesetSpec {
    /// The workspace: [`Grant::ReadWrite`], and required (a missing workspace is an error).
    pub workspace: PathBuf,
    /// Further paths; those that do not exist are skipped (the backend's status lists them).
    pub rules: Vec<PathRule>,
    /// Deny every TCP bind and connect (ABI >= 4): `network = "none"` without a private
    /// network namespace.
    pub deny_tcp: bool,
    /// Scope signals and abstract unix sockets to the sandbox (ABI >= 6): the program can
    /// neither signal nor connect to anything outside its own Landlock domain.
    pub scope: bool,
    /// With [`RulesetSpec::deny_tcp`]: TCP connects to these ports stay allowed (the
    /// egress proxy's listeners on the host's loopback, `network = "allow"` on layer 2;
    /// set per command, since the ports are picked at each spawn).
    pub connect_tcp: Vec<u16>,
    /// What the plan saw at some of these paths while it was built, by path (not by rule:
    /// a workspace or rule swapped for another path finds nothing here). The backend
    /// takes it for what a `stat` would say at `Sandbox::new`, right after the plan, and
    /// trusts a [`Seen::Dir`] at a spawn only where the kernel checks it again (see
    /// `backend::linux::landlock`). Empty: every path is looked at.
    pub seen: Vec<(PathBuf, Seen)>,
}

impl RulesetSpec {
    /// A spec with only the workspace, scoping on, TCP allowed.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        RulesetSpec {
            workspace: workspace.into(),
            rules: Vec::new(),
            deny_tcp: false,
            scope: true,
            connect_tcp: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// What the plan saw at `path` ([`RulesetSpec::seen`]).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn seen_at(&self, path: &Path) -> Option<Seen> {
        self.seen
            .iter()
            .find_map(|(p, seen)| (p == path).then_some(*seen))
    }

    /// Records, for the workspace and each rule's path, what `seen` says the plan saw
    /// there.
    fn note_seen(&mut self, seen: &impl Fn(&Path) -> Option<Seen>) {
        let paths = std::iter::once(&self.workspace).chain(self.rules.iter().map(|r| &r.path));
        self.seen = paths.filter_map(|p| Some((p.clone(), seen(p)?))).collect();
    }

    /// Adds a rule.
    pub fn with(mut self, path: impl Into<PathBuf>, grant: Grant) -> Self {
        self.rules.push(PathRule {
            path: path.into(),
            grant,
        });
        self
    }
}

/// The Landlock side of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LandlockRules {
    /// The rules on host paths, the same for every command. With
    /// [`LandlockRules::split`], commands enter its two layers instead, which grant
    /// exactly these together.
    pub spec: RulesetSpec,
    /// Rules for the file systems the child mounts itself (the full layer's `/`, `/tmp`,
    /// `/dev/shm`, devpts and `/proc`), as paths inside: a rule on a host path does not
    /// cover them. The child adds them after mounting (`Step::LandlockRules`).
    pub child_rules: Vec<(PathBuf, Grant)>,
    /// Grant each command the `/dev/pts` terminals among its stdio: the program gets its
    /// own terminal and none of the caller's others. (Layer 2 sees the host's devpts; on
    /// the full layer the grant is for the terminal bound onto `/dev/console`, the same
    /// inode.)
    pub own_terminals: bool,
    /// Layer 2 on a root host: the same grants in two Landlock layers, so that the rules
    /// granted entry by entry are built once per sandbox instead of once per command.
    pub split: Option<SplitRules>,
}

/// [`LandlockRules::spec`] as two Landlock layers whose intersection grants exactly what
/// the spec and each command's own rules grant together (layer 2 on a root host, where a
/// read-only root holding a hidden entry is granted entry by entry: hundreds of rules).
///
/// A process under both layers gets a right only where both grant it:
///
/// - [`SplitRules::shared`], built once per sandbox and reused while its inodes are
///   current: every rule of the spec, each read-only root entry by entry as there, and,
///   whole, the directories that hold what a command adds: the sandbox's own directory in
///   [`SplitRules::tmp_root`], which holds every command's `TMPDIR`, read-write
///   ([`SplitRules::shared_with`]: its name is only known once it is made) and `/dev/pts`
///   as devices;
/// - [`SplitRules::command`], built per command: the spec with every read-only root
///   granted whole again (a few rules, as on a user host), plus the command's own
///   `TMPDIR` and terminals ([`LandlockRules::for_command`]).
///
/// The read-only roots are narrowed by the shared layer, the sandbox's directory and
/// `/dev/pts` by the command's, every other rule is the same in both. That holds only
/// while no read-only root overlaps `tmp_root` or `/dev/pts` (the command's layer would
/// grant such a root whole where the shared one grants more than the spec): the plan
/// splits only then.
///
/// The shared layer grants no directory wider than the one ruleset does: Landlock follows
/// mounts, so a host bind mount of a read-only root beneath a wider grant would show that
/// root's private entries through it. Hence a directory of the sandbox's own rather than
/// the host's temporary directory, where a host may put such a bind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitRules {
    /// The sandbox's layer: file-system rules and the scopes (no TCP rule), without the
    /// sandbox's directory for the `TMPDIR`s ([`SplitRules::shared_with`] adds it).
    pub shared: RulesetSpec,
    /// The directories of [`SplitRules::shared`] granted entry by entry
    /// ([`Grant::ListDir`]): a rename, creation or removal among their entries makes the
    /// shared layer stale (its rules name inodes).
    pub listed: Vec<PathBuf>,
    /// The rules every command's layer starts from.
    pub command: RulesetSpec,
    /// The canonical directory (the host's temporary directory when the sandbox was made)
    /// in which the sandbox makes a directory of its own, the parent of every command's
    /// private `TMPDIR`, granted whole by the shared layer.
    pub tmp_root: PathBuf,
}

impl LandlockRules {
    /// Records in each of its specs what the plan saw at their paths
    /// ([`RulesetSpec::seen`]): `seen` answers from the plan's own lookups.
    pub(super) fn note_seen(&mut self, seen: impl Fn(&Path) -> Option<Seen>) {
        self.spec.note_seen(&seen);
        if let Some(split) = &mut self.split {
            split.shared.note_seen(&seen);
            split.command.note_seen(&seen);
        }
    }

    /// The ruleset of one command: [`LandlockRules::spec`] (or, when split, the command's
    /// layer, [`SplitRules::command`]), its private `TMPDIR` read-write and, with
    /// [`LandlockRules::own_terminals`], its `terminals` as devices.
    // Plain data, built on every system; only Linux's launcher asks for it.
    #[cfg_attr(not(any(target_os = "linux", feature = "internals")), allow(dead_code))]
    pub fn for_command(&self, private_tmp: Option<&Path>, terminals: &[PathBuf]) -> RulesetSpec {
        let mut spec = match &self.split {
            Some(split) => split.command.clone(),
            None => self.spec.clone(),
        };
        if let Some(dir) = private_tmp {
            spec = spec.with(dir, Grant::ReadWrite);
        }
        if self.own_terminals {
            for tty in terminals {
                spec = spec.with(tty, Grant::Device);
            }
        }
        spec
    }
}

/// What the seccomp filter allows beyond its fixed deny list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilterOptions {
    /// Lift the denials of the ptrace family (`ptrace`, `process_vm_readv`,
    /// `process_vm_writev`, `kcmp`, `pidfd_getfd`, `process_madvise`) so that `strace` and
    /// `gdb` work on the sandbox's own processes. The kernel checks each of them as a ptrace
    /// access, which Landlock (any ABI) confines to processes of the same or a nested domain;
    /// in the full layer the PID namespace hides every other process as well.
    pub allow_ptrace: bool,
    /// Fail `socket()` and `socketpair()` with `EPERM` for every family but `AF_UNIX`
    /// (`AF_NETLINK` included, see `backend::linux::seccomp`). For `network = "none"`
    /// without a private network namespace.
    pub deny_network: bool,
    /// Fail `socket()` and `socketpair()` with `EPERM` for every family but `AF_UNIX`,
    /// `AF_INET` and `AF_INET6`, and for those two every type but `SOCK_STREAM` with
    /// protocol 0 or `IPPROTO_TCP` (no UDP, no raw sockets, no SCTP or MPTCP, which
    /// Landlock's TCP rules do not cover). For `network = "allow"` without a private
    /// network namespace, where Landlock allows TCP to the egress proxy's ports alone.
    pub inet_stream_only: bool,
    /// The program shares its PID and IPC namespaces with processes it must not reach: the
    /// host's (layer 2), or a session's other commands (a session's sandbox, on either
    /// layer): SysV IPC and POSIX message queues fail with `EPERM`, and the calls that
    /// change another process's resource limits, scheduling or I/O priority must name the
    /// caller (pid 0).
    pub host_namespaces: bool,
}

impl FilterOptions {
    /// The options for `policy` in a child that gets `namespaces`: without a private network
    /// namespace, `network = "none"` is enforced here; without the base namespaces (PID, IPC,
    /// …), the host's processes and IPC objects are guarded here.
    pub fn for_policy(policy: &Policy, namespaces: Namespaces) -> Self {
        FilterOptions {
            allow_ptrace: policy.allow_ptrace,
            deny_network: policy.network == Network::None && !namespaces.net,
            inet_stream_only: policy.network == Network::Allow && !namespaces.net,
            host_namespaces: !namespaces.base,
        }
    }
}

/// The walls of a plan besides its layout steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walls {
    /// The Landlock ruleset (Linux, with `Step::Landlock`).
    pub landlock: Option<LandlockRules>,
    /// The seccomp program's options (Linux, with `Step::Seccomp`).
    pub seccomp: Option<FilterOptions>,
    /// The Seatbelt profile's input (macOS, with `Step::SandboxInit`); the per-command
    /// `TMPDIR` is added at spawn.
    pub sbpl: Option<SbplInput>,
}

impl Walls {
    /// The Landlock grants and seccomp options of a Linux plan (full or layer 2), derived
    /// from the plan's own roots and namespaces.
    ///
    /// Read and execute, read-write or list: each of [`Plan::roots`] after the workspace.
    /// Devices, on layer 2: [`DEV_FILES`] but `/dev/pts` (layer 2 grants each command its
    /// own terminals). Read: `/proc` on layer 2. The full layer's child grants its own
    /// `/proc`, `/tmp`, `/dev/shm`, `/dev` (a tmpfs of its own, holding only the host's
    /// nodes it bound there), devpts, and lists `/`, which is the sandbox's root there (on
    /// layer 2 `/` is the host's, so it is never listed). TCP is denied with
    /// `network = "none"` on layer 2, where no network namespace does it.
    pub fn linux(policy: &Policy, plan: &Plan) -> Walls {
        let full = plan.layer == Layer::Full;
        let spec = host_rules(policy, plan, &plan.roots);
        let mut child_rules = Vec::new();
        if full {
            child_rules = [
                ("/", Grant::ListDir),
                ("/tmp", Grant::ReadWrite),
                ("/dev/shm", Grant::ReadWrite),
                ("/dev/pts", Grant::Device),
                ("/proc", Grant::Read),
            ]
            .into_iter()
            .map(|(p, g)| (PathBuf::from(p), g))
            .collect();
            child_rules.extend(dev_rules(plan).into_iter().map(|p| (p, Grant::Device)));
            // The overlay over the workspace is a file system of the child's own: its
            // inodes are not the host's the parent's rule names.
            for step in &plan.steps {
                if let super::Step::Overlay { path, .. } = step {
                    child_rules.push((path.clone(), Grant::ReadWrite));
                }
            }
        }
        Walls {
            landlock: Some(LandlockRules {
                spec,
                child_rules,
                own_terminals: true,
                split: None,
            }),
            seccomp: Some(FilterOptions::for_policy(policy, plan.namespaces)),
            sbpl: None,
        }
    }
}

/// The paths the full layer's child grants device access beneath, besides its devpts:
/// its own `/dev` alone (one rule for every node it bound there) when nothing else of the
/// plan lies beneath `/dev`; else each node, so that a path the policy put under `/dev`
/// (a read-only directory, whose FIFOs a device grant would open for writing) keeps its
/// own access only.
fn dev_rules(plan: &Plan) -> Vec<PathBuf> {
    use super::Step;
    let dev = Path::new("/dev");
    let elsewhere = |p: &Path| p.starts_with(dev) && p != Path::new("/dev/shm");
    let mut nodes = Vec::new();
    let mut shared = plan.roots.iter().any(|(p, _)| p.starts_with(dev));
    for step in &plan.steps {
        match step {
            Step::Dev { nodes: n } => nodes.clone_from(n),
            Step::Bind { dst: p, .. }
            | Step::Tmpfs { dst: p, .. }
            | Step::Symlink { link: p, .. }
            | Step::Overlay { path: p, .. }
            | Step::Pin { path: p, .. } => shared |= elsewhere(p),
            _ => {}
        }
    }
    if shared {
        nodes
    } else {
        vec![dev.to_path_buf()]
    }
}

/// The rules on host paths of a Linux plan whose roots are `roots` (the workspace first):
/// see [`Walls::linux`].
fn host_rules(policy: &Policy, plan: &Plan, roots: &[(PathBuf, Access)]) -> RulesetSpec {
    let full = plan.layer == Layer::Full;
    let mut spec = RulesetSpec::new(plan.workspace.clone());
    for (path, access) in roots.iter().skip(1) {
        spec = spec.with(path, Grant::from(*access));
    }
    // The full layer's `/dev` is a tmpfs of the child's own holding only the nodes bound
    // there: its child rule grants them all at once (one rule the child adds, not an
    // open, a kind check and a rule per node in the host at each spawn).
    if !full {
        for dev in DEV_FILES {
            if *dev != DEV_PTS {
                spec = spec.with(*dev, Grant::Device);
            }
        }
        spec = spec.with("/proc", Grant::Read);
    }
    spec.deny_tcp = !full && policy.network != Network::Full;
    spec
}

/// The directory of the terminals granted to each command one by one.
pub const DEV_PTS: &str = "/dev/pts";

impl SplitRules {
    /// The two layers of a layer-2 `plan` whose read-only roots were granted entry by entry
    /// ([`Plan::roots`]) where `coarse` grants them whole, with each command's `TMPDIR` in
    /// `tmp_root`. The caller checks that no read-only root overlaps `tmp_root` or
    /// [`DEV_PTS`] (see [`SplitRules`]).
    pub(super) fn new(
        policy: &Policy,
        plan: &Plan,
        coarse: &[(PathBuf, Access)],
        tmp_root: PathBuf,
        own_terminals: bool,
    ) -> SplitRules {
        let mut shared = host_rules(policy, plan, &plan.roots);
        if own_terminals {
            shared = shared.with(DEV_PTS, Grant::Device);
        }
        // The command's layer denies TCP. Both scope: the program's process enters this layer
        // alone, on top of the command's layer that the init is under, and its scoping is
        // what keeps the program from signalling the init (`init/src/program.rs`).
        shared.deny_tcp = false;
        shared.scope = true;
        let listed = plan
            .roots
            .iter()
            .filter(|(_, a)| *a == Access::ListDir)
            .map(|(p, _)| p.clone())
            .collect();
        SplitRules {
            shared,
            listed,
            command: host_rules(policy, plan, coarse),
            tmp_root,
        }
    }

    /// The shared layer of a sandbox whose commands' `TMPDIR`s are made in `tmp_parent`
    /// (its own directory in [`SplitRules::tmp_root`]): [`SplitRules::shared`] and
    /// `tmp_parent` read-write.
    // Plain data, built on every system; only Linux's launcher asks for it.
    #[cfg_attr(not(any(target_os = "linux", feature = "internals")), allow(dead_code))]
    pub fn shared_with(&self, tmp_parent: &Path) -> RulesetSpec {
        self.shared.clone().with(tmp_parent, Grant::ReadWrite)
    }
}

impl Plan {
    /// This plan with its Linux walls ([`Walls::linux`]).
    pub(super) fn with_linux_walls(mut self, policy: &Policy) -> Plan {
        self.walls = Walls::linux(policy, &self);
        self
    }

    /// The directory in which the sandbox makes its own directory for its commands'
    /// private `TMPDIR`s, when the plan needs one ([`SplitRules::tmp_root`]); `None`: each
    /// `TMPDIR` is made in the host's temporary directory at the spawn.
    pub fn private_tmp_root(&self) -> Option<&Path> {
        let split = self.walls.landlock.as_ref()?.split.as_ref()?;
        Some(&split.tmp_root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{HostFs, Ids, Kind};

    /// A host where every path exists as a directory.
    struct AllDirs;

    impl HostFs for AllDirs {
        fn kind(&self, _: &Path) -> Option<Kind> {
            Some(Kind::Dir)
        }
        fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
            Ok(path.to_path_buf())
        }
    }

    const IDS: Ids = Ids {
        uid: 1000,
        gid: 1000,
        host_root: false,
    };

    fn policy() -> Policy {
        let mut p = Policy::with_workspace("/ws");
        p.network = Network::None;
        p.tools_dir = Some("/opt/tools".into());
        p.writable_paths = vec!["/srv/shared".into()];
        p
    }

    fn rule(path: &str, grant: Grant) -> PathRule {
        PathRule {
            path: path.into(),
            grant,
        }
    }

    #[test]
    fn layer_2_grants_its_roots_proc_and_devices_and_denies_tcp() {
        let plan = Plan::landlock(&policy(), &AllDirs, IDS).unwrap();
        let rules = plan.walls.landlock.as_ref().unwrap();
        let spec = &rules.spec;
        assert_eq!(spec.workspace, Path::new("/ws"));
        for r in [
            rule("/opt/tools", Grant::ReadExec),
            rule("/srv/shared", Grant::ReadWrite),
            rule("/usr", Grant::ReadExec),
            rule("/proc", Grant::Read),
            rule("/dev/null", Grant::Device),
            rule("/dev/ptmx", Grant::Device),
        ] {
            assert!(spec.rules.contains(&r), "{r:?} in {spec:?}");
        }
        // The host's root is never listed, the caller's terminals never granted at once.
        assert!(!spec.rules.iter().any(|r| r.path == Path::new("/")));
        assert!(!spec.rules.iter().any(|r| r.path == Path::new("/dev/pts")));
        assert!(spec.deny_tcp && spec.scope);
        assert!(rules.child_rules.is_empty() && rules.own_terminals);
        let seccomp = plan.walls.seccomp.unwrap();
        assert!(seccomp.deny_network && seccomp.host_namespaces);
    }

    #[test]
    fn the_full_layer_grants_its_own_mounts_in_the_child() {
        let plan = Plan::full(&policy(), &AllDirs, IDS).unwrap();
        let rules = plan.walls.landlock.as_ref().unwrap();
        let spec = &rules.spec;
        assert!(spec.rules.contains(&rule("/srv/shared", Grant::ReadWrite)));
        assert!(spec.rules.contains(&rule("/opt/tools", Grant::ReadExec)));
        // Its own devpts and /proc, not the host's; TCP is the network namespace's job.
        for own in ["/dev/ptmx", "/dev/pts", "/proc", "/tmp"] {
            assert!(
                !spec.rules.iter().any(|r| r.path == Path::new(own)),
                "{own}"
            );
        }
        assert!(!spec.deny_tcp && rules.own_terminals);
        assert!(
            rules
                .child_rules
                .contains(&(PathBuf::from("/"), Grant::ListDir))
        );
        assert!(
            rules
                .child_rules
                .contains(&(PathBuf::from("/tmp"), Grant::ReadWrite))
        );
        let seccomp = plan.walls.seccomp.unwrap();
        assert!(!seccomp.deny_network && !seccomp.host_namespaces);
    }

    #[test]
    fn passthrough_has_no_walls() {
        let plan = Plan::passthrough(&policy(), &AllDirs).unwrap();
        assert_eq!(plan.walls, Walls::default());
    }

    #[test]
    fn a_command_adds_its_tmpdir_and_its_terminals() {
        let plan = Plan::landlock(&policy(), &AllDirs, IDS).unwrap();
        let rules = plan.walls.landlock.unwrap();
        let tty = PathBuf::from("/dev/pts/3");
        let spec = rules.for_command(Some(Path::new("/tmp/x")), std::slice::from_ref(&tty));
        assert!(spec.rules.contains(&rule("/tmp/x", Grant::ReadWrite)));
        assert!(spec.rules.contains(&rule("/dev/pts/3", Grant::Device)));
        let mut rules = rules;
        rules.own_terminals = false;
        let spec = rules.for_command(None, &[tty]);
        assert!(!spec.rules.iter().any(|r| r.path == Path::new("/dev/pts/3")));
    }

    #[test]
    fn filter_options_follow_the_namespaces() {
        let mut p = Policy {
            network: Network::None,
            ..Policy::default()
        };
        let full = Namespaces {
            base: true,
            net: true,
        };
        let layer2 = Namespaces {
            base: false,
            net: false,
        };
        let o = FilterOptions::for_policy(&p, layer2);
        assert!(o.deny_network && o.host_namespaces && !o.allow_ptrace);
        let o = FilterOptions::for_policy(&p, full);
        assert!(!o.deny_network && !o.host_namespaces);
        p.network = Network::Full;
        p.allow_ptrace = true;
        let o = FilterOptions::for_policy(&p, Namespaces { net: false, ..full });
        assert!(o.allow_ptrace && !o.deny_network && !o.host_namespaces);
    }
}
