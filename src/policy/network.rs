//! The allowlist (`allow_domains`) and the `allow_private` CIDRs: parsing and matching.

use std::net::{IpAddr, Ipv6Addr};

use url::Host;

use super::AllowError;

/// A host as the proxy compares it: a normalized domain name or an IP address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Name {
    /// Lowercase ASCII (IDNA applied), no trailing dot, every label 1 to 63 characters of
    /// `a-z`, `0-9`, `-` and `_`.
    Domain(String),
    /// An IP literal (the legacy IPv4 spellings `0x7f.1` and `2130706433` read as IPv4).
    Ip(IpAddr),
}

impl Name {
    /// Normalizes a host as a client names it: a domain (any case, Unicode or punycode,
    /// one trailing dot ignored), an IPv4 address, or an IPv6 address with or without
    /// brackets. `None` for anything else (empty labels, `*`, `%`, `@`, spaces, zones…).
    pub fn parse(host: &str) -> Option<Name> {
        if host.len() > 255 {
            return None;
        }
        if let Ok(v6) = host.parse::<Ipv6Addr>() {
            return Some(Name::Ip(IpAddr::V6(v6)));
        }
        let trimmed = host.strip_suffix('.').unwrap_or(host);
        if trimmed.is_empty() || trimmed.contains('*') {
            return None;
        }
        match Host::parse(trimmed).ok()? {
            Host::Ipv4(v4) => Some(Name::Ip(IpAddr::V4(v4))),
            Host::Ipv6(v6) if host.starts_with('[') => Some(Name::Ip(IpAddr::V6(v6))),
            Host::Ipv6(_) => None,
            Host::Domain(d) => valid_domain(&d).then_some(Name::Domain(d)),
        }
    }
}

/// Whether an ASCII name (after IDNA) is a plain DNS name.
fn valid_domain(d: &str) -> bool {
    d.len() <= 253
        && d.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        })
}

/// What an entry's host part matches.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    /// This name only.
    Exact(String),
    /// Names strictly below this one (`*.example.com`: `a.example.com`, not `example.com`).
    Below(String),
    /// This address only.
    Ip(IpAddr),
}

/// One parsed `allow_domains` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    pattern: Pattern,
    /// `None`: any port.
    port: Option<u16>,
}

/// The names and addresses a sandboxed program may reach through the egress proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    entries: Vec<Entry>,
}

impl Allowlist {
    /// Parses `allow_domains` entries: `github.com` (that name only), `*.github.com`
    /// (names below it, not the apex), an IP address (`203.0.113.7`, `::1`, `[::1]`), each
    /// with an optional `:port` (an IPv6 address in brackets then: `[::1]:443`). Names are
    /// compared lowercase and IDNA-normalized, a trailing dot ignored.
    ///
    /// # Errors
    ///
    /// [`AllowError::Host`] or [`AllowError::Port`] for the first bad entry, naming it.
    pub fn parse(entries: &[String]) -> Result<Allowlist, AllowError> {
        let entries = entries
            .iter()
            .map(|e| parse_entry(e))
            .collect::<Result<_, _>>()?;
        Ok(Allowlist { entries })
    }

    /// Whether the list allows `host` (as [`Name::parse`] reads it) at `port`. An IP
    /// literal matches IP entries only, a name matches name entries only.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        Name::parse(host).is_some_and(|n| self.allows_name(&n, port))
    }

    /// Whether the list allows a normalized name at `port`.
    pub fn allows_name(&self, name: &Name, port: u16) -> bool {
        self.entries.iter().any(|e| {
            e.port.is_none_or(|p| p == port)
                && match (&e.pattern, name) {
                    (Pattern::Exact(d), Name::Domain(n)) => d == n,
                    (Pattern::Below(d), Name::Domain(n)) => {
                        n.len() > d.len() + 1
                            && n.ends_with(d.as_str())
                            && n.as_bytes()[n.len() - d.len() - 1] == b'.'
                    }
                    (Pattern::Ip(a), Name::Ip(b)) => a == b,
                    _ => false,
                }
        })
    }

    /// Whether the list has no entry (then it allows nothing).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn parse_entry(entry: &str) -> Result<Entry, AllowError> {
    let host_err = |why| AllowError::Host {
        entry: entry.to_string(),
        why,
    };
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (v6, after) = rest
            .split_once(']')
            .ok_or_else(|| host_err("an unclosed '['"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| host_err("junk after ']'"))?,
            ),
        };
        let ip: Ipv6Addr = v6
            .parse()
            .map_err(|_| host_err("not an IPv6 address in brackets"))?;
        return Ok(Entry {
            pattern: Pattern::Ip(IpAddr::V6(ip)),
            port: port.map(|p| parse_port(entry, p)).transpose()?,
        });
    } else if entry.matches(':').count() > 1 {
        let ip: Ipv6Addr = entry
            .parse()
            .map_err(|_| host_err("not an IPv6 address (with a port, write [address]:port)"))?;
        return Ok(Entry {
            pattern: Pattern::Ip(IpAddr::V6(ip)),
            port: None,
        });
    } else {
        match entry.split_once(':') {
            Some((h, p)) => (h, Some(parse_port(entry, p)?)),
            None => (entry, None),
        }
    };
    let (below, name) = match host.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, host),
    };
    if name.contains('*') {
        return Err(host_err("a wildcard is allowed only as a leading '*.'"));
    }
    let pattern = match Name::parse(name) {
        Some(Name::Domain(d)) if below => Pattern::Below(d),
        Some(Name::Domain(d)) => Pattern::Exact(d),
        Some(Name::Ip(_)) if below => return Err(host_err("a wildcard on an IP address")),
        Some(Name::Ip(ip)) => Pattern::Ip(ip),
        None => return Err(host_err("not a domain name or an IP address")),
    };
    Ok(Entry { pattern, port })
}

