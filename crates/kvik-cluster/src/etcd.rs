//! A small etcd v3 client over etcd's JSON gRPC gateway (`/v3/kv/range`, `/v3/kv/txn`,
//! `/v3/lease/grant|keepalive|revoke`), the part of the API the controller uses.
//!
//! The gateway speaks the gRPC messages as JSON: keys and values are base64, 64-bit integers
//! come back as strings and fields equal to zero are left out, so every reader below treats a
//! missing integer as 0. Every call is one blocking request with a timeout: an unreachable
//! etcd is an `Err`, never a hang. Several endpoints (members of one etcd cluster) may be given:
//! a call that cannot reach one tries the next, so losing a minority of etcd's members loses
//! nothing.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The endpoints of one etcd cluster (`host:port` of client URLs).
#[derive(Debug)]
pub struct Etcd {
    addrs: Vec<String>,
    /// The endpoint that answered last (tried first).
    current: AtomicUsize,
    timeout: Duration,
}

impl Clone for Etcd {
    fn clone(&self) -> Etcd {
        Etcd {
            addrs: self.addrs.clone(),
            current: AtomicUsize::new(self.current.load(Ordering::Relaxed)),
            timeout: self.timeout,
        }
    }
}

/// One key as etcd holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kv {
    pub value: Vec<u8>,
    /// The revision of the key's last change: what a compare-and-swap compares.
    pub mod_revision: i64,
    /// The revision that created the key (it changes when the key is deleted and made again).
    pub create_revision: i64,
    /// The lease the key is attached to (0: none).
    pub lease: i64,
}

/// A condition of a transaction.
#[derive(Clone, Debug)]
pub enum Compare {
    /// The key's last change was at this revision (0: the key does not exist).
    ModRevision(String, i64),
    /// The key was created at this revision (0: the key does not exist).
    CreateRevision(String, i64),
}

/// An operation of a transaction.
#[derive(Clone, Debug)]
pub enum Op {
    /// Put the key, attached to `lease` when it is not 0 (deleted when the lease ends).
    Put {
        key: String,
        value: Vec<u8>,
        lease: i64,
    },
    /// Read the key.
    Get(String),
}

/// What a transaction did.
#[derive(Debug)]
pub struct TxnResult {
    /// Every compare held and the `success` ops ran (else the `failure` ops ran).
    pub succeeded: bool,
    /// The store's revision after the transaction.
    pub revision: i64,
    /// The keys read by the `Get` ops that ran, in order (None: absent).
    pub reads: Vec<Option<Kv>>,
}

/// An integer field as the gateway writes it: a string, a number, or absent (0).
fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

fn kv_of(v: &Value) -> Result<Kv, String> {
    let value = match v.get("value").and_then(Value::as_str) {
        Some(text) => B64
            .decode(text)
            .map_err(|e| format!("etcd sent a value that is not base64: {e}"))?,
        None => Vec::new(),
    };
    Ok(Kv {
        value,
        mod_revision: int(&v["mod_revision"]),
        create_revision: int(&v["create_revision"]),
        lease: int(&v["lease"]),
    })
}

/// The first key of a range response (None when it found nothing).
fn first_kv(range: &Value) -> Result<Option<Kv>, String> {
    match range
        .get("kvs")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        Some(kv) => kv_of(kv).map(Some),
        None => Ok(None),
    }
}

impl Compare {
    fn to_json(&self) -> Value {
        match self {
            Compare::ModRevision(key, rev) => json!({
                "key": b64(key.as_bytes()), "target": "MOD", "result": "EQUAL",
                "mod_revision": rev.to_string(),
            }),
            Compare::CreateRevision(key, rev) => json!({
                "key": b64(key.as_bytes()), "target": "CREATE", "result": "EQUAL",
                "create_revision": rev.to_string(),
            }),
        }
    }
}

impl Op {
    fn to_json(&self) -> Value {
        match self {
            Op::Put { key, value, lease } => json!({"request_put": {
                "key": b64(key.as_bytes()), "value": b64(value), "lease": lease.to_string(),
            }}),
            Op::Get(key) => json!({"request_range": {"key": b64(key.as_bytes())}}),
        }
    }
}

