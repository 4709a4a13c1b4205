//! Key counts and the expiry index against a real RocksDB: every test compares the maintained
//! counts and index with what a full scan of the meta column family finds.

use super::encoding::{Kind, Meta};
use super::expire::{ActiveExpiry, Limit};
use super::{expiry_index, Batch, Cf, Coll, Storage, CF_EXPIRY, INTERNAL_DB};
use crate::clock::unix_ms;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::Path;

fn string(expire_at_ms: u64) -> Meta {
    Meta::string(b"v".to_vec(), expire_at_ms)
}

fn put(s: &Storage, db: u16, key: &[u8], meta: &Meta) {
    let mut b = Batch::default();
    b.put_meta(s, db, key, meta);
    s.commit(b).unwrap();
}

/// Writes `n` strings `<prefix>0..` to `db` that expired a second ago.
fn put_expired(s: &Storage, db: u16, prefix: &str, n: u32) {
    let past = unix_ms() - 1000;
    for i in 0..n {
        put(s, db, format!("{prefix}{i}").as_bytes(), &string(past));
    }
}

fn del(s: &Storage, db: u16, key: &[u8]) {
    let mut b = Batch::default();
    b.delete_meta(s, db, key);
    s.commit(b).unwrap();
}

/// Expiry index entries as (db, expire_at_ms, key).
type Entries = BTreeSet<(u16, u64, Vec<u8>)>;

/// (keys, keys with an expiry, the sum of their expiry times) of `db` by a full scan, and the
/// expiry index entries that scan implies, as (db, expire_at_ms, key).
fn scanned(s: &Storage, db: u16) -> ((u64, u64, i128), Entries) {
    let (mut keys, mut expires, mut sum, mut index) = (0, 0, 0, BTreeSet::new());
    s.scan_meta(db, None, usize::MAX, |k, m| {
        keys += 1;
        if m.expire_at_ms != 0 {
            expires += 1;
            sum += i128::from(m.expire_at_ms);
            index.insert((db, m.expire_at_ms, k.to_vec()));
        }
        true
    })
    .unwrap();
    ((keys, expires, sum), index)
}

/// Every entry of the expiry index.
fn index_entries(s: &Storage) -> Entries {
    let mut it = s.db.raw_iterator_cf(s.cf(CF_EXPIRY));
    it.seek_to_first();
    let mut out = BTreeSet::new();
    while let Some(raw) = it.key() {
        let db = u16::from_be_bytes([raw[0], raw[1]]);
        let (at, key) = expiry_index::decode(raw).unwrap();
        out.insert((db, at, key.to_vec()));
        it.next();
    }
    out
}

/// Asserts that the counts of databases `0..dbs` and the whole expiry index match a scan.
pub(super) fn assert_consistent(s: &Storage, dbs: u16) {
    let mut index = BTreeSet::new();
    for db in 0..dbs {
        let (counts, entries) = scanned(s, db);
        assert_eq!(
            (
                s.key_count(db),
                s.expires_count(db),
                s.counts.expiry_sum(db)
            ),
            counts,
            "counts of db {db}"
        );
        index.extend(entries);
    }
    assert_eq!(index_entries(s), index, "expiry index");
}

#[test]
fn counts_follow_puts_overwrites_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    let later = unix_ms() + 3_600_000;
    put(&s, 0, b"a", &string(0));
    put(&s, 0, b"a", &string(0)); // overwrite: no change
    put(&s, 0, b"b", &string(later));
    put(&s, 2, b"a", &string(0));
    assert_eq!(
        (s.key_count(0), s.expires_count(0), s.key_count(2)),
        (2, 1, 1)
    );
    put(&s, 0, b"b", &string(later + 1)); // a new expiry: same counts, index moved
    put(&s, 0, b"a", &string(later)); // gains an expiry
    assert_eq!((s.key_count(0), s.expires_count(0)), (2, 2));
    put(&s, 0, b"b", &string(0)); // loses it (SET without KEEPTTL, PERSIST)
    assert_eq!(s.expires_count(0), 1);
    // A collection over a string (another type): one key still.
    put(
        &s,
        0,
        b"a",
        &Meta::collection(Kind::Hash, s.next_version().unwrap(), 0),
    );
    assert_eq!((s.key_count(0), s.expires_count(0)), (2, 0));
    del(&s, 0, b"a");
    del(&s, 0, b"nothing-here");
    assert_eq!(s.key_count(0), 1);
    assert_consistent(&s, 3);
}

