//! Scanning a stream that arrives in chunks, with bounded memory.

use std::fmt;
use std::io::{self, Read, Write};

use super::class::{RUN, URL, is};
use super::finding::{Finding, PatternName};
use super::host::HostPatterns;
use super::scanner;

/// Bytes the stream scanner gathers before scanning.
const BATCH: usize = 64 * 1024;
/// Bytes kept from one batch to the next, so that a secret split across batches is seen
/// whole: more than any token or host match that is not made only of [`PENDING_CLASS`]
/// bytes (a URL password and its URL, an Azure connection string's key).
const TAIL: usize = 2 * 1024;
/// How far back the run of [`PENDING_CLASS`] bytes that ends a batch is kept with it: more
/// than the longest encoded token that no scan of a part of it reports (a JWT, cut before
/// its signature, matches nothing). The longest JWT is 5,634 bytes (a 512-byte header, a
/// 4,096-byte payload, a 1,024-byte signature), 11,268 in hex and 16,902 with every byte
/// percent-escaped. Tokens that a cut leaves matching (a PEM block, a prefixed token) are
/// kept from their start as long as they reach the end.
const PENDING: usize = 20 * 1024;
/// The bytes a token, raw or encoded, is written with: base64 in both alphabets, hex, and
/// percent-encoding's unreserved bytes and `%` (a JWT's `.` among them).
const PENDING_CLASS: u16 = RUN | URL;
/// A finding that ends this close to the end of the buffer may still grow (a longer token,
/// a base64 quantum not yet complete) and waits for more input.
const HOLD: usize = 8;

/// Scans a stream that arrives in chunks, with bounded memory.
///
/// Chunks are gathered into batches of 64 KiB and scanned with [`scan`](super::scan) (with
/// host patterns: [`scan_with`](super::scan_with)); the last bytes of
/// each batch are scanned again with the next one, so a secret split across chunks (raw or
/// encoded) is found, and found once. What is scanned again: the last 2 KiB, the run of
/// base64, hex or URL bytes that ends the batch up to 20 KiB back (the longest JWT, every
/// byte percent-escaped, is 16.5 KiB), and a finding that reaches the end from its start
/// (a PEM block of up to 8 KiB, 24 KiB once percent-escaped). So memory stays below the
/// batch size plus 24 KiB, whatever the length of the stream. A host pattern's match split
/// across batches is found when it is at most 2 KiB long, or when it is (raw or encoded)
/// such a run of at most 20 KiB. Ranges in the findings are offsets from the start of the
/// stream.
///
/// Findings come back from [`push`](Self::push) when a batch is complete, from
/// [`flush`](Self::flush) for what has been pushed so far (but for a few bytes that may
/// still be the start of a secret), and from [`finish`](Self::finish) for the rest.
pub struct StreamScanner {
    buf: Vec<u8>,
    /// The stream offset of `buf[0]`.
    base: usize,
    /// Every finding that ends at or before this stream offset has been returned, but for
    /// those that start at or after `held` (see there).
    done: usize,
    /// Where the first finding held back by the last scan starts (it reached the end of
    /// the buffer): scanned again with more text, it may end earlier than it did (a PEM
    /// block whose END line was cut), before `done`, and must still be returned.
    held: usize,
    /// The findings returned that start at or after `held`: (start, end, pattern).
    recent: Vec<(usize, usize, PatternName)>,
    /// Bytes pushed since the last scan.
    fresh: usize,
    /// The host's patterns, looked for beside the built-in formats.
    host: HostPatterns,
}

impl Default for StreamScanner {
    fn default() -> StreamScanner {
        StreamScanner {
            buf: Vec::new(),
            base: 0,
            done: 0,
            held: usize::MAX,
            recent: Vec::new(),
            fresh: 0,
            host: HostPatterns::default(),
        }
    }
}

impl StreamScanner {
    /// A scanner at stream offset 0, for the built-in formats.
    pub fn new() -> StreamScanner {
        StreamScanner::default()
    }

    /// A scanner at stream offset 0, for the built-in formats and `patterns` (see
    /// [`HostPatterns`] for the longest host match a split stream still finds).
    pub fn with_patterns(patterns: HostPatterns) -> StreamScanner {
        StreamScanner {
            host: patterns,
            ..StreamScanner::default()
        }
    }

    /// Adds `chunk` to the stream; returns the findings of any batch it completed.
    pub fn push(&mut self, mut chunk: &[u8]) -> Vec<Finding> {
        let mut found = Vec::new();
        while !chunk.is_empty() {
            let take = chunk.len().min(BATCH - self.fresh.min(BATCH));
            self.buf.extend_from_slice(&chunk[..take]);
            self.fresh += take;
            chunk = &chunk[take..];
            if self.fresh >= BATCH {
                found.extend(self.scan_buffer(false));
            }
        }
        found
    }

    /// Scans what has been pushed so far; returns the findings not returned before.
    pub fn flush(&mut self) -> Vec<Finding> {
        if self.fresh == 0 {
            return Vec::new();
        }
        self.scan_buffer(false)
    }

