//! Hash commands: HSET HSETNX HGET HMGET HMSET HGETALL HDEL HLEN HSTRLEN HEXISTS HKEYS HVALS
//! HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN.
//!
//! A hash is a meta record (kind, expiry, version, number of fields) plus one data-CF entry per
//! field (field -> value) under the hash's version. Readers go through [`Ctx::read_hash`]: a
//! small hash is cached whole and answered from memory (also on the I/O thread, run to
//! completion), a bigger one is read from one snapshot so the reply agrees with the meta
//! length. Writers hold the key's lock through [`CollWrite`] and commit the fields and the meta
//! record in one batch (the meta record is deleted when the last field goes, as Redis deletes
//! empty hashes).
//!
//! Replies list fields in storage (byte) order; Redis's order is its hash table's and unspecified.

use super::cached::KeyReads;
use super::collection::{self, CollWrite, MemberScan, Sampler, ERR_OUT_OF_RANGE};
use super::ctx::{Args, CmdError, CmdResult, Ctx, HashRead, Reply};
use super::spec::{CacheEffect, Class, CommandSpec, FieldArgs, Flags, KeySpec};
use crate::storage::encoding::Kind;
use crate::storage::{Cf, Coll, StorageError};
use kvik_resp::{format_human, parse_i64, Proto};

const READ: Flags = Flags::READONLY;
const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE_FAST: Flags = Flags::WRITE.union(Flags::FAST);
const WRITE_OOM_FAST: Flags = Flags::WRITE.union(Flags::DENYOOM).union(Flags::FAST);

const ACL_READ_FAST: &[&str] = &["read", "hash", "fast"];
const ACL_READ_SLOW: &[&str] = &["read", "hash", "slow"];
const ACL_WRITE_FAST: &[&str] = &["write", "hash", "fast"];

