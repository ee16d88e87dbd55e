//! Paths and files: opening, creating, inspecting, and the working directory.

use core::ffi::{CStr, c_int, c_uint};

use libc::open_how;

use super::{new_fd, p};
use crate::Result;
use crate::fd::{BorrowedFd, OwnedFd};

/// `openat(2)`: opens `path` relative to `dirfd` (or [`CWD`](crate::fd::CWD)).
pub fn openat(dirfd: BorrowedFd<'_>, path: &CStr, flags: c_int, mode: c_uint) -> Result<OwnedFd> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    let fd = unsafe { syscall!(libc::SYS_openat, dirfd.as_raw_fd(), p(path), flags, mode) }?;
    // SAFETY: `openat` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
}

/// `openat2(2)`: opens `path` relative to `dirfd` (or [`CWD`](crate::fd::CWD)) as `how` says.
pub fn openat2(dirfd: BorrowedFd<'_>, path: &CStr, how: &open_how) -> Result<OwnedFd> {
    // SAFETY: the kernel reads `path` up to its NUL and `size_of::<open_how>()` bytes from
    // `how`, a live `open_how`; it writes neither.
    let fd = unsafe {
        syscall!(
            libc::SYS_openat2,
            dirfd.as_raw_fd(),
            p(path),
            core::ptr::from_ref(how),
            core::mem::size_of::<open_how>()
        )
    }?;
    // SAFETY: `openat2` succeeded, so `fd` is the new fd it installed in this process's
    // table; no one else has its number.
    Ok(unsafe { new_fd(fd) })
}

/// An `open_how` for [`openat2`] (libc's struct is non-exhaustive).
pub fn open_how(flags: u64, mode: u64, resolve: u64) -> open_how {
    // SAFETY: `open_how` is three integers; all-zero bytes are a valid value.
    let mut how: open_how = unsafe { core::mem::zeroed() };
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    how
}

/// `mkdirat(2)`.
pub fn mkdirat(dirfd: BorrowedFd<'_>, path: &CStr, mode: c_uint) -> Result<()> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    unsafe { syscall!(libc::SYS_mkdirat, dirfd.as_raw_fd(), p(path), mode) }.map(drop)
}

/// `mknodat(2)`. With `S_IFREG` in `mode` it makes an empty regular file and needs no
/// privilege: one system call where `openat(O_CREAT)` and `close` take two.
pub fn mknodat(dirfd: BorrowedFd<'_>, path: &CStr, mode: c_uint, dev: u64) -> Result<()> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    unsafe { syscall!(libc::SYS_mknodat, dirfd.as_raw_fd(), p(path), mode, dev) }.map(drop)
}

/// `fchmodat(2)` without flags (symlinks are followed; use it on what is known to be a
/// directory or file).
pub fn fchmodat(dirfd: BorrowedFd<'_>, path: &CStr, mode: c_uint) -> Result<()> {
    // SAFETY: the kernel reads `path` up to its NUL; `path` outlives the call.
    unsafe { syscall!(libc::SYS_fchmodat, dirfd.as_raw_fd(), p(path), mode) }.map(drop)
}

/// `symlinkat(2)`: creates `linkpath` (relative to `dirfd`) pointing at `target`.
pub fn symlinkat(target: &CStr, dirfd: BorrowedFd<'_>, linkpath: &CStr) -> Result<()> {
    // SAFETY: the kernel reads `target` and `linkpath` up to their NULs; both outlive the
    // call.
    unsafe {
        syscall!(
            libc::SYS_symlinkat,
            p(target),
            dirfd.as_raw_fd(),
            p(linkpath)
        )
    }
    .map(drop)
}

/// `fstat(2)` into `st`.
pub fn fstat(fd: BorrowedFd<'_>, st: &mut libc::stat) -> Result<()> {
    // SAFETY: the kernel writes one `struct stat` into `st`, an exclusive borrow of a
    // `libc::stat` (whose layout is the kernel's on this target); every bit pattern is a
    // valid value of its integer fields.
    unsafe { syscall!(libc::SYS_fstat, fd.as_raw_fd(), core::ptr::from_mut(st)) }.map(drop)
}

