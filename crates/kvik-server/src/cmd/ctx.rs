//! What a command handler on a worker works with: its arguments, the connection's session, the
//! shared server with its storage, and a reply writer. (On an I/O thread a run-to-completion
//! command gets a [`super::cached::CacheCtx`] instead, which has no storage at all.)

use crate::cache::{
    Cache, CachedHash, CachedList, CachedValue, CollValue, ExpiringHash, FieldSet, FillToken,
    HashFields, Hit, Known,
};
use crate::server::Server;
use crate::session::Session;
use crate::storage::encoding::{field_expired, split_field_value, Kind, Meta, FIELD_TTL_LEN};
use crate::storage::locks::{KeyGuard, Patience};
use crate::storage::{Batch, Storage, View, Wait};
use bytes::Bytes;
use std::sync::atomic::Ordering;

pub use crate::error::{CmdError, CmdResult, ErrorKind};
pub use crate::reply::{Args, Reply};

/// How long an I/O thread waits for a key's stripe another thread holds before it puts the
/// command off to a later turn (`rtc-lock-retries`, see `net::io_thread`) or hands it to the
/// pool. Without any wait, 50 clients writing one hot key (XREADGROUP, XACK of
/// one stream) collided on every other command and ended up in the pool. A turn keeps the
/// stripes it wrote until its batch is written (`storage::locks::retain`), longer than 20 us:
/// with that wait for everything, a quarter to a half of the HSETs of one hot hash went to the
/// pool, where workers then held the stripe in turn. So a thread that keeps no stripe yet
/// (which cannot close a cycle of waits, see `storage::locks::Patience`) waits up to
/// `rtc-lock-wait-us`; one that keeps some, 20 us. A holder that stays long (a long script)
/// makes every try fall back, which `rtc_backoff` stops after a window of them. Measured in
/// docs/benchmarks.md section 29.
pub fn io_thread_lock_wait(server: &Server) -> Patience {
    let us = server.config.rtc_lock_wait_us.load(Ordering::Relaxed);
    Patience {
        keeping: IO_THREAD_LOCK_WAIT_KEEPING,
        not_keeping: std::time::Duration::from_micros(us).max(IO_THREAD_LOCK_WAIT_KEEPING),
    }
}

/// See [`io_thread_lock_wait`].
pub const IO_THREAD_LOCK_WAIT_KEEPING: std::time::Duration = std::time::Duration::from_micros(20);

/// How a worker's reads use the hot cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Look in the cache; on a miss read RocksDB and fill the cache.
    Normal,
    /// The pool running a command that missed the cache on the I/O thread: go straight to
    /// RocksDB (the cache was just asked), and fill the cache.
    SkipCache,
    /// A command run on an I/O thread (run to completion; see `CommandSpec::rtc_write`): like
    /// `Normal`, but nothing may wait. Key locks are tried, reads go to the memtables and the
    /// block cache only (and to disk too with `disk_reads`: while the thread's reads of it are
    /// fast, see `disk_gate`), a write that would stall is refused: any of these ends the
    /// command with [`ErrorKind::WouldBlock`] before it changed anything, and it runs in the
    /// pool. With `cache_asked` the I/O thread's cached read just missed: as `SkipCache`.
    NoWait { disk_reads: bool, cache_asked: bool },
}

impl Mode {
    /// Run on an I/O thread.
    pub fn no_wait(self) -> bool {
        matches!(self, Mode::NoWait { .. })
    }

    /// Reads go straight to RocksDB: the hot cache was just asked and missed.
    fn skips_cache(self) -> bool {
        matches!(
            self,
            Mode::SkipCache
                | Mode::NoWait {
                    cache_asked: true,
                    ..
                }
        )
    }
}

/// Everything a handler may touch while it runs one command.
pub struct Ctx<'a> {
    pub server: &'a Server,
    pub session: &'a mut Session,
    pub out: &'a mut Reply,
    /// Time the command started, in Unix ms: one clock reading per command, so expiry decisions
    /// within a command are consistent (Redis does the same with its cached mstime).
    pub now_ms: u64,
    pub mode: Mode,
    /// The command's arguments (what [`Ctx::block_on`] records to re-run a blocked command).
    pub args: &'a Args,
    /// Set by [`Ctx::block_on`] in a waiter's re-run: still nothing to take.
    pub blocked_again: bool,
    /// The on-disk database of the session's database, read once when the command starts
    /// ([`Ctx::physical_db`]), so the whole command runs against one database even if a
    /// SWAPDB races it.
    pub db: u16,
    /// Keyspace hits and misses of a [`Mode::NoWait`] run, published only if it completes
    /// (a run that would wait is run again by the pool, which counts them then).
    pub deferred_lookups: DeferredLookups,
}

/// See [`Ctx::deferred_lookups`].
#[derive(Default)]
pub struct DeferredLookups {
    hits: std::cell::Cell<u64>,
    misses: std::cell::Cell<u64>,
}

