//! The floor of a cold spawn, and what an init costs on it (issue 29's time targets).
//!
//! `bwrap`'s layout (the one `bench_all` gives `bwrap`: `/usr`, `/etc`, `/opt` read-only,
//! the merged-usr symlinks, a private `/tmp`, a minimal `/dev` with its own devpts and
//! `/dev/shm`, a fresh `/proc`, the workspace read-write; new user, mount, PID, IPC and
//! UTS namespaces) built with raw system calls and nothing else: no Landlock, no seccomp,
//! no capability drop, no report pipe, no checks. Four rows, interleaved:
//!
//! | row | what |
//! | --- | --- |
//! | floor | the setup child execs `/bin/true` itself: the program is PID 1 |
//! | floor + init | the setup child execs a minimal static init (a subreaper that forks, execs `/bin/true` in the child and waits): what `DESIGN.md` asks for, PID 1 neither the program nor a fork of the host |
//! | stockade full | `Sandbox::command("/bin/true").status()`, full layout, same workspace |
//! | bwrap full | `bwrap` with the layout above (`examples/shared/bwrap.rs`, as `bench_all`'s) |
//!
//! The setup child is a `CLONE_VM | CLONE_VFORK` child, as stockade's: it shares this
//! process's memory and makes its system calls through `stockade_sys`, which touch no
//! `errno`. The init is compiled from C with `cc -O2 -static` (glibc's static library,
//! `libc6-dev`); without `cc` that row is left out.
//!
//! ```text
//! cargo run --release --example cold_floor [-- ITERATIONS]
//! ```
//!
//! Needs user namespaces (root or not); `bwrap` at `/usr/bin/bwrap` for its row.

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("cold_floor measures the Linux backend only");
}

