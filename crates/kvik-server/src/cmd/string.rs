//! String commands: GET SET and the rest of Redis's `string` group.
//!
//! A string lives inline in its meta record, so every string command is one point read and, for
//! writes, one WriteBatch committed under the key's stripe lock. Handlers only parse; the work is
//! done by one shared helper per shape:
//!
//! - [`set_generic`]: SET, SETNX, SETEX, PSETEX, GETSET (replace the value, maybe the expiry);
//! - [`modify_string`]: INCR/DECR/INCRBY/DECRBY ([`incr_by`]), INCRBYFLOAT (read the value,
//!   compute a new one, keep the expiry);
//! - `bitmap::segments::write_bits`: APPEND and SETRANGE, as the bit commands (a write into part
//!   of the value: a string they grow past `string-edit-inline-max` (64 KiB) is kept in
//!   segments and only those touched are written);
//! - [`mset_generic`]: MSET, MSETNX (many keys, one lock set, one batch);
//! - [`getrange`]: GETRANGE and SUBSTR.
//!
//! Type checks are written against [`Meta::kind`], so once other kinds exist these commands
//! answer WRONGTYPE for them (and SET / MSET overwrite them, as Redis does: the old collection's
//! members become stale under the new meta record and the compaction filter drops them).
//!
//! Size limits: every command that can grow a string (APPEND, SETRANGE) or allocate in
//! proportion to its inputs (LCS) checks `proto-max-bulk-len` first and refuses with Redis's
//! error instead of allocating.

use super::bitmap::segments::{byte_write, write_bits, BitValue};
use super::cached::KeyReads;
use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CacheEffect, Class, CommandSpec, Flags, KeySpec};
use crate::storage::encoding::{encode_string, meta_expire_at, Kind, Meta};
use crate::storage::{Batch, Storage};
use kvik_resp::{format_human, parse_i64, parse_redis_double};
use kvik_types::bits::BitRead;
use std::sync::atomic::Ordering;

const READ: Flags = Flags::READONLY;
const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE_FAST: Flags = Flags::WRITE.union(Flags::FAST);
const WRITE_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WRITE_OOM_FAST: Flags = WRITE_OOM.union(Flags::FAST);

const ACL_READ_FAST: &[&str] = &["read", "string", "fast"];
const ACL_READ_SLOW: &[&str] = &["read", "string", "slow"];
const ACL_WRITE_FAST: &[&str] = &["write", "string", "fast"];
const ACL_WRITE_SLOW: &[&str] = &["write", "string", "slow"];

