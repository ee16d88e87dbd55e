//! The file-system half of an explained run: the layout as the host's answering thread
//! sees it ([`View`]), and the classification of one path a watched call names against it.
//!
//! With explain on, the path-taking calls notify the host and continue
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: a report, never a decision; the kernel, the mounts
//! and Landlock decide as always). The thread reads each path, resolves it against the
//! caller's working directory or directory fd, and [`View::classify`] says whether the
//! layout would refuse or hide it, and which policy key is behind that. Only those are
//! recorded: a path the layout shows, with the access asked for, reports nothing, so a
//! clean run's report stays empty.
//!
//! The classification is lexical (`..` is taken lexically; a symlink inside a writable
//! root is not followed), and it errs towards silence: a path that fails the same way on
//! the host (a missing file read, an existing name created, a missing name removed) is
//! not reported, since no wall is behind that failure.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::denial::Wall;
use crate::backend::linux::seccomp::Use;
use crate::plan::{Access, Plan, Step};
use crate::policy::{Layer, Policy, SYSTEM_ALLOWLIST};

/// What a layout entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A system path (the system allowlist, the resolver's configuration): read-only.
    System,
    /// A `read_only` entry (or the tools dir): read-only.
    ReadOnly,
    /// Writable: a writable root, a private mount (`/tmp`, `/dev`, `/proc`).
    Writable,
    /// Layer 2's directory granted for listing around hidden entries: entries below it
    /// that no deeper grant names are hidden.
    ListDir,
}

/// A mask and what it hides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hidden {
    DataDir,
    Masked,
    /// A host entry hidden by design (a unix socket, a file "others" may not read).
    Host,
    DenyName,
}

/// The layout of one run, as the host classifies paths against it.
#[derive(Clone, Debug, Default)]
pub(crate) struct View {
    /// Visible paths and their access.
    entries: Vec<(PathBuf, Kind)>,
    /// Masked paths: reading them (or below them) is refused or reads nothing.
    hidden: Vec<(PathBuf, Hidden)>,
    /// `guard_names` under each writable root: read-only.
    guarded: Vec<PathBuf>,
}

/// The kernel's access-mode bits of the open flags. Not `libc::O_ACCMODE`: musl's includes
/// `O_PATH` (as `O_SEARCH`), which would make every `O_PATH` open a write.
const ACCESS_MODE: i32 = 0o3;

/// Whether a use changes the file system at the path.
fn writes(u: Use, open_flags: u64) -> bool {
    match u {
        Use::Open { .. } => {
            let f = open_flags as i32;
            f & ACCESS_MODE != libc::O_RDONLY || f & (libc::O_CREAT | libc::O_TRUNC) != 0
        }
        Use::Write | Use::Create | Use::Remove => true,
        Use::Stat | Use::Exec | Use::Read => false,
    }
}

/// The verb a report names for a use: `read`, `write`, `stat`, `exec`, `create`,
/// `remove`, `link`.
pub(crate) fn verb(u: Use, open_flags: u64) -> &'static str {
    match u {
        Use::Open { .. } if writes(u, open_flags) => "write",
        Use::Open { .. } => "read",
        Use::Stat => "stat",
        Use::Exec => "exec",
        Use::Write => "write",
        Use::Create => "create",
        Use::Remove => "remove",
        Use::Read => "link",
    }
}

/// Whether `inner` is `outer` or below it.
fn within(inner: &[u8], outer: &[u8]) -> bool {
    inner.starts_with(outer)
        && (inner.len() == outer.len() || outer == b"/" || inner.get(outer.len()) == Some(&b'/'))
}

