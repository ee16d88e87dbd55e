//! What this host allows: the full probe for reports, and the cheap view a sandbox starts
//! from.
//!
//! [`Capabilities::probe`] does not stop at `unshare` succeeding (on some distributions it
//! does and mounting then fails): it spawns a real child through the same code path as a
//! sandbox, which maps its ids, builds a root, binds a tree read-only and mounts a fresh
//! `/proc`, then exits. `stockade detect` and the tests' `require!` use it. Spawning is the
//! backend's work, so that probe lives in `backend` (above this module in the flow); this
//! module holds the cheap facts, the types, the refusals learned and the cached result.
//!
//! [`Sandbox::new`](crate::Sandbox::new) does not run it: a probe child would cost a second
//! namespace clone on every run of the CLI. A sandbox chooses its layer from what is cheap
//! to know (one Landlock ABI query, `PR_GET_SECCOMP`) and assumes namespaces and a fresh
//! `/proc` work; the first spawn is the probe. When that spawn fails because the host
//! refuses namespaces or a fresh `/proc`, the fact is recorded here for the
//! whole process and the sandbox falls back per its policy. No sysctl is read: none of them
//! is authoritative (a user namespace's own `user.max_user_namespaces` says nothing of its
//! ancestors' limits, AppArmor profiles grant exceptions to
//! `kernel.apparmor_restrict_unprivileged_userns`), and a refused `clone` costs less than
//! the reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use serde::Serialize;

use crate::policy::Layer;

pub(crate) mod cause;
#[cfg(target_os = "linux")]
pub(crate) mod idmap;
#[cfg(target_os = "linux")]
pub(crate) mod stat;

pub use cause::{Cause, Feature};

/// Whether one feature is usable, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Availability {
    /// Usable.
    pub available: bool,
    /// Why not (the failing call and its error), when unavailable.
    pub reason: Option<String>,
}

impl Availability {
    /// Usable.
    pub fn yes() -> Self {
        Availability {
            available: true,
            reason: None,
        }
    }

    /// Not usable, because of `reason`.
    pub fn no(reason: impl Into<String>) -> Self {
        Availability {
            available: false,
            reason: Some(reason.into()),
        }
    }
}

/// What this kernel allows, as found by [`Capabilities::probe`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// The operating system stockade was built for.
    pub os: &'static str,
    /// User namespaces that can map ids and mount (with mount, pid, ipc, uts).
    pub user_namespaces: Availability,
    /// A fresh procfs can be mounted in a new PID namespace (nested containers refuse it).
    pub fresh_proc: Availability,
    /// Landlock, with the ABI version in the reason when unavailable.
    pub landlock: Availability,
    /// The Landlock ABI version (0 when unavailable).
    pub landlock_abi: u32,
    /// seccomp filters.
    pub seccomp: Availability,
    /// macOS: the Seatbelt sandbox (`sandbox_init` with a generated SBPL profile), which
    /// is the `full` layer there.
    pub sandbox: Availability,
    /// The recognized causes of what is unavailable, each with its remedy (empty when
    /// everything is available, or when no cause is recognized).
    pub causes: Vec<Cause>,
}

/// Why a spawn of the full layer could not start on this host, as the spawn found out.
// Only the Linux launcher meets refusals: Seatbelt has no namespaces to be refused.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// What was refused.
    pub kind: Refused,
    /// The failing call and its OS error, with the cause's summary when one is recognized.
    pub reason: String,
    /// The recognized causes ([`cause::diagnose`]).
    pub causes: Vec<Cause>,
}

/// What a [`Refusal`] refuses.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The host refuses user namespaces (the namespace `clone`, the id-map write or the
    /// first mounts failed).
    Namespaces,
    /// The kernel refuses a fresh procfs in the new PID namespace (nested containers).
    FreshProc,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)?;
        for c in &self.causes {
            write!(f, "; to fix: {}", c.remedy)?;
        }
        Ok(())
    }
}