const RANGE_COMPLEXITY: &str = "O(N) where N is the length of the returned string. The \
     complexity is ultimately determined by the returned length, but because creating a substring \
     from an existing string is very cheap, it can be considered O(1) for small strings.";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("get", 2, READ_FAST, KeySpec::ONE, |c, a| get(c, a))
        .rtc(|c, a| get(c, a))
        .rtc_storage()
        .acl(ACL_READ_FAST)
        .group("string")
        .doc("Returns the string value of a key.", "1.0.0", "O(1)"),
    CommandSpec::new("set", -3, WRITE_OOM, KeySpec::ONE, set)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "set")
        .event(Class::Generic, "expire")
        .acl(ACL_WRITE_SLOW)
        .group("string")
        .doc(
            "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
            "1.0.0",
            "O(1)",
        ),
    CommandSpec::new("setnx", 3, WRITE_OOM_FAST, KeySpec::ONE, setnx)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "set")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc("Sets the string value of a key only if the key does not exist.", "1.0.0", "O(1)"),
    CommandSpec::new("setex", 4, WRITE_OOM, KeySpec::ONE, setex)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "set")
        .event(Class::Generic, "expire")
        .acl(ACL_WRITE_SLOW)
        .group("string")
        .doc("Sets the string value of a key and its expiry in seconds.", "2.0.0", "O(1)"),
    CommandSpec::new("psetex", 4, WRITE_OOM, KeySpec::ONE, psetex)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "set")
        .event(Class::Generic, "expire")
        .acl(ACL_WRITE_SLOW)
        .group("string")
        .doc("Sets the string value of a key and its expiry in milliseconds.", "2.6.0", "O(1)"),
    CommandSpec::new("mget", -2, READ_FAST, KeySpec::ALL, |c, a| mget(c, a))
        .rtc(|c, a| mget(c, a))
        .rtc_storage()
        .acl(ACL_READ_FAST)
        .group("string")
        .doc(
            "Returns the string values of one or more keys.",
            "1.0.0",
            "O(N) where N is the number of keys to retrieve.",
        ),
    CommandSpec::new("mset", -3, WRITE_OOM, KeySpec::PAIRS, mset)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "set")
        .acl(ACL_WRITE_SLOW)
        .group("string")
        .doc(
            "Sets the string values of one or more keys, atomically.",
            "1.0.1",
            "O(N) where N is the number of keys to set.",
        ),
    CommandSpec::new("msetnx", -3, WRITE_OOM, KeySpec::PAIRS, msetnx)
        .cache(CacheEffect::Update)
        .event(Class::String, "set")
        .acl(ACL_WRITE_SLOW)
        .group("string")
        .doc(
            "Sets the string values of one or more keys, atomically, only if none of them exists.",
            "1.0.1",
            "O(N) where N is the number of keys to set.",
        ),
    CommandSpec::new("getset", 3, WRITE_OOM_FAST, KeySpec::ONE, getset)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "set")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc("Sets the string value of a key and returns its previous value.", "1.0.0", "O(1)"),
    CommandSpec::new("getdel", 2, WRITE_FAST, KeySpec::ONE, getdel)
        .cache(CacheEffect::Invalidate)
        .event(Class::Generic, "del")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc("Returns the string value of a key and deletes the key.", "6.2.0", "O(1)"),
    // GETEX with an option changes only the key's expiry, which the cache entry carries: drop it.
    CommandSpec::new("getex", -2, WRITE_FAST, KeySpec::ONE, getex)
        .cache(CacheEffect::Invalidate)
        .event(Class::Generic, "expire")
        .event(Class::Generic, "persist")
        .event(Class::Generic, "del")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc(
            "Returns the string value of a key and optionally changes its expiry.",
            "6.2.0",
            "O(1)",
        ),
    CommandSpec::new("append", 3, WRITE_OOM_FAST, KeySpec::ONE, append)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "append")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc(
            "Appends a string to the value of a key; creates the key if it doesn't exist.",
            "2.0.0",
            "O(1). The amortized time complexity is O(1) assuming the appended value is small \
             and the already present value is of any size.",
        ),
    CommandSpec::new("strlen", 2, READ_FAST, KeySpec::ONE, |c, a| strlen(c, a))
        .rtc(|c, a| strlen(c, a))
        .rtc_storage()
        .acl(ACL_READ_FAST)
        .group("string")
        .doc("Returns the length of the string value of a key.", "2.2.0", "O(1)"),
    CommandSpec::new("incr", 2, WRITE_OOM_FAST, KeySpec::ONE, incr)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "incrby")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc("Increments the integer value of a key by one.", "1.0.0", "O(1)"),
    CommandSpec::new("decr", 2, WRITE_OOM_FAST, KeySpec::ONE, decr)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "incrby")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc("Decrements the integer value of a key by one.", "1.0.0", "O(1)"),
    CommandSpec::new("incrby", 3, WRITE_OOM_FAST, KeySpec::ONE, incrby)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "incrby")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc("Increments the integer value of a key by a number.", "1.0.0", "O(1)"),
    CommandSpec::new("decrby", 3, WRITE_OOM_FAST, KeySpec::ONE, decrby)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "incrby")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc("Decrements the integer value of a key by a number.", "1.0.0", "O(1)"),
    CommandSpec::new("incrbyfloat", 3, WRITE_OOM_FAST, KeySpec::ONE, incrbyfloat)
        .rtc_write()
        .cache(CacheEffect::Update)
        .event(Class::String, "incrbyfloat")
        .acl(ACL_WRITE_FAST)
        .group("string")
        .doc("Increments the floating point value of a key by a number.", "2.6.0", "O(1)"),
    CommandSpec::new("getrange", 4, READ, KeySpec::ONE, |c, a| getrange(c, a))
        .rtc(|c, a| getrange(c, a))
        .rtc_storage()
        .acl(ACL_READ_SLOW)
        .group("string")
        .doc("Returns a substring of the string value of a key.", "2.4.0", RANGE_COMPLEXITY),
    CommandSpec::new("setrange", 4, WRITE_OOM, KeySpec::ONE, setrange)
        .cache(CacheEffect::Update)
        .event(Class::String, "setrange")
        .acl(ACL_WRITE_SLOW)
        .group("string")
        .doc(
            "Overwrites part of the string value of a key, starting at an offset.",
            "2.2.0",
            "O(1), not counting the time taken to copy the new string in place. Usually, this \
             string is very small so the amortized complexity is O(1). Otherwise, complexity is \
             O(M) with M being the length of the value argument.",
        ),
    CommandSpec::new("substr", 4, READ, KeySpec::ONE, |c, a| getrange(c, a))
        .rtc(|c, a| getrange(c, a))
        .rtc_storage()
        .acl(ACL_READ_SLOW)
        .group("string")
        .doc("Returns a substring of the string value of a key.", "1.0.0", RANGE_COMPLEXITY),
    CommandSpec::new("lcs", -3, READ, KeySpec::TWO, lcs)
        .acl(ACL_READ_SLOW)
        .group("string")
        .doc(
            "Finds the longest common subsequence of two string values.",
            "7.0.0",
            "O(N*M) where N and M are the lengths of s1 and s2, respectively",
        ),
];

// ---- Errors -------------------------------------------------------------------------------

const ERR_TOO_BIG: CmdError =
    CmdError::fixed("string exceeds maximum allowed size (proto-max-bulk-len)");
const ERR_OFFSET: CmdError = CmdError::fixed("offset is out of range");
const ERR_DECR_OVERFLOW: CmdError = CmdError::fixed("decrement would overflow");
const ERR_NAN_OR_INF: CmdError = CmdError::fixed("increment would produce NaN or Infinity");
const ERR_LCS_TYPE: CmdError = CmdError::fixed("The specified keys must contain string values");
const ERR_LCS_IDX_LEN: CmdError =
    CmdError::fixed("If you want both the length and indexes, please just use IDX.");
const ERR_LCS_TOO_LONG: CmdError = CmdError::fixed("String too long for LCS");
const ERR_LCS_MEMORY: CmdError =
    CmdError::fixed("Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");

/// The largest string a command may build (`proto-max-bulk-len`).
fn max_string_len(ctx: &Ctx<'_>) -> u64 {
    ctx.server.config.proto_max_bulk_len.load(Ordering::Relaxed)
}

/// `string-edit-inline-max`: the longest string APPEND and SETRANGE leave inline.
fn edit_inline_max(ctx: &Ctx<'_>) -> u64 {
    ctx.server
        .config
        .string_edit_inline_max
        .load(Ordering::Relaxed)
}

