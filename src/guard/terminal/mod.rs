//! Escape sequences in output bound for a terminal: [`TerminalFilter`].
//!
//! A program's output drawn on a terminal can do more than draw. Some sequences make the
//! terminal write the system clipboard (OSC 52); others make it *answer*: it types a reply
//! into its own input, which is whatever reads the terminal next. While the program runs
//! that is the program itself, but after it has ended it is the caller's shell, and some
//! replies carry text the program chose (a window title it set, reported back by
//! `CSI 21 t`; a DECRQSS or XTGETTCAP reply echoing its request). A title such as
//! `` `rm -rf ~` `` followed by a newline, reported into the shell's input, runs.
//!
//! [`TerminalFilter`] passes what full-screen programs (vim, less, htop) need and drops the
//! rest. It keeps:
//!
//! - text, and the C0 controls (BS, HT, LF, CR, BEL, SO, SI, …) except ENQ, whose reply
//!   is the terminal's answerback message;
//! - CSI sequences that draw or set modes: cursor movement, erase, insert and delete,
//!   scrolling and scroll regions, SGR colours and attributes, DECSET/DECRST modes
//!   (alternate screen, bracketed paste, mouse reporting, cursor visibility; not those
//!   that change what the keys send in ways no restore could undo), the cursor
//!   style, soft reset, rectangle editing, the title stack (`CSI 22 t`, `CSI 23 t`),
//!   keyboard protocol switches (`CSI > … m`, `CSI > … u`, `CSI < u`, `CSI = … u`);
//! - two queries whose reply holds nothing the program chose: the cursor position
//!   (`CSI 6 n`, `CSI ? 6 n`: digits only, which programs use to find the cursor) and the
//!   status report (`CSI 5 n`), and the primary device attributes (`CSI c`, `CSI 0 c`, a
//!   fixed reply programs use as the end of their queries);
//! - OSC 0, 1 and 2 (set the title; reporting it is dropped) and OSC 8 (hyperlinks);
//! - `ESC` sequences that save or restore the cursor, index, select keypad modes or
//!   character sets, reset the terminal (`ESC c`), or test the screen alignment.
//!
//! It drops every other sequence, among them: OSC 52 (clipboard), every other OSC (colour
//! queries and changes OSC 4/10/11/12…, fonts OSC 50, notifications, file transfers
//! OSC 1337/5113, …); every DCS (DECRQSS `DCS $ q`, XTGETTCAP `DCS + q`, DECUDK, sixel
//! images, …), SOS, PM and APC (kitty's graphics, which can read files); DA2 and DA3
//! (`CSI > c`, `CSI = c`), XTVERSION (`CSI > q`), DECRQM (`CSI ? … $ p`), window
//! operations and reports (`CSI … t` other than 22 and 23), the other device status
//! reports, DECREQTPARM, DECRQCRA checksums of the screen, locator reports, `CSI ? u`,
//! `CSI ? … S`, and `ESC Z` (DECID) and its C1 form. ST on its own, ENQ and DECID are
//! dropped as well.
//!
//! The filter reads the C1 controls in their UTF-8 form (`C2 9B` is CSI) and, for a
//! terminal in an 8-bit mode, as single bytes that do not continue a UTF-8 character
//! (`0x9B`). A kept sequence is written in its 7-bit form (`ESC [`, `ESC ]`), so that any
//! terminal reads it as the filter did; a kept string ends with the terminator it had
//! (BEL or `ESC \`); a string cut off by another sequence, CAN or SUB is dropped.
//!
//! What the kept sequences leave changed in the terminal's modes is tracked, and
//! [`TerminalFilter::restore`] writes what turns it back, for the end of a program's
//! output: the caller's shell then gets its keys, its screen and its text as before.
//!
//! The filter holds an unfinished sequence until it ends, and at most
//! [`MAX_SEQUENCE`] bytes of it: a longer one is dropped and what follows is text again,
//! so an unterminated sequence cannot swallow the rest of the output.

pub(crate) mod lexer;

use lexer::{End, Ev, Kind, Lexer};

/// The longest sequence the filter holds, introducer aside (a hyperlink's URI fits).
pub const MAX_SEQUENCE: usize = 4096;

/// Streaming filter of the escape sequences that write the clipboard or make the
/// terminal answer (see the [module](self) for the lists).
///
/// Output is the same wherever the input is split; a sequence split across two calls is
/// held (at most [`MAX_SEQUENCE`] bytes) until it ends.
///
/// ```
/// use stockade::guard::terminal::TerminalFilter;
///
/// let mut f = TerminalFilter::new();
/// let mut out = Vec::new();
/// f.push(b"\x1b[1;31mred\x1b[m \x1b]52;c;ZWNobyBoaQ==\x07", &mut out);
/// f.push(b"\x1bP$q m\x1b\\done\n", &mut out);
/// f.finish(&mut out);
/// assert_eq!(out, b"\x1b[1;31mred\x1b[m done\n");
/// ```
#[derive(Clone, Debug)]
pub struct TerminalFilter {
    lexer: Lexer,
    /// The open sequence's kind and bytes (after its introducer).
    kind: Kind,
    seq: Vec<u8>,
    dropped: u64,
    /// What the kept sequences left changed.
    modes: Modes,
}

