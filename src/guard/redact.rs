//! Redaction of the secrets a host knows: its secret store and every `secret_env` value.
//!
//! A [`Redactor`] replaces every occurrence of the known values with [`REDACTED`], many
//! values at once in one Aho-Corasick pass. It also replaces the encoded forms a worker is
//! likely to print (hex, base64 in both alphabets at each of the three byte alignments, and
//! percent-encoding), so that an expected secret never shows up in a later [`scan`] as a
//! pattern finding. It runs first; [`Redactor::scrub`] and [`RedactingWriter`] then scan
//! what remains for the secrets the host did not know about.
//!
//! [`RedactingWriter`] does the same on a stream (a child's stdout or stderr): a secret split
//! across two writes is still redacted, and memory stays bounded whatever the length of the
//! stream.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::ops::Range;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use crate::guard::leak::{Finding, StreamScanner, scan};

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this are not redacted: replacing every `true` or `1234` would
/// destroy the output and reveal the value by its absence.
pub const MIN_SECRET_LEN: usize = 8;

/// Replaces known secret values, and their encoded forms, in text.
///
/// Cloning is cheap (the automaton is shared). `Debug` shows only counts.
///
/// ```
/// use stockade::Redactor;
///
/// let secret = format!("hunter2-{}", "correct-horse");
/// let r = Redactor::new([&secret]);
/// let out = r.redact(format!("password is {secret}.").as_bytes()).into_owned();
/// assert_eq!(out, b"password is [REDACTED].");
/// ```
#[derive(Clone)]
pub struct Redactor {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None` when there is nothing to redact.
    automaton: Option<AhoCorasick>,
    /// Skips the text that cannot hold a needle, so the automaton runs on little of it.
    filter: GramFilter,
    /// Every needle (values and their encodings), sorted and deduplicated: the streaming
    /// adapter looks up whether the end of its buffer starts one.
    needles: Vec<Vec<u8>>,
    /// Whether some needle starts with this byte.
    first: [bool; 256],
    /// The length of the longest needle.
    longest: usize,
    /// How many values were given and kept.
    values: usize,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("values", &self.inner.values)
            .field("needles", &self.inner.needles.len())
            .finish()
    }
}

impl Default for Redactor {
    fn default() -> Redactor {
        Redactor::new(std::iter::empty::<&[u8]>())
    }
}

impl Redactor {
    /// A redactor for `secrets`. Values shorter than [`MIN_SECRET_LEN`] bytes are skipped;
    /// duplicates are merged.
    ///
    /// Each value is also matched hex-encoded (lower and upper case), base64-encoded (both
    /// alphabets, at the three alignments a value can have inside a longer base64 text,
    /// without the one or two characters at either end that depend on neighbouring bytes)
    /// and percent-encoded (only the bytes a URL must escape, or every byte; either case).
    pub fn new<I, S>(secrets: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let mut values: Vec<Vec<u8>> = secrets
            .into_iter()
            .map(|s| s.as_ref().to_vec())
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        values.sort_unstable();
        values.dedup();
        let mut needles = Vec::with_capacity(values.len() * 10);
        for v in &values {
            encodings(v, &mut needles);
        }
        needles.retain(|n| n.len() >= MIN_SECRET_LEN);
        needles.sort_unstable();
        needles.dedup();
        let mut first = [false; 256];
        for n in &needles {
            first[n[0] as usize] = true;
        }
        let automaton = (!needles.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                // A full DFA: one table lookup per byte, whatever the number of needles.
                .kind(Some(AhoCorasickKind::DFA))
                .build(&needles)
                .expect("literal needles always build")
        });
        Redactor {
            inner: Arc::new(Inner {
                automaton,
                longest: needles.iter().map(Vec::len).max().unwrap_or(0),
                filter: GramFilter::new(&needles),
                first,
                needles,
                values: values.len(),
            }),
        }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.inner.values == 0
    }

    /// How many distinct values are redacted (not counting their encodings).
    pub fn len(&self) -> usize {
        self.inner.values
    }

    /// `input` with every known secret replaced by [`REDACTED`]; borrowed when nothing
    /// matched.
    pub fn redact<'a>(&self, input: &'a [u8]) -> Cow<'a, [u8]> {
        let Some(ac) = &self.inner.automaton else {
            return Cow::Borrowed(input);
        };
        let mut out = Vec::new();
        let mut at = 0;
        self.for_each_match(ac, input, |start, end| {
            if out.is_empty() {
                out.reserve(input.len());
            }
            out.extend_from_slice(&input[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            at = end;
            true
        });
        if at == 0 && out.is_empty() {
            return Cow::Borrowed(input);
        }
        out.extend_from_slice(&input[at..]);
        Cow::Owned(out)
    }

    /// Calls `f(start, end)` for each match, as `ac.find_iter(hay)` finds them (leftmost
    /// longest, not overlapping), until `f` returns false.
    ///
    /// The automaton costs a table lookup per byte; most text holds no needle. Every needle
    /// is at least [`MIN_SECRET_LEN`] (8) bytes long, so any occurrence contains one of the
    /// 4-byte grams sampled every 5 bytes. A sampled gram that occurs in no needle rules out
    /// its neighbourhood; the automaton runs only on the merged neighbourhoods (one needle
    /// length either side) of the grams that do occur in a needle. Every occurrence lies
    /// whole in one neighbourhood and neighbourhoods do not overlap once merged, so the
    /// matches are the ones a search of the whole text finds.
    fn for_each_match(
        &self,
        ac: &AhoCorasick,
        hay: &[u8],
        mut f: impl FnMut(usize, usize) -> bool,
    ) {
        let inner = &*self.inner;
        let reach = inner.longest;
        let mut pending: Option<Range<usize>> = None;
        let mut i = 0;
        loop {
            let hit = i + GRAM <= hay.len() && inner.filter.contains(&hay[i..i + GRAM]);
            let done = i + GRAM > hay.len();
            if hit {
                let area = i.saturating_sub(reach - GRAM)..hay.len().min(i + reach);
                match &mut pending {
                    Some(p) if area.start <= p.end => p.end = area.end,
                    _ => {
                        if let Some(p) = pending.replace(area) {
                            if !search(ac, hay, p, &mut f) {
                                return;
                            }
                        }
                    }
                }
            }
            if done {
                break;
            }
            i += STEP;
        }
        if let Some(p) = pending {
            search(ac, hay, p, &mut f);
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

    /// Redacts the known secrets, then [`scan`]s the result for unknown ones. The
    /// findings' ranges refer to the redacted text.
    pub fn scrub(&self, input: &[u8]) -> (Vec<u8>, Vec<Finding>) {
        let out = self.redact(input).into_owned();
        let found = scan(&out);
        (out, found)
    }

    /// Where the longest suffix of `buf` that is a proper prefix of some needle starts
    /// (`buf.len()` when there is none). Bytes from there on must wait for more input.
    fn hold_from(&self, buf: &[u8]) -> usize {
        let inner = &*self.inner;
        let from = buf.len().saturating_sub(inner.longest.saturating_sub(1));
        for t in from..buf.len() {
            if !inner.first[buf[t] as usize] {
                continue;
            }
            let tail = &buf[t..];
            // Needles that extend `tail` sort right after it.
            let i = inner.needles.partition_point(|n| n.as_slice() <= tail);
            if inner.needles.get(i).is_some_and(|n| n.starts_with(tail)) {
                return t;
            }
        }
        buf.len()
    }
}

/// The gram length of [`GramFilter`].
const GRAM: usize = 4;
/// The sampling step: any needle of [`MIN_SECRET_LEN`] bytes or more contains a whole gram
/// starting at one of `STEP` consecutive positions.
const STEP: usize = MIN_SECRET_LEN - GRAM + 1;

/// The set of 4-byte grams that occur in some needle: a 2^20-bit hashed bitmap in front of
/// a sorted list, so a miss costs one bit test.
struct GramFilter {
    bits: Vec<u64>,
    grams: Vec<u32>,
}

impl GramFilter {
    const HASH_BITS: u32 = 20;

    fn new(needles: &[Vec<u8>]) -> GramFilter {
        let mut grams: Vec<u32> = needles
            .iter()
            .flat_map(|n| n.windows(GRAM).map(gram))
            .collect();
        grams.sort_unstable();
        grams.dedup();
        let mut bits = vec![0u64; (1 << Self::HASH_BITS) / 64];
        for &g in &grams {
            let h = Self::hash(g);
            bits[h / 64] |= 1 << (h % 64);
        }
        GramFilter { bits, grams }
    }

    fn hash(g: u32) -> usize {
        (g.wrapping_mul(0x9e37_79b1) >> (32 - Self::HASH_BITS)) as usize
    }

    fn contains(&self, window: &[u8]) -> bool {
        let g = gram(window);
        let h = Self::hash(g);
        self.bits[h / 64] & (1 << (h % 64)) != 0 && self.grams.binary_search(&g).is_ok()
    }
}

fn gram(w: &[u8]) -> u32 {
    u32::from_le_bytes([w[0], w[1], w[2], w[3]])
}

/// Runs the automaton on `hay[area]`; returns false when `f` asked to stop.
fn search(
    ac: &AhoCorasick,
    hay: &[u8],
    area: Range<usize>,
    f: &mut impl FnMut(usize, usize) -> bool,
) -> bool {
    let base = area.start;
    for m in ac.find_iter(&hay[area]) {
        if !f(base + m.start(), base + m.end()) {
            return false;
        }
    }
    true
}

const B64_STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn base64_std(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = u32::from(c[0]) << 16
            | u32::from(*c.get(1).unwrap_or(&0)) << 8
            | u32::from(*c.get(2).unwrap_or(&0));
        let chars = c.len() + 1;
        for k in 0..chars {
            out.push(B64_STD[(n >> (18 - 6 * k) & 63) as usize]);
        }
    }
    out
}

/// Pushes `v` and the encoded forms of `v` a worker is likely to print.
fn encodings(v: &[u8], out: &mut Vec<Vec<u8>>) {
    out.push(v.to_vec());
    for digits in [HEX_LOWER, HEX_UPPER] {
        out.push(
            v.iter()
                .flat_map(|b| [digits[(b >> 4) as usize], digits[(b & 15) as usize]])
                .collect(),
        );
    }
    // With `a` bytes before it, the value covers bits 8a..8a+8n of the character stream;
    // keep the characters that depend on the value alone.
    for a in 0..3 {
        let mut padded = vec![0u8; a];
        padded.extend_from_slice(v);
        let enc = base64_std(&padded);
        let (lo, hi) = ((8 * a).div_ceil(6), (8 * a + 8 * v.len()) / 6);
        if hi > lo {
            let std = enc[lo..hi].to_vec();
            let url: Vec<u8> = std
                .iter()
                .map(|&c| match c {
                    b'+' => b'-',
                    b'/' => b'_',
                    c => c,
                })
                .collect();
            out.push(std);
            out.push(url);
        }
    }
    for digits in [HEX_UPPER, HEX_LOWER] {
        let mut pct = Vec::with_capacity(v.len());
        for &b in v {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                pct.push(b);
            } else {
                pct.extend_from_slice(&[
                    b'%',
                    digits[(b >> 4) as usize],
                    digits[(b & 15) as usize],
                ]);
            }
        }
        out.push(pct);
        out.push(
            v.iter()
                .flat_map(|b| [b'%', digits[(b >> 4) as usize], digits[(b & 15) as usize]])
                .collect(),
        );
    }
}

/// A [`Write`] adapter that redacts known secrets on the way to `inner` and scans what it
/// writes for unknown ones: put it between a child's stdout or stderr and its destination.
///
/// Bytes that could be the start of a known secret are held back until the next write
/// shows whether they are (at most the longest encoded secret, less one byte), so a secret
/// split across writes is still redacted, and the output equals what
/// [`Redactor::redact`] makes of the whole stream. [`flush`](Write::flush) keeps those
/// bytes too: releasing them would let a secret through in two halves.
/// [`finish`](Self::finish) releases them, as a stream that ends inside a secret did not
/// print it whole.
///
/// Findings refer to offsets in the redacted output; see [`StreamScanner`] for when they
/// become available. Memory stays bounded whatever the stream's length.
///
/// ```
/// use std::io::Write;
/// use stockade::{RedactingWriter, Redactor};
///
/// let secret = format!("s3cr3t-{}", "value-0042");
/// let mut w = RedactingWriter::new(Redactor::new([&secret]), Vec::new());
/// w.write_all(&secret.as_bytes()[..5])?;
/// w.write_all(&secret.as_bytes()[5..])?;
/// w.write_all(b" done\n")?;
/// let (out, findings) = w.finish()?;
/// assert_eq!(out, b"[REDACTED] done\n");
/// assert!(findings.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct RedactingWriter<W: Write> {
    redactor: Redactor,
    inner: W,
    /// Input not yet written: a possible start of a secret.
    held: Vec<u8>,
    out: Vec<u8>,
    scanner: Option<StreamScanner>,
    findings: Vec<Finding>,
}

