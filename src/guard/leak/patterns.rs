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

use super::class::{
    ALNUM, B64URL, DASH, DIGIT, HEX_LOWER, LOWER, PEM_BODY, PLUS_SLASH, RUN, UPPER, is,
};
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
    "stripe_api_key",
    "gitlab_token",
    "npm_token",
    "pypi_token",
    "huggingface_token",
    "sendgrid_api_key",
    "twilio_api_key",
    "google_oauth_client_secret",
    "azure_storage_key",
    "jwt",
    "url_password",
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
    /// The last six characters are the base62 CRC32 of the others after the prefix's
    /// `_` (GitHub's and npm's tokens).
    Crc32,
    /// [`Check::Mixed`], and the part before the first `.` is the base64url of a JSON
    /// object with an `alg` key (a JWT's header).
    JwtHeader,
}

struct Pattern {
    name: &'static str,
    segs: &'static [Seg],
    check: Check,
    /// A word (lower case) that must appear, in any case, in the [`NEAR`] bytes before
    /// the token: for shapes too plain to stand alone.
    near: Option<&'static [u8]>,
}

/// How far before a token its [`Pattern::near`] word is looked for.
const NEAR: usize = 64;

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
    near: None,
};
const OPENROUTER: Pattern = Pattern {
    name: "openrouter_api_key",
    segs: &[Lit(b"sk-or-v1-"), Run(HEX_LOWER, 64, 64)],
    check: Check::Mixed,
    near: None,
};
const OPENAI_PROJECT: Pattern = Pattern {
    name: "openai_api_key",
    segs: &[
        Lit(b"sk-"),
        Alt(&[b"proj-", b"svcacct-", b"admin-"]),
        Run(B64URL, 40, 250),
    ],
    check: Check::Mixed,
    near: None,
};
const OPENAI_LEGACY: Pattern = Pattern {
    name: "openai_api_key",
    segs: &[Lit(b"sk-"), Run(ALNUM, 32, 250)],
    check: Check::Mixed,
    near: None,
};
/// 30 or more random characters and a 6-character base62 CRC32 of them.
const GITHUB: Pattern = Pattern {
    name: "github_token",
    segs: &[Lit(b"gh"), OneOf(b"pousr"), Lit(b"_"), Run(ALNUM, 36, 251)],
    check: Check::Crc32,
    near: None,
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
    near: None,
};
const GOOGLE: Pattern = Pattern {
    name: "google_api_key",
    segs: &[Lit(b"AIza"), Run(B64URL, 35, 35)],
    check: Check::Mixed,
    near: None,
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
    near: None,
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
    near: None,
};
const BRAVE: Pattern = Pattern {
    name: "brave_search_api_key",
    segs: &[Lit(b"BSA"), Run(B64URL, 25, 45)],
    check: Check::Mixed,
    near: None,
};
const AWS: Pattern = Pattern {
    name: "aws_access_key_id",
    segs: &[
        Alt(&[b"AKIA", b"ASIA", b"ABIA", b"ACCA"]),
        Run(UPPER | DIGIT, 16, 16),
    ],
    check: Check::NotRepeated,
    near: None,
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
    near: None,
};
const TELEGRAM: Pattern = Pattern {
    name: "telegram_bot_token",
    segs: &[Run(DIGIT, 8, 10), Lit(b":"), Run(B64URL, 35, 35)],
    check: Check::Mixed,
    near: None,
};

