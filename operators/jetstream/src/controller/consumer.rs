//! NatsConsumer: by `stream` it names its connection; by `streamRef` it waits for the NatsStream
//! to be Ready and inherits its connection.

use std::sync::Arc;

use futures::FutureExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::{Resource, ResourceExt};
use nats_api::jetstream::{FINALIZER, NatsConsumer, NatsStream, condition, reason};
use serde_json::Value;

use super::objects::{connection_state, not_ready, reach};
use super::{
    Context, Error, Outcome, WAIT_RETRY, describe, drive, instrumented, kube_err, previous_status,
    settled, watch_config, write_status,
};
use crate::drift::{self, Decision};
use crate::jsapi;
use crate::lifecycle::{self, Action as Plan, Cleanup};
use crate::ownership::{self, Found};
use crate::references::{self, ConsumerTarget};
use crate::{consumer_config, server_state};

/// Where the consumer lives, or the outcome of waiting for it.
async fn target(ctx: &Context, obj: &NatsConsumer) -> Result<ConsumerTarget, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let Some(r) = &obj.spec.stream_ref else {
        return Ok(references::consumer_target(obj, None, &[]));
    };
    let target_ns = references::namespace_of(r, &ns).to_string();
    let grants = if target_ns == ns {
        Vec::new()
    } else {
        controller_kit::grants::grants_in(&ctx.client, &target_ns)
            .await
            .map_err(kube_err(obj))?
    };
    let api: Api<NatsStream> = Api::namespaced(ctx.client.clone(), &target_ns);
    let stream = api.get_opt(&r.name).await.map_err(kube_err(obj))?;
    Ok(references::consumer_target(obj, stream.as_ref(), &grants))
}

