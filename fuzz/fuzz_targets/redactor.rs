//! The streaming redactor writes exactly what one-shot redaction makes of the whole text,
//! wherever the writes split it; a redactor split into a shared set and a command's own set
//! (`with_secrets`) redacts exactly as one redactor of all the values.
//!
//! Input layout: byte 0 = number of secrets (mod 4) and, in bits 2..6, which of them go to
//! the own set; then per secret one length byte and the secret, then the text; the
//! remaining bytes' first byte picks the write size.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use stockade::{RedactingWriter, Redactor};

fuzz_target!(|data: &[u8]| {
    let Some((&count, mut rest)) = data.split_first() else {
        return;
    };
    let mut secrets = Vec::new();
    for _ in 0..count % 4 {
        let Some((&len, tail)) = rest.split_first() else {
            return;
        };
        let len = usize::from(len % 48).min(tail.len());
        secrets.push(&tail[..len]);
        rest = &tail[len..];
    }
    let r = Redactor::new(&secrets);
    let text = rest;
    let whole = r.redact(text).into_owned();

    let own = |i: &usize| count >> (2 + i) & 1 == 1;
    let (mine, shared): (Vec<_>, Vec<_>) = (0..secrets.len()).partition(own);
    let two = Redactor::new(shared.iter().map(|&i| secrets[i]))
        .with_secrets(mine.iter().map(|&i| secrets[i]));
    assert_eq!(two.redact(text), whole);

    let step = text.first().map_or(1, |&b| usize::from(b % 17) + 1);
    for r in [r, two] {
        let mut w = RedactingWriter::new(r, Vec::new());
        for chunk in text.chunks(step) {
            w.write_all(chunk).unwrap();
        }
        let (out, _) = w.finish().unwrap();
        assert_eq!(out, whole);
    }
});