fn parse_port(entry: &str, p: &str) -> Result<u16, AllowError> {
    let err = || AllowError::Port {
        entry: entry.to_string(),
    };
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(err()),
        Ok(n) => Ok(n),
    }
}

/// An `allow_private` range: the private, loopback or link-local addresses that allowed
/// names may resolve into (metadata addresses stay refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `address/prefix` (`127.0.0.1/32`, `10.0.0.0/8`, `::1/128`); host bits must be
    /// zero.
    ///
    /// # Errors
    ///
    /// [`AllowError::Cidr`], naming the entry.
    pub fn parse(entry: &str) -> Result<Cidr, AllowError> {
        let err = || AllowError::Cidr {
            entry: entry.to_string(),
        };
        let (a, p) = entry.split_once('/').ok_or_else(err)?;
        let addr: IpAddr = a.parse().map_err(|_| err())?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let prefix: u8 = p.parse().map_err(|_| err())?;
        let max: u32 = if addr.is_ipv4() { 32 } else { 128 };
        let cidr = Cidr { addr, prefix };
        if u32::from(prefix) > max
            || cidr
                .mask(addr)
                .map(|m| m.checked_shl(max - u32::from(prefix)).unwrap_or(0))
                != Some(bits(addr))
        {
            return Err(err());
        }
        Ok(cidr)
    }

    /// Parses every entry of `allow_private`.
    ///
    /// # Errors
    ///
    /// [`AllowError::Cidr`] for the first bad entry.
    pub fn parse_all(entries: &[String]) -> Result<Vec<Cidr>, AllowError> {
        entries.iter().map(|e| Cidr::parse(e)).collect()
    }

    /// Whether `ip` lies in the range (same family only: `::ffff:127.0.0.1` is not in
    /// `127.0.0.0/8`).
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.mask(ip) == self.mask(self.addr)
    }

    fn mask(&self, ip: IpAddr) -> Option<u128> {
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return None;
        }
        let width = if ip.is_ipv4() { 32 } else { 128 };
        let shift = width - u32::from(self.prefix);
        Some(bits(ip).checked_shr(shift).unwrap_or(0))
    }
}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Allowlist {
        Allowlist::parse(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn entries_that_parse_and_what_they_allow() {
        let l = list(&[
            "GitHub.com.",
            "*.githubusercontent.com",
            "pypi.org:443",
            "203.0.113.7",
            "[::1]:8080",
            "2001:db8::1",
            "bücher.example",
        ]);
        assert!(l.allows("github.com", 1));
        assert!(l.allows("GITHUB.COM.", 443));
        assert!(!l.allows("api.github.com", 443));
        assert!(l.allows("raw.githubusercontent.com", 443));
        assert!(l.allows("a.b.githubusercontent.com", 80));
        assert!(!l.allows("githubusercontent.com", 443));
        assert!(!l.allows("evilgithubusercontent.com", 443));
        assert!(l.allows("pypi.org", 443));
        assert!(!l.allows("pypi.org", 80));
        assert!(l.allows("203.0.113.7", 22));
        assert!(!l.allows("[::ffff:203.0.113.7]", 22));
        assert!(l.allows("[::1]", 8080));
        assert!(l.allows("::1", 8080));
        assert!(!l.allows("::1", 8081));
        assert!(l.allows("2001:db8::1", 1));
        assert!(l.allows("xn--bcher-kva.example", 443));
        assert!(l.allows("BÜCHER.example", 443));
        // A name never matches an IP entry, nor an IP a name entry.
        assert!(!l.allows("203.0.113.7.nip.io", 22));
        assert!(!list(&["localhost"]).allows("127.0.0.1", 80));
    }

    #[test]
    fn bad_entries_are_refused_naming_the_entry() {
        for bad in [
            "",
            "*",
            "*.",
            "a..b",
            ".a",
            "a.*.b",
            "*.*.a",
            "a*.b",
            "*a.b",
            "git hub.com",
            "a/b",
            "user@a.b",
            "a.b:0",
            "a.b:65536",
            "a.b:",
            "a.b:+1",
            "a.b:http",
            "[::1",
            "[::1]x",
            "[1.2.3.4]",
            "*.1.2.3.4",
            "::1:99999:",
            "a_b.c:1:2",
            "exa%mple.com",
            "a.b..",
        ] {
            let e = Allowlist::parse(&[bad.to_string()]).expect_err(bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!(Allowlist::parse(&[]).unwrap().is_empty());
    }

    #[test]
    fn cidrs() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains("10.255.0.1".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(!c.contains("::ffff:10.0.0.1".parse().unwrap()));
        let one = Cidr::parse("127.0.0.1/32").unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        assert!(
            Cidr::parse("::1/128")
                .unwrap()
                .contains("::1".parse().unwrap())
        );
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        for bad in [
            "10.0.0.1/8",
            "10.0.0.0/33",
            "::1/129",
            "10.0.0.0",
            "x/8",
            "10.0.0.0/",
            "10.0.0.0/-1",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }
}
