//! The probe port (`--probe-addr`): `GET /healthz` answers 200 while the process runs (liveness);
//! `GET /readyz` answers 200 once every run loop's watch has its first list in, whether this
//! replica leads or stands by (a standby with warm stores is ready to take over), and 503 with
//! what it waits for until then. Served by the kit's one HTTP responder ([`crate::http`]), as
//! /metrics is.

use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::http::Response;
use crate::process_state::{Process, Role};

/// What `path` answers for `process`.
pub fn answer(process: &Process, path: &str) -> Response {
    match path {
        "/healthz" => Response::ok("ok\n"),
        "/readyz" => {
            let r = process.readiness();
            let role = match process.role() {
                Role::Leading => "leading",
                Role::Standby => "standby",
                Role::Lost => "lost the Lease",
            };
            if r.ready {
                Response::ok(format!("ready ({role})\n"))
            } else if r.waiting.is_empty() {
                Response::text(
                    "503 Service Unavailable",
                    format!("no controller running yet ({role})\n"),
                )
            } else {
                Response::text(
                    "503 Service Unavailable",
                    format!(
                        "waiting for the first list of: {} ({role})\n",
                        r.waiting.join(", ")
                    ),
                )
            }
        }
        _ => Response::not_found(),
    }
}

/// Binds `addr` and serves the probes of `process` in the background; returns the bound address.
pub async fn spawn(addr: SocketAddr, process: Process) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(crate::http::serve(listener, None, move |path| {
        answer(&process, path)
    }));
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_always_and_readyz_once_every_first_list_is_in_leader_or_standby() {
        let p = Process::standby();
        assert_eq!(answer(&p, "/healthz").status, "200 OK");
        let none = answer(&p, "/readyz");
        assert_eq!(none.status, "503 Service Unavailable");
        assert_eq!(none.body, "no controller running yet (standby)\n");
        let stream = p.enter("NatsStream");
        assert_eq!(
            answer(&p, "/readyz").body,
            "waiting for the first list of: NatsStream (standby)\n"
        );
        stream.synced();
        assert_eq!(answer(&p, "/readyz"), Response::ok("ready (standby)\n"));
        p.set_role(Role::Leading);
        assert_eq!(answer(&p, "/readyz"), Response::ok("ready (leading)\n"));
        assert_eq!(answer(&p, "/metrics").status, "404 Not Found");
    }
}