impl DeferredLookups {
    /// One lookup: of a key that exists (`found`) or not.
    pub fn count(&self, found: bool) {
        let cell = if found { &self.hits } else { &self.misses };
        cell.set(cell.get() + 1);
    }

    /// Adds the counts to the server's keyspace stats.
    pub fn publish(&self, stats: &crate::stats::Stats) {
        let (hits, misses) = (self.hits.take(), self.misses.take());
        if hits > 0 {
            stats.keyspace_hits.fetch_add(hits, Ordering::Relaxed);
        }
        if misses > 0 {
            stats.keyspace_misses.fetch_add(misses, Ordering::Relaxed);
        }
    }
}

impl<'a> Ctx<'a> {
    /// The storage, borrowed for the server's lifetime rather than the context's, so a handler
    /// can hold it (and a key lock from it) while it writes its reply.
    pub fn storage(&self) -> &'a Storage {
        &self.server.storage
    }

    /// The on-disk database of the session's selected database: what storage, the hot cache
    /// and the key locks take (see `storage::dbmap`).
    pub fn db(&self) -> u16 {
        self.db
    }

    /// The on-disk database that holds `session`'s selected database right now.
    pub fn physical_db(server: &Server, session: &Session) -> u16 {
        server.storage.dbs().physical(session.db)
    }

    /// Whether this command may wait (locks, disk, stalls): not on an I/O thread, which may
    /// still read the disk while its reads of it are fast.
    pub fn wait(&self) -> Wait {
        match self.mode {
            Mode::NoWait {
                disk_reads: false, ..
            } => Wait::Never,
            Mode::NoWait {
                disk_reads: true, ..
            } => Wait::ReadsOnly,
            Mode::Normal | Mode::SkipCache => Wait::Allowed,
        }
    }

    /// Locks `keys` of the session's database for a read-modify-write (see `storage::locks`).
    /// On an I/O thread a stripe another thread holds ends the command with KeyBusy (tried
    /// again on a later turn), and a key a client is blocked on with WouldBlock: a write to it
    /// may make it ready, and serving blocked clients is a worker's job (`blocked::serve`). Holding the stripes makes that answer
    /// stable until the commit, since a client blocks holding its keys' stripes too. While
    /// RocksDB stalls writes, every write goes to a worker: the turn's batch would make the
    /// I/O thread wait out the stall, its other clients with it (`storage::health`).
    pub fn lock_keys<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<KeyGuard<'a>, CmdError> {
        let storage = self.storage();
        match self.wait() {
            Wait::Allowed => Ok(storage.lock(self.db(), keys)),
            Wait::Never | Wait::ReadsOnly => {
                if storage.writes_may_stall() {
                    return Err(CmdError::WOULD_BLOCK);
                }
                let guard = storage
                    .try_lock_in_for(
                        keys.iter().map(|k| (self.db(), k.as_ref())),
                        io_thread_lock_wait(self.server),
                    )
                    .ok_or(CmdError::KEY_BUSY)?;
                if self.server.blocking.waits_on_any(self.session.db, keys) {
                    return Err(CmdError::WOULD_BLOCK);
                }
                Ok(guard)
            }
        }
    }

    /// Commits `batch` (see `Storage::commit`); on an I/O thread, without waiting.
    pub fn commit(&self, batch: Batch) -> CmdResult {
        Ok(self.storage().commit_with(batch, self.wait())?)
    }

    /// The latest state of the keys this command holds locked (see `Storage::latest`); on an
    /// I/O thread its reads come from memory or end the command with WouldBlock.
    pub fn latest(&self) -> View<'a> {
        self.storage().latest_with(self.wait())
    }

    /// A consistent snapshot for a read (see `Storage::view`); on an I/O thread its reads come
    /// from memory or end the command with WouldBlock.
    pub fn view(&self) -> View<'a> {
        self.storage().view_with(self.wait())
    }

    /// A fresh collection version (see [`next_version`]).
    pub fn next_version(&self) -> Result<u64, CmdError> {
        next_version(self.storage(), self.wait())
    }

    /// A key's live metadata straight from storage (on an I/O thread: from memory, or
    /// WouldBlock).
    fn get_live(&self, key: &[u8]) -> Result<Option<Meta>, CmdError> {
        let meta = self.storage().get_meta_with(self.db(), key, self.wait())?;
        Ok(meta.filter(|m| !m.is_expired(self.now_ms)))
    }

    /// Emits keyspace event `name` of `class` for `key` of the session's database (published
    /// only if `notify-keyspace-events` enables it). Call it after the write committed, while
    /// the key's lock is still held, so events of one key come in commit order. The command's
    /// spec must declare the event (`CommandSpec::event`).
    pub fn notify(&self, class: super::spec::Class, name: &'static str, key: &[u8]) {
        self.notify_in(self.session.db, class, name, key);
    }

    /// [`Ctx::notify`] for a key of logical database `db` (MOVE, COPY ... DB).
    pub fn notify_in(&self, db: u16, class: super::spec::Class, name: &'static str, key: &[u8]) {
        self.server.pubsub.notify_key(class, name, db, key);
    }

    /// Reads a key through the hot cache per [`Mode`]: a hit, or RocksDB, filling the cache
    /// with what it read.
    fn read_through(&self, key: &[u8]) -> Result<Lookup, CmdError> {
        let storage = &self.server.storage;
        let cache = storage.cache();
        if !self.mode.skips_cache() {
            match cache.get(self.db(), key, self.now_ms) {
                Some(Known::Present(hit)) => return Ok(Lookup::Cached(hit)),
                Some(Known::Absent) => return Ok(Lookup::Absent),
                None => {}
            }
        }
        if !cache.admits_key(key) {
            return Ok(self.get_live(key)?.map_or(Lookup::Absent, Lookup::Stored));
        }
        let token = cache.fill_token(self.db(), key);
        match self.storage().get_meta_with(self.db(), key, self.wait())? {
            // Only a key without a record is noted absent: an expired record still counts as a
            // key until it is removed, and writers take their prior state from the cache.
            None => {
                cache.fill_absent(token, self.db(), key);
                Ok(Lookup::Absent)
            }
            Some(m) if m.is_expired(self.now_ms) => Ok(Lookup::Absent),
            Some(m) => {
                cache.fill(token, self.db(), key, &m, self.now_ms);
                Ok(Lookup::Stored(m))
            }
        }
    }

    fn count_lookup(&self, found: bool) {
        if self.mode.no_wait() {
            self.deferred_lookups.count(found);
            return;
        }
        let stats = &self.server.stats;
        if found {
            stats.keyspace_hits.fetch_add(1, Ordering::Relaxed);
        } else {
            stats.keyspace_misses.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Looks a key up for reading: counts a keyspace hit or miss, as Redis's lookupKeyRead.
    /// Served by the hot cache when it holds the key.
    pub fn lookup_read(&self, key: &[u8]) -> Result<Option<Meta>, CmdError> {
        let meta = match self.read_through(key)? {
            Lookup::Absent => None,
            Lookup::Cached(hit) => Some(hit.to_meta()),
            Lookup::Stored(meta) => Some(meta),
        };
        self.count_lookup(meta.is_some());
        Ok(meta)
    }

    /// Looks a key up for writing (no hit/miss accounting); callers hold the key's lock, so a
    /// cached entry is current and answers without a RocksDB read.
    pub fn lookup_write(&self, key: &[u8]) -> Result<Option<Meta>, CmdError> {
        Ok(self.lookup_write_cached(key)?.map(|(meta, _)| meta))
    }

    /// [`Ctx::lookup_write`], and whether the record came from a hot cache entry that holds
    /// a list's head (see [`Ctx::write_list`]).
    fn lookup_write_cached(&self, key: &[u8]) -> Result<Option<(Meta, bool)>, CmdError> {
        if !self.storage().key_held_here(self.db(), key) {
            let lookups = &self.server.stats.unlocked_write_lookups;
            lookups.fetch_add(1, Ordering::Relaxed);
        }
        match self.storage().cache().held(self.db(), key, self.now_ms) {
            Some(Known::Present(hit)) => {
                let head = matches!(hit.value, CachedValue::Coll(CollValue::List(_)));
                Ok(Some((hit.to_meta(), head)))
            }
            Some(Known::Absent) => Ok(None),
            None => Ok(self.get_live(key)?.map(|meta| (meta, false))),
        }
    }

    /// A list for a write command (the caller holds the key's lock): its live meta and
    /// whether the hot cache holds its head, whose edits then go to the commit (`cmd::list`),
    /// from one cache lookup; `None` if the key does not exist, WRONGTYPE for another kind.
    pub fn write_list(&self, key: &[u8]) -> Result<Option<(Meta, bool)>, CmdError> {
        match self.lookup_write_cached(key)? {
            Some((m, _)) if m.kind != Kind::List => Err(CmdError::wrong_type()),
            found => Ok(found),
        }
    }

    /// A collection for a read command: a snapshot [`View`] (read its members from it, so they
    /// agree with the meta record) and the key's live meta, or `None` if the key does not exist.
    /// Counts a keyspace hit or miss; WRONGTYPE if the key holds another kind.
    pub fn read_collection(
        &self,
        key: &[u8],
        kind: Kind,
    ) -> Result<Option<(View<'a>, Meta)>, CmdError> {
        self.read_collection_noting(key, kind, None)
    }

    /// [`Ctx::read_collection`] that, given the key's fill token, notes a key without a record
    /// absent in the hot cache (unless a write of it came after the token), so the next read
    /// of it is a hit. An expired record is not noted: it counts as a key until it is removed.
    fn read_collection_noting(
        &self,
        key: &[u8],
        kind: Kind,
        absent: Option<FillToken>,
    ) -> Result<Option<(View<'a>, Meta)>, CmdError> {
        let view = self.view();
        let record = view.get_meta(self.db(), key)?;
        if let (None, Some(token)) = (&record, absent) {
            self.server
                .storage
                .cache()
                .fill_absent(token, self.db(), key);
        }
        let meta = record.filter(|m| !m.is_expired(self.now_ms));
        self.count_lookup(meta.is_some());
        match meta {
            None => Ok(None),
            Some(m) if m.kind == kind => Ok(Some((view, m))),
            Some(_) => Err(CmdError::wrong_type()),
        }
    }

    /// The length of a collection of `kind` (HLEN, LLEN, SCARD, ZCARD): 0 if the key does not
    /// exist, WRONGTYPE if it holds another kind. The meta record alone answers it.
    pub fn collection_len(&self, key: &[u8], kind: Kind) -> Result<u64, CmdError> {
        match self.lookup_read(key)? {
            None => Ok(0),
            Some(m) if m.kind == kind => Ok(m.len),
            Some(_) => Err(CmdError::wrong_type()),
        }
    }

    /// A hash for a read that the hot cache can answer (HGET, HMGET, HGETALL ...). A small hash (at most
    /// `cache-max-hash-fields` fields) is cached whole: a hit answers from memory, also on the
    /// I/O thread; a miss reads the hash from one snapshot and fills the cache with it, unless a
    /// write of the key raced the read (fill token). A bigger hash is cached as its meta, its
    /// fields one by one ([`HashRead::Big`]), each until it expires if it has a TTL. A small
    /// hash with field TTLs is cached whole until its first field expires
    /// ([`Ctx::read_expiring_hash`]). Counts a keyspace hit or miss; WRONGTYPE for another kind.
    pub fn read_hash(&self, key: &[u8]) -> Result<HashRead<'a>, CmdError> {
        let cache = self.server.storage.cache();
        // Before the lookup: a big hash's fields read later fill the cache only if no write
        // of the hash came after it (see `cache::BigColl`).
        let token = cache.fill_token(self.db(), key);
        if !self.mode.skips_cache() {
            let read = cache.get_with(self.db(), key, self.now_ms, |known| {
                (*known != Known::Absent, HashRead::of_known(known, token))
            });
            if let Some((found, read)) = read {
                self.count_lookup(found);
                return read;
            }
        }
        let Some((view, meta)) = self.read_collection(key, Kind::Hash)? else {
            return Ok(HashRead::Missing);
        };
        if !cache.enabled() || !cache.admits_key(key) {
            return Ok(HashRead::Stored(view, meta));
        }
        if meta.field_ttls && meta.len as usize <= cache.max_fields() {
            return self.read_expiring_hash(token, key, view, meta);
        }
        if meta.len as usize > cache.max_fields() {
            return Ok(match cache.fill_big(token, self.db(), key, &meta) {
                Some(gen) => HashRead::Big(BigCollRead {
                    meta,
                    gen,
                    token,
                    view: Some(view),
                }),
                None => HashRead::Stored(view, meta),
            });
        }
        let mut fields = FieldSet::with_capacity(meta.len as usize);
        let coll = crate::storage::Coll::new(self.db(), key, &meta);
        view.for_each_member(crate::storage::Cf::Data, &coll, |f, v| {
            fields.push(f, v);
            true
        })?;
        let fields: HashFields = fields.into();
        let hash = CachedHash {
            version: meta.version,
            fields: fields.clone(),
        };
        cache.fill_value(
            token,
            self.db(),
            key,
            Kind::Hash,
            meta.expire_at_ms,
            CachedValue::Coll(CollValue::Whole(hash)),
        );
        Ok(HashRead::Cached(fields))
    }

    /// [`Ctx::read_hash`] of a small hash with field TTLs that the cache does not hold: if its
    /// fields are all live it is read whole and cached until the first of them expires
    /// (`cache::ExpiringHash`); one holding an expired field not removed yet (its meta's
    /// length counts it, HLEN as Redis's) is read from `view`.
    fn read_expiring_hash(
        &self,
        token: FillToken,
        key: &[u8],
        view: View<'a>,
        meta: Meta,
    ) -> Result<HashRead<'a>, CmdError> {
        let cache = self.server.storage.cache();
        // The clock the cache judges the entry by (`Cache::get_with`).
        let now = self.now_ms;
        let coll = crate::storage::Coll::new(self.db(), key, &meta).raw();
        let mut fields = FieldSet::with_capacity(meta.len as usize);
        let mut live_until_ms = u64::MAX;
        let mut all_live = true;
        view.for_each_member(crate::storage::Cf::Data, &coll, |f, raw| {
            let (at, v) = split_field_value(raw);
            all_live = !field_expired(at, now);
            if at != 0 {
                live_until_ms = live_until_ms.min(at);
            }
            fields.push(f, v);
            all_live
        })?;
        if !all_live || fields.len() as u64 != meta.len {
            return Ok(HashRead::Stored(view, meta));
        }
        let fields: HashFields = fields.into();
        let expire_at_ms = meta.expire_at_ms;
        let hash = ExpiringHash {
            meta,
            fields: fields.clone(),
            live_until_ms,
        };
        cache.fill_value(
            token,
            self.db(),
            key,
            Kind::Hash,
            expire_at_ms,
            CachedValue::Coll(CollValue::Expiring(Box::new(hash))),
        );
        Ok(HashRead::Cached(fields))
    }

    /// A set or sorted set for a read of some of its members (SISMEMBER, SMISMEMBER, ZSCORE,
    /// ZMSCORE): cached as its meta ([`MemberRead::Big`], `cache-sets`), its members looked
    /// up one by one, the hits answered from memory, also on the I/O thread; a miss reads the
    /// meta from a snapshot and fills the cache with it (or notes the key absent), unless a
    /// write of the key raced the read (fill token). Counts a keyspace hit or miss; WRONGTYPE
    /// for another kind.
    pub fn read_members(&self, key: &[u8], kind: Kind) -> Result<MemberRead<'a>, CmdError> {
        let cache = self.server.storage.cache();
        let token = cache.fill_token(self.db(), key);
        if !self.mode.skips_cache() {
            let read = cache.get_with(self.db(), key, self.now_ms, |known| {
                (
                    *known != Known::Absent,
                    MemberRead::of_known(known, token, kind),
                )
            });
            if let Some((found, Some(read))) = read.map(|(f, r)| (f, r.transpose())) {
                self.count_lookup(found);
                return read;
            }
        }
        let Some((view, meta)) = self.read_collection_noting(key, kind, Some(token))? else {
            return Ok(MemberRead::Missing);
        };
        Ok(match cache.fill_big(token, self.db(), key, &meta) {
            Some(gen) => MemberRead::Big(BigCollRead {
                meta,
                gen,
                token,
                view: Some(view),
            }),
            None => MemberRead::Stored(view, meta),
        })
    }

    /// A list for a read of the elements at indexes `want(len)` (LRANGE, LINDEX; `None`:
    /// none, as for an index out of range). A list the hot cache holds with those elements
    /// ([`CachedList`]) answers from memory, also on the I/O thread; otherwise the list is
    /// read from a snapshot, and one whose elements asked for start near its head is cached
    /// with its first elements up to the last one asked for (the walk from the head costs
    /// at most twice the read's own), unless a write of the key raced the read (fill token).
    /// Counts a keyspace hit or miss; WRONGTYPE for another kind.
    pub fn read_list(
        &self,
        key: &[u8],
        want: impl Fn(u64) -> Option<(u64, u64)>,
    ) -> Result<ListRead<'a>, CmdError> {
        let cache = self.server.storage.cache();
        let token = cache.fill_token(self.db(), key);
        if !self.mode.skips_cache() {
            let read = cache.get_with(self.db(), key, self.now_ms, |known| {
                (*known != Known::Absent, ListRead::of_known(known, &want))
            });
            if let Some((found, Some(read))) = read.map(|(f, r)| (f, r.transpose())) {
                self.count_lookup(found);
                return read;
            }
        }
        let Some((view, meta)) = self.read_collection_noting(key, Kind::List, Some(token))? else {
            return Ok(ListRead::Missing);
        };
        let max = cache.list_elements();
        if !cache.admits_key(key) || max == 0 {
            return Ok(ListRead::Stored(view, meta));
        }
        let end = match want(meta.len) {
            None => None,
            Some((start, end)) if end < max as u64 && start <= end - start + 1 => Some(end),
            Some(_) => return Ok(ListRead::Stored(view, meta)),
        };
        let mut copy = CachedList::new(&meta);
        if let Some(end) = end {
            let coll = crate::storage::Coll::new(self.db(), key, &meta);
            let mut c = view.members(crate::storage::Cf::Data, &coll);
            c.seek(&crate::storage::encoding::list_index(meta.head));
            while copy.held() as u64 <= end {
                let Some((_, v)) = c.entry() else {
                    c.status()?;
                    return Err(CmdError::err("list elements missing"));
                };
                if !copy.push(v) {
                    return Ok(ListRead::Stored(view, meta));
                }
                c.next();
            }
        }
        let copy = std::sync::Arc::new(copy);
        cache.fill_value(
            token,
            self.db(),
            key,
            Kind::List,
            meta.expire_at_ms,
            CachedValue::Coll(CollValue::List(copy.clone())),
        );
        Ok(ListRead::Cached(copy))
    }

    /// A collection for a write command (the caller holds the key's lock): its live meta,
    /// `None` if the key does not exist, WRONGTYPE if it holds another kind.
    pub fn write_collection(&self, key: &[u8], kind: Kind) -> Result<Option<Meta>, CmdError> {
        match self.lookup_write(key)? {
            Some(m) if m.kind != kind => Err(CmdError::wrong_type()),
            m => Ok(m),
        }
    }

    /// A string key's value for reading, a segmented one still in storage; WRONGTYPE if the key
    /// holds another type. A cache hit shares the cached bytes (no copy, no allocation).
    fn lookup_string(&self, key: &[u8]) -> Result<Option<StringRead>, CmdError> {
        let value = match self.read_through(key)? {
            Lookup::Absent => None,
            Lookup::Cached(hit) => Some(string_of_hit(hit).map(StringRead::Bytes)),
            Lookup::Stored(m) if m.kind == Kind::String => {
                Some(Ok(StringRead::Bytes(Bytes::from(m.value))))
            }
            Lookup::Stored(m) if m.kind == Kind::Bitmap => Some(Ok(StringRead::Segmented(m))),
            Lookup::Stored(_) => Some(Err(CmdError::wrong_type())),
        };
        self.count_lookup(value.is_some());
        value.transpose()
    }

    /// A string key's value for reading (a segmented one read whole); WRONGTYPE if the key
    /// holds another type.
    pub fn read_string(&self, key: &[u8]) -> Result<Option<Bytes>, CmdError> {
        Ok(match self.lookup_string(key)? {
            None => None,
            Some(StringRead::Bytes(b)) => Some(b),
            Some(StringRead::Segmented(m)) => Some(self.bitmap_string(key, &m)?.into()),
        })
    }

    /// GET's reply: a string key's value, null if missing. A segmented string is copied from
    /// its segments straight into the reply, not gathered into a string first.
    pub fn reply_string(&mut self, key: &[u8]) -> CmdResult {
        match self.lookup_string(key)? {
            None => self.out.null(),
            Some(StringRead::Bytes(b)) => self.out.bulk(&b),
            Some(StringRead::Segmented(m)) => {
                if self.mode.no_wait() {
                    return Err(CmdError::WOULD_BLOCK); // its segments are read from disk
                }
                let (view, db) = (self.storage().latest(), self.db());
                self.out.bulk_from(m.len, |buf| {
                    super::bitmap::segments::read_whole(&view, db, key, &m, buf)
                })?;
            }
        }
        Ok(())
    }
}

