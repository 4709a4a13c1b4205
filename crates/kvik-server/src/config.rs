//! Settings: one table ([`SETTINGS`]) drives the command line, the config file, CONFIG GET and
//! CONFIG SET, so a setting is declared exactly once.
//!
//! Names and value syntax follow redis.conf where Redis has the same knob (`port`, `appendfsync`,
//! `client-output-buffer-limit`, memory sizes such as `512mb` ...). Precedence: built-in default,
//! then the config file, then `--name value` flags. Values live in atomics or small locks so a
//! running server reads them without coordination; settings marked immutable refuse CONFIG SET.
//!
//! Every other parameter of Redis 7.0's redis.conf is a row of [`redis_params::REDIS_PARAMS`]:
//! accepted with Redis's syntax, stored and reported, with no effect. [`Param`] is the one view
//! of both tables that CONFIG GET / SET and the config file use.

pub mod redis_params;
pub mod rewrite;
pub mod threads;

use crate::storage::budget::Split;
use crate::storage::options::{BottomCompression, StallLimits, Tuning};
use crate::storage::FsyncPolicy;
use parking_lot::RwLock;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};

/// The output buffer limit of one client class (`client-output-buffer-limit <class> hard soft
/// secs`); 0 means no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

#[derive(Debug)]
pub struct Config {
    pub port: AtomicU64,
    pub bind: RwLock<Vec<String>>,
    pub dir: RwLock<PathBuf>,
    pub io_threads: AtomicU64,
    pub workers: AtomicU64,
    /// `slow-lane-threads` and `slow-lane-threshold-us` (see pool::slow_lane).
    pub slow_lane_threads: AtomicU64,
    pub slow_lane_threshold_us: AtomicU64,
    /// `pool-mode`, `workers-per-link` and the `pool-*` tunables (see pool::adaptive).
    pub pool: crate::pool::PoolSettings,
    pub databases: AtomicU64,
    pub requirepass: RwLock<Option<String>>,
    pub appendfsync: RwLock<FsyncPolicy>,
    pub maxclients: AtomicU64,
    pub timeout: AtomicU64,
    pub proto_max_bulk_len: AtomicU64,
    pub client_query_buffer_limit: AtomicU64,
    /// All three classes as given (normal, replica, pubsub); kvik applies `normal`.
    pub client_output_buffer_limit: RwLock<[OutputLimit; 3]>,
    pub loglevel: RwLock<String>,
    pub logfile: RwLock<String>,
    /// jemalloc's background purge thread and dirty page decay (see `allocator`).
    pub jemalloc_bg_thread: AtomicBool,
    pub jemalloc_dirty_decay_ms: AtomicI64,
    pub slowlog_log_slower_than: AtomicI64,
    pub slowlog_max_len: AtomicU64,
    /// `busy-reply-threshold` (alias `lua-time-limit`), ms: a script running longer makes the
    /// server answer BUSY to other clients and lets SCRIPT KILL / FUNCTION KILL stop it.
    pub busy_reply_threshold_ms: AtomicU64,
    pub hz: AtomicU64,
    pub active_expire: AtomicBool,
    /// `active-expire-effort` (1-10, Redis's): how much of each timer tick the active expiry
    /// cycle may take (see `storage::expire::tick_share_percent`).
    pub active_expire_effort: AtomicU64,
    /// Hot cache settings (see `cache`); the server pushes changes into the cache.
    pub cache_enabled: AtomicBool,
    /// The memory budget (`maxmemory`; 0: derived from the machine's memory) and the hot
    /// cache's share of it (`cache-maxmemory`; 0: a share); see `storage::budget`.
    pub maxmemory: AtomicU64,
    pub cache_maxmemory: AtomicU64,
    /// `compact-rate-limit`: RocksDB's rate limiter, bytes per second (0: none).
    pub compact_rate_limit: AtomicU64,
    /// `rocksdb-write-buffer-size`: the largest memtable of one column family.
    pub max_write_buffer_bytes: AtomicU64,
    /// `rocksdb-memtable-max-entries` (see `storage::memtables`; 0: no limit).
    pub memtable_max_entries: AtomicU64,
    /// `rocksdb-bottom-compression` (see `storage::options::BottomCompression`).
    pub bottom_compression: RwLock<BottomCompression>,
    /// `rocksdb-tombstone-cleanup` (see `storage::options::TombstoneCleanup`).
    pub tombstone_cleanup: AtomicBool,
    /// `rocksdb-pin-partitions` (see `storage::options::Tuning::pin_partitions`).
    pub pin_partitions: AtomicBool,
    /// `rocksdb-filters-for-hits` (see `storage::options::Tuning::filters_for_hits`).
    pub filters_for_hits: AtomicBool,
    /// `rocksdb-key-block-size` (see `storage::options::Tuning::key_block_bytes`).
    pub key_block_bytes: AtomicU64,
    /// Free bytes on the data directory's file system below which writes are refused
    /// (`disk-free-min`); [`DISK_FREE_AUTO`]: the memtables' budget plus 256 MiB.
    pub disk_free_min: AtomicU64,
    /// `rocksdb-*` write stall thresholds (see `storage::options::StallLimits`).
    pub level0_slowdown_writes_trigger: AtomicU64,
    pub level0_stop_writes_trigger: AtomicU64,
    pub soft_pending_compaction_bytes_limit: AtomicU64,
    pub hard_pending_compaction_bytes_limit: AtomicU64,
    pub cache_shards: AtomicU64,
    pub cache_max_key_size: AtomicU64,
    pub cache_max_hash_fields: AtomicU64,
    pub cache_list_elements: AtomicU64,
    pub cache_policy: RwLock<crate::cache::Policy>,
    pub cache_fill_delay_us: AtomicU64,
    /// Answer cache hits of rtc commands on the I/O thread.
    pub rtc_read: AtomicBool,
    pub group_commit: AtomicBool,
    /// With `appendfsync always`, fsync on the WAL's sync thread while the I/O threads go on.
    pub fsync_thread: AtomicBool,
    pub rtc_write: AtomicBool,
    /// `rtc-zset-reads`: sorted-set counts and ranges that walk little run on the I/O thread
    /// (`cmd::zset::ZSet::may_step`).
    pub rtc_zset_reads: AtomicBool,
    /// Run scripts and functions on the I/O thread while they stay short and in memory.
    pub rtc_scripts: AtomicBool,
    /// Write an I/O thread's run-to-completion writes of one event-loop turn as one batch.
    pub rtc_write_batch: AtomicBool,
    pub txn_skip_superseded: AtomicBool,
    /// `scan-prefix-seek` (see `cmd::keys::visit_keys`).
    pub scan_prefix_seek: AtomicBool,
    /// `scan-prefix-seek-min-keys`.
    pub scan_prefix_seek_min_keys: AtomicU64,
    /// `string-edit-inline-max` (see `storage::encoding`; 0: never segmented).
    pub string_edit_inline_max: AtomicU64,
    /// `zset-rank-index-min-len` (see `cache::rank`; 0: off).
    pub zset_rank_index_min_len: AtomicU64,
    /// `zset-rank-index-scores` (see `cache::rank`).
    pub zset_rank_index_scores: AtomicBool,
    /// `set-rank-index` (see `cmd::ranked::member_picks`).
    pub set_rank_index: AtomicBool,
    /// `set-rank-index-prefixes` (see `cache::rank`).
    pub set_rank_index_prefixes: AtomicBool,
    /// `rank-index-split-len` (see `cache::rank`; 0: buckets are never split).
    pub rank_index_split_len: AtomicU64,
    /// How long an I/O thread polls without sleeping after a busy turn (`net::io_thread`).
    pub io_poll_spin_us: AtomicU64,
    /// Read a hot-cache miss of a simple read from RocksDB on the I/O thread.
    pub rtc_storage_read: AtomicBool,
    /// An I/O thread's run-to-completion reads may leave RocksDB's memory (`cmd::disk_gate`).
    pub rtc_disk_read: AtomicBool,
    pub rtc_disk_read_slow_us: AtomicU64,
    /// Stop trying a command on the I/O thread while its tries keep falling back (`cmd::rtc_backoff`).
    pub rtc_backoff: AtomicBool,
    /// `pool-reads-unlocked`: a worker runs a read of the I/O threads' kind without its keys'
    /// locks, checked against writes as they check theirs (`cmd::isolation`).
    pub pool_reads_unlocked: AtomicBool,
    /// `rtc-lock-wait-us` (see `cmd::ctx::io_thread_lock_wait`).
    pub rtc_lock_wait_us: AtomicU64,
    /// `rtc-lock-retries`: turns an I/O thread tries a command again whose key another thread
    /// held, before the pool runs it (`net::io_thread`, `Conn::retry`).
    pub rtc_lock_retries: AtomicU64,
    /// `io-key-affinity`: a connection whose command found its key held by another I/O thread
    /// moves to that key's I/O thread (`net::io_thread`, `IoThread::move_out`).
    pub io_key_affinity: AtomicBool,
    /// `io-threads-adaptive`: how many I/O threads take connections follows their load and
    /// whether they wait for cores (`net::balance`).
    pub io_threads_adaptive: AtomicBool,
    pub cache_write_allocate: AtomicBool,
    pub cache_absent_keys: AtomicBool,
    pub cache_hash_writes: AtomicBool,
    pub cache_big_hashes: AtomicBool,
    pub cache_sets: AtomicBool,
    /// `cache-prefetch`: before an I/O thread runs a pipelined run, it asks the CPU for the
    /// hot-cache lines its keys will read (`Cache::prefetch`).
    pub cache_prefetch: AtomicBool,
    pub cache_admission: AtomicBool,
    pub wal_flush_hold: AtomicBool,
    /// `cluster-*` settings (see `crate::cluster`).
    pub cluster: crate::cluster::ClusterSettings,
    /// `notify-keyspace-events` and the pubsub output hard limit, shared with the pub/sub
    /// registry (see `crate::pubsub`).
    pub pubsub: std::sync::Arc<crate::pubsub::PubSubSettings>,
    /// `replicaof`, `masterauth`, `replica-read-only` and the WAL retention (see
    /// `crate::replication`).
    pub repl: ReplSettings,
    /// The values of the [`redis_params::REDIS_PARAMS`] rows, in table order, canonical.
    pub redis_params: RwLock<Vec<String>>,
    /// ACL users (`user` lines, `aclfile`, `requirepass`) and the ACL log (see `crate::acl`).
    pub acl: crate::acl::Acl,
    /// The config file the server started with (absolute), which CONFIG REWRITE rewrites.
    pub config_file: RwLock<Option<PathBuf>>,
}

