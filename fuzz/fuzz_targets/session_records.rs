//! The records of a warm session's control socket (`stockade_init::protocol::session`):
//! a command's reply, which the host reads from inside the sandbox, and the request,
//! which the program's process waiting in the session parses.
//!
//! None may panic on any bytes; a reply decodes only when it is one whole record with a
//! non-negative errno, and then encodes back to the same bytes; a request parses only when
//! its strings are exactly the ones its header counts, each NUL-terminated, and the offsets
//! it hands out lie inside it.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade_init::protocol::session;

fuzz_target!(|data: &[u8]| {
    if let Some(errno) = session::decode_reply(data) {
        assert!(errno >= 0);
        assert_eq!(&session::reply(errno)[..], data);
    }
    if let Some(r) = session::Request::parse(data) {
        assert!(r.argc >= 1 && r.total() <= session::MAX_STRINGS);
        let mut n = 0;
        r.each_start(|i, at| {
            assert_eq!(i, n);
            assert!(at < r.strings.len());
            n += 1;
        });
        assert_eq!(n, r.total());
    }
});
