//! WATCH: optimistic locking for MULTI/EXEC.
//!
//! [`WatchRegistry`] is a [`WriteObserver`]: it maps each watched (db, key) to the clients
//! watching it, and every committed put or delete of that key's meta record marks them dirty (the
//! observer runs while the writer still holds the key's stripe lock, so a write is either seen
//! by an EXEC that holds the same stripe or finished before it). With nothing watched, a commit
//! costs the observer one atomic load.
//!
//! A client's side is [`Watches`], kept in its session: the keys it watches and its dirty flag.
//! UNWATCH, EXEC, DISCARD, RESET and disconnecting drop it, which unregisters the keys.
//!
//! Expiry follows Redis 7.0 (`isWatchedKeyExpired` and the `expired` flag of a watched key): a
//! key that was live when watched and has expired by EXEC time aborts the EXEC, even if nothing
//! deleted it yet; a key that was already expired when watched does not, and its deletion (lazy
//! or active expiry, DEL) is no change either. FLUSHDB/FLUSHALL mark only the watchers of keys
//! that existed (`touchAllWatchedKeysInDb`): as every write since WATCH already marked its
//! watchers, "existed at flush" is "was live when watched" for a client still clean.
//! SWAPDB touches the watchers of both databases as Redis's `touchAllWatchedKeysInDb` does
//! ([`WatchRegistry::dbs_swapped`]). Databases here are logical (what SELECT chose); storage is
//! asked through `Storage::dbs`.

use crate::fast_hash::FastHash;
use crate::storage::encoding::Kind;
use crate::storage::{Storage, StorageResult, WriteObserver};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// One client's watch of one key.
#[derive(Debug)]
struct WatchedKey {
    /// The client's dirty flag (shared by all its watched keys).
    dirty: Arc<AtomicBool>,
    /// The key was already expired (but still stored) when watched; cleared when it is deleted.
    expired: AtomicBool,
    /// The key was live when watched.
    existed: bool,
}

type DbWatches = HashMap<Vec<u8>, Vec<Arc<WatchedKey>>>;

/// Every watched key of the server, and who watches it.
#[derive(Default)]
pub struct WatchRegistry {
    /// Number of (client, key) watches; the observer's fast path when it is zero.
    count: AtomicUsize,
    map: Mutex<HashMap<u16, DbWatches>>,
}

impl std::fmt::Debug for WatchRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WatchRegistry({})", self.count.load(Ordering::Relaxed))
    }
}

