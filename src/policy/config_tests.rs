//! Config errors: every problem in the TOML text names its key, line and column, for a
//! policy parsed alone and for one nested in a host's own config.

use serde::Deserialize;

use super::*;
use crate::PolicyError;

/// The key, line and column of a `PolicyError::Toml`, or a panic naming what came instead.
#[track_caller]
fn located(text: &str) -> (String, usize, usize, String) {
    match Policy::from_toml(text) {
        Err(PolicyError::Toml {
            key: Some(key),
            line: Some(line),
            column: Some(column),
            message,
        }) => (key, line, column, message),
        other => panic!("{text:?}: expected a located Toml error, got {other:?}"),
    }
}

#[test]
fn unknown_key_names_key_line_and_column() {
    let text = "network = \"none\"\nwritable_path = [\"/x\"]\n";
    let (key, line, column, message) = located(text);
    assert_eq!((key.as_str(), line, column), ("writable_path", 2, 1));
    assert!(
        message.contains("unknown field `writable_path`"),
        "{message}"
    );
    let shown = Policy::from_toml(text).unwrap_err().to_string();
    assert!(
        shown.starts_with("invalid sandbox config at line 2, column 1 (key `writable_path`): "),
        "{shown}"
    );
}

#[test]
fn unknown_table_names_its_header() {
    let (key, line, column, _) = located("network = \"none\"\n\n[extra]\nx = 1\n");
    assert_eq!((key.as_str(), line, column), ("extra", 3, 2));
}

#[test]
fn wrong_type_names_key_line_and_column() {
    let (key, line, column, message) = located("mode = \"enabled\"\nallow_ptrace = \"yes\"\n");
    assert_eq!((key.as_str(), line, column), ("allow_ptrace", 2, 16));
    assert!(message.contains("expected a boolean"), "{message}");
    let (key, line, _, _) = located("network = 3");
    assert_eq!((key.as_str(), line), ("network", 1));
    let (key, ..) = located("tmp_size = true");
    assert_eq!(key, "tmp_size");
}

#[test]
fn wrong_type_inside_a_multiline_array_names_the_element() {
    // The offending line shows no key at all; the error still names it.
    let (key, line, column, _) = located("writable_paths = [\n  \"/a\",\n  3,\n]\n");
    assert_eq!((key.as_str(), line, column), ("writable_paths[1]", 3, 3));
}

#[test]
fn relative_paths_name_key_line_and_column() {
    for (text, want_key, want_line) in [
        ("workspace = \"rel/x\"", "workspace", 1),
        ("network = \"none\"\ndata_dir = \"data\"", "data_dir", 2),
        ("tools_dir = \"/a/../b\"", "tools_dir", 1),
        ("writable_paths = [\"/ok\", \"../up\"]", "writable_paths", 1),
        ("\n\nread_only = [\"x\"]", "read_only", 3),
        ("masked = [\"/etc/shadow\", \"shadow\"]", "masked", 1),
    ] {
        let (key, line, _, message) = located(text);
        assert_eq!((key.as_str(), line), (want_key, want_line), "{text}");
        assert!(message.starts_with(&format!("{want_key}: ")), "{message}");
        assert!(message.contains("must be an absolute path"), "{message}");
    }
}

#[test]
fn duplicate_keys_are_an_error() {
    let (key, line, column, message) = located("network = \"none\"\nnetwork = \"full\"\n");
    assert_eq!((key.as_str(), line, column), ("network", 2, 1));
    assert!(message.contains("duplicate key"), "{message}");
    // A table defined twice.
    assert!(matches!(
        Policy::from_toml("[a]\nx = 1\n[a]\ny = 2\n"),
        Err(PolicyError::Toml { line: Some(3), .. })
    ));
}

#[test]
fn syntax_errors_are_located() {
    match Policy::from_toml("network = \"none\nmode = 1") {
        Err(PolicyError::Toml { line: Some(1), .. }) => {}
        other => panic!("expected a Toml error on line 1, got {other:?}"),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostConfig {
    name: String,
    agents: Agents,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Agents {
    #[serde(default)]
    sandbox: Policy,
}

#[test]
fn a_host_nests_the_policy_under_agents_sandbox() {
    let text = r#"
name = "my-host"

[agents.sandbox]
network = "none"
writable_paths = ["/srv/shared"]
"#;
    let host: HostConfig = toml::from_str(text).unwrap();
    assert_eq!(host.name, "my-host");
    assert_eq!(host.agents.sandbox.network, Network::None);
    assert_eq!(
        host.agents.sandbox.writable_paths,
        [PathBuf::from("/srv/shared")]
    );
    assert_eq!(host.agents.sandbox.deny_names, Policy::default().deny_names);
    host.agents.sandbox.validate().unwrap();
    // An empty `[agents]` table gives the default policy.
    let host: HostConfig = toml::from_str("name = \"h\"\n[agents]\n").unwrap();
    assert_eq!(host.agents.sandbox, Policy::default());
}

#[test]
fn nested_errors_are_located_by_the_host() {
    let text = "name = \"h\"\n[agents.sandbox]\nnetwork = \"none\"\nbogus = 1\n";
    let e = toml::from_str::<HostConfig>(text).unwrap_err();
    // toml's own rendering already has the line; PolicyError::from_toml adds the key path.
    assert!(e.to_string().contains("line 4"), "{e}");
    match PolicyError::from_toml(text, e) {
        PolicyError::Toml {
            key: Some(key),
            line: Some(4),
            column: Some(1),
            ..
        } => assert_eq!(key, "agents.sandbox.bogus"),
        other => panic!("expected agents.sandbox.bogus at 4:1, got {other:?}"),
    }
    // Relative paths are refused while deserializing, so nesting checks them too.
    let text = "name = \"h\"\n[agents.sandbox]\nwritable_paths = [\n  \"/a\",\n  \"b\",\n]\n";
    let e = toml::from_str::<HostConfig>(text).unwrap_err();
    assert!(
        e.to_string()
            .contains("writable_paths: \"b\" must be an absolute path"),
        "{e}"
    );
    match PolicyError::from_toml(text, e) {
        PolicyError::Toml {
            key: Some(key),
            line: Some(3),
            ..
        } => assert_eq!(key, "agents.sandbox.writable_paths"),
        other => panic!("expected agents.sandbox.writable_paths on line 3, got {other:?}"),
    }
}

#[test]
fn line_column_counts_characters() {
    let text = "a = \"é\"\nbb = 1";
    assert_eq!(line_column(text, 0), (1, 1));
    assert_eq!(line_column(text, text.find("bb").unwrap()), (2, 1));
    assert_eq!(line_column(text, text.len()), (2, 7));
    // `é` is two bytes and one column.
    assert_eq!(line_column(text, text.find('"').unwrap() + 3), (1, 7));
}
