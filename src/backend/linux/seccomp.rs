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
//! Since Linux 5.11 the kernel emulates a filter once per syscall number when it is
//! installed (`seccomp_cache_prepare`, for every number of every ABI the architecture has,
//! with the sighand lock held) and, where the result cannot depend on the arguments, caches
//! "allow" in a bitmap so the filter never runs for that number again. Only `clone`, `ioctl`
//! and `socket` inspect arguments, so every other call stays on that fast path.
//!
//! That emulation, and the kernel's conversion and JIT of the program, happen in every
//! sandboxed child, so the program is generated here by hand to be short on every path:
//!
//! 1. architecture check: load `arch`; not ours: kill;
//! 2. load `nr`; x32 bit set (x86_64 only): kill;
//! 3. a balanced binary search (`JGE`) over the sorted listed numbers, ending in runs of at
//!    most `LEAF` (3) `JEQ`s whose last miss jumps to "allow";
//! 4. one block per argument-checking call (`clone`, `ioctl`, `socket`);
//! 5. the shared returns: allow, `EPERM`, `ENOSYS` (`clone3`), kill.
//!
//! A linear chain (one compare per listed call, as rule compilers such as seccompiler emit)
//! makes every unlisted number, i.e. nearly all of them, walk past every listed one, both in
//! the cache emulation at install time and for the unlisted calls the cache cannot hold on a
//! compat ABI. The search visits about log2(n / 3) + 3 compares for any number. Every
//! jump is forward and loads only `nr` or `arch` outside the argument blocks, which is what
//! the kernel's emulator (`seccomp_is_const_allow`) needs to prove a number always allowed.
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

use libc::sock_filter;

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
    program: Vec<sock_filter>,
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
            // The kernel only reads through this pointer.
            filter: self.program.as_ptr().cast_mut(),
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

/// `AUDIT_ARCH_X86_64`: `EM_X86_64` | `__AUDIT_ARCH_64BIT` | `__AUDIT_ARCH_LE`.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// `AUDIT_ARCH_AARCH64`: `EM_AARCH64` | `__AUDIT_ARCH_64BIT` | `__AUDIT_ARCH_LE`.
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;

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

/// Longest run of `JEQ`s at a leaf of the binary search. A leaf of one compare per number
/// would need a `JGE` per number as well; three keeps the program near 1.4 instructions per
/// listed number while adding at most two compares to any path.
const LEAF: usize = 3;

/// `offsetof(struct seccomp_data, nr)`.
const SECCOMP_DATA_NR: u32 = 0;
/// `offsetof(struct seccomp_data, arch)`.
const SECCOMP_DATA_ARCH: u32 = 4;

/// Offset of the low 32 bits of argument `arg` in `struct seccomp_data` (`args` is a `u64`
/// array at offset 16, in the machine's byte order).
const fn arg_low(arg: u32) -> u32 {
    16 + 8 * arg + if cfg!(target_endian = "big") { 4 } else { 0 }
}

/// Where a listed syscall number leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Eperm,
    Enosys,
    /// One of the argument blocks (`clone`, `ioctl`, `socket`).
    Block(Block),
}

/// The argument-checking blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    Clone,
    Ioctl,
    Socket,
}

