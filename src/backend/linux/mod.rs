//! The Linux backend.
//!
//! Everything here that builds kernel objects runs in the parent, before `clone`: the
//! Landlock ruleset fd ([`landlock`]) and the seccomp BPF program ([`seccomp`]). The child
//! only applies them, in this order and last before `execve`:
//! `prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self(fd, 0)`,
//! `seccomp(SECCOMP_SET_MODE_FILTER, 0, &fprog)`, each through a `stockade_sys::linux`
//! wrapper that neither allocates nor touches `errno`.

pub mod landlock;
pub mod seccomp;
