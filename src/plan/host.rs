//! The host facts behind [`super::RealFs`] that take more than a `stat`: the pathname unix
//! sockets bound on this host, and the entries beneath the read-only roots that "others"
//! may not read.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use nix::dir::{Dir, Type};
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag, fstatat};

use super::PrivateEntry;

/// Pathname sockets from `/proc/net/unix` (the caller's network namespace; abstract names
/// start with `@` there and are left out), sorted, without duplicates.
pub(super) fn unix_sockets() -> Vec<PathBuf> {
    let Ok(text) = crate::probe::read_small("/proc/net/unix", 16 * 1024) else {
        return Vec::new();
    };
    parse_unix(&text)
}

fn parse_unix(text: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = text
        .lines()
        .skip(1)
        // Num RefCount Protocol Flags Type St Inode Path
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The host's directory for temporary files: `$TMPDIR` when set and not empty (as
/// `std::env::temp_dir`), else the first of [`TEMP_DIRS`] that is a directory, else
/// `/tmp` (whose absence the error that follows then names).
pub(super) fn temp_dir() -> PathBuf {
    temp_dir_of(std::env::var_os("TMPDIR"), |p| p.is_dir())
}

/// Where temporary files go without `$TMPDIR`, in the order Python's `tempfile` and most
/// Unix tools look: a minimal image (a `FROM scratch` container) may lack `/tmp`.
const TEMP_DIRS: &[&str] = &["/tmp", "/var/tmp", "/usr/tmp"];

fn temp_dir_of(tmpdir: Option<std::ffi::OsString>, is_dir: impl Fn(&Path) -> bool) -> PathBuf {
    if let Some(dir) = tmpdir.filter(|d| !d.is_empty()) {
        return dir.into();
    }
    TEMP_DIRS
        .iter()
        .map(Path::new)
        .find(|p| is_dir(p))
        .unwrap_or(Path::new("/tmp"))
        .to_path_buf()
}

/// Whether this process's user namespace maps uid 0 to its parent's uid 0 (the initial
/// namespace maps every uid to itself). Unreadable: assumed so, the stricter answer.
pub(super) fn uid_zero_maps_to_zero() -> bool {
    crate::probe::read_small("/proc/self/uid_map", 1024).map_or(true, |map| maps_zero_to_zero(&map))
}

/// Whether a `uid_map` (`inside outside count` per line) maps 0 to 0.
fn maps_zero_to_zero(map: &str) -> bool {
    map.lines().any(|l| {
        let f: Vec<u64> = l
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        matches!(f[..], [inside, outside, count] if inside == 0 && outside == 0 && count > 0)
    })
}

type Cache = Mutex<HashMap<Vec<PathBuf>, Arc<Vec<PrivateEntry>>>>;

/// The private entries beneath `roots`, found once per process for each set of roots (a
/// walk of `/usr` reads some 10⁵ entries) and cached: a file made private after that is
/// not found until the process restarts (see SECURITY.md).
pub(super) fn private_entries(roots: &[PathBuf]) -> Vec<PrivateEntry> {
    // A root host whose read-only roots are all idmapped walks nothing: no cache entry,
    // no worker threads.
    if roots.is_empty() {
        return Vec::new();
    }
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    let key = roots.to_vec();
    if let Some(hit) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.as_ref().clone();
    }
    let found = Arc::new(walk(roots));
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, Arc::clone(&found));
    found.as_ref().clone()
}

/// A parallel walk: workers take directories from a shared queue, report private entries
/// and queue the public subdirectories. Mount points are crossed; symlinks never followed.
fn walk(roots: &[PathBuf]) -> Vec<PrivateEntry> {
    struct Work {
        queue: Vec<PathBuf>,
        busy: usize,
        found: Vec<PrivateEntry>,
    }
    let work = Mutex::new(Work {
        queue: roots.to_vec(),
        busy: 0,
        found: Vec::new(),
    });
    let ready = std::sync::Condvar::new();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let dir = {
                        let mut w = work.lock().unwrap_or_else(|e| e.into_inner());
                        loop {
                            if let Some(d) = w.queue.pop() {
                                w.busy += 1;
                                break Some(d);
                            }
                            if w.busy == 0 {
                                break None;
                            }
                            w = ready.wait(w).unwrap_or_else(|e| e.into_inner());
                        }
                    };
                    let Some(dir) = dir else {
                        ready.notify_all();
                        return;
                    };
                    let (subdirs, private) = scan(&dir);
                    let mut w = work.lock().unwrap_or_else(|e| e.into_inner());
                    w.queue.extend(subdirs);
                    w.found.extend(private);
                    w.busy -= 1;
                    ready.notify_all();
                }
            });
        }
    });
    let mut found = work.into_inner().unwrap_or_else(|e| e.into_inner()).found;
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// One directory: its public subdirectories and its private entries. Unreadable
/// directories (an error opening or reading) are skipped: what the host cannot read, the
/// sandbox of that host cannot either.
fn scan(dir: &Path) -> (Vec<PathBuf>, Vec<PrivateEntry>) {
    let mut subdirs = Vec::new();
    let mut private = Vec::new();
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    // One descriptor for `fstatat`, a duplicate for the directory stream.
    let Ok(fd) = nix::fcntl::open(dir, flags, Mode::empty()) else {
        return (subdirs, private);
    };
    let Ok(mut d) = fd
        .try_clone()
        .map_err(drop)
        .and_then(|f| Dir::from_fd(f).map_err(drop))
    else {
        return (subdirs, private);
    };
    for entry in d.iter().flatten() {
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." || entry.file_type() == Some(Type::Symlink) {
            continue;
        }
        let Ok(st) = fstatat(&fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
        let path = dir.join(std::ffi::OsStr::from_bytes(bytes));
        if kind == SFlag::S_IFDIR {
            if st.st_mode & 0o005 == 0o005 {
                subdirs.push(path);
            } else {
                private.push(PrivateEntry { path, dir: true });
            }
        } else if kind != SFlag::S_IFLNK && st.st_mode & 0o004 == 0 {
            private.push(PrivateEntry { path, dir: false });
        }
    }
    (subdirs, private)
}