impl<W: Write> RedactingWriter<W> {
    /// Redacts with `redactor` and scans the redacted output.
    pub fn new(redactor: Redactor, inner: W) -> RedactingWriter<W> {
        RedactingWriter {
            redactor,
            inner,
            held: Vec::new(),
            out: Vec::new(),
            scanner: Some(StreamScanner::new()),
            findings: Vec::new(),
        }
    }

    /// Redacts with `redactor` and does not scan.
    pub fn without_scan(redactor: Redactor, inner: W) -> RedactingWriter<W> {
        RedactingWriter {
            scanner: None,
            ..RedactingWriter::new(redactor, inner)
        }
    }

    /// The findings so far.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Takes the findings so far, leaving none.
    pub fn take_findings(&mut self) -> Vec<Finding> {
        std::mem::take(&mut self.findings)
    }

    /// The wrapped writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Writes the bytes held back, scans the rest of the stream and flushes; returns the
    /// wrapped writer and the findings not yet taken.
    ///
    /// # Errors
    ///
    /// Writing to or flushing the wrapped writer failed.
    pub fn finish(mut self) -> io::Result<(W, Vec<Finding>)> {
        self.process(&[], true)?;
        if let Some(scanner) = self.scanner.take() {
            self.findings.extend(scanner.finish());
        }
        self.inner.flush()?;
        Ok((self.inner, self.findings))
    }

