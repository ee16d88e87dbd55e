//! Redaction on a stream: [`RedactingWriter`].

use std::fmt;
use std::io::{self, Write};

use super::view::{self, Scan, View};
use super::{REDACTED, Redactor};
use crate::guard::leak::{Finding, StreamScanner};

/// A [`Write`] adapter that redacts known secrets on the way to `inner` and scans what it
/// writes for unknown ones: put it between a child's stdout or stderr and its destination.
///
/// Bytes that could be the start of a known secret are held back until the next write
/// shows whether they are (at most the longest encoded secret less one byte, with up to
/// 256 bytes of escapes and silent controls between two of its characters, as the
/// terminal view of the [module](super) allows), so a secret
/// split across writes is still redacted, and the output equals what
/// [`Redactor::redact`] makes of the whole stream. [`flush`](Write::flush) keeps those
/// bytes too: releasing them would let a secret through in two halves.
/// [`finish`](Self::finish) releases them, as a stream that ends inside a secret did not
/// print it whole.
///
/// Findings refer to offsets in the redacted output; see [`StreamScanner`] for when they
/// become available. Memory stays bounded whatever the stream's length.
///
/// ```
/// use std::io::Write;
/// use stockade::{RedactingWriter, Redactor};
///
/// let secret = format!("s3cr3t-{}", "value-0042");
/// let mut w = RedactingWriter::new(Redactor::new([&secret]), Vec::new());
/// w.write_all(&secret.as_bytes()[..5])?;
/// w.write_all(&secret.as_bytes()[5..])?;
/// w.write_all(b" done\n")?;
/// let (out, findings) = w.finish()?;
/// assert_eq!(out, b"[REDACTED] done\n");
/// assert!(findings.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct RedactingWriter<W: Write> {
    redactor: Redactor,
    inner: W,
    /// Input not yet written: a possible start of a secret.
    held: Vec<u8>,
    /// The terminal's state at the start of `held`, and the view of `held`.
    scan: Scan,
    view: View,
    out: Vec<u8>,
    scanner: Option<StreamScanner>,
    findings: Vec<Finding>,
}

impl<W: Write> RedactingWriter<W> {
    /// Redacts with `redactor` and scans the redacted output (the built-in formats and
    /// the redactor's [`patterns`](Redactor::patterns)).
    pub fn new(redactor: Redactor, inner: W) -> RedactingWriter<W> {
        let scanner = StreamScanner::with_patterns(redactor.patterns().clone());
        RedactingWriter {
            redactor,
            inner,
            held: Vec::new(),
            scan: Scan::default(),
            view: View::default(),
            out: Vec::new(),
            scanner: Some(scanner),
            findings: Vec::new(),
        }
    }

    /// Redacts with `redactor` and does not scan.
    pub fn without_scan(redactor: Redactor, inner: W) -> RedactingWriter<W> {
        RedactingWriter {
            scanner: None,
            ..RedactingWriter::new(redactor, inner)
        }
    }

    /// The findings so far.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Takes the findings so far, leaving none.
    pub fn take_findings(&mut self) -> Vec<Finding> {
        std::mem::take(&mut self.findings)
    }

    /// How many bytes are held back.
    #[cfg(test)]
    pub(super) fn held_len(&self) -> usize {
        self.held.len()
    }

    /// The wrapped writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The wrapped writer, to take what was written (the process layer's line stream
    /// reads the redacted bytes from a `Vec` it wraps).
    pub(crate) fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// Writes the bytes held back, scans the rest of the stream and flushes; returns the
    /// wrapped writer and the findings not yet taken.
    ///
    /// # Errors
    ///
    /// Writing to or flushing the wrapped writer failed.
    pub fn finish(mut self) -> io::Result<(W, Vec<Finding>)> {
        self.process(&[], true)?;
        if let Some(scanner) = self.scanner.take() {
            self.findings.extend(scanner.finish());
        }
        self.inner.flush()?;
        Ok((self.inner, self.findings))
    }

    fn process(&mut self, data: &[u8], last: bool) -> io::Result<()> {
        if self.redactor.is_empty() {
            return self.emit(data);
        }
        self.held.extend_from_slice(data);
        self.out.clear();
        let mut at = 0;
        let (held, out) = (&self.held, &mut self.out);
        let (hold, pass) =
            self.redactor
                .matches_in(self.scan, held, last, &mut self.view, |start, end| {
                    out.extend_from_slice(&held[at..start]);
                    out.extend_from_slice(REDACTED.as_bytes());
                    at = end;
                });
        let cut = at.max(hold);
        self.scan = match pass {
            None => view::after_plain(self.scan, &held[..cut]),
            // Nothing kept back: the state after the view is the state at the cut (unless
            // a `C2` waits: it stays held, and is read again).
            Some((decided, end)) if cut == decided && !end.lexer.c2_pending() => end,
            Some(_) => view::at_cut(self.scan, held, &self.view, cut),
        };
        self.out.extend_from_slice(&self.held[at..cut]);
        self.held.drain(..cut);
        let out = std::mem::take(&mut self.out);
        let r = self.emit(&out);
        self.out = out;
        r
    }

    fn emit(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.inner.write_all(bytes)?;
        if let Some(scanner) = &mut self.scanner {
            self.findings.extend(scanner.push(bytes));
        }
        Ok(())
    }
}

impl<W: Write> fmt::Debug for RedactingWriter<W> {
    /// Counts only: the held bytes may be part of a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedactingWriter")
            .field("redactor", &self.redactor)
            .field("held", &self.held.len())
            .field("scanner", &self.scanner)
            .field("findings", &self.findings)
            .finish_non_exhaustive()
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    /// Takes all of `buf`; what may be the start of a secret waits for the next write.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.process(buf, false)?;
        Ok(buf.len())
    }

    /// Flushes the wrapped writer and scans what was written so far. Bytes that may be the
    /// start of a secret stay held back.
    fn flush(&mut self) -> io::Result<()> {
        if let Some(scanner) = &mut self.scanner {
            self.findings.extend(scanner.flush());
        }
        self.inner.flush()
    }
}
