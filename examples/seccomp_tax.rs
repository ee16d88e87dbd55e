//! What the seccomp filter costs per system call.
//!
//! Times 10M `getppid` calls (and 10M `ioctl(-1, TIOCGWINSZ)` and 10M `openat` of a missing
//! path, whose arguments the filter inspects) without the filter, then in a forked child with
//! stockade's filter installed, and in a forked child with a one-instruction "allow
//! everything" filter. `getppid` takes the kernel's per-syscall "always allow" cache, so with
//! stockade's filter it should cost what it costs under the trivial filter (the price of
//! seccomp's syscall-entry slow path, not of the program); `ioctl` and `openat` run the BPF
//! program on every call. Each figure is the best of three rounds, the machine being shared.
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
                // it reads its pointer argument (which is NULL anyway); openat reads a
                // NUL-terminated static string and fails with ENOENT.
                let r = unsafe { sys::syscall6(nr, std::hint::black_box(args)) };
                std::hint::black_box(r);
            }
            best = best.min(start.elapsed().as_nanos() as f64 / f64::from(N));
        }
        best
    }

    /// Forks; the child installs `program`, measures, and exits.
    fn measure_filtered(label: &str, program: &[libc::sock_filter]) {
        let _ = std::io::stdout().flush();
        // SAFETY: this example is single-threaded; the child installs the filter, measures
        // and exits without returning from main.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            sys::prctl_set_no_new_privs().expect("no_new_privs");
            // SAFETY: the programs measured here answer with ALLOW, KILL_PROCESS or ERRNO of
            // EPERM or ENOSYS; this child then only reads the clock and exits.
            unsafe { sys::seccomp_set_mode_filter(0, program) }.expect("install the filter");
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
        let missing = c"/nonexistent-stockade-seccomp-tax";
        let openat = time(
            libc::SYS_openat,
            [
                libc::AT_FDCWD as usize,
                missing.as_ptr() as usize,
                (libc::O_RDONLY | libc::O_CLOEXEC) as usize,
                0,
                0,
                0,
            ],
        );
        println!(
            "{label:>16}: getppid {getppid:6.1} ns/call   ioctl(-1, TIOCGWINSZ) {ioctl:6.1} ns/call   openat(missing) {openat:6.1} ns/call"
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
    let trivial: &[libc::sock_filter] = &allow_all;
    measure_filtered("allow-all filter", trivial);
    measure_filtered("stockade filter", filter.instructions());
    let layer2 = seccomp::build(&FilterOptions {
        host_namespaces: true,
        ..FilterOptions::default()
    })
    .expect("build the layer 2 filter");
    println!(
        "layer 2 filter: {} BPF instructions",
        layer2.instructions().len()
    );
    measure_filtered("layer 2 filter", layer2.instructions());

    // What installing the program costs each sandboxed child (the kernel's copy, JIT and
    // per-syscall cache emulation): part of every spawn. Interleaved, medians.
    let programs = [
        ("allow-all filter", trivial),
        ("stockade filter", filter.instructions()),
        ("layer 2 filter", layer2.instructions()),
    ];
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); programs.len()];
    for _ in 0..INSTALLS {
        for (i, (_, program)) in programs.iter().enumerate() {
            samples[i].push(install_ns(program));
        }
    }
    println!("install cost, median of {INSTALLS} forked children:");
    for ((label, _), s) in programs.iter().zip(&mut samples) {
        s.sort_unstable();
        let median = s[s.len() / 2];
        println!("{label:>16}: {:6.1} µs", median as f64 / 1e3);
    }
}

#[cfg(target_os = "linux")]
const INSTALLS: usize = 400;

/// Forks; the child times `seccomp(SECCOMP_SET_MODE_FILTER, program)` and sends the
/// nanoseconds back through a pipe.
#[cfg(target_os = "linux")]
fn install_ns(program: &[libc::sock_filter]) -> u64 {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use std::time::Instant;

    use stockade_sys::linux as sys;

    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2");
    // SAFETY: this example is single-threaded; the child makes system calls only (the
    // clock is read through the vDSO) and exits without returning from main.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let _ = sys::prctl_set_no_new_privs();
        let t = Instant::now();
        // SAFETY: as in `measure_filtered`: no action fakes a success, and this child only
        // reports the time and exits.
        let ok = unsafe { sys::seccomp_set_mode_filter(0, program) }.is_ok();
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: the pipe's write end stays open in this child until it exits.
        let tx = unsafe { stockade_sys::BorrowedFd::borrow_raw(fds[1]) };
        let _ = sys::write(tx, &ns.to_ne_bytes());
        sys::exit_group(i32::from(!ok));
    }
    // SAFETY: the write end is ours and open; closing it lets the read see EOF.
    unsafe { libc::close(fds[1]) };
    // SAFETY: the read end is ours, open, and owned by the File from here on.
    let mut rd = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let mut buf = [0u8; 8];
    rd.read_exact(&mut buf).expect("the child's figure");
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    u64::from_ne_bytes(buf)
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("seccomp is Linux-only");
}
