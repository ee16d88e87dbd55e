//! Names a file system may take for others: `.git` as git itself recognizes it on
//! case-insensitive (HFS+, APFS) and Windows-like (NTFS, FAT) file systems, and the
//! policy's names compared without case.
//!
//! On such a file system `upper/.GIT/hooks/x` applied as `.GIT/hooks/x` lands in the
//! workspace's real `.git/hooks`, past the `.git` merge, and `.ENV` is `.env`. Git refuses
//! the same names in the trees it checks out (`core.protectHFS`, `core.protectNTFS`); the
//! rules here are git's (`is_hfs_dotgit`, `is_ntfs_dotgit`), applied whatever the
//! workspace's file system, as git does by default for NTFS.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Whether a file system that folds case, ignores the code points HFS+ ignores, or reads
/// names as NTFS does could take the path component `name` for `.git`: `.git` itself,
/// `.GIT`, `.g\u{200c}it`, `.git.`, `.git ` and `.git::$INDEX_ALLOCATION`, `git~1`.
#[must_use]
pub fn is_git_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    is_hfs_dot_git(b) || is_ntfs_dot_git(b)
}

/// Git's `is_hfs_dotgit`: `.git` compared ASCII-case-insensitively, skipping the code
/// points HFS+ ignores; invalid UTF-8 is never `.git`.
fn is_hfs_dot_git(name: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(name) else {
        return false;
    };
    let mut chars = text.chars().filter(|c| !hfs_ignored(*c));
    for want in ['.', 'g', 'i', 't'] {
        match chars.next() {
            Some(c) if c.is_ascii() && c.to_ascii_lowercase() == want => {}
            _ => return false,
        }
    }
    chars.next().is_none()
}

/// The code points HFS+ leaves out of a name's comparison (git's `next_hfs_char`).
fn hfs_ignored(c: char) -> bool {
    matches!(
        c,
        '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}'
    )
}

/// Git's `is_ntfs_dotgit`: `.git` or its short name `git~1` (any case), then only dots
/// and spaces up to the end, a directory separator or an alternate data stream's `:`.
fn is_ntfs_dot_git(name: &[u8]) -> bool {
    let rest = if let Some(r) = strip_ascii_ci(name, b".git") {
        r
    } else if let Some(r) = strip_ascii_ci(name, b"git~1") {
        r
    } else {
        return false;
    };
    for &c in rest {
        match c {
            b'/' | b'\\' | b':' => return true,
            b'.' | b' ' => {}
            _ => return false,
        }
    }
    true
}

fn strip_ascii_ci<'a>(name: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let head = name.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| name.get(prefix.len()..))
        .flatten()
}

/// Whether the component `component` is the name `name` on a file system that folds
/// case: equal ignoring ASCII case, or equal once both are case-folded ([`fold`]).
pub(crate) fn same_name(component: &OsStr, name: &str) -> bool {
    let c = component.as_bytes();
    if c.eq_ignore_ascii_case(name.as_bytes()) {
        return true;
    }
    // An ASCII name folds to its lowercase alone: compared above, without a copy.
    if c.is_ascii() && name.is_ascii() {
        return false;
    }
    std::str::from_utf8(c).is_ok_and(|c| fold(c) == fold(name))
}

/// What git takes for a git directory (its `is_git_directory`), from the names a
/// directory lists: `HEAD` with `objects` and `refs` (a bare repository, or a `.git`), or
/// `HEAD` with a `commondir` file (whose objects, refs, config and hooks are where it
/// points). Names are compared as [`same_name`] does: a file system that folds case takes
/// `hEAD` and `objectſ` for git's names.
///
/// The one rule for both places that look for repositories a program made: the
/// nested-repository walk after a run in place, and a change set's apply.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GitDirectory(u8);

