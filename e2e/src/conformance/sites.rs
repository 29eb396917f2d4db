//! A story told across two Kubernetes clusters, run on the one node ([`elsewhere`]): the files a
//! story applies in its other Kubernetes cluster go to namespaces of their own on the node
//! ([`Elsewhere::namespaces`]: story 06's west `nats-system` is `nats-system-west`), so its
//! objects do not edit the home cluster's objects of the same name. The run then does what the
//! story leaves to the platform between the two:
//!
//! - External Secrets carries the creds Secrets the story names across
//!   ([`Elsewhere::carried`]);
//! - GitOps keeps the literal NatsOperatorTrust a copy of the home trust's status
//!   ([`literal_trust`]): the story's literal JWTs were generated for the documentation, this run's
//!   auth controller signs with its own keys.
//!
//! The status examples of objects a relocated file declares are read where the file went.
//! Pure: table tests beside it.

use serde_json::Value;

use crate::stories::Story;

/// Where a story's other Kubernetes cluster lives on the node, and what crosses to it.
#[derive(Debug, PartialEq, Eq)]
pub struct Elsewhere {
    /// The other cluster's name, in the story's words.
    pub site: &'static str,
    /// The story's files applied there.
    pub files: &'static [&'static str],
    /// Each namespace of those files, and the node's namespace it becomes.
    pub namespaces: &'static [(&'static str, &'static str)],
    /// Secrets External Secrets carries from home, before the first object there.
    pub carried: &'static [Carried],
    /// The home namespace whose objects a literal trust there copies.
    pub trust_from: &'static str,
    /// Each literal NatsOperatorTrust there (by name) and the home NatsOperatorTrust it copies.
    pub operator_trusts: &'static [(&'static str, &'static str)],
}

/// One Secret carried from home: which, where to and under what name, and its keys (all when
/// empty: a CA bundle carries only `ca.crt`, never the listener's key).
#[derive(Debug, PartialEq, Eq)]
pub struct Carried {
    pub from: (&'static str, &'static str),
    pub to: (&'static str, &'static str),
    pub keys: &'static [&'static str],
}

const STORY_06_WEST: Elsewhere = Elsewhere {
    site: "west",
    files: &["03-west.yaml"],
    namespaces: &[("nats-system", "nats-system-west")],
    carried: &[Carried {
        from: ("nats-system", "west-cluster-controller-creds"),
        to: ("nats-system-west", "west-cluster-controller-creds"),
        keys: &[],
    }],
    trust_from: "nats-system",
    operator_trusts: &[("demo", "demo")],
};

/// Story 10's site: its namespace `nats-edge` is its own already. Its creds Secrets and the
/// hub's leafnode CA (`ca.crt` of the Secret the hub's leafnodes Certificate wrote) arrive
/// through External Secrets.
const STORY_10_EDGE: Elsewhere = Elsewhere {
    site: "edge-site-1",
    files: &["02-edge-site-1.yaml"],
    namespaces: &[],
    carried: &[
        Carried {
            from: ("nats-system", "hub-leafnodes-tls"),
            to: ("nats-edge", "hub-leaf-ca"),
            keys: &["ca.crt"],
        },
        Carried {
            from: ("nats-system", "edge-site-1-system-creds"),
            to: ("nats-edge", "edge-site-1-system-creds"),
            keys: &[],
        },
        Carried {
            from: ("nats-system", "edge-site-1-telemetry-creds"),
            to: ("nats-edge", "edge-site-1-telemetry-creds"),
            keys: &[],
        },
        Carried {
            from: ("nats-system", "edge-site-1-cluster-controller-creds"),
            to: ("nats-edge", "edge-site-1-cluster-controller-creds"),
            keys: &[],
        },
    ],
    trust_from: "nats-system",
    operator_trusts: &[("hub", "demo")],
};

/// The other Kubernetes cluster of `story`, if it has one the run places on the node.
pub fn elsewhere(story: &str) -> Option<&'static Elsewhere> {
    match story.split_once('-').map_or(story, |(n, _)| n) {
        "06" => Some(&STORY_06_WEST),
        "10" => Some(&STORY_10_EDGE),
        _ => None,
    }
}

/// Every other cluster a story places on the node.
pub fn all() -> [&'static Elsewhere; 2] {
    [&STORY_06_WEST, &STORY_10_EDGE]
}

