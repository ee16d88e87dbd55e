//! The text as a terminal draws it: what the redactor matches secrets against.
//!
//! A program can put escape sequences and controls that draw nothing between a secret's
//! characters (`s\e[mE\e[mC…`): the terminal draws the secret, a plain search sees noise.
//! So the needles are searched in the *view* of the text: its drawn bytes only, each with
//! its position in the raw text. A match in the view covers the raw bytes from its first
//! drawn byte to its last, escapes and controls in between included, and all of them are
//! replaced.
//!
//! What the view holds (see `guard::terminal`'s lexer for the parsing):
//! - text (printable bytes, UTF-8, bytes a terminal shows as U+FFFD) and the controls
//!   that move the cursor along the line or to the next (BS, HT, LF, VT, FF, CR), as
//!   themselves;
//! - the bodies of strings (OSC, DCS, SOS, PM, APC), whose text a terminal shows
//!   elsewhere (a window title) or takes as data, between two [`BREAK`]s: no match joins a
//!   string's text with the text around it, and no replacement cuts a string's
//!   terminator off;
//! - not: `ESC` and CSI sequences, the introducers and terminators of strings, the C0
//!   controls that draw nothing (NUL, BEL, SO, SI, …), DEL, and the C1 controls (UTF-8
//!   `C2 80..=C2 9F`, and single bytes `0x80..=0x9F` that continue no UTF-8 character,
//!   which a terminal in an 8-bit mode takes as controls).
//!
//! More than [`MAX_GAP`] such bytes between two drawn bytes count as a [`BREAK`]: the bytes
//! a streaming redactor must hold back while a secret may be under way stay bounded.
//! Text with none of these bytes is its own view; [`is_plain`] finds it at memory speed.

use crate::guard::terminal::lexer::{Ev, Lexer};

/// A break in the view: no needle holds it (no `ESC` is ever drawn), so no match spans it.
pub(super) const BREAK: u8 = 0x1B;

/// The most bytes that draw nothing between two drawn bytes of one match.
pub(super) const MAX_GAP: usize = 256;

/// Where a stream's scan stands between two pieces of it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scan {
    pub(super) lexer: Lexer,
    /// Raw bytes since the last byte of the text view.
    pub(super) gap: usize,
    /// Raw bytes since the last byte of the string view.
    pub(super) body_gap: usize,
}

impl Default for Scan {
    fn default() -> Scan {
        Scan {
            // No cap: the view follows the terminal, which holds a long sequence too.
            lexer: Lexer::new(usize::MAX),
            gap: 0,
            body_gap: 0,
        }
    }
}

/// One view: bytes, each with its index in the raw bytes.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) text: Vec<u8>,
    pub(super) at: Vec<usize>,
    /// The raw index after the last byte pushed, and the gap before the first.
    next: usize,
    gap_before: usize,
}

impl Seen {
    fn start(&mut self, gap: usize) {
        self.text.clear();
        self.at.clear();
        self.next = 0;
        self.gap_before = gap;
    }

    fn push(&mut self, b: u8, at: usize) {
        debug_assert!(at != usize::MAX, "a late C2 from before the piece");
        // Two breaks can stand at one byte (an `ESC ]` that cuts a string off and starts
        // the next).
        if self.gap_before + at.saturating_sub(self.next) > MAX_GAP {
            self.text.push(BREAK);
            self.at.push(at);
        }
        self.text.push(b);
        self.at.push(at);
        self.next = at + 1;
        self.gap_before = 0;
    }

    /// Pushes `run`, the raw bytes from `at` on, all drawn.
    fn push_run(&mut self, run: &[u8], at: usize) {
        if let Some((&first, rest)) = run.split_first() {
            self.push(first, at);
            self.text.extend_from_slice(rest);
            self.at.extend(at + 1..at + run.len());
            self.next = at + run.len();
        }
    }

    /// The gap at raw index `end`.
    fn gap_at(&self, end: usize) -> usize {
        self.gap_before + end.saturating_sub(self.next)
    }

    /// The gap at `cut` after a piece read from a gap of `gap`.
    fn gap_at_cut(&self, gap: usize, cut: usize) -> usize {
        match self.at.partition_point(|&a| a < cut).checked_sub(1) {
            Some(k) => cut - (self.at[k] + 1),
            None => gap + cut,
        }
    }
}

/// The views of some raw bytes: the text a terminal draws on its screen, and the bodies
/// of strings.
#[derive(Default)]
pub(super) struct View {
    /// The drawn text, with a [`BREAK`] where a gap was too long.
    pub(super) text: Seen,
    /// The strings' bodies, each between [`BREAK`]s.
    pub(super) body: Seen,
}

