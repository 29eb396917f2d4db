//! No import cycles between production modules, in the controllers and in the rig alike.
//!
//! Every workspace member's `src/` is read: the library, the main binary and each `src/bin/*.rs`,
//! each a crate of its own. A node is a file's module (`foo.rs` or `foo/mod.rs`; an inline `mod x {}`
//! belongs to its file). An edge `a -> b` is a path in `a`'s production code that names an item of
//! `b`'s file: a `use` (its tree flattened) or any `crate::`, `super::`, `self::` path in the code. An
//! edge between a module and one of its own descendants is left out: a parent declares and re-exports
//! its children and a child uses its parent's items; they are one room, not a cycle. Test code is left
//! out: items under `#[cfg(test)]` (and the files such a `mod` declares), `tests/`, `benches/`.
//!
//! A cycle is a strongly connected set of two or more modules. The failure names each one, a cycle
//! through it (`a -> b -> a`) and every edge inside it with the line that makes it: break it by moving
//! the shared thing down a layer, into a module both may use.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rstest::rstest;

/// The tokens that matter here: identifiers and keywords, `::`, and single punctuation characters.
/// Comments, string, byte-string, raw-string and char literals and lifetimes are dropped.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path,
    Punct(char),
}

/// A token and its line (1-based).
type Token = (Tok, usize);

