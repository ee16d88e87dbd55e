//! The macOS sandbox profile: SBPL text generated from the plan's [`SbplInput`].
//!
//! This module is plain Rust with no `cfg`: Linux CI builds and tests the exact text that
//! macOS hands to `sandbox_init(3)`, and `stockade plan --os macos` prints it on any OS.
//!
//! # Shape of the profile
//!
//! `(deny default)`, then allows for what a process needs to start (fork, exec, sysctls,
//! a few Mach services, terminals), read-only system directories, the read-write roots
//! (workspace, `writable_paths`, `/private/tmp`, the per-run `TMPDIR`), the network (none
//! for `network = "none"`; for `"allow"`, outbound TCP to the egress proxy's ports on the
//! host's loopback alone; IP and the resolver for `"full"`), and last the denies: the data
//! dir, `masked` paths and `deny_names` for read and write, `guard_names` for write.
//!
//! # The egress proxy's ports
//!
//! With `network = "allow"` the host's proxy listens on 127.0.0.1, on ports it picks at
//! each spawn ([`SbplInput::proxy_ports`], set like the per-run `TMPDIR`). [`profile`],
//! what a spawn applies, refuses an input without them ([`SbplError::NoProxyPort`]) rather
//! than write a profile without a route. [`plan_profile`], what `stockade plan --os macos`
//! prints before any spawn, writes placeholders instead, which are not ports: nothing but
//! a `u16` ever becomes a port in a profile that runs.
//!
//! SBPL applies the *last* rule that matches an operation (Apple's profiles, Chromium's
//! `sandbox/policy/mac/*.sb` and `sandbox-exec` profiles rely on it: a later, narrower
//! `deny` carves a hole out of an earlier `allow`). That is why every deny comes after
//! every allow, and why the data dir stays hidden even when it lies under the workspace.
//!
//! # Paths and escaping
//!
//! Seatbelt matches the path of the resolved vnode, so a rule written for `/var/x` never
//! matches: the kernel sees `/private/var/x`. Every path is canonicalized before it gets
//! here (by the plan: [`crate::plan::seatbelt_path`], `plan::seatbelt::private_alias`) and normalized
//! here (no `.`, no duplicate or trailing `/`; `..` and relative paths are refused).
//!
//! Escaping is the security boundary: a path must never close its string and add a rule.
//! SBPL strings are Scheme strings, in which only `\` and `"` are special; a path becomes a
//! literal only through one constructor, which escapes `\` first and `"` second (in the other
//! order `a"b` would come out as `"a\\"b"`, whose `\\` leaves the quote bare). Control
//! characters (newline and NUL among them) and non-UTF-8 paths are refused rather than
//! escaped, as are paths over [`MAX_PATH_LEN`] bytes and profiles with more than
//! [`MAX_RULES`] path rules. No path text ever appears in a comment.

use std::collections::HashSet;
use std::ffi::CString;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

pub use crate::error::SbplError;
pub use crate::plan::SbplInput;
// Used by the fork launcher on macOS; elsewhere only by the tests and fuzz targets.
#[cfg_attr(
    not(any(target_os = "macos", feature = "internals")),
    allow(unused_imports)
)]
pub use denied::check_denied_names;

#[cfg_attr(
    not(any(target_os = "macos", feature = "internals", test)),
    allow(dead_code)
)]
mod denied;
#[cfg(test)]
mod reader;
mod sections;

use sections::{Endpoint, NETWORK_ALLOW, Ports, items};

/// The most path filters one profile may hold; more is an error, not a truncation.
pub const MAX_RULES: usize = 512;

/// The longest path accepted, in bytes: macOS's `PATH_MAX`.
pub const MAX_PATH_LEN: usize = 1024;

