//! Host-defined leak patterns (`[sandbox.leak] patterns`, [`HostPatterns`]): a planted host
//! secret is found raw, percent-encoded, base64 (both alphabets, at every alignment of a
//! larger text) and hex, whole and split across a stream's chunks; the built-in scan does
//! not look for it; the redactor's scans do; clean text stays clean.
//!
//! Secrets are generated at run time, so no secret-shaped literal sits in the repository.

use std::io::Write;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use stockade::guard::leak::{
    Encoding, Finding, Fingerprint, HostPatterns, StreamScanner, scan, scan_stream_with, scan_with,
};
use stockade::guard::redact::{RedactingWriter, Redactor};
use stockade::policy::HostPattern;

/// `acme_` and 32 characters of `[a-z0-9]`, from a fixed seed.
fn acme_secret(seed: u64) -> String {
    let mut x = seed;
    let tail: String = (0..32)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b"abcdefghijklmnopqrstuvwxyz0123456789"[(x >> 33) as usize % 36] as char
        })
        .collect();
    format!("acme_{tail}")
}

fn patterns() -> HostPatterns {
    HostPatterns::new(&[
        HostPattern::new("acme_key", r"acme_[a-z0-9]{32}"),
        HostPattern::new("other_key", r"\bzz[0-9]{30}\b"),
    ])
    .unwrap()
}

/// The encoded forms of `secret` and the encoding a finding should name.
fn forms(secret: &str) -> Vec<(String, Encoding)> {
    let b = secret.as_bytes();
    let url: String = b.iter().map(|c| format!("%{c:02X}")).collect();
    // Only `_` escaped: a URL run with one escape.
    let partial = secret.replace('_', "%5F");
    vec![
        (secret.to_string(), Encoding::Raw),
        (url, Encoding::Url),
        (partial, Encoding::Url),
        (STANDARD.encode(b), Encoding::Base64),
        // `_` and `-` in the URL-safe form make it base64url, not base64.
        (
            URL_SAFE_NO_PAD.encode([b"\xfb\xff".as_slice(), b].concat()),
            Encoding::Base64Url,
        ),
        (hex::encode(b), Encoding::Hex),
        (hex::encode_upper(b), Encoding::Hex),
    ]
}

#[track_caller]
fn assert_one(found: &[Finding], encoding: Encoding, secret: &str, span: std::ops::Range<usize>) {
    let fp = Fingerprint::of(secret.as_bytes());
    let hits: Vec<&Finding> = found
        .iter()
        .filter(|f| f.pattern == "acme_key" && f.fingerprint == fp)
        .collect();
    assert_eq!(hits.len(), 1, "{encoding}: {found:?}");
    let f = hits[0];
    assert_eq!(f.encoding, encoding, "{found:?}");
    assert!(f.pattern.is_host());
    assert!(
        f.range.start >= span.start
            && f.range.end <= span.end
            && f.range.len() * 10 >= span.len() * 9,
        "{encoding}: {:?} not within {span:?}",
        f.range
    );
    assert!(!format!("{f} {f:?}").contains(secret));
}

#[test]
fn a_host_secret_is_found_in_every_encoding() {
    let p = patterns();
    let secret = acme_secret(1);
    for (form, encoding) in forms(&secret) {
        let text = format!("worker said: {form}\nok\n");
        let span = 13..13 + form.len();
        assert_one(
            &scan_with(text.as_bytes(), &p),
            encoding,
            &secret,
            span.clone(),
        );
        // The built-in scan does not know the host's pattern.
        assert!(
            scan(text.as_bytes())
                .iter()
                .all(|f| f.pattern != "acme_key"),
            "{encoding}"
        );
    }
}

#[test]
fn a_host_secret_inside_a_larger_base64_text_is_found_at_every_alignment() {
    let p = patterns();
    let secret = acme_secret(2);
    for pad in 0..3 {
        let plain = format!("{}config: {{\"key\": \"{secret}\"}}\n", "x".repeat(pad));
        for (encoded, encoding) in [
            (STANDARD.encode(&plain), Encoding::Base64),
            (URL_SAFE_NO_PAD.encode(&plain), Encoding::Base64),
        ] {
            let text = format!("blob {encoded} end");
            let found = scan_with(text.as_bytes(), &p);
            let fp = Fingerprint::of(secret.as_bytes());
            assert!(
                found.iter().any(|f| f.pattern == "acme_key"
                    && f.fingerprint == fp
                    && f.encoding == encoding),
                "pad {pad}: {found:?}"
            );
        }
    }
}

#[test]
fn a_host_secret_split_across_chunks_is_found_once() {
    let p = patterns();
    let secret = acme_secret(3);
    for (form, encoding) in forms(&secret) {
        let text = format!("{}{form} {}", "a ".repeat(40_000), "b ".repeat(40_000));
        let at = 80_000;
        for split in [at, at + 1, at + form.len() / 2, at + form.len() - 1] {
            let mut s = StreamScanner::with_patterns(p.clone());
            let mut found = s.push(&text.as_bytes()[..split]);
            found.extend(s.flush());
            found.extend(s.push(&text.as_bytes()[split..]));
            found.extend(s.finish());
            assert_one(&found, encoding, &secret, at..at + form.len());
        }
    }
}