/// Secret and restricted keys, live and test: 24 characters (older keys) to 99.
const STRIPE: Pattern = Pattern {
    name: "stripe_api_key",
    segs: &[
        Alt(&[b"sk_live_", b"sk_test_", b"rk_live_", b"rk_test_"]),
        Run(ALNUM, 24, 247),
    ],
    check: Check::Mixed,
    near: None,
};
/// Personal, deploy and runner tokens: 20 characters, longer in GitLab's newer forms.
const GITLAB: Pattern = Pattern {
    name: "gitlab_token",
    segs: &[Alt(&[b"glpat-", b"gldt-", b"glrt-"]), Run(B64URL, 20, 300)],
    check: Check::Mixed,
    near: None,
};
/// GitHub's format: 30 random characters and their base62 CRC32.
const NPM: Pattern = Pattern {
    name: "npm_token",
    segs: &[Lit(b"npm_"), Run(ALNUM, 36, 36)],
    check: Check::Crc32,
    near: None,
};
/// A macaroon whose first bytes name the index (`pypi.org`, `test.pypi.org`).
const PYPI: Pattern = Pattern {
    name: "pypi_token",
    segs: &[
        Alt(&[b"pypi-AgEIcHlwaS5vcmc", b"pypi-AgENdGVzdC5weXBpLm9yZw"]),
        Run(B64URL, 50, 1000),
    ],
    check: Check::Mixed,
    near: None,
};
const HUGGINGFACE: Pattern = Pattern {
    name: "huggingface_token",
    segs: &[Lit(b"hf_"), Run(UPPER | LOWER, 34, 34)],
    check: Check::Mixed,
    near: None,
};
const SENDGRID: Pattern = Pattern {
    name: "sendgrid_api_key",
    segs: &[
        Lit(b"SG."),
        Run(B64URL, 22, 22),
        Lit(b"."),
        Run(B64URL, 43, 43),
    ],
    check: Check::Mixed,
    near: None,
};
/// An API key's SID: `SK` and 32 hex digits, a shape too plain to stand alone, so
/// `twilio` must be written just before it (`TWILIO_API_KEY=…`, `"twilio": {"key": …`).
const TWILIO: Pattern = Pattern {
    name: "twilio_api_key",
    segs: &[Lit(b"SK"), Run(HEX_LOWER, 32, 32)],
    check: Check::Mixed,
    near: Some(b"twilio"),
};
const GOOGLE_OAUTH: Pattern = Pattern {
    name: "google_oauth_client_secret",
    segs: &[Lit(b"GOCSPX-"), Run(B64URL, 28, 28)],
    check: Check::Mixed,
    near: None,
};
/// The 64-byte key of an Azure storage connection string (`AccountKey=…==`): 88
/// base64 characters; the trigger is the run after `AccountKey=`.
const AZURE_STORAGE: Pattern = Pattern {
    name: "azure_storage_key",
    segs: &[Run(ALNUM | PLUS_SLASH, 86, 86), Lit(b"==")],
    check: Check::Mixed,
    near: None,
};
/// Header, payload and signature in base64url; the header is a JSON object with an
/// `alg` key (`eyJ` is the base64 of `{"`). The trigger is a run that ends at a `.` with
/// an `eyJ` in it, at its start or after one of its bytes that is not a letter or digit.
const JWT: Pattern = Pattern {
    name: "jwt",
    segs: &[
        Lit(b"eyJ"),
        Run(B64URL, 17, JWT_HEADER_MAX - 3),
        Lit(b"."),
        Run(B64URL, 2, 4096),
        Lit(b"."),
        Run(B64URL, 16, 1024),
    ],
    check: Check::JwtHeader,
    near: None,
};
/// The longest JWT header looked at.
const JWT_HEADER_MAX: usize = 512;

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
    ("sk_live_", &[&STRIPE]),
    ("sk_test_", &[&STRIPE]),
    ("rk_live_", &[&STRIPE]),
    ("rk_test_", &[&STRIPE]),
    ("glpat-", &[&GITLAB]),
    ("gldt-", &[&GITLAB]),
    ("glrt-", &[&GITLAB]),
    ("npm_", &[&NPM]),
    ("pypi-", &[&PYPI]),
    ("hf_", &[&HUGGINGFACE]),
    ("SK", &[&TWILIO]),
    ("GOCSPX-", &[&GOOGLE_OAUTH]),
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

/// The length of the literal that starts the match of `segs` at `token`, if one does.
fn lead_len(token: &[u8], segs: &[Seg]) -> usize {
    match segs.first() {
        Some(Lit(l)) => l.len(),
        Some(Alt(ls)) => ls
            .iter()
            .find(|l| token.starts_with(l))
            .map_or(0, |l| l.len()),
        _ => 0,
    }
}

/// At least two of upper case, lower case and digits.
fn mixed(body: &[u8]) -> bool {
    let (mut u, mut l, mut d) = (false, false, false);
    for &b in body {
        u |= b.is_ascii_uppercase();
        l |= b.is_ascii_lowercase();
        d |= b.is_ascii_digit();
    }
    u as u8 + l as u8 + d as u8 >= 2
}

