//! The HTTP/1.1 request head a sandboxed program sends to the proxy, parsed with `httparse`
//! under fixed bounds, and the head the proxy sends upstream in its place.
//!
//! Two requests are served: an absolute-form forward request (`GET http://host[:port]/path
//! HTTP/1.1`), rewritten to origin-form with the hop-by-hop and `Proxy-*` headers dropped,
//! `Host` set to the target's authority and `Connection: close` forced; and `CONNECT
//! host:port` (authority-form only). Anything that two parsers could read differently is
//! refused: bare CR or LF, obs-fold, a `Transfer-Encoding` other than one `chunked` (or with
//! a `Content-Length`, or in HTTP/1.0), a repeated or non-numeric `Content-Length`, a
//! repeated `Host`.
//!
//! A request body is forwarded by its `Content-Length`, or read through [`Chunked`], which
//! follows the chunk framing byte by byte under fixed bounds and says where the body ends:
//! nothing after it reaches upstream.

use url::{Host, Url};

/// The longest request head the proxy reads, terminator included.
pub const MAX_HEAD: usize = 16 * 1024;
/// The most header fields a request head may have.
pub const MAX_HEADERS: usize = 100;

/// A request the proxy can decide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// An absolute-form `http://` request to forward.
    Forward(Forward),
    /// `CONNECT host:port`: a tunnel.
    Connect {
        /// The host as written (an IPv6 address without its brackets).
        host: String,
        /// The port.
        port: u16,
    },
}

/// A forward request: where it goes and what to send there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forward {
    /// The target host (normalized by the URL parser; IPv6 without brackets).
    pub host: String,
    /// The target port (80 when the URL has none).
    pub port: u16,
    /// The head to send upstream: origin-form, `Host` and `Connection: close` set.
    pub head: Vec<u8>,
    /// The request body: the proxy forwards exactly that body after the head and nothing
    /// more from the client.
    pub body: Body,
}

/// How long a forwarded request's body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// `Content-Length` bytes (0 without one).
    Length(u64),
    /// `Transfer-Encoding: chunked`: up to the end of the framing, as [`Chunked`] reads it.
    Chunked,
}

/// A request head the proxy refuses, with the status it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// 400: malformed, oversized or ambiguous (smuggling) heads; the reason.
    BadRequest(&'static str),
    /// 405: a method other than `CONNECT` on an authority-form target.
    MethodNotAllowed,
    /// 501: a target the proxy does not serve (origin-form, `*`, a scheme other than
    /// `http`).
    NotImplemented(&'static str),
}

impl HeadError {
    /// The status code and reason phrase to answer.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            HeadError::BadRequest(_) => (400, "Bad Request"),
            HeadError::MethodNotAllowed => (405, "Method Not Allowed"),
            HeadError::NotImplemented(_) => (501, "Not Implemented"),
        }
    }

    /// Why, in a few words.
    pub fn reason(&self) -> &'static str {
        match self {
            HeadError::BadRequest(r) | HeadError::NotImplemented(r) => r,
            HeadError::MethodNotAllowed => "only CONNECT takes a host:port target",
        }
    }
}

/// The length of the head at the start of `buf` (up to and including the first
/// `\r\n\r\n`), if it is all there.
pub fn head_len(buf: &[u8]) -> Option<usize> {
    head_len_after(buf, 0)
}

/// [`head_len`] where the first `scanned` bytes of `buf` are known to hold no blank line:
/// only the rest (and the three bytes before it, which may start one) is searched, so a
/// head that arrives a byte at a time costs a linear scan, not a quadratic one.
pub fn head_len_after(buf: &[u8], scanned: usize) -> Option<usize> {
    let from = scanned.saturating_sub(3).min(buf.len());
    buf[from..]
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| from + i + 4)
}

/// Headers dropped on the way upstream (lowercase), besides `proxy-*` and the names the
/// request's `Connection` header lists.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

