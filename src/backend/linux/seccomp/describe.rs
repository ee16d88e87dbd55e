//! Names a denied call for a report: the system call, the arguments that decided it
//! (clone and unshare flags, the ioctl request, the socket's family and type, the ptrace
//! request, the persona, the mode), and the policy change that would allow it.

use super::FilterOptions;
use super::KNOWN_MAX;
use super::tables::{
    IPC_CALLS, OWN_PID_CALLS, OWN_PROCESS_CALLS, PTRACE_CALLS, SEND_CALLS, SYS_FCHMODAT2,
    SYS_OPEN_TREE_ATTR,
};

/// A denied call as a report shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    /// The call and its deciding arguments: `ptrace(PTRACE_ATTACH)`,
    /// `socket(AF_INET6, SOCK_RAW)`, `clone(CLONE_NEWUSER)`, `ioctl(TIOCSTI)`.
    pub operation: String,
    /// The policy change that would allow it, or why none does.
    pub hint: String,
    /// The denial is the network policy's (`socket` with `network = "none"` or
    /// `"allow"`), not one of the filter's fixed rules.
    pub network: bool,
}

/// The hint of calls that no policy allows.
pub const BY_DESIGN: &str = "never allowed (by design)";
/// The hint of a network denial under `network = "none"`.
pub const NETWORK_NONE: &str = "network = \"none\": use \"allow\" with allow_domains";

/// Describes the call of `data`, which the filter for `opts` denied.
pub fn describe(data: &libc::seccomp_data, opts: &FilterOptions) -> Described {
    let nr = data.nr as u32;
    let a = data.args;
    let low = |i: usize| a.get(i).map_or(0, |&v| v as u32);
    let name = name(nr);
    let is = |n: i64| i64::from(nr) == n;
    let mut network = false;
    let operation = if is(libc::SYS_clone) {
        format!("clone({})", flags(low(0) & new_flags_mask()))
    } else if is(libc::SYS_unshare) {
        format!("unshare({})", flags(low(0)))
    } else if is(libc::SYS_setns) {
        format!("setns({})", flags(low(1)))
    } else if is(libc::SYS_ioctl) {
        format!("ioctl({})", ioctl(low(1)))
    } else if is(libc::SYS_socket) || is(libc::SYS_socketpair) {
        format!(
            "{}({}, {})",
            name.unwrap_or("socket"),
            family(low(0)),
            sock_type(low(1))
        )
    } else if is(libc::SYS_ptrace) {
        format!("ptrace({})", ptrace_request(low(0)))
    } else if let Some(&(_, f)) = SEND_CALLS.iter().find(|&&(n, _)| is(n)) {
        let fast = if low(f as usize) & libc::MSG_FASTOPEN as u32 != 0 {
            "MSG_FASTOPEN"
        } else {
            "flags"
        };
        format!("{}({fast})", name.unwrap_or("send"))
    } else if is(libc::SYS_personality) {
        format!("personality({:#x})", low(0))
    } else if let Some(n) = name {
        match mode_arg(nr) {
            Some(i) => format!("{n}(mode 0{:o})", low(i) & 0o7777),
            None => n.to_owned(),
        }
    } else {
        format!("syscall {nr}")
    };
    let hint = if PTRACE_CALLS.iter().any(|&n| is(n)) {
        "allow_ptrace = true".to_owned()
    } else if (is(libc::SYS_socket) || is(libc::SYS_socketpair)) && low(0) != libc::AF_VSOCK as u32
    {
        network = true;
        if opts.deny_network {
            NETWORK_NONE.to_owned()
        } else {
            "network = \"allow\": TCP to the egress proxy only (by design)".to_owned()
        }
    } else if SEND_CALLS.iter().any(|&(n, _)| is(n)) {
        network = true;
        "TCP Fast Open (network = \"allow\" on layer 2): never allowed (by design)".to_owned()
    } else if opts.host_namespaces && IPC_CALLS.iter().any(|&n| is(n)) {
        "the host's IPC namespace (layer 2): never allowed (by design)".to_owned()
    } else if opts.host_namespaces
        && (OWN_PID_CALLS.iter().any(|&n| is(n)) || OWN_PROCESS_CALLS.iter().any(|&(n, _)| is(n)))
    {
        "another process (layer 2 shares the host's PID namespace): only pid 0, the caller"
            .to_owned()
    } else if mode_arg(nr).is_some() {
        "set-user-ID and set-group-ID bits: never allowed (by design)".to_owned()
    } else if nr > KNOWN_MAX {
        format!("newer than the calls the filter knows (up to {KNOWN_MAX}): fails as without it")
    } else {
        BY_DESIGN.to_owned()
    };
    Described {
        operation,
        hint,
        network,
    }
}

