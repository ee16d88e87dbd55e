//! `.git/config`: the allowlisted keys a program set, changed or removed, merged into the
//! host's config; everything else dropped and reported.
//!
//! # The parser
//!
//! Git's own grammar (`config.c`, `git_parse_source`), read strictly: a section header
//! `[name]` or `[name "subsection"]` (a subsection's `\x` is `x`), keys of `[A-Za-z][A-Za-z0-9-]*`,
//! values with `"` quoting, the escapes `\\ \" \n \t \b`, a `\` newline continuation, and
//! comments from `#` or `;` outside quotes; `\r\n` is a newline, a UTF-8 byte order mark may
//! open the file. Anything git would refuse, and a few things it would take but that
//! leave doubt, refuse the whole file: a NUL or other control byte (a tab aside), a lone
//! `\r`, a legacy `[section.subsection]` header, a key before any section, more than
//! [`MAX_CONFIG`] bytes. Then nothing of the program's config is merged.
//!
//! # What is merged
//!
//! A *variable* is `(section, subsection, key)` with its values in order (git's multi-valued
//! keys, and "the last one wins" for the others). Each variable whose values differ between
//! the host's config and the program's is one change: it is merged (the host's entries of it
//! removed, the program's values written after the last entry of the same section, or in a
//! new section at the end) only when it is on the allowlist and every value passes its rule
//! ([`allowed`]); otherwise it is dropped and reported. `include`, `includeIf` and every other
//! key are never merged. The host's other bytes are kept exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, fchmod, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use super::classify::{R, failed};
use super::read::read_host;
use super::write::load;
use super::{GitConfigChange, GitConfigOutcome, GitDropReason};

/// At most this many bytes of a config are read; a longer one is refused whole.
pub const MAX_CONFIG: usize = 1 << 20;

/// Why a config cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unparsable(pub &'static str);

type P<T> = Result<T, Unparsable>;

/// One section header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The section name, lowercase.
    pub section: Vec<u8>,
    /// The subsection, as written (case-sensitive).
    pub sub: Option<Vec<u8>>,
    /// Where the line holding the header ends (after its newline, or the end of the text).
    line_end: usize,
}

/// One `key = value` (or bare `key`) entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The index of its section's header in [`Parsed::headers`].
    pub header: usize,
    /// The key, lowercase.
    pub key: Vec<u8>,
    /// The value, unquoted and unescaped; `None` for a bare key (boolean true).
    pub value: Option<Vec<u8>>,
    /// Its bytes: from the start of its line (only blanks before it there) or its key,
    /// to after its newline.
    start: usize,
    end: usize,
    /// Whether a header precedes it on its line.
    after_header: bool,
}

/// A parsed config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The section headers, in order.
    pub headers: Vec<Header>,
    /// The entries, in order.
    pub entries: Vec<Entry>,
}

/// A variable: section (lowercase), subsection, key (lowercase).
pub type Var = (Vec<u8>, Option<Vec<u8>>, Vec<u8>);

impl Parsed {
    /// The variable of `e`.
    fn var(&self, e: &Entry) -> Var {
        let h = &self.headers[e.header];
        (h.section.clone(), h.sub.clone(), e.key.clone())
    }

    /// Every variable with its values, in order.
    pub fn vars(&self) -> BTreeMap<Var, Vec<Option<Vec<u8>>>> {
        let mut out: BTreeMap<Var, Vec<Option<Vec<u8>>>> = BTreeMap::new();
        for e in &self.entries {
            out.entry(self.var(e)).or_default().push(e.value.clone());
        }
        out
    }
}

struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
}

impl Lexer<'_> {
    /// The next character, `\r\n` read as `\n`; `None` at the end. Control bytes other than
    /// tab and newline refuse the file.
    fn next(&mut self) -> P<Option<u8>> {
        let Some(&c) = self.b.get(self.i) else {
            return Ok(None);
        };
        self.i += 1;
        match c {
            b'\r' if self.b.get(self.i) == Some(&b'\n') => {
                self.i += 1;
                Ok(Some(b'\n'))
            }
            b'\r' => Err(Unparsable("a carriage return not before a newline")),
            b'\t' | b'\n' => Ok(Some(c)),
            0..=0x1f | 0x7f => Err(Unparsable("a control character")),
            _ => Ok(Some(c)),
        }
    }

    /// As [`Lexer::next`], the end read as a newline (git's `get_next_char`).
    fn next_nl(&mut self) -> P<u8> {
        Ok(self.next()?.unwrap_or(b'\n'))
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
}

