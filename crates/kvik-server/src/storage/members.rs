//! Collection members: consistent read views, member cursors, member writes, and the type-blind
//! key copy that RENAME, COPY, MOVE, DUMP/RESTORE and slot migration share.
//!
//! A collection is its meta record plus its entries under [`data_prefix`] in the data CF (and, for
//! sorted sets, the score CF). Readers take no lock: a [`View`] is one RocksDB snapshot, so a
//! meta record and the members read after it always agree (a reply's array length is the meta
//! length). Writers hold the key's stripe lock and read the latest state ([`Storage::latest`]),
//! then commit one [`Batch`] with the member changes and the new meta record together.
//!
//! Deleting or overwriting a collection only replaces its meta record (O(1)): a new collection
//! gets a new version from [`Storage::next_version`], and the members of any other version are
//! dropped later by the data compaction filter.

use super::encoding::{
    data_key, data_prefix, field_expired, prefix_successor, split_field_value, Kind, Meta,
    FIELD_TTL_LEN,
};
use super::txn::RawCursor;
use super::CF_META;
use super::{
    expiry_index, Batch, Storage, StorageError, StorageResult, Wait, CF_DATA, CF_EXPIRY, CF_SCORE,
};
use rocksdb::{ReadOptions, SnapshotWithThreadMode, DB};

/// Entries in the first chunk of [`View::for_each_chunk`].
pub const FIRST_CHUNK: usize = 16;

/// The column family of a collection entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cf {
    /// Hash fields, set members, list positions, sorted-set member -> score.
    Data,
    /// Sorted-set score index: score + member -> empty.
    Score,
}

impl Cf {
    fn name(self) -> &'static str {
        match self {
            Cf::Data => CF_DATA,
            Cf::Score => CF_SCORE,
        }
    }
}

/// One version of one collection: where its entries live.
#[derive(Clone, Copy, Debug)]
pub struct Coll<'k> {
    pub db: u16,
    pub key: &'k [u8],
    pub version: u64,
    /// For a hash with field TTLs: the time reads judge field expiry at. Reads through this
    /// `Coll` then skip expired fields and return values without their expiry prefix (see
    /// `encoding`); `None` reads entries as stored.
    pub ttl_now: Option<u64>,
}

impl<'k> Coll<'k> {
    /// The collection `meta` describes, stored as `key` of database `db`. Its reads hide
    /// expired hash fields as of now.
    pub fn new(db: u16, key: &'k [u8], meta: &Meta) -> Coll<'k> {
        Coll {
            db,
            key,
            version: meta.version,
            ttl_now: meta.field_ttls.then(crate::clock::unix_ms),
        }
    }

    /// The same collection read as stored (field values with their expiry prefix, expired
    /// fields included): for type-blind copies and for writers that keep the length.
    pub fn raw(self) -> Coll<'k> {
        Coll {
            ttl_now: None,
            ..self
        }
    }

    /// A stored value as readers see it: `None` if it is an expired field.
    fn visible(&self, raw: Vec<u8>) -> Option<Vec<u8>> {
        match self.ttl_now {
            None => Some(raw),
            Some(now) => {
                let (at, _) = split_field_value(&raw);
                (!field_expired(at, now)).then(|| raw[FIELD_TTL_LEN.min(raw.len())..].to_vec())
            }
        }
    }

    /// Where the collection's entries are stored: the key prefix they share.
    pub fn prefix(&self) -> Vec<u8> {
        data_prefix(self.db, self.key, self.version)
    }

    fn entry_key(&self, member: &[u8]) -> Vec<u8> {
        data_key(self.db, self.key, self.version, member)
    }
}

/// A read view of the whole database: a snapshot ([`Storage::view`]) or the latest state
/// ([`Storage::latest`], for writers that hold the key locks).
pub struct View<'a> {
    storage: &'a Storage,
    snapshot: Option<SnapshotWithThreadMode<'a, DB>>,
    /// [`Wait::Never`]: point reads from memory only (`Incomplete` otherwise).
    wait: Wait,
}

