//! Byte classes: one table lookup tells which character sets a byte belongs to.
//!
//! The token shapes, the run finder and the decoders all ask the same questions (is this a
//! base64 character, a hex digit, part of a URL?), so the answers sit in one 256-entry table
//! with one bit per class.

pub(super) const DIGIT: u16 = 1;
pub(super) const UPPER: u16 = 1 << 1;
pub(super) const LOWER: u16 = 1 << 2;
pub(super) const DASH: u16 = 1 << 3;
pub(super) const UNDERSCORE: u16 = 1 << 4;
pub(super) const PLUS_SLASH: u16 = 1 << 5;
/// A hex digit, either case.
pub(super) const HEX: u16 = 1 << 6;
/// A lower-case hex digit.
pub(super) const HEX_LOWER: u16 = 1 << 7;
/// A byte that may stand in a percent-encoded URL run: unreserved characters, `%` and `+`.
pub(super) const URL: u16 = 1 << 8;
/// A byte that may stand in the body of a PEM block (base64, padding, whitespace, the `:`
/// and `,` of `Proc-Type` headers).
pub(super) const PEM_BODY: u16 = 1 << 9;
pub(super) const ALNUM: u16 = DIGIT | UPPER | LOWER;
pub(super) const B64URL: u16 = ALNUM | DASH | UNDERSCORE;
/// The bytes of a candidate run: both base64 alphabets (hex is a subset).
pub(super) const RUN: u16 = B64URL | PLUS_SLASH;

const fn classes() -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let mut v = 0;
        if c.is_ascii_digit() {
            v |= DIGIT | HEX | HEX_LOWER;
        }
        if c.is_ascii_uppercase() {
            v |= UPPER;
        }
        if c.is_ascii_lowercase() {
            v |= LOWER;
        }
        if matches!(c, b'a'..=b'f') {
            v |= HEX | HEX_LOWER;
        }
        if matches!(c, b'A'..=b'F') {
            v |= HEX;
        }
        match c {
            b'-' => v |= DASH,
            b'_' => v |= UNDERSCORE,
            b'+' | b'/' => v |= PLUS_SLASH,
            _ => {}
        }
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'%' | b'+') {
            v |= URL;
        }
        if c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'+' | b'/' | b'=' | b'\r' | b'\n' | b' ' | b'\t' | b':' | b',' | b'-'
            )
        {
            v |= PEM_BODY;
        }
        t[b] = v;
        b += 1;
    }
    t
}

/// The classes of each byte.
pub(super) static CLASS: [u16; 256] = classes();

/// Whether `b` is in any of the classes of `class`.
#[inline(always)]
pub(super) fn is(b: u8, class: u16) -> bool {
    CLASS[b as usize] & class != 0
}
