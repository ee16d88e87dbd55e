//! The records and arguments that cross between a sandbox's processes and the host: the
//! setup report record (`backend::report::Record`), the init's status record, the init's
//! argument list, and the `/proc/…/children` lists the init reads.
//!
//! None may panic on any bytes; a record decodes only when it is one whole record (and then
//! encodes back to the same bytes); a decoded status record round-trips; a parsed argument
//! list never points the program's exec past its arguments; a children list yields only positive
//! pids, whatever the chunking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::backend::report::{self, Record};
use stockade_init::protocol;

fuzz_target!(|data: &[u8]| {
    // The setup report: decode, and if whole, re-encode to the very same bytes.
    if let Some(r) = Record::decode(data) {
        let mut out = [0u8; report::MAX_SIZE];
        let n = r.encode(&mut out);
        assert_eq!(&out[..n], data);
    }
    // The status record: one whole record or nothing, and a round trip.
    if let Some(st) = protocol::decode_status(data) {
        assert_eq!(data.len(), protocol::STATUS_SIZE);
        assert_eq!(&protocol::status_record(st)[..], data);
        let _ = protocol::exit_code(st);
    }
    // Argument lists: NUL-separated.
    let args: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    let arg = |i: usize| args.get(i).copied();
    if let Some(c) = protocol::Config::parse(args.len(), arg) {
        use protocol::flag;
        assert!(c.program_argv() < args.len(), "the program's argv[0] is an argument");
        // Two pipes and the domain's ruleset: an owner each.
        assert_ne!(c.report_fd, c.status_fd);
        if let Some(d) = c.domain_fd {
            assert!(d != c.report_fd && d != c.status_fd);
            assert!(c.has(flag::SHARED_DOMAIN));
        }
        assert!(!(c.has(flag::NEST) && c.has(flag::SHARED_DOMAIN)));
        assert_eq!(c.flags & !flag::ALL, 0);
    }
    // A children list, cut at every eighth byte as the init's reads might cut it.
    let mut whole = Vec::new();
    let mut carry = 0;
    protocol::each_pid(data, &mut carry, true, |p| whole.push(p));
    let mut cut = Vec::new();
    let mut carry = 0;
    for chunk in data.chunks(8) {
        protocol::each_pid(chunk, &mut carry, false, |p| cut.push(p));
    }
    protocol::each_pid(&[], &mut carry, true, |p| cut.push(p));
    assert!(whole.iter().all(|&p| p > 0));
    assert_eq!(whole, cut);
});
