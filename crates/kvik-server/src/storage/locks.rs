//! Striped key locks: a write holds the stripe of every key it touches from its metadata read to
//! its WriteBatch commit (and, later, its cache update), so read-modify-write commands on one key
//! never interleave. Reads take no lock: RocksDB gives them a consistent view of each key.
//!
//! Multi-key writes lock their stripes in ascending index order, once each, so two writers can
//! never wait on each other in a cycle.
//!
//! The locks are re-entrant per thread: EXEC locks the stripes of every key of every queued
//! command at once, then runs the commands, whose handlers lock their own keys again. A thread
//! remembers (in a thread-local list) the stripes it holds; locking a stripe it already holds is
//! a no-op, and a guard releases only the stripes it acquired itself. Other threads are excluded
//! as before. (A nested lock of a stripe the thread does not hold yet just waits for it; EXEC
//! avoids that by locking every key its commands will touch up front.)
//!
//! A thread may also keep the stripes its guards release ([`retain`]): an I/O thread whose
//! writes of one turn are buffered in one transaction (`txn`) holds their keys until the
//! transaction is written ([`KeyLocks::release_retained`]), as a worker's EXEC holds its keys to the end.
//! A bounded lock ([`KeyLocks::try_lock_in_for`]) by a thread that keeps no stripe may wait
//! longer than one by a thread that does ([`Patience`]): only the second could close a cycle.
//!
//! A thread holding stripes also holds the flush gate shared (`flush_gate`), so a FLUSHDB or
//! FLUSHALL never falls between a write's reads and its commit.

use super::flush_gate::{Closed, FlushGate};
use crate::fast_hash::FastHash;
use parking_lot::lock_api::{RawMutex as _, RawMutexTimed as _};
use parking_lot::RawMutex;
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Number of stripes; a power of two well above the number of worker threads.
const STRIPES: usize = 1 << 16;

/// The stripes are one byte each, side by side (64 KiB in all), so finding and taking a
/// stripe touches memory the core likely has cached: a stripe behind its own allocation cost
/// a cache miss per lock under random keys.
pub struct KeyLocks {
    stripes: Box<[RawMutex]>,
    seed: u64,
    /// Held shared by every thread that holds stripes; FLUSHDB and FLUSHALL close it.
    gate: FlushGate,
}

/// How long a bounded lock ([`KeyLocks::try_lock_in_for`]) waits for a stripe another thread
/// holds.
#[derive(Clone, Copy, Debug)]
pub struct Patience {
    /// While this thread keeps stripes for its turn ([`retain`]): a longer wait could close a
    /// cycle with another turn that waits for one of them.
    pub keeping: Duration,
    /// While it keeps none: it holds nothing another thread could be waiting for beyond the
    /// stripes of this one lock, which every lock takes in ascending order, so no cycle runs
    /// through it; and the holder (another I/O thread's turn, a worker's command) lets go soon.
    pub not_keeping: Duration,
}

impl Patience {
    /// The same wait either way.
    pub const fn uniform(wait: Duration) -> Patience {
        Patience {
            keeping: wait,
            not_keeping: wait,
        }
    }
}

thread_local! {
    /// Stripes this thread holds, as (address of the owning [`KeyLocks`]' stripes, index): the
    /// stripes of one command, one EXEC, or one turn's retained writes (hundreds), which every
    /// lock and every read on the I/O thread asks about, so a set rather than a list.
    static HELD: RefCell<HashSet<(usize, usize), FastHash>> =
        const { RefCell::new(HashSet::with_hasher(FastHash)) };
    /// Whether guards dropped now keep their stripes ([`retain`]).
    static RETAIN: Cell<bool> = const { Cell::new(false) };
    /// The stripes kept (still locked, and still in `HELD`).
    static RETAINED: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// From now on (`true`), the stripes this thread's guards release stay held until
/// [`KeyLocks::release_retained`]; `false` ends that (what is kept stays kept).
pub fn retain(on: bool) {
    RETAIN.with(|r| r.set(on));
}

/// Stripe indexes of one lock: a command's few keys fit without an allocation.
type Stripes = SmallVec<[usize; 4]>;

/// Held stripes; dropping it releases the ones it acquired (not those an outer guard of the same
/// thread already held). Not `Send`: it must be dropped on the thread that locked.
pub struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    acquired: Stripes,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks {
            stripes: (0..STRIPES).map(|_| RawMutex::INIT).collect(),
            seed: rand::random::<u64>(),
            gate: FlushGate::default(),
        }
    }
}