/// Replication settings.
#[derive(Debug, Default)]
pub struct ReplSettings {
    /// `replicaof host port` from the config file or flags: the primary to follow at start.
    pub replicaof: RwLock<Option<(String, u16)>>,
    /// `masterauth`: the password this replica AUTHs with at its primary.
    pub masterauth: RwLock<Option<String>>,
    /// `replica-read-only`: a replica refuses write commands with READONLY.
    pub read_only: AtomicBool,
    /// `repl-wal-ttl`, seconds, and `repl-wal-size-limit`, bytes: the WAL kept for replicas.
    pub wal_ttl_secs: AtomicU64,
    pub wal_size_limit: AtomicU64,
    /// `repl-backlog-size`, bytes: the recent batches a primary feeds replicas from memory
    /// (`storage::backlog`); 0: off, every replica reads the WAL.
    pub backlog_size: AtomicU64,
    /// `min-replicas-to-write` and `min-replicas-max-lag` (seconds): a primary refuses writes
    /// (NOREPLICAS) while fewer replicas acknowledged within the lag; 0 in either: no check.
    pub min_replicas_to_write: AtomicU64,
    pub min_replicas_max_lag: AtomicU64,
    /// `repl-fullsync-max-bytes-per-sec`: the rate a primary sends a full sync's checkpoint
    /// at, per replica (0: no limit).
    pub fullsync_max_bps: AtomicU64,
    /// `repl-fullsync-resume-ttl`, seconds: how long a primary keeps a checkpoint whose
    /// transfer was cut, for its replica to resume (0: never resumed).
    pub fullsync_resume_ttl: AtomicU64,
    /// `cluster-write-lease-ms`: a cluster primary with replicas accepts writes only while
    /// renewed within this many milliseconds (`replication::lease`); 0: off.
    pub write_lease_ms: AtomicU64,
}

fn parse_replicaof(v: &str) -> Result<Option<(String, u16)>, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    match words.as_slice() {
        [] => Ok(None),
        [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => Ok(None),
        [host, port] => Ok(Some((
            host.to_string(),
            port.parse()
                .map_err(|_| "Invalid master port".to_string())?,
        ))),
        _ => Err("replicaof takes a host and a port".into()),
    }
}

fn show_replicaof(c: &Config) -> String {
    c.repl
        .replicaof
        .read()
        .as_ref()
        .map(|(h, p)| format!("{h} {p}"))
        .unwrap_or_default()
}

/// One setting: its name, default, whether CONFIG SET may change it, help text, and how to read
/// and write it.
pub struct Setting {
    pub name: &'static str,
    pub default: &'static str,
    pub mutable: bool,
    pub help: &'static str,
    pub get: fn(&Config) -> String,
    pub set: fn(&Config, &str) -> Result<(), String>,
}

fn parse_u64(v: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

fn parse_i64(v: &str) -> Result<i64, String> {
    v.parse::<i64>()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

/// A memory size as redis.conf writes it: `1024`, `100k` (1000), `100kb` (1024), `5mb`, `1gb`.
/// `disk-free-min auto`.
pub const DISK_FREE_AUTO: u64 = u64::MAX;
/// What `disk-free-min auto` adds to the memtables' budget.
const DISK_FREE_MARGIN: u64 = 256 << 20;
/// `rocksdb-memtable-max-entries`' default (the setting's `default` says the same).
const DEFAULT_MEMTABLE_MAX_ENTRIES: u64 = 131_072;

impl Config {
    /// `disk-free-min` in bytes, with `auto` resolved against the memtables' budget.
    pub fn disk_free_floor(&self, write_buffer_bytes: u64) -> u64 {
        match self.disk_free_min.load(Relaxed) {
            DISK_FREE_AUTO => write_buffer_bytes + DISK_FREE_MARGIN,
            n => n,
        }
    }
}

pub fn parse_memory(v: &str) -> Result<u64, String> {
    let lower = v.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| "argument must be a memory value".to_string())?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return Err("argument must be a memory value".into()),
    };
    n.checked_mul(mul)
        .ok_or_else(|| "argument must be a memory value".into())
}

fn parse_output_limits(v: &str, current: [OutputLimit; 3]) -> Result<[OutputLimit; 3], String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("wrong number of arguments".into());
    }
    let mut limits = current;
    for chunk in words.chunks(4) {
        let class = match chunk[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "replica" | "slave" => 1,
            "pubsub" => 2,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        limits[class] = OutputLimit {
            hard: parse_memory(chunk[1])?,
            soft: parse_memory(chunk[2])?,
            soft_secs: parse_u64(chunk[3])?,
        };
    }
    Ok(limits)
}

