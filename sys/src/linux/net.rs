//! Sockets: creating them, passing fds over them, and interface flags.

use core::ffi::{c_int, c_ulong};

use super::new_fd;
use crate::fd::{BorrowedFd, OwnedFd};
use crate::linux::fstat;
use crate::{Errno, Result};

/// `socket(2)`.
pub fn socket(domain: c_int, ty: c_int, protocol: c_int) -> Result<OwnedFd> {
    // SAFETY: `socket` takes no pointer.
    let fd = unsafe { syscall!(libc::SYS_socket, domain, ty, protocol) }?;
    // SAFETY: `socket` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
}

/// `bind(2)` of an IPv4 socket to `addr`.
pub fn bind_inet(sock: BorrowedFd<'_>, addr: &libc::sockaddr_in) -> Result<()> {
    // SAFETY: `addr` is a live shared borrow of one `sockaddr_in`, whose size is passed
    // as the length; the kernel only reads it. `sock` is borrowed for the call.
    unsafe {
        syscall!(
            libc::SYS_bind,
            sock.as_raw_fd(),
            core::ptr::from_ref(addr),
            core::mem::size_of::<libc::sockaddr_in>()
        )
    }
    .map(drop)
}

/// `listen(2)`.
pub fn listen(sock: BorrowedFd<'_>, backlog: c_int) -> Result<()> {
    // SAFETY: `listen` takes no pointer; `sock` is borrowed for the call.
    unsafe { syscall!(libc::SYS_listen, sock.as_raw_fd(), backlog) }.map(drop)
}

/// `sendmsg(2)` of one byte, `tag`, with `fd` attached (`SCM_RIGHTS`): the receiver gets
/// its own fd for the same open file. Nothing is allocated: the message lives on the stack.
pub fn send_fd(sock: BorrowedFd<'_>, tag: u8, fd: BorrowedFd<'_>) -> Result<()> {
    let mut byte = [tag];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: `cmsghdr` is plain old data; all-zero bytes are a valid value (some targets
    // have private padding fields, so it cannot be built field by field).
    let mut hdr: libc::cmsghdr = unsafe { core::mem::zeroed() };
    // The field is `size_t` on glibc and `socklen_t` on musl; the value is a few bytes.
    hdr.cmsg_len = (core::mem::size_of::<libc::cmsghdr>() + core::mem::size_of::<c_int>()) as _;
    hdr.cmsg_level = libc::SOL_SOCKET;
    hdr.cmsg_type = libc::SCM_RIGHTS;
    let mut cmsg = CmsgFd {
        hdr,
        fd: fd.as_raw_fd(),
        pad: 0,
    };
    // SAFETY: as above, for `msghdr`.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = core::ptr::from_mut(&mut iov);
    msg.msg_iovlen = 1;
    msg.msg_control = core::ptr::from_mut(&mut cmsg).cast();
    msg.msg_controllen = core::mem::size_of::<CmsgFd>() as _;
    // SAFETY: `msg` points to `iov` (one entry, one byte in `byte`) and to `cmsg`
    // (`msg_controllen` bytes); all are locals that outlive the call, and `sendmsg` only
    // reads them. The kernel takes its own reference to `fd`'s file, which `fd` keeps open
    // for the call.
    unsafe {
        syscall!(
            libc::SYS_sendmsg,
            sock.as_raw_fd(),
            core::ptr::from_ref(&msg),
            libc::MSG_NOSIGNAL
        )
    }
    .map(drop)
}

/// A control message carrying one fd (`SCM_RIGHTS`): `CMSG_SPACE(sizeof(int))` bytes,
/// laid out as the kernel reads them (`cmsghdr`, then the fd at `CMSG_DATA`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CmsgFd {
    /// `cmsg_len`, `cmsg_level`, `cmsg_type`.
    pub hdr: libc::cmsghdr,
    /// The fd.
    pub fd: c_int,
    /// Padding up to `CMSG_SPACE`.
    pub pad: c_int,
}

