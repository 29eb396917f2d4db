//! The cluster controller's API tier: a real kube-apiserver 1.20 (each test its own), the
//! controller in-process or as its binary, on the Kubernetes server lifecycle. Its runs on the sim's
//! local server lifecycle are the sim's API tier (`sim/tests/api/api_local_*`).

mod api_binary;
mod api_claims;
mod api_cluster;
mod api_deletion;
mod api_replicas;
mod api_server_lifecycle;
mod api_system_credentials;
mod objects_apply;
