//! The `.git/config` merge (`merge/config.rs`): any bytes as the program's config (and as
//! the host's) give a clean answer, and what merges holds the allowlist's rules (checked
//! here independently), reads back as meant, and is a fixed point.
//!
//! Input layout: split at the first `0xff` byte into the host's config and the program's
//! (no `0xff`: an empty host config); byte 0 bit 0 set swaps a well-formed host config in.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::git_fuzzing::{config_entries, config_merge, config_url};

const HOST: &[u8] = b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n[user]\n\tname = Host\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";

/// The allowlist, restated plainly.
fn allowed(name: &[u8]) -> bool {
    let s = String::from_utf8_lossy(name);
    if s == "user.name" || s == "user.email" {
        return true;
    }
    let key = s.rsplit('.').next().unwrap_or_default();
    (s.starts_with("remote.") && ["url", "pushurl", "fetch"].contains(&key))
        || (s.starts_with("branch.") && ["remote", "merge"].contains(&key))
}

fuzz_target!(|data: &[u8]| {
    let (host, program) = match data.iter().position(|&b| b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b""[..], data),
    };
    let host = if data.first().is_some_and(|b| b & 1 == 1) { HOST } else { host };
    let _ = config_url(program);
    let (Ok(h), Ok(p)) = (config_entries(host), config_entries(program)) else {
        assert!(config_merge(host, program).is_err());
        return;
    };
    // Two readable configs always merge (the rewrite reads back as meant).
    let (text, changes) = config_merge(host, program).expect("two readable configs merge");
    let merged: Vec<&Vec<u8>> = changes.iter().filter(|c| c.1).map(|c| &c.0).collect();
    assert_eq!(text.is_some(), !merged.is_empty());
    let Some(text) = text else { return };
    let out = config_entries(&text).expect("the merged config reads back");
    for name in &merged {
        assert!(allowed(name), "{}", String::from_utf8_lossy(name));
        for (_, v) in out.iter().filter(|(n, _)| n == *name) {
            let v = v.as_deref().expect("a merged variable has a value");
            assert!(
                !v.is_empty() && !v.iter().any(|&c| c < 0x20 || c == 0x7f),
                "{v:?}"
            );
            if name.ends_with(b".url") || name.ends_with(b".pushurl") {
                assert!(!v.starts_with(b"-") && !v.windows(2).any(|w| w == b"::"));
                // (`file:x` without `//` is scp-like: host `file`, over ssh, as git reads it.)
                assert!(!v.starts_with(b"/") && !v.starts_with(b"file://"));
            }
        }
    }
    // Variables not merged are as the host had them.
    for (n, v) in &out {
        if !merged.contains(&n) {
            assert!(h.contains(&(n.clone(), v.clone())), "{}", String::from_utf8_lossy(n));
        }
    }
    let _ = p;
    // A fixed point: merging the same program into the result changes nothing more.
    let (again, _) = config_merge(&text, program).expect("the result merges again");
    assert!(again.is_none() || again.as_deref() == Some(&text[..]));
});