/// Fails with `ENOTSOCK` unless `fd` is a socket.
///
/// An ioctl request number means what the file's driver makes of it. The socket layer
/// reads `SIOCGIFFLAGS` as "one `struct ifreq` in and out"; a device driver is free to give
/// the same number another meaning and another size, so the wrappers below, which pass a
/// pointer, act only on sockets. `fd` is borrowed for the whole wrapper, so the file
/// checked is the file the ioctl reaches.
fn require_socket(fd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: `stat` is integers and padding only; all-zero bytes are a valid value.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    fstat(fd, &mut st)?;
    if st.st_mode & libc::S_IFMT == libc::S_IFSOCK {
        Ok(())
    } else {
        Err(Errno(libc::ENOTSOCK))
    }
}

/// `ioctl(fd, SIOCGIFFLAGS, ifr)`: reads the flags of the interface named in `ifr.name`
/// into `ifr.flags`.
///
/// # Errors
///
/// `ENOTSOCK` when `fd` is not a socket (checked first, see `require_socket`), else the
/// kernel's answer (`ENODEV` for an unknown interface).
pub fn ioctl_siocgifflags(fd: BorrowedFd<'_>, ifr: &mut IfreqFlags) -> Result<()> {
    require_socket(fd)?;
    // SAFETY: `fd` is a socket (checked above, and borrowed until the call returns), for
    // which `SIOCGIFFLAGS` copies one `struct ifreq` (40 bytes, the size of `IfreqFlags`,
    // see the layout test) in and out of `ifr`, an exclusive borrow; the kernel
    // NUL-terminates the name itself and writes only an `i16` into `flags`.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            fd.as_raw_fd(),
            SIOCGIFFLAGS,
            core::ptr::from_mut(ifr)
        )
    }
    .map(drop)
}

/// `ioctl(fd, SIOCSIFFLAGS, ifr)`: sets the flags of the interface named in `ifr.name`.
///
/// # Errors
///
/// `ENOTSOCK` when `fd` is not a socket (checked first, see `require_socket`), else the
/// kernel's answer (`EPERM` without `CAP_NET_ADMIN` over the network namespace).
pub fn ioctl_siocsifflags(fd: BorrowedFd<'_>, ifr: &IfreqFlags) -> Result<()> {
    require_socket(fd)?;
    // SAFETY: `fd` is a socket (checked above, and borrowed until the call returns), for
    // which `SIOCSIFFLAGS` only reads one `struct ifreq` (40 bytes, the size of
    // `IfreqFlags`) from `ifr`, a live shared borrow.
    unsafe {
        syscall!(
            libc::SYS_ioctl,
            fd.as_raw_fd(),
            SIOCSIFFLAGS,
            core::ptr::from_ref(ifr)
        )
    }
    .map(drop)
}

/// `struct ifreq` as used by `SIOCGIFFLAGS`/`SIOCSIFFLAGS`: a name and a flags word.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IfreqFlags {
    /// Interface name, NUL-terminated.
    pub name: [u8; 16],
    /// `ifr_flags`.
    pub flags: i16,
    /// The rest of the `ifr_ifru` union.
    pub pad: [u8; 22],
}

