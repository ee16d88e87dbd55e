//! Redaction of the secrets a host knows: its secret store and every `secret_env` value.
//!
//! A [`Redactor`] replaces every occurrence of the known values with [`REDACTED`], many
//! values at once in one Aho-Corasick pass. It also replaces the encoded forms a worker is
//! likely to print (hex, base64 in both alphabets at each of the three byte alignments, and
//! percent-encoding), so that an expected secret never shows up in a later [`scan`](crate::guard::leak::scan) as a
//! pattern finding. It runs first; [`Redactor::scrub`] and [`RedactingWriter`] then scan
//! what remains for the secrets the host did not know about.
//!
//! Matching follows the text as a terminal draws it: escape sequences and controls that
//! draw nothing between a secret's characters (`s\e[mE\e[mC…`, a NUL, a C1 CSI) do not
//! hide it, and are replaced together with it; a secret in a string's body (a window
//! title) is matched there. Text overwritten on the screen (backspace, carriage return,
//! cursor movement) is not followed, nor a secret with more than 256 bytes of escapes
//! between two of its characters: redaction is for accidental leaks, not a program that
//! means to show a secret (SECURITY.md has the list).
//!
//! [`RedactingWriter`] does the same on a stream (a child's stdout or stderr): a secret split
//! across two writes is still redacted, and memory stays bounded whatever the length of the
//! stream.
//!
//! Building a redactor (the encodings, the automaton, the gram filter) costs far more than
//! cloning one. A `Sandbox` builds the redactor of the host's secrets once, when they are
//! set, and every child shares it; a command's own `secret_env` values get a small set of
//! their own beside it ([`Redactor::with_secrets`]).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::guard::leak::{Finding, HostPatterns, scan_with};

mod encode;
mod set;
mod view;
mod writer;

use set::NeedleSet;
use view::{MAX_GAP, Scan, View};
pub use writer::RedactingWriter;

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this are not redacted by [`Redactor::new`] and
/// [`Redactor::with_secrets`]: replacing every `true` or `1234` of a secret store would
/// destroy the output and reveal the value by its absence. Encoded forms (hex, base64,
/// percent-encoding) shorter than this are never matched.
pub const MIN_SECRET_LEN: usize = 8;

/// The shortest value a [`Command::secret_env`](crate::Command::secret_env) variable may
/// have. A command's own secret of 4 to 7 bytes (a PIN) is redacted, with a `tracing`
/// warning, since the host named it a secret; a shorter one is refused at spawn
/// ([`PlanError::SecretTooShort`](crate::error::PlanError::SecretTooShort)): 1 to 3 bytes
/// would replace common text everywhere and could not be told apart from it.
pub const MIN_SECRET_ENV_LEN: usize = 4;

/// Replaces known secret values, and their encoded forms, in text; and carries the host's
/// own secret patterns ([`HostPatterns`], [`Redactor::with_patterns`]) that the scans
/// after it ([`Redactor::scrub`], [`RedactingWriter`], a child's
/// [`LineStream`](crate::LineStream)) look for beside the built-in formats.
///
/// Cloning is cheap (the automata are shared), and so is an empty redactor. `Debug` shows
/// only counts and pattern names.
///
/// ```
/// use stockade::Redactor;
///
/// let secret = format!("hunter2-{}", "correct-horse");
/// let r = Redactor::new([&secret]);
/// let out = r.redact(format!("password is {secret}.").as_bytes()).into_owned();
/// assert_eq!(out, b"password is [REDACTED].");
/// ```
#[derive(Clone, Default)]
pub struct Redactor {
    /// The values given to [`Redactor::new`], shared by every clone.
    shared: Option<Arc<NeedleSet>>,
    /// The values added by [`Redactor::with_secrets`] that `shared` does not hold.
    own: Option<Arc<NeedleSet>>,
    /// The host's patterns, for the scans of the redacted text.
    patterns: HostPatterns,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let needles: usize = self.sets().map(|s| s.needles()).sum();
        f.debug_struct("Redactor")
            .field("values", &self.len())
            .field("needles", &needles)
            .field("patterns", &self.patterns)
            .finish()
    }
}

