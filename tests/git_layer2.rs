//! Layer 2 (Landlock and seccomp, no namespaces) has no `.git` layer: the program writes
//! the host's `.git` itself. Its control files (config, hooks, `commondir`, `info/`,
//! `worktrees/`, `modules/`, alternates, a `gitdir:` file) are snapshotted before each
//! command and put back after it, once every process of the run has ended, each
//! restoration reported through `Child::git_dropped`.
//!
//! Each redirection is proven by what it would do on the host: the planted command creates
//! a marker in a host directory the sandbox cannot reach, and the host runs real git
//! afterwards. Fixtures sit under `/var/tmp`. Every test runs as the current user; as root,
//! `zz_all_tests_pass_as_uid_65534` re-runs the file as uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::git::{Repo, git, git_out};
use common::var_tempdir;
use stockade::{Error, GitDrop, GitDropReason, Layer, Policy, Sandbox, SpawnError, Stdio};

impl Repo {
    /// Shell lines that write `evil/run.sh` (which, run on the host, makes the marker) and
    /// `evil/hooks/*`, copies of it.
    fn plant_script(&self) -> String {
        format!(
            "mkdir -p evil/hooks && printf '#!/bin/sh\\ntouch {}\\nexit 0\\n' > evil/run.sh && chmod +x evil/run.sh\n\
             for h in pre-commit post-commit post-checkout pre-auto-gc; do cp evil/run.sh evil/hooks/$h; done\n",
            self.marker().display()
        )
    }

    /// Every file under `.git` that is no object, ref, log or index: path -> (mode, bytes).
    fn control_files(&self) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
        let mut out = BTreeMap::new();
        walk(&self.ws.join(".git"), Path::new(""), &mut out);
        out
    }
}

/// An entry that goes between the listing and its `lstat` or read is left out: a test
/// polls while the put-back runs, which writes each file under a temporary name and
/// renames it into place. (The poll then sees a state that is not yet the snapshot's, and
/// polls again.)
fn walk(dir: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, (u32, Vec<u8>)>) {
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if gone(&e) => return,
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let rel = rel.join(&name);
        let top = rel.components().next().unwrap().as_os_str().to_owned();
        if [
            "objects",
            "refs",
            "logs",
            "index",
            "HEAD",
            "ORIG_HEAD",
            "COMMIT_EDITMSG",
        ]
        .iter()
        .any(|n| top == *n)
            && !rel.starts_with("objects/info")
        {
            continue;
        }
        let meta = match std::fs::symlink_metadata(e.path()) {
            Ok(meta) => meta,
            Err(e) if gone(&e) => continue,
            Err(err) => panic!("{}: {err}", e.path().display()),
        };
        if meta.is_dir() {
            out.insert(rel.clone(), (meta.permissions().mode(), Vec::new()));
            walk(&e.path(), &rel, out);
        } else if meta.is_symlink() {
            match std::fs::read_link(e.path()) {
                Ok(t) => {
                    out.insert(rel, (0o120000, t.into_os_string().into_encoded_bytes()));
                }
                Err(e) if gone(&e) => {}
                Err(err) => panic!("{}: {err}", e.path().display()),
            }
        } else {
            match std::fs::read(e.path()) {
                Ok(bytes) => {
                    out.insert(rel, (meta.permissions().mode(), bytes));
                }
                Err(e) if gone(&e) => {}
                Err(err) => panic!("{}: {err}", e.path().display()),
            }
        }
    }
}

fn layer2(ws: &Path) -> Sandbox {
    let mut p = Policy::with_workspace(ws);
    p.layer = Some(Layer::Landlock);
    p.fallback = stockade::Fallback::Refuse;
    Sandbox::new(p).expect("sandbox")
}

const PRELUDE: &str =
    "exec 2>&1; g() { git -c user.name=inside -c user.email=inside@example.invalid \"$@\"; }\n";