impl Elsewhere {
    /// The node's namespaces this cluster's objects live in: those its namespaces map to and
    /// those its carried Secrets go to.
    pub fn node_namespaces(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        let mapped = self.namespaces.iter().map(|(_, to)| *to);
        let carried = self.carried.iter().map(|c| c.to.0);
        for ns in mapped.chain(carried) {
            if !out.contains(&ns) {
                out.push(ns);
            }
        }
        out
    }

    /// Whether `file` of the story is applied in this cluster.
    pub fn holds(&self, file: &str) -> bool {
        self.files.contains(&file)
    }

    /// The node's namespace for `namespace` there (itself when not mapped).
    pub fn namespace<'a>(&self, namespace: &'a str) -> &'a str {
        self.namespaces
            .iter()
            .find(|(from, _)| *from == namespace)
            .map_or(namespace, |(_, to)| to)
    }

    /// Moves an object of a file applied there to its namespace on the node: its
    /// `metadata.namespace`, or a Namespace's own name.
    pub fn relocate(&self, value: &mut Value) {
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let field = if kind == "Namespace" {
            "name"
        } else {
            "namespace"
        };
        if let Some(ns) = value.pointer_mut(&format!("/metadata/{field}"))
            && let Some(from) = ns.as_str()
        {
            *ns = Value::String(self.namespace(from).to_string());
        }
    }

    /// The node's namespace of the object `kind`/`name` in `namespace` as `story` places it:
    /// moved when a file applied there declares it.
    pub fn placed<'a>(&self, story: &Story, kind: &str, name: &str, namespace: &'a str) -> &'a str {
        let declared_there = story.manifests.iter().any(|d| {
            self.holds(&d.file)
                && d.object.kind == kind
                && d.object.name == name
                && d.object.namespace.as_deref() == Some(namespace)
        });
        if declared_there {
            self.namespace(namespace)
        } else {
            namespace
        }
    }
}

/// The home object a literal trust there named `name` copies: (kind, name) in
/// [`Elsewhere::trust_from`]. A NatsOperatorTrust copies the NatsOperatorTrust it is mapped
/// to, a NatsAccountTrust the NatsAccount of its own name; anything else copies nothing.
pub fn home_of(there: &Elsewhere, kind: &str, name: &str) -> Option<(&'static str, String)> {
    match kind {
        "NatsOperatorTrust" => there
            .operator_trusts
            .iter()
            .find(|(t, _)| *t == name)
            .map(|(_, home)| ("NatsOperatorTrust", home.to_string())),
        "NatsAccountTrust" => Some(("NatsAccount", name.to_string())),
        _ => None,
    }
}

