//! The full layer's `.git` layer and history: a program that commits a gitlink (a
//! submodule) into a ref, with a clean index, gets that ref update refused. Otherwise the
//! host's next `git reset --hard`, `stash apply`, `checkout` or `merge` brings the gitlink
//! into the index, and `git status` runs git in the program's checkout, with the
//! `core.fsmonitor` the program wrote there.
//!
//! Each attack is proven by what it would do on the host: the planted command creates a
//! marker file in a host directory the sandbox cannot see, and the host runs real git
//! afterwards. Fixtures sit under `/var/tmp` (outside the sandbox's private `/tmp`). Every
//! test runs as the current user; as root, `zz_all_tests_pass_as_uid_65534` re-runs the
//! file as uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use common::git::{Repo, git, git_out};
use common::{Feature, var_tempdir};
use stockade::{GitDrop, GitDropReason, Layer, Policy, Sandbox, Stdio};

impl Repo {
    /// Shell lines that make, inside, a repository `sub` whose config runs a script that
    /// creates the marker (`core.fsmonitor`), and the shell variable `$SUB`, its commit.
    fn plant_submodule(&self) -> String {
        format!(
            "mkdir -p evil && printf '#!/bin/sh\\ntouch {marker}\\nexit 1\\n' > evil/run.sh && chmod +x evil/run.sh\n\
             g init -q sub && g -C sub commit -q --allow-empty -m sub\n\
             printf '[core]\\n\\tfsmonitor = {script}\\n' >> sub/.git/config\n\
             SUB=$(git -C sub rev-parse HEAD)\n",
            marker = self.marker().display(),
            script = self.ws.join("evil/run.sh").display(),
        )
    }
}

fn full(ws: &Path) -> Sandbox {
    let mut p = Policy::with_workspace(ws);
    p.layer = Some(Layer::Full);
    p.fallback = stockade::Fallback::Refuse;
    Sandbox::new(p).expect("sandbox")
}

/// The shell prelude of every script inside: git with an identity, errors on stdout.
const PRELUDE: &str =
    "exec 2>&1; g() { git -c user.name=inside -c user.email=inside@example.invalid \"$@\"; }\n";

/// Runs `script` inside (with [`PRELUDE`]), waits, and returns its output and the
/// changes under `.git` the run dropped. Asserts success.
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

fn has_drop(drops: &[GitDrop], path: &Path, reason: GitDropReason) -> bool {
    drops.iter().any(|d| d.path == path && d.reason == reason)
}

/// One way to leave a gitlink in history with a clean index: the script (after the
/// submodule is planted), the ref files that must be refused, and what the host then runs.
struct Attack {
    name: &'static str,
    script: &'static str,
    refused: &'static [&'static str],
    host: &'static [&'static [&'static str]],
}

const ATTACKS: &[Attack] = &[
    Attack {
        name: "HEAD, gitlink removed from the index",
        script: "g update-index --add --cacheinfo 160000,$SUB,sub && g commit -qm link\n\
                 g rm -q --cached sub\n",
        refused: &["refs/heads/main", "logs/HEAD", "logs/refs/heads/main"],
        host: &[&["reset", "--hard"]],
    },
    Attack {
        name: "another branch",
        script: "g checkout -qb evil && g update-index --add --cacheinfo 160000,$SUB,sub\n\
                 g commit -qm link && g checkout -q main\n",
        refused: &["refs/heads/evil", "logs/refs/heads/evil", "logs/HEAD"],
        host: &[
            &["checkout", "evil"],
            &["checkout", "main"],
            &["merge", "evil"],
        ],
    },
    Attack {
        name: "another branch, packed (repack -d)",
        script: "g checkout -qb evil && g update-index --add --cacheinfo 160000,$SUB,sub\n\
                 g commit -qm link && g checkout -q main && g repack -qd\n",
        refused: &["refs/heads/evil"],
        host: &[&["merge", "evil"]],
    },
    Attack {
        name: "a tag naming the commit, in packed-refs",
        script: "g checkout -qb evil && g update-index --add --cacheinfo 160000,$SUB,sub\n\
                 g commit -qm link && g tag -a -m t v1 && g checkout -q main && g branch -qD evil\n\
                 g pack-refs --all\n",
        refused: &["packed-refs"],
        host: &[&["reset", "--hard", "v1"]],
    },
    Attack {
        name: "refs/stash",
        script: "g update-index --add --cacheinfo 160000,$SUB,sub && T=$(g write-tree)\n\
                 I=$(g commit-tree -p HEAD -m index $T) && W=$(g commit-tree -p HEAD -p $I -m WIP $T)\n\
                 g stash store -m WIP $W && g rm -qf --cached sub\n",
        refused: &["refs/stash", "logs/refs/stash"],
        host: &[&["stash", "apply", "--index"], &["stash", "pop"]],
    },
    Attack {
        name: "ORIG_HEAD and the reflog",
        script: "g update-index --add --cacheinfo 160000,$SUB,sub && g commit -qm link\n\
                 g reset -q --hard HEAD~1\n",
        refused: &["ORIG_HEAD", "logs/HEAD", "logs/refs/heads/main"],
        host: &[
            &["reset", "--hard", "ORIG_HEAD"],
            &["reset", "--hard", "HEAD@{1}"],
        ],
    },
];

