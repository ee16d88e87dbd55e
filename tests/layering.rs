//! The modules of the library import in one direction only, the flow of `docs/ARCHITECTURE.md`:
//!
//! ```text
//! policy → error → probe → plan → backend → process → changes → lib.rs
//!                    guard (beside the flow: policy and error only)
//! ```
//!
//! A module may name (`crate::x::…`, `use crate::{x, …}`, or a root re-export that comes
//! from `x`) only the modules listed for it in [`LAYERS`]; the list is ordered, so no two
//! modules can import each other. `error` sits right above `policy` (whose own error,
//! `PolicyError`, lives with it and is re-exported by `error`), so that every layer can
//! return the crate's errors; `guard` holds the in-process guards, which the process layer
//! uses and nothing in the flow below it; `sys` is a crate of its own at the bottom. Code
//! under `#[cfg(test)]` (unit tests may drive a whole sandbox) and comments are not
//! imports. This test reads the source tree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of the library and the modules it may import, in flow order.
const LAYERS: &[(&str, &[&str])] = &[
    ("policy", &[]),
    ("error", &["policy"]),
    ("probe", &["policy", "error"]),
    ("plan", &["policy", "error", "probe"]),
    ("backend", &["policy", "error", "probe", "plan"]),
    ("guard", &["policy", "error"]),
    (
        "process",
        &["policy", "error", "probe", "plan", "backend", "guard"],
    ),
    (
        "changes",
        &[
            "policy", "error", "probe", "plan", "backend", "guard", "process",
        ],
    ),
];

/// One import that breaks the order: (file, line, importing module, imported module).
type Violation = (PathBuf, usize, String, String);

#[test]
fn modules_import_only_modules_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read src/lib.rs");
    let modules = top_modules(&lib);
    let listed: BTreeSet<&str> = LAYERS.iter().map(|(m, _)| *m).collect();
    let unlisted: Vec<_> = modules
        .iter()
        .filter(|m| !listed.contains(m.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "place these modules in LAYERS (tests/layering.rs) and docs/ARCHITECTURE.md: {unlisted:?}"
    );
    let reexports = root_reexports(&lib, &modules);
    let mut bad = Vec::new();
    let mut edges = BTreeSet::new();
    for module in &modules {
        let dir = src.join(module);
        let mut files = vec![src.join(format!("{module}.rs"))];
        files.extend(rust_files(&dir));
        for file in files.iter().filter(|f| f.exists()) {
            if is_test_file(file) {
                continue;
            }
            let text = std::fs::read_to_string(file).expect("read a source file");
            for (line, target) in imports(&text, &modules, &reexports) {
                edges.insert((module.clone(), target.clone()));
                if !allowed(module, &target) {
                    bad.push((file.clone(), line, module.clone(), target));
                }
            }
        }
    }
    assert!(bad.is_empty(), "imports against the flow:\n{}", show(&bad));
    let mutual: Vec<_> = edges
        .iter()
        .filter(|(a, b)| a < b && edges.contains(&(b.clone(), a.clone())))
        .collect();
    assert!(
        mutual.is_empty(),
        "modules that import each other: {mutual:?}"
    );
}

#[test]
fn the_layers_form_one_order() {
    for (i, (module, below)) in LAYERS.iter().enumerate() {
        for b in *below {
            let at = LAYERS.iter().position(|(m, _)| m == b);
            assert!(
                at.is_some_and(|at| at < i),
                "{module} may import {b}, which is not listed before it"
            );
        }
    }
}

