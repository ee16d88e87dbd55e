//! The full layer's `.git` layer: inside, the repository metadata of each writable root is
//! a copy-on-write view; after the run only the object database, refs, reflogs,
//! `packed-refs`, `index`, `HEAD` and the `*_HEAD` / `*_EDITMSG` files reach the host.
//! Everything else a program writes there (config, hooks, `commondir`, `config.worktree`,
//! `worktrees/*`, `modules/*`, `objects/info/alternates`) is dropped and reported, so the
//! host's next `git status` runs nothing the program chose.
//!
//! Each redirection is proven by what it would do on the host: the planted command
//! creates a marker file in a host directory the sandbox cannot see, and the host runs
//! real git afterwards. Fixtures sit under `/var/tmp` (outside the sandbox's private
//! `/tmp`). Every test runs as the current user; as root, `zz_all_tests_pass_as_uid_65534`
//! re-runs the file as uid 65534.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::git::{Repo, git, git_out};
use common::{Feature, sh_ok, var_tempdir};
use stockade::{Child, GitDrop, GitDropReason, GitUnguardedReason, Layer, Policy, Sandbox, Stdio};

impl Repo {
    /// Shell lines that write an executable script into the workspace which, run on the
    /// host, creates the marker: the command a program plants for the host's git.
    fn plant_script(&self) -> String {
        format!(
            "mkdir -p evil && printf '#!/bin/sh\\ntouch {}\\nexit 1\\n' > evil/run.sh && chmod +x evil/run.sh",
            self.marker().display()
        )
    }