impl Default for TerminalFilter {
    fn default() -> Self {
        TerminalFilter::new()
    }
}

impl TerminalFilter {
    /// A filter at the start of a stream.
    pub fn new() -> TerminalFilter {
        TerminalFilter {
            lexer: Lexer::new(MAX_SEQUENCE),
            kind: Kind::Esc,
            seq: Vec::new(),
            dropped: 0,
            modes: Modes::default(),
        }
    }

    /// Appends to `out` what may reach the terminal of `input`, the next bytes of the
    /// stream.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let TerminalFilter {
            lexer,
            kind,
            seq,
            dropped,
            modes,
        } = self;
        let mut rest = input;
        while !rest.is_empty() {
            // Plain text, the bulk of any output, is copied in runs.
            if lexer.in_text() {
                let n = rest
                    .iter()
                    .position(|&b| !is_plain(b))
                    .unwrap_or(rest.len());
                out.extend_from_slice(&rest[..n]);
                if n > 0 {
                    lexer.set_cont(0);
                }
                rest = &rest[n..];
                if rest.is_empty() {
                    break;
                }
            }
            // Up to the next byte that may start plain text again.
            let n = rest
                .iter()
                .skip(1)
                .position(|&b| is_plain(b))
                .map_or(rest.len(), |k| k + 1);
            lexer.feed(&rest[..n], |ev, _| {
                on_event(ev, kind, seq, dropped, modes, out)
            });
            rest = &rest[n..];
        }
    }

    /// The end of the stream: an unfinished sequence is dropped.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let TerminalFilter {
            lexer,
            kind,
            seq,
            dropped,
            modes,
        } = self;
        lexer.finish(|ev, _| on_event(ev, kind, seq, dropped, modes, out));
        seq.clear();
    }

    /// Appends to `out` the sequences that turn back what the stream's kept sequences left
    /// changed in the terminal's modes, to what a shell's prompt expects: the alternate
    /// screen left, mouse, focus and bracketed-paste reports off, cursor and keypad keys
    /// in normal mode, `modifyOtherKeys` and the other key-modifier resources at their
    /// initial values, the cursor shown, autowrap on, insert and newline modes off,
    /// reverse video and origin mode off, the scroll region the whole screen (the cursor
    /// kept where it is), the attributes and the character set at their defaults. Only
    /// what the stream changed is written, so a stream that changed nothing adds nothing.
    ///
    /// For the end of a program's output, after [`finish`](Self::finish): a program, once
    /// ended, cannot leave the caller's keys sending other bytes, its mouse typing reports
    /// into the caller's shell or the text that follows hidden. The filter's own state is
    /// updated as if `out` had been pushed through it.
    ///
    /// ```
    /// use stockade::guard::terminal::TerminalFilter;
    ///
    /// let mut f = TerminalFilter::new();
    /// let mut out = Vec::new();
    /// f.push(b"\x1b[?1000;1006h\x1b[?25l\x1b[8mhidden", &mut out);
    /// f.finish(&mut out);
    /// out.clear();
    /// f.restore(&mut out);
    /// assert_eq!(out, b"\x1b[?1000;1006l\x1b[?25h\x1b[m");
    /// out.clear();
    /// f.restore(&mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn restore(&mut self, out: &mut Vec<u8>) {
        self.modes.restore(out);
        self.modes = Modes::default();
    }

    /// How many bytes of an unfinished sequence the filter holds (at most
    /// [`MAX_SEQUENCE`]).
    pub fn held(&self) -> usize {
        self.seq.len()
    }

    /// How many sequences and controls were dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Printable ASCII, LF, CR, HT: text whatever the state (in text, with no `C2` waiting).
fn is_plain(b: u8) -> bool {
    (0x20..0x7F).contains(&b) || b == b'\n' || b == b'\r' || b == b'\t'
}

fn on_event(
    ev: Ev,
    kind: &mut Kind,
    seq: &mut Vec<u8>,
    dropped: &mut u64,
    modes: &mut Modes,
    out: &mut Vec<u8>,
) {
    match ev {
        Ev::Text(b) => out.push(b),
        // ENQ: the terminal answers with its answerback message.
        Ev::Control(0x05) => *dropped += 1,
        Ev::Control(b) => {
            modes.control(b);
            out.push(b);
        }
        // DECID (the terminal answers as to DA) and a lone ST.
        Ev::C1 {
            code: 0x9A | 0x9C, ..
        } => *dropped += 1,
        Ev::C1 { code, wide } => {
            if wide {
                out.push(0xC2);
            }
            out.push(code);
        }
        Ev::Begin(k) => {
            *kind = k;
            seq.clear();
        }
        Ev::Byte(b) => seq.push(b),
        Ev::End(how) => {
            let kept = match (*kind, how) {
                (Kind::Esc, End::Final) => keep_esc(seq),
                (Kind::Csi, End::Final) => keep_csi(seq),
                (Kind::Osc, End::Bel | End::St) => keep_osc(seq),
                _ => false,
            };
            if !kept {
                *dropped += 1;
            } else {
                match *kind {
                    Kind::Esc => modes.esc(seq),
                    Kind::Csi => modes.csi(seq),
                    _ => {}
                }
                out.push(0x1B);
                match *kind {
                    Kind::Csi => out.push(b'['),
                    Kind::Osc => out.push(b']'),
                    _ => {}
                }
                out.extend_from_slice(seq);
                match how {
                    End::Bel => out.push(0x07),
                    End::St => out.extend_from_slice(b"\x1b\\"),
                    _ => {}
                }
            }
            seq.clear();
        }
    }
}

