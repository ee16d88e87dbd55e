//! The Linux backend: the plan replayed by a child of stockade's own `clone`.
//!
//! [`prepare`] runs in the parent and computes every byte, including the Landlock ruleset
//! fd ([`landlock`]) and the seccomp BPF program ([`seccomp`]); [`child`] runs between
//! `clone` and `execve` and only replays; [`crate::backend::report`] is the record a
//! failing child sends back. The last steps before `execve` are, in this order: `PR_SET_NO_NEW_PRIVS`,
//! `landlock_restrict_self`, `seccomp(SECCOMP_SET_MODE_FILTER)`. On the full and landlock
//! layers that `execve` is the `execveat` of the sandbox's init ([`init`]), which starts
//! the program.

pub mod cgroup;
pub mod child;
pub mod clone;
pub mod init;
pub mod landlock;
pub mod prepare;
pub mod seccomp;
pub mod shared_layer;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use crate::backend::report::{self, Ending};
use crate::error::SpawnError;
use crate::plan::{Namespaces, Plan, Step};
use crate::probe::cause::{self, Cause, HostFacts};
use crate::probe::{Availability, Refusal, Refused};
use prepare::{Exec, ExecSpec, Layout};

/// The errors with which a host refuses the namespace `clone` or the id-map write:
/// `EPERM` (a seccomp profile such as Docker's default, AppArmor's
/// `apparmor_restrict_unprivileged_userns`, a process under `chroot(2)`, no `CAP_SETUID`
/// over the new namespace), `ENOSPC` (`user.max_user_namespaces`, here or in an
/// ancestor), `EUSERS` (nesting deeper than 32), `EINVAL` (no user namespaces in this
/// kernel).
const REFUSED: [i32; 4] = [libc::EPERM, libc::ENOSPC, libc::EUSERS, libc::EINVAL];

/// The hint added to a namespace clone refused with `EPERM`, by what is known of a chroot
/// ([`crate::probe::chrooted`]).
fn eperm_hint(chrooted: Option<bool>) -> &'static str {
    match chrooted {
        Some(true) => {
            " (this process runs under chroot, where the kernel refuses user namespaces: \
             enter the root with pivot_root, as container runtimes do, instead of chroot)"
        }
        Some(false) => {
            " (user namespaces restricted: kernel.apparmor_restrict_unprivileged_userns=1 \
             or a seccomp profile?)"
        }
        None => {
            " (user namespaces refused: under chroot (the kernel refuses them there: enter \
             the root with pivot_root, as container runtimes do), \
             kernel.apparmor_restrict_unprivileged_userns=1, or a seccomp profile?)"
        }
    }
}

/// The hint added to a namespace clone refused with `ENOSPC`.
const ENOSPC_HINT: &str = " (user namespaces restricted: user.max_user_namespaces=0, or its \
     limit reached here or in an ancestor namespace?)";

/// Whether the failed `clone` of a child with namespaces `ns` means the host refuses
/// namespaces (rather than, say, running out of memory), and why, with the cause when one
/// is recognized ([`cause::diagnose`]). `stockade detect` prints the same reason
/// ([`probe_namespaces`]).
pub(crate) fn clone_refusal(ns: Namespaces, err: &std::io::Error) -> Option<Refusal> {
    clone_refusal_in(ns, err, |errno| HostFacts::read(Some(errno), None, None))
}

/// [`clone_refusal`], with the host's facts from `facts` (given the errno; asked only for
/// a refusal).
fn clone_refusal_in(
    ns: Namespaces,
    err: &std::io::Error,
    facts: impl FnOnce(i32) -> HostFacts,
) -> Option<Refusal> {
    let errno = err.raw_os_error()?;
    if !ns.base || !REFUSED.contains(&errno) {
        return None;
    }
    let facts = facts(errno);
    let causes = cause::diagnose(&facts);
    // Without a recognized cause, the likely ones, phrased as a guess.
    let hint = match errno {
        libc::EPERM => eperm_hint(facts.chrooted),
        libc::ENOSPC => ENOSPC_HINT,
        _ => "",
    };
    let call = format!(
        "clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID): {}",
        crate::error::strerror(errno)
    );
    Some(Refusal {
        kind: Refused::Namespaces,
        reason: crate::probe::with_causes(call, &causes, hint),
        causes,
    })
}

