//! The `stockade` command line: run a program in the sandbox, show what the kernel
//! allows, or print the plan.
//!
//! Exit status of `run`: the program's own; 128+N when it died by signal N; 125 with
//! `stockade: <step>: <path>: <error>` on stderr when setup failed; 126 when the program
//! was found but could not be run; 127 when it was not found.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use stockade::{Error, Network, Policy, Sandbox, SpawnError};

#[derive(Parser)]
#[command(
    name = "stockade",
    version,
    about = "Run programs in OS-level containment"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run PROGRAM in the sandbox.
    Run {
        #[command(flatten)]
        policy: PolicyArgs,
        /// Working directory inside (default: the workspace).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Set a variable for the program (refused for LD_PRELOAD and the like).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Set a variable that holds a secret: with --scrub its value is redacted.
        #[arg(long = "secret-env", value_name = "NAME=VALUE")]
        secret_env: Vec<String>,
        /// Redact known secrets (--secret-env values and passed-through variables) from
        /// the program's output, and report leaked secret patterns on stderr.
        #[arg(long)]
        scrub: bool,
        /// The program and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        program: Vec<OsString>,
    },
    /// Show what this kernel allows, layer by layer.
    Detect {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Scan standard input for secrets; print findings (fingerprints only). Exit 1 when
    /// something was found, 0 when clean.
    Scan {
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Print the mounts and steps a run would perform, without running anything.
    Plan {
        #[command(flatten)]
        policy: PolicyArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Print the plan for this OS instead of this host's (`macos`: the SBPL profile).
        #[arg(long, value_enum)]
        os: Option<OsArg>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum OsArg {
    Linux,
    Macos,
}

#[derive(Clone, Copy, ValueEnum)]
enum NetworkArg {
    None,
    Full,
}

#[derive(Args)]
struct PolicyArgs {
    /// A TOML policy file (the keys of a `[sandbox]` table).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The read-write workspace (default: the current directory).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// A directory masked inside (no read, write or listing).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// A further read-write path.
    #[arg(long = "writable")]
    writable: Vec<PathBuf>,
    /// A further read-only path.
    #[arg(long = "read-only")]
    read_only: Vec<PathBuf>,
    /// A tools directory: read-only and first on PATH.
    #[arg(long)]
    tools_dir: Option<PathBuf>,
    /// `none`: a private network namespace with loopback only.
    #[arg(long, value_enum)]
    network: Option<NetworkArg>,
    /// A host variable to pass through.
    #[arg(long = "passthrough-env")]
    passthrough_env: Vec<String>,
    /// Keep the terminal's session (no setsid), for interactive programs.
    #[arg(long)]
    keep_session: bool,
    /// Run on this layer on purpose: full, landlock (no namespaces) or passthrough.
    #[arg(long, value_enum)]
    layer: Option<LayerArg>,
    /// When the wanted layer is missing: degrade (warn, the default) or refuse.
    #[arg(long, value_enum)]
    fallback: Option<FallbackArg>,
    /// Let the program ptrace its own sandboxed processes (strace, gdb).
    #[arg(long)]
    allow_ptrace: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum LayerArg {
    Full,
    Landlock,
    Passthrough,
}

#[derive(Clone, Copy, ValueEnum)]
enum FallbackArg {
    Degrade,
    Refuse,
}

impl PolicyArgs {
    /// The sandbox for these flags, or the exit code after printing why not. A layer
    /// weaker than the one wanted is said on stderr (the library says it through
    /// `tracing`, which this binary does not subscribe to).
    fn sandbox(&self) -> Result<Sandbox, ExitCode> {
        let policy = self.policy().map_err(|e| fail(125, e))?;
        let sandbox = Sandbox::new(policy).map_err(|e| fail(125, e))?;
        if let Some(d) = sandbox.degradation() {
            eprintln!(
                "stockade: warning: layer `{}` is not available ({}); running on layer `{}`",
                d.wanted, d.reason, d.running
            );
        }
        Ok(sandbox)
    }

    fn policy(&self) -> Result<Policy, String> {
        let mut p = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Policy::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))?
            }
            None => Policy::default(),
        };
        let abs = |p: &PathBuf| -> Result<PathBuf, String> {
            std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
        };
        match &self.workspace {
            Some(w) => p.workspace = Some(abs(w)?),
            None if p.workspace.is_none() => {
                p.workspace =
                    Some(std::env::current_dir().map_err(|e| format!("current directory: {e}"))?)
            }
            None => {}
        }
        if let Some(d) = &self.data_dir {
            p.data_dir = Some(abs(d)?);
        }
        if let Some(t) = &self.tools_dir {
            p.tools_dir = Some(abs(t)?);
        }
        for w in &self.writable {
            p.writable_paths.push(abs(w)?);
        }
        for r in &self.read_only {
            p.read_only.push(abs(r)?);
        }
        if let Some(n) = self.network {
            p.network = match n {
                NetworkArg::None => Network::None,
                NetworkArg::Full => Network::Full,
            };
        }
        p.passthrough_env
            .extend(self.passthrough_env.iter().cloned());
        p.keep_session |= self.keep_session;
        p.allow_ptrace |= self.allow_ptrace;
        if let Some(l) = self.layer {
            p.layer = Some(match l {
                LayerArg::Full => stockade::Layer::Full,
                LayerArg::Landlock => stockade::Layer::Landlock,
                LayerArg::Passthrough => stockade::Layer::Passthrough,
            });
        }
        if let Some(f) = self.fallback {
            p.fallback = match f {
                FallbackArg::Degrade => stockade::Fallback::Degrade,
                FallbackArg::Refuse => stockade::Fallback::Refuse,
            };
        }
        p.validate().map_err(|e| e.to_string())?;
        Ok(p)
    }
}

