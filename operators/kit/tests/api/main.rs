//! The kit against a real kube-apiserver 1.20 (each test its own): the finalizer path, leader
//! election and the run loop's gate.

mod finalizer_api;
mod leader_api;
