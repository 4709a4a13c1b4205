//! Where a sorted set's low end starts, as its pops left it. ZPOPMIN deletes the members at
//! the head of the score index, and RocksDB keeps their tombstones until a compaction drops
//! them, so a pop that seeks the index from its start steps over every member popped before
//! it: a queue on ZPOPMIN was quadratic in its length (docs/benchmarks.md section 42). A pop
//! notes the last entry it removed; the next pop of the same set seeks from there.
//!
//! A note holds only while no entry at or below it exists: a write of a score entry at or
//! below it forgets it ([`PopHints::wrote`], from `Batch::put_member`), and whatever writes
//! entries without `Batch` (a replica applying its primary's writes, a full sync) forgets them
//! all. Sets are told apart by their storage prefix, which holds their version (unique per
//! set), so a set deleted and made again never meets an old note. In memory only, bounded.

use crate::fast_hash::FastHash;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Notes kept at most; past it they are all dropped (a note is only a shortcut).
const MAX_NOTES: usize = 4096;

#[derive(Default)]
pub struct PopHints {
    /// False while no note exists: writes then skip the lock.
    any: AtomicBool,
    /// A set's storage prefix -> the last index entry its pops removed.
    notes: Mutex<HashMap<Vec<u8>, Vec<u8>, FastHash>>,
}

impl PopHints {
    /// The entry the set at `prefix` was popped up to, if noted: every entry at or below it is
    /// gone.
    pub fn get(&self, prefix: &[u8]) -> Option<Vec<u8>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.notes.lock().get(prefix).cloned()
    }

    /// Notes that the set at `prefix` has no entry at or below `entry` (its pops removed
    /// them, and the writer holds the key's lock).
    pub fn set(&self, prefix: Vec<u8>, entry: Vec<u8>) {
        let mut notes = self.notes.lock();
        if notes.len() >= MAX_NOTES && !notes.contains_key(&prefix) {
            notes.clear();
        }
        notes.insert(prefix, entry);
        self.any.store(true, Ordering::Release);
    }

    /// Whether any note exists: a writer asks before it builds the prefix to tell
    /// [`PopHints::wrote`].
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Score entry `entry` of the set at `prefix` is being written: a note at or above it no
    /// longer holds.
    pub fn wrote(&self, prefix: &[u8], entry: &[u8]) {
        let mut notes = self.notes.lock();
        if notes.get(prefix).is_some_and(|n| entry <= n.as_slice()) {
            notes.remove(prefix);
        }
    }

    /// Forgets every note (writes that bypassed `Batch`).
    pub fn clear(&self) {
        self.notes.lock().clear();
        self.any.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::PopHints;

    #[test]
    fn a_write_at_or_below_a_note_forgets_it_and_above_it_does_not() {
        let h = PopHints::default();
        assert_eq!(h.get(b"z1"), None);
        h.set(b"z1".to_vec(), b"m5".to_vec());
        h.wrote(b"z1", b"m7");
        h.wrote(b"z2", b"m1");
        assert_eq!(h.get(b"z1").as_deref(), Some(&b"m5"[..]));
        h.wrote(b"z1", b"m5");
        assert_eq!(h.get(b"z1"), None);
        h.set(b"z1".to_vec(), b"m5".to_vec());
        h.wrote(b"z1", b"m1");
        assert_eq!(h.get(b"z1"), None);
        h.set(b"z1".to_vec(), b"m5".to_vec());
        h.clear();
        assert_eq!(h.get(b"z1"), None);
    }
}
