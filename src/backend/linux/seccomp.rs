//! The seccomp filter: compiled to BPF in the parent, installed by the child last before exec.
//!
//! # What the filter does
//!
//! The default is allow. The calls that let a process reach past the sandbox (debugging
//! other processes, loading code into the kernel, changing mounts or namespaces, the clock,
//! the kernel log, NUMA placement of other processes' pages, injecting terminal input or
//! changing a terminal's line discipline, io_uring, vsock, unusual personas, setuid and
//! setgid bits) fail with `EPERM`. SECURITY.md lists every rule. The exceptions to `EPERM`:
//!
//! - `clone3` fails with `ENOSYS`. Its flags live in a struct in memory, which a seccomp
//!   filter cannot read, so it cannot be checked for `CLONE_NEW*`; `ENOSYS` makes glibc and
//!   musl fall back to `clone`, whose flags are checked.
//! - `openat2` fails with `ENOSYS` for the same reason: its mode (which could carry
//!   `S_ISUID`) lives in a `struct open_how`. glibc never calls it for `open`; the programs
//!   that do (systemd's path resolution, libpathrs, cap-std) fall back to `openat` on
//!   `ENOSYS`, as they must on kernels before 5.6. Docker's default profile allows it (and
//!   checks no modes at all); flatpak does not mention it.
//! - System calls newer than [`KNOWN_MAX`] fail with `ENOSYS`, the kernel's own answer for
//!   a call it does not have, so that a kernel upgrade cannot open a door this list never
//!   heard of. runc does the same for calls newer than those its profile names.
//! - Syscall number −1 (`0xffffffff`) is allowed. It is no call: a tracer writes it to skip
//!   the call it stopped at (strace's `inject=…:error=…`, gdb), and the kernel then returns
//!   whatever the tracer left in the return register, `ENOSYS` by default. An `ENOSYS` from
//!   the filter would overwrite a value the tracer set at the entry stop. libseccomp makes
//!   the same exception in its x32 check.
//! - A system call of a foreign ABI kills the process (`SECCOMP_RET_KILL_PROCESS`): the
//!   i386 ABI (`int 0x80`, seen by the filter as a different `AUDIT_ARCH`) and, on x86_64,
//!   the x32 ABI (native arch, number with bit 30 set; every number from `0x40000000` up
//!   but −1). Both are compat entry points with their own syscall tables, a classic way
//!   around filters that name x86_64 numbers, and no program stockade runs needs them. A
//!   32-bit binary therefore dies with `SIGSYS` at its first system call, which its exit
//!   status shows, rather than running half-working. Docker's default profile makes the same
//!   choice of process kill for foreign architectures it does not list.
//!
//! # Argument checks
//!
//! A filter sees the six argument registers, never memory. Every check compares the low 32
//! bits of a register: each checked argument is an `int`, `unsigned int`, `pid_t` or
//! `umode_t` in the kernel's prototype, which the kernel truncates the same way, so the
//! upper half cannot smuggle a different value past the filter.
//!
//! - `clone`: `EPERM` when any `CLONE_NEW*` flag is set.
//! - `ioctl`: `EPERM` for `TIOCSTI`, `TIOCLINUX` and `TIOCSETD`.
//! - `socket`, `socketpair`: `EPERM` for `AF_VSOCK`; with [`FilterOptions::deny_network`],
//!   for every family but `AF_UNIX`.
//! - `personality`: only `PER_LINUX` (0), `PER_LINUX32` (8), `UNAME26` (0x20000), their
//!   union (0x20008) and the query `0xffffffff` pass, as in Docker's default profile; the
//!   rest (`ADDR_NO_RANDOMIZE`, `READ_IMPLIES_EXEC`, …) fail with `EPERM`.
//! - Setuid and setgid bits: `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `creat`, `mknod`,
//!   `mknodat` with `S_ISUID` or `S_ISGID` in the mode, and `open`/`openat` with those bits
//!   when `O_CREAT` or `O_TMPFILE` is set (without them the kernel ignores the mode), fail
//!   with `EPERM`. `mkdir` and `mkdirat` are not checked: the kernel drops both bits from
//!   their mode (`vfs_mkdir` keeps only the permission bits and `S_ISVTX`), and refusing
//!   them would fail `cp -a` of a tree with a setgid directory at the `mkdirat` rather than
//!   at the `chmod` that follows it.
//! - With [`FilterOptions::host_namespaces`] (layer 2): `prlimit64`, `sched_setaffinity`,
//!   `sched_setscheduler`, `sched_setparam` and `sched_setattr` only with pid 0 (the
//!   caller), `setpriority` only with `PRIO_PROCESS` and who 0, `ioprio_set` only with
//!   `IOPRIO_WHO_PROCESS` and who 0. A static filter cannot know the program's own pids, so
//!   a thread that names itself by its tid (`pthread_setaffinity_np`,
//!   `pthread_setschedparam`) gets `EPERM` too.
//!
//! # Shape of the program, and the per-syscall cache
//!
//! Since Linux 5.11 the kernel emulates a filter once per syscall number when it is
//! installed (`seccomp_cache_prepare`, for every number of every ABI the architecture has,
//! with the sighand lock held) and, where the result cannot depend on the arguments, caches
//! "allow" in a bitmap so the filter never runs for that number again. Only the calls with
//! argument checks above run the program on every call; every other call stays on that fast
//! path.
//!
//! That emulation, and the kernel's conversion and JIT of the program, happen in every
//! sandboxed child, so the program is generated here by hand to be short on every path:
//!
//! 1. architecture check: load `arch`; not ours: kill;
//! 2. load `nr`; above [`KNOWN_MAX`]: to step 5;
//! 3. a balanced binary search (`JGE`) over the sorted listed numbers, ending in runs of at
//!    most `LEAF` (3) `JEQ`s whose last miss jumps to "allow";
//! 4. one block per kind of argument check, shared by the calls that need it;
//! 5. numbers above [`KNOWN_MAX`]: −1 is allowed, x32 numbers (x86_64) are killed, the
//!    rest fail with `ENOSYS`;
//! 6. the shared returns: `ENOSYS`, allow, `EPERM`, kill.
//!
//! A linear chain (one compare per listed call, as rule compilers such as seccompiler emit)
//! makes every unlisted number, i.e. nearly all of them, walk past every listed one, both in
//! the cache emulation at install time and for the unlisted calls the cache cannot hold on a
//! compat ABI. The search visits about log2(n / 3) + 3 compares for any number. Every
//! jump is forward and loads only `nr` or `arch` outside the argument blocks, which is what
//! the kernel's emulator (`seccomp_is_const_allow`) needs to prove a number always allowed.
//!
//! # Layer 2
//!
//! Without namespaces the program shares the host's PID and IPC namespaces and, unless a
//! network namespace is made, its network. [`FilterOptions::host_namespaces`] then refuses
//! SysV IPC (`msgget`, `semget`, `shmget` and their operations) and POSIX message queues
//! (`mq_*`), which would reach the host's objects, and limits the calls above that act on a
//! process by pid to the caller itself. Signals, ptrace and the ptrace family are scoped by
//! Landlock (ABI ≥ 6 for signals) on that layer.
//!
//! With [`FilterOptions::deny_network`] (`network = "none"` without a private network
//! namespace) `socket()` and `socketpair()` fail with `EPERM` for every family except
//! `AF_UNIX`. That includes `AF_NETLINK`: without a network namespace of its own, a netlink
//! socket reads the host's interfaces, addresses and routes and talks to host services
//! (audit, uevents). glibc copes with the refusal (`getaddrinfo`'s `AI_ADDRCONFIG` probe
//! treats it as "both families present"), and a program denied the network has no use for
//! routing tables. io_uring, which could open sockets without `socket(2)`
//! (`IORING_OP_SOCKET`), is denied anyway.

