//! The URL guard (SSRF) for in-process fetch tools.
//!
//! A fetch tool runs in the host, with the host's network position: it can reach the cloud
//! metadata service, the host's loopback services and the private network. [`validate_url`]
//! refuses a URL unless
//!
//! - its scheme is `http` or `https`;
//! - it carries no user name or password (credentials in a URL smuggle data out and confuse
//!   parsers that disagree about where the host starts);
//! - its host is not a cloud metadata name (`metadata.google.internal`,
//!   `metadata.aws.internal`, …, in any case and with or without a trailing dot);
//! - every address the host is or resolves to is public (see [`is_forbidden_ip`]).
//!
//! The URL is parsed by the WHATWG rules of the `url` crate, the parser `reqwest` and most
//! Rust clients use, so the host checked is the host connected to. Those rules read the
//! legacy IPv4 spellings (`http://2130706433/`, `http://0x7f.1/`, `http://0177.0.0.1/`) as
//! `127.0.0.1`, and refuse an IPv6 zone (`http://[fe80::1%25eth0]/`) as invalid.
//!
//! The check resolves the name once. Connect to the addresses it returns
//! ([`CheckedUrl::addrs`], for instance with `reqwest::ClientBuilder::resolve_to_addrs`),
//! not to the name again: a second lookup may answer differently (DNS rebinding). Check each
//! redirect's URL again before following it.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use url::{Host, Url};

use crate::error::GuardError;

/// Cloud metadata host names, refused before any lookup. Their addresses (169.254.169.254,
/// fd00:ec2::254) are forbidden ranges as well; the names are refused so that a resolver that
/// answers something else for them (a proxy, a split-horizon DNS) changes nothing.
pub const METADATA_HOSTS: &[&str] = &[
    "metadata.google.internal",
    "metadata.aws.internal",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

/// A URL that passed [`validate_url`], with the addresses that were checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedUrl {
    /// The parsed, normalized URL (`http://0x7f.1/` is already `http://127.0.0.1/` here).
    pub url: Url,
    /// Every address the host resolved to, with the URL's port; all of them are public.
    /// Connect to these and not to a fresh lookup of the name.
    pub addrs: Vec<SocketAddr>,
}

/// Checks `input` for a fetch tool, resolving its host with the system resolver.
///
/// # Errors
///
/// [`GuardError::InvalidUrl`], [`GuardError::Scheme`], [`GuardError::Userinfo`],
/// [`GuardError::Metadata`], [`GuardError::ForbiddenAddress`] (the first forbidden address
/// found), [`GuardError::Resolve`] or [`GuardError::NoAddress`].
pub fn validate_url(input: &str) -> Result<CheckedUrl, GuardError> {
    validate_url_with(input, system_resolve)
}

/// Checks `input` as [`validate_url`] does, resolving host names with `resolve`.
///
/// `resolve` gets the host name (ASCII, as the `url` crate normalized it: lowercase, IDNA
/// applied, a trailing dot kept) and the port, and returns every address of the name. It is
/// not called for IP literals. Hosts with their own resolver (an async one, a DNS-over-HTTPS
/// client) pass it here; tests inject fixed answers.
///
/// # Errors
///
/// As [`validate_url`]; an error of `resolve` becomes [`GuardError::Resolve`].
pub fn validate_url_with<R>(input: &str, resolve: R) -> Result<CheckedUrl, GuardError>
where
    R: Fn(&str, u16) -> io::Result<Vec<IpAddr>>,
{
    let url = Url::parse(input).map_err(|source| GuardError::InvalidUrl {
        url: input.to_string(),
        source,
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(GuardError::Scheme {
            scheme: url.scheme().to_string(),
        });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(GuardError::Userinfo);
    }
    // http and https always have a known default port and a non-empty host: the parser
    // refuses `http://` (and reads `http:///x` as the host `x`).
    let port = url.port_or_known_default().unwrap_or(80);
    let ips = match url.host() {
        Some(Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
        Some(Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
        Some(Host::Domain(name)) => {
            if is_metadata_host(name) {
                return Err(GuardError::Metadata {
                    host: name.to_string(),
                });
            }
            let ips = resolve(name, port).map_err(|source| GuardError::Resolve {
                host: name.to_string(),
                source,
            })?;
            if ips.is_empty() {
                return Err(GuardError::NoAddress {
                    host: name.to_string(),
                });
            }
            ips
        }
        None => {
            return Err(GuardError::InvalidUrl {
                url: input.to_string(),
                source: url::ParseError::EmptyHost,
            });
        }
    };
    let host = url.host_str().unwrap_or_default().to_string();
    if let Some(addr) = ips.iter().copied().find(|ip| is_forbidden_ip(*ip)) {
        return Err(GuardError::ForbiddenAddress { host, addr });
    }
    let addrs = ips
        .into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect();
    Ok(CheckedUrl { url, addrs })
}

/// The system resolver (`getaddrinfo` through [`ToSocketAddrs`]).
fn system_resolve(host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
    Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
}

/// Whether `host` names a metadata endpoint, ignoring case and trailing dots.
pub(crate) fn is_metadata_host(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    METADATA_HOSTS.iter().any(|m| m.eq_ignore_ascii_case(host))
}

/// Cloud metadata addresses: AWS, GCP, Azure and most others (169.254.169.254), AWS ECS
/// task metadata (169.254.170.2), Alibaba (100.100.100.200) and AWS over IPv6
/// (fd00:ec2::254), the IPv4 ones also inside every IPv6 form that reaches them
/// ([`embedded_v4`]: an `allow_private` of `64:ff9b::/96`, a NAT64 network's, must not
/// open `64:ff9b::a9fe:a9fe`). All lie in forbidden ranges; the egress proxy refuses them
/// even when a host's `allow_private` covers the range.
pub(crate) fn is_metadata_ip(ip: IpAddr) -> bool {
    let v4 = match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => embedded_v4(v6),
    };
    v4.is_some_and(|v4| {
        v4 == Ipv4Addr::new(169, 254, 169, 254)
            || v4 == Ipv4Addr::new(169, 254, 170, 2)
            || v4 == Ipv4Addr::new(100, 100, 100, 200)
    }) || ip == IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254))
}

