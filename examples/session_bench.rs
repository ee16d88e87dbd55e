//! Warm sessions: one more command in a live session against plain fork+exec+wait and a
//! fresh sandbox per command, all of `/bin/true`, interleaved (A B C A B C …), medians;
//! then commands per second with 1 and 2 threads.
//!
//! ```text
//! cargo run --release --example session_bench [-- ITERATIONS]
//! ```
//!
//! Rows: `std::process::Command` (no sandbox); a command in a live session (full layer,
//! and layer 2); a fresh full-layer sandbox per command; bwrap with the same layout when
//! it is installed (comparison only). The goal for the session: ≤ 1.3× the plain row.

#[cfg(target_os = "linux")]
mod linux {
    use std::path::Path;
    use std::process::Command as StdCommand;
    use std::time::{Duration, Instant};

    use stockade::{Layer, Policy, Sandbox, Session};

    fn median(v: &mut [Duration]) -> Duration {
        v.sort();
        v[v.len() / 2]
    }

    fn bwrap(ws: &Path) -> StdCommand {
        let mut c = StdCommand::new("bwrap");
        for d in ["/usr", "/etc"] {
            c.args(["--ro-bind", d, d]);
        }
        for (l, t) in [
            ("/bin", "usr/bin"),
            ("/lib", "usr/lib"),
            ("/lib64", "usr/lib64"),
        ] {
            c.args(["--symlink", t, l]);
        }
        let w = ws.to_str().unwrap();
        c.args([
            "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc", "--bind", w, w,
        ]);
        c.args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
        ]);
        c.args([
            "--unshare-net",
            "--die-with-parent",
            "--new-session",
            "--",
            "/bin/true",
        ]);
        c
    }

    fn session(ws: &Path, layer: Layer) -> (Sandbox, Session) {
        let mut p = Policy::with_workspace(ws);
        p.layer = Some(layer);
        p.min_layer = Some(Layer::Landlock);
        let sb = Sandbox::new(p).expect("sandbox");
        let s = sb.session().expect("session");
        (sb, s)
    }

    /// Commands per second over `secs` seconds with `threads` threads, each running `run`.
    fn rate(threads: usize, secs: f64, run: &(dyn Fn() + Sync)) -> f64 {
        let stop = Instant::now() + Duration::from_secs_f64(secs);
        let total: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut n = 0;
                        while Instant::now() < stop {
                            run();
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        total as f64 / secs
    }

    pub fn main() {
        let iters: usize = std::env::args()
            .nth(1)
            .and_then(|a| a.parse().ok())
            .unwrap_or(500);
        let ws = tempfile::tempdir_in("/var/tmp").expect("workspace");
        let (_sb_full, full) = session(ws.path(), Layer::Full);
        let (_sb_l2, l2) = session(ws.path(), Layer::Landlock);
        let fresh = {
            let mut p = Policy::with_workspace(ws.path());
            p.layer = Some(Layer::Full);
            Sandbox::new(p).expect("sandbox")
        };
        let has_bwrap = Path::new("/usr/bin/bwrap").exists();
        type Row<'a> = (&'static str, Box<dyn FnMut() + 'a>);
        let mut rows: Vec<Row<'_>> = vec![
            (
                "std::process::Command",
                Box::new(|| assert!(StdCommand::new("/bin/true").status().unwrap().success())),
            ),
            (
                "session, full layer",
                Box::new(|| assert!(full.command("/bin/true").status().unwrap().success())),
            ),
            (
                "session, layer 2",
                Box::new(|| assert!(l2.command("/bin/true").status().unwrap().success())),
            ),
            (
                "fresh full sandbox",
                Box::new(|| assert!(fresh.command("/bin/true").status().unwrap().success())),
            ),
        ];
        if has_bwrap {
            let w = ws.path().to_path_buf();
            rows.push((
                "bwrap",
                Box::new(move || assert!(bwrap(&w).status().unwrap().success())),
            ));
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(iters); rows.len()];
        for (_, run) in &mut rows {
            for _ in 0..20 {
                run();
            }
        }
        for _ in 0..iters {
            for (i, (_, run)) in rows.iter_mut().enumerate() {
                let t = Instant::now();
                run();
                times[i].push(t.elapsed());
            }
        }
        let plain = median(&mut times[0]);
        println!("spawn + wait of /bin/true, {iters} interleaved runs, medians:");
        for (i, (name, _)) in rows.iter().enumerate() {
            let m = median(&mut times[i]);
            println!(
                "  {name:<24} {:>8.1} µs  {:>5.2}× plain",
                m.as_secs_f64() * 1e6,
                m.as_secs_f64() / plain.as_secs_f64()
            );
        }
        drop(rows);
        println!("commands/s (2 s each):");
        for threads in [1, 2] {
            let s = rate(threads, 2.0, &|| {
                assert!(full.command("/bin/true").status().unwrap().success())
            });
            let f = rate(threads, 2.0, &|| {
                assert!(fresh.command("/bin/true").status().unwrap().success())
            });
            let p = rate(threads, 2.0, &|| {
                assert!(StdCommand::new("/bin/true").status().unwrap().success())
            });
            let b = if has_bwrap {
                let w = ws.path().to_path_buf();
                format!(
                    "{:>7.0}",
                    rate(threads, 2.0, &|| {
                        assert!(bwrap(&w).status().unwrap().success())
                    })
                )
            } else {
                "      -".into()
            };
            println!(
                "  {threads} thread(s): session {s:>7.0}  fresh sandbox {f:>7.0}  bwrap {b}  plain {p:>7.0}"
            );
        }
        full.close().unwrap();
        l2.close().unwrap();
    }
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("session_bench: Linux only");
}
