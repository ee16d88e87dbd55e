//! README.md as a user follows it: every ```toml block goes through `stockade plan
//! --config` and `stockade run --config` as it stands, every command of every ```sh block
//! through `sh` as it stands (but the restricted-network example, whose `git clone` needs
//! the internet: its flags go through `stockade plan`), and the CLI synopsis lists exactly
//! the flags `--help` lists.
//!
//! # The example's paths
//!
//! The README's TOML names host paths (`/srv/agent/data`, `/home/user/shared-data`, …)
//! that a fresh machine lacks, and stockade creates no configured path. The test creates
//! the missing ones as root (the writable ones mode 0777, so that the re-run as uid 65534
//! can write there too) and removes exactly what it created afterwards. Without root it
//! cannot, and says so (`SKIP …: needs root`).
//!
//! # `cargo` in the shell commands
//!
//! Each command runs verbatim through `sh`, where `cargo` is a shell function standing in
//! for cargo: `cargo run --release -- ARGS` runs this crate's `stockade` binary (the one
//! cargo built for this test, from the same source, in the test profile) with exactly
//! `ARGS` as `sh` parsed them; `cargo test` is the suite now running, so it is recognized
//! and not started again. Running the real cargo from inside `cargo test` would wait on the
//! build directory lock that the running `cargo test` holds, or build the release profile a
//! second time in another target directory (minutes on a small machine). `.ci/run` runs
//! the README's run command with the real cargo, and the static build's `rustup target
//! add` and `cargo build --target` (which stand-ins here only recognize) for real, then the
//! run command again with that binary. Any other command fails this test until a check for
//! it is added here.
#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use common::Feature;
use stockade::Policy;

const README: &str = include_str!("../README.md");

/// The bodies of the fenced code blocks whose info string is exactly `lang` (`""` for
/// blocks without one).
fn blocks(lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<(bool, String)> = None;
    for line in README.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) => current = Some((info.trim() == lang, String::new())),
            (Some((wanted, body)), Some("")) => {
                if *wanted {
                    out.push(std::mem::take(body));
                }
                current = None;
            }
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(current.is_none(), "README.md has an unclosed code block");
    out
}

/// The commands of a shell block: its lines without comments and blank lines, a trailing
/// `\` joining a line to the next.
fn commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in block.lines() {
        if pending.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                pending.push_str(head);
                pending.push(' ');
            }
            None => {
                pending.push_str(line);
                out.push(std::mem::take(&mut pending));
            }
        }
    }
    assert!(pending.is_empty(), "a shell block ends in `\\`: {block}");
    out
}

