//! `deny_names` that cannot be hidden by covering the name (issue 22, point 9).
//!
//! The full layer hides an existing denied name at the top of each writable root by an
//! empty entry of its kind. A symbolic link would leave what it names readable (and
//! following a link the program planted could name anything), and a file with more than
//! one hard link leaves its other names readable: for both the spawn is refused with
//! [`SpawnError::DeniedName`], naming the entry, and nothing runs. Layer 2 (Landlock
//! only) hides no denied name at all (Landlock grants whole subtrees); it says so through
//! [`Sandbox::unhidden_names`] and the CLI's warning line.
//!
//! Fixtures sit under `/var/tmp` (outside the sandbox's private `/tmp`). Every test runs
//! as the current user; as root, `zz_all_tests_pass_as_uid_65534` re-runs the file as uid
//! 65534.
#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};

use common::git::git;
use common::{Feature, sandbox, sh, sh_ok, var_tempdir};
use stockade::error::Unhidable;
use stockade::{Error, Layer, SpawnError};

const SECRET: &str = "API_KEY=sk-live-0123456789abcdef";

/// Runs `cat .env` in the workspace `w`; returns the spawn's error, asserting that no
/// output (had the command run) carries the secret.
fn cat_env(sb: &stockade::Sandbox, w: &Path) -> Result<String, Error> {
    let out = sb
        .command("sh")
        .arg("-c")
        .arg("cat .env; echo end")
        .current_dir(w)
        .output()?;
    Ok(common::output_text(&out))
}

/// The spawn is refused as a denied name that cannot be hidden, with this path and reason.
fn assert_refused(r: Result<String, Error>, path: &Path, want: Unhidable) {
    match r {
        Err(Error::Spawn(SpawnError::DeniedName { path: p, reason })) => {
            assert_eq!(p, path);
            assert_eq!(reason, want);
        }
        Err(e) => panic!("another error: {e}"),
        Ok(out) => {
            assert!(!out.contains(SECRET), "the secret leaked: {out}");
            panic!("the spawn was not refused: {out}");
        }
    }
}

#[test]
fn a_denied_name_that_is_a_symlink_into_the_workspace_refuses_the_spawn() {
    require!(Feature::UserNs);
    let (_d, w) = var_tempdir();
    std::fs::create_dir(w.join("config")).unwrap();
    std::fs::write(w.join("config/prod.env"), SECRET).unwrap();
    std::os::unix::fs::symlink("config/prod.env", w.join(".env")).unwrap();
    let sb = sandbox(&w, |p| p.layer = Some(Layer::Full));
    let r = cat_env(&sb, &w);
    assert_refused(
        r,
        &w.join(".env"),
        Unhidable::Symlink(Some("config/prod.env".into())),
    );
    // The message says what to do; the host's tree is as it was.
    let e = sb.command("true").current_dir(&w).status().unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "the denied name {} cannot be hidden: it is a symbolic link (to \"config/prod.env\")",
            w.join(".env").display()
        )),
        "{e}"
    );
    assert_eq!(
        std::fs::read_link(w.join(".env")).unwrap(),
        Path::new("config/prod.env")
    );
    // Replaced by the file itself, it is hidden again.
    std::fs::remove_file(w.join(".env")).unwrap();
    std::fs::rename(w.join("config/prod.env"), w.join(".env")).unwrap();
    assert_eq!(cat_env(&sb, &w).unwrap(), "end\n");
}

#[test]
fn a_denied_name_that_is_a_symlink_out_of_the_workspace_refuses_the_spawn() {
    require!(Feature::UserNs);
    let (_d, w) = var_tempdir();
    // A secret beside the workspace, in a directory the policy shows inside.
    let (_o, outside) = var_tempdir();
    std::fs::write(outside.join("prod.env"), SECRET).unwrap();
    let target = outside.join("prod.env");
    std::os::unix::fs::symlink(&target, w.join(".env")).unwrap();
    for key in ["read_only", "writable_paths"] {
        let sb = sandbox(&w, |p| {
            p.layer = Some(Layer::Full);
            match key {
                "read_only" => p.read_only.push(outside.clone()),
                _ => p.writable_paths.push(outside.clone()),
            }
        });
        assert_refused(
            cat_env(&sb, &w),
            &w.join(".env"),
            Unhidable::Symlink(Some(target.clone())),
        );
    }
    // One at the top of a writable path outside the workspace, too.
    std::fs::remove_file(w.join(".env")).unwrap();
    std::os::unix::fs::symlink("prod.env", outside.join("id_rsa")).unwrap();
    let sb = sandbox(&w, |p| {
        p.layer = Some(Layer::Full);
        p.writable_paths.push(outside.clone());
    });
    let r = sb.command("cat").arg(outside.join("id_rsa")).output();
    match r {
        Err(Error::Spawn(SpawnError::DeniedName { path, .. })) => {
            assert_eq!(path, outside.join("id_rsa"))
        }
        other => panic!("not refused: {other:?}"),
    }
}

