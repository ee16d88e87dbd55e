//! macOS: a Seatbelt profile compiled into the child by `sandbox_init(3)` before `exec`.
//!
//! The parent ([`prepare`]) generates the SBPL text ([`crate::backend::sbpl`]) and holds it
//! as a `CString`; the child ([`child`]) hands that string to `sandbox_init` and nothing
//! else. The host process itself is never sandboxed: `sandbox_init` applies to the calling
//! process, so it must only ever run in the forked child.
//!
//! A failure travels back as the compiler's message, copied into a fixed
//! [`child::REPORT_LEN`]-byte buffer that the spawn path writes to its report pipe; the
//! parent decodes it with [`crate::error::InitError::from_report`].

pub mod child;
pub mod prepare;

pub use child::apply_in_child;
pub use prepare::Prepared;
