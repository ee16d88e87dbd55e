//! Tests of the index reader, on real indexes that git writes and hostile ones.

use super::*;
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository with files (one with a path over 4095 bytes), a directory, and gitlinks
/// `m/sub` and `z`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    std::fs::create_dir_all(d.join("m/deep")).unwrap();
    for f in ["a", "m/deep/b", "m/deep/c", "zz"] {
        std::fs::write(d.join(f), f).unwrap();
    }
    git(d, &["add", "."]);
    let sha = "0123456789abcdef0123456789abcdef01234567";
    // Longer than the 12-bit length of an entry's flags (and than PATH_MAX).
    let long = vec!["l".repeat(250); 17].join("/");
    git(
        d,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{sha},{long}"),
        ],
    );
    for path in ["m/sub", "z"] {
        git(
            d,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},{path}"),
            ],
        );
    }
    dir
}

fn links(d: &Path) -> R<Gitlinks> {
    let git_dir = d.join(".git");
    let data = std::fs::read(git_dir.join("index")).unwrap();
    gitlinks(&data, 20, |hex| {
        Ok(std::fs::read(git_dir.join(format!("sharedindex.{hex}"))).ok())
    })
}

fn set(paths: &[&str]) -> Gitlinks {
    paths.iter().map(|p| p.as_bytes().to_vec()).collect()
}

#[test]
fn gitlinks_are_found_in_every_index_version() {
    let dir = repo();
    let d = dir.path();
    for v in ["2", "3", "4"] {
        git(d, &["update-index", "--index-version", v]);
        assert_eq!(links(d).unwrap(), set(&["m/sub", "z"]), "version {v}");
    }
    // Extended flags (version 3 at least): intent-to-add, skip-worktree.
    std::fs::write(d.join("n"), "n").unwrap();
    git(d, &["add", "-N", "n"]);
    git(d, &["update-index", "--skip-worktree", "a"]);
    for v in ["3", "4"] {
        git(d, &["update-index", "--index-version", v]);
        assert_eq!(links(d).unwrap(), set(&["m/sub", "z"]), "version {v}");
    }
}

#[test]
fn gitlinks_are_found_through_a_split_index() {
    let dir = repo();
    let d = dir.path();
    let sha = "89abcdef0123456789abcdef0123456789abcdef";
    for v in ["2", "4"] {
        git(d, &["update-index", "--index-version", v]);
        git(d, &["update-index", "--split-index"]);
        assert_eq!(links(d).unwrap(), set(&["m/sub", "z"]), "version {v}");
        // Entries added, replaced (a file made a gitlink) and deleted in the split
        // index, over an unchanged shared index.
        git(
            d,
            &[
                "-c",
                "splitIndex.maxPercentChange=100",
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},new"),
            ],
        );
        git(
            d,
            &[
                "-c",
                "splitIndex.maxPercentChange=100",
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},a"),
            ],
        );
        git(
            d,
            &[
                "-c",
                "splitIndex.maxPercentChange=100",
                "update-index",
                "--cacheinfo",
                &format!("160000,{sha},m/sub"),
            ],
        );
        git(
            d,
            &[
                "-c",
                "splitIndex.maxPercentChange=100",
                "update-index",
                "--force-remove",
                "z",
            ],
        );
        // The split index holds replacements and deletions.
        let data = std::fs::read(d.join(".git/index")).unwrap();
        let own = parse(&data, 20).unwrap();
        let link = own.link.unwrap();
        let base =
            std::fs::read(d.join(format!(".git/sharedindex.{}", hex::encode(&link.base)))).unwrap();
        let (delete, replace) =
            bitmaps(&link.bitmaps, parse(&base, 20).unwrap().entries.len()).unwrap();
        assert!(
            !delete.is_empty() && !replace.is_empty(),
            "{delete:?} {replace:?}"
        );
        assert_eq!(
            links(d).unwrap(),
            set(&["a", "m/sub", "new"]),
            "version {v}"
        );
        // And back.
        git(
            d,
            &[
                "-c",
                "splitIndex.maxPercentChange=100",
                "update-index",
                "--force-remove",
                "new",
                "a",
            ],
        );
        git(
            d,
            &[
                "-c",
                "splitIndex.maxPercentChange=100",
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},z"),
            ],
        );
        assert_eq!(links(d).unwrap(), set(&["m/sub", "z"]), "version {v}");
        git(d, &["update-index", "--no-split-index"]);
        assert_eq!(links(d).unwrap(), set(&["m/sub", "z"]), "version {v}");
    }
    // A missing shared index is an error.
    git(
        d,
        &[
            "-c",
            "core.splitIndex=true",
            "update-index",
            "--split-index",
        ],
    );
    let data = std::fs::read(d.join(".git/index")).unwrap();
    assert!(gitlinks(&data, 20, |_| Ok(None)).is_err());
}

