//! Server-assisted client-side caching (CLIENT TRACKING), as Redis 7.0.
//!
//! A client with tracking on is told when a key it may have cached changes:
//!
//! - default mode: every key a read-only command of the client names is remembered in the
//!   tracking table (key -> client ids; keys are not per database, as in Redis). The first write
//!   of the key sends one invalidation per remembering client and forgets the key, so a client
//!   hears about a key once per read. OPTIN remembers only after `CLIENT CACHING yes`, OPTOUT
//!   all but after `CLIENT CACHING no` (the flag lasts one command, or one transaction).
//! - BCAST: nothing is remembered; every write of a key under one of the client's prefixes
//!   (the empty prefix by default) is sent to it, one message per prefix and commit.
//!
//! Messages go where Redis sends them: a RESP3 client gets `>2 invalidate [keys]` pushes on its
//! own connection; with REDIRECT they go to the other client, as a push if it speaks RESP3 or as
//! a `__redis__:invalidate` pub/sub message if it is a RESP2 subscriber; a redirect to a client
//! that is gone sends `tracking-redir-broken` (RESP3) instead. FLUSHDB / FLUSHALL send every
//! tracking client the null invalidation and empty the table. NOLOOP skips the writes the client
//! made itself.
//!
//! Where it hooks in: [`Tracking`] is a storage [`WriteObserver`], so every committed write
//! (commands, scripts, EXEC, active expiry) invalidates without any handler knowing about it,
//! exactly like the hot cache, WATCH and blocked clients. The dispatcher calls
//! [`Tracking::remember`] *before* a read runs, so a write that races the read is always
//! followed by an invalidation (the push is queued behind the read's reply in the client's
//! mailbox, `pubsub::mailbox`, and reaches the client after it). Memory is bounded by
//! `tracking-table-max-keys`: past it, keys are forgotten with an invalidation to their
//! clients, as Redis does.

use crate::clients::{ClientFlags, ClientInfo, ClientRegistry};
use crate::storage::encoding::Kind;
use crate::storage::WriteObserver;
use parking_lot::{Mutex, RwLock};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Shards of the tracking table (by key hash), so readers of different keys do not contend.
const SHARDS: usize = 16;

/// The pub/sub channel a RESP2 client redirected to receives invalidations on.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// One client's tracking options (CLIENT TRACKING ON ...).
#[derive(Debug, Default)]
pub struct Mode {
    /// REDIRECT target id, 0 for none.
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// BCAST prefixes, in byte order.
    pub prefixes: Vec<Vec<u8>>,
    /// The redirect target was found gone (TRACKINGINFO `broken_redirect`, CLIENT LIST `R`).
    pub broken: AtomicBool,
}

thread_local! {
    /// The client whose command this thread runs (NOLOOP: its own writes are not sent to it).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// Records that this thread now runs a command of client `id` (0: no client, e.g. expiry).
pub fn set_current(id: u64) {
    CURRENT.with(|c| c.set(id));
}

type Table = HashMap<Box<[u8]>, Vec<u64>>;

/// The tracking registry: every tracking client's mode, the table of remembered keys and the
/// broadcast prefixes.
pub struct Tracking {
    clients: Arc<ClientRegistry>,
    modes: RwLock<HashMap<u64, Arc<Mode>>>,
    /// Clients with tracking on: the write path's fast exit is one load of it.
    active: AtomicUsize,
    table: Vec<Mutex<Table>>,
    /// Keys in the table (Redis's `tracking_total_keys`) and (key, client) pairs
    /// (`tracking_total_items`).
    keys: AtomicUsize,
    items: AtomicUsize,
    /// `tracking-table-max-keys`; 0 = no limit.
    max_keys: AtomicUsize,
    /// BCAST prefix -> client ids.
    prefixes: RwLock<BTreeMap<Vec<u8>, Vec<u64>>>,
}

impl std::fmt::Debug for Tracking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tracking({} clients)", self.clients_count())
    }
}

/// What an invalidation message carries.
#[derive(Clone, Copy)]
enum Payload<'a> {
    Keys(&'a [&'a [u8]]),
    /// FLUSHDB / FLUSHALL: the null of the tracking client's own protocol.
    Flush,
}

impl Tracking {
    pub fn new(clients: Arc<ClientRegistry>, max_keys: usize) -> Tracking {
        Tracking {
            clients,
            modes: Default::default(),
            active: AtomicUsize::new(0),
            table: (0..SHARDS).map(|_| Mutex::default()).collect(),
            keys: AtomicUsize::new(0),
            items: AtomicUsize::new(0),
            max_keys: AtomicUsize::new(max_keys),
            prefixes: Default::default(),
        }
    }

