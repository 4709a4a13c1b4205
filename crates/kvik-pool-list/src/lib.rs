//! The worker pool's task list: many producers push without a lock, a consumer takes the whole
//! list at once and gets it back in arrival order. kvik-client's connections queue their callers'
//! commands in the same list (the flusher takes everything queued and writes it in one call).
//!
//! # How it works
//!
//! The list is a singly linked stack of heap nodes whose top is one atomic pointer, `newest`.
//! A producer links its node on top with a compare-and-swap loop (a Treiber push). A consumer
//! never pops one node: it swaps `newest` for null, which hands it every node pushed so far as
//! a private chain, newest first. It reverses that chain in place (no allocation) and yields
//! the values oldest first. Because nodes leave the shared list only all together, no node is
//! ever freed while another thread can still reach it, so the usual hazards of lock-free stacks
//! (ABA, use after free) cannot occur: nothing is ever popped from the middle of a live list.
//!
//! This is the shape of RocksDB's `newest_writer_` list and of the lists in Pika's pool
//! (PR #2648), written anew for kvik. The waiting (spin, yield, park) lives in kvik-server's
//! `pool::adaptive`; this crate is only the list, so that loom can model-check it without
//! building RocksDB (see `tests/loom.rs`).
//!
//! # Fields and orderings
//!
//! - `newest`: written by producers (CAS, `SeqCst` on success so the store is in the single
//!   total order the pool's sleep/wake handshake relies on; `Release` would be enough for the
//!   list alone, and costs the same `lock cmpxchg` on x86) and by consumers (`swap`, `SeqCst`,
//!   which includes the `Acquire` that makes each node's contents visible).
//! - a node's `older` and `value`: written only by the producer before the CAS publishes the
//!   node, read only by the consumer that took the chain. Never shared after that.
//! - `len`: an upper bound on the number of nodes, for backpressure. A producer adds 1 *before*
//!   pushing and a consumer subtracts what it took *after* taking, so it never underflows and
//!   is never below the true count. `SeqCst`, for the same handshake reason as `newest`.
//!
//! # Order
//!
//! Values from one producer come out in the order that producer pushed them, as long as they
//! went to the same list: each push happens after the previous one, so it lands above it.
//! Between producers the order is the order of their successful CASes.

#![deny(missing_docs)]

#[cfg(loom)]
use loom::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::ptr;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};

struct Node<T> {
    value: T,
    /// The node pushed just before this one (toward the oldest); after a consumer reverses its
    /// chain, the next node to yield.
    link: *mut Node<T>,
}

/// A multi-producer task list; see the [crate docs](crate).
pub struct TaskList<T> {
    newest: AtomicPtr<Node<T>>,
    len: AtomicUsize,
}

// SAFETY: the list owns its nodes' values and moves them to whichever thread takes them, so it
// may be shared or sent between threads exactly when the values may be sent. Raw node pointers
// are reached only through the atomic `newest` (publication) or by the one consumer that took
// them out of it.
unsafe impl<T: Send> Send for TaskList<T> {}
// SAFETY: as above; `&TaskList` only allows push (moves a value in) and take (moves values out).
unsafe impl<T: Send> Sync for TaskList<T> {}

impl<T> Default for TaskList<T> {
    fn default() -> Self {
        TaskList::new()
    }
}

impl<T> std::fmt::Debug for TaskList<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskList")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl<T> TaskList<T> {
    /// An empty list.
    pub fn new() -> TaskList<T> {
        TaskList {
            newest: AtomicPtr::new(ptr::null_mut()),
            len: AtomicUsize::new(0),
        }
    }

    /// Adds `value` on top of the list; lock-free (a CAS loop that retries only when another
    /// producer or a consumer changed the top in between).
    pub fn push(&self, value: T) -> Pushed {
        let n = self.len.fetch_add(1, SeqCst) + 1;
        let node = Box::into_raw(Box::new(Node {
            value,
            link: ptr::null_mut(),
        }));
        let mut top = self.newest.load(SeqCst);
        loop {
            // SAFETY: `node` came from Box::into_raw above and is not yet published, so this
            // thread is its only user.
            unsafe { (*node).link = top };
            match self.newest.compare_exchange_weak(top, node, SeqCst, SeqCst) {
                Ok(_) => {
                    return Pushed {
                        len: n,
                        was_empty: top.is_null(),
                    }
                }
                Err(now) => top = now,
            }
        }
    }

    /// Takes every value pushed so far, oldest first. The list is empty afterwards (until the
    /// next push). Several consumers may call this at once: each value goes to exactly one.
    pub fn take_all(&self) -> Batch<T> {
        let mut chain = self.newest.swap(ptr::null_mut(), SeqCst);
        // Reverse newest-first into oldest-first, in place.
        let mut oldest_first: *mut Node<T> = ptr::null_mut();
        let mut count = 0;
        while !chain.is_null() {
            // SAFETY: the swap above made this chain private to this thread: every node in it
            // was published by a completed CAS (so fully written) and no other thread can reach
            // it any more.
            let next = unsafe { (*chain).link };
            // SAFETY: as above.
            unsafe { (*chain).link = oldest_first };
            oldest_first = chain;
            chain = next;
            count += 1;
        }
        if count > 0 {
            self.len.fetch_sub(count, SeqCst);
        }
        Batch {
            next: oldest_first,
            remaining: count,
        }
    }

    /// Whether the list is empty now (`SeqCst` load of the top).
    pub fn is_empty(&self) -> bool {
        self.newest.load(SeqCst).is_null()
    }

    /// An upper bound on the number of values in the list now (exact when no push or take is
    /// in progress).
    pub fn len(&self) -> usize {
        self.len.load(SeqCst)
    }
}