#[test]
fn one_batch_writing_a_key_several_times_counts_its_last_state() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    let later = unix_ms() + 3_600_000;
    put(&s, 0, b"src", &string(later));
    put(&s, 0, b"dst", &string(0));
    // RENAME src dst: delete src, put dst with src's expiry.
    let mut b = Batch::default();
    b.delete_meta(&s, 0, b"src");
    b.put_meta(&s, 0, b"dst", &string(later));
    s.commit(b).unwrap();
    assert_eq!((s.key_count(0), s.expires_count(0)), (1, 1));
    // EXEC of SET k EX, SET k EX (another time), DEL k, SET k: one key, no expiry.
    let mut b = Batch::default();
    b.put_meta(&s, 0, b"k", &string(later));
    b.put_meta(&s, 0, b"k", &string(later + 5));
    b.delete_meta(&s, 0, b"k");
    b.put_meta(&s, 0, b"k", &string(0));
    s.commit(b).unwrap();
    assert_eq!((s.key_count(0), s.expires_count(0)), (2, 1));
    // MOVE dst 0 -> 1.
    let mut b = Batch::default();
    b.delete_meta(&s, 0, b"dst");
    b.put_meta(&s, 1, b"dst", &string(later));
    s.commit(b).unwrap();
    assert_eq!(
        (s.key_count(0), s.key_count(1), s.expires_count(1)),
        (1, 1, 1)
    );
    assert_consistent(&s, 2);
}

#[test]
fn counts_survive_reopen_and_flushes_reset_them() {
    let dir = tempfile::tempdir().unwrap();
    let later = unix_ms() + 3_600_000;
    {
        let s = Storage::open(dir.path()).unwrap();
        for db in 0..3u16 {
            for i in 0..100u32 {
                let exp = if i % 4 == 0 { later + u64::from(i) } else { 0 };
                put(&s, db, format!("k{i}").as_bytes(), &string(exp));
            }
        }
        s.fold_counts().unwrap(); // absolute counts, then more delta records after them
        del(&s, 0, b"k1");
        put(&s, 0, b"k1", &string(0));
        s.flush_db(1).unwrap();
        assert_eq!((s.key_count(1), s.expires_count(1)), (0, 0));
        put(&s, 1, b"after-flush", &string(later));
    }
    let s = Storage::open(dir.path()).unwrap();
    assert_eq!((s.key_count(0), s.expires_count(0)), (100, 25));
    assert_eq!((s.key_count(1), s.expires_count(1)), (1, 1));
    assert_consistent(&s, 3);
    s.flush_all().unwrap();
    put(&s, 2, b"x", &string(0));
    drop(s);
    let s = Storage::open(dir.path()).unwrap();
    assert_eq!((s.key_count(0), s.key_count(1), s.key_count(2)), (0, 0, 1));
    assert_consistent(&s, 3);
}

#[test]
fn compaction_keeps_expired_records_until_active_expiry_counts_them_out() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    let past = unix_ms() - 1000;
    for i in 0..100u32 {
        put(&s, 0, format!("old{i}").as_bytes(), &string(past));
        put(&s, 0, format!("live{i}").as_bytes(), &string(0));
    }
    s.compact_all();
    // Expired keys count until they are removed (as in Redis), and compaction removes none
    // behind the counts' back.
    assert!(s.get_meta(0, b"old7").unwrap().is_some());
    assert!(s.get_live(0, b"old7", unix_ms()).unwrap().is_none());
    assert_eq!((s.key_count(0), s.expires_count(0)), (200, 100));
    assert_consistent(&s, 1);
    assert_eq!(
        ActiveExpiry::default()
            .run(&s, 1, Limit::entries(1000))
            .unwrap()
            .deleted,
        100
    );
    s.compact_all();
    assert_eq!((s.key_count(0), s.expires_count(0)), (100, 0));
    assert_consistent(&s, 1);
    drop(s);
    let s = Storage::open(dir.path()).unwrap();
    assert_eq!((s.key_count(0), s.expires_count(0)), (100, 0));
}

