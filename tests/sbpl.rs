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
use stockade::backend::sbpl::{MAX_PATH_LEN, SbplError, SbplInput, profile};

/// Components of the benign twin of the workspace and of the tools dir. No hostile
/// alphabet below contains these two characters.
const WS_MARK: char = '☃';
const TOOLS_MARK: char = '☂';

/// An input with the workspace, a data dir inside it and the tools dir under test.
fn input(workspace: PathBuf, tools: PathBuf) -> SbplInput {
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
        network: Network::None,
        proxy_ports: vec![],
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
    let hostile = profile(&input(join(ws).into(), join(tools).into()))?;
    let twin = profile(&input(
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
    Ok(hostile)
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
    for ws in cases {
        check(&strings(ws), &strings(&["t", "\")"])).unwrap();
    }
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
    for _ in 0..3000 {
        let (ws, tools) = (path(&mut rng), path(&mut rng));
        let control = ws
            .iter()
            .chain(&tools)
            .any(|c| c.chars().any(char::is_control));
        match check(&ws, &tools) {
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
