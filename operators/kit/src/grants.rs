//! NatsReferenceGrant admission (§7): a reference crosses namespaces only where a grant in the
//! target's namespace lists the referrer's {group, kind, namespace} and the target's {group, kind,
//! name?} exactly (no name: every object of that kind). Checked on every reconcile.

use kube::api::{Api, ListParams};
use nats_api::nats::NatsReferenceGrant;

use crate::scope::Namespaces;

/// The resource holding a reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct From<'a> {
    /// Its API group.
    pub group: &'a str,
    /// Its kind.
    pub kind: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
}

/// The object referenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct To<'a> {
    /// Its API group.
    pub group: &'a str,
    /// Its kind.
    pub kind: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

/// Whether `grants` admit the reference: the same namespace always; across namespaces only a
/// grant living in the target's namespace whose `from` and `to` both match exactly.
pub fn admits(grants: &[NatsReferenceGrant], from: From<'_>, to: To<'_>) -> bool {
    if from.namespace == to.namespace {
        return true;
    }
    grants
        .iter()
        .filter(|g| g.metadata.namespace.as_deref() == Some(to.namespace))
        .any(|g| {
            g.spec.from.iter().any(|f| {
                f.group == from.group && f.kind == from.kind && f.namespace == from.namespace
            }) && g.spec.to.iter().any(|t| {
                t.group == to.group
                    && t.kind == to.kind
                    && t.name.as_deref().is_none_or(|n| n == to.name)
            })
        })
}

/// The grants of `namespace` (empty list when none, or when `namespace` is not one of
/// `namespaces`: nothing there is read).
pub async fn grants_in(
    client: &kube::Client,
    namespaces: &Namespaces,
    namespace: &str,
) -> Result<Vec<NatsReferenceGrant>, kube::Error> {
    if !namespaces.watches(namespace) {
        return Ok(Vec::new());
    }
    let api: Api<NatsReferenceGrant> = Api::namespaced(client.clone(), namespace);
    Ok(api.list(&ListParams::default()).await?.items)
}

/// Looks the grants of the target's namespace up and checks the reference against them. A
/// target outside `namespaces` is never admitted (nor read).
pub async fn admitted(
    client: &kube::Client,
    namespaces: &Namespaces,
    from: From<'_>,
    to: To<'_>,
) -> Result<bool, kube::Error> {
    if !namespaces.watches(to.namespace) {
        return Ok(false);
    }
    if from.namespace == to.namespace {
        return Ok(true);
    }
    Ok(admits(
        &grants_in(client, namespaces, to.namespace).await?,
        from,
        to,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nats_api::nats::{NatsReferenceGrantSpec, ReferenceGrantFrom, ReferenceGrantTo};
    use rstest::rstest;

    fn grant(
        ns: &str,
        from_ns: &str,
        from_kind: &str,
        to_name: Option<&str>,
    ) -> NatsReferenceGrant {
        let mut g = NatsReferenceGrant::new(
            "g",
            NatsReferenceGrantSpec {
                from: vec![ReferenceGrantFrom {
                    group: "jetstream.nats.mikluko.io".into(),
                    kind: from_kind.into(),
                    namespace: from_ns.into(),
                }],
                to: vec![ReferenceGrantTo {
                    group: "nats.mikluko.io".into(),
                    kind: "NatsConnection".into(),
                    name: to_name.map(str::to_string),
                }],
            },
        );
        g.metadata.namespace = Some(ns.into());
        g
    }

    const FROM: From<'static> = From {
        group: "jetstream.nats.mikluko.io",
        kind: "NatsStream",
        namespace: "team-a",
    };

    fn to(ns: &'static str, name: &'static str) -> To<'static> {
        To {
            group: "nats.mikluko.io",
            kind: "NatsConnection",
            namespace: ns,
            name,
        }
    }

    #[rstest]
    #[case::same_namespace_needs_no_grant(vec![], to("team-a", "c"), true)]
    #[case::cross_namespace_without_a_grant_is_refused(vec![], to("platform", "c"), false)]
    #[case::grant_for_every_connection(vec![grant("platform", "team-a", "NatsStream", None)], to("platform", "c"), true)]
    #[case::grant_naming_this_connection(vec![grant("platform", "team-a", "NatsStream", Some("c"))], to("platform", "c"), true)]
    #[case::grant_naming_another_connection(vec![grant("platform", "team-a", "NatsStream", Some("other"))], to("platform", "c"), false)]
    #[case::grant_for_another_namespace(vec![grant("platform", "team-b", "NatsStream", None)], to("platform", "c"), false)]
    #[case::grant_for_another_kind(vec![grant("platform", "team-a", "NatsConsumer", None)], to("platform", "c"), false)]
    #[case::grant_living_outside_the_target_namespace(vec![grant("team-a", "team-a", "NatsStream", None)], to("platform", "c"), false)]
    fn admission_matches_exactly(
        #[case] grants: Vec<NatsReferenceGrant>,
        #[case] target: To<'static>,
        #[case] want: bool,
    ) {
        assert_eq!(admits(&grants, FROM, target), want);
    }
}
