//! Which entry paths git itself refuses to take into an index (`read-cache.c`'s
//! `verify_path`, with the NTFS and HFS protections: git enables the NTFS ones on every
//! system, and a repository on the host may be shared with Git for Windows or macOS).
//!
//! An index is the program's to write; `git restore .` or `git checkout` on the host
//! writes every entry's blob at its path. An entry `../x` would write outside the
//! workspace, and `.git/hooks/x`, `.GIT/config` or `.git\hooks\x` (NTFS) into the host's
//! git dir, whose next command runs what that says.

const SYMLINK: u32 = 0o120000;

/// Whether git would take `path`, of an entry of `mode`, into an index.
///
/// Refused: an absolute path, an empty component (`a//b`, a trailing `/`), `.` and `..`;
/// a component or `\`-separated piece of one that is `.git` in any case, also with
/// trailing dots and spaces, an NTFS stream (`:…`), the `git~1` short name, or HFS's
/// ignorable code points inside; and a symlink whose last piece is `.gitmodules` in those
/// spellings or its NTFS short names (`gitmod~1`…`gitmod~4`, `gi7eba~N`).
pub(in crate::process) fn checkout_safe(path: &[u8], mode: u32) -> bool {
    if path.first() == Some(&b'/') {
        return false;
    }
    let symlink = mode & 0o170000 == SYMLINK;
    let mut parts = path.split(|b| *b == b'/').peekable();
    while let Some(part) = parts.next() {
        if part.is_empty() || part == b"." || part == b".." {
            return false;
        }
        let last_part = parts.peek().is_none();
        let mut pieces = part.split(|b| *b == b'\\').peekable();
        while let Some(piece) = pieces.next() {
            let name = ntfs_folded(piece);
            let hfs = hfs_folded(piece);
            if name == b".git" || name == b"git~1" || hfs.as_deref() == Some(b".git") {
                return false;
            }
            let last = last_part && pieces.peek().is_none();
            if symlink && last && (is_gitmodules(&name) || hfs.as_deref() == Some(b".gitmodules")) {
                return false;
            }
        }
    }
    true
}

/// `name` as NTFS sees it: without an NTFS stream (`:…`), without trailing dots and
/// spaces, lowercased.
fn ntfs_folded(name: &[u8]) -> Vec<u8> {
    let name = name.split(|b| *b == b':').next().unwrap_or_default();
    let end = name
        .iter()
        .rposition(|b| *b != b'.' && *b != b' ')
        .map_or(0, |i| i + 1);
    name.get(..end).unwrap_or_default().to_ascii_lowercase()
}

/// `name` as HFS+ compares it: without the code points it ignores (zero-width joiners,
/// direction marks and overrides, the byte-order mark), lowercased; `None` when it is not
/// UTF-8 or has none of them (then [`ntfs_folded`] covers it).
fn hfs_folded(name: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(name).ok()?;
    let ignorable = |c: char| matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}');
    if !text.chars().any(ignorable) {
        return None;
    }
    let kept: String = text.chars().filter(|c| !ignorable(*c)).collect();
    Some(kept.to_lowercase().into_bytes())
}

/// Whether an [`ntfs_folded`] name is `.gitmodules` or one of the short names NTFS may
/// give it: `gitmod~1` to `gitmod~4`, or the fall-back `gi7eba~N` (the first up to six
/// characters of `gi7eba`, a tilde, a digit 1-9, more digits: eight characters).
fn is_gitmodules(name: &[u8]) -> bool {
    const PREFIX: &[u8; 6] = b"gi7eba";
    if name == b".gitmodules" {
        return true;
    }
    if let [b'g', b'i', b't', b'm', b'o', b'd', b'~', d] = name {
        if (b'1'..=b'4').contains(d) {
            return true;
        }
    }
    if name.len() != 8 {
        return false;
    }
    let mut tilde = false;
    let mut i = 0;
    while let Some(&c) = name.get(i) {
        if tilde {
            if !c.is_ascii_digit() {
                return false;
            }
        } else if c == b'~' {
            i += 1;
            if !name.get(i).is_some_and(|d| (b'1'..=b'9').contains(d)) {
                return false;
            }
            tilde = true;
        } else if i >= 6 || PREFIX.get(i) != Some(&c) {
            return false;
        }
        i += 1;
    }
    tilde
}