/// Parses a complete request head (as [`head_len`] delimits it).
///
/// # Errors
///
/// The [`HeadError`] to answer.
pub fn parse_head(head: &[u8]) -> Result<Request, HeadError> {
    let bad = HeadError::BadRequest;
    if head.len() > MAX_HEAD {
        return Err(bad("the request head is too large"));
    }
    if !head.ends_with(b"\r\n\r\n") {
        return Err(bad("the request head is incomplete"));
    }
    for (i, &b) in head.iter().enumerate() {
        let lone_cr = b == b'\r' && head.get(i + 1) != Some(&b'\n');
        let lone_lf = b == b'\n' && (i == 0 || head[i - 1] != b'\r');
        if lone_cr || lone_lf {
            return Err(bad("a bare CR or LF in the head"));
        }
        if b == 0 {
            return Err(bad("a NUL byte in the head"));
        }
        if b == b'\n' && i + 1 < head.len() && matches!(head[i + 1], b' ' | b'\t') {
            return Err(bad("a folded header line (obs-fold)"));
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        Ok(_) => return Err(bad("the request head does not parse")),
        Err(httparse::Error::TooManyHeaders) => return Err(bad("too many header fields")),
        Err(_) => return Err(bad("the request head does not parse")),
    }
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Err(bad("the request line does not parse"));
    };
    let mut content_length = None;
    let mut chunked = false;
    let mut hosts = 0;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if chunked {
                return Err(bad("a repeated Transfer-Encoding"));
            }
            if !h.value.eq_ignore_ascii_case(b"chunked") {
                return Err(bad("a Transfer-Encoding other than chunked"));
            }
            chunked = true;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            if content_length.is_some() {
                return Err(bad("a repeated Content-Length"));
            }
            let v = h.value;
            if v.is_empty() || v.len() > 15 || !v.iter().all(u8::is_ascii_digit) {
                return Err(bad("a Content-Length that is not a number"));
            }
            content_length = Some(v.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')));
        }
        if h.name.eq_ignore_ascii_case("host") {
            hosts += 1;
        }
    }
    if hosts > 1 {
        return Err(bad("a repeated Host"));
    }
    if chunked && content_length.is_some() {
        return Err(bad("both Transfer-Encoding and Content-Length"));
    }
    if chunked && req.version != Some(1) {
        return Err(bad("Transfer-Encoding in an HTTP/1.0 request"));
    }
    if chunked && method == "CONNECT" {
        return Err(bad("a CONNECT with a body"));
    }
    if method == "CONNECT" {
        let (host, port) = authority(target).ok_or(bad("CONNECT needs a host:port target"))?;
        return Ok(Request::Connect { host, port });
    }
    if target.starts_with('/') || target == "*" {
        return Err(HeadError::NotImplemented(
            "not a proxy request (origin-form target)",
        ));
    }
    if !target.contains("://") {
        return if authority(target).is_some() {
            Err(HeadError::MethodNotAllowed)
        } else {
            Err(bad("the request target does not parse"))
        };
    }
    let url = Url::parse(target).map_err(|_| bad("the request target does not parse"))?;
    if url.scheme() != "http" {
        return Err(HeadError::NotImplemented(
            "only http:// is forwarded; use CONNECT",
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials in the request target"));
    }
    let (host, host_str) = match url.host() {
        Some(Host::Domain(d)) => (d.to_string(), d.to_string()),
        Some(Host::Ipv4(ip)) => (ip.to_string(), ip.to_string()),
        Some(Host::Ipv6(ip)) => (ip.to_string(), format!("[{ip}]")),
        None => return Err(bad("no host in the request target")),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let authority = match url.port() {
        Some(p) => format!("{host_str}:{p}"),
        None => host_str,
    };
    let listed: Vec<String> = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| h.value.split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(t).trim().to_ascii_lowercase())
        .collect();
    let mut out = Vec::with_capacity(head.len() + 64);
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(url.path().as_bytes());
    if let Some(q) = url.query() {
        out.push(b'?');
        out.extend_from_slice(q.as_bytes());
    }
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&name.as_str())
            || name.starts_with("proxy-")
            || listed.contains(&name)
        {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if let Some(n) = content_length {
        out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes());
    }
    if chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request::Forward(Forward {
        host,
        port,
        head: out,
        body: if chunked {
            Body::Chunked
        } else {
            Body::Length(content_length.unwrap_or(0))
        },
    }))
}

