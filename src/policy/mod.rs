//! What the host asks for: the policy, as plain data.
//!
//! A [`Policy`] deserializes from TOML (or any serde format) and is nested by hosts in their
//! own configuration (`[sandbox]`, `[agents.sandbox]`). Nothing here performs I/O or knows
//! about an operating system: turning a policy into steps is the plan's job
//! ([`Sandbox::plan`](crate::Sandbox::plan) shows it).

mod error;
mod leak;
mod limits;
mod network;
mod size;

#[cfg(test)]
mod config_tests;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use error::{AllowError, PatternError, PatternProblem, PolicyError};
pub use leak::{
    HostPattern, LeakDetection, MAX_HOST_PATTERNS, MAX_NAME_LEN, MAX_REGEX_LEN,
    REGEX_DFA_SIZE_LIMIT, REGEX_SIZE_LIMIT,
};
pub use limits::{LIMITS_KEYS, Limits, ShownDuration, parse_duration};
pub use network::{Allowlist, Cidr, Name};
pub use size::ByteSize;

/// Whether containment is applied at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Contain every command (the default).
    #[default]
    Enabled,
    /// Run commands without containment; the environment is still sanitized.
    Disabled,
}

/// Network access from inside the sandbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// No network but a private loopback (a new network namespace).
    None,
    /// Only the names of `allow_domains`, through stockade's egress proxy in the host: a
    /// private network namespace whose loopback holds the proxy's listeners (the full
    /// layer), or TCP to the proxy's port alone (layer 2, Landlock ABI >= 4; macOS).
    Allow,
    /// The host's network (the default).
    #[default]
    Full,
}

/// What happens when the kernel cannot provide the wanted layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fallback {
    /// Warn through `tracing` and run on the strongest layer left (the default).
    #[default]
    Degrade,
    /// Refuse to spawn with a typed error.
    Refuse,
}

/// Where the program's writes to the workspace land.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceMode {
    /// Straight into the real workspace (the default).
    #[default]
    Direct,
    /// Into a change set under `changes_dir`; the real workspace stays untouched until the
    /// host applies the set (`stockade apply`). Linux's full layer mounts an overlay
    /// (lower: the workspace, read-only; upper: `<changes_dir>/upper`); layer 2,
    /// passthrough and macOS run the program on a snapshot (`<changes_dir>/snapshot`, see
    /// `snapshot_max`) and write the difference into `upper/` after each run. Other
    /// systems refuse it.
    Overlay,
}

/// A containment layer, strongest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// Namespaces, mounts, Landlock and seccomp.
    Full,
    /// Landlock and seccomp without namespaces.
    Landlock,
    /// Environment sanitization only.
    Passthrough,
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layer::Full => "full",
            Layer::Landlock => "landlock",
            Layer::Passthrough => "passthrough",
        })
    }
}