/// `ESC` sequences (intermediates and final byte) that are kept.
fn keep_esc(seq: &[u8]) -> bool {
    match seq {
        // DECSC, DECRC, keypad modes, IND, NEL, HTS, RI, SS2, SS3, RIS, locking shifts.
        [b'7' | b'8' | b'=' | b'>' | b'D' | b'E' | b'H' | b'M' | b'N' | b'O' | b'c'] => true,
        [b'n' | b'o' | b'|' | b'}' | b'~'] => true,
        // Character set designation: G0..G3, 94 or 96 characters.
        [b'(' | b')' | b'*' | b'+' | b'-' | b'.' | b'/', .., _] => true,
        // Double height and width lines, DECALN.
        [b'#', b'3' | b'4' | b'5' | b'6' | b'8'] => true,
        _ => false,
    }
}

/// A CSI sequence's parts: its private marker (`<`, `=`, `>`, `?`), parameters,
/// intermediates and final byte.
type CsiParts<'a> = (Option<u8>, &'a [u8], &'a [u8], u8);

/// The [`CsiParts`] of `seq`; `None` for a sequence the terminal ignores (a private
/// marker after the first byte, a parameter after an intermediate).
fn csi_parts(seq: &[u8]) -> Option<CsiParts<'_>> {
    let (&last, body) = seq.split_last()?;
    let (prefix, body) = match body.first() {
        Some(&p @ 0x3C..=0x3F) => (Some(p), &body[1..]),
        _ => (None, body),
    };
    let split = body.iter().position(|&b| b < 0x30).unwrap_or(body.len());
    let (params, inter) = body.split_at(split);
    if params.iter().any(|&b| b > 0x3B) || inter.iter().any(|&b| b >= 0x30) {
        return None;
    }
    Some((prefix, params, inter, last))
}

/// DEC private modes that change the bytes the caller's keys send, whose value before
/// the program nothing here knows, so that no restore could put them back: VT52 mode
/// (DECANM, 2), what backspace sends (DECBKM, 67), eight-bit input (1034), the keypad
/// with Num Lock (1035), what Meta, Alt and Delete send (1036, 1037, 1039), the
/// function-key layouts (1050..=1061), Windows Terminal's win32-input-mode (9001, every
/// key re-encoded), and the reports a terminal types into its input on its own: colour
/// scheme changes (2031) and resizes (2048).
fn key_encoding_mode(mode: &[u8]) -> bool {
    let Some(n) = std::str::from_utf8(mode)
        .ok()
        .and_then(|m| m.parse::<u32>().ok())
    else {
        return false;
    };
    matches!(n, 2 | 67 | 1034..=1037 | 1039 | 1050..=1061 | 2031 | 2048 | 9001)
}

/// CSI sequences (parameters, intermediates, final byte) that are kept.
fn keep_csi(seq: &[u8]) -> bool {
    let Some((prefix, params, inter, last)) = csi_parts(seq) else {
        return false;
    };
    let first = |p: &[u8]| p.split(|&b| b == b';').next().unwrap_or(&[]).to_vec();
    match (prefix, inter, last) {
        (None, [], b'n') => params == b"5" || params == b"6",
        (None, [], b'c') => params.is_empty() || params == b"0",
        (None, [], b't') => matches!(&first(params)[..], b"22" | b"23"),
        // ANSI modes (SM, RM): insert (4) and newline (20) only. The others outlive the
        // program in the caller's terminal with no reset of ours: SRM (12) turns local
        // echo on, so a password typed later shows; KAM (2) locks the keyboard.
        (None, [], b'h' | b'l') => params
            .split(|&b| b == b';')
            .all(|p| matches!(p, b"4" | b"20")),
        (None, [], f) => b"@ABCDEFGHIJKLMPSTXZ`abdefgjkmrsu".contains(&f),
        (Some(b'?'), [], b'n') => params == b"6",
        // DEC private modes, but those that change what keys send in ways no restore
        // can undo ([`key_encoding_mode`]).
        (Some(b'?'), [], b'h' | b'l') => !params.split(|&b| b == b';').any(key_encoding_mode),
        // Not XTSAVE and XTRESTORE (`CSI ? … s`, `CSI ? … r`): a restore of modes the
        // filter does not follow (review: mouse reports and the dropped key-encoding modes
        // came back after the filter's restore).
        (Some(b'?'), [], f) => b"JK".contains(&f),
        // Not `t` or `T` (XTSMTITLE, XTRMTITLE): they switch titles to hex, which would
        // carry the control characters the title filter removes.
        // Not `u` with `>` or `=` (the kitty keyboard protocol's push and set): the
        // caller's shell would get every key as a `CSI … u` sequence after the run. Its
        // pop (`<`) is harmless.
        (Some(b'>'), [], f) => b"mnps".contains(&f),
        (Some(b'<'), [], b'u') => true,
        (None, [b' '], f) => b"q@A".contains(&f),
        (None, [b'!'], b'p') => true,
        (None, [b'"'], b'q') => true,
        (None, [b'$'], f) => b"rtvxz{|".contains(&f),
        (None, [b'*'], b'x') => true,
        (None, [b'\''], f) => b"}~".contains(&f),
        _ => false,
    }
}

