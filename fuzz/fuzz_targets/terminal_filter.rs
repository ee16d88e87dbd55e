//! The relay's escape filter (`TerminalFilter`): for any bytes, split at any points, the
//! output equals the one-shot output, never panics, holds at most `MAX_SEQUENCE` bytes,
//! grows by at most one byte per input byte (a C1 introducer written as `ESC x`), and
//! passes nothing that a second filter would drop: what reaches the terminal parses to
//! kept sequences only. The restore after the stream (`TerminalFilter::restore`) is the
//! same wherever the stream was split, holds only kept sequences, and leaves nothing
//! more to restore.
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

fn restore(f: &mut TerminalFilter) -> Vec<u8> {
    let mut r = Vec::new();
    f.restore(&mut r);
    r
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, input)) = data.split_first() else {
        return;
    };
    let (whole, mut first) = filter_whole(input);
    assert!(whole.len() <= 2 * input.len());
    let restored = restore(&mut first);

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
    assert_eq!(restore(&mut f), restored);

    let (again, mut second) = filter_whole(&whole);
    assert_eq!(second.dropped(), 0, "the output held a dropped sequence");
    assert_eq!(again, whole);
    // The restore, pushed after the output, is kept whole and leaves nothing to restore.
    let mut out = Vec::new();
    second.push(&restored, &mut out);
    second.finish(&mut out);
    assert_eq!(second.dropped(), 0, "the restore held a dropped sequence");
    assert_eq!(out, restored);
    assert_eq!(restore(&mut second), b"");
});
