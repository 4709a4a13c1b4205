//! Replication: a primary streams its RocksDB WAL to replicas, a replica applies it.
//!
//! Role: the node's replication state ([`Replication`]: role, ids, offsets, connected
//! replicas, link status, counters) and the two sides of a link: `primary` (PSYNC's answer and
//! the feeder thread that streams a checkpoint and the WAL), `replica` (the link thread that
//! follows a primary). `protocol` is the frame format both speak, `checkpoint` the full sync's
//! files (and the checkpoints kept so a cut transfer resumes), `throttle` its rate limit. The storage side (applying batches, loading a checkpoint, the position record) is
//! `storage::replica`. docs/architecture.md ("Replication") has the design.
//!
//! Offsets are RocksDB sequence numbers of the primary's history: a primary's offset is its
//! latest sequence number, a replica's the last one it applied.

pub mod checkpoint;
pub mod failover;
pub mod lease;
pub mod primary;
pub mod protocol;
pub mod replica;
pub mod throttle;

use crate::server::Server;
use crate::storage::replica::Position;
use crate::storage::{Storage, StorageResult};
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A new random replication id (40 hex characters, as Redis's).
pub fn new_replid() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
        .collect()
}

/// The state of a replica's link to its primary, as INFO and ROLE name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected (yet, or again).
    Connect,
    /// Connected, handshake in progress.
    Connecting,
    /// Receiving or loading a full sync.
    Sync,
    /// Following the stream.
    Connected,
}

impl LinkState {
    pub fn role_name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// A replica as its primary sees it.
#[derive(Clone, Debug)]
pub struct ReplicaInfo {
    pub ip: String,
    pub port: u16,
    /// Still receiving its full sync.
    pub syncing: bool,
    /// The offset it last acknowledged, and when.
    pub ack: u64,
    pub ack_at: Instant,
    /// The full sync's transfer: bytes sent of this checkpoint (resumed ones count what the
    /// replica held) and its total (0 while there is none).
    pub sync_sent: u64,
    pub sync_total: u64,
    /// Its cluster node id and the newest of this primary's lease stamps it echoed (0: none
    /// yet): `lease` renews the write lease only when every replica of the topology echoed.
    pub node_id: String,
    pub echo: u64,
}

/// This node's side as a replica.
#[derive(Clone, Debug)]
pub struct Following {
    pub host: String,
    pub port: u16,
    pub state: LinkState,
    /// Last time anything arrived from the primary.
    pub last_io: Option<Instant>,
    /// The position applied (the primary's id and offset), if any.
    pub position: Option<Position>,
    /// During a full sync's transfer: the checkpoint's size and the bytes of it held.
    pub sync_total: u64,
    pub sync_read: u64,
}

struct State {
    /// `None`: a primary.
    following: Option<Following>,
    /// The id of the history this node serves (as a replica: its primary's).
    replid: String,
    /// The id of the history this node served before its last promotion ("0"*40 if none), the
    /// offset (in that history) where it ended + 1, and this node's own sequence number then.
    replid2: String,
    second_offset: i64,
    switch_seq: u64,
    replicas: BTreeMap<u64, ReplicaInfo>,
    /// The replicas' sockets, for CLIENT KILL TYPE replica.
    replica_sockets: BTreeMap<u64, TcpStream>,
    /// Bumped whenever the role changes: a link thread of an older generation stops.
    generation: u64,
}

/// The node's replication state, shared by commands, INFO and the link threads.
pub struct Replication {
    state: Mutex<State>,
    /// Notified on every replica acknowledgement (WAIT waits on it).
    acked: Condvar,
    next_link: AtomicU64,
    /// Held by the link thread while it applies (a batch, a full sync) and by role changes, so
    /// nothing is applied once a promotion or a new REPLICAOF has begun.
    pub apply_gate: Mutex<()>,
    /// FAILOVER's state and its pause of writes.
    pub failover: failover::Failover,
    /// The write lease's renewals (`cluster-write-lease-ms`).
    pub lease: lease::Lease,
    /// Full syncs served, partial resyncs accepted, partial resyncs refused (INFO stats).
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// Times a feeder read the WAL file because the backlog did not cover its replica.
    pub wal_reads: AtomicU64,
    /// Full-sync transfers: counters of both sides, and the primary's kept checkpoints.
    pub fullsync: FullSyncStats,
    pub shelf: Arc<checkpoint::Shelf>,
}

/// Counters of full-sync transfers (INFO replication's `kvik_fullsync_*`).
#[derive(Default)]
pub struct FullSyncStats {
    /// As a primary: checkpoint bytes sent, bytes not sent again thanks to a resume, transfers
    /// resumed, and the rate limit's waits.
    pub sent_bytes: AtomicU64,
    pub skipped_bytes: AtomicU64,
    pub resumes_served: AtomicU64,
    pub throttled_waits: AtomicU64,
    /// As a replica: checkpoint bytes received and transfers resumed.
    pub received_bytes: AtomicU64,
    pub resumes: AtomicU64,
}

impl Default for Replication {
    fn default() -> Replication {
        Replication {
            state: Mutex::new(State {
                following: None,
                replid: new_replid(),
                replid2: "0".repeat(40),
                second_offset: -1,
                switch_seq: 0,
                replicas: BTreeMap::new(),
                replica_sockets: BTreeMap::new(),
                generation: 0,
            }),
            acked: Condvar::new(),
            next_link: AtomicU64::new(1),
            apply_gate: Mutex::new(()),
            failover: Default::default(),
            lease: Default::default(),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            wal_reads: AtomicU64::new(0),
            fullsync: Default::default(),
            shelf: Default::default(),
        }
    }
}

/// What INFO replication and ROLE show.
pub struct Snapshot {
    pub following: Option<Following>,
    pub replid: String,
    pub replid2: String,
    pub second_offset: i64,
    pub offset: u64,
    pub replicas: Vec<ReplicaInfo>,
}

impl Replication {
    /// Sets the role at start: a replica of `replicaof` if configured; otherwise a primary
    /// whose id is the persisted one, or, if the storage holds a replica position (this node
    /// followed a primary and was restarted without `replicaof`), promoted from it.
    pub fn init(server: &Arc<Server>) -> StorageResult<()> {
        let storage = &server.storage;
        let position = storage.repl_position()?;
        let target = server.config.repl.replicaof.read().clone();
        let repl = &server.repl;
        match target {
            Some((host, port)) => repl.follow(server, host, port, position),
            None if position.is_some() => repl.promote(storage)?,
            None => {
                let id = match storage.repl_id()? {
                    Some(id) => id,
                    None => {
                        let id = new_replid();
                        storage.set_repl_id(&id)?;
                        id
                    }
                };
                repl.state.lock().replid = id;
            }
        }
        Ok(())
    }