/// The containment policy for one host.
///
/// Every field has a default; an empty TOML table is a valid policy. Unknown keys are an
/// error, so a misspelt key never silently weakens the sandbox.
///
/// ```
/// let policy: stockade::Policy = toml::from_str(r#"
///     writable_paths = ["/home/user/shared-data"]
///     network = "none"
/// "#).unwrap();
/// assert_eq!(policy.network, stockade::Network::None);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// `enabled` (default) or `disabled`.
    pub mode: Mode,
    /// The directory the program works in: read-write inside the sandbox. Hosts usually set
    /// it per agent; [`Policy::with_workspace`] sets it in code.
    #[serde(deserialize_with = "absolute::workspace")]
    pub workspace: Option<PathBuf>,
    /// Further host paths that are read-write inside.
    #[serde(deserialize_with = "absolute::writable_paths")]
    pub writable_paths: Vec<PathBuf>,
    /// Host paths added to the read-only allowlist.
    #[serde(deserialize_with = "absolute::read_only")]
    pub read_only: Vec<PathBuf>,
    /// The agent's own data: masked (no read, write or listing), even under the workspace.
    /// It must exist when the sandbox is made; stockade never creates it.
    #[serde(deserialize_with = "absolute::data_dir")]
    pub data_dir: Option<PathBuf>,
    /// A directory of tools: read-only inside and first on `PATH`.
    #[serde(deserialize_with = "absolute::tools_dir")]
    pub tools_dir: Option<PathBuf>,
    /// Names of host environment variables passed through to the program.
    pub passthrough_env: Vec<String>,
    /// `full` (default), `none` (a private network namespace with loopback only) or
    /// `allow` (only the names of `allow_domains`, through the egress proxy).
    pub network: Network,
    /// With `network = "allow"`: the names the program may reach (`github.com`,
    /// `*.githubusercontent.com` for the names below it, an IP address), each with an
    /// optional `:port` (none: any port). See [`Allowlist::parse`].
    #[serde(deserialize_with = "checked::allow_domains")]
    pub allow_domains: Vec<String>,
    /// With `network = "allow"`: the non-public ranges (`10.0.0.0/8`, `127.0.0.1/32`) that
    /// allowed names may resolve into. Anything else private, loopback, link-local or
    /// CGNAT is refused, and cloud metadata addresses always are. See [`Cidr::parse`].
    #[serde(deserialize_with = "checked::allow_private")]
    pub allow_private: Vec<String>,
    /// What to do when the wanted layer is not available.
    pub fallback: Fallback,
    /// Run on this layer on purpose (weaker than the best the kernel offers). `None`: the
    /// strongest available.
    pub layer: Option<Layer>,
    /// The weakest layer the host accepts when degrading. `None`: layer 2 (`landlock`) on
    /// Linux, never passthrough unless named here, and for a root host the full layer (no
    /// degrading: root without namespaces can change the mode of every root-owned file it
    /// names, which Landlock does not govern); passthrough elsewhere.
    pub min_layer: Option<Layer>,
    /// Let the program ptrace its own sandboxed processes (strace, gdb).
    pub allow_ptrace: bool,
    /// Keep the host's session (no `setsid`): the program stays in the host's session and
    /// keeps its controlling terminal, which it can then open as `/dev/tty`. Interactive
    /// programs on a pseudo-terminal of their own do not need it: see
    /// `Command::controlling_terminal`.
    pub keep_session: bool,
    /// When a fresh `/proc` cannot be mounted (nested containers), bind the host's `/proc`
    /// read-only instead of failing.
    pub proc_fallback: bool,
    /// Size limit of the private `/tmp`, of the private `/dev/shm` (each on its own), and
    /// of each command's `.git` layer (the changes git makes under a writable root's
    /// `.git`, held until they are merged back).
    pub tmp_size: ByteSize,
    /// Host files hidden inside the sandbox even though their directory is allowlisted.
    #[serde(deserialize_with = "absolute::masked")]
    pub masked: Vec<PathBuf>,
    /// Names hidden at the top of each writable root and refused by the path guard.
    pub deny_names: Vec<String>,
    /// Names kept read-only at the top of each writable root. Names under `.git` (the
    /// default `.git/hooks`, `.git/config`) select, on the full layer, a copy-on-write
    /// layer over the whole `.git` instead: git works inside, and only objects, refs,
    /// reflogs, the index, `HEAD` and git's state files reach the host (see
    /// [`crate::GitDrop`]). Layer 2 enforces none of them (see SECURITY.md).
    pub guard_names: Vec<String>,
    /// File names the in-process write guard refuses to write (case-insensitive).
    pub protected: Vec<String>,
    /// After each command, find the repositories the program created in the writable
    /// roots and neutralize them, so that git on the host runs nothing from them (see
    /// [`crate::NestedRepository`]). Default `true`. Each command then walks its writable
    /// roots twice (at the spawn and after the run), which costs about as much as `find`
    /// over them: turn it off only for large workspaces where the host runs no git after a
    /// run, or runs it in a way that reads no repository config and runs no hook.
    pub check_nested_repositories: bool,
    /// Resource limits: memory, processes, CPU and time (`[sandbox.limits]`).
    pub limits: Limits,
    /// Leak detection: the host's own secret patterns (`[sandbox.leak]`).
    pub leak: LeakDetection,
    /// `direct` (default): the program writes into the workspace; `overlay`: into the
    /// change set at `changes_dir`, for the host to review, apply or discard.
    pub workspace_mode: WorkspaceMode,
    /// With `workspace_mode = "overlay"` (and required by it): the change set's directory.
    /// Created (mode 0700) when missing, its parent must exist; an existing one must be a
    /// change set of the same workspace. It may not lie inside the workspace, a writable
    /// path or the data dir (nor contain them), nor be a symlink or someone else's.
    #[serde(deserialize_with = "absolute::changes_dir")]
    pub changes_dir: Option<PathBuf>,
    /// Overlay mode on a snapshot (layer 2, passthrough, macOS): the largest workspace (the sum of its regular files' sizes)
    /// that is snapshotted; a larger one refuses the spawn. Default 1 GiB.
    pub snapshot_max: ByteSize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            mode: Mode::Enabled,
            workspace: None,
            writable_paths: Vec::new(),
            read_only: Vec::new(),
            data_dir: None,
            tools_dir: None,
            passthrough_env: Vec::new(),
            network: Network::Full,
            allow_domains: Vec::new(),
            allow_private: Vec::new(),
            fallback: Fallback::Degrade,
            layer: None,
            min_layer: None,
            allow_ptrace: false,
            keep_session: false,
            proc_fallback: false,
            tmp_size: ByteSize::mib(512),
            masked: DEFAULT_MASKED.iter().map(PathBuf::from).collect(),
            deny_names: DEFAULT_DENY_NAMES.iter().map(|s| s.to_string()).collect(),
            guard_names: DEFAULT_GUARD_NAMES.iter().map(|s| s.to_string()).collect(),
            protected: DEFAULT_PROTECTED.iter().map(|s| s.to_string()).collect(),
            check_nested_repositories: true,
            limits: Limits::default(),
            leak: LeakDetection::default(),
            workspace_mode: WorkspaceMode::Direct,
            changes_dir: None,
            snapshot_max: ByteSize::mib(1024),
        }
    }
}

