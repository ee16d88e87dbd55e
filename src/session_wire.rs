//! The records between `stockade run --session` (the client) and `stockade session` (the
//! server), on the session's `SOCK_SEQPACKET` socket: one message per record, each read
//! once, whole, and validated before anything acts on it.
//!
//! - The client's **request** ([`Request`]): a fixed header and exactly the strings it
//!   counts, each NUL-terminated, at most [`MAX_REQUEST`] bytes, with the client's stdin,
//!   stdout and stderr ([`FDS`] fds, `SCM_RIGHTS`).
//! - The client's **signal** records ([`signal`]), while its command runs: a signal the
//!   client received, to pass on to the command.
//! - The server's **reply** ([`Reply`]), once, when the command has ended or failed to
//!   start.
//!
//! Both ends run as the same user (each checks the other's `SO_PEERCRED`), but the bytes
//! still come from another process: nothing here trusts a length, a count or a value it
//! did not check. Numbers are in the host's byte order (both ends are on one host).
//! `fuzz/fuzz_targets/session_cli.rs` runs every parser on arbitrary bytes.

/// `"STCQ"`: the magic of a request.
pub const REQUEST_MAGIC: u32 = u32::from_be_bytes(*b"STCQ");
/// `"STCR"`: the magic of a reply.
pub const REPLY_MAGIC: u32 = u32::from_be_bytes(*b"STCR");
/// `"STCS"`: the magic of a signal record.
pub const SIGNAL_MAGIC: u32 = u32::from_be_bytes(*b"STCS");
/// A request's header: magic, flags, and the counts of arguments, variables and secret
/// variables.
pub const HEADER_SIZE: usize = 20;
/// The largest request, header and strings.
pub const MAX_REQUEST: usize = 64 * 1024;
/// The most strings a request carries.
pub const MAX_STRINGS: usize = 4096;
/// The fds a request carries: the client's stdin, stdout and stderr.
pub const FDS: usize = 3;
/// Request flag: keep the command's background processes for the session.
pub const KEEP_BACKGROUND: u32 = 1;
/// Request flag: the first string is the working directory.
pub const HAS_CWD: u32 = 2;
/// Size of a reply.
pub const REPLY_SIZE: usize = 12;
/// Size of a signal record.
pub const SIGNAL_SIZE: usize = 8;

