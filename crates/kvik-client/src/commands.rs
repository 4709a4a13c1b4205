//! [`Commands`]: typed helpers for strings, hashes and keys, over any client type's generic
//! `query`.

use std::time::Duration;

use kvik_resp::Frame;

use crate::cmd::{cmd, Cmd, ToArg};
use crate::error::{Error, Result};

/// Typed helpers. Every client type implements [`Commands::query`]; the rest are provided.
/// Error replies arrive as [`Error::Server`] with the server's text.
pub trait Commands {
    /// Runs one command and returns its reply.
    fn query(&self, c: &Cmd) -> Result<Frame>;

    // ---- strings ----

    /// `GET key`: the value, or `None` when the key does not exist.
    fn get<K: ToArg>(&self, key: K) -> Result<Option<Vec<u8>>> {
        opt_bytes(self.query(&cmd("GET").arg(key))?)
    }

    /// `SET key value`.
    fn set<K: ToArg, V: ToArg>(&self, key: K, value: V) -> Result<()> {
        ok(self.query(&cmd("SET").arg(key).arg(value))?)
    }

    /// `SET key value PX ms`.
    fn set_ex<K: ToArg, V: ToArg>(&self, key: K, value: V, ttl: Duration) -> Result<()> {
        let ms = ttl.as_millis().max(1) as u64;
        ok(self.query(&cmd("SET").arg(key).arg(value).arg("PX").arg(ms))?)
    }

    /// `SET key value NX`: true when the key was set.
    fn set_nx<K: ToArg, V: ToArg>(&self, key: K, value: V) -> Result<bool> {
        Ok(!matches!(
            self.query(&cmd("SET").arg(key).arg(value).arg("NX"))?,
            Frame::Null
        ))
    }

    /// `GETDEL key`.
    fn get_del<K: ToArg>(&self, key: K) -> Result<Option<Vec<u8>>> {
        opt_bytes(self.query(&cmd("GETDEL").arg(key))?)
    }

