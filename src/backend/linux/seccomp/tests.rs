//! The filter's unit tests: every number and argument against the rules as SECURITY.md
//! states them, run through [`super::interp`].

use super::codegen::LEAF;
use super::interp::{run_test as run, trace};
use super::rules::rules;
use super::tables::{CLONE_NEW_FLAGS, DENIED, DENIED_ARCH, PTRACE_CALLS, X32_SYSCALL_BIT};
use super::*;

#[cfg(target_arch = "x86_64")]
const NATIVE: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const NATIVE: u32 = 183 | 0x8000_0000 | 0x4000_0000;
const EPERM: u32 = libc::SECCOMP_RET_ERRNO | 1;
const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | 38;
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

fn nr(n: i64) -> u32 {
    u32::try_from(n).unwrap()
}

fn opts(allow_ptrace: bool, deny_network: bool, host_namespaces: bool) -> FilterOptions {
    FilterOptions {
        allow_ptrace,
        deny_network,
        inet_stream_only: false,
        host_namespaces,
    }
}

/// Every option combination.
fn all_options() -> Vec<FilterOptions> {
    let mut v = Vec::new();
    for a in [false, true] {
        for d in [false, true] {
            for i in [false, true] {
                for h in [false, true] {
                    v.push(FilterOptions {
                        inet_stream_only: i,
                        ..opts(a, d, h)
                    });
                }
            }
        }
    }
    v
}

/// What `socket(family, type, protocol)` (and `socketpair` with the same three) must get
/// under `o`, from the rules as SECURITY.md states them: only the low 32 bits count.
fn socket_expected(o: &FilterOptions, family: u32, ty: u32, protocol: u32) -> u32 {
    let deny = |b: bool| if b { EPERM } else { ALLOW };
    let (unix, inet, inet6, vsock) = (1, 2, 10, 40);
    if o.deny_network {
        return deny(family != unix);
    }
    if o.inet_stream_only {
        if family == unix {
            return ALLOW;
        }
        if family != inet && family != inet6 {
            return EPERM;
        }
        // SOCK_CLOEXEC (0o2000000) and SOCK_NONBLOCK (0o4000) may come with SOCK_STREAM
        // (1); protocol 0 or IPPROTO_TCP (6).
        let stream = ty & !(0o2000000 | 0o4000) == 1;
        return deny(!(stream && (protocol == 0 || protocol == 6)));
    }
    deny(family == vsock)
}

/// Families, types and protocols around every branch of the socket block, each also with
/// high bits set (the kernel sees the low 32 only).
fn socket_args() -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let with_high = |low: &[u64]| {
        let mut v = low.to_vec();
        v.extend(low.iter().map(|x| x | 0xdead_beef_0000_0000));
        v
    };
    let families = [
        libc::AF_UNSPEC,
        libc::AF_UNIX,
        libc::AF_INET,
        libc::AF_INET6,
        libc::AF_NETLINK,
        libc::AF_PACKET,
        libc::AF_VSOCK,
        // AF_SMC, not in libc for every target.
        43,
        libc::AF_INET | 0x100,
        -1,
    ]
    .map(|f| u64::from(f as u32));
    let cloexec = libc::SOCK_CLOEXEC;
    let nonblock = libc::SOCK_NONBLOCK;
    let types = [
        libc::SOCK_STREAM,
        libc::SOCK_STREAM | cloexec,
        libc::SOCK_STREAM | nonblock,
        libc::SOCK_STREAM | cloexec | nonblock,
        // A bit beside the two flags: not a stream socket to the filter.
        libc::SOCK_STREAM | 0x10_0000,
        libc::SOCK_STREAM | i32::MIN,
        libc::SOCK_DGRAM,
        libc::SOCK_DGRAM | cloexec,
        libc::SOCK_RAW,
        libc::SOCK_SEQPACKET,
        // SOCK_PACKET, which libc marks deprecated.
        10,
        0,
        -1,
    ]
    .map(|t| u64::from(t as u32));
    let protocols = [
        0,
        libc::IPPROTO_TCP,
        libc::IPPROTO_UDP,
        libc::IPPROTO_SCTP,
        libc::IPPROTO_MPTCP,
        libc::IPPROTO_RAW,
        libc::IPPROTO_TCP | 0x100,
        -1,
    ]
    .map(|p| u64::from(p as u32));
    (
        with_high(&families),
        with_high(&types),
        with_high(&protocols),
    )
}

