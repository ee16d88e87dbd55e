//! A connection's bytes after the decision: copied between the client and upstream, both
//! ways, by one thread polling both sockets, until both sides are done, the request's body
//! and answer are through, the connection is idle too long, or its run ends (which shuts
//! both sockets down and so wakes the poll).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::http::{ChunkError, Chunked};

/// Each direction's buffer. Large enough that a bulk transfer takes few wakeups; a
/// connection holds two.
const BUF: usize = 256 * 1024;

/// What may go from the client upstream.
#[derive(Debug)]
pub(super) enum Upload {
    /// Everything (a tunnel); the client's end of stream is passed on.
    All,
    /// A body of this many more bytes, then nothing.
    Length(u64),
    /// A chunked body, to the end of its framing, then nothing.
    Chunked(Chunked),
}

impl Upload {
    /// How many of the `new` bytes from the client go upstream.
    pub(super) fn admit(&mut self, new: &[u8]) -> Result<usize, ChunkError> {
        match self {
            Upload::All => Ok(new.len()),
            Upload::Length(left) => {
                let n = usize::try_from(*left).unwrap_or(usize::MAX).min(new.len());
                *left -= n as u64;
                Ok(n)
            }
            Upload::Chunked(c) => c.feed(new),
        }
    }

    /// Whether the body has been read whole (never for a tunnel).
    fn done(&self) -> bool {
        match self {
            Upload::All => false,
            Upload::Length(left) => *left == 0,
            Upload::Chunked(c) => c.done(),
        }
    }
}

/// One direction: the bytes read and not yet written, and whether its source ended.
struct Half {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The source gave its last byte (or, uploading a body, the body ended).
    eof: bool,
    /// The end was passed on (the destination's write side shut down).
    shut: bool,
}

impl Half {
    fn new() -> Half {
        Half {
            buf: vec![0; BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            shut: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Reads and writes while either makes progress (a few rounds at most, so that the
    /// other direction is served too). Whether any byte moved; `Err` when the connection
    /// must end (a socket error, a malformed body).
    fn pump(
        &mut self,
        mut src: &TcpStream,
        mut dst: &TcpStream,
        upload: Option<&mut Upload>,
    ) -> Result<bool, ()> {
        let mut upload = upload;
        let mut moved = false;
        for _ in 0..4 {
            let mut progress = false;
            if self.is_empty() && !self.eof {
                match src.read(&mut self.buf) {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        let keep = match upload.as_deref_mut() {
                            Some(u) => {
                                let keep = u.admit(&self.buf[..n]).map_err(|e| {
                                    tracing::debug!(error = %e, "egress proxy: request body refused");
                                })?;
                                self.eof = u.done();
                                keep
                            }
                            None => n,
                        };
                        (self.start, self.end) = (0, keep);
                        progress = true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => progress = true,
                    Err(_) => return Err(()),
                }
            }
            if !self.is_empty() {
                match dst.write(&self.buf[self.start..self.end]) {
                    Ok(0) => return Err(()),
                    Ok(n) => {
                        self.start += n;
                        progress = true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => progress = true,
                    Err(_) => return Err(()),
                }
            }
            moved |= progress;
            if !progress {
                break;
            }
        }
        Ok(moved)
    }

    /// What to poll for on the source and the destination.
    fn interest(&self) -> (PollFlags, PollFlags) {
        let read = if self.is_empty() && !self.eof {
            PollFlags::POLLIN
        } else {
            PollFlags::empty()
        };
        let write = if self.is_empty() {
            PollFlags::empty()
        } else {
            PollFlags::POLLOUT
        };
        (read, write)
    }
}

/// Copies between `client` and `up` (both blocking or not; they are made non-blocking)
/// and shuts both down at the end.
///
/// With [`Upload::All`] (a tunnel) each side's end of stream is passed on and the relay
/// ends once both are. Otherwise only the request body goes upstream, and the relay ends
/// when the upstream answer has reached the client. Either way it ends, closing both,
/// after `idle` with no byte moved either way.
pub(super) fn relay(client: &TcpStream, up: &TcpStream, mut upload: Upload, idle: Duration) {
    let tunnel = matches!(upload, Upload::All);
    if client.set_nonblocking(true).is_ok() && up.set_nonblocking(true).is_ok() {
        copy(client, up, &mut upload, tunnel, idle);
    }
    let _ = up.shutdown(Shutdown::Both);
    if !tunnel {
        linger(client);
    }
    let _ = client.shutdown(Shutdown::Both);
}

fn copy(client: &TcpStream, up: &TcpStream, upload: &mut Upload, tunnel: bool, idle: Duration) {
    let mut to_up = Half::new();
    let mut to_client = Half::new();
    to_up.eof = upload.done();
    // A socket that reported POLLHUP is polled only while there is something to do with
    // it: POLLHUP cannot be masked, and would wake every poll.
    let (mut client_hup, mut up_hup) = (false, false);
    let mut last = Instant::now();
    loop {
        if to_up.eof && to_up.is_empty() && !to_up.shut {
            if tunnel {
                let _ = up.shutdown(Shutdown::Write);
            }
            to_up.shut = true;
        }
        if to_client.eof && to_client.is_empty() && !to_client.shut {
            let _ = client.shutdown(Shutdown::Write);
            to_client.shut = true;
        }
        if to_client.shut && (to_up.shut || !tunnel) {
            return;
        }
        let left = idle.saturating_sub(last.elapsed());
        if left.is_zero() {
            tracing::debug!(?idle, "egress proxy: connection idle; closed");
            return;
        }
        let (client_in, up_out) = to_up.interest();
        let (up_in, client_out) = to_client.interest();
        let (ci, ui) = (client_in | client_out, up_in | up_out);
        let mut which = Vec::with_capacity(2);
        let mut fds = Vec::with_capacity(2);
        if !ci.is_empty() || !client_hup {
            which.push(&mut client_hup);
            fds.push(PollFd::new(client.as_fd(), ci));
        }
        if !ui.is_empty() || !up_hup {
            which.push(&mut up_hup);
            fds.push(PollFd::new(up.as_fd(), ui));
        }
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => return,
        }
        for (hup, f) in which.into_iter().zip(&fds) {
            let r = f.revents().unwrap_or(PollFlags::empty());
            if r.intersects(PollFlags::POLLERR | PollFlags::POLLNVAL) {
                return;
            }
            *hup |= r.contains(PollFlags::POLLHUP);
        }
        drop(fds);
        let Ok(a) = to_up.pump(client, up, Some(upload)) else {
            return;
        };
        let Ok(b) = to_client.pump(up, client, None) else {
            return;
        };
        if a || b {
            last = Instant::now();
        }
    }
}

/// After a forward request's answer: ends the client's write side, then reads (bounded,
/// 500 ms at most) what the client still sends, so that closing with unread bytes does
/// not reset the answer away.
fn linger(mut client: &TcpStream) {
    let _ = client.shutdown(Shutdown::Write);
    if client.set_nonblocking(false).is_err() {
        return;
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut sink = [0u8; 4096];
    let mut total = 0;
    while total < 64 * 1024 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || client.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match client.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => total += n,
        }
    }
}
