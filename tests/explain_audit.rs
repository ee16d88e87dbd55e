//! `Command::explain` with Landlock's own audit records (ABI 7): on a root host with audit
//! enabled, what only Landlock refuses (here: a signal to a process outside the sandbox
//! on layer 2) is reported with the wall `landlock`, each run getting its own denials and
//! never another's; what the layout view already reported is not repeated; the program
//! sees the same errno with or without the records read; without audit, and as an
//! unprivileged user, the run works and reports from the seccomp view alone.
//!
//! The host's audit switch is turned on for the runs that need it and put back as found.

#![cfg(target_os = "linux")]

mod common;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;

use common::{Feature, LAYERS};
use stockade::{Denial, Layer, Network, Sandbox, Stdio, Wall};

/// One test at a time touches the host's audit switch.
static AUDIT: Mutex<()> = Mutex::new(());

const AUDIT_GET: u16 = 1000;
const AUDIT_SET: u16 = 1001;
const AUDIT_STATUS_ENABLED: u32 = 1;

fn netlink() -> std::io::Result<OwnedFd> {
    use nix::sys::socket::{AddressFamily, NetlinkAddr, SockFlag, SockProtocol, SockType};
    let s = nix::sys::socket::socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkAudit,
    )?;
    nix::sys::socket::bind(s.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
    Ok(s)
}

/// Sends one audit request; the reply's payload for `AUDIT_GET`.
fn audit_request(kind: u16, payload: &[u8]) -> std::io::Result<Vec<u8>> {
    let s = netlink()?;
    let mut msg = Vec::new();
    msg.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    let flags: u16 = if kind == AUDIT_SET { 1 | 4 } else { 1 }; // REQUEST (| ACK)
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(payload);
    nix::sys::socket::send(s.as_raw_fd(), &msg, nix::sys::socket::MsgFlags::empty())?;
    let mut buf = [0u8; 512];
    loop {
        let n =
            nix::sys::socket::recv(s.as_raw_fd(), &mut buf, nix::sys::socket::MsgFlags::empty())?;
        let kind_got = u16::from_ne_bytes([buf[4], buf[5]]);
        if kind_got == 2 {
            // NLMSG_ERROR: 0 is the ACK.
            let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            if err != 0 {
                return Err(std::io::Error::from_raw_os_error(-err));
            }
            if kind == AUDIT_SET {
                return Ok(Vec::new());
            }
            continue;
        }
        if kind_got == kind {
            return Ok(buf[16..n].to_vec());
        }
    }
}

/// Whether the host's audit is enabled, or why it cannot be read.
fn audit_enabled() -> Result<bool, String> {
    let status = audit_request(AUDIT_GET, &[]).map_err(|e| format!("AUDIT_GET: {e}"))?;
    let enabled = status.get(4..8).ok_or("short audit status")?;
    Ok(u32::from_ne_bytes(enabled.try_into().unwrap()) != 0)
}

fn set_audit(on: bool) {
    // struct audit_status: mask, enabled, then fields the mask leaves alone.
    let mut st = [0u8; 44];
    st[0..4].copy_from_slice(&AUDIT_STATUS_ENABLED.to_ne_bytes());
    st[4..8].copy_from_slice(&u32::from(on).to_ne_bytes());
    audit_request(AUDIT_SET, &st).expect("AUDIT_SET");
}

/// Audit switched `on` for the guard's life, then put back as found.
struct AuditSwitch {
    was: bool,
}

impl AuditSwitch {
    fn set(on: bool) -> AuditSwitch {
        let was = audit_enabled().expect("audit status");
        set_audit(on);
        AuditSwitch { was }
    }
}

impl Drop for AuditSwitch {
    fn drop(&mut self) {
        set_audit(self.was);
    }
}

/// Why this host cannot give Landlock's audit records to a root test, if it cannot (the
/// caller is root: `require!(Feature::Root)` first).
fn audit_missing() -> Option<String> {
    match stockade_sys_abi() {
        Some(abi) if abi >= 7 => {}
        Some(abi) => return Some(format!("Landlock ABI {abi} (< 7) has no audit records")),
        None => return Some("no Landlock".into()),
    }
    audit_enabled().err()
}

fn stockade_sys_abi() -> Option<i32> {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute and size 0 only
    // returns the ABI version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    (v > 0).then_some(v as i32)
}

/// Runs `script` with explain on: (exit code, stdout, denials).
fn run(sb: &Sandbox, script: &str) -> (i32, String, Vec<Denial>) {
    let mut child = sb
        .command("sh")
        .args(["-c", script])
        .explain(true)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = common::read_stdout(&mut child);
    let status = child.wait().expect("wait");
    (status.code().unwrap_or(-1), out, child.denials())
}

fn sandbox(ws: &Path, layer: Layer) -> Sandbox {
    common::sandbox_on(ws, layer, |p| p.network = Network::None)
}

/// A process of the host's, outside every sandbox, to aim signals at: its pid.
fn host_target() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep")
}

fn landlock_entries(d: &[Denial]) -> Vec<&Denial> {
    d.iter().filter(|d| d.wall == Wall::Landlock).collect()
}

