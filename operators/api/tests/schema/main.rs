//! The CRDs' schemas offline: every CEL row's verdict (kube-cel), the generated CRDs against
//! `deploy/crds`, and the types' defaults.

mod cel_table;
mod crds;
mod defaults;
mod metrics_doc;
mod reasons;
