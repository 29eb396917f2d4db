//! The sim against real nats-servers: its CLI, clusters, superclusters and leaf nodes, operator
//! mode, every fault it injects, and the local server lifecycle driven through its port.

mod cli;
mod cluster;
mod faults;
mod local_server_lifecycle;
mod operator;
mod replica_copy;
mod route_cuts;
mod store_faults;
mod supercluster;