/// Active expiry reads a due key's record only where the hot cache does not hold the key, and
/// then once (its re-check under the lock): the commit counts the deletions from that state,
/// not from a second read. 100 due keys written before a reopen (not cached) and 100 written
/// after it (cached by their writes): RocksDB reads exactly 100 keys for the 200 deletions.
#[test]
fn active_expiry_reads_only_uncached_due_keys_once() {
    use rocksdb::statistics::Ticker;
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    put_expired(&s, 0, "old", 100);
    for i in 0..100u32 {
        put(&s, 0, format!("live{i}").as_bytes(), &string(0));
    }
    drop(s);
    let s = Storage::open(dir.path()).unwrap();
    put_expired(&s, 0, "new", 100);
    let reads = |s: &Storage| {
        s.shared().ticker(Ticker::NumberKeysRead)
            + s.shared().ticker(Ticker::NumberMultigetKeysRead)
    };
    let before = reads(&s);
    let cycle = ActiveExpiry::default()
        .run(&s, 1, Limit::entries(1000))
        .unwrap();
    assert_eq!((cycle.deleted, cycle.behind), (200, false));
    assert_eq!(reads(&s) - before, 100);
    assert_eq!((s.key_count(0), s.expires_count(0)), (100, 0));
    assert_consistent(&s, 1);
}

/// A run limited by time stops between steps once its time is up, says it is behind while keys
/// are still due, and always makes one step first: with its time already over, each run
/// deletes one step's keys, and the runs together delete every due key, then report done.
#[test]
fn an_expiry_run_out_of_time_takes_one_step_and_says_it_is_behind() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    put_expired(&s, 0, "old", 1000);
    let mut expiry = ActiveExpiry::default();
    let mut runs = Vec::new();
    loop {
        let cycle = expiry
            .run(&s, 1, Limit::until(std::time::Instant::now()))
            .unwrap();
        runs.push(cycle.deleted);
        if !cycle.behind {
            break;
        }
        assert!(runs.len() < 100, "never caught up: {runs:?}");
    }
    // Steps of 256 entries: 256, 256, 256, 232, then nothing left.
    assert_eq!(runs.iter().sum::<u64>(), 1000, "{runs:?}");
    assert!(runs.len() >= 4 && runs[0] == 256, "{runs:?}");
    assert_eq!(s.key_count(0), 0);
    assert_consistent(&s, 1);
}

#[test]
fn an_expired_newer_version_does_not_resurrect_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    put(&s, 0, b"k", &string(0));
    s.compact_all(); // push the old version to the bottom level
    put(&s, 0, b"k", &string(unix_ms() - 1));
    assert_eq!(
        ActiveExpiry::default()
            .run(&s, 1, Limit::entries(10))
            .unwrap()
            .deleted,
        1
    );
    s.compact_all();
    assert!(s.get_meta(0, b"k").unwrap().is_none());
    assert_eq!(s.key_count(0), 0);
}

#[test]
fn active_expiry_reads_only_due_entries_and_sleeps_until_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    let now = unix_ms();
    for i in 0..2000u32 {
        put(
            &s,
            0,
            format!("far{i}").as_bytes(),
            &string(now + 3_600_000),
        );
    }
    for i in 0..10u32 {
        put(&s, 0, format!("due{i}").as_bytes(), &string(now - 5));
    }
    let mut cycle = ActiveExpiry::default();
    assert_eq!(cycle.run(&s, 16, Limit::entries(100)).unwrap().deleted, 10);
    // Nothing is due before the first far key: the next cycles do not even seek.
    let from = s
        .counts
        .get(0)
        .unwrap()
        .expiry_scan_from
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(from, now + 3_600_000);
    assert_eq!(cycle.run(&s, 16, Limit::entries(100)).unwrap().deleted, 0);
    // A commit indexing an earlier expiry brings the scan start back.
    put(&s, 0, b"soon", &string(now - 1));
    assert_eq!(cycle.run(&s, 16, Limit::entries(100)).unwrap().deleted, 1);
    assert_eq!((s.key_count(0), s.expires_count(0)), (2000, 2000));
    assert_consistent(&s, 1);
}

#[test]
fn active_expiry_spreads_its_budget_over_databases() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    for db in 0..3u16 {
        put_expired(&s, db, "e", 250);
    }
    let mut cycle = ActiveExpiry::default();
    let mut deleted = 0;
    for _ in 0..10 {
        deleted += cycle.run(&s, 3, Limit::entries(100)).unwrap().deleted;
    }
    assert_eq!(deleted, 750);
    assert_consistent(&s, 3);
}

/// Opens `dir` as plain RocksDB and drops the counts and the expiry index, as a data directory
/// written by a kvik without them looks.
fn forget_counts(dir: &Path) {
    let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), dir).unwrap();
    let mut db = rocksdb::DB::open_cf(&rocksdb::Options::default(), dir, &cfs).unwrap();
    db.drop_cf("counts").unwrap();
    db.drop_cf("expiry").unwrap();
}

