//! Backends: the only place that fans out on `target_os`.
//!
//! | OS | module |
//! | --- | --- |
//! | Linux | [`linux`]: namespaces, mounts, Landlock, seccomp |
//! | elsewhere | passthrough (a clean environment only) |

#[cfg(target_os = "linux")]
pub mod linux;
