//! The program's environment: built from scratch, never inherited.
//!
//! | variable | value |
//! | --- | --- |
//! | PATH | the tools dir, then the system directories |
//! | HOME | the workspace (the host's HOME when the mode is `disabled`) |
//! | TMPDIR | /tmp |
//! | USER, LOGNAME | from the host, if set; else the passwd name of the uid the program runs as |
//! | LANG, TERM | from the host, if set |
//! | each `passthrough_env` name | from the host, if set |
//!
//! Variables that make programs load code from elsewhere are refused outright.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::sync::Mutex;

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
        // Services, cron and `env -i` start without USER and LOGNAME; programs that need
        // them (git's default identity, ssh, whoami-style checks) get the account of the
        // uid they run as, which on every layer is the caller's effective uid (the full
        // layer maps it to itself). The uid is read once for both names, when one of them
        // is missing: both then name the same account even if another thread of the host
        // changes its uid meanwhile (each spawn reads it again).
        let mut own: Option<Option<OsString>> = None;
        for name in ["USER", "LOGNAME"] {
            let value = match host.get(OsStr::new(name)) {
                Some(v) => Some(v.clone()),
                None => own
                    .get_or_insert_with(|| account_name(nix::unistd::geteuid().as_raw()))
                    .clone(),
            };
            if let Some(v) = value {
                env.insert(name.into(), v);
            }
        }
        let names = ["LANG", "TERM"].into_iter().map(String::from);
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

/// The login name of `uid` from the passwd database (`getpwuid_r`), `None` when it has no
/// entry. Runs in the parent, before any fork (NSS may load modules, allocate and lock);
/// the last answer is kept, since a sandbox asks for the same uid on every spawn.
pub fn account_name(uid: u32) -> Option<OsString> {
    static LAST: Mutex<Option<(u32, Option<OsString>)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((u, name)) = last.as_ref() {
        if *u == uid {
            return name.clone();
        }
    }
    let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| OsString::from(u.name));
    *last = Some((uid, name.clone()));
    name
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
            walls: Default::default(),
            egress: None,
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

    /// The passwd name of `uid` as `getent` (a separate implementation) reports it.
    fn getent_name(uid: u32) -> Option<String> {
        let out = std::process::Command::new("getent")
            .args(["passwd", &uid.to_string()])
            .output()
            .ok()?;
        let line = String::from_utf8(out.stdout).ok()?;
        Some(line.split(':').next()?.to_string()).filter(|n| !n.is_empty())
    }

    #[test]
    fn account_names_come_from_the_passwd_database() {
        assert_eq!(account_name(0), Some("root".into()));
        assert_eq!(
            account_name(65534).map(|n| n.into_string().unwrap()),
            getent_name(65534)
        );
        assert_eq!(account_name(65534), Some("nobody".into()));
        // No entry, no name (and the cache answers per uid).
        assert_eq!(account_name(0x7fff_fff0), None);
        assert_eq!(account_name(0), Some("root".into()));
    }

    #[test]
    fn user_and_logname_without_them_in_the_caller_environment() {
        let p = Policy::with_workspace("/ws");
        let me = nix::unistd::geteuid().as_raw();
        let want = getent_name(me).expect("the test user has a passwd entry");
        // `env -i`, cron, a service: an empty caller environment.
        let env = build(&p, &plan(), false, &[], &mut std::iter::empty()).unwrap();
        assert_eq!(get(&env, "USER"), Some(want.as_str()));
        assert_eq!(get(&env, "LOGNAME"), Some(want.as_str()));
        // The caller's values win, each on its own.
        let host = [("LOGNAME", "them")].map(|(k, v)| (k.into(), v.into()));
        let env = build(&p, &plan(), false, &[], &mut host.into_iter()).unwrap();
        assert_eq!(get(&env, "USER"), Some(want.as_str()));
        assert_eq!(get(&env, "LOGNAME"), Some("them"));
        // Passthrough (mode disabled) gets them too; env_clear gets nothing.
        let mut off = p.clone();
        off.mode = Mode::Disabled;
        let env = build(&off, &plan(), false, &[], &mut std::iter::empty()).unwrap();
        assert_eq!(get(&env, "LOGNAME"), Some(want.as_str()));
        let env = build(&p, &plan(), true, &[], &mut std::iter::empty()).unwrap();
        assert_eq!(get(&env, "USER"), None);
    }

    #[test]
    fn disabled_mode_keeps_the_host_home() {
        let mut p = Policy::with_workspace("/ws");
        p.mode = Mode::Disabled;
        let env = build(&p, &plan(), false, &[], &mut host().into_iter()).unwrap();
        assert_eq!(get(&env, "HOME"), Some("/root"));
    }
}
