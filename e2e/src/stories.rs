//! The user stories under `docs/stories/` as data.
//!
//! The stories' manifests are the source of truth of the API (design §3): tests decode them into the
//! `nats-api` types, apply them to a real apiserver, and write their status examples through the status
//! subresource. This module only finds and parses them; it knows nothing of the types.
//!
//! Layout of one story, `docs/stories/NN-name/`:
//!
//! * `README.md` — the user's journey.
//! * `NN-*.yaml` — the manifests, applied in file-name order; a file may hold several YAML documents, applied
//!   in order. `NN` is the step of the journey the file belongs to.
//! * `status/NN-*.yaml` — status examples, one object per file: `apiVersion`, `kind`, `metadata` naming the
//!   object (a manifest of the same story declares it) and the `status` a controller writes at step `NN`.
//!
//! ```no_run
//! let stories = e2e::stories::load().expect("docs/stories parses");
//! for doc in stories.iter().flat_map(|s| &s.manifests) {
//!     println!("{doc}: {}/{} {}", doc.object.api_version, doc.object.kind, doc.object.name);
//! }
//! for example in stories.iter().flat_map(|s| &s.status_examples) {
//!     let _merge_patch = example.status_patch(); // {"status": …}, for the status subresource
//! }
//! ```

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// Suffix shared by the four API groups of this project (`nats.mikluko.io`, `cluster.nats.mikluko.io`, ...).
pub const GROUP_SUFFIX: &str = "nats.mikluko.io";

/// The folder holding status examples inside a story.
pub const STATUS_DIR: &str = "status";

/// What went wrong reading the stories, and where.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing YAML document {index} of {path}: {source}")]
    Yaml {
        path: PathBuf,
        index: usize,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("document {index} of {path}: {problem}")]
    Shape {
        path: PathBuf,
        index: usize,
        problem: String,
    },
    #[error("{path}: a status example holds exactly one document, found {found}")]
    StatusDocuments { path: PathBuf, found: usize },
    #[error("{path}: file name must start with a two-digit step number and a dash (NN-*.yaml)")]
    FileName { path: PathBuf },
}

/// `docs/stories/` of this workspace, found at run time (`sim::checkout`).
pub fn stories_dir() -> PathBuf {
    sim::checkout::root().join("docs").join("stories")
}

/// Every story under [`stories_dir`], ordered by folder name.
pub fn load() -> Result<Vec<Story>, LoadError> {
    load_from(&stories_dir())
}

/// Every story under `dir`, ordered by folder name. A story is any sub-folder.
pub fn load_from(dir: &Path) -> Result<Vec<Story>, LoadError> {
    let mut stories = Vec::new();
    for entry in sorted_entries(dir)? {
        if entry.is_dir() {
            stories.push(Story::load(&entry)?);
        }
    }
    Ok(stories)
}

/// One story folder.
#[derive(Debug, Clone)]
pub struct Story {
    /// Folder name, e.g. `01-quickstart`.
    pub name: String,
    /// Absolute path of the folder.
    pub dir: PathBuf,
    /// `README.md`, when present.
    pub readme: Option<PathBuf>,
    /// Every manifest document, in apply order (file name, then position in the file).
    pub manifests: Vec<Document>,
    /// Every status example, ordered by file name.
    pub status_examples: Vec<StatusExample>,
}

impl Story {
    /// Reads one story folder.
    pub fn load(dir: &Path) -> Result<Story, LoadError> {
        let name = file_name(dir);
        let readme = Some(dir.join("README.md")).filter(|p| p.is_file());
        let mut manifests = Vec::new();
        for path in sorted_entries(dir)? {
            if path.is_file() && is_yaml(&path) {
                let step = step_of(&path)?;
                for (index, object) in parse_objects(&path)?.into_iter().enumerate() {
                    manifests.push(Document {
                        story: name.clone(),
                        file: file_name(&path),
                        path: path.clone(),
                        step,
                        index,
                        object,
                    });
                }
            }
        }
        let mut status_examples = Vec::new();
        let status_dir = dir.join(STATUS_DIR);
        if status_dir.is_dir() {
            for path in sorted_entries(&status_dir)? {
                if path.is_file() && is_yaml(&path) {
                    let step = step_of(&path)?;
                    let mut objects = parse_objects(&path)?;
                    if objects.len() != 1 {
                        return Err(LoadError::StatusDocuments {
                            path,
                            found: objects.len(),
                        });
                    }
                    let object = objects.remove(0);
                    if !object.value.get("status").is_some_and(Value::is_object) {
                        return Err(LoadError::Shape {
                            path,
                            index: 0,
                            problem: "a status example needs a `status` mapping".into(),
                        });
                    }
                    status_examples.push(StatusExample {
                        story: name.clone(),
                        file: format!("{STATUS_DIR}/{}", file_name(&path)),
                        path,
                        step,
                        object,
                    });
                }
            }
        }
        Ok(Story {
            name,
            dir: dir.to_path_buf(),
            readme,
            manifests,
            status_examples,
        })
    }

