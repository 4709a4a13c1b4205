//! Pub/Sub: who listens to which channel, pattern or shard channel, and the delivery of
//! published messages (PUBLISH, SPUBLISH, keyspace notifications) to them.
//!
//! The registry ([`PubSub`]) is shared by every thread: three maps from a channel (or pattern)
//! to its subscribers, each behind a read-write lock that publishers take shared. A publisher
//! encodes the message once per protocol and appends it to each receiver's [`mailbox::Mailbox`] (held by
//! the client's shared record); the first append after a drain wakes the receiver's I/O
//! thread, which moves the mailbox into the connection's output. A publisher therefore never
//! waits for a subscriber or an I/O thread, and one publisher's messages reach every receiver
//! in publish order (it appends them in order, and a mailbox is drained in order).
//!
//! Memory is bounded by the `pubsub` class of `client-output-buffer-limit`: a publisher that
//! finds a receiver's mailbox plus unsent output at the hard limit drops the message and kills
//! the client (Redis disconnects it too); the I/O thread applies the soft limit and its time.
//!
//! The connection's side of a subscription is [`Subscriptions`] (in its session): dropping it
//! (disconnect, RESET) removes the client from the registry.

pub mod forward;
pub mod mailbox;
pub mod monitor;
pub mod notify;

use crate::clients::ClientInfo;
use crate::storage::encoding::Kind;
use crate::storage::{KeyChange, WriteObserver};
use bytes::Bytes;
use kvik_resp::{encode, Proto};
use notify::{Class, NotifyFlags};
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// The settings delivery reads on every message, shared with [`crate::config::Config`] (which
/// writes them on CONFIG SET).
#[derive(Debug, Default)]
pub struct PubSubSettings {
    /// `notify-keyspace-events` as [`NotifyFlags`] bits.
    pub notify: AtomicU32,
    /// The hard limit of `client-output-buffer-limit pubsub` (0: none).
    pub hard_limit: AtomicU64,
    /// `pubsub-rtc-max-receivers`: most receivers a PUBLISH delivers to on the I/O thread.
    pub rtc_max_receivers: AtomicU64,
}

impl PubSubSettings {
    pub fn notify_flags(&self) -> NotifyFlags {
        NotifyFlags::from_bits_truncate(self.notify.load(Relaxed))
    }
}

/// What a subscription is to: a channel (SUBSCRIBE), a pattern (PSUBSCRIBE) or a shard
/// channel (SSUBSCRIBE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Channel,
    Pattern,
    Shard,
}

impl Scope {
    const ALL: [Scope; 3] = [Scope::Channel, Scope::Pattern, Scope::Shard];

    fn index(self) -> usize {
        self as usize
    }

    /// The first element of the confirmation of (un)subscribing.
    pub fn reply_word(self, subscribe: bool) -> &'static [u8] {
        match (self, subscribe) {
            (Scope::Channel, true) => b"subscribe",
            (Scope::Channel, false) => b"unsubscribe",
            (Scope::Pattern, true) => b"psubscribe",
            (Scope::Pattern, false) => b"punsubscribe",
            (Scope::Shard, true) => b"ssubscribe",
            (Scope::Shard, false) => b"sunsubscribe",
        }
    }
}

type Subscribers = HashMap<u64, Arc<ClientInfo>>;

/// The registry of subscriptions.
#[derive(Default)]
pub struct PubSub {
    settings: Arc<PubSubSettings>,
    /// Indexed by [`Scope`]: channel, pattern, shard channel -> its subscribers.
    maps: [RwLock<HashMap<Bytes, Subscribers>>; 3],
    /// Subscriptions of every scope: publishing with nobody subscribed is one load.
    total: AtomicUsize,
    /// Cluster mode: the forwarding of PUBLISH to the other nodes (started on first use), and
    /// the peers it forwards to, with the topology generation they were read at.
    forwarder: OnceLock<forward::Forwarder>,
    peers: Mutex<(u64, Arc<forward::Peers>)>,
    /// MONITOR clients (see [`monitor`]), and their number (the fast path).
    monitors: RwLock<Vec<Arc<ClientInfo>>>,
    monitor_count: AtomicUsize,
}

