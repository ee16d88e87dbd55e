//! The path guard for in-process file tools (read, write, list, send a file).
//!
//! A host's own file tools run in the host process, outside the kernel sandbox, so they need
//! their own check. [`PathGuard`] resolves a path the model asked for against the workspace
//! and refuses it when it
//!
//! - leaves the workspace (`../etc`, `/etc/passwd`);
//! - passes through a symbolic link, wherever the link points (a link in the middle, a loop);
//! - names a denied entry (`.git` and the policy's `deny_names`) at any depth;
//! - contains a NUL byte or a line break;
//! - names a protected file (`protected`, compared case-insensitively) and is a write.
//!
//! Resolution walks the path one component at a time with `lstat` (`symlink_metadata`), so a
//! link is seen before anything follows it. For a target that does not exist yet the walk
//! stops at the deepest existing ancestor and appends the rest, which may not contain `..`.
//!
//! The check is made at one moment. A sandboxed program that shares the workspace can swap a
//! checked directory for a link before the host opens the returned path; the kernel rules of
//! the sandbox, not this guard, are the boundary for the program itself. Hosts that run tools
//! concurrently with sandboxed programs should open the returned path with `O_NOFOLLOW`.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::GuardError;
use crate::policy::Policy;

/// The entry the guard always denies, on top of the policy's `deny_names`: a file tool that
/// writes `.git/hooks/*` or `.git/config` gets code run by the host's next `git` call.
pub const ALWAYS_DENIED: &str = ".git";

/// Resolves paths for in-process file tools and refuses those that leave the workspace.
///
/// ```
/// use std::path::Path;
/// use stockade::{PathGuard, Policy};
///
/// let dir = tempfile::tempdir()?;
/// let guard = PathGuard::new(dir.path(), &Policy::default())?;
/// let ok = guard.check_write(Path::new("notes/today.md"))?;
/// assert!(ok.starts_with(guard.workspace()));
/// assert!(guard.check_read(Path::new("../etc/passwd")).is_err());
/// assert!(guard.check_read(Path::new(".env")).is_err());
/// assert!(guard.check_write(Path::new("soul.MD")).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct PathGuard {
    /// The workspace, canonicalized once at construction.
    root: PathBuf,
    /// The workspace as the host wrote it (when absolute and free of `..`): a tool may pass
    /// absolute paths spelled with it even when it differs from `root` (`/var` on macOS).
    given: Option<PathBuf>,
    /// `.git` plus the policy's `deny_names`, each split into components.
    deny: Vec<Pattern>,
    /// The policy's `protected` names, each split into components.
    protected: Vec<Pattern>,
}

/// One `deny_names` or `protected` entry: a name (`.env`) or a short relative path
/// (`.git/hooks`), matched as a run of whole components, case-insensitively.
#[derive(Clone, Debug)]
struct Pattern {
    /// The entry as configured, for error messages.
    text: String,
    /// Its non-empty components.
    parts: Vec<String>,
}

impl Pattern {
    fn new(text: &str) -> Option<Pattern> {
        let parts: Vec<String> = text
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .map(str::to_string)
            .collect();
        if parts.is_empty() {
            return None;
        }
        Some(Pattern {
            text: text.to_string(),
            parts,
        })
    }

    /// Whether `components` contains this pattern as a contiguous run.
    fn matches(&self, components: &[&OsStr]) -> bool {
        components
            .windows(self.parts.len())
            .any(|w| w.iter().zip(&self.parts).all(|(c, p)| same_name(c, p)))
    }
}

/// Case-insensitive name comparison. A case-insensitive file system (macOS, Windows shares)
/// opens `.ENV` for `.env`, so denied and protected names are compared the same way: full
/// Unicode lowercase when both are UTF-8, ASCII case folding on the bytes otherwise.
fn same_name(component: &OsStr, name: &str) -> bool {
    match component.to_str() {
        Some(c) => c.eq_ignore_ascii_case(name) || c.to_lowercase() == name.to_lowercase(),
        None => component.as_bytes().eq_ignore_ascii_case(name.as_bytes()),
    }
}

/// Which check a resolution serves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

impl PathGuard {
    /// A guard for `workspace` with the policy's `deny_names` and `protected` names.
    ///
    /// The policy's own `workspace` is not consulted: hosts often keep one policy for many
    /// agents and pass each agent's directory here. `.git` is denied whatever the policy says.
    ///
    /// # Errors
    ///
    /// [`GuardError::Inspect`] when the workspace cannot be canonicalized (it does not
    /// exist, or a component cannot be searched).
    pub fn new(workspace: impl AsRef<Path>, policy: &Policy) -> Result<PathGuard, GuardError> {
        let workspace = workspace.as_ref();
        let root = workspace
            .canonicalize()
            .map_err(|source| GuardError::Inspect {
                path: workspace.to_path_buf(),
                source,
            })?;
        let given = (workspace.is_absolute()
            && !workspace.components().any(|c| c == Component::ParentDir)
            && workspace != root)
            .then(|| workspace.components().collect::<PathBuf>());
        let deny = std::iter::once(ALWAYS_DENIED)
            .chain(policy.deny_names.iter().map(String::as_str))
            .filter_map(Pattern::new)
            .collect();
        let protected = policy
            .protected
            .iter()
            .filter_map(|p| Pattern::new(p))
            .collect();
        Ok(PathGuard {
            root,
            given,
            deny,
            protected,
        })
    }

