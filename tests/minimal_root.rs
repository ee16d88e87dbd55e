//! The CLI in minimal root file systems, as container images have them: no `/tmp` (a
//! `FROM scratch` image), no `/proc`, a root entered with `chroot` instead of
//! `pivot_root`.
//!
//! Each case builds its root in a mount namespace of its own (`unshare -m` as root,
//! `unshare -Urm` for anyone else): a tmpfs over a fresh directory under `/var/tmp`, the
//! host's system directories bound into it, the workspace at `/ws` and the `stockade`
//! binary at `/stockade`; then it enters that root as a container runtime does
//! (`pivot_root`), or with `chroot`. Nothing of it reaches the host.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::process::{Command as StdCommand, Output, Stdio as StdStdio};

use common::{Feature, output_text, stockade_exe, var_tempdir};

/// What the minimal root has besides the system directories, `/dev` and `/ws`.
#[derive(Clone, Copy, Default)]
struct Root {
    /// `/tmp` as a directory (mode 1777), as a regular file, or missing.
    tmp: Tmp,
    /// `/var/tmp` (mode 1777).
    var_tmp: bool,
    /// The host's `/proc`, bound.
    proc: bool,
    /// Entered with `chroot` rather than `pivot_root`.
    chroot: bool,
    /// A `/dev` of a few nodes (null, zero, full, random, urandom, tty): no `/dev/ptmx`,
    /// no `/dev/pts`.
    dev_min: bool,
}

#[derive(Clone, Copy, Default, PartialEq)]
enum Tmp {
    Dir,
    File,
    #[default]
    Missing,
}

/// The script that builds the root at `$R` and runs `"$@"` in it.
const ENTER: &str = r#"set -e
mount -t tmpfs -o mode=0755 none "$R"
# The root is a plain directory on that tmpfs: what `chroot` enters in a minimal image.
B="$R/root"
mkdir "$B"
for d in usr bin sbin lib lib32 lib64 libx32 etc; do
    if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$B/$d"
    elif [ -d "/$d" ]; then mkdir "$B/$d" && mount --rbind "/$d" "$B/$d"; fi
done
mkdir "$B/dev" "$B/proc" "$B/ws"
mount --rbind /dev "$B/dev"
if [ "$DEVMIN" = 1 ]; then
    mount -t tmpfs -o mode=0755 none "$B/dev"
    for n in null zero full random urandom tty; do
        touch "$B/dev/$n" && mount --bind "/dev/$n" "$B/dev/$n"
    done
fi
mount --bind "$WS" "$B/ws"
touch "$B/stockade" && mount --bind "$EXE" "$B/stockade"
# Bound even when the root has none: umount(8) reads /proc/self/mountinfo.
mount --rbind /proc "$B/proc"
case "$TMP" in
    dir) mkdir -m 1777 "$B/tmp" ;;
    file) touch "$B/tmp" ;;
esac
if [ "$VARTMP" = 1 ]; then mkdir -p "$B/var" && mkdir -m 1777 "$B/var/tmp"; fi
if [ "$CHROOT" = 1 ]; then
    if [ "$PROC" != 1 ]; then umount -l "$B/proc"; fi
    exec chroot "$B" "$@"
fi
mount --rbind "$B" "$B"
cd "$B"
pivot_root . .
umount -l .
cd /
if [ "$PROC" != 1 ]; then umount -l /proc; fi
exec "$@""#;