/// The argument that holds the mode of a call whose set-id bits are checked.
fn mode_arg(nr: u32) -> Option<usize> {
    let n = i64::from(nr);
    let m = super::tables::MODE_CALLS
        .iter()
        .chain(super::tables::MODE_CALLS_ARCH)
        .find(|&&(c, _)| c == n)
        .map(|&(_, m)| m);
    let c = super::tables::CREATE_CALLS
        .iter()
        .chain(super::tables::CREATE_CALLS_ARCH)
        .find(|&&(c, _, _)| c == n)
        .map(|&(_, _, m)| m);
    m.or(c).map(|m| m as usize)
}

fn new_flags_mask() -> u32 {
    super::tables::CLONE_NEW_FLAGS
        .iter()
        .fold(0u32, |m, &f| m | f as u32)
}

/// The `CLONE_NEW*` flags set in `v`, joined with `|` (the rest as hex).
fn flags(v: u32) -> String {
    const NAMES: &[(libc::c_int, &str)] = &[
        (libc::CLONE_NEWUSER, "CLONE_NEWUSER"),
        (libc::CLONE_NEWNS, "CLONE_NEWNS"),
        (libc::CLONE_NEWPID, "CLONE_NEWPID"),
        (libc::CLONE_NEWNET, "CLONE_NEWNET"),
        (libc::CLONE_NEWIPC, "CLONE_NEWIPC"),
        (libc::CLONE_NEWUTS, "CLONE_NEWUTS"),
        (libc::CLONE_NEWCGROUP, "CLONE_NEWCGROUP"),
        (libc::CLONE_NEWTIME, "CLONE_NEWTIME"),
    ];
    let mut parts: Vec<String> = Vec::new();
    let mut rest = v;
    for &(f, n) in NAMES {
        if v & f as u32 != 0 {
            parts.push(n.to_owned());
            rest &= !(f as u32);
        }
    }
    if rest != 0 || parts.is_empty() {
        parts.push(format!("{rest:#x}"));
    }
    parts.join("|")
}

fn ioctl(req: u32) -> String {
    let named = [
        (libc::TIOCSTI, "TIOCSTI"),
        (libc::TIOCLINUX, "TIOCLINUX"),
        (libc::TIOCSETD, "TIOCSETD"),
    ];
    named
        .iter()
        .find(|&&(r, _)| r as u32 == req)
        .map_or_else(|| format!("{req:#x}"), |&(_, n)| n.to_owned())
}

fn family(f: u32) -> String {
    let named: &[(libc::c_int, &str)] = &[
        (libc::AF_UNIX, "AF_UNIX"),
        (libc::AF_INET, "AF_INET"),
        (libc::AF_INET6, "AF_INET6"),
        (libc::AF_NETLINK, "AF_NETLINK"),
        (libc::AF_PACKET, "AF_PACKET"),
        (libc::AF_VSOCK, "AF_VSOCK"),
        (libc::AF_BLUETOOTH, "AF_BLUETOOTH"),
        (libc::AF_ALG, "AF_ALG"),
        (libc::AF_XDP, "AF_XDP"),
    ];
    named
        .iter()
        .find(|&&(v, _)| v as u32 == f)
        .map_or_else(|| format!("family {f}"), |&(_, n)| n.to_owned())
}

fn sock_type(t: u32) -> String {
    let named: &[(libc::c_int, &str)] = &[
        (libc::SOCK_STREAM, "SOCK_STREAM"),
        (libc::SOCK_DGRAM, "SOCK_DGRAM"),
        (libc::SOCK_RAW, "SOCK_RAW"),
        (libc::SOCK_SEQPACKET, "SOCK_SEQPACKET"),
        (libc::SOCK_RDM, "SOCK_RDM"),
    ];
    let base = t & 0xf;
    named
        .iter()
        .find(|&&(v, _)| v as u32 == base)
        .map_or_else(|| format!("type {base}"), |&(_, n)| n.to_owned())
}

