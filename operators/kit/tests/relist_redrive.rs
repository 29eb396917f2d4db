//! kube's own Controller, fed the watcher events of a relist, drops the pass of an object the
//! relist brings that its store never held; `controller_kit::relist` brings it back. It also
//! drops the requeue of an object deleted meanwhile, which must stay dropped. The watch
//! events are scripted (the race needs a relist to be caught between its pages, which a live
//! apiserver gives only now and then: see docs/controllers.md); everything downstream of them
//! is kube-runtime's real reflector, store, scheduler and runner.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event};

fn object(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("nats".into());
    cm.metadata.resource_version = Some("1".into());
    cm
}

/// The first list holds `a`; then the watch fails and the relist brings `a` and `b` (created
/// while the watch was failing) in a page that lands a second before the list completes.
fn relist() -> Vec<(Duration, Event<ConfigMap>)> {
    vec![
        (Duration::ZERO, Event::Init),
        (Duration::ZERO, Event::InitApply(object("a"))),
        (Duration::ZERO, Event::InitDone),
        (Duration::from_millis(100), Event::Init),
        (Duration::ZERO, Event::InitApply(object("a"))),
        (Duration::ZERO, Event::InitApply(object("b"))),
        (Duration::from_secs(1), Event::InitDone),
    ]
}

/// The first list holds `a` and `gone`; `gone`'s pass asks to look again in a second, and it is
/// deleted before that (another pass released its finalizer).
fn deleted_before_its_requeue() -> Vec<(Duration, Event<ConfigMap>)> {
    vec![
        (Duration::ZERO, Event::Init),
        (Duration::ZERO, Event::InitApply(object("a"))),
        (Duration::ZERO, Event::InitApply(object("gone"))),
        (Duration::ZERO, Event::InitDone),
        (Duration::from_millis(500), Event::Delete(object("gone"))),
    ]
}

fn played(
    script: Vec<(Duration, Event<ConfigMap>)>,
) -> impl futures::Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Send {
    futures::stream::iter(script)
        .then(|(wait, event)| async move {
            tokio::time::sleep(wait).await;
            Ok(event)
        })
        .chain(futures::stream::pending())
}

/// Runs the Controller over `script` for `within` (paused clock) and returns the objects it
/// reconciled, in order, and how many of its triggers were dropped; each pass of `gone` asks
/// to look again in a second.
async fn reconciled(
    script: Vec<(Duration, Event<ConfigMap>)>,
    redrive: bool,
    within: Duration,
) -> (Vec<String>, usize) {
    let (reader, writer) = reflector::store::<ConfigMap>();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut drops = 0;
    let (again_tx, again) = controller_kit::relist::redrive("ConfigMap", reader.clone());
    let controller =
        Controller::for_stream(reflector(writer, played(script)).applied_objects(), reader);
    let controller = if redrive {
        controller.reconcile_on(again)
    } else {
        controller
    };
    let run = controller
        .run(
            |obj: Arc<ConfigMap>, seen: Arc<Arc<Mutex<Vec<String>>>>| async move {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let again = if name == "gone" {
                    Action::requeue(Duration::from_secs(1))
                } else {
                    Action::await_change()
                };
                seen.lock().unwrap_or_else(|p| p.into_inner()).push(name);
                Ok::<_, std::io::Error>(again)
            },
            |_, _, _| Action::await_change(),
            Arc::new(seen.clone()),
        )
        .for_each(|r| {
            drops += usize::from(controller_kit::relist::dropped(&r));
            again_tx.note(&r);
            futures::future::ready(())
        });
    let _ = tokio::time::timeout(within, run).await;
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (seen, drops)
}

#[tokio::test(start_paused = true)]
async fn without_redrive_the_object_the_relist_brought_is_never_reconciled() {
    let (seen, _) = reconciled(relist(), false, Duration::from_secs(60)).await;
    assert!(seen.contains(&"a".to_string()), "{seen:?}");
    assert!(
        !seen.contains(&"b".to_string()),
        "kube-runtime now keeps the pass of an object it lists before the list completes; \
         controller_kit::relist may no longer be needed: {seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn with_redrive_the_object_the_relist_brought_is_reconciled() {
    let (seen, _) = reconciled(relist(), true, Duration::from_secs(60)).await;
    assert!(seen.contains(&"b".to_string()), "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn an_object_deleted_before_its_requeue_brings_no_pass_of_anything() {
    let (mut seen, drops) =
        reconciled(deleted_before_its_requeue(), true, Duration::from_secs(60)).await;
    assert_eq!(drops, 1, "the requeue of the deleted object was dropped");
    seen.sort();
    assert_eq!(seen, ["a", "gone"], "one pass each, none again");
}
