//! The `stockade` command line: run a program in the sandbox, show what the kernel
//! allows, or print the plan.
//!
//! `run` forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH and SIGCONT
//! to the program (through the sandbox's init; with a pseudo-terminal of the program's
//! own, SIGWINCH resizes that instead, see `forward`). Its exit status: the program's own; 128+N
//! when it died by signal N; 125 with `stockade: <step>: <path>: <error>` on stderr when
//! setup failed; 126 when the program was found but could not be run; 127 when it was not
//! found; 2 for a usage error (an unknown flag before the program). Errors print with their
//! causes, each OS error with its errno name ([`Report`]).
//!
//! `session --socket PATH` serves a warm session on a unix socket, and `run --session
//! PATH` runs one command in it (see `session_cli`).
//!
//! `run` dies with its caller unless `--no-die-with-parent` is given (see `caller`). It
//! hands the program streams, never the caller's terminal or files: a pseudo-terminal of
//! its own when stdin or stdout is a terminal (unless `--no-pty` or `--keep-session`), and
//! pipes in place of files (see `relay`).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use stockade::error::Report;
use stockade::{Error, Network, Policy, Sandbox, SpawnError};

mod forward;
#[cfg(target_os = "linux")]
#[path = "probe/stat.rs"]
mod proc_stat;
mod relay;
#[cfg(target_os = "linux")]
mod session_cli;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
mod session_wire;
mod shown;

use shown::shown;

