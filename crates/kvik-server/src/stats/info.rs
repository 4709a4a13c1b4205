//! INFO: Redis's sections and field names, filled from kvik's counters.
//!
//! [`render`] builds the reply text for a list of section arguments exactly as Redis lays it
//! out: sections in Redis's fixed order whatever order they were asked in, each opened by a
//! `# Name` header, `name:value` lines ending in CRLF, and one empty line between sections.
//! Fields that have no meaning for kvik (forks, RDB saves, replication backlog) keep Redis's names
//! with the values a Redis that never did the thing would show, so tools that parse INFO find
//! every field they expect. kvik's own numbers carry a `kvik_` prefix.

use crate::server::Server;
use crate::storage::FsyncPolicy;
use rocksdb::statistics::Ticker;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The Redis version kvik reports. Clients gate features on it (RESP3, newer commands), so it
/// names the Redis release whose semantics kvik follows.
pub const REDIS_VERSION: &str = "7.0.15";

/// Every section, in the order Redis prints them.
const ORDER: &[Section] = &[
    Section::Server,
    Section::Clients,
    Section::Memory,
    Section::Persistence,
    Section::Stats,
    Section::Replication,
    Section::Cpu,
    Section::Modules,
    Section::Commandstats,
    Section::Errorstats,
    Section::Latencystats,
    Section::Cluster,
    Section::Keyspace,
    Section::Rocksdb,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    Server,
    Clients,
    Memory,
    Persistence,
    Stats,
    Replication,
    Cpu,
    Modules,
    Commandstats,
    Errorstats,
    /// Per-command latency percentiles (`latency-tracking`).
    Latencystats,
    Cluster,
    Keyspace,
    /// kvik's own: RocksDB's caches, compactions and stalls (`INFO rocksdb`, `all`).
    Rocksdb,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Section::Server => "server",
            Section::Clients => "clients",
            Section::Memory => "memory",
            Section::Persistence => "persistence",
            Section::Stats => "stats",
            Section::Replication => "replication",
            Section::Cpu => "cpu",
            Section::Modules => "modules",
            Section::Commandstats => "commandstats",
            Section::Errorstats => "errorstats",
            Section::Latencystats => "latencystats",
            Section::Cluster => "cluster",
            Section::Keyspace => "keyspace",
            Section::Rocksdb => "rocksdb",
        }
    }

    fn header(self) -> &'static str {
        match self {
            Section::Server => "Server",
            Section::Clients => "Clients",
            Section::Memory => "Memory",
            Section::Persistence => "Persistence",
            Section::Stats => "Stats",
            Section::Replication => "Replication",
            Section::Cpu => "CPU",
            Section::Modules => "Modules",
            Section::Commandstats => "Commandstats",
            Section::Errorstats => "Errorstats",
            Section::Latencystats => "Latencystats",
            Section::Cluster => "Cluster",
            Section::Keyspace => "Keyspace",
            Section::Rocksdb => "RocksDB",
        }
    }

    /// In Redis's "default" set (what INFO without arguments prints). The RocksDB section reads
    /// a few dozen properties, so exporters polling plain INFO do not pay for it.
    fn is_default(self) -> bool {
        !matches!(
            self,
            Section::Commandstats | Section::Latencystats | Section::Rocksdb
        )
    }
}

/// The sections asked for by INFO's arguments (case-insensitive; "default", "all" and
/// "everything" as Redis; unknown names select nothing).
fn selected(args: &[&[u8]]) -> Vec<Section> {
    if args.is_empty() {
        return ORDER.iter().copied().filter(|s| s.is_default()).collect();
    }
    let mut want = [false; ORDER.len()];
    for a in args {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        for (i, s) in ORDER.iter().enumerate() {
            let hit = match a.as_str() {
                "all" | "everything" => true,
                "default" => s.is_default(),
                name => name == s.name(),
            };
            want[i] |= hit;
        }
    }
    ORDER
        .iter()
        .zip(want)
        .filter(|(_, w)| *w)
        .map(|(s, _)| *s)
        .collect()
}

/// The INFO reply text for `args` (the arguments after INFO).
pub fn render(server: &Server, args: &[&[u8]]) -> String {
    let mut out = String::with_capacity(4096);
    for (i, section) in selected(args).into_iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {}\r\n", section.header());
        let mut w = Lines(&mut out);
        match section {
            Section::Server => server_section(server, &mut w),
            Section::Clients => clients_section(server, &mut w),
            Section::Memory => memory_section(server, &mut w),
            Section::Persistence => persistence_section(server, &mut w),
            Section::Stats => stats_section(server, &mut w),
            Section::Replication => replication_section(server, &mut w),
            Section::Cpu => cpu_section(&mut w),
            Section::Modules => {}
            Section::Commandstats => commandstats_section(server, &mut w),
            Section::Errorstats => {
                for (prefix, n) in server.stats.error_counts() {
                    w.field(&format!("errorstat_{prefix}"), format_args!("count={n}"));
                }
            }
            Section::Latencystats => latencystats_section(server, &mut w),
            Section::Cluster => w.field("cluster_enabled", server.cluster.node().is_some() as u8),
            Section::Keyspace => keyspace_section(server, &mut w),
            Section::Rocksdb => rocksdb_section(server, &mut w),
        }
    }
    out
}

