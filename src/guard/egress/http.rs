//! The HTTP/1.1 request head a sandboxed program sends to the proxy, parsed with `httparse`
//! under fixed bounds, and the head the proxy sends upstream in its place.
//!
//! Two requests are served: an absolute-form forward request (`GET http://host[:port]/path
//! HTTP/1.1`), rewritten to origin-form with the hop-by-hop and `Proxy-*` headers dropped,
//! `Host` set to the target's authority and `Connection: close` forced; and `CONNECT
//! host:port` (authority-form only). Anything that two parsers could read differently is
//! refused: bare CR or LF, obs-fold, `Transfer-Encoding` (request bodies are forwarded by
//! `Content-Length` only), a repeated or non-numeric `Content-Length`, a repeated `Host`.

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
    /// The request body's length (`Content-Length`, 0 without one); the proxy forwards
    /// exactly this many bytes after the head and nothing more from the client.
    pub body_len: u64,
}

/// A request head the proxy refuses, with the status it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadError {
    /// 400: malformed, oversized or ambiguous (smuggling) heads; the reason.
    BadRequest(&'static str),
    /// 405: a method other than `CONNECT` on an authority-form target.
    MethodNotAllowed,
    /// 501: a target the proxy does not serve (origin-form, `*`, a scheme other than
    /// `http`) or a `Transfer-Encoding` body.
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
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
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
    let mut hosts = 0;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(
                if req
                    .headers
                    .iter()
                    .any(|h| h.name.eq_ignore_ascii_case("content-length"))
                {
                    bad("both Transfer-Encoding and Content-Length")
                } else {
                    HeadError::NotImplemented("Transfer-Encoding request bodies are not forwarded")
                },
            );
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
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request::Forward(Forward {
        host,
        port,
        head: out,
        body_len: content_length.unwrap_or(0),
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
            (f.host.as_str(), f.port, f.body_len),
            ("example.com", 8080, 3)
        );
        assert_eq!(
            String::from_utf8(f.head).unwrap(),
            "GET /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
        );
        let f = fwd("GET http://[::1]/ HTTP/1.0\r\n\r\n");
        assert_eq!((f.host.as_str(), f.port, f.body_len), ("::1", 80, 0));
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
        assert_eq!(
            p("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(501)
        );
        for smuggle in [
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
    fn head_len_finds_the_first_blank_line() {
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n\r\nGET"), Some(18));
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n"), None);
    }
}