/// `println!` that ends quietly when stdout is closed (`stockade detect | head`).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run {
            policy,
            cwd,
            env,
            secret_env,
            scrub,
            program,
        } => run(&policy, cwd, &env, &secret_env, scrub, &program),
        Cmd::Scan { json } => {
            match stockade::scan_stream(std::io::stdin().lock(), json, std::io::stdout().lock()) {
                Ok(true) => ExitCode::from(1),
                Ok(false) => ExitCode::SUCCESS,
                Err(e) => fail(2, format!("scan: {e}")),
            }
        }
        Cmd::Detect { json } => detect(json),
        Cmd::Plan {
            policy,
            json,
            os: Some(OsArg::Macos),
        } => macos_profile(&policy, json),
        Cmd::Plan { policy, json, .. } => plan(&policy, json),
    }
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("stockade: {msg}");
    ExitCode::from(code)
}

fn run(
    args: &PolicyArgs,
    cwd: Option<PathBuf>,
    env: &[String],
    secret_env: &[String],
    scrub: bool,
    program: &[OsString],
) -> ExitCode {
    let sandbox = match args.sandbox() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let Some((prog, rest)) = program.split_first() else {
        return fail(125, "no program given");
    };
    if scrub {
        // The passed-through variables are typically tokens (GH_TOKEN): known secrets.
        let known = sandbox
            .policy()
            .passthrough_env
            .iter()
            .filter_map(std::env::var_os)
            .map(|v| v.into_encoded_bytes())
            .collect::<Vec<_>>();
        sandbox.set_secrets(known);
    }
    let mut cmd = sandbox.command(prog);
    cmd.args(rest);
    if let Some(c) = cwd {
        cmd.current_dir(c);
    }
    for kv in env {
        let Some((k, v)) = kv.split_once('=') else {
            return fail(125, format!("--env {kv:?}: expected NAME=VALUE"));
        };
        cmd.env(k, v);
    }
    for kv in secret_env {
        let Some((k, v)) = kv.split_once('=') else {
            return fail(125, "--secret-env: expected NAME=VALUE");
        };
        cmd.secret_env(k, v);
    }
    if scrub {
        return run_scrubbed(cmd);
    }
    match cmd.status() {
        Ok(status) => exit_code(status),
        Err(Error::Spawn(e @ SpawnError::NotFound { .. })) => fail(127, e),
        Err(Error::Spawn(e @ SpawnError::Setup { .. })) if is_exec_failure(&e) => fail(126, e),
        Err(e) => fail(125, e),
    }
}

