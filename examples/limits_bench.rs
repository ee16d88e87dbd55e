//! What limits add to a spawn: spawn + wait of `/bin/true` on the full layer with limits
//! off and on, interleaved (A B C … A B C …), median and p90 of each row.
//!
//! ```text
//! cargo run --release --example limits_bench [-- ITERATIONS]     # default 300
//! ```
//!
//! Rows: std::process::Command (for scale); the full layer without limits; (a) rlimits only
//! (`open_files`, `cpu_time`: set by the setup child, no host work); (b) `wall_time` only
//! (a deadline on the host's watchdog thread, disarmed after the wait); (c) the cgroup
//! limits `memory`, `processes` and `cpu` (a leaf made, limited, joined and removed per
//! command: root, or a delegated cgroup); (c') `memory` alone, to split (c) per
//! hierarchy; all of them together. Without a usable cgroup, (c) runs degraded and says so.
//! The rows run twice: back to back, in a shuffled order each round; then off, (b) and the
//! cgroup rows again, a third as many times, with 100 ms idle before each spawn, as a host
//! that starts a command now and then (a cgroup migration after an idle spell waits for
//! an RCU grace period: `bench/README.md`).
//!
//! Then the cgroup's host-side steps on their own, without a spawn: the leaf made with
//! (c)'s limits (a `mkdir` per hierarchy, the limit writes, the `cgroup.procs` opens),
//! its usage and events read, and its removal (an empty leaf: a `cgroup.procs` read and an
//! `rmdir` per hierarchy).

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("limits_bench measures the Linux backend only");
}

#[cfg(target_os = "linux")]
mod linux {
    use std::process::Command as StdCommand;
    use std::time::{Duration, Instant};

    use stockade::backend::linux::cgroup::{Cgroups, Wanted};
    use stockade::policy::Limits;
    use stockade::{ByteSize, Layer, Policy, Sandbox};

    type Run = Box<dyn FnMut()>;
    /// A row's name and how it sets its limits.
    type Variant<'a> = (&'a str, &'a dyn Fn(&mut Limits));

    /// Median and p90 of `v`.
    fn stats(v: &mut [Duration]) -> (Duration, Duration) {
        v.sort();
        (v[v.len() / 2], v[(v.len() * 9 / 10).min(v.len() - 1)])
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    fn cgroup_limits(l: &mut Limits) {
        l.memory = Some(ByteSize(2 << 30));
        l.processes = Some(256);
        l.cpu = Some(1.5);
    }

    fn rows(ws: &std::path::Path) -> Vec<(String, Run)> {
        let mut rows: Vec<(String, Run)> = vec![(
            "std::process::Command".into(),
            Box::new(|| {
                assert!(StdCommand::new("/bin/true").status().unwrap().success());
            }),
        )];
        let variants: [Variant; 6] = [
            ("full, no limits", &|_| {}),
            ("(a) full, rlimits only", &|l| {
                l.open_files = Some(1024);
                l.cpu_time = Some(Duration::from_secs(300));
            }),
            ("(b) full, wall_time only", &|l| {
                l.wall_time = Some(Duration::from_secs(600));
            }),
            ("(c) full, cgroup limits", &cgroup_limits),
            ("(c') full, memory only", &|l| {
                l.memory = Some(ByteSize(2 << 30));
            }),
            ("full, all of them", &|l| {
                cgroup_limits(l);
                l.open_files = Some(1024);
                l.cpu_time = Some(Duration::from_secs(300));
                l.wall_time = Some(Duration::from_secs(600));
            }),
        ];
        for (name, set) in variants {
            let mut p = Policy::with_workspace(ws);
            p.layer = Some(Layer::Full);
            set(&mut p.limits);
            let sb = Sandbox::new(p).unwrap();
            // The first spawn is the probe: it settles the layer and any degradation.
            assert!(sb.command("/bin/true").status().unwrap().success());
            if let Some(d) = sb.degradation() {
                println!("  {name}: degraded: {}", d.reason);
            }
            rows.push((
                name.into(),
                Box::new(move || {
                    let mut child = sb.command("/bin/true").spawn().unwrap();
                    assert!(child.wait().unwrap().success());
                }),
            ));
        }
        rows
    }

    /// Runs the rows `only` (all when empty) interleaved `iters` times after a warm-up,
    /// in a shuffled order each round; with `gap`, a pause before each sample. Median and
    /// p90 per row measured.
    fn measure(
        rows: &mut [(String, Run)],
        only: &[usize],
        iters: usize,
        gap: Option<Duration>,
    ) -> Vec<(usize, (Duration, Duration))> {
        let picked: Vec<usize> = if only.is_empty() {
            (0..rows.len()).collect()
        } else {
            only.to_vec()
        };
        for &i in &picked {
            for _ in 0..10 {
                (rows[i].1)();
            }
        }
        let n = picked.len();
        let mut samples = vec![Vec::with_capacity(iters); n];
        // A new order each round (xorshift, fixed seed), so that no row always follows the
        // same one: a cgroup row right after rows without a cgroup pays what the next
        // cgroup row would not (see `bench/README.md`).
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut order: Vec<usize> = (0..n).collect();
        for _ in 0..iters {
            for k in (1..n).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                order.swap(k, (seed % (k as u64 + 1)) as usize);
            }
            for &j in &order {
                if let Some(g) = gap {
                    std::thread::sleep(g);
                }
                let t = Instant::now();
                (rows[picked[j]].1)();
                samples[j].push(t.elapsed());
            }
        }
        picked
            .into_iter()
            .zip(samples.iter_mut().map(|s| stats(s)))
            .collect()
    }