/// The checker itself: an import up the flow is found, the same text in a comment, a doc
/// comment or a test module is not, and root re-exports count as their module.
#[test]
fn the_checker_sees_upward_imports_and_nothing_else() {
    let modules: Vec<String> = LAYERS.iter().map(|(m, _)| m.to_string()).collect();
    let lib = "pub use process::{Child, Sandbox};\npub use policy::Policy;\n";
    let reexports = root_reexports(lib, &modules);
    let text = "\
//! Uses [`crate::process::Sandbox`] in docs only.
use crate::error::PlanError; // crate::backend in a comment
use crate::{policy::Layer,
    process::Child};
fn f() -> crate::Sandbox { loop {} }
#[cfg(test)]
mod tests {
    use crate::backend::linux;
    fn g() { let _ = \"{\"; }
}
fn h() { crate::probe::x(); }
";
    let found: Vec<(usize, String)> = imports(text, &modules, &reexports);
    let names: Vec<&str> = found.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(names, ["error", "policy", "process", "process", "probe"]);
    assert_eq!(found[2].0, 4, "the line of the second item of a group");
    assert!(!allowed("plan", "process") && allowed("process", "plan"));
    assert!(!allowed("guard", "probe") && !allowed("backend", "guard"));
}

fn allowed(module: &str, target: &str) -> bool {
    module == target
        || LAYERS
            .iter()
            .any(|(m, below)| *m == module && below.contains(&target))
}

fn show(bad: &[Violation]) -> String {
    bad.iter()
        .map(|(f, l, m, t)| format!("  {}:{l}: {m} imports {t}\n", f.display()))
        .collect()
}

/// The modules `lib.rs` declares, leaving out test-only ones.
fn top_modules(lib: &str) -> Vec<String> {
    let code = strip(lib);
    let mut out = Vec::new();
    let mut test_only = false;
    for line in code.lines() {
        let t = line.trim();
        if t.starts_with("#[cfg(") {
            test_only = is_test_cfg(t);
            continue;
        }
        let decl = t
            .strip_prefix("pub mod ")
            .or_else(|| t.strip_prefix("pub(crate) mod "))
            .or_else(|| t.strip_prefix("mod "));
        if let Some(name) = decl.and_then(|d| d.strip_suffix(';')) {
            // `#[cfg(feature = …)] pub mod x;` and `#[cfg(not(…))] pub(crate) mod x;` are one.
            if !test_only && !out.iter().any(|m| m == name.trim()) {
                out.push(name.trim().to_string());
            }
        }
        if !t.starts_with("#[") {
            test_only = false;
        }
    }
    out
}

/// Root re-exports (`pub use x::{A, B};`, `pub use x::y::C;`) and the module each comes
/// from.
fn root_reexports(lib: &str, modules: &[String]) -> BTreeMap<String, String> {
    let code = strip(lib);
    let mut out = BTreeMap::new();
    for stmt in code.split(';') {
        let Some(at) = stmt.find("pub use ") else {
            continue;
        };
        let path = stmt[at + "pub use ".len()..].trim();
        let path = path.strip_prefix("crate::").unwrap_or(path);
        let Some((first, rest)) = path.split_once("::") else {
            continue;
        };
        if !modules.iter().any(|m| m == first) {
            continue;
        }
        // The names of the last segment: `A`, or each of `{A, b, C as D}`.
        let names = rest.rsplit("::").next().unwrap_or(rest);
        for name in names.split(|c: char| !c.is_alphanumeric() && c != '_') {
            if !name.is_empty() && name != "as" && name != "self" {
                out.insert(name.to_string(), first.to_string());
            }
        }
    }
    out
}

/// The top-level modules `text` names through `crate::`, each with its line (1-based).
fn imports(
    text: &str,
    modules: &[String],
    reexports: &BTreeMap<String, String>,
) -> Vec<(usize, String)> {
    let code = without_tests(&strip(text));
    let mut out = Vec::new();
    let resolve = |name: &str| -> Option<String> {
        if modules.iter().any(|m| m == name) {
            Some(name.to_string())
        } else {
            reexports.get(name).cloned()
        }
    };
    let bytes = code.as_bytes();
    let mut i = 0;
    while let Some(at) = code[i..].find("crate::") {
        let start = i + at;
        i = start + "crate::".len();
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue; // `$crate::`, `my_crate::`
        }
        let line = code[..start].matches('\n').count() + 1;
        if code[i..].starts_with('{') {
            // `use crate::{a, b::c, …}`: the first segment of each item at depth 1.
            let mut depth = 0;
            let mut item_start = true;
            let mut j = i;
            while j < bytes.len() {
                match bytes[j] {
                    b'{' => {
                        depth += 1;
                        item_start = depth == 1;
                    }
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    b',' if depth == 1 => item_start = true,
                    c if item_start && (c.is_ascii_alphabetic() || c == b'_') => {
                        let name = ident(&code[j..]);
                        if let Some(m) = resolve(name) {
                            out.push((code[..j].matches('\n').count() + 1, m));
                        }
                        item_start = false;
                        j += name.len();
                        continue;
                    }
                    _ => {}
                }
                j += 1;
            }
            i = j;
        } else if let Some(m) = resolve(ident(&code[i..])) {
            out.push((line, m));
        }
    }
    out
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !c.is_alphanumeric() && c != '_')
        .unwrap_or(s.len());
    &s[..end]
}

