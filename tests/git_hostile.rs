//! The `.git` merge treats every byte of the upper layer as hostile: refs, `HEAD`,
//! `packed-refs` and the `*_HEAD` files reach the host only when git's own rules take them,
//! and replacement refs never do. Each case is proven by what host git does afterwards.
//!
//! Fixtures sit under `/var/tmp` (outside the sandbox's private `/tmp`). Every test runs
//! as the current user; as root, `zz_all_tests_pass_as_uid_65534` re-runs the file as uid
//! 65534.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};

use common::git::git;
use common::{Feature, var_tempdir};
use stockade::{GitDrop, GitDropReason, Layer, Policy, Sandbox, Stdio};

/// A host repository in `ws` with one commit: file `a` ("real\n"), tagged `v1`.
fn init_repo(ws: &Path) {
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a"), "real\n").unwrap();
    git(ws, &["add", "a"]);
    git(ws, &["commit", "-qm", "host"]);
    git(ws, &["tag", "v1"]);
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

/// `git replace` makes `git show v1:a` print other content while `git fsck` passes: a
/// replacement ref never reaches the host, loose or packed, and each is reported.
#[test]
fn replacement_refs_are_dropped_and_reported() {
    require!(Feature::UserNs);
    let (_d, ws) = var_tempdir();
    init_repo(&ws);
    let real = git(&ws, &["rev-parse", "v1:a"]).trim().to_string();
    let sb = full(&ws);
    let (out, drops) = run(
        &sb,
        "set -e\n\
         fake=$(echo fake | g hash-object -w --stdin)\n\
         g replace $(g rev-parse v1:a) $fake\n\
         g show v1:a\n\
         echo other > b && g add b && g commit -qm inside\n",
    );
    assert_eq!(out, "fake\n", "the replacement works inside");
    let gd = ws.join(".git");
    assert_eq!(git(&ws, &["show", "v1:a"]), "real\n");
    let replace = gd.join("refs/replace").join(&real);
    assert!(
        has_drop(&drops, &replace, GitDropReason::ReplaceRef),
        "{drops:#?}"
    );
    assert!(!gd.join("refs/replace").exists());
    assert_eq!(git(&ws, &["replace", "-l"]), "");
    // The rest of the run merged.
    assert_eq!(git(&ws, &["log", "-1", "--format=%s"]), "inside\n");
    git(&ws, &["fsck", "--no-progress"]);

    // Packed: `packed-refs` merges without the replacement line, which is reported.
    let (out, drops) = run(
        &sb,
        "set -e\n\
         fake=$(echo fake | g hash-object -w --stdin)\n\
         g replace $(g rev-parse v1:a) $fake\n\
         g tag v2 && g pack-refs --all\n\
         g show v1:a\n",
    );
    assert_eq!(out, "fake\n");
    assert!(
        has_drop(&drops, &gd.join("packed-refs"), GitDropReason::ReplaceRef),
        "{drops:#?}"
    );
    assert_eq!(git(&ws, &["show", "v1:a"]), "real\n");
    assert_eq!(git(&ws, &["replace", "-l"]), "");
    assert!(
        !std::fs::read_to_string(gd.join("packed-refs"))
            .unwrap()
            .contains("refs/replace")
    );
    assert_eq!(
        git(&ws, &["rev-parse", "v2"]),
        git(&ws, &["rev-parse", "HEAD"])
    );
    git(&ws, &["fsck", "--no-progress"]);
}

/// A workspace repository inside an enclosing one, which has an uncommitted change
/// outside the workspace (the review's fixture).
struct Nested {
    _dir: tempfile::TempDir,
    outer: PathBuf,
    proj: PathBuf,
}

impl Nested {
    fn new() -> Nested {
        let (dir, outer) = var_tempdir();
        git(&outer, &["init", "-q", "-b", "main"]);
        std::fs::write(outer.join("precious"), "committed\n").unwrap();
        git(&outer, &["add", "precious"]);
        git(&outer, &["commit", "-qm", "outer"]);
        std::fs::write(outer.join("precious"), "uncommitted work\n").unwrap();
        let proj = outer.join("proj");
        std::fs::create_dir(&proj).unwrap();
        init_repo(&proj);
        Nested {
            _dir: dir,
            outer,
            proj,
        }
    }

    /// Host git in `proj` acts on `proj`'s repository, and `reset --hard` there leaves the
    /// enclosing repository's uncommitted file alone.
    fn assert_host_git_stays_in_proj(&self, what: &str) {
        let top = git(&self.proj, &["rev-parse", "--show-toplevel"]);
        assert_eq!(Path::new(top.trim()), self.proj, "{what}");
        git(&self.proj, &["status", "--porcelain"]);
        git(&self.proj, &["reset", "-q", "--hard"]);
        assert_eq!(
            std::fs::read_to_string(self.outer.join("precious")).unwrap(),
            "uncommitted work\n",
            "{what}: git -C proj reset --hard wiped a file outside the workspace"
        );
    }
}

/// `HEAD` = `not a ref` makes git take `.git` for no repository and walk up to an
/// enclosing one, where `git -C proj reset --hard` wipes uncommitted work outside the
/// workspace. Such a `HEAD` (and every other that is neither `ref: refs/…` with a valid
/// name nor a full object id) is dropped and reported.
#[test]
fn a_head_that_is_no_ref_is_dropped_and_host_git_stays_in_the_workspace() {
    require!(Feature::UserNs);
    let n = Nested::new();
    n.assert_host_git_stays_in_proj("before the run");
    let head = n.proj.join(".git/HEAD");
    let sb = full(&n.proj);
    for bad in [
        "not a ref",
        "ref: ../../../.git/HEAD",
        "ref: refs/heads/a..b",
        "ref: HEAD",
        "0123456789abcdef",
        "ref: refs/heads/main\\nextra",
    ] {
        let (_, drops) = run(
            &sb,
            &format!("set -e\nprintf '{bad}\\n' > .git/HEAD\ncat .git/HEAD >/dev/null\n"),
        );
        n.assert_host_git_stays_in_proj(bad);
        assert_eq!(
            std::fs::read_to_string(&head).unwrap(),
            "ref: refs/heads/main\n"
        );
        assert!(
            has_drop(&drops, &head, GitDropReason::InvalidRef),
            "{bad}: {drops:#?}"
        );
    }
    // A valid HEAD still merges: a branch switch, and a detached HEAD.
    let (_, drops) = run(&sb, "set -e\ng checkout -q -b other\n");
    assert!(drops.is_empty(), "{drops:#?}");
    assert_eq!(
        git(&n.proj, &["symbolic-ref", "HEAD"]),
        "refs/heads/other\n"
    );
    let (_, drops) = run(&sb, "set -e\ng checkout -q --detach\n");
    assert!(drops.is_empty(), "{drops:#?}");
    assert_eq!(
        std::fs::read_to_string(&head).unwrap(),
        git(&n.proj, &["rev-parse", "HEAD"])
    );
    n.assert_host_git_stays_in_proj("after valid runs");
}

/// Loose refs with names or contents git refuses, and `packed-refs`, `ORIG_HEAD`,
/// `MERGE_HEAD` and `FETCH_HEAD` not in git's format, stay out, reported; the valid refs of
/// the same run (a fetch's `FETCH_HEAD` included) merge.
#[test]
fn refs_git_refuses_are_dropped_and_the_rest_merges() {
    require!(Feature::UserNs);
    let (_d, ws) = var_tempdir();
    init_repo(&ws);
    let gd = ws.join(".git");
    let packed_before = git(&ws, &["for-each-ref"]);
    let sb = full(&ws);
    let (_, drops) = run(
        &sb,
        "set -e\n\
         h=$(g rev-parse HEAD)\n\
         g branch ok && g fetch -q . main\n\
         echo garbage > .git/refs/heads/junk\n\
         printf 'ref: ../../config\\n' > .git/refs/heads/sym\n\
         echo $h > '.git/refs/heads/a b'\n\
         echo $h > .git/refs/heads/dots..x\n\
         printf \"$h\\033[2J\\n\" > .git/refs/tags/esc\n\
         mkdir .git/refs/heads/-rf && echo $h > .git/refs/heads/-rf/x\n\
         mkdir .git/refs/heads/d.lock && echo $h > .git/refs/heads/d.lock/y\n\
         echo $h > .git/refs/heads/.hidden\n\
         echo not-an-oid > .git/ORIG_HEAD\n\
         printf \"$h\\n\\n\" > .git/MERGE_HEAD\n\
         cp .git/FETCH_HEAD fetched\n",
    );
    for (p, reason) in [
        ("refs/heads/junk", GitDropReason::InvalidRef),
        ("refs/heads/sym", GitDropReason::InvalidRef),
        ("refs/heads/a b", GitDropReason::InvalidRef),
        ("refs/heads/dots..x", GitDropReason::InvalidRef),
        ("refs/tags/esc", GitDropReason::InvalidRef),
        ("refs/heads/-rf/x", GitDropReason::InvalidRef),
        ("refs/heads/d.lock/y", GitDropReason::InvalidRef),
        ("refs/heads/.hidden", GitDropReason::InvalidRef),
        ("ORIG_HEAD", GitDropReason::InvalidRef),
        ("MERGE_HEAD", GitDropReason::InvalidRef),
    ] {
        assert!(has_drop(&drops, &gd.join(p), reason), "{p}: {drops:#?}");
        assert!(
            std::fs::symlink_metadata(gd.join(p)).is_err(),
            "{p} reached the host"
        );
    }
    assert!(!gd.join("refs/heads/-rf").exists());
    assert!(!gd.join("refs/heads/d.lock").exists());
    // The valid ones merged.
    assert_eq!(
        git(&ws, &["rev-parse", "ok"]),
        git(&ws, &["rev-parse", "main"])
    );
    assert_eq!(
        std::fs::read(gd.join("FETCH_HEAD")).unwrap(),
        std::fs::read(ws.join("fetched")).unwrap()
    );
    git(&ws, &["fsck", "--no-progress", "--strict"]);

    // packed-refs that is not git's format, and a FETCH_HEAD with an escape: dropped.
    let (_, drops) = run(
        &sb,
        "set -e\n\
         h=$(g rev-parse HEAD)\n\
         printf \"$h refs/heads/packed\\ngarbage\\n\" > .git/packed-refs\n\
         printf \"$h\\t\\tbranch 'x' of \\033]52;c;aGk=\\007\\n\" > .git/FETCH_HEAD\n",
    );
    for p in ["packed-refs", "FETCH_HEAD"] {
        assert!(
            has_drop(&drops, &gd.join(p), GitDropReason::InvalidRef),
            "{p}: {drops:#?}"
        );
    }
    assert!(
        !gd.join("packed-refs").exists()
            || !std::fs::read_to_string(gd.join("packed-refs"))
                .unwrap()
                .contains("garbage")
    );
    assert_eq!(
        std::fs::read(gd.join("FETCH_HEAD")).unwrap(),
        std::fs::read(ws.join("fetched")).unwrap()
    );
    assert!(git(&ws, &["for-each-ref"]).contains("refs/heads/ok"));
    assert!(!git(&ws, &["for-each-ref"]).contains("refs/heads/packed"));
    assert!(
        packed_before
            .lines()
            .all(|l| git(&ws, &["for-each-ref"]).contains(l))
    );
    git(&ws, &["fsck", "--no-progress", "--strict"]);
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
