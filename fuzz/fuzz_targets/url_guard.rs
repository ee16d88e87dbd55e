//! The URL guard on arbitrary text: it never panics, and a URL it accepts is http or https,
//! carries no credentials, names no metadata host, and every address it returns is public.
//!
//! The first 16 bytes of the input are the resolver's answer (as one IPv6 address and the
//! IPv4 address in its first 4 bytes), the rest is the URL, so the fuzzer controls both.

#![no_main]

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use stockade::guard::url::{METADATA_HOSTS, is_forbidden_ip, validate_url_with};

fuzz_target!(|data: &[u8]| {
    let Some((answer, rest)) = data.split_first_chunk::<16>() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let v6 = Ipv6Addr::from(*answer);
    let v4 = Ipv4Addr::new(answer[0], answer[1], answer[2], answer[3]);

    // Embedding must not launder an address: a mapped v4 is forbidden exactly when the v4 is.
    assert_eq!(
        is_forbidden_ip(IpAddr::V4(v4)),
        is_forbidden_ip(IpAddr::V6(v4.to_ipv6_mapped())),
        "{v4}"
    );

    let resolve =
        |_: &str, _: u16| -> io::Result<Vec<IpAddr>> { Ok(vec![IpAddr::V4(v4), IpAddr::V6(v6)]) };
    let Ok(checked) = validate_url_with(text, resolve) else {
        return;
    };
    let url = &checked.url;
    assert!(
        matches!(url.scheme(), "http" | "https"),
        "{text:?} -> {url}"
    );
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "{text:?} -> {url}"
    );
    let host = url.host_str().expect("http URLs have a host");
    let bare = host.trim_end_matches('.');
    assert!(
        !METADATA_HOSTS.iter().any(|m| m.eq_ignore_ascii_case(bare)),
        "{text:?} -> {url}"
    );
    assert!(!checked.addrs.is_empty());
    for addr in &checked.addrs {
        assert!(!is_forbidden_ip(addr.ip()), "{text:?} -> {addr}");
        assert_eq!(Some(addr.port()), url.port_or_known_default());
    }
});