impl Storage {
    /// A consistent snapshot for readers that read a key's meta and then its members.
    pub fn view(&self) -> View<'_> {
        self.view_with(Wait::Allowed)
    }

    /// [`Storage::view`] whose reads, with [`Wait::Never`], answer from the memtables and the
    /// block cache only (`Incomplete` if they would read the disk).
    pub fn view_with(&self, wait: Wait) -> View<'_> {
        View {
            storage: self,
            snapshot: Some(self.db.snapshot()),
            wait,
        }
    }

    /// The latest state, for a writer holding the key's lock (nothing else can change it).
    pub fn latest(&self) -> View<'_> {
        self.latest_with(Wait::Allowed)
    }

    /// [`Storage::latest`] whose point reads, with [`Wait::Never`], answer from the memtables
    /// and the block cache only (`Incomplete` if they would read the disk).
    pub fn latest_with(&self, wait: Wait) -> View<'_> {
        View {
            storage: self,
            snapshot: None,
            wait,
        }
    }
}

impl<'a> View<'a> {
    fn read_opts(&self) -> ReadOptions {
        let mut o = self.wait.read_options();
        if let Some(s) = &self.snapshot {
            o.set_snapshot(s);
        }
        o
    }

    /// The metadata of `key`, expired or not.
    pub fn get_meta(&self, db: u16, key: &[u8]) -> StorageResult<Option<Meta>> {
        let raw_key = super::encoding::meta_key(db, key);
        if let Some(buffered) = self.storage.txn_lookup(CF_META, &raw_key) {
            return Ok(buffered.and_then(|raw| Meta::decode(&raw)));
        }
        let raw = self.storage.db.get_pinned_cf_opt(
            self.storage.meta_cf(),
            raw_key,
            &self.read_opts(),
        )?;
        Ok(raw.and_then(|raw| Meta::decode(&raw)))
    }

    /// The metadata of `key` if it exists and has not expired at `now_ms`.
    pub fn get_live(&self, db: u16, key: &[u8], now_ms: u64) -> StorageResult<Option<Meta>> {
        Ok(self.get_meta(db, key)?.filter(|m| !m.is_expired(now_ms)))
    }

    /// One member's value in the data CF (a hash field's value, a sorted-set member's score,
    /// a list element at a position, an empty value for a set member).
    pub fn get_member(&self, coll: &Coll, member: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        let raw_key = coll.entry_key(member);
        let raw = match self.storage.txn_lookup(CF_DATA, &raw_key) {
            Some(buffered) => buffered.map(|v| v.to_vec()),
            None => {
                self.storage
                    .db
                    .get_cf_opt(self.storage.cf(CF_DATA), raw_key, &self.read_opts())?
            }
        };
        Ok(raw.and_then(|v| coll.visible(v)))
    }

    /// Several members' values at once (HMGET, SMISMEMBER, ZMSCORE), in the order asked.
    pub fn get_members<M: AsRef<[u8]>>(
        &self,
        coll: &Coll,
        members: &[M],
    ) -> StorageResult<Vec<Option<Vec<u8>>>> {
        let cf = self.storage.cf(CF_DATA);
        let raw_keys: Vec<Vec<u8>> = members.iter().map(|m| coll.entry_key(m.as_ref())).collect();
        let buffered: Vec<Option<Option<bytes::Bytes>>> = if self.storage.in_txn() {
            raw_keys
                .iter()
                .map(|k| self.storage.txn_lookup(CF_DATA, k))
                .collect()
        } else {
            Vec::new()
        };
        let unread = |i: usize| buffered.get(i).is_none_or(Option::is_none);
        let keys = raw_keys
            .iter()
            .enumerate()
            .filter(|&(i, _)| unread(i))
            .map(|(_, k)| (cf, k));
        let mut read = self
            .storage
            .db
            .multi_get_cf_opt(keys, &self.read_opts())
            .into_iter();
        (0..raw_keys.len())
            .map(|i| {
                let raw = match buffered.get(i).cloned().flatten() {
                    Some(b) => b.map(|v| v.to_vec()),
                    None => read.next().expect("one read per unbuffered member")?,
                };
                Ok(raw.and_then(|v| coll.visible(v)))
            })
            .collect()
    }

