//! `workspace_mode = "overlay"`: the program's writes land in the change set, the real
//! workspace stays byte-identical, and the change set's `upper/` holds exactly the changes
//! in the overlay format (issue 27). As root and as uid 65534 (the re-run at the end).

#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::Feature;
use stockade::{Layer, Policy, Sandbox, WorkspaceMode};

/// One entry of a tree listing: what it is, its mode, its mtime (ns) and its contents
/// (a file's bytes, a symlink's target).
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    mode: u32,
    mtime_ns: i128,
    data: Vec<u8>,
}

/// Every entry under `root` (relative paths), symlinks not followed.
fn listing(root: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for p in names {
            let m = fs::symlink_metadata(&p).unwrap();
            let ft = m.file_type();
            let (kind, data) = if ft.is_symlink() {
                (
                    "symlink",
                    fs::read_link(&p).unwrap().as_os_str().as_bytes().to_vec(),
                )
            } else if ft.is_dir() {
                ("dir", Vec::new())
            } else if ft.is_file() {
                ("file", fs::read(&p).unwrap())
            } else if ft.is_char_device() {
                ("chardev", m.rdev().to_ne_bytes().to_vec())
            } else {
                ("other", Vec::new())
            };
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            out.insert(
                rel,
                Entry {
                    kind,
                    mode: m.mode() & 0o7777,
                    mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
                    data,
                },
            );
            if ft.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// The value of the extended attribute `name` of `p` (not followed), if set.
fn xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    let path = CString::new(p.as_os_str().as_bytes()).unwrap();
    let name = CString::new(name).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: both strings are NUL-terminated and live across the call; `buf` is writable
    // for its length.
    let n = unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    usize::try_from(n).ok().map(|n| buf[..n].to_vec())
}

/// Whether `p` in an upper dir is a whiteout, in either of overlayfs's forms.
fn is_whiteout(p: &Path) -> bool {
    let m = fs::symlink_metadata(p).unwrap();
    let chardev = m.file_type().is_char_device() && m.rdev() == 0;
    let xattr_form =
        m.file_type().is_file() && m.len() == 0 && xattr(p, "user.overlay.whiteout").is_some();
    chardev || xattr_form
}

/// A workspace with files to create, edit, delete, rename and chmod.
fn fixture(ws: &Path) {
    fs::write(ws.join("keep.txt"), "keep\n").unwrap();
    fs::write(ws.join("edit.txt"), "old\n").unwrap();
    fs::write(ws.join("gone.txt"), "bye\n").unwrap();
    fs::write(ws.join("from.txt"), "moving\n").unwrap();
    fs::write(ws.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir(ws.join("d")).unwrap();
    fs::write(ws.join("d/f"), "f\n").unwrap();
    fs::write(ws.join("d/stay"), "s\n").unwrap();
    fs::create_dir(ws.join("redo")).unwrap();
    fs::write(ws.join("redo/old"), "o\n").unwrap();
    std::os::unix::fs::symlink("keep.txt", ws.join("link")).unwrap();
}

/// The program: create, edit, delete, rename, chmod, replace a directory, relink.
const CHANGES: &str = "set -e; echo new > new.txt; echo more >> edit.txt; rm gone.txt; \
     mv from.txt to.txt; chmod 600 run.sh; rm d/f; rm -r redo; mkdir redo; echo n > redo/new; \
     rm link; ln -s edit.txt link";

fn overlay_policy(changes: &Path) -> impl FnOnce(&mut Policy) + '_ {
    overlay_on(changes, Layer::Full)
}

/// Overlay mode on `layer` (landlock accepted as the weakest, passthrough when named).
fn overlay_on(changes: &Path, layer: Layer) -> impl FnOnce(&mut Policy) + '_ {
    move |p: &mut Policy| {
        p.workspace_mode = WorkspaceMode::Overlay;
        p.changes_dir = Some(changes.to_path_buf());
        p.layer = Some(layer);
        p.min_layer = Some(if layer == Layer::Passthrough {
            Layer::Passthrough
        } else {
            Layer::Landlock
        });
    }
}

#[test]
fn overlay_leaves_the_workspace_byte_identical_and_upper_holds_exactly_the_changes() {
    require!(Feature::UserNs);
    for layer in common::LAYERS {
        changes_of_one_run(layer);
    }
}