/// Whether `token` (whose literal lead is `lead` bytes long) passes `check`.
fn passes(check: Check, token: &[u8], lead: usize) -> bool {
    let body = &token[lead..];
    match check {
        Check::Mixed => mixed(body),
        Check::NotRepeated => body.first().is_some_and(|f| body.iter().any(|b| b != f)),
        Check::Crc32 => {
            // The part after the prefix's `_`.
            let Some(us) = token.iter().position(|&b| b == b'_') else {
                return false;
            };
            let (data, sum) = token[us + 1..].split_at(token.len() - us - 1 - 6);
            base62(sum) == Some(u64::from(crc32(data)))
        }
        Check::JwtHeader => {
            let header = &token[..token.iter().position(|&b| b == b'.').unwrap_or(0)];
            mixed(body) && jwt_header(header)
        }
    }
}

/// The IEEE CRC32 table (polynomial 0xEDB88320, reflected).
static CRC32: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// CRC32 (IEEE, as zlib's `crc32`).
#[cold]
fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |c, &b| {
        CRC32[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

/// The value of `digits` in base 62 (`0-9A-Za-z`), if every byte is a digit.
fn base62(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, &b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'A'..=b'Z' => b - b'A' + 10,
            b'a'..=b'z' => b - b'a' + 36,
            _ => return None,
        };
        Some(n * 62 + u64::from(d))
    })
}

/// Whether `header` (at most [`JWT_HEADER_MAX`] base64url characters) decodes to a JSON
/// object with an `alg` key.
#[cold]
fn jwt_header(header: &[u8]) -> bool {
    let mut buf = [0u8; JWT_HEADER_MAX * 3 / 4];
    let Some(n) = decode_base64url(header, &mut buf) else {
        return false;
    };
    let json = &buf[..n];
    std::str::from_utf8(json).is_ok() && json::object_has_key(json, b"alg")
}

/// Decodes unpadded base64url into `out` (trailing bits ignored); `None` for a length
/// that no encoding has or a byte outside the alphabet.
fn decode_base64url(src: &[u8], out: &mut [u8]) -> Option<usize> {
    if src.len() % 4 == 1 || src.len() * 3 / 4 > out.len() {
        return None;
    }
    let v = |b: u8| -> Option<u32> {
        Some(u32::from(match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        }))
    };
    let (mut acc, mut bits, mut n) = (0u32, 0, 0);
    for &b in src {
        acc = acc << 6 | v(b)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out[n] = (acc >> bits) as u8;
            acc &= (1 << bits) - 1;
            n += 1;
        }
    }
    Some(n)
}

/// A JSON validator just large enough for a JWT header: no allocation, nesting bounded.
mod json {
    /// How deep arrays and objects may nest.
    const DEPTH: usize = 16;

    /// Whether `s` is one JSON object (whitespace around it allowed) with the key `key`
    /// (compared as written, escapes not decoded) at its top level.
    pub(super) fn object_has_key(s: &[u8], key: &[u8]) -> bool {
        let mut p = Parser {
            s,
            i: 0,
            found: false,
        };
        p.ws();
        if p.peek() != Some(b'{') || p.object(0, Some(key)).is_none() {
            return false;
        }
        p.ws();
        p.i == s.len() && p.found
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
        found: bool,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }

        fn eat(&mut self, b: u8) -> Option<()> {
            (self.peek()? == b).then(|| self.i += 1)
        }

