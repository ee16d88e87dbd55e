//! Socket addresses as a sandboxed program wrote them (`connect`'s and `sendto`'s
//! argument, read from its memory by the explain thread): parsed within the bytes read,
//! never trusted for more than a report. Plain std and libc, so that the fuzz target
//! `explain_sockaddr` includes this file as it is.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// An `AF_INET` or `AF_INET6` socket address from its bytes (machine-order family,
/// network-order port and address).
pub(super) fn parse_sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
    match i32::from(family) {
        libc::AF_INET => {
            let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::from((Ipv4Addr::from(ip), port)))
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            Some(SocketAddr::from((Ipv6Addr::from(ip), port)))
        }
        _ => None,
    }
}

/// Whether `addr` stays on the sandbox's loopback (or is unspecified, which the kernel
/// takes for loopback).
pub(super) fn is_loopback(addr: &SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(a) => a.ip().is_loopback() || a.ip().is_unspecified(),
        SocketAddr::V6(a) => {
            let ip = a.ip();
            ip.is_loopback()
                || ip.is_unspecified()
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_are_parsed_and_bounded() {
        let mut v4 = [0u8; 16];
        v4[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&443u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[140, 82, 112, 3]);
        let a = parse_sockaddr(&v4).unwrap();
        assert_eq!(a.to_string(), "140.82.112.3:443");
        assert!(!is_loopback(&a));
        assert_eq!(parse_sockaddr(&v4[..6]), None);
        let mut v6 = [0u8; 28];
        v6[0..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&80u16.to_be_bytes());
        v6[23] = 1;
        let a = parse_sockaddr(&v6).unwrap();
        assert_eq!(a.to_string(), "[::1]:80");
        assert!(is_loopback(&a));
        let mut unix = [0u8; 28];
        unix[0..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(parse_sockaddr(&unix), None);
        assert_eq!(parse_sockaddr(&[]), None);
    }
}
