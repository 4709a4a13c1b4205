//! The submission queue: a lock-free multi-producer stack whose consumer takes everything at
//! once and restores arrival order.
//!
//! DESIGN
//!
//! Producers (callers) push with one compare-and-swap on `head`. The flusher swaps `head` to
//! null, which hands it the whole list in one atomic step, then reverses it (the stack is
//! newest-first). There is no per-node pop, so the ABA problem of Treiber stacks cannot arise:
//! a push's CAS only ever links its node in front of the exact pointer it compares against,
//! whatever that node's history.
//!
//! Orderings: push and take use SeqCst, and so does `is_empty`. The connection's lost-wakeup
//! check ("release the flusher flag, then look at the queue" against "push, then try to take
//! the flag") is a store-load pattern on two locations; only SeqCst on both sides rules out both
//! threads missing each other.

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

struct Node<T> {
    value: T,
    next: *mut Node<T>,
}

/// Multi-producer stack with take-all; see the module docs.
pub(crate) struct TakeAllQueue<T> {
    head: AtomicPtr<Node<T>>,
}

// SAFETY: nodes are owned by the queue between push and take; values move between threads, so
// `T: Send` is required and sufficient.
unsafe impl<T: Send> Send for TakeAllQueue<T> {}
// SAFETY: all shared access goes through the atomic head; see above.
unsafe impl<T: Send> Sync for TakeAllQueue<T> {}

impl<T> TakeAllQueue<T> {
    pub(crate) fn new() -> Self {
        TakeAllQueue {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    pub(crate) fn push(&self, value: T) {
        let node = Box::into_raw(Box::new(Node {
            value,
            next: ptr::null_mut(),
        }));
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` is ours until the CAS publishes it.
            unsafe { (*node).next = head };
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Appends every queued value to `out`, oldest first.
    pub(crate) fn take_all(&self, out: &mut Vec<T>) {
        let mut p = self.head.swap(ptr::null_mut(), Ordering::SeqCst);
        let start = out.len();
        while !p.is_null() {
            // SAFETY: the swap made this list exclusively ours; each node came from
            // Box::into_raw in push and is freed exactly once here.
            let node = unsafe { Box::from_raw(p) };
            p = node.next;
            out.push(node.value);
        }
        out[start..].reverse();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::SeqCst).is_null()
    }
}

impl<T> Drop for TakeAllQueue<T> {
    fn drop(&mut self) {
        let mut rest = Vec::new();
        self.take_all(&mut rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_per_take_and_nothing_lost_under_contention() {
        let q = Arc::new(TakeAllQueue::new());
        q.push(1u64);
        q.push(2);
        q.push(3);
        let mut out = Vec::new();
        q.take_all(&mut out);
        assert_eq!(out, vec![1, 2, 3]);
        assert!(q.is_empty());

        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        q.push(t * 1_000_000 + i);
                    }
                })
            })
            .collect();
        let mut seen = Vec::new();
        while seen.len() < 40_000 {
            let before = seen.len();
            q.take_all(&mut seen);
            if seen.len() == before {
                std::thread::yield_now();
            }
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        q.take_all(&mut seen);
        assert_eq!(seen.len(), 40_000);
        // Each producer's values come out in its push order.
        for t in 0..4u64 {
            let mine: Vec<u64> = seen
                .iter()
                .copied()
                .filter(|v| v / 1_000_000 == t)
                .collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(mine.len(), 10_000);
        }
    }
}
