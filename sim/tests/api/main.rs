//! The sim's host: a real kube-apiserver with the CRDs and the controllers in-process, on the
//! local server lifecycle; and the cluster controller's rollouts, removals and certificate
//! reloads on that server lifecycle (`api_local_*`, each test its own apiserver); a ServiceAccount's
//! identity on it (`identity`); story 02's tenant deleted all at once (`teardown`); a reload the
//! server does not answer falling back to a restart (`reload_fallback`).

mod api_local_certificates;
mod api_local_removal;
mod api_local_rollout;
mod api_local_trusted_rollout;
mod cluster_live;
mod control_plane;
mod identity;
mod reload_fallback;
mod teardown;
mod up;
