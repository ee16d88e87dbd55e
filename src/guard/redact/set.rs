//! One set of needles (secret values and their encodings), its automaton and the filter
//! that keeps the automaton off most of the text.

use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input, MatchKind};

use super::encode::encodings;
use super::view;
use super::{MIN_SECRET_ENV_LEN, MIN_SECRET_LEN};

/// The needles of some secret values, and what searching for them takes.
pub(super) struct NeedleSet {
    automaton: AhoCorasick,
    /// Skips the text that cannot hold a needle, so the automaton runs on little of it.
    filter: GramFilter,
    /// Every needle (values and their encodings), sorted and deduplicated: the streaming
    /// adapter looks up whether the end of its buffer starts one.
    needles: Vec<Vec<u8>>,
    /// Whether some needle starts with this byte.
    first: [bool; 256],
    /// The length of the longest needle.
    longest: usize,
    /// How far from a gram of the filter a needle may reach: the longest needle of this
    /// set and of the set whose grams the filter also holds.
    reach: usize,
    /// How often [`NeedleSet::for_each_area`] samples a gram: often enough that the
    /// shortest needle of this set and of the set beside it holds a sampled gram.
    step: usize,
    /// The values, sorted and deduplicated.
    values: Vec<Vec<u8>>,
}

impl NeedleSet {
    /// The set for `values` (at least [`MIN_SECRET_ENV_LEN`] bytes each, sorted and
    /// deduplicated); `None` when there are none.
    ///
    /// With `beside`, the set's filter also admits the grams of `beside`, so that one pass
    /// of this set's filter finds the areas of both sets (see [`for_each_area`]).
    ///
    /// [`for_each_area`]: NeedleSet::for_each_area
    pub(super) fn build(values: Vec<Vec<u8>>, beside: Option<&NeedleSet>) -> Option<NeedleSet> {
        if values.is_empty() {
            return None;
        }
        let mut needles = Vec::with_capacity(values.len() * 11);
        for v in &values {
            encodings(v, &mut needles);
            // Text is searched as a terminal draws it: a value with escapes or silent
            // controls in it is found by what it draws.
            let drawn = view::of_value(v);
            if drawn != *v {
                needles.push(drawn);
            }
        }
        // Encoded forms shorter than MIN_SECRET_LEN would match common text; a value
        // itself may be shorter (a command's own secret, down to MIN_SECRET_ENV_LEN).
        needles.retain(|n| {
            n.len() >= MIN_SECRET_LEN
                || (n.len() >= MIN_SECRET_ENV_LEN && values.binary_search(n).is_ok())
        });
        needles.sort_unstable();
        needles.dedup();
        let mut first = [false; 256];
        for n in &needles {
            first[n[0] as usize] = true;
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            // A full DFA: one table lookup per byte, whatever the number of needles.
            .kind(Some(AhoCorasickKind::DFA))
            .build(&needles)
            .expect("literal needles always build");
        let longest = needles.iter().map(Vec::len).max().unwrap_or(0);
        let shortest = needles.iter().map(Vec::len).min().unwrap_or(MIN_SECRET_LEN);
        // Any needle contains a whole gram starting at one of `len - GRAM + 1` consecutive
        // positions: sample that often for the shortest needle of both sets.
        let step = (shortest.max(GRAM) - GRAM + 1).min(beside.map_or(usize::MAX, |o| o.step));
        let mut filter = GramFilter::new(&needles);
        if let Some(other) = beside {
            filter.add(&other.filter);
        }
        Some(NeedleSet {
            automaton,
            longest,
            reach: beside.map_or(longest, |o| o.reach.max(longest)),
            step,
            filter,
            first,
            needles,
            values,
        })
    }

    /// The values, sorted.
    pub(super) fn values(&self) -> &[Vec<u8>] {
        &self.values
    }

    /// How many needles (values and encodings) the set searches for.
    pub(super) fn needles(&self) -> usize {
        self.needles.len()
    }

    /// Calls `f` with the parts of `hay` that may hold a needle (of this set, or of the set
    /// it was built beside), in order, until `f` returns false; returns false when it did.
    ///
    /// The automaton costs a table lookup per byte; most text holds no needle. Every needle
    /// is at least [`MIN_SECRET_LEN`] (8) bytes long, so any occurrence contains one of the
    /// 4-byte grams sampled every 5 bytes (a command's shorter secret, down to 4 bytes,
    /// makes the sampling denser: every `len - 3` bytes). A sampled gram that occurs in no needle rules out
    /// its neighbourhood; what is left are the merged neighbourhoods (one needle length
    /// either side) of the grams that do occur in a needle. Every occurrence lies whole in
    /// one of them and they do not overlap, so searching them one by one finds the matches
    /// a search of the whole text finds.
    pub(super) fn for_each_area(
        &self,
        hay: &[u8],
        mut f: impl FnMut(Range<usize>) -> bool,
    ) -> bool {
        let reach = self.reach;
        let mut pending: Option<Range<usize>> = None;
        let mut i = 0;
        while i + GRAM <= hay.len() {
            if self.filter.contains(&hay[i..i + GRAM]) {
                let area = i.saturating_sub(reach - GRAM)..hay.len().min(i + reach);
                match &mut pending {
                    Some(p) if area.start <= p.end => p.end = area.end,
                    _ => {
                        if let Some(p) = pending.replace(area) {
                            if !f(p) {
                                return false;
                            }
                        }
                    }
                }
            }
            i += self.step;
        }
        pending.is_none_or(f)
    }

    /// Calls `f(start, end)` for each match in `hay[area]`, leftmost longest and not
    /// overlapping, until `f` returns false; returns false when it did.
    pub(super) fn search(
        &self,
        hay: &[u8],
        area: Range<usize>,
        f: &mut impl FnMut(usize, usize) -> bool,
    ) -> bool {
        let base = area.start;
        for m in self.automaton.find_iter(&hay[area]) {
            if !f(base + m.start(), base + m.end()) {
                return false;
            }
        }
        true
    }

    /// The leftmost-longest match in `hay[at..end]`.
    pub(super) fn find(&self, hay: &[u8], at: usize, end: usize) -> Option<Range<usize>> {
        let input = Input::new(&hay[..end]).range(at..end);
        self.automaton.find(input).map(|m| m.range())
    }

    /// Where the longest suffix of `buf` that is a proper prefix of some needle starts
    /// (`buf.len()` when there is none). Bytes from there on must wait for more input.
    pub(super) fn hold_from(&self, buf: &[u8]) -> usize {
        let from = buf.len().saturating_sub(self.longest.saturating_sub(1));
        for t in from..buf.len() {
            if !self.first[buf[t] as usize] {
                continue;
            }
            let tail = &buf[t..];
            // Needles that extend `tail` sort right after it.
            let i = self.needles.partition_point(|n| n.as_slice() <= tail);
            if self.needles.get(i).is_some_and(|n| n.starts_with(tail)) {
                return t;
            }
        }
        buf.len()
    }

    /// The automaton, for tests that compare with a search of the whole text.
    #[cfg(test)]
    pub(super) fn automaton(&self) -> &AhoCorasick {
        &self.automaton
    }
}

/// The gram length of [`GramFilter`]: no needle is shorter.
const GRAM: usize = 4;
const _: () = assert!(MIN_SECRET_ENV_LEN >= GRAM);

/// The set of 4-byte grams that occur in some needle: a 2^20-bit hashed bitmap in front of
/// a sorted list, so a miss costs one bit test.
struct GramFilter {
    bits: Vec<u64>,
    grams: Vec<u32>,
}

impl GramFilter {
    const HASH_BITS: u32 = 20;