/// A string as [`Ctx::lookup_string`] finds it.
enum StringRead {
    Bytes(Bytes),
    /// A segmented bitmap, by its meta record.
    Segmented(Meta),
}

impl Ctx<'_> {
    /// A segmented bitmap read whole as the string it is (GET, GETRANGE ... on a bitmap key).
    pub fn bitmap_string(&self, key: &[u8], meta: &Meta) -> Result<Vec<u8>, CmdError> {
        if self.mode.no_wait() {
            return Err(CmdError::WOULD_BLOCK); // its segments are read from disk
        }
        let view = self.storage().latest();
        super::bitmap::segments::materialize(&view, self.db(), key, meta)
    }
}

/// A collection version never handed out before (`Storage::next_version`). Moving the
/// persisted floor is a synced write, so a command that must not wait takes a version only
/// below the floor and otherwise ends with WouldBlock (the version taken is never used).
pub fn next_version(storage: &Storage, wait: Wait) -> Result<u64, CmdError> {
    match wait {
        Wait::Allowed => Ok(storage.next_version()?),
        Wait::Never | Wait::ReadsOnly => {
            storage.next_version_reserved().ok_or(CmdError::WOULD_BLOCK)
        }
    }
}

/// What [`Ctx::read_hash`] found.
pub enum HashRead<'a> {
    Missing,
    /// The whole hash (sorted by field), from the hot cache or just read.
    Cached(HashFields),
    /// A hash the cache does not hold (one with field TTLs): read its fields from this
    /// snapshot.
    Stored(View<'a>, Meta),
    /// A hash too big to cache whole, cached as its meta: its fields are looked up in the
    /// cache one by one ([`KeyReads::big_fields`](super::cached::KeyReads)).
    Big(BigCollRead<'a>),
}

/// A collection the hot cache holds as its meta (a big hash, a set, a sorted set; see
/// `cache::BigColl`): its meta, the generation its members are cached under, and the key's
/// fill token, taken before the meta was found, so that members read from RocksDB fill the
/// cache only if no write of the collection came between.
pub struct BigCollRead<'a> {
    pub meta: Meta,
    gen: u64,
    token: FillToken,
    /// The snapshot the meta was read from, when it was read rather than found cached.
    view: Option<View<'a>>,
}

