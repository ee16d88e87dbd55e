//! A change set's digest: what `apply --expect` holds a later apply to.

use std::os::unix::ffi::OsStrExt;

use sha2::{Digest, Sha256};

use super::{Change, ChangeSet};

impl ChangeSet {
    /// A digest of the change set as opened: `sha256:` and 64 hex digits, over every
    /// entry's path, kind, type, size, mode, symlink target, hard-link facts and the
    /// inode and change time the walk saw (so over every byte of content: a rewrite
    /// changes the change time, which no program can set back).
    ///
    /// Reviewing and applying in two steps (two commands, or two opens) leaves a gap in
    /// which a run can change the set: compare the digest printed at the review with the
    /// one of the set opened to apply ([`ChangeSet::open`] refuses while a run's program
    /// runs, and `apply` skips what changes after the open), and apply only when they are
    /// equal, as `stockade apply --expect` does.
    ///
    /// The inode and change time make the digest one of this copy of the set on this file
    /// system: a set copied elsewhere has another. On a file system with coarse
    /// timestamps and a kernel before 6.13 (no multigrain timestamps), a rewrite within
    /// the same clock tick (a few milliseconds) as the review's look at the entry keeps
    /// its change time.
    #[must_use]
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"stockade change set digest 1\0");
        for c in self.entries() {
            entry(&mut h, c);
        }
        let mut out = String::from("sha256:");
        out.push_str(&hex::encode(h.finalize()));
        out
    }
}

/// Feeds `c` into `h`, every variable-length field prefixed by its length and every
/// optional one by its presence, so that no two different entries (or lists of entries)
/// feed the same bytes.
fn entry(h: &mut Sha256, c: &Change) {
    bytes(h, c.path.as_os_str().as_bytes());
    bytes(h, c.kind.as_str().as_bytes());
    bytes(h, c.entry.as_str().as_bytes());
    number(h, c.size);
    number(h, c.mode.map(u64::from));
    match &c.target {
        Some(t) => {
            h.update([1]);
            bytes(h, t.as_os_str().as_bytes());
        }
        None => h.update([0]),
    }
    h.update([u8::from(c.linked_outside)]);
    match c.hardlink {
        Some((dev, ino)) => {
            h.update([1]);
            h.update(dev.to_le_bytes());
            h.update(ino.to_le_bytes());
        }
        None => h.update([0]),
    }
    match c.seen {
        Some((ino, secs, nanos)) => {
            h.update([1]);
            h.update(ino.to_le_bytes());
            h.update(secs.to_le_bytes());
            h.update(nanos.to_le_bytes());
        }
        None => h.update([0]),
    }
}

fn bytes(h: &mut Sha256, b: &[u8]) {
    h.update((b.len() as u64).to_le_bytes());
    h.update(b);
}

fn number(h: &mut Sha256, n: Option<u64>) {
    match n {
        Some(n) => {
            h.update([1]);
            h.update(n.to_le_bytes());
        }
        None => h.update([0]),
    }
}
