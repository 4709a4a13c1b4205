//! Storage tests against a real RocksDB in a temporary directory.

use super::encoding::Meta;
use super::expire::{ActiveExpiry, Limit};
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
        deleted += cycle.run(&s, 2, Limit::entries(100)).unwrap().deleted;
    }
    assert_eq!(deleted, 1000);
    assert!(s.get_meta(0, b"e1").unwrap().is_none());
    assert!(s.get_meta(1, b"e499").unwrap().is_none());
    assert!(s.get_meta(0, b"l1").unwrap().is_some());
}

mod collections {
    use super::super::encoding::Kind;
    use super::super::{Batch, Cf, Coll, Storage};
    use crate::clock::unix_ms;

    /// Writes a hash of `n` fields under a fresh version, as a hash command would.
    fn write_hash(s: &Storage, key: &[u8], n: usize, expire_at_ms: u64) -> super::Meta {
        let mut meta = super::Meta::collection(Kind::Hash, s.next_version().unwrap(), expire_at_ms);
        let mut b = Batch::default();
        for i in 0..n {
            let field = format!("field-{i:08}");
            b.put_member(
                s,
                Cf::Data,
                &Coll::new(0, key, &meta),
                field.as_bytes(),
                &[7u8; 100],
            );
        }
        meta.len = n as u64;
        b.put_meta(s, 0, key, &meta);
        s.commit(b).unwrap();
        meta
    }

    fn members(s: &Storage, key: &[u8], meta: &super::Meta) -> usize {
        let mut n = 0;
        s.view()
            .for_each_member(Cf::Data, &Coll::new(0, key, meta), |_, _| {
                n += 1;
                true
            })
            .unwrap();
        n
    }

    fn data_entries(s: &Storage) -> u64 {
        s.property_sum("rocksdb.estimate-num-keys")
    }

    /// Writes `n` fields of a hash under `meta`'s version without its meta record (what a big
    /// copy commits before the batch that names the version), marked as being built if `mark`.
    fn write_unnamed(s: &Storage, key: &[u8], meta: &super::Meta, n: usize, mark: bool) {
        let mut b = Batch::default();
        for i in 0..n {
            let field = format!("field-{i:08}");
            b.put_member(
                s,
                Cf::Data,
                &Coll::new(0, key, meta),
                field.as_bytes(),
                b"v",
            );
        }
        if mark {
            b.mark_building(s, meta.version);
        }
        s.commit(b).unwrap();
    }

    /// Entries committed before the meta record that names their version survive compactions
    /// while the version is marked as being built (a compaction in the middle of a big RENAME
    /// dropped them); unmarked ones go as before; and the mark of a copy an earlier run left
    /// unfinished is cleared, after which its entries go too.
    #[test]
    fn entries_of_a_version_being_built_survive_compaction_until_named() {
        let dir = tempfile::tempdir().unwrap();
        let hash = |s: &Storage| super::Meta::collection(Kind::Hash, s.next_version().unwrap(), 0);
        let abandoned = {
            let s = Storage::open(dir.path()).unwrap();
            let m = hash(&s);
            write_unnamed(&s, b"abandoned", &m, 100, true);
            s.sync_wal().unwrap();
            m
        };
        let s = Storage::open(dir.path()).unwrap();
        let mut copy = hash(&s);
        copy.len = 100;
        write_unnamed(&s, b"copy", &copy, 100, true);
        let unmarked = hash(&s);
        write_unnamed(&s, b"unmarked", &unmarked, 100, false);
        s.compact_all();
        assert_eq!(
            members(&s, b"copy", &copy),
            100,
            "marked, in the middle of a copy"
        );
        assert_eq!(
            members(&s, b"abandoned", &abandoned),
            100,
            "marked, not cleared yet"
        );
        assert_eq!(members(&s, b"unmarked", &unmarked), 0);
        // The earlier run's mark goes; this run's stays while its copy goes on.
        assert_eq!(s.clear_abandoned_builds().unwrap(), 1);
        assert_eq!(s.clear_abandoned_builds().unwrap(), 0);
        s.compact_all();
        assert_eq!(members(&s, b"abandoned", &abandoned), 0);
        assert_eq!(members(&s, b"copy", &copy), 100);
        // The copy ends: its meta record and the end of the mark in one batch.
        let mut b = Batch::default();
        b.put_meta(&s, 0, b"copy", &copy);
        b.unmark_building(&s, copy.version);
        s.commit(b).unwrap();
        s.compact_all();
        assert_eq!(members(&s, b"copy", &copy), 100);
        assert_eq!(members(&s, b"abandoned", &abandoned), 0);
        // With the mark gone its entries are stale like any others once the key is.
        let mut b = Batch::default();
        b.delete_meta(&s, 0, b"copy");
        s.commit(b).unwrap();
        s.compact_all();
        assert_eq!(members(&s, b"copy", &copy), 0, "the mark outlived its copy");
    }

