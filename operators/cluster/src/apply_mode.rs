//! Reload or restart (design §4.2): a rendered-config change reloads a server where every changed
//! field is in the reload allow-list for its version, and restarts it otherwise. A reload succeeds
//! or fails whole, so one restart-only field makes the whole batch a restart.
//!
//! The allow-list mirrors nats-server's `diffOptions` (server/reload.go) for the supported
//! versions; the design cites the restart-only fields it depends on. Where this list is stricter
//! than `diffOptions` it says why next to the field: a restart always applies a change, while a
//! reload the server refuses only costs a fallback to restart, so the list errs towards restart
//! only where the design asks for it or the workload itself changes anyway.

use crate::render::{ServerPlan, TlsFiles};

/// How a changed configuration reaches a running server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApplyMode {
    /// Nothing rendered changed.
    Unchanged,
    /// Every changed field reloads: `$SYS.REQ.SERVER.<id>.RELOAD`, confirmed by `/varz`.
    Reload { changed: Vec<&'static str> },
    /// At least one changed field is restart-only; `restart_only` names them for status.
    Restart {
        changed: Vec<&'static str>,
        restart_only: Vec<&'static str>,
    },
}

impl ApplyMode {
    /// A short reason for `status.config.restartReason`.
    pub fn restart_reason(&self) -> Option<String> {
        match self {
            ApplyMode::Restart { restart_only, .. } => Some(format!(
                "restart-only fields changed: {}",
                restart_only.join(", ")
            )),
            _ => None,
        }
    }
}

/// Whether a field reloads on the given nats-server version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reload {
    Yes,
    No,
}

/// One compared field: its name as the status reports it and whether it reloads.
struct Field {
    name: &'static str,
    reload: Reload,
    changed: bool,
}

/// Decides how `new` reaches a server running `old`, for nats-server `version` (MAJOR.MINOR.PATCH).
///
/// Every supported version (2.15.0 and later) shares today's allow-list; `version` is where a
/// future minor that widens `diffOptions` is told apart.
pub fn apply_mode(old: &ServerPlan, new: &ServerPlan, _version: &str) -> ApplyMode {
    let fields: Vec<Field> = [
        listener_fields(old, new),
        jetstream_fields(old, new),
        gateway_and_leaf_fields(old, new),
        trust_fields(old, new),
    ]
    .into_iter()
    .flatten()
    .collect();

    let changed: Vec<&'static str> = fields
        .iter()
        .filter(|x| x.changed)
        .map(|x| x.name)
        .collect();
    if changed.is_empty() {
        return ApplyMode::Unchanged;
    }
    let restart_only: Vec<&'static str> = fields
        .iter()
        .filter(|x| x.changed && x.reload == Reload::No)
        .map(|x| x.name)
        .collect();
    if restart_only.is_empty() {
        ApplyMode::Reload { changed }
    } else {
        ApplyMode::Restart {
            changed,
            restart_only,
        }
    }
}

/// The server's identity, listeners, routes, tags and listener certificates.
fn listener_fields(old: &ServerPlan, new: &ServerPlan) -> Vec<Field> {
    use Reload::{No, Yes};
    vec![
        // Identity and listeners: the server binds these at start.
        f("server_name", No, old.server_name != new.server_name),
        // diffOptions lets ClusterOpts.Name through; it is the NatsCluster's name, which never
        // changes on a running NATS cluster, and peers key routes on it.
        f("cluster.name", No, old.cluster_name != new.cluster_name),
        f("listen", No, old.client != new.client),
        f("http", No, old.monitor != new.monitor),
        // validateClusterOpts refuses a new route host or port.
        f("cluster.listen", No, old.route_listen != new.route_listen),
        // pidFileOption: the server rewrites its pid file on reload.
        f("pid_file", Yes, old.pid_file != new.pid_file),
        // Lame-duck settings are restart-only (reload.go:1969-1973).
        f(
            "lame_duck_duration",
            No,
            old.lame_duck_duration != new.lame_duck_duration,
        ),
        // Routes (routesOption), tags (tagsOption) and certificates (tlsOption, clusterOption)
        // reload.
        f("cluster.routes", Yes, old.routes != new.routes),
        f("server_tags", Yes, old.tags != new.tags),
        tls_field("tls", &old.client_tls, &new.client_tls),
        tls_field("cluster.tls", &old.route_tls, &new.route_tls),
    ]
}

