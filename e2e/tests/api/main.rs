//! Every story and CRD through real apiservers: the manifests decode and pass CEL, install on
//! kube-apiserver 1.20, the CEL table at apply on 1.36, Events.

mod api_tier;
mod cel_at_apply;
mod events;
mod stories_decode;
