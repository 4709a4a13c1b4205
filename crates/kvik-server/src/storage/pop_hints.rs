//! Where a sorted set's two ends start, as its pops left them. ZPOPMIN and ZPOPMAX delete
//! the members at an end of the score index, and RocksDB keeps their tombstones until a
//! compaction drops them, so a pop that seeks the index from its first (or last) entry steps
//! over every member popped before it: a queue on ZPOPMIN was quadratic in its length, and
//! one on ZPOPMAX too (docs/benchmarks.md sections 42, 43). A pop notes the last entry it
//! removed; the next pop from the same end of the same set seeks from there.
//!
//! A low note holds only while no entry at or below it exists, a high note while none at or
//! above it does: a write of a score entry on the popped side of a note forgets it
//! ([`PopHints::wrote`], from `Batch::put_member`); writes that do not pass through `Batch`
//! forget notes: a replica's applied batch those of the sets it changes, a full sync all. Sets are
//! told apart by their storage prefix, which holds their version (unique per set), so a set
//! deleted and made again never meets an old note. In memory only, bounded.

use crate::fast_hash::FastHash;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

/// Sets noted at most; past it all notes are dropped (a note is only a shortcut).
const MAX_NOTES: usize = 4096;

/// The end of a sorted set's score index a pop takes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// ZPOPMIN's: the lowest entries.
    Low,
    /// ZPOPMAX's: the highest entries.
    High,
}

/// One set's notes: the last entry popped from each end.
#[derive(Default)]
struct Ends {
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
}

impl Ends {
    fn at(&mut self, end: End) -> &mut Option<Vec<u8>> {
        match end {
            End::Low => &mut self.low,
            End::High => &mut self.high,
        }
    }
}

#[derive(Default)]
pub struct PopHints {
    /// False while no note exists: writes then skip the lock.
    any: AtomicBool,
    /// A set's storage prefix -> the last index entries its pops removed.
    notes: Mutex<HashMap<Vec<u8>, Ends, FastHash>>,
}

impl PopHints {
    /// The entry the set at `prefix` was popped up to from `end`, if noted: every entry on
    /// that side of it, and it, is gone.
    pub fn get(&self, prefix: &[u8], end: End) -> Option<Vec<u8>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.notes.lock().get_mut(prefix)?.at(end).clone()
    }

    /// Notes that the set at `prefix` has no entry from `end` up to and including `entry`
    /// (its pops removed them, and the writer holds the key's lock).
    pub fn set(&self, prefix: Vec<u8>, end: End, entry: Vec<u8>) {
        let mut notes = self.notes.lock();
        if notes.len() >= MAX_NOTES && !notes.contains_key(&prefix) {
            notes.clear();
        }
        *notes.entry(prefix).or_default().at(end) = Some(entry);
        self.any.store(true, Ordering::Release);
    }

    /// Whether any note exists: a writer asks before it builds the prefix to tell
    /// [`PopHints::wrote`].
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Score entry `entry` of the set at `prefix` is being written: a note it lies on the
    /// popped side of (or at) no longer holds.
    pub fn wrote(&self, prefix: &[u8], entry: &[u8]) {
        let mut notes = self.notes.lock();
        let Some(ends) = notes.get_mut(prefix) else {
            return;
        };
        if ends.low.as_deref().is_some_and(|n| entry <= n) {
            ends.low = None;
        }
        if ends.high.as_deref().is_some_and(|n| entry >= n) {
            ends.high = None;
        }
        if ends.low.is_none() && ends.high.is_none() {
            notes.remove(prefix);
        }
    }

    /// Forgets the notes of the sets `written` holds the key part of (see
    /// `pop_decks::forget_keys`).
    pub fn forget_keys(&self, written: &HashSet<&[u8]>) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        self.notes
            .lock()
            .retain(|p, _| !written.contains(super::pop_decks::without_version(p)));
    }

    /// Forgets every note (writes that bypassed `Batch`).
    pub fn clear(&self) {
        self.notes.lock().clear();
        self.any.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::{End, PopHints};

    #[test]
    fn a_write_at_or_below_a_low_note_forgets_it_and_above_it_does_not() {
        let h = PopHints::default();
        assert_eq!(h.get(b"z1", End::Low), None);
        h.set(b"z1".to_vec(), End::Low, b"m5".to_vec());
        h.wrote(b"z1", b"m7");
        h.wrote(b"z2", b"m1");
        assert_eq!(h.get(b"z1", End::Low).as_deref(), Some(&b"m5"[..]));
        h.wrote(b"z1", b"m5");
        assert_eq!(h.get(b"z1", End::Low), None);
        h.set(b"z1".to_vec(), End::Low, b"m5".to_vec());
        h.wrote(b"z1", b"m1");
        assert_eq!(h.get(b"z1", End::Low), None);
        h.set(b"z1".to_vec(), End::Low, b"m5".to_vec());
        h.clear();
        assert_eq!(h.get(b"z1", End::Low), None);
    }

    #[test]
    fn a_write_at_or_above_a_high_note_forgets_only_it() {
        let h = PopHints::default();
        h.set(b"z1".to_vec(), End::Low, b"m2".to_vec());
        h.set(b"z1".to_vec(), End::High, b"m8".to_vec());
        h.wrote(b"z1", b"m5");
        assert_eq!(h.get(b"z1", End::Low).as_deref(), Some(&b"m2"[..]));
        assert_eq!(h.get(b"z1", End::High).as_deref(), Some(&b"m8"[..]));
        h.wrote(b"z1", b"m9");
        assert_eq!(h.get(b"z1", End::High), None);
        assert_eq!(h.get(b"z1", End::Low).as_deref(), Some(&b"m2"[..]));
        h.set(b"z1".to_vec(), End::High, b"m8".to_vec());
        h.wrote(b"z1", b"m8");
        assert_eq!(h.get(b"z1", End::High), None);
        h.wrote(b"z1", b"m1");
        assert_eq!(h.get(b"z1", End::Low), None);
    }
}
