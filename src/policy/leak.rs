//! `[sandbox.leak]`: the host's own secret patterns, which the leak scanner looks for beside
//! its built-in formats.
//!
//! A pattern is a name and a regex (the `regex` crate's syntax). Each one is checked here,
//! where a config's line and column are still known: the name's alphabet, the regex's
//! syntax (with the position of the error), that it cannot match the empty string, and
//! that it compiles within a size limit. The scanner ([`crate::guard::leak::HostPatterns`])
//! compiles the list into one multi-pattern set with the same limits.

use std::fmt;

use regex::bytes::{Regex, RegexBuilder};
use serde::de::value::MapAccessDeserializer;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::error::{PatternError, PatternProblem};

/// The most host patterns a policy may hold.
pub const MAX_HOST_PATTERNS: usize = 256;
/// The longest regex of a host pattern, in bytes.
pub const MAX_REGEX_LEN: usize = 1024;
/// The longest name of a host pattern, in bytes.
pub const MAX_NAME_LEN: usize = 64;
/// The most memory one host pattern's compiled program may take
/// (`RegexBuilder::size_limit`). A Unicode class repeated many times (`\w{500}`) passes
/// it; `(?-u:\w)` compiles far smaller.
pub const REGEX_SIZE_LIMIT: usize = 2 << 20;
/// The most memory one host pattern's lazy DFA may cache (`RegexBuilder::dfa_size_limit`);
/// past it the regex engine falls back to a slower one, it does not fail.
pub const REGEX_DFA_SIZE_LIMIT: usize = 2 << 20;

/// `[sandbox.leak]`: what the leak scanner looks for beside its built-in formats.
///
/// ```
/// let p = stockade::Policy::from_toml(r#"
///     [leak]
///     patterns = [{ name = "acme_key", regex = "acme_[a-z0-9]{32}" }]
/// "#).unwrap();
/// assert_eq!(p.leak.patterns[0].name, "acme_key");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeakDetection {
    /// The host's own secret patterns. Every scan of a sandboxed program's output (its
    /// [`Child::redactor`](crate::Child::redactor), its output lines) looks for them in
    /// every encoding the built-in formats are looked for in.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "checked_patterns"
    )]
    pub patterns: Vec<HostPattern>,
}

/// One host pattern: a finding of `regex` is reported under `name`, with a fingerprint of
/// the matched bytes (never the bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostPattern {
    /// The name findings are reported under: 1 to [`MAX_NAME_LEN`] bytes of `a-z`, `0-9`
    /// and `_`, not the name of a built-in pattern. Several patterns may share a name
    /// (two formats of one key).
    pub name: String,
    /// The regex, in the `regex` crate's syntax, matched against bytes (Unicode classes
    /// match UTF-8). It may not match the empty string. At most [`MAX_REGEX_LEN`] bytes.
    pub regex: String,
}

/// A host pattern as written, before [`HostPattern`]'s checks.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHostPattern {
    name: String,
    regex: String,
}

impl<'de> Deserialize<'de> for HostPattern {
    /// Runs the checks of [`HostPattern::compile`] inside the entry's own deserialization,
    /// so that toml gives the error the entry's line and column and its key
    /// (`sandbox.leak.patterns[1]`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HostPattern, D::Error> {
        struct Entry;
        impl<'de> Visitor<'de> for Entry {
            type Value = HostPattern;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table { name = \"…\", regex = \"…\" }")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<HostPattern, A::Error> {
                let raw = RawHostPattern::deserialize(MapAccessDeserializer::new(map))?;
                let p = HostPattern::new(raw.name, raw.regex);
                p.compile()
                    .map_err(|problem| A::Error::custom(format!("{:?}: {problem}", p.name)))?;
                Ok(p)
            }
        }
        d.deserialize_struct("HostPattern", &["name", "regex"], Entry)
    }
}

fn checked_patterns<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<HostPattern>, D::Error> {
    let v = Vec::<HostPattern>::deserialize(d)?;
    if v.len() > MAX_HOST_PATTERNS {
        return Err(serde::de::Error::custom(PatternError::TooMany {
            count: v.len(),
        }));
    }
    Ok(v)
}

impl HostPattern {
    /// A pattern named `name` for `regex` (unchecked: see [`HostPattern::compile`]).
    pub fn new(name: impl Into<String>, regex: impl Into<String>) -> HostPattern {
        HostPattern {
            name: name.into(),
            regex: regex.into(),
        }
    }

