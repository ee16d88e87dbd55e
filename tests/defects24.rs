//! The small defects of issue 24, each pinned: a short `secret_env` value is redacted or
//! refused (never printed as-is), a host's own config file gives its policy table to
//! `Policy::from_toml_value`, the CLI as PID 1 is not taken for a chroot, a root without
//! `/proc` still runs a command with `/dev/null` on stdin, and `network = "full"` reaches
//! the host's loopback (SECURITY.md says so) while `network = "none"` does not.

#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command as StdCommand, Output};

use common::Feature;

use stockade::error::PlanError;
use stockade::{Error, Layer, Mode, Network, Policy, Sandbox, Stdio};

/// Sets a policy's containment.
type SetMode = fn(&mut Policy);

/// The containment a test runs under: each enabled layer this machine gives, and disabled.
fn modes() -> Vec<(&'static str, SetMode)> {
    let mut modes: Vec<(&'static str, SetMode)> = Vec::new();
    if common::Feature::UserNs.missing().is_none() {
        modes.push(("full", |p| {
            p.layer = Some(Layer::Full);
            p.min_layer = Some(Layer::Full);
        }));
    }
    modes.push(("landlock", |p| {
        p.layer = Some(Layer::Landlock);
        p.min_layer = Some(Layer::Landlock);
    }));
    modes.push(("disabled", |p| p.mode = Mode::Disabled));
    modes
}

fn sandbox_in(ws: &Path, set: SetMode) -> Sandbox {
    common::sandbox(ws, set)
}

/// `PIN=4711` (4 bytes) is redacted from the output; so is a 7-byte value.
#[test]
fn short_secret_env_values_are_redacted() {
    let ws = common::tempdir();
    for (name, set) in modes() {
        let sb = sandbox_in(ws.path(), set);
        let mut child = sb
            .command("sh")
            .args(["-c", "echo pin=$PIN code=$CODE"])
            .secret_env("PIN", "4711")
            .secret_env("CODE", "abc1234")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut text = Vec::new();
        child.stdout.take().unwrap().read_to_end(&mut text).unwrap();
        assert!(child.wait().unwrap().success(), "{name}");
        let out = child.redactor().redact(&text).into_owned();
        assert_eq!(
            String::from_utf8_lossy(&out),
            "pin=[REDACTED] code=[REDACTED]\n",
            "{name}"
        );
    }
}

/// A value of 1 to 3 bytes cannot be redacted without replacing common text: the spawn
/// fails, naming the variable, and nothing runs.
#[test]
fn too_short_secret_env_values_are_refused() {
    let ws = common::tempdir();
    for (name, set) in modes() {
        let sb = sandbox_in(ws.path(), set);
        let marker = ws.path().join("ran");
        let err = sb
            .command("touch")
            .arg(&marker)
            .secret_env("PIN", "471")
            .spawn()
            .err()
            .unwrap_or_else(|| panic!("{name}: a 3-byte secret ran"));
        assert!(
            matches!(
                &err,
                Error::Plan(PlanError::SecretTooShort { name, len: 3, min: 4 }) if name == "PIN"
            ),
            "{name}: {err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("PIN") && text.contains("3 bytes"), "{text}");
        assert!(!text.contains("471"), "the error shows the value: {text}");
        assert!(!marker.exists(), "{name}: the command ran");
    }
}

/// Builds a minimal root at `$R/root` (a plain directory on a tmpfs, the host's system
/// directories bound, the workspace at `/ws`, the CLI at `/stockade`, no `/proc` unless
/// asked), then runs `"$@"` in it: with `PID1=1` as PID 1 of a new PID namespace whose
/// own `/proc` is mounted in the root, then `chroot`, as a container runtime starts a
/// chroot'ed entrypoint; else through `pivot_root`, as a runtime enters an image.
const MINIMAL_ROOT: &str = r#"set -e
mount -t tmpfs -o mode=0755 none "$R"
B="$R/root"
mkdir "$B"
for d in usr bin sbin lib lib32 lib64 libx32 etc; do
    if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$B/$d"
    elif [ -d "/$d" ]; then mkdir "$B/$d" && mount --rbind "/$d" "$B/$d"; fi
done
mkdir "$B/dev" "$B/proc" "$B/ws" "$B/tmp"
chmod 1777 "$B/tmp"
mount --rbind /dev "$B/dev"
if [ "$DEVMIN" = 1 ]; then
    mount -t tmpfs -o mode=0755 none "$B/dev"
    for n in null zero full random urandom tty; do
        touch "$B/dev/$n" && mount --bind "/dev/$n" "$B/dev/$n"
    done
fi
mount --bind "$WS" "$B/ws"
touch "$B/stockade" && mount --bind "$EXE" "$B/stockade"
if [ "$PID1" = 1 ]; then
    exec unshare -pf --mount-proc="$B/proc" chroot "$B" "$@"
fi
mount --rbind /proc "$B/proc"
mount --rbind "$B" "$B"
cd "$B"
pivot_root . .
umount -l .
cd /
umount -l /proc
exec "$@""#;

/// Runs `/stockade ARGS` in the root of [`MINIMAL_ROOT`], stdin from `stdin`.
fn in_minimal_root(pid1: bool, stdin: std::process::Stdio, args: &[&str]) -> Output {
    in_minimal_root_with(pid1, false, stdin, args)
}

/// [`in_minimal_root`], with `dev_min`: a `/dev` of a few nodes, each a bind mount of the
/// host's, as container runtimes make it.
fn in_minimal_root_with(
    pid1: bool,
    dev_min: bool,
    stdin: std::process::Stdio,
    args: &[&str],
) -> Output {
    let (_dir, r) = common::var_tempdir();
    let (_ws, ws) = common::var_tempdir();
    let unshare = if nix::unistd::geteuid().is_root() {
        "-m"
    } else {
        "-Urm"
    };
    StdCommand::new("unshare")
        .args([
            unshare,
            "--propagation",
            "private",
            "sh",
            "-c",
            MINIMAL_ROOT,
            "sh",
        ])
        .arg("/stockade")
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("R", &r)
        .env("WS", &ws)
        .env("EXE", common::stockade_exe())
        .env("PID1", if pid1 { "1" } else { "0" })
        .env("DEVMIN", if dev_min { "1" } else { "0" })
        .stdin(stdin)
        .output()
        .expect("run unshare")
}

/// The CLI as the chroot'ed entrypoint of a container (PID 1 of its PID namespace, with
/// that namespace's `/proc`): the kernel refuses the user namespace because of the chroot,
/// and the error says so, instead of blaming AppArmor or seccomp. (The test of "PID 1's
/// root is mine" compared PID 1 with itself.)
#[test]
fn the_cli_as_a_chrooted_pid_1_names_the_chroot() {
    require!(Feature::UserNs);
    let out = in_minimal_root(
        true,
        std::process::Stdio::null(),
        &[
            "run",
            "--workspace",
            "/ws",
            "--layer",
            "full",
            "--fallback",
            "refuse",
            "--",
            "sh",
            "-c",
            "echo ran",
        ],
    );
    let text = common::output_text(&out);
    assert_eq!(out.status.code(), Some(125), "{text}");
    assert!(
        text.contains("runs under chroot") && text.contains("pivot_root"),
        "{text}"
    );
    assert!(!text.contains("apparmor"), "{text}");
    // It is PID 1 there: `detect` says the same.
    let out = in_minimal_root(true, std::process::Stdio::null(), &["detect"]);
    let text = common::output_text(&out);
    assert!(text.contains("runs under chroot"), "{text}");
}

/// An image without `/proc`, `/dev/null` on stdin: the run degrades as with a pipe on
/// stdin (the full layer, which needs `/proc` for its id maps, falls back to layer 2) and
/// runs, also when `/dev/null` is itself a bind mount. A root caller's null stdio is
/// opened in a read-only copy of `/dev`, not reopened through `/proc/self/fd`.
#[test]
fn without_proc_a_null_stdin_degrades_as_a_pipe_does() {
    require!(Feature::UserNs);
    for dev_min in [false, true] {
        for flags in [
            &["--layer", "landlock", "--min-layer", "landlock"][..],
            &["--min-layer", "landlock"],
        ] {
            let mut args = vec!["run", "--workspace", "/ws"];
            args.extend(flags);
            args.extend([
                "--",
                "sh",
                "-c",
                "echo ran; cat; echo end >/dev/null; echo end",
            ]);
            let out = in_minimal_root_with(false, dev_min, std::process::Stdio::null(), &args);
            let text = common::output_text(&out);
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "ran\nend\n",
                "{dev_min} {flags:?}: {text}"
            );
            assert_eq!(out.status.code(), Some(0), "{dev_min} {flags:?}: {text}");
        }
    }
}

/// `network = "full"` is the host's network namespace: a service on the host's
/// `127.0.0.1` answers the program (SECURITY.md, "Network modes", says so; a restricted
/// mode is planned, issue 25). `network = "none"` does not reach it, on either layer.
#[test]
fn full_network_reaches_the_hosts_loopback_none_does_not() {
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in host.incoming() {
            let Ok(mut conn) = conn else { break };
            let _ = std::io::Write::write_all(&mut conn, b"host service answered");
        }
    });
    let code = format!(
        "import socket, errno\n\
         try:\n\
         \x20   c = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n\
         \x20   print(c.recv(64).decode())\n\
         except OSError as e:\n\
         \x20   print('refused', errno.errorcode.get(e.errno, e.errno))\n"
    );
    let ws = common::tempdir();
    for (name, set) in modes() {
        for network in [Network::Full, Network::None] {
            if name == "disabled" && network == Network::None {
                // Disabled mode contains nothing, the network included.
                continue;
            }
            let sb = common::sandbox(ws.path(), |p| {
                set(p);
                p.network = network;
            });
            let out = common::py_ok(&sb, &code);
            if network == Network::Full {
                assert_eq!(out, "host service answered\n", "{name} full");
            } else {
                assert!(out.starts_with("refused "), "{name} none: {out}");
            }
        }
    }
}

/// Every test above, as uid 65534.
#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
