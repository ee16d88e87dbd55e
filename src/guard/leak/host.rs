//! The host's own patterns ([`HostPatterns`]): regexes compiled into one set, applied to
//! the raw text and to every decoded window, beside the built-in formats.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use regex::bytes::{Regex, RegexSet, RegexSetBuilder};
use regex_automata::meta;
use regex_automata::util::syntax;

use super::finding::PatternName;
use super::patterns::PATTERN_NAMES;
use crate::policy::{
    HostPattern, LeakDetection, PatternError, PatternProblem, REGEX_DFA_SIZE_LIMIT,
    REGEX_SIZE_LIMIT,
};

/// The most memory the compiled set of all host patterns may take; each pattern alone is
/// held to [`REGEX_SIZE_LIMIT`].
const SET_SIZE_LIMIT: usize = 64 << 20;
/// The most memory the set's lazy DFA may cache (per thread that scans); past it the
/// engine falls back to a slower one, it does not fail.
const SET_DFA_SIZE_LIMIT: usize = 16 << 20;

/// The host's own secret patterns, compiled: what [`scan_with`](super::scan_with) and
/// [`StreamScanner::with_patterns`](super::StreamScanner::with_patterns) look for beside the
/// built-in formats.
///
/// A text is first searched for any match of any pattern, by one leftmost-first search of
/// all the patterns together, which can skip ahead to the patterns' literal prefixes (on
/// clean text with 100 prefixed patterns, tens of GB/s where the [`RegexSet`]'s
/// overlapping search, which cannot, reads 0.5 GB/s). Only when that finds one does the
/// [`RegexSet`] tell which patterns match, and only those run again, on their own, to find
/// where. The text is the scanned input itself and every window the
/// scanner decodes (percent-encoding, base64 in both alphabets, hex), so a host secret is
/// found in the same encodings as a built-in one. A finding is reported under the
/// pattern's name with a [`Fingerprint`](super::Fingerprint) of the matched (decoded)
/// bytes, never the bytes.
///
/// Limits, from the scanner's design. Raw, a match is found at any length. Encoded, it is
/// found in the runs the scanner decodes, those long enough to hold the shortest built-in
/// token (20 bytes): a base64 run of at least 26 characters from where its encoding
/// starts, a hex run of at least 40 digits, a run of at least 20 URL bytes around a `%XX`
/// escape. So a host secret of 20 bytes or more is found in every encoding; a shorter one
/// encoded on its own is found when that form is this long (base64 from 19 bytes, hex from
/// 20, every byte percent-escaped from 7), and encoded with the text around it (a
/// `TOKEN=…` line of an encoded env file, a JSON document) whenever the whole is. Decoding
/// shorter runs would decode most words of ordinary text. A stream
/// ([`StreamScanner`](super::StreamScanner)) finds a match split across its 64 KiB batches
/// when the match is at most 2 KiB long, or (raw or encoded) a run of base64, hex or URL
/// bytes of at most 20 KiB. The regex decides the word boundaries: write `\b` where a
/// match must not extend a longer word.
///
/// Cloning is cheap (the compiled set is shared); the default holds no pattern, and
/// scanning with it is [`scan`](super::scan). `Debug` shows the names only.
///
/// ```
/// use stockade::guard::leak::{Encoding, HostPatterns, scan_with};
/// use stockade::policy::HostPattern;
///
/// let patterns = HostPatterns::new(&[HostPattern::new("acme_key", r"acme_[a-z0-9]{32}")])?;
/// let key = format!("acme_{}", "0123456789abcdef".repeat(2));
/// let found = scan_with(format!("token: {key}\n").as_bytes(), &patterns);
/// assert_eq!(found[0].pattern, "acme_key");
/// assert_eq!(found[0].encoding, Encoding::Raw);
/// assert_eq!(found[0].range, 7..44);
/// # Ok::<(), stockade::policy::PatternError>(())
/// ```
#[derive(Clone, Default)]
pub struct HostPatterns {
    /// `None` for no pattern, so that the scan skips the set entirely.
    set: Option<Arc<Compiled>>,
}