/// `secrets` at least `min` bytes long, sorted and deduplicated.
fn values<I, S>(secrets: I, min: usize) -> Vec<Vec<u8>>
where
    I: IntoIterator<Item = S>,
    S: AsRef<[u8]>,
{
    let mut values: Vec<Vec<u8>> = secrets
        .into_iter()
        .map(|s| s.as_ref().to_vec())
        .filter(|s| s.len() >= min)
        .collect();
    values.sort_unstable();
    values.dedup();
    values
}

impl Redactor {
    /// A redactor for `secrets`. Values shorter than [`MIN_SECRET_LEN`] bytes are skipped;
    /// duplicates are merged.
    ///
    /// Each value is also matched hex-encoded (lower and upper case), base64-encoded (both
    /// alphabets, at the three alignments a value can have inside a longer base64 text,
    /// without the one or two characters at either end that depend on neighbouring bytes)
    /// and percent-encoding (only the bytes a URL must escape, or every byte; either case).
    pub fn new<I, S>(secrets: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        Redactor {
            shared: NeedleSet::build(values(secrets, MIN_SECRET_LEN), None).map(Arc::new),
            own: None,
            patterns: HostPatterns::default(),
        }
    }

    /// This redactor, with `patterns` (replacing any it had) looked for by the scans of
    /// the redacted text: [`Redactor::scrub`], [`RedactingWriter::new`] and the
    /// [`LineStream`](crate::LineStream)s of a child. A [`Sandbox`](crate::Sandbox) gives
    /// every child's redactor its policy's `[sandbox.leak]` patterns.
    pub fn with_patterns(mut self, patterns: HostPatterns) -> Redactor {
        self.patterns = patterns;
        self
    }

    /// The host patterns the scans after redaction look for (none by default).
    pub fn patterns(&self) -> &HostPatterns {
        &self.patterns
    }

    /// A redactor for this one's secrets and `more`, redacting as
    /// [`Redactor::new`] of all of them would.
    ///
    /// It shares this redactor's automaton and builds a small one for the values of `more`
    /// that it does not already hold (none when it holds them all), so that adding a
    /// command's few secrets to a large secret store costs little. The small set's gram
    /// filter also admits the shared set's grams, so redaction still makes one pass of
    /// one filter over the text. Calling it on a
    /// redactor that was itself made by `with_secrets` rebuilds that small part.
    pub fn with_secrets<I, S>(&self, more: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        self.with_values(values(more, MIN_SECRET_LEN))
    }

    /// [`Redactor::with_secrets`] for a command's `secret_env` values, which may be as
    /// short as [`MIN_SECRET_ENV_LEN`] (the command refuses shorter ones before this).
    pub(crate) fn with_env_secrets<I, S>(&self, more: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        self.with_values(values(more, MIN_SECRET_ENV_LEN))
    }

    /// The shared part of [`Redactor::with_secrets`]: `own` is sorted and deduplicated.
    fn with_values(&self, mut own: Vec<Vec<u8>>) -> Redactor {
        own.retain(|v| !self.sets().any(|s| s.values().binary_search(v).is_ok()));
        if own.is_empty() {
            return self.clone();
        }
        if let Some(old) = &self.own {
            own.extend_from_slice(old.values());
            own.sort_unstable();
            own.dedup();
        }
        Redactor {
            shared: self.shared.clone(),
            own: NeedleSet::build(own, self.shared.as_deref()).map(Arc::new),
            patterns: self.patterns.clone(),
        }
    }

    /// The needle sets, the shared one first.
    fn sets(&self) -> impl Iterator<Item = &NeedleSet> {
        self.shared.iter().chain(&self.own).map(|s| &**s)
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.shared.is_none() && self.own.is_none()
    }

    /// How many distinct values are redacted (not counting their encodings).
    pub fn len(&self) -> usize {
        self.sets().map(|s| s.values().len()).sum()
    }