/// Whether a byte may draw nothing, or start something that draws nothing: the C0
/// controls but BS, HT, LF, VT, FF and CR; DEL; `0x80..=0x9F`; `C2`.
#[inline(always)]
fn special(b: u8) -> bool {
    (b < 0x20 && !(0x08..=0x0D).contains(&b)) || (0x7F..=0x9F).contains(&b) || b == 0xC2
}

/// Whether `raw` holds no [`special`] byte: read from text (not inside a sequence), it is
/// its own view.
///
/// Most text is printable ASCII and newlines: 64 bytes at a time are tested for that
/// alone, and only a block with some other byte is looked at byte by byte.
pub(super) fn is_plain(raw: &[u8]) -> bool {
    let mut blocks = raw.chunks_exact(64);
    for block in &mut blocks {
        if !ascii_text_64(block.try_into().expect("64 bytes")) && block.iter().any(|&b| special(b))
        {
            return false;
        }
    }
    !blocks.remainder().iter().any(|&b| special(b))
}

/// Whether all 64 bytes are printable ASCII or LF.
#[inline(always)]
fn ascii_text_64(block: &[u8; 64]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86_64 baseline, every x86_64 CPU has it.
        unsafe { ascii_text_64_sse2(block) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block
            .iter()
            .all(|&b| (0x20..0x7F).contains(&b) || b == b'\n')
    }
}

/// [`ascii_text_64`] with one range test and one equality test per vector, and one
/// `pmovmskb` per block.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn ascii_text_64_sse2(block: &[u8; 64]) -> bool {
    use std::arch::x86_64::{
        _mm_add_epi8, _mm_and_si128, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128,
        _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    // 0x20..=0x7E shifted to start at i8::MIN: one signed comparison tests it.
    let shift = _mm_set1_epi8(0x80u8.wrapping_sub(0x20) as i8);
    let below = _mm_set1_epi8(i8::MIN.wrapping_add(0x5F));
    let lf = _mm_set1_epi8(b'\n' as i8);
    let mut all = _mm_set1_epi8(-1);
    for c in block.chunks_exact(16) {
        // SAFETY: `c` is 16 readable bytes, and `loadu` needs no alignment.
        let v = unsafe { _mm_loadu_si128(c.as_ptr().cast()) };
        let text = _mm_cmplt_epi8(_mm_add_epi8(v, shift), below);
        all = _mm_and_si128(all, _mm_or_si128(text, _mm_cmpeq_epi8(v, lf)));
    }
    _mm_movemask_epi8(all) == 0xFFFF
}

/// What [`lex`] reports.
enum Piece {
    /// `raw[start..end]`: text with no [`special`] byte, all drawn.
    Run(usize, usize),
    /// An event of the lexer, at its raw index.
    Ev(Ev, usize),
}

/// Feeds `raw` to `lexer`, reporting runs of plain text in one piece: text between
/// escapes is most of any output, and needs no event per byte.
fn lex(lexer: &mut Lexer, raw: &[u8], mut f: impl FnMut(Piece)) {
    let mut i = 0;
    while i < raw.len() {
        if lexer.in_text() {
            let n = raw[i..]
                .iter()
                .position(|&b| special(b))
                .unwrap_or(raw.len() - i);
            if n > 0 {
                f(Piece::Run(i, i + n));
                // The run leaves the lexer in text; its last 4 bytes decide the UTF-8
                // state (a lead byte there, or none, which is fine).
                let from = (i + n).saturating_sub(4).max(i);
                if from > i {
                    *lexer = Lexer::new(usize::MAX);
                }
                lexer.feed(&raw[from..i + n], |_, _| {});
                i += n;
                continue;
            }
        }
        // Up to where the lexer is in text again.
        i += lexer.feed_until_text(&raw[i..], |ev, at| f(Piece::Ev(ev, at.wrapping_add(i))));
    }
}

/// The scan state after `raw`, a plain piece ([`is_plain`]) read from `scan`: in text, no
/// gap, and the UTF-8 state of its last bytes (which only its last 4 bytes decide).
pub(super) fn after_plain(scan: Scan, raw: &[u8]) -> Scan {
    if raw.is_empty() {
        return scan;
    }
    let from = raw.len().saturating_sub(4);
    let mut lexer = if from == 0 {
        scan.lexer
    } else {
        Scan::default().lexer
    };
    lexer.feed(&raw[from..], |_, _| {});
    Scan {
        lexer,
        gap: 0,
        body_gap: 0,
    }
}