/// Runs `script` inside, waits, returns its output and the restorations. Asserts success.
fn run(sb: &Sandbox, script: &str) -> (String, Vec<GitDrop>) {
    let mut child = sb
        .command("sh")
        .arg("-c")
        .arg(format!("{PRELUDE}{script}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "script failed ({status:?}):\n{script}\n{out}"
    );
    (out, child.git_dropped().to_vec())
}

fn assert_restored(drops: &[GitDrop], path: &Path) {
    assert!(
        drops
            .iter()
            .any(|d| d.path == path && d.reason == GitDropReason::Restored),
        "{} not reported as restored: {drops:#?}",
        path.display()
    );
}

/// The host's git commands that would run what the program planted.
fn host_git_work(repo: &Repo) {
    let ws = &repo.ws;
    for args in [
        &["status"][..],
        &["add", "-A"],
        &["commit", "-qm", "after"],
        &["checkout", "-q", "-b", "after"],
        &["checkout", "-q", "main"],
        &["gc", "--auto"],
    ] {
        let out = git_out(ws, args);
        assert!(
            out.status.success(),
            "host git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !repo.marker().exists(),
            "host git {args:?} ran a command the program planted"
        );
    }
}

#[test]
fn every_control_file_the_program_changes_is_put_back() {
    let repo = Repo::new();
    let ws = &repo.ws;
    std::fs::write(ws.join(".git/info/exclude"), "host-exclude\n").unwrap();
    let before = repo.control_files();
    let sb = layer2(ws);
    let evil = ws.join("evil");
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}\
             printf '[core]\\n\\tfsmonitor = {e}/run.sh\\n\\thooksPath = {e}/hooks\\n[alias]\\n\\tst = !{e}/run.sh\\n' >> .git/config\n\
             cp evil/run.sh .git/hooks/pre-commit && cp evil/run.sh .git/hooks/post-checkout\n\
             chmod 777 .git/hooks\n\
             rm .git/info/exclude && printf '* filter=evil\\n' > .git/info/attributes\n\
             mkdir -p evilgit && printf '[core]\\n\\tfsmonitor = {e}/run.sh\\n' > evilgit/config\n\
             echo {ws}/evilgit > .git/commondir\n\
             echo {ws}/evilgit/objects > .git/objects/info/alternates\n\
             echo https://example.invalid/ > .git/objects/info/http-alternates\n\
             printf '[core]\\n\\tfsmonitor = {e}/run.sh\\n' > .git/config.worktree\n\
             mkdir -p .git/modules/x/hooks && printf '[core]\\n\\tfsmonitor = {e}/run.sh\\n\\tworktree = ../../../x\\n' > .git/modules/x/config\n\
             cp evil/run.sh .git/modules/x/hooks/post-checkout\n\
             mkdir -p .git/worktrees/w && echo {ws}/evilgit > .git/worktrees/w/commondir\n",
            repo.plant_script(),
            e = evil.display(),
            ws = ws.display(),
        ),
    );
    assert_eq!(repo.control_files(), before, "{drops:#?}");
    let git_dir = ws.join(".git");
    for p in [
        "config",
        "hooks/pre-commit",
        "hooks/post-checkout",
        "hooks",
        "info/exclude",
        "info/attributes",
        "commondir",
        "objects/info/alternates",
        "objects/info/http-alternates",
        "config.worktree",
        "modules",
        "worktrees",
    ] {
        assert_restored(&drops, &git_dir.join(p));
    }
    host_git_work(&repo);
}

#[test]
fn hooks_made_a_symlink_are_put_back_and_the_target_is_untouched() {
    let repo = Repo::new();
    let ws = &repo.ws;
    let before = repo.control_files();
    let sb = layer2(ws);
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}rm -rf .git/hooks && ln -s ../evil/hooks .git/hooks\n",
            repo.plant_script()
        ),
    );
    // The symlink is gone and hooks/ is the host's again; the target was not written.
    assert!(
        std::fs::symlink_metadata(ws.join(".git/hooks"))
            .unwrap()
            .is_dir()
    );
    assert!(ws.join("evil/hooks/pre-commit").exists());
    assert_restored(&drops, &ws.join(".git/hooks"));
    assert_restored(&drops, &ws.join(".git/hooks/pre-push.sample"));
    assert_eq!(repo.control_files(), before, "{drops:#?}");
    // A hook planted in a hooks dir then made unreadable: entered and put back all the same.
    let (_, drops) = run(
        &sb,
        "set -e\ncp evil/run.sh .git/hooks/pre-commit && chmod 000 .git/hooks\n",
    );
    assert_restored(&drops, &ws.join(".git/hooks/pre-commit"));
    assert_eq!(repo.control_files(), before, "{drops:#?}");
    host_git_work(&repo);
}

