//! Process lifetime: `kill_on_drop`, `wait_timeout`, `kill` ending the whole tree, pausing
//! a sandbox with `SIGSTOP`/`SIGCONT`, and the program's host pid (`program_id`), in every
//! mode: the full layer, layer 2 (landlock) and passthrough (`mode = "disabled"`).

#![cfg(target_os = "linux")]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Feature;
use stockade::{Layer, Mode, Sandbox, Stdio};

/// The three ways a command runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Setup {
    Full,
    Landlock,
    Disabled,
}

const SETUPS: [Setup; 3] = [Setup::Full, Setup::Landlock, Setup::Disabled];

fn sandbox_for(ws: &Path, setup: Setup) -> Sandbox {
    common::sandbox(ws, |p| match setup {
        Setup::Full => {
            p.layer = Some(Layer::Full);
            p.min_layer = Some(Layer::Full);
        }
        Setup::Landlock => {
            p.layer = Some(Layer::Landlock);
            p.min_layer = Some(Layer::Landlock);
        }
        Setup::Disabled => p.mode = Mode::Disabled,
    })
}

/// A `sleep` argument unique to this process and call, found in host command lines.
fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "60.{}{:03}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The host's `sleep <marker>` processes.
fn sleeps(marker: &str) -> Vec<u32> {
    let cmd = format!("sleep {marker}");
    common::host_processes(|c| c.trim_end() == cmd)
}

/// Waits up to `limit` for `f`; the time it took, or `None`.
fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if f() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Kills what a failed assertion would leave behind.
fn kill_leftovers(marker: &str) {
    for pid in common::host_processes_with(marker) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// `kill_on_drop`: dropping the `Child` ends the program and its background child within
/// 300 ms, in every mode.
#[test]
fn kill_on_drop_ends_the_whole_tree() {
    require!(Feature::UserNs);
    let ws = common::tempdir();
    for setup in SETUPS {
        let sb = sandbox_for(ws.path(), setup);
        let m = marker();
        let child = sb
            .command("sh")
            .args(["-c", &format!("sleep {m} & sleep {m}")])
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        assert!(
            within(Duration::from_secs(10), || sleeps(&m).len() == 2).is_some(),
            "{setup:?}: both sleeps never ran"
        );
        drop(child);
        let took = within(Duration::from_secs(3), || {
            common::host_processes_with(&m).is_empty()
        });
        kill_leftovers(&m);
        let took = took.unwrap_or_else(|| panic!("{setup:?}: the tree outlived the drop"));
        assert!(
            took <= Duration::from_millis(300),
            "{setup:?}: the tree took {took:?} to end"
        );
    }
}

/// The default is std's: a dropped `Child` runs on (so the test above can tell).
#[test]
fn without_kill_on_drop_a_dropped_child_runs_on() {
    require!(Feature::UserNs);
    let ws = common::tempdir();
    for setup in SETUPS {
        let sb = sandbox_for(ws.path(), setup);
        let m = marker();
        let child = sb.command("sleep").arg(&m).spawn().unwrap();
        assert!(within(Duration::from_secs(10), || sleeps(&m).len() == 1).is_some());
        drop(child);
        std::thread::sleep(Duration::from_millis(300));
        let alive = sleeps(&m).len();
        kill_leftovers(&m);
        assert_eq!(alive, 1, "{setup:?}: the program did not run on");
    }
}

/// `wait_timeout`: `None` while the program runs, then its exact status; a killed one
/// reports `SIGKILL`.
#[test]
fn wait_timeout_returns_none_on_time_and_the_exact_status_otherwise() {
    use std::os::unix::process::ExitStatusExt;
    require!(Feature::UserNs);
    let ws = common::tempdir();
    for setup in SETUPS {
        let sb = sandbox_for(ws.path(), setup);
        let mut child = sb
            .command("sh")
            .args(["-c", "sleep 0.6; exit 7"])
            .spawn()
            .unwrap();
        let start = Instant::now();
        assert_eq!(
            child.wait_timeout(Duration::from_millis(100)).unwrap(),
            None,
            "{setup:?}"
        );
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited < Duration::from_millis(500),
            "{setup:?}: the timeout took {waited:?}"
        );
        let status = child.wait_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(7), "{setup:?}");
        assert!(start.elapsed() < Duration::from_secs(5), "{setup:?}");
        // Known already: returned at once, the same.
        let again = child.wait_timeout(Duration::ZERO).unwrap();
        assert_eq!(again.and_then(|s| s.code()), Some(7));

        let mut child = sb.command("sleep").arg("60").spawn().unwrap();
        assert_eq!(child.wait_timeout(Duration::ZERO).unwrap(), None);
        child.kill().unwrap();
        let status = child.wait_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(
            status.and_then(|s| s.signal()),
            Some(libc::SIGKILL),
            "{setup:?}: {status:?}"
        );
    }
}

