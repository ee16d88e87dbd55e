//! Test tokens from a deterministic generator, so that no secret-shaped literal sits in
//! the repository.

/// splitmix64.
pub(super) struct Gen(pub(super) u64);

impl Gen {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `n` characters of `alphabet`, starting with one lower, one upper, one digit
    /// where the alphabet has them, so that the mixed-classes check passes.
    pub(super) fn pick(&mut self, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        let mut s: Vec<u8> = (0..n)
            .map(|_| a[(self.next() % a.len() as u64) as usize])
            .collect();
        let firsts = [b'k', b'Q', b'7'];
        let mut k = 0;
        for f in firsts {
            if a.contains(&f) && k < n {
                s[k] = f;
                k += 1;
            }
        }
        String::from_utf8(s).unwrap()
    }
}

pub(super) const ALNUM_CHARS: &str =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
