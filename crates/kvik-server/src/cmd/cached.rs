//! Run to completion: the context of a command answered on an I/O thread from the hot cache.
//!
//! A [`CacheCtx`] holds the session, the reply writer and the cache, and no storage: a
//! run-to-completion handler cannot reach RocksDB because it has no way to. A key the cache
//! does not hold ends the command with [`RtcError::Miss`], a value the dispatcher turns into
//! "run it in the pool" (nothing was written, nothing counted).
//!
//! The command itself is written once, generic over [`KeyReads`], the reads both contexts
//! offer; its spec names the two instances (`.rtc(|c, a| get(c, a))` beside the worker
//! handler `|c, a| get(c, a)`).

use super::bitmap::segments::{self, BitValue};
use super::ctx::{
    string_of_hit, BigCollRead, Ctx, DeferredLookups, FieldBytes, FieldValues, HashRead, ListRead,
    MemberRead,
};
use crate::cache::{CachedValue, Hit, Known};
use crate::error::CmdError;
use crate::reply::{Args, Reply};
use crate::server::Server;
use crate::session::Session;
use crate::storage::encoding::{Kind, Meta};
use crate::storage::{Coll, StorageError};
use bytes::Bytes;
use std::ops::Range;
use std::sync::atomic::Ordering;

/// Why a command run in cache-only mode stopped without its normal reply.
#[derive(Debug)]
pub enum RtcError {
    /// The cache does not hold a key the command reads: run the command in the pool.
    Miss,
    /// An error reply (WRONGTYPE, syntax ...), sent as on a worker.
    Reply(CmdError),
}

impl From<CmdError> for RtcError {
    fn from(e: CmdError) -> RtcError {
        RtcError::Reply(e)
    }
}

/// Needed by the generic bodies (a worker's reads can fail in RocksDB); a [`CacheCtx`] never
/// produces one.
impl From<StorageError> for RtcError {
    fn from(e: StorageError) -> RtcError {
        RtcError::Reply(e.into())
    }
}

/// Largest string value GET copies into its reply while it holds the cache shard's lock.
const COPY_UNDER_LOCK: usize = 4096;

/// What a string read replies for a key of another kind: WRONGTYPE (GET) or null (MGET).
#[derive(Clone, Copy, PartialEq, Eq)]
enum OtherKind {
    WrongType,
    Null,
}

/// What [`CacheCtx::reply_string`] found under the cache shard's lock.
enum StringRead {
    Replied { found: bool },
    Large(Bytes),
    WrongType,
}

/// A key's kind and expiry ([`KeyReads::lookup_head`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHead {
    pub kind: Kind,
    /// Absolute expiry in Unix milliseconds; 0: none.
    pub expire_at_ms: u64,
}

