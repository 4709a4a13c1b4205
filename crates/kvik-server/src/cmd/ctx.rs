//! What a command handler works with: its arguments, the connection's session, the shared server,
//! a reply writer, and the error type whose text is Redis's own.

use crate::cache::{CachedValue, Hit};
use crate::server::Server;
use crate::session::Session;
use crate::storage::encoding::{Kind, Meta};
use crate::storage::{Storage, StorageError, View};
use bytes::Bytes;
use kvik_resp::{encode, Proto};
use std::borrow::Cow;
use std::sync::atomic::Ordering;

const CACHE_MISS: &str = "KVIKINTERNAL cache miss";

/// A command's arguments; `args[0]` is the command name as the client sent it.
pub type Args = [Bytes];

/// Result of a handler: `Ok` once it has written its reply.
pub type CmdResult = Result<(), CmdError>;

/// An error reply. The text is complete, prefix included ("ERR ...", "WRONGTYPE ..."), so the
/// dispatcher writes it as is and INFO errorstats can count it by prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError(pub Cow<'static, str>);

impl CmdError {
    /// "ERR " followed by `msg`.
    pub fn err(msg: impl std::fmt::Display) -> CmdError {
        CmdError(Cow::Owned(format!("ERR {msg}")))
    }
    pub const fn full(text: &'static str) -> CmdError {
        CmdError(Cow::Borrowed(text))
    }
    pub const fn syntax() -> CmdError {
        CmdError::full("ERR syntax error")
    }
    pub const fn not_integer() -> CmdError {
        CmdError::full("ERR value is not an integer or out of range")
    }
    pub const fn not_float() -> CmdError {
        CmdError::full("ERR value is not a valid float")
    }
    pub const fn wrong_type() -> CmdError {
        CmdError::full("WRONGTYPE Operation against a key holding the wrong kind of value")
    }
    pub const fn no_such_key() -> CmdError {
        CmdError::full("ERR no such key")
    }
    pub const fn overflow() -> CmdError {
        CmdError::full("ERR increment or decrement would overflow")
    }
    pub const fn db_out_of_range() -> CmdError {
        CmdError::full("ERR DB index is out of range")
    }
    pub const fn noauth() -> CmdError {
        CmdError::full("NOAUTH Authentication required.")
    }
    /// Internal, never sent: a [`Mode::CacheOnly`] read missed the cache.
    pub const fn cache_miss() -> CmdError {
        CmdError::full(CACHE_MISS)
    }
    pub fn is_cache_miss(&self) -> bool {
        self.0 == CACHE_MISS
    }
    /// "ERR wrong number of arguments for 'name' command".
    pub fn wrong_args(name: &str) -> CmdError {
        CmdError::err(format_args!(
            "wrong number of arguments for '{name}' command"
        ))
    }
    /// The error prefix (first word), as INFO errorstats groups errors.
    pub fn prefix(&self) -> &str {
        self.0.split(' ').next().unwrap_or("ERR")
    }
}

impl From<StorageError> for CmdError {
    fn from(e: StorageError) -> CmdError {
        tracing::error!(error = %e, "storage error");
        CmdError::err(format_args!("storage error: {e}"))
    }
}

/// The reply being built for one run of commands; replies are appended in command order.
#[derive(Debug)]
pub struct Reply {
    pub buf: Vec<u8>,
    pub proto: Proto,
}

impl Reply {
    pub fn new(proto: Proto) -> Reply {
        Reply {
            buf: Vec::with_capacity(256),
            proto,
        }
    }
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }
    pub fn simple(&mut self, s: &str) {
        encode::simple(&mut self.buf, s.as_bytes());
    }
    pub fn error(&mut self, text: &str) {
        encode::error(&mut self.buf, text.as_bytes());
    }
    pub fn int(&mut self, n: i64) {
        encode::integer(&mut self.buf, n);
    }
    pub fn bulk(&mut self, b: &[u8]) {
        encode::bulk(&mut self.buf, b);
    }
    /// A bulk string, or the null bulk string for `None`.
    pub fn bulk_or_null(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => self.bulk(b),
            None => self.null(),
        }
    }
    pub fn null(&mut self) {
        encode::null(&mut self.buf, self.proto);
    }
    pub fn null_array(&mut self) {
        encode::null_array(&mut self.buf, self.proto);
    }
    pub fn array(&mut self, n: usize) {
        encode::array_header(&mut self.buf, n);
    }
    pub fn map(&mut self, pairs: usize) {
        encode::map_header(&mut self.buf, pairs, self.proto);
    }
    pub fn set(&mut self, n: usize) {
        encode::set_header(&mut self.buf, n, self.proto);
    }
    pub fn double(&mut self, d: f64) {
        encode::double(&mut self.buf, d, self.proto);
    }
    pub fn boolean(&mut self, b: bool) {
        encode::boolean(&mut self.buf, b, self.proto);
    }
    pub fn verbatim(&mut self, text: &[u8]) {
        encode::verbatim(&mut self.buf, b"txt", text, self.proto);
    }
}

