//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP): the
//! registry of blocked clients and the code that serves them.
//!
//! A blocking command's handler is written like its non-blocking twin and is also the code that
//! serves it later. It parses every argument first, takes the stripe locks of its keys and tries
//! to serve; if there is nothing to take it calls [`Ctx::block_on`] while it still holds the
//! locks. Outside MULTI/EXEC that registers the client as a waiter on those keys (FIFO per key)
//! and writes nothing; the worker then hands the connection's session back to its I/O thread
//! marked [`Session::blocked`], and the I/O thread parks the connection: it runs nothing more of
//! it (pipelined commands wait, as in Redis) and holds no worker until the client is served,
//! times out, is unblocked (CLIENT UNBLOCK), killed or disconnects.
//!
//! Waking: the [`Blocking`] registry is a storage [`WriteObserver`]. A commit that puts a list or
//! a sorted set that somebody waits on (any command: LPUSH, ZADD, LMOVE's destination, RENAME,
//! RESTORE, EXEC...) notes the key as ready in a thread-local list; registration happens under
//! the key's stripe lock, and so does the commit, so no wakeup is lost. After each top-level
//! command (its locks released) the worker calls [`serve_ready`]: for each ready key, for each of
//! its waiters in arrival order, it claims the waiter and re-runs the waiter's own handler (same
//! arguments, the waiter's database and protocol); [`Ctx::block_on`] in that re-run means "still
//! nothing": the waiter is released and keeps its place. Otherwise the reply goes to the waiter's
//! I/O thread ([`crate::net::IoHandle::notify_unblocked`]). A claimed waiter cannot be timed out
//! or unblocked until its re-run is over, so a timeout never races an element away.
//!
//! Like Redis 7.0, a waiter is woken only by its own kind of key (a list for the list commands,
//! a sorted set for the BZ* ones): a blocked BLPOP stays blocked when its key becomes a string.

use crate::clients::ClientInfo;
use crate::cmd::ctx::{CmdError, CmdResult, Ctx, Mode, Reply};
use crate::server::Server;
use crate::session::Session;
use crate::storage::encoding::Kind;
use crate::storage::WriteObserver;
use bytes::Bytes;
use kvik_resp::{encode, Proto};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const STILL_BLOCKED: &str = "KVIKINTERNAL still blocked";

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

/// Parses a blocking command's timeout (seconds, decimals allowed, as Redis's
/// `getTimeoutFromObjectOrReply`) into a deadline in Unix ms; 0 means "block forever" (so does a
/// timeout below one millisecond, as in Redis).
pub fn parse_timeout(arg: &[u8]) -> Result<u64, CmdError> {
    parse_timeout_at(arg, crate::clock::unix_ms())
}

