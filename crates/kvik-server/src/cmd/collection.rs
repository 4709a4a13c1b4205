//! Helpers every collection family needs (hashes and sets today; lists and sorted sets may use
//! them too): committing a collection's meta record, member cursors for HSCAN/SSCAN/ZSCAN, and
//! random member picks for HRANDFIELD/SRANDMEMBER/SPOP (ZRANDMEMBER).
//!
//! - [`put_or_delete_meta`]: the last step of every member write. Redis deletes a collection that
//!   became empty, and the meta put is what drops a cached copy, marks WATCHers dirty and wakes
//!   blocked clients, so it is written even when only members changed.
//! - [`MemberScan`]: parses `cursor [MATCH pattern] [COUNT count]` and runs one step of a member
//!   scan. Cursors are numbers handed out by the server's [`ScanCursors`] table (shared with SCAN):
//!   each maps to the last member a step visited, so a scan resumes in storage (byte) order and
//!   sees every member present for its whole duration exactly once.
//! - [`Sampler`]: random members without loading the collection. Collections of at most
//!   [`SMALL_SAMPLE`] members, and picks that ask for a sizeable share of a collection, take one
//!   pass over it (uniform, memory bounded by the picks). A few picks from a big collection each
//!   walk down the implicit trie of member bytes with seeks (a seek per distinct byte at each
//!   branching level, so about O(log N)) and then step forward a random few members; that is
//!   random but not uniform: members under a sparsely populated branch are more likely, as
//!   Redis's own picks favour entries of short hash-table chains.
//!
//! [`ScanCursors`]: crate::server::ScanCursors

use super::ctx::{Args, CmdError, Ctx};
use super::spec::Class;
use crate::cache::{CachedValue, CollUpdate, CollValue, HashFields, Hit, IndexEdit, Known};
use crate::storage::encoding::{
    data_prefix, field_expired, field_value, prefix_successor, split_field_value, Kind, Meta,
};
use crate::storage::locks::KeyGuard;
use crate::storage::pop_decks::MAX_DECK_MEMBERS;
use crate::storage::{Batch, Cf, Coll, MemberCursor, Storage, StorageError, View, Wait};
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

/// Adds to `batch` the meta record of a collection whose members just changed: a put with its
/// new length, or a delete when it became empty (Redis never keeps an empty collection).
pub fn put_or_delete_meta(batch: &mut Batch, storage: &Storage, db: u16, key: &[u8], meta: &Meta) {
    put_or_delete_meta_with(batch, storage, db, key, meta, None);
}

/// [`put_or_delete_meta`] of a collection the cache holds, whose new state the write knows
/// (`update`), so its cache entry is updated instead of dropped.
fn put_or_delete_meta_with(
    batch: &mut Batch,
    storage: &Storage,
    db: u16,
    key: &[u8],
    meta: &Meta,
    update: Option<CollUpdate>,
) {
    if meta.len == 0 {
        batch.delete_meta(storage, db, key);
    } else {
        batch.put_meta_with_update(storage, db, key, meta, update);
    }
}

/// A member's committed value and, for a field of a hash with field TTLs, its expiry (0: none).
pub type FieldEntry = (Vec<u8>, u64);

/// A locked read-modify-write of one collection: [`CollWrite::open`] takes the key's lock and
/// reads its live meta (WRONGTYPE for another kind); [`put`](CollWrite::put) and
/// [`delete`](CollWrite::delete) stage member changes and keep the length; [`commit`](CollWrite::commit)
/// writes them with the meta record ([`put_or_delete_meta`]) in one batch, if anything changed.
/// A collection that did not exist gets a fresh version on its first put.
///
/// For a hash with field TTLs (see `storage::encoding`) it also keeps the field values' expiry
/// prefix and the fields' expiry index entries: a read meets an expired field, stages its
/// removal (lazy expiry: one less in the length, `hexpired` on commit) and reports it absent;
/// [`put`](CollWrite::put) clears a field's TTL (HSET), [`put_keep_ttl`](CollWrite::put_keep_ttl)
/// keeps it (HINCRBY), [`set_ttl`](CollWrite::set_ttl) changes it (HEXPIRE, HPERSIST).
///
/// A small hash the hot cache holds whole (`cache-hash-writes`, see `Cache::held_hash`) is
/// written without reading RocksDB: its meta record and committed fields come from the cached
/// copy, and the commit hands the rebuilt field set to the cache, which replaces its entry. A
/// big hash or a set the cache holds as its meta (`cache-big-hashes`, `cache-sets`, see
/// [`HeldColl`]) takes its meta and the members the cache holds from there, the others from
/// RocksDB, and the commit hands its member edits to the cache.
pub struct CollWrite<'s, 'k> {
    pub storage: &'s Storage,
    pub db: u16,
    pub key: &'k [u8],
    kind: Kind,
    /// The collection's meta as it will be committed; `None` while it does not exist.
    pub meta: Option<Meta>,
    batch: Batch,
    changed: bool,
    /// Expiry (non-zero) of each live field with a TTL read so far, as it will be committed.
    ttls: HashMap<Vec<u8>, u64>,
    /// Expired fields whose removal is staged (lazy expiry).
    reclaimed: HashSet<Vec<u8>>,
    /// Whether reads and the commit may wait (not on an I/O thread; see `Mode::NoWait`).
    wait: Wait,
    /// The collection's committed members from the hot cache, and the staged changes to them
    /// (`None` once a hash is not cacheable any more: field TTLs).
    held: Option<HeldColl>,
    _guard: KeyGuard<'s>,
}

/// A collection being written as the hot cache holds it: what the cache holds of it, and the
/// member changes staged, in order (`None`: deleted), which the commit hands to the cache.
/// The writer holds the key's lock, so what the cache holds is current.
pub(crate) struct HeldColl {
    cached: Held,
    kind: Kind,
    edits: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Edits of the order its rank index counts (`cache::rank`): a sorted set's score index
    /// entries, a set's or hash's members.
    index: Vec<IndexEdit>,
}

enum Held {
    /// A small hash's committed fields.
    Whole(HashFields),
    /// The generation of a cached collection's entry ([`BigColl`](crate::cache::BigColl)),
    /// under which its members are cached.
    Big(u64),
    /// A collection the cache does not hold: the commit adds it under this fresh generation,
    /// with the members it wrote (`cache-write-allocate`).
    New(u64),
}

