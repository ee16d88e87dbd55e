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
    /// One line: `seccomp  ptrace(PTRACE_ATTACH) ×3  → allow_ptrace = true`. A target is
    /// the program's choice (a path it named): one with anything but printable ASCII
    /// (a space, a quote, a control, any other character) is shown quoted and escaped, and
    /// a long one is cut, so that no target reads as a second entry or pushes its own
    /// hint off the line. The JSON form keeps every target whole.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut what = self.operation.clone();
        if let Some(t) = &self.target {
            what.push(' ');
            what.push_str(&shown_target(t));
        }
        if self.count > 1 {
            what.push_str(&format!(" ×{}", self.count));
        }
        if self.hint.is_empty() {
            write!(f, "{:<8} {what}", self.wall.name())
        } else {
            write!(f, "{:<8} {what:<30} → {}", self.wall.name(), self.hint)
        }
    }
}

/// The longest target a report line shows, in characters.
const SHOWN_TARGET: usize = 160;

/// A target as a report line shows it: as it is when it is printable ASCII without
/// quotes or spaces, else (an empty one too) quoted and escaped; cut after [`SHOWN_TARGET`] characters.
fn shown_target(t: &str) -> String {
    let mut cut: String = t.chars().take(SHOWN_TARGET).collect();
    if cut.len() < t.len() {
        cut.push('…');
    }
    let plain = !t.is_empty()
        && t.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
    if plain { cut } else { format!("{cut:?}") }
}

/// The most distinct denials one run keeps; later new ones are counted in the last entry
/// ([`Tally::OVERFLOW`]), so a hostile program cannot grow the host's memory.
const MAX_DISTINCT: usize = 1024;

/// The denials of one run, merged: one entry per distinct (wall, operation, target), in
/// the order first seen.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    list: Vec<Denial>,
    /// When each entry of `list` was first seen (a count of events, [`Tally::next_seq`]).
    seen: Vec<u64>,
    index: HashMap<(Wall, String, Option<String>), usize>,
    next: u64,
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
        self.add_n(wall, operation, target, hint, 1);
    }

    /// A number for an event seen now, later than every number given before: an entry
    /// added afterwards with it ([`Tally::add_seen`]) keeps its place in the list.
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Counts `n` denials of one kind, seen now.
    pub(crate) fn add_n(
        &mut self,
        wall: Wall,
        operation: String,
        target: Option<String>,
        hint: &str,
        n: u64,
    ) {
        let seq = self.next_seq();
        self.add_seen(seq, wall, operation, target, hint, n);
    }

    /// Counts `n` denials of one kind, first seen at `seq` ([`Tally::next_seq`]): a
    /// denial classified after the event keeps the event's place in the list.
    pub(crate) fn add_seen(
        &mut self,
        seq: u64,
        wall: Wall,
        operation: String,
        target: Option<String>,
        hint: &str,
        n: u64,
    ) {
        let key = (wall, operation, target);
        if let Some(&i) = self.index.get(&key) {
            if let Some(d) = self.list.get_mut(i) {
                d.count += n;
            }
            if let Some(first) = self.seen.get_mut(i) {
                *first = (*first).min(seq);
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
                self.seen.push(u64::MAX);
                self.list.len() - 1
            });
            if let Some(d) = self.list.get_mut(i) {
                d.count += n;
            }
            return;
        }
        let (wall, operation, target) = key.clone();
        self.index.insert(key, self.list.len());
        self.seen.push(seq);
        self.list.push(Denial {
            wall,
            operation,
            target,
            count: n,
            hint: hint.to_owned(),
        });
    }

    /// The denials so far, in the order first seen (what went past [`MAX_DISTINCT`]
    /// last).
    pub(crate) fn list(&self) -> Vec<Denial> {
        let mut order: Vec<usize> = (0..self.list.len()).collect();
        order.sort_by_key(|&i| self.seen.get(i).copied().unwrap_or(u64::MAX));
        order
            .into_iter()
            .filter_map(|i| self.list.get(i).cloned())
            .collect()
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

    /// A target the program chose cannot make its line read as two entries: spaces,
    /// quotes and controls come out quoted and escaped, a long one is cut, and an entry
    /// without a hint has no arrow.
    #[test]
    fn a_target_is_shown_quoted_when_it_is_not_plain_and_cut_when_long() {
        let d = |target: &str, hint: &str| Denial {
            wall: Wall::Layout,
            operation: "write".into(),
            target: Some(target.into()),
            count: 1,
            hint: hint.into(),
        };
        assert_eq!(
            d("/usr/lib/x", "read-only").to_string(),
            "layout   write /usr/lib/x               → read-only"
        );
        let forged = format!(
            "/usr/lib/x{}seccomp  ptrace(PTRACE_ATTACH)   → allow_ptrace = true",
            " ".repeat(70)
        );
        let line = d(&forged, "read-only").to_string();
        assert!(line.starts_with("layout   write \"/usr/lib/x "), "{line}");
        assert_eq!(line.matches(" → ").count(), 2, "{line}");
        assert!(line.ends_with("\" → read-only"), "{line}");
        assert_eq!(
            d("/tmp/a\"b\u{1b}[2J", "h").to_string(),
            "layout   write \"/tmp/a\\\"b\\u{1b}[2J\"     → h"
        );
        let long = format!("/{}", "a".repeat(400));
        let line = d(&long, "h").to_string();
        assert!(
            line.contains(&format!("/{}…", "a".repeat(SHOWN_TARGET - 1))),
            "{line}"
        );
        assert!(!line.contains(&"a".repeat(SHOWN_TARGET)), "{line}");
        let mut over = d("x", "");
        over.target = None;
        over.operation = Tally::OVERFLOW.into();
        assert_eq!(over.to_string(), format!("layout   {}", Tally::OVERFLOW));
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