/// A gitlink committed into a ref with a clean index: the update is refused and reported,
/// and nothing the host's git then does runs the program's config.
#[test]
fn a_gitlink_committed_with_a_clean_index_is_not_merged() {
    require!(Feature::UserNs);
    for attack in ATTACKS {
        let repo = Repo::new();
        let before = git(&repo.ws, &["rev-parse", "HEAD"]);
        let sb = full(&repo.ws);
        let (out, drops) = run(
            &sb,
            &format!(
                "set -e\n{}{}\ngit ls-files -s | grep 160000 && exit 3\ntrue\n",
                repo.plant_submodule(),
                attack.script
            ),
        );
        for r in attack.refused {
            assert!(
                has_drop(
                    &drops,
                    &repo.git_dir().join(r),
                    GitDropReason::NewSubmoduleInHistory
                ),
                "{}: {r} not refused: {drops:#?}\n{out}",
                attack.name
            );
        }
        // The index, clean, merged; the host's ref did not move.
        assert!(
            !git(&repo.ws, &["ls-files", "-s"]).contains("160000"),
            "{}",
            attack.name
        );
        assert_eq!(
            git(&repo.ws, &["rev-parse", "HEAD"]),
            before,
            "{}",
            attack.name
        );
        for cmd in attack.host {
            let _ = git_out(&repo.ws, cmd);
            let _ = git_out(&repo.ws, &["status", "--porcelain"]);
            repo.assert_no_marker(&format!("{}: git {cmd:?} then git status", attack.name));
        }
        assert!(
            !git(&repo.ws, &["ls-files", "-s"]).contains("160000"),
            "{}",
            attack.name
        );
    }
}

/// Ordinary commits (loose, then packed by `git repack -d`, which deletes the loose objects:
/// 400 new trees, so that some lie in a directory of `objects/` the deletion removed) still
/// reach the host, with no drop beyond the deletions in `objects/`.
#[test]
fn ordinary_commits_merge() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let sb = full(&repo.ws);
    let (out, drops) = run(
        &sb,
        "set -e\necho a > a.txt && g add a.txt && g commit -qm one\n\
         g checkout -qb topic && echo b > b.txt && g add b.txt && g commit -qm two\n\
         g tag -a -m t v1 && g checkout -q main && g merge -q --no-ff -m merged topic\n\
         for i in $(seq 400); do mkdir d$i && echo $i > d$i/f; done && g add . && g commit -qm many\n\
         g repack -qd && echo c > c.txt && g add c.txt && g stash -q\n",
    );
    // (`repack` also writes `objects/info/packs` and `info/refs`, never merged, and
    // `-d` deletes the loose objects it packed: deletions in `objects/` are not applied.)
    assert!(
        drops.iter().all(|d| d.reason == GitDropReason::NotMerged
            && d.path.starts_with(repo.git_dir().join("objects/info"))
            || d.path == repo.git_dir().join("info/refs")
            || d.reason == GitDropReason::ObjectChange),
        "{drops:#?}\n{out}"
    );
    assert_eq!(
        git(&repo.ws, &["log", "-2", "--format=%s"]),
        "many\nmerged\n"
    );
    assert_eq!(git(&repo.ws, &["log", "-1", "--format=%s", "v1"]), "two\n");
    git(&repo.ws, &["stash", "pop", "--index"]);
    assert!(repo.ws.join("c.txt").exists());
}