impl<'a> HashRead<'a> {
    /// A cache hit read as a hash (`token`: the key's, taken before the lookup): WRONGTYPE if
    /// it is another kind. Takes from the entry only what the read needs (under the cache
    /// shard's lock, see `Cache::get_with`): a small hash's fields (shared, not copied), a big
    /// hash's meta and generation, without cloning the entry's boxed big hash.
    pub(super) fn of_known(known: &Known, token: FillToken) -> Result<HashRead<'a>, CmdError> {
        let Known::Present(hit) = known else {
            return Ok(HashRead::Missing);
        };
        match &hit.value {
            CachedValue::Coll(CollValue::Whole(hash)) => Ok(HashRead::Cached(hash.fields.clone())),
            // Found only while all its fields live (see `Cache::get_with`).
            CachedValue::Coll(CollValue::Expiring(hash)) => {
                Ok(HashRead::Cached(hash.fields.clone()))
            }
            CachedValue::Coll(CollValue::Big(big)) if big.kind == Kind::Hash => {
                Ok(HashRead::Big(BigCollRead {
                    meta: big.meta(hit.expire_at_ms),
                    gen: big.gen,
                    token,
                    view: None,
                }))
            }
            CachedValue::Coll(CollValue::Big(_) | CollValue::List(_)) => {
                Err(CmdError::wrong_type())
            }
            CachedValue::Str(_) => Err(CmdError::wrong_type()),
        }
    }
}

