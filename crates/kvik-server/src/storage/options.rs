//! Every RocksDB option kvik sets, in one place: DB-wide, per column family, block-based table.
//!
//! Role: `Storage::open_tuned` asks this module for its options and gets back the objects the
//! column families share while the DB is open ([`Shared`]: one block cache, one write buffer
//! manager, one statistics object). Nothing else in kvik constructs RocksDB options.
//!
//! The layout is the one RocksDB's own tuning guide and Kvrocks use for data larger than memory,
//! chosen so that a point read never has to load a whole index or filter block:
//! - one LRU block cache for all column families; its high-priority pool (RocksDB's default
//!   `high_pri_pool_ratio` 0.5, which the C API keeps) holds index and filter blocks, so a scan
//!   of data blocks cannot push them out;
//! - partitioned index and partitioned filters (two-level index): a lookup loads one 4 KiB
//!   partition, not a whole SST's index; the top level of each SST stays pinned, and so do the
//!   partitions of L0 files (short-lived and read by every lookup);
//! - memtables charged to the same block cache by a WriteBufferManager, so block cache capacity
//!   bounds blocks and memtables together (see `budget`);
//! - per column family, by how it is read ([`CfRole`]): filters and a data-block hash index only
//!   where there are point reads; no compression on L0 and the first level below it (written
//!   once, compacted soon), LZ4 in the middle and at the bottom, where most of the data rests
//!   (`rocksdb-bottom-compression`: ZSTD there costs every uncached read and every compaction
//!   a slower decode and encode for about a third less disk; docs/benchmarks.md section 41).
//!
//! A unit test (`options::tests`) reads the applied settings back from the
//! OPTIONS file RocksDB writes, so a refactor cannot silently undo them.

use rocksdb::statistics::{StatsLevel, Ticker};
use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, BlockBasedTablePinningTier, Cache, DBCompressionType,
    DataBlockIndexType, LruCacheOptions, Options, WriteBufferManager,
};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bloom-equivalent bits per key of the filters (about 1% false positives). Ribbon filters give
/// that rate in about 30% less memory than Bloom; L0 keeps Bloom, which is faster to build at
/// every flush (`set_hybrid_ribbon_filter`'s `bloom_before_level`).
pub const FILTER_BITS_PER_KEY: f64 = 10.0;
const RIBBON_FROM_LEVEL: i32 = 1;
/// Size of an index or filter partition (RocksDB's `metadata_block_size`).
pub const PARTITION_BYTES: u64 = 4096;
/// Data block size: RocksDB's default, the keys' too unless `rocksdb-key-block-size` says
/// otherwise. A point read decompresses one block, so larger blocks cost every cache miss;
/// smaller ones grow the index and slow every scan (SCAN, HGETALL, SMEMBERS, ZRANGE).
pub const BLOCK_BYTES: usize = 4096;
/// Default data block size of the keys (`rocksdb-key-block-size`, see
/// [`Tuning::key_block_bytes`]).
pub const DEFAULT_KEY_BLOCK_BYTES: u64 = BLOCK_BYTES as u64;
/// Share of a data block's entries the hash index has slots for (RocksDB's recommended 0.75).
const DATA_BLOCK_HASH_RATIO: f64 = 0.75;
/// Size of a memtable's whole-key Bloom filter as a share of the memtable (RocksDB's
/// `memtable_prefix_bloom_size_ratio`): 2% of a memtable of ~150-byte entries is ~25 bits a key.
/// Every point read looks in the memtables first; at 10M keys a miss there was ~7% of a GET's
/// server CPU (a skiplist walk of cache misses) before this filter answered it.
const MEMTABLE_BLOOM_RATIO: f64 = 0.02;
/// Smallest block cache shard (see [`block_cache_shard_bits`]).
const MIN_CACHE_SHARD_BYTES: u64 = 4 << 20;
/// Largest memtable of one column family by default (`rocksdb-write-buffer-size`, RocksDB's
/// usual size); the write buffer budget may make it smaller, and a memtable of small entries
/// ends earlier by its entry count (`storage::memtables`).
pub const DEFAULT_MAX_WRITE_BUFFER_BYTES: u64 = 64 << 20;
const MIN_WRITE_BUFFER_BYTES: u64 = 1 << 20;
/// Rate limiter refill period and fairness: RocksDB's defaults.
const RATE_LIMIT_REFILL_US: i64 = 100_000;
const RATE_LIMIT_FAIRNESS: i32 = 10;

/// Compression of levels 0..6 as RocksDB maps them with dynamic level sizes: entry 0 is L0,
/// entry 1 the level L0 compacts into, and so on down; the bottommost level with data gets
/// [`Tuning::bottom_compression`] whatever its number.
pub const LEVEL_COMPRESSION: [DBCompressionType; 7] = [
    DBCompressionType::None,
    DBCompressionType::None,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
];

/// How the bottommost level's blocks are compressed (`rocksdb-bottom-compression`). Most of
/// the data rests there, so every read the block cache misses decodes one of its blocks, and
/// every compaction into it encodes them: LZ4 decodes several times faster than ZSTD, which
/// stores the same data in about a third less space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BottomCompression {
    Lz4,
    Zstd,
    None,
}

