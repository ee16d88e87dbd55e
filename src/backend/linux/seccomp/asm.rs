//! A tiny classic-BPF assembler: the opcodes the generator uses, forward jumps to labels,
//! and their resolution to 8-bit relative offsets. Knows nothing about seccomp.

use libc::sock_filter;

use crate::error::SeccompBuildError;

pub(super) const BPF_LD_ABS: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
pub(super) const BPF_AND_K: u32 = libc::BPF_ALU | libc::BPF_AND | libc::BPF_K;
pub(super) const BPF_RET_K: u32 = libc::BPF_RET | libc::BPF_K;
pub(super) const BPF_JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
pub(super) const BPF_JGT: u32 = libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K;
pub(super) const BPF_JGE: u32 = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
pub(super) const BPF_JSET: u32 = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;

/// A jump destination: the next instruction, or a label bound later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    Next,
    Label(usize),
}
pub(super) use Target::Next;

/// A tiny forward-only assembler: jumps name labels, resolved to the 8-bit relative offsets
/// of classic BPF by [`Asm::finish`].
#[derive(Default)]
pub(super) struct Asm {
    code: Vec<sock_filter>,
    /// Instruction index of each label, once bound.
    labels: Vec<Option<usize>>,
    /// (instruction index, true target, false target) of every conditional jump.
    jumps: Vec<(usize, Target, Target)>,
}

impl Asm {
    pub(super) fn label(&mut self) -> Target {
        self.labels.push(None);
        Target::Label(self.labels.len() - 1)
    }

    pub(super) fn bind(&mut self, label: Target) {
        if let Target::Label(l) = label {
            self.labels[l] = Some(self.code.len());
        }
    }

    pub(super) fn stmt(&mut self, code: u32, k: u32) {
        self.code.push(insn(code, k));
    }

    pub(super) fn jump(&mut self, code: u32, k: u32, jt: Target, jf: Target) {
        self.jumps.push((self.code.len(), jt, jf));
        self.code.push(insn(code, k));
    }

    pub(super) fn finish(mut self) -> Result<Vec<sock_filter>, SeccompBuildError> {
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