/// Compiles the filter for `opts` into BPF.
///
/// Runs in the parent; the child installs the result with
/// [`Filter::as_fprog`] and `stockade_sys::linux::seccomp_set_mode_filter`.
///
/// # Errors
///
/// [`SeccompBuildError::CompileFilter`] when the generator cannot encode the program (a
/// syscall number or jump out of range: a bug here, not a property of the host),
/// [`SeccompBuildError::TooLong`] when the program exceeds `BPF_MAXINSNS`.
///
/// # Platform
///
/// x86_64 and aarch64. On aarch64 there is no x32 ABI and no `iopl`/`ioperm`; 32-bit arm
/// (`AUDIT_ARCH_ARM`) calls are killed by the architecture check.
pub fn build(opts: &FilterOptions) -> Result<Filter, SeccompBuildError> {
    let number = |n: i64| {
        u32::try_from(n).map_err(|_| SeccompBuildError::CompileFilter("syscall number".into()))
    };
    let mut listed: BTreeMap<u32, Action> = BTreeMap::new();
    for &nr in DENIED.iter().chain(DENIED_ARCH) {
        listed.insert(number(nr)?, Action::Eperm);
    }
    if !opts.allow_ptrace {
        for &nr in PTRACE_CALLS {
            listed.insert(number(nr)?, Action::Eperm);
        }
    }
    // clone3's flags are in memory the filter cannot read: ENOSYS, so libc falls back to clone.
    listed.insert(number(libc::SYS_clone3)?, Action::Enosys);
    listed.insert(number(libc::SYS_clone)?, Action::Block(Block::Clone));
    listed.insert(number(libc::SYS_ioctl)?, Action::Block(Block::Ioctl));
    listed.insert(number(libc::SYS_socket)?, Action::Block(Block::Socket));

    let mut asm = Asm::default();
    let allow = asm.label();
    let eperm = asm.label();
    let enosys = asm.label();
    let kill = asm.label();
    let clone = asm.label();
    let ioctl = asm.label();
    let socket = asm.label();
    let target = |a: Action| match a {
        Action::Eperm => eperm,
        Action::Enosys => enosys,
        Action::Block(Block::Clone) => clone,
        Action::Block(Block::Ioctl) => ioctl,
        Action::Block(Block::Socket) => socket,
    };

    // 1. Architecture: a foreign ABI (i386, 32-bit arm) is killed.
    asm.stmt(BPF_LD_ABS, SECCOMP_DATA_ARCH);
    asm.jump(BPF_JEQ, AUDIT_ARCH, Next, kill);
    // 2. The number; x32 calls (native arch, bit 30 set) are killed like i386 ones.
    asm.stmt(BPF_LD_ABS, SECCOMP_DATA_NR);
    if let Some(bit) = X32_SYSCALL_BIT {
        asm.jump(BPF_JGE, bit, kill, Next);
    }
    // 3. Binary search over the listed numbers; a miss is allowed.
    let keys: Vec<(u32, Target)> = listed.iter().map(|(&n, &a)| (n, target(a))).collect();
    search(&mut asm, &keys, allow);

    // 4. clone: EPERM when any CLONE_NEW* bit is set in the low 32 bits of the flags. The
    // kernel itself truncates clone's flags with lower_32_bits() (kernel/fork.c), so a flag
    // in the high half has no effect there either.
    asm.bind(clone);
    let new_flags = CLONE_NEW_FLAGS.iter().fold(0u32, |m, &f| m | f as u32);
    asm.stmt(BPF_LD_ABS, arg_low(0));
    asm.jump(BPF_JSET, new_flags, eperm, allow);

    // ioctl: the command is an `unsigned int` in the kernel's prototype, so a caller can set
    // the upper 32 bits of the register freely; compare only the low 32.
    asm.bind(ioctl);
    asm.stmt(BPF_LD_ABS, arg_low(1));
    for (i, &cmd) in DENIED_IOCTLS.iter().enumerate() {
        let miss = if i + 1 == DENIED_IOCTLS.len() {
            allow
        } else {
            Next
        };
        asm.jump(BPF_JEQ, cmd as u32, eperm, miss);
    }

    // socket: the family is an `int`; compare the low 32 bits for the same reason.
    asm.bind(socket);
    asm.stmt(BPF_LD_ABS, arg_low(0));
    if opts.deny_network {
        asm.jump(BPF_JEQ, libc::AF_UNIX as u32, allow, eperm);
    } else {
        asm.jump(BPF_JEQ, libc::AF_VSOCK as u32, eperm, allow);
    }

    // 5. The returns, shared by every path.
    asm.bind(allow);
    asm.stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW);
    asm.bind(eperm);
    asm.stmt(BPF_RET_K, errno(libc::EPERM));
    asm.bind(enosys);
    asm.stmt(BPF_RET_K, errno(libc::ENOSYS));
    asm.bind(kill);
    asm.stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS);

    let program = asm.finish()?;
    let max = usize::try_from(libc::BPF_MAXINSNS).unwrap_or(usize::MAX);
    if program.len() > max {
        return Err(SeccompBuildError::TooLong(program.len()));
    }
    let len =
        u16::try_from(program.len()).map_err(|_| SeccompBuildError::TooLong(program.len()))?;
    Ok(Filter { program, len })
}