    /// A cursor over the entries of one collection in `cf`, ordered by member bytes. It starts
    /// unpositioned: call [`MemberCursor::first`], [`MemberCursor::last`] or a seek.
    pub fn members(&self, cf: Cf, coll: &Coll) -> MemberCursor<'a> {
        let prefix = coll.prefix();
        let mut o = self.read_opts();
        o.set_iterate_lower_bound(prefix.clone());
        let upper = prefix_successor(&prefix);
        if let Some(upper) = &upper {
            o.set_iterate_upper_bound(upper.clone());
        }
        let it = self
            .storage
            .db
            .raw_iterator_cf_opt(self.storage.cf(cf.name()), o);
        MemberCursor {
            it: self
                .storage
                .txn_cursor(cf.name(), &prefix, upper.as_deref(), it),
            prefix,
            ttl_now: coll.ttl_now.filter(|_| cf == Cf::Data),
        }
    }

    /// Calls `f(member, value)` for every entry of the collection in `cf`, in order, until it
    /// returns false.
    pub fn for_each_member(
        &self,
        cf: Cf,
        coll: &Coll,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> StorageResult<()> {
        let mut c = self.members(cf, coll);
        c.first();
        while let Some((m, v)) = c.entry() {
            if !f(m, v) {
                break;
            }
            c.next();
        }
        c.status()
    }

    /// Calls `f` with the collection's entries in `cf`, in order, each as `map(member, value)`,
    /// in chunks of [`FIRST_CHUNK`] entries doubling up to `max`, until it returns false. For
    /// the set algebra, which tests each chunk against other collections with one multi-get:
    /// chunks of `max` keep those reads batched, and the small first ones keep a count that
    /// stops at a low LIMIT from reading hundreds of members it does not need.
    pub fn for_each_chunk<T, E: From<StorageError>>(
        &self,
        cf: Cf,
        coll: &Coll,
        max: usize,
        mut map: impl FnMut(&[u8], &[u8]) -> T,
        mut f: impl FnMut(Vec<T>) -> Result<bool, E>,
    ) -> Result<(), E> {
        let mut c = self.members(cf, coll);
        c.first();
        let mut size = FIRST_CHUNK.min(max);
        loop {
            let mut chunk = Vec::with_capacity(size);
            while chunk.len() < size {
                let Some((m, v)) = c.entry() else { break };
                chunk.push(map(m, v));
                c.next();
            }
            c.status()?;
            let last = chunk.len() < size;
            if chunk.is_empty() || !f(chunk)? || last {
                return Ok(());
            }
            size = (size * 2).min(max);
        }
    }

    /// Everything stored for `key` (live), type-blind: for RENAME, COPY, MOVE, DUMP and slot
    /// migration.
    pub fn export_key(&self, db: u16, key: &[u8], now_ms: u64) -> StorageResult<Option<KeyRecord>> {
        let Some(meta) = self.get_live(db, key, now_ms)? else {
            return Ok(None);
        };
        let mut rec = KeyRecord {
            meta,
            data: Vec::new(),
            score: Vec::new(),
        };
        if rec.meta.is_collection() {
            let coll = Coll::new(db, key, &rec.meta).raw();
            for (cf, out) in [(Cf::Data, &mut rec.data), (Cf::Score, &mut rec.score)] {
                self.for_each_member(cf, &coll, |m, v| {
                    out.push((m.to_vec(), v.to_vec()));
                    true
                })?;
            }
        }
        Ok(Some(rec))
    }
}

/// A positioned iterator over one collection's entries; the prefix is stripped from members.
/// Over a hash with field TTLs read through [`Coll::new`], it steps over expired fields and
/// strips the expiry prefix from values.
pub struct MemberCursor<'a> {
    it: RawCursor<'a>,
    prefix: Vec<u8>,
    ttl_now: Option<u64>,
}

impl MemberCursor<'_> {
    pub fn first(&mut self) {
        self.it.seek_to_first();
        self.skip_expired(true);
    }
    pub fn last(&mut self) {
        self.it.seek_to_last();
        self.skip_expired(false);
    }
    /// Positions at the first entry whose member is >= `member`.
    pub fn seek(&mut self, member: &[u8]) {
        let mut raw = self.prefix.clone();
        raw.extend_from_slice(member);
        self.it.seek(&raw);
        self.skip_expired(true);
    }
    /// Positions at the last entry whose member is <= `member`.
    pub fn seek_back(&mut self, member: &[u8]) {
        let mut raw = self.prefix.clone();
        raw.extend_from_slice(member);
        self.it.seek_for_prev(&raw);
        self.skip_expired(false);
    }
    pub fn next(&mut self) {
        self.it.next();
        self.skip_expired(true);
    }
    pub fn prev(&mut self) {
        self.it.prev();
        self.skip_expired(false);
    }
    /// Moves past expired hash fields (forward or backward), if this cursor hides them.
    fn skip_expired(&mut self, forward: bool) {
        let Some(now) = self.ttl_now else { return };
        while self.it.valid() {
            let at = self.it.value().map_or(0, |v| split_field_value(v).0);
            if !field_expired(at, now) {
                return;
            }
            if forward {
                self.it.next();
            } else {
                self.it.prev();
            }
        }
    }
    /// The current (member, value), or `None` past either end.
    pub fn entry(&self) -> Option<(&[u8], &[u8])> {
        if !self.it.valid() {
            return None;
        }
        let k = self.it.key()?;
        let v = self.it.value()?;
        let v = match self.ttl_now {
            Some(_) => split_field_value(v).1,
            None => v,
        };
        Some((k.get(self.prefix.len()..)?, v))
    }
    /// The error that ended the iteration, if one did.
    pub fn status(&self) -> StorageResult<()> {
        self.it.status()
    }
}

