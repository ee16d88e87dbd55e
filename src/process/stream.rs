//! [`LineStream`]: a program's output as lines, redacted and scanned before the host sees
//! them, with an optional hold on lines that hold a secret and a cap on the output.
//!
//! The bytes go through the child's [`Redactor`] as a stream (a known secret split across
//! reads is still replaced), then are cut into lines; each line is scanned on its own
//! ([`scan_with`], with the redactor's host patterns) before it is handed out, so in hold mode a line with a finding never reaches the host.
//! The same core serves a blocking reader (an [`Iterator`]) and, with the `tokio` feature,
//! an async one ([`LineStream::next_line`]).

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use memchr::memmem;

use super::{Child, ChildStderr, ChildStdout};
use crate::guard::leak::{Finding, HostPatterns, scan_with};
use crate::guard::redact::{RedactingWriter, Redactor};

/// Default longest line: longer ones are cut into [`LineEnd::Split`] pieces.
pub const DEFAULT_MAX_LINE: usize = 64 * 1024;

/// Bytes read from the pipe at a time.
const READ: usize = 64 * 1024;
/// A piece of a long line ends before a run of token characters (`[A-Za-z0-9+/=_%-]`)
/// at its end when the run is at most this long, so that a token is not cut in two.
const KEEP_RUN: usize = 4 * 1024;
/// Bytes of a split piece scanned again with the next one: more than the longest encoded
/// token (as the stream scanner keeps).
const CONTEXT: usize = 2 * 1024;
/// In hold mode, the most bytes of a private key block (header to `-----END`) gathered
/// before it is judged; longer than any key the scanner accepts.
const PEM_BLOCK: usize = 16 * 1024;

/// How a [`Line`] ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LineEnd {
    /// With a newline, which is the last byte of [`Line::bytes`].
    Newline,
    /// Cut at the stream's longest line ([`LineStream::max_line`]); the line goes on in
    /// the next item.
    Split,
    /// The last bytes of the output, without a newline: the program's output ended, or
    /// the output cap was reached in the middle of a line. In hold mode a line cut by the
    /// cap loses the run of token characters (`[A-Za-z0-9+/=_%-]`, up to 4 KiB) at its
    /// end: the cap may have cut a secret in two, and its first part is too short to be
    /// found.
    Eof,
    /// The marker that the output cap ([`LineStream::max_output`]) was reached: no bytes,
    /// no findings, and the last item. The pipe's read end has been closed, so the program
    /// gets `EPIPE` (or dies of `SIGPIPE`) at its next write.
    Capped,
}

/// One line of a program's output, redacted and scanned.
///
/// Its `Debug` shows the bytes: in hold mode these never hold a finding (see
/// [`LineStream::hold`]); in pass mode they are what the host chose to let through.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Line {
    /// The bytes after redaction, the newline included; empty when [`held`](Self::held)
    /// and for the [`LineEnd::Capped`] marker.
    pub bytes: Vec<u8>,
    /// The secrets the scan ([`scan_with`]) found in this line: pattern, encoding and fingerprint, never
    /// the value. Ranges are offsets in the line's redacted bytes (as if it had not been
    /// held); a finding that began in the piece before a [`LineEnd::Split`] starts at 0.
    /// In hold mode, the findings of a private key block are on its first line.
    pub findings: Vec<Finding>,
    /// Whether the line was withheld: in hold mode, a line with a finding comes with empty
    /// [`bytes`](Self::bytes).
    pub held: bool,
    /// How the line ends.
    pub end: LineEnd,
}

impl Line {
    fn new(bytes: Vec<u8>, end: LineEnd) -> Line {
        Line {
            bytes,
            findings: Vec::new(),
            held: false,
            end,
        }
    }
}