#[test]
fn a_data_directory_without_counts_is_counted_once_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let past = unix_ms() - 1;
    {
        let s = Storage::open(dir.path()).unwrap();
        for i in 0..500u32 {
            let exp = if i % 10 == 0 { past } else { 0 };
            put(&s, (i % 2) as u16, format!("k{i}").as_bytes(), &string(exp));
        }
    }
    forget_counts(dir.path());
    {
        let s = Storage::open(dir.path()).unwrap();
        assert_eq!((s.key_count(0), s.expires_count(0)), (250, 50));
        assert_eq!((s.key_count(1), s.expires_count(1)), (250, 0));
        assert_consistent(&s, 2);
        // The rebuilt index drives active expiry.
        assert_eq!(
            ActiveExpiry::default()
                .run(&s, 2, Limit::entries(1000))
                .unwrap()
                .deleted,
            50
        );
    }
    let s = Storage::open(dir.path()).unwrap();
    assert_eq!((s.key_count(0), s.expires_count(0)), (200, 0));
    assert_consistent(&s, 2);
}

/// A data directory whose counts were kept before the expiry sums were (COMPLETE_KEY `1`, no
/// `s` counters, delta records of 18-byte entries) gets its sums from the expiry index at its
/// next open, and its old delta records still count.
#[test]
fn a_data_directory_counted_before_expiry_sums_were_kept_sums_them_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let later = unix_ms() + 3_600_000;
    {
        let s = Storage::open(dir.path()).unwrap();
        for i in 0..300u32 {
            let exp = if i % 3 == 0 { later + u64::from(i) } else { 0 };
            put(
                &s,
                (i % 2) as u16 * 2,
                format!("k{i}").as_bytes(),
                &string(exp),
            );
        }
        s.fold_counts().unwrap();
    }
    {
        let cfs = rocksdb::DB::list_cf(&rocksdb::Options::default(), dir.path()).unwrap();
        let db = rocksdb::DB::open_cf(&rocksdb::Options::default(), dir.path(), &cfs).unwrap();
        let counts = db.cf_handle("counts").unwrap();
        db.put_cf(counts, [0xff, 0xff, b'v'], b"1").unwrap();
        for d in [0u8, 2] {
            db.delete_cf(counts, [0, d, b's']).unwrap();
        }
        // One key of db 0 counted by an old delta record instead of the absolute counter.
        let keys = db.get_cf(counts, [0, 0, b'k']).unwrap().unwrap();
        let keys = i64::from_le_bytes(keys[..].try_into().unwrap());
        db.put_cf(counts, [0, 0, b'k'], (keys - 1).to_le_bytes())
            .unwrap();
        let mut old = vec![0u8, 0];
        old.extend_from_slice(&1i64.to_le_bytes());
        old.extend_from_slice(&0i64.to_le_bytes());
        let mut delta_key = vec![0xff, 0xff, b'd'];
        delta_key.extend_from_slice(&7u64.to_be_bytes());
        db.put_cf(counts, delta_key, old).unwrap();
        // A hash field's index entry, which the sum must leave out.
        let expiry = db.cf_handle("expiry").unwrap();
        db.put_cf(expiry, expiry_index::field_key(0, later, b"h", 1, b"f"), [])
            .unwrap();
    }
    let s = Storage::open(dir.path()).unwrap();
    for db in [0, 2] {
        let ((keys, expires, sum), _) = scanned(&s, db);
        assert_eq!((keys, expires), (150, 50));
        assert_eq!(
            (
                s.key_count(db),
                s.expires_count(db),
                s.counts.expiry_sum(db)
            ),
            (keys, expires, sum),
            "db {db}"
        );
        let mean = s.avg_ttl_ms(db);
        assert!((3_500_000..=3_600_300).contains(&mean), "{mean}");
    }
    drop(s);
    let s = Storage::open(dir.path()).unwrap();
    let ((_, _, sum), _) = scanned(&s, 2);
    assert_eq!(s.counts.expiry_sum(2), sum);
}

#[test]
fn internal_records_are_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    put(&s, INTERNAL_DB, b"topology", &string(0));
    s.flush_all().unwrap();
    assert!(s.get_meta(INTERNAL_DB, b"topology").unwrap().is_some());
    assert_eq!(s.key_count(INTERNAL_DB), 0);
    assert_eq!(s.key_count(0), 0);
}