fn show_output_limits(l: &[OutputLimit; 3]) -> String {
    // Redis 7.0 still shows the replica class as "slave".
    ["normal", "slave", "pubsub"]
        .iter()
        .zip(l.iter())
        .map(|(n, l)| format!("{n} {} {} {}", l.hard, l.soft, l.soft_secs))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Log levels in Redis's words, mapped onto tracing's.
pub const LOG_LEVELS: &[(&str, &str)] = &[
    ("debug", "debug"),
    ("verbose", "debug"),
    ("notice", "info"),
    ("warning", "warn"),
    ("nothing", "off"),
];

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// Every setting kvik knows.
pub static SETTINGS: &[Setting] = &[
    Setting {
        name: "cluster-enabled",
        default: "no",
        mutable: false,
        help: "cluster mode: 16384 slots, MOVED/ASK redirects, topology pushed with CLUSTER SETTOPOLOGY",
        get: |c| yes_no(c.cluster.enabled.load(Relaxed)),
        set: |c, v| {
            c.cluster.enabled.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cluster-reply-cache",
        default: "yes",
        mutable: true,
        help: "reuse rendered CLUSTER SLOTS/SHARDS/NODES replies until the topology changes",
        get: |c| yes_no(c.cluster.reply_cache.load(Relaxed)),
        set: |c, v| {
            c.cluster.reply_cache.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cluster-reply-cache-verify",
        default: "no",
        mutable: true,
        help: "testing: compare every cached CLUSTER reply with a fresh rendering (a mismatch fails the command)",
        get: |c| yes_no(c.cluster.reply_cache_verify.load(Relaxed)),
        set: |c, v| {
            c.cluster.reply_cache_verify.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cluster-require-full-coverage",
        default: "yes",
        mutable: true,
        help: "refuse key commands (CLUSTERDOWN) while some slot has no owner",
        get: |c| yes_no(c.cluster.require_full_coverage.load(Relaxed)),
        set: |c, v| {
            c.cluster.require_full_coverage.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cluster-preferred-endpoint-type",
        default: "ip",
        mutable: true,
        help: "how nodes are shown to clients: ip, hostname (both the topology's host) or unknown-endpoint",
        get: |c| c.cluster.endpoint().name().into(),
        set: |c, v| {
            c.cluster.set_endpoint(crate::cluster::EndpointKind::parse(v).ok_or(
                "argument(s) must be one of the following: ip, hostname, unknown-endpoint",
            )?);
            Ok(())
        },
    },
    Setting {
        name: "port",
        default: "6379",
        mutable: false,
        help: "TCP port to listen on (0 picks a free port and logs it)",
        get: |c| c.port.load(Relaxed).to_string(),
        set: |c, v| {
            let p = parse_u64(v)?;
            if p > 65535 {
                return Err("argument must be between 0 and 65535 inclusive".into());
            }
            c.port.store(p, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "bind",
        default: "127.0.0.1",
        mutable: false,
        help: "addresses to listen on, separated by spaces",
        get: |c| c.bind.read().join(" "),
        set: |c, v| {
            let addrs: Vec<String> = v.split_whitespace().map(String::from).collect();
            if addrs.is_empty() {
                return Err("bind needs at least one address".into());
            }
            *c.bind.write() = addrs;
            Ok(())
        },
    },
    Setting {
        name: "dir",
        default: "./kvik-data",
        mutable: false,
        help: "directory of the database (created if missing)",
        get: |c| c.dir.read().display().to_string(),
        set: |c, v| {
            *c.dir.write() = PathBuf::from(v);
            Ok(())
        },
    },
    Setting {
        name: "io-threads",
        default: "auto",
        mutable: false,
        help: "number of I/O threads (event loops); auto: from the machine's cores (see threads.rs)",
        get: |c| threads::show(&c.io_threads),
        set: |c, v| threads::set(&c.io_threads, v, 128),
    },
    Setting {
        name: "workers",
        default: "auto",
        mutable: false,
        help: "number of worker threads that run commands against storage; auto: from the machine's cores",
        get: |c| threads::show(&c.workers),
        set: |c, v| threads::set(&c.workers, v, 1024),
    },
    Setting {
        name: "slow-lane-threads",
        default: "1",
        mutable: false,
        help: "threads of their own for the commands that have been taking long (KEYS over a big keyspace, whole big collections, long scripts), so they cannot hold every worker and core from the quick ones (0: they run on the workers like the rest)",
        get: |c| c.slow_lane_threads.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.slow_lane_threads, v, 0, 64),
    },
    Setting {
        name: "slow-lane-threshold-us",
        default: "10000",
        mutable: true,
        help: "a command whose recent run times average at least this many microseconds runs on the slow lane (slow-lane-threads) when it goes to the pool; as Redis's slowlog-log-slower-than default (at least 1000)",
        get: |c| c.slow_lane_threshold_us.load(Relaxed).to_string(),
        set: |c, v| {
            let quick = u64::from(crate::pool::slow_lane::QUICK_US);
            set_range(&c.slow_lane_threshold_us, v, quick, u64::MAX)
        },
    },
    Setting {
        name: "pool-mode",
        default: "adaptive",
        mutable: false,
        help: "worker pool: adaptive (lock-free lists, spin/yield/park wait) or classic (mutex + condvar queue)",
        get: |c| c.pool.mode.read().name().into(),
        set: |c, v| {
            *c.pool.mode.write() = crate::pool::PoolMode::parse(v)
                .ok_or("argument(s) must be one of the following: adaptive, classic")?;
            Ok(())
        },
    },
    Setting {
        name: "pool-wait",
        default: "adaptive",
        mutable: false,
        help: "how an idle adaptive-pool worker waits: adaptive (spin, yield, park) or block (park at once)",
        get: |c| c.pool.wait.read().name().into(),
        set: |c, v| {
            *c.pool.wait.write() = crate::pool::WaitMode::parse(v)
                .ok_or("argument(s) must be one of the following: adaptive, block")?;
            Ok(())
        },
    },
    Setting {
        name: "workers-per-link",
        default: "2",
        mutable: false,
        help: "adaptive pool: workers sharing one lock-free task list",
        get: |c| c.pool.workers_per_link.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pool.workers_per_link, v, 1, 1024),
    },
    Setting {
        name: "pool-spin",
        default: "200",
        mutable: false,
        help: "adaptive pool, wait level 1: checks of the list, one CPU pause each (0: skip)",
        get: |c| c.pool.spin.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pool.spin, v, 0, 1_000_000),
    },
    Setting {
        name: "pool-max-yield-us",
        default: "100",
        mutable: false,
        help: "adaptive pool, wait level 2: longest yield loop, in microseconds",
        get: |c| c.pool.max_yield_us.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pool.max_yield_us, v, 0, 1_000_000),
    },
    Setting {
        name: "pool-slow-yield-us",
        default: "3",
        mutable: false,
        help: "adaptive pool: a yield taking at least this many microseconds counts as slow (CPU contended)",
        get: |c| c.pool.slow_yield_us.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pool.slow_yield_us, v, 0, 1_000_000),
    },
    Setting {
        name: "pool-slow-yields",
        default: "3",
        mutable: false,
        help: "adaptive pool: slow yields that end wait level 2 and count against the yield credit",
        get: |c| c.pool.slow_yields.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pool.slow_yields, v, 1, 1_000_000),
    },
    Setting {
        name: "pool-sampling",
        default: "256",
        mutable: false,
        help: "adaptive pool: one wait in this many enters level 2 and updates the credit",
        get: |c| c.pool.sampling.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pool.sampling, v, 1, 1 << 30),
    },
    Setting {
        name: "pool-list-slow-size",
        default: "1024",
        mutable: false,
        help: "adaptive pool: above this many queued jobs a producer yields once before pushing",
        get: |c| c.pool.list_slow_size.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pool.list_slow_size, v, 0, 1 << 40),
    },
    Setting {
        name: "pool-list-max-size",
        default: "65536",
        mutable: false,
        help: "adaptive pool: at this many queued jobs a producer blocks until a worker takes the list",
        get: |c| c.pool.list_max_size.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pool.list_max_size, v, 1, 1 << 40),
    },
    Setting {
        name: "databases",
        default: "16",
        mutable: false,
        help: "number of logical databases (SELECT 0..n-1)",
        get: |c| c.databases.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.databases, v, 1, 65535),
    },
    Setting {
        name: "requirepass",
        default: "",
        mutable: true,
        help: "password clients must AUTH with (empty: none)",
        get: |c| c.requirepass.read().clone().unwrap_or_default(),
        set: |c, v| {
            *c.requirepass.write() = (!v.is_empty()).then(|| v.to_string());
            c.acl.set_requirepass(v);
            Ok(())
        },
    },
    Setting {
        name: "appendfsync",
        default: "everysec",
        mutable: true,
        help: "WAL sync policy: always (before each reply), everysec, no",
        get: |c| c.appendfsync.read().name().to_string(),
        set: |c, v| {
            *c.appendfsync.write() =
                FsyncPolicy::parse(v).ok_or("argument(s) must be one of the following: everysec, always, no")?;
            Ok(())
        },
    },
    Setting {
        name: "maxclients",
        default: "10000",
        mutable: true,
        help: "maximum number of connected clients",
        get: |c| c.maxclients.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.maxclients, v, 1, u32::MAX as u64),
    },
    Setting {
        name: "timeout",
        default: "0",
        mutable: true,
        help: "close a client idle for this many seconds (0: never)",
        get: |c| c.timeout.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.timeout, v, 0, i32::MAX as u64),
    },
    Setting {
        name: "proto-max-bulk-len",
        default: "512mb",
        mutable: true,
        help: "largest bulk string a client may send",
        get: |c| c.proto_max_bulk_len.load(Relaxed).to_string(),
        set: |c, v| {
            let n = parse_memory(v)?;
            if n < 1024 * 1024 {
                return Err("argument must be a memory value bigger than 1mb".into());
            }
            c.proto_max_bulk_len.store(n, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "client-query-buffer-limit",
        default: "1gb",
        mutable: true,
        help: "largest query buffer of one client before it is disconnected",
        get: |c| c.client_query_buffer_limit.load(Relaxed).to_string(),
        set: |c, v| {
            let n = parse_memory(v)?;
            if n < 1024 * 1024 {
                return Err("argument must be a memory value bigger than 1mb".into());
            }
            c.client_query_buffer_limit.store(n, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "client-output-buffer-limit",
        default: "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60",
        mutable: true,
        help: "<class> <hard> <soft> <soft-seconds> ...: disconnect clients whose output grows past it",
        get: |c| show_output_limits(&c.client_output_buffer_limit.read()),
        set: |c, v| {
            let current = *c.client_output_buffer_limit.read();
            let limits = parse_output_limits(v, current)?;
            *c.client_output_buffer_limit.write() = limits;
            c.pubsub.hard_limit.store(limits[2].hard, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "notify-keyspace-events",
        default: "",
        mutable: true,
        help: "keyspace event classes to publish (Redis's letters: K E g $ l s h z x e t m d n A)",
        get: |c| crate::pubsub::notify::render_flags(c.pubsub.notify_flags()),
        set: |c, v| {
            let flags = crate::pubsub::notify::parse_flags(v)?;
            c.pubsub.notify.store(flags.bits(), Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "loglevel",
        default: "notice",
        mutable: true,
        help: "debug, verbose, notice, warning or nothing",
        get: |c| c.loglevel.read().clone(),
        set: |c, v| {
            let v = v.to_ascii_lowercase();
            if !LOG_LEVELS.iter().any(|(n, _)| *n == v) {
                return Err("argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into());
            }
            *c.loglevel.write() = v;
            Ok(())
        },
    },
    Setting {
        name: "logfile",
        default: "",
        mutable: false,
        help: "log file path (empty: standard output)",
        get: |c| c.logfile.read().clone(),
        set: |c, v| {
            *c.logfile.write() = v.to_string();
            Ok(())
        },
    },
    Setting {
        name: "slowlog-log-slower-than",
        default: "10000",
        mutable: true,
        help: "log commands slower than this many microseconds (-1: off, 0: all)",
        get: |c| c.slowlog_log_slower_than.load(Relaxed).to_string(),
        set: |c, v| {
            c.slowlog_log_slower_than.store(parse_i64(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "slowlog-max-len",
        default: "128",
        mutable: true,
        help: "number of slowlog entries kept",
        get: |c| c.slowlog_max_len.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.slowlog_max_len, v, 0, i64::MAX as u64),
    },
    Setting {
        name: "busy-reply-threshold",
        default: "5000",
        mutable: true,
        help: "ms a script may run before other clients get BUSY and SCRIPT KILL may stop it",
        get: |c| c.busy_reply_threshold_ms.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.busy_reply_threshold_ms, v, 0, i64::MAX as u64),
    },
    Setting {
        name: "replicaof",
        default: "",
        mutable: false,
        help: "host port of the primary to follow at start (REPLICAOF changes it at run time)",
        get: show_replicaof,
        set: |c, v| {
            *c.repl.replicaof.write() = parse_replicaof(v)?;
            Ok(())
        },
    },
    Setting {
        name: "slaveof",
        default: "",
        mutable: false,
        help: "alias of replicaof",
        get: show_replicaof,
        set: |c, v| {
            *c.repl.replicaof.write() = parse_replicaof(v)?;
            Ok(())
        },
    },
    Setting {
        name: "masterauth",
        default: "",
        mutable: true,
        help: "password a replica sends to its primary (AUTH)",
        get: |c| c.repl.masterauth.read().clone().unwrap_or_default(),
        set: |c, v| {
            *c.repl.masterauth.write() = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        },
    },
    Setting {
        name: "replica-read-only",
        default: "yes",
        mutable: true,
        help: "a replica refuses write commands (READONLY)",
        get: |c| if c.repl.read_only.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.repl.read_only.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "slave-read-only",
        default: "yes",
        mutable: true,
        help: "alias of replica-read-only",
        get: |c| if c.repl.read_only.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.repl.read_only.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "min-replicas-to-write",
        default: "0",
        mutable: true,
        help: "a primary refuses writes (NOREPLICAS) while fewer replicas lag at most min-replicas-max-lag (0: never)",
        get: |c| c.repl.min_replicas_to_write.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.repl.min_replicas_to_write, v, 0, i32::MAX as u64),
    },
    Setting {
        name: "cluster-write-lease-ms",
        default: "0",
        mutable: true,
        help: "a cluster primary with replicas refuses writes (CLUSTERDOWN) unless the leader kvik-controller or every replica renewed its lease within this many ms; a promoted node holds writes one lease (0: off)",
        get: |c| c.repl.write_lease_ms.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.repl.write_lease_ms, v, 0, 3_600_000),
    },
    Setting {
        name: "min-slaves-to-write",
        default: "0",
        mutable: true,
        help: "alias of min-replicas-to-write",
        get: |c| c.repl.min_replicas_to_write.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.repl.min_replicas_to_write, v, 0, i32::MAX as u64),
    },
    Setting {
        name: "min-replicas-max-lag",
        default: "10",
        mutable: true,
        help: "seconds since a replica's last acknowledgement for it to count for min-replicas-to-write (0: no check)",
        get: |c| c.repl.min_replicas_max_lag.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.repl.min_replicas_max_lag, v, 0, i32::MAX as u64),
    },
    Setting {
        name: "min-slaves-max-lag",
        default: "10",
        mutable: true,
        help: "alias of min-replicas-max-lag",
        get: |c| c.repl.min_replicas_max_lag.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.repl.min_replicas_max_lag, v, 0, i32::MAX as u64),
    },
    Setting {
        name: "repl-wal-ttl",
        default: "3600",
        mutable: false,
        help: "seconds RocksDB keeps obsolete WAL files for replicas to catch up from (0: no time bound)",
        get: |c| c.repl.wal_ttl_secs.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.repl.wal_ttl_secs, v, 0, 10 * 365 * 86400),
    },
    Setting {
        name: "repl-wal-size-limit",
        default: "512mb",
        mutable: false,
        help: "most obsolete WAL kept for replicas, rounded up to MiB (0: no size bound; with repl-wal-ttl 0 too, none is kept)",
        get: |c| c.repl.wal_size_limit.load(Relaxed).to_string(),
        set: |c, v| {
            c.repl.wal_size_limit.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "repl-backlog-size",
        default: "1mb",
        mutable: true,
        help: "bytes of recent write batches a primary keeps in memory to feed replicas without reading the WAL (0: off, replicas tail the WAL file)",
        get: |c| c.repl.backlog_size.load(Relaxed).to_string(),
        set: |c, v| {
            c.repl.backlog_size.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "repl-fullsync-max-bytes-per-sec",
        default: "0",
        mutable: true,
        help: "most bytes per second a full sync's checkpoint is sent at, per replica (0: no limit; takes 10mb-style units)",
        get: |c| c.repl.fullsync_max_bps.load(Relaxed).to_string(),
        set: |c, v| {
            c.repl.fullsync_max_bps.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "repl-fullsync-resume-ttl",
        default: "300",
        mutable: true,
        help: "seconds a primary keeps the checkpoint of a cut full sync for its replica to resume from (0: no resume)",
        get: |c| c.repl.fullsync_resume_ttl.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.repl.fullsync_resume_ttl, v, 0, 7 * 86400),
    },
    Setting {
        name: "lua-time-limit",
        default: "5000",
        mutable: true,
        help: "alias of busy-reply-threshold",
        get: |c| c.busy_reply_threshold_ms.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.busy_reply_threshold_ms, v, 0, i64::MAX as u64),
    },
    Setting {
        name: "appendonly",
        default: "yes",
        mutable: false,
        help: "always yes: every write goes through RocksDB's WAL (kept for Redis tools that ask)",
        get: |_| "yes".into(),
        set: |_, v| match parse_bool(v)? {
            true => Ok(()),
            false => Err("kvik always logs writes (RocksDB's WAL); appendonly cannot be turned off".into()),
        },
    },
    Setting {
        name: "hz",
        default: "10",
        mutable: true,
        help: "timer frequency for background tasks (active expiry, stats)",
        get: |c| c.hz.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.hz, v, 1, 500),
    },
    Setting {
        name: "active-expire",
        default: "yes",
        mutable: true,
        help: "run the active expiry cycle (lazy expiry always runs)",
        get: |c| if c.active_expire.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.active_expire.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "active-expire-effort",
        default: "1",
        mutable: true,
        help: "share of each timer tick the active expiry cycle may take: 25% at 1, 2 points more per step up to 43% at 10; 75% while it is behind",
        get: |c| c.active_expire_effort.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.active_expire_effort, v, 1, 10),
    },
    Setting {
        name: "cache-enabled",
        default: "yes",
        mutable: true,
        help: "hot cache in front of RocksDB (turning it off empties it; on starts cold)",
        get: |c| if c.cache_enabled.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.cache_enabled.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "maxmemory",
        default: "0",
        mutable: true,
        help: "memory budget of the hot cache, block cache, memtables and table readers together (0: a quarter of the machine's memory, at least 256mb); data beyond it stays on disk, nothing is evicted",
        get: |c| c.maxmemory.load(Relaxed).to_string(),
        set: |c, v| {
            c.maxmemory.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-maxmemory",
        default: "0",
        mutable: true,
        help: "memory bound of the hot cache (keys, values and per-entry overhead); 0: half of maxmemory after RocksDB's reserve",
        get: |c| c.cache_maxmemory.load(Relaxed).to_string(),
        set: |c, v| {
            c.cache_maxmemory.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "jemalloc-bg-thread",
        default: "yes",
        mutable: true,
        help: "a jemalloc thread returns freed memory to the kernel on the decay schedule (as Redis's); no: only threads that allocate do, when they pass by",
        get: |c| if c.jemalloc_bg_thread.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.jemalloc_bg_thread.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "jemalloc-dirty-decay-ms",
        default: "1000",
        mutable: true,
        help: "milliseconds memory the server freed stays in its RSS before jemalloc returns it to the kernel (jemalloc's own default: 10000; 0: at once, -1: never)",
        get: |c| c.jemalloc_dirty_decay_ms.load(Relaxed).to_string(),
        set: |c, v| {
            let n = parse_i64(v)?;
            if !(-1..=3_600_000).contains(&n) {
                return Err("argument must be between -1 and 3600000 inclusive".into());
            }
            c.jemalloc_dirty_decay_ms.store(n, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "disk-free-min",
        default: "auto",
        mutable: true,
        help: "free space on the data directory's file system below which write commands (and PING) get MISCONF, so RocksDB never meets a full disk (auto: the memtables' budget plus 256mb, room to flush them; 0: never)",
        get: |c| match c.disk_free_min.load(Relaxed) {
            DISK_FREE_AUTO => "auto".into(),
            n => n.to_string(),
        },
        set: |c, v| {
            let n = if v.eq_ignore_ascii_case("auto") {
                DISK_FREE_AUTO
            } else {
                parse_memory(v)?
            };
            c.disk_free_min.store(n, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "compact-rate-limit",
        default: "0",
        mutable: false,
        help: "bytes per second RocksDB's flushes and compactions may write (memory syntax, e.g. 64mb; 0: no limit)",
        get: |c| c.compact_rate_limit.load(Relaxed).to_string(),
        set: |c, v| {
            c.compact_rate_limit.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rocksdb-write-buffer-size",
        default: "64mb",
        mutable: true,
        help: "largest memtable of one column family (the memory budget may make it smaller; a change applies from the next memtable on)",
        get: |c| c.max_write_buffer_bytes.load(Relaxed).to_string(),
        set: |c, v| set_memory_range(&c.max_write_buffer_bytes, v, 1 << 20, 1 << 30),
    },
    Setting {
        name: "rocksdb-memtable-max-entries",
        default: "131072",
        mutable: true,
        help: "entries at which a column family's memtable is flushed, read every timer tick: a write's insert slows as a memtable's entries outgrow the CPU caches (0: by size only)",
        get: |c| c.memtable_max_entries.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.memtable_max_entries, v, 0, 1 << 40),
    },
    Setting {
        name: "rocksdb-bottom-compression",
        default: "lz4",
        mutable: true,
        help: "compression of the bottommost level, where most data rests: lz4 (faster reads and compactions), zstd (about a third less disk), none; a change applies to the files compactions write next",
        get: |c| c.bottom_compression.read().name().to_string(),
        set: |c, v| {
            *c.bottom_compression.write() = BottomCompression::parse(v)
                .ok_or("argument(s) must be one of the following: lz4, zstd, none")?;
            Ok(())
        },
    },
    Setting {
        name: "rocksdb-tombstone-cleanup",
        default: "yes",
        mutable: false,
        help: "compact soon the files dense in deletions, and flush a memtable that scans step over many deleted entries in, so a mass HDEL, SREM or pop does not slow later scans of what is left (HSCAN, HGETALL, ZRANGE, ZSCAN); set at start",
        get: |c| if c.tombstone_cleanup.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.tombstone_cleanup.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rocksdb-pin-partitions",
        default: "no",
        mutable: false,
        help: "hold every SST's index and filter partitions for as long as the file is open, so a read that misses the hot cache finds them without a block cache lookup: uncached GETs at 10M keys take 3-5% less CPU, for about 2 bytes of memory per key (charged to the block cache, past the budget once they outgrow it); set at start",
        get: |c| if c.pin_partitions.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.pin_partitions.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rocksdb-filters-for-hits",
        default: "no",
        mutable: false,
        help: "keys get no filter at the bottommost level: reads and overwrites of keys that exist skip a filter probe (5-15% faster when uncached) and compactions build fewer filters, but a read of a key that does not exist reads a data block; for data whose keys are mostly found; set at start",
        get: |c| if c.filters_for_hits.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.filters_for_hits.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rocksdb-key-block-size",
        default: "4kb",
        mutable: false,
        help: "data block size of the keys' SST files: an uncached read decompresses one block for its one key, so smaller blocks make reads that miss the caches a little cheaper (1kb: 3-6% less CPU per uncached GET of 100-byte values) but SCAN slower (15-25%, 2x with 1 KB values) and the files ~15% larger; fields and members keep 4kb; set at start, files keep their blocks until compacted",
        get: |c| c.key_block_bytes.load(Relaxed).to_string(),
        set: |c, v| set_memory_range(&c.key_block_bytes, v, 256, 1 << 20),
    },
    Setting {
        name: "rocksdb-level0-slowdown-writes-trigger",
        default: "20",
        mutable: true,
        help: "L0 files of a column family at which RocksDB slows writes down",
        get: |c| c.level0_slowdown_writes_trigger.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.level0_slowdown_writes_trigger, v, 1, 1 << 20),
    },
    Setting {
        name: "rocksdb-level0-stop-writes-trigger",
        default: "36",
        mutable: true,
        help: "L0 files of a column family at which RocksDB stops writes until compaction catches up",
        get: |c| c.level0_stop_writes_trigger.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.level0_stop_writes_trigger, v, 1, 1 << 20),
    },
    Setting {
        name: "rocksdb-soft-pending-compaction-bytes-limit",
        default: "64gb",
        mutable: true,
        help: "bytes awaiting compaction at which RocksDB slows writes down (0: never)",
        get: |c| c.soft_pending_compaction_bytes_limit.load(Relaxed).to_string(),
        set: |c, v| {
            c.soft_pending_compaction_bytes_limit.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rocksdb-hard-pending-compaction-bytes-limit",
        default: "256gb",
        mutable: true,
        help: "bytes awaiting compaction at which RocksDB stops writes (0: never)",
        get: |c| c.hard_pending_compaction_bytes_limit.load(Relaxed).to_string(),
        set: |c, v| {
            c.hard_pending_compaction_bytes_limit.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-shards",
        default: "16",
        mutable: false,
        help: "number of hot cache shards (each with its own lock)",
        get: |c| c.cache_shards.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.cache_shards, v, 1, 4096),
    },
    Setting {
        name: "cache-max-key-size",
        default: "512",
        mutable: true,
        help: "longest key the hot cache holds, in bytes",
        get: |c| c.cache_max_key_size.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.cache_max_key_size, v, 0, u32::MAX as u64),
    },
    Setting {
        name: "cache-max-hash-fields",
        default: "512",
        mutable: true,
        help: "largest hash (in fields) the hot cache holds whole",
        get: |c| c.cache_max_hash_fields.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.cache_max_hash_fields, v, 0, u32::MAX as u64),
    },
    Setting {
        name: "cache-list-elements",
        default: "1024",
        mutable: true,
        help: "most elements of a list's head the hot cache holds (at most 64 KiB of them), filled by LRANGE and LINDEX, so reads of a list's first elements (LRANGE 0 N, LINDEX, LLEN) answer from memory on the I/O thread; a write of the list drops it (0: lists are not cached)",
        get: |c| c.cache_list_elements.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.cache_list_elements, v, 0, 1 << 20),
    },
    Setting {
        name: "cache-policy",
        default: "lfu",
        mutable: true,
        help: "hot cache eviction: lfu (sampled, decaying frequency) or lru (sampled recency)",
        get: |c| c.cache_policy.read().name().into(),
        set: |c, v| {
            *c.cache_policy.write() = crate::cache::Policy::parse(v)
                .ok_or("argument(s) must be one of the following: lfu, lru")?;
            Ok(())
        },
    },
    Setting {
        name: "cache-write-allocate",
        default: "yes",
        mutable: true,
        help: "a written string enters the hot cache even if it was not cached (no: writes only update cached keys)",
        get: |c| if c.cache_write_allocate.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.cache_write_allocate.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-absent-keys",
        default: "yes",
        mutable: true,
        help: "a read that finds no key notes it in the hot cache as absent, so the next read of it (GET of a missing key, EXISTS, SET NX) needs no RocksDB lookup",
        get: |c| if c.cache_absent_keys.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.cache_absent_keys.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-hash-writes",
        default: "yes",
        mutable: true,
        help: "a write of a small hash the hot cache holds (HSET, HDEL, HINCRBY ...) reads its fields from the cached copy and updates it (no: the write reads RocksDB and drops the copy)",
        get: |c| if c.cache_hash_writes.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.cache_hash_writes.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-big-hashes",
        default: "yes",
        mutable: true,
        help: "a hash with more fields than cache-max-hash-fields is cached as its meta record and its fields one by one, as reads ask for them (HGET, HMGET, HEXISTS, HSTRLEN, HLEN); a write of the hash drops them (no: every read of such a hash reads RocksDB)",
        get: |c| if c.cache_big_hashes.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.cache_big_hashes.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-sets",
        default: "yes",
        mutable: true,
        help: "sets and sorted sets are cached as their meta record and their members one by one, filled by writes (SADD, SREM, ZADD, ZINCRBY ...) and by SISMEMBER, SMISMEMBER, ZSCORE, ZMSCORE, SCARD, ZCARD, which then answer from memory, as does a write's read of a member's prior state (no: every such read or write reads RocksDB)",
        get: |c| if c.cache_sets.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.cache_sets.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-admission",
        default: "yes",
        mutable: true,
        help: "a full hot cache admits a key a read missed only if it was asked for more often lately than the entry it would evict (a frequency sketch of ~1.6% of cache-maxmemory); no: every miss fills",
        get: |c| if c.cache_admission.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.cache_admission.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-prefetch",
        default: "yes",
        mutable: true,
        help: "before an I/O thread runs the commands of a pipelined read, it asks the CPU for the hot-cache lines their keys will read, all at once, so their memory latencies overlap; no: each lookup waits for its own",
        get: |c| if c.cache_prefetch.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.cache_prefetch.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "cache-fill-delay-us",
        default: "0",
        mutable: true,
        help: "testing only: delay between a cache miss's disk read and its cache fill",
        get: |c| c.cache_fill_delay_us.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.cache_fill_delay_us, v, 0, 1_000_000),
    },
    Setting {
        name: "group-commit",
        default: "yes",
        mutable: true,
        help: "write the WAL once for all the writes whose replies go out together (no: once per write)",
        get: |c| if c.group_commit.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.group_commit.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "fsync-thread",
        default: "yes",
        mutable: true,
        help: "with appendfsync always, an I/O thread hands its turn's fsync to a thread of its own and goes on serving while it runs (replies still wait for it); no: it waits in the fsync",
        get: |c| if c.fsync_thread.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.fsync_thread.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rtc-write",
        default: "yes",
        mutable: true,
        help: "run simple writes (SET, INCR, HSET, SADD, ZADD, SETBIT, PFADD, XADD ...) and the reads of bitmaps, geo sets and streams on the I/O thread when nothing would wait",
        get: |c| if c.rtc_write.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.rtc_write.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rtc-zset-reads",
        default: "yes",
        mutable: true,
        help: "ZRANK, ZREVRANK, ZCOUNT, ZLEXCOUNT and the sorted-set range reads (ZRANGE, ZREVRANGE, ZRANGEBYSCORE ...) that walk at most 512 members (a small set, a short range from an end or after a seek, a count through a rank index) run on the I/O thread, under rtc-write; no: on a worker",
        get: |c| if c.rtc_zset_reads.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.rtc_zset_reads.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "io-poll-spin-us",
        default: "50",
        mutable: true,
        help: "after a turn that served requests, an I/O thread keeps polling its sockets without sleeping (yielding its core between polls) for up to this many microseconds before it sleeps in epoll: the next request is picked up without a wake-up; 0: sleep at once",
        get: |c| c.io_poll_spin_us.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.io_poll_spin_us, v, 0, 10_000),
    },
    Setting {
        name: "rtc-write-batch",
        default: "yes",
        mutable: true,
        help: "the writes an I/O thread runs to completion in one turn of its event loop (all its clients' pipelines) reach RocksDB as one batch, one WAL record, at the end of the turn before its group commit; their keys stay locked until then",
        get: |c| if c.rtc_write_batch.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.rtc_write_batch.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "txn-skip-superseded",
        default: "yes",
        mutable: true,
        help: "a batch written as one (an I/O thread's turn, EXEC, a script) leaves out the writes of a record that a later write in it replaces: a hot key written many times in one turn costs one RocksDB memtable insert",
        get: |c| if c.txn_skip_superseded.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.txn_skip_superseded.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "scan-prefix-seek",
        default: "yes",
        mutable: true,
        help: "SCAN MATCH and KEYS with a pattern that starts with literal text (user:*) read only the keys that start with it, seeking from slot to slot, in a database of scan-prefix-seek-min-keys keys or more (a pattern with a whole hash tag reads its one slot always); HSCAN, SSCAN and ZSCAN MATCH read only the members that start with it; no: they walk every key and member, as Redis does",
        get: |c| if c.scan_prefix_seek.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.scan_prefix_seek.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "scan-prefix-seek-min-keys",
        default: "1048576",
        mutable: true,
        help: "keys a database holds from which scan-prefix-seek seeks a pattern's prefix: the 16,384 seeks cost about as much as walking a million keys",
        get: |c| c.scan_prefix_seek_min_keys.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.scan_prefix_seek_min_keys, v, 0, u64::MAX),
    },
    Setting {
        name: "string-edit-inline-max",
        default: "64kb",
        mutable: true,
        help: "the longest string APPEND and SETRANGE leave in one record; a string they make longer is kept in 4 KiB segments, as a long bitmap is, so each edit writes the segments it touches instead of the whole string (a GET of a segmented string costs about twice an inline one's); 0: always one record, each edit rewriting it whole",
        get: |c| c.string_edit_inline_max.load(Relaxed).to_string(),
        set: |c, v| {
            c.string_edit_inline_max.store(parse_memory(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "zset-rank-index-min-len",
        default: "2048",
        mutable: true,
        help: "ZRANK, ZREVRANK, ZCOUNT, ZRANGE by rank, ZREMRANGEBYRANK, far LIMIT offsets of score ranges, ZRANDMEMBER, and ZLEXCOUNT and lex ranges of a set of one score, on a sorted set of this many members or more that the hot cache holds (cache-sets), count through a rank index (each bucket of about 64 members counted, in memory) instead of stepping over every member before the one asked for; built by the first query that needs it, kept up by writes, up to a 32nd of cache-maxmemory for all sets; 0: off (a walk, from the nearer end; the indexes are dropped)",
        get: |c| c.zset_rank_index_min_len.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.zset_rank_index_min_len, v, 0, u64::MAX),
    },
    Setting {
        name: "zset-rank-index-scores",
        default: "yes",
        mutable: true,
        help: "a sorted set's rank index (zset-rank-index-min-len) also keeps each member's score, 8 bytes a member: ZCOUNT is counted in memory, ZRANK and ZREVRANK of a member whose score no other member of its bucket shares too, and a rank from the middle (ZRANGE, LIMIT offsets, ZRANDMEMBER) seeks its member's score instead of walking from its bucket's start, so ranges 32 or more members from an end or a range's start go through the index (128 without); a build that would outgrow the indexes' memory with the scores is kept without them; no: fences and counts only (~0.8 bytes a member), each such query walks inside a bucket of ~64; a change drops the indexes held",
        get: |c| if c.zset_rank_index_scores.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.zset_rank_index_scores.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "set-rank-index",
        default: "yes",
        mutable: true,
        help: "SRANDMEMBER, HRANDFIELD and SPOP of a set or hash too big for a deck (more than 65,536 members, or refused one for want of room) that the hot cache holds (cache-sets, cache-big-hashes) draw uniform random ranks through a rank index of its member order (as ZRANDMEMBER does through a sorted set's): a seek and a walk inside a bucket of about 64 members per pick instead of a walk down the member bytes of dozens of seeks; built by the first such pick, kept up by writes, within zset-rank-index-min-len's memory (a 32nd of cache-maxmemory for all indexes); no: sampled by walks",
        get: |c| if c.set_rank_index.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.set_rank_index.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "set-rank-index-prefixes",
        default: "yes",
        mutable: true,
        help: "a set's or hash's rank index (set-rank-index) also keeps 8 bytes of each member, taken after the bytes its first and last members share (element:0000 of element:000000012345), so a random pick seeks its own member instead of walking from its bucket's start; 8 bytes a member, within the indexes' memory (a build that would outgrow it with them is kept without them); no: fences and counts only; a change drops the indexes held",
        get: |c| if c.set_rank_index_prefixes.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.set_rank_index_prefixes.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rank-index-split-len",
        default: "512",
        mutable: true,
        help: "a bucket of a rank index (zset-rank-index-min-len, set-rank-index) that inserts at one place grow past this many members (new players of a leaderboard all at one score) is split into buckets of about 64 by the next query that lands in it, one walk of the bucket; values below 256 count as 256; 0: never split (each query there walks the whole bucket, and one that outgrows 8,192 members drops the index, which the next query builds again by a walk of the whole collection)",
        get: |c| c.rank_index_split_len.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.rank_index_split_len, v, 0, 8192),
    },
    Setting {
        name: "rtc-scripts",
        default: "yes",
        mutable: true,
        help: "run EVAL, EVALSHA and FCALL (and their _RO forms) on the I/O thread when their keys are free and their commands answer from memory; a script that would wait or runs past 2 ms starts again on a worker, having changed nothing",
        get: |c| if c.rtc_scripts.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.rtc_scripts.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rtc-storage-read",
        default: "yes",
        mutable: true,
        help: "when a simple read (GET, MGET, HGET, EXISTS, TTL ...) misses the hot cache, read it from RocksDB on the I/O thread (its memtables and block cache, and its files while rtc-disk-read allows) before handing it to a worker",
        get: |c| if c.rtc_storage_read.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.rtc_storage_read.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rtc-disk-read",
        default: "yes",
        mutable: true,
        help: "an I/O thread running a command to completion may read RocksDB's files (the OS page cache) itself while those reads stay fast (rtc-disk-read-slow-us); no: its reads keep to RocksDB's memory and anything else goes to a worker",
        get: |c| if c.rtc_disk_read.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.rtc_disk_read.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rtc-disk-read-slow-us",
        default: "1000",
        mutable: true,
        help: "a run-to-completion try that may read the disk and takes longer than this many microseconds is slow (a network disk's read, not local flash or the page cache); when more than 16 of 64 are, that I/O thread leaves disk reads to the workers for a while (0: every try is slow)",
        get: |c| c.rtc_disk_read_slow_us.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.rtc_disk_read_slow_us, v, 0, 1_000_000),
    },
    Setting {
        name: "rtc-lock-wait-us",
        default: "300",
        mutable: true,
        help: "how long (microseconds) an I/O thread that keeps no key locked for its turn waits for a key another thread holds before it puts the command off to a later turn (rtc-lock-retries) or hands it to a worker (20: as while it keeps some); longer keeps more hot-key writes on the I/O threads at some cost in tail latency",
        get: |c| c.rtc_lock_wait_us.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.rtc_lock_wait_us, v, 0, 100_000),
    },
    Setting {
        name: "rtc-lock-retries",
        default: "8",
        mutable: true,
        help: "how many later turns an I/O thread tries a command again whose key another thread held past rtc-lock-wait-us (the holder, another I/O thread's turn, lets go within a turn), before it hands the command and the rest of its pipeline to a worker (0: at once, as before)",
        get: |c| c.rtc_lock_retries.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.rtc_lock_retries, v, 0, 1_000),
    },
    Setting {
        name: "io-key-affinity",
        default: "yes",
        mutable: true,
        help: "a connection whose command finds its key held by another I/O thread moves to the I/O thread that key belongs to (at most once a second), so the writers of one hot key share one thread instead of waiting on each other (no: connections stay where they were accepted)",
        get: |c| if c.io_key_affinity.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.io_key_affinity.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "io-threads-adaptive",
        default: "yes",
        mutable: true,
        help: "how many of the io-threads take connections follows their load: when they would each be under 60% busy with one thread fewer and they wait for cores (the clients share the machine), one fewer does (its connections move at the end of a turn); when the active ones are over 85% busy, one more (decided once a second; INFO stats io_threads_active). no: every I/O thread takes connections",
        get: |c| if c.io_threads_adaptive.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.io_threads_adaptive.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rtc-backoff",
        default: "yes",
        mutable: true,
        help: "while most of an I/O thread's recent run-to-completion tries of a command fell back to a worker, hand that command to a worker untried for a while (no: try every time)",
        get: |c| if c.rtc_backoff.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.rtc_backoff.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "pool-reads-unlocked",
        default: "yes",
        mutable: true,
        help: "a worker runs a read that the I/O threads may run without locks (GET, HGET, MGET, ZRANDMEMBER ...) without its keys' locks too, checked against writes as they check theirs; one that a write overlapped runs again under the locks (no: every read on a worker takes its keys' locks, and blocks the I/O threads' reads of those keys meanwhile)",
        get: |c| if c.pool_reads_unlocked.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.pool_reads_unlocked.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "pubsub-rtc-max-receivers",
        default: "1024",
        mutable: true,
        help: "most receivers a PUBLISH delivers to on the I/O thread (more: a worker delivers; 0: always a worker)",
        get: |c| c.pubsub.rtc_max_receivers.load(Relaxed).to_string(),
        set: |c, v| set_range(&c.pubsub.rtc_max_receivers, v, 0, u32::MAX as u64),
    },
    Setting {
        name: "wal-flush-hold",
        default: "no",
        mutable: true,
        help: "testing only: WAL flushes wait while yes (replies of writes are held back)",
        get: |c| if c.wal_flush_hold.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.wal_flush_hold.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
    Setting {
        name: "rtc-read",
        default: "yes",
        mutable: true,
        help: "answer cache hits of simple reads on the I/O thread (run-to-completion)",
        get: |c| if c.rtc_read.load(Relaxed) { "yes" } else { "no" }.into(),
        set: |c, v| {
            c.rtc_read.store(parse_bool(v)?, Relaxed);
            Ok(())
        },
    },
];

