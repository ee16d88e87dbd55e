//! git's rules for the ref files the merge takes back: pure functions over the bytes the
//! program wrote, as strict as git is with its own writes.
//!
//! # Why
//!
//! Git on the host trusts `HEAD`, the loose refs, `packed-refs` and the `*_HEAD` files of
//! its own repository. A `HEAD` that is not one (`not a ref`) makes git take `.git` for no
//! repository and walk up to an enclosing one, where `git reset --hard` then wipes files
//! outside the workspace; a ref under `refs/replace/` makes `git show v1:a` print other
//! content while `git fsck` passes; a ref name with `..`, `@{` or control characters
//! confuses every tool that prints or parses it. So every such file is checked against
//! what git itself writes, and anything else stays out, reported.
//!
//! # The rules
//!
//! - A ref name passes git's `check_refname_format` (`refs.c`): components separated by
//!   `/`, none empty, none starting with `.` or ending with `.lock`, no `..`, no `@{`, no
//!   control character, space, `:`, `?`, `[`, `\`, `^`, `~`, `*`, not ending with `.`, and
//!   not `@`. It also lies under `refs/` with at least one more component, no component
//!   starts with `-` (git refuses such branch and tag names: they read as options), and it
//!   is not `refs/heads/HEAD` (git refuses that branch name).
//! - A loose ref or `HEAD` is `<oid>\n` or `ref: <name>\n`, as git writes them: an object
//!   id of the repository's hash (40 lowercase hex digits for SHA-1, 64 for SHA-256, from
//!   the host's config), or a symbolic ref to a valid name.
//! - `packed-refs`: an optional first line `# pack-refs with: <traits>`, then lines
//!   `<oid> <name>`, each optionally followed by one `^<oid>` line (the peeled tag), every
//!   line ending in `\n`.
//! - `ORIG_HEAD`, `CHERRY_PICK_HEAD`, `REVERT_HEAD`, `AUTO_MERGE` and every other
//!   `*_HEAD`: one `<oid>\n`. `MERGE_HEAD`: one or more of them. `FETCH_HEAD`: lines
//!   `<oid>\t[not-for-merge]\t<description>\n`, the description printable text.
//!
//! Each check reads only the slice it is given: no length field is trusted, nothing is
//! allocated beyond the input's size.

/// What a file of `.git` that names objects is, for [`check_top`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::process) enum RefFile {
    /// `HEAD`.
    Head,
    /// `packed-refs`.
    Packed,
    /// `FETCH_HEAD`.
    FetchHead,
    /// `MERGE_HEAD`.
    MergeHead,
    /// `AUTO_MERGE` and every other `*_HEAD`: one object id.
    Oid,
}

impl RefFile {
    /// The kind of the top-level `.git` file `name`, or `None` when it holds no ref
    /// (the index, the messages).
    pub(in crate::process) fn of(name: &[u8]) -> Option<RefFile> {
        match name {
            b"HEAD" => Some(RefFile::Head),
            b"packed-refs" => Some(RefFile::Packed),
            b"FETCH_HEAD" => Some(RefFile::FetchHead),
            b"MERGE_HEAD" => Some(RefFile::MergeHead),
            b"AUTO_MERGE" => Some(RefFile::Oid),
            // `[A-Z_]+_HEAD`, as git names its pseudo-refs (and `classify::top` takes them).
            n if n.len() > 5
                && n.ends_with(b"_HEAD")
                && n.iter().all(|b| b.is_ascii_uppercase() || *b == b'_') =>
            {
                Some(RefFile::Oid)
            }
            _ => None,
        }
    }
}

/// Why the bytes of a ref file are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::process) struct Invalid(pub(in crate::process) &'static str);

type R = Result<(), Invalid>;

/// One line of `packed-refs`: the object id and the ref name.
pub(in crate::process) type Packed<'a> = (&'a [u8], &'a [u8]);

