//! Integration tests: storage at a size where the block cache cannot hold the data. Index and
//! filter blocks must stay cached while data blocks churn (partitioned, high priority), the
//! memory budget's split shows in INFO, CONFIG SET maxmemory resizes the caches, and the
//! allocator's settings reach jemalloc. Counters only, never timings.

use crate::common::{err, eventually, info, q, Endpoint, TestServer};
use rand::{Rng, SeedableRng};
use redis::Connection;
use std::time::Duration;

const KEYS: u64 = 100_000;
const VALUE_BYTES: usize = 1000;
const GETS: usize = 20_000;
const BATCH: usize = 500;

fn rocksdb_field(con: &mut Connection, field: &str) -> u64 {
    info(con, "rocksdb")["RocksDB"][field].parse().unwrap()
}

/// One `cf_<name>` line of INFO rocksdb as (field, value) pairs.
fn cf_fields(con: &mut Connection, cf: &str) -> Vec<(String, u64)> {
    info(con, "rocksdb")["RocksDB"][&format!("cf_{cf}")]
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn cf_field(con: &mut Connection, cf: &str, field: &str) -> u64 {
    cf_fields(con, cf)
        .into_iter()
        .find(|(k, _)| k == field)
        .unwrap_or_else(|| panic!("cf_{cf} has no {field}"))
        .1
}

/// SETs `key:0 .. key:{KEYS-1}` with incompressible-looking 1000-byte values, pipelined.
fn load(con: &mut Connection) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(14);
    let mut value = vec![0u8; VALUE_BYTES];
    for start in (0..KEYS).step_by(BATCH) {
        let mut pipe = redis::pipe();
        for i in start..(start + BATCH as u64).min(KEYS) {
            rng.fill(&mut value[..]);
            for b in value.iter_mut() {
                *b = b'a' + *b % 26;
            }
            pipe.cmd("SET")
                .arg(format!("key:{i:08}"))
                .arg(&value)
                .ignore();
        }
        pipe.query::<()>(con).unwrap();
    }
}

/// `n` GETs of uniformly random keys, pipelined; checks every key is found.
fn random_gets(con: &mut Connection, rng: &mut impl Rng, n: usize) {
    for _ in 0..n / BATCH {
        let mut pipe = redis::pipe();
        for _ in 0..BATCH {
            pipe.cmd("GET")
                .arg(format!("key:{:08}", rng.gen_range(0..KEYS)));
        }
        let values: Vec<Option<Vec<u8>>> = pipe.query(con).unwrap();
        assert!(values
            .iter()
            .all(|v| v.as_ref().map(Vec::len) == Some(VALUE_BYTES)));
    }
}

#[test]
fn index_and_filter_blocks_stay_cached_while_data_blocks_churn() {
    // 100 MB of values against a 16 MB budget (an 8 MB block cache); the hot cache is off, so
    // every GET reads RocksDB. With main's old layout (whole index and filter blocks per SST,
    // low priority, nothing pinned) in RocksDB's default 512 KiB cache shards, this run saw
    // 17,332 index block misses in 20,000 GETs. (At this size the old layout gets by in
    // kvik's 4 MiB shards; its whole-SST index blocks outgrow them at millions of keys.)
    let s = TestServer::start_with(&["--maxmemory", "16mb", "--cache-enabled", "no"]);
    let mut con = s.client();
    load(&mut con);
    // Flushes and compactions finish, so no new SST (with index partitions not yet loaded)
    // appears while we count.
    assert!(
        eventually(Duration::from_secs(40), || {
            let busy = ["meta", "data", "score"].iter().any(|cf| {
                cf_field(&mut con, cf, "memtable_flush_pending") != 0
                    || cf_field(&mut con, cf, "compaction_pending") != 0
            });
            !busy && rocksdb_field(&mut con, "num_running_compactions") == 0
        }),
        "compactions did not settle"
    );
    let sst = cf_field(&mut con, "meta", "sst_bytes");
    let capacity = rocksdb_field(&mut con, "block_cache_capacity");
    assert!(
        sst > 2 * capacity,
        "the data ({sst} B on disk) must not fit the block cache ({capacity} B)"
    );

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    random_gets(&mut con, &mut rng, GETS);
    let index_before = rocksdb_field(&mut con, "block_cache_index_miss");
    let filter_before = rocksdb_field(&mut con, "block_cache_filter_miss");
    let data_before = rocksdb_field(&mut con, "block_cache_data_miss");
    random_gets(&mut con, &mut rng, GETS);
    let index_misses = rocksdb_field(&mut con, "block_cache_index_miss") - index_before;
    let filter_misses = rocksdb_field(&mut con, "block_cache_filter_miss") - filter_before;
    let data_misses = rocksdb_field(&mut con, "block_cache_data_miss") - data_before;

    // The data does churn: most GETs miss the block cache for their data block ...
    assert!(
        data_misses as usize > GETS / 2,
        "data block misses {data_misses} of {GETS} GETs"
    );
    // ... yet index and filter partitions stay: near zero misses after the warm-up.
    assert!(
        (index_misses as usize) < GETS / 200,
        "index block misses {index_misses} of {GETS} GETs"
    );
    assert!(
        (filter_misses as usize) < GETS / 200,
        "filter block misses {filter_misses} of {GETS} GETs"
    );

    // The budget holds: the block cache stays near its capacity (memtables included).
    let mem = &info(&mut con, "memory")["Memory"];
    let usage: u64 = mem["kvik_block_cache_usage"].parse().unwrap();
    assert!(usage <= capacity + capacity / 10, "{usage} > {capacity}");
    assert_eq!(mem["maxmemory"], (16u64 << 20).to_string());
}

