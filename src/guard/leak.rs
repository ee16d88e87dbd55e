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
//! enough run starts in the block; ordinary prose has none. Inside a run a token can only start at the run's
//! start or after a `-`, `_`, `+` or `/` (the word-boundary rule below); only there are the
//! literal prefixes (`sk-`, `ghp_`, `AIza`, …) compared, and a small hand-written matcher
//! with bounded repetitions validates the token. Discord and Telegram tokens have no prefix; their trigger is
//! the run itself (its length and the byte before or after it), which costs nothing extra.
//! PEM headers are found with `memmem`, percent-escapes with `memchr`. All of this is one
//! pass over the text, 64 KiB at a time: the searches, the run finder and the decoding of
//! the runs it finds all go over a block while it is in cache, so a long input is read from
//! memory once.
//!
//! Runs long enough to hide an encoded secret (base64 ≥ 24 characters, hex ≥ 40) are
//! decoded in windows of [`WINDOW`] bytes that overlap by [`OVERLAP`] bytes, at every
//! alignment (four for base64, two for hex), and the decoded bytes go through the same
//! token matchers. Each input byte is decoded a bounded number of times, so the cost is
//! linear in the input however long a run is.
//!
//! # Tuning against false positives
//!
//! A token must start at a word boundary (no letter or digit before it) and end at one (no
//! `[A-Za-z0-9_-]` after it), and the random part of most tokens must mix at least two of
//! upper case, lower case and digits, which rejects placeholders such as `sk-xxxx…`. A PEM
//! header counts only when a base64 body follows it.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::io::{self, Read, Write};
use std::ops::Range;
use std::sync::OnceLock;

use memchr::memmem;
use serde::ser::{Serialize, SerializeStruct, Serializer};

/// The shortest token any pattern accepts; shorter runs are never looked at.
const MIN_TOKEN: usize = 20;
/// Base64 runs shorter than this are not decoded.
const MIN_BASE64: usize = 24;
/// Hex runs shorter than this are not decoded.
const MIN_HEX: usize = 40;
/// The shortest text that can hold a PEM finding: `-----BEGIN PRIVATE KEY-----` and a
/// 40-character body line.
const PEM_MIN: usize = 27 + 40;
/// How far a PEM block may extend past its `-----BEGIN` line.
const PEM_MAX: usize = 8 * 1024;
/// How much text [`scan`] looks at in one go: small enough to stay in the L2 cache between
/// the searches that go over it.
const BLOCK: usize = 64 * 1024;
/// How many encoded bytes of one run are decoded at a time.
pub const WINDOW: usize = 128 * 1024;
/// How much consecutive windows of one run overlap: more than the longest encoded finding
/// (a hex-encoded PEM block of 8 KiB), so every finding lies whole in one window.
pub const OVERLAP: usize = 20 * 1024;

// Byte classes, one bit each.
const DIGIT: u16 = 1;
const UPPER: u16 = 1 << 1;
const LOWER: u16 = 1 << 2;
const DASH: u16 = 1 << 3;
const UNDERSCORE: u16 = 1 << 4;
const PLUS_SLASH: u16 = 1 << 5;
const HEX: u16 = 1 << 6;
const HEX_LOWER: u16 = 1 << 7;
const URL: u16 = 1 << 8;
const PEM_BODY: u16 = 1 << 9;
const ALNUM: u16 = DIGIT | UPPER | LOWER;
const B64URL: u16 = ALNUM | DASH | UNDERSCORE;
/// The bytes of a candidate run: both base64 alphabets (hex is a subset).
const RUN: u16 = B64URL | PLUS_SLASH;

const fn classes() -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let mut v = 0;
        if c.is_ascii_digit() {
            v |= DIGIT | HEX | HEX_LOWER;
        }
        if c.is_ascii_uppercase() {
            v |= UPPER;
        }
        if c.is_ascii_lowercase() {
            v |= LOWER;
        }
        if matches!(c, b'a'..=b'f') {
            v |= HEX | HEX_LOWER;
        }
        if matches!(c, b'A'..=b'F') {
            v |= HEX;
        }
        match c {
            b'-' => v |= DASH,
            b'_' => v |= UNDERSCORE,
            b'+' | b'/' => v |= PLUS_SLASH,
            _ => {}
        }
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'%' | b'+') {
            v |= URL;
        }
        if c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'+' | b'/' | b'=' | b'\r' | b'\n' | b' ' | b'\t' | b':' | b',' | b'-'
            )
        {
            v |= PEM_BODY;
        }
        t[b] = v;
        b += 1;
    }
    t
}

static CLASS: [u16; 256] = classes();

#[inline(always)]
fn is(b: u8, class: u16) -> bool {
    CLASS[b as usize] & class != 0
}

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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
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

