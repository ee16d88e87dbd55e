//! Sets `cfg(stockade_asan)` when the crate is built with AddressSanitizer
//! (`-Zsanitizer=address`, as cargo-fuzz builds): the spawn then clears the poisoning the
//! child leaves on its reused stack (`backend/linux/clone.rs`). `cfg(sanitize = "address")`
//! itself needs the unstable `cfg_sanitize` feature; cargo hands the same fact to a build
//! script as `CARGO_CFG_SANITIZE` on any toolchain.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(stockade_asan)");
    println!("cargo::rerun-if-changed=build.rs");
    let sanitize = std::env::var("CARGO_CFG_SANITIZE").unwrap_or_default();
    if sanitize.split(',').any(|s| s == "address") {
        println!("cargo::rustc-cfg=stockade_asan");
    }
}