fn changes_of_one_run(layer: Layer) {
    // The workspace in /var/tmp, the change set in /tmp.
    let (_w, ws) = common::var_tempdir();
    let c = common::tempdir();
    let changes = fs::canonicalize(c.path()).unwrap().join("set");
    fixture(&ws);
    let before = listing(&ws);
    let sb = common::sandbox(&ws, overlay_on(&changes, layer));
    // Inside, the program sees its own writes.
    let seen = common::sh_ok(
        &sb,
        &format!(
            "{CHANGES}; cat new.txt edit.txt to.txt; ls d; ls redo; stat -c %a run.sh; readlink link; \
             test ! -e gone.txt && test ! -e from.txt && echo ok"
        ),
    );
    assert_eq!(
        seen,
        "new\nold\nmore\nmoving\nstay\nnew\n600\nedit.txt\nok\n"
    );
    assert_eq!(listing(&ws), before, "the real workspace changed");

    let upper = changes.join("upper");
    let got: Vec<PathBuf> = listing(&upper).into_keys().collect();
    // The overlay makes the replaced `redo` opaque; the snapshot's difference, computed
    // after the run, sees a directory in both with one entry gone and one new.
    let snapshot = layer != Layer::Full;
    let mut want = vec![
        "d", "d/f", "edit.txt", "from.txt", "gone.txt", "link", "new.txt", "redo", "redo/new",
    ];
    if snapshot {
        want.push("redo/old");
    }
    want.extend(["run.sh", "to.txt"]);
    let want: Vec<PathBuf> = want.iter().map(PathBuf::from).collect();
    assert_eq!(
        got, want,
        "{layer}: upper/ holds other entries than the changes"
    );
    let mut whiteouts = vec!["d/f", "from.txt", "gone.txt"];
    if snapshot {
        whiteouts.push("redo/old");
    }
    for w in whiteouts {
        assert!(
            is_whiteout(&upper.join(w)),
            "{layer}: {w} is not a whiteout"
        );
    }
    assert_eq!(fs::read(upper.join("new.txt")).unwrap(), b"new\n");
    assert_eq!(fs::read(upper.join("edit.txt")).unwrap(), b"old\nmore\n");
    assert_eq!(fs::read(upper.join("to.txt")).unwrap(), b"moving\n");
    let mode = fs::symlink_metadata(upper.join("run.sh")).unwrap().mode() & 0o7777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        fs::read_link(upper.join("link")).unwrap(),
        Path::new("edit.txt")
    );
    // `d` merges (only its deleted entry is there); `redo` was replaced: opaque on the
    // overlay.
    assert_eq!(xattr(&upper.join("d"), "user.overlay.opaque"), None);
    let opaque = xattr(&upper.join("redo"), "user.overlay.opaque");
    let want = (!snapshot).then_some(&b"y"[..]);
    assert_eq!(opaque.as_deref(), want, "{layer}");
    // The marker, written once.
    let marker = fs::read_to_string(changes.join("stockade-changes.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&marker).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["mode"], if snapshot { "snapshot" } else { "overlay" });
    assert_eq!(v["workspace"], ws.to_str().unwrap());
    assert!(v["started_ns"].as_u64().unwrap() > 1_700_000_000_000_000_000);
    let m = fs::symlink_metadata(&changes).unwrap();
    assert_eq!(m.mode() & 0o777, 0o700);
    // Nothing else of the run on the host: the change set's own entries only.
    let mut top: Vec<_> = fs::read_dir(&changes)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    top.sort();
    let last = if snapshot { "snapshot" } else { "work" };
    let want_top = if snapshot {
        vec![
            "snapshot",
            "snapshot.stamp",
            "stockade-changes.json",
            "upper",
        ]
    } else {
        vec!["stockade-changes.json", "upper", last]
    };
    assert_eq!(top, want_top, "{layer}");
    if snapshot {
        // The program's view, kept for the next run: what it saw, byte for byte.
        let seen = listing(&changes.join("snapshot"));
        assert_eq!(seen[Path::new("edit.txt")].data, b"old\nmore\n");
        assert!(!seen.contains_key(Path::new("gone.txt")));
    }
}

/// A program that leaves a chain of directories deeper than the snapshot's walks go, on
/// layer 2 (which writes the difference on the host): the host lives (the walks recursed
/// per level and overflowed the test thread's stack, aborting the host; one-letter names,
/// so that the host's paths stay below `PATH_MAX` that deep), the next run works, and a
/// workspace that deep is refused with `E2BIG` before any run.
#[test]
fn layer_two_a_deep_chain_made_in_the_snapshot_does_not_bring_the_host_down() {
    let (_w, ws) = common::var_tempdir();
    fixture(&ws);
    let (_c, parent) = common::var_tempdir();
    let changes = parent.join("set");
    let sb = common::sandbox(&ws, overlay_on(&changes, Layer::Landlock));
    let out = common::sh_ok(
        &sb,
        "python3 -c '\nimport os\nfor i in range(1000):\n    os.mkdir(\"q\")\n    os.chdir(\"q\")\nprint(\"made\")'",
    );
    assert_eq!(out.trim(), "made");
    // The host is here to run the next command, which sees the chain in its snapshot.
    let again = common::sh_ok(&sb, "test -d q/q/q && echo again");
    assert_eq!(again.trim(), "again");
    // The set says that its upper/ is an earlier run's, and `changes` warns.
    let set = stockade::ChangeSet::open(&changes).unwrap();
    assert!(
        set.stale().is_some_and(|s| s.contains("7")),
        "{:?}",
        set.stale()
    );
    drop(set);
    let out = std::process::Command::new(common::stockade_exe())
        .arg("changes")
        .arg(&changes)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("upper/ is an earlier run's"),
        "{out:?}"
    );
    // A run that can write its difference again clears it.
    common::sh_ok(&sb, "rm -rf q");
    let set = stockade::ChangeSet::open(&changes).unwrap();
    assert_eq!(set.stale(), None);
    // A workspace that deep from the start: refused before the snapshot is made.
    let (_d, deep) = common::var_tempdir();
    let mut p = deep.clone();
    for _ in 0..300 {
        p.push("d");
    }
    std::fs::create_dir_all(&p).unwrap();
    let (_c2, parent2) = common::var_tempdir();
    let sb = common::sandbox(&deep, overlay_on(&parent2.join("set"), Layer::Landlock));
    let err = sb.command("true").status().unwrap_err().to_string();
    assert!(err.contains("E2BIG"), "{err}");
}

