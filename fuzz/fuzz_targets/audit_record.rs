//! Landlock's audit records as the explain tap reads them (`process::audit`): the kernel
//! writes them, but their paths and process names are the sandboxed program's. No input
//! may panic; a record parses only with its `audit(…): ` header.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for kind in [1423u16, 1424] {
        let parsed = stockade::audit_fuzzing::parse(kind, data);
        if parsed {
            assert!(data.starts_with(b"audit("));
        }
    }
});