fn blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// Parses config `text` by git's grammar (see the module's docs).
///
/// # Errors
///
/// What refuses it.
pub fn parse(text: &[u8]) -> P<Parsed> {
    if text.len() > MAX_CONFIG {
        return Err(Unparsable("larger than the merge reads"));
    }
    let bom = text.starts_with(b"\xef\xbb\xbf");
    let mut lx = Lexer {
        b: text,
        i: if bom { 3 } else { 0 },
    };
    let mut out = Parsed::default();
    let mut comment = false;
    // Whether only blanks precede on this line (`Some(start)`), or a header does.
    let mut line_start = lx.i;
    let mut after_header = false;
    loop {
        let start = lx.i;
        let Some(c) = lx.next()? else {
            return Ok(out);
        };
        match c {
            b'\n' => {
                comment = false;
                line_start = lx.i;
                after_header = false;
            }
            _ if comment => {}
            c if blank(c) => {}
            b'#' | b';' => comment = true,
            b'[' => {
                if after_header || text[line_start..start].iter().any(|&b| !blank(b)) {
                    return Err(Unparsable("a section header after other text on its line"));
                }
                let (section, sub) = header(&mut lx)?;
                let line_end = text[lx.i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(text.len(), |p| lx.i + p + 1);
                out.headers.push(Header {
                    section,
                    sub,
                    line_end,
                });
                after_header = true;
            }
            c if c.is_ascii_alphabetic() => {
                let Some(h) = out.headers.len().checked_sub(1) else {
                    return Err(Unparsable("a key before any section"));
                };
                let (key, value) = entry(&mut lx, c)?;
                out.entries.push(Entry {
                    header: h,
                    key,
                    value,
                    start: if after_header { start } else { line_start },
                    end: lx.i,
                    after_header,
                });
                // The entry read its line's newline.
                line_start = lx.i;
                after_header = false;
            }
            _ => return Err(Unparsable("neither a section, a key nor a comment")),
        }
    }
}

/// After `[`: the section name and subsection, through `]`.
fn header(lx: &mut Lexer<'_>) -> P<(Vec<u8>, Option<Vec<u8>>)> {
    let mut name = Vec::new();
    let sub = loop {
        match lx.next()? {
            Some(b']') => break None,
            Some(c) if blank(c) => break Some(subsection(lx)?),
            Some(c) if c.is_ascii_alphanumeric() || c == b'-' => name.push(c.to_ascii_lowercase()),
            Some(b'.') => return Err(Unparsable("a legacy [section.subsection] header")),
            _ => return Err(Unparsable("a malformed section header")),
        }
    };
    if name.is_empty() {
        return Err(Unparsable("a section header without a name"));
    }
    Ok((name, sub))
}

/// After `[name `: the quoted subsection, through `]`.
fn subsection(lx: &mut Lexer<'_>) -> P<Vec<u8>> {
    let mut c = lx.next_nl()?;
    while blank(c) {
        c = lx.next_nl()?;
    }
    if c != b'"' {
        return Err(Unparsable("a subsection not in quotes"));
    }
    let mut sub = Vec::new();
    loop {
        match lx.next_nl()? {
            b'\n' => return Err(Unparsable("an unterminated subsection")),
            b'"' => break,
            b'\\' => match lx.next_nl()? {
                b'\n' => return Err(Unparsable("an unterminated subsection")),
                c => sub.push(c),
            },
            c => sub.push(c),
        }
    }
    if lx.next_nl()? != b']' {
        return Err(Unparsable("text between a subsection and ]"));
    }
    Ok(sub)
}

/// From a key's first character `first` (taken): the key and value, through the line's
/// newline (git's `get_value`).
fn entry(lx: &mut Lexer<'_>, first: u8) -> P<(Vec<u8>, Option<Vec<u8>>)> {
    let mut key = vec![first.to_ascii_lowercase()];
    while let Some(c) = lx
        .peek()
        .filter(|c| c.is_ascii_alphanumeric() || *c == b'-')
    {
        key.push(c.to_ascii_lowercase());
        lx.i += 1;
    }
    let mut c = lx.next_nl()?;
    while blank(c) {
        c = lx.next_nl()?;
    }
    match c {
        b'\n' => Ok((key, None)),
        b'=' => Ok((key, Some(value(lx)?))),
        _ => Err(Unparsable(
            "a key followed by neither = nor the end of its line",
        )),
    }
}

/// After `=`: the value, through its line's newline (git's `parse_value`).
fn value(lx: &mut Lexer<'_>) -> P<Vec<u8>> {
    let (mut quote, mut comment) = (false, false);
    let mut trim = None;
    let mut v = Vec::new();
    loop {
        let c = lx.next_nl()?;
        if c == b'\n' {
            if quote {
                return Err(Unparsable("an unterminated quote in a value"));
            }
            if let Some(t) = trim {
                v.truncate(t);
            }
            return Ok(v);
        }
        if comment {
            continue;
        }
        if blank(c) && !quote {
            if trim.is_none() {
                trim = Some(v.len());
            }
            if !v.is_empty() {
                v.push(c);
            }
            continue;
        }
        if !quote && (c == b';' || c == b'#') {
            comment = true;
            continue;
        }
        trim = None;
        match c {
            b'\\' => match lx.next_nl()? {
                b'\n' => {}
                b't' => v.push(b'\t'),
                b'b' => v.push(0x08),
                b'n' => v.push(b'\n'),
                c @ (b'\\' | b'"') => v.push(c),
                _ => return Err(Unparsable("an unknown escape in a value")),
            },
            b'"' => quote = !quote,
            c => v.push(c),
        }
    }
}

/// What became of one changed variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Merged into the host's config (set, changed or removed).
    Merged,
    /// Not on the allowlist.
    NotAllowed,
    /// On the allowlist, but a value (or the subsection's name) fails its rule.
    Invalid,
}

impl Outcome {
    /// The public form.
    pub(super) fn public(self) -> GitConfigOutcome {
        match self {
            Outcome::Merged => GitConfigOutcome::Merged,
            Outcome::NotAllowed => GitConfigOutcome::NotAllowed,
            Outcome::Invalid => GitConfigOutcome::InvalidValue,
        }
    }
}

/// One changed variable, named as `git config` names it (`remote.origin.url`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// `section.subsection.key`, or `section.key`.
    pub name: Vec<u8>,
    /// What became of it.
    pub outcome: Outcome,
}