/// The object ids of a hash of `hash` bytes are `2 * hash` lowercase hex digits.
fn oid(text: &[u8], hash: usize) -> R {
    if text.len() != hash.saturating_mul(2) || hash == 0 {
        return Err(Invalid("not an object id of the repository's hash"));
    }
    if text
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        Ok(())
    } else {
        Err(Invalid("not an object id (lowercase hex)"))
    }
}

/// Whether `name` is a ref name git would write under `refs/` (see the module docs).
pub(in crate::process) fn refname(name: &[u8]) -> R {
    if name == b"@" {
        return Err(Invalid("ref name @"));
    }
    let Some(rest) = name.strip_prefix(b"refs/") else {
        return Err(Invalid("ref name outside refs/"));
    };
    if rest.is_empty() {
        return Err(Invalid("ref name refs/ alone"));
    }
    if name == b"refs/heads/HEAD" {
        return Err(Invalid("branch named HEAD"));
    }
    if name.last() == Some(&b'.') {
        return Err(Invalid("ref name ends with ."));
    }
    for part in name.split(|b| *b == b'/') {
        component(part)?;
    }
    Ok(())
}

/// One component of a ref name (`check_refname_component`, plus no leading `-`).
pub(in crate::process) fn component(part: &[u8]) -> R {
    match part.first() {
        None => return Err(Invalid("empty ref name component")),
        Some(b'.') => return Err(Invalid("ref name component starts with .")),
        Some(b'-') => return Err(Invalid("ref name component starts with -")),
        Some(_) => {}
    }
    if part.ends_with(b".lock") {
        return Err(Invalid("ref name component ends with .lock"));
    }
    let mut last = 0u8;
    for &b in part {
        match b {
            0..=0x20 | 0x7f | b':' | b'?' | b'[' | b'\\' | b'^' | b'~' | b'*' => {
                return Err(Invalid("forbidden character in a ref name"));
            }
            b'/' => return Err(Invalid("/ inside a component")),
            b'.' if last == b'.' => return Err(Invalid("ref name contains ..")),
            b'{' if last == b'@' => return Err(Invalid("ref name contains @{")),
            _ => {}
        }
        last = b;
    }
    Ok(())
}

/// The contents of the loose ref (or `HEAD`): `<oid>\n` or `ref: <valid name>\n`.
pub(in crate::process) fn loose(data: &[u8], hash: usize) -> R {
    let line = data
        .strip_suffix(b"\n")
        .ok_or(Invalid("a ref without its newline"))?;
    match line.strip_prefix(b"ref: ") {
        Some(target) => refname(target),
        None => oid(line, hash),
    }
}

/// `MERGE_HEAD`: one or more `<oid>\n` lines. Any other `*_HEAD` and `AUTO_MERGE`
/// (`many` false): exactly one.
pub(in crate::process) fn oid_lines(data: &[u8], hash: usize, many: bool) -> R {
    let body = data
        .strip_suffix(b"\n")
        .ok_or(Invalid("an object id without its newline"))?;
    let mut count = 0usize;
    for line in body.split(|b| *b == b'\n') {
        oid(line, hash)?;
        count += 1;
    }
    if count > 1 && !many {
        return Err(Invalid("more than one object id"));
    }
    Ok(())
}

/// `FETCH_HEAD`: lines `<oid>\t\t<description>` or `<oid>\tnot-for-merge\t<description>`,
/// the description free of control characters (it reaches merge messages and terminals).
/// Empty after a fetch of nothing.
pub(in crate::process) fn fetch_head(data: &[u8], hash: usize) -> R {
    if data.is_empty() {
        return Ok(());
    }
    let body = data
        .strip_suffix(b"\n")
        .ok_or(Invalid("a FETCH_HEAD line without its newline"))?;
    for line in body.split(|b| *b == b'\n') {
        let mut fields = line.splitn(3, |b| *b == b'\t');
        let (Some(id), Some(flag), Some(desc)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(Invalid("a FETCH_HEAD line without its three fields"));
        };
        oid(id, hash)?;
        if !flag.is_empty() && flag != b"not-for-merge" {
            return Err(Invalid("a FETCH_HEAD line with an unknown flag"));
        }
        if desc.iter().any(|b| *b < 0x20 || *b == 0x7f) {
            return Err(Invalid("a control character in a FETCH_HEAD description"));
        }
    }
    Ok(())
}

