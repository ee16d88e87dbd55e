//! A classic-BPF interpreter for the unit tests: runs a generated program on a
//! `seccomp_data` as the kernel would, and optionally as the kernel's install-time cache
//! emulator does.

use libc::sock_filter;

use super::asm::BPF_LD_ABS;

/// Runs the program on a `seccomp_data` the way the kernel's interpreter would, for the
/// subset of classic BPF that the generator emits.
pub(super) fn run(prog: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    trace(prog, arch, nr, args, false).unwrap().0
}

/// Runs the program like [`run`], returning the action and the number of instructions
/// executed; with `const_only`, gives up (None) on a load of anything but `nr` or `arch`,
/// as the kernel's cache emulator `seccomp_is_const_allow` does.
pub(super) fn trace(
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
