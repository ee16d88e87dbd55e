//! The one `clone` call, and the threads that make it.
//!
//! # Why not `fork`, and why not std's `pre_exec`
//!
//! `fork()` copies the host's page tables: about 31 ms for a host with 2 GiB touched,
//! against under 2 ms for `clone(CLONE_VM | CLONE_VFORK | namespace flags)`, whose child
//! shares the host's memory until it execs. std's `pre_exec` always forks. So stockade
//! clones by itself, as `posix_spawn` does, and the child follows the rules in
//! [`super::child`].
//!
//! # Why spawner threads
//!
//! `PR_SET_PDEATHSIG` fires when the parent *thread* exits, not the parent process. A
//! sandbox spawned from a tokio blocking thread would be killed when that thread retires
//! after its idle timeout. So every clone is made by one of a few spawner threads that live
//! as long as the process; the calling thread hands the prepared spawn over and waits. With
//! `CLONE_VFORK` a spawner is suspended while its child sets up, so there are several of
//! them for concurrent spawns: a new one starts when a spawn finds none idle, up to one per
//! CPU (2 to 8). Starting the whole pool up front cost a process that spawns once about
//! 0.3 ms.
//!
//! The process's main thread clones by itself, on a child stack of its own: it ends only
//! with the process (Rust's `main` returning exits the process; only a raw `pthread_exit`
//! would end it alone, and then the sandbox dies with it, as its parent-death signal says).
//! So a program that spawns from `main`, such as the CLI, starts no thread at all and pays
//! no hand-over between threads.
//!
//! # Signals
//!
//! All signals are blocked around `clone`, so no host handler can run in the child while
//! it shares the host's memory; the child resets every disposition before unblocking.

use std::ffi::c_void;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use super::child;
use super::prepare::{Exec, Layout};
use crate::error::SpawnError;

/// Size of each child stack. The child's frames are small and its depth is fixed.
const STACK_SIZE: usize = 256 * 1024;
/// The guard page below each child stack.
const GUARD: usize = 4096;

type Reply = io::Result<(libc::pid_t, OwnedFd)>;

struct Job {
    layout: Arc<Layout>,
    exec: Exec,
    flags: libc::c_int,
    reply: mpsc::SyncSender<Reply>,
}

/// Runs `clone` for a prepared spawn on a spawner thread and returns the child's pid and
/// pidfd once the child has exec'd or exited.
///
/// # Errors
///
/// [`SpawnError::Os`] when the clone fails or the spawner threads are gone.
pub fn launch(
    layout: Arc<Layout>,
    exec: Exec,
    flags: libc::c_int,
) -> Result<(libc::pid_t, OwnedFd), SpawnError> {
    if is_main_thread() {
        let result = MAIN_STACK.with(|cell| {
            let mut slot = cell.borrow_mut();
            let stack = match slot.take() {
                Some(stack) => stack,
                None => ChildStack::new()?,
            };
            let result = clone_child(&layout, &exec, flags, &stack);
            *slot = Some(stack);
            result
        });
        return result.map_err(|source| SpawnError::Os {
            call: "clone",
            source,
        });
    }
    let (reply, rx) = mpsc::sync_channel(1);
    let lost = || SpawnError::Os {
        call: "spawner thread",
        source: io::Error::from(io::ErrorKind::BrokenPipe),
    };
    let pool = pool();
    pool.grow_if_busy().map_err(|source| SpawnError::Os {
        call: "start a spawner thread",
        source,
    })?;
    pool.tx
        .send(Job {
            layout,
            exec,
            flags,
            reply,
        })
        .map_err(|_| lost())?;
    let result = rx.recv().map_err(|_| lost())?;
    result.map_err(|source| SpawnError::Os {
        call: "clone",
        source,
    })
}

thread_local! {
    /// The main thread's child stack, made at its first spawn. Only the main thread uses
    /// it, and that thread lives as long as the process: the mapping is never freed.
    static MAIN_STACK: std::cell::RefCell<Option<ChildStack>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether the calling thread is the process's main thread (its thread id is the process
/// id).
fn is_main_thread() -> bool {
    stockade_sys::linux::gettid() == std::process::id().cast_signed()
}

/// The spawner threads and their queue.
struct Pool {
    tx: mpsc::Sender<Job>,
    rx: Arc<Mutex<mpsc::Receiver<Job>>>,
    /// Threads started (and not gone).
    started: AtomicUsize,
    /// Threads waiting for a job.
    idle: AtomicUsize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        Pool {
            tx,
            rx: Arc::new(Mutex::new(rx)),
            started: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
        }
    })
}