/// Emits the binary search over `keys` (sorted, distinct): at most [`LEAF`] keys become a
/// `JEQ` run whose last miss jumps to `allow`; more are split at the middle key by a `JGE`
/// whose true branch jumps over the lower half. Every number below the first key or between
/// two keys ends in a leaf's last miss, so each listed number is compared for equality
/// exactly once and everything else is allowed.
fn search(asm: &mut Asm, keys: &[(u32, Target)], allow: Target) {
    if keys.len() <= LEAF {
        for (i, &(nr, hit)) in keys.iter().enumerate() {
            let miss = if i + 1 == keys.len() { allow } else { Next };
            asm.jump(BPF_JEQ, nr, hit, miss);
        }
        return;
    }
    let mid = keys.len() / 2;
    let upper = asm.label();
    asm.jump(BPF_JGE, keys[mid].0, upper, Next);
    search(asm, &keys[..mid], allow);
    asm.bind(upper);
    search(asm, &keys[mid..], allow);
}

/// `SECCOMP_RET_ERRNO` with `errno`.
fn errno(errno: libc::c_int) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

const BPF_LD_ABS: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const BPF_RET_K: u32 = libc::BPF_RET | libc::BPF_K;
const BPF_JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const BPF_JGE: u32 = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
const BPF_JSET: u32 = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;

/// A jump destination: the next instruction, or a label bound later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Next,
    Label(usize),
}
use Target::Next;

/// A tiny forward-only assembler: jumps name labels, resolved to the 8-bit relative offsets
/// of classic BPF by [`Asm::finish`].
#[derive(Default)]
struct Asm {
    code: Vec<sock_filter>,
    /// Instruction index of each label, once bound.
    labels: Vec<Option<usize>>,
    /// (instruction index, true target, false target) of every conditional jump.
    jumps: Vec<(usize, Target, Target)>,
}

impl Asm {
    fn label(&mut self) -> Target {
        self.labels.push(None);
        Target::Label(self.labels.len() - 1)
    }

    fn bind(&mut self, label: Target) {
        if let Target::Label(l) = label {
            self.labels[l] = Some(self.code.len());
        }
    }

    fn stmt(&mut self, code: u32, k: u32) {
        self.code.push(insn(code, k));
    }

    fn jump(&mut self, code: u32, k: u32, jt: Target, jf: Target) {
        self.jumps.push((self.code.len(), jt, jf));
        self.code.push(insn(code, k));
    }

    fn finish(mut self) -> Result<Vec<sock_filter>, SeccompBuildError> {
        let bad = || SeccompBuildError::CompileFilter("unencodable BPF jump".into());
        for &(at, jt, jf) in &self.jumps {
            let offset = |t: Target| -> Result<u8, SeccompBuildError> {
                let dest = match t {
                    Next => at + 1,
                    Target::Label(l) => self.labels[l].ok_or_else(bad)?,
                };
                let rel = dest.checked_sub(at + 1).ok_or_else(bad)?;
                u8::try_from(rel).map_err(|_| bad())
            };
            let (t, f) = (offset(jt)?, offset(jf)?);
            self.code[at].jt = t;
            self.code[at].jf = f;
        }
        Ok(self.code)
    }
}