/// One command for the session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// Keep the command's background processes until the session closes.
    pub keep_background: bool,
    /// The working directory, as `run --cwd` takes it.
    pub cwd: Option<Vec<u8>>,
    /// The program and its arguments (at least the program, never empty).
    pub argv: Vec<Vec<u8>>,
    /// `--env` variables: a non-empty name without `=`, and the value.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    /// `--secret-env` variables, likewise.
    pub secret_env: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Request {
    /// The request's bytes; `None` when it cannot be one: an empty program, a string with
    /// a NUL, a variable name that is empty or holds `=`, more than [`MAX_STRINGS`]
    /// strings or [`MAX_REQUEST`] bytes.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let mut flags = 0;
        if self.keep_background {
            flags |= KEEP_BACKGROUND;
        }
        if self.cwd.is_some() {
            flags |= HAS_CWD;
        }
        let count = |n: usize| u32::try_from(n).ok();
        let total = usize::from(self.cwd.is_some())
            + self.argv.len()
            + self.env.len()
            + self.secret_env.len();
        if total > MAX_STRINGS || self.argv.first().is_none_or(|p| p.is_empty()) {
            return None;
        }
        let words = [
            REQUEST_MAGIC,
            flags,
            count(self.argv.len())?,
            count(self.env.len())?,
            count(self.secret_env.len())?,
        ];
        let mut out: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let mut push = |s: &[u8]| -> Option<()> {
            if s.contains(&0) {
                return None;
            }
            out.extend_from_slice(s);
            out.push(0);
            Some(())
        };
        if let Some(cwd) = &self.cwd {
            if cwd.is_empty() {
                return None;
            }
            push(cwd)?;
        }
        for a in &self.argv {
            push(a)?;
        }
        for (k, v) in self.env.iter().chain(&self.secret_env) {
            if !valid_name(k) {
                return None;
            }
            let mut kv = k.clone();
            kv.push(b'=');
            kv.extend_from_slice(v);
            push(&kv)?;
        }
        (out.len() <= MAX_REQUEST).then_some(out)
    }

    /// Parses a request: the magic, known flags, counts within bounds, and exactly the
    /// strings the counts say, each NUL-terminated, with nothing after the last; a
    /// non-empty program and working directory, and each variable `NAME=VALUE` with a
    /// non-empty `NAME`. `None` otherwise.
    pub fn parse(bytes: &[u8]) -> Option<Request> {
        if bytes.len() > MAX_REQUEST {
            return None;
        }
        let (head, strings) = bytes.split_at_checked(HEADER_SIZE)?;
        let word = |i: usize| -> Option<u32> {
            let w: [u8; 4] = head.get(i * 4..i * 4 + 4)?.try_into().ok()?;
            Some(u32::from_ne_bytes(w))
        };
        if word(0)? != REQUEST_MAGIC {
            return None;
        }
        let flags = word(1)?;
        if flags & !(KEEP_BACKGROUND | HAS_CWD) != 0 {
            return None;
        }
        let has_cwd = flags & HAS_CWD != 0;
        let (argc, envc, secretc) = (word(2)? as usize, word(3)? as usize, word(4)? as usize);
        let total = usize::from(has_cwd)
            .checked_add(argc)?
            .checked_add(envc)?
            .checked_add(secretc)?;
        if argc == 0 || total > MAX_STRINGS {
            return None;
        }
        // Exactly `total` strings, the last one ending the message.
        let body = strings.strip_suffix(&[0])?;
        let mut parts = body.split(|&b| b == 0);
        let mut next = || parts.next().map(<[u8]>::to_vec);
        let cwd = match has_cwd {
            true => Some(next().filter(|c| !c.is_empty())?),
            false => None,
        };
        let argv = (0..argc).map(|_| next()).collect::<Option<Vec<_>>>()?;
        let mut var = || -> Option<(Vec<u8>, Vec<u8>)> {
            let kv = next()?;
            let eq = kv.iter().position(|&b| b == b'=')?;
            let (k, v) = kv.split_at(eq);
            valid_name(k).then(|| (k.to_vec(), v.get(1..).unwrap_or(&[]).to_vec()))
        };
        let env = (0..envc).map(|_| var()).collect::<Option<Vec<_>>>()?;
        let secret_env = (0..secretc).map(|_| var()).collect::<Option<Vec<_>>>()?;
        if parts.next().is_some() || argv.first().is_none_or(|p| p.is_empty()) {
            return None;
        }
        Some(Request {
            keep_background: flags & KEEP_BACKGROUND != 0,
            cwd,
            argv,
            env,
            secret_env,
        })
    }
}

/// A variable name a request may carry: not empty, no `=` (nor NUL, which no string has).
fn valid_name(k: &[u8]) -> bool {
    !k.is_empty() && !k.contains(&b'=') && !k.contains(&0)
}

/// How the command ended, as the server tells the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The program's raw wait status (`waitpid`'s): it exited, or a signal ended it.
    Status(i32),
    /// The exit code `run` gives for what stopped it (0 to 255): 127 not found, 126 not
    /// executable, 125 any other failure to start, 124 its wall time.
    Code(u8),
}

impl Reply {
    /// The reply's bytes.
    pub fn encode(self) -> [u8; REPLY_SIZE] {
        let (kind, value) = match self {
            Reply::Status(s) => (1u32, s),
            Reply::Code(c) => (2, i32::from(c)),
        };
        let mut out = [0u8; REPLY_SIZE];
        for (chunk, word) in out
            .chunks_exact_mut(4)
            .zip([REPLY_MAGIC, kind, value as u32])
        {
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        out
    }

    /// Decodes one whole reply: a status that a process can end with (an exit code, or
    /// a signal from 1 to 64 with or without the core flag), or a code from 0 to 255;
    /// `None` otherwise.
    pub fn decode(bytes: &[u8]) -> Option<Reply> {
        let bytes: &[u8; REPLY_SIZE] = bytes.try_into().ok()?;
        let word = |i: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(bytes.get(i * 4..i * 4 + 4).unwrap_or(&[0; 4]));
            u32::from_ne_bytes(w)
        };
        if word(0) != REPLY_MAGIC {
            return None;
        }
        let value = word(2);
        match word(1) {
            1 => {
                let exited = value & !0xff00 == 0;
                let signaled = matches!(value & !0x80, 1..=64);
                (exited || signaled).then_some(Reply::Status(value as i32))
            }
            2 => u8::try_from(value).ok().map(Reply::Code),
            _ => None,
        }
    }
}

/// Signal records: the client passes on a signal it received.
pub mod signal {
    use super::{SIGNAL_MAGIC, SIGNAL_SIZE};

