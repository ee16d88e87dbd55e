//! Spawn cost: spawn + wait of /bin/true, side by side, interleaved (A B A B …), medians.
//!
//! ```text
//! cargo run --release --example spawn_bench [-- ITERATIONS]
//! ```
//!
//! Rows: std::process::Command (no sandbox); stockade passthrough; layer 2, and layer 2
//! over a workspace that is a git repository (its `.git` control files snapshotted before
//! and put back after each command); stockade full layout;
//! the full layout over a workspace that is a git repository (its `.git` gets a
//! per-command copy-on-write layer, merged back after the run); full + network none;
//! bwrap with the same layout when `bwrap` is installed (comparison only, never a
//! dependency); the CLI, `stockade run -- /bin/true`, launched as bwrap is (the `stockade`
//! binary next to this example's directory, built by `cargo build --release`). Then the
//! same with 2 GiB of host memory touched, which is where fork-based spawning degrades and
//! a `CLONE_VM` spawn must not.

use std::path::Path;
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use stockade::{Mode, Network, Policy, Sandbox};

type Run = Box<dyn FnMut()>;

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn bwrap_args(ws: &Path, net_none: bool) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    for d in ["/usr", "/etc", "/opt"] {
        a.extend(["--ro-bind".into(), d.into(), d.into()]);
    }
    for (l, t) in [
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ] {
        a.extend(["--symlink".into(), t.into(), l.into()]);
    }
    let w = ws.display().to_string();
    a.extend([
        "--tmpfs".into(),
        "/tmp".into(),
        "--dev".into(),
        "/dev".into(),
        "--proc".into(),
        "/proc".into(),
    ]);
    a.extend(["--bind".into(), w.clone(), w.clone()]);
    a.extend([
        "--unshare-user".into(),
        "--unshare-pid".into(),
        "--unshare-ipc".into(),
        "--unshare-uts".into(),
    ]);
    if net_none {
        a.push("--unshare-net".into());
    }
    a.extend([
        "--die-with-parent".into(),
        "--new-session".into(),
        "--clearenv".into(),
        "--chdir".into(),
        w,
    ]);
    a.push("/bin/true".into());
    a
}

fn rows(ws: &Path, repo: &Path) -> Vec<(&'static str, Run)> {
    let mut rows: Vec<(&'static str, Run)> = Vec::new();
    rows.push((
        "std::process::Command",
        Box::new(|| {
            let s = StdCommand::new("/bin/true").status().unwrap();
            assert!(s.success());
        }),
    ));
    let mk = |f: &dyn Fn(&mut Policy)| {
        let mut p = Policy::with_workspace(ws);
        f(&mut p);
        Sandbox::new(p).unwrap()
    };
    for (name, sb) in [
        ("stockade passthrough", mk(&|p| p.mode = Mode::Disabled)),
        (
            "stockade layer 2 (landlock)",
            mk(&|p| p.layer = Some(stockade::Layer::Landlock)),
        ),
        ("stockade layer 2, .git in ws", {
            // Its control files snapshotted before each command, compared (and put back)
            // after it.
            let mut p = Policy::with_workspace(repo);
            p.layer = Some(stockade::Layer::Landlock);
            Sandbox::new(p).unwrap()
        }),
        ("stockade full", mk(&|_| {})),
        ("stockade full, .git in ws", {
            let mut p = Policy::with_workspace(repo);
            p.layer = Some(stockade::Layer::Full);
            Sandbox::new(p).unwrap()
        }),
        (
            "stockade full + net none",
            mk(&|p| p.network = Network::None),
        ),
    ] {
        rows.push((
            name,
            Box::new(move || {
                let s = sb.command("/bin/true").status().unwrap();
                assert!(s.success());
            }),
        ));
    }
    if Path::new("/usr/bin/bwrap").exists() {
        for (name, net) in [("bwrap full", false), ("bwrap full + net none", true)] {
            let args = bwrap_args(ws, net);
            rows.push((
                name,
                Box::new(move || {
                    let s = StdCommand::new("/usr/bin/bwrap")
                        .args(&args)
                        .status()
                        .unwrap();
                    assert!(s.success());
                }),
            ));
        }
    }
    let cli = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.join("stockade")))
        .filter(|c| c.exists());
    if let Some(cli) = cli {
        let args = [
            "run",
            "--workspace",
            &ws.display().to_string(),
            "--",
            "/bin/true",
        ]
        .map(String::from);
        rows.push((
            "stockade run (CLI)",
            Box::new(move || {
                let s = StdCommand::new(&cli).args(&args).status().unwrap();
                assert!(s.success());
            }),
        ));
    } else {
        println!("(no `stockade` binary next to this example: `cargo build --release`)");
    }
    rows
}

fn measure(rows: &mut [(&'static str, Run)], iters: usize) -> Vec<Duration> {
    for (_, f) in rows.iter_mut() {
        for _ in 0..10 {
            f();
        }
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(iters); rows.len()];
    for _ in 0..iters {
        for (i, (_, f)) in rows.iter_mut().enumerate() {
            let t = Instant::now();
            f();
            samples[i].push(t.elapsed());
        }
    }
    samples.iter_mut().map(|s| median(s)).collect()
}

fn print(title: &str, rows: &[(&'static str, Run)], med: &[Duration]) {
    println!("\n{title}");
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "spawn + wait /bin/true", "median", "× std", "× bwrap"
    );
    let std = med[0].as_secs_f64();
    let bwrap = rows
        .iter()
        .position(|(n, _)| *n == "bwrap full")
        .map(|i| med[i].as_secs_f64());
    for ((name, _), m) in rows.iter().zip(med) {
        let ms = m.as_secs_f64() * 1e3;
        let vs_bwrap = bwrap.map_or("-".into(), |b| format!("{:.2}", m.as_secs_f64() / b));
        println!(
            "{name:<28} {ms:>8.3}ms {:>10.2} {vs_bwrap:>10}",
            m.as_secs_f64() / std
        );
    }
}

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let ws = std::env::temp_dir().join(format!("stockade-bench-{}", std::process::id()));
    std::fs::create_dir_all(&ws).unwrap();
    // A small repository with one commit, packed (one pack file).
    let repo = std::env::temp_dir().join(format!("stockade-bench-repo-{}", std::process::id()));
    std::fs::create_dir_all(&repo).unwrap();
    for args in [
        &["init", "-q"][..],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "b",
        ],
        &["gc", "-q"],
    ] {
        let s = StdCommand::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .status()
            .unwrap();
        assert!(s.success(), "git {args:?}");
    }
    println!(
        "stockade spawn bench: {iters} interleaved iterations per row, kernel {}",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    );

    let mut r = rows(&ws, &repo);
    let small = measure(&mut r, iters);
    print("small host", &r, &small);

    // 2 GiB of touched memory: fork() would copy these page tables.
    let big: Vec<u8> = vec![1u8; 2 << 30];
    let touched: u64 = big.iter().step_by(4096).map(|&b| u64::from(b)).sum();
    let large = measure(&mut r, iters);
    print(
        &format!("host with 2 GiB touched ({touched} pages)"),
        &r,
        &large,
    );
    let full = r.iter().position(|(n, _)| *n == "stockade full").unwrap();
    println!(
        "\nstockade full, 2 GiB host / small host: {:.2}×",
        large[full].as_secs_f64() / small[full].as_secs_f64()
    );
    drop(big);
    let _ = std::fs::remove_dir_all(&ws);
    let _ = std::fs::remove_dir_all(&repo);
}
