//! The seccomp filter: compiled to BPF in the parent, installed by the child last before exec.
//!
//! # What the filter does
//!
//! The default is allow. The calls that let a process reach past the sandbox (debugging
//! other processes, loading code into the kernel, changing mounts or namespaces, the clock,
//! injecting terminal input, io_uring, vsock) fail with `EPERM`. The exceptions:
//!
//! - `clone3` fails with `ENOSYS`. Its flags live in a struct in memory, which a seccomp
//!   filter cannot read, so it cannot be checked for `CLONE_NEW*`; `ENOSYS` makes glibc and
//!   musl fall back to `clone`, whose flags are checked.
//! - A system call of a foreign ABI kills the process (`SECCOMP_RET_KILL_PROCESS`): the
//!   i386 ABI (`int 0x80`, seen by the filter as a different `AUDIT_ARCH`) and, on x86_64,
//!   the x32 ABI (native arch, number with bit 30 set). Both are compat entry points with
//!   their own syscall tables, a classic way around filters that name x86_64 numbers, and
//!   no program stockade runs needs them; seccompiler's architecture check kills, and the x32
//!   check does the same so that both foreign ABIs behave alike. A 32-bit binary therefore
//!   dies with `SIGSYS` at its first system call, which its exit status shows, rather than
//!   running half-working. Docker's default profile makes the same choice of process kill for
//!   foreign architectures it does not list.
//!
//! # Shape of the program, and the per-syscall cache
//!
//! Since Linux 5.11 the kernel emulates a filter once per syscall number and, where the
//! result cannot depend on the arguments, caches "allow" in a bitmap so the filter never runs
//! for that number again. Only `clone`, `ioctl` and `socket` inspect arguments, so every other
//! call stays on that fast path. The program is:
//!
//! 1. seccompiler's architecture check (foreign arch: kill);
//! 2. our prelude: x32 bit set (x86_64 only): kill; `clone3`: `ENOSYS`;
//! 3. seccompiler's rule chains (listed call, or argument match: `EPERM`; else allow).
//!
//! The prelude only reads the syscall number, which the cache emulator understands.
//!
//! # Network (layer 2)
//!
//! With [`FilterOptions::deny_network`] (`network = "none"` without a private network
//! namespace) `socket()` fails with `EPERM` for every family except `AF_UNIX`. That includes
//! `AF_NETLINK`: without a network namespace of its own, a netlink socket reads the host's
//! interfaces, addresses and routes and talks to host services (audit, uevents). glibc copes
//! with the refusal (`getaddrinfo`'s `AI_ADDRCONFIG` probe treats it as "both families
//! present"), and a program denied the network has no use for routing tables. io_uring,
//! which could open sockets without `socket(2)` (`IORING_OP_SOCKET`), is denied anyway.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use crate::error::SeccompBuildError;
use crate::policy::{Network, Policy};

/// What the filter should allow beyond the fixed deny list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilterOptions {
    /// Lift the `ptrace`, `process_vm_readv` and `process_vm_writev` denials so that
    /// `strace` and `gdb` work on the sandbox's own processes. Landlock (any ABI) already
    /// confines ptrace to processes of the same or a nested domain, and in the full layer the
    /// PID namespace hides every other process.
    pub allow_ptrace: bool,
    /// Fail `socket()` with `EPERM` for every family but `AF_UNIX` (`AF_NETLINK` included,
    /// see the module docs). For `network = "none"` without a private network namespace.
    pub deny_network: bool,
}

impl FilterOptions {
    /// The options for `policy`; `private_netns` says whether the child gets its own network
    /// namespace (then the namespace, not seccomp, cuts the network off).
    pub fn for_policy(policy: &Policy, private_netns: bool) -> Self {
        FilterOptions {
            allow_ptrace: policy.allow_ptrace,
            deny_network: policy.network == Network::None && !private_netns,
        }
    }
}