    fn script(&self) -> PathBuf {
        self.ws.join("evil/run.sh")
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
    let mut child = spawn(sb, script);
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

fn spawn(sb: &Sandbox, script: &str) -> Child {
    sb.command("sh")
        .arg("-c")
        .arg(format!("{PRELUDE}{script}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// The overlays' upper directories, as the run's own mount table names them (printed by
/// [`SHOW_UPPER`] inside).
fn upper_dirs(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split(",upperdir=").nth(1))
        .map(|rest| rest.split(',').next().unwrap().to_string())
        .collect()
}

const SHOW_UPPER: &str = "grep ' overlay ' /proc/self/mountinfo || true\n";

fn assert_dropped(drops: &[GitDrop], path: &Path) {
    assert!(
        drops.iter().any(|d| d.path == path
            && (d.reason == GitDropReason::NotMerged
                    // `config`: its keys outside the allowlist (`git_config_merge.rs`).
                    || (path.ends_with("config")
                        && matches!(d.reason, GitDropReason::ConfigKeys(_))))),
        "{} not reported as dropped: {:#?}",
        path.display(),
        drops
    );
}

#[test]
fn git_work_inside_reaches_the_host() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let sb = full(&repo.ws);
    let (out, drops) = run(
        &sb,
        &format!(
            "set -e\n{SHOW_UPPER}\
             echo two > two.txt && g add two.txt && g commit -qm two\n\
             g branch side && g tag v1 && g tag -a -m annotated v1a\n\
             g checkout -q -b feat\n\
             echo three > three.txt && g add three.txt && g commit -qm three\n\
             g checkout -q side && echo s > s.txt && g add s.txt && g commit -qm side-work\n\
             g checkout -q feat && g merge -q --no-edit side\n\
             echo temp > temp.txt && g add temp.txt && g commit -qm temp && g reset -q --hard HEAD~1\n\
             echo staged > staged.txt && g add staged.txt\n\
             echo REVS; g rev-parse HEAD side v1 v1a\n"
        ),
    );
    let revs = out.split("REVS\n").nth(1).expect("revs printed");
    let ws = &repo.ws;
    // Commits, branches, tags (light and annotated) and HEAD are the host's now.
    assert_eq!(git(ws, &["rev-parse", "HEAD", "side", "v1", "v1a"]), revs);
    assert_eq!(git(ws, &["symbolic-ref", "HEAD"]), "refs/heads/feat\n");
    assert_eq!(
        git(ws, &["log", "--first-parent", "--format=%s", "feat"]),
        "Merge branch 'side' into feat\nthree\ntwo\nhost\n"
    );
    assert_eq!(
        git(ws, &["log", "-1", "--format=%s", "side"]),
        "side-work\n"
    );
    // The reflog and ORIG_HEAD of the reset, and the index with the staged file.
    let reflog = git(ws, &["reflog", "-n", "1", "--format=%gs", "feat"]);
    assert!(reflog.starts_with("reset: moving to HEAD~1"), "{reflog}");
    assert!(repo.git_dir().join("ORIG_HEAD").is_file());
    assert_eq!(git(ws, &["status", "--porcelain"]), "A  staged.txt\n");
    git(ws, &["fsck", "--no-progress", "--strict"]);
    assert!(drops.is_empty(), "{drops:#?}");
    // The layer was the command's own file system, never a host directory (those are
    // under /oldroot during setup): nothing of it is left on the host.
    let uppers = upper_dirs(&out);
    assert_eq!(uppers.len(), 1, "{out}");
    assert!(!uppers[0].starts_with("/oldroot"), "{out}");
    // The host commits on top, with its own hooks and config, as before.
    git(ws, &["commit", "-qm", "host again"]);
    assert_eq!(git(ws, &["status", "--porcelain"]), "");
}

#[test]
fn redirections_and_hooks_written_inside_are_dropped_and_reported() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let gd = repo.git_dir();
    // A host that uses per-worktree config (sparse checkouts set this): config.worktree
    // is read, so a planted one would run its fsmonitor.
    git(&repo.ws, &["config", "extensions.worktreeConfig", "true"]);
    std::fs::write(gd.join("hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    let config_before = std::fs::read(gd.join("config")).unwrap();
    let hook_before = std::fs::read(gd.join("hooks/pre-commit")).unwrap();
    let sb = full(&repo.ws);
    let run_sh = repo.script();
    let r = run_sh.display();
    let fsmonitor = format!(
        "[core]\\n\\tfsmonitor = {r}\\n\\thooksPath = {}\\n",
        repo.ws.join("evil").display()
    );
    // Each plant on its own: a refused write must not hide the others.
    let (out, drops) = run(
        &sb,
        &format!(
            "{plant}\n\
             printf '{fsmonitor}' >> .git/config || echo config refused\n\
             cp evil/run.sh .git/hooks/pre-commit || echo hook refused\n\
             cp evil/run.sh .git/hooks/post-checkout || echo new hook refused\n\
             printf '{fsmonitor}' > .git/config.worktree || echo config.worktree refused\n\
             cp -r .git evil/common && printf '{fsmonitor}' >> evil/common/config\n\
             echo \"$PWD/evil/common\" > .git/commondir || echo commondir refused\n\
             mkdir -p evil/objects && oid=$(echo planted | GIT_OBJECT_DIRECTORY=$PWD/evil/objects git hash-object -w --stdin)\n\
             echo \"$PWD/evil/objects\" > .git/objects/info/alternates || echo alternates refused\n\
             echo OID $oid\n\
             printf '*.txt filter=evil\\n' > .git/info/attributes 2>/dev/null || echo info refused\n\
             echo SEEN; cat .git/commondir\n",
            plant = repo.plant_script(),
        ),
    );
    let oid = out
        .lines()
        .find_map(|l| l.strip_prefix("OID "))
        .expect("oid printed")
        .to_string();
    // Inside, the program saw its own writes.
    assert!(
        out.contains(&format!("SEEN\n{}/evil/common\n", repo.ws.display())),
        "{out}"
    );
    // On the host: nothing of it, and git runs none of it.
    assert_eq!(std::fs::read(gd.join("config")).unwrap(), config_before);
    assert_eq!(
        std::fs::read(gd.join("hooks/pre-commit")).unwrap(),
        hook_before
    );
    for gone in [
        "hooks/post-checkout",
        "config.worktree",
        "commondir",
        "objects/info/alternates",
        "info/attributes",
    ] {
        assert!(!gd.join(gone).exists(), "{gone} reached the host");
    }
    git(&repo.ws, &["status", "--porcelain"]);
    git(&repo.ws, &["commit", "-q", "--allow-empty", "-m", "host"]);
    git(&repo.ws, &["checkout", "-q", "-b", "other"]);
    repo.assert_no_marker("host git status, commit and checkout");
    let e = git_out(&repo.ws, &["cat-file", "-e", &oid]);
    assert!(
        !e.status.success(),
        "an object of the planted alternate store is visible on the host"
    );
    // Each dropped change is reported, with its host path.
    for p in [
        "config",
        "hooks/pre-commit",
        "hooks/post-checkout",
        "config.worktree",
        "commondir",
        "objects/info/alternates",
    ] {
        assert_dropped(&drops, &gd.join(p));
    }
}

#[test]
fn a_repository_without_hooks_gets_no_hooks() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let gd = repo.git_dir();
    std::fs::remove_dir_all(gd.join("hooks")).unwrap();
    let sb = full(&repo.ws);
    let (_, drops) = run(
        &sb,
        &format!(
            "{}\nmkdir .git/hooks && cp evil/run.sh .git/hooks/pre-commit && cp evil/run.sh .git/hooks/post-commit\n",
            repo.plant_script()
        ),
    );
    assert!(!gd.join("hooks").exists(), "a hooks dir reached the host");
    git(&repo.ws, &["commit", "-q", "--allow-empty", "-m", "host"]);
    repo.assert_no_marker("host git commit");
    assert_dropped(&drops, &gd.join("hooks/pre-commit"));
    assert_dropped(&drops, &gd.join("hooks/post-commit"));
}

#[test]
fn linked_worktrees_and_submodules_cannot_be_redirected() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let gd = repo.git_dir();
    // A linked worktree outside the workspace and a submodule-style repository whose git
    // dir lives in .git/modules: the host runs git in both.
    let (_t, wt_parent) = var_tempdir();
    let wt = wt_parent.join("wt");
    git(&repo.ws, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let sub = repo.ws.join("sub");
    std::fs::create_dir(gd.join("modules")).unwrap();
    git(
        &repo.ws,
        &[
            "init",
            "-q",
            "--separate-git-dir",
            gd.join("modules/sub").to_str().unwrap(),
            sub.to_str().unwrap(),
        ],
    );
    git(&sub, &["commit", "-q", "--allow-empty", "-m", "sub"]);
    let wt_commondir = std::fs::read(gd.join("worktrees/wt/commondir")).unwrap();
    let sub_config = std::fs::read(gd.join("modules/sub/config")).unwrap();
    let sb = full(&repo.ws);
    let fsmonitor = format!("[core]\\n\\tfsmonitor = {}\\n", repo.script().display());
    let (_, drops) = run(
        &sb,
        &format!(
            "{plant}\n\
             cp -r .git evil/common && printf '{fsmonitor}' >> evil/common/config\n\
             echo \"$PWD/evil/common\" > .git/worktrees/wt/commondir || echo worktree refused\n\
             printf '{fsmonitor}' >> .git/modules/sub/config || echo module refused\n\
             mkdir -p .git/worktrees/new && echo \"$PWD/evil/common\" > .git/worktrees/new/commondir\n",
            plant = repo.plant_script(),
        ),
    );
    assert_eq!(
        std::fs::read(gd.join("worktrees/wt/commondir")).unwrap(),
        wt_commondir
    );
    assert_eq!(
        std::fs::read(gd.join("modules/sub/config")).unwrap(),
        sub_config
    );
    assert!(!gd.join("worktrees/new").exists());
    git(&wt, &["status", "--porcelain"]);
    git(&sub, &["status", "--porcelain"]);
    git(&repo.ws, &["status", "--porcelain"]);
    repo.assert_no_marker("host git status in the worktree and the submodule");
    assert_dropped(&drops, &gd.join("worktrees/wt/commondir"));
    assert_dropped(&drops, &gd.join("modules/sub/config"));
    assert_dropped(&drops, &gd.join("worktrees/new/commondir"));
}

#[test]
fn branches_deleted_inside_are_deleted_on_the_host() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let ws = &repo.ws;
    for b in ["gone-packed", "topic", "keep"] {
        git(ws, &["branch", b]);
    }
    git(ws, &["pack-refs", "--all"]);
    git(ws, &["branch", "gone-loose"]);
    git(ws, &["branch", "nested/gone"]);
    let sb = full(ws);
    let (_, drops) = run(
        &sb,
        "set -e\n\
         g branch -q -D gone-loose gone-packed nested/gone\n\
         g branch -q -D topic && g branch topic/now-a-dir\n",
    );
    assert_eq!(
        git(ws, &["branch", "--format=%(refname:short)"]),
        "keep\nmain\ntopic/now-a-dir\n"
    );
    let gd = repo.git_dir();
    assert!(!gd.join("refs/heads/gone-loose").exists());
    assert!(!gd.join("refs/heads/nested").exists());
    assert!(!gd.join("logs/refs/heads/gone-loose").exists());
    assert!(gd.join("refs/heads/topic").is_dir());
    git(ws, &["fsck", "--no-progress"]);
    // `git branch -D` rewrites config (its `branch.<name>` sections); an unchanged
    // rewrite is no change to report.
    assert!(drops.is_empty(), "{drops:#?}");
}

fn has_drop(drops: &[GitDrop], path: &Path, reason: GitDropReason) -> bool {
    drops.iter().any(|d| d.path == path && d.reason == reason)
}

#[test]
fn a_hostile_layer_changes_nothing_it_may_not() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let ws = &repo.ws;
    let gd = repo.git_dir();
    git(ws, &["branch", "keep"]);
    let head = git(ws, &["rev-parse", "HEAD"]);
    let oid = git(ws, &["rev-parse", "HEAD:README"]).trim().to_string();
    let object = gd.join("objects").join(&oid[..2]).join(&oid[2..]);
    let deep: String = (0..40).map(|i| format!("d{i}/")).collect();
    let sb = full(ws);
    let (_, drops) = run(
        &sb,
        &format!(
            "h=$(git rev-parse HEAD)
             chmod u+w .git/objects/{o2}/{o38} && echo garbage > .git/objects/{o2}/{o38}
             ln -s /etc/passwd .git/refs/heads/link
             mkfifo .git/refs/heads/fifo
             mkdir -p .git/refs/heads/{deep} && echo $h > .git/refs/heads/{deep}leaf
             mkdir .git/refs/heads/closed && echo $h > .git/refs/heads/closed/b && chmod 000 .git/refs/heads/closed
             echo $h > .git/refs/heads/special && (chmod 6755 .git/refs/heads/special || chmod 1755 .git/refs/heads/special)
             touch .git/index.lock .git/refs/heads/keep.lock
             rm .git/HEAD
             rm -r .git/logs && ln -s /etc .git/logs
             echo done
",
            o2 = &oid[..2],
            o38 = &oid[2..],
        ),
    );
    // The object the host had keeps its content; the repository is whole.
    assert_eq!(git(ws, &["cat-file", "-p", &oid]), "hello\n");
    assert!(
        has_drop(&drops, &object, GitDropReason::ObjectChange),
        "{drops:#?}"
    );
    // Symlinks and fifos never land; nor do locks; HEAD and the reflogs stay.
    let heads = gd.join("refs/heads");
    for (p, reason) in [
        (heads.join("link"), GitDropReason::NotAFile),
        (heads.join("fifo"), GitDropReason::NotAFile),
        (heads.join("keep.lock"), GitDropReason::Temporary),
        (gd.join("index.lock"), GitDropReason::Temporary),
        (gd.join("HEAD"), GitDropReason::NotMerged),
        (gd.join("logs"), GitDropReason::NotAFile),
    ] {
        assert!(has_drop(&drops, &p, reason), "{}: {drops:#?}", p.display());
    }
    for p in ["link", "fifo", "keep.lock"] {
        assert!(std::fs::symlink_metadata(heads.join(p)).is_err(), "{p}");
    }
    assert!(!gd.join("index.lock").exists());
    assert_eq!(git(ws, &["rev-parse", "HEAD"]), head);
    assert!(gd.join("logs/HEAD").is_file());
    // Ordinary refs land, with their owner's access kept and no special mode bits.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(git(ws, &["rev-parse", "closed/b"]), head);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode();
    assert_eq!(mode(&heads.join("closed")) & 0o700, 0o700);
    assert_eq!(mode(&heads.join("special")) & 0o7777, 0o755);
    // Nesting beyond what git makes stops, and says so.
    assert!(
        drops
            .iter()
            .any(|d| d.reason == GitDropReason::NotMerged && d.path.starts_with(heads.join("d0"))),
        "{drops:#?}"
    );
    git(ws, &["fsck", "--no-progress", "--strict"]);
    assert_eq!(git(ws, &["status", "--porcelain"]), "");
}

#[test]
fn the_list_of_drops_is_bounded() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let sb = full(&repo.ws);
    let n = GitDrop::MAX_REPORTED + 25;
    let (_, drops) = run(
        &sb,
        &format!("set -e\nmkdir .git/junk && cd .git/junk && seq {n} | xargs touch\n"),
    );
    assert_eq!(drops.len(), GitDrop::MAX_REPORTED + 1);
    assert_eq!(
        drops.last(),
        Some(&GitDrop {
            path: repo.git_dir(),
            reason: GitDropReason::More(25),
        })
    );
    assert!(!repo.git_dir().join("junk").exists());
}