impl BottomCompression {
    pub fn parse(s: &str) -> Option<BottomCompression> {
        match s.to_ascii_lowercase().as_str() {
            "lz4" => Some(BottomCompression::Lz4),
            "zstd" => Some(BottomCompression::Zstd),
            "none" | "no" => Some(BottomCompression::None),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BottomCompression::Lz4 => "lz4",
            BottomCompression::Zstd => "zstd",
            BottomCompression::None => "none",
        }
    }

    fn rocksdb(self) -> DBCompressionType {
        match self {
            BottomCompression::Lz4 => DBCompressionType::Lz4,
            BottomCompression::Zstd => DBCompressionType::Zstd,
            BottomCompression::None => DBCompressionType::None,
        }
    }

    /// As RocksDB's `SetOptions` and OPTIONS file name it.
    fn option_value(self) -> &'static str {
        match self {
            BottomCompression::Lz4 => "kLZ4Compression",
            BottomCompression::Zstd => "kZSTD",
            BottomCompression::None => "kNoCompression",
        }
    }
}

/// What a column family is read for, which decides its table layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfRole {
    /// `meta`: one record per key, read by point lookups (GET, EXISTS, TYPE, every write's
    /// read of the old record) and scanned by SCAN and expiry.
    Meta,
    /// `data`: collection members, point-read by HGET, SISMEMBER, ZSCORE, LINDEX and
    /// prefix-scanned by HGETALL, SMEMBERS, LRANGE.
    Data,
    /// `score`: the sorted-set score index, only ever range-scanned.
    Score,
}

/// The table layout of one role, as data.
struct Layout {
    /// Whole-key filter. Only point lookups consult it (RocksDB's iterators do not, and kvik
    /// sets no prefix extractor: its scan prefixes have variable length), so scan-only column
    /// families go without and save the memory.
    filter: bool,
    /// Data-block hash index: a point lookup inside a block is one hash probe instead of a
    /// binary search (Kvrocks measured 21.8% less CPU); about 4% more space; scans unaffected.
    hash_index: bool,
    /// Whole-key Bloom filter in each memtable ([`MEMTABLE_BLOOM_RATIO`]), for the same
    /// point lookups as `filter`.
    memtable_filter: bool,
}

impl CfRole {
    fn layout(self) -> Layout {
        match self {
            CfRole::Meta | CfRole::Data => Layout {
                filter: true,
                hash_index: true,
                memtable_filter: true,
            },
            CfRole::Score => Layout {
                filter: false,
                hash_index: false,
                memtable_filter: false,
            },
        }
    }
}

/// The knobs the settings decide (`maxmemory` through `budget`, the stall thresholds,
/// `compact-rate-limit`); everything else is fixed here.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// Block cache capacity, memtables included (they are charged to it).
    pub block_cache_bytes: u64,
    /// Memtable memory of all column families together (WriteBufferManager limit).
    pub write_buffer_bytes: u64,
    /// Largest memtable of one column family (`rocksdb-write-buffer-size`).
    pub max_write_buffer_bytes: u64,
    /// Compaction and flush I/O limit in bytes per second; 0: none.
    pub compact_rate_limit: u64,
    pub stalls: StallLimits,
    pub bottom_compression: BottomCompression,
    /// How long (seconds) and how much (MiB) of obsolete WAL RocksDB keeps in its archive for
    /// replicas to catch up from (`repl-wal-ttl`, `repl-wal-size-limit`); 0 and 0: none.
    pub wal_ttl_secs: u64,
    pub wal_size_limit_mb: u64,
    /// `rocksdb-tombstone-cleanup`: files dense in deletions are compacted soon, and a scan
    /// that steps over many of them in the active memtable flushes it ([`TombstoneCleanup`]).
    pub tombstone_cleanup: bool,
    /// `rocksdb-pin-partitions`: every SST's index and filter partitions stay pinned while it
    /// is open (RocksDB's `partition_pinning = kAll`), not only L0's and the top levels'. A
    /// read then finds them without a block cache lookup (its hash, its shard's lock, a
    /// reference taken and dropped): 3-5% of an uncached GET's CPU at 10M keys
    /// (docs/benchmarks.md section 48). But the pinned blocks grow with the data (~2 bytes a
    /// key of 100-byte values, 22 MB at 10M keys), charged to the block cache and past its
    /// capacity once they outgrow it, so off by default: the budget bounds memory at any size.
    pub pin_partitions: bool,
    /// `rocksdb-filters-for-hits`: the keys' column family (`meta`) builds no filter for its
    /// bottommost level, and reads do not probe one there (RocksDB's
    /// `optimize_filters_for_hits`). A read reaches the bottom only after every level above
    /// ruled its key out, so for a key that exists the bottom's probe is always positive:
    /// at 10M keys skipping it makes uncached GETs 5-10% faster, and overwriting SETs 8-15%
    /// (compactions into the bottom no longer build its filters, ~90% of all). But a key that
    /// does not exist is then ruled out only by reading its data block: a GET of an absent key
    /// costs what a present one does (~1.9x before), and a SET of a new key ~1.2-1.3x
    /// (docs/benchmarks.md section 51). Off by default; `data` (fields, members) keeps its
    /// filters either way, as a new member's write reads an absent one.
    pub filters_for_hits: bool,
    /// `rocksdb-key-block-size`: the data block size of the keys' column family (`meta`). An
    /// uncached point read decompresses and copies one whole block for its one key, so
    /// smaller blocks make such reads a little cheaper: at 10M keys of 100-byte values, 1 KiB
    /// against 4 KiB took 3-6% less server CPU per uncached GET. But SCAN reads the keys in
    /// order, block by block, and pays for every block: 15-25% slower at 100-byte values, 2x
    /// at 1 KB values (one key a block), and the files grow 13-15% as LZ4 finds less to share
    /// in a smaller block (docs/benchmarks.md section 53). So RocksDB's 4 KiB by default.
    pub key_block_bytes: u64,
}

