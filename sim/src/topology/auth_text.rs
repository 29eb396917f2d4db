//! The auth text every server of a topology appends to its config: the accounts block or the
//! operator's trust and resolver, then the spec's own extra config.

use std::path::Path;

use super::spec::{Auth, TopologySpec};

/// The user/password of the system account in [`Auth::Accounts`] mode.
pub const SYS_USER: (&str, &str) = ("sys", "sys");
/// The user/password of the application account in [`Auth::Accounts`] mode (also the no-auth user).
pub const APP_USER: (&str, &str) = ("app", "app");
/// The application account's name in [`Auth::Accounts`] mode.
pub const APP_ACCOUNT: &str = "APP";

/// The `$JS.API` stepdowns APP exports to SYS in [`Auth::Accounts`] mode.
const STEPDOWNS: [&str; 2] = ["STREAM.LEADER.STEPDOWN.*", "CONSUMER.LEADER.STEPDOWN.*.*"];

/// What a server's config ends with (its `extra`): in operator mode the resolver over the
/// server's own `dir/jwt`, then the auth block of `spec.auth`, then `spec.extra_config`.
pub(super) fn server_extra(spec: &TopologySpec, server_dir: &Path) -> String {
    let resolver = match &spec.auth {
        Auth::Operator(_) => render_resolver(server_dir),
        _ => String::new(),
    };
    format!("{resolver}{}{}", render_auth(&spec.auth), spec.extra_config)
}

fn render_auth(auth: &Auth) -> String {
    match auth {
        Auth::None => String::new(),
        // APP exports its stream and consumer leader stepdowns and SYS imports them under
        // `$JS.APP.API` — the auth plane's jetstream-stepdown export, as the system balancer
        // reaches an account's leaders.
        Auth::Accounts => format!(
            "accounts {{\n  SYS: {{ users: [{{ user: \"{}\", password: \"{}\" }}], imports: [{}] }}\n  {APP_ACCOUNT}: {{ jetstream: enabled, users: [{{ user: \"{}\", password: \"{}\" }}], exports: [{}] }}\n}}\nsystem_account: SYS\nno_auth_user: \"{}\"\n",
            SYS_USER.0,
            SYS_USER.1,
            STEPDOWNS
                .iter()
                .map(|s| format!(
                    "{{ service: {{ account: {APP_ACCOUNT}, subject: \"$JS.API.{s}\" }}, to: \"$JS.{APP_ACCOUNT}.API.{s}\" }}"
                ))
                .collect::<Vec<_>>()
                .join(", "),
            APP_USER.0,
            APP_USER.1,
            STEPDOWNS
                .iter()
                .map(|s| format!("{{ service: \"$JS.API.{s}\" }}"))
                .collect::<Vec<_>>()
                .join(", "),
            APP_USER.0
        ),
        Auth::Operator(op) => {
            let mut s = format!(
                "operator: \"{}\"\nsystem_account: \"{}\"\nresolver_preload: {{\n",
                op.operator_jwt, op.system_account
            );
            for (key, jwt) in &op.preload {
                s.push_str(&format!("  \"{key}\": \"{jwt}\"\n"));
            }
            s.push_str("}\n");
            s
        }
    }
}

fn render_resolver(server_dir: &Path) -> String {
    format!(
        "resolver: {{ type: full, dir: \"{}\", allow_delete: true, interval: \"2m\" }}\n",
        server_dir.join("jwt").display()
    )
}

/// The accounts block of [`Auth::Accounts`] with JetStream accounts `names` beside APP, each with
/// the user `<name in lower case>` (the same password) and no jetstream-stepdown export: the
/// system account cannot step their leaders down, as an account without the preset.
pub fn accounts_without_stepdown_export(names: &[&str]) -> String {
    let extra: String = names
        .iter()
        .map(|n| {
            let u = n.to_lowercase();
            format!(
                "  {n}: {{ jetstream: enabled, users: [{{ user: \"{u}\", password: \"{u}\" }}] }}\n"
            )
        })
        .collect();
    render_auth(&Auth::Accounts).replacen(
        "\n}\nsystem_account:",
        &format!("\n{extra}}}\nsystem_account:"),
        1,
    )
}

impl TopologySpec {
    /// [`Auth::Accounts`] and JetStream accounts `names` without the jetstream-stepdown export
    /// ([`accounts_without_stepdown_export`]), as the spec's whole extra config.
    pub fn with_unexported_accounts(self, names: &[&str]) -> Self {
        self.with_auth(Auth::None)
            .with_extra_config(&accounts_without_stepdown_export(names))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unexported_account_sits_beside_app_and_exports_nothing() {
        let text = accounts_without_stepdown_export(&["OTHER"]);
        let other = text
            .lines()
            .find(|l| l.trim_start().starts_with("OTHER:"))
            .unwrap_or_default();
        assert_eq!(
            other,
            "  OTHER: { jetstream: enabled, users: [{ user: \"other\", password: \"other\" }] }"
        );
        assert!(text.contains("APP: { jetstream: enabled"), "{text}");
        assert!(
            !text.contains("account: OTHER"),
            "SYS imports nothing of OTHER: {text}"
        );
        let close = text.find("\n}\nsystem_account: SYS").unwrap_or_default();
        assert!(text.find("OTHER:").unwrap_or(usize::MAX) < close, "{text}");
    }
}