    /// The manifest documents declaring the object a status example describes (same apiVersion, kind,
    /// name and namespace), in apply order.
    pub fn manifests_of<'a>(
        &'a self,
        example: &'a StatusExample,
    ) -> impl Iterator<Item = &'a Document> + 'a {
        self.manifests
            .iter()
            .filter(move |d| d.object.same_object(&example.object))
    }
}

/// One Kubernetes object as written in a story file.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// `apiVersion`, e.g. `cluster.nats.mikluko.io/v1beta1` or `v1`.
    pub api_version: String,
    /// `kind`, e.g. `NatsCluster`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, when set.
    pub namespace: Option<String>,
    /// The whole document as JSON.
    pub value: Value,
}

impl Object {
    /// API group; empty for the core group (`v1`).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// API version without the group, e.g. `v1beta1`.
    pub fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or(self.api_version.as_str(), |(_, version)| version)
    }

    /// Whether the kind belongs to one of this project's four API groups.
    pub fn is_custom(&self) -> bool {
        self.group() == GROUP_SUFFIX || self.group().ends_with(&format!(".{GROUP_SUFFIX}"))
    }

    /// Same apiVersion, kind, namespace and name.
    pub fn same_object(&self, other: &Object) -> bool {
        self.api_version == other.api_version
            && self.kind == other.kind
            && self.name == other.name
            && self.namespace == other.namespace
    }

    fn from_value(path: &Path, index: usize, value: Value) -> Result<Object, LoadError> {
        let shape = |problem: &str| LoadError::Shape {
            path: path.to_path_buf(),
            index,
            problem: problem.into(),
        };
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        if !value.is_object() {
            return Err(shape("not a mapping"));
        }
        let api_version = text(value.get("apiVersion")).ok_or_else(|| shape("no apiVersion"))?;
        let kind = text(value.get("kind")).ok_or_else(|| shape("no kind"))?;
        let metadata = value.get("metadata");
        let name =
            text(metadata.and_then(|m| m.get("name"))).ok_or_else(|| shape("no metadata.name"))?;
        let namespace = text(metadata.and_then(|m| m.get("namespace")));
        Ok(Object {
            api_version,
            kind,
            name,
            namespace,
            value,
        })
    }
}

/// One document of a manifest file.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Story folder name, e.g. `01-quickstart`.
    pub story: String,
    /// File name inside the story, e.g. `02-natscluster-demo-8gi.yaml`.
    pub file: String,
    /// Absolute path of the file.
    pub path: PathBuf,
    /// The step number the file name starts with.
    pub step: u32,
    /// Position among the file's non-empty documents, from 0.
    pub index: usize,
    /// The object.
    pub object: Object,
}

impl fmt::Display for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}#{} ({} {})",
            self.story, self.file, self.index, self.object.kind, self.object.name
        )
    }
}

/// One status example: the object it describes and the status a controller writes.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusExample {
    /// Story folder name.
    pub story: String,
    /// Path inside the story, e.g. `status/02-natscluster-demo-rolling.yaml`.
    pub file: String,
    /// Absolute path of the file.
    pub path: PathBuf,
    /// The step of the journey the example shows (the number its file name starts with).
    pub step: u32,
    /// The object as written: apiVersion, kind, metadata naming it, status.
    pub object: Object,
}

impl StatusExample {
    /// The `status` block.
    pub fn status(&self) -> &Value {
        &self.object.value["status"]
    }

    /// `{"status": …}`: a merge patch for the object's status subresource.
    pub fn status_patch(&self) -> Value {
        serde_json::json!({ "status": self.status() })
    }