impl HeldColl {
    /// Collection `key` of `kind` for a writer holding its lock: its meta (`None`: absent;
    /// WRONGTYPE for another kind) from the cache if it holds it, else from RocksDB, and the
    /// cache's hold on it. A hash is held when cached (whole, or big with
    /// `cache-big-hashes`) or when it is big; a set or sorted set with `cache-sets`.
    pub(crate) fn open(
        ctx: &Ctx<'_>,
        key: &[u8],
        kind: Kind,
    ) -> Result<(Option<HeldColl>, Option<Meta>), CmdError> {
        let cache = ctx.storage().cache();
        let (cached, meta) = match cache.held_coll(ctx.db(), key, kind, ctx.now_ms) {
            Some((at, CollValue::Whole(hash))) => {
                (Some(Held::Whole(hash.fields.clone())), Some(hash.meta(at)))
            }
            Some((at, CollValue::Big(big))) => (Some(Held::Big(big.gen)), Some(big.meta(at))),
            // Not held for writers (see `cache::ExpiringHash`; lists are not written here):
            // read as if not cached.
            Some((_, CollValue::Expiring(_) | CollValue::List(_))) | None => {
                let meta = ctx.write_collection(key, kind)?;
                let big = kind != Kind::Hash
                    || meta
                        .as_ref()
                        .is_some_and(|m| !m.field_ttls && m.len as usize > cache.max_fields());
                let cached = big.then(|| cache.new_big_gen(key, kind)).flatten();
                (cached.map(Held::New), meta)
            }
        };
        let held = cached.map(|cached| HeldColl {
            cached,
            kind,
            edits: Vec::new(),
            index: Vec::new(),
        });
        Ok((held, meta))
    }

    /// A small hash's committed fields, if that is what the cache holds.
    fn whole(&self) -> Option<&HashFields> {
        match &self.cached {
            Held::Whole(fields) => Some(fields),
            _ => None,
        }
    }

    /// The committed values of `members` of collection `coll` (staged changes are not
    /// visible): from the cached members (current: the writer holds the lock), the others
    /// from RocksDB. Not for a small hash held whole ([`HeldColl::whole`]).
    pub(crate) fn values<M: AsRef<[u8]>>(
        &self,
        storage: &Storage,
        wait: Wait,
        coll: &Coll<'_>,
        members: &[M],
    ) -> Result<Vec<Option<Vec<u8>>>, CmdError> {
        let Held::Big(gen) = self.cached else {
            return Ok(storage
                .latest_with(wait)
                .get_members(&coll.raw(), members)?);
        };
        let cache = storage.cache();
        let mut values = Vec::with_capacity(members.len());
        let mut missed = Vec::new();
        for (i, m) in members.iter().enumerate() {
            let cached = cache.get_field_with(gen, m.as_ref(), 0, |known| match known {
                Known::Present(Hit {
                    value: CachedValue::Str(v),
                    ..
                }) => Some(v.to_vec()),
                _ => None,
            });
            values.push(cached.unwrap_or_else(|| {
                missed.push(i);
                None
            }));
        }
        if !missed.is_empty() {
            let asked: Vec<&[u8]> = missed.iter().map(|&i| members[i].as_ref()).collect();
            let read = storage.latest_with(wait).get_members(&coll.raw(), &asked)?;
            for (i, v) in missed.into_iter().zip(read) {
                values[i] = v;
            }
        }
        Ok(values)
    }

    /// Whether each of `members` of collection `coll` is there, committed (see
    /// [`HeldColl::values`]): a member the cache holds is looked at in place, not copied.
    pub(crate) fn contains<M: AsRef<[u8]>>(
        &self,
        storage: &Storage,
        wait: Wait,
        coll: &Coll<'_>,
        members: &[M],
    ) -> Result<Vec<bool>, CmdError> {
        let found = match &self.cached {
            Held::Whole(fields) => {
                return Ok(members
                    .iter()
                    .map(|m| fields.get(m.as_ref()).is_some())
                    .collect())
            }
            Held::Big(gen) => {
                let cache = storage.cache();
                let present = |m: &M| {
                    cache
                        .get_field_with(*gen, m.as_ref(), 0, |known| {
                            matches!(
                                known,
                                Known::Present(Hit {
                                    value: CachedValue::Str(_),
                                    ..
                                })
                            )
                        })
                        .filter(|&present| present)
                };
                members.iter().map(present).collect::<Vec<_>>()
            }
            Held::New(_) => vec![None; members.len()],
        };
        // What the cache does not hold as present is read from RocksDB, as `values` does.
        let missed: Vec<usize> = (0..members.len()).filter(|&i| found[i].is_none()).collect();
        let mut out: Vec<bool> = found.iter().map(|f| f.is_some()).collect();
        if !missed.is_empty() {
            let asked: Vec<&[u8]> = missed.iter().map(|&i| members[i].as_ref()).collect();
            let read = storage.latest_with(wait).get_members(&coll.raw(), &asked)?;
            for (i, v) in missed.into_iter().zip(read) {
                out[i] = v.is_some();
            }
        }
        Ok(out)
    }

    /// Notes a staged change of `member`: its new value, or `None` if it was removed.
    pub(crate) fn note(&mut self, member: &[u8], value: Option<&[u8]>) {
        self.edits
            .push((member.to_vec(), value.map(<[u8]>::to_vec)));
    }

    /// The generation the cache holds the collection under, if it holds it as its meta (what
    /// a sorted set's rank index is keyed by).
    pub(crate) fn big_gen(&self) -> Option<u64> {
        match self.cached {
            Held::Big(gen) => Some(gen),
            _ => None,
        }
    }

    /// Notes a staged edit of a sorted set's score index: the entry removed, the entry added.
    pub(crate) fn note_index(&mut self, removed: Option<Vec<u8>>, added: Option<Vec<u8>>) {
        self.index.push((removed, added));
    }

    /// Notes that `member` joined (`added`) or left a set or hash the cache holds as its
    /// meta, for a rank index of its member order (`cmd::ranked`), which only an entry held
    /// before this write can have.
    fn note_member_count(&mut self, member: &[u8], added: bool) {
        if matches!(self.cached, Held::Big(_)) {
            let m = Some(member.to_vec());
            self.index.push(if added { (None, m) } else { (m, None) });
        }
    }

    /// The cache update of the commit: a small hash's field set after the staged changes,
    /// sorted by field, if it is small enough to cache whole (`small`); the member edits of a
    /// collection cached as its meta (a hash added by this write only if it is big).
    pub(crate) fn update(self, small: bool) -> Option<CollUpdate> {
        let gen = match self.cached {
            Held::Whole(fields) => {
                return small.then(|| CollUpdate::Whole(fields.edited(&self.edits).into()))
            }
            Held::New(_) if self.kind == Kind::Hash && small => return None,
            Held::Big(gen) | Held::New(gen) => gen,
        };
        Some(CollUpdate::Fields {
            gen,
            edits: self.edits,
            index: self.index,
        })
    }
}

