//! The ref validators of the `.git` merge (`merge/refs.rs`): any bytes as a ref name,
//! `HEAD`, loose ref, `packed-refs`, `FETCH_HEAD` or `*_HEAD` file give a clean answer,
//! and what is accepted holds git's rules (checked here independently).
//!
//! Input layout: byte 0 picks the file (mod 7) and the hash size (bit 7: 32 bytes); the
//! rest is the file, split at the first NUL into a ref name and contents where a name is
//! needed, and into the program's and the host's `packed-refs`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::git_fuzzing::{packed_refs, packed_without_new_replacements, ref_file, refname};

/// git's `check_refname_format`, restated plainly, plus the merge's own additions.
fn plainly_valid(name: &[u8]) -> bool {
    let Some(rest) = name.strip_prefix(b"refs/") else {
        return false;
    };
    !rest.is_empty()
        && name != b"refs/heads/HEAD"
        && !name.ends_with(b".")
        && !name.windows(2).any(|w| w == b".." || w == b"@{")
        && !name
            .iter()
            .any(|b| *b <= b' ' || *b == 0x7f || b":?[\\^~*".contains(b))
        && name.split(|b| *b == b'/').all(|c| {
            !c.is_empty() && !c.starts_with(b".") && !c.starts_with(b"-") && !c.ends_with(b".lock")
        })
}

fn oid(text: &[u8], hash: usize) -> bool {
    text.len() == 2 * hash
        && text
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let hash = if sel & 0x80 != 0 { 32 } else { 20 };
    let (name, body) = match memchr(rest) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &b""[..]),
    };
    match sel % 7 {
        0 => assert_eq!(refname(rest).is_ok(), plainly_valid(rest), "{rest:?}"),
        1 => {
            // A loose ref: a valid name, and `<oid>\n` or `ref: <valid name>\n`.
            let mut path = b"refs/".to_vec();
            path.extend_from_slice(name);
            if ref_file(&path, body, hash).is_ok() {
                assert!(plainly_valid(&path));
                let line = body.strip_suffix(b"\n").unwrap();
                match line.strip_prefix(b"ref: ") {
                    Some(t) => assert!(plainly_valid(t)),
                    None => assert!(oid(line, hash)),
                }
            }
        }
        2 => {
            if ref_file(b"HEAD", rest, hash).is_ok() {
                let line = rest.strip_suffix(b"\n").unwrap();
                assert!(oid(line, hash) || line.strip_prefix(b"ref: ").is_some_and(plainly_valid));
            }
        }
        3 => {
            if let Ok(names) = packed_refs(rest, hash) {
                assert!(names.iter().all(|n| plainly_valid(n)));
                assert!(rest.is_empty() || rest.ends_with(b"\n"));
            }
        }
        4 => {
            // The program's packed-refs (before the NUL) over the host's (after it).
            if packed_refs(name, hash).is_ok() {
                if let Some(kept) = packed_without_new_replacements(name, body) {
                    let names = packed_refs(&kept, hash).expect("what is left parses");
                    for n in names.iter().filter(|n| n.starts_with(b"refs/replace/")) {
                        assert!(body.split(|b| *b == b'\n').any(|l| l.ends_with(n)));
                    }
                }
            }
        }
        5 => {
            if ref_file(b"FETCH_HEAD", rest, hash).is_ok() {
                assert!(!rest.iter().any(|b| *b < b' ' && *b != b'\t' && *b != b'\n'));
            }
        }
        _ => {
            for file in [&b"MERGE_HEAD"[..], b"ORIG_HEAD", b"AUTO_MERGE"] {
                if ref_file(file, rest, hash).is_ok() {
                    let body = rest.strip_suffix(b"\n").unwrap();
                    assert!(body.split(|b| *b == b'\n').all(|l| oid(l, hash)));
                }
            }
        }
    }
});

fn memchr(data: &[u8]) -> Option<usize> {
    data.iter().position(|b| *b == 0)
}
