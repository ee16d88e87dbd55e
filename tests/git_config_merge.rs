//! `.git/config` on the full layer: `git config user.name`, `git remote add`, `git branch
//! --set-upstream-to` made in one command are there in the next, and on the host; every
//! other key, and every value the allowlist's rules refuse, is dropped and reported
//! (`Child::git_config`, `GitDropReason::ConfigKeys`), and a config git's grammar does not
//! plainly read is dropped whole (`GitDropReason::UnreadableConfig`).
//!
//! Fixtures sit under `/var/tmp` (outside the sandbox's private `/tmp`). Every test runs
//! as the current user; as root, `zz_all_tests_pass_as_uid_65534` re-runs the file as uid
//! 65534.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::path::Path;

use common::{Feature, var_tempdir};
use stockade::{
    GitConfigChange, GitConfigOutcome, GitDrop, GitDropReason, Layer, Policy, Sandbox, Stdio,
};

/// Runs host git in `dir` (no identity of its own: `user.*` must come from the repository).
fn git_out(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_CEILING_DIRECTORIES")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git")
}

/// Runs host git in `dir`, asserts success, returns stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_out(dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A host repository in `ws` with one commit.
fn init_repo(ws: &Path) {
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a"), "real\n").unwrap();
    git(ws, &["add", "a"]);
    git(
        ws,
        &[
            "-c",
            "user.name=host",
            "-c",
            "user.email=host@example.invalid",
            "commit",
            "-qm",
            "host",
        ],
    );
}

fn full(ws: &Path) -> Sandbox {
    let mut p = Policy::with_workspace(ws);
    p.layer = Some(Layer::Full);
    p.fallback = stockade::Fallback::Refuse;
    Sandbox::new(p).expect("sandbox")
}

/// What one run left: its output, the drops, the config changes.
struct Run {
    out: String,
    drops: Vec<GitDrop>,
    config: Vec<GitConfigChange>,
}

impl Run {
    fn outcome(&self, name: &str) -> Option<GitConfigOutcome> {
        self.config
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.outcome)
    }
}

/// Runs `script` inside (errors on stdout, no global config), waits, asserts success.
fn run(sb: &Sandbox, script: &str) -> Run {
    let mut child = sb
        .command("sh")
        .arg("-c")
        .arg(format!(
            "exec 2>&1; export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1\n{script}"
        ))
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
    Run {
        out,
        drops: child.git_dropped().to_vec(),
        config: child.git_config().to_vec(),
    }
}

#[test]
fn user_name_set_in_one_command_is_there_in_the_next() {
    require!(Feature::UserNs);
    let (_d, ws) = var_tempdir();
    init_repo(&ws);
    let sb = full(&ws);
    let r = run(
        &sb,
        "set -e; git config user.name 'Agent Smith'; git config user.email agent@example.com",
    );
    assert_eq!(
        r.outcome("user.name"),
        Some(GitConfigOutcome::Merged),
        "{:?}",
        r.config
    );
    assert_eq!(r.outcome("user.email"), Some(GitConfigOutcome::Merged));
    assert!(r.drops.is_empty(), "{:?}", r.drops);
    let r = run(
        &sb,
        "set -e; git config user.name; git config user.email; git commit -q --allow-empty -m inside",
    );
    assert_eq!(r.out, "Agent Smith\nagent@example.com\n");
    assert_eq!(git(&ws, &["config", "user.name"]), "Agent Smith\n");
    assert_eq!(
        git(&ws, &["log", "-1", "--format=%an <%ae>"]),
        "Agent Smith <agent@example.com>\n"
    );
    // The host's own keys are where they were.
    assert_eq!(git(&ws, &["config", "core.bare"]), "false\n");
}