#[test]
fn maxmemory_splits_shows_and_resizes_at_run_time() {
    let s = TestServer::start_with(&["--maxmemory", "128mb"]);
    let mut con = s.client();
    let mem = &info(&mut con, "memory")["Memory"];
    assert_eq!(mem["maxmemory"], (128u64 << 20).to_string());
    assert_eq!(mem["kvik_maxmemory_auto"], "0");
    // 1/16 reserved for RocksDB outside the block cache, the rest halved.
    assert_eq!(mem["kvik_budget_reserve"], (8u64 << 20).to_string());
    assert_eq!(mem["kvik_hot_cache_max"], (60u64 << 20).to_string());
    assert_eq!(mem["kvik_block_cache_capacity"], (60u64 << 20).to_string());
    assert_eq!(mem["kvik_write_buffers_limit"], (15u64 << 20).to_string());
    for field in [
        "kvik_budget_used",
        "kvik_table_readers",
        "kvik_block_cache_pinned",
    ] {
        assert!(mem.contains_key(field), "INFO memory has {field}");
    }

    let _: String = q(&mut con, &["CONFIG", "SET", "maxmemory", "64mb"]);
    let mem = &info(&mut con, "memory")["Memory"];
    assert_eq!(mem["maxmemory"], (64u64 << 20).to_string());
    assert_eq!(mem["kvik_hot_cache_max"], (30u64 << 20).to_string());
    assert_eq!(rocksdb_field(&mut con, "block_cache_capacity"), 30 << 20);
    // An explicit cache-maxmemory is kept; the block cache gets the rest.
    let _: String = q(&mut con, &["CONFIG", "SET", "cache-maxmemory", "50mb"]);
    assert_eq!(rocksdb_field(&mut con, "block_cache_capacity"), 10 << 20);
    let got: Vec<String> = q(&mut con, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(got, vec!["maxmemory", &(64u64 << 20).to_string()]);

    // Stall thresholds are settings too, applied to RocksDB at once.
    let _: String = q(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "rocksdb-level0-slowdown-writes-trigger",
            "12",
        ],
    );
    let got: Vec<String> = q(
        &mut con,
        &["CONFIG", "GET", "rocksdb-level0-slowdown-writes-trigger"],
    );
    assert_eq!(got[1], "12");
    for cf in ["meta", "data", "score"] {
        assert_eq!(cf_field(&mut con, cf, "l0_files"), 0);
    }
    assert_eq!(rocksdb_field(&mut con, "is_write_stopped"), 0);
}

/// A memtable is flushed once it holds `rocksdb-memtable-max-entries` entries, by the timer,
/// while its bytes are far below `write_buffer_size`; with the limit at 0 it is not. Every key
/// is there afterwards. Counters only.
#[test]
fn a_memtable_is_flushed_at_its_entry_limit() {
    let s = TestServer::start_with(&["--rocksdb-memtable-max-entries", "0"]);
    let mut con = s.client();
    let set_many = |con: &mut Connection, from: u64| {
        let mut pipe = redis::pipe();
        for i in from..from + 3_000 {
            pipe.cmd("SET").arg(format!("key:{i}")).arg("v").ignore();
        }
        let () = pipe.query(con).unwrap();
    };

    // Off: 3,000 small entries stay in meta's memtable through several timer ticks.
    set_many(&mut con, 0);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(rocksdb_field(&mut con, "memtable_entry_flushes"), 0);
    assert!(cf_field(&mut con, "meta", "memtable_entries") >= 3_000);

    // On: the next tick flushes it, and the count says so.
    let _: String = q(
        &mut con,
        &["CONFIG", "SET", "rocksdb-memtable-max-entries", "2000"],
    );
    assert!(
        eventually(Duration::from_secs(10), || {
            rocksdb_field(&mut con, "memtable_entry_flushes") >= 1
        }),
        "no entry flush within 10 s"
    );
    assert!(cf_field(&mut con, "meta", "memtable_entries") < 2_000);
    set_many(&mut con, 3_000);
    let n: u64 = q(&mut con, &["DBSIZE"]);
    assert_eq!(n, 6_000);
    for i in [0, 2_999, 3_000, 5_999] {
        let v: Option<String> = q(&mut con, &["GET", &format!("key:{i}")]);
        assert_eq!(v.as_deref(), Some("v"), "key:{i}");
    }
    let got: Vec<String> = q(&mut con, &["CONFIG", "GET", "rocksdb-memtable-max-entries"]);
    assert_eq!(got[1], "2000");
    // Bad values get the setting's error, not a change.
    let e = err(
        &mut con,
        &["CONFIG", "SET", "rocksdb-write-buffer-size", "1kb"],
    );
    assert!(e.contains("between"), "{e}");
}

