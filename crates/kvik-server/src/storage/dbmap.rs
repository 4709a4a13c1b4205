//! Which on-disk database holds each database a client sees: the indirection that makes
//! SWAPDB O(1).
//!
//! Every key on disk starts with a database index (see `encoding`). SWAPDB does not rewrite
//! keys: it swaps two entries of this table, persisted as one internal record. Above storage,
//! the session's database (SELECT, CLIENT LIST, keyspace notifications, blocked clients,
//! WATCH) is the *logical* index; storage, the hot cache, the key locks and the key counts
//! speak *physical* indexes. `cmd::ctx::Ctx` translates once per command, so a command runs
//! entirely against one physical database: one that raced a swap is ordered before it.
//! `Storage::commit` translates the other way for its observers.
//!
//! Reads cost one relaxed load while no swap ever happened (the usual case), a shared lock
//! after. MULTI/EXEC and scripts hold [`DbMap::pin`] for their whole run, so a SWAPDB from
//! another client cannot fall between their commands (as in Redis, where both are atomic).

use parking_lot::{RwLock, RwLockReadGuard};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The internal record holding the table (big-endian u16 physical index per logical index).
pub(super) const DB_MAP_KEY: &[u8] = b"db-map";

#[derive(Default)]
pub struct DbMap {
    /// True once any entry differs from the identity: the fast path reads only this.
    swapped: AtomicBool,
    /// `to_physical[logical]`; indexes past its end map to themselves.
    to_physical: RwLock<Vec<u16>>,
    /// Held shared by EXEC and scripts, exclusively by a swap.
    pins: RwLock<()>,
}

thread_local! {
    /// How many pins this thread holds (EXEC running EVAL nests them; SWAPDB inside EXEC or a
    /// script swaps under its own pin).
    static PIN_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// A held pin: no swap happens until it is dropped.
pub struct Pin<'a> {
    _guard: Option<RwLockReadGuard<'a, ()>>,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        PIN_DEPTH.with(|d| d.set(d.get() - 1));
    }
}

impl DbMap {
    /// The table read back from its record (`None`: never swapped).
    pub(super) fn load(raw: Option<&[u8]>) -> DbMap {
        let map = DbMap::default();
        if let Some(raw) = raw {
            let v: Vec<u16> = raw
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            map.swapped.store(is_swapped(&v), Ordering::Relaxed);
            *map.to_physical.write() = v;
        }
        map
    }

    /// The on-disk database that holds logical database `db`.
    pub fn physical(&self, db: u16) -> u16 {
        if !self.swapped.load(Ordering::Relaxed) {
            return db;
        }
        self.to_physical
            .read()
            .get(db as usize)
            .copied()
            .unwrap_or(db)
    }

    /// The logical database that on-disk database `db` is now.
    pub fn logical(&self, db: u16) -> u16 {
        if !self.swapped.load(Ordering::Relaxed) {
            return db;
        }
        let map = self.to_physical.read();
        if (db as usize) < map.len() {
            map.iter().position(|&p| p == db).map_or(db, |i| i as u16)
        } else {
            db
        }
    }

    /// Holds off swaps until the pin is dropped (re-entrant on one thread).
    pub fn pin(&self) -> Pin<'_> {
        let depth = PIN_DEPTH.with(|d| {
            let v = d.get();
            d.set(v + 1);
            v
        });
        Pin {
            _guard: (depth == 0).then(|| self.pins.read()),
        }
    }

    /// Swaps logical databases `a` and `b`; `persist` writes the new table (synced) before it
    /// takes effect, `then` runs after it, before the EXECs and scripts of other clients (which
    /// it waits for) resume.
    pub(super) fn swap<E>(
        &self,
        a: u16,
        b: u16,
        persist: impl FnOnce(&[u8]) -> Result<(), E>,
        then: impl FnOnce(),
    ) -> Result<(), E> {
        let _exclusive = (PIN_DEPTH.with(Cell::get) == 0).then(|| self.pins.write());
        let mut map = self.to_physical.write();
        let mut next = map.clone();
        let need = a.max(b) as usize + 1;
        while next.len() < need {
            next.push(next.len() as u16);
        }
        next.swap(a as usize, b as usize);
        let raw: Vec<u8> = next.iter().flat_map(|p| p.to_be_bytes()).collect();
        persist(&raw)?;
        self.swapped.store(is_swapped(&next), Ordering::Relaxed);
        *map = next;
        drop(map);
        then();
        Ok(())
    }
}

fn is_swapped(v: &[u16]) -> bool {
    v.iter().enumerate().any(|(i, &p)| p as usize != i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_compose_and_round_trip() {
        let m = DbMap::default();
        assert_eq!((m.physical(3), m.logical(3)), (3, 3));
        let mut saved = Vec::new();
        m.swap(
            0,
            2,
            |raw| {
                saved = raw.to_vec();
                Ok::<_, ()>(())
            },
            || {},
        )
        .unwrap();
        assert_eq!((m.physical(0), m.physical(2), m.physical(1)), (2, 0, 1));
        assert_eq!((m.logical(2), m.logical(0), m.logical(9)), (0, 2, 9));
        let back = DbMap::load(Some(&saved));
        assert_eq!(back.physical(0), 2);
        back.swap(2, 0, |_| Ok::<_, ()>(()), || {}).unwrap();
        assert_eq!(back.physical(0), 0);
        assert!(!back.swapped.load(Ordering::Relaxed));
        let _p = m.pin();
        let _q = m.pin(); // re-entrant
        m.swap(1, 1, |_| Ok::<_, ()>(()), || {}).unwrap(); // inside a pin: no deadlock
    }
}
