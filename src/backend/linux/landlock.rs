//! The Landlock ruleset: created and filled in the parent, enforced by the child.
//!
//! [`build`] opens every path of a [`RulesetSpec`], creates the ruleset and adds the rules,
//! all before `clone` (a split ruleset's layer shared by every command of a sandbox is
//! built once and reused: [`super::shared_layer`]). The child then only calls, after `PR_SET_NO_NEW_PRIVS`,
//! `stockade_sys::linux::landlock_restrict_self(prepared.raw_fd(), 0)`: one system call, no
//! allocation. The ruleset fd is close-on-exec (the kernel creates it so), so the program
//! never inherits it.
//!
//! # Negotiation, and a status that does not lie
//!
//! The ABI is negotiated here, from the version the kernel reports, capped at
//! [`TESTED_ABI`] (rights added by later ABIs are never handled before someone tests them
//! here). The ruleset then asks the `landlock` crate for exactly what that ABI offers with
//! `CompatLevel::HardRequirement`. The crate's `BestEffort` would silently drop what the
//! kernel lacks and does not say what it kept (`RulesetCreated` keeps the handled set
//! private), so the [`Status`] could only guess; negotiating first and hard-requiring the
//! result makes [`Status`] exact by construction: anything the crate would have dropped is an
//! error instead. What an older kernel lacks shows in [`Status`]:
//!
//! | ABI | adds | without it |
//! | --- | --- | --- |
//! | 2 | `Refer` | a rename or link across directories always fails with `EXDEV` |
//! | 3 | `Truncate` | truncation is not restricted |
//! | 4 | TCP bind/connect | [`RulesetSpec::deny_tcp`] has no effect; [`RulesetSpec::connect_tcp`] is an error |
//! | 5 | `IoctlDev` | ioctls on device files are not restricted |
//! | 6 | signal and abstract-socket scopes | [`RulesetSpec::scope`] has no effect |
//!
//! A kernel without Landlock is an error ([`LandlockBuildError::Unsupported`]), which the
//! caller maps to "layer unavailable".
//!
//! # What Landlock cannot express
//!
//! Rules are "this right beneath this directory"; there is no exception beneath an allowed
//! directory and no non-recursive rule. So a data dir under the workspace, or `/etc/shadow`
//! under a readable `/etc`, is only hidden by the mount layer, and a `ReadDir` rule on `/`
//! lets the program list every directory it can reach (names, not contents). In the full
//! layer `/` is the sandbox's own root and holds nothing else; in the Landlock-only layer it
//! is the host's root, so the plan ([`crate::plan::Walls::linux`]) lists `/` only on the
//! full layer. Which paths get which [`Grant`] is the plan's decision; this module opens
//! them and fills the ruleset.
//!
//! # TCP
//!
//! With [`RulesetSpec::deny_tcp`] (ABI ≥ 4) the ruleset handles `BindTcp` and `ConnectTcp`,
//! and each port of [`RulesetSpec::connect_tcp`] gets a `NetPort` rule that allows
//! `ConnectTcp` alone: the program connects to those ports (the egress proxy's listeners)
//! and binds nothing, not even port 0 (an explicit `bind` before `connect`; the implicit
//! bind of an unbound socket's `connect` is not a `bind` and is not checked). A port rule
//! names a port, not an address: it allows that port on every host, so the ports are the
//! ones the proxy was given at this spawn, and seccomp keeps every socket but TCP ones away
//! (`FilterOptions::inet_stream_only`), since Landlock governs TCP alone. Asking for ports
//! where the ruleset cannot deny TCP (ABI < 4) is an error
//! ([`LandlockBuildError::TcpUnsupported`]): the ports would be the only restriction
//! named, and none would hold.
//!
//! Not governed (ABI ≤ 7): `listen` on a socket never bound binds it to an ephemeral port
//! on every address by itself, no `bind` call made, so a program under these rules can
//! still accept TCP connections from wherever the host is reachable. TCP Fast Open's
//! `sendto(…, MSG_FASTOPEN, addr)` connects without the `connect` hook (landlock-lsm/
//! linux#41); seccomp refuses that flag where these rules apply.
//!
//! Rules name inodes, not path strings. Host paths that the child bind-mounts keep their
//! rules inside the new root; file systems the child creates itself (a fresh `/tmp` tmpfs,
//! `/proc`, a new devpts) are not covered by rules on host paths. For those, the child adds
//! a rule after mounting, before restricting: open the mount point `O_PATH` and call
//! `landlock_add_rule` on [`Prepared::raw_fd`] with the access bits from
//! [`Prepared::access_bits`], which the parent computes in advance.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use crate::error::{Errno, LandlockBuildError};