#[test]
fn two_runs_on_one_change_set_see_each_others_writes() {
    require!(Feature::UserNs);
    for layer in common::LAYERS {
        two_runs(layer);
    }
}

fn two_runs(layer: Layer) {
    // The workspace in /tmp, the change set in /var/tmp.
    let w = common::tempdir();
    let ws = fs::canonicalize(w.path()).unwrap();
    let (_c, cdir) = common::var_tempdir();
    let changes = cdir.join("set");
    fs::write(ws.join("log"), "0\n").unwrap();
    let before = listing(&ws);
    let first = common::sandbox(&ws, overlay_on(&changes, layer));
    common::sh_ok(&first, "echo 1 >> log; echo a > made");
    let marker = fs::read(changes.join("stockade-changes.json")).unwrap();
    // A second sandbox (another tool call of the session) on the same change set.
    let second = common::sandbox(&ws, overlay_on(&changes, layer));
    let seen = common::sh_ok(&second, "cat log made; echo 2 >> log; rm made");
    assert_eq!(seen, "0\n1\na\n");
    let third = common::sh_ok(&first, "cat log; test ! -e made && echo gone");
    assert_eq!(third, "0\n1\n2\ngone\n");
    assert_eq!(
        fs::read(changes.join("stockade-changes.json")).unwrap(),
        marker
    );
    assert_eq!(listing(&ws), before);
}

#[test]
fn a_second_run_on_a_change_set_in_use_is_refused_until_the_first_ends() {
    require!(Feature::UserNs);
    for layer in common::LAYERS {
        let (_w, ws) = common::var_tempdir();
        let c = common::tempdir();
        let changes = c.path().join("set");
        let first = common::sandbox(&ws, overlay_on(&changes, layer));
        let mut running = first
            .command("sh")
            .args(["-c", "echo a > a; cat > /dev/null"])
            .stdin(stockade::Stdio::piped())
            .spawn()
            .unwrap();
        let second = common::sandbox(&ws, overlay_on(&changes, layer));
        let err = second.command("true").status().unwrap_err().to_string();
        assert!(
            err.contains("another run on this change set"),
            "{layer}: {err}"
        );
        drop(running.stdin.take());
        assert!(running.wait().unwrap().success());
        assert_eq!(common::sh_ok(&second, "cat a"), "a\n", "{layer}");
    }
}

#[test]
fn a_run_dropped_unwaited_holds_its_change_set_until_it_ends() {
    require!(Feature::UserNs);
    for layer in common::LAYERS {
        let (_w, ws) = common::var_tempdir();
        let c = common::tempdir();
        let changes = c.path().join("set");
        let first = common::sandbox(&ws, overlay_on(&changes, layer));
        // Dropped at once; it goes on for two seconds, then writes.
        drop(
            first
                .command("sh")
                .args(["-c", "sleep 2; echo a > a"])
                .spawn()
                .unwrap(),
        );
        let second = common::sandbox(&ws, overlay_on(&changes, layer));
        let err = second.command("true").status().unwrap_err().to_string();
        assert!(
            err.contains("another run on this change set"),
            "{layer}: a dropped run's change set was taken while it ran: {err}"
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let out = loop {
            match second.command("cat").arg("a").output() {
                Ok(o) if o.status.success() => {
                    break String::from_utf8_lossy(&o.stdout).into_owned();
                }
                _ if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(50))
                }
                other => panic!("{layer}: the change set never came free: {other:?}"),
            }
        };
        assert_eq!(out, "a\n", "{layer}");
    }
}

#[test]
fn data_dir_stays_masked_and_deny_names_hidden_in_overlay_mode() {
    require!(Feature::UserNs);
    for layer in common::LAYERS {
        masks_kept(layer);
    }
}

fn masks_kept(layer: Layer) {
    let (_w, ws) = common::var_tempdir();
    let c = common::tempdir();
    let changes = c.path().join("set");
    fs::create_dir(ws.join(".agent")).unwrap();
    fs::write(ws.join(".agent/token"), "TOKEN\n").unwrap();
    fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
    fs::write(ws.join("code.rs"), "fn main() {}\n").unwrap();
    let sb = common::sandbox(&ws, |p| {
        overlay_on(&changes, layer)(p);
        p.data_dir = Some(ws.join(".agent"));
    });
    let out = common::sh(&sb, "cat .agent/token");
    assert!(!out.status.success(), "{}", common::output_text(&out));
    let out = common::sh(&sb, "ls .agent");
    assert!(!out.status.success(), "{}", common::output_text(&out));
    let out = common::sh(&sb, "mv .agent moved");
    assert!(!out.status.success(), "{}", common::output_text(&out));
    assert_eq!(common::sh_ok(&sb, "cat .env | wc -c"), "0\n");
    // The allowed thing still works, through the overlay.
    assert_eq!(
        common::sh_ok(&sb, "echo x >> code.rs && cat code.rs"),
        "fn main() {}\nx\n"
    );
    assert!(!changes.join("upper/.agent").exists(), "{layer}");
    assert!(!changes.join("upper/.env").exists(), "{layer}");
    // Layer 2 never copies them into the snapshot.
    assert!(!changes.join("snapshot/.agent").exists(), "{layer}");
    assert!(!changes.join("snapshot/.env").exists(), "{layer}");
    assert_eq!(fs::read(ws.join(".agent/token")).unwrap(), b"TOKEN\n");
    assert_eq!(sb.unhidden_names(), Vec::<PathBuf>::new(), "{layer}");
}

