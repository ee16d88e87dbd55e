//! `cargo fuzz run egress_decide`: the egress proxy's whole decision
//! (`guard::egress::Egress::decide`) for a host and port a sandboxed program asked for, with
//! the allowlist, the `allow_private` ranges and the addresses a resolver returns all from
//! the input. Whatever the input:
//!
//! - an allowed connection goes only to addresses the resolver gave (once, in its order, at
//!   the port asked for), for a host the allowlist allows;
//! - no allowed address is a cloud metadata endpoint in any spelling (IPv4, or IPv4 inside
//!   a mapped, translated, NAT64 or 6to4 IPv6 address), whatever `allow_private` says;
//! - no allowed address is outside the public internet unless `allow_private` covers it;
//! - the resolver is asked at most once, never for an IP literal;
//! - a refusal prints without control characters (it reaches logs and terminals).
//!
//! Input layout: lines. The first is the host, the second the port (decimal), then the
//! allowlist's entries up to a line `--`, then `allow_private`'s ranges up to a line `--`,
//! then the addresses the resolver returns (an empty resolver answer when none parse; a
//! line `ERR` makes it fail).
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;
use stockade::guard::egress::{Allowlist, Cidr, Egress, Name, Refusal};
use stockade::guard::url::is_forbidden_ip;

/// The metadata addresses, written out again here rather than taken from the library.
const METADATA_V4: [Ipv4Addr; 3] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
];

/// Every IPv4 address `ip` names or carries: itself, or the IPv4 inside an IPv6 form that
/// reaches it (mapped `::ffff:a.b.c.d`, translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96`,
/// 6to4 `2002:AABB:CCDD::/16`).
fn v4_forms(ip: IpAddr) -> Vec<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => vec![v4],
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let low = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
            let mut out = Vec::new();
            if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
                out.push(low);
            }
            if s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0 {
                out.push(low);
            }
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                out.push(low);
            }
            if s[0] == 0x2002 {
                out.push(Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2])));
            }
            out
        }
    }
}

fn is_metadata(ip: IpAddr) -> bool {
    ip == "fd00:ec2::254".parse::<IpAddr>().expect("an address")
        || v4_forms(ip).iter().any(|v4| METADATA_V4.contains(v4))
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    let host = lines.next().unwrap_or_default().to_string();
    let Ok(port) = lines.next().unwrap_or_default().parse::<u16>() else {
        return;
    };
    let allow: Vec<String> = lines
        .by_ref()
        .take_while(|l| *l != "--")
        .map(str::to_string)
        .collect();
    let private_text: Vec<&str> = lines.by_ref().take_while(|l| *l != "--").collect();
    let answer: Vec<&str> = lines.collect();
    let fails = answer.contains(&"ERR");
    let answer: Vec<IpAddr> = answer.iter().filter_map(|a| a.parse().ok()).collect();
    let Ok(list) = Allowlist::parse(&allow) else {
        return;
    };
    let private: Vec<Cidr> = private_text
        .iter()
        .filter_map(|c| Cidr::parse(c).ok())
        .collect();

    let asked = Arc::new(AtomicUsize::new(0));
    let egress = {
        let (asked, answer) = (asked.clone(), answer.clone());
        Egress::new(list.clone(), private.clone()).with_resolver(move |_, _| {
            asked.fetch_add(1, Ordering::SeqCst);
            if fails {
                Err(std::io::Error::other("no such name"))
            } else {
                Ok(answer.clone())
            }
        })
    };
    let result = egress.decide(&host, port);
    let name = Name::parse(&host);
    let asked = asked.load(Ordering::SeqCst);
    assert!(asked <= 1, "resolved {asked} times");
    if let Some(Name::Ip(_)) | None = name {
        assert_eq!(asked, 0, "an IP literal or a bad name was resolved");
    }
    match result {
        Ok(addrs) => {
            assert!(!addrs.is_empty());
            assert!(list.allows(&host, port), "{host}:{port} allowed off the list");
            let expected: Vec<IpAddr> = match name {
                Some(Name::Ip(ip)) => vec![ip],
                Some(Name::Domain(_)) => answer,
                None => panic!("a bad host allowed: {host:?}"),
            };
            let got: Vec<IpAddr> = addrs.iter().map(|a| a.ip()).collect();
            assert_eq!(got, expected, "not the resolver's addresses, in order");
            for a in &addrs {
                assert_eq!(a.port(), port);
                assert!(!is_metadata(a.ip()), "metadata address allowed: {a}");
                assert!(
                    !is_forbidden_ip(a.ip()) || private.iter().any(|c| c.contains(a.ip())),
                    "non-public address allowed outside allow_private: {a}"
                );
            }
        }
        Err(refusal) => {
            let shown = refusal.to_string();
            assert!(
                !shown.chars().any(char::is_control),
                "control characters in {shown:?}"
            );
            if let Some(Name::Ip(ip)) = name {
                if is_metadata(ip) {
                    assert!(matches!(refusal, Refusal::Metadata { .. }), "{refusal:?}");
                }
            }
        }
    }
});
