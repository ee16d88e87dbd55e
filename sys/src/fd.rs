//! Borrowed and owned file descriptors, for a `#![no_std]` crate.
//!
//! `core` has no fd types, so this module carries the two that the wrappers need, with
//! the same contract as std's `BorrowedFd` and `OwnedFd` (I/O safety): a [`BorrowedFd`]
//! is open for its lifetime `'fd`, and an [`OwnedFd`] is open and closed exactly once, by
//! its owner. A wrapper that takes a [`BorrowedFd`] therefore acts only on an fd that its
//! caller holds, and a wrapper that returns a new fd hands it over as an [`OwnedFd`].
//!
//! With the `std` feature, both convert to and from std's types at no cost (`From`).
//! Nothing else in this crate uses `std`: the wrappers still cannot allocate.

use core::ffi::c_int;
use core::marker::PhantomData;

/// An fd borrowed for `'fd`: it stays open at least that long.
///
/// [`CWD`] is the one value that is not an fd: `AT_FDCWD`, accepted by the `*at` calls
/// as "relative to the working directory".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct BorrowedFd<'fd> {
    fd: c_int,
    _borrow: PhantomData<&'fd OwnedFd>,
}

/// `AT_FDCWD` as a [`BorrowedFd`], for the `*at` calls; never closed, never read from.
pub const CWD: BorrowedFd<'static> = BorrowedFd {
    fd: libc::AT_FDCWD,
    _borrow: PhantomData,
};

impl BorrowedFd<'_> {
    /// Borrows `fd` for `'fd`.
    ///
    /// # Safety
    ///
    /// `fd` is open and stays open (is not closed or replaced by `dup2`) for all of `'fd`,
    /// and whoever owns it allows this use. It is not -1.
    pub const unsafe fn borrow_raw(fd: c_int) -> Self {
        Self {
            fd,
            _borrow: PhantomData,
        }
    }

    /// The fd number; the caller must not close it.
    pub const fn as_raw_fd(self) -> c_int {
        self.fd
    }
}

/// An open fd, closed (with a raw `close(2)`, which allocates nothing) when dropped.
#[derive(Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct OwnedFd {
    fd: c_int,
}

impl OwnedFd {
    /// Takes ownership of `fd`.
    ///
    /// # Safety
    ///
    /// `fd` is open, owned by nothing else, and not used through its number once this
    /// value is dropped or converted.
    pub const unsafe fn from_raw_fd(fd: c_int) -> Self {
        Self { fd }
    }

    /// Borrows the fd for as long as `self` lives.
    pub const fn as_fd(&self) -> BorrowedFd<'_> {
        BorrowedFd {
            fd: self.fd,
            _borrow: PhantomData,
        }
    }

    /// The fd number, still owned by `self`.
    pub const fn as_raw_fd(&self) -> c_int {
        self.fd
    }

    /// Gives up ownership: the fd stays open and the caller is responsible for it.
    pub fn into_raw_fd(self) -> c_int {
        let fd = self.fd;
        core::mem::forget(self);
        fd
    }
}

#[cfg(target_os = "linux")]
impl Drop for OwnedFd {
    fn drop(&mut self) {
        // SAFETY: `self` owns `fd` (the contract of `from_raw_fd`) and is being dropped, so
        // nothing uses the number afterwards. As with std, an error (EINTR, EIO) is lost.
        let _ = unsafe { crate::linux::close_raw(self.fd) };
    }
}

#[cfg(not(target_os = "linux"))]
impl Drop for OwnedFd {
    fn drop(&mut self) {
        // SAFETY: `self` owns `fd` and is being dropped; `close` takes no pointer.
        let _ = unsafe { libc::close(self.fd) };
    }
}

#[cfg(feature = "std")]
mod std_conversions {
    extern crate std;

    use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};

    use super::{BorrowedFd, OwnedFd};

    impl<'fd> From<std::os::fd::BorrowedFd<'fd>> for BorrowedFd<'fd> {
        fn from(fd: std::os::fd::BorrowedFd<'fd>) -> Self {
            // SAFETY: std's `BorrowedFd<'fd>` already promises that the fd is open for
            // `'fd`; the lifetime is carried over unchanged.
            unsafe { BorrowedFd::borrow_raw(fd.as_raw_fd()) }
        }
    }

    impl<'fd> From<BorrowedFd<'fd>> for std::os::fd::BorrowedFd<'fd> {
        fn from(fd: BorrowedFd<'fd>) -> Self {
            // SAFETY: this crate's `BorrowedFd<'fd>` promises that the fd is open for
            // `'fd`; the lifetime is carried over unchanged.
            unsafe { std::os::fd::BorrowedFd::borrow_raw(fd.as_raw_fd()) }
        }
    }

    impl From<std::os::fd::OwnedFd> for OwnedFd {
        fn from(fd: std::os::fd::OwnedFd) -> Self {
            // SAFETY: `into_raw_fd` hands over std's ownership of the open fd.
            unsafe { OwnedFd::from_raw_fd(fd.into_raw_fd()) }
        }
    }

    impl From<OwnedFd> for std::os::fd::OwnedFd {
        fn from(fd: OwnedFd) -> Self {
            // SAFETY: `into_raw_fd` hands over this crate's ownership of the open fd.
            unsafe { std::os::fd::OwnedFd::from_raw_fd(fd.into_raw_fd()) }
        }
    }
}