/// `fgetxattr(2)`: reads the extended attribute `name` of `fd` into `buf`, returns its
/// length.
pub fn fgetxattr(fd: BorrowedFd<'_>, name: &CStr, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the kernel reads `name` up to its NUL and writes at most `buf.len()` bytes
    // into `buf`, which this call borrows exclusively.
    unsafe {
        syscall!(
            libc::SYS_fgetxattr,
            fd.as_raw_fd(),
            p(name),
            buf.as_mut_ptr(),
            buf.len()
        )
    }
}

/// `chdir(2)`.
pub fn chdir(path: &CStr) -> Result<()> {
    // SAFETY: the kernel reads `path` up to its NUL; it outlives the call.
    unsafe { syscall!(libc::SYS_chdir, p(path)) }.map(drop)
}

/// `fchdir(2)`.
pub fn fchdir(fd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: `fchdir` takes no pointer.
    unsafe { syscall!(libc::SYS_fchdir, fd.as_raw_fd()) }.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(core::mem::size_of::<open_how>(), 24);
        // `fstat` hands the kernel a `libc::stat` to fill: it must be the kernel's
        // `struct stat` for this architecture (x86_64's own, or the generic one).
        #[cfg(target_arch = "x86_64")]
        assert_eq!(core::mem::size_of::<libc::stat>(), 144);
        #[cfg(target_arch = "aarch64")]
        assert_eq!(core::mem::size_of::<libc::stat>(), 128);
    }
}

/// `readlinkat(AT_FDCWD, path, buf)`: copies the target of the symlink `path` to `buf`
/// (not NUL-terminated, truncated to `buf.len()`) and returns its length.
pub fn readlink(path: &CStr, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the kernel reads `path` up to its NUL and writes at most `buf.len()` bytes
    // to `buf`, a live exclusive borrow; both outlive the call.
    unsafe {
        syscall!(
            libc::SYS_readlinkat,
            libc::AT_FDCWD,
            p(path),
            buf.as_mut_ptr(),
            buf.len()
        )
    }
}

#[cfg(test)]
mod readlink_tests {
    use super::*;
    use crate::Errno;

    #[test]
    fn readlink_reads_a_link_and_truncates_to_the_buffer() {
        let mut buf = [0u8; 64];
        let n = readlink(c"/proc/self/root", &mut buf).unwrap();
        assert_eq!(buf.get(..n), Some(&b"/"[..]));
        let mut short = [0u8; 2];
        // `/proc/self/exe` names a longer path: cut to the buffer.
        assert_eq!(readlink(c"/proc/self/exe", &mut short), Ok(2));
        assert_eq!(short.first(), Some(&b'/'));
        assert_eq!(readlink(c"/", &mut buf), Err(Errno(libc::EINVAL)));
    }
}

/// `getdents64(2)`: reads the next entries of the directory `fd` into `buf` and returns
/// how many bytes it wrote (0 at the end); [`dirents`] reads them.
pub fn getdents64(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes to `buf`, a live exclusive
    // borrow that outlives the call.
    unsafe {
        syscall!(
            libc::SYS_getdents64,
            fd.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len()
        )
    }
}

/// The offset of `d_reclen` in a `linux_dirent64` (after `d_ino` and `d_off`).
const RECLEN_AT: usize = 16;
/// The offset of `d_type`.
const TYPE_AT: usize = 18;
/// The offset of `d_name`.
const NAME_AT: usize = 19;

/// The entries of what one [`getdents64`] wrote: each as its `d_type` (`DT_DIR`, …,
/// `DT_UNKNOWN`) and its name without the NUL. A record that does not fit ends the
/// iteration: the kernel writes none.
pub fn dirents(buf: &[u8]) -> Dirents<'_> {
    Dirents { rest: buf }
}

/// The iterator of [`dirents`].
#[derive(Clone, Debug)]
pub struct Dirents<'a> {
    rest: &'a [u8],
}

impl Dirents<'_> {
    /// The bytes not read as records: 0 once every record has been read; more when the
    /// iteration stopped at a record that does not fit (the caller's error to report).
    pub fn leftover(&self) -> usize {
        self.rest.len()
    }
}

