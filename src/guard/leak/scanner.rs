//! The one-pass block scanner: every search over the input, a block at a time.

use super::encodings::{MIN_DECODED, Scratch, UrlCursor, scan_run, scan_url};
use super::finding::{Encoding, Finding, Fingerprint, PatternName};
use super::host::HostPatterns;
use super::patterns::{MIN_TOKEN, pem_hits, run_hits, userinfo_hits};
use super::runs::Runs;

/// How much text [`scan`] looks at in one go: small enough to stay in the L2 cache between
/// the searches that go over it.
const BLOCK: usize = 64 * 1024;

/// Every finding in `hay`, the built-in formats' and `host`'s, sorted by position.
///
/// One pass over the text, [`BLOCK`] bytes at a time: the `%` and PEM header searches
/// and the run finder go over a block while it is in cache, and every candidate run is
/// checked and decoded as soon as it is found (its decoded windows go through `host`'s
/// patterns too). With host patterns, their set makes one more pass over the raw text.
pub(super) fn scan(hay: &[u8], host: &HostPatterns) -> Vec<Finding> {
    let mut scratch = Scratch::new(host);
    let mut findings = Vec::new();
    let mut raw = Vec::new();
    let mut runs = Runs::<MIN_TOKEN>::new(hay);
    let mut url = UrlCursor::default();
    let mut pem = 0;
    let mut userinfo = 0;
    let mut until = 0;
    while until < hay.len() {
        until = hay.len().min(until + BLOCK);
        scan_url(hay, &mut url, until, &mut scratch, &mut findings);
        pem_hits(hay, &mut pem, until, &mut raw);
        userinfo_hits(hay, &mut userinfo, until, &mut raw);
        while let Some((s, e)) = runs.next_before(until) {
            run_hits(hay, s, e, &mut raw);
            if e - s >= MIN_DECODED {
                scan_run(hay, s..e, &mut scratch, &mut findings);
            }
        }
    }
    findings.extend(raw.into_iter().map(|h| Finding {
        pattern: PatternName::builtin(h.pattern),
        encoding: Encoding::Raw,
        fingerprint: Fingerprint::of(&hay[h.range.clone()]),
        range: h.range,
    }));
    let mut host_hits = Vec::new();
    host.hits(hay, &mut host_hits);
    findings.extend(host_hits.into_iter().map(|h| Finding {
        pattern: host.name(h.index),
        encoding: Encoding::Raw,
        fingerprint: Fingerprint::of(&hay[h.range.clone()]),
        range: h.range,
    }));

    // The same secret found twice at one place (raw, and inside a decoded URL run) is
    // reported once, raw.
    findings.sort_by(|a, b| {
        (a.range.start, a.range.end, &a.pattern, a.encoding).cmp(&(
            b.range.start,
            b.range.end,
            &b.pattern,
            b.encoding,
        ))
    });
    findings.dedup_by(|a, b| a.range == b.range && a.pattern == b.pattern);
    findings
}