    /// Checks the name and compiles the regex on its own, with the size limits.
    ///
    /// # Errors
    ///
    /// [`PatternProblem`]: the name's alphabet or length, the regex's length, its syntax
    /// (with the byte offset and character of the error), a regex that matches the empty
    /// string, or one that compiles past [`REGEX_SIZE_LIMIT`].
    pub fn compile(&self) -> Result<Regex, PatternProblem> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= MAX_NAME_LEN
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !name_ok {
            return Err(PatternProblem::Name);
        }
        if self.regex.len() > MAX_REGEX_LEN {
            return Err(PatternProblem::TooLong {
                len: self.regex.len(),
            });
        }
        // Parsed first with regex-syntax, which says where the error is; the `regex`
        // crate's own error is only a rendered message. Byte-oriented, as
        // `regex::bytes` is: `(?-u:\xff)` is allowed.
        let hir = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(&self.regex)
            .map_err(|e| {
                let (kind, span) = match &e {
                    regex_syntax::Error::Parse(e) => (e.kind().to_string(), *e.span()),
                    regex_syntax::Error::Translate(e) => (e.kind().to_string(), *e.span()),
                    other => (
                        other.to_string(),
                        regex_syntax::ast::Span::splat(regex_syntax::ast::Position::new(0, 1, 1)),
                    ),
                };
                let offset = span.start.offset.min(self.regex.len());
                PatternProblem::Syntax {
                    message: kind,
                    offset,
                    character: self
                        .regex
                        .get(..offset)
                        .map_or(offset, |s| s.chars().count())
                        + 1,
                }
            })?;
        if hir.properties().minimum_len() == Some(0) {
            return Err(PatternProblem::MatchesEmpty);
        }
        builder(&self.regex).build().map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => PatternProblem::TooBig {
                limit: REGEX_SIZE_LIMIT,
            },
            other => PatternProblem::Syntax {
                message: other.to_string(),
                offset: 0,
                character: 1,
            },
        })
    }
}

/// The builder every host pattern is compiled with on its own (the scanner's set has
/// limits of its own, scaled to the number of patterns).
fn builder(regex: &str) -> RegexBuilder {
    let mut b = RegexBuilder::new(regex);
    b.size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT);
    b
}

impl LeakDetection {
    /// Checks every pattern ([`HostPattern::compile`]) and their number.
    ///
    /// # Errors
    ///
    /// [`PatternError`] naming the first bad pattern's index and name.
    pub fn validate(&self) -> Result<(), PatternError> {
        self.compile().map(drop)
    }

    /// Every pattern compiled on its own, in order.
    ///
    /// # Errors
    ///
    /// As [`LeakDetection::validate`].
    pub fn compile(&self) -> Result<Vec<Regex>, PatternError> {
        if self.patterns.len() > MAX_HOST_PATTERNS {
            return Err(PatternError::TooMany {
                count: self.patterns.len(),
            });
        }
        self.patterns
            .iter()
            .enumerate()
            .map(|(index, p)| {
                p.compile().map_err(|problem| PatternError::Pattern {
                    index,
                    name: p.name.clone(),
                    problem,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(name: &str, regex: &str) -> PatternProblem {
        HostPattern::new(name, regex).compile().unwrap_err()
    }

    #[test]
    fn names_are_lowercase_words() {
        assert!(
            HostPattern::new("acme_key2", "acme_[a-z0-9]{32}")
                .compile()
                .is_ok()
        );
        for bad in ["", "Acme", "acme-key", "acme key", "ä", &"a".repeat(65)] {
            assert_eq!(
                problem(bad, "acme_[a-z0-9]{32}"),
                PatternProblem::Name,
                "{bad:?}"
            );
        }
        assert!(HostPattern::new("a".repeat(64), "x+").compile().is_ok());
    }

    #[test]
    fn syntax_errors_say_where() {
        let p = problem("acme_key", "acme_([a-z0-9]{32}");
        let PatternProblem::Syntax {
            message,
            offset,
            character,
        } = &p
        else {
            panic!("{p:?}");
        };
        assert_eq!((*offset, *character), (5, 6), "{message}");
        assert!(message.contains("unclosed group"), "{message}");
        assert_eq!(
            p.to_string(),
            "regex error at character 6 (byte 5): unclosed group"
        );
        // Characters, not bytes: the error after a two-byte `é` is at character 3.
        match problem("k", "é[") {
            PatternProblem::Syntax {
                offset, character, ..
            } => assert_eq!((offset, character), (2, 2)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            problem("k", "a{2,1}"),
            PatternProblem::Syntax { .. }
        ));
        // Bytes that are not UTF-8 are allowed, as in `regex::bytes`.
        assert!(HostPattern::new("k", r"(?-u:\xff)acme").compile().is_ok());
    }

    #[test]
    fn limits_hold() {
        assert_eq!(problem("k", "a*"), PatternProblem::MatchesEmpty);
        assert_eq!(problem("k", "(?:x|)"), PatternProblem::MatchesEmpty);
        assert_eq!(
            problem("k", &"a".repeat(MAX_REGEX_LEN + 1)),
            PatternProblem::TooLong {
                len: MAX_REGEX_LEN + 1
            }
        );
        assert_eq!(
            problem("k", r"\w{1000}"),
            PatternProblem::TooBig {
                limit: REGEX_SIZE_LIMIT
            }
        );
        // The ASCII class of the same length fits.
        assert!(HostPattern::new("k", r"(?-u:\w){1000}").compile().is_ok());
        let many = LeakDetection {
            patterns: vec![HostPattern::new("k", "x+"); MAX_HOST_PATTERNS + 1],
        };
        assert_eq!(
            many.validate(),
            Err(PatternError::TooMany {
                count: MAX_HOST_PATTERNS + 1
            })
        );
        let bad_second = LeakDetection {
            patterns: vec![HostPattern::new("a", "x+"), HostPattern::new("b", "(")],
        };
        let e = bad_second.validate().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("leak.patterns[1] \"b\": regex error at character 1 (byte 0)"),
            "{e}"
        );
    }
}
