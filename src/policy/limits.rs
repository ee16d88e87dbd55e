//! `[sandbox.limits]`: how much of the machine one sandbox may take, and `Duration`s
//! written as `"90s"` or `"10m"`.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ByteSize;

/// Resource limits of one sandbox (one command).
///
/// Every limit is optional; by default none applies except `core_dumps = false`. What each
/// layer enforces, and how, is in `SECURITY.md`: the whole-sandbox limits (`memory`,
/// `processes`, `cpu`) need a cgroup the host may use (root, or a delegated cgroup); the
/// per-process ones are rlimits and hold everywhere; `wall_time` is enforced by the host.
///
/// ```
/// let p = stockade::Policy::from_toml(r#"
///     [limits]
///     memory = "2GiB"
///     processes = 256
///     wall_time = "10m"
/// "#).unwrap();
/// assert_eq!(p.limits.processes, Some(256));
/// assert_eq!(p.limits.wall_time.unwrap().as_secs(), 600);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Memory of the whole sandbox, swap included (a cgroup's limit): past it the kernel's
    /// OOM killer ends a process of the sandbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<ByteSize>,
    /// Processes (and threads) of the whole sandbox at once: a cgroup's `pids.max`, else,
    /// on the full layer of a host that is not root, `RLIMIT_NPROC` in the sandbox's own
    /// user namespace. `fork` fails with `EAGAIN` past it.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "at_least_one"
    )]
    pub processes: Option<u64>,
    /// CPU time per wall-clock second of the whole sandbox, in cores (`1.5`): a cgroup's
    /// CPU bandwidth. The program is throttled, not ended.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "positive_cores"
    )]
    pub cpu: Option<f64>,
    /// How long the sandbox may run, from its spawn: then every process of it is killed.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "duration::serialize",
        deserialize_with = "duration::deserialize"
    )]
    pub wall_time: Option<Duration>,
    /// CPU time of each process (`RLIMIT_CPU`, whole seconds, rounded up): `SIGXCPU`, then
    /// `SIGKILL` a second later.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "duration::serialize",
        deserialize_with = "duration::deserialize"
    )]
    pub cpu_time: Option<Duration>,
    /// Open files of each process (`RLIMIT_NOFILE`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "at_least_one"
    )]
    pub open_files: Option<u64>,
    /// The largest file each process may write (`RLIMIT_FSIZE`): `SIGXFSZ` past it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_size: Option<ByteSize>,
    /// Let processes dump core (`RLIMIT_CORE` left as the host has it). Default `false`:
    /// `RLIMIT_CORE` is 0, so that no core file of a sandboxed process lands anywhere.
    pub core_dumps: bool,
}

/// Every key of a `[limits]` table.
pub const LIMITS_KEYS: &[&str] = &[
    "memory",
    "processes",
    "cpu",
    "wall_time",
    "cpu_time",
    "open_files",
    "file_size",
    "core_dumps",
];

impl Limits {
    /// Whether a limit of the whole sandbox needs a cgroup: `memory` or `cpu` (and
    /// `processes` where no per-user-namespace count can stand in; see
    /// [`Limits::processes`]).
    pub fn wants_cgroup(&self) -> bool {
        self.memory.is_some() || self.cpu.is_some() || self.processes.is_some()
    }
}

fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<u64>::deserialize(d)? {
        Some(0) => Err(serde::de::Error::custom("must be at least 1")),
        v => Ok(v),
    }
}

fn positive_cores<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Option::<f64>::deserialize(d)?;
    match v {
        Some(c) if !(c.is_finite() && c >= 0.01) => Err(serde::de::Error::custom(format!(
            "invalid cpu {c} (expected a number of cores of at least 0.01, e.g. 1.5)"
        ))),
        v => Ok(v),
    }
}