    pub fn is_replica(&self) -> bool {
        self.state.lock().following.is_some()
    }

    /// Starts following `host:port` (REPLICAOF, or `replicaof` at start). `position` is where
    /// to ask to resume; a primary turning replica asks with its own history.
    pub fn follow(
        &self,
        server: &Arc<Server>,
        host: String,
        port: u16,
        position: Option<Position>,
    ) {
        let generation = {
            let _applying = self.apply_gate.lock();
            let mut s = self.state.lock();
            let position = position.or_else(|| {
                s.following.is_none().then(|| Position {
                    replid: s.replid.clone(),
                    offset: server.storage.latest_seq(),
                })
            });
            if let Some(p) = &position {
                s.replid = p.replid.clone();
            }
            s.generation += 1;
            s.following = Some(Following {
                host: host.clone(),
                port,
                state: LinkState::Connect,
                last_io: None,
                position,
                sync_total: 0,
                sync_read: 0,
            });
            s.generation
        };
        replica::spawn(server.clone(), host, port, generation);
    }

    /// Whether a link thread of `generation` should go on.
    pub fn current(&self, generation: u64) -> bool {
        self.state.lock().generation == generation
    }

    /// Becomes a primary (REPLICAOF NO ONE, or a start without `replicaof` after following):
    /// the link stops, a new id is drawn, the old history stays continuable at exactly its end.
    pub fn promote(&self, storage: &Storage) -> StorageResult<()> {
        let _applying = self.apply_gate.lock();
        let position = storage.repl_position()?;
        let mut s = self.state.lock();
        let old = s.following.take().and_then(|f| f.position).or(position);
        s.generation += 1;
        if let Some(p) = old {
            s.replid2 = p.replid;
            s.second_offset = p.offset as i64 + 1;
        } else {
            s.replid2 = std::mem::take(&mut s.replid);
            s.second_offset = storage.latest_seq() as i64 + 1;
        }
        s.switch_seq = storage.latest_seq();
        s.replid = new_replid();
        storage.clear_repl_position()?;
        storage.set_repl_id(&s.replid)?;
        storage.resume_versions()?;
        storage.reload_counts()?;
        tracing::info!(replid = %s.replid, "now a primary");
        Ok(())
    }

    /// Updates the replica side's view (the link thread calls it).
    pub fn set_link(&self, generation: u64, f: impl FnOnce(&mut Following, &mut String)) {
        let mut s = self.state.lock();
        if s.generation != generation {
            return;
        }
        let State {
            following, replid, ..
        } = &mut *s;
        if let Some(fl) = following.as_mut() {
            f(fl, replid);
        }
    }

    /// The id and the offset where a PSYNC with (`replid`, `offset`) continues in this node's
    /// own numbering, if it can: the current history at any offset, or the previous one exactly
    /// at its end.
    pub fn continue_from(&self, replid: &str, offset: u64) -> (String, Option<u64>) {
        let s = self.state.lock();
        let from = if replid == s.replid {
            offset.checked_sub(1)
        } else if replid == s.replid2 && s.second_offset >= 0 && offset == s.second_offset as u64 {
            Some(s.switch_seq)
        } else {
            None
        };
        (s.replid.clone(), from)
    }