/// The result of merging a program's config into the host's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// The host's new config; `None` when nothing is merged.
    pub text: Option<Vec<u8>>,
    /// Every changed variable, by name.
    pub changes: Vec<Change>,
}

fn name_of((section, sub, key): &Var) -> Vec<u8> {
    let mut n = section.clone();
    if let Some(s) = sub {
        n.push(b'.');
        n.extend_from_slice(s);
    }
    n.push(b'.');
    n.extend_from_slice(key);
    n
}

/// Merges the allowlisted changes of `program`'s config (the whole file the program left)
/// into `host`'s (the host's file now).
///
/// # Errors
///
/// Either config cannot be parsed: nothing is merged.
pub fn merge(host: &[u8], program: &[u8]) -> P<Merged> {
    let h = parse(host)?;
    let p = parse(program)?;
    let (hv, pv) = (h.vars(), p.vars());
    let mut names: BTreeSet<&Var> = hv.keys().collect();
    names.extend(pv.keys());
    let none = Vec::new();
    let changed: Vec<&Var> = names
        .into_iter()
        .filter(|v| hv.get(*v).unwrap_or(&none) != pv.get(*v).unwrap_or(&none))
        .collect();
    // Remote URLs first: every other key of a remote needs one the host will have, and
    // `branch.<name>.remote` must name such a remote.
    let pass_of = |v: &Var| match (&v.0[..], &v.2[..]) {
        (b"remote", b"url") => 0,
        (b"remote", _) => 1,
        _ => 2,
    };
    let mut verdicts: BTreeMap<&Var, Outcome> = BTreeMap::new();
    for pass in 0..3 {
        let remotes: BTreeSet<Vec<u8>> = hv
            .keys()
            .chain(pv.keys())
            .filter(|v| v.0 == b"remote" && v.2 == b"url")
            .filter(|v| {
                let merged = verdicts.get(v) == Some(&Outcome::Merged);
                let vals = if merged { pv.get(*v) } else { hv.get(*v) };
                vals.is_some_and(|x| !x.is_empty())
            })
            .filter_map(|v| v.1.clone())
            .collect();
        for v in changed.iter().filter(|v| pass_of(v) == pass) {
            let values = pv.get(*v).unwrap_or(&none);
            let remote_known =
                pass != 1 || values.is_empty() || v.1.as_ref().is_some_and(|r| remotes.contains(r));
            let outcome = match allowed(v) {
                false => Outcome::NotAllowed,
                true if remote_known && values.iter().all(|x| valid(v, x.as_deref(), &remotes)) => {
                    Outcome::Merged
                }
                true => Outcome::Invalid,
            };
            verdicts.insert(v, outcome);
        }
    }
    let changes = verdicts
        .iter()
        .map(|(v, o)| Change {
            name: name_of(v),
            outcome: *o,
        })
        .collect();
    let mut merged: Vec<&Var> = verdicts
        .iter()
        .filter(|(_, o)| **o == Outcome::Merged)
        .map(|(v, _)| *v)
        .collect();
    // In the order the program's config names them (removals last). Linear: a program's
    // config of a million bytes may hold a hundred thousand variables.
    let mut first: BTreeMap<Var, usize> = BTreeMap::new();
    for (i, e) in p.entries.iter().enumerate() {
        first.entry(p.var(e)).or_insert(i);
    }
    merged.sort_by_key(|v| first.get(*v).copied().unwrap_or(usize::MAX));
    if merged.is_empty() {
        return Ok(Merged {
            text: None,
            changes,
        });
    }
    let text = rewrite(host, &h, &merged, &pv)?;
    // What is written reads back as meant: the merged variables as the program left them,
    // every other as the host had it.
    let check = parse(&text)?.vars();
    let merged: BTreeSet<&Var> = merged.into_iter().collect();
    for v in hv.keys().chain(pv.keys()).chain(check.keys()) {
        let want = if merged.contains(v) { &pv } else { &hv };
        if want.get(v).unwrap_or(&none) != check.get(v).unwrap_or(&none) {
            return Err(Unparsable(
                "the rewritten config does not read back as meant",
            ));
        }
    }
    Ok(Merged {
        text: Some(text),
        changes,
    })
}