use std::collections::BTreeMap;

use libc::sock_filter;

use crate::error::SeccompBuildError;

pub use crate::plan::FilterOptions;

/// A compiled seccomp program, owned by the parent until the child has installed it.
#[derive(Clone, Debug)]
pub struct Filter {
    program: Vec<sock_filter>,
    // Read by `as_fprog` only (the child installs `instructions()` through `stockade_sys`).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
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
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
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

/// The highest system call number this filter was reviewed against: `file_setattr` (469,
/// Linux 6.17; 6.18 added none). Numbers from 424 up are the same on every architecture, so
/// one value serves x86_64 and aarch64. Every number above it fails with `ENOSYS` (but −1,
/// and on x86_64 the x32 range, which is killed). Raising it means reading the new calls
/// and listing those that reach past the sandbox.
pub const KNOWN_MAX: u32 = 469;

/// Calls that fail with `EPERM` unless [`FilterOptions::allow_ptrace`] is set: each reads or
/// changes another process's memory, file table or kernel objects, under a ptrace access
/// check.
const PTRACE_CALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    libc::SYS_process_madvise,
];

/// `fchmodat2(2)` (Linux 6.6), not in `libc` for every architecture yet; numbers from 424
/// up are the same on every architecture.
const SYS_FCHMODAT2: i64 = 452;
/// `open_tree_attr(2)` (Linux 6.15), not in `libc` yet.
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
    // The kernel log (with kernel.dmesg_restrict=0 it reads and clears the host's).
    libc::SYS_syslog,
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
    // Namespaces (clone is checked by flags below, clone3 fails with ENOSYS).
    libc::SYS_unshare,
    libc::SYS_setns,
    // The machine.
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    // Moving another process's pages between NUMA nodes (and, with pid 0, a way to probe
    // physical placement that nothing stockade runs needs).
    libc::SYS_move_pages,
    libc::SYS_migrate_pages,
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

