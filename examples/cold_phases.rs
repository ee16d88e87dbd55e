//! Where one cold spawn's time goes, phase by phase, from the kernel's own clock.
//!
//! Runs `ITERATIONS` spawn + wait of `PROGRAM` (default `/bin/true`) through one full-layout
//! `Sandbox` under `perf record` with a handful of tracepoints (the process events and the
//! entry and exit of the few system calls that bound the phases), then prints the median
//! of each phase. A `PROGRAM` outside the system directories (a static test program, say)
//! is copied into the workspace and run from there. Tracepoints cost about a microsecond per event and fire some twenty
//! times per spawn, so the phases keep their sizes, unlike under `strace` or `perf trace`
//! (about 10 µs per system call). Needs `perf` and the right to trace (root).
//!
//! ```text
//! cargo run --release --example cold_phases [-- ITERATIONS [PROGRAM]]
//! ```
//!
//! The phases, in order (each from the first event to the next):
//!
//! | phase | from | to |
//! | --- | --- | --- |
//! | namespaces | the host's `clone` | the setup child's first `pivot_root` (into its stage) |
//! | new root | that `pivot_root` | the second (into the new root) |
//! | old root | the second `pivot_root` | its `umount2` of the old root returned |
//! | walls | that return | `seccomp` entered (root read-only, session, capabilities, Landlock) |
//! | seccomp | `seccomp` entered | `seccomp` returned (the filter's load) |
//! | init | `seccomp` returned | the init's exec |
//! | start | the init's exec | the program's exec (the init's setup and fork, the program's process's session, domain and terminal) |
//! | program | the program's exec | the program's exit |
//! | record | the program's exit | the init's `exit_group` |
//! | teardown | the init's `exit_group` | the host's wait for it returned |
//! | host | that return | the next spawn's `clone` (the host's own work between spawns) |

#[cfg(target_os = "linux")]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--loop") {
        let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200);
        spawn_loop(n, &args[3], &args[4]);
        return;
    }
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(300);
    let program = args.get(2).cloned().unwrap_or_else(|| "/bin/true".into());
    let dir = tempfile::Builder::new()
        .prefix("stockade-cold-phases-")
        .tempdir_in("/var/tmp")
        .expect("a workspace under /var/tmp");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("the workspace");
    // A program from elsewhere (a static test program, say) is copied into the workspace,
    // where the sandbox sees it.
    let program = if ["/usr/", "/bin/", "/sbin/", "/lib", "/etc/", "/opt/"]
        .iter()
        .any(|p| program.starts_with(p))
    {
        program
    } else {
        let name = std::path::Path::new(&program)
            .file_name()
            .expect("PROGRAM names a file");
        let copy = ws.join(name);
        std::fs::copy(&program, &copy).expect("copy PROGRAM into the workspace");
        copy.display().to_string()
    };
    let data = dir.path().join("perf.data");
    let exe = std::env::current_exe().expect("this example's path");
    let events = [
        "sched:sched_process_exec",
        "sched:sched_process_exit",
        "syscalls:sys_enter_clone",
        "syscalls:sys_enter_pivot_root",
        "syscalls:sys_exit_umount",
        "syscalls:sys_enter_seccomp",
        "syscalls:sys_exit_seccomp",
        "syscalls:sys_enter_exit_group",
        "syscalls:sys_exit_waitid",
    ];
    let mut record = std::process::Command::new("perf");
    record.args(["record", "-q", "-o"]).arg(&data);
    for e in events {
        record.args(["-e", e]);
    }
    let status = record
        .arg("--")
        .arg(&exe)
        .args(["--loop", &n.to_string()])
        .arg(&ws)
        .arg(&program)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("cold_phases: perf record failed ({s}); is this root, with perf installed?");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("cold_phases: perf not found ({e})");
            std::process::exit(1);
        }
    }
    let script = std::process::Command::new("perf")
        .args(["script", "-F", "comm,tid,time,event", "-i"])
        .arg(&data)
        .output()
        .expect("perf script");
    let text = String::from_utf8_lossy(&script.stdout);
    let spawns = phases(&text);
    println!(
        "## One cold spawn, phase by phase ({} spawns of {program}, load {})",
        spawns.len(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("\n| phase | median µs |\n| --- | ---: |");
    let mut total = 0.0;
    for (i, name) in PHASES.iter().enumerate() {
        let mut v: Vec<f64> = spawns.iter().map(|p| p[i]).collect();
        v.sort_by(f64::total_cmp);
        let m = v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
        total += m;
        println!("| {name} | {m:.0} |");
    }
    println!("| (sum of medians) | {total:.0} |");
}

#[cfg(target_os = "linux")]
const PHASES: [&str; 11] = [
    "namespaces",
    "new root",
    "old root",
    "walls",
    "seccomp",
    "init",
    "start",
    "program",
    "record",
    "teardown",
    "host",
];

/// The spawns the recording asked for, each a sandbox of its own.
#[cfg(target_os = "linux")]
fn spawn_loop(n: usize, ws: &str, program: &str) {
    let sb = stockade::Sandbox::new(stockade::Policy::with_workspace(ws)).expect("the sandbox");
    for _ in 0..n {
        let s = sb.command(program).status().expect("spawn");
        assert!(s.success(), "{program}: {s}");
    }
}

/// One event of `perf script -F comm,tid,time,event`.
#[cfg(target_os = "linux")]
struct Event<'a> {
    comm: &'a str,
    tid: u32,
    us: f64,
    name: &'a str,
}