/// Appends `name:value\r\n` lines.
struct Lines<'a>(&'a mut String);

impl Lines<'_> {
    fn field(&mut self, name: &str, value: impl std::fmt::Display) {
        let _ = write!(self.0, "{name}:{value}\r\n");
    }
}

fn server_section(server: &Server, w: &mut Lines<'_>) {
    let uptime = server.started.elapsed().as_secs();
    let hz = server.config.hz.load(Relaxed);
    w.field("redis_version", REDIS_VERSION);
    w.field("redis_git_sha1", "00000000");
    w.field("redis_git_dirty", 0);
    w.field("redis_build_id", "0");
    w.field("redis_mode", "standalone");
    w.field("kvik_version", env!("CARGO_PKG_VERSION"));
    w.field("os", os_name());
    w.field("arch_bits", usize::BITS);
    w.field("monotonic_clock", "POSIX clock_gettime");
    w.field("multiplexing_api", "epoll");
    w.field("atomicvar_api", "c11-builtin");
    w.field("gcc_version", "0.0.0");
    w.field("process_id", std::process::id());
    w.field("process_supervised", "no");
    w.field("run_id", &server.run_id);
    w.field("tcp_port", server.port.load(Relaxed));
    w.field("server_time_usec", crate::clock::unix_us());
    w.field("uptime_in_seconds", uptime);
    w.field("uptime_in_days", uptime / 86400);
    w.field("hz", hz);
    w.field("configured_hz", hz);
    w.field(
        "lru_clock",
        (crate::clock::unix_ms() / 1000) & ((1 << 24) - 1),
    );
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    w.field("executable", exe);
    // Empty without a config file, as Redis.
    let config_file = server.config.config_file.read().clone();
    w.field(
        "config_file",
        config_file
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
    w.field("io_threads_active", 0);
}

/// "Linux 6.1.0 x86_64", as Redis prints uname.
fn os_name() -> String {
    // SAFETY: uname fills the zeroed struct; its fields are NUL-terminated C strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "unknown".into();
        }
        let s = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", s(&u.sysname), s(&u.release), s(&u.machine))
    }
}

fn clients_section(server: &Server, w: &mut Lines<'_>) {
    let clients = server.clients.snapshot();
    let max_in = clients
        .iter()
        .map(|c| c.qbuf.load(Relaxed))
        .max()
        .unwrap_or(0);
    let max_out = clients
        .iter()
        .map(|c| c.obuf.load(Relaxed))
        .max()
        .unwrap_or(0);
    w.field("connected_clients", clients.len());
    w.field("cluster_connections", 0);
    w.field("maxclients", server.config.maxclients.load(Relaxed));
    w.field("client_recent_max_input_buffer", max_in);
    w.field("client_recent_max_output_buffer", max_out);
    w.field("blocked_clients", server.blocking.len());
    w.field("tracking_clients", server.tracking.clients_count());
    w.field("clients_in_timeout_table", 0);
}

/// Highest `used_memory` INFO has reported (Redis's used_memory_peak).
static PEAK: AtomicU64 = AtomicU64::new(0);

/// Resident set size of this process in bytes, from /proc/self/statm.
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(1) as u64
}

/// Total physical memory in bytes (0 if unknown).
fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page <= 0 {
        0
    } else {
        pages as u64 * page as u64
    }
}

/// Redis's bytesToHuman: "1023B", "1.50K", "12.25M" ...
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: &[(f64, &str)] = &[
        (1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0, "E"),
        (1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0, "P"),
        (1024.0 * 1024.0 * 1024.0 * 1024.0, "T"),
        (1024.0 * 1024.0 * 1024.0, "G"),
        (1024.0 * 1024.0, "M"),
        (1024.0, "K"),
    ];
    let d = n as f64;
    for (size, unit) in UNITS {
        if d >= *size {
            return format!("{:.2}{unit}", d / size);
        }
    }
    format!("{n}B")
}

/// The process's RSS now and the highest seen (Redis's used_memory and its peak).
pub fn used_and_peak() -> (u64, u64) {
    let used = rss_bytes();
    (used, PEAK.fetch_max(used, Relaxed).max(used))
}

