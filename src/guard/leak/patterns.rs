//! The token shapes and their matchers.
//!
//! A token must start at a word boundary (no letter or digit before it) and end at one (no
//! `[A-Za-z0-9_-]` after it), and the random part of most tokens must mix at least two of
//! upper case, lower case and digits, which rejects placeholders such as `sk-xxxx…`. Inside
//! a candidate run a token can only start at the run's start or after a `-`, `_`, `+` or
//! `/`; only there are the literal prefixes (`sk-`, `ghp_`, `AIza`, …) compared, and a
//! small matcher with bounded, possessive repetitions validates the token. Discord and
//! Telegram tokens have no prefix; their trigger is the run itself (its length and the byte
//! before or after it). A PEM header counts only when a base64 body follows it.

use std::ops::Range;
use std::sync::OnceLock;

use memchr::memmem;

use super::class::{ALNUM, B64URL, DASH, DIGIT, HEX_LOWER, LOWER, PEM_BODY, RUN, UPPER, is};
use super::runs::Runs;

/// The shortest token any pattern accepts; shorter runs are never looked at.
pub(super) const MIN_TOKEN: usize = 20;
/// The shortest text that can hold a PEM finding: `-----BEGIN PRIVATE KEY-----` and a
/// 40-character body line.
const PEM_MIN: usize = 27 + 40;
/// How far a PEM block may extend past its `-----BEGIN` line.
const PEM_MAX: usize = 8 * 1024;

/// The names of every pattern [`scan`](super::scan) knows, for documentation and configuration checks.
pub const PATTERN_NAMES: &[&str] = &[
    "anthropic_api_key",
    "openrouter_api_key",
    "openai_api_key",
    "github_token",
    "github_pat",
    "google_api_key",
    "slack_token",
    "slack_app_token",
    "brave_search_api_key",
    "aws_access_key_id",
    "discord_bot_token",
    "telegram_bot_token",
    "private_key",
];