#[test]
fn the_host_holds_the_overlay_until_the_sandbox_is_gone_and_the_program_never_does() {
    require!(Feature::UserNs);
    use std::io::Read;
    // The change set on ext4 (/var/tmp), where the overlay's last reference costs a sync.
    let (_w, ws) = common::var_tempdir();
    let (_c, cdir) = common::var_tempdir();
    let changes = cdir.join("set");
    let name = format!("pinned-{}", std::process::id());
    let sb = common::sandbox(&ws, overlay_on(&changes, Layer::Full));
    assert_eq!(sb.layer(), Layer::Full);
    // Inside: every fd of the program (and of the init, where /proc lets it be read)
    // with its file system's type; the working directory's, the overlay's, to show the
    // check sees one. Then stdout closes and the program waits for stdin's end.
    let script = format!(
        "echo x > {name}; echo \"cwd $(stat -f -c %t .)\"; \
         for f in /proc/self/fd/* /proc/1/fd/*; do \
           t=$(stat -L -f -c %t \"$f\" 2>/dev/null) && echo \"$f $t\"; \
         done; exec >&-; cat > /dev/null"
    );
    let mut child = sb
        .command("sh")
        .args(["-c", &script])
        .stdin(stockade::Stdio::piped())
        .stdout(stockade::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut seen)
        .unwrap();
    let overlay = format!("{:x}", common::OVERLAY_MAGIC);
    assert!(seen.contains(&format!("cwd {overlay}\n")), "{seen}");
    assert!(seen.contains("/proc/self/fd/0 "), "{seen}");
    let held_inside: Vec<&str> = seen
        .lines()
        .filter(|l| l.starts_with("/proc/") && l.ends_with(&overlay))
        .collect();
    assert!(
        held_inside.is_empty(),
        "the program (or its init) holds the overlay: {held_inside:?}\n{seen}"
    );
    // The host holds the overlay's mount, close-on-exec, while the sandbox runs.
    let pins = common::overlay_pins(&name);
    assert_eq!(pins.len(), 1, "{pins:?}");
    assert!(pins[0].1, "the overlay's mount is inheritable: {pins:?}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    // The change set, opened right after the wait, waits for the close and sees the
    // write; then nothing of the overlay is left in the host.
    let set = stockade::ChangeSet::open(&changes).unwrap();
    assert!(
        set.entries()
            .iter()
            .any(|e| e.path == Path::new(&name) && e.kind == stockade::ChangeKind::Added),
        "{:?}",
        set.entries()
    );
    assert_eq!(common::overlay_pins(&name), Vec::new());
    // A second run right after the wait is not refused and sees the first's write.
    assert_eq!(common::sh_ok(&sb, &format!("cat {name}")), "x\n");
    stockade::ChangeSet::open(&changes).unwrap();
    assert_eq!(common::overlay_pins(&name), Vec::new());
}

/// Another process holding a POSIX record lock on byte `byte` of `marker` for `ms`
/// milliseconds (Python's `fcntl.lockf`), once it says so.
fn hold_marker_byte(marker: &Path, byte: u32, ms: u32) -> std::process::Child {
    use std::io::BufRead;
    let mut c = std::process::Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import fcntl, sys, time\n\
             f = open(sys.argv[1], 'r+')\n\
             fcntl.lockf(f, fcntl.LOCK_EX, 1, int(sys.argv[2]))\n\
             print('held', flush=True)\n\
             time.sleep(int(sys.argv[3]) / 1000)\n",
        ])
        .arg(marker)
        .arg(byte.to_string())
        .arg(ms.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(c.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "held\n");
    c
}

/// A change set in `/var/tmp` on which one full-layer run wrote `a`, settled: (the temp
/// dirs to keep, the set, its marker, the sandbox).
fn marked_set() -> (
    (tempfile::TempDir, tempfile::TempDir),
    PathBuf,
    PathBuf,
    Sandbox,
) {
    let (w, ws) = common::var_tempdir();
    let (c, cdir) = common::var_tempdir();
    let changes = cdir.join("set");
    let marker = changes.join("stockade-changes.json");
    let sb = common::sandbox(&ws, overlay_on(&changes, Layer::Full));
    common::sh_ok(&sb, "echo a > a");
    stockade::ChangeSet::open(&changes).unwrap();
    ((w, c), changes, marker, sb)
}