/// The static build's allocator: musl's own returns pages to the kernel as soon as a
/// size class empties, so a run of `stockade` spent some 110 `mmap`/`munmap` calls (and
/// their page faults) on clap's and the policy's small, short-lived blocks. dlmalloc keeps
/// its segments (64 KiB at a time) until they grow large. glibc's allocator does not churn
/// like this, and the library itself never chooses an allocator for its host.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

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
    ///
    /// Flags come before PROGRAM; everything from PROGRAM on (or after `--`) is passed to
    /// it verbatim. On Linux, stockade dies with the process that started it, and the
    /// sandbox dies with stockade: killing the caller ends the whole run. Use
    /// --no-die-with-parent to let it outlive its caller.
    ///
    /// The program never gets the caller's terminal or files: when stdin or stdout is a
    /// terminal it gets a pseudo-terminal of its own (see --no-pty), and a file as stdin,
    /// stdout or stderr reaches it as a pipe that stockade copies to or from the file.
    Run {
        #[command(flatten)]
        policy: PolicyArgs,
        /// Working directory inside: the workspace or a directory beneath it (default:
        /// the workspace).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Set a variable for the program (refused for LD_PRELOAD and the like).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Set a variable that holds a secret: with --scrub its value is redacted. NAME
        /// alone takes the value from stockade's own environment, which other users
        /// cannot read; NAME=VALUE puts it on stockade's command line, which every
        /// process on the host can read in /proc/PID/cmdline while the run lasts.
        #[arg(long = "secret-env", value_name = "NAME[=VALUE]")]
        secret_env: Vec<String>,
        /// Redact known secrets (--secret-env values and passed-through variables) from
        /// the program's output, and report leaked secret patterns on stderr.
        #[arg(long)]
        scrub: bool,
        /// Keep running (and keep the sandbox running) when the process that started
        /// stockade exits, for nohup-style use. By default stockade dies with its caller
        /// (Linux: PR_SET_PDEATHSIG), and the sandbox dies with stockade.
        #[arg(long)]
        no_die_with_parent: bool,
        /// Give the program the caller's terminal itself instead of a pseudo-terminal of
        /// its own. By default, when stdin or stdout is a terminal, the program gets its
        /// own (the caller's stays in raw mode while it runs, and is restored), so it
        /// cannot resize or reconfigure the caller's. Useful in a pipeline whose other end
        /// reads the same terminal (`stockade run … | less`). --keep-session implies it.
        /// With --session: the terminal itself instead of filtered pipes.
        #[arg(long)]
        no_pty: bool,
        /// After the run, print on stderr what the whole sandbox used: wall time, user and
        /// system CPU time, peak memory.
        #[arg(long)]
        stats: bool,
        /// After the run, write the same figures, and how the run ended, to FILE as JSON.
        #[arg(long, value_name = "FILE")]
        stats_json: Option<PathBuf>,
        /// After the run, print on stderr what the sandbox denied the program, one line
        /// per distinct denial: the wall, the operation, how often, and the policy change
        /// that would allow it. The program sees the same results as without it.
        #[arg(long)]
        explain: bool,
        /// After the run, write the same denials to FILE as a JSON array of
        /// {wall, operation, target, count, hint}.
        #[arg(long, value_name = "FILE")]
        explain_json: Option<PathBuf>,
        /// Run the program in the session served at SOCKET (`stockade session --socket
        /// SOCKET`) instead of a sandbox of its own: the session's policy holds, so the
        /// policy flags (--config, --workspace, …), --scrub, --stats, --stats-json,
        /// --explain and --explain-json are refused with it. A session's command has no
        /// pseudo-terminal: it gets pipes and sockets as they are, and files and the
        /// caller's terminal through pipes (output bound for the terminal filtered as
        /// without --session; with --no-pty, the terminal itself);
        /// --cwd, --env and --secret-env work as without it. The exit status is the program's, as
        /// without it. SOCKET must be this user's: a socket (not a symbolic link) owned by
        /// the caller, in a directory only the caller can write, served by the caller's
        /// uid.
        #[arg(long, value_name = "SOCKET")]
        session: Option<PathBuf>,
        /// With --session: the processes the program leaves running when it ends (`cmd
        /// &`, daemons) live on until the session ends, instead of ending with it.
        #[arg(long)]
        keep_background: bool,
        /// The program and its arguments.
        #[arg(required = true, trailing_var_arg = true)]
        program: Vec<OsString>,
    },
    /// Serve a warm session at SOCKET: one sandbox, started once, in which each `stockade
    /// run --session SOCKET -- PROGRAM…` runs its program at the cost of a fork and an
    /// exec.
    ///
    /// The socket is made 0600 in its directory, which must be the caller's and writable
    /// by no one else, and the server serves only its own uid. What one command writes to
    /// the workspace, the writable paths and /tmp, the next one sees; nothing else
    /// persists between commands (see --keep-background of run). Clients are served
    /// concurrently. SIGINT, SIGTERM or SIGHUP end the session: running commands are
    /// killed, the sandbox ends, the socket is removed, and the server exits with 128+N.
    /// If the server is killed otherwise, the sandbox dies with it and the socket is
    /// removed all the same. Like run, the server ends with the process (the thread)
    /// that started it: it gets SIGTERM then, and closes the session as for any SIGTERM
    /// (see --no-die-with-parent).
    Session {
        /// Where to serve: a path whose name does not exist yet.
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        /// Keep serving when the process that started the server exits (a server started
        /// for later scripts). By default the server ends with its caller (Linux:
        /// PR_SET_PDEATHSIG with SIGTERM, which closes the session as any SIGTERM does).
        #[arg(long)]
        no_die_with_parent: bool,
        #[command(flatten)]
        policy: PolicyArgs,
    },
    /// (Internal: removes a session's socket when its server has ended.)
    #[command(name = "__session-janitor", hide = true)]
    SessionJanitor {
        dir: PathBuf,
        dir_id: String,
        name: OsString,
        id: String,
    },
    /// Show what this kernel allows, layer by layer, and why a layer is refused: the
    /// recognized cause (an AppArmor or sysctl restriction, a container's seccomp profile,
    /// a hidden or read-only /proc, Landlock not enabled, WSL 1, gVisor) and its remedy.
    Detect {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Scan standard input for secrets; print findings (fingerprints only). Exit 1 when
    /// something was found, 0 when clean.
    ///
    /// Each finding names its pattern: a built-in format, or one of the host's own
    /// (--pattern, and with --config the policy's `[sandbox.leak] patterns`).
    Scan {
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
        /// Also look for a pattern of your own: NAME (a-z, 0-9, _) and a regex in the
        /// `regex` crate's syntax (`acme_key=acme_[a-z0-9]{32}`), in every encoding the
        /// built-in formats are looked for in. Repeatable.
        #[arg(long = "pattern", value_name = "NAME=REGEX", value_parser = parse_pattern)]
        pattern: Vec<stockade::policy::HostPattern>,
        /// A TOML config file (as for `run`): its policy's `[sandbox.leak] patterns` are
        /// looked for too.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// List the changes of a change set (a copy-on-write workspace's runs): added,
    /// modified, deleted, type changed, mode changed, with sizes.
    Changes {
        /// The change set directory.
        dir: PathBuf,
        /// Print a unified diff of the changes instead.
        #[arg(long)]
        diff: bool,
        /// Print JSON.
        #[arg(long, conflicts_with = "diff")]
        json: bool,
    },
    /// Apply a change set to its workspace. Refused entries (FIFOs, devices, setuid files,
    /// hard links to outside files, guarded or denied names, anything reached through a
    /// symlink) and conflicts (workspace entries changed since the run started) are
    /// printed and left alone; the exit status is then 1.
    Apply {
        /// The change set directory.
        dir: PathBuf,
        /// Also apply entries under guard_names (.git/hooks, .git/config); under .git the
        /// .git merge still keeps hooks and unlisted config keys out.
        #[arg(long)]
        allow_guarded: bool,
        /// Also apply entries with a deny_names component (.env, .ssh, ...).
        #[arg(long)]
        allow_denied: bool,
        /// Apply only if the change set's digest is this one, the digest `changes` printed
        /// for the review (`sha256:` and 64 hex digits): a run between the review and the
        /// apply changes it, and nothing is applied.
        #[arg(long, value_name = "DIGEST")]
        expect: Option<String>,
    },
    /// Remove a change set directory and everything in it.
    Discard {
        /// The change set directory.
        dir: PathBuf,
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
    /// A private network namespace with loopback only.
    None,
    /// Only the names of --allow-domain, through stockade's egress proxy.
    Allow,
    /// The host's network (the default).
    Full,
}

#[derive(Args)]
struct PolicyArgs {
    /// A TOML config file: its `[sandbox]` table, its `[agents.sandbox]` table, or its
    /// top level is the policy (exactly one of them); flags add to it.
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
    /// Keep the program's writes to the workspace in a change set at DIR (made when
    /// missing, its parent must exist) instead of the workspace: `workspace_mode =
    /// "overlay"`, `changes_dir = DIR`. Review with `stockade changes DIR`, then
    /// `stockade apply DIR` or `stockade discard DIR`.
    #[arg(long, value_name = "DIR")]
    overlay: Option<PathBuf>,
    /// A further read-only path.
    #[arg(long = "read-only")]
    read_only: Vec<PathBuf>,
    /// A tools directory: read-only and first on PATH.
    #[arg(long)]
    tools_dir: Option<PathBuf>,
    /// Network access: none, allow (the names of --allow-domain only, through an egress
    /// proxy in stockade) or full.
    #[arg(long, value_enum)]
    network: Option<NetworkArg>,
    /// With --network allow: a name the program may reach, `*.` + a name for the names
    /// below it, or an IP address, each with an optional `:PORT` (`github.com`,
    /// `*.githubusercontent.com`, `pypi.org:443`, `[2001:db8::1]:22`).
    #[arg(long = "allow-domain", value_name = "NAME", value_parser = parse_allow_domain)]
    allow_domain: Vec<String>,
    /// With --network allow: a private, loopback or link-local range that allowed names
    /// may resolve into (`10.0.0.0/8`, `127.0.0.1/32`); cloud metadata stays refused.
    #[arg(long = "allow-private", value_name = "CIDR", value_parser = parse_allow_private)]
    allow_private: Vec<String>,
    /// A host variable to pass through.
    #[arg(long = "passthrough-env")]
    passthrough_env: Vec<String>,
    /// Keep the caller's session (no setsid): the program keeps the caller's terminal as
    /// its controlling terminal, and `run` gives it that terminal as stdio (--no-pty).
    /// Interactive programs do not need it: their own pseudo-terminal is their controlling
    /// terminal.
    #[arg(long)]
    keep_session: bool,
    /// Run on this layer on purpose: full, landlock (no namespaces) or passthrough.
    #[arg(long, value_enum)]
    layer: Option<LayerArg>,
    /// When the wanted layer is missing: degrade (warn, the default) or refuse.
    #[arg(long, value_enum)]
    fallback: Option<FallbackArg>,
    /// Degrade no further than this layer. Default: landlock; for root, full (root
    /// without namespaces can change the mode of every root-owned file it names, so a root
    /// caller says --min-layer landlock to accept that).
    #[arg(long, value_enum)]
    min_layer: Option<LayerArg>,
    /// Let the program ptrace its own sandboxed processes (strace, gdb).
    #[arg(long)]
    allow_ptrace: bool,
    /// Memory of the whole sandbox, swap included (`2GiB`; needs a usable cgroup).
    #[arg(long, value_parser = parse_size)]
    memory: Option<stockade::ByteSize>,
    /// Processes of the whole sandbox at once.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    processes: Option<u64>,
    /// CPU of the whole sandbox, in cores (`1.5`; needs a usable cgroup).
    #[arg(long, value_parser = parse_cores)]
    cpu: Option<f64>,
    /// Kill the whole sandbox after this long (`90s`, `10m`); exit status 124.
    #[arg(long, value_parser = parse_time)]
    wall_time: Option<std::time::Duration>,
    /// CPU time of each process (`RLIMIT_CPU`; `5m`).
    #[arg(long, value_parser = parse_time)]
    cpu_time: Option<std::time::Duration>,
    /// Open files of each process (`RLIMIT_NOFILE`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    open_files: Option<u64>,
    /// The largest file each process may write (`RLIMIT_FSIZE`; `4GiB`).
    #[arg(long, value_parser = parse_size)]
    file_size: Option<stockade::ByteSize>,
}

/// One `--pattern NAME=REGEX`, checked as the policy checks `[sandbox.leak] patterns`.
fn parse_pattern(s: &str) -> Result<stockade::policy::HostPattern, String> {
    let Some((name, regex)) = s.split_once('=') else {
        return Err(format!("{s:?} is not NAME=REGEX"));
    };
    let p = stockade::policy::HostPattern::new(name, regex);
    stockade::HostPatterns::new(std::slice::from_ref(&p)).map_err(|e| match e {
        stockade::policy::PatternError::Pattern { name, problem, .. } => {
            format!("{name:?}: {problem}")
        }
        other => other.to_string(),
    })?;
    Ok(p)
}

/// `stockade scan`: standard input against the built-in formats, the policy's patterns
/// (with `--config`) and `--pattern`s.
fn scan(
    json: bool,
    mut patterns: Vec<stockade::policy::HostPattern>,
    config: Option<&Path>,
) -> ExitCode {
    if let Some(path) = config {
        let policy = std::fs::read_to_string(path)
            .map_err(|e| Report(&e).to_string())
            .and_then(|text| Policy::from_config(&text).map_err(|e| Report(&e).to_string()));
        match policy {
            Ok(policy) => patterns.splice(0..0, policy.leak.patterns),
            Err(e) => return fail(2, format_args!("config {}: {e}", path.display())),
        };
    }
    let patterns = match stockade::HostPatterns::new(&patterns) {
        Ok(p) => p,
        Err(e) => return fail(2, format_args!("scan: {}", Report(&e))),
    };
    match stockade::guard::leak::scan_stream_with(
        std::io::stdin().lock(),
        &patterns,
        json,
        std::io::stdout().lock(),
    ) {
        Ok(true) => ExitCode::from(1),
        Ok(false) => ExitCode::SUCCESS,
        Err(e) => fail(2, format_args!("scan: {}", Report(&e))),
    }
}

fn parse_size(s: &str) -> Result<stockade::ByteSize, String> {
    stockade::ByteSize::parse(s).ok_or_else(|| format!("invalid size {s:?} (e.g. 512MiB, 2GiB)"))
}

/// One `--allow-domain` entry, checked as the policy checks `allow_domains`.
fn parse_allow_domain(s: &str) -> Result<String, String> {
    let entry = vec![s.to_string()];
    stockade::policy::Allowlist::parse(&entry).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

/// One `--allow-private` entry, checked as the policy checks `allow_private`.
fn parse_allow_private(s: &str) -> Result<String, String> {
    stockade::policy::Cidr::parse(s).map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

fn parse_time(s: &str) -> Result<std::time::Duration, String> {
    match stockade::policy::parse_duration(s) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(format!("invalid duration {s:?} (e.g. 90s, 10m, 1h30m)")),
    }
}

fn parse_cores(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if c.is_finite() && c >= 0.01 => Ok(c),
        _ => Err(format!(
            "invalid cpu {s:?} (a number of cores of at least 0.01, e.g. 1.5)"
        )),
    }
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
    /// The sandbox for these flags, or the exit code after printing why not.
    fn sandbox(&self) -> Result<Sandbox, ExitCode> {
        let policy = self.policy().map_err(|e| fail(125, e))?;
        Sandbox::new(policy).map_err(|e| fail_with(125, &e))
    }

    /// The policy of `--config` (when given) with the flags on top. Errors name the file
    /// or path and the reason: `config /etc/x.toml: ENOENT (No such file or directory)`.
    fn policy(&self) -> Result<Policy, String> {
        let mut p = match &self.config {
            Some(path) => {
                let at = |e: &(dyn std::error::Error + 'static)| {
                    format!("config {}: {}", path.display(), Report(e))
                };
                let text = std::fs::read_to_string(path).map_err(|e| at(&e))?;
                Policy::from_config(&text).map_err(|e| at(&e))?
            }
            None => Policy::default(),
        };
        let abs = |p: &PathBuf| -> Result<PathBuf, String> {
            absolute(p).map_err(|e| format!("{}: {}", p.display(), Report(&e)))
        };
        match &self.workspace {
            Some(w) => p.workspace = Some(abs(w)?),
            None if p.workspace.is_none() => {
                p.workspace = Some(
                    std::env::current_dir()
                        .map_err(|e| format!("current directory: {}", Report(&e)))?,
                )
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
        if let Some(dir) = &self.overlay {
            p.workspace_mode = stockade::WorkspaceMode::Overlay;
            p.changes_dir = Some(abs(dir)?);
        }
        if let Some(n) = self.network {
            p.network = match n {
                NetworkArg::None => Network::None,
                NetworkArg::Allow => Network::Allow,
                NetworkArg::Full => Network::Full,
            };
        }
        self.check_allow_flags(p.network, &p)?;
        p.allow_domains.extend(self.allow_domain.iter().cloned());
        p.allow_private.extend(self.allow_private.iter().cloned());
        p.passthrough_env
            .extend(self.passthrough_env.iter().cloned());
        p.keep_session |= self.keep_session;
        p.allow_ptrace |= self.allow_ptrace;
        let layer = |l: LayerArg| match l {
            LayerArg::Full => stockade::Layer::Full,
            LayerArg::Landlock => stockade::Layer::Landlock,
            LayerArg::Passthrough => stockade::Layer::Passthrough,
        };
        if let Some(l) = self.layer {
            p.layer = Some(layer(l));
        }
        if let Some(l) = self.min_layer {
            p.min_layer = Some(layer(l));
        }
        let l = &mut p.limits;
        l.memory = self.memory.or(l.memory);
        l.processes = self.processes.or(l.processes);
        l.cpu = self.cpu.or(l.cpu);
        l.wall_time = self.wall_time.or(l.wall_time);
        l.cpu_time = self.cpu_time.or(l.cpu_time);
        l.open_files = self.open_files.or(l.open_files);
        l.file_size = self.file_size.or(l.file_size);
        if let Some(f) = self.fallback {
            p.fallback = match f {
                FallbackArg::Degrade => stockade::Fallback::Degrade,
                FallbackArg::Refuse => stockade::Fallback::Refuse,
            };
        }
        p.validate().map_err(|e| Report(&e).to_string())?;
        Ok(p)
    }
}

impl PolicyArgs {
    /// The first policy flag given, by its name (for `run --session`, where the
    /// session's server holds the policy).
    fn first_given(&self) -> Option<&'static str> {
        // Every field, so that a new flag cannot be forgotten here.
        let PolicyArgs {
            config,
            workspace,
            data_dir,
            writable,
            overlay,
            read_only,
            tools_dir,
            network,
            allow_domain,
            allow_private,
            passthrough_env,
            keep_session,
            layer,
            fallback,
            min_layer,
            allow_ptrace,
            memory,
            processes,
            cpu,
            wall_time,
            cpu_time,
            open_files,
            file_size,
        } = self;
        let given = [
            ("--config", config.is_some()),
            ("--workspace", workspace.is_some()),
            ("--data-dir", data_dir.is_some()),
            ("--writable", !writable.is_empty()),
            ("--overlay", overlay.is_some()),
            ("--read-only", !read_only.is_empty()),
            ("--tools-dir", tools_dir.is_some()),
            ("--network", network.is_some()),
            ("--allow-domain", !allow_domain.is_empty()),
            ("--allow-private", !allow_private.is_empty()),
            ("--passthrough-env", !passthrough_env.is_empty()),
            ("--keep-session", *keep_session),
            ("--layer", layer.is_some()),
            ("--fallback", fallback.is_some()),
            ("--min-layer", min_layer.is_some()),
            ("--allow-ptrace", *allow_ptrace),
            ("--memory", memory.is_some()),
            ("--processes", processes.is_some()),
            ("--cpu", cpu.is_some()),
            ("--wall-time", wall_time.is_some()),
            ("--cpu-time", cpu_time.is_some()),
            ("--open-files", open_files.is_some()),
            ("--file-size", file_size.is_some()),
        ];
        given.into_iter().find_map(|(flag, g)| g.then_some(flag))
    }

    /// Refuses `--allow-domain` and `--allow-private` without the allow mode, and a
    /// `--network` flag that leaves a config's lists without it, naming the flag (the
    /// policy refuses both as well, `PolicyError::AllowWithoutProxy`, but names only its
    /// key). `network` is the mode after the flags, `config` the policy before the lists.
    fn check_allow_flags(&self, network: Network, config: &Policy) -> Result<(), String> {
        let mode = match network {
            Network::Allow => return Ok(()),
            Network::None => "none",
            Network::Full => "full",
        };
        let from = match (self.network, &self.config) {
            (Some(_), _) => "--network",
            (None, Some(_)) => "the config's network",
            (None, None) => "the default network",
        };
        let entries = [
            ("--allow-domain", self.allow_domain.first()),
            ("--allow-private", self.allow_private.first()),
        ];
        if let Some((flag, Some(entry))) = entries.into_iter().find(|(_, e)| e.is_some()) {
            return Err(format!(
                "{flag} {entry}: needs --network allow ({from} is \"{mode}\")"
            ));
        }
        let lists = [
            ("allow_domains", &config.allow_domains),
            ("allow_private", &config.allow_private),
        ];
        match lists.into_iter().find(|(_, l)| !l.is_empty()) {
            Some((key, _)) if self.network.is_some() => Err(format!(
                "--network {mode}: the config's {key} applies only with network = \"allow\""
            )),
            _ => Ok(()),
        }
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
    // Taken first, so that a caller that dies while the arguments are parsed is noticed.
    let caller = caller::Caller::now();
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run {
            policy,
            cwd,
            env,
            secret_env,
            scrub,
            no_die_with_parent,
            no_pty,
            stats,
            stats_json,
            explain,
            explain_json,
            session,
            keep_background,
            program,
        } => {
            if let Some(socket) = session {
                let refused = [
                    ("--scrub", scrub),
                    ("--stats", stats),
                    ("--stats-json", stats_json.is_some()),
                    ("--explain", explain),
                    ("--explain-json", explain_json.is_some()),
                ]
                .into_iter()
                .find_map(|(flag, given)| given.then_some(flag))
                .or_else(|| policy.first_given());
                if let Some(flag) = refused {
                    return fail(
                        2,
                        format_args!(
                            "{flag} cannot be used with --session (the session's server \
                             holds the policy, and the command's output goes to the caller \
                             directly)"
                        ),
                    );
                }
                if !no_die_with_parent {
                    if let Err(e) = caller.die_with() {
                        return fail(125, format_args!("prctl(PR_SET_PDEATHSIG): {}", Report(&e)));
                    }
                }
                return run_in_session(
                    &socket,
                    cwd,
                    (&env, &secret_env),
                    (keep_background, no_pty),
                    &program,
                );
            }
            if keep_background {
                return fail(
                    2,
                    "--keep-background needs --session (a sandbox of its own ends with its \
                     program, and everything in it)",
                );
            }
            if !no_die_with_parent {
                if let Err(e) = caller.die_with() {
                    return fail(125, format_args!("prctl(PR_SET_PDEATHSIG): {}", Report(&e)));
                }
            }
            // Opened now, before the program runs: a FILE in the workspace could
            // otherwise be a symlink the program planted by the time it is written.
            let json = match stats_json
                .map(|p| open_report("--stats-json", &p).map(|f| (p, f)))
                .transpose()
            {
                Ok(json) => json,
                Err(code) => return code,
            };
            let explain_json = match explain_json
                .map(|p| open_report("--explain-json", &p).map(|f| (p, f)))
                .transpose()
            {
                Ok(json) => json,
                Err(code) => return code,
            };
            let stats = Stats {
                print: stats,
                json,
                explain,
                explain_json,
            };
            run(
                &policy,
                cwd,
                &env,
                &secret_env,
                (scrub, no_pty),
                &stats,
                &program,
            )
        }
        Cmd::Scan {
            json,
            pattern,
            config,
        } => scan(json, pattern, config.as_deref()),
        Cmd::Detect { json } => detect(json),
        Cmd::Session {
            socket,
            no_die_with_parent,
            policy,
        } => {
            if !no_die_with_parent {
                if let Err(e) = caller.end_with() {
                    return fail(125, format_args!("prctl(PR_SET_PDEATHSIG): {}", Report(&e)));
                }
            }
            serve_session(&policy, &socket)
        }
        Cmd::SessionJanitor {
            dir,
            dir_id,
            name,
            id,
        } => session_janitor(&dir, &dir_id, &name, &id),
        Cmd::Changes { dir, diff, json } => changes_cmd::list(&dir, diff, json),
        Cmd::Apply {
            dir,
            allow_guarded,
            allow_denied,
            expect,
        } => changes_cmd::apply(&dir, allow_guarded, allow_denied, expect.as_deref()),
        Cmd::Discard { dir } => changes_cmd::discard(&dir),
        Cmd::Plan {
            policy,
            json,
            os: Some(OsArg::Macos),
        } => macos_profile(&policy, json),
        Cmd::Plan { policy, json, .. } => plan(&policy, json),
    }
}

/// Dying with the caller.
///
/// `stockade run` arms `PR_SET_PDEATHSIG(SIGKILL)` on itself; the library's sandboxes
/// already die with the process that spawned them (their PID 1 has its own parent-death
/// signal, tied to the library's spawner thread), so killing the caller ends stockade and,
/// through it, every process in the sandbox.
#[cfg(target_os = "linux")]
mod caller {
    use nix::sys::signal::{Signal, raise};
    use nix::unistd::{Pid, getppid};

    /// The caller as it was when stockade started.
    pub struct Caller(Pid);

    impl Caller {
        pub fn now() -> Self {
            Caller(getppid())
        }

        /// Arms `PR_SET_PDEATHSIG(SIGKILL)`. A caller that died before the signal was armed
        /// has already handed stockade to a reaper (its parent pid changed): then stockade
        /// ends the same way as if the signal had fired.
        ///
        /// The signal follows the caller's *thread*: a multithreaded caller whose spawning
        /// thread exits also ends the run (prctl(2)).
        pub fn die_with(&self) -> nix::Result<()> {
            self.die_with_signal(Signal::SIGKILL)
        }

        /// As [`Caller::die_with`], with `SIGTERM`: for `stockade session`, whose ending
        /// signals close the session (commands ended, the `.git` layer merged, its
        /// temporary directories removed) rather than drop it.
        pub fn end_with(&self) -> nix::Result<()> {
            self.die_with_signal(Signal::SIGTERM)
        }

        fn die_with_signal(&self, signal: Signal) -> nix::Result<()> {
            nix::sys::prctl::set_pdeathsig(signal)?;
            if getppid() != self.0 {
                raise(signal)?;
            }
            Ok(())
        }
    }
}

/// Elsewhere there is no parent-death signal: stockade outlives a caller that exits, and
/// the sandboxed program outlives stockade (see `Child` in the library).
#[cfg(not(target_os = "linux"))]
mod caller {
    pub struct Caller;

    impl Caller {
        pub fn now() -> Self {
            Caller
        }

        pub fn die_with(&self) -> Result<(), std::convert::Infallible> {
            Ok(())
        }

        pub fn end_with(&self) -> Result<(), std::convert::Infallible> {
            Ok(())
        }
    }
}

/// `p` made absolute against the current directory, whose path the kernel gives without
/// symlinks: so the `..` components that lead a relative path (`../shared`) are taken
/// off it as the kernel would take them. A `..` anywhere else stays, for the policy to
/// refuse (after a symlink it would not mean the parent of what the path names).
fn absolute(p: &Path) -> std::io::Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let mut base = std::env::current_dir()?;
    let mut rest = p.components().peekable();
    while let Some(c) = rest.peek() {
        match c {
            std::path::Component::ParentDir => {
                base.pop();
            }
            std::path::Component::CurDir => {}
            _ => break,
        }
        rest.next();
    }
    Ok(rest.fold(base, |b, c| b.join(c)))
}

/// `stockade changes`, `apply`, `discard`: exit 0 when done, 1 when an entry was refused,
/// conflicted or failed, 2 when the change set cannot be opened.
mod changes_cmd {
    use std::path::Path;
    use std::process::ExitCode;

    use stockade::changes::ApplyOptions;
    use stockade::{ChangeSet, ChangesError};

    use super::{Report, fail};

    /// Opens the set; says so when its `upper/` is an earlier run's
    /// ([`ChangeSet::stale`]).
    fn open(dir: &Path) -> Result<ChangeSet, ExitCode> {
        let set = ChangeSet::open(dir).map_err(|e: ChangesError| fail(2, Report(&e)))?;
        if let Some(why) = set.stale() {
            eprintln!(
                "stockade: warning: {}: upper/ is an earlier run's: the last run's difference \
                 could not be written ({}); the program's latest work is in the set's snapshot/",
                crate::shown::shown_path(dir),
                crate::shown::escape_controls(why)
            );
        }
        Ok(set)
    }

    pub(super) fn list(dir: &Path, diff: bool, json: bool) -> ExitCode {
        let set = match open(dir) {
            Ok(s) => s,
            Err(code) => return code,
        };
        // The digest of what is shown, for `apply --expect`: on stderr, so that the listing
        // and the diff stay what they are (the JSON has it as a field).
        let digest = set.digest();
        if diff {
            return match set.diff() {
                Ok(d) => {
                    out!("{d}");
                    say_digest(&digest);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(2, Report(&e)),
            };
        }
        if json {
            let entries: Vec<_> = set
                .entries()
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "path": c.path.to_string_lossy(),
                        "kind": c.kind.as_str(),
                        "type": c.entry.as_str(),
                        "size": c.size,
                        "mode": c.mode.map(|m| format!("{m:o}")),
                        "target": c.target.as_ref().map(|t| t.to_string_lossy()),
                    })
                })
                .collect();
            let m = set.marker();
            let doc = serde_json::json!({
                "dir": set.dir().to_string_lossy(),
                "workspace": m.workspace.to_string_lossy(),
                "mode": m.mode,
                "started_ns": m.started_ns,
                "entries": entries,
                "digest": digest,
            });
            out!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            return ExitCode::SUCCESS;
        }
        for c in set.entries() {
            let target = c
                .target
                .as_ref()
                .map(|t| format!(" -> {}", crate::shown::shown_path(t)))
                .unwrap_or_default();
            let size = c.size.map(|s| format!("  ({s} bytes)")).unwrap_or_default();
            out!(
                "{:<13}{:<8}{}{target}{size}",
                c.kind.as_str(),
                c.entry.as_str(),
                crate::shown::shown_path(&c.path)
            );
        }
        say_digest(&digest);
        ExitCode::SUCCESS
    }

    fn say_digest(digest: &str) {
        eprintln!(
            "stockade: digest {digest} (`stockade apply --expect {digest}` applies this set and no other)"
        );
    }

    pub(super) fn apply(
        dir: &Path,
        allow_guarded: bool,
        allow_denied: bool,
        expect: Option<&str>,
    ) -> ExitCode {
        let set = match open(dir) {
            Ok(s) => s,
            Err(code) => return code,
        };
        if let Some(expected) = expect {
            let digest = set.digest();
            let bare = |d: &str| d.strip_prefix("sha256:").unwrap_or(d).to_ascii_lowercase();
            if bare(expected) != bare(&digest) {
                return fail(
                    2,
                    format_args!(
                        "{}: the change set is not the one reviewed: its digest is {digest}, not \
                         {}; nothing applied (review it again: `stockade changes`)",
                        crate::shown::shown_path(dir),
                        stockade::guard::terminal::escape_controls(expected)
                    ),
                );
            }
        }
        let mut opts = ApplyOptions::default();
        opts.allow_guarded = allow_guarded;
        opts.allow_denied = allow_denied;
        let report = match set.apply(&opts) {
            Ok(r) => r,
            Err(e) => return fail(2, Report(&e)),
        };
        for p in &report.applied {
            out!("applied   {}", crate::shown::shown_path(p));
        }
        for r in &report.refused {
            eprintln!(
                "stockade: refused  {}: {}",
                crate::shown::shown_path(&r.path),
                r.reason
            );
        }
        for c in &report.conflicts {
            eprintln!(
                "stockade: conflict {}: {}",
                crate::shown::shown_path(&c.path),
                c.reason
            );
        }
        for f in &report.failed {
            eprintln!(
                "stockade: failed   {}: {}",
                crate::shown::shown_path(&f.path),
                f.error
            );
        }
        if report.is_complete() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }

    pub(super) fn discard(dir: &Path) -> ExitCode {
        // Without reading the set: one too large or too deep to review still goes.
        match ChangeSet::discard_dir(dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(2, Report(&e)),
        }
    }
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("stockade: {msg}");
    ExitCode::from(code)
}