/// The lines of a `packed-refs` file that parses as git's format: `(oid, name)` of each
/// ref, each checked. Peeled lines (`^<oid>`) are checked and skipped.
pub(in crate::process) fn packed(data: &[u8], hash: usize) -> Result<Vec<Packed<'_>>, Invalid> {
    let mut refs = Vec::new();
    if data.is_empty() {
        return Ok(refs);
    }
    let body = data
        .strip_suffix(b"\n")
        .ok_or(Invalid("packed-refs: unterminated line"))?;
    let mut peelable = false;
    for (i, line) in body.split(|b| *b == b'\n').enumerate() {
        if let Some(traits) = line.strip_prefix(b"# pack-refs with:") {
            if i != 0 {
                return Err(Invalid("packed-refs: a header after the first line"));
            }
            if traits.iter().any(|b| !b.is_ascii_graphic() && *b != b' ') {
                return Err(Invalid("packed-refs: a control character in the header"));
            }
            continue;
        }
        if let Some(peeled) = line.strip_prefix(b"^") {
            if !peelable {
                return Err(Invalid("packed-refs: a peeled line without its ref"));
            }
            oid(peeled, hash)?;
            peelable = false;
            continue;
        }
        let split = memchr::memchr(b' ', line).ok_or(Invalid("packed-refs: not a ref line"))?;
        let (id, name) = (line.get(..split), line.get(split + 1..));
        let (Some(id), Some(name)) = (id, name) else {
            return Err(Invalid("packed-refs: not a ref line"));
        };
        oid(id, hash)?;
        refname(name)?;
        refs.push((id, name));
        peelable = true;
    }
    Ok(refs)
}

/// Checks the bytes of the top-level `.git` file of kind `kind`, for a repository whose
/// object ids have `hash` bytes.
pub(in crate::process) fn check_top(kind: RefFile, data: &[u8], hash: usize) -> R {
    match kind {
        RefFile::Head => loose(data, hash),
        RefFile::Packed => packed(data, hash).map(drop),
        RefFile::FetchHead => fetch_head(data, hash),
        RefFile::MergeHead => oid_lines(data, hash, true),
        RefFile::Oid => oid_lines(data, hash, false),
    }
}

/// Whether the ref name `name` is a replacement (`refs/replace/…`), which makes git
/// read other content for an object.
pub(in crate::process) fn is_replace(name: &[u8]) -> bool {
    name.starts_with(b"refs/replace/")
}