/// `reason` (a failing call and its error) with the summaries of `causes` added, as a
/// refusal or an availability states it: `clone(…): No space left on device
/// (user.max_user_namespaces = 0: …)`. `fallback` is added instead when no cause is
/// recognized (a guess, phrased as one).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn with_causes(reason: String, causes: &[Cause], fallback: &str) -> String {
    if causes.is_empty() {
        return format!("{reason}{fallback}");
    }
    let summaries: Vec<&str> = causes.iter().map(|c| c.summary.as_str()).collect();
    format!("{reason} ({})", summaries.join("; "))
}

/// Adds `more` to `causes`, each once.
fn merge(causes: &mut Vec<Cause>, more: impl IntoIterator<Item = Cause>) {
    for c in more {
        if !causes.contains(&c) {
            causes.push(c);
        }
    }
}

/// Refusals learned from spawns, for the whole process.
static LEARNED: Mutex<Learned> = Mutex::new(Learned {
    namespaces: None,
    fresh_proc: None,
    causes: Vec::new(),
});

/// Bumped each time a refusal is learned: a sandbox prepared before it re-plans.
static GENERATION: AtomicU64 = AtomicU64::new(0);

static PROBED: OnceLock<Capabilities> = OnceLock::new();

struct Learned {
    namespaces: Option<String>,
    fresh_proc: Option<String>,
    causes: Vec<Cause>,
}

impl Capabilities {
    /// What a sandbox assumes when it chooses its layer: the full probe's result when it
    /// has run in this process, else the cheap facts (Landlock ABI, seccomp) with
    /// namespaces and a fresh `/proc` assumed to work; either way overridden by what
    /// spawns have been refused since.
    pub(crate) fn assumed() -> Capabilities {
        let mut caps = match PROBED.get() {
            Some(probed) => probed.clone(),
            None => cheap().clone(),
        };
        let learned = LEARNED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(reason) = &learned.namespaces {
            caps.user_namespaces = Availability::no(reason.clone());
            caps.fresh_proc = Availability::no("user namespaces unavailable");
        }
        if let Some(reason) = &learned.fresh_proc {
            caps.fresh_proc = Availability::no(reason.clone());
        }
        merge(&mut caps.causes, learned.causes.iter().cloned());
        caps
    }

    /// Records that a spawn was refused, for every sandbox of this process.
    pub(crate) fn learn(refusal: &Refusal) {
        let mut learned = LEARNED.lock().unwrap_or_else(|e| e.into_inner());
        let reason = Some(refusal.reason.clone());
        match refusal.kind {
            Refused::Namespaces => learned.namespaces = reason,
            Refused::FreshProc => learned.fresh_proc = reason,
        }
        merge(&mut learned.causes, refusal.causes.iter().cloned());
        GENERATION.fetch_add(1, Ordering::Release);
    }

    /// Changes each time a refusal is learned; see [`Capabilities::assumed`].
    pub(crate) fn generation() -> u64 {
        GENERATION.load(Ordering::Acquire)
    }

    /// Whether `layer` can run here, and why not.
    pub fn layer(&self, layer: Layer) -> Availability {
        match layer {
            Layer::Passthrough => Availability::yes(),
            Layer::Full => self.full_backend().clone(),
            Layer::Landlock => {
                if !self.landlock.available {
                    self.landlock.clone()
                } else {
                    self.seccomp.clone()
                }
            }
        }
    }

    /// The remedies of the causes that take `layer` away here, as an error or a warning
    /// adds them: `; to fix: …` for each.
    pub fn remedies(&self, layer: Layer) -> String {
        let features: &[Feature] = match layer {
            Layer::Passthrough => &[],
            Layer::Full if self.os == "linux" => &[Feature::UserNamespaces, Feature::FreshProc],
            Layer::Full => &[],
            Layer::Landlock => &[Feature::Landlock],
        };
        let mut out = String::new();
        for c in self.causes.iter().filter(|c| features.contains(&c.feature)) {
            out.push_str("; to fix: ");
            out.push_str(&c.remedy);
        }
        out
    }