/// A temp dir outside `/tmp` (inside the sandbox `/tmp` is private and hides mistakes):
/// under the crate's target dir, or `/var/tmp` for a user who cannot write there.
fn outside_tmp() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("stockade-readme-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .or_else(|_| {
            tempfile::Builder::new()
                .prefix("stockade-readme-")
                .tempdir_in("/var/tmp")
        })
        .expect("temp dir outside /tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// One test at a time creates, uses and removes the example's paths.
static EXAMPLE_PATHS: Mutex<()> = Mutex::new(());

/// The host paths a policy names, each with whether it is writable.
fn named_paths(p: &Policy) -> Vec<(PathBuf, bool)> {
    let mut out: Vec<(PathBuf, bool)> =
        p.writable_paths.iter().map(|w| (w.clone(), true)).collect();
    out.extend(
        p.read_only
            .iter()
            .chain(&p.data_dir)
            .chain(&p.tools_dir)
            .chain(&p.workspace)
            .map(|r| (r.clone(), false)),
    );
    out
}

/// The example's missing paths, created; removed on drop (the topmost directory the test
/// created, with whatever the runs left in it).
struct ExamplePaths {
    created: Vec<PathBuf>,
}

impl ExamplePaths {
    /// Creates what is missing of `paths` (directories). `Err` names the missing paths
    /// when this user cannot create them.
    fn ensure(paths: &[(PathBuf, bool)]) -> Result<ExamplePaths, String> {
        use std::os::unix::fs::PermissionsExt;
        let missing: Vec<&(PathBuf, bool)> = paths.iter().filter(|(p, _)| !p.exists()).collect();
        if missing.is_empty() {
            return Ok(ExamplePaths {
                created: Vec::new(),
            });
        }
        if !nix::unistd::geteuid().is_root() {
            let list: Vec<String> = missing
                .iter()
                .map(|(p, _)| p.display().to_string())
                .collect();
            return Err(format!(
                "needs root to create the README example's paths ({})",
                list.join(", ")
            ));
        }
        let mut made = ExamplePaths {
            created: Vec::new(),
        };
        for (path, writable) in missing {
            let top = path
                .ancestors()
                .take_while(|a| !a.exists())
                .last()
                .map(Path::to_path_buf);
            std::fs::create_dir_all(path).unwrap();
            if let Some(top) = top {
                made.created.push(top);
            }
            if *writable {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
            }
        }
        Ok(made)
    }
}

impl Drop for ExamplePaths {
    fn drop(&mut self) {
        for top in self.created.iter().rev() {
            let _ = std::fs::remove_dir_all(top);
        }
    }
}

/// Every TOML block, with its policy.
fn readme_policies() -> Vec<(String, Policy)> {
    let tomls = blocks("toml");
    assert!(!tomls.is_empty(), "README.md has no ```toml block");
    tomls
        .into_iter()
        .map(|text| {
            let p = Policy::from_config(&text)
                .unwrap_or_else(|e| panic!("README's TOML does not parse: {e}\n{text}"));
            (text, p)
        })
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `'text'` for sh.
fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// A shell script that checks from inside what each key of `p` promises; it prints the
/// check it is at, so the last line names a failure.
fn probe_script(p: &Policy) -> String {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let mut s = String::from("set -e\n");
    for w in &p.writable_paths {
        // A writable path of someone else's is no test of the sandbox.
        let md = std::fs::metadata(w).unwrap();
        let ours = me == 0 || md.uid() == me || md.mode() & 0o002 != 0;
        if ours {
            let f = quote(&w.join(".stockade-readme-probe"));
            s += &format!("echo 'writable_paths {}'\ntouch {f}\nrm {f}\n", w.display());
        }
    }
    for r in &p.read_only {
        let f = quote(&r.join(".stockade-readme-probe"));
        s += &format!(
            "echo 'read_only {}'\ntest -d {}\n! touch {f} 2>/dev/null\n",
            r.display(),
            quote(r)
        );
    }
    if let Some(d) = &p.data_dir {
        s += &format!(
            "echo 'data_dir {}'\n! ls {} >/dev/null 2>&1\n",
            d.display(),
            quote(d)
        );
    }
    if let Some(t) = &p.tools_dir {
        s += &format!(
            "echo 'tools_dir {}'\ntest -d {q}\ncase \"$PATH\" in {q}:*) ;; *) false ;; esac\n",
            t.display(),
            q = quote(t)
        );
    }
    for name in &p.passthrough_env {
        s += &format!("echo 'passthrough_env {name}'\n[ \"${{{name}}}\" = readme-value-{name} ]\n");
    }
    if p.network != stockade::Network::Full {
        s += "echo 'network: loopback only'\n\
              [ \"$(ls /sys/class/net 2>/dev/null || tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ')\" = lo ]\n";
    }
    if p.network == stockade::Network::Allow {
        // The clients' variables name the proxy on the sandbox's loopback.
        for (name, scheme) in [
            ("HTTP_PROXY", "http"),
            ("https_proxy", "http"),
            ("ALL_PROXY", "socks5h"),
        ] {
            s += &format!(
                "echo 'network allow: {name}'\ncase \"${name}\" in {scheme}://127.0.0.1:*) ;; *) false ;; esac\n"
            );
        }
        s += "echo 'network allow: NO_PROXY'\n[ \"$NO_PROXY\" = localhost,127.0.0.1,::1 ]\n";
    }
    s += "echo ok\n";
    s
}

#[test]
fn readme_toml_blocks_plan_and_run_verbatim() {
    require!(Feature::UserNs);
    let _one = EXAMPLE_PATHS.lock().unwrap_or_else(|e| e.into_inner());
    for (text, policy) in readme_policies() {
        let _paths = match ExamplePaths::ensure(&named_paths(&policy)) {
            Ok(p) => p,
            Err(reason) => {
                assert!(!common::required(Feature::Root), "{reason}");
                common::skip(module_path!(), &reason);
                return;
            }
        };
        let dir = outside_tmp();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let config = dir.path().join("config.toml");
        std::fs::write(&config, &text).unwrap();

        let out = Command::new(common::stockade_exe())
            .args(["plan", "--json", "--config"])
            .arg(&config)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "plan: {}\n{text}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let steps: Vec<&str> = v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        // A root host's read-only roots may be idmapped binds, which say so.
        let has = |step: String| {
            let idmapped = format!("{step} (root-owned shown as nobody)");
            assert!(
                steps.contains(&step.as_str()) || steps.contains(&idmapped.as_str()),
                "no `{step}` in {steps:?}"
            )
        };
        for w in &policy.writable_paths {
            has(format!("bind {}", w.display()));
        }
        for r in policy.read_only.iter().chain(&policy.tools_dir) {
            has(format!("bind read-only {}", r.display()));
        }
        if let Some(t) = &policy.tools_dir {
            assert_eq!(v["path"][0], t.to_str().unwrap(), "{v}");
        }
        let net = policy.network != stockade::Network::Full;
        assert_eq!(v["namespaces"]["net"], net, "{v}");
        if policy.network == stockade::Network::Allow {
            assert_eq!(
                v["egress"],
                serde_json::json!({
                    "allow_domains": policy.allow_domains,
                    "allow_private": policy.allow_private,
                    "listen": {"kind": "inside", "http": "127.0.0.1:3128", "socks": "127.0.0.1:1080"},
                }),
                "{text}"
            );
        } else {
            assert_eq!(v["egress"], serde_json::Value::Null, "{v}");
        }

        let mut run = Command::new(common::stockade_exe());
        run.args(["run", "--config"])
            .arg(&config)
            .args(["--", "sh", "-c", &probe_script(&policy)])
            .current_dir(&ws);
        for name in &policy.passthrough_env {
            run.env(name, format!("readme-value-{name}"));
        }
        let out = run.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.ends_with("ok\n"),
            "run ({:?}) failed at the last check:\n{stdout}{}\n{text}",
            out.status,
            stderr(&out)
        );
        // The sandbox left nothing in the workspace.
        assert_eq!(std::fs::read_dir(&ws).unwrap().count(), 0);
    }
}

/// `cargo` for the README's commands (see the module docs).
const CARGO_STAND_IN: &str = r#"
cargo() {
  if [ "$#" -eq 1 ] && [ "$1" = test ]; then
    echo "readme: cargo test is the suite now running" >&2
    return 0
  fi
  if [ "$1" = run ] && [ "$2" = --release ] && [ "$3" = -- ]; then
    shift 3
    "$STOCKADE_README_EXE" "$@"
    return
  fi
  if [ "$*" = "build --release --target $STOCKADE_README_MUSL --bin stockade" ]; then
    echo "readme: the static build is run for real by .ci/run" >&2
    return 0
  fi
  echo "readme: no stand-in for: cargo $*" >&2
  return 97
}
rustup() {
  if [ "$*" = "target add $STOCKADE_README_MUSL" ]; then
    echo "readme: the static build is run for real by .ci/run" >&2
    return 0
  fi
  echo "readme: no stand-in for: rustup $*" >&2
  return 97
}
"#;

/// The musl target the README's static build names: `.ci/run` builds the CLI for it and
/// runs the README's run command with that binary.
const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

#[test]
fn readme_shell_commands_run_verbatim() {
    require!(Feature::UserNs);
    let cmds: Vec<String> = blocks("sh").iter().flat_map(|b| commands(b)).collect();
    assert!(!cmds.is_empty(), "README.md has no ```sh command");
    let ws = outside_tmp();
    let mut ran_the_run_command = false;
    let mut checked_the_network_example = false;
    let mut static_build = 0;
    for cmd in &cmds {
        if let Some(example) = cmd.strip_prefix("stockade run --network allow ") {
            checked_the_network_example = true;
            check_the_network_example(example, ws.path(), cmd);
            continue;
        }
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{CARGO_STAND_IN}\n{cmd}"))
            .env("STOCKADE_README_EXE", common::stockade_exe())
            .env("STOCKADE_README_MUSL", MUSL_TARGET)
            .current_dir(ws.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let err = stderr(&out);
        let shown = format!("`{cmd}` ({:?}):\n{stdout}{err}", out.status);
        if cmd == "cargo test" {
            assert!(
                out.status.success() && err.contains("suite now running"),
                "{shown}"
            );
        } else if cmd.starts_with("cargo run --release -- run -- sh -c 'id; ls /; touch /usr/x") {
            ran_the_run_command = true;
            check_the_run_command(&out, ws.path(), &shown);
        } else if cmd == &format!("rustup target add {MUSL_TARGET}")
            || cmd == &format!("cargo build --release --target {MUSL_TARGET} --bin stockade")
        {
            static_build += 1;
            assert!(
                out.status.success() && err.contains("run for real by .ci/run"),
                "{shown}"
            );
        } else {
            panic!("README command without a check in tests/readme.rs: {shown}");
        }
    }
    assert!(ran_the_run_command, "README lost its run command: {cmds:?}");
    assert!(
        checked_the_network_example,
        "README lost its network example: {cmds:?}"
    );
    // `.ci/run` finds the static build's two commands by their text.
    assert_eq!(static_build, 2, "README lost its static build: {cmds:?}");
    assert_eq!(
        std::fs::read_dir(ws.path()).unwrap().count(),
        0,
        "the run left something in the workspace"
    );
}

/// The restricted-network example, `stockade run --network allow FLAGS -- git clone URL`,
/// needs the internet, so it is not run: its flags (as `sh` parses them) go to `stockade
/// plan`, which must accept them and show an allowlist that lets the clone reach the URL's
/// host on its port, on the full layer's proxy.
fn check_the_network_example(example: &str, ws: &Path, cmd: &str) {
    let (flags, program) = example
        .split_once(" -- ")
        .unwrap_or_else(|| panic!("no ` -- PROGRAM` in `{cmd}`"));
    let url = program
        .strip_prefix("git clone ")
        .unwrap_or_else(|| panic!("`{cmd}` does not run `git clone URL`"));
    let url = url::Url::parse(url).unwrap_or_else(|e| panic!("`{cmd}`: {e}"));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "\"$STOCKADE_README_EXE\" plan --json --network allow {flags}"
        ))
        .env("STOCKADE_README_EXE", common::stockade_exe())
        .current_dir(ws)
        .output()
        .unwrap();
    let shown = format!(
        "`{cmd}` as `stockade plan` ({:?}):\n{}",
        out.status,
        stderr(&out)
    );
    assert!(out.status.success(), "{shown}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let domains: Vec<String> = serde_json::from_value(v["egress"]["allow_domains"].clone())
        .unwrap_or_else(|e| panic!("{shown}{e}: {v}"));
    let allow = stockade::policy::Allowlist::parse(&domains).unwrap();
    let (host, port) = (
        url.host_str().unwrap(),
        url.port_or_known_default().unwrap(),
    );
    assert!(
        allow.allows(host, port),
        "{shown}: {domains:?} does not allow {host} port {port}"
    );
    assert_eq!(v["egress"]["listen"]["kind"], "inside", "{shown}: {v}");
}

/// `sh -c 'id; ls /; touch /usr/x || echo "/usr is read-only"'` in the sandbox: the
/// caller's own uid, the sandbox's root, `/usr` read-only.
fn check_the_run_command(out: &Output, ws: &Path, shown: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    let lines: Vec<&str> = stdout.lines().collect();
    let uid = nix::unistd::getuid().as_raw();
    assert!(lines[0].starts_with(&format!("uid={uid}(")), "{shown}");
    assert_eq!(lines.last(), Some(&"/usr is read-only"), "{shown}");
    assert!(
        stderr(out).contains("touch: cannot touch '/usr/x': Read-only file system"),
        "{shown}"
    );
    let root: Vec<&str> = lines[1..lines.len() - 1].to_vec();
    for want in ["dev", "etc", "proc", "tmp", "usr"] {
        assert!(root.contains(&want), "no /{want} inside: {shown}");
    }
    // The host's private top-level directories are not there (unless the workspace is).
    for host_only in ["root", "boot", "srv", "mnt"] {
        if !ws.starts_with(format!("/{host_only}")) {
            assert!(!root.contains(&host_only), "/{host_only} inside: {shown}");
        }
    }
    assert!(!Path::new("/usr/x").exists());
}

/// The `--flags` of `stockade SUB --help`.
fn help_flags(sub: &str) -> Vec<String> {
    let out = Command::new(common::stockade_exe())
        .args([sub, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut flags: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("-h, ").unwrap_or(l);
            let name = l.strip_prefix("--")?;
            let end = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(name.len());
            Some(format!("--{}", &name[..end]))
        })
        .filter(|f| f != "--help")
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn readme_cli_synopsis_lists_every_flag() {
    let synopsis = README
        .split("## CLI")
        .nth(1)
        .and_then(|s| s.split("```\n").nth(1))
        .expect("README's CLI synopsis");
    // `stockade SUB …` lines with their indented continuations.
    let mut by_sub: Vec<(String, Vec<String>)> = Vec::new();
    for line in synopsis.lines() {
        if let Some(rest) = line.strip_prefix("stockade ") {
            by_sub.push((rest.split(' ').next().unwrap().to_string(), Vec::new()));
        }
        let (_, flags) = by_sub.last_mut().expect("synopsis starts with `stockade`");
        for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if word.starts_with("--") && word.len() > 2 {
                flags.push(word.to_string());
            }
        }
    }
    // A subcommand may take more than one line (`run`, and `run --session`).
    let listed = |sub: &str| -> Vec<String> {
        assert!(
            by_sub.iter().any(|(s, _)| s == sub),
            "no `stockade {sub}` in the synopsis"
        );
        let mut f: Vec<String> = by_sub
            .iter()
            .filter(|(s, _)| s == sub)
            .flat_map(|(_, f)| f.clone())
            .collect();
        f.sort();
        f.dedup();
        f
    };
    for sub in ["run", "detect", "scan", "changes", "apply", "discard"] {
        assert_eq!(
            listed(sub),
            help_flags(sub),
            "`stockade {sub}` in README's CLI synopsis"
        );
    }
    // `plan [same flags]`: run's policy flags, and its own.
    let run = listed("run");
    let plan = listed("plan");
    for f in help_flags("plan") {
        assert!(
            plan.contains(&f) || run.contains(&f),
            "README's synopsis lacks `stockade plan {f}`"
        );
    }
    for f in &plan {
        assert!(
            help_flags("plan").contains(f),
            "README lists `stockade plan {f}`, --help does not"
        );
    }
    // `session --socket PATH [--no-die-with-parent] [run's policy flags]`: exactly those.
    let session = listed("session");
    assert_eq!(
        session,
        ["--no-die-with-parent", "--socket"],
        "`stockade session` in README's synopsis"
    );
    for f in help_flags("session") {
        assert!(
            session.contains(&f) || (run.contains(&f) && help_flags("plan").contains(&f)),
            "README's synopsis lacks `stockade session {f}`"
        );
    }
}

#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    // The example's paths, created as root, stay while the re-run uses them.
    let _one = EXAMPLE_PATHS.lock().unwrap_or_else(|e| e.into_inner());
    let _paths = nix::unistd::geteuid().is_root().then(|| {
        let all: Vec<(PathBuf, bool)> = readme_policies()
            .iter()
            .flat_map(|(_, p)| named_paths(p))
            .collect();
        ExamplePaths::ensure(&all).expect("root creates the example's paths")
    });
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