/// The host's config with the `merged` variables' entries removed and the program's values
/// (`pv`) of them written.
fn rewrite(
    host: &[u8],
    h: &Parsed,
    merged: &[&Var],
    pv: &BTreeMap<Var, Vec<Option<Vec<u8>>>>,
) -> P<Vec<u8>> {
    // (start, end, replacement) over the host's text.
    let mut edits: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    // New sections, in the order the program's config first names them.
    type Section<'a> = (&'a [u8], Option<&'a [u8]>);
    let mut appended: Vec<(Section<'_>, Vec<u8>)> = Vec::new();
    let mut appended_at: BTreeMap<Section<'_>, usize> = BTreeMap::new();
    // The host's entries by variable.
    let mut by_var: BTreeMap<Var, Vec<&Entry>> = BTreeMap::new();
    for e in &h.entries {
        by_var.entry(h.var(e)).or_default().push(e);
    }
    for v in merged {
        for e in by_var.get(*v).into_iter().flatten() {
            // An entry on its header's line leaves the header's line ended.
            let keep = if e.after_header {
                b"\n".to_vec()
            } else {
                Vec::new()
            };
            edits.push((e.start, e.end, keep));
        }
        let Some(values) = pv.get(*v).filter(|x| !x.is_empty()) else {
            continue;
        };
        let mut lines = Vec::new();
        for x in values {
            lines.push(b'\t');
            lines.extend_from_slice(&v.2);
            lines.extend_from_slice(b" = ");
            lines.extend_from_slice(&quote(x.as_deref().unwrap_or_default()));
            lines.push(b'\n');
        }
        // After the last entry of the last section of this name, or its header's line.
        let last = h
            .headers
            .iter()
            .rposition(|x| x.section == v.0 && x.sub == v.1);
        match last {
            Some(i) => {
                let at = h
                    .entries
                    .iter()
                    .filter(|e| e.header == i)
                    .map(|e| e.end)
                    .next_back()
                    .unwrap_or(h.headers[i].line_end);
                if at == host.len() && !host.ends_with(b"\n") {
                    lines.insert(0, b'\n');
                }
                edits.push((at, at, lines));
            }
            None => {
                let id = (&v.0[..], v.1.as_deref());
                match appended_at.get(&id) {
                    Some(&i) => appended[i].1.extend_from_slice(&lines),
                    None => {
                        appended_at.insert(id, appended.len());
                        appended.push((id, lines));
                    }
                }
            }
        }
    }
    edits.sort_by_key(|e| (e.0, e.1));
    let mut out = Vec::with_capacity(host.len() + appended.len() + 64);
    let mut at = 0;
    for (start, end, with) in edits {
        if start < at {
            return Err(Unparsable("overlapping edits"));
        }
        out.extend_from_slice(&host[at..start]);
        out.extend_from_slice(&with);
        at = end;
    }
    out.extend_from_slice(&host[at..]);
    if !appended.is_empty() && !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    for ((section, sub), body) in appended {
        out.push(b'[');
        out.extend_from_slice(section);
        if let Some(sub) = sub {
            out.extend_from_slice(b" \"");
            for &c in sub {
                if c == b'"' || c == b'\\' {
                    out.push(b'\\');
                }
                out.push(c);
            }
            out.push(b'"');
        }
        out.extend_from_slice(b"]\n");
        out.extend_from_slice(&body);
    }
    Ok(out)
}

/// A value as git config text: quoted, with `\` and `"` escaped, when it needs it.
fn quote(v: &[u8]) -> Vec<u8> {
    let special = |c: &u8| matches!(c, b'#' | b';' | b'"' | b'\\' | b'\t' | b'\n' | 0x08);
    let needs = v.is_empty()
        || v.first().is_some_and(|c| blank(*c))
        || v.last().is_some_and(|c| blank(*c))
        || v.iter().any(special);
    if !needs {
        return v.to_vec();
    }
    let mut out = vec![b'"'];
    for &c in v {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x08 => out.extend_from_slice(b"\\b"),
            c => out.push(c),
        }
    }
    out.push(b'"');
    out
}

/// Whether a variable is on the allowlist (its name only).
pub fn allowed((section, sub, key): &Var) -> bool {
    matches!(
        (&section[..], sub.is_some(), &key[..]),
        (b"user", false, b"name" | b"email")
            | (b"remote", true, b"url" | b"pushurl" | b"fetch")
            | (b"branch", true, b"remote" | b"merge")
    )
}

/// Whether `value` passes its allowlisted variable's rule; `remotes` are the remotes the
/// host's config will name (`remote.<name>.url`).
pub fn valid((section, sub, key): &Var, value: Option<&[u8]>, remotes: &BTreeSet<Vec<u8>>) -> bool {
    let Some(v) = value else {
        return false;
    };
    let sub = sub.as_deref().unwrap_or_default();
    match (&section[..], &key[..]) {
        (b"user", b"name") => plain(v, 256) && !v.iter().any(|c| matches!(c, b'<' | b'>')),
        (b"user", b"email") => plain(v, 256) && !v.iter().any(|c| matches!(c, b'<' | b'>' | b' ')),
        (b"remote", b"url" | b"pushurl") => remote_name(sub) && url(v),
        (b"remote", b"fetch") => remote_name(sub) && refspec(v, sub),
        (b"branch", b"remote") => {
            branch_name(sub) && (v == b"." || (remote_name(v) && remotes.contains(v)))
        }
        (b"branch", b"merge") => branch_name(sub) && v.starts_with(b"refs/") && refname(v),
        _ => false,
    }
}

/// Printable UTF-8 of 1 to `max` bytes, no control character, not blank at either end.
fn plain(v: &[u8], max: usize) -> bool {
    !v.is_empty()
        && v.len() <= max
        && std::str::from_utf8(v).is_ok_and(|s| !s.chars().any(char::is_control))
        && !v.first().is_some_and(|c| blank(*c))
        && !v.last().is_some_and(|c| blank(*c))
}

fn refname(v: &[u8]) -> bool {
    v.len() <= 1024 && super::refs::refname(v).is_ok()
}

/// Git's `valid_remote_name` (`refs/remotes/<name>/x` a valid ref name), no `"`.
pub fn remote_name(n: &[u8]) -> bool {
    !n.is_empty() && !n.contains(&b'"') && refname(&[b"refs/remotes/", n, b"/x"].concat())
}

/// A branch name git takes (`refs/heads/<name>`), no `"`.
fn branch_name(n: &[u8]) -> bool {
    !n.is_empty() && !n.contains(&b'"') && refname(&[b"refs/heads/", n].concat())
}