#[test]
fn sha256_indexes_are_read_with_32_byte_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "--object-format=sha256"]);
    let sha = "0123456789abcdef".repeat(4);
    git(
        d,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sha},s"),
        ],
    );
    git(
        d,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{sha},f"),
        ],
    );
    for v in ["2", "4"] {
        git(d, &["update-index", "--index-version", v]);
        let data = std::fs::read(d.join(".git/index")).unwrap();
        assert_eq!(gitlinks(&data, 32, |_| Ok(None)).unwrap(), set(&["s"]));
        assert!(gitlinks(&data, 20, |_| Ok(None)).is_err());
    }
}

#[test]
fn the_wrong_hash_size_and_garbage_are_errors() {
    let dir = repo();
    let data = std::fs::read(dir.path().join(".git/index")).unwrap();
    assert!(gitlinks(&data, 32, |_| Ok(None)).is_err());
    for bad in [&b""[..], b"DIRC", b"DIRC\0\0\0\x05\0\0\0\0", &[0xff; 64]] {
        let mut b = bad.to_vec();
        b.extend_from_slice(&[0; 20]);
        assert!(gitlinks(&b, 20, |_| Ok(None)).is_err(), "{bad:?}");
    }
}

/// Every truncation, and every byte of the header and first entries flipped, of real
/// indexes of each version (split too) returns, never panics.
#[test]
fn hostile_indexes_are_errors_not_panics() {
    let dir = repo();
    let d = dir.path();
    let mut samples = Vec::new();
    for v in ["2", "3", "4"] {
        git(d, &["update-index", "--index-version", v]);
        samples.push(std::fs::read(d.join(".git/index")).unwrap());
    }
    git(d, &["update-index", "--split-index"]);
    git(
        d,
        &[
            "-c",
            "splitIndex.maxPercentChange=100",
            "update-index",
            "--force-remove",
            "z",
        ],
    );
    let split = std::fs::read(d.join(".git/index")).unwrap();
    let shared: Vec<u8> = std::fs::read_dir(d.join(".git"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("sharedindex."))
        .map(|e| std::fs::read(e.path()).unwrap())
        .unwrap();
    assert_eq!(
        gitlinks(&split, 20, |_| Ok(Some(shared.clone()))).unwrap(),
        set(&["m/sub"])
    );
    // Cut short within their first entries (at least eight, over 200 bytes), the
    // indexes of each version cannot be read (the split index may hold no entry).
    for data in &samples {
        for n in 0..200 {
            let mut b = data[..n].to_vec();
            b.extend_from_slice(&[0; 20]);
            assert!(gitlinks(&b, 20, |_| Ok(Some(shared.clone()))).is_err());
        }
    }
    samples.push(split.clone());
    for data in &samples {
        for n in 0..data.len() {
            let _ = gitlinks(&data[..n], 20, |_| Ok(Some(shared.clone())));
            let mut b = data.clone();
            b[n] ^= 0xff;
            let _ = gitlinks(&b, 20, |_| Ok(Some(shared.clone())));
            let mut b = data.clone();
            b[n] = 0x80;
            let _ = gitlinks(&b, 20, |_| Ok(Some(shared.clone())));
        }
    }
    // Random writes of random bytes (a fixed-seed generator: reproducible).
    let mut seed: u64 = 0x5eed;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    for data in &samples {
        for _ in 0..2000 {
            let mut b = data.clone();
            for _ in 0..1 + next() % 8 {
                let at = next() % b.len();
                b[at] = next() as u8;
            }
            let _ = gitlinks(&b, 20, |_| Ok(Some(shared.clone())));
            let _ = gitlinks(&b, 32, |_| Ok(Some(shared.clone())));
        }
    }
    // The split index over a corrupted or truncated shared index.
    for n in 0..shared.len() {
        let _ = gitlinks(&split, 20, |_| Ok(Some(shared[..n].to_vec())));
        let mut b = shared.clone();
        b[n] ^= 0x55;
        let _ = gitlinks(&split, 20, |_| Ok(Some(b)));
    }
}

#[test]
fn bitmaps_are_bounded() {
    // One run-length word claiming 2^32-1 words of ones.
    let mut b = Vec::new();
    b.extend_from_slice(&8u32.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    b.extend_from_slice(&(0xffff_ffffu64 << 1 | 1).to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    let mut c = Cursor { data: &b, pos: 0 };
    assert!(ewah(&mut c, 10).is_err());
    // One literal word with bits 0 and 3.
    let mut b = Vec::new();
    b.extend_from_slice(&4u32.to_be_bytes());
    b.extend_from_slice(&2u32.to_be_bytes());
    b.extend_from_slice(&(1u64 << 33).to_be_bytes());
    b.extend_from_slice(&0b1001u64.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    let mut c = Cursor { data: &b, pos: 0 };
    assert_eq!(ewah(&mut c, 10).unwrap(), [0, 3]);
    let mut c = Cursor { data: &b, pos: 0 };
    assert!(ewah(&mut c, 3).is_err());
    // A literal count beyond the words.
    b[8..16].copy_from_slice(&(5u64 << 33).to_be_bytes());
    let mut c = Cursor { data: &b, pos: 0 };
    assert!(ewah(&mut c, 10).is_err());
}

/// An index that git would read with threads from an offset table (EOIE, IEOT), where a
/// sequential reader does not look, or a sparse index: not read, so not merged.
#[test]
fn offset_tables_and_sparse_indexes_are_not_read() {
    let dir = repo();
    let d = dir.path();
    assert!(links(d).is_ok());
    git(
        d,
        &[
            "-c",
            "index.threads=2",
            "-c",
            "index.recordEndOfIndexEntries=true",
            "-c",
            "index.recordOffsetTable=true",
            "update-index",
            "--index-version",
            "3",
        ],
    );
    let data = std::fs::read(d.join(".git/index")).unwrap();
    assert!(data.windows(4).any(|w| w == b"EOIE"), "git wrote no EOIE");
    assert!(links(d).is_err());
}

/// A version 4 index whose every path copies the previous one and adds a byte: memory and
/// copying quadratic in the file's size unless bounded; it is refused quickly.
#[test]
fn growing_version_4_paths_are_bounded() {
    let mut data = b"DIRC\0\0\0\x04".to_vec();
    let count: u32 = 200_000;
    data.extend_from_slice(&count.to_be_bytes());
    for _ in 0..count {
        data.extend_from_slice(&[0; 24]);
        data.extend_from_slice(&0o100644u32.to_be_bytes());
        data.extend_from_slice(&[0; 12]);
        data.extend_from_slice(&[0; 20]);
        // Length "long, count to NUL", strip nothing, add one byte.
        data.extend_from_slice(&0x0fffu16.to_be_bytes());
        data.extend_from_slice(&[0, b'a', 0]);
    }
    data.extend_from_slice(&[0; 20]);
    // An unbounded reader would ask for ~20 GB here.
    assert!(gitlinks(&data, 20, |_| Ok(None)).is_err());
}

#[test]
fn paths_git_refuses_are_refused() {
    const FILE: u32 = 0o100644;
    for ok in [
        "a",
        "a/b/c",
        ".gitignore",
        ".github/x",
        "x.git",
        "a/.gitx",
        "git~2",
        "a\\b",
        ".gitmodules",
    ] {
        assert!(checkout_safe(ok.as_bytes(), FILE), "{ok}");
    }
    for bad in [
        "/abs",
        "a//b",
        "a/",
        ".",
        "./a",
        "..",
        "../x",
        "a/../../x",
        ".git",
        ".git/hooks/post-checkout",
        "a/.git/config",
        ".GIT/config",
        ".Git/x",
        ".git./x",
        ".git ./x",
        ".git::$INDEX_ALLOCATION/x",
        "GIT~1/config",
        // NTFS takes `\` as a separator too (Git for Windows on the same repository).
        ".git\\hooks\\post-checkout",
        "a\\.git\\config",
        "x\\git~1\\config",
        "a/b\\.GIT. \\x",
        // HFS+ ignores zero-width and direction code points.
        ".g\u{200c}it/config",
        "\u{feff}.GIT/hooks/x",
        "a/.gi\u{202e}t",
    ] {
        assert!(!checkout_safe(bad.as_bytes(), FILE), "{bad}");
    }
    const LINK: u32 = 0o120000;
    for bad in [
        ".gitmodules",
        "a/.gitmodules",
        ".GITMODULES",
        ".gitmodules. ",
        ".gitmodules:x",
        "GITMOD~1",
        "gitmod~4",
        "gi7eba~1",
        "gi7eb~12",
        "GI~12345",
        "a\\.gitmodules",
        ".git\u{200d}modules",
    ] {
        assert!(!checkout_safe(bad.as_bytes(), LINK), "{bad}");
        assert!(
            checkout_safe(bad.as_bytes(), FILE) || bad.contains('\\'),
            "{bad}"
        );
    }
    for ok in [
        ".gitmodules/x",
        "gitmod~5",
        "gi7eba~0",
        "gi7ebax~1",
        "gitmodules",
        "a~1b",
    ] {
        assert!(checkout_safe(ok.as_bytes(), LINK), "{ok}");
    }
}

/// An entry renamed in place in a real index (same length, so the layout holds) to each
/// refused path: the reader refuses the index with [`UNSAFE_PATH`], in every version.
#[test]
fn an_index_with_a_refused_path_is_refused() {
    let dir = repo();
    let d = dir.path();
    std::fs::write(d.join("qqqq"), "x").unwrap();
    git(d, &["add", "qqqq"]);
    for v in ["2", "3", "4"] {
        git(d, &["update-index", "--index-version", v]);
        let data = std::fs::read(d.join(".git/index")).unwrap();
        assert!(links(d).is_ok(), "version {v}");
        for bad in ["../a", ".git", "/abc", "a//b"] {
            let at = data
                .windows(4)
                .position(|w| w == b"qqqq")
                .expect("the entry's path");
            let mut hostile = data.clone();
            hostile[at..at + 4].copy_from_slice(bad.as_bytes());
            let r = gitlinks(&hostile, 20, |_| Ok(None));
            assert_eq!(r, Err(UNSAFE_PATH), "version {v}: {bad}");
        }
    }
}

/// A split index's replacement entry keeps its base entry's path with a mode of its own:
/// a `.gitmodules` turned into a symlink that way is refused like one written so.
#[test]
fn a_split_index_replacement_is_checked_with_its_own_mode() {
    let dir = repo();
    let d = dir.path();
    std::fs::write(d.join(".gitmodules"), "").unwrap();
    git(d, &["add", ".gitmodules"]);
    let split = ["-c", "splitIndex.maxPercentChange=100"];
    git(
        d,
        &[&split[..], &["update-index", "--split-index"]].concat(),
    );
    std::fs::write(d.join(".gitmodules"), "changed").unwrap();
    git(d, &[&split[..], &["add", ".gitmodules"]].concat());
    assert!(links(d).is_ok());
    let git_dir = d.join(".git");
    let data = std::fs::read(git_dir.join("index")).unwrap();
    // The split file's entries (version 2): replacements have no path and come in the
    // base's order, where `.gitmodules` sorts first.
    let count = u32::from_be_bytes(data[8..12].try_into().unwrap());
    let (mut pos, mut replacement) = (12, None);
    for _ in 0..count {
        let len = usize::from(u16::from_be_bytes([data[pos + 60], data[pos + 61]]) & 0xfff);
        if len == 0 && replacement.is_none() {
            replacement = Some(pos + 24);
        }
        pos += (62 + len + 8) & !7;
    }
    let at = replacement.expect("a replacement entry");
    assert_eq!(data[at..at + 4], 0o100644u32.to_be_bytes());
    let mut hostile = data.clone();
    hostile[at..at + 4].copy_from_slice(&0o120000u32.to_be_bytes());
    let r = gitlinks(&hostile, 20, |hex| {
        Ok(std::fs::read(git_dir.join(format!("sharedindex.{hex}"))).ok())
    });
    assert_eq!(r, Err(UNSAFE_PATH));
}