/// OSC strings (the body, without introducer and terminator) that are kept: titles and
/// hyperlinks.
fn keep_osc(seq: &[u8]) -> bool {
    let number = seq.split(|&b| b == b';').next().unwrap_or(&[]);
    matches!(number, b"0" | b"1" | b"2" | b"8")
}

/// DEC private modes that are off until a program sets them, in the order a restore
/// turns them off (the alternate screens first, so that the rest applies to the normal
/// screen): the alternate screens (1049, 1047, 47), cursor-key mode (DECCKM, 1), reverse
/// video (5), origin mode (6), X10 mouse (9), the numeric-keypad mode (DECNKM, 66), the
/// mouse reports and their encodings (1000..=1003, 1005, 1006, 1015, 1016), focus
/// reports (1004), alternate scroll (1007) and bracketed paste (2004). (Not the
/// blinking cursor, 12: its initial value is the user's choice.)
const OFF_MODES: [u16; 19] = [
    1049, 1047, 47, 1, 5, 6, 9, 66, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1015, 1016,
    2004,
];

/// DEC private modes that are on until a program resets them: autowrap (7), the cursor
/// shown (25).
const ON_MODES: [u16; 2] = [7, 25];

/// What the kept sequences of a stream left changed in the terminal's modes, for
/// [`TerminalFilter::restore`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Modes {
    /// Bit `i`: `OFF_MODES[i]` is on.
    on: u32,
    /// Bit `i`: `ON_MODES[i]` is off.
    off: u8,
    /// Insert mode (IRM, 4) on.
    insert: bool,
    /// Newline mode (LNM, 20) on.
    newline: bool,
    /// The application keypad (DECKPAM, `ESC =`).
    keypad: bool,
    /// Bit `n`: key-modifier resource `n` (XTMODKEYS, `CSI > n ; v m`, or disabled by
    /// `CSI > n n`; `modifyOtherKeys` is 4) changed.
    modkeys: u8,
    /// A scroll region (DECSTBM with parameters).
    margins: bool,
    /// Character attributes (SGR) other than the defaults.
    sgr: bool,
    /// G0 designated other than ASCII.
    g0: bool,
    /// GL shifted away from G0 (SO, LS2, LS3).
    shifted: bool,
}

impl Modes {
    /// A kept C0 control.
    fn control(&mut self, b: u8) {
        match b {
            0x0E => self.shifted = true,
            0x0F => self.shifted = false,
            _ => {}
        }
    }

    /// A kept `ESC` sequence (intermediates and final byte).
    fn esc(&mut self, seq: &[u8]) {
        match seq {
            b"=" => self.keypad = true,
            b">" => self.keypad = false,
            b"n" | b"o" => self.shifted = true,
            // RIS: the terminal's initial state, in which every mode is at its default.
            b"c" => *self = Modes::default(),
            [b'(', .., f] => self.g0 = *f != b'B',
            _ => {}
        }
    }

