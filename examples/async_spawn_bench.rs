//! What a spawn does to the rest of a tokio runtime: 64 concurrent tool calls, each
//! spawning `/bin/true` and waiting for it, over and over, while a light timer task
//! measures how late its 1 ms ticks come (the latency every other task on the runtime
//! sees).
//!
//! ```text
//! cargo run --release --features tokio --example async_spawn_bench [-- SPAWNS_PER_CALL ROUNDS WORKERS]
//! ```
//!
//! Rows, interleaved per round: the sandbox's synchronous `Command::spawn` called inline
//! on the runtime's workers; `spawn_blocking(move || cmd.spawn())` by hand;
//! `Command::spawn_async`; bare `tokio::process::Command` (no sandbox). Each row prints
//! the timer's lateness p50/p99/max and the spawn latency p50/p99 (from the call to the
//! `Child`), over every spawn of the row.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use stockade::{Policy, Sandbox};

const CALLS: usize = 64;

#[derive(Clone, Copy, Debug)]
enum Way {
    Inline,
    BlockingByHand,
    SpawnAsync,
    BareTokio,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Inline => "sync spawn inline on workers",
            Way::BlockingByHand => "spawn_blocking by hand",
            Way::SpawnAsync => "Command::spawn_async",
            Way::BareTokio => "bare tokio::process (no sandbox)",
        }
    }
}

type Call = Pin<Box<dyn Future<Output = Duration> + Send>>;

/// One tool call: spawn `/bin/true`, wait; returns the spawn's latency.
fn call(way: Way, sb: &Sandbox) -> Call {
    let sb = sb.clone();
    Box::pin(async move {
        let t = Instant::now();
        match way {
            Way::Inline => {
                let mut child = sb.command("/bin/true").spawn().expect("spawn");
                let d = t.elapsed();
                child.wait_async().await.expect("wait");
                d
            }
            Way::BlockingByHand => {
                let mut cmd = sb.command("/bin/true");
                let mut child = tokio::task::spawn_blocking(move || cmd.spawn())
                    .await
                    .expect("join")
                    .expect("spawn");
                let d = t.elapsed();
                child.wait_async().await.expect("wait");
                d
            }
            Way::SpawnAsync => {
                let mut child = sb.command("/bin/true").spawn_async().await.expect("spawn");
                let d = t.elapsed();
                child.wait_async().await.expect("wait");
                d
            }
            Way::BareTokio => {
                let mut child = tokio::process::Command::new("/bin/true")
                    .spawn()
                    .expect("spawn");
                let d = t.elapsed();
                child.wait().await.expect("wait");
                d
            }
        }
    })
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// Runs `CALLS` concurrent calls of `per_call` spawns each, with the timer beside them;
/// returns (timer lateness, spawn latencies).
fn run(
    rt: &tokio::runtime::Runtime,
    way: Way,
    sb: &Sandbox,
    per_call: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let timer = {
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut late = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    late.push(t.elapsed().saturating_sub(Duration::from_millis(1)));
                }
                late
            })
        };
        let mut calls = Vec::new();
        for _ in 0..CALLS {
            let sb = sb.clone();
            calls.push(tokio::spawn(async move {
                let mut spawn = Vec::with_capacity(per_call);
                for _ in 0..per_call {
                    spawn.push(call(way, &sb).await);
                }
                spawn
            }));
        }
        let mut spawn = Vec::new();
        for c in calls {
            spawn.extend(c.await.expect("call"));
        }
        stop.store(true, Ordering::Relaxed);
        (timer.await.expect("timer"), spawn)
    })
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let per_call = args.next().unwrap_or(10);
    let rounds = args.next().unwrap_or(3);
    let workers = args.next().unwrap_or(4);
    let ws = tempfile::tempdir().expect("tempdir");
    let sb = Sandbox::new(Policy::with_workspace(ws.path())).expect("sandbox");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    // Warm up: the first spawn probes the layer; the blocking pool starts its threads.
    run(&rt, Way::SpawnAsync, &sb, 1);
    println!(
        "{CALLS} concurrent calls x {per_call} spawns of /bin/true, {workers} workers, layer {:?}",
        sb.layer()
    );
    println!("timer lateness (1 ms sleeps) and spawn latency, ms; {rounds} rounds interleaved");
    println!(
        "| {:<34} | {:>8} | {:>8} | {:>8} | {:>10} | {:>10} |",
        "way", "tick p50", "tick p99", "tick max", "spawn p50", "spawn p99"
    );
    let ways = [
        Way::Inline,
        Way::BlockingByHand,
        Way::SpawnAsync,
        Way::BareTokio,
    ];
    for _ in 0..rounds {
        for way in ways {
            let (mut late, mut spawn) = run(&rt, way, &sb, per_call);
            let max = late.iter().copied().max().unwrap_or_default();
            println!(
                "| {:<34} | {:>8} | {:>8} | {:>8} | {:>10} | {:>10} |",
                way.name(),
                ms(pct(&mut late, 0.5)),
                ms(pct(&mut late, 0.99)),
                ms(max),
                ms(pct(&mut spawn, 0.5)),
                ms(pct(&mut spawn, 0.99)),
            );
        }
    }
}