/// One step of a random write sequence.
#[derive(Clone, Debug)]
enum Op {
    /// Put key `k` of db `db`: no expiry, a past one, or a future one.
    Put(u16, u8, u8),
    Del(u16, u8),
    /// RENAME-like: delete `src`, put `dst` (maybe in another db), in one batch.
    Move(u16, u8, u16, u8),
    /// Two puts of one key in one batch (EXEC).
    Twice(u16, u8, u8, u8),
    /// Many writes of a few keys (a put with its expiry, or a delete) in one batch, or in one
    /// transaction of a batch each (an I/O thread's turn): past a handful of keys the commit
    /// finds each key's state by hashing.
    Many(u16, Vec<(u8, Option<u8>)>, bool),
    FlushDb(u16),
    FlushAll,
    Expire,
    Compact,
    Fold,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let db = 0u16..3;
    let key = 0u8..8;
    let exp = 0u8..3;
    prop_oneof![
        6 => (db.clone(), key.clone(), exp.clone()).prop_map(|(d, k, e)| Op::Put(d, k, e)),
        3 => (db.clone(), key.clone()).prop_map(|(d, k)| Op::Del(d, k)),
        2 => (db.clone(), key.clone(), db.clone(), key.clone())
            .prop_map(|(a, k, b, j)| Op::Move(a, k, b, j)),
        2 => (db.clone(), key.clone(), exp.clone(), exp.clone()).prop_map(|(d, k, a, b)| Op::Twice(d, k, a, b)),
        2 => (
            db.clone(),
            proptest::collection::vec((0u8..24, proptest::option::of(exp)), 9..40),
            any::<bool>()
        )
            .prop_map(|(d, writes, txn)| Op::Many(d, writes, txn)),
        1 => db.prop_map(Op::FlushDb),
        1 => Just(Op::FlushAll),
        2 => Just(Op::Expire),
        1 => Just(Op::Compact),
        1 => Just(Op::Fold),
        1 => Just(Op::Reopen),
    ]
}

fn expiry(e: u8, now: u64) -> u64 {
    match e {
        0 => 0,
        1 => now - 10,
        _ => now + 3_600_000 + u64::from(e),
    }
}

fn run_ops(dir: &Path, ops: &[Op]) {
    let mut s = Storage::open(dir).unwrap();
    let now = unix_ms();
    for op in ops {
        let k = |k: u8| vec![b'k', k];
        match *op {
            Op::Put(db, key, e) => put(&s, db, &k(key), &string(expiry(e, now))),
            Op::Del(db, key) => del(&s, db, &k(key)),
            Op::Move(a, key, b, j) => {
                let mut batch = Batch::default();
                if let Some(meta) = s.get_meta(a, &k(key)).unwrap() {
                    batch.delete_meta(&s, a, &k(key));
                    batch.put_meta(&s, b, &k(j), &meta);
                }
                s.commit(batch).unwrap();
            }
            Op::Twice(db, key, e1, e2) => {
                let mut batch = Batch::default();
                batch.put_meta(&s, db, &k(key), &string(expiry(e1, now)));
                batch.put_meta(&s, db, &k(key), &string(expiry(e2, now)));
                s.commit(batch).unwrap();
            }
            Op::Many(db, ref writes, txn) => {
                let write = |batch: &mut Batch, key: u8, e: Option<u8>| match e {
                    Some(e) => batch.put_meta(&s, db, &k(key), &string(expiry(e, now))),
                    None => batch.delete_meta(&s, db, &k(key)),
                };
                if txn {
                    let t = s.begin_txn();
                    for &(key, e) in writes {
                        let mut batch = Batch::default();
                        write(&mut batch, key, e);
                        s.commit(batch).unwrap();
                    }
                    t.commit().unwrap();
                } else {
                    let mut batch = Batch::default();
                    for &(key, e) in writes {
                        write(&mut batch, key, e);
                    }
                    s.commit(batch).unwrap();
                }
            }
            Op::FlushDb(db) => s.flush_db(db).unwrap(),
            Op::FlushAll => s.flush_all().unwrap(),
            Op::Expire => {
                ActiveExpiry::default()
                    .run(&s, 3, Limit::entries(1000))
                    .unwrap();
            }
            Op::Compact => s.compact_all(),
            Op::Fold => s.fold_counts().unwrap(),
            Op::Reopen => {
                drop(s);
                s = Storage::open(dir).unwrap();
            }
        }
    }
    assert_consistent(&s, 3);
    drop(s);
    let s = Storage::open(dir).unwrap();
    assert_consistent(&s, 3);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn maintained_counts_match_a_full_scan(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        run_ops(dir.path(), &ops);
    }
}

