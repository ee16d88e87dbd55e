//! `scan` on arbitrary bytes: the decoders (URL, base64, hex) and the matchers must not
//! panic, ranges must lie inside the input and come sorted, and scanning the input in two
//! chunks must not report anything outside the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::{StreamScanner, scan};

fuzz_target!(|data: &[u8]| {
    let found = scan(data);
    for w in found.windows(2) {
        assert!(w[0].range.start <= w[1].range.start);
    }
    for f in &found {
        assert!(
            f.range.start < f.range.end && f.range.end <= data.len(),
            "{f}"
        );
    }

    let split = data
        .first()
        .map_or(0, |&b| usize::from(b) * data.len() / 256);
    let mut s = StreamScanner::new();
    let mut streamed = s.push(&data[..split]);
    streamed.extend(s.flush());
    streamed.extend(s.push(&data[split..]));
    streamed.extend(s.finish());
    for f in &streamed {
        assert!(
            f.range.start < f.range.end && f.range.end <= data.len(),
            "{f}"
        );
    }
});