/// Architecture-specific calls that always fail with `EPERM`: port I/O, the local
/// descriptor table (16-bit segments, a long line of kernel bugs), and the a.out library
/// loader (gone from the kernel since 6.13, denied for older ones).
#[cfg(target_arch = "x86_64")]
const DENIED_ARCH: &[i64] = &[
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_modify_ldt,
    libc::SYS_uselib,
];
/// Architecture-specific calls that always fail with `EPERM`.
#[cfg(target_arch = "aarch64")]
const DENIED_ARCH: &[i64] = &[];

/// SysV IPC and POSIX message queues: `EPERM` with [`FilterOptions::host_namespaces`],
/// where they would reach the host's IPC namespace.
const IPC_CALLS: &[i64] = &[
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

/// Calls whose first argument is a pid (0: the caller) and that change that process's
/// limits or scheduling: only pid 0 with [`FilterOptions::host_namespaces`].
const OWN_PID_CALLS: &[i64] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
];

/// Calls taking `(which, who)` whose `who` 0 means the caller only for one `which`: only
/// that pair with [`FilterOptions::host_namespaces`]. (`PRIO_PGRP` or `PRIO_USER` with who
/// 0 would reach the caller's process group or every process of its uid on the host.)
const OWN_PROCESS_CALLS: &[(i64, u32)] = &[
    // PRIO_PROCESS (typed differently by glibc and musl in libc).
    (libc::SYS_setpriority, 0),
    // IOPRIO_WHO_PROCESS, not in libc.
    (libc::SYS_ioprio_set, 1),
];

/// Calls with a file mode in argument `.1`: `EPERM` when it has `S_ISUID` or `S_ISGID`.
const MODE_CALLS: &[(i64, u32)] = &[
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (SYS_FCHMODAT2, 2),
    (libc::SYS_mknodat, 2),
];
/// Architecture-specific calls with a file mode in argument `.1`.
#[cfg(target_arch = "x86_64")]
const MODE_CALLS_ARCH: &[(i64, u32)] = &[
    (libc::SYS_chmod, 1),
    (libc::SYS_creat, 1),
    (libc::SYS_mknod, 1),
];
/// Architecture-specific calls with a file mode in argument `.1`.
#[cfg(target_arch = "aarch64")]
const MODE_CALLS_ARCH: &[(i64, u32)] = &[];

/// Calls with open flags in argument `.1` and a mode in `.2`: `EPERM` when the flags create
/// a file and the mode has `S_ISUID` or `S_ISGID`.
const CREATE_CALLS: &[(i64, u32, u32)] = &[(libc::SYS_openat, 2, 3)];
/// Architecture-specific calls with open flags and a mode.
#[cfg(target_arch = "x86_64")]
const CREATE_CALLS_ARCH: &[(i64, u32, u32)] = &[(libc::SYS_open, 1, 2)];
/// Architecture-specific calls with open flags and a mode.
#[cfg(target_arch = "aarch64")]
const CREATE_CALLS_ARCH: &[(i64, u32, u32)] = &[];

