//! `cargo fuzz run explain_paths`: a path an explained program named (any bytes, relative
//! or absolute, read from its memory), resolved lexically and classified against a layout
//! picked by the input (`src/process/fsview.rs`). The resolved path is always absolute and
//! normal, and what the answering thread decides from the policy alone
//! (`View::lexical`) never disagrees with the report's classification after the run,
//! whatever the host's file system answers. See `stockade::fsview_fuzzing::check`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    stockade::fsview_fuzzing::check(data);
});
