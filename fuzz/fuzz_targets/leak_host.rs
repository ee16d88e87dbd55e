//! `scan_with` a fixed set of host patterns on arbitrary bytes: a host match in a decoded
//! window (URL, base64, hex) maps back to a range inside the input, findings come sorted,
//! a raw host finding's fingerprint is that of the bytes at its range, and a stream split
//! in two reports only ranges inside the stream. The patterns include short ones, a
//! byte-oriented one and a case-insensitive one, so that matches fall at every place in
//! a window, its ends included.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stockade::guard::leak::{Encoding, Fingerprint, HostPatterns, StreamScanner, scan_with};
use stockade::policy::HostPattern;

fn patterns() -> &'static HostPatterns {
    static P: OnceLock<HostPatterns> = OnceLock::new();
    P.get_or_init(|| {
        HostPatterns::new(&[
            HostPattern::new("acme_key", r"acme_[a-z0-9]{8}"),
            HostPattern::new("short", r"zq[0-9]"),
            HostPattern::new("bytes", r"(?-u:\x00[\x80-\xff]{2,})"),
            HostPattern::new("keyword", r"(?i)secret\s*[:=]\s*\S{4,}"),
        ])
        .expect("the fuzz patterns compile")
    })
}

fuzz_target!(|data: &[u8]| {
    let found = scan_with(data, patterns());
    for w in found.windows(2) {
        assert!(w[0].range.start <= w[1].range.start);
    }
    for f in &found {
        assert!(
            f.range.start < f.range.end && f.range.end <= data.len(),
            "{f}"
        );
        if f.pattern.is_host() && f.encoding == Encoding::Raw {
            assert_eq!(f.fingerprint, Fingerprint::of(&data[f.range.clone()]), "{f}");
        }
    }

    let split = data
        .first()
        .map_or(0, |&b| usize::from(b) * data.len() / 256);
    let mut s = StreamScanner::with_patterns(patterns().clone());
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
