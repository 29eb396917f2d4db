//! The cluster controller: NatsCluster becomes running NATS servers.
