//! A classic-BPF interpreter: runs a generated program on a `seccomp_data` as the kernel
//! would, and optionally as the kernel's install-time cache emulator does.
//!
//! The host of an explained run ([`super::build_explained`]) runs the filter it would have
//! installed on each notification, to answer with exactly that filter's errno; the unit
//! tests run every program through it. It is total: any program and any input give an
//! answer or `None` (an instruction it does not know, a jump or load out of range, a path
//! that runs off the end), never a panic, and it takes at most one step per instruction
//! (classic BPF jumps only forward).

use libc::sock_filter;

use super::asm::BPF_LD_ABS;

/// `sizeof(struct seccomp_data)`.
const DATA_LEN: usize = 64;

/// A `struct seccomp_data` in the machine's byte order, as the filter loads it.
fn data_bytes(d: &libc::seccomp_data) -> [u8; DATA_LEN] {
    let mut b = [0u8; DATA_LEN];
    let mut put = |at: usize, v: &[u8]| {
        if let Some(dst) = b.get_mut(at..at + v.len()) {
            dst.copy_from_slice(v);
        }
    };
    put(0, &d.nr.to_ne_bytes());
    put(4, &d.arch.to_ne_bytes());
    put(8, &d.instruction_pointer.to_ne_bytes());
    for (i, a) in d.args.iter().enumerate() {
        put(16 + 8 * i, &a.to_ne_bytes());
    }
    b
}

/// The action (`SECCOMP_RET_*` with its data) the program returns for `data`, or `None`
/// when the program is not one this interpreter can run to the end (see the module docs).
pub(crate) fn run(prog: &[sock_filter], data: &libc::seccomp_data) -> Option<u32> {
    exec(prog, data, false).map(|(action, _)| action)
}

/// Runs the program like [`run`], returning the action and the number of instructions
/// executed; with `const_only`, gives up (None) on a load of anything but `nr` or `arch`,
/// as the kernel's cache emulator `seccomp_is_const_allow` does.
fn exec(prog: &[sock_filter], data: &libc::seccomp_data, const_only: bool) -> Option<(u32, usize)> {
    let bytes = data_bytes(data);
    let (mut acc, mut pc, mut steps) = (0u32, 0usize, 0usize);
    loop {
        let ins = prog.get(pc)?;
        steps += 1;
        let code = u32::from(ins.code);
        match code & 0x07 {
            0x00 => {
                if code != BPF_LD_ABS {
                    return None;
                }
                let off = usize::try_from(ins.k).ok()?;
                if const_only && off != 0 && off != 4 {
                    return None;
                }
                let word = bytes.get(off..off.checked_add(4)?)?;
                acc = u32::from_ne_bytes(word.try_into().ok()?);
            }
            0x04 => {
                if code != libc::BPF_ALU | libc::BPF_AND | libc::BPF_K {
                    return None;
                }
                acc &= ins.k;
            }
            0x05 => {
                if code & 0x08 != libc::BPF_K {
                    return None;
                }
                let taken = match code & 0xf0 {
                    0x00 => {
                        pc = pc
                            .checked_add(1)?
                            .checked_add(usize::try_from(ins.k).ok()?)?;
                        continue;
                    }
                    0x10 => acc == ins.k,
                    0x20 => acc > ins.k,
                    0x30 => acc >= ins.k,
                    0x40 => acc & ins.k != 0,
                    _ => return None,
                };
                pc += 1 + usize::from(if taken { ins.jt } else { ins.jf });
                continue;
            }
            0x06 => {
                if code != libc::BPF_RET | libc::BPF_K {
                    return None;
                }
                return Some((ins.k, steps));
            }
            _ => return None,
        }
        pc += 1;
    }
}

/// A `seccomp_data` for the tests.
#[cfg(test)]
pub(super) fn data(arch: u32, nr: u32, args: [u64; 6]) -> libc::seccomp_data {
    libc::seccomp_data {
        nr: nr as i32,
        arch,
        instruction_pointer: 0,
        args,
    }
}

/// [`run`] for the tests, which only run programs the interpreter knows.
#[cfg(test)]
pub(super) fn run_test(prog: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    run(prog, &data(arch, nr, args)).expect("a program the interpreter runs")
}

/// [`exec`] for the tests.
#[cfg(test)]
pub(super) fn trace(
    prog: &[sock_filter],
    arch: u32,
    nr: u32,
    args: [u64; 6],
    const_only: bool,
) -> Option<(u32, usize)> {
    exec(prog, &data(arch, nr, args), const_only)
}
