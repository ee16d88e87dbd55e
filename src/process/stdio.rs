//! `Stdio` and the parent's ends of piped stdio, as in `std::process`.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;

use crate::error::{Error, SpawnError};
use crate::plan::{self, HostFs};

/// How a stdio stream of the program is set up (std's `Stdio`, which is opaque and so
/// cannot be inspected by another crate).
#[derive(Debug)]
pub struct Stdio(Kind);

#[derive(Debug)]
enum Kind {
    Inherit,
    Null,
    Piped,
    Fd(OwnedFd),
}

impl Stdio {
    /// The host's own stream.
    pub fn inherit() -> Stdio {
        Stdio(Kind::Inherit)
    }

    /// `/dev/null`.
    pub fn null() -> Stdio {
        Stdio(Kind::Null)
    }

    /// A new pipe; the parent's end appears in [`crate::Child`].
    pub fn piped() -> Stdio {
        Stdio(Kind::Piped)
    }

    /// A copy of this setting for a spawn made elsewhere (`Command::spawn_async` on
    /// another thread): a given file descriptor is duplicated (close-on-exec).
    #[cfg_attr(not(all(feature = "tokio", target_os = "linux")), allow(dead_code))]
    pub(crate) fn try_clone(&self) -> io::Result<Stdio> {
        Ok(Stdio(match &self.0 {
            Kind::Inherit => Kind::Inherit,
            Kind::Null => Kind::Null,
            Kind::Piped => Kind::Piped,
            Kind::Fd(fd) => Kind::Fd(fd.try_clone()?),
        }))
    }

    /// Whether the child's end that [`Stdio::setup`] makes for this setting is known to be
    /// no terminal, so that the spawn need not ask the fd: a pipe `setup` creates, or (on
    /// Linux, where `setup` checks the device numbers of the fd it opened, major 1 minor
    /// 3: the memory driver's null device, which has no terminal `ioctl`s) `/dev/null`.
    /// False for the host's stream and for a given fd, which may be anything.
    pub(crate) fn makes_no_terminal(&self) -> bool {
        match self.0 {
            Kind::Piped => true,
            Kind::Null => cfg!(target_os = "linux"),
            Kind::Inherit | Kind::Fd(_) => false,
        }
    }

    /// Returns (the child's end, the parent's end). The child's end is always an fd ≥ 3
    /// (close-on-exec in the parent), so that moving it onto 0, 1 or 2 never overwrites
    /// another source.
    /// A file descriptor given with [`Stdio::from`] stays the command's (a duplicate goes
    /// to the child), so that the command can be spawned again, as std's can.
    ///
    /// # Errors
    ///
    /// [`SpawnError::Path`] when `/dev/null` cannot be opened (naming the path opened),
    /// [`PlanError::DeviceNode`](crate::error::PlanError::DeviceNode) when it is not the
    /// null device, else [`SpawnError::Os`] for `set up stdio`.
    pub(crate) fn setup(
        &self,
        is_stdin: bool,
    ) -> Result<(Option<OwnedFd>, Option<OwnedFd>), Error> {
        match &self.0 {
            Kind::Null => Ok((Some(null(!is_stdin)?), None)),
            _ => self.setup_fds(is_stdin).map_err(|e| stdio_err(e).into()),
        }
    }

    /// [`Stdio::setup`] for every kind but [`Kind::Null`] (none for that one).
    fn setup_fds(&self, is_stdin: bool) -> io::Result<(Option<OwnedFd>, Option<OwnedFd>)> {
        match &self.0 {
            Kind::Inherit | Kind::Null => Ok((None, None)),
            Kind::Piped => {
                let (r, w) = super::launch::pipe_cloexec()?;
                if is_stdin {
                    Ok((Some(above_stdio(r)?), Some(w)))
                } else {
                    Ok((Some(above_stdio(w)?), Some(r)))
                }
            }
            Kind::Fd(fd) => Ok((Some(dup_above_stdio(fd.as_fd())?), None)),
        }
    }
}