/// Handler of a run-to-completion command on an I/O thread.
pub type RtcHandler = fn(&mut CacheCtx<'_>, &Args) -> Result<(), RtcError>;

/// The key reads a run-to-completion command makes: answered by the hot cache on an I/O
/// thread ([`CacheCtx`]), by the cache and RocksDB behind it on a worker ([`Ctx`]).
pub trait KeyReads<'a> {
    type Error: From<CmdError> + From<StorageError>;
    fn out(&mut self) -> &mut Reply;
    /// The command's clock reading, in Unix ms.
    fn now_ms(&self) -> u64;
    fn db(&self) -> u16;
    /// `proto-max-bulk-len`: the largest string a command may address (bit offsets).
    fn max_bulk_len(&self) -> u64;
    /// A key's live record; counts a keyspace hit or miss (Redis's lookupKeyRead).
    fn lookup_read(&self, key: &[u8]) -> Result<Option<Meta>, Self::Error>;
    /// [`KeyReads::lookup_read`] for a command that needs only the key's kind and expiry
    /// (EXISTS, TYPE, the TTL family): the hot cache answers it without copying the value.
    fn lookup_head(&self, key: &[u8]) -> Result<Option<KeyHead>, Self::Error> {
        Ok(self.lookup_read(key)?.map(|m| KeyHead {
            kind: m.kind,
            expire_at_ms: m.expire_at_ms,
        }))
    }
    /// A string key's value; WRONGTYPE for another kind.
    fn read_string(&self, key: &[u8]) -> Result<Option<Bytes>, Self::Error>;
    /// Replies with a string key's value, or null (GET); WRONGTYPE for another kind.
    fn reply_string(&mut self, key: &[u8]) -> Result<(), Self::Error> {
        let value = self.read_string(key)?;
        self.out().bulk_or_null(value.as_deref());
        Ok(())
    }
    /// Replies with a string key's value, or null for a missing key or another kind (one key
    /// of MGET).
    fn reply_string_or_null(&mut self, key: &[u8]) -> Result<(), Self::Error> {
        let value = match self.lookup_read(key)? {
            Some(m) if m.kind == Kind::String => Some(m.value),
            // A segmented bitmap (never in the hot cache, so only on a worker).
            Some(m) if m.kind == Kind::Bitmap => match self.read_bits(key, None)? {
                Some(v) => Some(v.to_vec()?),
                None => None,
            },
            _ => None,
        };
        self.out().bulk_or_null(value.as_deref());
        Ok(())
    }
    /// A string's bytes for a bit command: inline, or the segments of a segmented bitmap that
    /// cover the byte ranges `spans` (all of it for `None`); WRONGTYPE for another kind.
    fn read_bits(
        &self,
        key: &[u8],
        spans: Option<&[Range<u64>]>,
    ) -> Result<Option<BitValue<'a>>, Self::Error>;
    /// A hash (cached whole when small); WRONGTYPE for another kind.
    fn read_hash(&self, key: &[u8]) -> Result<HashRead<'a>, Self::Error>;
    /// A set or sorted set for a read of some of its members; WRONGTYPE for another kind.
    fn read_members(&self, key: &[u8], kind: Kind) -> Result<MemberRead<'a>, Self::Error>;
    /// A list for a read of its elements at indexes `want(len)` (see [`Ctx::read_list`]);
    /// WRONGTYPE for another kind.
    fn read_list(
        &self,
        key: &[u8],
        want: impl Fn(u64) -> Option<(u64, u64)>,
    ) -> Result<ListRead<'a>, Self::Error>;
    /// The values of `fields` of collection `key` cached as its meta, as
    /// [`KeyReads::read_hash`] or [`KeyReads::read_members`] found it: from the hot cache, the
    /// rest from storage.
    fn big_fields<M: AsRef<[u8]>>(
        &self,
        key: &[u8],
        big: &BigCollRead<'a>,
        fields: &[M],
    ) -> Result<FieldValues, Self::Error>;
    /// Big hash `key` read whole from storage (HGETALL, HKEYS, HVALS).
    fn big_hash_stored(
        &self,
        key: &[u8],
        big: BigCollRead<'a>,
    ) -> Result<HashRead<'a>, Self::Error>;
}

/// The values of `members` of set or sorted set `key` (`None`: not a member; a sorted set
/// member's value is its encoded score): from the hot cache when it holds the collection as
/// its meta, the rest, or all of them, from storage.
pub fn member_values<'a, C: KeyReads<'a>, M: AsRef<[u8]>>(
    ctx: &C,
    key: &[u8],
    kind: Kind,
    members: &[M],
) -> Result<FieldValues, C::Error> {
    Ok(match ctx.read_members(key, kind)? {
        MemberRead::Missing => members.iter().map(|_| None).collect(),
        MemberRead::Big(big) => ctx.big_fields(key, &big, members)?,
        MemberRead::Stored(view, meta) => view
            .get_members(&Coll::new(ctx.db(), key, &meta), members)?
            .into_iter()
            .map(|v| v.map(|v| FieldBytes::Shared(Bytes::from(v))))
            .collect(),
    })
}

impl<'a> KeyReads<'a> for Ctx<'a> {
    type Error = CmdError;
    fn out(&mut self) -> &mut Reply {
        self.out
    }
    fn now_ms(&self) -> u64 {
        self.now_ms
    }
    fn db(&self) -> u16 {
        Ctx::db(self)
    }
    fn max_bulk_len(&self) -> u64 {
        self.server
            .config
            .proto_max_bulk_len
            .load(Ordering::Relaxed)
    }
    fn lookup_read(&self, key: &[u8]) -> Result<Option<Meta>, CmdError> {
        Ctx::lookup_read(self, key)
    }
    fn read_string(&self, key: &[u8]) -> Result<Option<Bytes>, CmdError> {
        Ctx::read_string(self, key)
    }
    fn reply_string(&mut self, key: &[u8]) -> Result<(), CmdError> {
        Ctx::reply_string(self, key)
    }
    fn read_bits(
        &self,
        key: &[u8],
        spans: Option<&[Range<u64>]>,
    ) -> Result<Option<BitValue<'a>>, CmdError> {
        segments::read(self, key, spans)
    }
    fn read_hash(&self, key: &[u8]) -> Result<HashRead<'a>, CmdError> {
        Ctx::read_hash(self, key)
    }
    fn read_members(&self, key: &[u8], kind: Kind) -> Result<MemberRead<'a>, CmdError> {
        Ctx::read_members(self, key, kind)
    }
    fn read_list(
        &self,
        key: &[u8],
        want: impl Fn(u64) -> Option<(u64, u64)>,
    ) -> Result<ListRead<'a>, CmdError> {
        Ctx::read_list(self, key, want)
    }
    fn big_fields<M: AsRef<[u8]>>(
        &self,
        key: &[u8],
        big: &BigCollRead<'a>,
        fields: &[M],
    ) -> Result<FieldValues, CmdError> {
        big.fields(
            self.storage(),
            self.wait(),
            self.db(),
            key,
            fields,
            self.now_ms,
        )
    }
    fn big_hash_stored(&self, key: &[u8], big: BigCollRead<'a>) -> Result<HashRead<'a>, CmdError> {
        big.into_stored(self.storage(), self.wait(), self.db(), key, self.now_ms)
    }
}