/// `text` with comments (line, doc and block) and the contents of string and char
/// literals blanked out, newlines kept so that line numbers hold.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
            }
        } else if b[i] == b'"' || (b[i] == b'r' && raw_string_start(&b[i..]).is_some()) {
            let (hashes, open) = if b[i] == b'"' {
                (0, 1)
            } else {
                let h = raw_string_start(&b[i..]).unwrap_or(0);
                (h, h + 2)
            };
            out.push(b'"');
            i += open;
            while i < b.len() {
                if hashes == 0 && b[i] == b'\\' {
                    out.extend_from_slice(b"  ");
                    i += 2;
                    continue;
                }
                if b[i] == b'"'
                    && b[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == b'#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                i += 1;
            }
            out.push(b'"');
        } else if b[i] == b'\'' && char_literal_len(&text[i..]).is_some() {
            let n = char_literal_len(&text[i..]).unwrap_or(1);
            out.extend(std::iter::repeat_n(b' ', n));
            i += n;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The number of `#` of a raw string starting at `b` (`r"`, `r#"`, …).
fn raw_string_start(b: &[u8]) -> Option<usize> {
    let hashes = b[1..].iter().take_while(|&&c| c == b'#').count();
    (b.get(1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// The length in bytes of a char literal at the start of `s` (`'a'`, `'\n'`, `'\''`,
/// `'{'`), `None` for a lifetime (`'a`).
fn char_literal_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.get(1) == Some(&b'\\') {
        let close = b.get(3..)?.iter().position(|&c| c == b'\'')?;
        return Some(close + 4);
    }
    let width = s[1..].chars().next()?.len_utf8();
    (b.get(1 + width) == Some(&b'\'')).then_some(width + 2)
}

/// `code` (already stripped) with every `#[cfg(test)]` item blanked out.
fn without_tests(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(") {
        let start = from + at;
        let line_end = out[start..].find('\n').map_or(out.len(), |n| start + n);
        from = line_end;
        if !is_test_cfg(&out[start..line_end]) {
            continue;
        }
        // The item runs to its `;` or to the brace that closes its first `{`.
        let rest = &out[line_end..];
        let semi = rest.find(';');
        let brace = rest.find('{');
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => line_end + s + 1,
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = out.len();
                for (k, c) in out[line_end + b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = line_end + b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (Some(s), None) => line_end + s + 1,
            (None, None) => out.len(),
        };
        let blank: String = out[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blank);
        from = end;
    }
    out
}

/// `#[cfg(test)]` or `#[cfg(all(test, …))]`: compiled for tests only.
fn is_test_cfg(attr: &str) -> bool {
    let attr: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    attr.starts_with("#[cfg(test)]") || attr.starts_with("#[cfg(all(test,")
}

/// A file whose module, or a module above it, is declared under `#[cfg(test)]`
/// (`#[cfg(test)] mod tests;`).
fn is_test_file(file: &Path) -> bool {
    let (Some(stem), Some(dir)) = (file.file_stem().and_then(|s| s.to_str()), file.parent()) else {
        return false;
    };
    // `a/b.rs` and `a/b/mod.rs` are both module `b`, declared in `a.rs` or `a/mod.rs`.
    let (name, decl_dir) = if stem == "mod" {
        match (dir.file_name().and_then(|n| n.to_str()), dir.parent()) {
            (Some(n), Some(p)) => (n, p),
            _ => return false,
        }
    } else {
        (stem, dir)
    };
    if decl_dir.file_name().is_some_and(|n| n == "src") && name == "lib" {
        return false;
    }
    let declarers = [
        decl_dir.join("mod.rs"),
        decl_dir.with_extension("rs"),
        decl_dir.join("lib.rs"),
    ];
    let Some(declarer) = declarers.iter().find(|p| p.as_path() != file && p.exists()) else {
        return false;
    };
    let Ok(text) = std::fs::read_to_string(declarer) else {
        return false;
    };
    let code = strip(&text);
    let lines: Vec<&str> = code.lines().map(str::trim).collect();
    let declared_for_tests = lines.windows(2).any(|w| {
        let decl = w[1]
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        is_test_cfg(w[0]) && decl == format!("mod {name};")
    });
    declared_for_tests || is_test_file(declarer)
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}
