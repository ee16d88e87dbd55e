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
//!   for every family but `AF_UNIX`; with [`FilterOptions::inet_stream_only`], for every
//!   family but `AF_UNIX`, `AF_INET` and `AF_INET6`, and for those two for every type but
//!   `SOCK_STREAM` (the type with `SOCK_CLOEXEC` and `SOCK_NONBLOCK` masked off, any other
//!   bit refused) and every protocol but 0 and `IPPROTO_TCP`. `deny_network` wins when
//!   both are set.
//! - With [`FilterOptions::inet_stream_only`] (and not `deny_network`): `sendto`,
//!   `sendmsg` and `sendmmsg` with `MSG_FASTOPEN` in their flags.
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
//! - With [`FilterOptions::host_namespaces`] (layer 2, and a session's sandbox on either
//!   layer): `prlimit64`, `sched_setaffinity`,
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
//!
//! With [`FilterOptions::inet_stream_only`] (`network = "allow"` without a private network
//! namespace) the program's way out is TCP to the egress proxy's ports on the host's
//! loopback, which Landlock enforces (ABI ≥ 4: connect to those ports, no bind). Landlock
//! governs TCP alone, so every other socket that could reach past it fails here: UDP (DNS
//! to any server included; the proxy resolves names), raw and packet sockets, netlink
//! (the host's routes, as above), SCTP and MPTCP on a stream socket (`IPPROTO_MPTCP` is not
//! TCP to Landlock). `AF_UNIX` stays: Landlock does not govern pathname sockets (see
//! SECURITY.md) and scopes abstract ones (ABI ≥ 6). TCP Fast Open's `sendto(…,
//! MSG_FASTOPEN, addr)` connects the socket inside the send, where Landlock's `connect`
//! hook never runs (landlock-lsm/linux#41, open): the send calls fail with `EPERM` when
//! their flags carry `MSG_FASTOPEN`. `TCP_FASTOPEN_CONNECT` stays, since its `connect` is
//! checked. A program that asks for Fast Open with the flag gets `EPERM` from its send.
//!
//! # The code
//!
//! `tables` names the calls and constants above; `rules` lists, for one [`FilterOptions`],
//! each number and where it leads; `codegen` lays the program out in the six steps with
//! `asm`, a small forward-only BPF assembler. The unit tests run every program through
//! `interp`, a classic-BPF interpreter that also mimics the kernel's cache emulation; the
//! host of an explained run ([`build_explained`]) answers with it, and `describe` names
//! what was denied.

mod asm;
mod codegen;
mod describe;
#[cfg(test)]
mod explain_tests;
mod interp;
mod paths;
mod rules;
mod tables;
#[cfg(test)]
mod tests;

use libc::sock_filter;

use crate::error::SeccompBuildError;

pub use crate::plan::FilterOptions;