/// [`fail`] with an error and its causes on one line, each OS error with its errno name:
/// `stockade: workspace /nonexistent-dir: ENOENT (No such file or directory)`.
fn fail_with(code: u8, e: &(dyn std::error::Error + 'static)) -> ExitCode {
    fail(code, Report(e))
}

/// `--stats` and `--stats-json` (its path, and the file opened before the run), and
/// `--explain` and `--explain-json` likewise.
struct Stats {
    print: bool,
    json: Option<(PathBuf, std::fs::File)>,
    explain: bool,
    explain_json: Option<(PathBuf, std::fs::File)>,
}

/// Creates (or truncates) the file of `flag` (`--stats-json`, `--explain-json`) before
/// the run, never through a symlink at its name; exit code 125 when it cannot.
fn open_report(flag: &str, path: &std::path::Path) -> Result<std::fs::File, ExitCode> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            fail(
                125,
                format_args!("{flag} {}: {}", path.display(), Report(&e)),
            )
        })
}

fn run(
    args: &PolicyArgs,
    cwd: Option<PathBuf>,
    env: &[String],
    secret_env: &[String],
    (scrub, no_pty): (bool, bool),
    stats: &Stats,
    program: &[OsString],
) -> ExitCode {
    // Before anything starts a thread: the signals to forward stay blocked in all of them.
    let signals = forward::Signals::block();
    let sandbox = match args.sandbox() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let Some((prog, rest)) = program.split_first() else {
        return fail(125, "no program given");
    };
    if scrub {
        sandbox.set_secrets(passthrough_values(&sandbox));
    }
    let mut cmd = match command(&sandbox, prog, rest, cwd, env, secret_env) {
        Ok(cmd) => cmd,
        Err(code) => return code,
    };
    let keep_session = sandbox.policy().keep_session;
    // The program gets a terminal of its own, and pipes instead of the caller's files
    // (see `relay`). Keeping the caller's session keeps its terminal.
    let opts = relay::Options {
        pty: !no_pty && !keep_session,
        scrub,
    };
    let relay = match relay::Relay::attach(&mut cmd, &opts) {
        Ok(r) => r,
        Err(e) => {
            let hint = "--no-pty hands over the caller's terminal instead";
            return fail(
                125,
                format_args!("pseudo-terminal: {} ({hint})", Report(&e)),
            );
        }
    };
    cmd.explain(stats.explain || stats.explain_json.is_some());
    let mut child = match spawn(&mut cmd, &sandbox) {
        Ok(c) => c,
        Err(code) => return code,
    };
    warn_unguarded(&child, scrub);
    let running = match relay.start(cmd, &mut child) {
        Ok(r) => r,
        Err(e) => {
            let _ = child.kill();
            return fail(125, format_args!("relay stdio: {}", Report(&e)));
        }
    };
    let status = signals.wait(&mut child, keep_session, &running);
    // The program's last output is copied and the caller's terminal restored before
    // anything more is printed.
    let findings = running.finish();
    for f in &findings {
        eprintln!("stockade: leak: {f}");
    }
    // Changes under `.git` that stayed in the copy-on-write layer (hooks, config, …).
    for d in child.git_dropped() {
        eprintln!(
            "stockade: .git change dropped: {}",
            shown(&child, scrub, &d.to_string())
        );
    }
    // `.git/config` changes: the allowlisted ones merged back, the others dropped.
    for c in child.git_config() {
        let level = if c.outcome == stockade::GitConfigOutcome::Merged {
            "git config"
        } else {
            "git config dropped"
        };
        eprintln!(
            "stockade: {level}: {}",
            shown(&child, scrub, &c.to_string())
        );
    }
    // Repositories the program created in the writable roots, neutralized or refused.
    for n in child.nested_repositories() {
        eprintln!(
            "stockade: warning: {}",
            shown(&child, scrub, &n.to_string())
        );
    }
    let mut code = match status {
        Ok(status) => exit_code(status),
        Err(e) => fail_with(125, &e),
    };
    // A limit that ended the run says so; wall time exits 124, as timeout(1) does.
    let termination = child.termination();
    if let Some(t) = termination.filter(stockade::Termination::by_limit) {
        eprintln!("stockade: {t}");
        if matches!(t, stockade::Termination::WallTime(_)) {
            code = ExitCode::from(124);
        }
    }
    if stats.print || stats.json.is_some() {
        if let Some(usage) = child.usage() {
            if let Err(c) = report_stats(stats, &usage, termination) {
                code = c;
            }
        }
    }
    let explained = cfg!(target_os = "linux") && sandbox.layer() != stockade::Layer::Passthrough;
    if let Err(c) = report_denials(stats, &child, scrub, explained) {
        code = c;
    }
    // The wait returned at the init's status record; the init may still be tearing the
    // sandbox's namespaces down. Dropping the sandbox (after the command) reaps it, so that
    // this process leaves no zombie to the caller's reaper (a subreaper, or PID 1 of a
    // container, that reaps only its own children), and removes what the sandbox made on
    // the host (a root host's layer-2 directory for the TMPDIRs).
    // An overlay's change set is closed on a thread of the library's (its sync, the
    // scratch directory's removal, the marker made durable); the sandbox's drop waits for
    // it, or this process's exit would cut it short and leave a set that a caller without
    // `CAP_DAC_OVERRIDE` cannot remove.
    drop(child);
    drop(sandbox);
    code
}