/// Everything a run-to-completion handler may touch: its reply, the hot cache (under the
/// session's database). No storage.
pub struct CacheCtx<'a> {
    server: &'a Server,
    out: &'a mut Reply,
    now_ms: u64,
    /// Keyspace hits and misses, added to the stats only if the command completes (a command
    /// that misses the cache is counted once, by whoever runs it then).
    lookups: DeferredLookups,
    /// The on-disk database of the session's (the hot cache is keyed by it; see `Ctx::db`).
    db: u16,
}

impl<'a> CacheCtx<'a> {
    pub fn new(
        server: &'a Server,
        session: &'a Session,
        out: &'a mut Reply,
        now_ms: u64,
    ) -> CacheCtx<'a> {
        CacheCtx {
            db: server.storage.dbs().physical(session.db),
            server,
            out,
            now_ms,
            lookups: DeferredLookups::default(),
        }
    }

    /// Keyspace hits of the command so far.
    /// The pub/sub registry, for PUBLISH on the I/O thread: delivery appends to subscribers'
    /// mailboxes and never touches storage.
    pub fn pubsub(&self) -> &crate::pubsub::PubSub {
        &self.server.pubsub
    }

    /// Cluster mode is on (PUBLISH then also forwards, which it leaves to a worker).
    pub fn cluster_mode(&self) -> bool {
        self.server.cluster.node().is_some()
    }

    /// CLUSTER SLOTS / SHARDS / NODES: shared state rendered once per topology change, no
    /// keys and no storage, so cluster clients refreshing their maps never wait for a worker.
    pub fn cluster_reply(&mut self, which: crate::cluster::replies::Which) -> Result<(), RtcError> {
        super::cluster::write_topology_reply(self.server, self.out, which).map_err(RtcError::Reply)
    }

    /// The keyspace hits and misses the command counted (see [`DeferredLookups`]).
    pub fn into_lookups(self) -> DeferredLookups {
        self.lookups
    }

    /// What the cache knows of `key` (counted as a keyspace hit or miss, as Redis counts the
    /// lookup), or [`RtcError::Miss`] if it does not hold the key.
    fn known(&self, key: &[u8]) -> Result<Known, RtcError> {
        self.known_with(key, Known::clone)
    }

    /// [`CacheCtx::known`] handed to `f` under the cache shard's lock instead of cloned (see
    /// `Cache::get_with`).
    fn known_with<R>(&self, key: &[u8], f: impl FnOnce(&Known) -> R) -> Result<R, RtcError> {
        let (found, r) = self
            .server
            .storage
            .cache()
            .get_with(self.db, key, self.now_ms, |known| {
                (*known != Known::Absent, f(known))
            })
            .ok_or(RtcError::Miss)?;
        self.lookups.count(found);
        Ok(r)
    }

    /// A string key's value or null written into the reply, under the cache shard's lock for
    /// a small value; another kind is an error or a null, as `other` says.
    fn reply_cached_string(&mut self, key: &[u8], other: OtherKind) -> Result<(), RtcError> {
        let out = &mut *self.out;
        let read = self
            .server
            .storage
            .cache()
            .get_with(self.db, key, self.now_ms, |known| match known {
                Known::Absent => {
                    out.null();
                    StringRead::Replied { found: false }
                }
                Known::Present(Hit {
                    value: CachedValue::Str(v),
                    ..
                }) if v.len() <= COPY_UNDER_LOCK => {
                    out.bulk(v);
                    StringRead::Replied { found: true }
                }
                Known::Present(Hit {
                    value: CachedValue::Str(v),
                    ..
                }) => StringRead::Large(v.clone()),
                Known::Present(_) if other == OtherKind::Null => {
                    out.null();
                    StringRead::Replied { found: true }
                }
                Known::Present(_) => StringRead::WrongType,
            })
            .ok_or(RtcError::Miss)?;
        self.lookups
            .count(!matches!(read, StringRead::Replied { found: false }));
        match read {
            StringRead::Replied { .. } => Ok(()),
            StringRead::Large(v) => {
                self.out.bulk(&v);
                Ok(())
            }
            StringRead::WrongType => Err(CmdError::wrong_type().into()),
        }
    }
}

