//! The k3s backend's network outside Kubernetes, written down as data (pure, table-tested, built
//! without the `k3s` feature so the gate checks it where no Docker engine answers): the Docker
//! network the k3s container joins ([`network`]), the host commands that give the host the
//! outside addresses and routes into the cluster ([`address_command`], [`route_commands`]), and
//! the CoreDNS server block that answers the outside names ([`coredns_server`]).
//!
//! The same addresses as the node's ([`crate::node::outside::address`], `10.245.1.<n>`): the run
//! creates its own Docker network `10.245.0.0/16` whose gateway, `10.245.0.1`, is the host's end
//! of the bridge [`BRIDGE`]; each outside address is added to that bridge as a `/32`, so a pod
//! reaches it as it reaches anything outside the cluster: the k3s container masquerades it and
//! sends it out on the network (on-link: the host's bridge owns the address and answers for it).
//! The other
//! way, the host reaches the cluster's Services and pods through routes to k3s's service and
//! cluster networks via the container's address on the network (k3s's kube-proxy DNATs a
//! ClusterIP as the node's does), so a process on the host resolves names through CoreDNS at
//! [`CLUSTER_DNS`] as the node's partner servers resolve them through the node's dnsmasq.
//!
//! Adding addresses and routes needs `CAP_NET_ADMIN`: as root the commands run as they are, else
//! through `sudo -n` (GitHub's runners give the runner user passwordless sudo). Removing the
//! network at stop deletes the bridge, and the addresses and routes with it.

use std::net::Ipv4Addr;

/// The Docker network a k3s run creates and removes (one k3s run at a time on a machine, as one
/// node at a time).
pub const NETWORK: &str = "sim-k3s";
/// The host's end of [`NETWORK`] (Docker's option `com.docker.network.bridge.name`).
pub const BRIDGE: &str = "sim-k3s0";
/// The network's subnet; the outside addresses `10.245.1.<n>` lie in it, outside [`IP_RANGE`].
pub const SUBNET: &str = "10.245.0.0/16";
/// The addresses Docker hands containers: `10.245.0.2`… (never an outside address).
pub const IP_RANGE: &str = "10.245.0.0/24";
/// The bridge's address on the host, the containers' default route.
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 245, 0, 1);
/// k3s's pod and Service networks and its cluster DNS address, pinned in the k3s server's
/// arguments (k3s's defaults) so the host's routes match them by construction.
pub const CLUSTER_CIDR: &str = "10.42.0.0/16";
pub const SERVICE_CIDR: &str = "10.43.0.0/16";
pub const CLUSTER_DNS: Ipv4Addr = Ipv4Addr::new(10, 43, 0, 10);

/// The ConfigMap key (of `kube-system/coredns-custom`, beside the Services' names) holding the
/// outside names: k3s's CoreDNS imports every `*.server` key as a server block.
pub const STORIES_KEY: &str = "stories-outside.server";

/// How the run's Docker network is created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Network {
    pub name: String,
    pub subnet: String,
    pub ip_range: String,
    pub gateway: String,
    /// Driver options (`com.docker.network.bridge.name`).
    pub options: Vec<(String, String)>,
}

/// The run's Docker network: [`NETWORK`] on the bridge [`BRIDGE`], [`SUBNET`] with the host at
/// [`GATEWAY`], containers in [`IP_RANGE`].
pub fn network() -> Network {
    Network {
        name: NETWORK.into(),
        subnet: SUBNET.into(),
        ip_range: IP_RANGE.into(),
        gateway: GATEWAY.to_string(),
        options: vec![("com.docker.network.bridge.name".into(), BRIDGE.into())],
    }
}

/// `command` as run by a process that is root (`root`) or not: as it is, or through `sudo -n`
/// (never asks for a password: it fails instead).
pub fn privileged(command: &[&str], root: bool) -> Vec<String> {
    let sudo: &[&str] = if root { &[] } else { &["sudo", "-n"] };
    sudo.iter().chain(command).map(|w| w.to_string()).collect()
}