#[test]
fn existing_packs_are_never_copied_into_the_layer() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let ws = &repo.ws;
    git(ws, &["gc", "-q"]);
    let pack = std::fs::read_dir(repo.git_dir().join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "pack"))
        .expect("a pack");
    let mtime = std::fs::metadata(&pack).unwrap().modified().unwrap();
    let sb = full(ws);
    // Writing an object the pack holds makes git refresh the pack's time, which on an
    // overlay would copy the whole pack up; read-only there, git writes it loose.
    let p = pack.display();
    let (out, drops) = run(
        &sb,
        &format!(
            "set -e\n\
             before=$(stat -c %y {p})\n\
             echo x >> README && g commit -qam x && g checkout -q HEAD~1 -- README && g commit -qam back\n\
             test \"$(git rev-parse HEAD^{{tree}})\" = \"$(git rev-parse HEAD~2^{{tree}})\"\n\
             test \"$(stat -c %y {p})\" = \"$before\" && echo unchanged\n\
             g repack -adq\n"
        ),
    );
    assert_eq!(out, "unchanged\n");
    // Repacking adds a pack; the old one and the loose objects stay (objects are only
    // added), which is reported, as are the files for dumb HTTP that it refreshes.
    let gd = repo.git_dir();
    assert!(
        drops.iter().all(|d| d.reason == GitDropReason::ObjectChange
            || (d.reason == GitDropReason::NotMerged
                && (d.path == gd.join("info/refs")
                    || d.path.starts_with(gd.join("objects/info"))))),
        "{drops:#?}"
    );
    assert!(
        drops
            .iter()
            .any(|d| d.reason == GitDropReason::ObjectChange)
    );
    assert_eq!(std::fs::metadata(&pack).unwrap().modified().unwrap(), mtime);
    assert_eq!(git(ws, &["log", "--format=%s"]), "back\nx\nhost\n");
    git(ws, &["fsck", "--no-progress", "--strict"]);
}