impl<'a> KeyReads<'a> for CacheCtx<'a> {
    type Error = RtcError;
    fn out(&mut self) -> &mut Reply {
        self.out
    }
    fn now_ms(&self) -> u64 {
        self.now_ms
    }
    fn db(&self) -> u16 {
        self.db
    }
    fn max_bulk_len(&self) -> u64 {
        self.server
            .config
            .proto_max_bulk_len
            .load(Ordering::Relaxed)
    }
    fn lookup_read(&self, key: &[u8]) -> Result<Option<Meta>, RtcError> {
        Ok(self.known(key)?.present().map(|h| h.to_meta()))
    }
    /// Read under the cache shard's lock: no value copied, no reference count taken.
    fn lookup_head(&self, key: &[u8]) -> Result<Option<KeyHead>, RtcError> {
        self.known_with(key, |known| match known {
            Known::Present(h) => Some(KeyHead {
                kind: h.kind,
                expire_at_ms: h.expire_at_ms,
            }),
            Known::Absent => None,
        })
    }
    fn read_string(&self, key: &[u8]) -> Result<Option<Bytes>, RtcError> {
        match self.known(key)?.present() {
            Some(hit) => Ok(Some(string_of_hit(hit)?)),
            None => Ok(None),
        }
    }
    /// Copies a small value into the reply under the cache shard's lock (no reference count
    /// taken, see `Cache::get_with`); a large one is cloned and copied after the lock.
    fn reply_string(&mut self, key: &[u8]) -> Result<(), RtcError> {
        self.reply_cached_string(key, OtherKind::WrongType)
    }
    /// [`CacheCtx::reply_string`], with null for another kind: an MGET copies each value
    /// straight into its reply, as GET does, instead of cloning them all first.
    fn reply_string_or_null(&mut self, key: &[u8]) -> Result<(), RtcError> {
        self.reply_cached_string(key, OtherKind::Null)
    }
    /// The cache holds inline strings only: a segmented bitmap is always a miss.
    fn read_bits(
        &self,
        key: &[u8],
        _spans: Option<&[Range<u64>]>,
    ) -> Result<Option<BitValue<'a>>, RtcError> {
        match self.known(key)?.present() {
            Some(hit) => Ok(Some(BitValue::Inline(string_of_hit(hit)?))),
            None => Ok(None),
        }
    }
    fn read_hash(&self, key: &[u8]) -> Result<HashRead<'a>, RtcError> {
        let token = self.server.storage.cache().fill_token(self.db, key);
        Ok(self.known_with(key, |known| HashRead::of_known(known, token))??)
    }
    /// A collection the cache holds as its meta, or a miss.
    fn read_members(&self, key: &[u8], kind: Kind) -> Result<MemberRead<'a>, RtcError> {
        let token = self.server.storage.cache().fill_token(self.db, key);
        self.known_with(key, |known| MemberRead::of_known(known, token, kind))??
            .ok_or(RtcError::Miss)
    }
    /// A list whose cached head holds the elements wanted, or a miss.
    fn read_list(
        &self,
        key: &[u8],
        want: impl Fn(u64) -> Option<(u64, u64)>,
    ) -> Result<ListRead<'a>, RtcError> {
        self.known_with(key, |known| ListRead::of_known(known, want))??
            .ok_or(RtcError::Miss)
    }
    /// Every field from the cache, or a miss.
    fn big_fields<M: AsRef<[u8]>>(
        &self,
        _key: &[u8],
        big: &BigCollRead<'a>,
        fields: &[M],
    ) -> Result<FieldValues, RtcError> {
        big.cached(self.server.storage.cache(), fields, self.now_ms)
            .ok_or(RtcError::Miss)
    }
    /// A miss: the whole hash is in storage.
    fn big_hash_stored(
        &self,
        _key: &[u8],
        _big: BigCollRead<'a>,
    ) -> Result<HashRead<'a>, RtcError> {
        Err(RtcError::Miss)
    }
}