#[test]
fn the_redactor_scans_with_its_patterns() {
    let secret = acme_secret(4);
    let text = format!("log: {secret}\n");
    let r = Redactor::new(["known-secret-value"]).with_patterns(patterns());
    let (out, found) = r.scrub(text.as_bytes());
    assert_eq!(out, text.as_bytes());
    assert_one(&found, Encoding::Raw, &secret, 5..5 + secret.len());
    let (_, found) = Redactor::new(["known-secret-value"]).scrub(text.as_bytes());
    assert!(found.is_empty(), "{found:?}");
    // A redactor with more secrets keeps the patterns.
    let r = r.with_secrets(["another-secret-value"]);
    let mut w = RedactingWriter::new(r, Vec::new());
    w.write_all(&text.as_bytes()[..12]).unwrap();
    w.write_all(&text.as_bytes()[12..]).unwrap();
    let (_, found) = w.finish().unwrap();
    assert_one(&found, Encoding::Raw, &secret, 5..5 + secret.len());
}

#[test]
fn scan_stream_with_names_the_host_pattern() {
    let secret = acme_secret(5);
    let text = format!("x {secret} y\n");
    let mut out = Vec::new();
    assert!(scan_stream_with(text.as_bytes(), &patterns(), true, &mut out).unwrap());
    let line = String::from_utf8(out).unwrap();
    let json: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(json["pattern"], "acme_key");
    assert_eq!(json["encoding"], "raw");
    assert_eq!(
        (json["start"].as_u64(), json["end"].as_u64()),
        (Some(2), Some(39))
    );
    assert!(!line.contains(&secret));
}

#[test]
fn clean_text_raises_nothing_with_host_patterns() {
    let p = patterns();
    // Near misses: too short, a capital letter, a longer word around a `\b` pattern.
    let text = format!(
        "acme_{} acme_{}Z{} xzz{}\n{}",
        "a1".repeat(15),
        "b2".repeat(8),
        "c3".repeat(8),
        "7".repeat(30),
        "the quick brown fox, 0123456789abcdef0123456789abcdef01234567 done\n".repeat(200)
    );
    let found = scan_with(text.as_bytes(), &p);
    assert!(found.is_empty(), "{found:?}");
}

/// The documented bound for short host secrets, exactly: a secret alone in its encoded
/// form is decoded (and found) when that form is as long as the shortest built-in token's
/// needs: 26 base64 characters (19 bytes), 40 hex digits (20 bytes), 20 bytes of
/// percent-encoded text; raw, it is found at any length. So every host secret of 20 bytes
/// or more is found in every encoding, and a shorter one, encoded on its own, only where
/// these hold (encoded with the text around it, `TOKEN=…` in an encoded env file, the run
/// is longer).
#[test]
fn a_short_host_secret_is_found_encoded_exactly_within_the_documented_bound() {
    let p = HostPatterns::new(&[HostPattern::new("short_key", r"k9_[a-z0-9]+")]).unwrap();
    for n in 4..=40 {
        let pool = format!("{}{}", &acme_secret(n as u64)[5..], &acme_secret(99)[5..]);
        let secret = format!("k9_{}", &pool[..n - 3]);
        let b = secret.as_bytes();
        let url: String = b.iter().map(|c| format!("%{c:02X}")).collect();
        let partial = secret.replace('_', "%5F");
        let b64 = STANDARD.encode(b);
        let unpadded = b64.trim_end_matches('=').len();
        let forms = [
            (secret.clone(), Encoding::Raw, true),
            (b64.clone(), Encoding::Base64, unpadded >= 26),
            (hex::encode(b), Encoding::Hex, 2 * n >= 40),
            (url.clone(), Encoding::Url, url.len() >= 20),
            (partial.clone(), Encoding::Url, partial.len() >= 20),
        ];
        for (form, encoding, expect) in forms {
            let text = format!("worker said: {form}\nok\n");
            let fp = Fingerprint::of(b);
            let found = scan_with(text.as_bytes(), &p)
                .iter()
                .any(|f| f.pattern == "short_key" && f.encoding == encoding && f.fingerprint == fp);
            assert_eq!(
                found,
                expect,
                "{n} bytes as {encoding} ({} bytes): {form}",
                form.len()
            );
        }
        // Encoded together with its variable's name, a short secret's run is long enough.
        if n >= 8 {
            let env = STANDARD.encode(format!("export ACME_SHORT_KEY={secret}\n"));
            let found = scan_with(format!("env: {env}\n").as_bytes(), &p);
            assert!(
                found
                    .iter()
                    .any(|f| f.pattern == "short_key" && f.encoding == Encoding::Base64),
                "{n} bytes in an encoded env line: {found:?}"
            );
        }
    }
}
