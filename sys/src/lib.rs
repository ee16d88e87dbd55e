//! Raw FFI and thin syscall wrappers for stockade.
//!
//! This crate holds bindings and nothing else. It is `#![no_std]` without `alloc`, so none of
//! its wrappers can allocate: every function here may be called between `clone` and `execve`
//! in a child that shares the host's memory. The one exception is macOS's `sandbox_init`
//! (module `macos`, built only for macOS), which runs Apple's profile compiler.
//!
//! On Linux the wrappers issue the system call directly (`syscall` instruction) and return
//! the kernel's `-errno` as an [`Errno`] instead of writing the thread-local `errno`. A
//! child created with `CLONE_VM` runs on the parent thread's TLS block; a wrapper that
//! wrote `errno` there would write into the host's memory.
//!
//! File descriptors cross the API as [`BorrowedFd`] and [`OwnedFd`] (module [`fd`]), the
//! `no_std` counterparts of std's types; with the `std` feature they convert from and to
//! std's at no cost.
#![no_std]

pub mod fd;
pub use fd::{BorrowedFd, OwnedFd};

#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;

/// An error number returned by the kernel (`EPERM`, `ENOENT`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// The raw errno value.
    pub const fn raw(self) -> i32 {
        self.0
    }
}

/// The result of a wrapper: the syscall's non-negative return value, or its errno.
pub type Result<T> = core::result::Result<T, Errno>;