/// One secret found in scanned text. It holds no part of the secret: its `Debug` and
/// `Display` are safe to log.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Finding {
    /// The pattern's name: `github_token`, `aws_access_key_id`, `private_key`, …
    pub pattern: &'static str,
    /// How the secret was encoded in the text.
    pub encoding: Encoding,
    /// The bytes of the scanned text that hold the (encoded) secret.
    pub range: Range<usize>,
    /// A keyed hash of the decoded secret.
    pub fingerprint: Fingerprint,
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
        st.serialize_field("pattern", self.pattern)?;
        st.serialize_field("encoding", self.encoding.as_str())?;
        st.serialize_field("start", &self.range.start)?;
        st.serialize_field("end", &self.range.end)?;
        st.serialize_field("fingerprint", &self.fingerprint)?;
        st.end()
    }
}

/// The names of every pattern [`scan`] knows, for documentation and configuration checks.
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
struct Hit {
    pattern: &'static str,
    range: Range<usize>,
}

struct Engine {
    pem: memmem::Finder<'static>,
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

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine {
        pem: memmem::Finder::new(b"-----BEGIN "),
    })
}

/// One bit per byte of a 64-byte block: set where the byte is in [`RUN`].
#[inline(always)]
fn run_mask(block: &[u8; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86_64 baseline, every x86_64 CPU has it.
        unsafe { run_mask_sse2(block) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        run_mask_portable(block)
    }
}

/// [`run_mask`] 16 bytes at a time: two range tests and four equality tests per vector,
/// and `pmovmskb` to collect the bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn run_mask_sse2(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        _mm_add_epi8, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };
    // Shifted so that the range starts at i8::MIN: one signed comparison tests it.
    let shift = |lo: u8| _mm_set1_epi8(0x80u8.wrapping_sub(lo) as i8);
    let below = |n: u8| _mm_set1_epi8(i8::MIN.wrapping_add(n as i8));
    let mut m = 0u64;
    for (j, c) in block.chunks_exact(16).enumerate() {
        // SAFETY: `c` is 16 readable bytes, and `loadu` needs no alignment.
        let v = unsafe { _mm_loadu_si128(c.as_ptr().cast()) };
        let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
        let alpha = _mm_cmplt_epi8(_mm_add_epi8(folded, shift(b'a')), below(26));
        let digit = _mm_cmplt_epi8(_mm_add_epi8(v, shift(b'0')), below(10));
        let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
        let sym = _mm_or_si128(
            _mm_or_si128(eq(b'+'), eq(b'/')),
            _mm_or_si128(eq(b'-'), eq(b'_')),
        );
        let any = _mm_or_si128(_mm_or_si128(alpha, digit), sym);
        m |= u64::from(_mm_movemask_epi8(any) as u16) << (16 * j);
    }
    m
}

/// [`run_mask`] without vector intrinsics. The byte test is written with comparisons
/// rather than a table lookup so that the compiler vectorizes it; the 0/1 bytes are then
/// packed eight at a time with a multiply (byte i of the product's top byte collects bit i).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn run_mask_portable(block: &[u8; 64]) -> u64 {
    let mut flags = [0u8; 64];
    for (f, &b) in flags.iter_mut().zip(block) {
        let alpha = (b | 0x20).wrapping_sub(b'a') < 26;
        let digit = b.wrapping_sub(b'0') < 10;
        let sym = (b == b'+') | (b == b'/') | (b == b'-') | (b == b'_');
        *f = u8::from(alpha | digit | sym);
    }
    let mut m = 0u64;
    for (j, eight) in flags.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(eight.try_into().expect("8 bytes"));
        m |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * j);
    }
    m
}

/// The run mask of the 64 bytes at `at` (zero past the end of `hay`).
///
/// Near the end, the mask of the last 64 bytes is shifted into place, and a text shorter
/// than 64 bytes is classified byte by byte: copying the tail into a padded block and
/// loading it back as vectors would stall on store forwarding, and the short texts (the
/// decoded forms of candidate runs) are common.
#[inline(always)]
fn mask_at(hay: &[u8], at: usize) -> u64 {
    let n = hay.len();
    if let Some(b) = hay.get(at..at + 64) {
        return run_mask(b.try_into().expect("64 bytes"));
    }
    if at >= n {
        return 0;
    }
    if n >= 64 {
        return run_mask(hay[n - 64..].try_into().expect("64 bytes")) >> (at - (n - 64));
    }
    hay[at..]
        .iter()
        .enumerate()
        .fold(0, |m, (k, &b)| m | u64::from(is(b, RUN)) << k)
}