fn stdio_err(source: io::Error) -> SpawnError {
    SpawnError::Os {
        call: "set up stdio",
        source,
    }
}

/// `/dev/null` for a program's stdio, numbered 3 or above, refused when it is not the
/// null device: a regular file there would hand the program the host's file to read and
/// write. The fd opened is checked, on Linux, whose device numbers [`plan::NULL`] names;
/// when the open itself fails, the node is looked at (a missing one, or a file that a
/// root host opens for writing through a read-only mount, fails there) so that the
/// error says what it is.
fn null(write: bool) -> Result<OwnedFd, Error> {
    let linux = cfg!(target_os = "linux");
    let fd = match super::launch::open_null(write) {
        Ok(fd) => fd,
        Err(e) => {
            if linux {
                plan::NULL.check(plan::RealFs.node(Path::new(plan::NULL.path)))?;
            }
            return Err(e.into());
        }
    };
    if linux {
        let st = nix::sys::stat::fstat(&fd).map_err(|e| stdio_err(e.into()))?;
        #[allow(clippy::unnecessary_cast)] // `st_mode` is `u16` on some targets
        plan::NULL.check(plan::node_kind_of(st.st_mode as u32, st.st_rdev as u64))?;
    }
    Ok(above_stdio(fd).map_err(stdio_err)?)
}

pub(super) fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    dup_above_stdio(fd.as_fd())
}

/// A close-on-exec duplicate of `fd`, numbered 3 or above.
fn dup_above_stdio(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    super::launch::dup_cloexec(fd)
}

pub(crate) fn raw(fd: &Option<OwnedFd>) -> RawFd {
    fd.as_ref().map_or(-1, AsRawFd::as_raw_fd)
}

impl From<OwnedFd> for Stdio {
    fn from(fd: OwnedFd) -> Stdio {
        Stdio(Kind::Fd(fd))
    }
}

impl From<File> for Stdio {
    fn from(f: File) -> Stdio {
        Stdio(Kind::Fd(f.into()))
    }
}

macro_rules! pipe_end {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $name(File);

        impl From<OwnedFd> for $name {
            fn from(fd: OwnedFd) -> Self {
                $name(File::from(fd))
            }
        }

        impl From<$name> for OwnedFd {
            fn from(p: $name) -> OwnedFd {
                p.0.into()
            }
        }

        impl From<$name> for Stdio {
            fn from(p: $name) -> Stdio {
                Stdio(Kind::Fd(p.0.into()))
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.0.as_fd()
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.0.as_raw_fd()
            }
        }
    };
}

pipe_end!(ChildStdin, "The parent's end of the program's piped stdin.");
pipe_end!(
    ChildStdout,
    "The parent's end of the program's piped stdout."
);
pipe_end!(
    ChildStderr,
    "The parent's end of the program's piped stderr."
);

impl Write for ChildStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Read for ChildStdout {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Read for ChildStderr {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streams_setup_makes_as_no_terminal_are_none() {
        assert!(!Stdio::inherit().makes_no_terminal());
        let given = Stdio::from(OwnedFd::from(File::open("/dev/null").unwrap()));
        assert!(!given.makes_no_terminal());
        let piped = Stdio::piped();
        assert!(piped.makes_no_terminal());
        for is_stdin in [true, false] {
            let (child, _parent) = piped.setup(is_stdin).unwrap();
            let st = nix::sys::stat::fstat(child.as_ref().unwrap()).unwrap();
            assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFIFO);
        }
        let null = Stdio::null();
        assert_eq!(null.makes_no_terminal(), cfg!(target_os = "linux"));
        // On Linux `setup` refuses anything but the null device (1, 3), which is no
        // terminal.
        if cfg!(target_os = "linux") {
            let (child, _) = null.setup(false).unwrap();
            let fd = child.unwrap();
            let st = nix::sys::stat::fstat(&fd).unwrap();
            assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFCHR);
            assert_eq!((libc::major(st.st_rdev), libc::minor(st.st_rdev)), (1, 3));
            assert!(!nix::unistd::isatty(&fd).unwrap_or(false));
        }
    }
}
