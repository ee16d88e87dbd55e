//! What `Command::explain` costs: the same runs with explain off and on.
//!
//! - spawn + wait of `/bin/true` (the explained spawn compiles the explained filter,
//!   makes a socket pair, receives the listener and starts the answering thread);
//! - `grep -r` over a tree of 2000 small files (a real workload: allowed calls only);
//! - `dd bs=1` of 200 000 bytes (400 000 allowed `read`/`write` calls);
//! - python's start-up alone, and with 10 000 denied `ptrace` calls (each a round trip
//!   to the host with explain on).
//!
//! Each figure is the median of `N` runs (default 15), both modes interleaved.
//!
//! ```text
//! cargo run --release --example explain_bench [N] [full|landlock]
//! ```

#[cfg(target_os = "linux")]
fn main() {
    use std::time::{Duration, Instant};

    use stockade::{Layer, Network, Policy, Sandbox, Stdio};

    let mut argv = std::env::args().skip(1);
    let n: usize = argv.next().and_then(|a| a.parse().ok()).unwrap_or(15);
    let layer = match argv.next().as_deref() {
        Some("landlock") => Layer::Landlock,
        _ => Layer::Full,
    };
    let ws = tempfile::tempdir().expect("tempdir");
    for d in 0..20 {
        let dir = ws.path().join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            let text = format!("line one {d} {f}\nsomething else\nneedle-{}\n", d * f % 7);
            std::fs::write(dir.join(format!("f{f}.txt")), text.repeat(20)).unwrap();
        }
    }
    let mut p = Policy::with_workspace(ws.path());
    p.layer = Some(layer);
    p.min_layer = Some(Layer::Landlock);
    p.network = Network::None;
    let sb = Sandbox::new(p).expect("sandbox");

    let run = |explain: bool, prog: &str, args: &[&str]| -> (Duration, u64) {
        let t = Instant::now();
        let mut child = sb
            .command(prog)
            .args(args)
            .explain(explain)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        child.wait().expect("wait");
        let d = t.elapsed();
        (d, child.denials().iter().map(|d| d.count).sum())
    };
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let ptrace =
        "import ctypes\nlibc = ctypes.CDLL(None)\nfor _ in range(10000): libc.ptrace(16, 1, 0, 0)";
    let cases: [(&str, &str, Vec<&str>); 5] = [
        ("spawn + wait /bin/true", "true", vec![]),
        (
            "grep -r over 2000 files",
            "grep",
            vec!["-r", "-c", "needle-3", "."],
        ),
        (
            "dd bs=1 count=200000",
            "dd",
            vec!["if=/dev/zero", "of=/dev/null", "bs=1", "count=200000"],
        ),
        ("python start-up", "python3", vec!["-c", "pass"]),
        (
            "python, 10 000 denied ptrace",
            "python3",
            vec!["-c", ptrace],
        ),
    ];
    println!("explain off vs on, {layer:?} layer, median of {n}");
    println!("| run | off | on | on − off | denials reported |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (label, prog, args) in &cases {
        let (mut off, mut on, mut count) = (Vec::new(), Vec::new(), 0);
        for _ in 0..n {
            off.push(run(false, prog, args).0);
            let (d, c) = run(true, prog, args);
            on.push(d);
            count = c;
        }
        let (off, on) = (median(off), median(on));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "| {label} | {:.3} ms | {:.3} ms | {:+.3} ms | {count} |",
            ms(off),
            ms(on),
            ms(on) - ms(off)
        );
        if label.contains("denied") {
            let extra = on.saturating_sub(off).as_secs_f64() * 1e6 / 1e4;
            println!("extra per denied call with explain on: {extra:.2} µs");
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("explain_bench: Linux only");
}