/// Every key of a policy table, as [`Policy`] spells its fields.
pub const POLICY_KEYS: &[&str] = &[
    "mode",
    "workspace",
    "writable_paths",
    "read_only",
    "data_dir",
    "tools_dir",
    "passthrough_env",
    "network",
    "allow_domains",
    "allow_private",
    "fallback",
    "layer",
    "min_layer",
    "allow_ptrace",
    "keep_session",
    "proc_fallback",
    "tmp_size",
    "masked",
    "deny_names",
    "guard_names",
    "protected",
    "check_nested_repositories",
    "limits",
    "leak",
    "workspace_mode",
    "changes_dir",
    "snapshot_max",
];

/// The system directories bound read-only when present on the host.
pub const SYSTEM_ALLOWLIST: &[&str] = &[
    "/bin", "/sbin", "/usr", "/lib", "/lib64", "/etc", "/opt", "/nix",
];

/// Files masked by default: a host running as root must not hand them out.
pub const DEFAULT_MASKED: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
    "/etc/ssl/private",
];

/// Default `deny_names`.
pub const DEFAULT_DENY_NAMES: &[&str] = &[".env", ".env.local", ".ssh", "id_rsa", "id_ed25519"];
/// Default `guard_names`.
pub const DEFAULT_GUARD_NAMES: &[&str] = &[".git/hooks", ".git/config"];
/// Default `protected` names.
pub const DEFAULT_PROTECTED: &[&str] = &["SOUL.md", "IDENTITY.md", "USER.md"];

impl Policy {
    /// The default policy with `workspace` set.
    pub fn with_workspace(workspace: impl Into<PathBuf>) -> Self {
        Policy {
            workspace: Some(workspace.into()),
            ..Policy::default()
        }
    }