    /// Applies `tracking-table-max-keys` (CONFIG SET): a smaller limit takes effect at once.
    pub fn set_max_keys(&self, max: usize) {
        self.max_keys.store(max, Relaxed);
        self.enforce_limit();
    }

    /// INFO `tracking_clients`.
    pub fn clients_count(&self) -> usize {
        self.active.load(Relaxed)
    }

    /// INFO `tracking_total_keys`, `tracking_total_items`, `tracking_total_prefixes`.
    pub fn totals(&self) -> (usize, usize, usize) {
        (
            self.keys.load(Relaxed),
            self.items.load(Relaxed),
            self.prefixes.read().len(),
        )
    }

    /// Client `id`'s mode, if tracking is on.
    pub fn mode(&self, id: u64) -> Option<Arc<Mode>> {
        self.modes.read().get(&id).cloned()
    }

    /// Turns tracking on for `client` with `mode` (already validated by the command). A
    /// client already in BCAST mode keeps its prefixes and adds the new ones, as in Redis.
    pub fn enable(&self, client: &ClientInfo, mut mode: Mode) {
        // BCAST without PREFIX adds the empty prefix, even to prefixes given before (Redis).
        if mode.bcast && mode.prefixes.is_empty() {
            mode.prefixes.push(Vec::new());
        }
        // One lock at a time (the write path takes `prefixes`, then `modes`).
        let old = self.mode(client.id);
        if let Some(old) = old.as_ref().filter(|_| mode.bcast) {
            let mut all = old.prefixes.clone();
            all.extend(
                mode.prefixes
                    .drain(..)
                    .filter(|p| !old.prefixes.contains(p)),
            );
            mode.prefixes = all;
        }
        mode.prefixes.sort(); // TRACKINGINFO lists them in byte order, as Redis's radix tree
        if mode.bcast {
            let mut table = self.prefixes.write();
            for p in &mode.prefixes {
                let ids = table.entry(p.clone()).or_default();
                if !ids.contains(&client.id) {
                    ids.push(client.id);
                }
            }
        }
        let s = &client.state;
        s.set(ClientFlags::TRACKING, true);
        s.set(ClientFlags::BROKEN_REDIR, false);
        s.set(ClientFlags::BCAST, mode.bcast);
        s.redir.store(mode.redirect as i64, Relaxed);
        if self
            .modes
            .write()
            .insert(client.id, Arc::new(mode))
            .is_none()
        {
            self.active.fetch_add(1, Relaxed);
        }
    }

    /// Turns tracking off for client `id` (CLIENT TRACKING OFF, disconnect). Keys it read stay
    /// in the table until written, as in Redis; they are skipped then.
    pub fn disable(&self, client: &ClientInfo) {
        let Some(old) = self.modes.write().remove(&client.id) else {
            return;
        };
        if self.active.fetch_sub(1, Relaxed) == 1 {
            self.clear_table();
        }
        if old.bcast {
            let mut table = self.prefixes.write();
            for p in &old.prefixes {
                if let Some(ids) = table.get_mut(p) {
                    ids.retain(|&i| i != client.id);
                    if ids.is_empty() {
                        table.remove(p);
                    }
                }
            }
        }
        let s = &client.state;
        s.set(
            ClientFlags::TRACKING | ClientFlags::BROKEN_REDIR | ClientFlags::BCAST,
            false,
        );
        s.redir.store(-1, Relaxed);
    }