        fn ws(&mut self) {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.i += 1;
            }
        }

        fn value(&mut self, depth: usize) -> Option<()> {
            match self.peek()? {
                b'{' => self.object(depth, None),
                b'[' => self.array(depth),
                b'"' => self.string().map(|_| ()),
                b't' => self.word(b"true"),
                b'f' => self.word(b"false"),
                b'n' => self.word(b"null"),
                _ => self.number(),
            }
        }

        /// An object; when `key` is given, notes whether one of its keys is `key`.
        fn object(&mut self, depth: usize, key: Option<&[u8]>) -> Option<()> {
            if depth >= DEPTH {
                return None;
            }
            self.eat(b'{')?;
            self.ws();
            if self.eat(b'}').is_some() {
                return Some(());
            }
            loop {
                self.ws();
                let k = self.string()?;
                if key == Some(k) {
                    self.found = true;
                }
                self.ws();
                self.eat(b':')?;
                self.ws();
                self.value(depth + 1)?;
                self.ws();
                if self.eat(b',').is_none() {
                    return self.eat(b'}');
                }
            }
        }

        fn array(&mut self, depth: usize) -> Option<()> {
            if depth >= DEPTH {
                return None;
            }
            self.eat(b'[')?;
            self.ws();
            if self.eat(b']').is_some() {
                return Some(());
            }
            loop {
                self.ws();
                self.value(depth + 1)?;
                self.ws();
                if self.eat(b',').is_none() {
                    return self.eat(b']');
                }
            }
        }

        /// A string; returns its contents as written.
        fn string(&mut self) -> Option<&[u8]> {
            self.eat(b'"')?;
            let start = self.i;
            loop {
                match self.peek()? {
                    b'"' => break,
                    b'\\' => {
                        self.i += 1;
                        match self.peek()? {
                            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                            b'u' => {
                                let hex = self.s.get(self.i + 1..self.i + 5)?;
                                if !hex.iter().all(u8::is_ascii_hexdigit) {
                                    return None;
                                }
                                self.i += 5;
                            }
                            _ => return None,
                        }
                    }
                    0..=0x1f => return None,
                    _ => self.i += 1,
                }
            }
            let end = self.i;
            self.i += 1;
            Some(&self.s[start..end])
        }

        fn word(&mut self, w: &[u8]) -> Option<()> {
            self.s[self.i..].starts_with(w).then(|| self.i += w.len())
        }

        /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
        fn number(&mut self) -> Option<()> {
            let _ = self.eat(b'-');
            match self.peek()? {
                b'0' => self.i += 1,
                b'1'..=b'9' => self.digits(),
                _ => return None,
            }
            if self.eat(b'.').is_some() {
                self.peek().filter(u8::is_ascii_digit)?;
                self.digits();
            }
            if matches!(self.peek(), Some(b'e' | b'E')) {
                self.i += 1;
                if matches!(self.peek(), Some(b'+' | b'-')) {
                    self.i += 1;
                }
                self.peek().filter(u8::is_ascii_digit)?;
                self.digits();
            }
            Some(())
        }

        fn digits(&mut self) {
            while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.i += 1;
            }
        }
    }
}

/// Tries `p` at `hay[pos..]` with the boundary rules, the body check and the word that
/// must be near.
fn try_pattern(hay: &[u8], pos: usize, p: &Pattern) -> Option<usize> {
    if pos > 0 && is(hay[pos - 1], ALNUM) {
        return None;
    }
    let end = match_segs(hay, pos, p.segs)?;
    if end < hay.len() && is(hay[end], B64URL) {
        return None;
    }
    let token = &hay[pos..end];
    if !passes(p.check, token, lead_len(token, p.segs)) {
        return None;
    }
    if let Some(word) = p.near {
        let before = &hay[pos.saturating_sub(NEAR)..pos];
        if !before
            .windows(word.len())
            .any(|w| w.eq_ignore_ascii_case(word))
        {
            return None;
        }
    }
    Some(end)
}

/// A token found in one buffer, before it is mapped back to the scanned text.
pub(super) struct Hit {
    /// The pattern's name.
    pub(super) pattern: &'static str,
    /// Where the token sits in the buffer.
    pub(super) range: Range<usize>,
}

/// For each byte, the literal prefixes (bit `i` for `PREFIXES[i]`) whose first byte
/// (`LEADS[0]`) or second byte (`LEADS[1]`) it is: the prefixes a text `t` can start with
/// are `LEADS[0][t[0]] & LEADS[1][t[1]]`, most often none (`pkg/`, `left-pad`), and then
/// no prefix is compared.
static LEADS: [[u32; 256]; 2] = {
    assert!(PREFIXES.len() <= 32);
    let mut t = [[0u32; 256]; 2];
    let mut i = 0;
    while i < PREFIXES.len() {
        let p = PREFIXES[i].0.as_bytes();
        t[0][p[0] as usize] |= 1 << i;
        t[1][p[1] as usize] |= 1 << i;
        i += 1;
    }
    t
};

/// The literal prefixes `text` may start with, as bits of [`LEADS`].
#[inline(always)]
fn leads(text: &[u8]) -> u32 {
    match text {
        [a, b, ..] => LEADS[0][*a as usize] & LEADS[1][*b as usize],
        _ => 0,
    }
}

