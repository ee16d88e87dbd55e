//! Async spawning, waiting and pipes, with the `tokio` feature: the spawn runs on tokio's
//! blocking pool, the pidfd and the pipes are registered with tokio's reactor, so no
//! runtime worker blocks.
//!
//! Linux only: the wait is driven by the init's status pipe and the pidfd.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::ExitStatus;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use crate::error::{Error, SpawnError};

impl Command {
    /// [`Command::spawn`] without blocking a runtime worker: the spawn (about 1 to 2 ms
    /// of `clone`, setup and the child's report on the full layer) runs on tokio's
    /// blocking pool (`spawn_blocking`), on a copy of this command.
    ///
    /// The copy is made here, before the future is first polled, so the returned future
    /// borrows nothing and may be moved to another task: the stdio given with
    /// [`Stdio::from`](crate::Stdio::from) is duplicated, the fds of
    /// [`Command::pass_fd`] are shared (they keep their numbers) and stay open until the
    /// spawn is done, even if this command is dropped. Changes to this command after the
    /// call do not reach that spawn. When the spawn falls back to a weaker layer, the
    /// sandbox and this command learn it as after [`Command::spawn`] (this command re-plans
    /// at its next spawn, as every command prepared before the refusal does).
    ///
    /// Dropping the future does not stop a spawn already under way: the program starts,
    /// and its [`Child`] is dropped on the blocking pool.
    ///
    /// Must be called from within a tokio runtime.
    ///
    /// # Errors
    ///
    /// As [`Command::spawn`]; [`SpawnError::Os`] naming `spawn_async` when the fds could
    /// not be duplicated or the blocking task failed (it panicked, or the runtime is
    /// shutting down).
    pub fn spawn_async(
        &mut self,
    ) -> impl std::future::Future<Output = Result<Child, Error>> + Send + 'static {
        let copy = self.try_clone();
        async move {
            let mut copy = copy.map_err(spawn_async_err)?;
            tokio::task::spawn_blocking(move || copy.spawn())
                .await
                .map_err(|e| spawn_async_err(io::Error::other(e)))?
        }
    }
}

fn spawn_async_err(source: io::Error) -> Error {
    SpawnError::Os {
        call: "spawn_async",
        source,
    }
    .into()
}

impl Child {
    /// Waits for the program without blocking a thread: [`Child::wait_fd`] (the init's
    /// status pipe, then the pidfd) becomes readable when the program's status is known.
    ///
    /// # Errors
    ///
    /// Registration with tokio or `waitpid` failed.
    pub async fn wait_async(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(s);
            }
            let raw = self.wait_fd().as_raw_fd();
            // SAFETY: the registered fd is the status pipe or the pidfd held by
            // `self.handle`, which nothing closes while `fd` lives: it is dropped (and so
            // deregistered) before the next `try_wait`, which may close the pipe.
            let fd = unsafe { AsyncFd::register_with_interest(raw, Interest::READABLE)? };
            drop(fd.readable().await?);
        }
    }
}

impl Child {
    /// [`Child::wait_timeout`] without blocking a thread: the program's exit status, or
    /// `Ok(None)` when it still runs after `timeout` (it is not killed then).
    ///
    /// Cancel-safe: the status is taken from the kernel only by a synchronous
    /// [`Child::try_wait`] inside, and kept in the `Child`, so dropping this future (or
    /// the timeout firing) never loses it; a later wait returns it.
    ///
    /// # Errors
    ///
    /// As [`Child::wait_async`].
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime with the time driver enabled (`enable_time`, or
    /// `enable_all`), as `tokio::time::timeout` does.
    pub async fn wait_timeout_async(
        &mut self,
        timeout: std::time::Duration,
    ) -> io::Result<Option<ExitStatus>> {
        match tokio::time::timeout(timeout, self.wait_async()).await {
            Ok(r) => r.map(Some),
            // The status may have come with the deadline: ask once more.
            Err(_) => self.try_wait(),
        }
    }
}

fn nonblocking(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

impl ChildStdin {
    /// This pipe as a tokio writer.
    ///
    /// # Errors
    ///
    /// Registration with tokio failed.
    pub fn into_async(self) -> io::Result<pipe::Sender> {
        let fd: OwnedFd = self.into();
        nonblocking(&fd)?;
        pipe::Sender::from_owned_fd(fd)
    }
}

impl ChildStdout {
    /// This pipe as a tokio reader.
    ///
    /// # Errors
    ///
    /// Registration with tokio failed.
    pub fn into_async(self) -> io::Result<pipe::Receiver> {
        let fd: OwnedFd = self.into();
        nonblocking(&fd)?;
        pipe::Receiver::from_owned_fd(fd)
    }
}

impl ChildStderr {
    /// This pipe as a tokio reader.
    ///
    /// # Errors
    ///
    /// Registration with tokio failed.
    pub fn into_async(self) -> io::Result<pipe::Receiver> {
        let fd: OwnedFd = self.into();
        nonblocking(&fd)?;
        pipe::Receiver::from_owned_fd(fd)
    }
}
