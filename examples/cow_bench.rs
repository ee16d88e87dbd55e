//! The copy-on-write workspace (`workspace_mode = "overlay"`, issue 27), side by side:
//!
//! 1. spawn + wait of /bin/true on the full layer, direct vs overlay, interleaved,
//!    medians: the same change set for every overlay spawn (as in a session of tool
//!    calls), a fresh change set per spawn (the previous one discarded, untimed), and the
//!    change set on a tmpfs; then back-to-back runs on one change set with nothing in
//!    between (each waits for the previous one's close: the overlay's last reference,
//!    which the host drops on a thread of its own after the wait);
//! 2. layer 2's snapshot: the first run on a workspace of `SIZE_MIB` MiB (64 files of
//!    equal size plus 1000 small ones) minus a direct run, per GiB; then a later run
//!    (the snapshot made, the difference written after the run) minus a direct run.
//!
//! ```text
//! cargo run --release --example cow_bench [-- ITERATIONS [SIZE_MIB]]
//! ```
//!
//! The fixtures live under /var/tmp (the file system a workspace is usually on).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use stockade::{Layer, Policy, Sandbox, WorkspaceMode};

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn sandbox(ws: &Path, layer: Layer, changes: Option<&Path>) -> Sandbox {
    let mut p = Policy::with_workspace(ws);
    p.layer = Some(layer);
    p.min_layer = Some(Layer::Landlock);
    p.snapshot_max = stockade::ByteSize::parse("64GiB").expect("size");
    if let Some(c) = changes {
        p.workspace_mode = WorkspaceMode::Overlay;
        p.changes_dir = Some(c.to_path_buf());
    }
    Sandbox::new(p).expect("sandbox")
}

fn run(sb: &Sandbox) -> Duration {
    let (s, w) = run_split(sb);
    s + w
}

