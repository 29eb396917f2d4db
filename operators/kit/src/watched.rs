//! The bounds of a kind a controller watches, named once: [`Watched`]. A module of its own, below
//! the watches ([`crate::watch`]), the scope's streams ([`crate::scope`]) and the run loop
//! ([`crate::reconcile`]) that all take it.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::de::DeserializeOwned;

/// What kube's Controller and watcher ask of a namespaced kind a controller watches, named once:
/// every watch and run loop of the workspace takes `K: Watched`.
pub trait Watched:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}
