//! The core's modules are layered: no import circle among its top-level modules (see
//! docs/design.md, "The core"). The check reads `src/**/*.rs`, leaves out comments, string
//! and character literals and `#[cfg(test)]` items (a unit test may drive the whole engine),
//! and takes every `crate::` path (`use crate::{a, b::c}` groups too) as an edge from the
//! file's top-level module to the module the path names; a name the crate root re-exports
//! (`crate::Engine`) is an edge to the module it comes from. `super::` and `self::` paths stay
//! inside a top-level module, so they are no edges there.
//!
//! Within a folder module the same holds between files: no circle among modules of which neither
//! holds the other (`h1::conn` and `h1::dispatch`, say), by their `crate::`, `super::` and
//! `self::` paths. A folder's `mod.rs` and its files (re-exports one way, `super::` the other)
//! are no circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn the_top_level_modules_have_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = top_level_graph(&src);
    assert!(
        graph.len() > 5,
        "too few modules read from {}: {graph:?}",
        src.display()
    );
    if let Some(circle) = find_cycle(&graph) {
        panic!(
            "the core's top-level modules import each other in a circle: {}\n(edges: {})",
            circle.join(" -> "),
            render(&graph)
        );
    }
}

/// The protocols meet only at the seam (`conn`, and `streams` for those that carry many
/// streams): none imports another, the origin or the engine, and the seam imports none of
/// them (issue 48: HTTP/3 once took its request mapping from HTTP/2). (The engine's context
/// is left out: the protocols' tests use its testing kit, `ctx/testing.rs`.)
#[test]
fn the_protocols_know_only_the_seam_and_not_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = top_level_graph(&src);
    let above = ["h1", "h2", "h3", "origin", "engine"];
    for module in ["h1", "h2", "h3", "conn", "streams"] {
        let edges = graph
            .get(module)
            .unwrap_or_else(|| panic!("no module {module} read"));
        let known: Vec<&str> = above
            .iter()
            .copied()
            .filter(|m| *m != module && edges.contains(*m))
            .collect();
        assert!(
            known.is_empty(),
            "{module} imports {known:?} (its edges: {edges:?})"
        );
    }
}

#[test]
fn the_files_have_no_circle_between_modules_side_by_side() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = file_graph(&src);
    assert!(graph.len() > 20, "too few files read: {graph:?}");
    if let Some(circle) = find_cycle(&graph) {
        panic!(
            "files of the core import each other in a circle: {}",
            circle.join(" -> ")
        );
    }
}

#[test]
fn paths_resolve_to_the_modules_they_name() {
    let code = strip(
        "use super::{io::Buffered, Host}; use crate::codec::{self, request::{encode_head, \
         BodyInfo as Info}}; fn f() { crate::h2::conn::run(); self::inner::g(); }",
    );
    let module = ["h1", "conn"].map(String::from);
    let paths = paths(&code, &module);
    let paths: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "h1::io::Buffered",
            "h1::Host",
            "codec",
            "codec::request::encode_head",
            "codec::request::BodyInfo",
            "h2::conn::run",
            "h1::conn::inner::g",
        ]
    );
}

#[test]
fn the_cycle_finder_finds_a_circle_and_names_it() {
    let graph = graph_of(&[
        ("engine", &["origin", "event"]),
        ("origin", &["h1", "event"]),
        ("h1", &["event", "origin"]),
        ("event", &[]),
    ]);
    assert_eq!(find_cycle(&graph).unwrap(), ["origin", "h1", "origin"]);
    let graph = graph_of(&[
        ("a", &["b", "c"]),
        ("b", &["c"]),
        ("c", &["d"]),
        ("d", &["b"]),
    ]);
    assert_eq!(find_cycle(&graph).unwrap(), ["b", "c", "d", "b"]);
    let graph = graph_of(&[("a", &["a"])]);
    assert_eq!(find_cycle(&graph).unwrap(), ["a", "a"]);
    let graph = graph_of(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[])]);
    assert_eq!(find_cycle(&graph), None);
}

#[test]
fn references_are_read_from_code_only() {
    let code = strip(
        r##"
        use crate::event::{Event, Shared};
        use crate::{backlog::Share, codec, Engine};
        // use crate::origin::Origin;
        /* crate::engine /* nested */ crate::h2 */
        /// [`crate::h1::Conn`]
        let s = "crate::ws"; let r = r#"crate::decode"#; let c = '"'; let l: &'static str = "";
        fn f<'a>(x: &'a u8) -> crate::transport::Fd { crate::error::Error::Closed }
        #[cfg(test)]
        mod tests { use crate::request::Request; }
        #[cfg(test)]
        fn only_in_tests() { crate::ctx::Ctx::new(); }
        "##,
    );
    let reexports = BTreeMap::from([("Engine".to_string(), "engine".to_string())]);
    let found = references(&code, &reexports);
    let expected = ["backlog", "codec", "engine", "error", "event", "transport"];
    assert_eq!(found, expected.iter().map(|s| s.to_string()).collect());
}

