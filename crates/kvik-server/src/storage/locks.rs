//! Striped key locks: a write holds the stripe of every key it touches from its metadata read to
//! its WriteBatch commit (and, later, its cache update), so read-modify-write commands on one key
//! never interleave. Reads take no lock: RocksDB gives them a consistent view of each key.
//!
//! Multi-key writes lock their stripes in ascending index order, once each, so two writers can
//! never wait on each other in a cycle.

use parking_lot::{Mutex, MutexGuard};
use std::hash::{BuildHasher, Hasher};

/// Number of stripes; a power of two well above the number of worker threads.
const STRIPES: usize = 4096;

pub struct KeyLocks {
    stripes: Box<[Mutex<()>]>,
    hasher: std::collections::hash_map::RandomState,
}

/// Held stripes; dropping it releases them.
pub struct KeyGuard<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: Default::default(),
        }
    }
}

impl KeyLocks {
    fn stripe(&self, db: u16, key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write_u16(db);
        h.write(key);
        (h.finish() as usize) & (STRIPES - 1)
    }

    /// Locks the stripes of `keys` in database `db`.
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, db: u16, keys: &[K]) -> KeyGuard<'a> {
        self.lock_in(keys.iter().map(|k| (db, k.as_ref())))
    }

    /// Locks the stripes of keys that may live in different databases (MOVE, COPY ... DB).
    pub fn lock_in<'a, 'k>(&'a self, keys: impl Iterator<Item = (u16, &'k [u8])>) -> KeyGuard<'a> {
        let mut idx: Vec<usize> = keys.map(|(db, k)| self.stripe(db, k)).collect();
        idx.sort_unstable();
        idx.dedup();
        KeyGuard {
            _guards: idx.into_iter().map(|i| self.stripes[i].lock()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_and_colliding_keys_do_not_deadlock() {
        let locks = KeyLocks::default();
        // 10,000 keys over 4,096 stripes: many share a stripe, which must be taken once.
        let keys: Vec<Vec<u8>> = (0..10_000).map(|i| format!("k{i}").into_bytes()).collect();
        drop(locks.lock(0, &keys));
        drop(locks.lock(1, &[b"k1", b"k1"]));
        // Everything was released: the same keys can be taken again.
        drop(locks.lock(0, &keys));
    }

    #[test]
    fn a_held_key_blocks_another_writer() {
        let locks = std::sync::Arc::new(KeyLocks::default());
        let g = locks.lock(0, &[b"a"]);
        let l2 = locks.clone();
        let t = std::thread::spawn(move || {
            let _g = l2.lock(0, &[b"a"]);
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!t.is_finished());
        drop(g);
        t.join().unwrap();
    }
}