fn memory_section(server: &Server, w: &mut Lines<'_>) {
    let (used, peak) = used_and_peak();
    let total = total_system_memory();
    let st = &server.storage;
    w.field("used_memory", used);
    w.field("used_memory_human", bytes_to_human(used));
    w.field("used_memory_rss", used);
    w.field("used_memory_rss_human", bytes_to_human(used));
    w.field("used_memory_peak", peak);
    w.field("used_memory_peak_human", bytes_to_human(peak));
    w.field(
        "used_memory_peak_perc",
        format_args!("{:.2}%", used as f64 * 100.0 / peak.max(1) as f64),
    );
    w.field("total_system_memory", total);
    w.field("total_system_memory_human", bytes_to_human(total));
    w.field("used_memory_lua", 0);
    w.field("used_memory_scripts", 0);
    w.field("number_of_cached_scripts", 0);
    let split = server.config.memory_split();
    w.field("maxmemory", split.total);
    w.field("maxmemory_human", bytes_to_human(split.total));
    // Stored and reported; kvik never evicts (it decides OBJECT FREQ vs IDLETIME).
    let policy = crate::config::Param::lookup("maxmemory-policy")
        .map(|p| p.get(&server.config))
        .unwrap_or_default();
    w.field("maxmemory_policy", policy);
    w.field("mem_fragmentation_ratio", "1.00");
    w.field("mem_allocator", crate::allocator::name());
    // Read back from jemalloc, not from the settings: what the allocator runs with.
    if let Ok(t) = crate::allocator::current() {
        w.field(
            "kvik_allocator_background_thread",
            u8::from(t.background_thread),
        );
        w.field("kvik_allocator_dirty_decay_ms", t.dirty_decay_ms);
    }
    if let Some(n) = crate::allocator::arenas() {
        w.field("kvik_allocator_arenas", n);
    }
    w.field("lazyfree_pending_objects", 0);
    budget_fields(server, &split, w);
    // kvik's own: RocksDB memtables, block cache and an estimate of the data on disk.
    let memtables = st.property_sum("rocksdb.cur-size-all-mem-tables");
    w.field("kvik_rocksdb_memtables", memtables);
    w.field("kvik_rocksdb_memtables_human", bytes_to_human(memtables));
    let live = st.property_sum("rocksdb.estimate-live-data-size");
    w.field("kvik_rocksdb_live_data", live);
    w.field("kvik_rocksdb_live_data_human", bytes_to_human(live));
    let sst = st.property_sum("rocksdb.total-sst-files-size");
    w.field("kvik_rocksdb_sst_files", sst);
    w.field("kvik_rocksdb_sst_files_human", bytes_to_human(sst));
    w.field(
        "kvik_rocksdb_estimate_num_keys",
        st.property_sum("rocksdb.estimate-num-keys"),
    );
    // Outside the budget, bounded (`storage::pop_decks::MAX_BYTES`).
    w.field("kvik_pop_decks", st.pop_decks().bytes());
}

/// How the memory budget (`maxmemory`) is split and used: the hot cache, the block cache (the
/// memtables are charged to it), the table readers outside it, and their sum.
fn budget_fields(server: &Server, split: &crate::storage::budget::Split, w: &mut Lines<'_>) {
    let st = &server.storage;
    let shared = st.shared();
    let hot = st.cache().used_memory() as u64;
    let block_usage = shared.block_cache.get_usage() as u64;
    let table_readers = st.property_sum("rocksdb.estimate-table-readers-mem");
    let used = hot + block_usage + table_readers;
    w.field("kvik_maxmemory_auto", u8::from(split.auto));
    w.field("kvik_budget_used", used);
    w.field("kvik_budget_used_human", bytes_to_human(used));
    w.field("kvik_hot_cache_used", hot);
    w.field("kvik_hot_cache_max", st.cache().max_bytes());
    w.field("kvik_block_cache_usage", block_usage);
    w.field("kvik_block_cache_capacity", shared.block_cache_capacity());
    w.field(
        "kvik_block_cache_pinned",
        shared.block_cache.get_pinned_usage(),
    );
    w.field("kvik_write_buffers_usage", shared.write_buffers.get_usage());
    w.field(
        "kvik_write_buffers_limit",
        shared.write_buffers.get_buffer_size(),
    );
    w.field("kvik_table_readers", table_readers);
    w.field("kvik_budget_reserve", split.reserve);
}

fn persistence_section(server: &Server, w: &mut Lines<'_>) {
    w.field("loading", 0);
    w.field("async_loading", 0);
    w.field("current_cow_peak", 0);
    w.field("current_cow_size", 0);
    w.field("current_fork_perc", "0.00");
    w.field("current_save_keys_processed", 0);
    w.field("current_save_keys_total", 0);
    // SAVE and BGSAVE write RocksDB checkpoints (`saves`).
    for (name, value) in server.saves.info_fields(&server.storage) {
        w.field(name, value);
    }
    // Every write goes to RocksDB's write-ahead log before it is acknowledged: that log is
    // kvik's append-only file, synced per `appendfsync`.
    w.field("aof_enabled", 1);
    w.field("aof_rewrite_in_progress", 0);
    w.field("aof_rewrite_scheduled", 0);
    w.field("aof_last_rewrite_time_sec", -1);
    w.field("aof_current_rewrite_time_sec", -1);
    w.field("aof_last_bgrewrite_status", "ok");
    w.field("aof_rewrites", 0);
    let health = server.storage.health();
    w.field(
        "aof_last_write_status",
        if health.failed() { "err" } else { "ok" },
    );
    w.field("module_fork_in_progress", 0);
    w.field("kvik_aof", "rocksdb-wal");
    let policy = server.storage.fsync_policy();
    w.field("kvik_appendfsync", policy.name());
    w.field(
        "kvik_wal_synced_per_write",
        u8::from(policy == FsyncPolicy::Always),
    );
    // Group commit: WAL writes (each an fsync with `always`) so far, whoever made them; the
    // write commands over this count is how many share one (`storage::wal`).
    w.field("kvik_wal_group_commits", server.storage.wal().flushes());
    // Why writes get MISCONF (`storage::health`): free space below `disk-free-min`, or a
    // failed RocksDB write.
    w.field("kvik_disk_free_bytes", health.free_bytes());
    w.field("kvik_writes_refused", health.refused.load(Relaxed));
    // RocksDB write stalls the timer saw; I/O threads leave writes to workers during one.
    w.field("kvik_write_stalls", health.stalls());
    w.field("kvik_write_stalled", u8::from(health.stalled()));
    w.field(
        "kvik_write_refusal",
        health.refusal().as_deref().unwrap_or("none"),
    );
}

