//! The crate root of the init's executable image (see `build.rs`): the entry point and the
//! panic handler around [`run::main`]. Built with `core` only, `no_std`, `no_main`,
//! statically linked; nothing here allocates (there is no allocator).
#![no_std]
#![no_main]
// Parts of the shared modules serve only the host.
#![allow(dead_code)]

#[path = "src/protocol.rs"]
mod protocol;
#[path = "src/run.rs"]
mod run;
#[path = "src/session.rs"]
mod session;
#[path = "src/program.rs"]
mod program;
#[path = "src/sys.rs"]
mod sys;

// The kernel starts the process at `_start` with the stack pointer on `argc`, followed by
// the argv pointers, a NULL, the envp pointers, a NULL and the auxiliary vector. The entry
// hands that address to `entry` with the stack aligned as the C ABI wants, and no frame
// above it.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".globl _start",
    ".type _start,@function",
    "_start:",
    "xor ebp, ebp",
    "mov rdi, rsp",
    "and rsp, -16",
    "call {entry}",
    "ud2",
    entry = sym entry,
);

#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".globl _start",
    ".type _start,%function",
    "_start:",
    "mov x29, #0",
    "mov x30, #0",
    "mov x0, sp",
    "bl {entry}",
    "brk #0x1",
    entry = sym entry,
);

/// Reads `argc` and `argv` from the initial stack at `sp` and runs the init.
///
/// # Safety
///
/// `sp` is the process's initial stack pointer as the kernel set it up: `_start` is the
/// only caller.
unsafe extern "C" fn entry(sp: *const usize) -> ! {
    // SAFETY: `sp` is the initial stack pointer (the caller's guarantee), where the kernel
    // stored `argc`.
    let argc = unsafe { *sp };
    let argv = sp.wrapping_add(1).cast::<*const u8>();
    // SAFETY: the kernel lays out `argc` argument pointers and a NULL, then the
    // environment's pointers and a NULL, all pointing to strings on this stack, which
    // lives as long as the process.
    let args = unsafe { run::Args::new(argc, argv) };
    run::main(&args)
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    sys::exit_group(run::INIT_FAILED)
}

// The memory and string functions the compiler may call (`core` expects them from a C
// library, and there is none). Volatile accesses keep the optimizer from recognizing these
// loops as the very functions they implement and calling them recursively. Sizes are a
// few hundred bytes at most, so speed does not matter.

/// `memset(3)`.
///
/// # Safety
///
/// `dst` must be valid for `n` bytes of writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    for i in 0..n {
        // SAFETY: `i < n` and the caller guarantees `dst[..n]` is writable.
        unsafe { dst.wrapping_add(i).write_volatile(c as u8) };
    }
    dst
}

/// `memcpy(3)`.
///
/// # Safety
///
/// `src` must be valid for `n` bytes of reads, `dst` for `n` bytes of writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller's guarantees are `memmove`'s, which also allows overlap.
    unsafe { memmove(dst, src, n) }
}

/// `memmove(3)`.
///
/// # Safety
///
/// `src` must be valid for `n` bytes of reads, `dst` for `n` bytes of writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    let forward = (dst as usize) < (src as usize);
    for k in 0..n {
        let i = if forward { k } else { n - 1 - k };
        // SAFETY: `i < n` and the caller guarantees `src[..n]` is readable.
        let b = unsafe { src.wrapping_add(i).read_volatile() };
        // SAFETY: `i < n` and the caller guarantees `dst[..n]` is writable; copying in
        // the direction away from the overlap reads each byte before it is overwritten.
        unsafe { dst.wrapping_add(i).write_volatile(b) };
    }
    dst
}

/// `memcmp(3)`.
///
/// # Safety
///
/// `a` and `b` must be valid for `n` bytes of reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: `i < n` and the caller guarantees `a[..n]` is readable.
        let x = unsafe { a.wrapping_add(i).read_volatile() };
        // SAFETY: `i < n` and the caller guarantees `b[..n]` is readable.
        let y = unsafe { b.wrapping_add(i).read_volatile() };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

/// `bcmp(3)`: zero when equal.
///
/// # Safety
///
/// `a` and `b` must be valid for `n` bytes of reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: the caller's guarantees are `memcmp`'s.
    unsafe { memcmp(a, b, n) }
}

/// `strlen(3)`.
///
/// # Safety
///
/// `s` must point to a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn strlen(s: *const u8) -> usize {
    let mut n = 0;
    // SAFETY: the caller guarantees a NUL at or after `s`; every byte before it is readable.
    while unsafe { s.wrapping_add(n).read_volatile() } != 0 {
        n += 1;
    }
    n
}