/// Reads an authority-form target, `host:port` or `[v6]:port`, with a port from 1 to
/// 65535 in plain digits. The host is returned as written (brackets removed); the
/// allowlist normalizes it.
pub fn authority(target: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = target.strip_prefix('[') {
        let (h, p) = rest.split_once("]:")?;
        h.parse::<std::net::Ipv6Addr>().ok()?;
        (h, p)
    } else {
        let (h, p) = target.split_once(':')?;
        if h.is_empty() || h.contains(['[', ']', '/', '@', '?', '#', '\\']) {
            return None;
        }
        (h, p)
    };
    if p_bad(port) {
        return None;
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => None,
        Ok(p) => Some((host.to_string(), p)),
    }
}

fn p_bad(port: &str) -> bool {
    port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit())
}

/// The longest chunk-size line (size, extensions, CRLF).
pub const MAX_CHUNK_LINE: usize = 4096;
/// The most hex digits of a chunk size (leading zeros included): sizes stay below 2^60,
/// far from where another parser's arithmetic could wrap.
pub const MAX_CHUNK_DIGITS: u8 = 15;
/// The longest trailer section (its fields and the final CRLF).
pub const MAX_TRAILERS: usize = MAX_HEAD;

/// Where a chunked request body ends, read as it streams from the client (RFC 9112
/// section 7.1), strictly: a size in 1 to [`MAX_CHUNK_DIGITS`] hex digits, extensions
/// `;name[=token|"quoted"]` with no whitespace, every line ended by CRLF (no bare CR or
/// LF, no control byte), each chunk's data followed by CRLF, trailer fields as `name:
/// value` lines without folding, at most [`MAX_HEADERS`] of them and none that frames or
/// routes a message (`Content-Length`, `Transfer-Encoding`, `Host`, `Connection`, `TE`,
/// `Trailer`, `Proxy-*`).
///
/// The proxy sends the body upstream byte for byte as the client wrote it, up to the
/// CRLF that ends the trailer section, and nothing after it.
#[derive(Clone, Debug, Default)]
pub struct Chunked {
    state: ChunkState,
    /// Bytes of the current chunk-size line so far.
    line: usize,
    /// Bytes of the trailer section so far.
    trailers: usize,
    /// Trailer fields so far.
    fields: usize,
    /// The current trailer field's name, lowercase, up to 32 bytes (enough to tell the
    /// refused names).
    name: Vec<u8>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ChunkState {
    /// In the size's hex digits: how many so far, and the value.
    #[default]
    SizeStart,
    Size {
        digits: u8,
        size: u64,
    },
    /// After `;`: an extension name must follow.
    ExtStart {
        size: u64,
    },
    ExtName {
        size: u64,
    },
    /// After `=`: a token or a quoted string.
    ExtValueStart {
        size: u64,
    },
    ExtToken {
        size: u64,
    },
    ExtQuoted {
        size: u64,
    },
    ExtEscape {
        size: u64,
    },
    ExtQuoteEnd {
        size: u64,
    },
    /// A CR ended the size line; LF must follow.
    SizeLf {
        size: u64,
    },
    Data {
        left: u64,
    },
    DataCr,
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    TrailerStart,
    TrailerName,
    TrailerValue,
    TrailerLf,
    EndLf,
    Done,
}

/// Why a chunked body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for ChunkError {}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A field value's byte: HTAB, SP, VCHAR, obs-text.
fn is_field_byte(b: u8) -> bool {
    b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80
}

/// Trailer fields refused (lowercase), besides `proxy-*`.
const FRAMING: &[&[u8]] = &[
    b"content-length",
    b"transfer-encoding",
    b"host",
    b"connection",
    b"te",
    b"trailer",
];

impl Chunked {
    /// A body not yet started.
    pub fn new() -> Chunked {
        Chunked::default()
    }