/// A program's stdout or stderr as a stream of [`Line`]s: redacted with the command's
/// [`Redactor`], each line scanned for secrets (the built-in formats and the redactor's
/// [host patterns](Redactor::patterns)) before it is yielded.
///
/// - **Pass** (the default): every line is yielded redacted, its findings beside it.
/// - **Hold** ([`LineStream::hold`]): a line with a finding is *withheld*: it is yielded
///   with empty bytes, `held` set and its findings, and the host never receives its text.
///   The other lines pass unchanged. A private key block (from its `-----BEGIN … PRIVATE
///   KEY-----` line to its `-----END` line) is judged as a whole, so every line of a key
///   found there is held, not only the one where the scanner's match ends.
///
/// A line is decided when its newline arrives, however many reads it took: a token the
/// program writes in two parts, with a pause between them, is still found on its line.
/// Lines longer than [`max_line`](Self::max_line) are cut into pieces (each piece is
/// decided alone, with the end of the piece before it as context; a cut never falls inside
/// a run of token characters shorter than 4 KiB).
///
/// An output cap ([`max_output`](Self::max_output)) is a property of the stream, not of
/// the command: only what the host reads can be counted. Past the cap the stream yields
/// what came before it, then a [`LineEnd::Capped`] marker, closes the read end of the pipe
/// (the program gets `EPIPE` or `SIGPIPE`; the host reads at most one byte past the cap)
/// and ends; [`capped`](Self::capped) tells the host.
///
/// With a blocking reader ([`ChildStdout`], [`ChildStderr`], any [`Read`]) it is an
/// [`Iterator`]; with an async one (the `tokio` feature, the pipes'
/// `into_async`) `next_line` awaits the next line.
///
/// ```no_run
/// # let sandbox = stockade::Sandbox::new(stockade::Policy::with_workspace("/tmp")).unwrap();
/// let mut child = sandbox
///     .command("make")
///     .stdout(stockade::Stdio::piped())
///     .spawn()?;
/// let mut lines = child.stdout_lines().unwrap().hold(true).max_output(1 << 20);
/// for line in &mut lines {
///     let line = line?;
///     if line.held {
///         eprintln!("withheld a line: {:?}", line.findings);
///     }
///     print!("{}", String::from_utf8_lossy(&line.bytes));
/// }
/// if lines.capped() {
///     child.kill()?;
/// }
/// child.wait()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LineStream<R> {
    /// `None` once the output ended or the cap closed it.
    reader: Option<R>,
    /// The redactor, writing into a `Vec` from which lines are cut; `None` at the end.
    redacted: Option<RedactingWriter<Vec<u8>>>,
    /// The redactor's host patterns, which each line is scanned for.
    patterns: HostPatterns,
    hold: bool,
    max_line: usize,
    max_output: Option<u64>,
    /// Bytes read from `reader`.
    read: u64,
    capped: bool,
    /// The end of the last piece when it was a [`LineEnd::Split`], scanned again with the
    /// next.
    context: Vec<u8>,
    /// Hold mode: the lines of a private key block under way.
    block: Vec<Line>,
    ready: VecDeque<Line>,
    buf: Vec<u8>,
}

impl<R> std::fmt::Debug for LineStream<R> {
    /// Counts and settings only: the buffers may hold a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineStream")
            .field("hold", &self.hold)
            .field("max_line", &self.max_line)
            .field("max_output", &self.max_output)
            .field("read", &self.read)
            .field("capped", &self.capped)
            .field("ended", &self.reader.is_none())
            .finish_non_exhaustive()
    }
}

impl<R> LineStream<R> {
    /// Lines of `reader`, redacted with `redactor` (the child's: [`Child::redactor`]), in
    /// pass mode, with lines of at most [`DEFAULT_MAX_LINE`] bytes and no output cap.
    /// Lines are scanned for the redactor's [`patterns`](Redactor::patterns) too.
    pub fn new(reader: R, redactor: Redactor) -> LineStream<R> {
        LineStream {
            patterns: redactor.patterns().clone(),
            reader: Some(reader),
            redacted: Some(RedactingWriter::without_scan(redactor, Vec::new())),
            hold: false,
            max_line: DEFAULT_MAX_LINE,
            max_output: None,
            read: 0,
            capped: false,
            context: Vec::new(),
            block: Vec::new(),
            ready: VecDeque::new(),
            buf: Vec::new(),
        }
    }

    /// Hold mode: a line with a finding is withheld (see [`LineStream`]). Default: off.
    pub fn hold(mut self, on: bool) -> LineStream<R> {
        self.hold = on;
        self
    }

    /// The longest line, newline included, before it is cut into [`LineEnd::Split`]
    /// pieces (at least 1). Default: [`DEFAULT_MAX_LINE`].
    pub fn max_line(mut self, bytes: usize) -> LineStream<R> {
        self.max_line = bytes.max(1);
        self
    }

    /// The output cap: the most bytes read from the program. Past it the stream ends with
    /// a [`LineEnd::Capped`] marker and closes the pipe (see [`LineStream`]). Default:
    /// none.
    pub fn max_output(mut self, bytes: u64) -> LineStream<R> {
        self.max_output = Some(bytes);
        self
    }

    /// Whether the output cap was reached: the program wrote more than
    /// [`max_output`](Self::max_output) bytes, and the rest was not read.
    pub fn capped(&self) -> bool {
        self.capped
    }

