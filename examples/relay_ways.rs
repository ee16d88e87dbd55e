//! Ways a relay can move a loopback download, measured alone (issue 25's throughput goal:
//! the evidence behind `bench/README.md`'s "The egress proxy").
//!
//! ```text
//! cargo run --release --example relay_ways [-- WAY...]    # default: every way
//! ```
//!
//! A server thread writes 1 GiB (a 1 MiB buffer over and over) into a loopback TCP
//! connection; the client (the main thread) reads it with a 1 MiB buffer. The ways:
//!
//! - `direct`: the client reads the server's connection itself (one TCP connection).
//! - `copy`: a relay thread reads the server's connection and writes a second one, as
//!   `src/guard/egress/relay.rs` does (256 KiB buffer, blocking, a thread per direction).
//! - `splice`: the relay thread moves the bytes with `splice(2)` through a 1 MiB pipe
//!   (`F_SETPIPE_SZ`), `SPLICE_F_MOVE | SPLICE_F_NONBLOCK`, draining the pipe as far as the
//!   destination takes and polling only when neither side moves: the relay never copies.
//! - `sockmap`: no relay thread; a `SOCKHASH` map and a hand-assembled `sk_skb` verdict
//!   program redirect each segment the relay's upstream socket receives to the egress of
//!   its client socket (`bpf_sk_redirect_hash`, keyed by the receiving socket's cookie),
//!   sent by a kernel worker. Needs `CAP_BPF` and `CAP_NET_ADMIN` (root); else `SKIP`.
//!
//! Rounds interleaved (each way once per round, 3 rounds). Each row: throughput, the
//! process's CPU seconds per GiB (all its threads; a kernel worker's time, as `sockmap`'s
//! sends, is not in it), the same split by thread (server, relay, client), and the whole
//! machine's busy CPU seconds per GiB from `/proc/stat` (which counts the kernel workers,
//! and everything else running: meaningful on an idle machine only).
//!
//! It prints figures and asserts nothing about time.

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("relay_ways measures Linux's loopback only");
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::{self, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::thread;
    use std::time::Instant;

    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::resource::{UsageWho, getrusage};

    const GIB: u64 = 1 << 30;
    const PIPE: usize = 1 << 20;

    // bpf(2) commands (linux/bpf.h).
    const BPF_MAP_CREATE: libc::c_int = 0;
    const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
    const BPF_PROG_LOAD: libc::c_int = 5;
    const BPF_PROG_ATTACH: libc::c_int = 8;

    /// CPU seconds used so far by `who`.
    fn cpu(who: UsageWho) -> f64 {
        let u = getrusage(who).unwrap();
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    }

    /// The whole machine's busy CPU seconds so far (`/proc/stat`, idle and iowait left out).
    fn busy() -> f64 {
        let stat = std::fs::read_to_string("/proc/stat").unwrap();
        let v: Vec<f64> = stat
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect();
        // SAFETY: sysconf has no memory effects.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        (v.iter().sum::<f64>() - v[3] - v[4]) / hz
    }

    /// Both ends of a new loopback connection.
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    fn serve(mut s: TcpStream) -> f64 {
        let buf = vec![0x5a_u8; 1 << 20];
        for _ in 0..GIB / buf.len() as u64 {
            s.write_all(&buf).unwrap();
        }
        cpu(UsageWho::RUSAGE_THREAD)
    }

    fn copy(mut src: TcpStream, mut dst: TcpStream) {
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = src.read(&mut buf).unwrap();
            if n == 0 {
                return;
            }
            dst.write_all(&buf[..n]).unwrap();
        }
    }

    /// One `splice(2)` call without offsets: the bytes moved, 0 at the end of the source.
    fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
        let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK;
        // SAFETY: both fds are open for the call (their owners outlive it); null offsets
        // make the kernel use and advance the files' own positions.
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                flags,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    fn splice_relay(src: TcpStream, dst: TcpStream) {
        src.set_nonblocking(true).unwrap();
        dst.set_nonblocking(true).unwrap();
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).unwrap();
        let size = fcntl(&w, FcntlArg::F_SETPIPE_SZ(PIPE as i32)).unwrap() as usize;
        let (mut held, mut eof) = (0usize, false);
        while !eof || held > 0 {
            let mut moved = false;
            if !eof && held < size {
                match splice(src.as_raw_fd(), w.as_raw_fd(), size - held) {
                    Ok(0) => eof = true,
                    Ok(n) => (held, moved) = (held + n, true),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("splice in: {e}"),
                }
            }
            if held > 0 {
                match splice(r.as_raw_fd(), dst.as_raw_fd(), held) {
                    Ok(n) => (held, moved) = (held - n, moved || n > 0),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("splice out: {e}"),
                }
            }
            if !moved && (!eof || held > 0) {
                let read = if !eof && held < size {
                    PollFlags::POLLIN
                } else {
                    PollFlags::empty()
                };
                let write = if held > 0 {
                    PollFlags::POLLOUT
                } else {
                    PollFlags::empty()
                };
                let mut fds = [
                    PollFd::new(src.as_fd(), read),
                    PollFd::new(dst.as_fd(), write),
                ];
                poll(&mut fds, PollTimeout::NONE).unwrap();
            }
        }
    }

    /// `bpf(2)` with an attribute block; the call's result.
    fn bpf(cmd: libc::c_int, attr: &mut [u8; 128]) -> io::Result<RawFd> {
        // SAFETY: `attr` is a zeroed-but-filled `union bpf_attr` of 128 bytes (larger than
        // every command's part that is read); the pointers written in it point at buffers
        // the caller keeps alive across the call.
        let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as RawFd)
        }
    }

    fn put(attr: &mut [u8; 128], at: usize, v: &[u8]) {
        attr[at..at + v.len()].copy_from_slice(v);
    }

    fn owned(fd: RawFd) -> OwnedFd {
        // SAFETY: `fd` was just returned by `bpf(2)` and has no other owner.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    /// One eBPF instruction.
    fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = code;
        b[1] = dst | (src << 4);
        b[2..4].copy_from_slice(&off.to_ne_bytes());
        b[4..].copy_from_slice(&imm.to_ne_bytes());
        b
    }

    /// A `SOCKHASH` (key: a socket's cookie, value: the socket its segments go to) with the
    /// verdict program attached: (map, program).
    fn sockmap() -> io::Result<(OwnedFd, OwnedFd)> {
        let mut a = [0u8; 128];
        // map_type BPF_MAP_TYPE_SOCKHASH, key_size 8, value_size 4, max_entries 64
        for (i, v) in [18u32, 8, 4, 64].into_iter().enumerate() {
            put(&mut a, i * 4, &v.to_ne_bytes());
        }
        let map = owned(bpf(BPF_MAP_CREATE, &mut a)?);
        let code: Vec<u8> = [
            insn(0xbf, 6, 1, 0, 0),               // r6 = ctx
            insn(0x85, 0, 0, 0, 46),              // r0 = get_socket_cookie(ctx)
            insn(0x7b, 10, 0, -8, 0),             // *(u64 *)(fp - 8) = r0
            insn(0xbf, 1, 6, 0, 0),               // r1 = ctx
            insn(0x18, 2, 1, 0, map.as_raw_fd()), // r2 = map (ld_imm64, pseudo map fd)
            insn(0, 0, 0, 0, 0),
            insn(0xbf, 3, 10, 0, 0), // r3 = fp
            insn(0x07, 3, 0, 0, -8), // r3 -= 8 (the key)
            insn(0xb7, 4, 0, 0, 0),  // r4 = 0 (egress)
            insn(0x85, 0, 0, 0, 72), // r0 = sk_redirect_hash(..)
            insn(0x55, 0, 0, 1, 0),  // if r0 != SK_DROP: exit with it
            insn(0xb7, 0, 0, 0, 1),  // no peer: SK_PASS (keep it)
            insn(0x95, 0, 0, 0, 0),  // exit
        ]
        .concat();
        let license = b"GPL\0";
        let mut a = [0u8; 128];
        put(&mut a, 0, &14u32.to_ne_bytes()); // BPF_PROG_TYPE_SK_SKB
        put(&mut a, 4, &((code.len() / 8) as u32).to_ne_bytes());
        put(&mut a, 8, &(code.as_ptr() as u64).to_ne_bytes());
        put(&mut a, 16, &(license.as_ptr() as u64).to_ne_bytes());
        let prog = owned(bpf(BPF_PROG_LOAD, &mut a)?);
        let mut a = [0u8; 128];
        put(&mut a, 0, &(map.as_raw_fd() as u32).to_ne_bytes());
        put(&mut a, 4, &(prog.as_raw_fd() as u32).to_ne_bytes());
        put(&mut a, 8, &38u32.to_ne_bytes()); // BPF_SK_SKB_VERDICT
        bpf(BPF_PROG_ATTACH, &mut a)?;
        Ok((map, prog))
    }

    fn cookie(s: &TcpStream) -> u64 {
        let (mut v, mut len) = (0u64, 8 as libc::socklen_t);
        // SAFETY: `v` is 8 writable bytes and `len` says so; the socket is open.
        let r = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_COOKIE,
                (&raw mut v).cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0, "SO_COOKIE: {}", io::Error::last_os_error());
        v
    }

    /// Sends what `from` receives to `to`: `map[cookie(from)] = to`.
    fn redirect(map: &OwnedFd, from: &TcpStream, to: &TcpStream) -> io::Result<()> {
        let key = cookie(from);
        let value = to.as_raw_fd();
        let mut a = [0u8; 128];
        put(&mut a, 0, &(map.as_raw_fd() as u32).to_ne_bytes());
        put(&mut a, 8, &(&raw const key as u64).to_ne_bytes());
        put(&mut a, 16, &(&raw const value as u64).to_ne_bytes());
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(drop)
    }

    struct Row {
        gbs: f64,
        cpu: f64,
        server: f64,
        relay: f64,
        client: f64,
        machine: f64,
    }

    fn run(way: &str) -> io::Result<Row> {
        let (server_end, up) = pair();
        let (relay_end, mut client) = match way {
            "direct" => (None, up.try_clone()?),
            _ => {
                let (a, b) = pair();
                (Some(a), b)
            }
        };
        // The sockmap's sockets, kept open until the client has read everything.
        let mut kept = None;
        let relay_end = match (way, relay_end) {
            ("sockmap", Some(down)) => {
                let (map, prog) = sockmap()?;
                // A socket is in the map (its segments seen by the program) only as a value:
                // each is the other's. (The client sends nothing here.)
                redirect(&map, &up, &down)?;
                redirect(&map, &down, &up)?;
                kept = Some((map, prog, up.try_clone()?, down));
                None
            }
            (_, r) => r,
        };
        let (machine0, cpu0, client0) = (
            busy(),
            cpu(UsageWho::RUSAGE_SELF),
            cpu(UsageWho::RUSAGE_THREAD),
        );
        let start = Instant::now();
        let server = thread::spawn(move || serve(server_end));
        let relay = relay_end.map(|down| {
            let splicing = way == "splice";
            thread::spawn(move || {
                if splicing {
                    splice_relay(up, down);
                } else {
                    copy(up, down);
                }
                cpu(UsageWho::RUSAGE_THREAD)
            })
        });
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0;
        while total < GIB {
            let n = client.read(&mut buf)?;
            assert!(n > 0, "{way}: {total} of {GIB} bytes");
            total += n as u64;
        }
        let secs = start.elapsed().as_secs_f64();
        let (cpu1, client1, machine1) = (
            cpu(UsageWho::RUSAGE_SELF),
            cpu(UsageWho::RUSAGE_THREAD),
            busy(),
        );
        drop(kept);
        let server = server.join().unwrap();
        let relay = relay.map_or(0.0, |r| r.join().unwrap());
        Ok(Row {
            gbs: GIB as f64 / secs / 1e9,
            cpu: cpu1 - cpu0,
            server,
            relay,
            client: client1 - client0,
            machine: machine1 - machine0,
        })
    }

    pub fn main() {
        let mut ways: Vec<String> = std::env::args().skip(1).collect();
        if ways.is_empty() {
            ways = ["direct", "copy", "splice", "sockmap"]
                .map(String::from)
                .to_vec();
        }
        println!("1 GiB download on loopback, rounds interleaved; CPU s per GiB");
        println!(
            "{:<8} {:>7} {:>8} {:>7} {:>7} {:>7} {:>8}",
            "way", "GB/s", "process", "server", "relay", "client", "machine"
        );
        for _ in 0..3 {
            for way in &ways {
                match run(way) {
                    Ok(r) => println!(
                        "{way:<8} {:>7.2} {:>8.2} {:>7.2} {:>7.2} {:>7.2} {:>8.2}",
                        r.gbs, r.cpu, r.server, r.relay, r.client, r.machine
                    ),
                    Err(e) => eprintln!("SKIP {way}: {e}"),
                }
            }
        }
    }
}