/// Raw tokens in `hay`, in order of position, without decoding anything.
pub(super) fn raw_hits(hay: &[u8], hits: &mut Vec<Hit>) {
    if hay.len() < 64 && !short_text_may_hold_a_token(hay) {
        return;
    }
    let mut runs = Runs::<MIN_TOKEN>::new(hay);
    while let Some((s, e)) = runs.next_before(hay.len()) {
        run_hits(hay, s, e, hits);
    }
    pem_hits(hay, &mut 0, hay.len(), hits);
    userinfo_hits(hay, &mut 0, hay.len(), hits);
}

/// Whether the text `hay` (shorter than 64 bytes, too short for a PEM block) holds a run
/// of [`MIN_TOKEN`] [`RUN`] bytes or an `@` (a URL password's end), in one pass.
///
/// Most of the decoded windows the scanner makes are this short (a UUID, a git SHA or a
/// path, read as base64 or hex) and random; this answers for them without the run
/// finder's and the `@` search's setup, which cost more than the pass on so few bytes.
fn short_text_may_hold_a_token(hay: &[u8]) -> bool {
    // A run of `MIN_TOKEN` bytes covers a byte whose offset is `MIN_TOKEN - 1` modulo
    // `MIN_TOKEN`: only around those is a run looked for. A random byte is a run byte one
    // time in four.
    let mut k = MIN_TOKEN - 1;
    while k < hay.len() {
        if is(hay[k], RUN) {
            let before = hay[..k].iter().rev().take_while(|&&b| is(b, RUN)).count();
            let after = hay[k..].iter().take_while(|&&b| is(b, RUN)).count();
            if before + after >= MIN_TOKEN {
                return true;
            }
        }
        k += MIN_TOKEN;
    }
    hay.contains(&b'@')
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
    let dot_after = hay.get(e) == Some(&b'.');
    // Discord: the run is the first of three dot-separated parts.
    if (23..=26).contains(&len) && dot_after {
        push_hit(hay, s, &DISCORD, hits);
    }
    // SendGrid: the run is the 22 characters between `SG.` and the second part.
    if len == 22 && dot_after && s >= 3 && &hay[s - 3..s] == b"SG." {
        push_hit(hay, s - 3, &SENDGRID, hits);
    }
    // A JWT: the run ends with the header, which starts at an `eyJ` at the run's start
    // or after a byte of it that is not a letter or digit (`token_eyJ…`, `/auth/eyJ…`).
    if dot_after {
        jwt_hits(hay, s, e, hits);
    }
    // Azure storage: the run is the key but for its `==`.
    if len == 86 && hay[..s].ends_with(b"AccountKey=") {
        push_hit(hay, s, &AZURE_STORAGE, hits);
    }
    // A token starts at the run's start or right after a non-alphanumeric byte of it
    // (`-`, `_`, `+`, `/`): only there are the literal prefixes compared.
    let mut next = s;
    let mut after_alnum = false;
    for pos in s..e {
        let b = hay[pos];
        if !after_alnum && pos >= next {
            let candidates = leads(&hay[pos..]);
            if candidates != 0 {
                if let Some(end) = prefixed_hit(hay, pos, candidates, hits) {
                    next = end;
                }
            }
        }
        after_alnum = is(b, ALNUM);
    }
}

/// The JWTs whose header ends the run `hay[s..e]` (a `.` follows it).
///
/// The header is at most [`JWT_HEADER_MAX`] base64url characters, so only the run's last
/// ones after its last `+` or `/` are looked at: a long base64 run costs no more than a
/// short one.
fn jwt_hits(hay: &[u8], s: usize, e: usize, hits: &mut Vec<Hit>) {
    let from = e.saturating_sub(JWT_HEADER_MAX).max(s);
    let from = hay[from..e]
        .iter()
        .rposition(|&b| is(b, PLUS_SLASH))
        .map_or(from, |k| from + k + 1);
    // Most runs that end at a `.` are words of a path or a version (`left-pad-1.3.0`): a
    // plain loop, not a `memmem` searcher built for each.
    for pos in from..e.saturating_sub(2) {
        if hay[pos] == b'e' && hay[pos + 1] == b'y' && hay[pos + 2] == b'J' {
            push_hit(hay, pos, &JWT, hits);
        }
    }
}

