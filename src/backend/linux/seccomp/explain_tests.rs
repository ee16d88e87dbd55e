//! The explained filter ([`super::build_explained`]) against the filter stockade installs:
//! the same verdict wherever that one allows or kills, a notification wherever it fails a
//! call (but `clone3` and `openat2`, which keep libc's `ENOSYS`), and an answer that is
//! that errno. Then the interpreter the host answers with, against the kernel.

use super::interp::{data, run_test as run};
use super::tables::AUDIT_ARCH;
use super::*;

const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;

fn all_options() -> Vec<FilterOptions> {
    let mut v = Vec::new();
    for bits in 0..16u8 {
        v.push(FilterOptions {
            allow_ptrace: bits & 1 != 0,
            deny_network: bits & 2 != 0,
            inet_stream_only: bits & 4 != 0,
            host_namespaces: bits & 8 != 0,
        });
    }
    v
}

/// Every number up to past [`KNOWN_MAX`], −1 and some x32 ones.
fn numbers() -> Vec<u32> {
    let mut v: Vec<u32> = (0..=KNOWN_MAX + 8).collect();
    v.extend([u32::MAX, 0x4000_0000, 0x4000_0001 + 59]);
    v
}

/// Argument values that hit or miss the argument checks.
fn args_sets() -> Vec<[u64; 6]> {
    let vals = [
        0u64,
        libc::CLONE_NEWUSER as u64 | 17,
        0x5412,
        libc::AF_INET as u64,
        libc::AF_VSOCK as u64,
        0x40000,
        0o4755,
        libc::O_CREAT as u64,
        u64::MAX,
    ];
    let mut v = Vec::new();
    for &a in &vals {
        for &b in &vals {
            v.push([a, b, 0o4755, 0o4755, 0, 0]);
            v.push([a, b, 0, 0, 1 << 32, 16]);
        }
    }
    v
}