    /// Parses a policy from TOML text (the table's own keys, not a `[sandbox]` wrapper; see
    /// [`Policy::from_config`] for a whole config file).
    ///
    /// # Errors
    ///
    /// [`PolicyError::Toml`] with the key, line and column of the first problem.
    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let policy: Policy = toml::from_str(text).map_err(|e| PolicyError::from_toml(text, e))?;
        policy.validate().map_err(|e| e.located(text))?;
        Ok(policy)
    }

    /// Parses the policy of a config file, wherever the file keeps it: its `[sandbox]`
    /// table, its `[agents.sandbox]` table, or its top level. This is what the `stockade`
    /// command's `--config` reads.
    ///
    /// In a file with a `[sandbox]` or `[agents.sandbox]` table, the other keys and tables
    /// are the host's own and are not read. A file with more than one of the three places
    /// (a `[sandbox]` table and policy keys at the top level, say) is refused, since which
    /// policy is meant cannot be told.
    ///
    /// ```
    /// let p = stockade::Policy::from_config("[server]\nport = 8080\n\n[agents.sandbox]\nnetwork = \"none\"\n").unwrap();
    /// assert_eq!(p.network, stockade::Network::None);
    /// assert!(stockade::Policy::from_config("network = \"none\"\n[sandbox]\n").is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// [`PolicyError::AmbiguousConfig`] naming the places found;
    /// [`PolicyError::Toml`] with the dotted key (`sandbox.network`), line and
    /// column of the first problem.
    pub fn from_config(text: &str) -> Result<Self, PolicyError> {
        #[derive(Deserialize)]
        struct InSandbox {
            sandbox: Policy,
        }
        #[derive(Deserialize)]
        struct InAgents {
            agents: InSandbox,
        }
        let parse = |e| PolicyError::from_toml(text, e);
        let table: toml::Table = toml::from_str(text).map_err(parse)?;
        let in_sandbox = table.contains_key("sandbox");
        let in_agents = table
            .get("agents")
            .and_then(toml::Value::as_table)
            .is_some_and(|a| a.contains_key("sandbox"));
        let top: Vec<&str> = table
            .keys()
            .map(String::as_str)
            .filter(|k| POLICY_KEYS.contains(k))
            .collect();
        let mut places = Vec::new();
        if in_sandbox {
            places.push("[sandbox]".to_string());
        }
        if in_agents {
            places.push("[agents.sandbox]".to_string());
        }
        if !top.is_empty() {
            places.push(format!("top-level keys ({})", top.join(", ")));
        }
        if places.len() > 1 {
            return Err(PolicyError::AmbiguousConfig { places });
        }
        let policy = if in_sandbox {
            toml::from_str::<InSandbox>(text).map_err(parse)?.sandbox
        } else if in_agents {
            toml::from_str::<InAgents>(text)
                .map_err(parse)?
                .agents
                .sandbox
        } else {
            toml::from_str::<Policy>(text).map_err(|e| nest_hint(parse(e), &table))?
        };
        policy.validate().map_err(|e| e.located(text))?;
        Ok(policy)
    }

    /// The policy in a TOML value a host has already parsed: the table that holds the
    /// policy's own keys (`network`, `writable_paths`, …), wherever the host's file keeps
    /// it. This is the way for a layout [`Policy::from_config`] does not know, such as one
    /// policy per entry of an `[[agents]]` array.
    ///
    /// ```
    /// let file: toml::Table = toml::from_str(
    ///     "[[agents]]\nname = \"a\"\n[agents.sandbox]\nnetwork = \"none\"\n\n\
    ///      [[agents]]\nname = \"b\"\n[agents.sandbox]\nnetwork = \"full\"\n",
    /// )
    /// .unwrap();
    /// let agents = file["agents"].as_array().unwrap();
    /// let b = stockade::Policy::from_toml_value(&agents[1]["sandbox"]).unwrap();
    /// assert_eq!(b.network, stockade::Network::Full);
    /// ```
    ///
    /// # Errors
    ///
    /// [`PolicyError::Toml`] with toml's message (an unknown key, a wrong type; a value
    /// holds no positions, so without line and column); [`PolicyError::RelativePath`] and
    /// [`PolicyError::BadName`] from [`Policy::validate`].
    pub fn from_toml_value(value: &toml::Value) -> Result<Self, PolicyError> {
        let policy = Policy::deserialize(value.clone()).map_err(|e| PolicyError::Toml {
            key: None,
            line: None,
            column: None,
            message: e.message().trim_end().to_string(),
        })?;
        policy.validate()?;
        Ok(policy)
    }

    /// Checks what serde cannot: every configured path is absolute and free of `..`.
    ///
    /// # Errors
    ///
    /// [`PolicyError::RelativePath`] naming the key and the path.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let one = |key: &'static str, p: &Path| -> Result<(), PolicyError> {
            let dotdot = p
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir));
            if !p.is_absolute() || dotdot {
                return Err(PolicyError::RelativePath {
                    key,
                    path: p.to_path_buf(),
                });
            }
            Ok(())
        };
        if let Some(w) = &self.workspace {
            one("workspace", w)?;
        }
        if let Some(d) = &self.data_dir {
            one("data_dir", d)?;
        }
        if let Some(t) = &self.tools_dir {
            one("tools_dir", t)?;
        }
        for p in &self.writable_paths {
            one("writable_paths", p)?;
        }
        for p in &self.read_only {
            one("read_only", p)?;
        }
        for p in &self.masked {
            one("masked", p)?;
        }
        if let Some(c) = &self.changes_dir {
            one("changes_dir", c)?;
        }
        self.validate_overlay()?;
        // Names are relative to each writable root: no absolute paths, no `..`, no NUL.
        let name_ok = |n: &str, slash: bool| {
            !n.is_empty()
                && !n.contains('\0')
                && (slash || !n.contains('/'))
                && !n.starts_with('/')
                && n.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
        };
        for n in &self.deny_names {
            if !name_ok(n, false) {
                return Err(PolicyError::BadName {
                    key: "deny_names",
                    name: n.clone(),
                });
            }
        }
        for n in &self.guard_names {
            if !name_ok(n, true) {
                return Err(PolicyError::BadName {
                    key: "guard_names",
                    name: n.clone(),
                });
            }
        }
        self.leak.validate()?;
        Allowlist::parse(&self.allow_domains)?;
        Cidr::parse_all(&self.allow_private)?;
        if self.network != Network::Allow {
            let key = match (self.allow_domains.is_empty(), self.allow_private.is_empty()) {
                (false, _) => Some("allow_domains"),
                (true, false) => Some("allow_private"),
                (true, true) => None,
            };
            if let Some(key) = key {
                return Err(PolicyError::AllowWithoutProxy {
                    key,
                    network: self.network,
                });
            }
        }
        Ok(())
    }

    /// `workspace_mode` and `changes_dir` together, and the change set apart from every
    /// path the program writes or stockade masks (lexically; the spawn checks the real
    /// directory: no symlink, owned by the caller).
    fn validate_overlay(&self) -> Result<(), PolicyError> {
        let changes = match (self.workspace_mode, &self.changes_dir) {
            (WorkspaceMode::Overlay, None) => return Err(PolicyError::OverlayWithoutChangesDir),
            (WorkspaceMode::Direct, Some(_)) => return Err(PolicyError::ChangesDirWithoutOverlay),
            (WorkspaceMode::Direct, None) => return Ok(()),
            (WorkspaceMode::Overlay, Some(c)) => c,
        };
        let overlaps = |p: &Path| changes.starts_with(p) || p.starts_with(changes);
        let named = self
            .workspace
            .iter()
            .map(|p| ("workspace", p))
            .chain(self.writable_paths.iter().map(|p| ("writable_paths", p)))
            .chain(self.data_dir.iter().map(|p| ("data_dir", p)));
        for (key, path) in named {
            if overlaps(path) {
                return Err(PolicyError::ChangesDirOverlaps {
                    key,
                    path: path.clone(),
                    changes_dir: changes.clone(),
                });
            }
        }
        Ok(())
    }

    /// The parsed egress policy of `network = "allow"`: `allow_domains` and
    /// `allow_private`.
    ///
    /// # Errors
    ///
    /// [`AllowError`] for the first entry that does not parse (a policy from
    /// [`Policy::from_toml`] or checked by [`Policy::validate`] has none).
    pub fn egress_lists(&self) -> Result<(Allowlist, Vec<Cidr>), AllowError> {
        Ok((
            Allowlist::parse(&self.allow_domains)?,
            Cidr::parse_all(&self.allow_private)?,
        ))
    }
}