#[test]
fn the_git_file_of_a_linked_worktree_cannot_be_redirected() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let (_t, wt_parent) = var_tempdir();
    let wt = wt_parent.join("wt");
    git(&repo.ws, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let before = std::fs::read(wt.join(".git")).unwrap();
    let sb = full(&wt);
    // The file is read (git inside follows it; its git dir is not visible here) but not
    // rewritten, renamed or removed.
    let (out, _) = run(
        &sb,
        "cat .git; echo 'gitdir: /nowhere' > .git || echo refused; mv .git x 2>/dev/null || echo pinned; cat README\n",
    );
    assert!(out.contains("refused\npinned\nhello\n"), "{out}");
    assert_eq!(std::fs::read(wt.join(".git")).unwrap(), before);
    git(&wt, &["status", "--porcelain"]);
}

#[test]
fn a_child_dropped_without_waiting_still_merges_when_it_ends() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let sb = full(&repo.ws);
    let mut child = spawn(
        &sb,
        &format!(
            "{SHOW_UPPER}g commit -q --allow-empty -m dropped-child; cat .git/HEAD >/dev/null\n"
        ),
    );
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    drop(child);
    assert_eq!(upper_dirs(&out).len(), 1, "{out}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !git(&repo.ws, &["log", "--format=%s"]).contains("dropped-child") {
        assert!(Instant::now() < deadline, "not merged: {out}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        git(&repo.ws, &["log", "--format=%s"]),
        "dropped-child\nhost\n"
    );
}

#[test]
fn a_git_replaced_during_the_run_gets_nothing() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let ws = &repo.ws;
    let sb = full(ws);
    let mut child = spawn(
        &sb,
        "g commit -q --allow-empty -m inside && touch ready\n\
         while [ ! -e go ]; do sleep 0.05; done\n",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ws.join("ready").exists() {
        assert!(Instant::now() < deadline, "the program did not commit");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The host swaps the repository for another while the program runs.
    std::fs::rename(ws.join(".git"), ws.join("old.git")).unwrap();
    git(ws, &["init", "-q"]);
    std::fs::write(ws.join("go"), "").unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(
        child.git_dropped(),
        [GitDrop {
            path: repo.git_dir(),
            reason: GitDropReason::Replaced,
        }]
    );
    assert!(!git_out(ws, &["rev-parse", "HEAD"]).status.success());
    assert_eq!(git(&ws.join("old.git"), &["log", "--format=%s"]), "host\n");
}

#[test]
fn a_run_without_git_changes_merges_nothing_and_git_status_inside_works() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let before = git(&repo.ws, &["rev-parse", "HEAD"]);
    let sb = full(&repo.ws);
    let (out, drops) = run(&sb, "set -e\ng status --porcelain\ng log --format=%s\n");
    assert_eq!(out, "host\n");
    assert!(drops.is_empty(), "{drops:#?}");
    assert_eq!(git(&repo.ws, &["rev-parse", "HEAD"]), before);
    assert_eq!(git(&repo.ws, &["status", "--porcelain"]), "");
    // Without a .git at all, nothing is layered and `git init` inside is the program's.
    let (_w, bare) = var_tempdir();
    let (_, drops) = run(
        &full(&bare),
        "set -e\ng init -q && g commit -q --allow-empty -m mine\n",
    );
    assert!(drops.is_empty());
    assert_eq!(git(&bare, &["log", "--format=%s"]), "mine\n");
}

/// `stockade run` names each change under `.git` that stayed in the layer, and the host's
/// repository has none of them.
#[test]
fn the_cli_reports_dropped_git_changes() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let out = std::process::Command::new(common::stockade_exe())
        .args([
            "run",
            "--layer",
            "full",
            "--fallback",
            "refuse",
            "--workspace",
        ])
        .arg(&repo.ws)
        .args(["--", "sh", "-c", "echo 'exit 0' > .git/hooks/pre-commit"])
        .current_dir(&repo.ws)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let hook = repo.git_dir().join("hooks/pre-commit");
    assert!(
        stderr.contains(&format!(
            "stockade: .git change dropped: {}: not merged back",
            hook.display()
        )),
        "{stderr}"
    );
    assert!(!hook.exists());
}

/// What the merge writes on the host is never writable by other users, whatever mode the
/// program gave it: no world- or group-writable refs, objects or directories appear in
/// the host's `.git`.
#[test]
fn merged_files_are_not_writable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    require!(Feature::UserNs);
    let repo = Repo::new();
    // Whatever the caller's umask made of `git init`: nothing group- or world-writable.
    let out = std::process::Command::new("chmod")
        .args(["-R", "go-w"])
        .arg(repo.git_dir())
        .status()
        .unwrap();
    assert!(out.success());
    let sb = full(&repo.ws);
    let (_, drops) = run(
        &sb,
        "set -e\necho x > f && g add f && g commit -qm c && g branch team/evil\n\
         chmod 777 .git/refs/heads/team\n\
         chmod 666 .git/refs/heads/team/evil .git/refs/heads/main\n\
         for o in $(g rev-parse HEAD HEAD^{tree} HEAD:f); do\n\
           chmod 666 .git/objects/$(echo $o | cut -c1-2)/$(echo $o | cut -c3-)\n\
         done\n\
         find .git/objects -type d -exec chmod 777 {} +\n",
    );
    assert!(drops.is_empty(), "{drops:#?}");
    assert_eq!(
        git(&repo.ws, &["log", "-1", "--format=%s", "team/evil"]),
        "c\n"
    );
    let mut checked = 0;
    let mut stack = vec![repo.git_dir()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            let mode = meta.permissions().mode();
            assert_eq!(mode & 0o022, 0, "{}: {mode:o}", e.path().display());
            checked += 1;
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    assert!(checked > 20, "{checked}");
}

/// A repository made under umask 002 (Ubuntu's default for users: group-writable
/// directories and files) stays so: what the merge writes keeps group write where git
/// gave it and its host directory has it, never others' write.
#[test]
fn a_group_writable_repository_stays_writable_by_its_group() {
    use std::os::unix::fs::PermissionsExt;
    require!(Feature::UserNs);
    let repo = Repo::new();
    let ws = repo.ws.clone();
    let out = std::process::Command::new("chmod")
        .args(["-R", "g+w,o-w"])
        .arg(repo.git_dir())
        .status()
        .unwrap();
    assert!(out.success());
    let sb = full(&ws);
    let (_, drops) = run(
        &sb,
        "set -e\numask 002\necho x > f && g add f && g commit -qm c && g branch feature\n\
         chmod o+w .git/logs/HEAD .git/refs/heads/feature\n",
    );
    assert!(drops.is_empty(), "{drops:#?}");
    let git_dir = ws.join(".git");
    for f in [
        "logs/HEAD",
        "logs/refs/heads/main",
        "refs/heads/feature",
        "refs/heads/main",
    ] {
        let mode = std::fs::metadata(git_dir.join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o022, 0o020, "{f}: {mode:o}");
    }
}

