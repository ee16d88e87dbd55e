//! Why a host cannot sandbox: the real cause behind a refused layer, named with its remedy.
//!
//! A refused namespace `clone`, id-map write, fresh `/proc` or Landlock call says only
//! `EPERM` or `ENOSPC`. The same errno has many causes (an AppArmor sysctl, Debian's old
//! knob, a container's seccomp profile, a chroot, a hidden `/proc`), and each has its own
//! remedy. [`diagnose`] tells them apart from [`HostFacts`]: the errnos the probe or a
//! spawn met, and the contents of a few files. It is a pure function, so every cause is
//! tested over a made-up host; [`HostFacts::read`] fills the facts from the real one, and
//! only after something was refused (the reads are not on the spawn path).
//!
//! No sysctl alone is taken for a cause: a cause is named only when the matching call was
//! refused with the matching errno, since AppArmor profiles grant exceptions to
//! `kernel.apparmor_restrict_unprivileged_userns`, root is exempt from Debian's
//! `kernel.unprivileged_userns_clone`, and a user namespace's own
//! `user.max_user_namespaces` says nothing of its ancestors' limits.

// Only the Linux probe and launcher meet refusals; elsewhere the diagnosis is tested only.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::collections::BTreeMap;

use serde::Serialize;

/// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 23.10 and later).
pub(crate) const APPARMOR_USERNS: &str = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";
/// `user.max_user_namespaces`, of the caller's own user namespace.
pub(crate) const MAX_USER_NAMESPACES: &str = "/proc/sys/user/max_user_namespaces";
/// `kernel.unprivileged_userns_clone` (Debian's and Arch's old patch).
pub(crate) const USERNS_CLONE: &str = "/proc/sys/kernel/unprivileged_userns_clone";
/// The caller's status: its `Seccomp:` line (2 is a filter).
pub(crate) const STATUS: &str = "/proc/self/status";
/// The caller's mounts: how `/proc` is mounted, and what is mounted over its entries.
pub(crate) const MOUNTINFO: &str = "/proc/self/mountinfo";
/// The kernel's version string (WSL 1 and gVisor name themselves there).
pub(crate) const VERSION: &str = "/proc/version";
/// The active Linux security modules, in boot order (securityfs).
pub(crate) const LSM: &str = "/sys/kernel/security/lsm";

/// Every file [`HostFacts::read`] reads.
pub(crate) const FILES: [&str; 7] = [
    APPARMOR_USERNS,
    MAX_USER_NAMESPACES,
    USERNS_CLONE,
    STATUS,
    MOUNTINFO,
    VERSION,
    LSM,
];

/// What a refused feature is: the part of a layer that a [`Cause`] takes away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Feature {
    /// User namespaces (the full layer on Linux).
    UserNamespaces,
    /// A fresh procfs in the sandbox's PID namespace (the full layer, without
    /// `proc_fallback`).
    FreshProc,
    /// Landlock (layer 2, and part of the full layer).
    Landlock,
}

/// A recognized reason why this host refuses a feature, and what its owner can change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// A stable name: `apparmor-userns`, `max-user-namespaces`,
    /// `unprivileged-userns-clone`, `container-seccomp`, `chroot`, `proc-missing`,
    /// `proc-read-only`, `proc-overmounted`, `landlock-not-enabled`,
    /// `landlock-not-built`, `wsl1` or `gvisor`.
    pub id: &'static str,
    /// The feature it takes away.
    pub feature: Feature,
    /// What the host is like, with the value found (`kernel.apparmor_restrict_unprivileged_userns
    /// = 1: …`).
    pub summary: String,
    /// What to change, on the host or in the policy.
    pub remedy: String,
}