/// Runs `/stockade ARGS` in a minimal root `root` (see the module docs), with the
/// workspace `ws` at `/ws`, stdin from `stdin`, and a clean environment (no `TMPDIR`).
fn run_in(root: Root, ws: &Path, stdin: StdStdio, args: &[&str]) -> Output {
    let (_dir, r) = var_tempdir();
    let unshare = if nix::unistd::geteuid().is_root() {
        "-m"
    } else {
        "-Urm"
    };
    let tmp = match root.tmp {
        Tmp::Dir => "dir",
        Tmp::File => "file",
        Tmp::Missing => "none",
    };
    StdCommand::new("unshare")
        .args([unshare, "--propagation", "private", "sh", "-c", ENTER, "sh"])
        .args(["/stockade"])
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("R", &r)
        .env("WS", ws)
        .env("EXE", stockade_exe())
        .env("PROC", if root.proc { "1" } else { "0" })
        .env("TMP", tmp)
        .env("VARTMP", if root.var_tmp { "1" } else { "0" })
        .env("CHROOT", if root.chroot { "1" } else { "0" })
        .env("DEVMIN", if root.dev_min { "1" } else { "0" })
        .stdin(stdin)
        .output()
        .expect("run unshare")
}

/// `stockade run --workspace /ws [FLAGS] -- sh -c SCRIPT`.
fn run(root: Root, flags: &[&str], script: &str) -> Output {
    run_with_stdin(root, StdStdio::null(), flags, script)
}

