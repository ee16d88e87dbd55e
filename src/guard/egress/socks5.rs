//! SOCKS5 (RFC 1928) as the proxy speaks it: no authentication, `CONNECT` only, with a
//! domain name (socks5h), an IPv4 or an IPv6 address. The parsers read from the start of
//! a buffer and say whether more bytes are needed; every length is bounded by the format
//! (a greeting is at most 257 bytes, a request at most 262).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Reply: succeeded.
pub const SUCCEEDED: u8 = 0x00;
/// Reply: connection not allowed by ruleset.
pub const NOT_ALLOWED: u8 = 0x02;
/// Reply: host unreachable.
pub const HOST_UNREACHABLE: u8 = 0x04;
/// Reply: command not supported.
pub const COMMAND_NOT_SUPPORTED: u8 = 0x07;
/// Reply: address type not supported.
pub const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;
/// The `CONNECT` command.
pub const CONNECT: u8 = 0x01;

/// The longest greeting: version, count, 255 methods.
pub const MAX_GREETING: usize = 257;
/// The longest request: 4 + 1 + 255 (domain) + 2.
pub const MAX_REQUEST: usize = 262;

/// A parse that may need more bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// The buffer holds a prefix of a valid message.
    Incomplete,
    /// The message and the bytes it took.
    Done(T, usize),
}

/// A message the proxy cannot serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Socks5Error {
    /// Not version 5.
    Version,
    /// A greeting with no methods, or a non-zero reserved byte.
    Malformed,
    /// An address type other than 1, 3, 4 (reply 0x08).
    AddressType,
    /// A domain of length 0.
    EmptyDomain,
}

/// Reads a greeting: whether the client offers "no authentication" (0x00).
///
/// # Errors
///
/// [`Socks5Error::Version`] or [`Socks5Error::Malformed`] (no methods).
pub fn parse_greeting(buf: &[u8]) -> Result<Parse<bool>, Socks5Error> {
    match buf {
        [] => Ok(Parse::Incomplete),
        [v, ..] if *v != 5 => Err(Socks5Error::Version),
        [_] => Ok(Parse::Incomplete),
        [_, 0, ..] => Err(Socks5Error::Malformed),
        [_, n, rest @ ..] => {
            let n = usize::from(*n);
            if rest.len() < n {
                return Ok(Parse::Incomplete);
            }
            Ok(Parse::Done(rest[..n].contains(&0), 2 + n))
        }
    }
}

/// A request: the command and where to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Socks5Request {
    /// The command (only [`CONNECT`] is served; others get 0x07).
    pub command: u8,
    /// The host: the domain as sent (lossily UTF-8), or the address as text.
    pub host: String,
    /// The port (0 is refused by the allowlist, which has no port 0).
    pub port: u16,
}

/// Reads a request.
///
/// # Errors
///
/// [`Socks5Error`]: a version other than 5, a non-zero reserved byte, an unknown address
/// type or an empty domain.
pub fn parse_request(buf: &[u8]) -> Result<Parse<Socks5Request>, Socks5Error> {
    if buf.is_empty() {
        return Ok(Parse::Incomplete);
    }
    if buf[0] != 5 {
        return Err(Socks5Error::Version);
    }
    if buf.len() < 4 {
        return Ok(Parse::Incomplete);
    }
    if buf[2] != 0 {
        return Err(Socks5Error::Malformed);
    }
    let (host, at) = match buf[3] {
        1 => match buf.get(4..8) {
            Some(a) => (Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string(), 8),
            None => return Ok(Parse::Incomplete),
        },
        4 => match buf.get(4..20) {
            Some(a) => {
                let mut o = [0u8; 16];
                o.copy_from_slice(a);
                (Ipv6Addr::from(o).to_string(), 20)
            }
            None => return Ok(Parse::Incomplete),
        },
        3 => {
            let Some(&len) = buf.get(4) else {
                return Ok(Parse::Incomplete);
            };
            if len == 0 {
                return Err(Socks5Error::EmptyDomain);
            }
            let end = 5 + usize::from(len);
            match buf.get(5..end) {
                Some(d) => (String::from_utf8_lossy(d).into_owned(), end),
                None => return Ok(Parse::Incomplete),
            }
        }
        _ => return Err(Socks5Error::AddressType),
    };
    let Some(p) = buf.get(at..at + 2) else {
        return Ok(Parse::Incomplete);
    };
    let port = u16::from_be_bytes([p[0], p[1]]);
    Ok(Parse::Done(
        Socks5Request {
            command: buf[1],
            host,
            port,
        },
        at + 2,
    ))
}

/// A reply with `code` and the bound address 0.0.0.0:0.
pub fn reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greetings() {
        assert_eq!(parse_greeting(b""), Ok(Parse::Incomplete));
        assert_eq!(parse_greeting(&[5]), Ok(Parse::Incomplete));
        assert_eq!(parse_greeting(&[5, 2, 2]), Ok(Parse::Incomplete));
        assert_eq!(parse_greeting(&[5, 2, 2, 0, 9]), Ok(Parse::Done(true, 4)));
        assert_eq!(parse_greeting(&[5, 1, 2]), Ok(Parse::Done(false, 3)));
        assert_eq!(parse_greeting(&[4, 1, 0]), Err(Socks5Error::Version));
        assert_eq!(parse_greeting(&[5, 0]), Err(Socks5Error::Malformed));
    }

    #[test]
    fn requests() {
        let r = |command, host: &str, port| {
            Ok(Parse::Done(
                Socks5Request {
                    command,
                    host: host.into(),
                    port,
                },
                0,
            ))
        };
        let done = |b: &[u8]| {
            parse_request(b).map(|p| match p {
                Parse::Done(r, n) => {
                    assert_eq!(n, b.len());
                    Parse::Done(r, 0)
                }
                i => i,
            })
        };
        assert_eq!(
            done(&[5, 1, 0, 1, 127, 0, 0, 1, 0, 80]),
            r(1, "127.0.0.1", 80)
        );
        let mut v6 = vec![5, 1, 0, 4];
        v6.extend_from_slice(&[0; 15]);
        v6.extend_from_slice(&[1, 1, 187]);
        assert_eq!(done(&v6), r(1, "::1", 443));
        assert_eq!(
            done(b"\x05\x02\x00\x03\x0agithub.com\x00\x16"),
            r(2, "github.com", 22)
        );
        assert_eq!(
            parse_request(b"\x05\x01\x00\x03\x0agithub.com\x00"),
            Ok(Parse::Incomplete)
        );
        assert_eq!(parse_request(b"\x05\x01\x00\x03"), Ok(Parse::Incomplete));
        assert_eq!(
            parse_request(b"\x05\x01\x00\x03\x00\x00\x50"),
            Err(Socks5Error::EmptyDomain)
        );
        assert_eq!(
            parse_request(b"\x05\x01\x01\x01"),
            Err(Socks5Error::Malformed)
        );
        assert_eq!(
            parse_request(b"\x05\x01\x00\x05"),
            Err(Socks5Error::AddressType)
        );
        assert_eq!(
            parse_request(b"\x04\x01\x00\x01"),
            Err(Socks5Error::Version)
        );
        assert_eq!(reply(NOT_ALLOWED), [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
}
