//! What the seccomp filter costs per system call.
//!
//! Times 10M `getppid` calls (and 10M `ioctl(-1, TIOCGWINSZ)`, whose number the filter
//! inspects arguments for) without the filter, then in a forked child with stockade's
//! filter installed, and in a forked child with a one-instruction "allow everything" filter.
//! `getppid` takes the kernel's per-syscall "always allow" cache, so with stockade's filter it
//! should cost what it costs under the trivial filter (the price of seccomp's syscall-entry
//! slow path, not of the program); `ioctl` runs the BPF program on every call. Each figure
//! is the best of three rounds, the machine being shared.
//!
//! ```text
//! cargo run --release --example seccomp_tax
//! ```

#[cfg(target_os = "linux")]
fn main() {
    use std::io::Write;
    use std::time::Instant;

    use stockade::backend::linux::seccomp::{self, FilterOptions};
    use stockade_sys::linux as sys;

    const N: u32 = 10_000_000;

    /// ns per call of `nr` with `args`, over `N` calls, best of three rounds.
    fn time(nr: libc::c_long, args: [usize; 6]) -> f64 {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let start = Instant::now();
            for _ in 0..N {
                // SAFETY: getppid takes no arguments; ioctl on fd -1 fails with EBADF before
                // it reads its pointer argument (which is NULL anyway).
                let r = unsafe { sys::syscall6(nr, std::hint::black_box(args)) };
                std::hint::black_box(r);
            }
            best = best.min(start.elapsed().as_nanos() as f64 / f64::from(N));
        }
        best
    }

    /// Forks; the child installs `fprog`, measures, and exits.
    fn measure_filtered(label: &str, fprog: &libc::sock_fprog) {
        let _ = std::io::stdout().flush();
        // SAFETY: this example is single-threaded; the child installs the filter, measures
        // and exits without returning from main.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).expect("no_new_privs");
            sys::seccomp_set_mode_filter(0, fprog).expect("install the filter");
            measure(label);
            sys::exit_group(0);
        }
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer; `pid` is our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }

    fn measure(label: &str) {
        let getppid = time(libc::SYS_getppid, [0; 6]);
        let ioctl = time(
            libc::SYS_ioctl,
            [usize::MAX, libc::TIOCGWINSZ as usize, 0, 0, 0, 0],
        );
        println!(
            "{label:>16}: getppid {getppid:6.1} ns/call   ioctl(-1, TIOCGWINSZ) {ioctl:6.1} ns/call"
        );
        let _ = std::io::stdout().flush();
    }

    let filter = seccomp::build(&FilterOptions::default()).expect("build the filter");
    println!(
        "filter: {} BPF instructions, {N} calls per figure",
        filter.instructions().len()
    );
    measure("without filter");

    let allow_all = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let trivial = libc::sock_fprog {
        len: 1,
        filter: allow_all.as_ptr().cast_mut(),
    };
    measure_filtered("allow-all filter", &trivial);
    measure_filtered("stockade filter", &filter.as_fprog());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("seccomp is Linux-only");
}
