//! Warm sessions: many commands in one live sandbox ([`stockade::Session`]).
//!
//! Every isolation claim is shown from inside: a command tries the escape against another
//! command (or the session's init) and the test asserts the errno, and that the allowed
//! thing (the shared workspace, the shared /tmp) still works. Both layers, as root and as
//! uid 65534 (`session_as_nobody`).
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use common::{LAYERS, sandbox_on};
use stockade::{Layer, Session, Stdio};


/// A workspace outside /tmp.
fn workspace() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("stockade-session-test-")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp")
}

/// A session on `layer` over `ws`, or `None` (after a SKIP line) when this host cannot
/// run one (no Landlock scopes).
fn session(ws: &Path, layer: Layer, f: impl FnOnce(&mut stockade::Policy)) -> Option<Session> {
    let sb = sandbox_on(ws, layer, f);
    match sb.session() {
        Ok(s) => Some(s),
        Err(stockade::Error::Spawn(e)) if e.errno().map(|e| e as i32) == Some(libc::EOPNOTSUPP) => {
            common::skip("session", &format!("{layer:?}: {e}"));
            None
        }
        Err(e) => panic!("{layer:?}: session: {e}"),
    }
}

fn sh(s: &Session, script: &str) -> std::process::Output {
    s.command("sh").args(["-c", script]).output().unwrap()
}

fn sh_ok(s: &Session, script: &str) -> String {
    let out = sh(s, script);
    assert!(
        out.status.success(),
        "{script}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn commands_share_the_workspace_and_tmp() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        sh_ok(&s, "echo one > w.txt; echo two > \"${TMPDIR:-/tmp}/t.txt\"");
        let out = sh_ok(&s, "cat w.txt \"${TMPDIR:-/tmp}/t.txt\"");
        assert_eq!(out, "one\ntwo\n", "{layer:?}");
        assert_eq!(std::fs::read_to_string(ws.path().join("w.txt")).unwrap(), "one\n");
        s.close().unwrap();
    }
}

#[test]
fn exit_statuses_are_exact() {
    for layer in LAYERS {
        let ws = workspace();
        let Some(s) = session(ws.path(), layer, |_| {}) else {
            continue;
        };
        for code in [0, 1, 7, 255] {
            let st = s.command("sh").args(["-c", &format!("exit {code}")]).status().unwrap();
            assert_eq!(st.code(), Some(code), "{layer:?}");
        }
        for sig in [libc::SIGTERM, libc::SIGKILL, libc::SIGSEGV] {
            let st = sh(&s, &format!("kill -{sig} $$")).status;
            assert_eq!(st.signal(), Some(sig), "{layer:?}: {st:?}");
        }
        let st = sh(&s, "kill -ABRT $$").status;
        assert_eq!(st.signal(), Some(libc::SIGABRT), "{layer:?}");
        let e = s.command("no-such-program-here").status().unwrap_err();
        assert!(matches!(e, stockade::Error::Spawn(stockade::SpawnError::NotFound { .. })), "{e}");
        let e = s.command("true").current_dir("nope").status().unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        // The session still serves.
        assert!(s.command("true").status().unwrap().success());
    }
}
