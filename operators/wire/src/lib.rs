//! NATS plumbing shared by the controllers: dialing a NatsConnection, typed $SYS.REQ.* and $JS.API.* requests.