fn lex(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
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
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if (ch == 'r' || (ch == 'b' && at(i + 1) == 'r'))
            && matches!(at(i + 1 + usize::from(ch == 'b')), '"' | '#')
            && {
                let mut k = i + 1 + usize::from(ch == 'b');
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            let mut k = i + 1 + usize::from(ch == 'b');
            let mut hashes = 0;
            while c[k] == '#' {
                hashes += 1;
                k += 1;
            }
            k += 1;
            while k < c.len() && !(c[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#')) {
                line += usize::from(c[k] == '\n');
                k += 1;
            }
            i = k + 1 + hashes;
        } else if ch == '"' || (ch == 'b' && at(i + 1) == '"') {
            let mut k = i + 1 + usize::from(ch == 'b');
            while k < c.len() && c[k] != '"' {
                line += usize::from(c[k] == '\n');
                k += if c[k] == '\\' { 2 } else { 1 };
            }
            i = k + 1;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let k = i + 1 + usize::from(ch == 'b');
            if at(k) == '\\' {
                let mut e = k + 2;
                while e < c.len() && c[e] != '\'' {
                    e += 1;
                }
                i = e + 1;
            } else if at(k + 1) == '\'' {
                i = k + 2;
            } else {
                // A lifetime or a label: its name is not a path.
                i = k;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

fn is_ident(t: Option<&Token>, name: &str) -> bool {
    matches!(t, Some((Tok::Ident(s), _)) if s == name)
}

fn is_punct(t: Option<&Token>, p: char) -> bool {
    matches!(t, Some((Tok::Punct(c), _)) if *c == p)
}

/// The index just past the bracketed group opening at `open` (`(`, `[` or `{`).
fn past_group(toks: &[Token], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, (t, _)) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The index just past the item starting at `i`: its `;` at depth 0, or the `}` that closes it.
fn past_item(toks: &[Token], mut i: usize) -> usize {
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Punct(';') => return i + 1,
            Tok::Punct('{') => return past_group(toks, i),
            Tok::Punct('(' | '[') => i = past_group(toks, i),
            _ => i += 1,
        }
    }
    i
}

/// Whether the attribute's tokens (inside `#[…]`) are a `cfg` that holds only under test.
fn cfg_test(attr: &[Token]) -> bool {
    is_ident(attr.first(), "cfg")
        && attr
            .iter()
            .any(|t| matches!(&t.0, Tok::Ident(s) if s == "test"))
        && !attr
            .iter()
            .any(|t| matches!(&t.0, Tok::Ident(s) if s == "not"))
}

/// One `use` tree flattened into its paths, from `i` (after `use`) to its `;`.
fn use_paths(toks: &[Token], i: usize) -> (Vec<(Vec<String>, usize)>, usize) {
    fn tree(
        toks: &[Token],
        mut i: usize,
        prefix: &[String],
        out: &mut Vec<(Vec<String>, usize)>,
    ) -> usize {
        let mut path = prefix.to_vec();
        loop {
            match toks.get(i) {
                Some((Tok::Ident(s), line)) if s != "as" => {
                    // `a::{self, b}`: `self` is `a` itself.
                    if s != "self" || path.is_empty() {
                        path.push(s.clone());
                    }
                    i += 1;
                    if toks.get(i).map(|t| &t.0) == Some(&Tok::Path) {
                        i += 1;
                        continue;
                    }
                    out.push((path, *line));
                    if is_ident(toks.get(i), "as") {
                        i += 2;
                    }
                    return i;
                }
                Some((Tok::Punct('{'), _)) => {
                    i += 1;
                    while !is_punct(toks.get(i), '}') && i < toks.len() {
                        i = tree(toks, i, &path, out);
                        if is_punct(toks.get(i), ',') {
                            i += 1;
                        }
                    }
                    return i + 1;
                }
                Some((Tok::Punct('*'), line)) => {
                    out.push((path, *line));
                    return i + 1;
                }
                Some((Tok::Path, _)) => i += 1,
                _ => return i,
            }
        }
    }
    let mut out = Vec::new();
    let end = tree(toks, i, &[], &mut out);
    (out, end)
}

/// A module path named in a file, resolved against the module it is written in; `None` when it
/// does not start in this crate (`crate::`, `super::`, `self::`).
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "self" | "super" => module.to_vec(),
        _ => return None,
    };
    let mut rest = &path[usize::from(path[0] == "crate" || path[0] == "self")..];
    while rest.first().map(String::as_str) == Some("super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// What one file's production code declares and names.
#[derive(Debug, Default, PartialEq)]
struct FileRefs {
    /// `mod x;` declarations: the module's path (inline modules included).
    children: Vec<Vec<String>>,
    /// Inline `mod x { … }` blocks: their module paths, which belong to this file.
    inline: Vec<Vec<String>>,
    /// Absolute module paths this file names, with a line that names each.
    names: Vec<(Vec<String>, usize)>,
}

fn scan(src: &str, module: &[String]) -> FileRefs {
    let toks = lex(src);
    let mut refs = FileRefs::default();
    // Inline modules open at a brace depth: (depth of their `{`, module path).
    let mut stack: Vec<(i32, Vec<String>)> = vec![(0, module.to_vec())];
    let (mut depth, mut i) = (0i32, 0);
    while i < toks.len() {
        let here = stack.last().map(|s| s.1.clone()).unwrap_or_default();
        match &toks[i].0 {
            Tok::Punct('#') => {
                let inner = is_punct(toks.get(i + 1), '!');
                let open = i + 1 + usize::from(inner);
                if !is_punct(toks.get(open), '[') {
                    i += 1;
                    continue;
                }
                let end = past_group(&toks, open);
                if cfg_test(&toks[open + 1..end - 1]) {
                    if inner {
                        return FileRefs::default();
                    }
                    let mut item = end;
                    while is_punct(toks.get(item), '#') {
                        item = past_group(&toks, item + 1);
                    }
                    i = past_item(&toks, item);
                } else {
                    i = end;
                }
            }
            Tok::Punct('$') => i += 2,
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if stack.len() > 1 && stack.last().map(|s| s.0) == Some(depth) {
                    stack.pop();
                }
                depth -= 1;
                i += 1;
            }
            Tok::Ident(kw) if kw == "mod" => match (toks.get(i + 1), toks.get(i + 2)) {
                (Some((Tok::Ident(name), _)), Some((Tok::Punct(p @ (';' | '{')), _))) => {
                    let mut path = here.clone();
                    path.push(name.clone());
                    if *p == ';' {
                        refs.children.push(path);
                    } else {
                        depth += 1;
                        refs.inline.push(path.clone());
                        stack.push((depth, path));
                    }
                    i += 3;
                }
                _ => i += 1,
            },
            Tok::Ident(kw) if kw == "use" => {
                let (paths, end) = use_paths(&toks, i + 1);
                for (path, line) in paths {
                    if let Some(abs) = resolve(&here, &path) {
                        refs.names.push((abs, line));
                    }
                }
                i = end;
            }
            Tok::Ident(kw)
                if kw == "in" && is_punct(i.checked_sub(1).and_then(|k| toks.get(k)), '(') =>
            {
                // `pub(in crate::a)` names a visibility, not an item.
                while i < toks.len() && !is_punct(toks.get(i), ')') {
                    i += 1;
                }
            }
            Tok::Ident(first) if matches!(first.as_str(), "crate" | "super" | "self") => {
                let line = toks[i].1;
                let mut path = vec![first.clone()];
                let mut k = i + 1;
                while toks.get(k).map(|t| &t.0) == Some(&Tok::Path) {
                    match toks.get(k + 1) {
                        Some((Tok::Ident(s), _)) => path.push(s.clone()),
                        _ => break,
                    }
                    k += 2;
                }
                if path.len() > 1
                    && let Some(abs) = resolve(&here, &path)
                {
                    refs.names.push((abs, line));
                }
                i = k;
            }
            _ => i += 1,
        }
    }
    refs
}

/// A module's path in its crate (`["controller", "index"]`; the root is empty).
type Module = Vec<String>;

/// Where an edge was seen: the file, the line and the path it names.
type Evidence = (PathBuf, usize, String);

/// The file-level module graph of one crate: node names, and edges with their evidence.
struct Graph {
    nodes: BTreeMap<Module, PathBuf>,
    edges: BTreeMap<(Module, Module), Evidence>,
}

/// The file a child module lives in: `dir/x.rs` or `dir/x/mod.rs`, where `dir` is the declaring
/// file's folder for a crate root or `mod.rs`, else its own folder named after it.
fn child_file(parent_file: &Path, parent_module: &[String], child: &[String]) -> Option<PathBuf> {
    let name = parent_file.file_stem()?.to_str()?;
    let dir = parent_file.parent()?;
    let mut base = if parent_module.is_empty() || name == "mod" || name == "lib" || name == "main" {
        dir.to_path_buf()
    } else {
        dir.join(name)
    };
    for inline in &child[parent_module.len()..child.len() - 1] {
        base = base.join(inline);
    }
    let last = child.last()?;
    [
        base.join(format!("{last}.rs")),
        base.join(last).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

fn graph(root: &Path) -> Graph {
    let mut g = Graph {
        nodes: BTreeMap::new(),
        edges: BTreeMap::new(),
    };
    let mut owner: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    let mut names = Vec::new();
    let mut todo = vec![(Vec::new(), root.to_path_buf())];
    while let Some((module, file)) = todo.pop() {
        let src =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let refs = scan(&src, &module);
        owner.insert(module.clone(), module.clone());
        for inline in &refs.inline {
            owner.insert(inline.clone(), module.clone());
        }
        for child in refs.children {
            let found = child_file(&file, &module, &child).unwrap_or_else(|| {
                panic!("{}: no file for `mod {}`", file.display(), child.join("::"))
            });
            todo.push((child, found));
        }
        names.push((module.clone(), file.clone(), refs.names));
        g.nodes.insert(module, file);
    }
    for (from, file, named) in names {
        for (abs, line) in named {
            // The longest prefix that is a module names the file that holds the item.
            let Some(to) = (0..=abs.len()).rev().find_map(|n| owner.get(&abs[..n])) else {
                continue;
            };
            if to.starts_with(&from) || from.starts_with(to) {
                continue;
            }
            g.edges
                .entry((from.clone(), to.clone()))
                .or_insert_with(|| (file.clone(), line, abs.join("::")));
        }
    }
    g
}

/// The strongly connected sets of two or more nodes (Tarjan), each sorted.
fn cycles(
    nodes: &BTreeSet<Vec<String>>,
    edges: &BTreeSet<(Vec<String>, Vec<String>)>,
) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        adj: BTreeMap<&'a Vec<String>, Vec<&'a Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.adj.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                set.push(w.clone());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                s.out.push(set);
            }
        }
    }
    let mut s = State {
        adj: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for (a, b) in edges {
        s.adj.entry(a).or_default().push(b);
    }
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// A shortest cycle through `start` inside `set`, as `a -> b -> a`.
fn one_cycle(
    start: &Vec<String>,
    set: &[Vec<String>],
    edges: &BTreeSet<(Vec<String>, Vec<String>)>,
) -> String {
    let mut prev: BTreeMap<&Vec<String>, &Vec<String>> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for (a, b) in edges.iter().filter(|(a, b)| a == v && set.contains(b)) {
            if b == start {
                let mut path = vec![start.join("::")];
                let mut at = a;
                while at != start {
                    path.push(at.join("::"));
                    at = prev[at];
                }
                path.push(start.join("::"));
                path.reverse();
                return path.join(" -> ");
            }
            if !prev.contains_key(b) {
                prev.insert(b, a);
                queue.push_back(b);
            }
        }
    }
    String::new()
}

