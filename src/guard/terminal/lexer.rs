//! What a terminal makes of a byte stream: drawn text, controls, and escape sequences.
//!
//! The parser follows the state machine terminals share (Paul Williams' DEC-compatible
//! parser, which xterm, VTE and most others implement), reduced to what the filter and the
//! scrubber must tell apart:
//!
//! - `ESC` starts a sequence; `ESC [` a CSI (parameters `0x30..=0x3F`, intermediates
//!   `0x20..=0x2F`, a final byte `0x40..=0x7E`); `ESC ]` an OSC, `ESC P` a DCS, `ESC X`
//!   an SOS, `ESC ^` a PM and `ESC _` an APC: strings, ended by the string terminator ST
//!   (`ESC \`), by BEL, or cut off by anything that starts another sequence;
//! - the C1 controls do the same in their UTF-8 form (`U+0080..=U+009F`, bytes `C2 80`
//!   to `C2 9F`) and, for terminals in an 8-bit mode, as single bytes `0x80..=0x9F` that
//!   do not continue a UTF-8 character: `0x9B` is CSI, `0x9D` OSC, `0x9C` ST, and so on;
//! - a C0 control inside an `ESC` or CSI sequence is executed where it stands and the
//!   sequence goes on; CAN and SUB cancel a sequence; `ESC` always starts a new one, so an
//!   unterminated sequence ends at the next `ESC`.
//!
//! The lexer reads one byte at a time and keeps its state between calls, so a stream
//! split anywhere gives the same events as the whole. One byte is looked at late: a
//! `C2` is a C1 control only if the next byte is in `0x80..=0x9F`, so its event comes
//! with the next byte (at the `C2`'s own position).

/// A kind of escape sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `ESC` followed by intermediates and a final byte (`ESC 7`, `ESC ( B`).
    Esc,
    /// Control Sequence Introducer: `ESC [` or `0x9B`.
    Csi,
    /// Operating System Command: `ESC ]` or `0x9D`.
    Osc,
    /// Device Control String: `ESC P` or `0x90`.
    Dcs,
    /// Start Of String: `ESC X` or `0x98`.
    Sos,
    /// Privacy Message: `ESC ^` or `0x9E`.
    Pm,
    /// Application Program Command: `ESC _` or `0x9F`.
    Apc,
}

impl Kind {
    /// Whether the sequence is a string (its body runs until a terminator).
    pub(crate) fn is_string(self) -> bool {
        !matches!(self, Kind::Esc | Kind::Csi)
    }
}

/// How a sequence ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// The final byte of an `ESC` or CSI sequence (the last `Byte` event).
    Final,
    /// A string ended by BEL.
    Bel,
    /// A string ended by ST (`ESC \`, `0x9C` or `C2 9C`).
    St,
    /// Cancelled (CAN, SUB), cut off (another sequence started, a byte a sequence cannot
    /// hold), or longer than the lexer's cap.
    Abort,
}

/// What the lexer saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// A byte of drawn text (printable ASCII, UTF-8, bytes a terminal shows as U+FFFD).
    Text(u8),
    /// A C0 control or DEL that the terminal executes (outside strings).
    Control(u8),
    /// A C1 control that starts no sequence (`code` in `0x80..=0x9F`); `wide`: it came as
    /// UTF-8 (`C2 code`), else as one byte.
    C1 { code: u8, wide: bool },
    /// A sequence starts (after its introducer).
    Begin(Kind),
    /// A byte of the current sequence: a CSI's parameters, intermediates and final byte,
    /// an `ESC` sequence's intermediates and final byte, a string's body.
    Byte(u8),
    /// The current sequence ended.
    End(End),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ground,
    /// After `ESC`: nothing is begun yet.
    Esc,
    /// An `ESC` sequence with intermediates.
    EscInter,
    Csi,
    /// A string's body.
    Str,
    /// `ESC` inside a string: ST if `\` follows, else the string is cut off.
    StrEsc,
}