#[test]
fn another_processs_closing_run_is_waited_for_and_its_running_one_refused() {
    require!(Feature::UserNs);
    let (_dirs, changes, marker, sb) = marked_set();
    // Another host process's run whose program runs (its byte 0): refused here.
    let mut other = hold_marker_byte(&marker, 0, 60_000);
    let err = sb.command("true").status().unwrap_err().to_string();
    assert!(err.contains("another run on this change set"), "{err}");
    // Nor is the set reviewed meanwhile: what the review showed would not be what is
    // applied.
    let err = stockade::ChangeSet::open(&changes).unwrap_err();
    assert!(matches!(err, stockade::ChangesError::Busy { .. }), "{err}");
    other.kill().unwrap();
    other.wait().unwrap();
    // One that is closing (its byte 1 only): `ChangeSet::open` and a run here wait.
    let long = std::time::Duration::from_millis(500);
    let mut other = hold_marker_byte(&marker, 1, 800);
    let t = std::time::Instant::now();
    let set = stockade::ChangeSet::open(&changes).unwrap();
    assert!(t.elapsed() >= long, "open did not wait: {:?}", t.elapsed());
    assert_eq!(set.entries().len(), 1);
    other.wait().unwrap();
    let mut other = hold_marker_byte(&marker, 1, 800);
    let t = std::time::Instant::now();
    assert_eq!(common::sh_ok(&sb, "cat a"), "a\n");
    assert!(
        t.elapsed() >= long,
        "the run did not wait: {:?}",
        t.elapsed()
    );
    other.wait().unwrap();
}

