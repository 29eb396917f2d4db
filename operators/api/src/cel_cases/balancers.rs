//! CEL rows of NatsBalancer, NatsSystemBalancer and NatsClusterEvacuation: every rule with accepted
//! rows beside the refused ones, creates and transitions.
//!
//! Rows cover only rules that are CEL (`x-kubernetes-validations`); bounds the OpenAPI schema
//! enforces are not rows here. (pool names as DNS labels, `to.serverTags` of at least one tag, for two)

use super::Expect::{Accepted, Refused};
use super::{Case, create, update};

const BAL: &str = "NatsBalancer";
const SYSBAL: &str = "NatsSystemBalancer";
const EVAC: &str = "NatsClusterEvacuation";

/// The rows of the balancers and the evacuation.
pub fn cases() -> Vec<Case> {
    let mut rows = Vec::new();
    rows.extend(balancers());
    rows.extend(evacuation());
    rows
}

fn balancers() -> Vec<Case> {
    vec![
        create(
            "balancer: pools, moves and the default interval",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  pools:\n    - name: hot\n      selector:\n        matchLabels:\n          tier: hot\n  moves:\n    leader: true\n    placement: false\n"
            ),
            Accepted,
        ),
        create(
            "balancer: interval 2m",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 2m\n"
            ),
            Accepted,
        ),
        create(
            "balancer: interval 0s is below the 5s floor",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 0s\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "balancer: interval 1ns, a hot loop, is below the floor",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 1ns\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "balancer: interval 4999ms is just below the floor",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 4999ms\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "balancer: interval 5s, the floor itself, is accepted",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 5s\n"
            ),
            Accepted,
        ),
        update(
            "balancer: lowering interval below the floor is refused",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 1m\n"
            ),
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 1s\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        update(
            "balancer: raising the interval from the floor is accepted",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 5s\n"
            ),
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 10m\n"
            ),
            Accepted,
        ),
        create(
            "balancer: the pool name default is reserved",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  pools:\n    - name: default\n      selector:\n        matchLabels:\n          tier: hot\n"
            ),
            Refused("reserved"),
        ),
        update(
            "balancer: connectionRef is immutable",
            BAL,
            js!("NatsBalancer", "  connectionRef:\n    name: orders\n"),
            js!("NatsBalancer", "  connectionRef:\n    name: billing\n"),
            Refused("connectionRef cannot change"),
        ),
        update(
            "balancer: pools, moves and interval change",
            BAL,
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 1m\n"
            ),
            js!(
                "NatsBalancer",
                "  connectionRef:\n    name: orders\n  interval: 30s\n  moves:\n    placement: true\n  pools:\n    - name: cold\n      selector:\n        matchLabels:\n          tier: cold\n"
            ),
            Accepted,
        ),
        create(
            "system balancer: placement moves on",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  moves:\n    leader: true\n    placement: true\n  interval: 1m\n"
            ),
            Accepted,
        ),
        create(
            "system balancer: interval 0 is below the 5s floor",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: \"0\"\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "system balancer: interval 500ms is below the floor",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 500ms\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        create(
            "system balancer: interval 5s, the floor itself, is accepted",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 5s\n"
            ),
            Accepted,
        ),
        update(
            "system balancer: lowering interval below the floor is refused",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 1m\n"
            ),
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 2s\n"
            ),
            Refused("interval must be at least 5s"),
        ),
        update(
            "system balancer: lowering the interval to the floor is accepted",
            SYSBAL,
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 1m\n"
            ),
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system\n  interval: 5s\n"
            ),
            Accepted,
        ),
        update(
            "system balancer: connectionRef is immutable",
            SYSBAL,
            js!("NatsSystemBalancer", "  connectionRef:\n    name: system\n"),
            js!(
                "NatsSystemBalancer",
                "  connectionRef:\n    name: system-west\n"
            ),
            Refused("connectionRef cannot change"),
        ),
    ]
}

fn evacuation() -> Vec<Case> {
    vec![
        create(
            "evacuation: from a cluster to tagged servers",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            Accepted,
        ),
        update(
            "evacuation: from is immutable",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-north\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            Refused("from cannot change"),
        ),
        update(
            "evacuation: to is immutable",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\", \"disk:ssd\"]\n"
            ),
            Refused("to cannot change"),
        ),
        update(
            "evacuation: connectionRef is immutable",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system-2\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            Refused("connectionRef cannot change"),
        ),
        update(
            "evacuation: an unchanged spec is accepted",
            EVAC,
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            js!(
                "NatsClusterEvacuation",
                "  connectionRef:\n    name: system\n  from:\n    cluster: prod-east\n  to:\n    serverTags: [\"region:west\"]\n"
            ),
            Accepted,
        ),
    ]
}
