//! The user stories run end to end against a real apiserver and real NATS servers, and the Helm
//! chart rendered, decoded and installed.
//!
//! [`stories`] finds and parses `docs/stories/`: every manifest document and every status example, for the
//! decode test (`tests/api/stories_decode.rs`) and the API-tier tests that apply them to a real apiserver.
//! [`chart`] reaches Helm and reads the chart's RBAC table (`tests/api/chart_render.rs`,
//! `tests/api/chart_install.rs`); [`decode`] decodes a document strictly into its type.

pub mod chart;
pub mod decode;
pub mod stories;
