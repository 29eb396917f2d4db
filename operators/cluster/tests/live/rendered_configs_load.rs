//! Oracle: every rendered config passes `nats-server -t -c` of the pinned version
//! (ARCHITECTURE.md §6). Plans are generated over every block the renderer writes.

use std::path::{Path, PathBuf};
use std::process::Command;

use cluster_controller::render::{
    GatewayPlan, GatewayRemote, JetStreamPlan, LeafListenPlan, LeafRemotePlan, Listen,
    ResolverPlan, ServerPlan, TlsFiles, TrustPlan, render,
};
use proptest::prelude::*;

/// The pinned version the renderer targets.
const VERSION: &str = "2.15.1";

/// Real certificate files and real JWTs, made once: `-t` loads certificates and decodes the
/// operator JWT, so placeholders would not test what a server reads.
struct Fixtures {
    dir: tempfile::TempDir,
    tls: TlsFiles,
    operator_jwt: String,
    system_account: String,
    system_jwt: String,
    account: String,
    account_jwt: String,
}

/// Fixtures are shared by every generated case; each case writes its own nats.conf beside them.
fn shared_fixtures() -> &'static Fixtures {
    static FX: std::sync::OnceLock<Fixtures> = std::sync::OnceLock::new();
    FX.get_or_init(fixtures)
}

fn fixtures() -> Fixtures {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).expect("cert");
    let write = |name: &str, text: String| -> String {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write fixture");
        p.display().to_string()
    };
    let cert_file = write("tls.crt", cert.pem());
    let key_file = write("tls.key", key.serialize_pem());
    let ca_file = write("ca.crt", cert.pem());

    let roots = sim::trust::Roots::sign("op").expect("trust roots");
    let (acc, account_jwt) = roots.account("APP").expect("account jwt");
    let sys = &roots.system;
    let (operator_jwt, system_jwt) = (roots.operator_jwt.clone(), roots.system_jwt.clone());
    Fixtures {
        tls: TlsFiles {
            cert_file: Some(cert_file),
            key_file: Some(key_file),
            ca_file: Some(ca_file),
            verify: false,
        },
        system_account: sys.public_key(),
        account: acc.public_key(),
        dir,
        operator_jwt,
        system_jwt,
        account_jwt,
    }
}

/// Memory and file store limits, domain, `sync_interval`.
type JetStreamKnobs = (Option<i64>, Option<i64>, Option<String>, Option<String>);

/// The knobs a generated plan turns.
#[derive(Clone, Debug)]
struct Knobs {
    servers: u16,
    ordinal: u16,
    tags: Vec<(String, String)>,
    client_tls: bool,
    route_tls: bool,
    jetstream: Option<JetStreamKnobs>,
    gateway: Option<(bool, u8, bool, bool)>,
    leaf_listener: Option<bool>,
    leaf_remotes: u8,
    trust: Option<(bool, bool)>,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    let tag = ("[a-z][a-z0-9]{0,8}", "[a-z0-9][a-z0-9.-]{0,8}");
    (
        (1u16..=5, 0u16..5, proptest::collection::vec(tag, 0..3)),
        (any::<bool>(), any::<bool>()),
        proptest::option::of((
            proptest::option::of(1i64 << 20..1i64 << 34),
            proptest::option::of(1i64 << 20..1i64 << 40),
            proptest::option::of("[a-z][a-z0-9]{0,10}"),
            // spec.jetstream.syncInterval renders `always` or a positive Go duration.
            proptest::option::of(prop_oneof![
                Just("always".to_string()),
                "[1-9][0-9]{0,3}(ms|s|m|h)",
                "[1-9]h[1-5][0-9]m[1-9]s",
            ]),
        )),
        proptest::option::of((any::<bool>(), 0u8..3, any::<bool>(), any::<bool>())),
        proptest::option::of(any::<bool>()),
        0u8..3,
        proptest::option::of((any::<bool>(), any::<bool>())),
    )
        .prop_map(
            |(
                (servers, ordinal, tags),
                (client_tls, route_tls),
                jetstream,
                gateway,
                leaf_listener,
                leaf_remotes,
                trust,
            )| Knobs {
                servers,
                ordinal: ordinal % servers,
                tags,
                client_tls,
                route_tls,
                jetstream,
                gateway,
                leaf_listener,
                leaf_remotes,
                trust,
            },
        )
}