/// One message encoded for both protocols (only the array header differs).
struct Encoded {
    resp2: Vec<u8>,
    resp3: Vec<u8>,
}

impl Encoded {
    fn new(parts: &[&[u8]]) -> Encoded {
        let mut body = Vec::new();
        for p in parts {
            encode::bulk(&mut body, p);
        }
        let framed = |proto| {
            let mut out = Vec::with_capacity(body.len() + 8);
            encode::push_header(&mut out, parts.len(), proto);
            out.extend_from_slice(&body);
            out
        };
        Encoded {
            resp2: framed(Proto::Resp2),
            resp3: framed(Proto::Resp3),
        }
    }
}

impl PubSub {
    pub fn new(settings: Arc<PubSubSettings>) -> PubSub {
        PubSub {
            settings,
            ..Default::default()
        }
    }

    pub fn settings(&self) -> &PubSubSettings {
        &self.settings
    }

    /// Adds `client` to `name`'s subscribers.
    fn add(&self, scope: Scope, name: &Bytes, client: &Arc<ClientInfo>) {
        let mut map = self.maps[scope.index()].write();
        if map
            .entry(name.clone())
            .or_default()
            .insert(client.id, client.clone())
            .is_none()
        {
            self.total.fetch_add(1, Relaxed);
        }
    }

    /// Removes client `id` from `name`'s subscribers.
    fn remove(&self, scope: Scope, name: &[u8], id: u64) {
        let mut map = self.maps[scope.index()].write();
        if let Some(subs) = map.get_mut(name) {
            if subs.remove(&id).is_some() {
                self.total.fetch_sub(1, Relaxed);
            }
            if subs.is_empty() {
                map.remove(name);
            }
        }
    }

    /// PUBLISH: delivers `message` to the subscribers of `channel` and of every pattern that
    /// matches it. Returns the number of receivers (a client subscribed twice counts twice).
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> usize {
        if self.total.load(Relaxed) == 0 {
            return 0;
        }
        let mut receivers = self.deliver_exact(Scope::Channel, b"message", channel, message);
        let patterns = self.maps[Scope::Pattern.index()].read();
        for (pattern, subs) in patterns.iter() {
            if crate::glob::matches(pattern, channel) {
                let msg = Encoded::new(&[b"pmessage", pattern, channel, message]);
                for client in subs.values() {
                    self.deliver(client, &msg);
                }
                receivers += subs.len();
            }
        }
        receivers
    }

    /// Cluster mode: forwards a PUBLISH to the other nodes (see [`forward`]), never waiting.
    /// `generation` is the topology generation `make_peers` reads the peers at; they are read
    /// again only when it (or the password) changes.
    pub fn forward(
        &self,
        generation: u64,
        password: Option<String>,
        make_peers: impl FnOnce() -> Vec<(String, u16)>,
        channel: &[u8],
        message: &[u8],
    ) {
        let peers = {
            let mut cached = self.peers.lock();
            if cached.0 != generation || cached.1.password != password {
                *cached = (
                    generation,
                    Arc::new(forward::Peers {
                        addrs: make_peers(),
                        password,
                    }),
                );
            }
            cached.1.clone()
        };
        self.forwarder
            .get_or_init(forward::Forwarder::start)
            .forward(peers, channel, message);
    }

    /// An upper bound of PUBLISH's receivers for `channel` (its subscribers plus every
    /// pattern, matching or not), without matching any pattern.
    pub fn receivers_bound(&self, channel: &[u8]) -> usize {
        if self.total.load(Relaxed) == 0 {
            return 0;
        }
        self.numsub(Scope::Channel, channel) + self.maps[Scope::Pattern.index()].read().len()
    }

    /// SPUBLISH: delivers `message` to the subscribers of shard channel `channel`.
    pub fn spublish(&self, channel: &[u8], message: &[u8]) -> usize {
        if self.total.load(Relaxed) == 0 {
            return 0;
        }
        self.deliver_exact(Scope::Shard, b"smessage", channel, message)
    }

