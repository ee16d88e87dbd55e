//! Async waiting and pipes, with the `tokio` feature: the pidfd and the pipes are
//! registered with tokio's reactor, so no thread blocks.
//!
//! Linux only: the wait is driven by the init's status pipe and the pidfd.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::ExitStatus;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::{Child, ChildStderr, ChildStdin, ChildStdout};

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
