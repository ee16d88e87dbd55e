//! What `Command::explain` costs: the same runs with explain off and on.
//!
//! - spawn + wait of `/bin/true` (the explained spawn compiles the explained filter,
//!   makes a socket pair, receives the listener and starts the answering thread);
//! - `grep -r` over a tree of 2000 small files (a real workload: allowed calls only, but
//!   with explain on every `openat` and `newfstatat` notifies the host, which reads and
//!   classifies the path and lets the call continue);
//! - `make -B -j2` of 8 small C files with `cc` (the compiler's many opens and stats of
//!   headers and libraries each a round trip with explain on);
//! - `cargo build` of a small crate without dependencies, from scratch (cargo and rustc
//!   read-only from the caller's `CARGO_HOME` and `RUSTUP_HOME`, the target dir in the
//!   workspace): thousands of opens and stats of the toolchain's files;
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
    let src = ws.path().join("c");
    std::fs::create_dir(&src).unwrap();
    let mut objs = Vec::new();
    for i in 0..8 {
        let body = format!(
            "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
             int f{i}(const char *s) {{ char b[64]; snprintf(b, sizeof b, \"%s{i}\", s); \
             return (int)strlen(b) + atoi(s); }}\n"
        );
        std::fs::write(src.join(format!("f{i}.c")), body).unwrap();
        objs.push(format!("f{i}.o"));
    }
    std::fs::write(src.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    std::fs::write(
        src.join("Makefile"),
        format!(
            "prog: main.o {o}\n\tcc -o $@ $^\n%.o: %.c\n\tcc -O1 -c -o $@ $<\n",
            o = objs.join(" ")
        ),
    )
    .unwrap();
    let krate = ws.path().join("r");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"r\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    let mut lib = String::new();
    for m in 0..8 {
        lib.push_str(&format!(
            "pub mod m{m} {{ pub fn f(v: &[u64]) -> u64 {{ v.iter().map(|x| x * {m} + 1).sum() }} \
             #[derive(Debug, Clone, PartialEq)] pub struct S{m} {{ pub a: Vec<String> }} }}\n"
        ));
    }
    std::fs::write(krate.join("src/lib.rs"), lib).unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let cargo_home = std::env::var("CARGO_HOME").unwrap_or_else(|_| format!("{home}/.cargo"));
    let rustup_home = std::env::var("RUSTUP_HOME").unwrap_or_else(|_| format!("{home}/.rustup"));
    let cargo = format!("{cargo_home}/bin/cargo");
    let cargo_build = format!(
        "rm -rf t && {cargo} build -q --offline --target-dir t --manifest-path r/Cargo.toml"
    );
    let mut p = Policy::with_workspace(ws.path());
    p.read_only = vec![cargo_home.clone().into(), rustup_home.clone().into()];
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
            .env("CARGO_HOME", &cargo_home)
            .env("RUSTUP_HOME", &rustup_home)
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
    let cases: [(&str, &str, Vec<&str>); 7] = [
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
        (
            "make -B -j2: cc of 8 files and a link",
            "make",
            vec!["-s", "-B", "-j2", "-C", "c"],
        ),
        (
            "cargo build of a small crate, from scratch",
            "sh",
            vec!["-c", &cargo_build],
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
