//! What a host or the CLI may print about a sandbox without running it: the plan its
//! commands replay ([`PlanDescription`], from [`Sandbox::plan`](crate::Sandbox::plan)) and
//! the macOS profile a policy gets ([`macos_profile`]). The plan itself stays internal.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

use crate::backend::sbpl;
use crate::error::{Conflict, Error, PlanError};
use crate::plan::{EgressPlan, Listen, Plan, RealFs};
use crate::policy::{HostPattern, Layer, Policy};

/// The plan a sandbox's commands replay, for people and tools: the layer, the namespaces,
/// `PATH` inside, the egress proxy of `network = "allow"` and every step in order, each as
/// the words a failure of it would name (`bind read-only /usr`, `mount proc /proc`).
/// `Display` prints it one step a line; serialized it is the object `stockade plan --json`
/// prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PlanDescription {
    /// The layer the plan realizes.
    pub layer: Layer,
    /// The canonical workspace (the same path inside).
    pub workspace: PathBuf,
    /// The namespaces the plan creates.
    pub namespaces: PlanNamespaces,
    /// The directories on `PATH` inside, in order (the tools dir first).
    pub path: Vec<PathBuf>,
    /// With `network = "allow"`: what the egress proxy lets through and where it listens;
    /// `None` (JSON `null`) for the other modes.
    pub egress: Option<PlanEgress>,
    /// The policy's `[sandbox.leak]` patterns, which the scans of every command's output
    /// look for beside the built-in formats (JSON: `[{"name": …, "regex": …}]`).
    pub leak_patterns: Vec<HostPattern>,
    /// The layout and process steps, in order.
    pub steps: Vec<String>,
}

/// The egress side of a [`PlanDescription`]: the program's only route out with
/// `network = "allow"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PlanEgress {
    /// The policy's `allow_domains`, as written: the names and addresses the proxy lets
    /// the program reach (empty: none).
    pub allow_domains: Vec<String>,
    /// The policy's `allow_private`, as written: the non-public ranges that allowed names
    /// may resolve into.
    pub allow_private: Vec<String>,
    /// Where the proxy listens for the program.
    pub listen: PlanListen,
}

/// Where the egress proxy of a [`PlanEgress`] listens. Serialized with a `kind` tag:
/// `{"kind": "inside", "http": "127.0.0.1:3128", "socks": "127.0.0.1:1080"}` or
/// `{"kind": "host_loopback"}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PlanListen {
    /// The full layer: on the loopback of the sandbox's own network namespace, the same
    /// addresses in every sandbox; the host serves the connections from its own network.
    Inside {
        /// The HTTP proxy (absolute-form requests and `CONNECT`).
        http: SocketAddr,
        /// The SOCKS5 proxy.
        socks: SocketAddr,
    },
    /// Layer 2, macOS and passthrough: on the host's loopback, on ports the kernel picks
    /// at each spawn (the program finds them in `HTTP_PROXY` and `ALL_PROXY`).
    HostLoopback,
}

impl fmt::Display for PlanListen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanListen::Inside { http, socks } => write!(
                f,
                "{http} (HTTP), {socks} (SOCKS5) inside the sandbox's network namespace"
            ),
            PlanListen::HostLoopback => {
                f.write_str("the host's loopback, ports picked at each spawn")
            }
        }
    }
}

impl PlanEgress {
    fn new(egress: &EgressPlan) -> PlanEgress {
        PlanEgress {
            allow_domains: egress.allow_domains.clone(),
            allow_private: egress.allow_private.clone(),
            listen: match egress.listen {
                Listen::Inside { http, socks } => PlanListen::Inside { http, socks },
                Listen::HostLoopback => PlanListen::HostLoopback,
            },
        }
    }
}

/// The namespaces of a [`PlanDescription`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PlanNamespaces {
    /// New user, mount, PID, IPC and UTS namespaces.
    #[serde(rename = "user_mount_pid_ipc_uts")]
    pub base: bool,
    /// A new network namespace (with only `lo`).
    pub net: bool,
}

impl PlanDescription {
    pub(super) fn new(plan: &Plan) -> PlanDescription {
        PlanDescription {
            layer: plan.layer,
            workspace: plan.workspace.clone(),
            namespaces: PlanNamespaces {
                base: plan.namespaces.base,
                net: plan.namespaces.net,
            },
            path: plan.path.clone(),
            egress: plan.egress.as_ref().map(PlanEgress::new),
            leak_patterns: Vec::new(),
            steps: plan.steps.iter().map(ToString::to_string).collect(),
        }
    }
}