/// Every crate root of the workspace: each member's lib, main and `src/bin/*.rs`.
fn crate_roots(workspace: &Path) -> Vec<(String, PathBuf)> {
    let manifest =
        std::fs::read_to_string(workspace.join("Cargo.toml")).expect("the workspace manifest");
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap_or_default();
    let mut roots = Vec::new();
    for member in members.split('"').skip(1).step_by(2) {
        let src = workspace.join(member).join("src");
        for (label, file) in [("lib", src.join("lib.rs")), ("main", src.join("main.rs"))] {
            if file.is_file() {
                roots.push((format!("{member} ({label})"), file));
            }
        }
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            let mut bins: Vec<PathBuf> = bins.filter_map(|e| e.ok().map(|e| e.path())).collect();
            bins.sort();
            for bin in bins
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            {
                let name = bin
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_string();
                roots.push((format!("{member} (bin {name})"), bin));
            }
        }
    }
    roots
}

/// Every cycle of every crate, one paragraph each.
fn report(workspace: &Path) -> (Vec<String>, usize) {
    let mut found = Vec::new();
    let mut modules = 0;
    for (name, root) in crate_roots(workspace) {
        let g = graph(&root);
        modules += g.nodes.len();
        let nodes: BTreeSet<_> = g.nodes.keys().cloned().collect();
        let edges: BTreeSet<_> = g.edges.keys().cloned().collect();
        for set in cycles(&nodes, &edges) {
            let mut text = format!("{name}: {}", one_cycle(&set[0], &set, &edges));
            for ((a, b), (file, line, path)) in &g.edges {
                if set.contains(a) && set.contains(b) {
                    let file = file.strip_prefix(workspace).unwrap_or(file);
                    text.push_str(&format!(
                        "\n    {} -> {}: {}:{line} names {path}",
                        a.join("::"),
                        b.join("::"),
                        file.display()
                    ));
                }
            }
            found.push(text);
        }
    }
    (found, modules)
}

