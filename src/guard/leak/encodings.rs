//! The encoded forms: candidate runs decoded as base64, hex and percent-encoding, in
//! windows, and the decoded bytes scanned for raw tokens.
//!
//! Runs long enough to hide an encoded secret (base64 ≥ [`MIN_BASE64`] characters, hex ≥
//! [`MIN_HEX`]) are decoded in windows of [`WINDOW`] bytes that overlap by [`OVERLAP`]
//! bytes, at every alignment (four for base64, two for hex), and the decoded bytes go
//! through the same token matchers. Each input byte is decoded a bounded number of times,
//! so the cost is linear in the input however long a run is.
//!
//! The decoders are written here rather than taken from the `base64`, `hex` and
//! `percent-encoding` crates, for the reasons given at [`decode_base64`], [`decode_hex`]
//! and [`decode_url`] (speed on short windows, and where each decoded byte came from); the
//! tests hold the base64 and hex decoders to those crates' output.

use std::ops::Range;

use super::class::{CLASS, DASH, HEX, PLUS_SLASH, UNDERSCORE, URL, is};
use super::finding::{Encoding, Finding, Fingerprint, PatternName};
use super::host::{HostHit, HostPatterns};
use super::patterns::{Hit, MIN_TOKEN, raw_hits};

/// Base64 runs shorter than this are not decoded.
const MIN_BASE64: usize = 24;
/// Hex runs shorter than this are not decoded.
const MIN_HEX: usize = 40;
/// Runs shorter than this are not decoded at all.
pub(super) const MIN_DECODED: usize = if MIN_BASE64 < MIN_HEX {
    MIN_BASE64
} else {
    MIN_HEX
};
/// How many encoded bytes of one run are decoded at a time.
pub const WINDOW: usize = 128 * 1024;
/// How much consecutive windows of one run overlap: more than the longest encoded finding
/// (a hex-encoded PEM block of 8 KiB), so every finding lies whole in one window.
pub const OVERLAP: usize = 20 * 1024;

/// Which decoder a run goes through.
#[derive(Clone, Copy, PartialEq)]
enum Decoder {
    /// Either alphabet; the encoding reported.
    Base64(Encoding),
    Hex,
    Url,
}

impl Decoder {
    /// The encoding findings in the decoded text are reported with.
    fn encoding(self) -> Encoding {
        match self {
            Decoder::Base64(encoding) => encoding,
            Decoder::Hex => Encoding::Hex,
            Decoder::Url => Encoding::Url,
        }
    }

    /// The encoded length of the shortest token.
    fn min_src(self) -> usize {
        match self {
            Decoder::Base64(_) => MIN_TOKEN * 4 / 3,
            Decoder::Hex => MIN_TOKEN * 2,
            Decoder::Url => MIN_TOKEN,
        }
    }
}

/// Reusable buffers for one scan, and the host's patterns the decoded windows go through.
pub(super) struct Scratch<'h> {
    decoded: Vec<u8>,
    /// For URL decoding: where each decoded byte starts in the encoded text.
    origin: Vec<usize>,
    hits: Vec<Hit>,
    host: &'h HostPatterns,
    host_hits: Vec<HostHit>,
}