/// A config file read as a bare policy whose top level has a table or an array of tables
/// that is not the policy's (`[server]`, `[[agents]]`) is a host's own file: an unknown
/// key at its top level gets a note on where the policy goes. (A misspelt key in a bare
/// policy file gets none.)
fn nest_hint(e: PolicyError, table: &toml::Table) -> PolicyError {
    let hosts_file = table.iter().any(|(k, v)| {
        !POLICY_KEYS.contains(&k.as_str())
            && (v.is_table()
                || v.as_array()
                    .is_some_and(|a| a.iter().all(toml::Value::is_table)))
    });
    match e {
        PolicyError::Toml {
            key: Some(key),
            line,
            column,
            mut message,
        } if hosts_file && {
            let head = key.split(['.', '[']).next().unwrap_or_default();
            table.contains_key(head) && !POLICY_KEYS.contains(&head)
        } =>
        {
            message.push_str(
                "; a host's config keeps the policy in a `[sandbox]` or `[agents.sandbox]` \
                 table, or parses the file itself and passes the policy's table to \
                 `Policy::from_toml_value` (as for an `[[agents]]` array)",
            );
            PolicyError::Toml {
                key: Some(key),
                line,
                column,
                message,
            }
        }
        other => other,
    }
}

/// Deserializers that refuse a relative path (or one with `..`) while the TOML span is still
/// known, so the error carries the line and column, also when a host nests the policy in its
/// own config. [`Policy::validate`] repeats the check for policies built in code.
mod absolute {
    use std::path::{Component, PathBuf};

