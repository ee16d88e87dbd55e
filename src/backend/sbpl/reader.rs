//! A small SBPL reader for tests and fuzzing: it parses a generated profile back so that
//! tests check its structure, not its spelling.
//!
//! Not public API. The crate's unit tests compile it as `sbpl::reader` under `cfg(test)`;
//! `tests/sbpl.rs` and `fuzz/fuzz_targets/sbpl.rs` include this same file with `#[path]`,
//! so there is one reader and nothing of it ships in the library. It depends on `std` only.
//!
//! It reads the subset stockade writes: lists, symbols, `;` comments, strings whose only
//! escapes are `\\` and `\"`, and `#"..."` regex literals. Anything else is an error, so a
//! profile that the generator garbled fails to parse instead of parsing differently.
#![allow(
    dead_code,
    reason = "each includer uses a different part of the reader"
)]

use std::fmt;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sexp {
    /// `( ... )`.
    List(Vec<Sexp>),
    /// A bare word: `allow`, `file-read*`, `subpath`, `1`.
    Symbol(String),
    /// A string literal, unescaped.
    Str(String),
    /// A `#"..."` regex literal, as written between the quotes.
    Regex(String),
}

/// Where and why parsing stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset into the text.
    pub at: usize,
    /// What was wrong.
    pub what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// Parses a whole profile into its top-level forms.
pub fn parse(text: &str) -> Result<Vec<Sexp>, ParseError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let mut forms = Vec::new();
    loop {
        p.skip_blank();
        if p.i == p.s.len() {
            return Ok(forms);
        }
        forms.push(p.expr()?);
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err<T>(&self, what: &'static str) -> Result<T, ParseError> {
        Err(ParseError { at: self.i, what })
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_blank(&mut self) {
        while let Some(c) = self.peek() {
            if c == b';' {
                while let Some(c) = self.peek() {
                    if c == b'\n' {
                        break;
                    }
                    self.i += 1;
                }
            } else if c.is_ascii_whitespace() {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn expr(&mut self) -> Result<Sexp, ParseError> {
        match self.peek() {
            None => self.err("unexpected end"),
            Some(b'(') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_blank();
                    match self.peek() {
                        None => return self.err("unclosed list"),
                        Some(b')') => {
                            self.i += 1;
                            return Ok(Sexp::List(items));
                        }
                        Some(_) => items.push(self.expr()?),
                    }
                }
            }
            Some(b')') => self.err("unbalanced `)`"),
            Some(b'"') => {
                self.i += 1;
                self.string().map(Sexp::Str)
            }
            Some(b'#') if self.s.get(self.i + 1) == Some(&b'"') => {
                self.i += 2;
                self.regex().map(Sexp::Regex)
            }
            Some(_) => {
                let start = self.i;
                while let Some(c) = self.peek() {
                    if c.is_ascii_whitespace() || matches!(c, b'(' | b')' | b'"' | b';') {
                        break;
                    }
                    self.i += 1;
                }
                let word = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| ParseError {
                    at: start,
                    what: "symbol is not UTF-8",
                })?;
                Ok(Sexp::Symbol(word.to_string()))
            }
        }
    }

    /// The rest of a string literal after its opening quote.
    fn string(&mut self) -> Result<String, ParseError> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    break;
                }
                Some(b'\\') => {
                    match self.s.get(self.i + 1) {
                        Some(&c @ (b'\\' | b'"')) => out.push(c),
                        _ => return self.err("escape other than \\\\ or \\\""),
                    }
                    self.i += 2;
                }
                Some(c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| ParseError {
            at: self.i,
            what: "string is not UTF-8",
        })
    }

    /// The rest of a `#"..."` literal; a backslash keeps the next byte.
    fn regex(&mut self) -> Result<String, ParseError> {
        let start = self.i;
        loop {
            match self.peek() {
                None => return self.err("unterminated regex"),
                Some(b'"') => break,
                Some(b'\\') => self.i += 2,
                Some(_) => self.i += 1,
            }
        }
        let body = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| ParseError {
            at: start,
            what: "regex is not UTF-8",
        })?;
        self.i += 1;
        Ok(body.to_string())
    }
}

/// A top-level `(allow ...)` or `(deny ...)` form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Index among the top-level forms.
    pub index: usize,
    /// `allow` or `deny`.
    pub action: String,
    /// The operations, in order: `file-read*`, `file-write*`, …
    pub ops: Vec<String>,
    /// The filters: each a list such as `(subpath "/usr")` or `(target same-sandbox)`.
    pub filters: Vec<Sexp>,
}

impl Rule {
    /// The operations joined with spaces: `file-read* file-write*`.
    pub fn head(&self) -> String {
        format!("{} {}", self.action, self.ops.join(" "))
    }

    /// The `(kind "string")` filters of this rule, as `(kind, string)`.
    pub fn paths(&self) -> Vec<(&str, &str)> {
        self.filters
            .iter()
            .filter_map(|f| match f {
                Sexp::List(v) => match v.as_slice() {
                    [Sexp::Symbol(k), Sexp::Str(s)] => Some((k.as_str(), s.as_str())),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }
}

impl Rule {
    /// The `(remote kind "address")` filters of this rule, as `(kind, address)`: the
    /// network endpoints a `network-outbound` rule names.
    pub fn remotes(&self) -> Vec<(&str, &str)> {
        self.filters
            .iter()
            .filter_map(|f| match f {
                Sexp::List(v) => match v.as_slice() {
                    [Sexp::Symbol(r), Sexp::Symbol(k), Sexp::Str(a)] if r == "remote" => {
                        Some((k.as_str(), a.as_str()))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }
}

/// Parses a profile and checks its frame: `(version 1)`, `(deny default)`, then only
/// `(allow|deny op... filter...)` forms in which the operations are symbols and every
/// filter is a list. Returns the rules after the frame.
pub fn rules(text: &str) -> Result<Vec<Rule>, String> {
    let forms = parse(text).map_err(|e| e.to_string())?;
    let sym = |s: &str| Sexp::Symbol(s.to_string());
    match forms.as_slice() {
        [Sexp::List(v), Sexp::List(d), ..]
            if *v == [sym("version"), sym("1")] && *d == [sym("deny"), sym("default")] => {}
        _ => return Err("the profile does not start with (version 1) (deny default)".into()),
    }
    let mut out = Vec::new();
    for (index, form) in forms.iter().enumerate().skip(2) {
        let Sexp::List(items) = form else {
            return Err(format!("form {index} is not a list"));
        };
        let Some(Sexp::Symbol(action)) = items.first() else {
            return Err(format!("form {index} has no action"));
        };
        if action != "allow" && action != "deny" {
            return Err(format!("form {index}: unknown action {action:?}"));
        }
        let mut ops = Vec::new();
        let mut filters = Vec::new();
        for item in &items[1..] {
            match item {
                Sexp::Symbol(op) if filters.is_empty() => ops.push(op.clone()),
                Sexp::List(_) => filters.push(item.clone()),
                other => return Err(format!("form {index}: unexpected {other:?}")),
            }
        }
        if ops.is_empty() {
            return Err(format!("form {index} has no operation"));
        }
        out.push(Rule {
            index,
            action: action.clone(),
            ops,
            filters,
        });
    }
    Ok(out)
}
