//! The path-taking system calls an explained filter reports to the host
//! ([`super::build_explained`] with `watch_paths`): for each, which arguments hold a path
//! (with the directory fd it is relative to) and what the call does with it. Plain data;
//! the host reads the paths and classifies them against the layout.

/// What a call does with one of its paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Use {
    /// `open`/`openat`: a read or a write, by the open flags in this argument.
    Open {
        /// The argument with the `O_*` flags.
        flags: u8,
    },
    /// Looks the path up (the stat family, `access`): reads no content.
    Stat,
    /// Runs the file (`execve`, `execveat`).
    Exec,
    /// Changes the file's contents or attributes (`truncate`, `chmod`, `chown`).
    Write,
    /// Makes a new name (`mkdir`, `creat`, the new name of `link`, `symlink`, `rename`).
    Create,
    /// Removes the name (`unlink`, `rmdir`, the old name of `rename`).
    Remove,
    /// Names an existing file to link to (the old name of `link`).
    Read,
}

/// One path argument of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathArg {
    /// The argument holding a directory fd the path is relative to (`AT_FDCWD` for the
    /// working directory); `None` for calls relative to the working directory only.
    pub dirfd: Option<u8>,
    /// The argument holding the path's address.
    pub path: u8,
    /// What the call does with it.
    pub use_: Use,
}

/// A path-taking call: its number and its path arguments.
#[derive(Clone, Copy, Debug)]
pub struct PathCall {
    /// The system call number.
    pub nr: i64,
    /// The argument with the `AT_*` flags, where `AT_EMPTY_PATH` means the call acts on
    /// the fd alone when the path is empty: those calls do not notify (no path to report;
    /// glibc's `fstat` is one).
    pub empty_path_flags: Option<u8>,
    /// Its path arguments, in order.
    pub paths: &'static [PathArg],
}

const fn at(dirfd: u8, path: u8, use_: Use) -> PathArg {
    PathArg {
        dirfd: Some(dirfd),
        path,
        use_,
    }
}

const fn cwd(path: u8, use_: Use) -> PathArg {
    PathArg {
        dirfd: None,
        path,
        use_,
    }
}

const fn call(nr: i64, paths: &'static [PathArg]) -> PathCall {
    PathCall {
        nr,
        empty_path_flags: None,
        paths,
    }
}

const fn call_at(nr: i64, flags: u8, paths: &'static [PathArg]) -> PathCall {
    PathCall {
        nr,
        empty_path_flags: Some(flags),
        paths,
    }
}

/// The calls on every architecture. (`openat2` is not watched: it fails with `ENOSYS`
/// under the filter, by design, and libc falls back to `openat`.)
pub const PATH_CALLS: &[PathCall] = &[
    call(libc::SYS_openat, &[at(0, 1, Use::Open { flags: 2 })]),
    call(libc::SYS_execve, &[cwd(0, Use::Exec)]),
    call_at(libc::SYS_execveat, 4, &[at(0, 1, Use::Exec)]),
    call_at(libc::SYS_newfstatat, 3, &[at(0, 1, Use::Stat)]),
    call_at(libc::SYS_statx, 2, &[at(0, 1, Use::Stat)]),
    call(libc::SYS_faccessat, &[at(0, 1, Use::Stat)]),
    call(libc::SYS_faccessat2, &[at(0, 1, Use::Stat)]),
    call(libc::SYS_mkdirat, &[at(0, 1, Use::Create)]),
    call(libc::SYS_unlinkat, &[at(0, 1, Use::Remove)]),
    call(
        libc::SYS_renameat,
        &[at(0, 1, Use::Remove), at(2, 3, Use::Create)],
    ),
    call(
        libc::SYS_renameat2,
        &[at(0, 1, Use::Remove), at(2, 3, Use::Create)],
    ),
    call_at(
        libc::SYS_linkat,
        4,
        &[at(0, 1, Use::Read), at(2, 3, Use::Create)],
    ),
    call(libc::SYS_symlinkat, &[at(1, 2, Use::Create)]),
    call(libc::SYS_truncate, &[cwd(0, Use::Write)]),
    call(libc::SYS_fchmodat, &[at(0, 1, Use::Write)]),
    call(super::tables::SYS_FCHMODAT2, &[at(0, 1, Use::Write)]),
    call_at(libc::SYS_fchownat, 4, &[at(0, 1, Use::Write)]),
];

/// The calls of x86_64 alone (aarch64 has only their `*at` forms).
#[cfg(target_arch = "x86_64")]
pub const PATH_CALLS_ARCH: &[PathCall] = &[
    call(libc::SYS_open, &[cwd(0, Use::Open { flags: 1 })]),
    call(libc::SYS_creat, &[cwd(0, Use::Create)]),
    call(libc::SYS_stat, &[cwd(0, Use::Stat)]),
    call(libc::SYS_lstat, &[cwd(0, Use::Stat)]),
    call(libc::SYS_access, &[cwd(0, Use::Stat)]),
    call(libc::SYS_mkdir, &[cwd(0, Use::Create)]),
    call(libc::SYS_rmdir, &[cwd(0, Use::Remove)]),
    call(libc::SYS_unlink, &[cwd(0, Use::Remove)]),
    call(
        libc::SYS_rename,
        &[cwd(0, Use::Remove), cwd(1, Use::Create)],
    ),
    call(libc::SYS_link, &[cwd(0, Use::Read), cwd(1, Use::Create)]),
    call(libc::SYS_symlink, &[cwd(1, Use::Create)]),
    call(libc::SYS_chmod, &[cwd(0, Use::Write)]),
    call(libc::SYS_chown, &[cwd(0, Use::Write)]),
    call(libc::SYS_lchown, &[cwd(0, Use::Write)]),
];
/// The calls of x86_64 alone (aarch64 has only their `*at` forms).
#[cfg(not(target_arch = "x86_64"))]
pub const PATH_CALLS_ARCH: &[PathCall] = &[];

/// The watched call with number `nr`, if it is one.
pub fn path_call(nr: i64) -> Option<&'static PathCall> {
    PATH_CALLS
        .iter()
        .chain(PATH_CALLS_ARCH)
        .find(|c| c.nr == nr)
}