/// A literal trust kept a copy of its home object's `status`, as GitOps would copy it: a
/// NatsOperatorTrust's `operatorJWT` and `systemAccountJWT` from the home trust's, a
/// NatsAccountTrust's `publicKey` and `jwt` from the home NatsAccount's. Any other object, or a
/// trust by reference, is left as it is. Whether it was a literal trust the home status filled.
pub fn literal_trust(value: &mut Value, home_status: &Value) -> bool {
    let keys: &[(&str, &str)] = match value.get("kind").and_then(Value::as_str) {
        Some("NatsOperatorTrust") => &[
            ("operatorJWT", "operatorJWT"),
            ("systemAccountJWT", "systemAccountJWT"),
        ],
        Some("NatsAccountTrust") => &[("publicKey", "publicKey"), ("jwt", "jwt")],
        _ => return false,
    };
    let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) else {
        return false;
    };
    if !spec.contains_key(keys[0].0) {
        return false;
    }
    let mut filled = true;
    for (key, from) in keys {
        match home_status.get(*from).and_then(Value::as_str) {
            Some(v) => {
                spec.insert((*key).into(), Value::String(v.into()));
            }
            None => filled = false,
        }
    }
    filled
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[rstest::rstest]
    #[case::a_west_object(json!({"kind": "NatsCluster", "metadata": {"name": "west", "namespace": "nats-system"}}), json!({"kind": "NatsCluster", "metadata": {"name": "west", "namespace": "nats-system-west"}}))]
    #[case::the_west_namespace(json!({"kind": "Namespace", "metadata": {"name": "nats-system"}}), json!({"kind": "Namespace", "metadata": {"name": "nats-system-west"}}))]
    #[case::a_namespace_not_mapped(json!({"kind": "Secret", "metadata": {"name": "s", "namespace": "other"}}), json!({"kind": "Secret", "metadata": {"name": "s", "namespace": "other"}}))]
    fn a_west_file_goes_to_wests_namespace(#[case] mut object: Value, #[case] want: Value) {
        elsewhere("06-supercluster")
            .expect("story 06 has a west")
            .relocate(&mut object);
        assert_eq!(object, want);
    }

    #[test]
    fn story_06s_west_is_its_third_file_and_its_examples_follow_it() {
        let west = elsewhere("06-supercluster").expect("story 06 has a west");
        assert!(west.holds("03-west.yaml") && !west.holds("02-east.yaml"));
        assert_eq!(elsewhere("09-acceptance"), None);
        let stories = crate::stories::load().expect("docs/stories parses");
        let story = stories
            .iter()
            .find(|s| s.name == "06-supercluster")
            .expect("story 06");
        let placed = |kind, name| west.placed(story, kind, name, "nats-system");
        assert_eq!(placed("NatsCluster", "west"), "nats-system-west");
        assert_eq!(placed("NatsCluster", "east"), "nats-system");
        assert_eq!(placed("NatsOperatorTrust", "demo"), "nats-system-west");
    }

    #[test]
    fn a_literal_account_trust_copies_the_home_accounts_key_and_jwt() {
        let home = json!({"publicKey": "ACW.key", "jwt": "acc.jwt", "jwtHash": "h"});
        let mut literal = json!({"kind": "NatsAccountTrust", "metadata": {"name": "telemetry"},
            "spec": {"publicKey": "ADOC", "jwt": "doc.jwt"}});
        assert!(literal_trust(&mut literal, &home));
        assert_eq!(
            literal["spec"],
            json!({"publicKey": "ACW.key", "jwt": "acc.jwt"})
        );
        let edge = elsewhere("10-leaf-nodes").expect("story 10 has a site");
        assert_eq!(
            home_of(edge, "NatsAccountTrust", "telemetry"),
            Some(("NatsAccount", "telemetry".to_string()))
        );
        assert_eq!(
            home_of(edge, "NatsOperatorTrust", "hub"),
            Some(("NatsOperatorTrust", "demo".to_string()))
        );
        assert_eq!(home_of(edge, "NatsConnection", "hub-system"), None);
    }

    /// Every Secret story 10's site names as arriving through External Secrets is carried.
    #[test]
    fn story_10s_site_gets_the_secrets_its_file_says_arrive() {
        let edge = elsewhere("10-leaf-nodes").expect("story 10 has a site");
        let stories = crate::stories::load().expect("docs/stories parses");
        let story = stories
            .iter()
            .find(|s| s.name == "10-leaf-nodes")
            .expect("story 10");
        let text = std::fs::read_to_string(story.dir.join("02-edge-site-1.yaml")).expect("file");
        let header: String = text.lines().take_while(|l| l.starts_with('#')).collect();
        let carried: Vec<&str> = edge.carried.iter().map(|c| c.to.1).collect();
        for name in [
            "hub-leaf-ca",
            "edge-site-1-system-creds",
            "edge-site-1-telemetry-creds",
            "edge-site-1-cluster-controller-creds",
        ] {
            assert!(header.contains(name), "{name} in the file's header");
            assert!(carried.contains(&name), "{name} carried");
        }
        assert!(edge.holds("02-edge-site-1.yaml") && !edge.holds("01-hub.yaml"));
    }

    #[test]
    fn a_literal_trust_copies_the_home_trusts_jwts() {
        let home =
            json!({"operatorJWT": "op.jwt", "systemAccountJWT": "sys.jwt", "conditions": []});
        let mut literal = json!({"kind": "NatsOperatorTrust", "metadata": {"name": "demo"},
            "spec": {"operatorJWT": "doc.op", "systemAccountJWT": "doc.sys"}});
        assert!(literal_trust(&mut literal, &home));
        assert_eq!(
            literal["spec"],
            json!({"operatorJWT": "op.jwt", "systemAccountJWT": "sys.jwt"})
        );
        let mut reference =
            json!({"kind": "NatsOperatorTrust", "spec": {"operatorRef": {"name": "demo"}}});
        let before = reference.clone();
        assert!(!literal_trust(&mut reference, &home));
        assert_eq!(reference, before);
        let mut not_yet = json!({"kind": "NatsOperatorTrust", "spec": {"operatorJWT": "doc.op"}});
        assert!(
            !literal_trust(&mut not_yet, &json!({})),
            "no home status yet"
        );
    }
}