/// The key's record if it is a string (inline, or a segmented bitmap: `Kind::Bitmap`), or
/// WRONGTYPE if it holds another kind.
fn check_string(meta: Option<Meta>) -> Result<Option<Meta>, CmdError> {
    match meta {
        Some(m) if m.kind != Kind::String && m.kind != Kind::Bitmap => Err(CmdError::wrong_type()),
        m => Ok(m),
    }
}

/// The key's string value (a segmented bitmap read whole), or WRONGTYPE if it holds another
/// kind.
fn string_value(
    ctx: &Ctx<'_>,
    key: &[u8],
    meta: Option<Meta>,
) -> Result<Option<Vec<u8>>, CmdError> {
    Ok(match check_string(meta)? {
        None => None,
        Some(m) if m.kind == Kind::Bitmap => Some(ctx.bitmap_string(key, &m)?),
        Some(m) => Some(m.value),
    })
}

/// Adds to `batch` the write that stores meta record `record` under `key`, or deletes the key
/// if the record's expiry has already passed at `now` (SET / GETEX with an elapsed EXAT or
/// PXAT: the key is gone at once, as Redis makes it).
fn put_or_expire(
    batch: &mut Batch,
    storage: &Storage,
    db: u16,
    key: &[u8],
    record: Vec<u8>,
    now: u64,
) {
    if meta_expire_at(&record).is_some_and(|at| at != 0 && at <= now) {
        batch.delete_meta(storage, db, key);
    } else {
        batch.put_meta_record(storage, db, key, record);
    }
}

// ---- GET, SET and its variants --------------------------------------------------------------

fn get<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    ctx.reply_string(&args[1])
}

/// When a SET-family write applies, relative to the key's existence.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Condition {
    #[default]
    Always,
    /// NX: only if the key does not exist.
    IfAbsent,
    /// XX: only if the key exists.
    IfPresent,
}

/// The expiry a write gives its key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Expiry {
    /// No expiry (removes an existing one).
    None,
    /// KEEPTTL: keep the key's current expiry.
    Keep,
    /// Absolute Unix ms.
    At(u64),
}

/// Parses an expiry argument of `command` as Redis does: a positive integer, `unit_ms`
/// milliseconds per unit, relative to `now_ms` unless `absolute`; overflow and non-positive values
/// give "invalid expire time in '<command>' command".
pub fn parse_expiry(
    arg: &[u8],
    unit_ms: u64,
    absolute: bool,
    now_ms: u64,
    command: &str,
) -> Result<u64, CmdError> {
    let n = parse_i64(arg).ok_or(CmdError::not_integer())?;
    let invalid = || CmdError::err(format_args!("invalid expire time in '{command}' command"));
    if n <= 0 {
        return Err(invalid());
    }
    let ms = (n as u64).checked_mul(unit_ms).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now_ms).ok_or_else(invalid)?
    };
    if at > i64::MAX as u64 {
        return Err(invalid());
    }
    Ok(at)
}

/// An expiry option of SET or GETEX: its unit and whether it is absolute.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ExpireUnit {
    /// EX seconds
    Ex,
    /// PX milliseconds
    Px,
    /// EXAT unix-seconds
    ExAt,
    /// PXAT unix-milliseconds
    PxAt,
}

impl ExpireUnit {
    fn from_name(upper: &[u8]) -> Option<ExpireUnit> {
        Some(match upper {
            b"EX" => ExpireUnit::Ex,
            b"PX" => ExpireUnit::Px,
            b"EXAT" => ExpireUnit::ExAt,
            b"PXAT" => ExpireUnit::PxAt,
            _ => return None,
        })
    }

    /// Turns the option's argument into an absolute Unix ms time (see [`parse_expiry`]).
    fn resolve(self, arg: &[u8], now_ms: u64, command: &str) -> Result<u64, CmdError> {
        let (unit_ms, absolute) = match self {
            ExpireUnit::Ex => (1000, false),
            ExpireUnit::Px => (1, false),
            ExpireUnit::ExAt => (1000, true),
            ExpireUnit::PxAt => (1, true),
        };
        parse_expiry(arg, unit_ms, absolute, now_ms, command)
    }
}

/// What SET or GETEX was asked to do with the key's expiry.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
enum TtlOption<'a> {
    /// No option: SET removes the expiry, GETEX leaves it.
    #[default]
    Unset,
    /// KEEPTTL (SET only).
    Keep,
    /// PERSIST (GETEX only).
    Persist,
    /// EX / PX / EXAT / PXAT with its (not yet validated) argument.
    Expire(ExpireUnit, &'a [u8]),
}

impl TtlOption<'_> {
    /// True if `self` and `other` are different options (the mutual-exclusion rule: any two
    /// different expiry options conflict, the same option given twice does not, the last wins).
    fn conflicts_with(self, other: TtlOption<'_>) -> bool {
        match (self, other) {
            (TtlOption::Unset, _) | (_, TtlOption::Unset) => false,
            (TtlOption::Expire(a, _), TtlOption::Expire(b, _)) => a != b,
            (a, b) => std::mem::discriminant(&a) != std::mem::discriminant(&b),
        }
    }
}

/// The options of SET (`NX | XX`, `GET`, `EX | PX | EXAT | PXAT | KEEPTTL`) or GETEX
/// (`EX | PX | EXAT | PXAT | PERSIST`), parsed before anything is looked up: as in Redis, a syntax
/// error wins over every other error, and expiry values are validated later (GETEX on a missing
/// key answers nil even for a bad expiry).
#[derive(Debug, Default)]
struct StringOptions<'a> {
    cond: Condition,
    get: bool,
    ttl: TtlOption<'a>,
}