// The requests are `c_uint` in glibc's libc bindings and `c_int` in musl's.
#[allow(clippy::unnecessary_cast)]
fn ptrace_request(r: u32) -> String {
    let named: &[(u32, &str)] = &[
        (libc::PTRACE_TRACEME as u32, "PTRACE_TRACEME"),
        (libc::PTRACE_PEEKTEXT as u32, "PTRACE_PEEKTEXT"),
        (libc::PTRACE_PEEKDATA as u32, "PTRACE_PEEKDATA"),
        (libc::PTRACE_POKETEXT as u32, "PTRACE_POKETEXT"),
        (libc::PTRACE_POKEDATA as u32, "PTRACE_POKEDATA"),
        (libc::PTRACE_CONT as u32, "PTRACE_CONT"),
        (libc::PTRACE_KILL as u32, "PTRACE_KILL"),
        (libc::PTRACE_ATTACH as u32, "PTRACE_ATTACH"),
        (libc::PTRACE_DETACH as u32, "PTRACE_DETACH"),
        (libc::PTRACE_SYSCALL as u32, "PTRACE_SYSCALL"),
        (libc::PTRACE_SETOPTIONS as u32, "PTRACE_SETOPTIONS"),
        (libc::PTRACE_SEIZE as u32, "PTRACE_SEIZE"),
        (libc::PTRACE_INTERRUPT as u32, "PTRACE_INTERRUPT"),
    ];
    named
        .iter()
        .find(|&&(v, _)| v == r)
        .map_or_else(|| format!("request {r}"), |&(_, n)| n.to_owned())
}

/// The name of every call the filter lists or watches, by number.
pub(super) fn name(nr: u32) -> Option<&'static str> {
    macro_rules! names {
        ($($call:ident),* $(,)?) => {
            &[$((libc::$call, stringify!($call))),*]
        };
    }
    const COMMON: &[(i64, &str)] = names![
        SYS_ptrace,
        SYS_process_vm_readv,
        SYS_process_vm_writev,
        SYS_kcmp,
        SYS_pidfd_getfd,
        SYS_process_madvise,
        SYS_kexec_load,
        SYS_kexec_file_load,
        SYS_init_module,
        SYS_finit_module,
        SYS_delete_module,
        SYS_bpf,
        SYS_perf_event_open,
        SYS_userfaultfd,
        SYS_syslog,
        SYS_keyctl,
        SYS_add_key,
        SYS_request_key,
        SYS_mount,
        SYS_umount2,
        SYS_pivot_root,
        SYS_move_mount,
        SYS_open_tree,
        SYS_fsopen,
        SYS_fsmount,
        SYS_fsconfig,
        SYS_fspick,
        SYS_mount_setattr,
        SYS_unshare,
        SYS_setns,
        SYS_reboot,
        SYS_swapon,
        SYS_swapoff,
        SYS_acct,
        SYS_quotactl,
        SYS_quotactl_fd,
        SYS_move_pages,
        SYS_migrate_pages,
        SYS_mbind,
        SYS_set_mempolicy,
        SYS_get_mempolicy,
        SYS_set_mempolicy_home_node,
        SYS_fanotify_init,
        SYS_settimeofday,
        SYS_clock_settime,
        SYS_clock_adjtime,
        SYS_adjtimex,
        SYS_open_by_handle_at,
        SYS_name_to_handle_at,
        SYS_io_uring_setup,
        SYS_io_uring_enter,
        SYS_io_uring_register,
        SYS_msgget,
        SYS_msgsnd,
        SYS_msgrcv,
        SYS_msgctl,
        SYS_semget,
        SYS_semop,
        SYS_semtimedop,
        SYS_semctl,
        SYS_shmget,
        SYS_shmat,
        SYS_shmdt,
        SYS_shmctl,
        SYS_mq_open,
        SYS_mq_unlink,
        SYS_mq_timedsend,
        SYS_mq_timedreceive,
        SYS_mq_notify,
        SYS_mq_getsetattr,
        SYS_prlimit64,
        SYS_sched_setaffinity,
        SYS_sched_setscheduler,
        SYS_sched_setparam,
        SYS_sched_setattr,
        SYS_setpriority,
        SYS_ioprio_set,
        SYS_fchmod,
        SYS_fchmodat,
        SYS_mknodat,
        SYS_openat,
        SYS_clone,
        SYS_clone3,
        SYS_openat2,
        SYS_ioctl,
        SYS_socket,
        SYS_socketpair,
        SYS_personality,
        SYS_connect,
        SYS_sendto,
        SYS_sendmsg,
        SYS_sendmmsg,
    ];
    #[cfg(target_arch = "x86_64")]
    const ARCH: &[(i64, &str)] = names![
        SYS_iopl,
        SYS_ioperm,
        SYS_modify_ldt,
        SYS_uselib,
        SYS_chmod,
        SYS_creat,
        SYS_mknod,
        SYS_open,
    ];
    #[cfg(target_arch = "aarch64")]
    const ARCH: &[(i64, &str)] = &[];
    const OWN: &[(i64, &str)] = &[
        (SYS_FCHMODAT2, "fchmodat2"),
        (SYS_OPEN_TREE_ATTR, "open_tree_attr"),
    ];
    COMMON
        .iter()
        .chain(ARCH)
        .chain(OWN)
        .find(|&&(n, _)| n == i64::from(nr))
        .map(|&(_, s)| s.strip_prefix("SYS_").unwrap_or(s))
}