/// The newest Landlock ABI whose rights this module handles. A newer kernel is treated as
/// this ABI until its additions (ABI 9: `ResolveUnix`) are wired and tested here.
pub const TESTED_ABI: ABI = ABI::V7;

use crate::plan::Seen;
pub use crate::plan::{Grant, RulesetSpec};

/// The rights of `grant` at `abi`, before masking with what the ruleset handles.
fn rights(grant: Grant, abi: ABI) -> BitFlags<AccessFs> {
    match grant {
        Grant::ReadExec => AccessFs::from_read(abi),
        Grant::Read => AccessFs::ReadFile | AccessFs::ReadDir,
        Grant::ReadWrite => AccessFs::from_all(abi),
        Grant::Device => {
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir | AccessFs::IoctlDev
        }
        Grant::ListDir => AccessFs::ReadDir.into(),
    }
}

/// What the ruleset enforces on this kernel: exactly, never more than is true.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The ABI version the kernel reports.
    pub kernel_abi: i32,
    /// The ABI the ruleset was built for: the kernel's, capped at the newest ABI whose
    /// rights stockade handles and tests (7).
    pub abi: ABI,
    /// The file-system rights the ruleset handles (denied unless a rule grants them).
    pub handled_fs: BitFlags<AccessFs>,
    /// The network rights the ruleset handles (no rule grants any: all denied).
    pub handled_net: BitFlags<AccessNet>,
    /// The scopes the ruleset restricts.
    pub scoped: BitFlags<Scope>,
    /// The TCP ports a connect is allowed to while TCP is denied (empty when it is not).
    pub connect_tcp: Vec<u16>,
    /// Paths of the spec that do not exist and got no rule.
    pub skipped: Vec<PathBuf>,
}

impl Status {
    /// Renames and links across writable directories work (`Refer` is handled and granted
    /// on writable roots); without it they fail with `EXDEV`.
    pub fn refer(&self) -> bool {
        self.handled_fs.contains(AccessFs::Refer)
    }

    /// The `allowed_access` bits of a rule for `grant` on a directory (`dir`) or another
    /// file under this status, as a prepared ruleset gives them (`Prepared::access_bits`).
    pub fn access_bits(&self, grant: Grant, dir: bool) -> u64 {
        rule_access(grant, self.abi, self.handled_fs, dir).bits()
    }

    /// TCP bind and connect are denied (but connects to [`Status::connect_tcp`]).
    pub fn tcp_denied(&self) -> bool {
        self.handled_net
            .contains(AccessNet::BindTcp | AccessNet::ConnectTcp)
    }

    /// Signals to processes outside the sandbox are denied.
    pub fn signals_scoped(&self) -> bool {
        self.scoped.contains(Scope::Signal)
    }

    /// Connecting to abstract unix sockets created outside the sandbox is denied.
    pub fn abstract_unix_scoped(&self) -> bool {
        self.scoped.contains(Scope::AbstractUnixSocket)
    }
}

/// A ruleset ready for the child, and what it enforces.
#[derive(Debug)]
pub struct Prepared {
    fd: OwnedFd,
    status: Status,
}

impl Prepared {
    /// The ruleset fd for `stockade_sys::linux::landlock_restrict_self(fd, 0)` in the child.
    ///
    /// Valid while this `Prepared` is alive; close-on-exec.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// What the ruleset enforces.
    // Read by the tests of the ruleset (`tests/landlock_self.rs`).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The `allowed_access` bits of a rule for `grant` on a directory (`dir`) or another
    /// file, at the negotiated ABI: for rules the child adds itself with
    /// `landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH)` on mounts it creates (see the module
    /// docs). Zero means the rule would grant nothing and must not be added (the kernel
    /// refuses an empty rule with `ENOMSG`).
    // Read by the tests of the ruleset (`tests/landlock_self.rs`); the sandbox asks its
    // [`Status`].
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn access_bits(&self, grant: Grant, dir: bool) -> u64 {
        self.status.access_bits(grant, dir)
    }

