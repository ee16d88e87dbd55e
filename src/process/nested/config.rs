//! The config a neutralized nested repository keeps: only plain keys that make git run
//! nothing, read from the program's config by a strict line grammar.
//!
//! Git's config syntax is rich (quoting, escapes, continuation lines, includes, legacy
//! `[section.sub]` headers). This reader does not follow it: it keeps a line only when it
//! is plainly one of the allowlisted keys, and drops everything else, so a construct it
//! does not read can only lose a key, never smuggle one in. What it keeps names no program,
//! no path git would read config or hooks from, and no worktree elsewhere.

/// At most this many bytes of a config are read; a longer one keeps nothing.
pub(crate) const MAX_CONFIG: usize = 1 << 20;

/// The keys kept: section (lowercase), whether it has a subsection (`[remote "origin"]`),
/// key (lowercase).
const KEPT: &[(&str, bool, &str)] = &[
    ("core", false, "repositoryformatversion"),
    ("core", false, "filemode"),
    ("core", false, "bare"),
    ("core", false, "logallrefupdates"),
    ("core", false, "ignorecase"),
    ("core", false, "precomposeunicode"),
    ("core", false, "symlinks"),
    ("extensions", false, "objectformat"),
    ("extensions", false, "refstorage"),
    ("remote", true, "url"),
    ("remote", true, "fetch"),
    ("branch", true, "remote"),
    ("branch", true, "merge"),
];

/// The allowlisted part of config `text`, as git config text.
pub(crate) fn filter(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if text.len() > MAX_CONFIG {
        return out;
    }
    // The current section, when its header was read plainly: (name, subsection).
    let mut section: Option<(String, Option<String>)> = None;
    // Whether `section`'s header has been written to `out`.
    let mut written = false;
    let mut continued = false;
    for raw in text.split(|&b| b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        // A line after one ending in a backslash continues its value: never read it.
        let was_continued = continued;
        continued = line.ends_with(b"\\");
        if was_continued {
            continue;
        }
        let line = line.trim_ascii();
        if line.is_empty() || line[0] == b'#' || line[0] == b';' {
            continue;
        }
        if line[0] == b'[' {
            section = header(line);
            written = false;
            continue;
        }
        let Some((name, sub)) = &section else {
            continue;
        };
        let Some((key, value)) = entry(line) else {
            continue;
        };
        let kept = KEPT
            .iter()
            .any(|&(s, has_sub, k)| s == name && has_sub == sub.is_some() && k == key);
        if !kept || (name == "remote" && key == "url" && !plain_url(value)) {
            continue;
        }
        if !written {
            out.push(b'[');
            out.extend_from_slice(name.as_bytes());
            if let Some(sub) = sub {
                out.extend_from_slice(b" \"");
                out.extend_from_slice(sub.as_bytes());
                out.push(b'"');
            }
            out.extend_from_slice(b"]\n");
            written = true;
        }
        out.push(b'\t');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b" = ");
        out.extend_from_slice(value);
        out.push(b'\n');
    }
    out
}

/// `[name]` or `[name "sub"]`, nothing after it: the lowercase name and the subsection.
fn header(line: &[u8]) -> Option<(String, Option<String>)> {
    let inner = line.strip_prefix(b"[")?.strip_suffix(b"]")?;
    let (name, sub) = match inner.iter().position(|&b| b == b' ') {
        None => (inner, None),
        Some(i) => {
            let rest = inner[i + 1..].strip_prefix(b"\"")?.strip_suffix(b"\"")?;
            (&inner[..i], Some(rest))
        }
    };
    if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-') {
        return None;
    }
    let sub = match sub {
        None => None,
        Some(s) => {
            if s.is_empty() || !s.iter().all(|&b| plain(b) && b != b'"' && b != b'\\') {
                return None;
            }
            Some(String::from_utf8(s.to_vec()).ok()?)
        }
    };
    Some((String::from_utf8(name.to_ascii_lowercase()).ok()?, sub))
}

/// `key = value`: the lowercase key and a value of plain characters (no quote, backslash
/// or comment character, which git would interpret).
fn entry(line: &[u8]) -> Option<(String, &[u8])> {
    let eq = line.iter().position(|&b| b == b'=')?;
    let key = line[..eq].trim_ascii();
    let value = line[eq + 1..].trim_ascii();
    let key_ok = key.first().is_some_and(u8::is_ascii_alphabetic)
        && key.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-');
    let value_ok = !value.is_empty()
        && value
            .iter()
            .all(|&b| plain(b) && !matches!(b, b'"' | b'\\' | b';' | b'#'));
    (key_ok && value_ok).then(|| {
        (
            String::from_utf8_lossy(&key.to_ascii_lowercase()).into_owned(),
            value,
        )
    })
}

/// A printable ASCII character or a space.
fn plain(b: u8) -> bool {
    (0x20..0x7f).contains(&b)
}

/// A remote URL that names no transport helper (`ext::<command>`, `fd::`, any
/// `<helper>::`) and no option (a leading `-`).
fn plain_url(value: &[u8]) -> bool {
    !value.starts_with(b"-") && !value.windows(2).any(|w| w == b"::")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clones_config_keeps_its_remote_and_branch() {
        let clone = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = /srv/src/lib.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
        assert_eq!(filter(clone), clone.to_vec());
    }

    #[test]
    fn anything_that_runs_a_program_is_dropped() {
        let hostile = b"[core]\n\tfsmonitor = touch /tmp/x\n\thooksPath = /tmp/h\n\tsshCommand = x\n\tpager = x\n\tworktree = /\n\trepositoryformatversion = 0\n[include]\n\tpath = /tmp/c\n[includeIf \"gitdir:/\"]\n\tpath = /tmp/c\n[filter \"x\"]\n\tclean = x\n[alias]\n\tst = !x\n[remote \"o\"]\n\turl = ext::sh -c x\n\turl = -oProxyCommand=x\n\tuploadpack = x\n[remote.o]\n\turl = /a\n[core]\n\tbare = \"fal\\\nse\"\n\tfilemode = true \\\n\tfsmonitor = y\n[CORE \"x\"]\n\tbare = false\n";
        assert_eq!(
            String::from_utf8(filter(hostile)).unwrap(),
            "[core]\n\trepositoryformatversion = 0\n"
        );
    }

    #[test]
    fn a_config_too_long_keeps_nothing() {
        let mut long = b"[core]\n\tbare = false\n".to_vec();
        long.resize(MAX_CONFIG + 1, b'\n');
        assert!(filter(&long).is_empty());
    }
}
