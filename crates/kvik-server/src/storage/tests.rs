//! Storage tests against a real RocksDB in a temporary directory.

use super::encoding::Meta;
use super::expire::ActiveExpiry;
use super::{Batch, Storage};
use crate::clock::unix_ms;

fn put(s: &Storage, db: u16, key: &[u8], meta: &Meta) {
    let mut b = Batch::default();
    b.put_meta(s, db, key, meta);
    s.commit(b).unwrap();
}

#[test]
fn records_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Storage::open(dir.path()).unwrap();
        put(&s, 0, b"k", &Meta::string(b"v".to_vec(), 0));
        s.sync_wal().unwrap();
    }
    let s = Storage::open(dir.path()).unwrap();
    assert_eq!(s.get_meta(0, b"k").unwrap().unwrap().value, b"v");
    assert!(s.get_meta(1, b"k").unwrap().is_none());
}

#[test]
fn compaction_filter_drops_expired_records_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    let past = unix_ms() - 1000;
    for i in 0..100u32 {
        put(
            &s,
            0,
            format!("old{i}").as_bytes(),
            &Meta::string(vec![1], past),
        );
        put(
            &s,
            0,
            format!("live{i}").as_bytes(),
            &Meta::string(vec![2], 0),
        );
    }
    // Before compaction the expired records are still on disk (only reads hide them).
    assert!(s.get_meta(0, b"old7").unwrap().is_some());
    assert!(s.get_live(0, b"old7", unix_ms()).unwrap().is_none());
    s.compact_all();
    assert!(s.get_meta(0, b"old7").unwrap().is_none());
    assert!(s.get_meta(0, b"live7").unwrap().is_some());
}

#[test]
fn an_expired_newer_version_does_not_resurrect_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    put(&s, 0, b"k", &Meta::string(b"old".to_vec(), 0));
    s.compact_all(); // push the old version to the bottom level
    put(&s, 0, b"k", &Meta::string(b"new".to_vec(), unix_ms() - 1));
    s.compact_all();
    assert!(s.get_meta(0, b"k").unwrap().is_none());
}

#[test]
fn flush_db_removes_only_that_database() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    put(&s, 0, b"a", &Meta::string(vec![], 0));
    put(&s, 1, b"a", &Meta::string(vec![], 0));
    put(&s, 2, b"a", &Meta::string(vec![], 0));
    s.flush_db(1).unwrap();
    assert!(s.get_meta(0, b"a").unwrap().is_some());
    assert!(s.get_meta(1, b"a").unwrap().is_none());
    assert!(s.get_meta(2, b"a").unwrap().is_some());
    s.flush_all().unwrap();
    assert!(s.get_meta(0, b"a").unwrap().is_none());
    assert!(s.get_meta(2, b"a").unwrap().is_none());
}

#[test]
fn scan_meta_pages_visit_every_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    for i in 0..1000u32 {
        put(
            &s,
            3,
            format!("key:{i}").as_bytes(),
            &Meta::string(vec![], 0),
        );
    }
    put(&s, 4, b"other-db", &Meta::string(vec![], 0));
    let mut seen = std::collections::HashSet::new();
    let mut after = None;
    loop {
        let next = s
            .scan_meta(3, after.as_deref(), 37, |k, _| {
                assert!(seen.insert(k.to_vec()), "key visited twice");
                true
            })
            .unwrap();
        match next {
            Some(pos) => after = Some(pos),
            None => break,
        }
    }
    assert_eq!(seen.len(), 1000);
}

#[test]
fn active_expiry_deletes_expired_keys_and_keeps_live_ones() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path()).unwrap();
    let past = unix_ms() - 1;
    for i in 0..500u32 {
        put(
            &s,
            0,
            format!("e{i}").as_bytes(),
            &Meta::string(vec![], past),
        );
        put(
            &s,
            1,
            format!("e{i}").as_bytes(),
            &Meta::string(vec![], past),
        );
        put(&s, 0, format!("l{i}").as_bytes(), &Meta::string(vec![], 0));
    }
    let mut cycle = ActiveExpiry::default();
    let mut deleted = 0;
    for _ in 0..20 {
        deleted += cycle.run(&s, 2, 100).unwrap();
    }
    assert_eq!(deleted, 1000);
    assert!(s.get_meta(0, b"e1").unwrap().is_none());
    assert!(s.get_meta(1, b"e499").unwrap().is_none());
    assert!(s.get_meta(0, b"l1").unwrap().is_some());
}
