//! NATS JWTs: operator, account, user and activation claims; encode, sign, decode, verify.