impl<T> Drop for TaskList<T> {
    fn drop(&mut self) {
        drop(self.take_all());
    }
}

/// What [`TaskList::push`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The length bound including this value.
    pub len: usize,
    /// The list was empty just before this value went in: this push made it non-empty. Only
    /// such a push needs to wake a consumer that sleeps while the list is empty (one that went
    /// to sleep on an empty list was either woken by that push or saw the value first).
    pub was_empty: bool,
}

/// The values one [`TaskList::take_all`] took, oldest first. Dropping it drops the values not
/// yet taken out.
pub struct Batch<T> {
    next: *mut Node<T>,
    remaining: usize,
}

impl<T> Batch<T> {
    /// How many values are left in the batch.
    pub fn len(&self) -> usize {
        self.remaining
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }
}

impl<T> Iterator for Batch<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.next.is_null() {
            return None;
        }
        // SAFETY: the batch owns its private chain (see take_all); each node came from
        // Box::into_raw in push and is turned back into a Box exactly once, here.
        let node = unsafe { Box::from_raw(self.next) };
        self.next = node.link;
        self.remaining -= 1;
        Some(node.value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> ExactSizeIterator for Batch<T> {}

impl<T> Drop for Batch<T> {
    fn drop(&mut self) {
        for _ in self.by_ref() {}
    }
}

impl<T> std::fmt::Debug for Batch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("remaining", &self.remaining)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn take_all_returns_arrival_order_and_empties() {
        let list = TaskList::new();
        assert!(list.is_empty());
        for i in 0..5 {
            let pushed = list.push(i);
            assert_eq!(pushed.len, i + 1);
            assert_eq!(pushed.was_empty, i == 0);
        }
        assert_eq!(list.len(), 5);
        let batch = list.take_all();
        assert_eq!(batch.len(), 5);
        assert_eq!(batch.collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        assert!(list.is_empty());
        assert_eq!(list.len(), 0);
        assert_eq!(list.take_all().count(), 0);
    }

    #[test]
    fn dropping_list_or_batch_drops_values() {
        let token = Arc::new(());
        let list = TaskList::new();
        for _ in 0..10 {
            list.push(token.clone());
        }
        let mut batch = list.take_all();
        batch.next();
        drop(batch);
        for _ in 0..3 {
            list.push(token.clone());
        }
        drop(list);
        assert_eq!(Arc::strong_count(&token), 1);
    }

    /// Many producers, several consumers: every value comes out exactly once, and each
    /// producer's values come out in the order it pushed them.
    #[test]
    fn concurrent_producers_and_consumers_lose_nothing_and_keep_producer_order() {
        const PRODUCERS: usize = 8;
        const PER: usize = 20_000;
        let list: Arc<TaskList<(usize, usize)>> = Arc::new(TaskList::new());
        let done = Arc::new(AtomicUsize::new(0));
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let list = list.clone();
                let done = done.clone();
                std::thread::spawn(move || {
                    let mut got: Vec<Vec<usize>> = vec![Vec::new(); PRODUCERS];
                    loop {
                        let finished = done.load(SeqCst) == PRODUCERS;
                        for (p, seq) in list.take_all() {
                            got[p].push(seq);
                        }
                        if finished && list.is_empty() {
                            return got;
                        }
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let list = list.clone();
                let done = done.clone();
                std::thread::spawn(move || {
                    for seq in 0..PER {
                        list.push((p, seq));
                    }
                    done.fetch_add(1, SeqCst);
                })
            })
            .collect();
        for t in producers {
            t.join().unwrap();
        }
        let mut all: Vec<Vec<usize>> = vec![Vec::new(); PRODUCERS];
        for c in consumers {
            for (p, seqs) in c.join().unwrap().into_iter().enumerate() {
                // Within one consumer, each batch is in order and batches are taken in order.
                assert!(
                    seqs.windows(2).all(|w| w[0] < w[1]),
                    "producer {p} reordered"
                );
                all[p].extend(seqs);
            }
        }
        for (p, mut seqs) in all.into_iter().enumerate() {
            seqs.sort_unstable();
            assert_eq!(seqs, (0..PER).collect::<Vec<_>>(), "producer {p}");
        }
        assert_eq!(list.len(), 0);
    }
}
