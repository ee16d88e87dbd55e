//! USER and LOGNAME inside when the caller's environment has none (services, cron,
//! `env -i`): the passwd name of the uid the program runs as; the caller's values when it
//! has them. Proven as root and, in the re-run, as uid 65534.
// Spawns through Linux-only paths (namespaces, pidfds, /proc); macOS code is
// type-checked with `--target x86_64-apple-darwin` and unit-tested in the library.
#![cfg(target_os = "linux")]

mod common;

use std::process::Command as StdCommand;

use common::{Feature, tempdir};
use stockade::{Policy, Sandbox};

const PRINT: &str = "echo \"USER=${USER-unset} LOGNAME=${LOGNAME-unset}\"";

/// `USER=<name> LOGNAME=<name>` for this process's effective uid, as `id -un` says.
fn expected() -> String {
    let out = StdCommand::new("id").arg("-un").output().expect("id -un");
    let name = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(!name.is_empty());
    format!("USER={name} LOGNAME={name}\n")
}

#[test]
fn cli_under_env_i_gets_user_and_logname_from_passwd() {
    require!(Feature::UserNs);
    let ws = tempdir();
    let run = |env: &[(&str, &str)]| {
        let out = StdCommand::new(common::stockade_exe())
            .env_clear()
            .envs(env.iter().copied())
            .arg("run")
            .arg("--workspace")
            .arg(ws.path())
            .args(["--", "/bin/sh", "-c", PRINT])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&[]), expected());
    // The caller's own values are kept.
    assert_eq!(
        run(&[("USER", "alice"), ("LOGNAME", "bob")]),
        "USER=alice LOGNAME=bob\n"
    );
}

#[test]
fn library_with_an_empty_caller_environment() {
    require!(Feature::UserNs);
    let ws = tempdir();
    // The host's environment cannot be emptied in-process: run this binary's inner test
    // with an empty environment (only the marker).
    let out = StdCommand::new(std::env::current_exe().unwrap())
        .env_clear()
        .env("STOCKADE_TEST_EMPTY_ENV", ws.path())
        .args([
            "--exact",
            "empty_env_inner",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .output()
        .unwrap();
    let text = common::output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}

/// The inside half of `library_with_an_empty_caller_environment`.
#[test]
fn empty_env_inner() {
    let Some(ws) = std::env::var_os("STOCKADE_TEST_EMPTY_ENV") else {
        return;
    };
    assert_eq!(std::env::var_os("USER"), None);
    assert_eq!(std::env::var_os("LOGNAME"), None);
    let want = expected();
    for layer in [stockade::Layer::Full, stockade::Layer::Landlock] {
        let mut p = Policy::with_workspace(&ws);
        p.layer = Some(layer);
        let sb = Sandbox::new(p).unwrap();
        let out = sb.command("/bin/sh").args(["-c", PRINT]).output().unwrap();
        assert!(out.status.success(), "{layer}: {out:?}");
        assert_eq!(String::from_utf8(out.stdout).unwrap(), want, "{layer}");
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some()
        || std::env::var_os("STOCKADE_TEST_EMPTY_ENV").is_some()
    {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