impl View {
    /// The view of `plan` for `policy`, with the data dir (canonical) and layer 2's private
    /// `TMPDIR` of this command.
    pub(crate) fn new(
        plan: &Plan,
        policy: &Policy,
        data_dir: Option<&Path>,
        private_tmp: Option<&Path>,
    ) -> View {
        let mut v = View::default();
        let system = |p: &Path| SYSTEM_ALLOWLIST.iter().any(|s| p.starts_with(s));
        let masked = |p: &Path| policy.masked.iter().any(|m| m == p);
        if let Some(d) = data_dir {
            v.hidden.push((d.to_path_buf(), Hidden::DataDir));
        }
        // The system allowlist, symlinks included (`/lib -> usr/lib` on a merged-/usr
        // host): read through, never written. One missing on the host reports nothing
        // (see `classify`).
        for s in SYSTEM_ALLOWLIST {
            v.entries.push((PathBuf::from(s), Kind::System));
        }
        match plan.layer {
            Layer::Full => {
                for s in &plan.steps {
                    match s {
                        Step::Bind { dst, access, .. } => {
                            let kind = match access {
                                Access::ReadWrite => Kind::Writable,
                                _ if system(dst) || dst.starts_with("/run") => Kind::System,
                                _ => Kind::ReadOnly,
                            };
                            v.entries.push((dst.clone(), kind));
                        }
                        Step::Symlink { link, .. } => v.entries.push((link.clone(), Kind::System)),
                        Step::Tmpfs { dst, .. } => v.entries.push((dst.clone(), Kind::Writable)),
                        Step::Dev { .. } => v.entries.push(("/dev".into(), Kind::Writable)),
                        Step::Proc { .. } => v.entries.push(("/proc".into(), Kind::Writable)),
                        Step::Mask { path, .. } if Some(path.as_path()) != data_dir => {
                            let h = if masked(path) {
                                Hidden::Masked
                            } else {
                                Hidden::Host
                            };
                            v.hidden.push((path.clone(), h));
                        }
                        Step::HideName { path } => v.hidden.push((path.clone(), Hidden::DenyName)),
                        Step::GuardName { path } => v.guarded.push(path.clone()),
                        _ => {}
                    }
                }
            }
            _ => {
                for (p, a) in &plan.roots {
                    let kind = match a {
                        Access::ReadWrite => Kind::Writable,
                        Access::ListDir => Kind::ListDir,
                        Access::ReadOnly if system(p) => Kind::System,
                        Access::ReadOnly => Kind::ReadOnly,
                    };
                    v.entries.push((p.clone(), kind));
                }
                for p in crate::plan::DEV_FILES.iter().chain(&["/proc"]) {
                    v.entries.push((p.into(), Kind::Writable));
                }
                if let Some(t) = private_tmp {
                    v.entries.push((t.to_path_buf(), Kind::Writable));
                }
                for m in &policy.masked {
                    v.hidden.push((m.clone(), Hidden::Masked));
                }
            }
        }
        // `guard_names` in every writable root (the full layer's `.git` layer, layer 2's
        // snapshots and read-only grants alike keep the host's unchanged).
        let roots: Vec<PathBuf> = plan
            .roots
            .iter()
            .filter(|(_, a)| *a == Access::ReadWrite)
            .map(|(r, _)| r.clone())
            .collect();
        for r in &roots {
            for n in &policy.guard_names {
                let g = r.join(n);
                if !v.guarded.contains(&g) {
                    v.guarded.push(g);
                }
            }
        }
        v
    }

    /// What the layout says of `path` (absolute, lexically normal) used as `u` (with the
    /// open flags for [`Use::Open`]) from the policy alone, without looking at the host's
    /// file system. The answering thread calls only this: the time it takes, which the
    /// program can measure on its own call, depends on the path and the policy (both
    /// known to the program), never on what exists on the host outside the sandbox's view.
    pub(crate) fn lexical(&self, path: &[u8], u: Use, open_flags: u64) -> Lexical {
        let write = writes(u, open_flags);
        if let Some(hint) = self.hidden_hint(path, u, write) {
            return Lexical::Refused(Wall::Masked, hint.to_owned());
        }
        if write && self.guarded_at(path) {
            return Lexical::Host;
        }
        match self.deepest(path) {
            Some((_, Kind::Writable)) => Lexical::Clean,
            Some((_, Kind::System | Kind::ReadOnly)) if !write => Lexical::Clean,
            Some((e, Kind::ListDir)) if path == e.as_os_str().as_bytes() && !write => {
                Lexical::Clean
            }
            Some(_) => Lexical::Host,
            None if !write && self.above_entries(path) => Lexical::Clean,
            None => Lexical::Host,
        }
    }

