//! Config errors: every problem in the TOML text names its key, line and column, for a
//! policy parsed alone and for one nested in a host's own config.

use serde::Deserialize;

use super::PolicyError;
use super::*;

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
    let (key, line, _, message) = located("network = 3");
    assert_eq!((key.as_str(), line), ("network", 1));
    assert!(
        message.ends_with("expected one of `none`, `allow`, `full`"),
        "{message}"
    );
    for (text, choices) in [
        ("mode = 1", "`enabled`, `disabled`"),
        ("fallback = []", "`degrade`, `refuse`"),
        ("min_layer = 2", "`full`, `landlock`, `passthrough`"),
    ] {
        let (_, _, _, message) = located(text);
        assert!(message.ends_with(choices), "{text}: {message}");
    }
    // Another error at such a key gets no list.
    let (key, _, _, message) = located("network = \"none\"\nnetwork = \"full\"\n");
    assert_eq!(key, "network");
    assert!(!message.contains("expected one of"), "{message}");
    // An unknown word already lists the choices, once.
    let (_, _, _, message) = located("network = \"nonee\"");
    assert_eq!(message.matches("`none`").count(), 1, "{message}");
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

/// The key, line and column of `Policy::from_config`'s `PolicyError::Toml`.
#[track_caller]
fn config_located(text: &str) -> (String, usize, usize) {
    match Policy::from_config(text) {
        Err(PolicyError::Toml {
            key: Some(key),
            line: Some(line),
            column: Some(column),
            ..
        }) => (key, line, column),
        other => panic!("{text:?}: expected a located Toml error, got {other:?}"),
    }
}

#[test]
fn a_config_file_keeps_its_policy_in_one_of_three_places() {
    let want = |p: Policy| {
        assert_eq!(p.network, Network::None);
        assert_eq!(p.writable_paths, [PathBuf::from("/srv/shared")]);
    };
    let body = "network = \"none\"\nwritable_paths = [\"/srv/shared\"]\n";
    want(Policy::from_config(body).unwrap());
    want(Policy::from_config(&format!("[sandbox]\n{body}")).unwrap());
    want(Policy::from_config(&format!("[agents.sandbox]\n{body}")).unwrap());
    // The host's own keys and tables around a nested policy are not read.
    let host = format!(
        "name = \"h\"\n[server]\nport = 1\n[agents]\nmodel = \"m\"\n[agents.sandbox]\n{body}"
    );
    want(Policy::from_config(&host).unwrap());
    let host = format!("name = \"h\"\n[sandbox]\n{body}\n[agents]\nmodel = \"m\"\n");
    want(Policy::from_config(&host).unwrap());
    // Inline tables are tables too.
    want(
        Policy::from_config(
            "sandbox = { network = \"none\", writable_paths = [\"/srv/shared\"] }\n",
        )
        .unwrap(),
    );
    assert_eq!(Policy::from_config("").unwrap(), Policy::default());
    assert_eq!(
        Policy::from_config("[sandbox]\n").unwrap(),
        Policy::default()
    );
}

#[test]
fn a_config_with_two_policies_is_refused_naming_them() {
    for (text, places) in [
        (
            "[sandbox]\n[agents.sandbox]\n",
            vec!["[sandbox]", "[agents.sandbox]"],
        ),
        (
            "network = \"none\"\n[sandbox]\nmode = \"enabled\"\n",
            vec!["[sandbox]", "top-level keys (network)"],
        ),
        (
            "tmp_size = \"1MiB\"\nmode = \"enabled\"\n[agents.sandbox]\n",
            vec!["[agents.sandbox]", "top-level keys (mode, tmp_size)"],
        ),
    ] {
        match Policy::from_config(text) {
            Err(e @ PolicyError::AmbiguousConfig { .. }) => {
                let PolicyError::AmbiguousConfig { places: got } = &e else {
                    unreachable!()
                };
                assert_eq!(got, &places, "{text:?}");
                let shown = e.to_string();
                assert!(shown.contains(&places.join(" and ")), "{shown}");
                assert!(shown.ends_with("; keep one"), "{shown}");
            }
            other => panic!("{text:?}: expected AmbiguousConfig, got {other:?}"),
        }
    }
}

