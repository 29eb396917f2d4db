//! CEL rows of the `nats` and `cluster` groups: every rule of NatsConnection, NatsReferenceGrant,
//! NatsOperatorTrust, NatsAccountTrust and NatsCluster, each with accepted rows next to refused
//! ones so a rule that refuses everything (or nothing) fails the table.

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

/// A `nats.mikluko.io` object of kind `$kind` named `$name` with the spec lines `$spec`.
macro_rules! nats {
    ($kind:literal, $name:literal, $spec:literal) => {
        concat!(
            "apiVersion: nats.mikluko.io/v1beta1\nkind: ",
            $kind,
            "\nmetadata:\n  name: ",
            $name,
            "\nspec:\n",
            $spec
        )
    };
}

const NC: &str = "NatsCluster";

/// The rows of the nats and cluster kinds.
pub fn cases() -> Vec<Case> {
    let mut rows = Vec::new();
    rows.extend(connection_and_grant());
    rows.extend(trusts());
    rows.extend(cluster_create());
    rows.extend(cluster_transition());
    rows
}

fn connection_and_grant() -> Vec<Case> {
    vec![
        create(
            "connection: one server is enough",
            "NatsConnection",
            nats!(
                "NatsConnection",
                "conn-one",
                "  servers: [\"nats://demo.nats.svc:4222\"]\n"
            ),
            Accepted,
        ),
        create(
            "connection: servers, tls.ca and credentials together",
            "NatsConnection",
            nats!(
                "NatsConnection",
                "conn-full",
                r#"  servers: ["tls://hub-0.example.com:4222", "tls://hub-1.example.com:4222"]
  tls:
    ca:
      secretKeyRef: {name: hub-ca}
  credentials:
    secretKeyRef: {name: app-creds, key: app.creds}
"#
            ),
            Accepted,
        ),
        create(
            "connection: servers must list at least one NATS URL",
            "NatsConnection",
            nats!("NatsConnection", "conn-empty", "  servers: []\n"),
            Refused("spec.servers must list at least one NATS URL"),
        ),
        create(
            "grant: one from and one to",
            "NatsReferenceGrant",
            nats!(
                "NatsReferenceGrant",
                "grant-ok",
                r#"  from:
  - {group: jetstream.nats.mikluko.io, kind: NatsStream, namespace: team-a}
  to:
  - {group: nats.mikluko.io, kind: NatsConnection, name: shared}
"#
            ),
            Accepted,
        ),
        create(
            "grant: to without a name admits every object of the kind",
            "NatsReferenceGrant",
            nats!(
                "NatsReferenceGrant",
                "grant-kind",
                r#"  from:
  - {group: cluster.nats.mikluko.io, kind: NatsCluster, namespace: edge}
  to:
  - {group: nats.mikluko.io, kind: NatsOperatorTrust}
"#
            ),
            Accepted,
        ),
        create(
            "grant: from must list at least one referrer",
            "NatsReferenceGrant",
            nats!(
                "NatsReferenceGrant",
                "grant-nofrom",
                r#"  from: []
  to:
  - {group: nats.mikluko.io, kind: NatsConnection}
"#
            ),
            Refused("spec.from must list at least one referrer"),
        ),
        create(
            "grant: to must list at least one target",
            "NatsReferenceGrant",
            nats!(
                "NatsReferenceGrant",
                "grant-noto",
                r#"  from:
  - {group: jetstream.nats.mikluko.io, kind: NatsStream, namespace: team-a}
  to: []
"#
            ),
            Refused("spec.to must list at least one target"),
        ),
    ]
}

fn trusts() -> Vec<Case> {
    vec![
        create(
            "operator trust: operatorRef alone",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-ref",
                "  operatorRef: {name: main}\n"
            ),
            Accepted,
        ),
        create(
            "operator trust: literal operatorJWT with systemAccountJWT",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-literal",
                "  operatorJWT: eyJ0eXAiOiJKV1QifQ.op.sig\n  systemAccountJWT: eyJ0eXAiOiJKV1QifQ.sys.sig\n"
            ),
            Accepted,
        ),
        create(
            "operator trust: operatorRef and literal JWTs are exclusive",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-both",
                "  operatorRef: {name: main}\n  operatorJWT: eyJ0eXAiOiJKV1QifQ.op.sig\n  systemAccountJWT: eyJ0eXAiOiJKV1QifQ.sys.sig\n"
            ),
            Refused("set exactly one of spec.operatorRef and the literal"),
        ),
        create(
            "operator trust: neither operatorRef nor literal JWTs",
            "NatsOperatorTrust",
            nats!("NatsOperatorTrust", "ot-none", "  {}\n"),
            Refused("set exactly one of spec.operatorRef and the literal"),
        ),
        create(
            "operator trust: operatorJWT without systemAccountJWT",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-half",
                "  operatorJWT: eyJ0eXAiOiJKV1QifQ.op.sig\n"
            ),
            Refused("spec.operatorJWT and spec.systemAccountJWT are set together"),
        ),
        create(
            "operator trust: systemAccountJWT without operatorJWT",
            "NatsOperatorTrust",
            nats!(
                "NatsOperatorTrust",
                "ot-half-sys",
                "  systemAccountJWT: eyJ0eXAiOiJKV1QifQ.sys.sig\n"
            ),
            Refused("spec.operatorJWT and spec.systemAccountJWT are set together"),
        ),
        create(
            "account trust: accountRef alone",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-ref",
                "  accountRef: {name: app, namespace: team-a}\n"
            ),
            Accepted,
        ),
        create(
            "account trust: publicKey alone",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-key",
                "  publicKey: ADU2SKHB4XZB6AZ6U7CA32PNWVS7Y7WKL2N3U3EJVHVIKZGEQJ2F6HAB\n"
            ),
            Accepted,
        ),
        create(
            "account trust: publicKey with a jwt copy",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-key-jwt",
                "  publicKey: ADU2SKHB4XZB6AZ6U7CA32PNWVS7Y7WKL2N3U3EJVHVIKZGEQJ2F6HAB\n  jwt: eyJ0eXAiOiJKV1QifQ.acc.sig\n"
            ),
            Accepted,
        ),
        create(
            "account trust: accountRef and publicKey are exclusive",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-both",
                "  accountRef: {name: app}\n  publicKey: ADU2SKHB4XZB6AZ6U7CA32PNWVS7Y7WKL2N3U3EJVHVIKZGEQJ2F6HAB\n"
            ),
            Refused("set exactly one of spec.accountRef and spec.publicKey"),
        ),
        create(
            "account trust: neither accountRef nor publicKey",
            "NatsAccountTrust",
            nats!("NatsAccountTrust", "at-none", "  {}\n"),
            Refused("set exactly one of spec.accountRef and spec.publicKey"),
        ),
        create(
            "account trust: jwt only with publicKey (not with accountRef)",
            "NatsAccountTrust",
            nats!(
                "NatsAccountTrust",
                "at-ref-jwt",
                "  accountRef: {name: app}\n  jwt: eyJ0eXAiOiJKV1QifQ.acc.sig\n"
            ),
            Refused("spec.jwt is set only together with spec.publicKey"),
        ),
    ]
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