/// The command that adds outside address `ip` to the bridge (again: no change).
pub fn address_command(ip: Ipv4Addr, root: bool) -> Vec<String> {
    let cidr = format!("{ip}/32");
    privileged(&["ip", "addr", "replace", &cidr, "dev", BRIDGE], root)
}

/// The commands that route k3s's Service and pod networks from the host via the k3s container's
/// address `k3s` on the network.
pub fn route_commands(k3s: Ipv4Addr, root: bool) -> Vec<Vec<String>> {
    let via = k3s.to_string();
    [SERVICE_CIDR, CLUSTER_CIDR]
        .iter()
        .map(|cidr| {
            privileged(
                &["ip", "route", "replace", cidr, "via", &via, "dev", BRIDGE],
                root,
            )
        })
        .collect()
}

/// The CoreDNS server block answering `entries` (address, name) as the node's dnsmasq answers its
/// outside hosts file: one block whose zones are the names themselves (so no zone of another
/// block is claimed twice), a `hosts` table of the entries (sorted, each once), anything else
/// under those names forwarded. No entries: no block (an empty file).
pub fn coredns_server(entries: &[(Ipv4Addr, String)]) -> String {
    let mut names: Vec<&str> = entries.iter().map(|(_, n)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return String::new();
    }
    let mut lines: Vec<String> = entries
        .iter()
        .map(|(ip, n)| format!("        {ip} {n}\n"))
        .collect();
    lines.sort();
    lines.dedup();
    let zones: Vec<String> = names.iter().map(|n| format!("{n}:53")).collect();
    format!(
        "{} {{\n    hosts {{\n{}        ttl 5\n        fallthrough\n    }}\n    forward . /etc/resolv.conf\n}}\n",
        zones.join(" "),
        lines.concat()
    )
}