    /// What the `full` layer is made of on this OS: the Seatbelt sandbox on macOS, user
    /// namespaces (with mounts, Landlock and seccomp) elsewhere.
    fn full_backend(&self) -> &Availability {
        if self.os == "macos" {
            &self.sandbox
        } else {
            &self.user_namespaces
        }
    }

    /// Whether the `full` layer mounts a fresh `/proc` (namespaces do; Seatbelt does not).
    pub(crate) fn full_mounts_proc(&self) -> bool {
        self.os != "macos"
    }

    /// The strongest layer available.
    pub fn best_layer(&self) -> Layer {
        [Layer::Full, Layer::Landlock]
            .into_iter()
            .find(|l| self.layer(*l).available)
            .unwrap_or(Layer::Passthrough)
    }
}

/// Why an `ENOENT` from a path under `/proc/self` happened, when the reason is that
/// `/proc` is not mounted (a minimal container image, a chroot): the note an error adds.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn proc_note(errno: i32) -> Option<&'static str> {
    (errno == libc::ENOENT && !std::path::Path::new("/proc/self").exists())
        .then_some(PROC_NOT_MOUNTED)
}

/// Whether this process runs under `chroot(2)`, where the kernel refuses new user
/// namespaces (`EPERM`). `None` when that cannot be told cheaply.
///
/// The kernel's condition (`current_chrooted()` in `create_user_ns`) is that the
/// process's root is not the root of its mount namespace (after following what is
/// mounted over it). No unprivileged read states that, so two cheap signs stand in:
///
/// - a root that is no mount's root (no line of `/proc/self/mountinfo` has the mount
///   point `/`) is a plain directory, never a namespace's root: a chroot, for certain;
/// - otherwise, in the mount namespace of PID 1, a root other than PID 1's is a chroot
///   (systemd's test), and the same root as PID 1's is taken for none: PID 1 is assumed
///   not to be chrooted itself.
///
/// The second sign says nothing when this process *is* PID 1 (the entrypoint of a
/// container, a CLI started by `unshare -pf`): it compares the root with itself, and
/// used to clear a chroot'ed entrypoint and blame AppArmor or seccomp instead. There,
/// and for a chroot into a mount's root in a mount namespace of its own, or without
/// `/proc`, the answer stays unknown.
#[cfg(target_os = "linux")]
pub(crate) fn chrooted() -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok();
    let pid1 = || -> Option<(bool, bool)> {
        let same_ns = id("/proc/1/ns/mnt")? == id("/proc/self/ns/mnt")?;
        Some((same_ns, id("/proc/1/root")? == id("/")?))
    };
    chrooted_by(mountinfo.as_deref(), std::process::id() == 1, pid1)
}

/// [`chrooted`] from its facts: `mountinfo` (this process's, when readable), whether this
/// process is PID 1, and (asked only when it is not) whether it shares PID 1's mount
/// namespace and its root.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn chrooted_by(
    mountinfo: Option<&str>,
    is_pid1: bool,
    pid1: impl FnOnce() -> Option<(bool, bool)>,
) -> Option<bool> {
    if mountinfo.is_some_and(root_is_no_mount) {
        return Some(true);
    }
    if is_pid1 {
        return None;
    }
    match pid1()? {
        (true, same_root) => Some(!same_root),
        (false, _) => None,
    }
}

/// Whether no mount in `mountinfo` (its text) is mounted on `/`: the process's root is
/// then a plain directory, the sign of a chroot (mount points outside the root are not
/// listed at all).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn root_is_no_mount(mountinfo: &str) -> bool {
    !mountinfo.lines().any(|l| l.split(' ').nth(4) == Some("/"))
}