/// Whether another process can take byte `byte` of `marker` at once (a POSIX lock, as
/// `hold_marker_byte` takes it).
fn marker_byte_free(marker: &Path, byte: u32) -> bool {
    let out = std::process::Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import fcntl, sys\n\
             f = open(sys.argv[1], 'r+')\n\
             try:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(sys.argv[2]))\n\
             except OSError:\n    print('held')\nelse:\n    print('free')\n",
        ])
        .arg(marker)
        .arg(byte.to_string())
        .output()
        .unwrap();
    match String::from_utf8_lossy(&out.stdout).trim() {
        "free" => true,
        "held" => false,
        other => panic!("{other}: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

#[test]
fn opening_the_change_set_meanwhile_keeps_a_running_runs_hold_against_other_processes() {
    require!(Feature::UserNs);
    let (_dirs, changes, marker, sb) = marked_set();
    assert!(marker_byte_free(&marker, 0), "no run: byte 0 free");
    let mut child = sb
        .command("sh")
        .args(["-c", "read x; exit 0"])
        .stdin(stockade::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(!marker_byte_free(&marker, 0), "a running run holds byte 0");
    // The host tries to look at the change set (twice) while the run goes on: refused,
    // since the program writes `upper/` meanwhile (a review's walk once lent a directory
    // its owner's access and gave its mode back through a symlink the program had put
    // there: a host file's mode); and the opens and closes of the marker must not drop
    // the run's hold (a POSIX lock goes with any close of the file by its process).
    for _ in 0..2 {
        let err = stockade::ChangeSet::open(&changes).unwrap_err();
        assert!(matches!(err, stockade::ChangesError::Busy { .. }), "{err}");
        assert!(
            !marker_byte_free(&marker, 0),
            "the run's hold went with ChangeSet::open's close of the marker"
        );
    }
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    // Once the run is over (and its overlay closed), the set is free again, and a run
    // here takes it as before.
    stockade::ChangeSet::open(&changes).unwrap();
    assert!(marker_byte_free(&marker, 0));
    assert!(marker_byte_free(&marker, 1));
    assert_eq!(common::sh_ok(&sb, "cat a"), "a\n");
}

#[test]
fn after_a_run_the_change_set_is_left_removable_by_its_owner() {
    require!(Feature::UserNs);
    let (_w, ws) = common::var_tempdir();
    let (_c, cdir) = common::var_tempdir();
    let changes = cdir.join("set");
    fs::write(ws.join("old"), "old").unwrap();
    let sb = common::sandbox(&ws, overlay_on(&changes, Layer::Full));
    // A deletion too: overlayfs then keeps a shared whiteout in its scratch directory.
    common::sh_ok(&sb, "echo a > a && rm old");
    // Once the run's close is over, overlayfs's scratch directory (mode 000) is gone, so
    // an owner without `CAP_DAC_OVERRIDE` removes the set with a plain `rm -r`.
    stockade::ChangeSet::open(&changes).unwrap();
    assert!(changes.join("work").is_dir());
    assert!(!changes.join("work/work").exists());
    std::fs::remove_dir_all(&changes).unwrap();
    // Or once the sandbox is dropped, right after the wait (the close runs on a thread
    // of the library's: the drop waits for it).
    fs::write(ws.join("old"), "old").unwrap();
    let sb = common::sandbox(&ws, overlay_on(&changes, Layer::Full));
    common::sh_ok(&sb, "rm old");
    drop(sb);
    assert!(!changes.join("work/work").exists());
    std::fs::remove_dir_all(&changes).unwrap();
}

/// A change set's marker is written without `fsync` at its first spawn (that journal
/// commit was most of a fresh set's cost) and made durable at that run's end. So a host
/// crash before then can leave it empty, or missing beside what the run wrote: such a
/// set is refused, by a run and by `ChangeSet::open`, never taken as a fresh one (whose
/// new start time would hide a workspace edit made since the crashed run began).
#[test]
fn a_change_set_a_crash_left_half_made_is_refused_not_taken_as_fresh() {
    require!(Feature::UserNs);
    for layer in [Layer::Full, Layer::Landlock] {
        let (_w, ws) = common::var_tempdir();
        let (_c, cdir) = common::var_tempdir();
        let changes = cdir.join("set");
        let marker = changes.join("stockade-changes.json");
        let sb = common::sandbox(&ws, overlay_on(&changes, layer));
        common::sh_ok(&sb, "echo a > a");
        assert_eq!(sb.layer(), layer);
        stockade::ChangeSet::open(&changes).unwrap();
        let good = fs::read(&marker).unwrap();

        fs::write(&marker, "").unwrap();
        let err = sb.command("true").status().unwrap_err().to_string();
        assert!(err.contains("empty"), "{layer:?}: {err}");
        let err = stockade::ChangeSet::open(&changes).unwrap_err().to_string();
        assert!(err.contains("empty"), "{layer:?}: {err}");
        assert!(
            fs::read(&marker).unwrap().is_empty(),
            "{layer:?}: marker re-made"
        );

        fs::remove_file(&marker).unwrap();
        let err = sb.command("true").status().unwrap_err().to_string();
        assert!(err.contains("marker is missing"), "{layer:?}: {err}");
        assert!(!marker.exists(), "{layer:?}: marker re-made");
        assert!(stockade::ChangeSet::open(&changes).is_err(), "{layer:?}");
        if layer == Layer::Landlock {
            // A layer-2 run that crashed before its end wrote nothing into `upper/` yet:
            // its snapshot is what says the set was used.
            let upper = changes.join("upper");
            fs::rename(&upper, cdir.join("upper.kept")).unwrap();
            fs::create_dir(&upper).unwrap();
            let err = sb.command("true").status().unwrap_err().to_string();
            assert!(err.contains("marker is missing"), "{layer:?}: {err}");
            assert!(!marker.exists(), "{layer:?}: marker re-made");
            fs::remove_dir(&upper).unwrap();
            fs::rename(cdir.join("upper.kept"), &upper).unwrap();
        }

        // Put back, the set is the same set again, with the first run's start.
        fs::write(&marker, &good).unwrap();
        common::sh_ok(&sb, "test -f a");
        assert_eq!(fs::read(&marker).unwrap(), good, "{layer:?}");
        stockade::ChangeSet::open(&changes).unwrap();
    }
    // A set made but never run on (no marker, nothing written) is a fresh one.
    let (_w, ws) = common::var_tempdir();
    let (_c, cdir) = common::var_tempdir();
    let changes = cdir.join("set");
    fs::create_dir(&changes).unwrap();
    fs::set_permissions(&changes, fs::Permissions::from_mode(0o700)).unwrap();
    fs::create_dir(changes.join("upper")).unwrap();
    let sb = common::sandbox(&ws, overlay_on(&changes, Layer::Full));
    common::sh_ok(&sb, "echo a > a");
    let set = stockade::ChangeSet::open(&changes).unwrap();
    assert_eq!(set.entries().len(), 1);
}

#[test]
fn the_change_set_is_not_reachable_inside_but_through_the_overlay() {
    require!(Feature::UserNs);
    let (_w, ws) = common::var_tempdir();
    let (_c, cdir) = common::var_tempdir();
    let changes = cdir.join("set");
    let sb = common::sandbox(&ws, overlay_policy(&changes));
    common::sh_ok(&sb, "echo mine > f");
    for p in [
        changes.clone(),
        changes.join("upper"),
        changes.join("upper/f"),
        changes.join("stockade-changes.json"),
        cdir.clone(),
    ] {
        let out = common::sh(&sb, &format!("ls -d '{}' || exit 7", p.display()));
        assert_eq!(
            out.status.code(),
            Some(7),
            "{}: {}",
            p.display(),
            common::output_text(&out)
        );
        assert!(
            common::output_text(&out).contains("No such file"),
            "{}",
            common::output_text(&out)
        );
    }
    // No mount inside names the change set.
    let mounts = common::sh_ok(&sb, "cat /proc/self/mountinfo");
    assert!(!mounts.contains(cdir.to_str().unwrap()), "{mounts}");
    assert_eq!(common::sh_ok(&sb, "cat f"), "mine\n");
}

#[test]
fn on_layer_2_the_change_set_is_closed_but_for_the_snapshot() {
    require!(Feature::UserNs);
    let (_w, ws) = common::var_tempdir();
    let (_c, cdir) = common::var_tempdir();
    let changes = cdir.join("set");
    let sb = common::sandbox(&ws, overlay_on(&changes, Layer::Landlock));
    // The program works in the snapshot: the real workspace is not writable, nor readable.
    let pwd = common::sh_ok(&sb, "echo mine > f; pwd");
    assert_eq!(pwd.trim_end(), changes.join("snapshot").to_str().unwrap());
    for script in [
        format!("cat '{}/stockade-changes.json'", changes.display()),
        format!("ls '{}/upper'", changes.display()),
        format!("echo x > '{}/upper/f'", changes.display()),
        format!("ls '{}'", ws.display()),
        format!("echo x > '{}/f'", ws.display()),
    ] {
        let out = common::sh(&sb, &format!("{script} || exit 7"));
        assert_eq!(
            out.status.code(),
            Some(7),
            "{script}: {}",
            common::output_text(&out)
        );
        assert!(
            common::output_text(&out).contains("Permission denied"),
            "{}",
            common::output_text(&out)
        );
    }
    assert!(!ws.join("f").exists());
    assert_eq!(fs::read(changes.join("upper/f")).unwrap(), b"mine\n");
}

#[test]
fn an_edit_that_puts_back_the_modification_time_still_shows_in_the_changes() {
    require!(Feature::UserNs);
    for layer in [Layer::Landlock, Layer::Passthrough] {
        hidden_edit(layer);
    }
}

fn hidden_edit(layer: Layer) {
    let (_w, ws) = common::var_tempdir();
    let c = common::tempdir();
    let changes = c.path().join("set");
    fs::write(ws.join("same.txt"), "aaaa\n").unwrap();
    fs::write(ws.join("other.txt"), "keep\n").unwrap();
    let at = "@1577836800";
    let out = std::process::Command::new("touch")
        .args(["-d", at])
        .arg(ws.join("same.txt"))
        .arg(ws.join("other.txt"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let before = listing(&ws);
    let sb = common::sandbox(&ws, overlay_on(&changes, layer));
    // A first run changes nothing; the second edits a file, same size, and puts back its
    // modification time.
    common::sh_ok(&sb, "true");
    assert_eq!(fs::read_dir(changes.join("upper")).unwrap().count(), 0);
    common::sh_ok(
        &sb,
        &format!("printf 'bbbb\\n' > same.txt; touch -d {at} same.txt"),
    );
    let (s, w) = (
        fs::metadata(changes.join("snapshot/same.txt")).unwrap(),
        fs::metadata(ws.join("same.txt")).unwrap(),
    );
    assert_eq!(
        (s.len(), s.mtime(), s.mtime_nsec()),
        (w.len(), w.mtime(), w.mtime_nsec()),
        "{layer}: the edit did not hide as meant"
    );
    let set = stockade::ChangeSet::open(&changes).unwrap();
    let listed: Vec<(PathBuf, stockade::ChangeKind)> = set
        .entries()
        .iter()
        .map(|e| (e.path.clone(), e.kind))
        .collect();
    assert_eq!(
        listed,
        vec![(PathBuf::from("same.txt"), stockade::ChangeKind::Modified)],
        "{layer}"
    );
    assert_eq!(fs::read(changes.join("upper/same.txt")).unwrap(), b"bbbb\n");
    assert_eq!(listing(&ws), before, "{layer}");
}

#[test]
fn a_workspace_larger_than_snapshot_max_is_refused_with_the_sizes() {
    require!(Feature::UserNs);
    let (_w, ws) = common::var_tempdir();
    let c = common::tempdir();
    let changes = c.path().join("set");
    fs::write(ws.join("big"), vec![7u8; 4096]).unwrap();
    let sb = common::sandbox(&ws, |p| {
        overlay_on(&changes, Layer::Landlock)(p);
        p.snapshot_max = stockade::ByteSize::parse("1KiB").unwrap();
    });
    let err = sb.command("true").status().unwrap_err().to_string();
    assert!(
        err.contains("4096 bytes") && err.contains("snapshot_max (1024 bytes)"),
        "{err}"
    );
    assert!(!changes.join("snapshot").exists());
}

#[test]
fn git_works_inside_the_overlay_and_the_hosts_git_is_untouched() {
    require!(Feature::UserNs);
    if !Path::new("/usr/bin/git").exists() {
        common::skip("git_works_inside_the_overlay", "git not found");
        return;
    }
    for layer in common::LAYERS {
        git_inside(layer);
    }
}

fn git_inside(layer: Layer) {
    let (_w, ws) = common::var_tempdir();
    let c = common::tempdir();
    let changes = c.path().join("set");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&ws)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "safe.directory=*",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "first"]);
    let before = listing(&ws);
    let sb = common::sandbox(&ws, overlay_on(&changes, layer));
    let g = "git -c user.name=t -c user.email=t@t -c safe.directory=*";
    let out = common::sh_ok(
        &sb,
        &format!(
            "set -e; echo two >> a.txt; {g} status --porcelain; {g} commit -qam second; \
             {g} log --format=%s"
        ),
    );
    assert_eq!(out, " M a.txt\nsecond\nfirst\n");
    assert_eq!(listing(&ws), before, "the host's workspace or .git changed");
    assert_eq!(git(&["log", "--format=%s"]), "first\n");
    assert!(changes.join("upper/.git").is_dir());
    // The next run on the change set sees the commit.
    assert_eq!(
        common::sh_ok(&sb, &format!("{g} log -1 --format=%s")),
        "second\n"
    );
}

#[test]
fn overlay_in_passthrough_runs_on_a_snapshot_never_direct() {
    // No namespaces, no Landlock: the program's working directory is the snapshot, and
    // the change set reads as on the other layers.
    changes_of_one_run(Layer::Passthrough);
    two_runs(Layer::Passthrough);
    run_then_apply(Layer::Passthrough);
    // `mode = "disabled"` runs in passthrough, on the snapshot all the same.
    let (_w, ws) = common::var_tempdir();
    let c = common::tempdir();
    let changes = fs::canonicalize(c.path()).unwrap().join("set");
    fs::write(ws.join("f"), "host\n").unwrap();
    let mut p = Policy::with_workspace(&ws);
    overlay_on(&changes, Layer::Full)(&mut p);
    p.mode = stockade::Mode::Disabled;
    let sb = Sandbox::new(p).unwrap();
    let pwd = common::sh_ok(&sb, "echo mine > f; pwd");
    assert_eq!(pwd.trim_end(), changes.join("snapshot").to_str().unwrap());
    assert_eq!(fs::read(ws.join("f")).unwrap(), b"host\n");
    assert_eq!(fs::read(changes.join("upper/f")).unwrap(), b"mine\n");
}

#[test]
fn a_symlinked_open_or_foreign_changes_dir_is_refused() {
    require!(Feature::UserNs);
    let (_w, ws) = common::var_tempdir();
    let (_o, other) = common::var_tempdir();
    let c = common::tempdir();
    let base = fs::canonicalize(c.path()).unwrap();
    // A symlink as the change set.
    let real = base.join("real");
    fs::create_dir(&real).unwrap();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&real, base.join("link")).unwrap();
    let mut p = Policy::with_workspace(&ws);
    overlay_policy(&base.join("link"))(&mut p);
    let err = Sandbox::new(p).unwrap_err().to_string();
    assert!(
        err.contains("changes_dir") && err.contains("ELOOP"),
        "{err}"
    );
    // One others may read.
    let open = base.join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    let sb = common::sandbox(&ws, overlay_policy(&open));
    let err = sb.command("true").status().unwrap_err().to_string();
    assert!(
        err.contains("changes_dir") && err.contains("EPERM"),
        "{err}"
    );
    // Another workspace's change set.
    let theirs = base.join("theirs");
    common::sh_ok(
        &common::sandbox(&other, overlay_policy(&theirs)),
        "echo x > y",
    );
    let sb = common::sandbox(&ws, overlay_policy(&theirs));
    let err = sb.command("true").status().unwrap_err().to_string();
    assert!(err.contains("another workspace"), "{err}");
    // Inside the workspace: refused by the policy.
    let mut p = Policy::with_workspace(&ws);
    overlay_policy(&ws.join("set"))(&mut p);
    let err = Sandbox::new(p).unwrap_err().to_string();
    assert!(err.contains("overlaps workspace"), "{err}");
    // The parent must exist: nothing is made above the change set.
    let mut p = Policy::with_workspace(&ws);
    overlay_policy(&base.join("no/such"))(&mut p);
    let err = Sandbox::new(p).unwrap_err().to_string();
    assert!(
        err.contains("changes_dir") && err.contains("ENOENT"),
        "{err}"
    );
    assert!(!base.join("no").exists());
}

#[test]
fn root_only_a_change_set_owned_by_someone_else_is_refused() {
    require!(Feature::Root);
    require!(Feature::UserNs);
    let (_w, ws) = common::var_tempdir();
    let c = common::tempdir();
    let theirs = c.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let sb = common::sandbox(&ws, overlay_policy(&theirs));
    let err = sb.command("true").status().unwrap_err().to_string();
    assert!(
        err.contains("changes_dir") && err.contains("EPERM"),
        "{err}"
    );
    assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);
}