    /// A kept CSI sequence (after its introducer).
    fn csi(&mut self, seq: &[u8]) {
        let Some((prefix, params, inter, last)) = csi_parts(seq) else {
            return;
        };
        let list = || params.split(|&b| b == b';');
        let number = |p: &[u8]| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|p| p.parse::<u32>().ok())
        };
        match (prefix, inter, last) {
            (Some(b'?'), [], b'h' | b'l') => {
                let set = last == b'h';
                for mode in list().filter_map(number) {
                    if let Some(i) = OFF_MODES.iter().position(|&m| u32::from(m) == mode) {
                        let bit = 1u32 << i;
                        self.on = if set { self.on | bit } else { self.on & !bit };
                    }
                    if let Some(i) = ON_MODES.iter().position(|&m| u32::from(m) == mode) {
                        let bit = 1u8 << i;
                        self.off = if set { self.off & !bit } else { self.off | bit };
                    }
                }
            }
            (None, [], b'h' | b'l') => {
                for mode in list() {
                    match mode {
                        b"4" => self.insert = last == b'h',
                        b"20" => self.newline = last == b'h',
                        _ => {}
                    }
                }
            }
            (None, [], b'm') => {
                // Only a sequence of nothing but resets leaves the defaults.
                self.sgr = !list().all(|p| p.is_empty() || p == b"0");
            }
            (None, [], b'r') => self.margins = !params.is_empty(),
            (Some(b'>'), [], b'm' | b'n') => {
                let mut it = list();
                let resource = it.next().filter(|p| !p.is_empty()).and_then(number);
                match (resource, it.next(), last) {
                    // No resource: every one back to its initial value.
                    (None, _, b'm') => self.modkeys = 0,
                    (Some(n @ 0..=7), None, b'm') => self.modkeys &= !(1 << n),
                    (Some(n @ 0..=7), _, _) => self.modkeys |= 1 << n,
                    _ => {}
                }
            }
            // DECSTR (soft reset): what it resets is not the same on every terminal
            // (autowrap, for one), so a restore writes autowrap and the cursor again.
            (None, [b'!'], b'p') => {
                self.off = (1 << ON_MODES.len()) - 1;
                self.insert = false;
                self.keypad = false;
                self.margins = false;
                self.sgr = false;
                self.g0 = false;
                self.shifted = false;
            }
            _ => {}
        }
    }

    /// Appends the sequences that put back what is changed (see
    /// [`TerminalFilter::restore`]).
    fn restore(&self, out: &mut Vec<u8>) {
        let modes = |out: &mut Vec<u8>, list: &mut dyn Iterator<Item = u16>, end: u8| {
            let mut first = true;
            for m in list {
                out.extend_from_slice(if first { b"\x1b[?" } else { b";" });
                out.extend_from_slice(m.to_string().as_bytes());
                first = false;
            }
            if !first {
                out.push(end);
            }
        };
        let on = |i: usize| self.on & (1 << i) != 0;
        // Each alternate screen left on its own sequence (1049 restores the cursor it
        // saved), before the rest.
        for (i, &m) in OFF_MODES.iter().enumerate().take(3) {
            if on(i) {
                modes(out, &mut std::iter::once(m), b'l');
            }
        }
        let mut rest = OFF_MODES
            .iter()
            .enumerate()
            .skip(3)
            .filter(|&(i, _)| on(i))
            .map(|(_, &m)| m);
        modes(out, &mut rest, b'l');
        let mut shown = ON_MODES
            .iter()
            .enumerate()
            .filter(|&(i, _)| self.off & (1 << i) != 0)
            .map(|(_, &m)| m);
        modes(out, &mut shown, b'h');
        match (self.insert, self.newline) {
            (true, true) => out.extend_from_slice(b"\x1b[4;20l"),
            (true, false) => out.extend_from_slice(b"\x1b[4l"),
            (false, true) => out.extend_from_slice(b"\x1b[20l"),
            (false, false) => {}
        }
        if self.keypad {
            out.extend_from_slice(b"\x1b>");
        }
        for n in 0..8u8 {
            if self.modkeys & (1 << n) != 0 {
                out.extend_from_slice(format!("\x1b[>{n}m").as_bytes());
            }
        }
        if self.margins {
            // DECSTBM moves the cursor home: saved and restored around it.
            out.extend_from_slice(b"\x1b7\x1b[r\x1b8");
        }
        if self.sgr {
            out.extend_from_slice(b"\x1b[m");
        }
        if self.g0 {
            out.extend_from_slice(b"\x1b(B");
        }
        if self.shifted {
            out.push(0x0F);
        }
    }
}

/// `text` (a name or a line the program chose) made safe to print on one line: each
/// control character (C0, DEL, C1), line or paragraph separator, bidirectional mark or
/// override (which reorder how a line reads) and character that draws nothing (a
/// zero-width space or joiner, a soft hyphen, a variation selector, a tag: Unicode's
/// default-ignorable code points, with which two different names look the same) written
/// as Rust writes it in a string literal (`\n`, `\u{200b}`), so that it can neither end
/// the line and forge the next, nor send an escape sequence to the reader's terminal, nor
/// hide in plain sight.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || c == '\u{2028}' || c == '\u{2029}' || invisible(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The characters a terminal draws as nothing, or which reorder the line: Unicode's
/// default-ignorable code points (DerivedCoreProperties), which hold the bidirectional
/// marks, overrides and isolates.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{34f}'
            | '\u{61c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// `path` (a name the program chose) made safe and unambiguous to print on one line: a