    fn deliver_exact(&self, scope: Scope, word: &[u8], channel: &[u8], message: &[u8]) -> usize {
        let map = self.maps[scope.index()].read();
        let Some(subs) = map.get(channel) else {
            return 0;
        };
        let msg = Encoded::new(&[word, channel, message]);
        for client in subs.values() {
            self.deliver(client, &msg);
        }
        subs.len()
    }

    /// Appends `msg` to `client`'s mailbox, or cuts the client off past the hard limit.
    fn deliver(&self, client: &ClientInfo, msg: &Encoded) {
        if client.killed.load(Relaxed) {
            return;
        }
        let bytes = if client.resp.load(Relaxed) == 3 {
            &msg.resp3
        } else {
            &msg.resp2
        };
        self.push_limited(client, bytes);
    }

    /// Appends `bytes` to `client`'s mailbox unless that takes its unsent output past the
    /// `pubsub` hard limit, which disconnects it instead (published messages, MONITOR lines).
    fn push_limited(&self, client: &ClientInfo, bytes: &[u8]) {
        if client.killed.load(Relaxed) {
            return;
        }
        let hard = self.settings.hard_limit.load(Relaxed) as usize;
        let pending = client.mailbox.len() + client.obuf.load(Relaxed);
        if hard > 0 && pending + bytes.len() > hard {
            tracing::warn!(client = %client.addr, pending, "client scheduled to be closed for overcoming of output buffer limits (pubsub)");
            client.kill();
            return;
        }
        if client.mailbox.push(bytes) {
            client.io().notify_pubsub(client.id);
        }
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: the channels with at least one subscriber, matching
    /// `pattern` if given.
    pub fn active(&self, scope: Scope, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.maps[scope.index()]
            .read()
            .keys()
            .filter(|c| pattern.is_none_or(|p| crate::glob::matches(p, c)))
            .cloned()
            .collect()
    }

    /// The number of channels (or shard channels) with at least one subscriber (INFO).
    pub fn active_count(&self, scope: Scope) -> usize {
        self.maps[scope.index()].read().len()
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB: the number of subscribers of `channel`.
    pub fn numsub(&self, scope: Scope, channel: &[u8]) -> usize {
        self.maps[scope.index()]
            .read()
            .get(channel)
            .map_or(0, |s| s.len())
    }

    /// PUBSUB NUMPAT: the number of distinct patterns subscribed to.
    pub fn numpat(&self) -> usize {
        self.maps[Scope::Pattern.index()].read().len()
    }

    /// Publishes a keyspace event of `class` named `event` for `key` of database `db`, if
    /// `notify-keyspace-events` enables it: to `__keyspace@<db>__:<key>` (message: the event)
    /// and to `__keyevent@<db>__:<event>` (message: the key).
    /// Whether a keyspace event would reach anyone now (events enabled, subscribers exist).
    pub fn notifying(&self) -> bool {
        !self.settings.notify_flags().is_empty() && self.total.load(Relaxed) > 0
    }

    pub fn notify_key(&self, class: Class, event: &str, db: u16, key: &[u8]) {
        let flags = self.settings.notify_flags();
        if !flags.contains(class.flag()) || self.total.load(Relaxed) == 0 {
            return;
        }
        if flags.contains(NotifyFlags::KEYSPACE) {
            self.publish(&notify::channel("keyspace", db, key), event.as_bytes());
        }
        if flags.contains(NotifyFlags::KEYEVENT) {
            self.publish(&notify::channel("keyevent", db, event.as_bytes()), key);
        }
    }
}

/// The events no command handler knows about come from the commit: `expired` for a record
/// that was already expired when a write (or the active expiry cycle) replaced or removed it,
/// `new` for a key the write created.
impl WriteObserver for PubSub {
    fn keys_written(&self, _keys: &[(u16, &[u8], Option<Kind>)]) {}

    fn db_flushed(&self, _db: Option<u16>) {}

    fn wants_changes(&self) -> bool {
        let flags = self.settings.notify_flags();
        flags.intersects(NotifyFlags::EXPIRED | NotifyFlags::NEW)
            && flags.intersects(NotifyFlags::KEYSPACE | NotifyFlags::KEYEVENT)
            && self.total.load(Relaxed) > 0
    }

    fn keys_changed(&self, changes: &[KeyChange<'_>]) {
        for c in changes {
            if c.expired {
                self.notify_key(Class::Expired, "expired", c.db, c.key);
            }
            if c.created {
                self.notify_key(Class::New, "new", c.db, c.key);
            }
        }
    }
}

/// A connection's subscriptions (in its session). Dropping it unsubscribes from everything.
/// Boxed, so a session that never subscribes carries one pointer.
#[derive(Default)]
pub struct Subscriptions {
    state: Option<Box<SubState>>,
}

struct SubState {
    registry: Arc<PubSub>,
    client: Arc<ClientInfo>,
    /// Indexed by [`Scope`].
    names: [HashSet<Bytes>; 3],
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |s| self.count(s);
        write!(
            f,
            "Subscriptions({}, {}, {})",
            n(Scope::Channel),
            n(Scope::Pattern),
            n(Scope::Shard)
        )
    }
}

impl Subscriptions {
    /// Subscriptions in `scope`.
    pub fn count(&self, scope: Scope) -> usize {
        self.state
            .as_ref()
            .map_or(0, |s| s.names[scope.index()].len())
    }

    /// Subscribed to anything (Redis's `CLIENT_PUBSUB`).
    pub fn any(&self) -> bool {
        self.state
            .as_ref()
            .is_some_and(|s| s.names.iter().any(|n| !n.is_empty()))
    }

    /// What a (un)subscribe confirmation counts: channels and patterns together, shard
    /// channels apart (Redis 7.0).
    pub fn reply_count(&self, scope: Scope) -> usize {
        match scope {
            Scope::Shard => self.count(Scope::Shard),
            _ => self.count(Scope::Channel) + self.count(Scope::Pattern),
        }
    }

    /// The names subscribed in `scope`.
    pub fn names(&self, scope: Scope) -> Vec<Bytes> {
        self.state.as_ref().map_or_else(Vec::new, |s| {
            s.names[scope.index()].iter().cloned().collect()
        })
    }

    /// Subscribes `client` to `name`; false if it already was.
    pub fn subscribe(
        &mut self,
        registry: &Arc<PubSub>,
        client: &Arc<ClientInfo>,
        scope: Scope,
        name: &Bytes,
    ) -> bool {
        let state = self.state.get_or_insert_with(|| {
            Box::new(SubState {
                registry: registry.clone(),
                client: client.clone(),
                names: Default::default(),
            })
        });
        if !state.names[scope.index()].insert(name.clone()) {
            return false;
        }
        state.registry.add(scope, name, &state.client);
        state.publish_counts();
        true
    }

    /// Unsubscribes from `name`; false if it was not subscribed.
    pub fn unsubscribe(&mut self, scope: Scope, name: &[u8]) -> bool {
        let Some(state) = self.state.as_mut() else {
            return false;
        };
        if !state.names[scope.index()].remove(name) {
            return false;
        }
        state.registry.remove(scope, name, state.client.id);
        state.publish_counts();
        true
    }

    /// Unsubscribes from everything, with no confirmations (RESET).
    pub fn clear(&mut self) {
        for scope in Scope::ALL {
            for name in self.names(scope) {
                self.unsubscribe(scope, &name);
            }
        }
    }
}

impl SubState {
    fn publish_counts(&self) {
        let c = &self.client.subs;
        c.channels
            .store(self.names[Scope::Channel.index()].len(), Relaxed);
        c.patterns
            .store(self.names[Scope::Pattern.index()].len(), Relaxed);
        c.shard
            .store(self.names[Scope::Shard.index()].len(), Relaxed);
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        self.clear();
    }
}