impl<'h> Scratch<'h> {
    pub(super) fn new(host: &'h HostPatterns) -> Scratch<'h> {
        Scratch {
            decoded: Vec::new(),
            origin: Vec::new(),
            hits: Vec::new(),
            host,
            host_hits: Vec::new(),
        }
    }
}

/// Where the left-to-right search for `%` escapes has got to.
#[derive(Default)]
pub(super) struct UrlCursor {
    /// The next offset where a `%` may be.
    at: usize,
    /// The end of the last URL run decoded: escapes before it were part of it.
    floor: usize,
}

/// Splits the candidate run `hay[run]` into its base64 reading and its hex sub-runs, and
/// scans their decoded forms.
pub(super) fn scan_run(
    hay: &[u8],
    run: Range<usize>,
    scratch: &mut Scratch,
    out: &mut Vec<Finding>,
) {
    let bytes = &hay[run.clone()];
    // The classes of the run's bytes, or-ed and and-ed together, without a branch per
    // byte: most runs are short and have no hex sub-run worth decoding.
    let (any, every) = bytes.iter().fold((0, !0), |(any, every), &b| {
        let c = CLASS[b as usize];
        (any | c, every & c)
    });
    let all_hex = every & HEX != 0;
    if all_hex {
        if bytes.len() >= MIN_HEX {
            scan_windows(hay, run.clone(), Decoder::Hex, scratch, out);
        }
    } else if bytes.len() >= MIN_HEX {
        for sub in hex_runs(bytes) {
            let sub = run.start + sub.start..run.start + sub.end;
            scan_windows(hay, sub, Decoder::Hex, scratch, out);
        }
    }
    // A base64 text of 24 or more characters is all hex digits with probability
    // (22/64)^24; hex runs are read as hex only.
    if !all_hex && bytes.len() >= MIN_BASE64 {
        let encoding = if any & (DASH | UNDERSCORE) != 0 && any & PLUS_SLASH == 0 {
            Encoding::Base64Url
        } else {
            Encoding::Base64
        };
        scan_windows(hay, run, Decoder::Base64(encoding), scratch, out);
    }
}

/// The maximal runs of at least [`MIN_HEX`] hex digits in `bytes`, in order.
///
/// Looks at every [`MIN_HEX`]th byte first: a long enough run covers the byte `MIN_HEX - 1`
/// places after any of its starts, so where that byte is not a hex digit, no run starts in
/// the `MIN_HEX` bytes before it and they are skipped unread. In base64 text about one
/// byte in three is a hex digit, so most of a long run is passed over in strides.
fn hex_runs(bytes: &[u8]) -> impl Iterator<Item = Range<usize>> {
    // Invariant: `bytes[k - 1]` is not a hex digit (or `k` is 0), and every run of
    // `MIN_HEX` or more that starts before `k` has been returned.
    let mut k = 0;
    std::iter::from_fn(move || {
        while k + MIN_HEX <= bytes.len() {
            let probe = k + MIN_HEX - 1;
            if !is(bytes[probe], HEX) {
                k = probe + 1;
                continue;
            }
            let mut start = probe;
            while start > k && is(bytes[start - 1], HEX) {
                start -= 1;
            }
            let mut end = probe + 1;
            while end < bytes.len() && is(bytes[end], HEX) {
                end += 1;
            }
            k = end + 1;
            if end - start >= MIN_HEX {
                return Some(start..end);
            }
        }
        None
    })
}

/// Finds runs around `%XX` escapes that start at or after `at` and before `until` and
/// scans their decoded form.
pub(super) fn scan_url(
    hay: &[u8],
    at: &mut UrlCursor,
    until: usize,
    scratch: &mut Scratch,
    out: &mut Vec<Finding>,
) {
    while at.at < until {
        let Some(off) = memchr::memchr(b'%', &hay[at.at..until]) else {
            at.at = until;
            break;
        };
        let p = at.at + off;
        at.at = p + 1;
        if p < at.floor || p + 2 >= hay.len() || !is(hay[p + 1], HEX) || !is(hay[p + 2], HEX) {
            continue;
        }
        let mut s = p;
        while s > at.floor && is(hay[s - 1], URL) {
            s -= 1;
        }
        let mut e = p;
        while e < hay.len() && is(hay[e], URL) {
            e += 1;
        }
        if e - s >= MIN_TOKEN {
            scan_windows(hay, s..e, Decoder::Url, scratch, out);
        }
        at.floor = e;
        at.at = e;
    }
}

/// Decodes `run` window by window and scans the decoded bytes for raw tokens.
///
/// Windows are [`WINDOW`] bytes long and start [`WINDOW`] − [`OVERLAP`] bytes apart.
/// A window keeps the findings that start before the next window does; a finding is
/// shorter than the overlap, so it lies whole in the window that keeps it.
fn scan_windows(
    hay: &[u8],
    run: Range<usize>,
    dec: Decoder,
    scratch: &mut Scratch,
    out: &mut Vec<Finding>,
) {
    let alignments = match dec {
        Decoder::Base64(_) => 4,
        Decoder::Hex => 2,
        Decoder::Url => 1,
    };
    let mut s = run.start;
    loop {
        let e = run.end.min(s + WINDOW);
        let next = if e == run.end {
            run.end
        } else {
            let mut n = s + WINDOW - OVERLAP;
            // Do not start a URL window inside an escape.
            if dec == Decoder::Url {
                if hay[n - 1] == b'%' {
                    n -= 1;
                } else if hay[n - 2] == b'%' {
                    n -= 2;
                }
            }
            n
        };
        for o in 0..alignments {
            scan_decoded(hay, s + o..e, s..next, dec, scratch, out);
        }
        if e == run.end {
            break;
        }
        s = next;
    }
}

/// Decodes `hay[win]`, scans it (built-in formats and host patterns) and keeps the
/// findings that start in `keep`.
fn scan_decoded(
    hay: &[u8],
    win: Range<usize>,
    keep: Range<usize>,
    dec: Decoder,
    scratch: &mut Scratch,
    out: &mut Vec<Finding>,
) {
    let src = &hay[win.clone()];
    if src.len() < dec.min_src() {
        return;
    }
    match dec {
        Decoder::Base64(_) => decode_base64(src, &mut scratch.decoded),
        Decoder::Hex => decode_hex(src, &mut scratch.decoded),
        Decoder::Url => {
            let cut = win.end == hay.len();
            decode_url(src, cut, &mut scratch.decoded, &mut scratch.origin);
        }
    }
    scratch.hits.clear();
    raw_hits(&scratch.decoded, &mut scratch.hits);
    scratch.host_hits.clear();
    if !scratch.host.is_empty() {
        scratch.host.hits(&scratch.decoded, &mut scratch.host_hits);
    }
    let builtin = scratch
        .hits
        .iter()
        .map(|h| (PatternName::builtin(h.pattern), &h.range));
    let host = scratch
        .host_hits
        .iter()
        .map(|h| (scratch.host.name(h.index), &h.range));
    for (pattern, decoded) in builtin.chain(host) {
        let (ds, de) = (decoded.start, decoded.end);
        let range = match dec {
            // Decoded byte k holds bits 8k..8k+8 of the 6-bit character stream.
            Decoder::Base64(_) => {
                win.start + ds * 8 / 6..(win.start + (de * 8).div_ceil(6)).min(win.end)
            }
            Decoder::Hex => win.start + 2 * ds..win.start + 2 * de,
            Decoder::Url => {
                let end = scratch.origin.get(de).map_or(win.end, |o| win.start + o);
                // Without an escape inside, the raw scan may have reported it too (not
                // when an escape is glued to it: `%22ghp_…`); the scanner keeps one.
                win.start + scratch.origin[ds]..end
            }
        };
        if !keep.contains(&range.start) {
            continue;
        }
        out.push(Finding {
            pattern,
            encoding: dec.encoding(),
            fingerprint: Fingerprint::of(&scratch.decoded[ds..de]),
            range,
        });
    }
}

/// The 6-bit value of each base64 character, both alphabets at once (`+` and `-` are 62,
/// `/` and `_` are 63); 0xff for other bytes.
const fn base64_values() -> [u8; 256] {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 26 {
        t[b'A' as usize + i] = i as u8;
        t[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        t[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'-' as usize] = 62;
    t[b'/' as usize] = 63;
    t[b'_' as usize] = 63;
    t
}

static BASE64: [u8; 256] = base64_values();

/// Decodes base64 leniently: both alphabets at once, no padding required, bits after the
/// last whole byte ignored, a trailing single character dropped. `src` holds only
/// alphabet bytes.
///
/// Hand-written on purpose. The `base64` crate decodes one alphabet per engine, rejects a
/// dangling character, and checks every byte and the padding on each call: on the short
/// windows that dominate ordinary text (a UUID is a 36-character run, decoded at four
/// alignments) it made the clean-text scan about 18% slower (`leak_bench`, 1 MiB: 1,590
/// against 1,945 MB/s; `data-encoding` with a translating specification: 1,780). The
/// test `base64_decoding_equals_the_base64_crate` holds this decoder to the crate's output.
fn decode_base64(src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let v = |b: u8| u32::from(BASE64[b as usize] & 63);
    let mut chunks = src.chunks_exact(4);
    out.resize(src.len() / 4 * 3, 0);
    for (c, o) in (&mut chunks).zip(out.chunks_exact_mut(3)) {
        let n = v(c[0]) << 18 | v(c[1]) << 12 | v(c[2]) << 6 | v(c[3]);
        o.copy_from_slice(&n.to_be_bytes()[1..]);
    }
    match *chunks.remainder() {
        [a, b] => out.push(((v(a) << 18 | v(b) << 12) >> 16) as u8),
        [a, b, c] => {
            let n = v(a) << 18 | v(b) << 12 | v(c) << 6;
            out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8]);
        }
        _ => {}
    }
}

/// The value of a hex digit (0 for other bytes, which the callers never pass).
fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

/// Decodes pairs of hex digits; `src` holds only hex digits, an odd last one is dropped.
///
/// Hand-written for the same reason as [`decode_base64`]: `hex::decode_to_slice` checks
/// the length and every digit and builds an error position on each call, and the runs it
/// would decode are short (a git SHA is 40 digits, decoded at two alignments). With it the
/// clean-text scan lost 5-10% (`leak_bench`, 1 MiB: 1,780-1,880 against 1,990 MB/s) and the
/// 1 KiB candidate-dense one about 25%. The test `hex_decoding_equals_the_hex_crate` holds
/// this decoder to the crate's output.
fn decode_hex(src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend(
        src.chunks_exact(2)
            .map(|p| hex_value(p[0]) << 4 | hex_value(p[1])),
    );
}

/// Decodes `%XX` escapes and records where each decoded byte came from (relative to `src`).
/// A `%` not followed by two hex digits stays as is, but for one that `cut` off the end
/// (`src` ends the text so far: `%4` may be the start of an escape that the next chunk of
/// a stream completes), which is left out.
///
/// Hand-written on purpose: `percent_encoding::percent_decode` decodes the same way but
/// does not say where each decoded byte came from, and a finding must report its range in
/// the scanned text, escapes included.
fn decode_url(src: &[u8], cut: bool, out: &mut Vec<u8>, origin: &mut Vec<usize>) {
    out.clear();
    origin.clear();
    let n = src.len();
    let partial = match src {
        [.., b'%'] => 1,
        [.., b'%', h] if is(*h, HEX) => 2,
        _ => 0,
    };
    let end = if cut { n - partial } else { n };
    let mut i = 0;
    while i < end {
        origin.push(i);
        if src[i] == b'%' && i + 2 < src.len() && is(src[i + 1], HEX) && is(src[i + 2], HEX) {
            out.push(hex_value(src[i + 1]) << 4 | hex_value(src[i + 2]));
            i += 3;
        } else {
            out.push(src[i]);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
    use base64::engine::{DecodePaddingMode, general_purpose};

    use super::*;
    use crate::guard::leak::testgen::Gen;

    fn base64(src: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        decode_base64(src, &mut out);
        out
    }

    /// The strided search finds the runs a byte-by-byte walk finds.
    #[test]
    fn hex_runs_match_a_byte_by_byte_definition() {
        let mut g = Gen(12);
        let mut total = 0;
        for round in 0..400 {
            let len = (g.next() % 600) as usize;
            // One byte in `gap` is not a hex digit: short runs in some rounds, long in others.
            let gap = [2, 4, 32, 64][(g.next() % 4) as usize];
            let text: Vec<u8> = (0..len)
                .map(|_| match g.next() % gap {
                    0 => b"gZ+/"[(g.next() % 4) as usize],
                    _ => b"0123456789abcdefABCDEF"[(g.next() % 22) as usize],
                })
                .collect();
            let mut want = Vec::new();
            let mut k = 0;
            while k < text.len() {
                let h = k + text[k..].iter().take_while(|&&b| !is(b, HEX)).count();
                k = h + text[h..].iter().take_while(|&&b| is(b, HEX)).count();
                if k - h >= MIN_HEX {
                    want.push(h..k);
                }
            }
            let got: Vec<_> = hex_runs(&text).collect();
            assert_eq!(got, want, "round {round}");
            total += want.len();
        }
        assert!(total > 50, "the texts hold long hex runs: {total}");
    }

    #[test]
    fn decoders_match_their_definitions() {
        assert_eq!(base64(b"aGVsbG8gd29ybGQ"), b"hello world");
        assert_eq!(base64(b"-_-_"), [0xfb, 0xff, 0xbf]);
        assert_eq!(base64(b"-/+_"), [0xfb, 0xff, 0xbf]);
        // Trailing bits ignored, a dangling character dropped.
        assert_eq!(base64(b"aGVsbG9"), b"hello");
        assert_eq!(base64(b"aGVsbG8gd"), b"hello ");
        let mut out = Vec::new();
        decode_hex(b"68656C6c6f", &mut out);
        assert_eq!(out, b"hello");
        decode_hex(b"68656C6c6f7", &mut out);
        assert_eq!(out, b"hello");
        let mut origin = Vec::new();
        decode_url(b"a%2Db%2", false, &mut out, &mut origin);
        assert_eq!(out, b"a-b%2");
        assert_eq!(origin, [0, 1, 4, 5, 6]);
        decode_url(b"a%2Db%2", true, &mut out, &mut origin);
        assert_eq!(out, b"a-b");
        assert_eq!(origin, [0, 1, 4]);
        decode_url(b"a%2Db%", true, &mut out, &mut origin);
        assert_eq!(out, b"a-b");
    }

    /// For every length of random hex text in mixed case, the decoder gives what the `hex`
    /// crate gives once an odd last digit is dropped.
    #[test]
    fn hex_decoding_equals_the_hex_crate() {
        let mut g = Gen(13);
        for len in 0..200 {
            let text: Vec<u8> = (0..len)
                .map(|_| b"0123456789abcdefABCDEF"[(g.next() % 22) as usize])
                .collect();
            let mut out = Vec::new();
            decode_hex(&text, &mut out);
            assert_eq!(out, hex::decode(&text[..len & !1]).unwrap(), "len {len}");
        }
    }

    /// For every length of random text in either alphabet, the decoder gives what the
    /// `base64` crate gives without padding and with trailing bits allowed, once a
    /// dangling last character is dropped; a text that mixes the alphabets decodes as its
    /// standard-alphabet translation.
    #[test]
    fn base64_decoding_equals_the_base64_crate() {
        const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireNone);
        let standard = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
        let url_safe = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);
        let mut g = Gen(11);
        for len in 0..300 {
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
                        [(g.next() % 66) as usize]
                })
                .collect();
            let whole = &text[..len - usize::from(len % 4 == 1)];
            let std_text: Vec<u8> = whole
                .iter()
                .map(|&b| match b {
                    b'-' => b'+',
                    b'_' => b'/',
                    b => b,
                })
                .collect();
            let url_text: Vec<u8> = std_text
                .iter()
                .map(|&b| match b {
                    b'+' => b'-',
                    b'/' => b'_',
                    b => b,
                })
                .collect();
            let want = standard.decode(&std_text).unwrap();
            assert_eq!(url_safe.decode(&url_text).unwrap(), want, "len {len}");
            assert_eq!(base64(&text), want, "mixed, len {len}");
            assert_eq!(base64(&std_text), want, "standard, len {len}");
            assert_eq!(base64(&url_text), want, "url-safe, len {len}");
        }
        // The strict engines agree on canonical input.
        let bytes: Vec<u8> = (0..=255).collect();
        let enc = general_purpose::STANDARD_NO_PAD.encode(&bytes);
        assert_eq!(base64(enc.as_bytes()), bytes);
    }
}