/// The facts [`diagnose`] reads: what was refused, with which errno, and the contents of
/// the files in [`FILES`] that could be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HostFacts {
    /// File contents by path; a path missing here was missing or unreadable.
    pub files: BTreeMap<&'static str, String>,
    /// The errno with which the host refused user namespaces (the namespace `clone`, the
    /// id-map write or the first mounts of the new namespace), when it did.
    pub userns_errno: Option<i32>,
    /// The errno with which the kernel refused a fresh procfs, when it did.
    pub proc_errno: Option<i32>,
    /// The errno of `landlock_create_ruleset`, when it failed.
    pub landlock_errno: Option<i32>,
    /// Whether the caller runs under `chroot(2)` ([`super::chrooted`]), when known.
    pub chrooted: Option<bool>,
    /// The caller's executable, for an AppArmor profile that names it.
    pub exe: Option<String>,
}

impl HostFacts {
    /// The real host's files and chroot, with the errnos a probe or a spawn met.
    #[cfg(target_os = "linux")]
    pub(crate) fn read(
        userns_errno: Option<i32>,
        proc_errno: Option<i32>,
        landlock_errno: Option<i32>,
    ) -> HostFacts {
        let files = FILES
            .into_iter()
            .filter_map(|p| std::fs::read_to_string(p).ok().map(|s| (p, s)))
            .collect();
        HostFacts {
            files,
            userns_errno,
            proc_errno,
            landlock_errno,
            chrooted: super::chrooted(),
            exe: std::env::current_exe()
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
        }
    }

    fn file(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str)
    }

    /// A sysctl's value, trimmed.
    fn sysctl(&self, path: &str) -> Option<&str> {
        self.file(path).map(str::trim)
    }
}

/// The causes of what `facts` says was refused, most specific first; empty when none is
/// recognized (or nothing was refused).
pub(crate) fn diagnose(facts: &HostFacts) -> Vec<Cause> {
    let mut causes = Vec::new();
    let refused = [
        facts.userns_errno.map(|_| Feature::UserNamespaces),
        facts.proc_errno.map(|_| Feature::FreshProc),
        facts.landlock_errno.map(|_| Feature::Landlock),
    ];
    // A different kernel explains every refusal at once.
    if let Some(version) = facts.file(VERSION) {
        let platform: Option<fn(&str, Feature) -> Cause> = if is_wsl1(version) {
            Some(wsl1)
        } else if is_gvisor(version) {
            Some(gvisor)
        } else {
            None
        };
        if let Some(make) = platform {
            causes.extend(refused.into_iter().flatten().map(|f| make(version, f)));
            return causes;
        }
    }
    if let Some(errno) = facts.userns_errno {
        causes.extend(userns(facts, errno));
    }
    if facts.proc_errno.is_some() {
        causes.extend(fresh_proc(facts));
    }
    if let Some(errno) = facts.landlock_errno {
        causes.extend(landlock(facts, errno));
    }
    causes
}

/// WSL 1 names Microsoft in its version (`4.4.0-19041-Microsoft`); WSL 2's kernel is a
/// real Linux (`5.15.90.1-microsoft-standard-WSL2`).
fn is_wsl1(version: &str) -> bool {
    version.contains("Microsoft") && !version.contains("WSL2") && !version.contains("standard")
}

/// gVisor (runsc) reports a made-up kernel: `4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016`,
/// or `4.19.0-gvisor` in later releases.
fn is_gvisor(version: &str) -> bool {
    version.contains("-gvisor") || version.contains("#1 SMP Sun Jan 10 15:06:54 PST 2016")
}

fn wsl1(version: &str, feature: Feature) -> Cause {
    Cause {
        id: "wsl1",
        feature,
        summary: format!(
            "this is WSL 1 ({}): it translates Linux calls and has no namespaces, Landlock or seccomp filters",
            version.split_whitespace().nth(2).unwrap_or("Microsoft")
        ),
        remedy: "convert the distribution to WSL 2 (`wsl --set-version <distro> 2` in Windows), \
                 whose kernel is a real Linux"
            .into(),
    }
}

fn gvisor(_version: &str, feature: Feature) -> Cause {
    Cause {
        id: "gvisor",
        feature,
        summary: "this runs under gVisor (runsc), whose kernel implements a subset of Linux: \
                  no Landlock, and its own limits on namespaces and mounts"
            .into(),
        remedy: "gVisor already isolates the container from its host; for stockade's own \
                 walls run the container with runc (`--runtime=runc`), or accept a weaker \
                 layer here (min_layer = \"passthrough\")"
            .into(),
    }
}

