//! The egress proxy's SOCKS5 parsers (`guard::egress::socks5`): any bytes give an answer,
//! a parse takes no more bytes than it has, and every prefix of a complete message is
//! `Incomplete` (the server never decides on a partial read).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::guard::egress::socks5::{Parse, parse_greeting, parse_request};

fuzz_target!(|data: &[u8]| {
    if let Ok(Parse::Done(_, n)) = parse_greeting(data) {
        assert!(n <= data.len() && n <= 257);
        for i in 0..n {
            assert_eq!(parse_greeting(&data[..i]), Ok(Parse::Incomplete));
        }
    }
    if let Ok(Parse::Done(r, n)) = parse_request(data) {
        assert!(n <= data.len() && n <= 262);
        assert!(!r.host.is_empty());
        for i in 0..n {
            assert_eq!(parse_request(&data[..i]), Ok(Parse::Incomplete));
        }
    }
});