/// The graph of the crate's top-level modules (those `lib.rs` declares) by the `crate::` paths
/// of their files.
fn top_level_graph(src: &Path) -> Graph {
    let lib = strip(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let modules = declared_modules(&lib);
    let reexports = reexports(&lib);
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        assert!(
            modules.contains(&module),
            "{} belongs to no module lib.rs declares",
            rel.display()
        );
        let code = strip(&std::fs::read_to_string(&file).unwrap());
        for target in references(&code, &reexports) {
            if target != module && modules.contains(&target) {
                graph.get_mut(&module).unwrap().insert(target);
            }
        }
    }
    graph
}

/// The graph of the crate's files, each named by its module path (`h1::conn`; `h1` for
/// `h1/mod.rs`), by the paths of their code, leaving out edges between a module and one it
/// holds or is held by.
fn file_graph(src: &Path) -> Graph {
    let lib = strip(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let reexports = reexports(&lib);
    let files: Vec<(Vec<String>, PathBuf)> = rust_files(src)
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(src).unwrap().with_extension("");
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            (module, file)
        })
        .collect();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = Graph::new();
    for (module, file) in &files {
        let name = module.join("::");
        let edges = graph.entry(name.clone()).or_default();
        if module.is_empty() {
            continue;
        }
        let code = strip(&std::fs::read_to_string(file).unwrap());
        for mut path in paths(&code, module) {
            if let Some(module) = path.first().and_then(|first| reexports.get(first)) {
                path[0] = module.clone();
            }
            let Some(target) = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| modules.contains(p))
            else {
                continue;
            };
            let nested = |a: &[String], b: &[String]| a.len() <= b.len() && b[..a.len()] == *a;
            if !nested(&target, module) && !nested(module, &target) {
                edges.insert(target.join("::"));
            }
        }
    }
    graph
}

/// Every `crate::`, `super::` and `self::` path of stripped code, as absolute module paths
/// (those of a `{...}` group each on its own), as the code of `module` names them.
fn paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let toks = tokens(code);
    let sep = |i: usize| {
        toks.get(i).is_some_and(|t| t == ":") && toks.get(i + 1).is_some_and(|t| t == ":")
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let start = matches!(toks[i].as_str(), "crate" | "super" | "self")
            && sep(i + 1)
            && !(i >= 2 && toks[i - 1] == ":" && toks[i - 2] == ":");
        if !start {
            i += 1;
            continue;
        }
        let mut base: Vec<String> = match toks[i].as_str() {
            "crate" => Vec::new(),
            "super" => module[..module.len().saturating_sub(1)].to_vec(),
            _ => module.to_vec(),
        };
        i += 3;
        while toks.get(i).is_some_and(|t| t == "super") && sep(i + 1) {
            base.pop();
            i += 3;
        }
        i = tree(&toks, i, base, &mut found);
    }
    found
}

