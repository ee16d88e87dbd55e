//! stockade's own lines about paths the program chose (`.git` changes dropped, `.git`
//! links without a layer): made safe to print on the caller's terminal or log.

/// A line of stockade's own that names paths the program chose (a `.git` change, what a
/// planted `gitdir:` names): with `--scrub` its secrets redacted as in the program's
/// output, and always every control character escaped (`\n`, `\x1b`, …), so that the
/// program can neither forge further `stockade:` lines nor send escape sequences to the
/// caller's terminal or log through them.
pub fn shown(child: &stockade::Child, scrub: bool, text: &str) -> String {
    let text = if scrub {
        child.redactor().redact_str(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    escape_controls(&text)
}

/// A path the program chose (a change set's entry, a symlink's target), lossily as text
/// with its control characters escaped ([`escape_controls`]): a name with a newline and
/// an escape sequence once printed a made-up line in colour in `changes` and `apply`.
pub fn shown_path(path: &std::path::Path) -> String {
    escape_controls(&path.to_string_lossy())
}

/// `text` with each control character (C0, DEL, C1), line or paragraph separator and
/// bidirectional mark or override (which reorder how a line reads) written as Rust writes
/// it in a string literal.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        );
        if c.is_control() || bidi || c == '\u{2028}' || c == '\u{2029}' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
