//! Claims against a real nats-server: the JWTs signed here are the ones it trusts.

mod live_server;