/// A fetch refspec `[+]refs/<src>:refs/remotes/<remote>/<dst>`, each side a valid ref name
/// with at most one `*`, in both sides or neither.
fn refspec(v: &[u8], remote: &[u8]) -> bool {
    if !plain(v, 1024) {
        return false;
    }
    let v = v.strip_prefix(b"+").unwrap_or(v);
    let Some(colon) = v.iter().position(|&c| c == b':') else {
        return false;
    };
    let (src, dst) = (&v[..colon], &v[colon + 1..]);
    let stars = |s: &[u8]| s.iter().filter(|&&c| c == b'*').count();
    let pattern = |s: &[u8]| {
        let s: Vec<u8> = s
            .iter()
            .map(|&c| if c == b'*' { b'x' } else { c })
            .collect();
        refname(&s)
    };
    let prefix = [b"refs/remotes/", remote, b"/"].concat();
    stars(src) <= 1
        && stars(src) == stars(dst)
        && pattern(src)
        && pattern(dst)
        && dst.starts_with(&prefix)
        && dst.len() > prefix.len()
}

/// A remote URL the host's git may use: `https://`, `ssh://` or `git://` with a plain host,
/// or scp-like `[user@]host:path`. Never a transport helper (`::`), `file://`, a local path,
/// a leading `-`, a blank, a control character (also `%`-encoded), or a password.
pub fn url(v: &[u8]) -> bool {
    if !plain(v, 2048)
        || v[0] == b'-'
        || v.iter().any(|&c| c == b' ' || c == b'\\' || !c.is_ascii())
        || v.windows(2).any(|w| w == b"::")
        || !percent_plain(v)
    {
        return false;
    }
    for scheme in [&b"https://"[..], b"ssh://", b"git://"] {
        if let Some(rest) = v.strip_prefix(scheme) {
            let end = rest.iter().position(|&c| c == b'/').unwrap_or(rest.len());
            let (auth, path) = rest.split_at(end);
            let hostport = match auth.iter().rposition(|&c| c == b'@') {
                Some(at) => {
                    if !user(&auth[..at]) {
                        return false;
                    }
                    &auth[at + 1..]
                }
                None => auth,
            };
            let (h, port) = match hostport.iter().position(|&c| c == b':') {
                Some(c) => (&hostport[..c], Some(&hostport[c + 1..])),
                None => (hostport, None),
            };
            return host(h)
                && port.is_none_or(|p| {
                    !p.is_empty() && p.len() <= 5 && p.iter().all(u8::is_ascii_digit)
                })
                && !path.starts_with(b"//");
        }
    }
    if v.windows(3).any(|w| w == b"://") {
        return false;
    }
    // scp-like: a `:` before any `/` (git reads anything else as a local path).
    let Some(colon) = v.iter().position(|&c| c == b':') else {
        return false;
    };
    if v[..colon].contains(&b'/') {
        return false;
    }
    let (auth, path) = (&v[..colon], &v[colon + 1..]);
    let h = match auth.iter().rposition(|&c| c == b'@') {
        Some(at) if user(&auth[..at]) => &auth[at + 1..],
        Some(_) => return false,
        None => auth,
    };
    host(h) && !path.is_empty() && path[0] != b'-'
}

/// A host name: letters, digits, `.`, `-`, `_`, starting with a letter or digit.
fn host(h: &[u8]) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h[0].is_ascii_alphanumeric()
        && h.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
}

/// A user name in a URL: letters, digits, `.`, `_`, `~`, `-`, not starting with `-`; no
/// password (`:`).
fn user(u: &[u8]) -> bool {
    !u.is_empty()
        && u.len() <= 64
        && u[0] != b'-'
        && u.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'~' | b'-'))
}