/// Reads a use tree (or a path) at `toks[i]` under `prefix`; returns where it ends.
fn tree(
    toks: &[String],
    mut i: usize,
    mut prefix: Vec<String>,
    found: &mut Vec<Vec<String>>,
) -> usize {
    let ident = |t: &str| {
        t.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    };
    match toks.get(i).map(String::as_str) {
        Some("{") => {
            i += 1;
            while i < toks.len() && toks[i] != "}" {
                i = tree(toks, i, prefix.clone(), found);
                // Past the item's comma (or whatever ends it short of the group's end).
                if toks.get(i).is_some_and(|t| t != "}") {
                    i += 1;
                }
            }
            i + 1
        }
        Some("self") => {
            found.push(prefix);
            i + 1
        }
        Some(t) if ident(t) => {
            prefix.push(t.to_string());
            i += 1;
            if toks.get(i).is_some_and(|t| t == ":") && toks.get(i + 1).is_some_and(|t| t == ":") {
                return tree(toks, i + 2, prefix, found);
            }
            if toks.get(i).is_some_and(|t| t == "as") {
                i += 2;
            }
            found.push(prefix);
            i
        }
        _ => {
            found.push(prefix);
            i
        }
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// `mod x;` and `pub mod x;` (any visibility) of stripped code.
fn declared_modules(code: &str) -> BTreeSet<String> {
    let words = tokens(code);
    let mut modules = BTreeSet::new();
    for (i, w) in words.iter().enumerate() {
        if w == "mod" && words.get(i + 2).is_some_and(|t| t == ";") {
            modules.insert(words[i + 1].clone());
        }
    }
    modules
}

/// The names the crate root re-exports (`pub use engine::Engine;`, `pub use event::{Event,
/// EventSink};`), each with the module it comes from.
fn reexports(code: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for stmt in code.split(';') {
        let stmt = stmt.trim();
        let Some(path) = stmt.strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim().trim_start_matches("crate::");
        let Some((module, rest)) = path.split_once("::") else {
            continue;
        };
        let rest = rest.trim().trim_start_matches('{').trim_end_matches('}');
        for item in rest.split(',') {
            let name = match item.split_once(" as ") {
                Some((_, alias)) => alias,
                None => item.rsplit("::").next().unwrap_or(item),
            };
            let name = name.trim();
            if !name.is_empty() && name != "self" {
                names.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    names
}

/// The first segment of every `crate::` path in stripped code (each item of a `crate::{...}`
/// group), a re-exported name mapped to its module.
fn references(code: &str, reexports: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let resolve = |name: &str| reexports.get(name).cloned().unwrap_or(name.to_string());
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `$crate::` counts; `foo_crate::` does not.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest_trimmed = rest.trim_start();
        if let Some(group) = rest_trimmed.strip_prefix('{') {
            let mut depth = 1;
            let mut end = group.len();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end = i;
                    break;
                }
            }
            for item in split_top_level(&group[..end]) {
                let first = ident_at(item.trim_start());
                if !first.is_empty() && first != "self" {
                    found.insert(resolve(first));
                }
            }
        } else {
            let first = ident_at(rest_trimmed);
            if !first.is_empty() {
                found.insert(resolve(first));
            }
        }
    }
    found
}

/// The items of a `{...}` group's inside, split at its own commas.
fn split_top_level(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Identifiers and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in code.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The code without comments, without the insides of string and character literals, and
/// without `#[cfg(test)]` items.
fn strip(src: &str) -> String {
    let code = strip_comments_and_literals(src);
    strip_test_items(&code)
}

fn strip_comments_and_literals(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (i == 0 || !ident(s[i - 1]) || (s[i - 1] == 'b' && (i < 2 || !ident(s[i - 2]))))
            && matches!(next, Some('"') | Some('#'))
        {
            // A raw string, r"..." or r#"..."#, or an identifier that starts with r.
            let mut j = i + 1;
            let mut hashes = 0;
            while s.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if s.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= s.len() {
                    break;
                }
                if s[j] == '"' && (1..=hashes).all(|k| s.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            // An escaped character literal: '\n', '\'', '\u{..}'.
            i += 3;
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && s.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            // Code, a lifetime's quote among it.
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Leaves out each item marked `#[cfg(test)]`: up to its `;`, or through its first `{...}`
/// block (a `mod tests { ... }`, a `fn`).
fn strip_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = find_cfg_test(rest) {
        out.push_str(&rest[..at.0]);
        let item = &rest[at.1..];
        let mut depth = 0;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Where `#[cfg(test)]` (any spacing) starts and ends in `code`.
fn find_cfg_test(code: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(at) = code[from..].find("#[") {
        let start = from + at;
        let compact: String = code[start..]
            .chars()
            .take(40)
            .take_while(|c| *c != ']')
            .filter(|c| !c.is_whitespace())
            .collect();
        if compact == "#[cfg(test)" {
            let end = start + code[start..].find(']').unwrap() + 1;
            return Some((start, end));
        }
        from = start + 2;
    }
    None
}

/// A circle of `graph`, as the modules along it with the first one again at its end, or `None`.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(node.to_string(), Mark::OnPath);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next.as_str()).copied().unwrap_or(Mark::New) {
                Mark::OnPath => {
                    let from = path.iter().position(|n| n == next).unwrap();
                    let mut circle = path[from..].to_vec();
                    circle.push(next.clone());
                    return Some(circle);
                }
                Mark::New => {
                    if let Some(circle) = visit(next, graph, marks, path) {
                        return Some(circle);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if marks.get(node).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(circle) = visit(node, graph, &mut marks, &mut Vec::new()) {
                return Some(circle);
            }
        }
    }
    None
}

fn graph_of(edges: &[(&str, &[&str])]) -> Graph {
    edges
        .iter()
        .map(|(from, to)| {
            let to = to.iter().map(|t| t.to_string()).collect();
            (from.to_string(), to)
        })
        .collect()
}

fn render(graph: &Graph) -> String {
    let edges: Vec<String> = graph
        .iter()
        .filter(|(_, to)| !to.is_empty())
        .map(|(from, to)| {
            let to: Vec<&str> = to.iter().map(String::as_str).collect();
            format!("{from} -> {}", to.join(", "))
        })
        .collect();
    edges.join("; ")
}
