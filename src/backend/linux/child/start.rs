//! Child side of a command with an init: exec the init
//! ([`init`](crate::backend::linux::init), DESIGN). Runs in the setup child, after every
//! wall is up, under the rules of [`super`]: it shares the host's memory until this exec.
//!
//! # The order, and why it holds by construction
//!
//! The setup child execs the init image and starts nothing itself. The init, once it has
//! made itself non-dumpable, forks the program's process, which enters its nested
//! Landlock domain and execs the program (`init/src/program.rs`). So the program's first
//! instruction comes after this exec, in a process that never mapped the host's memory,
//! whose parent has left the host's memory, is not dumpable and which it can neither
//! trace nor open the `/proc` files of, whatever the scheduler does.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use stockade_sys::linux as sys;
use stockade_sys::{BorrowedFd, Errno};

use crate::backend::linux::init::Launch;
use crate::backend::linux::prepare::Exec;

/// Execs the init from its sealed memfd, with the program's environment (the init passes
/// it to the program's exec and clears its own copy). The report and status pipes and the
/// shared Landlock layer, when the command has one, must survive this one exec: the init
/// marks the pipes close-on-exec again first thing; the layer's fd stays open without the
/// flag until the program's process has entered it and closed it, and the init closes its
/// own copy right after its fork. Signals stay blocked: the init inherits the mask, so
/// none can end it before it has its signalfd. Returns only on failure, with the errno,
/// for the init's step.
pub(super) fn exec_init(init: &Launch, exec: &Exec) -> Errno {
    let shared = exec.shared_landlock.as_ref().map(|layer| layer.raw_fd());
    for fd in [Some(init.report_fd), Some(init.status_fd), shared]
        .into_iter()
        .flatten()
    {
        // SAFETY: the parent keeps the report and status pipes' write ends (in `init`) and
        // the shared layer (in `exec`) open until this child has exec'd or exited, and
        // `close_fds` keeps them; this child's fd table is its own (no CLONE_FILES).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Err(e) = sys::fcntl_setfd(fd, 0) {
            return e;
        }
    }
    // SAFETY: the sealed memfd is held open for the process's life (`init::image_fd`), and
    // `close_fds` keeps it.
    let image = unsafe { BorrowedFd::borrow_raw(init.image_fd) };
    // SAFETY: `init.argv` and the program's `envp` are NULL-terminated arrays of pointers
    // into `CString`s owned by `init` and by `exec`'s program, which the parent keeps alive
    // until this child has exec'd (CLONE_VFORK).
    unsafe {
        sys::execveat(
            image,
            c"",
            init.argv.as_ptr(),
            exec.program.envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    }
}
