//! A shard's index: from an entry's hash to its position in the shard's entry array.
//!
//! Open addressing with linear probing over 8-byte slots, each holding 32 bits of the hash (the
//! tag; its low bits pick the home slot) and the entry's position. A lookup reads one slot line
//! and then the entry, where a SwissTable reads a control group, then a slot in another array,
//! then the entry: one dependent cache miss fewer per hit. And a slot's address follows from the
//! hash alone, before any lookup, so a pipelined run can ask the CPU for all of its keys' lines
//! at once ([`SlotsAt::prefetch`], `Cache::prefetch`), as Valkey 8 prefetches its dict.
//! Removal shifts the slots that follow back into the hole (no tombstones), so probes stay as
//! short as the live keys make them.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The fewest slots an index allocates.
const MIN_SLOTS: usize = 16;

/// Where an index's slots are, for [`SlotsAt::prefetch`] without the shard's lock: written
/// under the lock whenever the slots move. A prefetch that races a move hints at a stale line,
/// which costs a wasted hint, never a fault (a prefetch is not a memory access).
#[derive(Default)]
pub(super) struct SlotsAt {
    ptr: AtomicPtr<u64>,
    mask: AtomicUsize,
}

impl SlotsAt {
    /// Asks the CPU for the line of `hash`'s home slot.
    pub fn prefetch(&self, hash: u64) {
        let ptr = self.ptr.load(Relaxed);
        if !ptr.is_null() {
            let slot = tag(hash) as usize & self.mask.load(Relaxed);
            prefetch(ptr.wrapping_add(slot));
        }
    }
}

/// Asks the CPU to bring the cache line holding `at` into its caches. Only a hint: `at` may be
/// any address, stale or past an allocation's end.
#[inline(always)]
pub(super) fn prefetch<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 only hints the cache hierarchy: it never faults, whatever the address,
    // and reads nothing the program sees (no memory access in Rust's model).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// The hash bits a slot keeps: the high half (the shard was chosen by the hash modulo the
/// shard count, so within a shard the low bits are alike).
fn tag(hash: u64) -> u32 {
    (hash >> 32) as u32
}

fn slot(tag: u32, pos: usize) -> u64 {
    (u64::from(tag) << 32) | (pos as u64 + 1)
}

fn pos_of(slot: u64) -> usize {
    (slot as u32 - 1) as usize
}

fn tag_of(slot: u64) -> u32 {
    (slot >> 32) as u32
}

/// The index. Slot 0 means empty, so a position is kept plus one.
#[derive(Default)]
pub(super) struct Index {
    slots: Vec<u64>,
    len: usize,
    at: Arc<SlotsAt>,
}

impl Index {
    /// Where this index publishes its slots (shared with the shard's lock-free side).
    pub fn slots_at(&self) -> Arc<SlotsAt> {
        self.at.clone()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The first position whose slot matches `hash`'s tag and for which `is` says yes.
    #[inline]
    pub fn find(&self, hash: u64, mut is: impl FnMut(usize) -> bool) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let (tag, mask) = (tag(hash), self.mask());
        let mut b = tag as usize & mask;
        loop {
            let s = self.slots[b];
            if s == 0 {
                return None;
            }
            if tag_of(s) == tag && is(pos_of(s)) {
                return Some(pos_of(s));
            }
            b = (b + 1) & mask;
        }
    }

    /// Calls `f` with each position whose slot carries `hash`'s tag (the candidates a lookup
    /// would compare), without comparing anything: for prefetching their entries.
    pub fn candidates(&self, hash: u64, mut f: impl FnMut(usize)) {
        self.find(hash, |pos| {
            f(pos);
            false
        });
    }

    /// Adds `pos` under `hash` (the caller knows no slot holds that entry yet).
    pub fn insert(&mut self, hash: u64, pos: usize) {
        // At most three quarters full: linear probing's probes stay within a line or two.
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        self.place(slot(tag(hash), pos));
        self.len += 1;
    }

