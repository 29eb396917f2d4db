//! CEL rows of the `cluster` group: every rule of NatsCluster, creates and transitions, each with
//! accepted rows next to refused ones so a rule that refuses everything (or nothing) fails the
//! table.

use super::Expect::{Accepted, Refused};
use super::{Case, create, update};

/// A NatsCluster object named `$name` with the spec lines `$spec` (indented by two spaces).
macro_rules! cluster {
    ($name:literal, $spec:literal) => {
        concat!(
            "apiVersion: cluster.nats.mikluko.io/v1beta1\nkind: NatsCluster\nmetadata:\n  name: ",
            $name,
            "\nspec:\n",
            $spec
        )
    };
}

const NC: &str = "NatsCluster";

/// The rows of NatsCluster.
pub fn cases() -> Vec<Case> {
    let mut rows = Vec::new();
    rows.extend(cluster_create());
    rows.extend(cluster_transition());
    rows
}

fn cluster_create() -> Vec<Case> {
    vec![
        create(
            "cluster: minimal spec (version and replicas)",
            NC,
            cluster!("nc-minimal", "  version: \"2.15.1\"\n  replicas: 3\n"),
            Accepted,
        ),
        create(
            "cluster: version 2.15.0 is the minimum and accepted",
            NC,
            cluster!("nc-v2150", "  version: \"2.15.0\"\n  replicas: 1\n"),
            Accepted,
        ),
        create(
            "cluster: a later major is accepted at create",
            NC,
            cluster!("nc-v300", "  version: \"3.0.0\"\n  replicas: 1\n"),
            Accepted,
        ),
        create(
            "cluster: version below 2.15.0 is refused",
            NC,
            cluster!("nc-v2143", "  version: \"2.14.3\"\n  replicas: 3\n"),
            Refused("spec.version must be 2.15.0 or later"),
        ),
        create(
            "cluster: a 2.15.0 pre-release is below 2.15.0",
            NC,
            cluster!("nc-v2150rc", "  version: \"2.15.0-rc.2\"\n  replicas: 3\n"),
            Refused("spec.version must be 2.15.0 or later"),
        ),
        create(
            "cluster: version with a v prefix is not a semantic version",
            NC,
            cluster!("nc-vprefix", "  version: \"v2.15.1\"\n  replicas: 3\n"),
            Refused("spec.version must be a semantic version"),
        ),
        create(
            "cluster: version without a patch is not a semantic version",
            NC,
            cluster!("nc-vnopatch", "  version: \"2.15\"\n  replicas: 3\n"),
            Refused("spec.version must be a semantic version"),
        ),
        create(
            "cluster: replicas must be at least 1",
            NC,
            cluster!("nc-r0", "  version: \"2.15.1\"\n  replicas: 0\n"),
            Refused("spec.replicas must be at least 1"),
        ),
        create(
            "cluster: one replica is accepted",
            NC,
            cluster!("nc-r1", "  version: \"2.15.1\"\n  replicas: 1\n"),
            Accepted,
        ),
        create(
            "cluster: image pinned by a sha256 digest",
            NC,
            cluster!(
                "nc-digest",
                "  version: \"2.15.1\"\n  replicas: 3\n  image:\n    repository: registry.example.com/nats\n    digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
            ),
            Accepted,
        ),
        create(
            "cluster: image digest with upper-case hex is refused",
            NC,
            cluster!(
                "nc-digest-upper",
                "  version: \"2.15.1\"\n  replicas: 3\n  image:\n    digest: sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\n"
            ),
            Refused("spec.image.digest must be sha256:"),
        ),
        create(
            "cluster: image digest too short is refused",
            NC,
            cluster!(
                "nc-digest-short",
                "  version: \"2.15.1\"\n  replicas: 3\n  image:\n    digest: sha256:abc123\n"
            ),
            Refused("spec.image.digest must be sha256:"),
        ),
        create(
            "cluster: exporter image digest follows the same pattern",
            NC,
            cluster!(
                "nc-exp-digest",
                "  version: \"2.15.1\"\n  replicas: 3\n  exporter:\n    image:\n      tag: 0.17.3\n      digest: \"0123\"\n"
            ),
            Refused("spec.exporter.image.digest must be sha256:"),
        ),
        create(
            "cluster: exporter off, monitor policy off, resources and peers set",
            NC,
            cluster!(
                "nc-exporter",
                r#"  version: "2.15.1"
  replicas: 3
  exporter:
    enabled: false
    from:
    - namespaceSelector:
        matchLabels: {kubernetes.io/metadata.name: monitoring}
    resources:
      requests: {cpu: 10m, memory: 32Mi}
  monitor:
    networkPolicy: false
"#
            ),
            Accepted,
        ),
        create(
            "cluster: client tls from a Secret",
            NC,
            cluster!(
                "nc-tls-secret",
                "  version: \"2.15.1\"\n  replicas: 3\n  tls:\n    secretRef: {name: demo-client-tls}\n"
            ),
            Accepted,
        ),
        create(
            "cluster: client tls from cert-manager",
            NC,
            cluster!(
                "nc-tls-cm",
                "  version: \"2.15.1\"\n  replicas: 3\n  tls:\n    certManager:\n      issuerRef: {name: ca-issuer, kind: ClusterIssuer}\n"
            ),
            Accepted,
        ),
        create(
            "cluster: listener tls with both secretRef and certManager is refused",
            NC,
            cluster!(
                "nc-tls-both",
                "  version: \"2.15.1\"\n  replicas: 3\n  tls:\n    secretRef: {name: demo-client-tls}\n    certManager:\n      issuerRef: {name: ca-issuer}\n"
            ),
            Refused("exactly one of secretRef and certManager"),
        ),
        create(
            "cluster: listener tls with neither secretRef nor certManager is refused",
            NC,
            cluster!(
                "nc-tls-none",
                "  version: \"2.15.1\"\n  replicas: 3\n  tls: {}\n"
            ),
            Refused("exactly one of secretRef and certManager"),
        ),
        create(
            "cluster: route tls turned off without a certificate",
            NC,
            cluster!(
                "nc-routes-off",
                "  version: \"2.15.1\"\n  replicas: 3\n  routes:\n    tls:\n      enabled: false\n"
            ),
            Accepted,
        ),
        create(
            "cluster: route tls from cert-manager, enabled by default",
            NC,
            cluster!(
                "nc-routes-cm",
                "  version: \"2.15.1\"\n  replicas: 3\n  routes:\n    tls:\n      certManager:\n        issuerRef: {name: ca-issuer}\n"
            ),
            Accepted,
        ),
        create(
            "cluster: route tls names a certificate only while enabled",
            NC,
            cluster!(
                "nc-routes-off-cert",
                "  version: \"2.15.1\"\n  replicas: 3\n  routes:\n    tls:\n      enabled: false\n      secretRef: {name: demo-routes-tls}\n"
            ),
            Refused("names a certificate only while route TLS is enabled"),
        ),
        create(
            "cluster: route tls with both secretRef and certManager is refused",
            NC,
            cluster!(
                "nc-routes-both",
                "  version: \"2.15.1\"\n  replicas: 3\n  routes:\n    tls:\n      secretRef: {name: demo-routes-tls}\n      certManager:\n        issuerRef: {name: ca-issuer}\n"
            ),
            Refused("spec.routes.tls sets at most one of secretRef and certManager"),
        ),
        create(
            "cluster: auth with trustRef, system credentials, Cache resolver and account trusts",
            NC,
            cluster!(
                "nc-auth",
                r#"  version: "2.15.1"
  replicas: 3
  auth:
    trustRef: {name: main}
    systemCredentials:
      secretKeyRef: {name: cluster-controller-creds}
    resolver: Cache
    accountTrustRefs:
    - {name: app}
"#
            ),
            Accepted,
        ),
        create(
            "cluster: leafnodes listener requires auth",
            NC,
            cluster!(
                "nc-leafnodes-noauth",
                "  version: \"2.15.1\"\n  replicas: 3\n  leafnodes:\n    advertise: hub.example.com:7422\n"
            ),
            Refused("spec.leafnodes requires spec.auth"),
        ),
        create(
            "cluster: leafnodes listener with auth",
            NC,
            cluster!(
                "nc-leafnodes-auth",
                r#"  version: "2.15.1"
  replicas: 3
  auth:
    trustRef: {name: main}
  leafnodes:
    tls:
      secretRef: {name: hub-leaf-tls}
    service:
      type: LoadBalancer
    advertise: hub.example.com:7422
"#
            ),
            Accepted,
        ),
        create(
            "cluster: a leaf running JetStream must set jetstream.domain",
            NC,
            cluster!(
                "nc-leaf-js-nodomain",
                r#"  version: "2.15.1"
  replicas: 1
  jetstream: {}
  leafRemotes:
  - connectionRef: {name: hub}
"#
            ),
            Refused("must set spec.jetstream.domain"),
        ),
        create(
            "cluster: a leaf running JetStream with its own domain",
            NC,
            cluster!(
                "nc-leaf-js-domain",
                r#"  version: "2.15.1"
  replicas: 1
  jetstream:
    domain: edge
    volumeClaimTemplate:
      spec:
        accessModes: [ReadWriteOnce]
        resources:
          requests: {storage: 10Gi}
  leafRemotes:
  - connectionRef: {name: hub, namespace: hub-conn}
    localSystemAccount: true
"#
            ),
            Accepted,
        ),
        create(
            "cluster: a leaf without JetStream needs no domain",
            NC,
            cluster!(
                "nc-leaf-nojs",
                "  version: \"2.15.1\"\n  replicas: 1\n  leafRemotes:\n  - connectionRef: {name: hub}\n"
            ),
            Accepted,
        ),
        create(
            "cluster: JetStream without leafRemotes needs no domain",
            NC,
            cluster!(
                "nc-js-nodomain",
                "  version: \"2.15.1\"\n  replicas: 3\n  jetstream:\n    limits: {maxMemoryStore: 1Gi}\n"
            ),
            Accepted,
        ),
        create(
            "cluster: a leaf remote binds at most one of localAccountTrustRef and localSystemAccount",
            NC,
            cluster!(
                "nc-leaf-both-local",
                r#"  version: "2.15.1"
  replicas: 1
  leafRemotes:
  - connectionRef: {name: hub}
    localAccountTrustRef: {name: app}
    localSystemAccount: true
"#
            ),
            Refused("at most one of localAccountTrustRef and localSystemAccount"),
        ),
        create(
            "cluster: a leaf remote with localAccountTrustRef and localSystemAccount false",
            NC,
            cluster!(
                "nc-leaf-acct",
                r#"  version: "2.15.1"
  replicas: 1
  leafRemotes:
  - connectionRef: {name: hub}
    localAccountTrustRef: {name: app}
    localSystemAccount: false
"#
            ),
            Accepted,
        ),
        create(
            "cluster: gateway remotes must list at least one member",
            NC,
            cluster!(
                "nc-gw-empty",
                r#"  version: "2.15.1"
  replicas: 3
  gateway:
    discovery: Explicit
    remotes: []
"#
            ),
            Refused("spec.gateway.remotes must list at least one member"),
        ),
        create(
            "cluster: gateway with explicit remotes, tls and a LoadBalancer service",
            NC,
            cluster!(
                "nc-gw",
                r#"  version: "2.15.1"
  replicas: 3
  gateway:
    discovery: Explicit
    remotes:
    - {name: east, url: "nats://east-gw.example.com:7222"}
    - {name: west, url: "nats://west-gw.example.com:7222"}
    tls:
      secretRef: {name: east-gw-tls}
    service:
      type: LoadBalancer
      annotations: {service.beta.kubernetes.io/aws-load-balancer-scheme: internet-facing}
      loadBalancerSourceRanges: ["10.0.0.0/8", "2001:db8::/32"]
      loadBalancerClass: service.k8s.aws/nlb
    advertise: east-gw.example.com:7222
"#
            ),
            Accepted,
        ),
        create(
            "cluster: loadBalancerSourceRanges only with type LoadBalancer",
            NC,
            cluster!(
                "nc-gw-ranges-clusterip",
                r#"  version: "2.15.1"
  replicas: 3
  gateway:
    discovery: Gossip
    remotes:
    - {name: east, url: "nats://east-gw.example.com:7222"}
    service:
      type: ClusterIP
      loadBalancerSourceRanges: ["10.0.0.0/8"]
"#
            ),
            Refused("loadBalancerSourceRanges is set only with type LoadBalancer"),
        ),
        create(
            "cluster: loadBalancerClass only with type LoadBalancer (type omitted)",
            NC,
            cluster!(
                "nc-leaf-class-notype",
                r#"  version: "2.15.1"
  replicas: 3
  auth:
    trustRef: {name: main}
  leafnodes:
    service:
      loadBalancerClass: service.k8s.aws/nlb
"#
            ),
            Refused("loadBalancerClass is set only with type LoadBalancer"),
        ),
        create(
            "cluster: every loadBalancerSourceRanges entry must be a CIDR",
            NC,
            cluster!(
                "nc-gw-badcidr",
                r#"  version: "2.15.1"
  replicas: 3
  gateway:
    discovery: Explicit
    remotes:
    - {name: east, url: "nats://east-gw.example.com:7222"}
    service:
      type: LoadBalancer
      loadBalancerSourceRanges: ["10.0.0.0/8", "10.1.2.3"]
"#
            ),
            Refused("must be a CIDR"),
        ),
        create(
            "cluster: podTemplate spec passes through unvalidated",
            NC,
            cluster!(
                "nc-podtemplate",
                r#"  version: "2.15.1"
  replicas: 3
  serverTags: {region: eu-west-1, az: a}
  resources:
    limits: {memory: 2Gi}
  podTemplate:
    metadata:
      labels: {team: platform}
    spec:
      priorityClassName: nats
      containers:
      - name: nats
        env:
        - {name: EXTRA, value: "1"}
  rollout:
    paused: true
"#
            ),
            Accepted,
        ),
    ]
}

