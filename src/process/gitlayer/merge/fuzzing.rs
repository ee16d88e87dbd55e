//! The `.git` merge's parsers of bytes a sandboxed program wrote, for the fuzz targets
//! (feature `internals` only; no compatibility promise).

/// The gitlink paths of the index `data` (object names of `hash` bytes), `shared` being
/// the contents of the shared index a split index names (`None`: missing), or why the
/// index is refused.
///
/// # Errors
///
/// Why the index cannot be read: a format the reader does not follow, or a path git
/// refuses.
pub fn index_gitlinks(
    data: &[u8],
    hash: usize,
    shared: Option<&[u8]>,
) -> Result<Vec<Vec<u8>>, &'static str> {
    super::index::gitlinks(data, hash, |_| Ok(shared.map(<[u8]>::to_vec)))
        .map(|set| set.into_iter().collect())
        .map_err(|m| m.0)
}

/// Whether git would take an index entry `path` of `mode` (its `verify_path`).
pub fn index_path_safe(path: &[u8], mode: u32) -> bool {
    super::index::path::checkout_safe(path, mode)
}

/// Whether `name` is a ref name the merge takes (git's `check_refname_format`, under
/// `refs/`).
///
/// # Errors
///
/// Why not.
pub fn refname(name: &[u8]) -> Result<(), &'static str> {
    super::refs::refname(name).map_err(|i| i.0)
}

/// Checks the file `name` of `.git` (`HEAD`, `packed-refs`, a `*_HEAD` file, or a loose
/// ref `refs/…`) holding `data`, for object ids of `hash` bytes, as the merge does.
///
/// # Errors
///
/// Why the merge would refuse it.
pub fn ref_file(name: &[u8], data: &[u8], hash: usize) -> Result<(), &'static str> {
    use super::refs;
    match refs::RefFile::of(name) {
        Some(kind) => refs::check_top(kind, data, hash),
        None => refs::refname(name).and_then(|()| refs::loose(data, hash)),
    }
    .map_err(|i| i.0)
}

/// The ref names of a `packed-refs` file, in order.
///
/// # Errors
///
/// Why it is not git's format.
pub fn packed_refs(data: &[u8], hash: usize) -> Result<Vec<Vec<u8>>, &'static str> {
    super::refs::packed(data, hash)
        .map(|v| v.into_iter().map(|(_, n)| n.to_vec()).collect())
        .map_err(|i| i.0)
}

/// `packed-refs` without the replacement refs the host's (`host`) does not list; `None`
/// when nothing is left out.
pub fn packed_without_new_replacements(data: &[u8], host: &[u8]) -> Option<Vec<u8>> {
    super::refs::without_new_replacements(data, host)
}

/// The variables of config `text` by the merge's strict reading of git's grammar: each
/// entry's name (`section.subsection.key`, section and key lowercase) and value (`None`:
/// a bare key).
///
/// # Errors
///
/// Why the merge refuses the file.
#[allow(clippy::type_complexity)]
pub fn config_entries(text: &[u8]) -> Result<Vec<(Vec<u8>, Option<Vec<u8>>)>, &'static str> {
    let p = super::config::parse(text).map_err(|u| u.0)?;
    Ok(p.entries
        .iter()
        .map(|e| {
            let h = &p.headers[e.header];
            let mut name = h.section.clone();
            if let Some(sub) = &h.sub {
                name.push(b'.');
                name.extend_from_slice(sub);
            }
            name.push(b'.');
            name.extend_from_slice(&e.key);
            (name, e.value.clone())
        })
        .collect())
}

/// Merges the program's config `program` into the host's `host` as the merge does: the
/// host's new config (`None`: nothing merged) and each changed variable's name with
/// whether it merged.
///
/// # Errors
///
/// Why nothing is merged (either file refused, or the rewrite would not read back).
#[allow(clippy::type_complexity)]
pub fn config_merge(
    host: &[u8],
    program: &[u8],
) -> Result<(Option<Vec<u8>>, Vec<(Vec<u8>, bool)>), &'static str> {
    let m = super::config::merge(host, program).map_err(|u| u.0)?;
    Ok((
        m.text,
        m.changes
            .into_iter()
            .map(|c| (c.name, c.outcome == super::config::Outcome::Merged))
            .collect(),
    ))
}

/// Whether `url` is a remote URL the config merge takes.
pub fn config_url(url: &[u8]) -> bool {
    super::config::url(url)
}

/// The object ids a ref file, reflog, `packed-refs` or `*_HEAD` file `data` names, as the
/// merge's check for gitlinks in the history finds them (ids of `hash` bytes).
pub fn history_ids(data: &[u8], hash: usize) -> Vec<Vec<u8>> {
    super::history::ids(data, hash)
}

/// The path a `gitdir:` file holding `text` names, as the `.git` layer reads it.
pub fn gitdir_path(text: &[u8]) -> Option<&[u8]> {
    crate::process::gitlayer::target::gitdir_path(text)
}
