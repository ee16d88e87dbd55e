//! Why a host cannot sandbox, on real hosts made so: `stockade detect` and a refused run
//! name the cause and its remedy.
//!
//! Each case changes nothing of this host: it runs the CLI in a user namespace of its own
//! (`unshare -U -r`, plus a mount namespace where it covers `/proc`), where
//! `user.max_user_namespaces` is that namespace's own and every mount is private. The
//! tests check afterwards that the host's value and `/proc` are as they were.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{Feature, tempdir};

/// `unshare` (util-linux), which makes the namespaces the cases run in.
const UNSHARE: &str = "/usr/bin/unshare";

/// The host's own limit, which no case may change.
const MAX_USER_NAMESPACES: &str = "/proc/sys/user/max_user_namespaces";

/// Returns from the test with a skip line when `unshare` is missing.
macro_rules! require_unshare {
    () => {
        if !Path::new(UNSHARE).exists() {
            let reason = "unshare not found (apt-get install util-linux)";
            assert!(!common::required(Feature::Setpriv), "{reason}");
            common::skip(module_path!(), reason);
            return;
        }
    };
}

/// Runs `script` under `sh` in new namespaces (`unshare` with `flags`), with `$S` the
/// stockade binary and `$W` a workspace.
fn in_namespaces(flags: &[&str], script: &str, ws: &Path) -> Output {
    Command::new(UNSHARE)
        .args(flags)
        .args(["sh", "-c", script])
        .env("S", common::stockade_exe())
        .env("W", ws)
        .output()
        .expect("run unshare")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `detect --json`'s output, with its stable fields checked.
fn detect_json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(out));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)));
    for field in ["capabilities", "layers", "best", "cgroup_limits", "causes"] {
        assert!(v.get(field).is_some(), "no {field}: {v}");
    }
    v
}

