//! Shared helpers of the differential tests: one redis-server per test binary, replies as text,
//! a seeded RNG (KVIK_TYPES_SEED picks the seed; the seed is printed so a failure can be replayed).

#![allow(dead_code)]

use rand::rngs::StdRng;
use rand::SeedableRng;
use redis::Value;

pub use kvik_testkit::{Endpoint, RedisServer};

/// A seeded RNG; the seed comes from KVIK_TYPES_SEED or the clock, and is printed.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("KVIK_TYPES_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: KVIK_TYPES_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

/// Runs a command and renders the reply as text: errors as "CODE detail", bulk strings
/// lossily as UTF-8, integers as decimal, nil as "(nil)", arrays bracketed.
pub fn run(con: &mut redis::Connection, args: &[&[u8]]) -> String {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(con) {
        Ok(v) => render(&v),
        Err(e) => error_text(&e),
    }
}

/// "CODE detail" of an error reply, as Redis sent it.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => format!("{e}"),
    }
}

pub fn render(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Int(i) => i.to_string(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", parts.join(", "))
        }
        other => format!("{other:?}"),
    }
}

/// GET as raw bytes.
pub fn get_bytes(con: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}
