//! The registry of blocked clients (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP, XREAD, XREADGROUP): who waits on which keys, in arrival order, and the claims that keep a
//! timeout from racing a worker that serves the waiter. The command side (blocking a client,
//! re-running its command when a key gets data) is `cmd::blocked`.
//!
//! Waking: the [`Blocking`] registry is a storage [`WriteObserver`]. A commit that puts a list,
//! a sorted set or a stream that somebody waits on (any command: LPUSH, ZADD, XADD, RENAME,
//! RESTORE, EXEC...) notes the key as ready for the committing thread ([`take_ready`] hands the
//! notes to the dispatcher, which returns them from the command that wrote); registration
//! happens under the key's stripe lock, and so does the commit, so no wakeup is lost. A claimed
//! waiter cannot be timed out or unblocked until its re-run is over.
//!
//! Like Redis 7.0, a waiter is woken only by its own kind of key (a list for the list commands,
//! a sorted set for the BZ* ones, a stream for XREAD and XREADGROUP): a blocked BLPOP stays
//! blocked when its key becomes a string.

use crate::clients::{ClientFlags, ClientInfo};
use crate::storage::encoding::Kind;
use crate::storage::WriteObserver;
use bytes::Bytes;
use kvik_resp::{encode, Proto};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What a blocked client receives when its timeout expires (or CLIENT UNBLOCK ... TIMEOUT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    /// `*-1` (RESP2) / `_` (RESP3): BLPOP, BRPOP, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP.
    NullArray,
    /// `$-1` (RESP2) / `_` (RESP3): BLMOVE, BRPOPLPUSH.
    NullBulk,
}

impl TimeoutReply {
    /// Appends the reply in protocol `proto`.
    pub fn encode(self, out: &mut Vec<u8>, proto: Proto) {
        match self {
            TimeoutReply::NullArray => encode::null_array(out, proto),
            TimeoutReply::NullBulk => encode::null(out, proto),
        }
    }
}

/// The state of a session whose command blocked (or, with `serving`, of the temporary session
/// a worker re-runs a waiter's command in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub waiter: u64,
    /// Unix ms; 0 = forever.
    pub deadline_ms: u64,
    pub timeout: TimeoutReply,
    /// True only inside [`serve_ready`]'s re-run of the waiter's command.
    pub serving: bool,
}

/// One blocked client.
pub(crate) struct Waiter {
    pub keys: Vec<Vec<u8>>,
    /// Its command, re-run to serve it.
    pub args: Vec<Bytes>,
    pub db: u16,
    pub proto: Proto,
    pub client: Arc<ClientInfo>,
    pub timeout: TimeoutReply,
    /// The kind of key that can serve it (a list for the list commands, a sorted set for the
    /// BZ* ones).
    pub kind: Kind,
    /// A worker is re-running its command right now.
    pub claimed: bool,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// (logical db, key) -> waiter ids in arrival order.
    keys: HashMap<(u16, Vec<u8>), VecDeque<u64>>,
    waiters: HashMap<u64, Waiter>,
    /// Client id -> its waiter id (CLIENT UNBLOCK).
    by_client: HashMap<u64, u64>,
}

impl Inner {
    fn remove(&mut self, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        for k in &w.keys {
            let slot = (w.db, k.clone());
            if let Some(q) = self.keys.get_mut(&slot) {
                q.retain(|&x| x != id);
                if q.is_empty() {
                    self.keys.remove(&slot);
                }
            }
        }
        if self.by_client.get(&w.client.id) == Some(&id) {
            self.by_client.remove(&w.client.id);
            w.client.state.set(ClientFlags::BLOCKED, false);
        }
        Some(w)
    }
}

/// What [`Blocking::cancel`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancel {
    /// The waiter was removed: nobody will serve it.
    Cancelled,
    /// A worker is re-running its command; try again later (its outcome will be known).
    Claimed,
    /// No such waiter: it was served (its reply is on its way) or already removed.
    Gone,
}

/// The registry of blocked clients.
#[derive(Default)]
pub struct Blocking {
    /// Number of waiters: the write observer's fast path is one load of it.
    count: AtomicUsize,
    inner: Mutex<Inner>,
}