/// `packed-refs` without the replacement refs that the host's (`host`) does not list
/// with the same object, their peeled lines with them; `None` when nothing is left out.
pub(in crate::process) fn without_new_replacements(data: &[u8], host: &[u8]) -> Option<Vec<u8>> {
    let kept = |line: &[u8]| host.split(|b| *b == b'\n').any(|h| h == line);
    let mut out = Vec::with_capacity(data.len());
    let mut skipping = false;
    let mut changed = false;
    for line in data.split_inclusive(|b| *b == b'\n') {
        let bare = line.strip_suffix(b"\n").unwrap_or(line);
        if bare.starts_with(b"^") {
            if !skipping {
                out.extend_from_slice(line);
            }
            continue;
        }
        let name = memchr::memchr(b' ', bare).and_then(|i| bare.get(i + 1..));
        skipping = name.is_some_and(is_replace) && !kept(bare);
        if skipping {
            changed = true;
        } else {
            out.extend_from_slice(line);
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn ref_names_follow_gits_rules() {
        for ok in [
            "refs/heads/main",
            "refs/heads/feature/x-1",
            "refs/tags/v1.0",
            "refs/remotes/origin/HEAD",
            "refs/stash",
            "refs/heads/a.b",
            "refs/heads/a@b",
            "refs/heads/ü",
            "refs/heads/x.lockx",
            "refs/notes/commits",
        ] {
            assert_eq!(refname(ok.as_bytes()), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "@",
            "HEAD",
            "main",
            "refs",
            "refs/",
            "refs//heads",
            "refs/heads/",
            "/refs/heads/x",
            "refs/heads/a..b",
            "refs/heads/..",
            "refs/heads/.hidden",
            "refs/heads/a/.b",
            "refs/heads/x.lock",
            "refs/heads/x.lock/y",
            "refs/heads/x.",
            "refs/heads/a@{1}",
            "refs/heads/@{",
            "refs/heads/-x",
            "refs/tags/-rf",
            "refs/heads/HEAD",
            "refs/heads/a b",
            "refs/heads/a\tb",
            "refs/heads/a\nb",
            "refs/heads/a\x1b[31m",
            "refs/heads/a\x7f",
            "refs/heads/a\0b",
            "refs/heads/a:b",
            "refs/heads/a?",
            "refs/heads/a[",
            "refs/heads/a\\b",
            "refs/heads/a^",
            "refs/heads/a~1",
            "refs/heads/*",
            "refs/heads/a/../../../config",
        ] {
            assert!(refname(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn loose_refs_and_head_are_an_oid_or_a_symbolic_ref() {
        let sha256 = "0123456789abcdef".repeat(4);
        for ok in [
            format!("{A}\n"),
            "ref: refs/heads/main\n".to_string(),
            "ref: refs/remotes/origin/main\n".to_string(),
        ] {
            assert_eq!(loose(ok.as_bytes(), 20), Ok(()), "{ok:?}");
        }
        assert_eq!(loose(format!("{sha256}\n").as_bytes(), 32), Ok(()));
        for bad in [
            String::new(),
            "\n".to_string(),
            "not a ref".to_string(),
            "not a ref\n".to_string(),
            A.to_string(),
            format!("{A}\n\n"),
            format!("{A} \n"),
            format!("{}\n", A.to_uppercase()),
            format!("{}\n", &A[..39]),
            format!("{A}0\n"),
            format!("{sha256}\n"),
            "ref: refs/heads/main".to_string(),
            "ref:refs/heads/main\n".to_string(),
            "ref: refs/heads/main\nx\n".to_string(),
            "ref:  refs/heads/main\n".to_string(),
            "ref: HEAD\n".to_string(),
            "ref: ../../etc\n".to_string(),
            "ref: refs/heads/a..b\n".to_string(),
            "gitdir: /elsewhere\n".to_string(),
        ] {
            assert!(loose(bad.as_bytes(), 20).is_err(), "{bad:?}");
        }
        assert!(loose(format!("{A}\n").as_bytes(), 32).is_err());
    }

    #[test]
    fn head_files_hold_object_ids() {
        let one = format!("{A}\n");
        let two = format!("{A}\n{A}\n");
        assert_eq!(check_top(RefFile::Oid, one.as_bytes(), 20), Ok(()));
        assert!(check_top(RefFile::Oid, two.as_bytes(), 20).is_err());
        assert_eq!(check_top(RefFile::MergeHead, two.as_bytes(), 20), Ok(()));
        for bad in ["", "\n", "x\n", "ref: refs/heads/main\n"] {
            assert!(
                check_top(RefFile::MergeHead, bad.as_bytes(), 20).is_err(),
                "{bad:?}"
            );
            assert!(
                check_top(RefFile::Oid, bad.as_bytes(), 20).is_err(),
                "{bad:?}"
            );
        }
        assert!(check_top(RefFile::MergeHead, format!("{A}\n\n{A}\n").as_bytes(), 20).is_err());
        assert_eq!(RefFile::of(b"ORIG_HEAD"), Some(RefFile::Oid));
        assert_eq!(RefFile::of(b"CHERRY_PICK_HEAD"), Some(RefFile::Oid));
        assert_eq!(RefFile::of(b"AUTO_MERGE"), Some(RefFile::Oid));
        assert_eq!(RefFile::of(b"MERGE_HEAD"), Some(RefFile::MergeHead));
        assert_eq!(RefFile::of(b"FETCH_HEAD"), Some(RefFile::FetchHead));
        assert_eq!(RefFile::of(b"HEAD"), Some(RefFile::Head));
        assert_eq!(RefFile::of(b"index"), None);
        assert_eq!(RefFile::of(b"refs/heads/x_HEAD"), None);
        assert_eq!(RefFile::of(b"evil_HEAD"), None);
        assert_eq!(RefFile::of(b"MERGE_MSG"), None);
    }

    #[test]
    fn fetch_head_follows_gits_format() {
        for ok in [
            String::new(),
            format!("{A}\t\tbranch 'main' of https://example.invalid/r\n"),
            format!("{A}\t\tbranch 'main' of x\n{A}\tnot-for-merge\ttag 'v1' of x\n"),
            format!("{A}\t\t\n"),
        ] {
            assert_eq!(fetch_head(ok.as_bytes(), 20), Ok(()), "{ok:?}");
        }
        for bad in [
            format!("{A}\t\tx"),
            format!("{A}\n"),
            format!("{A}\tfor-merge\tx\n"),
            format!("{A}\t\tx\x1b]52;c;aGk=\x07\n"),
            format!("{A}\t\tx\r\n"),
            format!("{}\t\tx\n", &A[..20]),
            "\n".to_string(),
        ] {
            assert!(fetch_head(bad.as_bytes(), 20).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn packed_refs_parse_as_gits_format() {
        let good = format!(
            "# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n{A} refs/tags/v1\n^{A}\n"
        );
        let refs = packed(good.as_bytes(), 20).unwrap();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[1].1, b"refs/tags/v1");
        assert_eq!(packed(b"", 20), Ok(vec![]));
        assert_eq!(
            packed(format!("{A} refs/heads/x\n").as_bytes(), 20)
                .unwrap()
                .len(),
            1
        );
        for bad in [
            format!("{A} refs/heads/main"),
            format!("^{A}\n"),
            format!("{A} refs/heads/main\n^{A}\n^{A}\n"),
            format!("{A} refs/heads/main\n# pack-refs with: peeled\n"),
            format!("{A} refs/heads/a..b\n"),
            format!("{A}  refs/heads/main\n"),
            format!("{A} HEAD\n"),
            format!("{A}\n"),
            "\n".to_string(),
            "garbage\n".to_string(),
            format!("# pack-refs with: \x1b\n{A} refs/heads/main\n"),
            format!("{} refs/heads/main\n", &A[..39]),
        ] {
            assert!(packed(bad.as_bytes(), 20).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn new_replacement_refs_are_left_out_of_packed_refs() {
        const B: &str = "89abcdef0123456789abcdef0123456789abcdef";
        let host = format!("{A} refs/heads/main\n{A} refs/replace/{A}\n");
        let program = format!(
            "# pack-refs with: peeled \n{A} refs/heads/main\n{A} refs/replace/{A}\n{B} refs/replace/{B}\n^{A}\n{B} refs/tags/t\n^{B}\n"
        );
        let out = without_new_replacements(program.as_bytes(), host.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "# pack-refs with: peeled \n{A} refs/heads/main\n{A} refs/replace/{A}\n{B} refs/tags/t\n^{B}\n"
            )
        );
        assert_eq!(
            without_new_replacements(host.as_bytes(), host.as_bytes()),
            None
        );
    }
}