/// RocksDB's write stall thresholds (all mutable at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallLimits {
    pub level0_slowdown_writes_trigger: u64,
    pub level0_stop_writes_trigger: u64,
    pub soft_pending_compaction_bytes_limit: u64,
    pub hard_pending_compaction_bytes_limit: u64,
}

impl Default for StallLimits {
    /// RocksDB's defaults.
    fn default() -> StallLimits {
        StallLimits {
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
        }
    }
}

impl StallLimits {
    /// As RocksDB's `SetOptions` names them.
    pub fn as_rocksdb_options(&self) -> [(&'static str, String); 4] {
        [
            (
                "level0_slowdown_writes_trigger",
                self.level0_slowdown_writes_trigger.to_string(),
            ),
            (
                "level0_stop_writes_trigger",
                self.level0_stop_writes_trigger.to_string(),
            ),
            (
                "soft_pending_compaction_bytes_limit",
                self.soft_pending_compaction_bytes_limit.to_string(),
            ),
            (
                "hard_pending_compaction_bytes_limit",
                self.hard_pending_compaction_bytes_limit.to_string(),
            ),
        ]
    }
}

impl Default for Tuning {
    /// What `Storage::open` uses (tests, tools): a 128 MiB block cache.
    fn default() -> Tuning {
        Tuning {
            block_cache_bytes: 128 << 20,
            write_buffer_bytes: 32 << 20,
            max_write_buffer_bytes: DEFAULT_MAX_WRITE_BUFFER_BYTES,
            compact_rate_limit: 0,
            stalls: StallLimits::default(),
            bottom_compression: BottomCompression::Lz4,
            wal_ttl_secs: 0,
            wal_size_limit_mb: 0,
            tombstone_cleanup: true,
            pin_partitions: false,
            filters_for_hits: false,
            key_block_bytes: DEFAULT_KEY_BLOCK_BYTES,
        }
    }
}

/// The memtable size of one column family for a total write buffer budget: half of it, so the
/// write buffer manager can flush one while another fills, at most `max` (the setting).
pub fn write_buffer_size(write_buffer_bytes: u64, max: u64) -> u64 {
    (write_buffer_bytes / 2)
        .min(max)
        .max(MIN_WRITE_BUFFER_BYTES)
}

/// The live WAL a restart may have to replay, for a total write buffer budget: four times the
/// budget, at least 64 MiB. RocksDB keeps every WAL file back to the oldest unflushed write of
/// any column family, and the small ones (the key counts, written with every commit; the expiry
/// index) fill their memtables so slowly that they held all of them: 51 files, 300 MB, replayed
/// in 440 ms after a 2M-key load and a few seconds of SETs, 1.8 s at 10M keys (docs/benchmarks.md
/// section 24). Past this size RocksDB flushes the column families that hold the oldest file.
/// Set at open from the starting budget (RocksDB's Rust binding cannot change a DB-wide option
/// of an open DB; a CONFIG SET maxmemory keeps it).
pub fn max_total_wal_size(write_buffer_bytes: u64) -> u64 {
    (4 * write_buffer_bytes).max(64 << 20)
}

/// What every column family shares while the DB is open.
pub struct Shared {
    pub block_cache: Cache,
    /// The block cache's capacity as last set. Kept here: RocksDB's `block-cache-capacity`
    /// property answers for a table factory of its own, not for this cache.
    block_cache_capacity: AtomicU64,
    pub write_buffers: WriteBufferManager,
    /// The DB options; they hold the statistics object RocksDB updates.
    db_options: Options,
}

impl Shared {
    /// A RocksDB statistics counter (tickers only are collected; see [`db_options`]).
    pub fn ticker(&self, t: Ticker) -> u64 {
        self.db_options.get_ticker_count(t)
    }

    pub fn block_cache_capacity(&self) -> u64 {
        self.block_cache_capacity.load(Relaxed)
    }

