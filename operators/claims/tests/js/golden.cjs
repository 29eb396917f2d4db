// The JavaScript side of nats-claims' golden tests, run with node against @nats-io/jwt.
//   node golden.cjs encode KEYS.json        -> {"tokens": {case: jwt}, "creds": text}
//   node golden.cjs decode < {"tokens", "creds"} -> {"payloads": {case: payload | {"error"}}, "creds": {...}}
// The cases below are written by hand in the JSON shape nats-io/jwt v2 (Go) signs; the Rust
// test builds the same cases with nats-claims' builders, so each side is authored separately.
"use strict";
const path = require("path");
const fs = require("fs");

const modules = process.env.NATS_JWT_NODE_MODULES;
if (!modules) {
  throw new Error("NATS_JWT_NODE_MODULES must name the node_modules holding @nats-io/jwt");
}
const jwt = require(path.join(modules, "@nats-io/jwt"));

const EXP = 4102444800; // 2100-01-01
const NBF = 1700000000;

function keyPairs(keys) {
  const te = new TextEncoder();
  const out = {};
  for (const [name, k] of Object.entries(keys.keys)) {
    out[name] = jwt.fromSeed(te.encode(k.seed));
  }
  return out;
}

const unlimited = () => ({
  subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1,
});

async function encodeAll(keys) {
  const K = keyPairs(keys);
  const pub = (n) => K[n].getPublicKey();
  const t = {};

  t.operator_min = await jwt.encodeOperator("op-min", K.operator, {});
  t.operator_full = await jwt.encodeOperator("op-full", K.operator, {
    signing_keys: [pub("operator_signing")],
    account_server_url: "http://accounts.example:9090/jwt/v1",
    operator_service_urls: ["nats://a.example:4222", "tls://b.example:4222"],
    system_account: pub("account_b"),
    assert_server_version: "2.10.0",
    strict_signing_key_usage: true,
    tags: ["prod", "eu"],
  }, { exp: EXP });

  t.account_defaults = await jwt.encodeAccount("acc-defaults", K.account_a, {
    limits: unlimited(),
    default_permissions: { pub: {}, sub: {} },
    authorization: {},
  }, { signer: K.operator });

  t.account_limits = await jwt.encodeAccount("acc-limits", K.account_a, {
    limits: {
      subs: 1000, data: 1048576, payload: 65536, imports: 10, exports: 20, wildcards: true,
      disallow_bearer: true, conn: 50, leaf: 5,
      mem_storage: 1073741824, disk_storage: 10737418240, streams: 10, consumer: 100,
      max_ack_pending: 1000, mem_max_stream_bytes: 268435456, disk_max_stream_bytes: 1073741824,
      max_bytes_required: true,
    },
    default_permissions: { pub: {}, sub: {} },
    authorization: {},
  }, { signer: K.operator_signing });

  t.account_tiered = await jwt.encodeAccount("acc-tiered", K.account_a, {
    limits: {
      ...unlimited(),
      tiered_limits: {
        R1: { mem_storage: 536870912, disk_storage: 1073741824, streams: 5, consumer: 50 },
        R3: { disk_storage: 3221225472, streams: 3, max_bytes_required: true },
      },
    },
    default_permissions: { pub: {}, sub: {} },
    authorization: {},
  }, { signer: K.operator_signing });

  t.account_exports_imports = await jwt.encodeAccount("acc-exports", K.account_a, {
    imports: [
      {
        name: "feed", subject: "feed.>", account: pub("account_b"), local_subject: "in.feed.>",
        type: "stream", allow_trace: true,
      },
      {
        name: "q", subject: "q.req", account: pub("account_b"), token: keys.import_token,
        type: "service", share: true,
      },
      { name: "old", subject: "z.old", account: pub("account_b"), to: "old.z", type: "service" },
    ],
    exports: [
      {
        name: "events", subject: "events.>", type: "stream", description: "event feed",
        info_url: "https://docs.example/events",
      },
      {
        name: "private", subject: "private.*.data", type: "stream", token_req: true,
        revocations: { [pub("account_b")]: 1700000000 }, account_token_position: 2,
      },
      {
        name: "svc", subject: "svc.req", type: "service", response_type: "Stream",
        response_threshold: 5000000000,
        service_latency: { sampling: "headers", results: "latency.svc" },
        advertise: true, allow_trace: true,
      },
      {
        name: "svc2", subject: "svc2.>", type: "service", response_type: "Chunked",
        service_latency: { sampling: 50, results: "latency.svc2" },
      },
    ],
    limits: unlimited(),
    default_permissions: { pub: {}, sub: {} },
    authorization: {},
  }, { signer: K.operator });

  // Go writes signing keys sorted by key.
  const signingKeys = [
    pub("account_a_signing"),
    {
      kind: "user_scope",
      key: pub("account_a_scoped"),
      role: "readers",
      template: {
        pub: { allow: ["read.>"] },
        sub: { allow: ["read.>", "_INBOX.>"], deny: ["read.secret"] },
        resp: { max: 1, ttl: 1000000000 },
        src: ["10.0.0.0/8"],
        times: [{ start: "08:00:00", end: "18:00:00" }],
        times_location: "Europe/Berlin",
        subs: 100, data: -1, payload: 1024,
        allowed_connection_types: ["STANDARD", "WEBSOCKET"],
      },
      description: "read-only users",
    },
  ].sort((a, b) => {
    const ka = typeof a === "string" ? a : a.key;
    const kb = typeof b === "string" ? b : b.key;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
  t.account_signing_keys = await jwt.encodeAccount("acc-signing", K.account_a, {
    limits: unlimited(),
    signing_keys: signingKeys,
    default_permissions: { pub: {}, sub: {} },
    authorization: {},
  }, { signer: K.operator });

  t.account_rest = await jwt.encodeAccount("acc-rest", K.account_a, {
    limits: unlimited(),
    revocations: { [pub("user_2")]: 1700000000, "*": 1600000000 },
    default_permissions: {
      pub: { allow: ["pub.>"], deny: ["pub.secret"] },
      sub: { allow: ["sub.>"] },
      resp: { max: 5, ttl: 60000000000 },
    },
    mappings: {
      "orders.*": [
        { subject: "orders.new", weight: 80 },
        { subject: "orders.canary", weight: 20, cluster: "east" },
      ],
    },
    authorization: { auth_users: [pub("user_3")], allowed_accounts: ["*"] },
    trace: { dest: "trace.a", sampling: 50 },
    cluster_traffic: "owner",
    description: "all the rest",
    info_url: "https://docs.example/a",
    tags: ["team-a", "prod"],
  }, { exp: EXP, nbf: NBF, signer: K.operator_signing });

  t.user_defaults = await jwt.encodeUser("u-defaults", K.user_1, K.account_a, {
    pub: {}, sub: {},
  });

  t.user_full = await jwt.encodeUser("u-full", K.user_2, K.account_a, {
    pub: { allow: ["a.>", "b"], deny: ["a.secret"] },
    sub: { allow: ["c.>", "q.* workers"], deny: ["c.secret"] },
    resp: { max: 1, ttl: 0 },
    src: ["192.168.0.0/16", "10.1.2.3/32"],
    times: [{ start: "00:00:00", end: "12:00:00" }],
    times_location: "UTC",
    subs: 10, data: 1000000, payload: 2048,
    bearer_token: true,
    proxy_required: true,
    allowed_connection_types: ["STANDARD", "LEAFNODE", "MQTT"],
    tags: ["svc"],
  }, { exp: EXP });

  t.user_scoped = await jwt.encodeUser("u-scoped", K.user_3, K.account_a, {
    pub: {}, sub: {},
  }, { signer: K.account_a_scoped, scopedUser: true });

  t.user_signing_key = await jwt.encodeUser("u-signed", K.user_1, K.account_a, {
    pub: { allow: ["x"] }, sub: {},
  }, { signer: K.account_a_signing });

  t.activation_stream = await jwt.encodeActivation(
    "act-stream", K.account_b, K.account_a, "stream", { subject: "private.*.data" },
  );
  t.activation_service_signed = await jwt.encodeActivation(
    "act-svc", K.account_b, K.account_a, "service", { subject: "svc.req" },
    { signer: K.account_a_signing, exp: EXP },
  );

  const creds = new TextDecoder().decode(jwt.fmtCreds(t.user_defaults, K.user_1));
  return { tokens: t, creds };
}

async function decodeAll(input) {
  const payloads = {};
  for (const [name, token] of Object.entries(input.tokens)) {
    try {
      payloads[name] = jwt.decode(token);
    } catch (e) {
      payloads[name] = { error: String(e && e.message ? e.message : e) };
    }
  }
  let creds = null;
  if (input.creds) {
    try {
      const c = await jwt.parseCreds(new TextEncoder().encode(input.creds));
      creds = { jwt: c.jwt, seed: c.key, account: c.aid, subject: c.uc.sub };
    } catch (e) {
      creds = { error: String(e && e.message ? e.message : e) };
    }
  }
  return { payloads, creds };
}

async function main() {
  const [cmd, arg] = process.argv.slice(2);
  let out;
  if (cmd === "encode") {
    out = await encodeAll(JSON.parse(fs.readFileSync(arg, "utf8")));
  } else if (cmd === "decode") {
    out = await decodeAll(JSON.parse(fs.readFileSync(0, "utf8")));
  } else if (cmd === "version") {
    out = { version: jwt.Version };
  } else {
    throw new Error(`unknown command ${cmd}`);
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
