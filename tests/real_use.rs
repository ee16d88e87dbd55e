//! The full layer and layer 2 as people really use them: fixtures outside `/tmp` (inside
//! the sandbox `/tmp` is a private tmpfs, which once hid missing Landlock grants), real
//! git repositories, and a host tree that afterwards holds exactly what the program wrote.
//!
//! Every test runs as the current user; as root, `zz_all_tests_pass_as_uid_65534` re-runs
//! the file as uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::git::git;
use common::{Feature, py_ok, sh, sh_ok, try_errno, var_tempdir};
use stockade::{Error, Layer, PlanError, Policy, Sandbox};

/// Every entry under `root` (recursively, symlinks not followed) with its kind, mode, owner
/// and contents (for files), except below the `skip` names.
fn snapshot(root: &Path, skip: &[&str]) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<PathBuf, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let md = std::fs::symlink_metadata(&path).unwrap();
            let desc = if md.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).unwrap())
            } else if md.is_dir() {
                format!("dir {:o} {}", md.mode(), md.uid())
            } else {
                let data = std::fs::read(&path).unwrap_or_default();
                format!("file {:o} {} {:?}", md.mode(), md.uid(), data)
            };
            out.insert(rel.clone(), desc);
            if md.is_dir() && !skip.iter().any(|s| rel == Path::new(s)) {
                walk(root, &path, skip, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

/// The layers a containment test runs on: the full layout and layer 2.
const LAYERS: [Layer; 2] = [Layer::Full, Layer::Landlock];

fn sandbox_on(layer: Layer, ws: &Path, f: impl FnOnce(&mut Policy)) -> Sandbox {
    let mut p = Policy::with_workspace(ws);
    p.layer = Some(layer);
    p.fallback = stockade::Fallback::Refuse;
    f(&mut p);
    Sandbox::new(p).expect("sandbox")
}

#[test]
fn every_path_key_works_outside_tmp_on_both_layers() {
    require!(Feature::UserNs);
    for layer in LAYERS {
        let (_w, ws) = var_tempdir();
        let (_o, other) = var_tempdir();
        let shared = other.join("shared");
        let models = other.join("models");
        let tools = other.join("tools");
        let data = other.join("data");
        for d in [&shared, &models, &tools, &data] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(models.join("weights"), "w").unwrap();
        std::fs::write(data.join("memory"), "private").unwrap();
        let tool = tools.join("hello-tool");
        std::fs::write(&tool, "#!/bin/sh\necho tool-ran\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let sb = sandbox_on(layer, &ws, |p| {
            p.writable_paths = vec![shared.clone()];
            p.read_only = vec![models.clone()];
            p.tools_dir = Some(tools.clone());
            p.data_dir = Some(data.clone());
        });
        assert_eq!(sb.layer(), layer);
        let (w, s, m, d) = (
            ws.display(),
            shared.display(),
            models.display(),
            data.display(),
        );
        // Allowed: write the workspace and the writable path, read the read-only path,
        // run the tool from PATH.
        let out = sh_ok(
            &sb,
            &format!("touch {w}/in-ws && echo hi > {s}/in-shared && cat {m}/weights && hello-tool"),
        );
        assert_eq!(out, "wtool-ran\n", "layer {layer}");
        assert_eq!(
            std::fs::read_to_string(shared.join("in-shared")).unwrap(),
            "hi\n"
        );
        assert!(ws.join("in-ws").exists());
        // Denied: writing the read-only path and the tools dir, any access to the data dir.
        // The full layer leaves the data dir outside the roots out of the tree; layer 2
        // denies it.
        let (ro, hidden) = if layer == Layer::Full {
            ("EROFS", "ENOENT")
        } else {
            ("EACCES", "EACCES")
        };
        for (expr, want) in [
            (format!("open('{m}/new', 'w')"), ro),
            (format!("open('{}/new', 'w')", tools.display()), ro),
            (format!("os.listdir('{d}')"), hidden),
            (format!("open('{d}/memory').read()"), hidden),
        ] {
            assert_eq!(
                py_ok(&sb, &try_errno(&expr)).trim(),
                want,
                "layer {layer}: {expr}"
            );
        }
    }
}

#[test]
fn a_writable_file_and_a_nested_writable_path_outside_tmp_are_writable() {
    require!(Feature::UserNs);
    for layer in LAYERS {
        let (_w, ws) = var_tempdir();
        let (_o, other) = var_tempdir();
        let file = other.join("log.txt");
        std::fs::write(&file, "").unwrap();
        let ro = other.join("ro");
        let nested = ro.join("cache");
        std::fs::create_dir_all(&nested).unwrap();
        let sb = sandbox_on(layer, &ws, |p| {
            p.writable_paths = vec![file.clone(), nested.clone()];
            p.read_only = vec![ro.clone()];
        });
        sh_ok(
            &sb,
            &format!(
                "echo line >> {} && touch {}/x",
                file.display(),
                nested.display()
            ),
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "line\n");
        assert!(nested.join("x").exists());
        let out = sh(&sb, &format!("touch {}/y", ro.display()));
        assert!(
            !out.status.success(),
            "layer {layer}: {} writable",
            ro.display()
        );
    }
}

#[test]
fn deny_names_leave_the_host_tree_untouched_and_git_working() {
    require!(Feature::UserNs);
    for layer in [Layer::Full] {
        let (_w, ws) = var_tempdir();
        let (_s, shared) = var_tempdir();
        git(&ws, &["init", "-q"]);
        std::fs::write(ws.join(".gitignore"), ".env\n.ssh/\n").unwrap();
        std::fs::write(ws.join(".env"), "API_KEY=host-secret-value").unwrap();
        std::fs::create_dir(ws.join(".ssh")).unwrap();
        std::fs::write(ws.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
        std::fs::write(ws.join("README"), "hello\n").unwrap();
        git(&ws, &["add", "README", ".gitignore"]);
        git(&ws, &["commit", "-qm", "host"]);
        let before_ws = snapshot(&ws, &[".git"]);
        let before_shared = snapshot(&shared, &[]);
        let sb = sandbox_on(layer, &ws, |p| p.writable_paths = vec![shared.clone()]);
        let w = ws.display();
        // The secret is not readable: an empty file, an empty directory.
        assert_eq!(sh_ok(&sb, &format!("cat {w}/.env; ls -A {w}/.ssh")), "");
        for (expr, want) in [
            (format!("open('{w}/.env', 'a')"), "EACCES"),
            (format!("open('{w}/.ssh/new', 'w')"), "EROFS"),
            (format!("os.unlink('{w}/.env')"), "EBUSY"),
            (format!("os.rename('{w}/.ssh', '{w}/x')"), "EBUSY"),
        ] {
            assert_eq!(py_ok(&sb, &try_errno(&expr)).trim(), want, "{expr}");
        }
        // A plain `ls`, `git status`, `git add -A` and `git commit` keep working.
        let out = sh_ok(
            &sb,
            &format!(
                "cd {w} && ls -a >/dev/null && git status --porcelain && echo new > new.txt \
                 && git add -A && git -c user.email=a@b -c user.name=inside commit -qm inside \
                 && echo untracked > scratch.txt && git status --porcelain && touch {}/touched",
                shared.display()
            ),
        );
        assert_eq!(out, "?? scratch.txt\n", "layer {layer}");
        // The host tree holds exactly what the program wrote: nothing created, chmod-ed
        // or left behind by stockade.
        let mut after_ws = snapshot(&ws, &[".git"]);
        assert!(after_ws.remove(Path::new("new.txt")).is_some());
        assert!(after_ws.remove(Path::new("scratch.txt")).is_some());
        assert_eq!(after_ws, before_ws, "layer {layer}");
        let mut after_shared = snapshot(&shared, &[]);
        assert!(after_shared.remove(Path::new("touched")).is_some());
        assert_eq!(after_shared, before_shared, "layer {layer}");
        assert_eq!(git(&ws, &["status", "--porcelain"]), "?? scratch.txt\n");
        assert_eq!(git(&ws, &["log", "--format=%s"]), "inside\nhost\n");
        assert_eq!(
            std::fs::read_to_string(ws.join(".env")).unwrap(),
            "API_KEY=host-secret-value"
        );
    }
}

#[test]
fn a_missing_denied_name_is_not_created_and_may_be_created_inside() {
    require!(Feature::UserNs);
    let (_w, ws) = var_tempdir();
    let sb = sandbox_on(Layer::Full, &ws, |_| {});
    // Nothing appears on the host from a run that writes nothing.
    sh_ok(&sb, "ls -A .");
    assert!(snapshot(&ws, &[]).is_empty(), "{:?}", snapshot(&ws, &[]));
    // Nothing can hide what is not there yet: the program may create it.
    sh_ok(&sb, "echo mine > .env && mkdir .ssh");
    assert_eq!(std::fs::read_to_string(ws.join(".env")).unwrap(), "mine\n");
    // Once it exists, the next run hides it.
    assert_eq!(sh_ok(&sb, "cat .env"), "");
}

#[test]
fn git_init_inside_works_and_a_git_file_does_not_stop_runs() {
    require!(Feature::UserNs);
    let (_w, ws) = var_tempdir();
    let sb = sandbox_on(Layer::Full, &ws, |_| {});
    sh_ok(
        &sb,
        "git init -q && echo a > a && git add a && git -c user.email=a@b -c user.name=i commit -qm one",
    );
    assert_eq!(git(&ws, &["log", "--format=%s"]), "one\n");
    // A worktree's `.git` is a file: runs go on there.
    let (_t, wt_parent) = var_tempdir();
    let wt = wt_parent.join("wt");
    git(&ws, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    assert!(
        std::fs::symlink_metadata(wt.join(".git"))
            .unwrap()
            .is_file()
    );
    let sb = sandbox_on(Layer::Full, &wt, |_| {});
    assert_eq!(sh_ok(&sb, "cat a"), "a\n");
}

#[test]
fn a_missing_data_dir_is_an_error_and_is_not_created() {
    let (_w, ws) = var_tempdir();
    for data in [ws.join("agent-data"), ws.join("deep/agent-data")] {
        let mut p = Policy::with_workspace(&ws);
        p.data_dir = Some(data.clone());
        match Sandbox::new(p) {
            Err(Error::Plan(PlanError::Path { key, errno, .. })) => {
                assert_eq!(key, "data_dir");
                assert_eq!(errno, stockade::error::Errno::ENOENT);
            }
            other => panic!("expected a data_dir error, got {other:?}"),
        }
        assert!(snapshot(&ws, &[]).is_empty(), "{:?}", snapshot(&ws, &[]));
    }
}

#[test]
fn a_failed_run_leaves_the_host_as_it_found_it() {
    require!(Feature::UserNs);
    for layer in LAYERS {
        let (_w, ws) = var_tempdir();
        std::fs::write(ws.join(".env"), "x").unwrap();
        std::fs::create_dir(ws.join("data")).unwrap();
        let before = snapshot(&ws, &[]);
        let sb = sandbox_on(layer, &ws, |p| {
            if layer == Layer::Full {
                p.data_dir = Some(ws.join("data"));
            }
        });
        // A missing working directory, a missing program, a program that cannot run.
        sb.command("true")
            .current_dir(ws.join("no-such-dir"))
            .status()
            .unwrap_err();
        let err = sb.command("no-such-program-xyz").status().unwrap_err();
        assert!(matches!(err, Error::Spawn(_)), "{err:?}");
        let err = sb.command("/etc/hostname").status().unwrap_err();
        assert!(matches!(err, Error::Spawn(_)), "{err:?}");
        assert_eq!(snapshot(&ws, &[]), before, "layer {layer}");
    }
}

/// A workspace the caller cannot enter is named in the error, with the reason: for an
/// ordinary user, root's home (`0700` on this kind of machine); for root, which may enter
/// anything, the control: a private directory is accepted.
#[test]
fn a_workspace_the_caller_cannot_enter_is_named() {
    let (_w, parent) = var_tempdir();
    let private = parent.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    if nix::unistd::geteuid().is_root() {
        Sandbox::new(Policy::with_workspace(&private)).unwrap();
        return;
    }
    let home = Path::new("/root");
    assert_eq!(
        std::fs::metadata(home).unwrap().permissions().mode() & 0o005,
        0,
        "the fixture: /root is not private here"
    );
    match Sandbox::new(Policy::with_workspace(home)) {
        Err(Error::Plan(PlanError::Path { key, path, errno })) => {
            assert_eq!((key, path.as_path()), ("workspace", home));
            assert_eq!(errno, nix::errno::Errno::EACCES);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_command_keeps_its_stdio_and_spawns_again_like_std() {
    require!(Feature::UserNs);
    let (_w, ws) = var_tempdir();
    let log = ws.join("log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let sb = sandbox_on(Layer::Full, &ws, |_| {});
    let mut cmd = sb.command("echo");
    cmd.arg("line").stdout(stockade::Stdio::from(file));
    assert!(cmd.status().unwrap().success());
    assert!(cmd.status().unwrap().success());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "line\nline\n");
}

/// What coding agents run: a Rust project made and built with the caller's toolchain
/// (bound read-only by `read_only`, its sysroot found with `rustc --print sysroot`), node
/// and make, in a workspace outside `/tmp`, on both layers; the host tree afterwards holds
/// the project and nothing else.
#[test]
fn callers_toolchain_cargo_node_and_make_work_inside() {
    let sysroot = std::process::Command::new(std::env::var_os("RUSTC").unwrap_or("rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc --print sysroot");
    assert!(sysroot.status.success());
    let sysroot = PathBuf::from(String::from_utf8(sysroot.stdout).unwrap().trim());
    for layer in [Layer::Full, Layer::Landlock] {
        if layer == Layer::Full {
            require!(Feature::UserNs);
        }
        let (_w, ws) = var_tempdir();
        let sb = sandbox_on(layer, &ws, |p| p.read_only = vec![sysroot.clone()]);
        let s = sysroot.display();
        let out = sh_ok(
            &sb,
            &format!(
                "cd {w} && export CARGO_HOME={w}/.cargo RUSTC={s}/bin/rustc && \
                 {s}/bin/cargo new -q --vcs none hello && cd hello && \
                 {s}/bin/cargo build --offline -q && ./target/debug/hello && \
                 printf 'all:\n\t@echo made\n' > Makefile && make -s && \
                 node -e 'console.log(6 * 7)'",
                w = ws.display()
            ),
        );
        assert_eq!(out, "Hello, world!\nmade\n42\n", "layer {layer}");
        let mut top: Vec<String> = std::fs::read_dir(&ws)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        assert_eq!(top, [".cargo", "hello"], "layer {layer}");
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
