//! [`NodeKind`]: what a host path is, for the device nodes a plan checks.

use std::path::{Path, PathBuf};

/// What a host path is, as [`PlanError::DeviceNode`](super::PlanError::DeviceNode) reports it (a final symlink not
/// followed).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeKind {
    /// Nothing is there.
    Missing,
    /// A symbolic link with this target (as read, not resolved).
    Symlink(PathBuf),
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A character device with these numbers.
    CharDevice {
        /// The major number.
        major: u32,
        /// The minor number.
        minor: u32,
    },
    /// A block device with these numbers.
    BlockDevice {
        /// The major number.
        major: u32,
        /// The minor number.
        minor: u32,
    },
    /// A named pipe.
    Fifo,
    /// A unix socket.
    Socket,
}

impl std::fmt::Display for NodeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeKind::Missing => f.write_str("missing"),
            NodeKind::Symlink(target) => write!(f, "a symbolic link (to {})", target.display()),
            NodeKind::Dir => f.write_str("a directory"),
            NodeKind::File => f.write_str("a regular file"),
            NodeKind::CharDevice { major, minor } => {
                write!(f, "the character device {major}:{minor}")
            }
            NodeKind::BlockDevice { major, minor } => {
                write!(f, "the block device {major}:{minor}")
            }
            NodeKind::Fifo => f.write_str("a named pipe"),
            NodeKind::Socket => f.write_str("a socket"),
        }
    }
}

/// [`super::PlanError::DeviceNode`]'s message.
pub(super) fn device_node(path: &Path, (major, minor): (u32, u32), found: &NodeKind) -> String {
    let wanted = format!("the character device {major}:{minor}");
    match found {
        NodeKind::Missing => format!(
            "{} is missing on this host; the sandbox needs it ({wanted})",
            path.display()
        ),
        _ => format!("{} is {found}, not {wanted}", path.display()),
    }
}