/// The terminal parser's state: small and `Copy`, so a stream's position can be saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lexer {
    state: State,
    /// UTF-8 continuation bytes still expected (text and string bodies).
    cont: u8,
    /// The bytes the next continuation byte may be (`0x80..=0xBF` but right after the
    /// lead bytes that a strict decoder narrows: `E0`'s `A0..=BF`, `ED`'s `80..=9F`,
    /// `F0`'s `90..=BF`, `F4`'s `80..=8F`). A byte outside it continues nothing: a strict
    /// decoder drops the character there, so a `0x80..=0x9F` byte is a C1 control again
    /// (`E0 80 9B` is no character, and its `9B` is CSI).
    next: (u8, u8),
    /// A `C2` byte waits for the next one.
    c2: bool,
    /// Bytes of the current sequence so far.
    len: usize,
    /// The position of the byte being read (for events without a byte of their own).
    at: usize,
    /// A sequence longer than this is cut off ([`End::Abort`]) and the lexer is back in
    /// text: an unterminated sequence cannot hold the rest of the stream.
    cap: usize,
}

impl Lexer {
    /// A lexer in text, cutting sequences off after `cap` bytes.
    pub(crate) const fn new(cap: usize) -> Lexer {
        Lexer {
            state: State::Ground,
            cont: 0,
            next: (0x80, 0xBF),
            c2: false,
            len: 0,
            at: 0,
            cap,
        }
    }

    /// Whether the lexer is in text with nothing pending: a byte that is neither a
    /// control nor a C1 byte is drawn text from here.
    pub(crate) fn in_text(&self) -> bool {
        self.state == State::Ground && !self.c2
    }

    /// Whether a `C2` byte waits for the next byte to say what it is.
    pub(crate) fn c2_pending(&self) -> bool {
        self.c2
    }

    /// Takes a waiting `C2` as followed by a byte that makes no C1 control of it (the
    /// caller knows the next byte), as [`feed`](Self::feed) of that byte would before
    /// reading it.
    pub(crate) fn resolve_c2(&mut self) {
        if self.c2 {
            self.c2 = false;
            self.plain(0xC2, usize::MAX, &mut |_, _| {});
        }
    }

    /// Whether a string's body is open.
    pub(crate) fn in_string(&self) -> bool {
        matches!(self.state, State::Str | State::StrEsc)
    }

    /// The UTF-8 continuation bytes still expected.
    pub(crate) fn set_cont(&mut self, cont: u8) {
        self.cont = cont;
    }

    /// Feeds `input`; `f(event, at)` gets each event with the index in `input` of the
    /// byte it concerns (for a late `C2`, one less than the byte that decided it, which
    /// wraps below 0 when that `C2` came in an earlier call).
    pub(crate) fn feed(&mut self, input: &[u8], mut f: impl FnMut(Ev, usize)) {
        for (i, &b) in input.iter().enumerate() {
            self.byte(b, i, &mut f);
        }
    }

    /// [`feed`](Self::feed) until the lexer is back in text with nothing pending;
    /// returns how many bytes of `input` it read.
    pub(crate) fn feed_until_text(&mut self, input: &[u8], mut f: impl FnMut(Ev, usize)) -> usize {
        for (i, &b) in input.iter().enumerate() {
            self.byte(b, i, &mut f);
            if self.in_text() {
                return i + 1;
            }
        }
        input.len()
    }

    /// The end of the stream: a waiting `C2` is what it would be before any other byte
    /// (text, or a byte of a string's body); an open sequence is cut off.
    pub(crate) fn finish(&mut self, mut f: impl FnMut(Ev, usize)) {
        self.at = usize::MAX;
        if self.c2 {
            self.c2 = false;
            self.plain(0xC2, usize::MAX, &mut f);
        }
        if matches!(
            self.state,
            State::EscInter | State::Csi | State::Str | State::StrEsc
        ) {
            f(Ev::End(End::Abort), usize::MAX);
        }
        self.state = State::Ground;
        self.cont = 0;
        self.len = 0;
    }