#[test]
fn a_remote_added_inside_survives_and_its_removal_too() {
    require!(Feature::UserNs);
    let (_d, ws) = var_tempdir();
    init_repo(&ws);
    let sb = full(&ws);
    let r = run(
        &sb,
        "set -e; git remote add origin https://example.com/r.git\n\
         git remote add gh git@github.com:owner/repo.git\n\
         git remote set-url --push origin ssh://git@example.com/r.git\n\
         git config branch.main.remote origin\n\
         git config branch.main.merge refs/heads/main\n",
    );
    assert!(r.drops.is_empty(), "{:?}", r.drops);
    for name in [
        "remote.origin.url",
        "remote.origin.fetch",
        "remote.origin.pushurl",
        "remote.gh.url",
        "remote.gh.fetch",
        "branch.main.remote",
        "branch.main.merge",
    ] {
        assert_eq!(
            r.outcome(name),
            Some(GitConfigOutcome::Merged),
            "{name}: {:?}",
            r.config
        );
    }
    let r = run(
        &sb,
        "set -e; git remote -v; git config branch.main.remote; git config branch.main.merge",
    );
    assert_eq!(
        r.out,
        "gh\tgit@github.com:owner/repo.git (fetch)\ngh\tgit@github.com:owner/repo.git (push)\n\
         origin\thttps://example.com/r.git (fetch)\norigin\tssh://git@example.com/r.git (push)\n\
         origin\nrefs/heads/main\n"
    );
    assert_eq!(git(&ws, &["remote"]), "gh\norigin\n");
    assert_eq!(
        git(&ws, &["config", "remote.origin.fetch"]),
        "+refs/heads/*:refs/remotes/origin/*\n"
    );
    // `git remote remove` inside removes it on the host.
    let r = run(
        &sb,
        "set -e; git remote remove gh; git remote rename origin up",
    );
    assert!(r.drops.is_empty(), "{:?}", r.drops);
    assert_eq!(
        git(&ws, &["remote", "-v"]),
        "up\thttps://example.com/r.git (fetch)\nup\tssh://git@example.com/r.git (push)\n"
    );
    assert_eq!(git(&ws, &["config", "branch.main.remote"]), "up\n");
}

#[test]
fn a_hostile_remote_is_dropped_and_reported() {
    require!(Feature::UserNs);
    let (_d, ws) = var_tempdir();
    init_repo(&ws);
    let before = std::fs::read(ws.join(".git/config")).unwrap();
    let sb = full(&ws);
    let r = run(
        &sb,
        "set -e; git remote add evil 'ext::sh -c touch% /tmp/pwned'\n\
         git remote add local /etc\n\
         git remote add file file:///etc\n\
         git remote add dash -- '-oProxyCommand=touch /tmp/pwned'\n\
         git remote add sshdash 'ssh://-oProxyCommand=x/r'\n\
         git config remote.fd.url fd::17\n\
         git config remote.up.url https://example.com/r\n\
         git config remote.up.fetch '+refs/heads/*:refs/heads/*'\n\
         git remote | wc -l\n",
    );
    assert_eq!(r.out.trim(), "7", "inside, git has them all");
    for name in [
        "remote.evil.url",
        "remote.evil.fetch",
        "remote.local.url",
        "remote.file.url",
        "remote.dash.url",
        "remote.sshdash.url",
        "remote.fd.url",
        "remote.up.fetch",
    ] {
        assert_eq!(
            r.outcome(name),
            Some(GitConfigOutcome::InvalidValue),
            "{name}: {:?}",
            r.config
        );
    }
    assert_eq!(r.outcome("remote.up.url"), Some(GitConfigOutcome::Merged));
    let config = ws.join(".git/config");
    let refused = r
        .config
        .iter()
        .filter(|c| c.outcome != GitConfigOutcome::Merged)
        .count();
    assert!(
        r.drops
            .iter()
            .any(|d| d.path == config && d.reason == GitDropReason::ConfigKeys(refused)),
        "{:?}",
        r.drops
    );
    assert_eq!(
        git(&ws, &["remote", "-v"]),
        "up\thttps://example.com/r (fetch)\nup\thttps://example.com/r (push)\n"
    );
    let now = std::fs::read(&config).unwrap();
    assert!(now.starts_with(&before), "the host's bytes are kept");
    assert_eq!(
        String::from_utf8(now[before.len()..].to_vec()).unwrap(),
        "[remote \"up\"]\n\turl = https://example.com/r\n"
    );
}