    /// Splits into the fd and the status (the fd stays open).
    pub fn into_parts(self) -> (OwnedFd, Status) {
        (self.fd, self.status)
    }
}

/// The rights a rule for `grant` gets: within the handled set, and for a non-directory only
/// the rights that apply to files (the kernel refuses directory rights on a file).
fn rule_access(
    grant: Grant,
    abi: ABI,
    handled: BitFlags<AccessFs>,
    dir: bool,
) -> BitFlags<AccessFs> {
    let rights = rights(grant, abi) & handled;
    if dir {
        rights
    } else {
        rights & AccessFs::from_file(abi)
    }
}

/// Builds the ruleset for `spec` in the parent.
///
/// # Errors
///
/// - [`LandlockBuildError::Unsupported`]: the kernel has no Landlock.
/// - [`LandlockBuildError::Workspace`]: the workspace cannot be opened.
/// - [`LandlockBuildError::OpenPath`]: another path exists but cannot be opened (`EACCES`,
///   `ELOOP`, …); paths that do not exist are skipped instead.
/// - [`LandlockBuildError::TcpUnsupported`]: the spec denies TCP but to some ports, and the
///   kernel's Landlock (ABI < 4) cannot deny TCP.
/// - [`LandlockBuildError::CreateRuleset`], [`LandlockBuildError::AddRule`],
///   [`LandlockBuildError::AddPortRule`]: the kernel or the crate refused the ruleset or a
///   rule.
///
/// # Platform
///
/// Linux only.
pub fn build(spec: &RulesetSpec) -> Result<Prepared, LandlockBuildError> {
    let (mut status, opened) = negotiate_and_open(spec)?;
    let created = create_ruleset(status.handled_fs, status.handled_net, status.scoped)?;
    let created = add_port_rules(created, &status.connect_tcp)?;

    // With HardRequirement and a supported ABI the crate always creates a real ruleset;
    // `None` would mean it fell back to a dummy one, which must never pass as enforced.
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| {
        LandlockBuildError::CreateRuleset("the landlock crate created no ruleset fd".into())
    })?;
    add_rules(
        &fd,
        opened,
        status.abi,
        status.handled_fs,
        &mut status.skipped,
    )?;
    Ok(Prepared { fd, status })
}

/// What [`build`] would report for `spec`, without making the ruleset: the ABI negotiated
/// and every path opened and checked as [`build`] does (so the same path errors come back),
/// but no ruleset created and no rule added. For a caller that needs only the status and
/// the access bits ([`Status::access_bits`]): the sandbox's own check at
/// `Sandbox::new`, whose commands each build their ruleset anyway; building one there only
/// to close it cost a `landlock_add_rule` per path.
///
/// # Errors
///
/// As [`build`], but for [`LandlockBuildError::CreateRuleset`],
/// [`LandlockBuildError::AddRule`] and [`LandlockBuildError::AddPortRule`], which only a
/// build meets.
pub fn status(spec: &RulesetSpec) -> Result<Status, LandlockBuildError> {
    // A `stat` per path where a build opens, `fstat`s and closes it: the status needs
    // only what each path is, and this runs at every `Sandbox::new`. Where the plan,
    // just before, found the path neither a symlink nor missing, its `lstat` said what
    // a `stat` would ([`RulesetSpec::seen`]): no `stat` then.
    let (mut status, looked) = negotiate_and_look(spec, |p, grant| {
        match spec.seen_at(p).and_then(|seen| Found::seen(seen, grant)) {
            Some(found) => Ok(((), found)),
            None => std::fs::metadata(p).map(|md| ((), Found::of(&md))),
        }
    })?;
    for (path, (), grant, found) in looked {
        if rule_access(grant, status.abi, status.handled_fs, found.dir).is_empty() {
            status.skipped.push(path.to_path_buf());
        }
    }
    Ok(status)
}

