//! Every story and CRD through real apiservers: the manifests decode and pass CEL, install on
//! kube-apiserver 1.20, the CEL table at apply on 1.36, Events; the Helm chart rendered, decoded
//! strictly and compared with its goldens, then installed, upgraded and uninstalled; what its
//! RBAC refuses each controller's ServiceAccount, asked for real.

mod api_tier;
mod cel_at_apply;
mod chart_install;
mod chart_rbac;
mod chart_refusals;
mod chart_render;
mod chart_values;
mod events;
mod import_cycles;
mod spec_limits;
mod src_file_lengths;
mod stories_decode;
