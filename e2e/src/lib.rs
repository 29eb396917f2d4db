//! The user stories run end to end against a real apiserver and real NATS servers, and the Helm
//! chart rendered, decoded and installed.
//!
//! [`stories`] finds and parses `docs/stories/`: every manifest document and every status example, for the
//! decode test (`tests/api/stories_decode.rs`) and the API-tier tests that apply them to a real apiserver.
//! [`chart`] reaches Helm, renders the chart and reads its RBAC table (`tests/api/chart_*.rs`);
//! [`installed`] installs the chart into a test kube-apiserver and runs as its ServiceAccounts;
//! [`decode`] decodes a document strictly into its type, [`monitoring`] holds the Prometheus
//! Operator kinds the chart writes; [`on_node`] installs the chart on the sim's real node and runs
//! scenarios there; [`on_cluster`] installs it on any of the sim's Kubernetes backends (the node,
//! k3s) and runs the conformance stories there.

pub mod chart;
pub mod conformance;
pub mod decode;
pub mod images;
pub mod installed;
pub mod monitoring;
pub mod on_cluster;
pub mod on_node;
pub mod stories;