    fn byte(&mut self, b: u8, i: usize, f: &mut impl FnMut(Ev, usize)) {
        if self.c2 {
            self.c2 = false;
            self.at = i.wrapping_sub(1);
            if (0x80..=0x9F).contains(&b) {
                self.c1(b, true, i.wrapping_sub(1), f);
                return;
            }
            self.plain(0xC2, i.wrapping_sub(1), f);
        }
        self.at = i;
        if b == 0xC2 {
            // Never a continuation byte: whatever character was open is broken off, and
            // `C2 9B` is CSI even there.
            self.cont = 0;
            self.c2 = true;
            return;
        }
        self.plain(b, i, f);
    }

    /// One byte, with no `C2` waiting.
    fn plain(&mut self, b: u8, i: usize, f: &mut impl FnMut(Ev, usize)) {
        if b < 0x80 {
            // A UTF-8 decoder gives up on a character that an ASCII byte interrupts.
            self.cont = 0;
        }
        match b {
            0x1B => self.escape(f),
            0x18 | 0x1A => {
                self.cut(f);
                self.state = State::Ground;
                f(Ev::Control(b), i);
            }
            0x00..=0x1F => match self.state {
                State::Str if b == 0x07 => self.end(End::Bel, f),
                State::Str => {}
                State::StrEsc => {
                    self.end(End::Abort, f);
                    self.state = State::Esc;
                    f(Ev::Control(b), i);
                }
                _ => f(Ev::Control(b), i),
            },
            0x7F => match self.state {
                State::Ground => f(Ev::Control(b), i),
                State::StrEsc => {
                    self.end(End::Abort, f);
                    self.state = State::Esc;
                }
                _ => {}
            },
            0x20..=0x7E => self.printable(b, i, f),
            _ => self.high(b, i, f),
        }
    }

    /// `ESC`: whatever was open is cut off (a string may be ending with ST).
    fn escape(&mut self, f: &mut impl FnMut(Ev, usize)) {
        self.state = match self.state {
            State::Str => State::StrEsc,
            State::StrEsc => {
                self.end(End::Abort, f);
                State::Esc
            }
            _ => {
                self.cut(f);
                State::Esc
            }
        };
        self.cont = 0;
    }

    /// Ends a begun `ESC` or CSI sequence that something else cut off.
    fn cut(&mut self, f: &mut impl FnMut(Ev, usize)) {
        match self.state {
            State::EscInter | State::Csi | State::Str | State::StrEsc => self.end(End::Abort, f),
            State::Ground | State::Esc => {}
        }
    }

    fn end(&mut self, how: End, f: &mut impl FnMut(Ev, usize)) {
        f(Ev::End(how), self.at);
        self.state = State::Ground;
        self.len = 0;
        self.cont = 0;
    }

    fn begin(&mut self, kind: Kind, f: &mut impl FnMut(Ev, usize)) {
        f(Ev::Begin(kind), self.at);
        self.len = 0;
        self.cont = 0;
        self.state = if kind.is_string() {
            State::Str
        } else if kind == Kind::Csi {
            State::Csi
        } else {
            State::EscInter
        };
    }

    /// A byte of the current sequence; false when it was one too many (the sequence is
    /// then cut off and the lexer is in text).
    fn push(&mut self, b: u8, i: usize, f: &mut impl FnMut(Ev, usize)) -> bool {
        if self.len >= self.cap {
            self.end(End::Abort, f);
            return false;
        }
        self.len += 1;
        f(Ev::Byte(b), i);
        true
    }