fn stats_section(server: &Server, w: &mut Lines<'_>) {
    let s = &server.stats;
    w.field(
        "total_connections_received",
        s.total_connections_received.load(Relaxed),
    );
    w.field(
        "total_commands_processed",
        s.total_commands_processed.load(Relaxed),
    );
    w.field("instantaneous_ops_per_sec", s.instantaneous_ops_per_sec());
    w.field("total_net_input_bytes", s.net_input_bytes.load(Relaxed));
    w.field("total_net_output_bytes", s.net_output_bytes.load(Relaxed));
    w.field("total_net_repl_input_bytes", 0);
    w.field("total_net_repl_output_bytes", 0);
    w.field("instantaneous_input_kbps", "0.00");
    w.field("instantaneous_output_kbps", "0.00");
    w.field("rejected_connections", s.rejected_connections.load(Relaxed));
    w.field("sync_full", server.repl.sync_full.load(Relaxed));
    w.field("sync_partial_ok", server.repl.sync_partial_ok.load(Relaxed));
    w.field(
        "sync_partial_err",
        server.repl.sync_partial_err.load(Relaxed),
    );
    w.field("expired_keys", s.expired_keys.load(Relaxed));
    // Redis 7.4's count of hash fields removed by active expiry; kvik adds the expired field
    // records its compaction filter dropped first.
    w.field(
        "expired_subkeys",
        server.storage.expired_fields.load(Relaxed),
    );
    w.field(
        "kvik_compaction_expired_fields",
        server.storage.compaction_expired_fields.load(Relaxed),
    );
    w.field("expired_stale_perc", "0.00");
    w.field("expired_time_cap_reached_count", 0);
    w.field("evicted_keys", 0);
    w.field("evicted_clients", 0);
    w.field("keyspace_hits", s.keyspace_hits.load(Relaxed));
    w.field("keyspace_misses", s.keyspace_misses.load(Relaxed));
    let ps = &server.pubsub;
    w.field(
        "pubsub_channels",
        ps.active_count(crate::pubsub::Scope::Channel),
    );
    w.field("pubsub_patterns", ps.numpat());
    w.field(
        "pubsubshard_channels",
        ps.active_count(crate::pubsub::Scope::Shard),
    );
    w.field("latest_fork_usec", 0);
    w.field("total_forks", 0);
    w.field("migrate_cached_sockets", 0);
    let (keys, items, prefixes) = server.tracking.totals();
    w.field("tracking_total_keys", keys);
    w.field("tracking_total_items", items);
    w.field("tracking_total_prefixes", prefixes);
    w.field("unexpected_error_replies", 0);
    w.field("total_error_replies", s.total_error_replies.load(Relaxed));
    pool_fields(server, w);
    cache_fields(server, w);
}