/// The CLI's lines name paths the program chose: their control characters are escaped
/// (no forged `stockade:` line, no escape sequence reaches the caller's terminal), and
/// with `--scrub` a secret in them is redacted like the program's own output.
#[test]
fn the_cli_escapes_and_scrubs_the_paths_it_reports() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let out = std::process::Command::new(common::stockade_exe())
        .args(["run", "--layer", "full", "--fallback", "refuse", "--scrub"])
        .args(["--secret-env", "TOKEN", "--workspace"])
        .arg(&repo.ws)
        .args([
            "--",
            "sh",
            "-c",
            "touch \".git/x$(printf '\\nstockade: all clear\\033]0;t\\007\\342\\200\\256')\" \".git/k$TOKEN\"",
        ])
        .env("TOKEN", "supersecretvalue123")
        .current_dir(&repo.ws)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("stockade: .git change dropped: ")),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\x07'),
        "{stderr:?}"
    );
    assert!(!stderr.contains('\u{202e}'), "{stderr:?}");
    assert!(
        stderr.contains("x\\nstockade: all clear\\u{1b}]0;t\\u{7}\\u{202e}"),
        "{stderr}"
    );
    assert!(!stderr.contains("supersecretvalue123"), "{stderr}");
    assert!(stderr.contains("[REDACTED]"), "{stderr}");
}

#[test]
fn a_layer_is_bounded_like_tmp() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let mut p = Policy::with_workspace(&repo.ws);
    p.layer = Some(Layer::Full);
    p.tmp_size = stockade::ByteSize::mib(1);
    let sb = Sandbox::new(p).unwrap();
    let (out, drops) = run(
        &sb,
        "head -c 2000000 /dev/zero > .git/big || echo full\nrm -f .git/big\n\
         echo x > x && g add x && g commit -qm small && echo committed\n",
    );
    assert!(out.contains("No space left on device"), "{out}");
    assert!(out.ends_with("full\ncommitted\n"), "{out}");
    assert!(drops.is_empty(), "{drops:#?}");
    assert!(!repo.git_dir().join("big").exists());
    assert_eq!(git(&repo.ws, &["log", "--format=%s"]), "small\nhost\n");
}

/// Moves the repository's metadata to `ws/<to>` and leaves `.git` as a symlink to it
/// (written as `link`), the way a host keeps its git dir elsewhere in the project.
fn move_git(repo: &Repo, to: &str, link: &Path) -> PathBuf {
    let real = repo.ws.join(to);
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::rename(repo.git_dir(), &real).unwrap();
    std::os::unix::fs::symlink(link, repo.git_dir()).unwrap();
    real
}

/// What every test of a `.git` link inside the workspace plants and tries: a hook and a
/// `core.fsmonitor` written through the link and through the target's own path, a commit,
/// and renaming the link, the target and the directories between away (`rename(2)`
/// itself: `mv` would fall back to copying and deleting what it can).
fn plant_through_link(repo: &Repo, target: &str, between: &str) -> String {
    let fsmonitor = format!("[core]\\n\\tfsmonitor = {}\\n", repo.script().display());
    format!(
        "{plant}\n\
         rn() {{ python3 -c 'import os, sys; os.rename(*sys.argv[1:])' \"$1\" \"$2\" 2>/dev/null; }}\n\
         printf '{fsmonitor}' >> .git/config || echo config refused\n\
         cp evil/run.sh .git/hooks/post-checkout || echo hook refused\n\
         printf '{fsmonitor}' > {target}/config.worktree || echo config.worktree refused\n\
         echo two > two.txt && g add two.txt && g commit -qm two >/dev/null && echo committed\n\
         rm -f .git 2>/dev/null || echo link pinned\n\
         rn .git moved || echo link not moved\n\
         rn {target} moved || echo target pinned\n\
         rn {between} moved || echo between pinned\n\
         test -e moved && echo MOVED\n\
         echo REV; git rev-parse HEAD\n",
        plant = repo.plant_script(),
    )
}

/// The host side of [`plant_through_link`]: the commit is the host's, the plants are not,
/// and each is reported with its path under the real metadata.
fn assert_link_guarded(repo: &Repo, real: &Path, link: &Path, out: &str, drops: &[GitDrop]) {
    assert!(out.contains("committed\n"), "{out}");
    for line in [
        "link pinned",
        "link not moved",
        "target pinned",
        "between pinned",
    ] {
        assert!(out.contains(&format!("{line}\n")), "{line}: {out}");
    }
    assert!(!out.contains("MOVED"), "{out}");
    let rev = out.split("REV\n").nth(1).expect("rev printed");
    assert_eq!(std::fs::read_link(repo.git_dir()).unwrap(), link);
    assert_eq!(git(&repo.ws, &["rev-parse", "HEAD"]), rev);
    assert_eq!(git(&repo.ws, &["log", "--format=%s"]), "two\nhost\n");
    assert!(!real.join("hooks/post-checkout").exists());
    assert!(!real.join("config.worktree").exists());
    git(&repo.ws, &["status", "--porcelain"]);
    git(&repo.ws, &["checkout", "-q", "-b", "other"]);
    repo.assert_no_marker("host git status and checkout through the link");
    for p in ["config", "hooks/post-checkout", "config.worktree"] {
        assert_dropped(drops, &real.join(p));
    }
    git(&repo.ws, &["fsck", "--no-progress", "--strict"]);
}

#[test]
fn a_git_symlink_into_the_workspace_gets_the_layer() {
    require!(Feature::UserNs);
    for (to, link) in [
        ("realgit", PathBuf::from("realgit")),
        ("sub/dir", PathBuf::from("./sub/../sub/dir")),
    ] {
        let repo = Repo::new();
        let real = move_git(&repo, to, &link);
        let config_before = std::fs::read(real.join("config")).unwrap();
        let sb = full(&repo.ws);
        let between = if to == "sub/dir" { "sub" } else { "realgit" };
        let mut child = spawn(&sb, &plant_through_link(&repo, to, between));
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(child.wait().unwrap().success(), "{to}: {out}");
        assert!(
            child.git_unguarded().is_empty(),
            "{to}: {:?}",
            child.git_unguarded()
        );
        assert_eq!(std::fs::read(real.join("config")).unwrap(), config_before);
        assert_link_guarded(&repo, &real, &link, &out, child.git_dropped());
    }
}