    fn printable(&mut self, b: u8, i: usize, f: &mut impl FnMut(Ev, usize)) {
        match self.state {
            State::Ground => {
                self.cont = 0;
                f(Ev::Text(b), i);
            }
            State::Esc => match b {
                b'[' => self.begin(Kind::Csi, f),
                b']' => self.begin(Kind::Osc, f),
                b'P' => self.begin(Kind::Dcs, f),
                b'X' => self.begin(Kind::Sos, f),
                b'^' => self.begin(Kind::Pm, f),
                b'_' => self.begin(Kind::Apc, f),
                _ => {
                    self.begin(Kind::Esc, f);
                    if self.push(b, i, f) && b >= 0x30 {
                        self.end(End::Final, f);
                    }
                }
            },
            State::EscInter => {
                if !self.push(b, i, f) {
                    return self.printable(b, i, f);
                }
                if b >= 0x30 {
                    self.end(End::Final, f);
                }
            }
            State::Csi => {
                if !self.push(b, i, f) {
                    return self.printable(b, i, f);
                }
                if b >= 0x40 {
                    self.end(End::Final, f);
                }
            }
            State::Str => {
                self.cont = 0;
                if !self.push(b, i, f) {
                    self.printable(b, i, f);
                }
            }
            State::StrEsc => {
                if b == b'\\' {
                    self.end(End::St, f);
                } else {
                    self.end(End::Abort, f);
                    self.state = State::Esc;
                    self.printable(b, i, f);
                }
            }
        }
    }

    /// A byte `0x80..=0xFF` (not a `C2` that waits).
    fn high(&mut self, b: u8, i: usize, f: &mut impl FnMut(Ev, usize)) {
        let continues = self.cont > 0 && (self.next.0..=self.next.1).contains(&b);
        match self.state {
            State::Ground | State::Str if continues => {
                self.cont -= 1;
                self.next = (0x80, 0xBF);
                self.text_or_body(b, i, f);
            }
            State::Ground | State::Str if b <= 0x9F => self.c1(b, false, i, f),
            State::Ground | State::Str => {
                self.cont = match b {
                    0xC2..=0xDF => 1,
                    0xE0..=0xEF => 2,
                    0xF0..=0xF4 => 3,
                    _ => 0,
                };
                self.next = match b {
                    0xE0 => (0xA0, 0xBF),
                    0xED => (0x80, 0x9F),
                    0xF0 => (0x90, 0xBF),
                    0xF4 => (0x80, 0x8F),
                    _ => (0x80, 0xBF),
                };
                self.text_or_body(b, i, f);
            }
            State::StrEsc | State::Esc | State::EscInter | State::Csi if b <= 0x9F => {
                self.c1(b, false, i, f)
            }
            State::StrEsc | State::Esc | State::EscInter | State::Csi => {
                // No sequence holds such a byte: it ends the sequence and is text.
                self.cut(f);
                self.state = State::Ground;
                self.cont = 0;
                self.high(b, i, f);
            }
        }
    }

    fn text_or_body(&mut self, b: u8, i: usize, f: &mut impl FnMut(Ev, usize)) {
        if self.state == State::Ground {
            f(Ev::Text(b), i);
        } else if !self.push(b, i, f) {
            self.high(b, i, f);
        }
    }