const ALL_FIELDS: &str = "O(N) where N is the size of the hash.";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("hset", -4, WRITE_OOM_FAST, KeySpec::ONE, hset)
        .rtc_write()
        .fields(FieldArgs::PAIRS)
        .event(Class::Hash, "hset")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("hash")
        .doc(
            "Creates or modifies the value of a field in a hash.",
            "2.0.0",
            "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the \
             command is called with multiple field/value pairs.",
        ),
    CommandSpec::new("hmset", -4, WRITE_OOM_FAST, KeySpec::ONE, hmset)
        .rtc_write()
        .fields(FieldArgs::PAIRS)
        .event(Class::Hash, "hset")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("hash")
        .doc(
            "Sets the values of multiple fields.",
            "2.0.0",
            "O(N) where N is the number of fields being set.",
        ),
    CommandSpec::new("hsetnx", 4, WRITE_OOM_FAST, KeySpec::ONE, hsetnx)
        .rtc_write()
        .fields(FieldArgs::PAIRS)
        .event(Class::Hash, "hset")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("hash")
        .doc(
            "Sets the value of a field in a hash only when the field doesn't exist.",
            "2.0.0",
            "O(1)",
        ),
    CommandSpec::new("hget", 3, READ_FAST, KeySpec::ONE, |c, a| hget(c, a))
        .rtc(|c, a| hget(c, a))
        .fields(FieldArgs::ALL)
        .rtc_storage()
        .acl(ACL_READ_FAST)
        .group("hash")
        .doc("Returns the value of a field in a hash.", "2.0.0", "O(1)"),
    CommandSpec::new("hmget", -3, READ_FAST, KeySpec::ONE, |c, a| hmget(c, a))
        .rtc(|c, a| hmget(c, a))
        .fields(FieldArgs::ALL)
        .rtc_storage()
        .acl(ACL_READ_FAST)
        .group("hash")
        .doc(
            "Returns the values of all fields in a hash.",
            "2.0.0",
            "O(N) where N is the number of fields being requested.",
        ),
    CommandSpec::new("hgetall", 2, READ, KeySpec::ONE, |c, a| hgetall(c, a))
        .rtc(|c, a| hgetall(c, a))
        .rtc_storage()
        .acl(ACL_READ_SLOW)
        .group("hash")
        .doc(
            "Returns all fields and values in a hash.",
            "2.0.0",
            ALL_FIELDS,
        ),
    CommandSpec::new("hdel", -3, WRITE_FAST, KeySpec::ONE, hdel)
        .rtc_write()
        .fields(FieldArgs::ALL)
        .event(Class::Hash, "hdel")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("hash")
        .doc(
            "Deletes one or more fields and their values from a hash. Deletes the hash if no \
             fields remain.",
            "2.0.0",
            "O(N) where N is the number of fields to be removed.",
        ),
    CommandSpec::new("hlen", 2, READ_FAST, KeySpec::ONE, |c, a| hlen(c, a))
        .rtc(|c, a| hlen(c, a))
        .rtc_storage()
        .acl(ACL_READ_FAST)
        .group("hash")
        .doc("Returns the number of fields in a hash.", "2.0.0", "O(1)"),
    CommandSpec::new("hstrlen", 3, READ_FAST, KeySpec::ONE, |c, a| hstrlen(c, a))
        .rtc(|c, a| hstrlen(c, a))
        .fields(FieldArgs::ALL)
        .rtc_storage()
        .acl(ACL_READ_FAST)
        .group("hash")
        .doc(
            "Returns the length of the value of a field.",
            "3.2.0",
            "O(1)",
        ),
    CommandSpec::new("hexists", 3, READ_FAST, KeySpec::ONE, |c, a| hexists(c, a))
        .rtc(|c, a| hexists(c, a))
        .fields(FieldArgs::ALL)
        .rtc_storage()
        .acl(ACL_READ_FAST)
        .group("hash")
        .doc(
            "Determines whether a field exists in a hash.",
            "2.0.0",
            "O(1)",
        ),
    CommandSpec::new("hkeys", 2, READ, KeySpec::ONE, |c, a| hkeys(c, a))
        .rtc(|c, a| hkeys(c, a))
        .rtc_storage()
        .acl(ACL_READ_SLOW)
        .group("hash")
        .doc("Returns all fields in a hash.", "2.0.0", ALL_FIELDS),
    CommandSpec::new("hvals", 2, READ, KeySpec::ONE, |c, a| hvals(c, a))
        .rtc(|c, a| hvals(c, a))
        .rtc_storage()
        .acl(ACL_READ_SLOW)
        .group("hash")
        .doc("Returns all values in a hash.", "2.0.0", ALL_FIELDS),
    CommandSpec::new("hincrby", 4, WRITE_OOM_FAST, KeySpec::ONE, hincrby)
        .rtc_write()
        .fields(FieldArgs::PAIRS)
        .event(Class::Hash, "hincrby")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("hash")
        .doc(
            "Increments the integer value of a field in a hash by a number. Uses 0 as initial \
             value if the field doesn't exist.",
            "2.0.0",
            "O(1)",
        ),
    CommandSpec::new(
        "hincrbyfloat",
        4,
        WRITE_OOM_FAST,
        KeySpec::ONE,
        hincrbyfloat,
    )
    .rtc_write()
    .fields(FieldArgs::PAIRS)
    .event(Class::Hash, "hincrbyfloat")
    .cache(CacheEffect::Invalidate)
    .acl(ACL_WRITE_FAST)
    .group("hash")
    .doc(
        "Increments the floating point value of a field by a number. Uses 0 as initial \
             value if the field doesn't exist.",
        "2.6.0",
        "O(1)",
    ),
    CommandSpec::new("hrandfield", -2, READ, KeySpec::ONE, hrandfield)
        .rtc_nowait_read()
        .acl(ACL_READ_SLOW)
        .group("hash")
        .doc(
            "Returns one or more random fields from a hash.",
            "6.2.0",
            "O(N) where N is the number of fields returned",
        ),
    CommandSpec::new("hscan", -3, READ, KeySpec::ONE, hscan)
        .acl(ACL_READ_SLOW)
        .group("hash")
        .doc(
            "Iterates over fields and values of a hash.",
            "2.8.0",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls \
             for the cursor to return back to 0. N is the number of elements inside the \
             collection.",
        ),
];

const ERR_NOT_INT: CmdError = CmdError::fixed("hash value is not an integer");
const ERR_NOT_FLOAT: CmdError = CmdError::fixed("hash value is not a float");
const ERR_INCR_NAN_INF: CmdError = CmdError::fixed("value is NaN or Infinity");
const ERR_RESULT_NAN_INF: CmdError = CmdError::fixed("increment would produce NaN or Infinity");

/// Longest text Redis parses as a long double (`MAX_LONG_DOUBLE_CHARS`).
const MAX_FLOAT_TEXT: usize = 5 * 1024;

// ---- Writes -------------------------------------------------------------------------------

