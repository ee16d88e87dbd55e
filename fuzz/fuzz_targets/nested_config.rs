//! `cargo fuzz run nested_config`: any bytes as the config a program wrote in a nested
//! repository. The allowlist filter must not panic, must keep only allowlisted keys with
//! plain values (no quote, backslash or comment character, no transport helper URL), and
//! must be a fixed point: filtering its own output changes nothing.
#![no_main]

#[path = "../../src/process/nested/config.rs"]
mod config;

use libfuzzer_sys::fuzz_target;

const KEYS: &[&str] = &[
    "repositoryformatversion",
    "filemode",
    "bare",
    "logallrefupdates",
    "ignorecase",
    "precomposeunicode",
    "symlinks",
    "objectformat",
    "refstorage",
    "url",
    "fetch",
    "remote",
    "merge",
];

fuzz_target!(|data: &[u8]| {
    let out = config::filter(data);
    assert_eq!(config::filter(&out), out, "not a fixed point");
    for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if line[0] == b'[' {
            let name = &line[1..line.iter().position(|&b| b == b' ' || b == b']').unwrap()];
            assert!(
                [&b"core"[..], b"extensions", b"remote", b"branch"].contains(&name),
                "{line:?}"
            );
            continue;
        }
        let text = std::str::from_utf8(line).expect("plain ASCII");
        let (key, value) = text
            .strip_prefix('\t')
            .and_then(|l| l.split_once(" = "))
            .expect("key = value");
        assert!(KEYS.contains(&key), "{text}");
        assert!(
            !value.contains(['"', '\\', ';', '#'])
                && !(key == "url" && (value.contains("::") || value.starts_with('-'))),
            "{text}"
        );
    }
});