impl Etcd {
    /// `addrs` is `host:port` of etcd's client URLs (plain HTTP), comma-separated.
    pub fn new(addrs: &str, timeout: Duration) -> Etcd {
        Etcd {
            addrs: addrs
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect(),
            current: AtomicUsize::new(0),
            timeout,
        }
    }

    /// The endpoints, comma-separated.
    pub fn addr(&self) -> String {
        self.addrs.join(",")
    }

    /// One gateway call, on the first endpoint that can be reached; an HTTP error status
    /// becomes an `Err` with etcd's message.
    fn call(&self, path: &str, body: &Value) -> Result<Value, String> {
        let body = body.to_string();
        let n = self.addrs.len().max(1);
        let first = self.current.load(Ordering::Relaxed);
        let mut unreachable = Vec::new();
        for k in 0..n {
            let i = (first + k) % n;
            let Some(addr) = self.addrs.get(i) else {
                break;
            };
            match crate::http::post_json(addr, path, &body, self.timeout) {
                Ok((status, text)) => {
                    self.current.store(i, Ordering::Relaxed);
                    return Self::reply(addr, path, status, &text);
                }
                Err(e) => unreachable.push(e),
            }
        }
        Err(format!("etcd unreachable: {}", unreachable.join("; ")))
    }

    fn reply(addr: &str, path: &str, status: u16, text: &str) -> Result<Value, String> {
        let reply: Value = serde_json::from_str(text)
            .map_err(|e| format!("etcd {addr}: {path} sent bad JSON ({e}): {text}"))?;
        if status != 200 {
            let msg = reply
                .get("message")
                .or_else(|| reply.get("error"))
                .and_then(Value::as_str)
                .unwrap_or(text);
            return Err(format!("etcd {addr}: {path} failed (HTTP {status}): {msg}"));
        }
        Ok(reply)
    }

    /// Reads one key.
    pub fn get(&self, key: &str) -> Result<Option<Kv>, String> {
        let reply = self.call("/v3/kv/range", &json!({"key": b64(key.as_bytes())}))?;
        first_kv(&reply)
    }

    /// Runs `if compares then success else failure` atomically.
    pub fn txn(
        &self,
        compares: &[Compare],
        success: &[Op],
        failure: &[Op],
    ) -> Result<TxnResult, String> {
        let body = json!({
            "compare": compares.iter().map(Compare::to_json).collect::<Vec<_>>(),
            "success": success.iter().map(Op::to_json).collect::<Vec<_>>(),
            "failure": failure.iter().map(Op::to_json).collect::<Vec<_>>(),
        });
        let reply = self.call("/v3/kv/txn", &body)?;
        let mut reads = Vec::new();
        for r in reply
            .get("responses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(range) = r.get("response_range") {
                reads.push(first_kv(range)?);
            }
        }
        Ok(TxnResult {
            succeeded: reply.get("succeeded").and_then(Value::as_bool) == Some(true),
            revision: int(&reply["header"]["revision"]),
            reads,
        })
    }

    /// Grants a lease of `ttl` seconds; returns its id.
    pub fn lease_grant(&self, ttl: Duration) -> Result<i64, String> {
        let reply = self.call(
            "/v3/lease/grant",
            &json!({"TTL": ttl.as_secs().max(1).to_string()}),
        )?;
        match int(&reply["ID"]) {
            0 => Err(format!("etcd: lease grant gave no id: {reply}")),
            id => Ok(id),
        }
    }

    /// Renews lease `id` once; returns the TTL it has again, 0 when the lease is gone.
    pub fn lease_keepalive(&self, id: i64) -> Result<i64, String> {
        let reply = self.call("/v3/lease/keepalive", &json!({"ID": id.to_string()}))?;
        Ok(int(&reply["result"]["TTL"]))
    }

    /// Ends lease `id` now (its keys are deleted).
    pub fn lease_revoke(&self, id: i64) -> Result<(), String> {
        self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}))
            .map(|_| ())
    }
}