#[test]
fn the_explained_program_notifies_exactly_the_denials() {
    let fallback = [libc::SYS_clone3 as u32, libc::SYS_openat2 as u32];
    for o in all_options() {
        for watch in [false, true] {
            let x = build_explained(&o, watch).unwrap();
            assert_eq!(x.errno.instructions(), build(&o).unwrap().instructions());
            for nr in numbers() {
                for args in args_sets() {
                    let e = run(x.errno.instructions(), AUDIT_ARCH, nr, args);
                    let n = run(x.notify.instructions(), AUDIT_ARCH, nr, args);
                    let answer = x.answer(&data(AUDIT_ARCH, nr, args));
                    // Unless layer 2's allow mode lists it already (Fast Open).
                    let sendto =
                        nr == libc::SYS_sendto as u32 && (!o.inet_stream_only || o.deny_network);
                    let watched =
                        watch && (nr == libc::SYS_connect as u32 || (sendto && args[4] != 0));
                    if watched {
                        assert_eq!((e, n), (libc::SECCOMP_RET_ALLOW, NOTIFY), "{o:?} {nr}");
                        assert_eq!(answer, Answer::Continue);
                    } else if fallback.contains(&nr) {
                        assert_eq!(n, e, "{o:?} {nr}: libc's fallback");
                        assert_eq!(e, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
                    } else if e & libc::SECCOMP_RET_ACTION_FULL == libc::SECCOMP_RET_ERRNO {
                        assert_eq!(n, NOTIFY, "{o:?} {nr} {args:?}");
                        let errno = (e & libc::SECCOMP_RET_DATA) as i32;
                        assert_eq!(answer, Answer::Deny(errno));
                    } else {
                        assert_eq!(n, e, "{o:?} {nr} {args:?}");
                    }
                }
            }
            // A foreign architecture is still killed.
            let i386 = 3 | 0x4000_0000;
            assert_eq!(
                run(x.notify.instructions(), i386, 0, [0; 6]),
                libc::SECCOMP_RET_KILL_PROCESS
            );
        }
    }
}

/// With explain off nothing changes: the program stockade installs is, instruction for
/// instruction, the one it installed before explain existed (default options on x86_64:
/// 138 instructions, pinned by their FNV-1a digest, computed from main's generator at
/// 6c54c33). A change to the filter itself updates the digest here on purpose.
#[cfg(target_arch = "x86_64")]
#[test]
fn explain_off_leaves_the_program_unchanged() {
    let p = build(&FilterOptions::default()).unwrap();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for i in p.instructions() {
        for b in i
            .code
            .to_le_bytes()
            .into_iter()
            .chain([i.jt, i.jf])
            .chain(i.k.to_le_bytes())
        {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    assert_eq!((p.instructions().len(), h), (GOLDEN_LEN, GOLDEN_DIGEST));
    // No return of the installed program notifies.
    assert!(p.instructions().iter().all(|i| i.k != NOTIFY));
}

#[cfg(target_arch = "x86_64")]
const GOLDEN_LEN: usize = 138;
#[cfg(target_arch = "x86_64")]
const GOLDEN_DIGEST: u64 = 8_421_150_239_179_062_316;

/// The interpreter gives an answer or `None` for any program and input, never a panic.
#[test]
fn the_interpreter_is_total() {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for _ in 0..20_000 {
        let len = (next() % 12) as usize;
        let prog: Vec<libc::sock_filter> = (0..len)
            .map(|_| {
                let r = next();
                libc::sock_filter {
                    code: (r & 0xff) as u16,
                    jt: (r >> 8) as u8,
                    jf: (r >> 16) as u8,
                    k: (r >> 32) as u32 % 80,
                }
            })
            .collect();
        let d = data(next() as u32, next() as u32, [next(); 6]);
        let _ = interp::run(&prog, &d);
    }
}

/// The interpreter against the kernel: the filter installed in a child, random calls the
/// interpreter says it fails (so the kernel runs none of them), and the errno each got.
#[test]
fn the_interpreter_agrees_with_the_kernel() {
    let o = FilterOptions {
        host_namespaces: true,
        deny_network: true,
        ..FilterOptions::default()
    };
    let filter = build(&o).unwrap();
    let listed: Vec<u32> = rules::rules(&o).unwrap().keys().copied().collect();
    let vals = [
        0u64,
        1,
        8,
        0x40000,
        0o4755,
        0x5412,
        40,
        2,
        libc::CLONE_NEWUSER as u64,
    ];
    let mut s: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    // (nr, args, the errno the interpreter predicts)
    let mut cases: Vec<(u32, [u64; 6], i32)> = Vec::new();
    while cases.len() < 2000 {
        let nr = if next() % 8 == 0 {
            KNOWN_MAX + 1 + (next() % 50) as u32
        } else {
            listed[(next() as usize) % listed.len()]
        };
        let mut args = [0u64; 6];
        for a in &mut args {
            *a = match next() % 3 {
                0 => vals[(next() as usize) % vals.len()],
                1 => next(),
                _ => vals[(next() as usize) % vals.len()] | (next() << 32),
            };
        }
        let action = run(filter.instructions(), AUDIT_ARCH, nr, args);
        if action & libc::SECCOMP_RET_ACTION_FULL == libc::SECCOMP_RET_ERRNO {
            cases.push((nr, args, (action & libc::SECCOMP_RET_DATA) as i32));
        }
    }
    let mut got = vec![0i32; cases.len()];
    let (r, w) = nix::unistd::pipe().unwrap();
    // SAFETY: the child below makes raw system calls only (no allocation, no lock) on
    // memory prepared before the fork, as a child of a multithreaded process must.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        use stockade_sys::linux as sys;
        let mut ok = sys::prctl_set_no_new_privs().is_ok();
        // SAFETY: the filter answers with ALLOW, KILL_PROCESS and non-zero errnos only;
        // this child makes only the calls below, which it expects to fail, and exits.
        ok &= unsafe { sys::seccomp_set_mode_filter(0, filter.instructions()) }.is_ok();
        for (slot, (nr, args, _)) in got.iter_mut().zip(&cases) {
            let a = args.map(|v| v as usize);
            // SAFETY: the filter fails every one of these calls before the kernel runs
            // it (the interpreter said so; a disagreement is what this test finds, and
            // then the call's arguments are random: only this child, about to exit, is
            // at stake).
            let ret = unsafe { sys::syscall6(i64::from(*nr), a) };
            *slot = if ret < 0 { -ret as i32 } else { 0 };
        }
        // SAFETY: `got` is a live slice of i32s; viewing it as bytes reads the same memory.
        let raw = unsafe { std::slice::from_raw_parts(got.as_ptr().cast::<u8>(), got.len() * 4) };
        let mut off = 0;
        while ok && off < raw.len() {
            match sys::write(std::os::fd::AsFd::as_fd(&w).into(), &raw[off..]) {
                Ok(n) => off += n,
                Err(_) => break,
            }
        }
        sys::exit_group(if ok { 0 } else { 1 });
    }
    drop(w);
    let mut buf = Vec::new();
    std::io::Read::read_to_end(&mut std::fs::File::from(r), &mut buf).unwrap();
    let mut status = 0;
    // SAFETY: `status` is a live c_int the kernel writes.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert_eq!(libc::WEXITSTATUS(status), 0, "status {status:#x}");
    assert_eq!(buf.len(), cases.len() * 4);
    for (chunk, (nr, args, want)) in buf.chunks(4).zip(&cases) {
        let errno = i32::from_ne_bytes(chunk.try_into().unwrap());
        assert_eq!(errno, *want, "syscall {nr} {args:x?}");
    }
}
