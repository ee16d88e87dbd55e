//! Child side: enter the sandbox between `fork` and `exec`.
//!
//! Everything here runs in the forked child of a possibly multithreaded host. It touches only
//! the parent's [`Prepared`] and a caller-provided buffer: no allocation, no lock, no
//! formatting on the Rust side. `sandbox_init` itself is the exception (see
//! [`apply_in_child`]).
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use core::ffi::{CStr, c_char};
use core::ptr;

use stockade_sys::macos::{SANDBOX_PROFILE_STRING, sandbox_free_error, sandbox_init};

use super::Prepared;

/// The size of the failure report: the first bytes of `sandbox_init`'s message.
///
/// Together with the spawn path's fixed header it stays well under `PIPE_BUF` (512 on
/// macOS), so the record goes through the pipe in one `write(2)`.
pub const REPORT_LEN: usize = 256;

/// Places the calling process in the sandbox of `prepared`. Call it only in the child,
/// after `fork` and before `exec`: the sandbox cannot be left, and it is inherited by
/// everything the process runs.
///
/// On failure, copies up to [`REPORT_LEN`] bytes of the profile compiler's message into
/// `report` (no NUL terminator) and returns `Err(n)`, the number of bytes copied: 0 when
/// `sandbox_init` gave no message. The parent decodes them with
/// [`crate::backend::sbpl::InitError::from_report`].
///
/// # Errors
///
/// `Err(n)` as above when `sandbox_init` refuses the profile.
///
/// # Platform
///
/// macOS only. On Linux the namespaces, Landlock and seccomp of `backend::linux` play this
/// part; elsewhere there is no sandbox to enter.
pub fn apply_in_child(prepared: &Prepared, report: &mut [u8; REPORT_LEN]) -> Result<(), usize> {
    let mut message: *mut c_char = ptr::null_mut();
    // POST-FORK EXCEPTION: `sandbox_init` runs Apple's SBPL compiler in this process, and
    // that compiler allocates (and may take libmalloc's locks). No async-signal-safe way to
    // enter a Seatbelt sandbox exists, and the parent cannot do it on the child's behalf
    // (the sandbox applies to the calling process and would confine the host). stockade
    // keeps its own side allocation-free: the profile text is the parent's `CString`, and
    // the message is copied into a caller-provided buffer. SECURITY.md documents this.
    //
    // SAFETY: `prepared.profile()` is a NUL-terminated string owned by `prepared`, which the
    // caller borrows for the whole call; with `SANDBOX_PROFILE_STRING` it is read as SBPL
    // text. `&mut message` points to a live local that receives at most one pointer.
    let rc = unsafe {
        sandbox_init(
            prepared.profile().as_ptr(),
            SANDBOX_PROFILE_STRING,
            &mut message,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    if message.is_null() {
        return Err(0);
    }
    // SAFETY: on failure `sandbox_init` stored a NUL-terminated string of its own in
    // `message`; it stays valid until `sandbox_free_error`, and `text` is not used after
    // that call. `CStr::from_ptr` only scans for the NUL (no allocation).
    let text = unsafe { CStr::from_ptr(message) }.to_bytes();
    let mut copied = 0;
    for (dst, src) in report.iter_mut().zip(text) {
        *dst = *src;
        copied += 1;
    }
    // SAFETY: `message` came from `sandbox_init` above and is released exactly once; the
    // bytes it held were copied into `report` and `text` is not read again.
    unsafe { sandbox_free_error(message) };
    Err(copied)
}