/// How a command's reads use the hot cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Look in the cache; on a miss read RocksDB and fill the cache.
    Normal,
    /// Run-to-completion on an I/O thread: only the cache may answer. A miss aborts the command
    /// before it has any effect ([`CmdError::cache_miss`]) and it is handed to the pool.
    CacheOnly,
    /// The pool re-running a command that missed in [`Mode::CacheOnly`]: go straight to
    /// RocksDB (the cache was just asked), and fill the cache.
    SkipCache,
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
    /// Keyspace hits counted in [`Mode::CacheOnly`], added to the stats only if the command
    /// completes (an aborted command is counted once, by the pool).
    pub deferred_hits: std::cell::Cell<u64>,
    /// The command's arguments (what [`Ctx::block_on`] records to re-run a blocked command).
    pub args: &'a Args,
}

impl<'a> Ctx<'a> {
    /// The storage, borrowed for the server's lifetime rather than the context's, so a handler
    /// can hold it (and a key lock from it) while it writes its reply.
    ///
    /// Panics in [`Mode::CacheOnly`]: the run-to-completion path never touches RocksDB, and only
    /// commands whose reads all go through [`Ctx::lookup_read`] / [`Ctx::read_string`] are
    /// marked rtc (the I/O thread catches the panic and hands the command to the pool).
    pub fn storage(&self) -> &'a Storage {
        assert!(
            self.mode != Mode::CacheOnly,
            "storage used by a run-to-completion command"
        );
        &self.server.storage
    }

    /// The session's selected database.
    pub fn db(&self) -> u16 {
        self.session.db
    }

    /// Reads a key through the hot cache per [`Mode`]: a hit, or (outside
    /// [`Mode::CacheOnly`]) RocksDB, filling the cache with what it read.
    fn read_through(&self, key: &[u8]) -> Result<Lookup, CmdError> {
        let storage = &self.server.storage;
        let cache = storage.cache();
        if self.mode != Mode::SkipCache {
            if let Some(hit) = cache.get(self.db(), key, self.now_ms) {
                return Ok(Lookup::Cached(hit));
            }
        }
        if self.mode == Mode::CacheOnly {
            return Err(CmdError::cache_miss());
        }
        if !cache.admits_key(key) {
            return Ok(Lookup::Stored(storage.get_live(
                self.db(),
                key,
                self.now_ms,
            )?));
        }
        let token = cache.fill_token(self.db(), key);
        let meta = storage.get_live(self.db(), key, self.now_ms)?;
        if let Some(m) = &meta {
            cache.fill(token, self.db(), key, m, self.now_ms);
        }
        Ok(Lookup::Stored(meta))
    }

    fn count_lookup(&self, found: bool) {
        let stats = &self.server.stats;
        if !found {
            stats.keyspace_misses.fetch_add(1, Ordering::Relaxed);
        } else if self.mode == Mode::CacheOnly {
            self.deferred_hits.set(self.deferred_hits.get() + 1);
        } else {
            stats.keyspace_hits.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Looks a key up for reading: counts a keyspace hit or miss, as Redis's lookupKeyRead.
    /// Served by the hot cache when it holds the key.
    pub fn lookup_read(&self, key: &[u8]) -> Result<Option<Meta>, CmdError> {
        let meta = match self.read_through(key)? {
            Lookup::Cached(hit) => Some(hit.to_meta()),
            Lookup::Stored(meta) => meta,
        };
        self.count_lookup(meta.is_some());
        Ok(meta)
    }

    /// Looks a key up for writing (no hit/miss accounting); callers hold the key's lock.
    pub fn lookup_write(&self, key: &[u8]) -> Result<Option<Meta>, CmdError> {
        Ok(self.storage().get_live(self.db(), key, self.now_ms)?)
    }

    /// A collection for a read command: a snapshot [`View`] (read its members from it, so they
    /// agree with the meta record) and the key's live meta, or `None` if the key does not exist.
    /// Counts a keyspace hit or miss; WRONGTYPE if the key holds another kind.
    pub fn read_collection(
        &self,
        key: &[u8],
        kind: Kind,
    ) -> Result<Option<(View<'a>, Meta)>, CmdError> {
        let view = self.storage().view();
        let meta = view.get_live(self.db(), key, self.now_ms)?;
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

    /// A hash for a read that the hot cache can answer (HGET). A small hash (at most
    /// `cache-max-hash-fields` fields) is cached whole: a hit answers from memory, also on the
    /// I/O thread; a miss reads the hash from one snapshot and fills the cache with it, unless a
    /// write of the key raced the read (fill token). A bigger hash comes back as a [`View`] and
    /// its meta. Counts a keyspace hit or miss; WRONGTYPE for another kind.
    pub fn read_hash(&self, key: &[u8]) -> Result<HashRead<'a>, CmdError> {
        let cache = self.server.storage.cache();
        if self.mode != Mode::SkipCache {
            if let Some(hit) = cache.get(self.db(), key, self.now_ms) {
                self.count_lookup(true);
                return match hit.value {
                    CachedValue::Hash(fields) => Ok(HashRead::Cached(fields)),
                    CachedValue::Str(_) => Err(CmdError::wrong_type()),
                };
            }
        }
        if self.mode == Mode::CacheOnly {
            return Err(CmdError::cache_miss());
        }
        let token = cache.fill_token(self.db(), key);
        let Some((view, meta)) = self.read_collection(key, Kind::Hash)? else {
            return Ok(HashRead::Missing);
        };
        if meta.len as usize > cache.max_fields() || !cache.enabled() || !cache.admits_key(key) {
            return Ok(HashRead::Stored(view, meta));
        }
        let mut fields = Vec::with_capacity(meta.len as usize);
        let coll = crate::storage::Coll::new(self.db(), key, &meta);
        view.for_each_member(crate::storage::Cf::Data, &coll, |f, v| {
            fields.push((Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)));
            true
        })?;
        let fields: std::sync::Arc<[(Bytes, Bytes)]> = fields.into();
        cache.fill_value(
            token,
            self.db(),
            key,
            Kind::Hash,
            meta.expire_at_ms,
            CachedValue::Hash(fields.clone()),
        );
        Ok(HashRead::Cached(fields))
    }

    /// A collection for a write command (the caller holds the key's lock): its live meta,
    /// `None` if the key does not exist, WRONGTYPE if it holds another kind.
    pub fn write_collection(&self, key: &[u8], kind: Kind) -> Result<Option<Meta>, CmdError> {
        match self.lookup_write(key)? {
            Some(m) if m.kind != kind => Err(CmdError::wrong_type()),
            m => Ok(m),
        }
    }

    /// A string key's value for reading; WRONGTYPE if the key holds another type. A cache hit
    /// shares the cached bytes (no copy, no allocation).
    pub fn read_string(&self, key: &[u8]) -> Result<Option<Bytes>, CmdError> {
        let value = match self.read_through(key)? {
            Lookup::Cached(Hit {
                value: CachedValue::Str(v),
                ..
            }) => Some(Ok(v)),
            Lookup::Cached(_) => Some(Err(CmdError::wrong_type())),
            Lookup::Stored(None) => None,
            Lookup::Stored(Some(m)) if m.kind == Kind::String => Some(Ok(Bytes::from(m.value))),
            Lookup::Stored(Some(_)) => Some(Err(CmdError::wrong_type())),
        };
        self.count_lookup(value.is_some());
        value.transpose()
    }
}

/// What [`Ctx::read_hash`] found.
pub enum HashRead<'a> {
    Missing,
    /// The whole hash, from the hot cache or just read.
    Cached(std::sync::Arc<[(Bytes, Bytes)]>),
    /// A hash too big to cache: read its fields from this snapshot.
    Stored(View<'a>, Meta),
}

/// Where a read was answered from.
enum Lookup {
    Cached(Hit),
    Stored(Option<Meta>),
}
