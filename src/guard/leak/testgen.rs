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

/// CRC32 (IEEE), bit by bit: the definition, not the scanner's table.
pub(super) fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// `n` in base 62 (`0-9A-Za-z`), six digits with leading zeros.
pub(super) fn base62_6(mut n: u64) -> String {
    let digits = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = [b'0'; 6];
    for d in out.iter_mut().rev() {
        *d = digits[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(out.to_vec()).unwrap()
}

impl Gen {
    /// A GitHub- or npm-style token: `prefix`, 30 random characters and their checksum.
    pub(super) fn checksummed(&mut self, prefix: &str) -> String {
        let random = self.pick(ALNUM_CHARS, 30);
        let sum = base62_6(u64::from(crc32(random.as_bytes())));
        format!("{prefix}{random}{sum}")
    }
}
