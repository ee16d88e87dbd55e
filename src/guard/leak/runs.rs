//! The run finder: the maximal runs of base64/hex characters long enough to hold a token.
//!
//! Every token shape but the PEM header is a run of at least 20 bytes from
//! `[A-Za-z0-9+/_-]`. The text is classified 64 bytes at a time into a bit mask, with SSE2
//! (and AVX2 where the CPU has it) or a portable loop the compiler vectorizes, and a few
//! shifts of the mask show whether a long enough run starts in the block; ordinary prose
//! has none, so almost all of it is passed over without a branch per byte.

use super::class::{RUN, is};

/// One bit per byte of a 64-byte block: set where the byte is in [`RUN`].
#[inline(always)]
fn run_mask(block: &[u8; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86_64 baseline, every x86_64 CPU has it.
        unsafe { run_mask_sse2(block) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        run_mask_portable(block)
    }
}

/// [`run_mask`] 16 bytes at a time: two range tests and four equality tests per vector,
/// and `pmovmskb` to collect the bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn run_mask_sse2(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        _mm_add_epi8, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };
    // Shifted so that the range starts at i8::MIN: one signed comparison tests it.
    let shift = |lo: u8| _mm_set1_epi8(0x80u8.wrapping_sub(lo) as i8);
    let below = |n: u8| _mm_set1_epi8(i8::MIN.wrapping_add(n as i8));
    let mut m = 0u64;
    for (j, c) in block.chunks_exact(16).enumerate() {
        // SAFETY: `c` is 16 readable bytes, and `loadu` needs no alignment.
        let v = unsafe { _mm_loadu_si128(c.as_ptr().cast()) };
        let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
        let alpha = _mm_cmplt_epi8(_mm_add_epi8(folded, shift(b'a')), below(26));
        let digit = _mm_cmplt_epi8(_mm_add_epi8(v, shift(b'0')), below(10));
        let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
        let sym = _mm_or_si128(
            _mm_or_si128(eq(b'+'), eq(b'/')),
            _mm_or_si128(eq(b'-'), eq(b'_')),
        );
        let any = _mm_or_si128(_mm_or_si128(alpha, digit), sym);
        m |= u64::from(_mm_movemask_epi8(any) as u16) << (16 * j);
    }
    m
}

/// [`run_mask`] without vector intrinsics. The byte test is written with comparisons
/// rather than a table lookup so that the compiler vectorizes it; the 0/1 bytes are then
/// packed eight at a time with a multiply (byte i of the product's top byte collects bit i).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn run_mask_portable(block: &[u8; 64]) -> u64 {
    let mut flags = [0u8; 64];
    for (f, &b) in flags.iter_mut().zip(block) {
        let alpha = (b | 0x20).wrapping_sub(b'a') < 26;
        let digit = b.wrapping_sub(b'0') < 10;
        let sym = (b == b'+') | (b == b'/') | (b == b'-') | (b == b'_');
        *f = u8::from(alpha | digit | sym);
    }
    let mut m = 0u64;
    for (j, eight) in flags.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes(eight.try_into().expect("8 bytes"));
        m |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * j);
    }
    m
}

/// The run mask of the 64 bytes at `at` (zero past the end of `hay`).
///
/// Near the end, the mask of the last 64 bytes is shifted into place, and a text shorter
/// than 64 bytes is classified byte by byte: copying the tail into a padded block and
/// loading it back as vectors would stall on store forwarding, and the short texts (the
/// decoded forms of candidate runs) are common.
#[inline(always)]
fn mask_at(hay: &[u8], at: usize) -> u64 {
    let n = hay.len();
    if let Some(b) = hay.get(at..at + 64) {
        return run_mask(b.try_into().expect("64 bytes"));
    }
    if at >= n {
        return 0;
    }
    if n >= 64 {
        return run_mask(hay[n - 64..].try_into().expect("64 bytes")) >> (at - (n - 64));
    }
    hay[at..]
        .iter()
        .enumerate()
        .fold(0, |m, (k, &b)| m | u64::from(is(b, RUN)) << k)
}

