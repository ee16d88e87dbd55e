//! What is merged back and what is dropped: the names at the top of `.git`, the areas
//! below it, git's temporary files, and the kinds of entry the upper layer can hold.

use nix::errno::Errno;
use nix::sys::stat::FileStat;

use super::GitDropReason;

/// Where a path of the upper layer lies, for what may be merged back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Area {
    /// `objects/` (not `objects/info/`): only additions are taken.
    Objects,
    /// `refs/`, `logs/`, `reftable/`: files replaced, deletions applied.
    Refs,
}

/// What a name at the top of `.git` is, for the merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Top {
    /// The root directory of an area.
    Area(Area),
    /// A file merged back, whose deletion is applied too.
    File,
    /// `HEAD`: merged back; never deleted (a `.git` without it is no repository, and git
    /// on the host would look further up for one).
    Head,
    /// Anything else: dropped.
    Other,
}

/// Classifies a name at the top of `.git`.
pub(super) fn top(name: &[u8]) -> Top {
    /// `[A-Z_]+<suffix>`, as git names its state files.
    fn state(name: &[u8], suffix: &[u8]) -> bool {
        name.len() > suffix.len()
            && name.ends_with(suffix)
            && name.iter().all(|b| b.is_ascii_uppercase() || *b == b'_')
    }
    match name {
        b"objects" => Top::Area(Area::Objects),
        b"refs" | b"logs" | b"reftable" => Top::Area(Area::Refs),
        b"HEAD" => Top::Head,
        b"index" | b"packed-refs" | b"MERGE_MSG" | b"MERGE_MODE" | b"SQUASH_MSG"
        | b"AUTO_MERGE" => Top::File,
        n if state(n, b"_HEAD") || state(n, b"_EDITMSG") => Top::File,
        n if n.starts_with(b"sharedindex.") && !n.ends_with(b".lock") => Top::File,
        _ => Top::Other,
    }
}

/// Whether a file name in `area` (or at the top, `None`) is a lock or temporary file of
/// git's (or of the merge itself): never merged.
pub(super) fn temporary(name: &[u8], area: Option<Area>) -> bool {
    name.ends_with(b".lock") || (area == Some(Area::Objects) && name.starts_with(b"tmp_"))
}

/// Directories deeper than this below `.git` are not merged (git nests refs a few levels).
pub(super) const MAX_DEPTH: usize = 32;

/// What kind of entry the upper layer holds.
pub(super) enum Kind {
    Dir,
    File,
    /// An overlayfs whiteout (a character device 0:0): the program deleted the entry.
    Whiteout,
    Other,
}

pub(super) fn kind(st: &FileStat) -> Kind {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File,
        libc::S_IFCHR if st.st_rdev == 0 => Kind::Whiteout,
        _ => Kind::Other,
    }
}

/// The failure of one entry: its errno.
pub(super) type R<T = ()> = Result<T, GitDropReason>;

pub(super) fn failed(e: Errno) -> GitDropReason {
    GitDropReason::Failed(e as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_data_names_at_the_top_are_merged() {
        for (name, want) in [
            ("objects", Top::Area(Area::Objects)),
            ("refs", Top::Area(Area::Refs)),
            ("logs", Top::Area(Area::Refs)),
            ("reftable", Top::Area(Area::Refs)),
            ("HEAD", Top::Head),
            ("index", Top::File),
            ("packed-refs", Top::File),
            ("ORIG_HEAD", Top::File),
            ("FETCH_HEAD", Top::File),
            ("CHERRY_PICK_HEAD", Top::File),
            ("COMMIT_EDITMSG", Top::File),
            ("TAG_EDITMSG", Top::File),
            ("MERGE_MSG", Top::File),
            ("sharedindex.0123abcd", Top::File),
        ] {
            assert_eq!(top(name.as_bytes()), want, "{name}");
        }
        for name in [
            "config",
            "config.worktree",
            "commondir",
            "hooks",
            "info",
            "worktrees",
            "modules",
            "description",
            "rebase-merge",
            "rebase-apply",
            "sequencer",
            "branches",
            "remotes",
            "shallow",
            "gitdir",
            "_HEAD",
            "evil_HEAD",
            "HEAD.lock",
            "sharedindex.x.lock",
            "lfs",
        ] {
            assert_eq!(top(name.as_bytes()), Top::Other, "{name}");
        }
    }

    #[test]
    fn locks_and_temporary_objects_are_never_merged() {
        assert!(temporary(b"index.lock", None));
        assert!(temporary(b"main.lock", Some(Area::Refs)));
        assert!(temporary(b"tmp_obj_a1b2c3", Some(Area::Objects)));
        assert!(!temporary(b"tmp_branch", Some(Area::Refs)));
        assert!(!temporary(b"0123456789abcdef", Some(Area::Objects)));
    }
}