thread_local! {
    /// Keys that got data while somebody waited on them, to serve after this thread's command.
    /// The write observer is called inside the commit, on the committing thread; the command
    /// that committed returns them (see `cmd::execute`).
    static READY: RefCell<Vec<(u16, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
}

impl Blocking {
    /// Number of blocked clients (INFO `blocked_clients`).
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a client is blocked on one of `keys` of logical database `db`. A writer that
    /// holds the keys' stripe locks gets a stable answer: a client blocks holding them too.
    pub fn waits_on_any<K: AsRef<[u8]>>(&self, db: u16, keys: &[K]) -> bool {
        if self.count.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let inner = self.inner.lock();
        keys.iter()
            .any(|k| inner.keys.contains_key(&(db, k.as_ref().to_vec())))
    }

    /// Registers a waiter; returns its id. The caller holds the stripe locks of `keys`.
    pub(crate) fn register(&self, mut waiter: Waiter) -> u64 {
        waiter.claimed = false;
        let mut inner = self.inner.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        for k in &waiter.keys {
            let q = inner.keys.entry((waiter.db, k.clone())).or_default();
            if !q.contains(&id) {
                q.push_back(id);
            }
        }
        inner.by_client.insert(waiter.client.id, id);
        waiter.client.state.set(ClientFlags::BLOCKED, true);
        inner.waiters.insert(id, waiter);
        self.count.fetch_add(1, Ordering::SeqCst);
        id
    }

    /// Removes waiter `id` unless a worker is serving it (timeout, disconnect, kill).
    pub fn cancel(&self, id: u64) -> Cancel {
        let mut inner = self.inner.lock();
        match inner.waiters.get(&id) {
            None => Cancel::Gone,
            Some(w) if w.claimed => Cancel::Claimed,
            Some(_) => {
                inner.remove(id);
                self.count.fetch_sub(1, Ordering::SeqCst);
                Cancel::Cancelled
            }
        }
    }

    /// CLIENT UNBLOCK: unblocks client `client_id` if it is blocked (and not being served this
    /// very moment), replying with its timeout reply or, with `error`, the UNBLOCKED error.
    /// Returns whether it did.
    pub fn unblock_client(&self, client_id: u64, error: bool) -> bool {
        let w = {
            let mut inner = self.inner.lock();
            let Some(&id) = inner.by_client.get(&client_id) else {
                return false;
            };
            if inner.waiters.get(&id).is_none_or(|w| w.claimed) {
                return false;
            }
            let w = inner.remove(id);
            self.count.fetch_sub(1, Ordering::SeqCst);
            w
        };
        let Some(w) = w else { return false };
        let mut out = Vec::new();
        if error {
            encode::error(&mut out, b"UNBLOCKED client unblocked via CLIENT UNBLOCK");
        } else {
            w.timeout.encode(&mut out, w.proto);
        }
        w.client.io().notify_unblocked(w.client.id, out);
        true
    }

    /// Claims the first unclaimed waiter of (db, key) that a key of `kind` can serve, passing
    /// over the waiters in `skip` (already tried for this write).
    pub(crate) fn claim_next(
        &self,
        db: u16,
        key: &[u8],
        kind: Kind,
        skip: &[u64],
    ) -> Option<(u64, Claimed)> {
        let mut inner = self.inner.lock();
        let Inner { keys, waiters, .. } = &mut *inner;
        let q = keys.get(&(db, key.to_vec()))?;
        for id in q {
            let w = waiters.get_mut(id).expect("queued waiter exists");
            if !w.claimed && w.kind == kind && !skip.contains(id) {
                w.claimed = true;
                return Some((
                    *id,
                    Claimed {
                        args: w.args.clone(),
                        db: w.db,
                        proto: w.proto,
                        client: w.client.clone(),
                        timeout: w.timeout,
                    },
                ));
            }
        }
        None
    }

    /// Ends a claim: `served` removes the waiter, otherwise it waits on, in its place.
    pub(crate) fn release(&self, id: u64, served: bool) {
        let mut inner = self.inner.lock();
        if served {
            if inner.remove(id).is_some() {
                self.count.fetch_sub(1, Ordering::SeqCst);
            }
        } else if let Some(w) = inner.waiters.get_mut(&id) {
            w.claimed = false;
        }
    }
}

impl Blocking {
    /// SWAPDB: every key waited on in logical databases `dbs` may now hold data; notes them
    /// ready for this thread's command to return (the re-run decides, as after any write).
    pub fn wake_dbs(&self, dbs: &[u16]) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let inner = self.inner.lock();
        READY.with(|r| {
            let mut r = r.borrow_mut();
            for slot in inner.keys.keys().filter(|(db, _)| dbs.contains(db)) {
                if !r.contains(slot) {
                    r.push(slot.clone());
                }
            }
        });
    }
}

/// What a worker needs to re-run a claimed waiter's command.
pub(crate) struct Claimed {
    pub args: Vec<Bytes>,
    pub db: u16,
    pub proto: Proto,
    pub client: Arc<ClientInfo>,
    pub timeout: TimeoutReply,
}

impl WriteObserver for Blocking {
    fn keys_touched(&self, keys: &[(u16, &[u8], Option<Kind>)]) {
        self.keys_written(keys);
    }

    fn keys_written(&self, keys: &[(u16, &[u8], Option<Kind>)]) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let inner = self.inner.lock();
        for &(db, key, kind) in keys {
            if !matches!(
                kind,
                Some(Kind::List) | Some(Kind::ZSet) | Some(Kind::Stream)
            ) {
                continue;
            }
            let slot = (db, key.to_vec());
            if inner.keys.contains_key(&slot) {
                READY.with(|r| {
                    let mut r = r.borrow_mut();
                    if !r.contains(&slot) {
                        r.push(slot);
                    }
                });
            }
        }
    }

    fn db_flushed(&self, _db: Option<u16>) {}
}

/// Takes the keys that this thread's last command made ready (see [`READY`]).
pub(crate) fn take_ready() -> Vec<(u16, Vec<u8>)> {
    READY.with(|r| std::mem::take(&mut *r.borrow_mut()))
}
