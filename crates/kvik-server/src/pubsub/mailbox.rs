//! A subscriber's mailbox: the pub/sub messages published to a client and not yet moved to its
//! connection's output buffer. It imports nothing of the server, so a client's shared record
//! ([`crate::clients::ClientInfo`]) can hold one.
//!
//! Publishers on any thread append encoded messages under a short mutex; only the append that
//! finds the mailbox unscheduled asks its caller to wake the owning I/O thread, so a flood of
//! messages costs one wakeup per drain, not one per message. The I/O thread takes the whole
//! buffer at once ([`Mailbox::take`]) when the connection's output is its own (not while a job
//! runs its commands: the job's replies, such as SUBSCRIBE's confirmation, come first).

use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Default)]
pub struct Mailbox {
    inner: Mutex<Inner>,
    /// Bytes waiting, readable without the lock (output limit checks, the empty fast path).
    len: AtomicUsize,
}

#[derive(Default)]
struct Inner {
    buf: Vec<u8>,
    /// The owner's I/O thread was told and has not drained the mailbox since.
    scheduled: bool,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mailbox({} bytes)", self.len())
    }
}

impl Mailbox {
    /// Appends one encoded message. Returns true if the owner's I/O thread must be woken (no
    /// wakeup is pending for it yet).
    pub fn push(&self, message: &[u8]) -> bool {
        let mut inner = self.inner.lock();
        inner.buf.extend_from_slice(message);
        self.len.store(inner.buf.len(), Ordering::Release);
        !std::mem::replace(&mut inner.scheduled, true)
    }

    /// Takes everything waiting, in publish order, and clears the wakeup mark.
    pub fn take(&self) -> Vec<u8> {
        // Both change together under the lock: an empty mailbox has no wakeup pending.
        if self.len.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut inner = self.inner.lock();
        inner.scheduled = false;
        self.len.store(0, Ordering::Release);
        std::mem::take(&mut inner.buf)
    }

    /// Bytes waiting.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A client's subscription counts (CLIENT LIST `sub`, `psub`, `ssub`), kept by its session and
/// read by its I/O thread, which applies the `pubsub` output limit class while any is non-zero.
#[derive(Debug, Default)]
pub struct SubCounts {
    pub channels: AtomicUsize,
    pub patterns: AtomicUsize,
    pub shard: AtomicUsize,
}

impl SubCounts {
    /// Subscribed to anything (Redis's `CLIENT_PUBSUB` flag).
    pub fn any(&self) -> bool {
        self.channels.load(Ordering::Relaxed) > 0
            || self.patterns.load(Ordering::Relaxed) > 0
            || self.shard.load(Ordering::Relaxed) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wakeup_per_drain_and_order_kept() {
        let m = Mailbox::default();
        assert!(m.push(b"a"));
        assert!(!m.push(b"b"));
        assert_eq!(m.len(), 2);
        assert_eq!(m.take(), b"ab");
        assert!(m.is_empty());
        assert!(m.push(b"c"));
        assert_eq!(m.take(), b"c");
        assert_eq!(m.take(), b"");
        assert!(m.push(b"d"));
    }
}
