//! The device nodes the full layer binds from the host's `/dev`, and which of them a
//! host must have: each is checked, without following a symlink, to be the character
//! device its name says. `/dev/null` is required (the masks bind it over what they hide,
//! and [`Stdio::null`](crate::Stdio::null) opens it); a missing one of the others is left
//! out, as on the host (a container may have no `/dev/tty`); any node that is something
//! else is refused, so that no program reads a file where it expects a device.

use std::path::{Path, PathBuf};

use super::{HostFs, Step};
use crate::error::{NodeKind, PlanError};

/// A device node under `/dev` that the full layer binds from the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevNode {
    /// Its host path, the same inside.
    pub path: &'static str,
    /// The character device it must be: `(major, minor)` (Linux's numbers).
    pub device: (u32, u32),
    /// Whether a host without it is refused (else the node is left out).
    pub required: bool,
}

/// The device nodes under `/dev` bound from the host (`Documentation/admin-guide/devices.txt`).
#[cfg_attr(not(any(target_os = "linux", feature = "internals")), allow(dead_code))]
pub const DEV_NODES: &[DevNode] = &[
    NULL,
    node("/dev/zero", (1, 5)),
    node("/dev/full", (1, 7)),
    node("/dev/random", (1, 8)),
    node("/dev/urandom", (1, 9)),
    node("/dev/tty", (5, 0)),
];

/// `/dev/null`: the masks' source and [`Stdio::null`](crate::Stdio::null)'s file.
pub const NULL: DevNode = DevNode {
    path: "/dev/null",
    device: (1, 3),
    required: true,
};

const fn node(path: &'static str, device: (u32, u32)) -> DevNode {
    DevNode {
        path,
        device,
        required: false,
    }
}

impl DevNode {
    /// Whether `found` may stand for this node: `Ok(true)` when it is the device,
    /// `Ok(false)` when it is missing and may be left out.
    ///
    /// # Errors
    ///
    /// [`PlanError::DeviceNode`] when it is something else, or missing and required.
    pub fn check(&self, found: NodeKind) -> Result<bool, PlanError> {
        let (major, minor) = self.device;
        match found {
            NodeKind::CharDevice { major: a, minor: b } if (a, b) == (major, minor) => Ok(true),
            NodeKind::Missing if !self.required => Ok(false),
            found => Err(PlanError::DeviceNode {
                path: PathBuf::from(self.path),
                wanted: self.device,
                found,
            }),
        }
    }
}

/// The full layer's `/dev` step, with each of [`DEV_NODES`] the host has. A missing
/// optional node is left out with a `tracing` warning.
///
/// # Errors
///
/// [`PlanError::DeviceNode`] for a node that is not its device, or a missing `/dev/null`.
pub(super) fn dev_step(fs: &dyn HostFs) -> Result<Step, PlanError> {
    let mut nodes = Vec::new();
    for n in DEV_NODES {
        let path = Path::new(n.path);
        if n.check(fs.node(path))? {
            nodes.push(path.to_path_buf());
        } else {
            tracing::warn!(
                path = n.path,
                "stockade: this host has no such device node; the sandbox has none either"
            );
        }
    }
    Ok(Step::Dev { nodes })
}
