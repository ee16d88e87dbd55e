//! The profile's sections, in the order they appear: the fixed text, then one rule per
//! kind of path. Every deny comes after every allow (see the module docs of
//! [`super`] on why the order matters).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{
    Item, Lit, Match, PathRule, SHARED_TMP, SYSTEM_READ_ONLY, SbplError, SbplInput, normalize,
    under,
};
use crate::policy::Network;

const HEADER: &str = "\
(version 1)
(deny default)
";

const PROCESS: &str = "
; Processes: run programs and fork; signal and inspect only processes of this sandbox.
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))

; What a process needs to start: sysctls, the Mach services libSystem looks up (logging,
; notifications, user and group lookups), POSIX semaphores, terminals.
(allow sysctl-read)
(allow mach-lookup
    (global-name \"com.apple.logd\")
    (global-name \"com.apple.system.logger\")
    (global-name \"com.apple.system.notification_center\")
    (global-name \"com.apple.system.opendirectoryd.libinfo\")
    (global-name \"com.apple.system.opendirectoryd.membership\"))
(allow ipc-posix-sem)
(allow ipc-posix-shm-read-data (ipc-posix-name \"apple.shm.notification_center\"))
(allow pseudo-tty)
(allow file-read* file-write* file-ioctl
    (literal \"/dev/ptmx\")
    (literal \"/dev/tty\")
    (regex #\"^/dev/ttys[0-9]+$\"))
(allow file-write*
    (literal \"/dev/null\")
    (literal \"/dev/zero\")
    (literal \"/dev/dtracehelper\"))
";

const NETWORK_FULL: &str = "
; network = \"full\": IP sockets and the system resolver; no other Unix-domain socket.
(allow network-outbound (remote ip))
(allow network-inbound (local ip))
(allow network-bind (local ip))
(allow network-outbound (literal \"/private/var/run/mDNSResponder\"))
(allow file-read* (literal \"/private/var/run/resolv.conf\"))
(allow mach-lookup
    (global-name \"com.apple.dnssd.service\")
    (global-name \"com.apple.SystemConfiguration.DNSConfiguration\")
    (global-name \"com.apple.SystemConfiguration.configd\")
    (global-name \"com.apple.trustd.agent\"))
";

const NETWORK_NONE: &str = "
; network = \"none\": no socket rule; `(deny default)` refuses them.
";

/// The comment and head of the `network = "allow"` rule; the filters follow, one per port
/// ([`Endpoint`]).
pub(super) const NETWORK_ALLOW: &str = "
; network = \"allow\": TCP over IPv4 to the egress proxy's ports on the host's loopback and
; nothing else: no other port or address, no UDP (the proxy resolves names), no bind, no
; inbound, no Unix-domain socket, no resolver or certificate service.
(allow network-outbound";

/// What a printed plan shows for the ports, which the host picks at each spawn: the
/// proxy's HTTP and SOCKS5 listeners ([`crate::plan::EgressPlan`]).
pub(super) const PER_SPAWN: [&str; 2] = [
    "<HTTP proxy port, per spawn>",
    "<SOCKS5 proxy port, per spawn>",
];

/// Where the `network = "allow"` rule's ports come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ports {
    /// One spawn's: [`SbplInput::proxy_ports`], required.
    Spawn,
    /// A printed plan's: the spawn's ports when the input has them, else [`PER_SPAWN`].
    Plan,
}

/// One filter of the `network = "allow"` rule: `(remote tcp4 "localhost:PORT")`.
///
/// `tcp4` and `localhost` because the proxy listens on 127.0.0.1 alone: `ip` would also
/// let UDP through, and `tcp` IPv6's `::1`, where the same port number may be another
/// program's listener. Seatbelt takes `localhost` or `*` as the host, not an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Endpoint {
    /// A port the proxy listens on; never 0.
    Port(u16),
    /// A placeholder of [`PER_SPAWN`]: not a port, so a printed plan cannot pass for a
    /// profile that runs. [`super::profile`] never writes one.
    PerSpawn(&'static str),
}

const DENIES: &str = "
; Denies. SBPL applies the last rule that matches, so these come after every allow and win
; over the read-write roots above, even for a data dir inside the workspace.
";

/// Every path of an [`SbplInput`], normalized, and the roots the rules are built from.
struct Paths {
    workspace: PathBuf,
    writable: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    tools: Option<PathBuf>,
    data: Option<PathBuf>,
    masked: Vec<PathBuf>,
    tmpdir: Option<PathBuf>,
    /// Overlay mode: the real workspace and the change set.
    overlay: Option<(PathBuf, PathBuf)>,
}

/// A root and the policy key it came from, for error messages.
type Root<'a> = (&'static str, &'a Path);

/// The paths denied for reading, each with the policy key it came from.
type HiddenPaths = Vec<(&'static str, PathBuf)>;

impl Paths {
    /// Normalizes every path of `input`, in the order of its fields.
    fn new(input: &SbplInput) -> Result<Self, SbplError> {
        let optional = |key, p: &Option<PathBuf>| p.as_deref().map(|p| normalize(key, p));
        Ok(Paths {
            workspace: normalize("workspace", &input.workspace)?,
            writable: norm_all("writable_paths", &input.writable)?,
            read_only: norm_all("read_only", &input.read_only)?,
            tools: optional("tools_dir", &input.tools_dir).transpose()?,
            data: optional("data_dir", &input.data_dir).transpose()?,
            masked: norm_all("masked", &input.masked)?,
            tmpdir: optional("tmpdir", &input.tmpdir).transpose()?,
            overlay: match &input.overlay {
                Some(o) => Some((
                    normalize("workspace", &o.real_workspace)?,
                    normalize("changes_dir", &o.changes)?,
                )),
                None => None,
            },
        })
    }

    /// The roots where deny_names and guard_names apply: the workspace and writable_paths.
    fn named_roots(&self) -> Vec<Root<'_>> {
        std::iter::once(("workspace", self.workspace.as_path()))
            .chain(
                self.writable
                    .iter()
                    .map(|p| ("writable_paths", p.as_path())),
            )
            .collect()
    }

    /// The roots the program may write: the named roots, `/private/tmp` and `TMPDIR`.
    fn rw_roots(&self) -> Vec<Root<'_>> {
        let mut rw_roots = self.named_roots();
        rw_roots.push(("tmpdir", Path::new(SHARED_TMP)));
        if let Some(t) = &self.tmpdir {
            rw_roots.push(("tmpdir", t));
        }
        rw_roots
    }

    /// The roots the program may read: tools_dir and read_only.
    fn ro_roots(&self) -> Vec<Root<'_>> {
        let mut ro_roots: Vec<Root<'_>> = Vec::new();
        if let Some(t) = &self.tools {
            ro_roots.push(("tools_dir", t));
        }
        ro_roots.extend(self.read_only.iter().map(|p| ("read_only", p.as_path())));
        ro_roots
    }
}

/// Builds the profile's items in order. Every deny comes after every allow.
pub(super) fn items(input: &SbplInput, ports: Ports) -> Result<Vec<Item>, SbplError> {
    let egress = endpoints(input, ports)?;
    let paths = Paths::new(input)?;
    let named_roots = paths.named_roots();
    let rw_roots = paths.rw_roots();
    let ro_roots = paths.ro_roots();

    let mut items = vec![Item::Fixed(HEADER), Item::Fixed(PROCESS)];
    items.push(Item::Paths(system_rule()?));
    items.push(Item::Paths(lookup_rule(&rw_roots, &ro_roots)?));
    items.push(Item::Paths(roots_rule(
        "tools_dir and read_only: read and map executable.",
        "allow file-read* file-map-executable",
        &ro_roots,
    )?));
    items.push(Item::Paths(roots_rule(
        "The workspace, writable_paths, /private/tmp and TMPDIR: read, write, map executable.",
        "allow file-read* file-write* file-map-executable",
        &rw_roots,
    )?));
    if let Some((real, changes)) = &paths.overlay {
        items.extend(overlay_rules(&paths, real, changes)?);
    }
    items.push(match input.network {
        Network::Full => Item::Fixed(NETWORK_FULL),
        Network::None => Item::Fixed(NETWORK_NONE),
        Network::Allow => Item::Egress(egress),
    });

    items.push(Item::Fixed(DENIES));
    let (hidden, guarded, mut hidden_paths) = name_rules(input, &paths.masked, &named_roots)?;
    items.push(Item::Paths(hidden));
    items.push(Item::Paths(guarded));
    if let Some(data) = &paths.data {
        items.push(Item::Paths(data_dir_rule(data)?));
        hidden_paths.push(("data_dir", data.clone()));
    }
    if let Some((real, changes)) = &paths.overlay {
        hidden_paths.push(("workspace", real.clone()));
        hidden_paths.push(("changes_dir", changes.clone()));
    }
    let mut pinned = pinned_rule(&hidden_paths, &rw_roots)?;
    if paths.overlay.is_some() {
        // The snapshot itself: removed and remade as a symlink, it would lead the host's
        // difference after the run elsewhere.
        pinned.add(Match::Literal, Lit::new("workspace", &paths.workspace)?);
    }
    items.push(Item::Paths(pinned));
    Ok(items)
}

/// Overlay mode (the workspace is a snapshot in the change set): the change set closed
/// and the real workspace kept from writes, then the snapshot and the `writable_paths`
/// inside the real workspace opened again. They come after the read-write roots, whose
/// `/private/tmp` may hold either, and before every deny of names and the data dir, which
/// keep their meaning on the snapshot.
fn overlay_rules(paths: &Paths, real: &Path, changes: &Path) -> Result<Vec<Item>, SbplError> {
    let mut closed = PathRule::new(
        "Overlay mode: the change set (the host's), but for the snapshot: no read, no write.",
        "deny file-read* file-write*",
    );
    closed.add(Match::Subpath, Lit::new("changes_dir", changes)?);
    let mut kept = PathRule::new(
        "Overlay mode: the real workspace, which the host's apply changes: no write.",
        "deny file-write*",
    );
    kept.add(Match::Subpath, Lit::new("workspace", real)?);
    let mut lookup = PathRule::new(
        "Overlay mode: the path lookup above the snapshot.",
        "allow file-read-metadata",
    );
    lookup.add(Match::Literal, Lit::new("changes_dir", changes)?);
    let mut reopened = PathRule::new(
        "Overlay mode: the snapshot, and writable_paths inside the real workspace: read, write, map executable.",
        "allow file-read* file-write* file-map-executable",
    );
    reopened.add(Match::Subpath, Lit::new("workspace", &paths.workspace)?);
    for w in paths.writable.iter().filter(|w| w.starts_with(real)) {
        reopened.add(Match::Subpath, Lit::new("writable_paths", w)?);
    }
    Ok(vec![
        Item::Paths(closed),
        Item::Paths(kept),
        Item::Paths(lookup),
        Item::Paths(reopened),
    ])
}

/// The filters of the `network = "allow"` rule (empty for `none` and `full`), the ports in
/// the input's order without repeats.
///
/// Checked first, so that a spawn without its ports fails before any path is looked at:
/// an empty list would leave the program without a route, and ports for another mode
/// mean the caller mixed up two runs.
fn endpoints(input: &SbplInput, ports: Ports) -> Result<Vec<Endpoint>, SbplError> {
    let given = &input.proxy_ports;
    if input.network != Network::Allow {
        if !given.is_empty() {
            return Err(SbplError::ProxyPortsWithoutAllow);
        }
        return Ok(Vec::new());
    }
    if given.is_empty() {
        return match ports {
            Ports::Spawn => Err(SbplError::NoProxyPort),
            Ports::Plan => Ok(PER_SPAWN.into_iter().map(Endpoint::PerSpawn).collect()),
        };
    }
    if given.contains(&0) {
        return Err(SbplError::ProxyPortZero);
    }
    let mut seen = HashSet::new();
    Ok(given
        .iter()
        .filter(|&&p| seen.insert(p))
        .map(|&p| Endpoint::Port(p))
        .collect())
}

/// The system directories, read-only.
fn system_rule() -> Result<PathRule, SbplError> {
    let mut system = PathRule::new(
        "System directories and the dyld caches: read and map executable.",
        "allow file-read* file-map-executable",
    );
    for p in SYSTEM_READ_ONLY {
        system.add(Match::Subpath, Lit::new("system", Path::new(p))?);
    }
    Ok(system)
}

/// Path lookups (getcwd, realpath) stat every directory above a root.
fn lookup_rule(rw_roots: &[Root<'_>], ro_roots: &[Root<'_>]) -> Result<PathRule, SbplError> {
    let mut lookup = PathRule::new(
        "Path lookups: the directories above each root, and the root symlinks.",
        "allow file-read-metadata",
    );
    for p in ["/", "/private", "/private/var", "/tmp", "/var", "/etc"] {
        lookup.add(Match::Literal, Lit::new("system", Path::new(p))?);
    }
    for (key, root) in rw_roots.iter().chain(ro_roots) {
        let above: Vec<&Path> = root.ancestors().skip(1).collect();
        for a in above.into_iter().rev() {
            lookup.add(Match::Literal, Lit::new(key, a)?);
        }
    }
    Ok(lookup)
}

/// One `subpath` filter per root under `head`.
fn roots_rule(
    comment: &'static str,
    head: &'static str,
    roots: &[Root<'_>],
) -> Result<PathRule, SbplError> {
    let mut rule = PathRule::new(comment, head);
    for (key, p) in roots {
        rule.add(Match::Subpath, Lit::new(key, p)?);
    }
    Ok(rule)
}

/// The rules of the names: `masked` and each deny_name under each named root (no read,
/// no write), each guard_name under each named root (no write); and every path the first
/// rule hides, with its key, for [`pinned_rule`]. One pass over the roots, deny_names
/// before guard_names at each, so that the first bad name is the one reported.
fn name_rules(
    input: &SbplInput,
    masked: &[PathBuf],
    named_roots: &[Root<'_>],
) -> Result<(PathRule, PathRule, HiddenPaths), SbplError> {
    let mut hidden = PathRule::new(
        "masked and deny_names: no read, no write.",
        "deny file-read* file-write*",
    );
    let mut hidden_paths = Vec::new();
    for p in masked {
        hidden.add(Match::Subpath, Lit::new("masked", p)?);
        hidden_paths.push(("masked", p.clone()));
    }
    let mut guarded = PathRule::new("guard_names: no write.", "deny file-write*");
    for (_, root) in named_roots {
        for name in &input.deny_names {
            let p = under("deny_names", root, name)?;
            hidden.add(Match::Subpath, Lit::new("deny_names", &p)?);
            hidden_paths.push(("deny_names", p));
        }
        for name in &input.guard_names {
            let p = under("guard_names", root, name)?;
            guarded.add(Match::Subpath, Lit::new("guard_names", &p)?);
        }
    }
    Ok((hidden, guarded, hidden_paths))
}

/// The data dir: no read, no write.
fn data_dir_rule(data: &Path) -> Result<PathRule, SbplError> {
    let mut deny = PathRule::new(
        "The data dir: no read, no write.",
        "deny file-read* file-write*",
    );
    deny.add(Match::Subpath, Lit::new("data_dir", data)?);
    Ok(deny)
}

/// Renaming a directory above a hidden path moves the path out from under its deny
/// (`mv workspace /private/tmp/w` would expose `w/.env`). The directories between a
/// writable root and a hidden path, the root included, keep their name.
fn pinned_rule(
    hidden_paths: &[(&'static str, PathBuf)],
    rw_roots: &[Root<'_>],
) -> Result<PathRule, SbplError> {
    let mut pinned = PathRule::new(
        "Directories above a hidden path inside a writable root: no rename, no removal.",
        "deny file-write*",
    );
    for (key, hidden) in hidden_paths {
        for a in hidden.ancestors().skip(1) {
            if rw_roots.iter().any(|(_, root)| a.starts_with(root)) {
                pinned.add(Match::Literal, Lit::new(key, a)?);
            }
        }
    }
    Ok(pinned)
}

fn norm_all(key: &'static str, paths: &[PathBuf]) -> Result<Vec<PathBuf>, SbplError> {
    paths.iter().map(|p| normalize(key, p)).collect()
}
