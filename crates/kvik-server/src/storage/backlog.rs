//! The replication backlog: the most recent committed WriteBatches, in memory, for the
//! feeders that stream them to replicas (`replication::primary`).
//!
//! Without it every feeder re-reads the WAL file (`get_updates_since`) after each write, so each
//! replica costs the primary a file read per poll and its lag is the poll cycle. With it, a
//! commit appends (first sequence number, the batch's bytes) to a ring bounded by bytes
//! (`repl-backlog-size`, 0: off) and wakes the feeders, which send from memory while their
//! position is inside the ring and read the WAL only when they are behind its start (after a
//! full sync, a slow replica) or it has a gap.
//!
//! Order: while the ring records, commits run one at a time between their sequence-number
//! reads and their append ([`Backlog::begin`]'s guard), so the ring holds batches in the
//! sequence order RocksDB gave them. A write it did not see (one that bypassed it, or one
//! interleaved with a commit's reads) shows as a gap, and the ring starts over after it:
//! the feeders behind it go to the WAL, so a gap costs a file read, never a lost batch.
//!
//! Durability: an entry is served only once the WAL file holds it (its group-commit ticket is
//! flushed, [`Backlog::flushed`]), exactly what the WAL tail would have served, so a replica
//! never holds a write its primary could lose in a process crash.
//!
//! The ring records only while a feeder follows it ([`Backlog::follow`]): without replicas a
//! commit pays one atomic load.

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// One committed WriteBatch.
#[derive(Clone)]
pub struct Entry {
    /// The sequence number of its first write; it holds `count` of them.
    pub seq: u64,
    pub count: u64,
    /// Its group-commit ticket (`wal::WalGroup`): servable once the flushed ticket reaches it.
    ticket: u64,
    /// The WriteBatch's bytes (RocksDB's format, as the WAL holds it).
    pub data: Arc<[u8]>,
}

impl Entry {
    /// The sequence number of its last write.
    pub fn last(&self) -> u64 {
        self.seq + self.count - 1
    }
}

#[derive(Default)]
struct Ring {
    entries: VecDeque<Entry>,
    bytes: u64,
    /// The sequence number the next entry must start at; 0: nothing recorded since the ring
    /// (re)started following, so it covers nothing.
    next: u64,
    /// Every ticket up to this one is in the WAL file.
    flushed: u64,
}

impl Ring {
    fn clear(&mut self, next: u64) {
        self.entries.clear();
        self.bytes = 0;
        self.next = next;
    }

    /// The first sequence number the ring covers (`next` when it is empty).
    fn start(&self) -> u64 {
        self.entries.front().map_or(self.next, |e| e.seq)
    }
}

/// What a feeder at `after` finds in the ring.
pub enum Look {
    /// Batches to send, contiguous from `after + 1` (at least one).
    Ready,
    /// The ring covers `after + 1` but holds nothing after it yet: wait (if the WAL holds
    /// more, a write the ring did not see is there).
    Nothing,
    /// The ring holds batches after `after` not yet in the WAL file: wait for the flush.
    Unflushed,
    /// The ring does not cover `after + 1` (off, behind its start, past a gap): read the WAL.
    Elsewhere,
}

#[derive(Default)]
pub struct Backlog {
    /// `repl-backlog-size`: the ring's bound in bytes; 0: off.
    capacity: AtomicU64,
    /// Feeders following the ring; it records only while there are some.
    followers: AtomicUsize,
    /// Held by a recording commit from its first sequence-number read to its append.
    order: Mutex<()>,
    ring: Mutex<Ring>,
    /// Notified when the flushed ticket advances.
    ready: Condvar,
    /// INFO: batches appended, batches served from memory, restarts after a gap.
    pub appended: AtomicU64,
    pub served: AtomicU64,
    pub gaps: AtomicU64,
}

/// A feeder's registration; the ring stops recording (and empties) when the last one drops.
pub struct Following<'a>(&'a Backlog);

impl Drop for Following<'_> {
    fn drop(&mut self) {
        if self.0.followers.fetch_sub(1, Relaxed) == 1 {
            self.0.ring.lock().clear(0);
        }
    }
}

