//! The index reader of the `.git` merge (`merge/index.rs`, with git's path rules): any
//! bytes as an index (and a shared index) give the gitlink paths or a clean error; never
//! a panic, a hang, or an allocation the size of a field it read. An index it accepts
//! names only paths git would take.
//!
//! Input layout: byte 0 picks the hash size (bit 0: 32 bytes, else 20) and whether a
//! shared index follows (bit 1); bytes 1-2 (big endian) are the index's length, the rest
//! after the index is the shared index.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::git_fuzzing::{index_gitlinks, index_path_safe};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let hash = if mode & 1 == 1 { 32 } else { 20 };
    let (index, shared) = match rest {
        [a, b, tail @ ..] => {
            let len = usize::from(u16::from_be_bytes([*a, *b])).min(tail.len());
            let (index, shared) = tail.split_at(len);
            (index, (mode & 2 == 2).then_some(shared))
        }
        _ => (rest, None),
    };
    for data in [index, rest] {
        if let Ok(links) = index_gitlinks(data, hash, shared) {
            for path in &links {
                assert!(
                    index_path_safe(path, 0o160000),
                    "accepted a gitlink at a path git refuses: {path:?}"
                );
            }
        }
    }
    // The path rules alone, on the raw bytes.
    if index_path_safe(rest, 0o100644) {
        assert!(!rest.starts_with(b"/"));
        assert!(
            !rest
                .split(|b| *b == b'/')
                .any(|c| c.is_empty() || c == b".." || c.eq_ignore_ascii_case(b".git"))
        );
    }
});
