//! What the sandbox denied a program ([`Denial`]), merged per distinct operation: the
//! report of [`Command::explain`](crate::Command::explain).

use std::collections::HashMap;

use serde::Serialize;

/// Which wall of the sandbox denied an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Wall {
    /// The seccomp filter refused a system call.
    Seccomp,
    /// The path is not in the sandbox's layout, or is read-only there.
    Layout,
    /// The path is masked (the data dir, a denied name).
    Masked,
    /// The network policy: a connect with `network = "none"`, a refusal of the egress
    /// proxy with `network = "allow"`.
    Network,
    /// Landlock refused an access.
    Landlock,
}

impl Wall {
    /// The wall's name as reports print it: `seccomp`, `layout`, `masked`, `network`,
    /// `landlock`.
    pub fn name(self) -> &'static str {
        match self {
            Wall::Seccomp => "seccomp",
            Wall::Layout => "layout",
            Wall::Masked => "masked",
            Wall::Network => "network",
            Wall::Landlock => "landlock",
        }
    }
}

/// One distinct denial of a run: the wall, what the program tried, on what, how often,
/// and the policy change that would allow it (or why none does).
///
/// Serializes as `{wall, operation, target, count, hint}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// The wall that denied it.
    pub wall: Wall,
    /// What the program tried: a system call with the arguments that decided it
    /// (`ptrace(PTRACE_ATTACH)`, `socket(AF_INET6, SOCK_RAW)`, `clone(CLONE_NEWUSER)`,
    /// `ioctl(TIOCSTI)`), or a network operation (`connect`).
    pub operation: String,
    /// What it was tried on, when the operation names something: an address
    /// (`140.82.112.3:443`), a host and port, a path.
    pub target: Option<String>,
    /// How many times the program tried it.
    pub count: u64,
    /// The policy change that allows it (`allow_ptrace = true`), or why none does
    /// (`never allowed (by design)`).
    pub hint: String,
}

impl std::fmt::Display for Denial {
    /// One line: `seccomp  ptrace(PTRACE_ATTACH) ×3  → allow_ptrace = true`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut what = self.operation.clone();
        if let Some(t) = &self.target {
            what.push(' ');
            what.push_str(t);
        }
        if self.count > 1 {
            what.push_str(&format!(" ×{}", self.count));
        }
        write!(f, "{:<8} {what:<30} → {}", self.wall.name(), self.hint)
    }
}

/// The most distinct denials one run keeps; later new ones are counted in the last entry
/// ([`Tally::OVERFLOW`]), so a hostile program cannot grow the host's memory.
const MAX_DISTINCT: usize = 1024;

/// The denials of one run, merged: one entry per distinct (wall, operation, target), in
/// the order first seen.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    list: Vec<Denial>,
    index: HashMap<(Wall, String, Option<String>), usize>,
}

impl Tally {
    /// The operation of the entry that counts what [`MAX_DISTINCT`] left out.
    pub(crate) const OVERFLOW: &'static str = "(more distinct denials, not listed)";

    /// Counts one denial.
    pub(crate) fn add(
        &mut self,
        wall: Wall,
        operation: String,
        target: Option<String>,
        hint: &str,
    ) {
        let key = (wall, operation, target);
        if let Some(&i) = self.index.get(&key) {
            if let Some(d) = self.list.get_mut(i) {
                d.count += 1;
            }
            return;
        }
        if self.list.len() >= MAX_DISTINCT {
            let over = (wall, Self::OVERFLOW.to_owned(), None);
            let i = *self.index.entry(over).or_insert_with(|| {
                self.list.push(Denial {
                    wall,
                    operation: Self::OVERFLOW.to_owned(),
                    target: None,
                    count: 0,
                    hint: String::new(),
                });
                self.list.len() - 1
            });
            if let Some(d) = self.list.get_mut(i) {
                d.count += 1;
            }
            return;
        }
        let (wall, operation, target) = key.clone();
        self.index.insert(key, self.list.len());
        self.list.push(Denial {
            wall,
            operation,
            target,
            count: 1,
            hint: hint.to_owned(),
        });
    }

    /// The denials so far.
    pub(crate) fn list(&self) -> Vec<Denial> {
        self.list.clone()
    }
}

/// The egress proxy's refusals among `decisions`, as network denials, merged.
#[cfg(unix)]
pub(crate) fn from_egress(decisions: &[crate::guard::egress::Decision]) -> Vec<Denial> {
    let mut t = Tally::default();
    for d in decisions {
        let Some(r) = &d.refusal else { continue };
        let hint = match r.policy_key() {
            Some(key) => format!("{r}: add it to {key}"),
            None => format!("{r} (never allowed)"),
        };
        let op = match d.protocol {
            crate::guard::egress::Protocol::Http => "http",
            crate::guard::egress::Protocol::Connect => "http CONNECT",
            crate::guard::egress::Protocol::Socks5 => "socks5 CONNECT",
        };
        t.add(
            Wall::Network,
            op.to_owned(),
            Some(format!("{}:{}", d.host, d.port)),
            &hint,
        );
    }
    t.list()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_denials_merge_with_a_count() {
        let mut t = Tally::default();
        for _ in 0..3 {
            t.add(
                Wall::Seccomp,
                "ptrace(PTRACE_ATTACH)".into(),
                None,
                "allow_ptrace = true",
            );
        }
        t.add(
            Wall::Seccomp,
            "bpf".into(),
            None,
            "never allowed (by design)",
        );
        let l = t.list();
        assert_eq!(l.len(), 2);
        assert_eq!((l[0].count, l[1].count), (3, 1));
        assert_eq!(
            l[0].to_string(),
            "seccomp  ptrace(PTRACE_ATTACH) ×3       → allow_ptrace = true"
        );
        let json = serde_json::to_string(&l[1]).unwrap();
        assert_eq!(
            json,
            r#"{"wall":"seccomp","operation":"bpf","target":null,"count":1,"hint":"never allowed (by design)"}"#
        );
    }

    #[test]
    fn the_number_of_distinct_entries_is_bounded() {
        let mut t = Tally::default();
        for i in 0..(MAX_DISTINCT + 10) {
            t.add(Wall::Seccomp, format!("syscall {i}"), None, "");
        }
        let l = t.list();
        assert_eq!(l.len(), MAX_DISTINCT + 1);
        assert_eq!(l[MAX_DISTINCT].operation, Tally::OVERFLOW);
        assert_eq!(l[MAX_DISTINCT].count, 10);
    }
}