fn cluster_transition() -> Vec<Case> {
    const V2151: &str = cluster!("nc-upgrade", "  version: \"2.15.1\"\n  replicas: 3\n");
    const V2162: &str = cluster!("nc-upgrade", "  version: \"2.16.2\"\n  replicas: 3\n");
    const V2171: &str = cluster!("nc-upgrade", "  version: \"2.17.1\"\n  replicas: 3\n");
    const LB_NLB: &str = cluster!(
        "nc-lbclass",
        r#"  version: "2.15.1"
  replicas: 3
  gateway:
    discovery: Explicit
    remotes:
    - {name: east, url: "nats://east-gw.example.com:7222"}
    tls:
      secretRef: {name: east-gw-tls}
    service:
      type: LoadBalancer
      loadBalancerClass: service.k8s.aws/nlb
"#
    );
    const LB_OTHER: &str = cluster!(
        "nc-lbclass",
        r#"  version: "2.15.1"
  replicas: 3
  gateway:
    discovery: Explicit
    remotes:
    - {name: east, url: "nats://east-gw.example.com:7222"}
    tls:
      secretRef: {name: east-gw-tls}
    service:
      type: LoadBalancer
      loadBalancerClass: example.com/other-lb
"#
    );
    const LB_NONE: &str = cluster!(
        "nc-lbclass",
        r#"  version: "2.15.1"
  replicas: 3
  gateway:
    discovery: Explicit
    remotes:
    - {name: east, url: "nats://east-gw.example.com:7222"}
    tls:
      secretRef: {name: east-gw-tls}
    service:
      type: LoadBalancer
"#
    );
    const CLUSTERIP: &str = cluster!(
        "nc-lbclass",
        r#"  version: "2.15.1"
  replicas: 3
  gateway:
    discovery: Explicit
    remotes:
    - {name: east, url: "nats://east-gw.example.com:7222"}
    tls:
      secretRef: {name: east-gw-tls}
    service:
      type: ClusterIP
"#
    );
    const LB_NLB_5: &str = cluster!(
        "nc-lbclass",
        r#"  version: "2.15.1"
  replicas: 5
  gateway:
    discovery: Explicit
    remotes:
    - {name: east, url: "nats://east-gw.example.com:7222"}
    - {name: west, url: "nats://west-gw.example.com:7222"}
    tls:
      secretRef: {name: east-gw-tls}
    service:
      type: LoadBalancer
      loadBalancerClass: service.k8s.aws/nlb
"#
    );
    vec![
        update(
            "cluster: any patch change is allowed",
            NC,
            V2151,
            cluster!("nc-upgrade", "  version: \"2.15.7\"\n  replicas: 3\n"),
            Accepted,
        ),
        update(
            "cluster: a patch downgrade is allowed",
            NC,
            cluster!("nc-upgrade", "  version: \"2.15.7\"\n  replicas: 3\n"),
            V2151,
            Accepted,
        ),
        update(
            "cluster: one minor up is allowed",
            NC,
            V2151,
            V2162,
            Accepted,
        ),
        update(
            "cluster: one minor down is allowed",
            NC,
            V2162,
            V2151,
            Accepted,
        ),
        update(
            "cluster: two minors up is refused",
            NC,
            V2151,
            V2171,
            Refused("its minor by at most one step"),
        ),
        update(
            "cluster: two minors down is refused",
            NC,
            V2171,
            V2151,
            Refused("its minor by at most one step"),
        ),
        update(
            "cluster: a major change is refused",
            NC,
            V2151,
            cluster!("nc-upgrade", "  version: \"3.15.1\"\n  replicas: 3\n"),
            Refused("its minor by at most one step"),
        ),
        update(
            "cluster: a version below 2.15.0 is refused on update too",
            NC,
            V2151,
            cluster!("nc-upgrade", "  version: \"2.14.9\"\n  replicas: 3\n"),
            Refused("spec.version must be 2.15.0 or later"),
        ),
        update(
            "cluster: scaling without a version change is allowed",
            NC,
            V2151,
            cluster!("nc-upgrade", "  version: \"2.15.1\"\n  replicas: 5\n"),
            Accepted,
        ),
        update(
            "cluster: scaling to zero is refused on update",
            NC,
            V2151,
            cluster!("nc-upgrade", "  version: \"2.15.1\"\n  replicas: 0\n"),
            Refused("spec.replicas must be at least 1"),
        ),
        update(
            "cluster: loadBalancerClass is immutable while LoadBalancer (changed)",
            NC,
            LB_NLB,
            LB_OTHER,
            Refused("loadBalancerClass is immutable while the Service is of type LoadBalancer"),
        ),
        update(
            "cluster: loadBalancerClass is immutable while LoadBalancer (removed)",
            NC,
            LB_NLB,
            LB_NONE,
            Refused("loadBalancerClass is immutable while the Service is of type LoadBalancer"),
        ),
        update(
            "cluster: loadBalancerClass is immutable while LoadBalancer (added)",
            NC,
            LB_NONE,
            LB_NLB,
            Refused("loadBalancerClass is immutable while the Service is of type LoadBalancer"),
        ),
        update(
            "cluster: loadBalancerClass may be set when the Service becomes a LoadBalancer",
            NC,
            CLUSTERIP,
            LB_NLB,
            Accepted,
        ),
        update(
            "cluster: leaving LoadBalancer drops loadBalancerClass",
            NC,
            LB_NLB,
            CLUSTERIP,
            Accepted,
        ),
        update(
            "cluster: unchanged loadBalancerClass with other changes is allowed",
            NC,
            LB_NLB,
            LB_NLB_5,
            Accepted,
        ),
    ]
}