    /// The bytes read from the program so far (before redaction).
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// How many bytes the next read may take: up to the cap, then one byte to learn
    /// whether the output goes on past it.
    fn want(&mut self) -> usize {
        if self.buf.len() < READ {
            self.buf.resize(READ, 0);
        }
        match self.max_output {
            Some(cap) => usize::try_from(cap.saturating_sub(self.read))
                .unwrap_or(usize::MAX)
                .clamp(1, READ),
            None => READ,
        }
    }

    /// Takes the `n` bytes a read put in `buf` (0: the end of the output).
    fn accept(&mut self, n: usize) {
        if n == 0 {
            self.reader = None;
            self.finish();
            return;
        }
        let mut take = n;
        if let Some(cap) = self.max_output {
            let left = usize::try_from(cap.saturating_sub(self.read)).unwrap_or(usize::MAX);
            if n > left {
                take = left;
                self.capped = true;
            }
        }
        self.read += take as u64;
        let buf = std::mem::take(&mut self.buf);
        self.push(&buf[..take]);
        self.buf = buf;
        if self.capped {
            // Closing the read end is what makes the program's next write fail.
            self.reader = None;
            self.finish();
            self.ready.push_back(Line::new(Vec::new(), LineEnd::Capped));
        }
    }

    fn push(&mut self, data: &[u8]) {
        if let Some(w) = &mut self.redacted {
            // Writing into a `Vec` cannot fail.
            let _ = w.write_all(data);
        }
        self.cut(false);
    }

    /// Ends the output: the redactor's held bytes, the last line, a pending block.
    fn finish(&mut self) {
        self.cut(false);
        if let Some(w) = self.redacted.take() {
            if let Ok((rest, _)) = w.finish() {
                let mut rest = rest;
                self.cut_from(&mut rest, true);
            }
        }
        self.flush_block();
    }

    fn cut(&mut self, last: bool) {
        let Some(w) = &mut self.redacted else {
            return;
        };
        let mut out = std::mem::take(w.get_mut());
        self.cut_from(&mut out, last);
        if let Some(w) = &mut self.redacted {
            *w.get_mut() = out;
        }
    }

    /// Cuts the complete lines (all of `out` when `last`) from the front of `out`.
    fn cut_from(&mut self, out: &mut Vec<u8>, last: bool) {
        let mut at = 0;
        loop {
            let rest = &out[at..];
            let lim = rest.len().min(self.max_line);
            let (len, end) = if let Some(i) = memchr::memchr(b'\n', &rest[..lim]) {
                (i + 1, LineEnd::Newline)
            } else if rest.len() >= self.max_line {
                (split_point(&rest[..self.max_line]), LineEnd::Split)
            } else if last && !rest.is_empty() {
                (rest.len(), LineEnd::Eof)
            } else {
                break;
            };
            let mut line = rest[..len].to_vec();
            at += len;
            if end == LineEnd::Eof && self.capped && self.hold {
                // The cap may have cut a token in two: its first part, too short for the
                // scanner, is dropped with the rest the program did not get to write.
                let run = token_run(&line);
                if run <= KEEP_RUN {
                    line.truncate(line.len() - run);
                }
            }
            self.line(Line::new(line, end));
        }
        out.drain(..at);
    }

    /// Decides one line, or adds it to the private key block under way.
    fn line(&mut self, line: Line) {
        if !self.hold {
            self.judge(line);
            return;
        }
        if !self.block.is_empty() {
            let ends = memmem::find(&line.bytes, b"-----END ").is_some();
            self.block.push(line);
            let size: usize = self.block.iter().map(|l| l.bytes.len()).sum();
            if ends || size >= PEM_BLOCK {
                self.flush_block();
            }
        } else if memmem::find(&line.bytes, b"-----BEGIN ").is_some()
            && memmem::find(&line.bytes, b"PRIVATE KEY").is_some()
        {
            self.block.push(line);
        } else {
            self.judge(line);
        }
    }

    /// Judges a private key block as a whole: every line held when the block holds a
    /// finding, else each line on its own.
    fn flush_block(&mut self) {
        if self.block.is_empty() {
            return;
        }
        let block = std::mem::take(&mut self.block);
        let whole: Vec<u8> = block.iter().flat_map(|l| l.bytes.iter().copied()).collect();
        let found = scan_with(&whole, &self.patterns);
        if found.is_empty() {
            for line in block {
                self.judge(line);
            }
            return;
        }
        self.context.clear();
        for (i, mut line) in block.into_iter().enumerate() {
            if i == 0 {
                line.findings.clone_from(&found);
            }
            line.bytes.clear();
            line.held = true;
            self.ready.push_back(line);
        }
    }

