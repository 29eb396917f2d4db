//! The user stories run end to end against a real apiserver and real NATS servers.
//!
//! [`stories`] finds and parses `docs/stories/`: every manifest document and every status example, for the
//! decode test (`tests/stories_decode.rs`) and the API-tier tests that apply them to a real apiserver.

pub mod stories;