/// The whole of a small kernel-made file (`/proc`, `/sys`), read with one `open`, reads
/// into a buffer of `capacity` bytes (grown when the file is larger) and one `close`.
///
/// `std::fs::read_to_string` asks for the file's size first (`statx` or `fstat`), which a
/// procfs file reports as 0, and then reads in chunks of 32 bytes and up, doubling:
/// nine system calls for a 300-byte `/proc/PID/stat`, and more for `/proc/net/unix`.
/// These files sit on the spawn path (the sandbox's first checks and every spawn's
/// evidence), where each call counts. On Linux the file is opened with the raw `openat`
/// of `stockade_sys` ([`open_read`]): musl's `open` follows every `O_CLOEXEC` open with
/// an `fcntl(F_SETFD)` for kernels older than 2.6.23, one more call per file.
///
/// A short read ends the file without a last read for its end when it left room for one
/// more record in a page ([`SEQ_RECORD_MAX`]): the kernel makes such a file (a `seq_file`)
/// by filling a buffer of at least a page with whole records per read, stopping only at
/// the read's size, a record that does not fit, or the end. The files read here (`uid_map`
/// lines, `/proc/net/unix` lines) have records shorter than that.
///
/// # Errors
///
/// The error of `open` or `read`.
pub(crate) fn read_small(
    path: impl AsRef<std::path::Path>,
    capacity: usize,
) -> std::io::Result<String> {
    String::from_utf8(read_small_bytes(path, capacity)?)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))
}

/// The longest record of a file [`read_small`] reads, with room to spare: a
/// `/proc/net/unix` line is ~60 bytes and a path of at most 108, a `uid_map` line 33.
const SEQ_RECORD_MAX: usize = 256;

