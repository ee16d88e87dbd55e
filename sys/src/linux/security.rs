//! What restricts the process: `prctl` flags, capabilities, Landlock and seccomp.

use core::ffi::{c_int, c_uint};

use crate::fd::{BorrowedFd, OwnedFd};
use crate::{Errno, Result};

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`: `execve` can no longer grant privileges (setuid bits,
/// file capabilities); required before an unprivileged seccomp filter or Landlock.
pub fn prctl_set_no_new_privs() -> Result<()> {
    // SAFETY: `PR_SET_NO_NEW_PRIVS` takes integers only (and requires 0 in the rest).
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_SET_NO_NEW_PRIVS,
            1usize,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: `sig` is sent to this process when the thread that
/// created it ends (0 disarms it).
pub fn prctl_set_pdeathsig(sig: c_int) -> Result<()> {
    // SAFETY: `PR_SET_PDEATHSIG` takes the signal number as an integer, not a pointer.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG,
            sig,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphaned descendants of this process become its
/// children instead of the nearest other subreaper's or init's.
pub fn prctl_set_child_subreaper() -> Result<()> {
    // SAFETY: `PR_SET_CHILD_SUBREAPER` takes 1 as an integer, not a pointer.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_SET_CHILD_SUBREAPER,
            1usize,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_SET_DUMPABLE, on)`: whether the process may dump core and be ptrace-attached
/// by its own user.
pub fn prctl_set_dumpable(on: bool) -> Result<()> {
    // SAFETY: `PR_SET_DUMPABLE` takes 0 or 1 as an integer.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_SET_DUMPABLE,
            usize::from(on),
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_GET_SECCOMP)`: 0 (no seccomp), 2 (filter mode); `EINVAL` without seccomp.
pub fn prctl_get_seccomp() -> Result<c_int> {
    // SAFETY: `PR_GET_SECCOMP` returns its answer and reads no argument.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_GET_SECCOMP,
            0usize,
            0usize,
            0usize,
            0usize
        )
    }
    .map(|v| v as c_int)
}

/// `prctl(PR_CAPBSET_DROP, cap)`: drops `cap` from the bounding set (`EINVAL` past the
/// kernel's last capability).
pub fn prctl_capbset_drop(cap: u32) -> Result<()> {
    // SAFETY: `PR_CAPBSET_DROP` takes the capability number as an integer.
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_CAPBSET_DROP,
            cap,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`: empties the ambient set.
pub fn prctl_cap_ambient_clear_all() -> Result<()> {
    // SAFETY: `PR_CAP_AMBIENT_CLEAR_ALL` takes integers only (0 in the rest).
    unsafe {
        syscall!(
            libc::SYS_prctl,
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0usize,
            0usize,
            0usize
        )
    }
    .map(drop)
}

/// `capset(2)` of this thread with `_LINUX_CAPABILITY_VERSION_3`: `data` holds the low and
/// the high 32 bits of each set.
pub fn capset(data: &[CapUserData; 2]) -> Result<()> {
    // A local header: the kernel writes its preferred version back into the header when it
    // rejects the one given, so the header must be memory this call owns.
    let mut header = CapUserHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: the kernel reads (and on a version mismatch writes) the header, a local it
    // may write, and reads two `__user_cap_data_struct`s from `data` (version 3 uses two).
    unsafe {
        syscall!(
            libc::SYS_capset,
            core::ptr::from_mut(&mut header),
            data.as_ptr()
        )
    }
    .map(drop)
}

/// `struct __user_cap_header_struct`; [`capset`] builds it.
#[repr(C)]
#[derive(Debug)]
struct CapUserHeader {
    /// `_LINUX_CAPABILITY_VERSION_3`.
    version: u32,
    /// 0 for the calling thread.
    pid: c_int,
}

/// `struct __user_cap_data_struct`: one 32-bit word of each set.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub struct CapUserData {
    /// Effective set.
    pub effective: u32,
    /// Permitted set.
    pub permitted: u32,
    /// Inheritable set.
    pub inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `landlock_create_ruleset(2)` with `LANDLOCK_CREATE_RULESET_VERSION`: the ABI version.
