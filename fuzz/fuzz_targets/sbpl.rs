//! `cargo fuzz run sbpl`: any bytes as the workspace path. The profile is either refused
//! with an error or parses back (with the same reader as `tests/sbpl.rs`) to the same frame
//! and sequence of rules as a benign profile, with the path, exactly, as the workspace's literal and
//! the data-dir deny after every allow.
#![no_main]

#[path = "../../src/backend/sbpl/reader.rs"]
mod reader;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use stockade::Network;
use stockade::backend::sbpl::{SbplInput, profile};

fn input(workspace: PathBuf) -> SbplInput {
    SbplInput {
        data_dir: Some(workspace.join("data")),
        workspace,
        writable: vec![],
        read_only: vec![],
        tools_dir: Some("/t".into()),
        masked: vec![],
        deny_names: vec![],
        guard_names: vec![],
        tmpdir: None,
        network: Network::Full,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = b"/".to_vec();
    bytes.extend_from_slice(data);
    let ws = PathBuf::from(OsStr::from_bytes(&bytes));
    let Ok(text) = profile(&input(ws.clone())) else {
        return;
    };
    // The generator drops `.` and repeated `/`; it refuses `..`, so none is left here.
    let expected: PathBuf = ws
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    let expected = expected.to_str().expect("an accepted path is UTF-8");
    let depth = Path::new(expected).components().count();
    let twin: PathBuf = std::iter::once("/".to_string())
        .chain((1..depth).map(|i| format!("c{i}")))
        .collect();

    let rules = reader::rules(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let twin_rules = reader::rules(&profile(&input(twin)).expect("benign")).expect("benign parses");
    assert_eq!(rules.len(), twin_rules.len(), "{text}");
    // Filter counts may differ (a path equal to a fixed one is not repeated); the sequence
    // of rules may not.
    for (r, t) in rules.iter().zip(&twin_rules) {
        assert_eq!(r.head(), t.head(), "{text}");
    }

    let holding = |kind: &str, path: &str| -> Vec<usize> {
        rules
            .iter()
            .filter(|r| r.paths().contains(&(kind, path)))
            .map(|r| r.index)
            .collect()
    };
    let rw = holding("subpath", expected);
    assert!(
        rw.iter()
            .any(|&i| rules.iter().any(|r| r.index == i && r.action == "allow")),
        "{text}"
    );
    let data = if expected == "/" {
        "/data".to_string()
    } else {
        format!("{expected}/data")
    };
    let deny = holding("subpath", &data);
    let last_allow = rules
        .iter()
        .filter(|r| r.action == "allow")
        .map(|r| r.index)
        .max();
    assert!(
        deny.iter().all(|&i| Some(i) > last_allow) && !deny.is_empty(),
        "{text}"
    );
});