/// Calls `f(start, end)` for every maximal run of [`RUN`] bytes at least `min` (≤ 64) long.
#[cfg(test)]
fn for_each_run(hay: &[u8], min: usize, f: impl FnMut(usize, usize)) {
    fn each<const MIN: usize>(hay: &[u8], mut f: impl FnMut(usize, usize)) {
        let mut runs = Runs::<MIN>::new(hay);
        while let Some((s, e)) = runs.next_before(hay.len()) {
            f(s, e);
        }
    }
    match min {
        1 => each::<1>(hay, f),
        5 => each::<5>(hay, f),
        20 => each::<20>(hay, f),
        24 => each::<24>(hay, f),
        64 => each::<64>(hay, f),
        _ => panic!("for_each_run is instantiated for min 1, 5, 20, 24 and 64, not {min}"),
    }
}

/// The maximal runs of [`RUN`] bytes at least `MIN` (≤ 64) long, in order.
///
/// The text is classified 64 bytes at a time into a bit mask, without a branch per byte;
/// shifting and and-ing the mask of two consecutive blocks with itself leaves a bit set
/// exactly where `MIN` class bytes in a row begin. For long texts this is done ahead for
/// up to a [`BLOCK`] at a time, into a table of start bits (with AVX2 where the CPU has
/// it), and the search skips the zero entries, which are nearly all of ordinary text. A
/// run is walked once to its end and the search resumes after it, so the whole pass is
/// linear.
struct Runs<'h, const MIN: usize> {
    hay: &'h [u8],
    /// The 64-byte block being looked at.
    b: usize,
    /// Starts before this offset belong to a run already reported.
    resume: usize,
    /// The start bits of blocks `first..first + starts.len()`, computed ahead.
    first: usize,
    starts: Vec<u64>,
    /// Room for the masks the table is computed from.
    masks: Vec<u64>,
}

/// Texts shorter than this are not worth a table of start bits.
const TABLE_MIN: usize = 4096;

/// Where runs of `MIN` class bytes begin in the block with mask `cur`, followed by `next`.
#[inline(always)]
fn starts_in<const MIN: usize>(cur: u64, next: u64) -> u64 {
    let mut r = u128::from(next) << 64 | u128::from(cur);
    let mut have = 1;
    while have < MIN {
        let s = have.min(MIN - have);
        r &= r >> s;
        have += s;
    }
    r as u64
}

impl<'h, const MIN: usize> Runs<'h, MIN> {
    fn new(hay: &'h [u8]) -> Runs<'h, MIN> {
        const { assert!(1 <= MIN && MIN <= 64) };
        Runs {
            hay,
            b: 0,
            resume: 0,
            first: 0,
            starts: Vec::new(),
            masks: Vec::new(),
        }
    }

    /// The start bits of block `b`, from the table, which is refilled up to `limit` when
    /// enough text is left.
    #[inline(always)]
    fn starts_of(&mut self, b: usize, limit: usize) -> u64 {
        if let Some(&st) = self.starts.get(b.wrapping_sub(self.first)) {
            return st;
        }
        let base = b * 64;
        let full = self.hay.len() / 64;
        if limit - base >= TABLE_MIN && full > b + 1 {
            let count = (limit - base).div_ceil(64).min(full - b - 1);
            self.masks.clear();
            masks(&self.hay[base..(b + count + 1) * 64], &mut self.masks);
            self.starts.clear();
            self.starts
                .extend(self.masks.windows(2).map(|w| starts_in::<MIN>(w[0], w[1])));
            self.first = b;
            return self.starts[0];
        }
        starts_in::<MIN>(mask_at(self.hay, base), mask_at(self.hay, base + 64))
    }

    /// The next run that starts in a 64-byte block starting before `limit`.
    #[inline]
    fn next_before(&mut self, limit: usize) -> Option<(usize, usize)> {
        let hay = self.hay;
        let n = hay.len();
        let end = limit.min(n);
        loop {
            let base = self.b * 64;
            if base >= end {
                return None;
            }
            // Skip the blocks of the table without a start.
            let table = self.starts.get(self.b.wrapping_sub(self.first)..);
            if let Some(rest) = table.filter(|rest| !rest.is_empty()) {
                if self.resume <= base {
                    let blocks = (end - base).div_ceil(64).min(rest.len());
                    match rest[..blocks].iter().position(|&st| st != 0) {
                        Some(k) => self.b += k,
                        None => {
                            self.b += blocks;
                            continue;
                        }
                    }
                }
            }
            let base = self.b * 64;
            let mut starts = self.starts_of(self.b, limit);
            if self.resume > base {
                let k = self.resume - base;
                starts = if k >= 64 { 0 } else { starts & (!0u64 << k) };
            }
            if starts != 0 {
                let p = base + starts.trailing_zeros() as usize;
                let mut e = p + MIN;
                while e < n && is(hay[e], RUN) {
                    e += 1;
                }
                self.resume = e + 1;
                return Some((p, e));
            }
            if self.resume > base + 128 {
                // A long run: jump to the block where it ended.
                self.b = self.resume / 64;
            } else {
                self.b += 1;
            }
        }
    }
}

/// Appends the run masks of the 64-byte blocks of `bytes` (a multiple of 64 long).
fn masks(bytes: &[u8], out: &mut Vec<u64>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, just checked.
        unsafe { masks_avx2(bytes, out) };
        return;
    }
    out.extend(
        bytes
            .chunks_exact(64)
            .map(|c| run_mask(c.try_into().expect("64 bytes"))),
    );
}