/// System directories readable inside the sandbox, as macOS names them after resolving
/// symlinks: what `sh`, `git` (through the `xcrun` shim) and `python3` read when they start.
pub const SYSTEM_READ_ONLY: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/System",
    "/Library",
    "/opt",
    "/dev",
    "/private/etc",
    // dyld's shared cache (older releases; newer ones keep it under /System).
    "/private/var/db/dyld",
    // /etc/localtime points into it.
    "/private/var/db/timezone",
    // /bin/sh is a trampoline that reads /private/var/select/sh.
    "/private/var/select",
    // xcode-select's choice of developer directory, read by the /usr/bin/git shim.
    "/private/var/db/xcode_select_link",
    "/Applications/Xcode.app",
];

/// The writable temporary directory every process may use.
pub const SHARED_TMP: &str = "/private/tmp";

/// A path, checked and escaped into an SBPL string literal (quotes included).
///
/// This is the only way path text enters a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Lit(String);

impl Lit {
    fn new(key: &'static str, path: &Path) -> Result<Self, SbplError> {
        let len = path.as_os_str().len();
        if len > MAX_PATH_LEN {
            return Err(SbplError::TooLong {
                key,
                len,
                max: MAX_PATH_LEN,
            });
        }
        let text = path.to_str().ok_or_else(|| SbplError::NotUtf8 {
            key,
            path: path.to_path_buf(),
        })?;
        if text.chars().any(char::is_control) {
            return Err(SbplError::ControlCharacter {
                key,
                path: path.to_path_buf(),
            });
        }
        // `\` first: escaping `"` first would produce backslashes that the second pass
        // doubles, leaving the quote unescaped.
        let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
        Ok(Lit(format!("\"{escaped}\"")))
    }
}

/// Checks that `path` is absolute without `..`, and drops `.`, repeated and trailing `/`.
fn normalize(key: &'static str, path: &Path) -> Result<PathBuf, SbplError> {
    let not_absolute = || SbplError::NotAbsolute {
        key,
        path: path.to_path_buf(),
    };
    if !path.is_absolute() {
        return Err(not_absolute());
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir | Component::Normal(_) => out.push(c),
            Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return Err(not_absolute()),
        }
    }
    Ok(out)
}

/// `root/name` for a name relative to a writable root.
fn under(key: &'static str, root: &Path, name: &str) -> Result<PathBuf, SbplError> {
    let bad = || SbplError::BadName {
        key,
        name: name.to_string(),
    };
    let rel = Path::new(name);
    let plain = rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if name.is_empty() || !plain {
        return Err(bad());
    }
    normalize(key, &root.join(rel))
}

/// Which filter a path goes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Match {
    /// The path and everything below it.
    Subpath,
    /// The path itself.
    Literal,
}

/// One rule whose filters carry paths; rendered only when it has at least one filter,
/// since `(allow op)` without filters allows the operation everywhere.
struct PathRule {
    comment: &'static str,
    head: &'static str,
    filters: Vec<(Match, Lit)>,
    /// The filters already present, so that a long policy does not cost quadratic time
    /// before [`MAX_RULES`] is checked.
    seen: HashSet<(Match, String)>,
}

impl PathRule {
    fn new(comment: &'static str, head: &'static str) -> Self {
        PathRule {
            comment,
            head,
            filters: Vec::new(),
            seen: HashSet::new(),
        }
    }

    /// Adds a filter unless the rule has it already.
    fn add(&mut self, m: Match, lit: Lit) {
        if self.seen.insert((m, lit.0.clone())) {
            self.filters.push((m, lit));
        }
    }
}