impl<'s, 'k> CollWrite<'s, 'k> {
    pub fn open(ctx: &Ctx<'s>, key: &'k [u8], kind: Kind) -> Result<Self, CmdError> {
        let storage = ctx.storage();
        let guard = ctx.lock_keys(&[key])?;
        let (held, meta) = match kind {
            Kind::Hash | Kind::Set => HeldColl::open(ctx, key, kind)?,
            _ => (None, ctx.write_collection(key, kind)?),
        };
        Ok(CollWrite {
            storage,
            db: ctx.db(),
            key,
            kind,
            meta,
            batch: Batch::default(),
            changed: false,
            ttls: HashMap::new(),
            reclaimed: HashSet::new(),
            wait: ctx.wait(),
            held,
            _guard: guard,
        })
    }

    /// The current length (0 when absent).
    pub fn len(&self) -> u64 {
        self.meta.as_ref().map_or(0, |m| m.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The latest state for this writer's reads: from memory only on an I/O thread.
    pub fn view(&self) -> View<'s> {
        self.storage.latest_with(self.wait)
    }

    /// Whether the writer may wait (a worker, not an I/O thread; see `Mode::NoWait`).
    pub fn may_wait(&self) -> bool {
        self.wait.allowed()
    }

    /// The collection's entries location, if it exists.
    pub fn coll(&self) -> Option<Coll<'k>> {
        self.meta.as_ref().map(|m| Coll::new(self.db, self.key, m))
    }

    /// The generation the hot cache held the collection under when this write opened it, if
    /// it holds it as its meta (what a rank index is kept under, see `cmd::ranked`).
    pub(crate) fn big_gen(&self) -> Option<u64> {
        self.held.as_ref().and_then(HeldColl::big_gen)
    }

    /// True for a hash whose field values carry an expiry prefix.
    pub fn has_field_ttls(&self) -> bool {
        self.meta.as_ref().is_some_and(|m| m.field_ttls)
    }

    /// A member's committed value (staged changes are not visible).
    pub fn get(&mut self, member: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
        Ok(self.get_entries(&[member])?.pop().flatten().map(|e| e.0))
    }

    /// Whether each of `members` is there (committed; an expired field reads as absent and is
    /// staged for removal): what SADD, SREM, HSET and HDEL need, without copying the values the
    /// hot cache holds.
    pub fn contains_many<M: AsRef<[u8]>>(&mut self, members: &[M]) -> Result<Vec<bool>, CmdError> {
        if let (Some(held), Some(coll)) = (&self.held, self.coll()) {
            if !self.has_field_ttls() {
                return held.contains(self.storage, self.wait, &coll, members);
            }
        }
        Ok(self
            .get_entries(members)?
            .iter()
            .map(Option::is_some)
            .collect())
    }

    /// Several members' committed values and expiry times (0: none; always 0 but for fields of
    /// a hash with field TTLs). An expired field is staged for removal and reads as absent.
    pub fn get_entries<M: AsRef<[u8]>>(
        &mut self,
        members: &[M],
    ) -> Result<Vec<Option<FieldEntry>>, CmdError> {
        let Some(coll) = self.coll() else {
            return Ok(vec![None; members.len()]);
        };
        let raw = match &self.held {
            Some(held) => {
                if let Some(fields) = held.whole() {
                    let found = |m: &M| fields.get(m.as_ref()).map(|v| (v.to_vec(), 0));
                    return Ok(members.iter().map(found).collect());
                }
                held.values(self.storage, self.wait, &coll, members)?
            }
            None => self
                .storage
                .latest_with(self.wait)
                .get_members(&coll.raw(), members)?,
        };
        if !self.has_field_ttls() {
            return Ok(raw.into_iter().map(|v| v.map(|v| (v, 0))).collect());
        }
        let now = crate::clock::unix_ms();
        let mut out = Vec::with_capacity(members.len());
        for (m, v) in members.iter().zip(raw) {
            let m = m.as_ref();
            let Some(v) = v.filter(|_| !self.reclaimed.contains(m)) else {
                out.push(None);
                continue;
            };
            let (at, value) = split_field_value(&v);
            if field_expired(at, now) {
                self.reclaim(m, at);
                out.push(None);
                continue;
            }
            if at != 0 {
                self.ttls.entry(m.to_vec()).or_insert(at);
            }
            out.push(Some((value.to_vec(), at)));
        }
        Ok(out)
    }

    /// Stages the removal of an expired field (lazy expiry).
    fn reclaim(&mut self, field: &[u8], at: u64) {
        let Some(meta) = self.meta.as_mut() else {
            return;
        };
        meta.len = meta.len.saturating_sub(1);
        let coll = Coll::new(self.db, self.key, meta);
        self.batch
            .delete_member(self.storage, Cf::Data, &coll, field);
        self.batch
            .delete_field_index(self.storage, &coll, field, at);
        self.reclaimed.insert(field.to_vec());
    }

    /// Stages `member` = `value` in the data CF; `is_new` adds one to the length. A hash
    /// field's TTL is cleared (HSET).
    pub fn put(&mut self, member: &[u8], value: &[u8], is_new: bool) -> Result<(), CmdError> {
        self.put_with_ttl(member, value, is_new, 0)
    }

    /// [`put`](CollWrite::put) that keeps a hash field's TTL (HINCRBY, HINCRBYFLOAT).
    pub fn put_keep_ttl(
        &mut self,
        member: &[u8],
        value: &[u8],
        is_new: bool,
    ) -> Result<(), CmdError> {
        let at = self.ttls.get(member).copied().unwrap_or(0);
        self.put_with_ttl(member, value, is_new, at)
    }

    /// Gives an existing field of a hash its value and the expiry `at` (0: none), making the
    /// hash one with field TTLs first if it is not (HEXPIRE, HPERSIST).
    pub fn set_ttl(&mut self, field: &[u8], value: &[u8], at: u64) -> Result<(), CmdError> {
        self.enable_field_ttls()?;
        self.put_with_ttl(field, value, false, at)
    }