/// A compiled seccomp program, owned by the parent until the child has installed it.
#[derive(Clone, Debug)]
pub struct Filter {
    program: BpfProgram,
    len: u16,
}

impl Filter {
    /// The `sock_fprog` the child passes to
    /// `stockade_sys::linux::seccomp_set_mode_filter(0, &fprog)`.
    ///
    /// The returned value holds a raw pointer into this `Filter`'s instruction buffer. It is
    /// valid for as long as this `Filter` is alive: the buffer is a heap allocation that
    /// moving the `Filter` does not move and that nothing mutates after [`build`]. Keep the
    /// `Filter` alive in the parent until the child has called `seccomp` (with
    /// `CLONE_VFORK`, until `clone` returns). The kernel copies the program during the call,
    /// so the installed filter does not depend on the buffer afterwards.
    ///
    /// Calling this allocates nothing; the child may call it, or the parent may call it
    /// before `clone` and hand the child the value.
    pub fn as_fprog(&self) -> libc::sock_fprog {
        libc::sock_fprog {
            len: self.len,
            // seccompiler's `sock_filter` is `#[repr(C)]` with the kernel's field order and
            // types (u16, u8, u8, u32), the same layout as `libc::sock_filter`. The kernel
            // only reads through this pointer.
            filter: self.program.as_ptr().cast_mut().cast::<libc::sock_filter>(),
        }
    }

    /// The BPF instructions, for inspection and tests.
    pub fn instructions(&self) -> &[sock_filter] {
        &self.program
    }
}

/// Calls that fail with `EPERM` unless [`FilterOptions::allow_ptrace`] is set.
const PTRACE_CALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
];