#[cfg(target_os = "linux")]
#[path = "shared/bwrap.rs"]
mod bwrap;

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{CString, c_int, c_void};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::process::Command as StdCommand;
    use std::time::{Duration, Instant};

    use stockade::{Policy, Sandbox};
    use stockade_sys::linux::{self as sys, CWD};

    use super::bwrap::BWRAP;

    /// The init of the second row: a subreaper that forks the program's process and
    /// waits for every child, as stockade's init does (without its records, signal
    /// forwarding and clearing).
    const INIT_C: &str = r#"#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t p = fork();
    if (p == 0) { setsid(); execv(argv[1], argv + 1); _exit(127); }
    int st, code = 125;
    pid_t w;
    while ((w = wait(&st)) > 0) if (w == p) code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return code;
}
"#;

    /// Everything the setup child reads, made before `clone`.
    struct Plan {
        uid_map: Vec<u8>,
        stage: CString,
        /// Each read-only root: its path, and the same relative to the stage.
        ro: Vec<(CString, CString)>,
        dev_nodes: Vec<(CString, CString)>,
        ws_dirs: Vec<CString>,
        ws_src: CString,
        ws_dst: CString,
        ws: CString,
        /// The program's path and argv (NULL-terminated pointers into `argv_strs`).
        argv_strs: Vec<CString>,
        argv: Vec<*const libc::c_char>,
        envp: Vec<*const libc::c_char>,
    }

    type R = Result<(), stockade_sys::Errno>;

    fn write_file(path: &std::ffi::CStr, data: &[u8]) -> R {
        let fd = sys::openat(CWD, path, libc::O_WRONLY | libc::O_CLOEXEC, 0)?;
        let r = sys::write(fd.as_fd(), data);
        let _ = sys::close(fd);
        r.map(drop)
    }

    fn mkdir(path: &std::ffi::CStr) -> R {
        match sys::mkdirat(CWD, path, 0o755) {
            Err(stockade_sys::Errno(libc::EEXIST)) => Ok(()),
            r => r,
        }
    }

    fn bind(src: &std::ffi::CStr, dst: &std::ffi::CStr, ro: bool) -> R {
        sys::mount(Some(src), dst, None, libc::MS_BIND | libc::MS_REC, None)?;
        if ro {
            let flags = libc::MS_BIND
                | libc::MS_REMOUNT
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV;
            sys::mount(None, dst, None, flags, None)?;
        }
        Ok(())
    }

    fn tmpfs(dst: &std::ffi::CStr, flags: libc::c_ulong, data: Option<&std::ffi::CStr>) -> R {
        mkdir(dst)?;
        sys::mount(Some(c"tmpfs"), dst, Some(c"tmpfs"), flags, data)
    }

    /// The setup child: the layout, then the exec. Shares the parent's memory until the
    /// exec, so it only reads `plan` and calls `stockade_sys`.
    fn setup(plan: &Plan) -> R {
        sys::prctl_set_pdeathsig(libc::SIGKILL)?;
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &plan.uid_map)?;
        write_file(c"/proc/self/gid_map", &plan.uid_map)?;
        sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
        sys::mount(
            Some(c"tmpfs"),
            &plan.stage,
            Some(c"tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(c"mode=0755"),
        )?;
        sys::chdir(&plan.stage)?;
        for (abs, rel) in &plan.ro {
            mkdir(rel)?;
            bind(abs, rel, true)?;
        }
        for (l, t) in [
            (c"bin", c"usr/bin"),
            (c"sbin", c"usr/sbin"),
            (c"lib", c"usr/lib"),
            (c"lib64", c"usr/lib64"),
        ] {
            sys::symlinkat(t, CWD, l)?;
        }
        tmpfs(c"tmp", libc::MS_NOSUID | libc::MS_NODEV, None)?;
        tmpfs(c"dev", libc::MS_NOSUID, Some(c"mode=0755"))?;
        for (src, dst) in &plan.dev_nodes {
            sys::mknodat(CWD, dst, libc::S_IFREG | 0o644, 0)?;
            bind(src, dst, false)?;
        }
        mkdir(c"dev/pts")?;
        sys::mount(
            Some(c"devpts"),
            c"dev/pts",
            Some(c"devpts"),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            Some(c"newinstance,ptmxmode=0666,mode=620"),
        )?;
        sys::symlinkat(c"pts/ptmx", CWD, c"dev/ptmx")?;
        tmpfs(c"dev/shm", libc::MS_NOSUID | libc::MS_NODEV, None)?;
        for (t, l) in [
            (c"/proc/self/fd", c"dev/fd"),
            (c"/proc/self/fd/0", c"dev/stdin"),
            (c"/proc/self/fd/1", c"dev/stdout"),
            (c"/proc/self/fd/2", c"dev/stderr"),
        ] {
            sys::symlinkat(t, CWD, l)?;
        }
        mkdir(c"proc")?;
        sys::mount(
            Some(c"proc"),
            c"proc",
            Some(c"proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        )?;
        for d in &plan.ws_dirs {
            mkdir(d)?;
        }
        bind(&plan.ws_src, &plan.ws_dst, false)?;
        mkdir(c"oldroot")?;
        sys::pivot_root(c".", c"oldroot")?;
        sys::chdir(c"/")?;
        sys::umount2(c"/oldroot", libc::MNT_DETACH)?;
        sys::mount(
            None,
            c"/",
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            None,
        )?;
        sys::setsid()?;
        sys::chdir(&plan.ws)?;
        let Some(path) = plan.argv_strs.first() else {
            return Err(stockade_sys::Errno(libc::EINVAL));
        };
        // SAFETY: `argv` and `envp` are NULL-terminated arrays of pointers to the NUL-
        // terminated strings `plan` owns, alive until this child has exec'd.
        Err(unsafe { sys::execve(path, plan.argv.as_ptr(), plan.envp.as_ptr()) })
    }

    extern "C" fn child(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `Plan` the parent passed to `clone`; the parent is
        // suspended (`CLONE_VFORK`) and keeps it alive until this child has exec'd or
        // ended, and nothing writes it meanwhile.
        let plan = unsafe { &*(arg as *const Plan) };
        // The errno as the exit status (at most 99, which the parent reports).
        match setup(plan) {
            Err(e) => sys::exit_group(e.0.clamp(1, 99)),
            Ok(()) => sys::exit_group(99),
        }
    }

    /// One spawn + wait of the plan's program through the floor.
    fn floor_run(plan: &Plan, stack: &mut [u8]) {
        let flags = libc::CLONE_VM
            | libc::CLONE_VFORK
            | libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS
            | libc::SIGCHLD;
        // The top of the stack, 16-byte aligned (the stack grows down).
        let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
        // SAFETY: `child` only reads the plan and makes raw system calls (see `setup`);
        // `top` is the aligned top of `stack`, which nothing else uses until the child
        // has exec'd or ended, when `clone` returns here (`CLONE_VFORK`); the plan
        // outlives the call.
        let pid = unsafe {
            libc::clone(
                child,
                top as *mut c_void,
                flags,
                plan as *const Plan as *mut c_void,
            )
        };
        assert!(pid > 0, "clone: {}", std::io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: `pid` is this process's child and `status` a live int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the floor's run ended with status {status:#x} (an exit status under 100: the errno of a failed setup step)"
        );
    }

    fn cstr(p: &Path) -> CString {
        CString::new(p.as_os_str().as_bytes()).expect("no NUL in a path")
    }

    fn plan(stage: &Path, ws: &Path, argv: &[CString]) -> Plan {
        // SAFETY: `getuid` cannot fail.
        let uid = unsafe { libc::getuid() };
        // SAFETY: `getgid` cannot fail.
        let gid = unsafe { libc::getgid() };
        assert_eq!(
            uid, gid,
            "the floor maps one id for both: run it with uid = gid"
        );
        let mut ws_dirs = Vec::new();
        let rel = ws.strip_prefix("/").expect("an absolute workspace");
        let mut at = std::path::PathBuf::new();
        for c in rel.components() {
            at.push(c);
            ws_dirs.push(cstr(&at));
        }
        let ws_dst = ws_dirs.last().expect("a workspace below /").clone();
        let argv_strs = argv.to_vec();
        let mut argv_ptrs: Vec<*const libc::c_char> =
            argv_strs.iter().map(|s| s.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        Plan {
            uid_map: format!("0 {uid} 1").into_bytes(),
            stage: cstr(stage),
            ro: ["usr", "etc", "opt"]
                .iter()
                .map(|d| {
                    (
                        CString::new(format!("/{d}")).expect("no NUL"),
                        CString::new(*d).expect("no NUL"),
                    )
                })
                .collect(),
            dev_nodes: ["null", "zero", "full", "random", "urandom", "tty"]
                .iter()
                .map(|n| {
                    (
                        CString::new(format!("/dev/{n}")).expect("no NUL"),
                        CString::new(format!("dev/{n}")).expect("no NUL"),
                    )
                })
                .collect(),
            ws_dirs,
            ws_dst,
            ws_src: cstr(ws),
            ws: cstr(ws),
            argv_strs,
            argv: argv_ptrs,
            envp: vec![c"PATH=/usr/bin:/bin".as_ptr(), std::ptr::null()],
        }
    }

    fn median(v: &mut [Duration]) -> Duration {
        v.sort();
        v[v.len() / 2]
    }

    fn loadavg() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    }

    type Run<'a> = Box<dyn FnMut() + 'a>;

    pub fn main() {
        let iters: usize = std::env::args()
            .nth(1)
            .map(|a| a.parse().expect("ITERATIONS is a number"))
            .unwrap_or(200)
            .max(1);
        let dir = tempfile::Builder::new()
            .prefix("stockade-cold-floor-")
            .tempdir_in("/var/tmp")
            .expect("a directory under /var/tmp");
        let ws = dir.path().join("ws");
        let stage = dir.path().join("stage");
        std::fs::create_dir(&ws).expect("the workspace");
        std::fs::create_dir(&stage).expect("the stage");

        // The init, compiled into the workspace, where the sandbox sees it.
        let init = ws.join("floor-init");
        let src = dir.path().join("floor-init.c");
        std::fs::write(&src, INIT_C).expect("the init's source");
        let built = StdCommand::new("cc")
            .args(["-O2", "-static", "-o"])
            .arg(&init)
            .arg(&src)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !built {
            println!("(no `cc` with a static libc: the `floor + init` row is left out)");
        }

        let bare = plan(&stage, &ws, &[c"/bin/true".to_owned()]);
        let with_init = plan(&stage, &ws, &[cstr(&init), c"/bin/true".to_owned()]);
        let mut stack = vec![0u8; 256 << 10];
        let sandbox = Sandbox::new(Policy::with_workspace(&ws)).expect("create the sandbox");

        let stack = std::cell::RefCell::new(&mut stack[..]);
        let mut rows: Vec<(&str, Run)> = vec![(
            "floor (the program is PID 1)",
            Box::new(|| floor_run(&bare, &mut stack.borrow_mut())),
        )];
        if built {
            rows.push((
                "floor + init (exec'd, forks the program)",
                Box::new(|| floor_run(&with_init, &mut stack.borrow_mut())),
            ));
        }
        rows.push((
            "stockade full (library spawn + wait)",
            Box::new(|| {
                let s = sandbox.command("/bin/true").status().expect("spawn");
                assert!(s.success(), "{s}");
            }),
        ));
        let bwrap = Path::new(BWRAP).exists();
        if bwrap {
            let args = super::bwrap::args(&ws, &[], false, &["/bin/true"]);
            rows.push((
                "bwrap full",
                Box::new(move || {
                    let s = StdCommand::new(BWRAP).args(&args).status().expect("bwrap");
                    assert!(s.success(), "{s}");
                }),
            ));
        } else {
            println!("(no {BWRAP}: the ratios are left out)");
        }

        for (_, f) in rows.iter_mut() {
            for _ in 0..3 {
                f();
            }
        }
        let mut samples = vec![Vec::with_capacity(iters); rows.len()];
        for _ in 0..iters {
            for (i, (_, f)) in rows.iter_mut().enumerate() {
                let t = Instant::now();
                f();
                samples[i].push(t.elapsed());
            }
        }
        let med: Vec<Duration> = samples.iter_mut().map(|s| median(s)).collect();
        let b = bwrap.then(|| med[med.len() - 1]);
        println!(
            "\n## The floor of a cold spawn of /bin/true ({iters} interleaved iterations, uid {}, load {})\n",
            // SAFETY: `getuid` cannot fail.
            unsafe { libc::getuid() },
            loadavg()
        );
        println!("| spawn + wait | median | × bwrap |");
        println!("| --- | ---: | ---: |");
        for ((name, _), m) in rows.iter().zip(&med) {
            let r = b.map_or("-".into(), |b| {
                format!("{:.2}", m.as_secs_f64() / b.as_secs_f64())
            });
            println!("| {name} | {:.3} ms | {r} |", m.as_secs_f64() * 1e3);
        }
    }
}