#[test]
fn keys_that_run_programs_stay_dropped() {
    require!(Feature::UserNs);
    let (_d, ws) = var_tempdir();
    init_repo(&ws);
    let before = std::fs::read(ws.join(".git/config")).unwrap();
    let marker = ws.with_file_name(format!(
        "{}-marker",
        ws.file_name().unwrap().to_string_lossy()
    ));
    let m = marker.display();
    let sb = full(&ws);
    let r = run(
        &sb,
        &format!(
            "set -e; git config core.fsmonitor 'touch {m}'\n\
             git config core.hooksPath /tmp\n\
             git config include.path /tmp/evil\n\
             git config credential.helper '!touch {m}'\n\
             git config alias.st '!touch {m}'\n\
             git config core.sshCommand 'touch {m}'\n\
             git config user.signingkey /tmp/key\n\
             git config remote.up.url https://example.com/r\n\
             git config remote.up.uploadpack 'touch {m}'\n"
        ),
    );
    for name in [
        "core.fsmonitor",
        "core.hookspath",
        "include.path",
        "credential.helper",
        "alias.st",
        "core.sshcommand",
        "user.signingkey",
        "remote.up.uploadpack",
    ] {
        assert_eq!(
            r.outcome(name),
            Some(GitConfigOutcome::NotAllowed),
            "{name}: {:?}",
            r.config
        );
    }
    let now = std::fs::read(ws.join(".git/config")).unwrap();
    assert_eq!(
        String::from_utf8(now).unwrap(),
        format!(
            "{}[remote \"up\"]\n\turl = https://example.com/r\n",
            String::from_utf8(before).unwrap()
        )
    );
    git(&ws, &["status"]);
    let _ = git_out(&ws, &["st"]);
    assert!(
        !marker.exists(),
        "host git ran a command the program configured"
    );
}

#[test]
fn a_hostile_config_is_dropped_whole_and_nothing_crashes() {
    require!(Feature::UserNs);
    let (_d, ws) = var_tempdir();
    init_repo(&ws);
    let before = std::fs::read(ws.join(".git/config")).unwrap();
    let sb = full(&ws);
    let config = ws.join(".git/config");
    for (what, script) in [
        // Over the bound, with a valid user.name first.
        (
            "huge",
            "git config user.name big; head -c 2000000 /dev/zero | tr '\\0' '#' >> .git/config",
        ),
        (
            "binary",
            "git config user.name bin; printf '[user]\\n\\tname = a\\001\\000b\\n' >> .git/config",
        ),
        // Git itself would read these; the merge does not take them.
        (
            "legacy header",
            "printf '[remote.evil]\\n\\turl = https://example.com/r\\n' >> .git/config",
        ),
        (
            "bare CR",
            "printf '[user]\\n\\tname = a\\rb\\n' >> .git/config",
        ),
        // Quoting git refuses.
        (
            "open quote",
            "git config user.name q; printf '[user]\\n\\tname = \"a\\n' >> .git/config",
        ),
        (
            "bad escape",
            "git config user.name q; printf '[user]\\n\\tname = a\\\\qb\\n' >> .git/config",
        ),
        ("subsection", "printf '[remote \"a\\n\"]\\n' >> .git/config"),
    ] {
        let r = run(&sb, script);
        assert!(
            r.drops
                .iter()
                .any(|d| d.path == config && d.reason == GitDropReason::UnreadableConfig),
            "{what}: {:?}",
            r.drops
        );
        assert!(r.config.is_empty(), "{what}: {:?}", r.config);
        assert_eq!(std::fs::read(&config).unwrap(), before, "{what}");
        assert!(
            git_out(&ws, &["config", "user.name"]).stdout.is_empty(),
            "{what}"
        );
    }
    // Deeply weird but valid quoting is read as git reads it, and checked as any value.
    let r = run(
        &sb,
        "printf '[user]\\n\\tname = \"  A \\\\\"B\\\\\" \"\\\\\\n  C ; comment\\n' >> .git/config; git config user.name",
    );
    assert_eq!(r.out, "  A \"B\"   C\n");
    // Blank at its start: refused by user.name's rule.
    assert_eq!(
        r.outcome("user.name"),
        Some(GitConfigOutcome::InvalidValue),
        "{:?}",
        r.config
    );
    assert_eq!(std::fs::read(&config).unwrap(), before);
}