/// kvik's hot cache, run-to-completion and pool queue fields (end of the stats section).
fn cache_fields(server: &Server, w: &mut Lines<'_>) {
    let s = &server.stats;
    let cache = server.storage.cache();
    let hits = cache.stats.hits.load(Relaxed);
    let misses = cache.stats.misses.load(Relaxed);
    let ratio = if hits + misses == 0 {
        0.0
    } else {
        hits as f64 * 100.0 / (hits + misses) as f64
    };
    w.field("cache_enabled", u8::from(cache.enabled()));
    w.field("cache_policy", cache.policy().name());
    w.field("cache_hits", hits);
    w.field("cache_misses", misses);
    w.field("cache_hit_ratio", format!("{ratio:.2}"));
    w.field("cache_fills", cache.stats.fills.load(Relaxed));
    w.field(
        "cache_rejected_fills",
        cache.stats.rejected_fills.load(Relaxed),
    );
    w.field("cache_evictions", cache.stats.evictions.load(Relaxed));
    w.field("cache_used_memory", cache.used_memory());
    w.field("cache_maxmemory", cache.max_bytes());
    w.field("cache_entries", cache.entries());
    let ranks = cache.ranks().stats();
    w.field("zset_rank_indexes", ranks.indexes);
    w.field("zset_rank_index_bytes", ranks.bytes);
    w.field("zset_rank_index_builds", ranks.builds);
    w.field("zset_rank_index_answers", ranks.answers);
    w.field("zset_rank_index_refusals", ranks.refusals);
    w.field("zset_rank_index_splits", ranks.splits);
    w.field("zset_rank_index_build_waits", ranks.build_waits);
    w.field("zset_rank_index_placed", ranks.placed);
    w.field("rtc_commands", s.rtc_commands.load(Relaxed));
    w.field("rtc_fallbacks", s.rtc_fallbacks.load(Relaxed));
    w.field("rtc_lock_retries", s.rtc_lock_retries.load(Relaxed));
    w.field(
        "unlocked_write_lookups",
        s.unlocked_write_lookups.load(Relaxed),
    );
    w.field(
        "io_key_affinity_moves",
        s.io_key_affinity_moves.load(Relaxed),
    );
    if let Some(balance) = server.io_balance.get() {
        for (name, value) in balance.info_fields() {
            w.field(name, value);
        }
    }
    w.field("rtc_backoff_skips", s.rtc_backoff_skips.load(Relaxed));
    w.field("rtc_disk_gate_closes", s.rtc_disk_gate_closes.load(Relaxed));
    w.field(
        "rtc_script_budget_aborts",
        s.rtc_script_budget_aborts.load(Relaxed),
    );
    w.field("rtc_write_batches", s.rtc_write_batches.load(Relaxed));
    w.field(
        "kvik_superseded_writes",
        server.storage.superseded_writes.load(Relaxed),
    );
    w.field("rtc_batched_writes", s.rtc_batched_writes.load(Relaxed));
    w.field("io_poll_spins", s.io_poll_spins.load(Relaxed));
    w.field("io_poll_spin_hits", s.io_poll_spin_hits.load(Relaxed));
    w.field("pool_commands", s.pool_commands.load(Relaxed));
    w.field("pool_unlocked_reads", s.pool_unlocked_reads.load(Relaxed));
    w.field("pool_read_retries", s.pool_read_retries.load(Relaxed));
    w.field("pool_queue_wait_count", s.queue_wait.count());
    w.field(
        "pool_queue_wait_avg_usec",
        format!("{:.2}", s.queue_wait.mean_us()),
    );
    w.field("pool_queue_wait_p99_usec", s.queue_wait.quantile_us(0.99));
}

/// The worker pool's counters (`kvik_pool_*`, end of the stats section); see pool::PoolStats.
fn pool_fields(server: &Server, w: &mut Lines<'_>) {
    let Some(pool) = server.pool.get() else {
        return;
    };
    let p = pool.stats();
    w.field("kvik_pool_mode", p.mode);
    w.field("kvik_pool_wait", p.wait);
    w.field("kvik_pool_workers", p.workers);
    w.field(
        "kvik_io_threads",
        server.io_handles.get().map_or(0, |h| h.len()),
    );
    w.field("kvik_pool_lists", p.lists);
    w.field("kvik_pool_submitted", p.submitted);
    w.field("kvik_pool_completed", p.completed);
    w.field("kvik_pool_panics", p.panics);
    w.field("kvik_pool_batches", p.batches);
    w.field("kvik_pool_spin_hits", p.spin_hits);
    w.field("kvik_pool_yield_entered", p.yield_entered);
    w.field("kvik_pool_yield_hits", p.yield_hits);
    w.field("kvik_pool_yield_slow_exits", p.yield_slow_exits);
    w.field("kvik_pool_yield_skipped", p.yield_skipped);
    w.field("kvik_pool_parks", p.parks);
    w.field("kvik_pool_yield_credit", p.credit);
    w.field("kvik_pool_producer_yields", p.producer_yields);
    w.field("kvik_pool_producer_blocks", p.producer_blocks);
    slow_lane_fields(server, w);
}

/// The slow lane (`kvik_slow_lane_*`; see pool::slow_lane): its threads, the runs it took, and
/// the commands it would take now.
fn slow_lane_fields(server: &Server, w: &mut Lines<'_>) {
    let lane = &server.slow_lane;
    let (threads, jobs) = lane.counts();
    let threshold = server.config.slow_lane_threshold_us.load(Relaxed);
    let table = crate::cmd::table();
    let slow: Vec<&str> = (0..table.len())
        .filter(|&id| lane.is_slow(id, threshold))
        .map(|id| table.entry(id).full_name.as_str())
        .collect();
    w.field("kvik_slow_lane_threads", threads);
    w.field("kvik_slow_lane_jobs", jobs);
    w.field("kvik_slow_lane_commands", slow.join(","));
}

