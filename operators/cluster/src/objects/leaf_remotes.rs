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

/// The projected Secret; `None` when no admitted remote carries a file.
pub fn leaf_remotes_secret(owner: &Owner, remotes: &[LeafRemoteFiles]) -> Option<Secret> {
    let mut data = BTreeMap::new();
    for r in remotes {
        if let Some(c) = &r.credentials {
            data.insert(leaf_creds_file(r.index), ByteString(c.clone()));
        }
        if let Some(c) = &r.ca {
            data.insert(leaf_ca_file(r.index), ByteString(c.clone()));
        }
    }
    (!data.is_empty()).then(|| Secret {
        metadata: owner.meta(
            names::leaf_remotes_secret(&owner.name),
            labels::cluster(&owner.name),
        ),
        data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::owner;

    #[test]
    fn holds_the_files_the_plan_names() {
        let s = leaf_remotes_secret(
            &owner(),
            &[
                LeafRemoteFiles {
                    index: 0,
                    credentials: Some(b"creds0".to_vec()),
                    ca: None,
                },
                LeafRemoteFiles {
                    index: 2,
                    credentials: Some(b"creds2".to_vec()),
                    ca: Some(b"ca2".to_vec()),
                },
            ],
        )
        .expect("secret");
        assert_eq!(s.metadata.name.as_deref(), Some("demo-leaf-remotes"));
        let keys: Vec<String> = s.data.expect("data").into_keys().collect();
        assert_eq!(
            keys,
            vec!["remote-0.creds", "remote-2-ca.crt", "remote-2.creds"]
        );
        assert!(leaf_remotes_secret(&owner(), &[]).is_none());
    }
}