/// The ids of `detect --json`'s causes.
fn cause_ids(v: &serde_json::Value) -> Vec<String> {
    v["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            for field in ["summary", "remedy", "feature"] {
                assert!(c[field].is_string(), "{field}: {c}");
            }
            c["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// What must be the same after every case: the host's limit, and its `/proc`.
struct HostState {
    max_user_namespaces: String,
}

impl HostState {
    fn now() -> HostState {
        HostState {
            max_user_namespaces: std::fs::read_to_string(MAX_USER_NAMESPACES).unwrap(),
        }
    }

    fn check_unchanged(&self) {
        assert_eq!(
            std::fs::read_to_string(MAX_USER_NAMESPACES).unwrap(),
            self.max_user_namespaces
        );
        assert!(Path::new("/proc/self/status").exists(), "/proc is gone");
    }
}

#[test]
fn a_host_that_sandboxes_has_no_cause() {
    require!(Feature::UserNs);
    let out = Command::new(common::stockade_exe())
        .args(["detect", "--json"])
        .output()
        .unwrap();
    let v = detect_json(&out);
    assert_eq!(v["best"], "full");
    assert_eq!(cause_ids(&v), Vec::<String>::new());
    let out = Command::new(common::stockade_exe())
        .arg("detect")
        .output()
        .unwrap();
    let plain = String::from_utf8_lossy(&out.stdout);
    assert!(
        !plain.contains("cause") && !plain.contains("remedy"),
        "{plain}"
    );
}

#[test]
fn max_user_namespaces_zero_is_named_with_its_remedy() {
    require!(Feature::UserNs);
    require_unshare!();
    let host = HostState::now();
    let ws = tempdir();
    // The limit of this case's own user namespace, not the host's.
    let zero = "echo 0 > /proc/sys/user/max_user_namespaces || exit 99; ";
    let out = in_namespaces(
        &["-U", "-r"],
        &format!("{zero} exec \"$S\" detect --json"),
        ws.path(),
    );
    let v = detect_json(&out);
    assert_eq!(cause_ids(&v), ["max-user-namespaces"], "{v}");
    let cause = &v["causes"][0];
    assert_eq!(cause["feature"], "user_namespaces");
    assert!(
        cause["summary"]
            .as_str()
            .unwrap()
            .starts_with("user.max_user_namespaces = 0"),
        "{cause}"
    );
    assert!(
        cause["remedy"]
            .as_str()
            .unwrap()
            .contains("sysctl -w user.max_user_namespaces="),
        "{cause}"
    );
    assert_eq!(v["capabilities"]["user_namespaces"]["available"], false);
    assert_eq!(v["best"], "landlock");
    // The text form says the same, as a cause and a remedy row.
    let out = in_namespaces(
        &["-U", "-r"],
        &format!("{zero} exec \"$S\" detect"),
        ws.path(),
    );
    let plain = String::from_utf8_lossy(&out.stdout);
    assert!(
        plain.contains("cause") && plain.contains("[max-user-namespaces]"),
        "{plain}"
    );
    assert!(
        plain.contains("remedy") && plain.contains("sysctl -w"),
        "{plain}"
    );

    // A run that refuses to degrade: the error names the cause and the remedy.
    let out = in_namespaces(
        &["-U", "-r"],
        &format!("{zero} exec \"$S\" run --workspace \"$W\" --fallback refuse -- true"),
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("containment layer `full` is not available")
            && err.contains("No space left on device (user.max_user_namespaces = 0")
            && err.contains("; to fix: raise it: `sysctl -w user.max_user_namespaces="),
        "{err}"
    );
    // One that degrades: the warning says the same, and the program runs on layer 2.
    let out = in_namespaces(
        &["-U", "-r"],
        &format!("{zero} exec \"$S\" run --workspace \"$W\" --min-layer landlock -- echo ran here"),
        ws.path(),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran here\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("running on layer `landlock`")
            && err.contains("user.max_user_namespaces = 0")
            && err.contains("to fix: raise it"),
        "{err}"
    );
    host.check_unchanged();
}

#[test]
fn a_directory_bound_over_proc_is_named() {
    require!(Feature::UserNs);
    require_unshare!();
    let host = HostState::now();
    let ws = tempdir();
    let empty = tempdir();
    let cover = format!(
        "mount --bind '{}' /proc || exit 99; ",
        empty.path().display()
    );
    let out = in_namespaces(
        &["-U", "-r", "-m"],
        &format!("{cover} exec \"$S\" detect --json"),
        ws.path(),
    );
    let v = detect_json(&out);
    assert_eq!(cause_ids(&v), ["proc-missing"], "{v}");
    assert!(
        v["causes"][0]["remedy"]
            .as_str()
            .unwrap()
            .contains("mount -t proc proc /proc"),
        "{v}"
    );
    assert_eq!(v["capabilities"]["user_namespaces"]["available"], false);
    let out = in_namespaces(
        &["-U", "-r", "-m"],
        &format!("{cover} exec \"$S\" run --workspace \"$W\" --fallback refuse -- true"),
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/proc is not mounted") && err.contains("to fix: mount procfs on /proc"),
        "{err}"
    );
    host.check_unchanged();
}

#[test]
fn a_read_only_proc_is_named() {
    require!(Feature::UserNs);
    require_unshare!();
    let host = HostState::now();
    let ws = tempdir();
    // A procfs of a PID namespace of its own, mounted read-only over /proc.
    let ro = "mount -t proc -o ro proc /proc || exit 99; ";
    let flags = ["-U", "-r", "-m", "-p", "-f"];
    let out = in_namespaces(
        &flags,
        &format!("{ro} exec \"$S\" detect --json"),
        ws.path(),
    );
    let v = detect_json(&out);
    assert_eq!(cause_ids(&v), ["proc-read-only"], "{v}");
    assert_eq!(v["capabilities"]["user_namespaces"]["available"], false);
    // A run is refused by the policy (the layer's refusal, not a setup error), naming it.
    let out = in_namespaces(
        &flags,
        &format!("{ro} exec \"$S\" run --workspace \"$W\" --fallback refuse -- true"),
        ws.path(),
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("containment layer `full` is not available")
            && err.contains("/proc is mounted read-only")
            && err.contains("to fix: mount /proc read-write"),
        "{err}"
    );
    host.check_unchanged();
}

#[test]
fn masked_proc_entries_are_named_with_the_runtime_options() {
    require!(Feature::UserNs);
    require_unshare!();
    let host = HostState::now();
    let ws = tempdir();
    // What a container runtime does to /proc/sys: bound read-only over itself.
    let mask = "mount --bind -o ro /proc/sys /proc/sys || exit 99; ";
    let out = in_namespaces(
        &["-U", "-r", "-m"],
        &format!("{mask} exec \"$S\" detect --json"),
        ws.path(),
    );
    let v = detect_json(&out);
    assert_eq!(cause_ids(&v), ["proc-overmounted"], "{v}");
    assert_eq!(v["causes"][0]["feature"], "fresh_proc");
    assert_eq!(v["capabilities"]["user_namespaces"]["available"], true);
    assert_eq!(v["capabilities"]["fresh_proc"]["available"], false);
    let remedy = v["causes"][0]["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("proc_fallback = true") && remedy.contains("systempaths=unconfined"),
        "{remedy}"
    );
    host.check_unchanged();
}

/// A filter as a container runtime's default seccomp profile has it: `unshare` refused
/// with `EPERM`, `clone` with `CLONE_NEWUSER` refused with `EPERM`, `clone3` with `ENOSYS`
/// (Docker's answer, so that libc falls back to `clone`), everything else allowed.
fn container_filter() -> Vec<libc::sock_filter> {
    const NR: u32 = 0; // seccomp_data.nr
    const ARCH: u32 = 4; // seccomp_data.arch
    const ARG0: u32 = 16; // seccomp_data.args[0], its low 32 bits (little-endian)
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7;
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let load = |off| stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, off);
    let ret = |k| stmt(libc::BPF_RET | libc::BPF_K, k);
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    // A jump's offsets count the instructions after it: the index of each is noted.
    vec![
        /* 0 */ load(ARCH),
        /* 1 */ jump(AUDIT_ARCH, 1, 0),
        /* 2 */ ret(libc::SECCOMP_RET_ALLOW),
        /* 3 */ load(NR),
        /* 4 */ jump(libc::SYS_unshare as u32, 6, 0), // to 11
        /* 5 */ jump(libc::SYS_clone3 as u32, 7, 0), // to 13
        /* 6 */ jump(libc::SYS_clone as u32, 1, 0), // to 8
        /* 7 */ ret(libc::SECCOMP_RET_ALLOW),
        /* 8 */ load(ARG0),
        /* 9 */
        stmt(
            libc::BPF_ALU | libc::BPF_AND | libc::BPF_K,
            libc::CLONE_NEWUSER as u32,
        ),
        /* 10 */ jump(0, 1, 0), // no CLONE_NEWUSER: to 12
        /* 11 */ ret(errno(libc::EPERM)),
        /* 12 */ ret(libc::SECCOMP_RET_ALLOW),
        /* 13 */ ret(errno(libc::ENOSYS)),
    ]
}

/// Sets no_new_privs and installs the filter program at `prog` (a `sock_fprog`'s address).
fn install(prog: usize) -> std::io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mode = libc::SECCOMP_MODE_FILTER as libc::c_ulong;
    // SAFETY: `prog` is the address of a `sock_fprog` whose filter outlives the spawn
    // (`under_container_filter` keeps both until `output()` returns); the kernel copies the
    // program.
    if unsafe { libc::prctl(libc::PR_SET_SECCOMP, mode, prog, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `cmd`, run under [`container_filter`].
fn under_container_filter(mut cmd: Command) -> Output {
    use std::os::unix::process::CommandExt;
    let filter = container_filter();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    let prog_addr = &raw const prog as usize;
    // SAFETY: the closure runs in the forked child before exec and makes two prctl calls
    // (`install`), which allocate nothing and take no lock.
    unsafe {
        cmd.pre_exec(move || install(prog_addr));
    }
    let out = cmd.output().expect("run under the filter");
    drop(filter);
    out
}

#[test]
fn a_container_seccomp_profile_that_refuses_namespaces_is_named() {
    require!(Feature::UserNs);
    let ws = tempdir();
    // The filter itself, proven: unshare -U is refused under it.
    if Path::new(UNSHARE).exists() {
        let mut cmd = Command::new(UNSHARE);
        cmd.args(["-U", "true"]);
        let out = under_container_filter(cmd);
        assert!(!out.status.success(), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Operation not permitted"), "{err}");
        // And a plain fork (clone without namespace flags) still works under it.
        let mut sh = Command::new("sh");
        sh.args(["-c", "/bin/true && echo forked"]);
        let out = under_container_filter(sh);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "forked\n",
            "{}",
            text(&out)
        );
    }
    let mut cmd = Command::new(common::stockade_exe());
    cmd.args(["detect", "--json"]);
    let v = detect_json(&under_container_filter(cmd));
    assert_eq!(cause_ids(&v), ["container-seccomp"], "{v}");
    let remedy = v["causes"][0]["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("--security-opt seccomp=unconfined") && remedy.contains("seccompProfile"),
        "{remedy}"
    );
    assert_eq!(v["capabilities"]["user_namespaces"]["available"], false);
    assert_eq!(v["best"], "landlock");
    let mut cmd = Command::new(common::stockade_exe());
    cmd.arg("run")
        .arg("--workspace")
        .arg(ws.path())
        .args(["--fallback", "refuse", "--", "true"]);
    let out = under_container_filter(cmd);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Operation not permitted (a seccomp filter (Seccomp: 2")
            && err.contains("to fix: run the container with a profile"),
        "{err}"
    );
}

#[test]
fn as_nobody() {
    common::rerun_as_nobody(&[
        "a_host_that_sandboxes_has_no_cause",
        "max_user_namespaces_zero_is_named_with_its_remedy",
        "a_directory_bound_over_proc_is_named",
        "a_read_only_proc_is_named",
        "masked_proc_entries_are_named_with_the_runtime_options",
        "a_container_seccomp_profile_that_refuses_namespaces_is_named",
    ]);
}