/// What the metadata `md` (of a path not followed, or of an open file) shows: the kind,
/// with a device's numbers. A symlink's target is not in `md`: it is reported without one.
pub fn node_kind(md: &std::fs::Metadata) -> crate::error::NodeKind {
    use std::os::unix::fs::MetadataExt;
    node_kind_of(md.mode(), md.rdev())
}

/// The kind of node a `stat`'s `st_mode` and `st_rdev` describe (`node_kind` reads the
/// same from a `Metadata`).
#[allow(clippy::unnecessary_cast)] // `mode_t` is `u16` on macOS
pub fn node_kind_of(mode: u32, rdev: u64) -> crate::error::NodeKind {
    use crate::error::NodeKind;
    let (major, minor) = device_numbers(rdev);
    match mode & libc::S_IFMT as u32 {
        m if m == libc::S_IFCHR as u32 => NodeKind::CharDevice { major, minor },
        m if m == libc::S_IFBLK as u32 => NodeKind::BlockDevice { major, minor },
        m if m == libc::S_IFDIR as u32 => NodeKind::Dir,
        m if m == libc::S_IFLNK as u32 => NodeKind::Symlink(PathBuf::new()),
        m if m == libc::S_IFIFO as u32 => NodeKind::Fifo,
        m if m == libc::S_IFSOCK as u32 => NodeKind::Socket,
        _ => NodeKind::File,
    }
}