    /// `input` with every known secret replaced by [`REDACTED`]; borrowed when nothing
    /// matched.
    ///
    /// Secrets are matched in the text as a terminal draws it: escape sequences and
    /// controls that draw nothing between a secret's characters (`s\e[mE\e[mC…`) do not
    /// hide it, and are replaced with it (see the [module](self) docs for what is and is
    /// not followed).
    pub fn redact<'a>(&self, input: &'a [u8]) -> Cow<'a, [u8]> {
        if self.is_empty() {
            return Cow::Borrowed(input);
        }
        let mut out = Vec::new();
        let mut at = 0;
        let mut view = View::default();
        self.matches_in(Scan::default(), input, true, &mut view, |start, end| {
            if out.is_empty() {
                out.reserve(input.len());
            }
            out.extend_from_slice(&input[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            at = end;
        });
        if at == 0 && out.is_empty() {
            return Cow::Borrowed(input);
        }
        out.extend_from_slice(&input[at..]);
        Cow::Owned(out)
    }

    /// Calls `f(start, end)` with the raw range of each match in `raw` (the next piece of
    /// a stream, read from `scan`) that no more input can change, in order; returns where
    /// the bytes that must wait for more input start (`raw.len()` when `last`), and,
    /// unless `raw` was its own view (then `view` is not filled), how many bytes are
    /// decided and the scan state after them.
    ///
    /// The matches are those of the view; each covers the raw bytes from its first drawn
    /// byte to its last. A match that starts before the returned point cannot grow with
    /// more input, and none can start earlier once more input arrives.
    fn matches_in(
        &self,
        scan: Scan,
        raw: &[u8],
        last: bool,
        view: &mut View,
        mut f: impl FnMut(usize, usize),
    ) -> (usize, Option<(usize, Scan)>) {
        if scan.lexer.in_text() && scan.gap <= MAX_GAP && view::is_plain(raw) {
            let hold = if last { raw.len() } else { self.hold_from(raw) };
            self.for_each_match(raw, |start, end| {
                if start >= hold {
                    return false;
                }
                f(start, end);
                true
            });
            return (hold, None);
        }
        let mut scan = scan;
        let decided = view::build(&mut scan, raw, last, view);
        // The drawn text and the strings' bodies are searched apart; a match in the text
        // covers whole strings, so a match in a body is either inside it or apart.
        // After more than MAX_GAP bytes that drew nothing (an endless sequence), the next
        // drawn byte follows a break: no match under way can go on, and nothing is held.
        let hold_in = |seen: &view::Seen, gap: usize| {
            let hold = if last || gap > MAX_GAP {
                seen.text.len()
            } else {
                self.hold_from(&seen.text)
            };
            let raw_hold = seen.at.get(hold).copied().unwrap_or(decided);
            (hold, raw_hold)
        };
        let (text_hold, text_raw_hold) = hold_in(&view.text, scan.gap);
        let (body_hold, body_raw_hold) = hold_in(&view.body, scan.body_gap);
        let hold = text_raw_hold.min(body_raw_hold);
        let mut ranges = Vec::new();
        for (seen, seen_hold) in [(&view.text, text_hold), (&view.body, body_hold)] {
            self.for_each_match(&seen.text, |start, end| {
                let range = (seen.at[start], seen.at[end - 1] + 1);
                if start >= seen_hold || range.0 >= hold {
                    return false;
                }
                ranges.push(range);
                true
            });
        }
        ranges.sort_unstable();
        let mut done = 0;
        for (start, end) in ranges {
            if start >= done {
                f(start, end);
                done = end;
            }
        }
        (hold, Some((decided, scan)))
    }

    /// Calls `f(start, end)` for each match of any needle of any set, leftmost longest and
    /// not overlapping (as one automaton of all the needles would find them), until `f`
    /// returns false.
    fn for_each_match(&self, hay: &[u8], mut f: impl FnMut(usize, usize) -> bool) {
        match (&self.shared, &self.own) {
            (None, None) => {}
            (Some(one), None) | (None, Some(one)) => {
                one.for_each_area(hay, |area| one.search(hay, area, &mut f));
            }
            (Some(shared), Some(own)) => {
                // `own` was built beside `shared`: its areas hold every match of both.
                own.for_each_area(hay, |area| search_both([shared, own], hay, area, &mut f));
            }
        }
    }

    /// [`redact`](Self::redact) for text. A value that is not valid UTF-8 can split a
    /// character; such bytes come back as U+FFFD.
    pub fn redact_str<'a>(&self, input: &'a str) -> Cow<'a, str> {
        match self.redact(input.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(input),
            Cow::Owned(v) => Cow::Owned(
                String::from_utf8(v)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        }
    }

    /// Redacts the known secrets, then scans the result for unknown ones: the built-in
    /// formats and this redactor's [`patterns`](Self::patterns)
    /// ([`scan_with`]). The findings' ranges refer to the
    /// redacted text.
    pub fn scrub(&self, input: &[u8]) -> (Vec<u8>, Vec<Finding>) {
        let out = self.redact(input).into_owned();
        let found = scan_with(&out, &self.patterns);
        (out, found)
    }

    /// Where the longest suffix of `buf` that is a proper prefix of some needle starts
    /// (`buf.len()` when there is none). Bytes from there on must wait for more input.
    fn hold_from(&self, buf: &[u8]) -> usize {
        self.sets()
            .map(|s| s.hold_from(buf))
            .min()
            .unwrap_or(buf.len())
    }
}