impl<'a> StringOptions<'a> {
    /// Parses `opts`; `for_set` selects SET's options, otherwise GETEX's.
    fn parse(opts: &'a [bytes::Bytes], for_set: bool) -> Result<StringOptions<'a>, CmdError> {
        let mut o = StringOptions::default();
        let mut i = 0;
        while i < opts.len() {
            let name = opts[i].to_ascii_uppercase();
            let cond = match name.as_slice() {
                b"NX" if for_set => Some(Condition::IfAbsent),
                b"XX" if for_set => Some(Condition::IfPresent),
                _ => None,
            };
            let ttl = match name.as_slice() {
                b"KEEPTTL" if for_set => Some(TtlOption::Keep),
                b"PERSIST" if !for_set => Some(TtlOption::Persist),
                n => match (ExpireUnit::from_name(n), opts.get(i + 1)) {
                    (Some(unit), Some(arg)) => {
                        i += 1;
                        Some(TtlOption::Expire(unit, arg))
                    }
                    _ => None,
                },
            };
            match (cond, ttl) {
                (Some(c), _) if o.cond == Condition::Always || o.cond == c => o.cond = c,
                (None, Some(t)) if !t.conflicts_with(o.ttl) => o.ttl = t,
                (None, None) if for_set && name == b"GET" => o.get = true,
                _ => return Err(CmdError::syntax()),
            }
            i += 1;
        }
        Ok(o)
    }
}

/// The shared body of SET, SETNX, SETEX, PSETEX and GETSET: writes `value` to `key` under
/// `cond` with `expiry` (already validated). Returns whether the write happened and, when
/// `want_old`, the previous string value (WRONGTYPE if the key held another type; the lookup then
/// counts as a keyspace hit or miss, as SET GET's does in Redis). Without `want_old` the key may
/// hold any type and is overwritten.
pub fn set_generic(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    value: &[u8],
    cond: Condition,
    expiry: Expiry,
    want_old: bool,
) -> Result<(bool, Option<Vec<u8>>), CmdError> {
    let storage = ctx.storage();
    let db = ctx.db();
    let _guard = ctx.lock_keys(&[key])?;
    // A plain overwrite needs nothing from the old record: skip the read (half the work of a
    // SET; whatever the key held before, a new meta record replaces it and any collection
    // members it had become stale).
    let blind = cond == Condition::Always && !want_old && expiry != Expiry::Keep;
    let current = if blind {
        None
    } else if want_old {
        ctx.lookup_read(key)?
    } else {
        ctx.lookup_write(key)?
    };
    let exists = current.is_some();
    let expire_at_ms = match expiry {
        Expiry::None => 0,
        Expiry::At(at) => at,
        Expiry::Keep => current.as_ref().map_or(0, |m| m.expire_at_ms),
    };
    let old = if want_old {
        string_value(ctx, key, current)?
    } else {
        None
    };
    let proceed = match cond {
        Condition::Always => true,
        Condition::IfAbsent => !exists,
        Condition::IfPresent => exists,
    };
    if !proceed {
        return Ok((false, old));
    }
    let mut batch = Batch::default();
    let record = encode_string(value, expire_at_ms);
    put_or_expire(&mut batch, storage, db, key, record, ctx.now_ms);
    ctx.commit(batch)?;
    ctx.notify(Class::String, "set", key);
    if let Expiry::At(_) = expiry {
        ctx.notify(Class::Generic, "expire", key);
    }
    Ok((true, old))
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
fn set(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let opts = StringOptions::parse(&args[3..], true)?;
    let expiry = match opts.ttl {
        TtlOption::Unset => Expiry::None,
        TtlOption::Keep => Expiry::Keep,
        TtlOption::Expire(unit, arg) => Expiry::At(unit.resolve(arg, ctx.now_ms, "set")?),
        TtlOption::Persist => unreachable!("PERSIST is not a SET option"),
    };
    let (done, old) = set_generic(ctx, &args[1], &args[2], opts.cond, expiry, opts.get)?;
    if opts.get {
        ctx.out.bulk_or_null(old.as_deref());
    } else if done {
        ctx.out.ok();
    } else {
        ctx.out.null();
    }
    Ok(())
}

/// SETNX key value: 1 if set, 0 if the key existed.
fn setnx(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (done, _) = set_generic(
        ctx,
        &args[1],
        &args[2],
        Condition::IfAbsent,
        Expiry::None,
        false,
    )?;
    ctx.out.int(i64::from(done));
    Ok(())
}

/// The shared body of SETEX and PSETEX: sets the value with an expiry `unit`s from now.
fn setex_generic(ctx: &mut Ctx<'_>, args: &Args, unit: ExpireUnit, name: &str) -> CmdResult {
    let at = unit.resolve(&args[2], ctx.now_ms, name)?;
    set_generic(
        ctx,
        &args[1],
        &args[3],
        Condition::Always,
        Expiry::At(at),
        false,
    )?;
    ctx.out.ok();
    Ok(())
}

/// SETEX key seconds value
fn setex(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setex_generic(ctx, args, ExpireUnit::Ex, "setex")
}

/// PSETEX key milliseconds value
fn psetex(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setex_generic(ctx, args, ExpireUnit::Px, "psetex")
}

/// GETSET key value: sets the value (removing any expiry), replies the old one.
fn getset(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (_, old) = set_generic(
        ctx,
        &args[1],
        &args[2],
        Condition::Always,
        Expiry::None,
        true,
    )?;
    ctx.out.bulk_or_null(old.as_deref());
    Ok(())
}

/// GETDEL key
fn getdel(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let key = &args[1];
    let storage = &ctx.server.storage;
    let db = ctx.db();
    let _guard = storage.lock(db, &[key]);
    let value = string_value(ctx, key, ctx.lookup_read(key)?)?;
    if value.is_some() {
        let mut batch = Batch::default();
        batch.delete_meta(storage, db, key);
        storage.commit(batch)?;
        ctx.notify(Class::Generic, "del", key);
    }
    ctx.out.bulk_or_null(value.as_deref());
    Ok(())
}

/// GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]. Without an option it only reads.
fn getex(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let key = &args[1];
    let opts = StringOptions::parse(&args[2..], false)?;
    if opts.ttl == TtlOption::Unset {
        let value = ctx.read_string(key)?;
        ctx.out.bulk_or_null(value.as_deref());
        return Ok(());
    }
    let storage = &ctx.server.storage;
    let db = ctx.db();
    let _guard = storage.lock(db, &[key]);
    let Some(mut meta) = ctx.lookup_read(key)? else {
        ctx.out.null();
        return Ok(());
    };
    if meta.kind != Kind::String && meta.kind != Kind::Bitmap {
        return Err(CmdError::wrong_type());
    }
    let expire_at_ms = match opts.ttl {
        TtlOption::Persist => 0,
        TtlOption::Expire(unit, arg) => unit.resolve(arg, ctx.now_ms, "getex")?,
        TtlOption::Unset | TtlOption::Keep => unreachable!("handled above / not a GETEX option"),
    };
    let had_expiry = meta.expire_at_ms != 0;
    if expire_at_ms != meta.expire_at_ms {
        meta.expire_at_ms = expire_at_ms;
        let mut batch = Batch::default();
        put_or_expire(&mut batch, storage, db, key, meta.encode(), ctx.now_ms);
        storage.commit(batch)?;
    }
    // Redis's events: EX & co. always "expire" (or "del" when already past), PERSIST only
    // when it removed an expiry.
    if expire_at_ms == 0 {
        if had_expiry {
            ctx.notify(Class::Generic, "persist", key);
        }
    } else if meta.is_expired(ctx.now_ms) {
        ctx.notify(Class::Generic, "del", key);
    } else {
        ctx.notify(Class::Generic, "expire", key);
    }
    let value = match meta.kind {
        Kind::Bitmap => ctx.bitmap_string(key, &meta)?,
        _ => meta.value,
    };
    ctx.out.bulk(&value);
    Ok(())
}

// ---- Multi-key ------------------------------------------------------------------------------

/// MGET key [key ...]: a key that is missing or not a string replies nil. Each value goes
/// into the reply as it is read; a read that fails or misses the hot cache part way leaves
/// the reply to be cut back by the caller (as every command's error reply is).
fn mget<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let keys = &args[1..];
    ctx.out().array(keys.len());
    for key in keys {
        ctx.reply_string_or_null(key)?;
    }
    Ok(())
}

/// The shared body of MSET and MSETNX: sets every key/value pair of `args[1..]` (removing their
/// expiries) in one batch under one lock set, so no reader or writer sees some pairs written and
/// others not. With `only_if_none_exists` (MSETNX) nothing is written if any key exists. Returns
/// whether the pairs were written.
pub fn mset_generic(
    ctx: &mut Ctx<'_>,
    args: &Args,
    only_if_none_exists: bool,
) -> Result<bool, CmdError> {
    if args.len().is_multiple_of(2) {
        let name = if only_if_none_exists {
            "msetnx"
        } else {
            "mset"
        };
        return Err(CmdError::wrong_args(name));
    }
    let pairs = &args[1..];
    let keys: Vec<&[u8]> = pairs.chunks_exact(2).map(|p| &p[0][..]).collect();
    let storage = ctx.storage();
    let db = ctx.db();
    let _guard = ctx.lock_keys(&keys)?;
    if only_if_none_exists {
        for key in &keys {
            if ctx.lookup_write(key)?.is_some() {
                return Ok(false);
            }
        }
    }
    // A key given twice ends with its last value: later puts in a batch win.
    let mut batch = Batch::default();
    for pair in pairs.chunks_exact(2) {
        batch.put_meta(storage, db, &pair[0], &Meta::string(pair[1].to_vec(), 0));
    }
    ctx.commit(batch)?;
    for pair in pairs.chunks_exact(2) {
        ctx.notify(Class::String, "set", &pair[0]);
    }
    Ok(true)
}

/// MSET key value [key value ...]
fn mset(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    mset_generic(ctx, args, false)?;
    ctx.out.ok();
    Ok(())
}

/// MSETNX key value [key value ...]: 1 if all were set, 0 if none was.
fn msetnx(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let done = mset_generic(ctx, args, true)?;
    ctx.out.int(i64::from(done));
    Ok(())
}

// ---- Read-modify-write ----------------------------------------------------------------------

/// The shared body of the read-modify-write commands (APPEND, SETRANGE, INCR, DECR, INCRBY,
/// DECRBY, INCRBYFLOAT): under the key's lock, hands `f` the key's current string value (`None`
/// if absent; WRONGTYPE, without calling `f`, if the key holds another type). `f` returns the
/// new value (or `None` to leave the key untouched) and the caller's result; the new value is
/// committed with the key's current expiry, which these commands keep, and emits keyspace
/// event `event` (string class).
pub fn modify_string<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    event: &'static str,
    f: impl FnOnce(Option<Vec<u8>>) -> Result<(Option<Vec<u8>>, R), CmdError>,
) -> Result<R, CmdError> {
    let storage = ctx.storage();
    let db = ctx.db();
    let _guard = ctx.lock_keys(&[key])?;
    let current = ctx.lookup_write(key)?;
    let expire_at_ms = current.as_ref().map_or(0, |m| m.expire_at_ms);
    let (new, result) = f(string_value(ctx, key, current)?)?;
    if let Some(value) = new {
        let mut batch = Batch::default();
        batch.put_meta(storage, db, key, &Meta::string(value, expire_at_ms));
        ctx.commit(batch)?;
        ctx.notify(Class::String, event, key);
    }
    Ok(result)
}