    fn new(needles: &[Vec<u8>]) -> GramFilter {
        let mut grams: Vec<u32> = needles
            .iter()
            .flat_map(|n| n.windows(GRAM).map(gram))
            .collect();
        grams.sort_unstable();
        grams.dedup();
        let mut bits = vec![0u64; (1 << Self::HASH_BITS) / 64];
        for &g in &grams {
            let h = Self::hash(g);
            bits[h / 64] |= 1 << (h % 64);
        }
        GramFilter { bits, grams }
    }

    /// Adds the grams of `other`.
    fn add(&mut self, other: &GramFilter) {
        for (b, o) in self.bits.iter_mut().zip(&other.bits) {
            *b |= o;
        }
        self.grams.extend_from_slice(&other.grams);
        self.grams.sort_unstable();
        self.grams.dedup();
    }

    fn hash(g: u32) -> usize {
        (g.wrapping_mul(0x9e37_79b1) >> (32 - Self::HASH_BITS)) as usize
    }

    fn contains(&self, window: &[u8]) -> bool {
        let g = gram(window);
        let h = Self::hash(g);
        self.bits[h / 64] & (1 << (h % 64)) != 0 && self.grams.binary_search(&g).is_ok()
    }
}

fn gram(w: &[u8]) -> u32 {
    u32::from_le_bytes([w[0], w[1], w[2], w[3]])
}
