//! What a scan reports: [`Finding`], its [`Encoding`] and the secret's [`Fingerprint`].

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::io::{self, Write};
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

use serde::ser::{Serialize, SerializeStruct, Serializer};

/// How the secret appeared in the scanned text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// As is.
    Raw,
    /// Percent-encoded (`%73%6B…`), fully or in part.
    Url,
    /// Base64 with the standard alphabet (`+`, `/`), padded or not.
    Base64,
    /// Base64 with the URL-safe alphabet (`-`, `_`), padded or not.
    Base64Url,
    /// Hexadecimal, either case.
    Hex,
}

impl Encoding {
    /// The lowercase name used in reports: `raw`, `url`, `base64`, `base64url`, `hex`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Raw => "raw",
            Encoding::Url => "url",
            Encoding::Base64 => "base64",
            Encoding::Base64Url => "base64url",
            Encoding::Hex => "hex",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A keyed hash of a secret, truncated to 8 bytes: equal secrets have equal fingerprints
/// within one process, and a fingerprint reveals nothing about the value.
///
/// The key is drawn at random once per process (std's [`RandomState`], a keyed SipHash),
/// so fingerprints cannot be compared across processes and cannot be brute-forced offline
/// from a log. The same secret found raw and base64-encoded gets the same fingerprint.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint([u8; 8]);

impl Fingerprint {
    /// The fingerprint of `secret` under this process's key.
    pub fn of(secret: &[u8]) -> Fingerprint {
        static KEY: OnceLock<RandomState> = OnceLock::new();
        Fingerprint(
            KEY.get_or_init(RandomState::new)
                .hash_one(secret)
                .to_be_bytes(),
        )
    }

    /// The 8 bytes.
    pub fn as_bytes(&self) -> &[u8; 8] {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    /// 16 lower-case hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut digits = [0u8; 16];
        hex::encode_to_slice(self.0, &mut digits).map_err(|_| fmt::Error)?;
        // Hex digits are ASCII.
        f.write_str(std::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The name of the pattern a [`Finding`] matched: a built-in one ([`PATTERN_NAMES`](super::PATTERN_NAMES))
/// or one of the host's own ([`HostPatterns`](super::HostPatterns)).
///
/// It reads as a `&str` (it derefs to one, and compares equal to one), so
/// `finding.pattern == "github_token"` works; cloning is cheap (a host pattern's name is
/// shared). Every name is `[a-z0-9_]`: built-in names are, and host names are checked.
#[derive(Clone)]
pub struct PatternName(Name);

#[derive(Clone)]
enum Name {
    Builtin(&'static str),
    Host(Arc<str>),
}

impl PatternName {
    /// A built-in pattern's name.
    pub(super) fn builtin(name: &'static str) -> PatternName {
        PatternName(Name::Builtin(name))
    }

    /// A host pattern's name (checked by [`HostPatterns::new`](super::HostPatterns::new)).
    pub(super) fn host(name: Arc<str>) -> PatternName {
        PatternName(Name::Host(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Name::Builtin(s) => s,
            Name::Host(s) => s,
        }
    }

    /// Whether the name is one of the host's patterns rather than a built-in one.
    pub fn is_host(&self) -> bool {
        matches!(self.0, Name::Host(_))
    }
}

impl Deref for PatternName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for PatternName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for PatternName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for PatternName {
    fn eq(&self, other: &PatternName) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for PatternName {}

impl PartialOrd for PatternName {
    fn partial_cmp(&self, other: &PatternName) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PatternName {
    fn cmp(&self, other: &PatternName) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for PatternName {
    /// As the `str`, so that a map keyed by names can be looked up with a `&str`.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for PatternName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for PatternName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<PatternName> for str {
    fn eq(&self, other: &PatternName) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<PatternName> for &str {
    fn eq(&self, other: &PatternName) -> bool {
        *self == other.as_str()
    }
}

impl fmt::Display for PatternName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for PatternName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Serialize for PatternName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One secret found in scanned text. It holds no part of the secret: its `Debug` and
/// `Display` are safe to log.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Finding {
    /// The pattern's name: `github_token`, `aws_access_key_id`, `private_key`, … or the
    /// name of the host pattern that matched (`acme_key`).
    pub pattern: PatternName,
    /// How the secret was encoded in the text.
    pub encoding: Encoding,
    /// The bytes of the scanned text that hold the (encoded) secret.
    pub range: Range<usize>,
    /// A keyed hash of the decoded secret.
    pub fingerprint: Fingerprint,
}

impl Finding {
    /// Writes the finding as one JSON object, the same one its [`Serialize`] impl makes,
    /// followed by a newline.
    ///
    /// Written by hand so that the library needs no JSON crate: every field is a number, a
    /// pattern name (`[a-z0-9_]`: built-in names are tested, host names checked), an
    /// encoding name or hex digits, so nothing needs escaping.
    pub(super) fn write_json_line(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            r#"{{"pattern":"{}","encoding":"{}","start":{},"end":{},"fingerprint":"{}"}}"#,
            self.pattern, self.encoding, self.range.start, self.range.end, self.fingerprint
        )
    }
}

impl fmt::Display for Finding {
    /// `github_token base64 120..176 1f2e3d4c5b6a7988`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}..{} {}",
            self.pattern, self.encoding, self.range.start, self.range.end, self.fingerprint
        )
    }
}

impl Serialize for Finding {
    /// `{"pattern":…,"encoding":…,"start":…,"end":…,"fingerprint":…}`
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Finding", 5)?;
        st.serialize_field("pattern", &self.pattern)?;
        st.serialize_field("encoding", self.encoding.as_str())?;
        st.serialize_field("start", &self.range.start)?;
        st.serialize_field("end", &self.range.end)?;
        st.serialize_field("fingerprint", &self.fingerprint)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::leak::PATTERN_NAMES;

    fn finding(pattern: &'static str, encoding: Encoding) -> Finding {
        Finding {
            pattern: PatternName::builtin(pattern),
            encoding,
            range: 3..9,
            fingerprint: Fingerprint([1, 2, 3, 4, 5, 6, 7, 0xab]),
        }
    }

    #[test]
    fn finding_display_is_name_encoding_range_fingerprint() {
        let f = finding("github_token", Encoding::Base64Url);
        assert_eq!(
            f.to_string(),
            "github_token base64url 3..9 01020304050607ab"
        );
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(
            json,
            r#"{"pattern":"github_token","encoding":"base64url","start":3,"end":9,"fingerprint":"01020304050607ab"}"#
        );
    }

    /// The hand-written JSON line is what serde_json makes of the `Serialize` impl, for every
    /// pattern name and encoding, and none of them needs escaping.
    #[test]
    fn json_line_equals_serde_json() {
        let encodings = [
            Encoding::Raw,
            Encoding::Url,
            Encoding::Base64,
            Encoding::Base64Url,
            Encoding::Hex,
        ];
        for &name in PATTERN_NAMES {
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{name}"
            );
            for enc in encodings {
                let f = finding(name, enc);
                let mut line = Vec::new();
                f.write_json_line(&mut line).unwrap();
                let want = serde_json::to_string(&f).unwrap() + "\n";
                assert_eq!(String::from_utf8(line).unwrap(), want);
            }
        }
    }
}
