//! `bwrap` with the layout stockade builds, for the benchmarks that compare with it
//! (`bench_all`, `cold_floor`): one definition, so that they compare the same layout.
//! `bwrap` is a comparison only, never a dependency.

use std::path::{Path, PathBuf};

/// Where the benchmarks look for `bwrap`.
pub const BWRAP: &str = "/usr/bin/bwrap";

/// `bwrap` arguments for the layout stockade builds: read-only system dirs, the
/// merged-usr symlinks, private /tmp, minimal /dev, fresh /proc, the workspace and
/// `writable` bound read-write, new user/pid/ipc/uts (and net) namespaces.
pub fn args(ws: &Path, writable: &[PathBuf], net_none: bool, argv: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    for d in ["/usr", "/etc", "/opt"] {
        a.extend(["--ro-bind".into(), d.into(), d.into()]);
    }
    for (l, t) in [
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ] {
        a.extend(["--symlink".into(), t.into(), l.into()]);
    }
    for (opt, d) in [("--tmpfs", "/tmp"), ("--dev", "/dev"), ("--proc", "/proc")] {
        a.extend([opt.into(), d.into()]);
    }
    let w = ws.display().to_string();
    a.extend(["--bind".into(), w.clone(), w.clone()]);
    for p in writable {
        let p = p.display().to_string();
        a.extend(["--bind".into(), p.clone(), p]);
    }
    for u in ["user", "pid", "ipc", "uts"] {
        a.push(format!("--unshare-{u}"));
    }
    if net_none {
        a.push("--unshare-net".into());
    }
    a.extend([
        "--die-with-parent".into(),
        "--new-session".into(),
        "--clearenv".into(),
        "--setenv".into(),
        "PATH".into(),
        "/usr/bin:/bin".into(),
        "--chdir".into(),
        w,
    ]);
    a.extend(argv.iter().map(|s| s.to_string()));
    a
}