/// A superproject with a submodule: commits that keep (or move) the host's gitlink merge;
/// a gitlink at a new path does not.
#[test]
fn a_repository_with_a_submodule_still_commits() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    git(&repo.ws, &["init", "-q", "lib"]);
    git(
        &repo.ws.join("lib"),
        &["commit", "-q", "--allow-empty", "-m", "lib"],
    );
    let lib = git(&repo.ws.join("lib"), &["rev-parse", "HEAD"]);
    git(
        &repo.ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{},lib", lib.trim()),
        ],
    );
    git(&repo.ws, &["commit", "-qm", "with lib"]);
    let sb = full(&repo.ws);
    let (out, drops) = run(
        &sb,
        "set -e\necho a > a.txt && g add a.txt && g commit -qm ordinary\n\
         g update-index --cacheinfo 160000,0123456789012345678901234567890123456789,lib\n\
         g commit -qm moved\n",
    );
    assert!(drops.is_empty(), "{drops:#?}\n{out}");
    assert_eq!(git(&repo.ws, &["log", "-1", "--format=%s"]), "moved\n");
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}g update-index --add --cacheinfo 160000,$SUB,sub && g commit -qm link\n\
             g rm -q --cached sub\n",
            repo.plant_submodule()
        ),
    );
    assert!(
        has_drop(
            &drops,
            &repo.git_dir().join("refs/heads/main"),
            GitDropReason::NewSubmoduleInHistory
        ),
        "{drops:#?}"
    );
    let _ = git_out(&repo.ws, &["reset", "--hard"]);
    let _ = git_out(&repo.ws, &["status", "--porcelain"]);
    repo.assert_no_marker("reset --hard in a superproject");
}

/// A ref naming an object the layer does not hold (nor the host) is refused: fail closed.
#[test]
fn a_ref_to_a_missing_object_is_refused() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let sb = full(&repo.ws);
    let (_, drops) = run(
        &sb,
        "set -e\necho 0123456789012345678901234567890123456789 > .git/refs/heads/ghost\n\
         printf 'not zlib' > x && mkdir -p .git/objects/ab && \
         cp x .git/objects/ab/cdef0123456789012345678901234567890123 && \
         echo abcdef0123456789012345678901234567890123 > .git/refs/heads/broken\n",
    );
    let heads = repo.git_dir().join("refs/heads");
    assert!(
        has_drop(
            &drops,
            &heads.join("ghost"),
            GitDropReason::UnreadableHistory
        ),
        "{drops:#?}"
    );
    assert!(
        has_drop(
            &drops,
            &heads.join("broken"),
            GitDropReason::UnreadableHistory
        ),
        "{drops:#?}"
    );
    assert!(!heads.join("ghost").exists() && !heads.join("broken").exists());
}

/// The cost of the check: a commit in a 5 000-file repository (printed with
/// `--nocapture`); the commit merges.
#[test]
fn a_commit_in_a_large_repository_merges() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    for d in 0..50 {
        let dir = repo.ws.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f}")), format!("{d} {f}\n")).unwrap();
        }
    }
    git(&repo.ws, &["add", "."]);
    git(&repo.ws, &["commit", "-qm", "5000 files"]);
    let sb = full(&repo.ws);
    let start = Instant::now();
    let (out, drops) = run(
        &sb,
        "set -e\nfor d in 0 7 21 49; do echo x >> d$d/f3; done\n\
         mkdir new && echo n > new/file && g add -A && g commit -qm change\n",
    );
    eprintln!(
        "run with a commit in a 5000-file repository: {:?}",
        start.elapsed()
    );
    assert!(drops.is_empty(), "{drops:#?}\n{out}");
    assert_eq!(git(&repo.ws, &["log", "-1", "--format=%s"]), "change\n");
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}

/// A repository that keeps its refs in reftable: the check does not read reftable's
/// blocks, so a ref update made inside is not merged (fail closed), and says so.
#[test]
fn reftable_updates_are_refused() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let (w, ws) = var_tempdir();
    git(&ws, &["init", "-q", "--ref-format=reftable", "-b", "main"]);
    std::fs::write(ws.join("README"), "hello\n").unwrap();
    git(&ws, &["add", "README"]);
    git(&ws, &["commit", "-qm", "host"]);
    let before = git(&ws, &["rev-parse", "HEAD"]);
    let sb = full(&ws);
    let (_, drops) = run(
        &sb,
        &format!(
            "set -e\n{}g update-index --add --cacheinfo 160000,$SUB,sub && g commit -qm link\n\
             g rm -q --cached sub\n",
            repo.plant_submodule()
        ),
    );
    assert!(
        drops
            .iter()
            .any(|d| d.path.starts_with(ws.join(".git/reftable"))
                && d.reason == GitDropReason::UnreadableHistory),
        "{drops:#?}"
    );
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), before);
    let _ = git_out(&ws, &["reset", "--hard"]);
    let _ = git_out(&ws, &["status", "--porcelain"]);
    repo.assert_no_marker("reset --hard in a reftable repository");
    drop(w);
}