struct Compiled {
    /// Every pattern, leftmost-first: whether any matches, with a prefilter.
    any: meta::Regex,
    /// Every pattern, all matches: which ones match.
    set: RegexSet,
    each: Vec<Regex>,
    names: Vec<Arc<str>>,
    patterns: Vec<HostPattern>,
}

/// One match of a host pattern: its index in the set and where it is.
pub(super) struct HostHit {
    pub(super) index: usize,
    pub(super) range: Range<usize>,
}

impl HostPatterns {
    /// Checks and compiles `patterns` ([`HostPattern::compile`] each, then one set of all).
    ///
    /// # Errors
    ///
    /// [`PatternError`]: more than [`MAX_HOST_PATTERNS`](crate::policy::MAX_HOST_PATTERNS)
    /// patterns; a pattern (by index and name) whose name is not `[a-z0-9_]{1,64}` or is a
    /// built-in pattern's ([`PATTERN_NAMES`]), whose regex does not parse (with the
    /// position), matches the empty string or is too large; a set too large as a whole.
    pub fn new(patterns: &[HostPattern]) -> Result<HostPatterns, PatternError> {
        let leak = LeakDetection {
            patterns: patterns.to_vec(),
        };
        let each = leak.compile()?;
        if let Some((index, p)) = patterns
            .iter()
            .enumerate()
            .find(|(_, p)| PATTERN_NAMES.contains(&p.name.as_str()))
        {
            return Err(PatternError::Pattern {
                index,
                name: p.name.clone(),
                problem: PatternProblem::Builtin,
            });
        }
        if patterns.is_empty() {
            return Ok(HostPatterns::default());
        }
        let size_limit = SET_SIZE_LIMIT.min(REGEX_SIZE_LIMIT.saturating_mul(patterns.len()));
        let dfa_limit = SET_DFA_SIZE_LIMIT.max(REGEX_DFA_SIZE_LIMIT);
        let too_big = PatternError::SetTooBig {
            count: patterns.len(),
            limit: size_limit,
        };
        let set = RegexSetBuilder::new(patterns.iter().map(|p| &p.regex))
            .size_limit(size_limit)
            .dfa_size_limit(dfa_limit)
            .build()
            .map_err(|_| too_big.clone())?;
        // The limits and syntax `regex::bytes` gives its own meta regexes.
        let any = meta::Builder::new()
            .configure(
                meta::Config::new()
                    .utf8_empty(false)
                    .nfa_size_limit(Some(size_limit))
                    .onepass_size_limit(Some(size_limit))
                    .dfa_size_limit(Some(size_limit))
                    .hybrid_cache_capacity(dfa_limit),
            )
            .syntax(syntax::Config::new().utf8(false))
            .build_many(&patterns.iter().map(|p| &p.regex).collect::<Vec<_>>())
            .map_err(|_| too_big)?;
        Ok(HostPatterns {
            set: Some(Arc::new(Compiled {
                any,
                set,
                each,
                names: patterns
                    .iter()
                    .map(|p| Arc::from(p.name.as_str()))
                    .collect(),
                patterns: patterns.to_vec(),
            })),
        })
    }

    /// The patterns of a policy's `[sandbox.leak]` table.
    ///
    /// # Errors
    ///
    /// As [`HostPatterns::new`].
    pub fn from_policy(leak: &LeakDetection) -> Result<HostPatterns, PatternError> {
        HostPatterns::new(&leak.patterns)
    }

    /// Whether there is no pattern.
    pub fn is_empty(&self) -> bool {
        self.set.is_none()
    }

    /// How many patterns there are.
    pub fn len(&self) -> usize {
        self.set.as_ref().map_or(0, |c| c.each.len())
    }

    /// The patterns, as given.
    pub fn patterns(&self) -> &[HostPattern] {
        self.set.as_ref().map_or(&[], |c| &c.patterns)
    }

    /// The name of pattern `index`, for a finding.
    pub(super) fn name(&self, index: usize) -> PatternName {
        let c = self.set.as_ref().expect("a hit comes from a compiled set");
        PatternName::host(Arc::clone(&c.names[index]))
    }