/// A piece of the profile: fixed text, a rule built from paths, or the `network = "allow"`
/// rule built from the proxy's ports.
enum Item {
    Fixed(&'static str),
    Paths(PathRule),
    Egress(Vec<Endpoint>),
}

/// Generates the SBPL profile that one spawn applies for `input`.
///
/// # Errors
///
/// For `network = "allow"`, [`SbplError::NoProxyPort`] without
/// [`SbplInput::proxy_ports`] and [`SbplError::ProxyPortZero`] for port 0; for the other
/// modes, [`SbplError::ProxyPortsWithoutAllow`] when ports are given. Then an
/// [`SbplError`] naming the policy key of the first path that is relative, contains `..`,
/// a control character or invalid UTF-8, or is too long; or [`SbplError::TooManyRules`].
///
/// # Platform
///
/// Pure text on every OS. Only macOS applies it (`backend::macos`).
pub fn profile(input: &SbplInput) -> Result<String, SbplError> {
    render(input, Ports::Spawn)
}

/// The profile as a plan prints it before any spawn: [`profile`], except that with
/// `network = "allow"` and no [`SbplInput::proxy_ports`] the rule names placeholders for
/// the ports each spawn picks (`"localhost:<HTTP proxy port, per spawn>"`). The result is
/// for reading; a spawn applies [`profile`], which never writes a placeholder.
///
/// # Errors
///
/// As [`profile`], but for [`SbplError::NoProxyPort`].
pub fn plan_profile(input: &SbplInput) -> Result<String, SbplError> {
    render(input, Ports::Plan)
}

fn render(input: &SbplInput, ports: Ports) -> Result<String, SbplError> {
    let items = items(input, ports)?;
    let count: usize = items
        .iter()
        .map(|i| match i {
            Item::Paths(r) => r.filters.len(),
            Item::Fixed(_) | Item::Egress(_) => 0,
        })
        .sum();
    if count > MAX_RULES {
        return Err(SbplError::TooManyRules {
            count,
            max: MAX_RULES,
        });
    }
    let mut out = String::new();
    for item in &items {
        match item {
            Item::Fixed(text) => out.push_str(text),
            Item::Paths(rule) if rule.filters.is_empty() => {}
            Item::Paths(rule) => {
                let _ = write!(out, "\n; {}\n({}", rule.comment, rule.head);
                for (m, lit) in &rule.filters {
                    let kind = match m {
                        Match::Subpath => "subpath",
                        Match::Literal => "literal",
                    };
                    let _ = write!(out, "\n    ({kind} {})", lit.0);
                }
                out.push_str(")\n");
            }
            // A rule without filters would allow every outbound connection.
            // `sections::endpoints` never gives `allow` an empty list; this keeps it so.
            Item::Egress(endpoints) if endpoints.is_empty() => {
                return Err(SbplError::NoProxyPort);
            }
            Item::Egress(endpoints) => {
                out.push_str(NETWORK_ALLOW);
                for e in endpoints {
                    let _ = match e {
                        Endpoint::Port(port) => {
                            write!(out, "\n    (remote tcp4 \"localhost:{port}\")")
                        }
                        Endpoint::PerSpawn(what) => {
                            write!(out, "\n    (remote tcp4 \"localhost:{what}\")")
                        }
                    };
                }
                out.push_str(")\n");
            }
        }
    }
    Ok(out)
}

/// [`profile`] as the NUL-terminated string `sandbox_init` takes.
///
/// # Errors
///
/// As [`profile`].
#[cfg_attr(not(any(target_os = "macos", feature = "internals")), allow(dead_code))]
pub fn profile_cstring(input: &SbplInput) -> Result<CString, SbplError> {
    let text = profile(input)?;
    // The fixed text holds no NUL and `Lit::new` refuses control characters, NUL included.
    Ok(CString::new(text).expect("an SBPL profile never contains NUL"))
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::ffi::OsStrExt;

    use super::*;
    use crate::error::InitError;
    use crate::plan::private_alias;
    use crate::policy::{Network, Policy};

    const WORKSPACE: &str = "/Users/agent/ws";

    fn input(policy: &Policy) -> SbplInput {
        SbplInput::from_policy(policy, private_alias).unwrap()
    }

    fn base() -> Policy {
        Policy::with_workspace(WORKSPACE)
    }

    /// Compares the profile with `tests/golden/sbpl/{name}.sb`; `STOCKADE_BLESS=1` rewrites it.
    fn golden(name: &str, input: &SbplInput) {
        golden_text(name, profile(input).unwrap());
    }

    fn golden_text(name: &str, text: String) {
        reader::rules(&text).unwrap_or_else(|e| panic!("{name}: the profile does not parse: {e}"));
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden/sbpl")
            .join(format!("{name}.sb"));
        if std::env::var_os("STOCKADE_BLESS").is_some() {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &text).unwrap();
            return;
        }
        let want = fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (STOCKADE_BLESS=1 writes it)", path.display()));
        assert!(
            text == want,
            "{name}: the profile differs from {} (STOCKADE_BLESS=1 rewrites it)\n{text}",
            path.display()
        );
    }

