//! Leak detection and redaction, end to end: every pattern in every encoding, split across
//! chunks, and a clean corpus that must stay clean.
//!
//! Test tokens are generated at run time from a fixed-seed generator, so no secret-shaped
//! literal sits in the repository for secret scanners to flag.

mod leakgen;

use std::io::Write;

use stockade::guard::leak::{
    Encoding, Finding, Fingerprint, PATTERN_NAMES, StreamScanner, scan, scan_stream,
};
use stockade::guard::redact::{REDACTED, RedactingWriter, Redactor};

/// splitmix64: deterministic, seeded, good enough for test data.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// `n` characters from `alphabet`; the first ones are a lower-case letter, an upper-case
    /// letter and a digit when the alphabet has them, as real random tokens almost always do.
    fn pick(&mut self, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        let mut s: Vec<u8> = (0..n)
            .map(|_| a[(self.next() % a.len() as u64) as usize])
            .collect();
        let mut k = 0;
        for f in [b'k', b'Q', b'7'] {
            if a.contains(&f) && k < n {
                s[k] = f;
                k += 1;
            }
        }
        String::from_utf8(s).unwrap()
    }
}

impl Gen {
    /// A GitHub-style token: `prefix`, 30 random characters and their checksum.
    fn checksummed(&mut self, prefix: &str) -> String {
        leakgen::checksummed(&mut leakgen::Gen(self.next()), prefix)
    }
}

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64STD: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const UPPER_DIGIT: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const HEX_LOWER: &str = "0123456789abcdef";
const DIGITS: &str = "0123456789";

/// One generated token per pattern shape (several for patterns with variants).
fn tokens() -> Vec<(&'static str, String)> {
    let mut g = Gen(0x5eed);
    let pem_label = ["PRIVATE", "KEY"].join(" ");
    let pem_body: Vec<String> = (0..4).map(|_| g.pick(B64STD, 64)).collect();
    let pem = format!(
        "-----BEGIN {pem_label}-----\n{}\n-----END {pem_label}-----",
        pem_body.join("\n")
    );
    let mut tokens = vec![
        (
            "anthropic_api_key",
            format!("sk-ant-api03-{}", g.pick(B64URL, 93)),
        ),
        (
            "openrouter_api_key",
            format!("sk-or-v1-{}", g.pick(HEX_LOWER, 64)),
        ),
        ("openai_api_key", format!("sk-proj-{}", g.pick(B64URL, 120))),
        ("openai_api_key", format!("sk-{}", g.pick(ALNUM, 48))),
        ("github_token", g.checksummed("ghp_")),
        ("github_token", g.checksummed("gho_")),
        ("github_token", g.checksummed("ghu_")),
        ("github_token", g.checksummed("ghs_")),
        ("github_token", g.checksummed("ghr_")),
        (
            "github_pat",
            format!("github_pat_{}_{}", g.pick(ALNUM, 22), g.pick(ALNUM, 59)),
        ),
        ("google_api_key", format!("AIza{}", g.pick(B64URL, 35))),
        (
            "discord_bot_token",
            format!(
                "M{}.{}.{}",
                g.pick(B64URL, 25),
                g.pick(B64URL, 6),
                g.pick(B64URL, 38)
            ),
        ),
        (
            "slack_token",
            format!(
                "xoxb-{}-{}-{}",
                g.pick(DIGITS, 12),
                g.pick(DIGITS, 13),
                g.pick(ALNUM, 24)
            ),
        ),
        (
            "slack_token",
            format!(
                "xoxp-{}-{}-{}-{}",
                g.pick(DIGITS, 12),
                g.pick(DIGITS, 12),
                g.pick(DIGITS, 13),
                g.pick(HEX_LOWER, 32)
            ),
        ),
        (
            "slack_app_token",
            format!(
                "xapp-1-A{}-{}-{}",
                g.pick(UPPER_DIGIT, 10),
                g.pick(DIGITS, 13),
                g.pick(HEX_LOWER, 64)
            ),
        ),
        (
            "telegram_bot_token",
            format!("{}:{}", g.pick(DIGITS, 10), g.pick(B64URL, 35)),
        ),
        ("brave_search_api_key", format!("BSA{}", g.pick(B64URL, 28))),
        (
            "aws_access_key_id",
            format!("AKIA{}", g.pick(UPPER_DIGIT, 16)),
        ),
        (
            "aws_access_key_id",
            format!("ASIA{}", g.pick(UPPER_DIGIT, 16)),
        ),
        ("private_key", pem),
        (
            "private_key",
            leakgen::pem(&mut leakgen::Gen(g.next()), "\\n"),
        ),
        (
            "private_key",
            leakgen::pem(&mut leakgen::Gen(g.next()), "\\r\\n"),
        ),
        (
            "private_key",
            leakgen::pem(&mut leakgen::Gen(g.next()), "\\\\n"),
        ),
    ];
    // The formats whose planted text is the secret itself (not Twilio's, Azure's or a
    // URL's, which need words around them: tests/leak_oracle.rs has those).
    let mut lg = leakgen::Gen(0x5eed);
    for k in 14..leakgen::FORMATS {
        let p = leakgen::plant(&mut lg, k);
        if p.secret == (0..p.text.len()) {
            tokens.push((p.name, p.text));
        }
    }
    tokens
}