    /// Every match of every pattern in `hay`, pattern by pattern (each pattern's matches
    /// do not overlap one another; different patterns' may), appended to `out`.
    pub(super) fn hits(&self, hay: &[u8], out: &mut Vec<HostHit>) {
        let Some(c) = &self.set else {
            return;
        };
        // On clean text one pass with a prefilter, instead of the set's search for every
        // pattern that matches, which reads every byte.
        if !c.any.is_match(hay) {
            return;
        }
        for index in c.set.matches(hay).iter() {
            out.extend(c.each[index].find_iter(hay).map(|m| HostHit {
                index,
                range: m.range(),
            }));
        }
    }
}

impl fmt::Debug for HostPatterns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.patterns().iter().map(|p| &p.name))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_are_refused_and_positions_kept() {
        let e = HostPatterns::new(&[
            HostPattern::new("acme_key", "acme_[a-z]{8}"),
            HostPattern::new("github_token", "ghx_[a-z]{8}"),
        ])
        .unwrap_err();
        assert_eq!(
            e,
            PatternError::Pattern {
                index: 1,
                name: "github_token".into(),
                problem: PatternProblem::Builtin
            }
        );
        assert_eq!(
            e.to_string(),
            "leak.patterns[1] \"github_token\": the name is a built-in pattern's"
        );
        let e = HostPatterns::new(&[HostPattern::new("acme_key", "acme_[a-z]{8")]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("leak.patterns[0] \"acme_key\": regex error at character 11"),
            "{e}"
        );
    }

    #[test]
    fn hits_come_from_the_patterns_that_match() {
        let p = HostPatterns::new(&[
            HostPattern::new("one", "one_[0-9]{4}"),
            HostPattern::new("two", "two_[0-9]{4}"),
            HostPattern::new("two", "deux_[0-9]{4}"),
        ])
        .unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(format!("{p:?}"), r#"["one", "two", "two"]"#);
        let mut hits = Vec::new();
        p.hits(b"x two_1234 deux_5678 two_9999", &mut hits);
        let got: Vec<_> = hits.iter().map(|h| (h.index, h.range.clone())).collect();
        assert_eq!(got, [(1, 2..10), (1, 21..29), (2, 11..20)]);
        assert_eq!(p.name(2), "two");
        assert!(p.name(2).is_host());
        hits.clear();
        HostPatterns::default().hits(b"two_1234", &mut hits);
        assert!(hits.is_empty());
        assert!(HostPatterns::new(&[]).unwrap().is_empty());
    }

    /// The pre-check (one leftmost-first search of all patterns) says "some pattern
    /// matches" exactly when the set does, whatever the flags, anchors and boundaries.
    #[test]
    fn the_pre_check_agrees_with_the_set() {
        let p = HostPatterns::new(&[
            HostPattern::new("a", r"\btok_[a-z]{4}\b"),
            HostPattern::new("b", r"(?i)secret\s*=\s*\S{4,}"),
            HostPattern::new("c", r"^start[0-9]+"),
            HostPattern::new("d", r"(?-u:\xff\x00)x"),
            HostPattern::new("e", r"(?x) end [0-9]{2} $ # a comment"),
        ])
        .unwrap();
        let c = p.set.as_ref().unwrap();
        let hays: [&[u8]; 12] = [
            b"",
            b"tok_abcd",
            b"xtok_abcd",
            b"tok_abcde",
            b"SeCrEt = abcd",
            b"secret=abc",
            b"start12 and more",
            b"not start12",
            b"\xff\x00x",
            b"\xff\x01x",
            b"the end42",
            b"the end42 ",
        ];
        let mut agreed = [0, 0];
        for h in hays {
            let any = c.any.is_match(h);
            assert_eq!(any, c.set.is_match(h), "{:?}", String::from_utf8_lossy(h));
            agreed[usize::from(any)] += 1;
        }
        assert_eq!(agreed, [7, 5], "both answers are exercised");
    }
}