    /// Resizes the block cache and the write buffer limit (CONFIG SET maxmemory). A smaller
    /// cache evicts down to its new capacity at once.
    pub fn resize(&self, block_cache_bytes: u64, write_buffer_bytes: u64) {
        self.block_cache
            .clone()
            .set_capacity(block_cache_bytes as usize);
        self.block_cache_capacity.store(block_cache_bytes, Relaxed);
        self.write_buffers
            .set_buffer_size(write_buffer_bytes as usize);
    }
}

/// Shards of the block cache: as many as RocksDB would (at most 64), but each at least
/// [`MIN_CACHE_SHARD_BYTES`]. RocksDB's own rule (512 KiB shards) makes a small cache's
/// high-priority pool per shard too small for index and filter partitions next to the
/// memtables' 256 KiB reservation entries; each shard is its own LRU.
fn block_cache_shard_bits(capacity: u64) -> i32 {
    let shards = (capacity / MIN_CACHE_SHARD_BYTES).clamp(1, 64);
    (u64::BITS - 1 - shards.leading_zeros()) as i32
}

/// The DB-wide options, and the objects the column families share.
///
/// Statistics are on at `ExceptHistogramOrTimers`: tickers only (per-core counters, one
/// relaxed add per event, no clock reads), which INFO rocksdb needs for its cache hit and stall
/// fields; histograms and timers, the expensive part, stay off.
pub fn db_options(t: &Tuning) -> (Options, Shared) {
    let mut lru = LruCacheOptions::default();
    lru.set_capacity(t.block_cache_bytes as usize);
    lru.set_num_shard_bits(block_cache_shard_bits(t.block_cache_bytes));
    let block_cache = Cache::new_lru_cache_opts(&lru);
    // allow_stall: writers wait for a flush rather than grow memtables past the budget.
    let write_buffers = WriteBufferManager::new_write_buffer_manager_with_cache(
        t.write_buffer_bytes as usize,
        true,
        block_cache.clone(),
    );
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_max_background_jobs(2);
    opts.set_bytes_per_sync(1 << 20);
    // Writes from many workers join one WAL write instead of queueing.
    opts.set_enable_pipelined_write(true);
    // Group commit: the WAL buffer reaches its file when a reply needs it, once for many
    // writes (see storage::wal), not after every write.
    opts.set_manual_wal_flush(true);
    opts.set_write_buffer_manager(&write_buffers);
    opts.set_max_total_wal_size(max_total_wal_size(t.write_buffer_bytes));
    opts.set_wal_ttl_seconds(t.wal_ttl_secs);
    opts.set_wal_size_limit_mb(t.wal_size_limit_mb);
    if t.compact_rate_limit > 0 {
        opts.set_ratelimiter(
            t.compact_rate_limit as i64,
            RATE_LIMIT_REFILL_US,
            RATE_LIMIT_FAIRNESS,
        );
    }
    opts.enable_statistics();
    opts.set_statistics_level(StatsLevel::ExceptHistogramOrTimers);
    let shared = Shared {
        block_cache,
        block_cache_capacity: AtomicU64::new(t.block_cache_bytes),
        write_buffers,
        db_options: opts.clone(),
    };
    (opts, shared)
}

/// The block-based table layout of `role`.
fn table_options(shared: &Shared, role: CfRole, t: &Tuning) -> BlockBasedOptions {
    let layout = role.layout();
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&shared.block_cache);
    table.set_block_size(match role {
        CfRole::Meta => t.key_block_bytes as usize,
        CfRole::Data | CfRole::Score => BLOCK_BYTES,
    });
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_metadata_block_size(PARTITION_BYTES as usize);
    table.set_pin_top_level_index_and_filter(true);
    if t.pin_partitions {
        table.set_partition_pinning_tier(BlockBasedTablePinningTier::All);
    }
    if layout.filter {
        table.set_hybrid_ribbon_filter(FILTER_BITS_PER_KEY, RIBBON_FROM_LEVEL);
        table.set_whole_key_filtering(true);
    }
    if layout.hash_index {
        table.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
        table.set_data_block_hash_ratio(DATA_BLOCK_HASH_RATIO);
    }
    table
}

/// The options of one column family: the DB options plus its table layout, memtable size,
/// compression and stall thresholds. The caller adds its compaction filter.
pub fn cf_options(db: &Options, shared: &Shared, t: &Tuning, role: CfRole) -> Options {
    let mut o = db.clone();
    o.set_block_based_table_factory(&table_options(shared, role, t));
    o.set_write_buffer_size(
        write_buffer_size(t.write_buffer_bytes, t.max_write_buffer_bytes) as usize,
    );
    if t.filters_for_hits && role == CfRole::Meta {
        o.set_optimize_filters_for_hits(true);
    }
    if role.layout().memtable_filter {
        o.set_memtable_whole_key_filtering(true);
        o.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO);
    }
    o.set_compression_per_level(&LEVEL_COMPRESSION);
    o.set_bottommost_compression_type(t.bottom_compression.rocksdb());
    let s = &t.stalls;
    o.set_level_zero_slowdown_writes_trigger(s.level0_slowdown_writes_trigger as i32);
    o.set_level_zero_stop_writes_trigger(s.level0_stop_writes_trigger as i32);
    o.set_soft_pending_compaction_bytes_limit(s.soft_pending_compaction_bytes_limit as usize);
    o.set_hard_pending_compaction_bytes_limit(s.hard_pending_compaction_bytes_limit as usize);
    if t.tombstone_cleanup {
        o.add_compact_on_deletion_collector_factory(
            TombstoneCleanup::WINDOW,
            TombstoneCleanup::DELETIONS_IN_WINDOW,
            TombstoneCleanup::FILE_RATIO,
        );
    }
    o
}