/// What a rule needs to know of the object at its path (a final symlink followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Found {
    /// It is a directory: the rule gets the directory rights of its grant.
    dir: bool,
    /// A [`Grant::Device`] rule may name it ([`is_device`]).
    device: bool,
    /// `dir` is the plan's word, not an `fstat` of the opened file: [`add_rules`] lets
    /// the kernel check it.
    unchecked: bool,
}

impl Found {
    /// What `md` (of the path, symlinks followed) says.
    fn of(md: &std::fs::Metadata) -> Found {
        Found {
            dir: md.is_dir(),
            device: is_device(md),
            unchecked: false,
        }
    }

    /// What a rule for `grant` learns from what the plan saw, when that is enough: a
    /// [`Seen::NotDir`] may be a device or not, which only a device rule needs to know.
    fn seen(seen: Seen, grant: Grant) -> Option<Found> {
        let (dir, device) = match seen {
            Seen::Dir => (true, true),
            Seen::CharDevice => (false, true),
            Seen::NotDir if grant != Grant::Device => (false, false),
            Seen::NotDir => return None,
        };
        Some(Found {
            dir,
            device,
            unchecked: false,
        })
    }
}

/// The negotiated status of `spec` (its `skipped` the paths that do not exist) and the
/// paths opened for their rules.
///
/// A path opened without the plan having seen a directory there is `fstat`ed: for the
/// device check of a device rule, which nothing else makes (the kernel takes file rights
/// on a regular file as well as on a device), and to give a file only file rights. One
/// the plan saw as a directory is not, at any spawn, however long after the plan: the
/// rule gets a directory's rights, which the kernel refuses on anything but a directory
/// (each grant's directory rights hold `ReadDir`, a right files do not have), so the
/// kernel makes the check on the very inode opened, and [`add_rules`] looks again only
/// when it refuses.
fn negotiate_and_open(spec: &RulesetSpec) -> Result<(Status, Opened<'_>), LandlockBuildError> {
    negotiate_and_look(spec, |p, _| {
        let file = open_path(p)?;
        if spec.seen_at(p) == Some(Seen::Dir) {
            let found = Found {
                dir: true,
                device: true,
                unchecked: true,
            };
            return Ok((file, found));
        }
        let md = file.metadata()?;
        Ok((file, Found::of(&md)))
    })
}

/// As [`negotiate_and_open`], each path looked at with `look` (which follows symlinks,
/// as opening a path for a rule does; it is given the rule's grant), keeping what it
/// returns.
fn negotiate_and_look<T>(
    spec: &RulesetSpec,
    look: impl Fn(&Path, Grant) -> io::Result<(T, Found)>,
) -> Result<(Status, Looked<'_, T>), LandlockBuildError> {
    let (kernel_abi, abi) = negotiate()?;
    let handled_fs = AccessFs::from_all(abi);
    let handled_net = if spec.deny_tcp {
        AccessNet::from_all(abi)
    } else {
        BitFlags::EMPTY
    };
    // Without TCP denied every port is open: a port rule would add nothing (and the crate
    // refuses one for an unhandled right).
    let connect_tcp = if spec.deny_tcp {
        spec.connect_tcp.clone()
    } else {
        Vec::new()
    };
    if !connect_tcp.is_empty() && !handled_net.contains(AccessNet::ConnectTcp) {
        return Err(LandlockBuildError::TcpUnsupported { kernel_abi });
    }
    let scoped = if spec.scope {
        Scope::from_all(abi)
    } else {
        BitFlags::EMPTY
    };
    // Open everything first, so a missing workspace fails before any kernel object exists.
    let (opened, skipped) = look_all(spec, look)?;
    Ok((
        Status {
            kernel_abi,
            abi,
            handled_fs,
            handled_net,
            scoped,
            connect_tcp,
            skipped,
        },
        opened,
    ))
}