    /// Prints one table of `measure`'s results.
    fn print(title: &str, rows: &[(String, Run)], res: &[(usize, (Duration, Duration))]) {
        let off = res
            .iter()
            .find(|(i, _)| rows[*i].0 == "full, no limits")
            .map(|(_, (m, _))| *m)
            .unwrap_or_default();
        println!("\n{title}");
        println!(
            "{:<28} {:>10} {:>10} {:>16}",
            "spawn + wait /bin/true", "median", "p90", "median vs off"
        );
        for (i, (med, p90)) in res {
            let name = &rows[*i].0;
            let delta = if name.starts_with("std") {
                String::from("-")
            } else {
                format!("{:+.3}ms", ms(*med) - ms(off))
            };
            println!(
                "{name:<28} {:>8.3}ms {:>8.3}ms {delta:>16}",
                ms(*med),
                ms(*p90)
            );
        }
        if let Some((_, (cg, _))) = res.iter().find(|(i, _)| rows[*i].0.starts_with("(c)")) {
            let extra = ms(*cg) - ms(off);
            println!(
                "  target: cgroup limits ≤ +0.3 ms: {} ({extra:+.3} ms)",
                if extra <= 0.3 { "met" } else { "MISSED" }
            );
        }
    }

    /// The cgroup's host-side steps alone, `iters` times each: (create, read, remove).
    fn cgroup_steps(iters: usize) -> Result<[(Duration, Duration); 3], String> {
        let c = Cgroups::discover()?;
        let wanted = Wanted {
            memory: Some(2 << 30),
            processes: Some(257),
            cpu: Some(1.5),
        };
        c.check(&wanted)?;
        let (mut create, mut read, mut remove) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..iters + 10 {
            let t = Instant::now();
            let leaf = c.create(&wanted).map_err(|e| e.to_string())?;
            let t1 = Instant::now();
            let _ = (leaf.usage(), leaf.events());
            let t2 = Instant::now();
            leaf.remove();
            let t3 = Instant::now();
            if i >= 10 {
                create.push(t1 - t);
                read.push(t2 - t1);
                remove.push(t3 - t2);
            }
        }
        println!(
            "  cgroup {:?}, {} leaf directories per command",
            c.version(),
            c.create(&wanted).map_err(|e| e.to_string())?.dirs().len()
        );
        Ok([stats(&mut create), stats(&mut read), stats(&mut remove)])
    }

    fn loadavg() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub(super) fn main() {
        let iters: usize = std::env::args()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(300)
            .max(1);
        let ws = std::env::temp_dir().join(format!("stockade-limits-bench-{}", std::process::id()));
        std::fs::create_dir_all(&ws).unwrap();
        println!(
            "stockade limits bench: {iters} interleaved iterations per row, kernel {}, uid {}, \
             load {}",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim(),
            nix::unistd::geteuid(),
            loadavg()
        );
        let mut r = rows(&ws);
        let res = measure(&mut r, &[], iters, None);
        print(
            "back to back (one spawn after the other, rows interleaved)",
            &r,
            &res,
        );
        // The first migration into a cgroup after an idle spell waits for an RCU grace
        // period (see bench/README.md): a host that spawns now and then pays it each time.
        let spaced: Vec<usize> = r
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| {
                n == "full, no limits" || n.starts_with("(b)") || n.starts_with("(c")
            })
            .map(|(i, _)| i)
            .collect();
        let gap = Duration::from_millis(100);
        let spaced_iters = (iters / 3).max(1);
        let res = measure(&mut r, &spaced, spaced_iters, Some(gap));
        print(
            &format!(
                "spaced: {} ms idle before each spawn, {spaced_iters} runs per row",
                gap.as_millis()
            ),
            &r,
            &res,
        );
        println!("\ncgroup steps alone, no spawn ({iters} each)");
        match cgroup_steps(iters) {
            Ok(steps) => {
                for (name, (med, p90)) in [
                    "create (mkdir, limits, open cgroup.procs)",
                    "usage and events read",
                    "remove (read cgroup.procs, rmdir)",
                ]
                .iter()
                .zip(steps)
                {
                    println!("  {name:<42} {:>8.3}ms {:>8.3}ms", ms(med), ms(p90));
                }
            }
            Err(why) => println!("  no usable cgroup: {why}"),
        }
        drop(r);
        let _ = std::fs::remove_dir_all(&ws);
    }
}