#[test]
fn git_work_inside_reaches_the_host_and_nothing_is_reported() {
    let repo = Repo::new();
    let ws = &repo.ws;
    let sb = layer2(ws);
    let (out, drops) = run(
        &sb,
        "set -e\necho two > two.txt && g add two.txt && g commit -qm two\n\
         g branch side && g tag v1 && g checkout -q -b feat\n\
         echo REVS; g rev-parse HEAD side v1\n",
    );
    let revs = out.split("REVS\n").nth(1).expect("revs printed");
    assert_eq!(git(ws, &["rev-parse", "HEAD", "side", "v1"]), revs);
    assert_eq!(git(ws, &["symbolic-ref", "HEAD"]), "refs/heads/feat\n");
    assert!(drops.is_empty(), "{drops:#?}");
}

#[test]
fn a_daemon_the_program_leaves_behind_does_not_win() {
    let repo = Repo::new();
    let ws = &repo.ws;
    let before = repo.control_files();
    let sb = layer2(ws);
    let evil = ws.join("evil");
    // The daemon detaches (setsid, double fork) and rewrites the config and a hook in a
    // loop; the program exits at once.
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}\
             ( setsid sh -c 'while :; do printf \"[core]\\n\\tfsmonitor = {e}/run.sh\\n\" > .git/config; cp evil/run.sh .git/hooks/pre-commit; done' </dev/null >/dev/null 2>&1 & ) \n\
             sleep 0.2\n",
            repo.plant_script(),
            e = evil.display(),
        ),
    );
    assert_restored(&drops, &ws.join(".git/config"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(repo.control_files(), before, "{drops:#?}");
    host_git_work(&repo);
}

/// A `.git` the program leaves as no repository (a `HEAD` of garbage, `refs/` removed,
/// `objects/` moved away) stays the repository host git finds: otherwise git walks up to
/// an enclosing repository, where `git reset --hard` destroys uncommitted work outside
/// the workspace (found by review; the full layer's merge already held).
#[test]
fn a_git_dir_the_program_breaks_stays_the_repository_host_git_finds() {
    let (_o, outer) = var_tempdir();
    git(&outer, &["init", "-q", "-b", "main"]);
    std::fs::write(outer.join("precious.txt"), "v1\n").unwrap();
    git(&outer, &["add", "precious.txt"]);
    git(&outer, &["commit", "-qm", "outer"]);
    std::fs::write(outer.join("precious.txt"), "uncommitted\n").unwrap();
    let ws = outer.join("inner");
    std::fs::create_dir(&ws).unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("README"), "hello\n").unwrap();
    git(&ws, &["add", "README"]);
    git(&ws, &["commit", "-qm", "inner"]);
    let head = std::fs::read(ws.join(".git/HEAD")).unwrap();
    let sb = layer2(&ws);
    let (_, drops) = run(
        &sb,
        "set -e\necho garbage > .git/HEAD\nrm -rf .git/refs\nmv .git/objects .git/moved\n",
    );
    for name in ["HEAD", "refs", "objects"] {
        assert_restored(&drops, &ws.join(".git").join(name));
    }
    assert_eq!(std::fs::read(ws.join(".git/HEAD")).unwrap(), head);
    let top = git(&ws, &["rev-parse", "--show-toplevel"]);
    assert_eq!(Path::new(top.trim()), ws.as_path(), "{drops:#?}");
    let _ = git_out(&ws, &["reset", "-q", "--hard"]);
    assert_eq!(
        std::fs::read_to_string(outer.join("precious.txt")).unwrap(),
        "uncommitted\n"
    );
}

#[test]
fn a_gitdir_file_the_program_rewrites_is_put_back() {
    let repo = Repo::new();
    let (l, linked) = var_tempdir();
    let wt = linked.join("wt");
    git(&repo.ws, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let dotgit = std::fs::read(wt.join(".git")).unwrap();
    let sb = layer2(&wt);
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}echo 'gitdir: evilgit' > .git\n",
            repo.plant_script()
        ),
    );
    assert_eq!(std::fs::read(wt.join(".git")).unwrap(), dotgit);
    assert_restored(&drops, &wt.join(".git"));
    git(&wt, &["status"]);
    assert!(!repo.marker().exists());
    drop(l);
}

#[test]
fn a_git_dir_over_the_snapshot_bounds_is_refused_by_name() {
    let repo = Repo::new();
    let big = repo.ws.join(".git/hooks/big");
    std::fs::write(&big, vec![b'#'; 33 << 20]).unwrap();
    let sb = layer2(&repo.ws);
    let err = sb
        .command("true")
        .status()
        .expect_err("a .git over the bounds is refused");
    assert!(
        matches!(&err, Error::Spawn(SpawnError::Path { path, errno, .. })
            if *path == repo.ws.join(".git") && *errno == nix::errno::Errno::E2BIG),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains(".git") && msg.contains("32 MiB"), "{msg}");
}