/// Big deleted or expired collections must not slow reads of other keys (Kvrocks #876): the
/// reads below count, with RocksDB's perf context, the internal entries and tombstones they step
/// over, and must step over none of the big collections' garbage.
mod garbage {
    use super::*;
    use rocksdb::perf::{set_perf_stats, PerfContext, PerfMetric, PerfStatsLevel};

    const BIG: usize = 20_000;

    fn write_hash(s: &Storage, key: &[u8], n: usize, expire_at_ms: u64) -> Meta {
        let mut meta = Meta::collection(Kind::Hash, s.next_version().unwrap(), expire_at_ms);
        let mut b = Batch::default();
        for i in 0..n {
            let coll = Coll::new(0, key, &meta);
            b.put_member(s, Cf::Data, &coll, format!("f{i:06}").as_bytes(), b"value");
        }
        meta.len = n as u64;
        b.put_meta(s, 0, key, &meta);
        s.commit(b).unwrap();
        meta
    }

    /// Reads every small key forward and backward, one member and the meta record of each;
    /// returns (internal keys skipped, tombstones skipped).
    fn skipped_reading(s: &Storage, small: &[(Vec<u8>, Meta)]) -> (u64, u64) {
        set_perf_stats(PerfStatsLevel::EnableCount);
        let mut ctx = PerfContext::default();
        ctx.reset();
        let view = s.view();
        for (key, meta) in small {
            assert!(view.get_meta(0, key).unwrap().is_some());
            let coll = Coll::new(0, key, meta);
            assert!(view.get_member(&coll, b"f000003").unwrap().is_some());
            let mut n = 0;
            view.for_each_member(Cf::Data, &coll, |_, _| {
                n += 1;
                true
            })
            .unwrap();
            assert_eq!(n, 10);
            let mut c = view.members(Cf::Data, &coll);
            c.last();
            while c.entry().is_some() {
                c.prev();
            }
        }
        let skipped = (
            ctx.metric(PerfMetric::InternalKeySkippedCount),
            ctx.metric(PerfMetric::InternalDeleteSkippedCount),
        );
        set_perf_stats(PerfStatsLevel::Disable);
        skipped
    }

    #[test]
    fn reads_of_other_keys_skip_no_garbage_of_big_collections() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        // One slot ({t}), so the big collections' entries sit right between the small keys'.
        let small: Vec<(Vec<u8>, Meta)> = ["{t}a", "{t}m", "{t}z", "{t}big0", "{t}big9"]
            .iter()
            .map(|k| (k.as_bytes().to_vec(), write_hash(&s, k.as_bytes(), 10, 0)))
            .collect();
        let deleted = write_hash(&s, b"{t}big1", BIG, 0);
        let expired = write_hash(&s, b"{t}big2", BIG, unix_ms() - 1);
        let emptied = write_hash(&s, b"{t}big3", BIG, 0);
        s.compact_all(); // members at the bottom, so their deletions stay above them
        let baseline = skipped_reading(&s, &small);

        // DEL (O(1): the members stay until compaction), expiry, and HDEL of every member.
        del(&s, 0, b"{t}big1");
        assert_eq!(
            ActiveExpiry::default()
                .run(&s, 1, Limit::entries(100))
                .unwrap()
                .deleted,
            1
        );
        let mut b = Batch::default();
        let coll = Coll::new(0, b"{t}big3", &emptied);
        for i in 0..BIG {
            b.delete_member(&s, Cf::Data, &coll, format!("f{i:06}").as_bytes());
        }
        s.commit(b).unwrap();
        let after_delete = skipped_reading(&s, &small);

        // The same with the deletions flushed from the memtable into a table file.
        s.db.flush_cf(s.cf(super::super::CF_DATA)).unwrap();
        let after_flush = skipped_reading(&s, &small);
        for skipped in [after_delete, after_flush] {
            assert!(
                skipped.0 <= baseline.0 + 10 && skipped.1 <= baseline.1 + 10,
                "skipped {skipped:?} internal entries/tombstones, {baseline:?} before the deletes"
            );
        }
        let _ = (deleted, expired);
    }
}