/// Whether `step` failing with `errno` in the child means the host refuses namespaces or
/// a fresh `/proc`, and why: the id maps and the first mounts of a new namespace (the same
/// for every policy), or `/proc` without the policy's fallback. A step that depends on the
/// policy's paths is never a refusal: it is the policy's error.
///
/// The id maps failing with `ENOENT` or `EROFS` are a refusal too: `/proc` is not mounted
/// (a minimal image) or mounted read-only, and without a writable one no user namespace can
/// get its maps, as the probe behind `stockade detect` finds. The policy then decides as for
/// any refusal (fall back to a layer it allows, with a warning that names the reason, or
/// refuse), rather than the run failing where `detect` reports the layer unavailable.
pub(crate) fn step_refusal(step: &Step, errno: i32) -> Option<Refusal> {
    step_refusal_in(step, errno, read_facts)
}

/// The real host's facts for a refusal of `kind` with `errno`.
fn read_facts(kind: Refused, errno: i32) -> HostFacts {
    match kind {
        Refused::Namespaces => HostFacts::read(Some(errno), None, None),
        Refused::FreshProc => HostFacts::read(None, Some(errno), None),
    }
}

/// [`step_refusal`], with the host's facts from `facts` (asked only for a refusal).
fn step_refusal_in(
    step: &Step,
    errno: i32,
    facts: impl FnOnce(Refused, i32) -> HostFacts,
) -> Option<Refusal> {
    let kind = match step {
        Step::IdMaps { .. }
            if REFUSED.contains(&errno) || matches!(errno, libc::ENOENT | libc::EROFS) =>
        {
            Refused::Namespaces
        }
        Step::MountsPrivate | Step::BaseRoot { .. }
            if matches!(errno, libc::EPERM | libc::EACCES) =>
        {
            Refused::Namespaces
        }
        Step::Proc { fallback: false } => Refused::FreshProc,
        _ => return None,
    };
    Some(refusal(kind, failure(step, errno), facts(kind, errno)))
}

/// A refusal of `kind` because of `what` (the failing step and its error), with the causes
/// `facts` show.
fn refusal(kind: Refused, what: String, facts: HostFacts) -> Refusal {
    let causes = cause::diagnose(&facts);
    Refusal {
        kind,
        reason: crate::probe::with_causes(what, &causes, ""),
        causes,
    }
}

/// `step` failed with `errno`, as a refusal's reason says it: `write /proc/self/uid_map
/// and gid_map: No such file or directory (/proc is not mounted)`.
fn failure(step: &Step, errno: i32) -> String {
    let note = match step {
        Step::IdMaps { .. } => crate::probe::proc_note(errno),
        _ => None,
    };
    let note = note.map(|n| format!(" ({n})")).unwrap_or_default();
    format!("{step}: {}{note}", crate::error::strerror(errno))
}

/// `clone` flags for the namespaces of a plan.
pub fn clone_flags(ns: Namespaces) -> libc::c_int {
    let mut flags = 0;
    if ns.base {
        flags |= libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
    }
    if ns.net {
        flags |= libc::CLONE_NEWNET;
    }
    flags
}

/// How a started child ended its setup.
#[derive(Debug)]
pub enum Outcome {
    /// The program is running.
    Running {
        /// Its pid (in the host's PID namespace).
        pid: libc::pid_t,
        /// A pidfd for it.
        pidfd: OwnedFd,
    },
    /// Step `step` failed with `errno`; the child has been reaped.
    Failed {
        /// Index of the failing step (layout steps first, then the per-command ones).
        step: u32,
        /// The errno.
        errno: i32,
    },
    /// The child ended without a report and without exec (killed, or it exited on its
    /// own, as the probe's `Exit` step does); it has been reaped.
    Died(std::process::ExitStatus),
}

/// A close-on-exec pipe for the child's report: (read end, write end).
///
/// # Errors
///
/// [`SpawnError::Os`] when `pipe2` fails.
pub fn report_pipe() -> Result<(OwnedFd, OwnedFd), SpawnError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| SpawnError::Os {
        call: "pipe2",
        source: e.into(),
    })
}