/// APPEND key value: the new length. A missing key is created, even with an empty value.
fn append(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    write_string_at(ctx, &args[1], "append", &args[2], |len| len)
}

/// SETRANGE key offset value: the new length. Writing nothing (empty value) changes nothing and
/// does not create the key; a gap before `offset` is filled with zero bytes.
fn setrange(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let offset = parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    if offset < 0 {
        return Err(ERR_OFFSET);
    }
    if args[3].is_empty() {
        let _guard = ctx.lock_keys(&[&args[1]])?;
        let len = match check_string(ctx.lookup_write(&args[1])?)? {
            None => 0,
            Some(m) if m.kind == Kind::Bitmap => m.len,
            Some(m) => m.value.len() as u64,
        };
        ctx.out.int(len as i64);
        return Ok(());
    }
    write_string_at(ctx, &args[1], "setrange", &args[3], |_| offset as u64)
}

/// The shared body of APPEND and SETRANGE: writes `data` into `key` at the offset `at` picks
/// from the string's current length (0 if missing; WRONGTYPE checked first, then Redis's size
/// error), filling a gap with zero bytes and keeping the expiry, and replies with the new
/// length. A string it grows past `string-edit-inline-max` is kept in segments, so the write
/// costs the segments it touches (`bitmap::segments::write_bits`).
fn write_string_at(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    event: &'static str,
    data: &[u8],
    at: impl Fn(u64) -> u64,
) -> CmdResult {
    let max = max_string_len(ctx);
    let rule = byte_write(edit_inline_max(ctx));
    let _guard = ctx.lock_keys(&[key])?;
    let spans = |len: u64| {
        let start = at(len);
        let span = start..start.saturating_add(data.len() as u64);
        if span.end > max {
            return Err(ERR_TOO_BIG);
        }
        Ok([span])
    };
    let (len, _) = write_bits(ctx, key, rule, spans, |v, _| {
        let start = at(v.byte_len());
        v.grow_to(start + data.len() as u64);
        v.write_at(start, data);
        v.byte_len()
    })?;
    ctx.notify(Class::String, event, key);
    ctx.out.int(len as i64);
    Ok(())
}