/// [`masks`] 32 bytes at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn masks_avx2(bytes: &[u8], out: &mut Vec<u64>) {
    use std::arch::x86_64::{
        _mm256_add_epi8, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
    };
    let shift = |lo: u8| _mm256_set1_epi8(0x80u8.wrapping_sub(lo) as i8);
    let below = |n: u8| _mm256_set1_epi8(i8::MIN.wrapping_add(n as i8));
    let class32 = |c: &[u8]| {
        debug_assert_eq!(c.len(), 32);
        // SAFETY: `c` is 32 readable bytes, and `loadu` needs no alignment.
        let v = unsafe { _mm256_loadu_si256(c.as_ptr().cast()) };
        let folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        let alpha = _mm256_cmpgt_epi8(below(26), _mm256_add_epi8(folded, shift(b'a')));
        let digit = _mm256_cmpgt_epi8(below(10), _mm256_add_epi8(v, shift(b'0')));
        let eq = |b: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b as i8));
        let sym = _mm256_or_si256(
            _mm256_or_si256(eq(b'+'), eq(b'/')),
            _mm256_or_si256(eq(b'-'), eq(b'_')),
        );
        let any = _mm256_or_si256(_mm256_or_si256(alpha, digit), sym);
        u64::from(_mm256_movemask_epi8(any) as u32)
    };
    out.extend(
        bytes
            .chunks_exact(64)
            .map(|c| class32(&c[..32]) | class32(&c[32..]) << 32),
    );
}

/// Where the left-to-right searches for PEM headers and `%` escapes have got to.
#[derive(Default)]
struct Cursors {
    /// The next offset where a PEM header may start.
    pem: usize,
    /// The next offset where a `%` may be.
    url: usize,
    /// The end of the last URL run decoded: escapes before it were part of it.
    url_floor: usize,
}

impl Engine {
    /// Raw tokens in `hay`, in order of position, without decoding anything.
    fn raw_hits(&self, hay: &[u8], hits: &mut Vec<Hit>) {
        let mut runs = Runs::<MIN_TOKEN>::new(hay);
        while let Some((s, e)) = runs.next_before(hay.len()) {
            self.run_hits(hay, s, e, hits);
        }
        self.pem_hits(hay, &mut 0, hay.len(), hits);
    }

    fn run_hits(&self, hay: &[u8], s: usize, e: usize, hits: &mut Vec<Hit>) {
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
                let rest = &hay[pos..];
                if let Some((_, patterns)) = PREFIXES
                    .iter()
                    .find(|(p, _)| rest.starts_with(p.as_bytes()))
                {
                    for p in *patterns {
                        if let Some(end) = try_pattern(hay, pos, p) {
                            hits.push(Hit {
                                pattern: p.name,
                                range: pos..end,
                            });
                            next = end;
                            break;
                        }
                    }
                }
            }
            after_alnum = is(b, ALNUM);
        }
    }

    /// `-----BEGIN … PRIVATE KEY-----` followed by a base64 body, through the `-----END`
    /// line when it follows the body within [`PEM_MAX`] bytes.
    ///
    /// Looks at the headers that start at or after `*from` and before `until`, and moves
    /// `*from` past them, so that a text can be searched piece by piece.
    fn pem_hits(&self, hay: &[u8], from: &mut usize, until: usize, hits: &mut Vec<Hit>) {
        // A header, a label and a 40-character body line take more than this.
        if hay.len() < PEM_MIN {
            return;
        }
        while *from < until {
            // Ten bytes more, so that a header starting before `until` is seen whole.
            let window = &hay[*from..hay.len().min(until + 10)];
            let Some(off) = self.pem.find(window) else {
                *from = until;
                break;
            };
            let start = *from + off;
            *from = start + 1;
            let label_at = start + 11;
            let Some(label_len) =
                memmem::find(&hay[label_at..hay.len().min(label_at + 64)], b"-----")
            else {
                continue;
            };
            let label = &hay[label_at..label_at + label_len];
            let label_ok = label
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ')
                && (label.ends_with(b"PRIVATE KEY") || label.ends_with(b"PRIVATE KEY BLOCK"));
            if !label_ok {
                continue;
            }
            let header_end = label_at + label_len + 5;
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
                continue;
            }
            let mut end = i;
            let rest = &hay[i..limit];
            if rest.starts_with(b"-----END ") {
                match memmem::find(&rest[9..rest.len().min(9 + 64)], b"-----") {
                    Some(close) => end = i + 9 + close + 5,
                    // The input ends inside the END line: the block runs to the end.
                    None if limit == hay.len() && rest.len() < 9 + 64 => end = hay.len(),
                    None => {}
                }
            } else if limit == hay.len() && b"-----END ".starts_with(rest) {
                end = hay.len();
            }
            hits.push(Hit {
                pattern: "private_key",
                range: start..end,
            });
            *from = end;
        }
    }
}