#[cfg(test)]
mod tests {
    use super::super::interp::data;
    use super::super::tables::AUDIT_ARCH;
    use super::*;

    fn op(nr: i64, args: [u64; 6], opts: &FilterOptions) -> Described {
        describe(&data(AUDIT_ARCH, nr as u32, args), opts)
    }

    #[test]
    fn every_listed_call_has_a_name() {
        for bits in 0..16u8 {
            let o = FilterOptions {
                allow_ptrace: bits & 1 != 0,
                deny_network: bits & 2 != 0,
                inet_stream_only: bits & 4 != 0,
                host_namespaces: bits & 8 != 0,
            };
            for nr in super::super::rules::rules(&o).unwrap().keys() {
                assert!(name(*nr).is_some(), "syscall {nr} has no name");
            }
        }
    }

    #[test]
    fn the_deciding_arguments_are_named() {
        let o = FilterOptions::default();
        let attach = libc::PTRACE_ATTACH as u64;
        let d = op(libc::SYS_ptrace, [attach, 1, 0, 0, 0, 0], &o);
        assert_eq!(d.operation, "ptrace(PTRACE_ATTACH)");
        assert_eq!(d.hint, "allow_ptrace = true");
        let user = libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64;
        assert_eq!(
            op(libc::SYS_clone, [user, 0, 0, 0, 0, 0], &o).operation,
            "clone(CLONE_NEWUSER)"
        );
        let d = op(
            libc::SYS_unshare,
            [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0],
            &o,
        );
        assert_eq!(
            (d.operation.as_str(), d.hint.as_str()),
            ("unshare(CLONE_NEWUSER)", BY_DESIGN)
        );
        let sti = u64::from(libc::TIOCSTI as u32);
        assert_eq!(
            op(libc::SYS_ioctl, [0, sti, 0, 0, 0, 0], &o).operation,
            "ioctl(TIOCSTI)"
        );
        let raw = [
            libc::AF_INET6 as u64,
            libc::SOCK_RAW as u64 | 0x80000,
            0,
            0,
            0,
            0,
        ];
        let none = FilterOptions {
            deny_network: true,
            ..o
        };
        let d = op(libc::SYS_socket, raw, &none);
        assert_eq!(d.operation, "socket(AF_INET6, SOCK_RAW)");
        assert_eq!(d.hint, NETWORK_NONE);
        assert!(d.network);
        assert_eq!(op(libc::SYS_bpf, [0; 6], &o).hint, BY_DESIGN);
        assert_eq!(op(999, [0; 6], &o).operation, "syscall 999");
        let fast = [3, 0, 0, libc::MSG_FASTOPEN as u64, 0, 0];
        let d = op(libc::SYS_sendto, fast, &o);
        assert_eq!(
            (d.operation.as_str(), d.network),
            ("sendto(MSG_FASTOPEN)", true)
        );
        let d = op(libc::SYS_fchmodat, [0, 0, 0o4755, 0, 0, 0], &o);
        assert_eq!(d.operation, "fchmodat(mode 04755)");
    }
}