/// One step of a token shape. Runs are possessive (no backtracking), so each shape is
/// written so that a run's class excludes the byte that follows it.
enum Seg {
    Lit(&'static [u8]),
    /// The first of these literals that matches.
    Alt(&'static [&'static [u8]]),
    OneOf(&'static [u8]),
    Run(u16, usize, usize),
}

/// What the random part of a token must look like.
#[derive(Clone, Copy)]
enum Check {
    /// At least two of upper case, lower case and digits.
    Mixed,
    /// Not one byte repeated.
    NotRepeated,
}

struct Pattern {
    name: &'static str,
    segs: &'static [Seg],
    check: Check,
}

use Seg::{Alt, Lit, OneOf, Run};

const ANTHROPIC: Pattern = Pattern {
    name: "anthropic_api_key",
    segs: &[
        Lit(b"sk-ant-"),
        Run(LOWER, 2, 10),
        Run(DIGIT, 2, 2),
        Lit(b"-"),
        Run(B64URL, 40, 250),
    ],
    check: Check::Mixed,
};
const OPENROUTER: Pattern = Pattern {
    name: "openrouter_api_key",
    segs: &[Lit(b"sk-or-v1-"), Run(HEX_LOWER, 64, 64)],
    check: Check::Mixed,
};
const OPENAI_PROJECT: Pattern = Pattern {
    name: "openai_api_key",
    segs: &[
        Lit(b"sk-"),
        Alt(&[b"proj-", b"svcacct-", b"admin-"]),
        Run(B64URL, 40, 250),
    ],
    check: Check::Mixed,
};
const OPENAI_LEGACY: Pattern = Pattern {
    name: "openai_api_key",
    segs: &[Lit(b"sk-"), Run(ALNUM, 32, 250)],
    check: Check::Mixed,
};
const GITHUB: Pattern = Pattern {
    name: "github_token",
    segs: &[Lit(b"gh"), OneOf(b"pousr"), Lit(b"_"), Run(ALNUM, 36, 251)],
    check: Check::Mixed,
};
const GITHUB_PAT: Pattern = Pattern {
    name: "github_pat",
    segs: &[
        Lit(b"github_pat_"),
        Run(ALNUM, 20, 30),
        Lit(b"_"),
        Run(ALNUM, 50, 80),
    ],
    check: Check::Mixed,
};
const GOOGLE: Pattern = Pattern {
    name: "google_api_key",
    segs: &[Lit(b"AIza"), Run(B64URL, 35, 35)],
    check: Check::Mixed,
};
const SLACK: Pattern = Pattern {
    name: "slack_token",
    segs: &[
        Lit(b"xox"),
        OneOf(b"baprs"),
        Lit(b"-"),
        Run(DIGIT, 6, 20),
        Lit(b"-"),
        Run(ALNUM | DASH, 14, 250),
    ],
    check: Check::Mixed,
};
const SLACK_APP: Pattern = Pattern {
    name: "slack_app_token",
    segs: &[
        Lit(b"xapp-"),
        Run(DIGIT, 1, 2),
        Lit(b"-"),
        Run(ALNUM | DASH, 20, 250),
    ],
    check: Check::Mixed,
};
const BRAVE: Pattern = Pattern {
    name: "brave_search_api_key",
    segs: &[Lit(b"BSA"), Run(B64URL, 25, 45)],
    check: Check::Mixed,
};
const AWS: Pattern = Pattern {
    name: "aws_access_key_id",
    segs: &[
        Alt(&[b"AKIA", b"ASIA", b"ABIA", b"ACCA"]),
        Run(UPPER | DIGIT, 16, 16),
    ],
    check: Check::NotRepeated,
};
/// The first part is the base64 of an 18 or 19 digit user id, so it starts with M, N or O.
const DISCORD: Pattern = Pattern {
    name: "discord_bot_token",
    segs: &[
        OneOf(b"MNO"),
        Run(B64URL, 22, 25),
        Lit(b"."),
        Run(B64URL, 6, 6),
        Lit(b"."),
        Run(B64URL, 27, 38),
    ],
    check: Check::Mixed,
};
const TELEGRAM: Pattern = Pattern {
    name: "telegram_bot_token",
    segs: &[Run(DIGIT, 8, 10), Lit(b":"), Run(B64URL, 35, 35)],
    check: Check::Mixed,
};

/// Literal prefixes and the patterns to try, in order, where one is found.
const PREFIXES: &[(&str, &[&Pattern])] = &[
    (
        "sk-",
        &[&ANTHROPIC, &OPENROUTER, &OPENAI_PROJECT, &OPENAI_LEGACY],
    ),
    ("ghp_", &[&GITHUB]),
    ("gho_", &[&GITHUB]),
    ("ghu_", &[&GITHUB]),
    ("ghs_", &[&GITHUB]),
    ("ghr_", &[&GITHUB]),
    ("github_pat_", &[&GITHUB_PAT]),
    ("AIza", &[&GOOGLE]),
    ("xox", &[&SLACK]),
    ("xapp-", &[&SLACK_APP]),
    ("BSA", &[&BRAVE]),
    ("AKIA", &[&AWS]),
    ("ASIA", &[&AWS]),
    ("ABIA", &[&AWS]),
    ("ACCA", &[&AWS]),
];

/// Matches `segs` at `hay[pos..]`; returns the end of the match.
fn match_segs(hay: &[u8], pos: usize, segs: &[Seg]) -> Option<usize> {
    let mut i = pos;
    for seg in segs {
        match seg {
            Lit(l) => {
                if !hay.get(i..)?.starts_with(l) {
                    return None;
                }
                i += l.len();
            }
            Alt(ls) => {
                let rest = hay.get(i..)?;
                i += ls.iter().find(|l| rest.starts_with(l))?.len();
            }
            OneOf(set) => {
                if !set.contains(hay.get(i)?) {
                    return None;
                }
                i += 1;
            }
            Run(class, min, max) => {
                let start = i;
                let limit = hay.len().min(i + max);
                while i < limit && is(hay[i], *class) {
                    i += 1;
                }
                if i - start < *min {
                    return None;
                }
            }
        }
    }
    Some(i)
}

fn lead_len(segs: &[Seg]) -> usize {
    match segs.first() {
        Some(Lit(l)) => l.len(),
        Some(Alt(ls)) => ls.first().map_or(0, |l| l.len()),
        _ => 0,
    }
}

fn passes(check: Check, body: &[u8]) -> bool {
    match check {
        Check::Mixed => {
            let (mut u, mut l, mut d) = (false, false, false);
            for &b in body {
                u |= b.is_ascii_uppercase();
                l |= b.is_ascii_lowercase();
                d |= b.is_ascii_digit();
            }
            u as u8 + l as u8 + d as u8 >= 2
        }
        Check::NotRepeated => body.first().is_some_and(|f| body.iter().any(|b| b != f)),
    }
}

/// Tries `p` at `hay[pos..]` with the boundary rules and the body check.
fn try_pattern(hay: &[u8], pos: usize, p: &Pattern) -> Option<usize> {
    if pos > 0 && is(hay[pos - 1], ALNUM) {
        return None;
    }
    let end = match_segs(hay, pos, p.segs)?;
    if end < hay.len() && is(hay[end], B64URL) {
        return None;
    }
    let body = &hay[pos + lead_len(p.segs)..end];
    passes(p.check, body).then_some(end)
}

/// A token found in one buffer, before it is mapped back to the scanned text.
pub(super) struct Hit {
    /// The pattern's name.
    pub(super) pattern: &'static str,
    /// Where the token sits in the buffer.
    pub(super) range: Range<usize>,
}

/// Whether a literal prefix starts with this byte.
static LEADS: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < PREFIXES.len() {
        t[PREFIXES[i].0.as_bytes()[0] as usize] = true;
        i += 1;
    }
    t
};