#[test]
fn the_git_dirs_of_submodules_and_worktrees_the_host_has_are_put_back() {
    let repo = Repo::new();
    let ws = &repo.ws;
    let (l, linked) = var_tempdir();
    git(
        ws,
        &["worktree", "add", "-q", linked.join("wt").to_str().unwrap()],
    );
    let sub = ws.join(".git/modules/sub");
    std::fs::create_dir_all(sub.join("hooks")).unwrap();
    std::fs::create_dir_all(sub.join("objects/info")).unwrap();
    std::fs::write(sub.join("config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::write(sub.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    let before = repo.control_files();
    let sb = layer2(ws);
    let evil = ws.join("evil");
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}\
             printf '[core]\\n\\tfsmonitor = {e}/run.sh\\n' >> .git/modules/sub/config\n\
             echo {ws}/evilgit > .git/modules/sub/objects/info/alternates\n\
             rm -r .git/modules/sub/hooks && ln -s ../../../evil/hooks .git/modules/sub/hooks\n\
             mkdir -p .git/modules/sub/modules/nested && cp .git/config .git/modules/sub/modules/nested/config\n\
             ln -s ../../evil .git/modules/evil\n\
             printf '[core]\\n\\tfsmonitor = {e}/run.sh\\n' > .git/worktrees/wt/config.worktree\n\
             echo {ws}/evilgit > .git/worktrees/wt/commondir\n",
            repo.plant_script(),
            e = evil.display(),
            ws = ws.display(),
        ),
    );
    assert_eq!(repo.control_files(), before, "{drops:#?}");
    let g = ws.join(".git");
    for p in [
        "modules/sub/config",
        "modules/sub/objects/info/alternates",
        "modules/sub/hooks",
        "modules/sub/modules",
        "modules/evil",
        "worktrees/wt/config.worktree",
        "worktrees/wt/commondir",
    ] {
        assert_restored(&drops, &g.join(p));
    }
    host_git_work(&repo);
    git(&linked.join("wt"), &["status"]);
    assert!(!repo.marker().exists());
    drop(l);
}

#[test]
fn a_child_dropped_without_waiting_still_puts_back_when_it_ends() {
    let repo = Repo::new();
    let ws = &repo.ws;
    let before = repo.control_files();
    let sb = layer2(ws);
    let child = sb
        .command("sh")
        .arg("-c")
        .arg(
            "echo /elsewhere > .git/commondir && cp .git/config .git/hooks/pre-commit && sleep 0.3",
        )
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn");
    drop(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    // Written (the program sleeps 0.3 s after), then put back.
    while !ws.join(".git/hooks/pre-commit").exists() {
        assert!(std::time::Instant::now() < deadline, "never written");
        std::thread::sleep(Duration::from_millis(5));
    }
    while repo.control_files() != before {
        assert!(
            std::time::Instant::now() < deadline,
            "not put back 20 s after the end: {:?}",
            std::fs::read_to_string(ws.join(".git/commondir"))
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!ws.join(".git/commondir").exists());
}

#[test]
fn a_command_started_during_another_does_not_put_back_what_that_one_wrote() {
    let repo = Repo::new();
    let ws = &repo.ws;
    let before = repo.control_files();
    let sb = layer2(ws);
    let spawn = |script: &str| {
        sb.command("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn")
    };
    let mut first = spawn(&format!(
        "{}printf '[core]\\n\\tfsmonitor = {}/evil/run.sh\\n' >> .git/config && sleep 0.5",
        repo.plant_script(),
        ws.display()
    ));
    // The second command starts once the first has written the host's config.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(ws.join(".git/config"))
        .unwrap()
        .contains("fsmonitor")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first never wrote"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut second = spawn("sleep 1.5");
    assert!(first.wait().unwrap().success());
    assert_restored(first.git_dropped(), &ws.join(".git/config"));
    assert!(second.wait().unwrap().success());
    assert_eq!(repo.control_files(), before);
    host_git_work(&repo);
}

#[test]
fn a_git_dir_replaced_by_a_gitdir_file_is_removed_and_reported() {
    let repo = Repo::new();
    let ws = &repo.ws;
    let sb = layer2(ws);
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}mv .git moved && mkdir evilgit && cp -r moved/. evilgit/\n\
             printf '[core]\\n\\tfsmonitor = {}/evil/run.sh\\n' >> evilgit/config\n\
             echo 'gitdir: evilgit' > .git\n",
            repo.plant_script(),
            ws.display()
        ),
    );
    assert!(
        drops
            .iter()
            .any(|d| d.path == ws.join(".git") && d.reason == GitDropReason::Replaced),
        "{drops:#?}"
    );
    assert!(std::fs::symlink_metadata(ws.join(".git")).is_err());
    // Host git finds no repository there any more, and runs nothing of the program's.
    let _ = git_out(ws, &["status"]);
    assert!(!repo.marker().exists());
}

