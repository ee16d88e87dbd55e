//! The egress proxy of the `network = "allow"` mode: a sandboxed program's only route out,
//! run in the host, that lets it reach the names of a domain allowlist and nothing else.
//!
//! - [`Allowlist`] and [`Cidr`]: the policy's `allow_domains` and `allow_private`.
//! - [`Egress::decide`]: one decision per connection: the name must be on the list, it is
//!   resolved once, and every address passes the SSRF rules of [`crate::guard::url`]
//!   (metadata always refused; loopback, private, link-local, CGNAT… unless inside
//!   `allow_private`). The connection goes to the checked addresses, never to a second
//!   lookup, so DNS rebinding cannot switch it.
//! - [`http`] and [`socks5`]: bounded parsers of what the program writes (HTTP/1.1 request
//!   heads: absolute-form forward requests and `CONNECT`; SOCKS5 greetings and requests).
//! - [`Proxy`] (Unix): serves each sandbox run's listeners ([`Proxy::serve_run`], a [`Run`]
//!   that ends with the run's process), copies the bytes after the decision and records
//!   each decision. Every length and count is bounded: request heads (size, fields, time),
//!   chunked bodies ([`http::Chunked`]), idle connections, connections per run and for the
//!   whole proxy; a forwarded request's connection carries that one request and nothing
//!   after it.

pub mod http;
#[cfg(unix)]
mod relay;
#[cfg(unix)]
mod serve;
pub mod socks5;

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;

pub use crate::policy::{Allowlist, Cidr, Name};
#[cfg(unix)]
pub use serve::{Admitted, Decision, Protocol, Proxy, Run};

use crate::guard::url::{is_forbidden_ip, is_metadata_host, is_metadata_ip};

/// A resolver: every address of a name (ASCII, normalized, no trailing dot) at a port.
pub type Resolver = dyn Fn(&str, u16) -> io::Result<Vec<IpAddr>> + Send + Sync;

/// Why the proxy refused a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The host is not a domain name or an IP address.
    BadHost {
        /// The host as the program wrote it (lossily, at most 255 bytes).
        host: String,
    },
    /// The host is a cloud metadata name or address: always refused.
    Metadata {
        /// The host.
        host: String,
    },
    /// The host and port are not on the allowlist.
    NotListed {
        /// The normalized host.
        host: String,
        /// The port asked for.
        port: u16,
    },
    /// The name did not resolve.
    Resolve {
        /// The name.
        host: String,
        /// The resolver's error.
        message: String,
    },
    /// The name resolved to no address.
    NoAddress {
        /// The name.
        host: String,
    },
    /// An address of the host is loopback, private, link-local… and outside `allow_private`.
    Forbidden {
        /// The host.
        host: String,
        /// The first forbidden address.
        addr: IpAddr,
    },
}

impl Refusal {
    /// The policy key a host changes to allow what was refused (`allow_domains` or
    /// `allow_private`); `None` when no policy allows it (metadata, bad names, DNS).
    pub fn policy_key(&self) -> Option<&'static str> {
        match self {
            Refusal::NotListed { .. } => Some("allow_domains"),
            Refusal::Forbidden { .. } => Some("allow_private"),
            _ => None,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::BadHost { host } => write!(f, "{host:?} is not a host name"),
            Refusal::Metadata { host } => write!(f, "{host} is a cloud metadata endpoint"),
            Refusal::NotListed { host, port } => {
                write!(f, "{host} port {port} is not in allow_domains")
            }
            Refusal::Resolve { host, message } => write!(f, "{host} did not resolve: {message}"),
            Refusal::NoAddress { host } => write!(f, "{host} has no address"),
            Refusal::Forbidden { host, addr } => write!(
                f,
                "{host} resolves to the non-public address {addr}, outside allow_private"
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// The proxy's policy: the allowlist, the private ranges allowed names may resolve into,
/// and the resolver (the system's unless replaced).
#[derive(Clone)]
pub struct Egress {
    allow: Allowlist,
    private: Vec<Cidr>,
    resolve: Arc<Resolver>,
}

impl fmt::Debug for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Egress")
            .field("allow", &self.allow)
            .field("private", &self.private)
            .finish_non_exhaustive()
    }
}

impl Egress {
    /// A policy with the system resolver (`getaddrinfo`).
    pub fn new(allow: Allowlist, allow_private: Vec<Cidr>) -> Egress {
        Egress {
            allow,
            private: allow_private,
            resolve: Arc::new(system_resolve),
        }
    }

    /// Replaces the resolver (an async host's own, a DNS-over-HTTPS client, a test's map).
    pub fn with_resolver<R>(mut self, resolve: R) -> Egress
    where
        R: Fn(&str, u16) -> io::Result<Vec<IpAddr>> + Send + Sync + 'static,
    {
        self.resolve = Arc::new(resolve);
        self
    }

