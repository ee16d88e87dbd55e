//! The escape-aware scrubber: a secret printed with escape sequences and silent controls
//! between its characters (as a terminal draws it: the secret) is redacted wherever the
//! stream is split, and for any bytes the streaming redactor writes exactly what one-shot
//! redaction makes of the whole, without panicking and with bounded memory.
//!
//! Input layout: byte 0 seeds the write sizes; byte 1 the secret's length (8 to 39);
//! then the secret's bytes (mapped to letters and digits); then the text. The text is
//! redacted as it is, and a second text is made of its printable ASCII bytes, the secret
//! with separators chosen by the text's bytes, and more of the text.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use stockade::{RedactingWriter, Redactor};

/// Sequences and controls that draw nothing on the screen.
const SILENT: &[&[u8]] = &[
    b"",
    b"\x1b[m",
    b"\x1b[1;31m",
    b"\x1b[K",
    b"\x1b]0;t\x07",
    b"\x1b]8;;u\x1b\\",
    b"\x1bP$q m\x1b\\",
    b"\x1b_G\x1b\\",
    b"\x1b(B",
    b"\x00",
    b"\x07",
    b"\x0e",
    b"\x7f",
    b"\xc2\x9b0m",
    b"\x9b1m",
    b"\xc2\x9d2;t\xc2\x9c",
];

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn streamed(r: &Redactor, text: &[u8], seed: u8) -> Vec<u8> {
    let mut x = u32::from(seed) | 1;
    let mut w = RedactingWriter::without_scan(r.clone(), Vec::new());
    let mut rest = text;
    while !rest.is_empty() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let n = (x as usize % 24 + 1).min(rest.len());
        w.write_all(&rest[..n]).unwrap();
        rest = &rest[n..];
    }
    w.finish().unwrap().0
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fuzz_target!(|data: &[u8]| {
    let [seed, len, rest @ ..] = data else {
        return;
    };
    let len = usize::from(len % 32) + 8;
    if rest.len() < len {
        return;
    }
    let (secret, text) = rest.split_at(len);
    let secret: Vec<u8> = secret
        .iter()
        .map(|&b| ALNUM[usize::from(b) % ALNUM.len()])
        .collect();
    let r = Redactor::new([&secret]);

    // Any bytes: streaming equals one-shot.
    let whole = r.redact(text).into_owned();
    assert_eq!(streamed(&r, text, *seed), whole);

    // The secret with separators between its characters, in printable text.
    let plain: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| (0x20..0x7F).contains(b))
        .collect();
    let (before, after) = plain.split_at(plain.len() / 2);
    let mut hidden = before.to_vec();
    let mut seps = text.iter().cycle();
    for (i, &c) in secret.iter().enumerate() {
        if i > 0 {
            let k = seps.next().map_or(0, |&b| usize::from(b));
            hidden.extend_from_slice(SILENT[k % SILENT.len()]);
        }
        hidden.push(c);
    }
    hidden.extend_from_slice(after);
    let whole = r.redact(&hidden).into_owned();
    assert_eq!(streamed(&r, &hidden, *seed), whole);
    // What is left drawn (the separators taken out) holds no secret.
    let mut drawn = whole.clone();
    for sep in SILENT.iter().filter(|s| !s.is_empty()) {
        while let Some(p) = drawn.windows(sep.len()).position(|w| w == *sep) {
            drawn.drain(p..p + sep.len());
        }
    }
    assert!(!contains(&drawn, &secret), "{:?}", String::from_utf8_lossy(&whole));
});