    /// `MGET key...`: one entry per key.
    fn mget<K: ToArg>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut c = cmd("MGET");
        keys.iter().for_each(|k| c.push_arg(k));
        match self.query(&c)? {
            Frame::Array(items) => items.into_iter().map(opt_bytes).collect(),
            other => Err(unexpected("MGET", &other)),
        }
    }

    /// `MSET key value ...`.
    fn mset<K: ToArg, V: ToArg>(&self, pairs: &[(K, V)]) -> Result<()> {
        let mut c = cmd("MSET");
        for (k, v) in pairs {
            c.push_arg(k);
            c.push_arg(v);
        }
        ok(self.query(&c)?)
    }

    /// `INCRBY key delta`: the new value.
    fn incr_by<K: ToArg>(&self, key: K, delta: i64) -> Result<i64> {
        int(self.query(&cmd("INCRBY").arg(key).arg(delta))?)
    }

    /// `APPEND key value`: the new length.
    fn append<K: ToArg, V: ToArg>(&self, key: K, value: V) -> Result<i64> {
        int(self.query(&cmd("APPEND").arg(key).arg(value))?)
    }

    /// `STRLEN key`.
    fn strlen<K: ToArg>(&self, key: K) -> Result<i64> {
        int(self.query(&cmd("STRLEN").arg(key))?)
    }

    // ---- keys ----

    /// `DEL key...`: how many existed.
    fn del<K: ToArg>(&self, keys: &[K]) -> Result<i64> {
        let mut c = cmd("DEL");
        keys.iter().for_each(|k| c.push_arg(k));
        int(self.query(&c)?)
    }

    /// `EXISTS key...`: how many exist.
    fn exists<K: ToArg>(&self, keys: &[K]) -> Result<i64> {
        let mut c = cmd("EXISTS");
        keys.iter().for_each(|k| c.push_arg(k));
        int(self.query(&c)?)
    }

    /// `PEXPIRE key ms`: true when a timeout was set.
    fn expire<K: ToArg>(&self, key: K, ttl: Duration) -> Result<bool> {
        Ok(int(self.query(&cmd("PEXPIRE").arg(key).arg(ttl.as_millis() as u64))?)? == 1)
    }

    /// `PERSIST key`.
    fn persist<K: ToArg>(&self, key: K) -> Result<bool> {
        Ok(int(self.query(&cmd("PERSIST").arg(key))?)? == 1)
    }

    /// `PTTL key`: `None` when the key does not exist, `Some(None)` without a timeout.
    fn ttl<K: ToArg>(&self, key: K) -> Result<Option<Option<Duration>>> {
        Ok(match int(self.query(&cmd("PTTL").arg(key))?)? {
            -2 => None,
            -1 => Some(None),
            ms => Some(Some(Duration::from_millis(ms.max(0) as u64))),
        })
    }

    /// `TYPE key`: "string", "hash", "none"...
    fn key_type<K: ToArg>(&self, key: K) -> Result<String> {
        match self.query(&cmd("TYPE").arg(key))? {
            Frame::Simple(s) => Ok(s),
            other => Err(unexpected("TYPE", &other)),
        }
    }

    /// `RENAME key newkey`.
    fn rename<K: ToArg, N: ToArg>(&self, key: K, new_key: N) -> Result<()> {
        ok(self.query(&cmd("RENAME").arg(key).arg(new_key))?)
    }

    /// `SCAN cursor MATCH pattern COUNT n`: the next cursor and a page of keys.
    fn scan(
        &self,
        cursor: u64,
        pattern: Option<&str>,
        count: usize,
    ) -> Result<(u64, Vec<Vec<u8>>)> {
        let mut c = cmd("SCAN").arg(cursor);
        if let Some(p) = pattern {
            c = c.arg("MATCH").arg(p);
        }
        c = c.arg("COUNT").arg(count);
        match self.query(&c)? {
            Frame::Array(mut items) if items.len() == 2 => {
                let keys = match items.pop() {
                    Some(Frame::Array(k)) => k
                        .into_iter()
                        .map(|f| opt_bytes(f).map(Option::unwrap_or_default))
                        .collect::<Result<Vec<_>>>()?,
                    Some(other) => return Err(unexpected("SCAN", &other)),
                    None => Vec::new(),
                };
                let cur = match items.pop() {
                    Some(Frame::Bulk(b)) => kvik_resp::parse_i64(&b).unwrap_or(0) as u64,
                    Some(other) => return Err(unexpected("SCAN", &other)),
                    None => 0,
                };
                Ok((cur, keys))
            }
            other => Err(unexpected("SCAN", &other)),
        }
    }

    /// `PING`.
    fn ping(&self) -> Result<()> {
        match self.query(&cmd("PING"))? {
            Frame::Simple(_) | Frame::Bulk(_) => Ok(()),
            other => Err(unexpected("PING", &other)),
        }
    }

    // ---- hashes ----

    /// `HSET key field value ...`: how many fields were added.
    fn hset<K: ToArg, F: ToArg, V: ToArg>(&self, key: K, pairs: &[(F, V)]) -> Result<i64> {
        let mut c = cmd("HSET").arg(key);
        for (f, v) in pairs {
            c.push_arg(f);
            c.push_arg(v);
        }
        int(self.query(&c)?)
    }

    /// `HGET key field`.
    fn hget<K: ToArg, F: ToArg>(&self, key: K, field: F) -> Result<Option<Vec<u8>>> {
        opt_bytes(self.query(&cmd("HGET").arg(key).arg(field))?)
    }

    /// `HMGET key field...`.
    fn hmget<K: ToArg, F: ToArg>(&self, key: K, fields: &[F]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut c = cmd("HMGET").arg(key);
        fields.iter().for_each(|f| c.push_arg(f));
        match self.query(&c)? {
            Frame::Array(items) => items.into_iter().map(opt_bytes).collect(),
            other => Err(unexpected("HMGET", &other)),
        }
    }

    /// `HGETALL key`: field/value pairs (RESP2 flat array or RESP3 map).
    fn hgetall<K: ToArg>(&self, key: K) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        pairs(self.query(&cmd("HGETALL").arg(key))?)
    }

    /// `HDEL key field...`: how many were removed.
    fn hdel<K: ToArg, F: ToArg>(&self, key: K, fields: &[F]) -> Result<i64> {
        let mut c = cmd("HDEL").arg(key);
        fields.iter().for_each(|f| c.push_arg(f));
        int(self.query(&c)?)
    }

    /// `HEXISTS key field`.
    fn hexists<K: ToArg, F: ToArg>(&self, key: K, field: F) -> Result<bool> {
        Ok(int(self.query(&cmd("HEXISTS").arg(key).arg(field))?)? == 1)
    }

    /// `HLEN key`.
    fn hlen<K: ToArg>(&self, key: K) -> Result<i64> {
        int(self.query(&cmd("HLEN").arg(key))?)
    }

    /// `HINCRBY key field delta`.
    fn hincr_by<K: ToArg, F: ToArg>(&self, key: K, field: F, delta: i64) -> Result<i64> {
        int(self.query(&cmd("HINCRBY").arg(key).arg(field).arg(delta))?)
    }
}

pub(crate) fn unexpected(what: &str, f: &Frame) -> Error {
    Error::UnexpectedReply(format!("{what} replied {f:?}"))
}

/// A bulk string or null.
pub(crate) fn opt_bytes(f: Frame) -> Result<Option<Vec<u8>>> {
    match f {
        Frame::Bulk(b) => Ok(Some(b)),
        Frame::Null => Ok(None),
        Frame::Simple(s) => Ok(Some(s.into_bytes())),
        Frame::Verbatim { text, .. } => Ok(Some(text)),
        other => Err(unexpected("command", &other)),
    }
}

fn ok(f: Frame) -> Result<()> {
    match f {
        Frame::Simple(_) => Ok(()),
        other => Err(unexpected("command", &other)),
    }
}

fn int(f: Frame) -> Result<i64> {
    match f {
        Frame::Integer(n) => Ok(n),
        other => Err(unexpected("command", &other)),
    }
}

fn pairs(f: Frame) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let bytes = |f: Frame| opt_bytes(f).map(Option::unwrap_or_default);
    match f {
        Frame::Map(kv) => kv
            .into_iter()
            .map(|(k, v)| Ok((bytes(k)?, bytes(v)?)))
            .collect(),
        Frame::Array(items) => {
            let mut out = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((bytes(k)?, bytes(v)?));
            }
            Ok(out)
        }
        other => Err(unexpected("HGETALL", &other)),
    }
}