fn set_range(a: &AtomicU64, v: &str, min: u64, max: u64) -> Result<(), String> {
    store_in_range(a, parse_u64(v)?, min, max)
}

/// [`set_range`] for a size in memory syntax (`8mb`).
fn set_memory_range(a: &AtomicU64, v: &str, min: u64, max: u64) -> Result<(), String> {
    store_in_range(a, parse_memory(v)?, min, max)
}

fn store_in_range(a: &AtomicU64, n: u64, min: u64, max: u64) -> Result<(), String> {
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    a.store(n, Relaxed);
    Ok(())
}

/// kvik settings that are Redis's legacy name of another setting: (alias, canonical name).
const SETTING_ALIASES: &[(&str, &str)] = &[
    ("slaveof", "replicaof"),
    ("slave-read-only", "replica-read-only"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
];

/// Finds a setting by name, case-insensitively.
pub fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// One parameter of either table: a setting kvik acts on, or a Redis parameter it only stores
/// (an index into [`redis_params::REDIS_PARAMS`]).
#[derive(Clone, Copy, Debug)]
pub enum Param {
    Kvik(&'static Setting),
    Redis(usize),
}

impl std::fmt::Debug for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Param {
    /// The parameter `name` names (its canonical name or an alias), case-insensitively. A kvik
    /// setting wins over a Redis row of the same name.
    pub fn lookup(name: &str) -> Option<Param> {
        if let Some(s) = setting(name) {
            return Some(Param::Kvik(s));
        }
        redis_params::REDIS_PARAMS
            .iter()
            .position(|p| {
                p.name.eq_ignore_ascii_case(name)
                    || p.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
            })
            .filter(|&i| !Self::shadowed(i))
            .map(Param::Redis)
    }

    /// True if a kvik setting takes the place of Redis row `i` (by its name or an alias).
    fn shadowed(i: usize) -> bool {
        let p = &redis_params::REDIS_PARAMS[i];
        std::iter::once(p.name)
            .chain(p.aliases.iter().copied())
            .any(|n| setting(n).is_some())
    }

    /// Every name CONFIG GET may list (aliases included, as Redis 7.0 lists them), with its
    /// parameter.
    pub fn all() -> impl Iterator<Item = (&'static str, Param)> {
        let kvik = SETTINGS.iter().map(|s| (s.name, Param::Kvik(s)));
        let redis = redis_params::REDIS_PARAMS
            .iter()
            .enumerate()
            .filter(|(i, _)| !Self::shadowed(*i))
            .flat_map(|(i, p)| {
                std::iter::once(p.name)
                    .chain(p.aliases.iter().copied())
                    .map(move |n| (n, Param::Redis(i)))
            });
        kvik.chain(redis)
    }

    /// The canonical name (two aliases of one parameter have the same).
    pub fn name(self) -> &'static str {
        match self {
            Param::Kvik(s) => SETTING_ALIASES
                .iter()
                .find(|(alias, _)| *alias == s.name)
                .map_or(s.name, |(_, canonical)| canonical),
            Param::Redis(i) => redis_params::REDIS_PARAMS[i].name,
        }
    }

    /// The built-in default.
    pub fn default_value(self) -> &'static str {
        match self {
            Param::Kvik(s) => s.default,
            Param::Redis(i) => redis_params::REDIS_PARAMS[i].default,
        }
    }

    /// One line for `--help`.
    pub fn help(self) -> String {
        match self {
            Param::Kvik(s) => s.help.to_string(),
            Param::Redis(i) => match redis_params::REDIS_PARAMS[i].no_effect {
                redis_params::IN_EFFECT => "Redis parameter, as in Redis 7.0".to_string(),
                why => format!("Redis parameter, stored with no effect: {why}"),
            },
        }
    }

    pub fn mutable(self) -> bool {
        match self {
            Param::Kvik(s) => s.mutable,
            Param::Redis(i) => redis_params::REDIS_PARAMS[i].mutable,
        }
    }

    /// The current value, in Redis's canonical form.
    pub fn get(self, c: &Config) -> String {
        match self {
            Param::Kvik(s) => (s.get)(c),
            Param::Redis(i) => c.redis_params.read()[i].clone(),
        }
    }

    /// Checks and stores `value` (mutability is the caller's business: the config file may set
    /// immutable parameters).
    pub fn set(self, c: &Config, value: &str) -> Result<(), String> {
        match self {
            Param::Kvik(s) => (s.set)(c, value),
            Param::Redis(i) => {
                let v = redis_params::REDIS_PARAMS[i].kind.canonical(value)?;
                c.redis_params.write()[i] = v;
                Ok(())
            }
        }
    }
}