/// The mode bits no call may set.
const SETID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;
/// The open flags with which the kernel uses the mode: `O_CREAT` and `__O_TMPFILE`
/// (`O_TMPFILE` without its `O_DIRECTORY`).
const CREATE_FLAGS: u32 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;

/// `personality(2)` values that pass: `PER_LINUX`, `PER_LINUX32`, `UNAME26`,
/// `PER_LINUX32 | UNAME26`, and `0xffffffff`, which only reads the persona.
const ALLOWED_PERSONAS: &[u32] = &[0x0, 0x8, 0x0002_0000, 0x0002_0008, 0xffff_ffff];

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

/// The number a tracer writes to skip a call: −1 as the kernel's `int`.
const SKIPPED_CALL: u32 = u32::MAX;

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

/// Terminal ioctls that inject input (`TIOCSTI`), reach the virtual console driver
/// (`TIOCLINUX`, which can also paste the selection into the input queue) or switch the line
/// discipline (`TIOCSETD`: the caller's terminal goes dead, and rarely used disciplines have
/// a history of kernel bugs).
const DENIED_IOCTLS: &[libc::Ioctl] = &[libc::TIOCSTI, libc::TIOCLINUX, libc::TIOCSETD];

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
    /// One of the argument blocks.
    Block(Block),
}

/// The argument-checking blocks, each emitted once and shared by the calls that need it.
/// The order of the variants is the order of emission: a `Create` block jumps forward into
/// the `Mode` block of its mode argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Block {
    /// `clone`: any `CLONE_NEW*` flag in argument 0.
    Clone,
    /// `ioctl`: a [`DENIED_IOCTLS`] command in argument 1.
    Ioctl,
    /// `socket`, `socketpair`: the family in argument 0.
    Socket,
    /// `personality`: argument 0 not in [`ALLOWED_PERSONAS`].
    Personality,
    /// Creating flags in argument `flags`, then the mode in argument `mode`.
    Create { flags: u32, mode: u32 },
    /// [`SETID_BITS`] in the mode in this argument.
    Mode(u32),
    /// Argument 0 (a pid) other than 0.
    OwnPid,
    /// Argument 0 other than this `which`, or argument 1 (`who`) other than 0.
    OwnProcess(u32),
}

/// Every listed number and where it leads, for `opts`.
fn rules(opts: &FilterOptions) -> Result<BTreeMap<u32, Action>, SeccompBuildError> {
    let mut listed: BTreeMap<u32, Action> = BTreeMap::new();
    let mut list = |nr: i64, action: Action| {
        let n = u32::try_from(nr)
            .ok()
            .filter(|&n| n <= KNOWN_MAX)
            .ok_or_else(|| SeccompBuildError::CompileFilter("syscall number".into()))?;
        match listed.insert(n, action) {
            None => Ok(()),
            Some(_) => Err(SeccompBuildError::CompileFilter(
                format!("syscall {n} listed twice").into(),
            )),
        }
    };
    for &nr in DENIED.iter().chain(DENIED_ARCH) {
        list(nr, Action::Eperm)?;
    }
    if !opts.allow_ptrace {
        for &nr in PTRACE_CALLS {
            list(nr, Action::Eperm)?;
        }
    }
    // Arguments in memory the filter cannot read: ENOSYS, so libc or the program falls back
    // to the checked calls (clone, openat).
    list(libc::SYS_clone3, Action::Enosys)?;
    list(libc::SYS_openat2, Action::Enosys)?;
    list(libc::SYS_clone, Action::Block(Block::Clone))?;
    list(libc::SYS_ioctl, Action::Block(Block::Ioctl))?;
    list(libc::SYS_socket, Action::Block(Block::Socket))?;
    list(libc::SYS_socketpair, Action::Block(Block::Socket))?;
    list(libc::SYS_personality, Action::Block(Block::Personality))?;
    for &(nr, mode) in MODE_CALLS.iter().chain(MODE_CALLS_ARCH) {
        list(nr, Action::Block(Block::Mode(mode)))?;
    }
    for &(nr, flags, mode) in CREATE_CALLS.iter().chain(CREATE_CALLS_ARCH) {
        list(nr, Action::Block(Block::Create { flags, mode }))?;
    }
    if opts.host_namespaces {
        for &nr in IPC_CALLS {
            list(nr, Action::Eperm)?;
        }
        for &nr in OWN_PID_CALLS {
            list(nr, Action::Block(Block::OwnPid))?;
        }
        for &(nr, which) in OWN_PROCESS_CALLS {
            list(nr, Action::Block(Block::OwnProcess(which)))?;
        }
    }
    Ok(listed)
}