/// How deletions are kept from slowing the reads that come after them (`rocksdb-tombstone-
/// cleanup`). A deleted record stays in RocksDB as a tombstone until a compaction carries it
/// down to the level holding what it deletes; until then every scan over its range steps over
/// it (HSCAN or HGETALL of a hash whose fields were mostly deleted, ZRANGE after ZPOPMIN,
/// blackwidow #19, Pika #148). RocksDB compacts by size, not by deletions, so a wave of them
/// can sit in the upper levels, and in the memtable, indefinitely. Two of RocksDB's mechanisms
/// and one of kvik's end that:
/// - a table property collector marks an SST for compaction when its deletions are dense
///   (at least [`Self::DELETIONS_IN_WINDOW`] in some [`Self::WINDOW`] consecutive entries, or
///   [`Self::FILE_RATIO`] of the file); marked files are compacted when nothing more urgent is
///   pending, down to where the tombstones and what they delete are dropped together;
/// - an iterator that steps over [`Self::SCAN_FLUSH_TRIGGER`] deleted or overwritten entries of
///   the active memtable in one seek or step (or [`Self::AVG_SCAN_FLUSH_TRIGGER`] on average per
///   step, over at least that many) has the memtable flushed at the column family's next
///   write, so the collector sees them; and kvik's timer flushes a memtable holding
///   [`Self::QUIET_FLUSH_DELETIONS`] deletions that took no write since its last tick
///   (`storage::memtables`), for the wave that no write follows.
pub struct TombstoneCleanup;

impl TombstoneCleanup {
    pub const WINDOW: usize = 32_768;
    pub const DELETIONS_IN_WINDOW: usize = 16_384;
    pub const FILE_RATIO: f64 = 0.5;
    pub const SCAN_FLUSH_TRIGGER: u32 = 10_000;
    pub const AVG_SCAN_FLUSH_TRIGGER: u32 = 100;
    pub const QUIET_FLUSH_DELETIONS: u64 = Self::SCAN_FLUSH_TRIGGER as u64;

    /// The memtable triggers, as RocksDB's `SetOptions` names them (the C API has no setter
    /// for them on `Options`); 0 turns them off.
    pub fn memtable_options(on: bool) -> [(&'static str, String); 2] {
        let (op, avg) = if on {
            (Self::SCAN_FLUSH_TRIGGER, Self::AVG_SCAN_FLUSH_TRIGGER)
        } else {
            (0, 0)
        };
        [
            ("memtable_op_scan_flush_trigger", op.to_string()),
            ("memtable_avg_op_scan_flush_trigger", avg.to_string()),
        ]
    }
}

impl super::Storage {
    /// The block cache, write buffer manager and statistics the column families share.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Applies a new memory split at run time (CONFIG SET maxmemory / cache-maxmemory /
    /// rocksdb-write-buffer-size): block cache capacity, write buffer limit, and each column
    /// family's memtable size (from its next memtable on).
    pub fn resize_memory(
        &self,
        block_cache_bytes: u64,
        write_buffer_bytes: u64,
        max_write_buffer_bytes: u64,
    ) -> super::StorageResult<()> {
        self.shared.resize(block_cache_bytes, write_buffer_bytes);
        let size = write_buffer_size(write_buffer_bytes, max_write_buffer_bytes).to_string();
        for cf in super::COLUMN_FAMILIES {
            self.db
                .set_options_cf(self.cf(cf), &[("write_buffer_size", size.as_str())])?;
        }
        Ok(())
    }

