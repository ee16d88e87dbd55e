//! Secret leak detection: find credentials in outbound text, in plain and encoded forms.
//!
//! [`scan`] looks for the shapes of well-known credentials (API keys, bot tokens, cloud access
//! key ids, PEM private keys) in raw bytes and in the URL-, base64- and hex-decoded forms of
//! candidate runs. A [`Finding`] names the pattern, the encoding and the byte range, and
//! carries a [`Fingerprint`] of the secret: never the value, nothing reversible.
//!
//! # How it stays fast
//!
//! Running a dozen regexes over every byte a worker prints would cost more than the worker.
//! Every token shape but the PEM header is a run of at least 20 bytes from
//! `[A-Za-z0-9+/_-]`, so one pass finds such runs: it classifies 64 bytes at a time into a
//! bit mask, without a branch per byte, and a few shifts of the mask show whether a long
//! enough run starts in the block; ordinary prose has none. Inside a run a token can only
//! start at the run's start or after a `-`, `_`, `+` or `/` (the word-boundary rule below);
//! only there are the literal prefixes (`sk-`, `ghp_`, `AIza`, …) compared, and a small
//! hand-written matcher with bounded repetitions validates the token. Discord and Telegram
//! tokens have no prefix; their trigger is the run itself (its length and the byte before
//! or after it), which costs nothing extra. PEM headers are found with `memmem`,
//! percent-escapes with `memchr`. All of this is one pass over the text, 64 KiB at a time:
//! the searches, the run finder and the decoding of the runs it finds all go over a block
//! while it is in cache, so a long input is read from memory once.
//!
//! Runs long enough to hide an encoded secret (base64 ≥ 24 characters, hex ≥ 40) are
//! decoded in windows of [`WINDOW`] bytes that overlap by [`OVERLAP`] bytes, at every
//! alignment (four for base64, two for hex), and the decoded bytes go through the same
//! token matchers. Each input byte is decoded a bounded number of times, so the cost is
//! linear in the input however long a run is. The hex stretches inside a base64 run are
//! looked for in strides of 40 bytes, not byte by byte. Most decoded windows are short and
//! random (a UUID, a git SHA or a path read as base64): three bytes of one, those a run of
//! 20 must cover, and a search for `@` reject it before any other search starts.
//!
//! # Tuning against false positives
//!
//! A token must start at a word boundary (no letter or digit before it) and end at one (no
//! `[A-Za-z0-9_-]` after it), and the random part of most tokens must mix at least two of
//! upper case, lower case and digits, which rejects placeholders such as `sk-xxxx…`. A PEM
//! header counts only when a base64 body follows it.
//!
//! # Layout
//!
//! `class` (byte classes) → `runs` (the run finder, SIMD masks) → `patterns` (token shapes
//! and matchers) → `encodings` (decoding windows) → `scanner` (the one-pass block scanner)
//! → `stream` ([`StreamScanner`], [`scan_stream`]); `finding` holds the reported types,
//! `host` the host's own patterns ([`HostPatterns`]), which `encodings` and `scanner` run
//! beside the built-in formats. Each module uses only the ones before it.
//!
//! # Host patterns
//!
//! A host adds its own secret shapes as regexes (`[sandbox.leak] patterns`,
//! [`HostPatterns`]); [`scan_with`] and [`StreamScanner::with_patterns`] look for them in
//! the raw text and in every decoded window, with one `RegexSet` pass per text.

mod class;
mod encodings;
mod finding;
mod host;
mod patterns;
mod runs;
mod scanner;
mod stream;
#[cfg(test)]
mod testgen;

pub use encodings::{OVERLAP, WINDOW};
pub use finding::{Encoding, Finding, Fingerprint, PatternName};
pub use host::HostPatterns;
pub use patterns::PATTERN_NAMES;
pub use stream::{StreamScanner, scan_stream, scan_stream_with};

/// Scans `input` for secrets, raw and encoded; returns the findings sorted by position.
///
/// The cost is linear in `input.len()`. Findings report where the secret sits in `input`
/// and a [`Fingerprint`], never the secret. To redact secrets the host already knows and
/// to scan what remains, see [`crate::guard::redact::Redactor`].
///
/// ```
/// let key = format!("AKIA{}", "Q7RX2M4PZ9KD3LWB");
/// let found = stockade::scan(format!("aws_access_key_id = {key}\n").as_bytes());
/// assert_eq!(found[0].pattern, "aws_access_key_id");
/// assert_eq!(found[0].range, 20..40);
/// ```
pub fn scan(input: &[u8]) -> Vec<Finding> {
    scanner::scan(input, &HostPatterns::default())
}

/// [`scan`] for the built-in formats and the host's own `patterns`
/// ([`HostPatterns`]: a policy's `[sandbox.leak]` table), in the same encodings.
///
/// A sandboxed program's output is scanned this way by its
/// [`Child::redactor`](crate::Child::redactor) and its
/// [`LineStream`](crate::LineStream)s, with the patterns of the sandbox's policy.
pub fn scan_with(input: &[u8], patterns: &HostPatterns) -> Vec<Finding> {
    scanner::scan(input, patterns)
}