/// The shared body of INCR, DECR, INCRBY and DECRBY: adds `delta` to the integer in `key`
/// (0 if absent) and returns the result. The value must parse as Redis's string2ll does.
pub fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> Result<i64, CmdError> {
    modify_string(ctx, key, "incrby", |old| {
        let current = match old {
            None => 0,
            Some(v) => parse_i64(&v).ok_or(CmdError::not_integer())?,
        };
        let new = current.checked_add(delta).ok_or(CmdError::overflow())?;
        Ok((Some(new.to_string().into_bytes()), new))
    })
}

fn reply_incr(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> CmdResult {
    let n = incr_by(ctx, key, delta)?;
    ctx.out.int(n);
    Ok(())
}

fn parse_increment(arg: &[u8]) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(CmdError::not_integer())
}

fn incr(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    reply_incr(ctx, &args[1], 1)
}

fn decr(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    reply_incr(ctx, &args[1], -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let delta = parse_increment(&args[2])?;
    reply_incr(ctx, &args[1], delta)
}

fn decrby(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let delta = parse_increment(&args[2])?;
    // -i64::MIN does not exist; Redis refuses it before looking at the key.
    let delta = delta.checked_neg().ok_or(ERR_DECR_OVERFLOW)?;
    reply_incr(ctx, &args[1], delta)
}

/// Longest text Redis's string2ld accepts as a number (MAX_LONG_DOUBLE_CHARS).
const MAX_FLOAT_TEXT: usize = 5 * 1024;

/// Parses a value or increment of INCRBYFLOAT as Redis's string2ld does (strtold over the whole
/// text, no leading space, no NaN). Redis parses into a `long double`; kvik uses `f64`, so a
/// text beyond f64's range (`1e400`) is refused as not a valid float where Redis would accept it.
fn parse_float_value(b: &[u8]) -> Result<f64, CmdError> {
    if b.len() >= MAX_FLOAT_TEXT {
        return Err(CmdError::not_float());
    }
    parse_redis_double(b).ok_or(CmdError::not_float())
}

/// INCRBYFLOAT key increment: replies (and stores) the sum as Redis's human-readable decimal
/// text (no exponent, trailing zeros trimmed); a bulk string in RESP3 too, as in Redis.
fn incrbyfloat(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let increment = &args[2];
    let text = modify_string(ctx, &args[1], "incrbyfloat", |old| {
        let current = match old {
            None => 0.0,
            Some(v) => parse_float_value(&v)?,
        };
        let sum = current + parse_float_value(increment)?;
        if !sum.is_finite() {
            return Err(ERR_NAN_OR_INF);
        }
        let text = format_human(sum).into_bytes();
        Ok((Some(text.clone()), text))
    })?;
    ctx.out.bulk(&text);
    Ok(())
}

// ---- Reads ----------------------------------------------------------------------------------

/// STRLEN key: 0 for a missing key.
fn strlen<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    // No byte range: a segmented bitmap's length comes from its meta record alone.
    let len = ctx
        .read_bits(&args[1], Some(&[]))?
        .map_or(0, |v| v.byte_len());
    ctx.out().int(len as i64);
    Ok(())
}