/// The maximal runs of [`RUN`] bytes at least `MIN` (≤ 64) long, in order.
///
/// The text is classified 64 bytes at a time into a bit mask, without a branch per byte;
/// shifting and and-ing the mask of two consecutive blocks with itself leaves a bit set
/// exactly where `MIN` class bytes in a row begin. For long texts this is done ahead for
/// up to a scanner block (64 KiB) at a time, into a table of start bits (with AVX2 where the CPU has
/// it), and the search skips the zero entries, which are nearly all of ordinary text. A
/// run is walked once to its end and the search resumes after it, so the whole pass is
/// linear.
pub(super) struct Runs<'h, const MIN: usize> {
    hay: &'h [u8],
    /// The 64-byte block being looked at.
    b: usize,
    /// Starts before this offset belong to a run already reported.
    resume: usize,
    /// The start bits of blocks `first..first + starts.len()`, computed ahead.
    first: usize,
    starts: Vec<u64>,
    /// Room for the masks the table is computed from.
    masks: Vec<u64>,
}

/// Texts shorter than this are not worth a table of start bits.
const TABLE_MIN: usize = 4096;

/// Where runs of `MIN` class bytes begin in the block with mask `cur`, followed by `next`.
#[inline(always)]
fn starts_in<const MIN: usize>(cur: u64, next: u64) -> u64 {
    let mut r = u128::from(next) << 64 | u128::from(cur);
    let mut have = 1;
    while have < MIN {
        let s = have.min(MIN - have);
        r &= r >> s;
        have += s;
    }
    r as u64
}

impl<'h, const MIN: usize> Runs<'h, MIN> {
    pub(super) fn new(hay: &'h [u8]) -> Runs<'h, MIN> {
        const { assert!(1 <= MIN && MIN <= 64) };
        Runs {
            hay,
            b: 0,
            resume: 0,
            first: 0,
            starts: Vec::new(),
            masks: Vec::new(),
        }
    }

    /// The start bits of block `b`, from the table, which is refilled up to `limit` when
    /// enough text is left.
    #[inline(always)]
    fn starts_of(&mut self, b: usize, limit: usize) -> u64 {
        if let Some(&st) = self.starts.get(b.wrapping_sub(self.first)) {
            return st;
        }
        let base = b * 64;
        let full = self.hay.len() / 64;
        if limit - base >= TABLE_MIN && full > b + 1 {
            let count = (limit - base).div_ceil(64).min(full - b - 1);
            self.masks.clear();
            masks(&self.hay[base..(b + count + 1) * 64], &mut self.masks);
            self.starts.clear();
            self.starts
                .extend(self.masks.windows(2).map(|w| starts_in::<MIN>(w[0], w[1])));
            self.first = b;
            return self.starts[0];
        }
        starts_in::<MIN>(mask_at(self.hay, base), mask_at(self.hay, base + 64))
    }

    /// The next run that starts in a 64-byte block starting before `limit`.
    #[inline]
    pub(super) fn next_before(&mut self, limit: usize) -> Option<(usize, usize)> {
        let hay = self.hay;
        let n = hay.len();
        let end = limit.min(n);
        loop {
            let base = self.b * 64;
            if base >= end {
                return None;
            }
            // Skip the blocks of the table without a start.
            let table = self.starts.get(self.b.wrapping_sub(self.first)..);
            if let Some(rest) = table.filter(|rest| !rest.is_empty()) {
                if self.resume <= base {
                    let blocks = (end - base).div_ceil(64).min(rest.len());
                    match rest[..blocks].iter().position(|&st| st != 0) {
                        Some(k) => self.b += k,
                        None => {
                            self.b += blocks;
                            continue;
                        }
                    }
                }
            }
            let base = self.b * 64;
            let mut starts = self.starts_of(self.b, limit);
            if self.resume > base {
                let k = self.resume - base;
                starts = if k >= 64 { 0 } else { starts & (!0u64 << k) };
            }
            if starts != 0 {
                let p = base + starts.trailing_zeros() as usize;
                let mut e = p + MIN;
                while e < n && is(hay[e], RUN) {
                    e += 1;
                }
                self.resume = e + 1;
                return Some((p, e));
            }
            if self.resume > base + 128 {
                // A long run: jump to the block where it ended.
                self.b = self.resume / 64;
            } else {
                self.b += 1;
            }
        }
    }
}

/// Appends the run masks of the 64-byte blocks of `bytes` (a multiple of 64 long).
fn masks(bytes: &[u8], out: &mut Vec<u64>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, just checked.
        unsafe { masks_avx2(bytes, out) };
        return;
    }
    out.extend(
        bytes
            .chunks_exact(64)
            .map(|c| run_mask(c.try_into().expect("64 bytes"))),
    );
}