fn replication_section(server: &Server, w: &mut Lines<'_>) {
    let snap = server.repl.snapshot(&server.storage);
    let now = std::time::Instant::now();
    match &snap.following {
        None => w.field("role", "master"),
        Some(f) => {
            let up = f.state == crate::replication::LinkState::Connected;
            w.field("role", "slave");
            w.field("master_host", &f.host);
            w.field("master_port", f.port);
            w.field("master_link_status", if up { "up" } else { "down" });
            w.field(
                "master_last_io_seconds_ago",
                f.last_io
                    .map_or(-1, |t| now.saturating_duration_since(t).as_secs() as i64),
            );
            let syncing = f.state == crate::replication::LinkState::Sync;
            w.field("master_sync_in_progress", u8::from(syncing));
            if syncing {
                // Redis's transfer fields; read bytes include those kept from a cut transfer.
                let left = f.sync_total.saturating_sub(f.sync_read);
                let perc = match f.sync_total {
                    0 => 0.0,
                    t => f.sync_read as f64 * 100.0 / t as f64,
                };
                w.field("master_sync_total_bytes", f.sync_total);
                w.field("master_sync_read_bytes", f.sync_read);
                w.field("master_sync_left_bytes", left);
                w.field("master_sync_perc", format!("{perc:.2}"));
                w.field(
                    "master_sync_last_io_seconds_ago",
                    f.last_io
                        .map_or(-1, |t| now.saturating_duration_since(t).as_secs() as i64),
                );
            }
            w.field("slave_read_repl_offset", snap.offset);
            w.field("slave_repl_offset", snap.offset);
            w.field("slave_priority", 100);
            w.field(
                "slave_read_only",
                u8::from(server.config.repl.read_only.load(Relaxed)),
            );
            w.field("replica_announced", 1);
        }
    }
    w.field("connected_slaves", snap.replicas.len());
    let settings = &server.config.repl;
    // kvik: the write lease (`replication::lease`); the controller reads the setting to wait
    // for a failed primary's lease to lapse before promoting a replica.
    let (lease_state, lease_left) = server.repl.lease.describe(server);
    w.field("kvik_write_lease_ms", settings.write_lease_ms.load(Relaxed));
    w.field("kvik_write_lease", lease_state);
    w.field("kvik_write_lease_left_ms", lease_left);
    let max_lag = settings.min_replicas_max_lag.load(Relaxed);
    if settings.min_replicas_to_write.load(Relaxed) > 0 && max_lag > 0 {
        // As Redis: only while min-replicas-to-write is in force.
        w.field("min_slaves_good_slaves", server.repl.good_replicas(max_lag));
    }
    for (i, r) in snap.replicas.iter().enumerate() {
        w.field(
            &format!("slave{i}"),
            format!(
                "ip={},port={},state={},offset={},lag={}{}",
                r.ip,
                r.port,
                match (r.syncing, r.sync_total) {
                    (false, _) => "online",
                    (true, 0) => "wait_bgsave",
                    (true, _) => "send_bulk",
                },
                r.ack,
                now.saturating_duration_since(r.ack_at).as_secs(),
                match r.sync_total {
                    0 => String::new(),
                    t => format!(",kvik_sync_sent={},kvik_sync_total={t}", r.sync_sent),
                }
            ),
        );
    }
    w.field("master_failover_state", server.repl.failover.state_name());
    w.field("master_replid", &snap.replid);
    w.field("master_replid2", &snap.replid2);
    w.field("master_repl_offset", snap.offset);
    w.field("second_repl_offset", snap.second_offset);
    let oldest = server.storage.oldest_wal_seq();
    w.field("repl_backlog_active", u8::from(oldest.is_some()));
    w.field("repl_backlog_size", settings.wal_size_limit.load(Relaxed));
    w.field("repl_backlog_first_byte_offset", oldest.unwrap_or(0));
    w.field(
        "repl_backlog_histlen",
        oldest.map_or(0, |o| snap.offset.saturating_sub(o) + 1),
    );
    w.field("kvik_repl_wal_ttl", settings.wal_ttl_secs.load(Relaxed));
    let archive = server.storage.wal_archive();
    w.field("kvik_repl_wal_archived_bytes", archive.bytes.load(Relaxed));
    w.field("kvik_repl_wal_archived_files", archive.files.load(Relaxed));
    w.field(
        "kvik_repl_wal_retention_deleted_files",
        archive.deleted_files.load(Relaxed),
    );
    let backlog = server.storage.backlog();
    w.field("kvik_repl_backlog_size", backlog.capacity());
    w.field("kvik_repl_backlog_bytes", backlog.bytes());
    w.field(
        "kvik_repl_backlog_batches_served",
        backlog.served.load(Relaxed),
    );
    w.field("kvik_repl_backlog_gaps", backlog.gaps.load(Relaxed));
    w.field("kvik_repl_wal_reads", server.repl.wal_reads.load(Relaxed));
    let fs = &server.repl.fullsync;
    w.field(
        "kvik_fullsync_max_bytes_per_sec",
        settings.fullsync_max_bps.load(Relaxed),
    );
    w.field("kvik_fullsync_sent_bytes", fs.sent_bytes.load(Relaxed));
    w.field(
        "kvik_fullsync_skipped_bytes",
        fs.skipped_bytes.load(Relaxed),
    );
    w.field(
        "kvik_fullsync_resumes_served",
        fs.resumes_served.load(Relaxed),
    );
    w.field(
        "kvik_fullsync_throttled_waits",
        fs.throttled_waits.load(Relaxed),
    );
    w.field("kvik_fullsync_checkpoints_kept", server.repl.shelf.len());
    w.field(
        "kvik_fullsync_received_bytes",
        fs.received_bytes.load(Relaxed),
    );
    w.field("kvik_fullsync_resumes", fs.resumes.load(Relaxed));
}