    /// The canonical workspace every accepted path lies under.
    pub fn workspace(&self) -> &Path {
        &self.root
    }

    /// Resolves `path` for reading: relative paths are taken from the workspace; absolute
    /// paths must lie under it. Returns the canonical path, which may not exist yet.
    ///
    /// # Errors
    ///
    /// [`GuardError::OutsideWorkspace`], [`GuardError::Symlink`], [`GuardError::DeniedName`],
    /// [`GuardError::Nul`], [`GuardError::Newline`], [`GuardError::DotDotInMissing`], or
    /// [`GuardError::Inspect`] when a component cannot be inspected.
    pub fn check_read(&self, path: &Path) -> Result<PathBuf, GuardError> {
        self.resolve(path, Access::Read)
    }

    /// Resolves `path` for listing: the same rules as [`PathGuard::check_read`]; the
    /// workspace itself (`.` or the empty path) is allowed.
    ///
    /// # Errors
    ///
    /// As [`PathGuard::check_read`].
    pub fn check_list(&self, path: &Path) -> Result<PathBuf, GuardError> {
        self.resolve(path, Access::Read)
    }

    /// Resolves `path` for writing (create, overwrite, append, rename target): the rules of
    /// [`PathGuard::check_read`], and no component may match a `protected` name.
    ///
    /// # Errors
    ///
    /// As [`PathGuard::check_read`], and [`GuardError::Protected`].
    pub fn check_write(&self, path: &Path) -> Result<PathBuf, GuardError> {
        self.resolve(path, Access::Write)
    }