/// As [`read_small`], the bytes as they are (a `/proc/PID/stat` names its process with
/// any bytes).
///
/// # Errors
///
/// The error of `open` or `read`.
pub(crate) fn read_small_bytes(
    path: impl AsRef<std::path::Path>,
    capacity: usize,
) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = open_read(path.as_ref())?;
    let mut buf = vec![0u8; capacity.max(64)];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let want = buf.len() - len;
        match file.read(buf.get_mut(len..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(n) if n + SEQ_RECORD_MAX <= want.min(4096) => {
                len += n;
                break;
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// What one `read` of up to `capacity` bytes of `path` returns: an open, a read and a
/// close. For a procfs list the kernel makes per read (a `seq_file`: `/proc/PID/task/TID/children`)
/// that is the start of the list, all of it when it fits in `capacity` and a page; for a
/// caller that needs only the first entries.
///
/// # Errors
///
/// The error of `open` or `read`.
#[cfg(target_os = "linux")]
pub(crate) fn read_first(
    path: impl AsRef<std::path::Path>,
    capacity: usize,
) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = open_read(path.as_ref())?;
    let mut buf = vec![0u8; capacity];
    loop {
        match file.read(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// `path` opened for reading, close-on-exec, as `File::open` opens it (retried on
/// `EINTR`; a path with a NUL byte is `InvalidInput`), in one system call.
#[cfg(target_os = "linux")]
fn open_read(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    loop {
        let flags = libc::O_RDONLY | libc::O_CLOEXEC;
        match stockade_sys::linux::openat(stockade_sys::linux::CWD, &path, flags, 0) {
            Ok(fd) => return Ok(std::fs::File::from(std::os::fd::OwnedFd::from(fd))),
            Err(stockade_sys::Errno(libc::EINTR)) => {}
            Err(e) => return Err(std::io::Error::from_raw_os_error(e.0)),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn open_read(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// The note of [`proc_note`].
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) const PROC_NOT_MOUNTED: &str = "/proc is not mounted";

/// The cheap facts, computed once per process.
fn cheap() -> &'static Capabilities {
    static CHEAP: OnceLock<Capabilities> = OnceLock::new();
    CHEAP.get_or_init(cheap_now)
}

/// The full probe's result, run once per process: `full` gets the cheap facts and adds
/// what only a real child can tell. The backend supplies `full`
/// ([`Capabilities::probe`]): this module only keeps what was found, so that it imports
/// nothing above it.
pub(crate) fn probed_or_init(
    full: impl FnOnce(Capabilities) -> Capabilities,
) -> &'static Capabilities {
    PROBED.get_or_init(|| {
        let caps = full(cheap().clone());
        tracing::info!(
            user_namespaces = caps.user_namespaces.available,
            fresh_proc = caps.fresh_proc.available,
            landlock_abi = caps.landlock_abi,
            seccomp = caps.seccomp.available,
            sandbox = caps.sandbox.available,
            "stockade probed the kernel"
        );
        caps
    })
}

/// The Landlock ABI version the kernel reports, asked once per process: a kernel's
/// Landlock does not change while it runs, and the probe, every ruleset's build (one per
/// command, and the sandbox's own) and the audit tap would otherwise each ask again.
#[cfg(target_os = "linux")]
pub(crate) fn landlock_abi() -> Result<i32, stockade_sys::Errno> {
    static ABI_VERSION: std::sync::OnceLock<Result<i32, stockade_sys::Errno>> =
        std::sync::OnceLock::new();
    *ABI_VERSION.get_or_init(stockade_sys::linux::landlock_abi_version)
}

/// One Landlock ABI query and one `prctl`; namespaces and a fresh `/proc` are assumed.
#[cfg(target_os = "linux")]
fn cheap_now() -> Capabilities {
    let mut causes = Vec::new();
    let (landlock, landlock_abi) = match landlock_abi() {
        Ok(v) if v >= 1 => (Availability::yes(), v as u32),
        Ok(v) => (Availability::no(format!("landlock ABI {v}")), 0),
        Err(e) => {
            causes = cause::diagnose(&cause::HostFacts::read(None, None, Some(e.0)));
            let reason = format!("landlock_create_ruleset: {}", crate::error::strerror(e.0));
            (Availability::no(with_causes(reason, &causes, "")), 0)
        }
    };
    let seccomp = match stockade_sys::linux::prctl_get_seccomp() {
        Ok(_) => Availability::yes(),
        Err(e) => Availability::no(format!(
            "prctl(PR_GET_SECCOMP): {}",
            crate::error::strerror(e.0)
        )),
    };
    Capabilities {
        os: "linux",
        user_namespaces: Availability::yes(),
        fresh_proc: Availability::yes(),
        landlock,
        landlock_abi,
        seccomp,
        sandbox: Availability::no("sandbox_init is macOS only"),
        causes,
    }
}

#[cfg(not(target_os = "linux"))]
fn cheap_now() -> Capabilities {
    let os = std::env::consts::OS;
    let linux_only = |what: &str| Availability::no(format!("{what} is Linux only, not on {os}"));
    Capabilities {
        os,
        user_namespaces: linux_only("user namespaces"),
        fresh_proc: linux_only("a fresh /proc of a PID namespace"),
        landlock: linux_only("Landlock (a Linux security module)"),
        landlock_abi: 0,
        seccomp: linux_only("seccomp"),
        sandbox: sandbox_availability(),
        causes: Vec::new(),
    }
}

/// The Seatbelt sandbox is part of every macOS (`libsystem_sandbox` in `libSystem`); a
/// profile it refuses comes back from the spawn as `SpawnError::SandboxInit`.
#[cfg(target_os = "macos")]
fn sandbox_availability() -> Availability {
    Availability::yes()
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn sandbox_availability() -> Availability {
    Availability::no(format!(
        "sandbox_init is macOS only; stockade has no containment backend for {}",
        std::env::consts::OS
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_small_read_returns_the_whole_file_whatever_its_buffer() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let text: String = (0..500).map(|i| format!("line {i}\n")).collect();
        std::fs::write(file.path(), &text).unwrap();
        // Smaller than the file (grown, twice over), and larger.
        for capacity in [1, 100, 1 << 16] {
            assert_eq!(super::read_small(file.path(), capacity).unwrap(), text);
        }
        // A procfs file, which reports its size as 0.
        if cfg!(target_os = "linux") {
            let status = super::read_small("/proc/self/status", 64).unwrap();
            assert!(
                status.starts_with("Name:") && status.contains("\nSigCgt:"),
                "{status}"
            );
        }
        assert_eq!(
            super::read_small("/nonexistent/x", 64).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }

    #[test]
    fn a_small_read_opens_and_fails_as_file_open_does() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        // Close-on-exec, read-only.
        let file = super::open_read(std::path::Path::new("/proc/self/status")).unwrap();
        // SAFETY: F_GETFD and F_GETFL take no third argument; `file` is open.
        let fd_flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFD) };
        // SAFETY: as above.
        let fl = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
        assert_eq!(fd_flags, libc::FD_CLOEXEC);
        assert_eq!(fl & libc::O_ACCMODE, libc::O_RDONLY);
        // The same errors as `File::open` and its read, kind and errno.
        let nul = std::ffi::OsStr::new("a\0b");
        let missing = dir.path().join("missing");
        let not_dir = std::path::Path::new("/proc/self/status/x");
        for path in [std::path::Path::new(nul), &missing, not_dir] {
            let ours = super::read_small_bytes(path, 64).unwrap_err();
            let std = std::fs::File::open(path).unwrap_err();
            assert_eq!(ours.kind(), std.kind(), "{}", path.display());
            assert_eq!(ours.raw_os_error(), std.raw_os_error());
        }
        // A directory opens and then fails to read, as with std.
        let err = super::read_small_bytes(dir.path(), 64).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EISDIR));
    }

    #[test]
    fn pid_1_is_never_cleared_by_comparing_its_root_with_itself() {
        let mounted = "22 1 0:21 / / rw - tmpfs none rw\n";
        let plain = "22 1 0:21 /root /proc rw - proc proc rw\n";
        let never = || -> Option<(bool, bool)> { panic!("PID 1 compared with itself") };
        // The CLI as a container's entrypoint: PID 1, chrooted into a plain directory.
        assert_eq!(super::chrooted_by(Some(plain), true, never), Some(true));
        // PID 1 at a mount's root: unknown, not "no chroot".
        assert_eq!(super::chrooted_by(Some(mounted), true, never), None);
        assert_eq!(super::chrooted_by(None, true, never), None);
        // Any other process: PID 1's root decides, in PID 1's mount namespace only.
        let other = |facts| move || Some(facts);
        assert_eq!(
            super::chrooted_by(Some(mounted), false, other((true, true))),
            Some(false)
        );
        assert_eq!(
            super::chrooted_by(Some(mounted), false, other((true, false))),
            Some(true)
        );
        assert_eq!(
            super::chrooted_by(Some(mounted), false, other((false, true))),
            None
        );
        // A plain-directory root is a chroot whatever PID 1's root is.
        assert_eq!(
            super::chrooted_by(Some(plain), false, other((true, true))),
            Some(true)
        );
    }

    #[test]
    fn a_root_that_is_no_mount_is_a_chroot() {
        let pivoted = "22 1 0:21 / / rw - tmpfs none rw\n23 22 0:5 / /proc rw - proc proc rw\n";
        assert!(!super::root_is_no_mount(pivoted));
        let chrooted =
            "25 24 0:30 / /usr ro - ext4 /dev/sda1 ro\n26 24 0:5 / /proc rw - proc proc rw\n";
        assert!(super::root_is_no_mount(chrooted));
        // A mount point such as `/usr` is not `/`.
        assert!(super::root_is_no_mount(""));
    }

    use super::*;

    fn caps(os: &'static str) -> Capabilities {
        Capabilities {
            os,
            user_namespaces: Availability::no("userns reason"),
            fresh_proc: Availability::no("proc reason"),
            landlock: Availability::no("landlock reason"),
            landlock_abi: 0,
            seccomp: Availability::no("seccomp reason"),
            sandbox: Availability::yes(),
            causes: Vec::new(),
        }
    }

    #[test]
    fn full_is_seatbelt_on_macos_and_namespaces_elsewhere() {
        let mac = caps("macos");
        assert!(mac.layer(Layer::Full).available);
        assert!(!mac.full_mounts_proc());
        assert_eq!(mac.best_layer(), Layer::Full);
        assert_eq!(
            mac.layer(Layer::Landlock).reason.as_deref(),
            Some("landlock reason")
        );
        let linux = caps("linux");
        assert_eq!(
            linux.layer(Layer::Full).reason.as_deref(),
            Some("userns reason")
        );
        assert!(linux.full_mounts_proc());
        assert_eq!(linux.best_layer(), Layer::Passthrough);
    }
}