/// Sets the field/value pairs of `args[2..]`; returns how many fields were new. A field given
/// twice counts once and takes its last value, as in Redis.
fn set_fields(ctx: &Ctx<'_>, args: &Args) -> Result<i64, CmdError> {
    let pairs: Vec<(&[u8], &[u8])> = args[2..]
        .chunks_exact(2)
        .map(|p| (&p[0][..], &p[1][..]))
        .collect();
    let mut w = CollWrite::open(ctx, &args[1], Kind::Hash)?;
    let fields: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
    let there = w.contains_many(&fields)?;
    let mut seen = std::collections::HashSet::new();
    let mut added = 0;
    for (i, (f, v)) in pairs.iter().enumerate() {
        let is_new = !there[i] && seen.insert(*f);
        added += i64::from(is_new);
        w.put(f, v, is_new)?;
    }
    w.commit_notify(ctx, Class::Hash, "hset")?;
    Ok(added)
}

fn check_pairs(args: &Args) -> Result<(), CmdError> {
    if !args.len().is_multiple_of(2) {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        return Err(CmdError::wrong_args(&name));
    }
    Ok(())
}

/// HSET key field value [field value ...]: the number of fields added.
fn hset(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    check_pairs(args)?;
    let n = set_fields(ctx, args)?;
    ctx.out.int(n);
    Ok(())
}

/// HMSET key field value [field value ...]: OK.
fn hmset(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    check_pairs(args)?;
    set_fields(ctx, args)?;
    ctx.out.ok();
    Ok(())
}

/// HSETNX key field value: 1 if the field was set, 0 if it existed.
fn hsetnx(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut w = CollWrite::open(ctx, &args[1], Kind::Hash)?;
    let set = w.get(&args[2])?.is_none();
    if set {
        w.put(&args[2], &args[3], true)?;
        w.commit_notify(ctx, Class::Hash, "hset")?;
    }
    ctx.out.int(i64::from(set));
    Ok(())
}

/// HDEL key field [field ...]: the number of fields removed; the key goes with its last field.
fn hdel(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut w = CollWrite::open(ctx, &args[1], Kind::Hash)?;
    let fields = &args[2..];
    let there = w.contains_many(fields)?;
    let mut seen = std::collections::HashSet::new();
    let mut removed = 0;
    for (f, &there) in fields.iter().zip(&there) {
        if there && seen.insert(&f[..]) {
            w.delete(f);
            removed += 1;
        }
    }
    w.commit_notify(ctx, Class::Hash, "hdel")?;
    ctx.out.int(removed);
    Ok(())
}

/// Reads a field for HINCRBY / HINCRBYFLOAT (an expired field reads as absent) and stores the new value `f` computes from it.
fn modify_field(
    ctx: &Ctx<'_>,
    args: &Args,
    event: &'static str,
    f: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>, CmdError>,
) -> Result<Vec<u8>, CmdError> {
    let mut w = CollWrite::open(ctx, &args[1], Kind::Hash)?;
    let old = w.get(&args[2])?;
    let new = f(old.as_deref())?;
    // As Redis 7.4: an increment changes the value in place, so a field keeps its TTL.
    w.put_keep_ttl(&args[2], &new, old.is_none())?;
    w.commit_notify(ctx, Class::Hash, event)?;
    Ok(new)
}

/// HINCRBY key field increment: the new value.
fn hincrby(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let incr = parse_i64(&args[3]).ok_or(CmdError::not_integer())?;
    let mut result = 0;
    modify_field(ctx, args, "hincrby", |old| {
        let current = match old {
            None => 0,
            Some(v) => parse_i64(v).ok_or(ERR_NOT_INT)?,
        };
        result = current.checked_add(incr).ok_or(CmdError::overflow())?;
        Ok(result.to_string().into_bytes())
    })?;
    ctx.out.int(result);
    Ok(())
}

fn parse_float(b: &[u8]) -> Option<f64> {
    if b.len() > MAX_FLOAT_TEXT {
        return None;
    }
    kvik_resp::parse_redis_double(b)
}

/// HINCRBYFLOAT key field increment: the new value as Redis's human-readable decimal text (a
/// bulk string in RESP3 too, as in Redis).
fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let incr = parse_float(&args[3]).ok_or(CmdError::not_float())?;
    if !incr.is_finite() {
        return Err(ERR_INCR_NAN_INF);
    }
    let text = modify_field(ctx, args, "hincrbyfloat", |old| {
        let current = match old {
            None => 0.0,
            Some(v) => parse_float(v).ok_or(ERR_NOT_FLOAT)?,
        };
        let sum = current + incr;
        if !sum.is_finite() {
            return Err(ERR_RESULT_NAN_INF);
        }
        Ok(format_human(sum).into_bytes())
    })?;
    ctx.out.bulk(&text);
    Ok(())
}

