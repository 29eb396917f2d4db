//! The user stories run end to end against a real apiserver and real NATS servers.
