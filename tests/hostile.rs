//! A sandboxed program that prepares the next run: what it plants in its writable roots
//! (symlinks over policy paths, a `.git` file or symlink) must not reach the host.
//!
//! Fixtures sit under `/var/tmp` (outside the sandbox's private `/tmp`). Every test runs
//! as the current user; as root, `zz_all_tests_pass_as_uid_65534` re-runs the file as
//! uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;

use common::{Feature, openpty, sh, sh_ok, var_tempdir};
use stockade::{Error, Layer, PlanError, Policy, Sandbox};

fn policy(ws: &Path, layer: Layer) -> Policy {
    let mut p = Policy::with_workspace(ws);
    p.layer = Some(layer);
    p.fallback = stockade::Fallback::Refuse;
    p
}

fn expect_symlink_error(r: Result<Sandbox, Error>, key: &str, link: &Path) {
    match r {
        Err(Error::Plan(PlanError::Symlink {
            key: k, link: l, ..
        })) => {
            assert_eq!(k, key);
            assert_eq!(l, link);
        }
        other => panic!("expected a symlink error for {key}, got {other:?}"),
    }
}

#[test]
fn a_read_only_path_replaced_by_a_symlink_is_refused_not_followed() {
    require!(Feature::UserNs);
    for layer in [Layer::Full, Layer::Landlock] {
        let (_w, ws) = var_tempdir();
        let (_h, host) = var_tempdir();
        std::fs::write(host.join("host-secret"), "host").unwrap();
        let models = ws.join("models");
        std::fs::create_dir(&models).unwrap();
        let mut p = policy(&ws, layer);
        p.read_only = vec![models.clone()];
        Sandbox::new(p.clone()).unwrap();
        // A run under a policy without that path swaps the directory for a link to a
        // host directory (the read-only bind itself would refuse: EBUSY)...
        let sb = Sandbox::new(policy(&ws, layer)).unwrap();
        sh_ok(
            &sb,
            &format!(
                "cd {} && rm -r models && ln -s {} models",
                ws.display(),
                host.display()
            ),
        );
        // ...the next sandbox with that policy refuses to start, naming the link.
        expect_symlink_error(Sandbox::new(p), "read_only", &models);
    }
}

#[test]
fn every_configured_path_through_a_symlink_is_refused() {
    let (_w, ws) = var_tempdir();
    let (_h, host) = var_tempdir();
    let real = host.join("real");
    std::fs::create_dir(&real).unwrap();
    let link = host.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let via = link.clone();
    for layer in [Layer::Full, Layer::Landlock] {
        type Set<'a> = Box<dyn Fn(&mut Policy) + 'a>;
        let cases: Vec<(&str, Set)> = vec![
            ("workspace", Box::new(|p| p.workspace = Some(via.clone()))),
            (
                "writable_paths",
                Box::new(|p| p.writable_paths = vec![via.clone()]),
            ),
            ("read_only", Box::new(|p| p.read_only = vec![via.clone()])),
            ("tools_dir", Box::new(|p| p.tools_dir = Some(via.clone()))),
        ];
        for (key, f) in cases {
            let mut p = policy(&ws, layer);
            f(&mut p);
            expect_symlink_error(Sandbox::new(p), key, &link);
        }
    }
    // The data dir, in the full layer (layer 2 refuses a data dir under a root anyway).
    let mut p = policy(&ws, Layer::Full);
    p.data_dir = Some(link.join("sub"));
    std::fs::create_dir(real.join("sub")).unwrap();
    expect_symlink_error(Sandbox::new(p), "data_dir", &link);
}