    /// The condition of the given type, when the example has one.
    pub fn condition(&self, type_: &str) -> Option<&Value> {
        self.status()
            .get("conditions")?
            .as_array()?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
    }
}

impl fmt::Display for StatusExample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} ({} {})",
            self.story, self.file, self.object.kind, self.object.name
        )
    }
}

/// Parses every non-empty YAML document of a file into an [`Object`].
pub fn parse_objects(path: &Path) -> Result<Vec<Object>, LoadError> {
    let text = fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut objects = Vec::new();
    for (raw_index, document) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(document).map_err(|source| LoadError::Yaml {
            path: path.to_path_buf(),
            index: raw_index,
            source,
        })?;
        // A document of comments only (e.g. a header before the first `---`) is no object.
        if value.is_null() {
            continue;
        }
        objects.push(Object::from_value(path, objects.len(), value)?);
    }
    Ok(objects)
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let io = |source| LoadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        entries.push(entry.map_err(io)?.path());
    }
    entries.sort();
    Ok(entries)
}

fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn step_of(path: &Path) -> Result<u32, LoadError> {
    let name = file_name(path);
    let bad = || LoadError::FileName {
        path: path.to_path_buf(),
    };
    let (digits, _) = name.split_once('-').ok_or_else(bad)?;
    if digits.len() != 2 {
        return Err(bad());
    }
    digits.parse().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn loads_documents_in_order_and_skips_comment_only_documents() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write(dir, "01-a/README.md", "# a\n");
        write(
            dir,
            "01-a/02-second.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: late\n",
        );
        write(
            dir,
            "01-a/01-first.yaml",
            "# header only\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: one\n---\n\
             apiVersion: nats.mikluko.io/v1beta1\nkind: NatsConnection\nmetadata:\n  name: c\n  namespace: one\n\
             spec:\n  servers: [nats://x:4222]\n",
        );
        write(
            dir,
            "01-a/status/01-c.yaml",
            "apiVersion: nats.mikluko.io/v1beta1\nkind: NatsConnection\nmetadata:\n  name: c\n  namespace: one\n\
             status:\n  conditions:\n    - type: Ready\n      status: \"True\"\n",
        );
        let stories = load_from(dir).unwrap();
        assert_eq!(stories.len(), 1);
        let story = &stories[0];
        assert!(story.readme.is_some());
        let seen: Vec<_> = story
            .manifests
            .iter()
            .map(|d| (d.file.as_str(), d.index, d.object.name.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("01-first.yaml", 0, "one"),
                ("01-first.yaml", 1, "c"),
                ("02-second.yaml", 0, "late")
            ]
        );
        assert_eq!(story.manifests[1].object.group(), "nats.mikluko.io");
        assert!(story.manifests[1].object.is_custom());
        assert!(!story.manifests[0].object.is_custom());
        assert_eq!(story.manifests[0].object.group(), "");
        assert_eq!(story.manifests[0].object.version(), "v1");
        let example = &story.status_examples[0];
        assert_eq!(example.file, "status/01-c.yaml");
        assert_eq!(example.step, 1);
        assert_eq!(example.condition("Ready").unwrap()["status"], "True");
        assert_eq!(
            example.status_patch()["status"]["conditions"][0]["type"],
            "Ready"
        );
        assert_eq!(story.manifests_of(example).count(), 1);
    }

    #[test]
    fn refuses_a_document_without_a_name_and_a_status_file_with_two_objects() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bad");
        write(
            &dir,
            "01-a/01-x.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {}\n",
        );
        let err = load_from(&dir).unwrap_err();
        assert!(matches!(err, LoadError::Shape { index: 0, .. }), "{err}");

        let dir = tmp.path().join("two");
        let ns = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\nstatus: {}\n";
        write(&dir, "01-a/status/01-x.yaml", &format!("{ns}---\n{ns}"));
        let err = load_from(&dir).unwrap_err();
        assert!(
            matches!(err, LoadError::StatusDocuments { found: 2, .. }),
            "{err}"
        );

        let dir = tmp.path().join("name");
        write(
            &dir,
            "01-a/natscluster.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n",
        );
        assert!(matches!(
            load_from(&dir).unwrap_err(),
            LoadError::FileName { .. }
        ));
    }
}