/// `stockade run --session`: the command in the session at `socket`.
#[cfg(target_os = "linux")]
fn run_in_session(
    socket: &Path,
    cwd: Option<PathBuf>,
    (env, secret_env): (&[String], &[String]),
    flags: (bool, bool),
    program: &[OsString],
) -> ExitCode {
    match variables(env, secret_env) {
        Ok(vars) => session_cli::run_in(socket, cwd, vars, flags, program),
        Err(code) => code,
    }
}

/// Sessions are Linux's (`Sandbox::session`).
#[cfg(not(target_os = "linux"))]
fn run_in_session(
    _: &Path,
    _: Option<PathBuf>,
    _: (&[String], &[String]),
    _: (bool, bool),
    _: &[OsString],
) -> ExitCode {
    fail(125, "--session: sessions need Linux")
}

/// `stockade session --socket PATH`.
#[cfg(target_os = "linux")]
fn serve_session(policy: &PolicyArgs, socket: &Path) -> ExitCode {
    session_cli::serve(policy, socket)
}

/// Sessions are Linux's (`Sandbox::session`).
#[cfg(not(target_os = "linux"))]
fn serve_session(_: &PolicyArgs, _: &Path) -> ExitCode {
    fail(125, "session: sessions need Linux")
}

/// The hidden `__session-janitor` ([`session_cli`]).
#[cfg(target_os = "linux")]
fn session_janitor(dir: &Path, dir_id: &str, name: &std::ffi::OsStr, id: &str) -> ExitCode {
    session_cli::janitor_main(dir, dir_id, name, id)
}