    /// The argument check for an `exec` tool: a courtesy to the host, not a boundary (the
    /// kernel rules of the sandbox are).
    ///
    /// The working directory is resolved as by [`PathGuard::check_list`] and returned. The
    /// program and every argument are split into words (at white space, shell punctuation
    /// and the first `=` of `--opt=value`) and each word into path components; a component
    /// matching `.git` or a `deny_names` entry refuses the command. So `cat .env`,
    /// `sh -c "cat .ssh/id_rsa"` and `--git-dir=.git` are refused, `git status` and
    /// `cat .gitignore` are not.
    ///
    /// # Errors
    ///
    /// [`GuardError::DeniedArgument`] for the first argument that names a denied entry, or
    /// any error of [`PathGuard::check_list`] for the working directory.
    pub fn check_exec<I, S>(
        &self,
        program: impl AsRef<OsStr>,
        args: I,
        cwd: &Path,
    ) -> Result<PathBuf, GuardError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let cwd = self.check_list(cwd)?;
        let program = program.as_ref();
        let args: Vec<S> = args.into_iter().collect();
        for arg in std::iter::once(program).chain(args.iter().map(AsRef::as_ref)) {
            if let Some(name) = self.denied_word(arg) {
                return Err(GuardError::DeniedArgument {
                    arg: arg.to_string_lossy().into_owned(),
                    name: name.to_string(),
                });
            }
        }
        Ok(cwd)
    }

    /// The deny entry that some word of `arg` names, if any.
    fn denied_word(&self, arg: &OsStr) -> Option<&str> {
        // Shell words and punctuation: `sh -c 'cat .env; ls'`, `<.env`, `$(cat .ssh/x)`.
        let is_sep = |b: &u8| b.is_ascii_whitespace() || b"'\"`;|&<>()$={},:".contains(b);
        for word in arg.as_bytes().split(is_sep) {
            let components: Vec<&OsStr> = word
                .split(|b| *b == b'/')
                .filter(|c| !c.is_empty())
                .map(OsStr::from_bytes)
                .collect();
            if let Some(p) = self.deny.iter().find(|p| p.matches(&components)) {
                return Some(&p.text);
            }
        }
        None
    }

    fn resolve(&self, path: &Path, access: Access) -> Result<PathBuf, GuardError> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.contains(&0) {
            return Err(GuardError::Nul { path: path.into() });
        }
        if bytes.iter().any(|b| *b == b'\n' || *b == b'\r') {
            return Err(GuardError::Newline { path: path.into() });
        }
        let rel = self.below_workspace(path)?;
        self.check_names(path, rel, access)?;
        self.walk(path, rel)
    }

    /// The part of `path` below the workspace, still as written (it may hold `..`).
    fn below_workspace<'p>(&self, path: &'p Path) -> Result<&'p Path, GuardError> {
        if !path.is_absolute() {
            return Ok(path);
        }
        let outside = || GuardError::OutsideWorkspace { path: path.into() };
        match path.strip_prefix(&self.root) {
            Ok(rel) => Ok(rel),
            Err(_) => match &self.given {
                Some(given) => path.strip_prefix(given).map_err(|_| outside()),
                None => Err(outside()),
            },
        }
    }

    /// Refuses a denied name anywhere in `rel`, and a protected one for a write.
    fn check_names(&self, path: &Path, rel: &Path, access: Access) -> Result<(), GuardError> {
        // Every name the caller wrote counts, including names that a later `..` leaves:
        // `.git/../x` still asks about `.git`.
        let names: Vec<&OsStr> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        if let Some(p) = self.deny.iter().find(|p| p.matches(&names)) {
            return Err(GuardError::DeniedName {
                path: path.into(),
                name: p.text.clone(),
            });
        }
        if access == Access::Write {
            if let Some(p) = self.protected.iter().find(|p| p.matches(&names)) {
                return Err(GuardError::Protected {
                    path: path.into(),
                    name: p.text.clone(),
                });
            }
        }
        Ok(())
    }

    /// The absolute path of `rel` (the part of `path` below the workspace).
    ///
    /// Walks from the canonical root. While components exist, each is checked with lstat
    /// before the next is appended, so `..` only ever pops a real directory and a link is
    /// refused before anything follows it. Once one is missing, the rest is appended as is.
    fn walk(&self, path: &Path, rel: &Path) -> Result<PathBuf, GuardError> {
        let outside = || GuardError::OutsideWorkspace { path: path.into() };
        let mut out = self.root.clone();
        let mut depth = 0usize;
        let mut missing = false;
        for c in rel.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir if missing => {
                    return Err(GuardError::DotDotInMissing { path: path.into() });
                }
                Component::ParentDir => {
                    if depth == 0 {
                        return Err(outside());
                    }
                    out.pop();
                    depth -= 1;
                }
                Component::Normal(name) => {
                    out.push(name);
                    depth += 1;
                    if missing {
                        continue;
                    }
                    match out.symlink_metadata() {
                        Ok(meta) if meta.file_type().is_symlink() => {
                            return Err(GuardError::Symlink { path: out });
                        }
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => missing = true,
                        Err(source) => return Err(GuardError::Inspect { path: out, source }),
                    }
                }
                // `strip_prefix` left a relative path, and a relative input has no root.
                Component::RootDir | Component::Prefix(_) => return Err(outside()),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn guard() -> (tempfile::TempDir, PathGuard) {
        let dir = tempfile::tempdir().unwrap();
        let g = PathGuard::new(dir.path(), &Policy::default()).unwrap();
        (dir, g)
    }

    #[test]
    fn relative_paths_resolve_under_the_canonical_workspace() {
        let (_d, g) = guard();
        std::fs::create_dir(g.workspace().join("src")).unwrap();
        let p = g.check_read(Path::new("./src/../src/main.rs")).unwrap();
        assert_eq!(p, g.workspace().join("src/main.rs"));
        assert_eq!(g.check_list(Path::new("")).unwrap(), g.workspace());
        assert_eq!(g.check_list(Path::new(".")).unwrap(), g.workspace());
    }

    #[test]
    fn dotdot_above_the_root_is_outside() {
        let (_d, g) = guard();
        let e = g.check_read(Path::new("../etc")).unwrap_err();
        assert!(matches!(e, GuardError::OutsideWorkspace { .. }), "{e}");
        let e = g.check_read(Path::new("a/../../x")).unwrap_err();
        // `a` does not exist, so the `..` below it cannot be resolved.
        assert!(matches!(e, GuardError::DotDotInMissing { .. }), "{e}");
    }

    #[test]
    fn pattern_matches_runs_of_components_case_insensitively() {
        let p = Pattern::new(".git/hooks").unwrap();
        let c = |s: &'static str| -> Vec<&OsStr> { s.split('/').map(OsStr::new).collect() };
        assert!(p.matches(&c("a/.GIT/hooks/pre-commit")));
        assert!(!p.matches(&c("a/.git/x/hooks")));
        assert!(Pattern::new("/").is_none());
        assert!(same_name(OsStr::new("ÄRGER.md"), "ärger.MD"));
        assert!(!same_name(OsStr::new("soul.md.bak"), "SOUL.md"));
    }

    #[test]
    fn a_symlinked_workspace_is_reachable_by_its_given_name() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        symlink(&real, &link).unwrap();
        let g = PathGuard::new(&link, &Policy::default()).unwrap();
        assert_eq!(g.workspace(), real.canonicalize().unwrap());
        let p = g.check_read(&link.join("f")).unwrap();
        assert_eq!(p, g.workspace().join("f"));
    }

    #[test]
    fn denied_words_in_arguments() {
        let (_d, g) = guard();
        assert_eq!(g.denied_word(OsStr::new("cat .env; ls")), Some(".env"));
        assert_eq!(g.denied_word(OsStr::new("--git-dir=.git")), Some(".git"));
        assert_eq!(
            g.denied_word(OsStr::new("$(cat ~/.ssh/id_rsa)")),
            Some(".ssh")
        );
        assert_eq!(g.denied_word(OsStr::new(".gitignore")), None);
        assert_eq!(g.denied_word(OsStr::new("status")), None);
    }
}