    fn process(&mut self, data: &[u8], last: bool) -> io::Result<()> {
        let Some(ac) = self.redactor.inner.automaton.clone() else {
            return self.emit(data);
        };
        self.held.extend_from_slice(data);
        let hold = if last {
            self.held.len()
        } else {
            self.redactor.hold_from(&self.held)
        };
        // A match that starts before `hold` cannot grow with more input, and no match can
        // start earlier than it once more input arrives: it is final. The first match at
        // or after `hold` may still change.
        self.out.clear();
        let mut at = 0;
        let (held, out) = (&self.held, &mut self.out);
        self.redactor.for_each_match(&ac, held, |start, end| {
            if start >= hold {
                return false;
            }
            out.extend_from_slice(&held[at..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            at = end;
            true
        });
        let cut = at.max(hold);
        self.out.extend_from_slice(&self.held[at..cut]);
        self.held.drain(..cut);
        let out = std::mem::take(&mut self.out);
        let r = self.emit(&out);
        self.out = out;
        r
    }

    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.inner.write_all(bytes)?;
        if let Some(scanner) = &mut self.scanner {
            self.findings.extend(scanner.push(bytes));
        }
        Ok(())
    }
}

impl<W: Write> fmt::Debug for RedactingWriter<W> {
    /// Counts only: the held bytes may be part of a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedactingWriter")
            .field("redactor", &self.redactor)
            .field("held", &self.held.len())
            .field("scanner", &self.scanner)
            .field("findings", &self.findings)
            .finish_non_exhaustive()
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    /// Takes all of `buf`; what may be the start of a secret waits for the next write.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.process(buf, false)?;
        Ok(buf.len())
    }