/// The ABI version the kernel reports, and the ABI used: that version capped at
/// [`TESTED_ABI`].
fn negotiate() -> Result<(i32, ABI), LandlockBuildError> {
    let kernel_abi = kernel_abi().map_err(|e| LandlockBuildError::Unsupported {
        errno: Errno::from_raw(e.raw()),
    })?;
    let abi = ABI::from(kernel_abi).min(TESTED_ABI);
    if abi == ABI::Unsupported {
        return Err(LandlockBuildError::Unsupported {
            errno: Errno::EOPNOTSUPP,
        });
    }
    Ok((kernel_abi, abi))
}

/// The Landlock ABI version the kernel reports, asked once per process: a kernel's
/// Landlock does not change while it runs, and every build (one per command, and the
/// sandbox's own) would otherwise ask again.
fn kernel_abi() -> Result<i32, stockade_sys::Errno> {
    crate::probe::landlock_abi()
}

/// The paths of a spec opened for their rules, each with its grant and whether it is a
/// directory.
type Opened<'a> = Looked<'a, File>;

/// The paths of a spec, each with what [`look_all`] kept of it, its grant and what it is.
type Looked<'a, T> = Vec<(&'a Path, T, Grant, Found)>;

/// Looks at the workspace (read-write) and every rule's path with `look`; returns what it
/// kept and the paths skipped because they do not exist.
fn look_all<T>(
    spec: &RulesetSpec,
    look: impl Fn(&Path, Grant) -> io::Result<(T, Found)>,
) -> Result<(Looked<'_, T>, Vec<PathBuf>), LandlockBuildError> {
    // At most one `fstat` (or `stat`) per path, here: the device check and the rule's
    // rights both need it.
    let (workspace, found) = look(&spec.workspace, Grant::ReadWrite).map_err(|source| {
        LandlockBuildError::Workspace {
            path: spec.workspace.clone(),
            source,
        }
    })?;
    let mut opened = vec![(spec.workspace.as_path(), workspace, Grant::ReadWrite, found)];
    let mut skipped = Vec::new();
    for rule in &spec.rules {
        let file = look(&rule.path, rule.grant);
        match file {
            Ok((_, found)) if rule.grant == Grant::Device && !found.device => {
                not_a_device(&rule.path);
                skipped.push(rule.path.clone());
            }
            Ok((file, found)) => opened.push((rule.path.as_path(), file, rule.grant, found)),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                skipped.push(rule.path.clone());
            }
            Err(source) => {
                return Err(LandlockBuildError::OpenPath {
                    path: rule.path.clone(),
                    source,
                });
            }
        }
    }
    Ok((opened, skipped))
}

/// A device rule's path that is no device: it gets no rule. A device rule grants writing:
/// through a symlink at a /dev name (or a regular file there) it would grant a host file
/// instead.
fn not_a_device(path: &Path) {
    tracing::warn!(
        path = %path.display(),
        "stockade: not a device (a file, or a symlink to one); no access to it is granted"
    );
}

/// Creates the ruleset that handles exactly these rights, every one of them required.
fn create_ruleset(
    handled_fs: BitFlags<AccessFs>,
    handled_net: BitFlags<AccessNet>,
    scoped: BitFlags<Scope>,
) -> Result<RulesetCreated, LandlockBuildError> {
    let create = |e: landlock::RulesetError| LandlockBuildError::CreateRuleset(Box::new(e));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled_fs)
        .map_err(create)?;
    if !handled_net.is_empty() {
        ruleset = ruleset.handle_access(handled_net).map_err(create)?;
    }
    if !scoped.is_empty() {
        ruleset = ruleset.scope(scoped).map_err(create)?;
    }
    ruleset.create().map_err(create)
}

/// Adds one `NetPort` rule per port that allows `ConnectTcp` and nothing else (no bind).
fn add_port_rules(
    mut created: RulesetCreated,
    ports: &[u16],
) -> Result<RulesetCreated, LandlockBuildError> {
    for &port in ports {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| LandlockBuildError::AddPortRule {
                port,
                source: Box::new(e),
            })?;
    }
    Ok(created)
}

