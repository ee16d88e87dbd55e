//! Which names a case-insensitive or NTFS-like file system takes for `.git`
//! (`stockade::changes::is_git_name`, applied to every name of a change set, which the
//! program chose) on arbitrary bytes: it never panics, ignores ASCII case, and names
//! nothing without the letters of `git` in order.

#![no_main]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use libfuzzer_sys::fuzz_target;
use stockade::changes::is_git_name;

fuzz_target!(|data: &[u8]| {
    let name = OsStr::from_bytes(data);
    let yes = is_git_name(name);
    let upper = data.to_ascii_uppercase();
    assert_eq!(yes, is_git_name(OsStr::from_bytes(&upper)), "{data:?}");
    if yes {
        let lower = data.to_ascii_lowercase();
        let mut want = b"git".iter().peekable();
        for b in &lower {
            if want.peek() == Some(&b) {
                want.next();
            }
        }
        assert!(want.peek().is_none(), "{data:?} taken for .git");
    }
    // `.git` itself, whatever follows it that the rules let through.
    let mut dot_git = b".git".to_vec();
    dot_git.extend(data.iter().filter(|b| matches!(b, b'.' | b' ')));
    assert!(is_git_name(OsStr::from_bytes(&dot_git)));
});