/// (system, user) CPU seconds of `who`, formatted as Redis ("%ld.%06ld").
fn rusage(who: libc::c_int) -> (String, String) {
    // SAFETY: getrusage fills the zeroed struct.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    let f = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (f(ru.ru_stime), f(ru.ru_utime))
}

fn cpu_section(w: &mut Lines<'_>) {
    let (sys, user) = rusage(libc::RUSAGE_SELF);
    let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
    w.field("used_cpu_sys", sys);
    w.field("used_cpu_user", user);
    w.field("used_cpu_sys_children", csys);
    w.field("used_cpu_user_children", cuser);
}

fn commandstats_section(server: &Server, w: &mut Lines<'_>) {
    for c in server.stats.commands.iter() {
        let calls = c.calls.load(Relaxed);
        let rejected = c.rejected_calls.load(Relaxed);
        if calls == 0 && rejected == 0 {
            continue;
        }
        let usec = c.usec.load(Relaxed);
        let per_call = if calls == 0 {
            0.0
        } else {
            usec as f64 / calls as f64
        };
        w.field(
            &format!("cmdstat_{}", c.name),
            format_args!(
                "calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={}",
                c.failed_calls.load(Relaxed)
            ),
        );
    }
}

/// `latency_percentiles_usec_<command>:p50=...,p99=...` for the commands that ran, at the
/// percentiles of `latency-tracking-info-percentiles` (each the top of its histogram bucket).
fn latencystats_section(server: &Server, w: &mut Lines<'_>) {
    let percentiles: Vec<f64> = crate::config::Param::lookup("latency-tracking-info-percentiles")
        .map(|p| p.get(&server.config))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    for (id, c) in server.stats.commands.iter().enumerate() {
        let Some(h) = server.latency.histogram(id) else {
            continue;
        };
        let values: Vec<String> = percentiles
            .iter()
            .map(|p| format!("p{p}={:.3}", h.percentile(*p) as f64))
            .collect();
        w.field(
            &format!("latency_percentiles_usec_{}", c.name),
            values.join(","),
        );
    }
}

fn keyspace_section(server: &Server, w: &mut Lines<'_>) {
    let storage = &server.storage;
    for db in 0..server.config.databases() {
        let on_disk = storage.dbs().physical(db);
        let keys = storage.key_count(on_disk);
        if keys > 0 {
            w.field(
                &format!("db{db}"),
                format_args!(
                    "keys={keys},expires={},avg_ttl={}",
                    storage.expires_count(on_disk),
                    storage.avg_ttl_ms(on_disk)
                ),
            );
        }
    }
}

/// RocksDB statistics tickers INFO rocksdb shows, as (field, ticker).
const TICKERS: &[(&str, Ticker)] = &[
    ("block_cache_hit", Ticker::BlockCacheHit),
    ("block_cache_miss", Ticker::BlockCacheMiss),
    ("block_cache_index_hit", Ticker::BlockCacheIndexHit),
    ("block_cache_index_miss", Ticker::BlockCacheIndexMiss),
    ("block_cache_filter_hit", Ticker::BlockCacheFilterHit),
    ("block_cache_filter_miss", Ticker::BlockCacheFilterMiss),
    ("block_cache_data_hit", Ticker::BlockCacheDataHit),
    ("block_cache_data_miss", Ticker::BlockCacheDataMiss),
    ("bloom_filter_useful", Ticker::BloomFilterUseful),
    (
        "bloom_filter_full_positive",
        Ticker::BloomFilterFullPositive,
    ),
    (
        "bloom_filter_full_true_positive",
        Ticker::BloomFilterFullTruePositive,
    ),
    ("stall_micros", Ticker::StallMicros),
    // Entries iterators stepped over without returning them: tombstones and older versions
    // (a pop from a sorted set's head reading past the members popped before it).
    ("iter_skipped", Ticker::NumberIterSkip),
    // Steps and seeks of iterators: what a walk over members read (a count that stops at its
    // LIMIT steps over a chunk, not the whole set).
    ("iter_next", Ticker::NumberDbNext),
    ("iter_seek", Ticker::NumberDbSeek),
    // What flushes and compactions wrote and read; the `marked` ones are the compactions of
    // files marked dense in deletions (`rocksdb-tombstone-cleanup`).
    ("flush_write_bytes", Ticker::FlushWriteBytes),
    ("compact_read_bytes", Ticker::CompactReadBytes),
    ("compact_write_bytes", Ticker::CompactWriteBytes),
    ("compact_read_marked_bytes", Ticker::CompactReadBytesMarked),
    (
        "compact_write_marked_bytes",
        Ticker::CompactWriteBytesMarked,
    ),
];

