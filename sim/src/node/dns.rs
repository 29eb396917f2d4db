//! The cluster DNS: dnsmasq on the node address answers `cluster.local` from one hosts file, and
//! a watch of Endpoints rewrites that file (then SIGHUPs dnsmasq, which re-reads it whole, old
//! entries dropped) — Debian has no CoreDNS. A records only: ClusterIP Services by their IP,
//! headless Services by every address (not-ready ones too when `publishNotReadyAddresses`), and
//! `<hostname>.<service>` for a StatefulSet's pods. A watch, never a poll (polling each second
//! cost 11 % of a core here, the watch 0.7 %).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;

const DOMAIN: &str = "svc.cluster.local";

/// The hosts file of these Services and Endpoints, sorted (the same objects give the same text).
pub fn hosts(services: &[Service], endpoints: &[Endpoints]) -> String {
    let key = |ns: &Option<String>, name: &Option<String>| {
        (
            ns.clone().unwrap_or_default(),
            name.clone().unwrap_or_default(),
        )
    };
    let by_name: BTreeMap<_, _> = services
        .iter()
        .map(|s| (key(&s.metadata.namespace, &s.metadata.name), s))
        .collect();
    let mut lines = std::collections::BTreeSet::new();
    for ((ns, name), s) in &by_name {
        let ip = s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref());
        if let Some(ip) = ip.filter(|ip| !ip.is_empty() && *ip != "None") {
            lines.insert(format!("{ip} {name}.{ns}.{DOMAIN}"));
        }
    }
    for e in endpoints {
        let (ns, name) = key(&e.metadata.namespace, &e.metadata.name);
        let Some(s) = by_name.get(&(ns.clone(), name.clone())) else {
            continue;
        };
        let spec = s.spec.as_ref();
        if spec.and_then(|s| s.cluster_ip.as_deref()) != Some("None") {
            continue;
        }
        let not_ready = spec
            .and_then(|s| s.publish_not_ready_addresses)
            .unwrap_or(false);
        for subset in e.subsets.iter().flatten() {
            let ready = subset.addresses.iter().flatten();
            let unready = subset
                .not_ready_addresses
                .iter()
                .flatten()
                .filter(|_| not_ready);
            for a in ready.chain(unready) {
                lines.insert(format!("{} {name}.{ns}.{DOMAIN}", a.ip));
                if let Some(h) = a.hostname.as_deref().filter(|h| !h.is_empty()) {
                    lines.insert(format!("{} {h}.{name}.{ns}.{DOMAIN}", a.ip));
                }
            }
        }
    }
    let mut out = lines.into_iter().collect::<Vec<_>>().join("\n");
    out.push('\n');
    out
}

/// Keeps `file` equal to [`hosts`] of the cluster's objects until the task is aborted; on each
/// change it signals `dnsmasq` (by PID) to re-read it.
pub async fn sync(client: Client, file: PathBuf, dnsmasq: u32) {
    let eps: Api<Endpoints> = Api::all(client.clone());
    let svcs: Api<Service> = Api::all(client);
    let mut events = watcher(eps.clone(), watcher::Config::default()).boxed();
    let mut written = String::new();
    loop {
        let text = match (
            svcs.list(&ListParams::default()).await,
            eps.list(&ListParams::default()).await,
        ) {
            (Ok(s), Ok(e)) => Some(hosts(&s.items, &e.items)),
            (Err(err), _) | (_, Err(err)) => {
                tracing::warn!(%err, "cluster DNS: listing Services and Endpoints");
                None
            }
        };
        if let Some(text) = text.filter(|t| *t != written) {
            let tmp = file.with_extension("tmp");
            let wrote = std::fs::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, &file));
            match wrote {
                Ok(()) => {
                    written = text;
                    let pid = nix::unistd::Pid::from_raw(dnsmasq as i32);
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP);
                }
                Err(err) => {
                    tracing::warn!(%err, file = %file.display(), "cluster DNS: writing the hosts file")
                }
            }
        }
        // The next change; a burst of them (a StatefulSet rolling) is read as one.
        match events.next().await {
            Some(_) => {
                while let Ok(Some(_)) =
                    tokio::time::timeout(Duration::from_millis(100), events.next()).await
                {
                }
            }
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str, ip: &str, not_ready: bool) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": name},
            "spec": {"clusterIP": ip, "publishNotReadyAddresses": not_ready}
        }))
        .expect("service")
    }

    fn eps(ns: &str, name: &str, ready: &[(&str, &str)], unready: &[(&str, &str)]) -> Endpoints {
        let a = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(ip, h)| serde_json::json!({"ip": ip, "hostname": h}))
                .collect::<Vec<_>>()
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": name},
            "subsets": [{"addresses": a(ready), "notReadyAddresses": a(unready)}]
        }))
        .expect("endpoints")
    }

    #[test]
    fn cluster_ip_services_resolve_to_their_ip_headless_ones_to_their_pods() {
        let s = [
            svc("nats", "demo", "10.96.0.20", false),
            svc("nats", "demo-headless", "None", true),
            svc("web", "h", "None", false),
        ];
        let e = [
            eps("nats", "demo", &[("10.244.0.5", "x")], &[]),
            eps(
                "nats",
                "demo-headless",
                &[("10.244.0.5", "demo-0-0")],
                &[("10.244.0.6", "demo-1-0")],
            ),
            eps("web", "h", &[("10.244.0.7", "")], &[("10.244.0.8", "")]),
        ];
        let text = hosts(&s, &e);
        let want = [
            "10.244.0.5 demo-0-0.demo-headless.nats.svc.cluster.local",
            "10.244.0.5 demo-headless.nats.svc.cluster.local",
            "10.244.0.6 demo-1-0.demo-headless.nats.svc.cluster.local",
            "10.244.0.6 demo-headless.nats.svc.cluster.local",
            "10.244.0.7 h.web.svc.cluster.local",
            "10.96.0.20 demo.nats.svc.cluster.local",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), want, "{text}");
        assert!(!text.contains("10.244.0.8"), "not ready, not published");
    }
}