impl Default for Config {
    /// The built-in defaults of every setting.
    fn default() -> Config {
        let c = Config {
            port: AtomicU64::new(0),
            bind: RwLock::new(Vec::new()),
            dir: RwLock::new(PathBuf::new()),
            io_threads: AtomicU64::new(0),
            workers: AtomicU64::new(0),
            slow_lane_threads: AtomicU64::new(0),
            slow_lane_threshold_us: AtomicU64::new(0),
            pool: Default::default(),
            databases: AtomicU64::new(0),
            requirepass: RwLock::new(None),
            appendfsync: RwLock::new(FsyncPolicy::Everysec),
            maxclients: AtomicU64::new(0),
            timeout: AtomicU64::new(0),
            proto_max_bulk_len: AtomicU64::new(0),
            client_query_buffer_limit: AtomicU64::new(0),
            client_output_buffer_limit: RwLock::new([OutputLimit::default(); 3]),
            loglevel: RwLock::new(String::new()),
            logfile: RwLock::new(String::new()),
            jemalloc_bg_thread: AtomicBool::new(true),
            jemalloc_dirty_decay_ms: AtomicI64::new(0),
            slowlog_log_slower_than: AtomicI64::new(0),
            slowlog_max_len: AtomicU64::new(0),
            busy_reply_threshold_ms: AtomicU64::new(0),
            hz: AtomicU64::new(0),
            active_expire: AtomicBool::new(true),
            active_expire_effort: AtomicU64::new(1),
            cache_enabled: AtomicBool::new(true),
            maxmemory: AtomicU64::new(0),
            cache_maxmemory: AtomicU64::new(0),
            compact_rate_limit: AtomicU64::new(0),
            bottom_compression: RwLock::new(BottomCompression::Lz4),
            tombstone_cleanup: AtomicBool::new(true),
            pin_partitions: AtomicBool::new(false),
            filters_for_hits: AtomicBool::new(false),
            key_block_bytes: AtomicU64::new(crate::storage::options::DEFAULT_KEY_BLOCK_BYTES),
            max_write_buffer_bytes: AtomicU64::new(
                crate::storage::options::DEFAULT_MAX_WRITE_BUFFER_BYTES,
            ),
            memtable_max_entries: AtomicU64::new(DEFAULT_MEMTABLE_MAX_ENTRIES),
            disk_free_min: AtomicU64::new(DISK_FREE_AUTO),
            level0_slowdown_writes_trigger: AtomicU64::new(0),
            level0_stop_writes_trigger: AtomicU64::new(0),
            soft_pending_compaction_bytes_limit: AtomicU64::new(0),
            hard_pending_compaction_bytes_limit: AtomicU64::new(0),
            cache_shards: AtomicU64::new(0),
            cache_max_key_size: AtomicU64::new(0),
            cache_max_hash_fields: AtomicU64::new(0),
            cache_list_elements: AtomicU64::new(0),
            cache_policy: RwLock::new(crate::cache::Policy::Lfu),
            cache_fill_delay_us: AtomicU64::new(0),
            rtc_read: AtomicBool::new(true),
            group_commit: AtomicBool::new(true),
            fsync_thread: AtomicBool::new(true),
            rtc_write: AtomicBool::new(true),
            rtc_zset_reads: AtomicBool::new(true),
            rtc_scripts: AtomicBool::new(true),
            rtc_write_batch: AtomicBool::new(true),
            txn_skip_superseded: AtomicBool::new(true),
            scan_prefix_seek: AtomicBool::new(true),
            scan_prefix_seek_min_keys: AtomicU64::new(1 << 20),
            string_edit_inline_max: AtomicU64::new(64 * 1024),
            zset_rank_index_min_len: AtomicU64::new(2048),
            zset_rank_index_scores: AtomicBool::new(true),
            set_rank_index: AtomicBool::new(true),
            set_rank_index_prefixes: AtomicBool::new(true),
            rank_index_split_len: AtomicU64::new(512),
            io_poll_spin_us: AtomicU64::new(0),
            rtc_storage_read: AtomicBool::new(true),
            rtc_disk_read: AtomicBool::new(true),
            rtc_disk_read_slow_us: AtomicU64::new(1000),
            rtc_backoff: AtomicBool::new(true),
            pool_reads_unlocked: AtomicBool::new(true),
            rtc_lock_wait_us: AtomicU64::new(300),
            rtc_lock_retries: AtomicU64::new(8),
            io_key_affinity: AtomicBool::new(true),
            io_threads_adaptive: AtomicBool::new(true),
            cache_write_allocate: AtomicBool::new(true),
            cache_absent_keys: AtomicBool::new(true),
            cache_hash_writes: AtomicBool::new(true),
            cache_big_hashes: AtomicBool::new(true),
            cache_sets: AtomicBool::new(true),
            cache_admission: AtomicBool::new(true),
            cache_prefetch: AtomicBool::new(true),
            wal_flush_hold: AtomicBool::new(false),
            cluster: Default::default(),
            pubsub: Default::default(),
            repl: ReplSettings::default(),
            redis_params: RwLock::new(
                redis_params::REDIS_PARAMS
                    .iter()
                    .map(|p| p.default.to_string())
                    .collect(),
            ),
            acl: Default::default(),
            config_file: RwLock::new(None),
        };
        for s in SETTINGS {
            (s.set)(&c, s.default).expect("defaults are valid");
        }
        c
    }
}