#[test]
fn a_gitdir_file_naming_metadata_in_the_workspace_gets_the_layer() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let real = repo.ws.join("meta/repo.git");
    std::fs::create_dir(repo.ws.join("meta")).unwrap();
    std::fs::rename(repo.git_dir(), &real).unwrap();
    // Relative to the file's directory, as git writes it for submodules; the host's git
    // reads it so.
    std::fs::write(repo.git_dir(), "gitdir: meta/repo.git\n").unwrap();
    assert_eq!(git(&repo.ws, &["log", "--format=%s"]), "host\n");
    let sb = full(&repo.ws);
    let (out, drops) = run(
        &sb,
        &format!(
            "{}echo 'gitdir: evil/git' > .git || echo file refused\n\
             cp evil/run.sh meta/repo.git/hooks/post-checkout\n\
             printf '[core]\\n\\tfsmonitor = {}\\n' >> meta/repo.git/config\n",
            // (The shell does not read a `.git` file: its plants through `.git/` fail.)
            plant_through_link(&repo, "meta/repo.git", "meta"),
            repo.script().display()
        ),
    );
    assert!(out.contains("file refused\n"), "{out}");
    assert_eq!(
        std::fs::read_to_string(repo.git_dir()).unwrap(),
        "gitdir: meta/repo.git\n"
    );
    // `assert_link_guarded` reads the link; a file has none to read.
    assert!(
        out.contains("committed\n") && out.contains("between pinned\n"),
        "{out}"
    );
    assert!(!real.join("hooks/post-checkout").exists());
    git(&repo.ws, &["status", "--porcelain"]);
    git(&repo.ws, &["checkout", "-q", "-b", "other"]);
    repo.assert_no_marker("host git status and checkout through the gitdir file");
    assert_eq!(git(&repo.ws, &["log", "--format=%s"]), "two\nhost\n");
    for p in ["config", "hooks/post-checkout", "config.worktree"] {
        assert_dropped(&drops, &real.join(p));
    }
}

#[test]
fn a_git_link_outside_the_workspace_is_reported_and_not_writable_through() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let (_o, other) = var_tempdir();
    let outside = Repo::new();
    std::fs::remove_dir_all(repo.git_dir()).unwrap();
    std::os::unix::fs::symlink(outside.git_dir(), repo.git_dir()).unwrap();
    let config_before = std::fs::read(outside.git_dir().join("config")).unwrap();
    let sb = full(&repo.ws);
    let mut child = spawn(
        &sb,
        &format!(
            "touch .git/hooks/post-checkout 2>/dev/null || echo hooks refused\n\
             (echo x >> .git/config) 2>/dev/null || echo config refused\n\
             rm -f .git 2>/dev/null || echo link pinned\n\
             ln -sfn {} .git 2>/dev/null || echo link kept\n",
            other.display()
        ),
    );
    assert_eq!(
        child.git_unguarded(),
        [stockade::GitUnguarded {
            path: repo.git_dir(),
            target: outside.git_dir(),
            reason: stockade::GitUnguardedReason::Outside,
        }]
    );
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    assert_eq!(
        out, "hooks refused\nconfig refused\nlink pinned\nlink kept\n",
        "{out}"
    );
    assert!(child.git_dropped().is_empty());
    assert!(!outside.git_dir().join("hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read(outside.git_dir().join("config")).unwrap(),
        config_before
    );
    assert_eq!(
        std::fs::read_link(repo.git_dir()).unwrap(),
        outside.git_dir()
    );
    // The CLI says so, as it says when the layer is weaker than asked.
    let cli = std::process::Command::new(common::stockade_exe())
        .args([
            "run",
            "--layer",
            "full",
            "--fallback",
            "refuse",
            "--workspace",
        ])
        .arg(&repo.ws)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(cli.status.success());
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(
        stderr.contains(&format!(
            "stockade: warning: {} names {}, outside its writable root",
            repo.git_dir().display(),
            outside.git_dir().display()
        )),
        "{stderr}"
    );
    // A link that cannot be followed without another symlink, or to nothing: reported,
    // and runs go on.
    std::fs::remove_file(repo.git_dir()).unwrap();
    std::os::unix::fs::symlink(&other, repo.ws.join("hop")).unwrap();
    std::os::unix::fs::symlink("hop", repo.git_dir()).unwrap();
    let out = sb.command("true").output().unwrap();
    assert!(out.status.success());
    let mut child = sb.command("true").spawn().unwrap();
    assert_eq!(
        child.git_unguarded()[0].reason,
        stockade::GitUnguardedReason::Unresolved(libc::ELOOP)
    );
    child.wait().unwrap();
    // A linked worktree's .git file names its git dir in the main repository.
    let (_t, wt_parent) = var_tempdir();
    let wt = wt_parent.join("wt");
    git(
        &outside.ws,
        &["worktree", "add", "-q", wt.to_str().unwrap()],
    );
    let mut child = full(&wt).command("true").spawn().unwrap();
    assert_eq!(
        child.git_unguarded()[0].reason,
        stockade::GitUnguardedReason::Outside
    );
    child.wait().unwrap();
}

/// The config line that makes git run the planted script (`core.fsmonitor`), for `printf`.
fn fsmonitor_line(repo: &Repo) -> String {
    format!("[core]\\n\\tfsmonitor = {}\\n", repo.script().display())
}