/// `SIOCGIFFLAGS`.
const SIOCGIFFLAGS: c_ulong = 0x8913;
/// `SIOCSIFFLAGS`.
const SIOCSIFFLAGS: c_ulong = 0x8914;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::test_util::pipe;
    use crate::linux::{close, read, write};

    /// An `IfreqFlags` naming `lo`.
    fn lo() -> IfreqFlags {
        let mut ifr = IfreqFlags {
            name: [0; 16],
            flags: 0,
            pad: [0; 22],
        };
        ifr.name[..2].copy_from_slice(b"lo");
        ifr
    }

    #[test]
    fn interface_ioctls_act_on_sockets_only() {
        // A pipe's driver answers ENOTTY to a request it does not know; the wrappers must
        // not hand it the pointer at all.
        let (r, w) = pipe();
        let mut ifr = lo();
        assert_eq!(
            ioctl_siocgifflags(r.as_fd(), &mut ifr),
            Err(Errno(libc::ENOTSOCK))
        );
        assert_eq!(
            ioctl_siocsifflags(w.as_fd(), &ifr),
            Err(Errno(libc::ENOTSOCK))
        );
        // A socket gets through to the kernel: every network namespace has `lo`.
        let sock = socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0).unwrap();
        assert_eq!(ioctl_siocgifflags(sock.as_fd(), &mut ifr), Ok(()));
        assert_eq!(&ifr.name[..3], b"lo\0");
    }

    #[test]
    fn an_inet_listener_binds_and_listens() {
        let sock = socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0).unwrap();
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
            },
            sin_zero: [0; 8],
        };
        assert_eq!(bind_inet(sock.as_fd(), &addr), Ok(()));
        assert_eq!(listen(sock.as_fd(), 16), Ok(()));
        // A second bind of a bound socket is the kernel's EINVAL: the call reached it.
        assert_eq!(bind_inet(sock.as_fd(), &addr), Err(Errno(libc::EINVAL)));
        let pipe = pipe();
        assert_eq!(listen(pipe.0.as_fd(), 1), Err(Errno(libc::ENOTSOCK)));
    }

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(core::mem::size_of::<IfreqFlags>(), 40);
        assert_eq!(core::mem::offset_of!(IfreqFlags, flags), 16);
        let int = core::mem::size_of::<c_int>() as u32;
        // SAFETY: CMSG_SPACE is arithmetic on its argument.
        let space = unsafe { libc::CMSG_SPACE(int) };
        // SAFETY: CMSG_LEN is arithmetic on its argument.
        let len = unsafe { libc::CMSG_LEN(int) };
        assert_eq!(core::mem::size_of::<CmsgFd>(), space as usize);
        assert_eq!(core::mem::offset_of!(CmsgFd, fd), len as usize - 4);
    }

    #[test]
    fn an_fd_sent_arrives_as_the_same_file() {
        let mut sv = [0 as c_int; 2];
        // SAFETY: `sv` has room for the two fds socketpair writes.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                0,
                sv.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0);
        // SAFETY: socketpair just created this fd; nothing else owns it.
        let s0 = unsafe { OwnedFd::from_raw_fd(sv[0]) };
        // SAFETY: as above.
        let s1 = unsafe { OwnedFd::from_raw_fd(sv[1]) };
        let (pr, pw) = pipe();
        send_fd(s0.as_fd(), 7, pw.as_fd()).unwrap();
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut cmsg = [0u64; 4];
        // SAFETY: `msghdr` is plain old data; all-zero bytes are a valid value.
        let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
        msg.msg_iov = core::ptr::from_mut(&mut iov);
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        // `size_t` on glibc, `socklen_t` on musl; the buffer is 32 bytes.
        msg.msg_controllen = core::mem::size_of_val(&cmsg) as _;
        // SAFETY: `msg` points to live buffers of the sizes it states.
        assert_eq!(unsafe { libc::recvmsg(s1.as_raw_fd(), &mut msg, 0) }, 1);
        assert_eq!(byte[0], 7);
        // SAFETY: `msg.msg_control` points to `cmsg`, which the kernel filled.
        let first = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        assert!(!first.is_null());
        // SAFETY: `first` is the SCM_RIGHTS header the kernel wrote in `cmsg`.
        let data = unsafe { libc::CMSG_DATA(first) };
        // SAFETY: the header carries one fd at `data`, inside `cmsg`; it may be unaligned.
        let got: c_int = unsafe { data.cast::<c_int>().read_unaligned() };
        // SAFETY: the kernel installed `got` for this receive; nothing else owns it.
        let got = unsafe { OwnedFd::from_raw_fd(got) };
        assert_eq!(write(got.as_fd(), b"x"), Ok(1));
        let mut buf = [0u8; 1];
        assert_eq!(read(pr.as_fd(), &mut buf), Ok(1));
        for fd in [s0, s1, pr, pw, got] {
            close(fd).unwrap();
        }
    }
}
