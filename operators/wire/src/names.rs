//! Server names this process resolves itself, before the system resolver sees them.
//!
//! In a Kubernetes cluster a NatsConnection names a Service (`nats://demo.nats.svc:4222`) and the
//! cluster's DNS leads it to the pods. The sim's local backend runs a NatsCluster's servers as
//! processes on loopback, where no DNS knows those names; `sim up` installs a [`ServiceNames`] that
//! maps each Service name to the loopback listeners of the servers behind it, as cluster DNS maps it
//! to the pods. A controller binary never installs one: every name then goes to the system resolver,
//! unchanged.
//!
//! One map per process ([`resolve_names_with`]), like the resolver it stands in front of.

use std::sync::{Arc, OnceLock};

use async_nats::ServerAddr;

/// Where a server name leads instead: `(host, port)` → the `(host, port)`s to dial, or `None` for a
/// name the map does not know (left to the system resolver).
pub type NameMap = dyn Fn(&str, u16) -> Option<Vec<(String, u16)>> + Send + Sync;

/// A process's [`NameMap`].
pub type ServiceNames = Arc<NameMap>;

static NAMES: OnceLock<ServiceNames> = OnceLock::new();

/// A second [`resolve_names_with`] in one process.
#[derive(Debug, thiserror::Error)]
#[error("this process already resolves service names with another map")]
pub struct NamesAlreadySet;

/// Installs the process's name map; every [`crate::dial`] after it consults the map first.
pub fn resolve_names_with(names: ServiceNames) -> Result<(), NamesAlreadySet> {
    NAMES.set(names).map_err(|_| NamesAlreadySet)
}

/// `addrs` with every address the process's map knows replaced by the addresses it leads to.
pub(crate) fn expand(addrs: Vec<ServerAddr>) -> Vec<ServerAddr> {
    match NAMES.get() {
        Some(names) => expand_with(names.as_ref(), addrs),
        None => addrs,
    }
}

/// The rule: each address the map knows becomes one address per target, scheme, user and path
/// kept; an address the map does not know (or whose rewrite is not a valid URL) stays as it is.
pub fn expand_with(names: &NameMap, addrs: Vec<ServerAddr>) -> Vec<ServerAddr> {
    let mut out = Vec::with_capacity(addrs.len());
    for addr in addrs {
        let Some(targets) = names(addr.host(), addr.port()).filter(|t| !t.is_empty()) else {
            out.push(addr);
            continue;
        };
        let url = addr.clone().into_inner();
        let rewritten: Option<Vec<ServerAddr>> = targets
            .iter()
            .map(|(host, port)| {
                let mut u = url.clone();
                u.set_host(Some(host)).ok()?;
                u.set_port(Some(*port)).ok()?;
                ServerAddr::from_url(u).ok()
            })
            .collect();
        match rewritten {
            Some(r) => out.extend(r),
            None => out.push(addr),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn map(host: &str, port: u16) -> Option<Vec<(String, u16)>> {
        match (host, port) {
            ("demo.nats.svc", 4222) => Some(vec![
                ("127.0.0.1".into(), 40001),
                ("127.0.0.1".into(), 40002),
            ]),
            ("empty.nats.svc", _) => Some(vec![]),
            ("bad.nats.svc", _) => Some(vec![("not a host".into(), 1)]),
            _ => None,
        }
    }

    #[rstest]
    #[case(&["nats://demo.nats.svc:4222"], &["nats://127.0.0.1:40001", "nats://127.0.0.1:40002"])]
    #[case(&["tls://demo.nats.svc:4222"], &["tls://127.0.0.1:40001", "tls://127.0.0.1:40002"])]
    #[case(&["nats://u:p@demo.nats.svc:4222"], &["nats://u:p@127.0.0.1:40001", "nats://u:p@127.0.0.1:40002"])]
    #[case(&["demo.nats.svc"], &["nats://127.0.0.1:40001", "nats://127.0.0.1:40002"])]
    #[case(&["nats://demo.nats.svc:4223"], &["nats://demo.nats.svc:4223"])]
    #[case(&["nats://other:4222", "nats://demo.nats.svc:4222"], &["nats://other:4222", "nats://127.0.0.1:40001", "nats://127.0.0.1:40002"])]
    #[case(&["nats://empty.nats.svc:4222"], &["nats://empty.nats.svc:4222"])]
    #[case(&["nats://bad.nats.svc:4222"], &["nats://bad.nats.svc:4222"])]
    fn known_names_lead_to_their_targets(#[case] given: &[&str], #[case] want: &[&str]) {
        let addrs: Vec<ServerAddr> = given.iter().map(|s| s.parse().expect("parses")).collect();
        let got: Vec<String> = expand_with(&map, addrs)
            .iter()
            .map(|a| a.as_url_str().trim_end_matches('/').to_string())
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn without_a_map_nothing_changes() {
        let addrs: Vec<ServerAddr> = vec!["nats://demo.nats.svc:4222".parse().expect("parses")];
        // No test in this crate installs a map, so the process has none.
        assert_eq!(expand(addrs.clone()), addrs);
    }
}