/// Why user namespaces were refused with `errno`.
fn userns(facts: &HostFacts, errno: i32) -> Vec<Cause> {
    let cause = |id, summary: String, remedy: String| Cause {
        id,
        feature: Feature::UserNamespaces,
        summary,
        remedy,
    };
    if facts.file(STATUS).is_none() && facts.file(VERSION).is_none() {
        // Without /proc no user namespace gets its id maps.
        return vec![cause(
            "proc-missing",
            "/proc is not mounted (or something is mounted over it): a new user namespace's \
             id maps are written through /proc/self, and a fresh /proc needs the host's"
                .into(),
            "mount procfs on /proc (`mount -t proc proc /proc`; in a container image, let \
             the runtime mount it)"
                .into(),
        )];
    }
    match errno {
        libc::ENOSPC => {
            let limit = facts.sysctl(MAX_USER_NAMESPACES);
            let summary = match limit {
                Some("0") => "user.max_user_namespaces = 0: this user namespace may create \
                              no user namespaces"
                    .to_string(),
                Some(n) => format!(
                    "the limit of user namespaces is reached here or in an ancestor \
                     namespace (user.max_user_namespaces = {n} here)"
                ),
                None => "the limit of user namespaces (user.max_user_namespaces) is reached \
                         here or in an ancestor namespace"
                    .to_string(),
            };
            vec![cause(
                "max-user-namespaces",
                summary,
                "raise it: `sysctl -w user.max_user_namespaces=15000` (and a file in \
                 /etc/sysctl.d/ to keep it); in a container, where the limit is set (its own \
                 user namespace or its host)"
                    .into(),
            )]
        }
        libc::EROFS => vec![proc_read_only(Feature::UserNamespaces)],
        libc::EPERM | libc::EACCES => {
            let mut causes = Vec::new();
            if facts.chrooted == Some(true) {
                causes.push(cause(
                    "chroot",
                    "this process runs under chroot(2), where the kernel refuses new user \
                     namespaces"
                        .into(),
                    "enter the root with pivot_root (as container runtimes do) instead of \
                     chroot"
                        .into(),
                ));
            }
            if facts.sysctl(USERNS_CLONE) == Some("0") {
                causes.push(cause(
                    "unprivileged-userns-clone",
                    "kernel.unprivileged_userns_clone = 0: this kernel (Debian's or Arch's \
                     patch) refuses user namespaces to unprivileged users"
                        .into(),
                    "`sysctl -w kernel.unprivileged_userns_clone=1` (and a file in \
                     /etc/sysctl.d/ to keep it), or run the host as root"
                        .into(),
                ));
            }
            if facts.sysctl(APPARMOR_USERNS) == Some("1") {
                let exe = facts.exe.as_deref().unwrap_or("/path/to/host");
                causes.push(cause(
                    "apparmor-userns",
                    "kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10 and \
                     later): AppArmor lets only profiled programs use user namespaces"
                        .into(),
                    format!(
                        "install an AppArmor profile for this program, e.g. \
                         /etc/apparmor.d/stockade: `abi <abi/4.0>, include <tunables/global> \
                         profile stockade {exe} flags=(unconfined) {{ userns, }}`, then \
                         `apparmor_parser -r /etc/apparmor.d/stockade`; or, for the whole \
                         host, `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
                    ),
                ));
            }
            if causes.is_empty() && errno == libc::EPERM && seccomp_filtered(facts) {
                causes.push(cause(
                    "container-seccomp",
                    "a seccomp filter (Seccomp: 2 in /proc/self/status) refuses unshare/clone \
                     with namespace flags, as Docker's, Podman's and Kubernetes' default \
                     profiles do, while the sysctls allow user namespaces"
                        .into(),
                    "run the container with a profile that allows unshare, clone and clone3 \
                     with namespace flags, mount, umount2 and pivot_root: Docker and Podman \
                     `--security-opt seccomp=unconfined` (or seccomp=profile.json; with \
                     AppArmor also `--security-opt apparmor=unconfined`), Kubernetes \
                     `securityContext.seccompProfile.type: Unconfined` (or Localhost)"
                        .into(),
                ));
            }
            causes
        }
        _ => Vec::new(),
    }
}