/// Which decoder a run goes through.
#[derive(Clone, Copy, PartialEq)]
enum Decoder {
    Base64(Encoding),
    Hex,
    Url,
}

/// Reusable buffers for one scan.
#[derive(Default)]
struct Scratch {
    decoded: Vec<u8>,
    /// For URL decoding: where each decoded byte starts in the encoded text.
    origin: Vec<usize>,
    hits: Vec<Hit>,
}

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

/// Decodes base64 leniently: both alphabets at once, no padding required, a trailing
/// single character dropped. `src` holds only alphabet bytes.
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

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

/// Decodes pairs of hex digits; `src` holds only hex digits, an odd last one is dropped.
fn decode_hex(src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend(
        src.chunks_exact(2)
            .map(|p| hex_value(p[0]) << 4 | hex_value(p[1])),
    );
}

/// Decodes `%XX` escapes and records where each decoded byte came from (relative to `src`).
/// A `%` not followed by two hex digits stays as is.
fn decode_url(src: &[u8], out: &mut Vec<u8>, origin: &mut Vec<usize>) {
    out.clear();
    origin.clear();
    let mut i = 0;
    while i < src.len() {
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

impl Engine {
    /// Every finding in `hay`, sorted by position.
    ///
    /// One pass over the text, [`BLOCK`] bytes at a time: the `%` and PEM header searches
    /// and the run finder go over a block while it is in cache, and every candidate run is
    /// checked and decoded as soon as it is found.
    fn scan(&self, hay: &[u8]) -> Vec<Finding> {
        let mut scratch = Scratch::default();
        let mut findings = Vec::new();
        let mut raw = Vec::new();
        let mut runs = Runs::<MIN_TOKEN>::new(hay);
        let mut at = Cursors::default();
        let mut until = 0;
        while until < hay.len() {
            until = hay.len().min(until + BLOCK);
            self.scan_url(hay, &mut at, until, &mut scratch, &mut findings);
            self.pem_hits(hay, &mut at.pem, until, &mut raw);
            while let Some((s, e)) = runs.next_before(until) {
                self.run_hits(hay, s, e, &mut raw);
                if e - s >= MIN_BASE64.min(MIN_HEX) {
                    self.scan_run(hay, s..e, &mut scratch, &mut findings);
                }
            }
        }
        findings.extend(raw.into_iter().map(|h| Finding {
            pattern: h.pattern,
            encoding: Encoding::Raw,
            fingerprint: Fingerprint::of(&hay[h.range.clone()]),
            range: h.range,
        }));

        findings.sort_by(|a, b| {
            (a.range.start, a.range.end, a.encoding, a.pattern).cmp(&(
                b.range.start,
                b.range.end,
                b.encoding,
                b.pattern,
            ))
        });
        findings.dedup_by(|a, b| a.range == b.range && a.pattern == b.pattern);
        findings
    }

    /// Splits a candidate run into its base64 reading and its hex sub-runs.
    fn scan_run(
        &self,
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
        let dash_us = any & (DASH | UNDERSCORE) != 0;
        let plus_slash = any & PLUS_SLASH != 0;
        let all_hex = every & HEX != 0;
        if all_hex {
            if bytes.len() >= MIN_HEX {
                self.scan_windows(hay, run.clone(), Decoder::Hex, scratch, out);
            }
        } else if bytes.len() >= MIN_HEX {
            // The maximal hex sub-runs, in order.
            let mut k = 0;
            while k < bytes.len() {
                let h = k + bytes[k..].iter().take_while(|&&b| !is(b, HEX)).count();
                k = h + bytes[h..].iter().take_while(|&&b| is(b, HEX)).count();
                if k - h >= MIN_HEX {
                    self.scan_windows(
                        hay,
                        run.start + h..run.start + k,
                        Decoder::Hex,
                        scratch,
                        out,
                    );
                }
            }
        }
        // A base64 text of 24 or more characters is all hex digits with probability
        // (22/64)^24; hex runs are read as hex only.
        if !all_hex && bytes.len() >= MIN_BASE64 {
            let enc = if dash_us && !plus_slash {
                Encoding::Base64Url
            } else {
                Encoding::Base64
            };
            self.scan_windows(hay, run, Decoder::Base64(enc), scratch, out);
        }
    }

    /// Finds runs around `%XX` escapes that start at or after `at.url` and before `until`
    /// and scans their decoded form.
    fn scan_url(
        &self,
        hay: &[u8],
        at: &mut Cursors,
        until: usize,
        scratch: &mut Scratch,
        out: &mut Vec<Finding>,
    ) {
        while at.url < until {
            let Some(off) = memchr::memchr(b'%', &hay[at.url..until]) else {
                at.url = until;
                break;
            };
            let p = at.url + off;
            at.url = p + 1;
            if p < at.url_floor
                || p + 2 >= hay.len()
                || !is(hay[p + 1], HEX)
                || !is(hay[p + 2], HEX)
            {
                continue;
            }
            let mut s = p;
            while s > at.url_floor && is(hay[s - 1], URL) {
                s -= 1;
            }
            let mut e = p;
            while e < hay.len() && is(hay[e], URL) {
                e += 1;
            }
            if e - s >= MIN_TOKEN {
                self.scan_windows(hay, s..e, Decoder::Url, scratch, out);
            }
            at.url_floor = e;
            at.url = e;
        }
    }

    /// Decodes `run` window by window and scans the decoded bytes for raw tokens.
    ///
    /// Windows are [`WINDOW`] bytes long and start [`WINDOW`] − [`OVERLAP`] bytes apart.
    /// A window keeps the findings that start before the next window does; a finding is
    /// shorter than the overlap, so it lies whole in the window that keeps it.
    fn scan_windows(
        &self,
        hay: &[u8],
        run: Range<usize>,
        dec: Decoder,
        scratch: &mut Scratch,
        out: &mut Vec<Finding>,
    ) {
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
            match dec {
                Decoder::Base64(enc) => {
                    for o in 0..4 {
                        self.scan_decoded(hay, s + o..e, dec, enc, s..next, scratch, out);
                    }
                }
                Decoder::Hex => {
                    for o in 0..2 {
                        self.scan_decoded(hay, s + o..e, dec, Encoding::Hex, s..next, scratch, out);
                    }
                }
                Decoder::Url => {
                    self.scan_decoded(hay, s..e, dec, Encoding::Url, s..next, scratch, out)
                }
            }
            if e == run.end {
                break;
            }
            s = next;
        }
    }

    /// Decodes `hay[win]`, scans it and keeps the findings that start in `keep`.
    #[allow(clippy::too_many_arguments)]
    fn scan_decoded(
        &self,
        hay: &[u8],
        win: Range<usize>,
        dec: Decoder,
        encoding: Encoding,
        keep: Range<usize>,
        scratch: &mut Scratch,
        out: &mut Vec<Finding>,
    ) {
        let src = &hay[win.clone()];
        let min_src = match dec {
            Decoder::Base64(_) => MIN_TOKEN * 4 / 3,
            Decoder::Hex => MIN_TOKEN * 2,
            Decoder::Url => MIN_TOKEN,
        };
        if src.len() < min_src {
            return;
        }
        match dec {
            Decoder::Base64(_) => decode_base64(src, &mut scratch.decoded),
            Decoder::Hex => decode_hex(src, &mut scratch.decoded),
            Decoder::Url => decode_url(src, &mut scratch.decoded, &mut scratch.origin),
        }
        scratch.hits.clear();
        self.raw_hits(&scratch.decoded, &mut scratch.hits);
        for h in &scratch.hits {
            let (ds, de) = (h.range.start, h.range.end);
            let range = match dec {
                // Decoded byte k holds bits 8k..8k+8 of the 6-bit character stream.
                Decoder::Base64(_) => {
                    win.start + ds * 8 / 6..(win.start + (de * 8).div_ceil(6)).min(win.end)
                }
                Decoder::Hex => win.start + 2 * ds..win.start + 2 * de,
                Decoder::Url => {
                    let end = scratch.origin.get(de).map_or(win.end, |o| win.start + o);
                    let range = win.start + scratch.origin[ds]..end;
                    // Without an escape inside, the raw scan already reported it.
                    if range.len() == de - ds {
                        continue;
                    }
                    range
                }
            };
            if !keep.contains(&range.start) {
                continue;
            }
            out.push(Finding {
                pattern: h.pattern,
                encoding,
                fingerprint: Fingerprint::of(&scratch.decoded[ds..de]),
                range,
            });
        }
    }
}

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
    engine().scan(input)
}