/// Which names of `entries` do not yet answer as `entries` say: `answers(name)` is what the
/// cluster DNS answers for `name` now (its A records). [`coredns_server`]'s text is read by CoreDNS
/// only after the kubelet updates the mounted ConfigMap and CoreDNS's `reload` notices, so the k3s
/// backend waits until this is empty, as the node's dnsmasq answers once signalled.
pub fn unanswered(
    entries: &[(Ipv4Addr, String)],
    mut answers: impl FnMut(&str) -> Vec<Ipv4Addr>,
) -> Vec<String> {
    let mut names: Vec<&str> = entries.iter().map(|(_, n)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter(|name| {
            let got = answers(name);
            !entries
                .iter()
                .filter(|(_, n)| n == name)
                .all(|(ip, _)| got.contains(ip))
        })
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn the_network_puts_the_host_at_the_gateway_and_containers_below_the_outside_addresses() {
        let n = network();
        assert_eq!(
            n,
            Network {
                name: "sim-k3s".into(),
                subnet: "10.245.0.0/16".into(),
                ip_range: "10.245.0.0/24".into(),
                gateway: "10.245.0.1".into(),
                options: vec![("com.docker.network.bridge.name".into(), "sim-k3s0".into())],
            }
        );
        let outside = crate::node::outside::address(1);
        assert_eq!(outside.octets()[..3], [10, 245, 1], "outside the ip range");
        assert_eq!(
            GATEWAY,
            crate::node::node_config::NODE_IP,
            "as the node's address"
        );
    }

    #[rstest]
    #[case::as_root(true, &["ip", "addr", "replace", "10.245.1.3/32", "dev", "sim-k3s0"])]
    #[case::through_sudo(false, &["sudo", "-n", "ip", "addr", "replace", "10.245.1.3/32", "dev", "sim-k3s0"])]
    fn an_outside_address_goes_on_the_bridge(#[case] root: bool, #[case] want: &[&str]) {
        assert_eq!(
            address_command(crate::node::outside::address(3), root),
            words(want)
        );
    }

    #[rstest]
    #[case::as_root(true, vec![
        words(&["ip", "route", "replace", "10.43.0.0/16", "via", "10.245.0.2", "dev", "sim-k3s0"]),
        words(&["ip", "route", "replace", "10.42.0.0/16", "via", "10.245.0.2", "dev", "sim-k3s0"]),
    ])]
    #[case::through_sudo(false, vec![
        words(&["sudo", "-n", "ip", "route", "replace", "10.43.0.0/16", "via", "10.245.0.2", "dev", "sim-k3s0"]),
        words(&["sudo", "-n", "ip", "route", "replace", "10.42.0.0/16", "via", "10.245.0.2", "dev", "sim-k3s0"]),
    ])]
    fn the_host_routes_services_and_pods_via_the_k3s_container(
        #[case] root: bool,
        #[case] want: Vec<Vec<String>>,
    ) {
        assert_eq!(route_commands(Ipv4Addr::new(10, 245, 0, 2), root), want);
    }

    #[test]
    fn the_cluster_dns_lies_in_the_routed_service_network() {
        let [a, b, ..] = CLUSTER_DNS.octets();
        assert!(
            SERVICE_CIDR.starts_with(&format!("{a}.{b}.")),
            "{SERVICE_CIDR}"
        );
    }

    fn at(n: u8, name: &str) -> (Ipv4Addr, String) {
        (crate::node::outside::address(n), name.into())
    }

    #[rstest]
    #[case::nothing_named(vec![], "")]
    #[case::story_03s_legacy_cluster(
        vec![
            at(2, "nats-2.legacy.example.internal"),
            at(1, "nats-1.legacy.example.internal"),
            at(1, "nats-1.legacy.example.internal"),
        ],
        "nats-1.legacy.example.internal:53 nats-2.legacy.example.internal:53 {\n    hosts {\n        \
         10.245.1.1 nats-1.legacy.example.internal\n        10.245.1.2 nats-2.legacy.example.internal\n        \
         ttl 5\n        fallthrough\n    }\n    forward . /etc/resolv.conf\n}\n",
    )]
    #[case::story_13s_partner_gateways_and_west(
        vec![
            at(21, "gw.core-a.partner.example.com"),
            at(22, "gw.core-a.partner.example.com"),
            (Ipv4Addr::new(10, 43, 7, 9), "gw.west.example.org".into()),
        ],
        "gw.core-a.partner.example.com:53 gw.west.example.org:53 {\n    hosts {\n        \
         10.245.1.21 gw.core-a.partner.example.com\n        10.245.1.22 gw.core-a.partner.example.com\n        \
         10.43.7.9 gw.west.example.org\n        ttl 5\n        fallthrough\n    }\n    forward . /etc/resolv.conf\n}\n",
    )]
    #[case::story_14s_nsc_servers(
        vec![at(11, "nats-1.nsc.example.internal")],
        "nats-1.nsc.example.internal:53 {\n    hosts {\n        10.245.1.11 nats-1.nsc.example.internal\n        \
         ttl 5\n        fallthrough\n    }\n    forward . /etc/resolv.conf\n}\n",
    )]
    fn coredns_answers_the_outside_names_as_the_nodes_hosts_file(
        #[case] entries: Vec<(Ipv4Addr, String)>,
        #[case] want: &str,
    ) {
        assert_eq!(coredns_server(&entries), want);
    }

    #[rstest]
    #[case::all_answered(&[(1, "a.example.org"), (2, "a.example.org")], &[1, 2], &[])]
    #[case::one_address_missing(&[(1, "a.example.org"), (2, "a.example.org")], &[1], &["a.example.org"])]
    #[case::nothing_answered_yet(&[(1, "a.example.org"), (3, "b.example.org")], &[], &["a.example.org", "b.example.org"])]
    fn a_name_is_answered_when_every_address_given_it_is(
        #[case] entries: &[(u8, &str)],
        #[case] answered: &[u8],
        #[case] want: &[&str],
    ) {
        let entries: Vec<(Ipv4Addr, String)> =
            entries.iter().map(|(n, name)| at(*n, name)).collect();
        let got = unanswered(&entries, |_| {
            answered
                .iter()
                .map(|n| crate::node::outside::address(*n))
                .collect()
        });
        assert_eq!(got, want.iter().map(|w| w.to_string()).collect::<Vec<_>>());
    }
}