    /// Applies new write stall thresholds and the bottom level's compression to every column
    /// family (CONFIG SET; a compression change applies to the files compactions write next).
    pub fn set_mutable_options(
        &self,
        limits: &StallLimits,
        bottom: BottomCompression,
    ) -> super::StorageResult<()> {
        let opts = limits.as_rocksdb_options();
        let mut pairs: Vec<(&str, &str)> = opts.iter().map(|(k, v)| (*k, v.as_str())).collect();
        pairs.push(("bottommost_compression", bottom.option_value()));
        for cf in super::TUNED_CFS {
            self.db.set_options_cf(self.cf(cf), &pairs)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{Cache as HotCache, CacheSettings};
    use crate::storage::{Storage, COLUMN_FAMILIES};
    use std::collections::HashMap;
    use std::path::Path;

    /// The sections of the newest OPTIONS-* file RocksDB wrote in `dir`: `[Kind "name"]` to
    /// its `key=value` lines.
    fn options_file(dir: &Path) -> HashMap<String, HashMap<String, String>> {
        let newest = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("OPTIONS-") && !n.ends_with(".dbtmp"))
            .max_by_key(|n| n["OPTIONS-".len()..].parse::<u64>().unwrap_or(0))
            .expect("RocksDB writes an OPTIONS file");
        let text = std::fs::read_to_string(dir.join(newest)).unwrap();
        let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
        let mut section = String::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line.trim_matches(|c| c == '[' || c == ']').to_string();
            } else if let Some((k, v)) = line.split_once('=') {
                out.entry(section.clone())
                    .or_default()
                    .insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        out
    }

    fn tuning() -> Tuning {
        Tuning {
            block_cache_bytes: 32 << 20,
            write_buffer_bytes: 8 << 20,
            compact_rate_limit: 0,
            stalls: StallLimits {
                level0_slowdown_writes_trigger: 21,
                level0_stop_writes_trigger: 37,
                soft_pending_compaction_bytes_limit: 1 << 30,
                hard_pending_compaction_bytes_limit: 2 << 30,
            },
            ..Tuning::default()
        }
    }

    /// Writes `n` string keys `key:<i>` of 100 bytes each, in one batch.
    fn put_keys(s: &Storage, n: u32) {
        let mut batch = super::super::Batch::default();
        for i in 0..n {
            let meta = crate::storage::encoding::Meta::string(vec![b'v'; 100], 0);
            batch.put_meta(s, 0, format!("key:{i}").as_bytes(), &meta);
        }
        s.commit(batch).unwrap();
    }

    #[test]
    fn small_caches_get_fewer_shards() {
        assert_eq!(block_cache_shard_bits(1 << 20), 0);
        assert_eq!(block_cache_shard_bits(8 << 20), 1);
        assert_eq!(block_cache_shard_bits(60 << 20), 3);
        assert_eq!(block_cache_shard_bits(64 << 30), 6);
    }

    #[test]
    fn the_live_db_has_the_layout() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open_tuned(
            dir.path(),
            HotCache::new(CacheSettings::default()),
            &tuning(),
        )
        .unwrap();
        let file = options_file(dir.path());
        for cf in COLUMN_FAMILIES {
            let role = match cf {
                "meta" => CfRole::Meta,
                "data" => CfRole::Data,
                _ => CfRole::Score,
            };
            let table = &file[&format!("TableOptions/BlockBasedTable \"{cf}\"")];
            let is = |k: &str, v: &str| {
                assert_eq!(table.get(k).map(String::as_str), Some(v), "{cf}: {k}");
            };
            is("index_type", "kTwoLevelIndexSearch");
            is("partition_filters", "true");
            is("metadata_block_size", "4096");
            is("pin_top_level_index_and_filter", "true");
            is("cache_index_and_filter_blocks", "true");
            is("cache_index_and_filter_blocks_with_high_priority", "true");
            is("pin_l0_filter_and_index_blocks_in_cache", "true");
            is("block_size", "4096");
            let (filter, hash) = match role {
                CfRole::Meta | CfRole::Data => (true, true),
                CfRole::Score => (false, false),
            };
            let policy = &table["filter_policy"];
            assert_eq!(
                policy.contains("ribbon"),
                filter,
                "{cf}: filter_policy {policy}"
            );
            is(
                "data_block_index_type",
                if hash {
                    "kDataBlockBinaryAndHash"
                } else {
                    "kDataBlockBinarySearch"
                },
            );

            let opts = &file[&format!("CFOptions \"{cf}\"")];
            let is = |k: &str, v: &str| {
                assert_eq!(opts.get(k).map(String::as_str), Some(v), "{cf}: {k}");
            };
            is(
                "compression_per_level",
                "kNoCompression:kNoCompression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression",
            );
            is("bottommost_compression", "kLZ4Compression");
            let (bloom, whole_key) = if hash {
                ("0.020000", "true")
            } else {
                ("0.000000", "false")
            };
            is("memtable_prefix_bloom_size_ratio", bloom);
            is("memtable_whole_key_filtering", whole_key);
            is("write_buffer_size", &(4u64 << 20).to_string());
            is("memtable_op_scan_flush_trigger", "10000");
            is("memtable_avg_op_scan_flush_trigger", "100");
            let collectors = &opts["table_properties_collectors"];
            assert!(
                collectors.contains("CompactOnDeletionCollector")
                    && collectors.contains("deletion_trigger=16384")
                    && collectors.contains("window_size=32768"),
                "{cf}: {collectors}"
            );
            is("level0_slowdown_writes_trigger", "21");
            is("level0_stop_writes_trigger", "37");
            is(
                "soft_pending_compaction_bytes_limit",
                &(1u64 << 30).to_string(),
            );
            is(
                "hard_pending_compaction_bytes_limit",
                &(2u64 << 30).to_string(),
            );
        }

        assert_eq!(
            file["DBOptions"]
                .get("max_total_wal_size")
                .map(String::as_str),
            Some((64u64 << 20).to_string().as_str()),
            "the live WAL is capped"
        );

        // One block cache for every column family, and the memtables charged to it.
        assert_eq!(s.shared().block_cache_capacity(), 32 << 20);
        let caches: Vec<String> = COLUMN_FAMILIES
            .iter()
            .map(|cf| {
                let stats = s
                    .cf_property_text(cf, "rocksdb.block-cache-entry-stats")
                    .unwrap();
                stats.split_whitespace().nth(2).unwrap().to_string()
            })
            .collect();
        assert!(caches[0].contains('@'), "cache id: {caches:?}");
        assert!(caches.iter().all(|c| *c == caches[0]), "{caches:?}");
        assert_eq!(s.shared().write_buffers.get_buffer_size(), 8 << 20);
        put_keys(&s, 20_000);
        let memtables = s.shared().write_buffers.get_usage() as u64;
        assert!(memtables > 1 << 20, "memtables {memtables}");
        assert!(
            s.shared().block_cache.get_usage() as u64 >= memtables,
            "the block cache holds the memtables' reservation"
        );

        // Stall limits, the bottom level's compression and memory resize apply at run time.
        let mut limits = tuning().stalls;
        limits.level0_slowdown_writes_trigger = 10;
        s.set_mutable_options(&limits, BottomCompression::Zstd)
            .unwrap();
        let file = options_file(dir.path());
        assert_eq!(
            file["CFOptions \"data\""]["level0_slowdown_writes_trigger"],
            "10"
        );
        for cf in COLUMN_FAMILIES {
            assert_eq!(
                file[&format!("CFOptions \"{cf}\"")]["bottommost_compression"],
                "kZSTD"
            );
        }
        s.resize_memory(16 << 20, 4 << 20, DEFAULT_MAX_WRITE_BUFFER_BYTES)
            .unwrap();
        assert_eq!(s.shared().block_cache_capacity(), 16 << 20);
        drop(s);
        // Reopened with the defaults: the OPTIONS file follows the options given.
        let _s = Storage::open(dir.path()).unwrap();
        let file = options_file(dir.path());
        assert_eq!(
            file["CFOptions \"meta\""]["level0_slowdown_writes_trigger"],
            "20"
        );
    }

