//! The init of a stockade sandbox, and the protocol it speaks with the host.
//!
//! PID 1 of a sandbox (layer 1), or its child subreaper (layer 2, no PID namespace), is a
//! tiny init whose executable image is built from this crate's own source by its build
//! script: `image.rs` with the modules [`protocol`], `sys`, `run`, `program` and `session`, compiled by the same
//! `rustc` that builds the crate, for the same target, `no_std` and `no_main`, statically
//! linked with the toolchain's `rust-lld`, without a C library or a C compiler. The host
//! carries the bytes ([`IMAGE`]), writes them into a sealed memfd and execs that memfd at
//! the end of a sandbox's setup, so no page of the host's memory remains inside.
//!
//! The library part is what the host needs ([`protocol`], [`IMAGE`]); the init's own code
//! (`sys`, `run`) is also compiled here, for the host's lints and unit tests, and only the
//! image's entry point (`image.rs`: `_start`, the panic handler) lives outside it.
#![no_std]

pub mod protocol;

// The image's entry point calls these; in the library they are compiled for lints and
// unit tests only.
#[cfg(target_os = "linux")]
#[allow(dead_code)]
mod program;
#[cfg(target_os = "linux")]
#[allow(dead_code)]
mod run;
#[cfg(target_os = "linux")]
#[allow(dead_code)]
mod session;
#[cfg(target_os = "linux")]
#[allow(dead_code)]
mod sys;

/// The init's executable image: a static ELF for the target this crate is built for.
#[cfg(target_os = "linux")]
pub static IMAGE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/stockade-init"));