#[cfg(not(target_os = "linux"))]
fn session_janitor(_: &Path, _: &str, _: &std::ffi::OsStr, _: &str) -> ExitCode {
    ExitCode::from(2)
}

/// Prints the run's usage (`--stats`) and writes it with its end as JSON
/// (`--stats-json`); exit code 125 when the file cannot be written.
fn report_stats(
    stats: &Stats,
    u: &stockade::Usage,
    end: Option<stockade::Termination>,
) -> Result<(), ExitCode> {
    use stockade::Termination as T;
    let secs = |d: std::time::Duration| d.as_secs_f64();
    let scope = if u.from_cgroup {
        "sandbox"
    } else {
        "largest process"
    };
    if stats.print {
        let peak = u.peak_memory.map_or("unknown".to_string(), |b| {
            format!("{:.1} MiB ({scope})", b as f64 / 1048576.0)
        });
        eprintln!(
            "stockade: wall {:.3}s, user {:.3}s, system {:.3}s, peak memory {peak}",
            secs(u.wall_time),
            secs(u.user_cpu),
            secs(u.system_cpu),
        );
    }
    let Some((path, file)) = &stats.json else {
        return Ok(());
    };
    let (kind, code, signal, limit) = match end {
        Some(T::Exited(c)) => ("exited", Some(c), None, None),
        Some(T::Signaled(s)) => ("signaled", None, Some(s), None),
        Some(T::WallTime(d)) => ("wall_time", None, None, Some(format!("{:?}", secs(d)))),
        Some(T::Memory(m)) => ("memory", None, None, Some(m.bytes().to_string())),
        Some(T::Processes(n)) => ("processes", None, None, Some(n.to_string())),
        Some(T::CpuTime(d)) => ("cpu_time", None, None, Some(format!("{:?}", secs(d)))),
        Some(T::FileSize(s)) => ("file_size", None, None, Some(s.bytes().to_string())),
        _ => ("unknown", None, None, None),
    };
    let value = serde_json::json!({
        "termination": kind,
        "exit_code": code,
        "signal": signal,
        "limit": limit.and_then(|l| l.parse::<f64>().ok()),
        "wall_time_s": secs(u.wall_time),
        "user_cpu_s": secs(u.user_cpu),
        "system_cpu_s": secs(u.system_cpu),
        "peak_memory_bytes": u.peak_memory,
        "peak_memory_scope": if u.from_cgroup { "sandbox" } else { "largest_process" },
        "oom_kills": u.oom_kills,
        "process_limit_hits": u.process_limit_hits,
    });
    write_report("--stats-json", path, file, &format!("{value}\n"))
}