/// The argument rules, written out here from SECURITY.md rather than taken from the
/// generator's tables: (syscall, mode argument).
fn mode_rules() -> Vec<(i64, usize)> {
    let mut v = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (452, 2),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
    ]);
    v
}

/// (syscall, flags argument, mode argument).
fn create_rules() -> Vec<(i64, usize, usize)> {
    let mut v = vec![(libc::SYS_openat, 2, 3)];
    #[cfg(target_arch = "x86_64")]
    v.push((libc::SYS_open, 1, 2));
    v
}

/// (syscall, flags argument): `MSG_FASTOPEN` refused under `inet_stream_only`.
fn send_rules() -> [(i64, usize); 3] {
    [
        (libc::SYS_sendto, 3),
        (libc::SYS_sendmsg, 2),
        (libc::SYS_sendmmsg, 3),
    ]
}

const LAYER2_OWN_PID: &[i64] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
];

const LAYER2_IPC: &[i64] = &[
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
];

/// The numbers whose answer depends on the arguments under `o`.
fn arg_checked(o: &FilterOptions) -> Vec<u32> {
    let mut v: Vec<i64> = vec![
        libc::SYS_clone,
        libc::SYS_ioctl,
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_personality,
    ];
    v.extend(mode_rules().iter().map(|r| r.0));
    v.extend(create_rules().iter().map(|r| r.0));
    if o.host_namespaces {
        v.extend(LAYER2_OWN_PID);
        v.extend([libc::SYS_setpriority, libc::SYS_ioprio_set]);
    }
    if o.inet_stream_only && !o.deny_network {
        v.extend(send_rules().iter().map(|r| r.0));
    }
    v.into_iter().map(nr).collect()
}

/// What the filter must answer for `n` with `args` under `o`, from the rules as
/// SECURITY.md states them.
fn expected(o: &FilterOptions, n: u32, args: [u64; 6]) -> u32 {
    let lo = |i: usize| args[i] as u32;
    let is = |x: i64| nr(x) == n;
    let listed = |l: &[i64]| l.iter().any(|&x| is(x));
    let deny = |b: bool| if b { EPERM } else { ALLOW };
    let setid = 0o6000;
    if n == u32::MAX {
        return ALLOW;
    }
    if X32_SYSCALL_BIT.is_some_and(|bit| n >= bit) {
        return KILL;
    }
    if n > 469 || is(libc::SYS_clone3) || is(libc::SYS_openat2) {
        return ENOSYS;
    }
    if listed(DENIED)
        || listed(DENIED_ARCH)
        || (!o.allow_ptrace && listed(PTRACE_CALLS))
        || (o.host_namespaces && listed(LAYER2_IPC))
    {
        return EPERM;
    }
    if is(libc::SYS_clone) {
        return deny(lo(0) & 0x7e02_0000 != 0);
    }
    if is(libc::SYS_ioctl) {
        return deny([0x5412, 0x541c, 0x5423].contains(&lo(1)));
    }
    if is(libc::SYS_socket) || is(libc::SYS_socketpair) {
        return socket_expected(o, lo(0), lo(1), lo(2));
    }
    if is(libc::SYS_personality) {
        return deny(![0, 8, 0x20000, 0x20008, u32::MAX].contains(&lo(0)));
    }
    if let Some(&(_, m)) = mode_rules().iter().find(|r| is(r.0)) {
        return deny(lo(m) & setid != 0);
    }
    if let Some(&(_, f, m)) = create_rules().iter().find(|r| is(r.0)) {
        let creates = lo(f) & (0o100 | 0o20000000) != 0;
        return deny(creates && lo(m) & setid != 0);
    }
    if let Some(&(_, f)) = send_rules().iter().find(|r| is(r.0)) {
        let fastopen = 0x2000_0000;
        return deny(o.inet_stream_only && !o.deny_network && lo(f) & fastopen != 0);
    }
    if o.host_namespaces {
        if listed(LAYER2_OWN_PID) {
            return deny(lo(0) != 0);
        }
        if is(libc::SYS_setpriority) {
            return deny(!(lo(0) == 0 && lo(1) == 0));
        }
        if is(libc::SYS_ioprio_set) {
            return deny(!(lo(0) == 1 && lo(1) == 0));
        }
    }
    ALLOW
}

