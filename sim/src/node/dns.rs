//! The cluster DNS: dnsmasq on the node address answers `cluster.local` from one hosts file, and
//! a watch of Endpoints rewrites that file (then SIGHUPs dnsmasq, which re-reads it whole, old
//! entries dropped) — Debian has no CoreDNS. A records only: ClusterIP Services by their IP,
//! headless Services by every address (not-ready ones too when `publishNotReadyAddresses`), and
//! `<hostname>.<service>` for a StatefulSet's pods. A watch, never a poll (polling each second
//! cost 11 % of a core here, the watch 0.7 %).
//!
//! The names a NatsCluster's gateway and leafnode listeners have outside Kubernetes (the
//! stories' `gw.<cluster>.example.net`, `leaf.<cluster>.example.net`: a load balancer's DNS
//! record) answer with the ClusterIP of the Service the cluster controller renders for that
//! listener ([`outside_names`]), so a story's gateway remotes and advertised addresses reach the
//! NatsCluster they name, as written.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;

const DOMAIN: &str = "svc.cluster.local";

/// The outside domain of the stories' load balancers.
pub const OUTSIDE_DOMAIN: &str = "example.net";

/// The outside names that answer with the ClusterIP of Service `service`: a NatsCluster
/// `<c>`'s gateway Service `<c>-gateway` is `gw.<c>.example.net`, its leafnode Service
/// `<c>-leafnodes` is `leaf.<c>.example.net`; any other Service has none.
pub fn outside_names(service: &str) -> Vec<String> {
    [("-gateway", "gw"), ("-leafnodes", "leaf")]
        .into_iter()
        .filter_map(|(suffix, host)| {
            let cluster = service.strip_suffix(suffix).filter(|c| !c.is_empty())?;
            Some(format!("{host}.{cluster}.{OUTSIDE_DOMAIN}"))
        })
        .collect()
}

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
            for outside in outside_names(name) {
                lines.insert(format!("{ip} {outside}"));
            }
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

    #[rstest::rstest]
    #[case::a_gateway("prod-east-gateway", &["gw.prod-east.example.net"])]
    #[case::a_leafnode_listener("hub-leafnodes", &["leaf.hub.example.net"])]
    #[case::the_client_service("prod-east", &[])]
    #[case::the_headless_service("prod-east-headless", &[])]
    #[case::no_cluster_name("-gateway", &[])]
    #[case::a_cluster_named_gateway("gateway-gateway", &["gw.gateway.example.net"])]
    fn a_listeners_service_has_its_outside_name(#[case] service: &str, #[case] want: &[&str]) {
        assert_eq!(outside_names(service), want);
    }

    #[test]
    fn the_gateway_services_outside_name_answers_with_its_cluster_ip() {
        let s = [
            svc("nats-system", "prod-east-gateway", "10.96.0.31", false),
            svc("nats-system", "hub-leafnodes", "10.96.0.32", false),
            svc("nats-system", "headless-gateway", "None", false),
        ];
        let text = hosts(&s, &[]);
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "10.96.0.31 gw.prod-east.example.net",
                "10.96.0.31 prod-east-gateway.nats-system.svc.cluster.local",
                "10.96.0.32 hub-leafnodes.nats-system.svc.cluster.local",
                "10.96.0.32 leaf.hub.example.net",
            ],
            "{text}"
        );
    }
}