/// Bytes the stream scanner gathers before scanning.
const BATCH: usize = 64 * 1024;
/// Bytes kept from one batch to the next, so that a secret split across batches is seen
/// whole: more than the longest encoded token.
const TAIL: usize = 2 * 1024;
/// A finding that ends this close to the end of the buffer may still grow (a longer token,
/// a base64 quantum not yet complete) and waits for more input.
const HOLD: usize = 8;

/// Scans a stream that arrives in chunks, with bounded memory.
///
/// Chunks are gathered into batches of 64 KiB and scanned with [`scan`]; the last bytes of
/// each batch are scanned again with the next one, so a secret split across chunks (raw or
/// encoded) is found, and found once. Memory stays below the batch size plus the longest
/// secret the patterns accept (a PEM block of 8 KiB, or its hex encoding), whatever the
/// length of the stream. Ranges in the findings are offsets from the start of the stream.
///
/// Findings come back from [`push`](Self::push) when a batch is complete, from
/// [`flush`](Self::flush) for what has been pushed so far (but for a few bytes that may
/// still be the start of a secret), and from [`finish`](Self::finish) for the rest.
#[derive(Default)]
pub struct StreamScanner {
    buf: Vec<u8>,
    /// The stream offset of `buf[0]`.
    base: usize,
    /// Every finding that ends at or before this stream offset has been returned.
    done: usize,
    /// Bytes pushed since the last scan.
    fresh: usize,
}