impl<'a> Iterator for Dirents<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        let len_bytes = self.rest.get(RECLEN_AT..NAME_AT - 1)?;
        let reclen = usize::from(u16::from_ne_bytes([
            *len_bytes.first()?,
            *len_bytes.get(1)?,
        ]));
        let record = self.rest.get(..reclen).filter(|r| r.len() > NAME_AT)?;
        let kind = *record.get(TYPE_AT)?;
        let name_field = record.get(NAME_AT..)?;
        let name = name_field.get(..name_field.iter().position(|&b| b == 0)?)?;
        self.rest = self.rest.get(reclen..)?;
        Some((kind, name))
    }
}

#[cfg(test)]
mod getdents_tests {
    extern crate std;

    use super::*;
    use crate::fd::CWD;
    use std::borrow::ToOwned;

    /// One `linux_dirent64` as the kernel lays it out, padded to 8 bytes.
    fn record(kind: u8, name: &[u8]) -> std::vec::Vec<u8> {
        let len = (NAME_AT + name.len() + 1).next_multiple_of(8);
        let mut r = std::vec![0u8; len];
        r[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&(len as u16).to_ne_bytes());
        r[TYPE_AT] = kind;
        r[NAME_AT..NAME_AT + name.len()].copy_from_slice(name);
        r
    }

    #[test]
    fn the_entries_of_a_directory_are_all_read_once() {
        let dir =
            std::env::temp_dir().join(std::format!("stockade-sys-dirents-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let mut want = std::vec::Vec::new();
        for i in 0..300 {
            let name = std::format!("entry-with-a-longish-name-{i}");
            if i % 3 == 0 {
                std::fs::create_dir(dir.join(&name)).unwrap();
            } else {
                std::fs::write(dir.join(&name), b"").unwrap();
            }
            want.push((name, i % 3 == 0));
        }
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        let fd = openat(
            CWD,
            &path,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
        )
        .unwrap();
        // A small buffer: many calls, each ending on a whole record.
        let mut buf = [0u8; 512];
        let mut got = std::vec::Vec::new();
        loop {
            let n = getdents64(fd.as_fd(), &mut buf).unwrap();
            if n == 0 {
                break;
            }
            for (kind, name) in dirents(&buf[..n]) {
                let name = std::str::from_utf8(name).unwrap().to_owned();
                if name != "." && name != ".." {
                    got.push((name, kind == libc::DT_DIR));
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn a_record_that_does_not_fit_ends_the_entries() {
        let mut buf = record(libc::DT_REG, b"a");
        buf.extend(record(libc::DT_DIR, b"bb"));
        let all: std::vec::Vec<_> = dirents(&buf).collect();
        assert_eq!(all, [(libc::DT_REG, &b"a"[..]), (libc::DT_DIR, &b"bb"[..])]);
        // Cut anywhere: only the whole records before the cut.
        let first = record(libc::DT_REG, b"a").len();
        for cut in 0..buf.len() {
            let n = dirents(&buf[..cut]).count();
            assert_eq!(n, usize::from(cut >= first), "cut at {cut}");
        }
        // A record length of zero, or shorter than the header, or a name without its NUL.
        let mut whole = dirents(&buf);
        assert_eq!(whole.by_ref().count(), 2);
        assert_eq!(whole.leftover(), 0);
        let mut cut = dirents(&buf[..first + 3]);
        assert_eq!(cut.by_ref().count(), 1);
        assert_eq!(cut.leftover(), 3);
        let mut zero = record(libc::DT_REG, b"a");
        zero[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&0u16.to_ne_bytes());
        assert_eq!(dirents(&zero).count(), 0);
        let mut short = record(libc::DT_REG, b"a");
        short[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&(NAME_AT as u16).to_ne_bytes());
        assert_eq!(dirents(&short).count(), 0);
        let mut unterminated = record(libc::DT_REG, b"abcd");
        let len = unterminated.len();
        unterminated[NAME_AT..len].fill(b'x');
        assert_eq!(dirents(&unterminated).count(), 0);
    }
}
