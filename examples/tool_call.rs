//! A host's tool call, as README's "A tool call" shows it: a time limit of its own, the
//! whole sandbox ended when the call is dropped or times out, and the output scanned line
//! by line, a line with a leaked secret held back before it reaches the agent.
//!
//! `cargo run --example tool_call -- /path/to/workspace 'make test'`

use std::time::Duration;

use stockade::{Policy, Sandbox, Stdio};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let workspace = args.next().unwrap_or_else(|| ".".into());
    let script = args.next().unwrap_or_else(|| "echo hello".into());

    let mut policy = Policy::with_workspace(std::fs::canonicalize(workspace)?);
    policy.limits.wall_time = Some(Duration::from_secs(600)); // the sandbox's own deadline
    let sandbox = Sandbox::new(policy)?;

    let mut child = sandbox
        .command("sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .kill_on_drop(true) // a cancelled call ends everything it started
        .spawn()?;
    let lines = child.stdout_lines().expect("stdout is piped");
    for line in lines.hold(true).max_output(1 << 20) {
        let line = line?;
        if line.held {
            eprintln!("[held: {} secret(s)]", line.findings.len());
            continue;
        }
        print!("{}", String::from_utf8_lossy(&line.bytes));
    }
    match child.wait_timeout(Duration::from_secs(30))? {
        Some(status) => eprintln!("{status}; {:?}", child.termination()),
        None => eprintln!("timed out: dropping the child kills the sandbox"),
    }
    Ok(())
}