async fn pass(obj: &NatsConsumer, ctx: &Context) -> Result<Outcome, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let uid = obj.uid().unwrap_or_default();
    let prev = previous_status(obj);
    let spec_edited = prev.observed_generation != obj.meta().generation;
    let spec = &obj.spec;
    if controller_kit::conditions::is_true(&prev.conditions, condition::TERMINAL)
        && !lifecycle::recheck_terminal(spec.terminal_policy, spec_edited)
    {
        return Ok(Outcome {
            terminal: controller_kit::conditions::find(&prev.conditions, condition::TERMINAL)
                .map(|c| (reason_of(&c.reason), c.message.clone())),
            requeue: Some(ctx.settings.resync),
            ..Outcome::default()
        });
    }
    let (conn, stream) = match target(ctx, obj).await? {
        ConsumerTarget::Bound { connection, stream } => (connection, stream),
        ConsumerTarget::Waiting { reason, message } => {
            return Ok(Outcome {
                ready: Some((false, reason, message.clone())),
                synced: Some((false, reason, message)),
                requeue: Some(WAIT_RETRY.min(ctx.settings.resync)),
                ..Outcome::default()
            });
        }
    };
    // By streamRef the connection is the stream's, already admitted to it; by stream the
    // consumer's own reference needs a grant when it crosses namespaces.
    let check_grant = spec.stream.is_some() && conn.namespace.as_deref() != Some(ns.as_str());
    let client = match reach(ctx, obj, &conn, check_grant).await? {
        Ok(c) => c,
        Err(o) => return Ok(o),
    };
    let name = obj.consumer_name().to_string();
    let what = format!("consumer {name} on stream {stream}");
    let info = match jsapi::consumer_info(&client, &stream, &name).await {
        Ok(i) => i,
        Err(e) => {
            return Ok(not_ready(
                ctx,
                obj,
                reason::OBSERVE_FAILED,
                format!("reading {what}: {e}"),
            ));
        }
    };
    settled(ctx, obj);
    let config = info.as_ref().map(|i| i["config"].clone());
    let found = ownership::found(config.as_ref(), &uid);
    let plan = lifecycle::plan(spec.adoption_policy, &found);
    let refused = |reason: &'static str, message: String| Outcome {
        ready: Some((false, reason, message.clone())),
        synced: Some((false, reason, message)),
        compared: true,
        requeue: Some(ctx.settings.resync),
        ..Outcome::default()
    };
    let desired = match consumer_config::desired(&name, spec, &uid) {
        Ok(d) => d,
        Err(e) => return Ok(refused(reason::REJECTED, format!("{what}: {e}"))),
    };
    let matches = format!("{what} matches spec");
    let in_sync = (true, reason::MATCHES_SPEC, matches.clone());
    let done = |reply: &Value, synced: (bool, &'static str, String)| Outcome {
        ready: Some((true, reason::MATCHES_SPEC, matches.clone())),
        synced: Some(synced),
        ownership: server_state::ownership(&reply["config"], plan, prev.ownership.as_ref()),
        server: Some(server_state::of_consumer(reply)),
        compared: true,
        requeue: Some(ctx.settings.resync),
        ..Outcome::default()
    };
    let outcome = match plan {
        Plan::Terminal(t) => {
            let message = match (&t, &found) {
                (_, Found::OwnedByOther(o)) => {
                    format!("{what} is owned by another resource (UID {o})")
                }
                (lifecycle::TerminalReason::NotFound, _) => {
                    format!("{what} does not exist; adoptionPolicy Adopt requires it")
                }
                _ => format!("{what} exists and carries no ownership marker; adoptionPolicy Never"),
            };
            Outcome {
                terminal: Some((t.reason(), message.clone())),
                ..refused(t.reason(), message)
            }
        }
        Plan::Create | Plan::LateInitialize => {
            match jsapi::put_consumer(&client, &stream, &desired, plan != Plan::Create).await {
                Ok(reply) => {
                    let mut o = done(&reply, in_sync);
                    if plan == Plan::LateInitialize {
                        o.adopted = Some(format!("{what} existed unowned; adopted"));
                    }
                    o
                }
                Err(e) => refused(reason::REJECTED, format!("writing {what}: {e}")),
            }
        }
        Plan::AdoptIntoSpec => {
            let server = config.clone().unwrap_or(Value::Null);
            let adopted = match consumer_config::spec_from_server(spec, &server) {
                Ok(s) => s,
                Err(e) => return Ok(refused(reason::REJECTED, format!("{what}: {e}"))),
            };
            let marked = match consumer_config::desired(&name, &adopted, &uid) {
                Ok(d) => d,
                Err(e) => return Ok(refused(reason::REJECTED, format!("{what}: {e}"))),
            };
            match jsapi::put_consumer(&client, &stream, &marked, true).await {
                Ok(reply) => {
                    let mut o = done(&reply, in_sync);
                    o.spec_patch = serde_json::to_value(&adopted).ok();
                    o.adopted = Some(format!(
                        "{what} existed unowned; adopted and its config written into spec"
                    ));
                    o
                }
                Err(e) => refused(reason::REJECTED, format!("adopting {what}: {e}")),
            }
        }
        Plan::Update => {
            let server = config.clone().unwrap_or(Value::Null);
            let drift = drift::drifted(consumer_config::CONSUMER_FIELDS, &desired, &server);
            let decision = drift::decide(&drift, spec.recreate_on_immutable_change);
            let report = lifecycle::synced(&decision, spec_edited);
            let written = match &decision {
                Decision::InSync => Ok(info.clone().unwrap_or(Value::Null)),
                Decision::Update(_) => jsapi::put_consumer(&client, &stream, &desired, true).await,
                Decision::Recreate(_) => {
                    match jsapi::delete_consumer(&client, &stream, &name).await {
                        Ok(_) => jsapi::put_consumer(&client, &stream, &desired, false).await,
                        Err(e) => Err(e),
                    }
                }
                Decision::Refused(fields) => {
                    return Ok(refused(
                        reason::SYNC_FAILED,
                        format!(
                            "{what}: nats-server cannot change {}; set recreateOnImmutableChange",
                            fields.join(", ")
                        ),
                    ));
                }
            };
            match written {
                Ok(reply) => {
                    let synced = if report.drift_corrected_event {
                        let m = format!(
                            "{what} was changed out of band; corrected {}",
                            report.fields.join(", ")
                        );
                        ctx.events
                            .publish(obj, true, reason::DRIFT_CORRECTED, m.clone())
                            .await;
                        (report.status, report.reason, m)
                    } else {
                        in_sync
                    };
                    done(&reply, synced)
                }
                Err(e) => refused(reason::REJECTED, format!("updating {what}: {e}")),
            }
        }
    };
    Ok(outcome)
}