/// Raw tokens in `hay`, in order of position, without decoding anything.
pub(super) fn raw_hits(hay: &[u8], hits: &mut Vec<Hit>) {
    let mut runs = Runs::<MIN_TOKEN>::new(hay);
    while let Some((s, e)) = runs.next_before(hay.len()) {
        run_hits(hay, s, e, hits);
    }
    pem_hits(hay, &mut 0, hay.len(), hits);
}

/// The tokens in the candidate run `hay[s..e]` (a maximal run of [`RUN`] bytes).
pub(super) fn run_hits(hay: &[u8], s: usize, e: usize, hits: &mut Vec<Hit>) {
    let len = e - s;
    // Telegram: `<8-10 digits>:<35 characters>`; the run is the part after the colon.
    if len == 35 && s > 0 && hay[s - 1] == b':' {
        let colon = s - 1;
        let digits = hay[..colon]
            .iter()
            .rev()
            .take(11)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if (8..=10).contains(&digits) {
            let start = colon - digits;
            if try_pattern(hay, start, &TELEGRAM) == Some(e) {
                hits.push(Hit {
                    pattern: TELEGRAM.name,
                    range: start..e,
                });
            }
        }
    }
    // Discord: the run is the first of three dot-separated parts.
    if (23..=26).contains(&len) && hay.get(e) == Some(&b'.') {
        if let Some(end) = try_pattern(hay, s, &DISCORD) {
            hits.push(Hit {
                pattern: DISCORD.name,
                range: s..end,
            });
        }
    }
    // A token starts at the run's start or right after a non-alphanumeric byte of it
    // (`-`, `_`, `+`, `/`): only there are the literal prefixes compared.
    let mut next = s;
    let mut after_alnum = false;
    for pos in s..e {
        let b = hay[pos];
        if !after_alnum && pos >= next && LEADS[b as usize] {
            if let Some(end) = prefixed_hit(hay, pos, hits) {
                next = end;
            }
        }
        after_alnum = is(b, ALNUM);
    }
}

/// Tries the patterns of the literal prefix at `hay[pos..]`, if any; pushes the first that
/// matches and returns its end.
fn prefixed_hit(hay: &[u8], pos: usize, hits: &mut Vec<Hit>) -> Option<usize> {
    let rest = &hay[pos..];
    let (_, patterns) = PREFIXES
        .iter()
        .find(|(p, _)| rest.starts_with(p.as_bytes()))?;
    patterns.iter().find_map(|p| {
        let end = try_pattern(hay, pos, p)?;
        hits.push(Hit {
            pattern: p.name,
            range: pos..end,
        });
        Some(end)
    })
}

fn pem_finder() -> &'static memmem::Finder<'static> {
    static PEM: OnceLock<memmem::Finder<'static>> = OnceLock::new();
    PEM.get_or_init(|| memmem::Finder::new(b"-----BEGIN "))
}