    #[test]
    fn versions_grow_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let last = {
            let s = Storage::open(dir.path()).unwrap();
            let a = s.next_version().unwrap();
            let b = s.next_version().unwrap();
            assert!(b > a);
            b
        };
        let s = Storage::open(dir.path()).unwrap();
        assert!(s.next_version().unwrap() > last);
    }

    #[test]
    fn cursor_reads_one_collection_in_order_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let a = write_hash(&s, b"a", 5, 0);
        write_hash(&s, b"ab", 3, 0); // a neighbouring key must not leak into "a"
        let view = s.view();
        let mut c = view.members(Cf::Data, &Coll::new(0, b"a", &a));
        c.first();
        let mut seen = Vec::new();
        while let Some((m, _)) = c.entry() {
            seen.push(String::from_utf8(m.to_vec()).unwrap());
            c.next();
        }
        assert_eq!(seen.len(), 5);
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        c.last();
        assert_eq!(c.entry().unwrap().0, b"field-00000004");
        c.seek(b"field-00000002x");
        assert_eq!(c.entry().unwrap().0, b"field-00000003");
        c.seek_back(b"field-00000002x");
        assert_eq!(c.entry().unwrap().0, b"field-00000002");
        let got = view
            .get_members(&Coll::new(0, b"a", &a), &[&b"field-00000001"[..], b"nope"])
            .unwrap();
        assert_eq!(got, vec![Some(vec![7u8; 100]), None]);
    }

    #[test]
    fn a_snapshot_view_does_not_see_later_writes() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let m = write_hash(&s, b"h", 3, 0);
        let view = s.view();
        let mut b = Batch::default();
        b.delete_meta(&s, 0, b"h");
        s.commit(b).unwrap();
        assert_eq!(view.get_meta(0, b"h").unwrap(), Some(m));
        assert_eq!(s.latest().get_meta(0, b"h").unwrap(), None);
    }

    #[test]
    fn delete_is_one_record_and_compaction_gives_the_space_back() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        let big = write_hash(&s, b"big", 20_000, 0);
        let kept = write_hash(&s, b"kept", 100, 0);
        let expired = write_hash(&s, b"gone", 100, unix_ms() - 1);
        let overwritten = write_hash(&s, b"over", 100, 0);
        let newer = write_hash(&s, b"over", 10, 0);
        s.compact_all();
        let before = s.property_sum("rocksdb.total-sst-files-size");
        let mut b = Batch::default();
        b.delete_meta(&s, 0, b"big");
        s.commit(b).unwrap();
        assert_eq!(s.get_meta(0, b"big").unwrap(), None);
        s.compact_all();
        let after = s.property_sum("rocksdb.total-sst-files-size");
        assert!(
            after * 4 < before,
            "{before} bytes before DEL, {after} after"
        );
        assert_eq!(members(&s, b"big", &big), 0);
        assert_eq!(members(&s, b"kept", &kept), 100);
        assert_eq!(members(&s, b"gone", &expired), 0);
        assert_eq!(members(&s, b"over", &overwritten), 0);
        assert_eq!(members(&s, b"over", &newer), 10);
        assert!(data_entries(&s) > 0);
    }

    #[test]
    fn export_and_import_copy_a_key_under_a_new_version() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        write_hash(&s, b"src", 50, 0);
        let rec = s.view().export_key(0, b"src", unix_ms()).unwrap().unwrap();
        assert_eq!(rec.data.len(), 50);
        let v = s.next_version().unwrap();
        let mut b = Batch::default();
        b.import_key(&s, 3, b"dst", &rec, v, 0);
        s.commit(b).unwrap();
        let copy = s.view().export_key(3, b"dst", unix_ms()).unwrap().unwrap();
        assert_eq!(copy.meta.version, v);
        assert_eq!((copy.data, copy.meta.len), (rec.data, rec.meta.len));
    }
}
