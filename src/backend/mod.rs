//! Backends: the only place that fans out on `cfg(target_os)`.
//!
//! Each backend turns a plan into what its platform needs: on Linux a Landlock ruleset fd
//! and a seccomp BPF program built in the parent, replayed allocation-free in the child.

#[cfg(target_os = "linux")]
pub mod linux;
