//! The apiserver requests the balancer and evacuation passes make, counted
//! ([`nats_api::jetstream::metric::PASS_APISERVER_REQUESTS`] {kind, verb, resource}).
//!
//! Each of the three pass kinds runs on a Context whose client counts every request it sends
//! under that kind ([`counting`]): the fresh read of the object, the NatsConnection and Secrets
//! the pool reads, grants, status, Events. The watches of the kinds stay on the uncounted
//! client: they are the controller's, not a pass's. A pass that listed a kind would show here
//! as `verb="list"`; the passes read the stream-backed objects from the index
//! ([`super::index`]) and list nothing.

use http::{Method, Request};
use kube::client::Body;
use nats_api::jetstream::metric;

/// The resources the controller requests; any other is counted as `other`, so the label stays
/// bounded.
const RESOURCES: &[&str] = &[
    "natsstreams",
    "natskeyvalues",
    "natsobjectstores",
    "natsconsumers",
    "natsconnections",
    "natsreferencegrants",
    "natsbalancers",
    "natssystembalancers",
    "natsclusterevacuations",
    "secrets",
    "events",
    "leases",
];

/// The verb and resource of a request, as the apiserver's audit log names them: `get`, `list`
/// or `watch` for a GET (by whether it names an object and asks to watch), `create`, `update`,
/// `patch`, `delete` or `deletecollection`; the resource's plural (with `/status` for the
/// status subresource), `other` outside [`RESOURCES`].
pub fn verb_and_resource(
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> (&'static str, String) {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... or /apis/group/version/...; then optionally namespaces/{ns}.
    let rest: &[&str] = match parts.first() {
        Some(&"api") => parts.get(2..).unwrap_or(&[]),
        Some(&"apis") => parts.get(3..).unwrap_or(&[]),
        _ => &[],
    };
    let rest = match rest {
        ["namespaces", _ns, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let (resource, name, sub) = (rest.first(), rest.get(1), rest.get(2));
    let named = name.is_some();
    let watching =
        query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match *method {
        Method::GET if watching => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    };
    let resource = match resource {
        Some(r) if RESOURCES.contains(r) => match sub {
            Some(&"status") => format!("{r}/status"),
            _ => (*r).to_string(),
        },
        _ => "other".to_string(),
    };
    (verb, resource)
}

/// A client sending through `inner` that counts each request under `kind` in `metrics`.
pub fn counting(
    inner: kube::Client,
    metrics: controller_kit::metrics::Metrics,
    kind: &'static str,
) -> kube::Client {
    let namespace = inner.default_namespace().to_string();
    let service = tower::service_fn(move |req: Request<Body>| {
        let (verb, resource) = verb_and_resource(req.method(), req.uri().path(), req.uri().query());
        metrics.add_counter(
            metric::PASS_APISERVER_REQUESTS,
            "Apiserver requests made by balancer and evacuation passes, per kind of pass, verb and resource.",
            &[("kind", kind), ("verb", verb), ("resource", &resource)],
            1.0,
        );
        let inner = inner.clone();
        async move { inner.send(req).await }
    });
    kube::Client::new(service, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::a_list_of_streams_across_namespaces(
        "GET",
        "/apis/jetstream.nats.mikluko.io/v1beta1/natsstreams",
        None,
        "list",
        "natsstreams"
    )]
    #[case::a_list_of_one_namespaces_buckets(
        "GET",
        "/apis/jetstream.nats.mikluko.io/v1beta1/namespaces/a/natskeyvalues",
        Some("limit=500"),
        "list",
        "natskeyvalues"
    )]
    #[case::a_watch_is_not_a_list(
        "GET",
        "/apis/jetstream.nats.mikluko.io/v1beta1/namespaces/a/natsstreams",
        Some("watch=true&resourceVersion=5"),
        "watch",
        "natsstreams"
    )]
    #[case::reading_the_connection(
        "GET",
        "/apis/nats.mikluko.io/v1beta1/namespaces/a/natsconnections/orders",
        None,
        "get",
        "natsconnections"
    )]
    #[case::reading_a_secret("GET", "/api/v1/namespaces/a/secrets/creds", None, "get", "secrets")]
    #[case::status_applied(
        "PATCH",
        "/apis/jetstream.nats.mikluko.io/v1beta1/namespaces/a/natsbalancers/b/status",
        Some("fieldManager=x"),
        "patch",
        "natsbalancers/status"
    )]
    #[case::an_event(
        "POST",
        "/apis/events.k8s.io/v1/namespaces/a/events",
        None,
        "create",
        "events"
    )]
    #[case::anything_else_is_other("GET", "/api/v1/namespaces/a/pods", None, "list", "other")]
    #[case::a_deletecollection(
        "DELETE",
        "/apis/jetstream.nats.mikluko.io/v1beta1/namespaces/a/natsstreams",
        None,
        "deletecollection",
        "natsstreams"
    )]
    fn a_request_is_counted_by_verb_and_resource_as_the_audit_log_names_them(
        #[case] method: &str,
        #[case] path: &str,
        #[case] query: Option<&str>,
        #[case] verb: &str,
        #[case] resource: &str,
    ) {
        let method = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
        assert_eq!(
            verb_and_resource(&method, path, query),
            (verb_static(verb), resource.to_string())
        );
    }

    fn verb_static(v: &str) -> &'static str {
        [
            "get",
            "list",
            "watch",
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
        ]
        .into_iter()
        .find(|x| *x == v)
        .unwrap_or("other")
    }
}
