//! [`PolicyError`]: a policy that is not valid, whatever the host.
//!
//! It lives with the policy, at the bottom of the flow, so that the policy imports nothing
//! from the rest of the crate; [`crate::error`] re-exports it beside the other errors.

use std::path::PathBuf;

/// An invalid policy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The TOML text does not describe a policy: a syntax error, an unknown key, a wrong
    /// type, a duplicate key, a relative path where an absolute one is needed.
    #[error("invalid sandbox config{}: {message}", location(key.as_deref(), *line, *column))]
    Toml {
        /// The dotted key the problem is at (`writable_paths[1]`, `agents.sandbox.bogus`),
        /// when it can be told.
        key: Option<String>,
        /// The 1-based line.
        line: Option<usize>,
        /// The 1-based column, in characters.
        column: Option<usize>,
        /// What is wrong (`unknown field `x`, expected one of …`).
        message: String,
    },
    /// A path that must be absolute (and free of `..`) is not.
    #[error("{key}: {path:?} must be an absolute path without `..`")]
    RelativePath {
        /// The policy key.
        key: &'static str,
        /// The offending path.
        path: PathBuf,
    },
    /// A name in `deny_names` or `guard_names` is empty, absolute, or has `..`, `.`, NUL
    /// (or, for `deny_names`, a slash).
    #[error("{key}: {name:?} must be a relative name without `.`, `..` or NUL")]
    BadName {
        /// The policy key.
        key: &'static str,
        /// The offending name.
        name: String,
    },
    /// An `allow_domains` or `allow_private` entry does not parse.
    #[error(transparent)]
    Allow(#[from] AllowError),
    /// A `leak.patterns` entry is not a valid host pattern, or there are too many.
    #[error(transparent)]
    LeakPattern(#[from] PatternError),
    /// `allow_domains` or `allow_private` is set while `network` is not `allow`: the list
    /// would restrict nothing (`full`) or allow nothing (`none`).
    #[error(
        "{key} is set but network = \"{}\": the list applies only with network = \"allow\"",
        match network { super::Network::None => "none", super::Network::Full => "full", super::Network::Allow => "allow" }
    )]
    AllowWithoutProxy {
        /// The policy key set (`allow_domains` or `allow_private`).
        key: &'static str,
        /// The policy's network mode.
        network: super::Network,
    },
    /// `workspace_mode = "overlay"` without `changes_dir`: the writes would have nowhere to
    /// go.
    #[error(
        "workspace_mode = \"overlay\" needs changes_dir, the directory the change set is kept in"
    )]
    OverlayWithoutChangesDir,
    /// `changes_dir` without `workspace_mode = "overlay"`: the program would write into the
    /// real workspace while the host believes the writes are held for review.
    #[error(
        "changes_dir is set but workspace_mode = \"direct\": set workspace_mode = \"overlay\" (or --overlay)"
    )]
    ChangesDirWithoutOverlay,
    /// `changes_dir` lies inside (or holds) the workspace, a writable path or the data
    /// dir: the program could write its own change set, or the set would hold what is
    /// masked.
    #[error(
        "changes_dir {changes_dir:?} overlaps {key} {path:?}: the change set must lie outside the workspace, the writable paths and the data dir"
    )]
    ChangesDirOverlaps {
        /// The key of the other path.
        key: &'static str,
        /// That path.
        path: PathBuf,
        /// The policy's `changes_dir`.
        changes_dir: PathBuf,
    },
    /// The policy names no workspace.
    #[error("the policy has no workspace")]
    NoWorkspace,
    /// A config file holds a policy in more than one place (its `[sandbox]` table, its
    /// `[agents.sandbox]` table, policy keys at its top level), so which one is meant
    /// cannot be told.
    #[error(
        "the config has a policy in more than one place: {}; keep one",
        places.join(" and ")
    )]
    AmbiguousConfig {
        /// The places found: `[sandbox]`, `[agents.sandbox]`, `top-level keys (network)`.
        places: Vec<String>,
    },
}

