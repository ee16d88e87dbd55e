//! The fixed-size record a failing child writes to its parent.
//!
//! Before `clone` the parent makes an `O_CLOEXEC` pipe. The child either execs (the kernel
//! closes its write end: the parent reads EOF, zero bytes) or writes exactly one
//! [`Record`] in one `write(2)` (16 bytes, far below `PIPE_BUF`, so it is atomic) and
//! exits. The parent decodes it into (step index, errno) and names the step from its own
//! copy of the plan, so the child never builds a string.

/// `"STKD"`: marks a record, so that stray bytes are a protocol error and not a step.
pub const MAGIC: u32 = u32::from_be_bytes(*b"STKD");

/// One setup failure.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// [`MAGIC`].
    pub magic: u32,
    /// Index of the failing step in the child's step list.
    pub step: u32,
    /// The errno the step saw.
    pub errno: i32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// The size of a record on the wire.
pub const SIZE: usize = core::mem::size_of::<Record>();

impl Record {
    /// The record for `step` failing with `errno`.
    pub const fn new(step: u32, errno: i32) -> Self {
        Record {
            magic: MAGIC,
            step,
            errno,
            reserved: 0,
        }
    }

    /// The wire bytes (native endian: both ends are the same process image).
    pub fn to_bytes(self) -> [u8; SIZE] {
        let mut out = [0u8; SIZE];
        let fields = [self.magic, self.step, self.errno as u32, self.reserved];
        let mut i = 0;
        while i < fields.len() {
            let b = fields[i].to_ne_bytes();
            let mut j = 0;
            while j < 4 {
                if let Some(slot) = out.get_mut(i * 4 + j) {
                    *slot = b[j];
                }
                j += 1;
            }
            i += 1;
        }
        out
    }

    /// Decodes wire bytes; `None` unless they form one whole record with the magic.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != SIZE {
            return None;
        }
        let word =
            |i: usize| u32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let r = Record {
            magic: word(0),
            step: word(4),
            errno: word(8) as i32,
            reserved: word(12),
        };
        (r.magic == MAGIC).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_is_small() {
        assert_eq!(SIZE, 16);
        const { assert!(SIZE <= libc::PIPE_BUF) };
        let r = Record::new(7, libc::ENOENT);
        assert_eq!(Record::from_bytes(&r.to_bytes()), Some(r));
        assert_eq!(Record::from_bytes(&[0u8; 16]), None);
        assert_eq!(Record::from_bytes(&r.to_bytes()[..15]), None);
    }
}