    /// Registers a replica link (the feeder thread) and its socket; returns its id.
    pub fn add_replica(&self, ip: String, port: u16, socket: Option<TcpStream>) -> u64 {
        let id = self.next_link.fetch_add(1, Relaxed);
        let mut s = self.state.lock();
        s.replicas.insert(
            id,
            ReplicaInfo {
                ip,
                port,
                syncing: true,
                ack: 0,
                ack_at: Instant::now(),
                sync_sent: 0,
                sync_total: 0,
                node_id: String::new(),
                echo: 0,
            },
        );
        if let Some(socket) = socket {
            s.replica_sockets.insert(id, socket);
        }
        id
    }

    /// Records a replica's full-sync transfer progress (`total` 0: the transfer ended).
    pub fn replica_sync_progress(&self, id: u64, sent: u64, total: u64) {
        if let Some(r) = self.state.lock().replicas.get_mut(&id) {
            r.sync_sent = sent;
            r.sync_total = total;
        }
    }

    /// Closes every replica's link (CLIENT KILL TYPE replica); returns how many. Each replica
    /// reconnects by itself (and resumes a full sync that was cut).
    pub fn cut_replica_links(&self) -> usize {
        let s = self.state.lock();
        for socket in s.replica_sockets.values() {
            let _ = socket.shutdown(Shutdown::Both);
        }
        s.replica_sockets.len()
    }

    pub fn replica_synced(&self, id: u64) {
        if let Some(r) = self.state.lock().replicas.get_mut(&id) {
            r.syncing = false;
        }
    }

    pub fn remove_replica(&self, id: u64) {
        let mut s = self.state.lock();
        s.replicas.remove(&id);
        s.replica_sockets.remove(&id);
        drop(s);
        self.acked.notify_all();
    }

    /// A replica's ACK: the offset it applied and, if the ACK carries them, the newest lease
    /// stamp it echoes and its cluster node id.
    pub fn replica_acked(&self, id: u64, offset: u64, echo: Option<(u64, &str)>) {
        if let Some(r) = self.state.lock().replicas.get_mut(&id) {
            r.ack = r.ack.max(offset);
            r.ack_at = Instant::now();
            if let Some((stamp, node_id)) = echo {
                r.echo = r.echo.max(stamp);
                if r.node_id != node_id {
                    r.node_id = node_id.to_string();
                }
            }
        }
        self.acked.notify_all();
    }

    /// The oldest lease stamp among the newest each replica `ids` names echoed, or None when
    /// one of them has no link or echoed nothing yet.
    pub fn oldest_echo(&self, ids: &[String]) -> Option<u64> {
        let s = self.state.lock();
        ids.iter()
            .map(|id| {
                s.replicas
                    .values()
                    .filter(|r| &r.node_id == id && r.echo > 0)
                    .map(|r| r.echo)
                    .max()
            })
            .try_fold(u64::MAX, |oldest, e| e.map(|e| oldest.min(e)))
    }

    /// Replicas past their full sync whose last acknowledgement is at most `max_lag_secs`
    /// seconds old (whole seconds, as Redis counts a replica's lag): Redis's "good" replicas.
    pub fn good_replicas(&self, max_lag_secs: u64) -> usize {
        let now = Instant::now();
        let s = self.state.lock();
        s.replicas
            .values()
            .filter(|r| {
                !r.syncing && now.saturating_duration_since(r.ack_at).as_secs() <= max_lag_secs
            })
            .count()
    }

    /// Whether a write may run under `min-replicas-to-write` / `min-replicas-max-lag`, as
    /// Redis's check: always on a replica, or with either setting at 0.
    pub fn enough_good_replicas(&self, settings: &crate::config::ReplSettings) -> bool {
        let needed = settings.min_replicas_to_write.load(Relaxed);
        let max_lag = settings.min_replicas_max_lag.load(Relaxed);
        needed == 0
            || max_lag == 0
            || self.is_replica()
            || self.good_replicas(max_lag) as u64 >= needed
    }

    /// WAIT: blocks until `n` replicas acknowledged `offset` or `timeout` (None: no limit)
    /// passed; returns how many did.
    pub fn wait_acks(&self, offset: u64, n: usize, timeout: Option<Duration>) -> usize {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.state.lock();
        loop {
            let count = s.replicas.values().filter(|r| r.ack >= offset).count();
            if count >= n || deadline.is_some_and(|d| Instant::now() >= d) {
                return count;
            }
            let step = Duration::from_millis(100);
            let wait = deadline.map_or(step, |d| {
                d.saturating_duration_since(Instant::now()).min(step)
            });
            self.acked.wait_for(&mut s, wait);
        }
    }

    pub fn snapshot(&self, storage: &Storage) -> Snapshot {
        let s = self.state.lock();
        let offset = match &s.following {
            Some(f) => f.position.as_ref().map_or(0, |p| p.offset),
            None => storage.latest_seq(),
        };
        Snapshot {
            following: s.following.clone(),
            replid: s.replid.clone(),
            replid2: s.replid2.clone(),
            second_offset: s.second_offset,
            offset,
            replicas: s.replicas.values().cloned().collect(),
        }
    }
}
