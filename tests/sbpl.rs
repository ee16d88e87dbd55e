//! The generated SBPL profile, read back by a small SBPL reader.
//!
//! A hostile path must either be refused with a clear error or come back from the parsed
//! profile exactly, in exactly the rules meant for it. The check compares the profile for
//! hostile paths with the profile for benign paths of the same depth: after mapping each
//! benign component to the hostile one, the two parse trees must be equal. A path that
//! closed its string or added a form would change the tree.

#[path = "../src/backend/sbpl/reader.rs"]
mod reader;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use reader::Sexp;
use stockade::Network;
use stockade::backend::sbpl::{MAX_PATH_LEN, SbplError, SbplInput, plan_profile, profile};

/// Components of the benign twin of the workspace and of the tools dir. No hostile
/// alphabet below contains these two characters.
const WS_MARK: char = '☃';
const TOOLS_MARK: char = '☂';

/// The egress proxy's ports of one spawn (HTTP, SOCKS5) in the `allow` cases.
const PORTS: [u16; 2] = [3128, 1080];

/// The three network modes, with the ports a spawn gives each.
const MODES: [(Network, &[u16]); 3] = [
    (Network::None, &[]),
    (Network::Allow, &PORTS),
    (Network::Full, &[]),
];

/// An input with the workspace, a data dir inside it and the tools dir under test.
fn input(workspace: PathBuf, tools: PathBuf) -> SbplInput {
    input_in(MODES[0], workspace, tools)
}

fn input_in((network, ports): (Network, &[u16]), workspace: PathBuf, tools: PathBuf) -> SbplInput {
    SbplInput {
        data_dir: Some(workspace.join("data")),
        workspace,
        writable: vec![],
        read_only: vec![],
        tools_dir: Some(tools),
        masked: vec![],
        deny_names: vec![".env".into()],
        guard_names: vec![],
        tmpdir: None,
        overlay: None,
        network,
        proxy_ports: ports.to_vec(),
    }
}

fn join(components: &[String]) -> String {
    components.iter().map(|c| format!("/{c}")).collect()
}

fn benign(mark: char, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{mark}{i}")).collect()
}