/// byte that is not UTF-8 written `\xNN`, a backslash `\\`, the rest as
/// [`escape_controls`] writes it. Two different paths never print the same (written
/// lossily, `n\xff` and `n\xfe` were both `n\u{fffd}`).
pub fn escape_path(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        for piece in chunk.valid().split_inclusive('\\') {
            match piece.strip_suffix('\\') {
                Some(before) => {
                    out.push_str(&escape_controls(before));
                    out.push_str("\\\\");
                }
                None => out.push_str(&escape_controls(piece)),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(input: &[u8]) -> Vec<u8> {
        let mut f = TerminalFilter::new();
        let mut out = Vec::new();
        f.push(input, &mut out);
        f.finish(&mut out);
        out
    }

    /// Every split point (two pushes) and byte-by-byte pushes give the one-shot output.
    fn same_at_every_split(input: &[u8]) -> Vec<u8> {
        let whole = filter(input);
        for k in 0..=input.len() {
            let mut f = TerminalFilter::new();
            let mut out = Vec::new();
            f.push(&input[..k], &mut out);
            f.push(&input[k..], &mut out);
            f.finish(&mut out);
            assert_eq!(out, whole, "split at {k} of {input:?}");
        }
        let mut f = TerminalFilter::new();
        let mut out = Vec::new();
        for b in input {
            f.push(std::slice::from_ref(b), &mut out);
        }
        f.finish(&mut out);
        assert_eq!(out, whole, "byte by byte: {input:?}");
        whole
    }

    const KEPT: &[&[u8]] = &[
        b"\x1b[m",
        b"\x1b[1;31m",
        b"\x1b[38;2;10;20;30m",
        b"\x1b[38:5:208m",
        b"\x1b[H",
        b"\x1b[12;40H",
        b"\x1b[2J",
        b"\x1b[K",
        b"\x1b[3A",
        b"\x1b[5;20r",
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\x1b[?2004h",
        b"\x1b[?25l",
        b"\x1b[?1000;1006h",
        b"\x1b[2 q",
        b"\x1b[!p",
        b"\x1b[22;0t",
        b"\x1b[23;0t",
        b"\x1b[>4;2m",
        b"\x1b[<u",
        b"\x1b[4h",
        b"\x1b[4l",
        b"\x1b[20h",
        b"\x1b[4;20l",
        b"\x1b[6n",
        b"\x1b[?6n",
        b"\x1b[5n",
        b"\x1b[c",
        b"\x1b[0c",
        b"\x1b[4@",
        b"\x1b[S",
        b"\x1b]0;title\x07",
        b"\x1b]2;my title\x1b\\",
        b"\x1b]1;icon\x07",
        b"\x1b]8;;https://example.org/\x1b\\",
        b"\x1b]8;;\x1b\\",
        b"\x1b7",
        b"\x1b8",
        b"\x1b=",
        b"\x1b>",
        b"\x1bM",
        b"\x1b(B",
        b"\x1b(0",
        b"\x1bc",
        b"\x1b#8",
        b"\x07",
        b"\x08",
        b"\x0e\x0f",
    ];

    const DROPPED: &[&[u8]] = &[
        b"\x1b[12l",
        b"\x1b[12h",
        b"\x1b[2h",
        b"\x1b[4;12l",
        b"\x1b[h",
        b"\x1b[>1u",
        b"\x1b[>31u",
        b"\x1b[=31;1u",
        b"\x1b]52;c;ZWNobyBoaQ==\x07",
        b"\x1b]52;c;?\x1b\\",
        b"\x1b]10;?\x07",
        b"\x1b]11;?\x1b\\",
        b"\x1b]4;1;?\x07",
        b"\x1b]4;1;#ff0000\x07",
        b"\x1b]50;?\x07",
        b"\x1b]1337;File=name=eA==:eA==\x07",
        b"\x1b]9;notify\x07",
        b"\x1bP$q m\x1b\\",
        b"\x1bP$qr\x1b\\",
        b"\x1bP+q544e\x1b\\",
        b"\x1bP0|17/7e\x1b\\",
        b"\x1bPq#0;2;0;0;0#0~~\x1b\\",
        b"\x1bXsos\x1b\\",
        b"\x1b^pm\x1b\\",
        b"\x1b_Ga=q,i=1;AAAA\x1b\\",
        b"\x1b[21t",
        b"\x1b[20t",
        b"\x1b[14t",
        b"\x1b[18t",
        b"\x1b[9;1t",
        b"\x1b[>c",
        b"\x1b[>0c",
        b"\x1b[=c",
        b"\x1b[>q",
        b"\x1b[>0t",
        b"\x1b[>2;3t",
        b"\x1b[>0T",
        b"\x1b[?2004$p",
        b"\x1b[4$p",
        b"\x1b[?4m",
        b"\x1b[?u",
        b"\x1b[?1;1S",
        b"\x1b[?2l",
        b"\x1b[?2h",
        b"\x1b[?67h",
        b"\x1b[?67l",
        b"\x1b[?1;1036h",
        b"\x1b[?1034h",
        b"\x1b[?1051l",
        b"\x1b[?1000s",
        b"\x1b[?1000r",
        b"\x1b[?s",
        b"\x1b[?9001h",
        b"\x1b[?2048h",
        b"\x1b[?2031h",
        b"\x1b[x",
        b"\x1b[1;1;1;1*y",
        b"\x1b[15n",
        b"\x1b[?15n",
        b"\x1b[1'|",
        b"\x1b[1$w",
        b"\x1b[i",
        b"\x1b[1;2?m",
        b"\x1bZ",
        b"\x1b G",
        b"\x1b%@",
        b"\x05",
        b"\xc2\x9a",
        b"\x9a",
        b"\xc2\x9d52;c;QUJD\x07",
        b"\x9d52;c;QUJD\xc2\x9c",
        b"\x9d52;c;QUJD\x9c",
        b"\xc2\x90$q m\xc2\x9c",
        b"\x90+q544e\x9c",
        b"\xc2\x9b21t",
        b"\x9b>c",
        b"\x9f_G;AAAA\x9c",
    ];

    #[test]
    fn display_sequences_are_kept_whole() {
        for seq in KEPT {
            let text = [b"a", *seq, b"b"].concat();
            assert_eq!(same_at_every_split(&text), text, "{:?}", seq);
        }
    }

    #[test]
    fn clipboard_writes_and_answered_requests_are_dropped() {
        for seq in DROPPED {
            let text = [b"a", *seq, b"b"].concat();
            assert_eq!(same_at_every_split(&text), b"ab", "{:?}", seq);
        }
    }

    /// A byte a strict UTF-8 decoder does not take as a continuation (`E0 80` is an
    /// overlong form) continues nothing: a C1 byte after it is a control, and a request
    /// it starts is judged like any other.
    #[test]
    fn a_c1_byte_after_an_invalid_utf8_start_is_a_control() {
        for text in [
            &b"I\xe0\x80\x9b21tJ"[..],
            b"I\xed\xa0\x9b21tJ",
            b"I\xf0\x80\x9b21tJ",
            b"I\xf4\x90\x9b21tJ",
        ] {
            let out = same_at_every_split(text);
            assert!(!out.windows(3).any(|w| w == b"21t"), "{text:?}: {out:?}");
            assert!(out.starts_with(b"I") && out.ends_with(b"J"), "{out:?}");
        }
        // Valid characters with those lead bytes are text, whole.
        let text = "\u{800}\u{d7ff}\u{10000}\u{10ffff}".as_bytes();
        assert_eq!(same_at_every_split(text), text);
    }

    #[test]
    fn kept_c1_sequences_are_written_in_7_bit_form() {
        assert_eq!(same_at_every_split(b"\xc2\x9b1m\x9b2J"), b"\x1b[1m\x1b[2J");
        assert_eq!(
            same_at_every_split(b"\x9d0;t\x9c\xc2\x9d2;u\xc2\x9c"),
            b"\x1b]0;t\x1b\\\x1b]2;u\x1b\\"
        );
        // Other C1 controls pass as they came; UTF-8 text is untouched.
        assert_eq!(same_at_every_split(b"\xc2\x85\x84"), b"\xc2\x85\x84");
        let text = "Привет, ©, 日本, ☃\n".as_bytes();
        assert_eq!(same_at_every_split(text), text);
    }

    #[test]
    fn a_string_cut_off_by_another_sequence_is_dropped_and_the_other_one_judged() {
        assert_eq!(
            same_at_every_split(b"\x1b]0;t\x1b[31mx\x1b]2;u\x1b]52;c;QQ==\x07y"),
            b"\x1b[31mxy"
        );
        assert_eq!(
            same_at_every_split(b"\x1b]0;t\x18x\x1b[1\x1am"),
            b"\x18x\x1am"
        );
    }

    #[test]
    fn controls_inside_a_csi_come_before_it() {
        assert_eq!(same_at_every_split(b"\x1b[1\n;3\x05\rm"), b"\n\r\x1b[1;3m");
    }

    #[test]
    fn an_unterminated_sequence_does_not_swallow_the_rest() {
        let mut long = b"\x1b]52;c;".to_vec();
        long.extend(std::iter::repeat_n(b'A', MAX_SEQUENCE));
        long.extend_from_slice(b"\ntext after\n");
        let out = filter(&long);
        assert!(
            out.ends_with(b"\ntext after\n"),
            "{:?}",
            &out[out.len() - 20..]
        );
        assert!(!out.starts_with(b"\x1b"));
        assert!(out.len() < long.len());
        // What it holds meanwhile is bounded.
        let mut f = TerminalFilter::new();
        let mut out = Vec::new();
        f.push(b"\x1bP", &mut out);
        for _ in 0..10 * MAX_SEQUENCE / 64 {
            f.push(&[b'x'; 64], &mut out);
            assert!(f.seq.len() <= MAX_SEQUENCE);
        }
        assert_eq!(out.len(), 10 * MAX_SEQUENCE - MAX_SEQUENCE);
        // An unfinished sequence at the end of the stream is dropped.
        assert_eq!(filter(b"a\x1b[3"), b"a");
        assert_eq!(filter(b"a\x1b"), b"a");
        assert_eq!(filter(b"a\xc2"), b"a\xc2");
    }
    /// The restore after `input`, pushed whole, at every split and byte by byte (all the
    /// same); and a filter that has seen `input` and the restore has nothing left to
    /// restore, and dropped nothing of it.
    fn restore_after(input: &[u8]) -> Vec<u8> {
        let restore = |pieces: &mut dyn Iterator<Item = &[u8]>| {
            let mut f = TerminalFilter::new();
            let mut out = Vec::new();
            for p in pieces {
                f.push(p, &mut out);
            }
            f.finish(&mut out);
            let mut r = Vec::new();
            f.restore(&mut r);
            r
        };
        let whole = restore(&mut std::iter::once(input));
        for k in 0..=input.len() {
            let (a, b) = input.split_at(k);
            assert_eq!(restore(&mut [a, b].into_iter()), whole, "split at {k}");
        }
        assert_eq!(restore(&mut input.chunks(1)), whole, "byte by byte");
        let mut f = TerminalFilter::new();
        let mut out = Vec::new();
        f.push(input, &mut out);
        let before = f.dropped();
        f.push(&whole, &mut out);
        assert_eq!(
            f.dropped(),
            before,
            "the restore of {input:?} held a dropped sequence"
        );
        let mut again = Vec::new();
        f.restore(&mut again);
        assert!(again.is_empty(), "{input:?}: {again:?} after {whole:?}");
        whole
    }

    #[test]
    fn what_a_program_leaves_changed_is_restored() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"\x1b[?1049h", b"\x1b[?1049l"),
            (b"\x1b[?47h\x1b[?1000;1006h", b"\x1b[?47l\x1b[?1000;1006l"),
            (
                b"\x1b[?1002h\x1b[?1004h\x1b[?2004h",
                b"\x1b[?1002;1004;2004l",
            ),
            (b"\x1b[?1h\x1b=", b"\x1b[?1l\x1b>"),
            (b"\x1b[?25l\x1b[?7l", b"\x1b[?7;25h"),
            (b"\x1b[4h\x1b[20h", b"\x1b[4;20l"),
            (b"\x1b[>4;2m", b"\x1b[>4m"),
            (b"\x1b[>4n\x1b[>1;2m", b"\x1b[>1m\x1b[>4m"),
            (b"\x1b[3;10r", b"\x1b7\x1b[r\x1b8"),
            (b"\x1b[8m", b"\x1b[m"),
            (b"\x1b[0;30;40m", b"\x1b[m"),
            (b"\x1b(0", b"\x1b(B"),
            (b"\x0e", b"\x0f"),
            (b"\x1bn", b"\x0f"),
            (b"\x1b[?5h\x1b[?6h\x1b[?9h", b"\x1b[?5;6;9l"),
            // C1 and split forms count as well.
            (b"\xc2\x9b?1000h\x9b?25l", b"\x1b[?1000l\x1b[?25h"),
            // A soft reset leaves the rest, and is followed by autowrap and the cursor.
            (b"\x1b[?1000h\x1b[1m\x1b[!p", b"\x1b[?1000l\x1b[?7;25h"),
        ];
        for (input, want) in cases {
            let text = [b"a", *input, b"b"].concat();
            assert_eq!(restore_after(&text), *want, "{input:?}");
        }
    }

    #[test]
    fn what_a_program_put_back_itself_is_not_restored() {
        for input in [
            &b"plain text\n"[..],
            b"\x1b[?1049h\x1b[2Jfull screen\x1b[?1049l",
            b"\x1b[?1000h\x1b[?1000l\x1b[?25l\x1b[?25h",
            b"\x1b[1;31mred\x1b[m \x1b[4h\x1b[4l",
            b"\x1b=\x1b>\x1b(0q\x1b(B\x0e\x0f",
            b"\x1b[>4;2m\x1b[>4m\x1b[>1;1m\x1b[>m",
            b"\x1b[5;20r\x1b[r",
            // RIS: every mode at its initial value.
            b"\x1b[?1000h\x1b[?25l\x1b[8m\x1bc",
            // Dropped sequences change nothing.
            b"\x1b[?2l\x1b[?67h\x1b[12h\x1b[>1u",
        ] {
            assert_eq!(restore_after(input), b"", "{input:?}");
        }
    }
    #[test]
    fn different_names_never_print_the_same() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let shown = |b: &[u8]| escape_path(std::path::Path::new(OsStr::from_bytes(b)));
        assert_eq!(shown(b"n\xff"), "n\\xff");
        assert_eq!(shown(b"n\xfe"), "n\\xfe");
        assert_eq!(shown(b"n\\xff"), "n\\\\xff");
        assert_eq!(
            shown("a\u{200b}b\u{ad}c\u{e0041}".as_bytes()),
            "a\\u{200b}b\\u{ad}c\\u{e0041}"
        );
        assert_eq!(shown("g/.g\u{200c}it".as_bytes()), "g/.g\\u{200c}it");
        assert_eq!(
            shown("x\n\x1b[1m\u{202e}".as_bytes()),
            "x\\n\\u{1b}[1m\\u{202e}"
        );
        assert_eq!(shown("Привет/日本".as_bytes()), "Привет/日本");
        // Every byte string of up to two bytes prints differently from every other.
        let mut seen = std::collections::HashMap::new();
        for a in 0..=255u8 {
            for b in [
                None,
                Some(0u8),
                Some(b'x'),
                Some(0x80),
                Some(0xff),
                Some(b'\\'),
            ] {
                let bytes: Vec<u8> = std::iter::once(a).chain(b).collect();
                if let Some(other) = seen.insert(shown(&bytes), bytes.clone()) {
                    panic!("{other:?} and {bytes:?} print the same");
                }
            }
        }
    }
}