impl fmt::Display for PlanDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "layer: {}", self.layer)?;
        writeln!(f, "workspace: {}", self.workspace.display())?;
        if let Some(e) = &self.egress {
            let list = |l: &[String], empty: &str| match l {
                [] => empty.to_string(),
                l => l.join(", "),
            };
            writeln!(
                f,
                "allow_domains: {}",
                list(&e.allow_domains, "(none: every connection is refused)")
            )?;
            writeln!(f, "allow_private: {}", list(&e.allow_private, "(none)"))?;
            writeln!(f, "egress proxy: {}", e.listen)?;
        }
        for p in &self.leak_patterns {
            writeln!(f, "leak pattern: {} = {}", p.name, p.regex)?;
        }
        for (i, s) in self.steps.iter().enumerate() {
            writeln!(f, "{i:>3}  {s}")?;
        }
        Ok(())
    }
}

/// The Seatbelt (SBPL) profile that macOS's backend applies for `policy`, generated on any
/// OS: the plan of macOS's full layer ([`Sandbox`](crate::Sandbox) on macOS), its paths
/// resolved on this host as macOS would see them (`/tmp` is `/private/tmp`), without what
/// each spawn adds: its `TMPDIR`, and with `network = "allow"` the ports of the egress
/// proxy, which the host picks per spawn. Those ports print as placeholders,
/// `(remote tcp4 "localhost:<HTTP proxy port, per spawn>")`, which are not ports: the text
/// is for reading, and the profile a spawn applies names the real ones.
///
/// # Errors
///
/// [`Error::Policy`] for an invalid policy, [`Error::Plan`] when its workspace is unusable,
/// [`Error::Profile`] when a path cannot be written into a profile.
pub fn macos_profile(policy: &Policy) -> Result<String, Error> {
    policy.validate()?;
    let plan = Plan::seatbelt(policy, &RealFs)?;
    let input = plan
        .walls
        .sbpl
        .ok_or(PlanError::Conflict(Conflict::NoProfileInput))?;
    Ok(sbpl::plan_profile(&input)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SbplError;
    use crate::policy::Network;

    fn policy(ws: &std::path::Path, network: Network) -> Policy {
        Policy {
            network,
            allow_domains: match network {
                Network::Allow => vec!["github.com".into()],
                _ => vec![],
            },
            ..Policy::with_workspace(ws)
        }
    }

    #[test]
    fn an_allow_plan_prints_placeholders_for_the_ports_a_spawn_picks() {
        let ws = tempfile::tempdir().unwrap();
        let text = macos_profile(&policy(ws.path(), Network::Allow)).unwrap();
        let rule = "(allow network-outbound\n    \
                    (remote tcp4 \"localhost:<HTTP proxy port, per spawn>\")\n    \
                    (remote tcp4 \"localhost:<SOCKS5 proxy port, per spawn>\"))\n";
        assert!(text.contains(rule), "{text}");
        assert_eq!(text.matches("network-").count(), 1, "{text}");
        // What a spawn applies is generated from the same input, and refuses it until the
        // spawn's ports are set: the placeholders never reach `sandbox_init`.
        let mut input = Plan::seatbelt(&policy(ws.path(), Network::Allow), &RealFs)
            .unwrap()
            .walls
            .sbpl
            .unwrap();
        assert_eq!(sbpl::profile(&input), Err(SbplError::NoProxyPort));
        input.proxy_ports = vec![50001, 50002];
        let spawn = sbpl::profile(&input).unwrap();
        assert!(!spawn.contains("per spawn"), "{spawn}");
        assert_eq!(
            spawn,
            text.replace("<HTTP proxy port, per spawn>", "50001")
                .replace("<SOCKS5 proxy port, per spawn>", "50002")
        );
    }

    #[test]
    fn none_and_full_plans_print_what_a_spawn_applies() {
        let ws = tempfile::tempdir().unwrap();
        for network in [Network::None, Network::Full] {
            let text = macos_profile(&policy(ws.path(), network)).unwrap();
            assert!(!text.contains("per spawn"), "{text}");
            let input = Plan::seatbelt(&policy(ws.path(), network), &RealFs)
                .unwrap()
                .walls
                .sbpl
                .unwrap();
            assert_eq!(sbpl::profile(&input).unwrap(), text);
        }
    }
}