impl Pool {
    /// Starts a spawner thread when none is idle and the pool is below its size. Two
    /// callers may both see none idle: then one more thread starts, or one waits for the
    /// other's spawn, as when every thread is busy.
    ///
    /// # Errors
    ///
    /// The error of mapping the child stack or starting the thread, when no thread at all
    /// is running (with one running, the job waits for it instead).
    fn grow_if_busy(&'static self) -> io::Result<()> {
        static MAX: OnceLock<usize> = OnceLock::new();
        if self.idle.load(Ordering::Acquire) > 0 {
            return Ok(());
        }
        let n = self.started.load(Ordering::Acquire);
        if n > 0 {
            let max = *MAX.get_or_init(|| {
                std::thread::available_parallelism()
                    .map_or(2, |n| n.get())
                    .clamp(2, 8)
            });
            if n >= max {
                return Ok(());
            }
        }
        if self
            .started
            .compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Another caller started one just now.
            return Ok(());
        }
        let started = ChildStack::new().and_then(|stack| {
            std::thread::Builder::new()
                .name(format!("stockade-spawn-{n}"))
                .spawn(move || self.serve(stack))
        });
        match started {
            Ok(_) => Ok(()),
            Err(e) => {
                self.started.fetch_sub(1, Ordering::AcqRel);
                tracing::error!(error = %e, "stockade: cannot start a spawner thread");
                if n == 0 { Err(e) } else { Ok(()) }
            }
        }
    }

    fn serve(&self, stack: ChildStack) {
        // Counted idle from before it waits until it has a job, and again before it
        // replies: the caller's next spawn finds it idle and starts no other thread.
        self.idle.fetch_add(1, Ordering::AcqRel);
        loop {
            let job = match self.rx.lock() {
                Ok(guard) => guard.recv().ok(),
                Err(_) => None,
            };
            self.idle.fetch_sub(1, Ordering::AcqRel);
            let Some(job) = job else {
                self.started.fetch_sub(1, Ordering::AcqRel);
                return;
            };
            let Job {
                layout,
                exec,
                flags,
                reply,
            } = job;
            let result = clone_child(&layout, &exec, flags, &stack);
            self.idle.fetch_add(1, Ordering::AcqRel);
            // The child has exec'd or exited: nothing of `job` is in use any more.
            let _ = reply.send(result);
        }
    }
}

/// A child stack with a guard page below it, reused by one spawner thread.
struct ChildStack {
    base: *mut c_void,
    len: usize,
}

// SAFETY: a `ChildStack` owns its private anonymous mapping, which nothing else refers to;
// moving it to the spawner thread that will use it moves that ownership. It is never
// shared: each spawner thread uses its own.
unsafe impl Send for ChildStack {}

impl ChildStack {
    fn new() -> io::Result<Self> {
        let page = GUARD;
        let len = STACK_SIZE + page;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing
        // affects no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the first page lies inside the mapping just made, which nothing else
        // uses yet; making it inaccessible turns a stack overflow into a fault instead of
        // a write into the host's memory.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ChildStack { base, len })
    }

    fn top(&self) -> *mut c_void {
        // 16-byte aligned: the mapping is page aligned and `len` a multiple of the page.
        self.base.wrapping_byte_add(self.len)
    }

    /// Clears what AddressSanitizer poisoned on this stack (a host built with
    /// `-Zsanitizer=address`, as cargo-fuzz builds). The child's instrumented frames poison
    /// their redzones and unpoison them when they return, but the child never returns: it
    /// ends in `execve` or `exit_group`. The next child on this stack would then hit that
    /// stale poison and ASan would report a stack-buffer-overflow that is none (seen on the
    /// second spawn). The parent runs this once the child has exec'd or exited.
    #[cfg(stockade_asan)]
    fn unpoison(&self) {
        unsafe extern "C" {
            /// compiler-rt's `sanitizer/asan_interface.h`.
            fn __asan_unpoison_memory_region(addr: *const c_void, size: usize);
        }
        // SAFETY: ASan's runtime is linked (this cfg is set only for ASan builds); the call
        // only clears the shadow bytes of `[base + GUARD, base + len)`, this mapping's
        // stack part, which the child no longer runs on.
        unsafe {
            __asan_unpoison_memory_region(self.base.wrapping_byte_add(GUARD), self.len - GUARD)
        };
    }

    /// Without AddressSanitizer there is no poisoning to clear.
    #[cfg(not(stockade_asan))]
    fn unpoison(&self) {}
}

struct ChildArgs<'a> {
    layout: &'a Layout,
    exec: &'a Exec,
}

extern "C" fn child_entry(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` that `clone_child` passed, on the suspended spawner
    // thread's stack; CLONE_VFORK keeps that frame alive until this child execs or exits.
    let args = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    child::run(args.layout, args.exec)
}

fn clone_child(layout: &Layout, exec: &Exec, flags: libc::c_int, stack: &ChildStack) -> Reply {
    let args = ChildArgs { layout, exec };
    let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `all` is a valid place for a sigset_t; sigfillset initializes it.
    unsafe { libc::sigfillset(all.as_mut_ptr()) };
    // SAFETY: `all` was initialized above; `old` receives the current mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old.as_mut_ptr()) };
    let mut pidfd: libc::c_int = -1;
    let flags = flags | libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    // SAFETY: the child runs `child_entry` on `stack`, a mapping owned by this thread and
    // used by no one else while this thread is suspended (CLONE_VFORK). The child touches
    // only `args` (alive in this frame until clone returns) and its own stack, makes raw
    // system calls only, and ends in execve or exit_group. `pidfd` receives the pidfd
    // (CLONE_PIDFD uses the parent_tid argument).
    let pid = unsafe {
        libc::clone(
            child_entry,
            stack.top(),
            flags,
            std::ptr::from_ref(&args).cast_mut().cast::<c_void>(),
            std::ptr::from_mut(&mut pidfd),
        )
    };
    let err = io::Error::last_os_error();
    // CLONE_VFORK: the child has exec'd or exited, so its frames are gone.
    stack.unpoison();
    // SAFETY: `old` was initialized by the pthread_sigmask call above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    if pid < 0 {
        return Err(err);
    }
    // SAFETY: with CLONE_PIDFD the kernel stored a new pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((pid, pidfd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_main_thread_is_taken_for_it() {
        // A spawned thread never is; whichever thread runs this test is the main thread
        // exactly when its thread id is the process id (libtest runs tests on the main
        // thread only with one test thread).
        assert!(!std::thread::spawn(is_main_thread).join().unwrap());
        let tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse::<i32>().ok())
            .expect("/proc/thread-self names the thread");
        assert_eq!(is_main_thread(), tid == std::process::id().cast_signed());
        assert_eq!(stockade_sys::linux::gettid(), tid);
    }
}
