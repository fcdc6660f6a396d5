//! The crate's top-level modules (the entries of src/: admin, config,
//! consensus, peer, ...) form layers: no import cycle between them.
//!
//! This reads every file of every top-level module, collects which other
//! top-level modules it names, and fails, listing the cycle and the lines
//! that make each of its edges, if the graph has one. A module names
//! another through
//!
//! - a path `crate::x::...` (in a `use` or anywhere in code),
//! - a group `use crate::{x, y::Z, ...}` (nested groups too),
//! - `super::...::super::x` that climbs to the crate root (counted from the
//!   file's place in the tree, plus any inline `mod m { ... }` around it).
//!
//! Comments (doc comments included, so intra-doc links do not count),
//! string and char literals are skipped. Test code (`#[cfg(test)] mod
//! tests`, src/zab/tests.rs) counts like any other code: it is compiled
//! into the same crate and its imports are dependencies all the same.
//! src/lib.rs and src/main.rs are the root and the binary, not layers.
//!
//! Run with `--nocapture` to see a bottom-up order of the modules.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// Tokens with their 1-based line numbers; comments and literals dropped.
fn tokenize(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let n = c.len();
    let at = |k: usize| -> char { c.get(k).copied().unwrap_or('\0') };
    while i < n {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some(len) = raw_string_prefix(&c, i) {
            // r"..", r#".."#, br"..": no escapes, ends at '"' + same hashes.
            let hashes = len - 1 - usize::from(c[i] == 'b');
            i += len + 1;
            loop {
                if i >= n {
                    break;
                }
                if c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#') {
                    i += 1 + hashes;
                    break;
                }
                if c[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
        } else if ch == '"' || (ch == 'b' && at(i + 1) == '"') {
            i += if ch == 'b' { 2 } else { 1 };
            while i < n && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if i < n && c[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let q = if ch == 'b' { i + 1 } else { i };
            if at(q + 1) == '\\' {
                // '\n', '\'', '\u{..}'
                i = q + 3;
                while i < n && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else {
                // a lifetime or label: drop the quote, the name follows
                i = q + 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            if ch == 'r' && at(i + 1) == '#' && (at(i + 2).is_alphabetic() || at(i + 2) == '_') {
                i += 2;
            }
            let name_start = i;
            while i < n && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[name_start..i].iter().collect()), line));
        } else if ch.is_ascii_digit() {
            while i < n && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((Tok::PathSep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// Length of `r#*` / `br#*` before the opening quote of a raw string.
fn raw_string_prefix(c: &[char], i: usize) -> Option<usize> {
    let mut k = i;
    if c.get(k) == Some(&'b') {
        k += 1;
    }
    if c.get(k) != Some(&'r') {
        return None;
    }
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return None;
    }
    k += 1;
    while c.get(k) == Some(&'#') {
        k += 1;
    }
    (c.get(k) == Some(&'"')).then_some(k - i)
}

/// Where a path resolution stands: `Some(d)` is a module `d` levels below
/// the crate root; `None` is past anything this test cares about.
type Depth = Option<usize>;

/// Reads one path or use tree starting at `toks[*pos]` (a `crate`, `super`
/// or `self` followed by `::`), from a module `depth` levels deep, and
/// pushes (top-level name, line) for each name reached at the crate root.
fn read_tree(toks: &[(Tok, usize)], pos: &mut usize, depth: Depth, out: &mut Vec<(String, usize)>) {
    let mut d = depth;
    loop {
        let Some((tok, line)) = toks.get(*pos) else {
            return;
        };
        match tok {
            Tok::Punct('$') => {
                *pos += 1;
                continue;
            }
            Tok::Ident(name) if name == "crate" => d = Some(0),
            Tok::Ident(name) if name == "super" => d = d.and_then(|d| d.checked_sub(1)),
            Tok::Ident(name) if name == "self" => {}
            Tok::Ident(name) => match d {
                Some(0) => {
                    out.push((name.clone(), *line));
                    d = None;
                }
                Some(k) => d = Some(k + 1),
                None => {}
            },
            Tok::Punct('{') => {
                // a use group: comma-separated trees, each from here
                *pos += 1;
                loop {
                    match toks.get(*pos) {
                        None => return,
                        Some((Tok::Punct('}'), _)) => {
                            *pos += 1;
                            return;
                        }
                        Some((Tok::Punct(','), _)) => *pos += 1,
                        Some(_) => {
                            let before = *pos;
                            read_tree(toks, pos, d, out);
                            if *pos == before {
                                *pos += 1;
                            }
                        }
                    }
                }
            }
            _ => return,
        }
        *pos += 1;
        // `as alias`, `*`, the end of the path: anything but `::` ends it.
        match toks.get(*pos) {
            Some((Tok::PathSep, _)) => *pos += 1,
            Some((Tok::Ident(kw), _)) if kw == "as" => {
                *pos += 2;
                return;
            }
            _ => return,
        }
    }
}

/// The top-level names a file's code reaches at the crate root, with lines.
/// `file_depth` is how deep the file's module is (src/a.rs and
/// src/a/mod.rs: 1, src/a/b.rs: 2, ...).
fn crate_root_names(src: &str, file_depth: usize) -> Vec<(String, usize)> {
    let toks = tokenize(src);
    let mut out = Vec::new();
    // brace depths at which inline `mod m {` blocks opened
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut braces = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let prev_is_sep = i > 0 && toks[i - 1].0 == Tok::PathSep;
        let next_is_sep = toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep);
        match &toks[i].0 {
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some((Tok::Ident(_), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline_mods.push(braces);
                    braces += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Punct('{') => braces += 1,
            Tok::Punct('}') => {
                braces = braces.saturating_sub(1);
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
            }
            Tok::Ident(kw)
                if (kw == "crate" || kw == "super" || kw == "self")
                    && next_is_sep
                    && !prev_is_sep =>
            {
                let mut pos = i;
                read_tree(
                    &toks,
                    &mut pos,
                    Some(file_depth + inline_mods.len()),
                    &mut out,
                );
                i = pos.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module depth of a file under src/.
fn file_depth(rel: &Path) -> usize {
    let parts = rel.components().count();
    if rel.file_name().is_some_and(|f| f == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// One edge's evidence: file and line of each place naming the target.
type Edges = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// module -> (named module -> places), over every top-level module of src/.
fn module_graph(src: &Path) -> (BTreeSet<String>, Edges) {
    let mut modules = BTreeSet::new();
    for e in fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir()
            || (p.extension().is_some_and(|e| e == "rs") && stem != "lib" && stem != "main")
        {
            modules.insert(stem);
        }
    }
    // every module lib.rs declares, and nothing else, so a file this test
    // does not see cannot hide an edge
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let toks = tokenize(&lib);
    let declared: BTreeSet<String> = toks
        .windows(3)
        .filter_map(|w| match (&w[0].0, &w[1].0, &w[2].0) {
            (Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')) if m == "mod" => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        declared, modules,
        "src/lib.rs declares other modules than src/ holds"
    );

    let mut edges: Edges = BTreeMap::new();
    for m in &modules {
        let mut files = Vec::new();
        let single = src.join(format!("{m}.rs"));
        if single.is_file() {
            files.push(single);
        }
        if src.join(m).is_dir() {
            rust_files(&src.join(m), &mut files);
        }
        let from = edges.entry(m.clone()).or_default();
        for f in files {
            let rel = f.strip_prefix(src).unwrap().to_path_buf();
            let text = fs::read_to_string(&f).unwrap();
            for (name, line) in crate_root_names(&text, file_depth(&rel)) {
                if &name != m && modules.contains(&name) {
                    from.entry(name)
                        .or_default()
                        .push(format!("src/{}:{line}", rel.display()));
                }
            }
        }
    }
    (modules, edges)
}

/// Tarjan's strongly connected components, each sorted.
fn components(modules: &BTreeSet<String>, edges: &Edges) -> Vec<Vec<String>> {
    struct St<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut St<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let l = s.low[w].min(s.low[v]);
                s.low.insert(v, l);
            } else if s.on.contains(w) {
                let l = s.index[w].min(s.low[v]);
                s.low.insert(v, l);
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            c.sort();
            s.out.push(c);
        }
    }
    let mut s = St {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for m in modules {
        if !s.index.contains_key(m.as_str()) {
            visit(&mut s, m);
        }
    }
    s.out
}

/// A shortest cycle through `start` inside `comp` (breadth first).
fn cycle_through(start: &str, comp: &[String], edges: &Edges) -> Vec<String> {
    let inside: BTreeSet<&str> = comp.iter().map(String::as_str).collect();
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in edges.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !inside.contains(w) {
                continue;
            }
            if w == start {
                let mut path = vec![v.to_string()];
                let mut at = v;
                while at != start {
                    at = prev[at];
                    path.push(at.to_string());
                }
                path.reverse();
                path.push(start.to_string());
                return path;
            }
            if !prev.contains_key(w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("{start} is in a component of {} modules", comp.len())
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (modules, edges) = module_graph(&src);
    let comps = components(&modules, &edges);
    let mut report = String::new();
    for comp in comps.iter().filter(|c| c.len() > 1) {
        let cycle = cycle_through(&comp[0], comp, &edges);
        report += &format!(
            "\nthese {} modules import each other in a cycle: {}\n  e.g. {}\n  edges inside it:\n",
            comp.len(),
            comp.join(", "),
            cycle.join(" -> ")
        );
        for a in comp {
            for (b, places) in &edges[a] {
                if comp.contains(b) {
                    let shown: Vec<_> = places.iter().take(4).cloned().collect();
                    let more = places.len().saturating_sub(shown.len());
                    report += &format!("    {a} -> {b}: {}", shown.join(", "));
                    if more > 0 {
                        report += &format!(" (+{more} more)");
                    }
                    report += "\n";
                }
            }
        }
    }
    // Tarjan emits components dependencies first: a bottom-up order.
    println!("modules, bottom up (a component in [..]):");
    for comp in &comps {
        for m in comp {
            let deps: Vec<_> = edges[m].keys().cloned().collect();
            let shown = if comp.len() > 1 {
                format!("[{m}]")
            } else {
                m.clone()
            };
            println!("  {shown} -> {}", deps.join(", "));
        }
    }
    assert!(
        report.is_empty(),
        "top-level modules of src/ must form layers (no import cycle):{report}\n\
         Move the item that makes the back-edge down to the lower module, or pass it in."
    );
}

#[test]
fn the_reader_sees_every_form_of_naming_a_module() {
    let names = |src: &str, depth: usize| -> Vec<String> {
        crate_root_names(src, depth)
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    assert_eq!(names("use crate::a::B;", 1), ["a"]);
    assert_eq!(
        names("fn f() { crate::a::g(); $crate::h::i!() }", 1),
        ["a", "h"]
    );
    assert_eq!(
        names("use crate::{a, b::C, d::{e, f::G}, self as _};", 2),
        ["a", "b", "d"]
    );
    assert_eq!(names("use crate::{\n  a::{self},\n  b,\n};", 1), ["a", "b"]);
    // src/x.rs or src/x/mod.rs: super is the root
    assert_eq!(names("use super::y::Z;", 1), ["y"]);
    // src/x/m.rs: super is x, super::super the root
    assert_eq!(names("use super::Z; use super::super::y;", 2), ["y"]);
    assert_eq!(names("use super::{super::y, Z};", 2), ["y"]);
    // an inline module is one level deeper
    assert_eq!(
        names(
            "mod tests { use super::super::a; fn f() {} } use super::b;",
            1
        ),
        ["a", "b"]
    );
    assert_eq!(
        names("mod tests { use super::super::a; } use super::super::b;", 2),
        ["b"]
    );
    assert_eq!(
        names(
            "mod t { mod u { use super::super::super::a; } } use super::b::{c};",
            1
        ),
        ["a", "b"]
    );
    // not code
    assert!(names("// crate::a\n/// [crate::b]\n/* crate::c /* */ */", 1).is_empty());
    assert!(names(r###"let s = "crate::a"; let r = r#"crate::b "x""#;"###, 1).is_empty());
    assert_eq!(names("let c = '\"'; let l: &'a u8; crate::d::e", 1), ["d"]);
    // pub(crate) and struct literals are not paths into other modules
    assert_eq!(
        names(
            "pub(crate) fn f() -> crate::a::S { crate::a::S { x: 1 } }",
            1
        ),
        ["a", "a"]
    );
}