/// JetStream's store, domain and limits.
fn jetstream_fields(old: &ServerPlan, new: &ServerPlan) -> Vec<Field> {
    use Reload::{No, Yes};
    let js_raised_only = jetstream_limits_only_raised(old, new);
    vec![
        // JetStream: raised limits reload; store_dir, domain and a lowered limit restart.
        // diffOptions also accepts turning JetStream on or off, but its store is a volume the
        // pod template mounts, so the workload changes and restarts anyway.
        f(
            "jetstream",
            No,
            old.jetstream.is_some() != new.jetstream.is_some(),
        ),
        f(
            "jetstream.store_dir",
            No,
            js(old, |j| j.store_dir.clone()) != js(new, |j| j.store_dir.clone()),
        ),
        f(
            "jetstream.domain",
            No,
            js(old, |j| j.domain.clone()) != js(new, |j| j.domain.clone()),
        ),
        // SyncInterval/SyncAlways have no case in diffOptions, whose default refuses them
        // ("config reload not supported for SyncInterval"), so a change restarts.
        f(
            "jetstream.sync_interval",
            No,
            js(old, |j| j.sync_interval.clone()) != js(new, |j| j.sync_interval.clone()),
        ),
        f(
            "jetstream.limits",
            if js_raised_only { Yes } else { No },
            js(old, |j| (j.max_memory_store, j.max_file_store))
                != js(new, |j| (j.max_memory_store, j.max_file_store)),
        ),
    ]
}

/// The gateway, the leafnode listener and the leaf remotes.
fn gateway_and_leaf_fields(old: &ServerPlan, new: &ServerPlan) -> Vec<Field> {
    use Reload::{No, Yes};
    vec![
        // Gateway config is not reloadable (reload.go:1765-1790). diffOptions ignores the
        // gateway's TLS config, but the design restarts on any gateway change.
        f("gateway", No, old.gateway != new.gateway),
        // The leafnode listener's address is restart-only (checkConfigsEqual); its TLS config is
        // ignored there, so new certificate files reload. Remotes are added and removed by reload
        // (reload.go:931-990): a remote is known by URLs, account and credentials, and a changed
        // one is a removal and an addition.
        f("leafnodes", No, leaf_listener(old) != leaf_listener(new)),
        tls_field(
            "leafnodes.tls",
            &old.leafnodes.as_ref().and_then(|l| l.tls.clone()),
            &new.leafnodes.as_ref().and_then(|l| l.tls.clone()),
        ),
        f(
            "leafnodes.remotes",
            Yes,
            old.leaf_remotes != new.leaf_remotes,
        ),
    ]
}

/// The operator, system account, resolver and preloaded accounts.
fn trust_fields(old: &ServerPlan, new: &ServerPlan) -> Vec<Field> {
    use Reload::{No, Yes};
    vec![
        // Trust: the operator (reload.go:1619), system_account, any resolver change (a reloaded
        // resolver is never started, reload.go:2236) and any preloaded account other than the
        // system account's restart. The system account's preload reloads, though the server keeps
        // the preload it started with: the new JWT reaches it as a claims update.
        f(
            "operator",
            No,
            trust(old, |t| t.operator.clone()) != trust(new, |t| t.operator.clone()),
        ),
        f(
            "system_account",
            No,
            trust(old, |t| t.system_account.clone()) != trust(new, |t| t.system_account.clone()),
        ),
        f(
            "resolver",
            No,
            trust(old, |t| t.resolver.clone()) != trust(new, |t| t.resolver.clone()),
        ),
        f(
            "resolver_preload.accounts",
            No,
            preload_other(old) != preload_other(new),
        ),
        f(
            "resolver_preload.system_account",
            Yes,
            preload_system(old) != preload_system(new),
        ),
    ]
}

fn f(name: &'static str, reload: Reload, changed: bool) -> Field {
    Field {
        name,
        reload,
        changed,
    }
}