    #[test]
    fn golden_default() {
        golden("default", &input(&base()));
    }

    #[test]
    fn golden_network_none() {
        golden(
            "network_none",
            &input(&Policy {
                network: Network::None,
                ..base()
            }),
        );
    }

    /// The ports of one spawn's egress proxy in the tests.
    const PORTS: [u16; 2] = [49152, 61001];

    fn allow(ports: &[u16]) -> SbplInput {
        SbplInput {
            proxy_ports: ports.to_vec(),
            ..input(&Policy {
                network: Network::Allow,
                allow_domains: vec!["github.com".into()],
                ..base()
            })
        }
    }

    #[test]
    fn golden_network_allow() {
        golden("network_allow", &allow(&PORTS));
    }

    #[test]
    fn golden_network_allow_plan() {
        golden_text("network_allow_plan", plan_profile(&allow(&[])).unwrap());
    }

    #[test]
    fn golden_writable_paths() {
        golden(
            "writable_paths",
            &input(&Policy {
                writable_paths: vec!["/Users/agent/shared".into(), "/var/cache/agent".into()],
                ..base()
            }),
        );
    }

    #[test]
    fn golden_read_only() {
        golden(
            "read_only",
            &input(&Policy {
                read_only: vec!["/Users/agent/reference".into(), "/etc/agent".into()],
                ..base()
            }),
        );
    }

    #[test]
    fn golden_tools_dir() {
        golden(
            "tools_dir",
            &input(&Policy {
                tools_dir: Some("/Users/agent/instance/tools/bin".into()),
                ..base()
            }),
        );
    }

    #[test]
    fn golden_data_dir_inside_workspace() {
        golden(
            "data_dir_inside_workspace",
            &input(&Policy {
                data_dir: Some("/Users/agent/ws/.agent/data".into()),
                ..base()
            }),
        );
    }

    #[test]
    fn golden_data_dir_outside_workspace() {
        golden(
            "data_dir_outside_workspace",
            &input(&Policy {
                data_dir: Some("/Users/agent/instance/data".into()),
                ..base()
            }),
        );
    }

    #[test]
    fn golden_tmpdir() {
        let mut i = input(&base());
        i.tmpdir = Some(private_alias(Path::new("/var/folders/xy/T/stockade-1")));
        golden("tmpdir", &i);
    }

    #[test]
    fn golden_overlay() {
        // The real workspace under /private/tmp (writable there), a writable path inside
        // it, the change set under /private/tmp too: the program works on the snapshot.
        let mut i = input(&Policy {
            workspace: Some("/Users/agent/changes/snapshot".into()),
            writable_paths: vec!["/tmp/ws/cache".into()],
            data_dir: Some("/tmp/ws/.agent".into()),
            ..base()
        });
        i.overlay = Some(crate::plan::SbplOverlay {
            real_workspace: private_alias(Path::new("/tmp/ws")),
            changes: "/Users/agent/changes".into(),
        });
        golden("overlay", &i);
    }