#[test]
fn production_modules_import_no_cycle() {
    let workspace = sim::checkout::root();
    let workspace = workspace.canonicalize().expect("the workspace directory");
    let (found, modules) = report(&workspace);
    assert!(
        modules > 100,
        "only {modules} modules read: the walk lost its way"
    );
    assert!(
        found.is_empty(),
        "{} import cycle(s) between production modules:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[rstest]
#[case::grouped_use("use crate::{a::{self, b, c::D}, e as f};", &[], &["a", "a::b", "a::c::D", "e"])]
#[case::super_from_a_child("use super::x::Y;", &["p", "q"], &["p::x::Y"])]
#[case::inline_path("fn f() { crate::a::go(); self::b::go() }", &["m"], &["a::go", "m::b::go"])]
#[case::test_code_left_out("#[cfg(test)]\nmod tests { use crate::a; }\n#[cfg(test)]\nuse crate::b;", &[], &[])]
#[case::strings_and_comments_left_out("// crate::a\nconst S: &str = \"crate::b\"; /* crate::c */", &[], &[])]
#[case::extern_paths_left_out("use std::fmt; use sim::wait;", &[], &[])]
#[case::macro_crate_left_out("macro_rules! m { () => { $crate::a::b() } }", &[], &[])]
#[case::inline_module_super("mod inner { use super::z; }", &["m"], &["m::z"])]
fn a_file_names(#[case] src: &str, #[case] module: &[&str], #[case] want: &[&str]) {
    let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
    let got: Vec<String> = scan(src, &module)
        .names
        .into_iter()
        .map(|(p, _)| p.join("::"))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_cycle_between_two_files_is_named_and_a_parent_with_its_child_is_not() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).expect("src/a");
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        (
            "a.rs",
            "mod child;\npub use child::X;\npub fn f() { crate::b::g() }\n",
        ),
        ("a/child.rs", "pub struct X;\nuse super::f;\n"),
        ("b.rs", "use crate::a::X;\npub fn g() {}\n"),
        ("c.rs", "use crate::a::X;\n"),
    ];
    for (path, text) in files {
        std::fs::write(src.join(path), text).expect("a source file");
    }
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[workspace]\nmembers = [\n    \".\",\n]\n",
    )
    .expect("the manifest");
    let (found, modules) = report(dir.path());
    assert_eq!(modules, 5);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(". (lib): a -> b -> a\n"),
        "{}",
        found[0]
    );
    assert!(
        found[0].contains("a -> b: src/a.rs:3 names b::g"),
        "{}",
        found[0]
    );
}