    /// `rocksdb-key-block-size` sizes the keys' data blocks, and only theirs: the option file
    /// says so, and the same keys compacted into the bottom level take about four times as
    /// many blocks at 1 KB as at 4 KB (the table properties' count, so a setting that never
    /// reached RocksDB fails here).
    #[test]
    fn the_keys_block_size_is_the_setting() {
        let blocks = |key_block_bytes: u64| {
            let dir = tempfile::tempdir().unwrap();
            let t = Tuning {
                key_block_bytes,
                ..tuning()
            };
            let s = Storage::open_tuned(dir.path(), HotCache::new(CacheSettings::default()), &t)
                .unwrap();
            let file = options_file(dir.path());
            for cf in COLUMN_FAMILIES {
                let wanted = if cf == "meta" { key_block_bytes } else { 4096 };
                assert_eq!(
                    file[&format!("TableOptions/BlockBasedTable \"{cf}\"")]["block_size"],
                    wanted.to_string(),
                    "{cf}, setting {key_block_bytes}"
                );
            }
            put_keys(&s, 5_000);
            s.compact_all();
            let props = s
                .cf_property_text("meta", "rocksdb.aggregated-table-properties")
                .unwrap();
            props
                .split(';')
                .find_map(|p| p.trim().strip_prefix("# data blocks="))
                .and_then(|n| n.trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no data block count in {props}"))
        };
        let (small, large) = (blocks(1024), blocks(4096));
        assert!(
            small > 3 * large && large > 0,
            "data blocks: {small} at 1 KB, {large} at 4 KB"
        );
    }

    /// `rocksdb-pin-partitions` pins every file's index and filter partitions; by default
    /// only L0's and the top levels' are (the budget bounds the rest).
    #[test]
    fn partitions_are_pinned_only_with_the_setting() {
        for pin in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let t = Tuning {
                pin_partitions: pin,
                ..tuning()
            };
            let _s = Storage::open_tuned(dir.path(), HotCache::new(CacheSettings::default()), &t)
                .unwrap();
            let file = options_file(dir.path());
            for cf in COLUMN_FAMILIES {
                let table = &file[&format!("TableOptions/BlockBasedTable \"{cf}\"")];
                let pinning = &table["metadata_cache_options"];
                assert_eq!(
                    pinning.contains("partition_pinning=kAll"),
                    pin,
                    "{cf}: metadata_cache_options {pinning}"
                );
            }
        }
    }

    /// `rocksdb-filters-for-hits` takes the keys' bottom-level filter away, and only theirs: a
    /// read of a key found there probes no filter (RocksDB's full-filter positives stay 0),
    /// while without the setting each such read probes one; absent keys read back as absent.
    #[test]
    fn the_keys_bottom_level_goes_without_filters_only_with_the_setting() {
        use rocksdb::statistics::Ticker;
        for on in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let t = Tuning {
                filters_for_hits: on,
                ..tuning()
            };
            let s = Storage::open_tuned(dir.path(), HotCache::new(CacheSettings::default()), &t)
                .unwrap();
            let file = options_file(dir.path());
            for cf in COLUMN_FAMILIES {
                let wanted = on && cf == "meta";
                assert_eq!(
                    file[&format!("CFOptions \"{cf}\"")]["optimize_filters_for_hits"],
                    wanted.to_string(),
                    "{cf}, setting {on}"
                );
            }
            put_keys(&s, 5_000);
            s.compact_all(); // every key in the bottom level
            let positives = || s.shared().ticker(Ticker::BloomFilterFullPositive);
            let before = positives();
            for i in (0..5_000u32).step_by(50) {
                let meta = s.get_meta(0, format!("key:{i}").as_bytes()).unwrap();
                assert!(meta.is_some(), "key:{i}, setting {on}");
                let absent = s.get_meta(0, format!("key:{i}x").as_bytes()).unwrap();
                assert!(absent.is_none(), "key:{i}x, setting {on}");
            }
            let probed = positives() - before;
            if on {
                assert_eq!(probed, 0, "no bottom filter probed");
            } else {
                assert!(probed >= 100, "each found key probed its filter: {probed}");
            }
        }
    }