    use serde::{Deserialize, Deserializer, de::Error};

    fn check<E: Error>(key: &str, p: PathBuf) -> Result<PathBuf, E> {
        if !p.is_absolute() || p.components().any(|c| c == Component::ParentDir) {
            return Err(E::custom(format!(
                "{key}: {p:?} must be an absolute path without `..`"
            )));
        }
        Ok(p)
    }

    fn one<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<Option<PathBuf>, D::Error> {
        Option::<PathBuf>::deserialize(d)?
            .map(|p| check(key, p))
            .transpose()
    }

    fn many<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<Vec<PathBuf>, D::Error> {
        Vec::<PathBuf>::deserialize(d)?
            .into_iter()
            .map(|p| check(key, p))
            .collect()
    }

    pub(super) fn workspace<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        one(d, "workspace")
    }
    pub(super) fn data_dir<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        one(d, "data_dir")
    }
    pub(super) fn tools_dir<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        one(d, "tools_dir")
    }
    pub(super) fn writable_paths<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<PathBuf>, D::Error> {
        many(d, "writable_paths")
    }
    pub(super) fn read_only<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        many(d, "read_only")
    }
    pub(super) fn changes_dir<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<PathBuf>, D::Error> {
        one(d, "changes_dir")
    }
    pub(super) fn masked<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        many(d, "masked")
    }
}

/// Deserializers that check `allow_domains` and `allow_private` entries while the TOML span
/// is still known, so a bad entry's error carries its line and column.
/// [`Policy::validate`] repeats the check for policies built in code.
mod checked {
    use serde::{Deserialize, Deserializer, de::Error};

