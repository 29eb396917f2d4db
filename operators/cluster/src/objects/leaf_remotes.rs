//! The Secret `<name>-leaf-remotes` (design §4.3): the admitted leaf remotes' creds and CAs,
//! projected into the config volume beside nats.conf so kubelet refreshes both together. A
//! remote no grant admits is left out, here as in the config.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use nats_api::cluster::names;

use super::{Owner, labels};
use crate::plan::{leaf_ca_file, leaf_creds_file};

/// One admitted remote's files, as read from its NatsConnection's Secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafRemoteFiles {
    /// Index of the remote in spec.leafRemotes.
    pub index: usize,
    pub credentials: Option<Vec<u8>>,
    pub ca: Option<Vec<u8>>,
}

/// The projected Secret as this pass writes it: the admitted remotes' files. Where none carries a
/// file but the Secret this NatsCluster controls still `holds` some (the last remote's grant
/// withdrawn, its NatsConnection gone), the Secret is written emptied rather than deleted: the
/// withdrawn credentials leave the namespace by a patch, so the controller needs no right to
/// delete Secrets (docs/security.md). `None`: nothing to write.
pub fn leaf_remotes_secret(
    owner: &Owner,
    remotes: &[LeafRemoteFiles],
    holds: bool,
) -> Option<Secret> {
    let mut data = BTreeMap::new();
    for r in remotes {
        if let Some(c) = &r.credentials {
            data.insert(leaf_creds_file(r.index), ByteString(c.clone()));
        }
        if let Some(c) = &r.ca {
            data.insert(leaf_ca_file(r.index), ByteString(c.clone()));
        }
    }
    (!data.is_empty() || holds).then(|| Secret {
        metadata: owner.meta(
            names::leaf_remotes_secret(&owner.name),
            labels::cluster(&owner.name),
        ),
        data: (!data.is_empty()).then_some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::owner;

    fn files(index: usize, credentials: Option<&str>, ca: Option<&str>) -> LeafRemoteFiles {
        LeafRemoteFiles {
            index,
            credentials: credentials.map(|c| c.as_bytes().to_vec()),
            ca: ca.map(|c| c.as_bytes().to_vec()),
        }
    }

    #[rstest::rstest]
    #[case::the_admitted_remotes_files(
        vec![files(0, Some("creds0"), None), files(2, Some("creds2"), Some("ca2"))],
        false,
        Some(vec!["remote-0.creds", "remote-2-ca.crt", "remote-2.creds"])
    )]
    #[case::the_files_over_what_it_holds(vec![files(1, Some("c"), None)], true, Some(vec!["remote-1.creds"]))]
    #[case::a_remote_without_files_writes_none(vec![files(0, None, None)], false, None)]
    #[case::the_last_grant_withdrawn_empties_it_no_delete(vec![], true, Some(vec![]))]
    #[case::nothing_held_nothing_written(vec![], false, None)]
    fn holds_the_admitted_remotes_files_and_is_emptied_not_deleted(
        #[case] remotes: Vec<LeafRemoteFiles>,
        #[case] holds: bool,
        #[case] keys: Option<Vec<&str>>,
    ) {
        let s = leaf_remotes_secret(&owner(), &remotes, holds);
        assert_eq!(
            s.as_ref().and_then(|s| s.metadata.name.as_deref()),
            keys.as_ref().map(|_| "demo-leaf-remotes")
        );
        let held: Option<Vec<String>> = s.map(|s| s.data.unwrap_or_default().into_keys().collect());
        assert_eq!(
            held,
            keys.map(|k| k.into_iter().map(String::from).collect())
        );
    }
}