    /// Whether the body has ended (the CRLF after the trailer section was read).
    pub fn done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Reads `input`, the next bytes from the client, and returns how many of them belong
    /// to the body: all of them until the body ends, then the length up to its end (the
    /// rest is not forwarded). Once done, always 0.
    ///
    /// # Errors
    ///
    /// The framing is malformed or over a bound; the body must not be forwarded further.
    pub fn feed(&mut self, input: &[u8]) -> Result<usize, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            if let ChunkState::Data { left } = self.state {
                let n = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .min(input.len() - i);
                i += n;
                let left = left - n as u64;
                self.state = if left == 0 {
                    ChunkState::DataCr
                } else {
                    ChunkState::Data { left }
                };
                continue;
            }
            if self.state == ChunkState::Done {
                return Ok(i);
            }
            self.step(input[i])?;
            i += 1;
        }
        Ok(i)
    }

    /// One byte outside chunk data.
    fn step(&mut self, b: u8) -> Result<(), ChunkError> {
        use ChunkState as S;
        let err = |why| Err(ChunkError(why));
        let in_size_line = matches!(
            self.state,
            S::SizeStart
                | S::Size { .. }
                | S::ExtStart { .. }
                | S::ExtName { .. }
                | S::ExtValueStart { .. }
                | S::ExtToken { .. }
                | S::ExtQuoted { .. }
                | S::ExtEscape { .. }
                | S::ExtQuoteEnd { .. }
                | S::SizeLf { .. }
        );
        if in_size_line {
            self.line += 1;
            if self.line > MAX_CHUNK_LINE {
                return err("a chunk-size line is too long");
            }
        }
        let in_trailers = matches!(
            self.state,
            S::TrailerStart | S::TrailerName | S::TrailerValue | S::TrailerLf | S::EndLf
        );
        if in_trailers {
            self.trailers += 1;
            if self.trailers > MAX_TRAILERS {
                return err("the trailer section is too large");
            }
        }
        self.state = match (self.state, b) {
            (S::SizeStart, b) => match hex(b) {
                Some(d) => S::Size {
                    digits: 1,
                    size: u64::from(d),
                },
                None => return err("a chunk size is not hexadecimal"),
            },
            (S::Size { digits, size }, b) => match (hex(b), b) {
                (Some(_), _) if digits == MAX_CHUNK_DIGITS => {
                    return err("a chunk size has too many digits");
                }
                (Some(d), _) => S::Size {
                    digits: digits + 1,
                    size: size << 4 | u64::from(d),
                },
                (None, b';') => S::ExtStart { size },
                (None, b'\r') => S::SizeLf { size },
                _ => return err("a chunk size is not hexadecimal"),
            },
            (S::ExtStart { size }, b) if is_tchar(b) => S::ExtName { size },
            (S::ExtName { size }, b) if is_tchar(b) => S::ExtName { size },
            (S::ExtName { size } | S::ExtToken { size } | S::ExtQuoteEnd { size }, b';') => {
                S::ExtStart { size }
            }
            (S::ExtName { size } | S::ExtToken { size } | S::ExtQuoteEnd { size }, b'\r') => {
                S::SizeLf { size }
            }
            (S::ExtName { size }, b'=') => S::ExtValueStart { size },
            (S::ExtValueStart { size } | S::ExtToken { size }, b) if is_tchar(b) => {
                S::ExtToken { size }
            }
            (S::ExtValueStart { size }, b'"') => S::ExtQuoted { size },
            (S::ExtQuoted { size }, b'"') => S::ExtQuoteEnd { size },
            (S::ExtQuoted { size }, b'\\') => S::ExtEscape { size },
            (S::ExtQuoted { size } | S::ExtEscape { size }, b) if is_field_byte(b) => {
                S::ExtQuoted { size }
            }
            (
                S::ExtStart { .. }
                | S::ExtName { .. }
                | S::ExtValueStart { .. }
                | S::ExtToken { .. }
                | S::ExtQuoted { .. }
                | S::ExtEscape { .. }
                | S::ExtQuoteEnd { .. },
                _,
            ) => return err("a malformed chunk extension"),
            (S::SizeLf { size }, b'\n') => {
                self.line = 0;
                if size == 0 {
                    S::TrailerStart
                } else {
                    S::Data { left: size }
                }
            }
            (S::SizeLf { .. }, _) => return err("a chunk-size line without CRLF"),
            (S::DataCr, b'\r') => S::DataLf,
            (S::DataLf, b'\n') => S::SizeStart,
            (S::DataCr | S::DataLf, _) => return err("chunk data not followed by CRLF"),
            (S::TrailerStart, b'\r') => S::EndLf,
            (S::TrailerStart, b) if is_tchar(b) => {
                self.fields += 1;
                if self.fields > MAX_HEADERS {
                    return err("too many trailer fields");
                }
                self.name.clear();
                self.name.push(b.to_ascii_lowercase());
                S::TrailerName
            }
            (S::TrailerStart, _) => return err("a malformed trailer field"),
            (S::TrailerName, b) if is_tchar(b) => {
                if self.name.len() < 32 {
                    self.name.push(b.to_ascii_lowercase());
                }
                S::TrailerName
            }
            (S::TrailerName, b':') => {
                if FRAMING.contains(&self.name.as_slice()) || self.name.starts_with(b"proxy-") {
                    return err("a trailer field that frames or routes the message");
                }
                S::TrailerValue
            }
            (S::TrailerName, _) => return err("a malformed trailer field"),
            (S::TrailerValue, b'\r') => S::TrailerLf,
            (S::TrailerValue, b) if is_field_byte(b) => S::TrailerValue,
            (S::TrailerValue, _) => return err("a control byte in a trailer field"),
            (S::TrailerLf, b'\n') => S::TrailerStart,
            (S::EndLf, b'\n') => S::Done,
            (S::TrailerLf | S::EndLf, _) => return err("a trailer line without CRLF"),
            // `feed` takes chunk data in bulk and stops at the end.
            (S::Data { .. } | S::Done, _) => return err("a byte outside the body's framing"),
        };
        Ok(())
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fwd(head: &str) -> Forward {
        match parse_head(head.as_bytes()) {
            Ok(Request::Forward(f)) => f,
            other => panic!("{head:?}: {other:?}"),
        }
    }

    #[test]
    fn forward_is_rewritten_to_origin_form() {
        let f = fwd(
            "GET http://Example.COM:8080/a/b?c=d#frag HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\nUpgrade: h2c\r\nAccept: */*\r\nContent-Length: 3\r\n\r\n",
        );
        assert_eq!(
            (f.host.as_str(), f.port, f.body),
            ("example.com", 8080, Body::Length(3))
        );
        assert_eq!(
            String::from_utf8(f.head).unwrap(),
            "GET /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
        );
        let f = fwd("GET http://[::1]/ HTTP/1.0\r\n\r\n");
        assert_eq!(
            (f.host.as_str(), f.port, f.body),
            ("::1", 80, Body::Length(0))
        );
        assert!(f.head.starts_with(b"GET / HTTP/1.1\r\nHost: [::1]\r\n"));
        assert_eq!(fwd("GET http://0x7f.1/ HTTP/1.1\r\n\r\n").host, "127.0.0.1");
    }

    #[test]
    fn connect_takes_authority_form_only() {
        let c =
            |s: &str| parse_head(format!("CONNECT {s} HTTP/1.1\r\nHost: {s}\r\n\r\n").as_bytes());
        assert_eq!(
            c("github.com:443"),
            Ok(Request::Connect {
                host: "github.com".into(),
                port: 443
            })
        );
        assert_eq!(
            c("[::1]:22"),
            Ok(Request::Connect {
                host: "::1".into(),
                port: 22
            })
        );
        for bad in [
            "github.com",
            "github.com:0",
            "github.com:65536",
            "github.com:+443",
            "http://github.com:443/",
            "a@github.com:443",
            "[::1:22",
            "[x]:22",
            ":443",
            "github.com:443:1",
        ] {
            assert_eq!(
                c(bad),
                Err(HeadError::BadRequest("CONNECT needs a host:port target")),
                "{bad}"
            );
        }
    }

    #[test]
    fn refusals_and_their_status() {
        let p = |s: &str| parse_head(s.as_bytes()).map_err(|e| e.status().0);
        assert_eq!(p("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Err(501));
        assert_eq!(p("OPTIONS * HTTP/1.1\r\n\r\n"), Err(501));
        assert_eq!(p("GET github.com:443 HTTP/1.1\r\n\r\n"), Err(405));
        assert_eq!(p("GET https://github.com/ HTTP/1.1\r\n\r\n"), Err(501));
        assert_eq!(p("GET http://u:p@github.com/ HTTP/1.1\r\n\r\n"), Err(400));
        for smuggle in [
            "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST http://a.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            "CONNECT a.test:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nContent-Length: +3\r\n\r\n",
            "POST http://a.test/ HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\nX: a\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nX: \0\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\nX : a\r\n\r\n",
            "GET  http://a.test/ HTTP/1.1\r\n\r\n",
            "GET http://a.test/ HTTP/1.1\r\n\r\nextra",
            "GET http://a.test/ HTTP/1.1\r\n",
            "GET http://a b/ HTTP/1.1\r\n\r\n",
            "\r\n\r\n",
        ] {
            assert_eq!(p(smuggle), Err(400), "{smuggle:?}");
        }
        let many = format!(
            "GET http://a.test/ HTTP/1.1\r\n{}\r\n",
            "X: y\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(p(&many), Err(400));
        let big = format!(
            "GET http://a.test/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "y".repeat(MAX_HEAD)
        );
        assert_eq!(p(&big), Err(400));
    }

    #[test]
    fn chunked_head_is_forwarded_with_its_framing() {
        let f = fwd(
            "POST http://a.test/up HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nTrailer: x\r\nTE: trailers\r\n\r\n",
        );
        assert_eq!(f.body, Body::Chunked);
        assert_eq!(
            String::from_utf8(f.head).unwrap(),
            "POST /up HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
    }

    /// The body's length in `input` fed in one piece, and fed byte by byte (the same).
    fn body(input: &[u8]) -> Result<(usize, bool), ChunkError> {
        let mut one = Chunked::new();
        let n = one.feed(input)?;
        let mut split = Chunked::new();
        let mut m = 0;
        for b in input {
            m += split.feed(std::slice::from_ref(b))?;
        }
        assert_eq!((n, one.done()), (m, split.done()), "{input:?}");
        Ok((n, one.done()))
    }

    #[test]
    fn chunked_body_ends_where_its_framing_ends() {
        let ok: &[(&[u8], usize)] = &[
            (b"0\r\n\r\n", 5),
            (b"5\r\nhello\r\n0\r\n\r\n", 15),
            (
                b"5\r\nhello\r\n0\r\n\r\nGET http://b.test/ HTTP/1.1\r\n\r\n",
                15,
            ),
            (b"A\r\n0123456789\r\n00\r\n\r\nX", 21),
            (
                b"3;a=b;c=\"d;\\\"e\";f\r\nabc\r\n0;g\r\nX-T: 1\r\nY:\r\n\r\nrest",
                43,
            ),
            (b"000000000000003\r\nabc\r\n0\r\n\r\n", 27),
        ];
        for (input, n) in ok {
            assert_eq!(
                body(input),
                Ok((*n, true)),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        // A body that has not ended yet takes all it is given.
        assert_eq!(body(b"5\r\nhel"), Ok((6, false)));
        assert_eq!(body(b"5\r\nhello\r\n0\r\nX: y\r\n"), Ok((19, false)));
        let mut c = Chunked::new();
        assert_eq!(c.feed(b"1\r\na\r\n0\r\n\r\n"), Ok(11));
        assert_eq!(c.feed(b"more"), Ok(0));
    }

    #[test]
    fn chunked_smuggling_and_bounds_are_refused() {
        let long_ext = format!("1;{}\r\na\r\n0\r\n\r\n", "x".repeat(MAX_CHUNK_LINE));
        let many = format!("0\r\n{}\r\n", "X: y\r\n".repeat(MAX_HEADERS + 1));
        let big = format!("0\r\nX: {}\r\n\r\n", "y".repeat(MAX_TRAILERS));
        let bad: Vec<&[u8]> = vec![
            b"\r\n",
            b"-1\r\n",
            b"+5\r\nhello\r\n",
            b"0x5\r\nhello\r\n",
            b"5 \r\nhello\r\n",
            b" 5\r\nhello\r\n",
            b"5\t\r\nhello\r\n",
            b"5\nhello\r\n",
            b"5\rhello\r\n",
            b"5\r\nhello\n0\r\n\r\n",
            b"5\r\nhelloX\r\n",
            b"5\r\nhello\r\r\n",
            b"1000000000000000\r\n",
            b"ffffffffffffffff\r\n",
            b"5 ;a\r\nhello\r\n",
            b"5; a\r\nhello\r\n",
            b"5;\r\nhello\r\n",
            b"5;a =b\r\nhello\r\n",
            b"5;a=\r\nhello\r\n",
            b"5;a=\"b\r\nhello\r\n",
            b"5;a=\"b\nc\"\r\nhello\r\n",
            b"5;a\nb\r\nhello\r\n",
            b"5;a\0\r\nhello\r\n",
            b"5;a=\"b\"c\r\nhello\r\n",
            b"0\r\n\n",
            b"0\r\nX: y\n\r\n",
            b"0\r\n X: y\r\n\r\n",
            b"0\r\nX : y\r\n\r\n",
            b"0\r\n: y\r\n\r\n",
            b"0\r\nX: y\rz\r\n\r\n",
            b"0\r\nX: \0\r\n\r\n",
            b"0\r\nContent-Length: 5\r\n\r\n",
            b"0\r\ntransfer-encoding: chunked\r\n\r\n",
            b"0\r\nHost: b.test\r\n\r\n",
            b"0\r\nProxy-Authorization: x\r\n\r\n",
            b"0\r\n\rX",
            long_ext.as_bytes(),
            many.as_bytes(),
            big.as_bytes(),
        ];
        for input in bad {
            assert!(body(input).is_err(), "{:?}", String::from_utf8_lossy(input));
        }
        // The longest size line and the most trailer fields pass.
        let longest = format!("1;{}\r\na\r\n0\r\n\r\n", "x".repeat(MAX_CHUNK_LINE - 5));
        assert!(body(longest.as_bytes()).is_ok_and(|(_, done)| done));
        let most = format!("0\r\n{}\r\n", "X: y\r\n".repeat(MAX_HEADERS));
        assert_eq!(body(most.as_bytes()), Ok((most.len(), true)));
    }

    #[test]
    fn a_head_searched_as_it_arrives_ends_where_a_whole_search_ends_it() {
        let head = b"GET / HTTP/1.1\r\nX: y\r\n\r\nbody\r\n\r\n";
        for cut in 0..head.len() {
            // Fed in two parts: the first searched, then the whole from where it ended.
            let first = head_len(&head[..cut]);
            let whole = first.or_else(|| head_len_after(head, cut));
            assert_eq!(whole, head_len(head), "cut at {cut}");
        }
        assert_eq!(head_len_after(b"ab", 10), None);
    }

    #[test]
    fn head_len_finds_the_first_blank_line() {
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n\r\nGET"), Some(18));
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n"), None);
    }
}