    use super::{Allowlist, Cidr};

    pub(super) fn allow_domains<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        let v = Vec::<String>::deserialize(d)?;
        Allowlist::parse(&v).map_err(|e| D::Error::custom(format!("allow_domains: {e}")))?;
        Ok(v)
    }

    pub(super) fn allow_private<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        let v = Vec::<String>::deserialize(d)?;
        // The error names the key already (`allow_private entry "…"`).
        Cidr::parse_all(&v).map_err(D::Error::custom)?;
        Ok(v)
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// The first key called `name` in `text`, at any depth (`agents.sandbox.changes_dir`):
/// its dotted path and the byte offset of the key.
pub(crate) fn find_key(text: &str, name: &str) -> Option<(String, usize)> {
    use toml::de::{DeTable, DeValue};

    fn in_table(t: &DeTable<'_>, name: &str, prefix: &str) -> Option<(String, usize)> {
        for (k, v) in t.iter() {
            let dotted = if prefix.is_empty() {
                k.get_ref().to_string()
            } else {
                format!("{prefix}.{}", k.get_ref())
            };
            if k.get_ref() == name {
                return Some((dotted, k.span().start));
            }
            if let DeValue::Table(inner) = v.get_ref() {
                if let Some(hit) = in_table(inner, name, &dotted) {
                    return Some(hit);
                }
            }
        }
        None
    }

    let (doc, _) = DeTable::parse_recoverable(text);
    in_table(doc.get_ref(), name, "")
}