/// A program plants `sub -> /etc` (or a link to a directory it owns) in its workspace;
/// the next sandbox names `sub` (or a path through it) in its policy. Inside the workspace
/// as outside it, every configured path that is or passes through a symlink is refused
/// with the symlink error, on both layers: a writable path there was once accepted
/// silently (and bound nothing), a data dir reported `ENOTDIR`.
#[test]
fn configured_paths_through_a_symlink_inside_the_workspace_are_refused() {
    let (_w, ws) = var_tempdir();
    std::fs::create_dir(ws.join("real")).unwrap();
    std::fs::create_dir(ws.join("real/data")).unwrap();
    let to_etc = ws.join("sub");
    std::os::unix::fs::symlink("/etc", &to_etc).unwrap();
    let to_real = ws.join("lnk");
    std::os::unix::fs::symlink("real", &to_real).unwrap();
    for layer in [Layer::Full, Layer::Landlock] {
        for (link, via) in [(&to_etc, to_etc.clone()), (&to_real, to_real.join("data"))] {
            type Set<'a> = Box<dyn Fn(&mut Policy) + 'a>;
            let cases: Vec<(&str, Set)> = vec![
                (
                    "writable_paths",
                    Box::new(|p| p.writable_paths = vec![via.clone()]),
                ),
                ("read_only", Box::new(|p| p.read_only = vec![via.clone()])),
                ("tools_dir", Box::new(|p| p.tools_dir = Some(via.clone()))),
                ("data_dir", Box::new(|p| p.data_dir = Some(via.clone()))),
            ];
            for (key, f) in cases {
                let mut p = policy(&ws, layer);
                f(&mut p);
                expect_symlink_error(Sandbox::new(p), key, link);
            }
        }
    }
}

#[test]
fn a_nested_writable_path_planted_as_a_symlink_binds_nothing() {
    require!(Feature::UserNs);
    let (_w, ws) = var_tempdir();
    let (_s, shared) = var_tempdir();
    let (_h, host) = var_tempdir();
    let nested = shared.join("nested");
    std::fs::create_dir(&nested).unwrap();
    let mut p = policy(&ws, Layer::Full);
    p.writable_paths = vec![shared.clone(), nested.clone()];
    let sb = Sandbox::new(p.clone()).unwrap();
    // Planted by a run of another sandbox, then used by a spawn of the first one.
    let mut planter = policy(&ws, Layer::Full);
    planter.writable_paths = vec![shared.clone()];
    sh_ok(
        &Sandbox::new(planter).unwrap(),
        &format!(
            "rmdir {n} && ln -s {h} {n}",
            n = nested.display(),
            h = host.display()
        ),
    );
    // A writable path inside another one is not bound again: the link stays a link to
    // a host directory that is not in the sandbox, and nothing is written there.
    let out = sh(&sb, &format!("touch {}/x", nested.display()));
    assert!(!out.status.success());
    // The next sandbox refuses the policy outright; the host dir got nothing.
    expect_symlink_error(Sandbox::new(p), "writable_paths", &nested);
    assert_eq!(std::fs::read_dir(&host).unwrap().count(), 0);
}