/// [`masks`] 32 bytes at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn masks_avx2(bytes: &[u8], out: &mut Vec<u64>) {
    use std::arch::x86_64::{
        _mm256_add_epi8, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
    };
    let shift = |lo: u8| _mm256_set1_epi8(0x80u8.wrapping_sub(lo) as i8);
    let below = |n: u8| _mm256_set1_epi8(i8::MIN.wrapping_add(n as i8));
    let class32 = |c: &[u8]| {
        debug_assert_eq!(c.len(), 32);
        // SAFETY: `c` is 32 readable bytes, and `loadu` needs no alignment.
        let v = unsafe { _mm256_loadu_si256(c.as_ptr().cast()) };
        let folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        let alpha = _mm256_cmpgt_epi8(below(26), _mm256_add_epi8(folded, shift(b'a')));
        let digit = _mm256_cmpgt_epi8(below(10), _mm256_add_epi8(v, shift(b'0')));
        let eq = |b: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b as i8));
        let sym = _mm256_or_si256(
            _mm256_or_si256(eq(b'+'), eq(b'/')),
            _mm256_or_si256(eq(b'-'), eq(b'_')),
        );
        let any = _mm256_or_si256(_mm256_or_si256(alpha, digit), sym);
        u64::from(_mm256_movemask_epi8(any) as u32)
    };
    out.extend(
        bytes
            .chunks_exact(64)
            .map(|c| class32(&c[..32]) | class32(&c[32..]) << 32),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::leak::patterns::MIN_TOKEN;
    use crate::guard::leak::testgen::Gen;

    /// Calls `f(start, end)` for every maximal run of [`RUN`] bytes at least `min` (≤ 64) long.
    fn for_each_run(hay: &[u8], min: usize, f: impl FnMut(usize, usize)) {
        fn each<const MIN: usize>(hay: &[u8], mut f: impl FnMut(usize, usize)) {
            let mut runs = Runs::<MIN>::new(hay);
            while let Some((s, e)) = runs.next_before(hay.len()) {
                f(s, e);
            }
        }
        match min {
            1 => each::<1>(hay, f),
            5 => each::<5>(hay, f),
            20 => each::<20>(hay, f),
            24 => each::<24>(hay, f),
            64 => each::<64>(hay, f),
            _ => panic!("for_each_run is instantiated for min 1, 5, 20, 24 and 64, not {min}"),
        }
    }

    #[test]
    fn runs_are_found_once_each() {
        let text = b"short words only, then aaaaaaaaaaaaaaaaaaaaaaaaa and bbbbbbbbbbbbbbbbbbbbb.";
        let mut runs = Vec::new();
        for_each_run(text, MIN_TOKEN, |s, e| runs.push(s..e));
        assert_eq!(runs, [23..48, 53..74]);
    }

    #[test]
    fn runs_match_a_byte_by_byte_definition() {
        let mut g = Gen(9);
        for round in 0..300 {
            let len = (g.next() % 700) as usize;
            let sep = [b' ', b'.', b'=', 0xc3];
            let text: Vec<u8> = (0..len)
                .map(|_| match g.next() % 8 {
                    0 => sep[(g.next() % 4) as usize],
                    _ => b"aZ9+/-_x"[(g.next() % 8) as usize],
                })
                .collect();
            for min in [1, 5, 20, 24, 64] {
                let mut want = Vec::new();
                let mut i = 0;
                while i < text.len() {
                    let s = i;
                    while i < text.len() && is(text[i], RUN) {
                        i += 1;
                    }
                    if i - s >= min {
                        want.push(s..i);
                    }
                    i += 1;
                }
                let mut got = Vec::new();
                for_each_run(&text, min, |s, e| got.push(s..e));
                assert_eq!(got, want, "round {round} min {min}");
            }
        }
    }

    #[test]
    fn run_masks_match_the_class_table() {
        let mut g = Gen(10);
        for round in 0..64 {
            let mut block = [0u8; 64];
            for (k, b) in block.iter_mut().enumerate() {
                *b = if round < 4 {
                    (round * 64 + k) as u8
                } else {
                    g.next() as u8
                };
            }
            let want = (0..64).fold(0u64, |m, k| m | u64::from(is(block[k], RUN)) << k);
            assert_eq!(run_mask(&block), want, "round {round}");
            assert_eq!(run_mask_portable(&block), want, "round {round}");
            let mut ms = Vec::new();
            masks(&block, &mut ms);
            assert_eq!(ms, [want], "round {round}");
        }
    }
}