impl PolicyError {
    /// Locates toml's error in `text`: line, column and the dotted key the span falls in.
    ///
    /// toml's own rendering shows the line but names the key only for unknown fields. A host
    /// that nests [`crate::Policy`] in its own config (`[agents.sandbox]`) passes its text and
    /// the error of its `toml::from_str` here to get the key path
    /// (`agents.sandbox.writable_paths[1]`).
    pub fn from_toml(text: &str, e: toml::de::Error) -> Self {
        let span = e.span();
        let (line, column) = match &span {
            Some(span) => {
                let (l, c) = super::line_column(text, span.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        let key = span.and_then(|s| super::key_at(text, s));
        let mut message = e.message().trim_end().to_string();
        // A value of the wrong type for a choice (`network = 5`): toml says only what
        // type it wanted; name the choices as its message for an unknown word does.
        if message.starts_with("wanted") || message.starts_with("invalid type") {
            if let Some(choices) = key.as_deref().and_then(choices_of) {
                message.push_str(&format!(", expected one of {choices}"));
            }
        }
        PolicyError::Toml {
            key,
            line,
            column,
            message,
        }
    }
}

impl PolicyError {
    /// A cross-key error of [`crate::Policy::validate`] on a policy parsed from `text`,
    /// located at the key it is about (`changes_dir`, `workspace_mode`) as a
    /// [`PolicyError::Toml`] with line and column; any other error unchanged.
    pub(crate) fn located(self, text: &str) -> Self {
        let name = match &self {
            PolicyError::OverlayWithoutChangesDir => "workspace_mode",
            PolicyError::ChangesDirWithoutOverlay | PolicyError::ChangesDirOverlaps { .. } => {
                "changes_dir"
            }
            _ => return self,
        };
        let Some((key, start)) = super::find_key(text, name) else {
            return self;
        };
        let (line, column) = super::line_column(text, start);
        PolicyError::Toml {
            key: Some(key),
            line: Some(line),
            column: Some(column),
            message: self.to_string(),
        }
    }
}

/// The words a key that takes one of a few choices accepts, by its last component.
fn choices_of(key: &str) -> Option<&'static str> {
    Some(match key.rsplit('.').next()? {
        "mode" => "`enabled`, `disabled`",
        "network" => "`none`, `allow`, `full`",
        "workspace_mode" => "`direct`, `overlay`",
        "fallback" => "`degrade`, `refuse`",
        "layer" | "min_layer" => "`full`, `landlock`, `passthrough`",
        _ => return None,
    })
}

/// ` at line L, column C (key `k`)`, leaving out what is unknown.
fn location(key: Option<&str>, line: Option<usize>, column: Option<usize>) -> String {
    let mut out = String::new();
    match (line, column) {
        (Some(l), Some(c)) => out.push_str(&format!(" at line {l}, column {c}")),
        (Some(l), None) => out.push_str(&format!(" at line {l}")),
        _ => {}
    }
    if let Some(k) = key {
        out.push_str(&format!(" (key `{k}`)"));
    }
    out
}

/// An entry of an egress allowlist (`allow_domains`) or of `allow_private` that does not
/// parse ([`crate::policy::Allowlist::parse`], [`crate::policy::Cidr`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AllowError {
    /// The entry's host part is not a domain, `*.` + domain or an IP address.
    #[error("allow entry {entry:?}: {why}")]
    Host {
        /// The entry as given.
        entry: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The entry's port is not a number from 1 to 65535.
    #[error("allow entry {entry:?}: the port must be a number from 1 to 65535")]
    Port {
        /// The entry as given.
        entry: String,
    },
    /// An `allow_private` entry is not `address/prefix` with a prefix that fits the address.
    #[error("allow_private entry {entry:?}: not a CIDR such as 10.0.0.0/8 or ::1/128")]
    Cidr {
        /// The entry as given.
        entry: String,
    },
}

/// A `[sandbox.leak]` pattern list that cannot be used ([`crate::policy::LeakDetection`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// More patterns than [`MAX_HOST_PATTERNS`](crate::policy::MAX_HOST_PATTERNS).
    #[error(
        "leak.patterns: {count} patterns, at most {} are allowed",
        super::MAX_HOST_PATTERNS
    )]
    TooMany {
        /// How many there are.
        count: usize,
    },
    /// One pattern is not valid.
    #[error("leak.patterns[{index}] {name:?}: {problem}")]
    Pattern {
        /// Its index in the list.
        index: usize,
        /// Its name, as given.
        name: String,
        /// What is wrong with it.
        problem: PatternProblem,
    },
    /// Each pattern compiles on its own, but the set of all of them is too large.
    #[error("leak.patterns: the {count} regexes together compile past the limit of {limit} bytes")]
    SetTooBig {
        /// How many patterns there are.
        count: usize,
        /// The set's size limit.
        limit: usize,
    },
}

/// What is wrong with one host pattern ([`crate::policy::HostPattern`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternProblem {
    /// The name is empty, too long, or has a byte outside `a-z`, `0-9` and `_`.
    #[error(
        "the name must be 1 to {} characters of a-z, 0-9 and _",
        super::MAX_NAME_LEN
    )]
    Name,
    /// The name is a built-in pattern's: its findings could not be told apart.
    #[error("the name is a built-in pattern's")]
    Builtin,
    /// The regex is longer than [`MAX_REGEX_LEN`](crate::policy::MAX_REGEX_LEN).
    #[error(
        "the regex is {len} bytes long, at most {} are allowed",
        super::MAX_REGEX_LEN
    )]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The regex does not parse.
    #[error("regex error at character {character} (byte {offset}): {message}")]
    Syntax {
        /// The parser's message (`unclosed group`).
        message: String,
        /// The byte offset of the error in the regex.
        offset: usize,
        /// The 1-based character position of the error in the regex.
        character: usize,
    },
    /// The regex matches the empty string: it would report a secret everywhere.
    #[error("the regex matches the empty string")]
    MatchesEmpty,
    /// The compiled regex is larger than the limit (Unicode classes repeated many times;
    /// `(?-u:…)` makes them ASCII and small).
    #[error("the regex compiles past the limit of {limit} bytes")]
    TooBig {
        /// The limit.
        limit: usize,
    },
}