/// Git on the host recurses into every submodule the index lists, running git with the
/// config of the checkout's own git dir, which lies in the workspace. An index that gained
/// a gitlink entry therefore stays out of the merge (with the split index's shared files),
/// whatever the index version; the rest merges, so an ordinary commit reaches the host.
#[test]
fn an_index_that_gains_a_submodule_is_not_merged() {
    require!(Feature::UserNs);
    for variant in [
        "",
        "g update-index --index-version 4",
        "g update-index --index-version 3 && g add -N new.txt",
        "g -c core.splitIndex=true update-index --split-index",
    ] {
        let repo = Repo::new();
        let sb = full(&repo.ws);
        std::fs::write(repo.ws.join("new.txt"), "new\n").unwrap();
        let (_, drops) = run(
            &sb,
            &format!(
                "set -e\n{plant}\n\
                 echo work > work.txt && g add work.txt && g commit -qm ordinary\n\
                 {variant}\n\
                 g init -q sub && g -C sub commit -q --allow-empty -m sub\n\
                 printf '{fsmonitor}' >> sub/.git/config\n\
                 g update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub\n",
                plant = repo.plant_script(),
                fsmonitor = fsmonitor_line(&repo),
            ),
        );
        let index = repo.git_dir().join("index");
        assert!(
            has_drop(&drops, &index, GitDropReason::NewSubmodule),
            "{variant}: {drops:#?}"
        );
        // Nothing else of the index went through either.
        for d in &drops {
            let name = d.path.file_name().unwrap().to_string_lossy();
            if name == "index" || name.starts_with("sharedindex.") {
                assert_eq!(d.reason, GitDropReason::NewSubmodule, "{variant}: {d}");
            }
        }
        assert!(
            !git(&repo.ws, &["ls-files", "-s"]).contains("160000"),
            "{variant}"
        );
        git(&repo.ws, &["status", "--porcelain"]);
        repo.assert_no_marker(&format!("{variant}: git status after a new submodule"));
        // The commit made before the gitlink was added reached the host.
        assert_eq!(
            git(&repo.ws, &["log", "-1", "--format=%s"]),
            "ordinary\n",
            "{variant}"
        );
        // The next run's ordinary commit merges its index (the checkout `sub` is still in
        // the workspace, but no index lists it).
        let (_, drops) = run(
            &sb,
            "set -e\necho more > more.txt && g add more.txt work.txt && g commit -qm second\n",
        );
        assert!(drops.is_empty(), "{variant}: {drops:#?}");
        let files = git(&repo.ws, &["ls-files"]);
        assert!(
            files.contains("more.txt") && files.contains("work.txt"),
            "{variant}: {files}"
        );
        assert!(!files.contains("sub"), "{variant}: {files}");
        git(&repo.ws, &["status", "--porcelain"]);
        repo.assert_no_marker(&format!("{variant}: git status after the next commit"));
    }
}

/// `git restore .` on the host writes each index entry's blob at the entry's path. An
/// index whose entry names `../…` or `.git/…` (which git itself never writes, but the
/// program may, with a valid checksum) would have the host write outside the workspace or
/// into its own git dir, and so run a hook or read a config the program chose. Such an
/// index stays out of the merge.
#[test]
fn an_index_naming_a_path_git_refuses_is_not_merged() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let outside = format!(
        "../{}/pwned",
        repo.host.file_name().unwrap().to_string_lossy()
    );
    for target in [outside.as_str(), ".git/hooks/post-checkout", ".GIT/config"] {
        let sb = full(&repo.ws);
        // An entry added under a name of the target's length, renamed in place, and the
        // index's SHA-1 trailer recomputed: an index git on the host would read.
        let (_, drops) = run(
            &sb,
            &format!(
                "set -e\nname=$(printf '%0{n}d' 0)\n\
                 printf '#!/bin/sh\\ntouch {marker}\\n' > \"$name\" && chmod +x \"$name\"\n\
                 g add \"$name\"\n\
                 python3 -c 'import hashlib,sys\n\
d=open(\".git/index\",\"rb\").read()[:-20]\n\
d=d.replace(sys.argv[1].encode(),sys.argv[2].encode(),1)\n\
open(\".git/index\",\"wb\").write(d+hashlib.sha1(d).digest())' \"$name\" '{target}'\n\
                 g ls-files\n",
                n = target.len(),
                marker = repo.marker().display(),
            ),
        );
        let index = repo.git_dir().join("index");
        assert!(
            has_drop(&drops, &index, GitDropReason::UnsafeIndexPath),
            "{target}: {drops:#?}"
        );
        let files = git(&repo.ws, &["ls-files"]);
        assert_eq!(files, "README\n", "{target}");
        git(&repo.ws, &["restore", "."]);
        git(
            &repo.ws,
            &["checkout", "-q", "-b", &format!("b{}", target.len())],
        );
        repo.assert_no_marker(&format!("{target}: git restore and checkout on the host"));
        assert!(
            !repo.git_dir().join("hooks/post-checkout").exists(),
            "{target}"
        );
        assert!(!repo.host.join("pwned").exists(), "{target}");
    }
}

/// A host index that stockade's reader does not follow (here one with an entry offset
/// table, as `index.threads` writes it) hides which submodule checkouts git on the host
/// would enter: the spawn says so instead of guarding none in silence.
#[test]
fn a_host_index_that_cannot_be_read_is_reported() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    git(
        &repo.ws,
        &[
            "-c",
            "index.threads=2",
            "update-index",
            "--force-write-index",
        ],
    );
    let sb = full(&repo.ws);
    let mut child = sb.command("true").spawn().unwrap();
    let index = repo.git_dir().join("index");
    assert!(
        child
            .git_unguarded()
            .iter()
            .any(|u| u.path == index && u.reason == GitUnguardedReason::UnreadableIndex),
        "{:#?}",
        child.git_unguarded()
    );
    assert!(child.wait().unwrap().success());
    // An index git writes by default is read, and nothing is reported.
    git(&repo.ws, &["update-index", "--force-write-index"]);
    let mut child = sb.command("true").spawn().unwrap();
    assert!(
        child.git_unguarded().is_empty(),
        "{:#?}",
        child.git_unguarded()
    );
    assert!(child.wait().unwrap().success());
}

/// Removing a submodule from the index (`git rm`) is no new one: the index merges.
#[test]
fn an_index_that_loses_a_submodule_is_merged() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let sha = git(&repo.ws, &["rev-parse", "HEAD"]);
    let cacheinfo = format!("160000,{},sub", sha.trim());
    git(
        &repo.ws,
        &["update-index", "--add", "--cacheinfo", &cacheinfo],
    );
    git(&repo.ws, &["commit", "-qm", "gitlink"]);
    let (_, drops) = run(
        &full(&repo.ws),
        "set -e\ng rm -q --cached sub && g commit -qm gone\n",
    );
    assert!(drops.is_empty(), "{drops:#?}");
    assert!(!git(&repo.ws, &["ls-files", "-s"]).contains("160000"));
}

