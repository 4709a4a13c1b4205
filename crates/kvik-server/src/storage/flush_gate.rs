//! The flush gate: FLUSHDB and FLUSHALL wait for the writes in progress and hold off new ones.
//!
//! A write reads its keys' state and later commits what it worked out from it: HSET reads a
//! hash's length and writes it back one higher, RENAME copies a collection's members under a
//! new version and names that version last. A flush that fell in between erased the state the
//! write had read, and the write's commit then put a length over members that were gone, or
//! named a version only some of whose members survived ("set length mismatch", "list elements
//! missing"). In Redis both commands are atomic, so one of them comes first.
//!
//! Every thread that holds key stripes (`locks`) holds this gate shared, from before its first
//! stripe to after its last: the span of every read-modify-write. A flush holds it
//! exclusively, so it waits for those writes to commit and the next ones wait for it. A
//! writer blocked at the gate holds no stripe yet, so nothing the flush waits for waits on it.
//!
//! A flush by a thread that holds stripes itself (a script) cannot wait for the others while
//! it keeps them: another writer may be waiting for one of its stripes while holding the gate.
//! It lets go of its stripes and its share, closes the gate, and takes its stripes back at once
//! (nobody else holds one then); in between, other writers may write its keys, which the flush
//! then erases. EXEC avoids even that by closing the gate before it locks its keys when a flush
//! is queued. Fairness makes a waiting flush hold off new writers, so a stream of writes cannot
//! starve it.

use parking_lot::lock_api::{RawRwLock as _, RawRwLockRecursive as _, RawRwLockTimed as _};
use parking_lot::RawRwLock;
use std::cell::RefCell;
use std::time::Instant;

pub struct FlushGate {
    raw: RawRwLock,
}

/// What this thread holds of one gate.
#[derive(Clone, Copy, Default)]
struct Hold {
    /// Stripes of the gate's locks this thread holds.
    stripes: usize,
    /// The gate is held shared by this thread (it holds stripes and has not closed it).
    shared: bool,
    /// Nested [`FlushGate::close`] guards of this thread alive (0: not closed by it).
    closed: u32,
}

thread_local! {
    /// (gate address, what this thread holds of it): one entry per storage this thread uses.
    static HOLDS: RefCell<Vec<(usize, Hold)>> = const { RefCell::new(Vec::new()) };
}

/// The gate closed by this thread: no other thread holds a stripe until it is dropped.
#[must_use = "the gate opens again when this is dropped"]
pub struct Closed<'a> {
    gate: &'a FlushGate,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Default for FlushGate {
    fn default() -> Self {
        FlushGate {
            raw: RawRwLock::INIT,
        }
    }
}

impl FlushGate {
    fn id(&self) -> usize {
        self as *const FlushGate as usize
    }

    fn with_hold<T>(&self, f: impl FnOnce(&mut Hold) -> T) -> T {
        let id = self.id();
        HOLDS.with(|h| {
            let mut h = h.borrow_mut();
            let at = match h.iter().position(|(g, _)| *g == id) {
                Some(at) => at,
                None => {
                    h.push((id, Hold::default()));
                    h.len() - 1
                }
            };
            let out = f(&mut h[at].1);
            let hold = h[at].1;
            if hold.stripes == 0 && !hold.shared && hold.closed == 0 {
                h.swap_remove(at);
            }
            out
        })
    }

    /// Before this thread takes stripes: joins the gate's shared holders if it is not one yet
    /// (nor its closer), waiting for a flush in progress or waiting.
    pub fn enter(&self) {
        self.join(|raw| {
            raw.lock_shared();
            true
        });
    }

    /// [`FlushGate::enter`], giving up at `until` (`None`: at once); false if it gave up.
    pub fn try_enter_until(&self, until: Option<Instant>) -> bool {
        self.join(|raw| match until {
            None => raw.try_lock_shared(),
            Some(at) => raw.try_lock_shared_until(at),
        })
    }

