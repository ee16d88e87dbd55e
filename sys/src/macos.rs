//! macOS: the Seatbelt entry points of `libsystem_sandbox` (re-exported by `libSystem`).
//!
//! These are raw declarations and nothing else. `sandbox_init(3)` is marked deprecated in
//! Apple's headers but remains the documented way for a process to enter a sandbox described
//! by an SBPL profile string; Chromium and the `sandbox-exec(1)` tool use the same library.
//!
//! Unlike the Linux wrappers, these functions are not async-signal-safe: `sandbox_init`
//! compiles the profile inside `libsandbox` and allocates while doing so. stockade calls it
//! in the child between `fork` and `exec` anyway, as its one documented exception to the
//! post-fork rule (see `SECURITY.md`); the profile text itself is built by the parent.

use core::ffi::{CStr, c_char, c_int};

use crate::{BorrowedFd, Errno, Result};

/// The `flags` value that makes `sandbox_init` read `profile` as SBPL source text.
///
/// Apple's header names only `SANDBOX_NAMED` (`0x0001`, `profile` is the name of a built-in
/// profile); passing no flag means the string is the profile itself.
pub const SANDBOX_PROFILE_STRING: u64 = 0;

unsafe extern "C" {
    /// `sandbox_init(3)`: places the calling process, and every process it later creates,
    /// in the sandbox described by `profile`. It cannot be undone.
    ///
    /// Returns 0 on success. On failure it returns -1 and stores in `*errorbuf` a
    /// NUL-terminated message (the profile compiler's diagnostic) that the caller releases
    /// with [`sandbox_free_error`].
    ///
    /// # Safety
    ///
    /// - `profile` points to a NUL-terminated string that stays valid for the whole call;
    ///   with `flags` = [`SANDBOX_PROFILE_STRING`] it is SBPL source text.
    /// - `errorbuf` points to writable storage for one pointer.
    /// - The call allocates and takes locks inside `libsandbox`: in a child forked from a
    ///   multithreaded process this is only as safe as Apple's implementation makes it
    ///   (see the crate's `SECURITY.md`, "macOS post-fork exception").
    pub unsafe fn sandbox_init(
        profile: *const c_char,
        flags: u64,
        errorbuf: *mut *mut c_char,
    ) -> c_int;

    /// `sandbox_free_error(3)`: releases a message that [`sandbox_init`] stored.
    ///
    /// # Safety
    ///
    /// `errorbuf` is a pointer that `sandbox_init` stored in its `errorbuf` argument, not yet
    /// released, and not used again after this call.
    pub unsafe fn sandbox_free_error(errorbuf: *mut c_char);
}

/// `fgetxattr(2)`: reads the extended attribute `name` of `fd` into `buf` (from offset 0,
/// no options), returns its length.
pub fn fgetxattr(fd: BorrowedFd<'_>, name: &CStr, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: `name` is NUL-terminated and outlives the call; the kernel writes at most
    // `buf.len()` bytes into `buf`, which this call borrows exclusively.
    let n = unsafe {
        libc::fgetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            0,
        )
    };
    if n < 0 {
        // SAFETY: `__error` takes no argument and returns the calling thread's errno
        // location.
        let errno = unsafe { libc::__error() };
        // SAFETY: that location is valid for the thread's lifetime; it is read right
        // after the failed call.
        return Err(Errno(unsafe { *errno }));
    }
    Ok(n as usize)
}
