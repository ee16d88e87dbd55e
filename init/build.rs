//! Builds the init's executable image from `image.rs` (and the modules it includes) into
//! `$OUT_DIR/stockade-init`, which `src/lib.rs` carries as bytes.
//!
//! # The route, and why
//!
//! The image must come out of a plain `cargo build`: no extra rustup target, no C
//! compiler, no second cargo. So this script calls the `rustc` that cargo uses (`$RUSTC`)
//! once, for the target being built (`$TARGET`, whose `core` is installed since cargo is
//! building for it), on a `#![no_std] #![no_main]` crate root with its own `_start`:
//!
//! - `-C panic=abort`: no unwinding machinery (the panic handler exits);
//! - `-C relocation-model=static` and `-static -nostdlib` at link time: a fixed-address ELF
//!   that needs no loader and no relocation at startup;
//! - `-C linker=rust-lld -C linker-flavor=ld.lld`: the LLVM linker every rustup toolchain
//!   ships (`lib/rustlib/<host>/bin/rust-lld`, which rustc finds by itself);
//! - `-C opt-level=s`, one codegen unit, symbols stripped: a few KiB.
//!
//! A toolchain without `rust-lld` (some distribution packages) falls back to the system's
//! `cc` as the linker driver, with the same static, start-file-free link. Only when both
//! fail does the build stop, with both errors.
//!
//! Only Linux targets get an image; elsewhere the crate is the protocol only.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the image is built from: `src` as a whole (cargo scans a directory for any
/// change), so that a module added to the image can never be left out of this list.
const SOURCES: &[&str] = &["image.rs", "src", "build.rs"];

fn main() {
    for s in SOURCES {
        println!("cargo:rerun-if-changed={s}");
    }
    println!("cargo:rerun-if-env-changed=RUSTC");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let out = out_dir.join("stockade-init");
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());

    let lld = [
        "-C",
        "linker=rust-lld",
        "-C",
        "linker-flavor=ld.lld",
        "-C",
        "link-arg=-static",
        "-C",
        "link-arg=-nostdlib",
        "-C",
        "link-arg=--build-id=none",
    ];
    let cc = [
        "-C",
        "linker=cc",
        "-C",
        "link-arg=-static",
        "-C",
        "link-arg=-nostdlib",
        "-C",
        "link-arg=-nostartfiles",
        "-C",
        "link-arg=-Wl,--build-id=none",
    ];
    let mut errors = Vec::new();
    for (name, link) in [("rust-lld", &lld[..]), ("cc", &cc[..])] {
        match build(&rustc, &target, &root, &out_dir, &out, link) {
            Ok(()) => {
                check(&out);
                return;
            }
            Err(e) => errors.push(format!("with {name}:\n{e}")),
        }
    }
    panic!(
        "stockade-init: cannot build the init image for {target} with {}.\n\
         The image is a static no_std ELF linked by the toolchain's rust-lld (shipped by \
         rustup) or, failing that, by the system's cc.\n\n{}",
        Path::new(&rustc).display(),
        errors.join("\n")
    );
}

fn build(
    rustc: &std::ffi::OsStr,
    target: &str,
    root: &Path,
    out_dir: &Path,
    out: &Path,
    link: &[&str],
) -> Result<(), String> {
    let output = Command::new(rustc)
        .arg(root.join("image.rs"))
        .args([
            "--edition",
            "2024",
            "--crate-type",
            "bin",
            "--crate-name",
            "stockade_init_image",
            "--target",
            target,
            "-C",
            "panic=abort",
            "-C",
            "opt-level=s",
            "-C",
            "codegen-units=1",
            "-C",
            "debuginfo=0",
            "-C",
            "strip=symbols",
            "-C",
            "relocation-model=static",
            "-C",
            "force-unwind-tables=no",
            "-C",
            "target-feature=+crt-static",
        ])
        .args(self_contained_off())
        .args(link)
        .arg("-o")
        .arg(out)
        // Intermediate files (one object) stay in OUT_DIR.
        .env("TMPDIR", out_dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(rustc).display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// musl targets add their own start files (a `crt1.o` with a `_start`) unless told not to;
/// the image brings its own `_start` and no libc. Other targets take no such option (rustc
/// 1.87 refuses it for them: "not supported on this target").
fn self_contained_off() -> &'static [&'static str] {
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("musl") {
        &["-C", "link-self-contained=no"]
    } else {
        &[]
    }
}

/// The output is a static ELF executable of a few KiB, or the build is wrong.
fn check(out: &Path) {
    let bytes = std::fs::read(out).expect("the image was just written");
    assert!(
        bytes.starts_with(b"\x7fELF"),
        "stockade-init: {} is not an ELF file",
        out.display()
    );
    // e_type at offset 16: ET_EXEC (2), a fixed-address executable that needs no loader.
    assert_eq!(
        bytes.get(16),
        Some(&2),
        "stockade-init: the image is not a static executable"
    );
    assert!(
        bytes.len() < 64 * 1024,
        "stockade-init: the image is {} bytes, expected a few KiB",
        bytes.len()
    );
}