impl Config {
    /// The I/O threads to start: `io-threads`, or the machine's share when `auto`.
    pub fn io_threads(&self) -> usize {
        threads::resolve(
            &self.io_threads,
            threads::Auto::for_this_machine().io_threads,
        )
    }

    /// The workers to start: `workers`, or the machine's share when `auto`.
    pub fn workers(&self) -> usize {
        threads::resolve(&self.workers, threads::Auto::for_this_machine().workers)
    }

    /// Applies `name value` as read from a config file or the command line.
    pub fn apply(&self, name: &str, value: &str) -> Result<(), String> {
        let p = Param::lookup(name).ok_or_else(|| format!("unknown setting '{name}'"))?;
        p.set(self, value).map_err(|e| format!("'{name}': {e}"))
    }

    /// Applies a redis.conf-style file: one `name value ...` per line, `#` comments, quoted
    /// values as in redis.conf.
    pub fn load_file(&self, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let words = split_config_line(line)
                .ok_or_else(|| format!("line {}: unbalanced quotes: {line}", n + 1))?;
            let Some((name, rest)) = words.split_first() else {
                continue;
            };
            if name.eq_ignore_ascii_case("user") {
                self.acl_user_line(rest)
                    .map_err(|e| format!("line {}: {e}\n>>> {line}", n + 1))?;
                continue;
            }
            self.apply(name, &rest.join(" "))
                .map_err(|e| format!("line {}: {e}\n>>> {line}", n + 1))?;
        }
        Ok(())
    }

    /// A `user <name> <rules...>` line of the config file: ACL SETUSER with those rules.
    fn acl_user_line(&self, words: &[String]) -> Result<(), String> {
        let (name, rules) = words.split_first().ok_or("user needs a name and rules")?;
        let rules: Vec<Vec<u8>> = rules.iter().map(|r| r.as_bytes().to_vec()).collect();
        let all_channels = crate::cmd::acl::pubsub_default_all(self);
        self.acl
            .config_users
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.acl.set_user(name.as_bytes(), &rules, all_channels)
    }

    pub fn databases(&self) -> u16 {
        self.databases.load(Relaxed) as u16
    }

    /// How `maxmemory` splits between the hot cache and RocksDB on this machine.
    pub fn memory_split(&self) -> Split {
        Split::for_machine(
            self.maxmemory.load(Relaxed),
            self.cache_maxmemory.load(Relaxed),
        )
    }

    /// The allocator's settings (`jemalloc-*`).
    pub fn allocator_tuning(&self) -> crate::allocator::Tuning {
        crate::allocator::Tuning {
            background_thread: self.jemalloc_bg_thread.load(Relaxed),
            dirty_decay_ms: self.jemalloc_dirty_decay_ms.load(Relaxed),
        }
    }

    /// The write stall thresholds (`rocksdb-*` settings).
    pub fn stall_limits(&self) -> StallLimits {
        StallLimits {
            level0_slowdown_writes_trigger: self.level0_slowdown_writes_trigger.load(Relaxed),
            level0_stop_writes_trigger: self.level0_stop_writes_trigger.load(Relaxed),
            soft_pending_compaction_bytes_limit: self
                .soft_pending_compaction_bytes_limit
                .load(Relaxed),
            hard_pending_compaction_bytes_limit: self
                .hard_pending_compaction_bytes_limit
                .load(Relaxed),
        }
    }

    /// The RocksDB options the settings decide, for opening storage.
    pub fn storage_tuning(&self) -> Tuning {
        let split = self.memory_split();
        Tuning {
            block_cache_bytes: split.block_cache,
            write_buffer_bytes: split.write_buffers,
            max_write_buffer_bytes: self.max_write_buffer_bytes.load(Relaxed),
            compact_rate_limit: self.compact_rate_limit.load(Relaxed),
            stalls: self.stall_limits(),
            bottom_compression: *self.bottom_compression.read(),
            wal_ttl_secs: self.repl.wal_ttl_secs.load(Relaxed),
            wal_size_limit_mb: self.repl.wal_size_limit.load(Relaxed).div_ceil(1 << 20),
            tombstone_cleanup: self.tombstone_cleanup.load(Relaxed),
            pin_partitions: self.pin_partitions.load(Relaxed),
            filters_for_hits: self.filters_for_hits.load(Relaxed),
            key_block_bytes: self.key_block_bytes.load(Relaxed),
        }
    }

    /// The hot cache settings (its size is its share of the memory budget).
    pub fn cache_settings(&self) -> crate::cache::CacheSettings {
        crate::cache::CacheSettings {
            enabled: self.cache_enabled.load(Relaxed),
            max_bytes: self.memory_split().hot_cache,
            shards: self.cache_shards.load(Relaxed) as usize,
            max_key: self.cache_max_key_size.load(Relaxed) as usize,
            max_fields: self.cache_max_hash_fields.load(Relaxed) as usize,
            list_elements: self.cache_list_elements.load(Relaxed) as usize,
            policy: *self.cache_policy.read(),
            fill_delay_us: self.cache_fill_delay_us.load(Relaxed),
            write_allocate: self.cache_write_allocate.load(Relaxed),
            absent_keys: self.cache_absent_keys.load(Relaxed),
            hash_writes: self.cache_hash_writes.load(Relaxed),
            big_hashes: self.cache_big_hashes.load(Relaxed),
            sets: self.cache_sets.load(Relaxed),
            admission: self.cache_admission.load(Relaxed),
        }
    }
}

