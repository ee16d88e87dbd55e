//! `cargo fuzz run sbpl`: any bytes as the workspace path, under a network mode picked by
//! the input's length. The profile is either refused with an error or parses back (with the
//! same reader as `tests/sbpl.rs`) to the same frame and sequence of rules as a benign
//! profile, with the path, exactly, as the workspace's literal, the data-dir deny after
//! every allow, and with `network = "allow"` the proxy's two ports as the only endpoints.
#![no_main]

#[path = "../../src/backend/sbpl/reader.rs"]
mod reader;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use stockade::Network;
use stockade::backend::sbpl::{SbplInput, profile};

/// The egress proxy's ports for `network = "allow"`.
const PORTS: [u16; 2] = [3128, 1080];

fn input(workspace: PathBuf, network: Network) -> SbplInput {
    let proxy_ports = match network {
        Network::Allow => PORTS.to_vec(),
        _ => vec![],
    };
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
        overlay: None,
        network,
        proxy_ports,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = b"/".to_vec();
    bytes.extend_from_slice(data);
    let ws = PathBuf::from(OsStr::from_bytes(&bytes));
    let network = [Network::Full, Network::Allow, Network::None][data.len() % 3];
    let Ok(text) = profile(&input(ws.clone(), network)) else {
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
    let twin_rules =
        reader::rules(&profile(&input(twin, network)).expect("benign")).expect("benign parses");
    assert_eq!(rules.len(), twin_rules.len(), "{text}");
    // Filter counts may differ (a path equal to a fixed one is not repeated); the sequence
    // of rules may not.
    for (r, t) in rules.iter().zip(&twin_rules) {
        assert_eq!(r.head(), t.head(), "{text}");
    }
    if network == Network::Allow {
        let outbound: Vec<_> = rules
            .iter()
            .filter(|r| r.ops.iter().any(|op| op.starts_with("network")))
            .collect();
        assert_eq!(outbound.len(), 1, "{text}");
        assert_eq!(outbound[0].head(), "allow network-outbound", "{text}");
        assert_eq!(
            outbound[0].remotes(),
            [("tcp4", "localhost:3128"), ("tcp4", "localhost:1080")],
            "{text}"
        );
        assert_eq!(outbound[0].filters.len(), PORTS.len(), "{text}");
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