/// `open_tree_attr(2)` (Linux 6.15), not in `libc` yet; numbers from 424 up are the same on
/// every architecture.
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// Calls that always fail with `EPERM`, on every architecture.
const DENIED: &[i64] = &[
    // Loading code or state into the kernel.
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    // The kernel keyring is not namespaced.
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    // The mount family, old and new API.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    SYS_OPEN_TREE_ATTR,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    // Namespaces (clone is checked by flags below, clone3 in the prelude).
    libc::SYS_unshare,
    libc::SYS_setns,
    // The machine.
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    // The clock is not namespaced (time namespaces cover monotonic/boottime offsets only).
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    // File handles bypass path lookup (and thus mounts and Landlock path rules).
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    // io_uring issues operations without the matching system calls.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// Architecture-specific calls that always fail with `EPERM`.
#[cfg(target_arch = "x86_64")]
const DENIED_ARCH: &[i64] = &[libc::SYS_iopl, libc::SYS_ioperm];
/// Architecture-specific calls that always fail with `EPERM`.
#[cfg(target_arch = "aarch64")]
const DENIED_ARCH: &[i64] = &[];

/// seccompiler's name for the architecture we run on.
#[cfg(target_arch = "x86_64")]
const TARGET_ARCH: TargetArch = TargetArch::x86_64;
/// seccompiler's name for the architecture we run on.
#[cfg(target_arch = "aarch64")]
const TARGET_ARCH: TargetArch = TargetArch::aarch64;

/// `__X32_SYSCALL_BIT`: x32 system calls are native-arch calls with this bit in the number.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
/// No x32 ABI on this architecture.
#[cfg(target_arch = "aarch64")]
const X32_SYSCALL_BIT: Option<u32> = None;

/// Every `CLONE_NEW*` flag that `clone(2)` accepts. `CLONE_NEWTIME` (0x80) is left out: in
/// `clone(2)` the low byte is the exit signal, and the kernel accepts `CLONE_NEWTIME` only
/// through `clone3` and `unshare`, both denied.
const CLONE_NEW_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// Terminal ioctls that inject input (`TIOCSTI`) or reach the virtual console driver
/// (`TIOCLINUX`, which can also paste the selection into the input queue).
const DENIED_IOCTLS: &[libc::Ioctl] = &[libc::TIOCSTI, libc::TIOCLINUX];

/// Compiles the filter for `opts` into BPF.
///
/// Runs in the parent; the child installs the result with
/// [`Filter::as_fprog`] and `stockade_sys::linux::seccomp_set_mode_filter`.
///
/// # Errors
///
/// [`SeccompBuildError::CompileFilter`] when seccompiler rejects the rules (a bug here, not
/// a property of the host), [`SeccompBuildError::TooLong`] when the program exceeds
/// `BPF_MAXINSNS`.
///
/// # Platform
///
/// x86_64 and aarch64. On aarch64 there is no x32 ABI and no `iopl`/`ioperm`; 32-bit arm
/// (`AUDIT_ARCH_ARM`) calls are killed by the architecture check.
pub fn build(opts: &FilterOptions) -> Result<Filter, SeccompBuildError> {
    let compile = |e: seccompiler::BackendError| SeccompBuildError::CompileFilter(Box::new(e));

    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // An empty chain means "this syscall number always takes the match action" (EPERM).
    for &nr in DENIED.iter().chain(DENIED_ARCH) {
        rules.insert(nr, Vec::new());
    }
    if !opts.allow_ptrace {
        for &nr in PTRACE_CALLS {
            rules.insert(nr, Vec::new());
        }
    }

    // clone: EPERM when any CLONE_NEW* bit is set. A chain matches when any of its rules
    // matches, so one rule per bit: (flags & bit) == bit. Only the low 32 bits are compared:
    // the kernel itself truncates clone's flags with lower_32_bits() (kernel/fork.c), so a
    // flag in the high half has no effect there either.
    let clone_rules = CLONE_NEW_FLAGS
        .iter()
        .map(|&flag| {
            let bit = u64::from(flag as u32);
            one_condition(0, SeccompCmpOp::MaskedEq(bit), bit)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(compile)?;
    rules.insert(libc::SYS_clone, clone_rules);

    // ioctl: the command is an `unsigned int` in the kernel's prototype, so a caller can set
    // the upper 32 bits of the register freely; compare only the low 32.
    let ioctl_rules = DENIED_IOCTLS
        .iter()
        .map(|&cmd| one_condition(1, SeccompCmpOp::Eq, u64::from(cmd as u32)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(compile)?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);

    // socket: the family is an `int`; compare the low 32 bits for the same reason.
    let af = |family: libc::c_int| u64::from(family as u32);
    let socket_rule = if opts.deny_network {
        one_condition(0, SeccompCmpOp::Ne, af(libc::AF_UNIX))
    } else {
        one_condition(0, SeccompCmpOp::Eq, af(libc::AF_VSOCK))
    }
    .map_err(compile)?;
    rules.insert(libc::SYS_socket, vec![socket_rule]);

    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TARGET_ARCH,
    )
    .map_err(compile)?;
    let compiled: BpfProgram = filter.try_into().map_err(compile)?;
    let program = splice_prelude(compiled)?;

    let max = usize::try_from(libc::BPF_MAXINSNS).unwrap_or(usize::MAX);
    if program.len() > max {
        return Err(SeccompBuildError::TooLong(program.len()));
    }
    let len =
        u16::try_from(program.len()).map_err(|_| SeccompBuildError::TooLong(program.len()))?;
    Ok(Filter { program, len })
}

/// A rule with a single 32-bit comparison of argument `arg`.
fn one_condition(
    arg: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompRule, seccompiler::BackendError> {
    SeccompRule::new(vec![SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?])
}

/// Length of seccompiler's architecture check at the start of every program: load
/// `seccomp_data.arch`, jump over the next instruction if it is ours, return kill.
const ARCH_CHECK_LEN: usize = 3;

/// `offsetof(struct seccomp_data, nr)`.
const SECCOMP_DATA_NR: u32 = 0;

/// Inserts the number-only prelude (x32 kill, `clone3` ENOSYS) after seccompiler's
/// architecture check.
///
/// seccompiler's jumps are relative and none crosses the insertion point (the architecture
/// check's only jump lands on the instruction right after its kill return, which becomes the
/// first prelude instruction), so the program stays valid. The architecture check is
/// verified rather than assumed, so a change in seccompiler's output fails the build instead
/// of producing a filter that misplaces the prelude.
fn splice_prelude(compiled: BpfProgram) -> Result<BpfProgram, SeccompBuildError> {
    let kill = libc::SECCOMP_RET_KILL_PROCESS;
    let arch_check_ok = compiled.len() > ARCH_CHECK_LEN
        && compiled.get(2) == Some(&stmt(libc::BPF_RET | libc::BPF_K, kill))
        && compiled.get(1).is_some_and(|j| j.jt == 1 && j.jf == 0);
    if !arch_check_ok {
        return Err(SeccompBuildError::CompileFilter(
            "seccompiler's program does not start with the expected architecture check".into(),
        ));
    }

    let mut prelude = vec![stmt(
        libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
        SECCOMP_DATA_NR,
    )];
    if let Some(bit) = X32_SYSCALL_BIT {
        // nr >= bit: fall through to kill; else skip it.
        prelude.push(jump(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, bit, 0, 1));
        prelude.push(stmt(libc::BPF_RET | libc::BPF_K, kill));
    }
    let clone3 = u32::try_from(libc::SYS_clone3).unwrap_or(u32::MAX);
    let enosys = libc::SECCOMP_RET_ERRNO | ((libc::ENOSYS as u32) & libc::SECCOMP_RET_DATA);
    prelude.push(jump(
        libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
        clone3,
        0,
        1,
    ));
    prelude.push(stmt(libc::BPF_RET | libc::BPF_K, enosys));

    let mut program = Vec::with_capacity(compiled.len() + prelude.len());
    let (arch_check, rest) = compiled.split_at(ARCH_CHECK_LEN);
    program.extend_from_slice(arch_check);
    program.extend(prelude);
    program.extend_from_slice(rest);
    Ok(program)
}

/// A BPF statement (`BPF_STMT`). Opcodes fit in 16 bits; libc types them `u32`.
fn stmt(code: u32, k: u32) -> sock_filter {
    jump(code, k, 0, 0)
}

/// A BPF conditional jump (`BPF_JUMP`).
fn jump(code: u32, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter {
        code: u16::try_from(code).unwrap_or(u16::MAX),
        jt,
        jf,
        k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on a `seccomp_data` the way the kernel's interpreter would, for the
    /// subset of classic BPF that seccompiler and the prelude emit.
    fn run(prog: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = Vec::new();
        data.extend_from_slice(&nr.to_ne_bytes());
        data.extend_from_slice(&arch.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for a in args {
            data.extend_from_slice(&a.to_ne_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let ins = &prog[pc];
            let code = u32::from(ins.code);
            match code & 0x07 {
                0x00 => {
                    let off = ins.k as usize;
                    acc = u32::from_ne_bytes(data[off..off + 4].try_into().unwrap());
                }
                0x04 => {
                    assert_eq!(code, libc::BPF_ALU | libc::BPF_AND | libc::BPF_K);
                    acc &= ins.k;
                }
                0x05 => {
                    let op = code & 0xf0;
                    let taken = match op {
                        0x00 => {
                            pc += 1 + ins.k as usize;
                            continue;
                        }
                        0x10 => acc == ins.k,
                        0x20 => acc > ins.k,
                        0x30 => acc >= ins.k,
                        0x40 => acc & ins.k != 0,
                        _ => panic!("unexpected jump {code:#x}"),
                    };
                    pc += 1 + usize::from(if taken { ins.jt } else { ins.jf });
                    continue;
                }
                0x06 => return ins.k,
                _ => panic!("unexpected instruction {code:#x}"),
            }
            pc += 1;
        }
    }

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
        ] {
            assert_eq!(run(p, NATIVE, nr(n), [0; 6]), ALLOW, "syscall {n}");
        }
        assert_eq!(run(p, NATIVE, nr(libc::SYS_clone3), [0; 6]), ENOSYS);
    }

    #[test]
    fn foreign_abis_are_killed() {
        let p = build(&FilterOptions::default()).unwrap();
        let i386 = 3 | 0x4000_0000;
        assert_eq!(run(p.instructions(), i386, 20, [0; 6]), KILL);
        if let Some(bit) = X32_SYSCALL_BIT {
            assert_eq!(run(p.instructions(), NATIVE, bit | 39, [0; 6]), KILL);
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
        let sti = u64::from(libc::TIOCSTI as u32);
        assert_eq!(
            run(p.instructions(), NATIVE, ioctl, [0, sti, 0, 0, 0, 0]),
            EPERM
        );
        let sti_high = sti | 0xdead_beef_0000_0000;
        assert_eq!(
            run(p.instructions(), NATIVE, ioctl, [0, sti_high, 0, 0, 0, 0]),
            EPERM
        );
        let winsz = u64::from(libc::TIOCGWINSZ as u32);
        assert_eq!(
            run(p.instructions(), NATIVE, ioctl, [0, winsz, 0, 0, 0, 0]),
            ALLOW
        );

        let socket = nr(libc::SYS_socket);
        let fam = |f: libc::c_int| [u64::from(f as u32), 0, 0, 0, 0, 0];
        assert_eq!(
            run(p.instructions(), NATIVE, socket, fam(libc::AF_VSOCK)),
            EPERM
        );
        assert_eq!(
            run(p.instructions(), NATIVE, socket, fam(libc::AF_INET)),
            ALLOW
        );
        let denied = build(&FilterOptions {
            deny_network: true,
            ..Default::default()
        })
        .unwrap();
        for f in [
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
            libc::AF_PACKET,
            libc::AF_VSOCK,
        ] {
            assert_eq!(
                run(denied.instructions(), NATIVE, socket, fam(f)),
                EPERM,
                "family {f}"
            );
        }
        assert_eq!(
            run(denied.instructions(), NATIVE, socket, fam(libc::AF_UNIX)),
            ALLOW
        );
    }

    #[test]
    fn allow_ptrace_lifts_exactly_the_ptrace_calls() {
        let p = build(&FilterOptions {
            allow_ptrace: true,
            ..Default::default()
        })
        .unwrap();
        for &n in PTRACE_CALLS {
            assert_eq!(run(p.instructions(), NATIVE, nr(n), [0; 6]), ALLOW);
        }
        assert_eq!(
            run(p.instructions(), NATIVE, nr(libc::SYS_mount), [0; 6]),
            EPERM
        );
    }

    #[test]
    fn fprog_points_at_the_owned_program() {
        let f = build(&FilterOptions::default()).unwrap();
        let fprog = f.as_fprog();
        assert_eq!(usize::from(fprog.len), f.instructions().len());
        assert_eq!(
            fprog.filter.cast_const().cast::<sock_filter>(),
            f.instructions().as_ptr()
        );
        assert_eq!(size_of::<sock_filter>(), size_of::<libc::sock_filter>());
        assert_eq!(align_of::<sock_filter>(), align_of::<libc::sock_filter>());
    }

    #[test]
    fn for_policy_denies_sockets_only_without_a_private_netns() {
        let mut p = Policy {
            network: Network::None,
            ..Policy::default()
        };
        assert!(FilterOptions::for_policy(&p, false).deny_network);
        assert!(!FilterOptions::for_policy(&p, true).deny_network);
        p.network = Network::Full;
        p.allow_ptrace = true;
        let o = FilterOptions::for_policy(&p, false);
        assert!(o.allow_ptrace && !o.deny_network);
    }
}