/// Layer 2 has no `.git` layer: the program wrote the host's config itself, and after the
/// run the snapshot is put back with the same allowlisted changes merged in.
#[test]
fn layer_two_keeps_the_allowlisted_changes_and_puts_back_the_rest() {
    let (_d, ws) = var_tempdir();
    init_repo(&ws);
    let before = std::fs::read(ws.join(".git/config")).unwrap();
    let mut p = Policy::with_workspace(&ws);
    p.layer = Some(Layer::Landlock);
    p.fallback = stockade::Fallback::Refuse;
    let sb = Sandbox::new(p).expect("sandbox");
    let r = run(
        &sb,
        "set -e; git config user.name 'Layer Two'\n\
         git remote add origin https://example.com/r.git\n\
         git remote add evil 'ext::sh -c x'\n\
         git config core.fsmonitor 'touch /tmp/x'\n",
    );
    assert_eq!(
        r.outcome("user.name"),
        Some(GitConfigOutcome::Merged),
        "{:?}",
        r.config
    );
    assert_eq!(
        r.outcome("remote.origin.url"),
        Some(GitConfigOutcome::Merged)
    );
    assert_eq!(
        r.outcome("remote.evil.url"),
        Some(GitConfigOutcome::InvalidValue)
    );
    assert_eq!(
        r.outcome("core.fsmonitor"),
        Some(GitConfigOutcome::NotAllowed)
    );
    let config = ws.join(".git/config");
    assert!(
        r.drops
            .iter()
            .any(|d| d.path == config && d.reason == GitDropReason::Restored),
        "{:?}",
        r.drops
    );
    let now = String::from_utf8(std::fs::read(&config).unwrap()).unwrap();
    assert_eq!(
        now,
        format!(
            "{}[user]\n\tname = Layer Two\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
            String::from_utf8(before).unwrap()
        )
    );
    let r = run(&sb, "git config user.name; git remote");
    assert_eq!(r.out, "Layer Two\norigin\n");
    assert!(
        r.config.is_empty() && r.drops.is_empty(),
        "{:?} {:?}",
        r.config,
        r.drops
    );
}

/// Whatever the merge's parser reads, git reads the same: each entry's name and value, in
/// order (git's `config --list --null`); a config git refuses, the parser refuses too
/// (it refuses more: a key before any section, a legacy header, control bytes).
#[test]
fn the_parser_reads_every_config_as_git_does() {
    let (_d, dir) = var_tempdir();
    let file = dir.join("config");
    let cases: &[&[u8]] = &[
        b"[user]\n\tname = A B\n",
        b"[User]\nNAME=  A B  # c\n",
        b"[user]\nname = \"A # B \" ; c\n",
        b"[user]\nname = a\\\n b\n",
        b"[user]\nname = a\\tb\\\\\\\"\\n\n",
        b"[core]\nbare\n[a]b=c\n",
        b"[remote \"o\\\"r\\\\x\\y\"]\nurl = u\n",
        b"[remote  \t\"Or\"] url = u\r\n\tfetch = f # x\r\n",
        b"\xef\xbb\xbf[a]\nb = c\n",
        b"; c\n# c\n  [a]  # c\n\tb = c",
        b"[a]\nb = x;y\n[a]\nb = \n[A]\nB = \"\"\"\"\n",
        b"[a]\nb = \"x\" y \"z\" \n",
        b"[a]\nb = c\\",
        b"[a]\nb-1 = \"\\\n\"\n",
        b"[a]\nb = \"x\n",
        b"[a]\nb = \\q\n",
        b"[a \"b\"x]\n",
        b"[a \"b\n\"]\n",
        b"[]\n",
        b"b = c\n",
        b"[a]\n1b = c\n",
        b"[a]\nb c\n",
    ];
    for &text in cases {
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new("git")
            .args(["config", "--file"])
            .arg(&file)
            .args(["--null", "--list"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git");
        let ours = stockade::git_fuzzing::config_entries(text);
        let shown = String::from_utf8_lossy(text);
        // Refusing more than git does only loses a change.
        let Ok(ours) = ours else {
            continue;
        };
        assert!(
            out.status.success(),
            "git refuses {shown:?}, the merge reads it"
        );
        let git: Vec<(Vec<u8>, Option<Vec<u8>>)> = out
            .stdout
            .split(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .map(|e| match e.iter().position(|&b| b == b'\n') {
                Some(i) => (e[..i].to_vec(), Some(e[i + 1..].to_vec())),
                None => (e.to_vec(), None),
            })
            .collect();
        assert_eq!(ours, git, "{shown:?}");
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
