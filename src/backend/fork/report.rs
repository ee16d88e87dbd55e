//! The fixed-size record a failing forked child writes to its parent.
//!
//! The protocol is the Linux child's ([`crate::backend::linux::report`] on Linux), widened
//! by the message of `sandbox_init`: magic, step index, errno, message length, and a
//! [`MESSAGE_LEN`]-byte message (zero unless the failing step is `sandbox_init`). At
//! [`SIZE`] bytes it is below `PIPE_BUF` on every system (512 on macOS, the POSIX
//! minimum), so the child's one `write(2)` is atomic. The parent reads to EOF: nothing
//! means the program was exec'd; one whole record is decoded; anything else is
//! `SpawnError::Protocol`.

/// `"STKF"`: marks a record of the fork launcher.
pub const MAGIC: u32 = u32::from_be_bytes(*b"STKF");

/// The bytes of `sandbox_init`'s message that travel back (`macos::REPORT_LEN`).
pub const MESSAGE_LEN: usize = 256;

/// One setup failure.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// [`MAGIC`].
    pub magic: u32,
    /// Index of the failing step (the plan's steps, then the per-command ones).
    pub step: u32,
    /// The errno the step saw (0 for `sandbox_init`, which reports a message instead).
    pub errno: i32,
    /// How many bytes of `message` are used.
    pub len: u32,
    /// `sandbox_init`'s message, not NUL-terminated.
    pub message: [u8; MESSAGE_LEN],
}

/// The size of a record on the wire.
pub const SIZE: usize = core::mem::size_of::<Record>();

const HEADER: usize = 16;

impl Record {
    /// The record for `step` failing with `errno`.
    pub const fn new(step: u32, errno: i32) -> Self {
        Record {
            magic: MAGIC,
            step,
            errno,
            len: 0,
            message: [0; MESSAGE_LEN],
        }
    }

    /// The record for `sandbox_init` (step `step`) refusing the profile with the first
    /// `len` bytes of `message`.
    pub const fn sandbox_init(step: u32, message: [u8; MESSAGE_LEN], len: usize) -> Self {
        let len = if len > MESSAGE_LEN { MESSAGE_LEN } else { len };
        Record {
            magic: MAGIC,
            step,
            errno: 0,
            len: len as u32,
            message,
        }
    }

    /// The used part of the message.
    pub fn message(&self) -> &[u8] {
        self.message.get(..self.len as usize).unwrap_or(&[])
    }

    /// The wire bytes (native endian: both ends are the same program). Allocation-free,
    /// without indexing: the child calls it.
    pub fn to_bytes(&self) -> [u8; SIZE] {
        let mut out = [0u8; SIZE];
        let words = [self.magic, self.step, self.errno as u32, self.len];
        let header = words.iter().flat_map(|w| w.to_ne_bytes());
        for (dst, src) in out
            .iter_mut()
            .zip(header.chain(self.message.iter().copied()))
        {
            *dst = src;
        }
        out
    }

    /// Decodes wire bytes; `None` unless they form one whole record with the magic and a
    /// length that fits.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != SIZE {
            return None;
        }
        let word = |i: usize| {
            let b: [u8; 4] = bytes.get(i..i + 4)?.try_into().ok()?;
            Some(u32::from_ne_bytes(b))
        };
        let mut message = [0u8; MESSAGE_LEN];
        message.copy_from_slice(bytes.get(HEADER..)?);
        let r = Record {
            magic: word(0)?,
            step: word(4)?,
            errno: word(8)? as i32,
            len: word(12)?,
            message,
        };
        (r.magic == MAGIC && r.len as usize <= MESSAGE_LEN).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_is_small_and_laid_out_as_written() {
        assert_eq!(SIZE, HEADER + MESSAGE_LEN);
        assert_eq!(core::mem::align_of::<Record>(), 4);
        assert_eq!(core::mem::offset_of!(Record, message), HEADER);
        // 512 is macOS's PIPE_BUF and POSIX's minimum.
        const { assert!(SIZE <= 512) };
    }

    #[test]
    fn errno_records_round_trip() {
        let r = Record::new(3, libc::ENOENT);
        let back = Record::from_bytes(&r.to_bytes()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.message(), b"");
    }

    #[test]
    fn sandbox_init_records_carry_the_message() {
        let mut m = [0u8; MESSAGE_LEN];
        m[..11].copy_from_slice(b"bad profile");
        let r = Record::sandbox_init(2, m, 11);
        let back = Record::from_bytes(&r.to_bytes()).unwrap();
        assert_eq!(back.step, 2);
        assert_eq!(back.message(), b"bad profile");
        assert_eq!(Record::sandbox_init(2, m, 9999).len as usize, MESSAGE_LEN);
    }

    #[test]
    fn malformed_bytes_are_refused() {
        let r = Record::new(1, 2).to_bytes();
        assert_eq!(Record::from_bytes(&r[..SIZE - 1]), None);
        assert_eq!(Record::from_bytes(&[0u8; SIZE]), None);
        let mut long = r;
        long[12..16].copy_from_slice(&(MESSAGE_LEN as u32 + 1).to_ne_bytes());
        assert_eq!(Record::from_bytes(&long), None);
    }
}