fn base64(bytes: &[u8], url_safe: bool, pad: bool) -> String {
    let alphabet = if url_safe { B64URL } else { B64STD }.as_bytes();
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = u32::from(c[0]) << 16
            | u32::from(*c.get(1).unwrap_or(&0)) << 8
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(alphabet[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

fn hex(bytes: &[u8], upper: bool) -> String {
    bytes
        .iter()
        .map(|b| {
            if upper {
                format!("{b:02X}")
            } else {
                format!("{b:02x}")
            }
        })
        .collect()
}

/// Every byte escaped.
fn url_full(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("%{b:02X}")).collect()
}

/// Only what a URL must escape, the way `encodeURIComponent` does.
fn url_partial(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The encodings of `token` that the scanner must see through, with the encoding it must
/// report.
fn encoded_forms(token: &str) -> Vec<(String, Encoding)> {
    let t = token.as_bytes();
    let b64_label = |s: &str| {
        if s.contains(['-', '_']) {
            Encoding::Base64Url
        } else {
            Encoding::Base64
        }
    };
    let std = base64(t, false, true);
    let url = base64(t, true, false);
    let mut forms = vec![
        (token.to_string(), Encoding::Raw),
        (url_full(t), Encoding::Url),
        (hex(t, false), Encoding::Hex),
        (hex(t, true), Encoding::Hex),
    ];
    let partial = url_partial(t);
    if partial != token {
        forms.push((partial, Encoding::Url));
    }
    forms.push((std.clone(), b64_label(&std)));
    forms.push((url.clone(), b64_label(&url)));
    forms
}

fn assert_found(found: &[Finding], pattern: &str, encoding: Encoding, token: &str, context: &str) {
    let fp = Fingerprint::of(token.as_bytes());
    assert!(
        found
            .iter()
            .any(|f| f.pattern == pattern && f.encoding == encoding && f.fingerprint == fp),
        "{context}: no {pattern} {encoding} finding; got {found:?}"
    );
}

#[test]
fn pattern_names_are_documented() {
    for (name, _) in tokens() {
        assert!(PATTERN_NAMES.contains(&name), "{name}");
    }
}

#[test]
fn every_pattern_is_found_in_every_encoding() {
    for (name, token) in tokens() {
        for (form, encoding) in encoded_forms(&token) {
            let text = format!("worker said: {form}\nok\n");
            let found = scan(text.as_bytes());
            assert_found(
                &found,
                name,
                encoding,
                &token,
                &format!("{name} as {encoding}"),
            );
            let f = found.iter().find(|f| f.pattern == name).unwrap();
            // The range covers the encoded secret (base64 ranges may take in a neighbouring
            // character that shares bits with it).
            let start = text.find(&form).unwrap();
            assert!(
                f.range.start >= start && f.range.end <= start + form.len() + 1,
                "{name} {encoding}: range {:?} outside {}..{}",
                f.range,
                start,
                start + form.len()
            );
            assert!(
                !f.to_string().contains(&token),
                "the report must not hold the secret"
            );
            assert!(
                !format!("{f:?}").contains(&token),
                "Debug must not hold the secret"
            );
        }
    }
}

#[test]
fn base64_of_a_larger_text_is_searched_at_every_alignment() {
    for (name, token) in tokens() {
        for pad in 0..3 {
            let inner = format!("{}config: {token} (loaded)", "x".repeat(pad));
            for url_safe in [false, true] {
                let enc = base64(inner.as_bytes(), url_safe, true);
                // A misaligned run: two base64-alphabet characters glued in front.
                for lead in ["", "Zz", "q"] {
                    let text = format!("blob={lead}{enc};");
                    let found = scan(text.as_bytes());
                    assert!(
                        found.iter().any(|f| f.pattern == name
                            && f.fingerprint == Fingerprint::of(token.as_bytes())),
                        "{name} pad {pad} url_safe {url_safe} lead {lead:?}: {found:?}"
                    );
                }
            }
        }
    }
}

/// Feeds `text` in two chunks split at `split`, with a flush in between (so the first chunk
/// is scanned on its own), and returns the findings.
fn stream_scan(text: &[u8], split: usize) -> Vec<Finding> {
    let mut s = StreamScanner::new();
    let mut found = s.push(&text[..split]);
    found.extend(s.flush());
    found.extend(s.push(&text[split..]));
    found.extend(s.finish());
    found
}

#[test]
fn a_secret_split_across_chunks_is_found_once_in_every_encoding() {
    for (name, token) in tokens() {
        for (form, encoding) in encoded_forms(&token) {
            let text = format!("header line\nvalue: {form} trailer\n");
            let start = text.find(&form).unwrap();
            let step = (form.len() / 7).max(1);
            for split in (start + 1..start + form.len()).step_by(step) {
                let found = stream_scan(text.as_bytes(), split);
                let context = format!("{name} as {encoding} split at {split}");
                assert_found(&found, name, encoding, &token, &context);
                let same: Vec<_> = found.iter().filter(|f| f.pattern == name).collect();
                assert_eq!(same.len(), 1, "{context}: {found:?}");
            }
        }
    }
}

/// A JWT of 4,300 bytes (a long payload, as OIDC ID tokens with many claims have), split
/// anywhere, raw or encoded: no part of it matches (a JWT cut before its signature is
/// none), so the stream must keep the run it is in. Before, only the last 2 KiB of a batch
/// were kept, and a JWT split more than 2 KiB (or 2 KiB of its encoding) after its start
/// was missed. Every form of it is longer than 2 KiB; the percent-escaped one is 13 KB.
#[test]
fn a_long_jwt_split_anywhere_is_found_once_in_every_encoding() {
    let mut g = Gen(12);
    let header = base64(br#"{"alg":"RS256","typ":"JWT","kid":"k1"}"#, true, false);
    let claims = format!(
        r#"{{"sub":"{}","groups":"{}"}}"#,
        g.pick(ALNUM, 20),
        g.pick(ALNUM, 2900)
    );
    let payload = base64(claims.as_bytes(), true, false);
    let jwt = format!("{header}.{payload}.{}", g.pick(B64URL, 342));
    assert!((4200..4500).contains(&jwt.len()), "{}", jwt.len());
    assert_eq!(
        scan(format!("x {jwt} y").as_bytes()).len(),
        1,
        "the long JWT is a JWT"
    );
    let mut forms = encoded_forms(&jwt);
    // Inside a larger encoded text, as a JSON document holding it would be.
    let doc = format!("{{\"id_token\": \"{jwt}\"}}");
    forms.push((base64(doc.as_bytes(), false, true), Encoding::Base64));
    for (form, encoding) in forms {
        assert!(form.len() > 2048, "{encoding}: {}", form.len());
        let text = format!("header line\nvalue: {form} trailer\n");
        let start = text.find(&form).unwrap();
        for split in [
            start + 1,
            start + 2100,
            start + form.len() / 2,
            start + form.len() - 30,
        ] {
            let found = stream_scan(text.as_bytes(), split);
            let context = format!("jwt as {encoding} ({} bytes) split at {split}", form.len());
            assert_found(&found, "jwt", encoding, &jwt, &context);
            assert_eq!(found.len(), 1, "{context}: {found:?}");
        }
        // In 64 KiB batches, the JWT straddling the first batch's end.
        for behind in [2100, form.len() / 2, form.len() - 30] {
            let lead = 64 * 1024 - behind - 2;
            let text = format!("{}\n {form} trailer\n", "x".repeat(lead));
            let mut s = StreamScanner::new();
            let mut found = Vec::new();
            for c in text.as_bytes().chunks(4096) {
                found.extend(s.push(c));
            }
            found.extend(s.finish());
            let context = format!("jwt as {encoding} {behind} bytes into the batch's end");
            assert_found(&found, "jwt", encoding, &jwt, &context);
            assert_eq!(found.len(), 1, "{context}: {found:?}");
        }
    }
}

#[test]
fn the_writer_finds_a_split_secret_it_does_not_know() {
    let (name, token) = tokens().swap_remove(4);
    for (form, encoding) in encoded_forms(&token) {
        let text = format!("> {form}\n");
        for split in 1..text.len() {
            let mut w = RedactingWriter::new(Redactor::default(), Vec::new());
            w.write_all(&text.as_bytes()[..split]).unwrap();
            w.flush().unwrap();
            w.write_all(&text.as_bytes()[split..]).unwrap();
            let (out, found) = w.finish().unwrap();
            assert_eq!(out, text.as_bytes());
            assert_found(&found, name, encoding, &token, &format!("split {split}"));
        }
    }
}

#[test]
fn known_secrets_are_redacted_in_every_form_and_raise_no_finding() {
    let all = tokens();
    let secrets: Vec<&str> = all.iter().map(|(_, t)| t.as_str()).collect();
    let r = Redactor::new(&secrets);
    assert_eq!(r.len(), secrets.len());
    for (name, token) in &all {
        for (form, encoding) in encoded_forms(token) {
            let text = format!("echo: {form}\n");
            let (out, found) = r.scrub(text.as_bytes());
            let out = String::from_utf8(out).unwrap();
            assert!(
                out.contains(REDACTED),
                "{name} as {encoding} not redacted: {out}"
            );
            assert!(
                found.is_empty(),
                "{name} as {encoding}: {found:?} after redaction: {out}"
            );
        }
    }
}

#[test]
fn the_writer_redacts_known_secrets_split_across_writes() {
    let all = tokens();
    let secrets: Vec<&str> = all.iter().map(|(_, t)| t.as_str()).collect();
    let r = Redactor::new(&secrets);
    let mut text = String::new();
    for (i, s) in secrets.iter().enumerate() {
        text.push_str(&format!("line {i}: {s}\n"));
    }
    let expected = r.redact(text.as_bytes()).into_owned();
    let mut g = Gen(9);
    for _ in 0..50 {
        let mut w = RedactingWriter::new(r.clone(), Vec::new());
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            let n = (g.next() % 97 + 1).min(rest.len() as u64) as usize;
            w.write_all(&rest[..n]).unwrap();
            rest = &rest[n..];
        }
        let (out, found) = w.finish().unwrap();
        assert_eq!(out, expected);
        assert!(found.is_empty(), "{found:?}");
    }
}

#[test]
fn memory_stays_bounded_on_a_long_stream() {
    // One 8 MiB base64 run with a secret near its end, pushed in 4 KiB chunks.
    let (name, token) = tokens().swap_remove(10);
    let mut g = Gen(11);
    let mut inner = g.bytes(6 << 20);
    inner.extend_from_slice(format!(" {token} ").as_bytes());
    let text = base64(&inner, false, true);
    let mut s = StreamScanner::new();
    let mut found = Vec::new();
    for c in text.as_bytes().chunks(4096) {
        found.extend(s.push(c));
        assert!(
            s.buffered() <= 128 * 1024,
            "the buffer grows with the stream: {s:?}"
        );
    }
    found.extend(s.finish());
    assert_found(&found, name, Encoding::Base64, &token, "long stream");
}

#[test]
fn scan_stream_prints_fingerprints_and_reports_whether_it_found_something() {
    let (_, token) = tokens().swap_remove(4);
    let text = format!("first\nthe token is {token}\n");
    let mut out = Vec::new();
    assert!(scan_stream(text.as_bytes(), false, &mut out).unwrap());
    let line = String::from_utf8(out).unwrap();
    let fp = Fingerprint::of(token.as_bytes());
    assert_eq!(line, format!("github_token raw 19..59 {fp}\n"));

    let mut out = Vec::new();
    assert!(scan_stream(text.as_bytes(), true, &mut out).unwrap());
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["pattern"], "github_token");
    assert_eq!(v["encoding"], "raw");
    assert_eq!(v["start"], 19);
    assert_eq!(v["end"], 59);
    assert_eq!(v["fingerprint"], fp.to_string());
    assert!(!String::from_utf8(out).unwrap().contains(&token));

    let mut out = Vec::new();
    assert!(!scan_stream(&b"nothing to see here\n"[..], true, &mut out).unwrap());
    assert!(out.is_empty());
}

// ---- the clean corpus ----

const ENGLISH: &str = "The quick brown fox jumps over the lazy dog. Configuration files are \
read at startup; the worker prints its progress to standard output, one line per step, and \
exits with status zero when every test passed. Internationalization, counterrevolutionaries \
and electroencephalographically are long words, but not secrets. See https://example.com/docs/\
getting-started?lang=en&page=2#install for details, or email support@example.org. \
Performance improved by 35% (from 120ms to 78ms) after the change; 100% of tests pass.\n";

const PYTHON: &str = r#"
import base64, hashlib, os

class TokenBucket:
    """A token bucket rate limiter: capacity tokens, refilled at rate per second."""
    def __init__(self, capacity: int, rate: float) -> None:
        self.capacity = capacity
        self.tokens = float(capacity)
        self.secret_key_environment_variable_name = "APP_SECRET_KEY"

    def take(self, n: int = 1) -> bool:
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False

def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()

print(f"{os.getpid()=} {digest(__file__)[:12]} %d%% done" % 50)
"#;

fn minified_js(g: &mut Gen) -> String {
    let idents = [
        "e",
        "t",
        "n",
        "r",
        "o",
        "i",
        "getElementsByClassName",
        "addEventListener",
        "requestAnimationFrame",
        "__webpack_require__",
        "Object.defineProperty",
        "prototype",
        "hasOwnProperty",
        "encodeURIComponent",
        "XMLHttpRequest",
        "useLayoutEffectCallback",
    ];
    let punct = [
        "(", ")", "{", "}", ";", ",", "=", "==", "&&", "||", "!", "?", ":", ".", "+", "=>", "[",
        "]", "\"", "'",
    ];
    let mut s = String::from(
        "!function(e,t){\"object\"==typeof exports?module.exports=t():e.Lib=t()}(this,function(){",
    );
    while s.len() < 64 * 1024 {
        s.push_str(idents[(g.next() % idents.len() as u64) as usize]);
        s.push_str(punct[(g.next() % punct.len() as u64) as usize]);
        if g.next().is_multiple_of(13) {
            s.push_str(&(g.next() % 100_000).to_string());
        }
    }
    s.push_str("});");
    s
}

fn uuids(g: &mut Gen) -> String {
    (0..500)
        .map(|_| {
            let h = hex(&g.bytes(16), false);
            format!(
                "{}-{}-{}-{}-{}\n",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )
        })
        .collect()
}

fn git_log(g: &mut Gen) -> String {
    (0..500)
        .map(|i| {
            let sha = hex(&g.bytes(20), false);
            format!(
                "commit {sha}\nAuthor: Dev <dev@example.com>\n\n    Fix issue #{i}\n\n{} {sha}\n",
                &sha[..7]
            )
        })
        .collect()
}

fn png_data_uri(g: &mut Gen) -> String {
    let mut png = vec![0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];
    png.extend(g.bytes(256 * 1024));
    format!(
        "<img src=\"data:image/png;base64,{}\">",
        base64(&png, false, true)
    )
}

fn clean_corpus() -> Vec<(&'static str, String)> {
    let mut g = Gen(42);
    vec![
        ("english", ENGLISH.repeat(200)),
        (
            "rust source",
            [
                include_str!("../src/lib.rs"),
                include_str!("../src/guard/leak/mod.rs"),
                include_str!("../src/guard/leak/patterns.rs"),
                include_str!("../src/guard/leak/encodings.rs"),
                include_str!("../src/guard/leak/runs.rs"),
                include_str!("../src/guard/redact/mod.rs"),
                include_str!("../src/guard/redact/set.rs"),
                include_str!("leak.rs"),
            ]
            .concat(),
        ),
        ("python source", PYTHON.repeat(50)),
        ("minified js", minified_js(&mut g)),
        ("uuids", uuids(&mut g)),
        ("git shas", git_log(&mut g)),
        ("base64 png", png_data_uri(&mut g)),
        (
            "url-safe base64 png",
            base64(&g.bytes(64 * 1024), true, false),
        ),
        ("hex dump", hex(&g.bytes(64 * 1024), false)),
    ]
}

#[test]
fn the_clean_corpus_raises_no_finding() {
    for (name, text) in clean_corpus() {
        let found = scan(text.as_bytes());
        assert!(found.is_empty(), "{name}: {found:?}");
        let split = text.len() / 2;
        assert!(
            stream_scan(text.as_bytes(), split).is_empty(),
            "{name} streamed"
        );
    }
}

#[test]
fn a_secret_inside_the_clean_corpus_is_found() {
    let (name, token) = tokens().swap_remove(0);
    for (what, text) in clean_corpus() {
        let mid = text.len() / 2;
        let mid = (mid..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap();
        let text = format!("{} {token} {}", &text[..mid], &text[mid..]);
        assert_found(&scan(text.as_bytes()), name, Encoding::Raw, &token, what);
    }
}

/// Files that hold a credential on purpose (an example key, a JWT in a library's README):
/// they must raise exactly this pattern, so that leaving them out of the clean corpus
/// hides nothing.
const KNOWN_HOLDERS: &[(&str, &str)] = &[
    (
        "/usr/share/doc/libxmlsec1-dev/examples/rsakey.pem",
        "private_key",
    ),
    ("/usr/share/doc/python3-jwt/README.rst", "jwt"),
];

/// The files under `root`, sorted, smaller than 4 MiB, up to `budget` bytes in all.
fn files_under(root: &std::path::Path, budget: &mut usize, out: &mut Vec<std::path::PathBuf>) {
    let Ok(dir) = std::fs::read_dir(root) else {
        return;
    };
    let mut entries: Vec<_> = dir.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            files_under(&p, budget, out);
        } else if meta.is_file() && meta.len() < 4 << 20 && (meta.len() as usize) <= *budget {
            *budget -= meta.len() as usize;
            out.push(p);
        }
    }
}

/// Real text installed on this machine raises nothing: this repository's sources, the
/// crate sources in cargo's registry, /usr/share/doc, node's npm (its JavaScript, some of
/// it minified). Each tree that is present is read up to 24 MiB; a missing one is named on
/// stderr.
#[test]
fn installed_text_raises_no_finding() {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")));
    let mut roots = vec![
        std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src")),
        "/usr/share/doc".into(),
        "/usr/lib/node_modules/npm".into(),
    ];
    if let Some(h) = home {
        roots.push(h.join("registry/src"));
    }
    let mut scanned = 0;
    for root in roots {
        if !root.is_dir() {
            eprintln!("installed_text_raises_no_finding: no {}", root.display());
            continue;
        }
        let mut files = Vec::new();
        files_under(&root, &mut (24 << 20), &mut files);
        for path in files {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            scanned += bytes.len();
            let found = scan(&bytes);
            let holder = KNOWN_HOLDERS
                .iter()
                .find(|(p, _)| path == std::path::Path::new(p));
            match holder {
                Some((_, pattern)) => assert!(
                    !found.is_empty() && found.iter().all(|f| f.pattern == *pattern),
                    "{}: {found:?}",
                    path.display()
                ),
                None => assert!(found.is_empty(), "{}: {found:?}", path.display()),
            }
        }
    }
    assert!(scanned > 0, "the repository's own sources at least");
    eprintln!("installed_text_raises_no_finding: {scanned} bytes");
}

/// Every format is listed in the README, and `stockade scan --json` (`scan_stream`) names
/// each one when it finds it.
#[test]
fn every_format_is_named_in_the_readme_and_in_json() {
    let readme = include_str!("../README.md");
    let mut named = std::collections::BTreeSet::new();
    let mut g = leakgen::Gen(77);
    for k in 0..leakgen::FORMATS {
        let p = leakgen::plant(&mut g, k);
        let mut out = Vec::new();
        assert!(scan_stream(format!("> {}\n", p.text).as_bytes(), true, &mut out).unwrap());
        let out = String::from_utf8(out).unwrap();
        assert!(
            !out.contains(p.secret()),
            "the JSON holds the secret: {out}"
        );
        for line in out.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            named.insert(v["pattern"].as_str().unwrap().to_string());
        }
    }
    for name in PATTERN_NAMES {
        assert!(named.contains(*name), "no JSON line names {name}");
        assert!(
            readme.contains(&format!("`{name}`")),
            "README.md does not list {name}"
        );
    }
}