/// Every `%` starts a `%XX` escape that decodes to a printable character.
fn percent_plain(v: &[u8]) -> bool {
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'%' {
            let Some(hex) = v.get(i + 1..i + 3) else {
                return false;
            };
            let Some(b) = std::str::from_utf8(hex)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
            else {
                return false;
            };
            if !(0x20..0x7f).contains(&b) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// Merges the upper layer's `config` into the host's (`path` names it, for the report):
/// the program's file read once (bounded), the host's `config.lock` taken (git's own lock,
/// `O_EXCL | O_NOFOLLOW`), the host's config read under it, the merged text written to
/// the lock and renamed over the config. Returns every changed variable, and `Err` when
/// nothing could be merged.
pub(super) fn merge_file(
    upper: &OwnedFd,
    host: &OwnedFd,
    path: &Path,
) -> (Vec<GitConfigChange>, R) {
    let name = OsStr::new("config");
    let program = match load(upper, name, MAX_CONFIG) {
        Ok((data, _)) => data,
        Err(GitDropReason::TooLarge) => return (Vec::new(), Err(GitDropReason::UnreadableConfig)),
        Err(e) => return (Vec::new(), Err(e)),
    };
    let lock = OsStr::new("config.lock");
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match openat(host, lock, flags, Mode::from_bits_truncate(0o600)) {
        Ok(fd) => fd,
        Err(Errno::EEXIST) => return (Vec::new(), Err(GitDropReason::Locked)),
        Err(e) => return (Vec::new(), Err(failed(e))),
    };
    let (changes, r) = under_lock(fd, host, &program, path);
    if r.is_err()
        || !changes
            .iter()
            .any(|c| c.outcome == GitConfigOutcome::Merged)
    {
        let _ = unlinkat(host, lock, UnlinkatFlags::NoRemoveDir);
    }
    (changes, r)
}

/// [`merge_file`] once `config.lock` (`fd`) is held.
fn under_lock(
    fd: OwnedFd,
    host: &OwnedFd,
    program: &[u8],
    path: &Path,
) -> (Vec<GitConfigChange>, R) {
    let name = OsStr::new("config");
    let (text, mode) = match fstatat(host, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => (Vec::new(), 0o644),
        Err(e) => return (Vec::new(), Err(failed(e))),
        Ok(st) if st.st_mode & libc::S_IFMT != libc::S_IFREG => {
            return (Vec::new(), Err(GitDropReason::NotAFile));
        }
        Ok(st) => match read_host(host, name, MAX_CONFIG) {
            Some(t) => (t, st.st_mode & 0o777),
            None => return (Vec::new(), Err(GitDropReason::UnreadableConfig)),
        },
    };
    let merged = match merge(&text, program) {
        Ok(m) => m,
        Err(_) => return (Vec::new(), Err(GitDropReason::UnreadableConfig)),
    };
    let changes = merged
        .changes
        .iter()
        .map(|c| GitConfigChange {
            path: path.to_path_buf(),
            name: String::from_utf8_lossy(&c.name).into_owned(),
            outcome: c.outcome.public(),
        })
        .collect();
    let Some(new) = merged.text else {
        return (changes, Ok(()));
    };
    let mut file = File::from(fd);
    let r = io::Write::write_all(&mut file, &new)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
        .and_then(|()| {
            // No write for others, whatever the host's file had.
            fchmod(
                &file,
                Mode::from_bits_truncate((mode & 0o775) as libc::mode_t),
            )
        })
        .and_then(|()| renameat(host, OsStr::new("config.lock"), host, name));
    match r {
        Ok(()) => (changes, Ok(())),
        // Nothing merged: only the refused changes are listed.
        Err(e) => (
            changes
                .into_iter()
                .filter(|c| c.outcome != GitConfigOutcome::Merged)
                .collect(),
            Err(failed(e)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(text: &[u8]) -> Vec<(String, Option<String>)> {
        let p = parse(text).unwrap();
        p.entries
            .iter()
            .map(|e| {
                let v = p.var(e);
                (
                    String::from_utf8(name_of(&v)).unwrap(),
                    e.value
                        .as_ref()
                        .map(|x| String::from_utf8_lossy(x).into_owned()),
                )
            })
            .collect()
    }

    fn one(name: &str, value: Option<&str>) -> Vec<(String, Option<String>)> {
        vec![(name.to_string(), value.map(str::to_string))]
    }

    #[test]
    fn values_read_as_git_reads_them() {
        for (text, name, value) in [
            ("[user]\n\tname = A B\n", "user.name", Some("A B")),
            ("[user]\nname=  A B  # c\n", "user.name", Some("A B")),
            (
                "[user]\nname = \"A # B \" ; c\n",
                "user.name",
                Some("A # B "),
            ),
            ("[user]\nname = a\\\n b\n", "user.name", Some("a b")),
            (
                "[user]\nname = a\\tb\\\\\\\"\n",
                "user.name",
                Some("a\tb\\\""),
            ),
            ("[User]\nNAME = x", "user.name", Some("x")),
            ("[core]\nbare\n", "core.bare", None),
            (
                "[remote \"o\\\"r\"]\nurl = u\n",
                "remote.o\"r.url",
                Some("u"),
            ),
            ("[remote \"Or\"] url = u\r\n", "remote.Or.url", Some("u")),
            ("\u{feff}[a]\nb = c\n", "a.b", Some("c")),
            ("; c\n# c\n  [a]  # c\n\tb = c", "a.b", Some("c")),
            ("[a]\nb = x;y\n", "a.b", Some("x")),
            ("[a]\nb = \n", "a.b", Some("")),
        ] {
            assert_eq!(vals(text.as_bytes()), one(name, value), "{text:?}");
        }
    }

    #[test]
    fn anything_doubtful_refuses_the_whole_file() {
        for text in [
            &b"[a]\nb = \"x\n"[..],
            b"[a]\nb = \\q\n",
            b"[a.b]\nc = d\n",
            b"[a \"b\"x]\n",
            b"[a \"b\n\"]\n",
            b"[a\n",
            b"[]\n",
            b"b = c\n",
            b"[a]\n1b = c\n",
            b"[a]\nb c\n",
            b"[a]\nb = c\0\n",
            b"[a]\nb = c\rd\n",
            b"[a]\nb = \x1b[31m\n",
            b"[a]\n\x7f\n",
            b"x [a]\n",
            b"[a] [b]\n",
        ] {
            assert!(
                parse(text).is_err(),
                "{:?}: {:?}",
                String::from_utf8_lossy(text),
                parse(text)
            );
        }
        assert!(parse(&vec![b'#'; MAX_CONFIG + 1]).is_err());
    }

    const HOST: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n# the host's own comment\n[user]\n\tname = Host\n";

    fn merged(program: &str) -> (String, Vec<(String, Outcome)>) {
        let m = merge(HOST.as_bytes(), program.as_bytes()).unwrap();
        let changes = m
            .changes
            .iter()
            .map(|c| (String::from_utf8(c.name.clone()).unwrap(), c.outcome))
            .collect();
        let text = m
            .text
            .map_or(HOST.to_string(), |t| String::from_utf8(t).unwrap());
        (text, changes)
    }

    #[test]
    fn allowlisted_changes_merge_and_the_rest_of_the_host_stays_byte_for_byte() {
        let (text, changes) = merged(&format!(
            "{HOST}\temail = a@example.com\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n[core]\n\tfsmonitor = evil\n[alias]\n\tx = !sh\n[include]\n\tpath = /tmp/x\n"
        ));
        assert_eq!(
            text,
            format!(
                "{HOST}\temail = a@example.com\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n"
            )
        );
        let refused: Vec<_> = changes
            .iter()
            .filter(|c| c.1 != Outcome::Merged)
            .map(|c| c.0.as_str())
            .collect();
        assert_eq!(refused, ["alias.x", "core.fsmonitor", "include.path"]);
    }

    #[test]
    fn a_changed_value_replaces_the_hosts_in_place_and_a_removed_one_goes() {
        let (text, _) = merged(&HOST.replace("Host", "\"New # one\""));
        assert_eq!(
            text,
            HOST.replace("\tname = Host", "\tname = \"New # one\"")
        );
        let (text, c) = merged(&HOST.replace("\tname = Host\n", ""));
        assert_eq!(text, HOST.replace("\tname = Host\n", ""));
        assert_eq!(c, [("user.name".to_string(), Outcome::Merged)]);
        // On the header's line: the header stays.
        let host = "[user] name = a\n[core]\n\tbare = false\n";
        let m = merge(host.as_bytes(), b"[user]\n[core]\n\tbare = false\n").unwrap();
        assert_eq!(m.text.unwrap(), b"[user] \n[core]\n\tbare = false\n");
    }

    #[test]
    fn hostile_values_are_dropped() {
        for (key, value) in [
            ("remote \"evil\"]\n\turl", "ext::sh -c touch% /tmp/pwned"),
            ("remote \"evil\"]\n\turl", "fd::17"),
            ("remote \"evil\"]\n\turl", "file:///etc"),
            ("remote \"evil\"]\n\turl", "/srv/repo.git"),
            ("remote \"evil\"]\n\turl", "../repo"),
            ("remote \"evil\"]\n\turl", "-oProxyCommand=sh"),
            ("remote \"evil\"]\n\turl", "ssh://-oProxyCommand=sh/x"),
            ("remote \"evil\"]\n\turl", "-u:x"),
            ("remote \"evil\"]\n\turl", "host:-x"),
            ("remote \"evil\"]\n\turl", "https://u:token@example.com/r"),
            ("remote \"evil\"]\n\turl", "https://example.com/r%0a"),
            ("remote \"evil\"]\n\turl", "https://example.com/r\\n"),
            ("remote \"evil\"]\n\turl", "http://example.com/r"),
            ("remote \"evil\"]\n\turl", "git+ssh://example.com/r"),
            ("remote \"evil\"]\n\turl", "https://exa mple.com/r"),
            ("remote \"evil\"]\n\tpushurl", "transport::x"),
            ("remote \"-evil\"]\n\turl", "https://example.com/r"),
            ("remote \"a..b\"]\n\turl", "https://example.com/r"),
            ("remote \"o\"]\n\tfetch", "+refs/heads/*:refs/heads/*"),
            (
                "remote \"o\"]\n\tfetch",
                "refs/heads/*:refs/remotes/other/*",
            ),
            ("remote \"o\"]\n\tfetch", "refs/heads/*:refs/remotes/o/x"),
            ("remote \"o\"]\n\tfetch", "refs/heads/x"),
            ("remote \"o\"]\n\tfetch", "^refs/heads/x"),
            ("branch \"main\"]\n\tremote", "nowhere"),
            ("branch \"main\"]\n\tmerge", "main"),
            ("branch \"main\"]\n\tmerge", "refs/heads/a..b"),
            ("branch \"-x\"]\n\tmerge", "refs/heads/x"),
            ("user]\n\temail", "a <b@c>"),
            ("user]\n\tname", "a\\nb"),
            ("user]\n\tname", "a\\bb"),
        ] {
            let (text, changes) = merged(&format!("{HOST}[{key} = {value}\n"));
            assert_eq!(text, HOST, "{key} = {value}");
            assert!(
                changes.iter().all(|c| c.1 == Outcome::Invalid),
                "{key} = {value}: {changes:?}"
            );
        }
        for key in [
            "core]\n\tfsmonitor",
            "core]\n\thooksPath",
            "core]\n\tsshCommand",
            "include]\n\tpath",
            "includeIf \"gitdir:/\"]\n\tpath",
            "credential]\n\thelper",
            "alias]\n\tst",
            "user]\n\tsigningkey",
            "remote \"o\"]\n\tuploadpack",
            "remote \"o\"]\n\treceivepack",
            "remote \"o\"]\n\tvcs",
            "gpg]\n\tprogram",
            "filter \"x\"]\n\tclean",
            "url \"ext::sh\"]\n\tinsteadOf",
        ] {
            let (text, changes) = merged(&format!("{HOST}[{key} = x\n"));
            assert_eq!(text, HOST, "{key}");
            assert_eq!(changes.len(), 1, "{key}");
            assert_eq!(changes[0].1, Outcome::NotAllowed, "{key}");
        }
    }

    #[test]
    fn plain_urls_and_names_pass() {
        for u in [
            "https://example.com/r.git",
            "https://example.com:8443/a/b",
            "ssh://git@example.com/r.git",
            "ssh://git@example.com:2222/~/r.git",
            "git://example.com/r",
            "git@github.com:owner/repo.git",
            "example.com:repo",
            "https://example.com/a%20b",
        ] {
            assert!(url(u.as_bytes()), "{u}");
        }
        for n in ["origin", "up-stream", "a/b", "x.y"] {
            assert!(remote_name(n.as_bytes()), "{n}");
        }
        let remotes = BTreeSet::from([b"origin".to_vec()]);
        let var = |s: &str, sub: &str, k: &str| {
            (
                s.as_bytes().to_vec(),
                Some(sub.as_bytes().to_vec()),
                k.as_bytes().to_vec(),
            )
        };
        assert!(valid(
            &var("branch", "feature/x", "remote"),
            Some(b"."),
            &remotes
        ));
        assert!(valid(
            &var("branch", "main", "remote"),
            Some(b"origin"),
            &remotes
        ));
        assert!(valid(
            &var("remote", "origin", "fetch"),
            Some(b"refs/heads/main:refs/remotes/origin/main"),
            &remotes
        ));
    }

    #[test]
    fn a_branch_may_name_a_remote_added_in_the_same_run_but_not_a_refused_one() {
        let (text, changes) = merged(&format!(
            "{HOST}[remote \"up\"]\n\turl = git@example.com:r.git\n[branch \"a\"]\n\tremote = up\n[remote \"evil\"]\n\turl = ext::sh\n[branch \"b\"]\n\tremote = evil\n"
        ));
        assert!(
            text.contains("[remote \"up\"]\n\turl = git@example.com:r.git\n"),
            "{text}"
        );
        assert!(text.contains("[branch \"a\"]\n\tremote = up\n"), "{text}");
        assert!(!text.contains("evil"), "{text}");
        assert!(changes.contains(&("branch.b.remote".to_string(), Outcome::Invalid)));
    }

    #[test]
    fn a_remote_whose_url_is_refused_gets_none_of_its_keys() {
        let (text, changes) = merged(&format!(
            "{HOST}[remote \"evil\"]\n\turl = ext::sh -c x\n\tfetch = +refs/heads/*:refs/remotes/evil/*\n[remote \"bare\"]\n\tfetch = +refs/heads/*:refs/remotes/bare/*\n"
        ));
        assert_eq!(text, HOST);
        assert!(
            changes.iter().all(|c| c.1 == Outcome::Invalid),
            "{changes:?}"
        );
    }

    #[test]
    fn git_remote_remove_removes_the_remote() {
        let host = "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.com/r\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
        let m = merge(host.as_bytes(), b"[core]\n\tbare = false\n").unwrap();
        assert_eq!(
            String::from_utf8(m.text.unwrap()).unwrap(),
            "[core]\n\tbare = false\n[remote \"origin\"]\n[branch \"main\"]\n"
        );
        assert!(m.changes.iter().all(|c| c.outcome == Outcome::Merged));
    }

    /// Every truncation and every single-byte change (to a byte the grammar cares about)
    /// of a config with every construct: never a panic, two readable configs always merge,
    /// what merges is on the allowlist, and merging again changes nothing.
    #[test]
    fn every_small_mutation_gives_a_clean_answer() {
        let seed = format!(
            "{HOST}[user] email = \"a \\\" b\" ; c\n[remote \"o\"]\n\turl = git@e.com:r.git\n\tfetch = +refs/heads/*:refs/remotes/o/*\n[branch \"m\"]\n\tremote = o\n\tmerge = refs/heads/m\\\n\n[include]\n\tpath = x\n"
        );
        let seed = seed.as_bytes();
        let check = |program: &[u8]| {
            let Ok(m) = merge(HOST.as_bytes(), program) else {
                assert!(
                    parse(program).is_err(),
                    "{:?}",
                    String::from_utf8_lossy(program)
                );
                return;
            };
            for c in m.changes.iter().filter(|c| c.outcome == Outcome::Merged) {
                let n = String::from_utf8_lossy(&c.name);
                assert!(
                    n == "user.name"
                        || n == "user.email"
                        || n.starts_with("remote.")
                        || n.starts_with("branch."),
                    "{n}"
                );
            }
            if let Some(text) = m.text {
                let again = merge(&text, program).unwrap();
                assert!(again.text.is_none(), "{:?}", String::from_utf8_lossy(&text));
            }
        };
        for n in 0..=seed.len() {
            check(&seed[..n]);
        }
        for i in 0..seed.len() {
            for b in *b"\"\\\n#;[] =\t\r\0.-:*+@/x" {
                let mut m = seed.to_vec();
                m[i] = b;
                check(&m);
            }
        }
    }

    /// A config of the largest size, made of new remotes: merged in well under a second
    /// (nothing quadratic in the program's variables).
    #[test]
    fn a_config_of_many_remotes_merges_in_linear_time() {
        let mut program = HOST.as_bytes().to_vec();
        let mut n = 0;
        while program.len() < MAX_CONFIG - 64 {
            program.extend_from_slice(format!("[remote \"r{n}\"]\n\turl = h:{n}\n").as_bytes());
            n += 1;
        }
        let t = std::time::Instant::now();
        let m = merge(HOST.as_bytes(), &program).unwrap();
        assert_eq!(m.changes.len(), n);
        assert!(m.changes.iter().all(|c| c.outcome == Outcome::Merged));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_host_config_without_a_final_newline_gets_one() {
        let m = merge(
            b"[user]\n\tname = a",
            b"[user]\n\tname = a\n\temail = e@x\n",
        )
        .unwrap();
        assert_eq!(m.text.unwrap(), b"[user]\n\tname = a\n\temail = e@x\n");
        let m = merge(b"[core]\n\tbare = false", b"[user]\n\temail = e@x\n").unwrap();
        assert_eq!(
            m.text.unwrap(),
            b"[core]\n\tbare = false\n[user]\n\temail = e@x\n"
        );
    }
}