    fn place(&mut self, s: u64) {
        let mask = self.mask();
        let mut b = tag_of(s) as usize & mask;
        while self.slots[b] != 0 {
            b = (b + 1) & mask;
        }
        self.slots[b] = s;
    }

    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![0; n]);
        for s in old.into_iter().filter(|&s| s != 0) {
            self.place(s);
        }
        self.at.mask.store(self.mask(), Relaxed);
        self.at.ptr.store(self.slots.as_mut_ptr(), Relaxed);
    }

    /// The slot number holding position `pos` under `hash`.
    fn slot_of(&self, hash: u64, pos: usize) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let (want, mask) = (slot(tag(hash), pos), self.mask());
        let mut b = tag(hash) as usize & mask;
        loop {
            match self.slots[b] {
                0 => return None,
                s if s == want => return Some(b),
                _ => b = (b + 1) & mask,
            }
        }
    }

    /// Drops the slot of position `pos` under `hash`, shifting back the slots after it that
    /// may live closer to their home.
    pub fn remove(&mut self, hash: u64, pos: usize) {
        let Some(mut hole) = self.slot_of(hash, pos) else {
            return;
        };
        let mask = self.mask();
        let mut b = (hole + 1) & mask;
        loop {
            let s = self.slots[b];
            if s == 0 {
                break;
            }
            let home = tag_of(s) as usize & mask;
            // `s` may move into the hole unless its home lies after the hole (cyclically, in
            // (hole, b]): then the hole is before where a lookup of it starts.
            if b.wrapping_sub(home) & mask >= b.wrapping_sub(hole) & mask {
                self.slots[hole] = s;
                hole = b;
            }
            b = (b + 1) & mask;
        }
        self.slots[hole] = 0;
        self.len -= 1;
    }

    /// The entry under `hash` moved from position `from` to `to`.
    pub fn repoint(&mut self, hash: u64, from: usize, to: usize) {
        if let Some(b) = self.slot_of(hash, from) {
            self.slots[b] = slot(tag(hash), to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The index against a list of keys, through inserts, removals and moves (as the shard's
    /// swap-remove makes them), with hashes that collide in their tags and home slots.
    fn check(ops: Vec<(u8, u16)>) {
        let mut index = Index::default();
        let hash_of = |k: u16| -> u64 {
            // Few distinct tags, so tags collide and probe runs wrap around.
            (u64::from(k % 37) << 32) | u64::from(k)
        };
        let mut keys: Vec<u16> = Vec::new(); // position -> key
        for (op, k) in ops {
            match (op % 3, keys.iter().position(|&x| x == k)) {
                (2, Some(i)) => {
                    // The shard's removal: drop i, move the last entry into its place.
                    let last = keys.len() - 1;
                    index.remove(hash_of(k), i);
                    if i < last {
                        index.repoint(hash_of(keys[last]), last, i);
                    }
                    keys.swap_remove(i);
                }
                (0 | 1, None) => {
                    index.insert(hash_of(k), keys.len());
                    keys.push(k);
                }
                _ => {}
            }
            assert_eq!(index.len(), keys.len());
            for (p, &key) in keys.iter().enumerate() {
                assert_eq!(index.find(hash_of(key), |q| keys[q] == key), Some(p));
            }
            assert_eq!(index.find(hash_of(u16::MAX), |q| keys[q] == u16::MAX), None);
        }
    }

    proptest! {
        #[test]
        fn follows_a_map(ops in prop::collection::vec((any::<u8>(), 0u16..300), 0..400)) {
            check(ops);
        }
    }

    /// Keys of one shape (a counter in a fixed prefix, as benchmarks and many applications
    /// name them) spread over the slots: a hit's probe stays short at the fullest load.
    #[test]
    fn probes_stay_short_for_keys_of_one_shape() {
        for seed in [1u64, 2, 3] {
            let mut index = Index::default();
            let n = 3 << 16; // three quarters of 2^18 slots: the load before the next growth
            let hashes: Vec<u64> = (0..n)
                .map(|i| crate::fast_hash::key_hash(seed, 0, format!("element:{i:012}").as_bytes()))
                .collect();
            for (pos, &h) in hashes.iter().enumerate() {
                index.insert(h, pos);
            }
            assert_eq!(index.slots.len(), 1 << 18);
            let mask = index.slots.len() - 1;
            let mut total = 0;
            for (pos, &h) in hashes.iter().enumerate() {
                let b = index.slot_of(h, pos).unwrap();
                total += (b.wrapping_sub(tag(h) as usize) & mask) + 1;
            }
            let mean = total as f64 / n as f64;
            // Linear probing at load 3/4 expects 2.5 slots per hit: the same line.
            assert!(mean < 3.0, "seed {seed}: {mean} slots per hit");
        }
    }

    #[test]
    fn grows_and_publishes_its_slots() {
        let mut index = Index::default();
        let at = index.slots_at();
        at.prefetch(1); // nothing allocated yet: no hint, no fault
        for i in 0..1000usize {
            index.insert((i as u64) << 32, i);
        }
        assert_eq!(index.len(), 1000);
        assert_eq!(at.ptr.load(Relaxed), index.slots.as_mut_ptr());
        assert_eq!(at.mask.load(Relaxed), index.slots.len() - 1);
        assert!(index.slots.len() * 3 >= 1000 * 4);
        at.prefetch(12345 << 32);
    }
}
