//! The server: shared state, background timer, and orderly shutdown.
//!
//! `startup::run` builds it and starts the threads. Shutdown (SIGTERM, SIGINT or
//! SHUTDOWN) goes: stop accepting, let every run of commands already in the pool finish and its
//! replies go out, stop the pool, sync the WAL, exit 0. This module knows neither the command
//! layer nor the network: the I/O threads are reached through [`ClientIo`].

use crate::clients::{ClientIo, ClientRegistry};
use crate::config::Config;
use crate::pool::Pool;
use crate::stats::slowlog::SlowLog;
use crate::stats::Stats;
use crate::storage::expire::{tick_share_percent, ActiveExpiry, ExpiredField, FieldExpiry, Limit};
use crate::storage::{FsyncPolicy, Storage};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Most SCAN cursors remembered at once; the oldest are forgotten first.
const MAX_SCAN_CURSORS: usize = 16 * 1024;

/// State shared by every thread.
pub struct Server {
    pub config: Config,
    pub storage: Storage,
    pub stats: Stats,
    pub slowlog: SlowLog,
    pub clients: Arc<ClientRegistry>,
    /// CLIENT TRACKING: who is told about which key changes (an observer of the storage's
    /// writes).
    pub tracking: Arc<crate::tracking::Tracking>,
    /// CLIENT PAUSE / UNPAUSE.
    pub pause: crate::pause::Pause,
    pub started: Instant,
    /// 40 hex characters, new at each start (INFO run_id).
    pub run_id: String,
    /// The TCP port actually bound (differs from the setting when that is 0).
    pub port: std::sync::atomic::AtomicU16,
    pub scan_cursors: Mutex<ScanCursors>,
    /// WATCHed keys of every client (an observer of the storage's writes).
    pub watches: Arc<crate::watch::WatchRegistry>,
    /// Clients blocked on keys (BLPOP & co.; an observer of the storage's writes).
    pub blocking: Arc<crate::blocking::Blocking>,
    /// Pub/sub subscriptions and delivery (also an observer of the storage's writes, for the
    /// `expired` and `new` keyspace events).
    pub pubsub: Arc<crate::pubsub::PubSub>,
    shutting_down: AtomicBool,
    /// The I/O threads, woken on shutdown (set once they run).
    pub(crate) io_handles: OnceLock<Vec<Arc<dyn ClientIo>>>,
    /// The WAL's sync thread's requests (`fsync-thread`, see `net::wal_sync`).
    pub(crate) wal_sync: crate::net::WalSync,
    /// How many I/O threads take connections (`io-threads-adaptive`; set once they run).
    pub io_balance: OnceLock<Arc<crate::net::Balance>>,
    /// The worker pool `run` started (`pool-mode`); INFO reads its counters.
    pub pool: OnceLock<Arc<dyn Pool>>,
    /// Threads for the commands that have been taking long (`slow-lane-threads`).
    pub slow_lane: crate::pool::slow_lane::SlowLane,
    /// Cluster mode state (empty unless `cluster-enabled yes`).
    pub cluster: crate::cluster::Cluster,
    /// EVAL's script cache, the function libraries, the running scripts (see `scripting`).
    pub scripts: crate::scripting::Scripts,
    /// SAVE / BGSAVE state (INFO persistence, LASTSAVE).
    pub saves: crate::saves::Saves,
    /// The latency monitor and the per-command latency histograms.
    pub latency: crate::stats::latency::Latency,
    /// Replication role, ids, offsets and links (see `crate::replication`).
    pub repl: crate::replication::Replication,
    /// This server itself, for commands that start threads holding it (REPLICAOF).
    me: OnceLock<std::sync::Weak<Server>>,
    /// Set by FLUSHDB/FLUSHALL; the compactor thread (owned by `run`) gives the space back.
    compaction_requested: Mutex<bool>,
    compaction_wakeup: Condvar,
}

