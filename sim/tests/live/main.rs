//! The sim against real nats-servers: its CLI, clusters, superclusters and leaf nodes, operator
//! mode, and every fault it injects.

mod cli;
mod cluster;
mod faults;
mod operator;
mod supercluster;
