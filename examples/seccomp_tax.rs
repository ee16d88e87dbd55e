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
//! Then the tax on a real, open-heavy workload (by default `find /usr -type f -print0 |
//! xargs -0 cat > /dev/null`, page cache warm): the workload's own CPU time (user + sys of
//! every process it starts, from `wait4`) without a filter, under the allow-all filter,
//! and under stockade's. stockade's filter reads the arguments of `openat` (its set-id
//! rule: `O_CREAT` or `O_TMPFILE` with `S_ISUID`/`S_ISGID` in the mode fails), so the
//! kernel cannot cache `openat` as always allowed and runs the program on every open; the
//! allow-all filter is the floor any filter pays. Rows interleave (A B C A B C …) and the
//! figures are medians.
//!
//! ```text
//! cargo run --release --example seccomp_tax
//! cargo run --release --example seccomp_tax -- --workload-only --rounds 9
//! cargo run --release --example seccomp_tax -- --workload 'find /usr/share -type f | xargs cat'
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

    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let workload = value("--workload").unwrap_or_else(|| {
        "find /usr -type f -print0 | xargs -0 cat > /dev/null 2>&1; true".to_string()
    });
    let rounds: usize = value("--rounds").map_or(5, |r| r.parse().expect("--rounds N"));
    let workload_only = args.iter().any(|a| a == "--workload-only");

    let filter = seccomp::build(&FilterOptions::default()).expect("build the filter");
    let allow_all_program = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    if workload_only {
        workload_tax(&workload, rounds, &allow_all_program, filter.instructions());
        return;
    }
    println!(
        "filter: {} BPF instructions, {N} calls per figure",
        filter.instructions().len()
    );
    measure("without filter");

    let trivial: &[libc::sock_filter] = &allow_all_program;
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
    workload_tax(&workload, rounds, trivial, filter.instructions());
}

/// The CPU time (user + sys, seconds) and wall time of `sh -c workload` in a forked child
/// that first installs `program` (none: no filter); the workload's processes inherit it.
#[cfg(target_os = "linux")]
fn run_workload(workload: &str, program: Option<&[libc::sock_filter]>) -> (f64, f64) {
    use std::ffi::CString;
    use std::time::Instant;

    use stockade_sys::linux as sys;

    let sh = c"/bin/sh";
    let script = CString::new(workload).expect("a workload without NUL");
    let argv = [
        sh.as_ptr(),
        c"-c".as_ptr(),
        script.as_ptr(),
        std::ptr::null(),
    ];
    let start = Instant::now();
    // SAFETY: this example is single-threaded; the child installs the filter and execs
    // (or exits) without returning from this function.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        if let Some(program) = program {
            sys::prctl_set_no_new_privs().expect("no_new_privs");
            // SAFETY: as in `measure_filtered`; the workload runs under the filter.
            unsafe { sys::seccomp_set_mode_filter(0, program) }.expect("install the filter");
        }
        // SAFETY: `argv` is a NULL-terminated array of pointers to C strings alive here.
        unsafe { libc::execv(sh.as_ptr(), argv.as_ptr()) };
        sys::exit_group(127);
    }
    let mut status = 0;
    // SAFETY: `libc::rusage` is plain integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid out-pointers; `pid` is our child.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    let wall = start.elapsed().as_secs_f64();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the workload failed: {status:#x}"
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime) + secs(usage.ru_stime), wall)
}

/// The workload's tax under each filter: interleaved rounds, medians, printed.
#[cfg(target_os = "linux")]
fn workload_tax(
    workload: &str,
    rounds: usize,
    allow_all: &[libc::sock_filter],
    stockade: &[libc::sock_filter],
) {
    let rows: [(&str, Option<&[libc::sock_filter]>); 3] = [
        ("without filter", None),
        ("allow-all filter", Some(allow_all)),
        ("stockade filter", Some(stockade)),
    ];
    println!("workload: {workload}");
    // One run first, so that every row finds the page cache as warm.
    let _ = run_workload(workload, None);
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    for round in 0..rounds {
        // Rotate the order, so that no row always runs right after another.
        for k in 0..rows.len() {
            let i = (k + round) % rows.len();
            let (c, w) = run_workload(workload, rows[i].1);
            cpu[i].push(c);
            wall[i].push(w);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let cpu: Vec<f64> = cpu.iter_mut().map(median).collect();
    let wall: Vec<f64> = wall.iter_mut().map(median).collect();
    println!("median of {rounds} interleaved rounds:");
    for (i, (label, _)) in rows.iter().enumerate() {
        println!(
            "{label:>16}: CPU {:7.3} s ({:+5.1} % vs none, {:+5.1} % vs allow-all)   wall {:7.3} s",
            cpu[i],
            (cpu[i] / cpu[0] - 1.0) * 100.0,
            (cpu[i] / cpu[1] - 1.0) * 100.0,
            wall[i],
        );
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