#[test]
fn a_git_file_or_planted_git_symlink_does_not_deny_service() {
    require!(Feature::UserNs);
    let (_w, ws) = var_tempdir();
    let (_h, host) = var_tempdir();
    std::fs::create_dir(host.join("hooks")).unwrap();
    let sb = Sandbox::new(policy(&ws, Layer::Full)).unwrap();
    // A `.git` symlink to a host directory: the guard does not follow it, runs go on.
    std::os::unix::fs::symlink(&host, ws.join(".git")).unwrap();
    assert_eq!(sh_ok(&sb, "echo ok"), "ok\n");
    // The host directory it names is not writable through it.
    let out = sh(&sb, "touch .git/hooks/pre-commit");
    assert!(!out.status.success());
    assert_eq!(std::fs::read_dir(host.join("hooks")).unwrap().count(), 0);
    // A `.git` file (a worktree or a submodule): runs go on.
    std::fs::remove_file(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git"), "gitdir: /nowhere\n").unwrap();
    assert_eq!(sh_ok(&sb, "cat .git"), "gitdir: /nowhere\n");
}

#[test]
fn host_unix_sockets_under_read_only_paths_are_masked_unless_named() {
    require!(Feature::UserNs);
    let (_w, ws) = var_tempdir();
    let (_o, opt) = var_tempdir();
    let sock = opt.join("svc.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "s = socket.socket(socket.AF_UNIX); s.connect('{}')",
        sock.display()
    );
    let mut p = policy(&ws, Layer::Full);
    p.read_only = vec![opt.clone()];
    let sb = Sandbox::new(p.clone()).unwrap();
    assert_eq!(
        common::py_ok(&sb, &common::try_errno(&connect)).trim(),
        "ECONNREFUSED"
    );
    // Named by the policy: reachable.
    p.read_only.push(sock.clone());
    let sb = Sandbox::new(p).unwrap();
    assert_eq!(
        common::py_ok(&sb, &common::try_errno(&connect)).trim(),
        "OK"
    );
}

#[test]
fn root_only_private_files_under_the_allowlist_stay_private() {
    require!(Feature::UserNs);
    require!(Feature::Root);
    use std::os::unix::fs::PermissionsExt;
    let (_w, ws) = var_tempdir();
    let (_o, opt) = var_tempdir();
    std::fs::set_permissions(&opt, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(opt.join("tls")).unwrap();
    std::fs::write(opt.join("tls/key.pem"), "PRIVATE").unwrap();
    std::fs::set_permissions(
        opt.join("tls/key.pem"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(opt.join("tls/cert.pem"), "PUBLIC").unwrap();
    std::fs::set_permissions(
        opt.join("tls/cert.pem"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    for layer in [Layer::Full, Layer::Landlock] {
        let mut p = policy(&ws, layer);
        p.read_only = vec![opt.clone()];
        let sb = Sandbox::new(p).unwrap();
        let o = opt.display();
        for (expr, want) in [
            (format!("open('{o}/tls/key.pem').read()"), "EACCES"),
            ("open('/etc/shadow').read()".to_string(), "EACCES"),
            (format!("open('{o}/tls/cert.pem').read()"), "OK"),
            ("open('/etc/passwd').read()".to_string(), "OK"),
        ] {
            assert_eq!(
                common::py_ok(&sb, &common::try_errno(&expr)).trim(),
                want,
                "layer {layer}: {expr}"
            );
        }
    }
}

/// A read-only root for a root host's layer 2 that is granted entry by entry: `tls/` holds
/// a private key (`0600`) beside a public certificate.
fn private_tree() -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    let (dir, opt) = var_tempdir();
    mode(&opt, 0o755);
    std::fs::create_dir(opt.join("tls")).unwrap();
    mode(&opt.join("tls"), 0o755);
    std::fs::write(opt.join("tls/key.pem"), "PRIVATE").unwrap();
    mode(&opt.join("tls/key.pem"), 0o600);
    std::fs::write(opt.join("tls/cert.pem"), "PUBLIC").unwrap();
    mode(&opt.join("tls/cert.pem"), 0o644);
    (dir, opt)
}

/// A root host's layer-2 sandbox with [`private_tree`] as a read-only path: its rules are
/// split into a shared layer and each command's own. Returns the fixtures to keep, the
/// tree and the sandbox.
fn root_layer_two_over_a_private_tree() -> ([tempfile::TempDir; 2], std::path::PathBuf, Sandbox) {
    let (w, ws) = var_tempdir();
    let (o, opt) = private_tree();
    let mut p = policy(&ws, Layer::Landlock);
    p.read_only = vec![opt.clone()];
    let sb = Sandbox::new(p).unwrap();
    ([w, o], opt, sb)
}

/// Layer 2 on a root host builds the rules it grants entry by entry once per sandbox, not
/// once per command (each command then costs what it costs on a user host), and builds
/// them again when a directory granted entry by entry changes: a file replaced by rename
/// (as `useradd` replaces `/etc/passwd`) is read by the next command. What was not there
/// when the sandbox was made stays out of reach, private or not.
#[test]
fn root_only_layer_two_builds_its_entry_by_entry_rules_once_and_again_after_a_change() {
    require!(Feature::Root);
    use std::os::unix::fs::PermissionsExt;
    use stockade::backend::linux::shared_layer::{RACY, builds_on_this_thread};
    let (_dirs, opt, sb) = root_layer_two_over_a_private_tree();
    let tls = opt.join("tls");
    let read = |name: &str| {
        let expr = format!("print(open('{}').read(), end='')", tls.join(name).display());
        let out = common::py_ok(&sb, &common::try_errno(&expr));
        out.trim_end().trim_end_matches("OK").to_string()
    };
    // The fixture was just made: a build now would not be trusted (its directories'
    // times could still change unseen), so let them settle first.
    std::thread::sleep(RACY + std::time::Duration::from_millis(200));
    let before = builds_on_this_thread();
    for _ in 0..3 {
        assert_eq!(read("cert.pem"), "PUBLIC");
        assert_eq!(read("key.pem"), "EACCES");
    }
    assert_eq!(
        builds_on_this_thread() - before,
        1,
        "one build for six commands"
    );
    let new = tls.join(".cert.pem.new");
    std::fs::write(&new, "PUBLIC, RENEWED").unwrap();
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::rename(&new, tls.join("cert.pem")).unwrap();
    assert_eq!(read("cert.pem"), "PUBLIC, RENEWED");
    assert!(builds_on_this_thread() - before >= 2);
    for (name, mode) in [("later.key", 0o600), ("later.pem", 0o644)] {
        std::fs::write(tls.join(name), "LATER").unwrap();
        std::fs::set_permissions(tls.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(read(name), "EACCES", "{name}");
    }
    assert_eq!(read("key.pem"), "EACCES");
    assert_eq!(read("cert.pem"), "PUBLIC, RENEWED");
}

/// On layer 2 each command gets a `TMPDIR` of its own; a root host's commands share one
/// Landlock layer that grants the whole temporary directory, and their own layer narrows
/// it: a command cannot reach another's `TMPDIR`, nor the rest of the host's `/tmp`.
#[test]
fn root_only_layer_two_keeps_each_commands_tmpdir_to_itself() {
    require!(Feature::Root);
    let (_dirs, _opt, sb) = root_layer_two_over_a_private_tree();
    let mut first = sb
        .command("sh")
        .args([
            "-c",
            r#"echo secret > "$TMPDIR/f" && echo "$TMPDIR" && { read _ || :; }"#,
        ])
        .stdin(stockade::Stdio::piped())
        .stdout(stockade::Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line(&mut first);
    let theirs = line.trim();
    assert!(Path::new(theirs).join("f").exists(), "{theirs}");
    for (expr, want) in [
        (format!("open('{theirs}/f').read()"), "EACCES"),
        (format!("open('{theirs}/g', 'w')"), "EACCES"),
        (format!("os.listdir('{theirs}')"), "EACCES"),
        ("open('/tmp/stockade-x', 'w')".to_string(), "EACCES"),
        (
            "open(os.environ['TMPDIR'] + '/mine', 'w')".to_string(),
            "OK",
        ),
    ] {
        assert_eq!(
            common::py_ok(&sb, &common::try_errno(&expr)).trim(),
            want,
            "{expr}"
        );
    }
    drop(first.stdin.take());
    assert!(first.wait().unwrap().success());
    assert!(!Path::new(theirs).exists(), "{theirs} outlived its command");
}

/// A root host's layer-2 commands, spawned from several threads of one sandbox while a
/// directory granted entry by entry keeps changing (so that nearly every command rebuilds
/// the shared layer, which the others may be entering): each still reads the public file,
/// not the private one, and writes its own `TMPDIR`.
#[test]
fn root_only_layer_two_spawns_from_several_threads_while_the_shared_layer_rebuilds() {
    require!(Feature::Root);
    use std::sync::atomic::{AtomicBool, Ordering};
    use stockade::backend::linux::shared_layer::builds_on_this_thread;
    const THREADS: u64 = 4;
    const EACH: u64 = 12;
    let (_dirs, opt, sb) = root_layer_two_over_a_private_tree();
    let tls = opt.join("tls");
    let stop = AtomicBool::new(false);
    let script = format!(
        "for f in {t}/cert.pem {t}/key.pem; do head -c6 $f 2>&1; echo; done; \
         echo mine > \"$TMPDIR/f\" && cat \"$TMPDIR/f\"",
        t = tls.display()
    );
    let key = tls.join("key.pem");
    let builds: u64 = std::thread::scope(|s| {
        let churn = s.spawn(|| {
            // A new entry, renamed and removed: the directory's times change each round.
            let (a, b) = (tls.join(".churn"), tls.join("churn"));
            let mut rounds = 0u32;
            while !stop.load(Ordering::Relaxed) {
                std::fs::write(&a, "x").unwrap();
                std::fs::rename(&a, &b).unwrap();
                std::fs::remove_file(&b).unwrap();
                rounds += 1;
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            rounds
        });
        let spawners: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    let before = builds_on_this_thread();
                    for _ in 0..EACH {
                        let out = sh_ok(&sb, &script);
                        let want = format!(
                            "PUBLIC\nhead: cannot open '{}' for reading: Permission denied\n\nmine\n",
                            key.display()
                        );
                        assert_eq!(out, want);
                    }
                    builds_on_this_thread() - before
                })
            })
            .collect();
        let results: Vec<_> = spawners.into_iter().map(|t| t.join()).collect();
        // Stopped before any panic is passed on, or the scope would wait for it forever.
        stop.store(true, Ordering::Relaxed);
        assert!(churn.join().unwrap() > 0);
        results.into_iter().map(|r| r.unwrap()).sum()
    });
    // Every build during the churn is untrusted (its directory changed within `RACY`):
    // the next command builds again.
    assert!(
        builds >= 2,
        "{builds} builds for {} commands",
        THREADS * EACH
    );
}

/// The shared layer of a root host's layer 2 cannot be built while a path it names is a
/// symlink loop (`ELOOP` is no "does not exist"): the command fails, naming the path, and
/// leaves nothing behind; once the path is a file again, the next command builds the layer
/// and runs.
#[test]
fn root_only_layer_two_spawns_again_after_a_failed_build_of_the_shared_layer() {
    require!(Feature::Root);
    let (_dirs, opt, sb) = root_layer_two_over_a_private_tree();
    let tls = opt.join("tls");
    let cert = tls.join("cert.pem");
    let script = format!("head -c20 {}; echo; echo \"$TMPDIR\"", cert.display());
    let out = sh_ok(&sb, &script);
    let (first, tmpdir) = out.split_once('\n').unwrap();
    assert_eq!(first, "PUBLIC");
    let parent = Path::new(tmpdir.trim()).parent().unwrap().to_path_buf();
    // The entry granted by name becomes a link to itself (by rename, so its directory's
    // times change and the layer is rebuilt).
    std::os::unix::fs::symlink("cert.pem", tls.join(".loop")).unwrap();
    std::fs::rename(tls.join(".loop"), &cert).unwrap();
    for _ in 0..2 {
        let err = sb.command("true").status().unwrap_err();
        let mut chain = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(e) = source {
            chain.push_str(&format!(": {e}"));
            source = e.source();
        }
        assert!(
            chain.contains("shared Landlock layer")
                && chain.contains(cert.to_str().unwrap())
                && chain.contains(common::ELOOP_TEXT),
            "{chain}"
        );
        let left: Vec<_> = std::fs::read_dir(&parent).unwrap().collect();
        assert!(left.is_empty(), "a failed spawn left {left:?}");
    }
    // Mended: a file again, also by rename.
    use std::os::unix::fs::PermissionsExt;
    let new = tls.join(".cert.pem.new");
    std::fs::write(&new, "PUBLIC AGAIN").unwrap();
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::rename(&new, &cert).unwrap();
    let out = sh_ok(&sb, &script);
    assert!(out.starts_with("PUBLIC AGAIN\n"), "{out}");
    let key = common::py_ok(
        &sb,
        &common::try_errno(&format!("open('{}').read()", tls.join("key.pem").display())),
    );
    assert_eq!(key.trim(), "EACCES");
}

/// A layer-2 sandbox leaves the host's temporary directory as it found it: every command's
/// `TMPDIR` goes with the command and, on a root host, the sandbox's own directory that
/// holds them (`0700`, the host's) goes with the last of the sandbox and its commands,
/// also when a command outlives the sandbox, reaped or dropped unreaped. The sandbox runs
/// in a process of its own whose `TMPDIR` is a fresh directory, which must end empty.
#[test]
fn layer_two_leaves_the_hosts_temporary_directory_as_found() {
    if std::env::var_os("STOCKADE_TEST_TMP_INNER").is_some() {
        return;
    }
    let (_t, tmp) = var_tempdir();
    let exe = std::env::current_exe().unwrap();
    let inner = "layer_two_leaves_the_hosts_temporary_directory_as_found_inner";
    let out = std::process::Command::new(&exe)
        .args(["--exact", inner, "--nocapture", "--test-threads", "1"])
        .env("STOCKADE_TEST_TMP_INNER", "1")
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The inside half of `layer_two_leaves_the_hosts_temporary_directory_as_found`, in a
/// process whose `TMPDIR` is its own.
#[test]
fn layer_two_leaves_the_hosts_temporary_directory_as_found_inner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if std::env::var_os("STOCKADE_TEST_TMP_INNER").is_none() {
        return;
    }
    let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
    let root = nix::unistd::geteuid().is_root();
    let entries = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let (_w, ws) = var_tempdir();
    let sb = Sandbox::new(policy(&ws, Layer::Landlock)).unwrap();
    assert!(entries().is_empty(), "Sandbox::new wrote {:?}", entries());
    let dir = std::path::PathBuf::from(sh_ok(&sb, r#"echo "$TMPDIR""#).trim());
    assert!(!dir.exists(), "{}", dir.display());
    let parent = dir.parent().unwrap().to_path_buf();
    if root {
        // The sandbox's own directory, kept for its next commands.
        assert_eq!(parent.parent(), Some(tmp.as_path()), "{}", dir.display());
        let name = parent.file_name().unwrap().to_string_lossy();
        assert!(name.starts_with("stockade-sandbox-"), "{name}");
        let md = std::fs::symlink_metadata(&parent).unwrap();
        assert!(md.is_dir() && md.uid() == 0, "{md:?}");
        assert_eq!(md.permissions().mode() & 0o777, 0o700);
        assert_eq!(entries(), std::slice::from_ref(&parent));
        // Removed beneath the sandbox (a cleaner of old files): the next command gets a
        // new one, which the shared layer grants.
        std::fs::remove_dir(&parent).unwrap();
        let out = sh_ok(
            &sb,
            r#"echo x > "$TMPDIR/f" && cat "$TMPDIR/f" && echo "$TMPDIR""#,
        );
        let (x, dir) = out.split_once('\n').unwrap();
        assert_eq!(x, "x");
        let again = Path::new(dir.trim()).parent().unwrap();
        assert_ne!(again, parent);
        assert_eq!(entries(), [again]);
    } else {
        assert_eq!(parent, tmp);
        assert!(entries().is_empty(), "{:?}", entries());
    }
    // Two commands that outlive the sandbox: one reaped after, one dropped unreaped.
    let spawn = || {
        let mut child = sb
            .command("sh")
            .args([
                "-c",
                r#"echo "$TMPDIR"; read x; echo "$x" > "$TMPDIR/after" && cat "$TMPDIR/after""#,
            ])
            .stdin(stockade::Stdio::piped())
            .stdout(stockade::Stdio::piped())
            .spawn()
            .unwrap();
        let line = first_line(&mut child);
        (child, std::path::PathBuf::from(line.trim()))
    };
    let (mut reaped, reaped_dir) = spawn();
    let (dropped, dropped_dir) = spawn();
    drop(sb);
    assert!(reaped_dir.is_dir() && dropped_dir.is_dir());
    std::io::Write::write_all(reaped.stdin.as_mut().unwrap(), b"still mine\n").unwrap();
    let out = reaped.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "still mine\n");
    assert!(!reaped_dir.exists());
    // The other command still holds the sandbox's directory.
    assert!(dropped_dir.is_dir());
    drop(dropped);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !entries().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(entries().is_empty(), "left behind: {:?}", entries());
}

/// Each layer-2 command's `TMPDIR` goes when the command is reaped, whether the program
/// left it empty or not.
#[test]
fn layer_two_removes_each_commands_tmpdir_empty_or_not() {
    let (_w, ws) = var_tempdir();
    let sb = Sandbox::new(policy(&ws, Layer::Landlock)).unwrap();
    for script in [
        r#"echo "$TMPDIR""#,
        r#"mkdir -p "$TMPDIR/d/e" && echo x > "$TMPDIR/d/e/f" && echo "$TMPDIR""#,
    ] {
        let dir = sh_ok(&sb, script);
        let dir = Path::new(dir.trim());
        let tmp = std::env::temp_dir();
        let in_tmp = dir.starts_with(&tmp) || dir.starts_with(std::fs::canonicalize(&tmp).unwrap());
        assert!(in_tmp, "{}", dir.display());
        assert!(!dir.exists(), "{} outlived its command", dir.display());
    }
}

/// A command's private `TMPDIR` is the program's alone: mode 0700, not the umask's 0755
/// that would let other users of the host read what the program leaves in it.
#[test]
fn layer_two_tmpdir_is_closed_to_other_users() {
    let (_w, ws) = var_tempdir();
    let sb = Sandbox::new(policy(&ws, Layer::Landlock)).unwrap();
    let out = sh_ok(&sb, r#"stat -c %a "$TMPDIR""#);
    assert_eq!(out.trim(), "700");
}

#[test]
fn writable_roots_are_mounted_nosuid() {
    require!(Feature::UserNs);
    let (_w, ws) = var_tempdir();
    let (_s, shared) = var_tempdir();
    let mut p = policy(&ws, Layer::Full);
    p.writable_paths = vec![shared.clone()];
    let sb = Sandbox::new(p).unwrap();
    let info = sh_ok(&sb, "cat /proc/self/mountinfo");
    for root in [&ws, &shared] {
        let line = info
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(root.to_str().unwrap()))
            .unwrap_or_else(|| panic!("{} not mounted:\n{info}", root.display()));
        let opts = line.split(' ').nth(5).unwrap();
        assert!(opts.split(',').any(|o| o == "nosuid"), "{line}");
        assert!(opts.split(',').any(|o| o == "rw"), "{line}");
    }
}

#[test]
fn layer_two_grants_the_programs_own_terminal_and_no_other() {
    let (_m1, mine, mine_path) = openpty();
    let (_m2, _other, other_path) = openpty();
    let (_w, ws) = var_tempdir();
    let sb = Sandbox::new(policy(&ws, Layer::Landlock)).unwrap();
    let code = format!(
        "import os\nfor p in ['{}', '{}']:\n    try:\n        os.close(os.open(p, os.O_RDWR | os.O_NOCTTY)); print('OK')\n    except OSError as e:\n        print(e.errno)",
        mine_path.display(),
        other_path.display()
    );
    let out = sb
        .command("python3")
        .arg("-c")
        .arg(code)
        .stdin(stockade::Stdio::from(mine))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("OK\n{}\n", libc::EACCES)
    );
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}

/// The first line of `child`'s piped stdout.
fn first_line(child: &mut stockade::Child) -> String {
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    line
}
