//! The program to run, as the C arrays `execve` takes: built in the parent, before the
//! child exists, by every launcher (Linux's clone child and the fork child alike).

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use crate::error::PlanError;

/// The most candidate paths a program is looked up in: what the sandbox's init takes, on
/// every launcher alike.
pub(crate) const MAX_CANDIDATES: usize = stockade_init::protocol::arg::MAX_CANDIDATES as usize;

/// argv, envp and the candidate paths of the program, NUL-terminated and NULL-terminated.
///
/// Crate-private, even with the `internals` feature: its raw pointers are only valid
/// while it lives and only the launchers hand them to `execve`.
#[derive(Debug)]
pub(crate) struct Program {
    /// Candidate paths, tried in order (each `PATH` directory joined with the name, or the
    /// name itself when it contains a slash).
    pub(crate) candidates: Vec<CString>,
    /// Backing storage for `argv`: read through `argv`'s pointers only.
    #[cfg_attr(not(test), allow(dead_code))]
    args: Vec<CString>,
    /// NULL-terminated argv.
    pub(crate) argv: Vec<*const libc::c_char>,
    /// Backing storage for `envp`: read through `envp`'s pointers only.
    #[cfg_attr(not(test), allow(dead_code))]
    env: Vec<CString>,
    /// NULL-terminated envp (`NAME=value`).
    pub(crate) envp: Vec<*const libc::c_char>,
}

// SAFETY: the raw pointers in `argv` and `envp` point into the `CString`s owned by the
// same value (`args`, `env`), whose heap buffers do not move when the value does and are
// never mutated; a child reads them while the owning thread keeps the value alive.
unsafe impl Send for Program {}

impl Program {
    /// Prepares `program`, `args` (`argv[0]` first) and `env`. A program without a slash
    /// is looked up, as `std::process::Command` does, in the `PATH` of `env` when it has
    /// one (empty components skipped: no implicit search of the working directory), else
    /// in `path`.
    ///
    /// # Errors
    ///
    /// [`PlanError::NulInArgument`] when a string has a NUL byte or a variable name is
    /// empty or contains `=`; [`PlanError::TooManyCandidates`] when the lookup would try
    /// more than [`MAX_CANDIDATES`] paths.
    pub(crate) fn new(
        program: &OsStr,
        args: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        path: &[PathBuf],
    ) -> Result<Self, PlanError> {
        let nul = |what: &str| PlanError::NulInArgument {
            what: what.to_string(),
        };
        let name = program.as_bytes();
        let mut candidates = Vec::new();
        if name.contains(&b'/') {
            candidates.push(CString::new(name).map_err(|_| nul("program"))?);
        } else if !name.is_empty() {
            let own: Option<Vec<PathBuf>> = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| {
                v.as_bytes()
                    .split(|b| *b == b':')
                    .filter(|d| !d.is_empty())
                    .map(|d| PathBuf::from(OsStr::from_bytes(d)))
                    .collect()
            });
            let dirs = own.as_deref().unwrap_or(path);
            if dirs.len() > MAX_CANDIDATES {
                return Err(PlanError::TooManyCandidates {
                    program: program.to_string_lossy().into_owned(),
                    count: dirs.len(),
                    max: MAX_CANDIDATES,
                });
            }
            for dir in dirs {
                let mut full = dir.as_os_str().as_bytes().to_vec();
                full.push(b'/');
                full.extend_from_slice(name);
                candidates.push(CString::new(full).map_err(|_| nul("program"))?);
            }
        }
        let args = args
            .into_iter()
            .map(|a| CString::new(a.into_vec()).map_err(|_| nul("argument")))
            .collect::<Result<Vec<_>, _>>()?;
        let env = env
            .into_iter()
            .map(|(k, v)| {
                let name = k.to_string_lossy().into_owned();
                let mut kv = k.into_vec();
                if kv.contains(&b'=') || kv.is_empty() {
                    return Err(nul(&format!("environment variable name {name:?}")));
                }
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).map_err(|_| nul(&format!("environment variable {name}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let terminated = |v: &[CString]| {
            v.iter()
                .map(|a| a.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let argv = terminated(&args);
        let envp = terminated(&env);
        Ok(Program {
            candidates,
            args,
            argv,
            env,
            envp,
        })
    }

    /// The number of arguments (`argv[0]` included).
    #[cfg(test)]
    fn argc(&self) -> usize {
        self.args.len()
    }

    /// The number of environment entries.
    #[cfg(test)]
    fn envc(&self) -> usize {
        self.env.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_are_terminated_and_candidates_follow_path() {
        let path = [PathBuf::from("/usr/bin"), PathBuf::from("/bin")];
        let p = Program::new(
            OsStr::new("sh"),
            vec!["sh".into(), "-c".into()],
            vec![("A".into(), "b".into())],
            &path,
        )
        .unwrap();
        assert_eq!(p.candidates[0].to_str().unwrap(), "/usr/bin/sh");
        assert_eq!(p.candidates.len(), 2);
        assert_eq!((p.argc(), p.argv.len()), (2, 3));
        assert!(p.argv[2].is_null());
        assert_eq!((p.envc(), p.envp.len()), (1, 2));
        let p = Program::new(OsStr::new("/x/y"), vec![], vec![], &path).unwrap();
        assert_eq!(p.candidates.len(), 1);
        // The program's own PATH decides the lookup, as with std; empty components are
        // skipped.
        let env = vec![("PATH".into(), "/opt/t::/nowhere".into())];
        let p = Program::new(OsStr::new("sh"), vec![], env, &path).unwrap();
        let c: Vec<_> = p.candidates.iter().map(|c| c.to_str().unwrap()).collect();
        assert_eq!(c, ["/opt/t/sh", "/nowhere/sh"]);
    }

    /// The init takes at most [`MAX_CANDIDATES`] paths (review: a longer `PATH` made the
    /// init refuse its arguments before it knew its report pipe, and the run ended with
    /// 125 and no word).
    #[test]
    fn a_path_of_more_directories_than_the_init_takes_is_refused_by_name() {
        let path = |n: usize| {
            let dirs: Vec<String> = (0..n).map(|i| format!("/d{i}")).collect();
            vec![("PATH".into(), dirs.join(":").into())]
        };
        let p = Program::new(OsStr::new("true"), vec![], path(MAX_CANDIDATES), &[]).unwrap();
        assert_eq!(p.candidates.len(), MAX_CANDIDATES);
        let e =
            Program::new(OsStr::new("true"), vec![], path(MAX_CANDIDATES + 1), &[]).unwrap_err();
        assert!(
            matches!(
                e,
                PlanError::TooManyCandidates {
                    count: 4097,
                    max: 4096,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("program \"true\": PATH names 4097"),
            "{e}"
        );
        // A program named with a slash is not looked up.
        assert!(Program::new(OsStr::new("/bin/true"), vec![], path(5000), &[]).is_ok());
    }

    #[test]
    fn nul_and_bad_names_are_refused() {
        let p = |env: Vec<(OsString, OsString)>| Program::new(OsStr::new("sh"), vec![], env, &[]);
        assert!(p(vec![("A=B".into(), "c".into())]).is_err());
        assert!(p(vec![("".into(), "c".into())]).is_err());
        assert!(p(vec![("A".into(), "c\0".into())]).is_err());
        assert!(Program::new(OsStr::new("/s\0h"), vec![], vec![], &[]).is_err());
    }
}