#[test]
fn a_run_then_apply_leaves_the_workspace_as_the_program_saw_it() {
    require!(Feature::UserNs);
    for layer in common::LAYERS {
        run_then_apply(layer);
    }
}

fn run_then_apply(layer: Layer) {
    let (_w, ws) = common::var_tempdir();
    let (_e, expected) = common::var_tempdir();
    let c = common::tempdir();
    let changes = c.path().join("set");
    fixture(&ws);
    fixture(&expected);
    // What the program does, done on the host to a copy: what it saw.
    let out = std::process::Command::new("sh")
        .args(["-c", CHANGES])
        .current_dir(&expected)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let sb = common::sandbox(&ws, overlay_on(&changes, layer));
    common::sh_ok(&sb, CHANGES);
    let set = stockade::ChangeSet::open(&changes).unwrap();
    let mut listed: Vec<(PathBuf, stockade::ChangeKind)> = set
        .entries()
        .iter()
        .map(|e| (e.path.clone(), e.kind))
        .collect();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    use stockade::ChangeKind::{Added, Deleted, ModeChanged, Modified};
    let want: Vec<(PathBuf, stockade::ChangeKind)> = [
        ("d/f", Deleted),
        ("edit.txt", Modified),
        ("from.txt", Deleted),
        ("gone.txt", Deleted),
        ("link", Modified),
        ("new.txt", Added),
        ("redo/new", Added),
        ("redo/old", Deleted),
        ("run.sh", ModeChanged),
        ("to.txt", Added),
    ]
    .into_iter()
    .map(|(p, k)| (PathBuf::from(p), k))
    .collect();
    // The overlay's opaque `redo` may be listed as the directory itself; the rest is
    // exact.
    let without_redo = |v: &[(PathBuf, stockade::ChangeKind)]| -> Vec<PathBuf> {
        v.iter()
            .filter(|(p, _)| !p.starts_with("redo"))
            .map(|(p, _)| p.clone())
            .collect()
    };
    assert_eq!(
        without_redo(&listed),
        without_redo(&want),
        "{layer}: {listed:?}"
    );
    let report = set.apply(&stockade::ApplyOptions::default()).unwrap();
    assert!(report.refused.is_empty(), "{layer}: {report:?}");
    assert!(report.conflicts.is_empty(), "{layer}: {report:?}");
    let strip = |m: BTreeMap<PathBuf, Entry>| -> Vec<(PathBuf, &'static str, u32, Vec<u8>)> {
        m.into_iter()
            .map(|(p, e)| (p, e.kind, e.mode, e.data))
            .collect()
    };
    assert_eq!(strip(listing(&ws)), strip(listing(&expected)), "{layer}");
    set.discard().unwrap();
    assert!(!changes.exists(), "{layer}");
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