impl KeyLocks {
    fn stripe(&self, db: u16, key: &[u8]) -> usize {
        (crate::fast_hash::key_hash(self.seed, db, key) as usize) & (STRIPES - 1)
    }

    fn id(&self) -> usize {
        self.stripes.as_ptr() as usize
    }

    /// The stripes of `keys` this thread does not hold yet, in ascending order, once each.
    fn to_take<'k>(&self, keys: impl Iterator<Item = (u16, &'k [u8])>) -> Stripes {
        let mut idx: Stripes = keys.map(|(db, k)| self.stripe(db, k)).collect();
        idx.sort_unstable();
        idx.dedup();
        let owner = self.id();
        HELD.with(|held| {
            let held = held.borrow();
            if !held.is_empty() {
                idx.retain(|i| !held.contains(&(owner, *i)));
            }
        });
        idx
    }

    /// The guard of stripes just taken (recorded as held by this thread).
    fn guard(&self, acquired: Stripes) -> KeyGuard<'_> {
        if !acquired.is_empty() {
            let owner = self.id();
            HELD.with(|held| {
                held.borrow_mut()
                    .extend(acquired.iter().map(|&i| (owner, i)))
            });
            self.gate.took(acquired.len());
        }
        KeyGuard {
            locks: self,
            acquired,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Unlocks stripes this thread took.
    fn unlock(&self, idx: &[usize]) {
        for &i in idx {
            // SAFETY: every index passed here was locked by this thread (a guard's `acquired`,
            // a retained entry, or a partial acquisition being undone) and is unlocked once.
            unsafe { self.stripes[i].unlock() };
        }
    }

    /// Unlocks stripes a guard recorded as held, and leaves the flush gate after the last.
    fn release(&self, idx: &[usize]) {
        let owner = self.id();
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            for &i in idx {
                held.remove(&(owner, i));
            }
        });
        self.unlock(idx);
        self.gate.released(idx.len());
    }

    /// Closes the flush gate (see `flush_gate`): once no other thread holds a stripe, and
    /// until the guard is dropped. A thread that holds stripes lets go of them while it waits
    /// (one of the holders it waits for may be waiting for them) and has them back on return.
    pub fn close_gate(&self) -> Closed<'_> {
        if !self.gate.shared_here() {
            return self.gate.close();
        }
        let owner = self.id();
        let mut mine: Vec<usize> = HELD.with(|held| {
            held.borrow()
                .iter()
                .filter(|(o, _)| *o == owner)
                .map(|&(_, i)| i)
                .collect()
        });
        mine.sort_unstable();
        self.unlock(&mine);
        self.gate.released(mine.len());
        let closed = self.gate.close();
        // No other thread holds a stripe now: these are free.
        for &i in &mine {
            self.stripes[i].lock();
        }
        self.gate.took(mine.len());
        closed
    }

    /// True if another thread holds the stripe of `key` (a writer of it, or of a key sharing
    /// its stripe, is in progress). A stripe this thread holds does not count: its own writes
    /// are whole to it.
    pub fn is_locked(&self, db: u16, key: &[u8]) -> bool {
        let i = self.stripe(db, key);
        self.stripes[i].is_locked() && !HELD.with(|h| h.borrow().contains(&(self.id(), i)))
    }

    /// True if this thread holds `key`'s stripe (INFO `unlocked_write_lookups` counts writes
    /// that read a key without it).
    pub fn held_here(&self, db: u16, key: &[u8]) -> bool {
        let i = self.stripe(db, key);
        HELD.with(|h| h.borrow().contains(&(self.id(), i)))
    }

    /// Locks the stripes of `keys` in database `db`.
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, db: u16, keys: &[K]) -> KeyGuard<'a> {
        self.lock_in(keys.iter().map(|k| (db, k.as_ref())))
    }

    /// Locks the stripes of keys that may live in different databases (MOVE, COPY ... DB).
    pub fn lock_in<'a, 'k>(&'a self, keys: impl Iterator<Item = (u16, &'k [u8])>) -> KeyGuard<'a> {
        let idx = self.to_take(keys);
        if !idx.is_empty() {
            self.gate.enter();
        }
        for &i in &idx {
            self.stripes[i].lock();
        }
        self.guard(idx)
    }

    /// Like [`KeyLocks::lock_in`], but waits at most as long as `patience` says for each
    /// stripe another thread holds, and on failure releases what it took and returns `None`.
    /// For a script that holds its declared keys and then touches another one: waiting
    /// without a bound there could close a cycle with a writer that locks in ascending order
    /// (the script locks out of order), so the script gives up instead.
    pub fn try_lock_in_for<'a, 'k>(
        &'a self,
        keys: impl Iterator<Item = (u16, &'k [u8])>,
        patience: Patience,
    ) -> Option<KeyGuard<'a>> {
        let idx = self.to_take(keys);
        if idx.is_empty() {
            return Some(self.guard(idx));
        }
        // The clock is read only if the gate or a stripe is taken.
        let mut deadline = None;
        let mut until = || {
            *deadline.get_or_insert_with(|| {
                let wait = if self.keeps_any() {
                    patience.keeping
                } else {
                    patience.not_keeping
                };
                Instant::now() + wait
            })
        };
        if !self.gate.try_enter_until(None) && !self.gate.try_enter_until(Some(until())) {
            return None;
        }
        for (n, &i) in idx.iter().enumerate() {
            let stripe = &self.stripes[i];
            if !stripe.try_lock() && !stripe.try_lock_until(until()) {
                self.unlock(&idx[..n]);
                self.gate.released(0);
                return None;
            }
        }
        Some(self.guard(idx))
    }

    /// Whether this thread keeps any stripe of these locks (see [`retain`]).
    fn keeps_any(&self) -> bool {
        let owner = self.id();
        RETAINED.with(|r| r.borrow().iter().any(|&(o, _)| o == owner))
    }

    /// Releases every stripe of these locks this thread kept (see [`retain`]).
    pub fn release_retained(&self) {
        let owner = self.id();
        let kept: Vec<usize> = RETAINED.with(|r| {
            let mut r = r.borrow_mut();
            if r.is_empty() {
                return Vec::new();
            }
            let mut kept = Vec::with_capacity(r.len());
            r.retain(|&(o, i)| {
                let mine = o == owner;
                if mine {
                    kept.push(i);
                }
                !mine
            });
            kept
        });
        if !kept.is_empty() {
            self.release(&kept);
        }
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        if self.acquired.is_empty() {
            return;
        }
        let owner = self.locks.id();
        if RETAIN.with(Cell::get) {
            RETAINED.with(|r| {
                r.borrow_mut()
                    .extend(self.acquired.drain(..).map(|i| (owner, i)))
            });
            return;
        }
        self.locks.release(&self.acquired);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn repeated_and_colliding_keys_do_not_deadlock() {
        let locks = KeyLocks::default();
        // 100,000 keys over 65,536 stripes: many share a stripe, which must be taken once.
        let keys: Vec<Vec<u8>> = (0..100_000).map(|i| format!("k{i}").into_bytes()).collect();
        drop(locks.lock(0, &keys));
        drop(locks.lock(1, &[b"k1", b"k1"]));
        // Everything was released: the same keys can be taken again.
        drop(locks.lock(0, &keys));
    }

    /// A thread holding "a" closes the flush gate while another holds "b" and waits for "a":
    /// the closer lets "a" go until the other finishes (no deadlock), and has it back after.
    #[test]
    fn a_stripe_holder_closes_the_flush_gate_while_another_waits_for_its_stripe() {
        let locks = Arc::new(KeyLocks::default());
        let mine = locks.lock(0, &[b"a"]);
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let l2 = locks.clone();
        let other = std::thread::spawn(move || {
            let _b = l2.lock(0, &[b"b"]);
            held_tx.send(()).unwrap();
            let _a = l2.lock(0, &[b"a"]);
        });
        held_rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let closed = locks.close_gate();
        other.join().unwrap();
        assert!(!free_for_others(&locks, b"a"), "its stripe is back");
        let l3 = locks.clone();
        let other_got_one = std::thread::spawn(move || {
            let c = [(0u16, &b"c"[..])];
            l3.try_lock_in_for(c.into_iter(), Patience::uniform(Duration::ZERO))
                .is_some()
        });
        assert!(
            !other_got_one.join().unwrap(),
            "others are held off while closed"
        );
        drop(closed);
        assert!(
            !free_for_others(&locks, b"a"),
            "held on after the gate opens"
        );
        drop(mine);
        assert!(free_for_others(&locks, b"a"));
        HELD.with(|h| assert!(h.borrow().is_empty()));
    }

    #[test]
    fn a_held_key_blocks_another_writer() {
        let locks = Arc::new(KeyLocks::default());
        let g = locks.lock(0, &[b"a"]);
        let l2 = locks.clone();
        let t = std::thread::spawn(move || {
            let _g = l2.lock(0, &[b"a"]);
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!t.is_finished());
        drop(g);
        t.join().unwrap();
    }

    /// Whether another thread can take `key`'s stripe right now (it tries for a short while).
    fn free_for_others(locks: &Arc<KeyLocks>, key: &'static [u8]) -> bool {
        let l = locks.clone();
        std::thread::spawn(move || {
            let i = l.stripe(0, key);
            let free = l.stripes[i].try_lock_for(Duration::from_millis(20));
            if free {
                // SAFETY: taken just above by this thread.
                unsafe { l.stripes[i].unlock() };
            }
            free
        })
        .join()
        .unwrap()
    }

    #[test]
    fn nested_lock_of_a_held_stripe_is_reentrant_and_still_exclusive() {
        let locks = Arc::new(KeyLocks::default());
        let outer = locks.lock(0, &[&b"a"[..], b"b"]);
        // Would deadlock if not re-entrant.
        let inner = locks.lock(0, &[b"a"]);
        let inner2 = locks.lock_in([(0u16, &b"b"[..]), (0, b"a")].into_iter());
        assert!(
            !free_for_others(&locks, b"a"),
            "held stripes exclude others"
        );
        drop(inner2);
        drop(inner);
        // The inner guards released nothing: the outer one still holds both.
        assert!(!free_for_others(&locks, b"a"));
        assert!(!free_for_others(&locks, b"b"));
        // A nested lock of a new key takes it and gives it back on drop.
        let c = locks.lock(0, &[&b"a"[..], b"c"]);
        assert!(!free_for_others(&locks, b"c"));
        drop(c);
        assert!(free_for_others(&locks, b"c") || locks.stripe(0, b"c") == locks.stripe(0, b"a"));
        assert!(!free_for_others(&locks, b"a"));
        drop(outer);
        assert!(free_for_others(&locks, b"a"));
        assert!(free_for_others(&locks, b"b"));
        HELD.with(|h| assert!(h.borrow().is_empty()));
    }

    #[test]
    fn a_bounded_lock_that_fails_gives_back_what_it_took() {
        let locks = Arc::new(KeyLocks::default());
        // Two keys on different stripes, the second held by another thread.
        let a = b"a";
        let b = (0..)
            .map(|n| format!("b{n}").into_bytes())
            .find(|k| locks.stripe(0, k) > locks.stripe(0, a))
            .unwrap();
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let l2 = locks.clone();
        let b2 = b.clone();
        let holder = std::thread::spawn(move || {
            let _g = l2.lock(0, &[&b2]);
            held_tx.send(()).unwrap();
            done_rx.recv().unwrap();
        });
        held_rx.recv().unwrap();
        let keys = [(0u16, &a[..]), (0, &b[..])];
        let got = locks.try_lock_in_for(
            keys.into_iter(),
            Patience::uniform(Duration::from_millis(30)),
        );
        assert!(got.is_none(), "the held stripe is not taken");
        assert!(
            free_for_others(&locks, a),
            "the stripe taken first was given back"
        );
        HELD.with(|h| assert!(h.borrow().is_empty()));
        done_tx.send(()).unwrap();
        holder.join().unwrap();
        let g = locks.try_lock_in_for(
            keys.into_iter(),
            Patience::uniform(Duration::from_millis(30)),
        );
        assert!(g.is_some(), "both free now");
    }

    #[test]
    fn retained_stripes_stay_held_until_released() {
        let locks = Arc::new(KeyLocks::default());
        retain(true);
        drop(locks.lock(0, &[b"r"]));
        assert!(!free_for_others(&locks, b"r"), "kept after its guard went");
        assert!(!locks.is_locked(0, b"r"), "not locked for its own thread");
        // Re-entrant while kept: taking it again neither waits nor releases it.
        drop(locks.lock(0, &[b"r"]));
        retain(false);
        assert!(!free_for_others(&locks, b"r"));
        locks.release_retained();
        assert!(free_for_others(&locks, b"r"));
        HELD.with(|h| assert!(h.borrow().is_empty()));
        // Without retain, a guard releases at once.
        drop(locks.lock(0, &[b"r"]));
        assert!(free_for_others(&locks, b"r"));
    }

    #[test]
    fn another_thread_waits_for_a_nested_holder() {
        let locks = Arc::new(KeyLocks::default());
        let outer = locks.lock(0, &[b"x"]);
        let inner = locks.lock(0, &[b"x"]);
        let l2 = locks.clone();
        let t = std::thread::spawn(move || {
            let _g = l2.lock(0, &[b"x"]);
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!t.is_finished());
        drop(inner);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !t.is_finished(),
            "the inner guard must not release the outer's stripe"
        );
        drop(outer);
        t.join().unwrap();
    }

    /// A thread that keeps stripes for its turn waits `Patience::keeping` for a stripe another
    /// thread holds; one that keeps none waits `Patience::not_keeping`. Outcomes only:
    /// `keeping` is zero, `not_keeping` far longer than the holder keeps the stripe.
    #[test]
    fn a_thread_that_keeps_no_stripe_waits_longer() {
        let locks = Arc::new(KeyLocks::default());
        let patience = Patience {
            keeping: Duration::ZERO,
            not_keeping: Duration::from_secs(20),
        };
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let l2 = locks.clone();
        let holder = std::thread::spawn(move || {
            // Holds "k" until told, then a little longer (twice).
            for _ in 0..2 {
                let g = l2.lock(0, &[b"k"]);
                held_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                std::thread::sleep(Duration::from_millis(20));
                drop(g);
            }
        });

        // Keeping a stripe of its own: the short wait, and it gives up.
        held_rx.recv().unwrap();
        let own = (0..)
            .map(|n| format!("own{n}").into_bytes())
            .find(|k| locks.stripe(0, k) != locks.stripe(0, b"k"))
            .unwrap();
        retain(true);
        drop(locks.lock(0, &[&own]));
        retain(false);
        let got = locks.try_lock_in_for([(0u16, &b"k"[..])].into_iter(), patience);
        assert!(
            got.is_none(),
            "a thread keeping stripes waits the short time"
        );
        locks.release_retained();
        go_tx.send(()).unwrap();

        // Keeping none: it waits for the holder and gets the stripe.
        held_rx.recv().unwrap();
        go_tx.send(()).unwrap();
        let got = locks.try_lock_in_for([(0u16, &b"k"[..])].into_iter(), patience);
        assert!(got.is_some(), "waited for the holder");
        drop(got);
        holder.join().unwrap();
    }
}