// ---- Reads --------------------------------------------------------------------------------

/// A field's value as a read found it: borrowed from a cached whole hash, shared with a
/// cached field of a big hash, or read from RocksDB.
enum FieldValue<'r> {
    Borrowed(&'r [u8]),
    Shared(super::ctx::FieldBytes),
    Owned(Vec<u8>),
}

impl std::ops::Deref for FieldValue<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FieldValue::Borrowed(v) => v,
            FieldValue::Shared(v) => v,
            FieldValue::Owned(v) => v,
        }
    }
}

/// The values of `fields` in hash `key` as `read` found it (`None`: no such field): looked up
/// in the cached whole hash, in the cached fields of a big hash (the rest read from RocksDB),
/// or read from the snapshot of a hash the cache does not hold.
fn field_values<'a, 'r, C: KeyReads<'a>, M: AsRef<[u8]>>(
    ctx: &C,
    key: &[u8],
    read: &'r HashRead<'a>,
    fields: &[M],
) -> Result<Vec<Option<FieldValue<'r>>>, C::Error> {
    Ok(match read {
        HashRead::Missing => fields.iter().map(|_| None).collect(),
        HashRead::Cached(all) => fields
            .iter()
            .map(|f| all.get(f.as_ref()).map(FieldValue::Borrowed))
            .collect(),
        HashRead::Big(big) => ctx
            .big_fields(key, big, fields)?
            .into_iter()
            .map(|v| v.map(FieldValue::Shared))
            .collect(),
        HashRead::Stored(view, meta) => view
            .get_members(&Coll::new(ctx.db(), key, meta), fields)?
            .into_iter()
            .map(|v| v.map(FieldValue::Owned))
            .collect(),
    })
}

/// [`field_values`] of one field (HGET, HSTRLEN, HEXISTS).
fn field_value<'a, 'r, C: KeyReads<'a>>(
    ctx: &C,
    key: &[u8],
    read: &'r HashRead<'a>,
    field: &[u8],
) -> Result<Option<FieldValue<'r>>, C::Error> {
    Ok(match read {
        HashRead::Missing => None,
        HashRead::Cached(all) => all.get(field).map(FieldValue::Borrowed),
        HashRead::Big(big) => ctx
            .big_fields(key, big, &[field])?
            .pop()
            .flatten()
            .map(FieldValue::Shared),
        HashRead::Stored(view, meta) => view
            .get_member(&Coll::new(ctx.db(), key, meta), field)?
            .map(FieldValue::Owned),
    })
}

/// HGET key field.
fn hget<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let read = ctx.read_hash(&args[1])?;
    let value = field_value(ctx, &args[1], &read, &args[2])?;
    ctx.out().bulk_or_null(value.as_deref());
    Ok(())
}

/// HMGET key field [field ...]: a value or nil per field.
fn hmget<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let read = ctx.read_hash(&args[1])?;
    let values = field_values(ctx, &args[1], &read, &args[2..])?;
    let out = ctx.out();
    out.array(values.len());
    for v in &values {
        out.bulk_or_null(v.as_deref());
    }
    Ok(())
}

/// HLEN key: the meta length (of a hash with field TTLs, it counts fields that expired but
/// were not removed yet, as Redis's HLEN does).
fn hlen<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let len = match ctx.read_hash(&args[1])? {
        HashRead::Missing => 0,
        HashRead::Cached(all) => all.len() as u64,
        HashRead::Big(big) => big.meta.len,
        HashRead::Stored(_, meta) => meta.len,
    };
    ctx.out().int(len as i64);
    Ok(())
}

/// HSTRLEN key field: the value's length, 0 if absent.
fn hstrlen<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let read = ctx.read_hash(&args[1])?;
    let len = field_value(ctx, &args[1], &read, &args[2])?.map_or(0, |v| v.len());
    ctx.out().int(len as i64);
    Ok(())
}

/// HEXISTS key field: 1 or 0.
fn hexists<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let read = ctx.read_hash(&args[1])?;
    let found = field_value(ctx, &args[1], &read, &args[2])?.is_some();
    ctx.out().int(i64::from(found));
    Ok(())
}

/// What HGETALL, HKEYS and HVALS list of each field.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Both,
    Fields,
    Values,
}