pub fn landlock_abi_version() -> Result<c_int> {
    // SAFETY: with `LANDLOCK_CREATE_RULESET_VERSION` the attribute pointer must be NULL
    // and its size 0: the kernel reads nothing.
    unsafe {
        syscall!(
            libc::SYS_landlock_create_ruleset,
            0usize,
            0usize,
            1u32 // LANDLOCK_CREATE_RULESET_VERSION
        )
    }
    .map(|v| v as c_int)
}

/// `LANDLOCK_SCOPE_SIGNAL` (ABI 6): a domain's processes cannot signal processes outside it.
pub const LANDLOCK_SCOPE_SIGNAL: u64 = 1 << 1;

/// `LANDLOCK_ACCESS_FS_MAKE_BLOCK` (ABI 1): create a block device.
pub const LANDLOCK_ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;

/// `LANDLOCK_ACCESS_FS_REFER` (ABI 2): link or rename a file into another directory. The
/// one right a domain denies even where its ruleset does not handle it: a ruleset must
/// handle it and grant it for reparenting to work at all.
pub const LANDLOCK_ACCESS_FS_REFER: u64 = 1 << 13;

/// `landlock_create_ruleset(2)` for a ruleset that handles the file-system rights in
/// `handled_fs` (`LANDLOCK_ACCESS_FS_*`) and no network right, and restricts the scopes in
/// `scoped` (`LANDLOCK_SCOPE_*`, ABI 6; 0 on older kernels, which then accept the larger
/// attribute because its extra bytes are zero).
pub fn landlock_create_ruleset(handled_fs: u64, scoped: u64) -> Result<OwnedFd> {
    let attr = LandlockRulesetAttr {
        handled_access_fs: handled_fs,
        handled_access_net: 0,
        scoped,
    };
    // SAFETY: the kernel reads `size_of::<LandlockRulesetAttr>()` bytes (the ABI-6 struct,
    // 24 bytes) from `attr`, a local that outlives the call.
    let ret = unsafe {
        syscall!(
            libc::SYS_landlock_create_ruleset,
            core::ptr::from_ref(&attr),
            core::mem::size_of::<LandlockRulesetAttr>(),
            0u32
        )
    }?;
    // SAFETY: `landlock_create_ruleset` just returned this new fd.
    Ok(unsafe { super::new_fd(ret) })
}

