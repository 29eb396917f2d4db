//! The `$JS.API` requests the JetStream controller sends, carrying the config JSON the mapping
//! modules build and returning the server's answer as JSON, so what is compared is exactly what
//! nats-server reports. Requests go over the connection's account (the credentials decide it).

use serde_json::{Map, Value, json};

/// JetStream's "stream not found" error code.
pub const STREAM_NOT_FOUND: i64 = 10059;
/// JetStream's "consumer not found" error code.
pub const CONSUMER_NOT_FOUND: i64 = 10014;

/// A `$JS.API` request that failed.
#[derive(Debug, thiserror::Error)]
pub enum JsApiError {
    /// No answer (timeout, no responders, connection gone).
    #[error("{subject}: {source}")]
    Request {
        /// The request's subject.
        subject: String,
        /// What the client reported.
        #[source]
        source: async_nats::RequestError,
    },
    /// An answer that is not JSON.
    #[error("{subject}: the answer is not JSON: {reason}")]
    BadReply {
        /// The request's subject.
        subject: String,
        /// Why it did not parse.
        reason: String,
    },
    /// nats-server refused the request (reason Rejected when it refuses a config).
    #[error("{subject}: nats-server refused ({code}/{err_code}): {description}")]
    Refused {
        /// The request's subject.
        subject: String,
        /// The HTTP-like code.
        code: i64,
        /// JetStream's error code.
        err_code: i64,
        /// The server's description.
        description: String,
    },
}

impl JsApiError {
    /// JetStream's error code, when the server refused.
    pub fn err_code(&self) -> Option<i64> {
        match self {
            JsApiError::Refused { err_code, .. } => Some(*err_code),
            _ => None,
        }
    }
}

/// Sends one request and returns the answer, or the server's refusal as an error.
pub async fn request(
    client: &async_nats::Client,
    subject: String,
    body: &Value,
) -> Result<Value, JsApiError> {
    let payload = serde_json::to_vec(body).map_err(|e| JsApiError::BadReply {
        subject: subject.clone(),
        reason: format!("the request body does not serialize: {e}"),
    })?;
    let reply = client
        .request(subject.clone(), payload.into())
        .await
        .map_err(|source| JsApiError::Request {
            subject: subject.clone(),
            source,
        })?;
    let answer: Value =
        serde_json::from_slice(&reply.payload).map_err(|e| JsApiError::BadReply {
            subject: subject.clone(),
            reason: e.to_string(),
        })?;
    match answer.get("error") {
        Some(err) if !err.is_null() => Err(JsApiError::Refused {
            subject,
            code: err.get("code").and_then(Value::as_i64).unwrap_or_default(),
            err_code: err
                .get("err_code")
                .and_then(Value::as_i64)
                .unwrap_or_default(),
            description: err
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }),
        _ => Ok(answer),
    }
}

fn absent_when(code: i64, r: Result<Value, JsApiError>) -> Result<Option<Value>, JsApiError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.err_code() == Some(code) => Ok(None),
        Err(e) => Err(e),
    }
}

