//! Counters that every command adds to, from every thread, without the threads sharing a
//! cache line: each thread adds to a slot of its own and a read sums the slots.
//!
//! A GET answered on an I/O thread bumped seven counters (calls, time, commands processed,
//! I/O-thread commands, keyspace and cache hits, its latency bucket), all shared by both I/O
//! threads; under a pipelined load each bump pulled its line from the other core. With those
//! counters unshared a pipelined GET costs 5% less CPU (docs/benchmarks.md section 47).
//!
//! The I/O threads, which count nearly everything, claim slots by their index ([`claim`]);
//! every other thread takes one of the remaining slots in turn on its first count. Threads
//! past the slots share one, which is as correct as before, only slower.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, Ordering::Relaxed};

/// Slots of each counter.
pub const SLOTS: usize = 8;
/// Slots kept for the I/O threads of these indexes.
const CLAIMED: usize = 4;

static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Makes this thread, I/O thread `index`, count in a slot no other thread takes (for the first
/// [`CLAIMED`] I/O threads).
pub fn claim(index: usize) {
    SLOT.with(|s| s.set(if index < CLAIMED { index } else { unclaimed() }));
}

fn unclaimed() -> usize {
    CLAIMED + NEXT.fetch_add(1, Relaxed) % (SLOTS - CLAIMED)
}

/// This thread's slot.
#[inline]
pub fn slot() -> usize {
    SLOT.with(|s| match s.get() {
        usize::MAX => {
            let slot = unclaimed();
            s.set(slot);
            slot
        }
        slot => slot,
    })
}

#[repr(align(64))]
#[derive(Default)]
struct Line(AtomicU64);

/// A counter with `AtomicU64`'s method names (its orderings are always relaxed: counters are
/// read for reporting only), so it takes an `AtomicU64` counter's place as it stands.
pub struct ShardedU64 {
    slots: [Line; SLOTS],
}

impl ShardedU64 {
    pub fn new(value: u64) -> ShardedU64 {
        let c = ShardedU64 {
            slots: Default::default(),
        };
        c.slots[0].0.store(value, Relaxed);
        c
    }

    /// Adds `n` in this thread's slot.
    #[inline]
    pub fn fetch_add(&self, n: u64, _: Ordering) {
        self.slots[slot()].0.fetch_add(n, Relaxed);
    }

    /// The sum of the slots.
    pub fn load(&self, _: Ordering) -> u64 {
        self.slots
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.0.load(Relaxed)))
    }

    /// Sets the sum to `value` (CONFIG RESETSTAT: 0).
    pub fn store(&self, value: u64, _: Ordering) {
        for (i, s) in self.slots.iter().enumerate() {
            s.0.store(if i == 0 { value } else { 0 }, Relaxed);
        }
    }
}

impl Default for ShardedU64 {
    fn default() -> ShardedU64 {
        ShardedU64::new(0)
    }
}

impl std::fmt::Debug for ShardedU64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up() {
        let c = std::sync::Arc::new(ShardedU64::new(5));
        let threads: Vec<_> = (0..12)
            .map(|i| {
                let c = c.clone();
                std::thread::spawn(move || {
                    if i < 3 {
                        claim(i);
                    }
                    for _ in 0..1000 {
                        c.fetch_add(2, Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.load(Relaxed), 5 + 12 * 2000);
        c.store(0, Relaxed);
        assert_eq!(c.load(Relaxed), 0);
    }

    #[test]
    fn io_threads_keep_their_slots_and_others_take_the_rest() {
        std::thread::spawn(|| {
            claim(1);
            assert_eq!(slot(), 1);
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            claim(CLAIMED + 3);
            assert!((CLAIMED..SLOTS).contains(&slot()));
        })
        .join()
        .unwrap();
        std::thread::spawn(|| assert!((CLAIMED..SLOTS).contains(&slot())))
            .join()
            .unwrap();
    }
}
