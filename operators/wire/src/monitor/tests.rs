use super::*;
use serde_json::json;

#[test]
fn connz_user_filter_body() {
    let v = serde_json::to_value(ConnzOptions::user_of_account("ACC", "UKEY")).unwrap();
    assert_eq!(v, json!({"acc": "ACC", "user": "UKEY", "auth": true}));
}

#[test]
fn jsz_options_flatten_the_filter() {
    let o = JszOptions {
        filter: ServerFilter::cluster("east"),
        accounts: true,
        streams: true,
        ..Default::default()
    };
    let v = serde_json::to_value(o).unwrap();
    assert_eq!(
        v,
        json!({"cluster": "east", "exact_match": true, "accounts": true, "streams": true})
    );
}

#[test]
fn healthz_option_names_are_hyphenated() {
    let o = HealthzOptions {
        js_server_only: true,
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(o).unwrap(),
        json!({"js-server-only": true})
    );
}

#[test]
fn jsz_decodes_meta_and_streams() {
    let j: Jsz = serde_json::from_value(json!({
        "server_id": "N1", "now": "2026-01-01T00:00:00Z", "streams": 1, "consumers": 0,
        "meta_cluster": {"name": "c", "leader": "s1", "peer": "p1", "cluster_size": 3,
            "replicas": [{"name": "s2", "current": true, "active": 1000, "peer": "p2"}]},
        "account_details": [{"name": "APP", "id": "APP", "stream_detail": [
            {"name": "ORDERS", "cluster": {"name": "c", "leader": "s1",
              "replicas": [{"name": "s2", "current": true, "active": 5, "peer": "p2"}]},
             "state": {"messages": 3, "bytes": 10, "first_seq": 1, "last_seq": 3, "consumer_count": 0}}]}]
    }))
    .unwrap();
    let meta = j.meta_cluster.unwrap();
    assert_eq!(meta.leader, "s1");
    assert_eq!(meta.replicas[0].name, "s2");
    let s = &j.account_details[0].streams[0];
    assert_eq!(s.cluster.as_ref().unwrap().members(), vec!["s1", "s2"]);
    assert_eq!(s.state.messages, 3);
}

#[test]
fn jsz_decodes_each_consumers_group() {
    // As nats-server 2.15.1 answers a JSZ asked with consumer and config: ConsumerInfo entries.
    let s: StreamDetail = serde_json::from_value(json!({
        "name": "ORDERS",
        "consumer_detail": [{"stream_name": "ORDERS", "name": "worker",
            "config": {"durable_name": "worker", "ack_policy": "explicit", "num_replicas": 0},
            "cluster": {"name": "c", "leader": "s2",
              "replicas": [{"name": "s1", "current": true, "active": 5, "peer": "p1"},
                           {"name": "s3", "current": true, "active": 5, "peer": "p3"}]}},
          {"stream_name": "ORDERS", "name": "one", "config": {"num_replicas": 1},
           "cluster": {"name": "c", "leader": "s1"}}]
    }))
    .unwrap();
    let c = &s.consumers[0];
    assert_eq!(
        (c.name.as_str(), c.stream_name.as_str()),
        ("worker", "ORDERS")
    );
    assert_eq!(
        c.cluster.as_ref().unwrap().members(),
        vec!["s2", "s1", "s3"]
    );
    assert_eq!(
        s.consumers[1].cluster.as_ref().unwrap().members(),
        vec!["s1"]
    );
}

#[test]
fn varz_reads_digest_and_load_time() {
    let v: Varz = serde_json::from_value(json!({
        "server_id": "N1", "server_name": "s1", "config_digest": "sha256:abc",
        "config_load_time": "2026-11-29T20:00:00.123456789Z", "jetstream": {}, "unknown": 1
    }))
    .unwrap();
    assert_eq!(v.config_digest, "sha256:abc");
    assert!(v.config_load_time.is_some());
}

#[test]
fn varz_reads_the_certificate_each_listener_loaded() {
    // As nats-server 2.15.1 answers with TLS on the gateway and leafnode listeners only.
    let v: Varz = serde_json::from_value(json!({
        "server_name": "s1",
        "cluster": {"addr": "0.0.0.0", "cluster_port": 0},
        "gateway": {"name": "g", "port": 7222, "tls_cert_not_after": "2027-02-28T05:26:24Z"},
        "leaf": {"port": 7422, "tls_cert_not_after": "2027-03-01T00:00:00Z"}
    }))
    .unwrap();
    let loaded = v.loaded_certificates();
    assert_eq!(
        loaded.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["gateway", "leafnodes"]
    );
    assert_eq!(loaded["gateway"].to_rfc3339(), "2027-02-28T05:26:24+00:00");
    let all: Varz = serde_json::from_value(json!({
        "tls_cert_not_after": "2027-01-01T00:00:00Z",
        "cluster": {"tls_cert_not_after": "2027-01-02T00:00:00Z"}
    }))
    .unwrap();
    assert_eq!(
        all.loaded_certificates()
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        vec!["client", "routes"]
    );
}

#[test]
fn subjects() {
    assert_eq!(ping_subject("JSZ"), "$SYS.REQ.SERVER.PING.JSZ");
    assert_eq!(server_subject("NID", "VARZ"), "$SYS.REQ.SERVER.NID.VARZ");
}