/// A program plants a hard link under a denied name that does not exist yet (nothing
/// hides it then); the user later writes a secret into `.env`. The next run would read it
/// through the other name: it is refused instead.
#[test]
fn a_denied_name_with_another_hard_link_refuses_the_spawn() {
    require!(Feature::UserNs);
    let (_d, w) = var_tempdir();
    let sb = sandbox(&w, |p| p.layer = Some(Layer::Full));
    sh_ok(
        &sb,
        &format!("cd {} && : > notes.txt && ln notes.txt .env", w.display()),
    );
    // The user's editor appends in place.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(w.join(".env"))
        .unwrap();
    f.write_all(SECRET.as_bytes()).unwrap();
    drop(f);
    let r = sb
        .command("cat")
        .arg("notes.txt")
        .current_dir(&w)
        .output()
        .map(|o| common::output_text(&o));
    assert_refused(r, &w.join(".env"), Unhidable::HardLinks(Some(2)));
    // Once the other name is gone, `.env` is hidden as any other.
    std::fs::remove_file(w.join("notes.txt")).unwrap();
    assert_eq!(cat_env(&sb, &w).unwrap(), "end\n");
}

/// Plain denied names stay hidden, directories (whose link count is always above one)
/// included, and git works over them.
#[test]
fn plain_denied_names_are_still_hidden_and_git_works() {
    require!(Feature::UserNs);
    let (_d, w) = var_tempdir();
    std::fs::write(w.join(".env"), SECRET).unwrap();
    std::fs::create_dir_all(w.join(".ssh/keys")).unwrap();
    std::fs::write(w.join(".ssh/id_ed25519"), SECRET).unwrap();
    std::fs::write(w.join(".gitignore"), ".env\n.ssh/\n").unwrap();
    std::fs::write(w.join("a.txt"), "a").unwrap();
    git(&w, &["init", "-q"]);
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-qm", "host"]);
    let sb = sandbox(&w, |p| p.layer = Some(Layer::Full));
    assert_eq!(cat_env(&sb, &w).unwrap(), "end\n");
    let out = sh_ok(
        &sb,
        &format!(
            "cd {} && ls -A .ssh | wc -l && git status --porcelain && echo b > b.txt && \
             git add -A && git -c user.email=i@x -c user.name=i commit -qm inside && \
             git status --porcelain && git log --oneline | wc -l",
            w.display()
        ),
    );
    assert_eq!(out, "0\n2\n");
    assert_eq!(std::fs::read_to_string(w.join(".env")).unwrap(), SECRET);
    assert!(git(&w, &["status", "--porcelain"]).is_empty());
}

/// Layer 2 hides no denied name (a Landlock rule grants a whole subtree, with no
/// exceptions): it says so, for plain, symlinked and hard-linked names alike, and the
/// CLI prints it as a warning.
#[test]
fn layer_two_lists_the_denied_names_it_cannot_hide() {
    let (_d, w) = var_tempdir();
    let sb = sandbox(&w, |p| p.layer = Some(Layer::Landlock));
    assert_eq!(sb.layer(), Layer::Landlock);
    assert!(sb.unhidden_names().is_empty());
    std::fs::write(w.join("config.env"), SECRET).unwrap();
    std::os::unix::fs::symlink("config.env", w.join(".env")).unwrap();
    std::fs::create_dir(w.join(".ssh")).unwrap();
    std::fs::hard_link(w.join("config.env"), w.join("id_rsa")).unwrap();
    let want: Vec<PathBuf> = [".env", ".ssh", "id_rsa"]
        .iter()
        .map(|n| w.join(n))
        .collect();
    assert_eq!(sb.unhidden_names(), want);
    // What the list says is what the program sees.
    let out = sh(&sb, &format!("cat {}/.env", w.display()));
    assert_eq!(common::output_text(&out), SECRET);
    // The full layer's list is empty: it hides them or refuses to run.
    if Feature::UserNs.missing().is_none() {
        let full = sandbox(&w, |p| p.layer = Some(Layer::Full));
        assert!(full.unhidden_names().is_empty());
    }
    let cli = std::process::Command::new(common::stockade_exe())
        .args(["run", "--no-pty", "--layer", "landlock", "--workspace"])
        .arg(&w)
        .args(["--", "true"])
        .current_dir(&w)
        .output()
        .unwrap();
    let text = common::output_text(&cli);
    for p in &want {
        assert!(
            text.contains(&format!(
                "stockade: warning: layer `landlock` does not hide the denied name {}",
                p.display()
            )),
            "{text}"
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