/// A device's `(major, minor)` from `st_rdev` as Linux encodes it (glibc's and musl's
/// `major()` and `minor()`); the numbers of [`super::DEV_NODES`] are Linux's too.
fn device_numbers(rdev: u64) -> (u32, u32) {
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0fff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff);
    (major as u32, minor as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// `/proc/net/unix` longer than a page (the kernel hands it over a page at a time) is
    /// read to its end: every one of 120 sockets with long paths is found, and the short
    /// reads of a page each are not taken for the end.
    #[test]
    fn the_unix_sockets_past_the_first_page_are_found() {
        let d = tempfile::tempdir().unwrap();
        let long = "s".repeat(60);
        let paths: Vec<PathBuf> = (0..120)
            .map(|i| d.path().join(format!("{long}{i:03}")))
            .collect();
        let _bound: Vec<_> = paths
            .iter()
            .map(|p| std::os::unix::net::UnixListener::bind(p).unwrap())
            .collect();
        let text = std::fs::read_to_string("/proc/net/unix").unwrap();
        assert!(text.len() > 8192, "{} bytes", text.len());
        let found = unix_sockets();
        for p in &paths {
            assert!(found.contains(p), "{} not found", p.display());
        }
        // And a file of one short record is read whole, in one read.
        let map = crate::probe::read_small("/proc/self/uid_map", 1024).unwrap();
        assert_eq!(map, std::fs::read_to_string("/proc/self/uid_map").unwrap());
    }

    /// The kind from an fd's `fstat` is the kind from the path's metadata, for each type.
    #[test]
    fn node_kind_of_a_stat_is_node_kind_of_its_metadata() {
        use crate::error::NodeKind;
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink("x", &link).unwrap();
        let sock = d.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let file = d.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let mut seen = Vec::new();
        for p in [Path::new("/dev/null"), d.path(), &fifo, &link, &sock, &file] {
            let st = nix::sys::stat::lstat(p).unwrap();
            let md = std::fs::symlink_metadata(p).unwrap();
            #[allow(clippy::unnecessary_cast)]
            let of = node_kind_of(st.st_mode as u32, st.st_rdev as u64);
            assert_eq!(of, node_kind(&md), "{}", p.display());
            seen.push(of);
        }
        #[cfg(target_os = "linux")]
        assert_eq!(seen[0], NodeKind::CharDevice { major: 1, minor: 3 });
        assert_eq!(
            seen[1..],
            [
                NodeKind::Dir,
                NodeKind::Fifo,
                NodeKind::Symlink(PathBuf::new()),
                NodeKind::Socket,
                NodeKind::File
            ]
        );
    }

    // Linux's device numbers.
    #[cfg(target_os = "linux")]
    #[test]
    fn real_nodes_are_told_apart_without_following_symlinks() {
        use crate::error::NodeKind;
        use crate::plan::{HostFs, RealFs};
        let null = RealFs.node(Path::new("/dev/null"));
        assert_eq!(null, NodeKind::CharDevice { major: 1, minor: 3 });
        assert_eq!(
            RealFs.node(Path::new("/dev/urandom")),
            NodeKind::CharDevice { major: 1, minor: 9 }
        );
        let dir = tempfile::Builder::new().tempdir_in("/var/tmp").unwrap();
        let file = dir.path().join("null");
        std::fs::write(&file, b"not a device").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        assert_eq!(RealFs.node(&file), NodeKind::File);
        assert_eq!(RealFs.node(&link), NodeKind::Symlink("/dev/null".into()));
        assert_eq!(RealFs.node(dir.path()), NodeKind::Dir);
        assert_eq!(RealFs.node(&dir.path().join("gone")), NodeKind::Missing);
        // Numbers above 8 bits of minor and 12 of major, as the C library packs them.
        for (major, minor) in [(1, 3), (5, 0), (0x1234, 0x5_6789), (259, 300)] {
            assert_eq!(device_numbers(libc::makedev(major, minor)), (major, minor));
        }
    }

    #[test]
    fn the_temp_dir_is_tmpdir_else_the_first_existing_of_the_usual_ones() {
        let only =
            |dirs: &'static [&'static str]| move |p: &Path| dirs.iter().any(|d| p == Path::new(d));
        let all = only(&["/tmp", "/var/tmp", "/usr/tmp"]);
        assert_eq!(temp_dir_of(Some("/w/t".into()), all), Path::new("/w/t"));
        assert_eq!(temp_dir_of(Some("".into()), all), Path::new("/tmp"));
        assert_eq!(temp_dir_of(None, all), Path::new("/tmp"));
        // A minimal image without /tmp.
        assert_eq!(
            temp_dir_of(None, only(&["/var/tmp"])),
            Path::new("/var/tmp")
        );
        assert_eq!(
            temp_dir_of(None, only(&["/usr/tmp"])),
            Path::new("/usr/tmp")
        );
        // None at all: /tmp, which the error then names.
        assert_eq!(temp_dir_of(None, only(&[])), Path::new("/tmp"));
    }

    #[test]
    fn uid_maps_that_make_root_the_hosts() {
        // The initial namespace; `unshare -Ur` run by root; a range starting at 0.
        for map in [
            "         0          0 4294967295\n",
            "0 0 1\n",
            "5 5 1\n0 0 3\n",
        ] {
            assert!(maps_zero_to_zero(map), "{map:?}");
        }
        // `unshare -Ur` run by uid 1000; a map that starts elsewhere; none; garbage.
        for map in ["0 1000 1\n", "1 0 1\n", "", "0 0 0\n", "x y z\n"] {
            assert!(!maps_zero_to_zero(map), "{map:?}");
        }
    }

    #[test]
    fn parses_pathname_sockets_and_skips_abstract_ones() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 12345 /run/a.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 12346 @abstract\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 12347\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 12348 /opt/svc/s\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 12349 /run/a.sock\n";
        assert_eq!(
            parse_unix(text),
            vec![PathBuf::from("/opt/svc/s"), PathBuf::from("/run/a.sock")]
        );
    }

    #[test]
    fn finds_private_files_and_dirs_without_descending_or_following() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(r, 0o755);
        std::fs::create_dir_all(r.join("pub/deep")).unwrap();
        std::fs::write(r.join("pub/deep/key"), "k").unwrap();
        mode(&r.join("pub/deep/key"), 0o600);
        std::fs::write(r.join("pub/ok"), "o").unwrap();
        mode(&r.join("pub/ok"), 0o644);
        std::fs::create_dir(r.join("priv")).unwrap();
        std::fs::write(r.join("priv/inner"), "i").unwrap();
        mode(&r.join("priv/inner"), 0o600);
        mode(&r.join("priv"), 0o700);
        std::os::unix::fs::symlink("/etc", r.join("link")).unwrap();
        let found = walk(&[r.to_path_buf()]);
        assert_eq!(
            found,
            vec![
                PrivateEntry {
                    path: r.join("priv"),
                    dir: true
                },
                PrivateEntry {
                    path: r.join("pub/deep/key"),
                    dir: false
                },
            ]
        );
    }
}