/// Fills `view` with the views of `raw`, read from `scan`, which is left at the end of
/// `raw`. With `last`, a `C2` that waits at the end is taken as the stream's last byte;
/// otherwise it stays out of the views, and the returned count of decided bytes
/// excludes it.
pub(super) fn build(scan: &mut Scan, raw: &[u8], last: bool, view: &mut View) -> usize {
    view.text.start(scan.gap);
    view.body.start(scan.body_gap);
    let mut string = scan.lexer.in_string();
    let View { text, body } = view;
    lex(&mut scan.lexer, raw, |piece| match piece {
        Piece::Run(start, end) => text.push_run(&raw[start..end], start),
        Piece::Ev(ev, at) => match ev {
            Ev::Text(b) | Ev::Control(b @ 0x08..=0x0D) => text.push(b, at),
            Ev::Byte(b) if string => body.push(b, at),
            Ev::Begin(kind) if kind.is_string() => {
                string = true;
                body.push(BREAK, at);
            }
            Ev::End(_) if string => {
                string = false;
                body.push(BREAK, at);
            }
            _ => {}
        },
    });
    let mut decided = raw.len();
    if scan.lexer.c2_pending() {
        if last {
            // The stream ends: the `C2` is a byte of text or of a string's body.
            scan.lexer = Scan::default().lexer;
            if string {
                body.push(0xC2, raw.len() - 1);
            } else {
                text.push(0xC2, raw.len() - 1);
            }
        } else {
            decided -= 1;
        }
    }
    scan.gap = text.gap_at(decided);
    scan.body_gap = body.gap_at(decided);
    decided
}

/// The scan state at `cut` of a piece whose views are `view`, read from `scan`.
pub(super) fn at_cut(scan: Scan, raw: &[u8], view: &View, cut: usize) -> Scan {
    let mut lexer = scan.lexer;
    lex(&mut lexer, &raw[..cut], |_| {});
    // A `C2` just before the cut was decided by the byte after it: not a C1 control.
    lexer.resolve_c2();
    Scan {
        lexer,
        gap: view.text.gap_at_cut(scan.gap, cut),
        body_gap: view.body.gap_at_cut(scan.body_gap, cut),
    }
}

/// The view of a secret value, as it is matched: drawn as the value would be, read
/// from text (a value that is all a string's body is matched as one).
pub(super) fn of_value(v: &[u8]) -> Vec<u8> {
    let mut view = View::default();
    build(&mut Scan::default(), v, true, &mut view);
    if view.text.text.is_empty() {
        view.body.text.retain(|&b| b != BREAK);
        view.body.text
    } else {
        view.text.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(raw: &[u8]) -> Vec<u8> {
        views(raw).0
    }

    fn views(raw: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut v = View::default();
        build(&mut Scan::default(), raw, true, &mut v);
        (v.text.text, v.body.text)
    }

    #[test]
    fn plain_is_exactly_no_special_byte() {
        for b in 0..=255u8 {
            for pos in [0, 7, 15, 16, 20] {
                let mut raw = vec![b'a'; 21];
                raw[pos] = b;
                assert_eq!(is_plain(&raw), !special(b), "{b:#x} at {pos}");
            }
        }
        // Every non-special byte is drawn as itself, alone or after text.
        for b in (0..=255u8).filter(|&b| !special(b)) {
            assert_eq!(view(&[b'x', b]), [b'x', b], "{b:#x}");
        }
    }

    #[test]
    fn escapes_and_silent_controls_are_out_of_the_view() {
        assert_eq!(
            view(b"s\x1b[mE\x1b[1;31mC\x00R\x07E\x0e\x0fT\x7f\xc2\x9b0m!\x9b1m?\x1b(B."),
            b"sECRET!?."
        );
        assert_eq!(
            views(b"a\x1b]0;title\x07b\x1bP$q\x00m\x1b\\"),
            (b"ab".to_vec(), b"\x1b0;title\x1b\x1b$qm\x1b".to_vec())
        );
        assert_eq!(view(b"a\tb\r\nc\x08d"), b"a\tb\r\nc\x08d");
        assert_eq!(view("Привет\u{a9}".as_bytes()), "Привет\u{a9}".as_bytes());
    }

    /// Found by the fuzzer: `ESC ]` that cuts a string off and starts another puts two
    /// breaks at one byte.
    #[test]
    fn a_string_cut_off_by_the_next_string() {
        assert_eq!(
            views(b"a\x1b]5;x\x1b]5;y\x07b"),
            (b"ab".to_vec(), b"\x1b5;x\x1b\x1b5;y\x1b".to_vec())
        );
    }

    #[test]
    fn a_long_gap_is_a_break() {
        let mut raw = b"a".to_vec();
        raw.extend(std::iter::repeat_n(0u8, MAX_GAP));
        raw.push(b'b');
        assert_eq!(view(&raw), b"ab");
        raw.insert(1, 0);
        assert_eq!(view(&raw), b"a\x1bb");
    }
}