/// A bare repository planted inside `.git` with a hook, and legacy remotes naming it
/// (`remotes/origin`, `branches/upstream`: git reads them for a remote its config does
/// not define), an unfinished rebase's todo list with an `exec` line, a lock: all gone
/// after the run, and the host's `git push origin` finds no remote (review: it pushed to
/// the planted repository and ran its `pre-receive`). What the host had there is put
/// back, and the program's git work still lands.
#[test]
fn what_the_program_adds_at_the_top_of_git_goes_unless_it_is_data() {
    let repo = Repo::new();
    let ws = &repo.ws;
    std::fs::create_dir(ws.join(".git/remotes")).unwrap();
    std::fs::write(ws.join(".git/remotes/host"), "URL: /nowhere/host.git\n").unwrap();
    let before = repo.control_files();
    let sb = layer2(ws);
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}\
             echo inside > inside.txt && g add inside.txt && g commit -qm inside\n\
             git init -q --bare .git/x.git && cp evil/run.sh .git/x.git/hooks/pre-receive\n\
             printf 'URL: {ws}/.git/x.git\\n' > .git/remotes/origin\n\
             echo 'URL: {ws}/.git/x.git' > .git/remotes/host\n\
             mkdir -p .git/branches && echo {ws}/.git/x.git > .git/branches/upstream\n\
             mkdir -p .git/rebase-merge && printf 'exec {e}/run.sh\\n' > .git/rebase-merge/git-rebase-todo\n\
             mkdir -p .git/sequencer && printf 'exec {e}/run.sh\\n' > .git/sequencer/todo\n\
             touch .git/index.lock .git/stray .git/BISECT_LOG\n\
             ln -sf {v} .git/logs/HEAD && rm -f .git/COMMIT_EDITMSG && ln -s {v} .git/COMMIT_EDITMSG && ln -s {v} .git/FETCH_HEAD\n",
            repo.plant_script(),
            e = ws.join("evil").display(),
            ws = ws.display(),
            v = repo.host.join("victim").display(),
        ),
    );
    // Links git would write through are gone (review: the host's `git checkout`
    // appended to the file `logs/HEAD` named); git's own state stays.
    for p in ["logs/HEAD", "COMMIT_EDITMSG", "FETCH_HEAD"] {
        let meta = std::fs::symlink_metadata(ws.join(".git").join(p));
        assert!(
            meta.is_err() || !meta.unwrap().is_symlink(),
            "{p} is still a link"
        );
    }
    let mut after = repo.control_files();
    assert!(
        after.remove(Path::new("BISECT_LOG")).is_some(),
        "git's state went"
    );
    assert_eq!(after, before, "{drops:#?}");
    let git_dir = ws.join(".git");
    for p in [
        "x.git",
        "remotes/origin",
        "remotes/host",
        "branches/upstream",
        "rebase-merge",
        "sequencer",
        "index.lock",
        "stray",
    ] {
        // Reported at the path or at a directory above it that the host did not have
        // (`git init` makes `branches/` in some versions).
        assert!(
            drops.iter().any(|d| git_dir.join(p).starts_with(&d.path)
                && d.path != git_dir
                && d.reason == GitDropReason::Restored),
            "{p} not reported as restored: {drops:#?}"
        );
        if p != "remotes/host" {
            assert!(!git_dir.join(p).exists(), "{p} is still there");
        }
    }
    assert_eq!(
        std::fs::read_to_string(git_dir.join("remotes/host")).unwrap(),
        "URL: /nowhere/host.git\n"
    );
    let push = git_out(ws, &["push", "-q", "origin", "HEAD"]);
    assert!(!push.status.success(), "host git push found a remote");
    assert!(
        !repo.marker().exists(),
        "host git push ran the planted hook"
    );
    assert_eq!(git(ws, &["log", "-1", "--format=%s"]).trim(), "inside");
    host_git_work(&repo);
    assert!(
        !repo.host.join("victim").exists(),
        "host git wrote through a link"
    );
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
