//! What `stockade changes` costs: `ChangeSet::open` (the walk and the classification) on
//! a workspace of 100 000 files with 10 changed files, median and p90.
//!
//! ```text
//! cargo run --release --example changes_bench [-- ITERATIONS [FILES]]   # default 50, 100000
//! ```
//!
//! The workspace (under `/var/tmp`) holds FILES files of 1 KiB in directories of 100. The
//! change set holds, spread over ten directories: four files modified to the same size
//! (the worst case: their bytes are compared), two added, two deleted (whiteouts), one
//! chmod'ed, one added in a new directory. The goal (issue 27) is ≤ 50 ms: the walk is
//! of the change set, not of the workspace. Rows: `open` (list), `open + diff`, and, for
//! scale, a plain walk of the whole workspace with `std::fs::read_dir` + `symlink_metadata`
//! (what a tool that diffs the workspace would pay at least).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use stockade::ChangeSet;

fn main() {
    let mut args = std::env::args().skip(1);
    let iters: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let files: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let tmp = tempfile::Builder::new()
        .prefix("stockade-changes-bench-")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp");
    let root = fs::canonicalize(tmp.path()).unwrap();
    let ws = root.join("ws");
    let t = Instant::now();
    let block = vec![b'x'; 1024];
    for i in 0..files {
        let dir = ws.join(format!("d{:04}", i / 100));
        if i % 100 == 0 {
            fs::create_dir_all(&dir).unwrap();
        }
        fs::write(dir.join(format!("f{:03}.txt", i % 100)), &block).unwrap();
    }
    eprintln!("workspace: {files} files made in {:?}", t.elapsed());
    let set = root.join("set");
    let up = set.join("upper");
    fs::create_dir_all(&up).unwrap();
    fs::create_dir_all(set.join("work")).unwrap();
    let dirs = files.div_ceil(100);
    let d = |k: usize| format!("d{:04}", (k * 97) % dirs);
    let mut changed = block.clone();
    changed[512] = b'y';
    for k in 0..4 {
        put(&up.join(d(k)).join("f007.txt"), &changed);
    }
    for k in 4..6 {
        put(&up.join(d(k)).join("new.txt"), b"new\n");
    }
    for k in 6..8 {
        fs::create_dir_all(up.join(d(k))).unwrap();
        nix::sys::stat::mknod(
            &up.join(d(k)).join("f001.txt"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::empty(),
            0,
        )
        .unwrap();
    }
    {
        use std::os::unix::fs::PermissionsExt;
        let p = up.join(d(8)).join("f002.txt");
        put(&p, &block);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    put(&up.join("newdir/new.txt"), b"new\n");
    let marker = format!(
        r#"{{"version":1,"workspace":"{}","mode":"overlay","started_ns":{}}}"#,
        ws.display(),
        u64::MAX
    );
    fs::write(set.join("stockade-changes.json"), marker).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&set, fs::Permissions::from_mode(0o700)).unwrap();
    }
    let n = ChangeSet::open(&set).unwrap().entries().len();
    assert_eq!(n, 11, "entries: 10 files and the new directory");

    let open = measure(iters, || {
        let s = ChangeSet::open(&set).unwrap();
        assert_eq!(s.entries().len(), n);
    });
    let diff = measure(iters, || {
        let s = ChangeSet::open(&set).unwrap();
        assert!(!s.diff().unwrap().is_empty());
    });
    let full = measure(iters.min(10), || {
        let mut count = 0;
        walk(&ws, &mut count);
        assert_eq!(count, files + dirs);
    });
    println!(
        "changes_bench: workspace of {files} files, {n} entries in the change set, {iters} iterations"
    );
    println!("| | median | p90 |");
    println!("| --- | ---: | ---: |");
    row("ChangeSet::open (`changes`)", &open);
    row("ChangeSet::open + diff (`changes --diff`)", &diff);
    row("walk of the whole workspace (for scale)", &full);
    let goal = Duration::from_millis(50);
    println!(
        "goal: `changes` <= 50 ms: {} ({:.3} ms)",
        if open.0 <= goal { "met" } else { "MISSED" },
        ms(open.0)
    );
}

fn put(path: &Path, data: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, data).unwrap();
}

fn walk(dir: &Path, count: &mut usize) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        *count += 1;
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            walk(&p, count);
        }
    }
}

/// (median, p90) of `iters` runs of `f`, after one warm-up run.
fn measure(iters: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    f();
    let mut t: Vec<Duration> = (0..iters.max(1))
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    (t[t.len() / 2], t[(t.len() * 9 / 10).min(t.len() - 1)])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn row(name: &str, (med, p90): &(Duration, Duration)) {
    println!("| {name} | {:.3} ms | {:.3} ms |", ms(*med), ms(*p90));
}
