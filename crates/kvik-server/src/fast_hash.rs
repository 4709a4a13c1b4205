//! A fast, seeded hash for keys: what the hot cache's shards and index, its admission sketch and
//! the key lock stripes hash with.
//!
//! Multiply-xorshift over 8-byte words, a few nanoseconds for a typical key where SipHash (the
//! standard library's default) takes several times that; it is called several times per
//! request. The seed is drawn at start-up, so which keys collide is not predictable from
//! outside; a collision only shares a shard or a lock stripe, never degrades a lookup.

use std::hash::{BuildHasher, Hasher};

/// The hash of `key` in database `db` under `seed`.
pub fn key_hash(seed: u64, db: u16, key: &[u8]) -> u64 {
    let mut h = FastHasher(seed ^ db as u64);
    h.write(key);
    h.finish()
}

/// [`FastHasher`] under the process's seed (drawn once): the `BuildHasher` of the maps on the
/// request path (a transaction's key states, the command table).
#[derive(Clone, Copy, Default)]
pub struct FastHash;

impl BuildHasher for FastHash {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(process_seed())
    }
}

/// A random seed, the same for the whole process.
pub fn process_seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(rand::random::<u64>)
}

pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut h = self.0 ^ (bytes.len() as u64).wrapping_mul(K);
        let mut chunks = bytes.chunks_exact(8);
        for c in chunks.by_ref() {
            let w = u64::from_le_bytes(c.try_into().unwrap());
            h = (h ^ w).wrapping_mul(K).rotate_left(29);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            h = (h ^ u64::from_le_bytes(buf))
                .wrapping_mul(K)
                .rotate_left(29);
        }
        self.0 = h;
    }
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^= h >> 33;
        h
    }
}