    /// The wall and hint of `path` (absolute, lexically normal) used as `u` (with the open
    /// flags for [`Use::Open`]), or `None` when the layout allows it or no wall is behind
    /// its failure. `exists` says whether a path exists on the host (asked only for a
    /// path [`View::lexical`] leaves to the host). Looks at the host's file system: call
    /// it after the run, never while the program waits for an answer.
    pub(crate) fn classify(
        &self,
        path: &[u8],
        u: Use,
        open_flags: u64,
        exists: &dyn Fn(&[u8]) -> bool,
    ) -> Option<(Wall, String)> {
        match self.lexical(path, u, open_flags) {
            Lexical::Clean => None,
            Lexical::Refused(wall, hint) => Some((wall, hint)),
            Lexical::Host => self.on_host(path, u, open_flags, exists),
        }
    }

    /// The hint of the mask that hides `path` from use `u`, if one does.
    fn hidden_hint(&self, path: &[u8], u: Use, write: bool) -> Option<&'static str> {
        for (h, what) in &self.hidden {
            let h = h.as_os_str().as_bytes();
            if !within(path, h) || (path == h && matches!(u, Use::Stat)) {
                continue;
            }
            if *what == Hidden::DenyName && !write && path != h {
                continue;
            }
            return Some(match what {
                Hidden::DataDir => "the data dir is hidden (by design)",
                Hidden::Masked => "hidden by masked",
                Hidden::Host => "a host socket or private file, hidden (by design)",
                Hidden::DenyName => "hidden by deny_names",
            });
        }
        None
    }

    /// Whether `path` lies within a `guard_names` entry.
    fn guarded_at(&self, path: &[u8]) -> bool {
        self.guarded
            .iter()
            .any(|g| within(path, g.as_os_str().as_bytes()))
    }

    /// The deepest entry that holds `path`.
    fn deepest(&self, path: &[u8]) -> Option<(&Path, Kind)> {
        self.entries
            .iter()
            .filter(|(e, _)| within(path, e.as_os_str().as_bytes()))
            .max_by_key(|(e, _)| e.as_os_str().len())
            .map(|(e, k)| (e.as_path(), *k))
    }

    /// Whether `path` is `/` or a directory above an entry (in the layout, read-only).
    fn above_entries(&self, path: &[u8]) -> bool {
        path == b"/"
            || self
                .entries
                .iter()
                .any(|(e, _)| within(e.as_os_str().as_bytes(), path))
    }

    /// [`View::classify`]'s part that looks at the host: a path [`View::lexical`] found
    /// neither clean nor refused by the policy alone.
    fn on_host(
        &self,
        path: &[u8],
        u: Use,
        open_flags: u64,
        exists: &dyn Fn(&[u8]) -> bool,
    ) -> Option<(Wall, String)> {
        let write = writes(u, open_flags);
        let creates = matches!(u, Use::Create)
            || matches!(u, Use::Open { .. }) && open_flags as i32 & libc::O_CREAT != 0;
        // Fails as on the host: a missing name read, changed or removed; an existing name
        // created.
        let fails_anyway = || {
            if matches!(u, Use::Create) {
                exists(path)
            } else if creates {
                !exists(path) && !exists(parent(path))
            } else {
                !exists(path)
            }
        };
        if write && self.guarded_at(path) {
            return (!fails_anyway()).then(|| (Wall::Layout, "guarded by guard_names".to_owned()));
        }
        let dir = |p: &[u8]| -> String {
            let d = if exists(p)
                && std::fs::metadata(Path::new(std::ffi::OsStr::from_bytes(p)))
                    .is_ok_and(|m| m.is_dir())
            {
                p
            } else {
                parent(p)
            };
            String::from_utf8_lossy(d).into_owned()
        };
        // Only what `lexical` left to the host comes here: a write within a read-only
        // entry, a listed directory's entries, a path outside every entry (and not a
        // read of a directory above one).
        match self.deepest(path) {
            Some((_, Kind::Writable)) => None,
            Some((_, Kind::System)) => (!fails_anyway()).then(|| {
                (
                    Wall::Layout,
                    "read-only system path (never writable)".to_owned(),
                )
            }),
            Some((_, Kind::ReadOnly)) => {
                (!fails_anyway()).then(|| (Wall::Layout, "read_only: not writable".to_owned()))
            }
            // A symlink there is not granted; what it names is checked at its target.
            Some((_, Kind::ListDir))
                if std::fs::symlink_metadata(Path::new(std::ffi::OsStr::from_bytes(path)))
                    .is_ok_and(|m| m.file_type().is_symlink()) =>
            {
                None
            }
            // A new name in a listed directory: a write to a read-only one.
            Some((e, Kind::ListDir)) if !exists(path) => {
                let system = SYSTEM_ALLOWLIST.iter().any(|s| e.starts_with(s));
                let hint = if system {
                    "read-only system path (never writable)"
                } else {
                    "read_only: not writable"
                };
                (write && !fails_anyway()).then(|| (Wall::Layout, hint.to_owned()))
            }
            Some((_, Kind::ListDir)) => (!fails_anyway()).then(|| {
                (
                    Wall::Masked,
                    "a host socket or private file, hidden (by design)".to_owned(),
                )
            }),
            None => {
                if fails_anyway() {
                    return None;
                }
                let key = if write { "writable_paths" } else { "read_only" };
                Some((
                    Wall::Layout,
                    format!("not in the sandbox: {key} = [\"{}\"]", dir(path)),
                ))
            }
        }
    }
}