/// The leftmost-longest, non-overlapping matches of two sets' needles together in
/// `hay[area]`, as one automaton of both would find them; returns false when `f` asked to
/// stop.
///
/// Merging the two sets' own match lists would not do: a match of one set that overlaps a
/// match of the other may hide a later match of its own set that the union finds. So each
/// set is asked for its next match from where the last chosen match ended, and the
/// leftmost (then longest) of the two is chosen.
fn search_both(
    sets: [&NeedleSet; 2],
    hay: &[u8],
    area: Range<usize>,
    f: &mut impl FnMut(usize, usize) -> bool,
) -> bool {
    let end = area.end;
    let mut next = sets.map(|s| s.find(hay, area.start, end));
    loop {
        let best = match &next {
            [Some(a), Some(b)] => {
                if (a.start, std::cmp::Reverse(a.end)) <= (b.start, std::cmp::Reverse(b.end)) {
                    a.clone()
                } else {
                    b.clone()
                }
            }
            [Some(m), None] | [None, Some(m)] => m.clone(),
            [None, None] => return true,
        };
        if !f(best.start, best.end) {
            return false;
        }
        for (k, set) in sets.iter().enumerate() {
            if next[k].as_ref().is_some_and(|m| m.start < best.end) {
                next[k] = set.find(hay, best.end, end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD_NO_PAD;

    use super::*;

    fn secret(n: u64) -> String {
        format!("val{n}-{}", "Zq8xW3pL".repeat(3))
    }

    /// A linear congruential generator for test texts.
    fn lcg(x: &mut u64) -> u64 {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *x >> 33
    }

    #[test]
    fn filtered_matches_equal_a_full_search() {
        let secrets: Vec<String> = (0..20).map(secret).collect();
        let r = Redactor::new(&secrets);
        let ac = r.shared.as_deref().unwrap().automaton();
        let mut x = 7u64;
        for round in 0..200 {
            let mut text = Vec::new();
            while text.len() < 3000 {
                let k = lcg(&mut x);
                match k % 7 {
                    0 => text.extend_from_slice(secrets[(k >> 7) as usize % 20].as_bytes()),
                    1 => text.extend_from_slice(&secrets[(k >> 7) as usize % 20].as_bytes()[..9]),
                    _ => text.extend_from_slice(b"plain words Zq8xW3pL "),
                }
            }
            let full: Vec<_> = ac.find_iter(&text).map(|m| (m.start(), m.end())).collect();
            let mut filtered = Vec::new();
            r.for_each_match(&text, |s, e| {
                filtered.push((s, e));
                true
            });
            assert_eq!(filtered, full, "round {round}");
        }
    }

    #[test]
    fn short_values_are_skipped() {
        let r = Redactor::new(["true", "1234567"]);
        assert!(r.is_empty());
        assert_eq!(r.redact(b"true 1234567"), &b"true 1234567"[..]);
    }

    /// A command's own secret of 4 to 7 bytes is redacted, alone and beside the host's
    /// set, wherever it stands (the gram filter samples densely enough); its short encoded
    /// forms are not matched, and a 3-byte one never gets in.
    #[test]
    fn short_env_secrets_are_redacted() {
        let host = Redactor::new([secret(1)]);
        for base in [Redactor::default(), host] {
            let r = base.with_env_secrets(["4711", "abc1234", "xy"]);
            assert_eq!(r.len(), base.len() + 2);
            for pad in 0..12 {
                let text = format!("{}4711 and abc1234.", "p".repeat(pad));
                let want = format!("{}[REDACTED] and [REDACTED].", "p".repeat(pad));
                assert_eq!(r.redact_str(&text), want);
                assert_eq!(
                    stream_bytes_equals_one_shot(&r, text.as_bytes()),
                    want.as_bytes()
                );
            }
            assert_eq!(r.redact_str("4711"), REDACTED);
            // base64 of "4711" cut to its inner characters is 4 bytes: not a needle.
            assert_eq!(r.redact_str("NDcxMQ xy"), "NDcxMQ xy");
            // hex is 8 bytes: redacted.
            assert_eq!(r.redact_str("34373131"), REDACTED);
            assert_eq!(
                r.redact_str(&secret(1)),
                if base.is_empty() {
                    secret(1)
                } else {
                    REDACTED.into()
                }
            );
        }
        // The public constructors keep the host-secret minimum.
        assert!(Redactor::default().with_secrets(["4711"]).is_empty());
    }

    #[test]
    fn encoded_forms_are_redacted() {
        let s = secret(1);
        let r = Redactor::new([&s]);
        let hex: String = s.bytes().map(|b| format!("{b:02X}")).collect();
        assert_eq!(r.redact_str(&format!("x {hex} y")), "x [REDACTED] y");
        // base64 of a longer text that contains the secret at each alignment.
        for pad in 0..3 {
            let text = format!("{}{s} and more", "p".repeat(pad));
            let enc = STANDARD_NO_PAD.encode(text.as_bytes());
            let out = r.redact_str(&enc);
            assert!(out.contains(REDACTED), "pad {pad}: {out}");
        }
    }

    #[test]
    fn hold_from_finds_the_longest_pending_prefix() {
        let r = Redactor::new(["abcdefghij"]);
        assert_eq!(r.hold_from(b"xxabcd"), 2);
        assert_eq!(r.hold_from(b"xxabcx"), 6);
        assert_eq!(r.hold_from(b"abcdefghij"), 10);
        let both = r.with_secrets(["zzzzyyyyxxxx"]);
        assert_eq!(both.hold_from(b"xxabcd"), 2);
        assert_eq!(both.hold_from(b"abzzzzy"), 2);
        assert_eq!(both.hold_from(b"abcdezzzzyyy"), 5);
    }

    fn stream_equals_one_shot(r: &Redactor, text: &str) {
        let whole = r.redact(text.as_bytes()).into_owned();
        for split in 0..text.len() {
            let mut w = RedactingWriter::without_scan(r.clone(), Vec::new());
            w.write_all(&text.as_bytes()[..split]).unwrap();
            w.flush().unwrap();
            w.write_all(&text.as_bytes()[split..]).unwrap();
            let (out, _) = w.finish().unwrap();
            assert_eq!(out, whole, "split at {split}");
        }
    }

    /// Streaming `text` in two writes split at every point, and byte by byte, gives the
    /// one-shot output; returns it.
    fn stream_bytes_equals_one_shot(r: &Redactor, text: &[u8]) -> Vec<u8> {
        let whole = r.redact(text).into_owned();
        for split in 0..=text.len() {
            let mut w = RedactingWriter::without_scan(r.clone(), Vec::new());
            w.write_all(&text[..split]).unwrap();
            w.flush().unwrap();
            w.write_all(&text[split..]).unwrap();
            let (out, _) = w.finish().unwrap();
            assert_eq!(out, whole, "split at {split} of {text:?}");
        }
        let mut w = RedactingWriter::without_scan(r.clone(), Vec::new());
        for b in text {
            w.write_all(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(w.finish().unwrap().0, whole, "byte by byte: {text:?}");
        whole
    }

    /// Every kind of sequence or control that draws nothing on the screen.
    const SILENT: &[&[u8]] = &[
        b"\x1b[m",
        b"\x1b[1;38;5;208m",
        b"\x1b[K",
        b"\x1b[?25l",
        b"\x1b]0;title\x07",
        b"\x1b]8;;https://example.org/\x1b\\",
        b"\x1bP$q m\x1b\\",
        b"\x1bXsos\x1b\\",
        b"\x1b^pm\x1b\\",
        b"\x1b_Gapc\x1b\\",
        b"\x1b(B",
        b"\x1b7",
        b"\x1b\\",
        b"\x00",
        b"\x07",
        b"\x0e\x0f",
        b"\x1b[1\x00m",
        b"\x7f",
        b"\xc2\x9b0m",
        b"\x9b0m",
        b"\xc2\x80",
        b"\x9d0;t\x9c",
        b"\xc2\x90q\xc2\x9c",
    ];

    /// `value` with `sep` between every two of its bytes.
    fn interleave(value: &[u8], sep: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, b) in value.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(sep);
            }
            out.push(*b);
        }
        out
    }

    #[test]
    fn escapes_between_a_secrets_characters_are_redacted_with_it_at_every_split() {
        let s = secret(1);
        let r = Redactor::new([&s]).with_secrets([secret(2)]);
        for sep in SILENT {
            let text = [
                b"ok \x1b[1m".as_slice(),
                &interleave(s.as_bytes(), sep),
                b"\x1b[m ok",
            ]
            .concat();
            let out = stream_bytes_equals_one_shot(&r, &text);
            assert_eq!(out, b"ok \x1b[1m[REDACTED]\x1b[m ok", "{sep:?}");
            // One escape, after each character in turn.
            for k in 1..s.len() {
                let text = [&s.as_bytes()[..k], sep, &s.as_bytes()[k..]].concat();
                assert_eq!(r.redact(&text), REDACTED.as_bytes(), "{sep:?} at {k}");
            }
        }
        // Encoded forms too.
        let hex = hex::encode(secret(2));
        let text = interleave(hex.as_bytes(), b"\x1b[3m");
        assert_eq!(stream_bytes_equals_one_shot(&r, &text), REDACTED.as_bytes());
    }

    #[test]
    fn a_secret_in_a_strings_body_is_redacted_and_the_string_still_ends() {
        let s = secret(1);
        let r = Redactor::new([&s]);
        for (open, end) in [
            ("\x1b]2;", "\x07"),
            ("\x1b]8;;", "\x1b\\"),
            ("\x1bP", "\x1b\\"),
        ] {
            let text = format!("a{open}t {s} t{end}b");
            let out = stream_bytes_equals_one_shot(&r, text.as_bytes());
            assert_eq!(out, format!("a{open}t {REDACTED} t{end}b").as_bytes());
            // Controls a terminal ignores inside the string.
            let hidden = interleave(s.as_bytes(), b"\x00");
            let text = [open.as_bytes(), &hidden, end.as_bytes()].concat();
            let out = stream_bytes_equals_one_shot(&r, &text);
            assert_eq!(out, [open, REDACTED, end].concat().as_bytes());
        }
    }

    #[test]
    fn what_the_view_does_not_follow() {
        let s = secret(1);
        let r = Redactor::new([&s]);
        let (a, b) = s.split_at(5);
        // Text on both sides of a string's body is not one text.
        let text = format!("\x1b]2;{a}\x07{b}");
        assert_eq!(
            stream_bytes_equals_one_shot(&r, text.as_bytes()),
            text.as_bytes()
        );
        // More than MAX_GAP bytes that draw nothing between two characters break it.
        let text = [
            a.as_bytes(),
            &b"\x1b[m".repeat(MAX_GAP / 3 + 1),
            b.as_bytes(),
        ]
        .concat();
        assert_eq!(stream_bytes_equals_one_shot(&r, &text), text);
        let text = [a.as_bytes(), &b"\x1b[m".repeat(MAX_GAP / 3), b.as_bytes()].concat();
        assert_eq!(stream_bytes_equals_one_shot(&r, &text), REDACTED.as_bytes());
        // Overwriting (backspace, carriage return, cursor movement) is not followed.
        let text = format!("{a}x\x08{b}");
        assert_eq!(r.redact_str(&text), text);
        let text = format!("xxxxx{b}\r{a}");
        assert_eq!(r.redact_str(&text), text);
    }

    /// A start of a secret followed by a sequence that never ends is let go once the
    /// sequence is longer than MAX_GAP: what the stream holds back stays bounded.
    #[test]
    fn an_endless_sequence_after_a_secrets_start_is_not_held() {
        let s = secret(1);
        let r = Redactor::new([&s]);
        for open in ["\x1b[", "\x1b]0;", "\x1bP"] {
            let mut w = RedactingWriter::without_scan(r.clone(), Vec::new());
            w.write_all(&s.as_bytes()[..6]).unwrap();
            w.write_all(open.as_bytes()).unwrap();
            for _ in 0..1000 {
                w.write_all(&[b'1'; 100]).unwrap();
                assert!(w.held_len() <= s.len() + MAX_GAP + 100, "{open:?}");
            }
            w.write_all(&s.as_bytes()[6..]).unwrap();
            let (out, _) = w.finish().unwrap();
            let mut text = [&s.as_bytes()[..6], open.as_bytes()].concat();
            text.extend_from_slice(&[b'1'; 100_000]);
            text.extend_from_slice(&s.as_bytes()[6..]);
            assert_eq!(out, r.redact(&text).into_owned(), "{open:?}");
        }
    }

    #[test]
    fn a_value_with_escapes_in_it_is_found_by_what_it_draws() {
        let v = b"\x1b[1mpass\x07word-1234\x1b[m";
        let r = Redactor::new([v]);
        // The value's own escapes before its first and after its last drawn byte stay.
        assert_eq!(r.redact(v), b"\x1b[1m[REDACTED]\x1b[m".as_slice());
        assert_eq!(r.redact(b"x password-1234 y"), b"x [REDACTED] y".as_slice());
        let held = interleave(b"password-1234", b"\x1b[4m");
        assert_eq!(stream_bytes_equals_one_shot(&r, &held), REDACTED.as_bytes());
    }

    #[test]
    fn stream_output_equals_one_shot_at_every_split() {
        let (a, b) = (secret(1), secret(22));
        let text = format!("start {a}{b} mid {}{a} end {}", &a[..9], &b[..12]);
        stream_equals_one_shot(&Redactor::new([&a, &b]), &text);
        stream_equals_one_shot(&Redactor::new([&a]).with_secrets([&b]), &text);
    }

    /// A match of the added set that wins over an overlapping match of the shared set
    /// uncovers a later match of the shared set, which a merge of each set's own
    /// non-overlapping matches would miss.
    #[test]
    fn with_secrets_redacts_as_one_redactor_of_all() {
        let text = format!(
            "{}{}{}{}",
            "a".repeat(8),
            "b".repeat(8),
            "c".repeat(8),
            "d".repeat(12)
        );
        let (m, p, q) = (&text[0..16], &text[8..24], &text[20..36]);
        let want = "[REDACTED]cccc[REDACTED]";
        assert_eq!(Redactor::new([m, p, q]).redact_str(&text), want);
        assert_eq!(
            Redactor::new([p, q]).with_secrets([m]).redact_str(&text),
            want
        );
        assert_eq!(
            Redactor::new([m]).with_secrets([p, q]).redact_str(&text),
            want
        );

        // Random texts of whole and partial secrets, split between the two sets at random.
        let secrets: Vec<String> = (0..12).map(secret).collect();
        let mut x = 3u64;
        let all = Redactor::new(&secrets);
        for round in 0..60 {
            let (host, own): (Vec<_>, Vec<_>) =
                secrets.iter().partition(|_| lcg(&mut x).is_multiple_of(2));
            let mut text = String::new();
            while text.len() < 600 {
                let k = lcg(&mut x);
                let s = &secrets[(k >> 5) as usize % 12];
                match k % 6 {
                    0 => text.push_str(s),
                    1 => text.push_str(&s[(k >> 9) as usize % 8..]),
                    2 => text.push_str(&s[..8 + (k >> 9) as usize % 8]),
                    3 => text.push_str(&STANDARD_NO_PAD.encode(s)),
                    _ => text.push_str(" Zq8xW3pL val"),
                }
            }
            let two = Redactor::new(&host).with_secrets(&own);
            assert_eq!(two.len(), all.len());
            assert_eq!(
                two.redact_str(&text),
                all.redact_str(&text),
                "round {round}"
            );
        }
    }

    #[test]
    fn with_secrets_shares_the_shared_set() {
        let host = Redactor::new([secret(1), secret(2)]);
        let same = host.with_secrets([secret(2), "short".into()]);
        assert!(same.own.is_none());
        assert!(Arc::ptr_eq(
            same.shared.as_ref().unwrap(),
            host.shared.as_ref().unwrap()
        ));
        let more = host
            .with_secrets([secret(3)])
            .with_secrets([secret(4), secret(1)]);
        assert!(Arc::ptr_eq(
            more.shared.as_ref().unwrap(),
            host.shared.as_ref().unwrap()
        ));
        assert_eq!(more.own.as_ref().unwrap().values().len(), 2);
        assert_eq!(more.len(), 4);
        // Values it already holds, in either set, change nothing.
        let again = more.with_secrets([secret(3), secret(2)]);
        assert!(Arc::ptr_eq(
            again.own.as_ref().unwrap(),
            more.own.as_ref().unwrap()
        ));
        let empty = Redactor::default().with_secrets([secret(5)]);
        assert_eq!(empty.redact_str(&secret(5)), REDACTED);
    }

    /// Children of one sandbox share the automaton of the host's secrets, built once per
    /// `set_secrets`; a command with `secret_env` values adds a small set of its own.
    #[cfg(unix)]
    #[test]
    fn children_share_the_host_secrets_automaton() {
        use crate::{Layer, Policy, Sandbox};

        let ws = tempfile::tempdir().unwrap();
        let mut policy = Policy::with_workspace(ws.path());
        policy.layer = Some(Layer::Passthrough);
        let sb = Sandbox::new(policy).unwrap();
        sb.set_secrets([secret(1), secret(2)]);
        // The sandbox's Debug shows counts, never a value, not even as a list of bytes.
        let dbg = format!("{sb:?}");
        let bytes = format!("{:?}", secret(1).as_bytes());
        assert!(!dbg.contains(&secret(1)), "{dbg}");
        assert!(!dbg.contains(bytes.trim_matches(['[', ']'])), "{dbg}");
        let spawn = |env: Option<&str>| {
            let mut cmd = sb.command("true");
            if let Some(v) = env {
                cmd.secret_env("TOKEN", v);
            }
            let mut child = cmd.spawn().unwrap();
            child.wait().unwrap();
            child.redactor().clone()
        };
        let (a, b) = (spawn(None), spawn(Some(&secret(3))));
        let shared = |r: &Redactor| r.shared.clone().unwrap();
        assert!(Arc::ptr_eq(&shared(&a), &shared(&b)));
        assert!(a.own.is_none());
        assert_eq!(b.own.as_ref().unwrap().values(), [secret(3).into_bytes()]);
        assert_eq!(b.redact_str(&secret(3)), REDACTED);
        sb.set_secrets([secret(4)]);
        let c = spawn(None);
        assert!(!Arc::ptr_eq(&shared(&a), &shared(&c)));
        assert_eq!(c.redact_str(&secret(1)), secret(1));
    }
}
