//! `cargo fuzz run explain_report`: a line of the CLI's explain report
//! (`stockade::Denial`'s `Display`, then `guard::terminal::escape_controls`, as
//! `stockade run --explain` prints it) for a target the program chose (a path it named:
//! any text). The printed line is one line without a control character, a line or
//! paragraph separator or a bidirectional mark; a target that is not plain printable
//! ASCII is shown quoted; and the line ends with the entry's own hint.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::guard::terminal::escape_controls;
use stockade::{Denial, Wall};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let d = Denial {
        wall: Wall::Layout,
        operation: "write".into(),
        target: Some(text.clone().into_owned()),
        count: 1 + u64::from(data.first().copied().unwrap_or(0) % 3),
        hint: "read_only: not writable".into(),
    };
    let line = escape_controls(&d.to_string());
    for c in line.chars() {
        let bidi = matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        );
        assert!(
            !c.is_control() && !bidi && c != '\u{2028}' && c != '\u{2029}',
            "{c:?} in {line:?}"
        );
    }
    assert!(line.ends_with(" → read_only: not writable"), "{line:?}");
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
    assert!(
        plain || line.starts_with("layout   write \""),
        "not quoted: {line:?}"
    );
});