/// A socket pair that carries fds from the setup child to the parent (a datagram pair,
/// close-on-exec): the parent keeps the first end, the child gets the second and sends
/// with [`stockade_sys::linux::send_fd`]; the parent reads with [`recv_fds`]. `what`
/// names the fds in the error (`the pseudo-terminal`).
///
/// # Errors
///
/// [`SpawnError::Os`] naming `socketpair for <what>`.
pub fn fd_channel(call: &'static str) -> Result<(OwnedFd, OwnedFd), SpawnError> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    socketpair(
        AddressFamily::Unix,
        SockType::Datagram,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| SpawnError::Os {
        call,
        source: e.into(),
    })
}

/// Receives, without blocking, every fd a child sent on `sock` with
/// [`stockade_sys::linux::send_fd`] before it exec'd: (tag, fd) pairs, in order.
///
/// # Errors
///
/// The error of `recvmsg`, or `ENOBUFS` when a message came with its fds cut off.
pub fn recv_fds(sock: &OwnedFd) -> std::io::Result<Vec<(u8, OwnedFd)>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::{FromRawFd, RawFd};
    let mut out = Vec::new();
    loop {
        let mut tag = [0u8; 1];
        let mut cmsg = nix::cmsg_space!(RawFd);
        let (len, fds) = {
            let mut iov = [std::io::IoSliceMut::new(&mut tag)];
            let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC;
            let msg = match recvmsg::<()>(sock.as_raw_fd(), &mut iov, Some(&mut cmsg), flags) {
                Ok(m) => m,
                Err(nix::errno::Errno::EAGAIN) => return Ok(out),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            let mut fds = Vec::new();
            for c in msg.cmsgs()? {
                if let ControlMessageOwned::ScmRights(v) = c {
                    fds.extend(v);
                }
            }
            (msg.bytes, fds)
        };
        for fd in fds {
            // SAFETY: the kernel installed `fd` in this process's table for this message
            // (`SCM_RIGHTS`), close-on-exec; nothing else knows it, so it is owned here.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            if len == 1 {
                out.push((tag[0], fd));
            }
        }
    }
}

/// After a successful spawn with explain on: the seccomp listener the child sent on
/// `sock` (tag 0) before it exec'd ([`prepare::ExplainFilter`]).
///
/// # Errors
///
/// The error of `recvmsg`; `ENOMSG` when no listener came, `EBADF` when the fd that came
/// is not a seccomp listener.
pub fn recv_listener(sock: &OwnedFd) -> std::io::Result<stockade_sys::linux::SeccompListener> {
    let fd = recv_fds(sock)?
        .into_iter()
        .find_map(|(tag, fd)| (tag == 0).then_some(fd))
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMSG))?;
    // The kernel names a listener's file `anon_inode:seccomp notify`.
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    if link.as_os_str() != "anon_inode:seccomp notify" {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: the fd is a seccomp listener: only this command's setup child held the
    // other end of `sock` (close-on-exec, closed before its exec), it sent the listener
    // its own `seccomp` call returned, and the kernel names the file as a listener's.
    Ok(unsafe { stockade_sys::linux::SeccompListener::from_fd(fd.into()) })
}

/// Clones a child that replays `layout` and then `exec`, and reads its report. A layout
/// with a shared Landlock layer ([`Layout::shared_landlock`]) gives the child its current
/// build for the sandbox's directory `tmp_parent`, which holds the command's `TMPDIR`,
/// checked (and rebuilt when stale) here.
///
/// # Errors
///
/// [`SpawnError::Os`] when `clone` fails or the shared Landlock layer cannot be built
/// (or has no `tmp_parent`), [`SpawnError::Protocol`] on a malformed report (see
/// [`report::await_exec`]).
pub fn start(
    layout: &Arc<Layout>,
    mut exec: Exec,
    report: (OwnedFd, OwnedFd),
    tmp_parent: Option<&std::path::Path>,
) -> Result<Outcome, SpawnError> {
    if let Some(shared) = &layout.shared_landlock {
        const CALL: &str = "build the sandbox's shared Landlock layer";
        let tmp_parent = tmp_parent.ok_or_else(|| SpawnError::Os {
            call: CALL,
            source: std::io::Error::other("no directory for the commands' TMPDIRs"),
        })?;
        let layer = shared.current(tmp_parent).map_err(|e| SpawnError::Os {
            call: CALL,
            source: std::io::Error::other(e),
        })?;
        exec.set_shared_landlock(layer);
    }
    exec.finish_init();
    let flags = clone_flags(layout.plan.namespaces);
    let (read_end, write_end) = report;
    let launched = clone::launch(Arc::clone(layout), exec, flags);
    // The child has exec'd or exited (CLONE_VFORK); the parent's write end must go before
    // reading, or EOF never comes.
    drop(write_end);
    let (pid, pidfd) = launched?;
    Ok(match report::await_exec(read_end, pid)? {
        Ending::Exec => Outcome::Running { pid, pidfd },
        Ending::Failed(r) => Outcome::Failed {
            step: r.step,
            errno: r.errno,
        },
        Ending::Died(status) => Outcome::Died(status),
    })
}

