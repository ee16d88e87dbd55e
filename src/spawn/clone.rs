//! The one `clone` call, and the threads that make it.
//!
//! # Why not `fork`, and why not std's `pre_exec`
//!
//! `fork()` copies the host's page tables: about 31 ms for a host with 2 GiB touched,
//! against under 2 ms for `clone(CLONE_VM | CLONE_VFORK | namespace flags)`, whose child
//! shares the host's memory until it execs. std's `pre_exec` always forks. So stockade
//! clones by itself, as `posix_spawn` does, and the child follows the rules in
//! [`crate::backend::linux::child`].
//!
//! # Why spawner threads
//!
//! `PR_SET_PDEATHSIG` fires when the parent *thread* exits, not the parent process. A
//! sandbox spawned from a tokio blocking thread would be killed when that thread retires
//! after its idle timeout. So every clone is made by one of a few spawner threads that live
//! as long as the process; the calling thread hands the prepared spawn over and waits. With
//! `CLONE_VFORK` a spawner is suspended while its child sets up, so there are several of
//! them for concurrent spawns.
//!
//! # Signals
//!
//! All signals are blocked around `clone`, so no host handler can run in the child while
//! it shares the host's memory; the child resets every disposition before unblocking.

use std::ffi::c_void;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use crate::backend::linux::child;
use crate::backend::linux::prepare::{Exec, Layout};
use crate::error::SpawnError;

/// Size of each child stack. The child's frames are small and its depth is fixed.
const STACK_SIZE: usize = 256 * 1024;

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
    let (reply, rx) = mpsc::sync_channel(1);
    let lost = || SpawnError::Os {
        call: "spawner thread",
        source: io::Error::from(io::ErrorKind::BrokenPipe),
    };
    spawner()
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

fn spawner() -> &'static mpsc::Sender<Job> {
    static TX: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let n = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8);
        for i in 0..n {
            let rx = Arc::clone(&rx);
            let spawned = std::thread::Builder::new()
                .name(format!("stockade-spawn-{i}"))
                .spawn(move || serve(&rx));
            if let Err(e) = spawned {
                tracing::error!(error = %e, "stockade: cannot start a spawner thread");
            }
        }
        tx
    })
}

fn serve(rx: &Mutex<mpsc::Receiver<Job>>) {
    let stack = match ChildStack::new() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "stockade: cannot map a child stack");
            return;
        }
    };
    loop {
        let job = {
            let Ok(guard) = rx.lock() else { return };
            match guard.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        let result = clone_child(&job.layout, &job.exec, job.flags, &stack);
        // The child has exec'd or exited: nothing of `job` is in use any more.
        let _ = job.reply.send(result);
    }
}

/// A child stack with a guard page below it, reused by one spawner thread.
struct ChildStack {
    base: *mut c_void,
    len: usize,
}

impl ChildStack {
    fn new() -> io::Result<Self> {
        let page = 4096;
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
    // SAFETY: `old` was initialized by the pthread_sigmask call above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    if pid < 0 {
        return Err(err);
    }
    // SAFETY: with CLONE_PIDFD the kernel stored a new pidfd that nothing else owns.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}
