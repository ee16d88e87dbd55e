//! The host's side of `network = "allow"` at one spawn ([`crate::guard::egress`]): the
//! proxy's two listeners, the program's environment that points at them, and the run the
//! sandbox's [`Proxy`] serves on them until the sandbox ends.
//!
//! - The full layer (Linux): the listeners are opened by the setup child inside the
//!   sandbox's network namespace (`Step::EgressListeners`) and come back over a socket pair;
//!   only the sandbox's processes can reach them, and connections out leave from the host's
//!   namespace.
//! - Layer 2, macOS, passthrough: the host opens them on its own loopback, on ports the
//!   kernel picks, and the walls let the program connect to those ports alone.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::error::{Error, SpawnError};
use crate::guard::egress::{Egress, Proxy, Run};
use crate::plan::{Listen, Plan, proxy_env};

/// The proxy that serves every command of a sandbox's state: `None` unless its plan has
/// an egress side.
///
/// # Errors
///
/// [`Error::Policy`] for an `allow_domains` or `allow_private` entry that does not parse
/// (a checked policy has none).
pub(super) fn proxy(plan: &Plan) -> Result<Option<Arc<Proxy>>, Error> {
    let Some(e) = &plan.egress else {
        return Ok(None);
    };
    let allow = crate::policy::Allowlist::parse(&e.allow_domains)
        .map_err(crate::policy::PolicyError::from)?;
    let private = crate::policy::Cidr::parse_all(&e.allow_private)
        .map_err(crate::policy::PolicyError::from)?;
    Ok(Some(Arc::new(Proxy::new(Egress::new(allow, private)))))
}

/// One spawn's listeners, before the program runs.
#[derive(Debug)]
pub(super) enum Pending {
    /// The full layer: the socket pair the setup child sends the listeners through.
    #[cfg(target_os = "linux")]
    Inside {
        parent: OwnedFd,
        child: OwnedFd,
        http: SocketAddr,
        socks: SocketAddr,
    },
    /// On the host's loopback.
    Host {
        http: TcpListener,
        socks: TcpListener,
    },
}

impl Pending {
    /// The listeners of a spawn of `plan`, or `None` without an egress side.
    ///
    /// # Errors
    ///
    /// [`SpawnError::Os`] when the socket pair or a listener cannot be made.
    pub(super) fn new(plan: &Plan) -> Result<Option<Pending>, SpawnError> {
        let Some(e) = &plan.egress else {
            return Ok(None);
        };
        match e.listen {
            #[cfg(target_os = "linux")]
            Listen::Inside { http, socks } => {
                let (parent, child) = crate::backend::linux::fd_channel(
                    "socketpair for the egress proxy\'s listeners",
                )?;
                Ok(Some(Pending::Inside {
                    parent,
                    child,
                    http,
                    socks,
                }))
            }
            #[cfg(not(target_os = "linux"))]
            Listen::Inside { .. } => Err(SpawnError::Os {
                call: "open the egress proxy's listeners inside the sandbox",
                source: io::Error::from(io::ErrorKind::Unsupported),
            }),
            Listen::HostLoopback => {
                let listen = || {
                    TcpListener::bind(("127.0.0.1", 0)).map_err(|source| SpawnError::Os {
                        call: "listen on the host's loopback for the egress proxy",
                        source,
                    })
                };
                Ok(Some(Pending::Host {
                    http: listen()?,
                    socks: listen()?,
                }))
            }
        }
    }

    /// The HTTP and SOCKS5 addresses as the program reaches them.
    fn addrs(&self) -> io::Result<(SocketAddr, SocketAddr)> {
        match self {
            #[cfg(target_os = "linux")]
            Pending::Inside { http, socks, .. } => Ok((*http, *socks)),
            Pending::Host { http, socks } => Ok((http.local_addr()?, socks.local_addr()?)),
        }
    }

    /// Sets the proxy variables in `env`, replacing any of the same names (the proxy is
    /// the program's only route: a host's own proxy variables would lead nowhere).
    pub(super) fn set_env(&self, env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>) {
        let Ok((http, socks)) = self.addrs() else {
            return;
        };
        let vars = proxy_env(http, socks);
        env.retain(|(k, _)| !vars.iter().any(|(n, _)| k.as_os_str() == n.as_str()));
        env.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
    }

    /// The ports the walls let the program connect to (on the host's loopback); none for
    /// listeners inside, where the network namespace holds nothing else.
    pub(super) fn ports(&self) -> Vec<u16> {
        match (self, self.addrs()) {
            (Pending::Host { .. }, Ok((http, socks))) => vec![http.port(), socks.port()],
            _ => Vec::new(),
        }
    }

    /// The child's end of the socket pair, or -1.
    #[cfg(target_os = "linux")]
    pub(super) fn child_socket(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Pending::Inside { child, .. } => child.as_raw_fd(),
            Pending::Host { .. } => -1,
        }
    }

    /// After a successful spawn: serves the listeners on `proxy` until `until` (a pidfd of
    /// the sandbox's first process) is readable or the run is ended; with `admitted`
    /// (layer 2, where the host makes the program's connects), only the connections
    /// admitted there.
    ///
    /// # Errors
    ///
    /// The listeners did not come back from the setup child (`ENOMSG`), or the proxy could
    /// not serve them.
    pub(super) fn serve(
        self,
        proxy: &Proxy,
        until: Option<OwnedFd>,
        admitted: Option<crate::guard::egress::Admitted>,
    ) -> io::Result<Run> {
        let (http, socks) = match self {
            #[cfg(target_os = "linux")]
            Pending::Inside { parent, child, .. } => {
                drop(child);
                let mut fds = crate::backend::linux::recv_fds(&parent)?;
                let mut take = |tag: u8| {
                    let i = fds.iter().position(|(t, _)| *t == tag);
                    i.map(|i| TcpListener::from(fds.swap_remove(i).1))
                        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMSG))
                };
                (take(0)?, take(1)?)
            }
            Pending::Host { http, socks } => (http, socks),
        };
        match admitted {
            Some(a) => proxy.serve_run_admitted(http, socks, until, a),
            None => proxy.serve_run(http, socks, until),
        }
    }
}
