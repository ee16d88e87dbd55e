//! Two readers of `.git` bytes a sandboxed program may have written: the object ids the
//! `.git` merge finds in a ref file, reflog or `packed-refs` (`history::ids`, which the
//! check for gitlinks in the history relies on), and the path of a `gitdir:` file. Any
//! bytes give a clean answer, and what is found is really in the input.
//!
//! Input layout: byte 0 picks the hash size (bit 0: 32 bytes, else 20); the rest is the
//! file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::git_fuzzing::{gitdir_path, history_ids};

fn hex(id: &[u8]) -> Vec<u8> {
    id.iter().flat_map(|b| format!("{b:02x}").into_bytes()).collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, file)) = data.split_first() else {
        return;
    };
    let hash = if sel & 1 == 1 { 32 } else { 20 };
    let lower = file.to_ascii_lowercase();
    for id in history_ids(file, hash) {
        assert_eq!(id.len(), hash);
        assert!(id.iter().any(|b| *b != 0), "the null id is none");
        let text = hex(&id);
        assert!(
            lower.windows(text.len()).any(|w| w == text.as_slice()),
            "an id not in the input"
        );
    }
    if let Some(path) = gitdir_path(file) {
        assert!(file.starts_with(b"gitdir: "));
        assert!(!path.is_empty());
        assert!(!path.ends_with(b"\n") && !path.ends_with(b"\r"));
        assert_eq!(&file[8..8 + path.len()], path);
        assert!(file[8 + path.len()..].iter().all(|b| *b == b'\n' || *b == b'\r'));
    } else {
        assert!(
            !file.starts_with(b"gitdir: ")
                || file[8..].iter().all(|b| *b == b'\n' || *b == b'\r')
        );
    }
});