    /// The record for signal `signo`.
    pub fn encode(signo: i32) -> [u8; SIGNAL_SIZE] {
        let mut out = [0u8; SIGNAL_SIZE];
        let (magic, value) = out.split_at_mut(4);
        magic.copy_from_slice(&SIGNAL_MAGIC.to_ne_bytes());
        value.copy_from_slice(&signo.to_ne_bytes());
        out
    }

    /// The signal of one whole record, from 1 to 64; `None` otherwise. (The server then
    /// passes on only the signals `run` forwards.)
    pub fn decode(bytes: &[u8]) -> Option<i32> {
        let (magic, value) = bytes.split_first_chunk::<4>()?;
        let value: &[u8; 4] = value.try_into().ok()?;
        let signo = i32::from_ne_bytes(*value);
        (u32::from_ne_bytes(*magic) == SIGNAL_MAGIC && (1..=64).contains(&signo)).then_some(signo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Request {
        Request {
            keep_background: true,
            cwd: Some(b"sub/dir".to_vec()),
            argv: vec![b"sh".to_vec(), b"-c".to_vec(), Vec::new(), b"x y".to_vec()],
            env: vec![
                (b"A".to_vec(), b"1=2".to_vec()),
                (b"B".to_vec(), Vec::new()),
            ],
            secret_env: vec![(b"TOKEN".to_vec(), b"s3cret".to_vec())],
        }
    }

    #[test]
    fn a_request_round_trips() {
        let r = sample();
        let bytes = r.encode().unwrap();
        assert_eq!(Request::parse(&bytes), Some(r));
        let bare = Request {
            argv: vec![b"true".to_vec()],
            ..Request::default()
        };
        assert_eq!(Request::parse(&bare.encode().unwrap()), Some(bare));
    }

    #[test]
    fn malformed_requests_are_refused() {
        let good = sample().encode().unwrap();
        // Every truncation, and a byte more.
        for n in 0..good.len() {
            assert_eq!(Request::parse(&good[..n]), None, "{n}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(Request::parse(&longer), None);
        // An unknown flag, a count off by one, a wrong magic.
        for (at, value) in [(4, 4u32), (8, 3), (8, 5), (12, 1), (16, 2), (0, 0)] {
            let mut bad = good.clone();
            bad[at..at + 4].copy_from_slice(&value.to_ne_bytes());
            assert_eq!(Request::parse(&bad), None, "{at}={value}");
        }
        // Unencodable ones.
        for bad in [
            Request::default(),
            Request {
                argv: vec![Vec::new()],
                ..Request::default()
            },
            Request {
                argv: vec![b"a\0b".to_vec()],
                ..Request::default()
            },
            Request {
                argv: vec![b"a".to_vec()],
                env: vec![(b"A=B".to_vec(), Vec::new())],
                ..Request::default()
            },
            Request {
                argv: vec![b"a".to_vec()],
                env: vec![(Vec::new(), b"v".to_vec())],
                ..Request::default()
            },
            Request {
                argv: vec![vec![b'a'; MAX_REQUEST]],
                ..Request::default()
            },
            Request {
                argv: vec![b"a".to_vec(); MAX_STRINGS + 1],
                ..Request::default()
            },
        ] {
            assert_eq!(bad.encode(), None, "{bad:?}");
        }
    }

    #[test]
    fn replies_and_signals_round_trip_and_refuse_the_rest() {
        for r in [
            Reply::Status(0),
            Reply::Status(3 << 8),
            Reply::Status(9),
            Reply::Status(11 | 0x80),
            Reply::Code(127),
        ] {
            assert_eq!(Reply::decode(&r.encode()), Some(r));
        }
        for bad in [
            Reply::Status(0x1_0000),
            Reply::Status(65),
            Reply::Status(-1),
        ] {
            assert_eq!(Reply::decode(&bad.encode()), None, "{bad:?}");
        }
        let mut code = Reply::Code(1).encode();
        code[8..].copy_from_slice(&256u32.to_ne_bytes());
        assert_eq!(Reply::decode(&code), None);
        assert_eq!(Reply::decode(&Reply::Code(1).encode()[..11]), None);
        assert_eq!(signal::decode(&signal::encode(15)), Some(15));
        for bad in [0, 65, -1] {
            assert_eq!(signal::decode(&signal::encode(bad)), None);
        }
        assert_eq!(signal::decode(&signal::encode(2)[..7]), None);
    }
}
