//! The kit against a real kube-apiserver 1.20 (each test its own): the finalizer path.

mod finalizer_api;