/// Adds one rule per opened path, with the rights of its grant that apply to its kind of
/// file; a path left with no right is added to `skipped` instead.
///
/// The rules go to the kernel directly rather than through the crate's `add_rule`, which
/// would `fstat` each path a second time to find out what this function already knows:
/// whether it is a directory. The rights are within the handled set and, on a file, within
/// the file rights ([`rule_access`]), which is all the crate's check would ensure.
///
/// A path taken for a directory on the plan's word ([`Found::unchecked`]) that the kernel
/// refuses directory rights on (`EINVAL`: it is no directory now) is `fstat`ed then, and
/// gets what an `fstat` at its opening would have given it: the same rule, or none.
fn add_rules(
    ruleset: &OwnedFd,
    opened: Opened<'_>,
    abi: ABI,
    handled_fs: BitFlags<AccessFs>,
    skipped: &mut Vec<PathBuf>,
) -> Result<(), LandlockBuildError> {
    let mut done = Vec::with_capacity(opened.len());
    for (path, file, grant, found) in opened {
        let add = |found: Found| {
            let access = rule_access(grant, abi, handled_fs, found.dir);
            if access.is_empty() {
                // A directory-only grant (`ListDir`) on a file: nothing to allow.
                return Ok(false);
            }
            stockade_sys::linux::landlock_add_rule_path_beneath(
                ruleset.as_fd().into(),
                file.as_fd().into(),
                access.bits(),
            )
            .map(|()| true)
        };
        let added = match add(found) {
            Err(e) if found.unchecked && e.raw() == libc::EINVAL => {
                let md = file
                    .metadata()
                    .map_err(|source| LandlockBuildError::OpenPath {
                        path: path.to_path_buf(),
                        source,
                    })?;
                let found = Found::of(&md);
                if found.dir {
                    // Refused for another reason: that is the error.
                    Err(e)
                } else if grant == Grant::Device && !found.device {
                    not_a_device(path);
                    Ok(false)
                } else {
                    add(found)
                }
            }
            added => added,
        };
        let added = added.map_err(|e| LandlockBuildError::AddRule {
            path: path.to_path_buf(),
            source: Box::new(io::Error::from_raw_os_error(e.raw())),
        })?;
        if added {
            done.push(OwnedFd::from(file));
        } else {
            skipped.push(path.to_path_buf());
        }
    }
    close_all(done);
    Ok(())
}

/// Closes `fds` with one `close_range` per run of consecutive numbers: the paths of a
/// ruleset are opened one after the other and usually get consecutive fds, so a command's
/// ten rule paths take one call instead of ten.
fn close_all(fds: Vec<OwnedFd>) {
    use std::os::fd::IntoRawFd;
    let mut raw: Vec<RawFd> = fds.into_iter().map(IntoRawFd::into_raw_fd).collect();
    raw.sort_unstable();
    let mut rest = raw.as_slice();
    while let Some((&first, _)) = rest.split_first() {
        // The longest run first, first + 1, … at the front of `rest`.
        let len = rest
            .iter()
            .zip(first..)
            .take_while(|(fd, want)| **fd == *want)
            .count();
        let last = first + len as RawFd - 1;
        // SAFETY: every number in `first..=last` is an fd this function owns (taken from
        // an `OwnedFd` above and not closed yet), so the range closes exactly those.
        let _ = unsafe { stockade_sys::linux::close_range(first as u32, last as u32, 0) };
        rest = rest.get(len..).unwrap_or_default();
    }
}

/// Whether `file` (the target, symlinks followed) is what a device rule may grant: a
/// character device, or a directory of them (`/dev/pts`). `/dev/ptmx` is a symlink to
/// `pts/ptmx` in many containers, so the symlink itself is allowed; what it leads to is not
/// a regular file.
fn is_device(md: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    md.file_type().is_char_device() || md.is_dir()
}