/// Parses `"90s"`, `"10m"`, `"1h"`, `"1h30m"`, `"500ms"` or a plain number of seconds.
///
/// ```
/// use std::time::Duration;
/// use stockade::policy::parse_duration;
/// assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
/// assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
/// assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
/// assert_eq!(parse_duration("ten"), None);
/// ```
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok().map(Duration::from_secs);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" | "min" => Duration::from_secs(n.checked_mul(60)?),
            "h" => Duration::from_secs(n.checked_mul(3600)?),
            "d" => Duration::from_secs(n.checked_mul(86400)?),
            _ => return None,
        };
        rest = &rest[unit_len..];
        total = total.checked_add(part)?;
    }
    Some(total)
}

/// A duration as the policy writes it: `"10m"`, `"90s"`, `"1h30m"`, `"250ms"`.
pub struct ShownDuration(pub Duration);

impl fmt::Display for ShownDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.subsec_nanos() != 0 {
            return write!(f, "{}ms", d.as_millis());
        }
        let s = d.as_secs();
        if s == 0 {
            return f.write_str("0s");
        }
        let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if sec > 0 {
            write!(f, "{sec}s")?;
        }
        Ok(())
    }
}

mod duration {
    use super::*;

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&ShownDuration(*d).to_string()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(u64),
            Text(String),
        }
        match Option::<Raw>::deserialize(d)? {
            None => Ok(None),
            Some(Raw::Num(n)) => Ok(Some(Duration::from_secs(n))),
            Some(Raw::Text(t)) => match parse_duration(&t) {
                Some(d) if !d.is_zero() => Ok(Some(d)),
                _ => Err(serde::de::Error::custom(format!(
                    "invalid duration {t:?} (expected e.g. \"90s\", \"10m\", \"1h30m\")"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1d"), Some(Duration::from_secs(86400)));
        for bad in [
            "",
            "m",
            "10x",
            "1.5m",
            "-3s",
            "s10",
            "99999999999999999999h",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        for (d, shown) in [(600, "10m"), (5400, "1h30m"), (2, "2s"), (3601, "1h1s")] {
            assert_eq!(ShownDuration(Duration::from_secs(d)).to_string(), shown);
            assert_eq!(parse_duration(shown), Some(Duration::from_secs(d)));
        }
        assert_eq!(
            ShownDuration(Duration::from_millis(1500)).to_string(),
            "1500ms"
        );
    }

    #[test]
    fn keys_are_the_fields() {
        let Limits {
            memory: _,
            processes: _,
            cpu: _,
            wall_time: _,
            cpu_time: _,
            open_files: _,
            file_size: _,
            core_dumps: _,
        } = Limits::default();
        let full = Limits {
            memory: Some(ByteSize::mib(1)),
            processes: Some(1),
            cpu: Some(1.0),
            wall_time: Some(Duration::from_secs(1)),
            cpu_time: Some(Duration::from_secs(1)),
            open_files: Some(1),
            file_size: Some(ByteSize::mib(1)),
            core_dumps: true,
        };
        let table = toml::Table::try_from(&full).unwrap();
        let mut keys: Vec<&str> = table.keys().map(String::as_str).collect();
        let mut want = LIMITS_KEYS.to_vec();
        keys.sort_unstable();
        want.sort_unstable();
        assert_eq!(keys, want);
        let back: Limits = toml::from_str(&toml::to_string(&full).unwrap()).unwrap();
        assert_eq!(back, full);
    }

    #[test]
    fn bad_values_are_refused_with_their_key() {
        for (text, key) in [
            ("[limits]\nwall_time = \"soon\"", "limits.wall_time"),
            ("[limits]\ncpu = 0", "limits.cpu"),
            ("[limits]\ncpu = -1.5", "limits.cpu"),
            ("[limits]\nmemory = \"lots\"", "limits.memory"),
            ("[limits]\nprocesses = -1", "limits.processes"),
            ("[limits]\nprocesses = 0", "limits.processes"),
            ("[limits]\nopen_files = 0", "limits.open_files"),
            ("[limits]\nwall_time = \"0s\"", "limits.wall_time"),
            ("[limits]\nmemroy = \"1G\"", "limits.memroy"),
        ] {
            let err = crate::Policy::from_toml(text).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
            assert!(err.contains("line 2"), "{text}: {err}");
        }
    }
}
