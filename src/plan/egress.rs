//! The egress proxy's place in a plan of `network = "allow"`: where its listeners are and
//! what they let through, as plain data.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use crate::policy::{Layer, Network, Policy};

/// The HTTP proxy's port on the sandbox's own loopback (the full layer).
pub const INSIDE_HTTP_PORT: u16 = 3128;
/// The SOCKS5 proxy's port on the sandbox's own loopback (the full layer).
pub const INSIDE_SOCKS_PORT: u16 = 1080;

/// Where a plan's egress proxy listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// The full layer: the setup child, inside the sandbox's network namespace, opens
    /// listeners on its loopback at these addresses and passes them to the host
    /// ([`super::Step::EgressListeners`]). The same addresses in every sandbox: each has
    /// a loopback of its own.
    Inside {
        /// The HTTP proxy (absolute-form requests and `CONNECT`).
        http: SocketAddr,
        /// The SOCKS5 proxy.
        socks: SocketAddr,
    },
    /// Layer 2, macOS and passthrough: the host opens listeners on its own loopback, on
    /// ports the kernel picks at each spawn; the walls allow TCP to those ports alone
    /// (Landlock's connect rule, the Seatbelt profile), passthrough nothing.
    HostLoopback,
}

/// The egress side of a plan of `network = "allow"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressPlan {
    /// The policy's `allow_domains`, as written.
    pub allow_domains: Vec<String>,
    /// The policy's `allow_private`, as written.
    pub allow_private: Vec<String>,
    /// Where the proxy listens.
    pub listen: Listen,
}

impl EgressPlan {
    /// The egress side of a plan on `layer` for `policy`; `None` unless the policy says
    /// `network = "allow"`.
    pub fn of(policy: &Policy, layer: Layer) -> Option<EgressPlan> {
        if policy.network != Network::Allow {
            return None;
        }
        let listen = match layer {
            Layer::Full if cfg!(target_os = "linux") => Listen::Inside {
                http: loopback(INSIDE_HTTP_PORT),
                socks: loopback(INSIDE_SOCKS_PORT),
            },
            _ => Listen::HostLoopback,
        };
        Some(EgressPlan {
            allow_domains: policy.allow_domains.clone(),
            allow_private: policy.allow_private.clone(),
            listen,
        })
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
}

/// The variables that point a program's HTTP clients at the proxy: `HTTP_PROXY`,
/// `HTTPS_PROXY`, `ALL_PROXY` (`socks5h://`, names resolved by the proxy), `NO_PROXY` for
/// the loopback, each in upper and lower case, and `NODE_USE_ENV_PROXY=1` (Node.js reads
/// the others only with it).
pub fn proxy_env(http: SocketAddr, socks: SocketAddr) -> Vec<(String, String)> {
    let http_url = format!("http://{http}");
    let socks_url = format!("socks5h://{socks}");
    let no_proxy = "localhost,127.0.0.1,::1".to_string();
    let mut out = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", &http_url),
        ("HTTPS_PROXY", &http_url),
        ("ALL_PROXY", &socks_url),
        ("NO_PROXY", &no_proxy),
    ] {
        out.push((name.to_string(), value.clone()));
        out.push((name.to_ascii_lowercase(), value.clone()));
    }
    out.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allow_has_an_egress_plan_and_the_full_layer_listens_inside() {
        let mut p = Policy::default();
        assert_eq!(EgressPlan::of(&p, Layer::Full), None);
        p.network = Network::None;
        assert_eq!(EgressPlan::of(&p, Layer::Full), None);
        p.network = Network::Allow;
        p.allow_domains = vec!["github.com".into()];
        let full = EgressPlan::of(&p, Layer::Full).unwrap();
        assert_eq!(full.allow_domains, ["github.com"]);
        if cfg!(target_os = "linux") {
            assert_eq!(
                full.listen,
                Listen::Inside {
                    http: "127.0.0.1:3128".parse().unwrap(),
                    socks: "127.0.0.1:1080".parse().unwrap()
                }
            );
        }
        for layer in [Layer::Landlock, Layer::Passthrough] {
            assert_eq!(
                EgressPlan::of(&p, layer).unwrap().listen,
                Listen::HostLoopback
            );
        }
    }

    #[test]
    fn the_environment_names_both_proxies_in_both_cases() {
        let env = proxy_env(
            "127.0.0.1:3128".parse().unwrap(),
            "127.0.0.1:1080".parse().unwrap(),
        );
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HTTP_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("https_proxy"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("ALL_PROXY"), Some("socks5h://127.0.0.1:1080"));
        assert_eq!(get("no_proxy"), Some("localhost,127.0.0.1,::1"));
        assert_eq!(get("NODE_USE_ENV_PROXY"), Some("1"));
        assert_eq!(env.len(), 9);
    }
}