/// DB-wide integer properties INFO rocksdb shows, as (field, property).
const DB_PROPERTIES: &[(&str, &str)] = &[
    ("is_write_stopped", "rocksdb.is-write-stopped"),
    (
        "actual_delayed_write_rate",
        "rocksdb.actual-delayed-write-rate",
    ),
    ("num_running_flushes", "rocksdb.num-running-flushes"),
    ("num_running_compactions", "rocksdb.num-running-compactions"),
];

/// Per column family integer properties, as (field, property); one `cf_<name>` line each.
const CF_PROPERTIES: &[(&str, &str)] = &[
    ("l0_files", "rocksdb.num-files-at-level0"),
    (
        "pending_compaction_bytes",
        "rocksdb.estimate-pending-compaction-bytes",
    ),
    ("compaction_pending", "rocksdb.compaction-pending"),
    ("memtable_flush_pending", "rocksdb.mem-table-flush-pending"),
    ("immutable_memtables", "rocksdb.num-immutable-mem-table"),
    ("memtable_bytes", "rocksdb.cur-size-all-mem-tables"),
    ("memtable_entries", "rocksdb.num-entries-active-mem-table"),
    ("estimate_num_keys", "rocksdb.estimate-num-keys"),
    ("sst_bytes", "rocksdb.total-sst-files-size"),
    ("live_data_bytes", "rocksdb.estimate-live-data-size"),
    ("table_readers_mem", "rocksdb.estimate-table-readers-mem"),
];

/// INFO rocksdb: block cache use and hit counts (index, filter and data blocks apart), filter
/// usefulness, write stalls, compaction backlog and L0 files per column family. The counters
/// are RocksDB statistics tickers (collected at `ExceptHistogramOrTimers`, see
/// `storage::options`); the rest are RocksDB properties read on the spot.
fn rocksdb_section(server: &Server, w: &mut Lines<'_>) {
    let st = &server.storage;
    let shared = st.shared();
    w.field("block_cache_capacity", shared.block_cache_capacity());
    w.field("block_cache_usage", shared.block_cache.get_usage());
    w.field(
        "block_cache_pinned_usage",
        shared.block_cache.get_pinned_usage(),
    );
    for (field, property) in DB_PROPERTIES {
        w.field(field, st.db_property(property));
    }
    for (field, ticker) in TICKERS {
        w.field(field, shared.ticker(*ticker));
    }
    let hits = shared.ticker(Ticker::BlockCacheHit);
    let lookups = hits + shared.ticker(Ticker::BlockCacheMiss);
    w.field(
        "block_cache_hit_ratio",
        format_args!("{:.2}", hits as f64 * 100.0 / lookups.max(1) as f64),
    );
    w.field("write_buffers_usage", shared.write_buffers.get_usage());
    w.field(
        "write_buffers_limit",
        shared.write_buffers.get_buffer_size(),
    );
    w.field(
        "compact_rate_limit",
        server.config.compact_rate_limit.load(Relaxed),
    );
    // Memtables flushed for their entry count (`rocksdb-memtable-max-entries`).
    w.field("memtable_entry_flushes", st.memtable_entry_flushes());
    // Memtables of deletions flushed once writes stopped (`rocksdb-tombstone-cleanup`).
    w.field("memtable_deletion_flushes", st.memtable_deletion_flushes());
    for cf in crate::storage::COLUMN_FAMILIES {
        let mut line = String::new();
        for (i, (field, property)) in CF_PROPERTIES.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(line, "{sep}{field}={}", st.cf_property(cf, property));
        }
        w.field(&format!("cf_{cf}"), line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_follow_redis_selection_rules() {
        assert!(!selected(&[]).contains(&Section::Commandstats));
        assert!(!selected(&[]).contains(&Section::Rocksdb));
        assert!(!selected(&[]).contains(&Section::Latencystats));
        assert_eq!(selected(&[]).len(), ORDER.len() - 3);
        assert_eq!(selected(&[b"RocksDB"]), vec![Section::Rocksdb]);
        assert_eq!(selected(&[b"ALL"]).len(), ORDER.len());
        assert_eq!(selected(&[b"everything"]).len(), ORDER.len());
        assert_eq!(
            selected(&[b"keyspace", b"Cluster", b"keyspace"]),
            vec![Section::Cluster, Section::Keyspace]
        );
        assert!(selected(&[b"nosuch"]).is_empty());
        assert_eq!(
            selected(&[b"default", b"commandstats"]).len(),
            ORDER.len() - 2
        );
    }

    #[test]
    fn human_bytes_match_redis() {
        assert_eq!(bytes_to_human(1023), "1023B");
        assert_eq!(bytes_to_human(1536), "1.50K");
        assert_eq!(bytes_to_human(1311504), "1.25M");
        assert_eq!(bytes_to_human(0), "0B");
    }
}