/// The script: a signal to `pid` (Landlock's signal scope refuses it on layer 2; prints
/// the exit status of `kill`) and a write under `/usr` (the layout view reports it).
fn script(pid: u32) -> String {
    format!(
        "kill -CONT {pid} 2>/dev/null; echo kill=$?; echo x 2>/dev/null > /usr/stockade-x; true"
    )
}

#[test]
fn root_only_landlock_records_are_reported_per_run_without_repeating_the_layout() {
    require!(Feature::Root);
    if let Some(reason) = audit_missing() {
        assert!(!common::required_name("audit"), "audit records: {reason}");
        common::skip("root_only_landlock_records", &reason);
        return;
    }
    let _one = AUDIT.lock().unwrap_or_else(|e| e.into_inner());
    let _audit = AuditSwitch::set(true);
    let ws = common::tempdir();
    let (mut a, mut b) = (host_target(), host_target());
    // Two runs at once, each signalling its own target: each report has its own only.
    let sb = sandbox(ws.path(), Layer::Landlock);
    let (sa, sb2) = (sb.clone(), sb.clone());
    let (pa, pb) = (a.id(), b.id());
    let ta = std::thread::spawn(move || run(&sa, &script(pa)));
    let tb = std::thread::spawn(move || run(&sb2, &script(pb)));
    for ((code, out, denials), pid) in [(ta.join().unwrap(), pa), (tb.join().unwrap(), pb)] {
        assert_eq!(code, 0, "{out}");
        assert_eq!(out.trim(), "kill=1", "the signal is refused");
        let ll = landlock_entries(&denials);
        assert_eq!(ll.len(), 1, "one Landlock entry, this run's: {denials:#?}");
        assert_eq!(ll[0].operation, "scope.signal");
        assert_eq!(ll[0].target.as_deref(), Some(format!("pid {pid}").as_str()));
        assert_eq!(ll[0].count, 1);
        assert!(ll[0].hint.contains("by design"), "{}", ll[0].hint);
        // The write under /usr: once, from the layout view, which names the rule.
        let usr: Vec<_> = denials
            .iter()
            .filter(|d| d.target.as_deref().is_some_and(|t| t.starts_with("/usr")))
            .collect();
        assert_eq!(usr.len(), 1, "{denials:#?}");
        assert_eq!(usr[0].wall, Wall::Layout);
    }
    // The full layer: the same script reports no Landlock entry for what the layout
    // already refused (its /usr is a read-only mount: Landlock is never asked).
    if Feature::UserNs.missing().is_none() && LAYERS.contains(&Layer::Full) {
        let full = sandbox(ws.path(), Layer::Full);
        let (code, out, denials) = run(&full, &script(pa));
        assert_eq!(code, 0, "{out}");
        assert!(landlock_entries(&denials).is_empty(), "{denials:#?}");
        assert!(
            denials.iter().any(|d| d.wall == Wall::Layout),
            "{denials:#?}"
        );
    }
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn root_only_without_audit_the_run_is_the_same_and_reports_from_seccomp_alone() {
    require!(Feature::Root);
    if let Some(reason) = audit_missing() {
        assert!(!common::required_name("audit"), "audit records: {reason}");
        common::skip("root_only_without_audit", &reason);
        return;
    }
    let _one = AUDIT.lock().unwrap_or_else(|e| e.into_inner());
    let _audit = AuditSwitch::set(false);
    let ws = common::tempdir();
    let mut t = host_target();
    let sb = sandbox(ws.path(), Layer::Landlock);
    let (code, out, denials) = run(&sb, &script(t.id()));
    assert_eq!((code, out.trim()), (0, "kill=1"), "the same refusal");
    assert!(landlock_entries(&denials).is_empty(), "{denials:#?}");
    assert!(
        denials.iter().any(|d| d.wall == Wall::Layout),
        "{denials:#?}"
    );
    let _ = t.kill();
    let _ = t.wait();
}

/// As an unprivileged host (the re-run as uid 65534): no tap (binding the audit group
/// needs `CAP_AUDIT_READ`), the same refusal, no Landlock entry, whatever the host's
/// audit switch.
#[test]
fn an_unprivileged_host_explains_without_the_records() {
    if common::is_root() {
        // As root, the re-run below covers this as uid 65534.
        return;
    }
    let ws = common::tempdir();
    let mut t = host_target();
    let sb = sandbox(ws.path(), Layer::Landlock);
    let (code, out, denials) = run(&sb, &script(t.id()));
    assert_eq!((code, out.trim()), (0, "kill=1"));
    assert!(landlock_entries(&denials).is_empty(), "{denials:#?}");
    let _ = t.kill();
    let _ = t.wait();
}

/// The same file as uid 65534, with the host's audit switched on meanwhile, so that an
/// unprivileged host meets records it may not read.
#[test]
fn zz_all_tests_pass_as_uid_65534() {
    if !common::is_root() || std::env::var_os("STOCKADE_TEST_AS_NOBODY").is_some() {
        return;
    }
    let _one = AUDIT.lock().unwrap_or_else(|e| e.into_inner());
    let _audit = audit_missing().is_none().then(|| AuditSwitch::set(true));
    common::rerun_as_nobody(&["--skip", "zz_all_tests_pass_as_uid_65534"]);
}