fn reason_of(r: &str) -> &'static str {
    match r {
        "ExistsUnowned" => reason::EXISTS_UNOWNED,
        "OwnedByOther" => reason::OWNED_BY_OTHER,
        "NotFound" => reason::NOT_FOUND,
        _ => reason::REJECTED,
    }
}

async fn apply(obj: Arc<NatsConsumer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let outcome = pass(&obj, &ctx).await?;
    write_status(&ctx, &*obj, outcome).await
}

async fn cleanup(obj: Arc<NatsConsumer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let obj = &*obj;
    let ns = obj.namespace().unwrap_or_default();
    let fail = |message: String| Error::Cleanup {
        object: describe(obj),
        message,
    };
    // A consumer whose stream resource is gone, or never bound, has nothing to run its policy on.
    let (conn, stream) = match target(&ctx, obj).await? {
        ConsumerTarget::Bound { connection, stream } => (connection, stream),
        ConsumerTarget::Waiting { .. } => {
            ctx.metrics.forget("NatsConsumer", &ns, &obj.name_any());
            return Ok(Action::await_change());
        }
    };
    let state = connection_state(&ctx, obj, &conn).await?;
    if lifecycle::dials_on_deletion(obj.spec.deletion_policy, state) {
        let client = match reach(&ctx, obj, &conn, false).await? {
            Ok(c) => c,
            Err(o) => {
                return Err(fail(
                    o.ready.map(|r| r.2).unwrap_or_else(|| "unreachable".into()),
                ));
            }
        };
        let name = obj.consumer_name().to_string();
        let info = jsapi::consumer_info(&client, &stream, &name)
            .await
            .map_err(|e| fail(format!("reading consumer {name}: {e}")))?;
        let config = info.map(|i| i["config"].clone());
        let found = ownership::found(config.as_ref(), &obj.uid().unwrap_or_default());
        if lifecycle::on_deletion(obj.spec.deletion_policy, state, &found)
            == Cleanup::DeleteOnServer
        {
            jsapi::delete_consumer(&client, &stream, &name)
                .await
                .map_err(|e| fail(format!("deleting consumer {name}: {e}")))?;
        }
    }
    ctx.metrics.forget("NatsConsumer", &ns, &obj.name_any());
    Ok(Action::await_change())
}

async fn reconcile(obj: Arc<NatsConsumer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<NatsConsumer> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let object = describe(&*obj);
    let c = ctx.clone();
    controller_kit::finalizer::run(&api, FINALIZER, obj, |o| apply(o, c), |o| cleanup(o, ctx))
        .await
        .map_err(|e| Error::Finalizer {
            object,
            message: controller_kit::finalizer::describe(&e),
        })
}

/// The NatsConsumer controller.
pub(super) async fn controller(ctx: Arc<Context>) {
    let api: Api<NatsConsumer> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watch_config());
    let store = controller.store();
    let c = ctx.clone();
    // A NatsStream turning Ready binds the consumers waiting for it by streamRef at once.
    let controller = controller.watches(
        Api::<NatsStream>::all(ctx.client.clone()),
        watch_config(),
        move |stream| {
            let ready = stream.status.as_ref().is_some_and(|s| {
                controller_kit::conditions::is_true(&s.conditions, condition::READY)
            });
            let ns = stream.namespace().unwrap_or_default();
            let name = stream.name_any();
            let waiting: Vec<_> = if ready {
                store
                    .state()
                    .into_iter()
                    .filter(|o| {
                        let own = o.namespace().unwrap_or_default();
                        o.spec.stream_ref.as_ref().is_some_and(|r| {
                            r.name == name && references::namespace_of(r, &own) == ns
                        }) && !controller_kit::conditions::is_true(
                            &previous_status(&**o).conditions,
                            condition::READY,
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            waiting
                .into_iter()
                .map(|o| {
                    c.forget_due(&*o);
                    kube::runtime::reflector::ObjectRef::from_obj(&*o)
                })
                .collect::<Vec<_>>()
        },
    );
    drive(controller, ctx, |obj, ctx| {
        instrumented(obj, ctx, reconcile).boxed()
    })
    .await;
}