/// The highest capability number the child tries to drop from the bounding set: 63, the
/// last a 64-bit capability set can hold. The child stops at the first number the kernel
/// does not know (`PR_CAPBSET_DROP` fails with `EINVAL` past `cap_last_cap`), so no
/// spawn reads `/proc/sys/kernel/cap_last_cap` (an open, two reads and a close).
pub fn last_cap() -> u32 {
    63
}

/// The user-namespace probe: a real child replays [`Plan::namespace_probe`] (maps its
/// ids, builds a root, binds a tree read-only, mounts a fresh `/proc`) and exits. Returns
/// (user namespaces, fresh proc, the recognized causes of what was refused).
pub fn probe_namespaces() -> (Availability, Availability, Vec<Cause>) {
    let ids = crate::plan::Ids::of_caller();
    let (plan, proc_step) = Plan::namespace_probe(ids, &crate::plan::RealFs);
    let layout = match Layout::new(plan, last_cap(), None) {
        Ok(l) => Arc::new(l),
        Err(e) => return refused(e.to_string(), "not probed", Vec::new()),
    };
    match run_probe(&layout) {
        Ok(outcome) => probe_outcome(&layout.plan, proc_step, outcome),
        Err(SpawnError::Os { call, source }) => {
            match clone_refusal(layout.plan.namespaces, &source) {
                Some(r) => refused(r.reason, "user namespaces unavailable", r.causes),
                None => refused(
                    format!("{call}(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID): {source}"),
                    "user namespaces unavailable",
                    Vec::new(),
                ),
            }
        }
        Err(e) => refused(e.to_string(), "not probed", Vec::new()),
    }
}

/// Namespaces unavailable because of `why`; a fresh `/proc` unavailable because of
/// `proc`; the causes found.
fn refused(
    why: String,
    proc: &str,
    causes: Vec<Cause>,
) -> (Availability, Availability, Vec<Cause>) {
    (Availability::no(why), Availability::no(proc), causes)
}

/// Clones the probe child: no program, no stdio of its own, a report pipe.
fn run_probe(layout: &Arc<Layout>) -> Result<Outcome, SpawnError> {
    let (r, w) = report_pipe()?;
    let spec = ExecSpec {
        program: "".as_ref(),
        ..ExecSpec::default()
    };
    let exec = Exec::new(
        spec,
        [-1; 3],
        (w.as_raw_fd(), r.as_raw_fd()),
        -1,
        Vec::new(),
    )
    .map_err(|e| SpawnError::Os {
        call: "prepare probe",
        source: std::io::Error::other(e.to_string()),
    })?;
    start(layout, exec, (r, w), None)
}