/// A listener's certificate, key, CA and whether it verifies peers all live in its TLS config,
/// which reloads (tlsOption for clients, clusterOption for routes, the leafnode listener's
/// TLSConfig is skipped by checkConfigsEqual). diffOptions would also take TLS turned on or off,
/// but that mounts or unmounts the certificate volume in the pod template, so it restarts.
fn tls_field(name: &'static str, old: &Option<TlsFiles>, new: &Option<TlsFiles>) -> Field {
    match (old, new) {
        (Some(o), Some(n)) => f(name, Reload::Yes, o != n),
        (None, None) => f(name, Reload::Yes, false),
        _ => f(name, Reload::No, true),
    }
}

/// The leafnode listener without its TLS files: present or not, address, advertise.
fn leaf_listener(p: &ServerPlan) -> Option<(crate::render::Listen, Option<String>, bool)> {
    p.leafnodes
        .as_ref()
        .map(|l| (l.listen.clone(), l.advertise.clone(), l.tls.is_some()))
}

fn js<T: PartialEq>(p: &ServerPlan, g: impl Fn(&crate::render::JetStreamPlan) -> T) -> Option<T> {
    p.jetstream.as_ref().map(g)
}

fn trust<T: PartialEq>(p: &ServerPlan, g: impl Fn(&crate::render::TrustPlan) -> T) -> Option<T> {
    p.trust.as_ref().map(g)
}

fn preload_system(p: &ServerPlan) -> Option<String> {
    let t = p.trust.as_ref()?;
    t.preload
        .iter()
        .find(|(k, _)| *k == t.system_account)
        .map(|(_, jwt)| jwt.clone())
}

fn preload_other(p: &ServerPlan) -> Vec<(String, String)> {
    match &p.trust {
        Some(t) => t
            .preload
            .iter()
            .filter(|(k, _)| *k != t.system_account)
            .cloned()
            .collect(),
        None => Vec::new(),
    }
}