#[cfg(target_os = "linux")]
fn parse(line: &str) -> Option<Event<'_>> {
    // `COMM TID TIME: EVENT:` — the command may hold spaces, so read from the right.
    let (head, rest) = line.split_once(": ")?;
    let name = rest.trim().trim_end_matches(':');
    let mut words = head.split_whitespace().rev();
    let us = words.next()?.parse::<f64>().ok()? * 1e6;
    let tid = words.next()?.parse().ok()?;
    let comm = head.trim_start();
    let comm = comm.get(..comm.find(char::is_whitespace)?)?;
    Some(Event {
        comm,
        tid,
        us,
        name,
    })
}

/// The phases of each complete spawn, in µs (see the module's table). The host is the
/// recorded loop's first thread; a spawn starts at its `clone` with namespaces (the only
/// `clone` it makes in the loop); the execs after the filter's load are the init's and the
/// program's, in that order.
#[cfg(target_os = "linux")]
fn phases(text: &str) -> Vec<[f64; 11]> {
    let events: Vec<Event<'_>> = text.lines().filter_map(parse).collect();
    let Some(host) = events
        .iter()
        .find(|e| e.comm == "cold_phases" && e.name.ends_with("sys_enter_clone"))
        .map(|e| e.tid)
    else {
        return Vec::new();
    };
    // Each spawn's events, from its clone to the next one's.
    let mut spawns: Vec<Vec<&Event<'_>>> = Vec::new();
    for e in &events {
        if e.tid == host && e.name.ends_with("sys_enter_clone") {
            spawns.push(Vec::new());
        }
        if let Some(s) = spawns.last_mut() {
            s.push(e);
        }
    }
    let mut out = Vec::new();
    for pair in spawns.windows(2) {
        let (s, next) = (&pair[0], &pair[1]);
        let first = |f: &dyn Fn(&Event<'_>) -> bool| s.iter().find(|e| f(e)).map(|e| e.us);
        let clone = s[0].us;
        let pivots: Vec<f64> = s
            .iter()
            .filter(|e| e.name.ends_with("sys_enter_pivot_root"))
            .map(|e| e.us)
            .collect();
        let (Some(umount), Some(sec_in), Some(sec_out)) = (
            first(&|e| e.name.ends_with("sys_exit_umount")),
            first(&|e| e.tid != host && e.name.ends_with("sys_enter_seccomp")),
            first(&|e| e.tid != host && e.name.ends_with("sys_exit_seccomp")),
        ) else {
            continue;
        };
        let execs: Vec<&Event<'_>> = s
            .iter()
            .filter(|e| e.name.ends_with("sched_process_exec") && e.us > sec_out)
            .copied()
            .collect();
        let [init, program] = execs.as_slice() else {
            continue;
        };
        let (Some(program_exit), Some(init_exit)) = (
            first(&|e| e.tid == program.tid && e.name.ends_with("sched_process_exit")),
            first(&|e| e.tid == init.tid && e.name.ends_with("sys_enter_exit_group")),
        ) else {
            continue;
        };
        let Some(waited) = s
            .iter()
            .filter(|e| e.tid == host && e.name.ends_with("sys_exit_waitid") && e.us > init_exit)
            .map(|e| e.us)
            .next_back()
        else {
            continue;
        };
        let [p1, p2, ..] = pivots.as_slice() else {
            continue;
        };
        out.push([
            p1 - clone,
            p2 - p1,
            umount - p2,
            sec_in - umount,
            sec_out - sec_in,
            init.us - sec_out,
            program.us - init.us,
            program_exit - program.us,
            init_exit - program_exit,
            waited - init_exit,
            next[0].us - waited,
        ]);
    }
    out
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("cold_phases: Linux only");
}