    fn put_with_ttl(
        &mut self,
        member: &[u8],
        value: &[u8],
        is_new: bool,
        at: u64,
    ) -> Result<(), CmdError> {
        if self.meta.is_none() {
            let version = super::ctx::next_version(self.storage, self.wait)?;
            self.meta = Some(Meta::collection(self.kind, version, 0));
        }
        let meta = self.meta.as_mut().expect("created above");
        if is_new {
            meta.len += 1;
        }
        if let Some(held) = &mut self.held {
            held.note(member, Some(value));
            if is_new {
                held.note_member_count(member, true);
            }
        }
        let coll = Coll::new(self.db, self.key, meta);
        if meta.field_ttls {
            let old = self.ttls.remove(member).unwrap_or(0);
            if old != at {
                if old != 0 {
                    self.batch
                        .delete_field_index(self.storage, &coll, member, old);
                }
                if at != 0 {
                    self.batch.put_field_index(self.storage, &coll, member, at);
                }
            }
            if at != 0 {
                self.ttls.insert(member.to_vec(), at);
            }
            self.reclaimed.remove(member);
            self.batch.put_member(
                self.storage,
                Cf::Data,
                &coll,
                member,
                &field_value(at, value),
            );
        } else {
            self.batch
                .put_member(self.storage, Cf::Data, &coll, member, value);
        }
        self.changed = true;
        Ok(())
    }

    /// Makes the hash one whose field values carry an expiry prefix: rewrites every field
    /// (once per hash; staged, so later puts of this write override them: call it before
    /// staging any delete).
    pub fn enable_field_ttls(&mut self) -> Result<(), CmdError> {
        let Some(meta) = self.meta.as_mut().filter(|m| !m.field_ttls) else {
            return Ok(());
        };
        self.held = None; // a hash with field TTLs is not cached
        let coll = Coll::new(self.db, self.key, meta).raw();
        let view = self.storage.latest_with(self.wait);
        let (batch, storage) = (&mut self.batch, self.storage);
        view.for_each_member(Cf::Data, &coll, |f, v| {
            batch.put_member(storage, Cf::Data, &coll, f, &field_value(0, v));
            true
        })?;
        meta.field_ttls = true;
        self.changed = true;
        Ok(())
    }

    /// Stages the removal of an existing `member` (one less in the length).
    pub fn delete(&mut self, member: &[u8]) {
        let Some(meta) = self.meta.as_mut() else {
            return;
        };
        meta.len = meta.len.saturating_sub(1);
        let coll = Coll::new(self.db, self.key, meta);
        self.batch
            .delete_member(self.storage, Cf::Data, &coll, member);
        if let Some(held) = &mut self.held {
            held.note(member, None);
            held.note_member_count(member, false);
        }
        if let Some(at) = self.ttls.remove(member) {
            self.batch
                .delete_field_index(self.storage, &coll, member, at);
        }
        self.changed = true;
    }

    /// Stages the removal of the whole collection in O(1): its meta record is deleted on commit
    /// and its members, of a version nothing refers to any more, go with the next compaction.
    pub fn clear(&mut self) {
        if let Some(meta) = self.meta.as_mut() {
            meta.len = 0;
            self.changed = true;
        }
    }

    /// Commits the staged changes and the meta record (deleted if the collection became empty);
    /// nothing if nothing changed. The key stays locked until `self` is dropped here.
    pub fn commit(self) -> Result<(), CmdError> {
        self.commit_keep_lock().map(drop)
    }

    /// [`commit`](CollWrite::commit), then, if anything changed, keyspace event `event` of
    /// `class` and `del` when the collection became empty (Redis's order), with the key still
    /// locked. Fields found expired are announced with `hexpired` first.
    pub fn commit_notify(
        self,
        ctx: &Ctx<'_>,
        class: Class,
        event: &'static str,
    ) -> Result<(), CmdError> {
        let (changed, emptied) = (self.changed, self.meta.is_some() && self.is_empty());
        let reclaimed = !self.reclaimed.is_empty();
        let key = self.key;
        let guard = self.commit_keep_lock()?;
        if reclaimed {
            ctx.notify(Class::Hash, "hexpired", key);
        }
        if changed {
            notify_write(ctx, class, event, key, emptied);
        } else if reclaimed && emptied {
            ctx.notify(Class::Generic, "del", key);
        }
        drop(guard);
        Ok(())
    }

    /// Commits and hands back the key's lock.
    fn commit_keep_lock(mut self) -> Result<KeyGuard<'s>, CmdError> {
        if self.changed || !self.reclaimed.is_empty() {
            if let Some(meta) = &self.meta {
                // A hash's rebuilt field set, if the cache may keep it (checked again on
                // commit), or the member edits.
                let small = meta.len as usize <= self.storage.cache().max_fields();
                let update = self
                    .held
                    .take()
                    .filter(|_| !meta.field_ttls)
                    .and_then(|h| h.update(small));
                put_or_delete_meta_with(
                    &mut self.batch,
                    self.storage,
                    self.db,
                    self.key,
                    meta,
                    update,
                );
            }
            self.storage
                .commit_with(std::mem::take(&mut self.batch), self.wait)?;
        }
        Ok(self._guard)
    }
}

/// The keyspace events of a collection write: `event` of `class`, then `del` if the write
/// emptied (so deleted) the collection, as Redis emits them.
pub fn notify_write(ctx: &Ctx<'_>, class: Class, event: &'static str, key: &[u8], emptied: bool) {
    ctx.notify(class, event, key);
    if emptied {
        ctx.notify(Class::Generic, "del", key);
    }
}

/// The largest reply a command may build in proportion to a client-chosen count (negative
/// HRANDFIELD / SRANDMEMBER counts): `proto-max-bulk-len`. Redis 7.0 would try and run out of
/// memory; kvik refuses with "ERR value is out of range" instead.
pub fn max_reply_bytes(ctx: &Ctx<'_>) -> u64 {
    ctx.server.config.proto_max_bulk_len.load(Ordering::Relaxed)
}

/// Error of a count whose reply could not be built within [`max_reply_bytes`].
pub const ERR_OUT_OF_RANGE: CmdError = CmdError::fixed("value is out of range");

// ---- Member scans -------------------------------------------------------------------------

/// The arguments of HSCAN/SSCAN/ZSCAN after the key: `cursor [MATCH pattern] [COUNT count]`.
#[derive(Debug, Clone)]
pub struct MemberScan<'a> {
    pub cursor: u64,
    /// `None` matches every member (also for "*").
    pub pattern: Option<&'a [u8]>,
    /// How many members one step visits (matching or not), as Redis's COUNT.
    pub count: usize,
}