/// SCAN's cursor table: Redis cursors are integers, while kvik's position in the keyspace is a
/// RocksDB key, so each cursor handed out maps to the last key it returned.
#[derive(Default)]
pub struct ScanCursors {
    map: HashMap<u64, (u16, Vec<u8>)>,
    order: std::collections::VecDeque<u64>,
}

impl ScanCursors {
    /// Remembers `position` (a raw meta key of database `db`) and returns its cursor.
    pub fn insert(&mut self, db: u16, position: Vec<u8>) -> u64 {
        let mut id: u64 = rand::random::<u64>() >> 1;
        while id == 0 || self.map.contains_key(&id) {
            id = rand::random::<u64>() >> 1;
        }
        if self.order.len() >= MAX_SCAN_CURSORS {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
        self.map.insert(id, (db, position));
        self.order.push_back(id);
        id
    }

    /// The position behind `cursor`, if it was handed out for database `db` and not yet forgotten.
    pub fn get(&self, db: u16, cursor: u64) -> Option<Vec<u8>> {
        self.map
            .get(&cursor)
            .filter(|(d, _)| *d == db)
            .map(|(_, p)| p.clone())
    }
}

impl Server {
    /// Free space against `disk-free-min`, and whether RocksDB takes writes again after a
    /// failed one (`storage::health`): at startup, then every second from the timer.
    pub fn check_write_health(&self) {
        let write_buffers = self.storage.shared().write_buffers.get_buffer_size() as u64;
        let floor = self.config.disk_free_floor(write_buffers);
        self.storage.check_health(floor);
    }

    /// The shared state over `storage`, with call statistics for `commands` (the command
    /// table's full names, in table order).
    pub fn new(
        config: Config,
        storage: Storage,
        commands: impl IntoIterator<Item = String>,
    ) -> Server {
        let run_id: String = (0..40)
            .map(|_| char::from_digit(rand::random::<u32>() % 16, 16).unwrap())
            .collect();
        let watches = Arc::new(crate::watch::WatchRegistry::default());
        storage.add_observer(watches.clone());
        let blocking = Arc::new(crate::blocking::Blocking::default());
        storage.add_observer(blocking.clone());
        let pubsub = Arc::new(crate::pubsub::PubSub::new(config.pubsub.clone()));
        storage.add_observer(pubsub.clone());
        let clients = Arc::new(ClientRegistry::default());
        let tracking = Arc::new(crate::tracking::Tracking::new(
            clients.clone(),
            tracking_max_keys(&config),
        ));
        storage.add_observer(tracking.clone());
        let saves = crate::saves::Saves::new(&storage);
        let commands: Vec<String> = commands.into_iter().collect();
        let latency = crate::stats::latency::Latency::new(commands.len());
        let server = Server {
            saves,
            latency,
            config,
            storage,
            stats: Stats::new(commands),
            slowlog: SlowLog::default(),
            clients,
            tracking,
            pause: Default::default(),
            started: Instant::now(),
            run_id,
            port: Default::default(),
            scan_cursors: Mutex::new(ScanCursors::default()),
            watches,
            blocking,
            pubsub,
            shutting_down: AtomicBool::new(false),
            io_handles: OnceLock::new(),
            wal_sync: Default::default(),
            io_balance: OnceLock::new(),
            pool: OnceLock::new(),
            slow_lane: crate::cmd::slow_lane(),
            cluster: Default::default(),
            scripts: Default::default(),
            repl: Default::default(),
            me: OnceLock::new(),
            compaction_requested: Mutex::new(false),
            compaction_wakeup: Condvar::new(),
        };
        server.apply_latency_settings();
        server
    }

    /// Mirrors `latency-monitor-threshold` and `latency-tracking` into the latency monitor.
    fn apply_latency_settings(&self) {
        let value = |name: &str| {
            crate::config::Param::lookup(name)
                .map(|p| p.get(&self.config))
                .unwrap_or_default()
        };
        let threshold = value("latency-monitor-threshold").parse().unwrap_or(0);
        self.latency
            .configure(threshold, value("latency-tracking") == "yes");
    }

