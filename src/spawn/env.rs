//! The program's environment: built from scratch, never inherited.
//!
//! | variable | value |
//! | --- | --- |
//! | PATH | the tools dir, then the system directories |
//! | HOME | the workspace (the host's HOME when the mode is `disabled`) |
//! | TMPDIR | /tmp |
//! | USER, LANG, TERM | from the host, if set |
//! | each `passthrough_env` name | from the host, if set |
//!
//! Variables that make programs load code from elsewhere are refused outright.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use crate::error::PlanError;
use crate::plan::Plan;
use crate::policy::{Mode, Policy};

/// Names refused for sandboxed commands: each makes a program load or run code that the
/// caller chose (dynamic loader, interpreters' startup hooks, shells' rc files).
pub const DANGEROUS: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "RUBYOPT",
    "PERL5OPT",
    "PERL5LIB",
    "BASH_ENV",
    "ENV",
];

/// Whether `name` is refused: one of [`DANGEROUS`] or any `DYLD_*`.
pub fn is_dangerous(name: &OsStr) -> bool {
    let n = name.as_encoded_bytes();
    n.starts_with(b"DYLD_") || DANGEROUS.iter().any(|d| d.as_bytes() == n)
}

/// Builds the environment for one command.
pub fn build(
    policy: &Policy,
    plan: &Plan,
    clear: bool,
    explicit: &[(OsString, Option<OsString>)],
    host: &mut dyn Iterator<Item = (OsString, OsString)>,
) -> Result<Vec<(OsString, OsString)>, PlanError> {
    let host: BTreeMap<OsString, OsString> = host.collect();
    let mut env: BTreeMap<OsString, OsString> = BTreeMap::new();
    if !clear {
        let path = std::env::join_paths(&plan.path).unwrap_or_default();
        env.insert("PATH".into(), path);
        let home = match policy.mode {
            Mode::Disabled => host.get(OsStr::new("HOME")).cloned(),
            Mode::Enabled => Some(plan.workspace.clone().into_os_string()),
        };
        if let Some(h) = home {
            env.insert("HOME".into(), h);
        }
        env.insert("TMPDIR".into(), "/tmp".into());
        let names = ["USER", "LANG", "TERM"].into_iter().map(String::from);
        for name in names.chain(policy.passthrough_env.iter().cloned()) {
            if let Some(v) = host.get(OsStr::new(&name)) {
                if is_dangerous(OsStr::new(&name)) {
                    return Err(PlanError::DangerousEnv(name));
                }
                env.insert(name.into(), v.clone());
            }
        }
    }
    for (k, v) in explicit {
        match v {
            Some(v) => {
                if is_dangerous(k) {
                    return Err(PlanError::DangerousEnv(k.to_string_lossy().into_owned()));
                }
                env.insert(k.clone(), v.clone());
            }
            None => {
                env.remove(k);
            }
        }
    }
    Ok(env.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Namespaces;
    use crate::policy::Layer;

    fn plan() -> Plan {
        Plan {
            layer: Layer::Full,
            namespaces: Namespaces::default(),
            workspace: "/ws".into(),
            steps: vec![],
            path: vec!["/tools".into(), "/usr/bin".into()],
            roots: vec![],
            private_tmp: false,
        }
    }

    fn host() -> Vec<(OsString, OsString)> {
        [
            ("HOME", "/root"),
            ("USER", "me"),
            ("SECRET", "x"),
            ("GH_TOKEN", "t"),
            ("LD_PRELOAD", "/evil.so"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn get<'a>(env: &'a [(OsString, OsString)], k: &str) -> Option<&'a str> {
        env.iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.to_str())
    }

    #[test]
    fn only_the_listed_variables_are_inherited() {
        let mut p = Policy::with_workspace("/ws");
        p.passthrough_env = vec!["GH_TOKEN".into()];
        let env = build(&p, &plan(), false, &[], &mut host().into_iter()).unwrap();
        assert_eq!(get(&env, "PATH"), Some("/tools:/usr/bin"));
        assert_eq!(get(&env, "HOME"), Some("/ws"));
        assert_eq!(get(&env, "TMPDIR"), Some("/tmp"));
        assert_eq!(get(&env, "USER"), Some("me"));
        assert_eq!(get(&env, "GH_TOKEN"), Some("t"));
        assert_eq!(get(&env, "SECRET"), None);
        assert_eq!(get(&env, "LD_PRELOAD"), None);
    }

    #[test]
    fn dangerous_variables_are_refused() {
        let p = Policy::with_workspace("/ws");
        for name in DANGEROUS.iter().chain(&["DYLD_FOO"]) {
            let explicit = vec![(OsString::from(*name), Some(OsString::from("x")))];
            let err = build(&p, &plan(), false, &explicit, &mut std::iter::empty()).unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
        }
        let mut p = p;
        p.passthrough_env = vec!["LD_PRELOAD".into()];
        assert!(build(&p, &plan(), false, &[], &mut host().into_iter()).is_err());
    }

    #[test]
    fn disabled_mode_keeps_the_host_home() {
        let mut p = Policy::with_workspace("/ws");
        p.mode = Mode::Disabled;
        let env = build(&p, &plan(), false, &[], &mut host().into_iter()).unwrap();
        assert_eq!(get(&env, "HOME"), Some("/root"));
    }
}
