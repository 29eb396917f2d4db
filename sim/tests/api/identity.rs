//! A ServiceAccount's identity on kube-apiserver 1.20: a token from the TokenRequest API in a
//! kubeconfig of its own, which the RBAC authorizer sees as that ServiceAccount, not as the admin:
//! what its Role grants is allowed, anything else refused 403, and each answer is in the audit
//! log under its name (the admin's requests are not).

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use sim::apiserver::{Access, ApiServer, ApiServerError};

const NS: &str = "ops";

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        ..ObjectMeta::default()
    }
}

/// ServiceAccount `probe` in [`NS`], allowed to list ConfigMaps there and nothing else.
async fn probe_account(api: &ApiServer) {
    let client = api.client();
    let pp = PostParams::default();
    Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .create(
            &pp,
            &ServiceAccount {
                metadata: meta("probe"),
                ..Default::default()
            },
        )
        .await
        .expect("the ServiceAccount");
    let rule = PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: vec!["list".into()],
        ..PolicyRule::default()
    };
    Api::<Role>::namespaced(client.clone(), NS)
        .create(
            &pp,
            &Role {
                metadata: meta("probe"),
                rules: Some(vec![rule]),
            },
        )
        .await
        .expect("the Role");
    let binding = RoleBinding {
        metadata: meta("probe"),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "probe".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "probe".into(),
            namespace: Some(NS.into()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(client, NS)
        .create(&pp, &binding)
        .await
        .expect("the RoleBinding");
}

fn code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_is_that_account_and_what_it_may_not_do_is_403() {
    let api = ApiServer::kube_1_20()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    api.create_namespace(NS)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    probe_account(&api).await;
    let sa = api
        .service_account_identity(NS, "probe")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sa.username(), "system:serviceaccount:ops:probe");
    let text = std::fs::read_to_string(sa.kubeconfig()).expect("the kubeconfig");
    assert!(
        text.contains(api.url()) && text.contains("token:"),
        "{text}"
    );
    assert!(!text.contains("client-certificate"), "{text}");
    assert_eq!(sa.client().default_namespace(), NS);

    let list_configmaps = Access {
        verb: "list".into(),
        group: String::new(),
        resource: "configmaps".into(),
        namespace: Some(NS.into()),
        name: None,
    };
    api.wait_allowed(&sa.username(), &[list_configmaps], Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // What the Role grants, and its neighbours it does not.
    Api::<ConfigMap>::namespaced(sa.client(), NS)
        .list(&ListParams::default())
        .await
        .expect("its Role lets it list ConfigMaps in ops");
    let secrets = Api::<Secret>::namespaced(sa.client(), NS)
        .list(&ListParams::default())
        .await
        .expect_err("Secrets are not in its Role");
    assert_eq!(code(&secrets), Some(403), "{secrets}");
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("mine".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let created = Api::<Namespace>::all(sa.client())
        .create(&PostParams::default(), &ns)
        .await
        .expect_err("it is not the admin");
    assert_eq!(code(&created), Some(403), "{created}");
    // The admin still may (the identity is a second client, not a changed one).
    api.create_namespace("mine")
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // The audit log, in the server's words.
    let seen: Vec<String> = api
        .audit_of(&sa.username())
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|e| format!("{} {} {}", e.verb, e.resource, e.code))
        .collect();
    assert_eq!(
        seen,
        [
            "list configmaps 200",
            "list secrets 403",
            "create namespaces 403"
        ],
        "{seen:#?}"
    );
    let refused = api
        .refused_to(&sa.username())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(refused.iter().all(|e| e.code == 403), "{refused:#?}");
    assert!(
        api.audit_of("admin")
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty(),
        "only ServiceAccounts are audited"
    );

    // No token for a ServiceAccount that does not exist, and the error names it.
    let err = api
        .service_account_identity(NS, "absent")
        .await
        .expect_err("no such ServiceAccount");
    assert!(matches!(err, ApiServerError::Token { .. }), "{err}");
    assert!(err.to_string().contains("ops/absent"), "{err}");
}
