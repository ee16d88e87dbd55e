//! The relay's escape filter (`TerminalFilter`): for any bytes, split at any points, the
//! output equals the one-shot output, never panics, holds at most `MAX_SEQUENCE` bytes,
//! grows by at most one byte per input byte (a C1 introducer written as `ESC x`), and
//! passes nothing that a second filter would drop: what reaches the terminal parses to
//! kept sequences only.
//!
//! Input layout: byte 0 seeds the split points; the rest is the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::guard::terminal::{MAX_SEQUENCE, TerminalFilter};

fn filter_whole(input: &[u8]) -> (Vec<u8>, TerminalFilter) {
    let mut f = TerminalFilter::new();
    let mut out = Vec::new();
    f.push(input, &mut out);
    f.finish(&mut out);
    (out, f)
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, input)) = data.split_first() else {
        return;
    };
    let (whole, _) = filter_whole(input);
    assert!(whole.len() <= 2 * input.len());

    // Pieces of 1 to 16 bytes, sizes from a generator seeded by the first byte.
    let mut x = u32::from(seed) | 1;
    let mut f = TerminalFilter::new();
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let n = (x as usize % 16 + 1).min(rest.len());
        f.push(&rest[..n], &mut out);
        assert!(f.held() <= MAX_SEQUENCE);
        rest = &rest[n..];
    }
    f.finish(&mut out);
    assert_eq!(out, whole);

    let (again, second) = filter_whole(&whole);
    assert_eq!(second.dropped(), 0, "the output held a dropped sequence");
    assert_eq!(again, whole);
});
