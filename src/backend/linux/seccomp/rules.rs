//! Which numbers the filter lists, and where each leads: a verdict, or one of the
//! argument-checking blocks. Pure data for one [`FilterOptions`]; [`super::codegen`] turns
//! it into BPF.

use std::collections::BTreeMap;

use super::FilterOptions;
use super::KNOWN_MAX;
use super::tables::{
    CREATE_CALLS, CREATE_CALLS_ARCH, DENIED, DENIED_ARCH, IPC_CALLS, MODE_CALLS, MODE_CALLS_ARCH,
    OWN_PID_CALLS, OWN_PROCESS_CALLS, PTRACE_CALLS, SEND_CALLS,
};
use crate::error::SeccompBuildError;

/// Where a listed syscall number leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    Eperm,
    Enosys,
    /// One of the argument blocks.
    Block(Block),
    /// Allowed, but reported to the host of an explained run, which lets it continue
    /// (`connect` in a network namespace of its own, see [`super::build_explained`]).
    Watch,
}

/// The argument-checking blocks, each emitted once and shared by the calls that need it.
/// The order of the variants is the order of emission: a `Create` block jumps forward into
/// the `Mode` block of its mode argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Block {
    /// `clone`: any `CLONE_NEW*` flag in argument 0.
    Clone,
    /// `ioctl`: a [`DENIED_IOCTLS`](super::tables::DENIED_IOCTLS) command in argument 1.
    Ioctl,
    /// `socket`, `socketpair`: the family in argument 0.
    Socket,
    /// `personality`: argument 0 not in [`ALLOWED_PERSONAS`](super::tables::ALLOWED_PERSONAS).
    Personality,
    /// Creating flags in argument `flags`, then the mode in argument `mode`.
    Create { flags: u32, mode: u32 },
    /// [`SETID_BITS`](super::tables::SETID_BITS) in the mode in this argument.
    Mode(u32),
    /// Argument 0 (a pid) other than 0.
    OwnPid,
    /// Argument 0 other than this `which`, or argument 1 (`who`) other than 0.
    OwnProcess(u32),
    /// `MSG_FASTOPEN` in the send flags in this argument.
    SendFlags(u32),
    /// A pointer other than NULL (either half of the register) in this argument: the
    /// watched `sendto` with a destination of an explained program
    /// ([`super::build_explained`]), where the `EPERM` return notifies.
    Addressed(u32),
}

/// Every listed number and where it leads, for `opts`.
pub(super) fn rules(opts: &FilterOptions) -> Result<BTreeMap<u32, Action>, SeccompBuildError> {
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
    if opts.inet_stream_only && !opts.deny_network {
        for &(nr, flags) in SEND_CALLS {
            list(nr, Action::Block(Block::SendFlags(flags)))?;
        }
    }
    Ok(listed)
}