/// `kill()` ends the program's background children too, in every mode; in passthrough
/// they would otherwise hold the stdout pipe and the host's reader would hang.
#[test]
fn kill_ends_grandchildren_and_the_reader_sees_the_end() {
    require!(Feature::UserNs);
    let ws = common::tempdir();
    for setup in SETUPS {
        let sb = sandbox_for(ws.path(), setup);
        let m = marker();
        let mut child = sb
            .command("sh")
            .args(["-c", &format!("sleep {m} & sleep {m} & echo started; wait")])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "started\n");
        assert!(within(Duration::from_secs(10), || sleeps(&m).len() == 2).is_some());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut rest = Vec::new();
            let _ = tx.send(stdout.read_to_end(&mut rest).map(|_| rest));
        });
        child.kill().unwrap();
        let ended = rx.recv_timeout(Duration::from_secs(5));
        let gone = within(Duration::from_millis(300), || {
            common::host_processes_with(&m).is_empty()
        });
        kill_leftovers(&m);
        let rest = ended.unwrap_or_else(|_| panic!("{setup:?}: the stdout reader hangs"));
        assert_eq!(rest.unwrap(), b"");
        assert!(gone.is_some(), "{setup:?}: grandchildren outlived kill()");
        child.wait().unwrap();
    }
}

/// The wall-time limit ends the tree in passthrough too (its watchdog kills the program's
/// group, as `kill()` does): no background `sleep` is left.
#[test]
fn wall_time_in_passthrough_ends_grandchildren() {
    let ws = common::tempdir();
    let m = marker();
    let sb = common::sandbox(ws.path(), |p| {
        p.mode = Mode::Disabled;
        p.limits.wall_time = Some(Duration::from_millis(500));
    });
    let mut child = sb
        .command("sh")
        .args(["-c", &format!("sleep {m} & sleep {m}")])
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let gone = within(Duration::from_millis(300), || {
        common::host_processes_with(&m).is_empty()
    });
    kill_leftovers(&m);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert!(gone.is_some(), "grandchildren outlived the wall time");
}