impl GitDirectory {
    const PARTS: [(u8, &'static str); 4] =
        [(1, "HEAD"), (2, "objects"), (4, "refs"), (8, "commondir")];

    /// Notes one name the directory lists.
    pub(crate) fn note(&mut self, name: &OsStr) {
        for (bit, part) in Self::PARTS {
            if same_name(name, part) {
                self.0 |= bit;
            }
        }
    }

    /// Whether the names noted make the directory a git directory.
    pub(crate) fn is_repository(self) -> bool {
        self.0 & 7 == 7 || self.0 & 9 == 9
    }
}

/// `text` lowercased, then the Unicode case foldings that lowercasing leaves and that
/// reach ASCII letters (CaseFolding.txt's C and F mappings, which the Linux casefold
/// tables follow): `ſ` is `s`, `ß` is `ss`, the Latin ligatures (`ﬁ`, `ﬆ`, …) their
/// letters. So `.ſsh` and `.ßh` are `.ssh`, as such a file system takes them.
fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        match c {
            'ſ' => out.push('s'),
            'ß' => out.push_str("ss"),
            'ﬀ' => out.push_str("ff"),
            'ﬁ' => out.push_str("fi"),
            'ﬂ' => out.push_str("fl"),
            'ﬃ' => out.push_str("ffi"),
            'ﬄ' => out.push_str("ffl"),
            'ﬅ' | 'ﬆ' => out.push_str("st"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(n: &str) -> bool {
        is_git_name(OsStr::new(n))
    }

    fn git_directory(names: &[&str]) -> bool {
        let mut g = GitDirectory::default();
        for n in names {
            g.note(OsStr::new(n));
        }
        g.is_repository()
    }

    #[test]
    fn a_git_directory_is_what_git_takes_for_one_in_any_case() {
        for yes in [
            &["HEAD", "objects", "refs"][..],
            &["head", "OBJECTS", "Refs", "config"],
            &["hEAD", "objectſ", "REFſ"],
            &["HEAD", "commondir"],
            &["Head", "COMMONDIR", "x"],
        ] {
            assert!(git_directory(yes), "{yes:?}");
        }
        for no in [
            &[][..],
            &["HEAD"],
            &["HEAD", "objects"],
            &["objects", "refs", "commondir"],
            &["HEAD", "objectz", "refs"],
            &["HEAD ", "objects", "refs"],
            &["HEAD", "ob\u{200c}jects", "refs"],
        ] {
            assert!(!git_directory(no), "{no:?}");
        }
        // Names that are not UTF-8 never fold to git's.
        let mut g = GitDirectory::default();
        for n in [&b"HEAD"[..], b"objects", b"ref\xffs"] {
            g.note(OsStr::from_bytes(n));
        }
        assert!(!g.is_repository());
    }

    /// Git's own cases (t0060's `is_hfs_dotgit` and `is_ntfs_dotgit` vectors, those that
    /// name `.git`) and their near misses.
    #[test]
    fn git_names_are_recognized_as_git_does() {
        for yes in [
            ".git",
            ".GIT",
            ".Git",
            ".gIt",
            "\u{200c}.git",
            ".g\u{200c}it",
            ".gi\u{200d}t",
            ".git\u{200e}",
            ".\u{feff}git",
            ".g\u{206a}i\u{202e}t",
            ".git.",
            ".git ",
            ".git. .",
            ".git::$INDEX_ALLOCATION",
            ".git:x",
            ".git\\hooks",
            "git~1",
            "GIT~1",
            "git~1.",
            "git~1::$INDEX_ALLOCATION",
        ] {
            assert!(git(yes), "{yes:?}");
        }
        for no in [
            "",
            ".",
            "..",
            "git",
            ".gi",
            ".gitx",
            ".gitignore",
            ".git.x",
            ".g\u{200b}it",
            ".gıt",
            ".g\u{301}it",
            "x.git",
            "git~2",
            "git~1x",
            "git~10",
            ".git~1",
        ] {
            assert!(!git(no), "{no:?}");
        }
        // Invalid UTF-8 is no HFS+ `.git`; NTFS reads bytes.
        assert!(!is_hfs_dot_git(b".g\xffit"));
        assert!(is_git_name(OsStr::from_bytes(b".git.\x20")));
    }

    #[test]
    fn policy_names_match_without_case() {
        assert!(same_name(OsStr::new(".ENV"), ".env"));
        assert!(same_name(OsStr::new(".Ssh"), ".ssh"));
        assert!(same_name(OsStr::new("ÉTÉ"), "été"));
        assert!(same_name(OsStr::new(".ſsh"), ".ssh"));
        assert!(same_name(OsStr::new(".ßh"), ".ssh"));
        assert!(same_name(OsStr::new("id_rſa"), "id_rsa"));
        assert!(same_name(OsStr::new("\u{212a}EY"), "key"));
        assert!(same_name(OsStr::new(".npmrc"), ".NPMRC"));
        assert!(same_name(OsStr::new("con\u{fb01}g"), "config"));
        assert!(!same_name(OsStr::new(".sh"), ".ssh"));
        assert!(!same_name(OsStr::new(".envrc"), ".env"));
        assert!(!same_name(OsStr::from_bytes(b".env\xff"), ".env"));
    }
}