/// A compiled seccomp program, owned by the parent until the child has installed it.
#[derive(Clone, Debug)]
pub struct Filter {
    /// At most `BPF_MAXINSNS` instructions ([`build`] refuses more).
    program: Vec<sock_filter>,
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
    /// Calling this allocates nothing. (The sandbox's child installs
    /// [`Filter::instructions`] through `stockade_sys`; this form is for the crate's tests
    /// and for hosts of the `internals` feature that install it themselves.)
    #[cfg(any(test, feature = "internals"))]
    pub fn as_fprog(&self) -> libc::sock_fprog {
        libc::sock_fprog {
            // `build` refused programs longer than BPF_MAXINSNS (4096).
            len: u16::try_from(self.program.len()).unwrap_or(u16::MAX),
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

/// Compiles the filter for `opts` into BPF.
///
/// Runs in the parent; the child installs the result's [`Filter::instructions`] with
/// `stockade_sys::linux::seccomp_set_mode_filter`.
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
    let listed = rules::rules(opts)?;
    checked(codegen::program(&listed, opts, false)?)
}

/// A program within `BPF_MAXINSNS`.
fn checked(program: Vec<sock_filter>) -> Result<Filter, SeccompBuildError> {
    let max = usize::try_from(libc::BPF_MAXINSNS).unwrap_or(usize::MAX);
    if program.len() > max {
        return Err(SeccompBuildError::TooLong(program.len()));
    }
    Ok(Filter { program })
}

/// The two programs of an explained run ([`build_explained`]).
#[derive(Clone, Debug)]
pub struct Explained {
    /// The program the child installs, with a listener: every denial notifies.
    pub notify: Filter,
    /// The program stockade installs without explain ([`build`]), which the host runs on
    /// each notification ([`Explained::answer`]) to answer as it would have.
    pub errno: Filter,
}

/// What the host answers a notification of an explained run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Fail the call with this errno: a denial, answered as the filter without explain
    /// would have.
    Deny(i32),
    /// Let the call run (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): a watched call
    /// (`connect` in a network namespace of its own), which the filter allows.
    Continue,
}

impl Explained {
    /// The answer to a notification with `data`: the errno of [`Explained::errno`]'s
    /// verdict, or `Continue` where that program allows the call. Any other verdict (the
    /// notify program only notifies where the errno program fails the call or, for the
    /// watched calls, allows it, so none is expected) fails the call with `EPERM`.
    pub fn answer(&self, data: &libc::seccomp_data) -> Answer {
        match interp::run(&self.errno.program, data) {
            Some(libc::SECCOMP_RET_ALLOW) => Answer::Continue,
            Some(action) if action & libc::SECCOMP_RET_ACTION_FULL == libc::SECCOMP_RET_ERRNO => {
                Answer::Deny((action & libc::SECCOMP_RET_DATA) as i32)
            }
            _ => Answer::Deny(libc::EPERM),
        }
    }
}

pub use describe::{NETWORK_NONE, describe};
pub use paths::{PathCall, Use, path_call};

/// Compiles the filter for `opts` in its explained form: the program a command with
/// explain on installs with a listener, where every call the filter denies notifies the
/// host instead (`SECCOMP_RET_USER_NOTIF`), and the host answers with the errno the
/// filter would have returned ([`Explained::answer`]), so the program sees the same.
///
/// The `ENOSYS` of `clone3` and `openat2` stays in the program: it is libc's cue to fall
/// back to `clone` and `openat`, no denial, and glibc calls `clone3` for every thread.
/// Foreign ABIs are still killed. With `watch_connect` (`network = "none"` in a network
/// namespace of its own, where the namespace rather than the filter refuses), `connect`
/// and `sendto` with a destination notify too, and the host lets them continue after
/// reading the address. (`sendmsg` is not watched: its address is in memory, so every
/// call would notify.) With `watch_paths`, every path-taking call of [`path_call`]
/// (`openat`, `execve`, the stat family, `mkdirat`, `unlinkat`, `renameat`, …) notifies,
/// whatever its arguments: the host reads its paths, and answers with the errno program's
/// verdict (a set-id `chmod` still fails with `EPERM`) or lets it continue.
///
/// # Errors
///
/// As for [`build`].
pub fn build_explained(
    opts: &FilterOptions,
    watch_connect: bool,
    watch_paths: bool,
) -> Result<Explained, SeccompBuildError> {
    explained(opts, watch_connect, false, watch_paths)
}

/// [`build_explained`] for a run whose host makes its connects (layer 2's
/// `network = "allow"`): `connect` and `sendto` with a destination notify as with
/// `watch_connect`, and `listen` too (a TCP socket that was never bound binds itself to a
/// port in `listen`, where Landlock has no check), with or without `watch_paths`.
///
/// # Errors
///
/// As for [`build`].
pub fn build_supervised(
    opts: &FilterOptions,
    watch_paths: bool,
) -> Result<Explained, SeccompBuildError> {
    explained(opts, true, true, watch_paths)
}

fn explained(
    opts: &FilterOptions,
    watch_connect: bool,
    watch_listen: bool,
    watch_paths: bool,
) -> Result<Explained, SeccompBuildError> {
    let mut listed = rules::rules(opts)?;
    if watch_paths {
        for c in paths::PATH_CALLS.iter().chain(paths::PATH_CALLS_ARCH) {
            let nr = u32::try_from(c.nr)
                .map_err(|_| SeccompBuildError::CompileFilter("syscall number".into()))?;
            // Replaces an argument block (the set-id mode checks): the host runs the
            // errno program on the call and answers with its verdict. The calls with
            // `AT_EMPTY_PATH` have no block there (the errno program allows them).
            let action = match c.empty_path_flags {
                Some(f) => rules::Action::Block(rules::Block::UnlessEmptyPath(u32::from(f))),
                None => rules::Action::Watch,
            };
            listed.insert(nr, action);
        }
    }
    if watch_connect {
        let nr = |n: i64| {
            u32::try_from(n).map_err(|_| SeccompBuildError::CompileFilter("syscall number".into()))
        };
        listed
            .entry(nr(libc::SYS_connect)?)
            .or_insert(rules::Action::Watch);
        // `sendto` with a destination (argument 4 not NULL): UDP without `connect`.
        listed
            .entry(nr(libc::SYS_sendto)?)
            .or_insert(rules::Action::Block(rules::Block::Addressed(4)));
    }
    if watch_listen {
        let nr = u32::try_from(libc::SYS_listen)
            .map_err(|_| SeccompBuildError::CompileFilter("syscall number".into()))?;
        listed.entry(nr).or_insert(rules::Action::Watch);
    }
    Ok(Explained {
        notify: checked(codegen::program(&listed, opts, true)?)?,
        errno: build(opts)?,
    })
}
