//! The watch a controller keeps of its own kind, holding no more than a pass reads.
//!
//! kube's `Controller::new` keeps every object as the apiserver sends it, `managedFields`
//! included: one entry per field manager, each a tree of every field it set, often larger than
//! the object itself. No pass reads them (a server-side apply sends its own fields, the server
//! keeps the record), so [`controller`] drops them before the store keeps an object.

use std::fmt::Debug;

use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde::de::DeserializeOwned;

/// A Controller of `K` over `api`, as `Controller::new(api, config)` but whose store holds each
/// object without its `managedFields`.
pub fn controller<K>(api: Api<K>, config: watcher::Config) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let lean = watcher(api, config).modify(|o: &mut K| {
        o.meta_mut().managed_fields = None;
    });
    Controller::for_stream(reflector(writer, lean).applied_objects(), reader)
}