/// Opens `path` with `O_PATH | O_CLOEXEC` for a rule (following symlinks, like
/// `landlock::PathFd`).
///
/// Not through `OpenOptions::custom_flags`: std masks the flags with `O_ACCMODE`, which on
/// musl includes `O_PATH` (as `O_SEARCH`), so there the file would be opened for reading,
/// which fails for a terminal without a session (`/dev/tty`: ENXIO) or a file the caller
/// may not read.
fn open_path(path: &Path) -> io::Result<File> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fd =
        stockade_sys::linux::openat(stockade_sys::fd::CWD, &c, libc::O_PATH | libc::O_CLOEXEC, 0)
            .map_err(|e| io::Error::from_raw_os_error(e.raw()))?;
    Ok(File::from(std::os::fd::OwnedFd::from(fd)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_all_closes_each_run_of_fds_and_nothing_between() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let file = tempfile::NamedTempFile::new().unwrap();
        let md = file.as_file().metadata().unwrap();
        let ours = (md.dev(), md.ino());
        let mut fds: Vec<OwnedFd> = (0..6)
            .map(|_| OwnedFd::from(File::open(file.path()).unwrap()))
            .collect();
        // One left out: the others make (at least) two runs around it.
        let kept = fds.remove(2);
        let numbers: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        close_all(fds);
        // What `fd` is open on now, if anything (a closed number may be reused at once by
        // another test's thread, but not for this test's own file).
        let on = |fd: RawFd| {
            let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
            // SAFETY: fstat writes one `stat` into `st`, a local; any fd number is allowed.
            if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
                return None;
            }
            // SAFETY: fstat succeeded, so it filled `st`.
            let st = unsafe { st.assume_init() };
            Some((st.st_dev, st.st_ino))
        };
        assert_eq!(
            on(kept.as_raw_fd()),
            Some(ours),
            "the fd left out stays open"
        );
        for fd in numbers {
            assert_ne!(on(fd), Some(ours), "fd {fd} still open");
        }
    }

    #[test]
    fn file_rules_get_only_file_rights() {
        let all = AccessFs::from_all(ABI::V7);
        let dev = rule_access(Grant::Device, ABI::V7, all, false);
        assert!(!dev.contains(AccessFs::ReadDir));
        assert!(dev.contains(AccessFs::IoctlDev | AccessFs::WriteFile));
        assert!(!dev.contains(AccessFs::Truncate));
        assert!(rule_access(Grant::ListDir, ABI::V7, all, false).is_empty());
        let rw = rule_access(Grant::ReadWrite, ABI::V7, all, true);
        assert!(rw.contains(AccessFs::Refer | AccessFs::Execute | AccessFs::MakeReg));
    }

    #[test]
    fn rules_stay_within_the_handled_set() {
        let v1 = AccessFs::from_all(ABI::V1);
        let dev = rule_access(Grant::Device, ABI::V1, v1, false);
        assert_eq!(dev, AccessFs::ReadFile | AccessFs::WriteFile);
        let rw = rule_access(Grant::ReadWrite, ABI::V1, v1, true);
        assert!(!rw.contains(AccessFs::Refer));
    }

    #[test]
    fn read_exec_and_read_do_not_write() {
        for g in [Grant::ReadExec, Grant::Read, Grant::ListDir] {
            let r = rights(g, ABI::V7);
            assert!((r & AccessFs::from_write(ABI::V7)).is_empty(), "{g:?}");
        }
        assert!(!rights(Grant::Read, ABI::V7).contains(AccessFs::Execute));
    }

    #[test]
    fn a_directorys_rights_hold_one_no_file_has_for_every_grant() {
        // What lets a spawn take a directory on the plan's word: the kernel refuses
        // these rights on anything else (`negotiate_and_open`).
        for abi in [
            ABI::V1,
            ABI::V2,
            ABI::V3,
            ABI::V4,
            ABI::V5,
            ABI::V6,
            TESTED_ABI,
        ] {
            for g in [
                Grant::ReadExec,
                Grant::Read,
                Grant::ReadWrite,
                Grant::Device,
                Grant::ListDir,
            ] {
                let dir = rule_access(g, abi, AccessFs::from_all(abi), true);
                assert!(
                    !(dir & !AccessFs::from_file(abi)).is_empty(),
                    "{abi:?} {g:?}"
                );
            }
        }
    }

    /// Whether this kernel has Landlock; else the test says why it does not run, and fails
    /// where `STOCKADE_TEST_REQUIRE` asks for Landlock.
    fn landlock_or_skip(test: &str) -> bool {
        use std::io::Write;
        if let Err(errno) = kernel_abi() {
            let required = std::env::var("STOCKADE_TEST_REQUIRE")
                .is_ok_and(|v| v.split(',').any(|f| f == "all" || f == "landlock"));
            assert!(
                !required,
                "{test}: required feature landlock missing: {errno:?}"
            );
            let _ = writeln!(
                io::stderr().lock(),
                "SKIP {test}: landlock_create_ruleset: {errno:?}"
            );
            return false;
        }
        true
    }

    /// A directory (the workspace) holding a regular file `f`.
    fn dir_with_a_file() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        (dir, f)
    }

    #[test]
    fn the_status_takes_what_the_plan_saw_for_a_stat() {
        if !landlock_or_skip("the_status_takes_what_the_plan_saw_for_a_stat") {
            return;
        }
        let (dir, f) = dir_with_a_file();
        let skipped = |grant, seen: Option<Seen>| {
            let mut spec = RulesetSpec::new(dir.path()).with(&f, grant);
            spec.seen.extend(seen.map(|s| (f.clone(), s)));
            status(&spec).unwrap().skipped.contains(&f)
        };
        // Looked at: a listing grant on a file grants nothing, a file is no device.
        assert!(skipped(Grant::ListDir, None));
        assert!(skipped(Grant::Device, None));
        // The plan's word, where it saw a directory or a device there: no `stat` (which
        // would have said otherwise here).
        assert!(!skipped(Grant::ListDir, Some(Seen::Dir)));
        assert!(!skipped(Grant::Device, Some(Seen::CharDevice)));
        // A non-directory the plan did not tell apart: enough for any rule but a
        // device's, which looks.
        assert!(skipped(Grant::ListDir, Some(Seen::NotDir)));
        assert!(skipped(Grant::Device, Some(Seen::NotDir)));
        // What the plan saw at another path says nothing of this one.
        let mut spec = RulesetSpec::new(dir.path()).with(&f, Grant::ListDir);
        spec.seen.push((dir.path().join("g"), Seen::Dir));
        assert!(status(&spec).unwrap().skipped.contains(&f));
    }

    #[test]
    fn a_spawn_opens_a_directory_seen_by_the_plan_without_an_fstat_and_gets_the_same_rules() {
        let test =
            "a_spawn_opens_a_directory_seen_by_the_plan_without_an_fstat_and_gets_the_same_rules";
        if !landlock_or_skip(test) {
            return;
        }
        let (dir, f) = dir_with_a_file();
        // The plan saw a directory at `f`, which is a file by the spawn.
        let seen = |spec: RulesetSpec| {
            let mut spec = spec;
            spec.seen = vec![(f.clone(), Seen::Dir), (dir.path().into(), Seen::Dir)];
            spec
        };
        let spec = seen(RulesetSpec::new(dir.path()).with(&f, Grant::ReadExec));
        let (_, opened) = negotiate_and_open(&spec).unwrap();
        let found: Vec<_> = opened.iter().map(|(p, _, _, found)| (*p, *found)).collect();
        let unchecked_dir = Found {
            dir: true,
            device: true,
            unchecked: true,
        };
        assert_eq!(
            found,
            [(dir.path(), unchecked_dir), (f.as_path(), unchecked_dir)],
            "taken on the plan's word, no fstat"
        );
        // The kernel refuses a directory's rights on the file; the build then gives it
        // what an fstat at its opening would have: a file's rights, or nothing.
        for grant in [
            Grant::ReadExec,
            Grant::Read,
            Grant::ReadWrite,
            Grant::Device,
            Grant::ListDir,
        ] {
            let plain = RulesetSpec::new(dir.path()).with(&f, grant);
            let want = build(&plain).unwrap().status().skipped.clone();
            let got = build(&seen(plain)).unwrap().status().skipped.clone();
            assert_eq!(got, want, "{grant:?}");
            let is_skipped = matches!(grant, Grant::Device | Grant::ListDir);
            assert_eq!(got.contains(&f), is_skipped, "{grant:?}");
        }
    }
}