    fn join(&self, lock: impl FnOnce(&RawRwLock) -> bool) -> bool {
        self.with_hold(|h| {
            if !h.shared && h.closed == 0 {
                h.shared = lock(&self.raw);
            }
            h.shared || h.closed > 0
        })
    }

    /// This thread took `n` stripes (after [`FlushGate::enter`]).
    pub fn took(&self, n: usize) {
        self.with_hold(|h| h.stripes += n);
    }

    /// This thread released `n` stripes (0 after an [`FlushGate::enter`] whose stripes it could
    /// not take): it leaves the gate once it holds none.
    pub fn released(&self, n: usize) {
        self.with_hold(|h| {
            h.stripes -= n;
            if h.stripes == 0 && h.shared {
                // SAFETY: `shared` is set only while this thread holds the lock shared.
                unsafe { self.raw.unlock_shared() };
                h.shared = false;
            }
        });
    }

    /// True if this thread holds the gate shared (it holds stripes and did not close it).
    pub fn shared_here(&self) -> bool {
        self.with_hold(|h| h.shared)
    }

    /// Closes the gate for a flush: waits until no other thread holds a stripe, and keeps new
    /// ones out until the guard is dropped. This thread must not hold it shared (see
    /// `locks::KeyLocks::close_gate`); closing it again while closed nests.
    pub fn close(&self) -> Closed<'_> {
        self.with_hold(|h| {
            if h.closed == 0 {
                assert!(!h.shared, "a stripe holder closing the flush gate");
                self.raw.lock_exclusive();
            }
            h.closed += 1;
        });
        Closed {
            gate: self,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for Closed<'_> {
    fn drop(&mut self) {
        let gate = self.gate;
        gate.with_hold(|h| {
            h.closed -= 1;
            if h.closed > 0 {
                return;
            }
            // SAFETY: `closed` went from 1 to 0: this thread took the lock exclusively.
            unsafe { gate.raw.unlock_exclusive() };
            if h.stripes > 0 {
                // Stripes taken while closed (EXEC's keys) are held on under a share.
                gate.raw.lock_shared_recursive();
                h.shared = true;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::sync::Arc;

    fn free_to_close(gate: &Arc<FlushGate>) -> bool {
        let g = gate.clone();
        std::thread::spawn(move || {
            g.raw.try_lock_exclusive() && {
                // SAFETY: taken just above by this thread.
                unsafe { g.raw.unlock_exclusive() };
                true
            }
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_flush_waits_for_a_stripe_holder_and_holds_off_the_next() {
        let gate = Arc::new(FlushGate::default());
        gate.enter();
        gate.took(2);
        let (closed_tx, closed_rx) = channel();
        let (open_tx, open_rx) = channel::<()>();
        let g = gate.clone();
        let flusher = std::thread::spawn(move || {
            let _closed = g.close();
            closed_tx.send(()).unwrap();
            open_rx.recv().unwrap();
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            closed_rx.try_recv().is_err(),
            "the flush waits for the holder"
        );
        gate.released(1);
        assert!(closed_rx.try_recv().is_err(), "still one stripe held");
        gate.released(1);
        closed_rx.recv().unwrap();
        let g = gate.clone();
        let late = std::thread::spawn(move || g.try_enter_until(None));
        assert!(
            !late.join().unwrap(),
            "a new writer is held off while closed"
        );
        open_tx.send(()).unwrap();
        flusher.join().unwrap();
        assert!(free_to_close(&gate));
    }

    #[test]
    fn stripes_taken_while_closed_are_held_shared_after_it_opens() {
        let gate = Arc::new(FlushGate::default());
        let c = gate.close();
        let nested = gate.close();
        assert!(gate.try_enter_until(None), "its own closed gate lets it in");
        gate.took(3);
        drop(nested);
        assert!(!free_to_close(&gate), "still closed by the outer guard");
        drop(c);
        assert!(gate.shared_here());
        assert!(!free_to_close(&gate), "held shared while it holds stripes");
        gate.released(3);
        assert!(free_to_close(&gate));
        HOLDS.with(|h| assert!(h.borrow().is_empty()));
    }
}