/// A recording commit's hold on the order; see [`Backlog::append`].
pub struct Order<'a>(#[allow(dead_code)] MutexGuard<'a, ()>);

impl Backlog {
    pub fn set_capacity(&self, bytes: u64) {
        self.capacity.store(bytes, Relaxed);
        if bytes == 0 {
            self.ring.lock().clear(0);
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity.load(Relaxed)
    }

    /// Bytes of WriteBatches held.
    pub fn bytes(&self) -> u64 {
        self.ring.lock().bytes
    }

    /// Registers a feeder (the ring records while one is registered).
    pub fn follow(&self) -> Following<'_> {
        self.followers.fetch_add(1, Relaxed);
        Following(self)
    }

    /// Whether the ring is on and followed; a feeder reads the WAL when it is not.
    pub fn recording(&self) -> bool {
        self.capacity.load(Relaxed) > 0 && self.followers.load(Relaxed) > 0
    }

    /// The order hold a commit takes before reading the latest sequence number, if the ring
    /// records; `None`: commit without it.
    pub fn begin(&self) -> Option<Order<'_>> {
        self.recording().then(|| Order(self.order.lock()))
    }

    /// Appends a committed batch: `before` and `after` are the latest sequence numbers read
    /// just before and after its write (under `order`), `count` its writes. A batch that did not
    /// take exactly the numbers after the previous one restarts the ring.
    pub fn append(
        &self,
        _order: Order<'_>,
        (before, after): (u64, u64),
        count: u64,
        ticket: u64,
        data: Arc<[u8]>,
    ) {
        let mut r = self.ring.lock();
        if after != before + count {
            // Another write took numbers in between: this batch's own are unknown.
            self.gaps.fetch_add(1, Relaxed);
            r.clear(after + 1);
            return;
        }
        if count == 0 {
            return;
        }
        if r.next != before + 1 {
            if r.next != 0 {
                self.gaps.fetch_add(1, Relaxed);
            }
            r.clear(before + 1);
        }
        let entry = Entry {
            seq: before + 1,
            count,
            ticket,
            data,
        };
        r.bytes += entry.data.len() as u64;
        r.next = after + 1;
        r.entries.push_back(entry);
        let cap = self.capacity.load(Relaxed);
        while r.bytes > cap {
            match r.entries.pop_front() {
                Some(old) => r.bytes -= old.data.len() as u64,
                None => break,
            }
        }
        if r.entries.is_empty() {
            r.bytes = 0;
        }
        self.appended.fetch_add(1, Relaxed);
    }

    /// Every ticket up to `ticket` is in the WAL file now: wakes the feeders.
    pub fn flushed(&self, ticket: u64) {
        if !self.recording() {
            return;
        }
        let mut r = self.ring.lock();
        if ticket > r.flushed {
            r.flushed = ticket;
            self.ready.notify_all();
        }
    }

    /// Copies into `out` the servable batches after `after`, up to about `max_bytes`.
    pub fn look(&self, after: u64, max_bytes: u64, out: &mut Vec<Entry>) -> Look {
        if !self.recording() {
            return Look::Elsewhere;
        }
        let r = self.ring.lock();
        let look = Self::collect(&r, after, max_bytes, out);
        if let Look::Ready = look {
            self.served.fetch_add(out.len() as u64, Relaxed);
        }
        look
    }

    /// Waits up to `timeout` for a batch after `after` to become servable (returns at once if
    /// one is, or if the ring no longer covers `after + 1`).
    pub fn wait(&self, after: u64, timeout: Duration) {
        let mut r = self.ring.lock();
        if let Look::Nothing | Look::Unflushed = Self::collect(&r, after, 0, &mut Vec::new()) {
            self.ready.wait_for(&mut r, timeout);
        }
    }

    fn collect(r: &Ring, after: u64, max_bytes: u64, out: &mut Vec<Entry>) -> Look {
        let want = after + 1;
        if r.next == 0 || want < r.start() || want > r.next {
            return Look::Elsewhere;
        }
        if want == r.next {
            return Look::Nothing;
        }
        // Entries are contiguous: the one holding `want` is found by its sequence number.
        let i = r.entries.partition_point(|e| e.last() < want);
        if r.entries.get(i).is_none_or(|e| e.seq != want) {
            return Look::Elsewhere; // inside a batch: not a position a feeder can hold
        }
        let mut bytes = 0;
        for e in r.entries.range(i..) {
            if (e.ticket > r.flushed) || (bytes > 0 && bytes >= max_bytes) {
                break;
            }
            bytes += e.data.len() as u64;
            out.push(e.clone());
        }
        if out.is_empty() {
            Look::Unflushed
        } else {
            Look::Ready
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(cap: u64) -> Backlog {
        let b = Backlog::default();
        b.set_capacity(cap);
        b
    }

    fn add(b: &Backlog, before: u64, count: u64, ticket: u64) {
        let order = b.begin().expect("recording");
        b.append(
            order,
            (before, before + count),
            count,
            ticket,
            Arc::from(&[0u8; 10][..]),
        );
    }

    fn seqs(b: &Backlog, after: u64) -> (bool, Vec<u64>) {
        let mut out = Vec::new();
        let ready = matches!(b.look(after, u64::MAX, &mut out), Look::Ready);
        (ready, out.iter().map(|e| e.seq).collect())
    }

    #[test]
    fn serves_contiguous_flushed_batches_and_sends_the_rest_to_the_wal() {
        let b = ring(1 << 20);
        let _f = b.follow();
        add(&b, 10, 2, 1); // 11..=12
        add(&b, 12, 1, 2); // 13
        add(&b, 13, 3, 3); // 14..=16
        assert!(matches!(b.look(10, 1, &mut Vec::new()), Look::Unflushed));
        b.flushed(2);
        assert_eq!(seqs(&b, 10), (true, vec![11, 13]));
        assert_eq!(seqs(&b, 12), (true, vec![13]));
        assert!(matches!(b.look(13, 1, &mut Vec::new()), Look::Unflushed));
        b.flushed(3);
        assert_eq!(seqs(&b, 13), (true, vec![14]));
        assert!(matches!(b.look(16, 1, &mut Vec::new()), Look::Nothing));
        // Behind the start, ahead of the end, or inside a batch: the WAL.
        for after in [5, 9, 11, 17] {
            assert!(matches!(b.look(after, 1, &mut Vec::new()), Look::Elsewhere));
        }
    }

    #[test]
    fn a_gap_restarts_the_ring_and_the_size_bound_drops_the_oldest() {
        let b = ring(25);
        let _f = b.follow();
        add(&b, 0, 1, 1);
        add(&b, 1, 1, 2);
        add(&b, 2, 1, 3); // 30 bytes > 25: batch 1 goes
        b.flushed(3);
        assert!(matches!(b.look(0, 1, &mut Vec::new()), Look::Elsewhere));
        assert_eq!(seqs(&b, 1), (true, vec![2, 3]));
        add(&b, 4, 1, 4); // sequence 4 was written elsewhere
        b.flushed(4);
        assert_eq!(b.gaps.load(Relaxed), 1);
        assert!(matches!(b.look(3, 1, &mut Vec::new()), Look::Elsewhere));
        assert_eq!(seqs(&b, 4), (true, vec![5]));
        // A write interleaved with the commit's reads: nothing is known, the ring restarts.
        let order = b.begin().unwrap();
        b.append(order, (5, 8), 2, 5, Arc::from(&[0u8; 10][..]));
        assert!(matches!(b.look(5, 1, &mut Vec::new()), Look::Elsewhere));
        assert!(matches!(b.look(8, 1, &mut Vec::new()), Look::Nothing));
    }

    #[test]
    fn records_only_while_followed_and_on() {
        let b = ring(1 << 20);
        assert!(b.begin().is_none());
        let f = b.follow();
        add(&b, 0, 1, 1);
        drop(f);
        assert_eq!(b.bytes(), 0);
        let _f = b.follow();
        b.set_capacity(0);
        assert!(b.begin().is_none());
    }
}