/// Argument values that hit or just miss some rule, in the low word or with high bits.
fn interesting() -> Vec<u64> {
    let low: [u64; 16] = [
        0,
        1,
        8,
        0x20000,
        0x20008,
        0x40_0000,
        0o4755,
        0o2755,
        0o755,
        0o100 | 0o2,
        0o20200002,
        0x5412,
        0x5423,
        libc::AF_VSOCK as u64,
        0x2000_0000,
        0x2000_0040,
    ];
    let mut v: Vec<u64> = low.to_vec();
    v.extend([u64::from(u32::MAX), 0x1000_0000, libc::AF_UNIX as u64]);
    v.extend(low.iter().map(|x| x | 0xdead_beef_0000_0000));
    v
}

#[test]
fn every_number_and_argument_gets_the_documented_action() {
    let vals = interesting();
    let probes = (0..1024u32).chain([
        KNOWN_MAX,
        KNOWN_MAX + 1,
        0x3fff_ffff,
        0x4000_0000,
        0x4000_0000 | 39,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_fffe,
        u32::MAX,
    ]);
    for o in all_options() {
        let p = build(&o).unwrap();
        let prog = p.instructions();
        let checked = arg_checked(&o);
        let sockets = [nr(libc::SYS_socket), nr(libc::SYS_socketpair)];
        for n in probes.clone() {
            assert_eq!(run(prog, 3 | 0x4000_0000, n, [0; 6]), KILL, "i386 {n}");
            if sockets.contains(&n) {
                let (families, types, protocols) = socket_args();
                for &f in &families {
                    for &t in &types {
                        for &p in &protocols {
                            let args = [f, t, p, 0, 0, 0];
                            assert_eq!(
                                run(prog, NATIVE, n, args),
                                expected(&o, n, args),
                                "{o:?} syscall {n} {args:x?}"
                            );
                        }
                    }
                }
                continue;
            }
            if !checked.contains(&n) {
                for args in [[0; 6], [u64::MAX; 6]] {
                    assert_eq!(
                        run(prog, NATIVE, n, args),
                        expected(&o, n, args),
                        "{o:?} syscall {n:#x} {args:x?}"
                    );
                }
                continue;
            }
            for &a in &vals {
                for &b in &vals {
                    for &c in &[0, 0o100, 0o20200000, 0o4000, 0o2000, 0o755, 1, 0x2000_4000] {
                        let args = [a, b, c, a, b, c];
                        assert_eq!(
                            run(prog, NATIVE, n, args),
                            expected(&o, n, args),
                            "{o:?} syscall {n} {args:x?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn denies_the_list_and_allows_the_rest() {
    let f = build(&FilterOptions::default()).unwrap();
    let p = f.instructions();
    for &n in DENIED.iter().chain(DENIED_ARCH).chain(PTRACE_CALLS) {
        assert_eq!(run(p, NATIVE, nr(n), [0; 6]), EPERM, "syscall {n}");
    }
    for n in [
        libc::SYS_getpid,
        libc::SYS_read,
        libc::SYS_openat,
        libc::SYS_execve,
        libc::SYS_msgget,
        libc::SYS_prlimit64,
    ] {
        assert_eq!(run(p, NATIVE, nr(n), [0; 6]), ALLOW, "syscall {n}");
    }
    assert_eq!(run(p, NATIVE, nr(libc::SYS_clone3), [0; 6]), ENOSYS);
    assert_eq!(run(p, NATIVE, nr(libc::SYS_openat2), [0; 6]), ENOSYS);
}

/// Docker's default profile and flatpak deny NUMA memory policy and fanotify; so does
/// stockade, under every set of options (issue 22, point 12).
#[test]
fn numa_policy_and_fanotify_are_denied_under_every_option() {
    for o in all_options() {
        let f = build(&o).unwrap();
        for n in [
            libc::SYS_mbind,
            libc::SYS_set_mempolicy,
            libc::SYS_get_mempolicy,
            libc::SYS_set_mempolicy_home_node,
            libc::SYS_fanotify_init,
        ] {
            assert_eq!(
                run(f.instructions(), NATIVE, nr(n), [0; 6]),
                EPERM,
                "syscall {n} under {o:?}"
            );
        }
    }
}

#[test]
fn foreign_abis_are_killed() {
    let p = build(&FilterOptions::default()).unwrap();
    let i386 = 3 | 0x4000_0000;
    assert_eq!(run(p.instructions(), i386, 20, [0; 6]), KILL);
    assert_eq!(run(p.instructions(), i386, u32::MAX, [0; 6]), KILL);
    if let Some(bit) = X32_SYSCALL_BIT {
        assert_eq!(run(p.instructions(), NATIVE, bit | 39, [0; 6]), KILL);
        assert_eq!(run(p.instructions(), NATIVE, u32::MAX - 1, [0; 6]), KILL);
    }
}

/// A tracer skips a call by writing −1; the kernel then answers ENOSYS (or what the
/// tracer set). The filter must neither kill nor overwrite the return value.
#[test]
fn syscall_minus_one_passes_and_newer_calls_fail_with_enosys() {
    for o in all_options() {
        let p = build(&o).unwrap();
        assert_eq!(run(p.instructions(), NATIVE, u32::MAX, [0; 6]), ALLOW);
        for n in [KNOWN_MAX + 1, 470, 471, 500, 1000, 0x3fff_ffff] {
            assert_eq!(run(p.instructions(), NATIVE, n, [0; 6]), ENOSYS, "{n}");
        }
        // Everything up to KNOWN_MAX is decided by the lists, not by the newer-call rule.
        assert_eq!(run(p.instructions(), NATIVE, KNOWN_MAX, [0; 6]), ALLOW);
    }
}

#[test]
fn clone_is_checked_per_namespace_flag_on_the_low_word() {
    let p = build(&FilterOptions::default()).unwrap();
    let clone = nr(libc::SYS_clone);
    let thread = (libc::CLONE_VM
        | libc::CLONE_FS
        | libc::CLONE_FILES
        | libc::CLONE_SIGHAND
        | libc::CLONE_THREAD) as u64;
    assert_eq!(
        run(p.instructions(), NATIVE, clone, [thread, 0, 0, 0, 0, 0]),
        ALLOW
    );
    for &f in CLONE_NEW_FLAGS {
        let flags = thread | u64::from(f as u32);
        assert_eq!(
            run(p.instructions(), NATIVE, clone, [flags, 0, 0, 0, 0, 0]),
            EPERM
        );
    }
    // Bits above 32 are ignored by the kernel and by the filter alike.
    let high = thread | 0xffff_ffff_0000_0000;
    assert_eq!(
        run(p.instructions(), NATIVE, clone, [high, 0, 0, 0, 0, 0]),
        ALLOW
    );
}

#[test]
fn ioctl_and_socket_compare_the_low_word() {
    let p = build(&FilterOptions::default()).unwrap();
    let ioctl = nr(libc::SYS_ioctl);
    for cmd in [libc::TIOCSTI, libc::TIOCLINUX, libc::TIOCSETD] {
        let cmd = u64::from(cmd as u32);
        assert_eq!(
            run(p.instructions(), NATIVE, ioctl, [0, cmd, 0, 0, 0, 0]),
            EPERM
        );
        let high = cmd | 0xdead_beef_0000_0000;
        assert_eq!(
            run(p.instructions(), NATIVE, ioctl, [0, high, 0, 0, 0, 0]),
            EPERM
        );
    }
    // Allowed: the window size, and taking a controlling terminal, which
    // `Command::controlling_terminal` does after the filter is installed.
    for cmd in [libc::TIOCGWINSZ, libc::TIOCSWINSZ, libc::TIOCSCTTY] {
        let cmd = u64::from(cmd as u32);
        assert_eq!(
            run(p.instructions(), NATIVE, ioctl, [0, cmd, 0, 0, 0, 0]),
            ALLOW
        );
    }

    let fam = |f: libc::c_int| [u64::from(f as u32), 0, 0, 0, 0, 0];
    let denied = build(&FilterOptions {
        deny_network: true,
        ..Default::default()
    })
    .unwrap();
    for call in [libc::SYS_socket, libc::SYS_socketpair] {
        let call = nr(call);
        assert_eq!(
            run(p.instructions(), NATIVE, call, fam(libc::AF_VSOCK)),
            EPERM
        );
        assert_eq!(
            run(p.instructions(), NATIVE, call, fam(libc::AF_INET)),
            ALLOW
        );
        for f in [
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
            libc::AF_PACKET,
            libc::AF_VSOCK,
        ] {
            assert_eq!(
                run(denied.instructions(), NATIVE, call, fam(f)),
                EPERM,
                "{call} family {f}"
            );
        }
        assert_eq!(
            run(denied.instructions(), NATIVE, call, fam(libc::AF_UNIX)),
            ALLOW
        );
    }
}

/// `network = "allow"` on layer 2: TCP and unix sockets only, case by case (the
/// exhaustive product runs in `every_number_and_argument_gets_the_documented_action`).
#[test]
fn inet_stream_only_allows_tcp_and_unix_sockets_only() {
    let f = build(&FilterOptions {
        inet_stream_only: true,
        host_namespaces: true,
        ..Default::default()
    })
    .unwrap();
    let p = f.instructions();
    let sock = |family: libc::c_int, ty: libc::c_int, protocol: libc::c_int| {
        [family, ty, protocol].map(|x| u64::from(x as u32))
    };
    let (cloexec, nonblock) = (libc::SOCK_CLOEXEC, libc::SOCK_NONBLOCK);
    let allowed = [
        sock(libc::AF_INET, libc::SOCK_STREAM, 0),
        sock(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP),
        sock(libc::AF_INET6, libc::SOCK_STREAM | cloexec, 0),
        sock(
            libc::AF_INET6,
            libc::SOCK_STREAM | nonblock,
            libc::IPPROTO_TCP,
        ),
        sock(libc::AF_INET, libc::SOCK_STREAM | cloexec | nonblock, 0),
        // Unix sockets of every type.
        sock(libc::AF_UNIX, libc::SOCK_STREAM, 0),
        sock(libc::AF_UNIX, libc::SOCK_DGRAM | cloexec, 0),
        sock(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0),
    ];
    let denied = [
        // UDP, ICMP, raw, packet, netlink, vsock, no family.
        sock(libc::AF_INET, libc::SOCK_DGRAM, 0),
        sock(
            libc::AF_INET6,
            libc::SOCK_DGRAM | cloexec,
            libc::IPPROTO_UDP,
        ),
        sock(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
        sock(libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
        sock(libc::AF_PACKET, libc::SOCK_RAW, 0),
        sock(libc::AF_NETLINK, libc::SOCK_RAW, 0),
        sock(libc::AF_VSOCK, libc::SOCK_STREAM, 0),
        sock(libc::AF_UNSPEC, libc::SOCK_STREAM, 0),
        // Stream sockets that are not TCP to Landlock.
        sock(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_SCTP),
        sock(libc::AF_INET6, libc::SOCK_STREAM, libc::IPPROTO_MPTCP),
        sock(libc::AF_INET, libc::SOCK_SEQPACKET, libc::IPPROTO_SCTP),
        // A bit beside the two creation flags is not masked off.
        sock(libc::AF_INET, libc::SOCK_STREAM | 0x10_0000, 0),
        sock(libc::AF_INET, libc::SOCK_STREAM | 4, 0),
    ];
    for call in [libc::SYS_socket, libc::SYS_socketpair].map(nr) {
        for (cases, want) in [(&allowed[..], ALLOW), (&denied[..], EPERM)] {
            for &[f, t, pr] in cases.iter() {
                let args = [f, t, pr, 0, 0, 0];
                assert_eq!(run(p, NATIVE, call, args), want, "{call} {args:x?}");
                // High bits in any of the three do not change the answer.
                let high = args.map(|a| a | 0xffff_ffff_0000_0000);
                assert_eq!(run(p, NATIVE, call, high), want, "{call} {high:x?}");
            }
        }
    }
    // deny_network is the stricter option and wins over this one.
    let both = build(&FilterOptions {
        deny_network: true,
        inet_stream_only: true,
        ..Default::default()
    })
    .unwrap();
    let tcp = [2, 1, 0, 0, 0, 0];
    let socket = nr(libc::SYS_socket);
    assert_eq!(run(both.instructions(), NATIVE, socket, tcp), EPERM);
    assert_eq!(run(p, NATIVE, socket, tcp), ALLOW);
}

/// TCP Fast Open's send connects past Landlock's `connect` hook: under
/// `inet_stream_only` every send call with `MSG_FASTOPEN` fails, high bits or other flags
/// beside it or not; without the flag, and under the other options, sends pass.
#[test]
fn inet_stream_only_refuses_fast_open_sends() {
    let only = FilterOptions {
        inet_stream_only: true,
        ..Default::default()
    };
    let strict = build(&only).unwrap();
    let others = [
        FilterOptions::default(),
        FilterOptions {
            deny_network: true,
            ..only
        },
    ]
    .map(|o| build(&o).unwrap());
    let fastopen = u64::from(libc::MSG_FASTOPEN as u32);
    let nosignal = u64::from(libc::MSG_NOSIGNAL as u32);
    for (call, flags_arg) in send_rules() {
        let call = nr(call);
        let with = |flags: u64| {
            let mut args = [3, 0, 1, 0, 0, 0];
            args[flags_arg] = flags;
            args
        };
        for flags in [
            fastopen,
            fastopen | nosignal,
            fastopen | 0xffff_ffff_0000_0000,
        ] {
            assert_eq!(run(strict.instructions(), NATIVE, call, with(flags)), EPERM);
            for o in &others {
                assert_eq!(run(o.instructions(), NATIVE, call, with(flags)), ALLOW);
            }
        }
        for flags in [0, nosignal, 0xffff_ffff_0000_0000 | nosignal] {
            assert_eq!(run(strict.instructions(), NATIVE, call, with(flags)), ALLOW);
        }
    }
}

#[test]
fn personality_allows_only_the_listed_personas() {
    let p = build(&FilterOptions::default()).unwrap();
    let call = nr(libc::SYS_personality);
    let persona = |v: u64| run(p.instructions(), NATIVE, call, [v, 0, 0, 0, 0, 0]);
    for ok in [
        0u64,
        8,
        0x20000,
        0x20008,
        0xffff_ffff,
        0xffff_ffff_ffff_ffff,
    ] {
        assert_eq!(persona(ok), ALLOW, "{ok:#x}");
    }
    // ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ADDR_LIMIT_3GB, PER_BSD, and combinations.
    for bad in [
        0x0040000u64,
        0x0400000,
        0x8000000,
        0x6,
        0x0040008,
        0x1_0004_0000,
    ] {
        assert_eq!(persona(bad), EPERM, "{bad:#x}");
    }
}

#[test]
fn setuid_and_setgid_modes_are_refused() {
    let p = build(&FilterOptions::default()).unwrap();
    let p = p.instructions();
    let fchmodat = nr(libc::SYS_fchmodat);
    for mode in [0o4755u64, 0o2755, 0o6755, 0o4000, 0o2000, 0o104755] {
        assert_eq!(run(p, NATIVE, fchmodat, [0, 0, mode, 0, 0, 0]), EPERM);
        assert_eq!(
            run(p, NATIVE, nr(libc::SYS_fchmod), [0, mode, 0, 0, 0, 0]),
            EPERM
        );
    }
    for mode in [0o755u64, 0o1777, 0o644, 0o777] {
        assert_eq!(run(p, NATIVE, fchmodat, [0, 0, mode, 0, 0, 0]), ALLOW);
    }
    let openat = nr(libc::SYS_openat);
    let creat = (libc::O_CREAT | libc::O_WRONLY) as u64;
    let tmpfile = (libc::O_TMPFILE | libc::O_RDWR) as u64;
    assert_eq!(run(p, NATIVE, openat, [0, 0, creat, 0o4755, 0, 0]), EPERM);
    assert_eq!(run(p, NATIVE, openat, [0, 0, tmpfile, 0o2755, 0, 0]), EPERM);
    assert_eq!(run(p, NATIVE, openat, [0, 0, creat, 0o755, 0, 0]), ALLOW);
    // Without O_CREAT/O_TMPFILE the kernel ignores the mode, and so does the filter.
    let read = libc::O_RDONLY as u64;
    assert_eq!(run(p, NATIVE, openat, [0, 0, read, 0o4755, 0, 0]), ALLOW);
    // mkdir is not checked: the kernel drops both bits from its mode.
    let mkdirat = nr(libc::SYS_mkdirat);
    assert_eq!(run(p, NATIVE, mkdirat, [0, 0, 0o2775, 0, 0, 0]), ALLOW);
}

#[test]
fn host_namespaces_confine_pid_calls_and_ipc() {
    let strict = build(&opts(false, false, true)).unwrap();
    let full = build(&FilterOptions::default()).unwrap();
    let (s, f) = (strict.instructions(), full.instructions());
    let me = 4242u64;
    for &call in LAYER2_OWN_PID {
        assert_eq!(run(s, NATIVE, nr(call), [0; 6]), ALLOW, "{call}");
        assert_eq!(run(s, NATIVE, nr(call), [me, 0, 0, 0, 0, 0]), EPERM);
        // pid_t is 32 bits: high bits do not make a pid.
        let high = 0x1_0000_0000u64;
        assert_eq!(run(s, NATIVE, nr(call), [high, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(f, NATIVE, nr(call), [me, 0, 0, 0, 0, 0]), ALLOW);
    }
    let prio = nr(libc::SYS_setpriority);
    assert_eq!(run(s, NATIVE, prio, [0, 0, 5, 0, 0, 0]), ALLOW);
    assert_eq!(run(s, NATIVE, prio, [0, me, 5, 0, 0, 0]), EPERM);
    // PRIO_PGRP and PRIO_USER with 0 mean the caller's group or uid: host processes.
    assert_eq!(run(s, NATIVE, prio, [1, 0, 5, 0, 0, 0]), EPERM);
    assert_eq!(run(s, NATIVE, prio, [2, 0, 5, 0, 0, 0]), EPERM);
    let ioprio = nr(libc::SYS_ioprio_set);
    assert_eq!(run(s, NATIVE, ioprio, [1, 0, 0, 0, 0, 0]), ALLOW);
    assert_eq!(run(s, NATIVE, ioprio, [1, me, 0, 0, 0, 0]), EPERM);
    assert_eq!(run(s, NATIVE, ioprio, [3, 0, 0, 0, 0, 0]), EPERM);
    for &call in LAYER2_IPC {
        assert_eq!(run(s, NATIVE, nr(call), [0; 6]), EPERM, "{call}");
        assert_eq!(run(f, NATIVE, nr(call), [0; 6]), ALLOW, "{call}");
    }
}

/// Both programs interpreted for every number (and the argument-checked calls with
/// denied and allowed arguments): the verdicts differ for exactly ptrace,
/// process_vm_{readv,writev}, kcmp, pidfd_getfd and process_madvise, named here from libc, not from the generator's list.
#[test]
fn allow_ptrace_lifts_exactly_the_ptrace_calls() {
    let lifted = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        libc::SYS_process_madvise,
    ]
    .map(nr);
    let tiocsti = u64::from(libc::TIOCSTI as u32);
    let newuser = u64::from(libc::CLONE_NEWUSER as u32);
    let vsock = u64::from(libc::AF_VSOCK as u32);
    for (deny_network, host_namespaces) in [(false, false), (true, false), (true, true)] {
        let opts = |allow_ptrace| FilterOptions {
            allow_ptrace,
            deny_network,
            inet_stream_only: false,
            host_namespaces,
        };
        let (off, on) = (build(&opts(false)).unwrap(), build(&opts(true)).unwrap());
        let mut differ = Vec::new();
        for n in (0..1024u32).chain([0x4000_0000 | 101, u32::MAX]) {
            for a0 in [0, tiocsti, newuser, vsock] {
                let args = [a0, a0, 0, 0, 0, 0];
                let before = run(off.instructions(), NATIVE, n, args);
                let after = run(on.instructions(), NATIVE, n, args);
                if before != after {
                    assert_eq!((before, after), (EPERM, ALLOW), "syscall {n}");
                    differ.push(n);
                }
            }
        }
        differ.dedup();
        assert_eq!(
            differ, lifted,
            "deny_network {deny_network}: allow_ptrace lifts other calls than the ptrace family named here"
        );
    }
}

#[test]
fn fprog_points_at_the_owned_program() {
    let f = build(&FilterOptions::default()).unwrap();
    let fprog = f.as_fprog();
    assert_eq!(usize::from(fprog.len), f.instructions().len());
    assert_eq!(fprog.filter.cast_const(), f.instructions().as_ptr());
}

/// The point of the binary search: the kernel's install-time emulation proves every
/// number but the argument-checking ones "always allowed" or not in a handful of
/// instructions, and the whole program stays short to convert and JIT.
#[test]
fn the_cache_emulation_is_short_and_only_arguments_defeat_it() {
    for o in all_options() {
        let p = build(&o).unwrap();
        let prog = p.instructions();
        assert!(prog.len() < 200, "{} instructions", prog.len());
        let with_args = arg_checked(&o);
        let mut longest = 0;
        for n in 0..1024u32 {
            match trace(prog, NATIVE, n, [0; 6], true) {
                Some((action, steps)) => {
                    assert!(!with_args.contains(&n), "{n} needs its arguments");
                    assert_eq!(action, expected(&o, n, [0; 6]), "{n}");
                    longest = longest.max(steps);
                }
                None => assert!(with_args.contains(&n), "{n} not decidable from nr"),
            }
        }
        // arch (2), nr, the newer-call compare, ~log2(listed / LEAF) JGEs, up to LEAF
        // JEQs, the return.
        let listed = rules(&o).unwrap().len();
        let depth = usize::try_from((listed / LEAF).max(1).ilog2()).unwrap() + 1;
        assert!(
            longest <= 4 + depth + LEAF + 1,
            "{o:?}: {longest} instructions on the longest path ({listed} listed)"
        );
    }
}