impl StreamScanner {
    /// A scanner at stream offset 0.
    pub fn new() -> StreamScanner {
        StreamScanner::default()
    }

    /// Adds `chunk` to the stream; returns the findings of any batch it completed.
    pub fn push(&mut self, mut chunk: &[u8]) -> Vec<Finding> {
        let mut found = Vec::new();
        while !chunk.is_empty() {
            let take = chunk.len().min(BATCH - self.fresh.min(BATCH));
            self.buf.extend_from_slice(&chunk[..take]);
            self.fresh += take;
            chunk = &chunk[take..];
            if self.fresh >= BATCH {
                found.extend(self.scan_buffer(false));
            }
        }
        found
    }

    /// Scans what has been pushed so far; returns the findings not returned before.
    pub fn flush(&mut self) -> Vec<Finding> {
        if self.fresh == 0 {
            return Vec::new();
        }
        self.scan_buffer(false)
    }

    /// Ends the stream; returns the remaining findings.
    pub fn finish(mut self) -> Vec<Finding> {
        self.scan_buffer(true)
    }

    /// The number of bytes pushed so far.
    pub fn position(&self) -> usize {
        self.base + self.buf.len()
    }

    /// The number of bytes held for the next scan: at most 64 KiB plus the longest secret.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn scan_buffer(&mut self, last: bool) -> Vec<Finding> {
        let len = self.buf.len();
        let close = if last { len } else { len.saturating_sub(HOLD) };
        let mut keep_from = if last { len } else { len.saturating_sub(TAIL) };
        let mut found = Vec::new();
        for mut f in scan(&self.buf) {
            if f.range.end > close {
                keep_from = keep_from.min(f.range.start);
                continue;
            }
            if self.base + f.range.end <= self.done {
                continue;
            }
            f.range = self.base + f.range.start..self.base + f.range.end;
            found.push(f);
        }
        self.done = self.done.max(self.base + close);
        self.buf.drain(..keep_from);
        self.base += keep_from;
        self.fresh = 0;
        found
    }
}

impl fmt::Debug for StreamScanner {
    /// Counts only: the buffer may hold a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamScanner")
            .field("position", &self.position())
            .field("buffered", &self.buf.len())
            .finish()
    }
}

