//! The registry of connected clients, for CLIENT LIST / INFO / KILL and `maxclients`.
//!
//! Each connection has one [`ClientInfo`], shared between its I/O thread (which updates buffer
//! sizes and activity times) and commands on any thread that list or kill clients. Fields are
//! atomics or small mutexes: the I/O thread never waits on a command to update them.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// Sentinel for "no command yet" in [`ClientInfo::last_cmd`].
pub const NO_CMD: usize = usize::MAX;

#[derive(Debug)]
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub created_ms: u64,
    pub name: Mutex<Option<Vec<u8>>>,
    /// The ACL user it authenticated as (CLIENT LIST `user=`); `None` is `default`.
    pub user: Mutex<Option<String>>,
    pub db: AtomicU16,
    /// 2 or 3.
    pub resp: AtomicU8,
    /// Command table id of the last command run, or [`NO_CMD`].
    pub last_cmd: AtomicUsize,
    pub last_interaction_ms: AtomicU64,
    /// Bytes in the query buffer and in the output buffer, as of the last I/O event.
    pub qbuf: AtomicUsize,
    pub obuf: AtomicUsize,
    /// Set by CLIENT KILL; the owning I/O thread closes the connection when it sees it.
    pub killed: AtomicBool,
    /// The owning I/O thread, to wake it after setting `killed` (or to move a message to the
    /// output). It changes when the connection moves to another I/O thread (`io-key-affinity`).
    pub io: parking_lot::RwLock<Arc<dyn ClientIo>>,
    /// The index of that I/O thread (CLIENT LIST `io-thread=`).
    pub io_thread: AtomicUsize,
    /// Pub/sub messages published to this client, not yet in its output buffer.
    pub mailbox: crate::pubsub::mailbox::Mailbox,
    /// Its subscription counts (CLIENT LIST; the `pubsub` output limit class applies while any
    /// is non-zero).
    pub subs: crate::pubsub::mailbox::SubCounts,
    /// What CLIENT LIST shows of the session's state (flags, `multi=`, `watch=`, `redir=`).
    pub state: ClientState,
}

/// The parts of a session that other clients observe through CLIENT LIST / INFO. The session
/// (or the registries that change them: tracking, blocking) keeps them current with relaxed
/// stores; readers only print them.
#[derive(Debug)]
pub struct ClientState {
    /// [`ClientFlags`] bits.
    pub flags: std::sync::atomic::AtomicU32,
    /// Commands queued in MULTI, or -1 outside MULTI.
    pub multi: std::sync::atomic::AtomicI64,
    /// Keys WATCHed.
    pub watch: AtomicUsize,
    /// CLIENT TRACKING's REDIRECT id: 0 without one, -1 while tracking is off.
    pub redir: std::sync::atomic::AtomicI64,
}

impl Default for ClientState {
    fn default() -> ClientState {
        ClientState {
            flags: Default::default(),
            multi: (-1).into(),
            watch: Default::default(),
            redir: (-1).into(),
        }
    }
}

bitflags::bitflags! {
    /// The client flags of CLIENT LIST that are not derived from other fields.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ClientFlags: u32 {
        /// `b`: waiting in a blocking command.
        const BLOCKED = 1 << 0;
        /// `t`: CLIENT TRACKING on.
        const TRACKING = 1 << 1;
        /// `R`: the tracking redirect client is gone.
        const BROKEN_REDIR = 1 << 2;
        /// `B`: tracking in broadcast mode.
        const BCAST = 1 << 3;
        /// `e`: CLIENT NO-EVICT on.
        const NO_EVICT = 1 << 4;
    }
}

impl ClientState {
    pub fn flags(&self) -> ClientFlags {
        ClientFlags::from_bits_truncate(self.flags.load(Ordering::Relaxed))
    }

    /// Sets (`on`) or clears `flags`.
    pub fn set(&self, flags: ClientFlags, on: bool) {
        if on {
            self.flags.fetch_or(flags.bits(), Ordering::Relaxed);
        } else {
            self.flags.fetch_and(!flags.bits(), Ordering::Relaxed);
        }
    }
}

/// What commands on any thread may ask of a client's I/O thread (implemented by the network
/// layer's inbox, so this registry does not depend on it).
pub trait ClientIo: Send + Sync + std::fmt::Debug {
    /// Close client `id` (CLIENT KILL).
    fn notify_kill(&self, id: u64);
    /// The reply of blocked client `id`'s command: its I/O thread un-parks it.
    fn notify_unblocked(&self, id: u64, reply: Vec<u8>);
    /// Client `id`'s mailbox got messages: its I/O thread moves them to its output.
    fn notify_pubsub(&self, id: u64);
    /// Wakes the I/O thread so it re-checks shared state (shutdown).
    fn wake(&self);
}

/// The I/O side of a client that has no connection (tests, benches): nothing to wake.
#[derive(Debug)]
struct NoIo;

impl ClientIo for NoIo {
    fn notify_kill(&self, _: u64) {}
    fn notify_unblocked(&self, _: u64, _: Vec<u8>) {}
    fn notify_pubsub(&self, _: u64) {}
    fn wake(&self) {}
}

impl ClientInfo {
    /// A client `id` with no connection behind it, speaking RESP `resp` (unit tests and benches
    /// that drive sessions in-process).
    pub fn detached(id: u64, resp: u8) -> Arc<ClientInfo> {
        Arc::new(ClientInfo {
            id,
            addr: String::new(),
            laddr: String::new(),
            fd: -1,
            created_ms: 0,
            name: Default::default(),
            user: Default::default(),
            db: Default::default(),
            resp: resp.into(),
            last_cmd: NO_CMD.into(),
            last_interaction_ms: 0.into(),
            qbuf: Default::default(),
            obuf: Default::default(),
            killed: Default::default(),
            io: parking_lot::RwLock::new(Arc::new(NoIo)),
            io_thread: Default::default(),
            mailbox: Default::default(),
            subs: Default::default(),
            state: Default::default(),
        })
    }

    /// Marks the client for closing and wakes its I/O thread.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.io().notify_kill(self.id);
    }

    /// The I/O thread that owns the connection now.
    pub fn io(&self) -> Arc<dyn ClientIo> {
        self.io.read().clone()
    }

    /// The connection now belongs to I/O thread `index`, reached through `io`.
    pub fn move_to(&self, io: Arc<dyn ClientIo>, index: usize) {
        *self.io.write() = io;
        self.io_thread.store(index, Ordering::Relaxed);
    }

    pub fn user_name(&self) -> String {
        self.user
            .lock()
            .clone()
            .unwrap_or_else(|| "default".to_string())
    }

    pub fn name_string(&self) -> String {
        self.name
            .lock()
            .as_deref()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default()
    }
}

#[derive(Default, Debug)]
pub struct ClientRegistry {
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
    next_id: AtomicU64,
}

impl ClientRegistry {
    /// A new, unique client id (ids start at 1, as in Redis, and are never reused).
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn add(&self, info: Arc<ClientInfo>) {
        self.clients.lock().insert(info.id, info);
    }

    pub fn remove(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of every connected client, ordered by id.
    pub fn snapshot(&self) -> Vec<Arc<ClientInfo>> {
        self.clients.lock().values().cloned().collect()
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.clients.lock().get(&id).cloned()
    }
}