/// What the probe child's ending says: its last step exits 0 instead of exec; a failing
/// step is either the fresh `/proc` (`proc_step`) or the namespaces, and the host's facts
/// name its cause when they can.
fn probe_outcome(
    plan: &Plan,
    proc_step: u32,
    outcome: Outcome,
) -> (Availability, Availability, Vec<Cause>) {
    let both = (Availability::yes(), Availability::yes(), Vec::new());
    match outcome {
        Outcome::Died(status) if status.success() => both,
        Outcome::Died(status) => refused(
            format!("probe child ended with {status}"),
            "not probed",
            Vec::new(),
        ),
        // Where the kernel does not say whether it exec'd (no /proc), EOF reads as exec.
        Outcome::Running { pid, .. } => {
            match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => both,
                other => refused(
                    format!("probe child ended with {other:?}"),
                    "not probed",
                    Vec::new(),
                ),
            }
        }
        Outcome::Failed { step, errno } => {
            let what = match plan.steps.get(step as usize) {
                Some(s) => failure(s, errno),
                None => format!(
                    "{}: {}",
                    report::describe_step(plan, step, None, "", -1),
                    crate::error::strerror(errno)
                ),
            };
            let kind = if step == proc_step {
                Refused::FreshProc
            } else {
                Refused::Namespaces
            };
            let r = refusal(kind, what, read_facts(kind, errno));
            match kind {
                Refused::FreshProc => (Availability::yes(), Availability::no(r.reason), r.causes),
                Refused::Namespaces => refused(r.reason, "user namespaces unavailable", r.causes),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Access;

    const BASE: Namespaces = Namespaces {
        base: true,
        net: false,
    };

    /// A child that exits without its record and without exec (here: its record's write
    /// fails, because its report fd is the pipe's read end) is `Died`, not running. It
    /// closed the real write end in `close_fds`, so EOF comes early: the parent still
    /// learns from the kernel that it never exec'd.
    #[test]
    fn a_child_that_exits_without_its_record_is_died_not_running() {
        let ws = tempfile::tempdir().unwrap();
        let policy = crate::Policy::with_workspace(ws.path());
        let plan = Plan::passthrough(&policy, &crate::plan::RealFs).unwrap();
        let layout = Arc::new(Layout::new(plan, last_cap(), None).unwrap());
        let (r, w) = report_pipe().unwrap();
        let spec = ExecSpec {
            program: "true".as_ref(),
            args: vec!["true".into()],
            env: Vec::new(),
            path: &["/usr/bin".into(), "/bin".into()],
            cwd: Some(ws.path().join("gone")),
            controlling_terminal: None,
        };
        let exec = Exec::new(
            spec,
            [-1; 3],
            (r.as_raw_fd(), r.as_raw_fd()),
            -1,
            Vec::new(),
        );
        match start(&layout, exec.unwrap(), (r, w), None).unwrap() {
            Outcome::Died(status) => assert_eq!(status.code(), Some(child::SETUP_FAILED)),
            other => panic!("{other:?}"),
        }
    }

    /// A host whose facts explain nothing (its /proc is there, its sysctls allow).
    fn plain(errno: i32) -> HostFacts {
        let mut files = std::collections::BTreeMap::new();
        files.insert(cause::STATUS, "Seccomp:\t0\n".to_string());
        HostFacts {
            files,
            userns_errno: Some(errno),
            chrooted: Some(false),
            ..HostFacts::default()
        }
    }

    #[test]
    fn a_refused_namespace_clone_is_a_refusal_and_other_clone_errors_are_not() {
        for errno in REFUSED {
            let err = std::io::Error::from_raw_os_error(errno);
            match clone_refusal_in(BASE, &err, plain) {
                Some(Refusal {
                    kind: Refused::Namespaces,
                    reason,
                    ..
                }) => {
                    assert!(reason.starts_with("clone(CLONE_NEWUSER"), "{reason}");
                    assert!(reason.contains(&crate::error::strerror(errno)), "{reason}");
                }
                other => panic!("{errno}: {other:?}"),
            }
        }
        let no_facts = |_| -> HostFacts { panic!("asked") };
        let enomem = std::io::Error::from_raw_os_error(libc::ENOMEM);
        assert_eq!(clone_refusal_in(BASE, &enomem, no_facts), None);
        // Without namespaces (layer 2, passthrough) there is nothing to fall back from.
        let eperm = std::io::Error::from_raw_os_error(libc::EPERM);
        assert_eq!(
            clone_refusal_in(Namespaces::default(), &eperm, no_facts),
            None
        );
    }

    #[test]
    fn a_clone_refused_with_eperm_names_a_chroot_when_one_may_be_the_cause() {
        let eperm = std::io::Error::from_raw_os_error(libc::EPERM);
        let why = |chrooted: Option<bool>| {
            let facts = |errno| HostFacts {
                chrooted,
                ..plain(errno)
            };
            match clone_refusal_in(BASE, &eperm, facts) {
                Some(r) => r,
                other => panic!("{other:?}"),
            }
        };
        let known = why(Some(true));
        assert_eq!(known.causes.len(), 1, "{known:?}");
        assert_eq!(known.causes[0].id, "chroot");
        assert!(known.reason.contains("runs under chroot"), "{known:?}");
        assert!(known.to_string().contains("pivot_root"), "{known}");
        assert!(!known.reason.contains("seccomp"), "{known:?}");
        let unknown = why(None).reason;
        for part in ["chroot", "pivot_root", "apparmor", "seccomp"] {
            assert!(unknown.contains(part), "{part}: {unknown}");
        }
        let not = why(Some(false)).reason;
        assert!(!not.contains("chroot") && not.contains("seccomp"), "{not}");
        // ENOSPC is the namespace limit (whatever the sysctl here says), never a chroot.
        let enospc = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let chrooted = |errno| HostFacts {
            chrooted: Some(true),
            ..plain(errno)
        };
        let limit = clone_refusal_in(BASE, &enospc, chrooted).unwrap();
        assert!(
            limit.reason.contains("user.max_user_namespaces"),
            "{limit:?}"
        );
        let ids: Vec<_> = limit.causes.iter().map(|c| c.id).collect();
        assert_eq!(ids, ["max-user-namespaces"]);
    }

    #[test]
    fn a_recognized_cause_replaces_the_guess_and_brings_its_remedy() {
        let enospc = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let facts = |errno| {
            let mut f = plain(errno);
            f.files.insert(cause::MAX_USER_NAMESPACES, "0\n".into());
            f
        };
        let r = clone_refusal_in(BASE, &enospc, facts).unwrap();
        assert_eq!(
            r.reason,
            "clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID): No space left on device \
             (user.max_user_namespaces = 0: this user namespace may create no user namespaces)"
        );
        assert!(!r.reason.contains('?'), "no guess: {r:?}");
        assert!(
            r.to_string()
                .contains("; to fix: raise it: `sysctl -w user.max_user_namespaces="),
            "{r}"
        );
        // A fresh /proc refused under masked entries.
        let masked = |kind, errno| {
            assert_eq!(kind, Refused::FreshProc);
            let mut f = HostFacts {
                proc_errno: Some(errno),
                ..HostFacts::default()
            };
            f.files.insert(
                cause::MOUNTINFO,
                "1 0 0:5 / /proc rw - proc proc rw\n2 1 0:5 /sys /proc/sys ro - proc proc rw\n"
                    .into(),
            );
            f
        };
        let r = step_refusal_in(&Step::Proc { fallback: false }, libc::EPERM, masked).unwrap();
        assert_eq!(r.causes.len(), 1, "{r:?}");
        assert_eq!(r.causes[0].id, "proc-overmounted");
        assert!(r.reason.starts_with("mount proc /proc: "), "{r:?}");
    }

    #[test]
    fn only_the_namespace_steps_and_a_fresh_proc_are_refusals() {
        let refusal = |step: &Step, errno| {
            step_refusal_in(step, errno, |_, e| plain(e)).map(|r| (r.kind, r.reason))
        };
        let ids = Step::IdMaps { uid: 0, gid: 0 };
        assert!(matches!(
            refusal(&ids, libc::EPERM),
            Some((Refused::Namespaces, w)) if w.contains("uid_map")
        ));
        assert_eq!(refusal(&ids, libc::EIO), None);
        // No /proc, or a read-only one: no id maps, so no user namespace; the policy
        // decides, as for EPERM.
        for errno in [libc::ENOENT, libc::EROFS] {
            assert!(matches!(
                refusal(&ids, errno),
                Some((Refused::Namespaces, w)) if w.contains("uid_map")
            ));
        }
        let base_root = Step::BaseRoot {
            stage: "/tmp".into(),
        };
        for step in [Step::MountsPrivate, base_root] {
            assert!(matches!(
                refusal(&step, libc::EPERM),
                Some((Refused::Namespaces, _))
            ));
            assert_eq!(refusal(&step, libc::ENOENT), None);
        }
        assert!(matches!(
            refusal(&Step::Proc { fallback: false }, libc::EPERM),
            Some((Refused::FreshProc, w)) if w.contains("mount proc /proc")
        ));
        // With the policy's fallback the child binds the host's /proc itself.
        assert_eq!(refusal(&Step::Proc { fallback: true }, libc::EPERM), None);
        // A bind of a policy path failing is the policy's error, whatever the errno.
        let bind = Step::Bind {
            src: "/opt".into(),
            dst: "/opt".into(),
            access: Access::ReadOnly,
            dir: true,
            beneath: None,
            idmap: false,
        };
        assert_eq!(refusal(&bind, libc::EPERM), None);
    }
}
