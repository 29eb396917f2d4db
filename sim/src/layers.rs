//! The sim's layers (drawn in `sim/README.md`) and the rule between them: a module may use its own
//! layer and the layers below it, never one above. The table here is the README's drawing as data;
//! the test reads every production source file of the crate and fails naming each `crate::` path
//! that climbs a layer, or a top-level module the table does not place.
//!
//! A source scan, not the compiler's view: comments are left out, and a `#[cfg(test)]` module
//! below its file's production code is left out too (tests may reach up to build their fixtures).

/// The layers, lowest first. A module of layer N may use layers 0..=N.
pub(crate) const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundations",
        &[
            "checkout",
            "ports",
            "wait",
            "duration",
            "timings",
            "install",
            "nats_conf",
            "trust",
            "ledger",
        ],
    ),
    (
        "the NATS rig",
        &[
            "server",
            "proxy",
            "topology",
            "monitored",
            "backend",
            "traffic",
        ],
    ),
    (
        "the Kubernetes harnesses",
        &[
            "apiserver",
            "ensure",
            "local",
            "control_plane",
            "controlled",
            "elected",
            "node",
            "k3s",
            "kube_backend",
            "k3s_outside",
            "k3s_cluster",
            "testkit",
        ],
    ),
    ("the scenario engine and its report", &["scenario"]),
    ("the playground", &["up"]),
];

/// The layer of a top-level module, by its index in [`LAYERS`].
pub(crate) fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// The top-level modules a source text names through `crate::<module>` or `crate::{<module>, ..}`,
/// comments and a trailing `#[cfg(test)]` module left out.
pub(crate) fn uses(source: &str) -> Vec<String> {
    let production = match source.find("#[cfg(test)]\nmod ") {
        Some(at) => &source[..at],
        None => source,
    };
    let mut found = Vec::new();
    for line in production.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    push_ident(&mut found, item.trim());
                }
            } else {
                push_ident(&mut found, rest);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

fn push_ident(found: &mut Vec<String>, text: &str) {
    let ident: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if !ident.is_empty() && ident.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        found.push(ident);
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("use crate::wait::poll;", &["wait"])]
    #[case("use crate::{ports, wait::poll};", &["ports", "wait"])]
    #[case("//! see [`crate::local`]", &[])]
    #[case("let x = 1; // crate::control_plane is not used", &[])]
    #[case("crate::Topology::new()", &[])]
    #[case("use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}", &["a"])]
    fn uses_reads_crate_paths(#[case] source: &str, #[case] want: &[&str]) {
        assert_eq!(uses(source), want);
    }

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The top-level module a file of `src/` belongs to (`None` for lib.rs and the binaries).
    fn module_of(src: &Path, file: &Path) -> Option<String> {
        let first = file.strip_prefix(src).ok()?.components().next()?;
        let name = first
            .as_os_str()
            .to_str()?
            .trim_end_matches(".rs")
            .to_string();
        (name != "lib" && name != "bin").then_some(name)
    }

    #[test]
    fn no_module_uses_a_layer_above_its_own() {
        let src = crate::checkout::path("sim/src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let mut climbs = Vec::new();
        let mut unplaced = Vec::new();
        for file in &files {
            let Some(module) = module_of(&src, file) else {
                continue;
            };
            let Some(own) = layer_of(&module) else {
                if module != "layers" {
                    unplaced.push(module);
                }
                continue;
            };
            let text =
                std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for used in uses(&text) {
                match layer_of(&used) {
                    Some(layer) if layer > own => climbs.push(format!(
                        "{} ({}) uses crate::{used} ({})",
                        file.strip_prefix(&src).unwrap_or(file).display(),
                        LAYERS[own].0,
                        LAYERS[layer].0
                    )),
                    Some(_) => {}
                    None if used == "layers" || used == module => {}
                    None => unplaced.push(used),
                }
            }
        }
        unplaced.sort();
        unplaced.dedup();
        assert!(
            unplaced.is_empty(),
            "modules sim/src/layers.rs does not place: {unplaced:?}"
        );
        assert!(
            climbs.is_empty(),
            "a module uses a layer above its own:\n{}",
            climbs.join("\n")
        );
    }
}
