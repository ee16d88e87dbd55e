//! The egress proxy's HTTP request head (`guard::egress::http`): any bytes give an answer,
//! and a forward request's rewritten head is unambiguous: it parses again with `httparse`
//! to the same target, has one `Host`, at most one `Content-Length` (the body length) or
//! else one `Transfer-Encoding: chunked` (a chunked body), never both, no `Proxy-*`, and
//! ends with `Connection: close`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::guard::egress::http::{Body, Request, head_len, parse_head};

fuzz_target!(|data: &[u8]| {
    let _ = head_len(data);
    let Ok(Request::Forward(f)) = parse_head(data) else {
        return;
    };
    assert!(f.head.ends_with(b"Connection: close\r\n\r\n"));
    assert_eq!(head_len(&f.head), Some(f.head.len()));
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    let status = req.parse(&f.head).expect("the rewritten head parses");
    assert!(status.is_complete());
    assert!(req.path.is_some_and(|p| p.starts_with('/')));
    let named = |n: &str| {
        req.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(n))
            .count()
    };
    assert_eq!(named("host"), 1);
    assert_eq!(
        named("transfer-encoding"),
        usize::from(f.body == Body::Chunked)
    );
    assert_eq!(named("connection"), 1);
    let lengths: Vec<_> = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"))
        .collect();
    assert!(lengths.len() <= 1);
    match (lengths.first(), f.body) {
        (Some(l), Body::Length(n)) => {
            assert_eq!(std::str::from_utf8(l.value).unwrap(), n.to_string());
        }
        (None, Body::Length(n)) => assert_eq!(n, 0),
        (None, Body::Chunked) => {}
        (Some(_), Body::Chunked) => panic!("both Content-Length and chunked"),
    }
    assert!(
        !req.headers
            .iter()
            .any(|h| h.name.to_ascii_lowercase().starts_with("proxy-"))
    );
});