/// What [`Ctx::read_list`] found.
pub enum ListRead<'a> {
    Missing,
    /// The hot cache's copy of the list's head, holding every element the read wants.
    Cached(std::sync::Arc<CachedList>),
    /// Not cached (or not the elements wanted): read them from this snapshot.
    Stored(View<'a>, Meta),
}

impl<'a> ListRead<'a> {
    /// A cache hit read as a list whose elements at indexes `want(len)` are read: WRONGTYPE
    /// for another kind; `None` if the cached copy does not hold them.
    pub(super) fn of_known(
        known: &Known,
        want: impl Fn(u64) -> Option<(u64, u64)>,
    ) -> Result<Option<ListRead<'a>>, CmdError> {
        let Known::Present(hit) = known else {
            return Ok(Some(ListRead::Missing));
        };
        match &hit.value {
            CachedValue::Coll(CollValue::List(l)) => Ok(match want(l.len) {
                Some((_, end)) if end >= l.held() as u64 => None,
                _ => Some(ListRead::Cached(l.clone())),
            }),
            _ => Err(CmdError::wrong_type()),
        }
    }
}

/// What [`Ctx::read_members`] found.
pub enum MemberRead<'a> {
    Missing,
    /// Cached as its meta: its members are looked up in the cache one by one
    /// ([`KeyReads::big_fields`](super::cached::KeyReads)).
    Big(BigCollRead<'a>),
    /// Not cached: read its members from this snapshot.
    Stored(View<'a>, Meta),
}

impl<'a> MemberRead<'a> {
    /// The collection's length (0 if it does not exist): SCARD, ZCARD.
    pub fn cardinality(&self) -> u64 {
        match self {
            MemberRead::Missing => 0,
            MemberRead::Big(big) => big.meta.len,
            MemberRead::Stored(_, meta) => meta.len,
        }
    }

    /// A cache hit read as a collection of `kind` (`token`: the key's, taken before the
    /// lookup): WRONGTYPE if it is another kind; `None` if the entry cannot serve the read (a
    /// small hash cached whole, for a hash).
    pub(super) fn of_known(
        known: &Known,
        token: FillToken,
        kind: Kind,
    ) -> Result<Option<MemberRead<'a>>, CmdError> {
        let Known::Present(hit) = known else {
            return Ok(Some(MemberRead::Missing));
        };
        match &hit.value {
            _ if hit.kind != kind => Err(CmdError::wrong_type()),
            CachedValue::Coll(CollValue::Big(big)) => Ok(Some(MemberRead::Big(BigCollRead {
                meta: big.meta(hit.expire_at_ms),
                gen: big.gen,
                token,
                view: None,
            }))),
            _ => Ok(None),
        }
    }
}

