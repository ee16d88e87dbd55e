//! In-process guards, off the spawn path: checks a host runs on what crosses the sandbox
//! boundary in its own process.
//!
//! - [`leak`]: find secrets in a worker's output, raw or encoded.
//! - [`redact`]: replace the secrets the host knows, in one pass or in a stream.

pub mod leak;
pub mod redact;
