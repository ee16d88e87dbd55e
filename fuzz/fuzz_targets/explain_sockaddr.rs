//! `cargo fuzz run explain_sockaddr`: the socket address a sandboxed program passed to
//! `connect` or `sendto`, as the explain thread reads it from the program's memory
//! (`src/process/explain/sockaddr.rs`): any bytes, any length. The parser never panics,
//! reads only the bytes it was given, and gives back exactly the family, port and address
//! they hold: an `AF_INET` address from 8 bytes on, an `AF_INET6` one from 24, nothing for
//! any other family or a shorter buffer.
#![no_main]

#[path = "../../src/process/explain/sockaddr.rs"]
mod sockaddr;

use std::net::SocketAddr;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = sockaddr::parse_sockaddr(data);
    let family = data
        .get(..2)
        .map(|b| i32::from(u16::from_ne_bytes([b[0], b[1]])));
    match parsed {
        None => assert!(
            !matches!(family, Some(libc::AF_INET) if data.len() >= 8)
                && !matches!(family, Some(libc::AF_INET6) if data.len() >= 24),
            "{data:?} not parsed"
        ),
        Some(addr) => {
            let port = u16::from_be_bytes([data[2], data[3]]);
            assert_eq!(addr.port(), port);
            match addr {
                SocketAddr::V4(a) => {
                    assert_eq!(family, Some(libc::AF_INET));
                    assert_eq!(a.ip().octets(), data[4..8]);
                }
                SocketAddr::V6(a) => {
                    assert_eq!(family, Some(libc::AF_INET6));
                    assert_eq!(a.ip().octets(), data[8..24]);
                }
            }
            // The loopback answer is the address's own, whatever else the buffer holds.
            let mut alone = data[..if addr.is_ipv4() { 8 } else { 24 }].to_vec();
            alone.extend_from_slice(&[0xff; 8]);
            assert_eq!(
                sockaddr::is_loopback(&addr),
                sockaddr::is_loopback(&sockaddr::parse_sockaddr(&alone).expect("parsed"))
            );
        }
    }
});