/// `SIGSTOP` pauses a counting loop, `SIGCONT` resumes it. The loop runs in a child of the
/// program (a background subshell): stopping the program alone would not stop it.
#[test]
fn sigstop_pauses_the_sandbox_and_sigcont_resumes_it() {
    require!(Feature::UserNs);
    let ws = common::tempdir();
    for setup in SETUPS {
        let sb = sandbox_for(ws.path(), setup);
        let mut child = sb
            .command("sh")
            .args([
                "-c",
                "(i=0; while :; do i=$((i+1)); echo $i; sleep 0.01; done) & wait",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        for _ in 0..3 {
            rx.recv_timeout(Duration::from_secs(10))
                .expect("counting")
                .unwrap();
        }
        child.signal(libc::SIGSTOP).unwrap();
        // What was under way may still arrive; then nothing.
        std::thread::sleep(Duration::from_millis(100));
        while rx.try_recv().is_ok() {}
        let quiet = rx.recv_timeout(Duration::from_millis(400));
        assert!(
            quiet.is_err(),
            "{setup:?}: counts on while stopped: {quiet:?}"
        );
        assert_eq!(child.try_wait().unwrap(), None, "{setup:?}");
        child.signal(libc::SIGCONT).unwrap();
        for _ in 0..3 {
            rx.recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("{setup:?}: not resumed"))
                .unwrap();
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// A signal outside the list is refused, and the list now names the job-control ones.
#[test]
fn other_signals_are_refused() {
    require!(Feature::UserNs);
    let ws = common::tempdir();
    let sb = sandbox_for(ws.path(), Setup::Full);
    let mut child = sb.command("sleep").arg("60").spawn().unwrap();
    let e = child.signal(libc::SIGSEGV).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("SIGSTOP"), "{e}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `program_id` is the program's pid on the host: `/proc/<program_id>/cmdline` is its
/// argv. On the layers with an init it differs from `id()` (the init's pid); on the full
/// layer the program sees another pid inside (its own namespace's), which proves nothing
/// on the host, so the command line is compared.
#[test]
fn program_id_names_the_program_on_the_host() {
    require!(Feature::UserNs);
    let ws = common::tempdir();
    for setup in SETUPS {
        let sb = sandbox_for(ws.path(), setup);
        let m = marker();
        let mut child = sb
            .command("sh")
            .args(["-c", &format!("echo $$; exec sleep {m}")])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.program_id().expect("program_id");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let inside: u32 = line.trim().parse().unwrap();
        // After the `exec`: the same process, now `sleep`.
        let cmdline = || std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let want = format!("sleep\0{m}\0").into_bytes();
        assert!(
            within(Duration::from_secs(5), || cmdline() == want).is_some(),
            "{setup:?}: /proc/{pid}/cmdline is {:?}",
            String::from_utf8_lossy(&cmdline())
        );
        match setup {
            Setup::Full => {
                assert_ne!(pid, child.id());
                assert_ne!(inside, pid, "the program sees its namespace's pid");
            }
            Setup::Landlock => {
                assert_ne!(pid, child.id());
                assert_eq!(inside, pid);
            }
            Setup::Disabled => {
                assert_eq!(pid, child.id());
                assert_eq!(inside, pid);
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// The `stockade-*` entries of `dir`, with the entries of each directory among them, sorted.
fn stockade_entries(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("stockade-") {
            continue;
        }
        if let Ok(inner) = std::fs::read_dir(e.path()) {
            for i in inner.flatten() {
                out.push(format!("{name}/{}", i.file_name().to_string_lossy()));
            }
        }
        out.push(name);
    }
    out.sort();
    out
}

/// A host killed with `SIGKILL` cannot remove its command's private `TMPDIR` on layer 2
/// (nor, for a root host, the sandbox's directory holding it). A later host of the same
/// user removes them, and leaves alone those of a host that still runs, even one started
/// before it.
#[test]
fn a_killed_hosts_private_tmp_is_removed_by_a_later_host() {
    let (_w, ws) = common::var_tempdir();
    let (_t, tmp) = common::var_tempdir();
    let host = |program: &[&str]| {
        let mut c = std::process::Command::new(common::stockade_exe());
        c.args([
            "run",
            "--no-pty",
            "--layer",
            "landlock",
            "--min-layer",
            "landlock",
        ])
        .arg("--workspace")
        .arg(&ws)
        .arg("--")
        .args(program)
        .env("TMPDIR", &tmp)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
        c
    };
    let started =
        |marker: &str| within(Duration::from_secs(10), || !sleeps(marker).is_empty()).is_some();
    let (a_marker, b_marker) = (marker(), marker());
    let mut a = host(&["sleep", &a_marker]).spawn().unwrap();
    assert!(started(&a_marker), "host A's program did not start");
    let of_a = stockade_entries(&tmp);
    assert!(
        of_a.iter().any(|e| e.contains("stockade-tmp-")),
        "host A made no private TMPDIR: {of_a:?}"
    );
    // Host B starts (and sweeps) while A runs: A's directories stay.
    let b = host(&["sleep", &b_marker]).spawn().unwrap();
    if !started(&b_marker) {
        kill_leftovers(&a_marker);
        panic!("host B's program did not start");
    }
    let of_b: Vec<String> = stockade_entries(&tmp)
        .into_iter()
        .filter(|e| !of_a.contains(e))
        .collect();
    assert!(!of_b.is_empty(), "host B made nothing");
    a.kill().unwrap();
    a.wait().unwrap();
    assert!(
        within(Duration::from_secs(5), || sleeps(&a_marker).is_empty()).is_some(),
        "host A's program outlived its killed host"
    );
    let now = stockade_entries(&tmp);
    for e in of_a.iter().chain(&of_b) {
        assert!(
            now.contains(e),
            "{e} went before a later host swept: {now:?}"
        );
    }
    // Host C sweeps: A's go (within its run: the sweep has a thread of its own), B's stay.
    let c = host(&["sleep", "1"]).output().unwrap();
    assert!(c.status.success(), "{}", common::output_text(&c));
    let now = stockade_entries(&tmp);
    let kept: Vec<&String> = of_a.iter().filter(|e| now.contains(e)).collect();
    let lost: Vec<&String> = of_b.iter().filter(|e| !now.contains(e)).collect();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(b.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let b_out = b.wait_with_output().unwrap();
    assert!(
        kept.is_empty(),
        "a killed host's directories stayed: {kept:?}"
    );
    assert!(
        lost.is_empty(),
        "a running host's directories went: {lost:?}"
    );
    // B ended as a host ends: it removed its own, and nothing is left.
    assert_eq!(
        stockade_entries(&tmp),
        Vec::<String>::new(),
        "B: {}",
        common::output_text(&b_out)
    );
}

/// A program that takes its own rights away in its private `TMPDIR` (`chmod 000` on
/// directories, a directory without write right, the `TMPDIR` itself at `000`) does not
/// keep it on the host: the removal gives the directories back `0700` and removes them.
/// For an unprivileged host (this test's run as uid 65534) they stayed for good, and the
/// sweep of later hosts could not remove them either. (As root the modes do not bind.)
#[test]
fn a_private_tmp_the_program_locked_itself_out_of_is_removed() {
    let (_w, ws) = common::var_tempdir();
    let (_t, tmp) = common::var_tempdir();
    let layers: &[&str] = if common::Feature::UserNs.missing().is_none() {
        &["landlock", "full"]
    } else {
        &["landlock"]
    };
    for layer in layers {
        let out = std::process::Command::new(common::stockade_exe())
            .args(["run", "--no-pty", "--layer", layer, "--min-layer", layer])
            .arg("--workspace")
            .arg(&ws)
            .args(["--", "sh", "-c"])
            .arg(
                "set -e; cd \"$TMPDIR\"; mkdir -p d/e r; echo x > d/e/f; echo y > r/g; \
                 chmod 000 d/e d; chmod 500 r; chmod 000 .; echo locked",
            )
            .env("TMPDIR", &tmp)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{layer}: {}",
            common::output_text(&out)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "locked",
            "{layer}"
        );
        assert_eq!(
            stockade_entries(&tmp),
            Vec::<String>::new(),
            "{layer}: {}",
            common::output_text(&out)
        );
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
