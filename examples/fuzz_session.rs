//! A fuzz harness's loop: a small C target run once per input, through a warm session,
//! through a fresh sandbox per input, and bare; execs/s for each.
//!
//! ```text
//! cargo run --release --example fuzz_session [-- INPUTS]
//! ```
//!
//! The target (built here with `cc`) parses a length-prefixed record from stdin; it crashes
//! (`SIGSEGV`) on the record `CRSH` and hangs on `HANG`. Each input is a file given as
//! stdin. A crash is reported with its exact signal and core flag; a hang is ended by the
//! per-command wall-time limit (`limits.wall_time`, 300 ms here), which a session applies to
//! each command and never to the session itself.

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::File;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command as StdCommand, ExitStatus, Stdio as StdStdio};
    use std::time::{Duration, Instant};

    use stockade::{Layer, Policy, Sandbox, Stdio};

    const TARGET: &str = r#"
    #include <string.h>
    #include <unistd.h>
    int main(void) {
        unsigned char buf[256];
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 1) return 1;
        unsigned len = buf[0];
        if (len + 1 > (unsigned)n) return 2;
        if (len >= 4 && memcmp(buf + 1, "CRSH", 4) == 0) { volatile int *p = 0; *p = 1; }
        if (len >= 4 && memcmp(buf + 1, "HANG", 4) == 0) for (;;) {}
        unsigned sum = 0;
        for (unsigned i = 1; i <= len; i++) sum = sum * 31 + buf[i];
        return sum % 7 == 3 ? 3 : 0;
    }
    "#;

    /// A deterministic input: mostly noise, now and then a crash or a hang.
    fn input(i: u64) -> Vec<u8> {
        let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        match i % 97 {
            13 => b"\x04CRSH".to_vec(),
            71 if i % 2 == 1 => b"\x04HANG".to_vec(),
            _ => {
                let len = (next() % 32) as u8;
                let mut v = vec![len];
                v.extend((0..len).map(|_| next() as u8));
                v
            }
        }
    }

    #[derive(Default)]
    struct Tally {
        ok: usize,
        exits: usize,
        crashes: Vec<(u64, i32, bool)>,
        hangs: usize,
    }

    fn note(t: &mut Tally, i: u64, st: ExitStatus, hung: bool) {
        if hung {
            t.hangs += 1;
        } else if let Some(sig) = st.signal() {
            t.crashes.push((i, sig, st.core_dumped()));
        } else if st.success() {
            t.ok += 1;
        } else {
            t.exits += 1;
        }
    }

    pub fn main() {
        let inputs: u64 = std::env::args()
            .nth(1)
            .and_then(|a| a.parse().ok())
            .unwrap_or(1000);
        let ws = tempfile::tempdir_in("/var/tmp").expect("workspace");
        let src = ws.path().join("target.c");
        std::fs::write(&src, TARGET).unwrap();
        let exe = ws.path().join("target");
        let built = StdCommand::new("cc")
            .args(["-O1", "-o"])
            .arg(&exe)
            .arg(&src)
            .status();
        if !built.is_ok_and(|s| s.success()) {
            eprintln!("fuzz_session: needs a C compiler (cc)");
            std::process::exit(2);
        }
        let wall = Duration::from_millis(300);
        let mut policy = Policy::with_workspace(ws.path());
        policy.layer = Some(Layer::Full);
        policy.min_layer = Some(Layer::Landlock);
        policy.limits.wall_time = Some(wall);
        let sandbox = Sandbox::new(policy).expect("sandbox");
        let session = sandbox.session().expect("session");
        let file = ws.path().join("input");
        let feed = |i: u64| -> File {
            std::fs::write(&file, input(i)).unwrap();
            File::open(&file).unwrap()
        };
        type Way<'a> = (&'static str, Box<dyn Fn(u64) -> (ExitStatus, bool) + 'a>);
        let ways: Vec<Way<'_>> = vec![
            (
                "session",
                Box::new(|i| {
                    let mut c = session.command(&exe);
                    c.stdin(Stdio::from(feed(i))).stdout(Stdio::null());
                    let mut child = c.spawn().unwrap();
                    let st = child.wait().unwrap();
                    let hung = child.termination().is_some_and(|t| t.by_limit());
                    (st, hung)
                }),
            ),
            (
                "fresh sandbox",
                Box::new(|i| {
                    let mut c = sandbox.command(&exe);
                    c.stdin(Stdio::from(feed(i))).stdout(Stdio::null());
                    let mut child = c.spawn().unwrap();
                    let st = child.wait().unwrap();
                    let hung = child.termination().is_some_and(|t| t.by_limit());
                    (st, hung)
                }),
            ),
            (
                "bare",
                Box::new(|i| {
                    let mut child = StdCommand::new(&exe)
                        .stdin(StdStdio::from(feed(i)))
                        .stdout(StdStdio::null())
                        .spawn()
                        .unwrap();
                    let start = Instant::now();
                    loop {
                        if let Some(st) = child.try_wait().unwrap() {
                            return (st, false);
                        }
                        if start.elapsed() > wall {
                            let _ = child.kill();
                            return (child.wait().unwrap(), true);
                        }
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }),
            ),
        ];
        println!(
            "{inputs} inputs, wall time {} ms per input:",
            wall.as_millis()
        );
        for (name, run) in &ways {
            let mut t = Tally::default();
            let start = Instant::now();
            for i in 0..inputs {
                let (st, hung) = run(i);
                note(&mut t, i, st, hung);
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "  {name:<14} {:>7.0} execs/s  ({} ok, {} nonzero exits, {} crashes, {} hangs)",
                inputs as f64 / secs,
                t.ok,
                t.exits,
                t.crashes.len(),
                t.hangs
            );
            if let Some((i, sig, core)) = t.crashes.first() {
                println!("    first crash: input {i}, signal {sig}, core dumped: {core}");
            }
        }
        drop(ways);
        session.close().unwrap();
    }
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("fuzz_session: Linux only");
}
