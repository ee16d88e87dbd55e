//! Host git for the `.git` tests: real git run as a user runs it in a repository, and a
//! host repository with a directory the sandbox cannot see, where a command the program
//! planted would leave its marker if the host's git ran it.

use std::path::{Path, PathBuf};

use super::var_tempdir;

/// Runs host git in `dir` (identity set on the command line, no `GIT_DIR`, `GIT_WORK_TREE`
/// or `GIT_CEILING_DIRECTORIES` from the test's environment), returns the output.
pub fn git_out(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.email=host@example.invalid",
            "-c",
            "user.name=host",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_CEILING_DIRECTORIES")
        .output()
        .expect("git")
}

/// Runs host git in `dir`, asserts success, returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_out(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A host repository under `/var/tmp` with one commit (`README`, branch `main`), and a
/// host-only directory for markers.
pub struct Repo {
    _dirs: Vec<tempfile::TempDir>,
    /// The repository's work tree, the sandbox's workspace.
    pub ws: PathBuf,
    /// Not visible inside: a planted command that runs on the host leaves its marker here.
    pub host: PathBuf,
}

impl Repo {
    pub fn new() -> Repo {
        let (w, ws) = var_tempdir();
        let (h, host) = var_tempdir();
        git(&ws, &["init", "-q", "-b", "main"]);
        std::fs::write(ws.join("README"), "hello\n").unwrap();
        git(&ws, &["add", "README"]);
        git(&ws, &["commit", "-qm", "host"]);
        Repo {
            _dirs: vec![w, h],
            ws,
            host,
        }
    }

    /// Where a planted command that ran on the host leaves its mark.
    pub fn marker(&self) -> PathBuf {
        self.host.join("pwned")
    }

    pub fn git_dir(&self) -> PathBuf {
        self.ws.join(".git")
    }

    pub fn assert_no_marker(&self, what: &str) {
        assert!(
            !self.marker().exists(),
            "{what}: the host ran a command the program planted"
        );
    }
}