    /// Flushes the wrapped writer and scans what was written so far. Bytes that may be the
    /// start of a secret stay held back.
    fn flush(&mut self) -> io::Result<()> {
        if let Some(scanner) = &mut self.scanner {
            self.findings.extend(scanner.flush());
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(n: u64) -> String {
        format!("val{n}-{}", "Zq8xW3pL".repeat(3))
    }

    #[test]
    fn filtered_matches_equal_a_full_search() {
        let secrets: Vec<String> = (0..20).map(secret).collect();
        let r = Redactor::new(&secrets);
        let ac = r.inner.automaton.clone().unwrap();
        let mut x = 7u64;
        for round in 0..200 {
            let mut text = Vec::new();
            while text.len() < 3000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match (x >> 33) % 7 {
                    0 => text.extend_from_slice(secrets[(x >> 40) as usize % 20].as_bytes()),
                    1 => text.extend_from_slice(&secrets[(x >> 40) as usize % 20].as_bytes()[..9]),
                    _ => text.extend_from_slice(b"plain words Zq8xW3pL "),
                }
            }
            let full: Vec<_> = ac.find_iter(&text).map(|m| (m.start(), m.end())).collect();
            let mut filtered = Vec::new();
            r.for_each_match(&ac, &text, |s, e| {
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

    #[test]
    fn encoded_forms_are_redacted() {
        let s = secret(1);
        let r = Redactor::new([&s]);
        let hex: String = s.bytes().map(|b| format!("{b:02X}")).collect();
        assert_eq!(r.redact_str(&format!("x {hex} y")), "x [REDACTED] y");
        // base64 of a longer text that contains the secret at each alignment.
        for pad in 0..3 {
            let text = format!("{}{s} and more", "p".repeat(pad));
            let enc = String::from_utf8(base64_std(text.as_bytes())).unwrap();
            let out = r.redact_str(&enc);
            assert!(out.contains(REDACTED), "pad {pad}: {out}");
        }
    }

    #[test]
    fn base64_encoder_matches_known_vectors() {
        assert_eq!(base64_std(b"hello world"), b"aGVsbG8gd29ybGQ");
        assert_eq!(base64_std(b"\xfb\xff"), b"+/8");
    }

    #[test]
    fn hold_from_finds_the_longest_pending_prefix() {
        let r = Redactor::new(["abcdefghij"]);
        assert_eq!(r.hold_from(b"xxabcd"), 2);
        assert_eq!(r.hold_from(b"xxabcx"), 6);
        assert_eq!(r.hold_from(b"abcdefghij"), 10);
    }

    #[test]
    fn stream_output_equals_one_shot_at_every_split() {
        let (a, b) = (secret(1), secret(22));
        let r = Redactor::new([&a, &b]);
        let text = format!("start {a}{b} mid {}{a} end {}", &a[..9], &b[..12]);
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
}