    /// Decides a connection to `host` at `port`, resolving the name once, and returns the
    /// checked addresses to connect to (in the resolver's order; never look the name up
    /// again). `host` is read by [`Name::parse`].
    ///
    /// # Errors
    ///
    /// The [`Refusal`]: a bad or metadata host first, then a host or port not on the list,
    /// then resolution, then the first address outside the public internet and outside
    /// `allow_private` (metadata addresses are refused even inside it).
    pub fn decide(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
        let Some(name) = Name::parse(host) else {
            return Err(Refusal::BadHost {
                host: shown_host(host),
            });
        };
        let shown = match &name {
            Name::Domain(d) => d.clone(),
            Name::Ip(ip) => ip.to_string(),
        };
        // Metadata first, name or literal: no policy allows it, so the refusal must not
        // suggest one.
        let metadata = match &name {
            Name::Domain(d) => is_metadata_host(d),
            Name::Ip(ip) => is_metadata_ip(*ip),
        };
        if metadata {
            return Err(Refusal::Metadata { host: shown });
        }
        if !self.allow.allows_name(&name, port) {
            return Err(Refusal::NotListed { host: shown, port });
        }
        let ips = match &name {
            Name::Ip(ip) => vec![*ip],
            Name::Domain(d) => {
                let ips = (self.resolve)(d, port).map_err(|e| Refusal::Resolve {
                    host: shown.clone(),
                    message: e.to_string(),
                })?;
                if ips.is_empty() {
                    return Err(Refusal::NoAddress { host: shown });
                }
                ips
            }
        };
        for &ip in &ips {
            if is_metadata_ip(ip) {
                return Err(Refusal::Metadata { host: shown });
            }
            if is_forbidden_ip(ip) && !self.private.iter().any(|c| c.contains(ip)) {
                return Err(Refusal::Forbidden {
                    host: shown,
                    addr: ip,
                });
            }
        }
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }
}

/// The system resolver (`getaddrinfo` through [`ToSocketAddrs`]).
/// A host as the program wrote it, kept for a decision or a refusal: its first 255 bytes
/// (cut at a character's boundary), so that a refused request of a long name of
/// four-byte characters keeps 255 bytes, not 255 characters.
pub(crate) fn shown_host(host: &str) -> String {
    let mut end = host.len().min(255);
    while !host.is_char_boundary(end) {
        end -= 1;
    }
    host[..end].to_string()
}

fn system_resolve(host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
    Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_host_kept_for_a_refusal_is_at_most_255_bytes() {
        let long = "😀".repeat(300);
        let kept = super::shown_host(&long);
        assert_eq!(kept.len(), 252);
        assert!(long.starts_with(&kept));
        assert_eq!(super::shown_host("example.org"), "example.org");
        let r = super::Egress::new(Default::default(), Vec::new()).decide(&format!("{long}.x"), 1);
        match r {
            Err(super::Refusal::BadHost { host }) => assert!(host.len() <= 255),
            other => panic!("{other:?}"),
        }
    }

    use super::*;

    fn egress(allow: &[&str], private: &[&str]) -> Egress {
        let allow = Allowlist::parse(&allow.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let private = Cidr::parse_all(&private.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        Egress::new(allow.unwrap(), private.unwrap()).with_resolver(|name, _| {
            Ok(match name {
                "public.test" => vec![
                    "93.184.216.34".parse().unwrap(),
                    "2606:2800::1".parse().unwrap(),
                ],
                "local.test" => vec!["127.0.0.1".parse().unwrap()],
                "mixed.test" => vec![
                    "93.184.216.34".parse().unwrap(),
                    "10.1.2.3".parse().unwrap(),
                ],
                "meta.test" => vec!["169.254.169.254".parse().unwrap()],
                "meta6.test" => vec!["::ffff:169.254.169.254".parse().unwrap()],
                "empty.test" => vec![],
                _ => return Err(io::Error::new(io::ErrorKind::NotFound, "no such name")),
            })
        })
    }

    #[test]
    fn decisions() {
        let e = egress(
            &[
                "public.test",
                "local.test",
                "mixed.test",
                "meta.test",
                "meta6.test",
                "empty.test",
                "gone.test",
                "metadata.google.internal",
                "169.254.169.254",
                "10.0.0.1:22",
            ],
            &[],
        );
        let ok = e.decide("PUBLIC.test.", 443).unwrap();
        assert_eq!(
            ok,
            vec![
                "93.184.216.34:443".parse().unwrap(),
                "[2606:2800::1]:443".parse().unwrap()
            ]
        );
        assert!(
            matches!(e.decide("other.test", 443), Err(Refusal::NotListed { ref host, port: 443 }) if host == "other.test")
        );
        assert!(matches!(
            e.decide("local.test", 80),
            Err(Refusal::Forbidden { .. })
        ));
        assert!(
            matches!(e.decide("mixed.test", 80), Err(Refusal::Forbidden { addr, .. }) if addr.to_string() == "10.1.2.3")
        );
        assert!(matches!(
            e.decide("meta.test", 80),
            Err(Refusal::Metadata { .. })
        ));
        assert!(matches!(
            e.decide("meta6.test", 80),
            Err(Refusal::Metadata { .. })
        ));
        assert!(matches!(
            e.decide("metadata.google.internal", 80),
            Err(Refusal::Metadata { .. })
        ));
        assert!(matches!(
            e.decide("169.254.169.254", 80),
            Err(Refusal::Metadata { .. })
        ));
        assert!(matches!(
            e.decide("empty.test", 80),
            Err(Refusal::NoAddress { .. })
        ));
        assert!(matches!(
            e.decide("gone.test", 80),
            Err(Refusal::Resolve { .. })
        ));
        assert!(matches!(e.decide("a b", 80), Err(Refusal::BadHost { .. })));
        // An unlisted metadata address is refused as metadata, not as unlisted: adding it
        // to the list would not help.
        assert!(matches!(
            e.decide("169.254.169.254", 443),
            Err(Refusal::Metadata { .. })
        ));
        assert!(matches!(
            e.decide("[fd00:ec2::254]", 80),
            Err(Refusal::Metadata { .. })
        ));
        assert!(matches!(
            e.decide("10.0.0.1", 22),
            Err(Refusal::Forbidden { .. })
        ));
        assert!(matches!(
            e.decide("10.0.0.1", 23),
            Err(Refusal::NotListed { .. })
        ));
        assert_eq!(
            Refusal::NotListed {
                host: "x".into(),
                port: 1
            }
            .policy_key(),
            Some("allow_domains")
        );
    }

    #[test]
    fn allow_private_opens_ranges_but_never_metadata() {
        let e = egress(
            &["local.test", "meta.test", "10.0.0.1:22", "mixed.test"],
            &["127.0.0.1/32", "169.254.0.0/16", "10.0.0.0/8"],
        );
        assert_eq!(
            e.decide("local.test", 80).unwrap(),
            vec!["127.0.0.1:80".parse().unwrap()]
        );
        assert_eq!(
            e.decide("10.0.0.1", 22).unwrap(),
            vec!["10.0.0.1:22".parse().unwrap()]
        );
        assert!(e.decide("mixed.test", 80).is_ok());
        assert!(matches!(
            e.decide("meta.test", 80),
            Err(Refusal::Metadata { .. })
        ));
    }

    /// A NAT64 network's host opens `64:ff9b::/96` (and 6to4, translated, compatible
    /// forms) with `allow_private`: the metadata endpoint inside each form stays refused,
    /// as a literal and as a name's address (found by the `egress_decide` fuzz target's
    /// rule; before, only the mapped form was seen as metadata).
    #[test]
    fn metadata_inside_every_ipv6_form_stays_refused() {
        let forms = [
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::a9fe:aa02",
            "64:ff9b::6464:64c8",
            "2002:a9fe:a9fe::1",
            "::ffff:0:a9fe:a9fe",
            "::a9fe:a9fe",
            "::ffff:a9fe:a9fe",
        ];
        let private = [
            "64:ff9b::/96",
            "2002::/16",
            "::ffff:0:0:0/96",
            "::/96",
            "::ffff:0:0/96",
        ];
        let mut allow: Vec<&str> = forms.to_vec();
        allow.extend(["nat64.test", "64:ff9b::a00:1"]);
        let list = Allowlist::parse(&allow.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let private = Cidr::parse_all(&private.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let e = Egress::new(list.unwrap(), private.unwrap()).with_resolver(|_, _| {
            Ok(vec![
                "64:ff9b::808:808".parse().unwrap(),
                "64:ff9b::a9fe:a9fe".parse().unwrap(),
            ])
        });
        for form in forms {
            assert!(
                matches!(e.decide(form, 443), Err(Refusal::Metadata { .. })),
                "{form}: {:?}",
                e.decide(form, 443)
            );
        }
        assert!(matches!(
            e.decide("nat64.test", 443),
            Err(Refusal::Metadata { .. })
        ));
        // The ranges still open what is not metadata (10.0.0.1 through NAT64).
        assert_eq!(
            e.decide("64:ff9b::a00:1", 443).unwrap(),
            vec!["[64:ff9b::a00:1]:443".parse().unwrap()]
        );
    }
}