fn name_of(config: &Map<String, Value>) -> &str {
    config
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A stream's STREAM.INFO answer (config, state, cluster), `None` when it does not exist.
pub async fn stream_info(
    client: &async_nats::Client,
    name: &str,
) -> Result<Option<Value>, JsApiError> {
    let r = request(client, format!("$JS.API.STREAM.INFO.{name}"), &json!({})).await;
    absent_when(STREAM_NOT_FOUND, r)
}

/// Creates a stream (or bucket stream) from a mapped config; returns the STREAM.CREATE answer.
pub async fn create_stream(
    client: &async_nats::Client,
    config: &Map<String, Value>,
) -> Result<Value, JsApiError> {
    let subject = format!("$JS.API.STREAM.CREATE.{}", name_of(config));
    request(client, subject, &Value::Object(config.clone())).await
}

/// Updates a stream with a mapped config (reapplying spec); returns the STREAM.UPDATE answer.
pub async fn update_stream(
    client: &async_nats::Client,
    config: &Map<String, Value>,
) -> Result<Value, JsApiError> {
    let subject = format!("$JS.API.STREAM.UPDATE.{}", name_of(config));
    request(client, subject, &Value::Object(config.clone())).await
}

/// Deletes a stream; `false` when it did not exist.
pub async fn delete_stream(client: &async_nats::Client, name: &str) -> Result<bool, JsApiError> {
    let r = request(client, format!("$JS.API.STREAM.DELETE.{name}"), &json!({})).await;
    absent_when(STREAM_NOT_FOUND, r).map(|v| v.is_some())
}

/// The CONSUMER.INFO of every consumer of a stream (CONSUMER.LIST, paged).
pub async fn consumer_list(
    client: &async_nats::Client,
    stream: &str,
) -> Result<Vec<Value>, JsApiError> {
    consumer_infos(client, stream).await.map(|(all, _)| all)
}

/// The CONSUMER.INFO of every consumer of a stream (CONSUMER.LIST, paged), with the names of
/// the consumers whose leader did not answer in time (`missing`).
pub async fn consumer_infos(
    client: &async_nats::Client,
    stream: &str,
) -> Result<(Vec<Value>, Vec<String>), JsApiError> {
    paged(
        client,
        format!("$JS.API.CONSUMER.LIST.{stream}"),
        "consumers",
    )
    .await
}

/// A paged `*.LIST` request: every item of `field` of every page, and every name the pages
/// report `missing`; the offset counts both.
async fn paged(
    client: &async_nats::Client,
    subject: String,
    field: &str,
) -> Result<(Vec<Value>, Vec<String>), JsApiError> {
    let (mut all, mut missing) = (Vec::new(), Vec::new());
    loop {
        let offset = all.len() + missing.len();
        let page = request(client, subject.clone(), &json!({"offset": offset})).await?;
        let got: Vec<Value> = page
            .get(field)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        missing.extend(
            page.get("missing")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from),
        );
        let total = page.get("total").and_then(Value::as_u64).unwrap_or(0);
        let empty = got.is_empty();
        all.extend(got);
        if empty || (all.len() + missing.len()) as u64 >= total {
            return Ok((all, missing));
        }
    }
}

/// A consumer's CONSUMER.INFO answer, `None` when it (or its stream) does not exist.
pub async fn consumer_info(
    client: &async_nats::Client,
    stream: &str,
    name: &str,
) -> Result<Option<Value>, JsApiError> {
    let r = request(
        client,
        format!("$JS.API.CONSUMER.INFO.{stream}.{name}"),
        &json!({}),
    )
    .await;
    match absent_when(CONSUMER_NOT_FOUND, r) {
        Err(e) if e.err_code() == Some(STREAM_NOT_FOUND) => Ok(None),
        other => other,
    }
}

/// Creates (`update` false) or updates a durable consumer from a mapped config; the server
/// refuses a create of an existing consumer and an update of a missing one.
pub async fn put_consumer(
    client: &async_nats::Client,
    stream: &str,
    config: &Map<String, Value>,
    update: bool,
) -> Result<Value, JsApiError> {
    let subject = format!("$JS.API.CONSUMER.CREATE.{stream}.{}", name_of(config));
    let body = crate::consumer_config::create_request(stream, config, update);
    request(client, subject, &body).await
}

/// Deletes a consumer; `false` when it did not exist.
pub async fn delete_consumer(
    client: &async_nats::Client,
    stream: &str,
    name: &str,
) -> Result<bool, JsApiError> {
    let r = request(
        client,
        format!("$JS.API.CONSUMER.DELETE.{stream}.{name}"),
        &json!({}),
    )
    .await;
    match absent_when(CONSUMER_NOT_FOUND, r) {
        Err(e) if e.err_code() == Some(STREAM_NOT_FOUND) => Ok(false),
        other => other.map(|v| v.is_some()),
    }
}

/// The STREAM.INFO of every stream of the account (STREAM.LIST, paged), with the names of the
/// streams whose leader did not answer in time (`missing`).
pub async fn stream_list(
    client: &async_nats::Client,
) -> Result<(Vec<Value>, Vec<String>), JsApiError> {
    paged(client, "$JS.API.STREAM.LIST".to_string(), "streams").await
}

/// `$JS.API.STREAM.PEER.REMOVE.<stream>`: the copy on `peer` removed; the meta leader places a
/// new one within the stream's NATS cluster and placement (an account's placement move).
pub async fn stream_peer_remove(
    client: &async_nats::Client,
    stream: &str,
    peer: &str,
) -> Result<(), JsApiError> {
    let subject = format!("$JS.API.STREAM.PEER.REMOVE.{stream}");
    request(client, subject, &json!({"peer": peer}))
        .await
        .map(|_| ())
}

/// The account the connection's user is in, as `$SYS.REQ.USER.INFO` (answered for every user)
/// names it; `None` when the answer names none.
pub async fn user_account(client: &async_nats::Client) -> Result<Option<String>, JsApiError> {
    let answer = request(client, "$SYS.REQ.USER.INFO".to_string(), &json!({})).await?;
    Ok(answer
        .pointer("/data/account")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .map(String::from))
}
