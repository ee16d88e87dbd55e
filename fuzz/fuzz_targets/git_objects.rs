//! Git's object formats as the `.git` layer's merge reads them (a program writes these
//! bytes): loose objects, trees, commits, tags, pack indexes, pack entries and deltas.
//! None may panic, and what they give stays within the bounds.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::gitobjects::{
    MAX_OBJECT, apply_delta, commit, idx_find_in, inflate, loose, pack_object, tag, tree,
};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let hash = if which & 0x80 != 0 { 32 } else { 20 };
    match which & 0x7f {
        0 => {
            if let Ok((_, body)) = loose(rest) {
                assert!(body.len() <= MAX_OBJECT);
            }
        }
        1 => {
            if let Ok(entries) = tree(rest, hash) {
                for e in entries {
                    assert_eq!(e.id.len(), hash);
                    assert!(!e.name.is_empty() && !e.name.contains(&b'/'));
                }
            }
        }
        2 => {
            if let Ok((t, parents)) = commit(rest, hash) {
                assert_eq!(t.len(), hash);
                assert!(parents.iter().all(|p| p.len() == hash));
            }
            let _ = tag(rest, hash);
        }
        3 => {
            // An index, then the id looked up (its last `hash` bytes).
            if rest.len() >= hash {
                let (idx, id) = rest.split_at(rest.len() - hash);
                let _ = idx_find_in(idx, hash, id);
            }
        }
        4 => {
            // A pack: the object at each offset a two-byte prefix names, deltas resolved
            // against the same bytes as an index.
            if rest.len() >= 2 {
                let offset = u64::from(u16::from_le_bytes([rest[0], rest[1]]));
                let pack = &rest[2..];
                let mut find = |id: &[u8]| idx_find_in(pack, hash, id).ok().flatten();
                let mut budget = 1 << 24;
                if let Ok((_, body)) = pack_object(pack, offset, hash, &mut find, &mut budget) {
                    assert!(body.len() <= MAX_OBJECT);
                }
            }
        }
        5 => {
            // A delta: its base is the first half.
            let (base, delta) = rest.split_at(rest.len() / 2);
            if let Ok(out) = apply_delta(base, delta) {
                assert!(out.len() <= MAX_OBJECT);
            }
        }
        _ => {
            if let Ok(out) = inflate(rest, 1 << 16) {
                assert!(out.len() <= 1 << 16);
            }
        }
    }
});
