//! `stockade-changes.json`: a flat JSON object of strings and unsigned integers, read
//! by hand (the library links no JSON crate): `{"version":1,"workspace":"/ws",
//! "mode":"overlay","started_ns":1764200000000000000}`. Unknown keys are skipped.

use std::path::PathBuf;

/// The metadata of a change set, from its marker file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Marker {
    /// Format version (1).
    pub version: u64,
    /// The real workspace the change set is relative to (canonical, absolute).
    pub workspace: PathBuf,
    /// `overlay` (the full layer) or `snapshot` (layer 2).
    pub mode: String,
    /// `CLOCK_REALTIME` nanoseconds at the start of the first run.
    pub started_ns: u64,
}

enum Value {
    Str(String),
    Num(u64),
}

/// Parses the marker; `Err` names what is wrong.
pub(crate) fn parse(text: &[u8]) -> Result<Marker, &'static str> {
    if text.is_empty() {
        // What a host crash before the set's first run ended can leave (the marker is
        // made durable at that run's end: `changeset::Held::make_durable`).
        return Err("empty (did the host stop before the change set's first run ended?)");
    }
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8")?;
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.ws();
    p.eat(b'{')?;
    let (mut version, mut workspace, mut mode, mut started) = (None, None, None, None);
    p.ws();
    if p.peek() == Some(b'}') {
        p.i += 1;
    } else {
        loop {
            p.ws();
            let key = p.string()?;
            p.ws();
            p.eat(b':')?;
            p.ws();
            let value = match p.peek() {
                Some(b'"') => Value::Str(p.string()?),
                Some(b'0'..=b'9') => Value::Num(p.number()?),
                _ => return Err("a value is neither a string nor an unsigned integer"),
            };
            let slot = match (key.as_str(), value) {
                ("version", Value::Num(n)) => version.replace(n).map(drop),
                ("workspace", Value::Str(s)) => workspace.replace(s).map(drop),
                ("mode", Value::Str(s)) => mode.replace(s).map(drop),
                ("started_ns", Value::Num(n)) => started.replace(n).map(drop),
                ("version" | "workspace" | "mode" | "started_ns", _) => {
                    return Err("a key has a value of the wrong type");
                }
                _ => None,
            };
            if slot.is_some() {
                return Err("a key appears twice");
            }
            p.ws();
            match p.peek() {
                Some(b',') => p.i += 1,
                Some(b'}') => {
                    p.i += 1;
                    break;
                }
                _ => return Err("expected `,` or `}`"),
            }
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err("text after the object");
    }
    Ok(Marker {
        version: version.ok_or("no `version`")?,
        workspace: PathBuf::from(workspace.ok_or("no `workspace`")?),
        mode: mode.ok_or("no `mode`")?,
        started_ns: started.ok_or("no `started_ns`")?,
    })
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Result<(), &'static str> {
        if self.peek() != Some(b) {
            return Err("malformed JSON object");
        }
        self.i += 1;
        Ok(())
    }

    fn number(&mut self) -> Result<u64, &'static str> {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return Err("a number is not an unsigned integer");
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or("a number is out of range")
    }

    fn hex4(&mut self) -> Result<u32, &'static str> {
        let h = self.s.get(self.i..self.i + 4).ok_or("short \\u escape")?;
        self.i += 4;
        let h = std::str::from_utf8(h).map_err(|_| "bad \\u escape")?;
        u32::from_str_radix(h, 16).map_err(|_| "bad \\u escape")
    }

    fn string(&mut self) -> Result<String, &'static str> {
        self.eat(b'"')?;
        let mut out = String::new();
        loop {
            let b = self.peek().ok_or("unterminated string")?;
            self.i += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => {
                    let e = self.peek().ok_or("unterminated string")?;
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let mut c = self.hex4()?;
                            if (0xd800..0xdc00).contains(&c) {
                                if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return Err("lone surrogate");
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err("lone surrogate");
                                }
                                c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
                            }
                            out.push(char::from_u32(c).ok_or("lone surrogate")?);
                        }
                        _ => return Err("bad escape"),
                    }
                }
                0..0x20 => return Err("control character in a string"),
                _ => {
                    // Copy the whole UTF-8 sequence (the text is valid UTF-8).
                    let start = self.i - 1;
                    while matches!(self.peek(), Some(0x80..=0xbf)) {
                        self.i += 1;
                    }
                    out.push_str(std::str::from_utf8(&self.s[start..self.i]).unwrap_or(""));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_contract_and_refuses_the_rest() {
        let m = parse(
            br#" {"version":1,"workspace":"/w \u00e9\"s","mode":"overlay","extra":"x","started_ns":17} "#,
        )
        .unwrap();
        assert_eq!(m.version, 1);
        assert_eq!(m.workspace, PathBuf::from("/w \u{e9}\"s"));
        assert_eq!(m.mode, "overlay");
        assert_eq!(m.started_ns, 17);
        assert!(parse(br#"{"version":1,"workspace":"/w","mode":"overlay"}"#).is_err());
        assert!(parse(br#"{"version":"1","workspace":"/w","mode":"o","started_ns":1}"#).is_err());
        assert!(
            parse(br#"{"version":1,"version":2,"workspace":"/w","mode":"o","started_ns":1}"#)
                .is_err()
        );
        assert!(parse(br#"{"version":1.5,"workspace":"/w","mode":"o","started_ns":1}"#).is_err());
        assert!(parse(br#"{"version":1,"workspace":"/w","mode":"o","started_ns":1} x"#).is_err());
        assert!(parse(b"{\"version\":1,\"workspace\":\"/\x01\"}").is_err());
    }
}