/// True when no JetStream limit went down or from a set value to the server's default: the
/// server raises a limit in place, but lowering one below what streams already reserve is
/// refused at runtime, so it restarts.
fn jetstream_limits_only_raised(old: &ServerPlan, new: &ServerPlan) -> bool {
    let (Some(o), Some(n)) = (&old.jetstream, &new.jetstream) else {
        return false;
    };
    let up = |a: Option<i64>, b: Option<i64>| match (a, b) {
        (Some(a), Some(b)) => b >= a,
        (None, None) => true,
        _ => false,
    };
    up(o.max_memory_store, n.max_memory_store) && up(o.max_file_store, n.max_file_store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::tests::plan;
    use crate::render::{
        GatewayPlan, LeafListenPlan, LeafRemotePlan, Listen, ResolverPlan, TrustPlan,
    };
    use rstest::rstest;

    fn trusted() -> ServerPlan {
        let mut p = plan();
        p.trust = Some(TrustPlan {
            operator: "OPJWT".into(),
            system_account: "ASYS".into(),
            resolver: ResolverPlan::Full {
                dir: "/data/resolver".into(),
            },
            preload: vec![("ASYS".into(), "SYSJWT".into())],
        });
        p.client_tls = Some(TlsFiles {
            cert_file: Some("/a.crt".into()),
            key_file: Some("/a.key".into()),
            ca_file: None,
            verify: false,
        });
        let files = |n: &str| TlsFiles {
            cert_file: Some(format!("/{n}.crt")),
            key_file: Some(format!("/{n}.key")),
            ca_file: Some(format!("/{n}-ca.crt")),
            verify: true,
        };
        p.route_tls = Some(files("r"));
        p.leafnodes = Some(LeafListenPlan {
            listen: Listen::new("0.0.0.0", 7422),
            advertise: None,
            tls: Some(files("l")),
        });
        p.leaf_remotes = vec![LeafRemotePlan {
            urls: vec!["nats-leaf://hub:7422".into()],
            credentials: Some("/creds/0.creds".into()),
            ca_file: None,
            account: None,
        }];
        p.gateway = Some(GatewayPlan {
            name: "demo".into(),
            listen: Listen::new("0.0.0.0", 7222),
            advertise: None,
            reject_unknown: true,
            remotes: vec![],
            tls: Some(files("g")),
        });
        p
    }

    fn edit(f: fn(&mut ServerPlan)) -> (ServerPlan, ServerPlan) {
        let old = trusted();
        let mut new = old.clone();
        f(&mut new);
        (old, new)
    }

    #[rstest]
    #[case::routes_reload("a route added reloads", |p: &mut ServerPlan| p.routes.push("nats://demo-3:6222".into()))]
    #[case::tags_reload("server_tags reload", |p: &mut ServerPlan| p.tags.push("zone:b".into()))]
    #[case::js_raised("a raised memory store reloads", |p: &mut ServerPlan| p.jetstream.as_mut().unwrap().max_memory_store = Some(2 << 30))]
    #[case::leaf_remote_added("a leaf remote added reloads (reload.go:931-990)", |p: &mut ServerPlan| p.leaf_remotes.push(LeafRemotePlan { urls: vec!["nats-leaf://hub:7422".into()], credentials: None, ca_file: None, account: None }))]
    #[case::system_preload("the re-signed system account preload reloads", |p: &mut ServerPlan| p.trust.as_mut().unwrap().preload[0].1 = "SYSJWT2".into())]
    #[case::client_cert("a new client certificate reloads", |p: &mut ServerPlan| p.client_tls.as_mut().unwrap().cert_file = Some("/b.crt".into()))]
    #[case::client_verify("verifying clients is in the TLS config, which reloads (tlsOption)", |p: &mut ServerPlan| p.client_tls.as_mut().unwrap().verify = true)]
    #[case::route_cert("a new route certificate reloads (clusterOption)", |p: &mut ServerPlan| p.route_tls.as_mut().unwrap().cert_file = Some("/r2.crt".into()))]
    #[case::pid_file("the pid file reloads (pidFileOption)", |p: &mut ServerPlan| p.pid_file = "/run/other.pid".into())]
    #[case::leaf_listener_cert("a new leafnode listener certificate reloads", |p: &mut ServerPlan| p.leafnodes.as_mut().unwrap().tls.as_mut().unwrap().cert_file = Some("/l2.crt".into()))]
    #[case::leaf_remote_creds("a remote with new credentials is removed and added by reload", |p: &mut ServerPlan| p.leaf_remotes[0].credentials = Some("/creds/1.creds".into()))]
    #[case::leaf_remote_removed("a leaf remote removed reloads", |p: &mut ServerPlan| { p.leaf_remotes.clear(); })]
    fn reloadable_changes(#[case] what: &str, #[case] change: fn(&mut ServerPlan)) {
        let (old, new) = edit(change);
        let mode = apply_mode(&old, &new, "2.15.1");
        assert!(matches!(mode, ApplyMode::Reload { .. }), "{what}: {mode:?}");
    }

    #[rstest]
    #[case::gateway("any gateway change restarts (reload.go:1765-1790)", "gateway", |p: &mut ServerPlan| p.gateway.as_mut().unwrap().reject_unknown = false)]
    #[case::client_tls_off("turning client TLS off restarts", "tls", |p: &mut ServerPlan| p.client_tls = None)]
    #[case::route_listen("the route listen address restarts", "cluster.listen", |p: &mut ServerPlan| p.route_listen.port = 6333)]
    #[case::store_dir("JetStream store_dir restarts", "jetstream.store_dir", |p: &mut ServerPlan| p.jetstream.as_mut().unwrap().store_dir = "/other".into())]
    #[case::js_lowered("a lowered memory store restarts", "jetstream.limits", |p: &mut ServerPlan| p.jetstream.as_mut().unwrap().max_memory_store = Some(1 << 20))]
    #[case::lame_duck("lame-duck settings restart (reload.go:1969-1973)", "lame_duck_duration", |p: &mut ServerPlan| p.lame_duck_duration = "3m".into())]
    #[case::system_account("system_account restarts", "system_account", |p: &mut ServerPlan| p.trust.as_mut().unwrap().system_account = "AOTHER".into())]
    #[case::operator("the trusted NATS operator restarts (reload.go:1619)", "operator", |p: &mut ServerPlan| p.trust.as_mut().unwrap().operator = "OPJWT2".into())]
    #[case::resolver("any resolver change restarts (reload.go:2236)", "resolver", |p: &mut ServerPlan| p.trust.as_mut().unwrap().resolver = ResolverPlan::Cache { dir: "/data/resolver".into() })]
    #[case::account_preload("an account preloaded from a NatsAccountTrust restarts", "resolver_preload.accounts", |p: &mut ServerPlan| p.trust.as_mut().unwrap().preload.push(("AACC".into(), "ACCJWT".into())))]
    #[case::domain("the JetStream domain restarts", "jetstream.domain", |p: &mut ServerPlan| p.jetstream.as_mut().unwrap().domain = Some("edge".into()))]
    #[case::js_from_dynamic("a limit set where the server sized it dynamically restarts", "jetstream.limits", |p: &mut ServerPlan| p.jetstream.as_mut().unwrap().max_file_store = Some(1 << 40))]
    #[case::js_to_dynamic("a limit unset to the server's dynamic default restarts", "jetstream.limits", |p: &mut ServerPlan| p.jetstream.as_mut().unwrap().max_memory_store = None)]
    #[case::js_off("turning JetStream off restarts (its volume leaves the pod)", "jetstream", |p: &mut ServerPlan| p.jetstream = None)]
    #[case::sync_to_timer("always to 2m restarts (no SyncInterval case in diffOptions)", "jetstream.sync_interval", |p: &mut ServerPlan| p.jetstream.as_mut().unwrap().sync_interval = Some("2m".into()))]
    #[case::sync_first_rendered("a plan stored before the field gains always: restarts", "jetstream.sync_interval", |p: &mut ServerPlan| p.jetstream.as_mut().unwrap().sync_interval = None)]
    #[case::route_tls_off("turning route TLS off restarts", "cluster.tls", |p: &mut ServerPlan| p.route_tls = None)]
    #[case::leaf_listen("the leafnode listener's address restarts", "leafnodes", |p: &mut ServerPlan| p.leafnodes.as_mut().unwrap().listen.port = 7423)]
    #[case::leaf_tls_off("turning leafnode TLS off restarts", "leafnodes", |p: &mut ServerPlan| p.leafnodes.as_mut().unwrap().tls = None)]
    #[case::http("the monitoring listener restarts", "http", |p: &mut ServerPlan| p.monitor.port = 8223)]
    #[case::gateway_tls("the design restarts on any gateway change, TLS included", "gateway", |p: &mut ServerPlan| p.gateway.as_mut().unwrap().tls.as_mut().unwrap().cert_file = Some("/g2.crt".into()))]
    fn restart_only_changes(
        #[case] what: &str,
        #[case] field: &str,
        #[case] change: fn(&mut ServerPlan),
    ) {
        let (old, new) = edit(change);
        match apply_mode(&old, &new, "2.15.1") {
            ApplyMode::Restart { restart_only, .. } => {
                assert!(restart_only.contains(&field), "{what}: {restart_only:?}")
            }
            other => panic!("{what}: expected a restart, got {other:?}"),
        }
    }

    #[test]
    fn one_restart_only_field_makes_the_whole_batch_a_restart() {
        let (old, new) = edit(|p| {
            p.tags.push("zone:b".into());
            p.lame_duck_duration = "3m".into();
        });
        let mode = apply_mode(&old, &new, "2.15.1");
        assert_eq!(
            mode,
            ApplyMode::Restart {
                changed: vec!["lame_duck_duration", "server_tags"],
                restart_only: vec!["lame_duck_duration"],
            }
        );
        assert_eq!(
            mode.restart_reason().as_deref(),
            Some("restart-only fields changed: lame_duck_duration")
        );
    }

    #[test]
    fn an_identical_render_is_unchanged() {
        let p = trusted();
        assert_eq!(apply_mode(&p, &p.clone(), "2.15.1"), ApplyMode::Unchanged);
    }
}