/// What [`View::lexical`] says of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lexical {
    /// The layout shows it with the access asked for: nothing to report.
    Clean,
    /// Refused or hidden by the policy, whatever the host holds.
    Refused(Wall, String),
    /// The answer depends on the host's file system: [`View::classify`], after the run.
    Host,
}

/// The directory above `path` (absolute, normal): `/` for `/x`.
fn parent(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/",
        Some(i) => path.get(..i).unwrap_or(b"/"),
    }
}

/// Joins `rel` to the absolute `base` into `out`, lexically normal: no `.`, `..` taken
/// lexically, no double or trailing slash. `rel` may be absolute (then `base` is unused).
pub(crate) fn resolve(base: &[u8], rel: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let parts = if rel.first() == Some(&b'/') {
        None
    } else {
        Some(base)
    };
    for part in parts
        .into_iter()
        .chain(std::iter::once(rel))
        .flat_map(|p| p.split(|&b| b == b'/'))
    {
        match part {
            b"" | b"." => {}
            b".." => {
                let cut = out.iter().rposition(|&b| b == b'/').unwrap_or(0);
                out.truncate(cut);
            }
            name => {
                out.push(b'/');
                out.extend_from_slice(name);
            }
        }
    }
    if out.is_empty() {
        out.push(b'/');
    }
}

/// The lexical resolution and the classification of the paths a program names, for the
/// fuzz target `explain_paths` (unstable `internals` feature).
#[cfg(feature = "internals")]
pub mod fuzzing {
    use super::*;

    /// The layout entries the input picks from: paths that nest and collide.
    const PATHS: [&str; 10] = [
        "/",
        "/usr",
        "/usr/lib",
        "/opt/ro",
        "/ws",
        "/ws/.git/hooks",
        "/ws/data",
        "/tmp",
        "/a",
        "/a/b",
    ];

