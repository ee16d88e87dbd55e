//! In-process guards: checks a host runs in its own process, off the spawn path, for tools
//! that never reach the kernel sandbox (file tools, fetch tools, dashboards).

pub mod path;
pub mod tools;
pub mod url;