    /// Scans one line (with the end of the piece before it, when that was split off it)
    /// and queues it, withheld in hold mode when it holds a finding.
    fn judge(&mut self, mut line: Line) {
        let ctx = self.context.len();
        let findings = if ctx == 0 {
            scan_with(&line.bytes, &self.patterns)
        } else {
            let mut hay = std::mem::take(&mut self.context);
            hay.extend_from_slice(&line.bytes);
            scan_with(&hay, &self.patterns)
                .into_iter()
                .filter(|f| f.range.end > ctx)
                .map(|mut f| {
                    f.range = f.range.start.saturating_sub(ctx)..f.range.end - ctx;
                    f
                })
                .collect()
        };
        self.context.clear();
        if line.end == LineEnd::Split {
            let from = line.bytes.len().saturating_sub(CONTEXT);
            self.context.extend_from_slice(&line.bytes[from..]);
        }
        if self.hold && !findings.is_empty() {
            line.bytes.clear();
            line.held = true;
        }
        line.findings = findings;
        self.ready.push_back(line);
    }
}

/// The length of the run of token characters (`[A-Za-z0-9+/=_%-]`) at the end of `bytes`.
fn token_run(bytes: &[u8]) -> usize {
    let token = |b: &u8| b.is_ascii_alphanumeric() || b"+/=_%-".contains(b);
    bytes.iter().rev().take_while(|b| token(b)).count()
}

/// Where to cut a piece of `max` bytes of a long line: before the run of token characters
/// at its end, when that run is short enough to be one token and leaves half the piece.
fn split_point(piece: &[u8]) -> usize {
    let run = token_run(piece);
    if run > 0 && run <= KEEP_RUN && run <= piece.len() / 2 {
        piece.len() - run
    } else {
        piece.len()
    }
}

impl<R: Read> Iterator for LineStream<R> {
    type Item = io::Result<Line>;

