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

/// A path the program chose (a change set's entry, a symlink's target) with its control
/// characters, invisible characters, backslashes and bytes that are not UTF-8 escaped
/// ([`stockade::guard::terminal::escape_path`]): a name with a newline and an escape
/// sequence once printed a made-up line in colour in `changes` and `apply`.
pub fn shown_path(path: &std::path::Path) -> String {
    stockade::guard::terminal::escape_path(path)
}

/// `text` with its control characters escaped
/// ([`stockade::guard::terminal::escape_controls`]).
pub fn escape_controls(text: &str) -> String {
    stockade::guard::terminal::escape_controls(text)
}