/// The submodule checkouts the host's index lists are kept from change: a checkout's
/// `.git` (a `gitdir:` file, as `git submodule add` makes it, or a directory) and the
/// directory of one not checked out are read-only, and the directories on the way cannot
/// be moved; what the `.git` file names lies in the layered `.git` (`modules/`), whose
/// config is never merged. The files of the checkouts stay writable.
#[test]
fn existing_submodule_checkouts_are_kept_from_change() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let other = Repo::new();
    let ws = &repo.ws;
    git(
        ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            other.ws.to_str().unwrap(),
            "deps/sub",
        ],
    );
    git(ws, &["init", "-q", "-b", "main", "plain"]);
    std::fs::write(ws.join("plain/f"), "f\n").unwrap();
    git(&ws.join("plain"), &["add", "f"]);
    git(&ws.join("plain"), &["commit", "-qm", "plain"]);
    git(ws, &["add", "plain"]);
    let sha = git(ws, &["rev-parse", "HEAD"]);
    let cacheinfo = format!("160000,{},empty", sha.trim());
    git(ws, &["update-index", "--add", "--cacheinfo", &cacheinfo]);
    std::fs::create_dir(ws.join("empty")).unwrap();
    git(ws, &["commit", "-qm", "submodules"]);
    let sb = full(ws);
    let child = sb.command("true").spawn().unwrap();
    assert!(
        child.git_unguarded().is_empty(),
        "{:#?}",
        child.git_unguarded()
    );
    let (out, drops) = run(
        &sb,
        &format!(
            "{plant}\n\
             printf 'gitdir: ../../evilgit\\n' > deps/sub/.git && echo REWROTE\n\
             rm -f deps/sub/.git && echo REMOVED\n\
             mv deps deps2 && echo MOVED\n\
             mv deps/sub deps/sub2 && echo MOVED\n\
             printf '{fsmonitor}' >> .git/modules/deps/sub/config && echo MODULE\n\
             printf '{fsmonitor}' >> plain/.git/config && echo REWROTE\n\
             rm -rf plain/.git && echo REMOVED\n\
             git init -q empty && echo CREATED\n\
             echo changed > deps/sub/README && echo changed > plain/f && echo WROTE\n\
             true\n",
            plant = repo.plant_script(),
            fsmonitor = fsmonitor_line(&repo),
        ),
    );
    for refused in ["REWROTE", "REMOVED", "MOVED", "CREATED"] {
        assert!(!out.contains(refused), "{refused}:\n{out}");
    }
    assert!(out.contains("MODULE") && out.contains("WROTE"), "{out}");
    let config = repo.git_dir().join("modules/deps/sub/config");
    assert!(
        has_drop(&drops, &config, GitDropReason::NotMerged),
        "{drops:#?}"
    );
    let status = git(ws, &["status", "--porcelain"]);
    repo.assert_no_marker("git status in existing submodule checkouts");
    assert!(
        status.contains("deps/sub") && status.contains("plain"),
        "{status}"
    );
}

/// A submodule the host's index lists but whose directory does not exist cannot be kept
/// (stockade creates nothing on the host). It is reported at the spawn; the checkout the
/// program then creates is a nested repository of its own: reported after the run and
/// neutralized (`nested_repos.rs`), so git on the host runs nothing from it.
#[test]
fn a_missing_submodule_checkout_the_program_creates_is_neutralized() {
    require!(Feature::UserNs);
    let repo = Repo::new();
    let sha = git(&repo.ws, &["rev-parse", "HEAD"]);
    let cacheinfo = format!("160000,{},sub", sha.trim());
    git(
        &repo.ws,
        &["update-index", "--add", "--cacheinfo", &cacheinfo],
    );
    git(&repo.ws, &["commit", "-qm", "gitlink"]);
    let sb = full(&repo.ws);
    let mut child = spawn(
        &sb,
        &format!(
            "set -e\n{plant}\n\
             g init -q sub && g -C sub commit -q --allow-empty -m sub\n\
             printf '{fsmonitor}' >> sub/.git/config\n",
            plant = repo.plant_script(),
            fsmonitor = fsmonitor_line(&repo),
        ),
    );
    let unguarded = child.git_unguarded().to_vec();
    assert!(child.wait().unwrap().success());
    assert_eq!(unguarded.len(), 1, "{unguarded:#?}");
    assert_eq!(unguarded[0].path, repo.ws.join("sub/.git"));
    assert_eq!(
        unguarded[0].reason,
        stockade::GitUnguardedReason::Submodule(libc::ENOENT)
    );
    assert!(child.git_dropped().is_empty(), "{:#?}", child.git_dropped());
    git(
        &repo.ws,
        &["-c", "diff.ignoreSubmodules=all", "status", "--porcelain"],
    );
    repo.assert_no_marker("git status with diff.ignoreSubmodules=all");
    let nested = child.nested_repositories();
    assert_eq!(nested.len(), 1, "{nested:#?}");
    assert_eq!(nested[0].path, repo.ws.join("sub/.git"));
    git(&repo.ws, &["status", "--porcelain"]);
    git(&repo.ws.join("sub"), &["status", "--porcelain"]);
    repo.assert_no_marker("git status in and above the checkout the program made");
}

/// Layer 2 cannot keep any part of `.git` read-only under a writable workspace (a Landlock
/// rule grants its rights to the whole tree beneath it) and has no overlay: the program
/// writes `.git` during the run, and its control files are put back after it
/// (`tests/git_layer2.rs` has the rest). SECURITY.md documents the window; this test pins
/// it, so that the text changes if the behaviour does.
#[test]
fn layer_two_writes_git_during_the_run_and_puts_it_back_after() {
    let repo = Repo::new();
    let mut p = Policy::with_workspace(&repo.ws);
    p.layer = Some(Layer::Landlock);
    p.fallback = stockade::Fallback::Refuse;
    let sb = Sandbox::new(p).unwrap();
    let git_layer = |sb: &Sandbox| {
        let plan = sb.plan();
        plan.steps
            .iter()
            .any(|s| s.starts_with("copy-on-write layer over"))
    };
    assert!(!git_layer(&sb), "{}", sb.plan());
    // The same policy on the full layer has the step (a plan is made without a spawn).
    assert!(git_layer(&full(&repo.ws)), "{}", full(&repo.ws).plan());
    // Written during the run (host git run meanwhile would see it), gone after.
    assert_eq!(
        sh_ok(
            &sb,
            "echo /elsewhere > .git/commondir && cat .git/commondir"
        ),
        "/elsewhere\n"
    );
    assert!(!repo.git_dir().join("commondir").exists());
    // The same through a `.git` symlink into the workspace: what it names is snapshotted
    // and put back like a `.git` directory there.
    let real = move_git(&repo, "realgit", Path::new("realgit"));
    assert_eq!(
        sh_ok(&sb, "echo /again > .git/commondir && cat .git/commondir"),
        "/again\n"
    );
    assert!(!real.join("commondir").exists());
    // A `.git` symlink out of the workspace leads nowhere writable.
    let outside = Repo::new();
    std::fs::remove_file(repo.git_dir()).unwrap();
    std::os::unix::fs::symlink(outside.git_dir(), repo.git_dir()).unwrap();
    let out = common::sh(&sb, "echo /elsewhere > .git/commondir");
    assert!(!out.status.success());
    assert!(!outside.git_dir().join("commondir").exists());
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
