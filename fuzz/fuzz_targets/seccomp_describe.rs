//! `cargo fuzz run seccomp_describe`: the report's naming of a denied call
//! (`backend::linux::seccomp::describe`), from a `seccomp_data` the sandboxed program chose
//! whole (any call number, architecture and arguments) under any filter options. Never a
//! panic; the operation names a call and is one line of printable text, and every entry
//! has a hint.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::backend::linux::seccomp::{FilterOptions, describe};

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<9>() else {
        return;
    };
    let word = |i: usize| {
        let mut b = [0u8; 8];
        for (j, x) in b.iter_mut().enumerate() {
            *x = rest.get(i * 8 + j).copied().unwrap_or(0);
        }
        u64::from_le_bytes(b)
    };
    let sd = libc::seccomp_data {
        nr: i32::from_le_bytes([head[0], head[1], head[2], head[3]]),
        arch: u32::from_le_bytes([head[4], head[5], head[6], head[7]]),
        instruction_pointer: word(6),
        args: [word(0), word(1), word(2), word(3), word(4), word(5)],
    };
    let opts = FilterOptions {
        allow_ptrace: head[8] & 1 != 0,
        deny_network: head[8] & 2 != 0,
        inet_stream_only: head[8] & 4 != 0,
        host_namespaces: head[8] & 8 != 0,
    };
    let d = describe(&sd, &opts);
    assert!(!d.operation.is_empty());
    assert!(!d.hint.is_empty(), "{d:?}");
    assert!(
        !d.operation.chars().any(char::is_control) && !d.hint.chars().any(char::is_control),
        "{d:?}"
    );
});
