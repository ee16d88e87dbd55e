//! What the filter names: the system calls it refuses or checks, and the constants its
//! argument checks compare against. Plain data; [`super::rules`] turns it into the listed
//! numbers for one set of options.

/// Calls that fail with `EPERM` unless
/// [`FilterOptions::allow_ptrace`](super::FilterOptions::allow_ptrace) is set: each reads
/// or changes another process's memory, file table or kernel objects, under a ptrace
/// access check.
pub(super) const PTRACE_CALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    libc::SYS_process_madvise,
];

/// `fchmodat2(2)` (Linux 6.6), not in `libc` for every architecture yet; numbers from 424
/// up are the same on every architecture.
pub(super) const SYS_FCHMODAT2: i64 = 452;
/// `open_tree_attr(2)` (Linux 6.15), not in `libc` yet.
pub(super) const SYS_OPEN_TREE_ATTR: i64 = 467;

/// Calls that always fail with `EPERM`, on every architecture.
pub(super) const DENIED: &[i64] = &[
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
    // NUMA memory policy (Docker's default profile and flatpak deny these too): the
    // placement of the program's own pages, which nothing stockade runs needs, and a
    // window on the host's node layout; libnuma and numactl take the refusal as "no NUMA"
    // and run unbound.
    libc::SYS_mbind,
    libc::SYS_set_mempolicy,
    libc::SYS_get_mempolicy,
    libc::SYS_set_mempolicy_home_node,
    // fanotify: open to unprivileged callers since Linux 5.13 (file-handle events), a
    // kernel surface nothing stockade runs needs; Docker's default profile and flatpak
    // deny it. inotify stays allowed.
    libc::SYS_fanotify_init,
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
pub(super) const DENIED_ARCH: &[i64] = &[
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_modify_ldt,
    libc::SYS_uselib,
];
/// Architecture-specific calls that always fail with `EPERM`.
#[cfg(target_arch = "aarch64")]
pub(super) const DENIED_ARCH: &[i64] = &[];

/// SysV IPC and POSIX message queues: `EPERM` with
/// [`FilterOptions::host_namespaces`](super::FilterOptions::host_namespaces), where they
/// would reach the host's IPC namespace.
pub(super) const IPC_CALLS: &[i64] = &[
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
/// limits or scheduling: only pid 0 with
/// [`FilterOptions::host_namespaces`](super::FilterOptions::host_namespaces).
pub(super) const OWN_PID_CALLS: &[i64] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
];

/// Calls taking `(which, who)` whose `who` 0 means the caller only for one `which`: only
/// that pair with
/// [`FilterOptions::host_namespaces`](super::FilterOptions::host_namespaces).
/// (`PRIO_PGRP` or `PRIO_USER` with who 0 would reach the caller's process group or every
/// process of its uid on the host.)
pub(super) const OWN_PROCESS_CALLS: &[(i64, u32)] = &[
    // PRIO_PROCESS (typed differently by glibc and musl in libc).
    (libc::SYS_setpriority, 0),
    // IOPRIO_WHO_PROCESS, not in libc.
    (libc::SYS_ioprio_set, 1),
];

/// Calls with a file mode in argument `.1`: `EPERM` when it has `S_ISUID` or `S_ISGID`.
pub(super) const MODE_CALLS: &[(i64, u32)] = &[
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (SYS_FCHMODAT2, 2),
    (libc::SYS_mknodat, 2),
];
/// Architecture-specific calls with a file mode in argument `.1`.
#[cfg(target_arch = "x86_64")]
pub(super) const MODE_CALLS_ARCH: &[(i64, u32)] = &[
    (libc::SYS_chmod, 1),
    (libc::SYS_creat, 1),
    (libc::SYS_mknod, 1),
];
/// Architecture-specific calls with a file mode in argument `.1`.
#[cfg(target_arch = "aarch64")]
pub(super) const MODE_CALLS_ARCH: &[(i64, u32)] = &[];

/// Calls with open flags in argument `.1` and a mode in `.2`: `EPERM` when the flags create
/// a file and the mode has `S_ISUID` or `S_ISGID`.
pub(super) const CREATE_CALLS: &[(i64, u32, u32)] = &[(libc::SYS_openat, 2, 3)];
/// Architecture-specific calls with open flags and a mode.
#[cfg(target_arch = "x86_64")]
pub(super) const CREATE_CALLS_ARCH: &[(i64, u32, u32)] = &[(libc::SYS_open, 1, 2)];
/// Architecture-specific calls with open flags and a mode.
#[cfg(target_arch = "aarch64")]
pub(super) const CREATE_CALLS_ARCH: &[(i64, u32, u32)] = &[];

/// The mode bits no call may set.
pub(super) const SETID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;
/// The open flags with which the kernel uses the mode: `O_CREAT` and `__O_TMPFILE`
/// (`O_TMPFILE` without its `O_DIRECTORY`).
pub(super) const CREATE_FLAGS: u32 =
    (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;

/// `personality(2)` values that pass: `PER_LINUX`, `PER_LINUX32`, `UNAME26`,
/// `PER_LINUX32 | UNAME26`, and `0xffffffff`, which only reads the persona.
pub(super) const ALLOWED_PERSONAS: &[u32] = &[0x0, 0x8, 0x0002_0000, 0x0002_0008, 0xffff_ffff];

/// The creation flags `socket(2)` and `socketpair(2)` accept in the type argument:
/// `SOCK_CLOEXEC` and `SOCK_NONBLOCK`.
pub(super) const SOCKET_TYPE_FLAGS: u32 = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u32;
/// The protocols of an `AF_INET`/`AF_INET6` `SOCK_STREAM` socket that is TCP: 0 (the
/// default) and `IPPROTO_TCP`. Not `IPPROTO_SCTP` or `IPPROTO_MPTCP` (262), which
/// Landlock's TCP rules do not govern.
pub(super) const TCP_PROTOCOLS: &[u32] = &[0, libc::IPPROTO_TCP as u32];

/// Calls that send with flags in argument `.1`: under
/// [`FilterOptions::inet_stream_only`](super::FilterOptions::inet_stream_only), `EPERM`
/// with [`MSG_FASTOPEN`]. `sendto(2)` with that flag connects a TCP socket itself
/// (`tcp_sendmsg_fastopen`), past the `connect` hook where Landlock checks the port
/// (landlock-lsm/linux#41); `sendmsg(2)` and `sendmmsg(2)` take the same path.
pub(super) const SEND_CALLS: &[(i64, u32)] = &[
    (libc::SYS_sendto, 3),
    (libc::SYS_sendmsg, 2),
    (libc::SYS_sendmmsg, 3),
];
/// `MSG_FASTOPEN`: send with the SYN, connecting an unconnected TCP socket.
pub(super) const MSG_FASTOPEN: u32 = libc::MSG_FASTOPEN as u32;

/// `AUDIT_ARCH_X86_64`: `EM_X86_64` | `__AUDIT_ARCH_64BIT` | `__AUDIT_ARCH_LE`.
#[cfg(target_arch = "x86_64")]
pub(super) const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// `AUDIT_ARCH_AARCH64`: `EM_AARCH64` | `__AUDIT_ARCH_64BIT` | `__AUDIT_ARCH_LE`.
#[cfg(target_arch = "aarch64")]
pub(super) const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;

/// `__X32_SYSCALL_BIT`: x32 system calls are native-arch calls with this bit in the number.
#[cfg(target_arch = "x86_64")]
pub(super) const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
/// No x32 ABI on this architecture.
#[cfg(target_arch = "aarch64")]
pub(super) const X32_SYSCALL_BIT: Option<u32> = None;

/// The number a tracer writes to skip a call: −1 as the kernel's `int`.
pub(super) const SKIPPED_CALL: u32 = u32::MAX;

/// Every `CLONE_NEW*` flag that `clone(2)` accepts. `CLONE_NEWTIME` (0x80) is left out: in
/// `clone(2)` the low byte is the exit signal, and the kernel accepts `CLONE_NEWTIME` only
/// through `clone3` and `unshare`, both denied.
pub(super) const CLONE_NEW_FLAGS: &[libc::c_int] = &[
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
pub(super) const DENIED_IOCTLS: &[libc::Ioctl] = &[libc::TIOCSTI, libc::TIOCLINUX, libc::TIOCSETD];