/// The current value of parameter `name` (a kvik setting or a Redis parameter), canonical.
pub fn redis_params_value(c: &Config, name: &str) -> Option<String> {
    Param::lookup(name).map(|p| p.get(c))
}

/// Splits a config line into words with the same quoting rules as an inline command.
fn split_config_line(line: &str) -> Option<Vec<String>> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Some(Vec::new());
    }
    let mut buf = trimmed.as_bytes().to_vec();
    buf.extend_from_slice(b"\r\n");
    let limits = kvik_resp::Limits {
        max_inline_len: buf.len() + 1,
        ..Default::default()
    };
    match kvik_resp::RequestParser::new().parse(&buf, &limits) {
        Ok(Some(kvik_resp::Request {
            args: kvik_resp::RequestArgs::Inline(args),
            ..
        })) => Some(
            args.into_iter()
                .map(|a| String::from_utf8_lossy(&a).into_owned())
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_and_show() {
        let c = Config::default();
        assert_eq!((setting("port").unwrap().get)(&c), "6379");
        assert_eq!(
            (setting("proto-max-bulk-len").unwrap().get)(&c),
            "536870912"
        );
        assert_eq!(
            (setting("client-output-buffer-limit").unwrap().get)(&c),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
    }

    /// `active-expire-effort` takes Redis's range and sets the active expiry's share of a
    /// timer tick: 25% at 1, 43% at 10, 75% while behind whatever the effort.
    #[test]
    fn active_expire_effort_sets_the_expiry_share_of_a_tick() {
        use crate::storage::expire::tick_share_percent;
        let c = Config::default();
        let effort = setting("active-expire-effort").unwrap();
        assert_eq!((effort.get)(&c), "1");
        let share =
            |c: &Config, behind| tick_share_percent(c.active_expire_effort.load(Relaxed), behind);
        assert_eq!((share(&c, false), share(&c, true)), (25, 75));
        assert!((effort.set)(&c, "0")
            .unwrap_err()
            .contains("between 1 and 10"));
        assert!((effort.set)(&c, "11").is_err());
        (effort.set)(&c, "10").unwrap();
        assert_eq!((share(&c, false), share(&c, true)), (43, 75));
    }

    #[test]
    fn config_file_overrides_defaults() {
        let c = Config::default();
        c.load_file("# comment\nport 7000\n\nrequirepass \"se cret\"\nclient-output-buffer-limit normal 1mb 512kb 10\n")
            .unwrap();
        assert_eq!(c.port.load(Relaxed), 7000);
        assert_eq!(c.requirepass.read().as_deref(), Some("se cret"));
        assert_eq!(c.client_output_buffer_limit.read()[0].hard, 1024 * 1024);
        assert!(c
            .load_file("nosuch 1")
            .unwrap_err()
            .contains("unknown setting"));
        assert!(c.load_file("port abc").is_err());
    }

    #[test]
    fn memory_units_follow_redis_conf() {
        assert_eq!(parse_memory("100k"), Ok(100_000));
        assert_eq!(parse_memory("100KB"), Ok(102_400));
        assert_eq!(parse_memory("1gb"), Ok(1 << 30));
        assert!(parse_memory("1tb").is_err());
        assert!(parse_memory("-1").is_err());
    }
}