/// The byte range GETRANGE returns for `start..=end` over a string of `len` bytes, with Redis's
/// rules: negative indexes count from the end, both ends are clamped into the string, and an
/// empty range results when start > end (including both negative with start > end).
fn substring_range(len: usize, start: i64, end: i64) -> std::ops::Range<usize> {
    if start < 0 && end < 0 && start > end {
        return 0..0;
    }
    let len = len as i64;
    let from_end = |i: i64| if i < 0 { len + i } else { i };
    let start = from_end(start).max(0);
    let end = from_end(end).max(0).min(len - 1);
    if len == 0 || start > end {
        return 0..0;
    }
    start as usize..end as usize + 1
}

/// GETRANGE key start end, and its older name SUBSTR. The indexes are checked before the key is
/// looked up; a missing key gives the empty string.
fn getrange<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let start = parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    let end = parse_i64(&args[3]).ok_or(CmdError::not_integer())?;
    // A segmented bitmap is read sparse (its stored segments), and only the range is copied.
    let value = ctx.read_bits(&args[1], None)?;
    let range = substring_range(
        value.as_ref().map_or(0, |v| v.byte_len() as usize),
        start,
        end,
    );
    match value {
        Some(BitValue::Inline(bytes)) => ctx.out().bulk(&bytes[range]),
        Some(segments) => {
            let mut bytes = vec![0u8; range.len()];
            segments.read_at(range.start as u64, &mut bytes);
            segments.check()?;
            ctx.out().bulk(&bytes);
        }
        None => ctx.out().bulk(b""),
    }
    Ok(())
}

// ---- LCS ------------------------------------------------------------------------------------

/// One matching run of LCS IDX: inclusive byte ranges in the first and second string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LcsRun {
    a: (u32, u32),
    b: (u32, u32),
}

impl LcsRun {
    fn len(&self) -> u32 {
        self.a.1 - self.a.0 + 1
    }
}