/// Pushes `p`'s hit at `hay[pos..]`, if it matches there.
fn push_hit(hay: &[u8], pos: usize, p: &Pattern, hits: &mut Vec<Hit>) {
    if let Some(end) = try_pattern(hay, pos, p) {
        hits.push(Hit {
            pattern: p.name,
            range: pos..end,
        });
    }
}

/// Tries the patterns of the literal prefix at `hay[pos..]`, if any of `candidates` (bits
/// of [`LEADS`]) is there; pushes the first that matches and returns its end.
#[inline(never)]
fn prefixed_hit(hay: &[u8], pos: usize, candidates: u32, hits: &mut Vec<Hit>) -> Option<usize> {
    let rest = &hay[pos..];
    let mut bits = candidates;
    let patterns = loop {
        if bits == 0 {
            return None;
        }
        let (p, patterns) = PREFIXES[bits.trailing_zeros() as usize];
        if rest.starts_with(p.as_bytes()) {
            break patterns;
        }
        bits &= bits - 1;
    };
    patterns.iter().find_map(|p| {
        let end = try_pattern(hay, pos, p)?;
        hits.push(Hit {
            pattern: p.name,
            range: pos..end,
        });
        Some(end)
    })
}

/// The password of a URL's userinfo: `scheme://user:password@host`.
///
/// Looks at the `@` at or after `*from` and before `until`, and moves `*from` past them,
/// so that a text can be searched piece by piece. The scheme is a
/// letter and up to 31 of `[A-Za-z0-9+.-]`, not glued to more of them; the user part
/// (maybe empty) and the password are userinfo characters (unreserved, percent-escapes,
/// sub-delimiters; not `:`), at most 128 each; a host starts right after the `@`. A
/// password is 8 characters or more, at most a third of it percent-escapes, and what is
/// left of it without them has at least three of upper case, lower case, digits and other
/// characters: that rejects `user:password@`, `:$PASSWORD@`, `:secret123@` and URL
/// parsers' test data (`:%F0%9F%92%A9@`). The finding's range is the password's.
pub(super) fn userinfo_hits(hay: &[u8], from: &mut usize, until: usize, hits: &mut Vec<Hit>) {
    // Found from the `@`, which text holds far less often than `:` or `/`.
    while *from < until {
        let Some(off) = memchr::memchr(b'@', &hay[*from..until]) else {
            *from = until;
            break;
        };
        let at = *from + off;
        *from = at + 1;
        if let Some(range) = url_password(hay, at) {
            hits.push(Hit {
                pattern: "url_password",
                range,
            });
        }
    }
}

/// Whether `b` may stand in a URL's userinfo (RFC 3986: unreserved, `%`, sub-delimiters),
/// `:` aside.
fn is_userinfo(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(&b)
}

/// The password of the URL whose userinfo ends at the `@` at `at`, if it has one.
fn url_password(hay: &[u8], at: usize) -> Option<Range<usize>> {
    // The userinfo characters right before `hay[end]`, at most `max + 1` of them.
    let back = |end: usize, max: usize| {
        hay[end.saturating_sub(max + 1)..end]
            .iter()
            .rev()
            .take_while(|&&b| is_userinfo(b))
            .count()
    };
    let pass = at - back(at, 128);
    if !(8..=128).contains(&(at - pass)) || pass == 0 || hay[pass - 1] != b':' {
        return None;
    }
    let user = pass - 1 - back(pass - 1, 128);
    if pass - 1 - user > 128 || !hay[..user].ends_with(b"://") {
        return None;
    }
    let sep = user - 3;
    let is_scheme = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-');
    let scheme = hay[sep.saturating_sub(33)..sep]
        .iter()
        .rev()
        .take_while(|&&b| is_scheme(b))
        .count();
    if scheme == 0 || scheme > 32 || !hay[sep - scheme].is_ascii_alphabetic() {
        return None;
    }
    let host = hay
        .get(at + 1)
        .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'[');
    (host && password_like(&hay[pass..at])).then_some(pass..at)
}