    /// The setting decides how the bottom level's files are written (ZSTD's are smaller on
    /// data that compresses), and a directory written with one setting reads back whole under
    /// another: compactions rewrite it in the new one.
    #[test]
    fn the_bottom_level_is_written_with_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let record = |i: u32| {
            format!(
                "id={i} name=user{} city={} score={} tags=[alpha,beta,gamma] state=active",
                i % 977,
                ["paris", "oslo", "lima", "kyiv"][i as usize % 4],
                i.wrapping_mul(7919) % 100_000
            )
            .into_bytes()
        };
        const KEYS: u32 = 30_000;
        let sst_bytes = |bottom: BottomCompression, write: bool| {
            let t = Tuning {
                bottom_compression: bottom,
                ..tuning()
            };
            let s = Storage::open_tuned(dir.path(), HotCache::new(CacheSettings::default()), &t)
                .unwrap();
            // Written twice, so the compaction merges the flushed file with the bottom level
            // (the first flushed file alone would only be moved down, as RocksDB moves a file
            // that overlaps nothing, keeping its encoding).
            for _ in 0..if write { 2 } else { 0 } {
                let mut batch = super::super::Batch::default();
                for i in 0..KEYS {
                    let meta = crate::storage::encoding::Meta::string(record(i), 0);
                    batch.put_meta(&s, 0, format!("key:{i}").as_bytes(), &meta);
                }
                s.commit(batch).unwrap();
                s.compact_all();
            }
            s.compact_all();
            for i in (0..KEYS).step_by(997) {
                let meta = s.get_meta(0, format!("key:{i}").as_bytes()).unwrap();
                assert_eq!(meta.map(|m| m.value), Some(record(i)), "key:{i}");
            }
            s.property_sum("rocksdb.total-sst-files-size")
        };
        let zstd = sst_bytes(BottomCompression::Zstd, true);
        let lz4 = sst_bytes(BottomCompression::Lz4, false);
        let none = sst_bytes(BottomCompression::None, false);
        assert!(
            zstd < lz4 && lz4 < none,
            "SST bytes: zstd {zstd}, lz4 {lz4}, none {none}"
        );
    }

    /// With `rocksdb-tombstone-cleanup`, a scan that steps over the deletions a mass DEL left
    /// in the active memtable has it flushed at the next write; without it the memtable stays.
    #[test]
    fn a_scan_over_many_deletions_in_the_memtable_has_it_flushed() {
        use crate::storage::{encoding::Meta, Batch, CF_META};
        const KEYS: u32 = 30_000;
        for cleanup in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let t = Tuning {
                tombstone_cleanup: cleanup,
                ..tuning()
            };
            let s = Storage::open_tuned(dir.path(), HotCache::new(CacheSettings::default()), &t)
                .unwrap();
            let active = || {
                s.db.property_int_value_cf(s.cf(CF_META), "rocksdb.num-entries-active-mem-table")
                    .unwrap()
                    .unwrap()
            };
            let write = |from: u32, to: u32, delete: bool| {
                let mut b = Batch::default();
                for i in from..to {
                    let key = format!("key:{i:06}");
                    if delete {
                        b.delete_meta(&s, 0, key.as_bytes());
                    } else {
                        b.put_meta(&s, 0, key.as_bytes(), &Meta::string(b"v".to_vec(), 0));
                    }
                }
                s.commit(b).unwrap();
            };
            write(0, KEYS, false);
            s.db.flush_cf(s.cf(CF_META)).unwrap();
            write(0, KEYS - 10, true);
            assert!(active() >= u64::from(KEYS - 10));
            let mut found = Vec::new();
            s.scan_meta(0, None, 100, |key, _| {
                found.push(String::from_utf8_lossy(key).into_owned());
                true
            })
            .unwrap();
            found.sort();
            let left: Vec<String> = (KEYS - 10..KEYS).map(|i| format!("key:{i:06}")).collect();
            assert_eq!(found, left);
            // The flush the scan asked for is requested by the next write into the memtable
            // and scheduled by the one after it.
            write(KEYS, KEYS + 1, false);
            write(KEYS + 1, KEYS + 2, false);
            s.db.flush_wal(true).unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while cleanup && active() > 100 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if cleanup {
                assert!(active() <= 100, "flushed: {} entries left", active());
            } else {
                assert!(active() >= u64::from(KEYS - 10), "kept: {}", active());
            }
        }
    }
}
