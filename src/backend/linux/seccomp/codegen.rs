//! The program itself: the numbers of [`super::rules`] laid out as the six steps of the
//! module docs ("Shape of the program"), with the [`super::asm`] assembler.

use std::collections::BTreeMap;

use libc::sock_filter;

use super::FilterOptions;
use super::KNOWN_MAX;
use super::asm::{
    Asm, BPF_AND_K, BPF_JEQ, BPF_JGE, BPF_JGT, BPF_JSET, BPF_LD_ABS, BPF_RET_K, Next, Target,
};
use super::rules::{Action, Block};
use super::tables::{
    ALLOWED_PERSONAS, AUDIT_ARCH, CLONE_NEW_FLAGS, CREATE_FLAGS, DENIED_IOCTLS, MSG_FASTOPEN,
    SETID_BITS, SKIPPED_CALL, SOCKET_TYPE_FLAGS, TCP_PROTOCOLS, X32_SYSCALL_BIT,
};
use crate::error::SeccompBuildError;

/// Longest run of `JEQ`s at a leaf of the binary search. A leaf of one compare per number
/// would need a `JGE` per number as well; three keeps the program near 1.4 instructions per
/// listed number while adding at most two compares to any path.
pub(super) const LEAF: usize = 3;

/// `offsetof(struct seccomp_data, nr)`.
const SECCOMP_DATA_NR: u32 = 0;
/// `offsetof(struct seccomp_data, arch)`.
const SECCOMP_DATA_ARCH: u32 = 4;

/// Offset of the low 32 bits of argument `arg` in `struct seccomp_data` (`args` is a `u64`
/// array at offset 16, in the machine's byte order).
const fn arg_low(arg: u32) -> u32 {
    16 + 8 * arg + if cfg!(target_endian = "big") { 4 } else { 0 }
}

/// Offset of the high 32 bits of argument `arg` in `struct seccomp_data`.
const fn arg_high(arg: u32) -> u32 {
    16 + 8 * arg + if cfg!(target_endian = "big") { 0 } else { 4 }
}

/// The shared returns of step 6, where every path of the program ends.
#[derive(Clone, Copy)]
struct Returns {
    allow: Target,
    eperm: Target,
    enosys: Target,
    kill: Target,
    /// The `ENOSYS` of [`Action::Enosys`] (`clone3`, `openat2`): `enosys` itself, but in
    /// an explained program, where `enosys` notifies, a return of its own.
    fallback: Target,
}

/// The label of each argument block in use.
type Blocks = BTreeMap<Block, Target>;

/// Emits the program for the numbers `listed` by [`super::rules::rules`] under `opts`.
///
/// With `explain` the denials notify instead ([`super::build_explained`]): the shared
/// `EPERM` and `ENOSYS` returns become `SECCOMP_RET_USER_NOTIF`, [`Action::Watch`] leads
/// there too, and [`Action::Enosys`] keeps an `ENOSYS` return of its own (libc's fallback,
/// no denial). Without it the program is exactly the one stockade installs.
///
/// # Errors
///
/// [`SeccompBuildError::CompileFilter`] when a block has no label or a jump cannot be
/// encoded (a bug here, not a property of the host), or an [`Action::Watch`] without
/// `explain`.
pub(super) fn program(
    listed: &BTreeMap<u32, Action>,
    opts: &FilterOptions,
    explain: bool,
) -> Result<Vec<sock_filter>, SeccompBuildError> {
    let mut asm = Asm::default();
    let mut ret = Returns {
        allow: asm.label(),
        eperm: asm.label(),
        enosys: asm.label(),
        kill: asm.label(),
        fallback: Next,
    };
    ret.fallback = if explain { asm.label() } else { ret.enosys };
    let unknown = asm.label();
    let blocks = block_labels(&mut asm, listed);
    let keys = search_keys(listed, ret, &blocks, explain)?;

    // 1. Architecture: a foreign ABI (i386, 32-bit arm) is killed.
    asm.stmt(BPF_LD_ABS, SECCOMP_DATA_ARCH);
    asm.jump(BPF_JEQ, AUDIT_ARCH, Next, ret.kill);
    // 2. The number; anything above the known calls (−1 and x32 included) is sorted out at
    // the end, so an ordinary call pays one compare for all three rules.
    asm.stmt(BPF_LD_ABS, SECCOMP_DATA_NR);
    asm.jump(BPF_JGT, KNOWN_MAX, unknown, Next);
    // 3. Binary search over the listed numbers; a miss is allowed.
    search(&mut asm, &keys, ret.allow);

    // 4. The argument blocks, in the order of `Block`.
    for (&b, &label) in &blocks {
        asm.bind(label);
        argument_block(&mut asm, b, opts, ret, &blocks)?;
    }

    // 5. Above the known calls (the accumulator still holds `nr`): −1 is a call skipped by
    // a tracer and passes; x32 calls (native arch, bit 30 set) are killed like i386 ones;
    // anything else is a call newer than this list and fails as the kernel would fail a
    // call it does not have.
    asm.bind(unknown);
    asm.jump(BPF_JEQ, SKIPPED_CALL, ret.allow, Next);
    if let Some(bit) = X32_SYSCALL_BIT {
        asm.jump(BPF_JGE, bit, ret.kill, Next);
    }

    // 6. The returns, shared by every path.
    let deny = |e| {
        if explain {
            libc::SECCOMP_RET_USER_NOTIF
        } else {
            errno(e)
        }
    };
    asm.bind(ret.enosys);
    asm.stmt(BPF_RET_K, deny(libc::ENOSYS));
    asm.bind(ret.allow);
    asm.stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW);
    asm.bind(ret.eperm);
    asm.stmt(BPF_RET_K, deny(libc::EPERM));
    asm.bind(ret.kill);
    asm.stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS);
    if explain {
        asm.bind(ret.fallback);
        asm.stmt(BPF_RET_K, errno(libc::ENOSYS));
    }

    asm.finish()
}