/// Writes `text` into the file of `flag` opened before the run; and if the program
/// replaced its name meanwhile (it is in the workspace), the report is not where the
/// caller looks: say so. Exit code 125 when it cannot be written.
fn write_report(
    flag: &str,
    path: &std::path::Path,
    file: &std::fs::File,
    text: &str,
) -> Result<(), ExitCode> {
    let written = (|| {
        use std::os::unix::fs::{FileExt, MetadataExt};
        file.set_len(0)?;
        file.write_all_at(text.as_bytes(), 0)?;
        let (ours, named) = (file.metadata()?, std::fs::symlink_metadata(path)?);
        if (ours.dev(), ours.ino()) != (named.dev(), named.ino()) {
            return Err(std::io::Error::other(
                "replaced during the run (by the program?): the report was not written there",
            ));
        }
        Ok(())
    })();
    written.map_err(|e: std::io::Error| {
        fail(
            125,
            format_args!("{flag} {}: {}", path.display(), Report(&e)),
        )
    })
}

/// Prints what the sandbox denied (`--explain`) and writes it as JSON
/// (`--explain-json`). `explained`: the layer has a filter whose denials are reported
/// (Linux, full and landlock); elsewhere only the egress proxy's refusals are.
fn report_denials(
    stats: &Stats,
    child: &stockade::Child,
    scrub: bool,
    explained: bool,
) -> Result<(), ExitCode> {
    if !stats.explain && stats.explain_json.is_none() {
        return Ok(());
    }
    let denials = child.denials();
    if stats.explain {
        if denials.is_empty() {
            if explained {
                eprintln!("stockade: explain: nothing denied");
            } else {
                eprintln!("stockade: explain: nothing to report on this layer");
            }
        }
        for d in &denials {
            eprintln!("{}", shown(child, scrub, &d.to_string()));
        }
    }
    let Some((path, file)) = &stats.explain_json else {
        return Ok(());
    };
    let text = serde_json::to_string(&denials).unwrap_or_else(|_| "[]".to_owned());
    write_report("--explain-json", path, file, &format!("{text}\n"))
}