/// Whether `pass`, its percent-escapes left out, has at least three of upper case, lower
/// case, digits and other characters, and escapes are at most a third of it (more is a URL
/// parser's test data, `:%00%01%09…@`).
fn password_like(pass: &[u8]) -> bool {
    let mut seen = [false; 4];
    let (mut i, mut escaped) = (0, 0);
    while i < pass.len() {
        let b = pass[i];
        if b == b'%'
            && pass
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
        {
            i += 3;
            escaped += 3;
            continue;
        }
        let class = if b.is_ascii_uppercase() {
            0
        } else if b.is_ascii_lowercase() {
            1
        } else if b.is_ascii_digit() {
            2
        } else {
            3
        };
        seen[class] = true;
        i += 1;
    }
    seen.iter().filter(|&&s| s).count() >= 3 && escaped * 3 <= pass.len()
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

/// Line breaks as escapes: `\n`, `\r\n`, and both with the backslash escaped again.
const PEM_ESCAPES: &[&[u8]] = &[b"\\n", b"\\r\\n", b"\\\\n", b"\\\\r\\\\n"];

/// The end of the block whose header spans `start..header_end`: after its `-----END` line
/// when there is one, else after its body. `None` when no body line of 40 base64
/// characters follows the header.
fn pem_block_end(hay: &[u8], start: usize, header_end: usize) -> Option<usize> {
    let limit = hay.len().min(start + PEM_MAX);
    let (mut i, mut run, mut longest) = (header_end, 0, 0);
    while i < limit {
        if hay[i] == b'\\' {
            // A line break written as an escape, inside a JSON string or an env var.
            let rest = &hay[i..limit];
            match PEM_ESCAPES.iter().find(|e| rest.starts_with(e)) {
                Some(e) => {
                    i += e.len();
                    run = 0;
                    continue;
                }
                // The text ends inside an escape (a stream cut there): the block runs
                // to the end, so that the stream scanner waits for the rest.
                None if limit == hay.len() && longest >= 40 => {
                    if PEM_ESCAPES.iter().any(|e| e.starts_with(rest)) {
                        return Some(hay.len());
                    }
                    break;
                }
                None => break,
            }
        }
        // `-----END` stops the body; a lone `-` inside a header line does not.
        if !is(hay[i], PEM_BODY) || hay[i] == b'-' && hay[i..].starts_with(b"-----") {
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
    use crate::guard::leak::testgen::{ALNUM_CHARS, Gen, base62_6, crc32};
    use crate::guard::leak::{Encoding, Fingerprint, scan};

    #[test]
    fn finds_a_github_token_with_its_range() {
        let mut g = Gen(1);
        let tok = g.checksummed(&format!("gh{}_", "p"));
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

    /// A GitHub or npm token whose checksum does not match its random part is not one.
    #[test]
    fn a_bad_checksum_is_rejected() {
        let mut g = Gen(5);
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "npm_"] {
            let tok = g.checksummed(prefix);
            let found = scan(format!("t={tok}\n").as_bytes());
            assert_eq!(found.len(), 1, "{prefix}: {found:?}");
            for k in [prefix.len(), tok.len() - 6, tok.len() - 1] {
                let mut bad = tok.clone().into_bytes();
                bad[k] = if bad[k] == b'x' { b'y' } else { b'x' };
                let bad = String::from_utf8(bad).unwrap();
                assert!(scan(bad.as_bytes()).is_empty(), "{prefix}: changed at {k}");
            }
        }
        // The check is CRC32 itself: the standard check value.
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(super::crc32(b"123456789"), crc32(b"123456789"));
        assert_eq!(
            super::base62(base62_6(0xCBF4_3926).as_bytes()),
            Some(0xCBF4_3926)
        );
    }

    #[test]
    fn jwt_headers_are_json_objects_with_alg() {
        use super::json::object_has_key;
        for ok in [
            &br#"{"alg":"HS256","typ":"JWT"}"#[..],
            br#" { "typ" : "JWT" , "alg" : "RS256", "x": [1, -2.5e3, true, null, {"a": {}}] } "#,
            br#"{"kid":"a\"b\\c\u00e9","alg":"none"}"#,
        ] {
            assert!(
                object_has_key(ok, b"alg"),
                "{}",
                String::from_utf8_lossy(ok)
            );
        }
        for bad in [
            &br#"{"typ":"JWT"}"#[..],
            br#"{"x":{"alg":"HS256"}}"#,
            br#"["alg"]"#,
            br#"{"alg":"HS256""#,
            br#"{"alg":"HS256"} x"#,
            br#"{"alg":01}"#,
            br#"{"alg":1.}"#,
            br#"{"alg":"a	b"}"#,
            br#"{"alg":"\q"}"#,
            br#"{"alg" "x"}"#,
            br#"{"alg":"x",}"#,
        ] {
            assert!(
                !object_has_key(bad, b"alg"),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// A JWT is found where gitleaks' `\b` finds one (after `=`, `/`, `-`, `+`, a space)
    /// and, as every prefixed token, also after `_` (`token_eyJ…`); never glued to a
    /// letter or digit. Before, only a JWT that started a run was found.
    #[test]
    fn a_jwt_starts_after_any_byte_but_a_letter_or_digit() {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut g = Gen(6);
        let jwt = format!(
            "{}.{}.{}",
            b64.encode(br#"{"alg":"HS256","typ":"JWT"}"#),
            b64.encode(format!(r#"{{"sub":"{}"}}"#, g.pick(ALNUM_CHARS, 12))),
            g.pick(ALNUM_CHARS, 43)
        );
        for before in [
            "",
            " ",
            "x=",
            "token_",
            "TOKEN-",
            "a+",
            "https://h/auth/",
            "q_x-",
        ] {
            let text = format!("{before}{jwt} done");
            let found = scan(text.as_bytes());
            assert_eq!(found.len(), 1, "{before:?}: {found:?}");
            assert_eq!(found[0].pattern, "jwt");
            assert_eq!(&text[found[0].range.clone()], jwt, "{before:?}");
        }
        for before in ["x", "token", "Q7", "a_b9"] {
            let text = format!("{before}{jwt} done");
            assert!(scan(text.as_bytes()).is_empty(), "{before:?}");
        }
        // A `+` or `/` inside the header is not base64url: no JWT starts before it.
        let text = format!("{}/x{} done", &jwt[..10], &jwt[10..]);
        assert!(scan(text.as_bytes()).is_empty());
    }

    /// The probe for short decoded windows says "maybe" exactly when the text has a run of
    /// 20 run bytes or an `@`, the things the full search needs in a text under 64 bytes.
    #[test]
    fn the_short_text_probe_agrees_with_its_definition() {
        use crate::guard::leak::class::{RUN, is};
        let mut g = Gen(8);
        let mut answers = [0, 0];
        for round in 0..20_000 {
            let len = (g.next() % 64) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| match g.next() % 100 {
                    0 => b'@',
                    1..=6 => g.next() as u8,
                    7..=9 => b' ',
                    _ => b"aZ9+/-_x"[(g.next() % 8) as usize],
                })
                .collect();
            let mut want = text.contains(&b'@');
            let mut run = 0;
            for &b in &text {
                run = if is(b, RUN) { run + 1 } else { 0 };
                want |= run >= super::MIN_TOKEN;
            }
            let got = super::short_text_may_hold_a_token(&text);
            assert_eq!(
                got,
                want,
                "round {round}: {:?}",
                String::from_utf8_lossy(&text)
            );
            answers[usize::from(got)] += 1;
        }
        assert!(answers[0] > 2000 && answers[1] > 2000, "{answers:?}");
    }

    #[test]
    fn url_passwords_need_a_real_userinfo() {
        let pass = format!("{}{}", "Xk4", "pQ9zLm2");
        let found = scan(format!("DB=postgres://app:{pass}@db.internal:5432/x\n").as_bytes());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pattern, "url_password");
        assert_eq!(found[0].range, 18..28);
        for text in [
            format!("https://db.internal:5432/{pass}@x"),
            format!("https://user@{pass}.example"),
            "postgres://user:password@localhost/db".to_string(),
            "redis://:$REDIS_PASSWORD@cache:6379".to_string(),
            format!("9p://u:{pass}@host"),
            format!("postgres://u:{pass}@/socket"),
            format!("see: postgres://u:{}@h", "Ab1"),
            format!("ftp://rms:{}@host", "secret123"),
            format!("http://u:{}@e", "%F0%9F%92%A9"),
            format!("https://foo.com:123,foo:{}@b", "Bar1"),
        ] {
            assert!(scan(text.as_bytes()).is_empty(), "{text}");
        }
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