    /// Builds a view from the input's first bytes, resolves the rest as a path the program
    /// named (relative to a base the input picks too) and checks:
    ///
    /// - the resolved path is absolute and lexically normal (no empty, `.` or `..` part, no
    ///   trailing slash but `/`), and resolving it again changes nothing;
    /// - for every use, with any answer of the host's file system, `classify` agrees with
    ///   `lexical` wherever `lexical` decides (clean: nothing; refused: that wall and hint),
    ///   so the answering thread's view never contradicts the report's.
    ///
    /// # Panics
    ///
    /// When a property fails (that is the fuzz target's finding).
    pub fn check(data: &[u8]) {
        let Some((head, rest)) = data.split_first_chunk::<6>() else {
            return;
        };
        let pick = |b: u8| PATHS[usize::from(b) % PATHS.len()];
        let kind = |b: u8| match b % 4 {
            0 => Kind::System,
            1 => Kind::ReadOnly,
            2 => Kind::Writable,
            _ => Kind::ListDir,
        };
        let hidden = |b: u8| match b % 4 {
            0 => Hidden::DataDir,
            1 => Hidden::Masked,
            2 => Hidden::Host,
            _ => Hidden::DenyName,
        };
        let view = View {
            entries: vec![
                (pick(head[0]).into(), kind(head[0] >> 4)),
                (pick(head[1]).into(), kind(head[1] >> 4)),
                ("/usr".into(), Kind::System),
            ],
            hidden: vec![(pick(head[2]).into(), hidden(head[2] >> 4))],
            guarded: vec![pick(head[3]).into()],
        };
        let base = pick(head[4]).as_bytes();
        let mut path = Vec::new();
        resolve(base, rest, &mut path);
        assert!(path.first() == Some(&b'/'), "{path:?}");
        assert!(path == b"/" || path.last() != Some(&b'/'), "{path:?}");
        for part in path.split(|&b| b == b'/').skip(1) {
            assert!(
                !matches!(part, b"" | b"." | b"..") || path == b"/",
                "{path:?}"
            );
        }
        let mut again = Vec::new();
        resolve(b"/", &path, &mut again);
        assert_eq!(again, path);
        let uses = [
            Use::Open { flags: 1 },
            Use::Stat,
            Use::Exec,
            Use::Write,
            Use::Create,
            Use::Remove,
            Use::Read,
        ];
        let flags = [
            0,
            libc::O_WRONLY as u64,
            (libc::O_RDONLY | libc::O_CREAT) as u64,
            u64::from(head[5]),
        ];
        for u in uses {
            for f in flags {
                let lexical = view.lexical(&path, u, f);
                for answer in [
                    &(|_: &[u8]| true) as &dyn Fn(&[u8]) -> bool,
                    &|_: &[u8]| false,
                    &|p: &[u8]| p.len().is_multiple_of(2),
                ] {
                    let got = view.classify(&path, u, f, answer);
                    match &lexical {
                        Lexical::Clean => assert_eq!(got, None, "{path:?} {u:?} {f}"),
                        Lexical::Refused(wall, hint) => {
                            assert_eq!(got, Some((*wall, hint.clone())), "{path:?} {u:?}")
                        }
                        Lexical::Host => {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(base: &str, rel: &str) -> String {
        let mut out = Vec::new();
        resolve(base.as_bytes(), rel.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn paths_are_resolved_lexically() {
        assert_eq!(norm("/ws", "a/./b//c/"), "/ws/a/b/c");
        assert_eq!(norm("/ws/x", "../y"), "/ws/y");
        assert_eq!(norm("/ws", "/etc/../usr"), "/usr");
        assert_eq!(norm("/", "../.."), "/");
        assert_eq!(norm("/a", ""), "/a");
        assert_eq!(parent(b"/usr/lib"), b"/usr");
        assert_eq!(parent(b"/usr"), b"/");
        assert!(within(b"/usr/lib", b"/usr") && within(b"/usr", b"/usr"));
        assert!(!within(b"/usr2", b"/usr") && within(b"/x", b"/"));
    }

    fn view() -> View {
        View {
            entries: vec![
                ("/usr".into(), Kind::System),
                ("/bin".into(), Kind::System),
                ("/opt/ro".into(), Kind::ReadOnly),
                ("/home/u/ws".into(), Kind::Writable),
                ("/tmp".into(), Kind::Writable),
            ],
            hidden: vec![
                ("/home/u/ws/data".into(), Hidden::DataDir),
                ("/home/u/ws/.env".into(), Hidden::DenyName),
                ("/usr/secret".into(), Hidden::Masked),
            ],
            guarded: vec!["/home/u/ws/.git/hooks".into()],
        }
    }

    fn class(p: &str, u: Use, flags: i32, exists: bool) -> Option<(Wall, String)> {
        view().classify(p.as_bytes(), u, flags as u64, &|_| exists)
    }

    const OPEN: Use = Use::Open { flags: 2 };

    #[test]
    fn allowed_paths_report_nothing() {
        for p in [
            "/usr/bin/ls",
            "/bin/sh",
            "/home/u/ws/a",
            "/tmp/x",
            "/",
            "/home",
            "/opt",
        ] {
            assert_eq!(class(p, OPEN, libc::O_RDONLY, true), None, "{p}");
            assert_eq!(class(p, Use::Stat, 0, true), None, "{p}");
        }
        for p in ["/home/u/ws/new", "/tmp/x", "/home/u/ws/.git/config"] {
            let w = libc::O_WRONLY | libc::O_CREAT;
            assert_eq!(class(p, OPEN, w, false), None, "{p}");
        }
        // An `O_PATH` open (the program's process opens `/` so, for its nested domain)
        // reads nothing and writes nothing, with musl's constants too.
        for p in ["/", "/usr", "/home/u/ws"] {
            let f = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
            assert_eq!(class(p, OPEN, f, true), None, "{p}");
            assert!(!writes(OPEN, f as u64), "{p}");
        }
        // The data dir's mount point may be looked up; a deny_names cover read lists.
        assert_eq!(class("/home/u/ws/data", Use::Stat, 0, true), None);
        assert_eq!(class("/home/u/ws/.env", Use::Stat, 0, true), None);
    }

    #[test]
    fn denied_paths_name_their_wall_and_key() {
        let r = |p, u, f, e| class(p, u, f, e).map(|(w, h)| (w.name(), h));
        assert_eq!(
            r("/root/x", OPEN, libc::O_RDONLY, true),
            Some((
                "layout",
                "not in the sandbox: read_only = [\"/root\"]".into()
            ))
        );
        // Missing on the host as well: no wall behind it.
        assert_eq!(r("/root/x", OPEN, libc::O_RDONLY, false), None);
        assert_eq!(
            r("/usr/lib/x", OPEN, libc::O_WRONLY | libc::O_CREAT, true),
            Some(("layout", "read-only system path (never writable)".into()))
        );
        assert_eq!(
            r("/opt/ro/f", Use::Write, 0, true),
            Some(("layout", "read_only: not writable".into()))
        );
        // `mkdir -p` of an existing directory fails with EEXIST anyway.
        assert_eq!(r("/usr/lib", Use::Create, 0, true), None);
        assert_eq!(
            r("/home/u/ws/data/key", OPEN, libc::O_RDONLY, true),
            Some(("masked", "the data dir is hidden (by design)".into()))
        );
        assert_eq!(
            r("/home/u/ws/.env", OPEN, libc::O_RDONLY, true),
            Some(("masked", "hidden by deny_names".into()))
        );
        assert_eq!(
            r("/usr/secret", OPEN, libc::O_RDONLY, true),
            Some(("masked", "hidden by masked".into()))
        );
        let hook = "/home/u/ws/.git/hooks/pre-commit";
        assert_eq!(r(hook, OPEN, libc::O_RDONLY, true), None);
        assert_eq!(
            r(hook, OPEN, libc::O_WRONLY | libc::O_CREAT, true),
            Some(("layout", "guarded by guard_names".into()))
        );
    }
}