impl Part {
    /// The reply header of `n` fields: a map (HGETALL, RESP3) or a flat array.
    fn header(self, out: &mut Reply, n: usize) {
        match self {
            Part::Both => out.map(n),
            _ => out.array(n),
        }
    }

    fn write(self, out: &mut Reply, f: &[u8], v: &[u8]) {
        if self != Part::Values {
            out.bulk(f);
        }
        if self != Part::Fields {
            out.bulk(v);
        }
    }
}

/// Lists a whole hash: from the cached copy, or streamed from the snapshot. The header is
/// written from the meta length of the same snapshot; a mismatch (which would be corruption)
/// becomes an error instead of a malformed reply.
fn list_all<'a, C: KeyReads<'a>>(ctx: &mut C, key: &[u8], part: Part) -> Result<(), C::Error> {
    let db = ctx.db();
    let read = match ctx.read_hash(key)? {
        HashRead::Big(big) => ctx.big_hash_stored(key, big)?,
        read => read,
    };
    let (view, meta) = match read {
        HashRead::Missing => {
            part.header(ctx.out(), 0);
            return Ok(());
        }
        HashRead::Cached(all) => {
            let out = ctx.out();
            part.header(out, all.len());
            for (f, v) in all.iter() {
                part.write(out, f, v);
            }
            return Ok(());
        }
        HashRead::Stored(view, meta) => (view, meta),
        HashRead::Big(_) => unreachable!("read whole above"),
    };
    let coll = Coll::new(db, key, &meta);
    if meta.field_ttls {
        return Ok(list_live(ctx.out(), &view, &coll, part)?);
    }
    let out = ctx.out();
    part.header(out, meta.len as usize);
    let mut n = 0u64;
    view.for_each_member(Cf::Data, &coll, |f, v| {
        part.write(out, f, v);
        n += 1;
        true
    })?;
    if n != meta.len {
        return Err(CmdError::err(format_args!(
            "hash length mismatch: {} fields stored, {} recorded",
            n, meta.len
        ))
        .into());
    }
    Ok(())
}

/// [`list_all`] of a hash with field TTLs: its length counts fields that expired but were not
/// removed yet, so the live fields are collected before the header is written.
fn list_live(
    out: &mut Reply,
    view: &crate::storage::View<'_>,
    coll: &Coll<'_>,
    part: Part,
) -> Result<(), StorageError> {
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    view.for_each_member(Cf::Data, coll, |f, v| {
        entries.push((f.to_vec(), v.to_vec()));
        true
    })?;
    part.header(out, entries.len());
    for (f, v) in &entries {
        part.write(out, f, v);
    }
    Ok(())
}

fn hgetall<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    list_all(ctx, &args[1], Part::Both)
}

fn hkeys<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    list_all(ctx, &args[1], Part::Fields)
}

fn hvals<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    list_all(ctx, &args[1], Part::Values)
}

/// HRANDFIELD key [count [WITHVALUES]].
///
/// Without count: one random field or nil. A positive count: that many distinct fields (at most
/// the whole hash). A negative count: that many picks that may repeat. WITHVALUES pairs each field
/// with its value (flat in RESP2, an array of two per pick in RESP3).
fn hrandfield(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let Some(count_arg) = args.get(2) else {
        let field = match ctx.read_collection(&args[1], Kind::Hash)? {
            Some((view, meta)) => {
                let coll = Coll::new(ctx.db(), &args[1], &meta);
                match deck_picks_of_hash(ctx, &view, coll, &meta, 1, true)? {
                    Some(mut picks) => picks.pop(),
                    None => {
                        let len = live_len(&view, &coll, &meta)?;
                        Sampler::new(&view, Cf::Data, coll, len).one()?
                    }
                }
            }
            None => None,
        };
        ctx.out.bulk_or_null(field.as_ref().map(|e| &e.0[..]));
        return Ok(());
    };
    let count = parse_count(count_arg)?;
    let with_values = match args.get(3) {
        _ if args.len() > 4 => return Err(CmdError::syntax()),
        Some(a) if a.eq_ignore_ascii_case(b"WITHVALUES") => true,
        Some(_) => return Err(CmdError::syntax()),
        None => false,
    };
    if with_values && count.unsigned_abs() > (i64::MAX / 2) as u64 {
        return Err(ERR_OUT_OF_RANGE);
    }
    let Some((view, meta)) = ctx.read_collection(&args[1], Kind::Hash)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let coll = Coll::new(ctx.db(), &args[1], &meta);
    if meta.field_ttls {
        // Counting the live fields walks the hash.
        collection::walks_on_a_worker(ctx, meta.len)?;
    }
    let len = live_len(&view, &coll, &meta)?;
    if len == 0 {
        // Every field expired (not removed yet): as if the key did not exist.
        ctx.out.array(0);
        return Ok(());
    }
    let sampler = Sampler::new(&view, Cf::Data, coll, len);
    let resp3_pairs = with_values && ctx.out.proto == Proto::Resp3;
    let per_pick = if with_values && !resp3_pairs { 2 } else { 1 };
    let from_deck = deck_picks_of_hash(ctx, &view, coll, &meta, count.unsigned_abs(), count >= 0)?;
    if count >= 0 {
        let picks = sampler.distinct_or(from_deck, count as u64)?;
        ctx.out.array(picks.len() * per_pick);
        for (f, v) in &picks {
            write_pick(ctx, f, v, with_values, resp3_pairs);
        }
        return Ok(());
    }
    let n = count.unsigned_abs();
    let limit = collection::max_reply_bytes(ctx);
    // Each pick costs at least 7 bytes of reply ("$1\r\nx\r\n"): refuse what cannot fit.
    if n.saturating_mul(7 * per_pick as u64) > limit {
        return Err(ERR_OUT_OF_RANGE);
    }
    ctx.out.array(n as usize * per_pick);
    let start = ctx.out.buf.len() as u64;
    let mut too_big = false;
    sampler.with_repeats_or(from_deck, n, |f, v| {
        write_pick(ctx, f, v, with_values, resp3_pairs);
        too_big = ctx.out.buf.len() as u64 - start > limit;
        !too_big
    })?;
    if too_big {
        return Err(ERR_OUT_OF_RANGE);
    }
    Ok(())
}

