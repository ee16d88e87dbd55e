//! The host's side of [`Command::explain`](crate::Command::explain) on Linux: the
//! explained filter's listener, and the thread that answers it.
//!
//! With explain on, the setup child installs the filter in its explained form
//! ([`seccomp::build_explained`]) with a listener and sends the listener here before it
//! execs. One thread per run then answers every notification: it runs the filter the
//! sandbox would have installed without explain on the call's `seccomp_data`
//! ([`seccomp::Explained::answer`]), records the denial, and fails the call with exactly
//! that errno, so the program sees what it would have seen. The record is made before the
//! answer, so once the program has ended its count is complete.
//!
//! With `network = "none"` in a network namespace of its own, `connect` and `sendto` with
//! a destination notify too: the thread reads the address from the program's memory (`process_vm_readv`, at most one
//! `sockaddr_storage`; a report only, since the program may change it after the read)
//! and lets the call run unchanged (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). The namespace,
//! not this thread, refuses a connect that leaves loopback.
//!
//! The thread ends when the sandbox's first process has ended (its pidfd is readable) or
//! no process uses the filter any more, after answering what is pending; dropping the
//! listener then fails any later notification with `ENOSYS` (none can come: every process
//! under the filter is gone).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use stockade_sys::linux::{self as sys, SeccompListener};

use super::denial::{Denial, Tally, Wall};
use crate::backend::linux::seccomp::{self, Answer, Explained, FilterOptions};
use crate::error::Error;

/// An explained spawn before the start: the socket pair the listener comes back through,
/// and the programs.
pub(super) struct Pending {
    parent: OwnedFd,
    child: OwnedFd,
    programs: Explained,
    options: FilterOptions,
}

impl Pending {
    /// The explained programs for `options`, and a new socket pair; `watch_connect` as
    /// for [`seccomp::build_explained`].
    pub(super) fn new(options: FilterOptions, watch_connect: bool) -> Result<Pending, Error> {
        let programs = seccomp::build_explained(&options, watch_connect)?;
        let (parent, child) =
            crate::backend::linux::fd_channel("socketpair for the seccomp listener")?;
        Ok(Pending {
            parent,
            child,
            programs,
            options,
        })
    }

    /// What the setup child installs and where it sends the listener.
    pub(super) fn child(&self) -> (seccomp::Filter, RawFd) {
        (self.programs.notify.clone(), self.child.as_raw_fd())
    }

    /// After a successful spawn: receives the listener the child sent before it exec'd
    /// and answers it on a thread of its own until `until` (a pidfd of the sandbox's
    /// first process) is readable.
    pub(super) fn serve(self, until: Option<OwnedFd>) -> io::Result<Run> {
        drop(self.child);
        let listener = crate::backend::linux::recv_listener(&self.parent)?;
        let tally = Arc::new(Mutex::new(Tally::default()));
        let answerer = Answerer {
            listener,
            programs: self.programs,
            options: self.options,
            tally: Arc::clone(&tally),
        };
        // Detached: it ends with the sandbox, and what it records is counted before the
        // call it answers returns.
        std::thread::Builder::new()
            .name("stockade-explain".into())
            .spawn(move || answerer.serve(until))?;
        Ok(Run { tally })
    }
}

/// One explained run: its denials so far.
#[derive(Debug)]
pub(crate) struct Run {
    tally: Arc<Mutex<Tally>>,
}

impl Run {
    /// The denials so far, merged.
    pub(crate) fn denials(&self) -> Vec<Denial> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner()).list()
    }
}

/// The thread's state.
struct Answerer {
    listener: SeccompListener,
    programs: Explained,
    options: FilterOptions,
    tally: Arc<Mutex<Tally>>,
}

