//! The cost of finding nested repositories: spawn + wait of /bin/true in a workspace of N
//! files laid out like `node_modules` (packages of a few directories and files each, a
//! `.git` in some), interleaved with the same in an empty workspace, medians.
//!
//! ```text
//! cargo run --release --example nested_bench [-- ITERATIONS [FILES…]]
//! ```
//!
//! Every command walks each writable root twice (at the spawn, to note the host's own
//! repositories, and after the run, to find the program's), so the difference between the
//! rows is two walks. Defaults: 20 iterations; 10 000 and 100 000 files. The trees are
//! made under `/var/tmp` and removed afterwards.

use std::path::Path;
use std::time::{Duration, Instant};

use stockade::{Policy, Sandbox};

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `files` files in packages of 4 directories and 10 files (`pkgN/lib/sub/deep/f…`),
/// a `.git` directory in every 50th package.
fn populate(root: &Path, files: usize) {
    let nm = root.join("node_modules");
    let mut made = 0;
    let mut pkg = 0;
    while made < files {
        let deep = nm.join(format!("pkg{pkg}/lib/sub/deep"));
        std::fs::create_dir_all(&deep).unwrap();
        for i in 0..10 {
            let dir = match i % 4 {
                0 => nm.join(format!("pkg{pkg}")),
                1 => nm.join(format!("pkg{pkg}/lib")),
                2 => nm.join(format!("pkg{pkg}/lib/sub")),
                _ => deep.clone(),
            };
            std::fs::write(dir.join(format!("f{i}.js")), "x").unwrap();
        }
        if pkg % 50 == 0 {
            std::fs::create_dir_all(nm.join(format!("pkg{pkg}/.git/objects"))).unwrap();
        }
        made += 10;
        pkg += 1;
    }
}

fn time(sb: &Sandbox) -> Duration {
    let t = Instant::now();
    let s = sb.command("/bin/true").status().unwrap();
    assert!(s.success());
    t.elapsed()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let iterations: usize = args.first().map_or(20, |a| a.parse().unwrap());
    let sizes: Vec<usize> = if args.len() > 1 {
        args[1..].iter().map(|a| a.parse().unwrap()).collect()
    } else {
        vec![10_000, 100_000]
    };
    let empty = tempfile::Builder::new().tempdir_in("/var/tmp").unwrap();
    let base = Sandbox::new(Policy::with_workspace(empty.path())).unwrap();
    println!("layer: {:?}; {iterations} iterations each", base.layer());
    for files in sizes {
        let dir = tempfile::Builder::new().tempdir_in("/var/tmp").unwrap();
        populate(dir.path(), files);
        let sb = Sandbox::new(Policy::with_workspace(dir.path())).unwrap();
        // Warm the dentry cache as a workspace in use has it.
        time(&sb);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..iterations {
            a.push(time(&base));
            b.push(time(&sb));
        }
        let (a, b) = (median(&mut a), median(&mut b));
        println!(
            "{files:>7} files: {:>8.2} ms (empty workspace {:.2} ms): {:.2} ms per walk",
            b.as_secs_f64() * 1e3,
            a.as_secs_f64() * 1e3,
            (b.saturating_sub(a)).as_secs_f64() * 1e3 / 2.0
        );
    }
}