/// A stored field value of a hash with field TTLs as a reader at `now_ms` sees it (`None` if
/// absent or expired; without its expiry prefix), and the time it expires (0: never).
fn live_field(stored: Option<Vec<u8>>, now_ms: u64) -> (Option<Vec<u8>>, u64) {
    let Some(mut raw) = stored else {
        return (None, 0);
    };
    let at = split_field_value(&raw).0;
    if field_expired(at, now_ms) {
        return (None, at);
    }
    raw.drain(..FIELD_TTL_LEN.min(raw.len()));
    (Some(raw), at)
}

impl<'a> BigCollRead<'a> {
    /// The generation the collection's members (and a sorted set's rank index) are cached
    /// under.
    pub(crate) fn gen(&self) -> u64 {
        self.gen
    }

    /// The key's fill token, taken before the cache lookup or the meta read.
    pub(crate) fn token(&self) -> FillToken {
        self.token
    }

    /// The snapshot the meta was read from, if it was read rather than found cached, taken
    /// out: what is left still finds the members cached ([`BigCollRead::cached`]).
    pub(crate) fn take_view(&mut self) -> Option<View<'a>> {
        self.view.take()
    }

    /// The values of `fields` if the cache holds every one of them (`None` for a field known
    /// absent) and no write of the hash began or ended since the token (a write's edits
    /// reach the cached fields one by one), else `None`.
    pub(super) fn cached<M: AsRef<[u8]>>(
        &self,
        cache: &Cache,
        fields: &[M],
        now_ms: u64,
    ) -> Option<FieldValues> {
        let values: FieldValues = fields
            .iter()
            .map(|f| {
                cache.get_field_with(self.gen, f.as_ref(), now_ms, |known| match known {
                    Known::Present(Hit {
                        value: CachedValue::Str(v),
                        ..
                    }) => Some(FieldBytes::of(v)),
                    _ => None,
                })
            })
            .collect::<Option<_>>()?;
        cache.unchanged_since(&self.token).then_some(values)
    }

    /// The values of `fields`, from the cache if it holds them all, else all of them from one
    /// state of the hash: the meta's snapshot, or the latest state (one point read, or one
    /// MultiGet, which reads all its keys at one sequence number: no snapshot to take and
    /// release); those read fill the cache unless the hash was written since the token.
    pub(super) fn fields<M: AsRef<[u8]>>(
        &self,
        storage: &Storage,
        wait: Wait,
        db: u16,
        key: &[u8],
        fields: &[M],
        now_ms: u64,
    ) -> Result<FieldValues, CmdError> {
        let cache = storage.cache();
        if let Some(hit) = self.cached(cache, fields, now_ms) {
            return Ok(hit);
        }
        let fresh;
        let view = match &self.view {
            Some(v) => v,
            None => {
                fresh = storage.latest_with(wait);
                &fresh
            }
        };
        let coll = crate::storage::Coll::new(db, key, &self.meta);
        // A hash with field TTLs: read as stored, so each field's entry expires with it.
        let mut expiries = Vec::new();
        let values: Vec<Option<Vec<u8>>> = if self.meta.field_ttls {
            let stored = view.get_members(&coll.raw(), fields)?;
            stored
                .into_iter()
                .map(|v| {
                    let (v, at) = live_field(v, now_ms);
                    expiries.push(at);
                    v
                })
                .collect()
        } else {
            view.get_members(&coll, fields)?
        };
        for (i, (f, v)) in fields.iter().zip(&values).enumerate() {
            let at = expiries.get(i).copied().unwrap_or(0);
            cache.fill_field(self.token, self.gen, f.as_ref(), v.as_deref(), at);
        }
        Ok(values
            .into_iter()
            .map(|v| v.map(|v| FieldBytes::Shared(Bytes::from(v))))
            .collect())
    }

    /// The hash read again whole from a new snapshot (HGETALL, HKEYS ... of a big hash whose
    /// meta was found cached): its meta and fields from one state.
    pub(super) fn into_stored(
        self,
        storage: &'a Storage,
        wait: Wait,
        db: u16,
        key: &[u8],
        now_ms: u64,
    ) -> Result<HashRead<'a>, CmdError> {
        if let Some(view) = self.view {
            return Ok(HashRead::Stored(view, self.meta));
        }
        let view = storage.view_with(wait);
        Ok(match view.get_live(db, key, now_ms)? {
            None => HashRead::Missing,
            Some(m) if m.kind == Kind::Hash => HashRead::Stored(view, m),
            Some(_) => return Err(CmdError::wrong_type()),
        })
    }
}