/// The allocator's settings reach jemalloc at startup and on CONFIG SET: INFO reads them back
/// from the allocator itself, not from the settings; the server runs one arena per CPU.
#[test]
fn allocator_settings_reach_jemalloc() {
    let s = TestServer::start_with(&["--jemalloc-dirty-decay-ms", "2500"]);
    let mut con = s.client();
    let mem = &info(&mut con, "memory")["Memory"];
    assert!(
        mem["mem_allocator"].starts_with("jemalloc-5."),
        "{}",
        mem["mem_allocator"]
    );
    assert_eq!(mem["kvik_allocator_background_thread"], "1");
    assert_eq!(mem["kvik_allocator_dirty_decay_ms"], "2500");
    // One arena per CPU (the binary's malloc_conf), not jemalloc's four per CPU.
    let arenas: usize = mem["kvik_allocator_arenas"].parse().unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(
        arenas >= 1 && arenas < 4 * cpus,
        "{arenas} arenas on {cpus} CPUs"
    );

    let _: String = q(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "jemalloc-bg-thread",
            "no",
            "jemalloc-dirty-decay-ms",
            "0",
        ],
    );
    let mem = &info(&mut con, "memory")["Memory"];
    assert_eq!(mem["kvik_allocator_background_thread"], "0");
    assert_eq!(mem["kvik_allocator_dirty_decay_ms"], "0");
    let e = err(
        &mut con,
        &["CONFIG", "SET", "jemalloc-dirty-decay-ms", "-2"],
    );
    assert!(e.contains("between -1 and 3600000"), "{e}");
    let got: Vec<String> = q(&mut con, &["CONFIG", "GET", "jemalloc-dirty-decay-ms"]);
    assert_eq!(got[1], "0");
}

/// How many column families the newest OPTIONS file RocksDB wrote under `dir` gives bottommost
/// compression `value` (RocksDB rewrites the file at open and at every option change).
fn cfs_with_bottom_compression(dir: &std::path::Path, value: &str) -> usize {
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                dirs.push(path);
            } else if name.starts_with("OPTIONS-") && !name.ends_with(".dbtmp") {
                files.push(path);
            }
        }
    }
    let number = |p: &std::path::PathBuf| -> u64 {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        name.trim_start_matches("OPTIONS-").parse().unwrap_or(0)
    };
    let newest = files
        .iter()
        .max_by_key(|p| number(p))
        .expect("an OPTIONS file");
    let text = std::fs::read_to_string(newest).unwrap();
    let line = format!("bottommost_compression={value}");
    text.lines().filter(|l| l.trim() == line).count()
}

/// `rocksdb-bottom-compression` reaches every column family of kvik at start and through
/// CONFIG SET, and a value it does not know gets Redis's CONFIG SET error.
#[test]
fn the_bottom_compression_is_a_setting() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = TestServer::start_in(dir.path(), &[]);
        let mut con = s.client();
        let got: Vec<String> = q(&mut con, &["CONFIG", "GET", "rocksdb-bottom-compression"]);
        assert_eq!(got, vec!["rocksdb-bottom-compression", "lz4"]);
        assert!(cfs_with_bottom_compression(dir.path(), "kLZ4Compression") >= 3);
        assert_eq!(cfs_with_bottom_compression(dir.path(), "kZSTD"), 0);
    }
    let s = TestServer::start_in(dir.path(), &["--rocksdb-bottom-compression", "zstd"]);
    let mut con = s.client();
    assert!(cfs_with_bottom_compression(dir.path(), "kZSTD") >= 3);
    let _: String = q(
        &mut con,
        &["CONFIG", "SET", "rocksdb-bottom-compression", "none"],
    );
    let got: Vec<String> = q(&mut con, &["CONFIG", "GET", "rocksdb-bottom-compression"]);
    assert_eq!(got[1], "none");
    assert!(cfs_with_bottom_compression(dir.path(), "kNoCompression") >= 3);
    assert_eq!(cfs_with_bottom_compression(dir.path(), "kZSTD"), 0);
    let e = err(
        &mut con,
        &["CONFIG", "SET", "rocksdb-bottom-compression", "snappy"],
    );
    assert!(
        e.contains("rocksdb-bottom-compression") && e.contains("lz4, zstd, none"),
        "{e}"
    );
    let got: Vec<String> = q(&mut con, &["CONFIG", "GET", "rocksdb-bottom-compression"]);
    assert_eq!(got[1], "none");
}