/// Compiles the filter for `opts` into BPF.
///
/// Runs in the parent; the child installs the result with
/// [`Filter::as_fprog`] and `stockade_sys::linux::seccomp_set_mode_filter`.
///
/// # Errors
///
/// [`SeccompBuildError::CompileFilter`] when the generator cannot encode the program (a
/// syscall number listed twice or out of range, a jump out of range: a bug here, not a
/// property of the host), [`SeccompBuildError::TooLong`] when the program exceeds
/// `BPF_MAXINSNS`.
///
/// # Platform
///
/// x86_64 and aarch64. On aarch64 there is no x32 ABI, no `iopl`/`ioperm`/`modify_ldt`/
/// `uselib`, and no `open`/`creat`/`chmod`/`mknod` (only their `*at` forms); 32-bit arm
/// (`AUDIT_ARCH_ARM`) calls are killed by the architecture check.
pub fn build(opts: &FilterOptions) -> Result<Filter, SeccompBuildError> {
    let listed = rules(opts)?;

    let mut asm = Asm::default();
    let allow = asm.label();
    let eperm = asm.label();
    let enosys = asm.label();
    let kill = asm.label();
    let unknown = asm.label();
    // One label per argument block in use; a Create block needs its Mode block too.
    let mut blocks: BTreeMap<Block, Target> = BTreeMap::new();
    for action in listed.values() {
        if let Action::Block(b) = *action {
            blocks.entry(b).or_insert_with(|| asm.label());
            if let Block::Create { mode, .. } = b {
                blocks
                    .entry(Block::Mode(mode))
                    .or_insert_with(|| asm.label());
            }
        }
    }
    let block = |b: Block| {
        blocks
            .get(&b)
            .copied()
            .ok_or_else(|| SeccompBuildError::CompileFilter(format!("no block {b:?}").into()))
    };
    let keys = listed
        .iter()
        .map(|(&n, &a)| {
            let t = match a {
                Action::Eperm => eperm,
                Action::Enosys => enosys,
                Action::Block(b) => block(b)?,
            };
            Ok((n, t))
        })
        .collect::<Result<Vec<(u32, Target)>, SeccompBuildError>>()?;

    // 1. Architecture: a foreign ABI (i386, 32-bit arm) is killed.
    asm.stmt(BPF_LD_ABS, SECCOMP_DATA_ARCH);
    asm.jump(BPF_JEQ, AUDIT_ARCH, Next, kill);
    // 2. The number; anything above the known calls (−1 and x32 included) is sorted out at
    // the end, so an ordinary call pays one compare for all three rules.
    asm.stmt(BPF_LD_ABS, SECCOMP_DATA_NR);
    asm.jump(BPF_JGT, KNOWN_MAX, unknown, Next);
    // 3. Binary search over the listed numbers; a miss is allowed.
    search(&mut asm, &keys, allow);

    // 4. The argument blocks, in the order of `Block`.
    for (&b, &label) in &blocks {
        asm.bind(label);
        match b {
            // EPERM when any CLONE_NEW* bit is set in the low 32 bits of the flags. The
            // kernel itself truncates clone's flags with lower_32_bits() (kernel/fork.c), so
            // a flag in the high half has no effect there either.
            Block::Clone => {
                let new_flags = CLONE_NEW_FLAGS.iter().fold(0u32, |m, &f| m | f as u32);
                asm.stmt(BPF_LD_ABS, arg_low(0));
                asm.jump(BPF_JSET, new_flags, eperm, allow);
            }
            // The command is an `unsigned int` in the kernel's prototype, so a caller can
            // set the upper 32 bits of the register freely; compare only the low 32.
            Block::Ioctl => {
                asm.stmt(BPF_LD_ABS, arg_low(1));
                one_of(
                    &mut asm,
                    DENIED_IOCTLS.iter().map(|&c| c as u32),
                    eperm,
                    allow,
                );
            }
            // The family is an `int`; the low 32 bits for the same reason.
            Block::Socket => {
                asm.stmt(BPF_LD_ABS, arg_low(0));
                if opts.deny_network {
                    asm.jump(BPF_JEQ, libc::AF_UNIX as u32, allow, eperm);
                } else {
                    asm.jump(BPF_JEQ, libc::AF_VSOCK as u32, eperm, allow);
                }
            }
            // `unsigned int personality`.
            Block::Personality => {
                asm.stmt(BPF_LD_ABS, arg_low(0));
                one_of(&mut asm, ALLOWED_PERSONAS.iter().copied(), allow, eperm);
            }
            // Open flags are an `int`. Without O_CREAT or O_TMPFILE the kernel ignores the
            // mode (build_open_how), so only then is it checked.
            Block::Create { flags, mode } => {
                asm.stmt(BPF_LD_ABS, arg_low(flags));
                asm.jump(BPF_JSET, CREATE_FLAGS, block(Block::Mode(mode))?, allow);
            }
            // `umode_t` is 16 bits; both set-id bits lie in the low word.
            Block::Mode(arg) => {
                asm.stmt(BPF_LD_ABS, arg_low(arg));
                asm.jump(BPF_JSET, SETID_BITS, eperm, allow);
            }
            // `pid_t` is an `int`: the kernel sees the low 32 bits only.
            Block::OwnPid => {
                asm.stmt(BPF_LD_ABS, arg_low(0));
                asm.jump(BPF_JEQ, 0, allow, eperm);
            }
            // `int which`, `int who` (setpriority's `id_t` is 32 bits too).
            Block::OwnProcess(which) => {
                asm.stmt(BPF_LD_ABS, arg_low(0));
                asm.jump(BPF_JEQ, which, Next, eperm);
                asm.stmt(BPF_LD_ABS, arg_low(1));
                asm.jump(BPF_JEQ, 0, allow, eperm);
            }
        }
    }

    // 5. Above the known calls (the accumulator still holds `nr`): −1 is a call skipped by
    // a tracer and passes; x32 calls (native arch, bit 30 set) are killed like i386 ones;
    // anything else is a call newer than this list and fails as the kernel would fail a
    // call it does not have.
    asm.bind(unknown);
    asm.jump(BPF_JEQ, SKIPPED_CALL, allow, Next);
    if let Some(bit) = X32_SYSCALL_BIT {
        asm.jump(BPF_JGE, bit, kill, Next);
    }

    // 6. The returns, shared by every path.
    asm.bind(enosys);
    asm.stmt(BPF_RET_K, errno(libc::ENOSYS));
    asm.bind(allow);
    asm.stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW);
    asm.bind(eperm);
    asm.stmt(BPF_RET_K, errno(libc::EPERM));
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