/// "ERR invalid cursor".
pub const ERR_INVALID_CURSOR: CmdError = CmdError::fixed("invalid cursor");

impl<'a> MemberScan<'a> {
    /// The cursor argument as C's `strtoul` reads it (Redis's `parseScanCursorOrReply`): digits
    /// with an optional sign (a negative value wraps), nothing after, no overflow; the empty
    /// string is 0. Anything else is "ERR invalid cursor". Checked before the key is looked up.
    pub fn cursor(arg: &[u8]) -> Result<u64, CmdError> {
        let (neg, digits) = match arg.first() {
            Some(b'-') => (true, &arg[1..]),
            Some(b'+') => (false, &arg[1..]),
            _ => (false, arg),
        };
        if digits.is_empty() {
            // strtoul("") reads 0 and leaves nothing behind; a lone sign is not a number.
            return if arg.is_empty() {
                Ok(0)
            } else {
                Err(ERR_INVALID_CURSOR)
            };
        }
        let v: u64 = std::str::from_utf8(digits)
            .ok()
            .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse().ok())
            .ok_or(ERR_INVALID_CURSOR)?;
        Ok(if neg { v.wrapping_neg() } else { v })
    }

    /// The options after the cursor at `args[at]`: "syntax error" for COUNT < 1, an unknown
    /// option or a missing value. As in Redis they are parsed after the key lookup, so a missing
    /// key answers an empty scan whatever its options.
    pub fn with_options(
        cursor: u64,
        args: &'a Args,
        at: usize,
    ) -> Result<MemberScan<'a>, CmdError> {
        let mut scan = MemberScan {
            cursor,
            pattern: None,
            count: 10,
        };
        let mut i = at + 1;
        while i < args.len() {
            let Some(value) = args.get(i + 1) else {
                return Err(CmdError::syntax());
            };
            if args[i].eq_ignore_ascii_case(b"COUNT") {
                let n = kvik_resp::parse_i64(value).ok_or(CmdError::not_integer())?;
                if n < 1 {
                    return Err(CmdError::syntax());
                }
                scan.count = usize::try_from(n).unwrap_or(usize::MAX);
            } else if args[i].eq_ignore_ascii_case(b"MATCH") {
                scan.pattern = (&value[..] != b"*").then_some(&value[..]);
            } else {
                return Err(CmdError::syntax());
            }
            i += 2;
        }
        Ok(scan)
    }

    /// Where a cursor of `key`'s members points: the data prefix of `key` without its version, so
    /// a cursor survives nothing but belongs to one key.
    fn owner(db: u16, key: &[u8]) -> Vec<u8> {
        let mut p = data_prefix(db, key, 0);
        p.truncate(p.len() - 8);
        p
    }

    /// Runs one step over `coll` in `cf` of `view`: calls `f(member, value)` for each visited
    /// member that matches the pattern, and returns the cursor to reply with (0 when the scan
    /// reached the end). A non-zero cursor must have been handed out for this key of this
    /// database, else "ERR invalid cursor".
    pub fn step(
        &self,
        ctx: &Ctx<'_>,
        view: &View<'_>,
        cf: Cf,
        coll: &Coll,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<u64, CmdError> {
        let owner = Self::owner(coll.db, coll.key);
        let mut c = view.members(cf, coll);
        // Members are stored in byte order, so those a pattern with literal text first can
        // match are one run: sought, and the scan ends where it does (`scan-prefix-seek`).
        let prefix = self
            .pattern
            .filter(|_| ctx.server.config.scan_prefix_seek.load(Ordering::Relaxed))
            .map(crate::glob::literal_prefix)
            .unwrap_or_default();
        match self.cursor {
            0 if prefix.is_empty() => c.first(),
            0 => c.seek(&prefix),
            n => {
                let position = ctx
                    .server
                    .scan_cursors
                    .lock()
                    .get(coll.db, n)
                    .filter(|p| p.starts_with(&owner))
                    .ok_or(ERR_INVALID_CURSOR)?;
                let after = &position[owner.len()..];
                c.seek(after.max(&prefix[..]));
                if c.entry().is_some_and(|(m, _)| m == after) {
                    c.next();
                }
            }
        }
        let mut visited = 0;
        let mut last: Option<Vec<u8>> = None;
        while visited < self.count {
            let Some((m, v)) = c.entry().filter(|(m, _)| m.starts_with(&prefix)) else {
                break;
            };
            if self.pattern.is_none_or(|p| crate::glob::matches(p, m)) {
                f(m, v);
            }
            visited += 1;
            if visited == self.count {
                last = Some(m.to_vec());
            }
            c.next();
        }
        c.status()?;
        // Only hand out a cursor if something is left after the last member visited.
        let more = c.entry().is_some_and(|(m, _)| m.starts_with(&prefix));
        let Some(last) = last.filter(|_| more) else {
            return Ok(0);
        };
        let mut position = owner;
        position.extend_from_slice(&last);
        Ok(ctx.server.scan_cursors.lock().insert(coll.db, position))
    }
}

// ---- Random picks -------------------------------------------------------------------------

/// Collections up to this many members are sampled in one pass (uniform and cheap).
pub const SMALL_SAMPLE: u64 = 512;

/// On an I/O thread, ends the command with WouldBlock if sampling a collection of `len`
/// members without a deck could take long (more than [`SMALL_SAMPLE`]): a worker samples it.
pub fn walks_on_a_worker(ctx: &Ctx<'_>, len: u64) -> Result<(), CmdError> {
    if ctx.mode.no_wait() && len > SMALL_SAMPLE {
        return Err(CmdError::WOULD_BLOCK);
    }
    Ok(())
}

/// The most members a pop (SPOP, ZPOPMIN, ZPOPMAX) takes on an I/O thread; a bigger count
/// goes to a worker, as a long read would hold up the thread's other clients.
pub const IO_THREAD_MAX_POP: u64 = 128;

/// Most repeated picks drawn by position in one pass (more take more passes).
const MAX_POSITIONAL_PICKS: u64 = 1 << 20;

/// A random picker over one collection of `len` members in `cf`.
pub struct Sampler<'v, 'k> {
    view: &'v View<'v>,
    cf: Cf,
    coll: Coll<'k>,
    len: u64,
}

/// One picked entry: (member, value).
pub type Entry = (Vec<u8>, Vec<u8>);

impl<'v, 'k> Sampler<'v, 'k> {
    pub fn new(view: &'v View<'v>, cf: Cf, coll: Coll<'k>, len: u64) -> Self {
        Sampler {
            view,
            cf,
            coll,
            len,
        }
    }

