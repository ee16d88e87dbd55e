//! Any bytes as a policy config: parsing never panics (also the error path, which computes
//! the key, line and column), and a policy that parses serializes back to TOML that parses
//! to the same policy.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stockade::Policy;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(policy) = Policy::from_toml(&text) else {
        return;
    };
    let again = toml::to_string(&policy).expect("a parsed policy serializes");
    let back =
        Policy::from_toml(&again).unwrap_or_else(|e| panic!("round trip failed: {e}\n{again}"));
    assert_eq!(policy, back, "{again}");
});