fn parse_timeout_at(arg: &[u8], now_ms: u64) -> Result<u64, CmdError> {
    let secs = match kvik_resp::parse_redis_double(arg) {
        Some(v) => v,
        // Redis reads a long double, so a value beyond a double's range (1e400) is a number
        // there; converted to milliseconds it overflows to a negative integer.
        None => match std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
        {
            Some(v) if v.is_infinite() && !arg.is_empty() && !arg[0].is_ascii_whitespace() => v,
            _ => return Err(CmdError::err("timeout is not a float or out of range")),
        },
    };
    let ms = secs * 1000.0;
    // C's (long long) cast of an out-of-range value gives LLONG_MIN on x86: "negative".
    let ms: i64 = if ms.is_finite() && ms > -9.2e18 && ms < 9.2e18 {
        ms as i64
    } else {
        i64::MIN
    };
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if ms == 0 {
        return Ok(0);
    }
    Ok(now_ms.saturating_add(ms as u64))
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
struct Waiter {
    keys: Vec<Vec<u8>>,
    args: Vec<Bytes>,
    db: u16,
    proto: Proto,
    client: Arc<ClientInfo>,
    timeout: TimeoutReply,
    /// The kind of key that can serve it.
    kind: Kind,
    /// A worker is re-running its command right now.
    claimed: bool,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// (db, key) -> waiter ids in arrival order.
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

    /// Registers a waiter; returns its id. The caller holds the stripe locks of `keys`.
    fn register(
        &self,
        keys: Vec<Vec<u8>>,
        args: Vec<Bytes>,
        session: &Session,
        timeout: TimeoutReply,
    ) -> u64 {
        let kind = if args[0].len() >= 2 && args[0][..2].eq_ignore_ascii_case(b"bz") {
            Kind::ZSet
        } else {
            Kind::List
        };
        let mut inner = self.inner.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        for k in &keys {
            let q = inner.keys.entry((session.db, k.clone())).or_default();
            if !q.contains(&id) {
                q.push_back(id);
            }
        }
        inner.by_client.insert(session.client.id, id);
        inner.waiters.insert(
            id,
            Waiter {
                keys,
                args,
                db: session.db,
                proto: session.proto,
                client: session.client.clone(),
                timeout,
                kind,
                claimed: false,
            },
        );
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
        w.client.io.notify_unblocked(w.client.id, out);
        true
    }

    /// Claims the first unclaimed waiter of (db, key) that a key of `kind` can serve.
    fn claim_next(&self, db: u16, key: &[u8], kind: Kind) -> Option<(u64, Claimed)> {
        let mut inner = self.inner.lock();
        let Inner { keys, waiters, .. } = &mut *inner;
        let q = keys.get(&(db, key.to_vec()))?;
        for id in q {
            let w = waiters.get_mut(id).expect("queued waiter exists");
            if !w.claimed && w.kind == kind {
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
    fn release(&self, id: u64, served: bool) {
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

/// What a worker needs to re-run a claimed waiter's command.
struct Claimed {
    args: Vec<Bytes>,
    db: u16,
    proto: Proto,
    client: Arc<ClientInfo>,
    timeout: TimeoutReply,
}

impl WriteObserver for Blocking {
    fn keys_written(&self, keys: &[(u16, &[u8], Option<Kind>)]) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let inner = self.inner.lock();
        for &(db, key, kind) in keys {
            if !matches!(kind, Some(Kind::List) | Some(Kind::ZSet)) {
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

/// Serves the clients blocked on keys that this thread's last command made ready (called by the
/// worker after each top-level command, with no key lock held). Cheap when nothing is ready.
pub fn serve_ready(server: &Server) {
    loop {
        let ready = READY.with(|r| std::mem::take(&mut *r.borrow_mut()));
        if ready.is_empty() {
            return;
        }
        for (db, key) in ready {
            serve_key(server, db, &key);
        }
    }
}

fn serve_key(server: &Server, db: u16, key: &[u8]) {
    let registry = &server.blocking;
    loop {
        let kind = match server.storage.get_live(db, key, crate::clock::unix_ms()) {
            Ok(Some(m)) if matches!(m.kind, Kind::List | Kind::ZSet) => m.kind,
            _ => return, // ran dry, or no longer a key anyone waits on
        };
        let Some((id, w)) = registry.claim_next(db, key, kind) else {
            return;
        };
        match rerun(server, id, &w) {
            Some(reply) => {
                registry.release(id, true);
                w.client.io.notify_unblocked(w.client.id, reply);
            }
            None => {
                registry.release(id, false);
                return;
            }
        }
    }
}

/// Re-runs a waiter's command; `None` if it would still block.
fn rerun(server: &Server, id: u64, w: &Claimed) -> Option<Vec<u8>> {
    let entry = crate::cmd::table().resolve(&w.args).ok()?;
    let mut session = Session::new(w.client.clone(), true);
    session.db = w.db;
    session.proto = w.proto;
    session.blocked = Some(Blocked {
        waiter: id,
        deadline_ms: 0,
        timeout: w.timeout,
        serving: true,
    });
    let mut out = Reply::new(w.proto);
    let result = {
        let mut ctx = Ctx {
            server,
            session: &mut session,
            out: &mut out,
            now_ms: crate::clock::unix_ms(),
            mode: Mode::Normal,
            deferred_hits: Default::default(),
            args: &w.args,
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (entry.spec.handler)(&mut ctx, &w.args)
        }))
        .unwrap_or_else(|_| Err(CmdError::err("internal error while running the command")))
    };
    match result {
        Ok(()) => Some(out.buf),
        Err(e) if e.0 == STILL_BLOCKED => None,
        Err(e) => {
            out.buf.clear();
            out.error(&e.0);
            Some(out.buf)
        }
    }
}

impl Ctx<'_> {
    /// Blocks the client on `keys` (see the module doc): call it from a blocking command's
    /// handler, holding the keys' stripe locks, when there is nothing to take. Inside MULTI/EXEC
    /// it writes the timeout reply at once (Redis never blocks there). `deadline_ms` comes from
    /// [`parse_timeout`] (0 = forever).
    pub fn block_on<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
        deadline_ms: u64,
        timeout: TimeoutReply,
    ) -> CmdResult {
        if self.session.in_exec {
            timeout.encode(&mut self.out.buf, self.out.proto);
            return Ok(());
        }
        if self.session.blocked.is_some_and(|b| b.serving) {
            return Err(CmdError::full(STILL_BLOCKED));
        }
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_ref().to_vec()).collect();
        let args = self.args.to_vec();
        let id = self
            .server
            .blocking
            .register(keys, args, self.session, timeout);
        self.session.blocked = Some(Blocked {
            waiter: id,
            deadline_ms,
            timeout,
            serving: false,
        });
        Ok(())
    }

    /// True while a worker re-runs a blocked client's command to serve it.
    pub fn serving_waiter(&self) -> bool {
        self.session.blocked.is_some_and(|b| b.serving)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_parsing_matches_redis() {
        let now = 1_000_000;
        assert_eq!(parse_timeout_at(b"0", now), Ok(0));
        assert_eq!(parse_timeout_at(b"1", now), Ok(now + 1000));
        assert_eq!(parse_timeout_at(b"0.5", now), Ok(now + 500));
        assert_eq!(parse_timeout_at(b".5", now), Ok(now + 500));
        assert_eq!(parse_timeout_at(b"0x10", now), Ok(now + 16000));
        // Below a millisecond rounds to 0: forever, as in Redis.
        assert_eq!(parse_timeout_at(b"0.0001", now), Ok(0));
        assert_eq!(parse_timeout_at(b"-0.0001", now), Ok(0));
        let not_float = Err(CmdError::err("timeout is not a float or out of range"));
        let negative = Err(CmdError::err("timeout is negative"));
        for bad in [&b"abc"[..], b"", b" 1", b"1 ", b"nan", b"1e"] {
            assert_eq!(parse_timeout_at(bad, now), not_float, "{bad:?}");
        }
        for neg in [&b"-1"[..], b"inf", b"-inf", b"1e17", b"1e400"] {
            assert_eq!(parse_timeout_at(neg, now), negative, "{neg:?}");
        }
    }
}