    /// Remembers that client `id` read `keys` (default mode). Called before the read runs.
    pub fn remember<'k>(&self, id: u64, keys: impl Iterator<Item = &'k [u8]>) {
        let mut added = false;
        for key in keys {
            let mut shard = self.table[shard_of(key)].lock();
            match shard.get_mut(key) {
                Some(ids) => {
                    if !ids.contains(&id) {
                        ids.push(id);
                        self.items.fetch_add(1, Relaxed);
                    }
                }
                None => {
                    shard.insert(key.into(), vec![id]);
                    self.keys.fetch_add(1, Relaxed);
                    self.items.fetch_add(1, Relaxed);
                    added = true;
                }
            }
        }
        if added {
            self.enforce_limit();
        }
    }

    /// Forgets keys (with an invalidation to their clients) while the table holds more than
    /// `tracking-table-max-keys`.
    fn enforce_limit(&self) {
        let max = self.max_keys.load(Relaxed);
        if max == 0 {
            return;
        }
        let mut shard = rand::random::<usize>() % SHARDS;
        let mut tries = 0;
        while self.keys.load(Relaxed) > max && tries < SHARDS {
            let victim = {
                let mut t = self.table[shard].lock();
                let key = t.keys().next().cloned();
                key.and_then(|k| t.remove(&k).map(|ids| (k, ids)))
            };
            match victim {
                Some((key, ids)) => {
                    self.forgot(ids.len());
                    self.send_to_each(&ids, &key, 0);
                }
                None => {
                    shard = (shard + 1) % SHARDS;
                    tries += 1;
                }
            }
        }
    }

    fn forgot(&self, items: usize) {
        self.keys.fetch_sub(1, Relaxed);
        self.items.fetch_sub(items, Relaxed);
    }

    fn clear_table(&self) {
        for shard in &self.table {
            let mut t = shard.lock();
            for ids in t.values() {
                self.forgot(ids.len());
            }
            t.clear();
        }
    }

    /// Invalidates one written key for the clients that remembered it.
    fn invalidate_key(&self, key: &[u8], current: u64) {
        let Some(ids) = self.table[shard_of(key)].lock().remove(key) else {
            return;
        };
        self.forgot(ids.len());
        self.send_to_each(&ids, key, current);
    }

    fn send_to_each(&self, ids: &[u64], key: &[u8], current: u64) {
        for &id in ids {
            let Some(mode) = self.mode(id) else { continue };
            // A client that switched to BCAST hears only about its prefixes.
            if mode.bcast || (mode.noloop && id == current) {
                continue;
            }
            self.send(id, &mode, Payload::Keys(&[key]));
        }
    }

    /// BCAST: each prefix's clients get the written keys under it, one message per prefix.
    fn broadcast(&self, keys: &[&[u8]], current: u64) {
        // Collected first: sending takes other locks, never while `prefixes` is held.
        let mut sends: Vec<(Vec<u64>, Vec<&[u8]>)> = Vec::new();
        for (prefix, ids) in self.prefixes.read().iter() {
            let mut matched: Vec<&[u8]> = Vec::new();
            for &k in keys {
                if k.starts_with(prefix) && !matched.contains(&k) {
                    matched.push(k);
                }
            }
            if !matched.is_empty() {
                sends.push((ids.clone(), matched));
            }
        }
        for (ids, matched) in sends {
            for id in ids {
                let Some(mode) = self.mode(id) else { continue };
                if mode.noloop && id == current {
                    continue;
                }
                self.send(id, &mode, Payload::Keys(&matched));
            }
        }
    }

    /// Sends one invalidation to tracking client `id`, or where it redirects them, as Redis's
    /// `sendTrackingMessage`.
    fn send(&self, id: u64, mode: &Mode, payload: Payload<'_>) {
        let Some(client) = self.clients.get(id) else {
            return;
        };
        let client_resp3 = client.resp.load(Relaxed) == 3;
        let target = if mode.redirect == 0 {
            client.clone()
        } else {
            match self.clients.get(mode.redirect) {
                Some(t) => t,
                None => {
                    mode.broken.store(true, Relaxed);
                    client.state.set(ClientFlags::BROKEN_REDIR, true);
                    if client_resp3 {
                        let mut msg = Vec::new();
                        push_header(&mut msg, 2, b"tracking-redir-broken");
                        msg.extend_from_slice(format!(":{}\r\n", mode.redirect).as_bytes());
                        deliver(&client, &msg);
                    }
                    return;
                }
            }
        };
        let mut msg = Vec::with_capacity(64);
        if target.resp.load(Relaxed) == 3 {
            push_header(&mut msg, 2, b"invalidate");
        } else if mode.redirect != 0 && target.subs.any() {
            msg.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n");
            bulk(&mut msg, CHANNEL);
        } else {
            return; // RESP2 without a redirect to a subscriber: nowhere to say it
        }
        match payload {
            Payload::Keys(keys) => {
                msg.extend_from_slice(format!("*{}\r\n", keys.len()).as_bytes());
                for k in keys {
                    bulk(&mut msg, k);
                }
            }
            // The null of the tracking client's protocol, even when redirected (as Redis).
            Payload::Flush if client_resp3 => msg.extend_from_slice(b"_\r\n"),
            Payload::Flush => msg.extend_from_slice(b"$-1\r\n"),
        }
        deliver(&target, &msg);
    }
}

fn shard_of(key: &[u8]) -> usize {
    use std::hash::{BuildHasher, Hasher};
    static SEED: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    let mut h = SEED.get_or_init(Default::default).build_hasher();
    h.write(key);
    h.finish() as usize % SHARDS
}

