//! `/proc/PID/stat`, read once and parsed in one place.
//!
//! The line's second field is the process's name, in parentheses, and a sandboxed program
//! sets its own name (`prctl(PR_SET_NAME)`, or the name of the file it execs): up to 15
//! bytes of anything but NUL, spaces, `)` and newlines included. So the fields are counted
//! from the name's *last* `)`: every field after it is a number or a one-letter state,
//! which the program does not choose. The parser is total (any bytes give a value or
//! `None`, never a panic) and fuzzed (`fuzz/fuzz_targets/proc_stat.rs`).
//!
//! Shared by the library and the CLI (which includes this file as a module of its own),
//! and by the fuzz target: it depends on nothing but `std`.

/// The fields of one `/proc/PID/stat` line that stockade reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 4: the parent's pid, in the reader's PID namespace.
    pub ppid: i32,
    /// Field 9: the kernel's `PF_*` flags.
    pub flags: u64,
    /// Field 22: when the process started, in clock ticks after boot.
    pub started: u64,
}

impl ProcStat {
    /// Parses one line; `None` unless it has a name in parentheses and numbers in fields
    /// 4, 9 and 22.
    pub fn parse(line: &[u8]) -> Option<ProcStat> {
        let open = line.iter().position(|&b| b == b'(')?;
        let close = line.iter().rposition(|&b| b == b')')?;
        if close < open {
            return None;
        }
        let rest = std::str::from_utf8(line.get(close + 1..)?).ok()?;
        // After the name: state (3), ppid (4), …, flags (9), …, starttime (22).
        let mut fields = rest.split_ascii_whitespace();
        let _state = fields.next()?;
        let ppid = fields.next()?.parse().ok()?;
        let flags = fields.nth(4)?.parse().ok()?;
        let started = fields.nth(12)?.parse().ok()?;
        Some(ProcStat {
            ppid,
            flags,
            started,
        })
    }

    /// Reads and parses `/proc/<pid>/stat` (one open, one read: the line is short);
    /// `None` when the process is gone (reaped) or the line does not parse.
    pub fn of(pid: u32) -> Option<ProcStat> {
        use std::io::Read;
        let mut file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
        // A line is at most ~700 bytes (52 fields of at most 20 digits, a 64-byte name
        // for a kernel thread), and the kernel makes the whole line for one read (a
        // single-record `seq_file`): one read of a larger buffer has it all, no second
        // read for the end of the file. The fields taken here end within the first ~300
        // bytes in any case.
        let mut buf = [0u8; 1024];
        let n = loop {
            match file.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                r => break r.ok()?,
            }
        };
        ProcStat::parse(buf.get(..n)?)
    }
}

#[cfg(test)]
mod tests {
    use super::ProcStat;

    const TAIL: &str =
        " R 16933 16933 1139 0 -1 4194304 103 0 0 0 0 0 0 0 20 0 1 0 214055 3133440 416";

    #[test]
    fn the_fields_are_read_after_the_names_last_parenthesis() {
        for name in ["cat", "a) R 1 2 3 (b", ") )", "", "x\ny) S 9", "(("] {
            let line = format!("16937 ({name}){TAIL}");
            assert_eq!(
                ProcStat::parse(line.as_bytes()),
                Some(ProcStat {
                    ppid: 16933,
                    flags: 4194304,
                    started: 214055
                }),
                "{name:?}"
            );
        }
    }

    #[test]
    fn a_line_cut_short_or_without_a_name_is_refused() {
        assert_eq!(ProcStat::parse(b"16937 (cat) R 16933 16933 1139"), None);
        assert_eq!(ProcStat::parse(b"16937 cat R 16933"), None);
        assert_eq!(ProcStat::parse(b"16937 )cat( R 16933"), None);
        assert_eq!(ProcStat::parse(b""), None);
        assert_eq!(
            ProcStat::parse(format!("1 (x){}", TAIL.replace("16933 16933", "-x 1")).as_bytes()),
            None
        );
    }

    #[test]
    fn this_process_and_its_parent() {
        let me = ProcStat::of(std::process::id()).unwrap();
        assert_eq!(me.ppid as u32, std::os::unix::process::parent_id());
        // PF_FORKNOEXEC: clear, the test binary was exec'd.
        assert_eq!(me.flags & 0x40, 0);
        let parent = ProcStat::of(me.ppid as u32).unwrap();
        assert!(parent.started <= me.started);
    }
}