/// The longest common subsequence of `a` and `b`, with its matching runs (from the end of the
/// strings backwards, as Redis lists them) when `want_runs`; runs shorter than `min_run` are
/// left out. Uses the classic (|a|+1) x (|b|+1) table of u32; the caller bounds its size.
fn lcs_compute(a: &[u8], b: &[u8], want_runs: bool, min_run: u64) -> (Vec<u8>, Vec<LcsRun>) {
    let width = b.len() + 1;
    let mut table = vec![0u32; (a.len() + 1) * width];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[i * width + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
        }
    }
    let total = table[a.len() * width + b.len()] as usize;
    let mut seq = vec![0u8; total];
    let mut runs = Vec::new();
    let mut open: Option<LcsRun> = None;
    let (mut i, mut j, mut k) = (a.len(), b.len(), total);
    let keep = |run: LcsRun, runs: &mut Vec<LcsRun>| {
        if want_runs && u64::from(run.len()) >= min_run {
            runs.push(run);
        }
    };
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            k -= 1;
            seq[k] = a[i - 1];
            let (ai, bj) = ((i - 1) as u32, (j - 1) as u32);
            // Walking back diagonally extends the open run; anything else starts a new one.
            open = match open {
                Some(mut r) if r.a.0 == ai + 1 && r.b.0 == bj + 1 => {
                    r.a.0 = ai;
                    r.b.0 = bj;
                    Some(r)
                }
                prev => {
                    if let Some(r) = prev {
                        keep(r, &mut runs);
                    }
                    Some(LcsRun {
                        a: (ai, ai),
                        b: (bj, bj),
                    })
                }
            };
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * width + j] > table[i * width + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if let Some(r) = open.take() {
                keep(r, &mut runs);
            }
        }
    }
    if let Some(r) = open {
        keep(r, &mut runs);
    }
    (seq, runs)
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
fn lcs(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let a = ctx.lookup_read(&args[1])?;
    let b = ctx.lookup_read(&args[2])?;
    let (a, b) = match (
        string_value(ctx, &args[1], a),
        string_value(ctx, &args[2], b),
    ) {
        (Ok(a), Ok(b)) => (a.unwrap_or_default(), b.unwrap_or_default()),
        _ => return Err(ERR_LCS_TYPE),
    };
    let (mut want_len, mut want_idx, mut with_len, mut min_run) = (false, false, false, 0u64);
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"LEN" => want_len = true,
            b"IDX" => want_idx = true,
            b"WITHMATCHLEN" => with_len = true,
            b"MINMATCHLEN" if i + 1 < args.len() => {
                let n = parse_i64(&args[i + 1]).ok_or(CmdError::not_integer())?;
                min_run = n.max(0) as u64;
                i += 1;
            }
            _ => return Err(CmdError::syntax()),
        }
        i += 1;
    }
    if want_len && want_idx {
        return Err(ERR_LCS_IDX_LEN);
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(ERR_LCS_TOO_LONG);
    }
    // Redis 7.0 allocates the table unchecked; this is Redis 7.2's guard, which refuses a table
    // larger than proto-max-bulk-len instead of letting two big strings exhaust memory.
    let table_bytes = (a.len() as u128 + 1) * (b.len() as u128 + 1) * 4;
    if table_bytes > u128::from(max_string_len(ctx)) {
        return Err(ERR_LCS_MEMORY);
    }
    let (seq, runs) = lcs_compute(&a, &b, want_idx, min_run);
    if want_idx {
        ctx.out.map(2);
        ctx.out.bulk(b"matches");
        ctx.out.array(runs.len());
        for run in &runs {
            ctx.out.array(2 + usize::from(with_len));
            for (start, end) in [run.a, run.b] {
                ctx.out.array(2);
                ctx.out.int(i64::from(start));
                ctx.out.int(i64::from(end));
            }
            if with_len {
                ctx.out.int(i64::from(run.len()));
            }
        }
        ctx.out.bulk(b"len");
        ctx.out.int(seq.len() as i64);
    } else if want_len {
        ctx.out.int(seq.len() as i64);
    } else {
        ctx.out.bulk(&seq);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str], for_set: bool) -> Result<StringOptions<'static>, CmdError> {
        let v: Vec<bytes::Bytes> = args
            .iter()
            .map(|s| bytes::Bytes::from(s.to_string()))
            .collect();
        let leaked: &'static [bytes::Bytes] = Box::leak(v.into_boxed_slice());
        StringOptions::parse(leaked, for_set)
    }

    #[test]
    fn set_options_follow_redis_exclusion_rules() {
        assert!(opts(&["NX", "nx"], true).is_ok());
        assert!(opts(&["NX", "XX"], true).is_err());
        assert!(opts(&["get", "GET", "KEEPTTL", "keepttl"], true).is_ok());
        assert!(opts(&["EX", "10", "EX", "20"], true).is_ok());
        assert!(opts(&["EX", "10", "PX", "20"], true).is_err());
        assert!(opts(&["KEEPTTL", "EX", "10"], true).is_err());
        assert!(opts(&["EX"], true).is_err());
        assert!(opts(&["PERSIST"], true).is_err());
        assert!(
            opts(&["EX", "abc"], true).is_ok(),
            "values are validated later"
        );
        let o = opts(&["xx", "get", "pxat", "5"], true).unwrap();
        assert_eq!(o.cond, Condition::IfPresent);
        assert!(o.get);
        assert_eq!(o.ttl, TtlOption::Expire(ExpireUnit::PxAt, b"5"));
    }

    #[test]
    fn getex_options_are_a_subset() {
        assert!(opts(&["PERSIST", "persist"], false).is_ok());
        assert!(opts(&["PERSIST", "EX", "1"], false).is_err());
        for set_only in ["NX", "XX", "GET", "KEEPTTL"] {
            assert!(opts(&[set_only], false).is_err(), "{set_only}");
        }
    }

    #[test]
    fn expiry_validation_matches_redis() {
        let now = 1_000;
        assert_eq!(parse_expiry(b"10", 1000, false, now, "set"), Ok(11_000));
        let invalid = Err(CmdError::err("invalid expire time in 'set' command"));
        assert_eq!(parse_expiry(b"0", 1, true, now, "set"), invalid);
        assert_eq!(parse_expiry(b"-1", 1, false, now, "set"), invalid);
        assert_eq!(
            parse_expiry(b"9223372036854776", 1000, true, now, "set"),
            invalid
        );
        assert_eq!(
            parse_expiry(b"9223372036854775807", 1, false, now, "set"),
            invalid
        );
        assert!(parse_expiry(b"9223372036854775807", 1, true, now, "set").is_ok());
        assert_eq!(
            parse_expiry(b"x", 1, true, now, "set"),
            Err(CmdError::not_integer())
        );
    }

    #[test]
    fn substring_range_matches_redis() {
        let s = b"hello";
        let sub = |a, b| {
            let r = substring_range(s.len(), a, b);
            String::from_utf8(s[r].to_vec()).unwrap()
        };
        assert_eq!(sub(0, -1), "hello");
        assert_eq!(sub(-1, -5), "");
        assert_eq!(sub(-100, -50), "h");
        assert_eq!(sub(5, 2), "");
        assert_eq!(sub(0, -100), "h");
        assert_eq!(sub(-3, -1), "llo");
        assert_eq!(sub(3, 100), "lo");
        assert_eq!(sub(1, -100), "");
        assert_eq!(sub(i64::MIN, i64::MAX), "hello");
        assert_eq!(substring_range(0, 0, -1), 0..0);
    }

    #[test]
    fn lcs_finds_sequence_and_runs() {
        let (seq, runs) = lcs_compute(b"ohmytext", b"mynewtext", true, 0);
        assert_eq!(seq, b"mytext");
        assert_eq!(
            runs,
            vec![
                LcsRun {
                    a: (4, 7),
                    b: (5, 8)
                },
                LcsRun {
                    a: (2, 3),
                    b: (0, 1)
                },
            ]
        );
        let (_, runs) = lcs_compute(b"ohmytext", b"mynewtext", true, 4);
        assert_eq!(runs.len(), 1);
        let (seq, runs) = lcs_compute(b"", b"abc", true, 0);
        assert!(seq.is_empty() && runs.is_empty());
        let (seq, _) = lcs_compute(b"abc", b"abc", false, 0);
        assert_eq!(seq, b"abc");
    }

    #[test]
    fn wrong_type_is_reported_for_other_kinds() {
        let hash = Meta::collection(Kind::Hash, 1, 0);
        assert_eq!(check_string(Some(hash)), Err(CmdError::wrong_type()));
        let s = Meta::string(b"v".to_vec(), 0);
        assert_eq!(check_string(Some(s.clone())), Ok(Some(s)));
        let bitmap = Meta::collection(Kind::Bitmap, 1, 0);
        assert_eq!(check_string(Some(bitmap.clone())), Ok(Some(bitmap)));
        assert_eq!(check_string(None), Ok(None));
    }

    #[test]
    fn float_values_parse_as_redis() {
        assert_eq!(parse_float_value(b"007"), Ok(7.0));
        assert_eq!(parse_float_value(b"0x10"), Ok(16.0));
        assert!(parse_float_value(b" 1").is_err());
        assert!(parse_float_value(b"1 ").is_err());
        assert!(parse_float_value(b"nan").is_err());
        assert!(parse_float_value(&vec![b'1'; MAX_FLOAT_TEXT]).is_err());
        assert_eq!(format_human(10.5 + 0.1), "10.6");
    }
}
