//! The encoded forms of a known secret that a worker is likely to print.

use base64::Engine as _;
use base64::engine::GeneralPurpose;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_encode};

/// The bytes a URL must escape: all but the unreserved ones (RFC 3986 section 2.3).
const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// Every byte.
const EVERY: &AsciiSet = &NON_ALPHANUMERIC.union(NON_ALPHANUMERIC.complement());

/// Pushes `v` and the encoded forms of `v` a worker is likely to print: hex in either case,
/// base64 in both alphabets at the three alignments `v` can have in a longer base64 text,
/// and percent-encoding of the reserved bytes or of every byte, in either case.
pub(super) fn encodings(v: &[u8], out: &mut Vec<Vec<u8>>) {
    out.push(v.to_vec());
    out.push(hex::encode(v).into_bytes());
    out.push(hex::encode_upper(v).into_bytes());
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        out.extend(base64_inner(engine, v));
    }
    for set in [RESERVED, EVERY] {
        let upper = percent_encode(v, set).to_string().into_bytes();
        out.push(lower_escapes(&upper));
        out.push(upper);
    }
}

/// The base64 (in `engine`'s alphabet) of `v` with `a` = 0, 1, 2 bytes before it, cut to the characters that depend
/// on `v` alone (without the one or two at either end that depend on the neighbouring
/// bytes). Empty cuts are left out.
fn base64_inner(engine: &GeneralPurpose, v: &[u8]) -> impl Iterator<Item = Vec<u8>> {
    (0..3).filter_map(move |a| {
        let mut padded = vec![0u8; a];
        padded.extend_from_slice(v);
        let enc = engine.encode(&padded).into_bytes();
        // With `a` bytes before it, the value covers bits 8a..8a+8n of the character stream.
        let (lo, hi) = ((8 * a).div_ceil(6), (8 * a + 8 * v.len()) / 6);
        (hi > lo).then(|| enc[lo..hi].to_vec())
    })
}

/// `pct` with the hex digits of its escapes in lower case (`%2f` for `%2F`).
///
/// `percent_encoding` writes upper-case escapes only; a worker's own encoder may use either.
fn lower_escapes(pct: &[u8]) -> Vec<u8> {
    let mut out = pct.to_vec();
    let mut i = 0;
    while i < out.len() {
        if out[i] == b'%' {
            out[i + 1..i + 3].make_ascii_lowercase();
            i += 3;
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encodings as first written by hand, before the crates: the definition the
    /// crate-based forms must keep.
    fn by_hand(v: &[u8]) -> Vec<Vec<u8>> {
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let lower = b"0123456789abcdef";
        let upper = b"0123456789ABCDEF";
        let hex = |d: &[u8; 16], b: u8| [d[(b >> 4) as usize], d[(b & 15) as usize]];
        let mut out = vec![v.to_vec()];
        for d in [lower, upper] {
            out.push(v.iter().flat_map(|&b| hex(d, b)).collect());
        }
        for a in 0..3 {
            let mut bits = vec![0u8; 8 * a];
            for &b in v {
                bits.extend((0..8).rev().map(|k| (b >> k) & 1));
            }
            let chars: Vec<u8> = bits
                .chunks(6)
                .map(|c| {
                    let n = c.iter().fold(0, |n, &bit| n << 1 | bit) << (6 - c.len());
                    B64[n as usize]
                })
                .collect();
            let (lo, hi) = ((8 * a).div_ceil(6), (8 * a + 8 * v.len()) / 6);
            if hi > lo {
                let std = chars[lo..hi].to_vec();
                let url = std
                    .iter()
                    .map(|&c| match c {
                        b'+' => b'-',
                        b'/' => b'_',
                        c => c,
                    })
                    .collect();
                out.push(std);
                out.push(url);
            }
        }
        for d in [upper, lower] {
            let mut some = Vec::new();
            for &b in v {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    some.push(b);
                } else {
                    some.push(b'%');
                    some.extend(hex(d, b));
                }
            }
            out.push(some);
            out.push(
                v.iter()
                    .flat_map(|&b| [b'%'].into_iter().chain(hex(d, b)))
                    .collect(),
            );
        }
        out
    }

    #[test]
    fn encodings_equal_their_definition() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for len in 0..40 {
            for _ in 0..8 {
                let v: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Mostly printable ASCII, with `%`, `~` and non-ASCII bytes mixed in.
                        match x % 8 {
                            0 => (x >> 8) as u8,
                            _ => b' ' + ((x >> 8) % 95) as u8,
                        }
                    })
                    .collect();
                let mut got = Vec::new();
                encodings(&v, &mut got);
                let mut want = by_hand(&v);
                got.sort();
                want.sort();
                assert_eq!(got, want, "{v:?}");
            }
        }
    }
}