/// Whether the caller runs under a seccomp filter (`Seccomp: 2`).
fn seccomp_filtered(facts: &HostFacts) -> bool {
    facts.file(STATUS).is_some_and(|s| {
        s.lines()
            .filter_map(|l| l.strip_prefix("Seccomp:"))
            .any(|v| v.trim() == "2")
    })
}

fn proc_read_only(feature: Feature) -> Cause {
    Cause {
        id: "proc-read-only",
        feature,
        summary: "/proc is mounted read-only: the id maps cannot be written and the kernel \
                  refuses a writable procfs in a new namespace"
            .into(),
        remedy: "mount /proc read-write (in a container, do not make it read-only); when \
                 only a fresh /proc is refused, proc_fallback = true binds this /proc \
                 read-only into the sandbox instead (the program then sees the host's \
                 processes)"
            .into(),
    }
}

/// The `/proc` mount and what is mounted over its entries, from `mountinfo`: (its mount
/// options, the mount points beneath it). Mounts on `/proc/sys/fs/binfmt_misc`, an entry
/// the kernel keeps empty, hide nothing and are left out.
fn proc_mounts(mountinfo: &str) -> (Option<&str>, Vec<&str>) {
    let mut proc_opts = None;
    let mut over = Vec::new();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(point), Some(opts)) = (fields.get(4), fields.get(5)) else {
            continue;
        };
        if *point == "/proc" {
            // A later mount on the same point shadows the earlier one.
            proc_opts = Some(*opts);
            over.clear();
        } else if point.starts_with("/proc/") && *point != "/proc/sys/fs/binfmt_misc" {
            over.push(*point);
        }
    }
    (proc_opts, over)
}

/// Why a fresh procfs was refused.
fn fresh_proc(facts: &HostFacts) -> Vec<Cause> {
    let Some(mountinfo) = facts.file(MOUNTINFO) else {
        return Vec::new();
    };
    let (opts, over) = proc_mounts(mountinfo);
    if opts.is_some_and(|o| o.split(',').any(|o| o == "ro")) {
        return vec![proc_read_only(Feature::FreshProc)];
    }
    if over.is_empty() {
        return Vec::new();
    }
    let shown: Vec<&str> = over.iter().take(4).copied().collect();
    let more = if over.len() > shown.len() {
        ", …"
    } else {
        ""
    };
    vec![Cause {
        id: "proc-overmounted",
        feature: Feature::FreshProc,
        summary: format!(
            "/proc has {} mount(s) over its entries ({}{more}), as a container runtime's \
             masked and read-only paths: the kernel refuses a fresh procfs that would \
             reveal what they hide",
            over.len(),
            shown.join(", ")
        ),
        remedy: "set proc_fallback = true to bind this /proc read-only into the sandbox (the \
                 program then sees the host's processes); or unmask /proc in the container: \
                 Docker `--security-opt systempaths=unconfined`, Podman `--security-opt \
                 unmask=ALL`, Kubernetes `securityContext.procMount: Unmasked`"
            .into(),
    }]
}

