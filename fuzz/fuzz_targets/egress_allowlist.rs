//! The egress allowlist (`guard::egress::Allowlist`, `Cidr`, `Name`): any entries give an
//! answer; a name entry that parses allows its own name (at its port) and no name that
//! is not it or, for `*.`, below it.
//!
//! Input layout: lines; the first is the host asked for, the rest are entries.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::guard::egress::{Allowlist, Cidr, Name};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    let host = lines.next().unwrap_or_default();
    let entries: Vec<String> = lines.map(str::to_string).collect();
    for e in &entries {
        let _ = Cidr::parse(e);
    }
    let name = Name::parse(host);
    let Ok(list) = Allowlist::parse(&entries) else {
        return;
    };
    for port in [1u16, 80, 443, 65535] {
        let allowed = list.allows(host, port);
        assert!(!allowed || name.is_some());
        if let (true, Some(Name::Domain(d))) = (allowed, &name) {
            // Some entry names d or a domain d is strictly below.
            let ok = entries.iter().any(|e| {
                let h = e.rsplit_once(':').map_or(e.as_str(), |(h, _)| h);
                let (below, h) = match h.strip_prefix("*.") {
                    Some(r) => (true, r),
                    None => (false, h),
                };
                match Name::parse(h) {
                    Some(Name::Domain(x)) if below => d.ends_with(&format!(".{x}")),
                    Some(Name::Domain(x)) => *d == x,
                    _ => false,
                }
            });
            assert!(ok, "{d} allowed by {entries:?}");
        }
    }
    for e in &entries {
        if let Ok(one) = Allowlist::parse(std::slice::from_ref(e)) {
            let h = e.rsplit_once(':').map_or(e.as_str(), |(h, _)| h);
            if !h.starts_with("*.") && !e.contains('[') && e.matches(':').count() <= 1 {
                let port = e.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(443);
                assert!(one.allows(h, port), "{e:?} does not allow itself");
            }
        }
    }
});