    /// Ends the stream; returns the remaining findings.
    pub fn finish(mut self) -> Vec<Finding> {
        self.scan_buffer(true)
    }

    /// The number of bytes pushed so far.
    pub fn position(&self) -> usize {
        self.base + self.buf.len()
    }

    /// The number of bytes held for the next scan: at most 64 KiB plus 24 KiB.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn scan_buffer(&mut self, last: bool) -> Vec<Finding> {
        let len = self.buf.len();
        let close = if last { len } else { len.saturating_sub(HOLD) };
        let mut keep_from = if last {
            len
        } else {
            len.saturating_sub(TAIL).min(pending(&self.buf))
        };
        let mut found = Vec::new();
        let mut held = usize::MAX;
        for mut f in scanner::scan(&self.buf, &self.host) {
            if f.range.end > close {
                keep_from = keep_from.min(f.range.start);
                held = held.min(self.base + f.range.start);
                continue;
            }
            f.range = self.base + f.range.start..self.base + f.range.end;
            let key = (f.range.start, f.range.end, f.pattern.clone());
            if f.range.end <= self.done && (f.range.start < self.held || self.recent.contains(&key))
            {
                continue;
            }
            found.push(f);
        }
        self.done = self.done.max(self.base + close);
        self.held = held;
        self.recent.retain(|r| r.0 >= held);
        self.recent.extend(
            found
                .iter()
                .filter(|f| f.range.start >= held)
                .map(|f| (f.range.start, f.range.end, f.pattern.clone())),
        );
        self.buf.drain(..keep_from);
        self.base += keep_from;
        self.fresh = 0;
        found
    }
}

/// Where the run of [`PENDING_CLASS`] bytes that ends `buf` starts, at most [`PENDING`]
/// bytes back: the start of a secret, raw or encoded, that the next batch may complete.
fn pending(buf: &[u8]) -> usize {
    let floor = buf.len().saturating_sub(PENDING);
    buf[floor..]
        .iter()
        .rposition(|&b| !is(b, PENDING_CLASS))
        .map_or(floor, |k| floor + k + 1)
}

impl fmt::Debug for StreamScanner {
    /// Counts only: the buffer may hold a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamScanner")
            .field("position", &self.position())
            .field("buffered", &self.buf.len())
            .finish()
    }
}

/// Scans `input` to its end and writes one line per finding to `out`; returns whether
/// anything was found. This is `stockade scan [--json]`.
///
/// A line is `pattern encoding start..end fingerprint`, or with `json` one JSON object per
/// line: `{"pattern":"github_token","encoding":"base64","start":120,"end":176,
/// "fingerprint":"1f2e3d4c5b6a7988"}`. Offsets count bytes from the start of `input`. No
/// line contains any part of a secret. Memory stays bounded on unbounded input (see
/// [`StreamScanner`]); lines appear as each 64 KiB batch is scanned.
///
/// The JSON object is [`Finding`]'s `Serialize` form, written without a JSON library: it
/// works the same with the crate's default features off (no `cli`, no serde_json).
///
/// # Errors
///
/// Reading `input` or writing `out` failed.
pub fn scan_stream(input: impl Read, json: bool, out: impl Write) -> io::Result<bool> {
    scan_stream_with(input, &HostPatterns::default(), json, out)
}

/// [`scan_stream`] with the host's `patterns` beside the built-in formats: `stockade scan
/// --pattern NAME=REGEX`, or with `--config`, the policy's `[sandbox.leak]` patterns. A
/// host pattern's findings name it (`acme_key raw 7..44 …`).
///
/// # Errors
///
/// Reading `input` or writing `out` failed.
pub fn scan_stream_with(
    mut input: impl Read,
    patterns: &HostPatterns,
    json: bool,
    mut out: impl Write,
) -> io::Result<bool> {
    let mut scanner = StreamScanner::with_patterns(patterns.clone());
    let mut any = false;
    let mut buf = vec![0u8; BATCH];
    let mut emit = |found: Vec<Finding>, out: &mut dyn Write| -> io::Result<()> {
        for f in found {
            any = true;
            if json {
                f.write_json_line(out)?;
            } else {
                writeln!(out, "{f}")?;
            }
        }
        Ok(())
    };
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        emit(scanner.push(&buf[..n]), &mut out)?;
    }
    emit(scanner.finish(), &mut out)?;
    out.flush()?;
    Ok(any)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::leak::testgen::{ALNUM_CHARS, Gen};

    #[test]
    fn stream_scanner_reports_a_split_secret_once() {
        let mut g = Gen(4);
        let tok = format!("AIza{}", g.pick(ALNUM_CHARS, 35));
        let text = format!("{}key={tok} {}", "a ".repeat(40_000), "b ".repeat(40_000));
        for split in [80_000 + 6, 80_000 + 20, 80_000 + 38] {
            let mut s = StreamScanner::new();
            let mut found = s.push(&text.as_bytes()[..split]);
            found.extend(s.flush());
            found.extend(s.push(&text.as_bytes()[split..]));
            found.extend(s.finish());
            assert_eq!(found.len(), 1, "split {split}: {found:?}");
            assert_eq!(&text[found[0].range.clone()], tok);
        }
    }
}