/// A `.git` link whose repository metadata runs without the `.git` layer.
fn warn_unguarded(child: &stockade::Child, scrub: bool) {
    for u in child.git_unguarded() {
        eprintln!("stockade: warning: {}", shown(child, scrub, &u.to_string()));
    }
}

/// The values of the passed-through variables, for `--scrub`: they are typically tokens
/// (GH_TOKEN), so known secrets.
fn passthrough_values(sandbox: &Sandbox) -> Vec<Vec<u8>> {
    sandbox
        .policy()
        .passthrough_env
        .iter()
        .filter_map(std::env::var_os)
        .map(|v| v.into_encoded_bytes())
        .collect()
}

/// The command for `prog` with `rest` as its arguments, the working directory and the
/// variables of `--env` and `--secret-env`; exit code 2 (a usage error, like clap's) for a
/// variable without `=` or without a name, or a `--secret-env NAME` that stockade's own
/// environment does not set.
fn command(
    sandbox: &Sandbox,
    prog: &OsString,
    rest: &[OsString],
    cwd: Option<PathBuf>,
    env: &[String],
    secret_env: &[String],
) -> Result<stockade::Command, ExitCode> {
    let (env, secret_env) = variables(env, secret_env)?;
    let mut cmd = sandbox.command(prog);
    cmd.args(rest);
    if let Some(c) = cwd {
        cmd.current_dir(c);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    for (k, v) in secret_env {
        cmd.secret_env(k, v);
    }
    Ok(cmd)
}

/// Variables as `NAME`, `VALUE` pairs.
type Vars = Vec<(String, OsString)>;

/// The variables of `--env` and `--secret-env`; exit code 2 (a usage error, like clap's)
/// for a variable without `=` or without a name, or a `--secret-env NAME` that
/// stockade's own environment does not set.
fn variables(env: &[String], secret_env: &[String]) -> Result<(Vars, Vars), ExitCode> {
    let mut plain = Vec::new();
    for kv in env {
        match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => plain.push((k.to_string(), v.into())),
            _ => return Err(fail(2, format!("--env {kv:?}: expected NAME=VALUE"))),
        };
    }
    let mut secret = Vec::new();
    for kv in secret_env {
        // Neither the value nor a name that may be a mistyped value is echoed.
        let (k, v) = match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => (k.to_string(), v.into()),
            Some(_) => return Err(fail(2, "--secret-env: expected NAME=VALUE, or NAME")),
            None => match std::env::var_os(kv) {
                Some(v) if !kv.is_empty() => (kv.clone(), v),
                _ => {
                    return Err(fail(
                        2,
                        "--secret-env NAME: expected NAME=VALUE, or a NAME that stockade's \
                         environment sets",
                    ));
                }
            },
        };
        secret.push((k, v));
    }
    Ok((plain, secret))
}

