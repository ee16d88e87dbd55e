//! `cargo fuzz run session_cli`: any bytes as a record on a CLI session's socket
//! (`src/session_wire.rs`): the request the server reads from `run --session`, the signal
//! record it reads while the command runs, and the reply the client reads.
//!
//! None may panic. Each decodes only when it is one whole, valid record, and then encodes
//! back to exactly the same bytes: a request with a non-empty program, its counts within
//! bounds and its variables `NAME=VALUE` with a name; a reply with a status a process can
//! end with, or a code from 0 to 255; a signal from 1 to 64.
#![no_main]

#[path = "../../src/session_wire.rs"]
#[allow(dead_code)]
mod wire;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(r) = wire::Request::parse(data) {
        assert!(!r.argv.is_empty() && !r.argv[0].is_empty());
        assert!(r.env.iter().chain(&r.secret_env).all(|(k, _)| !k.is_empty() && !k.contains(&b'=')));
        assert_eq!(r.encode().as_deref(), Some(data));
    }
    if let Some(reply) = wire::Reply::decode(data) {
        assert_eq!(&reply.encode()[..], data);
    }
    if let Some(sig) = wire::signal::decode(data) {
        assert!((1..=64).contains(&sig));
        assert_eq!(&wire::signal::encode(sig)[..], data);
    }
});