    fn cursor(&self) -> MemberCursor<'v> {
        self.view.members(self.cf, &self.coll)
    }

    /// `count` distinct members (all of them if `count` >= the length), in random order. Memory
    /// is bounded by the picks, never by the collection.
    pub fn distinct(&self, count: u64) -> Result<Vec<Entry>, StorageError> {
        let mut rng = rand::thread_rng();
        let count = count.min(self.len);
        let mut picked = if self.len <= SMALL_SAMPLE || count.saturating_mul(256) > self.len {
            self.one_pass(count, &mut rng)?
        } else {
            match self.by_walks(count, &mut rng)? {
                Some(p) => p,
                // The walks kept finding the same members: take one pass after all.
                None => self.one_pass(count, &mut rng)?,
            }
        };
        rand::seq::SliceRandom::shuffle(&mut picked[..], &mut rng);
        Ok(picked)
    }

    /// Selection sampling (Knuth's algorithm S): each member is taken with probability
    /// (still needed / still unseen), so exactly `count` are taken, uniformly.
    fn one_pass(&self, count: u64, rng: &mut impl Rng) -> Result<Vec<Entry>, StorageError> {
        let mut out = Vec::with_capacity(count.min(SMALL_SAMPLE * 4) as usize);
        let mut needed = count;
        let mut unseen = self.len;
        let mut c = self.cursor();
        c.first();
        while needed > 0 {
            let Some((m, v)) = c.entry() else { break };
            if unseen == 0 || rng.gen_range(0..unseen) < needed {
                out.push((m.to_vec(), v.to_vec()));
                needed -= 1;
            }
            unseen = unseen.saturating_sub(1);
            c.next();
        }
        c.status()?;
        Ok(out)
    }

    /// Distinct picks by random walks; `None` if they took too many attempts.
    fn by_walks(&self, count: u64, rng: &mut impl Rng) -> Result<Option<Vec<Entry>>, StorageError> {
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut out = Vec::with_capacity(count as usize);
        let mut c = self.cursor();
        let mut attempts = count * 8 + 64;
        while (out.len() as u64) < count {
            if attempts == 0 {
                return Ok(None);
            }
            attempts -= 1;
            let Some(e) = random_walk(&mut c, rng)? else {
                return Ok(None);
            };
            if seen.insert(e.0.clone()) {
                out.push(e);
            }
        }
        Ok(Some(out))
    }

    /// [`Sampler::distinct`], or the picks a deck gave ([`deck_picks`]) when it answered.
    pub fn distinct_or(
        &self,
        deck: Option<Vec<Entry>>,
        count: u64,
    ) -> Result<Vec<Entry>, StorageError> {
        match deck {
            Some(picks) => Ok(picks),
            None => self.distinct(count),
        }
    }

    /// [`Sampler::with_repeats`], or the picks a deck gave ([`deck_picks`]), when it
    /// answered, passed to `f` the same way.
    pub fn with_repeats_or(
        &self,
        deck: Option<Vec<Entry>>,
        count: u64,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, StorageError> {
        match deck {
            Some(picks) => Ok(picks.iter().all(|(m, v)| f(m, v))),
            None => self.with_repeats(count, f),
        }
    }

    /// `count` picks that may repeat, passed to `f` one by one (negative HRANDFIELD /
    /// SRANDMEMBER counts). Stops early, returning false, when `f` does.
    pub fn with_repeats(
        &self,
        count: u64,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, StorageError> {
        let mut rng = rand::thread_rng();
        if self.len == 0 {
            return Ok(true);
        }
        if self.len <= SMALL_SAMPLE {
            let mut all: Vec<Entry> = Vec::with_capacity(self.len as usize);
            self.view.for_each_member(self.cf, &self.coll, |m, v| {
                all.push((m.to_vec(), v.to_vec()));
                true
            })?;
            if all.is_empty() {
                return Ok(true);
            }
            for _ in 0..count {
                let (m, v) = &all[rng.gen_range(0..all.len())];
                if !f(m, v) {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        if count.saturating_mul(256) >= self.len {
            // One pass per MAX_POSITIONAL_PICKS picks, as distinct picks of this many take
            // one pass (a walk costs what a pass over a few hundred members does).
            let mut left = count;
            while left > 0 {
                let n = left.min(MAX_POSITIONAL_PICKS);
                if !self.positional(n, &mut rng, &mut f)? {
                    return Ok(false);
                }
                left -= n;
            }
            return Ok(true);
        }
        let mut c = self.cursor();
        for _ in 0..count {
            let Some((m, v)) = random_walk(&mut c, &mut rng)? else {
                return Ok(true);
            };
            if !f(&m, &v) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `count` uniform picks with repeats in one pass: random positions, sorted, then read in
    /// order and handed to `f` in the order they were drawn.
    fn positional(
        &self,
        count: u64,
        rng: &mut impl Rng,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, StorageError> {
        let mut wanted: Vec<(u64, usize)> = (0..count as usize)
            .map(|slot| (rng.gen_range(0..self.len), slot))
            .collect();
        wanted.sort_unstable();
        let mut picked: Vec<Option<Entry>> = vec![None; count as usize];
        let mut c = self.cursor();
        c.first();
        let mut pos = 0u64;
        let mut i = 0;
        while i < wanted.len() {
            let Some((m, v)) = c.entry() else { break };
            while i < wanted.len() && wanted[i].0 == pos {
                picked[wanted[i].1] = Some((m.to_vec(), v.to_vec()));
                i += 1;
            }
            pos += 1;
            c.next();
        }
        c.status()?;
        for (m, v) in picked.iter().flatten() {
            if !f(m, v) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One random member, or `None` if the collection is empty.
    pub fn one(&self) -> Result<Option<Entry>, StorageError> {
        let mut rng = rand::thread_rng();
        if self.len <= SMALL_SAMPLE {
            return Ok(self.one_pass(1, &mut rng)?.pop());
        }
        random_walk(&mut self.cursor(), &mut rng)
    }
}

/// The most picks a read (SRANDMEMBER, ZRANDMEMBER) draws from a deck; more are sampled by
/// walks.
const MAX_DECK_PICKS: u64 = 1024;

/// `n` random members, with their values, of the collection `coll` of `kind` (a set or a
/// sorted set, of `len` members), from distinct places of its deck (`storage::pop_decks`)
/// when `distinct`, each checked to be a member in `view`. A set without a deck is dealt one
/// first, under the key's lock, if the decks have room (`PopDecks::may_deal_for_reads`: a
/// set refused once is not read for a deck again; not in a transaction, whose thread may
/// hold other keys' locks). `None` when a deck cannot answer: none, a count past
/// [`MAX_DECK_PICKS`] or a quarter of the deck for distinct picks, or most cards drawn not
/// members in `view` (removed since the deal; the deck is then dropped, and dealt again).
#[allow(clippy::too_many_arguments)]
pub fn deck_picks(
    ctx: &Ctx<'_>,
    view: &View<'_>,
    coll: Coll<'_>,
    kind: Kind,
    len: u64,
    n: u64,
    distinct: bool,
) -> Result<Option<Vec<Entry>>, CmdError> {
    if n == 0 || len > MAX_DECK_MEMBERS || n > MAX_DECK_PICKS || (distinct && n > len / 4) {
        return Ok(None);
    }
    let storage = ctx.storage();
    let decks = storage.pop_decks();
    let prefix = coll.prefix();
    if !decks.has(&prefix) {
        if storage.in_txn() || !decks.may_deal_for_reads(&prefix) {
            return Ok(None);
        }
        if ctx.mode.no_wait() {
            // Dealing takes the key's lock and reads the whole set: a worker's job.
            return Err(CmdError::WOULD_BLOCK);
        }
        let _guard = storage.lock(ctx.db(), &[coll.key]);
        let latest = storage.latest();
        // The set may have been replaced since `view` was taken: deal only the same version.
        let same = latest
            .get_meta(coll.db, coll.key)?
            .is_some_and(|m| m.kind == kind && m.version == coll.version);
        if !same {
            return Ok(None);
        }
        if !decks.has(&prefix) {
            let mut cards = Vec::with_capacity(len as usize);
            latest.for_each_member(Cf::Data, &coll, |m, _| {
                cards.push(m.to_vec());
                true
            })?;
            if !decks.deal_for_reads(prefix.clone(), coll.version, cards) {
                return Ok(None);
            }
        }
    }
    let n = n as usize;
    let mut picks = Vec::with_capacity(n);
    let mut taken: HashSet<Vec<u8>> = HashSet::new();
    for _ in 0..4 {
        let want = n - picks.len();
        let Some(cards) = decks.sample(&prefix, want + want / 4 + 2, distinct) else {
            return Ok(None);
        };
        let found = view.get_members(&coll, &cards)?;
        let drawn = cards.len();
        let stale = found.iter().filter(|f| f.is_none()).count();
        for (card, f) in cards.into_iter().zip(found) {
            let Some(value) = f.filter(|_| picks.len() < n) else {
                continue;
            };
            if distinct && !taken.insert(card.clone()) {
                continue;
            }
            picks.push((card, value));
        }
        if picks.len() == n {
            return Ok(Some(picks));
        }
        if stale * 2 > drawn {
            // Most cards drawn are stale: deal again rather than keep drawing.
            decks.forget(&prefix);
            return Ok(None);
        }
    }
    Ok(None)
}

/// The picks [`deck_picks`] gives, else, for a collection past [`SMALL_SAMPLE`] (on a worker:
/// WouldBlock on an I/O thread), those its rank index gives (`ranked::member_picks`); `None`:
/// the caller samples by walks.
pub fn deck_or_ranked_picks(
    ctx: &Ctx<'_>,
    view: &View<'_>,
    coll: Coll<'_>,
    kind: Kind,
    len: u64,
    n: u64,
    distinct: bool,
) -> Result<Option<Vec<Entry>>, CmdError> {
    if let Some(picks) = deck_picks(ctx, view, coll, kind, len, n, distinct)? {
        return Ok(Some(picks));
    }
    walks_on_a_worker(ctx, len)?;
    if len <= SMALL_SAMPLE {
        return Ok(None);
    }
    super::ranked::member_picks(ctx, coll.key, kind, n, distinct)
}

/// The entry under the cursor, copied.
fn current(c: &MemberCursor<'_>) -> Option<Entry> {
    c.entry().map(|(m, v)| (m.to_vec(), v.to_vec()))
}

/// The last entry whose member starts with `prefix` (there is at least one).
fn last_with_prefix(c: &mut MemberCursor<'_>, prefix: &[u8]) -> Option<Entry> {
    match prefix_successor(prefix) {
        Some(succ) => {
            c.seek_back(&succ);
            if c.entry().is_some_and(|(m, _)| !m.starts_with(prefix)) {
                c.prev();
            }
        }
        None => c.last(),
    }
    current(c).filter(|(m, _)| m.starts_with(prefix))
}

/// Deepest walk before settling for the first member of the branch reached.
const MAX_WALK_DEPTH: usize = 64;

/// Members a walk's result is moved forward by, at most (see [`random_walk`]).
const SMOOTHING_STEPS: u32 = 64;

/// A random member: a [`trie_walk`], then a uniformly random number of steps forward (below
/// [`SMOOTHING_STEPS`], wrapping at the end). The trie walk favours members under small branches
/// (in m0..m99999, "m0" alone is one of ten branches after "m"); the steps spread each member's
/// chance over the members that follow it, so no member is far more likely than its neighbours.
fn random_walk(
    c: &mut MemberCursor<'_>,
    rng: &mut impl Rng,
) -> Result<Option<Entry>, StorageError> {
    let Some(found) = trie_walk(c, rng)? else {
        return Ok(None);
    };
    let steps = rng.gen_range(0..SMOOTHING_STEPS);
    if steps == 0 {
        return Ok(Some(found));
    }
    c.seek(&found.0);
    for _ in 0..steps {
        c.next();
        if c.entry().is_none() {
            c.status()?;
            c.first();
        }
    }
    c.status()?;
    Ok(current(c).or(Some(found)))
}

/// A random member by a walk down the implicit trie of member bytes: starting from the whole
/// collection, repeatedly chooses uniformly one of the distinct next bytes after the common prefix
/// of the current branch (or the member equal to that prefix, if there is one), until the branch
/// holds a single member.
fn trie_walk(c: &mut MemberCursor<'_>, rng: &mut impl Rng) -> Result<Option<Entry>, StorageError> {
    c.first();
    let Some(mut lo) = current(c) else {
        c.status()?;
        return Ok(None);
    };
    c.last();
    let Some((mut hi, _)) = current(c) else {
        c.status()?;
        return Ok(None);
    };
    for _ in 0..MAX_WALK_DEPTH {
        if lo.0 == hi {
            return Ok(Some(lo));
        }
        let p = lo.0.iter().zip(&hi).take_while(|(a, b)| a == b).count();
        let prefix = lo.0[..p].to_vec();
        let exact = lo.0.len() == p;
        // The distinct bytes that follow the prefix, each found by one seek.
        let mut bytes: Vec<u8> = Vec::new();
        let mut probe = prefix.clone();
        probe.push(0);
        loop {
            c.seek(&probe);
            match c.entry() {
                Some((m, _)) if m.starts_with(&prefix) && m.len() > p => {
                    let b = m[p];
                    bytes.push(b);
                    if b == u8::MAX {
                        break;
                    }
                    probe[p] = b + 1;
                }
                _ => break,
            }
        }
        c.status()?;
        let choices = bytes.len() + usize::from(exact);
        if choices == 0 {
            return Ok(Some(lo));
        }
        let r = rng.gen_range(0..choices);
        if r == bytes.len() {
            return Ok(Some(lo));
        }
        let mut branch = prefix;
        branch.push(bytes[r]);
        c.seek(&branch);
        let Some(first) = current(c) else {
            c.status()?;
            return Ok(Some(lo));
        };
        let Some(last) = last_with_prefix(c, &branch) else {
            c.status()?;
            return Ok(Some(first));
        };
        lo = first;
        hi = last.0;
    }
    Ok(Some(lo))
}

/// Redis's index range rule (LRANGE, LTRIM, ZRANGE by rank, ZREMRANGEBYRANK): negative indexes
/// count from the end, the range is clamped to the collection; the inclusive range, or `None` if
/// it is empty.
pub fn index_range(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    let mut start = if start < 0 {
        len.saturating_add(start)
    } else {
        start
    };
    let mut end = if end < 0 {
        len.saturating_add(end)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as u64, end as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ranges_follow_redis() {
        assert_eq!(index_range(0, -1, 3), Some((0, 2)));
        assert_eq!(index_range(-10, 10, 3), Some((0, 2)));
        assert_eq!(index_range(3, 5, 3), None);
        assert_eq!(index_range(2, 1, 3), None);
        assert_eq!(index_range(0, -1, 0), None);
        assert_eq!(index_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }

    #[test]
    fn scan_cursors_parse_like_strtoul() {
        let cursor = |a: &[u8]| MemberScan::cursor(a).ok();
        assert_eq!(cursor(b"0"), Some(0));
        assert_eq!(cursor(b""), Some(0));
        assert_eq!(cursor(b"+5"), Some(5));
        assert_eq!(cursor(b"-1"), Some(u64::MAX));
        for bad in [&b"-"[..], b" 1", b"1 ", b"x", b"18446744073709551616"] {
            assert_eq!(cursor(bad), None, "{bad:?}");
        }
    }

    fn storage() -> (tempfile::TempDir, Storage) {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        (dir, s)
    }

    fn fill(s: &Storage, key: &[u8], members: impl Iterator<Item = Vec<u8>>) -> Meta {
        let mut meta = Meta::collection(Kind::Set, s.next_version().unwrap(), 0);
        let coll = Coll::new(0, key, &meta);
        let mut batch = Batch::default();
        for m in members {
            batch.put_member(s, Cf::Data, &coll, &m, b"");
            meta.len += 1;
        }
        batch.put_meta(s, 0, key, &meta);
        s.commit(batch).unwrap();
        meta
    }

    #[test]
    fn walks_reach_every_member_of_a_numbered_set() {
        let (_d, s) = storage();
        let meta = fill(&s, b"k", (0..2000).map(|i| format!("m{i}").into_bytes()));
        let view = s.view();
        let coll = Coll::new(0, b"k", &meta);
        let mut c = view.members(Cf::Data, &coll);
        let mut rng = rand::thread_rng();
        let mut seen: std::collections::HashMap<Vec<u8>, u32> = Default::default();
        for _ in 0..20_000 {
            let (m, _) = random_walk(&mut c, &mut rng).unwrap().unwrap();
            assert!(m.starts_with(b"m"));
            *seen.entry(m).or_default() += 1;
        }
        // Biased, but far from stuck on a few members: uniform would be 10 picks each.
        let most = seen.values().max().copied().unwrap_or(0);
        assert!(seen.len() > 1500, "only {} distinct members", seen.len());
        assert!(most < 200, "one member picked {most} times in 20000");
    }

    #[test]
    fn distinct_picks_are_distinct_and_bounded() {
        let (_d, s) = storage();
        let meta = fill(&s, b"k", (0..5000u32).map(|i| i.to_be_bytes().to_vec()));
        let view = s.view();
        let coll = Coll::new(0, b"k", &meta);
        let sampler = Sampler::new(&view, Cf::Data, coll, meta.len);
        for count in [1, 3, 19, 20, 100, 4999, 5000, 9999] {
            let picks = sampler.distinct(count).unwrap();
            assert_eq!(picks.len() as u64, count.min(5000));
            let set: HashSet<_> = picks.iter().map(|e| e.0.clone()).collect();
            assert_eq!(set.len(), picks.len());
        }
        let mut n = 0;
        sampler
            .with_repeats(300, |m, _| {
                assert_eq!(m.len(), 4);
                n += 1;
                true
            })
            .unwrap();
        assert_eq!(n, 300);
        // Many repeated picks are drawn by position in one pass, in drawing order.
        let mut picks = Vec::new();
        sampler
            .with_repeats(2000, |m, _| {
                picks.push(m.to_vec());
                true
            })
            .unwrap();
        assert_eq!(picks.len(), 2000);
        let distinct: HashSet<_> = picks.iter().collect();
        assert!(distinct.len() > 1000, "{} distinct", distinct.len());
        let mut sorted = picks.clone();
        sorted.sort();
        assert_ne!(sorted, picks, "picks come back in random order");
        assert!(sampler.one().unwrap().is_some());
    }

    #[test]
    fn walk_handles_members_that_prefix_others() {
        let (_d, s) = storage();
        let members = ["", "a", "ab", "abc", "abd", "b", "b\u{ff}"];
        let meta = fill(&s, b"k", members.iter().map(|m| m.as_bytes().to_vec()));
        let view = s.view();
        let coll = Coll::new(0, b"k", &meta);
        let mut c = view.members(Cf::Data, &coll);
        let mut rng = rand::thread_rng();
        let mut seen = HashSet::new();
        for _ in 0..2000 {
            seen.insert(random_walk(&mut c, &mut rng).unwrap().unwrap().0);
        }
        assert_eq!(seen.len(), members.len());
    }
}