/// Scans `input` to its end and writes one line per finding to `out`; returns whether
/// anything was found. This is `stockade scan [--json]`.
///
/// A line is `pattern encoding start..end fingerprint`, or with `json` one JSON object per
/// line: `{"pattern":"github_token","encoding":"base64","start":120,"end":176,
/// "fingerprint":"1f2e3d4c5b6a7988"}`. Offsets count bytes from the start of `input`. No
/// line contains any part of a secret. Memory stays bounded on unbounded input (see
/// [`StreamScanner`]); lines appear as each 64 KiB batch is scanned.
///
/// # Errors
///
/// Reading `input` or writing `out` failed.
pub fn scan_stream(mut input: impl Read, json: bool, mut out: impl Write) -> io::Result<bool> {
    let mut scanner = StreamScanner::new();
    let mut any = false;
    let mut buf = vec![0u8; BATCH];
    let mut emit = |found: Vec<Finding>, out: &mut dyn Write| -> io::Result<()> {
        for f in found {
            any = true;
            if json {
                serde_json::to_writer(&mut *out, &f)?;
                out.write_all(b"\n")?;
            } else {
                writeln!(out, "{f}")?;
            }
        }
        Ok(())
    };
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        emit(scanner.push(&buf[..n]), &mut out)?;
    }
    emit(scanner.finish(), &mut out)?;
    out.flush()?;
    Ok(any)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic generator (splitmix64) for test tokens.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        /// `n` characters of `alphabet`, starting with one lower, one upper, one digit
        /// where the alphabet has them, so that the mixed-classes check passes.
        fn pick(&mut self, alphabet: &str, n: usize) -> String {
            let a = alphabet.as_bytes();
            let mut s: Vec<u8> = (0..n)
                .map(|_| a[(self.next() % a.len() as u64) as usize])
                .collect();
            let firsts = [b'k', b'Q', b'7'];
            let mut k = 0;
            for f in firsts {
                if a.contains(&f) && k < n {
                    s[k] = f;
                    k += 1;
                }
            }
            String::from_utf8(s).unwrap()
        }
    }

    const ALNUM_CHARS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

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

    #[test]
    fn decoders_match_their_definitions() {
        let mut out = Vec::new();
        decode_base64(b"aGVsbG8gd29ybGQ", &mut out);
        assert_eq!(out, b"hello world");
        decode_base64(b"-_-_", &mut out);
        assert_eq!(out, [0xfb, 0xff, 0xbf]);
        decode_hex(b"68656C6c6f", &mut out);
        assert_eq!(out, b"hello");
        let mut origin = Vec::new();
        decode_url(b"a%2Db%2", &mut out, &mut origin);
        assert_eq!(out, b"a-b%2");
        assert_eq!(origin, [0, 1, 4, 5, 6]);
    }

    #[test]
    fn runs_are_found_once_each() {
        let text = b"short words only, then aaaaaaaaaaaaaaaaaaaaaaaaa and bbbbbbbbbbbbbbbbbbbbb.";
        let mut runs = Vec::new();
        for_each_run(text, MIN_TOKEN, |s, e| runs.push(s..e));
        assert_eq!(runs, [23..48, 53..74]);
    }

    #[test]
    fn runs_match_a_byte_by_byte_definition() {
        let mut g = Gen(9);
        for round in 0..300 {
            let len = (g.next() % 700) as usize;
            let sep = [b' ', b'.', b'=', 0xc3];
            let text: Vec<u8> = (0..len)
                .map(|_| match g.next() % 8 {
                    0 => sep[(g.next() % 4) as usize],
                    _ => b"aZ9+/-_x"[(g.next() % 8) as usize],
                })
                .collect();
            for min in [1, 5, 20, 24, 64] {
                let mut want = Vec::new();
                let mut i = 0;
                while i < text.len() {
                    let s = i;
                    while i < text.len() && is(text[i], RUN) {
                        i += 1;
                    }
                    if i - s >= min {
                        want.push(s..i);
                    }
                    i += 1;
                }
                let mut got = Vec::new();
                for_each_run(&text, min, |s, e| got.push(s..e));
                assert_eq!(got, want, "round {round} min {min}");
            }
        }
    }

    #[test]
    fn run_masks_match_the_class_table() {
        let mut g = Gen(10);
        for round in 0..64 {
            let mut block = [0u8; 64];
            for (k, b) in block.iter_mut().enumerate() {
                *b = if round < 4 {
                    (round * 64 + k) as u8
                } else {
                    g.next() as u8
                };
            }
            let want = (0..64).fold(0u64, |m, k| m | u64::from(is(block[k], RUN)) << k);
            assert_eq!(run_mask(&block), want, "round {round}");
            assert_eq!(run_mask_portable(&block), want, "round {round}");
            let mut ms = Vec::new();
            masks(&block, &mut ms);
            assert_eq!(ms, [want], "round {round}");
        }
    }

    #[test]
    fn finding_display_is_name_encoding_range_fingerprint() {
        let f = Finding {
            pattern: "github_token",
            encoding: Encoding::Base64Url,
            range: 3..9,
            fingerprint: Fingerprint([1, 2, 3, 4, 5, 6, 7, 8]),
        };
        assert_eq!(
            f.to_string(),
            "github_token base64url 3..9 0102030405060708"
        );
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(
            json,
            r#"{"pattern":"github_token","encoding":"base64url","start":3,"end":9,"fingerprint":"0102030405060708"}"#
        );
    }

    #[test]
    fn stream_scanner_reports_a_split_secret_once() {
        let mut g = Gen(4);
        let tok = format!("AIza{}", g.pick(ALNUM_CHARS, 35));
        let text = format!("{}key={tok} {}", "a ".repeat(40_000), "b ".repeat(40_000));
        for split in [80_000 + 6, 80_000 + 20, 80_000 + 38] {
            let mut s = StreamScanner::new();
            let mut found = s.push(&text.as_bytes()[..split]);
            found.extend(s.flush());
            found.extend(s.push(&text.as_bytes()[split..]));
            found.extend(s.finish());
            assert_eq!(found.len(), 1, "split {split}: {found:?}");
            assert_eq!(&text[found[0].range.clone()], tok);
        }
    }
}