/// Why Landlock is missing, from the errno of `landlock_create_ruleset`.
fn landlock(facts: &HostFacts, errno: i32) -> Vec<Cause> {
    match errno {
        libc::EOPNOTSUPP => {
            let active = facts.file(LSM).map(str::trim).filter(|s| !s.is_empty());
            let (now, param) = match active {
                Some(list) => (
                    format!("the active LSMs: {list}"),
                    format!("lsm={list},landlock"),
                ),
                None => (
                    "the active LSMs are listed in /sys/kernel/security/lsm".into(),
                    "lsm=<the active list>,landlock".into(),
                ),
            };
            vec![Cause {
                id: "landlock-not-enabled",
                feature: Feature::Landlock,
                summary: format!(
                    "Landlock is built into this kernel but not enabled at boot ({now})"
                ),
                remedy: format!(
                    "add landlock to the kernel's boot parameter, keeping the active modules: \
                     `{param}` (e.g. in GRUB_CMDLINE_LINUX of /etc/default/grub, then \
                     update-grub and reboot)"
                ),
            }]
        }
        libc::ENOSYS => vec![Cause {
            id: "landlock-not-built",
            feature: Feature::Landlock,
            summary: "this kernel has no Landlock (older than 5.13, or built without \
                      CONFIG_SECURITY_LANDLOCK)"
                .into(),
            remedy: "boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in its lsm= \
                     list (5.13 or later; 6.12 for ABI 6, which scopes signals and abstract \
                     sockets)"
                .into(),
        }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ubuntu-like host with every sysctl permissive and no filter.
    fn host() -> HostFacts {
        let mut files = BTreeMap::new();
        files.insert(APPARMOR_USERNS, "0\n".to_string());
        files.insert(MAX_USER_NAMESPACES, "63457\n".to_string());
        files.insert(
            STATUS,
            "Name:\tx\nSeccomp:\t0\nSeccomp_filters:\t0\n".to_string(),
        );
        files.insert(
            VERSION,
            "Linux version 6.8.0-45-generic (buildd@lcy02) #45-Ubuntu SMP\n".to_string(),
        );
        files.insert(
            MOUNTINFO,
            "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
             23 22 0:5 / /proc rw,nosuid,nodev,noexec - proc proc rw\n\
             24 23 0:40 / /proc/sys/fs/binfmt_misc rw - autofs systemd-1 rw\n"
                .to_string(),
        );
        files.insert(LSM, "lockdown,capability,yama,apparmor\n".to_string());
        HostFacts {
            files,
            exe: Some("/usr/bin/agent".into()),
            chrooted: Some(false),
            ..HostFacts::default()
        }
    }

    fn ids(facts: &HostFacts) -> Vec<&'static str> {
        diagnose(facts).iter().map(|c| c.id).collect()
    }

    fn only(facts: &HostFacts, id: &str) -> Cause {
        let causes = diagnose(facts);
        assert_eq!(causes.len(), 1, "{causes:#?}");
        assert_eq!(causes[0].id, id, "{causes:#?}");
        causes.into_iter().next().unwrap()
    }

    #[test]
    fn nothing_refused_is_no_cause_whatever_the_sysctls_say() {
        let mut h = host();
        h.files.insert(APPARMOR_USERNS, "1\n".into());
        h.files.insert(MAX_USER_NAMESPACES, "0\n".into());
        assert_eq!(diagnose(&h), Vec::new());
        // Nor an errno no cause explains.
        h.userns_errno = Some(libc::ENOMEM);
        assert_eq!(diagnose(&h), Vec::new());
    }

    #[test]
    fn apparmor_restriction_names_the_sysctl_and_a_profile_for_the_binary() {
        let mut h = host();
        h.files.insert(APPARMOR_USERNS, "1\n".into());
        for errno in [libc::EPERM, libc::EACCES] {
            h.userns_errno = Some(errno);
            let c = only(&h, "apparmor-userns");
            assert_eq!(c.feature, Feature::UserNamespaces);
            assert!(
                c.summary
                    .contains("kernel.apparmor_restrict_unprivileged_userns = 1"),
                "{c:?}"
            );
            for part in [
                "userns,",
                "profile stockade /usr/bin/agent",
                "apparmor_parser -r",
                "kernel.apparmor_restrict_unprivileged_userns=0",
            ] {
                assert!(c.remedy.contains(part), "{part}: {c:?}");
            }
        }
        // The sysctl does not explain ENOSPC.
        h.userns_errno = Some(libc::ENOSPC);
        assert_eq!(ids(&h), ["max-user-namespaces"]);
    }

    #[test]
    fn max_user_namespaces_zero_and_a_limit_reached_elsewhere() {
        let mut h = host();
        h.userns_errno = Some(libc::ENOSPC);
        h.files.insert(MAX_USER_NAMESPACES, "0\n".into());
        let c = only(&h, "max-user-namespaces");
        assert!(
            c.summary.starts_with("user.max_user_namespaces = 0"),
            "{c:?}"
        );
        assert!(
            c.remedy.contains("sysctl -w user.max_user_namespaces="),
            "{c:?}"
        );
        h.files.insert(MAX_USER_NAMESPACES, "100\n".into());
        let c = only(&h, "max-user-namespaces");
        assert!(
            c.summary.contains("ancestor") && c.summary.contains("= 100"),
            "{c:?}"
        );
        // A refusal with EPERM is not the limit.
        h.files.insert(MAX_USER_NAMESPACES, "0\n".into());
        h.userns_errno = Some(libc::EPERM);
        assert_eq!(ids(&h), Vec::<&str>::new());
    }

    #[test]
    fn debians_knob_is_named() {
        let mut h = host();
        h.files.insert(USERNS_CLONE, "0\n".into());
        h.userns_errno = Some(libc::EPERM);
        let c = only(&h, "unprivileged-userns-clone");
        assert!(
            c.summary
                .starts_with("kernel.unprivileged_userns_clone = 0"),
            "{c:?}"
        );
        assert!(
            c.remedy.contains("kernel.unprivileged_userns_clone=1"),
            "{c:?}"
        );
        h.files.insert(USERNS_CLONE, "1\n".into());
        assert_eq!(ids(&h), Vec::<&str>::new());
    }

    #[test]
    fn a_container_seccomp_filter_is_named_only_when_the_sysctls_allow_namespaces() {
        let mut h = host();
        h.userns_errno = Some(libc::EPERM);
        h.files
            .insert(STATUS, "Seccomp:\t2\nSeccomp_filters:\t1\n".into());
        let c = only(&h, "container-seccomp");
        for part in [
            "--security-opt seccomp=unconfined",
            "seccompProfile",
            "unshare",
        ] {
            assert!(c.remedy.contains(part), "{part}: {c:?}");
        }
        // A sysctl that refuses is the cause, not the filter.
        h.files.insert(APPARMOR_USERNS, "1\n".into());
        assert_eq!(ids(&h), ["apparmor-userns"]);
        // No filter: nothing is guessed.
        let mut h = host();
        h.userns_errno = Some(libc::EPERM);
        h.files.insert(STATUS, "Seccomp:\t1\n".into());
        assert_eq!(ids(&h), Vec::<&str>::new());
    }

    #[test]
    fn a_chroot_is_named() {
        let mut h = host();
        h.userns_errno = Some(libc::EPERM);
        h.chrooted = Some(true);
        let c = only(&h, "chroot");
        assert!(c.remedy.contains("pivot_root"), "{c:?}");
        // Known to be a chroot, a filter is not blamed as well.
        h.files.insert(STATUS, "Seccomp:\t2\n".into());
        assert_eq!(ids(&h), ["chroot"]);
    }

    #[test]
    fn a_missing_proc_explains_the_id_maps() {
        let mut h = host();
        for path in [
            STATUS,
            MOUNTINFO,
            VERSION,
            APPARMOR_USERNS,
            MAX_USER_NAMESPACES,
        ] {
            h.files.remove(path);
        }
        h.userns_errno = Some(libc::ENOENT);
        let c = only(&h, "proc-missing");
        assert!(c.remedy.contains("mount -t proc proc /proc"), "{c:?}");
    }

    #[test]
    fn a_read_only_proc_refuses_the_id_maps_and_a_fresh_proc() {
        let mut h = host();
        h.userns_errno = Some(libc::EROFS);
        let c = only(&h, "proc-read-only");
        assert_eq!(c.feature, Feature::UserNamespaces);
        let mut h = host();
        h.files.insert(
            MOUNTINFO,
            "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
             23 22 0:5 / /proc ro,nosuid - proc proc rw\n"
                .into(),
        );
        h.proc_errno = Some(libc::EPERM);
        let c = only(&h, "proc-read-only");
        assert_eq!(c.feature, Feature::FreshProc);
        assert!(c.remedy.contains("proc_fallback = true"), "{c:?}");
    }

    #[test]
    fn masked_proc_entries_are_named_with_the_runtime_options() {
        let mut h = host();
        h.proc_errno = Some(libc::EPERM);
        // A plain host's /proc (binfmt_misc aside) explains nothing.
        assert_eq!(ids(&h), Vec::<&str>::new());
        h.files.insert(
            MOUNTINFO,
            "600 500 0:60 / /proc rw,nosuid - proc proc rw\n\
             601 600 0:60 /bus /proc/bus ro,nosuid - proc proc rw\n\
             602 600 0:60 /sys /proc/sys ro,nosuid - proc proc rw\n\
             603 600 0:62 /null /proc/kcore rw,nosuid - tmpfs tmpfs rw\n"
                .into(),
        );
        let c = only(&h, "proc-overmounted");
        assert!(c.summary.contains("3 mount(s)"), "{c:?}");
        assert!(c.summary.contains("/proc/sys, /proc/kcore"), "{c:?}");
        for part in [
            "proc_fallback = true",
            "systempaths=unconfined",
            "procMount",
        ] {
            assert!(c.remedy.contains(part), "{part}: {c:?}");
        }
        // A /proc mounted again over the masked one hides the masks.
        let mi = h.files.get_mut(MOUNTINFO).unwrap();
        mi.push_str("700 500 0:70 / /proc rw - proc proc rw\n");
        assert_eq!(ids(&h), Vec::<&str>::new());
    }

    #[test]
    fn landlock_not_enabled_gives_the_boot_parameter_with_the_active_list() {
        let mut h = host();
        h.landlock_errno = Some(libc::EOPNOTSUPP);
        let c = only(&h, "landlock-not-enabled");
        assert_eq!(c.feature, Feature::Landlock);
        assert!(
            c.summary.contains("lockdown,capability,yama,apparmor"),
            "{c:?}"
        );
        assert!(
            c.remedy
                .contains("lsm=lockdown,capability,yama,apparmor,landlock"),
            "{c:?}"
        );
        h.files.remove(LSM);
        let c = only(&h, "landlock-not-enabled");
        assert!(c.remedy.contains("lsm=<the active list>,landlock"), "{c:?}");
        h.landlock_errno = Some(libc::ENOSYS);
        let c = only(&h, "landlock-not-built");
        assert!(c.remedy.contains("CONFIG_SECURITY_LANDLOCK"), "{c:?}");
    }

    #[test]
    fn wsl1_explains_every_refusal_and_wsl2_is_plain_linux() {
        let mut h = host();
        h.files.insert(
            VERSION,
            "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com) (gcc version 5.4.0) #1237-Microsoft\n".into(),
        );
        h.userns_errno = Some(libc::EINVAL);
        h.landlock_errno = Some(libc::ENOSYS);
        let causes = diagnose(&h);
        assert_eq!(
            causes.iter().map(|c| (c.id, c.feature)).collect::<Vec<_>>(),
            [
                ("wsl1", Feature::UserNamespaces),
                ("wsl1", Feature::Landlock)
            ]
        );
        assert!(
            causes[0].summary.contains("4.4.0-19041-Microsoft"),
            "{causes:?}"
        );
        assert!(causes[0].remedy.contains("wsl --set-version"), "{causes:?}");
        h.files.insert(
            VERSION,
            "Linux version 5.15.90.1-microsoft-standard-WSL2 (root@1) #1 SMP\n".into(),
        );
        assert_eq!(ids(&h), ["landlock-not-built"]);
    }

    #[test]
    fn gvisor_is_told_by_its_made_up_kernel_version() {
        for version in [
            "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016\n",
            "Linux version 4.19.0-gvisor #1 SMP Sun Jan 10 15:06:54 PST 2016\n",
        ] {
            let mut h = host();
            h.files.insert(VERSION, version.into());
            h.landlock_errno = Some(libc::ENOSYS);
            let c = only(&h, "gvisor");
            assert!(c.remedy.contains("runc"), "{c:?}");
            h.landlock_errno = None;
            assert_eq!(ids(&h), Vec::<&str>::new(), "nothing refused");
        }
    }
}
