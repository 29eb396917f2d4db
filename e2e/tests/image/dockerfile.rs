//! deploy/image/Dockerfile read on its own (not through scripts/image.py, which assembles the
//! offline images from it): its stages, and what a final stage declares, its ARGs at their
//! defaults, which are what a `docker build` without `--build-arg` gives.

use std::collections::BTreeMap;

/// One stage: `FROM <base> AS <name>` and its instructions as (INSTRUCTION, rest).
#[derive(Debug, Clone)]
pub struct Stage {
    pub name: String,
    pub base: String,
    pub instructions: Vec<(String, String)>,
}

/// What a final stage and the stages it is built on declare.
#[derive(Debug, Default, PartialEq)]
pub struct Declared {
    pub user: String,
    pub entrypoint: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// (source in the build stage, path in the image)
    pub copies: Vec<(String, String)>,
    /// Every ARG of the chain at its default.
    pub args: BTreeMap<String, String>,
}

/// The instructions, comments dropped and continued lines joined.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = vec![];
    let mut buf = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || (buf.is_empty() && line.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                buf.push_str(head);
                buf.push(' ');
            }
            None => {
                buf.push_str(line);
                let (word, rest) = buf.split_once(' ').unwrap_or((&buf, ""));
                out.push((word.to_uppercase(), rest.trim().to_string()));
                buf.clear();
            }
        }
    }
    out
}

/// Every stage by name.
pub fn stages(text: &str) -> BTreeMap<String, Stage> {
    let mut found = BTreeMap::new();
    let mut current: Option<Stage> = None;
    for (word, rest) in instructions(text) {
        if word == "FROM" {
            if let Some(stage) = current.take() {
                found.insert(stage.name.clone(), stage);
            }
            let words: Vec<&str> = rest.split_whitespace().collect();
            let [base, as_, name] = words.as_slice() else {
                panic!("FROM {rest}: not `FROM <base> AS <name>`");
            };
            assert!(as_.eq_ignore_ascii_case("as"), "FROM {rest}");
            current = Some(Stage {
                name: name.to_lowercase(),
                base: base.to_string(),
                instructions: vec![],
            });
        } else if let Some(stage) = current.as_mut() {
            stage.instructions.push((word, rest));
        }
    }
    if let Some(stage) = current {
        found.insert(stage.name.clone(), stage);
    }
    found
}

/// Words split at blanks outside double quotes, the quotes removed.
fn words(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

fn expand(text: &str, args: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (k, v) in args {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    assert!(
        !out.contains('$'),
        "{text}: a variable that is no ARG of its stage"
    );
    out
}

/// What the stage `target` makes, its ARGs at their defaults.
pub fn declared(all: &BTreeMap<String, Stage>, target: &str) -> Declared {
    declared_with(all, target, &BTreeMap::new())
}

/// What the stage `target` makes with `build_args` over its ARGs' defaults (`--build-arg`).
pub fn declared_with(
    all: &BTreeMap<String, Stage>,
    target: &str,
    build_args: &BTreeMap<String, String>,
) -> Declared {
    let mut chain = vec![];
    let mut name = target.to_string();
    while name != "scratch" {
        let stage = all
            .get(&name)
            .unwrap_or_else(|| panic!("no stage {name} (from {target})"));
        chain.push(stage);
        name = stage.base.to_lowercase();
    }
    let mut d = Declared::default();
    for stage in chain.into_iter().rev() {
        let mut args = BTreeMap::new();
        for (word, rest) in &stage.instructions {
            match word.as_str() {
                "ARG" => {
                    let (k, v) = rest.split_once('=').unwrap_or((rest, ""));
                    let v = build_args
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| words(v).into_iter().next().unwrap_or_default());
                    args.insert(k.to_string(), v.clone());
                    d.args.insert(k.to_string(), v);
                }
                "LABEL" => {
                    for w in words(rest) {
                        let (k, v) = w
                            .split_once('=')
                            .unwrap_or_else(|| panic!("LABEL {w}: not key=value"));
                        d.labels.insert(k.to_string(), expand(v, &args));
                    }
                }
                "USER" => d.user = expand(rest, &args),
                "ENTRYPOINT" => {
                    d.entrypoint = serde_json::from_str(rest)
                        .unwrap_or_else(|e| panic!("ENTRYPOINT {rest}: not the exec form: {e}"))
                }
                "COPY" => {
                    let w = words(rest);
                    let paths: Vec<&String> = w.iter().filter(|w| !w.starts_with("--")).collect();
                    let [src, dest] = paths.as_slice() else {
                        panic!("COPY {rest}: one source and one target");
                    };
                    d.copies.push((expand(src, &args), expand(dest, &args)));
                }
                other => panic!("{other} in the final stage chain of {target}"),
            }
        }
    }
    d
}

#[test]
fn words_keep_quoted_blanks_and_empty_values() {
    assert_eq!(
        words(r#"a="b c" d= e="""#),
        ["a=b c", "d=", "e="].map(String::from)
    );
}