    /// A C1 control: anywhere, it cuts off what is open (ST ends a string) and may start
    /// a sequence of its own.
    fn c1(&mut self, code: u8, wide: bool, i: usize, f: &mut impl FnMut(Ev, usize)) {
        if code == 0x9C && matches!(self.state, State::Str | State::StrEsc) {
            if self.state == State::StrEsc {
                // `ESC` then ST: the `ESC` cut the string off.
                self.end(End::Abort, f);
            } else {
                self.end(End::St, f);
            }
            return;
        }
        self.cut(f);
        self.state = State::Ground;
        self.cont = 0;
        match code {
            0x9B => self.begin(Kind::Csi, f),
            0x9D => self.begin(Kind::Osc, f),
            0x90 => self.begin(Kind::Dcs, f),
            0x98 => self.begin(Kind::Sos, f),
            0x9E => self.begin(Kind::Pm, f),
            0x9F => self.begin(Kind::Apc, f),
            _ => f(Ev::C1 { code, wide }, i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(input: &[u8]) -> Vec<(Ev, usize)> {
        let mut l = Lexer::new(usize::MAX);
        let mut out = Vec::new();
        l.feed(input, |e, at| out.push((e, at)));
        l.finish(|e, at| out.push((e, at)));
        out
    }

    fn kinds(input: &[u8]) -> Vec<Ev> {
        events(input).into_iter().map(|(e, _)| e).collect()
    }

    #[test]
    fn csi_with_a_control_inside_executes_it_and_goes_on() {
        use Ev::*;
        assert_eq!(
            kinds(b"a\x1b[3\n1mb"),
            [
                Text(b'a'),
                Begin(Kind::Csi),
                Byte(b'3'),
                Control(b'\n'),
                Byte(b'1'),
                Byte(b'm'),
                End(super::End::Final),
                Text(b'b'),
            ]
        );
    }

    #[test]
    fn strings_end_at_bel_st_or_the_next_escape() {
        use Ev::*;
        let e = kinds(b"\x1b]0;t\x07\x1b]2;u\x1b\\\x1b]8;v\x1b[m\xc2\x9d1;w\xc2\x9c\x9d9\x9c");
        let ends: Vec<_> = e
            .iter()
            .filter_map(|e| match e {
                End(how) => Some(*how),
                _ => None,
            })
            .collect();
        use super::End as E;
        assert_eq!(ends, [E::Bel, E::St, E::Abort, E::Final, E::St, E::St]);
        // ST ends strings and is no control of its own.
        assert!(!e.iter().any(|e| matches!(e, C1 { code: 0x9C, .. })));
    }

    #[test]
    fn utf8_continuations_are_text_and_stray_c1_bytes_are_controls() {
        use Ev::*;
        // "Пр" is D0 9F D1 80: continuation bytes in 0x80..=0x9F.
        assert_eq!(
            kinds("Пр".as_bytes()),
            [Text(0xD0), Text(0x9F), Text(0xD1), Text(0x80)]
        );
        assert_eq!(
            kinds(b"a\x85b"),
            [
                Text(b'a'),
                C1 {
                    code: 0x85,
                    wide: false
                },
                Text(b'b')
            ]
        );
        assert_eq!(
            kinds(b"\xc2\x85\xc2\xa9\xc2"),
            [
                C1 {
                    code: 0x85,
                    wide: true
                },
                Text(0xC2),
                Text(0xA9),
                Text(0xC2)
            ]
        );
        // A late C2 carries its own position.
        let e = events(b"x\xc2y");
        assert_eq!(e[1], (Text(0xC2), 1));
        assert_eq!(e[2], (Text(b'y'), 2));
    }

    #[test]
    fn a_sequence_longer_than_the_cap_is_cut_off_and_the_rest_is_text() {
        use Ev::*;
        let mut l = Lexer::new(4);
        let mut out = Vec::new();
        l.feed(b"\x1b]0;abcdef", |e, _| out.push(e));
        assert_eq!(
            out,
            [
                Begin(Kind::Osc),
                Byte(b'0'),
                Byte(b';'),
                Byte(b'a'),
                Byte(b'b'),
                End(super::End::Abort),
                Text(b'c'),
                Text(b'd'),
                Text(b'e'),
                Text(b'f'),
            ]
        );
    }

    #[test]
    fn events_do_not_depend_on_where_the_input_is_split() {
        let input: &[u8] =
            b"a\x1b[1;31mb\xc2\x9b2Jc\x1b]52;c;QUJD\x07\x1bP$q m\x1b\\\xd0\x9f\x9b6n\
                             \x1b(B\x1b\x1b[c\x18\x1b]0;\xc2\xa9\x9c\x1b]8;;u\x1b\\d\xc2";
        let whole = events(input);
        for k in 0..=input.len() {
            let mut l = Lexer::new(usize::MAX);
            let mut out = Vec::new();
            l.feed(&input[..k], |e, at| out.push((e, at)));
            l.feed(&input[k..], |e, at| out.push((e, at.wrapping_add(k))));
            // `finish` has no byte: its events carry no position.
            l.finish(|e, at| out.push((e, at)));
            assert_eq!(out, whole, "split at {k}");
        }
    }
}
