//! `cargo fuzz run proc_stat`: a `/proc/PID/stat` line (`src/probe/stat.rs`) whose name, a
//! sandboxed program's choice (`prctl(PR_SET_NAME)`, the name of a file it execs), is any
//! bytes. The parser never panics, and with the kernel's numbers after any name it reads
//! exactly those numbers: the name cannot move a field.
#![no_main]

#[path = "../../src/probe/stat.rs"]
#[allow(dead_code)]
mod proc_stat;

use libfuzzer_sys::fuzz_target;
use proc_stat::ProcStat;

fuzz_target!(|data: &[u8]| {
    // Any bytes as a whole line: a value or None, never a panic.
    let _ = ProcStat::parse(data);
    // Any bytes as the name, in a line the kernel would write around it.
    if data.len() >= 3 {
        let ppid = i32::from(u16::from_le_bytes([data[0], data[1]]));
        let flags = u64::from(data[2]) << 8;
        let name = &data[3..];
        let mut line = format!("4242 (").into_bytes();
        line.extend_from_slice(name);
        line.extend_from_slice(
            format!(
                ") S {ppid} 4242 4242 0 -1 {flags} 103 0 0 0 0 0 0 0 20 0 1 0 777 3133440 416 0\n"
            )
            .as_bytes(),
        );
        assert_eq!(
            ProcStat::parse(&line),
            Some(ProcStat {
                ppid,
                flags,
                started: 777
            }),
            "{name:?}"
        );
    }
});