    /// Remembers the `Arc` this server lives in (startup calls it once).
    pub fn set_self(self: &Arc<Server>) {
        let _ = self.me.set(Arc::downgrade(self));
    }

    /// The `Arc` this server lives in (set at startup; `None` in tests that build a bare one).
    pub fn arc(&self) -> Option<Arc<Server>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    /// Starts an orderly shutdown; returns at once.
    pub fn request_shutdown(&self) {
        if !self.shutting_down.swap(true, Ordering::SeqCst) {
            tracing::info!("shutdown requested");
        }
        for h in self.io_handles.get().into_iter().flatten() {
            h.wake();
        }
        self.compaction_wakeup.notify_all();
    }

    /// Asks for a full compaction (after FLUSHDB/FLUSHALL, so the disk space of the removed
    /// keys comes back soon). Requests made while one runs are merged into one more run.
    pub fn request_compaction(&self) {
        *self.compaction_requested.lock() = true;
        self.compaction_wakeup.notify_one();
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Pushes the cache settings into the cache (enabling, disabling, resizing).
    pub fn apply_cache_settings(&self) {
        let s = self.config.cache_settings();
        let cache = self.storage.cache();
        cache.set_max_key(s.max_key);
        cache.set_max_fields(s.max_fields);
        cache.set_list_elements(s.list_elements);
        cache.set_policy(s.policy);
        cache.set_fill_delay_us(s.fill_delay_us);
        cache.set_write_allocate(s.write_allocate);
        cache.set_absent_keys(s.absent_keys);
        cache.set_hash_writes(s.hash_writes);
        cache.set_big_hashes(s.big_hashes);
        cache.set_sets(s.sets);
        cache.set_admission(s.admission);
        cache.set_max_bytes(s.max_bytes);
        if cache.enabled() != s.enabled {
            cache.set_enabled(s.enabled);
        }
    }

    /// Pushes the group commit settings into the storage's WAL group, and how its batches
    /// are built (`txn-skip-superseded`).
    pub fn apply_group_commit(&self) {
        let wal = self.storage.wal();
        wal.set_grouped(self.config.group_commit.load(Ordering::Relaxed));
        wal.set_hold(self.config.wal_flush_hold.load(Ordering::Relaxed));
        self.storage
            .set_skip_superseded(self.config.txn_skip_superseded.load(Ordering::Relaxed));
    }

    /// Pushes the `jemalloc-*` settings into the allocator.
    pub fn apply_allocator(&self) {
        if let Err(e) = crate::allocator::apply(self.config.allocator_tuning()) {
            tracing::warn!(error = %e, "jemalloc refused its settings");
        }
    }

    /// Pushes `repl-backlog-size` into the storage's replication backlog.
    pub fn apply_repl_backlog(&self) {
        let size = self.config.repl.backlog_size.load(Ordering::Relaxed);
        self.storage.backlog().set_capacity(size);
    }

    /// Applies a setting's side effects after CONFIG SET changed it.
    pub fn config_changed(&self, name: &str) {
        if name.eq_ignore_ascii_case("repl-backlog-size") {
            self.apply_repl_backlog();
        }
        if name.eq_ignore_ascii_case("appendfsync") {
            self.storage
                .set_fsync_policy(*self.config.appendfsync.read());
        }
        if name.eq_ignore_ascii_case("group-commit")
            || name.eq_ignore_ascii_case("wal-flush-hold")
            || name.eq_ignore_ascii_case("txn-skip-superseded")
        {
            self.apply_group_commit();
        }
        if name.eq_ignore_ascii_case("loglevel") {
            crate::logging::set_level(&self.config.loglevel.read());
        }
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("cache-") {
            self.apply_cache_settings();
        }
        if lower.starts_with("latency-") {
            self.apply_latency_settings();
        }
        if (lower == "zset-rank-index-min-len"
            && self.config.zset_rank_index_min_len.load(Ordering::Relaxed) == 0)
            || lower == "zset-rank-index-scores"
            || lower == "set-rank-index-prefixes"
        {
            // Off: the indexes' memory back, and writes no longer keep them. The scores
            // switched: the next queries build the indexes again, with or without them.
            self.storage.cache().ranks().clear();
        }
        if lower == "maxmemory"
            || lower == "cache-maxmemory"
            || lower == "rocksdb-write-buffer-size"
        {
            self.apply_memory_budget();
        }
        if lower.starts_with("jemalloc-") {
            self.apply_allocator();
        }
        if lower == "tracking-table-max-keys" {
            self.tracking.set_max_keys(tracking_max_keys(&self.config));
        }
        if lower.starts_with("rocksdb-") {
            let bottom = *self.config.bottom_compression.read();
            if let Err(e) = self
                .storage
                .set_mutable_options(&self.config.stall_limits(), bottom)
            {
                tracing::warn!(error = %e, setting = name, "RocksDB refused the new options");
            }
        }
    }

    /// Resizes the hot cache, the block cache and the write buffers to the memory budget's
    /// current split (CONFIG SET maxmemory or cache-maxmemory).
    pub fn apply_memory_budget(&self) {
        let split = self.config.memory_split();
        self.storage.cache().set_max_bytes(split.hot_cache);
        if let Err(e) = self.storage.resize_memory(
            split.block_cache,
            split.write_buffers,
            self.config.max_write_buffer_bytes.load(Ordering::Relaxed),
        ) {
            tracing::warn!(error = %e, "resizing RocksDB's memory failed");
        }
    }
}

/// `tracking-table-max-keys` (0: no limit).
fn tracking_max_keys(config: &Config) -> usize {
    crate::config::Param::lookup("tracking-table-max-keys")
        .and_then(|p| p.get(config).parse().ok())
        .unwrap_or(1_000_000)
}

/// A file grown past the process's file size limit (`ulimit -f`) gets SIGXFSZ, whose default
/// action ends the process: with a handler the write fails with EFBIG instead, RocksDB reports
/// it, and writes are refused with MISCONF (`storage::health`) while reads go on.
pub(crate) fn survive_file_size_limit() -> Result<(), String> {
    let seen = Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGXFSZ, seen)
        .map(drop)
        .map_err(|e| format!("cannot install a SIGXFSZ handler: {e}"))
}

pub(crate) fn install_signal_handlers(server: Arc<Server>) -> Result<(), String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    std::thread::Builder::new()
        .name("kvik-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                tracing::info!(signal = sig, "received signal, shutting down");
                server.request_shutdown();
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The saver thread: writes the checkpoints BGSAVE asks for (`saves`), one at a time, off the
/// worker pool. `run` joins it before storage is closed, so a save in progress finishes first.
pub(crate) fn spawn_saver(server: Arc<Server>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("kvik-saver".into())
        .spawn(move || loop {
            match server.saves.next_background(Duration::from_millis(200)) {
                Some(target) => server.saves.run_background(&server.storage, &target),
                None if server.is_shutting_down() => break,
                None => {}
            }
        })
        .expect("spawn saver thread")
}

/// The compactor thread: runs the compactions FLUSHDB/FLUSHALL ask for, off the worker pool,
/// one at a time. `run` joins it before storage is closed.
pub(crate) fn spawn_compactor(server: Arc<Server>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("kvik-compactor".into())
        .spawn(move || loop {
            {
                let mut requested = server.compaction_requested.lock();
                // Timed wait: the shutdown flag is set without this lock, so a wakeup can be
                // missed; the timeout bounds how long that delays the exit.
                while !*requested && !server.is_shutting_down() {
                    server
                        .compaction_wakeup
                        .wait_for(&mut requested, Duration::from_millis(200));
                }
                if server.is_shutting_down() {
                    return;
                }
                *requested = false;
            }
            server.storage.compact_all();
        })
        .expect("spawn compactor thread")
}

/// How often the primary's timer clears the marks of copies left unfinished.
const BUILDS_EVERY: Duration = Duration::from_secs(60);

/// The timer's active expiry: due keys, then due hash fields, within the share of each tick
/// that `tick_share_percent` gives (more while the last tick's cycle ended behind).
#[derive(Default)]
struct ExpiryCycles {
    keys: ActiveExpiry,
    fields: FieldExpiry,
    behind: bool,
}

impl ExpiryCycles {
    fn run(&mut self, server: &Server, tick_started: Instant, period: Duration) {
        let effort = server.config.active_expire_effort.load(Ordering::Relaxed);
        let share = tick_share_percent(effort, self.behind);
        let deadline = tick_started + period * share / 100;
        let started = Instant::now();
        let storage = &server.storage;
        let databases = server.config.databases();
        // With fields due too, the keys take half of the time left, so neither kind starves
        // the other; keys that finish early leave the rest to the fields, and fields that
        // finish early leave the rest to the keys.
        let keys_until = if FieldExpiry::may_be_due(storage, databases, crate::clock::unix_ms()) {
            started + deadline.saturating_duration_since(started) / 2
        } else {
            deadline
        };
        let mut keys_behind = self.expire_keys(server, keys_until);
        let mut expired = Vec::new();
        let fields = self
            .fields
            .run(storage, databases, Limit::until(deadline), &mut expired);
        // (Fields removed before a failure were removed: their events go out too.)
        notify_expired_fields(server, &expired);
        let fields_behind = match fields {
            Ok(cycle) => cycle.behind,
            Err(e) => {
                tracing::warn!(error = %e, "active expiry of hash fields failed");
                false
            }
        };
        if keys_behind && keys_until < deadline && Instant::now() < deadline {
            keys_behind = self.expire_keys(server, deadline);
        }
        server
            .latency
            .record_event("expire-cycle", started.elapsed());
        self.behind = keys_behind || fields_behind;
    }

    /// The key cycle until `until`; whether it ended behind.
    fn expire_keys(&mut self, server: &Server, until: Instant) -> bool {
        let databases = server.config.databases();
        match self
            .keys
            .run(&server.storage, databases, Limit::until(until))
        {
            Ok(cycle) => {
                server
                    .stats
                    .expired_keys
                    .fetch_add(cycle.deleted, Ordering::Relaxed);
                cycle.behind
            }
            Err(e) => {
                tracing::warn!(error = %e, "active expiry failed");
                false
            }
        }
    }
}

/// Redis's keyspace events for the fields an expiry cycle removed: one `hexpired` per hash,
/// and `del` for a hash that went with its last field.
fn notify_expired_fields(server: &Server, fields: &[ExpiredField]) {
    use crate::pubsub::notify::Class;
    if fields.is_empty() {
        return;
    }
    // A field's entry says whether the hash went with it (only its hash's last entry can).
    let emptied: std::collections::HashSet<(u16, &[u8])> = fields
        .iter()
        .filter(|f| f.2)
        .map(|f| (f.0, f.1.as_slice()))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for (db, key, _) in fields {
        if !seen.insert((*db, key.as_slice())) {
            continue;
        }
        let gone = emptied.contains(&(*db, key.as_slice()));
        let db = server.storage.dbs().logical(*db);
        server.pubsub.notify_key(Class::Hash, "hexpired", db, key);
        if gone {
            server.pubsub.notify_key(Class::Generic, "del", db, key);
        }
    }
}

/// The timer thread: active expiry and stats at `hz`; every second, the key counts' fold,
/// with `everysec` the WAL sync, and the WAL archive's bounds.
/// Timed work never rides on the worker pool's lists.
pub(crate) fn spawn_timer(server: Arc<Server>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("kvik-timer".into())
        .spawn(move || {
            let mut expiry = ExpiryCycles::default();
            let mut last_sync = Instant::now();
            let mut builds_cleared: Option<Instant> = None;
            let mut next_tick = Instant::now();
            while !server.is_shutting_down() {
                let hz = server.config.hz.load(Ordering::Relaxed).max(1);
                let period = Duration::from_millis(1000 / hz);
                // Ticks keep to the period whatever their work took (a tick that ran past the
                // next one's time starts the schedule over), so the expiry cycle's share of
                // a tick is its share of the thread's time.
                next_tick += period;
                let start = Instant::now();
                match next_tick.checked_duration_since(start) {
                    Some(wait) => std::thread::sleep(wait),
                    None => next_tick = start,
                }
                let tick_started = Instant::now();
                let now = crate::clock::unix_ms();
                crate::clock::tick_coarse(now);
                server.stats.sample_ops(now);
                server.storage.check_stall();
                server.storage.flush_memtables(
                    server.config.memtable_max_entries.load(Ordering::Relaxed),
                    if server.config.tombstone_cleanup.load(Ordering::Relaxed) {
                        crate::storage::options::TombstoneCleanup::QUIET_FLUSH_DELETIONS
                    } else {
                        0
                    },
                );
                // A replica applies its primary's expirations and counts; it writes none. Nor
                // does a primary whose writes FAILOVER or CLIENT PAUSE WRITE paused (as Redis).
                let replica = server.repl.is_replica() || server.repl.failover.writes_paused();
                if !replica
                    && !server.pause.writes_paused()
                    && server.config.active_expire.load(Ordering::Relaxed)
                {
                    expiry.run(&server, tick_started, period);
                }
                if last_sync.elapsed() >= Duration::from_secs(1) {
                    server.check_write_health();
                    // After a failed write RocksDB takes none until it recovers: nothing to
                    // fold or sync, and nothing to log each second (`storage::health`).
                    let failed = server.storage.health().failed();
                    // (Not under CLIENT PAUSE WRITE either: kvik-cluster failover waits for
                    // the primary's offset to stand still.)
                    let folded = if failed || replica || server.pause.writes_paused() {
                        Ok(())
                    } else {
                        server.storage.fold_counts()
                    };
                    if let Err(e) = folded {
                        tracing::warn!(error = %e, "folding the key counts failed");
                    }
                    // Copies an earlier run (or a former primary) left unfinished: soon after
                    // start, then once a minute (`storage::building`).
                    let builds_due = builds_cleared.is_none_or(|t| t.elapsed() >= BUILDS_EVERY);
                    if builds_due && !failed && !replica && !server.pause.writes_paused() {
                        builds_cleared = Some(Instant::now());
                        match server.storage.clear_abandoned_builds() {
                            Ok(0) => {}
                            Ok(n) => tracing::info!(n, "cleared unfinished copies' marks"),
                            Err(e) => tracing::warn!(error = %e, "clearing copies' marks failed"),
                        }
                    }
                    if !failed && server.storage.fsync_policy() == FsyncPolicy::Everysec {
                        if let Err(e) = server.storage.sync_wal() {
                            tracing::warn!(error = %e, "WAL sync failed");
                        }
                    }
                    let repl = &server.config.repl;
                    server.storage.enforce_wal_retention(
                        repl.wal_size_limit.load(Ordering::Relaxed),
                        Duration::from_secs(repl.wal_ttl_secs.load(Ordering::Relaxed)),
                    );
                    last_sync = Instant::now();
                }
                // The expiry cycle's deletes and the counts' fold leave the WAL buffer now, not
                // with the next client write: replicas (which tail the WAL file) see them.
                if let Err(e) = server.storage.make_durable() {
                    // (A failed write was logged once by `storage::health`.)
                    if !server.storage.health().failed() {
                        tracing::warn!(error = %e, "WAL flush failed");
                    }
                }
            }
        })
        .expect("spawn timer thread")
}