    /// The next line; blocks until it is complete (or the output ends, or the cap is
    /// reached). An error of the read is returned as is; the stream may be read again.
    fn next(&mut self) -> Option<io::Result<Line>> {
        loop {
            if let Some(line) = self.ready.pop_front() {
                return Some(Ok(line));
            }
            let want = self.want();
            let reader = self.reader.as_mut()?;
            match reader.read(&mut self.buf[..want]) {
                Ok(n) => self.accept(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(feature = "tokio")]
impl<R: tokio::io::AsyncRead + Unpin> LineStream<R> {
    /// The next line, awaited; `None` at the end of the output (after the
    /// [`LineEnd::Capped`] marker when the cap was reached).
    ///
    /// Cancel safe: a line is queued only once it is complete, and a read that was not
    /// completed has taken no bytes, so dropping this future loses nothing.
    ///
    /// # Errors
    ///
    /// The error of the read, as is; the stream may be read again.
    pub async fn next_line(&mut self) -> io::Result<Option<Line>> {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(line) = self.ready.pop_front() {
                return Ok(Some(line));
            }
            let want = self.want();
            let Some(reader) = self.reader.as_mut() else {
                return Ok(None);
            };
            match reader.read(&mut self.buf[..want]).await {
                Ok(n) => self.accept(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Child {
    /// The program's piped stdout as a [`LineStream`] redacted with this child's
    /// [`redactor`](Child::redactor) (pass mode, no cap: set them on the stream); `None`
    /// when stdout was not piped or was taken.
    pub fn stdout_lines(&mut self) -> Option<LineStream<ChildStdout>> {
        let out = self.stdout.take()?;
        Some(LineStream::new(out, self.redactor.clone()))
    }

    /// The program's piped stderr as a [`LineStream`], as [`Child::stdout_lines`].
    pub fn stderr_lines(&mut self) -> Option<LineStream<ChildStderr>> {
        let err = self.stderr.take()?;
        Some(LineStream::new(err, self.redactor.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gh_token() -> String {
        // Built at run time, so that no scanner flags this source file.
        format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O50Zb5Hm")
    }

    fn lines(input: &[&[u8]], f: impl Fn(LineStream<Chunks>) -> LineStream<Chunks>) -> Vec<Line> {
        let chunks = Chunks(input.iter().map(|c| c.to_vec()).collect());
        f(LineStream::new(chunks, Redactor::default()))
            .collect::<io::Result<Vec<Line>>>()
            .unwrap()
    }

    /// A reader that returns one chunk per read.
    struct Chunks(VecDeque<Vec<u8>>);

    impl Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some(mut c) = self.0.pop_front() else {
                return Ok(0);
            };
            let n = c.len().min(buf.len());
            buf[..n].copy_from_slice(&c[..n]);
            if n < c.len() {
                c.drain(..n);
                self.0.push_front(c);
            }
            Ok(n)
        }
    }

    #[test]
    fn hold_withholds_a_token_split_across_reads() {
        let tok = gh_token();
        let (a, b) = tok.as_bytes().split_at(10);
        let out = lines(&[b"one\ntoken ", a, b, b" end\ntwo\n"], |s| s.hold(true));
        let bytes: Vec<&[u8]> = out.iter().map(|l| l.bytes.as_slice()).collect();
        assert_eq!(bytes, [&b"one\n"[..], b"", b"two\n"]);
        assert!(out[1].held && !out[0].held && !out[2].held);
        assert_eq!(out[1].findings.len(), 1);
        assert_eq!(out[1].findings[0].pattern, "github_token");
        assert_eq!(out[1].findings[0].range, 6..6 + tok.len());
    }

    #[test]
    fn pass_yields_the_line_with_its_finding() {
        let tok = gh_token();
        let line = format!("token {tok}\n");
        let out = lines(&[line.as_bytes()], |s| s);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].bytes, line.as_bytes());
        assert!(!out[0].held);
        assert_eq!(out[0].findings[0].pattern, "github_token");
    }

    #[test]
    fn known_secrets_are_redacted_across_reads() {
        let secret = format!("s3cr3t-{}", "value-0042");
        let (a, b) = secret.as_bytes().split_at(4);
        let chunks = Chunks([b"x ".to_vec(), a.to_vec(), b.to_vec(), b" y\n".to_vec()].into());
        let out: Vec<Line> = LineStream::new(chunks, Redactor::new([&secret]))
            .collect::<io::Result<_>>()
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].bytes, b"x [REDACTED] y\n");
    }

    #[test]
    fn long_lines_are_split_before_a_token() {
        let tok = gh_token();
        let line = format!("{} {tok} tail", "a ".repeat(50));
        let out = lines(&[line.as_bytes()], |s| s.max_line(120).hold(true));
        assert_eq!(
            out.iter().map(|l| l.end).collect::<Vec<_>>(),
            [LineEnd::Split, LineEnd::Eof]
        );
        assert_eq!(out[0].bytes, format!("{} ", "a ".repeat(50)).as_bytes());
        assert!(out[1].held, "{out:?}");
        assert!(!out[0].held);
    }

    #[test]
    fn a_private_key_block_is_held_whole() {
        let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj";
        let text = format!(
            "before\n-----BEGIN PRIVATE KEY-----\n{body}\n{body}\n-----END PRIVATE KEY-----\nafter\n"
        );
        let out = lines(&[text.as_bytes()], |s| s.hold(true));
        let held: Vec<bool> = out.iter().map(|l| l.held).collect();
        assert_eq!(held, [false, true, true, true, true, false], "{out:?}");
        assert_eq!(out[1].findings[0].pattern, "private_key");
        assert_eq!(out[5].bytes, b"after\n");
    }

    #[test]
    fn the_cap_ends_the_stream_with_a_marker() {
        let out = lines(&[&[b'y', b'\n'].repeat(100)], |s| s.max_output(11));
        let n = out.len();
        assert_eq!(out[n - 1].end, LineEnd::Capped);
        assert_eq!(out[n - 2].bytes, b"y");
        assert_eq!(out[n - 2].end, LineEnd::Eof);
        let total: usize = out.iter().map(|l| l.bytes.len()).sum();
        assert_eq!(total, 11);
        // In hold mode a token cut by the cap is dropped, not yielded in part.
        let tok = gh_token();
        let text = format!("a\nkey {tok}\n");
        let out = lines(&[text.as_bytes()], |s| s.hold(true).max_output(20));
        let bytes: Vec<&[u8]> = out.iter().map(|l| l.bytes.as_slice()).collect();
        assert_eq!(bytes, [&b"a\n"[..], b"key ", b""], "{out:?}");
        let out = lines(&[text.as_bytes()], |s| s.max_output(20));
        assert_eq!(
            out[1].bytes,
            &text.as_bytes()[2..20],
            "pass mode yields every byte"
        );
        // Exactly the cap is not past it.
        let out = lines(&[&[b'y', b'\n'].repeat(5)], |s| s.max_output(10));
        assert!(out.iter().all(|l| l.end == LineEnd::Newline), "{out:?}");
    }
}