/// Maps a string of the benign profile to the string the hostile profile must hold there.
fn translate(s: &str, ws: &[String], tools: &[String]) -> String {
    s.split('/')
        .map(|part| {
            let pick = |mark: char, hostile: &[String]| {
                let i: usize = part.strip_prefix(mark)?.parse().ok()?;
                hostile.get(i).cloned()
            };
            pick(WS_MARK, ws)
                .or_else(|| pick(TOOLS_MARK, tools))
                .unwrap_or_else(|| part.to_string())
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Walks the benign and hostile trees together; they may differ only in strings, and only
/// as `translate` says.
fn same_tree(benign: &Sexp, hostile: &Sexp, ws: &[String], tools: &[String]) -> Result<(), String> {
    match (benign, hostile) {
        (Sexp::List(a), Sexp::List(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .try_for_each(|(x, y)| same_tree(x, y, ws, tools)),
        (Sexp::Str(a), Sexp::Str(b)) if translate(a, ws, tools) == *b => Ok(()),
        (a, b) if a == b && !matches!(a, Sexp::List(_) | Sexp::Str(_)) => Ok(()),
        (a, b) => Err(format!("benign {a:?} became {b:?}")),
    }
}

/// Generates the profile for the hostile components and checks it against its benign twin.
fn check(ws: &[String], tools: &[String]) -> Result<String, SbplError> {
    check_in(MODES[0], ws, tools)
}

/// [`check`] under one network mode; then the mode's network rules hold too.
fn check_in(mode: (Network, &[u16]), ws: &[String], tools: &[String]) -> Result<String, SbplError> {
    let hostile = profile(&input_in(mode, join(ws).into(), join(tools).into()))?;
    let twin = profile(&input_in(
        mode,
        join(&benign(WS_MARK, ws.len())).into(),
        join(&benign(TOOLS_MARK, tools.len())).into(),
    ))
    .expect("the benign twin is a valid input");
    let h = reader::parse(&hostile).unwrap_or_else(|e| panic!("{e}: {ws:?}\n{hostile}"));
    let b = reader::parse(&twin).expect("the benign profile parses");
    assert_eq!(
        h.len(),
        b.len(),
        "a hostile path changed the number of forms: {ws:?}\n{hostile}"
    );
    for (x, y) in b.iter().zip(&h) {
        if let Err(e) = same_tree(x, y, ws, tools) {
            panic!("{e}\nworkspace {ws:?} tools {tools:?}\n{hostile}");
        }
    }
    check_roles(&hostile, &join(ws), &join(tools));
    check_network(&hostile, mode.0);
    Ok(hostile)
}

/// A rule that names a network operation: its head, its `(remote kind "address")`
/// endpoints as `(kind, address)`, and how many filters it has in all.
type NetworkRule = (String, Vec<(String, String)>, usize);

/// The rules of `text` that name a network operation.
fn network_rules(text: &str) -> Vec<NetworkRule> {
    reader::rules(text)
        .expect("the frame holds")
        .into_iter()
        .filter(|r| r.ops.iter().any(|op| op.starts_with("network")))
        .map(|r| {
            let remotes = r
                .remotes()
                .into_iter()
                .map(|(k, a)| (k.to_string(), a.to_string()))
                .collect();
            (r.head(), remotes, r.filters.len())
        })
        .collect()
}

/// `none`: no network rule. `allow`: one, outbound TCP over IPv4 to the loopback at the
/// two ports of [`PORTS`], nothing else. `full`: IP out and in.
fn check_network(text: &str, network: Network) {
    let rules = network_rules(text);
    let pair = |k: &str, a: String| (k.to_string(), a);
    match network {
        Network::None => assert_eq!(rules, [], "{text}"),
        Network::Allow => assert_eq!(
            rules,
            [(
                "allow network-outbound".to_string(),
                PORTS
                    .iter()
                    .map(|p| pair("tcp4", format!("localhost:{p}")))
                    .collect(),
                PORTS.len()
            )],
            "{text}"
        ),
        Network::Full => {
            let heads: Vec<_> = rules.iter().map(|r| r.0.as_str()).collect();
            assert!(heads.contains(&"allow network-outbound"), "{text}");
            assert!(heads.contains(&"allow network-inbound"), "{text}");
        }
    }
}

/// Each path appears in the rules meant for it, and the data-dir deny follows every allow.
fn check_roles(text: &str, ws: &str, tools: &str) {
    let rules = reader::rules(text).expect("the frame holds");
    let data = format!("{ws}/data");
    let holding = |kind: &str, path: &str| -> Vec<String> {
        rules
            .iter()
            .filter(|r| r.paths().contains(&(kind, path)))
            .map(|r| r.head())
            .collect()
    };
    let rw = "allow file-read* file-write* file-map-executable";
    assert_eq!(holding("subpath", ws), [rw], "workspace");
    assert_eq!(
        holding("literal", ws),
        ["deny file-write*"],
        "workspace pinned"
    );
    assert_eq!(
        holding("subpath", tools),
        ["allow file-read* file-map-executable"],
        "tools"
    );
    assert_eq!(
        holding("subpath", &data),
        ["deny file-read* file-write*"],
        "data dir"
    );
    assert_eq!(
        holding("subpath", &format!("{ws}/.env")),
        ["deny file-read* file-write*"]
    );
    let deny = rules
        .iter()
        .find(|r| r.paths().contains(&("subpath", data.as_str())))
        .unwrap();
    assert!(
        rules
            .iter()
            .all(|r| r.action == "deny" || r.index < deny.index)
    );
}

fn strings(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

#[test]
fn hostile_characters_round_trip() {
    let cases: &[&[&str]] = &[
        &["a\"b"],
        &["a\\"],
        &["\\\""],
        &["\"", ")(allow file-read* (subpath \"", ")"],
        &["x\") (allow default) ; ("],
        &["; comment", "#\"regex\"", "|sym|"],
        &["'quote", "`quasi", ",unquote", "{}[]"],
        &["é", "\u{2028}", "日本"],
        &["\\\\\\\"\\"],
        &["a b\u{a0}c"],
    ];
    for mode in MODES {
        for ws in cases {
            check_in(mode, &strings(ws), &strings(&["t", "\")"])).unwrap();
        }
    }
}

#[test]
fn each_network_mode_opens_what_it_says() {
    for mode in MODES {
        let text = profile(&input_in(mode, "/ws".into(), "/t".into())).unwrap();
        check_network(&text, mode.0);
    }
    // The ports as given, each once: what the spawn's proxy listens on, nothing more.
    let text = profile(&input_in(
        (Network::Allow, &[50001, 50001, 50002]),
        "/ws".into(),
        "/t".into(),
    ))
    .unwrap();
    assert_eq!(
        network_rules(&text)[0].1,
        [
            ("tcp4".to_string(), "localhost:50001".to_string()),
            ("tcp4".to_string(), "localhost:50002".to_string())
        ]
    );
}

#[test]
fn allow_needs_the_spawns_ports() {
    let without = input_in((Network::Allow, &[]), "/ws".into(), "/t".into());
    assert_eq!(profile(&without), Err(SbplError::NoProxyPort));
    let zero = input_in((Network::Allow, &[0, 3128]), "/ws".into(), "/t".into());
    assert_eq!(profile(&zero), Err(SbplError::ProxyPortZero));
    for network in [Network::None, Network::Full] {
        let extra = input_in((network, &PORTS), "/ws".into(), "/t".into());
        assert_eq!(profile(&extra), Err(SbplError::ProxyPortsWithoutAllow));
    }
    // A printed plan stands in for the ports with text that is not a port; it still
    // parses, with the same rules as a spawn's profile but for the port filters.
    let plan = plan_profile(&without).unwrap();
    let rules = network_rules(&plan);
    assert_eq!(rules.len(), 1, "{plan}");
    assert_eq!(rules[0].0, "allow network-outbound");
    assert_eq!(rules[0].1.len(), 2, "{plan}");
    for (kind, addr) in &rules[0].1 {
        assert_eq!(kind, "tcp4");
        let port = addr.strip_prefix("localhost:").unwrap();
        assert!(port.parse::<u16>().is_err(), "{addr}");
    }
    let spawn = profile(&input_in(MODES[1], "/ws".into(), "/t".into())).unwrap();
    let heads =
        |t: &str| -> Vec<String> { reader::rules(t).unwrap().iter().map(|r| r.head()).collect() };
    assert_eq!(heads(&plan), heads(&spawn));
}

#[test]
fn control_characters_are_refused() {
    for bad in [
        "a\nb",
        "a\0b",
        "a\rb",
        "\t",
        "\u{7f}",
        "\u{85}",
        "\u{1b}[31m",
    ] {
        let err = check(&strings(&["ok", bad]), &strings(&["t"])).unwrap_err();
        assert!(
            matches!(
                err,
                SbplError::ControlCharacter {
                    key: "workspace",
                    ..
                }
            ),
            "{bad:?}: {err}"
        );
        let err = check(&strings(&["ok"]), &strings(&[bad])).unwrap_err();
        assert!(
            matches!(
                err,
                SbplError::ControlCharacter {
                    key: "tools_dir",
                    ..
                }
            ),
            "{bad:?}: {err}"
        );
    }
}

#[test]
fn non_utf8_is_refused() {
    let ws = PathBuf::from(OsStr::from_bytes(b"/ws/\xff\xfe\")"));
    let err = profile(&input(ws, "/t".into())).unwrap_err();
    assert!(
        matches!(
            err,
            SbplError::NotUtf8 {
                key: "workspace",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn long_paths_are_refused() {
    let long = format!("/{}", "\"".repeat(4096));
    let err = profile(&input("/ws".into(), long.into())).unwrap_err();
    assert_eq!(
        err,
        SbplError::TooLong {
            key: "tools_dir",
            len: 4097,
            max: MAX_PATH_LEN,
        }
    );
    // Escaping doubles the text of this path; the limit is on the path, not the literal.
    let fits = strings(&[&"\"".repeat(MAX_PATH_LEN - 1)]);
    check(&strings(&["ws"]), &fits).unwrap();
}

/// xorshift64*: a fixed-seed generator, so that a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const HOSTILE: &[char] = &[
    '"', '\\', '(', ')', ';', ' ', '#', '|', '\'', '`', ',', '{', '}', '$', '*', '^', '[', ']',
    'a', 'Z', '0', 'é', '\u{2028}', '\u{a0}',
];

/// Control characters, drawn rarely so that most paths are accepted.
const CONTROL: &[char] = &['\n', '\0', '\t', '\r', '\u{7f}', '\u{85}'];

fn component(rng: &mut Rng) -> String {
    (0..1 + rng.below(8))
        .map(|_| match rng.below(40) {
            0 => CONTROL[rng.below(CONTROL.len())],
            _ => HOSTILE[rng.below(HOSTILE.len())],
        })
        .collect()
}

fn path(rng: &mut Rng) -> Vec<String> {
    (0..1 + rng.below(4)).map(|_| component(rng)).collect()
}

#[test]
fn random_hostile_paths_round_trip_or_are_refused() {
    let mut rng = Rng(0x5eed_5b91_0000_0001);
    let (mut ok, mut refused) = (0, 0);
    for i in 0..3000 {
        let (ws, tools) = (path(&mut rng), path(&mut rng));
        let control = ws
            .iter()
            .chain(&tools)
            .any(|c| c.chars().any(char::is_control));
        match check_in(MODES[i % MODES.len()], &ws, &tools) {
            Ok(_) => {
                assert!(!control, "accepted a control character: {ws:?} {tools:?}");
                ok += 1;
            }
            Err(SbplError::ControlCharacter { .. }) if control => refused += 1,
            Err(e) => panic!("{ws:?} {tools:?}: unexpected {e}"),
        }
    }
    // The alphabet must exercise both outcomes.
    assert!(ok > 300 && refused > 300, "ok {ok}, refused {refused}");
}

#[test]
fn random_bytes_round_trip_or_are_refused() {
    let mut rng = Rng(0x0b17_e5b1_7e50_0002);
    for _ in 0..3000 {
        let mut bytes = b"/w/".to_vec();
        for _ in 0..1 + rng.below(12) {
            // Any byte but `/`: the path stays one component below /w.
            let b = (rng.next() >> 56) as u8;
            bytes.push(if b == b'/' { b'"' } else { b });
        }
        let ws = PathBuf::from(OsStr::from_bytes(&bytes));
        let result = profile(&input(ws.clone(), "/t".into()));
        match ws.to_str() {
            None => assert!(matches!(result, Err(SbplError::NotUtf8 { .. })), "{ws:?}"),
            Some(s) if s.chars().any(char::is_control) => {
                assert!(
                    matches!(result, Err(SbplError::ControlCharacter { .. })),
                    "{ws:?}"
                )
            }
            Some(s) => {
                let last = s.rsplit('/').next().unwrap().to_string();
                check(&strings(&["w", &last]), &strings(&["t"])).unwrap();
            }
        }
    }
}
