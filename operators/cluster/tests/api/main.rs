//! The cluster controller's API tier: a real kube-apiserver 1.20 (each test its own), the
//! controller in-process or as its binary, on the Kubernetes lifecycle or the sim's local one.

mod api_binary;
mod api_cluster;
mod api_lifecycle;
mod api_local_certificates;
mod api_local_removal;
mod api_local_rollout;
mod api_local_trusted_rollout;
mod objects_apply;