/// Values of a big hash's fields, in the order asked (`None`: no such field).
pub type FieldValues = smallvec::SmallVec<[Option<FieldBytes>; 2]>;

/// A big hash's field value as a read took it from the cache: copied when small (a copy of a
/// few bytes costs less than sharing, whose count is two atomic operations on a line of its
/// own, a cache miss per read), else shared.
pub enum FieldBytes {
    Small(smallvec::SmallVec<[u8; FieldBytes::SMALL]>),
    Shared(Bytes),
}

impl FieldBytes {
    const SMALL: usize = 24;

    pub fn of(v: &Bytes) -> FieldBytes {
        if v.len() <= Self::SMALL {
            FieldBytes::Small(smallvec::SmallVec::from_slice(v))
        } else {
            FieldBytes::Shared(v.clone())
        }
    }
}

impl std::ops::Deref for FieldBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FieldBytes::Small(v) => v,
            FieldBytes::Shared(v) => v,
        }
    }
}

/// A cache hit read as a string: WRONGTYPE if it is another kind. Shares the cached bytes.
pub(super) fn string_of_hit(hit: Hit) -> Result<Bytes, CmdError> {
    match hit.value {
        CachedValue::Str(v) => Ok(v),
        CachedValue::Coll(_) => Err(CmdError::wrong_type()),
    }
}

/// What a read found, and where: no key (the hot cache knew, or RocksDB said), a hot cache
/// hit, or a record read from RocksDB.
enum Lookup {
    Absent,
    Cached(Hit),
    Stored(Meta),
}