impl WatchRegistry {
    /// Number of (client, key) watches.
    pub fn watched(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    fn add(&self, db: u16, key: &[u8], w: Arc<WatchedKey>) {
        let mut map = self.map.lock();
        map.entry(db)
            .or_default()
            .entry(key.to_vec())
            .or_default()
            .push(w);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn remove(&self, keys: &[(u16, Bytes, Arc<WatchedKey>)]) {
        let mut map = self.map.lock();
        for (db, key, w) in keys {
            let Some(dbw) = map.get_mut(db) else { continue };
            let Some(list) = dbw.get_mut(&key[..]) else {
                continue;
            };
            let before = list.len();
            list.retain(|x| !Arc::ptr_eq(x, w));
            self.count.fetch_sub(before - list.len(), Ordering::Relaxed);
            if list.is_empty() {
                dbw.remove(&key[..]);
                if dbw.is_empty() {
                    map.remove(db);
                }
            }
        }
    }
}

/// What SWAPDB found of one watched key (see [`WatchRegistry::dbs_swapped`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    Absent,
    /// Stored but logically expired.
    Expired,
    Live,
}

impl WatchRegistry {
    /// SWAPDB of logical databases `a` and `b`, after the swap: for each key watched in either,
    /// `stored(db, key)` says what the database now holds (`db` logical) and what it held
    /// before is what the other one holds now. Marks the watchers dirty as Redis 7.0 does: the
    /// key existed before or exists now, except an expired key that stays expired or is gone
    /// (no logical change) and an absent key replaced by an expired one.
    pub fn dbs_swapped(&self, a: u16, b: u16, stored: impl Fn(u16, &[u8]) -> Stored) {
        if self.count.load(Ordering::Relaxed) == 0 || a == b {
            return;
        }
        let map = self.map.lock();
        for (db, other) in [(a, b), (b, a)] {
            let Some(dbw) = map.get(&db) else { continue };
            for (key, list) in dbw {
                let before = stored(other, key);
                let now = stored(db, key);
                if before == Stored::Absent && now == Stored::Absent {
                    continue;
                }
                for w in list {
                    if w.expired.load(Ordering::Relaxed) {
                        if now == Stored::Absent {
                            w.expired.store(false, Ordering::Relaxed);
                            continue;
                        } else if now == Stored::Expired {
                            continue;
                        }
                    } else if before == Stored::Absent && now == Stored::Expired {
                        w.expired.store(true, Ordering::Relaxed);
                        continue;
                    }
                    w.dirty.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

impl WriteObserver for WatchRegistry {
    fn keys_written(&self, keys: &[(u16, &[u8], Option<Kind>)]) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let map = self.map.lock();
        for (db, key, kind) in keys {
            let Some(list) = map.get(db).and_then(|d| d.get(*key)) else {
                continue;
            };
            for w in list {
                // An already-expired key being deleted is no logical change (Redis 7.0).
                if kind.is_none() && w.expired.swap(false, Ordering::Relaxed) {
                    continue;
                }
                w.dirty.store(true, Ordering::Relaxed);
            }
        }
    }

    fn db_flushed(&self, db: Option<u16>) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let map = self.map.lock();
        let dbs: Vec<&DbWatches> = match db {
            Some(db) => map.get(&db).into_iter().collect(),
            None => map.values().collect(),
        };
        for w in dbs.into_iter().flat_map(|d| d.values()).flatten() {
            if w.existed {
                w.dirty.store(true, Ordering::Relaxed);
            } else {
                w.expired.store(false, Ordering::Relaxed);
            }
        }
    }
}

/// A client's watched keys (kept in its session). Dropping it unwatches them all.
#[derive(Default)]
pub struct Watches {
    set: Option<WatchSet>,
}

struct WatchSet {
    registry: Arc<WatchRegistry>,
    dirty: Arc<AtomicBool>,
    keys: Vec<(u16, Bytes, Arc<WatchedKey>)>,
    /// `keys`' (db, key) pairs, so a WATCH of thousands of keys finds repeats without a scan.
    watching: HashSet<(u16, Bytes), FastHash>,
}

impl Drop for WatchSet {
    fn drop(&mut self) {
        self.registry.remove(&self.keys);
    }
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Watches({})", self.len())
    }
}

impl Watches {
    /// Number of keys watched.
    pub fn len(&self) -> usize {
        self.set.as_ref().map_or(0, |s| s.keys.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The watched keys, as (db, key).
    pub fn keys(&self) -> impl Iterator<Item = (u16, &[u8])> {
        self.set
            .iter()
            .flat_map(|s| s.keys.iter().map(|(db, k, _)| (*db, &k[..])))
    }

    /// Watches `keys` of logical database `db` (a key already watched there is skipped, as in Redis).
    /// Each key is registered under its stripe lock, so no write of it can fall between reading
    /// its state and registering.
    pub fn watch(
        &mut self,
        registry: &Arc<WatchRegistry>,
        storage: &Storage,
        db: u16,
        keys: &[Bytes],
        now_ms: u64,
    ) -> StorageResult<()> {
        let set = self.set.get_or_insert_with(|| WatchSet {
            registry: registry.clone(),
            dirty: Arc::default(),
            keys: Vec::new(),
            watching: HashSet::default(),
        });
        for key in keys {
            if set.watching.contains(&(db, key.clone())) {
                continue;
            }
            let physical = storage.dbs().physical(db);
            let _guard = storage.lock(physical, &[key]);
            let meta = storage.get_meta(physical, key)?;
            let w = Arc::new(WatchedKey {
                dirty: set.dirty.clone(),
                expired: AtomicBool::new(meta.as_ref().is_some_and(|m| m.is_expired(now_ms))),
                existed: meta.is_some_and(|m| !m.is_expired(now_ms)),
            });
            registry.add(db, key, w.clone());
            set.watching.insert((db, key.clone()));
            set.keys.push((db, key.clone(), w));
        }
        Ok(())
    }

    /// Whether EXEC must abort: a watched key was written (or flushed) since WATCH, or a key that
    /// was live when watched is expired or gone now. Call it holding the watched keys' stripes.
    pub fn is_dirty(&self, storage: &Storage, now_ms: u64) -> StorageResult<bool> {
        let Some(set) = &self.set else {
            return Ok(false);
        };
        if set.dirty.load(Ordering::Relaxed) {
            return Ok(true);
        }
        for (db, key, w) in &set.keys {
            if w.existed
                && !w.expired.load(Ordering::Relaxed)
                && storage
                    .get_live(storage.dbs().physical(*db), key, now_ms)?
                    .is_none()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Forgets every watched key (UNWATCH).
    pub fn clear(&mut self) {
        self.set = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::encoding::Meta;
    use crate::storage::Batch;

    fn setup() -> (tempfile::TempDir, Storage, Arc<WatchRegistry>) {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path()).unwrap();
        let reg = Arc::new(WatchRegistry::default());
        storage.add_observer(reg.clone());
        (dir, storage, reg)
    }

    fn put(s: &Storage, db: u16, key: &[u8], expire_at_ms: u64) {
        let mut b = Batch::default();
        b.put_meta(s, db, key, &Meta::string(b"v".to_vec(), expire_at_ms));
        s.commit(b).unwrap();
    }

    fn del(s: &Storage, db: u16, key: &[u8]) {
        let mut b = Batch::default();
        b.delete_meta(s, db, key);
        s.commit(b).unwrap();
    }

    #[test]
    fn a_write_marks_only_its_watchers_and_unwatch_unregisters() {
        let (_d, s, reg) = setup();
        let now = crate::clock::unix_ms();
        let mut a = Watches::default();
        let mut b = Watches::default();
        a.watch(&reg, &s, 0, &[Bytes::from("k"), Bytes::from("k")], now)
            .unwrap();
        b.watch(&reg, &s, 0, &[Bytes::from("j")], now).unwrap();
        assert_eq!(a.len(), 1, "a key watched twice is watched once");
        assert_eq!(reg.watched(), 2);
        put(&s, 1, b"k", 0); // another db
        put(&s, 0, b"j", 0);
        assert!(!a.is_dirty(&s, now).unwrap());
        assert!(b.is_dirty(&s, now).unwrap());
        put(&s, 0, b"k", 0);
        assert!(a.is_dirty(&s, now).unwrap());
        a.clear();
        drop(b);
        assert_eq!(reg.watched(), 0);
        assert!(reg.map.lock().is_empty());
    }

    #[test]
    fn expiry_follows_redis_7() {
        let (_d, s, reg) = setup();
        let now = crate::clock::unix_ms();
        // Live when watched, expired by EXEC time: abort, with no write at all.
        put(&s, 0, b"live", now + 1000);
        let mut w = Watches::default();
        w.watch(&reg, &s, 0, &[Bytes::from("live")], now).unwrap();
        assert!(!w.is_dirty(&s, now).unwrap());
        assert!(w.is_dirty(&s, now + 2000).unwrap());
        // Already expired when watched: no abort, and deleting it is no change.
        put(&s, 0, b"old", now - 1);
        let mut w = Watches::default();
        w.watch(&reg, &s, 0, &[Bytes::from("old")], now).unwrap();
        assert!(!w.is_dirty(&s, now).unwrap());
        del(&s, 0, b"old");
        assert!(!w.is_dirty(&s, now).unwrap());
        // ... but writing it after that is.
        put(&s, 0, b"old", 0);
        assert!(w.is_dirty(&s, now).unwrap());
    }

    #[test]
    fn flush_marks_watchers_of_keys_that_existed() {
        let (_d, s, reg) = setup();
        let now = crate::clock::unix_ms();
        put(&s, 0, b"here", 0);
        let mut here = Watches::default();
        here.watch(&reg, &s, 0, &[Bytes::from("here")], now)
            .unwrap();
        let mut absent = Watches::default();
        absent
            .watch(&reg, &s, 0, &[Bytes::from("absent")], now)
            .unwrap();
        let mut other_db = Watches::default();
        put(&s, 1, b"here", 0);
        other_db
            .watch(&reg, &s, 1, &[Bytes::from("here")], now)
            .unwrap();
        s.flush_db(0).unwrap();
        assert!(here.is_dirty(&s, now).unwrap());
        assert!(!absent.is_dirty(&s, now).unwrap());
        assert!(!other_db.is_dirty(&s, now).unwrap());
        s.flush_all().unwrap();
        assert!(other_db.is_dirty(&s, now).unwrap());
        assert!(!absent.is_dirty(&s, now).unwrap());
    }
}