/// What an HSCAN or a ZRANGE from a collection's start steps over (INFO rocksdb `iter_skipped`,
/// RocksDB's count of entries iterators passed without returning them) after HDEL and ZPOPMIN
/// removed all but 10 of 30,000 entries.
fn skipped_by_scans(con: &mut Connection) -> u64 {
    let before = rocksdb_field(con, "iter_skipped");
    let _: redis::Value = q(con, &["HSCAN", "h", "0", "COUNT", "100"]);
    let _: Vec<String> = q(con, &["ZRANGE", "z", "0", "0"]);
    rocksdb_field(con, "iter_skipped") - before
}

fn fill_and_delete(con: &mut Connection, entries: u64, keep: u64) {
    for start in (0..entries).step_by(1000) {
        let mut hset = redis::cmd("HSET");
        let mut zadd = redis::cmd("ZADD");
        hset.arg("h");
        zadd.arg("z");
        for i in start..start + 1000 {
            hset.arg(format!("f:{i:06}")).arg("v");
            zadd.arg(i).arg(format!("m:{i:06}"));
        }
        let () = redis::pipe()
            .add_command(hset)
            .ignore()
            .add_command(zadd)
            .ignore()
            .query(con)
            .unwrap();
    }
    for start in (0..entries - keep).step_by(1000) {
        let end = (start + 1000).min(entries - keep);
        let mut hdel = redis::cmd("HDEL");
        hdel.arg("h");
        for i in start..end {
            hdel.arg(format!("f:{i:06}"));
        }
        let () = redis::pipe()
            .add_command(hdel)
            .ignore()
            .cmd("ZPOPMIN")
            .arg("z")
            .arg(end - start)
            .ignore()
            .query(con)
            .unwrap();
    }
    let left: (u64, u64) = redis::pipe()
        .cmd("HLEN")
        .arg("h")
        .cmd("ZCARD")
        .arg("z")
        .query(con)
        .unwrap();
    assert_eq!(left, (keep, keep));
}

/// A mass deletion does not slow the scans of what is left (blackwidow #19: HGETALL slow after
/// most fields were deleted): with `rocksdb-tombstone-cleanup`, the memtable holding the
/// deletions is flushed once writes stop and the files dense in them are compacted, so an
/// HSCAN and a ZRANGE from the start soon step over almost nothing; without it they step
/// over every deleted entry, and go on doing so. Counted by RocksDB, not timed.
#[test]
fn scans_after_a_mass_deletion_soon_step_over_nothing() {
    const ENTRIES: u64 = 30_000;
    const KEEP: u64 = 10;
    let s = TestServer::start();
    let mut con = s.client();
    let got: Vec<String> = q(&mut con, &["CONFIG", "GET", "rocksdb-tombstone-cleanup"]);
    assert_eq!(got[1], "yes");
    fill_and_delete(&mut con, ENTRIES, KEEP);
    let mut last = u64::MAX;
    assert!(
        eventually(Duration::from_secs(20), || {
            last = skipped_by_scans(&mut con);
            last < 1_000
        }),
        "scans still step over {last} entries after 20 s"
    );
    assert!(rocksdb_field(&mut con, "memtable_deletion_flushes") >= 1);
    let fields: Vec<String> = q(&mut con, &["HKEYS", "h"]);
    assert_eq!(fields.len() as u64, KEEP);
    let first: Vec<String> = q(&mut con, &["ZRANGE", "z", "0", "0"]);
    assert_eq!(first, vec![format!("m:{:06}", ENTRIES - KEEP)]);

    let off = TestServer::start_with(&["--rocksdb-tombstone-cleanup", "no"]);
    let mut con = off.client();
    fill_and_delete(&mut con, ENTRIES, KEEP);
    std::thread::sleep(Duration::from_secs(2));
    let skipped = skipped_by_scans(&mut con);
    assert!(
        skipped >= 2 * (ENTRIES - KEEP),
        "without the cleanup the scans step over each deleted field and member: {skipped}"
    );
    assert_eq!(rocksdb_field(&mut con, "memtable_deletion_flushes"), 0);
    let e = err(
        &mut con,
        &["CONFIG", "SET", "rocksdb-tombstone-cleanup", "yes"],
    );
    assert!(e.contains("rocksdb-tombstone-cleanup"), "{e}");
}