impl Answerer {
    fn serve(self, until: Option<OwnedFd>) {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        loop {
            let (ready, hup, over) = {
                let mut fds = vec![PollFd::new(self.listener_fd(), PollFlags::POLLIN)];
                if let Some(u) = &until {
                    fds.push(PollFd::new(u.as_fd(), PollFlags::POLLIN));
                }
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => return,
                }
                let ev = |i: usize| {
                    fds.get(i)
                        .and_then(PollFd::revents)
                        .unwrap_or(PollFlags::empty())
                };
                let l = ev(0);
                (
                    l.contains(PollFlags::POLLIN),
                    l.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL),
                    !ev(1).is_empty(),
                )
            };
            if ready && !self.answer_one() {
                return;
            }
            if over || (hup && !ready) {
                // Answer what is still pending, then stop.
                while sys::poll_now(self.listener.as_fd(), libc::POLLIN)
                    .is_ok_and(|r| r & libc::POLLIN != 0)
                    && self.answer_one()
                {}
                return;
            }
        }
    }

    fn listener_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.listener.as_fd().into()
    }

    /// Receives one notification, records it and answers it. False when the listener
    /// fails otherwise than for a caller that is gone (then the thread stops rather than
    /// spin, and the listener's close fails the pending calls with `ENOSYS`).
    fn answer_one(&self) -> bool {
        let n = match sys::seccomp_notif_recv(&self.listener) {
            Ok(n) => n,
            // The caller ended (or was interrupted) before it was read.
            Err(stockade_sys::Errno(libc::ENOENT | libc::EINTR)) => return true,
            Err(_) => return false,
        };
        let mut resp = libc::seccomp_notif_resp {
            id: n.id,
            val: 0,
            error: 0,
            flags: 0,
        };
        match self.programs.answer(&n.data) {
            Answer::Deny(errno) => {
                let d = seccomp::describe(&n.data, &self.options);
                let wall = if d.network {
                    Wall::Network
                } else {
                    Wall::Seccomp
                };
                self.record(wall, d.operation, None, &d.hint);
                resp.error = -errno;
            }
            Answer::Continue => {
                let (op, at) = if n.data.nr as i64 == libc::SYS_sendto {
                    ("sendto", 4)
                } else {
                    ("connect", 1)
                };
                if let Some(addr) = self.address(&n, at) {
                    if !is_loopback(&addr) {
                        self.record(
                            Wall::Network,
                            op.to_owned(),
                            Some(addr.to_string()),
                            seccomp::NETWORK_NONE,
                        );
                    }
                }
                resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
            }
        }
        // ENOENT: the caller is gone or was interrupted; nothing to answer.
        let _ = sys::seccomp_notif_send(&self.listener, &resp);
        true
    }

    fn record(&self, wall: Wall, operation: String, target: Option<String>, hint: &str) {
        self.tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(wall, operation, target, hint);
    }

    /// The IPv4 or IPv6 address of a watched call, whose arguments `at` and `at + 1` are
    /// the address and its length (`connect`: 1, `sendto`: 4), read from the caller's
    /// memory while its notification is still pending.
    fn address(&self, n: &libc::seccomp_notif, at: usize) -> Option<SocketAddr> {
        let ptr = *n.data.args.get(at)?;
        let len = *n.data.args.get(at + 1)? as u32 as usize;
        let mut buf = [0u8; 28];
        let want = len.min(buf.len());
        let got = sys::process_vm_readv(n.pid as libc::pid_t, ptr, buf.get_mut(..want)?).ok()?;
        // The pid named the caller only while the notification is pending.
        sys::seccomp_notif_id_valid(&self.listener, n.id).ok()?;
        parse_sockaddr(buf.get(..got)?)
    }
}

/// An `AF_INET` or `AF_INET6` socket address from its bytes (machine-order family,
/// network-order port and address).
fn parse_sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
    match i32::from(family) {
        libc::AF_INET => {
            let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::from((Ipv4Addr::from(ip), port)))
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            Some(SocketAddr::from((Ipv6Addr::from(ip), port)))
        }
        _ => None,
    }
}

/// Whether `addr` stays on the sandbox's loopback (or is unspecified, which the kernel
/// takes for loopback).
fn is_loopback(addr: &SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(a) => a.ip().is_loopback() || a.ip().is_unspecified(),
        SocketAddr::V6(a) => {
            let ip = a.ip();
            ip.is_loopback()
                || ip.is_unspecified()
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_are_parsed_and_bounded() {
        let mut v4 = [0u8; 16];
        v4[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&443u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[140, 82, 112, 3]);
        let a = parse_sockaddr(&v4).unwrap();
        assert_eq!(a.to_string(), "140.82.112.3:443");
        assert!(!is_loopback(&a));
        assert_eq!(parse_sockaddr(&v4[..6]), None);
        let mut v6 = [0u8; 28];
        v6[0..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&80u16.to_be_bytes());
        v6[23] = 1;
        let a = parse_sockaddr(&v6).unwrap();
        assert_eq!(a.to_string(), "[::1]:80");
        assert!(is_loopback(&a));
        let mut unix = [0u8; 28];
        unix[0..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(parse_sockaddr(&unix), None);
        assert_eq!(parse_sockaddr(&[]), None);
    }
}