    #[test]
    fn overlay_denies_follow_the_roots_and_the_snapshot_is_opened_after_them() {
        let mut i = input(&base());
        i.workspace = "/private/tmp/set/snapshot".into();
        i.overlay = Some(crate::plan::SbplOverlay {
            real_workspace: "/private/tmp/ws".into(),
            changes: "/private/tmp/set".into(),
        });
        let text = profile(&i).unwrap();
        let rules = reader::rules(&text).unwrap();
        let at = |head: &str, path: &str| {
            rules
                .iter()
                .rposition(|r| r.head() == head && r.paths().iter().any(|(_, p)| *p == path))
                .unwrap_or_else(|| panic!("no `{head}` for {path}:\n{text}"))
        };
        let rw = "allow file-read* file-write* file-map-executable";
        // /private/tmp, where both lie, is opened first; the change set closed after it,
        // the snapshot opened again after that; the real workspace stays closed to writes.
        assert!(at(rw, "/private/tmp") < at("deny file-read* file-write*", "/private/tmp/set"));
        assert!(
            at("deny file-read* file-write*", "/private/tmp/set")
                < at(rw, "/private/tmp/set/snapshot")
        );
        assert!(at(rw, "/private/tmp") < at("deny file-write*", "/private/tmp/ws"));
        assert!(
            !rules
                .iter()
                .skip(at("deny file-write*", "/private/tmp/ws") + 1)
                .any(|r| r.head().starts_with("allow")
                    && r.paths()
                        .iter()
                        .any(|(_, p)| p.starts_with("/private/tmp/ws"))),
            "{text}"
        );
        // The snapshot itself keeps its name.
        assert!(
            at("deny file-write*", "/private/tmp/set/snapshot")
                > at(rw, "/private/tmp/set/snapshot")
        );
    }

    #[test]
    fn golden_no_names_no_masks() {
        golden(
            "no_names_no_masks",
            &input(&Policy {
                masked: vec![],
                deny_names: vec![],
                guard_names: vec![],
                ..base()
            }),
        );
    }

