//! Landlock's audit records as the explain tap reads them (`process::audit`): the kernel
//! writes them, but their paths and process names are the sandboxed program's. No input
//! may panic; a record parses only with its `audit(…): ` header. The same bytes are also
//! split as a datagram of netlink messages (`process::audit::frames`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The same bytes as a whole datagram of netlink messages: at most one message per
    // 16 bytes (each has a header), never a panic.
    assert!(stockade::audit_fuzzing::datagram(data) <= data.len() / 16);
    for kind in [1423u16, 1424] {
        let parsed = stockade::audit_fuzzing::parse(kind, data);
        if parsed {
            assert!(data.starts_with(b"audit("));
        }
    }
});