/// [`collection::deck_or_ranked_picks`] for a hash without field TTLs (with them, which
/// fields count changes with the clock, and neither a deck nor a rank index follows it:
/// `None`, sampled by walks, on a worker past a small hash).
fn deck_picks_of_hash(
    ctx: &Ctx<'_>,
    view: &crate::storage::View<'_>,
    coll: Coll<'_>,
    meta: &crate::storage::encoding::Meta,
    n: u64,
    distinct: bool,
) -> Result<Option<Vec<collection::Entry>>, CmdError> {
    if meta.field_ttls {
        collection::walks_on_a_worker(ctx, meta.len)?;
        return Ok(None);
    }
    collection::deck_or_ranked_picks(ctx, view, coll, Kind::Hash, meta.len, n, distinct)
}

/// The number of fields reads see: the meta length, or for a hash with field TTLs (whose
/// length may count expired fields not removed yet) a count of the live ones.
fn live_len(
    view: &crate::storage::View<'_>,
    coll: &Coll<'_>,
    meta: &crate::storage::encoding::Meta,
) -> Result<u64, CmdError> {
    if !meta.field_ttls {
        return Ok(meta.len);
    }
    let mut n = 0;
    view.for_each_member(Cf::Data, coll, |_, _| {
        n += 1;
        true
    })?;
    Ok(n)
}

fn write_pick(ctx: &mut Ctx<'_>, f: &[u8], v: &[u8], with_values: bool, resp3_pairs: bool) {
    if resp3_pairs {
        ctx.out.array(2);
    }
    ctx.out.bulk(f);
    if with_values {
        ctx.out.bulk(v);
    }
}

/// A count of HRANDFIELD / SRANDMEMBER: an integer in -LONG_MAX..=LONG_MAX with Redis's errors.
pub fn parse_count(arg: &[u8]) -> Result<i64, CmdError> {
    match parse_i64(arg) {
        None => Err(CmdError::not_integer()),
        Some(i64::MIN) => Err(CmdError::fixed(
            "value is out of range, value must between -9223372036854775807 and \
             9223372036854775807",
        )),
        Some(n) => Ok(n),
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]: the next cursor and field/value pairs.
fn hscan(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let cursor = MemberScan::cursor(&args[2])?;
    let Some((view, meta)) = ctx.read_collection(&args[1], Kind::Hash)? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let scan = MemberScan::with_options(cursor, args, 2)?;
    let coll = Coll::new(ctx.db(), &args[1], &meta);
    let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let next = scan.step(ctx, &view, Cf::Data, &coll, |f, v| {
        found.push((f.to_vec(), v.to_vec()))
    })?;
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(found.len() * 2);
    for (f, v) in &found {
        ctx.out.bulk(f);
        ctx.out.bulk(v);
    }
    Ok(())
}