    #[test]
    fn escapes_backslash_before_quote() {
        let lit = |s: &str| Lit::new("k", Path::new(s)).unwrap().0;
        assert_eq!(lit(r#"/a"b"#), r#""/a\"b""#);
        assert_eq!(lit(r"/a\b"), r#""/a\\b""#);
        assert_eq!(lit(r#"/a\""#), r#""/a\\\"""#);
        assert_eq!(lit("/(a) ;b"), "\"/(a) ;b\"");
    }

    #[test]
    fn refuses_what_it_cannot_write() {
        let with_ws = |ws: PathBuf| SbplInput {
            workspace: ws,
            ..input(&base())
        };
        let err = |ws: PathBuf| profile(&with_ws(ws)).unwrap_err();
        assert!(matches!(
            err("/a\nb".into()),
            SbplError::ControlCharacter {
                key: "workspace",
                ..
            }
        ));
        assert!(matches!(
            err("/a\0b".into()),
            SbplError::ControlCharacter { .. }
        ));
        assert!(matches!(
            err("/a\u{7f}".into()),
            SbplError::ControlCharacter { .. }
        ));
        let bytes = std::ffi::OsStr::from_bytes(b"/a\xffb");
        assert!(matches!(err(bytes.into()), SbplError::NotUtf8 { .. }));
        assert_eq!(
            err(format!("/{}", "a".repeat(4096)).into()),
            SbplError::TooLong {
                key: "workspace",
                len: 4097,
                max: MAX_PATH_LEN,
            }
        );
        assert!(matches!(err("ws".into()), SbplError::NotAbsolute { .. }));
        assert!(matches!(
            err("/a/../etc".into()),
            SbplError::NotAbsolute { .. }
        ));
        assert_eq!(
            err("/a\nb".into()).to_string(),
            "workspace: \"/a\\nb\" contains a control character"
        );
    }

    #[test]
    fn the_longest_path_is_accepted() {
        let ws = format!("/{}", "a".repeat(MAX_PATH_LEN - 1));
        let text = profile(&SbplInput {
            workspace: ws.clone().into(),
            deny_names: vec![],
            guard_names: vec![],
            ..input(&base())
        })
        .unwrap();
        assert!(text.contains(&format!("(subpath \"{ws}\")")));
    }

    #[test]
    fn refuses_too_many_rules() {
        let policy = Policy {
            writable_paths: (0..600).map(|i| PathBuf::from(format!("/w/{i}"))).collect(),
            deny_names: vec![],
            guard_names: vec![],
            ..base()
        };
        let err = profile(&input(&policy)).unwrap_err();
        assert!(
            matches!(err, SbplError::TooManyRules { count, .. } if count > MAX_RULES),
            "{err}"
        );
        assert!(err.to_string().starts_with("the profile needs "), "{err}");
    }

    #[test]
    fn refuses_names_that_leave_the_root() {
        for name in ["", "/etc", "../x", "a/../../b"] {
            let policy = Policy {
                deny_names: vec![name.into()],
                ..base()
            };
            let err = profile(&input(&policy)).unwrap_err();
            assert!(
                matches!(
                    err,
                    SbplError::BadName {
                        key: "deny_names",
                        ..
                    }
                ),
                "{name:?}: {err}"
            );
        }
    }

    #[test]
    fn normalizes_paths() {
        let text = profile(&SbplInput {
            workspace: "/Users//agent/./ws/".into(),
            ..input(&base())
        })
        .unwrap();
        assert!(text.contains("(subpath \"/Users/agent/ws\")"), "{text}");
        assert!(!text.contains("//"));
    }

    #[test]
    fn a_rule_without_paths_is_not_written() {
        // `(allow file-read* file-map-executable)` with no filter would allow every path.
        let text = profile(&input(&base())).unwrap();
        assert!(!text.contains("tools_dir and read_only"), "{text}");
        for rule in reader::rules(&text).unwrap() {
            let unconditional = [
                "process-exec",
                "process-fork",
                "sysctl-read",
                "ipc-posix-sem",
                "pseudo-tty",
            ];
            if rule.filters.is_empty() {
                assert!(unconditional.contains(&rule.ops[0].as_str()), "{rule:?}");
            }
        }
    }

    #[test]
    fn the_data_dir_deny_follows_every_allow() {
        let policy = Policy {
            data_dir: Some("/Users/agent/ws/.agent/data".into()),
            ..base()
        };
        let rules = reader::rules(&profile(&input(&policy)).unwrap()).unwrap();
        let deny = rules
            .iter()
            .find(|r| {
                r.paths()
                    .contains(&("subpath", "/Users/agent/ws/.agent/data"))
            })
            .unwrap();
        assert_eq!(deny.head(), "deny file-read* file-write*");
        let last_allow = rules.iter().rev().find(|r| r.action == "allow").unwrap();
        assert!(deny.index > last_allow.index);
        let pinned: Vec<_> = rules
            .iter()
            .filter(|r| r.head() == "deny file-write*")
            .flat_map(|r| r.paths())
            .collect();
        assert!(
            pinned.contains(&("literal", "/Users/agent/ws")),
            "{pinned:?}"
        );
        assert!(
            pinned.contains(&("literal", "/Users/agent/ws/.agent")),
            "{pinned:?}"
        );
        assert!(!pinned.contains(&("literal", "/Users/agent")), "{pinned:?}");
    }

    #[test]
    fn network_none_has_no_network_rule() {
        let policy = Policy {
            network: Network::None,
            ..base()
        };
        let rules = reader::rules(&profile(&input(&policy)).unwrap()).unwrap();
        assert!(
            !rules
                .iter()
                .any(|r| r.ops.iter().any(|op| op.starts_with("network")))
        );
        let full = reader::rules(&profile(&input(&base())).unwrap()).unwrap();
        assert!(full.iter().any(|r| r.ops == ["network-outbound"]));
    }

    /// The rules that name a network operation.
    fn network_rules(text: &str) -> Vec<reader::Rule> {
        reader::rules(text)
            .unwrap()
            .into_iter()
            .filter(|r| r.ops.iter().any(|op| op.starts_with("network")))
            .collect()
    }

    /// The rules without their position, for comparing two profiles.
    fn shapes(rules: &[reader::Rule]) -> Vec<(String, Vec<reader::Sexp>)> {
        rules
            .iter()
            .map(|r| (r.head(), r.filters.clone()))
            .collect()
    }

    #[test]
    fn allow_opens_tcp_to_the_proxy_ports_alone() {
        let text = profile(&allow(&PORTS)).unwrap();
        let net = network_rules(&text);
        assert_eq!(net.len(), 1, "{text}");
        assert_eq!(net[0].head(), "allow network-outbound");
        assert_eq!(
            net[0].remotes(),
            [("tcp4", "localhost:49152"), ("tcp4", "localhost:61001")]
        );
        assert_eq!(net[0].filters.len(), 2, "{text}");
        // Everything else is the `none` profile, rule for rule: no resolver socket, no
        // Mach service (DNS, configd, trustd), no file of the network's.
        let others: Vec<_> = reader::rules(&text)
            .unwrap()
            .into_iter()
            .filter(|r| r.index != net[0].index)
            .collect();
        let none = reader::rules(
            &profile(&input(&Policy {
                network: Network::None,
                ..base()
            }))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(shapes(&others), shapes(&none));
        // The port rule is an allow before every deny, like the other allows.
        let first_deny = others.iter().find(|r| r.action == "deny").unwrap();
        assert!(net[0].index < first_deny.index);
    }

    #[test]
    fn allow_names_each_port_once_in_order() {
        let text = profile(&allow(&[3128, 1080, 3128])).unwrap();
        assert_eq!(
            network_rules(&text)[0].remotes(),
            [("tcp4", "localhost:3128"), ("tcp4", "localhost:1080")]
        );
        let one = profile(&allow(&[65535])).unwrap();
        assert_eq!(
            network_rules(&one)[0].remotes(),
            [("tcp4", "localhost:65535")]
        );
    }

    #[test]
    fn allow_without_ports_is_refused() {
        assert_eq!(profile(&allow(&[])), Err(SbplError::NoProxyPort));
        assert_eq!(profile_cstring(&allow(&[])), Err(SbplError::NoProxyPort));
        assert_eq!(profile(&allow(&[3128, 0])), Err(SbplError::ProxyPortZero));
        assert_eq!(plan_profile(&allow(&[0])), Err(SbplError::ProxyPortZero));
        // The ports are checked before any path: a spawn without them fails the same way
        // whatever its paths.
        let bad_path = SbplInput {
            workspace: "relative".into(),
            ..allow(&[])
        };
        assert_eq!(profile(&bad_path), Err(SbplError::NoProxyPort));
    }

    #[test]
    fn ports_for_another_mode_are_refused() {
        for network in [Network::None, Network::Full] {
            let i = SbplInput {
                proxy_ports: PORTS.to_vec(),
                ..input(&Policy { network, ..base() })
            };
            assert_eq!(profile(&i), Err(SbplError::ProxyPortsWithoutAllow));
            assert_eq!(plan_profile(&i), Err(SbplError::ProxyPortsWithoutAllow));
        }
    }

    #[test]
    fn a_plan_prints_placeholders_that_are_not_ports() {
        let text = plan_profile(&allow(&[])).unwrap();
        let net = network_rules(&text);
        assert_eq!(net.len(), 1, "{text}");
        assert_eq!(net[0].head(), "allow network-outbound");
        let remotes = net[0].remotes();
        assert_eq!(remotes.len(), 2, "{text}");
        for (kind, addr) in remotes {
            assert_eq!(kind, "tcp4");
            let port = addr.strip_prefix("localhost:").unwrap();
            assert!(port.ends_with("per spawn>"), "{addr}");
            assert!(port.parse::<u16>().is_err(), "{addr}");
        }
        // With the spawn's ports, a plan prints what the spawn applies.
        assert_eq!(plan_profile(&allow(&PORTS)), profile(&allow(&PORTS)));
        // For the other modes there is nothing to stand in for.
        for network in [Network::None, Network::Full] {
            let i = input(&Policy { network, ..base() });
            assert_eq!(plan_profile(&i), profile(&i));
        }
    }

    #[test]
    fn init_error_keeps_the_message() {
        let e = InitError::from_report(b"unbound variable: file-map-executable\n");
        assert_eq!(
            e.to_string(),
            "sandbox_init refused the profile: unbound variable: file-map-executable"
        );
        assert_eq!(InitError::from_report(b"a\xff").message, "a\u{fffd}");
    }

    #[test]
    fn profile_cstring_is_the_profile() {
        let i = input(&base());
        assert_eq!(
            profile_cstring(&i).unwrap().to_str().unwrap(),
            profile(&i).unwrap()
        );
    }
}
