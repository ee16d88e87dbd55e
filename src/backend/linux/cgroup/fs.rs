//! The kernel-facing steps of the cgroup module, behind [`CgroupFs`]: every read, write,
//! `mkdir`, `rmdir`, open and signal goes through it, so that the v2 rules can be tested
//! against an in-memory tree and both versions share everything above it.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The file-system and process operations the cgroup module needs.
pub trait CgroupFs: Send + Sync + std::fmt::Debug {
    /// The whole text of `path`.
    ///
    /// # Errors
    ///
    /// The open or read error.
    fn read(&self, path: &Path) -> io::Result<String>;
    /// Writes `data` to `path` (an existing file) in one `write(2)`.
    ///
    /// # Errors
    ///
    /// The open or write error (`EBUSY`, `EINVAL`, … are the kernel's answer).
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()>;
    /// `mkdir(2)` with mode 0755.
    ///
    /// # Errors
    ///
    /// The error of `mkdir`.
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// `rmdir(2)`.
    ///
    /// # Errors
    ///
    /// The error of `rmdir` (`EBUSY` while the cgroup has processes).
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// The names of the directories in `path`.
    ///
    /// # Errors
    ///
    /// The error of reading the directory.
    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Opens `path` `O_WRONLY | O_CLOEXEC`.
    ///
    /// # Errors
    ///
    /// The error of `open`.
    fn open_write(&self, path: &Path) -> io::Result<OwnedFd>;
    /// Opens the directory `path` `O_PATH | O_DIRECTORY | O_CLOEXEC`.
    ///
    /// # Errors
    ///
    /// The error of `open`.
    fn open_dir(&self, path: &Path) -> io::Result<OwnedFd>;
    /// Whether this process may write `path` (`access(2)` with `W_OK`, and `X_OK` for a
    /// directory).
    fn writable(&self, path: &Path) -> bool;
    /// The extended attribute `name` of `path`, `None` when it is absent or unreadable.
    fn getxattr(&self, path: &Path, name: &str) -> Option<Vec<u8>>;
    /// The text of `/proc/self/cgroup`.
    ///
    /// # Errors
    ///
    /// The read error.
    fn self_cgroup(&self) -> io::Result<String>;
    /// The text of `/proc/self/mountinfo`.
    ///
    /// # Errors
    ///
    /// The read error.
    fn mountinfo(&self) -> io::Result<String>;
    /// The text of `/proc/<pid>/cgroup`.
    ///
    /// # Errors
    ///
    /// The read error (`ENOENT` when `pid` is gone).
    fn pid_cgroup(&self, pid: u32) -> io::Result<String>;
    /// Whether a process `pid` exists in this process's PID namespace.
    fn pid_alive(&self, pid: u32) -> bool;
    /// Sends `SIGKILL` to `pid` if `still_in()` holds once `pid` is pinned (a pidfd is
    /// open on it), so that a reused pid is never signalled. `Ok(false)` when `pid` was
    /// gone or no longer in the cgroup.
    ///
    /// # Errors
    ///
    /// The error of `pidfd_open` (other than `ESRCH`) or `pidfd_send_signal`.
    fn kill_pinned(&self, pid: u32, still_in: &dyn Fn() -> bool) -> io::Result<bool>;
}

/// The kernel's cgroup file systems and `/proc`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// `path` as a C string.
fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
}

impl CgroupFs for RealFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        // Control files take one write(2) each; `write_all` would split a short write.
        let n = f.write(data)?;
        if n == data.len() {
            Ok(())
        } else {
            Err(io::ErrorKind::WriteZero.into())
        }
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn subdirs(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(path)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(out)
    }

    fn open_write(&self, path: &Path) -> io::Result<OwnedFd> {
        // std opens O_CLOEXEC.
        let f = std::fs::OpenOptions::new().write(true).open(path)?;
        Ok(OwnedFd::from(f))
    }

    fn open_dir(&self, path: &Path) -> io::Result<OwnedFd> {
        let c = cpath(path)?;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let fd = stockade_sys::linux::openat(stockade_sys::fd::CWD, &c, flags, 0)
            .map_err(|e| io::Error::from_raw_os_error(e.raw()))?;
        Ok(OwnedFd::from(fd))
    }

    fn writable(&self, path: &Path) -> bool {
        use nix::unistd::{AccessFlags, access};
        let mut mode = AccessFlags::W_OK;
        if path.is_dir() {
            mode |= AccessFlags::X_OK;
        }
        access(path, mode).is_ok()
    }

    fn getxattr(&self, path: &Path, name: &str) -> Option<Vec<u8>> {
        let name = CString::new(name).ok()?;
        // fgetxattr needs a real open (an O_PATH fd gets EBADF); a directory opens
        // read-only.
        let dir = std::fs::File::open(path).ok()?;
        let fd = stockade_sys::fd::BorrowedFd::from(dir.as_fd());
        let mut buf = [0u8; 64];
        let n = stockade_sys::linux::fgetxattr(fd, &name, &mut buf).ok()?;
        buf.get(..n).map(<[u8]>::to_vec)
    }

    fn self_cgroup(&self) -> io::Result<String> {
        std::fs::read_to_string("/proc/self/cgroup")
    }

    fn mountinfo(&self) -> io::Result<String> {
        std::fs::read_to_string("/proc/self/mountinfo")
    }

    fn pid_cgroup(&self, pid: u32) -> io::Result<String> {
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
    }

    fn pid_alive(&self, pid: u32) -> bool {
        PathBuf::from(format!("/proc/{pid}")).exists()
    }

    fn kill_pinned(&self, pid: u32, still_in: &dyn Fn() -> bool) -> io::Result<bool> {
        let Ok(raw) = libc::pid_t::try_from(pid) else {
            return Ok(false);
        };
        let pidfd = match stockade_sys::linux::pidfd_open(raw, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw() == libc::ESRCH => return Ok(false),
            Err(e) => return Err(io::Error::from_raw_os_error(e.raw())),
        };
        // From here `pid` names the process the pidfd holds (or, once it is gone, a
        // reused pid that the check may read, but the signal then goes nowhere: the pidfd
        // still names the old process and the kernel answers ESRCH).
        if !still_in() {
            return Ok(false);
        }
        match stockade_sys::linux::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL) {
            Ok(()) => Ok(true),
            Err(e) if e.raw() == libc::ESRCH => Ok(false),
            Err(e) => Err(io::Error::from_raw_os_error(e.raw())),
        }
    }
}
