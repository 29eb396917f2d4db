//! kube's own Controller, fed the watcher events of a relist, drops the pass of an object the
//! relist brings that its store never held; `controller_kit::relist` brings it back. The watch
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
fn relist() -> impl futures::Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Send {
    let script: Vec<(Duration, Event<ConfigMap>)> = vec![
        (Duration::ZERO, Event::Init),
        (Duration::ZERO, Event::InitApply(object("a"))),
        (Duration::ZERO, Event::InitDone),
        (Duration::from_millis(100), Event::Init),
        (Duration::ZERO, Event::InitApply(object("a"))),
        (Duration::ZERO, Event::InitApply(object("b"))),
        (Duration::from_secs(1), Event::InitDone),
    ];
    futures::stream::iter(script)
        .then(|(wait, event)| async move {
            tokio::time::sleep(wait).await;
            Ok(event)
        })
        .chain(futures::stream::pending())
}

/// Runs the Controller over the scripted relist for `within` (paused clock) and returns the
/// objects it reconciled, in order.
async fn reconciled(redrive: bool, within: Duration) -> Vec<String> {
    let (reader, writer) = reflector::store::<ConfigMap>();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (again_tx, again) = controller_kit::relist::redrive("ConfigMap");
    let controller = Controller::for_stream(reflector(writer, relist()).applied_objects(), reader);
    let controller = if redrive {
        controller.reconcile_all_on(again)
    } else {
        controller
    };
    let run = controller
        .run(
            |obj: Arc<ConfigMap>, seen: Arc<Arc<Mutex<Vec<String>>>>| async move {
                let name = obj.metadata.name.clone().unwrap_or_default();
                seen.lock().unwrap_or_else(|p| p.into_inner()).push(name);
                Ok::<_, std::io::Error>(Action::await_change())
            },
            |_, _, _| Action::await_change(),
            Arc::new(seen.clone()),
        )
        .for_each(move |r| {
            again_tx.note(&r);
            futures::future::ready(())
        });
    let _ = tokio::time::timeout(within, run).await;
    seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

#[tokio::test(start_paused = true)]
async fn without_redrive_the_object_the_relist_brought_is_never_reconciled() {
    let seen = reconciled(false, Duration::from_secs(60)).await;
    assert!(seen.contains(&"a".to_string()), "{seen:?}");
    assert!(
        !seen.contains(&"b".to_string()),
        "kube-runtime now keeps the pass of an object it lists before the list completes; \
         controller_kit::relist may no longer be needed: {seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn with_redrive_the_object_the_relist_brought_is_reconciled() {
    let seen = reconciled(true, Duration::from_secs(60)).await;
    assert!(seen.contains(&"b".to_string()), "{seen:?}");
}