/// The IPv4 address an IPv6 address carries in a form that reaches it: IPv4-compatible
/// (`::a.b.c.d`), mapped (`::ffff:a.b.c.d`), translated (`::ffff:0:a.b.c.d`), the
/// well-known NAT64 prefix (`64:ff9b::a.b.c.d`) and 6to4 (`2002:aabb:ccdd::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let pair = |hi: u16, lo: u16| Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)));
    match s {
        [0, 0, 0, 0, 0, 0 | 0xffff, hi, lo]
        | [0, 0, 0, 0, 0xffff, 0, hi, lo]
        | [0x64, 0xff9b, 0, 0, 0, 0, hi, lo]
        | [0x2002, hi, lo, ..] => pair(hi, lo),
        _ => None,
    }
}

/// Whether a fetch tool must not connect to `ip`.
///
/// IPv4: `0.0.0.0/8`, `10/8`, `100.64/10` (CGNAT), `127/8`, `169.254/16` (link-local and
/// metadata), `172.16/12`, `192.0.0/24`, `192.168/16`, `198.18/15`, `224/4` (multicast) and
/// `240/4` (reserved, with `255.255.255.255`).
///
/// IPv6: `::/96` (unspecified, loopback and the deprecated IPv4-compatible form), `fc00::/7`
/// (unique local), `fe80::/10` (link-local), `fec0::/10` (site-local), `ff00::/8`
/// (multicast), `64:ff9b:1::/48` (local NAT64); and the IPv4 address embedded in
/// `::ffff:0:0/96` (mapped), `::ffff:0:0:0/96` (translated), `64:ff9b::/96` (NAT64) and
/// `2002::/16` (6to4) is checked by the IPv4 rules.
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_forbidden_v4(v4),
        IpAddr::V6(v6) => is_forbidden_v6(v6),
    }
}

fn is_forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0
        || a == 10
        || (a == 100 && (64..128).contains(&b))
        || a == 127
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 224
}

fn is_forbidden_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded = || Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32);
    match s {
        // ::/96: `::`, `::1` and IPv4-compatible addresses.
        [0, 0, 0, 0, 0, 0, _, _] => true,
        // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated).
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => {
            is_forbidden_v4(embedded())
        }
        // 64:ff9b::/96, the well-known NAT64 prefix.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => is_forbidden_v4(embedded()),
        // 64:ff9b:1::/48, NAT64 for local use only.
        [0x64, 0xff9b, 1, ..] => true,
        // 2002:aabb:ccdd::/48, 6to4 around a.b.c.d.
        [0x2002, hi, lo, ..] => is_forbidden_v4(Ipv4Addr::from(((hi as u32) << 16) | lo as u32)),
        [first, ..] => {
            (first & 0xfe00) == 0xfc00 // fc00::/7
                || (first & 0xffc0) == 0xfe80 // fe80::/10
                || (first & 0xffc0) == 0xfec0 // fec0::/10
                || (first & 0xff00) == 0xff00 // ff00::/8
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> bool {
        is_forbidden_ip(s.parse().unwrap())
    }

    #[test]
    fn ipv4_range_edges() {
        for bad in [
            "0.0.0.0",
            "0.255.255.255",
            "10.0.0.1",
            "100.64.0.0",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(v4(bad), "{bad} must be forbidden");
        }
        for good in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "192.167.255.255",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
        ] {
            assert!(!v4(good), "{good} must be allowed");
        }
    }

    #[test]
    fn ipv6_ranges_and_embedded_ipv4() {
        for bad in [
            "::",
            "::1",
            "::7f00:1",
            "::8.8.8.8",
            "fc00::1",
            "fdff:ffff::1",
            "fd00:ec2::254",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:a9fe:a9fe",
            "::ffff:0:10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::8.8.8.8",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
        ] {
            assert!(v4(bad), "{bad} must be forbidden");
        }
        for good in [
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::1",
            "fbff::1",
        ] {
            assert!(!v4(good), "{good} must be allowed");
        }
    }

    #[test]
    fn metadata_names_ignore_case_and_trailing_dots() {
        assert!(is_metadata_host("METADATA.google.internal."));
        assert!(is_metadata_host("metadata.aws.internal.."));
        assert!(!is_metadata_host("metadata.google.internal.example.com"));
    }
}