/// The dotted key whose key or value covers byte `span.start` of `text`
/// (`agents.sandbox.writable_paths[1]`), read from toml's spanned document.
pub(crate) fn key_at(text: &str, span: std::ops::Range<usize>) -> Option<String> {
    use toml::de::{DeTable, DeValue};

    fn in_value(v: &DeValue<'_>, at: usize, out: &mut String) -> bool {
        match v {
            DeValue::Table(t) => in_table(t, at, out),
            DeValue::Array(a) => a.iter().enumerate().any(|(i, e)| {
                let hit = e.span().contains(&at);
                if hit {
                    out.push_str(&format!("[{i}]"));
                    in_value(e.get_ref(), at, out);
                }
                hit
            }),
            _ => false,
        }
    }

    fn in_table(t: &DeTable<'_>, at: usize, out: &mut String) -> bool {
        for (k, v) in t.iter() {
            let mut here = out.clone();
            if !here.is_empty() {
                here.push('.');
            }
            here.push_str(k.get_ref());
            // A `[header]` table's span need not cover its body: look inside every table.
            let hit = k.span().contains(&at)
                || v.span().contains(&at)
                || matches!(v.get_ref(), DeValue::Table(_));
            if !hit {
                continue;
            }
            let mut inner = here.clone();
            if in_value(v.get_ref(), at, &mut inner) {
                *out = inner;
                return true;
            }
            if k.span().contains(&at) || v.span().contains(&at) {
                *out = here;
                return true;
            }
        }
        false
    }

    // A document with errors (a duplicate key) still yields what could be parsed.
    let (doc, _) = DeTable::parse_recoverable(text);
    let mut out = String::new();
    if in_table(doc.get_ref(), span.start, &mut out) {
        return Some(out);
    }
    // A duplicate key is not in the recovered table: the span is the key itself.
    let raw = text.get(span)?.trim();
    let bare = !raw.is_empty()
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.\"'".contains(&b));
    bare.then(|| raw.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_toml_is_the_default_policy() {
        assert_eq!(Policy::from_toml("").unwrap(), Policy::default());
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = Policy::from_toml("writable_path = [\"/x\"]").unwrap_err();
        assert!(err.to_string().contains("writable_path"), "{err}");
    }

    #[test]
    fn relative_paths_are_refused() {
        let err = Policy::from_toml("data_dir = \"data\"").unwrap_err();
        assert!(err.to_string().contains("data_dir"), "{err}");
        let err = Policy::from_toml("writable_paths = [\"/a/../b\"]").unwrap_err();
        assert!(err.to_string().contains("writable_paths"), "{err}");
    }

    #[test]
    fn policy_keys_are_the_fields() {
        // Naming every field: a new one does not compile until it is listed here.
        let Policy {
            mode: _,
            workspace: _,
            writable_paths: _,
            read_only: _,
            data_dir: _,
            tools_dir: _,
            passthrough_env: _,
            network: _,
            allow_domains: _,
            allow_private: _,
            fallback: _,
            layer: _,
            min_layer: _,
            allow_ptrace: _,
            keep_session: _,
            proc_fallback: _,
            tmp_size: _,
            masked: _,
            deny_names: _,
            guard_names: _,
            protected: _,
            check_nested_repositories: _,
            limits: _,
            leak: _,
            workspace_mode: _,
            changes_dir: _,
            snapshot_max: _,
        } = Policy::default();
        let full = Policy {
            workspace: Some("/w".into()),
            data_dir: Some("/d".into()),
            tools_dir: Some("/t".into()),
            layer: Some(Layer::Full),
            min_layer: Some(Layer::Landlock),
            leak: LeakDetection {
                patterns: vec![HostPattern::new("acme_key", "acme_[a-z0-9]{32}")],
            },
            workspace_mode: WorkspaceMode::Overlay,
            changes_dir: Some("/c".into()),
            ..Policy::default()
        };
        let table = toml::Table::try_from(&full).unwrap();
        let mut keys: Vec<&str> = table.keys().map(String::as_str).collect();
        let mut want = POLICY_KEYS.to_vec();
        keys.sort_unstable();
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    #[test]
    fn overlay_needs_a_changes_dir_apart_from_the_writable_paths() {
        let err =
            Policy::from_toml("workspace = \"/w\"\nworkspace_mode = \"overlay\"\n").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("line 2, column 1") && msg.contains("needs changes_dir"),
            "{msg}"
        );
        let err = Policy::from_toml("changes_dir = \"/c\"\n").unwrap_err();
        assert!(err.to_string().contains("line 1, column 1"), "{err}");
        assert!(
            err.to_string().contains("workspace_mode = \"direct\""),
            "{err}"
        );
        for (extra, key) in [
            ("", "workspace"),
            ("writable_paths = [\"/srv/c\"]\n", "writable_paths"),
            ("data_dir = \"/srv\"\n", "data_dir"),
        ] {
            let cdir = if key == "workspace" {
                "/w/changes"
            } else {
                "/srv/c/x"
            };
            let text = format!(
                "workspace = \"/w\"\n{extra}workspace_mode = \"overlay\"\nchanges_dir = \"{cdir}\"\n"
            );
            let err = Policy::from_toml(&text).unwrap_err().to_string();
            assert!(err.contains("overlaps") && err.contains(key), "{err}");
            assert!(err.contains("key `changes_dir`"), "{err}");
        }
        let err =
            Policy::from_toml("workspace_mode = \"overlay\"\nchanges_dir = \"c\"\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let ok = Policy::from_toml(
            "workspace = \"/w\"\nworkspace_mode = \"overlay\"\nchanges_dir = \"/c\"\nsnapshot_max = \"2GiB\"\n",
        )
        .unwrap();
        assert_eq!(ok.workspace_mode, WorkspaceMode::Overlay);
        assert_eq!(ok.snapshot_max, ByteSize::mib(2048));
    }

    #[test]
    fn round_trips_through_toml() {
        let mut p = Policy::with_workspace("/ws");
        p.network = Network::None;
        p.layer = Some(Layer::Landlock);
        p.tmp_size = ByteSize::mib(64);
        let text = toml::to_string(&p).unwrap();
        assert_eq!(Policy::from_toml(&text).unwrap(), p);
    }
}