/// A BPF instruction with no jump offsets. Opcodes fit in 16 bits; libc types them `u32`.
fn insn(code: u32, k: u32) -> sock_filter {
    sock_filter {
        code: u16::try_from(code).unwrap_or(u16::MAX),
        jt: 0,
        jf: 0,
        k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on a `seccomp_data` the way the kernel's interpreter would, for the
    /// subset of classic BPF that the generator emits.
    fn run(prog: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        trace(prog, arch, nr, args, false).unwrap().0
    }

    /// Runs the program like [`run`], returning the action and the number of instructions
    /// executed; with `const_only`, gives up (None) on a load of anything but `nr` or `arch`,
    /// as the kernel's cache emulator `seccomp_is_const_allow` does.
    fn trace(
        prog: &[sock_filter],
        arch: u32,
        nr: u32,
        args: [u64; 6],
        const_only: bool,
    ) -> Option<(u32, usize)> {
        let mut data = Vec::new();
        data.extend_from_slice(&nr.to_ne_bytes());
        data.extend_from_slice(&arch.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for a in args {
            data.extend_from_slice(&a.to_ne_bytes());
        }
        let (mut acc, mut pc, mut steps) = (0u32, 0usize, 0usize);
        loop {
            let ins = &prog[pc];
            steps += 1;
            let code = u32::from(ins.code);
            match code & 0x07 {
                0x00 => {
                    assert_eq!(code, BPF_LD_ABS);
                    let off = ins.k as usize;
                    if const_only && off != 0 && off != 4 {
                        return None;
                    }
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
                    assert_eq!(code & 0x08, libc::BPF_K);
                    pc += 1 + usize::from(if taken { ins.jt } else { ins.jf });
                    continue;
                }
                0x06 => return Some((ins.k, steps)),
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
        assert_eq!(fprog.filter.cast_const(), f.instructions().as_ptr());
    }

    /// Every option combination.
    fn all_options() -> [FilterOptions; 4] {
        [false, true]
            .map(|allow_ptrace| {
                [false, true].map(|deny_network| FilterOptions {
                    allow_ptrace,
                    deny_network,
                })
            })
            .concat()
            .try_into()
            .unwrap()
    }

    /// What the filter must answer for `nr` with all-zero arguments (flags 0, family
    /// `AF_UNSPEC`, ioctl command 0), from the lists rather than from the generator.
    fn expected(opts: &FilterOptions, n: u32) -> u32 {
        let listed = |l: &[i64]| l.iter().any(|&x| nr(x) == n);
        if X32_SYSCALL_BIT.is_some_and(|bit| n >= bit) {
            KILL
        } else if n == nr(libc::SYS_clone3) {
            ENOSYS
        } else if listed(DENIED)
            || listed(DENIED_ARCH)
            || (!opts.allow_ptrace && listed(PTRACE_CALLS))
            || (n == nr(libc::SYS_socket) && opts.deny_network)
        {
            EPERM
        } else {
            ALLOW
        }
    }

    #[test]
    fn every_number_gets_the_listed_action() {
        let probes = (0..1024u32).chain([
            0x3fff_ffff,
            0x4000_0000,
            0x4000_0000 | 39,
            0x7fff_ffff,
            0x8000_0000,
            u32::MAX,
        ]);
        for opts in all_options() {
            let p = build(&opts).unwrap();
            for n in probes.clone() {
                assert_eq!(
                    run(p.instructions(), NATIVE, n, [0; 6]),
                    expected(&opts, n),
                    "{opts:?} syscall {n:#x}"
                );
                assert_eq!(
                    run(p.instructions(), 3 | 0x4000_0000, n, [0; 6]),
                    KILL,
                    "i386 {n}"
                );
            }
        }
    }

    /// The point of the binary search: the kernel's install-time emulation proves every
    /// number but the three argument-checking ones "always allowed" or not in a handful of
    /// instructions, and the whole program stays short to convert and JIT.
    #[test]
    fn the_cache_emulation_is_short_and_only_arguments_defeat_it() {
        for opts in all_options() {
            let p = build(&opts).unwrap();
            let prog = p.instructions();
            assert!(prog.len() < 100, "{} instructions", prog.len());
            let with_args = [libc::SYS_clone, libc::SYS_ioctl, libc::SYS_socket].map(nr);
            let mut longest = 0;
            for n in 0..1024u32 {
                match trace(prog, NATIVE, n, [0; 6], true) {
                    Some((action, steps)) => {
                        assert!(!with_args.contains(&n), "{n} needs its arguments");
                        assert_eq!(action, expected(&opts, n), "{n}");
                        longest = longest.max(steps);
                    }
                    None => assert!(with_args.contains(&n), "{n} not decidable from nr"),
                }
            }
            // arch, nr, x32, ~log2(n / LEAF) JGEs, up to LEAF JEQs, the return.
            assert!(
                longest <= 12,
                "{opts:?}: {longest} instructions on the longest path"
            );
        }
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