/// A whole key, type-blind: its meta record and its entries (member parts, without the prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRecord {
    pub meta: Meta,
    pub data: Vec<(Vec<u8>, Vec<u8>)>,
    pub score: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Batch {
    /// Stores a collection entry of `key` at `meta`'s version.
    pub fn put_member(
        &mut self,
        storage: &Storage,
        cf: Cf,
        coll: &Coll,
        member: &[u8],
        value: &[u8],
    ) {
        match cf {
            Cf::Score if storage.pop_hints().any() => {
                storage.pop_hints().wrote(&coll.prefix(), member)
            }
            Cf::Data if storage.pop_decks().may_hold(coll.version) => {
                storage.pop_decks().wrote(&coll.prefix(), member)
            }
            _ => {}
        }
        self.put_raw(storage, cf.name(), coll.entry_key(member), value);
    }

    /// Stores a copied entry of `to` (RENAME, COPY, RESTORE ...): the entry as it was stored,
    /// plus, for a field with a TTL of a hash with field TTLs, its expiry index entry under the
    /// new version.
    pub fn copy_member(
        &mut self,
        storage: &Storage,
        cf: Cf,
        to: &Coll,
        to_meta: &Meta,
        member: &[u8],
        value: &[u8],
    ) {
        self.put_member(storage, cf, to, member, value);
        if cf == Cf::Data && to_meta.kind == Kind::Hash && to_meta.field_ttls {
            let (at, _) = split_field_value(value);
            if at != 0 {
                self.put_field_index(storage, to, member, at);
            }
        }
    }

    /// Indexes field `field` of hash `coll` as expiring at `at`, for active expiry. After the
    /// commit, the expiry cycle is told to look at `at` (see `expire`).
    pub fn put_field_index(&mut self, storage: &Storage, coll: &Coll, field: &[u8], at: u64) {
        self.put_raw(
            storage,
            CF_EXPIRY,
            expiry_index::field_key(coll.db, at, coll.key, coll.version, field),
            &[],
        );
        self.field_indexed(coll.db, at);
    }

    /// Removes the index entry of field `field` of hash `coll` expiring at `at`.
    pub fn delete_field_index(&mut self, storage: &Storage, coll: &Coll, field: &[u8], at: u64) {
        self.delete_raw(
            storage,
            CF_EXPIRY,
            expiry_index::field_key(coll.db, at, coll.key, coll.version, field),
        );
    }

    /// Deletes a collection entry of `key` at `meta`'s version.
    pub fn delete_member(&mut self, storage: &Storage, cf: Cf, coll: &Coll, member: &[u8]) {
        self.delete_raw(storage, cf.name(), coll.entry_key(member));
    }

    /// Writes `rec` as `key` of `db` (replacing whatever is there): strings as they are,
    /// collections under `version` (a fresh one from [`Storage::next_version`]) so nothing of an
    /// older collection of that name is visible. `expire_at_ms` overrides the record's expiry.
    pub fn import_key(
        &mut self,
        storage: &Storage,
        db: u16,
        key: &[u8],
        rec: &KeyRecord,
        version: u64,
        expire_at_ms: u64,
    ) {
        let mut meta = rec.meta.clone();
        meta.expire_at_ms = expire_at_ms;
        if meta.is_collection() {
            meta.version = version;
            let coll = Coll::new(db, key, &meta).raw();
            for (cf, entries) in [(Cf::Data, &rec.data), (Cf::Score, &rec.score)] {
                for (m, v) in entries {
                    self.copy_member(storage, cf, &coll, &meta, m, v);
                }
            }
        }
        self.put_meta(storage, db, key, &meta);
    }
}