fn run_with_stdin(root: Root, stdin: StdStdio, flags: &[&str], script: &str) -> Output {
    let ws = var_tempdir();
    let mut args = vec!["run", "--workspace", "/ws"];
    args.extend(flags);
    args.extend(["--", "sh", "-c", script]);
    run_in(root, &ws.1, stdin, &args)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An image without `/tmp`, or with a file there: the full layer stages its setup root
/// on another directory and runs; the program has its private `/tmp` as always.
#[test]
fn the_full_layer_runs_in_a_root_without_tmp() {
    require!(Feature::UserNs);
    for tmp in [Tmp::Missing, Tmp::File, Tmp::Dir] {
        let root = Root {
            tmp,
            proc: true,
            ..Root::default()
        };
        let out = run(
            root,
            &["--layer", "full"],
            "echo hi > /tmp/x && cat /tmp/x && echo ws > /ws/f && cat /ws/f",
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "hi\nws\n",
            "{}",
            output_text(&out)
        );
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    }
}

/// Layer 2 gives each command a private `TMPDIR` in the host's temporary directory:
/// without `/tmp` it takes `/var/tmp`, as `TMPDIR` users expect; without either, the
/// error names the directory in the project's style.
#[test]
fn layer_2_without_tmp_falls_back_to_var_tmp_or_names_the_directory() {
    require!(Feature::UserNs);
    let flags = ["--layer", "landlock", "--min-layer", "landlock"];
    let root = Root {
        var_tmp: true,
        proc: true,
        ..Root::default()
    };
    let out = run(
        root,
        &flags,
        r#"echo "$TMPDIR"; echo x > "$TMPDIR/f" && cat "$TMPDIR/f""#,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        // On a root host's layer 2, inside a directory of the sandbox's own there.
        stdout.starts_with("/var/tmp/stockade-")
            && stdout.contains("stockade-tmp-")
            && stdout.ends_with("\nx\n"),
        "{}",
        output_text(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));

    let root = Root {
        proc: true,
        ..Root::default()
    };
    let out = run(root, &flags, "echo ran");
    assert_eq!(out.status.code(), Some(125), "{}", output_text(&out));
    assert!(
        stderr(&out)
            .contains("create the private tmp dir in /tmp: ENOENT (No such file or directory)"),
        "{}",
        output_text(&out)
    );
}

/// Without `/proc` the full layer cannot write its id maps: the error says that `/proc`
/// is not mounted, and a policy that accepts layer 2 falls back to it, with that reason
/// in its warning (as `stockade detect` reports the layer unavailable).
#[test]
fn without_proc_the_full_layer_says_why_and_the_policy_decides() {
    require!(Feature::UserNs);
    let root = Root {
        tmp: Tmp::Dir,
        ..Root::default()
    };
    // stdin a pipe: a root caller's /dev/null is not involved here.
    let refuse = ["--layer", "full", "--fallback", "refuse"];
    let out = run_with_stdin(root, StdStdio::piped(), &refuse, "echo ran");
    assert_eq!(out.status.code(), Some(125), "{}", output_text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("write /proc/self/uid_map and gid_map")
            && err.contains("/proc is not mounted"),
        "{err}"
    );

    let flags = ["--layer", "full", "--min-layer", "landlock"];
    let out = run_with_stdin(root, StdStdio::piped(), &flags, "echo ran");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ran\n",
        "{}",
        output_text(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(
        stderr(&out).contains("/proc is not mounted"),
        "{}",
        output_text(&out)
    );

    let out = run_in(root, Path::new("/var/tmp"), StdStdio::piped(), &["detect"]);
    let text = output_text(&out);
    assert!(text.contains("/proc is not mounted"), "{text}");
}

/// A root caller's `/dev/null` for the program is opened in a read-only copy of `/dev`,
/// which needs no `/proc`: without it, a run with `/dev/null` on stdin goes on as one with
/// a pipe does (issue 24; it used to fail reopening the copy through `/proc/self/fd`).
#[test]
fn without_proc_a_null_stdin_runs() {
    require!(Feature::UserNs);
    let root = Root {
        tmp: Tmp::Dir,
        ..Root::default()
    };
    for flags in [
        &["--layer", "landlock", "--min-layer", "landlock"][..],
        &["--layer", "full", "--min-layer", "landlock"],
    ] {
        let out = run(root, flags, "echo ran; cat; echo end");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "ran\nend\n",
            "{flags:?}: {}",
            output_text(&out)
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{flags:?}: {}",
            output_text(&out)
        );
    }
}

/// Under `chroot(2)` the kernel refuses a user namespace (`EPERM`): the error says that a
/// chroot may be the cause and what to use instead.
#[test]
fn under_chroot_the_refusal_names_the_chroot() {
    require!(Feature::UserNs);
    let root = Root {
        tmp: Tmp::Dir,
        proc: true,
        chroot: true,
        ..Root::default()
    };
    let out = run(
        root,
        &["--layer", "full", "--fallback", "refuse"],
        "echo ran",
    );
    assert_eq!(out.status.code(), Some(125), "{}", output_text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("EPERM") || err.contains("Operation not permitted"),
        "{err}"
    );
    // The root entered is a plain directory: the chroot is known, not guessed.
    assert!(
        err.contains("runs under chroot") && err.contains("pivot_root"),
        "{err}"
    );
    let out = run_in(root, Path::new("/var/tmp"), StdStdio::null(), &["detect"]);
    let text = output_text(&out);
    assert!(
        text.contains("runs under chroot") && text.contains("pivot_root"),
        "{text}"
    );
}

/// A terminal as stdin, and no `/dev/ptmx` on the host: the full layer opens the
/// program's pseudo-terminal from the sandbox's own devpts and runs; layer 2, which needs
/// the host's, fails with an error that names the path.
#[test]
fn without_dev_ptmx_only_layer_2_lacks_a_terminal_and_says_why() {
    require!(Feature::UserNs);
    let (master, slave, _) = common::openpty();
    let root = Root {
        tmp: Tmp::Dir,
        proc: true,
        dev_min: true,
        ..Root::default()
    };
    let out = run_with_stdin(
        root,
        StdStdio::from(slave.try_clone().unwrap()),
        &["--layer", "full"],
        "test -t 0 && echo ran",
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    let out = run_with_stdin(
        root,
        StdStdio::from(slave),
        &["--layer", "landlock", "--min-layer", "landlock"],
        "echo ran",
    );
    drop(master);
    assert_eq!(out.status.code(), Some(125), "{}", output_text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("/dev/ptmx") && err.contains("ENOENT (No such file or directory)"),
        "{err}"
    );
}

/// Every test above again as uid 65534 (through `unshare -Urm` there).
#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