fn push_header(out: &mut Vec<u8>, len: usize, kind: &[u8]) {
    out.extend_from_slice(format!(">{len}\r\n").as_bytes());
    bulk(out, kind);
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Queues `msg` in the client's mailbox (the pub/sub path: drained by its I/O thread after any
/// reply in flight), waking the thread if needed.
fn deliver(client: &ClientInfo, msg: &[u8]) {
    if client.killed.load(Relaxed) {
        return;
    }
    if client.mailbox.push(msg) {
        client.io().notify_pubsub(client.id);
    }
}

impl WriteObserver for Tracking {
    fn keys_written(&self, keys: &[(u16, &[u8], Option<Kind>)]) {
        if self.active.load(Relaxed) == 0 {
            return;
        }
        let current = CURRENT.with(|c| c.get());
        for &(_, key, _) in keys {
            self.invalidate_key(key, current);
        }
        if !self.prefixes.read().is_empty() {
            let written: Vec<&[u8]> = keys.iter().map(|&(_, k, _)| k).collect();
            self.broadcast(&written, current);
        }
    }

    fn db_flushed(&self, _db: Option<u16>) {
        if self.active.load(Relaxed) == 0 {
            return;
        }
        let modes: Vec<(u64, Arc<Mode>)> = self
            .modes
            .read()
            .iter()
            .map(|(id, m)| (*id, m.clone()))
            .collect();
        for (id, mode) in modes {
            self.send(id, &mode, Payload::Flush);
        }
        self.clear_table();
    }
}

/// A session's side of tracking: its mode's flags for the read path (no lock per command), the
/// one-command `CLIENT CACHING` flag, and the registration that dropping the session (on
/// disconnect) removes.
#[derive(Debug)]
pub struct SessionTracking {
    registry: Arc<Tracking>,
    client: Arc<ClientInfo>,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    /// `CLIENT CACHING yes|no` was given for the next command (or transaction).
    pub caching: bool,
}

impl SessionTracking {
    /// Registers `mode` for `client` and returns the session's handle.
    pub fn enable(registry: &Arc<Tracking>, client: &Arc<ClientInfo>, mode: Mode) -> Self {
        let (bcast, optin, optout) = (mode.bcast, mode.optin, mode.optout);
        registry.enable(client, mode);
        SessionTracking {
            registry: registry.clone(),
            client: client.clone(),
            bcast,
            optin,
            optout,
            caching: false,
        }
    }

    /// CLIENT TRACKING ON again while on: the registry merges the options (BCAST prefixes add
    /// up); this session keeps its registration.
    pub fn update(&mut self, mode: Mode) {
        (self.bcast, self.optin, self.optout) = (mode.bcast, mode.optin, mode.optout);
        self.registry.enable(&self.client, mode);
    }

    /// Whether the read about to run should be remembered (default mode, OPTIN/OPTOUT rules).
    pub fn remembers(&self) -> bool {
        let wanted = if self.optin {
            self.caching // OPTIN: only after CLIENT CACHING yes
        } else {
            !(self.optout && self.caching) // OPTOUT: all but after CLIENT CACHING no
        };
        !self.bcast && wanted
    }
}

impl Drop for SessionTracking {
    fn drop(&mut self) {
        self.registry.disable(&self.client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optin_optout_rules_match_redis() {
        let cases = [
            // (bcast, optin, optout, caching) -> remembered
            ((false, false, false, false), true),
            ((true, false, false, false), false),
            ((false, true, false, false), false),
            ((false, true, false, true), true),
            ((false, false, true, false), true),
            ((false, false, true, true), false),
        ];
        let registry = Arc::new(Tracking::new(Default::default(), 0));
        for ((bcast, optin, optout, caching), want) in cases {
            let s = SessionTracking {
                registry: registry.clone(),
                client: test_client(),
                bcast,
                optin,
                optout,
                caching,
            };
            assert_eq!(s.remembers(), want, "{bcast} {optin} {optout} {caching}");
        }
    }

    fn test_client() -> Arc<ClientInfo> {
        ClientInfo::detached(1, 3)
    }

    #[test]
    fn table_limit_forgets_keys_with_an_invalidation() {
        let clients = Arc::new(ClientRegistry::default());
        let c = test_client();
        clients.add(c.clone());
        let t = Tracking::new(clients, 3);
        t.enable(&c, Mode::default());
        let keys: Vec<Vec<u8>> = (0..10).map(|i| format!("k{i}").into_bytes()).collect();
        t.remember(1, keys.iter().map(|k| &k[..]));
        assert_eq!(t.totals().0, 3);
        let pushed = c.mailbox.take();
        assert_eq!(pushed.windows(10).filter(|w| w == b"invalidate").count(), 7);
        t.keys_written(&[(0, b"k9", None)]);
        t.db_flushed(None);
        assert_eq!(t.totals(), (0, 0, 0));
        assert!(c
            .mailbox
            .take()
            .ends_with(b">2\r\n$10\r\ninvalidate\r\n_\r\n"));
    }
}