/// Emits a chain of `JEQ`s against `values` (the accumulator loaded): any match jumps to
/// `hit`, the last miss to `miss`.
fn one_of(asm: &mut Asm, values: impl ExactSizeIterator<Item = u32>, hit: Target, miss: Target) {
    let n = values.len();
    for (i, v) in values.enumerate() {
        let next = if i + 1 == n { miss } else { Next };
        asm.jump(BPF_JEQ, v, hit, next);
    }
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
const BPF_JGT: u32 = libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K;
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

    fn opts(allow_ptrace: bool, deny_network: bool, host_namespaces: bool) -> FilterOptions {
        FilterOptions {
            allow_ptrace,
            deny_network,
            host_namespaces,
        }
    }

    /// Every option combination.
    fn all_options() -> Vec<FilterOptions> {
        let mut v = Vec::new();
        for a in [false, true] {
            for d in [false, true] {
                for h in [false, true] {
                    v.push(opts(a, d, h));
                }
            }
        }
        v
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
            let fam = lo(0);
            return deny(if o.deny_network {
                fam != libc::AF_UNIX as u32
            } else {
                fam == libc::AF_VSOCK as u32
            });
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
        let low: [u64; 14] = [
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
            for n in probes.clone() {
                assert_eq!(run(prog, 3 | 0x4000_0000, n, [0; 6]), KILL, "i386 {n}");
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
                        for &c in &[0, 0o100, 0o20200000, 0o4000, 0o2000, 0o755, 1] {
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
}
