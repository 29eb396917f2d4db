//! The sim's host: a real kube-apiserver with the CRDs and the controllers in-process, on the
//! local server lifecycle.

mod cluster_live;
mod host;
