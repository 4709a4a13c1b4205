//! The opt-in local cache of string values ([`ConnectOptions::local_cache`]): hot-key GETs
//! answered from the client's memory, with no network round trip, kept consistent by the
//! server's client tracking.
//!
//! How it stays consistent:
//!
//! - **Tracking over RESP3 pushes on the same connection** (not a REDIRECT connection): the
//!   connection speaks RESP3 and sends `CLIENT TRACKING ON` in its handshake; the server then
//!   remembers every key this connection reads and pushes `invalidate [keys]` (or a null on
//!   FLUSHALL / FLUSHDB) on this very socket when the key changes. The connection's reader
//!   thread applies each push as it reads it. One socket means one order: a push about a write
//!   that happened after our read always comes after that read's reply, and nothing is lost
//!   between two sockets.
//! - **Fills never resurrect a stale value**: each shard has a generation that every
//!   invalidation of one of its keys bumps. A GET notes its shard's generation before it is
//!   sent and fills the cache with the reply only if the generation has not moved, so an
//!   invalidation read between the request and the fill wins.
//! - **Own writes are visible at once**: before this connection sends a command that is not a
//!   known read, every one of its arguments is dropped from the cache as a possible key (and
//!   FLUSHALL / FLUSHDB empty it); the server's own invalidation follows anyway.
//! - **A broken connection forgets everything**: its invalidations may be lost, so the cache is
//!   emptied and no longer served; a reconnecting [`Client`](crate::Client) starts a new one.
//!
//! What it does not see: keys a script computes inside Lua (not among its arguments) written
//! through this same connection are invalidated by the server's push only, a moment later.
//! Memory: at most `max_keys` entries; a full shard drops an arbitrary entry.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use kvik_resp::Frame;
use parking_lot::Mutex;

const SHARDS: usize = 32;

/// The local cache of one connection.
#[derive(Debug)]
pub struct LocalCache {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    hasher: std::collections::hash_map::RandomState,
    /// Set when the connection broke: nothing is served any more.
    dead: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
    invalidations: AtomicU64,
}

#[derive(Debug, Default)]
struct Shard {
    /// Key -> value (`None`: the key did not exist).
    map: HashMap<Vec<u8>, Option<Vec<u8>>>,
    generation: u64,
}

/// Counters of a connection's local cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalCacheStats {
    /// GETs answered from the cache.
    pub hits: u64,
    /// GETs sent to the server.
    pub misses: u64,
    /// Keys dropped by server pushes (a flush counts once).
    pub invalidations: u64,
    /// Keys cached now.
    pub entries: usize,
}

/// A GET about to be sent: where to fill its reply.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FillToken {
    shard: usize,
    generation: u64,
}

impl LocalCache {
    pub(crate) fn new(max_keys: usize) -> LocalCache {
        LocalCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: max_keys.div_ceil(SHARDS).max(1),
            hasher: Default::default(),
            dead: AtomicBool::new(false),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
        }
    }

    fn shard_of(&self, key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        h.finish() as usize % SHARDS
    }

    /// The cached value of `key` (`Some(None)`: cached as absent), or the token to fill it with.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, FillToken> {
        let shard = self.shard_of(key);
        let s = self.shards[shard].lock();
        if !self.dead.load(Relaxed) {
            if let Some(v) = s.map.get(key) {
                self.hits.fetch_add(1, Relaxed);
                return Ok(v.clone());
            }
        }
        self.misses.fetch_add(1, Relaxed);
        Err(FillToken {
            shard,
            generation: s.generation,
        })
    }

    /// Caches a GET reply unless an invalidation of its shard came in since `token` was taken.
    pub(crate) fn fill(&self, token: FillToken, key: &[u8], reply: &Frame) {
        let value = match reply {
            Frame::Bulk(v) => Some(v.clone()),
            Frame::Null => None,
            _ => return,
        };
        let mut s = self.shards[token.shard].lock();
        if s.generation != token.generation || self.dead.load(Relaxed) {
            return;
        }
        if s.map.len() >= self.per_shard && !s.map.contains_key(key) {
            if let Some(victim) = s.map.keys().next().cloned() {
                s.map.remove(&victim);
            }
        }
        s.map.insert(key.to_vec(), value);
    }

    /// Drops `key` (a server push or a local write).
    pub(crate) fn invalidate(&self, key: &[u8]) {
        let mut s = self.shards[self.shard_of(key)].lock();
        s.generation += 1;
        s.map.remove(key);
    }

    /// Drops everything (FLUSHALL / FLUSHDB, or the connection broke).
    pub(crate) fn clear(&self) {
        for shard in &self.shards {
            let mut s = shard.lock();
            s.generation += 1;
            s.map.clear();
        }
    }

    /// The connection broke: empty, and never serve again.
    pub(crate) fn kill(&self) {
        self.dead.store(true, Relaxed);
        self.clear();
    }

    /// Applies a RESP3 push if it is a tracking invalidation; returns whether it was one.
    pub(crate) fn apply_push(&self, push: &[Frame]) -> bool {
        if push.first() != Some(&Frame::Bulk(b"invalidate".to_vec())) {
            return false;
        }
        match push.get(1) {
            Some(Frame::Array(keys)) => {
                for k in keys {
                    if let Frame::Bulk(k) = k {
                        self.invalidate(k);
                        self.invalidations.fetch_add(1, Relaxed);
                    }
                }
            }
            _ => {
                self.clear();
                self.invalidations.fetch_add(1, Relaxed);
            }
        }
        true
    }

    /// The counters and the number of keys cached.
    pub fn stats(&self) -> LocalCacheStats {
        LocalCacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            invalidations: self.invalidations.load(Relaxed),
            entries: self.shards.iter().map(|s| s.lock().map.len()).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalidation_between_request_and_fill_wins() {
        let c = LocalCache::new(100);
        let token = c.get(b"k").unwrap_err();
        c.apply_push(&[
            Frame::Bulk(b"invalidate".to_vec()),
            Frame::Array(vec![Frame::Bulk(b"k".to_vec())]),
        ]);
        c.fill(token, b"k", &Frame::Bulk(b"old".to_vec()));
        assert!(c.get(b"k").is_err(), "the stale reply was not cached");
        let token = c.get(b"k").unwrap_err();
        c.fill(token, b"k", &Frame::Bulk(b"new".to_vec()));
        assert_eq!(c.get(b"k").unwrap(), Some(b"new".to_vec()));
        c.apply_push(&[Frame::Bulk(b"invalidate".to_vec()), Frame::Null]);
        assert!(c.get(b"k").is_err());
        let token = c.get(b"gone").unwrap_err();
        c.fill(token, b"gone", &Frame::Null);
        assert_eq!(c.get(b"gone").unwrap(), None);
        c.kill();
        assert!(c.get(b"gone").is_err());
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn bounded_by_max_keys() {
        let c = LocalCache::new(64);
        for i in 0..10_000u32 {
            let k = i.to_be_bytes();
            let t = c.get(&k).unwrap_err();
            c.fill(t, &k, &Frame::Bulk(vec![1]));
        }
        assert!(c.stats().entries <= 64);
    }
}