/// One label per argument block in use; a Create block needs its Mode block too.
fn block_labels(asm: &mut Asm, listed: &BTreeMap<u32, Action>) -> Blocks {
    let mut blocks = Blocks::new();
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
    blocks
}

/// The label of block `b`.
fn block(blocks: &Blocks, b: Block) -> Result<Target, SeccompBuildError> {
    blocks
        .get(&b)
        .copied()
        .ok_or_else(|| SeccompBuildError::CompileFilter(format!("no block {b:?}").into()))
}

/// The keys of the binary search: each listed number (in order) and the label it jumps to.
fn search_keys(
    listed: &BTreeMap<u32, Action>,
    ret: Returns,
    blocks: &Blocks,
    explain: bool,
) -> Result<Vec<(u32, Target)>, SeccompBuildError> {
    listed
        .iter()
        .map(|(&n, &a)| {
            let t = match a {
                Action::Eperm => ret.eperm,
                Action::Enosys => ret.fallback,
                Action::Block(b) => block(blocks, b)?,
                // In an explained program `eperm` notifies.
                Action::Watch if explain => ret.eperm,
                Action::Watch => {
                    return Err(SeccompBuildError::CompileFilter(
                        "a watched call outside an explained program".into(),
                    ));
                }
            };
            Ok((n, t))
        })
        .collect()
}

/// Emits the body of argument block `b` (its label already bound): load the argument, then
/// jump to a shared return or, for `Create`, on to the `Mode` block.
fn argument_block(
    asm: &mut Asm,
    b: Block,
    opts: &FilterOptions,
    ret: Returns,
    blocks: &Blocks,
) -> Result<(), SeccompBuildError> {
    let Returns { allow, eperm, .. } = ret;
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
            one_of(asm, DENIED_IOCTLS.iter().map(|&c| c as u32), eperm, allow);
        }
        // The family, type and protocol are `int`s; the low 32 bits for the same reason.
        // `deny_network` is the stricter of the two network options and wins.
        Block::Socket => {
            asm.stmt(BPF_LD_ABS, arg_low(0));
            if opts.deny_network {
                asm.jump(BPF_JEQ, libc::AF_UNIX as u32, allow, eperm);
            } else if opts.inet_stream_only {
                inet_stream_only(asm, ret);
            } else {
                asm.jump(BPF_JEQ, libc::AF_VSOCK as u32, eperm, allow);
            }
        }
        // `unsigned int personality`.
        Block::Personality => {
            asm.stmt(BPF_LD_ABS, arg_low(0));
            one_of(asm, ALLOWED_PERSONAS.iter().copied(), allow, eperm);
        }
        // Open flags are an `int`. Without O_CREAT or O_TMPFILE the kernel ignores the
        // mode (build_open_how), so only then is it checked.
        Block::Create { flags, mode } => {
            asm.stmt(BPF_LD_ABS, arg_low(flags));
            let mode_block = block(blocks, Block::Mode(mode))?;
            asm.jump(BPF_JSET, CREATE_FLAGS, mode_block, allow);
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
        // `unsigned int flags`.
        Block::SendFlags(arg) => {
            asm.stmt(BPF_LD_ABS, arg_low(arg));
            asm.jump(BPF_JSET, MSG_FASTOPEN, eperm, allow);
        }
        // A pointer: the whole register, both halves.
        Block::Addressed(arg) => {
            asm.stmt(BPF_LD_ABS, arg_low(arg));
            asm.jump(BPF_JEQ, 0, Next, eperm);
            asm.stmt(BPF_LD_ABS, arg_high(arg));
            asm.jump(BPF_JEQ, 0, allow, eperm);
        }
    }
    Ok(())
}

/// Emits the rest of the socket block under [`FilterOptions::inet_stream_only`] (the
/// family loaded): `AF_UNIX` passes; `AF_INET` and `AF_INET6` pass only as `SOCK_STREAM`
/// (either creation flag allowed, any other bit refused) with protocol 0 or `IPPROTO_TCP`;
/// every other family fails.
fn inet_stream_only(asm: &mut Asm, ret: Returns) {
    let Returns { allow, eperm, .. } = ret;
    let inet = asm.label();
    asm.jump(BPF_JEQ, libc::AF_UNIX as u32, allow, Next);
    asm.jump(BPF_JEQ, libc::AF_INET as u32, inet, Next);
    asm.jump(BPF_JEQ, libc::AF_INET6 as u32, Next, eperm);
    asm.bind(inet);
    // The type carries the creation flags in its upper bits; masking off only those two
    // leaves any other bit to fail the compare (the kernel would refuse it with EINVAL).
    asm.stmt(BPF_LD_ABS, arg_low(1));
    asm.stmt(BPF_AND_K, !SOCKET_TYPE_FLAGS);
    asm.jump(BPF_JEQ, libc::SOCK_STREAM as u32, Next, eperm);
    // 0 picks the family's default stream protocol, TCP. Any other (SCTP, MPTCP) is a
    // protocol Landlock's TCP rules do not govern.
    asm.stmt(BPF_LD_ABS, arg_low(2));
    one_of(asm, TCP_PROTOCOLS.iter().copied(), allow, eperm);
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