#[test]
fn config_errors_name_the_nested_key_line_and_column() {
    assert_eq!(
        config_located("[sandbox]\nnetwork = \"none\"\nnetwrok = \"none\"\n"),
        ("sandbox.netwrok".to_string(), 3, 1)
    );
    assert_eq!(
        config_located("x = 1\n[agents.sandbox]\nwritable_paths = [\n  \"/a\",\n  3,\n]\n"),
        ("agents.sandbox.writable_paths[1]".to_string(), 5, 3)
    );
    let (key, line, _) = config_located("[sandbox]\ndata_dir = \"rel\"\n");
    assert_eq!((key.as_str(), line), ("sandbox.data_dir", 2));
    // At the top level a key that is not a policy key is an unknown field, as before.
    assert_eq!(
        config_located("network = \"none\"\nnetwrok = \"none\"\n"),
        ("netwrok".to_string(), 2, 1)
    );
    // Syntax errors are located before anything is looked for.
    assert!(matches!(
        Policy::from_config("[sandbox]\nnetwork = \"none\n"),
        Err(PolicyError::Toml {
            line: Some(2),
            column: Some(_),
            ..
        })
    ));
}

/// A host file with `[[agents]]` arrays: `from_config` says where the policy goes, and the
/// host hands each agent's table to `from_toml_value`.
#[test]
fn an_agents_array_is_explained_and_from_toml_value_reads_each_entry() {
    let text = "name = \"h\"\n\n[[agents]]\nname = \"a\"\n[agents.sandbox]\nnetwork = \"none\"\n\n\
                [[agents]]\nname = \"b\"\n[agents.sandbox]\nnetwork = \"full\"\nwritable_paths = [\"/srv\"]\n";
    let e = Policy::from_config(text).unwrap_err();
    let shown = e.to_string();
    for part in [
        "unknown field `",
        "[sandbox]",
        "[agents.sandbox]",
        "Policy::from_toml_value",
    ] {
        assert!(shown.contains(part), "{part}: {shown}");
    }
    // Policy keys and a host's table at the top level: the same hint, at the host's key.
    let e = Policy::from_config("network = \"none\"\n[server]\nport = 1\n").unwrap_err();
    match &e {
        PolicyError::Toml {
            key: Some(k),
            line: Some(2),
            ..
        } => assert_eq!(k, "server"),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("Policy::from_toml_value"), "{e}");
    // A misspelt policy key gets no hint about nesting.
    let e = Policy::from_config("netwrok = \"none\"\n").unwrap_err();
    assert!(!e.to_string().contains("from_toml_value"), "{e}");
    let e = Policy::from_config("[sandbox]\nnetwrok = \"none\"\n").unwrap_err();
    assert!(!e.to_string().contains("from_toml_value"), "{e}");

    let file: toml::Table = toml::from_str(text).unwrap();
    let agents = file["agents"].as_array().unwrap();
    let a = Policy::from_toml_value(&agents[0]["sandbox"]).unwrap();
    let b = Policy::from_toml_value(&agents[1]["sandbox"]).unwrap();
    assert_eq!(a.network, Network::None);
    assert_eq!(b.network, Network::Full);
    assert_eq!(b.writable_paths, [PathBuf::from("/srv")]);
    assert_eq!(a.deny_names, Policy::default().deny_names);
    // The same checks as text: unknown keys, wrong types, relative paths.
    let bad = |t: &str| Policy::from_toml_value(&toml::Value::Table(toml::from_str(t).unwrap()));
    match bad("netwrok = \"none\"\n") {
        Err(PolicyError::Toml { message, .. }) => {
            assert!(message.contains("unknown field `netwrok`"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        bad("network = 5\n"),
        Err(PolicyError::Toml { .. })
    ));
    assert!(matches!(
        bad("writable_paths = [\"rel\"]\n"),
        Err(PolicyError::Toml { .. } | PolicyError::RelativePath { .. })
    ));
    assert!(matches!(
        Policy::from_toml_value(&toml::Value::Integer(1)),
        Err(PolicyError::Toml { .. })
    ));
}

#[test]
fn allow_mode_parses_its_lists_and_names_a_bad_entry_by_key_line_and_column() {
    let p = Policy::from_toml(
        "network = \"allow\"\nallow_domains = [\"github.com\", \"*.githubusercontent.com\", \"pypi.org:443\", \"203.0.113.7\"]\nallow_private = [\"10.0.0.0/8\"]\n",
    )
    .unwrap();
    assert_eq!(p.network, Network::Allow);
    let (allow, private) = p.egress_lists().unwrap();
    assert!(allow.allows("raw.githubusercontent.com", 443));
    assert!(!allow.allows("githubusercontent.com", 443));
    assert!(allow.allows("pypi.org", 443) && !allow.allows("pypi.org", 80));
    assert!(private[0].contains("10.1.2.3".parse().unwrap()));

    let (key, line, column, message) =
        located("network = \"allow\"\nallow_domains = [\"github.com\", \"*.\"]\n");
    assert_eq!((key.as_str(), line, column), ("allow_domains", 2, 17));
    assert!(message.contains("\"*.\""), "{message}");
    let (key, line, _, message) =
        located("network = \"allow\"\nallow_domains = [\"github.com:0\"]\n");
    assert_eq!((key.as_str(), line), ("allow_domains", 2));
    assert!(message.contains("port"), "{message}");
    let (key, line, _, message) =
        located("network = \"allow\"\nallow_private = [\"10.0.0.1/8\"]\n");
    assert_eq!((key.as_str(), line), ("allow_private", 2));
    assert!(
        message.starts_with("allow_private entry \"10.0.0.1/8\""),
        "{message}"
    );
}

#[test]
fn an_allowlist_without_the_allow_mode_is_refused_rather_than_ignored() {
    for (text, key) in [
        ("allow_domains = [\"github.com\"]\n", "allow_domains"),
        (
            "network = \"none\"\nallow_domains = [\"github.com\"]\n",
            "allow_domains",
        ),
        (
            "network = \"full\"\nallow_private = [\"10.0.0.0/8\"]\n",
            "allow_private",
        ),
    ] {
        let e = Policy::from_toml(text).unwrap_err();
        assert!(
            matches!(e, PolicyError::AllowWithoutProxy { key: k, .. } if k == key),
            "{text}: {e}"
        );
        assert!(e.to_string().contains("network = \"allow\""), "{e}");
    }
    // Built in code, checked by validate.
    let p = Policy {
        allow_domains: vec!["a b".into()],
        network: Network::Allow,
        ..Policy::default()
    };
    assert!(matches!(p.validate(), Err(PolicyError::Allow(_))));
    // An empty list with the mode is a policy that allows nothing, on purpose.
    assert!(Policy::from_toml("network = \"allow\"\n").is_ok());
}

#[test]
fn a_bad_leak_pattern_names_its_entry_line_column_and_position() {
    let body = "[leak]\npatterns = [\n  { name = \"ok_key\", regex = \"ok_[0-9]{8}\" },\n  { name = \"acme_key\", regex = \"acme_([a-z0-9]{32}\" },\n]\n";
    let (key, line, column, message) = located(body);
    assert_eq!(
        (key.as_str(), line, column),
        ("leak.patterns[1]", 4, 3),
        "{message}"
    );
    assert!(
        message.contains("\"acme_key\": regex error at character 6 (byte 5): unclosed group"),
        "{message}"
    );
    let text = format!(
        "[server]\nport = 1\n\n[sandbox]\nnetwork = \"none\"\n\n[sandbox.{}",
        &body[1..]
    );
    let (key, line, column) = config_located(&text);
    assert_eq!(
        (key.as_str(), line, column),
        ("sandbox.leak.patterns[1]", 10, 3)
    );
    // A bad name, an unknown field and a regex that matches everywhere, each at its entry.
    for (entry, want) in [
        (
            "{ name = \"Acme\", regex = \"acme_[a-z]{8}\" }",
            "a-z, 0-9 and _",
        ),
        (
            "{ name = \"acme\", regexp = \"acme_[a-z]{8}\" }",
            "unknown field `regexp`",
        ),
        (
            "{ name = \"acme\", regex = \"x*\" }",
            "matches the empty string",
        ),
    ] {
        let text = format!("[leak]\npatterns = [\n  {entry},\n]\n");
        let (key, line, _, message) = located(&text);
        // The unknown field's own key: `leak.patterns[0].regexp`.
        assert!(key.starts_with("leak.patterns[0]"), "{key}: {message}");
        assert_eq!(line, 3, "{message}");
        assert!(message.contains(want), "{message}");
    }
    let ok = Policy::from_toml(&body.replace("acme_(", "acme_")).unwrap();
    assert_eq!(
        ok.leak.patterns[1],
        HostPattern::new("acme_key", "acme_[a-z0-9]{32}")
    );
    // Built in code, checked by validate with the index and name.
    let p = Policy {
        leak: LeakDetection {
            patterns: vec![HostPattern::new("ok", "ok+"), HostPattern::new("bad", "(")],
        },
        ..Policy::default()
    };
    let e = p.validate().unwrap_err();
    assert!(
        matches!(&e, PolicyError::LeakPattern(PatternError::Pattern { index: 1, name, .. }) if name == "bad"),
        "{e}"
    );
}
