//! The egress proxy's chunked body reader (`guard::egress::http::Chunked`): any bytes, fed
//! in one piece or split at points taken from the input, give the same answer; it never
//! takes more than it is given, takes nothing once done, and a body it accepts whole is
//! decoded by a second, naive reader (lines split at CRLF) to the same end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::guard::egress::http::{Chunked, MAX_CHUNK_LINE, MAX_HEADERS, MAX_TRAILERS};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let mut one = Chunked::new();
    let whole = one.feed(input);
    if let Ok(n) = whole {
        assert!(n <= input.len());
        assert!(one.done() || n == input.len());
        if one.done() {
            assert_eq!(one.clone().feed(b"0\r\n\r\n"), Ok(0));
        }
    }
    // The same bytes in pieces of 1 + cut % 16 bytes.
    let step = 1 + usize::from(cut % 16);
    let mut split = Chunked::new();
    let mut taken = 0;
    let mut failed = false;
    for piece in input.chunks(step) {
        match split.feed(piece) {
            Ok(n) => {
                assert!(n <= piece.len());
                taken += n;
                if n < piece.len() {
                    assert!(split.done());
                }
            }
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    match whole {
        Ok(n) => {
            assert!(!failed);
            assert_eq!((taken, split.done()), (n, one.done()));
            if one.done() {
                assert_eq!(naive(&input[..n]), Some(n));
            }
        }
        Err(_) => assert!(failed),
    }
});

/// A second reader: the size line up to its first CRLF, hex before any `;`, data, CRLF;
/// after the last chunk, lines up to an empty one. The length it read, if it ends.
fn naive(body: &[u8]) -> Option<usize> {
    let line = |at: usize| -> Option<usize> {
        body[at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|i| at + i)
    };
    let mut at = 0;
    loop {
        let end = line(at)?;
        assert!(end - at + 2 <= MAX_CHUNK_LINE);
        let text = &body[at..end];
        let hex = text.split(|&b| b == b';').next()?;
        let size = u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
        at = end + 2;
        if size == 0 {
            break;
        }
        at += usize::try_from(size).ok()?;
        assert_eq!(body.get(at..at + 2)?, b"\r\n");
        at += 2;
    }
    let start = at;
    let mut fields = 0;
    loop {
        let end = line(at)?;
        if end == at {
            assert!(end + 2 - start <= MAX_TRAILERS);
            assert!(fields <= MAX_HEADERS);
            return Some(end + 2);
        }
        assert!(body[at..end].contains(&b':'));
        fields += 1;
        at = end + 2;
    }
}