/// Runs with stdout and stderr piped through redacting writers, and reports leaked
/// secret patterns (fingerprints only) on stderr.
fn run_scrubbed(mut cmd: stockade::Command) -> ExitCode {
    use std::io::Write;
    cmd.stdout(stockade::Stdio::piped())
        .stderr(stockade::Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(Error::Spawn(e @ SpawnError::NotFound { .. })) => return fail(127, e),
        Err(e) => return fail(125, e),
    };
    let redactor = child.redactor().clone();
    let pump = |mut from: Box<dyn std::io::Read + Send>,
                to: Box<dyn Write + Send>,
                r: stockade::Redactor| {
        std::thread::spawn(move || {
            let mut w = stockade::RedactingWriter::new(r, to);
            let _ = std::io::copy(&mut from, &mut w);
            w.finish().map(|(_, findings)| findings).unwrap_or_default()
        })
    };
    let out = child
        .stdout
        .take()
        .map(|o| pump(Box::new(o), Box::new(std::io::stdout()), redactor.clone()));
    let err = child
        .stderr
        .take()
        .map(|e| pump(Box::new(e), Box::new(std::io::stderr()), redactor.clone()));
    let mut findings = Vec::new();
    for h in [out, err].into_iter().flatten() {
        findings.extend(h.join().unwrap_or_default());
    }
    let status = match child.wait() {
        Ok(s) => s,
        Err(e) => return fail(125, e),
    };
    for f in &findings {
        eprintln!("stockade: leak: {f}");
    }
    exit_code(status)
}

/// The program's own code, or 128+N when it died by signal N.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code as u8),
        (None, Some(sig)) => ExitCode::from(128u8.wrapping_add(sig as u8)),
        _ => ExitCode::from(125),
    }
}

fn is_exec_failure(e: &SpawnError) -> bool {
    matches!(e, SpawnError::Setup { step, .. } if step.starts_with("exec "))
}

fn detect(json: bool) -> ExitCode {
    let caps = stockade::Capabilities::probe();
    if json {
        let layers: Vec<_> = [
            stockade::Layer::Full,
            stockade::Layer::Landlock,
            stockade::Layer::Passthrough,
        ]
        .into_iter()
        .map(|l| serde_json::json!({"layer": l, "status": caps.layer(l)}))
        .collect();
        let out =
            serde_json::json!({"capabilities": caps, "layers": layers, "best": caps.best_layer()});
        out!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let line = |name: &str, a: &stockade::Availability| {
        out!(
            "{name:<16} {}{}",
            if a.available { "yes" } else { "no" },
            a.reason
                .as_deref()
                .map(|r| format!("  ({r})"))
                .unwrap_or_default()
        )
    };
    out!("os               {}", caps.os);
    line("user namespaces", &caps.user_namespaces);
    line("fresh /proc", &caps.fresh_proc);
    line("landlock", &caps.landlock);
    out!("landlock ABI     {}", caps.landlock_abi);
    line("seccomp", &caps.seccomp);
    out!();
    for l in [
        stockade::Layer::Full,
        stockade::Layer::Landlock,
        stockade::Layer::Passthrough,
    ] {
        line(&format!("layer {l}"), &caps.layer(l));
    }
    out!("best layer       {}", caps.best_layer());
    ExitCode::SUCCESS
}

fn plan(args: &PolicyArgs, json: bool) -> ExitCode {
    let sandbox = match args.sandbox() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let plan = &sandbox.plan();
    if json {
        let steps: Vec<String> = plan.steps.iter().map(ToString::to_string).collect();
        let out = serde_json::json!({
            "layer": plan.layer,
            "workspace": plan.workspace,
            "namespaces": {"user_mount_pid_ipc_uts": plan.namespaces.base, "net": plan.namespaces.net},
            "path": plan.path,
            "steps": steps,
        });
        out!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        out!("layer: {}", plan.layer);
        out!("workspace: {}", plan.workspace.display());
        for (i, s) in plan.steps.iter().enumerate() {
            out!("{i:>3}  {s}");
        }
    }
    ExitCode::SUCCESS
}

/// The SBPL profile the macOS backend would apply, printed on any OS.
fn macos_profile(args: &PolicyArgs, json: bool) -> ExitCode {
    use stockade::backend::sbpl;
    let policy = match args.policy() {
        Ok(p) => p,
        Err(e) => return fail(125, e),
    };
    let canon = if cfg!(target_os = "macos") {
        sbpl::canonicalize
    } else {
        sbpl::private_alias
    };
    let profile = sbpl::SbplInput::from_policy(&policy, canon).and_then(|i| sbpl::profile(&i));
    match profile {
        Ok(p) if json => {
            out!("{}", serde_json::json!({ "os": "macos", "profile": p }));
            ExitCode::SUCCESS
        }
        Ok(p) => {
            print!("{p}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(125, e),
    }
}