/// `struct landlock_ruleset_attr` of Landlock ABI 6.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct LandlockRulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `landlock_add_rule(2)` with `LANDLOCK_RULE_PATH_BENEATH`: grants `allowed_access`
/// (`LANDLOCK_ACCESS_FS_*`) beneath the file or directory `parent` (an `O_PATH` fd).
pub fn landlock_add_rule_path_beneath(
    ruleset: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    allowed_access: u64,
) -> Result<()> {
    let attr = LandlockPathBeneathAttr {
        allowed_access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: the kernel reads one `landlock_path_beneath_attr` (12 packed bytes, see the
    // layout test) from `attr`, a local that outlives the call; the fd in it is `parent`,
    // open for the call.
    unsafe {
        syscall!(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            1u32, // LANDLOCK_RULE_PATH_BENEATH
            core::ptr::from_ref(&attr),
            0u32
        )
    }
    .map(drop)
}

/// `struct landlock_path_beneath_attr` (packed, as in the UAPI header).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
struct LandlockPathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `landlock_restrict_self(2)`: enforces the ruleset on this thread (and what it execs).
pub fn landlock_restrict_self(ruleset: BorrowedFd<'_>, flags: c_uint) -> Result<()> {
    // SAFETY: `landlock_restrict_self` takes no pointer.
    unsafe { syscall!(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), flags) }.map(drop)
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)` for the BPF program `filter`. Returns
/// the call's result (a listener fd only with `SECCOMP_FILTER_FLAG_NEW_LISTENER`, which
/// the caller then owns).
///
/// A program longer than `u16::MAX` instructions fails with `EINVAL`, as the kernel's own
/// limit (`BPF_MAXINSNS`, 4096) would.
///
/// # Safety
///
/// From this call on, every system call of the process (with `SECCOMP_FILTER_FLAG_TSYNC`:
/// of all its threads) returns what `filter` decides, and a filter can make a call report
/// success without doing anything: `SECCOMP_RET_ERRNO` with errno 0 returns 0, so a
/// `clone` would tell the parent it is the child and an `madvise(MADV_DONTNEED)` would leave
/// memory that the allocator then takes for zeroed; `SECCOMP_RET_TRACE` and
/// `SECCOMP_RET_USER_NOTIF` hand the return value to another process. The caller
/// guarantees that no call whose result memory safety relies on is answered that way for
/// the rest of the process's life (or of its code: the usual case is a child that execs
/// right after, with actions `ALLOW`, `KILL_*` and `ERRNO` with a non-zero errno). A call
/// that fails with an error, or a process that is killed, is always sound.
///
/// ```compile_fail,E0133
/// // Not callable without `unsafe`.
/// let _ = stockade_sys::linux::seccomp_set_mode_filter(0, &[]);
/// ```
pub unsafe fn seccomp_set_mode_filter(
    flags: c_uint,
    filter: &[libc::sock_filter],
) -> Result<c_int> {
    let len = u16::try_from(filter.len()).map_err(|_| Errno(libc::EINVAL))?;
    let prog = libc::sock_fprog {
        len,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points to `len` instructions in `filter`, a live slice. The kernel
    // only reads them, and copies them before returning (`copy_from_user` in
    // `seccomp_prepare_user_filter`), so a borrow for the call suffices. What the filter
    // then does to later calls is the caller's guarantee (see `# Safety`).
    unsafe {
        syscall!(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            core::ptr::from_ref(&prog)
        )
    }
    .map(|v| v as c_int)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(core::mem::size_of::<CapUserHeader>(), 8);
        assert_eq!(core::mem::size_of::<CapUserData>(), 12);
        assert_eq!(core::mem::size_of::<LandlockPathBeneathAttr>(), 12);
    }

    #[test]
    fn an_oversized_seccomp_program_is_refused() {
        let insn = libc::sock_filter {
            code: 0,
            jt: 0,
            jf: 0,
            k: 0,
        };
        let long = [insn; 65_536];
        // SAFETY: the length check refuses the program before the kernel sees it, so no
        // filter is installed.
        let r = unsafe { seccomp_set_mode_filter(0, &long) };
        assert_eq!(r, Err(Errno(libc::EINVAL)));
    }

    /// Why `seccomp_set_mode_filter` is unsafe: `SECCOMP_RET_ERRNO` with errno 0 makes a
    /// call return 0, success, without running it.
    #[test]
    fn an_errno_0_filter_fakes_success() {
        let getppid = libc::SYS_getppid as u32;
        let prog = [
            // A = seccomp_data.nr
            bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
            bpf(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 1, getppid),
            bpf(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ERRNO),
            bpf(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ];
        // SAFETY: the child below makes only raw system calls (no allocation, no lock), as
        // a child of a multithreaded process must.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let r = prctl_set_no_new_privs();
            // SAFETY: the filter answers only `getppid` with a fake 0; this child relies on
            // no `getppid` result and exits right after.
            let r = r.and_then(|()| unsafe { seccomp_set_mode_filter(0, &prog) });
            // SAFETY: `getppid` takes no argument.
            let ppid = unsafe { crate::linux::syscall6(libc::SYS_getppid, [0; 6]) };
            crate::linux::exit_group(match (r, ppid) {
                (Ok(_), 0) => 0,
                (Ok(_), _) => 1,
                (Err(_), _) => 2,
            });
        }
        let mut status = 0;
        // SAFETY: `status` is a live `c_int` the kernel writes.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "1: real ppid, 2: filter refused"
        );
    }

    fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
        libc::sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        }
    }
}