/// One spawn + wait: (the spawn, the wait).
fn run_split(sb: &Sandbox) -> (Duration, Duration) {
    let t = Instant::now();
    let mut child = sb.command("/bin/true").spawn().expect("spawn");
    let spawned = t.elapsed();
    let st = child.wait().expect("wait");
    assert!(st.success());
    (spawned, t.elapsed() - spawned)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iterations: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let size_mib: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    let base = tempfile::Builder::new()
        .prefix("cow-bench-")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let root = fs::canonicalize(base.path()).expect("canonical");

    // 1. Spawn cost, full layer.
    let ws = root.join("ws");
    fs::create_dir(&ws).expect("ws");
    for i in 0..100 {
        fs::write(ws.join(format!("f{i}")), b"x\n").expect("file");
    }
    let direct = sandbox(&ws, Layer::Full, None);
    let overlay = sandbox(&ws, Layer::Full, Some(&root.join("set")));
    // A second set whose previous run's close is waited for, untimed, before each run:
    // a session of tool calls with the model's turn between them.
    // Every close of a run on the same file system is waited for, not only this set's:
    // the fresh set's run just before would otherwise still be syncing the file system.
    let settled_set = root.join("settled");
    let settled = sandbox(&ws, Layer::Full, Some(&settled_set));
    let fresh_set = root.join("fresh");
    let settle = || {
        let _ = stockade::ChangeSet::open(&settled_set);
        let _ = stockade::ChangeSet::open(&fresh_set);
        let _ = stockade::ChangeSet::open(root.join("set"));
    };
    // The same with the change set on a tmpfs: what the upper file system costs.
    let shm = tempfile::Builder::new()
        .prefix("cow-bench-")
        .tempdir_in("/dev/shm")
        .ok();
    let on_tmpfs = shm
        .as_ref()
        .map(|d| sandbox(&ws, Layer::Full, Some(&d.path().join("set"))));
    let fresh = sandbox(&ws, Layer::Full, Some(&fresh_set));
    let discard = || {
        if let Ok(set) = stockade::ChangeSet::open(&fresh_set) {
            set.discard().expect("discard");
        }
    };
    let (mut d, mut o, mut t, mut f) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut st = Vec::new();
    let (mut ds, mut dw, mut os, mut ow) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    run(&direct);
    run(&overlay);
    run(&fresh);
    run(&settled);
    for _ in 0..iterations {
        let (s, w) = run_split(&direct);
        d.push(s + w);
        ds.push(s);
        dw.push(w);
        let (s, w) = run_split(&overlay);
        o.push(s + w);
        os.push(s);
        ow.push(w);
        if let Some(sb) = &on_tmpfs {
            t.push(run(sb));
        }
        discard();
        f.push(run(&fresh));
        settle();
        st.push(run(&settled));
    }
    let (d, o, f) = (median(&mut d), median(&mut o), median(&mut f));
    let st = median(&mut st);
    let (ds, dw) = (median(&mut ds), median(&mut dw));
    let (os, ow) = (median(&mut os), median(&mut ow));
    println!("| spawn + wait /bin/true, full layer ({iterations}, interleaved) | median |");
    println!("| --- | ---: |");
    println!("| direct | {:.3} ms |", ms(d));
    println!(
        "| overlay, one change set in /var/tmp | {:.3} ms ({:+.3} ms) |",
        ms(o),
        ms(o) - ms(d)
    );
    println!(
        "| of which spawn / wait: direct {:.3} / {:.3} ms, overlay {:.3} / {:.3} ms | |",
        ms(ds),
        ms(dw),
        ms(os),
        ms(ow)
    );
    println!(
        "| overlay, one change set in /var/tmp, the previous run's close settled (untimed) | {:.3} ms ({:+.3} ms) |",
        ms(st),
        ms(st) - ms(d)
    );
    println!(
        "| overlay, a fresh change set in /var/tmp per run | {:.3} ms ({:+.3} ms) |",
        ms(f),
        ms(f) - ms(d)
    );
    if !t.is_empty() {
        let t = median(&mut t);
        println!(
            "| overlay, change set on tmpfs | {:.3} ms ({:+.3} ms) |",
            ms(t),
            ms(t) - ms(d)
        );
    }
    // Back to back, nothing in between: each overlay run may wait at its start for the
    // previous one's close (the sync of the change set's file system).
    let n = iterations.min(100);
    let (mut bd, mut bo) = (Vec::new(), Vec::new());
    for _ in 0..n {
        bd.push(run(&direct));
    }
    for _ in 0..n {
        bo.push(run(&overlay));
    }
    let (bd, bo) = (median(&mut bd), median(&mut bo));
    println!("| back to back ({n} each): direct | {:.3} ms |", ms(bd));
    println!(
        "| back to back: overlay, one change set in /var/tmp | {:.3} ms ({:+.3} ms) |",
        ms(bo),
        ms(bo) - ms(bd)
    );

    // 2. Layer 2's snapshot.
    let big = root.join("big");
    fs::create_dir(&big).expect("big");
    let chunk = usize::try_from(size_mib * 1024 * 1024 / 64).expect("size");
    let data: Vec<u8> = (0..chunk).map(|i| (i % 251) as u8).collect();
    for i in 0..64 {
        fs::write(big.join(format!("blob{i}")), &data).expect("blob");
    }
    fs::create_dir(big.join("src")).expect("src");
    for i in 0..1000 {
        fs::write(big.join(format!("src/s{i}.rs")), b"fn main() {}\n").expect("src");
    }
    let bytes = size_mib * 1024 * 1024 + 1000 * 13;
    let direct2 = sandbox(&big, Layer::Landlock, None);
    run(&direct2);
    let base2 = {
        let mut v: Vec<Duration> = (0..20).map(|_| run(&direct2)).collect();
        median(&mut v)
    };
    let changes = root.join("set2");
    // The snapshot is made when the sandbox is first used (its Landlock probe needs
    // none: it is made at the first spawn).
    let snap_sb = sandbox(&big, Layer::Landlock, Some(&changes));
    let first = run(&snap_sb);
    let snap = first.saturating_sub(base2);
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let later = {
        let mut v: Vec<Duration> = (0..20).map(|_| run(&snap_sb)).collect();
        median(&mut v)
    };
    println!();
    println!("| layer 2, workspace of {size_mib} MiB + 1000 small files | time |");
    println!("| --- | ---: |");
    println!("| direct run | {:.3} ms |", ms(base2));
    println!(
        "| first overlay run (makes the snapshot) | {:.1} ms |",
        ms(first)
    );
    println!(
        "| snapshot cost | {:.1} ms = {:.0} ms per GiB |",
        ms(snap),
        ms(snap) / gib
    );
    println!(
        "| later overlay run (diff after the run) | {:.3} ms ({:+.3} ms) |",
        ms(later),
        ms(later) - ms(base2)
    );
}