/// `-----BEGIN … PRIVATE KEY-----` followed by a base64 body, through the `-----END`
/// line when it follows the body within [`PEM_MAX`] bytes.
///
/// Looks at the headers that start at or after `*from` and before `until`, and moves
/// `*from` past them, so that a text can be searched piece by piece.
pub(super) fn pem_hits(hay: &[u8], from: &mut usize, until: usize, hits: &mut Vec<Hit>) {
    // A header, a label and a 40-character body line take more than this.
    if hay.len() < PEM_MIN {
        return;
    }
    while *from < until {
        // Ten bytes more, so that a header starting before `until` is seen whole.
        let window = &hay[*from..hay.len().min(until + 10)];
        let Some(off) = pem_finder().find(window) else {
            *from = until;
            break;
        };
        let start = *from + off;
        *from = start + 1;
        let Some(header_end) = pem_header_end(hay, start) else {
            continue;
        };
        let Some(end) = pem_block_end(hay, start, header_end) else {
            continue;
        };
        hits.push(Hit {
            pattern: "private_key",
            range: start..end,
        });
        *from = end;
    }
}

/// The end of the private key header line whose `-----BEGIN ` is at `start`, if its
/// label is one of a private key.
fn pem_header_end(hay: &[u8], start: usize) -> Option<usize> {
    let label_at = start + 11;
    let label_len = memmem::find(&hay[label_at..hay.len().min(label_at + 64)], b"-----")?;
    let label = &hay[label_at..label_at + label_len];
    let label_ok = label
        .iter()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ')
        && (label.ends_with(b"PRIVATE KEY") || label.ends_with(b"PRIVATE KEY BLOCK"));
    label_ok.then_some(label_at + label_len + 5)
}

/// The end of the block whose header spans `start..header_end`: after its `-----END` line
/// when there is one, else after its body. `None` when no body line of 40 base64
/// characters follows the header.
fn pem_block_end(hay: &[u8], start: usize, header_end: usize) -> Option<usize> {
    let limit = hay.len().min(start + PEM_MAX);
    let (mut i, mut run, mut longest) = (header_end, 0, 0);
    while i < limit && is(hay[i], PEM_BODY) {
        // `-----END` stops the body; a lone `-` inside a header line does not.
        if hay[i] == b'-' && hay[i..].starts_with(b"-----") {
            break;
        }
        run = if is(hay[i], RUN) || hay[i] == b'=' {
            run + 1
        } else {
            0
        };
        longest = longest.max(run);
        i += 1;
    }
    if longest < 40 {
        return None;
    }
    let rest = &hay[i..limit];
    if rest.starts_with(b"-----END ") {
        match memmem::find(&rest[9..rest.len().min(9 + 64)], b"-----") {
            Some(close) => return Some(i + 9 + close + 5),
            // The input ends inside the END line: the block runs to the end.
            None if limit == hay.len() && rest.len() < 9 + 64 => return Some(hay.len()),
            None => {}
        }
    } else if limit == hay.len() && b"-----END ".starts_with(rest) {
        return Some(hay.len());
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use crate::guard::leak::testgen::{ALNUM_CHARS, Gen};
    use crate::guard::leak::{Encoding, Fingerprint, scan};

    #[test]
    fn finds_a_github_token_with_its_range() {
        let mut g = Gen(1);
        let tok = format!("gh{}_{}", "p", g.pick(ALNUM_CHARS, 36));
        let text = format!("token: {tok}\n");
        let found = scan(text.as_bytes());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pattern, "github_token");
        assert_eq!(found[0].encoding, Encoding::Raw);
        assert_eq!(&text[found[0].range.clone()], tok);
        assert_eq!(found[0].fingerprint, Fingerprint::of(tok.as_bytes()));
    }

    #[test]
    fn boundaries_and_placeholders_are_rejected() {
        let mut g = Gen(2);
        let body = g.pick(ALNUM_CHARS, 36);
        // Glued to a word, or longer than the shape allows: not a token.
        assert!(scan(format!("xghp_{body}").as_bytes()).is_empty());
        assert!(scan(format!("ghp_{body}-x").as_bytes()).is_empty());
        // All one class: a placeholder.
        assert!(scan(format!("ghp_{}", "x".repeat(36)).as_bytes()).is_empty());
        assert!(scan(format!("AKIA{}", "X".repeat(16)).as_bytes()).is_empty());
    }

    #[test]
    fn pem_needs_a_body() {
        let header = format!("-----BEGIN RSA {} KEY-----", "PRIVATE");
        assert!(scan(format!("if line == \"{header}\" {{").as_bytes()).is_empty());
        let mut g = Gen(3);
        let body = g.pick(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
            64,
        );
        let footer = format!("-----END RSA {} KEY-----", "PRIVATE");
        let block = format!("{header}\n{body}\n{body}\n{footer}");
        let text = format!("x\n{block}\ny");
        let found = scan(text.as_bytes());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(&text[found[0].range.clone()], block);
    }
}