fn plan(k: &Knobs, fx: &Fixtures) -> ServerPlan {
    let tls = |on: bool, verify: bool| {
        on.then(|| TlsFiles {
            verify,
            ..fx.tls.clone()
        })
    };
    let dir = fx.dir.path();
    ServerPlan {
        server_name: format!("demo-{}", k.ordinal),
        cluster_name: "demo".into(),
        client: Listen::new("127.0.0.1", 4222),
        client_tls: tls(k.client_tls, false),
        monitor: Listen::new("127.0.0.1", 8222),
        route_listen: Listen::new("127.0.0.1", 6222),
        routes: (0..k.servers)
            .map(|i| format!("nats://demo-{i}.demo-headless.ns.svc:6222"))
            .collect(),
        route_tls: tls(k.route_tls, true),
        tags: k.tags.iter().map(|(a, b)| format!("{a}:{b}")).collect(),
        pid_file: dir.join("nats.pid").display().to_string(),
        jetstream: k
            .jetstream
            .as_ref()
            .map(|(mem, file, domain, sync)| JetStreamPlan {
                store_dir: dir.join("js").display().to_string(),
                max_memory_store: *mem,
                max_file_store: *file,
                domain: domain.clone(),
                sync_interval: sync.clone(),
            }),
        gateway: k
            .gateway
            .map(|(explicit, remotes, advertise, gw_tls)| GatewayPlan {
                name: "demo".into(),
                listen: Listen::new("127.0.0.1", 7222),
                advertise: advertise.then(|| "demo.example.net:7222".into()),
                reject_unknown: explicit,
                remotes: (0..remotes)
                    .map(|i| GatewayRemote {
                        name: format!("member-{i}"),
                        urls: vec![format!("nats://member-{i}.example.net:7222")],
                    })
                    .collect(),
                tls: tls(gw_tls, true),
            }),
        leafnodes: k.leaf_listener.map(|leaf_tls| LeafListenPlan {
            listen: Listen::new("127.0.0.1", 7422),
            advertise: Some("hub.example.net:7422".into()),
            tls: tls(leaf_tls, false),
        }),
        leaf_remotes: (0..k.leaf_remotes)
            .map(|i| LeafRemotePlan {
                urls: vec![format!("nats-leaf://hub-{i}.example.net:7422")],
                credentials: Some(dir.join(format!("remote-{i}.creds")).display().to_string()),
                ca_file: fx.tls.ca_file.clone(),
                // Only an auth plane has named local accounts to bind.
                account: k.trust.map(|_| fx.system_account.clone()),
            })
            .collect(),
        trust: k.trust.map(|(full, preload_account)| {
            let mut preload = vec![(fx.system_account.clone(), fx.system_jwt.clone())];
            if preload_account {
                preload.push((fx.account.clone(), fx.account_jwt.clone()));
            }
            TrustPlan {
                operator: fx.operator_jwt.clone(),
                system_account: fx.system_account.clone(),
                resolver: if full {
                    ResolverPlan::Full {
                        dir: dir.join("resolver").display().to_string(),
                    }
                } else {
                    ResolverPlan::Cache {
                        dir: dir.join("resolver").display().to_string(),
                    }
                },
                preload,
            }
        }),
        lame_duck_duration: "2m".into(),
    }
}

fn server_accepts(bin: &Path, conf: &Path) -> Result<(), String> {
    let out = Command::new(bin)
        .arg("-t")
        .arg("-c")
        .arg(conf)
        .output()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| sim::install::nats_server(VERSION).expect("nats-server installs"))
        .clone()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn every_rendered_config_loads(k in knobs()) {
        let bin = binary();
        let fx = shared_fixtures();
        let text = render(&plan(&k, fx));
        let case_dir = tempfile::tempdir_in(fx.dir.path()).expect("case dir");
        let conf = case_dir.path().join("nats.conf");
        std::fs::write(&conf, &text).expect("write nats.conf");
        if let Err(e) = server_accepts(&bin, &conf) {
            prop_assert!(false, "nats-server {VERSION} refused the render of {k:?}:\n{e}\n--- nats.conf ---\n{text}");
        }
    }
}

#[test]
fn the_oracle_refuses_a_broken_config() {
    // The oracle must be able to fail: a config key the server does not know fails the load.
    let bin = binary();
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("nats.conf");
    std::fs::write(
        &conf,
        "listen: \"127.0.0.1:4222\"\nno_such_key_anywhere: 1\n",
    )
    .expect("write");
    assert!(server_accepts(&bin, &conf).is_err());
    // Nor does it take a sync_interval that is neither `always` nor a duration, so the rows
    // above that render one are judged by the server.
    std::fs::write(
        &conf,
        "jetstream { store_dir: \"/tmp/x\", sync_interval: \"sometimes\" }\n",
    )
    .expect("write");
    assert!(server_accepts(&bin, &conf).is_err());
}
