//! In-process guards: checks a host runs in its own process, off the spawn path, on what
//! crosses the sandbox boundary without reaching the kernel sandbox.
//!
//! - [`path`]: file tools stay in the workspace, away from denied and protected names.
//! - [`url`]: fetch tools reach no private, loopback or metadata address (SSRF).
//! - [`egress`]: the egress proxy of `network = "allow"`: a domain allowlist, one DNS
//!   lookup per connection checked by the SSRF rules, HTTP and SOCKS5 parsers, the threads.
//! - [`tools`]: the tools dir listing for a host's dashboard.
//! - [`leak`]: find secrets in a worker's output, raw or encoded.
//! - [`redact`]: replace the secrets the host knows, in one pass or in a stream, matched
//!   in the text as a terminal draws it.
//! - [`terminal`]: drop the escape sequences that write a terminal's clipboard or make it
//!   answer, from output bound for a terminal.

pub mod egress;
pub mod leak;
pub mod path;
pub mod redact;
pub mod terminal;
pub mod tools;
pub mod url;