/// Spawns `cmd` and says whether the sandbox runs degraded. A failure gives its exit
/// status: 127 when the program was not found, 126 when it could not be executed, 125
/// for any other setup error.
fn spawn(cmd: &mut stockade::Command, sandbox: &Sandbox) -> Result<stockade::Child, ExitCode> {
    let spawned = cmd.spawn();
    warn_degraded(sandbox);
    warn_unhidden(sandbox);
    match spawned {
        Ok(c) => Ok(c),
        Err(Error::Spawn(e @ SpawnError::NotFound { .. })) => Err(fail_with(127, &e)),
        Err(Error::Spawn(e @ SpawnError::Setup { .. })) if is_exec_failure(&e) => {
            Err(fail_with(126, &e))
        }
        Err(e) => Err(fail_with(125, &e)),
    }
}

/// Says on stderr that the sandbox runs weaker than wanted (the library says it through
/// `tracing`, which this binary does not subscribe to). A run knows only once it has
/// spawned: the first spawn is the probe.
fn warn_degraded(sandbox: &Sandbox) {
    if let Some(d) = sandbox.degradation() {
        eprintln!("stockade: warning: {d}");
    }
}

/// Says on stderr which denied names the layer leaves readable (layer 2 hides none).
fn warn_unhidden(sandbox: &Sandbox) {
    for p in sandbox.unhidden_names() {
        eprintln!(
            "stockade: warning: layer `{}` does not hide the denied name {}: the program can read it",
            sandbox.layer(),
            p.display()
        );
    }
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
    matches!(
        e,
        SpawnError::Setup {
            step: stockade::SetupStep::Exec { .. },
            ..
        }
    )
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
        let limits: serde_json::Map<String, serde_json::Value> = stockade::cgroup_limits()
            .into_iter()
            .map(|(l, a)| (l.to_string(), serde_json::json!(a)))
            .collect();
        let out = serde_json::json!({
            "capabilities": caps,
            "layers": layers,
            "best": caps.best_layer(),
            "cgroup_limits": limits,
            "causes": caps.causes,
        });
        out!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    let avail = |a: &stockade::Availability| match &a.reason {
        Some(r) => format!("{}  ({r})", if a.available { "yes" } else { "no" }),
        None => (if a.available { "yes" } else { "no" }).to_string(),
    };
    let mut rows: Vec<Option<(String, String)>> = vec![
        Some(("os".into(), caps.os.to_string())),
        Some(("user namespaces".into(), avail(&caps.user_namespaces))),
        Some(("fresh /proc".into(), avail(&caps.fresh_proc))),
        Some(("landlock".into(), avail(&caps.landlock))),
        Some(("landlock ABI".into(), caps.landlock_abi.to_string())),
        Some(("seccomp".into(), avail(&caps.seccomp))),
        None,
    ];
    for l in [
        stockade::Layer::Full,
        stockade::Layer::Landlock,
        stockade::Layer::Passthrough,
    ] {
        rows.push(Some((format!("layer {l}"), avail(&caps.layer(l)))));
    }
    rows.push(Some(("best layer".into(), caps.best_layer().to_string())));
    rows.push(None);
    // Why something is unavailable, when a cause is recognized, and what to change.
    for c in &caps.causes {
        rows.push(Some(("cause".into(), format!("{} [{}]", c.summary, c.id))));
        rows.push(Some(("remedy".into(), c.remedy.clone())));
        rows.push(None);
    }
    for (limit, a) in stockade::cgroup_limits() {
        rows.push(Some((format!("limit {limit} (cgroup)"), avail(&a))));
    }
    // One value column for all rows: the longest label plus two spaces.
    let width = rows
        .iter()
        .flatten()
        .map(|(label, _)| label.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    for row in rows {
        match row {
            Some((label, value)) => out!("{label:<width$}{value}"),
            None => out!(),
        }
    }
    ExitCode::SUCCESS
}

fn plan(args: &PolicyArgs, json: bool) -> ExitCode {
    // A run learns at its first spawn whether the host refuses namespaces; the plan has
    // no spawn, so it asks the full probe (a child that exits), to print what a run does.
    stockade::Capabilities::probe();
    let sandbox = match args.sandbox() {
        Ok(s) => s,
        Err(code) => return code,
    };
    warn_degraded(&sandbox);
    let plan = sandbox.plan();
    if json {
        out!(
            "{}",
            serde_json::to_string_pretty(&plan).unwrap_or_default()
        );
    } else {
        out!("{}", plan.to_string().trim_end());
    }
    ExitCode::SUCCESS
}

/// The SBPL profile the macOS backend would apply, printed on any OS.
fn macos_profile(args: &PolicyArgs, json: bool) -> ExitCode {
    let policy = match args.policy() {
        Ok(p) => p,
        Err(e) => return fail(125, e),
    };
    match stockade::macos_profile(&policy) {
        Ok(p) if json => {
            out!("{}", serde_json::json!({ "os": "macos", "profile": p }));
            ExitCode::SUCCESS
        }
        Ok(p) => {
            print!("{p}");
            ExitCode::SUCCESS
        }
        Err(e) => fail_with(125, &e),
    }
}
