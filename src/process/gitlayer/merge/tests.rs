//! The merge against a layer that changes while it is merged: each file it checks is read
//! once, and the host gets the checked bytes or nothing, never what the layer holds a
//! moment later.

use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::Layer;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A host repository with one commit, and a layer over its `.git` (a plain directory
/// with `upper/`, as the child's tmpfs has it).
fn fixture() -> (tempfile::TempDir, Layer) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a"), "a").unwrap();
    git(&ws, &["add", "a"]);
    git(&ws, &["commit", "-qm", "one"]);
    std::fs::create_dir(dir.path().join("layer/upper")).unwrap_or_else(|_| {
        std::fs::create_dir_all(dir.path().join("layer/upper")).unwrap();
    });
    let git_dir = ws.join(".git");
    let meta = std::fs::metadata(&git_dir).unwrap();
    let upper: OwnedFd = std::fs::File::open(dir.path().join("layer"))
        .unwrap()
        .into();
    let layer = Layer {
        git: git_dir,
        identity: (meta.dev(), meta.ino()),
        mode: meta.mode() & 0o7777,
        packs: Vec::new(),
        link: None,
        checkouts: Vec::new(),
        upper: Some(upper),
    };
    (dir, layer)
}

/// Swaps `upper/<name>` between the two files `a` and `b` of `dir` (renamed over it from a
/// fresh hard link each time) until `stop`.
fn swapper(
    dir: &Path,
    name: &str,
    a: &str,
    b: &str,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let (dir, name, a, b) = (
        dir.to_path_buf(),
        name.to_string(),
        a.to_string(),
        b.to_string(),
    );
    std::thread::spawn(move || {
        let mut swaps = 0u64;
        let target = dir.join("upper").join(&name);
        while !stop.load(Ordering::Relaxed) {
            for src in [&a, &b] {
                let tmp = dir.join("swap.tmp");
                let _ = std::fs::remove_file(&tmp);
                std::fs::hard_link(dir.join(src), &tmp).unwrap();
                std::fs::rename(&tmp, &target).unwrap();
                swaps += 1;
            }
        }
        swaps
    })
}

/// Waits until the swapper has put `upper/<name>` in place.
fn wait_for(dir: &Path, name: &str) {
    while !dir.join("upper").join(name).exists() {
        std::thread::yield_now();
    }
}

/// The program's index flips between a clean one and one that lists a new submodule
/// while the merge runs, thousands of times: the host's index never gets the gitlink.
#[test]
fn an_index_swapped_during_the_merge_lands_as_checked_or_not_at_all() {
    let (dir, layer) = fixture();
    let layer_dir = dir.path().join("layer");
    let ws = dir.path().join("ws");
    let host_index = ws.join(".git/index");
    let original = std::fs::read(&host_index).unwrap();
    // The clean index: one more file. The hostile one: a gitlink besides.
    std::fs::write(ws.join("b"), "b").unwrap();
    git(&ws, &["add", "b"]);
    std::fs::copy(&host_index, layer_dir.join("good")).unwrap();
    let oid = "0123456789abcdef0123456789abcdef01234567";
    git(
        &ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{oid},sub"),
        ],
    );
    std::fs::copy(&host_index, layer_dir.join("bad")).unwrap();
    std::fs::write(&host_index, &original).unwrap();
    let good = std::fs::read(layer_dir.join("good")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let thread = swapper(&layer_dir, "index", "good", "bad", stop.clone());
    wait_for(&layer_dir, "index");
    let (mut taken, mut refused) = (0, 0);
    for _ in 0..3000 {
        std::fs::write(&host_index, &original).unwrap();
        let (drops, _) = layer.merge();
        let now = std::fs::read(&host_index).unwrap();
        if now == good {
            taken += 1;
            assert!(drops.is_empty(), "{drops:?}");
        } else {
            assert_eq!(
                now, original,
                "the host's index is neither the host's nor the checked one"
            );
            refused += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = thread.join().unwrap();
    // Both outcomes happened: the swap raced the merge.
    assert!(
        taken > 0 && refused > 0,
        "{taken} taken, {refused} refused, {swaps} swaps"
    );
}

/// `HEAD` flips between a branch and `not a ref` during the merge: the host's `HEAD` is
/// only ever a valid one.
#[test]
fn a_head_swapped_during_the_merge_lands_as_checked_or_not_at_all() {
    let (dir, layer) = fixture();
    let layer_dir = dir.path().join("layer");
    let head = dir.path().join("ws/.git/HEAD");
    std::fs::write(layer_dir.join("good"), "ref: refs/heads/other\n").unwrap();
    std::fs::write(layer_dir.join("bad"), "not a ref\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = swapper(&layer_dir, "HEAD", "good", "bad", stop.clone());
    wait_for(&layer_dir, "HEAD");
    let (mut taken, mut refused) = (0, 0);
    for _ in 0..3000 {
        std::fs::write(&head, "ref: refs/heads/main\n").unwrap();
        let (drops, _) = layer.merge();
        match std::fs::read_to_string(&head).unwrap().as_str() {
            "ref: refs/heads/other\n" => taken += 1,
            "ref: refs/heads/main\n" => {
                assert!(
                    drops
                        .iter()
                        .any(|d| d.reason == super::GitDropReason::InvalidRef),
                    "{drops:?}"
                );
                refused += 1;
            }
            other => panic!("the host's HEAD is {other:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = thread.join().unwrap();
    assert!(
        taken > 0 && refused > 0,
        "{taken} taken, {refused} refused, {swaps} swaps"
    );
}
