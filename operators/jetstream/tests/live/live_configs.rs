//! Live tier of the pure core, against a real 3-server JetStream cluster (nats-server 2.15 from
//! the sim), for every kind: an object created from a spec through the mapping reads back with no
//! drift; an out-of-band edit made with the nats API drifts in exactly that field and reapplying
//! spec corrects it; a pre-existing object adopted into spec re-maps to the same server config.

use crate::common;

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use common::{
    cluster, consumer_config, create_stream, js_api, put_consumer, spec, stream_config,
    update_stream,
};
use jetstream_controller::consumer_config as cc;
use jetstream_controller::drift::{Decision, decide, drifted, names};
use jetstream_controller::late_init::late_initialize;
use jetstream_controller::lifecycle_policies::{Action, TerminalReason, plan, synced};
use jetstream_controller::ownership::{Found, found, user_metadata};
use jetstream_controller::server_state;
use jetstream_controller::{kv_config, object_config, stream_config as sc};
use nats_api::jetstream::{
    AdoptionPolicy, NatsConsumerSpec, NatsKeyValueSpec, NatsObjectStoreSpec, NatsStreamSpec,
};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

const UID: &str = "0b5e4b1e-7c1d-4d0e-9a57-6f1d5c3b2a10";

fn drift_names(
    fields: &[jetstream_controller::drift::Field],
    desired: &serde_json::Map<String, Value>,
    server: &Value,
) -> Vec<String> {
    names(drifted(fields, desired, server).iter())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_from_spec_reads_back_in_sync_and_drift_finds_an_out_of_band_edit() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let js = jetstream::new(client.clone());

    // An untouched stream: spec sets only subjects, the server fills every default.
    let bare: NatsStreamSpec = spec(json!({"subjects": ["bare.>"]}));
    let bare_desired = sc::desired("BARE", &bare, UID).expect("maps");
    create_stream(&client, &bare_desired).await;
    let server = stream_config(&client, "BARE").await.expect("BARE exists");
    assert_eq!(
        drift_names(sc::STREAM_FIELDS, &bare_desired, &server),
        Vec::<String>::new(),
        "{server}"
    );

    // A field spec omits, edited out of band, still drifts: it is compared with the server's default.
    let mut config = js
        .get_stream("BARE")
        .await
        .expect("get BARE")
        .info()
        .await
        .expect("info")
        .config
        .clone();
    config.max_messages_per_subject = 7;
    js.update_stream(config).await.expect("out-of-band update");
    let server = stream_config(&client, "BARE").await.expect("BARE exists");
    assert_eq!(
        drift_names(sc::STREAM_FIELDS, &bare_desired, &server),
        vec!["maxMsgsPerSubject"],
        "{server}"
    );

    // A stream with limits, replicas and user metadata.
    let s: NatsStreamSpec = spec(json!({
        "subjects": ["orders.>"], "replicas": 3, "maxMsgs": 1000, "maxBytes": "64Mi",
        "maxAge": "24h", "duplicates": "1m", "discard": "New", "description": "orders",
        "metadata": {"team": "payments"}
    }));
    let desired = sc::desired("ORDERS", &s, UID).expect("maps");
    create_stream(&client, &desired).await;
    let server = stream_config(&client, "ORDERS")
        .await
        .expect("ORDERS exists");
    assert_eq!(found(Some(&server), UID), Found::OwnedByThis);
    assert_eq!(
        user_metadata(&server)
            .and_then(|m| m.get("team").cloned())
            .as_deref(),
        Some("payments")
    );
    assert_eq!(
        decide(&drifted(sc::STREAM_FIELDS, &desired, &server), false),
        Decision::InSync,
        "{server}"
    );

    // status.server: the R3 group's leader and its two followers, all servers of the cluster.
    let state = sim::wait::poll(
        "ORDERS has a leader and two current followers",
        common::WAIT,
        || {
            let client = client.clone();
            async move {
                let s = server_state::of_stream(&common::stream_info(&client, "ORDERS").await);
                Ok((s.leader.is_some()
                    && s.replicas.len() == 2
                    && s.replicas.iter().all(|r| r.current))
                .then_some(s))
            }
        },
    )
    .await
    .expect("a settled R3 stream");
    let mut members: Vec<String> = state.replicas.iter().map(|r| r.name.clone()).collect();
    members.extend(state.leader.clone());
    members.sort();
    assert_eq!(members, topo.server_names());
    assert_eq!(state.messages, Some(0));

    // Out of band: max_msgs changed with the nats API.
    let mut config = js
        .get_stream("ORDERS")
        .await
        .expect("get ORDERS")
        .info()
        .await
        .expect("info")
        .config
        .clone();
    config.max_messages = 5;
    js.update_stream(config).await.expect("out-of-band update");
    let server = stream_config(&client, "ORDERS")
        .await
        .expect("ORDERS exists");
    let decision = decide(&drifted(sc::STREAM_FIELDS, &desired, &server), false);
    assert_eq!(
        decision,
        Decision::Update(vec!["maxMsgs".into()]),
        "{server}"
    );
    assert_eq!(synced(&decision, false).reason, "DriftCorrected");

    // Reapplying spec corrects it.
    update_stream(&client, &desired).await;
    let server = stream_config(&client, "ORDERS")
        .await
        .expect("ORDERS exists");
    assert_eq!(
        decide(&drifted(sc::STREAM_FIELDS, &desired, &server), false),
        Decision::InSync
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_existing_stream_adopted_into_spec_re_maps_to_the_same_config() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let js = jetstream::new(client.clone());
    for name in ["LEGACY", "LEGACY2"] {
        js.create_stream(stream::Config {
            name: name.into(),
            subjects: vec![format!("{}.>", name.to_lowercase())],
            max_messages: 10,
            max_age: Duration::from_secs(3600),
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .expect("a stream made with the nats API");
    }

    // Adopt: the server's config goes into spec; owning it then changes nothing but the marker.
    let server = stream_config(&client, "LEGACY")
        .await
        .expect("LEGACY exists");
    let f = found(Some(&server), UID);
    assert_eq!(f, Found::Unowned);
    assert_eq!(
        plan(AdoptionPolicy::Never, &f),
        Action::Terminal(TerminalReason::ExistsUnowned)
    );
    assert_eq!(plan(AdoptionPolicy::Adopt, &f), Action::AdoptIntoSpec);
    let base: NatsStreamSpec = spec(json!({"adoptionPolicy": "Adopt"}));
    let adopted = sc::spec_from_server(&base, &server).expect("reads the server's config");
    // Written into the resource and read back, as the API server would store it.
    let adopted: NatsStreamSpec =
        serde_json::from_value(serde_json::to_value(&adopted).expect("serializes"))
            .expect("parses");
    let desired = sc::desired("LEGACY", &adopted, UID).expect("maps");
    assert_eq!(
        drift_names(sc::STREAM_FIELDS, &desired, &server),
        vec!["metadata"],
        "only the marker is new"
    );
    update_stream(&client, &desired).await;
    let server = stream_config(&client, "LEGACY")
        .await
        .expect("LEGACY exists");
    assert_eq!(found(Some(&server), UID), Found::OwnedByThis);
    assert_eq!(
        drift_names(sc::STREAM_FIELDS, &desired, &server),
        Vec::<String>::new(),
        "{server}"
    );

    // AdoptOrCreate: spec applied, then the omitted fields filled from the server.
    let server = stream_config(&client, "LEGACY2")
        .await
        .expect("LEGACY2 exists");
    assert_eq!(
        plan(AdoptionPolicy::AdoptOrCreate, &found(Some(&server), UID)),
        Action::LateInitialize
    );
    let s: NatsStreamSpec = spec(
        json!({"adoptionPolicy": "AdoptOrCreate", "subjects": ["legacy2.>"], "maxMsgs": 20, "replicas": 3}),
    );
    update_stream(&client, &sc::desired("LEGACY2", &s, UID).expect("maps")).await;
    let server = stream_config(&client, "LEGACY2")
        .await
        .expect("LEGACY2 exists");
    let merged =
        late_initialize(&s, &sc::spec_from_server(&s, &server).expect("reads")).expect("merges");
    assert_eq!(merged.spec.max_msgs, Some(20), "spec's own value kept");
    assert!(
        merged.filled.contains(&"maxAge".to_string()),
        "{:?}",
        merged.filled
    );
    let desired = sc::desired("LEGACY2", &merged.spec, UID).expect("maps");
    assert_eq!(
        drift_names(sc::STREAM_FIELDS, &desired, &server),
        Vec::<String>::new(),
        "{server}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_from_spec_drift_recreate_and_adoption() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let js = jetstream::new(client.clone());
    let s: NatsStreamSpec = spec(json!({"subjects": ["orders.>"], "replicas": 3}));
    create_stream(&client, &sc::desired("ORDERS", &s, UID).expect("maps")).await;

    let c: NatsConsumerSpec = spec(json!({
        "stream": "ORDERS", "ackPolicy": "Explicit", "maxDeliver": 5, "ackWait": "30s",
        "filterSubject": "orders.eu", "metadata": {"team": "payments"}
    }));
    let desired = cc::desired("worker", &c, UID).expect("maps");
    put_consumer(&client, "ORDERS", &desired, false).await;
    let server = consumer_config(&client, "ORDERS", "worker")
        .await
        .expect("worker exists");
    assert_eq!(found(Some(&server), UID), Found::OwnedByThis);
    assert_eq!(
        drift_names(cc::CONSUMER_FIELDS, &desired, &server),
        Vec::<String>::new(),
        "{server}"
    );

    // Out of band: max_deliver changed with the nats API.
    let ordstream = js.get_stream("ORDERS").await.expect("get ORDERS");
    let mut config = ordstream
        .consumer_info("worker")
        .await
        .expect("consumer info")
        .config;
    config.max_deliver = 9;
    ordstream
        .create_consumer(config)
        .await
        .expect("out-of-band consumer update");
    let server = consumer_config(&client, "ORDERS", "worker")
        .await
        .expect("worker exists");
    assert_eq!(
        decide(&drifted(cc::CONSUMER_FIELDS, &desired, &server), false),
        Decision::Update(vec!["maxDeliver".into()]),
        "{server}"
    );
    put_consumer(&client, "ORDERS", &desired, true).await;
    let server = consumer_config(&client, "ORDERS", "worker")
        .await
        .expect("worker exists");
    assert_eq!(
        drift_names(cc::CONSUMER_FIELDS, &desired, &server),
        Vec::<String>::new()
    );

    // An immutable field: the server refuses the update, so the decision is refuse or recreate.
    let edited: NatsConsumerSpec = spec(json!({
        "stream": "ORDERS", "ackPolicy": "Explicit", "maxDeliver": 5, "ackWait": "30s",
        "filterSubject": "orders.eu", "metadata": {"team": "payments"}, "deliverPolicy": "New",
        "recreateOnImmutableChange": true
    }));
    let edited_desired = cc::desired("worker", &edited, UID).expect("maps");
    let drift = drifted(cc::CONSUMER_FIELDS, &edited_desired, &server);
    assert_eq!(
        decide(&drift, false),
        Decision::Refused(vec!["deliverPolicy".into()])
    );
    assert_eq!(
        decide(&drift, true),
        Decision::Recreate(vec!["deliverPolicy".into()])
    );
    let refused = js_api(
        &client,
        "$JS.API.CONSUMER.CREATE.ORDERS.worker".into(),
        &cc::create_request("ORDERS", &edited_desired, true),
    )
    .await;
    assert!(
        refused.as_ref().is_err_and(|e| e.err_code().is_some()),
        "nats-server accepted a deliver_policy change: {refused:?}"
    );
    ordstream
        .delete_consumer("worker")
        .await
        .expect("delete for recreate");
    put_consumer(&client, "ORDERS", &edited_desired, false).await;
    let server = consumer_config(&client, "ORDERS", "worker")
        .await
        .expect("worker exists");
    assert_eq!(
        drift_names(cc::CONSUMER_FIELDS, &edited_desired, &server),
        Vec::<String>::new()
    );

    // Adoption of a consumer made with the nats API.
    ordstream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("legacy".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            max_ack_pending: 50,
            filter_subjects: vec!["orders.us".into(), "orders.ca".into()],
            backoff: vec![Duration::from_secs(1), Duration::from_secs(5)],
            max_deliver: 4,
            ..Default::default()
        })
        .await
        .expect("a consumer made with the nats API");
    let server = consumer_config(&client, "ORDERS", "legacy")
        .await
        .expect("legacy exists");
    assert_eq!(
        plan(AdoptionPolicy::Adopt, &found(Some(&server), UID)),
        Action::AdoptIntoSpec
    );
    let base: NatsConsumerSpec = spec(json!({"stream": "ORDERS", "adoptionPolicy": "Adopt"}));
    let adopted = cc::spec_from_server(&base, &server).expect("reads");
    let desired = cc::desired("legacy", &adopted, UID).expect("maps");
    assert_eq!(
        drift_names(cc::CONSUMER_FIELDS, &desired, &server),
        vec!["metadata"],
        "{server}"
    );
    put_consumer(&client, "ORDERS", &desired, true).await;
    let server = consumer_config(&client, "ORDERS", "legacy")
        .await
        .expect("legacy exists");
    assert_eq!(found(Some(&server), UID), Found::OwnedByThis);
    assert_eq!(
        drift_names(cc::CONSUMER_FIELDS, &desired, &server),
        Vec::<String>::new(),
        "{server}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_value_bucket_from_spec_is_a_working_bucket_and_drift_and_adoption_hold() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let js = jetstream::new(client.clone());

    let b: NatsKeyValueSpec = spec(json!({
        "history": 5, "ttl": "1h", "replicas": 3, "maxValueSize": "64Ki", "metadata": {"team": "cfg"}
    }));
    let desired = kv_config::desired("config", &b, UID).expect("maps");
    create_stream(&client, &desired).await;
    let server = stream_config(&client, "KV_config")
        .await
        .expect("KV_config exists");
    assert_eq!(
        drift_names(kv_config::KV_FIELDS, &desired, &server),
        Vec::<String>::new(),
        "{server}"
    );

    // The nats client library sees a bucket it can use.
    let store = js.get_key_value("config").await.expect("bind the bucket");
    store.put("colour", "blue".into()).await.expect("put");
    let got = store.get("colour").await.expect("get");
    assert_eq!(got.as_deref(), Some(&b"blue"[..]));

    // Out of band: history raised with the nats API.
    let mut config = js
        .get_stream("KV_config")
        .await
        .expect("get KV_config")
        .info()
        .await
        .expect("info")
        .config
        .clone();
    config.max_messages_per_subject = 10;
    js.update_stream(config).await.expect("out-of-band update");
    let server = stream_config(&client, "KV_config")
        .await
        .expect("KV_config exists");
    assert_eq!(
        decide(&drifted(kv_config::KV_FIELDS, &desired, &server), false),
        Decision::Update(vec!["history".into()]),
        "{server}"
    );
    update_stream(&client, &desired).await;
    let server = stream_config(&client, "KV_config")
        .await
        .expect("KV_config exists");
    assert_eq!(
        drift_names(kv_config::KV_FIELDS, &desired, &server),
        Vec::<String>::new()
    );

    // Adoption of a bucket made with the nats client library.
    js.create_key_value(kv::Config {
        bucket: "legacy".into(),
        history: 3,
        max_age: Duration::from_secs(600),
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .expect("a bucket made with the nats API");
    let server = stream_config(&client, "KV_legacy")
        .await
        .expect("KV_legacy exists");
    assert_eq!(found(Some(&server), UID), Found::Unowned);
    let base: NatsKeyValueSpec = spec(json!({"adoptionPolicy": "Adopt"}));
    let adopted = kv_config::spec_from_server(&base, &server).expect("a bucket");
    assert_eq!(adopted.history, Some(3));
    let desired = kv_config::desired("legacy", &adopted, UID).expect("maps");
    assert_eq!(
        drift_names(kv_config::KV_FIELDS, &desired, &server),
        vec!["metadata"],
        "{server}"
    );
    update_stream(&client, &desired).await;
    let server = stream_config(&client, "KV_legacy")
        .await
        .expect("KV_legacy exists");
    assert_eq!(
        drift_names(kv_config::KV_FIELDS, &desired, &server),
        Vec::<String>::new(),
        "{server}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_store_from_spec_is_a_working_store_and_drift_and_adoption_hold() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let js = jetstream::new(client.clone());

    let o: NatsObjectStoreSpec =
        spec(json!({"ttl": "24h", "replicas": 3, "maxBytes": "1Gi", "description": "assets"}));
    let desired = object_config::desired("assets", &o, UID).expect("maps");
    create_stream(&client, &desired).await;
    let server = stream_config(&client, "OBJ_assets")
        .await
        .expect("OBJ_assets exists");
    assert_eq!(
        drift_names(object_config::OBJECT_FIELDS, &desired, &server),
        Vec::<String>::new(),
        "{server}"
    );

    // The nats client library sees a store it can use.
    let store = js.get_object_store("assets").await.expect("bind the store");
    store
        .put("logo.svg", &mut &b"<svg/>"[..])
        .await
        .expect("put an object");
    let mut body = Vec::new();
    store
        .get("logo.svg")
        .await
        .expect("get the object")
        .read_to_end(&mut body)
        .await
        .expect("read it");
    assert_eq!(body, b"<svg/>");

    // Out of band: max_age shortened with the nats API.
    let mut config = js
        .get_stream("OBJ_assets")
        .await
        .expect("get OBJ_assets")
        .info()
        .await
        .expect("info")
        .config
        .clone();
    config.max_age = Duration::from_secs(3600);
    js.update_stream(config).await.expect("out-of-band update");
    let server = stream_config(&client, "OBJ_assets")
        .await
        .expect("OBJ_assets exists");
    assert_eq!(
        decide(
            &drifted(object_config::OBJECT_FIELDS, &desired, &server),
            false
        ),
        Decision::Update(vec!["ttl".into()]),
        "{server}"
    );
    update_stream(&client, &desired).await;
    let server = stream_config(&client, "OBJ_assets")
        .await
        .expect("OBJ_assets exists");
    assert_eq!(
        drift_names(object_config::OBJECT_FIELDS, &desired, &server),
        Vec::<String>::new()
    );

    // Adoption of a store made with the nats client library.
    js.create_object_store(object_store::Config {
        bucket: "legacy".into(),
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .expect("a store made with the nats API");
    let server = stream_config(&client, "OBJ_legacy")
        .await
        .expect("OBJ_legacy exists");
    assert_eq!(found(Some(&server), UID), Found::Unowned);
    let base: NatsObjectStoreSpec = spec(json!({"adoptionPolicy": "Adopt"}));
    let adopted = object_config::spec_from_server(&base, &server).expect("an object store");
    let desired = object_config::desired("legacy", &adopted, UID).expect("maps");
    assert_eq!(
        drift_names(object_config::OBJECT_FIELDS, &desired, &server),
        vec!["metadata"],
        "{server}"
    );
    update_stream(&client, &desired).await;
    let server = stream_config(&client, "OBJ_legacy")
        .await
        .expect("OBJ_legacy exists");
    assert_eq!(
        drift_names(object_config::OBJECT_FIELDS, &desired, &server),
        Vec::<String>::new(),
        "{server}"
    );
}

/// One row: a spec the object is created from, the spec it is edited to, the field that changes.
struct Edit {
    case: &'static str,
    from: Value,
    to: Value,
    field: &'static str,
}

fn edit(case: &'static str, from: Value, to: Value, field: &'static str) -> Edit {
    Edit {
        case,
        from,
        to,
        field,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_exactly_the_stream_changes_drift_calls_refused() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let rows = [
        edit(
            "max_msgs_is_mutable",
            json!({"maxMsgs": 10}),
            json!({"maxMsgs": 20}),
            "maxMsgs",
        ),
        edit(
            "retention_limits_to_interest",
            json!({}),
            json!({"retention": "Interest"}),
            "retention",
        ),
        edit(
            "retention_into_workqueue",
            json!({}),
            json!({"retention": "WorkQueue"}),
            "retention",
        ),
        edit(
            "storage_file_to_memory",
            json!({"storage": "File"}),
            json!({"storage": "Memory"}),
            "storage",
        ),
        edit(
            "deny_delete_turned_on",
            json!({}),
            json!({"denyDelete": true}),
            "denyDelete",
        ),
        edit(
            "deny_delete_turned_off",
            json!({"denyDelete": true}),
            json!({"denyDelete": false}),
            "denyDelete",
        ),
        edit(
            "deny_purge_turned_off",
            json!({"denyPurge": true}),
            json!({"denyPurge": false}),
            "denyPurge",
        ),
        edit(
            "message_ttls_turned_off",
            json!({"allowMsgTTL": true}),
            json!({"allowMsgTTL": false}),
            "allowMsgTTL",
        ),
        edit(
            "counter_turned_on",
            json!({}),
            json!({"allowMsgCounter": true}),
            "allowMsgCounter",
        ),
        edit(
            "persist_mode_to_async",
            json!({}),
            json!({"persistMode": "Async"}),
            "persistMode",
        ),
        edit(
            "schedules_turned_off",
            json!({"allowMsgSchedules": true}),
            json!({"allowMsgSchedules": false}),
            "allowMsgSchedules",
        ),
    ];
    for (i, row) in rows.iter().enumerate() {
        let name = format!("S{i}");
        let subjects = json!([format!("s{i}.>")]);
        let with = |v: &Value| {
            let mut v = v.clone();
            v["subjects"] = subjects.clone();
            spec::<NatsStreamSpec>(v)
        };
        create_stream(
            &client,
            &sc::desired(&name, &with(&row.from), UID).expect("maps"),
        )
        .await;
        let server = stream_config(&client, &name).await.expect("exists");
        let to = sc::desired(&name, &with(&row.to), UID).expect("maps");
        let decision = decide(&drifted(sc::STREAM_FIELDS, &to, &server), false);
        let refused = matches!(decision, Decision::Refused(_));
        match &decision {
            Decision::Update(f) | Decision::Refused(f) => {
                assert_eq!(f, &vec![row.field.to_string()], "{}", row.case)
            }
            other => panic!("{}: no drift found: {other:?}", row.case),
        }
        let answer = js_api(
            &client,
            format!("$JS.API.STREAM.UPDATE.{name}"),
            &Value::Object(to.clone()),
        )
        .await;
        assert_eq!(
            answer.as_ref().is_err_and(|e| e.err_code().is_some()),
            refused,
            "{}: drift said {decision:?}, nats-server answered {answer:?}",
            row.case
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_refuses_exactly_the_consumer_changes_drift_calls_immutable() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let s: NatsStreamSpec = spec(json!({"subjects": ["jobs.>"]}));
    create_stream(&client, &sc::desired("JOBS", &s, UID).expect("maps")).await;
    let push = json!({"deliverSubject": "out.x", "heartbeat": "5s", "flowControl": true, "ackPolicy": "Explicit"});
    let rows = [
        edit(
            "max_deliver_is_mutable",
            json!({"maxDeliver": 3}),
            json!({"maxDeliver": 4}),
            "maxDeliver",
        ),
        edit(
            "ack_wait_is_mutable",
            json!({"ackWait": "30s"}),
            json!({"ackWait": "1m"}),
            "ackWait",
        ),
        edit(
            "deliver_policy",
            json!({}),
            json!({"deliverPolicy": "New"}),
            "deliverPolicy",
        ),
        edit(
            "ack_policy",
            json!({"ackPolicy": "Explicit"}),
            json!({"ackPolicy": "All"}),
            "ackPolicy",
        ),
        edit(
            "replay_policy",
            json!({}),
            json!({"replayPolicy": "Original"}),
            "replayPolicy",
        ),
        edit(
            "start_sequence",
            json!({"deliverPolicy": "ByStartSequence", "optStartSeq": 1}),
            json!({"deliverPolicy": "ByStartSequence", "optStartSeq": 2}),
            "optStartSeq",
        ),
        edit(
            "max_waiting",
            json!({"maxWaiting": 100}),
            json!({"maxWaiting": 200}),
            "maxWaiting",
        ),
        edit(
            "heartbeat",
            push.clone(),
            json!({"deliverSubject": "out.x", "heartbeat": "10s", "flowControl": true, "ackPolicy": "Explicit"}),
            "heartbeat",
        ),
        edit(
            "flow_control",
            push.clone(),
            json!({"deliverSubject": "out.x", "heartbeat": "5s", "flowControl": false, "ackPolicy": "Explicit"}),
            "flowControl",
        ),
    ];
    for (i, row) in rows.iter().enumerate() {
        let name = format!("c{i}");
        let with = |v: &Value| {
            let mut v = v.clone();
            v["stream"] = json!("JOBS");
            if v.get("ackPolicy").is_none() {
                v["ackPolicy"] = json!("Explicit");
            }
            spec::<NatsConsumerSpec>(v)
        };
        put_consumer(
            &client,
            "JOBS",
            &cc::desired(&name, &with(&row.from), UID).expect("maps"),
            false,
        )
        .await;
        let server = consumer_config(&client, "JOBS", &name)
            .await
            .expect("exists");
        let to = cc::desired(&name, &with(&row.to), UID).expect("maps");
        let decision = decide(&drifted(cc::CONSUMER_FIELDS, &to, &server), false);
        let refused = matches!(decision, Decision::Refused(_));
        match &decision {
            Decision::Update(f) | Decision::Refused(f) => {
                assert_eq!(f, &vec![row.field.to_string()], "{}", row.case)
            }
            other => panic!("{}: no drift found: {other:?}", row.case),
        }
        let answer = js_api(
            &client,
            format!("$JS.API.CONSUMER.CREATE.JOBS.{name}"),
            &cc::create_request("JOBS", &to, true),
        )
        .await;
        assert_eq!(
            answer.as_ref().is_err_and(|e| e.err_code().is_some()),
            refused,
            "{}: drift said {decision:?}, nats-server answered {answer:?}",
            row.case
        );
    }
}

/// Creates a stream from `spec` and returns the fields that drift right after (none expected).
async fn created_drift(client: &async_nats::Client, name: &str, s: Value) -> Vec<String> {
    let desired = sc::desired(name, &spec::<NatsStreamSpec>(s), UID).expect("maps");
    create_stream(client, &desired).await;
    let server = stream_config(client, name).await.expect("exists");
    drift_names(sc::STREAM_FIELDS, &desired, &server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_sources_and_implied_settings_read_back_with_no_drift() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let none = Vec::<String>::new();
    let rows = [
        (
            "ORIGIN",
            json!({"subjects": ["origin.>"], "allowDirect": true, "replicas": 3}),
        ),
        ("OTHER", json!({"subjects": ["other.>"]})),
        // A mirror inherits the origin's direct gets; it is derived, so spec need not say so.
        (
            "MIRROR",
            json!({"mirror": {"name": "ORIGIN"}, "replicas": 3}),
        ),
        (
            "FILTERED_MIRROR",
            json!({"mirror": {"name": "ORIGIN", "filterSubject": "origin.eu.>"}}),
        ),
        (
            "SOURCED",
            json!({"sources": [
                {"name": "ORIGIN", "subjectTransforms": [{"src": "origin.>", "dest": "copy.origin.>"}]},
                {"name": "OTHER", "filterSubject": "other.a", "optStartSeq": 1}
            ]}),
        ),
        // Delete markers turn on message TTLs and roll-ups on the server.
        (
            "MARKERS",
            json!({"subjects": ["markers.>"], "subjectDeleteMarkerTTL": "1m"}),
        ),
        // Schedules turn on roll-ups.
        (
            "SCHEDULED",
            json!({"subjects": ["scheduled.>"], "allowMsgSchedules": true}),
        ),
        (
            "TRANSFORMED",
            json!({"subjects": ["in.>"], "subjectTransform": {"src": "in.>", "dest": "stored.>"},
            "republish": {"src": "stored.>", "dest": "out.>", "headersOnly": true}}),
        ),
        (
            "LIMITED",
            json!({"subjects": ["limited.>"], "consumerLimits": {"inactiveThreshold": "1h", "maxAckPending": 100},
            "maxMsgsPerSubject": 3, "discard": "New", "discardNewPerSubject": true, "placement": {"tags": []}}),
        ),
        (
            "COMPRESSED",
            json!({"subjects": ["compressed.>"], "compression": "S2", "storage": "File", "maxMsgSize": "1Mi"}),
        ),
    ];
    for (name, s) in rows {
        assert_eq!(created_drift(&client, name, s).await, none, "{name}");
    }

    // Sealing fixes max_age, discard and the deny flags on the server; spec saying only sealed
    // still shows no drift.
    let sealed: NatsStreamSpec = spec(json!({"subjects": ["other.>"], "sealed": true}));
    let desired = sc::desired("OTHER", &sealed, UID).expect("maps");
    update_stream(&client, &desired).await;
    let server = stream_config(&client, "OTHER").await.expect("exists");
    assert_eq!(
        drift_names(sc::STREAM_FIELDS, &desired, &server),
        none,
        "{server}"
    );

    // Buckets mirroring and sourcing buckets.
    for (bucket, b) in [
        ("origin", json!({"history": 2})),
        ("copy", json!({"mirror": {"name": "origin"}})),
        ("other", json!({"ttl": "30s"})),
        // Sourcing both origin and its mirror would be a diamond the server calls a cycle.
        (
            "merged",
            json!({"sources": [{"name": "origin"}, {"name": "KV_other"}]}),
        ),
    ] {
        let desired = kv_config::desired(bucket, &spec::<NatsKeyValueSpec>(b), UID).expect("maps");
        create_stream(&client, &desired).await;
        let server = stream_config(&client, &kv_config::stream_name(bucket))
            .await
            .expect("exists");
        assert_eq!(
            drift_names(kv_config::KV_FIELDS, &desired, &server),
            none,
            "{bucket}: {server}"
        );
        // Adopting it gives back a spec that maps to the same stream.
        let adopted = kv_config::spec_from_server(&spec(json!({})), &server).expect("a bucket");
        let again = kv_config::desired(bucket, &adopted, UID).expect("maps");
        assert_eq!(
            drift_names(kv_config::KV_FIELDS, &again, &server),
            none,
            "{bucket} adopted: {adopted:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_and_priority_group_consumers_round_trip_through_adoption() {
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let s: NatsStreamSpec = spec(json!({"subjects": ["work.>"], "replicas": 3}));
    create_stream(&client, &sc::desired("WORK", &s, UID).expect("maps")).await;
    let none = Vec::<String>::new();
    let rows = [
        (
            "push",
            json!({"deliverSubject": "deliver.push", "deliverGroup": "workers", "heartbeat": "5s",
            "flowControl": true, "ackPolicy": "Explicit", "rateLimit": 1_000_000, "headersOnly": true}),
        ),
        (
            "pinned",
            json!({"ackPolicy": "Explicit", "priorityGroups": ["jobs"], "priorityPolicy": "PinnedClient",
            "pinnedTTL": "1m", "maxRequestBatch": 10, "maxRequestExpires": "30s", "maxRequestMaxBytes": "1Mi"}),
        ),
        (
            "overflow",
            json!({"ackPolicy": "Explicit", "priorityGroups": ["jobs"], "priorityPolicy": "Overflow",
            "filterSubjects": ["work.a", "work.b"], "backOff": ["1s", "10s"], "maxDeliver": 5}),
        ),
        (
            "by_time",
            json!({"ackPolicy": "All", "deliverPolicy": "ByStartTime", "optStartTime": "2026-01-01T00:00:00Z",
            "replayPolicy": "Original", "sampleFrequency": "50%", "memoryStorage": true, "replicas": 1,
            "inactiveThreshold": "1h", "description": "sampled"}),
        ),
    ];
    for (name, c) in rows {
        let mut c = c;
        c["stream"] = json!("WORK");
        let desired = cc::desired(name, &spec::<NatsConsumerSpec>(c), UID).expect("maps");
        put_consumer(&client, "WORK", &desired, false).await;
        let server = consumer_config(&client, "WORK", name)
            .await
            .expect("exists");
        assert_eq!(
            drift_names(cc::CONSUMER_FIELDS, &desired, &server),
            none,
            "{name}: {server}"
        );
        let adopted =
            cc::spec_from_server(&spec(json!({"stream": "WORK"})), &server).expect("reads");
        let again = cc::desired(name, &adopted, UID).expect("maps");
        assert_eq!(
            drift_names(cc::CONSUMER_FIELDS, &again, &server),
            none,
            "{name} adopted: {adopted:?}"
        );
        // The adopted spec is accepted by the server as an update of the same consumer.
        put_consumer(&client, "WORK", &again, true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absent_objects_read_as_none_and_deletes_say_whether_anything_was_there() {
    use jetstream_controller::jsapi;
    let topo = cluster().await;
    let client = topo.connect().await.expect("connect");
    let absent = sim::wait::poll("STREAM.INFO of a missing stream", common::WAIT, || {
        let client = client.clone();
        async move {
            jsapi::stream_info(&client, "NOPE")
                .await
                .map(|v| Some(v.is_none()))
                .map_err(|e| e.to_string())
        }
    })
    .await
    .expect("answers");
    assert!(absent, "a missing stream reads as None");
    assert!(
        !jsapi::delete_stream(&client, "NOPE")
            .await
            .expect("answers")
    );
    assert_eq!(
        jsapi::consumer_info(&client, "NOPE", "c")
            .await
            .expect("answers"),
        None
    );
    assert!(
        !jsapi::delete_consumer(&client, "NOPE", "c")
            .await
            .expect("answers")
    );

    let s: NatsStreamSpec = spec(json!({"subjects": ["gone.>"]}));
    create_stream(&client, &sc::desired("GONE", &s, UID).expect("maps")).await;
    assert_eq!(
        jsapi::consumer_info(&client, "GONE", "c")
            .await
            .expect("answers"),
        None
    );
    let c: NatsConsumerSpec = spec(json!({"stream": "GONE", "ackPolicy": "Explicit"}));
    put_consumer(
        &client,
        "GONE",
        &cc::desired("c", &c, UID).expect("maps"),
        false,
    )
    .await;
    // Create with another config for an existing consumer is refused: create and update are
    // told apart, so a create never silently rewrites a consumer.
    let other: NatsConsumerSpec =
        spec(json!({"stream": "GONE", "ackPolicy": "Explicit", "maxDeliver": 3}));
    let again = jsapi::put_consumer(
        &client,
        "GONE",
        &cc::desired("c", &other, UID).expect("maps"),
        false,
    )
    .await;
    assert!(
        again.as_ref().is_err_and(|e| e.err_code().is_some()),
        "{again:?}"
    );
    assert!(
        jsapi::delete_consumer(&client, "GONE", "c")
            .await
            .expect("answers")
    );
    assert!(
        !jsapi::delete_consumer(&client, "GONE", "c")
            .await
            .expect("answers")
    );
    // Updating a consumer that does not exist is refused.
    let missing = jsapi::put_consumer(
        &client,
        "GONE",
        &cc::desired("c", &c, UID).expect("maps"),
        true,
    )
    .await;
    assert!(
        missing.as_ref().is_err_and(|e| e.err_code().is_some()),
        "{missing:?}"
    );
    assert!(
        jsapi::delete_stream(&client, "GONE")
            .await
            .expect("answers")
    );
    assert_eq!(stream_config(&client, "GONE").await, None);
}
